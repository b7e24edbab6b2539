//! `AtomicBroadcast/Deliver` (Fabric `common/deliver/deliver.go`, `common/ledger/blockledger/fileledger`).
//!
//! Each request is a signed envelope carrying a `SeekInfo`. In Fabric's order:
//! 1. envelope, payload, header, channel header and signature header decode, and the channel header's
//!    timestamp is within `TimeWindow` of the server clock → else BAD_REQUEST;
//! 2. the channel exists → else NOT_FOUND;
//! 3. the `SeekInfo` decodes → else BAD_REQUEST;
//! 4. the channel is not errored (unless `BEST_EFFORT`) → else SERVICE_UNAVAILABLE;
//! 5. `/Channel/Readers` is satisfied by `{payload, creator, signature}` and the creator has not expired → else
//!    FORBIDDEN (re-checked whenever the channel's config sequence changes while blocks are streamed);
//! 6. start and stop are set → else BAD_REQUEST; start: oldest = 0, newest = height − 1, specified = n (n >
//!    height → NOT_FOUND), next commit = height; stop: oldest = start, newest = height − 1 at request time (or
//!    start when start is newest too), specified = n (n < start → BAD_REQUEST);
//! 7. blocks are sent in order; `FAIL_IF_NOT_READY` answers NOT_FOUND when the next block is not there yet,
//!    `BLOCK_UNTIL_READY` waits for it; after the stop block a SUCCESS status ends the request and the stream
//!    waits for the next request. Any other status ends the stream.
//!
//! Blocks are sent as the bytes the ledger stores: each response frame is `DeliverResponse{block}` written as
//! field tag + length + the stored block bytes, so a block is never decoded or re-encoded for delivery and
//! every receiver shares the same `Bytes` (the store keeps recent blocks in memory). `HEADER_WITH_SIG`
//! requests get the block without its data (config blocks in full), which is re-encoded.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrofabric_policy::{ChannelConfig, SignatureSet, SignedData};
use ferrofabric_protos::common::{Block, ChannelHeader, Envelope, Payload, SignatureHeader, Status};
use ferrofabric_protos::orderer::{seek_info, seek_position, SeekInfo};
use futures::{Stream, StreamExt};
use prost::Message;
use tokio::sync::{mpsc, watch};

use crate::registrar::{Channel, Registrar};
use ferrofabric_protoutil::is_config_block;

/// One frame of a Deliver response stream: a stored block (sent as `DeliverResponse{block}` around its stored
/// bytes) or the final status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliverFrame {
    /// A marshaled `common.Block`.
    Block(Bytes),
    /// The status closing a request.
    Status(Status),
}

/// Handles Deliver streams for all channels of a [`Registrar`].
pub struct DeliverHandler {
    registrar: Arc<Registrar>,
    time_window: Duration,
    shutdown: watch::Receiver<bool>,
}

impl std::fmt::Debug for DeliverHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliverHandler").field("time_window", &self.time_window).finish_non_exhaustive()
    }
}

/// The client went away while blocks were being sent.
struct Disconnected;

type Sink = mpsc::Sender<Result<DeliverFrame, tonic::Status>>;

/// The parsed, authorized parts of a request.
struct Request {
    channel: Arc<Channel>,
    seek: SeekInfo,
    signed: SignedData,
}

impl DeliverHandler {
    /// A handler accepting request timestamps within `time_window` of the server clock
    /// (`General.Authentication.TimeWindow`). Streams end when `shutdown` turns true.
    pub fn new(registrar: Arc<Registrar>, time_window: Duration, shutdown: watch::Receiver<bool>) -> Self {
        DeliverHandler { registrar, time_window, shutdown }
    }

