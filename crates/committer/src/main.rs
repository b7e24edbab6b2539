//! Stand-alone `ferrofabric-committer` binary (the same as `ferrofabric committer`), used by the crash tests to run
//! the committer as a real process.

use clap::Parser;

/// Ferrofabric's committing peer.
#[derive(Debug, Parser)]
#[command(name = "ferrofabric-committer", version)]
struct Cli {
    #[command(flatten)]
    args: ferrofabric_committer::cli::CommitterArgs,
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    ferrofabric_committer::cli::run(Cli::parse().args)
}
