//! configtxgen over crypto made by `ferrofabric-cryptogen`: solo, etcdraft and system-channel profiles,
//! ACLs, anchor peers, endpoints; the block's policies judged with the generated identities; bad profiles
//! (the `ferrofabric channel` command is tested in the CLI crate).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use bytes::Bytes;
use ferrofabric_channelconfig::{ChannelConfig, SignatureSet, SignedData};
use ferrofabric_configtxgen::{genesis_block, ConfigTx, ConfigtxgenError};
use ferrofabric_cryptogen::Crypto;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{ConfigEnvelope, Envelope, Payload};
use ferrofabric_protos::orderer::ConsensusType;
use prost::Message;

use crate::support::{block_for, network, CONFIGTX};

fn id(crypto: &Crypto, domain: &str, cn: &str, mspid: &str) -> SigningIdentity {
    crypto.org(domain).unwrap().member(cn).unwrap().signing_identity(mspid).unwrap()
}

fn satisfied(cfg: &ChannelConfig, path: &str, signers: &[&SigningIdentity]) -> bool {
    let items = signers
        .iter()
        .map(|s| SignedData {
            data: Bytes::from_static(b"msg"),
            identity: s.serialized().clone(),
            signature: Bytes::from(s.sign(b"msg")),
        })
        .collect();
    let set = SignatureSet::new(items, cfg.msp_manager());
    cfg.policy(path).unwrap().evaluate(&set).is_ok()
}

/// The solo profile: the config loader accepts it, reads back every setting, and its policies judge the
/// generated identities by NodeOU role (orderer signs blocks, peers endorse, admins administer).
#[test]
fn solo_profile_works_with_generated_identities() {
    let (tmp, crypto) = network();
    let block = block_for(tmp.path(), "Solo").unwrap();
    let cfg = ChannelConfig::from_config_block(&block).unwrap();
    assert_eq!(cfg.channel_id(), "testchannel");
    let orderer = cfg.orderer().unwrap();
    assert_eq!(orderer.consensus_type(), "solo");
    assert!(orderer.consensus_metadata().is_empty());
    assert_eq!(orderer.batch_timeout(), std::time::Duration::from_millis(250));
    assert_eq!(orderer.batch_size().absolute_max_bytes, 1 << 20);
    assert_eq!(orderer.batch_size().preferred_max_bytes, 512 << 10);
    assert_eq!(orderer.organizations()["OrdererOrg"].endpoints(), ["orderer.example.com:7050"]);
    let app = cfg.application().unwrap();
    assert_eq!(app.acl_policy("peer/Propose"), Some("/Channel/Application/Writers"));
    assert_eq!(app.acls().len(), 2);
    let anchors = app.organizations()["Org1MSP"].anchor_peers();
    assert_eq!((anchors[0].host.as_str(), anchors[0].port), ("peer0.org1.example.com", 7051));
    assert!(app.organizations()["Org2MSP"].anchor_peers().is_empty());

    // Capabilities keep only `true` entries.
    let env = Envelope::decode(block.data.as_ref().unwrap().data[0].clone()).unwrap();
    let config = ConfigEnvelope::decode(Payload::decode(env.payload).unwrap().data).unwrap().config.unwrap();
    let app_caps = &config.channel_group.as_ref().unwrap().groups["Application"].values["Capabilities"];
    let caps = ferrofabric_protos::common::Capabilities::decode(app_caps.value.clone()).unwrap();
    assert_eq!(caps.capabilities.keys().collect::<Vec<_>>(), ["V2_5"]);

    let orderer_id = id(&crypto, "example.com", "orderer.example.com", "OrdererMSP");
    let peer1 = id(&crypto, "org1.example.com", "peer0.org1.example.com", "Org1MSP");
    let peer2 = id(&crypto, "org2.example.com", "peer0.org2.example.com", "Org2MSP");
    let user1 = id(&crypto, "org1.example.com", "User1@org1.example.com", "Org1MSP");
    let admin1 = id(&crypto, "org1.example.com", "Admin@org1.example.com", "Org1MSP");
    let admin2 = id(&crypto, "org2.example.com", "Admin@org2.example.com", "Org2MSP");
    assert!(satisfied(&cfg, "/Channel/Orderer/BlockValidation", &[&orderer_id]));
    assert!(!satisfied(&cfg, "/Channel/Orderer/BlockValidation", &[&peer1]));
    assert!(satisfied(&cfg, "/Channel/Application/Writers", &[&user1]));
    assert!(!satisfied(&cfg, "/Channel/Application/Writers", &[&peer1]));
    assert!(satisfied(&cfg, "/Channel/Application/Endorsement", &[&peer1, &peer2]));
    assert!(!satisfied(&cfg, "/Channel/Application/Endorsement", &[&peer1]));
    assert!(satisfied(&cfg, "/Channel/Application/LifecycleEndorsement", &[&peer1, &peer2]));
    assert!(!satisfied(&cfg, "/Channel/Application/LifecycleEndorsement", &[&peer2, &admin2]));
    assert!(satisfied(&cfg, "/Channel/Application/Admins", &[&admin1, &admin2]));
    assert!(!satisfied(&cfg, "/Channel/Application/Admins", &[&admin1, &user1]));

    let validator = ferrofabric_validator::Validator::new(
        Bytes::from(block.encode_to_vec()),
        ferrofabric_validator::ValidatorOptions { threads: 1 },
    );
    assert!(validator.is_ok(), "{:?}", validator.err());
}

