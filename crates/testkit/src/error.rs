//! The testkit's single error type.

use std::path::PathBuf;

/// Everything that can go wrong while generating crypto, building
/// transactions/blocks or writing MSP directories.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// `ferrofabric-cryptogen` failed to generate the network's material
    /// (should not happen with the fixed config used here).
    #[error("certificate generation failed: {0}")]
    Certificate(String),
    /// A generated certificate/key pair was rejected by the MSP crate's
    /// `SigningIdentity` loader.
    #[error("signing identity: {0}")]
    Identity(String),
    /// Writing MSP directories failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// File or directory being accessed.
        path: PathBuf,
        /// Underlying OS error.
        #[source]
        source: std::io::Error,
    },
    /// The embedded fixture genesis block does not have the expected shape.
    #[error("fixture genesis block: {0}")]
    Genesis(String),
    /// A builder was used inconsistently (e.g. no creator set).
    #[error("builder: {0}")]
    Builder(String),
}
