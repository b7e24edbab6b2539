//! `etcdraft`: crash-fault-tolerant ordering with Raft (Fabric `orderer/consensus/etcdraft`), on raft-rs with
//! raft-engine as write-ahead log.
//!
//! A backend of the orderer core (`ferrofabric-orderer`), which does not know it: [`register`] builds the
//! node's [`Cluster`] from its configuration and adds the [`RaftFactory`] and the cluster service to the node's
//! [`Plugins`].
//!
//! # Pieces
//! * [`Cluster`] (one per node, `cluster`): the TLS material to dial other consenters, the channels' chains by
//!   name, the [`ClusterService`] (`orderer.Cluster/Step`) to add to the node's gRPC server, and the
//!   [`RaftFactory`] to register under `etcdraft`.
//! * Per channel, a [`RaftChain`]: a Raft thread (`raftnode`, talking through `raftio`) that owns the log
//!   (`storage`: raft-engine under `Consensus.WALDir/<channel>`, snapshots under `Consensus.SnapDir/<channel>`),
//!   an async leader loop (`chain`), the state they share and the acceptance of messages (`shared`), the
//!   consenter set as applied and one link per other consenter (`members`, `transport`). A node that is not a
//!   consenter of the channel's configuration is served by the orderer core's follower ([`RaftFactory`]'s
//!   `is_consenter` says so) until a config block names it.
//!
//! # Channel configuration
//! The consenters and options come from the `ConsensusType` metadata of the channel configuration
//! (`etcdraft.ConfigMetadata`). Consenter `i` (in configuration order) has Raft ID `i + 1`, unless the ledger
//! tip records other IDs in its `BlockMetadata.consenter_ids` (as it does once the set changed). A node finds its own ID by matching its TLS
//! certificate ([`ChainSupport::node_certificate`]) with the consenters' client or server certificates, and
//! reaches the others at their `host:port`, which is where they serve both the cluster service and
//! Deliver. Election timeout = `TickInterval × ElectionTick`; heartbeat = `TickInterval × HeartbeatTick`;
//! pre-vote and check-quorum are on, as in Fabric.
//!
//! # Blocks
//! The leader cuts, creates and *signs* each block (consenter metadata `etcdraft.BlockMetadata{consenter_ids,
//! next_consenter_id, raft_index}` inside `OrdererBlockMetadata`), and replicates the signed bytes as one
//! Raft entry. Every node, the leader included, appends committed entries with
//! [`ChainSupport::append_block`], so the ledgers of Ferrofabric nodes hold byte-identical blocks. A Fabric
//! leader replicates its blocks unsigned and each Fabric node signs its own copy (`chain.go` `writeBlock`);
//! such a block is signed by this node with its own metadata and the entry's Raft index before it is
//! appended, so in a mixed cluster headers and data are equal everywhere and signatures are each node's.
//!
//! # Recovery and catch-up
//! On restart the log is replayed from the newest snapshot; blocks the ledger already holds are skipped by
//! number, and `BlockMetadata.raft_index` of the ledger tip tells Raft what was applied. Every
//! `Options.SnapshotIntervalSize` bytes of blocks a snapshot is taken (data: the tip block, as in Fabric)
//! and the log compacted. A node that receives a snapshot, or meets a block beyond its ledger height,
//! pulls the missing blocks with Deliver from the other consenters (`catchup`).
//!
//! # Wire compatibility with Fabric
//! A Ferrofabric orderer can be a consenter of a Fabric 2.5 etcdraft cluster: the Step stream starts sending
//! before any response header and expects no `StepResponse` (`transport`); keepalive pings follow Fabric's
//! cluster client ([`ferrofabric_comm::CLUSTER_KEEPALIVE_INTERVAL`]); forwarded envelopes are
//! fire-and-forget towards Fabric nodes; the leader sends `ClusterMetadata{active_nodes}` on heartbeats;
//! unsigned blocks from entries are signed as Fabric's nodes do.
//!
//! # Differences from Fabric
//! * Between Ferrofabric nodes, SUCCESS means the message is held by two nodes and will be ordered even if the
//!   leader crashes (see `book`); Fabric answers once the message is queued at the leader, or sent to it by a
//!   follower, and so does a Ferrofabric node towards Fabric consenters.
//! * A byte-identical envelope submitted again while its first copy is held or was ordered recently (the
//!   last 2^18 messages) is answered SUCCESS and ordered once; Fabric orders both copies and the peers
//!   mark the second one a duplicate transaction.
//! * Membership changes as in Fabric 2.5: a CONFIG_UPDATE may add, remove or rotate (new client TLS
//!   certificate, same Raft ID) one consenter ([`RaftFactory`]'s consensus metadata check refuses more with
//!   Fabric's BAD_REQUEST message). The config block carries the new `consenter_ids` / `next_consenter_id`
//!   (a new consenter gets `next_consenter_id`, IDs are never reused); when it is applied every node switches
//!   its links (a rotated or moved consenter is dialed again) and the leader proposes the raft-rs
//!   `ConfChange` (`AddNode` / `RemoveNode`). Differences: the leader computes the IDs before signing the
//!   config block (Fabric's nodes compute them when writing it; the result is the same); new blocks are cut
//!   only after the `ConfChange` is applied (Fabric also waits); Fabric's check that a change does not lose
//!   the quorum of the nodes it currently sees active (`UnacceptableQuorumLoss`) is not made; a leader that
//!   is removed hands leadership to a consenter first, and a removed follower halts (status `inactive`) once
//!   its `RemoveNode` is applied, or once it has the config block that removed it and no leader talks to it
//!   any more. A follower without a leader for two election timeouts pulls blocks from the others to find
//!   that config block (Fabric's eviction suspector does so after `Consensus.EvictionSuspicion`, default
//!   10 minutes).
//! * A node joins with the genesis block or a later config block (the orderer core on-boards it first). If it
//!   is not a consenter of the channel's configuration, the orderer core's follower serves the channel
//!   (relation `follower`, Broadcast answered "orderer is a follower of channel ...") and pulls blocks until
//!   the config block that names it a consenter; then this backend starts Raft, which replays the leader's log
//!   from the genesis voters (or installs its snapshot).
//! * A channel with exactly one consenter runs Raft with its WAL (it campaigns at once, so the first block is
//!   not delayed by an election timeout) and can grow by config update. Only when `Consensus.WALDir` or
//!   `SnapDir` is not configured is it served by the factory that was registered under `etcdraft` before this
//!   backend (the composition of `ferrofabric-consensus` puts the solo loop there, which cannot grow); with none,
//!   such a channel is refused.
//! * The cluster service authenticates callers by their TLS client certificate, so the node's gRPC
//!   listener must request client certificates (`General.TLS.ClientRootCAs`). Dialed consenters are
//!   checked against the CA roots (channel orderer organizations' TLS roots and `General.TLS.RootCAs`) and
//!   their host name, not pinned to the consenter's server certificate.

