//! The configtxgen error type.

use std::path::{Path, PathBuf};

/// Everything that can fail while loading a configtx.yaml or encoding a channel configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigtxgenError {
    /// The file is not valid YAML of configtx.yaml's shape (unknown key, wrong type, bad merge key).
    #[error("invalid configtx.yaml: {0}")]
    Yaml(String),
    /// The profile is missing, or a setting is missing or out of range (what Fabric's configtxgen panics or
    /// fails on: unknown orderer type, no consenters, bad durations, missing policies, ...).
    #[error("{0}")]
    Profile(String),
    /// A policy rule does not parse (`Signature` policy DSL or `ImplicitMeta` rule).
    #[error("invalid policy rule {rule:?}: {reason}")]
    Policy {
        /// The rule text.
        rule: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An organisation's MSP folder cannot be turned into an `MSPConfig`.
    #[error("loading the MSP of organization {org}: {reason}")]
    Msp {
        /// The organisation's `Name`.
        org: String,
        /// The MSP crate's error.
        reason: String,
    },
    /// The channel ID is not one Fabric accepts.
    #[error("invalid channel ID {0:?}: it must match [a-z][a-z0-9.-]* and be shorter than 250 characters")]
    ChannelId(String),
    /// Reading the config, a certificate or writing the block failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// File being accessed.
        path: PathBuf,
        /// Underlying OS error.
        #[source]
        source: std::io::Error,
    },
}

impl ConfigtxgenError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        ConfigtxgenError::Io { path: path.to_path_buf(), source }
    }

    pub(crate) fn policy(rule: &str, reason: impl Into<String>) -> Self {
        ConfigtxgenError::Policy { rule: rule.to_string(), reason: reason.into() }
    }
}
