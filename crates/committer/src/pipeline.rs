//! A running committer: recovery, the commit pipeline, and the listeners ([`start`], [`RunningCommitter`], whose
//! documentation describes the threads and the durability).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use ferrofabric_block_store::{BlockStore, StoreOptions, SyncPolicy};
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{Block, BlockMetadataIndex, Metadata};
use ferrofabric_protoutil::block_header_hash;
use ferrofabric_state::UpdateBatch;
use ferrofabric_validator::{BlockResult, ResumePoint, Validator, ValidatorError, ValidatorOptions};
use prost::Message;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use ferrofabric_bmac::{BlockPath, CardLink, CardProcessor};
use ferrofabric_bmac_boards::{UdpCard, UdpCardReader, XdmaCard};
use ferrofabric_comm::{parse_addr, parse_duration, ClientTls, DeliverApi, Health, Shutdown, ShutdownTrigger};
use ferrofabric_deliver::{block_number, DeliverLedger, DeliverMetrics, Fetched, Follower, PeerDeliverService};

use crate::checkpoint::{Checkpoint, StateMirror};
use crate::config::{Accelerator, CommitterConfig};
use crate::metrics::{CardMetrics, CommitMetrics, ThroughputMeter};

/// The orderer's block with the peer's metadata added (Fabric: the validator's `TRANSACTIONS_FILTER`, then
/// `kvledger.addBlockCommitHash`): the metadata list is padded to five entries, entry 2 becomes the validation codes
/// (one byte each) and entry 4, when there is a commit hash, a marshaled `common.Metadata{value = hash}`.
///
/// Errors: `raw` is not a block.
/// The header and data are copied as they are, not decoded again ([`ferrofabric_protoutil::with_block_metadata`]):
/// the validator has decoded the block once already.
pub fn with_peer_metadata(raw: &Bytes, filter: &[u8], commit_hash: Option<&[u8; 32]>) -> anyhow::Result<Bytes> {
    Ok(ferrofabric_protoutil::with_block_metadata(raw, |md| {
        ferrofabric_protoutil::init_block_metadata(md);
        md.metadata[BlockMetadataIndex::TransactionsFilter as usize] = Bytes::copy_from_slice(filter);
        if let Some(h) = commit_hash {
            let value = Metadata { value: Bytes::copy_from_slice(h), signatures: Vec::new() };
            md.metadata[BlockMetadataIndex::CommitHash as usize] = Bytes::from(value.encode_to_vec());
        }
    })?)
}

/// The TRANSACTIONS_FILTER and COMMIT_HASH a stored block carries (`None` where absent).
///
/// Errors: the block or its COMMIT_HASH entry does not decode, or the hash is not 32 bytes.
pub fn stored_peer_metadata(stored: &Bytes) -> anyhow::Result<(Option<Bytes>, Option<[u8; 32]>)> {
    let block = Block::decode(stored.clone()).map_err(|e| anyhow!("stored block does not decode: {e}"))?;
    let md = block.metadata.map(|m| m.metadata).unwrap_or_default();
    let filter = md.get(BlockMetadataIndex::TransactionsFilter as usize).filter(|f| !f.is_empty()).cloned();
    let hash = match md.get(BlockMetadataIndex::CommitHash as usize).filter(|h| !h.is_empty()) {
        None => None,
        Some(raw) => {
            let m = Metadata::decode(raw.clone()).map_err(|e| anyhow!("COMMIT_HASH metadata: {e}"))?;
            let h: [u8; 32] =
                m.value.as_ref().try_into().map_err(|_| anyhow!("COMMIT_HASH of {} bytes", m.value.len()))?;
            Some(h)
        }
    };
    Ok((filter, hash))
}

/// Opens the block store of a committer data directory (`<dir>/ledger`).
///
/// Errors: as [`BlockStore::open`].
pub fn open_store(data_dir: &Path, sync_every_block: bool) -> anyhow::Result<BlockStore> {
    let options = StoreOptions {
        sync: if sync_every_block { SyncPolicy::EveryBlock } else { SyncPolicy::None },
        // The validator checks every block's data hash before it is stored (the genesis block: `recover`).
        verify_data_hash: false,
        // Nothing looks transactions up here: the block-store service answers `GetTransactionByID` from its own
        // index (FastFabric III-F), and the validator keeps the committed txids for DUPLICATE_TXID itself (they
        // travel with the state checkpoint). A key-value write per transaction spared on the commit path.
        index_txids: false,
        ..StoreOptions::default()
    };
    let dir = data_dir.join("ledger");
    BlockStore::open(&dir, options).with_context(|| format!("opening the block store {}", dir.display()))
}

/// What [`recover`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// Blocks re-validated from the store (block 0 excluded).
    pub replayed: u64,
    /// The checkpoint block the validator resumed from, `None` when it re-validated from block 0.
    pub resumed_from: Option<u64>,
    /// The checkpoint found, as (block number, commit hash), if any.
    pub checkpoint: Option<(u64, Option<[u8; 32]>)>,
    /// How long the replay took.
    pub elapsed: Duration,
}

