//! The error of registering BFT on a node.

use ferrofabric_orderer::OrdererError;

/// What failed in setting up the BFT cluster of a node.
#[derive(Debug, thiserror::Error)]
pub enum BftError {
    /// The node's cluster TLS material (client certificate, key, root CAs) cannot be read.
    #[error(transparent)]
    ClusterTls(OrdererError),
}
