//! Ferrofabric's block ledger: the chain of blocks that both the orderer and the committing peer keep
//! (Fabric: `common/ledger/blkstorage`, simplified).
//!
//! # Layout
//! A store directory holds
//! - `blocks/blockfile_000000`, `blockfile_000001`, …: append-only files of records
//!   `[8-byte little-endian length][marshaled common.Block]` (the fixture format of
//!   [`ferrofabric_protoutil::records`]); a new file is started when the next record would push the current one past
//!   [`StoreOptions::max_file_size`] (a block larger than that gets a file of its own).
//! - `index/`: a sled database mapping block number → (file, offset, length), header hash → block number, each
//!   occurrence of a txid → its
//!   (block number, tx index) (a lookup returns the first in chain order, as Fabric's txid index returns the lowest
//!   block), and the chain tip (height, SHA-256 of the last header); layout in docs/FORMATS.md.
//!
//! Blocks are stored exactly as given to [`BlockStore::append`] and served byte-identical by [`BlockStore::block`].
//!
//! # Append
//! [`BlockStore::append`] accepts only the next block: its number must equal the height, its `previous_hash` must
//! equal the hash of the last header (empty for block 0) and its `data_hash` must match the envelopes (unless
//! [`StoreOptions::verify_data_hash`] is off, for writers that checked it themselves); otherwise it
//! returns an error and writes nothing. Then, in this order: the record is written to the current block file
//! (`fsync`ed under [`SyncPolicy::EveryBlock`]), the block's index entries and the new tip are applied as one
//! atomic sled batch (flushed under [`SyncPolicy::EveryBlock`]), and finally the in-memory tip and the height
//! channel are advanced. A reader therefore never sees a height whose block is not yet readable.
//!
//! # Crash guarantees
//! On [`BlockStore::open`] the index's tip is checked against the files (the last indexed record must be present and
//! hash to the stored tip; otherwise the index is discarded and rebuilt from the files, which are the source of
//! truth; an index sled itself reports as corrupt is moved aside to `index.corrupt` and rebuilt likewise). Then every byte after the last indexed record is scanned: each complete record that is a valid next
//! block (same checks as `append`) is indexed again; the first torn record (cut length prefix or body) or record
//! that is not a valid next block, and everything after it, is truncated away, and block files past that point are
//! renamed to `*.orphaned`. Opening never fails and never panics because of a bad tail (unlike Fabric bug
//! fabric#4162); it fails only on real I/O or index errors. [`BlockStore::recovery`] says what was repaired.
//!
//! - [`SyncPolicy::EveryBlock`] (default): when `append` returns `Ok`, the block survives a process crash and a
//!   power loss. A crash during `append` leaves either no trace, a torn record (dropped on open) or a complete,
//!   unindexed record (indexed on open), so the block in flight may or may not be present after restart; callers
//!   re-sending it should consult [`BlockStore::height`] first (a duplicate is refused with
//!   [`StoreError::OutOfOrder`]).
//! - [`SyncPolicy::None`]: nothing is fsynced by `append`. A process crash loses nothing that `append` acknowledged
//!   (records are in the OS page cache and are re-indexed on open, even if sled had not written its batch yet). A
//!   power loss or OS crash may lose a suffix of acknowledged blocks, but the store reopens to a consistent prefix of
//!   the chain. [`BlockStore::sync`] forces durability at a point of the caller's choosing; dropping the store syncs
//!   as well (best effort).
//!
//! One process at a time: sled locks the index directory, so a second `open` of the same directory fails.
//!
//! # Waiting for blocks
//! The height is published on a [`tokio::sync::watch`] channel: [`BlockStore::subscribe`] hands out receivers and
//! [`BlockStore::wait_for`] resolves once a block number is stored, which is what a Deliver stream blocks on.
//! A watch channel (rather than a Condvar) lets async gRPC handlers wait without tying up a thread, and any number
//! of waiters share one value without per-waiter queues.
//!
//! # Differences from Fabric
//! Length prefixes are 8-byte little-endian instead of varints, only the block-number, block-hash and txid indexes exist (no
//! (block, tx) index, no stored validation codes), transactions whose txid cannot be extracted are not
//! indexed (Fabric indexes them under the empty txid), the data hash is checked on append by default, and there is no snapshot
//! bootstrap, rollback or reset.

