//! Generation from the fixture's crypto-config.yaml against the real Fabric 2.5.16 cryptogen output in
//! `fixtures/fabric-2.5/crypto`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use der::{Decode, DecodePem, Encode, Tagged};
use ferrofabric_cryptogen::{Crypto, CryptoConfig, GenerateOptions, OrgKind};
use ferrofabric_testkit::fabric_fixture;
use sha2::{Digest, Sha256};
use x509_cert::Certificate;

fn files_under(root: &Path) -> BTreeSet<String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, root, out);
            } else {
                out.insert(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(root, root, &mut out);
    out
}

/// (type, string tag, value) of each subject/issuer attribute, in order.
fn name_parts(name: &x509_cert::name::Name) -> Vec<(String, u8, Vec<u8>)> {
    name.0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .map(|atv| (atv.oid.to_string(), atv.value.tag().octet(), atv.value.value().to_vec()))
        .collect()
}

const SKI: &str = "2.5.29.14";
const AKI: &str = "2.5.29.35";

fn extensions(cert: &Certificate) -> BTreeMap<String, (bool, Vec<u8>)> {
    cert.tbs_certificate
        .extensions
        .iter()
        .flatten()
        .map(|e| (e.extn_id.to_string(), (e.critical, e.extn_value.as_bytes().to_vec())))
        .collect()
}

fn point(cert: &Certificate) -> Vec<u8> {
    cert.tbs_certificate.subject_public_key_info.subject_public_key.raw_bytes().to_vec()
}

fn fixture_crypto(seed: u64) -> Crypto {
    let config = CryptoConfig::from_file(&fabric_fixture("crypto-config.yaml")).unwrap();
    Crypto::generate(&config, &GenerateOptions::deterministic(seed)).unwrap()
}

/// The fixture's crypto-config (Org1 with two templated peers, Org2 with one, an orderer spec) gives
/// exactly cryptogen's tree: every fixture file (plus the private keys the fixture dropped), byte-equal
/// config.yaml files, and certificates with the same subjects, issuers, algorithms and extensions (same
/// criticality and DER; SKI/AKI by cryptogen's SHA-256 rule; AKI = issuer SKI; signed by the issuer with
/// low S); every key matches its certificate.
#[test]
fn fixture_config_reproduces_cryptogen_tree_and_profiles() {
    let crypto = fixture_crypto(3);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    crypto.write(dir).unwrap();
    let fixture_root = fabric_fixture("crypto");
    let fixture = files_under(&fixture_root);
    let ours = files_under(dir);
    assert!(fixture.iter().any(|p| p.contains("peer1.org1.example.com")));
    let missing: Vec<_> = fixture.difference(&ours).collect();
    assert!(missing.is_empty(), "missing: {missing:?}");
    for extra in ours.difference(&fixture) {
        assert!(extra.ends_with("priv_sk") || extra.ends_with(".key"), "unexpected file {extra}");
    }
    // cryptogen creates admincerts/ even when NodeOUs leave it empty.
    assert!(dir.join("peerOrganizations/org1.example.com/msp/admincerts").is_dir());

    for rel in &fixture {
        let (fix_path, our_path) = (fixture_root.join(rel), dir.join(rel));
        if rel.ends_with("config.yaml") {
            assert_eq!(std::fs::read(&fix_path).unwrap(), std::fs::read(&our_path).unwrap(), "{rel}");
            continue;
        }
        if rel.ends_with("priv_sk") || rel.ends_with(".key") {
            continue;
        }
        let fix = Certificate::from_pem(std::fs::read(&fix_path).unwrap()).unwrap();
        let our_pem = std::fs::read(&our_path).unwrap();
        assert!(our_pem.starts_with(b"-----BEGIN CERTIFICATE-----\n"), "{rel}");
        assert!(our_pem.ends_with(b"-----END CERTIFICATE-----\n"), "{rel}");
        let our = Certificate::from_pem(&our_pem).unwrap();
        let (f, o) = (&fix.tbs_certificate, &our.tbs_certificate);
        assert_eq!(o.version, f.version, "{rel}");
        assert_eq!(o.signature, f.signature, "{rel}");
        assert_eq!(name_parts(&o.subject), name_parts(&f.subject), "{rel}");
        assert_eq!(name_parts(&o.issuer), name_parts(&f.issuer), "{rel}");
        assert_eq!(o.subject_public_key_info.algorithm, f.subject_public_key_info.algorithm, "{rel}");
        // cryptogen certificates live 3650 days.
        let life = |c: &x509_cert::TbsCertificate| {
            c.validity.not_after.to_unix_duration().as_secs() - c.validity.not_before.to_unix_duration().as_secs()
        };
        assert_eq!(life(o), life(f), "{rel}");
        let (fe, oe) = (extensions(&fix), extensions(&our));
        assert_eq!(
            oe.iter().map(|(k, v)| (k, v.0)).collect::<Vec<_>>(),
            fe.iter().map(|(k, v)| (k, v.0)).collect::<Vec<_>>(),
            "{rel}: extension set"
        );
        for (oid, (_, value)) in &fe {
            match oid.as_str() {
                SKI => {
                    let ski = der::asn1::OctetString::from_der(&oe[oid].1).unwrap();
                    assert_eq!(ski.as_bytes(), Sha256::digest(point(&our)).as_slice(), "{rel}");
                }
                AKI => assert_eq!(oe[oid].1.len(), value.len(), "{rel}: AKI shape"),
                _ => assert_eq!(&oe[oid].1, value, "{rel}: extension {oid}"),
            }
        }
        // The issuer: the org CA (or TLS CA) of the same tree; itself for the CAs.
        let org_dir = rel.split('/').take(2).collect::<Vec<_>>().join("/");
        let ca_dir = if o.issuer.to_string().contains("CN=tlsca") { "tlsca" } else { "ca" };
        let ca_file = files_under(&dir.join(&org_dir).join(ca_dir)).into_iter().find(|p| p.ends_with("-cert.pem"));
        let ca = Certificate::from_pem(std::fs::read(dir.join(&org_dir).join(ca_dir).join(ca_file.unwrap())).unwrap())
            .unwrap();
        if let Some((_, aki)) = oe.get(AKI) {
            // AKI = SEQUENCE { [0] keyIdentifier }: 30 22 80 20 <32 bytes>.
            assert_eq!(&aki[4..], Sha256::digest(point(&ca)).as_slice(), "{rel}");
        }
        use p256::ecdsa::signature::Verifier;
        let vk = p256::ecdsa::VerifyingKey::from_sec1_bytes(&point(&ca)).unwrap();
        let sig = p256::ecdsa::Signature::from_der(our.signature.raw_bytes()).unwrap();
        assert!(sig.normalize_s().is_none(), "{rel}: high-S certificate signature");
        vk.verify(&our.tbs_certificate.to_der().unwrap(), &sig).unwrap_or_else(|e| panic!("{rel}: {e}"));
    }

    // Every private key matches its certificate: MSP keystores, TLS keys, CA keys.
    use p256::elliptic_curve::sec1::ToEncodedPoint;
    use p256::pkcs8::DecodePrivateKey;
    let key_point = |rel: &str| {
        let pem = std::fs::read_to_string(dir.join(rel)).unwrap();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{rel}");
        p256::SecretKey::from_pkcs8_pem(&pem).unwrap().public_key().to_encoded_point(false).as_bytes().to_vec()
    };
    let cert_point = |path: PathBuf| point(&Certificate::from_pem(std::fs::read(path).unwrap()).unwrap());
    let mut keys = 0;
    for rel in ours.iter().filter(|p| p.ends_with("priv_sk") || p.ends_with(".key")) {
        let path = dir.join(rel);
        let parent = path.parent().unwrap();
        let cert = if rel.ends_with("keystore/priv_sk") {
            let signcerts = parent.parent().unwrap().join("signcerts");
            signcerts.join(files_under(&signcerts).into_iter().next().unwrap())
        } else if rel.ends_with(".key") {
            path.with_extension("crt")
        } else {
            parent.join(files_under(parent).into_iter().find(|p| p.ends_with("-cert.pem")).unwrap())
        };
        assert_eq!(key_point(rel), cert_point(cert), "{rel}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600, "{rel}");
        }
        keys += 1;
    }
    // 3 orgs x 2 CAs + (peer0, peer1, User1, Admin) + (peer0, User1, Admin) + (orderer, Admin), 2 keys each.
    assert_eq!(keys, 6 + 2 * 9);
}

/// The in-memory model agrees with the tree: names, roles, order, and `Org::msp_config` equals what the
/// MSP crate's `GetVerifyingMspConfig` port reads from the written `msp/` folder.
#[test]
fn model_matches_written_tree_and_verifying_msp_config() {
    let crypto = fixture_crypto(4);
    let tmp = tempfile::tempdir().unwrap();
    crypto.write(tmp.path()).unwrap();
    let domains: Vec<_> = crypto.orgs().iter().map(|o| (o.kind(), o.domain())).collect();
    assert_eq!(
        domains,
        [(OrgKind::Peer, "org1.example.com"), (OrgKind::Peer, "org2.example.com"), (OrgKind::Orderer, "example.com")]
    );
    let org1 = crypto.org("org1.example.com").unwrap();
    let names: Vec<_> = org1.nodes().iter().chain(org1.users()).map(|m| m.common_name()).collect();
    assert_eq!(
        names,
        ["peer0.org1.example.com", "peer1.org1.example.com", "User1@org1.example.com", "Admin@org1.example.com"]
    );
    assert_eq!(org1.admin().common_name(), "Admin@org1.example.com");
    assert_eq!(org1.ca().common_name(), "ca.org1.example.com");
    assert_eq!(org1.tlsca().common_name(), "tlsca.org1.example.com");
    for (org, mspid) in crypto.orgs().iter().zip(["Org1MSP", "Org2MSP", "OrdererMSP"]) {
        let from_dir = ferrofabric_msp::msp_config_from_dir(mspid, &org.dir(tmp.path()).join("msp")).unwrap();
        assert_eq!(org.msp_config(mspid), from_dir, "{mspid}");
        for m in org.nodes().iter().chain(org.users()) {
            let msp = org.member_dir(tmp.path(), m).join("msp");
            let signcert = msp.join("signcerts").join(format!("{}-cert.pem", m.common_name()));
            assert_eq!(std::fs::read_to_string(signcert).unwrap(), m.cert_pem());
            assert_eq!(std::fs::read_to_string(msp.join("keystore/priv_sk")).unwrap(), m.key_pem());
        }
    }
    let orderer = crypto.org("example.com").unwrap();
    assert_eq!(orderer.users().len(), 1, "orderer orgs get only Admin");
    assert!(orderer.member("orderer.example.com").is_some());
}
