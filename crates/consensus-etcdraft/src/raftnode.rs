//! The Raft thread of one channel: owns the raft-rs `RawNode` and its [`WalStorage`], ticks, steps messages
//! from the cluster service, proposes the leader's signed blocks, persists, sends, and applies committed
//! blocks to the ledger (Fabric `orderer/consensus/etcdraft/node.go` and the apply half of `chain.go`).
//!
//! Blocking work (WAL fsync, the ledger append queue, catch-up pulls) happens here, off the async
//! runtime; the thread talks to the async side through channels and [`tokio::runtime::Handle::block_on`].
//!
//! Membership (Fabric `chain.go`, `ConfChange` handling): when a config block that changes the consenter set
//! is applied, [`Shared::on_config_block`] switches the set and its links; the leader then proposes one
//! raft-rs `ConfChange` (`AddNode` / `RemoveNode`) at a time until Raft's voters are the consenters, and
//! restarts its session so the next block follows the change. A leader that is no longer a consenter hands
//! leadership to a consenter; a node halts when the `RemoveNode` of itself is applied.
//!
//! Blocks from entries (Fabric `chain.go` `writeBlock`): a Fabric leader replicates each block *unsigned*
//! (five empty metadata slots) and every node signs it when writing its ledger; so a committed block without
//! a signature is signed here with this node's identity, its LAST_CONFIG and its own
//! `etcdraft.BlockMetadata{consenter_ids, next_consenter_id, raft_index: the entry's index}`. A Ferrofabric
//! leader's blocks arrive signed and are appended byte for byte. Either way the ledger tip records the Raft
//! index, from which a restart resumes.
//!
//! Cluster metadata (Fabric `etcdraft/tracker.go`): the leader counts the nodes Raft saw active (itself and
//! every follower whose progress is recently active) on each tick; once the count held for four ticks it
//! attaches `etcdraft.ClusterMetadata{active_nodes}` to the heartbeats of the next round and starts over, so
//! with one heartbeat per tick every fourth heartbeat carries it, as the recorded Fabric leader does.
//!
//! Leadership: when this node becomes leader it first applies every entry its log held at the election
//! (they may carry blocks of the previous leader), then tells the chain loop, with a fresh *session*
//! number, which Raft index its next proposal will get; the chain loop restarts block assembly from the
//! ledger tip. A proposal
//! from another session, or whose index does not match the log, is refused and the session restarts the
//! same way; so `BlockMetadata.raft_index`, which the leader fixes before signing, is always the index of
//! the entry that carries the block.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_orderer::NewBlock;
use ferrofabric_protos::common::{Block, BlockMetadataIndex, Metadata};
use ferrofabric_protos::etcdraft;
use futures::FutureExt;
use prost::Message as _;
use protobuf::Message as _;
use raft::prelude::{ConfChange, ConfChangeType, Entry, EntryType, Message as RaftMessage, MessageType, Snapshot};
use raft::{RawNode, SnapshotStatus, StateRole};
use raft_engine::LogBatch;
use tokio::sync::mpsc;

use super::book::key_of;
use super::members::membership_after;
use super::raftio::{Event, Input, RaftStatus};
use super::shared::Shared;
use super::storage::WalStorage;
use super::transport::{consensus_request_with_metadata, ClusterTls, LinkEvent};
use ferrofabric_protoutil::sole_config_envelope;

/// Settings of the Raft thread.
pub(crate) struct RaftParams {
    /// `Options.TickInterval`.
    pub(crate) tick: Duration,
    /// Take a snapshot after this many bytes of blocks (`Options.SnapshotIntervalSize`).
    pub(crate) snapshot_interval: u64,
    /// Entries kept before a snapshot's index when compacting (Fabric's `SnapshotCatchUpEntries`).
    pub(crate) keep_entries: u64,
    /// TLS to reach the other consenters (None: a single consenter without cluster TLS).
    pub(crate) tls: Option<ClusterTls>,
    /// Without a leader for this long, the node pulls blocks to find out whether it was removed.
    pub(crate) eviction_suspicion: Duration,
    /// Roots from the channel configuration.
    pub(crate) extra_roots: Vec<Vec<u8>>,
}

