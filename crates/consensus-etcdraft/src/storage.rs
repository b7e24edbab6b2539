//! The Raft log of one channel: raft-engine under `Consensus.WALDir/<channel>` for entries and the hard
//! state, snapshot files under `Consensus.SnapDir/<channel>` (Fabric `orderer/consensus/etcdraft/storage.go`
//! keeps the same split: an etcd WAL plus a snapshotter directory).
//!
//! A snapshot file is the protobuf `eraftpb.Snapshot` (metadata: index, term, voters; data: the marshaled
//! block that was the ledger tip at that index, as Fabric stores it) named `<term>-<index>.snap` in hex. It
//! is written (temp file, fsync, rename, fsync of the directory) *before* the log is compacted, so a crash
//! between the two leaves a snapshot plus entries that overlap it, which [`WalStorage::open`] accepts.
//!
//! A log that was never written starts empty at index 0 with the voters given by the channel configuration:
//! every consenter of a new channel starts from the same state, as Raft requires (a consenter added to a
//! running channel starts from the genesis voters too and replays the `ConfChange`s, or gets a snapshot).
//! The voters are kept up to date under a key of their own whenever a `ConfChange` is applied or a snapshot
//! installed.
//!
//! The newest entries written are also kept in memory ([`RECENT_ENTRY_BYTES`]): raft-rs reads every entry back
//! right after persisting it (to apply it once committed, to send it to followers, and for its term), and
//! raft-engine answers each such read from its file, with a read, a checksum and a decode of the whole block.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use protobuf::Message as _;
use raft::prelude::{ConfState, Entry, HardState, Snapshot, SnapshotMetadata};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};
use raft_engine::{Command, Engine, LogBatch, MessageExt, ReadableSize};

/// raft-engine keeps one Raft group per engine here; its ID is fixed.
const GROUP: u64 = 1;
/// Key of the persisted `HardState`.
const HARD_STATE_KEY: &[u8] = b"hard_state";
/// Key of the persisted `ConfState` (the voters after the last applied configuration change).
const CONF_STATE_KEY: &[u8] = b"conf_state";
/// Snapshot files kept on disk (the newest ones).
const SNAPSHOTS_KEPT: usize = 2;
/// Encoded bytes of the newest entries kept in memory (at least the newest entry is kept whatever its size):
/// 32 MiB is 80 blocks of 100 envelopes of 4 KB, more than the entries in flight between persisting and
/// applying, while the ledger holds every block anyway.
const RECENT_ENTRY_BYTES: usize = 32 << 20;

/// Tells raft-engine how to read the index of an `eraftpb.Entry`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EntryExt;

impl MessageExt for EntryExt {
    type Entry = Entry;
    fn index(e: &Entry) -> u64 {
        e.index
    }
}

