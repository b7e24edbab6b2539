//! One BFT channel: the request pool, the Tendermint state machine (Malachite) and its effects, and the blocks it
//! decides.
//!
//! Flow: a request accepted by Broadcast on any consenter enters that consenter's pool and is forwarded to all
//! others, which check it and pool it too, so every proposer can include it (and a proposer that leaves it out
//! is only one of `n` in turn). A height starts once a pool holds a request (or another consenter is already at
//! it); its proposer proposes a block of pooled requests (a config request alone); the others check the block
//! (number, previous hash, data hash, metadata, every request) before voting. Each precommit for a block carries
//! the voter's Fabric block signature as vote extension, so once a quorum has precommitted, its signatures are
//! the block's SIGNATURES metadata; every consenter appends the same block (the signature sets may differ, as in
//! Fabric 3, where each orderer writes the signatures it collected).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_orderer::ChainSupport;
use ferrofabric_protos::common::{
    BlockHeader, ChannelHeader, Envelope, HeaderType, IdentifierHeader, MetadataSignature, OrdererBlockMetadata,
    Payload,
};
use ferrofabric_protos::smartbftprotos::ViewMetadata;
use ferrofabric_protoutil::{
    bft_signature_value, block_data_hash, block_header_hash, encode_block, new_nonce, orderer_metadata, signed_bytes,
};
use futures::FutureExt;
use malachitebft_core_consensus::{
    ConsensusMsg, Effect, Input, LivenessMsg, LocallyProposedValue, Params, Resumable, Resume, SignedConsensusMsg,
    State, ThresholdParams, VoteExtensionError, WalEntry,
};
use malachitebft_core_types::{
    NilOrVal, Round, SignedMessage, SigningProvider, SigningProviderExt, Timeout, ValidatorSet as _, Validity,
    ValuePayload, VoteType,
};
use prost::Message;
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot, watch};

use ferrofabric_comm::{cluster_endpoint, ClusterTls};
use ferrofabric_orderer::PullSource;

use crate::context::{Batch, BatchId, BftContext, BftProposal, BftVote, BlockNumber, ConsenterId, Consenters, Signer};
use crate::events::{Ack, Event, Sink};
use crate::membership::{membership, Membership};
use crate::options::Settings;
use crate::transport::BftCluster;
use crate::transport::Link;
use crate::wal::Wal;
use crate::wire::{encode_proposal, encode_vote, frame, WireBody, WireRequest, WireVote};

/// Requests remembered after they were ordered, to drop late duplicates.
const MAX_RECENT: usize = 1 << 18;
/// Proposals kept for heights not started yet.
const MAX_EARLY: usize = 64;
/// A request still pooled this long after it was last sent is sent to the other consenters again (a link was down,
/// or a proposer left it out): so that every pooled request reaches every proposer.
const RESEND_AFTER: Duration = Duration::from_secs(2);
/// Requests re-sent per tick at most.
const RESEND_MAX: usize = 2_000;
/// How long a Broadcast request waits for room in a full pool before it is refused.
const POOL_WAIT: Duration = Duration::from_secs(5);

/// The pool of requests not yet ordered, in arrival order.
struct Pool {
    by_seq: BTreeMap<u64, [u8; 32]>,
    /// By digest: arrival sequence number, envelope, whether it is a CONFIG request, when it was last sent.
    entries: HashMap<[u8; 32], (u64, Bytes, bool, Instant)>,
    next_seq: u64,
    recent: HashSet<[u8; 32]>,
    recent_order: VecDeque<[u8; 32]>,
}

fn digest(envelope: &[u8]) -> [u8; 32] {
    Sha256::digest(envelope).into()
}

