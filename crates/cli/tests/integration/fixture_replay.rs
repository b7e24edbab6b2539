//! `ferrofabric ledger replay` on the real Fabric 2.5.16 fixture ledger: the codes, commit hashes and final state
//! must be exactly those the Fabric peer produced (`expected.json`, `state.json`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

use ferrofabric_testkit::{fabric_fixture, fabric_fixtures_dir, fixture};
use serde_json::Value;

fn read_json(path: PathBuf) -> Value {
    serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

fn replay(blocks: &PathBuf, extra: &[&str]) -> (std::process::Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
        .args(["ledger", "replay", "--quiet", "--genesis"])
        .arg(fabric_fixture("genesis.block"))
        .arg("--blocks")
        .arg(blocks)
        .arg("--report")
        .arg(dir.path().join("report.json"))
        .arg("--state")
        .arg(dir.path().join("state.json"))
        .args(extra)
        .output()
        .unwrap();
    (out, dir)
}

#[test]
fn replay_reproduces_fabric_codes_commit_hashes_and_state() {
    let fx = fabric_fixtures_dir();
    for threads in ["1", "2"] {
        let (out, dir) = replay(&fx.join("orderer-blocks.bin"), &["--threads", threads]);
        assert!(out.status.success(), "replay failed: {}", String::from_utf8_lossy(&out.stderr));
        let report = read_json(dir.path().join("report.json"));
        let expected = read_json(fx.join("expected.json"));
        let got = report["blocks"].as_array().unwrap();
        let want = expected["blocks"].as_array().unwrap();
        assert_eq!(got.len(), want.len(), "number of blocks");
        for (g, w) in got.iter().zip(want) {
            let n = &w["number"];
            assert_eq!(&g["number"], n);
            let want_codes: Vec<&Value> = w["txs"].as_array().unwrap().iter().map(|t| &t["validation_code"]).collect();
            let got_codes: Vec<&Value> = g["validation_codes"].as_array().unwrap().iter().collect();
            assert_eq!(got_codes, want_codes, "validation codes of block {n}");
            assert_eq!(g["commit_hash"], w["commit_hash"], "commit hash of block {n}");
        }
        let state = read_json(dir.path().join("state.json"));
        let want_state = read_json(fx.join("state.json"));
        assert_eq!(state, want_state, "final world state");
    }
}

#[test]
fn replay_of_a_truncated_ledger_names_the_offset_and_fails_without_panicking() {
    let fx = fabric_fixtures_dir();
    let mut raw = std::fs::read(fx.join("orderer-blocks.bin")).unwrap();
    let cut = raw.len() - 100;
    raw.truncate(cut);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("truncated.bin");
    std::fs::write(&path, &raw).unwrap();
    let (out, _d) = replay(&path, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("byte offset"), "stderr: {err}");
    assert!(!err.contains("panicked"), "stderr: {err}");
}

#[test]
fn replay_refuses_a_block_whose_bytes_were_tampered_with() {
    let fx = fabric_fixtures_dir();
    let raw = std::fs::read(fx.join("orderer-blocks.bin")).unwrap();
    // Flip a byte late in the second record (inside an envelope): the data hash no longer matches.
    let first_len = u64::from_le_bytes(raw[..8].try_into().unwrap()) as usize;
    let second = 8 + first_len;
    let second_len = u64::from_le_bytes(raw[second..second + 8].try_into().unwrap()) as usize;
    let mut bad = raw.clone();
    bad[second + 8 + second_len / 2] ^= 0x55;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tampered.bin");
    std::fs::write(&path, &bad).unwrap();
    let (out, _d) = replay(&path, &[]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("block record at byte offset"), "stderr: {err}");
}

/// The 10,735-transaction smallbank ledger: every block's TRANSACTIONS_FILTER and COMMIT_HASH must equal the ones
/// the Fabric 2.5.16 peer wrote into its own copy of the blocks (`*.peer.bin.zst`), pipelined over 2 threads.
#[test]
fn replay_of_the_10k_bench_ledger_matches_the_peer_committed_blocks() {
    use ferrofabric_protos::common::{Block, Metadata};
    use prost::Message;

    let base = fixture("fabric-2.5-bench");
    let (out, dir) = replay(&base.join("fabric-2.5-smallbank-10k.bin.zst"), &["--threads", "2"]);
    assert!(out.status.success(), "replay failed: {}", String::from_utf8_lossy(&out.stderr));
    let report = read_json(dir.path().join("report.json"));
    let got = report["blocks"].as_array().unwrap();

    let peer = ferrofabric_protoutil::read_ledger_file(base.join("fabric-2.5-smallbank-10k.peer.bin.zst")).unwrap();
    let mut n = 0;
    for record in ferrofabric_protoutil::records(peer) {
        let block = Block::decode(record.unwrap().1).unwrap();
        let md = block.metadata.unwrap().metadata;
        let filter: Vec<i32> = md[2].iter().map(|b| i32::from(*b)).collect();
        let g = &got[n];
        assert_eq!(g["number"], n as u64);
        let codes: Vec<i32> = g["validation_codes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| ferrofabric_protos::peer::TxValidationCode::from_str_name(c.as_str().unwrap()).unwrap() as i32)
            .collect();
        assert_eq!(codes, filter, "TRANSACTIONS_FILTER of block {n}");
        let want_hash = if md.len() > 4 && !md[4].is_empty() {
            Some(hex::encode(Metadata::decode(md[4].clone()).unwrap().value))
        } else {
            None
        };
        assert_eq!(g["commit_hash"].as_str().map(str::to_owned), want_hash, "COMMIT_HASH of block {n}");
        n += 1;
    }
    assert_eq!(n, 129);
    assert_eq!(got.len(), 129);
    assert_eq!(
        got[128]["commit_hash"].as_str(),
        Some("241d04473a43fa8b44bebd6d3f6bff6d346e566d930475dbc6b88b477cdba3a2")
    );
}
