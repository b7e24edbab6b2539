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
    /// Connecting to the committer's operations endpoint timed out.
    #[error("connecting to {0} timed out")]
    ConnectTimeout(String),
    /// The committer's operations endpoint cannot be reached.
    #[error("connecting to {addr}")]
    Connect {
        /// The endpoint `host:port`.
        addr: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP exchange with the endpoint failed.
    #[error(transparent)]
    Http(#[from] hyper::Error),
    /// The HTTP request cannot be built.
    #[error(transparent)]
    Request(#[from] hyper::http::Error),
    /// The endpoint did not answer in time.
    #[error("GET {addr}{path} timed out")]
    GetTimeout {
        /// The endpoint `host:port`.
        addr: String,
        /// The path requested.
        path: String,
    },
    /// The endpoint answered with a status other than 200.
    #[error("GET {addr}{path}: HTTP {status}")]
    HttpStatus {
        /// The endpoint `host:port`.
        addr: String,
        /// The path requested.
        path: String,
        /// The status.
        status: hyper::StatusCode,
    },
    /// The committer's metrics have no `ledger_transaction_count`.
    #[error("{0}/metrics has no ledger_transaction_count")]
    NoTransactionCount(String),
}
