//! Random (message, key, signature) triples, valid and tampered, must get aws-lc's verdict from both of our paths
//! (first sighting through aws-lc, then the key's table). CI runs a few thousand cases; the full run is
//! `PROPTEST_CASES=1000000 cargo test --release -p ferrofabric-ecdsa --test integration agreement`.

use std::sync::OnceLock;

use aws_lc_rs::signature::{ParsedPublicKey, ECDSA_P256_SHA256_FIXED};
use ferrofabric_ecdsa::{verify_batch, BatchItem, Signature, TableCache, VerifyingKey};
use p256::ecdsa::signature::Signer;
use proptest::prelude::*;

/// Keys whose tables stay cached for the whole run, so most cases exercise the table path.
const KEYS: usize = 8;

struct Fixture {
    signers: Vec<p256::ecdsa::SigningKey>,
    keys: Vec<VerifyingKey>,
    cache: TableCache,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let signers: Vec<_> =
            (1..=KEYS as u8).map(|i| p256::ecdsa::SigningKey::from_slice(&[i; 32]).expect("scalar")).collect();
        let keys: Vec<_> = signers.iter().map(key_of).collect();
        let cache = TableCache::new(KEYS);
        for k in &keys {
            // Two sightings admit a key.
            for _ in 0..2 {
                k.verify_with(&cache, b"", &Signature::from_scalars(&[1], &[1]).expect("range"));
            }
        }
        assert_eq!(cache.len(), KEYS);
        Fixture { signers, keys, cache }
    })
}

fn key_of(sk: &p256::ecdsa::SigningKey) -> VerifyingKey {
    VerifyingKey::from_sec1(sk.verifying_key().to_encoded_point(false).as_bytes()).expect("valid key")
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(3000)
}

/// How a valid signature is altered before verification.
#[derive(Debug, Clone, Copy)]
enum Tamper {
    None,
    MessageBit(usize),
    RBit(usize),
    SBit(usize),
    OtherKey,
    /// n − s: still valid ECDSA (Fabric's low-S rule is the MSP's, not this crate's).
    HighS,
    /// A random (r, s) pair unrelated to the message.
    Garbage([u8; 32], [u8; 32]),
}

fn tamper() -> impl Strategy<Value = Tamper> {
    prop_oneof![
        3 => Just(Tamper::None),
        1 => any::<usize>().prop_map(Tamper::MessageBit),
        1 => (0usize..256).prop_map(Tamper::RBit),
        1 => (0usize..256).prop_map(Tamper::SBit),
        1 => Just(Tamper::OtherKey),
        1 => Just(Tamper::HighS),
        1 => (any::<[u8; 32]>(), any::<[u8; 32]>()).prop_map(|(r, s)| Tamper::Garbage(r, s)),
    ]
}

/// n − s for a big-endian 32-byte s in [1, n).
fn negate_scalar(s: &[u8; 32]) -> [u8; 32] {
    let n = hex::decode("ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551").expect("hex");
    let mut out = [0u8; 32];
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let mut v = i16::from(n[i]) - i16::from(s[i]) - borrow;
        borrow = i16::from(v < 0);
        if v < 0 {
            v += 256;
        }
        out[i] = v as u8;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn verdicts_agree_with_aws_lc(
        signer in 0..KEYS,
        msg in proptest::collection::vec(any::<u8>(), 0..300),
        how in tamper(),
    ) {
        let f = fixture();
        let sig: p256::ecdsa::Signature = f.signers[signer].sign(&msg);
        let mut fixed: [u8; 64] = sig.to_bytes().into();
        let mut msg = msg;
        let mut key = &f.keys[signer];
        match how {
            Tamper::None => {}
            Tamper::MessageBit(i) => {
                if msg.is_empty() { msg.push(0) } else { let at = i % msg.len(); msg[at] ^= 1 << (i % 8) }
            }
            Tamper::RBit(i) => fixed[i / 8] ^= 1 << (i % 8),
            Tamper::SBit(i) => fixed[32 + i / 8] ^= 1 << (i % 8),
            Tamper::OtherKey => key = &f.keys[(signer + 1) % KEYS],
            Tamper::HighS => {
                let s: [u8; 32] = fixed[32..].try_into().expect("32");
                fixed[32..].copy_from_slice(&negate_scalar(&s));
            }
            Tamper::Garbage(r, s) => { fixed[..32].copy_from_slice(&r); fixed[32..].copy_from_slice(&s); }
        }
        let aws = ParsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.sec1_bytes()).expect("key");
        let want = aws.verify_sig(&msg, &fixed).is_ok();
        let got = match Signature::from_scalars(&fixed[..32], &fixed[32..]) {
            // Out of range: aws-lc refuses these too.
            None => false,
            Some(ours) => {
                let tabled = key.verify_with(&f.cache, &msg, &ours);
                let batched = verify_batch(&f.cache, &[BatchItem { key, msg: &msg, sig: &ours }])[0];
                prop_assert_eq!(tabled, batched);
                tabled
            }
        };
        prop_assert_eq!(got, want, "{:?}", how);
        if matches!(how, Tamper::None | Tamper::HighS) {
            prop_assert!(got);
        }
    }
}

#[test]
fn batch_verdicts_equal_single_verdicts_and_uncached_keys_use_aws_lc() {
    let f = fixture();
    let stranger = p256::ecdsa::SigningKey::from_slice(&[0x77; 32]).expect("scalar");
    let stranger_key = key_of(&stranger);
    let msgs: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 100 + usize::from(i)]).collect();
    let sigs: Vec<Signature> = msgs
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let signer = if i % 5 == 0 { &stranger } else { &f.signers[i % KEYS] };
            let s: p256::ecdsa::Signature = signer.sign(m);
            let (r, s) = s.split_bytes();
            Signature::from_scalars(&r, &s).expect("range")
        })
        .collect();
    let items: Vec<BatchItem<'_>> = msgs
        .iter()
        .zip(&sigs)
        .enumerate()
        .map(|(i, (m, sig))| {
            let key = if i % 5 == 0 { &stranger_key } else { &f.keys[i % KEYS] };
            // Every seventh item is checked against the wrong message.
            let msg: &[u8] = if i % 7 == 3 { &msgs[(i + 1) % msgs.len()] } else { m };
            BatchItem { key, msg, sig }
        })
        .collect();
    let cache = TableCache::new(0);
    let single: Vec<bool> = items.iter().map(|it| it.key.verify_with(&cache, it.msg, it.sig)).collect();
    assert_eq!(verify_batch(&f.cache, &items), single);
    assert_eq!(single.iter().filter(|v| !**v).count(), (0..40).filter(|i| i % 7 == 3).count());
}
