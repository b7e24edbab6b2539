//! `ferrofabric channel ...`: the command-line face of `ferrofabric-configtxgen` (Fabric's
//! `configtxgen -outputBlock`) and of consenter-set updates of BFT channels (what Fabric's operators do by hand
//! with `configtxlator`).

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
    /// Writes the config update that removes and adds consenters of a BFT channel, `BlockValidation` rewritten
    /// for the new set as Fabric 3's orderers demand; unsigned, for `peer channel signconfigtx` and
    /// `peer channel update`.
    BftConsenters(BftConsentersArgs),
}

/// Arguments of `ferrofabric channel bft-consenters`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct BftConsentersArgs {
    /// The channel's current config block (e.g. from `peer channel fetch config`).
    #[arg(long, value_name = "FILE")]
    pub config_block: PathBuf,
    /// A consenter id to remove (repeatable).
    #[arg(long, value_name = "ID")]
    pub remove: Vec<u32>,
    /// The id of a consenter to add; the other `--add-*` options describe it, as a `ConsenterMapping` entry of
    /// configtx.yaml does.
    #[arg(long, value_name = "ID", requires_all = ["add_host", "add_port", "add_msp_id", "add_identity", "add_client_tls_cert", "add_server_tls_cert"])]
    pub add_id: Option<u32>,
    /// Its cluster host.
    #[arg(long, value_name = "HOST")]
    pub add_host: Option<String>,
    /// Its cluster port.
    #[arg(long, value_name = "PORT")]
    pub add_port: Option<u32>,
    /// Its MSP ID.
    #[arg(long, value_name = "MSPID")]
    pub add_msp_id: Option<String>,
    /// Its signing certificate (PEM file): the identity its block signatures are checked against.
    #[arg(long, value_name = "FILE")]
    pub add_identity: Option<PathBuf>,
    /// Its client TLS certificate (PEM file).
    #[arg(long, value_name = "FILE")]
    pub add_client_tls_cert: Option<PathBuf>,
    /// Its server TLS certificate (PEM file).
    #[arg(long, value_name = "FILE")]
    pub add_server_tls_cert: Option<PathBuf>,
    /// Where to write the unsigned CONFIG_UPDATE envelope.
    #[arg(long, value_name = "FILE")]
    pub output: PathBuf,
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
    ferrofabric_comm::fabric_cfg_file("configtx.yaml").unwrap_or_else(|| PathBuf::from("configtx.yaml"))
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
        ChannelCommand::BftConsenters(args) => bft_consenters(&args),
    }
}

/// `ferrofabric channel bft-consenters`: reads the config block, edits `Orderers.consenter_mapping` and
/// `BlockValidation` (the `Q`-of-`n` policy over the new set, [`ferrofabric_channelconfig::bft_block_validation_policy`]),
/// computes the update as Fabric's `configtxlator compute_update` does and writes it unsigned. Prints one line.
///
/// Errors: an unreadable block or certificate, a channel that is not BFT, an id to remove that is not a consenter or
/// an id to add that is one, an empty result, an unwritable output.
fn bft_consenters(args: &BftConsentersArgs) -> anyhow::Result<()> {
    let raw = std::fs::read(&args.config_block).with_context(|| format!("reading {}", args.config_block.display()))?;
    let block =
        ferrofabric_protos::common::Block::decode(raw.as_slice()).context("the config block does not decode")?;
    let current = ferrofabric_channelconfig::ChannelConfig::from_config_block(&block).context("the config block")?;
    let channel = current.channel_id().to_owned();
    let original = current.config().clone();
    let mut updated = original.clone();
    let orderer = updated
        .channel_group
        .as_mut()
        .and_then(|g| g.groups.get_mut("Orderer"))
        .filter(|_| current.orderer().is_some_and(|o| o.consensus_type() == "BFT"))
        .ok_or_else(|| anyhow::anyhow!("channel {channel} is not a BFT channel"))?;
    let value = orderer.values.get_mut("Orderers").ok_or_else(|| anyhow::anyhow!("no Orderers value"))?;
    let mut orderers = ferrofabric_protos::common::Orderers::decode(value.value.clone()).context("Orderers value")?;
    let mapping = &mut orderers.consenter_mapping;
    for id in &args.remove {
        let before = mapping.len();
        mapping.retain(|c| c.id != *id);
        anyhow::ensure!(mapping.len() < before, "consenter {id} is not a consenter of channel {channel}");
    }
    if let Some(id) = args.add_id {
        anyhow::ensure!(
            mapping.iter().all(|c| c.id != id),
            "consenter {id} is a consenter of channel {channel} already"
        );
        let spec = ferrofabric_configtxgen::BftConsenter {
            id,
            host: args.add_host.clone().unwrap_or_default(),
            port: args.add_port.unwrap_or_default(),
            msp_id: args.add_msp_id.clone().unwrap_or_default(),
            identity: args.add_identity.clone().unwrap_or_default(),
            client_tls_cert: args.add_client_tls_cert.clone().unwrap_or_default(),
            server_tls_cert: args.add_server_tls_cert.clone().unwrap_or_default(),
        };
        mapping.push(ferrofabric_configtxgen::bft_consenter(&spec)?);
    }
    anyhow::ensure!(!mapping.is_empty(), "a BFT channel needs at least one consenter");
    let policy = ferrofabric_channelconfig::bft_block_validation_policy(mapping);
    let n = mapping.len();
    value.value = bytes::Bytes::from(orderers.encode_to_vec());
    orderer
        .policies
        .get_mut("BlockValidation")
        .ok_or_else(|| anyhow::anyhow!("no BlockValidation policy in the Orderer group"))?
        .policy = Some(policy);
    let update = ferrofabric_configtx::compute_update(&channel, &original, &updated)?;
    let envelope = ferrofabric_configtx::unsigned_config_update_envelope(&channel, &update);
    std::fs::write(&args.output, envelope.encode_to_vec())
        .with_context(|| format!("writing {}", args.output.display()))?;
    println!(
        "{}: config update of channel {channel}: {n} consenters, BlockValidation {} of {n}",
        args.output.display(),
        ferrofabric_channelconfig::bft_quorum(n)
    );
    Ok(())
}
