//! Hostile input never panics: random and mutated bytes through
//! `deserialize_identity`, `verify` and `satisfies_principal`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;

use crate::support::*;
use bytes::Bytes;
use ferrofabric_msp::{Identity, MspManager, PublicKey, SigningIdentity};
use ferrofabric_protos::common::MspPrincipal;
use proptest::prelude::*;

struct Fixture {
    mgr: MspManager,
    user: Vec<u8>,
    user_id: std::sync::Arc<Identity>,
    signer: SigningIdentity,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let mgr = genesis_manager();
        let user = serialized("Org1MSP", &signcert(&org1_dir().join("users/User1@org1.example.com/msp")));
        let user_id = mgr.deserialize_identity(&user).unwrap();
        let signer =
            SigningIdentity::from_msp_dir("Org1MSP", &org1_dir().join("users/User1@org1.example.com/msp")).unwrap();
        Fixture { mgr, user, user_id, signer }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let f = fixture();
        let _ = f.mgr.deserialize_identity(&bytes);
        let _ = f.user_id.verify(b"msg", &bytes);
        let _ = PublicKey::from_sec1(&bytes);
        let _ = f.mgr.satisfies_principal(&f.user_id, &MspPrincipal {
            principal_classification: i32::from(bytes.first().copied().unwrap_or(0) % 6),
            principal: Bytes::from(bytes.clone()),
        });
    }

    #[test]
    fn truncated_serialized_identity_never_panics(cut in 0usize..2000) {
        let f = fixture();
        let cut = cut.min(f.user.len());
        let _ = f.mgr.deserialize_identity(&f.user[..cut]);
    }

    #[test]
    fn mutated_certificate_never_panics(pos in 0usize..2000, val in any::<u8>(), cut in 0usize..2000) {
        let f = fixture();
        let pem_text = signcert(&org1_dir().join("users/User1@org1.example.com/msp"));
        let mut der = pem_der(&pem_text);
        let p = pos % der.len();
        der[p] = val;
        der.truncate(cut.max(1).min(der.len()));
        let bytes = serialized("Org1MSP", &pem("CERTIFICATE", &der));
        if let Ok(id) = f.mgr.deserialize_identity(&bytes) {
            let _ = id.validate();
            let _ = id.verify(b"msg", &[0x30, 0x00]);
        }
    }

    #[test]
    fn single_byte_mutation_of_a_valid_signature_never_verifies(pos in 0usize..80, val in any::<u8>()) {
        let f = fixture();
        let sig = f.signer.sign(b"msg");
        prop_assert!(f.user_id.verify(b"msg", &sig).is_ok());
        let mut bad = sig.clone();
        let p = pos % bad.len();
        prop_assume!(bad[p] != val);
        bad[p] = val;
        prop_assert!(f.user_id.verify(b"msg", &bad).is_err());
    }
}
