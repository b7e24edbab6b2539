//! One channel's Raft chain, async side (Fabric `orderer/consensus/etcdraft/chain.go`): accepting messages
//! ([`RaftChain`] as [`Consensus`]), the cluster service's requests for this channel, and the leader's loop
//! that cuts, creates, signs and proposes blocks.
//!
//! # Accepting a message
//! The receiving node holds the message (see [`super::book`]) and then
//! * as a follower, forwards it to the leader in a `SubmitRequest` and answers SUCCESS when a Ferrofabric
//!   leader acknowledged it, or once it is sent to a Fabric leader (which never answers: Fabric
//!   `chain.go` `forwardToLeader` is fire-and-forget, and the client's answer comes from the follower's own
//!   checks); if the leader fails meanwhile, the message is handed to the next leader, until the queue
//!   timeout;
//! * as the leader, queues it for the cutter and backs it up on a quorum's worth of the Ferrofabric
//!   followers (one in a three-node cluster) before answering SUCCESS; Fabric followers get no backup and
//!   are not waited for.
//!
//! A node that receives a `SubmitRequest` holds the envelope; if it leads, it also queues it for the cutter.
//! It answers only a Ferrofabric sender (see [`super::transport`]).
//!
//! # The leader loop
//! Runs only between [`Event::LeaderReady`] and the end of the leadership. It cuts with Fabric's rules
//! (config messages alone), skips messages already being cut or recently ordered, creates each block
//! on the ledger tip ([`ChainSupport::create_next_block`]), signs it on the crypto pool with an
//! `etcdraft.BlockMetadata{consenter_ids, next_consenter_id, raft_index}` as consenter metadata, and
//! proposes the signed bytes in creation order. At most `Options.MaxInflightBlocks` blocks are created and
//! not yet applied; after a config block nothing is cut until it is applied (the next block needs its
//! configuration).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::common::{Block, Envelope, HeaderType, Status};
use ferrofabric_protos::etcdraft::{self, Consenter};
use ferrofabric_protos::orderer::SubmitResponse;
use futures::future::BoxFuture;
use futures::stream::{FuturesOrdered, FuturesUnordered};
use futures::{FutureExt, StreamExt};
use prost::Message as _;
use protobuf::Message as _;
use raft::prelude::Message as RaftMessage;
use tokio::sync::{mpsc, watch};

use super::book::{key_of, Book, Key};
use super::members::{next_set, Dialer, Members};
use super::raftnode::{Event, Input, RaftStatus};
use super::transport::{submit_request, submit_response, Answers};
use super::Cluster;
use ferrofabric_orderer::{
    compute_membership_changes, inspect, raft_consenters, BlockCutter, ChainSupport, ChannelStatus, Consensus,
    ConsensusError, ConsensusRelation, Submission,
};

/// Raft messages from the network waiting for the Raft thread beyond which new ones are dropped.
const MAX_RAFT_BACKLOG: usize = 16_384;
/// How often held messages are checked for resubmission.
const SWEEP: Duration = Duration::from_millis(250);
/// Pause before forwarding a message again after the leader could not be reached.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// A message for the leader's cutter.
#[derive(Debug, Clone)]
pub(crate) struct CutItem {
    pub(crate) key: Key,
    pub(crate) submission: Submission,
    pub(crate) config: bool,
}

/// Time limits of a chain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// How long `order` may take (the node's consensus queue timeout).
    pub(crate) queue_timeout: Duration,
    /// A held message not ordered after this long is handed to the leader again.
    pub(crate) resubmit_age: Duration,
    /// A held message is dropped after this long.
    pub(crate) hold_limit: Duration,
}