    /// Serves one Deliver stream: `inbound` yields raw request envelopes; the returned receiver yields the
    /// response frames. A task serves requests one after another until the client closes, a request ends
    /// with a status other than SUCCESS, or the client disconnects.
    pub fn serve<S>(self: &Arc<Self>, inbound: S) -> mpsc::Receiver<Result<DeliverFrame, tonic::Status>>
    where
        S: Stream<Item = Result<Bytes, tonic::Status>> + Send + Unpin + 'static,
    {
        let (tx, rx) = mpsc::channel(4);
        let me = self.clone();
        self.registrar.metrics().deliver_stream_opened();
        let mut shutdown = self.shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = me.run(inbound, tx) => {}
                _ = async { let _ = shutdown.wait_for(|s| *s).await; } => {}
            }
        });
        rx
    }

    async fn run<S>(&self, mut inbound: S, tx: Sink)
    where
        S: Stream<Item = Result<Bytes, tonic::Status>> + Send + Unpin + 'static,
    {
        while let Some(item) = inbound.next().await {
            let Ok(raw) = item else {
                return;
            };
            let status = match self.deliver_blocks(raw, &tx).await {
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
                "envelope timestamp {}s is more than {:?} apart from the server time",
                ts.seconds, self.time_window
            ));
        }
        Ok((chdr, payload, shdr, env))
    }

    /// Fabric's session access control: `/Channel/Readers` over the request's signed data, plus creator expiry.
    fn authorize(config: &ChannelConfig, signed: &SignedData) -> Result<(), String> {
        let policy = config.policy("/Channel/Readers").ok_or("no /Channel/Readers policy")?;
        let set = SignatureSet::new(vec![signed.clone()], config.msp_manager());
        policy.evaluate(&set).map_err(|e| format!("/Channel/Readers not satisfied: {e}"))?;
        if let Some(id) = set.identity(0) {
            let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
            if id.expires_at() <= now {
                return Err("client identity expired".into());
            }
        }
        Ok(())
    }

    fn request(&self, raw: Bytes) -> Result<Request, Status> {
        let (chdr, payload, shdr, env) = self.parse(raw).map_err(|e| {
            tracing::warn!(error = %e, "bad deliver request");
            Status::BadRequest
        })?;
        let channel = self.registrar.channel(&chdr.channel_id).ok_or(Status::NotFound)?;
        let seek = SeekInfo::decode(payload.data).map_err(|_| Status::BadRequest)?;
        let best_effort = seek.error_response == seek_info::SeekErrorResponse::BestEffort as i32;
        if !best_effort && channel.support.errored().is_some() {
            return Err(Status::ServiceUnavailable);
        }
        let signed = SignedData { data: env.payload, identity: shdr.creator, signature: env.signature };
        if let Err(e) = Self::authorize(&channel.support.config(), &signed) {
            tracing::warn!(channel = %chdr.channel_id, error = %e, "deliver client not authorized");
            return Err(Status::Forbidden);
        }
        if seek.start.is_none() || seek.stop.is_none() {
            return Err(Status::BadRequest);
        }
        Ok(Request { channel, seek, signed })
    }

    async fn deliver_blocks(&self, raw: Bytes, tx: &Sink) -> Result<Status, Disconnected> {
        let Request { channel, seek, signed } = match self.request(raw) {
            Ok(r) => r,
            Err(status) => return Ok(status),
        };
        let store = channel.support.store().clone();
        let height = store.height();
        let start = seek.start.unwrap_or_default();
        let stop = seek.stop.unwrap_or_default();
        let mut number = match start.r#type {
            Some(seek_position::Type::Oldest(_)) => 0,
            Some(seek_position::Type::Newest(_)) => height.saturating_sub(1),
            Some(seek_position::Type::Specified(s)) if s.number > height => return Ok(Status::NotFound),
            Some(seek_position::Type::Specified(s)) => s.number,
            Some(seek_position::Type::NextCommit(_)) => height,
            None => return Ok(Status::NotFound),
        };
        let stop_number = match stop.r#type {
            Some(seek_position::Type::Oldest(_)) => number,
            Some(seek_position::Type::Newest(_)) if start == stop => number,
            Some(seek_position::Type::Newest(_)) => height.saturating_sub(1),
            Some(seek_position::Type::Specified(s)) if s.number < number => return Ok(Status::BadRequest),
            Some(seek_position::Type::Specified(s)) => s.number,
            // Fabric's switch has no default arm: an unset stop type leaves the stop number at 0.
            Some(seek_position::Type::NextCommit(_)) | None => 0,
        };
        let fail_if_not_ready = seek.behavior == seek_info::SeekBehavior::FailIfNotReady as i32;
        let best_effort = seek.error_response == seek_info::SeekErrorResponse::BestEffort as i32;
        let headers_only = seek.content_type == seek_info::SeekContentType::HeaderWithSig as i32;
        let mut errored = channel.support.subscribe_errored();
        let mut checked_seq = channel.support.sequence();
        let metrics = self.registrar.metrics().clone();

        loop {
            if fail_if_not_ready && number >= store.height() {
                return Ok(Status::NotFound);
            }
            if store.height() <= number {
                let waited = tokio::select! {
                    r = store.wait_for(number) => r.is_ok(),
                    _ = tx.closed() => return Err(Disconnected),
                    _ = async { let _ = errored.wait_for(|e| e.is_some() && !best_effort).await; } => false,
                };
                if !waited {
                    return Ok(Status::ServiceUnavailable);
                }
            }
            let bytes = match store.block(number) {
                Ok(Some(b)) => b,
                Ok(None) => return Ok(Status::NotFound),
                Err(e) => {
                    tracing::error!(channel = %channel.support.channel_id(), number, error = %e, "reading block");
                    return Ok(Status::ServiceUnavailable);
                }
            };
            let seq = channel.support.sequence();
            if seq != checked_seq {
                if let Err(e) = Self::authorize(&channel.support.config(), &signed) {
                    tracing::warn!(channel = %channel.support.channel_id(), error = %e, "deliver authorization revoked");
                    return Ok(Status::Forbidden);
                }
                checked_seq = seq;
            }
            let frame = if headers_only { strip_data(bytes) } else { bytes };
            if tx.send(Ok(DeliverFrame::Block(frame))).await.is_err() {
                return Err(Disconnected);
            }
            metrics.deliver_block_sent();
            if number == stop_number {
                return Ok(Status::Success);
            }
            number += 1;
        }
    }
}

/// The block without its data unless it is a config block (Fabric's `HEADER_WITH_SIG` content type).
fn strip_data(bytes: Bytes) -> Bytes {
    match Block::decode(bytes.clone()) {
        Ok(block) if !is_config_block(&block) => {
            Bytes::from(Block { header: block.header, data: None, metadata: block.metadata }.encode_to_vec())
        }
        _ => bytes,
    }
}
