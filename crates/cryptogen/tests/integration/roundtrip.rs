//! Generated identities validate under MSPs built from the generated folders, with the right roles;
//! determinism, subject options and bad input (the `ferrofabric crypto` command is tested in the CLI crate).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use der::DecodePem;
use ferrofabric_cryptogen::{Crypto, CryptoConfig, CryptogenError, GenerateOptions, NodeRole};
use ferrofabric_msp::{Msp, MspManager, SigningIdentity};
use ferrofabric_protos::common::{msp_principal, msp_role, MspPrincipal, MspRole};
use prost::Message;
use x509_cert::Certificate;

const MIXED: &str = "
OrdererOrgs:
  - Name: Orderer
    Domain: ord.test
    EnableNodeOUs: true
    Template:
      Count: 2
PeerOrgs:
  - Name: Ou
    Domain: ou.test
    EnableNodeOUs: true
    Specs:
      - Hostname: anchor
    Template:
      Count: 1
      Start: 5
    Users:
      Count: 2
  - Name: Plain
    Domain: plain.test
    EnableNodeOUs: false
    Template:
      Count: 2
    Users:
      Count: 1
";

fn role(mspid: &str, role: msp_role::MspRoleType) -> MspPrincipal {
    MspPrincipal {
        principal_classification: msp_principal::Classification::Role as i32,
        principal: Bytes::from(MspRole { msp_identifier: mspid.to_string(), role: role as i32 }.encode_to_vec()),
    }
}

