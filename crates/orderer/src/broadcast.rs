//! `AtomicBroadcast/Broadcast` (Fabric `orderer/common/broadcast/broadcast.go`), with FastFabric's Opt O-II:
//! [`BroadcastHandler`], whose documentation gives the order of checks and the differences from Fabric.

use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_protos::common::Status;
use ferrofabric_protos::orderer::BroadcastResponse;
use futures::future::{BoxFuture, FutureExt};
use futures::stream::{BoxStream, Stream, StreamExt};
use rayon::iter::{IntoParallelIterator, ParallelIterator};
use tokio::sync::{oneshot, watch};

use crate::consensus::Submission;
use crate::msgprocessor::{classify, inspect, MsgClass, Rejection};
use crate::registrar::{Channel, Registrar};

/// Chunks of messages of one stream being checked at once: while one is checked, the next is read and started.
const CHUNKS_IN_FLIGHT: usize = 2;

/// A message that passed the checks, ready for consensus.
pub struct Checked {
    channel: Arc<Channel>,
    submission: Submission,
    config: bool,
}

/// The BAD_REQUEST info of a Broadcast to a channel this orderer does not have, word for word Fabric 2.5's: a
/// message for an unknown channel was a channel creation request, and there is no system channel to create it.
const NO_SYSTEM_CHANNEL: &str =
    "channel creation request not allowed because the orderer system channel is not defined";

/// Handles Broadcast streams for all channels of a [`Registrar`].
///
/// `AtomicBroadcast/Broadcast` (Fabric `orderer/common/broadcast/broadcast.go`), with FastFabric's Opt O-II.
///
/// Per message, in Fabric's order: decode the envelope down to the channel header (BAD_REQUEST), find the
/// channel (BAD_REQUEST, with Fabric 2.5's words for it), classify by header type (CONFIG and
/// ORDERER_TRANSACTION: BAD_REQUEST), then the standard filters — empty, size ≤ `AbsoluteMaxBytes`, creator expiry (BAD_REQUEST), `/Channel/Writers`
/// with the creator's signature (FORBIDDEN) — or, for CONFIG_UPDATE, the config update processor; finally the
/// message is handed to the channel's consensus (SERVICE_UNAVAILABLE if it cannot take it).
///
/// Differences from Fabric, all deliberate:
/// * one response per message and the stream stays open after a rejection (Fabric answers and hangs up, so a
///   client loses everything it had in flight behind a bad message);
/// * Opt O-II: the messages of one stream that have arrived together (up to `window`) are checked concurrently on
///   the crypto thread pool, a lone message on the stream's own task (two thread wake-ups cost more than one
///   check); while one such chunk is checked the next is read and started. Results are consumed in arrival order,
///   so responses — and the order in which messages reach consensus — are the stream's order. When consensus
///   lags, handing a message over waits, the chunks in flight fill up, reading stops and HTTP/2 flow control
///   pushes back on the client;
/// * a backend that places a message in its order at the call ([`crate::Consensus::order_pipelined`], Kafka) gets
///   the messages of a stream in the stream's order, but up to `window` of them may await acceptance at once;
///   responses still come in the stream's order. Other backends get one message of a stream at a time.
///
/// Messages are ordered with the exact bytes the client sent (Fabric re-marshals the decoded envelope, which
/// gives the same bytes for any canonically encoded message).
pub struct BroadcastHandler {
    registrar: Arc<Registrar>,
    pool: Arc<rayon::ThreadPool>,
    window: usize,
    shutdown: watch::Receiver<bool>,
}

impl std::fmt::Debug for BroadcastHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BroadcastHandler").field("window", &self.window).finish_non_exhaustive()
    }
}

impl BroadcastHandler {
    /// A handler checking up to `window` messages of a stream at once on `pool` (`window` 1 = O-II off: each
    /// message is checked on the stream's task, one after the other). Streams stop reading when
    /// `shutdown` turns true.
    pub fn new(
        registrar: Arc<Registrar>,
        pool: Arc<rayon::ThreadPool>,
        window: usize,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        BroadcastHandler { registrar, pool, window: window.max(1), shutdown }
    }

    /// Serves one Broadcast stream: `inbound` yields the raw marshaled envelopes; the result yields one
    /// response per message, in order. Ends when the client half-closes or the inbound stream fails (a
    /// connection cut mid-message); other streams are not affected.
    pub fn serve<S>(self: &Arc<Self>, inbound: S) -> BoxStream<'static, BroadcastResponse>
    where
        S: Stream<Item = Result<Bytes, tonic::Status>> + Send + 'static,
    {
        let checker = self.clone();
        let enqueuer = self.clone();
        // Messages that a backend does not place at once go to it one at a time, in the stream's order (the lock
        // is fair, and the futures below are first polled in that order).
        let one_at_a_time = Arc::new(tokio::sync::Mutex::new(()));
        let mut shutdown = self.shutdown.clone();
        inbound
            .take_until(async move {
                let _ = shutdown.wait_for(|s| *s).await;
            })
            .take_while(|item| {
                if let Err(e) = item {
                    tracing::debug!(error = %e, "broadcast stream ended with an error");
                }
                std::future::ready(item.is_ok())
            })
            .filter_map(|item| std::future::ready(item.ok()))
            .ready_chunks(self.window)
            .map(move |chunk| checker.check_chunk(chunk))
            .buffered(CHUNKS_IN_FLIGHT)
            .flat_map(futures::stream::iter)
            .map(move |checked| enqueuer.enqueue(checked, &one_at_a_time))
            .buffered(self.window)
            .boxed()
    }