mod blockmeta;
mod book;
mod chain;
mod cluster;
mod error;
mod members;
mod membership;
mod raftio;
mod raftnode;
mod shared;
mod storage;
mod transport;

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, RwLock};

use std::time::Duration;

use ferrofabric_protos::common::Block;
use ferrofabric_protos::etcdraft;
use prost::Message;
use tokio::sync::{mpsc, watch};

pub use blockmeta::block_raft_metadata;
pub use chain::RaftChain;
pub use cluster::{Cluster, ClusterService, CLUSTER_SERVICE_NAME};
pub use error::RaftError;
pub use ferrofabric_comm::ClusterTls;
pub use membership::MembershipError;
pub use transport::SUBMIT_RESPONSES_HEADER;

use self::blockmeta::raft_block_metadata;
use self::book::Book;
use self::chain::{run_chain, LoopParams};
use self::members::{by_id, Dialer};
use self::membership::{initial_raft_metadata, raft_consenters};
use self::raftio::{Input, RaftStatus};
use self::raftnode::{RaftLoop, RaftParams};
use self::shared::{Shared, Timing};
use self::storage::WalStorage;
use ferrofabric_comm::{parse_duration, pem_cert_der};
use ferrofabric_orderer::{
    ChainSupport, Consensus, ConsensusContext, ConsensusError, ConsensusFactory, OrdererConfig, Plugins,
};