/// The Raft thread's state.
pub(crate) struct RaftLoop {
    raw: RawNode<WalStorage>,
    shared: Arc<Shared>,
    rx: Receiver<Input>,
    events: mpsc::UnboundedSender<Event>,
    handle: tokio::runtime::Handle,
    params: RaftParams,
    was_leader: bool,
    session: u64,
    ready_at: Option<u64>,
    since_snapshot: u64,
    status: RaftStatus,
    /// The `RemoveNode` of this node was applied.
    removed: bool,
    /// Leadership was handed over because this node is no longer a consenter (term of the request).
    abdicated_in: Option<u64>,
    /// Since when no leader is known, and when blocks were last pulled because of it.
    leaderless: Option<(Instant, Instant)>,
    /// Eviction probes made (each starts at the next source).
    probes: usize,
    /// Active-node tracking of the leader (Fabric's `Tracker`).
    tracker: ActiveTracker,
}

/// Fabric `etcdraft/tracker.go`: the leader's view of the active nodes, reported to the followers once it held
/// for four ticks.
#[derive(Debug, Default)]
struct ActiveTracker {
    last: Vec<u64>,
    counter: u32,
    /// Marshaled `ClusterMetadata` for the heartbeats of the next round.
    pending: Option<Bytes>,
}

impl ActiveTracker {
    /// One tick's check: `leader` whether this node leads, `active` the active nodes (this node first).
    fn check(&mut self, leader: bool, active: Vec<u64>) {
        if !leader {
            self.last.clear();
            self.counter = 0;
            self.pending = None;
            return;
        }
        let same = active.len() == self.last.len();
        self.last = active;
        if !same {
            self.counter = 0;
            return;
        }
        if self.counter < 3 {
            self.counter += 1;
            return;
        }
        self.counter = 0;
        let md = etcdraft::ClusterMetadata { active_nodes: self.last.clone() };
        self.pending = Some(Bytes::from(md.encode_to_vec()));
    }
}

/// Upper bound of inputs handled between two readiness checks.
const DRAIN: usize = 4096;
/// How long an eviction probe pulls blocks.
const EVICTION_PULL: Duration = Duration::from_secs(2);

impl RaftLoop {
    /// A loop over `raw`; nothing runs until [`RaftLoop::run`].
    pub(crate) fn new(
        raw: RawNode<WalStorage>,
        shared: Arc<Shared>,
        rx: Receiver<Input>,
        events: mpsc::UnboundedSender<Event>,
        handle: tokio::runtime::Handle,
        params: RaftParams,
    ) -> RaftLoop {
        RaftLoop {
            raw,
            shared,
            rx,
            events,
            handle,
            params,
            was_leader: false,
            session: 0,
            ready_at: None,
            since_snapshot: 0,
            status: RaftStatus::default(),
            removed: false,
            abdicated_in: None,
            leaderless: None,
            probes: 0,
            tracker: ActiveTracker::default(),
        }
    }