/// Rebuilds the validator from the block store: block 0 from the store (or, when the store is empty, from
/// `genesis`, which is then stored with its TRANSACTIONS_FILTER); then, if the state checkpoint matches the stored
/// chain, the validator resumes from it ([`Validator::resume`]) and only the stored blocks after it are validated
/// again; otherwise (no checkpoint, a damaged one, one that disagrees with the store) every stored block is. Each
/// re-validated block must match its stored TRANSACTIONS_FILTER and COMMIT_HASH.
///
/// Errors: no genesis for an empty store, a genesis that is not block 0 or differs from the stored one, unreadable
/// blocks, a stored block the validator refuses or whose re-validation disagrees with what is stored.
pub fn recover(
    store: &BlockStore,
    data_dir: &Path,
    genesis: Option<Bytes>,
    options: ValidatorOptions,
) -> anyhow::Result<(Validator, Recovery)> {
    let started = Instant::now();
    if store.height() == 0 {
        let genesis =
            genesis.as_ref().ok_or_else(|| anyhow!("the block store is empty and no GenesisBlock is configured"))?;
        let arena = ferrofabric_arena::BlockArena::decode(genesis.clone())
            .map_err(|e| anyhow!("genesis block does not decode: {e}"))?;
        if arena.number() != 0 {
            bail!("the genesis block is block {}, not 0", arena.number());
        }
        if arena.header().data_hash.as_ref() != arena.computed_data_hash() {
            bail!("the genesis block's data hash does not match its data");
        }
        let filter = vec![0u8; arena.txs().len()];
        store.append(with_peer_metadata(genesis, &filter, None)?).context("storing the genesis block")?;
    }
    let block0 = store.block(0)?.ok_or_else(|| anyhow!("block 0 vanished from the store"))?;
    if let Some(g) = &genesis {
        let header = |b: &Bytes| -> anyhow::Result<[u8; 32]> {
            let block = Block::decode(b.clone()).map_err(|e| anyhow!("block 0 does not decode: {e}"))?;
            Ok(block_header_hash(&block.header.unwrap_or_default()))
        };
        if header(g)? != header(&block0)? {
            bail!("the configured GenesisBlock is not block 0 of the stored chain");
        }
    }
    let checkpoint = match Checkpoint::read(data_dir) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "ignoring the state checkpoint");
            None
        }
    };
    let height = store.height();
    let resumed = checkpoint.as_ref().filter(|c| c.number > 0 && c.number < height).and_then(|c| {
        resume_from_checkpoint(store, c, options.clone())
            .inspect_err(|e| {
                tracing::warn!(error = format!("{e:#}"), checkpoint = c.number, "re-validating from block 0 instead")
            })
            .ok()
    });
    let mut validator = match resumed {
        Some(v) => v,
        None => Validator::new(block0, options).map_err(|e| anyhow!("genesis block: {e}"))?,
    };
    let resumed_from = (validator.last_block_number() > 0).then_some(validator.last_block_number());
    let mut failure: Option<anyhow::Error> = None;
    let mut replayed = 0u64;
    let stored = store.blocks(validator.last_block_number() + 1..height);
    let blocks = stored.map_while(|r| match r {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::error!(error = %e, "reading a stored block during recovery");
            None
        }
    });
    let pending: Arc<Mutex<VecDeque<Bytes>>> = Arc::default();
    let feed = pending.clone();
    let blocks = blocks.inspect(move |b| lock(&feed).push_back(b.clone()));
    validator.commit_blocks(blocks, |result| {
        let stored = lock(&pending).pop_front();
        let check = (|| -> anyhow::Result<()> {
            let r = result.map_err(|e| anyhow!("a stored block is refused on re-validation: {e}"))?;
            let stored = stored.ok_or_else(|| anyhow!("block {} has no stored bytes", r.number))?;
            let (filter, hash) = stored_peer_metadata(&stored)?;
            if filter.as_deref() != Some(r.transactions_filter().as_slice()) {
                bail!("block {}: stored TRANSACTIONS_FILTER differs from re-validation", r.number);
            }
            if hash != r.commit_hash {
                bail!("block {}: stored COMMIT_HASH differs from re-validation", r.number);
            }
            if let Some(c) = checkpoint.as_ref().filter(|c| c.number == r.number) {
                let header = Block::decode(stored).ok().and_then(|b| b.header).unwrap_or_default();
                if c.commit_hash != r.commit_hash || c.header_hash != block_header_hash(&header) {
                    bail!("block {}: the state checkpoint disagrees with the re-validated chain", r.number);
                }
            }
            Ok(())
        })();
        match check {
            Ok(()) => {
                replayed += 1;
                true
            }
            Err(e) => {
                failure = Some(e);
                false
            }
        }
    });
    if let Some(e) = failure {
        return Err(e);
    }
    if validator.last_block_number() + 1 != height {
        bail!("recovery stopped at block {} of {}", validator.last_block_number(), height - 1);
    }
    if let Some(c) = &checkpoint {
        if c.number >= height {
            tracing::warn!(checkpoint = c.number, height, "the state checkpoint is ahead of the block store");
        }
    }
    let recovery = Recovery {
        replayed,
        resumed_from,
        checkpoint: checkpoint.map(|c| (c.number, c.commit_hash)),
        elapsed: started.elapsed(),
    };
    Ok((validator, recovery))
}

