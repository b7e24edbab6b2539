//! `ConfigTxValidator::propose` / `validate` on a generated network (every admin key known) and on the real
//! Fabric 2.5 fixture genesis block.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;

use crate::support::{fixture_genesis, fixture_identity, net};
use bytes::Bytes;
use ferrofabric_channelconfig::{AnchorPeer, ChannelConfig, PolicyError};
use ferrofabric_configtx::{
    anchor_peer_update, compute_update, config_update_envelope, ConfigTxError, ConfigTxValidator,
};
use ferrofabric_protos::common::{
    ChannelHeader, Config, ConfigEnvelope, ConfigGroup, ConfigUpdate, Envelope, HeaderType, Payload, Status,
};
use prost::Message;

const CHANNEL: &str = "mychannel";
const HOST: &str = "peer0.org1.example.com";
const PORT: i32 = 7051;

fn group<'a>(config: &'a Config, path: &[&str]) -> &'a ConfigGroup {
    let mut g = config.channel_group.as_ref().unwrap();
    for name in path {
        g = &g.groups[*name];
    }
    g
}

fn anchor_update(config: &ChannelConfig, host: &str, port: i32) -> ConfigUpdate {
    anchor_peer_update(CHANNEL, config.config(), "Org1MSP", host, port).unwrap()
}

/// Submitted by Org1's client, signed by `signers`.
fn submit(update: &ConfigUpdate, signers: &[&ferrofabric_msp::SigningIdentity]) -> Envelope {
    config_update_envelope(CHANNEL, update, signers, &net().client(0))
}

/// Apply the first anchor peer update with Org1's admin signature: (update envelope, resulting config).
fn first_anchor_peer() -> (Envelope, ConfigEnvelope) {
    let current = net().genesis_config();
    let env = submit(&anchor_update(&current, HOST, PORT), &[&net().admin(0)]);
    let result = ConfigTxValidator::new(current).unwrap().propose(&env).unwrap();
    (env, result)
}

fn expect_forbidden(err: ConfigTxError) {
    assert!(err.is_forbidden(), "{err}");
    assert_eq!(err.status(), Status::BadRequest, "Fabric answers BAD_REQUEST for config-update policy failures");
    match err {
        ConfigTxError::PolicyNotSatisfied { element, policy, source } => {
            assert_eq!(element, "[Group]  /Channel/Application/Org1MSP");
            assert_eq!(policy, "/Channel/Application/Org1MSP/Admins");
            assert_eq!(source, PolicyError::SignatureSetNotSatisfied);
        }
        other => panic!("expected PolicyNotSatisfied, got {other:?}"),
    }
}

#[test]
fn generated_admins_are_the_testkit_admins() {
    // The identities loaded from the written MSP directories are the ones `Network::admin` hands out.
    assert_eq!(net().admin(0).serialized(), net().network.admin(0).serialized());
    assert_eq!(net().client(0).serialized(), net().network.client(0).serialized());
}

#[test]
fn anchor_peer_update_has_configtxlator_shape() {
    let current = net().genesis_config();
    let update = anchor_update(&current, HOST, PORT);
    assert_eq!(update.channel_id, CHANNEL);
    // The org has no AnchorPeers yet, so the org group gains a member and is re-written at version + 1.
    let read_org = &update.read_set.as_ref().unwrap().groups["Application"].groups["Org1MSP"];
    let write_org = &update.write_set.as_ref().unwrap().groups["Application"].groups["Org1MSP"];
    assert_eq!(read_org.version, 0);
    assert_eq!(write_org.version, 1);
    assert_eq!(write_org.mod_policy, "Admins");
    let anchors = &write_org.values["AnchorPeers"];
    assert_eq!((anchors.version, anchors.mod_policy.as_str()), (0, "Admins"));
    // Unchanged members are listed at their versions in both sets.
    assert_eq!(read_org.values["MSP"].version, 0);
    assert_eq!(write_org.values["MSP"].version, 0);
    assert_eq!(write_org.policies.len(), 4);
    // Org2MSP is untouched and therefore absent.
    assert!(!update.write_set.as_ref().unwrap().groups["Application"].groups.contains_key("Org2MSP"));
}

