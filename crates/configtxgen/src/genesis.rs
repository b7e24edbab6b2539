//! Genesis (config) blocks: Fabric `common/genesis/genesis.go` `factory.Block` as used by configtxgen's
//! `-outputBlock` (`cmd/configtxgen/main.go` `doOutputBlock`).

use bytes::Bytes;
use ferrofabric_protos::common::{
    Block, BlockData, BlockHeader, ChannelHeader, Config, ConfigEnvelope, Envelope, HeaderType, Payload,
    SignatureHeader,
};
use ferrofabric_protoutil::{orderer_metadata, signature_value};
use prost::Message;
use sha2::{Digest, Sha256};

use crate::{channel_group, ConfigtxgenError, Profile};

/// Length of the random nonce in the signature header (Fabric's `crypto.NonceSize`).
pub const NONCE_SIZE: usize = ferrofabric_protoutil::NONCE_LEN;

/// Fabric's channel name rule (`configtx.ValidateChannelID`): `[a-z][a-z0-9.-]*`, fewer than 250
/// characters.
fn validate_channel_id(id: &str) -> Result<(), ConfigtxgenError> {
    let mut chars = id.chars();
    let ok = id.len() < 250
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(ConfigtxgenError::ChannelId(id.to_string()))
    }
}

/// The genesis block of channel `channel_id` for a completed profile (see [`crate::ConfigTx::profile`]),
/// stamped with the current time (whole seconds) and a fresh random nonce, exactly as
/// `configtxgen -profile P -outputBlock F -channelID ID` writes it; see [`genesis_block_at`].
///
/// Errors: as [`genesis_block_at`].
pub fn genesis_block(profile: &Profile, channel_id: &str) -> Result<Block, ConfigtxgenError> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let mut nonce = [0u8; NONCE_SIZE];
    nonce.copy_from_slice(&ferrofabric_protoutil::new_nonce());
    let seconds = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    genesis_block_at(profile, channel_id, seconds, nonce)
}

/// The genesis block with a given timestamp (Unix seconds) and nonce, so tests can reproduce bytes.
///
/// Shape (Fabric 2.5): block 0, no previous hash, `data_hash` = SHA-256 of the one envelope; the envelope
/// is unsigned, its payload header a `ChannelHeader` {type CONFIG, version 1, timestamp (nanos 0),
/// channel_id, tx_id = hex(SHA-256(nonce)), epoch 0} and a `SignatureHeader` {no creator, nonce}; its data
/// a `ConfigEnvelope` {Config {sequence 0, channel_group = [`channel_group`]}}. Metadata has the five
/// slots, SIGNATURES holding an `OrdererBlockMetadata` with last config 0 and LAST_CONFIG a `LastConfig` 0,
/// the rest empty. Proto maps are written in key order, so the bytes are a function of the inputs.
///
/// Errors: [`ConfigtxgenError::ChannelId`]; [`ConfigtxgenError::Profile`] when the profile has no
/// `Orderer` section, or neither `Application` nor `Consortiums`; otherwise as [`channel_group`].
pub fn genesis_block_at(
    profile: &Profile,
    channel_id: &str,
    timestamp_seconds: i64,
    nonce: [u8; NONCE_SIZE],
) -> Result<Block, ConfigtxgenError> {
    validate_channel_id(channel_id)?;
    if profile.orderer.is_none() {
        return Err(ConfigtxgenError::Profile("refusing to generate block which is missing orderer section".into()));
    }
    if profile.consortiums.is_none() && profile.application.is_none() {
        return Err(ConfigtxgenError::Profile(
            "refusing to generate application channel block which is missing application section".into(),
        ));
    }
    let group = channel_group(profile)?;
    let config_envelope =
        ConfigEnvelope { config: Some(Config { sequence: 0, channel_group: Some(group) }), last_update: None };

    // The creator is empty, so the txid hashes the nonce alone.
    let tx_id = hex::encode(Sha256::digest(nonce));
    let channel_header = ChannelHeader {
        r#type: HeaderType::Config as i32,
        version: 1,
        timestamp: Some(prost_types::Timestamp { seconds: timestamp_seconds, nanos: 0 }),
        channel_id: channel_id.to_string(),
        tx_id,
        epoch: 0,
        ..Default::default()
    };
    let signature_header = SignatureHeader { creator: Bytes::new(), nonce: Bytes::copy_from_slice(&nonce) };
    let payload = Payload {
        header: Some(ferrofabric_protos::common::Header {
            channel_header: Bytes::from(channel_header.encode_to_vec()),
            signature_header: Bytes::from(signature_header.encode_to_vec()),
        }),
        data: ferrofabric_configtx::marshal_config_envelope(&config_envelope),
    };
    let envelope = Envelope { payload: Bytes::from(payload.encode_to_vec()), signature: Bytes::new() };
    let envelope = Bytes::from(envelope.encode_to_vec());

    // configtxgen's block 0: SIGNATURES carries the last config (0) but no signature.
    let metadata = orderer_metadata(signature_value(0, b""), Vec::new(), 0);

    Ok(Block {
        header: Some(BlockHeader {
            number: 0,
            previous_hash: Bytes::new(),
            data_hash: Bytes::copy_from_slice(&ferrofabric_protoutil::block_data_hash(std::slice::from_ref(&envelope))),
        }),
        data: Some(BlockData { data: vec![envelope] }),
        metadata: Some(metadata),
    })
}
