//! The Deliver server (Fabric 2.5 `common/deliver/deliver.go`), shared by the orderer's
//! `AtomicBroadcast/Deliver` and the peer's `protos.Deliver`: [`DeliverHandler`] (whose documentation gives the
//! order of checks and the statuses) over the daemon's [`ChainManager`] and [`PolicyChecker`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes};
use ferrofabric_block_store::{BlockStore, StoreError};
use ferrofabric_channelconfig::{ChannelConfig, SignatureSet, SignedData};
use ferrofabric_comm::Shutdown;
use ferrofabric_protos::common::{ChannelHeader, Envelope, Payload, SignatureHeader, Status};
use ferrofabric_protos::orderer::{seek_info, seek_position, SeekInfo};
use ferrofabric_protos::peer::FilteredBlock;
use futures::{Stream, StreamExt};
use prost::Message;
use tokio::sync::{mpsc, watch};
use tonic::codec::{EncodeBuf, Encoder};

use crate::error::AccessDenied;
use crate::filtered::{filtered_block, strip_data};

/// What a request asks for: the RPC it came on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// Blocks (`orderer.AtomicBroadcast/Deliver`, `protos.Deliver/Deliver`).
    Blocks,
    /// Filtered blocks (`protos.Deliver/DeliverFiltered`).
    Filtered,
    /// Blocks with private data (`protos.Deliver/DeliverWithPrivateData`).
    WithPrivateData,
}

/// A channel's committed blocks (Fabric's `blockledger.Reader`).
pub trait BlockSource: Send + Sync {
    /// Number of stored blocks.
    fn height(&self) -> u64;
    /// The marshaled block `number`; `Ok(None)` if it is not stored.
    ///
    /// Errors: the block cannot be read.
    fn block(&self, number: u64) -> Result<Option<Bytes>, StoreError>;
    /// Resolves to true once block `number` is stored, to false if it never will be (the ledger closed).
    fn wait_for(&self, number: u64) -> Pin<Box<dyn Future<Output = bool> + Send + '_>>;
}

impl BlockSource for BlockStore {
    fn height(&self) -> u64 {
        BlockStore::height(self)
    }
    fn block(&self, number: u64) -> Result<Option<Bytes>, StoreError> {
        BlockStore::block(self, number)
    }
    fn wait_for(&self, number: u64) -> Pin<Box<dyn Future<Output = bool> + Send + '_>> {
        Box::pin(async move { BlockStore::wait_for(self, number).await.is_ok() })
    }
}

/// One channel as the Deliver server sees it (Fabric's `deliver.Chain`).
pub trait Chain: Send + Sync {
    /// The channel's blocks.
    fn reader(&self) -> &dyn BlockSource;
    /// The channel's current configuration (its sequence drives the policy re-checks); `None` while unknown
    /// (requests get `NOT_FOUND`).
    fn config(&self) -> Option<Arc<ChannelConfig>>;
    /// Why the chain stopped working, as a receiver that changes when it does (Fabric's `Chain.Errored`); `None`
    /// for chains that never error (a peer's).
    fn errored(&self) -> Option<watch::Receiver<Option<String>>> {
        None
    }
}

/// The channels a Deliver server serves (Fabric's `deliver.ChainManager`).
pub trait ChainManager: Send + Sync + 'static {
    /// The chain of `channel_id`; `None` answers `NOT_FOUND`.
    fn chain(&self, channel_id: &str) -> Option<Arc<dyn Chain>>;
}

/// The daemon's access rule (Fabric's `deliver.PolicyChecker`): the orderer requires `/Channel/Readers`, a peer
/// the ACL policy of the event resource.
pub trait PolicyChecker: Send + Sync + 'static {
    /// Whether the signed request data satisfy the policy for `kind` under `config`.
    ///
    /// Errors: the reason for refusing (logged; the client gets `FORBIDDEN`).
    fn check(&self, config: &ChannelConfig, kind: RequestKind, signed: &SignedData) -> Result<(), AccessDenied>;
}

