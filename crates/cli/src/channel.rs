//! `ferrofabric channel ...`: the command-line face of `ferrofabric-configtxgen` (Fabric's
//! `configtxgen -outputBlock`).

use std::path::PathBuf;

use anyhow::Context;
use prost::Message;

use ferrofabric_configtxgen::{genesis_block, ConfigTx};

/// Arguments of `ferrofabric channel`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ChannelArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ChannelCommand,
}

/// Subcommands of `ferrofabric channel`.
#[derive(Debug, Clone, clap::Subcommand)]
pub(crate) enum ChannelCommand {
    /// Writes a channel's genesis (config) block from a configtx.yaml profile, for the orderers' channel
    /// participation API (`osnadmin channel join`) and peers' `channel join`.
    Genesis(GenesisArgs),
}

/// Arguments of `ferrofabric channel genesis`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct GenesisArgs {
    /// configtx.yaml (Fabric configtxgen's format); relative paths in it are relative to its directory.
    /// Default: `$FABRIC_CFG_PATH/configtx.yaml`, else `./configtx.yaml`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The profile (under `Profiles:`) to encode.
    #[arg(long, value_name = "NAME")]
    pub profile: String,
    /// The channel ID (lower case letters, digits, `.` and `-`, starting with a letter).
    #[arg(long, value_name = "ID")]
    pub channel_id: String,
    /// Where to write the marshaled `common.Block`.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
}

/// The configtx.yaml to use when none is given, following configtxgen's search (`FABRIC_CFG_PATH`, then
/// the working directory).
fn default_config() -> PathBuf {
    if let Some(dir) = std::env::var_os("FABRIC_CFG_PATH").filter(|d| !d.is_empty()) {
        let candidate = PathBuf::from(dir).join("configtx.yaml");
        if candidate.is_file() {
            return candidate;
        }
    }
    PathBuf::from("configtx.yaml")
}

/// Runs `ferrofabric channel <command>`; `genesis` writes the block (mode 0640, as configtxgen) and
/// prints one line naming it.
///
/// Errors: unreadable or invalid configtx.yaml, unknown profile, encoding failures, unwritable output, all
/// with context.
pub(crate) fn run(args: ChannelArgs) -> anyhow::Result<()> {
    match args.command {
        ChannelCommand::Genesis(args) => {
            let path = args.config.clone().unwrap_or_else(default_config);
            let config = ConfigTx::load(&path)?;
            let profile = config.profile(&args.profile).with_context(|| format!("profile {}", args.profile))?;
            let block = genesis_block(&profile, &args.channel_id)
                .with_context(|| format!("encoding profile {} from {}", args.profile, path.display()))?;
            let bytes = block.encode_to_vec();
            std::fs::write(&args.output, &bytes).with_context(|| format!("writing {}", args.output.display()))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&args.output, std::fs::Permissions::from_mode(0o640))
                    .with_context(|| format!("setting permissions of {}", args.output.display()))?;
            }
            println!(
                "{}: genesis block of channel {} (profile {}, {} bytes)",
                args.output.display(),
                args.channel_id,
                args.profile,
                bytes.len()
            );
            Ok(())
        }
    }
}
