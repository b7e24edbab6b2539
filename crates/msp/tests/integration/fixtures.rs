//! MSP behaviour on the real Fabric 2.5.16 fixture network.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use bytes::Bytes;
use ferrofabric_msp::{Msp, MspError, SigningIdentity};
use ferrofabric_protos::common::msp_identity_anonymity::MspIdentityAnonymityType;
use ferrofabric_protos::common::msp_principal::Classification;
use ferrofabric_protos::common::msp_role::MspRoleType;
use ferrofabric_protos::common::{
    CombinedPrincipal, Envelope, Header, MspIdentityAnonymity, MspPrincipal, MspRole, OrganizationUnit, Payload,
    SignatureHeader,
};
use ferrofabric_protos::msp::MspConfig;
use ferrofabric_protos::peer::{ChaincodeActionPayload, Transaction};
use prost::Message;

fn role(mspid: &str, role: MspRoleType) -> MspPrincipal {
    MspPrincipal {
        principal_classification: Classification::Role as i32,
        principal: Bytes::from(MspRole { msp_identifier: mspid.into(), role: role as i32 }.encode_to_vec()),
    }
}

fn user1() -> Vec<u8> {
    serialized("Org1MSP", &signcert(&org1_dir().join("users/User1@org1.example.com/msp")))
}

fn peer0() -> Vec<u8> {
    serialized("Org1MSP", &signcert(&org1_dir().join("peers/peer0.org1.example.com/msp")))
}

fn admin1() -> Vec<u8> {
    serialized("Org1MSP", &signcert(&org1_dir().join("users/Admin@org1.example.com/msp")))
}

fn orderer() -> Vec<u8> {
    serialized("OrdererMSP", &signcert(&orderer_org_dir().join("orderers/orderer.example.com/msp")))
}

fn user2() -> Vec<u8> {
    serialized("Org2MSP", &signcert(&org2_dir().join("users/User1@org2.example.com/msp")))
}

/// (signed bytes, identity bytes, signature) of a transaction's creator and
/// of each of its endorsements.
struct TxSigs {
    creator: (Vec<u8>, Bytes, Bytes),
    endorsements: Vec<(Vec<u8>, Bytes, Bytes)>,
}

fn tx_sigs(env_bytes: &Bytes) -> TxSigs {
    let env = Envelope::decode(env_bytes.clone()).unwrap();
    let payload = Payload::decode(env.payload.clone()).unwrap();
    let header: Header = payload.header.unwrap();
    let sh = SignatureHeader::decode(header.signature_header).unwrap();
    let mut endorsements = Vec::new();
    if let Ok(tx) = Transaction::decode(payload.data.clone()) {
        for action in tx.actions {
            if let Ok(cap) = ChaincodeActionPayload::decode(action.payload) {
                if let Some(ea) = cap.action {
                    for e in ea.endorsements {
                        let mut signed = ea.proposal_response_payload.to_vec();
                        signed.extend_from_slice(&e.endorser);
                        endorsements.push((signed, e.endorser, e.signature));
                    }
                }
            }
        }
    }
    TxSigs { creator: (env.payload.to_vec(), sh.creator, env.signature), endorsements }
}

#[test]
fn genesis_block_msps_set_up_and_match_msp_folders() {
    let configs = genesis_msp_configs();
    let names: Vec<_> = configs.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, ["Application/Org1MSP", "Application/Org2MSP", "Orderer/OrdererOrg"]);
    let from_block = genesis_manager();
    let from_dirs = dir_manager();
    for mspid in ["Org1MSP", "Org2MSP", "OrdererMSP"] {
        assert_eq!(from_block.msp(mspid).unwrap().name(), mspid);
    }
    for id in [user1(), peer0(), admin1(), orderer(), user2()] {
        let a = from_block.deserialize_identity(&id).unwrap();
        let b = from_dirs.deserialize_identity(&id).unwrap();
        assert_eq!(a.identifier(), b.identifier());
        assert_eq!(a.organizational_units(), b.organizational_units());
        a.validate().unwrap();
        b.validate().unwrap();
    }
}