    /// Checks the messages that arrived together: a lone message right here on the stream's task, more than one
    /// on the crypto pool, spread over its threads. Handing a lone message to the pool costs two thread wake-ups,
    /// which take longer than its check when other processes compete for the CPU; a burst is worth spreading.
    fn check_chunk(self: &Arc<Self>, chunk: Vec<Bytes>) -> BoxFuture<'static, Vec<Result<Checked, Rejection>>> {
        if chunk.len() == 1 {
            return futures::future::ready(chunk.into_iter().map(|raw| self.check(raw)).collect()).boxed();
        }
        let (tx, rx) = oneshot::channel();
        let me = self.clone();
        let n = chunk.len();
        self.pool.spawn(move || {
            let checked = chunk.into_par_iter().map(|raw| me.check(raw)).collect();
            let _ = tx.send(checked);
        });
        async move {
            rx.await.unwrap_or_else(|_| {
                (0..n).map(|_| Err(Rejection::unavailable("the message checker stopped"))).collect()
            })
        }
        .boxed()
    }

    /// Runs every check on one marshaled envelope (see [`BroadcastHandler`]); CPU-bound (signature verification).
    ///
    /// Errors: the [`Rejection`] to send back.
    pub fn check(&self, raw: Bytes) -> Result<Checked, Rejection> {
        let msg = inspect(raw)?;
        let id = &msg.channel_header.channel_id;
        // Fabric 2.5 (`multichannel.Registrar.BroadcastChannelSupport`) treats a message for a channel it does not
        // have as a channel creation request for the system channel, which a participation-API orderer lacks.
        let channel = self.registrar.channel(id).ok_or_else(|| Rejection::bad_request(NO_SYSTEM_CHANNEL))?;
        match classify(msg.channel_header.r#type) {
            MsgClass::Config => Err(Rejection::bad_request("message is of type that cannot be processed directly")),
            MsgClass::Unsupported => Err(Rejection::bad_request("message is of type that is no longer supported")),
            MsgClass::Normal => {
                let config_seq = channel.support.process_normal(&msg)?;
                let submission =
                    Submission { size: msg.size, tx_id: msg.channel_header.tx_id, envelope: msg.raw, config_seq };
                Ok(Checked { channel, submission, config: false })
            }
            MsgClass::ConfigUpdate => {
                let (envelope, config_seq) = channel.support.process_config_update(&msg)?;
                let size = inspect(envelope.clone())?.size;
                let submission = Submission { size, tx_id: String::new(), envelope, config_seq };
                Ok(Checked { channel, submission, config: true })
            }
        }
    }

    /// Hands a checked message to its channel's consensus: placed at once if the backend can
    /// ([`crate::Consensus::order_pipelined`]), else in turn behind the stream's earlier messages. The future
    /// yields the response.
    fn enqueue(
        self: &Arc<Self>,
        checked: Result<Checked, Rejection>,
        one_at_a_time: &Arc<tokio::sync::Mutex<()>>,
    ) -> BoxFuture<'static, BroadcastResponse> {
        let metrics = self.registrar.metrics().clone();
        let checked = match checked {
            Ok(c) => c,
            Err(r) => {
                metrics.broadcast(r.status);
                tracing::debug!(status = r.status.as_str_name(), info = %r.info, "broadcast message rejected");
                return futures::future::ready(BroadcastResponse { status: r.status as i32, info: r.info }).boxed();
            }
        };
        let Checked { channel, submission, config } = checked;
        let placed = if let Some(reason) = channel.support.errored() {
            Ok(futures::future::ready(Err(crate::consensus::ConsensusError(reason))).boxed())
        } else if config {
            Err(submission)
        } else {
            channel.consensus.order_pipelined(submission)
        };
        let turn = one_at_a_time.clone();
        async move {
            let result = match placed {
                Ok(accepted) => accepted.await,
                Err(submission) => {
                    let _turn = turn.lock().await;
                    if config {
                        channel.consensus.configure(submission).await
                    } else {
                        channel.consensus.order(submission).await
                    }
                }
            };
            match result {
                Ok(()) => {
                    metrics.broadcast(Status::Success);
                    BroadcastResponse { status: Status::Success as i32, info: String::new() }
                }
                Err(e) => {
                    metrics.broadcast(Status::ServiceUnavailable);
                    BroadcastResponse {
                        status: Status::ServiceUnavailable as i32,
                        info: format!("rejected by consenter: {e}"),
                    }
                }
            }
        }
        .boxed()
    }
}
