//! `ferrofabric`: the command line of Ferrofabric.
//!
//! * `ferrofabric ledger replay` — validate a ledger of orderer blocks from its genesis block, as a Fabric 2.5 peer
//!   would, and report the validation codes and commit hashes (see [`replay`]).

mod replay;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Ferrofabric: Hyperledger Fabric's ordering and commit path, in Rust.
#[derive(Parser)]
#[command(name = "ferrofabric", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Ledger tools.
    Ledger {
        #[command(subcommand)]
        command: LedgerCommand,
    },
}

#[derive(Subcommand)]
enum LedgerCommand {
    /// Replays a ledger of orderer blocks through the validator, from the channel's genesis (config) block.
    Replay {
        /// The channel's genesis block (a marshaled common.Block, as configtxgen writes it).
        #[arg(long)]
        genesis: PathBuf,
        /// The blocks: repeated [8-byte little-endian length][marshaled common.Block]; `.zst` files are decompressed.
        #[arg(long)]
        blocks: PathBuf,
        /// Where to write the JSON report: {"blocks":[{"number","validation_codes","commit_hash"}], ...}.
        #[arg(long)]
        report: PathBuf,
        /// Where to write the final public world state (the schema of the fixtures' state.json).
        #[arg(long)]
        state: Option<PathBuf>,
        /// Validation threads (0 = one per core).
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// No progress lines on stderr.
        #[arg(long)]
        quiet: bool,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("FERROFABRIC_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Ledger { command: LedgerCommand::Replay { genesis, blocks, report, state, threads, quiet } } => {
            replay::run(&replay::Args { genesis, blocks, report, state, threads, progress: !quiet })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferrofabric: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