#[test]
fn verifies_every_creator_and_endorsement_signature_of_full_blocks() {
    let mgr = genesis_manager();
    let blocks = orderer_blocks();
    let mut creators = 0;
    let mut endorsements = 0;
    for block in &blocks[9..=12] {
        for env in &block.data.as_ref().unwrap().data {
            let sigs = tx_sigs(env);
            let (msg, creator, sig) = &sigs.creator;
            let id = mgr.deserialize_identity(creator).unwrap();
            id.validate().unwrap();
            id.verify(msg, sig).unwrap();
            creators += 1;
            for (msg, endorser, sig) in &sigs.endorsements {
                let id = mgr.deserialize_identity(endorser).unwrap();
                id.validate().unwrap();
                id.verify(msg, sig).unwrap();
                endorsements += 1;
            }
        }
    }
    assert_eq!(creators, 100 + 100 + 37 + 64);
    assert_eq!(endorsements, 2 * creators);
    // Three distinct identities: User1 (creator), peer0 of each org.
    assert_eq!(mgr.cached_identities(), 3);
}

#[test]
fn altered_endorsement_signature_of_block_18_is_rejected() {
    let mgr = genesis_manager();
    let blocks = orderer_blocks();
    let sigs = tx_sigs(&blocks[18].data.as_ref().unwrap().data[5]);
    let (msg, creator, sig) = &sigs.creator;
    mgr.deserialize_identity(creator).unwrap().verify(msg, sig).unwrap();
    let (msg, endorser, sig) = &sigs.endorsements[0];
    let err = mgr.deserialize_identity(endorser).unwrap().verify(msg, sig).unwrap_err();
    assert_eq!(err, MspError::InvalidSignature);
    let (msg, endorser, sig) = &sigs.endorsements[1];
    mgr.deserialize_identity(endorser).unwrap().verify(msg, sig).unwrap();
}

/// A valid creator signature from the ledger: (identity, msg, sig).
fn ledger_signature() -> (std::sync::Arc<ferrofabric_msp::Identity>, Vec<u8>, Vec<u8>) {
    let mgr = genesis_manager();
    let blocks = orderer_blocks();
    let sigs = tx_sigs(&blocks[9].data.as_ref().unwrap().data[0]);
    let (msg, creator, sig) = sigs.creator;
    (mgr.deserialize_identity(&creator).unwrap(), msg, sig.to_vec())
}

#[test]
fn high_s_variant_of_a_valid_signature_is_rejected() {
    let (id, msg, sig) = ledger_signature();
    let (r, s) = ecdsa_parts(&sig);
    assert!(!is_high_s(&s));
    id.verify(&msg, &ecdsa_der(&r, &s)).unwrap();
    let high = ecdsa_der(&r, &n_minus(&s));
    assert_eq!(id.verify(&msg, &high), Err(MspError::HighS));
    // The same signature is valid ECDSA apart from the low-S rule.
    let point = id.public_key().sec1_bytes();
    ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_ASN1, &point[..])
        .verify(&msg, &high)
        .unwrap();
}

#[test]
fn malformed_and_wrong_signatures_are_rejected() {
    let (id, msg, sig) = ledger_signature();
    let (r, s) = ecdsa_parts(&sig);
    let zero = [0u8];
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("r = 0", ecdsa_der(&zero, &s)),
        ("s = 0", ecdsa_der(&r, &zero)),
        ("s = n", ecdsa_der(&r, &P256_N)),
        ("r = n", ecdsa_der(&P256_N, &s)),
        ("r > n", ecdsa_der(&[0xff; 32], &s)),
        ("truncated", sig[..sig.len() - 1].to_vec()),
        ("header only", sig[..2].to_vec()),
        ("empty", Vec::new()),
        ("flipped byte", {
            let mut v = sig.clone();
            let last = v.len() - 1;
            v[last] ^= 1;
            v
        }),
    ];
    for (what, der) in bad {
        assert!(id.verify(&msg, &der).is_err(), "{what} accepted");
    }
    // Go's asn1.Unmarshal ignores trailing bytes: Fabric accepts this.
    let mut trailing = sig.clone();
    trailing.extend_from_slice(&[0, 1, 2]);
    id.verify(&msg, &trailing).unwrap();
    // A valid signature by another key (Org2 User1) does not verify.
    let other = SigningIdentity::from_msp_dir("Org2MSP", &org2_dir().join("users/User1@org2.example.com/msp")).unwrap();
    assert_eq!(id.verify(&msg, &other.sign(&msg)), Err(MspError::InvalidSignature));
    // And a different message does not verify.
    assert_eq!(id.verify(b"another message", &sig), Err(MspError::InvalidSignature));
}

