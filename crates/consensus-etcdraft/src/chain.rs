//! One channel's Raft chain, async side (Fabric `orderer/consensus/etcdraft/chain.go`): accepting messages
//! ([`RaftChain`] as [`Consensus`], which hands them to [`Shared`]; see `shared` for how), and the leader's loop
//! that cuts, creates, signs and proposes blocks.
//!
//! # The leader loop
//! Runs only between [`Event::LeaderReady`] and the end of the leadership. It cuts with Fabric's rules
//! (config messages alone), skips messages already being cut or recently ordered, creates each block
//! on the ledger tip ([`ChainSupport::create_next_block`]), signs it on the crypto pool with an
//! `etcdraft.BlockMetadata{consenter_ids, next_consenter_id, raft_index}` as consenter metadata, and
//! proposes the signed bytes in creation order. At most `Options.MaxInflightBlocks` blocks are created and
//! not yet applied; after a config block nothing is cut until it is applied (the next block needs its
//! configuration).
//!
//! [`ChainSupport::create_next_block`]: ferrofabric_orderer::ChainSupport::create_next_block

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_protos::etcdraft::{self, Consenter};
use futures::future::BoxFuture;
use futures::stream::FuturesOrdered;
use futures::{FutureExt, StreamExt};
use prost::Message as _;
use tokio::sync::mpsc;

use super::book::{key_of, Key};
use super::cluster::Cluster;
use super::members::{membership_after, Members};
use super::raftio::{Event, Input};
use super::shared::{CutItem, Shared};
use super::transport::submit_request;
use ferrofabric_orderer::{BlockCutter, ChannelStatus, Consensus, ConsensusError, ConsensusRelation, Submission};

/// How often held messages are checked for resubmission.
const SWEEP: Duration = Duration::from_millis(250);
/// A running Raft chain (Fabric `orderer/consensus/etcdraft/chain.go` `Chain`): the [`Consensus`] of an
/// etcdraft channel this node is a consenter of. `order`/`configure` complete once the message is held by
/// two nodes (see `shared`), or fail with SERVICE_UNAVAILABLE after the queue timeout.
pub struct RaftChain {
    pub(crate) shared: Arc<Shared>,
    pub(crate) cluster: Arc<Cluster>,
}

impl std::fmt::Debug for RaftChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftChain").field("channel", &self.shared.channel).field("id", &self.shared.self_id).finish()
    }
}

impl RaftChain {
    /// This node's Raft ID in the channel.
    pub fn raft_id(&self) -> u64 {
        self.shared.self_id
    }

    /// The leader's Raft ID as this node sees it (0 while unknown).
    pub fn leader(&self) -> u64 {
        self.shared.status.borrow().leader
    }
}

impl Consensus for RaftChain {
    fn order(&self, msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>> {
        self.shared.accept(msg, false).boxed()
    }

    fn configure(&self, msg: Submission) -> BoxFuture<'_, Result<(), ConsensusError>> {
        self.shared.accept(msg, true).boxed()
    }

    fn relation(&self) -> (ConsensusRelation, ChannelStatus) {
        let status =
            if self.shared.halted.load(Ordering::Relaxed) { ChannelStatus::Inactive } else { ChannelStatus::Active };
        (ConsensusRelation::Consenter, status)
    }

    fn halt(&self) {
        if !self.shared.halted.load(Ordering::Relaxed) {
            self.shared.halt();
            self.cluster.unregister(&self.shared);
        }
    }
}

struct Signed {
    number: u64,
    index: u64,
    data: Bytes,
}

struct Leading {
    session: u64,
    next_index: u64,
    /// Raft metadata of the next block (consenter IDs as of the last config block made).
    metadata: etcdraft::BlockMetadata,
    /// The consenters by Raft ID as of the last config block made.
    consenters: BTreeMap<u64, Consenter>,
    cutter: BlockCutter<(Key, Bytes)>,
    seen: HashSet<Key>,
    inflight: VecDeque<(u64, Vec<Key>)>,
    config_inflight: Option<u64>,
    signing: FuturesOrdered<BoxFuture<'static, Result<Signed, ConsensusError>>>,
}

impl Leading {
    fn new(session: u64, next_index: u64, members: &Members) -> Leading {
        Leading {
            session,
            next_index,
            metadata: members.metadata.clone(),
            consenters: members.consenters.clone(),
            cutter: BlockCutter::new(),
            seen: HashSet::new(),
            inflight: VecDeque::new(),
            config_inflight: None,
            signing: FuturesOrdered::new(),
        }
    }

    fn can_cut(&self, max_inflight: usize) -> bool {
        self.config_inflight.is_none() && self.inflight.len() < max_inflight
    }
}

