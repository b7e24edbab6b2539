//! The error of reading a block's metadata.

/// What is missing or does not decode in a block's metadata.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// The block has no metadata.
    #[error("no metadata in block")]
    NoMetadata,
    /// The metadata has no slot at the index needed (`SIGNATURES`, `LAST_CONFIG`).
    #[error("no metadata at index {0}")]
    NoSlot(&'static str),
    /// A slot's value does not decode as `common.Metadata`.
    #[error("{slot} metadata: {source}")]
    Slot {
        /// The slot's name.
        slot: &'static str,
        /// The decoder's error.
        #[source]
        source: prost::DecodeError,
    },
    /// The legacy LAST_CONFIG value does not decode as `common.LastConfig`.
    #[error("LastConfig: {0}")]
    LastConfig(#[source] prost::DecodeError),
    /// The SIGNATURES value does not decode as `common.OrdererBlockMetadata`.
    #[error("OrdererBlockMetadata: {0}")]
    OrdererBlockMetadata(#[source] prost::DecodeError),
}
