//! Generated crypto and genesis block against the real cryptogen/configtxgen
//! output in the fixture.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::support::*;
use bytes::Bytes;
use der::DecodePem;
use ferrofabric_protos::common::{Block, ConfigGroup};
use ferrofabric_protos::msp::{FabricMspConfig, MspConfig, SerializedIdentity};
use ferrofabric_testkit::fabric_fixture;
use ferrofabric_testkit::{Network, ORDERER_ORG};
use prost::Message;
use sha2::{Digest, Sha256};
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
    assert_eq!(a.peer(0).sign_deterministic(b"m"), b.peer(0).sign_deterministic(b"m"));
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

/// `write_msp_dirs` reproduces cryptogen's tree (all fixture files except the
/// unused peer1.org1, plus the private keys the fixture dropped) with the same
/// config.yaml files; each member's signcert is the certificate of the
/// identity the network hands out. (Certificate profiles against the fixture
/// are checked in `ferrofabric-cryptogen`'s tests.)
#[test]
fn msp_dirs_mirror_cryptogen_layout() {
    let net = network();
    let dir = unique_tmp("mspdirs");
    net.write_msp_dirs(&dir).unwrap();
    let fixture_root = fabric_fixture("crypto");
    let fixture: BTreeSet<String> =
        files_under(&fixture_root).into_iter().filter(|p| !p.contains("peer1.org1.example.com")).collect();
    let ours = files_under(&dir);
    let missing: Vec<_> = fixture.difference(&ours).collect();
    assert!(missing.is_empty(), "missing: {missing:?}");
    for extra in ours.difference(&fixture) {
        assert!(extra.ends_with("priv_sk") || extra.ends_with(".key"), "unexpected file {extra}");
    }
    for rel in fixture.iter().filter(|r| r.ends_with("config.yaml")) {
        assert_eq!(
            std::fs::read_to_string(fixture_root.join(rel)).unwrap(),
            std::fs::read_to_string(dir.join(rel)).unwrap(),
            "{rel}"
        );
    }
    let signcert = |rel: &str| Bytes::from(std::fs::read(dir.join(rel)).unwrap());
    let id_bytes = |id: &ferrofabric_testkit::SigningIdentity| {
        SerializedIdentity::decode(id.serialized().clone()).unwrap().id_bytes
    };
    let org1 = "peerOrganizations/org1.example.com";
    assert_eq!(
        signcert(&format!("{org1}/peers/peer0.org1.example.com/msp/signcerts/peer0.org1.example.com-cert.pem")),
        id_bytes(net.peer(0))
    );
    assert_eq!(
        signcert(&format!("{org1}/users/User1@org1.example.com/msp/signcerts/User1@org1.example.com-cert.pem")),
        id_bytes(net.client(0))
    );
    assert_eq!(
        signcert(&format!("{org1}/users/Admin@org1.example.com/msp/signcerts/Admin@org1.example.com-cert.pem")),
        id_bytes(net.admin(0))
    );
    let ord =
        "ordererOrganizations/example.com/orderers/orderer.example.com/msp/signcerts/orderer.example.com-cert.pem";
    assert_eq!(signcert(ord), id_bytes(net.orderer()));
    assert_eq!(
        std::fs::read_to_string(dir.join(format!("{org1}/msp/cacerts/ca.org1.example.com-cert.pem"))).unwrap(),
        net.ca_cert_pem(0)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_network_of_five_peer_orgs_has_them_all_in_its_channel_and_is_reproducible() {
    let net = Network::generate_orgs(3, 5).unwrap();
    assert_eq!((net.peer_orgs(), net.orderer_org()), (5, 5));
    assert_eq!(net.mspid(4), "Org5MSP");
    assert_eq!(net.mspid(net.orderer_org()), "OrdererMSP");
    let block = Block::decode(net.genesis_block()).unwrap();
    let config = ferrofabric_channelconfig::ChannelConfig::from_config_block(&block).unwrap();
    let mut mspids: Vec<&str> = config.msp_manager().mspids().collect();
    mspids.sort_unstable();
    assert_eq!(mspids, ["OrdererMSP", "Org1MSP", "Org2MSP", "Org3MSP", "Org4MSP", "Org5MSP"]);
    // Each org's identities validate under the channel's MSPs, with their NodeOU roles.
    for org in 0..5 {
        for id in [net.peer(org), net.client(org), net.admin(org)] {
            config.msp_manager().deserialize_identity(id.serialized()).unwrap().validate().unwrap();
        }
    }
    assert_eq!(Network::generate_orgs(3, 5).unwrap().genesis_block(), net.genesis_block(), "same seed, same bytes");
    assert!(Network::generate_orgs(3, 0).is_err() && Network::generate_orgs(3, 9).is_err());
}