/// Counters a daemon keeps about Deliver (Fabric's `deliver_streams_opened`, `deliver_blocks_sent`).
pub trait DeliverObserver: Send + Sync + 'static {
    /// A stream was opened.
    fn stream_opened(&self) {}
    /// A block of `kind` was sent.
    fn block_sent(&self, _kind: RequestKind) {}
}

/// One frame of a Deliver response stream.
#[derive(Debug, Clone, PartialEq)]
pub enum DeliverFrame {
    /// A marshaled `common.Block`, sent as `DeliverResponse{block = 2}` around its stored bytes.
    Block(Bytes),
    /// A filtered block, `DeliverResponse{filtered_block = 3}`.
    Filtered(FilteredBlock),
    /// A marshaled block sent as `DeliverResponse{block_and_private_data = 4}` with an empty private data map.
    WithPrivateData(Bytes),
    /// The status closing a request, `DeliverResponse{status = 1}`.
    Status(Status),
}

/// Writes a [`DeliverFrame`] as a marshaled `DeliverResponse` (the orderer's and the peer's share fields 1 and
/// 2): status = 1 (tag byte 0x08, varint enum value), block = 2 (tag 0x12, varint length, the stored bytes),
/// filtered_block = 3, block_and_private_data = 4 — embedding stored block bytes without re-encoding them.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeliverFrameEncoder;

impl Encoder for DeliverFrameEncoder {
    type Item = DeliverFrame;
    type Error = tonic::Status;
    fn encode(&mut self, item: DeliverFrame, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        let bytes_field = |dst: &mut EncodeBuf<'_>, key: u8, len: usize| {
            dst.put_u8(key);
            prost::encoding::encode_varint(len as u64, dst);
        };
        match item {
            DeliverFrame::Status(s) => {
                dst.put_u8(0x08);
                prost::encoding::encode_varint(s as i32 as i64 as u64, dst);
            }
            DeliverFrame::Block(b) => {
                bytes_field(dst, 0x12, b.len());
                dst.put_slice(&b);
            }
            DeliverFrame::Filtered(f) => {
                bytes_field(dst, 0x1a, f.encoded_len());
                f.encode(dst).map_err(|e| tonic::Status::internal(format!("encoding a filtered block: {e}")))?;
            }
            DeliverFrame::WithPrivateData(b) => {
                // BlockAndPrivateData{block = 1} with an empty private data map.
                let inner = 1 + prost::encoding::encoded_len_varint(b.len() as u64) + b.len();
                bytes_field(dst, 0x22, inner);
                bytes_field(dst, 0x0a, b.len());
                dst.put_slice(&b);
            }
        }
        Ok(())
    }
}

/// Resolves a `SeekInfo` against a ledger of `height` blocks into the first and the last block number to send,
/// as Fabric's file ledger iterator and `deliverBlocks` do: start oldest = 0, newest = height − 1, specified = n
/// (n > height → `NOT_FOUND`), next commit = height, no type → `NOT_FOUND`; stop oldest = the start, newest =
/// height − 1 at request time (the start when start and stop are the same newest position, so that exactly one
/// block is sent), specified = n (n < start → `BAD_REQUEST`); any other stop leaves the stop number at 0, as
/// Fabric's switch without a default arm does.
///
/// Errors: the status that ends the request, including `BAD_REQUEST` for a missing start or stop.
pub(crate) fn resolve_seek(seek: &SeekInfo, height: u64) -> Result<(u64, u64), Status> {
    let (Some(start), Some(stop)) = (&seek.start, &seek.stop) else { return Err(Status::BadRequest) };
    let number = match start.r#type {
        Some(seek_position::Type::Oldest(_)) => 0,
        Some(seek_position::Type::Newest(_)) => height.saturating_sub(1),
        Some(seek_position::Type::Specified(s)) if s.number > height => return Err(Status::NotFound),
        Some(seek_position::Type::Specified(s)) => s.number,
        Some(seek_position::Type::NextCommit(_)) => height,
        None => return Err(Status::NotFound),
    };
    let stop_number = match stop.r#type {
        Some(seek_position::Type::Oldest(_)) => number,
        Some(seek_position::Type::Newest(_)) if start == stop => number,
        Some(seek_position::Type::Newest(_)) => height.saturating_sub(1),
        Some(seek_position::Type::Specified(s)) if s.number < number => return Err(Status::BadRequest),
        Some(seek_position::Type::Specified(s)) => s.number,
        Some(seek_position::Type::NextCommit(_)) | None => 0,
    };
    Ok((number, stop_number))
}

