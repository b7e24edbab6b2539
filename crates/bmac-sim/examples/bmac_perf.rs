//! Throughput and latency of the co-simulated BMac card (the figures of docs/PERFORMANCE.md).
//!
//! ```text
//! FERROFABRIC_HW_CONFIGS=4x2,8x2,16x2 cargo run --release -p ferrofabric-bmac-sim --example bmac_perf -- 100,250 2
//! ```
//!
//! For each configuration built and each block size: a testkit ledger of conflict-free two-key transfers
//! (FastFabric's workload: 2 reads, 2 writes, endorsed by both orgs' peers under MAJORITY Endorsement, i.e.
//! 2-of-2). The setup blocks (chaincode definition, account creation) take the host path. The transfer
//! blocks are then fed back to back and timed in card cycles (reported at 250 MHz).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use ferrofabric_bmac::BlockProcessor;
use ferrofabric_bmac_sim::{available_sim_configs, cosim_processor, Card};
use ferrofabric_testkit::{transfer_ledger, Network};
use prost::Message;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let sizes: Vec<usize> =
        args.get(1).map_or("100,250", String::as_str).split(',').map(|s| s.parse().unwrap()).collect();
    let measured: usize = args.get(2).map_or(2, |s| s.parse().unwrap());
    let configs = available_sim_configs();
    assert!(!configs.is_empty(), "no Verilator model built (set FERROFABRIC_HW_CONFIGS and rebuild)");
    let net = Network::generate(11).unwrap();
    println!("| config | block size | blocks | tx/s at 250 MHz (steady) | tx/s incl. first block | latency of one block (cycles, µs) |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for size in &sizes {
        let blocks = transfer_ledger(&net, 5, (size * measured) as u64, *size, 32).unwrap();
        let raw: Vec<Bytes> = blocks.iter().map(|b| Bytes::from(b.encode_to_vec())).collect();
        let transfers = raw.len() - measured;
        for &(n, m) in &configs {
            let mut p = cosim_processor(raw[0].clone(), n, m).unwrap();
            for b in &raw[1..transfers] {
                p.process(b.clone()).unwrap();
            }
            let run = p.run_pipelined(&raw[transfers..]).unwrap();
            let steady = run.steady_txs as f64 * 250e6 / run.steady_cycles.max(1) as f64;
            let total = run.txs as f64 * 250e6 / run.cycles.max(1) as f64;
            let lat = run.latencies[0];
            println!(
                "| {n}x{m} | {size} | {} | {steady:.0} | {total:.0} | {lat} ({:.0} µs) |",
                run.blocks,
                f64::from(lat) / 250.0
            );
            let stats = p.link_mut::<Card>().expect("a card in this process").stats().unwrap();
            eprintln!("{n}x{m} size {size}: {run:?}; card {stats:?}");
        }
    }
}
