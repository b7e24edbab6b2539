//! CONFIG_UPDATE handling: the hook through which a configtx implementation computes a channel's next
//! configuration, and the CONFIG transaction the orderer wraps it in (Fabric
//! `orderer/common/msgprocessor/standardchannel.go` `ProcessConfigUpdateMsg`, `protoutil.CreateSignedEnvelope`).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_policy::ChannelConfig;
use ferrofabric_protos::common::{
    ChannelHeader, ConfigEnvelope, Envelope, Header, HeaderType, Payload, SignatureHeader,
};
use prost::Message;

use crate::block::new_nonce;

/// Computes the configuration a CONFIG_UPDATE leads to: Fabric's `configtx.Validator.ProposeConfigUpdate`.
///
/// Given the channel's current configuration and the CONFIG_UPDATE envelope (already past the broadcast
/// filters: size and `/Channel/Writers`), return the new `ConfigEnvelope{config: next config with sequence + 1,
/// last_update: the update envelope}`, after checking the update's read set versions, write set, and the
/// `mod_policy` signatures of every modified element. The orderer signs the resulting CONFIG transaction, runs
/// the filters on it again and orders it alone in a block.
///
/// Errors are reported to the client as BAD_REQUEST with the message
/// `error applying config update to existing channel '<id>': <error>`, as Fabric does.
///
/// Implementations must be `Send + Sync`; they are called from the broadcast worker threads.
pub trait ConfigUpdateProcessor: Send + Sync {
    /// Propose the next configuration for `current` given the CONFIG_UPDATE `update`.
    fn propose_config_update(
        &self,
        current: &ChannelConfig,
        update: &Envelope,
    ) -> Result<ConfigEnvelope, Box<dyn std::error::Error + Send + Sync>>;
}

/// A CONFIG transaction signed by this orderer around `config`: `Payload{header: {ChannelHeader{type: CONFIG,
/// channel_id, timestamp: now (whole seconds), version 0, epoch 0}, SignatureHeader{creator, 24-byte nonce}},
/// data: ConfigEnvelope}`, signature over the payload bytes (Fabric `protoutil.CreateSignedEnvelope`).
/// Returns the marshaled Envelope.
pub fn signed_config_envelope(channel_id: &str, config: &ConfigEnvelope, signer: &SigningIdentity) -> Bytes {
    let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let channel_header = ChannelHeader {
        r#type: HeaderType::Config as i32,
        version: 0,
        timestamp: Some(prost_types::Timestamp { seconds, nanos: 0 }),
        channel_id: channel_id.to_owned(),
        epoch: 0,
        ..ChannelHeader::default()
    };
    let signature_header = SignatureHeader { creator: signer.serialized().clone(), nonce: new_nonce() };
    let payload = Payload {
        header: Some(Header {
            channel_header: Bytes::from(channel_header.encode_to_vec()),
            signature_header: Bytes::from(signature_header.encode_to_vec()),
        }),
        data: Bytes::from(config.encode_to_vec()),
    };
    let payload = Bytes::from(payload.encode_to_vec());
    let signature = Bytes::from(signer.sign(&payload));
    Bytes::from(Envelope { payload, signature }.encode_to_vec())
}