/// Fabric's defaults for `etcdraft.Options` fields left at zero.
const DEFAULT_TICK: Duration = Duration::from_millis(500);
const DEFAULT_ELECTION_TICK: u32 = 10;
const DEFAULT_HEARTBEAT_TICK: u32 = 1;
const DEFAULT_MAX_INFLIGHT_BLOCKS: u32 = 5;
const DEFAULT_SNAPSHOT_INTERVAL: u64 = 16 << 20;
/// Entries kept before a snapshot for followers that are only slightly behind (Fabric keeps 4).
const SNAPSHOT_CATCHUP_ENTRIES: u64 = 4;
/// Held messages per channel (each holds its envelope).
const MAX_HELD: usize = 200_000;
/// Applied messages remembered to drop resubmitted duplicates.
const MAX_RECENT: usize = 1 << 18;
/// A held message is given up after this long.
const HOLD_LIMIT: Duration = Duration::from_secs(600);

/// Registers etcdraft in `plugins` for a node configured by `config`: the [`RaftFactory`] of a new
/// [`Cluster::from_config`] under `etcdraft` and the cluster's `orderer.Cluster` service on the node's gRPC
/// listener. Single-consenter channels run Raft too when the WAL directories are configured; without them they go
/// to the factory registered under `etcdraft` before this call, if any. Returns the cluster.
///
/// Errors: as [`Cluster::from_config`].
pub fn register(plugins: &mut Plugins, config: &OrdererConfig) -> Result<Arc<Cluster>, RaftError> {
    let cluster = Cluster::from_config(config)?;
    let single_node = plugins.registry.get("etcdraft").cloned();
    plugins.registry.register("etcdraft", cluster.factory(single_node));
    plugins.services = std::mem::take(&mut plugins.services).add_service(cluster.service());
    Ok(cluster)
}

/// Starts [`RaftChain`]s for `etcdraft` channels (Fabric `orderer/consensus/etcdraft/consenter.go`
/// `HandleChain`); a node that is not among the consenters follows the channel first (see the crate docs); a single
/// consenter without WAL directories goes to the factory given for it. Errors from `start`: bad consensus metadata or
/// options, no cluster TLS (or no TLS certificate) on a node that must reach others, no WAL or snapshot
/// directory, an unreadable WAL.
#[derive(Clone)]
pub struct RaftFactory {
    cluster: Arc<Cluster>,
    /// Serves a single-consenter channel on a node without WAL directories.
    single_node: Option<Arc<dyn ConsensusFactory>>,
}

impl std::fmt::Debug for RaftFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftFactory").field("single_node", &self.single_node.is_some()).finish_non_exhaustive()
    }
}

// Defined here, next to the `RaftFactory` it makes: the modules below the crate root do not import from it.
impl Cluster {
    /// The factory to register under `etcdraft` in the node's [`ferrofabric_orderer::ConsensusRegistry`];
    /// `single_node` serves single-consenter channels on a node without WAL directories (`None`: they are refused).
    pub fn factory(self: &Arc<Self>, single_node: Option<Arc<dyn ConsensusFactory>>) -> Arc<dyn ConsensusFactory> {
        Arc::new(RaftFactory { cluster: self.clone(), single_node })
    }
}

fn err(msg: impl Into<String>) -> ConsensusError {
    ConsensusError(msg.into())
}

/// The ledger tip's Raft metadata.
fn tip_metadata(support: &ChainSupport) -> Option<etcdraft::BlockMetadata> {
    let height = support.store().height();
    let raw = support.store().block(height.checked_sub(1)?).ok()??;
    raft_block_metadata(&Block::decode(raw).ok()?)
}

/// The options of `md` with Fabric's defaults for zero values.
struct Options {
    tick: Duration,
    election_tick: u32,
    heartbeat_tick: u32,
    max_inflight: u32,
    snapshot_interval: u64,
}

