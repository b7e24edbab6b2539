//! Crash consistency of the committer as a real process (`ferrofabric committer`), pulling Fabric 2.5.16's 10,735-transaction bench ledger
//! from a real Ferrofabric orderer, is killed with SIGKILL at several moments (mid-stream, during its own recovery,
//! after the last block); after the final restart its chain and state equal those of an uninterrupted run: every
//! stored block byte-identical to what Fabric's peer stored (so every TRANSACTIONS_FILTER and COMMIT_HASH equal,
//! up to Fabric's final commit hash), and the state checkpoint equal to the state of an uninterrupted committer.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use crate::daemon::{self, Proc};
use crate::support::*;
use ferrofabric_committer::Checkpoint;

/// Fabric's commit hash after block 128 of the bench ledger (its README).
const FABRIC_FINAL_COMMIT_HASH: &str = "241d04473a43fa8b44bebd6d3f6bff6d346e566d930475dbc6b88b477cdba3a2";
const BLOCKS: u64 = 129;

fn spawn(config: &std::path::Path) -> Proc {
    daemon::spawn("committer", config)
}

/// Waits for the `committer ready:` line; returns (operations address, recovered height).
fn ready(p: &Proc) -> (String, u64) {
    let [addr, height] = daemon::ready(p, "committer", Duration::from_secs(300), ["operations", "height"]);
    (addr, height.parse().unwrap())
}

/// `ledger_blockchain_height` from the operations endpoint (0 while it cannot be read).
fn metrics_height(ops: &str) -> u64 {
    let Some((_, body)) = daemon::http_get(ops, "/metrics") else { return 0 };
    body.lines()
        .find(|l| l.starts_with("ledger_blockchain_height{"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn wait_metrics_height(ops: &str, at_least: u64, timeout: Duration) -> u64 {
    let deadline = Instant::now() + timeout;
    loop {
        let h = metrics_height(ops);
        if h >= at_least {
            return h;
        }
        assert!(Instant::now() < deadline, "height {at_least} not reached (at {h})");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn kill9(mut p: Proc) {
    p.child.kill().unwrap(); // SIGKILL on Unix
    p.child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_any_moment_then_restart_reaches_the_same_state_and_commit_hashes() {
    let (orderer_blocks, fabric_peer_blocks) = bench_ledger();
    assert_eq!(orderer_blocks.len() as u64, BLOCKS);
    let mut orderer = TestOrderer::start(&orderer_blocks).await;

    // The uninterrupted reference run, in process, on the same orderer.
    let reference_dir = tempfile::tempdir().unwrap();
    let reference = {
        let mut c = committer_config(reference_dir.path(), vec![orderer.addr.clone()]);
        c.checkpoint_interval = 16;
        let started = Instant::now();
        let node = ferrofabric_committer::start(c).await.unwrap();
        tokio::time::timeout(Duration::from_secs(600), node.wait_for_height(BLOCKS)).await.unwrap().unwrap();
        eprintln!("uninterrupted run: {BLOCKS} blocks in {:?}", started.elapsed());
        node.shutdown().await.unwrap();
        Checkpoint::read(reference_dir.path()).unwrap().unwrap()
    };
    assert_eq!(reference.number, BLOCKS - 1);
    assert_eq!(hex::encode(reference.commit_hash.unwrap()), FABRIC_FINAL_COMMIT_HASH);

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let config_path = dir.path().join("committer.yaml");
    let mut config = committer_config(&data, vec![orderer.addr.clone()]);
    config.checkpoint_interval = 16;
    write_config_yaml(&config_path, &config);

    let crashed = tokio::task::spawn_blocking(move || {
        let mut stored_at_kill = 0u64;
        let mut kills = Vec::new();
        // Mid-stream kills at increasing heights; one kill while the restarted process re-validates its store.
        for (i, target) in [20u64, 55, 0, 90, 120].into_iter().enumerate() {
            if target == 0 {
                // Without its state checkpoint the restart re-validates every stored block from block 0 (with one it
                // resumes too quickly to be caught): the kill lands in that recovery, and the next restart also
                // recovers without a checkpoint.
                // A fast run may have been killed before its paced checkpoint writer finished the first one: then
                // there is none to remove, which is the situation wanted.
                match std::fs::remove_file(data.join(Checkpoint::FILE_NAME)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("removing the checkpoint: {e}"),
                    _ => {}
                }
            }
            let p = spawn(&config_path);
            if target == 0 {
                // Recovery runs before the ready line: kill in the middle of it.
                std::thread::sleep(Duration::from_millis(150));
                let in_recovery = p.lines.try_recv().is_err();
                kill9(p);
                eprintln!("kill {i}: during recovery: {in_recovery}");
                kills.push(in_recovery);
                continue;
            }
            let (ops, recovered) = ready(&p);
            assert!(
                recovered >= stored_at_kill,
                "restart {i}: recovered height {recovered} < {stored_at_kill} reported stored before the kill"
            );
            let h = wait_metrics_height(&ops, target, Duration::from_secs(300));
            kill9(p);
            assert!(h < BLOCKS, "kill {i} at height {h} was not mid-stream");
            eprintln!("kill {i}: recovered {recovered}, killed at height {h}");
            stored_at_kill = h;
            kills.push(true);
        }
        // Final run to the end, killed once more after the last block and its checkpoint.
        let p = spawn(&config_path);
        let (ops, recovered) = ready(&p);
        assert!(recovered >= stored_at_kill);
        wait_metrics_height(&ops, BLOCKS, Duration::from_secs(300));
        let deadline = Instant::now() + Duration::from_secs(60);
        while Checkpoint::read(&data).ok().flatten().map(|c| c.number) != Some(BLOCKS - 1) {
            assert!(Instant::now() < deadline, "no checkpoint of the last block");
            std::thread::sleep(Duration::from_millis(20));
        }
        kill9(p);
        (data, kills)
    })
    .await
    .unwrap();
    let (data, kills) = crashed;
    assert_eq!(kills, vec![true; 5], "every kill happened mid-stream or mid-recovery");

    // The crashed committer's chain: byte-identical to Fabric's peer, hence the same filters and commit hashes.
    let store = ferrofabric_committer::open_store(&data, false).unwrap();
    assert_eq!(store.height(), BLOCKS);
    for (n, fabric) in fabric_peer_blocks.iter().enumerate() {
        let ours = store.block(n as u64).unwrap().unwrap();
        assert!(ours == *fabric, "block {n} differs from Fabric's peer after the crashes");
    }
    let (_, last_hash) =
        ferrofabric_committer::stored_peer_metadata(&store.block(BLOCKS - 1).unwrap().unwrap()).unwrap();
    assert_eq!(hex::encode(last_hash.unwrap()), FABRIC_FINAL_COMMIT_HASH);

    // Its state equals the uninterrupted run's.
    let crashed_state = Checkpoint::read(&data).unwrap().unwrap();
    assert_eq!(crashed_state.number, reference.number);
    assert_eq!(crashed_state.commit_hash, reference.commit_hash);
    assert_eq!(crashed_state.entries.len(), reference.entries.len());
    assert!(crashed_state.entries == reference.entries, "world state differs from the uninterrupted run");
    orderer.stop().await;
}
