//! Start-up: the block store opened, and the validator's state rebuilt from the last checkpoint and the blocks
//! stored after it (or from the genesis block), each stored block checked against its stored codes and hash.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use ferrofabric_block_store::{BlockStore, StoreOptions, SyncPolicy};
use ferrofabric_protos::common::Block;
use ferrofabric_protoutil::block_header_hash;
use ferrofabric_validator::{ResumePoint, Validator, ValidatorOptions};
use prost::Message;

use ferrofabric_deliver::block_number;

use crate::checkpoint::Checkpoint;

use crate::metadata::{stored_peer_metadata, with_peer_metadata};

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
    let blocks = blocks.inspect(move |b| feed.lock().unwrap_or_else(PoisonError::into_inner).push_back(b.clone()));
    validator.commit_blocks(blocks, |result| {
        let stored = pending.lock().unwrap_or_else(PoisonError::into_inner).pop_front();
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

/// A validator at the checkpoint's block, from the checkpoint's state and the stored blocks up to it (their txids and
/// last valid configuration), so that only the blocks after it are validated again. The checkpoint must match the
/// stored chain: its header hash that of the stored block, its commit hash the stored COMMIT_HASH.
pub(crate) fn resume_from_checkpoint(
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