#[test]
fn node_ou_roles_of_fixture_identities() {
    let mgr = genesis_manager();
    let cases = [
        ("User1", user1(), "Org1MSP", MspRoleType::Client),
        ("peer0", peer0(), "Org1MSP", MspRoleType::Peer),
        ("Admin", admin1(), "Org1MSP", MspRoleType::Admin),
        ("orderer", orderer(), "OrdererMSP", MspRoleType::Orderer),
    ];
    let all = [MspRoleType::Client, MspRoleType::Peer, MspRoleType::Admin, MspRoleType::Orderer];
    for (who, bytes, mspid, expected) in cases {
        let id = mgr.deserialize_identity(&bytes).unwrap();
        assert_eq!(id.mspid(), mspid);
        id.validate().unwrap();
        mgr.satisfies_principal(&id, &role(mspid, MspRoleType::Member)).unwrap();
        for r in all {
            let res = mgr.satisfies_principal(&id, &role(mspid, r));
            assert_eq!(res.is_ok(), r == expected, "{who} as {r:?}: {res:?}");
        }
    }
}

#[test]
fn identity_of_another_org_does_not_satisfy_org1_principals() {
    let mgr = genesis_manager();
    let id = mgr.deserialize_identity(&user2()).unwrap();
    id.validate().unwrap();
    mgr.satisfies_principal(&id, &role("Org2MSP", MspRoleType::Member)).unwrap();
    for r in [MspRoleType::Member, MspRoleType::Client, MspRoleType::Admin] {
        assert!(matches!(mgr.satisfies_principal(&id, &role("Org1MSP", r)), Err(MspError::Principal(_))));
    }
    // An Org2 certificate claimed under Org1MSP does not chain to Org1's CA.
    let forged = serialized("Org1MSP", &signcert(&org2_dir().join("users/User1@org2.example.com/msp")));
    let forged = mgr.deserialize_identity(&forged).unwrap();
    assert!(matches!(forged.validate(), Err(MspError::Validation(_))));
    assert!(mgr.satisfies_principal(&forged, &role("Org1MSP", MspRoleType::Member)).is_err());
}

#[test]
fn self_signed_certificate_does_not_validate() {
    // Re-issue User1's certificate with issuer = subject, signed by User1's
    // own key: a well-formed self-signed leaf outside Org1's CA tree.
    let user_dir = org1_dir().join("users/User1@org1.example.com/msp");
    let der = pem_der(&signcert(&user_dir));
    let tbs = children(&der)[0].clone();
    let mut fields = children(&tbs);
    fields[3] = fields[5].clone(); // issuer := subject
    let refs: Vec<&[u8]> = fields.iter().map(Vec::as_slice).collect();
    let new_tbs = seq(&refs);
    let signer = SigningIdentity::from_msp_dir("Org1MSP", &user_dir).unwrap();
    let sig = signer.sign(&new_tbs);
    let cert = seq(&[&new_tbs, &children(&der)[1], &{
        let mut bits = vec![0u8];
        bits.extend_from_slice(&sig);
        tlv(0x03, &bits)
    }]);
    let mgr = genesis_manager();
    let id = mgr.deserialize_identity(&serialized("Org1MSP", &pem("CERTIFICATE", &cert))).unwrap();
    assert!(matches!(id.validate(), Err(MspError::Validation(_))), "{:?}", id.validate());
    assert!(id.organizational_units().is_empty());
    assert!(mgr.satisfies_principal(&id, &role("Org1MSP", MspRoleType::Member)).is_err());
    assert!(mgr.satisfies_principal(&id, &role("Org1MSP", MspRoleType::Client)).is_err());
    // Its own signatures still verify: validity is a separate verdict.
    id.verify(b"msg", &signer.sign(b"msg")).unwrap();
}

#[test]
fn root_certificates_with_high_s_signatures_are_sanitised() {
    // cryptogen signed the fixture CA certificates with high-S signatures;
    // Fabric hashes the low-S re-encoding into certifiers identifiers.
    let ca_pem = std::fs::read(org1_dir().join("msp/cacerts/ca.org1.example.com-cert.pem")).unwrap();
    let ca_der = pem_der(&ca_pem);
    let (r, s) = ecdsa_parts(&signature_of(&ca_der));
    assert!(is_high_s(&s), "fixture CA is expected to carry a high-S signature");
    let sanitised = with_signature(&ca_der, &ecdsa_der(&r, &n_minus(&s)));
    use sha2::Digest;
    let expected: [u8; 32] = sha2::Sha256::digest(&sanitised).into();
    let mgr = genesis_manager();
    let id = mgr.deserialize_identity(&user1()).unwrap();
    let ous = id.organizational_units();
    assert_eq!(ous.len(), 1);
    assert_eq!(ous[0].organizational_unit_identifier, "client");
    assert_eq!(ous[0].certifiers_identifier, expected);
    assert_ne!(ous[0].certifiers_identifier[..], sha2::Sha256::digest(&ca_der)[..]);
}

