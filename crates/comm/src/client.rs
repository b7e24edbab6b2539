//! The gRPC client of the daemons, benches and tools: connections (TLS, keepalive, the daemons' flow-control
//! windows), `orderer.AtomicBroadcast` Broadcast and Deliver, and the peer's `protos.Deliver`, with envelopes sent
//! pre-marshaled and blocks received as the bytes the server sent (never decoded and re-encoded), plus the signed
//! seek envelope a Deliver request carries.

use std::time::Duration;

use bytes::{Buf, Bytes};
use ferrofabric_protos::orderer::{BroadcastResponse, SeekInfo};
use futures::Stream;
use prost::Message;
use tonic::codec::{DecodeBuf, Decoder, Streaming};
use tonic::transport::{Certificate, Channel, ClientTlsConfig as TonicTls, Endpoint, Identity};

use crate::codec::{PairCodec, ProstDecoder, RawEncoder};
use crate::error::CommError;
use crate::tls::{read_pems, ClientTlsConfig};

/// Largest Deliver response accepted: 256 MiB (a block plus framing).
pub(crate) const MAX_DELIVER_MESSAGE: usize = 256 << 20;

/// Largest Broadcast response accepted.
const MAX_BROADCAST_RESPONSE: usize = 100 << 20;

/// TLS material of a client connection, as PEM bytes.
#[derive(Debug, Clone, Default)]
pub struct ClientTls {
    /// PEM of the CA(s) that sign the servers' certificates.
    pub ca_pem: Vec<u8>,
    /// The name to check the server certificate against (e.g. `orderer.example.com`); empty = the host of the
    /// address connected to.
    pub server_name: String,
    /// Client certificate and key PEM for mutual TLS.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl ClientTls {
    /// Loads the files named by a [`ClientTlsConfig`]; `None` when TLS is disabled.
    ///
    /// Errors: unreadable files, a certificate without its key or the reverse.
    pub fn from_config(c: &ClientTlsConfig) -> Result<Option<ClientTls>, CommError> {
        if !c.enabled {
            return Ok(None);
        }
        let ca_pem = read_pems(&c.root_cas, "root CA")?;
        let identity = match (&c.client_certificate, &c.client_key) {
            (Some(cert), Some(key)) => Some((
                std::fs::read(cert).map_err(|source| CommError::Read { path: cert.clone(), source })?,
                std::fs::read(key).map_err(|source| CommError::Read { path: key.clone(), source })?,
            )),
            (None, None) => None,
            _ => return Err(CommError::IncompleteClientIdentity),
        };
        Ok(Some(ClientTls { ca_pem, server_name: c.server_name_override.clone().unwrap_or_default(), identity }))
    }
}

/// How to open a connection.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// TLS, if the server speaks it.
    pub tls: Option<ClientTls>,
    /// Timeout of the connection attempt; `None` = the system's.
    pub connect_timeout: Option<Duration>,
    /// HTTP/2 keepalive `(interval, timeout)`, also while idle (detects dead servers on idle streams); `None` = off.
    pub keepalive: Option<(Duration, Duration)>,
}

/// Opens a gRPC connection to `addr` (`host:port`), with TLS if `tls` is given.
///
/// Errors: bad address, TLS setup or connection failure.
pub async fn connect(addr: &str, tls: Option<&ClientTls>) -> Result<Channel, CommError> {
    connect_with(addr, &ConnectOptions { tls: tls.cloned(), ..ConnectOptions::default() }).await
}

/// HTTP/2 receive window of a client connection: 8 MiB, so that a Deliver stream of large blocks is not throttled
/// by round trips.
const CONNECTION_WINDOW: u32 = 8 << 20;

/// HTTP/2 receive window of a client stream: 4 MiB.
const STREAM_WINDOW: u32 = 4 << 20;

