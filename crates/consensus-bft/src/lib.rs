//! `BFT`: Byzantine-fault-tolerant ordering for Fabric 3 BFT channels (`ConsensusType` "BFT"): `n` consenters
//! tolerate `f = ⌊(n − 1) / 3⌋` Byzantine ones, and every block carries the Fabric signatures of a quorum
//! `Q = ⌈(n + f + 1) / 2⌉` of them, as Fabric 3's SmartBFT orderer writes it (`orderer/consensus/smartbft`), so real
//! Fabric 3 peers and tools accept the blocks. The agreement itself is Tendermint, from Malachite
//! (`informalsystems-malachitebft-core-consensus`); docs/BFT.md says why this engine.
//!
//! A backend of the orderer core (`ferrofabric-orderer`), which does not know it: [`register`] builds the node's
//! [`BftCluster`] and adds the [`BftFactory`] under `BFT` and the cluster service `orderer.ClusterNodeService`
//! to the node's [`Plugins`].
//!
//! # Pieces
//! * `context`: the state machine's types (heights = block numbers, consenters as validators, blocks as values,
//!   Fabric block signatures as precommit vote extensions) and message signing with the consenter's enrollment
//!   key.
//! * `chain`: the request pool, the state machine's effects, block checks and decided blocks.
//! * `events`: what the chain reacts to, and the routing of other consenters' frames to it.
//! * `wal`: the votes and proposals of the height in progress (`Consensus.WALDir/<channel>/bft.wal`).
//! * `transport`: mutual-TLS streams between consenters; the sender of each frame is the consenter whose TLS
//!   certificate it presented.
//! * `wire`: the messages' bytes.
//!
//! # Channel configuration
//! The consenters are the Orderer group's `Orders.consenter_mapping` (id, host, port, MSP ID, enrollment
//! certificate, TLS certificates). A node is the consenter whose `identity` is its signing certificate, and reaches
//! the others at their `host:port`, where they serve the cluster service (our nodes serve it on their one gRPC
//! port). Proposers take turns by height and round.
//!
//! # Differences from Fabric
//! * The consenters speak Tendermint in Ferrofabric's messages, not SmartBFT's: a Go Fabric orderer and a
//!   Ferrofabric orderer cannot be consenters of one channel.
//! * Leadership rotates every height (Tendermint's proposer rotation), and a proposer that does not propose in
//!   time is replaced in the next round: after `RequestForwardTimeout` (2 s by default), plus one `CollectTimeout`
//!   per round, rather than SmartBFT's view change after `RequestComplainTimeout` (see `options` for which
//!   SmartBFT options apply and how).
//! * Each request is forwarded to every consenter (BFT-SMaRt's way), not only to the leader, so whichever
//!   consenter proposes next can order it.
//! * SUCCESS means the request is in this consenter's pool and was sent to the others, as in Fabric 3; with
//!   `RequestPoolSize` requests pooled a request waits up to 5 s for room, then Broadcast answers
//!   SERVICE_UNAVAILABLE.
//! * A consenter that fell behind (it sees votes or proposals of a later height) pulls the missing blocks over
//!   Deliver from the others ([`ferrofabric_orderer::pull_blocks`]) and appends each only with a quorum of valid
//!   consenter signatures (`BlockValidation`).
//! * Consenter-set changes: a config update may add and remove consenters; it must rewrite `BlockValidation`
//!   for the new set (checked as Fabric 3 does, `membership`). The new set decides from the block after the config
//!   block; a removed consenter stops (relation `follower`, status `inactive`). A node that is no consenter of the
//!   configuration it starts from is served by the orderer core's follower ([`ConsensusFactory::is_consenter`]),
//!   which switches to this backend at the config block that adds it.

mod chain;
mod context;
mod error;
mod events;
mod faults;
mod held;
mod host;
mod membership;
mod options;
mod pool;
mod transport;
mod wal;
mod wire;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_orderer::{
    ChainSupport, ChannelStatus, Consensus, ConsensusContext, ConsensusError, ConsensusFactory, ConsensusRelation,
    OrdererConfig, Plugins, Submission,
};
use ferrofabric_protos::common::Envelope;
use futures::future::BoxFuture;
use prost::Message;
use tokio::sync::{mpsc, oneshot, watch};

pub use error::BftError;
pub use transport::{BftCluster, BftClusterService, BFT_CLUSTER_SERVICE_NAME};

use chain::ChainParams;
use events::Event;

/// Events queued per channel before Broadcast waits (and frames from peers are dropped).
const EVENT_QUEUE: usize = 16_384;

fn err(msg: impl Into<String>) -> ConsensusError {
    ConsensusError(msg.into())
}

/// Registers BFT in `plugins` for a node configured by `config`: the [`BftFactory`] of a new [`BftCluster`] (its
/// TLS from [`OrdererConfig::cluster_tls`]) under `BFT`, and the cluster's `orderer.ClusterNodeService` on the
/// node's gRPC listener. Returns the cluster.
///
/// Errors: configured TLS files that cannot be read.
pub fn register(plugins: &mut Plugins, config: &OrdererConfig) -> Result<Arc<BftCluster>, BftError> {
    let tls = config.cluster_tls().map_err(BftError::ClusterTls)?;
    let cluster = BftCluster::new(tls, config.cluster_max_message());
    plugins.registry.register("BFT", Arc::new(BftFactory { cluster: cluster.clone() }));
    plugins.services = std::mem::take(&mut plugins.services).add_service(cluster.service());
    Ok(cluster)
}

