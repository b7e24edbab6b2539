//! The fixtures' configtx.yaml + crypto folder against the real configtxgen's genesis blocks: Fabric 2.5.16's
//! etcdraft channel in `fixtures/fabric-2.5/genesis.block`, Fabric 3.1.5's BFT channel in
//! `fixtures/fabric-3.1-bft/genesis.block`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use bytes::Bytes;
use ferrofabric_configtxgen::{channel_group, genesis_block, genesis_block_at, ConfigTx, NONCE_SIZE};
use ferrofabric_protos::common::{
    Block, ChannelHeader, ConfigEnvelope, ConfigGroup, Envelope, Payload, SignatureHeader,
};
use ferrofabric_testkit::{fabric_fixtures_dir, fixture};
use prost::Message;

/// A fixture network: its directory, the configtx.yaml profile its genesis block was made from and the channel.
struct Net {
    dir: PathBuf,
    profile: &'static str,
    channel: &'static str,
}

/// Fabric 2.5.16's etcdraft channel.
fn raft_net() -> Net {
    Net { dir: fabric_fixtures_dir(), profile: "AppChannelEtcdRaft", channel: "mychannel" }
}

/// Fabric 3.1.5's BFT channel (4 consenters).
fn bft_net() -> Net {
    Net { dir: fixture("fabric-3.1-bft"), profile: "BFTChannel", channel: "bftchannel" }
}

/// A directory holding the fixture's configtx.yaml with `organizations/` pointing at the fixture's
/// `crypto/` (the paths in the file are relative to its directory).
fn staged_config() -> (tempfile::TempDir, PathBuf) {
    staged(&raft_net())
}

fn staged(net: &Net) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("configtx.yaml");
    std::fs::copy(net.dir.join("configtx.yaml"), &path).unwrap();
    std::os::unix::fs::symlink(net.dir.join("crypto"), tmp.path().join("organizations")).unwrap();
    (tmp, path)
}

struct Parts {
    channel_header: ChannelHeader,
    signature_header: SignatureHeader,
    config_envelope: ConfigEnvelope,
    envelope: Envelope,
    payload: Payload,
}

fn parts(block: &Block) -> Parts {
    let envelope = Envelope::decode(block.data.as_ref().unwrap().data[0].clone()).unwrap();
    let payload = Payload::decode(envelope.payload.clone()).unwrap();
    let header = payload.header.clone().unwrap();
    Parts {
        channel_header: ChannelHeader::decode(header.channel_header).unwrap(),
        signature_header: SignatureHeader::decode(header.signature_header).unwrap(),
        config_envelope: ConfigEnvelope::decode(payload.data.clone()).unwrap(),
        envelope,
        payload,
    }
}

fn fixture_block(net: &Net) -> Block {
    Block::decode(Bytes::from(std::fs::read(net.dir.join("genesis.block")).unwrap())).unwrap()
}

/// Our block generated with the fixture's timestamp and nonce.
fn our_block() -> (Block, Block) {
    our_block_of(&raft_net())
}

fn our_block_of(net: &Net) -> (Block, Block) {
    let fixture = fixture_block(net);
    let fp = parts(&fixture);
    let (_tmp, path) = staged(net);
    let profile = ConfigTx::load(&path).unwrap().profile(net.profile).unwrap();
    let nonce: [u8; NONCE_SIZE] = fp.signature_header.nonce.as_ref().try_into().unwrap();
    let ours = genesis_block_at(&profile, net.channel, fp.channel_header.timestamp.unwrap().seconds, nonce).unwrap();
    (ours, fixture)
}

/// Every group, value and policy path of a tree (`/Channel/Orderer/OrdererOrg/MSP` style).
fn paths(g: &ConfigGroup, prefix: &str, out: &mut BTreeSet<String>) {
    out.insert(format!("{prefix} (group)"));
    out.extend(g.values.keys().map(|k| format!("{prefix}/{k} (value)")));
    out.extend(g.policies.keys().map(|k| format!("{prefix}/{k} (policy)")));
    for (k, sub) in &g.groups {
        paths(sub, &format!("{prefix}/{k}"), out);
    }
}

/// Element by element: same groups, values and policies, same versions and mod_policies, and the bytes
/// of every ConfigValue / ConfigPolicy equal (prost compares `Bytes` fields byte for byte, maps as sets).
fn assert_same_group(ours: &ConfigGroup, theirs: &ConfigGroup, path: &str) {
    assert_eq!(ours.version, theirs.version, "{path} version");
    assert_eq!(ours.mod_policy, theirs.mod_policy, "{path} mod_policy");
    assert_eq!(ours.values.keys().collect::<BTreeSet<_>>(), theirs.values.keys().collect::<BTreeSet<_>>(), "{path}");
    for (k, v) in &theirs.values {
        assert_eq!(ours.values[k].encode_to_vec(), v.encode_to_vec(), "{path}/{k}");
    }
    assert_eq!(
        ours.policies.keys().collect::<BTreeSet<_>>(),
        theirs.policies.keys().collect::<BTreeSet<_>>(),
        "{path}"
    );
    for (k, p) in &theirs.policies {
        assert_eq!(ours.policies[k].encode_to_vec(), p.encode_to_vec(), "{path}/{k}");
    }
    assert_eq!(ours.groups.keys().collect::<BTreeSet<_>>(), theirs.groups.keys().collect::<BTreeSet<_>>(), "{path}");
    for (k, g) in &theirs.groups {
        assert_same_group(&ours.groups[k], g, &format!("{path}/{k}"));
    }
}