/// The BMac card and its host, brought to the stored chain's height: block 0 joins the channel, and every stored
/// block after it is committed again through the card (so that the card's KV store and identity cache hold the
/// ledger's state) and must give its stored TRANSACTIONS_FILTER and COMMIT_HASH.
///
/// Errors: the configuration is not built into this binary, a stored block is unreadable or refused, or its
/// re-validation disagrees with what is stored.
fn start_card(store: &BlockStore, accelerator: Accelerator) -> anyhow::Result<CardProcessor> {
    let block0 = store.block(0)?.ok_or_else(|| anyhow!("block 0 vanished from the store"))?;
    let link: Box<dyn CardLink> = match accelerator {
        Accelerator::Sim { n, m } => sim_card(n, m)?,
        Accelerator::Udp(addr) => Box::new(
            UdpCard::connect(addr, CARD_DEADLINE).map_err(|e| anyhow!("connecting to the BMac card at {addr}: {e}"))?,
        ),
        Accelerator::Alveo(device) => Box::new(
            XdmaCard::open(&device, CARD_DEADLINE)
                .map_err(|e| anyhow!("opening the BMac card at {}: {e}", device.display()))?,
        ),
        Accelerator::Relayed(addr) => Box::new(
            UdpCardReader::connect(addr, CARD_DEADLINE)
                .map_err(|e| anyhow!("reaching the relayed BMac card at {addr}: {e}"))?,
        ),
    };
    let mut card = CardProcessor::new(block0, link).map_err(|e| anyhow!("joining the channel with the card: {e}"))?;
    for stored in store.blocks(1..store.height()) {
        let stored = stored.context("reading a stored block")?;
        let c =
            card.commit(stored.clone()).map_err(|e| anyhow!("a stored block is refused by the card's host: {e}"))?;
        let (filter, hash) = stored_peer_metadata(&stored)?;
        if filter.as_deref() != Some(c.result.transactions_filter().as_slice()) || hash != c.result.commit_hash {
            bail!("block {}: the card's result differs from the stored block", c.result.number);
        }
    }
    Ok(card)
}

/// The co-simulated N×M card in this process (`ferrofabric-bmac-sim`, the `bmac-sim` feature).
///
/// Errors: the N×M model is not built (no Verilator at build time, or not in `FERROFABRIC_HW_CONFIGS`).
#[cfg(feature = "bmac-sim")]
fn sim_card(n: u32, m: u32) -> anyhow::Result<Box<dyn CardLink>> {
    let card = ferrofabric_bmac_sim::Card::new(n, m).map_err(|e| anyhow!("starting the {n}x{m} BMac card: {e}"))?;
    Ok(Box::new(card))
}

/// The co-simulated card is not built into this binary: the error says how to get it.
///
/// Errors: always.
#[cfg(not(feature = "bmac-sim"))]
fn sim_card(n: u32, m: u32) -> anyhow::Result<Box<dyn CardLink>> {
    bail!(
        "the co-simulated {n}x{m} BMac card is not built into this binary: build with the `bmac-sim` feature \
         (ferrofabric-committer/bmac-sim, or the cli's ferrofabric/bmac-sim), or use udp:, alveo: or relayed:"
    )
}

/// How long the host waits for a networked card's result for one block before it validates the block itself. A
/// co-simulated card takes seconds of wall-clock time per block; a real one, microseconds.
const CARD_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

