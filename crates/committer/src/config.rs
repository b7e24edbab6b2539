//! The committer's configuration file, [`CommitterConfig`] (whose documentation gives the file layout).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use ferrofabric_comm::{parse_addr, parse_duration, ClientTlsConfig, TlsConfig as ServerTlsConfig};
use ferrofabric_deliver::DeliveryConfig;
use serde::Deserialize;

/// FastFabric Fig. 7's two knobs.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct PipelineConfig {
    /// Blocks received from the orderer and not yet committed, at most (the fetch buffer ahead of the pipelined
    /// validator, which itself works on two blocks at a time); also bounds the queue to the block store writer.
    pub blocks_in_flight: usize,
    /// Threads of the validation pool; 0 = one per core.
    pub validation_threads: usize,
}

impl Default for PipelineConfig {
    fn default() -> Self {
        PipelineConfig { blocks_in_flight: 16, validation_threads: 0 }
    }
}

/// The whole committer configuration.
///
/// The committer's configuration file: YAML with Fabric-style PascalCase keys, in the spirit of the `peer` section
/// of Fabric's `core.yaml` (`peer.deliveryclient`, `peer.authentication.timewindow`, `operations`), reduced to what a
/// committing peer needs, plus FastFabric's two pipeline knobs.
///
/// ```yaml
/// Channel: mychannel                 # optional; checked against the genesis block
/// GenesisBlock: genesis.block        # needed for the first start only (the block store keeps it afterwards)
/// DataDir: data/committer            # block store (ledger/) and state checkpoint (checkpoint)
/// LocalMSPDir: crypto/.../peer0.org1.example.com/msp
/// LocalMSPID: Org1MSP
/// Orderers: ["127.0.0.1:7050"]       # tried in turn; the committer fails over between them
/// OrdererTLS: {Enabled: false, RootCAs: [], ServerNameOverride: "", ClientCertificate: "", ClientKey: ""}
/// ListenAddress: 127.0.0.1:7051      # Fabric's peer Deliver service
/// TLS: {Enabled: false, Certificate: "", PrivateKey: "", ClientRootCAs: [], ClientAuthRequired: false}
/// OperationsListenAddress: 127.0.0.1:9443   # /metrics, /healthz; empty disables
/// Pipeline: {BlocksInFlight: 16, ValidationThreads: 0}
/// CheckpointInterval: 500            # blocks between state checkpoints
/// SyncEveryBlock: false
/// TimeWindow: 15m                    # peer.authentication.timewindow
/// Delivery: {ConnectTimeout: 3s, ReconnectBackoffThreshold: 10s, BlockCensorshipTimeout: 30s}  # the last: BFT channels
/// ```
///
/// Relative paths are resolved against the directory of the file. Durations use Go's syntax (`500ms`, `2s`, `15m`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase", default)]
pub struct CommitterConfig {
    /// Channel ID; when set it must equal the genesis block's.
    pub channel: Option<String>,
    /// The channel's genesis (config) block; required when the block store is empty.
    pub genesis_block: Option<PathBuf>,
    /// Directory of the block store (`ledger/`) and the state checkpoint (`checkpoint`).
    pub data_dir: Option<PathBuf>,
    /// Local MSP directory (signs Deliver requests to the orderers).
    #[serde(rename = "LocalMSPDir")]
    pub local_msp_dir: Option<PathBuf>,
    /// Local MSP ID.
    #[serde(rename = "LocalMSPID")]
    pub local_msp_id: Option<String>,
    /// Orderer addresses `host:port`.
    pub orderers: Vec<String>,
    /// TLS towards the orderers.
    #[serde(rename = "OrdererTLS")]
    pub orderer_tls: ClientTlsConfig,
    /// Peer Deliver listen address `host:port` (port 0 picks a free port).
    pub listen_address: String,
    /// TLS of the Deliver listener.
    #[serde(rename = "TLS")]
    pub tls: ServerTlsConfig,
    /// Operations (metrics, health) listen address; empty disables it.
    pub operations_listen_address: String,
    /// Pipeline knobs.
    pub pipeline: PipelineConfig,
    /// Blocks between two state checkpoints (at least 1).
    pub checkpoint_interval: u64,
    /// fsync the block store on every block (otherwise at checkpoints and on shutdown; a process crash loses nothing
    /// either way, a power loss may lose blocks after the last checkpoint, which are fetched again).
    pub sync_every_block: bool,
    /// How far a Deliver request's timestamp may be from this node's clock (Go duration).
    pub time_window: String,
    /// Orderer connection behaviour.
    pub delivery: DeliveryConfig,
    /// A BMac block processor that validates blocks for this committer (hw/DESIGN.md): `sim:NxM`, the RTL
    /// co-simulated under Verilator with N transaction validators of M endorsement engines (a configuration built
    /// into this binary, `FERROFABRIC_HW_CONFIGS`); `udp:HOST:PORT`, a card on the network (`ferrofabric hw card`,
    /// hw/DESIGN.md §7); `relayed:HOST:PORT`, such a card fed by a relay beside the orderer (`ferrofabric hw relay`,
    /// [`crate::start_relay`]); `alveo:DEVICE`, a card on an Alveo board behind the XDMA driver, DEVICE being its
    /// device prefix, e.g. `alveo:/dev/xdma0` (hw/DESIGN.md §8). Unset: the software validator.
    pub accelerator: Option<String>,
}

