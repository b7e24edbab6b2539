//! Signed envelopes around config messages (Fabric `protoutil.CreateSignedEnvelope`, `txutils.go`, and the
//! peer CLI's config-update signing, `internal/peer/channel/signconfigtx.go`, `update.go`).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{
    ChannelHeader, ConfigEnvelope, ConfigSignature, ConfigUpdate, ConfigUpdateEnvelope, Envelope, Header, HeaderType,
    Payload, SignatureHeader,
};
use prost::Message;

use crate::encode;

fn signature_header(signer: &SigningIdentity) -> Bytes {
    Bytes::from(
        SignatureHeader { creator: signer.serialized().clone(), nonce: ferrofabric_protoutil::new_nonce() }
            .encode_to_vec(),
    )
}

/// `protoutil.CreateSignedEnvelope(kind, channel_id, signer, data, 0, 0)`: channel header with version 0,
/// epoch 0, no tx ID and the current time truncated to whole seconds; signature header with the signer's
/// creator bytes and a fresh 24-byte nonce; the payload signed by `signer`.
fn signed_envelope(kind: HeaderType, channel_id: &str, signer: &SigningIdentity, data: Bytes) -> Envelope {
    let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let channel_header = ChannelHeader {
        r#type: kind as i32,
        version: 0,
        timestamp: Some(prost_types::Timestamp { seconds: i64::try_from(seconds).unwrap_or(i64::MAX), nanos: 0 }),
        channel_id: channel_id.to_owned(),
        epoch: 0,
        ..ChannelHeader::default()
    };
    let payload = Payload {
        header: Some(Header {
            channel_header: Bytes::from(channel_header.encode_to_vec()),
            signature_header: signature_header(signer),
        }),
        data,
    }
    .encode_to_vec();
    let signature = signer.sign(&payload);
    Envelope { payload: Bytes::from(payload), signature: Bytes::from(signature) }
}

/// The CONFIG transaction (header type CONFIG = 1) the orderer orders for an accepted update, signed by the
/// orderer (Fabric `StandardChannel.ProcessConfigUpdateMsg` → `protoutil.CreateSignedEnvelope`).
///
/// Shape: `Envelope{payload: Payload{header: {ChannelHeader{type 1, version 0, channel_id, timestamp = now in
/// whole seconds, epoch 0, tx_id ""}, SignatureHeader{creator = signer, nonce = 24 random bytes}}, data =
/// ConfigEnvelope}, signature = signer's ECDSA signature over the payload bytes}`. The `ConfigEnvelope` bytes
/// are deterministic (maps sorted, see [`crate::marshal_config_envelope`]).
///
/// Unlike configtxgen's genesis block (channel header version 1, tx_id derived from nonce and empty creator,
/// unsigned), an orderer-made CONFIG envelope has version 0, no tx_id and is signed, as in Fabric.
pub fn wrap_config_envelope(signer: &SigningIdentity, channel_id: &str, env: &ConfigEnvelope) -> Envelope {
    signed_envelope(HeaderType::Config, channel_id, signer, encode::marshal_config_envelope(env))
}

/// One signature on a config update (`peer channel signconfigtx`): `SignatureHeader{creator, fresh nonce}` and
/// the signer's signature over `signature_header ‖ config_update`, where `config_update` is the marshaled
/// `ConfigUpdate` exactly as carried in `ConfigUpdateEnvelope.config_update`.
pub fn config_signature(signer: &SigningIdentity, config_update: &[u8]) -> ConfigSignature {
    let signature_header = signature_header(signer);
    let mut signed = Vec::with_capacity(signature_header.len() + config_update.len());
    signed.extend_from_slice(&signature_header);
    signed.extend_from_slice(config_update);
    ConfigSignature { signature: Bytes::from(signer.sign(&signed)), signature_header }
}

/// A CONFIG_UPDATE transaction (header type 2) as `peer channel update` submits it to Broadcast:
/// `update` marshaled deterministically, one [`config_signature`] per entry of `signers` (in order; may be
/// empty), wrapped in an envelope created and signed by `submitter` (channel header as in
/// [`wrap_config_envelope`]). The channel header names `channel_id`; `update.channel_id` is used as given.
/// (`peer channel update` always lists its own identity among the signers; here the caller decides, so that
/// unsigned or under-signed updates can be built for tests.)
pub fn config_update_envelope(
    channel_id: &str,
    update: &ConfigUpdate,
    signers: &[&SigningIdentity],
    submitter: &SigningIdentity,
) -> Envelope {
    let config_update = encode::marshal_config_update(update);
    let signatures = signers.iter().map(|signer| config_signature(signer, &config_update)).collect();
    let update_env = ConfigUpdateEnvelope { config_update, signatures };
    signed_envelope(HeaderType::ConfigUpdate, channel_id, submitter, Bytes::from(update_env.encode_to_vec()))
}

/// A CONFIG_UPDATE envelope that nobody signed yet, as `configtxlator` and Fabric's scripts make it for
/// `peer channel signconfigtx` and `peer channel update`, which add the signatures:
/// `Envelope{payload: Payload{header: {ChannelHeader{type CONFIG_UPDATE, channel_id}}, data:
/// ConfigUpdateEnvelope{config_update}}}`, no signature header, no signature.
pub fn unsigned_config_update_envelope(channel_id: &str, update: &ConfigUpdate) -> Envelope {
    let channel_header = ChannelHeader {
        r#type: HeaderType::ConfigUpdate as i32,
        channel_id: channel_id.to_owned(),
        ..ChannelHeader::default()
    };
    let data = ConfigUpdateEnvelope { config_update: encode::marshal_config_update(update), signatures: Vec::new() };
    let payload = Payload {
        header: Some(Header {
            channel_header: Bytes::from(channel_header.encode_to_vec()),
            signature_header: Bytes::new(),
        }),
        data: Bytes::from(data.encode_to_vec()),
    };
    Envelope { payload: Bytes::from(payload.encode_to_vec()), signature: Bytes::new() }
}
