//! The error of this crate's functions: follow settings, connections and the blocks received or served.

use ferrofabric_channelconfig::{BlockSignatureError, PolicyError};
use ferrofabric_comm::CommError;

/// What failed in reading the follow settings, dialing a Deliver server or reading a block.
#[derive(Debug, thiserror::Error)]
pub enum DeliverError {
    /// A malformed duration, a bad address, TLS setup or a connection failure (`ferrofabric-comm`'s error).
    #[error(transparent)]
    Comm(#[from] CommError),
    /// Received bytes that do not decode as a block.
    #[error("received bytes are not a block: {0}")]
    NotABlock(#[source] prost::DecodeError),
    /// A received block without a header.
    #[error("received a block without a header")]
    NoHeader,
    /// A stored block that does not decode (Fabric answers `BAD_REQUEST`).
    #[error("block: {0}")]
    Block(#[source] prost::DecodeError),
    /// A transaction's payload that does not decode.
    #[error("tx {index}: payload: {source}")]
    TxPayload {
        /// The transaction's index in the block.
        index: usize,
        /// The decoder's error.
        #[source]
        source: prost::DecodeError,
    },
    /// A transaction's channel header that does not decode.
    #[error("tx {index}: channel header: {source}")]
    TxChannelHeader {
        /// The transaction's index in the block.
        index: usize,
        /// The decoder's error.
        #[source]
        source: prost::DecodeError,
    },
}

/// Why a daemon's access rule ([`crate::PolicyChecker`]) refuses a Deliver request; logged, the client gets
/// `FORBIDDEN` (Fabric `common/deliver/deliver.go`).
#[derive(Debug, thiserror::Error)]
pub enum AccessDenied {
    /// The channel configuration has no policy at the path the rule names.
    #[error("no policy {0}")]
    NoPolicy(String),
    /// The request's signer does not satisfy the policy at `path`.
    #[error("{path} not satisfied: {source}")]
    NotSatisfied {
        /// The policy's path, e.g. `/Channel/Readers`.
        path: String,
        /// Why the policy was not satisfied.
        #[source]
        source: PolicyError,
    },
}

/// Why a BFT block attestation is refused ([`crate::AttestationVerifier`]).
#[derive(Debug, thiserror::Error)]
pub enum AttestationError {
    /// The verifier has no channel configuration yet to check against.
    #[error("no channel configuration")]
    NoConfig,
    /// The bytes are not a block, or its signatures do not satisfy the channel's `BlockValidation` policy.
    #[error(transparent)]
    Signatures(#[from] BlockSignatureError),
}
