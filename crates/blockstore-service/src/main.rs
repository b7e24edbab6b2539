//! Stand-alone `ferrofabric-blockstore` binary (the same as `ferrofabric blockstore`), used by the crash test to run
//! the service as a real process.

use clap::Parser;

/// Ferrofabric's block-store service.
#[derive(Debug, Parser)]
#[command(name = "ferrofabric-blockstore", version)]
struct Cli {
    #[command(flatten)]
    args: ferrofabric_blockstore_service::cli::BlockstoreArgs,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    ferrofabric_blockstore_service::cli::run(Cli::parse().args)
}