/// Fabric's `SessionAccessControl`: the creator's expiry is checked on every evaluation, the policy on the first
/// one and whenever the channel's config sequence changed.
struct SessionAccess {
    signed: SignedData,
    expires_at: Option<i64>,
    checked_sequence: Option<u64>,
}

impl SessionAccess {
    fn new(signed: SignedData, config: &ChannelConfig) -> SessionAccess {
        let set = SignatureSet::new(vec![signed.clone()], config.msp_manager());
        // An identity that does not deserialize has no expiry; the policy refuses it.
        let expires_at = set.identity(0).map(|id| id.expires_at());
        SessionAccess { signed, expires_at, checked_sequence: None }
    }

    fn evaluate(&mut self, chain: &dyn Chain, kind: RequestKind, policy: &dyn PolicyChecker) -> Result<(), String> {
        if let Some(end) = self.expires_at {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
            if now > end {
                return Err("deliver client identity expired".into());
            }
        }
        let config = chain.config().ok_or("the channel has no configuration")?;
        if self.checked_sequence != Some(config.sequence()) {
            policy.check(&config, kind, &self.signed).map_err(|e| e.to_string())?;
            self.checked_sequence = Some(config.sequence());
        }
        Ok(())
    }
}

/// The client went away.
struct Disconnected;

type Sink = mpsc::Sender<Result<DeliverFrame, tonic::Status>>;

/// A parsed, authorized request.
struct Request {
    channel_id: String,
    chain: Arc<dyn Chain>,
    seek: SeekInfo,
    access: SessionAccess,
}

/// Serves Deliver streams over a [`ChainManager`] (Fabric 2.5 `common/deliver/deliver.go`), for the orderer's
/// `AtomicBroadcast/Deliver` and the peer's `protos.Deliver`.
///
/// Each request on a stream is a signed `Envelope` carrying a `SeekInfo`, handled in Fabric's order:
/// 1. the envelope, payload, header, channel header and signature header decode, and the channel header's
///    timestamp is within the time window of this node's clock → else `BAD_REQUEST`;
/// 2. the daemon's [`ChainManager`] knows the channel (and the channel has a configuration) → else `NOT_FOUND`;
/// 3. the `SeekInfo` decodes → else `BAD_REQUEST`;
/// 4. the chain is not errored ([`Chain::errored`]; ignored for `BEST_EFFORT`) → else `SERVICE_UNAVAILABLE`;
/// 5. session access control: the creator's certificate has not expired and the daemon's [`PolicyChecker`]
///    accepts the request's signed data → else `FORBIDDEN`;
/// 6. start and stop are set → else `BAD_REQUEST`; positions are resolved as Fabric's file ledger does: a start
///    beyond the height or of no type → `NOT_FOUND`, a specified stop before the start → `BAD_REQUEST`;
/// 7. blocks are sent in order: `FAIL_IF_NOT_READY` answers `NOT_FOUND` when the next block is not there yet,
///    `BLOCK_UNTIL_READY` waits for it (`SERVICE_UNAVAILABLE` if the chain errors meanwhile, unless
///    `BEST_EFFORT`); before each block the session access control runs again — the expiry every time, the
///    policy when the channel's config sequence changed — (`FORBIDDEN` when revoked); a block that cannot be
///    read answers `SERVICE_UNAVAILABLE` (`NOT_FOUND` if it is missing below the height);
/// 8. after the stop block `SUCCESS` ends the request and the stream waits for the next one; any other status
///    ends the stream.
///
/// Blocks are sent as the bytes the ledger stores (see [`DeliverFrameEncoder`]): a block is never decoded or
/// re-encoded for delivery and every receiver shares the same `Bytes`. `HEADER_WITH_SIG` requests get blocks
/// without their data (config blocks in full), which are re-encoded.
///
/// Where the orderer's and the peer's servers of earlier versions differed, Fabric's behaviour is kept: the
/// creator's expiry is checked before every block (the orderer checked it only with the policy), and the chain's
/// errored state is consulted for both (a peer's chain never errors, as in Fabric).
///
/// Differences from Fabric: no TLS binding check of the channel header's `tls_cert_hash` (Fabric checks it only
/// under mutual TLS); a stream whose client went away ends without a status.
pub struct DeliverHandler {
    chains: Arc<dyn ChainManager>,
    policy: Arc<dyn PolicyChecker>,
    time_window: Duration,
    observer: Option<Arc<dyn DeliverObserver>>,
    shutdown: Shutdown,
}

