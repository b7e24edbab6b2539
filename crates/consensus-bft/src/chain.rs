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

use std::collections::{HashMap, VecDeque};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_orderer::ChainSupport;
use ferrofabric_protoutil::block_header_hash;
use futures::FutureExt;
use malachitebft_core_consensus::{
    Input, LocallyProposedValue, Params, SignedConsensusMsg, State, ThresholdParams, WalEntry,
};
use malachitebft_core_types::{SignedMessage, Validity, ValuePayload};
use prost::Message;
use tokio::sync::{mpsc, oneshot, watch};

use ferrofabric_comm::ClusterTls;

use crate::context::mt_id;
use crate::context::{BftContext, BftProposal, BftVote, BlockNumber, ConsenterId, Consenters, Signer};
use crate::events::Event;
use crate::faults::{byzantine, censoring};
use crate::held::HeldPrecommits;
use crate::host::Host;
use crate::membership::Membership;
use crate::options::Settings;
use crate::pool::{is_config, Pool, POOL_WAIT};
use crate::transport::BftCluster;
use crate::wal::Wal;
use crate::wire::{WireBody, WireRequest};

/// Proposals kept for heights not started yet.
const MAX_EARLY: usize = 64;

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
    use crate::context::BatchId;
    use malachitebft_core_types::{NilOrVal, Round, VoteType};

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
}
