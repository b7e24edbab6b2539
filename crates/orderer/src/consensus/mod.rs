//! Consensus behind a trait (Fabric `orderer/consensus/consensus.go`: `Consenter`, `Chain`): [`Consensus`] (whose
//! documentation says how the backends fit), [`ConsensusFactory`] and the [`ConsensusRegistry`] of a node.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use futures::future::BoxFuture;

pub(crate) use crate::configupdate::MetadataValidator;
pub(crate) use crate::support::{ChainSupport, ConsensusError};

/// A checked message handed to consensus.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The marshaled Envelope, exactly as it will appear in the block.
    pub envelope: Bytes,
    /// The channel header's transaction ID (empty for CONFIG transactions made by the orderer).
    pub tx_id: String,
    /// Fabric's message size: `len(payload) + len(signature)`.
    pub size: u32,
    /// The config sequence the message was checked at; if the channel's sequence has moved on when the
    /// message is about to be cut, it must be re-validated (Fabric's `configSeq` argument).
    pub config_seq: u64,
}

/// This node's relation to a channel's consensus, as the channel participation API reports it (Fabric
/// `types.ConsensusRelation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsensusRelation {
    /// A member of the channel's consenter set.
    Consenter,
    /// Follows the channel by pulling blocks; not a consenter.
    Follower,
    /// Only tracks the channel's config blocks.
    ConfigTracker,
    /// A non-cluster consensus type (solo).
    Other,
}

impl ConsensusRelation {
    /// Fabric's JSON spelling (`"consenter"`, `"follower"`, `"config-tracker"`, `"other"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ConsensusRelation::Consenter => "consenter",
            ConsensusRelation::Follower => "follower",
            ConsensusRelation::ConfigTracker => "config-tracker",
            ConsensusRelation::Other => "other",
        }
    }
}

/// The channel's state as the participation API reports it (Fabric `types.Status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelStatus {
    /// Taking part in consensus (or following with height past the join block).
    Active,
    /// Catching up with the cluster.
    OnBoarding,
    /// Not storing blocks.
    Inactive,
    /// The last operation failed.
    Failed,
}

impl ChannelStatus {
    /// Fabric's JSON spelling (`"active"`, `"onboarding"`, `"inactive"`, `"failed"`).
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelStatus::Active => "active",
            ChannelStatus::OnBoarding => "onboarding",
            ChannelStatus::Inactive => "inactive",
            ChannelStatus::Failed => "failed",
        }
    }
}

