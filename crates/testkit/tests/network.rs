//! Generated crypto and genesis block against the real cryptogen/configtxgen
//! output in the fixture.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use der::{Decode, DecodePem, Encode, Tagged};
use ferrofabric_protos::common::{Block, ConfigGroup};
use ferrofabric_protos::msp::{FabricMspConfig, MspConfig, SerializedIdentity};
use ferrofabric_testkit::{Network, ORDERER_ORG};
use prost::Message;
use sha2::{Digest, Sha256};
use support::*;
use x509_cert::Certificate;

fn unique_tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ferrofabric-testkit-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

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

#[test]
fn generate_is_deterministic_per_seed() {
    let a = Network::generate(7).unwrap();
    let b = Network::generate(7).unwrap();
    let c = Network::generate(8).unwrap();
    assert_eq!(a.genesis_block(), b.genesis_block());
    assert_eq!(a.peer(1).serialized(), b.peer(1).serialized());
    assert_eq!(a.peer(0).sign(b"m"), b.peer(0).sign(b"m"));
    assert_ne!(a.genesis_block(), c.genesis_block());
    assert_ne!(a.client(0).serialized(), c.client(0).serialized());
}

#[test]
fn identities_have_expected_msp_ids_and_common_names() {
    let net = network();
    let cases = [
        (net.peer(0), "Org1MSP", "peer0.org1.example.com"),
        (net.client(0), "Org1MSP", "User1@org1.example.com"),
        (net.admin(0), "Org1MSP", "Admin@org1.example.com"),
        (net.peer(1), "Org2MSP", "peer0.org2.example.com"),
        (net.client(1), "Org2MSP", "User1@org2.example.com"),
        (net.admin(1), "Org2MSP", "Admin@org2.example.com"),
        (net.orderer(), "OrdererMSP", "orderer.example.com"),
        (net.admin(ORDERER_ORG), "OrdererMSP", "Admin@example.com"),
    ];
    for (id, mspid, cn) in cases {
        assert_eq!(id.mspid(), mspid);
        let sid = SerializedIdentity::decode(id.serialized().clone()).unwrap();
        assert_eq!(sid.mspid, mspid);
        let cert = Certificate::from_pem(&sid.id_bytes).unwrap();
        assert!(
            cert.tbs_certificate.subject.to_string().contains(&format!("CN={cn}")),
            "{}",
            cert.tbs_certificate.subject
        );
    }
}

/// The genesis block keeps every config element of the fixture except the
/// three MSP values, which hold our CAs; the data hash is recomputed.
#[test]
fn genesis_block_decodes_and_only_msps_change() {
    let net = network();
    let ours = Block::decode(net.genesis_block()).unwrap();
    let fixture = Block::decode(read_fixture("genesis.block")).unwrap();
    let header = ours.header.as_ref().unwrap();
    assert_eq!(header.number, 0);
    assert!(header.previous_hash.is_empty());
    let data = &ours.data.as_ref().unwrap().data;
    assert_eq!(data.len(), 1);
    assert_eq!(header.data_hash.as_ref(), Sha256::digest(&data[0]).as_slice());
    assert_eq!(ours.metadata, fixture.metadata);

    let (our_ch, our_cfg) = block_config(&ours);
    let (fix_ch, fix_cfg) = block_config(&fixture);
    assert_eq!(our_ch, fix_ch);
    assert_eq!(our_cfg.sequence, fix_cfg.sequence);

    let mut our_group = our_cfg.channel_group.clone().unwrap();
    let mut fix_group = fix_cfg.channel_group.clone().unwrap();
    let mut our_msps = BTreeMap::new();
    let mut fix_msps = BTreeMap::new();
    fn take_msps(g: &mut ConfigGroup, out: &mut BTreeMap<String, MspConfig>) {
        if let Some(v) = g.values.remove("MSP") {
            let m = MspConfig::decode(v.value).unwrap();
            let f = FabricMspConfig::decode(m.config.clone()).unwrap();
            out.insert(f.name, m);
        }
        for sub in g.groups.values_mut() {
            take_msps(sub, out);
        }
    }
    take_msps(&mut our_group, &mut our_msps);
    take_msps(&mut fix_group, &mut fix_msps);
    assert_eq!(our_group, fix_group, "non-MSP config changed");
    let names: BTreeSet<String> = ["Org1MSP", "Org2MSP", "OrdererMSP"].map(String::from).into();
    assert_eq!(our_msps.keys().cloned().collect::<BTreeSet<_>>(), names);
    assert_eq!(fix_msps.keys().cloned().collect::<BTreeSet<_>>(), names);
    for (org, mspid) in [(0, "Org1MSP"), (1, "Org2MSP"), (ORDERER_ORG, "OrdererMSP")] {
        assert_eq!(our_msps[mspid], net.msp_config(org));
        assert_ne!(our_msps[mspid], fix_msps[mspid]);
    }
}