#[test]
fn identity_identifier_is_hash_of_low_s_certificate() {
    let mgr = genesis_manager();
    let pem_text = signcert(&org1_dir().join("peers/peer0.org1.example.com/msp"));
    let der = pem_der(&pem_text);
    let original = mgr.deserialize_identity(&serialized("Org1MSP", &pem_text)).unwrap();
    use sha2::Digest;
    assert_eq!(original.identifier().id[..], sha2::Sha256::digest(&der)[..]);
    assert_eq!(original.cert_der(), &der[..]);
    // The same certificate with its (valid) signature turned high-S.
    let (r, s) = ecdsa_parts(&signature_of(&der));
    assert!(!is_high_s(&s));
    let high = with_signature(&der, &ecdsa_der(&r, &n_minus(&s)));
    let variant = mgr.deserialize_identity(&serialized("Org1MSP", &pem("CERTIFICATE", &high))).unwrap();
    variant.validate().unwrap();
    assert_eq!(variant.identifier(), original.identifier());
    assert_eq!(variant.cert_der(), original.cert_der());
}

#[test]
fn organization_unit_identity_combined_and_anonymity_principals() {
    let mgr = genesis_manager();
    let user = mgr.deserialize_identity(&user1()).unwrap();
    let peer = mgr.deserialize_identity(&peer0()).unwrap();
    let certifiers = user.organizational_units()[0].certifiers_identifier;
    let ou = |name: &str, certifiers: &[u8]| MspPrincipal {
        principal_classification: Classification::OrganizationUnit as i32,
        principal: Bytes::from(
            OrganizationUnit {
                msp_identifier: "Org1MSP".into(),
                organizational_unit_identifier: name.into(),
                certifiers_identifier: Bytes::copy_from_slice(certifiers),
            }
            .encode_to_vec(),
        ),
    };
    mgr.satisfies_principal(&user, &ou("client", &certifiers)).unwrap();
    assert!(mgr.satisfies_principal(&user, &ou("client", &[0u8; 32])).is_err());
    assert!(mgr.satisfies_principal(&user, &ou("peer", &certifiers)).is_err());
    mgr.satisfies_principal(&peer, &ou("peer", &certifiers)).unwrap();

    let identity =
        MspPrincipal { principal_classification: Classification::Identity as i32, principal: Bytes::from(user1()) };
    mgr.satisfies_principal(&user, &identity).unwrap();
    assert!(mgr.satisfies_principal(&peer, &identity).is_err());

    let combined = |ps: Vec<MspPrincipal>| MspPrincipal {
        principal_classification: Classification::Combined as i32,
        principal: Bytes::from(CombinedPrincipal { principals: ps }.encode_to_vec()),
    };
    let both = combined(vec![role("Org1MSP", MspRoleType::Member), role("Org1MSP", MspRoleType::Client)]);
    mgr.satisfies_principal(&user, &both).unwrap();
    assert!(mgr.satisfies_principal(&peer, &both).is_err());
    let nested = combined(vec![both.clone(), combined(vec![identity.clone()])]);
    mgr.satisfies_principal(&user, &nested).unwrap();
    assert!(mgr.satisfies_principal(&user, &combined(vec![])).is_err());

    let anon = |t: MspIdentityAnonymityType| MspPrincipal {
        principal_classification: Classification::Anonymity as i32,
        principal: Bytes::from(MspIdentityAnonymity { anonymity_type: t as i32 }.encode_to_vec()),
    };
    mgr.satisfies_principal(&user, &anon(MspIdentityAnonymityType::Nominal)).unwrap();
    assert!(mgr.satisfies_principal(&user, &anon(MspIdentityAnonymityType::Anonymous)).is_err());

    let unknown = MspPrincipal { principal_classification: 42, principal: Bytes::new() };
    assert!(mgr.satisfies_principal(&user, &unknown).is_err());
    let garbage_role = MspPrincipal {
        principal_classification: Classification::Role as i32,
        principal: Bytes::from_static(&[0xff, 0xff]),
    };
    assert!(matches!(mgr.satisfies_principal(&user, &garbage_role), Err(MspError::Decode(_))));
}

