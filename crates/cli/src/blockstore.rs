//! `ferrofabric blockstore --config FILE`: the command-line entry of the block-store service
//! ([`ferrofabric_blockstore_service::start`]).

use std::path::PathBuf;

use ferrofabric_blockstore_service::BlockstoreConfig;

/// Arguments of `ferrofabric blockstore`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BlockstoreArgs {
    /// Configuration file (YAML, see `ferrofabric_blockstore_service::BlockstoreConfig`).
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// Overrides `DataDir`.
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Overrides `ListenAddress`, `host:port`.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Overrides `Committers` (repeat for several).
    #[arg(long = "committer", value_name = "ADDR")]
    pub committers: Vec<String>,
}

impl BlockstoreArgs {
    /// The file's configuration with the flags applied.
    ///
    /// Errors: unreadable or malformed file.
    pub(crate) fn to_config(&self) -> anyhow::Result<BlockstoreConfig> {
        let mut c = BlockstoreConfig::load(&self.config)?;
        if let Some(d) = &self.data_dir {
            c.data_dir = Some(d.clone());
        }
        if let Some(l) = &self.listen {
            c.listen_address = l.clone();
        }
        if !self.committers.is_empty() {
            c.committers = self.committers.clone();
        }
        Ok(c)
    }
}

/// Runs the service until Ctrl-C or SIGTERM or until storing fails. Prints one line
/// `blockstore ready: listen=ADDR operations=ADDR height=N` once it serves. Builds its own multi-threaded Tokio
/// runtime, so it must not be called from within one.
///
/// Errors: configuration, start-up and storage errors.
pub(crate) fn run(args: BlockstoreArgs) -> anyhow::Result<()> {
    let config = args.to_config()?;
    let runtime = crate::daemon_runtime("blockstore")?;
    runtime.block_on(async move {
        let node = ferrofabric_blockstore_service::start(config).await?;
        println!(
            "blockstore ready: listen={} operations={} height={}",
            node.listen_addr,
            node.operations_addr.map(|a| a.to_string()).unwrap_or_else(|| "-".into()),
            node.store.height()
        );
        Ok(node.run_until(ferrofabric_comm::wait_for_signal()).await?)
    })
}
