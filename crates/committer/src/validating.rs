//! The validate loops: blocks from the Deliver follower validated in software (pipelined) or on the BMac card, in
//! order, and handed to the store thread.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{anyhow, bail};
use bytes::Bytes;
use ferrofabric_block_store::BlockStore;
use ferrofabric_validator::{BlockResult, Validator, ValidatorError};
use tokio::sync::mpsc;

use ferrofabric_bmac::{BlockPath, CardProcessor};
use ferrofabric_deliver::Fetched;

use crate::config::Accelerator;
use crate::metrics::CardMetrics;

use crate::card::start_card;
use crate::storing::StoreJob;

/// Why the validator thread stopped on a refused block.
pub(crate) fn is_fatal(e: &ValidatorError) -> bool {
    // A block that does not decode, does not chain or is badly signed may be the sender's fault: fetch it again
    // elsewhere. A config that cannot be applied or a validation that cannot complete would fail the same way with
    // any orderer's copy of the (signed) block: Fabric's peer stops there too.
    matches!(e, ValidatorError::Config(_) | ValidatorError::Execution { .. })
}

/// What validates the blocks: the pipelined software validator, or the BMac card with its host
/// ([`CommitterConfig::accelerator`]). The card is started on the validator thread, which alone drives it (the
/// co-simulated model is bound to one thread); it must reach the recovered ledger's height and commit hash.
pub(crate) enum Engine {
    Software(Validator),
    Card {
        accelerator: Accelerator,
        store: Arc<BlockStore>,
        last_block: u64,
        commit_hash: Option<[u8; 32]>,
        metrics: CardMetrics,
    },
}

/// The validator thread.
pub(crate) struct ValidateStage {
    pub(crate) engine: Engine,
    pub(crate) blocks: mpsc::Receiver<Fetched>,
    pub(crate) restart: mpsc::Sender<u64>,
    pub(crate) jobs: std::sync::mpsc::SyncSender<StoreJob>,
    pub(crate) checkpoint_interval: u64,
}

/// Queues a validated block for the store thread and, every `checkpoint_interval` blocks, a checkpoint after it.
/// Returns false when the store thread is gone.
pub(crate) fn queue_block(
    jobs: &std::sync::mpsc::SyncSender<StoreJob>,
    fetched: Fetched,
    r: BlockResult,
    checkpoint_interval: u64,
) -> bool {
    let filter = r.transactions_filter();
    let (number, commit_hash) = (r.number, r.commit_hash);
    let job = StoreJob::Block { fetched, filter, commit_hash, new_config: r.new_config, updates: r.updates };
    if jobs.send(job).is_err() {
        return false;
    }
    number % checkpoint_interval != 0 || jobs.send(StoreJob::Checkpoint { number, commit_hash }).is_ok()
}

impl ValidateStage {
    pub(crate) fn run(self) -> anyhow::Result<()> {
        let ValidateStage { engine, blocks, restart, jobs, checkpoint_interval } = self;
        match engine {
            Engine::Software(validator) => run_software(validator, blocks, restart, jobs, checkpoint_interval),
            Engine::Card { accelerator, store, last_block, commit_hash, metrics } => {
                let card = start_card(&store, accelerator)?;
                if card.last_block_number() != last_block || card.commit_hash() != commit_hash {
                    bail!("the card's host did not reach the recovered ledger's height and commit hash");
                }
                run_card(card, &metrics, blocks, restart, jobs, checkpoint_interval)
            }
        }
    }
}

/// Validates with the card, one block at a time (the card has its own pipeline inside). A refused block is fetched
/// again from another orderer, as with the software validator; a card failure is logged once, and the card's host
/// then validates in software.
pub(crate) fn run_card(
    mut card: CardProcessor,
    metrics: &CardMetrics,
    mut blocks: mpsc::Receiver<Fetched>,
    restart: mpsc::Sender<u64>,
    jobs: std::sync::mpsc::SyncSender<StoreJob>,
    checkpoint_interval: u64,
) -> anyhow::Result<()> {
    loop {
        // A card may take seconds per block (a co-simulated one does): once the follower has gone (shutting down),
        // stop between blocks rather than validate what is still queued; those blocks are fetched again on restart.
        let next = if blocks.is_closed() { None } else { blocks.blocking_recv() };
        let Some(fetched) = next else {
            // The follower closed the channel: shutting down. Leave a checkpoint of the final state.
            let number = card.last_block_number();
            let _ = jobs.send(StoreJob::Checkpoint { number, commit_hash: card.commit_hash() });
            return Ok(());
        };
        let next = card.last_block_number() + 1;
        if fetched.number != next {
            continue; // left over from an abandoned stream
        }
        let was_on = card.card_off().is_none();
        let committed = card.commit(fetched.bytes.clone());
        if let (true, Some(why)) = (was_on, card.card_off()) {
            tracing::error!(
                block = next,
                reason = why,
                "the BMac card failed; its host validates in software from now on"
            );
        }
        match committed {
            Ok(c) => {
                tracing::debug!(block = next, path = ?c.path, cycles = ?c.cycles, "validated");
                metrics.block(c.path == BlockPath::Hardware, card.card_off().is_none());
                if !queue_block(&jobs, fetched, c.result, checkpoint_interval) {
                    bail!("the block store thread stopped");
                }
            }
            Err(e) if is_fatal(&e) => return Err(anyhow!("cannot commit: {e}")),
            Err(e) => {
                tracing::warn!(error = %e, "block refused; fetching it from another orderer");
                if restart.blocking_send(next).is_err() {
                    return Ok(());
                }
            }
        }
    }
}