/// Errors of the Raft storage, reported to the operator as the channel's failure reason.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WalError {
    /// raft-engine failed.
    #[error("raft WAL: {0}")]
    Engine(#[from] raft_engine::Error),
    /// A snapshot file could not be written or read.
    #[error("raft snapshot {path}: {source}")]
    Snapshot {
        /// The file or directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// Encoding a snapshot failed (never for well-formed values).
    #[error("raft snapshot encoding: {0}")]
    Encode(#[from] protobuf::ProtobufError),
    /// A requested entry is not in the log.
    #[error("raft WAL: {0}")]
    Raft(#[from] raft::Error),
}

fn snap_err(path: &Path, source: std::io::Error) -> WalError {
    WalError::Snapshot { path: path.to_path_buf(), source }
}

/// raft-rs [`Storage`] over raft-engine and snapshot files. Owned by the channel's Raft thread.
pub(crate) struct WalStorage {
    engine: Arc<Engine>,
    hard_state: HardState,
    conf_state: ConfState,
    snapshot: Snapshot,
    snap_dir: PathBuf,
    recent: RecentEntries,
}

/// The newest entries of the log, consecutive by index, with their encoded sizes; a copy of the log's tail
/// that never disagrees with it: staging entries replaces the same suffix here, and a snapshot or a failed
/// write empties it.
#[derive(Debug, Default)]
struct RecentEntries {
    entries: VecDeque<(Entry, usize)>,
    bytes: usize,
}

impl RecentEntries {
    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// Adds `new` (consecutive by index), dropping any kept entry at or after `new`'s first index, or every
    /// kept entry if `new` does not follow them; then the oldest ones beyond [`RECENT_ENTRY_BYTES`].
    fn extend(&mut self, new: &[Entry]) {
        let Some(first) = new.first().map(|e| e.index) else { return };
        while let Some((_, size)) = self.entries.pop_back_if(|(e, _)| e.index >= first) {
            self.bytes -= size;
        }
        if self.entries.back().is_some_and(|(e, _)| e.index + 1 != first) {
            self.clear();
        }
        for e in new {
            let size = e.compute_size() as usize;
            self.bytes += size;
            self.entries.push_back((e.clone(), size));
        }
        while self.bytes > RECENT_ENTRY_BYTES && self.entries.len() > 1 {
            let Some((_, size)) = self.entries.pop_front() else { break };
            self.bytes -= size;
        }
    }

    /// The kept entry at `index`.
    fn get(&self, index: u64) -> Option<&Entry> {
        let first = self.entries.front()?.0.index;
        let at = usize::try_from(index.checked_sub(first)?).ok()?;
        self.entries.get(at).map(|(e, _)| e)
    }

    /// Entries `low..high` if all are kept, cut like raft-engine's `fetch_entries_to`: the first one always,
    /// then each one while the encoded bytes so far stay within `max`.
    fn range(&self, low: u64, high: u64, max: Option<usize>) -> Option<Vec<Entry>> {
        self.get(high.checked_sub(1)?)?;
        let first = self.entries.front()?.0.index;
        let from = usize::try_from(low.checked_sub(first)?).ok()?;
        let count = usize::try_from(high.checked_sub(low)?).ok()?;
        let mut out = Vec::with_capacity(count.min(1024));
        let mut total = 0usize;
        for (e, size) in self.entries.range(from..from + count) {
            total += size;
            if !out.is_empty() && max.is_some_and(|m| total > m) {
                break;
            }
            out.push(e.clone());
        }
        Some(out)
    }
}

impl std::fmt::Debug for WalStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalStorage")
            .field("hard_state", &self.hard_state)
            .field("snapshot_index", &self.snapshot_index())
            .finish_non_exhaustive()
    }
}

/// Reads the newest parseable snapshot file of `dir` (files `<term>-<index>.snap`).
fn load_latest_snapshot(dir: &Path) -> Result<Option<Snapshot>, WalError> {
    let mut names: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| snap_err(dir, e))? {
        let entry = entry.map_err(|e| snap_err(dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".snap") else { continue };
        let Some((_, index)) = stem.split_once('-') else { continue };
        if let Ok(index) = u64::from_str_radix(index, 16) {
            names.push((index, entry.path()));
        }
    }
    names.sort();
    for (_, path) in names.iter().rev() {
        let raw = std::fs::read(path).map_err(|e| snap_err(path, e))?;
        match Snapshot::parse_from_bytes(&raw) {
            Ok(s) => return Ok(Some(s)),
            // A torn file from a crash during an earlier write: the previous snapshot still holds.
            Err(e) => tracing::warn!(path = %path.display(), error = %e, "skipping an unreadable Raft snapshot"),
        }
    }
    Ok(None)
}

impl WalStorage {
    /// Opens (or creates) the log in `wal_dir` and the snapshots in `snap_dir`. `voters` are the Raft IDs to
    /// start with when neither the log nor a snapshot records any: those of the channel's genesis
    /// configuration, which every log starts from (a consenter added later replays the `ConfChange`s from
    /// there, or receives a snapshot).
    ///
    /// Errors: directories that cannot be created or read, a corrupt WAL (raft-engine tolerates a torn tail).
    pub(crate) fn open(wal_dir: &Path, snap_dir: &Path, voters: &[u64]) -> Result<WalStorage, WalError> {
        std::fs::create_dir_all(wal_dir).map_err(|e| snap_err(wal_dir, e))?;
        std::fs::create_dir_all(snap_dir).map_err(|e| snap_err(snap_dir, e))?;
        let config = raft_engine::Config {
            dir: wal_dir.to_string_lossy().into_owned(),
            target_file_size: ReadableSize::mb(8),
            purge_threshold: ReadableSize::mb(64),
            // No LZ4: entries are blocks of signed envelopes, and compressing them cost the leader ~4% of its CPU
            // for a smaller fsync; Fabric's etcdraft WAL does not compress either.
            batch_compression_threshold: ReadableSize(0),
            ..raft_engine::Config::default()
        };
        let engine = Arc::new(Engine::open(config)?);
        let mut hard_state: HardState = engine.get_message(GROUP, HARD_STATE_KEY)?.unwrap_or_default();
        let mut snapshot = load_latest_snapshot(snap_dir)?.unwrap_or_default();
        let conf_state = match engine.get_message::<ConfState>(GROUP, CONF_STATE_KEY)? {
            Some(cs) => cs,
            None if snapshot.get_metadata().index > 0 => snapshot.get_metadata().get_conf_state().clone(),
            None => ConfState { voters: voters.to_vec(), ..ConfState::default() },
        };
        snapshot.mut_metadata().set_conf_state(conf_state.clone());
        let snap_index = snapshot.get_metadata().index;
        let stale = match (engine.first_index(GROUP), engine.last_index(GROUP)) {
            (Some(first), Some(last)) => last < snap_index || first > snap_index + 1,
            _ => false,
        };
        if stale {
            // A snapshot was installed but the crash came before the old entries were dropped: they no
            // longer connect to the snapshot, so they go now.
            let mut batch = LogBatch::default();
            batch.add_command(GROUP, Command::Clean);
            engine.write(&mut batch, true)?;
            let mut batch = LogBatch::default();
            batch.put_message(GROUP, HARD_STATE_KEY.to_vec(), &hard_state)?;
            batch.put_message(GROUP, CONF_STATE_KEY.to_vec(), &conf_state)?;
            engine.write(&mut batch, true)?;
        }
        if hard_state.commit < snap_index {
            hard_state.commit = snap_index;
        }
        if hard_state.term < snapshot.get_metadata().term {
            hard_state.term = snapshot.get_metadata().term;
        }
        Ok(WalStorage {
            engine,
            hard_state,
            conf_state,
            snapshot,
            snap_dir: snap_dir.to_path_buf(),
            recent: RecentEntries::default(),
        })
    }

    /// Index of the newest snapshot (0 when there is none).
    pub(crate) fn snapshot_index(&self) -> u64 {
        self.snapshot.get_metadata().index
    }

    /// The newest snapshot (empty data when there is none).
    pub(crate) fn latest_snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The voters as last applied.
    pub(crate) fn conf_state(&self) -> &ConfState {
        &self.conf_state
    }

    /// Records the voters after an applied configuration change (synced).
    ///
    /// Errors: I/O.
    pub(crate) fn set_conf_state(&mut self, cs: ConfState) -> Result<(), WalError> {
        let mut batch = LogBatch::default();
        batch.put_message(GROUP, CONF_STATE_KEY.to_vec(), &cs)?;
        self.engine.write(&mut batch, true)?;
        self.snapshot.mut_metadata().set_conf_state(cs.clone());
        self.conf_state = cs;
        Ok(())
    }

    /// The persisted hard state.
    pub(crate) fn hard_state(&self) -> &HardState {
        &self.hard_state
    }

    /// Adds `entries` to `batch` (entries at or after an index already in the log replace the old suffix), and
    /// to the entries kept in memory.
    pub(crate) fn stage_entries(&mut self, batch: &mut LogBatch, entries: &[Entry]) -> Result<(), WalError> {
        if !entries.is_empty() {
            batch.add_entries::<EntryExt>(GROUP, entries)?;
            self.recent.extend(entries);
        }
        Ok(())
    }

    /// Adds the hard state `hs` to `batch`, and remembers it.
    pub(crate) fn stage_hard_state(&mut self, batch: &mut LogBatch, hs: HardState) -> Result<(), WalError> {
        batch.put_message(GROUP, HARD_STATE_KEY.to_vec(), &hs)?;
        self.hard_state = hs;
        Ok(())
    }

    /// Records a new commit index (from a light ready) in `batch`.
    pub(crate) fn stage_commit(&mut self, batch: &mut LogBatch, commit: u64) -> Result<(), WalError> {
        let mut hs = self.hard_state.clone();
        hs.commit = commit;
        self.stage_hard_state(batch, hs)
    }

    /// Writes `batch`, with `fdatasync` if `sync`. After a failure the entries kept in memory are forgotten,
    /// since the log may not hold the ones just staged.
    pub(crate) fn write(&mut self, batch: &mut LogBatch, sync: bool) -> Result<(), WalError> {
        if !batch.is_empty() {
            if let Err(e) = self.engine.write(batch, sync) {
                self.recent.clear();
                return Err(e.into());
            }
        }
        Ok(())
    }

    /// Installs a snapshot received from the leader: the file is written, every entry is dropped, the
    /// hard state moves to the snapshot's index and term and the voters become the snapshot's.
    ///
    /// Errors: I/O.
    pub(crate) fn apply_snapshot(&mut self, snapshot: Snapshot) -> Result<(), WalError> {
        self.write_snapshot_file(&snapshot)?;
        let meta = snapshot.get_metadata().clone();
        let mut batch = LogBatch::default();
        batch.add_command(GROUP, Command::Clean);
        self.recent.clear();
        self.engine.write(&mut batch, true)?;
        let mut hs = self.hard_state.clone();
        hs.commit = meta.index;
        hs.term = hs.term.max(meta.term);
        let mut batch = LogBatch::default();
        self.stage_hard_state(&mut batch, hs)?;
        self.conf_state = meta.get_conf_state().clone();
        batch.put_message(GROUP, CONF_STATE_KEY.to_vec(), &self.conf_state)?;
        self.engine.write(&mut batch, true)?;
        self.snapshot = snapshot;
        Ok(())
    }

    /// Takes a snapshot at the applied entry `index` whose ledger tip is the block `block`, then compacts
    /// the log so that `keep` entries before `index` stay available to slightly lagging followers.
    ///
    /// Errors: `index` is not in the log, I/O.
    pub(crate) fn create_snapshot(&mut self, index: u64, block: Bytes, keep: u64) -> Result<(), WalError> {
        if index <= self.snapshot_index() {
            return Ok(());
        }
        let term = self.term(index)?;
        let mut snapshot = Snapshot { data: block, ..Snapshot::default() };
        let meta = SnapshotMetadata { index, term, ..SnapshotMetadata::default() };
        snapshot.set_metadata(meta);
        snapshot.mut_metadata().set_conf_state(self.conf_state.clone());
        self.write_snapshot_file(&snapshot)?;
        self.snapshot = snapshot;
        let compact_to = index.saturating_sub(keep).max(1);
        let mut batch = LogBatch::default();
        batch.add_command(GROUP, Command::Compact { index: compact_to });
        self.engine.write(&mut batch, false)?;
        // Only files whose every entry is compacted are removed; errors here leave garbage, not damage.
        if let Err(e) = self.engine.purge_expired_files() {
            tracing::warn!(error = %e, "raft-engine purge failed");
        }
        Ok(())
    }

    fn write_snapshot_file(&self, snapshot: &Snapshot) -> Result<(), WalError> {
        let meta = snapshot.get_metadata();
        let name = format!("{:016x}-{:016x}.snap", meta.term, meta.index);
        let path = self.snap_dir.join(&name);
        let tmp = self.snap_dir.join(format!("{name}.tmp"));
        let bytes = snapshot.write_to_bytes()?;
        {
            let mut f = File::create(&tmp).map_err(|e| snap_err(&tmp, e))?;
            f.write_all(&bytes).map_err(|e| snap_err(&tmp, e))?;
            f.sync_all().map_err(|e| snap_err(&tmp, e))?;
        }
        std::fs::rename(&tmp, &path).map_err(|e| snap_err(&path, e))?;
        if let Ok(dir) = File::open(&self.snap_dir) {
            let _ = dir.sync_all();
        }
        self.prune_snapshot_files();
        Ok(())
    }

    fn prune_snapshot_files(&self) {
        let Ok(read) = std::fs::read_dir(&self.snap_dir) else { return };
        let mut files: Vec<(u64, PathBuf)> = read
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let index = name.strip_suffix(".snap")?.split_once('-')?.1.to_owned();
                Some((u64::from_str_radix(&index, 16).ok()?, e.path()))
            })
            .collect();
        files.sort();
        let excess = files.len().saturating_sub(SNAPSHOTS_KEPT);
        for (_, path) in files.into_iter().take(excess) {
            let _ = std::fs::remove_file(path);
        }
    }

    fn engine_first(&self) -> Option<u64> {
        self.engine.first_index(GROUP)
    }

    fn engine_last(&self) -> Option<u64> {
        self.engine.last_index(GROUP)
    }
}