/// Whether `envelope` is a CONFIG transaction (it must go alone in its block).
fn is_config(envelope: &Bytes) -> bool {
    let header = Envelope::decode(envelope.clone())
        .ok()
        .and_then(|e| Payload::decode(e.payload).ok())
        .and_then(|p| p.header)
        .and_then(|h| ChannelHeader::decode(h.channel_header).ok());
    header.is_some_and(|h| h.r#type == HeaderType::Config as i32)
}

impl Pool {
    fn new() -> Pool {
        Pool {
            by_seq: BTreeMap::new(),
            entries: HashMap::new(),
            next_seq: 0,
            recent: HashSet::new(),
            recent_order: VecDeque::new(),
        }
    }

    /// Adds a request; false if it is pooled already or was ordered recently.
    fn add(&mut self, envelope: Bytes) -> bool {
        let d = digest(&envelope);
        if self.entries.contains_key(&d) || self.recent.contains(&d) {
            return false;
        }
        let config = is_config(&envelope);
        self.by_seq.insert(self.next_seq, d);
        self.entries.insert(d, (self.next_seq, envelope, config, Instant::now()));
        self.next_seq += 1;
        true
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn contains(&self, d: &[u8; 32]) -> bool {
        self.entries.contains_key(d)
    }

    fn ordered_recently(&self, d: &[u8; 32]) -> bool {
        self.recent.contains(d)
    }

    /// The next block's requests: the oldest config request alone if it comes first, else the oldest normal
    /// requests up to `max_count` and `max_bytes` (at least one).
    fn batch(&self, max_count: usize, max_bytes: usize) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for d in self.by_seq.values() {
            let Some((_, env, config, _)) = self.entries.get(d) else { continue };
            if *config {
                if out.is_empty() {
                    return vec![env.clone()];
                }
                continue;
            }
            if !out.is_empty() && (out.len() >= max_count || bytes + env.len() > max_bytes) {
                break;
            }
            bytes += env.len();
            out.push(env.clone());
        }
        out
    }

    /// The requests last sent before `now - RESEND_AFTER` (oldest first, at most `RESEND_MAX`), marked sent now.
    fn due(&mut self, now: Instant) -> Vec<Bytes> {
        let mut out = Vec::new();
        for d in self.by_seq.values() {
            if out.len() >= RESEND_MAX {
                break;
            }
            if let Some((_, env, _, sent)) = self.entries.get_mut(d) {
                if now.duration_since(*sent) >= RESEND_AFTER {
                    *sent = now;
                    out.push(env.clone());
                }
            }
        }
        out
    }

    /// Keeps only the requests `keep` accepts (given the envelope and whether it is a CONFIG request); returns how
    /// many were dropped.
    fn retain(&mut self, mut keep: impl FnMut(&Bytes, bool) -> bool) -> usize {
        let before = self.entries.len();
        let by_seq = &mut self.by_seq;
        self.entries.retain(|_, (seq, env, config, _)| {
            let kept = keep(env, *config);
            if !kept {
                by_seq.remove(seq);
            }
            kept
        });
        before - self.entries.len()
    }

    /// Drops the requests of an ordered block and remembers them.
    fn ordered(&mut self, envelopes: &[Bytes]) {
        for env in envelopes {
            let d = digest(env);
            if let Some((seq, _, _, _)) = self.entries.remove(&d) {
                self.by_seq.remove(&seq);
            }
            if self.recent.insert(d) {
                self.recent_order.push_back(d);
                if self.recent_order.len() > MAX_RECENT {
                    if let Some(old) = self.recent_order.pop_front() {
                        self.recent.remove(&old);
                    }
                }
            }
        }
    }
}

/// Everything the state machine's effects act on (the state machine itself is borrowed apart from it).
struct Host {
    channel: String,
    support: Arc<ChainSupport>,
    self_id: ConsenterId,
    consenters: Consenters,
    quorum: usize,
    signer: Signer,
    links: HashMap<ConsenterId, Link>,
    wal: Wal,
    pool: Pool,
    /// The channel's SmartBFT options as applied (re-read after each config block).
    settings: Settings,
    /// Broadcast requests waiting for room in the full pool, oldest first, with their deadlines.
    waiting: VecDeque<(Bytes, Ack, Instant)>,
    timers: HashMap<Timeout, tokio::task::AbortHandle>,
    events: mpsc::Sender<Event>,
    /// The height being decided, if one is running.
    running: Option<u64>,
    /// The next block's number and previous hash, and the last config block.
    next_number: u64,
    previous_hash: [u8; 32],
    last_config: u64,
    /// Blocks seen in proposals of the running height, by id.
    values: HashMap<BatchId, Batch>,
    /// This node's proposals of the running height, by round (a proposer asked again proposes the same).
    own: HashMap<i64, Batch>,
    /// A proposal this node owes (height, round) once its pool holds a request.
    owed: Option<(u64, Round)>,
    /// Proposals for heights not started yet, checked once they start.
    early: Vec<(ConsenterId, SignedMessage<BftContext, BftProposal>)>,
    /// Precommits for blocks this node has not seen yet, fed once it has (see [`HeldPrecommits`]).
    held: HeldPrecommits,
    /// The other consenters, to pull missing blocks from.
    sources: Vec<PullSource>,
    cluster_tls: ClusterTls,
    extra_roots: Vec<Vec<u8>>,
    /// Whether missing blocks are being pulled.
    catching_up: bool,
    /// Inputs produced while handling effects, fed after the current input.
    pending: VecDeque<Input<BftContext>>,
    /// Blocks decided, to append.
    decided: Vec<Bytes>,
    /// A config block was decided: once it is appended, pooled requests are checked against the new configuration.
    config_changed: bool,
    recovering: bool,
    failed: Option<String>,
    /// A height this node sits out: the consensus engine failed while deciding it. This node signs nothing more
    /// at that height (so it cannot contradict what its WAL holds) and pulls the block once the others decide it.
    sat_out: Option<(u64, Instant)>,
    /// When the running height started (or last tried to pull its block, see [`STALLED`]).
    height_started: Instant,
    cluster: Arc<BftCluster>,
    /// Handed to new links, which end when the chain is halted.
    halt: watch::Receiver<bool>,
    removed: Arc<AtomicBool>,
}

impl Host {
    /// Takes up consenter set `m`: links to consenters new or moved (those of consenters no longer in the set are
    /// dropped, which ends them), the quorum, the pull sources, and the certificates that name senders of frames.
    fn apply_membership(&mut self, m: Membership) {
        let roots = self.support.config().orderer_tls_roots();
        let mut links = HashMap::new();
        for o in &m.others {
            let Ok(id) = u32::try_from(o.id).map(ConsenterId) else { continue };
            let unchanged = self.sources.iter().any(|s| s.id == o.id && s.host == o.host && s.port == o.port);
            match self.links.remove(&id) {
                Some(link) if unchanged => {
                    links.insert(id, link);
                }
                _ => match cluster_endpoint(&o.host, o.port, &self.cluster_tls, &roots) {
                    Ok(ep) => {
                        let metrics = self.support.metrics().clone();
                        links.insert(id, Link::spawn(id.0, ep, self.cluster.max_message, self.halt.clone(), metrics));
                    }
                    Err(e) => {
                        tracing::warn!(channel = %self.channel, consenter = id.0, error = %e, "no link to consenter")
                    }
                },
            }
        }
        self.links = links;
        self.quorum = ferrofabric_channelconfig::bft_quorum(m.consenters.count());
        self.consenters = m.consenters;
        self.sources = m.others;
        self.extra_roots = roots;
        let sink = Sink {
            channel: self.channel.clone(),
            support: self.support.clone(),
            by_cert: m.by_cert,
            events: self.events.clone(),
        };
        self.cluster.register(&self.channel, Arc::new(sink));
    }

    /// After a config block: takes up its consenter set, or leaves the channel if it no longer names this node.
    fn reconfigure(&mut self) -> Result<(), String> {
        let m = membership(&self.support.config(), self.support.signer().serialized())?;
        match m.self_id {
            None => {
                tracing::info!(channel = %self.channel, id = self.self_id.0, "this orderer was removed from the consenters");
                self.removed.store(true, std::sync::atomic::Ordering::Relaxed);
                self.cluster.unregister(&self.channel);
                self.links.clear();
            }
            Some(id) if id != self.self_id => {
                return Err(format!("this orderer's consenter id changed from {} to {}", self.self_id.0, id.0));
            }
            Some(_) => {
                let before = self.consenters.count();
                self.apply_membership(m);
                if self.consenters.count() != before {
                    tracing::info!(channel = %self.channel, consenters = self.consenters.count(), quorum = self.quorum,
                        "BFT consenter set changed");
                }
            }
        }
        Ok(())
    }

    /// Whether this node sits out its next height (see [`sit_out`]).
    fn sitting_out(&self) -> bool {
        self.sat_out.is_some_and(|(h, _)| h == self.next_number)
    }

    /// Whether the next height may start: none is running and it is not sat out.
    fn can_begin(&self) -> bool {
        self.running.is_none() && !self.sitting_out()
    }

    fn broadcast(&self, body: WireBody) {
        let bytes = frame(&self.channel, body);
        for link in self.links.values() {
            link.send(bytes.clone());
        }
    }

    /// Pools a request of this node's Broadcast, forwards it to the other consenters and answers SUCCESS.
    fn pool_request(&mut self, envelope: Bytes, ack: Ack) {
        if self.pool.add(envelope.clone()) {
            self.broadcast(WireBody::Request(WireRequest { envelope }));
        }
        let _ = ack.send(Ok(()));
    }

    /// Pools the waiting Broadcast requests the pool has room for, oldest first.
    fn admit_waiting(&mut self) {
        while self.pool.len() < self.settings.pool_size {
            let Some((envelope, ack, _)) = self.waiting.pop_front() else { break };
            self.pool_request(envelope, ack);
        }
    }

    /// Fault injection (`bft-byzantine`): sends vote `v` and a conflicting one, also signed, for the other value
    /// (nil for a block, a random block id for nil): in one order to half the consenters, in the other order to
    /// the rest.
    fn equivocate(&self, v: &SignedMessage<BftContext, BftVote>) {
        let mut other = v.message.clone();
        other.value = match other.value {
            NilOrVal::Nil => NilOrVal::Val(BatchId(rand::random())),
            NilOrVal::Val(_) => NilOrVal::Nil,
        };
        other.extension = None;
        let conflicting = self.signer.sign_vote(other);
        let honest = frame(&self.channel, WireBody::Vote(encode_vote(v)));
        let conflicting = frame(&self.channel, WireBody::Vote(encode_vote(&conflicting)));
        for (i, link) in self.links.values().enumerate() {
            let (first, second) = if i % 2 == 0 { (&honest, &conflicting) } else { (&conflicting, &honest) };
            link.send(first.clone());
            link.send(second.clone());
        }
    }

    /// Fault injection (`bft-byzantine`): a frame whose vote does not decode, a vote in another consenter's name,
    /// and bytes that are no frame at all (the receiver's stream from this node breaks on them).
    fn send_garbage(&self) {
        let undecodable = frame(&self.channel, WireBody::Vote(WireVote::default()));
        let noise = Bytes::from((0..64).map(|_| rand::random::<u8>()).collect::<Vec<u8>>());
        for (id, link) in &self.links {
            let impersonated = BftVote {
                height: BlockNumber(self.next_number),
                round: Round::new(0),
                kind: VoteType::Prevote,
                value: NilOrVal::Nil,
                voter: self.self_id,
                extension: None,
            };
            let mut impersonated = self.signer.sign_vote(impersonated);
            impersonated.message.voter = *id;
            link.send(undecodable.clone());
            link.send(frame(&self.channel, WireBody::Vote(encode_vote(&impersonated))));
            link.send(noise.clone());
        }
    }

    fn metadata_value(&self, number: u64, config: bool, round: Round) -> Bytes {
        let last_config = if config { number } else { self.last_config };
        bft_signature_value(last_config, &view_metadata(round, number))
    }

    /// The block this node proposes for `height` (None with an empty pool).
    fn build(&self, height: u64, round: Round) -> Option<Batch> {
        let envelopes = self.pool.batch(self.settings.batch_max_count, self.settings.batch_max_bytes);
        if envelopes.is_empty() {
            return None;
        }
        let config = envelopes.len() == 1 && is_config(&envelopes[0]);
        let header = BlockHeader {
            number: height,
            previous_hash: Bytes::copy_from_slice(&self.previous_hash),
            data_hash: Bytes::copy_from_slice(&block_data_hash(&envelopes)),
        };
        Some(Batch::new(header, envelopes, self.metadata_value(height, config, round)))
    }

    /// Checks another consenter's proposed block for the running height: it continues this ledger, its data
    /// hash and metadata are right, and every request is acceptable.
    fn check(&self, batch: &Batch, round: Round) -> Result<(), String> {
        let h = &batch.header;
        if h.number != self.next_number {
            return Err(format!("block number {} (expected {})", h.number, self.next_number));
        }
        if h.previous_hash.as_ref() != self.previous_hash {
            return Err("previous hash does not continue the chain".into());
        }
        if h.data_hash.as_ref() != block_data_hash(&batch.envelopes) {
            return Err("data hash does not match the block's data".into());
        }
        if batch.envelopes.is_empty() {
            return Err("empty block".into());
        }
        let config = batch.envelopes.len() == 1 && is_config(&batch.envelopes[0]);
        let md = OrdererBlockMetadata::decode(batch.metadata_value.clone()).map_err(|e| format!("metadata: {e}"))?;
        let expected_last = if config { h.number } else { self.last_config };
        if md.last_config.map(|l| l.index) != Some(expected_last) {
            return Err(format!("metadata names last config {:?} (expected {expected_last})", md.last_config));
        }
        let _ = round;
        let mut seen = HashSet::new();
        for env in &batch.envelopes {
            let d = digest(env);
            if !seen.insert(d) {
                return Err("a request appears twice".into());
            }
            if self.pool.ordered_recently(&d) {
                return Err("a request was ordered already".into());
            }
            if config {
                self.support.reprocess_config(env).map_err(|e| format!("config request: {e}"))?;
                let proposed = Envelope::decode(env.clone())
                    .map_err(|e| e.to_string())
                    .and_then(|e| {
                        ferrofabric_channelconfig::ChannelConfig::from_envelope(&e).map_err(|e| e.to_string())
                    })
                    .map_err(|e| format!("config request: {e}"))?;
                crate::membership::check_block_validation(&proposed).map_err(|e| format!("config request: {e}"))?;
            } else if is_config(env) {
                return Err("a config request shares its block".into());
            } else if !self.pool.contains(&d) {
                self.support.revalidate(env).map_err(|e| format!("request: {e}"))?;
            }
        }
        Ok(())
    }

    /// This node's Fabric signature of `batch`: `MetadataSignature{identifier_header: IdentifierHeader{id,
    /// nonce}, signature}` over `value ‖ identifier_header ‖ DER(header)` (Fabric 3's BFT block signature).
    fn block_signature(&self, batch: &Batch) -> Bytes {
        let identifier_header =
            Bytes::from(IdentifierHeader { identifier: self.self_id.0, nonce: new_nonce() }.encode_to_vec());
        let msg = signed_bytes(&batch.metadata_value, &identifier_header, &batch.header);
        let signature = Bytes::from(self.support.signer().sign(&msg));
        Bytes::from(MetadataSignature { signature_header: Bytes::new(), signature, identifier_header }.encode_to_vec())
    }

    /// Whether `ext` is consenter `voter`'s valid signature of `batch`.
    fn signature_valid(&self, batch: &Batch, voter: ConsenterId, ext: &Bytes) -> bool {
        let Ok(sig) = MetadataSignature::decode(ext.clone()) else { return false };
        let Ok(id) = IdentifierHeader::decode(sig.identifier_header.clone()) else { return false };
        if id.identifier != voter.0 || !sig.signature_header.is_empty() {
            return false;
        }
        let Some(c) = self.consenters.get_by_address(&voter) else { return false };
        let msg = signed_bytes(&batch.metadata_value, &sig.identifier_header, &batch.header);
        c.key.0.verify(&msg, &sig.signature).is_ok()
    }

    fn schedule(&mut self, t: Timeout) {
        let delay = self.settings.timeouts.of(&t);
        let (events, height) = (self.events.clone(), self.running.unwrap_or_default());
        let task = tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let _ = events.send(Event::Timer(t, height)).await;
        });
        if let Some(old) = self.timers.insert(t, task.abort_handle()) {
            old.abort();
        }
    }

    fn cancel_all(&mut self) {
        for (_, t) in self.timers.drain() {
            t.abort();
        }
    }

    fn flush_wal(&mut self) -> Result<(), String> {
        self.wal.flush().map_err(|e| format!("writing the BFT WAL: {e}"))
    }

    fn decide(&mut self, value_id: BatchId, round: Round, extensions: Vec<(ConsenterId, Bytes)>) -> Result<(), String> {
        let batch =
            self.values.get(&value_id).cloned().ok_or_else(|| format!("decided block {value_id} is unknown"))?;
        let mut signatures: Vec<(u32, MetadataSignature)> = Vec::new();
        for (voter, ext) in extensions {
            if signatures.iter().any(|(id, _)| *id == voter.0) || !self.signature_valid(&batch, voter, &ext) {
                continue;
            }
            if let Ok(sig) = MetadataSignature::decode(ext) {
                signatures.push((voter.0, sig));
            }
        }
        signatures.sort_by_key(|(id, _)| *id);
        if signatures.len() < self.quorum {
            tracing::error!(channel = %self.channel, block = batch.number(), signatures = signatures.len(),
                quorum = self.quorum, "decided block has fewer valid consenter signatures than the quorum");
        }
        let config = batch.envelopes.len() == 1 && is_config(&batch.envelopes[0]);
        let last_config = if config { batch.number() } else { self.last_config };
        let metadata = orderer_metadata(
            batch.metadata_value.clone(),
            signatures.into_iter().map(|(_, s)| s).collect(),
            last_config,
        );
        self.pool.ordered(&batch.envelopes);
        self.next_number = batch.number() + 1;
        self.previous_hash = block_header_hash(&batch.header);
        self.last_config = last_config;
        self.config_changed |= config;
        tracing::debug!(channel = %self.channel, block = batch.number(), %round, txs = batch.envelopes.len(), "BFT block decided");
        self.decided.push(encode_block(batch.header, batch.envelopes, metadata));
        self.values.clear();
        self.own.clear();
        self.owed = None;
        self.running = None;
        self.cancel_all();
        Ok(())
    }

    fn handle(&mut self, effect: Effect<BftContext>) -> Result<Resume<BftContext>, String> {
        Ok(match effect {
            Effect::ResetTimeouts(r) | Effect::RestreamProposal(.., r) => r.resume_with(()),
            Effect::CancelAllTimeouts(r) => {
                self.cancel_all();
                r.resume_with(())
            }
            Effect::CancelTimeout(t, r) => {
                if let Some(h) = self.timers.remove(&t) {
                    h.abort();
                }
                r.resume_with(())
            }
            Effect::ScheduleTimeout(t, r) => {
                self.schedule(t);
                r.resume_with(())
            }
            Effect::GetValidatorSet(_, r) => r.resume_with(Some(self.consenters.clone())),
            Effect::StartRound(height, round, proposer, _, r) => {
                self.flush_wal()?;
                tracing::debug!(channel = %self.channel, %height, %round, %proposer, "BFT round");
                r.resume_with(())
            }
            Effect::PublishConsensusMsg(msg, r) => {
                self.flush_wal()?;
                if !self.recovering {
                    match msg {
                        SignedConsensusMsg::Vote(v) if byzantine() => self.equivocate(&v),
                        SignedConsensusMsg::Vote(v) => self.broadcast(WireBody::Vote(encode_vote(&v))),
                        SignedConsensusMsg::Proposal(p) => self.broadcast(WireBody::Proposal(encode_proposal(&p))),
                    }
                }
                r.resume_with(())
            }
            Effect::PublishLivenessMsg(msg, r) => {
                // Certificates are not sent: a consenter behind in rounds catches up from the rebroadcast votes.
                if let LivenessMsg::Vote(v) = msg {
                    self.broadcast(WireBody::Vote(encode_vote(&v)));
                }
                r.resume_with(())
            }
            Effect::RepublishVote(v, r) => {
                self.broadcast(WireBody::Vote(encode_vote(&v)));
                r.resume_with(())
            }
            Effect::RepublishRoundCertificate(_, r) => r.resume_with(()),
            Effect::GetValue(height, round, _, r) => {
                let key = round.as_i64();
                let value = match self.own.get(&key) {
                    Some(v) => Some(v.clone()),
                    None => self.build(height.0, round),
                };
                match value {
                    Some(v) => {
                        self.own.insert(key, v.clone());
                        self.values.insert(mt_id(&v), v.clone());
                        self.pending.push_back(Input::Propose(LocallyProposedValue::new(height, round, v)));
                    }
                    None => self.owed = Some((height.0, round)),
                }
                r.resume_with(())
            }
            Effect::SyncValue(_, r) => r.resume_with(()),
            Effect::Decide(cert, extensions, r) => {
                self.flush_wal()?;
                let exts = extensions.extensions.into_iter().map(|(a, e)| (a, e.message)).collect();
                self.decide(cert.value_id, cert.round, exts)?;
                r.resume_with(())
            }
            Effect::SignVote(v, r) => r.resume_with(self.signer.sign_vote(v)),
            Effect::SignProposal(p, r) => r.resume_with(self.signer.sign_proposal(p)),
            Effect::VerifySignature(msg, key, r) => {
                let ok = match &msg.message {
                    ConsensusMsg::Vote(v) => self.signer.verify_signed_vote(v, &msg.signature, &key),
                    ConsensusMsg::Proposal(p) => self.signer.verify_signed_proposal(p, &msg.signature, &key),
                };
                r.resume_with(ok)
            }
            Effect::VerifyCommitCertificate(c, set, th, r) => {
                r.resume_with(self.signer.verify_commit_certificate(&BftContext, &c, &set, th))
            }
            Effect::VerifyPolkaCertificate(c, set, th, r) => {
                r.resume_with(self.signer.verify_polka_certificate(&BftContext, &c, &set, th))
            }
            Effect::VerifyRoundCertificate(c, set, th, r) => {
                r.resume_with(self.signer.verify_round_certificate(&BftContext, &c, &set, th))
            }
            Effect::WalAppend(entry, r) => {
                if !self.recovering {
                    if let WalEntry::ConsensusMsg(SignedConsensusMsg::Proposal(p)) = &entry {
                        self.values.insert(mt_id(&p.value), p.value.clone());
                    }
                    self.wal.append(&entry);
                }
                r.resume_with(())
            }
            Effect::ExtendVote(_, _, id, r) => {
                let ext = self.values.get(&id).map(|b| {
                    let signature = self.block_signature(b);
                    let signature = if byzantine() { invalid_block_signature(signature) } else { signature };
                    self.signer.sign_vote_extension(signature)
                });
                r.resume_with(ext)
            }
            Effect::VerifyVoteExtension(_, _, id, ext, key, r) => {
                let voter = self.consenters.0.iter().find(|c| c.key == key).map(|c| c.id);
                let result = match (self.values.get(&id), voter) {
                    (Some(batch), Some(voter)) if !self.signature_valid(batch, voter, &ext.message) => {
                        Err(VoteExtensionError::InvalidSignature)
                    }
                    (_, None) => Err(VoteExtensionError::InvalidVoteExtension),
                    // Without the block (only while the WAL is replayed: live precommits wait for their block in
                    // `HeldPrecommits`) the signature is checked when the block is decided.
                    _ => Ok(()),
                };
                r.resume_with(result)
            }
        })
    }
}