/// Starts [`BftChain`]s for `BFT` channels. Errors from `start`: no cluster TLS, no consenters, this node not
/// among them, an identity that does not deserialize, no WAL directory or an unreadable WAL.
#[derive(Debug, Clone)]
pub struct BftFactory {
    cluster: Arc<BftCluster>,
}

impl ConsensusFactory for BftFactory {
    fn is_consenter(&self, support: &ChainSupport) -> bool {
        // A configuration that cannot be read is left to `start`, which reports why.
        membership::membership(&support.config(), support.signer().serialized()).map_or(true, |m| m.self_id.is_some())
    }

    fn start(&self, support: Arc<ChainSupport>, ctx: &ConsensusContext) -> Result<Arc<dyn Consensus>, ConsensusError> {
        let config = support.config();
        let channel = support.channel_id().to_owned();
        let tls = self.cluster.tls.clone().ok_or_else(|| {
            err(format!(
                "BFT channel {channel}: cluster TLS is needed (General.Cluster.ClientCertificate and \
                 ClientPrivateKey, or General.TLS)"
            ))
        })?;
        let members = membership::membership(&config, support.signer().serialized()).map_err(err)?;
        let self_id = members.self_id.ok_or_else(|| {
            err(format!(
                "this orderer's signing identity is not among the {} consenters of BFT channel {channel}",
                members.consenters.0.len()
            ))
        })?;
        let wal_dir = ctx.wal_dir.as_ref().ok_or_else(|| err("Consensus.WALDir is not configured"))?.join(&channel);
        let wal = wal::Wal::open(&wal_dir).map_err(|e| err(format!("opening the BFT WAL: {e}")))?;
        let (halt_tx, halt_rx) = watch::channel(false);
        let (events_tx, events_rx) = mpsc::channel(EVENT_QUEUE);
        let removed = Arc::new(AtomicBool::new(false));
        let params = ChainParams {
            cluster: self.cluster.clone(),
            cluster_tls: tls,
            support: support.clone(),
            self_id,
            members,
            wal,
            settings: options::Settings::of(&config),
            halt: halt_rx.clone(),
            removed: removed.clone(),
        };
        tokio::spawn(chain::run(params, events_tx.clone(), events_rx, halt_rx));
        tracing::info!(%channel, id = self_id.0, "BFT chain started");
        Ok(Arc::new(BftChain {
            channel,
            events: events_tx,
            queue_timeout: ctx.queue_timeout,
            halted: AtomicBool::new(false),
            removed,
            halt: halt_tx,
            cluster: self.cluster.clone(),
        }))
    }
}

/// One BFT channel's consensus: [`Consensus::order`] and [`Consensus::configure`] pool the request and forward it
/// to the other consenters.
pub struct BftChain {
    channel: String,
    events: mpsc::Sender<Event>,
    queue_timeout: Duration,
    halted: AtomicBool,
    /// Set by the chain when a config block removed this node from the consenter set.
    removed: Arc<AtomicBool>,
    halt: watch::Sender<bool>,
    cluster: Arc<BftCluster>,
}

impl std::fmt::Debug for BftChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BftChain").field("channel", &self.channel).finish_non_exhaustive()
    }
}

impl BftChain {
    async fn submit(&self, envelope: Bytes) -> Result<(), ConsensusError> {
        if self.halted.load(Ordering::Relaxed) {
            return Err(err(format!("the BFT chain of channel {} is halted", self.channel)));
        }
        if self.removed.load(Ordering::Relaxed) {
            return Err(err(format!("this orderer is no longer a consenter of channel {}", self.channel)));
        }
        let (ack, done) = oneshot::channel();
        let sent = tokio::time::timeout(self.queue_timeout, self.events.send(Event::Order(envelope, ack))).await;
        match sent {
            Ok(Ok(())) => done.await.map_err(|_| err("the BFT chain stopped"))?.map_err(err),
            Ok(Err(_)) => Err(err("the BFT chain stopped")),
            Err(_) => Err(err(format!("the BFT chain did not accept the request within {:?}", self.queue_timeout))),
        }
    }
}

impl Consensus for BftChain {
    fn order(&self, msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>> {
        Box::pin(self.submit(msg.envelope))
    }

    fn configure(&self, msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>> {
        Box::pin(async move {
            // As Fabric 3's BFT chain, a config whose BlockValidation does not follow its consenters is refused
            // before it is pooled.
            let envelope = Envelope::decode(msg.envelope.clone()).map_err(|e| err(format!("config envelope: {e}")))?;
            let config = ChannelConfig::from_envelope(&envelope).map_err(|e| err(e.to_string()))?;
            membership::check_block_validation(&config).map_err(err)?;
            self.submit(msg.envelope).await
        })
    }

    fn relation(&self) -> (ConsensusRelation, ChannelStatus) {
        if self.removed.load(Ordering::Relaxed) {
            return (ConsensusRelation::Follower, ChannelStatus::Inactive);
        }
        let status = if self.halted.load(Ordering::Relaxed) { ChannelStatus::Inactive } else { ChannelStatus::Active };
        (ConsensusRelation::Consenter, status)
    }

    fn halt(&self) {
        if !self.halted.swap(true, Ordering::Relaxed) {
            let _ = self.halt.send(true);
            self.cluster.unregister(&self.channel);
        }
    }
}