/// Opens a gRPC connection to `addr` (`host:port`) with `options`.
///
/// Errors: bad address, TLS setup, connection failure or timeout.
pub async fn connect_with(addr: &str, options: &ConnectOptions) -> Result<Channel, CommError> {
    let scheme = if options.tls.is_some() { "https" } else { "http" };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(|source| CommError::Transport { what: format!("bad address {addr:?}"), source })?
        .tcp_nodelay(true)
        .initial_connection_window_size(Some(CONNECTION_WINDOW))
        .initial_stream_window_size(Some(STREAM_WINDOW));
    if let Some(t) = options.connect_timeout {
        endpoint = endpoint.connect_timeout(t);
    }
    if let Some((interval, timeout)) = options.keepalive {
        endpoint = endpoint.http2_keep_alive_interval(interval).keep_alive_timeout(timeout).keep_alive_while_idle(true);
    }
    if let Some(t) = &options.tls {
        let mut tls = TonicTls::new().ca_certificate(Certificate::from_pem(&t.ca_pem));
        if !t.server_name.is_empty() {
            tls = tls.domain_name(t.server_name.clone());
        }
        if let Some((cert, key)) = &t.identity {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        endpoint = endpoint
            .tls_config(tls)
            .map_err(|source| CommError::Transport { what: "TLS configuration".into(), source })?;
    }
    endpoint.connect().await.map_err(|source| CommError::Transport { what: format!("connecting to {addr}"), source })
}

/// Which Deliver service to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliverApi {
    /// An orderer's `/orderer.AtomicBroadcast/Deliver`.
    Orderer,
    /// A peer's (a committer's or the block store's) `/protos.Deliver/Deliver`.
    Peer,
}

impl DeliverApi {
    /// The gRPC path of the call.
    pub fn path(self) -> &'static str {
        match self {
            DeliverApi::Orderer => "/orderer.AtomicBroadcast/Deliver",
            DeliverApi::Peer => "/protos.Deliver/Deliver",
        }
    }
}

/// One message of a Deliver response stream, with the block as the bytes the server sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliverItem {
    /// A marshaled `common.Block`.
    Block(Bytes),
    /// The closing status (a `common.Status` value).
    Status(i32),
}

/// Decodes a `DeliverResponse` (the orderer's or the peer's: both have status = 1, block = 2) without decoding the
/// block; other fields (filtered blocks, private data) are refused, as this client never asks for them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DeliverItemDecoder;

impl Decoder for DeliverItemDecoder {
    type Item = DeliverItem;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<DeliverItem>, tonic::Status> {
        let bad = |m: String| tonic::Status::internal(format!("malformed DeliverResponse: {m}"));
        let mut item = None;
        while src.has_remaining() {
            let key = prost::encoding::decode_varint(src).map_err(|e| bad(e.to_string()))?;
            match key {
                0x08 => {
                    let v = prost::encoding::decode_varint(src).map_err(|e| bad(e.to_string()))?;
                    item = Some(DeliverItem::Status(v as i32));
                }
                0x12 => {
                    let len = prost::encoding::decode_varint(src).map_err(|e| bad(e.to_string()))?;
                    let len = usize::try_from(len).map_err(|_| bad("block length overflows".into()))?;
                    if len > src.remaining() {
                        return Err(bad("block runs past the message".into()));
                    }
                    item = Some(DeliverItem::Block(src.copy_to_bytes(len)));
                }
                k => return Err(bad(format!("unexpected field key {k}"))),
            }
        }
        item.map(Some).ok_or_else(|| bad("empty message".into()))
    }
}

/// Opens a Broadcast stream sending the marshaled envelopes of `envelopes`; yields one response per envelope.
///
/// Errors: the call could not be started (gRPC status).
pub async fn broadcast<S>(channel: Channel, envelopes: S) -> Result<Streaming<BroadcastResponse>, tonic::Status>
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_BROADCAST_RESPONSE);
    grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let path = http::uri::PathAndQuery::from_static("/orderer.AtomicBroadcast/Broadcast");
    let codec = PairCodec::<RawEncoder, ProstDecoder<BroadcastResponse>>::default();
    Ok(grpc.streaming(tonic::Request::new(envelopes), path, codec).await?.into_inner())
}