/// Every node and user, loaded back with `SigningIdentity::from_msp_dir` from its own folder, validates
/// under the MSP built from its organisation's `msp/` folder, signs verifiably, satisfies MEMBER and
/// exactly its NodeOU role (NodeOU orgs), or ADMIN only for Admin via admincerts (plain orgs); and no
/// identity is accepted by another organisation's MSP.
#[test]
fn every_identity_validates_with_its_role_under_the_generated_msp() {
    use msp_role::MspRoleType::{Admin, Client, Member, Orderer, Peer};
    let config = CryptoConfig::from_yaml(MIXED).unwrap();
    let crypto = Crypto::generate(&config, &GenerateOptions::default()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    crypto.write(tmp.path()).unwrap();
    let mspid = |domain: &str| format!("{domain}-msp");
    let msps: Vec<Msp> = crypto
        .orgs()
        .iter()
        .map(|o| Msp::from_msp_dir(&mspid(o.domain()), &o.dir(tmp.path()).join("msp")).unwrap())
        .collect();
    let manager = MspManager::new(msps);
    let mut checked = BTreeMap::new();
    for org in crypto.orgs() {
        let id = mspid(org.domain());
        for m in org.nodes().iter().chain(org.users()) {
            let signer = SigningIdentity::from_msp_dir(&id, &org.member_dir(tmp.path(), m).join("msp")).unwrap();
            assert_eq!(signer.serialized(), m.signing_identity(&id).unwrap().serialized());
            let identity = manager.deserialize_identity(signer.serialized()).unwrap();
            identity.validate().unwrap_or_else(|e| panic!("{}: {e}", m.common_name()));
            identity.verify(b"msg", &signer.sign(b"msg")).unwrap();
            manager.satisfies_principal(&identity, &role(&id, Member)).unwrap();
            let expected = match (org.node_ous(), m.role()) {
                (true, NodeRole::Peer) => vec![Peer],
                (true, NodeRole::Orderer) => vec![Orderer],
                (true, NodeRole::Client) => vec![Client],
                (true, NodeRole::Admin) => vec![Admin],
                (false, NodeRole::Admin) => vec![Admin],
                (false, _) => vec![],
            };
            for r in [Admin, Client, Peer, Orderer] {
                let ok = manager.satisfies_principal(&identity, &role(&id, r)).is_ok();
                assert_eq!(ok, expected.contains(&r), "{} as {r:?}", m.common_name());
            }
            // Claiming another organisation's MSP fails validation there.
            let other = crypto.orgs().iter().find(|o| o.domain() != org.domain()).unwrap();
            let forged = m.signing_identity(&mspid(other.domain())).unwrap();
            let forged = manager.deserialize_identity(forged.serialized()).unwrap();
            assert!(forged.validate().is_err(), "{} accepted by {}", m.common_name(), other.domain());
            *checked.entry(org.domain().to_string()).or_insert(0) += 1;
        }
    }
    let expected: BTreeMap<String, i32> =
        [("ord.test", 3), ("ou.test", 5), ("plain.test", 4)].into_iter().map(|(d, n)| (d.to_string(), n)).collect();
    assert_eq!(checked, expected);
}

/// Without NodeOUs there is no config.yaml and no OU in certificates; admincerts holds Admin's
/// certificate in the org and node MSPs, and the user's own in a user MSP (cryptogen's behaviour).
#[test]
fn plain_org_uses_admincerts() {
    let config = CryptoConfig::from_yaml(MIXED).unwrap();
    let crypto = Crypto::generate(&config, &GenerateOptions::deterministic(1)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    crypto.write(tmp.path()).unwrap();
    let org = crypto.org("plain.test").unwrap();
    let base = org.dir(tmp.path());
    let admin_pem = org.admin().cert_pem();
    let only_file = |dir: &Path| {
        let files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "{}", dir.display());
        (files[0].file_name().unwrap().to_string_lossy().into_owned(), std::fs::read_to_string(&files[0]).unwrap())
    };
    assert_eq!(only_file(&base.join("msp/admincerts")), ("Admin@plain.test-cert.pem".into(), admin_pem.into()));
    assert!(!base.join("msp/config.yaml").exists());
    for peer in org.nodes() {
        let msp = org.member_dir(tmp.path(), peer).join("msp");
        assert_eq!(only_file(&msp.join("admincerts")).1, admin_pem);
        assert!(!msp.join("config.yaml").exists());
        let cert = Certificate::from_pem(peer.cert_pem()).unwrap();
        assert!(!cert.tbs_certificate.subject.to_string().contains("OU="), "{}", cert.tbs_certificate.subject);
    }
    let user = &org.users()[0];
    let msp = org.member_dir(tmp.path(), user).join("msp");
    assert_eq!(only_file(&msp.join("admincerts")), ("User1@plain.test-cert.pem".into(), user.cert_pem().into()));
    // The NodeOU org of the same run does have OUs.
    let ou = crypto.org("ou.test").unwrap();
    let cert = Certificate::from_pem(ou.nodes()[0].cert_pem()).unwrap();
    assert!(cert.tbs_certificate.subject.to_string().contains("OU=peer"));
    assert_eq!(ou.nodes().iter().map(|n| n.common_name()).collect::<Vec<_>>(), ["anchor.ou.test", "peer5.ou.test"]);
}

/// The CA spec's subject fields reach the CAs and, except O, every issued certificate; TLS SANs are CN,
/// host name and the extra SANs, IPs as IP addresses.
#[test]
fn ca_subject_options_and_sans_are_applied() {
    let yaml = "
PeerOrgs:
  - Name: X
    Domain: x.test
    EnableNodeOUs: true
    CA:
      Hostname: root
      Country: DE
      Province: Berlin
      Locality: Berlin
      StreetAddress: Main St 1
      PostalCode: '10115'
    Specs:
      - Hostname: p
        SANS: ['{{.Hostname}}.alt.{{.Domain}}', '10.1.2.3', '::1']
";
    let crypto = Crypto::generate(&CryptoConfig::from_yaml(yaml).unwrap(), &GenerateOptions::deterministic(2)).unwrap();
    let org = &crypto.orgs()[0];
    assert_eq!(org.ca().common_name(), "root.x.test");
    assert_eq!(org.tlsca().common_name(), "tlsroot.x.test");
    let subject = |pem: &str| Certificate::from_pem(pem).unwrap().tbs_certificate.subject.to_string();
    let ca = subject(org.ca().cert_pem());
    for part in ["C=DE", "ST=Berlin", "L=Berlin", "STREET=Main St 1", "POSTALCODE=10115", "O=x.test", "CN=root.x.test"]
    {
        assert!(ca.to_uppercase().contains(&part.to_uppercase()), "{part} not in {ca}");
    }
    let node = &org.nodes()[0];
    let leaf = subject(node.cert_pem());
    assert!(leaf.contains("C=DE") && leaf.contains("OU=peer") && leaf.contains("CN=p.x.test"), "{leaf}");
    assert!(!leaf.contains("O=x.test"), "{leaf}");
    let tls = Certificate::from_pem(node.tls_cert_pem()).unwrap();
    let san = tls.tbs_certificate.extensions.iter().flatten().find(|e| e.extn_id.to_string() == "2.5.29.17").unwrap();
    let names = x509_cert::ext::pkix::SubjectAltName::from_der_bytes(san.extn_value.as_bytes());
    assert_eq!(names, ["dns:p.x.test", "dns:p", "dns:p.alt.x.test", "ip:10.1.2.3", "ip:::1"]);
}

trait SanStrings {
    fn from_der_bytes(der: &[u8]) -> Vec<String>;
}

impl SanStrings for x509_cert::ext::pkix::SubjectAltName {
    fn from_der_bytes(der: &[u8]) -> Vec<String> {
        use der::Decode;
        use x509_cert::ext::pkix::name::GeneralName;
        let san = x509_cert::ext::pkix::SubjectAltName::from_der(der).unwrap();
        san.0
            .iter()
            .map(|n| match n {
                GeneralName::DnsName(d) => format!("dns:{}", d.as_str()),
                GeneralName::IpAddress(ip) => {
                    let b = ip.as_bytes();
                    let addr: std::net::IpAddr = match b.len() {
                        4 => <[u8; 4]>::try_from(b).unwrap().into(),
                        _ => <[u8; 16]>::try_from(b).unwrap().into(),
                    };
                    format!("ip:{addr}")
                }
                other => format!("{other:?}"),
            })
            .collect()
    }
}

/// Bad configs are errors, never panics.
#[test]
fn bad_configs_are_rejected() {
    let gen = |yaml: &str| {
        CryptoConfig::from_yaml(yaml).and_then(|c| Crypto::generate(&c, &GenerateOptions::deterministic(1)))
    };
    let dup = "PeerOrgs:\n- Domain: a.test\n  Specs:\n  - Hostname: peer0\n  Template:\n    Count: 1\n";
    assert!(matches!(gen(dup), Err(CryptogenError::Config(m)) if m.contains("twice")));
    let dup_org = "PeerOrgs:\n- Domain: a.test\n- Domain: a.test\n";
    assert!(matches!(gen(dup_org), Err(CryptogenError::Config(_))));
    assert!(matches!(gen("PeerOrgs:\n- Domain: ../evil\n"), Err(CryptogenError::Config(_))));
    assert!(matches!(
        gen("PeerOrgs:\n- Domain: a.test\n  Specs:\n  - Hostname: x/y\n"),
        Err(CryptogenError::Config(_))
    ));
    let bad_template = "PeerOrgs:\n- Domain: a.test\n  Template:\n    Count: 1\n    Hostname: '{{.Prefix'\n";
    assert!(matches!(gen(bad_template), Err(CryptogenError::Template(_))));
    let bad_san = "PeerOrgs:\n- Domain: a.test\n  Specs:\n  - Hostname: p\n    SANS: ['bücher.test']\n";
    assert!(matches!(gen(bad_san), Err(CryptogenError::Certificate(_))));
    assert!(matches!(gen("OrdererOrgs: 3\n"), Err(CryptogenError::Config(_))));
    assert!(matches!(CryptoConfig::from_file(Path::new("/nonexistent/cc.yaml")), Err(CryptogenError::Io { .. })));
}
