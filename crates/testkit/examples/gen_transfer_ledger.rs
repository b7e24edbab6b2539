//! Writes a valid transfer-workload ledger (see `transfer_ledger`) in the
//! fixture file format and reports how fast transactions were generated.
//!
//! `cargo run --release -p ferrofabric-testkit --example gen_transfer_ledger -- OUT N [BLOCK_SIZE] [PAYLOAD] [SEED]`

use std::path::PathBuf;
use std::time::Instant;

use ferrofabric_protoutil::encode_records;
use ferrofabric_testkit::{transfer_ledger, Network};
use prost::Message;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: T) -> Result<T, String> {
    match args.get(i) {
        Some(s) => s.parse().map_err(|_| format!("argument {i} ({s}) is not a number")),
        None => Ok(default),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let out = PathBuf::from(args.get(1).ok_or("usage: gen_transfer_ledger OUT N [BLOCK_SIZE] [PAYLOAD] [SEED]")?);
    let n: u64 = arg(&args, 2, 10_000)?;
    let block_size: usize = arg(&args, 3, 100)?;
    let payload: usize = arg(&args, 4, 32)?;
    let seed: u64 = arg(&args, 5, 1)?;
    let net = Network::generate(seed)?;
    let start = Instant::now();
    let blocks = transfer_ledger(&net, seed, n, block_size, payload)?;
    let secs = start.elapsed().as_secs_f64();
    let txs: usize = blocks.iter().filter_map(|b| b.data.as_ref()).map(|d| d.data.len()).sum();
    let encoded: Vec<Vec<u8>> = blocks.iter().map(Message::encode_to_vec).collect();
    std::fs::write(&out, encode_records(encoded.iter().map(Vec::as_slice)))
        .map_err(|e| format!("{}: {e}", out.display()))?;
    println!(
        "{} blocks, {txs} transactions in {secs:.2}s ({:.0} tx/s, {} rayon threads) -> {}",
        blocks.len(),
        txs as f64 / secs,
        rayon::current_num_threads(),
        out.display()
    );
    Ok(())
}
