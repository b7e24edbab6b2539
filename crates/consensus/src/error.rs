//! The error of composing the consensus backends.

use ferrofabric_consensus_bft::BftError;
use ferrofabric_consensus_etcdraft::RaftError;
use ferrofabric_consensus_kafka::KafkaError;

/// Which backend could not be registered, and why.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// etcdraft: the cluster's TLS files cannot be read.
    #[error(transparent)]
    Raft(#[from] RaftError),
    /// BFT: the cluster's TLS files cannot be read.
    #[error(transparent)]
    Bft(#[from] BftError),
    /// Kafka: the `Kafka` section is bad.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
}
