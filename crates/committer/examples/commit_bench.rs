//! Commits Fabric 2.5.16's 10,735-transaction bench ledger (`fabric-2.5-bench`) pulled from a real Ferrofabric
//! orderer on loopback and prints committed tx/s and block latency: the committer daemon's throughput.
//!
//! `cargo run --release -p ferrofabric-committer --example commit_bench [-- BLOCKS_IN_FLIGHT THREADS]`

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/integration/support/mod.rs"]
mod support;

use std::time::Instant;

use support::*;

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().unwrap()).collect();
    let (orderer_blocks, _) = bench_ledger();
    let txs: Vec<usize> =
        orderer_blocks.iter().map(|b| ferrofabric_arena::BlockArena::decode(b.clone()).unwrap().txs().len()).collect();
    let total: usize = txs.iter().skip(1).sum();
    let mut orderer = TestOrderer::start(&orderer_blocks).await;
    let data = tempfile::tempdir().unwrap();
    let mut config = committer_config(data.path(), vec![orderer.addr.clone()]);
    config.checkpoint_interval = 500;
    if let Some(n) = args.first() {
        config.pipeline.blocks_in_flight = *n;
    }
    if let Some(n) = args.get(1) {
        config.pipeline.validation_threads = *n;
    }
    let started = Instant::now();
    let node = ferrofabric_committer::start(config).await.unwrap();
    let mut status = node.status();
    let mut first: Option<Instant> = None;
    let n = orderer_blocks.len() as u64;
    loop {
        let s = status.wait_for(|s| s.height >= 2 || s.failed.is_some()).await.unwrap().clone();
        assert!(s.failed.is_none(), "{:?}", s.failed);
        first.get_or_insert_with(Instant::now);
        if s.height >= n {
            break;
        }
        status.changed().await.unwrap();
        if status.borrow().height >= n {
            break;
        }
    }
    let end = Instant::now();
    let all = end - started;
    let steady = end - first.unwrap();
    let steady_txs: usize = txs.iter().skip(2).sum();
    println!(
        "committed {total} tx in {} blocks: {:.0} tx/s from start ({:.2}s); {:.0} tx/s from block 1 to block {} ({:.2}s)",
        n - 1,
        total as f64 / all.as_secs_f64(),
        all.as_secs_f64(),
        steady_txs as f64 / steady.as_secs_f64(),
        n - 1,
        steady.as_secs_f64()
    );
    if let Some(ops) = node.operations_addr {
        let body = metrics_text(&ops.to_string()).await;
        for l in body.lines().filter(|l| {
            l.starts_with("ledger_block_processing_time_sum") || l.starts_with("ledger_block_processing_time_count")
        }) {
            println!("{l}");
        }
    }
    node.shutdown().await.unwrap();
    orderer.stop().await;
}

/// The `/metrics` text of the operations endpoint at `addr`.
async fn metrics_text(addr: &str) -> String {
    let url = format!("http://{addr}/metrics");
    tokio::task::spawn_blocking(move || ureq::get(&url).call().unwrap().body_mut().read_to_string().unwrap())
        .await
        .unwrap()
}