/// The most precommits held at once (see [`HeldPrecommits`]); beyond it the oldest is dropped, which costs at
/// most a round or a pull of the block, never safety.
const MAX_HELD: usize = 256;

/// Precommits for a block this node has not seen yet, held back from the engine until its proposal arrives.
///
/// A precommit's vote extension is the voter's Fabric block signature, which can be checked only against the block
/// (the signed bytes hold its header). The engine counts a precommit whose extension was not checked toward the
/// quorum that decides the height, so a Byzantine consenter's precommit with a forged signature, arriving before the
/// proposal, could complete a quorum whose valid signatures are one short, and the block would carry fewer
/// signatures than `BlockValidation` requires. Held here, the precommit reaches the engine only once the block is
/// known and its signature is checked ([`Host::signature_valid`]); the height is decided by precommits whose
/// signatures are all valid.
#[derive(Debug, Default)]
struct HeldPrecommits(Vec<SignedMessage<BftContext, BftVote>>);

impl HeldPrecommits {
    /// Holds `vote` and answers true if it is a precommit for a block (not nil) of height `next` or later whose
    /// block is not among `known` (the blocks proposed at the `running` height).
    fn hold(
        &mut self,
        vote: &SignedMessage<BftContext, BftVote>,
        running: Option<u64>,
        next: u64,
        known: &HashMap<BatchId, Batch>,
    ) -> bool {
        let v = &vote.message;
        let NilOrVal::Val(id) = &v.value else { return false };
        if v.kind != VoteType::Precommit || v.height.0 < next || (running == Some(v.height.0) && known.contains_key(id))
        {
            return false;
        }
        if self.0.len() >= MAX_HELD {
            self.0.remove(0);
        }
        self.0.push(vote.clone());
        true
    }

