//! The block-pulling client (Fabric's `core/deliverservice/blocksprovider`): [`Follower`], its configuration and
//! the signed seek request it sends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use bytes::Bytes;
use ferrofabric_comm::{
    connect_with, open_deliver, parse_duration, ClientTls, ConnectOptions, DeliverApi, DeliverItem,
};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::BlockHeader;
use ferrofabric_protos::orderer::{seek_info, SeekInfo};
use prost::Message;
use serde::Deserialize;
use tokio::sync::mpsc;
use tonic::transport::Channel;

use crate::censorship::{AttestationVerifier, BftFollow, CensorshipMonitor, HeaderReceivers};

/// How a follower talks to its servers, in configuration files (Fabric's `peer.deliveryclient` and
/// `peer.keepalive.deliveryClient`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct DeliveryConfig {
    /// Timeout of one connection attempt (`connTimeout`, Go duration).
    pub connect_timeout: String,
    /// Largest pause between reconnection attempts (`reConnectBackoffThreshold`); pauses start at 100 ms and
    /// double.
    pub reconnect_backoff_threshold: String,
    /// HTTP/2 keepalive ping interval (`peer.keepalive.deliveryClient.interval`); a dead server is detected within
    /// interval + timeout.
    pub keepalive_interval: String,
    /// How long a verified attestation of a BFT channel may stay ahead of the blocks received before the block
    /// source is dropped (`peer.deliveryclient.blockCensorshipTimeoutKey`; see [`BftFollow`]).
    pub block_censorship_timeout: String,
    /// How long a keepalive ping may go unanswered (`peer.keepalive.deliveryClient.timeout`).
    pub keepalive_timeout: String,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig {
            connect_timeout: "3s".into(),
            reconnect_backoff_threshold: "10s".into(),
            keepalive_interval: "10s".into(),
            block_censorship_timeout: "30s".into(),
            keepalive_timeout: "5s".into(),
        }
    }
}

impl DeliveryConfig {
    /// Checks that the five durations parse.
    ///
    /// Errors: a malformed duration.
    pub fn validate(&self) -> anyhow::Result<()> {
        for d in [
            &self.connect_timeout,
            &self.reconnect_backoff_threshold,
            &self.keepalive_interval,
            &self.keepalive_timeout,
            &self.block_censorship_timeout,
        ] {
            parse_duration(d)?;
        }
        Ok(())
    }

    /// The [`FollowConfig`] following `channel_id` from `endpoints` through `api` with these settings.
    ///
    /// Errors: a malformed duration.
    pub fn follow_config(
        &self,
        endpoints: Vec<String>,
        api: DeliverApi,
        channel_id: String,
        tls: Option<ClientTls>,
    ) -> anyhow::Result<FollowConfig> {
        Ok(FollowConfig {
            endpoints,
            api,
            channel_id,
            tls,
            connect_timeout: parse_duration(&self.connect_timeout)?,
            max_backoff: parse_duration(&self.reconnect_backoff_threshold)?,
            keepalive_interval: parse_duration(&self.keepalive_interval)?,
            keepalive_timeout: parse_duration(&self.keepalive_timeout)?,
            bft: None,
        })
    }

    /// The BFT deliverer's settings with these timeouts, checking attestations with `verifier`.
    ///
    /// Errors: a malformed duration.
    pub fn bft_follow(&self, verifier: Arc<dyn AttestationVerifier>) -> anyhow::Result<BftFollow> {
        Ok(BftFollow { censorship_timeout: parse_duration(&self.block_censorship_timeout)?, verifier })
    }
}

/// Where and how to follow a channel.
#[derive(Debug, Clone)]
pub struct FollowConfig {
    /// Server addresses `host:port`, tried in turn.
    pub endpoints: Vec<String>,
    /// The service to call.
    pub api: DeliverApi,
    /// Channel ID put in the seek request.
    pub channel_id: String,
    /// TLS, if the servers speak it.
    pub tls: Option<ClientTls>,
    /// Timeout of one connection attempt.
    pub connect_timeout: Duration,
    /// Largest pause between attempts.
    pub max_backoff: Duration,
    /// HTTP/2 keepalive interval (detects dead servers on idle streams).
    pub keepalive_interval: Duration,
    /// HTTP/2 keepalive ping timeout.
    pub keepalive_timeout: Duration,
    /// On BFT channels: watch the other servers' attestations and drop a block source that withholds blocks.
    pub bft: Option<BftFollow>,
}

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
            Err(e) => return fail(e, *next),
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
                Err(e) => return fail(e, *next),
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

/// Fabric's reconnection pause: 100 ms × 2^(failures − 1), capped.
pub(crate) fn backoff(failures: u32, max: Duration) -> Duration {
    let exp = failures.saturating_sub(1).min(20);
    Duration::from_millis(100u64.saturating_mul(1u64 << exp)).min(max)
}

/// Opens a gRPC connection to `addr` with the follow settings.
///
/// Errors: bad address, TLS setup, connection failure or timeout.
pub async fn connect(addr: &str, config: &FollowConfig) -> anyhow::Result<Channel> {
    let options = ConnectOptions {
        tls: config.tls.clone(),
        connect_timeout: Some(config.connect_timeout),
        keepalive: Some((config.keepalive_interval, config.keepalive_timeout)),
    };
    connect_with(addr, &options).await
}

/// `SeekInfo` from block `start` to the end of time, waiting for blocks not yet there (what Fabric's peer asks
/// the orderer for: `seekInfoFrom(height)`).
pub fn seek_from(start: u64) -> SeekInfo {
    ferrofabric_protoutil::seek_range(start, None, seek_info::SeekBehavior::BlockUntilReady)
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
pub fn block_number(block: &Bytes) -> anyhow::Result<u64> {
    let h = HeaderOnly::decode(block.clone()).map_err(|e| anyhow!("received bytes are not a block: {e}"))?;
    h.header.map(|h| h.number).ok_or_else(|| anyhow!("received a block without a header"))
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
