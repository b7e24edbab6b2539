//! The two signers of `SigningIdentity`: the fast one (aws-lc, random nonces) and the deterministic one (RFC 6979)
//! both produce low-S DER signatures that verify under the certificate's key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use ferrofabric_msp::SigningIdentity;

fn user1() -> SigningIdentity {
    let dir = support::org1_dir().join("users/User1@org1.example.com/msp");
    SigningIdentity::from_msp_dir("Org1MSP", &dir).expect("User1 signing identity")
}

/// S of a DER ECDSA signature, without leading zero bytes.
fn s_of(der: &[u8]) -> Vec<u8> {
    let r_len = der[3] as usize;
    let s_at = 4 + r_len;
    let s_len = der[s_at + 1] as usize;
    let s = &der[s_at + 2..s_at + 2 + s_len];
    s.iter().skip_while(|b| **b == 0).copied().collect()
}

const HALF_N: [u8; 32] = [
    0x7f, 0xff, 0xff, 0xff, 0x80, 0x00, 0x00, 0x00, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xde, 0x73, 0x7d,
    0x56, 0xd3, 0x8b, 0xcf, 0x42, 0x79, 0xdc, 0xe5, 0x61, 0x7e, 0x31, 0x92, 0xa8,
];

fn is_low_s(der: &[u8]) -> bool {
    let s = s_of(der);
    s.len() < 32 || s.as_slice() <= &HALF_N[..]
}

#[test]
fn fast_signatures_verify_and_are_always_low_s() {
    let id = user1();
    // 200 random nonces: about half of the raw signatures are high-S before normalisation.
    for i in 0..200u32 {
        let msg = format!("message {i}");
        let sig = id.sign(msg.as_bytes());
        assert!(is_low_s(&sig), "high S in {}", hex::encode(&sig));
        id.public_key().verify(msg.as_bytes(), &sig).expect("fast signature verifies");
    }
}

#[test]
fn deterministic_signatures_repeat_verify_and_are_low_s() {
    let id = user1();
    let a = id.sign_deterministic(b"payload");
    assert_eq!(a, id.sign_deterministic(b"payload"));
    assert!(is_low_s(&a));
    id.public_key().verify(b"payload", &a).expect("deterministic signature verifies");
    assert!(id.public_key().verify(b"other payload", &a).is_err());
}
