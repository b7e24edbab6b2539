//! The state one channel's chain shares between its handle (`RaftChain`), the cluster service, the leader loop
//! and the Raft thread ([`Shared`]), and how it accepts a message: from a client, or from another consenter in a
//! `SubmitRequest`.
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

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use crate::membership::raft_consenters;
use bytes::Bytes;
use ferrofabric_orderer::{inspect, ChainSupport, ConsensusError, Submission};
use ferrofabric_protos::common::{Block, HeaderType, Status};
use ferrofabric_protos::etcdraft;
use ferrofabric_protos::orderer::SubmitResponse;
use futures::stream::FuturesUnordered;
use futures::StreamExt;
use protobuf::Message as _;
use raft::prelude::Message as RaftMessage;
use tokio::sync::{mpsc, watch};

use super::blockmeta::raft_block_metadata;
use super::book::{key_of, Book, Key};
use super::members::{next_set, Dialer, Members};
use super::raftio::{Input, RaftStatus};
use super::transport::{submit_request, submit_response, Answers};

/// Raft messages from the network waiting for the Raft thread beyond which new ones are dropped.
const MAX_RAFT_BACKLOG: usize = 16_384;
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
        self.on_config_metadata(raft_block_metadata(block))
    }

    /// As [`Shared::on_config_block`], with `recorded` the Raft metadata the config block carries (or this node
    /// signed into it).
    ///
    /// Errors: as [`Shared::on_config_block`].
    pub(crate) fn on_config_metadata(&self, recorded: Option<etcdraft::BlockMetadata>) -> Result<(), String> {
        let config = self.support.config();
        let result = (|| {
            let Some(consenters) = raft_consenters(&config).map_err(|e| e.to_string())? else { return Ok(()) };
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

    pub(crate) async fn accept(&self, submission: Submission, config: bool) -> Result<(), ConsensusError> {
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
