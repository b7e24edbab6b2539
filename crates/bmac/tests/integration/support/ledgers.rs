//! Synthetic ledgers over a generated network (ferrofabric-testkit) with every defect the hardware must
//! classify: MVCC conflicts (in-block and stale), phantom reads, bad creator and endorser signatures, policy
//! failures, duplicate txids (in the block and in the ledger), and a chaincode with an OR policy.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;

use bytes::Bytes;
use ferrofabric_protos::common::{
    msp_principal, msp_role, signature_policy, Block, MspPrincipal, MspRole, SignaturePolicy, SignaturePolicyEnvelope,
};
use ferrofabric_protos::peer::{application_policy, ApplicationPolicy};
use ferrofabric_state::StateKey;
use ferrofabric_testkit::{
    channel_policy_reference, define_chaincode, Chain, Network, TxBuilder, DEFAULT_ENDORSEMENT_POLICY,
};
use ferrofabric_validator::{Validator, ValidatorOptions};
use prost::Message;

/// One network per test binary.
pub(crate) fn network() -> &'static Network {
    static NET: OnceLock<Network> = OnceLock::new();
    NET.get_or_init(|| Network::generate(7).unwrap())
}

/// A ledger: the genesis block and the following blocks, marshaled.
pub(crate) struct Ledger {
    pub genesis: Bytes,
    pub blocks: Vec<Bytes>,
}

fn bytes_of(b: &Block) -> Bytes {
    Bytes::from(b.encode_to_vec())
}

/// `OR('Org1MSP.peer', 'Org2MSP.peer')` as an ApplicationPolicy.
pub(crate) fn any_peer_policy(net: &Network) -> ApplicationPolicy {
    let role = |org: usize| MspPrincipal {
        principal_classification: msp_principal::Classification::Role as i32,
        principal: Bytes::from(
            MspRole { msp_identifier: net.mspid(org).to_string(), role: msp_role::MspRoleType::Peer as i32 }
                .encode_to_vec(),
        ),
    };
    let signed_by = |i| SignaturePolicy { r#type: Some(signature_policy::Type::SignedBy(i)) };
    let env = SignaturePolicyEnvelope {
        version: 0,
        rule: Some(SignaturePolicy {
            r#type: Some(signature_policy::Type::NOutOf(signature_policy::NOutOf {
                n: 1,
                rules: vec![signed_by(0), signed_by(1)],
            })),
        }),
        identities: vec![role(0), role(1)],
    };
    ApplicationPolicy { r#type: Some(application_policy::Type::SignaturePolicy(env)) }
}

const T: &str = "transfer";
const A: &str = "anyorg";

fn tx<'a>(net: &'a Network, cc: &str) -> TxBuilder<'a> {
    TxBuilder::new(net).chaincode(cc, "1.0")
}

