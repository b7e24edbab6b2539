//! The error of registering etcdraft on a node.

use ferrofabric_orderer::OrdererError;

/// What failed in setting up the Raft cluster of a node.
#[derive(Debug, thiserror::Error)]
pub enum RaftError {
    /// The node's cluster TLS material (client certificate, key, root CAs) cannot be read.
    #[error(transparent)]
    ClusterTls(OrdererError),
}