/// The block processor that [`CommitterConfig::accelerator`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accelerator {
    /// The co-simulated card with `n` validators of `m` endorsement engines, in this process; only a committer
    /// built with the `bmac-sim` feature has it (without, the committer refuses to start with this accelerator).
    Sim {
        /// Transaction validators.
        n: u32,
        /// Endorsement engines per validator.
        m: u32,
    },
    /// A card on the network at this UDP address (hw/DESIGN.md §7).
    Udp(std::net::SocketAddr),
    /// A card on an Alveo board whose XDMA device files start with this prefix, e.g. `/dev/xdma0` (hw/DESIGN.md §8).
    Alveo(std::path::PathBuf),
    /// A card on the network at this UDP address that a relay beside the orderer feeds ([`crate::start_relay`],
    /// hw/DESIGN.md §7): the committer only reads its results.
    Relayed(std::net::SocketAddr),
}

impl Accelerator {
    /// Parses `sim:NxM` (e.g. `sim:8x2`), `udp:HOST:PORT` (e.g. `udp:127.0.0.1:7063`; the host name is resolved
    /// once, here), `relayed:HOST:PORT` (likewise) or `alveo:DEVICE` (e.g. `alveo:/dev/xdma0`).
    ///
    /// Errors: another form, an address that does not resolve, or an empty DEVICE.
    pub fn parse(spec: &str) -> anyhow::Result<Accelerator> {
        for (prefix, link) in [("udp:", Accelerator::Udp as fn(_) -> _), ("relayed:", Accelerator::Relayed)] {
            if let Some(addr) = spec.strip_prefix(prefix) {
                use std::net::ToSocketAddrs;
                let resolved = addr.to_socket_addrs().ok().and_then(|mut a| a.next());
                return resolved.map(link).ok_or_else(|| {
                    anyhow::anyhow!("Accelerator {spec:?}: expected {prefix}HOST:PORT with a host that resolves")
                });
            }
        }
        if let Some(cfg) = spec.strip_prefix("sim:") {
            let parsed = cfg.split_once('x').and_then(|(n, m)| Some((n.parse().ok()?, m.parse().ok()?)));
            return match parsed {
                Some((n, m)) if n > 0 && m > 0 => Ok(Accelerator::Sim { n, m }),
                _ => bail!("Accelerator {spec:?}: expected sim:NxM, e.g. sim:8x2"),
            };
        }
        if let Some(device) = spec.strip_prefix("alveo:") {
            if device.is_empty() {
                bail!("Accelerator {spec:?}: expected alveo:DEVICE, e.g. alveo:/dev/xdma0");
            }
            return Ok(Accelerator::Alveo(device.into()));
        }
        bail!("Accelerator {spec:?}: expected sim:NxM, udp:HOST:PORT, relayed:HOST:PORT or alveo:DEVICE")
    }
}

