//! The error of the record codecs and of the Kafka factory's configuration.

/// What is wrong with a record of the channel's partition or the payload topic, or with the `Kafka` section.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum KafkaError {
    /// A record of the channel's partition that is no `KafkaMessage`.
    #[error("a record that is no KafkaMessage: {0}")]
    NotKafkaMessage(#[source] prost::DecodeError),
    /// A `KafkaMessage` of no known type.
    #[error("a KafkaMessage of unknown type")]
    UnknownType,
    /// A regular message with both `reference` and `references`.
    #[error("a regular message with both a reference and references")]
    ReferenceAndReferences,
    /// A CONFIG message with several references (config messages travel alone).
    #[error("a config message with several references")]
    ConfigWithReferences,
    /// A payload record that should hold a batch and does not decode as a `KafkaPayloadBatch`.
    #[error("the payload record is no batch: {0}")]
    NotBatch(#[source] prost::DecodeError),
    /// A reference into a batch without an index.
    #[error("the reference names no entry of a payload batch")]
    NoBatchIndex,
    /// A batch without an entry at the reference's index.
    #[error("the payload batch has {len} entries, none at index {index}")]
    NoBatchEntry {
        /// The batch's number of entries.
        len: usize,
        /// The reference's index.
        index: u32,
    },
    /// The batch entry at the reference's index is another transaction's.
    #[error("the payload batch entry {index} belongs to transaction {found:?}, not {expected:?}")]
    WrongBatchEntry {
        /// The reference's index.
        index: u32,
        /// The entry's transaction ID.
        found: String,
        /// The reference's transaction ID.
        expected: String,
    },
    /// A payload record whose key is not the reference's transaction ID.
    #[error("the payload record belongs to transaction {found:?}, not {expected:?}")]
    WrongRecordKey {
        /// The record's key (lossy UTF-8).
        found: String,
        /// The reference's transaction ID.
        expected: String,
    },
    /// `Kafka.Payloads` is neither `aside` nor `inline`.
    #[error("Kafka.Payloads must be \"aside\" or \"inline\", not {0:?}")]
    PayloadsMode(String),
}