impl std::fmt::Debug for DeliverHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliverHandler").field("time_window", &self.time_window).finish_non_exhaustive()
    }
}

impl DeliverHandler {
    /// A handler over `chains` checking requests with `policy` and accepting request timestamps within
    /// `time_window` of this node's clock (`General.Authentication.TimeWindow` / `peer.authentication.timewindow`,
    /// 15 minutes in Fabric's sample configs). Streams run until their client leaves; see
    /// [`DeliverHandler::with_shutdown`].
    pub fn new(chains: Arc<dyn ChainManager>, policy: Arc<dyn PolicyChecker>, time_window: Duration) -> Self {
        DeliverHandler { chains, policy, time_window, observer: None, shutdown: Shutdown::never() }
    }

    /// Counts streams and blocks with `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn DeliverObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Ends every stream when `shutdown` fires.
    pub fn with_shutdown(mut self, shutdown: Shutdown) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// Serves one stream of `kind`: `inbound` yields raw request envelopes; the returned receiver yields the
    /// response frames (at most four buffered, so a slow client only slows its own stream). A task serves the
    /// requests one after another until the client closes, a request ends with a status other than SUCCESS, the
    /// client disconnects, or the shutdown fires.
    pub fn serve<S>(
        self: &Arc<Self>,
        kind: RequestKind,
        inbound: S,
    ) -> mpsc::Receiver<Result<DeliverFrame, tonic::Status>>
    where
        S: Stream<Item = Result<Bytes, tonic::Status>> + Send + Unpin + 'static,
    {
        let (tx, rx) = mpsc::channel(4);
        if let Some(o) = &self.observer {
            o.stream_opened();
        }
        let me = self.clone();
        let mut shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = me.run(kind, inbound, tx) => {}
                _ = shutdown.recv() => {}
            }
        });
        rx
    }

    async fn run<S>(&self, kind: RequestKind, mut inbound: S, tx: Sink)
    where
        S: Stream<Item = Result<Bytes, tonic::Status>> + Send + Unpin + 'static,
    {
        while let Some(item) = inbound.next().await {
            let Ok(raw) = item else { return };
            let status = match self.deliver_blocks(kind, raw, &tx).await {
                Ok(s) => s,
                Err(Disconnected) => return,
            };
            if tx.send(Ok(DeliverFrame::Status(status))).await.is_err() || status != Status::Success {
                return;
            }
        }
    }

    fn parse(&self, raw: Bytes) -> Result<(ChannelHeader, Payload, SignatureHeader, Envelope), String> {
        let env = Envelope::decode(raw).map_err(|e| format!("bad envelope: {e}"))?;
        let payload = Payload::decode(env.payload.clone()).map_err(|e| format!("bad payload: {e}"))?;
        let header = payload.header.clone().ok_or("envelope has no header")?;
        let chdr = ChannelHeader::decode(header.channel_header).map_err(|e| format!("bad channel header: {e}"))?;
        let shdr =
            SignatureHeader::decode(header.signature_header).map_err(|e| format!("bad signature header: {e}"))?;
        let ts = chdr.timestamp.ok_or("channel header in envelope must contain timestamp")?;
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i128).unwrap_or(0);
        let then = i128::from(ts.seconds) * 1_000_000_000 + i128::from(ts.nanos);
        if (now - then).unsigned_abs() > self.time_window.as_nanos() {
            return Err(format!(
                "envelope timestamp {}s is more than {:?} apart from this node's time",
                ts.seconds, self.time_window
            ));
        }
        Ok((chdr, payload, shdr, env))
    }

    fn request(&self, kind: RequestKind, raw: Bytes) -> Result<Request, Status> {
        let (chdr, payload, shdr, env) = self.parse(raw).map_err(|e| {
            tracing::warn!(error = %e, "bad Deliver request");
            Status::BadRequest
        })?;
        let chain = self.chains.chain(&chdr.channel_id).ok_or_else(|| {
            tracing::debug!(channel = %chdr.channel_id, "Deliver for an unknown channel");
            Status::NotFound
        })?;
        let config = chain.config().ok_or(Status::NotFound)?;
        let seek = SeekInfo::decode(payload.data).map_err(|e| {
            tracing::warn!(channel = %chdr.channel_id, error = %e, "malformed SeekInfo");
            Status::BadRequest
        })?;
        let best_effort = seek.error_response == seek_info::SeekErrorResponse::BestEffort as i32;
        if !best_effort && chain.errored().is_some_and(|e| e.borrow().is_some()) {
            tracing::warn!(channel = %chdr.channel_id, "refusing Deliver: the channel is errored");
            return Err(Status::ServiceUnavailable);
        }
        let signed = SignedData { data: env.payload, identity: shdr.creator, signature: env.signature };
        let mut access = SessionAccess::new(signed, &config);
        if let Err(e) = access.evaluate(&*chain, kind, &*self.policy) {
            tracing::warn!(channel = %chdr.channel_id, error = %e, "Deliver client not authorized");
            return Err(Status::Forbidden);
        }
        if seek.start.is_none() || seek.stop.is_none() {
            return Err(Status::BadRequest);
        }
        Ok(Request { channel_id: chdr.channel_id, chain, seek, access })
    }

    async fn deliver_blocks(&self, kind: RequestKind, raw: Bytes, tx: &Sink) -> Result<Status, Disconnected> {
        let Request { channel_id, chain, seek, mut access } = match self.request(kind, raw) {
            Ok(r) => r,
            Err(status) => return Ok(status),
        };
        let reader = chain.reader();
        let (mut number, stop_number) = match resolve_seek(&seek, reader.height()) {
            Ok(r) => r,
            Err(status) => return Ok(status),
        };
        let fail_if_not_ready = seek.behavior == seek_info::SeekBehavior::FailIfNotReady as i32;
        let best_effort = seek.error_response == seek_info::SeekErrorResponse::BestEffort as i32;
        let headers_only = seek.content_type == seek_info::SeekContentType::HeaderWithSig as i32;
        let mut errored = if best_effort { None } else { chain.errored() };

        loop {
            if fail_if_not_ready && number >= reader.height() {
                return Ok(Status::NotFound);
            }
            if reader.height() <= number {
                let waited = tokio::select! {
                    ok = reader.wait_for(number) => ok,
                    _ = tx.closed() => return Err(Disconnected),
                    _ = errored_signal(errored.as_mut()) => false,
                };
                if !waited {
                    return Ok(Status::ServiceUnavailable);
                }
            }
            let bytes = match reader.block(number) {
                Ok(Some(b)) => b,
                Ok(None) => return Ok(Status::NotFound),
                Err(e) => {
                    tracing::error!(channel = %channel_id, number, error = %e, "reading a block for Deliver");
                    return Ok(Status::ServiceUnavailable);
                }
            };
            let bytes = crate::faults::served_block(number, bytes);
            if let Err(e) = access.evaluate(&*chain, kind, &*self.policy) {
                tracing::warn!(channel = %channel_id, error = %e, "Deliver authorization revoked");
                return Ok(Status::Forbidden);
            }
            let bytes = if headers_only { strip_data(bytes) } else { bytes };
            let frame = match kind {
                RequestKind::Blocks => DeliverFrame::Block(bytes),
                RequestKind::WithPrivateData => DeliverFrame::WithPrivateData(bytes),
                RequestKind::Filtered => match filtered_block(&bytes) {
                    Ok(f) => DeliverFrame::Filtered(f),
                    Err(e) => {
                        tracing::warn!(channel = %channel_id, number, error = %e, "cannot make a filtered block");
                        return Ok(Status::BadRequest);
                    }
                },
            };
            if tx.send(Ok(frame)).await.is_err() {
                return Err(Disconnected);
            }
            if let Some(o) = &self.observer {
                o.block_sent(kind);
            }
            if number == stop_number {
                return Ok(Status::Success);
            }
            number += 1;
        }
    }
}