/// Our FabricMSPConfig is the fixture's with only the certificates swapped.
#[test]
fn msp_config_has_configtxgen_shape() {
    let net = network();
    let fixture = Block::decode(read_fixture("genesis.block")).unwrap();
    let (_, cfg) = block_config(&fixture);
    let groups = &cfg.channel_group.as_ref().unwrap().groups;
    let fixture_msp = |path: [&str; 2]| {
        let g = &groups[path[0]].groups[path[1]];
        let m = MspConfig::decode(g.values["MSP"].value.clone()).unwrap();
        (m.r#type, FabricMspConfig::decode(m.config).unwrap())
    };
    for (org, path) in
        [(0, ["Application", "Org1MSP"]), (1, ["Application", "Org2MSP"]), (ORDERER_ORG, ["Orderer", "OrdererOrg"])]
    {
        let ours = net.msp_config(org);
        let our_f = FabricMspConfig::decode(ours.config.clone()).unwrap();
        let (fix_type, mut fix_f) = fixture_msp(path);
        assert_eq!(ours.r#type, fix_type);
        let ca = Bytes::from(net.ca_cert_pem(org).as_bytes().to_vec());
        assert_eq!(our_f.root_certs, vec![ca.clone()]);
        fix_f.root_certs = our_f.root_certs.clone();
        fix_f.tls_root_certs = our_f.tls_root_certs.clone();
        let ous = fix_f.fabric_node_ous.as_mut().unwrap();
        for id in [
            &mut ous.client_ou_identifier,
            &mut ous.peer_ou_identifier,
            &mut ous.admin_ou_identifier,
            &mut ous.orderer_ou_identifier,
        ] {
            id.as_mut().unwrap().certificate = ca.clone();
        }
        assert_eq!(our_f, fix_f, "org {org}");
    }
}

/// (type, string tag, value) of each subject/issuer attribute.
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

/// `write_msp_dirs` reproduces cryptogen's tree (all fixture files except the
/// unused peer1.org1, plus the private keys the fixture dropped), the same
/// config.yaml files, and certificates with the same subjects, issuers and
/// extensions (same critical flags and DER values; SKI/AKI by their rule).
#[test]
fn msp_dirs_mirror_cryptogen_layout_and_profiles() {
    let net = network();
    let dir = unique_tmp("mspdirs");
    net.write_msp_dirs(&dir).unwrap();
    let fixture_root = fixture_dir().join("crypto");
    let fixture: BTreeSet<String> =
        files_under(&fixture_root).into_iter().filter(|p| !p.contains("peer1.org1.example.com")).collect();
    let ours = files_under(&dir);
    let missing: Vec<_> = fixture.difference(&ours).collect();
    assert!(missing.is_empty(), "missing: {missing:?}");
    for extra in ours.difference(&fixture) {
        assert!(extra.ends_with("priv_sk") || extra.ends_with(".key"), "unexpected file {extra}");
    }

    for rel in &fixture {
        let (fix_path, our_path) = (fixture_root.join(rel), dir.join(rel));
        if rel.ends_with("config.yaml") {
            assert_eq!(
                std::fs::read_to_string(&fix_path).unwrap(),
                std::fs::read_to_string(&our_path).unwrap(),
                "{rel}"
            );
            continue;
        }
        if rel.ends_with("priv_sk") || rel.ends_with(".key") {
            continue;
        }
        let fix = Certificate::from_pem(std::fs::read(&fix_path).unwrap()).unwrap();
        let our_pem = std::fs::read(&our_path).unwrap();
        assert!(our_pem.ends_with(b"-----END CERTIFICATE-----\n"), "{rel}");
        let our = Certificate::from_pem(&our_pem).unwrap();
        let (f, o) = (&fix.tbs_certificate, &our.tbs_certificate);
        assert_eq!(o.version, f.version, "{rel}");
        assert_eq!(o.signature, f.signature, "{rel}");
        assert_eq!(name_parts(&o.subject), name_parts(&f.subject), "{rel}");
        assert_eq!(name_parts(&o.issuer), name_parts(&f.issuer), "{rel}");
        assert_eq!(o.subject_public_key_info.algorithm, f.subject_public_key_info.algorithm, "{rel}");
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
        // Leaves: AKI = issuer's SKI; the issuer is the org CA in the same dir tree.
        if let Some((_, aki)) = oe.get(AKI) {
            let issuer_cn = o.issuer.to_string();
            let org_dir = rel.split('/').take(2).collect::<Vec<_>>().join("/");
            let ca_dir = if issuer_cn.contains("CN=tlsca") { "tlsca" } else { "ca" };
            let ca_file =
                files_under(&dir.join(&org_dir).join(ca_dir)).into_iter().find(|p| p.ends_with("-cert.pem")).unwrap();
            let ca =
                Certificate::from_pem(std::fs::read(dir.join(&org_dir).join(ca_dir).join(ca_file)).unwrap()).unwrap();
            let ca_ski = Sha256::digest(point(&ca));
            // AKI = SEQUENCE { [0] keyIdentifier }: 30 22 80 20 <32 bytes>.
            assert_eq!(&aki[4..], ca_ski.as_slice(), "{rel}");
            // And the CA really signed it.
            use p256::ecdsa::signature::Verifier;
            let vk = p256::ecdsa::VerifyingKey::from_sec1_bytes(&point(&ca)).unwrap();
            let sig = p256::ecdsa::Signature::from_der(our.signature.raw_bytes()).unwrap();
            vk.verify(&our.tbs_certificate.to_der().unwrap(), &sig).unwrap_or_else(|e| panic!("{rel}: {e}"));
        }
    }

    // Every keystore key matches its signcert.
    for rel in ours.iter().filter(|p| p.ends_with("keystore/priv_sk")) {
        use p256::pkcs8::DecodePrivateKey;
        let key_pem = std::fs::read_to_string(dir.join(rel)).unwrap();
        assert!(key_pem.starts_with("-----BEGIN PRIVATE KEY-----\n"));
        let key = p256::SecretKey::from_pkcs8_pem(&key_pem).unwrap();
        let msp = dir.join(rel).parent().unwrap().parent().unwrap().to_path_buf();
        let signcerts = files_under(&msp.join("signcerts"));
        let cert_file = signcerts.iter().next().unwrap();
        let cert = Certificate::from_pem(std::fs::read(msp.join("signcerts").join(cert_file)).unwrap()).unwrap();
        use p256::elliptic_curve::sec1::ToEncodedPoint;
        assert_eq!(key.public_key().to_encoded_point(false).as_bytes(), point(&cert).as_slice(), "{rel}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