fn options(md: &etcdraft::ConfigMetadata) -> Result<Options, ConsensusError> {
    let o = md.options.clone().unwrap_or_default();
    let tick = if o.tick_interval.is_empty() {
        DEFAULT_TICK
    } else {
        parse_duration(&o.tick_interval).map_err(|e| err(format!("bad etcdraft TickInterval: {e}")))?
    };
    if tick.is_zero() {
        return Err(err("etcdraft TickInterval must be positive"));
    }
    let nz = |v: u32, d: u32| if v == 0 { d } else { v };
    let opts = Options {
        tick,
        election_tick: nz(o.election_tick, DEFAULT_ELECTION_TICK),
        heartbeat_tick: nz(o.heartbeat_tick, DEFAULT_HEARTBEAT_TICK),
        max_inflight: nz(o.max_inflight_blocks, DEFAULT_MAX_INFLIGHT_BLOCKS),
        snapshot_interval: if o.snapshot_interval_size == 0 {
            DEFAULT_SNAPSHOT_INTERVAL
        } else {
            u64::from(o.snapshot_interval_size)
        },
    };
    if opts.election_tick <= opts.heartbeat_tick {
        return Err(err(format!(
            "etcdraft ElectionTick ({}) must be greater than HeartbeatTick ({})",
            opts.election_tick, opts.heartbeat_tick
        )));
    }
    Ok(opts)
}

/// Sends raft-rs's log records to `tracing` (target `raft`): errors and warnings as such, the rest at debug.
struct TracingDrain;

struct KvText(String);

impl slog::Serializer for KvText {
    fn emit_arguments(&mut self, key: slog::Key, val: &std::fmt::Arguments<'_>) -> slog::Result {
        use std::fmt::Write;
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

impl slog::Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &slog::Record<'_>, values: &slog::OwnedKVList) -> Result<(), slog::Never> {
        use slog::KV;
        let mut kv = KvText(String::new());
        let _ = record.kv().serialize(record, &mut kv);
        let _ = values.serialize(record, &mut kv);
        match record.level() {
            slog::Level::Critical | slog::Level::Error => tracing::error!(target: "raft", "{}{}", record.msg(), kv.0),
            slog::Level::Warning => tracing::warn!(target: "raft", "{}{}", record.msg(), kv.0),
            _ => tracing::debug!(target: "raft", "{}{}", record.msg(), kv.0),
        }
        Ok(())
    }
}

impl ConsensusFactory for RaftFactory {
    fn start(&self, support: Arc<ChainSupport>, ctx: &ConsensusContext) -> Result<Arc<dyn Consensus>, ConsensusError> {
        let channel = support.channel_id().to_owned();
        let md = config_metadata(&support)?;
        let ours = support.node_certificate().map(<[u8]>::to_vec);
        let member = ours.as_deref().is_some_and(|ours| is_consenter(&md.consenters, ours));
        let single = md.consenters.len() <= 1;
        if member && single && (ctx.wal_dir.is_none() || ctx.snap_dir.is_none()) {
            // Without a WAL a single consenter cannot run Raft: the single-node factory serves it, if any.
            tracing::info!(%channel, "etcdraft channel with one consenter and no WAL: served by the single-node loop");
            return self.start_single_node(support, ctx);
        }
        if member {
            return self.start_member(support, ctx).map(|c| c as Arc<dyn Consensus>);
        }
        if ours.is_none() || self.cluster.tls.is_none() {
            if single {
                // The single-node loop's rules (it serves the channel when it can tell this node is not another).
                return self.start_single_node(support, ctx);
            }
            return Err(err(format!(
                "etcdraft channel {channel}: this node's TLS certificate is unknown or it has no cluster TLS, so it \
                 cannot tell which consenter it is nor pull blocks from them"
            )));
        }
        Err(err(format!("this orderer is not a consenter of etcdraft channel {channel}")))
    }

    fn is_consenter(&self, support: &ChainSupport) -> bool {
        let Some(ours) = support.node_certificate() else { return true };
        if self.cluster.tls.is_none() {
            // `start` decides (the single-node loop, or an error that says why).
            return true;
        }
        config_metadata(support).map_or(true, |md| is_consenter(&md.consenters, ours))
    }