/// Validates with the pipelined software validator ([`Validator::commit_blocks`]).
pub(crate) fn run_software(
    mut validator: Validator,
    mut blocks: mpsc::Receiver<Fetched>,
    restart: mpsc::Sender<u64>,
    jobs: std::sync::mpsc::SyncSender<StoreJob>,
    checkpoint_interval: u64,
) -> anyhow::Result<()> {
    let mut store_gone = false;
    loop {
        let pending: Arc<Mutex<VecDeque<Fetched>>> = Arc::default();
        let mut feed = Feed {
            rx: &mut blocks,
            next: validator.last_block_number() + 1,
            pending: pending.clone(),
            started: false,
            closed: false,
        };
        let mut refused: Option<ValidatorError> = None;
        validator.commit_blocks(std::iter::from_fn(|| feed.next()), |result: Result<BlockResult, _>| {
            let r = match result {
                Ok(r) => r,
                Err(e) => {
                    refused = Some(e);
                    return false;
                }
            };
            let Some(fetched) =
                pending.lock().unwrap_or_else(PoisonError::into_inner).pop_front().filter(|f| f.number == r.number)
            else {
                refused = Some(ValidatorError::Execution {
                    number: r.number,
                    reason: "internal: validated block has no received bytes".into(),
                });
                return false;
            };
            if !queue_block(&jobs, fetched, r, checkpoint_interval) {
                store_gone = true;
                return false;
            }
            true
        });
        let closed = feed.closed;
        if store_gone {
            bail!("the block store thread stopped");
        }
        match refused {
            None if !closed => {}
            None => {
                // The follower closed the channel: shutting down. Leave a checkpoint of the final state.
                let number = validator.last_block_number();
                let _ = jobs.send(StoreJob::Checkpoint { number, commit_hash: validator.commit_hash() });
                return Ok(());
            }
            Some(e) if is_fatal(&e) => return Err(anyhow!("cannot commit: {e}")),
            Some(e) => {
                tracing::warn!(error = %e, "block refused; fetching it from another orderer");
                if restart.blocking_send(validator.last_block_number() + 1).is_err() {
                    return Ok(());
                }
            }
        }
    }
}

/// Hands the validator the received blocks in order, skipping blocks left over from an abandoned stream.
///
/// The pipelined validator hands out block N's result only once it has block N+1 in hand (or the iterator ends).
/// At the head of the chain block N+1 may be seconds away, so the feed ends a batch as soon as no block is
/// queued: the first block of a batch is waited for, later ones only taken if already there. Under load the queue
/// is never empty and the pipeline stays full; when caught up each block is committed as soon as it arrives.
pub(crate) struct Feed<'a> {
    pub(crate) rx: &'a mut mpsc::Receiver<Fetched>,
    pub(crate) next: u64,
    pub(crate) pending: Arc<Mutex<VecDeque<Fetched>>>,
    pub(crate) started: bool,
    pub(crate) closed: bool,
}

impl Feed<'_> {
    pub(crate) fn next(&mut self) -> Option<Bytes> {
        loop {
            let f = if self.started {
                match self.rx.try_recv() {
                    Ok(f) => f,
                    Err(mpsc::error::TryRecvError::Empty) => return None,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        self.closed = true;
                        return None;
                    }
                }
            } else {
                match self.rx.blocking_recv() {
                    Some(f) => f,
                    None => {
                        self.closed = true;
                        return None;
                    }
                }
            };
            if f.number != self.next {
                continue;
            }
            self.started = true;
            self.next += 1;
            let bytes = f.bytes.clone();
            self.pending.lock().unwrap_or_else(PoisonError::into_inner).push_back(f);
            return Some(bytes);
        }
    }
}