#[test]
fn org1_admin_adds_an_anchor_peer() {
    let current = net().genesis_config();
    let (env, result) = first_anchor_peer();
    let config = result.config.as_ref().unwrap();
    assert_eq!(config.sequence, current.sequence() + 1);
    assert_eq!(result.last_update.as_ref(), Some(&env));

    let next = ChannelConfig::from_config(CHANNEL, config).unwrap();
    let org1 = &next.application().unwrap().organizations()["Org1MSP"];
    assert_eq!(org1.anchor_peers(), [AnchorPeer { host: HOST.into(), port: PORT }]);
    let org_group = group(config, &["Application", "Org1MSP"]);
    assert_eq!(org_group.version, 1);
    assert_eq!(org_group.values["AnchorPeers"].version, 0);
    // Everything outside Org1MSP is the current config, untouched.
    let before = current.config();
    assert_eq!(group(config, &["Application", "Org2MSP"]), group(before, &["Application", "Org2MSP"]));
    assert_eq!(group(config, &["Orderer"]), group(before, &["Orderer"]));
    assert_eq!(org_group.values["MSP"], group(before, &["Application", "Org1MSP"]).values["MSP"]);
    assert_eq!(org_group.policies, group(before, &["Application", "Org1MSP"]).policies);

    // A committer re-validating the CONFIG transaction reaches the same result.
    ConfigTxValidator::new(current).unwrap().validate(&result).unwrap();
}

#[test]
fn second_anchor_peer_writes_the_value_at_version_plus_one() {
    let (_, result) = first_anchor_peer();
    let current = Arc::new(ChannelConfig::from_config(CHANNEL, result.config.as_ref().unwrap()).unwrap());
    let update = anchor_update(&current, "peer1.org1.example.com", 8051);
    let write_org = &update.write_set.as_ref().unwrap().groups["Application"].groups["Org1MSP"];
    assert_eq!(write_org.version, 1, "membership unchanged: the org group keeps its version");
    assert_eq!(write_org.values.len(), 1);
    assert_eq!(write_org.values["AnchorPeers"].version, 1);

    let next = ConfigTxValidator::new(current).unwrap().propose(&submit(&update, &[&net().admin(0)])).unwrap();
    let config = next.config.as_ref().unwrap();
    assert_eq!(config.sequence, 2);
    assert_eq!(group(config, &["Application", "Org1MSP"]).values["AnchorPeers"].version, 1);
    let parsed = ChannelConfig::from_config(CHANNEL, config).unwrap();
    assert_eq!(
        parsed.application().unwrap().organizations()["Org1MSP"].anchor_peers(),
        [
            AnchorPeer { host: HOST.into(), port: PORT },
            AnchorPeer { host: "peer1.org1.example.com".into(), port: 8051 }
        ]
    );
}

#[test]
fn unsigned_update_is_forbidden() {
    let current = net().genesis_config();
    let env = submit(&anchor_update(&current, HOST, PORT), &[]);
    expect_forbidden(ConfigTxValidator::new(current).unwrap().propose(&env).unwrap_err());
}

#[test]
fn client_signed_update_is_forbidden() {
    let current = net().genesis_config();
    let env = submit(&anchor_update(&current, HOST, PORT), &[&net().client(0)]);
    expect_forbidden(ConfigTxValidator::new(current).unwrap().propose(&env).unwrap_err());
}

#[test]
fn other_org_admin_cannot_change_org1() {
    let current = net().genesis_config();
    let env = submit(&anchor_update(&current, HOST, PORT), &[&net().admin(1)]);
    expect_forbidden(ConfigTxValidator::new(current).unwrap().propose(&env).unwrap_err());
}

#[test]
fn signature_over_other_bytes_is_forbidden() {
    let current = net().genesis_config();
    let mut env = submit(&anchor_update(&current, HOST, PORT), &[&net().admin(0)]);
    // Swap in the admin's signature of a different update: the header verifies nothing it did not sign.
    let other = submit(&anchor_update(&current, "elsewhere", 1), &[&net().admin(0)]);
    let mut payload = Payload::decode(env.payload.clone()).unwrap();
    let mut update_env = ferrofabric_protos::common::ConfigUpdateEnvelope::decode(payload.data.clone()).unwrap();
    let other_payload = Payload::decode(other.payload).unwrap();
    let other_env = ferrofabric_protos::common::ConfigUpdateEnvelope::decode(other_payload.data).unwrap();
    update_env.signatures = other_env.signatures;
    payload.data = Bytes::from(update_env.encode_to_vec());
    env.payload = Bytes::from(payload.encode_to_vec());
    expect_forbidden(ConfigTxValidator::new(current).unwrap().propose(&env).unwrap_err());
}