/// The mixed-defects ledger (see the module docs); block numbers and the expected codes are in the comments.
pub(crate) fn mixed_ledger() -> &'static Ledger {
    static L: OnceLock<Ledger> = OnceLock::new();
    L.get_or_init(|| {
        let net = network();
        let mut chain = Chain::with_seed(net, 11).unwrap();
        // 1, 2: chaincode definitions (host path: lifecycle).
        chain.append(&[define_chaincode(net, T, 1, channel_policy_reference(DEFAULT_ENDORSEMENT_POLICY))
            .unwrap()
            .envelope]);
        chain.append(&[define_chaincode(net, A, 1, any_peer_policy(net)).unwrap().envelope]);
        // 3: blind writes: k0..k19 in txs 0..3 (5 each), a0..a3 and r1, r3 in tx 4.
        let mut envs = Vec::new();
        for t in 0..4 {
            let mut b = tx(net, T);
            for i in 5 * t..5 * t + 5 {
                b = b.write(T, &format!("k{i}"), format!("v{i}"));
            }
            envs.push(b.build().unwrap().envelope);
        }
        let mut b = tx(net, A);
        for k in ["a0", "a1", "a2", "a3"] {
            b = b.write(A, k, "x");
        }
        envs.push(b.build().unwrap().envelope);
        let mut b = tx(net, T);
        for k in ["r1", "r3"] {
            b = b.write(T, k, "r");
        }
        envs.push(b.build().unwrap().envelope);
        chain.append(&envs);
        let v = |i: usize| Some((3, (i / 5) as u64));
        // 4: signatures, policies, MVCC, duplicates.
        let dup_nonce = Bytes::from_static(b"nonce-for-the-duplicated-txid");
        let first = tx(net, T).read(T, "k0", v(0)).read(T, "k1", v(1)).write(T, "k0", "1").write(T, "k1", "2");
        let first = first.build().unwrap();
        let twin_bad = tx(net, T).nonce(dup_nonce.clone()).write(T, "k10", "x").corrupt_endorsement(0).build().unwrap();
        let twin_good = tx(net, T).nonce(dup_nonce).write(T, "k11", "y").build().unwrap();
        let b4 = vec![
            first.envelope.clone(),                                                               // VALID
            tx(net, T).read(T, "k0", v(0)).write(T, "k2", "3").build().unwrap().envelope,         // MVCC (in block)
            tx(net, T).read(T, "k5", Some((2, 9))).write(T, "k6", "4").build().unwrap().envelope, // MVCC (stale)
            tx(net, T).write(T, "k7", "5").corrupt_creator_signature().build().unwrap().envelope, // BAD_CREATOR_SIGNATURE
            tx(net, T).write(T, "k8", "6").corrupt_endorsement(1).build().unwrap().envelope,      // EPF
            tx(net, T).write(T, "k8", "7").endorsers(&[net.peer(0)]).build().unwrap().envelope,   // EPF
            tx(net, T).write(T, "k8", "8").endorsers(&[net.client(0), net.client(1)]).build().unwrap().envelope, // EPF
            tx(net, A).write(A, "a0", "9").endorsers(&[net.peer(1)]).build().unwrap().envelope,   // VALID (OR)
            tx(net, A).write(A, "a1", "10").corrupt_endorsement(0).build().unwrap().envelope,     // VALID (peer1)
            tx(net, T).read(T, "zz", None).write(T, "k19", "11").build().unwrap().envelope,       // VALID
            tx(net, T).read(T, "zy", Some((3, 0))).write(T, "k18", "12").build().unwrap().envelope, // MVCC (absent)
            tx(net, T).write(T, "k17", "13").tx_id("not-the-txid").build().unwrap().envelope,     // BAD_PROPOSAL_TXID
            twin_bad.envelope,                                                                    // EPF
            twin_good.envelope.clone(),                                                           // VALID
            twin_good.envelope,                                                                   // DUPLICATE_TXID
            tx(net, T).delete(T, "k3").build().unwrap().envelope,                                 // VALID
            tx(net, T).write(T, "k4", "w").write(T, "k4b", "w").delete(T, "k4").build().unwrap().envelope, // VALID
        ];
        chain.append(&b4);
        // 5: range queries and a ledger duplicate.
        fn r(k: &str) -> (&str, Option<(u64, u64)>) {
            (k, Some((3, 5)))
        }
        let b5 = vec![
            tx(net, T).write(T, "r2", "new").build().unwrap().envelope, // VALID
            tx(net, T)
                .range_query(T, "r1", "r9", true, &[r("r1"), r("r3")])
                .write(T, "q1", "x")
                .build()
                .unwrap()
                .envelope, // PHANTOM (r2 put)
            tx(net, T).delete(T, "r3").build().unwrap().envelope,       // VALID
            tx(net, T).range_query(T, "s0", "s9", true, &[]).write(T, "q2", "x").build().unwrap().envelope, // VALID
            first.envelope,                                             // DUPLICATE_TXID (ledger)
            tx(net, T).range_query(T, "r1", "r3", false, &[r("r1")]).write(T, "q3", "x").build().unwrap().envelope, // PHANTOM (end key r3 deleted)
            tx(net, T).read(T, "k1", Some((4, 0))).write(T, "q4", "x").build().unwrap().envelope, // VALID
            tx(net, T).range_query(T, "t0", "t9", true, &[]).write(T, "t5", "x").build().unwrap().envelope, // VALID
        ];
        chain.append(&b5);
        // 6: static phantoms, MVCC order between a phantom and a read conflict, deleted keys.
        let b6 = vec![
            tx(net, T)
                .range_query(T, "k0", "k1", true, &[("k0", Some((3, 0)))])
                .write(T, "q5", "x")
                .build()
                .unwrap()
                .envelope, // PHANTOM (k0 at 4:0)
            tx(net, T)
                .read(T, "k1", Some((3, 0)))
                .range_query(T, "k0", "k1", true, &[])
                .write(T, "q6", "x")
                .build()
                .unwrap()
                .envelope, // MVCC (read first)
            tx(net, T)
                .range_query(A, "a0", "a9", true, &[])
                .read(T, "k1", Some((3, 0)))
                .write(T, "q7", "x")
                .build()
                .unwrap()
                .envelope, // PHANTOM (anyorg ns first)
            tx(net, T).read(T, "k3", None).write(T, "q8", "x").build().unwrap().envelope, // VALID (k3 deleted)
            tx(net, T).read(T, "k3", Some((3, 0))).write(T, "q9", "x").build().unwrap().envelope, // MVCC
            tx(net, T)
                .range_query(T, "r1", "r9", true, &[("r1", Some((3, 5))), ("r2", Some((5, 0)))])
                .write(T, "q10", "x")
                .build()
                .unwrap()
                .envelope, // VALID
        ];
        chain.append(&b6);
        let blocks = chain.into_blocks();
        Ledger { genesis: bytes_of(&blocks[0]), blocks: blocks[1..].iter().map(bytes_of).collect() }
    })
}