    /// The held precommits whose block is now known at the `running` height, oldest first; drops those of heights
    /// before `next` (decided without them).
    fn release(
        &mut self,
        running: Option<u64>,
        next: u64,
        known: &HashMap<BatchId, Batch>,
    ) -> Vec<SignedMessage<BftContext, BftVote>> {
        let (ready, wait) =
            std::mem::take(&mut self.0).into_iter().filter(|v| v.message.height.0 >= next).partition(|v| {
                running == Some(v.message.height.0)
                    && matches!(&v.message.value, NilOrVal::Val(id) if known.contains_key(id))
            });
        self.0 = wait;
        ready
    }
}

fn mt_id(b: &Batch) -> BatchId {
    malachitebft_core_types::Value::id(b)
}

/// SmartBFT's `ViewMetadata` as the consenter metadata of a block: `view_id` = the deciding round,
/// `latest_sequence` = the block number.
fn view_metadata(round: Round, number: u64) -> Vec<u8> {
    let view_id = u64::try_from(round.as_i64()).unwrap_or(0);
    ViewMetadata { view_id, latest_sequence: number, decisions_in_view: 0 }.encode_to_vec()
}

/// What a chain starts with.
pub(crate) struct ChainParams {
    pub(crate) cluster: Arc<BftCluster>,
    pub(crate) cluster_tls: ClusterTls,
    pub(crate) support: Arc<ChainSupport>,
    pub(crate) self_id: ConsenterId,
    pub(crate) members: Membership,
    pub(crate) wal: Wal,
    pub(crate) settings: Settings,
    /// Turns true when the chain is halted; links end with it.
    pub(crate) halt: watch::Receiver<bool>,
    /// Set when a config block removes this node from the consenter set.
    pub(crate) removed: Arc<AtomicBool>,
}

