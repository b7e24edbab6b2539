//! ChannelConfig parsing of the real Fabric 2.5 genesis block, and rejection of malformed configs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use ferrofabric_channelconfig::{ChannelConfig, PolicyError};
use ferrofabric_protos::common::{Block, ConfigEnvelope, ConfigGroup, Envelope, Payload};
use prost::Message;

fn genesis_config_envelope() -> ConfigEnvelope {
    let block = support::genesis_block();
    let env = Envelope::decode(block.data.unwrap().data[0].clone()).unwrap();
    let payload = Payload::decode(env.payload).unwrap();
    ConfigEnvelope::decode(payload.data).unwrap()
}

#[test]
fn genesis_block_gives_channel_orgs_and_capabilities() {
    let cc = support::channel_config();
    assert_eq!(cc.channel_id(), "mychannel");
    assert_eq!(cc.sequence(), 0);
    assert_eq!(cc.hashing_algorithm(), "SHA256");
    assert_eq!(cc.block_data_hashing_width(), u32::MAX);
    assert_eq!(cc.orderer_addresses(), ["127.0.0.1:7050".to_owned()]);

    let caps = cc.capabilities();
    assert!(caps.channel.contains("V2_0"), "{caps:?}");
    assert!(caps.orderer.contains("V2_0"), "{caps:?}");
    assert!(caps.application.contains("V2_5"), "{caps:?}");
    assert!(caps.org_specific_orderer_endpoints());

    let app = cc.application().expect("application group");
    let app_msps: Vec<&str> = app.organizations().values().map(|o| o.mspid()).collect();
    assert_eq!(app_msps, ["Org1MSP", "Org2MSP"]);
    let orderer = cc.orderer().expect("orderer group");
    let ord_msps: Vec<&str> = orderer.organizations().values().map(|o| o.mspid()).collect();
    assert_eq!(ord_msps, ["OrdererMSP"]);
    assert_eq!(orderer.organizations()["OrdererOrg"].endpoints(), ["127.0.0.1:7050".to_owned()]);
    for mspid in ["Org1MSP", "Org2MSP", "OrdererMSP"] {
        assert!(cc.msp_manager().msp(mspid).is_some(), "{mspid} missing from the MSP manager");
    }
}

#[test]
fn genesis_block_gives_orderer_values() {
    let cc = support::channel_config();
    let orderer = cc.orderer().unwrap();
    let size = orderer.batch_size();
    assert_eq!(size.max_message_count, 100);
    assert_eq!(size.absolute_max_bytes, 99 * 1024 * 1024);
    assert_eq!(size.preferred_max_bytes, 8 * 1024 * 1024);
    assert_eq!(orderer.batch_timeout(), Duration::from_secs(2));
    assert_eq!(orderer.consensus_type(), "etcdraft");
    assert!(!orderer.consensus_metadata().is_empty(), "etcdraft metadata expected");
    assert_eq!(orderer.consensus_state(), 0);
}

#[test]
fn genesis_block_has_the_standard_policy_paths() {
    let cc = support::channel_config();
    for path in [
        "/Channel/Readers",
        "/Channel/Writers",
        "/Channel/Admins",
        "/Channel/Application/Readers",
        "/Channel/Application/Writers",
        "/Channel/Application/Admins",
        "/Channel/Application/Endorsement",
        "/Channel/Application/LifecycleEndorsement",
        "/Channel/Application/Org1MSP/Endorsement",
        "/Channel/Application/Org2MSP/Readers",
        "/Channel/Orderer/BlockValidation",
        "/Channel/Orderer/OrdererOrg/Writers",
        "Application/Endorsement",
    ] {
        assert!(cc.policy(path).is_some(), "{path} missing");
    }
    for path in ["", "/Channel", "/Channel/Nope", "/Other/Readers", "/Channel/Application/Org3MSP/Readers"] {
        assert!(cc.policy(path).is_none(), "{path} should not resolve");
    }
    let paths: Vec<String> = cc.policy_paths().collect();
    assert!(paths.contains(&"/Channel/Orderer/BlockValidation".to_owned()));
    assert!(paths.iter().all(|p| p.starts_with("/Channel/")));
}

#[test]
fn config_envelope_without_last_update_needs_a_channel_id() {
    let env = genesis_config_envelope();
    assert!(env.last_update.is_none());
    let err = ChannelConfig::from_config_envelope(&env).unwrap_err();
    assert!(matches!(err, PolicyError::InvalidConfig { .. }), "{err:?}");
    let cc = ChannelConfig::from_config("other", env.config.as_ref().unwrap()).unwrap();
    assert_eq!(cc.channel_id(), "other");
}

/// Apply `edit` to the genesis config's channel group and return the error of parsing it.
fn config_error(edit: impl FnOnce(&mut ConfigGroup)) -> PolicyError {
    let mut config = genesis_config_envelope().config.unwrap();
    edit(config.channel_group.as_mut().unwrap());
    ChannelConfig::from_config("mychannel", &config).unwrap_err()
}

fn assert_config_error_at(err: PolicyError, path: &str) {
    match &err {
        PolicyError::InvalidConfig { path: p, .. }
        | PolicyError::InvalidPolicy { path: p, .. }
        | PolicyError::Msp { path: p, .. } => assert_eq!(p, path, "{err}"),
        other => panic!("unexpected error {other:?}"),
    }
}