mod error;
mod files;
mod index;

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use ferrofabric_arena::BlockArena;
use ferrofabric_protoutil::{block_header_hash, records, MAX_RECORD};
use tokio::sync::watch;

pub use error::StoreError;
use index::{Loc, Tip};

/// When the store forces data to stable storage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyncPolicy {
    /// `fsync` the block file and flush the sled index on every `append` (survives power loss).
    #[default]
    EveryBlock,
    /// Never fsync in `append`; survives process crashes, may lose a suffix of blocks on power loss.
    None,
}

/// Options for [`BlockStore::open`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// Durability of `append`; see the crate docs.
    pub sync: SyncPolicy,
    /// Size in bytes after which a new block file is started (Fabric's `maxBlockfileSize`, 64 MiB by default).
    pub max_file_size: u64,
    /// How many of the most recently appended blocks are kept in memory for reads (0 disables). Deliver streams at
    /// the tip read these without touching the files.
    pub cache_blocks: usize,
    /// Index every transaction ID (for [`BlockStore::tx_location`]), as a peer's block store does. An orderer's
    /// ledger indexes block numbers only (Fabric's `fileledger` asks `blkstorage` for `IndexableAttrBlockNum`
    /// alone): turning this off spares it a key-value write per transaction.
    pub index_txids: bool,
    /// Check on [`BlockStore::append`] that `data_hash` matches the envelopes. A writer that assembled the block
    /// itself or has already checked it (the orderer; the committer, whose validator checks every block first) turns
    /// this off and spares a second SHA-256 over the whole block: Fabric's `blockfile_mgr.go` `addBlock` checks only
    /// the number and the previous hash. Recovery on [`BlockStore::open`] checks the data hash of every record it
    /// scans either way, since that is how a corrupt record is told from a block.
    pub verify_data_hash: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            sync: SyncPolicy::EveryBlock,
            max_file_size: 64 << 20,
            cache_blocks: 32,
            index_txids: true,
            verify_data_hash: true,
        }
    }
}

/// What [`BlockStore::open`] repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Why an existing index was discarded and rebuilt from the block files, if it was.
    pub index_discarded: Option<String>,
    /// Blocks found complete in the files but missing from the index, and indexed on open.
    pub reindexed_blocks: u64,
    /// The torn or invalid tail that was cut off, if any.
    pub truncated: Option<Truncation>,
    /// Block files after the cut (or after a gap in the numbering), renamed to `*.orphaned`.
    pub orphaned_files: Vec<PathBuf>,
}

/// A tail cut off by [`BlockStore::open`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// The block file that was truncated.
    pub path: PathBuf,
    /// Its new length: offset of the first bad record.
    pub offset: u64,
    /// How many bytes were dropped.
    pub dropped_bytes: u64,
    /// Why the record at `offset` was not accepted.
    pub reason: String,
}

/// The append side: the current block file and where the next record goes.
struct Writer {
    file: File,
    num: u32,
    path: PathBuf,
    end: u64,
    /// Set when a failed append could not be rolled back; appends are refused until reopen.
    broken: Option<String>,
    /// Earlier block files not yet synced since the writer moved on from them (only with [`SyncPolicy::None`]),
    /// and whether the directory holds a file entry not yet synced: [`BlockStore::sync`] syncs them all.
    unsynced: Unsynced,
}

/// What [`BlockStore::sync`] must sync besides the current block file.
#[derive(Default)]
struct Unsynced {
    files: Vec<(PathBuf, Arc<File>)>,
    directory: bool,
}

/// An append-only block ledger with a sled index. `Send + Sync`: appends are serialized internally, reads run
/// concurrently with each other and with appends.
///
/// Follows Fabric's `common/ledger/blkstorage/blockfile_mgr.go`; see the crate docs for format and guarantees.
pub struct BlockStore {
    blocks_dir: PathBuf,
    options: StoreOptions,
    db: sled::Db,
    writer: Mutex<Writer>,
    tip: RwLock<Tip>,
    height_tx: watch::Sender<u64>,
    readers: RwLock<HashMap<u32, Arc<File>>>,
    recent: RwLock<VecDeque<(u64, Bytes)>>,
    recovery: RecoveryReport,
}