/// A validator at the checkpoint's block, from the checkpoint's state and the stored blocks up to it (their txids and
/// last valid configuration), so that only the blocks after it are validated again. The checkpoint must match the
/// stored chain: its header hash that of the stored block, its commit hash the stored COMMIT_HASH.
fn resume_from_checkpoint(
    store: &BlockStore,
    checkpoint: &Checkpoint,
    options: ValidatorOptions,
) -> anyhow::Result<Validator> {
    let mut point = ResumePoint::new(checkpoint.to_world_state(), checkpoint.commit_hash, checkpoint.header_hash);
    for block in store.blocks(0..checkpoint.number + 1) {
        let block = block.context("reading a stored block")?;
        if block_number(&block)? == checkpoint.number {
            let (_, stored_hash) = stored_peer_metadata(&block)?;
            if stored_hash != checkpoint.commit_hash {
                bail!("block {}: the checkpoint's commit hash differs from the stored COMMIT_HASH", checkpoint.number);
            }
        }
        point.add_committed_block(block)?;
    }
    Ok(Validator::resume(point, options)?)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Work for the store thread.
enum StoreJob {
    /// A validated block to store, with the state updates it applied.
    Block {
        fetched: Fetched,
        filter: Vec<u8>,
        commit_hash: Option<[u8; 32]>,
        /// The configuration the block put in force, if any.
        new_config: Option<Arc<ChannelConfig>>,
        updates: UpdateBatch,
    },
    /// A checkpoint of the state right after a block already queued.
    Checkpoint { number: u64, commit_hash: Option<[u8; 32]> },
}

/// Work for the checkpoint writer, in block order.
enum CheckpointJob {
    /// Block `number` is stored: apply its updates to the writer's copy of the state.
    Apply { number: u64, updates: UpdateBatch },
    /// Write the checkpoint of the state after block `number`, the last block applied.
    Write { number: u64, commit_hash: Option<[u8; 32]> },
}

/// Blocks the checkpoint writer may fall behind the store thread (while it writes a checkpoint) before the store
/// thread waits for it.
const CHECKPOINT_QUEUE: usize = 8192;

/// Blocks the checkpoint writer may fall behind before it stops pacing the checkpoint it writes: well within
/// [`CHECKPOINT_QUEUE`], so a paced checkpoint never makes the store thread wait. Once the store thread has
/// stopped, nothing is paced.
const HURRY_BACKLOG: u64 = 256;

/// The store thread: appends blocks, publishes config changes and metrics, hands checkpoints to the writer.
struct StoreStage {
    store: Arc<BlockStore>,
    data_dir: PathBuf,
    config_tx: watch::Sender<Option<Arc<ChannelConfig>>>,
    metrics: CommitMetrics,
    status: watch::Sender<Status>,
    /// The state after the last stored block, for the checkpoint writer.
    mirror: StateMirror,
}

impl StoreStage {
    fn run(self, jobs: std::sync::mpsc::Receiver<StoreJob>) -> anyhow::Result<()> {
        let StoreStage { store, data_dir, config_tx, metrics, status, mirror } = self;
        // Checkpoints are written on their own thread from its own copy of the state, so neither the validator
        // (no snapshot of its state) nor the blocks behind a checkpoint (no wait for its fsyncs) stop for one.
        let (checkpoints, pending) = std::sync::mpsc::sync_channel::<CheckpointJob>(CHECKPOINT_QUEUE);
        let stored = Arc::new(AtomicU64::new(mirror.number()));
        let writer = {
            let (store, stored) = (store.clone(), stored.clone());
            std::thread::Builder::new()
                .name("committer-checkpoint".into())
                .spawn(move || write_checkpoints(&store, &data_dir, mirror, &stored, pending))?
        };
        let stage = Storing { store: store.clone(), config_tx, metrics, status, stored: stored.clone() };
        let result = stage.store_blocks(jobs, &checkpoints);
        // No blocks are left to leave the CPU to: the last checkpoint (the one of a clean shutdown) is written at
        // full speed, well within the time a supervisor gives a stopping committer.
        stored.store(u64::MAX, Ordering::Relaxed);
        drop(checkpoints);
        if writer.join().is_err() {
            tracing::error!("the checkpoint writer panicked");
        }
        result?;
        store.sync().context("syncing the block store")?;
        Ok(())
    }
}

/// What the store thread needs besides the checkpoint writer.
struct Storing {
    store: Arc<BlockStore>,
    config_tx: watch::Sender<Option<Arc<ChannelConfig>>>,
    metrics: CommitMetrics,
    status: watch::Sender<Status>,
    /// The last block handed to the checkpoint writer.
    stored: Arc<AtomicU64>,
}

impl Storing {
    fn store_blocks(
        &self,
        jobs: std::sync::mpsc::Receiver<StoreJob>,
        checkpoints: &std::sync::mpsc::SyncSender<CheckpointJob>,
    ) -> anyhow::Result<()> {
        let mut meter = ThroughputMeter::default();
        let mut writer_gone = false;
        for job in jobs {
            let job = match job {
                StoreJob::Block { fetched, filter, commit_hash, new_config, updates } => {
                    let bytes = with_peer_metadata(&fetched.bytes, &filter, commit_hash.as_ref())?;
                    self.store.append(bytes).with_context(|| format!("storing block {}", fetched.number))?;
                    if let Some(config) = new_config {
                        self.config_tx.send_replace(Some(config));
                    }
                    self.metrics.set_height(fetched.number + 1);
                    self.metrics.block_committed(&filter, fetched.received.elapsed());
                    if let Some(rate) = meter.add(filter.len() as u64) {
                        self.metrics.set_throughput(rate);
                    }
                    self.status.send_modify(|s| {
                        s.height = fetched.number + 1;
                        s.commit_hash = commit_hash;
                    });
                    self.stored.store(fetched.number, Ordering::Relaxed);
                    CheckpointJob::Apply { number: fetched.number, updates }
                }
                StoreJob::Checkpoint { number, commit_hash } => CheckpointJob::Write { number, commit_hash },
            };
            if !writer_gone && checkpoints.send(job).is_err() {
                // Blocks are still stored; a restart re-validates from the last checkpoint written.
                tracing::error!("the checkpoint writer has stopped; no further checkpoints are written");
                writer_gone = true;
            }
        }
        Ok(())
    }
}

/// The checkpoint writer thread: keeps `mirror` at the last stored block and writes it when asked; `stored` is the
/// last block the store thread has handed over (`u64::MAX` once it has stopped).
fn write_checkpoints(
    store: &BlockStore,
    data_dir: &Path,
    mut mirror: StateMirror,
    stored: &AtomicU64,
    jobs: std::sync::mpsc::Receiver<CheckpointJob>,
) {
    for job in jobs {
        match job {
            CheckpointJob::Apply { number, updates } => mirror.apply(number, &updates),
            CheckpointJob::Write { number, .. } if number != mirror.number() => {
                // Cannot happen while blocks arrive in order; a checkpoint of the wrong block must never be written.
                tracing::error!(number, applied = mirror.number(), "checkpoint requested for another block; skipped");
            }
            CheckpointJob::Write { number, commit_hash } => {
                let started = Instant::now();
                let behind = || stored.load(Ordering::Relaxed).saturating_sub(number) > HURRY_BACKLOG;
                match write_checkpoint(store, data_dir, &mirror, commit_hash, behind) {
                    Ok(()) => tracing::debug!(
                        number,
                        keys = mirror.len(),
                        elapsed = ?started.elapsed(),
                        "state checkpoint written"
                    ),
                    Err(e) => {
                        tracing::error!(error = format!("{e:#}"), number, "writing the state checkpoint failed")
                    }
                }
            }
        }
    }
}

/// Writes the checkpoint of `mirror`'s state and puts it in force once the chain up to its block is durable.
///
/// Encoding is CPU work (about 80 ms per 100,000 keys, more on a loaded host) that can wait, so it runs on a thread
/// of its own at the lowest priority (behind this process's other threads) and paced (behind everything else on the
/// host; see `checkpoint::ENCODE_DUTY`) rather than delaying the blocks being validated and ordered; `behind` says
/// when the writer has fallen so far behind the blocks that it must not pace. The block store's sync stays on this
/// thread, at normal priority: it takes locks the store thread's appends take too, and a lock held by a thread that
/// only gets idle CPU would stall the appends behind it.
fn write_checkpoint(
    store: &BlockStore,
    data_dir: &Path,
    mirror: &StateMirror,
    commit_hash: Option<[u8; 32]>,
    behind: impl Fn() -> bool + Sync,
) -> anyhow::Result<()> {
    let number = mirror.number();
    let block = store.block(number)?.ok_or_else(|| anyhow!("block {number} is not stored"))?;
    let header = Block::decode(block).map_err(|e| anyhow!("block {number}: {e}"))?.header.unwrap_or_default();
    let header_hash = block_header_hash(&header);
    std::thread::scope(|scope| {
        let encoder =
            std::thread::Builder::new().name("committer-checkpoint-encode".into()).spawn_scoped(scope, || {
                // On Linux the nice value of `setpriority` on a thread id applies to that thread alone.
                if let Err(e) = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 19) {
                    tracing::debug!(error = %e, "cannot lower the checkpoint encoder's priority");
                }
                mirror.stage(data_dir, commit_hash, header_hash, &behind)
            })?;
        // The checkpoint must never be ahead of the durable chain.
        let synced = store.sync();
        let staged = encoder.join().map_err(|_| anyhow!("the checkpoint encoder panicked"))??;
        synced?;
        staged.publish()?;
        Ok(())
    })
}