/// State shared by the chain's handle, the cluster service, the leader loop and the Raft thread.
pub(crate) struct Shared {
    pub(crate) channel: String,
    pub(crate) self_id: u64,
    pub(crate) support: Arc<ChainSupport>,
    pub(crate) book: Mutex<Book>,
    pub(crate) status: watch::Sender<RaftStatus>,
    pub(crate) raft_tx: std::sync::mpsc::Sender<Input>,
    pub(crate) raft_backlog: AtomicUsize,
    pub(crate) cut_tx: mpsc::Sender<CutItem>,
    /// The consenter set as applied (replaced when a config block changes it).
    pub(crate) members: RwLock<Arc<Members>>,
    /// Opens links to consenters.
    pub(crate) dialer: Dialer,
    pub(crate) halted: AtomicBool,
    /// Set by the Raft thread: every entry this node knows to be committed is applied. Held messages are
    /// handed to the leader again only then, so the leader's memory of recently ordered messages only
    /// has to cover the last moments.
    pub(crate) caught_up: AtomicBool,
    pub(crate) halt_tx: watch::Sender<bool>,
    pub(crate) timing: Timing,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("channel", &self.channel).field("self_id", &self.self_id).finish_non_exhaustive()
    }
}

impl Shared {
    pub(crate) fn lock_book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn consenter_id(&self, der: &[u8]) -> Option<u64> {
        self.members().id_of(der)
    }