impl std::fmt::Debug for BlockStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockStore").field("blocks_dir", &self.blocks_dir).field("tip", &*read(&self.tip)).finish()
    }
}

// The store keeps its invariants across every early return, so a poisoned lock (impossible without a panic) is
// simply taken over.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}
fn write<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

impl BlockStore {
    /// Opens (creating if needed) the store in `dir`, repairing the tail as described in the crate docs.
    ///
    /// Errors: [`StoreError::Io`] (directory, file or truncation failures, with the path), [`StoreError::Index`]
    /// (sled cannot open or write the index, e.g. another process holds it). A bad tail is repaired, not an error.
    pub fn open(dir: &Path, options: StoreOptions) -> Result<BlockStore, StoreError> {
        let blocks_dir = dir.join("blocks");
        std::fs::create_dir_all(&blocks_dir).map_err(|e| StoreError::io("creating", &blocks_dir, e))?;
        let index_dir = dir.join("index");
        let mut report = RecoveryReport::default();
        let db = open_index(&index_dir, &mut report)?;
        let (mut tip, start) = match indexed_tip(&db, &blocks_dir) {
            Ok(Some((tip, loc))) => (tip, (loc.file, loc.end())),
            Ok(None) => {
                clear_index(&db)?;
                (Tip::EMPTY, (0, 0))
            }
            Err(reason) => {
                tracing::warn!(dir = %dir.display(), %reason, "block index inconsistent with the block files; rebuilding");
                clear_index(&db)?;
                report.index_discarded = Some(reason);
                (Tip::EMPTY, (0, 0))
            }
        };
        let (num, end) = scan_tail(&db, &blocks_dir, &mut tip, start, options.index_txids, &mut report)?;
        db.flush().map_err(|e| StoreError::index("flushing after open", e))?;
        if report != RecoveryReport::default() {
            tracing::info!(dir = %dir.display(), ?report, "block store repaired on open");
        }

        let path = files::file_path(&blocks_dir, num);
        let existed = path.exists();
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| StoreError::io("opening", &path, e))?;
        file.seek(SeekFrom::Start(end)).map_err(|e| StoreError::io("seeking in", &path, e))?;
        if !existed {
            files::sync_dir(&blocks_dir)?;
        }

