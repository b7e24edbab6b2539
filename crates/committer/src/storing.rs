//! The store and checkpoint threads: validated blocks written in order with the peer's metadata, the progress
//! published ([`Status`]), and state checkpoints written beside them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Context};
use ferrofabric_block_store::BlockStore;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::common::Block;
use ferrofabric_protoutil::block_header_hash;
use ferrofabric_state::UpdateBatch;
use prost::Message;
use tokio::sync::watch;

use ferrofabric_deliver::Fetched;

use crate::checkpoint::StateMirror;
use crate::metrics::{CommitMetrics, ThroughputMeter};

use crate::metadata::with_peer_metadata;

/// Work for the store thread.
pub(crate) enum StoreJob {
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
pub(crate) enum CheckpointJob {
    /// Block `number` is stored: apply its updates to the writer's copy of the state.
    Apply { number: u64, updates: UpdateBatch },
    /// Write the checkpoint of the state after block `number`, the last block applied.
    Write { number: u64, commit_hash: Option<[u8; 32]> },
}

/// Blocks the checkpoint writer may fall behind the store thread (while it writes a checkpoint) before the store
/// thread waits for it.
pub(crate) const CHECKPOINT_QUEUE: usize = 8192;

/// Blocks the checkpoint writer may fall behind before it stops pacing the checkpoint it writes: well within
/// [`CHECKPOINT_QUEUE`], so a paced checkpoint never makes the store thread wait. Once the store thread has
/// stopped, nothing is paced.
pub(crate) const HURRY_BACKLOG: u64 = 256;

/// The store thread: appends blocks, publishes config changes and metrics, hands checkpoints to the writer.
pub(crate) struct StoreStage {
    pub(crate) store: Arc<BlockStore>,
    pub(crate) data_dir: PathBuf,
    pub(crate) config_tx: watch::Sender<Option<Arc<ChannelConfig>>>,
    pub(crate) metrics: CommitMetrics,
    pub(crate) status: watch::Sender<Status>,
    /// The state after the last stored block, for the checkpoint writer.
    pub(crate) mirror: StateMirror,
}

impl StoreStage {
    pub(crate) fn run(self, jobs: std::sync::mpsc::Receiver<StoreJob>) -> anyhow::Result<()> {
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
pub(crate) struct Storing {
    pub(crate) store: Arc<BlockStore>,
    pub(crate) config_tx: watch::Sender<Option<Arc<ChannelConfig>>>,
    pub(crate) metrics: CommitMetrics,
    pub(crate) status: watch::Sender<Status>,
    /// The last block handed to the checkpoint writer.
    pub(crate) stored: Arc<AtomicU64>,
}

impl Storing {
    pub(crate) fn store_blocks(
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
pub(crate) fn write_checkpoints(
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
pub(crate) fn write_checkpoint(
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
