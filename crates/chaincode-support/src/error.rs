//! The error of running a transaction on an installed chaincode. The texts are Fabric's (they reach the client).

/// Why a transaction of an installed chaincode got no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecuteError {
    /// The chaincode could not be started or reached.
    #[error("failed to execute transaction {tx_id}: could not launch chaincode {package_id}: {detail}")]
    Launch {
        /// The transaction.
        tx_id: String,
        /// The installed package.
        package_id: String,
        /// Why it could not be launched.
        detail: String,
    },
    /// The handler could not run the transaction to an answer (it timed out, its stream ended, it failed).
    #[error("{0}")]
    Execution(String),
}