/// The chain's loop: runs until `halt` turns true or every event sender is gone.
pub(crate) async fn run(
    params: ChainParams,
    events_tx: mpsc::Sender<Event>,
    mut events: mpsc::Receiver<Event>,
    mut halt: watch::Receiver<bool>,
) {
    let support = params.support;
    let channel = support.channel_id().to_owned();
    let store = support.store().clone();
    let height = store.height();
    let tip = height.checked_sub(1).and_then(|n| store.block(n).ok().flatten());
    let tip = tip.and_then(|raw| ferrofabric_protos::common::Block::decode(raw).ok());
    let Some((tip, last_config)) =
        tip.and_then(|b| Some((b.header.clone()?, ferrofabric_protoutil::last_config_index(&b).unwrap_or(0))))
    else {
        support.set_errored("the BFT chain cannot read its ledger tip");
        return;
    };
    let mut host = Host {
        signer: Signer::new(&channel, support.signer().clone()),
        channel: channel.clone(),
        support: support.clone(),
        self_id: params.self_id,
        quorum: 0,
        consenters: Consenters::new(Vec::new()),
        links: HashMap::new(),
        wal: params.wal,
        pool: Pool::new(),
        settings: params.settings,
        waiting: VecDeque::new(),
        timers: HashMap::new(),
        events: events_tx,
        running: None,
        next_number: height,
        previous_hash: block_header_hash(&tip),
        last_config,
        values: HashMap::new(),
        own: HashMap::new(),
        owed: None,
        early: Vec::new(),
        held: HeldPrecommits::default(),
        sources: Vec::new(),
        cluster_tls: params.cluster_tls,
        extra_roots: Vec::new(),
        height_started: Instant::now(),
        cluster: params.cluster,
        halt: params.halt,
        removed: params.removed,
        catching_up: false,
        pending: VecDeque::new(),
        decided: Vec::new(),
        config_changed: false,
        recovering: false,
        failed: None,
        sat_out: None,
    };
    host.apply_membership(params.members);
    let mut state = new_state(&host);
    let ticker = {
        let events = host.events.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            loop {
                every.tick().await;
                if events.send(Event::Tick).await.is_err() {
                    return;
                }
            }
        })
    };
    // A WAL of the next height means this node was deciding it when it stopped: resume at once. Replaying it can
    // break an engine invariant as much as live messages can, so a panic here is contained the same way.
    let resumed = match AssertUnwindSafe(start_height(&mut state, &mut host, true)).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => sit_out(&mut state, &mut host, panic_message(&panic)).await,
    };
    if let Err(e) = resumed {
        tracing::error!(%channel, reason = %e, "BFT chain stopped");
        support.set_errored(e);
        ticker.abort();
        return;
    }
    loop {
        let event = tokio::select! {
            e = events.recv() => e,
            _ = halt.changed() => None,
        };
        let Some(event) = event else { break };
        let result = match AssertUnwindSafe(on_event(&mut state, &mut host, event)).catch_unwind().await {
            Ok(result) => result,
            Err(panic) => sit_out(&mut state, &mut host, panic_message(&panic)).await,
        };
        if host.removed.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        if let Err(e) = result.and_then(|_| host.failed.take().map_or(Ok(()), Err)) {
            tracing::error!(%channel, reason = %e, "BFT chain stopped");
            support.set_errored(e);
            break;
        }
    }
    host.cancel_all();
    ticker.abort();
}

/// How long a height may run before this node tries to pull its block from the others.
const STALLED: Duration = Duration::from_secs(5);

/// How long a height is sat out (see [`sit_out`]) before this node takes it up again from its WAL.
const SIT_OUT: Duration = Duration::from_secs(10);

/// After the consensus engine panicked while deciding the running height (an engine invariant broken by some
/// order of messages): appends what was decided, replaces the engine's state and sits the height out rather than
/// stop the channel. The height's block is pulled from the others once they have decided it.
async fn sit_out(state: &mut State<BftContext>, host: &mut Host, why: String) -> Result<(), String> {
    let height = host.running.unwrap_or(host.next_number);
    tracing::error!(channel = %host.channel, height, reason = %why, "BFT engine failed: sitting this height out");
    for raw in std::mem::take(&mut host.decided) {
        host.support.append_block(raw).await.map_err(|e| format!("appending a decided block: {}", e.0))?;
    }
    *state = new_state(host);
    host.pending.clear();
    host.running = None;
    host.values.clear();
    host.own.clear();
    host.owed = None;
    host.early.clear();
    host.recovering = false;
    host.cancel_all();
    if height >= host.next_number {
        host.sat_out = Some((height, Instant::now()));
        host.height_started = Instant::now();
    }
    Ok(())
}

/// The text of a caught panic.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// A fresh consensus state machine at this node's next height.
fn new_state(host: &Host) -> State<BftContext> {
    let params = Params {
        initial_height: BlockNumber(host.next_number),
        initial_validator_set: host.consenters.clone(),
        address: host.self_id,
        threshold_params: ThresholdParams::default(),
        value_payload: ValuePayload::ProposalOnly,
    };
    State::new(BftContext, params, 4)
}

/// Starts the next height if there is reason to (`resume`: only if the WAL holds it).
async fn start_height(state: &mut State<BftContext>, host: &mut Host, resume: bool) -> Result<(), String> {
    let h = host.next_number;
    let entries = host.wal.start(h).map_err(|e| format!("reading the BFT WAL: {e}"))?;
    if resume && entries.is_empty() {
        return Ok(());
    }
    host.running = Some(h);
    host.height_started = Instant::now();
    feed(state, host, Input::StartHeight(BlockNumber(h), host.consenters.clone()));
    host.recovering = true;
    for entry in entries {
        let input = match entry {
            WalEntry::ConsensusMsg(SignedConsensusMsg::Vote(v)) => Input::Vote(v),
            WalEntry::ConsensusMsg(SignedConsensusMsg::Proposal(p)) => {
                host.values.insert(mt_id(&p.value), p.value.clone());
                Input::Proposal(p)
            }
            WalEntry::Timeout(t) => Input::TimeoutElapsed(t),
            WalEntry::ProposedValue(v) => {
                host.values.insert(mt_id(&v.value), v.value.clone());
                Input::ProposedValue(v, malachitebft_core_types::ValueOrigin::Consensus)
            }
        };
        feed(state, host, input);
    }
    host.recovering = false;
    take_early(state, host);
    drain(state, host).await
}

