//! `ferrofabric peer node start`: a Fabric peer ([`ferrofabric_peer::start`]) on Fabric's `core.yaml`, found as
//! Fabric's `peer` finds it (`$FABRIC_CFG_PATH/core.yaml`), with the `CORE_*` environment overrides of a
//! docker-compose file.

use std::path::PathBuf;

use anyhow::Context;
use ferrofabric_peer::PeerConfig;

/// Arguments of `ferrofabric peer node start`.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct PeerStartArgs {
    /// Configuration file (Fabric's core.yaml); without it `$FABRIC_CFG_PATH/core.yaml`, else `./core.yaml`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

impl PeerStartArgs {
    /// The configuration file's settings with the process's `CORE_*` overrides.
    ///
    /// Errors: no file found, or an unreadable or malformed one.
    pub(crate) fn to_config(&self) -> anyhow::Result<PeerConfig> {
        let path = self
            .config
            .clone()
            .or_else(|| ferrofabric_comm::fabric_cfg_file("core.yaml"))
            .or_else(|| Some(PathBuf::from("core.yaml")).filter(|p| p.is_file()))
            .context("core.yaml not found: set FABRIC_CFG_PATH to its directory or pass --config")?;
        PeerConfig::load(&path)
    }
}

/// Runs the peer until Ctrl-C or SIGTERM, then stops it cleanly (each channel's committer leaves a checkpoint).
/// Prints one line `peer ready: address=ADDR channels=[...]` once it serves. Builds its own multi-threaded Tokio
/// runtime, so it must not be called from within one.
///
/// Errors: configuration and start-up errors.
pub(crate) fn run(args: PeerStartArgs) -> anyhow::Result<()> {
    let config = args.to_config()?;
    let runtime = crate::daemon_runtime("peer")?;
    runtime.block_on(async move {
        let peer = ferrofabric_peer::start(config).await?;
        println!(
            "peer ready: address={} operations={} channels={:?}",
            peer.addr,
            peer.operations_addr.map(|a| a.to_string()).unwrap_or_else(|| "-".into()),
            peer.heights()
        );
        ferrofabric_comm::wait_for_signal().await;
        peer.shutdown().await
    })
}