/// Resolves when the chain becomes errored (or its error channel closes); pends forever without one.
async fn errored_signal(errored: Option<&mut watch::Receiver<Option<String>>>) {
    match errored {
        Some(rx) => {
            let _ = rx.wait_for(|e| e.is_some()).await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ferrofabric_protos::orderer::{SeekNewest, SeekNextCommit, SeekOldest, SeekPosition, SeekSpecified};

    fn pos(t: seek_position::Type) -> Option<SeekPosition> {
        Some(SeekPosition { r#type: Some(t) })
    }
    fn oldest() -> Option<SeekPosition> {
        pos(seek_position::Type::Oldest(SeekOldest {}))
    }
    fn newest() -> Option<SeekPosition> {
        pos(seek_position::Type::Newest(SeekNewest {}))
    }
    fn at(n: u64) -> Option<SeekPosition> {
        pos(seek_position::Type::Specified(SeekSpecified { number: n }))
    }
    fn seek(start: Option<SeekPosition>, stop: Option<SeekPosition>) -> SeekInfo {
        SeekInfo { start, stop, ..SeekInfo::default() }
    }

    #[test]
    fn positions_resolve_as_fabrics_file_ledger() {
        assert_eq!(resolve_seek(&seek(oldest(), newest()), 10), Ok((0, 9)));
        assert_eq!(resolve_seek(&seek(newest(), newest()), 10), Ok((9, 9)));
        assert_eq!(resolve_seek(&seek(at(3), oldest()), 10), Ok((3, 3)));
        assert_eq!(resolve_seek(&seek(at(3), at(5)), 10), Ok((3, 5)));
        assert_eq!(resolve_seek(&seek(at(10), at(u64::MAX)), 10), Ok((10, u64::MAX)));
        let next = pos(seek_position::Type::NextCommit(SeekNextCommit {}));
        assert_eq!(resolve_seek(&seek(next, at(12)), 10), Ok((10, 12)));
        assert_eq!(resolve_seek(&seek(at(0), next), 10), Ok((0, 0)));
    }

    #[test]
    fn bad_positions_get_fabrics_statuses() {
        assert_eq!(resolve_seek(&seek(None, newest()), 10), Err(Status::BadRequest));
        assert_eq!(resolve_seek(&seek(oldest(), None), 10), Err(Status::BadRequest));
        assert_eq!(resolve_seek(&seek(at(11), at(12)), 10), Err(Status::NotFound));
        assert_eq!(resolve_seek(&seek(Some(SeekPosition { r#type: None }), at(1)), 10), Err(Status::NotFound));
        assert_eq!(resolve_seek(&seek(at(5), at(4)), 10), Err(Status::BadRequest));
    }
}