/// A ledger of random transfers with conflicts and bad signatures: `n_keys` accounts created in block 2, then
/// `n_blocks` blocks of `size` transfers, each reading two random accounts at their version before the block
/// (so transfers that share an account conflict), with about 1 in 12 creator and 1 in 10 endorsement
/// signatures corrupted. Versions come from a software validator run alongside.
pub(crate) fn random_ledger(seed: u64, n_keys: usize, n_blocks: usize, size: usize) -> Ledger {
    let net = network();
    let mut chain = Chain::with_seed(net, seed).unwrap();
    chain
        .append(&[define_chaincode(net, T, 1, channel_policy_reference(DEFAULT_ENDORSEMENT_POLICY)).unwrap().envelope]);
    let mut envs = Vec::new();
    for chunk in (0..n_keys).collect::<Vec<_>>().chunks(8) {
        let mut b = tx(net, T);
        for i in chunk {
            b = b.write(T, &format!("acct{i:04}"), "100");
        }
        envs.push(b.build().unwrap().envelope);
    }
    chain.append(&envs);
    let blocks0: Vec<Bytes> = chain.blocks().iter().map(bytes_of).collect();
    let mut validator = Validator::new(blocks0[0].clone(), ValidatorOptions { threads: 1 }).unwrap();
    for b in &blocks0[1..] {
        validator.commit_block(b.clone()).unwrap();
    }
    let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..n_blocks {
        let mut envs = Vec::with_capacity(size);
        for _ in 0..size {
            let a = (next() % n_keys as u64) as usize;
            let b = (a + 1 + (next() % (n_keys as u64 - 1)) as usize) % n_keys;
            let (ka, kb) = (format!("acct{a:04}"), format!("acct{b:04}"));
            let view = validator.state().view();
            let ver = |k: &str| {
                view.version(&StateKey::public(T, Bytes::copy_from_slice(k.as_bytes())))
                    .map(|h| (h.block_num, h.tx_num))
            };
            let (va, vb) = (ver(&ka), ver(&kb));
            drop(view);
            let mut t = tx(net, T).read(T, &ka, va).read(T, &kb, vb).write(T, &ka, "x").write(T, &kb, "y");
            let roll = next() % 120;
            if roll < 10 {
                t = t.corrupt_creator_signature();
            } else if roll < 22 {
                t = t.corrupt_endorsement((roll % 2) as usize);
            }
            envs.push(t.build().unwrap().envelope);
        }
        let block = chain.append(&envs);
        validator.commit_block(bytes_of(block)).unwrap();
    }
    let blocks = chain.into_blocks();
    Ledger { genesis: bytes_of(&blocks[0]), blocks: blocks[1..].iter().map(bytes_of).collect() }
}

/// testkit's [`ferrofabric_testkit::endorsement_ledger`] over a generated network of `peer_orgs` peer orgs
/// (`Network::generate_orgs`, a configtxgen genesis block).
pub(crate) fn multi_org_ledger(
    peer_orgs: usize,
    chaincodes: &[(&str, Option<&str>)],
    endorsements: &[&[usize]],
    blocks: usize,
    per_block: usize,
) -> Ledger {
    let net = Network::generate_orgs(40 + peer_orgs as u64, peer_orgs).unwrap();
    let blocks = ferrofabric_testkit::endorsement_ledger(&net, chaincodes, endorsements, blocks, per_block).unwrap();
    Ledger { genesis: bytes_of(&blocks[0]), blocks: blocks[1..].iter().map(bytes_of).collect() }
}
