//! The error of this crate's functions: cgroups, the metrics of the control loop and the committer's endpoint.

use std::path::PathBuf;

/// Why cgroups cannot be used on this host, or what failed in starting the controller or reading the committer.
#[derive(Debug, thiserror::Error)]
pub enum IsolationError {
    /// No writable cgroup hierarchy with the `cpu` controller was found.
    #[error("no writable cgroup hierarchy with the cpu controller: {0}")]
    Unavailable(String),
    /// A cgroup file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// This host does not divide disk time between cgroups by weight; what was found instead.
    #[error("{0}")]
    NoIoWeight(String),
    /// The controller's metrics cannot be registered (a second controller in one registry).
    #[error(transparent)]
    Metrics(#[from] prometheus::Error),
    /// A GET to the committer's operations endpoint failed (connection, timeout, a malformed answer).
    #[error("GET {url}: {reason}")]
    Get {
        /// The URL requested.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The endpoint answered with a status other than 200.
    #[error("GET {url}: HTTP {status}")]
    HttpStatus {
        /// The URL requested.
        url: String,
        /// The status code.
        status: u16,
    },
    /// The committer's metrics have no `ledger_transaction_count`.
    #[error("{0}/metrics has no ledger_transaction_count")]
    NoTransactionCount(String),
}
