//! The peer's block metadata around the orderer's block: the validation codes and the commit hash written into a
//! stored block, and read back from it (Fabric's `TRANSACTIONS_FILTER` and `COMMIT_HASH` entries).

use anyhow::anyhow;
use bytes::Bytes;
use ferrofabric_protos::common::{Block, BlockMetadataIndex, Metadata};
use prost::Message;

/// The orderer's block with the peer's metadata added (Fabric: the validator's `TRANSACTIONS_FILTER`, then
/// `kvledger.addBlockCommitHash`): the metadata list is padded to five entries, entry 2 becomes the validation codes
/// (one byte each) and entry 4, when there is a commit hash, a marshaled `common.Metadata{value = hash}`.
///
/// Errors: `raw` is not a block.
/// The header and data are copied as they are, not decoded again ([`ferrofabric_protoutil::with_block_metadata`]):
/// the validator has decoded the block once already.
pub fn with_peer_metadata(raw: &Bytes, filter: &[u8], commit_hash: Option<&[u8; 32]>) -> anyhow::Result<Bytes> {
    Ok(ferrofabric_protoutil::with_block_metadata(raw, |md| {
        ferrofabric_protoutil::init_block_metadata(md);
        md.metadata[BlockMetadataIndex::TransactionsFilter as usize] = Bytes::copy_from_slice(filter);
        if let Some(h) = commit_hash {
            let value = Metadata { value: Bytes::copy_from_slice(h), signatures: Vec::new() };
            md.metadata[BlockMetadataIndex::CommitHash as usize] = Bytes::from(value.encode_to_vec());
        }
    })?)
}

/// The TRANSACTIONS_FILTER and COMMIT_HASH a stored block carries (`None` where absent).
///
/// Errors: the block or its COMMIT_HASH entry does not decode, or the hash is not 32 bytes.
pub fn stored_peer_metadata(stored: &Bytes) -> anyhow::Result<(Option<Bytes>, Option<[u8; 32]>)> {
    let block = Block::decode(stored.clone()).map_err(|e| anyhow!("stored block does not decode: {e}"))?;
    let md = block.metadata.map(|m| m.metadata).unwrap_or_default();
    let filter = md.get(BlockMetadataIndex::TransactionsFilter as usize).filter(|f| !f.is_empty()).cloned();
    let hash = match md.get(BlockMetadataIndex::CommitHash as usize).filter(|h| !h.is_empty()) {
        None => None,
        Some(raw) => {
            let m = Metadata::decode(raw.clone()).map_err(|e| anyhow!("COMMIT_HASH metadata: {e}"))?;
            let h: [u8; 32] =
                m.value.as_ref().try_into().map_err(|_| anyhow!("COMMIT_HASH of {} bytes", m.value.len()))?;
            Some(h)
        }
    };
    Ok((filter, hash))
}