#[test]
fn stale_read_set_is_refused() {
    let (env, result) = first_anchor_peer();
    // Replaying the sequence-0 update on the sequence-1 config: Org1MSP has moved to version 1.
    let current = Arc::new(ChannelConfig::from_config(CHANNEL, result.config.as_ref().unwrap()).unwrap());
    let err = ConfigTxValidator::new(current).unwrap().propose(&env).unwrap_err();
    assert_eq!(
        err,
        ConfigTxError::ReadSetVersion {
            element: "[Group]  /Channel/Application/Org1MSP".into(),
            required: 0,
            current: 1
        }
    );
    assert!(!err.is_forbidden());
}

#[test]
fn update_for_another_channel_is_refused() {
    let current = net().genesis_config();
    let mut update = anchor_update(&current, HOST, PORT);
    update.channel_id = "otherchannel".into();
    let err = ConfigTxValidator::new(current).unwrap().propose(&submit(&update, &[&net().admin(0)])).unwrap_err();
    assert_eq!(err, ConfigTxError::WrongChannel { update: "otherchannel".into(), channel: CHANNEL.into() });
}

#[test]
fn empty_delta_is_refused() {
    let current = net().genesis_config();
    let root_only = ConfigGroup { version: 0, ..ConfigGroup::default() };
    let update = ConfigUpdate {
        channel_id: CHANNEL.into(),
        read_set: Some(root_only.clone()),
        write_set: Some(root_only),
        ..ConfigUpdate::default()
    };
    let err = ConfigTxValidator::new(current).unwrap().propose(&submit(&update, &[&net().admin(0)])).unwrap_err();
    assert_eq!(err, ConfigTxError::EmptyDelta);
}

#[test]
fn versions_must_advance_by_exactly_one() {
    let current = net().genesis_config();
    let validator = ConfigTxValidator::new(current.clone()).unwrap();
    let base = anchor_update(&current, HOST, PORT);
    fn org(u: &mut ConfigUpdate) -> &mut ConfigGroup {
        u.write_set.as_mut().unwrap().groups.get_mut("Application").unwrap().groups.get_mut("Org1MSP").unwrap()
    }

    let mut skip = base.clone();
    org(&mut skip).version = 2;
    assert_eq!(
        validator.propose(&submit(&skip, &[&net().admin(0)])).unwrap_err(),
        ConfigTxError::VersionNotIncremented {
            element: "[Group]  /Channel/Application/Org1MSP".into(),
            proposed: 2,
            current: 0
        }
    );

    let mut new_at_three = base.clone();
    org(&mut new_at_three).values.get_mut("AnchorPeers").unwrap().version = 3;
    assert_eq!(
        validator.propose(&submit(&new_at_three, &[&net().admin(0)])).unwrap_err(),
        ConfigTxError::NewElementVersion {
            element: "[Value]  /Channel/Application/Org1MSP/AnchorPeers".into(),
            version: 3
        }
    );

    let mut bad_policy = base;
    org(&mut bad_policy).mod_policy = "Org1MSP/../Admins".into();
    assert!(matches!(
        validator.propose(&submit(&bad_policy, &[&net().admin(0)])).unwrap_err(),
        ConfigTxError::InvalidModPolicy { element, .. } if element == "[Group]  /Channel/Application/Org1MSP"
    ));
}

#[test]
fn msp_id_change_is_incompatible() {
    // Org1's admin replaces Org1MSP's MSP definition with Org2's: authorized, valid on its own, but an existing
    // org may not change its MSP ID.
    let current = net().genesis_config();
    let mut updated = current.config().clone();
    let app = updated.channel_group.as_mut().unwrap().groups.get_mut("Application").unwrap();
    let org2_msp = app.groups["Org2MSP"].values["MSP"].value.clone();
    app.groups.get_mut("Org1MSP").unwrap().values.get_mut("MSP").unwrap().value = org2_msp;
    let update = compute_update(CHANNEL, current.config(), &updated).unwrap();
    let err = ConfigTxValidator::new(current).unwrap().propose(&submit(&update, &[&net().admin(0)])).unwrap_err();
    assert!(matches!(&err, ConfigTxError::Incompatible(reason) if reason.contains("Org1MSP")), "{err}");
}

