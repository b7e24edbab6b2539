//! The Raft metadata a block records: `etcdraft.BlockMetadata` inside the `OrdererBlockMetadata` of its
//! SIGNATURES metadata.

use bytes::Bytes;
use ferrofabric_protos::common::{Block, BlockMetadataIndex, Metadata, OrdererBlockMetadata};
use ferrofabric_protos::etcdraft;
use prost::Message;

/// `etcdraft.BlockMetadata` recorded in `block`'s SIGNATURES metadata, if any.
pub(crate) fn raft_block_metadata(block: &Block) -> Option<etcdraft::BlockMetadata> {
    let raw = block.metadata.as_ref()?.metadata.get(BlockMetadataIndex::Signatures as usize)?;
    let value = Metadata::decode(raw.clone()).ok()?.value;
    let consenter = OrdererBlockMetadata::decode(value).ok()?.consenter_metadata;
    let inner = Metadata::decode(consenter).ok()?.value;
    if inner.is_empty() {
        return None;
    }
    etcdraft::BlockMetadata::decode(inner).ok()
}

/// The `etcdraft.BlockMetadata` (consenter IDs, next consenter ID, Raft index) recorded in the
/// `OrdererBlockMetadata.consenter_metadata` of the marshaled block `raw` (Fabric
/// `orderer/consensus/etcdraft/util.go` `ReadBlockMetadata`); `None` for blocks without it (genesis, solo)
/// or that do not decode.
pub fn block_raft_metadata(raw: &Bytes) -> Option<etcdraft::BlockMetadata> {
    raft_block_metadata(&Block::decode(raw.clone()).ok()?)
}
