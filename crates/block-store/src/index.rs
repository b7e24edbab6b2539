//! The sled index: key/value encodings, next-block verification and the per-block batch.
//!
//! Keys (all integers big-endian so sled's byte order is numeric order):
//! - `b` ‖ number (u64)  → file (u32) ‖ offset of the length prefix (u64) ‖ block length (u64)
//! - `x` ‖ txid length (u32) ‖ txid (UTF-8) ‖ block number (u64) ‖ tx index (u32) → empty: one entry per
//!   occurrence, as Fabric's `blkstorage` indexes a txid (`constructTxIDKey`); a lookup takes the first entry of
//!   the txid's prefix, i.e. the first occurrence in chain order. Appending never reads the index.
//! - `h` ‖ SHA-256 of a block header (32 bytes) → block number (u64): Fabric's block-hash index
//!   (`IndexableAttrBlockHash`), for qscc's `GetBlockByHash`
//! - `m/tip`             → height (u64) ‖ SHA-256 of the last header (32 bytes); absent while the store is empty
//! - `m/version`         → format version (u32)
//!
//! The block entry, its hash entry, its txid entries and the new tip go into one sled batch, so a crash leaves the index either at
//! the old tip or at the new one, never in between. An index of another format version is rebuilt from the block
//! files on open (version 1 kept one `t` ‖ txid entry per txid and read it before every write; version 2 had no
//! block-hash entries).

use bytes::Bytes;
use ferrofabric_arena::BlockArena;
use ferrofabric_protoutil::block_header_hash;
use sha2::{Digest, Sha256};

use crate::StoreError;

const BLOCK_PREFIX: u8 = b'b';
const TX_PREFIX: u8 = b'x';
const HASH_PREFIX: u8 = b'h';
pub(crate) const TIP_KEY: &[u8] = b"m/tip";
pub(crate) const VERSION_KEY: &[u8] = b"m/version";
pub(crate) const FORMAT_VERSION: u32 = 3;

/// Where a block's record lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Loc {
    pub file: u32,
    /// Offset of the 8-byte length prefix.
    pub offset: u64,
    /// Length of the block bytes (without the prefix).
    pub len: u64,
}

impl Loc {
    /// Offset just past the record.
    pub(crate) fn end(&self) -> u64 {
        self.offset + 8 + self.len
    }
}

/// The chain tip: height and the hash of the last header (`None` while empty).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tip {
    pub height: u64,
    pub last_hash: Option<[u8; 32]>,
}

impl Tip {
    pub(crate) const EMPTY: Tip = Tip { height: 0, last_hash: None };
}

pub(crate) fn block_key(number: u64) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[0] = BLOCK_PREFIX;
    k[1..].copy_from_slice(&number.to_be_bytes());
    k
}

/// The entry of the block whose header hashes to `hash`.
fn hash_key(hash: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(1 + hash.len());
    k.push(HASH_PREFIX);
    k.extend_from_slice(hash);
    k
}

/// The number of the block whose header hashes to `hash` (any length is looked up; only 32 bytes can be found).
pub(crate) fn lookup_hash(db: &sled::Db, hash: &[u8]) -> Result<Option<u64>, StoreError> {
    let value = db.get(hash_key(hash)).map_err(|e| StoreError::index("looking up a block hash".to_owned(), e))?;
    value
        .map(|v| {
            <[u8; 8]>::try_from(v.as_ref()).map(u64::from_be_bytes).map_err(|_| {
                StoreError::CorruptIndex(format!("the entry of block hash {} is {} bytes", hex::encode(hash), v.len()))
            })
        })
        .transpose()
}

/// The prefix of every entry of `txid`: the length makes it exact (no other txid's entries start with it).
fn tx_prefix(txid: &str) -> Vec<u8> {
    let mut k = Vec::with_capacity(5 + txid.len() + 12);
    k.push(TX_PREFIX);
    k.extend_from_slice(&(txid.len() as u32).to_be_bytes());
    k.extend_from_slice(txid.as_bytes());
    k
}