#[test]
fn signing_identity_produces_fabric_creator_bytes_and_low_s_signatures() {
    let signer =
        SigningIdentity::from_msp_dir("Org1MSP", &org1_dir().join("users/User1@org1.example.com/msp")).unwrap();
    assert_eq!(signer.mspid(), "Org1MSP");
    // The fixture client serialised User1 exactly like this.
    let blocks = orderer_blocks();
    let creator = tx_sigs(&blocks[9].data.as_ref().unwrap().data[0]).creator.1;
    assert_eq!(signer.serialized(), &creator);
    let mgr = genesis_manager();
    let id = mgr.deserialize_identity(signer.serialized()).unwrap();
    for i in 0..32u8 {
        let msg = [i; 40];
        let sig = signer.sign(&msg);
        assert!(!is_high_s(&ecdsa_parts(&sig).1));
        id.verify(&msg, &sig).unwrap();
    }
    let orderer_signer =
        SigningIdentity::from_msp_dir("OrdererMSP", &orderer_org_dir().join("orderers/orderer.example.com/msp"))
            .unwrap();
    let oid = mgr.deserialize_identity(orderer_signer.serialized()).unwrap();
    oid.verify(b"block", &orderer_signer.sign(b"block")).unwrap();
    // Mismatched key and certificate are refused.
    let cert = signcert(&org1_dir().join("peers/peer0.org1.example.com/msp"));
    let key = std::fs::read(org1_dir().join("users/User1@org1.example.com/msp/keystore/priv_sk")).unwrap();
    assert!(matches!(SigningIdentity::from_pem("Org1MSP", &cert, &key), Err(MspError::UnsupportedKey(_))));
}

#[test]
fn deserialisation_errors_and_cache() {
    let mgr = genesis_manager();
    assert!(matches!(mgr.deserialize_identity(&[0xff, 0x01]), Err(MspError::Decode(_))));
    assert_eq!(
        mgr.deserialize_identity(&serialized("Org9MSP", b"x")).unwrap_err(),
        MspError::UnknownMsp("Org9MSP".into())
    );
    assert!(matches!(mgr.deserialize_identity(&serialized("Org1MSP", b"not pem")), Err(MspError::Pem(_))));
    let broken = pem("CERTIFICATE", &[0x30, 0x03, 0x02, 0x01, 0x01]);
    assert!(matches!(mgr.deserialize_identity(&serialized("Org1MSP", &broken)), Err(MspError::Certificate(_))));
    // Errors are cached and returned again; successes share one Arc.
    let before = mgr.cached_identities();
    assert_eq!(
        mgr.deserialize_identity(&serialized("Org1MSP", b"not pem")).unwrap_err(),
        mgr.deserialize_identity(&serialized("Org1MSP", b"not pem")).unwrap_err()
    );
    let a = mgr.deserialize_identity(&user1()).unwrap();
    let b = mgr.deserialize_identity(&user1()).unwrap();
    assert!(std::sync::Arc::ptr_eq(&a, &b));
    assert_eq!(mgr.cached_identities(), before + 1);
}

#[test]
fn idemix_and_unknown_msp_types_are_refused() {
    let idemix = MspConfig { r#type: 1, config: Bytes::new() };
    assert!(matches!(Msp::from_config(&idemix), Err(MspError::Unsupported(_))));
    let other = MspConfig { r#type: 7, config: Bytes::new() };
    assert!(matches!(Msp::from_config(&other), Err(MspError::Config(_))));
    let garbage = MspConfig { r#type: 0, config: Bytes::from_static(&[0x0a, 0xff]) };
    assert!(matches!(Msp::from_config(&garbage), Err(MspError::Decode(_))));
    // Without NodeOUs and without admins, Fabric refuses the MSP.
    let ca = std::fs::read(org1_dir().join("msp/cacerts/ca.org1.example.com-cert.pem")).unwrap();
    let conf = ferrofabric_protos::msp::FabricMspConfig {
        name: "Org1MSP".into(),
        root_certs: vec![Bytes::from(ca)],
        ..Default::default()
    };
    let cfg = MspConfig { r#type: 0, config: Bytes::from(conf.encode_to_vec()) };
    assert!(matches!(Msp::from_config(&cfg), Err(MspError::Config(_))));
}
