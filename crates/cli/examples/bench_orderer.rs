//! Runs the orderer benchmark without the `ferrofabric` binary:
//! `cargo run --release -p ferrofabric --example bench_orderer -- [--json] [--txs N] [--clients K] ...`
//! (the same arguments as `ferrofabric bench orderer`).

use clap::Parser;
use ferrofabric::{bench_orderer, OrdererBenchArgs};

/// Command line of the example.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: OrdererBenchArgs,
}

fn main() -> anyhow::Result<()> {
    bench_orderer(Cli::parse().args).map(|_| ())
}
