//! One connection to a Deliver server, as the follower and the BFT header receivers make it: dialing with the
//! follow settings, the signed seek request, the number of a received block, and the pause between attempts.

use std::time::Duration;

use bytes::Bytes;
use ferrofabric_comm::{connect_with, ConnectOptions};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::BlockHeader;
use ferrofabric_protos::orderer::SeekInfo;
use prost::Message;
use tonic::transport::Channel;

use crate::config::FollowConfig;
use crate::error::DeliverError;

/// Fabric's reconnection pause: 100 ms × 2^(failures − 1), capped.
pub(crate) fn backoff(failures: u32, max: Duration) -> Duration {
    let exp = failures.saturating_sub(1).min(20);
    Duration::from_millis(100u64.saturating_mul(1u64 << exp)).min(max)
}

/// Opens a gRPC connection to `addr` with the follow settings.
///
/// Errors: bad address, TLS setup, connection failure or timeout.
pub async fn connect(addr: &str, config: &FollowConfig) -> Result<Channel, DeliverError> {
    let options = ConnectOptions {
        tls: config.tls.clone(),
        connect_timeout: Some(config.connect_timeout),
        keepalive: Some((config.keepalive_interval, config.keepalive_timeout)),
    };
    Ok(connect_with(addr, &options).await?)
}

/// A signed `DELIVER_SEEK_INFO` envelope for `channel_id` carrying `seek`: channel header with the current time,
/// signature header `{creator, 24-byte random nonce}`, signature over the payload (Fabric
/// `protoutil.CreateSignedEnvelope`), built by [`ferrofabric_protoutil::seek_envelope`] and marshaled.
pub fn seek_envelope(channel_id: &str, signer: &SigningIdentity, seek: &SeekInfo) -> Bytes {
    let envelope =
        ferrofabric_protoutil::seek_envelope(channel_id, seek, signer.serialized(), None, |m| signer.sign(m));
    Bytes::from(envelope.encode_to_vec())
}

/// Only the header of a `common.Block`: prost skips the data and metadata fields without copying them.
#[derive(Clone, PartialEq, prost::Message)]
struct HeaderOnly {
    #[prost(message, optional, tag = "1")]
    header: Option<BlockHeader>,
}

/// The number in a marshaled block's header.
///
/// Errors: the bytes do not decode or have no header.
pub fn block_number(block: &Bytes) -> Result<u64, DeliverError> {
    let h = HeaderOnly::decode(block.clone()).map_err(DeliverError::NotABlock)?;
    h.header.map(|h| h.number).ok_or(DeliverError::NoHeader)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_100ms_up_to_the_threshold() {
        let max = Duration::from_secs(10);
        assert_eq!(backoff(1, max), Duration::from_millis(100));
        assert_eq!(backoff(2, max), Duration::from_millis(200));
        assert_eq!(backoff(4, max), Duration::from_millis(800));
        assert_eq!(backoff(30, max), max);
    }

    #[test]
    fn block_number_reads_the_header_and_rejects_garbage() {
        let block = ferrofabric_protos::common::Block {
            header: Some(BlockHeader { number: 42, ..BlockHeader::default() }),
            ..Default::default()
        };
        assert_eq!(block_number(&Bytes::from(block.encode_to_vec())).unwrap(), 42);
        assert!(block_number(&Bytes::from_static(&[0xff, 0xff])).is_err());
        assert!(block_number(&Bytes::new()).is_err());
    }
}
