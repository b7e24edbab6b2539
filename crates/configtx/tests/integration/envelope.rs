//! `wrap_config_envelope` and the deterministic config encoding, on the fixture (real orderer key) and on
//! the generated network.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::support::{fixture_genesis, fixture_identity, net};
use ferrofabric_channelconfig::{AnchorPeer, ChannelConfig};
use ferrofabric_configtx::{
    anchor_peer_update, config_update_envelope, marshal_config_envelope, wrap_config_envelope, ConfigTxValidator,
};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{ChannelHeader, ConfigEnvelope, Envelope, HeaderType, Payload, SignatureHeader};
use prost::Message;

const CHANNEL: &str = "mychannel";

fn fixture_genesis_config_envelope() -> ConfigEnvelope {
    let block = fixture_genesis();
    let env = Envelope::decode(block.data.as_ref().unwrap().data[0].clone()).unwrap();
    ConfigEnvelope::decode(Payload::decode(env.payload).unwrap().data).unwrap()
}

/// Check the CONFIG envelope's headers and that `signer`'s signature verifies under `msps` (the channel's MSPs).
fn check_orderer_envelope(
    wrapped: &Envelope,
    signer: &SigningIdentity,
    channel: &ChannelConfig,
    expected: &ConfigEnvelope,
) {
    let payload = Payload::decode(wrapped.payload.clone()).unwrap();
    let header = payload.header.as_ref().unwrap();
    let ch = ChannelHeader::decode(header.channel_header.clone()).unwrap();
    assert_eq!(ch.r#type, HeaderType::Config as i32);
    assert_eq!(ch.channel_id, CHANNEL);
    assert_eq!((ch.version, ch.epoch, ch.tx_id.as_str()), (0, 0, ""), "CreateSignedEnvelope(CONFIG, .., 0, 0)");
    let ts = ch.timestamp.unwrap();
    assert_eq!(ts.nanos, 0);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    assert!((now - ts.seconds).abs() <= 60, "timestamp {} vs now {now}", ts.seconds);
    let sh = SignatureHeader::decode(header.signature_header.clone()).unwrap();
    assert_eq!(&sh.creator, signer.serialized());
    assert_eq!(sh.nonce.len(), 24);

    let identity = channel.msp_manager().deserialize_identity(&sh.creator).unwrap();
    identity.validate().unwrap();
    identity.verify(&wrapped.payload, &wrapped.signature).unwrap();
    let mut tampered = wrapped.payload.to_vec();
    let last = tampered.len() - 1;
    tampered[last] ^= 1;
    assert!(identity.verify(&tampered, &wrapped.signature).is_err());

    assert_eq!(payload.data, marshal_config_envelope(expected));
    assert_eq!(&ConfigEnvelope::decode(payload.data).unwrap(), expected);
}

#[test]
fn fixture_orderer_signs_a_config_envelope() {
    let channel = ChannelConfig::from_config_block(&fixture_genesis()).unwrap();
    let orderer = fixture_identity("OrdererMSP", "ordererOrganizations/example.com/orderers/orderer.example.com/msp");
    let config_env = fixture_genesis_config_envelope();
    let wrapped = wrap_config_envelope(&orderer, CHANNEL, &config_env);
    check_orderer_envelope(&wrapped, &orderer, &channel, &config_env);
    // The result is a CONFIG transaction a channel config can be read from.
    let reparsed = ChannelConfig::from_envelope(&wrapped).unwrap();
    assert_eq!(reparsed.config(), channel.config());
}

#[test]
fn fixture_config_encodes_deterministically() {
    let config_env = fixture_genesis_config_envelope();
    let bytes = marshal_config_envelope(&config_env);
    // Real configs have no empty map entries, so the sorted encoding has exactly prost's length.
    assert_eq!(bytes.len(), config_env.encoded_len());
    // Decoding gives fresh hash maps (other iteration order); the bytes stay the same.
    for _ in 0..4 {
        let again = ConfigEnvelope::decode(bytes.clone()).unwrap();
        assert_eq!(again, config_env);
        assert_eq!(marshal_config_envelope(&again), bytes);
    }
}

#[test]
fn orderer_wraps_an_accepted_update() {
    let n = net();
    let current = n.genesis_config();
    let update = anchor_peer_update(CHANNEL, current.config(), "Org1MSP", "peer0.org1.example.com", 7051).unwrap();
    let update_env = config_update_envelope(CHANNEL, &update, &[&n.admin(0)], &n.client(0));
    let validator = ConfigTxValidator::new(current.clone()).unwrap();
    let next = validator.propose(&update_env).unwrap();

    let orderer = n.orderer();
    let wrapped = wrap_config_envelope(&orderer, validator.channel_id(), &next);
    check_orderer_envelope(&wrapped, &orderer, &current, &next);

    // What a committer does with the CONFIG transaction: re-validate, then load the new config.
    let payload = Payload::decode(wrapped.payload.clone()).unwrap();
    validator.validate(&ConfigEnvelope::decode(payload.data).unwrap()).unwrap();
    let loaded = Arc::new(ChannelConfig::from_envelope(&wrapped).unwrap());
    assert_eq!(loaded.sequence(), 1);
    assert_eq!(
        loaded.application().unwrap().organizations()["Org1MSP"].anchor_peers(),
        [AnchorPeer { host: "peer0.org1.example.com".into(), port: 7051 }]
    );
}
