//! Crash consistency of the block-store service (`ferrofabric blockstore`): as a real process it follows a committer that commits Fabric 2.5.16's
//! 10,735-transaction bench ledger from a real orderer; it is killed with SIGKILL mid-stream several times and
//! restarted; at the end its chain is the committer's, block for block and byte for byte: no block lost, none
//! duplicated, no gap.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use crate::daemon::{self, Proc};
use crate::support::*;
use ferrofabric_protos::ferrofabric::blockstore::block_store_client::BlockStoreClient;
use ferrofabric_protos::ferrofabric::blockstore::ChainInfoRequest;

const BLOCKS: u64 = 129;

fn spawn(config: &std::path::Path) -> Proc {
    daemon::spawn("blockstore", config)
}

/// Waits for the `blockstore ready:` line; returns (listen address, height after opening the store).
fn ready(p: &Proc) -> (String, u64) {
    let [addr, height] = daemon::ready(p, "blockstore", Duration::from_secs(120), ["listen", "height"]);
    (addr, height.parse().unwrap())
}

async fn height(addr: &str) -> u64 {
    match BlockStoreClient::connect(format!("http://{addr}")).await {
        Ok(mut c) => c.get_chain_info(ChainInfoRequest {}).await.map(|r| r.into_inner().height).unwrap_or(0),
        Err(_) => 0,
    }
}

async fn wait_height(addr: &str, at_least: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let h = height(addr).await;
        if h >= at_least {
            return h;
        }
        assert!(Instant::now() < deadline, "height {at_least} not reached (at {h})");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn kill9(mut p: Proc) {
    p.child.kill().unwrap(); // SIGKILL on Unix
    p.child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_stream_then_restart_loses_no_block() {
    let (orderer_blocks, _) = bench_ledger();
    let mut orderer = TestOrderer::start(&orderer_blocks).await;
    let cdata = tempfile::tempdir().unwrap();
    let committer =
        ferrofabric_committer::start(committer_config(cdata.path(), vec![orderer.addr.clone()])).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config_path = dir.path().join("blockstore.yaml");
    std::fs::write(
        &config_path,
        format!(
            "Channel: mychannel\nDataDir: {}\nLocalMSPDir: {}\nLocalMSPID: Org2MSP\nCommitters: [\"{}\"]\n\
             ListenAddress: \"127.0.0.1:0\"\nDelivery: {{ReconnectBackoffThreshold: 1s}}\n",
            data.display(),
            user1_msp(2).display(),
            committer.deliver_addr
        ),
    )
    .unwrap();

    let mut seen = 0u64;
    for (i, target) in [15u64, 50, 85, 115].into_iter().enumerate() {
        let p = spawn(&config_path);
        let (addr, reopened) = ready(&p);
        assert!(reopened >= seen, "restart {i}: the store reopened at {reopened} after {seen} blocks were reported");
        let h = wait_height(&addr, target).await;
        kill9(p);
        assert!(h < BLOCKS, "kill {i} at height {h} was not mid-stream");
        eprintln!("kill {i}: reopened at {reopened}, killed at height {h}");
        seen = h;
    }
    let p = spawn(&config_path);
    let (addr, reopened) = ready(&p);
    assert!(reopened >= seen);
    wait_height(&addr, BLOCKS).await;
    kill9(p);

    // The committer's chain, block for block.
    committer.wait_for_height(BLOCKS).await.unwrap();
    let ours = ferrofabric_block_store::BlockStore::open(&data.join("ledger"), Default::default()).unwrap();
    assert_eq!(ours.height(), BLOCKS);
    for n in 0..BLOCKS {
        assert!(ours.block(n).unwrap() == committer.store.block(n).unwrap(), "block {n} differs from the committer's");
    }
    committer.shutdown().await.unwrap();
    orderer.stop().await;
}