        let (height_tx, _) = watch::channel(tip.height);
        Ok(BlockStore {
            blocks_dir,
            options,
            db,
            writer: Mutex::new(Writer { file, num, path, end, broken: None, unsynced: Unsynced::default() }),
            tip: RwLock::new(tip),
            height_tx,
            readers: RwLock::new(HashMap::new()),
            recent: RwLock::new(VecDeque::new()),
            recovery: report,
        })
    }

    /// What `open` repaired (empty report after a clean shutdown).
    pub fn recovery(&self) -> &RecoveryReport {
        &self.recovery
    }

    /// Appends the marshaled `common.Block` `block_bytes`, stored and later served exactly as given.
    ///
    /// Errors (nothing is written): [`StoreError::InvalidBlock`] (not a block, no header, over 1 GiB),
    /// [`StoreError::OutOfOrder`] (number ≠ height), [`StoreError::PreviousHashMismatch`],
    /// [`StoreError::DataHashMismatch`] (only with [`StoreOptions::verify_data_hash`]). Errors after writing started: [`StoreError::Io`] / [`StoreError::Index`]
    /// (the record is rolled back; if even that fails, [`StoreError::Broken`] is returned by later appends until the
    /// store is reopened).
    pub fn append(&self, block_bytes: Bytes) -> Result<(), StoreError> {
        let mut w = lock(&self.writer);
        if let Some(reason) = &w.broken {
            return Err(StoreError::Broken(reason.clone()));
        }
        let tip = *read(&self.tip);
        let checked = index::check_next(&block_bytes, &tip, self.options.index_txids, self.options.verify_data_hash)?;
        let len = block_bytes.len() as u64;
        if w.end > 0 && w.end + 8 + len > self.options.max_file_size {
            self.roll(&mut w)?;
        }
        let loc = Loc { file: w.num, offset: w.end, len };
        let sync = self.options.sync == SyncPolicy::EveryBlock;

        let written = w
            .file
            .write_all(&len.to_le_bytes())
            .and_then(|()| w.file.write_all(&block_bytes))
            .map_err(|e| (StoreError::io("writing block record to", &w.path, e), false))
            .and_then(|()| {
                if sync {
                    // An fsync failure leaves the page cache state unknown: roll back and refuse further appends.
                    w.file.sync_data().map_err(|e| (StoreError::io("syncing", &w.path, e), true))
                } else {
                    Ok(())
                }
            });
        if let Err((e, poison)) = written {
            self.roll_back(&mut w, loc.offset, poison.then(|| e.to_string()));
            return Err(e);
        }
        let new_tip = match index::index_block(&self.db, &checked, &loc) {
            Ok(t) => t,
            Err(e) => {
                self.roll_back(&mut w, loc.offset, None);
                return Err(e);
            }
        };
        if sync {
            if let Err(e) = self.db.flush() {
                // The batch is applied in memory but not durable; the files hold the record, so a reopen re-indexes.
                let e = StoreError::index(format!("flushing the index after block {}", checked.number), e);
                w.broken = Some(e.to_string());
                return Err(e);
            }
        }
        w.end = loc.end();

        if self.options.cache_blocks > 0 {
            let mut recent = write(&self.recent);
            if recent.len() >= self.options.cache_blocks {
                recent.pop_front();
            }
            recent.push_back((checked.number, block_bytes));
        }
        *write(&self.tip) = new_tip;
        self.height_tx.send_replace(new_tip.height);
        Ok(())
    }

    /// Starts the next block file.
    fn roll(&self, w: &mut Writer) -> Result<(), StoreError> {
        let num = w.num.checked_add(1).ok_or_else(|| StoreError::Broken("block file numbers exhausted".into()))?;
        let path = files::file_path(&self.blocks_dir, num);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| StoreError::io("creating", &path, e))?;
        if self.options.sync == SyncPolicy::EveryBlock {
            files::sync_dir(&self.blocks_dir)?;
        }
        let old = std::mem::replace(&mut w.file, file);
        let old_path = std::mem::replace(&mut w.path, path);
        if self.options.sync == SyncPolicy::None {
            // The file left behind holds blocks not yet durable: the next sync covers it and the new entry.
            w.unsynced.files.push((old_path, Arc::new(old)));
            w.unsynced.directory = true;
        }
        w.num = num;
        w.end = 0;
        w.broken = None;
        Ok(())
    }

    /// Cuts the current file back to `offset` after a failed append; marks the writer broken if that fails or if
    /// `poison` says the failure leaves the file in an unknown state.
    fn roll_back(&self, w: &mut Writer, offset: u64, poison: Option<String>) {
        let res = w.file.set_len(offset).and_then(|()| w.file.seek(SeekFrom::Start(offset)).map(|_| ()));
        if let Err(e) = res {
            tracing::error!(path = %w.path.display(), offset, error = %e, "cannot roll back a failed block append");
            w.broken = Some(format!("rolling back {} to offset {offset} failed: {e}", w.path.display()));
        } else if let Some(reason) = poison {
            w.broken = Some(reason);
        }
    }

    /// Forces everything appended so far to stable storage (block file fsync + index flush). Only needed with
    /// [`SyncPolicy::None`]. Errors: [`StoreError::Io`], [`StoreError::Index`].
    ///
    /// Appends go on while the files are synced: the writer's lock is held only to take the files to sync, so a
    /// sync of many unsynced blocks (a committer's checkpoint) does not stall the blocks behind it. Everything
    /// appended before the call is durable when it returns.
    pub fn sync(&self) -> Result<(), StoreError> {
        let (current, unsynced) = {
            let mut w = lock(&self.writer);
            let current = w.file.try_clone().map_err(|e| StoreError::io("duplicating the handle of", &w.path, e))?;
            ((w.path.clone(), current), std::mem::take(&mut w.unsynced))
        };
        let synced = unsynced
            .files
            .iter()
            .map(|(path, f)| (path, &**f))
            .chain(std::iter::once((&current.0, &current.1)))
            .try_for_each(|(path, f)| f.sync_data().map_err(|e| StoreError::io("syncing", path, e)))
            .and_then(|()| if unsynced.directory { files::sync_dir(&self.blocks_dir) } else { Ok(()) });
        if let Err(e) = synced {
            // Keep what is still owed to the next sync.
            let mut w = lock(&self.writer);
            w.unsynced.directory |= unsynced.directory;
            let later = std::mem::take(&mut w.unsynced.files);
            w.unsynced.files = unsynced.files.into_iter().chain(later).collect();
            return Err(e);
        }
        self.db.flush().map_err(|e| StoreError::index("flushing", e))?;
        Ok(())
    }

    /// Number of blocks stored (the next block number to append). Fabric: `BlockchainInfo.Height`.
    pub fn height(&self) -> u64 {
        read(&self.tip).height
    }

    /// SHA-256 of the last stored header (Fabric's `protoutil.BlockHeaderHash`, `BlockchainInfo.CurrentBlockHash`):
    /// the `previous_hash` the next block must carry. `None` while the store is empty.
    pub fn last_header_hash(&self) -> Option<[u8; 32]> {
        read(&self.tip).last_hash
    }

    /// The original bytes of block `number`, or `None` if `number >= height()`. Reads the record with a
    /// positional read (or from the in-memory cache of recent blocks) and checks its length prefix.
    ///
    /// Errors: [`StoreError::CorruptIndex`] (no or bad index entry below the height), [`StoreError::CorruptRecord`]
    /// (the file is shorter than the indexed record or its length prefix differs), [`StoreError::Io`].
    pub fn block(&self, number: u64) -> Result<Option<Bytes>, StoreError> {
        if number >= self.height() {
            return Ok(None);
        }
        if let Some(b) = self.cached(number) {
            return Ok(Some(b));
        }
        let loc = self.loc(number)?;
        self.read_record(&loc).map(Some)
    }

    fn cached(&self, number: u64) -> Option<Bytes> {
        let recent = read(&self.recent);
        let first = recent.front()?.0;
        let i = usize::try_from(number.checked_sub(first)?).ok()?;
        recent.get(i).filter(|(n, _)| *n == number).map(|(_, b)| b.clone())
    }

    fn loc(&self, number: u64) -> Result<Loc, StoreError> {
        let v = self
            .db
            .get(index::block_key(number))
            .map_err(|e| StoreError::index(format!("looking up block {number}"), e))?
            .ok_or_else(|| StoreError::CorruptIndex(format!("no entry for block {number} below the height")))?;
        index::decode_loc(number, &v)
    }

    fn reader(&self, num: u32) -> Result<Arc<File>, StoreError> {
        if let Some(f) = read(&self.readers).get(&num) {
            return Ok(f.clone());
        }
        let path = files::file_path(&self.blocks_dir, num);
        let f = Arc::new(File::open(&path).map_err(|e| StoreError::io("opening", &path, e))?);
        Ok(write(&self.readers).entry(num).or_insert(f).clone())
    }

    fn read_record(&self, loc: &Loc) -> Result<Bytes, StoreError> {
        let path = || files::file_path(&self.blocks_dir, loc.file);
        if loc.len > MAX_RECORD {
            return Err(StoreError::CorruptIndex(format!(
                "record at {}:{} has indexed length {} over the limit",
                path().display(),
                loc.offset,
                loc.len
            )));
        }
        let file = self.reader(loc.file)?;
        let mut buf = vec![0u8; 8 + loc.len as usize];
        files::read_exact_at(&file, &mut buf, loc.offset).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                StoreError::CorruptRecord {
                    path: path(),
                    offset: loc.offset,
                    reason: format!("file ends before the end of the {}-byte record", 8 + loc.len),
                }
            } else {
                StoreError::io("reading", path(), e)
            }
        })?;
        let mut prefix = [0u8; 8];
        prefix.copy_from_slice(&buf[..8]);
        let stored = u64::from_le_bytes(prefix);
        if stored != loc.len {
            return Err(StoreError::CorruptRecord {
                path: path(),
                offset: loc.offset,
                reason: format!("length prefix {stored} but the index says {}", loc.len),
            });
        }
        Ok(Bytes::from(buf).slice(8..))
    }

    /// Iterates over the blocks in `range` (clipped to the height at the time of the call), in order, yielding each
    /// block's original bytes. After an error the iterator ends.
    pub fn blocks(&self, range: impl RangeBounds<u64>) -> Blocks<'_> {
        let next = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let height = self.height();
        let end = match range.end_bound() {
            Bound::Included(&e) => e.saturating_add(1),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => height,
        }
        .min(height);
        Blocks { store: self, next, end }
    }

    /// Where the transaction `txid` is: `(block number, index in the block)` of its first occurrence in the chain
    /// (Fabric's txid index; later duplicates, which the committer marks DUPLICATE_TXID, do not move it). `None`
    /// also for the transactions of blocks appended while [`StoreOptions::index_txids`] was off.
    ///
    /// Errors: [`StoreError::Index`], [`StoreError::CorruptIndex`].
    pub fn tx_location(&self, txid: &str) -> Result<Option<(u64, u32)>, StoreError> {
        index::lookup_tx(&self.db, txid)
    }

    /// The number of the block whose header's SHA-256 (Fabric's `protoutil.BlockHeaderHash`) is `hash`; `None` for
    /// a hash no stored block has (Fabric's block-hash index, `GetBlockByHash`).
    ///
    /// Errors: [`StoreError::Index`], [`StoreError::CorruptIndex`].
    pub fn block_number_by_hash(&self, hash: &[u8]) -> Result<Option<u64>, StoreError> {
        index::lookup_hash(&self.db, hash)
    }

    /// A receiver of the height (number of stored blocks); it changes after each `append`, once the block is
    /// readable.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.height_tx.subscribe()
    }

    /// Resolves once block `number` is stored (height > `number`), returning the height seen. Cancel-safe.
    ///
    /// Errors: [`StoreError::Closed`] if the store is dropped while waiting.
    pub async fn wait_for(&self, number: u64) -> Result<u64, StoreError> {
        let mut rx = self.height_tx.subscribe();
        let height = rx.wait_for(|h| *h > number).await.map_err(|_| StoreError::Closed)?;
        Ok(*height)
    }
}