    fn validate_consensus_metadata(
        &self,
        current: &ferrofabric_channelconfig::ChannelConfig,
        next: &ferrofabric_channelconfig::ChannelConfig,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Ok(membership::validate_consensus_metadata(current, next)?)
    }
}

/// The etcdraft `ConfigMetadata` of `support`'s channel configuration.
fn config_metadata(support: &ChainSupport) -> Result<etcdraft::ConfigMetadata, ConsensusError> {
    let config = support.config();
    let orderer = config.orderer().ok_or_else(|| err("the channel configuration has no Orderer group"))?;
    etcdraft::ConfigMetadata::decode(orderer.consensus_metadata().clone())
        .map_err(|e| err(format!("bad etcdraft consensus metadata: {e}")))
}

/// The number of consenters of the channel's genesis block (block 0 of the ledger).
fn genesis_consenters(support: &ChainSupport) -> Option<usize> {
    let raw = support.store().block(0).ok()??;
    let env = ferrofabric_protoutil::sole_config_envelope(&Block::decode(raw).ok()?)?;
    let config = ferrofabric_channelconfig::ChannelConfig::from_envelope(&env).ok()?;
    Some(raft_consenters(&config).ok()??.len())
}

/// Whether the TLS certificate `ours` (DER) is the client or server certificate of one of `consenters`.
fn is_consenter(consenters: &[etcdraft::Consenter], ours: &[u8]) -> bool {
    consenters.iter().any(|c| {
        [&c.client_tls_cert, &c.server_tls_cert].into_iter().any(|pem| pem_cert_der(pem).is_some_and(|d| d == ours))
    })
}

impl RaftFactory {
    /// Starts a single-consenter channel without Raft, on the factory given for it.
    fn start_single_node(
        &self,
        support: Arc<ChainSupport>,
        ctx: &ConsensusContext,
    ) -> Result<Arc<dyn Consensus>, ConsensusError> {
        match &self.single_node {
            Some(factory) => factory.start(support, ctx),
            None => Err(err(format!(
                "etcdraft channel {}: Consensus.WALDir and Consensus.SnapDir must be configured to run Raft",
                support.channel_id()
            ))),
        }
    }