/// The entry of `txid` at transaction `tx` of block `block`.
fn tx_key(txid: &str, block: u64, tx: u32) -> Vec<u8> {
    let mut k = tx_prefix(txid);
    k.extend_from_slice(&block.to_be_bytes());
    k.extend_from_slice(&tx.to_be_bytes());
    k
}

fn encode_loc(loc: &Loc) -> [u8; 20] {
    let mut v = [0u8; 20];
    v[..4].copy_from_slice(&loc.file.to_be_bytes());
    v[4..12].copy_from_slice(&loc.offset.to_be_bytes());
    v[12..].copy_from_slice(&loc.len.to_be_bytes());
    v
}

pub(crate) fn decode_loc(number: u64, v: &[u8]) -> Result<Loc, StoreError> {
    let bad = || StoreError::CorruptIndex(format!("location of block {number} is {} bytes, expected 20", v.len()));
    let file = u32::from_be_bytes(v.get(..4).and_then(|s| s.try_into().ok()).ok_or_else(bad)?);
    let offset = u64::from_be_bytes(v.get(4..12).and_then(|s| s.try_into().ok()).ok_or_else(bad)?);
    let len = u64::from_be_bytes(v.get(12..20).and_then(|s| s.try_into().ok()).ok_or_else(bad)?);
    if v.len() != 20 {
        return Err(bad());
    }
    Ok(Loc { file, offset, len })
}

/// The (block, tx index) of a txid entry's key, which starts with the txid's prefix of `prefix_len` bytes.
fn decode_tx_loc(txid: &str, key: &[u8], prefix_len: usize) -> Result<(u64, u32), StoreError> {
    let bad = || StoreError::CorruptIndex(format!("an entry of txid {txid:?} has a {} byte key", key.len()));
    let at = key.get(prefix_len..).filter(|rest| rest.len() == 12).ok_or_else(bad)?;
    let block = u64::from_be_bytes(at.get(..8).and_then(|s| s.try_into().ok()).ok_or_else(bad)?);
    let tx = u32::from_be_bytes(at.get(8..).and_then(|s| s.try_into().ok()).ok_or_else(bad)?);
    Ok((block, tx))
}

fn encode_tip(tip: &Tip) -> Vec<u8> {
    let mut v = Vec::with_capacity(40);
    v.extend_from_slice(&tip.height.to_be_bytes());
    v.extend_from_slice(&tip.last_hash.unwrap_or_default());
    v
}

pub(crate) fn decode_tip(v: &[u8]) -> Result<Tip, StoreError> {
    let bad = || StoreError::CorruptIndex(format!("tip entry is {} bytes, expected 40", v.len()));
    if v.len() != 40 {
        return Err(bad());
    }
    let height = u64::from_be_bytes(v.get(..8).and_then(|s| s.try_into().ok()).ok_or_else(bad)?);
    let hash: [u8; 32] = v.get(8..40).and_then(|s| s.try_into().ok()).ok_or_else(bad)?;
    if height == 0 {
        return Err(StoreError::CorruptIndex("tip entry has height 0".into()));
    }
    Ok(Tip { height, last_hash: Some(hash) })
}

/// The first occurrence of `txid` in chain order: (block number, tx index).
pub(crate) fn lookup_tx(db: &sled::Db, txid: &str) -> Result<Option<(u64, u32)>, StoreError> {
    let prefix = tx_prefix(txid);
    let first = db.scan_prefix(&prefix).keys().next().transpose();
    let key = first.map_err(|e| StoreError::index(format!("looking up txid {txid:?}"), e))?;
    key.map(|k| decode_tx_loc(txid, &k, prefix.len())).transpose()
}

