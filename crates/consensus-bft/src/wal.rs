//! The consensus WAL of one channel (`Consensus.WALDir/<channel>/bft.wal`): the state machine's entries of the
//! height in progress, so that a restarted consenter neither forgets a vote it cast nor casts a different one
//! (which would be equivocation: signing two blocks at one height).
//!
//! Format: records of `len: u32 BE ‖ check: first 4 bytes of SHA-256(record) ‖ record` (a [`WalRecord`]); the
//! first record names the height. A torn or corrupt tail (a crash mid-write) ends the log there and is cut off.
//! Entries are buffered and written with `fdatasync` by [`Wal::flush`], which the chain calls before any message
//! leaves the node, so nothing another consenter saw is missing after a crash.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use malachitebft_core_consensus::WalEntry;
use prost::Message;
use sha2::{Digest, Sha256};

use crate::context::BftContext;
use crate::wire::{decode_wal, encode_wal, WalBody, WalRecord};

/// The open WAL.
pub(crate) struct Wal {
    path: PathBuf,
    file: File,
    height: Option<u64>,
    buffer: Vec<u8>,
}

fn check(record: &[u8]) -> [u8; 4] {
    let d = Sha256::digest(record);
    [d[0], d[1], d[2], d[3]]
}

impl Wal {
    /// Opens (creating) the WAL in `dir`.
    ///
    /// Errors: the directory or file cannot be created or read.
    pub(crate) fn open(dir: &Path) -> std::io::Result<Wal> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("bft.wal");
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path)?;
        Ok(Wal { path, file, height: None, buffer: Vec::new() })
    }

    /// The entries recorded for `height` (empty if the log is of another height), and the log reset to hold
    /// `height`'s entries from now on.
    ///
    /// Errors: reading or writing the file.
    pub(crate) fn start(&mut self, height: u64) -> std::io::Result<Vec<WalEntry<BftContext>>> {
        self.buffer.clear();
        let (logged, entries, valid_len) = self.read()?;
        if logged == Some(height) {
            self.file.set_len(valid_len)?;
            self.file.seek(SeekFrom::End(0))?;
            self.height = Some(height);
            return Ok(entries);
        }
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.height = Some(height);
        self.push(&WalRecord { body: Some(WalBody::Height(height)) });
        self.flush()?;
        Ok(Vec::new())
    }

    fn read(&mut self) -> std::io::Result<(Option<u64>, Vec<WalEntry<BftContext>>, u64)> {
        let mut data = Vec::new();
        self.file.seek(SeekFrom::Start(0))?;
        self.file.read_to_end(&mut data)?;
        let (mut height, mut entries, mut pos) = (None, Vec::new(), 0usize);
        while pos + 8 <= data.len() {
            let len = u32::from_be_bytes([data[pos], data[pos + 1], data[pos + 2], data[pos + 3]]) as usize;
            let Some(record) = data.get(pos + 8..pos + 8 + len) else { break };
            if check(record) != data[pos + 4..pos + 8] {
                break;
            }
            let Ok(record) = WalRecord::decode(record) else { break };
            match (&record.body, height) {
                (Some(WalBody::Height(h)), None) => height = Some(*h),
                (_, Some(_)) => entries.extend(decode_wal(record)),
                _ => break,
            }
            pos += 8 + len;
        }
        if pos < data.len() {
            tracing::warn!(wal = %self.path.display(), at = pos, "BFT WAL: cutting off a torn or corrupt tail");
        }
        Ok((height, entries, pos as u64))
    }

    fn push(&mut self, record: &WalRecord) {
        let bytes = record.encode_to_vec();
        self.buffer.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        self.buffer.extend_from_slice(&check(&bytes));
        self.buffer.extend_from_slice(&bytes);
    }

    /// Buffers an entry of the current height.
    pub(crate) fn append(&mut self, entry: &WalEntry<BftContext>) {
        self.push(&encode_wal(entry));
    }

    /// Writes the buffered entries and syncs them to disk.
    ///
    /// Errors: writing or syncing the file.
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        if self.buffer.is_empty() {
            return Ok(());
        }
        self.file.write_all(&self.buffer)?;
        self.file.sync_data()?;
        self.buffer.clear();
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use malachitebft_core_types::{Round, Timeout, TimeoutKind};

    fn timeout(round: u32) -> WalEntry<BftContext> {
        WalEntry::Timeout(Timeout { kind: TimeoutKind::Prevote, round: Round::new(round) })
    }

    fn rounds(entries: &[WalEntry<BftContext>]) -> Vec<i64> {
        entries
            .iter()
            .map(|e| match e {
                WalEntry::Timeout(t) => t.round.as_i64(),
                _ => -1,
            })
            .collect()
    }

    #[test]
    fn a_restart_at_the_same_height_replays_what_was_flushed_and_a_new_height_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = Wal::open(dir.path()).unwrap();
        assert!(wal.start(5).unwrap().is_empty());
        wal.append(&timeout(0));
        wal.append(&timeout(1));
        wal.flush().unwrap();
        wal.append(&timeout(2)); // never flushed: lost in the crash
        drop(wal);
        let mut wal = Wal::open(dir.path()).unwrap();
        assert_eq!(rounds(&wal.start(5).unwrap()), vec![0, 1]);
        drop(wal);
        let mut wal = Wal::open(dir.path()).unwrap();
        assert!(wal.start(6).unwrap().is_empty(), "entries of height 5 are not replayed at height 6");
    }

    #[test]
    fn a_torn_tail_is_cut_off() {
        let dir = tempfile::tempdir().unwrap();
        let mut wal = Wal::open(dir.path()).unwrap();
        wal.start(9).unwrap();
        wal.append(&timeout(0));
        wal.flush().unwrap();
        drop(wal);
        let path = dir.path().join("bft.wal");
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&[0, 0, 0, 40, 1, 2, 3]); // half a record
        std::fs::write(&path, &bytes).unwrap();
        let mut wal = Wal::open(dir.path()).unwrap();
        assert_eq!(rounds(&wal.start(9).unwrap()), vec![0]);
        wal.append(&timeout(1));
        wal.flush().unwrap();
        drop(wal);
        let mut wal = Wal::open(dir.path()).unwrap();
        assert_eq!(rounds(&wal.start(9).unwrap()), vec![0, 1], "records after the cut are readable");
    }
}
