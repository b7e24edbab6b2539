//! A node that joined an etcdraft channel it is not (yet) a consenter of: it pulls the channel's blocks from
//! the consenters over Deliver, and once it appended a config block that names it a consenter it starts its
//! Raft chain (Fabric 2.5 on-boards a joining orderer with its block puller, then `etcdraft.Consenter`
//! starts the chain; a joined node whose consenter `AddNode` is not applied yet waits for the leader).
//!
//! Until then the channel answers Broadcast with SERVICE_UNAVAILABLE and reports relation `follower`,
//! status `onboarding`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_orderer::{
    pull_blocks_until, ChainSupport, ChannelStatus, Consensus, ConsensusContext, ConsensusError, ConsensusRelation,
    PullSource, Submission,
};
use ferrofabric_protos::common::Block;
use ferrofabric_protoutil::sole_config_envelope;
use futures::future::BoxFuture;
use futures::FutureExt;

use super::{config_metadata, err, is_consenter, RaftChain, RaftFactory};

/// Pause between pulling attempts.
const RETRY: Duration = Duration::from_millis(500);

/// The channel's consensus while the node is on-boarding, then the Raft chain it started.
struct Onboarding {
    channel: String,
    chain: Mutex<Option<Arc<RaftChain>>>,
    halted: AtomicBool,
}

impl std::fmt::Debug for Onboarding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Onboarding").field("channel", &self.channel).finish_non_exhaustive()
    }
}

impl Onboarding {
    fn chain(&self) -> Option<Arc<RaftChain>> {
        self.chain.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn not_yet(&self) -> ConsensusError {
        ConsensusError(format!("this orderer is not a consenter of channel {} (yet): it is on-boarding", self.channel))
    }
}

impl Consensus for Onboarding {
    fn order(&self, msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>> {
        match self.chain() {
            Some(c) => async move { c.order(msg).await }.boxed(),
            None => futures::future::ready(Err(self.not_yet())).boxed(),
        }
    }

    fn configure(&self, msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>> {
        match self.chain() {
            Some(c) => async move { c.configure(msg).await }.boxed(),
            None => futures::future::ready(Err(self.not_yet())).boxed(),
        }
    }

    fn relation(&self) -> (ConsensusRelation, ChannelStatus) {
        match self.chain() {
            Some(c) => c.relation(),
            None if self.halted.load(Ordering::Relaxed) => (ConsensusRelation::Follower, ChannelStatus::Inactive),
            None => (ConsensusRelation::Follower, ChannelStatus::OnBoarding),
        }
    }

    fn halt(&self) {
        self.halted.store(true, Ordering::Relaxed);
        if let Some(c) = self.chain() {
            c.halt();
        }
    }
}

/// Whether this node is a consenter of `support`'s current configuration.
fn member(support: &ChainSupport) -> bool {
    let ours = support.node_certificate().unwrap_or_default();
    config_metadata(support).is_ok_and(|md| is_consenter(&md.consenters, ours))
}

/// Starts on-boarding `support`'s channel: pulls blocks from the consenters of its configuration until this
/// node is one, then starts the Raft chain with `factory`.
///
/// Errors: no cluster TLS to pull with.
pub(crate) fn start(
    factory: RaftFactory,
    support: Arc<ChainSupport>,
    ctx: ConsensusContext,
) -> Result<Arc<dyn Consensus>, ConsensusError> {
    let channel = support.channel_id().to_owned();
    let tls = factory.cluster.tls.clone().ok_or_else(|| {
        err(format!("etcdraft channel {channel}: this node is not a consenter, and pulling blocks needs cluster TLS"))
    })?;
    let me = Arc::new(Onboarding { channel: channel.clone(), chain: Mutex::new(None), halted: AtomicBool::new(false) });
    tracing::info!(%channel, "etcdraft: this node is not a consenter of the channel; on-boarding by pulling blocks");
    let handle = me.clone();
    tokio::spawn(async move {
        while !handle.halted.load(Ordering::Relaxed) {
            if !member(&support) {
                let config = support.config();
                let md = match config_metadata(&support) {
                    Ok(md) => md,
                    Err(e) => {
                        support.set_errored(format!("etcdraft: {e}"));
                        return;
                    }
                };
                let sources: Vec<PullSource> = md
                    .consenters
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| {
                        Some(PullSource { id: i as u64 + 1, host: c.host.clone(), port: u16::try_from(c.port).ok()? })
                    })
                    .collect();
                let from = support.next_queued_number();
                let s = support.clone();
                let apply = move |raw: Bytes, block: Block| {
                    let s = s.clone();
                    async move {
                        s.append_block(raw).await.map_err(|e| e.0)?;
                        Ok(sole_config_envelope(&block).is_some() && member(&s))
                    }
                    .boxed()
                };
                let roots = config.orderer_tls_roots();
                if let Err(e) = pull_blocks_until(&support, &tls, &roots, &sources, from, u64::MAX, apply).await {
                    tracing::debug!(%channel, error = %e, "on-boarding pull ended; retrying");
                    tokio::time::sleep(RETRY).await;
                }
                continue;
            }
            // The ledger must hold what was queued before the chain reads its tip.
            while support.store().height() < support.next_queued_number() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            match factory.start_member(support.clone(), &ctx) {
                Ok(chain) => {
                    tracing::info!(%channel, height = support.store().height(), "etcdraft: on-boarded; this node is a consenter now");
                    *handle.chain.lock().unwrap_or_else(|e| e.into_inner()) = Some(chain.clone());
                    if handle.halted.load(Ordering::Relaxed) {
                        chain.halt();
                    }
                }
                Err(e) => support.set_errored(format!("etcdraft: starting the chain after on-boarding: {}", e.0)),
            }
            return;
        }
    });
    Ok(me)
}
