//! MSP validation rules on small synthetic PKIs (keys generated in-test):
//! revocation, intermediate CAs, Go's default key usage, validity time,
//! NodeOU classification.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use ferrofabric_msp::{Msp, MspError, MspManager};

struct Pki {
    root_key: p256::ecdsa::SigningKey,
    root: Vec<u8>,
    root_name: Vec<u8>,
}

fn pki() -> Pki {
    let root_key = key(1);
    let root_name = name("ca.test", &[]);
    let root = make_cert(&CertSpec {
        subject: root_name.clone(),
        issuer: root_name.clone(),
        serial: 1,
        not_before: "200101000000Z",
        not_after: "400101000000Z",
        key: &root_key,
        issuer_key: &root_key,
        is_ca: true,
        eku: None,
    });
    Pki { root_key, root, root_name }
}

fn leaf(issuer_name: &[u8], issuer_key: &p256::ecdsa::SigningKey, serial: u64, ous: &[&str], seed: u8) -> Vec<u8> {
    make_cert(&CertSpec {
        subject: name(&format!("user{serial}"), ous),
        issuer: issuer_name.to_vec(),
        serial,
        not_before: "210101000000Z",
        not_after: "220101000000Z",
        key: &key(seed),
        issuer_key,
        is_ca: false,
        eku: None,
    })
}

fn manager(config: ferrofabric_protos::msp::MspConfig) -> MspManager {
    MspManager::new(vec![Msp::from_config(&config).unwrap()])
}

fn validate(mgr: &MspManager, cert: &[u8]) -> Result<(), MspError> {
    // Deserialisation must succeed: these tests are about validation.
    mgr.deserialize_identity(&serialized("TestMSP", &pem("CERTIFICATE", cert)))
        .expect("synthetic certificate deserialises")
        .validate()
}

#[test]
fn leaf_signed_by_root_validates_regardless_of_current_time() {
    let p = pki();
    let mgr = manager(msp_config("TestMSP", std::slice::from_ref(&p.root), &[], &[], &[], true));
    // NotAfter 2022 lies in the past: Fabric checks validity at NotBefore+1s.
    validate(&mgr, &leaf(&p.root_name, &p.root_key, 10, &["client"], 10)).unwrap();
}

#[test]
fn crl_of_the_issuing_ca_revokes_listed_serials_only() {
    let p = pki();
    let crl = make_crl(&p.root_name, &p.root_key, Some(&ski_of(&p.root_key)), &[11]);
    let mgr = manager(msp_config("TestMSP", std::slice::from_ref(&p.root), &[], &[], &[crl], true));
    let revoked = validate(&mgr, &leaf(&p.root_name, &p.root_key, 11, &["client"], 11));
    assert!(matches!(&revoked, Err(MspError::Validation(m)) if m.contains("revoked")), "{revoked:?}");
    validate(&mgr, &leaf(&p.root_name, &p.root_key, 12, &["client"], 12)).unwrap();
}

#[test]
fn crl_with_a_bad_signature_is_ignored_and_crl_without_aki_breaks_validation() {
    let p = pki();
    // Right AKI, wrong signer: Fabric skips it.
    let forged = make_crl(&p.root_name, &key(99), Some(&ski_of(&p.root_key)), &[11]);
    let mgr = manager(msp_config("TestMSP", std::slice::from_ref(&p.root), &[], &[], &[forged], true));
    validate(&mgr, &leaf(&p.root_name, &p.root_key, 11, &["client"], 11)).unwrap();
    // A CRL without AKI makes Fabric's revocation check error out.
    let no_aki = make_crl(&p.root_name, &p.root_key, None, &[]);
    let mgr = manager(msp_config("TestMSP", std::slice::from_ref(&p.root), &[], &[], &[no_aki], true));
    let res = validate(&mgr, &leaf(&p.root_name, &p.root_key, 12, &["client"], 12));
    assert!(matches!(&res, Err(MspError::Validation(m)) if m.contains("Authority Key Identifier")), "{res:?}");
}