/// One channel's consensus instance (Fabric's `consensus.Chain`, `orderer/consensus/consensus.go`).
///
/// The broadcast handler checks a message (decode, filters, policies), then hands it to the channel's
/// [`Consensus`] with [`Consensus::order`] (normal messages) or [`Consensus::configure`] (CONFIG transactions
/// made from a CONFIG_UPDATE). What a consensus implementation does with it is its own business; to turn
/// ordered messages into blocks it uses the [`ChainSupport`] it was started with:
/// [`crate::cutter::BlockCutter`] for batching, [`ChainSupport::create_next_block`] for headers,
/// [`ChainSupport::write_block`] / [`ChainSupport::write_config_block`] for blocks this node signs, and
/// [`ChainSupport::append_block`] for blocks that arrive complete.
///
/// # How the backends fit
/// Each backend is a crate of its own that depends on this one (never the reverse): it implements
/// [`ConsensusFactory`] and [`Consensus`], and registers itself in the [`ConsensusRegistry`] of
/// [`crate::server::Plugins`] under its `ConsensusType.type`, together with any gRPC service it needs on the node's
/// listener. No backend depends on another; `ferrofabric-consensus` (`backends`) composes the four for whoever
/// starts an orderer (the `ferrofabric orderer` command, the all-in-one node, the orderer benches).
/// * **solo** (`crates/consensus-solo`, `ferrofabric-consensus-solo`): one node; `order` queues the message, a
///   loop cuts and writes blocks signed by the node.
/// * **etcdraft** (`crates/consensus-etcdraft`, `ferrofabric-consensus-etcdraft`): `order` on a follower
///   forwards the [`Submission`] to the leader; the leader's loop cuts, creates and *signs* blocks
///   (`write_block` with an `etcdraft.BlockMetadata` as consenter metadata), and proposes the signed block bytes
///   through Raft; every node, the leader included, applies committed entries with `append_block`, so all
///   ledgers are byte-identical. `configure` goes through the same path; the support's `revalidate` /
///   `reprocess_config` handle messages that were checked under an older config. Catch-up reads blocks from the
///   support's [`ChainSupport::store`]. Its node-to-node `orderer.Cluster` service is added to the node's
///   listener through [`crate::server::Plugins::services`].
/// * **Kafka** (`crates/consensus-kafka`, Fabric 1.4's Kafka ordering with payloads aside, FastFabric Opt O-I):
///   `order` writes the envelope to the channel's payload topic (the messages of a few milliseconds in one
///   record) and posts only references to the channel's ordered partition ([`Submission::tx_id`],
///   [`Submission::size`] and where the payload is); with `Kafka.Payloads: inline`, and for CONFIG messages, the
///   whole envelope goes to the ordered partition, as in Fabric 1.4. `order_pipelined` lets a stream's messages
///   await the brokers' acknowledgements together. Every orderer consumes the ordered partition in order, swaps
///   each reference for its envelope, cuts with a [`crate::cutter::BlockCutter`] and writes the blocks it signs
///   with `write_block` / `write_config_block` (`KafkaMetadata` as consenter metadata), so every ledger holds the
///   same blocks.
/// * **BFT** (`crates/consensus-bft`, Fabric 3's BFT blocks, 3f+1 consenters agreeing with Tendermint):
///   `order` puts the request in this consenter's pool and forwards it to every other consenter, which checks it
///   and pools it too (BFT-SMaRt's way: no request waits on one leader, so a censoring proposer only delays it);
///   it completes once the request is pooled, after waiting for room in a full pool. The proposer of a height
///   (rotating by height and round) proposes a block of pooled requests; each consenter's precommit carries its
///   Fabric 3 block signature (`MetadataSignature` with an `IdentifierHeader`, over
///   [`ferrofabric_protoutil::signed_bytes`]) as vote extension, and on decision the block carrying the valid
///   signatures of at least a quorum of consenters is built with [`ferrofabric_protoutil::orderer_metadata`] /
///   [`ferrofabric_protoutil::encode_block`] and stored with `append_block`.
///
/// Back-pressure is part of `order`'s contract: the returned future completes when the message is accepted
/// (queued, forwarded, proposed); an implementation that cannot accept it within its own bound returns
/// [`ConsensusError`], which Broadcast reports as SERVICE_UNAVAILABLE.
pub trait Consensus: Send + Sync + 'static {
    /// Accepts a normal message for ordering (Fabric `Chain.Order`, including `WaitReady`). Completes when the
    /// message is accepted; errors (SERVICE_UNAVAILABLE to the client) if it cannot be accepted in bounded time,
    /// the node is not part of a working quorum, or the chain was halted.
    fn order(&self, msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>>;

    /// Places a normal message in this node's order *now*, at the call, and returns a future that completes when
    /// it is accepted, as [`Consensus::order`]'s would; or gives the message back (the default, and whenever the
    /// backend cannot place it at once) for [`Consensus::order`]. Broadcast calls it for each message of a stream
    /// in the stream's order and lets several of them await acceptance at once, so that a backend whose
    /// acceptance is a round trip (Kafka: the brokers' acknowledgement) is not bound by that round trip per
    /// stream; backends that do not implement it see one message of a stream at a time.
    fn order_pipelined(&self, msg: Submission) -> Result<BoxFuture<'static, Result<(), ConsensusError>>, Submission> {
        Err(msg)
    }

    /// Accepts a CONFIG transaction (made from a CONFIG_UPDATE) for ordering alone in its own block (Fabric
    /// `Chain.Configure`). Errors as [`Consensus::order`].
    fn configure(&self, msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>>;

    /// This node's relation to the channel and the channel's status, for the participation API.
    fn relation(&self) -> (ConsensusRelation, ChannelStatus);

    /// Stops the instance (Fabric `Chain.Halt`): later `order`/`configure` calls fail. Idempotent.
    fn halt(&self);
}

