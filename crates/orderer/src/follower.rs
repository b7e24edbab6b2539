//! A follower: how a node serves a channel whose consenter set does not name it (Fabric
//! `orderer/common/follower/follower_chain.go`). It takes no part in consensus; it pulls the channel's blocks over
//! `AtomicBroadcast/Deliver` from the orderers of the channel configuration, keeps only those that satisfy the
//! channel's `BlockValidation` policy (as a peer would), and serves them over Deliver. Broadcast is refused with
//! Fabric's message. When a config block names this node a consenter, the follower hands the channel back to the
//! registrar, which starts its consensus on the same ledger.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_comm::ClusterTls;
use ferrofabric_protos::common::Block;
use futures::future::BoxFuture;
use tokio::sync::watch;

use crate::blockpuller::Puller;
use crate::consensus::{ChannelStatus, Consensus, ConsensusError, ConsensusRelation, Submission};
use crate::onboarding::sources;
use crate::support::ChainSupport;

/// How long the follower waits after its orderers failed it, before it asks them again.
const RETRY: Duration = Duration::from_secs(2);

/// How long a follower's Deliver stream may stay without a block before it asks another orderer (an idle channel
/// cuts no blocks, so this is long).
const IDLE: Duration = Duration::from_secs(60);

/// Called once a stored config block makes this node a consenter: the registrar's switch to consenting.
pub(crate) type Promote = Box<dyn FnOnce() + Send>;

/// The follower of one channel ([`Consensus`] with relation `follower`).
pub(crate) struct Follower {
    channel: String,
    halted: AtomicBool,
    halt: watch::Sender<bool>,
}

impl Follower {
    /// Starts following `support`'s channel from its ledger height, dialling with `tls` (`own_port`: this node's
    /// gRPC port, not dialled). `is_consenter` is asked
    /// after every config block; once it says yes and the block is stored, `promote` is called and the follower
    /// stops.
    pub(crate) fn start(
        support: Arc<ChainSupport>,
        tls: Option<ClusterTls>,
        own_port: u16,
        is_consenter: Box<dyn Fn(&ChainSupport) -> bool + Send + Sync>,
        promote: Promote,
    ) -> Arc<Follower> {
        let (halt, halted) = watch::channel(false);
        let channel = support.channel_id().to_owned();
        tracing::info!(%channel, height = support.store().height(), "this orderer follows the channel");
        tokio::spawn(follow(support, tls, own_port, is_consenter, promote, halted));
        Arc::new(Follower { channel, halted: AtomicBool::new(false), halt })
    }

    fn refuse(&self) -> BoxFuture<'_, Result<(), ConsensusError>> {
        let e = ConsensusError(format!("orderer is a follower of channel {}", self.channel));
        Box::pin(async move { Err(e) })
    }
}

impl Consensus for Follower {
    fn order(&self, _msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>> {
        self.refuse()
    }

    fn configure(&self, _msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>> {
        self.refuse()
    }

    fn relation(&self) -> (ConsensusRelation, ChannelStatus) {
        let status = if self.halted.load(Ordering::Relaxed) { ChannelStatus::Inactive } else { ChannelStatus::Active };
        (ConsensusRelation::Follower, status)
    }

    fn halt(&self) {
        self.halted.store(true, Ordering::Relaxed);
        let _ = self.halt.send(true);
    }
}

/// The follower's loop: pulls from the configuration's orderers, one after the other, until halted or promoted.
async fn follow(
    support: Arc<ChainSupport>,
    tls: Option<ClusterTls>,
    own_port: u16,
    is_consenter: Box<dyn Fn(&ChainSupport) -> bool + Send + Sync>,
    promote: Promote,
    mut halted: watch::Receiver<bool>,
) {
    let channel = support.channel_id().to_owned();
    let Some(tls) = tls else {
        support.set_errored("following a channel needs TLS to dial its orderers (General.Cluster or General.TLS)");
        return;
    };
    let is_consenter: Arc<dyn Fn(&ChainSupport) -> bool + Send + Sync> = Arc::from(is_consenter);
    // The config block that made this node a consenter, once stored.
    let member_at: Arc<std::sync::Mutex<Option<u64>>> = Arc::default();
    loop {
        if *halted.borrow() {
            return;
        }
        let config = support.config();
        let roots = config.orderer_tls_roots();
        let sources = sources(&config, own_port);
        let next = support.next_queued_number();
        let puller = Puller { channel: &channel, signer: support.signer(), tls: &tls, extra_roots: &roots, idle: IDLE };
        let (s, member, at) = (support.clone(), is_consenter.clone(), member_at.clone());
        let pulled = puller.pull(&sources, next, u64::MAX, move |raw, block| {
            let (support, member, at) = (s.clone(), member.clone(), at.clone());
            Box::pin(async move { append(&support, raw, &block, member.as_ref(), &at).await })
        });
        let result = tokio::select! {
            r = pulled => r,
            _ = halted.changed() => return,
        };
        let became = *member_at.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(number) = became {
            // The consensus starts from the ledger: wait until the config block is stored.
            while support.store().height() <= number {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            tracing::info!(%channel, config_block = number, "a config block made this orderer a consenter");
            promote();
            return;
        }
        if let Err(e) = result {
            tracing::debug!(%channel, error = %e, "following: no orderer served blocks; asking again");
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Appends one pulled block after checking it against the channel's `BlockValidation`; after a config block that
/// makes this node a consenter, records it in `at` and ends the pull (`Ok(true)`).
async fn append(
    support: &ChainSupport,
    raw: Bytes,
    block: &Block,
    is_consenter: &(dyn Fn(&ChainSupport) -> bool + Send + Sync),
    at: &std::sync::Mutex<Option<u64>>,
) -> Result<bool, String> {
    let number = block.header.as_ref().map(|h| h.number).unwrap_or_default();
    ferrofabric_channelconfig::verify_block_attestation(&support.config(), raw.clone())
        .map_err(|e| format!("block {number} fails BlockValidation: {e}"))?;
    support.append_block(raw).await.map_err(|e| format!("appending block {number}: {}", e.0))?;
    if ferrofabric_protoutil::sole_config_envelope(block).is_some() && is_consenter(support) {
        *at.lock().unwrap_or_else(|e| e.into_inner()) = Some(number);
        return Ok(true);
    }
    Ok(false)
}