    /// The consenter set as applied.
    pub(crate) fn members(&self) -> Arc<Members> {
        self.members.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// After the config block `block` was appended (its configuration is the channel's now): the consenter
    /// set becomes the configuration's, with the Raft IDs the block's metadata records, and the links follow
    /// (Fabric `writeConfigBlock` + `configureComm`). A failure halts the chain and is recorded on it.
    ///
    /// Errors: the new set cannot be served (see [`Dialer::members`]) or is not one consenter away.
    pub(crate) fn on_config_block(&self, block: &Block) -> Result<(), String> {
        self.on_config_metadata(super::raft_block_metadata(block))
    }

    /// As [`Shared::on_config_block`], with `recorded` the Raft metadata the config block carries (or this node
    /// signed into it).
    ///
    /// Errors: as [`Shared::on_config_block`].
    pub(crate) fn on_config_metadata(&self, recorded: Option<etcdraft::BlockMetadata>) -> Result<(), String> {
        let config = self.support.config();
        let result = (|| {
            let Some(consenters) = raft_consenters(&config)? else { return Ok(()) };
            let old = self.members();
            let (metadata, map) = next_set(&old, recorded, &consenters)?;
            if metadata.consenter_ids == old.metadata.consenter_ids && map == old.consenters {
                return Ok(());
            }
            let members = self.dialer.members(self.self_id, metadata, map, Some(&old), &config.orderer_tls_roots())?;
            tracing::info!(
                channel = %self.channel,
                consenters = ?members.metadata.consenter_ids,
                next_consenter_id = members.metadata.next_consenter_id,
                "etcdraft: the consenter set changed"
            );
            *self.members.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(members);
            Ok(())
        })();
        if let Err(e) = &result {
            self.support.set_errored(format!("etcdraft: applying the consenter set of a config block: {e}"));
            self.halt();
        }
        result
    }

    pub(crate) fn halt(&self) {
        self.halted.store(true, Ordering::Relaxed);
        self.halt_tx.send_replace(true);
        let _ = self.raft_tx.send(Input::Halt);
    }

    /// A Raft message from the peer whose TLS certificate is `peer`.
    pub(crate) fn on_consensus(&self, peer: &[u8], payload: Bytes) {
        let Some(from) = self.consenter_id(peer) else {
            tracing::warn!(channel = %self.channel, "Raft message from a TLS certificate that is not a consenter");
            return;
        };
        if self.raft_backlog.load(Ordering::Relaxed) >= MAX_RAFT_BACKLOG {
            return;
        }
        let msg = match RaftMessage::parse_from_carllerche_bytes(&payload) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(channel = %self.channel, from, error = %e, "undecodable Raft message");
                return;
            }
        };
        if msg.from != from || msg.to != self.self_id {
            tracing::warn!(channel = %self.channel, from, claimed = msg.from, to = msg.to, "misaddressed Raft message dropped");
            return;
        }
        self.raft_backlog.fetch_add(1, Ordering::Relaxed);
        if self.raft_tx.send(Input::Step(msg)).is_err() {
            self.raft_backlog.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// A `SubmitRequest` from the peer whose TLS certificate is `peer` (see the module docs).
    pub(crate) async fn on_submit(&self, peer: &[u8], envelope: Bytes, seq: u64) -> SubmitResponse {
        let Some(from) = self.consenter_id(peer) else {
            return submit_response(&self.channel, Status::Forbidden, "the sender is not a consenter of this channel");
        };
        if self.halted.load(Ordering::Relaxed) {
            return submit_response(&self.channel, Status::ServiceUnavailable, "the chain is halted");
        }
        let msg = match inspect(envelope) {
            Ok(m) => m,
            Err(r) => return submit_response(&self.channel, r.status, r.info),
        };
        let config = msg.channel_header.r#type == HeaderType::Config as i32;
        let submission =
            Submission { envelope: msg.raw, tx_id: msg.channel_header.tx_id, size: msg.size, config_seq: seq };
        let key = key_of(&submission.envelope);
        if !self.lock_book().hold(key, submission.clone(), config, Instant::now()) {
            return submit_response(&self.channel, Status::ServiceUnavailable, "too many messages awaiting ordering");
        }
        let status = *self.status.borrow();
        if status.leader == self.self_id {
            let deadline = tokio::time::Instant::now() + self.timing.queue_timeout;
            let item = CutItem { key, submission: submission.clone(), config };
            if tokio::time::timeout_at(deadline, self.cut_tx.send(item)).await.map_or(true, |r| r.is_err()) {
                self.lock_book().release(&key);
                return submit_response(&self.channel, Status::ServiceUnavailable, "the leader's queue is full");
            }
            let needed = self.members().backups().saturating_sub(1);
            if let Err(e) = self.backup(&submission, Some(from), needed, deadline).await {
                return submit_response(&self.channel, Status::ServiceUnavailable, e.0);
            }
        } else if status.leader != 0 && status.leader != from {
            // The sender took this node for the leader: pass the message on (the sender still holds it).
            if let Some(peer) = self.members().peers.get(&status.leader) {
                peer.submit_nowait(submit_request(&self.channel, submission.envelope, seq));
            }
        }
        submit_response(&self.channel, Status::Success, "")
    }

    /// Sends `submission` to the other consenters (but `exclude`) that answer `SubmitRequest`s and waits until
    /// `needed` of them (at most as many as there are) acknowledged it. Fabric consenters never answer, and
    /// one that is not the leader would only forward the envelope back, so they get no backup.
    async fn backup(
        &self,
        submission: &Submission,
        exclude: Option<u64>,
        needed: usize,
        deadline: tokio::time::Instant,
    ) -> Result<(), ConsensusError> {
        if needed == 0 {
            return Ok(());
        }
        let bytes = submit_request(&self.channel, submission.envelope.clone(), submission.config_seq);
        let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
        let members = self.members();
        let mut acks: FuturesUnordered<_> = members
            .peers
            .values()
            .filter(|p| Some(p.id) != exclude && p.answers() == Answers::Yes)
            .map(|p| p.submit(bytes.clone(), timeout))
            .collect();
        let needed = needed.min(acks.len());
        if needed == 0 {
            return Ok(());
        }
        let mut ok = 0;
        let mut last = String::from("no other consenter");
        while let Some(r) = acks.next().await {
            match r {
                Ok(()) => {
                    ok += 1;
                    if ok >= needed {
                        return Ok(());
                    }
                }
                Err(e) => last = e,
            }
        }
        Err(ConsensusError(format!("the message could not be replicated to {needed} other consenter(s): {last}")))
    }

    /// Hands a held message to the leader and waits for it to be accepted (see the module docs).
    async fn deliver(&self, key: Key, submission: &Submission, config: bool) -> Result<(), ConsensusError> {
        let deadline = tokio::time::Instant::now() + self.timing.queue_timeout;
        let mut status_rx = self.status.subscribe();
        let mut last = String::from("no Raft leader");
        loop {
            if self.halted.load(Ordering::Relaxed) {
                return Err(ConsensusError("the chain is halted".into()));
            }
            let status = *status_rx.borrow_and_update();
            if status.leader == self.self_id {
                let item = CutItem { key, submission: submission.clone(), config };
                match tokio::time::timeout_at(deadline, self.cut_tx.send(item)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return Err(ConsensusError("the chain is halted".into())),
                    Err(_) => {
                        return Err(ConsensusError(format!(
                            "the consensus queue stayed full for {:?}; try again later",
                            self.timing.queue_timeout
                        )))
                    }
                }
                // Queued here; it must also reach a follower before it may be answered SUCCESS.
                loop {
                    match self.backup(submission, None, self.members().backups(), deadline).await {
                        Ok(()) => return Ok(()),
                        Err(e) if tokio::time::Instant::now() + RETRY_PAUSE >= deadline => return Err(e),
                        Err(_) => tokio::time::sleep(RETRY_PAUSE).await,
                    }
                }
            }
            if status.leader != 0 {
                let peer = self.members().peers.get(&status.leader).cloned();
                if let Some(peer) = peer {
                    let bytes = submit_request(&self.channel, submission.envelope.clone(), submission.config_seq);
                    let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
                    match peer.submit(bytes, timeout).await {
                        Ok(()) => return Ok(()),
                        Err(e) => last = format!("forwarding to the leader {} failed: {e}", status.leader),
                    }
                }
            }
            // Wait for a (new) leader or a moment, then try again: the message is held here, and the leader
            // drops copies it already has, so trying again cannot order it twice.
            if tokio::time::Instant::now() >= deadline {
                return Err(ConsensusError(last));
            }
            let pause = (tokio::time::Instant::now() + RETRY_PAUSE).min(deadline);
            if let Ok(Err(_)) = tokio::time::timeout_at(pause, status_rx.changed()).await {
                return Err(ConsensusError("the chain is halted".into()));
            }
        }
    }

    async fn accept(&self, submission: Submission, config: bool) -> Result<(), ConsensusError> {
        if self.halted.load(Ordering::Relaxed) {
            return Err(ConsensusError("the chain is halted".into()));
        }
        let key = key_of(&submission.envelope);
        if !self.lock_book().hold(key, submission.clone(), config, Instant::now()) {
            return Err(ConsensusError("too many messages awaiting ordering; try again later".into()));
        }
        let result = self.deliver(key, &submission, config).await;
        if result.is_err() {
            self.lock_book().release(&key);
        }
        result
    }
}

/// A running Raft chain (Fabric `orderer/consensus/etcdraft/chain.go` `Chain`): the [`Consensus`] of an
/// etcdraft channel this node is a consenter of. `order`/`configure` complete once the message is held by
/// two nodes (see the module docs), or fail with SERVICE_UNAVAILABLE after the queue timeout.
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

/// The Raft metadata and consenters after the CONFIG envelope `env`, when its configuration is etcdraft's
/// and its consenter set differs from `consenters`.
///
/// Errors: the envelope does not decode, or the change is not one Fabric accepts.
#[allow(clippy::type_complexity)]
pub(crate) fn membership_after(
    env: &Bytes,
    metadata: &etcdraft::BlockMetadata,
    consenters: &BTreeMap<u64, Consenter>,
) -> Result<Option<(etcdraft::BlockMetadata, BTreeMap<u64, Consenter>)>, String> {
    let env = Envelope::decode(env.clone()).map_err(|e| format!("config envelope: {e}"))?;
    let config = ChannelConfig::from_envelope(&env).map_err(|e| e.to_string())?;
    let Some(next) = raft_consenters(&config)? else { return Ok(None) };
    let changes = compute_membership_changes(metadata, consenters, &next).map_err(|e| e.to_string())?;
    if !changes.changed() && changes.new_metadata.consenter_ids == metadata.consenter_ids {
        return Ok(None);
    }
    tracing::info!(change = %changes, consenters = ?changes.new_metadata.consenter_ids, "etcdraft: config block changes the consenter set");
    Ok(Some((changes.new_metadata, changes.new_consenters)))
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