/// A block that passed [`check_next`]: what the index needs from it.
#[derive(Debug)]
pub(crate) struct Checked {
    pub number: u64,
    pub header_hash: [u8; 32],
    /// One entry per transaction; `None` when no txid can be extracted (the block is still stored, as in Fabric,
    /// where such a transaction is later marked invalid by the committer).
    pub txids: Vec<Option<String>>,
}

/// Verifies that `raw` is the block that extends `tip`: it decodes, its number is `tip.height`, its previous_hash is
/// the last header hash (empty for block 0), and its data_hash matches the envelopes
/// (Fabric: `blockfile_mgr.go` `addBlock` and `protoutil.ComputeBlockDataHash`; the data hash only `with_data_hash`).
/// The txids are extracted only `with_txids`.
pub(crate) fn check_next(
    raw: &Bytes,
    tip: &Tip,
    with_txids: bool,
    with_data_hash: bool,
) -> Result<Checked, StoreError> {
    if raw.len() as u64 > ferrofabric_protoutil::MAX_RECORD {
        return Err(StoreError::InvalidBlock(format!(
            "{} bytes exceeds the {} byte record limit",
            raw.len(),
            ferrofabric_protoutil::MAX_RECORD
        )));
    }
    let arena = BlockArena::decode(raw.clone()).map_err(|e| StoreError::InvalidBlock(e.to_string()))?;
    let header = arena.header();
    if header.number != tip.height {
        return Err(StoreError::OutOfOrder { expected: tip.height, got: header.number });
    }
    let expected: &[u8] = match &tip.last_hash {
        Some(h) => h,
        None => &[],
    };
    if header.previous_hash.as_ref() != expected {
        return Err(StoreError::PreviousHashMismatch {
            number: header.number,
            expected: hex::encode(expected),
            got: hex::encode(&header.previous_hash),
        });
    }
    if with_data_hash {
        let computed = arena.computed_data_hash();
        if header.data_hash.as_ref() != computed {
            return Err(StoreError::DataHashMismatch {
                number: header.number,
                header: hex::encode(&header.data_hash),
                computed: hex::encode(computed),
            });
        }
    }
    let txids = if with_txids { arena.txs().iter().map(txid_of).collect() } else { Vec::new() };
    Ok(Checked { number: header.number, header_hash: block_header_hash(header), txids })
}

/// Fabric's `protoutil.GetOrComputeTxIDFromEnvelope`: the channel header's tx_id, or, when that is empty,
/// hex(SHA-256(nonce ‖ creator)) of the signature header.
fn txid_of(tx: &ferrofabric_arena::TxArena) -> Option<String> {
    let ch = tx.channel_header().ok()?;
    if !ch.tx_id.is_empty() {
        return Some(ch.tx_id.clone());
    }
    let sh = tx.signature_header().ok()?;
    let mut h = Sha256::new();
    h.update(&sh.nonce);
    h.update(&sh.creator);
    Some(hex::encode(h.finalize()))
}

/// Writes the index entries of `block` stored at `loc` and the new tip in one atomic sled batch.
pub(crate) fn index_block(db: &sled::Db, block: &Checked, loc: &Loc) -> Result<Tip, StoreError> {
    let mut batch = sled::Batch::default();
    batch.insert(&block_key(block.number)[..], &encode_loc(loc)[..]);
    batch.insert(hash_key(&block.header_hash), &block.number.to_be_bytes()[..]);
    for (i, txid) in block.txids.iter().enumerate() {
        // Every occurrence gets its entry; a duplicate's sorts after the earlier ones, so lookups still find the first.
        if let Some(txid) = txid.as_deref() {
            batch.insert(tx_key(txid, block.number, i as u32), &[][..]);
        }
    }
    let tip = Tip { height: block.number + 1, last_hash: Some(block.header_hash) };
    batch.insert(TIP_KEY, encode_tip(&tip));
    db.apply_batch(batch)
        .map_err(|e| StoreError::index(format!("applying the index batch of block {}", block.number), e))?;
    Ok(tip)
}