impl Drop for BlockStore {
    fn drop(&mut self) {
        if let Err(e) = self.sync() {
            tracing::warn!(error = %e, "block store sync on drop failed");
        }
    }
}

/// Iterator returned by [`BlockStore::blocks`]: `Result<Bytes, StoreError>` per block, in order.
#[derive(Debug)]
pub struct Blocks<'a> {
    store: &'a BlockStore,
    next: u64,
    end: u64,
}

impl Iterator for Blocks<'_> {
    type Item = Result<Bytes, StoreError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.end {
            return None;
        }
        let n = self.next;
        self.next += 1;
        match self.store.block(n) {
            Ok(Some(b)) => Some(Ok(b)),
            Ok(None) => {
                self.next = self.end;
                None
            }
            Err(e) => {
                self.next = self.end;
                Some(Err(e))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.end.saturating_sub(self.next)).unwrap_or(usize::MAX);
        (0, Some(n))
    }
}

/// Opens (or creates) the sled index. A store closed just before (a node restarted in the same process) may still
/// hold the index's file lock for up to one flush interval after its last handle is dropped, because sled's flusher
/// thread releases it: wait up to [`INDEX_LOCK_WAIT`] for it rather than fail. A lock held longer (another live
/// process) is still an error.
fn sled_open(index_dir: &Path) -> sled::Result<sled::Db> {
    let deadline = std::time::Instant::now() + INDEX_LOCK_WAIT;
    loop {
        match sled::Config::new().path(index_dir).cache_capacity(64 << 20).flush_every_ms(Some(500)).open() {
            Err(sled::Error::Io(e)) if is_lock_held(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            result => return result,
        }
    }
}

/// Whether sled failed because another handle holds the index's file lock. sled reports it as an `Other` I/O error
/// whose message carries the OS error ("could not acquire lock on ...: WouldBlock"), not as `WouldBlock` itself.
fn is_lock_held(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock || e.to_string().contains("could not acquire lock")
}

/// See [`sled_open`]: many of sled's 500 ms flush intervals, because on a loaded machine its flusher thread may be
/// scheduled late.
const INDEX_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(15);

/// Opens the sled index. An index sled reports as corrupt is derived data: it is moved aside to `index.corrupt*`
/// and a fresh one is rebuilt from the block files, so a damaged index cannot make every restart fail. Other
/// failures (I/O, the directory locked by another process) are errors.
fn open_index(index_dir: &Path, report: &mut RecoveryReport) -> Result<sled::Db, StoreError> {
    let op = || format!("opening {}", index_dir.display());
    match sled_open(index_dir) {
        Ok(db) => Ok(db),
        Err(e @ (sled::Error::Corruption { .. } | sled::Error::Unsupported(_) | sled::Error::ReportableBug(_))) => {
            let mut aside = index_dir.with_extension("corrupt");
            let mut i = 1;
            while aside.exists() {
                aside = index_dir.with_extension(format!("corrupt.{i}"));
                i += 1;
            }
            tracing::warn!(index = %index_dir.display(), aside = %aside.display(), error = %e,
                "block index is corrupt; moving it aside and rebuilding from the block files");
            std::fs::rename(index_dir, &aside).map_err(|io| StoreError::io("moving aside", index_dir, io))?;
            report.index_discarded = Some(format!("sled reported {e}; old index moved to {}", aside.display()));
            sled_open(index_dir).map_err(|e| StoreError::index(op(), e))
        }
        Err(e) => Err(StoreError::index(op(), e)),
    }
}

/// Removes every index entry (used before rebuilding from the files) and stamps the format version.
fn clear_index(db: &sled::Db) -> Result<(), StoreError> {
    db.clear().map_err(|e| StoreError::index("clearing the index", e))?;
    db.insert(index::VERSION_KEY, &index::FORMAT_VERSION.to_be_bytes())
        .map_err(|e| StoreError::index("writing the index version", e))?;
    Ok(())
}

/// The tip recorded in the index and the location of its last block, if the index is consistent with the files.
/// `Ok(None)`: no tip (empty or fresh index). `Err(reason)`: the index must be rebuilt.
fn indexed_tip(db: &sled::Db, blocks_dir: &Path) -> Result<Option<(Tip, Loc)>, String> {
    let tip = match db.get(index::TIP_KEY).map_err(|e| format!("reading the tip: {e}"))? {
        Some(v) => index::decode_tip(&v).map_err(|e| e.to_string())?,
        None => return Ok(None),
    };
    let version = db.get(index::VERSION_KEY).map_err(|e| format!("reading the version: {e}"))?;
    if version.as_deref() != Some(&index::FORMAT_VERSION.to_be_bytes()[..]) {
        return Err(format!("index format version {version:?}, expected {}", index::FORMAT_VERSION));
    }
    let last = tip.height - 1;
    let v = db
        .get(index::block_key(last))
        .map_err(|e| format!("reading the location of block {last}: {e}"))?
        .ok_or_else(|| format!("no location for the tip block {last}"))?;
    let loc = index::decode_loc(last, &v).map_err(|e| e.to_string())?;
    if loc.len > MAX_RECORD {
        return Err(format!("tip block {last} has indexed length {}", loc.len));
    }
    // Read the tip block back: the index may be ahead of the files (lost file data under SyncPolicy::None, or a
    // replaced directory).
    let path = files::file_path(blocks_dir, loc.file);
    let file = File::open(&path).map_err(|e| format!("opening {}: {e}", path.display()))?;
    let mut buf = vec![0u8; 8 + loc.len as usize];
    files::read_exact_at(&file, &mut buf, loc.offset)
        .map_err(|e| format!("reading tip block {last} at {}:{}: {e}", path.display(), loc.offset))?;
    if buf[..8] != loc.len.to_le_bytes() {
        return Err(format!("tip block {last} at {}:{} has a different length prefix", path.display(), loc.offset));
    }
    let arena = BlockArena::decode(Bytes::from(buf).slice(8..)).map_err(|e| format!("tip block {last}: {e}"))?;
    if arena.number() != last || Some(block_header_hash(arena.header())) != tip.last_hash {
        return Err(format!("block at the tip location is not block {last} with the recorded header hash"));
    }
    Ok(Some((tip, loc)))
}

/// Scans the block files from `start` (file, offset) on, indexing every valid next block and cutting off the first
/// torn or invalid record and everything after it. Returns where the next record goes.
fn scan_tail(
    db: &sled::Db,
    blocks_dir: &Path,
    tip: &mut Tip,
    start: (u32, u64),
    index_txids: bool,
    report: &mut RecoveryReport,
) -> Result<(u32, u64), StoreError> {
    let present = files::list(blocks_dir)?;
    let (mut num, mut offset) = start;
    loop {
        let path = files::file_path(blocks_dir, num);
        if !present.contains(&num) {
            // Only the very first file of an empty store may be missing (the index check read the tip's file).
            orphan_after(blocks_dir, &present, num, report)?;
            return Ok((num, 0));
        }
        let mut file = OpenOptions::new().read(true).open(&path).map_err(|e| StoreError::io("opening", &path, e))?;
        let file_len = file.metadata().map_err(|e| StoreError::io("inspecting", &path, e))?.len();
        if file_len < offset {
            return Err(StoreError::CorruptRecord {
                path,
                offset,
                reason: format!("file is only {file_len} bytes but the index places the tip beyond"),
            });
        }
        file.seek(SeekFrom::Start(offset)).map_err(|e| StoreError::io("seeking in", &path, e))?;
        let mut tail = Vec::new();
        file.read_to_end(&mut tail).map_err(|e| StoreError::io("reading", &path, e))?;
        drop(file);

        let mut cut: Option<(u64, String)> = None;
        let mut end = offset;
        for rec in records(Bytes::from(tail)) {
            match rec {
                Ok((rel, body)) => {
                    let at = offset + rel;
                    match index::check_next(&body, tip, index_txids, true) {
                        Ok(checked) => {
                            let loc = Loc { file: num, offset: at, len: body.len() as u64 };
                            *tip = index::index_block(db, &checked, &loc)?;
                            report.reindexed_blocks += 1;
                            end = loc.end();
                        }
                        Err(e) => {
                            cut = Some((at, e.to_string()));
                            break;
                        }
                    }
                }
                Err(e) => {
                    cut = Some((offset + e.offset, e.reason));
                    break;
                }
            }
        }

        if let Some((at, reason)) = cut {
            tracing::warn!(path = %path.display(), offset = at, %reason, "cutting off the block file tail");
            let f = OpenOptions::new().write(true).open(&path).map_err(|e| StoreError::io("opening", &path, e))?;
            f.set_len(at).and_then(|()| f.sync_all()).map_err(|e| StoreError::io("truncating", &path, e))?;
            report.truncated = Some(Truncation { path, offset: at, dropped_bytes: file_len - at, reason });
            orphan_after(blocks_dir, &present, num, report)?;
            return Ok((num, at));
        }
        if present.contains(&(num + 1)) {
            num += 1;
            offset = 0;
            continue;
        }
        orphan_after(blocks_dir, &present, num, report)?;
        return Ok((num, end));
    }
}

/// Renames block files numbered above `num` out of the way (`*.orphaned`): they cannot continue the chain.
fn orphan_after(blocks_dir: &Path, present: &[u32], num: u32, report: &mut RecoveryReport) -> Result<(), StoreError> {
    let mut renamed = false;
    for &n in present.iter().filter(|&&n| n > num) {
        let from = files::file_path(blocks_dir, n);
        let mut to = from.with_extension("orphaned");
        let mut i = 1;
        while to.exists() {
            to = from.with_extension(format!("orphaned.{i}"));
            i += 1;
        }
        tracing::warn!(from = %from.display(), to = %to.display(), "block file does not continue the chain");
        std::fs::rename(&from, &to).map_err(|e| StoreError::io("renaming", &from, e))?;
        report.orphaned_files.push(to);
        renamed = true;
    }
    if renamed {
        files::sync_dir(blocks_dir)?;
    }
    Ok(())
}