/// Static inputs of the leader loop.
pub(crate) struct LoopParams {
    /// `Options.MaxInflightBlocks`.
    pub(crate) max_inflight: usize,
}

struct ChainLoop {
    shared: Arc<Shared>,
    params: LoopParams,
    leading: Option<Leading>,
    to_cut: VecDeque<CutItem>,
}

impl ChainLoop {
    fn make_block(&mut self, items: Vec<(Key, Bytes)>, config: bool) {
        let channel = self.shared.channel.clone();
        let Some(l) = self.leading.as_mut() else { return };
        if config {
            // A config block records the consenter IDs of its own configuration (Fabric computes them when
            // the block is written; here the leader signs them into the block).
            if let Some(env) = items.first().map(|(_, e)| e) {
                match membership_after(env, &l.metadata, &l.consenters) {
                    Ok(Some((metadata, consenters))) => {
                        l.metadata = metadata;
                        l.consenters = consenters;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::error!(%channel, error = %e, "a config block's consenter set cannot be followed")
                    }
                }
            }
        }
        let (keys, envelopes): (Vec<Key>, Vec<Bytes>) = items.into_iter().unzip();
        let block = self.shared.support.create_next_block(envelopes);
        let number = block.header.number;
        if let Ok(data_hash) = <[u8; 32]>::try_from(block.header.data_hash.as_ref()) {
            self.shared.lock_book().made(data_hash, keys.clone());
        }
        let index = l.next_index;
        l.next_index += 1;
        let metadata = etcdraft::BlockMetadata { raft_index: index, ..l.metadata.clone() };
        let metadata = Bytes::from(metadata.encode_to_vec());
        let support = self.shared.support.clone();
        l.signing.push_back(
            async move { support.sign_block(block, metadata).await.map(|data| Signed { number, index, data }) }.boxed(),
        );
        l.inflight.push_back((number, keys));
        if config {
            l.config_inflight = Some(number);
        }
    }

    fn cut_one(&mut self, item: CutItem) {
        let support = self.shared.support.clone();
        let Some(l) = self.leading.as_mut() else { return };
        if l.seen.contains(&item.key) {
            return;
        }
        {
            let mut book = self.shared.lock_book();
            if book.is_recent(&item.key) {
                book.release(&item.key);
                return;
            }
        }
        let stale = item.submission.config_seq < support.sequence();
        if item.config {
            let mut envelope = item.submission.envelope.clone();
            if stale {
                match support.reprocess_config(&envelope) {
                    Ok((env, _)) => envelope = env,
                    Err(r) => {
                        tracing::warn!(channel = %self.shared.channel, %r, "discarding a config message that no longer applies");
                        self.shared.lock_book().release(&item.key);
                        return;
                    }
                }
            }
            l.seen.insert(item.key);
            let pending = l.cutter.cut();
            if !pending.is_empty() {
                self.make_block(pending, false);
            }
            let key = key_of(&envelope);
            if key != item.key {
                // The re-derived envelope is what the block holds; the original is settled here.
                self.shared.lock_book().release(&item.key);
            }
            self.make_block(vec![(key, envelope)], true);
        } else {
            if stale {
                if let Err(r) = support.revalidate(&item.submission.envelope) {
                    tracing::warn!(channel = %self.shared.channel, tx_id = %item.submission.tx_id, %r, "discarding a message that no longer passes");
                    self.shared.lock_book().release(&item.key);
                    return;
                }
            }
            l.seen.insert(item.key);
            let (limits, _) = support.batch_limits();
            let (batches, _) =
                l.cutter.ordered((item.key, item.submission.envelope), item.submission.size, limits, Instant::now());
            for batch in batches {
                self.make_block(batch, false);
            }
        }
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::LeaderReady { session, term, next_index } => {
                tracing::info!(channel = %self.shared.channel, term, next_index, "etcdraft: leading; cutting blocks");
                // Every entry up to the election is applied and nothing else is appended until this session
                // proposes, so the ledger tip is where the next block goes (blocks made in an older session
                // are abandoned).
                self.shared.support.reset_assembly();
                self.leading = Some(Leading::new(session, next_index, &self.shared.members()));
                let held = self.shared.lock_book().all();
                self.to_cut = held
                    .into_iter()
                    .map(|(key, h)| CutItem { key, submission: h.submission, config: h.config })
                    .collect();
            }
            Event::NotLeader => {
                self.leading = None;
                self.to_cut.clear();
            }
            Event::Applied { number } => {
                if let Some(l) = self.leading.as_mut() {
                    while l.inflight.front().is_some_and(|(n, _)| *n <= number) {
                        if let Some((_, keys)) = l.inflight.pop_front() {
                            for k in keys {
                                l.seen.remove(&k);
                            }
                        }
                    }
                    if l.config_inflight.is_some_and(|n| n <= number) {
                        l.config_inflight = None;
                    }
                }
            }
            Event::Rejected { session } => {
                if self.leading.as_ref().is_some_and(|l| l.session == session) {
                    self.leading = None;
                    self.to_cut.clear();
                }
            }
        }
    }

    fn propose(&mut self, signed: Result<Signed, ConsensusError>) {
        let Some(l) = self.leading.as_ref() else { return };
        let session = l.session;
        match signed {
            Ok(Signed { number, index, data }) => {
                let _ = self.shared.raft_tx.send(Input::Propose { session, index, number, data });
            }
            Err(e) => {
                tracing::error!(channel = %self.shared.channel, error = %e, "block signing failed; resyncing");
                self.leading = None;
                self.to_cut.clear();
                let _ = self.shared.raft_tx.send(Input::Resync(session));
            }
        }
    }

    fn sweep(&mut self) {
        let now = Instant::now();
        let timing = self.shared.timing;
        let dropped = self.shared.lock_book().expire(timing.hold_limit, now);
        if dropped > 0 {
            tracing::warn!(channel = %self.shared.channel, dropped, "held messages expired without being ordered");
        }
        if let Some(l) = self.leading.as_ref() {
            let due = self.shared.lock_book().due(timing.resubmit_age, now);
            for (key, h) in due {
                if !l.seen.contains(&key) {
                    self.to_cut.push_back(CutItem { key, submission: h.submission, config: h.config });
                }
            }
            return;
        }
        let leader = self.shared.status.borrow().leader;
        if leader == 0 || leader == self.shared.self_id || !self.shared.caught_up.load(Ordering::Relaxed) {
            return;
        }
        let members = self.shared.members();
        let Some(peer) = members.peers.get(&leader) else { return };
        let due = self.shared.lock_book().due(timing.resubmit_age, now);
        for (_, h) in due {
            let bytes = submit_request(&self.shared.channel, h.submission.envelope, h.submission.config_seq);
            if !peer.submit_nowait(bytes) {
                break;
            }
        }
    }
}