/// Why the validator thread stopped on a refused block.
fn is_fatal(e: &ValidatorError) -> bool {
    // A block that does not decode, does not chain or is badly signed may be the sender's fault: fetch it again
    // elsewhere. A config that cannot be applied or a validation that cannot complete would fail the same way with
    // any orderer's copy of the (signed) block: Fabric's peer stops there too.
    matches!(e, ValidatorError::Config(_) | ValidatorError::Execution { .. })
}

/// What validates the blocks: the pipelined software validator, or the BMac card with its host
/// ([`CommitterConfig::accelerator`]). The card is started on the validator thread, which alone drives it (the
/// co-simulated model is bound to one thread); it must reach the recovered ledger's height and commit hash.
enum Engine {
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
struct ValidateStage {
    engine: Engine,
    blocks: mpsc::Receiver<Fetched>,
    restart: mpsc::Sender<u64>,
    jobs: std::sync::mpsc::SyncSender<StoreJob>,
    checkpoint_interval: u64,
}

/// Queues a validated block for the store thread and, every `checkpoint_interval` blocks, a checkpoint after it.
/// Returns false when the store thread is gone.
fn queue_block(
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
    fn run(self) -> anyhow::Result<()> {
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
fn run_card(
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
fn run_software(
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
            let Some(fetched) = lock(&pending).pop_front().filter(|f| f.number == r.number) else {
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
struct Feed<'a> {
    rx: &'a mut mpsc::Receiver<Fetched>,
    next: u64,
    pending: Arc<Mutex<VecDeque<Fetched>>>,
    started: bool,
    closed: bool,
}

impl Feed<'_> {
    fn next(&mut self) -> Option<Bytes> {
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
            lock(&self.pending).push_back(f);
            return Some(bytes);
        }
    }
}

/// The committer's progress, as published to [`RunningCommitter::status`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Number of stored blocks.
    pub height: u64,
    /// Commit hash of the last stored block.
    pub commit_hash: Option<[u8; 32]>,
    /// Set when the pipeline stopped with an error.
    pub failed: Option<String>,
}

/// A running committer: recovery, the commit pipeline, and the listeners. Dropping it does not stop it; call
/// [`RunningCommitter::shutdown`].
///
/// # Threads (FastFabric III-D, Opt P-II/P-III)
/// ```text
/// orderers ──Deliver──▶ follower task ──(≤ BlocksInFlight)──▶ validator thread ──(≤ BlocksInFlight)──▶ store thread
///                          ▲   restart(N) on a refused block ◀──┘   (pipelined validator,            (append, metrics)
///                                                                     rayon pool of ValidationThreads)       │
/// store ──▶ peer Deliver (gRPC) ──▶ SDK event listeners, block-store service, endorser replicas      checkpoint thread
/// ```
/// The validator thread runs [`Validator::commit_blocks`]: while block N's MVCC and commit run, block N+1's
/// stateless checks (orderer signatures included) already run on the pool. The store thread writes each validated
/// block with its TRANSACTIONS_FILTER and COMMIT_HASH (the bytes a Fabric peer stores) and publishes it; consumers
/// read committed blocks from the store through Deliver at their own pace, resuming from their own height, so a
/// slow or restarted consumer neither blocks the committer nor loses a block (FastFabric III-F/III-G).
///
/// # Durability
/// The world state lives in memory. The checkpoint thread keeps its own copy, applying each block's updates once
/// the store thread has appended it; every `CheckpointInterval` blocks it makes the block store durable up to that
/// block (appends go on meanwhile) and writes its copy as a [`Checkpoint`], encoding it at the lowest CPU priority.
/// So no block waits for a checkpoint. The block store is the record of what was committed; blocks are stored as
/// the peer bytes, and re-validating them gives the same results because neither the data hash nor the orderer
/// signatures cover the TRANSACTIONS_FILTER and COMMIT_HASH entries (the validator reads only SIGNATURES).
///
/// On start the committer resumes from the checkpoint when it matches the stored chain (header hash and COMMIT_HASH
/// of its block) and re-validates only the stored blocks after it, or every stored block when there is no usable
/// checkpoint; each re-validated block's filter and commit hash must equal the stored ones. Then it asks the
/// orderers for the blocks from its height on. A `kill -9` at any moment loses at most blocks that were not yet
/// appended; they are fetched again, so the final state and every commit hash equal those of an uninterrupted run.
pub struct RunningCommitter {
    /// Bound address of the peer Deliver listener.
    pub deliver_addr: SocketAddr,
    /// Bound address of the operations listener, if enabled.
    pub operations_addr: Option<SocketAddr>,
    /// The committed blocks.
    pub store: Arc<BlockStore>,
    /// What recovery did at start.
    pub recovery: Recovery,
    status: watch::Receiver<Status>,
    shutdown: ShutdownTrigger,
    follower: JoinHandle<()>,
    pipeline: JoinHandle<anyhow::Result<()>>,
    listeners: Vec<JoinHandle<()>>,
    deliver: PeerDeliverService,
    deliver_ledger: DeliverLedger,
}

impl std::fmt::Debug for RunningCommitter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningCommitter")
            .field("deliver_addr", &self.deliver_addr)
            .field("operations_addr", &self.operations_addr)
            .field("status", &*self.status.borrow())
            .finish_non_exhaustive()
    }
}

