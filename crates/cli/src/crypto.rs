//! `ferrofabric crypto ...`: the command-line face of `ferrofabric-cryptogen` (Fabric's `cryptogen generate` and
//! `cryptogen showtemplate`).

use std::path::PathBuf;

use anyhow::Context;

use ferrofabric_cryptogen::{Crypto, CryptoConfig, GenerateOptions, DEFAULT_CRYPTO_CONFIG};

/// Arguments of `ferrofabric crypto`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct CryptoArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: CryptoCommand,
}

/// Subcommands of `ferrofabric crypto`.
#[derive(Debug, Clone, clap::Subcommand)]
pub(crate) enum CryptoCommand {
    /// Generates CAs, MSP folders, keys and TLS certificates in cryptogen's directory layout.
    Generate(GenerateArgs),
    /// Prints an example crypto-config.yaml (the one `generate` uses without `--config`).
    Showtemplate,
}

/// Arguments of `ferrofabric crypto generate`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct GenerateArgs {
    /// crypto-config.yaml (Fabric cryptogen's format: OrdererOrgs / PeerOrgs); without it, the built-in
    /// template (two peer organisations, one orderer organisation, NodeOUs on).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Output directory; `peerOrganizations/` and `ordererOrganizations/` are created inside it.
    #[arg(long, value_name = "DIR", default_value = "crypto-config")]
    pub output: PathBuf,
    /// Makes the output reproducible: keys and serial numbers from this seed and every certificate valid
    /// from 2025-01-01T00:00:00Z (for tests; keys derived from a known seed are not secret).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}

/// Runs `ferrofabric crypto <command>`; `generate` prints one line per organisation written.
///
/// Errors: unreadable or invalid config, generation failures, unwritable output, all with context.
pub(crate) fn run(args: CryptoArgs) -> anyhow::Result<()> {
    match args.command {
        CryptoCommand::Showtemplate => {
            print!("{DEFAULT_CRYPTO_CONFIG}");
            Ok(())
        }
        CryptoCommand::Generate(args) => {
            let config = match &args.config {
                Some(path) => CryptoConfig::from_file(path)?,
                None => CryptoConfig::from_yaml(DEFAULT_CRYPTO_CONFIG)?,
            };
            let options = match args.seed {
                Some(seed) => GenerateOptions::deterministic(seed),
                None => GenerateOptions::default(),
            };
            let crypto = Crypto::generate(&config, &options).context("generating crypto material")?;
            crypto.write(&args.output)?;
            for org in crypto.orgs() {
                println!(
                    "{}: {} node(s), {} user(s)",
                    org.dir(&args.output).display(),
                    org.nodes().len(),
                    org.users().len()
                );
            }
            Ok(())
        }
    }
}