fn unavailable() -> raft::Error {
    raft::Error::Store(StorageError::Unavailable)
}

impl Storage for WalStorage {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(self.hard_state.clone(), self.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first_index()? {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if low >= high {
            return Ok(Vec::new());
        }
        let max = max_size.into().map(|m| usize::try_from(m).unwrap_or(usize::MAX));
        if let Some(kept) = self.recent.range(low, high, max) {
            return Ok(kept);
        }
        let mut out = Vec::with_capacity(usize::try_from(high - low).unwrap_or(0).min(1024));
        self.engine.fetch_entries_to::<EntryExt>(GROUP, low, high, max, &mut out).map_err(|e| {
            tracing::error!(low, high, error = %e, "raft WAL read failed");
            unavailable()
        })?;
        Ok(out)
    }

    fn term(&self, idx: u64) -> raft::Result<u64> {
        let meta = self.snapshot.get_metadata();
        if idx == meta.index {
            return Ok(meta.term);
        }
        if idx < self.first_index()? {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if idx > self.last_index()? {
            return Err(unavailable());
        }
        if let Some(e) = self.recent.get(idx) {
            return Ok(e.term);
        }
        match self.engine.get_entry::<EntryExt>(GROUP, idx) {
            Ok(Some(e)) => Ok(e.term),
            Ok(None) => Err(unavailable()),
            Err(e) => {
                tracing::error!(idx, error = %e, "raft WAL read failed");
                Err(unavailable())
            }
        }
    }

    fn first_index(&self) -> raft::Result<u64> {
        let after_snapshot = self.snapshot_index() + 1;
        Ok(match (self.engine_first(), self.engine_last()) {
            // Entries older than the snapshot stay readable until compacted, as long as they reach it.
            (Some(first), Some(last)) if last >= self.snapshot_index() => first.min(after_snapshot),
            _ => after_snapshot,
        })
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(match self.engine_last() {
            Some(last) if last >= self.snapshot_index() => last,
            _ => self.snapshot_index(),
        })
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        if self.snapshot_index() < request_index || self.snapshot_index() == 0 {
            return Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable));
        }
        Ok(self.snapshot.clone())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64, data: &'static [u8]) -> Entry {
        Entry { index, term, data: Bytes::from_static(data), ..Entry::default() }
    }

