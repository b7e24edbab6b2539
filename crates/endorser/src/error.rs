//! The error of the endorser's ledger reads and of transaction assembly. The texts are Fabric's where Fabric has one
//! (they reach the client).

use ferrofabric_block_store::StoreError;

/// What failed in reading a committed block or chaincode definition, or in assembling a transaction.
#[derive(Debug, thiserror::Error)]
pub enum EndorserError {
    /// A committed block cannot be read (from the recent window, the block store or the remote block store).
    #[error("{0}")]
    Ledger(String),
    /// The block store in this process failed.
    #[error("{what}: {source}")]
    Store {
        /// What was read (`the block store`, `reading block 7`).
        what: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// A committed block does not decode.
    #[error("block {number}: {source}")]
    BlockUndecodable {
        /// The block.
        number: u64,
        /// The decoder's error.
        #[source]
        source: prost::DecodeError,
    },
    /// A chaincode definition in the state does not decode.
    #[error("{0}")]
    ChaincodeDefinition(String),
    /// No proposal response to assemble.
    #[error("at least one proposal response is required")]
    NoResponses,
    /// A part of the proposal does not decode.
    #[error("error unmarshalling {what}: {source}")]
    Unmarshal {
        /// The message (`Header`, `ChaincodeProposalPayload`, `SignatureHeader`).
        what: &'static str,
        /// The decoder's error.
        #[source]
        source: prost::DecodeError,
    },
    /// The signer is not the proposal's creator.
    #[error("signer must be the same as the one referenced in the header")]
    SignerMismatch,
    /// A proposal response with a status outside 200–399.
    #[error("proposal response was not successful, error code {status}, msg {message}")]
    UnsuccessfulResponse {
        /// The response's status.
        status: i32,
        /// The response's message.
        message: String,
    },
    /// The proposal responses' payloads differ.
    #[error("ProposalResponsePayloads do not match")]
    PayloadMismatch,
    /// No response carries an endorsement.
    #[error("no endorsements")]
    NoEndorsements,
}