/// etcdraft: the consenter's TLS certificate file is embedded and the given options override the
/// defaults only where set.
#[test]
fn raft_profile_embeds_consenter_certificates() {
    let (tmp, crypto) = network();
    let block = block_for(tmp.path(), "Raft").unwrap();
    let cfg = ChannelConfig::from_config_block(&block).unwrap();
    let orderer = cfg.orderer().unwrap();
    assert_eq!(orderer.consensus_type(), "etcdraft");
    let md = ferrofabric_protos::etcdraft::ConfigMetadata::decode(orderer.consensus_metadata().clone()).unwrap();
    let tls = crypto.org("example.com").unwrap().member("orderer.example.com").unwrap().tls_cert_pem();
    assert_eq!(md.consenters.len(), 1);
    assert_eq!(md.consenters[0].host, "orderer.example.com");
    assert_eq!(md.consenters[0].port, 7050);
    assert_eq!(md.consenters[0].server_tls_cert.as_ref(), tls.as_bytes());
    assert_eq!(md.consenters[0].client_tls_cert.as_ref(), tls.as_bytes());
    let o = md.options.unwrap();
    assert_eq!((o.tick_interval.as_str(), o.election_tick, o.heartbeat_tick), ("100ms", 10, 1));
    assert_eq!((o.max_inflight_blocks, o.snapshot_interval_size), (5, 1 << 20));
}

/// Fabric 2.5 still encodes `kafka`: a `KafkaBrokers` value (default broker when none is given) and a
/// metadata-less ConsensusType.
#[test]
fn kafka_profile_lists_brokers() {
    let (tmp, _) = network();
    std::fs::write(tmp.path().join("configtx.yaml"), CONFIGTX.replacen("OrdererType: solo", "OrdererType: kafka", 1))
        .unwrap();
    let block = block_for(tmp.path(), "Solo").unwrap();
    let cfg = ChannelConfig::from_config_block(&block).unwrap();
    let orderer = cfg.orderer().unwrap();
    assert_eq!(orderer.consensus_type(), "kafka");
    assert_eq!(orderer.kafka_brokers(), ["127.0.0.1:9092"]);
}