    /// Runs until halted or until the channel fails (the failure is recorded on the channel).
    pub(crate) fn run(mut self) {
        let channel = self.shared.channel.clone();
        if let Err(e) = self.startup_catch_up() {
            self.fail(e);
            return;
        }
        let tick = self.params.tick;
        let mut next_tick = Instant::now() + tick;
        'outer: loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(wait) {
                Ok(input) => {
                    if !self.handle_input(input) {
                        break;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            for _ in 0..DRAIN {
                match self.rx.try_recv() {
                    Ok(input) => {
                        if !self.handle_input(input) {
                            break 'outer;
                        }
                    }
                    Err(_) => break,
                }
            }
            if Instant::now() >= next_tick {
                // As Fabric: the active nodes are read before the tick, which may reset `recent_active`.
                let active = self.active_nodes();
                self.raw.tick();
                self.tracker.check(self.is_leader(), active);
                next_tick = Instant::now() + tick;
            }
            if let Err(e) = self.on_ready() {
                self.fail(e);
                return;
            }
            self.track_leadership();
            self.follow_membership();
            if self.removed {
                tracing::info!(channel = %channel, id = self.shared.self_id, "etcdraft: this node was removed from the consenters; halting the chain");
                self.shared.status.send_replace(RaftStatus::default());
                self.shared.halt();
                break;
            }
            if self.shared.halted.load(Ordering::Relaxed) {
                break;
            }
        }
        tracing::debug!(%channel, "raft thread exited");
    }

    fn fail(&mut self, reason: String) {
        tracing::error!(channel = %self.shared.channel, %reason, "raft chain stops");
        self.shared.support.set_errored(format!("etcdraft: {reason}"));
        self.shared.status.send_replace(RaftStatus::default());
        let _ = self.events.send(Event::NotLeader);
    }

    fn handle_input(&mut self, input: Input) -> bool {
        match input {
            Input::Step(m) => {
                self.shared.raft_backlog.fetch_sub(1, Ordering::Relaxed);
                if let Err(e) = self.raw.step(m) {
                    tracing::debug!(channel = %self.shared.channel, error = %e, "raft step refused");
                }
            }
            Input::Propose { session, index, number, data } => self.propose(session, index, number, data),
            Input::Resync(session) => {
                if session == self.session {
                    self.restart_session();
                }
            }
            Input::Link(LinkEvent::Unreachable(id)) => self.raw.report_unreachable(id),
            Input::Link(LinkEvent::Snapshot(id, ok)) => {
                let status = if ok { SnapshotStatus::Finish } else { SnapshotStatus::Failure };
                self.raw.report_snapshot(id, status);
            }
            Input::Halt => return false,
        }
        true
    }

    fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    /// This node, then the followers Raft saw active recently (by ID).
    fn active_nodes(&self) -> Vec<u64> {
        let me = self.shared.self_id;
        let mut peers: Vec<u64> =
            self.raw.raft.prs().iter().filter(|(id, p)| **id != me && p.recent_active).map(|(id, _)| *id).collect();
        peers.sort_unstable();
        std::iter::once(me).chain(peers).collect()
    }

    /// Starts a new leadership session: refuse older proposals and wait until the log is applied.
    fn restart_session(&mut self) {
        let old = self.session;
        self.session += 1;
        self.ready_at = self.is_leader().then(|| self.raw.raft.raft_log.last_index());
        let _ = self.events.send(Event::Rejected { session: old });
    }

    fn propose(&mut self, session: u64, index: u64, number: u64, data: Bytes) {
        if session != self.session || !self.is_leader() || self.ready_at.is_some() {
            let _ = self.events.send(Event::Rejected { session });
            return;
        }
        let expected = self.raw.raft.raft_log.last_index() + 1;
        if index != expected {
            tracing::warn!(channel = %self.shared.channel, number, index, expected, "block made for another Raft index; resyncing");
            self.restart_session();
            return;
        }
        if let Err(e) = self.raw.propose(Vec::new(), data.to_vec()) {
            tracing::warn!(channel = %self.shared.channel, number, error = %e, "proposal dropped; resyncing");
            self.restart_session();
        }
    }

    fn track_leadership(&mut self) {
        let leader = self.is_leader();
        if leader && !self.was_leader {
            self.session += 1;
            self.ready_at = Some(self.raw.raft.raft_log.last_index());
        }
        if !leader && self.was_leader {
            self.ready_at = None;
            let _ = self.events.send(Event::NotLeader);
        }
        self.was_leader = leader;
        let log = &self.raw.raft.raft_log;
        self.shared.caught_up.store(log.applied >= log.committed, Ordering::Relaxed);
        if let Some(at) = self.ready_at {
            if self.raw.raft.raft_log.applied >= at {
                self.ready_at = None;
                let next_index = self.raw.raft.raft_log.last_index() + 1;
                let _ = self.events.send(Event::LeaderReady {
                    session: self.session,
                    term: self.raw.raft.term,
                    next_index,
                });
            }
        }
        let status = RaftStatus { leader: self.raw.raft.leader_id, term: self.raw.raft.term };
        if status != self.status {
            if status.leader != self.status.leader {
                tracing::info!(
                    channel = %self.shared.channel,
                    "etcdraft: term {} leader {} (this node is {})",
                    status.term,
                    status.leader,
                    self.shared.self_id
                );
            }
            self.status = status;
            self.shared.status.send_replace(status);
        }
    }

    /// The leader brings Raft's voters to the applied consenter set, one `ConfChange` at a time (additions
    /// first); a leader that is no longer a consenter hands leadership to one.
    fn follow_membership(&mut self) {
        let me = self.shared.self_id;
        if !self.is_leader() && self.raw.raft.leader_id == 0 {
            self.suspect_eviction();
            if !self.shared.members().contains(me) {
                // No longer a consenter and no leader talks to it any more: the leader applied its removal.
                self.removed = true;
            }
        } else {
            self.leaderless = None;
        }
        if !self.is_leader() || self.ready_at.is_some() || self.raw.raft.has_pending_conf() {
            return;
        }
        let log = &self.raw.raft.raft_log;
        if log.applied < log.committed {
            return;
        }
        let members = self.shared.members();
        if !members.contains(me) {
            let term = self.raw.raft.term;
            if self.abdicated_in != Some(term) {
                if let Some(to) = members.consenters.keys().copied().find(|id| *id != me) {
                    tracing::info!(channel = %self.shared.channel, to, "etcdraft: this leader is no longer a consenter; transferring leadership");
                    self.abdicated_in = Some(term);
                    self.raw.transfer_leader(to);
                }
            }
            return;
        }
        let want: BTreeSet<u64> = members.consenters.keys().copied().collect();
        let have: BTreeSet<u64> = self.raw.store().conf_state().voters.iter().copied().collect();
        let change = match want.difference(&have).next() {
            Some(id) => Some((ConfChangeType::AddNode, *id)),
            None => have.difference(&want).next().map(|id| (ConfChangeType::RemoveNode, *id)),
        };
        let Some((kind, id)) = change else { return };
        match self.raw.propose_conf_change(Vec::new(), conf_change(kind, id)) {
            Ok(()) => {
                tracing::info!(channel = %self.shared.channel, node = id, change = ?kind, "etcdraft: proposed a Raft configuration change");
                // The change takes the next index: blocks made for it are refused and remade after it.
                self.restart_session();
            }
            Err(e) => {
                tracing::warn!(channel = %self.shared.channel, node = id, error = %e, "proposing a Raft configuration change failed")
            }
        }
    }

    /// Without a leader for `eviction_suspicion`, pulls the blocks the other consenters have (for a short
    /// while, again every `eviction_suspicion`): a leader stops talking to a consenter once it applied its
    /// removal, possibly before the node received the config block that removed it (Fabric's eviction
    /// suspector does the same, after `EvictionSuspicion`).
    fn suspect_eviction(&mut self) {
        let now = Instant::now();
        let (since, last) = *self.leaderless.get_or_insert((now, now));
        let wait = self.params.eviction_suspicion;
        if now.duration_since(since) < wait || (last != since && now.duration_since(last) < wait) {
            return;
        }
        self.leaderless = Some((since, now));
        let Some(tls) = self.params.tls.clone() else { return };
        let mut sources = self.shared.members().sources.clone();
        if sources.is_empty() {
            return;
        }
        self.probes += 1;
        let first = self.probes % sources.len();
        sources.rotate_left(first);
        let me = self.shared.self_id;
        let (shared, events) = (self.shared.clone(), self.events.clone());
        let from = shared.support.next_queued_number();
        tracing::info!(channel = %self.shared.channel, from, "etcdraft: no leader for a while; pulling blocks to see whether this node was removed");
        let pulled = self.handle.block_on(async {
            let apply = move |raw: Bytes, block: Block| {
                let (shared, events) = (shared.clone(), events.clone());
                async move {
                    let config = sole_config_envelope(&block).is_some();
                    apply_pulled(shared.clone(), events, raw, block).await?;
                    Ok(config && !shared.members().contains(me))
                }
                .boxed()
            };
            let pull = ferrofabric_orderer::pull_blocks_until(
                &self.shared.support,
                &tls,
                &self.params.extra_roots,
                &sources,
                from,
                u64::MAX,
                apply,
            );
            tokio::time::timeout(EVICTION_PULL, pull).await
        });
        if let Ok(Err(e)) = pulled {
            tracing::debug!(channel = %self.shared.channel, error = %e, "eviction probe: pulling blocks failed");
        }
    }

    /// Applies a committed `ConfChange` entry and records the voters.
    fn apply_conf_change(&mut self, e: &Entry) -> Result<(), String> {
        if e.data.is_empty() {
            return Ok(());
        }
        let cc = ConfChange::parse_from_carllerche_bytes(&e.data)
            .map_err(|e| format!("a committed ConfChange does not decode: {e}"))?;
        let cs = self.raw.apply_conf_change(&cc).map_err(|e| format!("applying a ConfChange: {e}"))?;
        let mut voters = cs.voters.clone();
        voters.sort_unstable();
        tracing::info!(
            channel = %self.shared.channel,
            node = cc.node_id,
            change = ?cc.get_change_type(),
            ?voters,
            "etcdraft: applied a Raft configuration change"
        );
        self.raw.mut_store().set_conf_state(cs).map_err(|e| e.to_string())?;
        if cc.get_change_type() == ConfChangeType::RemoveNode && cc.node_id == self.shared.self_id {
            self.removed = true;
        }
        Ok(())
    }

    fn send(&mut self, msgs: Vec<RaftMessage>) {
        let members = self.shared.members();
        // The cluster metadata goes with this round of heartbeats, to every follower.
        let metadata = if msgs.iter().any(|m| m.get_msg_type() == MessageType::MsgHeartbeat) {
            self.tracker.pending.take()
        } else {
            None
        };
        for m in msgs {
            let to = m.to;
            let snapshot = m.get_msg_type() == MessageType::MsgSnapshot;
            let md = match &metadata {
                Some(md) if m.get_msg_type() == MessageType::MsgHeartbeat => md.clone(),
                _ => Bytes::new(),
            };
            let Some(peer) = members.peers.get(&to) else { continue };
            let bytes = match m.write_to_bytes() {
                Ok(b) => Bytes::from(b),
                Err(e) => {
                    tracing::error!(error = %e, "encoding a Raft message");
                    continue;
                }
            };
            if !peer.send_raft(consensus_request_with_metadata(&self.shared.channel, bytes, md), snapshot) {
                self.raw.report_unreachable(to);
                if snapshot {
                    self.raw.report_snapshot(to, SnapshotStatus::Failure);
                }
            }
        }
    }

    fn on_ready(&mut self) -> Result<(), String> {
        if !self.raw.has_ready() {
            return Ok(());
        }
        let mut ready = self.raw.ready();
        if !ready.messages().is_empty() {
            self.send(ready.take_messages());
        }
        if !ready.snapshot().is_empty() {
            let snap = ready.snapshot().clone();
            self.raw.mut_store().apply_snapshot(snap.clone()).map_err(|e| e.to_string())?;
            let mut voters = snap.get_metadata().get_conf_state().voters.clone();
            voters.sort_unstable();
            tracing::info!(channel = %self.shared.channel, index = snap.get_metadata().index, ?voters, "etcdraft: installed a Raft snapshot");
            self.install_snapshot(&snap)?;
        }
        self.apply_entries(ready.take_committed_entries())?;
        let mut batch = LogBatch::default();
        let store = self.raw.mut_store();
        store.stage_entries(&mut batch, ready.entries()).map_err(|e| e.to_string())?;
        if let Some(hs) = ready.hs() {
            store.stage_hard_state(&mut batch, hs.clone()).map_err(|e| e.to_string())?;
        }
        store.write(&mut batch, ready.must_sync()).map_err(|e| e.to_string())?;
        if !ready.persisted_messages().is_empty() {
            self.send(ready.take_persisted_messages());
        }
        let mut light = self.raw.advance(ready);
        if let Some(commit) = light.commit_index() {
            let mut batch = LogBatch::default();
            let store = self.raw.mut_store();
            store.stage_commit(&mut batch, commit).map_err(|e| e.to_string())?;
            store.write(&mut batch, false).map_err(|e| e.to_string())?;
        }
        self.send(light.take_messages());
        self.apply_entries(light.take_committed_entries())?;
        self.raw.advance_apply();
        Ok(())
    }

    fn apply_entries(&mut self, entries: Vec<Entry>) -> Result<(), String> {
        for e in entries {
            if e.get_entry_type() == EntryType::EntryConfChange {
                self.apply_conf_change(&e)?;
                continue;
            }
            if e.get_entry_type() != EntryType::EntryNormal || e.data.is_empty() {
                continue;
            }
            self.apply_block(e.data.clone(), e.index)?;
            self.since_snapshot += e.data.len() as u64;
            if self.since_snapshot >= self.params.snapshot_interval {
                self.since_snapshot = 0;
                let keep = self.params.keep_entries;
                self.raw.mut_store().create_snapshot(e.index, e.data.clone(), keep).map_err(|e| e.to_string())?;
                tracing::debug!(channel = %self.shared.channel, index = e.index, "raft snapshot taken");
            }
        }
        Ok(())
    }

    /// Appends the committed block of the entry at `index` unless the ledger has it already (a replay after
    /// restart); pulls the blocks before it first if the ledger is behind. An unsigned block (from a Fabric
    /// leader) is signed by this node first (see the module docs).
    fn apply_block(&mut self, raw: Bytes, index: u64) -> Result<(), String> {
        let block = Block::decode(raw.clone()).map_err(|e| format!("a committed entry is not a block: {e}"))?;
        let number = block.header.as_ref().map(|h| h.number).ok_or("a committed block has no header")?;
        let next = self.shared.support.next_queued_number();
        if number < next {
            return Ok(());
        }
        if number > next {
            self.pull(next, number - 1)?;
        }
        let shared = self.shared.clone();
        let events = self.events.clone();
        if is_signed(&block) {
            self.handle.block_on(apply_pulled(shared, events, raw, block))
        } else {
            self.handle.block_on(write_entry_block(shared, events, block, index))
        }
    }

    /// Brings the ledger up to the block carried by `snap`.
    fn install_snapshot(&mut self, snap: &Snapshot) -> Result<(), String> {
        if snap.get_data().is_empty() {
            return Ok(());
        }
        let raw = snap.data.clone();
        let block = Block::decode(raw.clone()).map_err(|e| format!("Raft snapshot does not hold a block: {e}"))?;
        let number = block.header.as_ref().map(|h| h.number).ok_or("snapshot block has no header")?;
        let next = self.shared.support.next_queued_number();
        if number < next {
            return Ok(());
        }
        tracing::info!(channel = %self.shared.channel, from = next, to = number, "catching up to a Raft snapshot");
        // A Fabric snapshot holds the block unsigned, like its entries; it is the block of the snapshot's index.
        self.apply_block(raw, snap.get_metadata().index)
    }

    fn startup_catch_up(&mut self) -> Result<(), String> {
        let snap = self.raw.store().latest_snapshot().clone();
        self.install_snapshot(&snap)
    }

    /// Pulls blocks `from..=to` from the other consenters, retrying until it works or the chain halts.
    fn pull(&mut self, from: u64, to: u64) -> Result<(), String> {
        let leader = self.raw.raft.leader_id;
        let tls = self.params.tls.clone().ok_or("blocks are missing but there is no cluster TLS to pull them with")?;
        let mut sources = self.shared.members().sources.clone();
        sources.sort_by_key(|s| s.id != leader);
        loop {
            let shared = self.shared.clone();
            let events = self.events.clone();
            let start = shared.support.next_queued_number().max(from);
            if start > to {
                return Ok(());
            }
            let result = self.handle.block_on(ferrofabric_orderer::pull_blocks(
                &self.shared.support,
                &tls,
                &self.params.extra_roots,
                &sources,
                start,
                to,
                move |raw, block| apply_pulled(shared.clone(), events.clone(), raw, block).boxed(),
            ));
            match result {
                Ok(()) => return Ok(()),
                Err(e) if self.shared.halted.load(Ordering::Relaxed) => {
                    return Err(format!("halted while pulling: {e}"))
                }
                Err(e) => {
                    tracing::warn!(channel = %self.shared.channel, error = %e, "catch-up failed; retrying");
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
        }
    }
}

/// The `ConfChange` the leader proposes for one consenter change: the `raftpb.ConfChange{Type, NodeID}` a Fabric
/// follower computes for the same config block (`etcdraft/util.go` `ConfChange`) and waits for before it unblocks
/// (`confChangeInProgress`); raft-rs writes it as an `EntryConfChange` of the V1 message.
fn conf_change(kind: ConfChangeType, node: u64) -> ConfChange {
    let mut cc = ConfChange::default();
    cc.set_change_type(kind);
    cc.node_id = node;
    cc
}

/// Whether `block` carries at least one signature in its SIGNATURES metadata (Fabric's leader replicates blocks
/// with that slot empty).
fn is_signed(block: &Block) -> bool {
    block
        .metadata
        .as_ref()
        .and_then(|m| m.metadata.get(BlockMetadataIndex::Signatures as usize))
        .and_then(|raw| Metadata::decode(raw.clone()).ok())
        .is_some_and(|m| !m.signatures.is_empty())
}

/// Signs the unsigned block of the Raft entry at `index` as this node (Fabric `chain.go` `writeBlock` /
/// `writeConfigBlock`: LAST_CONFIG, and `etcdraft.BlockMetadata` with this node's consenter IDs and `index`),
/// queues it for the ledger and records its messages as applied.
///
/// Errors: a block whose data hash does not match its envelopes, one that does not continue the chain, or a
/// config block whose configuration does not parse or whose consenter set cannot be followed.
async fn write_entry_block(
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Event>,
    block: Block,
    index: u64,
) -> Result<(), String> {
    let header = block.header.clone().ok_or("a committed block has no header")?;
    let number = header.number;
    let envelopes = block.data.as_ref().map(|d| d.data.clone()).unwrap_or_default();
    if header.data_hash.as_ref() != ferrofabric_protoutil::block_data_hash(&envelopes).as_slice() {
        return Err(format!("committed block {number}: the data hash does not match its envelopes"));
    }
    let members = shared.members();
    let config = sole_config_envelope(&block).is_some();
    let mut metadata = members.metadata.clone();
    if config {
        if let Some(env) = envelopes.first() {
            if let Some((next, _)) = membership_after(env, &members.metadata, &members.consenters)? {
                metadata = next;
            }
        }
    }
    metadata.raft_index = index;
    let consenter_metadata = Bytes::from(metadata.encode_to_vec());
    let new = NewBlock { header, envelopes };
    if config {
        shared.support.write_config_block(new, consenter_metadata).await.map_err(|e| e.0)?;
        shared.on_config_metadata(Some(metadata))?;
    } else {
        shared.support.write_block(new, consenter_metadata).await.map_err(|e| e.0)?;
    }
    settle_applied(&shared, &events, &block, number);
    Ok(())
}

/// Appends one block to the ledger and records its messages as applied.
async fn apply_pulled(
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Event>,
    raw: Bytes,
    block: Block,
) -> Result<(), String> {
    let number = block.header.as_ref().map(|h| h.number).unwrap_or_default();
    shared.support.append_block(raw).await.map_err(|e| e.0)?;
    if sole_config_envelope(&block).is_some() {
        shared.on_config_block(&block)?;
    }
    settle_applied(&shared, &events, &block, number);
    Ok(())
}

/// Records the messages of the appended block `number` as applied and tells the chain loop.
fn settle_applied(shared: &Shared, events: &mpsc::UnboundedSender<Event>, block: &Block, number: u64) {
    let data_hash = block.header.as_ref().map(|h| h.data_hash.as_ref()).unwrap_or_default();
    let made = shared.lock_book().take_made(data_hash);
    let keys = made
        .unwrap_or_else(|| block.data.as_ref().map(|d| d.data.iter().map(|e| key_of(e)).collect()).unwrap_or_default());
    shared.lock_book().applied(keys.iter());
    let _ = events.send(Event::Applied { number });
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// etcd's `raftpb.ConfChange` (go.etcd.io/raft/v3 `raftpb/raft.proto`), as a Fabric follower decodes it.
    #[derive(Clone, PartialEq, prost::Message)]
    struct EtcdConfChange {
        #[prost(uint64, tag = "1")]
        id: u64,
        #[prost(int32, tag = "2")]
        r#type: i32,
        #[prost(uint64, tag = "3")]
        node_id: u64,
        #[prost(bytes = "vec", tag = "4")]
        context: Vec<u8>,
    }

    /// The leader's ConfChange decodes as the one a Fabric follower waits for (etcd's `ConfChangeAddNode` = 0,
    /// `ConfChangeRemoveNode` = 1), and a Fabric node's own bytes (gogoproto writes `ID` and `Type` even when zero)
    /// decode here as the same change.
    #[test]
    fn conf_changes_are_the_ones_fabric_writes_and_reads() {
        for (kind, etcd_type, node) in [(ConfChangeType::AddNode, 0, 4), (ConfChangeType::RemoveNode, 1, 2)] {
            let ours = conf_change(kind, node).write_to_bytes().unwrap();
            let etcd = EtcdConfChange::decode(ours.as_slice()).unwrap();
            assert_eq!((etcd.id, etcd.r#type, etcd.node_id, etcd.context.len()), (0, etcd_type, node, 0));
            let fabric = EtcdConfChange { r#type: etcd_type, node_id: node, ..Default::default() };
            let mut fabric_bytes = vec![0x08, 0x00];
            fabric_bytes.extend(fabric.encode_to_vec());
            if etcd_type == 0 {
                // prost leaves a zero `Type` out; gogoproto writes it.
                fabric_bytes.splice(2..2, [0x10, 0x00]);
            }
            let parsed = ConfChange::parse_from_bytes(&fabric_bytes).unwrap();
            assert_eq!((parsed.get_change_type(), parsed.node_id), (kind, node));
        }
    }

    /// As Fabric's tracker: the active nodes are reported once they held for four ticks, then every fourth tick;
    /// a change of their number starts the count again; a follower reports nothing.
    #[test]
    fn cluster_metadata_every_fourth_tick_of_a_stable_active_set() {
        let mut t = ActiveTracker::default();
        let mut reported = Vec::new();
        for tick in 0..12 {
            t.check(true, vec![1, 2, 3]);
            if let Some(md) = t.pending.take() {
                reported.push((tick, etcdraft::ClusterMetadata::decode(md).unwrap().active_nodes));
            }
        }
        assert_eq!(reported, vec![(4, vec![1, 2, 3]), (8, vec![1, 2, 3])]);
        t.check(true, vec![1, 3]);
        for _ in 0..3 {
            t.check(true, vec![1, 3]);
            assert!(t.pending.is_none(), "the count starts again after a change");
        }
        t.check(true, vec![1, 3]);
        assert_eq!(etcdraft::ClusterMetadata::decode(t.pending.take().unwrap()).unwrap().active_nodes, vec![1, 3]);
        for _ in 0..8 {
            t.check(false, vec![1]);
        }
        assert!(t.pending.is_none(), "a follower sends no cluster metadata");
    }

    /// Fabric's entry blocks (five empty metadata slots, `0a000a000a000a000a00`) count as unsigned; a block with
    /// one signature in SIGNATURES counts as signed; a block without metadata or with garbage there does not.
    #[test]
    fn entry_blocks_without_a_signature_are_told_from_signed_ones() {
        let fabric_entry =
            Block::decode(Bytes::from_static(&[0x1a, 0x0a, 0x0a, 0, 0x0a, 0, 0x0a, 0, 0x0a, 0, 0x0a, 0])).unwrap();
        assert_eq!(fabric_entry.metadata.as_ref().unwrap().metadata.len(), 5);
        assert!(!is_signed(&fabric_entry));
        assert!(!is_signed(&Block::default()));
        let mut signed = fabric_entry.clone();
        let md = Metadata {
            value: Bytes::new(),
            signatures: vec![ferrofabric_protos::common::MetadataSignature {
                signature: Bytes::from_static(b"sig"),
                ..Default::default()
            }],
        };
        signed.metadata.as_mut().unwrap().metadata[0] = Bytes::from(md.encode_to_vec());
        assert!(is_signed(&signed));
        signed.metadata.as_mut().unwrap().metadata[0] = Bytes::from_static(&[0xff, 0xff]);
        assert!(!is_signed(&signed), "undecodable metadata is no signature");
    }
}
