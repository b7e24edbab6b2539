//! `ferrofabric committer --config FILE`: the command-line entry of the committing peer
//! ([`ferrofabric_committer::start`]).

use std::path::PathBuf;

use ferrofabric_committer::CommitterConfig;

/// Arguments of `ferrofabric committer`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CommitterArgs {
    /// Configuration file (YAML, see `ferrofabric_committer::CommitterConfig`).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Overrides `DataDir`.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Overrides `ListenAddress` (peer Deliver), `host:port`.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Overrides `OperationsListenAddress` (`/metrics`, `/healthz`); empty disables it.
    #[arg(long, value_name = "ADDR")]
    pub operations_listen: Option<String>,
    /// Overrides `Orderers` (repeat for several).
    #[arg(long = "orderer", value_name = "ADDR")]
    pub orderers: Vec<String>,
    /// Overrides `Accelerator`: `sim:NxM` validates blocks on the co-simulated BMac card (e.g. `sim:8x2`),
    /// `udp:HOST:PORT` on a card on the network (`ferrofabric hw card`), `relayed:HOST:PORT` on such a card fed by
    /// a relay beside the orderer (`ferrofabric hw relay`), `alveo:DEVICE` on a card on an Alveo board behind the
    /// XDMA driver (e.g. `alveo:/dev/xdma0`).
    #[arg(long, value_name = "SPEC")]
    pub accelerator: Option<String>,
}

impl CommitterArgs {
    /// The file's configuration with the flags applied.
    ///
    /// Errors: unreadable or malformed file.
    pub(crate) fn to_config(&self) -> anyhow::Result<CommitterConfig> {
        let mut c = CommitterConfig::load(&self.config)?;
        if let Some(d) = &self.data_dir {
            c.data_dir = Some(d.clone());
        }
        if let Some(l) = &self.listen {
            c.listen_address = l.clone();
        }
        if let Some(o) = &self.operations_listen {
            c.operations_listen_address = o.clone();
        }
        if !self.orderers.is_empty() {
            c.orderers = self.orderers.clone();
        }
        if let Some(a) = &self.accelerator {
            c.accelerator = Some(a.clone());
        }
        Ok(c)
    }
}

/// Runs a committer until Ctrl-C or SIGTERM (then shuts down cleanly, leaving a final checkpoint) or until its
/// pipeline fails. Prints one line `committer ready: deliver=ADDR operations=ADDR height=N` once it serves. Builds
/// its own multi-threaded Tokio runtime, so it must not be called from within one.
///
/// Errors: configuration, start-up and pipeline errors.
pub(crate) fn run(args: CommitterArgs) -> anyhow::Result<()> {
    let config = args.to_config()?;
    let runtime = crate::daemon_runtime("committer")?;
    runtime.block_on(async move {
        let node = ferrofabric_committer::start(config).await?;
        println!(
            "committer ready: deliver={} operations={} height={}",
            node.deliver_addr,
            node.operations_addr.map(|a| a.to_string()).unwrap_or_else(|| "-".into()),
            node.store.height()
        );
        node.run_until(ferrofabric_comm::wait_for_signal()).await
    })
}
