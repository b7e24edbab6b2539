//! The cryptogen error type.

use std::path::{Path, PathBuf};

/// Everything that can fail while reading a crypto-config, generating material or writing the tree.
#[derive(Debug, thiserror::Error)]
pub enum CryptogenError {
    /// The crypto-config is not valid YAML of the expected shape, or names a node twice or uses a name that
    /// cannot be a directory name.
    #[error("invalid crypto config: {0}")]
    Config(String),
    /// A `CommonName`, `Hostname` or `SANS` template is malformed or names an unknown field.
    #[error("template: {0}")]
    Template(String),
    /// rcgen rejected the certificate parameters (e.g. a SAN that is not an IA5 string).
    #[error("certificate generation failed: {0}")]
    Certificate(String),
    /// A generated certificate and key were rejected by the MSP crate's signing-identity loader.
    #[error("signing identity: {0}")]
    Identity(String),
    /// Reading the config or writing the output failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// File or directory being accessed.
        path: PathBuf,
        /// Underlying OS error.
        #[source]
        source: std::io::Error,
    },
}

impl CryptogenError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        CryptogenError::Io { path: path.to_path_buf(), source }
    }
}
