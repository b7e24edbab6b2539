//! The block-pulling client (Fabric's `core/deliverservice/blocksprovider`): [`Follower`] and what it asks its
//! servers for ([`seek_from`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use bytes::Bytes;
use ferrofabric_comm::{open_deliver, DeliverItem};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::orderer::{seek_info, SeekInfo};
use tokio::sync::mpsc;

use crate::censorship::{CensorshipMonitor, HeaderReceivers};
use crate::config::FollowConfig;
use crate::connection::{backoff, block_number, connect, seek_envelope};

/// A block as received.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The block number from its header.
    pub number: u64,
    /// The marshaled `common.Block` exactly as the server sent it.
    pub bytes: Bytes,
    /// When it arrived (start of the block latency metric).
    pub received: Instant,
}

/// Why a session with one server ended.
enum SessionEnd {
    /// The consumer is gone: stop following.
    Closed,
    /// The consumer asked to start again from this number (it refused a block).
    Restart(u64),
    /// An error; `progressed` = at least one block was received in the session.
    Failed { error: anyhow::Error, progressed: bool },
}

/// The block-pulling client (Fabric's `core/deliverservice/blocksprovider`): follows a channel from a list of
/// servers the way Fabric's peer pulls blocks from the orderers — ask for blocks from our own height to the end of
/// time with a signed `SeekInfo` (`BLOCK_UNTIL_READY`), hand every block on, and on any error (a failed connection,
/// a broken stream, a status, a block out of order, or a block the consumer refused) pause (100 ms, doubling up to a
/// threshold, reset by the next block received) and resume from the consumer's height at the next server.
///
/// On a BFT channel ([`FollowConfig::bft`]) it is Fabric 3's BFT deliverer: while blocks come from one server, the
/// others' `HEADER_WITH_SIG` attestations are watched, and a server that withholds an attested block past the
/// censorship timeout is left for the next one.
///
/// The same client follows an orderer (`orderer.AtomicBroadcast/Deliver`: the committer) or a peer
/// (`protos.Deliver/Deliver`: the block store and endorser replicas following a committer): both answer with
/// `DeliverResponse{status = 1 | block = 2}`. Blocks are handed on as the bytes received, never re-encoded.
pub struct Follower {
    config: FollowConfig,
    signer: Arc<SigningIdentity>,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Follower {
    /// A follower signing its seek requests with `signer` (must satisfy the server's Readers policy).
    pub fn new(config: FollowConfig, signer: Arc<SigningIdentity>) -> Self {
        Follower { config, signer }
    }

    /// Sends every block from number `next` on to `out`, in order, until `out` is closed. A number received on
    /// `restart` makes the follower drop the current server and ask the next one for blocks from that number (the
    /// consumer refused a block, e.g. a bad signature). Blocks already queued in `out` at that moment are not
    /// recalled: the consumer skips numbers it does not expect. Closing `out` or the `restart` sender ends the
    /// follower.
    ///
    /// Never returns an error: failures are logged and retried with back-off, forever (Fabric's peer gives up only
    /// when it is not a static leader; a committer always is).
    pub async fn run(self, mut next: u64, out: mpsc::Sender<Fetched>, mut restart: Option<mpsc::Receiver<u64>>) {
        let n = self.config.endpoints.len();
        if n == 0 {
            tracing::error!("no Deliver endpoints configured; nothing to follow");
            out.closed().await;
            return;
        }
        let mut index = rand::random::<u32>() as usize % n;
        let mut failures: u32 = 0;
        loop {
            if failures > 0 {
                let pause = backoff(failures, self.config.max_backoff);
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = out.closed() => return,
                }
            }
            let endpoint = &self.config.endpoints[index % n];
            let start = next;
            match self.session(endpoint, &mut next, &out, restart.as_mut()).await {
                SessionEnd::Closed => return,
                SessionEnd::Restart(from) => {
                    tracing::warn!(%endpoint, from, "block refused; fetching it again from another server");
                    // A server that delivered good blocks before the refused one is not down: pause briefly.
                    failures = if from > start { 1 } else { failures.saturating_add(1) };
                    next = from;
                    index += 1;
                }
                SessionEnd::Failed { error, progressed } => {
                    tracing::warn!(%endpoint, next, error = format!("{error:#}"), "Deliver from {endpoint} failed");
                    failures = if progressed { 1 } else { failures.saturating_add(1) };
                    index += 1;
                }
            }
        }
    }

