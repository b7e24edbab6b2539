//! The block-store service's configuration file, [`BlockstoreConfig`] (whose documentation gives the file layout).

use std::path::{Path, PathBuf};

use ferrofabric_comm::{parse_addr, parse_duration, ClientTlsConfig, TlsConfig};
use ferrofabric_deliver::DeliveryConfig;
use serde::Deserialize;

use crate::error::BlockstoreError;

/// The whole configuration.
///
/// The block-store service's configuration file (YAML, PascalCase keys like the committer's):
///
/// ```yaml
/// Channel: mychannel
/// DataDir: data/blockstore                  # the block store (ledger/)
/// LocalMSPDir: crypto/.../peer0.org1.example.com/msp   # signs Deliver requests to the committers
/// LocalMSPID: Org1MSP
/// Committers: ["127.0.0.1:7051"]            # peer Deliver endpoints followed, with fail-over
/// CommitterTLS: {Enabled: false, RootCAs: []}
/// ListenAddress: 127.0.0.1:7053             # BlockStore queries and peer Deliver
/// TLS: {Enabled: false}
/// OperationsListenAddress: ""               # /metrics, /healthz; empty disables
/// SyncEveryBlock: false
/// TimeWindow: 15m
/// Delivery: {ConnectTimeout: 3s, ReconnectBackoffThreshold: 10s}
/// ```
/// Relative paths are resolved against the file's directory.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct BlockstoreConfig {
    /// The channel followed.
    pub channel: String,
    /// Directory of the block store.
    pub data_dir: Option<PathBuf>,
    /// Local MSP directory (its identity must satisfy the committer's `/Channel/Application/Readers`).
    #[serde(rename = "LocalMSPDir")]
    pub local_msp_dir: Option<PathBuf>,
    /// Local MSP ID.
    #[serde(rename = "LocalMSPID")]
    pub local_msp_id: Option<String>,
    /// Committer (peer Deliver) addresses `host:port`.
    pub committers: Vec<String>,
    /// TLS towards the committers.
    #[serde(rename = "CommitterTLS")]
    pub committer_tls: ClientTlsConfig,
    /// Listen address of the BlockStore and Deliver gRPC services (port 0 picks a free port).
    pub listen_address: String,
    /// TLS of that listener (with `ClientAuthRequired`, the access control of the query service).
    #[serde(rename = "TLS")]
    pub tls: TlsConfig,
    /// Operations listen address; empty disables it.
    pub operations_listen_address: String,
    /// fsync every appended block (otherwise a power loss may lose a tail, which is fetched again on restart).
    pub sync_every_block: bool,
    /// Deliver requests' timestamp tolerance (Go duration).
    pub time_window: String,
    /// Connection behaviour towards the committers.
    pub delivery: DeliveryConfig,
}

impl Default for BlockstoreConfig {
    fn default() -> Self {
        BlockstoreConfig {
            channel: String::new(),
            data_dir: None,
            local_msp_dir: None,
            local_msp_id: None,
            committers: Vec::new(),
            committer_tls: ClientTlsConfig::default(),
            listen_address: "127.0.0.1:7053".into(),
            tls: TlsConfig::default(),
            operations_listen_address: String::new(),
            sync_every_block: false,
            time_window: "15m".into(),
            delivery: DeliveryConfig::default(),
        }
    }
}

impl BlockstoreConfig {
    /// Reads a YAML file, resolving relative paths against its directory.
    ///
    /// Errors: unreadable file, YAML not matching the layout.
    pub fn load(path: &Path) -> Result<BlockstoreConfig, BlockstoreError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| BlockstoreError::ReadConfig { path: path.to_owned(), source })?;
        let mut c: BlockstoreConfig = serde_yaml::from_str(&text)
            .map_err(|source| BlockstoreError::ParseConfig { path: path.to_owned(), source })?;
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        for p in [&mut c.data_dir, &mut c.local_msp_dir].into_iter().flatten() {
            fix(p);
        }
        c.committer_tls.resolve_paths(base);
        c.tls.resolve_paths(base);
        Ok(c)
    }

    /// Checks the values without usable defaults.
    ///
    /// Errors: no channel, data directory, MSP or committer; bad addresses or durations.
    pub fn validate(&self) -> Result<(), BlockstoreError> {
        if self.channel.is_empty() {
            return Err(BlockstoreError::MissingSetting("Channel is not set"));
        }
        if self.data_dir.is_none() {
            return Err(BlockstoreError::MissingSetting("DataDir is not set"));
        }
        if self.local_msp_dir.is_none() || self.local_msp_id.is_none() {
            return Err(BlockstoreError::MissingSetting(
                "LocalMSPDir and LocalMSPID must be set (the service signs its Deliver requests)",
            ));
        }
        if self.committers.is_empty() {
            return Err(BlockstoreError::MissingSetting("Committers is empty"));
        }
        parse_addr(&self.listen_address)?;
        if !self.operations_listen_address.is_empty() {
            parse_addr(&self.operations_listen_address)?;
        }
        parse_duration(&self.time_window)?;
        Ok(self.delivery.validate()?)
    }
}