    /// Starts the Raft chain of a channel this node is a consenter of (its ledger holds the config block that
    /// made it one).
    fn start_member(
        &self,
        support: Arc<ChainSupport>,
        ctx: &ConsensusContext,
    ) -> Result<Arc<RaftChain>, ConsensusError> {
        let config = support.config();
        let channel = support.channel_id().to_owned();
        let md = config_metadata(&support)?;
        let ours = support.node_certificate().map(<[u8]>::to_vec).unwrap_or_default();
        let n = md.consenters.len();
        let tip = tip_metadata(&support);
        let metadata = match &tip {
            Some(m) if m.consenter_ids.len() == n => etcdraft::BlockMetadata { raft_index: 0, ..m.clone() },
            _ => initial_raft_metadata(n),
        };
        let consenters =
            by_id(&metadata, &md.consenters).ok_or_else(|| err("consenter IDs do not match the consenters"))?;
        let self_id = consenters
            .iter()
            .find(|(_, c)| is_consenter(std::slice::from_ref(*c), &ours))
            .map(|(id, _)| *id)
            .ok_or_else(|| err(format!("this orderer is not a consenter of etcdraft channel {channel}")))?;
        let opts = options(&md)?;
        let wal_dir = ctx.wal_dir.as_ref().ok_or_else(|| err("Consensus.WALDir is not configured"))?.join(&channel);
        let snap_dir = ctx.snap_dir.as_ref().ok_or_else(|| err("Consensus.SnapDir is not configured"))?.join(&channel);
        let ids = metadata.consenter_ids.clone();
        // Every log starts with the genesis consenters as voters (a consenter added later replays the
        // ConfChanges from there); a log that exists keeps its own.
        let genesis_voters = genesis_consenters(&support).map(|n| initial_raft_metadata(n).consenter_ids);
        let storage = WalStorage::open(&wal_dir, &snap_dir, genesis_voters.as_deref().unwrap_or(&ids))
            .map_err(|e| err(e.to_string()))?;
        let joining = support.store().height() > 1 && storage.hard_state().term == 0;
        let tip_index = tip.map(|m| m.raft_index).unwrap_or_default();
        let applied = storage.snapshot_index().max(tip_index.min(storage.hard_state().commit));
        let alone = storage.conf_state().voters == [self_id] && storage.hard_state().term == 0;
        let raft_config = raft::Config {
            id: self_id,
            election_tick: opts.election_tick as usize,
            heartbeat_tick: opts.heartbeat_tick as usize,
            applied,
            max_size_per_msg: 4 << 20,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: true,
            ..raft::Config::default()
        };
        raft_config.validate().map_err(|e| err(format!("Raft configuration: {e}")))?;
        let logger = slog::Logger::root(TracingDrain, slog::o!("channel" => channel.clone()));
        let mut raw =
            raft::RawNode::new(&raft_config, storage, &logger).map_err(|e| err(format!("starting Raft: {e}")))?;
        if alone {
            // The only voter of a new channel need not wait an election timeout.
            let _ = raw.campaign();
        }

        let (raft_tx, raft_rx) = std::sync::mpsc::channel::<Input>();
        let (cut_tx, cut_rx) = mpsc::channel(ctx.queue_size.max(1));
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        let (halt_tx, halt_rx) = watch::channel(false);
        let (status_tx, _) = watch::channel(RaftStatus::default());
        let extra_roots = config.orderer_tls_roots();
        let report_tx = raft_tx.clone();
        let report: Arc<dyn Fn(transport::LinkEvent) + Send + Sync> = Arc::new(move |ev| {
            let _ = report_tx.send(Input::Link(ev));
        });
        let dialer = Dialer {
            tls: self.cluster.tls.clone(),
            max_message: self.cluster.max_message,
            report,
            halt: halt_rx,
            metrics: support.metrics().clone(),
        };
        let members = dialer.members(self_id, metadata, consenters, None, &extra_roots).map_err(|e| {
            let _ = halt_tx.send(true);
            err(format!("etcdraft channel {channel}: {e}"))
        })?;
        let opts_election = opts.tick * opts.election_tick;
        let (_, batch_timeout) = support.batch_limits();
        let shared = Arc::new(Shared {
            channel: channel.clone(),
            self_id,
            support: support.clone(),
            book: Mutex::new(Book::new(MAX_HELD, MAX_RECENT)),
            status: status_tx,
            raft_tx,
            raft_backlog: AtomicUsize::new(0),
            cut_tx,
            members: RwLock::new(Arc::new(members)),
            dialer,
            halted: AtomicBool::new(false),
            caught_up: AtomicBool::new(false),
            halt_tx,
            timing: Timing {
                queue_timeout: ctx.queue_timeout,
                resubmit_age: batch_timeout * 2 + opts_election,
                hold_limit: HOLD_LIMIT,
            },
        });
        self.cluster.register(shared.clone());
        tokio::spawn(run_chain(
            shared.clone(),
            LoopParams { max_inflight: opts.max_inflight as usize },
            cut_rx,
            events_rx,
        ));
        let params = RaftParams {
            tick: opts.tick,
            snapshot_interval: opts.snapshot_interval,
            keep_entries: SNAPSHOT_CATCHUP_ENTRIES,
            tls: self.cluster.tls.clone(),
            extra_roots,
            eviction_suspicion: opts_election * 2,
        };
        let raft_loop =
            RaftLoop::new(raw, shared.clone(), raft_rx, events_tx, tokio::runtime::Handle::current(), params);
        let spawned = std::thread::Builder::new().name(format!("raft-{channel}")).spawn(move || raft_loop.run());
        if let Err(e) = spawned {
            shared.halt();
            self.cluster.unregister(&shared);
            return Err(err(format!("starting the Raft thread: {e}")));
        }
        tracing::info!(%channel, id = self_id, consenters = n, applied, joining, "etcdraft chain started");
        Ok(Arc::new(RaftChain { shared, cluster: self.cluster.clone() }))
    }
}