    async fn session(
        &self,
        endpoint: &str,
        next: &mut u64,
        out: &mpsc::Sender<Fetched>,
        mut restart: Option<&mut mpsc::Receiver<u64>>,
    ) -> SessionEnd {
        let start = *next;
        let fail = |error: anyhow::Error, next: u64| SessionEnd::Failed { error, progressed: next > start };
        let channel = match connect(endpoint, &self.config).await {
            Ok(c) => c,
            Err(e) => return fail(e.into(), *next),
        };
        let request = seek_envelope(&self.config.channel_id, &self.signer, &seek_from(*next));
        let mut stream = match open_deliver(channel, self.config.api, request).await {
            Ok(s) => s,
            Err(e) => return fail(anyhow!("opening the Deliver stream: {e}"), *next),
        };
        tracing::info!(%endpoint, from = *next, "receiving blocks");
        // On BFT channels: the other servers' attestations, and Fabric's censorship rule over them.
        let mut censorship = self.config.bft.as_ref().map(|bft| {
            (
                bft,
                HeaderReceivers::start(&self.config, bft, &self.signer, endpoint, *next),
                CensorshipMonitor::default(),
            )
        });
        let tick =
            censorship.as_ref().map_or(Duration::from_secs(3600), |c| CensorshipMonitor::tick(c.0.censorship_timeout));
        let mut ticker = tokio::time::interval(tick);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let item = tokio::select! {
                m = stream.message() => m,
                _ = ticker.tick(), if censorship.is_some() => {
                    if let Some((bft, receivers, monitor)) = censorship.as_mut() {
                        if let Some((witness, number)) =
                            monitor.check(receivers, *next, bft.censorship_timeout, Instant::now())
                        {
                            return fail(
                                anyhow!(
                                    "block censorship suspected: {witness} attests block {number}, which this server \
                                     has not delivered within {:?}",
                                    bft.censorship_timeout
                                ),
                                *next,
                            );
                        }
                    }
                    continue;
                }
                from = recv_restart(&mut restart) => match from {
                    Some(from) => return SessionEnd::Restart(from),
                    None => return SessionEnd::Closed,
                },
                _ = out.closed() => return SessionEnd::Closed,
            };
            let bytes = match item {
                Ok(Some(DeliverItem::Block(b))) => b,
                Ok(Some(DeliverItem::Status(s))) => {
                    return fail(anyhow!("server answered with status {}", status_name(s)), *next)
                }
                Ok(None) => return fail(anyhow!("server closed the stream"), *next),
                Err(e) => return fail(anyhow!("stream broke: {e}"), *next),
            };
            let number = match block_number(&bytes) {
                Ok(n) => n,
                Err(e) => return fail(e.into(), *next),
            };
            if number != *next {
                return fail(anyhow!("received block {number} while expecting block {}", *next), *next);
            }
            let fetched = Fetched { number, bytes, received: Instant::now() };
            tokio::select! {
                r = out.send(fetched) => if r.is_err() { return SessionEnd::Closed },
                from = recv_restart(&mut restart) => match from {
                    Some(from) => return SessionEnd::Restart(from),
                    None => return SessionEnd::Closed,
                },
            }
            *next += 1;
        }
    }
}

/// Waits for a restart request; pends forever when there is no restart channel.
async fn recv_restart(restart: &mut Option<&mut mpsc::Receiver<u64>>) -> Option<u64> {
    match restart {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}

/// `SeekInfo` from block `start` to the end of time, waiting for blocks not yet there (what Fabric's peer asks
/// the orderer for: `seekInfoFrom(height)`).
pub fn seek_from(start: u64) -> SeekInfo {
    ferrofabric_protoutil::seek_range(start, None, seek_info::SeekBehavior::BlockUntilReady)
}

fn status_name(s: i32) -> String {
    match ferrofabric_protos::common::Status::try_from(s) {
        Ok(st) => format!("{} ({s})", st.as_str_name()),
        Err(_) => s.to_string(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ferrofabric_protos::orderer::{seek_position, SeekSpecified};

    #[test]
    fn seek_from_asks_for_everything_from_the_height() {
        let s = seek_from(7);
        let start = s.start.unwrap().r#type.unwrap();
        let stop = s.stop.unwrap().r#type.unwrap();
        assert_eq!(start, seek_position::Type::Specified(SeekSpecified { number: 7 }));
        assert_eq!(stop, seek_position::Type::Specified(SeekSpecified { number: u64::MAX }));
        assert_eq!(s.behavior, seek_info::SeekBehavior::BlockUntilReady as i32);
    }
}
