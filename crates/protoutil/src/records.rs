//! The ledger file format of the fixtures and of `ferrofabric ledger replay`: repeated
//! `[8-byte little-endian length][marshaled common.Block]`.
//!
//! Files may be stored zstd-compressed (a `.zst` name): [`read_ledger_file`] reads both forms.
//!
//! Reading is defensive: a truncated header, a length running past the end of the file or an absurd length is an
//! [`RecordError`] naming the record index and byte offset, never a panic.

use bytes::Bytes;

/// Largest record accepted (1 GiB): anything larger is a corrupt length, not a block.
pub const MAX_RECORD: u64 = 1 << 30;

/// A malformed ledger file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("record {index} at byte offset {offset}: {reason}")]
pub struct RecordError {
    /// Index of the record (0-based) in the file.
    pub index: usize,
    /// Byte offset of the record's length prefix.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

/// Iterates over the records of a ledger file held in memory, yielding `(offset, block bytes)` zero-copy slices.
/// After the first error the iterator ends.
pub fn records(file: Bytes) -> impl Iterator<Item = Result<(u64, Bytes), RecordError>> {
    let mut pos: usize = 0;
    let mut index = 0usize;
    let mut failed = false;
    std::iter::from_fn(move || {
        if failed || pos == file.len() {
            return None;
        }
        let offset = pos as u64;
        let err = |reason: String| RecordError { index, offset, reason };
        let Some(len_bytes) = file.get(pos..pos + 8) else {
            failed = true;
            return Some(Err(err(format!("truncated length prefix ({} bytes left)", file.len() - pos))));
        };
        let mut le = [0u8; 8];
        le.copy_from_slice(len_bytes);
        let len = u64::from_le_bytes(le);
        let remaining = (file.len() - pos - 8) as u64;
        if len > MAX_RECORD || len > remaining {
            failed = true;
            return Some(Err(err(format!("length {len} exceeds the {remaining} bytes left in the file"))));
        }
        let start = pos + 8;
        let end = start + len as usize;
        pos = end;
        index += 1;
        Some(Ok((offset, file.slice(start..end))))
    })
}

/// A ledger file that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LedgerFileError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A `.zst` file is not a valid zstd stream.
    #[error("decompressing {path}: {source}")]
    Decompress {
        /// The file.
        path: std::path::PathBuf,
        /// The zstd error.
        source: std::io::Error,
    },
}

/// The bytes of a ledger file: read whole, and zstd-decompressed when the file name ends in `.zst`. Iterate the
/// blocks with [`records`].
///
/// Errors: the file cannot be read, or a `.zst` file does not decompress.
pub fn read_ledger_file(path: impl AsRef<std::path::Path>) -> Result<Bytes, LedgerFileError> {
    let path = path.as_ref();
    let raw = std::fs::read(path).map_err(|source| LedgerFileError::Read { path: path.to_owned(), source })?;
    if path.extension().is_some_and(|e| e == "zst") {
        let plain = zstd::decode_all(raw.as_slice())
            .map_err(|source| LedgerFileError::Decompress { path: path.to_owned(), source })?;
        Ok(Bytes::from(plain))
    } else {
        Ok(Bytes::from(raw))
    }
}

/// Encodes blocks in the same format (for tests and tools).
pub fn encode_records<'a>(blocks: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for b in blocks {
        out.extend_from_slice(&(b.len() as u64).to_le_bytes());
        out.extend_from_slice(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_records_and_reports_offsets() {
        let file = Bytes::from(encode_records([&b"abc"[..], &b""[..], &b"defg"[..]]));
        let got: Vec<_> = records(file).collect::<Result<_, _>>().unwrap_or_default();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], (0, Bytes::from_static(b"abc")));
        assert_eq!(got[2], (19, Bytes::from_static(b"defg")));
    }

    #[test]
    fn reads_plain_and_zst_files_alike() {
        let dir = std::env::temp_dir().join(format!("protoutil-records-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_default();
        let data = encode_records([&b"abc"[..], &b"defg"[..]]);
        let plain = dir.join("ledger.bin");
        let packed = dir.join("ledger.bin.zst");
        std::fs::write(&plain, &data).unwrap_or_default();
        std::fs::write(&packed, zstd::encode_all(data.as_slice(), 3).unwrap_or_default()).unwrap_or_default();
        assert_eq!(read_ledger_file(&plain).ok(), Some(Bytes::from(data.clone())));
        assert_eq!(read_ledger_file(&packed).ok(), Some(Bytes::from(data)));
        std::fs::write(&packed, b"not zstd").unwrap_or_default();
        assert!(matches!(read_ledger_file(&packed), Err(LedgerFileError::Decompress { .. })));
        assert!(matches!(read_ledger_file(dir.join("missing")), Err(LedgerFileError::Read { .. })));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn truncated_files_name_the_record_and_offset() {
        let mut raw = encode_records([&b"abc"[..], &b"defg"[..]]);
        raw.truncate(raw.len() - 1);
        let got: Vec<_> = records(Bytes::from(raw)).collect();
        assert_eq!(got.len(), 2);
        let e = got[1].clone().err();
        assert_eq!(e.map(|e| (e.index, e.offset)), Some((1, 11)));
        let got: Vec<_> = records(Bytes::from_static(&[1, 2, 3])).collect();
        assert!(matches!(&got[0], Err(RecordError { index: 0, offset: 0, .. })));
    }
}