/// The headline proof: from the fixture's configtx.yaml and MSP folders we produce the Config configtxgen
/// produced — every group, value, policy, version and mod_policy, with byte-equal ConfigValues and
/// ConfigPolicies — and the same headers, unsigned envelope and metadata.
#[test]
fn fixture_profile_gives_configtxgens_config() {
    assert_gives_configtxgens_config(&raft_net());
}

/// The same for Fabric 3.1.5's BFT profile: the `Orderers` value (consenter mapping with the identities and TLS
/// certificates embedded), the SmartBFT options as `ConsensusType` metadata, and `BlockValidation` replaced by the
/// 3-of-4 signature policy over the consenters' identities.
#[test]
fn bft_profile_gives_configtxgen_3_1s_config() {
    assert_gives_configtxgens_config(&bft_net());
}

fn assert_gives_configtxgens_config(net: &Net) {
    let (ours, fixture) = our_block_of(net);
    let (op, fp) = (parts(&ours), parts(&fixture));
    let (oc, fc) = (op.config_envelope.config.as_ref().unwrap(), fp.config_envelope.config.as_ref().unwrap());
    assert_eq!(oc.sequence, fc.sequence);
    let (og, fg) = (oc.channel_group.as_ref().unwrap(), fc.channel_group.as_ref().unwrap());
    let (mut op_paths, mut fp_paths) = (BTreeSet::new(), BTreeSet::new());
    paths(og, "/Channel", &mut op_paths);
    paths(fg, "/Channel", &mut fp_paths);
    assert_eq!(op_paths, fp_paths);
    assert!(fp_paths.len() > 40, "{fp_paths:?}");
    assert_same_group(og, fg, "/Channel");
    assert_eq!(op.config_envelope, fp.config_envelope);

    assert_eq!(op.channel_header, fp.channel_header);
    assert_eq!(op.signature_header, fp.signature_header);
    assert_eq!(op.payload.header, fp.payload.header, "header bytes");
    assert!(op.envelope.signature.is_empty() && fp.envelope.signature.is_empty());
    assert_eq!(ours.metadata, fixture.metadata);
    let (oh, fh) = (ours.header.as_ref().unwrap(), fixture.header.as_ref().unwrap());
    assert_eq!((oh.number, &oh.previous_hash), (fh.number, &fh.previous_hash));
    assert_eq!(oh.data_hash.as_ref(), sha2_256(&ours.data.as_ref().unwrap().data[0]));
}

fn sha2_256(b: &[u8]) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(b).to_vec()
}

/// Go writes proto maps in random order, so the fixture's bytes are one of many orders. Put its
/// ConfigEnvelope in key order and rebuild the envelope, data hash and block: the result is byte for
/// byte the block we generate.
#[test]
fn fixture_block_in_key_order_is_byte_identical() {
    for net in [raft_net(), bft_net()] {
        assert_byte_identical_in_key_order(&net);
    }
}

fn assert_byte_identical_in_key_order(net: &Net) {
    let (ours, fixture) = our_block_of(net);
    let fp = parts(&fixture);
    let payload = Payload {
        header: fp.payload.header.clone(),
        data: ferrofabric_configtx::marshal_config_envelope(&fp.config_envelope),
    };
    let envelope = Bytes::from(
        Envelope { payload: Bytes::from(payload.encode_to_vec()), signature: Bytes::new() }.encode_to_vec(),
    );
    let mut canonical = fixture.clone();
    canonical.data.as_mut().unwrap().data = vec![envelope.clone()];
    canonical.header.as_mut().unwrap().data_hash = Bytes::from(sha2_256(&envelope));
    assert_eq!(ours.encode_to_vec(), canonical.encode_to_vec());
    // And the fixture's own bytes are just another order of the same fields.
    assert_eq!(fixture.encode_to_vec().len(), ours.encode_to_vec().len());
}