#[test]
fn intermediate_chains_and_the_leaf_of_tree_rule() {
    let p = pki();
    let int_key = key(2);
    let int_name = name("ica.test", &[]);
    let intermediate = make_cert(&CertSpec {
        subject: int_name.clone(),
        issuer: p.root_name.clone(),
        serial: 2,
        not_before: "200601000000Z",
        not_after: "390101000000Z",
        key: &int_key,
        issuer_key: &p.root_key,
        is_ca: true,
        eku: None,
    });
    let mgr = manager(msp_config(
        "TestMSP",
        std::slice::from_ref(&p.root),
        std::slice::from_ref(&intermediate),
        &[],
        &[],
        true,
    ));
    let below_int = leaf(&int_name, &int_key, 20, &["peer"], 20);
    validate(&mgr, &below_int).unwrap();
    // The root now has a child CA, so leaves may not hang off it directly.
    let below_root = validate(&mgr, &leaf(&p.root_name, &p.root_key, 21, &["peer"], 21));
    assert!(
        matches!(&below_root, Err(MspError::Validation(m)) if m.contains("leaf of the certification tree")),
        "{below_root:?}"
    );
    // The certifiers identifier covers intermediate then root.
    let id = mgr.deserialize_identity(&serialized("TestMSP", &pem("CERTIFICATE", &below_int))).unwrap();
    use sha2::Digest;
    let expected: [u8; 32] = sha2::Sha256::digest([intermediate.as_slice(), p.root.as_slice()].concat()).into();
    assert_eq!(id.organizational_units()[0].certifiers_identifier, expected);
    // Revoking the intermediate through the root's CRL fails MSP setup.
    let crl = make_crl(&p.root_name, &p.root_key, Some(&ski_of(&p.root_key)), &[2]);
    let cfg = msp_config("TestMSP", std::slice::from_ref(&p.root), &[intermediate], &[], &[crl], true);
    assert!(matches!(Msp::from_config(&cfg), Err(MspError::Config(_))));
}

#[test]
fn client_auth_only_eku_fails_like_gos_default_server_auth_check() {
    let p = pki();
    let mgr = manager(msp_config("TestMSP", std::slice::from_ref(&p.root), &[], &[], &[], true));
    let with_eku = |serial: u64, eku: Vec<Vec<u8>>| {
        make_cert(&CertSpec {
            subject: name("eku", &["client"]),
            issuer: p.root_name.clone(),
            serial,
            not_before: "210101000000Z",
            not_after: "220101000000Z",
            key: &key(30),
            issuer_key: &p.root_key,
            is_ca: false,
            eku: Some(eku),
        })
    };
    let res = validate(&mgr, &with_eku(30, vec![EKU_CLIENT_AUTH.to_vec()]));
    assert!(matches!(&res, Err(MspError::Validation(m)) if m.contains("key usage")), "{res:?}");
    validate(&mgr, &with_eku(31, vec![EKU_CLIENT_AUTH.to_vec(), EKU_SERVER_AUTH.to_vec()])).unwrap();
}

#[test]
fn leaf_issued_outside_the_ca_validity_window_fails() {
    let p = pki();
    let mgr = manager(msp_config("TestMSP", std::slice::from_ref(&p.root), &[], &[], &[], true));
    let late = make_cert(&CertSpec {
        subject: name("late", &["client"]),
        issuer: p.root_name.clone(),
        serial: 40,
        not_before: "450101000000Z",
        not_after: "460101000000Z",
        key: &key(40),
        issuer_key: &p.root_key,
        is_ca: false,
        eku: None,
    });
    let res = validate(&mgr, &late);
    assert!(matches!(&res, Err(MspError::Validation(m)) if m.contains("expired")), "{res:?}");
}

#[test]
fn node_ou_rule_requires_exactly_one_role_ou() {
    let p = pki();
    let mgr = manager(msp_config("TestMSP", std::slice::from_ref(&p.root), &[], &[], &[], true));
    let check = |ous: &[&str], serial: u64| validate(&mgr, &leaf(&p.root_name, &p.root_key, serial, ous, serial as u8));
    check(&["client"], 50).unwrap();
    check(&["orderer", "department7"], 51).unwrap();
    for (ous, serial) in [(&[][..], 52), (&["department7"][..], 53), (&["client", "peer"][..], 54)] {
        let res = check(ous, serial);
        assert!(matches!(&res, Err(MspError::Validation(m)) if m.contains("OU")), "{ous:?}: {res:?}");
    }
    // Without NodeOUs any OU set is fine, but admins must be listed.
    let leaf_admin = leaf(&p.root_name, &p.root_key, 55, &[], 55);
    let mgr = manager(msp_config("TestMSP", std::slice::from_ref(&p.root), &[], &[leaf_admin], &[], false));
    validate(&mgr, &leaf(&p.root_name, &p.root_key, 56, &["client", "peer"], 56)).unwrap();
}

#[test]
fn ca_certificate_cannot_be_an_identity() {
    let p = pki();
    let mgr = manager(msp_config("TestMSP", std::slice::from_ref(&p.root), &[], &[], &[], true));
    let res = validate(&mgr, &p.root);
    assert!(matches!(&res, Err(MspError::Validation(m)) if m.contains("Certificate Authority")), "{res:?}");
}