/// A system-channel profile gets the Consortiums group (accept-all Admins, ChannelCreationPolicy) and no
/// Application group; a profile with neither is refused, as configtxgen refuses it.
#[test]
fn consortiums_profile_and_refusals() {
    let (tmp, _) = network();
    let block = block_for(tmp.path(), "System").unwrap();
    let env = Envelope::decode(block.data.as_ref().unwrap().data[0].clone()).unwrap();
    let config = ConfigEnvelope::decode(Payload::decode(env.payload).unwrap().data).unwrap().config.unwrap();
    let root = config.channel_group.unwrap();
    assert!(!root.groups.contains_key("Application"));
    let consortiums = &root.groups["Consortiums"];
    assert_eq!(consortiums.mod_policy, "/Channel/Orderer/Admins");
    assert_eq!(consortiums.policies["Admins"].mod_policy, "/Channel/Orderer/Admins");
    let sample = &consortiums.groups["SampleConsortium"];
    assert_eq!(sample.groups.keys().collect::<std::collections::BTreeSet<_>>().len(), 2);
    assert_eq!(sample.values["ChannelCreationPolicy"].mod_policy, "/Channel/Orderer/Admins");
    assert_eq!(sample.groups["Org1MSP"].mod_policy, "Admins");
    let ct = ConsensusType::decode(root.groups["Orderer"].values["ConsensusType"].value.clone()).unwrap();
    assert_eq!(ct.r#type, "solo");

    let err = block_for(tmp.path(), "NoApplication").unwrap_err();
    assert!(err.to_string().contains("missing application section"), "{err}");
    assert!(matches!(block_for(tmp.path(), "Nope"), Err(ConfigtxgenError::Profile(_))));
}

/// Broken profiles give clear errors: bad policy rule (with its path), unknown policy type, missing
/// required policy, missing MSP folder (named by organisation), missing consenter certificate, bad channel
/// ID, idemix MSPs.
#[test]
fn bad_profiles_are_errors() {
    let (tmp, _) = network();
    let with = |from: &str, to: &str| {
        std::fs::write(tmp.path().join("configtx.yaml"), CONFIGTX.replacen(from, to, 1)).unwrap();
        block_for(tmp.path(), "Solo").unwrap_err().to_string()
    };
    let e = with("OR('Org1MSP.peer')\"}", "OR('Org1MSP.boss')\"}");
    assert!(e.contains("Org1MSP.boss") && e.contains("/Channel/Application/Org1MSP/Endorsement"), "{e}");
    assert!(
        with("{Type: ImplicitMeta, Rule: \"ANY Readers\"}", "{Type: Magic, Rule: x}").contains("unknown policy type")
    );
    assert!(with("BlockValidation: {Type: ImplicitMeta, Rule: \"ANY Writers\"}", "").contains("BlockValidation"));
    let e = with("org2.example.com/msp", "org3.example.com/msp");
    assert!(e.contains("Org2MSP") && e.contains("cacerts"), "{e}");
    assert!(with(
        "MSPDir: crypto/peerOrganizations/org1",
        "MSPType: idemix\n    MSPDir: crypto/peerOrganizations/org1"
    )
    .contains("idemix"));

    std::fs::write(
        tmp.path().join("configtx.yaml"),
        CONFIGTX.replace("orderer.example.com/tls/server.crt\n            Server", "nothere.crt\n            Server"),
    )
    .unwrap();
    assert!(
        matches!(block_for(tmp.path(), "Raft"), Err(ConfigtxgenError::Io { path, .. }) if path.ends_with("nothere.crt"))
    );

    std::fs::write(tmp.path().join("configtx.yaml"), CONFIGTX).unwrap();
    let profile = ConfigTx::load(&tmp.path().join("configtx.yaml")).unwrap().profile("Solo").unwrap();
    for bad in ["", "MyChannel", "1chan", "a_b", &"a".repeat(250)] {
        assert!(matches!(genesis_block(&profile, bad), Err(ConfigtxgenError::ChannelId(_))), "{bad:?}");
    }
    assert!(genesis_block(&profile, &"a".repeat(249)).is_ok());
    assert!(matches!(ConfigTx::load(&tmp.path().join("none.yaml")), Err(ConfigtxgenError::Io { .. })));
    assert!(matches!(ConfigTx::from_yaml("Profiles: [", tmp.path()), Err(ConfigtxgenError::Yaml(_))));
}
