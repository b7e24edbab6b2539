//! Deliver requests: `SeekInfo` positions and the signed DELIVER_SEEK_INFO envelope every Deliver client sends
//! (Fabric's `protoutil.CreateSignedEnvelopeWithTLSBinding`, `protoutil/txutils.go`, as used by the peer's
//! blocks provider, `peer channel fetch` and the SDKs).

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrofabric_protos::common::{ChannelHeader, Envelope, Header, HeaderType, Payload, SignatureHeader};
use ferrofabric_protos::orderer::{seek_info, seek_position, SeekInfo, SeekNewest, SeekPosition, SeekSpecified};
use prost::Message;

use crate::tx::new_nonce;

/// The position of block `number` (`SeekSpecified`).
pub fn seek_specified(number: u64) -> SeekPosition {
    SeekPosition { r#type: Some(seek_position::Type::Specified(SeekSpecified { number })) }
}

/// The position of the newest block at the time the request is served (`SeekNewest`).
pub fn seek_newest() -> SeekPosition {
    SeekPosition { r#type: Some(seek_position::Type::Newest(SeekNewest {})) }
}

/// A `SeekInfo` from block `start` to block `stop` (inclusive); `stop = None` means "forever" (`u64::MAX`, what
/// Fabric's peer asks the orderer for: `seekInfoFrom(height)`), with the given behavior.
pub fn seek_range(start: u64, stop: Option<u64>, behavior: seek_info::SeekBehavior) -> SeekInfo {
    SeekInfo {
        start: Some(seek_specified(start)),
        stop: Some(seek_specified(stop.unwrap_or(u64::MAX))),
        behavior: behavior as i32,
        ..SeekInfo::default()
    }
}

/// A signed DELIVER_SEEK_INFO envelope for `channel_id` carrying `seek`: channel header {type DELIVER_SEEK_INFO,
/// the current time, `tls_cert_hash` when the client binds the request to its TLS certificate (SHA-256 of the
/// client certificate, Fabric's mutual-TLS binding)}, signature header {`creator`, a fresh 24-byte nonce}, and
/// `sign(payload bytes)` as the signature. `creator` is the client's marshaled `SerializedIdentity`; `sign`
/// returns its DER ECDSA signature (e.g. `SigningIdentity::sign`).
pub fn seek_envelope(
    channel_id: &str,
    seek: &SeekInfo,
    creator: &Bytes,
    tls_cert_hash: Option<&[u8]>,
    sign: impl FnOnce(&[u8]) -> Vec<u8>,
) -> Envelope {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    let channel_header = ChannelHeader {
        r#type: HeaderType::DeliverSeekInfo as i32,
        timestamp: Some(prost_types::Timestamp {
            seconds: i64::try_from(now.as_secs()).unwrap_or(i64::MAX),
            nanos: now.subsec_nanos() as i32,
        }),
        channel_id: channel_id.to_owned(),
        tls_cert_hash: tls_cert_hash.map(Bytes::copy_from_slice).unwrap_or_default(),
        ..ChannelHeader::default()
    };
    let signature_header = SignatureHeader { creator: creator.clone(), nonce: new_nonce() };
    let payload = Payload {
        header: Some(Header {
            channel_header: Bytes::from(channel_header.encode_to_vec()),
            signature_header: Bytes::from(signature_header.encode_to_vec()),
        }),
        data: Bytes::from(seek.encode_to_vec()),
    };
    let payload = Bytes::from(payload.encode_to_vec());
    let signature = Bytes::from(sign(&payload));
    Envelope { payload, signature }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn seek_envelope_carries_the_request_and_signs_the_payload() {
        let seek = seek_range(3, None, seek_info::SeekBehavior::BlockUntilReady);
        let creator = Bytes::from_static(b"creator");
        let mut signed = Vec::new();
        let env = seek_envelope("ch", &seek, &creator, Some(b"hash"), |m| {
            signed = m.to_vec();
            b"sig".to_vec()
        });
        assert_eq!(env.payload.as_ref(), signed.as_slice());
        assert_eq!(env.signature.as_ref(), b"sig");
        let payload = Payload::decode(env.payload).unwrap();
        let header = payload.header.unwrap();
        let ch = ChannelHeader::decode(header.channel_header).unwrap();
        assert_eq!((ch.r#type, ch.channel_id.as_str()), (HeaderType::DeliverSeekInfo as i32, "ch"));
        assert_eq!(ch.tls_cert_hash.as_ref(), b"hash");
        let sh = SignatureHeader::decode(header.signature_header).unwrap();
        assert_eq!((sh.creator, sh.nonce.len()), (creator, crate::tx::NONCE_LEN));
        let got = SeekInfo::decode(payload.data).unwrap();
        assert_eq!(got, seek);
        assert_eq!(got.stop, Some(seek_specified(u64::MAX)));
    }
}
