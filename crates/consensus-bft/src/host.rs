//! The effects of the Tendermint state machine on one BFT channel ([`Host`]): links, WAL, pool, timers, blocks
//! proposed, checked, signed and decided.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use ferrofabric_orderer::ChainSupport;
use ferrofabric_protos::common::{BlockHeader, Envelope, IdentifierHeader, MetadataSignature, OrdererBlockMetadata};
use ferrofabric_protos::smartbftprotos::ViewMetadata;
use ferrofabric_protoutil::{
    bft_signature_value, block_data_hash, block_header_hash, encode_block, new_nonce, orderer_metadata, signed_bytes,
};
use malachitebft_core_consensus::{
    ConsensusMsg, Effect, Input, LivenessMsg, LocallyProposedValue, Resumable, Resume, SignedConsensusMsg,
    VoteExtensionError, WalEntry,
};
use malachitebft_core_types::{
    NilOrVal, Round, SignedMessage, SigningProvider, SigningProviderExt, Timeout, ValidatorSet as _, VoteType,
};
use prost::Message;
use tokio::sync::{mpsc, watch};

use ferrofabric_comm::{cluster_endpoint, ClusterTls};
use ferrofabric_orderer::PullSource;

use crate::context::mt_id;
use crate::context::{Batch, BatchId, BftContext, BftProposal, BftVote, BlockNumber, ConsenterId, Consenters, Signer};
use crate::events::{Ack, Event, Sink};
use crate::faults::{byzantine, invalid_block_signature};
use crate::held::HeldPrecommits;
use crate::membership::{membership, Membership};
use crate::options::Settings;
use crate::pool::{digest, is_config, Pool};
use crate::transport::BftCluster;
use crate::transport::Link;
use crate::wal::Wal;
use crate::wire::{encode_proposal, encode_vote, frame, WireBody, WireRequest, WireVote};

/// Everything the state machine's effects act on (the state machine itself is borrowed apart from it).
pub(crate) struct Host {
    pub(crate) channel: String,
    pub(crate) support: Arc<ChainSupport>,
    pub(crate) self_id: ConsenterId,
    pub(crate) consenters: Consenters,
    pub(crate) quorum: usize,
    pub(crate) signer: Signer,
    pub(crate) links: HashMap<ConsenterId, Link>,
    pub(crate) wal: Wal,
    pub(crate) pool: Pool,
    /// The channel's SmartBFT options as applied (re-read after each config block).
    pub(crate) settings: Settings,
    /// Broadcast requests waiting for room in the full pool, oldest first, with their deadlines.
    pub(crate) waiting: VecDeque<(Bytes, Ack, Instant)>,
    pub(crate) timers: HashMap<Timeout, tokio::task::AbortHandle>,
    pub(crate) events: mpsc::Sender<Event>,
    /// The height being decided, if one is running.
    pub(crate) running: Option<u64>,
    /// The next block's number and previous hash, and the last config block.
    pub(crate) next_number: u64,
    pub(crate) previous_hash: [u8; 32],
    pub(crate) last_config: u64,
    /// Blocks seen in proposals of the running height, by id.
    pub(crate) values: HashMap<BatchId, Batch>,
    /// This node's proposals of the running height, by round (a proposer asked again proposes the same).
    pub(crate) own: HashMap<i64, Batch>,
    /// A proposal this node owes (height, round) once its pool holds a request.
    pub(crate) owed: Option<(u64, Round)>,
    /// Proposals for heights not started yet, checked once they start.
    pub(crate) early: Vec<(ConsenterId, SignedMessage<BftContext, BftProposal>)>,
    /// Precommits for blocks this node has not seen yet, fed once it has (see [`HeldPrecommits`]).
    pub(crate) held: HeldPrecommits,
    /// The other consenters, to pull missing blocks from.
    pub(crate) sources: Vec<PullSource>,
    pub(crate) cluster_tls: ClusterTls,
    pub(crate) extra_roots: Vec<Vec<u8>>,
    /// Whether missing blocks are being pulled.
    pub(crate) catching_up: bool,
    /// Inputs produced while handling effects, fed after the current input.
    pub(crate) pending: VecDeque<Input<BftContext>>,
    /// Blocks decided, to append.
    pub(crate) decided: Vec<Bytes>,
    /// A config block was decided: once it is appended, pooled requests are checked against the new configuration.
    pub(crate) config_changed: bool,
    pub(crate) recovering: bool,
    pub(crate) failed: Option<String>,
    /// A height this node sits out: the consensus engine failed while deciding it. This node signs nothing more
    /// at that height (so it cannot contradict what its WAL holds) and pulls the block once the others decide it.
    pub(crate) sat_out: Option<(u64, Instant)>,
    /// When the running height started (or last tried to pull its block, see [`STALLED`]).
    pub(crate) height_started: Instant,
    pub(crate) cluster: Arc<BftCluster>,
    /// Handed to new links, which end when the chain is halted.
    pub(crate) halt: watch::Receiver<bool>,
    pub(crate) removed: Arc<AtomicBool>,
}