/// Feeds one input to the state machine, handling its effects; the inputs they produce are fed by [`drain`].
fn feed(state: &mut State<BftContext>, host: &mut Host, input: Input<BftContext>) {
    // Fault injection (`bft-engine-panic`, inert unless `FERROFABRIC_FAILPOINTS` configures it): the engine breaks
    // one of its invariants, as it panics, to show the chain sits the height out instead of stopping.
    let _ = fail::eval("bft-engine-panic", |_| ());
    if let Input::Vote(v) = &input {
        if is_repeat(state, &v.message) {
            return;
        }
        if !host.recovering && host.held.hold(v, host.running, host.next_number, &host.values) {
            return;
        }
    }
    let result: Result<(), malachitebft_core_consensus::Error<BftContext>> = malachitebft_core_consensus::process!(
        input: input,
        state: state,
        metrics: &(),
        with: effect => host.handle(effect)
    );
    if let Err(e) = result {
        tracing::debug!(channel = %host.channel, error = %e, "BFT input not applied");
    }
}

/// Whether the engine already holds `vote`'s voter's vote of that kind and round, for the same value, at the running
/// height. ECDSA signatures are randomised, so the same vote can reach the engine twice with different signatures:
/// this node's own vote, signed again while its WAL is replayed, beside the copy in the WAL; or a restarted
/// consenter's vote, signed again, beside the copy it sent before. The engine's vote keeper keeps both, and a commit
/// certificate built from them counts one voter twice, which the engine asserts against. Kept out here instead.
fn is_repeat(state: &State<BftContext>, vote: &BftVote) -> bool {
    state.driver.height() == vote.height
        && state
            .driver
            .votes()
            .per_round(vote.round)
            .and_then(|r| r.get_vote(vote.kind, &vote.voter))
            .is_some_and(|held| held.message.value == vote.value)
}

/// Feeds the pending inputs, appends decided blocks, and starts the next height when requests wait.
async fn drain(state: &mut State<BftContext>, host: &mut Host) -> Result<(), String> {
    loop {
        loop {
            while let Some(input) = host.pending.pop_front() {
                feed(state, host, input);
            }
            let ready = host.held.release(host.running, host.next_number, &host.values);
            if ready.is_empty() {
                break;
            }
            host.pending.extend(ready.into_iter().map(Input::Vote));
        }
        for raw in std::mem::take(&mut host.decided) {
            host.support.append_block(raw).await.map_err(|e| format!("appending a decided block: {}", e.0))?;
        }
        if std::mem::take(&mut host.config_changed) {
            host.settings = Settings::of(&host.support.config());
            host.reconfigure()?;
            if host.removed.load(std::sync::atomic::Ordering::Relaxed) {
                return Ok(());
            }
            prune_pool(host);
        }
        host.admit_waiting();
        if let Some(e) = host.failed.take() {
            return Err(e);
        }
        if host.can_begin() && !host.pool.is_empty() {
            begin_height(state, host)?;
            continue;
        }
        if host.pending.is_empty() {
            return Ok(());
        }
    }
}

/// Starts deciding the next block (a fresh WAL for it), then takes the proposals that arrived early.
fn begin_height(state: &mut State<BftContext>, host: &mut Host) -> Result<(), String> {
    let h = host.next_number;
    host.wal.start(h).map_err(|e| format!("writing the BFT WAL: {e}"))?;
    host.running = Some(h);
    host.height_started = Instant::now();
    feed(state, host, Input::StartHeight(BlockNumber(h), host.consenters.clone()));
    take_early(state, host);
    Ok(())
}

/// Feeds the early proposals of the running height; drops those of past heights.
fn take_early(state: &mut State<BftContext>, host: &mut Host) {
    let Some(h) = host.running else { return };
    let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut host.early)
        .into_iter()
        .filter(|(_, p)| p.message.height.0 >= h)
        .partition(|(_, p)| p.message.height.0 == h);
    host.early = later;
    for (from, p) in now {
        on_proposal(state, host, from, p);
    }
}

/// Pulls blocks `host.next_number..=to` from the other consenters (`first` tried first) in the background; each
/// comes back as [`Event::Pulled`] to be checked and appended by the loop.
fn catch_up(host: &mut Host, first: ConsenterId, to: u64) {
    if host.catching_up || to < host.next_number {
        return;
    }
    host.catching_up = true;
    let from = host.next_number;
    tracing::info!(channel = %host.channel, from, to, "BFT consenter behind: pulling blocks");
    let mut sources = host.sources.clone();
    sources.sort_by_key(|s| s.id != u64::from(first.0));
    let (support, tls, roots, events) =
        (host.support.clone(), host.cluster_tls.clone(), host.extra_roots.clone(), host.events.clone());
    tokio::spawn(async move {
        let apply_events = events.clone();
        let result = ferrofabric_orderer::pull_blocks(&support, &tls, &roots, &sources, from, to, move |raw, _| {
            let events = apply_events.clone();
            Box::pin(async move {
                let (ack, done) = oneshot::channel();
                events.send(Event::Pulled(raw, ack)).await.map_err(|_| "the BFT chain stopped".to_owned())?;
                done.await.map_err(|_| "the BFT chain stopped".to_owned())?
            })
        })
        .await;
        let _ = events.send(Event::CaughtUp(result.map_err(|e| e.to_string()))).await;
    });
}

/// Appends a pulled block after checking it is the next one and carries a quorum of consenter signatures
/// (`BlockValidation`); a height in progress below the new ledger height is abandoned.
async fn append_pulled(host: &mut Host, raw: Bytes) -> Result<(), String> {
    let block = ferrofabric_protos::common::Block::decode(raw.clone()).map_err(|e| format!("pulled block: {e}"))?;
    let header = block.header.clone().ok_or("pulled block without header")?;
    if header.number < host.next_number {
        return Ok(());
    }
    if header.number != host.next_number || header.previous_hash.as_ref() != host.previous_hash {
        return Err(format!("pulled block {} does not continue the chain at {}", header.number, host.next_number));
    }
    ferrofabric_channelconfig::verify_block_attestation(&host.support.config(), raw.clone())
        .map_err(|e| format!("pulled block {}: {e}", header.number))?;
    let envelopes = block.data.map(|d| d.data).unwrap_or_default();
    let config = envelopes.len() == 1 && is_config(&envelopes[0]);
    host.support.append_block(raw).await.map_err(|e| format!("appending pulled block {}: {}", header.number, e.0))?;
    host.pool.ordered(&envelopes);
    host.next_number = header.number + 1;
    host.previous_hash = block_header_hash(&header);
    if config {
        host.last_config = header.number;
        host.config_changed = true;
    }
    if host.running.is_some_and(|h| h < host.next_number) {
        host.running = None;
        host.values.clear();
        host.own.clear();
        host.owed = None;
        host.cancel_all();
    }
    Ok(())
}