#[test]
fn malformed_envelopes_are_bad_requests() {
    let current = net().genesis_config();
    let validator = ConfigTxValidator::new(current.clone()).unwrap();
    let garbage = Envelope { payload: Bytes::from_static(&[0xff, 0xff, 0xff]), signature: Bytes::new() };
    assert!(matches!(validator.propose(&garbage), Err(ConfigTxError::Malformed { .. })));

    // A CONFIG_UPDATE payload under a CONFIG header.
    let mut env = submit(&anchor_update(&current, HOST, PORT), &[&net().admin(0)]);
    let mut payload = Payload::decode(env.payload.clone()).unwrap();
    let header = payload.header.as_mut().unwrap();
    let mut channel_header = ChannelHeader::decode(header.channel_header.clone()).unwrap();
    channel_header.r#type = HeaderType::Config as i32;
    header.channel_header = Bytes::from(channel_header.encode_to_vec());
    env.payload = Bytes::from(payload.encode_to_vec());
    assert_eq!(
        validator.propose(&env).unwrap_err(),
        ConfigTxError::WrongHeaderType { found: HeaderType::Config as i32, expected: HeaderType::ConfigUpdate as i32 }
    );
}

#[test]
fn validate_rejects_results_the_update_does_not_produce() {
    let current = net().genesis_config();
    let validator = ConfigTxValidator::new(current).unwrap();
    let (_, result) = first_anchor_peer();

    let mut tampered = result.clone();
    let config = tampered.config.as_mut().unwrap();
    let org = config.channel_group.as_mut().unwrap().groups.get_mut("Application").unwrap();
    org.groups.get_mut("Org2MSP").unwrap().version = 7;
    assert_eq!(validator.validate(&tampered), Err(ConfigTxError::ResultMismatch));

    let mut wrong_sequence = result;
    wrong_sequence.config.as_mut().unwrap().sequence = 5;
    assert_eq!(
        validator.validate(&wrong_sequence),
        Err(ConfigTxError::WrongSequence { current: 0, expected: 1, found: 5 })
    );
}

// ---- the real Fabric 2.5 fixture ----

#[test]
fn fixture_genesis_noop_update_is_refused_as_empty_delta() {
    let current = Arc::new(ChannelConfig::from_config_block(&fixture_genesis()).unwrap());
    assert_eq!(current.sequence(), 0);
    // configtxlator itself refuses to compute an update between identical configs.
    assert_eq!(compute_update(CHANNEL, current.config(), current.config()), Err(ConfigTxError::NoDifferences));

    // A hand-made no-op: the whole Application group read and written at its current version.
    let app = current.config().channel_group.as_ref().unwrap().groups["Application"].clone();
    let mut root = ConfigGroup { version: 0, ..ConfigGroup::default() };
    root.groups.insert("Application".into(), app);
    let update = ConfigUpdate {
        channel_id: CHANNEL.into(),
        read_set: Some(root.clone()),
        write_set: Some(root),
        ..ConfigUpdate::default()
    };
    let user1 = fixture_identity("Org1MSP", "peerOrganizations/org1.example.com/users/User1@org1.example.com/msp");
    let env = config_update_envelope(CHANNEL, &update, &[&user1], &user1);
    assert_eq!(ConfigTxValidator::new(current).unwrap().propose(&env).unwrap_err(), ConfigTxError::EmptyDelta);
}

#[test]
fn fixture_user1_cannot_set_an_anchor_peer() {
    // The fixture kept User1's key (a client): its signature verifies but does not satisfy OR('Org1MSP.admin').
    let current = Arc::new(ChannelConfig::from_config_block(&fixture_genesis()).unwrap());
    let user1 = fixture_identity("Org1MSP", "peerOrganizations/org1.example.com/users/User1@org1.example.com/msp");
    let update = anchor_peer_update(CHANNEL, current.config(), "Org1MSP", HOST, PORT).unwrap();
    let env = config_update_envelope(CHANNEL, &update, &[&user1], &user1);
    expect_forbidden(ConfigTxValidator::new(current).unwrap().propose(&env).unwrap_err());
}

#[test]
fn truncated_envelopes_are_refused_without_panicking() {
    let current = net().genesis_config();
    let validator = ConfigTxValidator::new(current.clone()).unwrap();
    let env = submit(&anchor_update(&current, HOST, PORT), &[&net().admin(0)]);
    validator.propose(&env).unwrap();
    for cut in (0..env.payload.len()).step_by(7) {
        let truncated = Envelope { payload: env.payload.slice(..cut), signature: env.signature.clone() };
        assert!(validator.propose(&truncated).is_err(), "payload cut at {cut} was accepted");
    }
}