/// Ferrofabric's channel-config loader and validator take the block, and what they read is the fixture
/// network: orderer addresses, Raft consenter, batch settings, both application orgs.
#[test]
fn policy_and_validator_accept_the_block() {
    let (ours, _) = our_block();
    let cfg = ferrofabric_channelconfig::ChannelConfig::from_config_block(&ours).unwrap();
    assert_eq!(cfg.channel_id(), "mychannel");
    assert_eq!(cfg.orderer_addresses(), ["127.0.0.1:7050"]);
    let orderer = cfg.orderer().unwrap();
    assert_eq!(orderer.consensus_type(), "etcdraft");
    assert_eq!(orderer.batch_size().max_message_count, 100);
    assert_eq!(orderer.batch_timeout(), std::time::Duration::from_secs(2));
    let app = cfg.application().unwrap();
    assert_eq!(app.organizations().keys().collect::<Vec<_>>(), ["Org1MSP", "Org2MSP"]);
    for path in [
        "/Channel/Application/Endorsement",
        "/Channel/Orderer/BlockValidation",
        "/Channel/Application/Org1MSP/Endorsement",
    ] {
        assert!(cfg.policy(path).is_some(), "{path}");
    }
    let validator = ferrofabric_validator::Validator::new(
        Bytes::from(ours.encode_to_vec()),
        ferrofabric_validator::ValidatorOptions { threads: 1 },
    );
    assert!(validator.is_ok(), "{:?}", validator.err());
}

/// `genesis_block` stamps the current second and a fresh nonce, with the txid derived from it.
#[test]
fn fresh_blocks_have_new_nonce_txid_and_current_time() {
    let (_tmp, path) = staged_config();
    let profile = ConfigTx::load(&path).unwrap().profile("AppChannelEtcdRaft").unwrap();
    let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    let (a, b) = (genesis_block(&profile, "mychannel").unwrap(), genesis_block(&profile, "other").unwrap());
    let (pa, pb) = (parts(&a), parts(&b));
    assert_ne!(pa.signature_header.nonce, pb.signature_header.nonce);
    assert_eq!(pa.signature_header.nonce.len(), NONCE_SIZE);
    assert!(pa.signature_header.creator.is_empty());
    assert_eq!(pa.channel_header.tx_id, hex::encode(sha2_256(&pa.signature_header.nonce)));
    assert_eq!(pb.channel_header.channel_id, "other");
    let ts = pa.channel_header.timestamp.unwrap();
    assert!(ts.seconds >= before && ts.seconds <= before + 5 && ts.nanos == 0);
    assert_eq!(pa.config_envelope, pb.config_envelope);
    // The group alone is the same tree as inside the block.
    assert_eq!(Some(channel_group(&profile).unwrap()), pa.config_envelope.config.unwrap().channel_group);
}

/// Paths are relative to the file's directory (not the working directory): MSP folders and consenter
/// certificates resolve under it, and when the material is not there the error names the file.
#[test]
fn paths_resolve_against_the_config_directory() {
    let (tmp, path) = staged_config();
    let profile = ConfigTx::load(&path).unwrap().profile("AppChannelEtcdRaft").unwrap();
    let org = &profile.application.as_ref().unwrap().organizations[0];
    assert_eq!(org.msp_dir, tmp.path().join("organizations/peerOrganizations/org1.example.com/msp"));
    assert_eq!(org.msp_type, "bccsp");
    let consenter = &profile.orderer.as_ref().unwrap().etcd_raft.as_ref().unwrap().consenters[0];
    let cert =
        tmp.path().join("organizations/ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt");
    assert_eq!(consenter.server_tls_cert, cert);
    std::fs::remove_file(tmp.path().join("organizations")).unwrap();
    std::fs::create_dir(tmp.path().join("organizations")).unwrap();
    match genesis_block(&profile, "mychannel") {
        Err(ferrofabric_configtxgen::ConfigtxgenError::Io { path, .. }) => assert_eq!(path, cert),
        other => panic!("expected an I/O error on the consenter certificate, got {other:?}"),
    }
}

/// configtxgen 3.1's rules for BFT profiles: BFT needs the V3_0 channel capability, and V3_0 forbids global
/// orderer addresses; each is refused with Fabric's message.
#[test]
fn bft_profile_needs_v3_0_and_no_global_orderer_addresses() {
    let net = bft_net();
    let (_tmp, path) = staged(&net);
    let text = std::fs::read_to_string(&path).unwrap();
    let generate = |yaml: String| {
        std::fs::write(&path, yaml).unwrap();
        let profile = ConfigTx::load(&path).unwrap().profile(net.profile).unwrap();
        genesis_block(&profile, net.channel).unwrap_err().to_string()
    };
    let err = generate(text.replace("    V3_0: true", "    V2_0: true"));
    assert!(err.contains("orderer type BFT must be used with V3_0 channel capability: map[V2_0:true]"), "{err}");
    let err = generate(text.replace("  OrdererType: BFT\n", "  OrdererType: BFT\n  Addresses:\n  - 127.0.0.1:7050\n"));
    assert!(err.contains("global orderer endpoints exist, but can not be used with V3_0 capability"), "{err}");
}
