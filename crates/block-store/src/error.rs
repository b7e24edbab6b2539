//! The store's error type.

use std::path::PathBuf;

/// Everything [`crate::BlockStore`] can fail with. Every variant names what was being done and where, so a log line
/// is enough to find the bad file or block.
///
/// Follows the error cases of Fabric's `common/ledger/blkstorage/blockfile_mgr.go` (`addBlock`'s "block number should
/// have been" / "unexpected Previous block hash") plus the ones Fabric turns into panics (I/O and index failures).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file system operation failed.
    #[error("I/O error while {op} {path}: {source}")]
    Io {
        /// What was being done, e.g. `"writing block record to"`.
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The sled index failed (open, read, batch or flush).
    #[error("block index (sled) error while {op}: {source}")]
    Index {
        /// What was being done, e.g. `"applying the index batch of block 7"`.
        op: String,
        /// The sled error.
        source: sled::Error,
    },
    /// A record in a block file does not match what the index says is there (wrong length prefix, short file).
    #[error("corrupt block record in {path} at byte offset {offset}: {reason}")]
    CorruptRecord {
        /// The block file.
        path: PathBuf,
        /// Byte offset of the record's 8-byte length prefix.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// An index entry cannot be decoded or is missing although the height says it must exist.
    #[error("corrupt block index: {0}")]
    CorruptIndex(String),
    /// The bytes given to `append` are not a usable `common.Block` (undecodable, no header, too large).
    #[error("invalid block: {0}")]
    InvalidBlock(String),
    /// The block is not the next one (`number != height`).
    #[error("block number should have been {expected} but was {got}")]
    OutOfOrder {
        /// The store's height, i.e. the only number `append` accepts.
        expected: u64,
        /// The number in the block header.
        got: u64,
    },
    /// `header.previous_hash` is not the hash of the last stored header (empty for block 0).
    #[error("block {number}: previous_hash is {got} but the last stored header hashes to {expected}")]
    PreviousHashMismatch {
        /// The block number.
        number: u64,
        /// Hex of the expected hash (empty for block 0).
        expected: String,
        /// Hex of the block's `previous_hash`.
        got: String,
    },
    /// `header.data_hash` is not SHA-256 over the concatenated envelopes.
    #[error("block {number}: header data_hash is {header} but the data hashes to {computed}")]
    DataHashMismatch {
        /// The block number.
        number: u64,
        /// Hex of `header.data_hash`.
        header: String,
        /// Hex of the computed hash.
        computed: String,
    },
    /// An earlier `append` failed half-way and could not be rolled back; the store refuses further appends until it
    /// is reopened (reopening repairs the tail).
    #[error("block store needs to be reopened: {0}")]
    Broken(String),
    /// The height channel was closed (the store was dropped while waiting).
    #[error("block store closed")]
    Closed,
}

impl StoreError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Io { op, path: path.into(), source }
    }

    pub(crate) fn index(op: impl Into<String>, source: sled::Error) -> Self {
        StoreError::Index { op: op.into(), source }
    }
}