fn on_proposal(
    state: &mut State<BftContext>,
    host: &mut Host,
    from: ConsenterId,
    p: SignedMessage<BftContext, BftProposal>,
) {
    if p.message.proposer != from {
        tracing::warn!(channel = %host.channel, %from, "proposal signed for another proposer: dropped");
        return;
    }
    let h = p.message.height.0;
    match host.running {
        Some(running) if h == running => {}
        // Kept for when this height starts (after catching up, for a height beyond the ledger).
        _ if h >= host.next_number && host.early.len() < MAX_EARLY => {
            host.early.push((from, p));
            return;
        }
        _ => return,
    }
    if let Err(why) = host.check(&p.message.value, p.message.round) {
        tracing::warn!(channel = %host.channel, block = h, proposer = %from, %why, "BFT proposal refused");
        let v = malachitebft_core_consensus::ProposedValue {
            height: p.message.height,
            round: p.message.round,
            valid_round: p.message.pol_round,
            proposer: from,
            value: p.message.value.clone(),
            validity: Validity::Invalid,
        };
        feed(state, host, Input::ProposedValue(v, malachitebft_core_types::ValueOrigin::Consensus));
    } else {
        host.values.insert(mt_id(&p.message.value), p.message.value.clone());
    }
    feed(state, host, Input::Proposal(p));
}

/// After a config block: drops the pooled requests the new configuration refuses (a creator whose organisation
/// left, a changed policy), as Fabric 3's BFT chain prunes its request pool on reconfiguration, so that no proposer
/// offers a block the others would refuse.
fn prune_pool(host: &mut Host) {
    let support = host.support.clone();
    let dropped =
        host.pool.retain(
            |env, config| {
                if config {
                    support.reprocess_config(env).is_ok()
                } else {
                    support.revalidate(env).is_ok()
                }
            },
        );
    if dropped > 0 {
        tracing::info!(channel = %host.channel, dropped, "pooled requests refused by the new configuration dropped");
    }
}

/// Fault injection: whether this consenter is Byzantine (the `bft-byzantine` fault point, inert unless
/// `FERROFABRIC_FAILPOINTS` configures it; the Byzantine consenter test uses it): it equivocates, signs blocks
/// with invalid signatures and sends garbage to the other consenters. It still orders, so the others must both
/// tolerate it and not be misled by it.
fn byzantine() -> bool {
    fail::eval("bft-byzantine", |_| ()).is_some()
}

/// A block signature made invalid: its signature bytes altered (the identifier header kept, so that it still
/// names its consenter).
fn invalid_block_signature(signature: Bytes) -> Bytes {
    let Ok(mut sig) = MetadataSignature::decode(signature.clone()) else { return signature };
    let mut altered = sig.signature.to_vec();
    if let Some(b) = altered.last_mut() {
        *b ^= 0x01;
    }
    sig.signature = Bytes::from(altered);
    Bytes::from(sig.encode_to_vec())
}

/// Fault injection: whether this consenter censors, answering Broadcast SUCCESS but pooling no request, from
/// clients or from the other consenters, so that it never proposes one (the `bft-drop-requests` fault point of
/// TiKV's fail-rs, inert unless `FERROFABRIC_FAILPOINTS` configures it; the censorship test uses it). The
/// others replace it as proposer when their propose timeout expires.
fn censoring() -> bool {
    fail::eval("bft-drop-requests", |_| ()).is_some()
}

