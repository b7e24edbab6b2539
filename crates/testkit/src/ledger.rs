//! The fixture ledger file format: repeated records of an 8-byte
//! little-endian length followed by that many bytes of a marshaled
//! `common.Block` (the layout of `fixtures/fabric-2.5/*-blocks.bin`).

use std::io::Write;
use std::path::Path;

use bytes::Bytes;
use ferrofabric_protos::common::Block;
use prost::Message;

use crate::TestkitError;

/// Writes `blocks` to `path` (created or truncated) as ledger records.
///
/// Errors: [`TestkitError::Io`].
pub fn write_ledger(path: &Path, blocks: &[Block]) -> Result<(), TestkitError> {
    let file = std::fs::File::create(path).map_err(|e| TestkitError::io(path, e))?;
    let mut w = std::io::BufWriter::new(file);
    for block in blocks {
        let bytes = block.encode_to_vec();
        w.write_all(&(bytes.len() as u64).to_le_bytes())
            .and_then(|_| w.write_all(&bytes))
            .map_err(|e| TestkitError::io(path, e))?;
    }
    w.flush().map_err(|e| TestkitError::io(path, e))
}

/// Splits a ledger file's contents into the raw marshaled blocks, as
/// zero-copy slices of `data`.
///
/// Errors: [`TestkitError::Ledger`] naming the record index and the byte
/// offset of its length prefix when the prefix or the record is truncated.
pub fn split_ledger(data: &Bytes) -> Result<Vec<Bytes>, TestkitError> {
    let mut records = Vec::new();
    let mut pos = 0usize;
    while pos < data.len() {
        let err = |reason: String| TestkitError::Ledger { index: records.len(), offset: pos as u64, reason };
        let prefix: [u8; 8] = data
            .get(pos..pos + 8)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| err(format!("truncated length prefix ({} of 8 bytes left)", data.len() - pos)))?;
        let len = u64::from_le_bytes(prefix);
        let start = pos + 8;
        let available = (data.len() - start) as u64;
        if len > available {
            return Err(err(format!("record length {len} exceeds the {available} bytes left")));
        }
        // len <= available <= usize::MAX, so the cast is lossless.
        let end = start + len as usize;
        records.push(data.slice(start..end));
        pos = end;
    }
    Ok(records)
}

/// Reads and decodes every block of the ledger file at `path`.
///
/// Errors: [`TestkitError::Io`]; [`TestkitError::Ledger`] for framing
/// errors (see [`split_ledger`]) or a record that is not a `common.Block`.
pub fn read_ledger(path: &Path) -> Result<Vec<Block>, TestkitError> {
    let data = Bytes::from(std::fs::read(path).map_err(|e| TestkitError::io(path, e))?);
    let records = split_ledger(&data)?;
    let mut offset = 0u64;
    let mut blocks = Vec::with_capacity(records.len());
    for (index, rec) in records.into_iter().enumerate() {
        let len = rec.len() as u64;
        let block = Block::decode(rec).map_err(|e| TestkitError::Ledger {
            index,
            offset,
            reason: format!("not a common.Block: {e}"),
        })?;
        blocks.push(block);
        offset += 8 + len;
    }
    Ok(blocks)
}