impl Host {
    /// Takes up consenter set `m`: links to consenters new or moved (those of consenters no longer in the set are
    /// dropped, which ends them), the quorum, the pull sources, and the certificates that name senders of frames.
    pub(crate) fn apply_membership(&mut self, m: Membership) {
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
    pub(crate) fn reconfigure(&mut self) -> Result<(), String> {
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
    pub(crate) fn sitting_out(&self) -> bool {
        self.sat_out.is_some_and(|(h, _)| h == self.next_number)
    }

    /// Whether the next height may start: none is running and it is not sat out.
    pub(crate) fn can_begin(&self) -> bool {
        self.running.is_none() && !self.sitting_out()
    }

    pub(crate) fn broadcast(&self, body: WireBody) {
        let bytes = frame(&self.channel, body);
        for link in self.links.values() {
            link.send(bytes.clone());
        }
    }

    /// Pools a request of this node's Broadcast, forwards it to the other consenters and answers SUCCESS.
    pub(crate) fn pool_request(&mut self, envelope: Bytes, ack: Ack) {
        if self.pool.add(envelope.clone()) {
            self.broadcast(WireBody::Request(WireRequest { envelope }));
        }
        let _ = ack.send(Ok(()));
    }

    /// Pools the waiting Broadcast requests the pool has room for, oldest first.
    pub(crate) fn admit_waiting(&mut self) {
        while self.pool.len() < self.settings.pool_size {
            let Some((envelope, ack, _)) = self.waiting.pop_front() else { break };
            self.pool_request(envelope, ack);
        }
    }

    /// Fault injection (`bft-byzantine`): sends vote `v` and a conflicting one, also signed, for the other value
    /// (nil for a block, a random block id for nil): in one order to half the consenters, in the other order to
    /// the rest.
    pub(crate) fn equivocate(&self, v: &SignedMessage<BftContext, BftVote>) {
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
    pub(crate) fn send_garbage(&self) {
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

    pub(crate) fn metadata_value(&self, number: u64, config: bool, round: Round) -> Bytes {
        let last_config = if config { number } else { self.last_config };
        bft_signature_value(last_config, &view_metadata(round, number))
    }

    /// The block this node proposes for `height` (None with an empty pool).
    pub(crate) fn build(&self, height: u64, round: Round) -> Option<Batch> {
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
    pub(crate) fn check(&self, batch: &Batch, round: Round) -> Result<(), String> {
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
    pub(crate) fn block_signature(&self, batch: &Batch) -> Bytes {
        let identifier_header =
            Bytes::from(IdentifierHeader { identifier: self.self_id.0, nonce: new_nonce() }.encode_to_vec());
        let msg = signed_bytes(&batch.metadata_value, &identifier_header, &batch.header);
        let signature = Bytes::from(self.support.signer().sign(&msg));
        Bytes::from(MetadataSignature { signature_header: Bytes::new(), signature, identifier_header }.encode_to_vec())
    }

    /// Whether `ext` is consenter `voter`'s valid signature of `batch`.
    pub(crate) fn signature_valid(&self, batch: &Batch, voter: ConsenterId, ext: &Bytes) -> bool {
        let Ok(sig) = MetadataSignature::decode(ext.clone()) else { return false };
        let Ok(id) = IdentifierHeader::decode(sig.identifier_header.clone()) else { return false };
        if id.identifier != voter.0 || !sig.signature_header.is_empty() {
            return false;
        }
        let Some(c) = self.consenters.get_by_address(&voter) else { return false };
        let msg = signed_bytes(&batch.metadata_value, &sig.identifier_header, &batch.header);
        c.key.0.verify(&msg, &sig.signature).is_ok()
    }

    pub(crate) fn schedule(&mut self, t: Timeout) {
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

    pub(crate) fn cancel_all(&mut self) {
        for (_, t) in self.timers.drain() {
            t.abort();
        }
    }

    pub(crate) fn flush_wal(&mut self) -> Result<(), String> {
        self.wal.flush().map_err(|e| format!("writing the BFT WAL: {e}"))
    }

    pub(crate) fn decide(
        &mut self,
        value_id: BatchId,
        round: Round,
        extensions: Vec<(ConsenterId, Bytes)>,
    ) -> Result<(), String> {
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

    pub(crate) fn handle(&mut self, effect: Effect<BftContext>) -> Result<Resume<BftContext>, String> {
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

/// SmartBFT's `ViewMetadata` as the consenter metadata of a block: `view_id` = the deciding round,
/// `latest_sequence` = the block number.
pub(crate) fn view_metadata(round: Round, number: u64) -> Vec<u8> {
    let view_id = u64::try_from(round.as_i64()).unwrap_or(0);
    ViewMetadata { view_id, latest_sequence: number, decisions_in_view: 0 }.encode_to_vec()
}
