//! `ferrofabric endorser`: an endorsing peer of one channel. Configuration is a small YAML file whose keys mirror
//! the flags (see [`ferrofabric_endorser::EndorserFile`]); flags override the file.

use std::path::PathBuf;

use anyhow::Context;
use ferrofabric_endorser::{default_listen, start, EndorserConfig, EndorserFile};

/// Arguments of `ferrofabric endorser`.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct EndorserArgs {
    /// Configuration file (YAML, keys as the flags below with `_` for `-`).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// gRPC listen address `host:port` (default 127.0.0.1:7051).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// The peer's MSP directory in cryptogen's layout (signcerts/, keystore/).
    #[arg(long, value_name = "DIR")]
    pub msp_dir: Option<PathBuf>,
    /// The peer's MSP ID (e.g. Org1MSP).
    #[arg(long, value_name = "ID")]
    pub msp_id: Option<String>,
    /// The channel's genesis (config) block.
    #[arg(long, value_name = "FILE", alias = "channel-config")]
    pub genesis: Option<PathBuf>,
    /// The committer's peer Deliver endpoint to follow (`http://host:port`); without it the state stays at genesis.
    #[arg(long, value_name = "URL")]
    pub committer: Option<String>,
}

impl EndorserArgs {
    /// The configuration: the file (if any) with the flags applied; relative paths in the file are relative to it.
    ///
    /// Errors: unreadable or malformed file, or `msp_dir`, `msp_id` or `genesis` missing from both.
    pub(crate) fn to_config(&self) -> anyhow::Result<EndorserConfig> {
        let file = match &self.config {
            Some(path) => EndorserFile::load(path)?,
            None => EndorserFile::default(),
        };
        Ok(EndorserConfig {
            listen: self.listen.clone().or(file.listen).unwrap_or_else(default_listen),
            msp_dir: self.msp_dir.clone().or(file.msp_dir).context("msp_dir is required")?,
            msp_id: self.msp_id.clone().or(file.msp_id).context("msp_id is required")?,
            genesis: self.genesis.clone().or(file.genesis).context("genesis is required")?,
            committer: self.committer.clone().or(file.committer),
            tls: file.tls.unwrap_or_default(),
            committer_tls: file.committer_tls.unwrap_or_default(),
            operations_listen: file.operations_listen,
            gateway: file.gateway,
            file_system_path: file.file_system_path,
            chaincode_listen: file.chaincode_listen,
            history_database: file.history_database.unwrap_or(false),
        })
    }
}

/// Runs `ferrofabric endorser` until Ctrl-C or SIGTERM. Builds its own multi-threaded Tokio runtime, so it must not
/// be called from within one.
///
/// Errors: configuration or start-up errors (see [`ferrofabric_endorser::start`]).
pub(crate) fn run(args: EndorserArgs) -> anyhow::Result<()> {
    let config = args.to_config()?;
    let runtime = crate::daemon_runtime("endorser")?;
    runtime.block_on(async move {
        let running = start(&config).await?;
        println!(
            "endorser {} listening on {} (channel {}, following {})",
            config.msp_id,
            running.addr,
            running.endorser.replica().channel_id(),
            config.committer.as_deref().unwrap_or("-")
        );
        ferrofabric_comm::wait_for_signal().await;
        running.shutdown().await;
        Ok(())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: EndorserArgs,
    }

    #[test]
    fn flags_override_the_file_and_required_settings_are_reported() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("endorser.yaml");
        std::fs::write(&file, "listen: 127.0.0.1:1\nmsp_dir: msp\nmsp_id: Org2MSP\ngenesis: mychannel.block\n")
            .unwrap();
        let cli = Cli::parse_from(["endorser", "--config", file.to_str().unwrap(), "--listen", "127.0.0.1:0"]);
        let config = cli.args.to_config().unwrap();
        assert_eq!(config.listen, "127.0.0.1:0");
        assert_eq!(config.msp_id, "Org2MSP");
        assert_eq!(config.msp_dir, dir.path().join("msp"));
        assert_eq!(config.genesis, dir.path().join("mychannel.block"));
        assert_eq!(config.committer, None);

        let err = Cli::parse_from(["endorser", "--msp-id", "Org1MSP"]).args.to_config().unwrap_err();
        assert!(err.to_string().contains("msp_dir is required"), "{err}");
        std::fs::write(&file, "listen: x\nunknown_key: 1\n").unwrap();
        assert!(Cli::parse_from(["endorser", "--config", file.to_str().unwrap()]).args.to_config().is_err());
    }
}