/// Opens a Deliver stream of `api` with the request envelopes of `requests`; yields blocks as raw bytes and
/// statuses.
///
/// Errors: the call could not be started (gRPC status).
pub async fn deliver_with<S>(
    channel: Channel,
    api: DeliverApi,
    requests: S,
) -> Result<Streaming<DeliverItem>, tonic::Status>
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    let mut grpc = tonic::client::Grpc::new(channel).max_decoding_message_size(MAX_DELIVER_MESSAGE);
    grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let path = http::uri::PathAndQuery::from_static(api.path());
    let codec = PairCodec::<RawEncoder, DeliverItemDecoder>::default();
    Ok(grpc.streaming(tonic::Request::new(requests), path, codec).await?.into_inner())
}

/// An orderer's Deliver stream ([`deliver_with`] of [`DeliverApi::Orderer`]).
///
/// Errors: the call could not be started (gRPC status).
pub async fn deliver<S>(channel: Channel, requests: S) -> Result<Streaming<DeliverItem>, tonic::Status>
where
    S: Stream<Item = Bytes> + Send + 'static,
{
    deliver_with(channel, DeliverApi::Orderer, requests).await
}

/// A Deliver call of `api` sending the one signed `request` envelope.
///
/// Errors: the call could not be started (gRPC status).
pub async fn open_deliver(
    channel: Channel,
    api: DeliverApi,
    request: Bytes,
) -> Result<Streaming<DeliverItem>, tonic::Status> {
    deliver_with(channel, api, futures::stream::iter([request])).await
}

/// `SeekInfo` over a block range (`ferrofabric_protoutil::seek_range`, re-exported for the raw-bytes clients).
pub use ferrofabric_protoutil::seek_range;

/// A signed DELIVER_SEEK_INFO envelope for `channel_id` carrying `seek`, marshaled for the raw-bytes Deliver
/// calls: [`ferrofabric_protoutil::seek_envelope`] (which holds the rule) without TLS binding. `creator` is a
/// marshaled `SerializedIdentity`; `sign` returns the DER signature over the payload.
pub fn seek_envelope(channel_id: &str, creator: &Bytes, sign: impl FnOnce(&[u8]) -> Vec<u8>, seek: &SeekInfo) -> Bytes {
    Bytes::from(ferrofabric_protoutil::seek_envelope(channel_id, seek, creator, None, sign).encode_to_vec())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ferrofabric_protos::common::{ChannelHeader, Envelope, HeaderType, Payload, SignatureHeader};
    use ferrofabric_protos::orderer::seek_info;

    #[test]
    fn seek_envelope_carries_the_seek_info_and_signature() {
        let seek = seek_range(3, None, seek_info::SeekBehavior::FailIfNotReady);
        let env = seek_envelope("mychannel", &Bytes::from_static(b"me"), |p| p[..4].to_vec(), &seek);
        let env = Envelope::decode(env).unwrap();
        assert_eq!(env.signature.as_ref(), &env.payload[..4]);
        let payload = Payload::decode(env.payload).unwrap();
        let header = payload.header.unwrap();
        let chdr = ChannelHeader::decode(header.channel_header).unwrap();
        assert_eq!(chdr.channel_id, "mychannel");
        assert_eq!(chdr.r#type, HeaderType::DeliverSeekInfo as i32);
        assert_eq!(SignatureHeader::decode(header.signature_header).unwrap().nonce.len(), 24);
        assert_eq!(SeekInfo::decode(payload.data).unwrap(), seek);
    }

    #[test]
    fn deliver_paths() {
        assert_eq!(DeliverApi::Orderer.path(), "/orderer.AtomicBroadcast/Deliver");
        assert_eq!(DeliverApi::Peer.path(), "/protos.Deliver/Deliver");
    }
}