impl RunningCommitter {
    /// A receiver of the progress (height, commit hash, failure).
    pub fn status(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// Another handle on the peer Deliver service this committer serves (same ledger, configuration and metrics),
    /// for a process that serves it on further listeners: `ferrofabric node` puts it next to `protos.Endorser` on
    /// each peer port, as a Fabric peer address serves both.
    pub fn deliver_service(&self) -> PeerDeliverService {
        self.deliver.clone()
    }

    /// What the peer Deliver service reads of this committer (its block store and channel configuration), for a
    /// Deliver service that serves several channels.
    pub fn deliver_ledger(&self) -> DeliverLedger {
        self.deliver_ledger.clone()
    }

    /// Waits until the chain has `height` blocks or the pipeline fails.
    ///
    /// Errors: the pipeline failed first.
    pub async fn wait_for_height(&self, height: u64) -> anyhow::Result<()> {
        let mut rx = self.status.clone();
        let s = rx.wait_for(|s| s.height >= height || s.failed.is_some()).await?;
        match &s.failed {
            Some(reason) => Err(anyhow!("committer failed: {reason}")),
            None => Ok(()),
        }
    }

    /// Runs until the pipeline fails (returning its error) or `stop` completes (then shuts down cleanly).
    ///
    /// Errors: the pipeline's error.
    pub async fn run_until(mut self, stop: impl std::future::Future<Output = ()>) -> anyhow::Result<()> {
        let mut status = self.status.clone();
        tokio::select! {
            _ = stop => {}
            _ = status.wait_for(|s| s.failed.is_some()) => {}
        }
        let failed = self.status.borrow().failed.clone();
        self.stop().await?;
        match failed {
            Some(reason) => Err(anyhow!(reason)),
            None => Ok(()),
        }
    }

    /// Stops following the orderers, lets the pipeline store what it has validated, writes a final checkpoint and
    /// closes the listeners.
    ///
    /// Errors: the pipeline had failed.
    pub async fn shutdown(mut self) -> anyhow::Result<()> {
        self.stop().await
    }

    async fn stop(&mut self) -> anyhow::Result<()> {
        self.follower.abort();
        let _ = (&mut self.follower).await;
        let result = match (&mut self.pipeline).await {
            Ok(r) => r,
            Err(e) => Err(anyhow!("pipeline task: {e}")),
        };
        self.shutdown.fire();
        for l in self.listeners.drain(..) {
            let _ = l.await;
        }
        result
    }
}

/// Starts a committer from `config` on the current (multi-threaded) Tokio runtime: recovery, then the pipeline,
/// the peer Deliver listener and the operations listener.
///
/// Errors: invalid configuration, unreadable MSP, genesis block or TLS files, recovery failures (see [`recover`]),
/// listeners that cannot bind.
pub async fn start(config: CommitterConfig) -> anyhow::Result<RunningCommitter> {
    config.validate()?;
    let data_dir = config.data_dir.clone().ok_or_else(|| anyhow!("DataDir is not set"))?;
    std::fs::create_dir_all(&data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
    let (msp_dir, msp_id) = match (&config.local_msp_dir, &config.local_msp_id) {
        (Some(d), Some(id)) => (d.clone(), id.clone()),
        _ => bail!("LocalMSPDir and LocalMSPID must be set"),
    };
    let signer = Arc::new(
        SigningIdentity::from_msp_dir(&msp_id, &msp_dir)
            .with_context(|| format!("loading the local MSP {msp_id} from {}", msp_dir.display()))?,
    );
    let genesis = match &config.genesis_block {
        Some(p) => Some(Bytes::from(std::fs::read(p).with_context(|| format!("reading {}", p.display()))?)),
        None => None,
    };
    let store = Arc::new(open_store(&data_dir, config.sync_every_block)?);
    let options = ValidatorOptions { threads: config.pipeline.validation_threads };
    let (validator, recovery) = {
        let (store, dir) = (store.clone(), data_dir.clone());
        tokio::task::spawn_blocking(move || recover(&store, &dir, genesis, options)).await??
    };
    let channel_config = validator.channel_config().clone();
    let channel_id = channel_config.channel_id().to_owned();
    if let Some(c) = &config.channel {
        if *c != channel_id {
            bail!("Channel is {c:?} but the genesis block is of channel {channel_id:?}");
        }
    }
    tracing::info!(
        channel = %channel_id,
        height = store.height(),
        replayed = recovery.replayed,
        elapsed = ?recovery.elapsed,
        checkpoint = ?recovery.checkpoint.map(|c| c.0),
        "recovered"
    );

    let registry = Arc::new(prometheus::Registry::new());
    let metrics = CommitMetrics::register(&registry, &channel_id)?;
    metrics.set_height(store.height());
    let deliver_metrics = DeliverMetrics::register(&registry)?;
    let (config_tx, config_rx) = watch::channel(Some(channel_config.clone()));
    let attestation_config = config_rx.clone();
    let (status_tx, status_rx) =
        watch::channel(Status { height: store.height(), commit_hash: validator.commit_hash(), failed: None });
    let (shutdown_tx, shutdown_rx) = Shutdown::new();

    // Listeners first, so that a bad address fails the start before anything runs.
    let mut listeners = Vec::new();
    let ledger = DeliverLedger { channel_id: channel_id.clone(), store: store.clone(), config: config_rx };
    let service = PeerDeliverService::with_shutdown(
        ledger.clone(),
        parse_duration(&config.time_window)?,
        Some(deliver_metrics),
        shutdown_rx.clone(),
    );
    let (deliver_addr, task) =
        ferrofabric_comm::grpc_listener(&config.listen_address, &config.tls, shutdown_rx.clone(), |b| {
            b.add_service(ferrofabric_comm::StreamService(service.clone()))
        })?;
    listeners.push(task);
    let mut operations_addr = None;
    if !config.operations_listen_address.is_empty() {
        let health = health_from_status(status_rx.clone());
        let router = ferrofabric_comm::operations_router(registry.clone(), health, "committer");
        let (addr, task) = ferrofabric_comm::serve_operations(
            parse_addr(&config.operations_listen_address)?,
            router,
            shutdown_rx.clone(),
        )
        .await?;
        operations_addr = Some(addr);
        listeners.push(task);
    }

    // The pipeline.
    let in_flight = config.pipeline.blocks_in_flight;
    let (blocks_tx, blocks_rx) = mpsc::channel(in_flight);
    let (restart_tx, restart_rx) = mpsc::channel(4);
    let (jobs_tx, jobs_rx) = std::sync::mpsc::sync_channel(in_flight);
    let mirror = StateMirror::new(validator.state());
    let engine = match &config.accelerator {
        None => Engine::Software(validator),
        Some(spec) => {
            tracing::info!(accelerator = %spec, "blocks are validated by the BMac card");
            Engine::Card {
                accelerator: Accelerator::parse(spec)?,
                store: store.clone(),
                last_block: validator.last_block_number(),
                commit_hash: validator.commit_hash(),
                metrics: CardMetrics::register(&registry, &channel_id)?,
            }
        }
    };
    let store_stage = StoreStage {
        store: store.clone(),
        data_dir: data_dir.clone(),
        config_tx,
        metrics,
        status: status_tx.clone(),
        mirror,
    };
    let validate_stage = ValidateStage {
        engine,
        blocks: blocks_rx,
        restart: restart_tx,
        jobs: jobs_tx,
        checkpoint_interval: config.checkpoint_interval,
    };
    let store_thread =
        std::thread::Builder::new().name("committer-store".into()).spawn(move || store_stage.run(jobs_rx))?;
    let validate_thread =
        std::thread::Builder::new().name("committer-validate".into()).spawn(move || validate_stage.run())?;
    let status_for_pipeline = status_tx;
    let pipeline = tokio::task::spawn_blocking(move || {
        let validated = validate_thread.join().map_err(|_| anyhow!("the validator thread panicked")).and_then(|r| r);
        let stored = store_thread.join().map_err(|_| anyhow!("the store thread panicked")).and_then(|r| r);
        let result = validated.and(stored);
        if let Err(e) = &result {
            tracing::error!(error = format!("{e:#}"), "the commit pipeline stopped");
            status_for_pipeline.send_modify(|s| s.failed = Some(format!("{e:#}")));
        }
        result
    });

    let mut follow = config.delivery.follow_config(
        config.orderers.clone(),
        DeliverApi::Orderer,
        channel_id.clone(),
        ClientTls::from_config(&config.orderer_tls)?,
    )?;
    if channel_config.orderer().is_some_and(|o| o.consensus_type() == "BFT") {
        // Fabric 3's BFT deliverer: blocks from one orderer, attestations from the others.
        let verifier = Arc::new(ConfigAttestations(attestation_config));
        follow.bft = Some(config.delivery.bft_follow(verifier)?);
    }
    let follower = tokio::spawn(Follower::new(follow, signer).run(store.height(), blocks_tx, Some(restart_rx)));

    Ok(RunningCommitter {
        deliver_addr,
        operations_addr,
        store,
        recovery,
        status: status_rx,
        shutdown: shutdown_tx,
        follower,
        pipeline,
        listeners,
        deliver: service,
        deliver_ledger: ledger,
    })
}

/// `/healthz` failure reason from the pipeline status.
fn health_from_status(mut status: watch::Receiver<Status>) -> Health {
    let (tx, rx) = watch::channel(None);
    tokio::spawn(async move {
        while status.changed().await.is_ok() {
            let failed = status.borrow().failed.clone();
            if failed.is_some() {
                tx.send_replace(failed);
                return;
            }
        }
    });
    rx
}

/// Checks the BFT deliverer's attestations under the channel configuration in force (the last committed config
/// block's), as Fabric's peer does with its channel's block verifier.
struct ConfigAttestations(watch::Receiver<Option<Arc<ChannelConfig>>>);

impl ferrofabric_deliver::AttestationVerifier for ConfigAttestations {
    fn verify(&self, block: &Bytes) -> Result<u64, ferrofabric_deliver::AttestationError> {
        let config = self.0.borrow().clone().ok_or(ferrofabric_deliver::AttestationError::NoConfig)?;
        Ok(ferrofabric_channelconfig::verify_block_attestation(&config, block.clone())?)
    }
}
