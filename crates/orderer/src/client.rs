//! A thin AtomicBroadcast client that sends pre-marshaled envelopes and receives Deliver blocks as their raw
//! bytes (no decode/re-encode on either side): used by the benchmark and the tests, and handy for tools.

use bytes::{Buf, Bytes};
use ferrofabric_protos::orderer::{BroadcastResponse, SeekInfo};
use futures::Stream;
use prost::Message;
use tonic::codec::{DecodeBuf, Decoder, Streaming};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

use crate::grpc::{PairCodec, ProstDecoder, RawEncoder};

/// One message of a Deliver response stream, with the block as the bytes the orderer sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliverItem {
    /// A marshaled `common.Block`.
    Block(Bytes),
    /// The closing status (a `common.Status` value).
    Status(i32),
}

/// Decodes `DeliverResponse` frames without decoding the block.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawDeliverDecoder;

impl Decoder for RawDeliverDecoder {
    type Item = DeliverItem;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<DeliverItem>, tonic::Status> {
        let bad = |m: &str| tonic::Status::internal(format!("bad DeliverResponse: {m}"));
        let mut item = None;
        while src.has_remaining() {
            let key = prost::encoding::decode_varint(src).map_err(|e| bad(&e.to_string()))?;
            match key {
                0x08 => {
                    let v = prost::encoding::decode_varint(src).map_err(|e| bad(&e.to_string()))?;
                    item = Some(DeliverItem::Status(v as i32));
                }
                0x12 => {
                    let len = prost::encoding::decode_varint(src).map_err(|e| bad(&e.to_string()))? as usize;
                    if len > src.remaining() {
                        return Err(bad("truncated block"));
                    }
                    item = Some(DeliverItem::Block(src.copy_to_bytes(len)));
                }
                _ => return Err(bad("unexpected field")),
            }
        }
        item.map(Some).ok_or_else(|| bad("empty message"))
    }
}

/// TLS settings of a client connection.
#[derive(Debug, Clone)]
pub struct ClientTls {
    /// PEM of the CA(s) that signed the server's certificate.
    pub ca_pem: Vec<u8>,
    /// The server name to check the certificate against (e.g. `orderer.example.com`).
    pub server_name: String,
    /// Client certificate and key PEM for mutual TLS.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

/// Opens a gRPC connection to `addr` (`host:port`), with TLS if `tls` is given.
///
/// Errors: bad address, TLS setup or connection failure.
pub async fn connect(addr: &str, tls: Option<&ClientTls>) -> anyhow::Result<Channel> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))?
        .tcp_nodelay(true)
        .initial_connection_window_size(Some(8 << 20))
        .initial_stream_window_size(Some(4 << 20));
    if let Some(t) = tls {
        let mut config =
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&t.ca_pem)).domain_name(t.server_name.clone());
        if let Some((cert, key)) = &t.identity {
            config = config.identity(Identity::from_pem(cert, key));
        }
        endpoint = endpoint.tls_config(config)?;
    }
    Ok(endpoint.connect().await?)
}

/// Opens a Broadcast stream sending the marshaled envelopes of `envelopes`; yields one response per envelope.
///
/// Errors: the call could not be started (gRPC status).
pub async fn broadcast<S>(channel: Channel, envelopes: S) -> Result<Streaming<BroadcastResponse>, tonic::Status>
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(100 << 20);
    grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let path = http::uri::PathAndQuery::from_static("/orderer.AtomicBroadcast/Broadcast");
    let codec = PairCodec::<RawEncoder, ProstDecoder<BroadcastResponse>>::default();
    Ok(grpc.streaming(tonic::Request::new(envelopes), path, codec).await?.into_inner())
}

/// Opens a Deliver stream with the request envelopes of `requests`; yields blocks as raw bytes and statuses.
///
/// Errors: the call could not be started (gRPC status).
pub async fn deliver<S>(channel: Channel, requests: S) -> Result<Streaming<DeliverItem>, tonic::Status>
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(200 << 20);
    grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let path = http::uri::PathAndQuery::from_static("/orderer.AtomicBroadcast/Deliver");
    let codec = PairCodec::<RawEncoder, RawDeliverDecoder>::default();
    Ok(grpc.streaming(tonic::Request::new(requests), path, codec).await?.into_inner())
}

pub use ferrofabric_protoutil::seek_range;

/// A signed DELIVER_SEEK_INFO envelope for `channel_id` carrying `seek` (what `peer channel fetch` and the
/// Fabric SDKs send): channel header with the current time, signature header `{creator, nonce}`, signature
/// `sign(payload)`. `creator` is a marshaled `SerializedIdentity`.
/// Built by [`ferrofabric_protoutil::seek_envelope`], marshaled.
pub fn seek_envelope(channel_id: &str, creator: &Bytes, sign: impl FnOnce(&[u8]) -> Vec<u8>, seek: &SeekInfo) -> Bytes {
    Bytes::from(ferrofabric_protoutil::seek_envelope(channel_id, seek, creator, None, sign).encode_to_vec())
}