#[test]
fn bad_value_bytes_are_reported_with_their_path() {
    let err = config_error(|root| {
        let orderer = root.groups.get_mut("Orderer").unwrap();
        orderer.values.get_mut("BatchSize").unwrap().value = Bytes::from_static(&[0xff, 0xff, 0xff]);
    });
    assert_config_error_at(err, "/Channel/Orderer/BatchSize");

    let err = config_error(|root| {
        let org = root.groups.get_mut("Application").unwrap().groups.get_mut("Org1MSP").unwrap();
        org.values.get_mut("MSP").unwrap().value = Bytes::from_static(&[0x0a, 0x05, 0x01]);
    });
    assert_config_error_at(err, "/Channel/Application/Org1MSP/MSP");
}

#[test]
fn invalid_orderer_values_are_rejected() {
    let err = config_error(|root| {
        let orderer = root.groups.get_mut("Orderer").unwrap();
        orderer.values.get_mut("BatchTimeout").unwrap().value =
            ferrofabric_protos::orderer::BatchTimeout { timeout: "0s".into() }.encode_to_vec().into();
    });
    assert_config_error_at(err, "/Channel/Orderer/BatchTimeout");

    let err = config_error(|root| {
        let orderer = root.groups.get_mut("Orderer").unwrap();
        orderer.values.get_mut("BatchSize").unwrap().value = ferrofabric_protos::orderer::BatchSize {
            max_message_count: 10,
            absolute_max_bytes: 100,
            preferred_max_bytes: 200,
        }
        .encode_to_vec()
        .into();
    });
    assert_config_error_at(err, "/Channel/Orderer/BatchSize");
}

#[test]
fn disallowed_groups_keys_and_policy_types_are_rejected() {
    let err = config_error(|root| {
        root.groups.insert("Bogus".into(), ConfigGroup::default());
    });
    assert_config_error_at(err, "/Channel/Bogus");

    let err = config_error(|root| {
        let value = root.values["HashingAlgorithm"].clone();
        root.values.insert("Surprise".into(), value);
    });
    assert_config_error_at(err, "/Channel/Surprise");

    let err = config_error(|root| {
        let org = root.groups.get_mut("Application").unwrap().groups.get_mut("Org2MSP").unwrap();
        org.groups.insert("Sub".into(), ConfigGroup::default());
    });
    assert_config_error_at(err, "/Channel/Application/Org2MSP/Sub");

    let err = config_error(|root| {
        let policy = root.policies.get_mut("Readers").unwrap().policy.as_mut().unwrap();
        policy.r#type = 9;
    });
    assert_config_error_at(err, "/Channel/Readers");

    let err = config_error(|root| {
        let org = root.groups.get_mut("Application").unwrap().groups.get_mut("Org1MSP").unwrap();
        let policy = org.policies.get_mut("Admins").unwrap().policy.as_mut().unwrap();
        policy.value = Bytes::from_static(&[0x12, 0x7f]);
    });
    assert_config_error_at(err, "/Channel/Application/Org1MSP/Admins");
}

#[test]
fn msp_type_policy_loads_but_fails_on_evaluation() {
    let mut config = genesis_config_envelope().config.unwrap();
    let root = config.channel_group.as_mut().unwrap();
    root.policies.get_mut("Admins").unwrap().policy.as_mut().unwrap().r#type = 2;
    let cc = ChannelConfig::from_config("mychannel", &config).unwrap();
    let set = ferrofabric_channelconfig::SignatureSet::new(Vec::new(), cc.msp_manager());
    let err = cc.policy("/Channel/Admins").unwrap().evaluate(&set).unwrap_err();
    assert!(matches!(err, PolicyError::UnsupportedPolicyType { policy_type: 2, .. }), "{err:?}");
}

#[test]
fn non_config_blocks_are_rejected() {
    let blocks = support::orderer_blocks();
    let err = ChannelConfig::from_config_block(&blocks[1]).unwrap_err();
    assert!(matches!(err, PolicyError::InvalidConfig { .. }), "{err:?}");
    let err = ChannelConfig::from_config_block(&Block::default()).unwrap_err();
    assert!(matches!(err, PolicyError::InvalidConfig { .. }), "{err:?}");
}

#[test]
fn illegal_channel_ids_and_element_names_are_rejected() {
    let config = genesis_config_envelope().config.unwrap();
    for bad in ["", "MyChannel", "1chan", "chan_nel", &"a".repeat(250)] {
        let err = ChannelConfig::from_config(bad, &config).unwrap_err();
        assert_config_error_at(err, "channel ID");
    }
    assert!(ChannelConfig::from_config("my.chan-1", &config).is_ok());

    let err = config_error(|root| {
        let policy = root.policies["Readers"].clone();
        root.policies.insert("Read/ers".into(), policy);
    });
    assert_config_error_at(err, "/Channel/Read/ers");
    let err = config_error(|root| {
        let app = root.groups.remove("Application").unwrap();
        root.groups.insert("..".into(), app);
    });
    assert_config_error_at(err, "/Channel/..");
}