async fn on_event(state: &mut State<BftContext>, host: &mut Host, event: Event) -> Result<(), String> {
    match event {
        Event::Order(_, ack) if censoring() => {
            let _ = ack.send(Ok(()));
        }
        Event::PeerRequest(_) if censoring() => {}
        Event::Order(envelope, ack) => {
            let max = host.settings.request_max_bytes;
            if envelope.len() > max {
                let _ =
                    ack.send(Err(format!("the request is {} bytes, more than RequestMaxBytes {max}", envelope.len())));
            } else if host.pool.len() >= host.settings.pool_size || !host.waiting.is_empty() {
                host.waiting.push_back((envelope, ack, Instant::now() + POOL_WAIT));
            } else {
                host.pool_request(envelope, ack);
            }
        }
        Event::PeerRequest(envelope) => {
            host.pool.add(envelope);
        }
        Event::Tick => {
            let now = Instant::now();
            // A height that does not end may have ended elsewhere with this node missing the last votes (or it
            // sits the height out): try to pull its block. Pulled blocks this node has meanwhile are skipped.
            let stalled = host.running.is_some() || host.sitting_out();
            if stalled && !host.catching_up && now >= host.height_started + STALLED {
                host.height_started = now;
                if let Some(first) = host.sources.first().and_then(|s| u32::try_from(s.id).ok()) {
                    let to = host.next_number;
                    catch_up(host, ConsenterId(first), to);
                }
            }
            if host.sitting_out() && host.sat_out.is_some_and(|(_, since)| now >= since + SIT_OUT) {
                // The others did not decide the height without this node: take it up again from the WAL, as a
                // restarted node would.
                host.sat_out = None;
                start_height(state, host, true).await?;
            }
            while host.waiting.front().is_some_and(|(_, _, deadline)| *deadline <= now) {
                if let Some((_, ack, _)) = host.waiting.pop_front() {
                    let _ = ack.send(Err(format!(
                        "the request pool is full ({} requests wait to be ordered)",
                        host.settings.pool_size
                    )));
                }
            }
            for envelope in host.pool.due(now) {
                host.broadcast(WireBody::Request(WireRequest { envelope }));
            }
            if byzantine() {
                host.send_garbage();
            }
        }
        Event::Vote(from, v) => {
            if v.message.voter != from {
                tracing::warn!(channel = %host.channel, %from, "vote signed for another voter: dropped");
                return Ok(());
            }
            let h = v.message.height.0;
            if h > host.next_number {
                catch_up(host, from, h - 1);
            }
            if host.sitting_out() {
                // Nothing is fed for the height sat out; votes of later heights wait in the engine (which has not
                // started a height) and bring the sat-out block by catching up.
                if h > host.next_number {
                    feed(state, host, Input::Vote(v));
                }
            } else if host.running.is_none() && h == host.next_number {
                // Another consenter is at the next height already: join it.
                host.pending.push_back(Input::Vote(v));
                begin_height(state, host)?;
            } else {
                feed(state, host, Input::Vote(v));
            }
        }
        Event::Proposal(from, p) => {
            let h = p.message.height.0;
            if h > host.next_number {
                catch_up(host, from, h - 1);
            }
            if host.can_begin() && h == host.next_number {
                host.early.push((from, p));
                begin_height(state, host)?;
            } else {
                on_proposal(state, host, from, p);
            }
        }
        Event::Timer(t, height) => {
            if host.running == Some(height) && host.timers.remove(&t).is_some() {
                feed(state, host, Input::TimeoutElapsed(t));
            }
        }
        Event::Pulled(raw, ack) => {
            let result = append_pulled(host, raw).await;
            let failed = result.as_ref().err().cloned();
            let _ = ack.send(result);
            if let Some(e) = failed {
                tracing::warn!(channel = %host.channel, reason = %e, "pulled block refused");
            }
        }
        Event::CaughtUp(result) => {
            host.catching_up = false;
            match result {
                Ok(()) => tracing::info!(channel = %host.channel, height = host.next_number, "BFT consenter caught up"),
                Err(e) => tracing::warn!(channel = %host.channel, reason = %e, "BFT catch-up failed"),
            }
            if host.can_begin() && host.early.iter().any(|(_, p)| p.message.height.0 == host.next_number) {
                begin_height(state, host)?;
            }
        }
    }
    // A proposal owed for lack of requests is made once one arrives.
    if let Some((h, round)) = host.owed {
        if host.running == Some(h) {
            if let Some(v) = host.build(h, round) {
                host.owed = None;
                host.own.insert(round.as_i64(), v.clone());
                host.values.insert(mt_id(&v), v.clone());
                host.pending.push_back(Input::Propose(LocallyProposedValue::new(BlockNumber(h), round, v)));
            }
        }
    }
    drain(state, host).await
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn envelope(kind: HeaderType, id: &str) -> Bytes {
        let ch = ChannelHeader { r#type: kind as i32, tx_id: id.into(), ..ChannelHeader::default() };
        let payload = Payload {
            header: Some(ferrofabric_protos::common::Header {
                channel_header: ch.encode_to_vec().into(),
                signature_header: Bytes::new(),
            }),
            data: Bytes::from(id.to_owned()),
        };
        Bytes::from(Envelope { payload: payload.encode_to_vec().into(), signature: Bytes::new() }.encode_to_vec())
    }

    #[test]
    fn the_pool_batches_in_arrival_order_puts_a_config_request_alone_and_drops_duplicates() {
        let mut pool = Pool::new();
        let (a, b, c) = (
            envelope(HeaderType::EndorserTransaction, "a"),
            envelope(HeaderType::EndorserTransaction, "b"),
            envelope(HeaderType::EndorserTransaction, "c"),
        );
        let config = envelope(HeaderType::Config, "config");
        assert!(pool.add(a.clone()) && pool.add(b.clone()));
        assert!(!pool.add(a.clone()), "a pooled request is not pooled twice");
        assert!(pool.add(config.clone()) && pool.add(c.clone()));
        assert_eq!(pool.batch(10, 1 << 20), vec![a.clone(), b.clone(), c.clone()], "the config request waits");
        assert_eq!(pool.batch(2, 1 << 20), vec![a.clone(), b.clone()]);
        assert_eq!(pool.batch(10, 1), vec![a.clone()], "at least one request, whatever its size");
        pool.ordered(&[a.clone(), b.clone()]);
        assert_eq!(pool.batch(10, 1 << 20), vec![config.clone()], "a config request first in line goes alone");
        pool.ordered(&[config, c]);
        assert!(pool.is_empty());
        assert!(!pool.add(a), "a request ordered recently is not pooled again");
    }

    #[test]
    fn pruning_the_pool_keeps_order_and_drops_only_what_is_refused() {
        let mut pool = Pool::new();
        let (a, b, c) = (
            envelope(HeaderType::EndorserTransaction, "a"),
            envelope(HeaderType::EndorserTransaction, "b"),
            envelope(HeaderType::EndorserTransaction, "c"),
        );
        for e in [&a, &b, &c] {
            pool.add(e.clone());
        }
        assert_eq!(pool.retain(|e, _| e != &b), 1);
        assert_eq!(pool.batch(10, 1 << 20), vec![a.clone(), c.clone()]);
        assert!(pool.add(b), "a pruned request was not ordered: it may come again");
        assert_eq!(pool.len(), 3);
    }

    #[test]
    fn a_vote_signed_again_for_the_same_value_is_a_repeat_and_another_value_is_not() {
        use crate::context::{Consenter, ConsenterKey};
        use malachitebft_core_driver::Input as DriverInput;
        // Any valid point serves as key: the keeper compares voters by id. This one is P-256's generator.
        let g = hex::decode(
            "046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5",
        )
        .unwrap();
        let key = ConsenterKey(Arc::new(ferrofabric_msp::PublicKey::from_sec1(&g).unwrap()));
        let set = Consenters::new((1..=4).map(|i| Consenter { id: ConsenterId(i), key: key.clone() }).collect());
        let params = Params {
            initial_height: BlockNumber(5),
            initial_validator_set: set,
            address: ConsenterId(1),
            threshold_params: ThresholdParams::default(),
            value_payload: ValuePayload::ProposalOnly,
        };
        let mut state = State::new(BftContext, params, 4);
        state.driver.process(DriverInput::NewRound(BlockNumber(5), Round::new(0), ConsenterId(2))).unwrap();
        let value = NilOrVal::Val(BatchId([7; 32]));
        let vote = |voter: u32, value: NilOrVal<BatchId>, height: u64| BftVote {
            height: BlockNumber(height),
            round: Round::new(0),
            kind: VoteType::Prevote,
            value,
            voter: ConsenterId(voter),
            extension: None,
        };
        let first = SignedMessage::new(vote(3, value, 5), Bytes::from_static(b"first signature"));
        assert!(!is_repeat(&state, &first.message), "nothing held yet");
        state.driver.process(DriverInput::Vote(first)).unwrap();
        assert!(is_repeat(&state, &vote(3, value, 5)), "the same vote, whatever its signature");
        assert!(!is_repeat(&state, &vote(3, NilOrVal::Nil, 5)), "another value is the engine's to judge");
        assert!(!is_repeat(&state, &vote(4, value, 5)), "another voter");
        assert!(!is_repeat(&state, &vote(3, value, 6)), "another height");
    }

    #[test]
    fn a_precommit_waits_for_its_block_and_past_heights_are_dropped() {
        let block = Batch::new(BlockHeader { number: 5, ..BlockHeader::default() }, Vec::new(), Bytes::new());
        let id = mt_id(&block);
        let vote = |kind: VoteType, value: NilOrVal<BatchId>, height: u64| {
            let v = BftVote {
                height: BlockNumber(height),
                round: Round::new(0),
                kind,
                value,
                voter: ConsenterId(4),
                extension: None,
            };
            SignedMessage::new(v, Bytes::from_static(b"signature"))
        };
        let mut held = HeldPrecommits::default();
        let mut known = HashMap::new();
        let early = vote(VoteType::Precommit, NilOrVal::Val(id), 5);
        assert!(held.hold(&early, Some(5), 5, &known), "a precommit for an unseen block waits");
        assert!(
            !held.hold(&vote(VoteType::Prevote, NilOrVal::Val(id), 5), Some(5), 5, &known),
            "prevotes carry no signature"
        );
        assert!(
            !held.hold(&vote(VoteType::Precommit, NilOrVal::Nil, 5), Some(5), 5, &known),
            "nil carries no signature"
        );
        assert!(
            !held.hold(&vote(VoteType::Precommit, NilOrVal::Val(id), 4), Some(5), 5, &known),
            "a past height is the engine's"
        );
        assert!(
            held.hold(&vote(VoteType::Precommit, NilOrVal::Val(id), 6), Some(5), 5, &known),
            "a later height waits too"
        );
        assert!(held.release(Some(5), 5, &known).is_empty(), "the block is still unknown");
        known.insert(id, block);
        assert!(!held.hold(&early, Some(5), 5, &known), "a precommit for a known block is checked at once");
        assert_eq!(held.release(Some(5), 5, &known), vec![early], "released once the block is known");
        assert!(held.release(Some(6), 6, &HashMap::new()).is_empty() && held.0.len() == 1, "height 6's waits on");
        assert!(held.release(None, 7, &known).is_empty() && held.0.is_empty(), "dropped once its height is decided");
    }

    #[test]
    fn requests_are_due_again_only_after_the_resend_interval() {
        let mut pool = Pool::new();
        pool.add(envelope(HeaderType::EndorserTransaction, "a"));
        let now = Instant::now();
        assert!(pool.due(now).is_empty());
        assert_eq!(pool.due(now + RESEND_AFTER).len(), 1);
        assert!(pool.due(now + RESEND_AFTER).is_empty(), "sent again just now");
    }
}
