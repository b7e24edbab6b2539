//! Shared helpers for the block-store integration tests: the real Fabric 2.5 fixture ledger and a builder of valid
//! synthetic blocks (for chains longer than the fixture).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::{Path, PathBuf};

use bytes::Bytes;
use ferrofabric_protos::common::{Block, BlockData, BlockHeader, BlockMetadata};
use ferrofabric_protoutil::{block_header_hash, records};
use ferrofabric_testkit::fabric_fixture;
use prost::Message;
use sha2::{Digest, Sha256};

/// The 29 orderer blocks of the fixture ledger, as the original bytes.
pub(crate) fn orderer_blocks() -> Vec<Bytes> {
    let raw = Bytes::from(std::fs::read(fabric_fixture("orderer-blocks.bin")).unwrap());
    let blocks: Vec<Bytes> = records(raw).map(|r| r.unwrap().1).collect();
    assert_eq!(blocks.len(), 29, "fixture ledger has 29 blocks");
    blocks
}

/// `expected.json` of the fixture.
pub(crate) fn expected() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fabric_fixture("expected.json")).unwrap()).unwrap()
}

/// Decodes, edits and re-encodes a block (for tampering tests).
pub(crate) fn edit(raw: &Bytes, f: impl FnOnce(&mut Block)) -> Bytes {
    let mut b = Block::decode(raw.clone()).unwrap();
    f(&mut b);
    Bytes::from(b.encode_to_vec())
}

/// The header hash of a marshaled block.
pub(crate) fn header_hash(raw: &Bytes) -> [u8; 32] {
    block_header_hash(&Block::decode(raw.clone()).unwrap().header.unwrap())
}

/// A structurally valid block `number` chained to `previous_hash`, with `txs` opaque "envelopes" of `tx_size` bytes
/// each (no txid can be extracted from them, which the store tolerates).
pub(crate) fn synthetic_block(number: u64, previous_hash: &[u8], txs: usize, tx_size: usize) -> Bytes {
    let data: Vec<Bytes> = (0..txs)
        .map(|i| {
            let mut v = vec![(number as u8) ^ (i as u8); tx_size];
            v[..8].copy_from_slice(&number.to_le_bytes());
            Bytes::from(v)
        })
        .collect();
    let mut h = Sha256::new();
    for d in &data {
        h.update(d);
    }
    let block = Block {
        header: Some(BlockHeader {
            number,
            previous_hash: Bytes::copy_from_slice(previous_hash),
            data_hash: Bytes::copy_from_slice(&h.finalize()),
        }),
        data: Some(BlockData { data }),
        metadata: Some(BlockMetadata { metadata: vec![Bytes::new(); 5] }),
    };
    Bytes::from(block.encode_to_vec())
}

/// The store's block files, sorted.
pub(crate) fn block_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("blocks"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().chars().all(|c| c != '.'))
        .collect();
    v.sort();
    v
}

/// Appends raw bytes to a file (simulating a writer that died mid-way).
pub(crate) fn append_raw(path: &Path, bytes: &[u8]) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
}

/// Size of the record of each block: 8-byte prefix + body.
pub(crate) fn record_len(b: &Bytes) -> u64 {
    8 + b.len() as u64
}