    /// A new storage in `dir` (voters 1, 2, 3) holding `entries`, written with fdatasync.
    fn storage_with(dir: &Path, entries: &[Entry]) -> WalStorage {
        let mut s = WalStorage::open(&dir.join("wal"), &dir.join("snap"), &[1, 2, 3]).unwrap();
        let mut batch = LogBatch::default();
        s.stage_entries(&mut batch, entries).unwrap();
        s.write(&mut batch, true).unwrap();
        s
    }

    /// A snapshot received from a leader at `index` of `term`, its ledger tip block `b"tip"`.
    fn incoming_snapshot(index: u64, term: u64) -> Snapshot {
        let mut incoming = Snapshot { data: Bytes::from_static(b"tip"), ..Snapshot::default() };
        incoming.set_metadata(SnapshotMetadata { index, term, ..SnapshotMetadata::default() });
        incoming
    }

    #[test]
    fn entries_hard_state_and_snapshots_survive_reopen_and_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, snap) = (dir.path().join("wal"), dir.path().join("snap"));
        {
            let mut s = WalStorage::open(&wal, &snap, &[1, 2, 3]).unwrap();
            assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (1, 0));
            assert_eq!(s.initial_state().unwrap().conf_state.voters, vec![1, 2, 3]);
            let mut batch = LogBatch::default();
            let ents: Vec<Entry> = (1..=10).map(|i| entry(i, 2, b"block")).collect();
            s.stage_entries(&mut batch, &ents).unwrap();
            s.stage_hard_state(&mut batch, HardState { term: 2, vote: 1, commit: 8, ..HardState::default() }).unwrap();
            s.write(&mut batch, true).unwrap();
            s.create_snapshot(8, Bytes::from_static(b"tip-block"), 2).unwrap();
            assert_eq!(s.first_index().unwrap(), 6);
            assert!(matches!(
                s.entries(5, 7, None, GetEntriesContext::empty(false)),
                Err(raft::Error::Store(StorageError::Compacted))
            ));
        }
        let s = WalStorage::open(&wal, &snap, &[1, 2, 3]).unwrap();
        let hs = s.initial_state().unwrap().hard_state;
        assert_eq!((hs.term, hs.vote, hs.commit), (2, 1, 8));
        assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (6, 10));
        assert_eq!(s.term(8).unwrap(), 2);
        let got = s.entries(6, 11, None, GetEntriesContext::empty(false)).unwrap();
        assert_eq!(got.iter().map(|e| e.index).collect::<Vec<_>>(), vec![6, 7, 8, 9, 10]);
        let snapshot = s.snapshot(0, 2).unwrap();
        assert_eq!((snapshot.get_metadata().index, snapshot.get_metadata().term), (8, 2));
        assert_eq!(snapshot.get_data(), b"tip-block");
        assert_eq!(snapshot.get_metadata().get_conf_state().voters, vec![1, 2, 3]);
    }

    /// The voters recorded after a `ConfChange` survive a reopen, win over the voters given to `open` and are
    /// what a snapshot taken afterwards carries.
    #[test]
    fn applied_voters_survive_reopen_and_go_into_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, snap) = (dir.path().join("wal"), dir.path().join("snap"));
        {
            let mut s = WalStorage::open(&wal, &snap, &[1, 2, 3]).unwrap();
            let mut batch = LogBatch::default();
            s.stage_entries(&mut batch, &[entry(1, 1, b"a"), entry(2, 1, b"b")]).unwrap();
            s.write(&mut batch, true).unwrap();
            s.set_conf_state(ConfState { voters: vec![1, 2, 3, 4], ..ConfState::default() }).unwrap();
        }
        let mut s = WalStorage::open(&wal, &snap, &[1, 2, 3]).unwrap();
        assert_eq!(s.initial_state().unwrap().conf_state.voters, vec![1, 2, 3, 4]);
        s.create_snapshot(2, Bytes::from_static(b"block"), 0).unwrap();
        assert_eq!(s.latest_snapshot().get_metadata().get_conf_state().voters, vec![1, 2, 3, 4]);
    }

    /// Entries and terms served from memory are the log's own, after a suffix is replaced and with size limits:
    /// the storage answers like one over the same engine that keeps nothing in memory.
    #[test]
    fn kept_entries_agree_with_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let old: Vec<Entry> = (1..=10).map(|i| entry(i, 1, b"an entry of the first term")).collect();
        let mut s = storage_with(dir.path(), &old);
        let mut batch = LogBatch::default();
        let new: Vec<Entry> = (6..=8).map(|i| entry(i, 2, b"second")).collect();
        s.stage_entries(&mut batch, &new).unwrap();
        s.write(&mut batch, true).unwrap();
        assert!(s.recent.get(6).is_some_and(|e| e.term == 2) && s.recent.get(9).is_none());
        let log_only = WalStorage {
            engine: Arc::clone(&s.engine),
            hard_state: s.hard_state.clone(),
            conf_state: s.conf_state.clone(),
            snapshot: s.snapshot.clone(),
            snap_dir: s.snap_dir.clone(),
            recent: RecentEntries::default(),
        };
        assert_eq!(log_only.last_index().unwrap(), 8);
        let ctx = || GetEntriesContext::empty(false);
        for low in 1..=9 {
            assert_eq!(s.term(low).ok(), log_only.term(low).ok(), "term of {low}");
            for high in low..=9 {
                for max in [None, Some(0), Some(40), Some(100)] {
                    let kept = s.entries(low, high, max, ctx()).unwrap();
                    let read = log_only.entries(low, high, max, ctx()).unwrap();
                    assert_eq!(kept, read, "entries {low}..{high} within {max:?}");
                }
            }
        }
        s.apply_snapshot(incoming_snapshot(40, 3)).unwrap();
        assert!(s.recent.get(8).is_none());
    }

    #[test]
    fn a_received_snapshot_replaces_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let (wal, snap) = (dir.path().join("wal"), dir.path().join("snap"));
        let ents: Vec<Entry> = (1..=5).map(|i| entry(i, 1, b"old")).collect();
        let mut s = storage_with(dir.path(), &ents);
        s.apply_snapshot(incoming_snapshot(40, 3)).unwrap();
        assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (41, 40));
        assert_eq!(s.term(40).unwrap(), 3);
        drop(s);
        let s = WalStorage::open(&wal, &snap, &[1, 2, 3]).unwrap();
        assert_eq!((s.first_index().unwrap(), s.last_index().unwrap()), (41, 40));
        assert_eq!(s.hard_state().commit, 40);
        assert_eq!(s.latest_snapshot().get_data(), b"tip");
    }
}