impl Default for CommitterConfig {
    fn default() -> Self {
        CommitterConfig {
            channel: None,
            genesis_block: None,
            data_dir: None,
            local_msp_dir: None,
            local_msp_id: None,
            orderers: Vec::new(),
            orderer_tls: ClientTlsConfig::default(),
            listen_address: "127.0.0.1:7051".into(),
            tls: ServerTlsConfig::default(),
            operations_listen_address: String::new(),
            pipeline: PipelineConfig::default(),
            checkpoint_interval: 500,
            sync_every_block: false,
            time_window: "15m".into(),
            delivery: DeliveryConfig::default(),
            accelerator: None,
        }
    }
}

impl CommitterConfig {
    /// Reads a YAML file; relative paths in it are made relative to the file's directory.
    ///
    /// Errors: unreadable file, YAML that does not match the layout.
    pub fn load(path: &Path) -> anyhow::Result<CommitterConfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut c: CommitterConfig =
            serde_yaml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let base = path.parent().unwrap_or_else(|| Path::new("."));
        c.resolve_paths(base);
        Ok(c)
    }

    /// Makes every relative path absolute under `base`.
    pub fn resolve_paths(&mut self, base: &Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        for p in [&mut self.genesis_block, &mut self.data_dir, &mut self.local_msp_dir].into_iter().flatten() {
            fix(p);
        }
        self.orderer_tls.resolve_paths(base);
        self.tls.resolve_paths(base);
    }

    /// Checks the values that have no usable default.
    ///
    /// Errors: no data directory, MSP, orderer; a zero checkpoint interval or pipeline depth; bad durations.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.data_dir.is_none() {
            bail!("DataDir is not set");
        }
        if self.local_msp_dir.is_none() || self.local_msp_id.is_none() {
            bail!("LocalMSPDir and LocalMSPID must be set (the committer signs its Deliver requests)");
        }
        if self.orderers.is_empty() {
            bail!("Orderers is empty");
        }
        if self.checkpoint_interval == 0 {
            bail!("CheckpointInterval must be at least 1");
        }
        if self.pipeline.blocks_in_flight == 0 {
            bail!("Pipeline.BlocksInFlight must be at least 1");
        }
        parse_addr(&self.listen_address)?;
        if !self.operations_listen_address.is_empty() {
            parse_addr(&self.operations_listen_address)?;
        }
        parse_duration(&self.time_window)?;
        if let Some(spec) = &self.accelerator {
            Accelerator::parse(spec)?;
        }
        Ok(self.delivery.validate()?)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("1m30s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("10").is_err());
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn yaml_loads_with_relative_paths_resolved() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("committer.yaml");
        std::fs::write(
            &path,
            "GenesisBlock: g.block\nDataDir: data\nLocalMSPDir: msp\nLocalMSPID: Org1MSP\nOrderers: [\"127.0.0.1:7050\"]\n\
             Pipeline: {BlocksInFlight: 4, ValidationThreads: 2}\nCheckpointInterval: 10\n",
        )
        .unwrap();
        let c = CommitterConfig::load(&path).unwrap();
        c.validate().unwrap();
        assert_eq!(c.genesis_block.unwrap(), dir.path().join("g.block"));
        assert_eq!(c.data_dir.unwrap(), dir.path().join("data"));
        assert_eq!(c.pipeline, PipelineConfig { blocks_in_flight: 4, validation_threads: 2 });
        assert_eq!(c.checkpoint_interval, 10);
        assert_eq!(c.listen_address, "127.0.0.1:7051");
    }

    #[test]
    fn missing_essentials_are_reported() {
        let c = CommitterConfig::default();
        assert!(c.validate().unwrap_err().to_string().contains("DataDir"));
    }
}