async fn next_signed(leading: &mut Option<Leading>) -> Option<Result<Signed, ConsensusError>> {
    match leading {
        Some(l) => l.signing.next().await,
        None => futures::future::pending().await,
    }
}

/// Runs the leader loop of a chain until it halts.
pub(crate) async fn run_chain(
    shared: Arc<Shared>,
    params: LoopParams,
    mut cut_rx: mpsc::Receiver<CutItem>,
    mut events: mpsc::UnboundedReceiver<Event>,
) {
    let mut halt = shared.halt_tx.subscribe();
    let mut status_rx = shared.status.subscribe();
    let mut sweep = tokio::time::interval(SWEEP);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut last_leader = 0;
    let mut me = ChainLoop { shared: shared.clone(), params, leading: None, to_cut: VecDeque::new() };
    loop {
        let max = me.params.max_inflight;
        while me.leading.as_ref().is_some_and(|l| l.can_cut(max)) {
            let Some(item) = me.to_cut.pop_front() else { break };
            me.cut_one(item);
        }
        let (_, timeout) = shared.support.batch_limits();
        let deadline = me
            .leading
            .as_ref()
            .filter(|l| l.config_inflight.is_none())
            .and_then(|l| l.cutter.deadline(timeout))
            .map(tokio::time::Instant::from_std);
        let take_new = me.to_cut.is_empty() && me.leading.as_ref().is_none_or(|l| l.can_cut(max));
        let signing = me.leading.as_ref().is_some_and(|l| !l.signing.is_empty());
        tokio::select! {
            biased;
            _ = halt.changed() => break,
            ev = events.recv() => match ev {
                Some(ev) => me.on_event(ev),
                None => break,
            },
            signed = next_signed(&mut me.leading), if signing => {
                if let Some(signed) = signed {
                    me.propose(signed);
                }
            }
            changed = status_rx.changed() => {
                if changed.is_err() {
                    break;
                }
                let leader = status_rx.borrow_and_update().leader;
                if leader != last_leader {
                    last_leader = leader;
                    if leader != 0 && leader != shared.self_id {
                        // A new leader: hand it everything still held, at the next sweep.
                        shared.lock_book().all_due(shared.timing.resubmit_age, Instant::now());
                    }
                }
            }
            item = cut_rx.recv(), if take_new => match item {
                Some(item) => {
                    if me.leading.is_some() {
                        me.to_cut.push_back(item);
                    }
                }
                None => break,
            },
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                if let Some(l) = me.leading.as_mut() {
                    let batch = l.cutter.cut();
                    if !batch.is_empty() {
                        me.make_block(batch, false);
                    }
                }
            }
            _ = sweep.tick() => me.sweep(),
        }
    }
    tracing::debug!(channel = %shared.channel, "raft chain loop exited");
}