/// Node-level settings handed to every consensus instance.
#[derive(Debug, Clone)]
pub struct ConsensusContext {
    /// Capacity of the queue of accepted, not yet cut messages.
    pub queue_size: usize,
    /// How long `order` waits for room in a full queue before giving up.
    pub queue_timeout: Duration,
    /// `Consensus.WALDir` (Raft).
    pub wal_dir: Option<PathBuf>,
    /// `Consensus.SnapDir` (Raft).
    pub snap_dir: Option<PathBuf>,
}

impl Default for ConsensusContext {
    fn default() -> Self {
        ConsensusContext { queue_size: 1_000, queue_timeout: Duration::from_secs(10), wal_dir: None, snap_dir: None }
    }
}

/// Starts consensus instances of one consensus type (Fabric's `consensus.Consenter`). Must be called from
/// within a Tokio runtime.
pub trait ConsensusFactory: Send + Sync {
    /// Starts the instance for the channel behind `support` (its ledger holds at least the join block).
    ///
    /// Errors: the channel's configuration cannot be served by this implementation (e.g. a consenter set this
    /// node is not part of, bad consensus metadata).
    fn start(&self, support: Arc<ChainSupport>, ctx: &ConsensusContext) -> Result<Arc<dyn Consensus>, ConsensusError>;

    /// Whether this node is a consenter of the channel configuration behind `support` (Fabric's
    /// `IsChannelMember`). A node that is not follows the channel instead (it pulls blocks from the consenters)
    /// until a config block makes it one. The default, `true`, suits backends without consenter sets (solo) and
    /// those that refuse to start without membership.
    fn is_consenter(&self, support: &ChainSupport) -> bool {
        let _ = support;
        true
    }

    /// Whether a CONFIG_UPDATE may change the orderer configuration from `current` to `next` as far as this
    /// consensus type is concerned (Fabric's `consensus.MetadataValidator.ValidateConsensusMetadata`, asked for
    /// the channel's current consensus type). The default accepts every change: backends without consensus
    /// metadata rules (solo, Kafka).
    ///
    /// Errors: the reason, in Fabric's words (see [`MetadataValidator`]).
    fn validate_consensus_metadata(
        &self,
        current: &ChannelConfig,
        next: &ChannelConfig,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let _ = (current, next);
        Ok(())
    }
}

/// The consensus implementations this node can run, by `ConsensusType.type` of the channel configuration.
/// Empty by default; the backend crates register themselves (e.g. `ferrofabric_consensus_solo::register`).
#[derive(Clone)]
pub struct ConsensusRegistry {
    factories: HashMap<String, Arc<dyn ConsensusFactory>>,
}

impl std::fmt::Debug for ConsensusRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsensusRegistry").field("types", &self.factories.keys().collect::<Vec<_>>()).finish()
    }
}

impl Default for ConsensusRegistry {
    fn default() -> Self {
        Self::empty()
    }
}

impl ConsensusRegistry {
    /// An empty registry: channels of any consensus type are refused until a backend is registered.
    pub fn empty() -> Self {
        ConsensusRegistry { factories: HashMap::new() }
    }

    /// Adds or replaces the factory for `consensus_type`.
    pub fn register(&mut self, consensus_type: &str, factory: Arc<dyn ConsensusFactory>) {
        self.factories.insert(consensus_type.to_owned(), factory);
    }

    /// The factory for `consensus_type`, if registered.
    pub fn get(&self, consensus_type: &str) -> Option<&Arc<dyn ConsensusFactory>> {
        self.factories.get(consensus_type)
    }
}

/// Asks the factory of `current`'s consensus type; a type this node does not run has no rules to apply here
/// (such a channel is not served).
impl MetadataValidator for ConsensusRegistry {
    fn validate_consensus_metadata(
        &self,
        current: &ChannelConfig,
        next: &ChannelConfig,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let Some(orderer) = current.orderer() else { return Ok(()) };
        match self.get(orderer.consensus_type()) {
            Some(factory) => factory.validate_consensus_metadata(current, next),
            None => Ok(()),
        }
    }
}
