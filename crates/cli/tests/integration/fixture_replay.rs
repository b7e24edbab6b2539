//! `ferrofabric ledger replay` on the real Fabric 2.5.16 fixture ledger: the codes, commit hashes and final state
//! must be exactly those the Fabric peer produced (`expected.json`, `state.json`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use ferrofabric_testkit::{fabric_fixture, fabric_fixtures_dir, fixture};
use serde_json::Value;

fn read_json(path: PathBuf) -> Value {
    serde_json::from_slice(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

fn replay(blocks: &Path, extra: &[&str]) -> (std::process::Output, tempfile::TempDir) {
    replay_from(&fabric_fixture("genesis.block"), blocks, extra)
}

fn replay_from(genesis: &Path, blocks: &Path, extra: &[&str]) -> (std::process::Output, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
        .args(["ledger", "replay", "--quiet", "--genesis"])
        .arg(genesis)
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

/// Replays `blocks` of the fixture network in `fx` and asserts the codes and commit hashes of `expected.json`, and
/// the world state of `state.json` (restricted to the namespaces `state_namespaces` keeps).
fn assert_replay_matches(fx: &Path, blocks: &str, extra: &[&str], state_namespaces: fn(&str) -> bool) {
    let (out, dir) = replay_from(&fx.join("genesis.block"), &fx.join(blocks), extra);
    assert!(out.status.success(), "replay of {blocks} failed: {}", String::from_utf8_lossy(&out.stderr));
    let report = read_json(dir.path().join("report.json"));
    let expected = read_json(fx.join("expected.json"));
    let got = report["blocks"].as_array().unwrap();
    let want = expected["blocks"].as_array().unwrap();
    assert_eq!(got.len(), want.len(), "number of blocks of {blocks}");
    for (g, w) in got.iter().zip(want) {
        let n = &w["number"];
        assert_eq!(&g["number"], n);
        let want_codes: Vec<&Value> = w["txs"].as_array().unwrap().iter().map(|t| &t["validation_code"]).collect();
        let got_codes: Vec<&Value> = g["validation_codes"].as_array().unwrap().iter().collect();
        assert_eq!(got_codes, want_codes, "validation codes of block {n} of {blocks}");
        assert_eq!(g["commit_hash"], w["commit_hash"], "commit hash of block {n} of {blocks}");
    }
    let keep = |v: Value| -> Vec<Value> {
        v.as_array().unwrap().iter().filter(|e| state_namespaces(e["namespace"].as_str().unwrap())).cloned().collect()
    };
    let state = keep(read_json(dir.path().join("state.json")));
    let want_state = keep(read_json(fx.join("state.json")));
    assert!(!want_state.is_empty());
    assert_eq!(state, want_state, "final world state after {blocks}");
}

#[test]
fn replay_reproduces_fabric_codes_commit_hashes_and_state() {
    // The Fabric 2.5 fixture's state.json lists the chaincode namespaces only, not the peer's namespace "".
    for threads in ["1", "2"] {
        assert_replay_matches(&fabric_fixtures_dir(), "orderer-blocks.bin", &["--threads", threads], |ns| {
            !ns.is_empty()
        });
    }
}

/// The Fabric 3.1.5 BFT ledger (4 consenters, blocks signed by 3 of them through identifier headers): the copies
/// written by two orderers (different signature sets) and the peer's copy all give the peer's codes, commit hashes
/// and whole world state, including namespace "" where the peer keeps the latest CONFIG envelope.
#[test]
fn replay_of_a_fabric_3_bft_ledger_reproduces_the_peer_from_every_orderers_copy() {
    let fx = fixture("fabric-3.1-bft");
    for blocks in ["orderer-blocks.bin", "orderer-blocks-orderer2.bin", "peer-blocks.bin"] {
        assert_replay_matches(&fx, blocks, &[], |_| true);
    }
}

/// A BFT block is refused unless a quorum of the consenters signed it: with one of the three signatures of a block
/// removed, or one of them re-attributed to a consenter id that is not in the channel, replay stops at that block.
#[test]
fn replay_of_a_fabric_3_bft_ledger_refuses_a_block_below_the_signature_quorum() {
    use ferrofabric_protos::common::{Block, IdentifierHeader, Metadata};
    use prost::Message;

    let fx = fixture("fabric-3.1-bft");
    let raw = bytes::Bytes::from(std::fs::read(fx.join("orderer-blocks.bin")).unwrap());
    let blocks: Vec<bytes::Bytes> = ferrofabric_protoutil::records(raw).map(|r| r.unwrap().1).collect();
    let tamper = |edit: &dyn Fn(&mut Metadata)| {
        let mut out = Vec::new();
        for (i, b) in blocks.iter().enumerate().take(4) {
            let mut bytes = b.to_vec();
            if i == 3 {
                let mut block = Block::decode(b.clone()).unwrap();
                let md = block.metadata.as_mut().unwrap();
                let mut sigs = Metadata::decode(md.metadata[0].clone()).unwrap();
                assert_eq!(sigs.signatures.len(), 3);
                edit(&mut sigs);
                md.metadata[0] = sigs.encode_to_vec().into();
                bytes = block.encode_to_vec();
            }
            out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(&bytes);
        }
        out
    };
    let dir = tempfile::tempdir().unwrap();
    type Edit<'a> = &'a dyn Fn(&mut Metadata);
    let cases: [(&str, Edit); 2] = [
        ("two-signatures", &|m: &mut Metadata| {
            m.signatures.pop();
        }),
        ("unknown-consenter", &|m: &mut Metadata| {
            let mut id = IdentifierHeader::decode(m.signatures[0].identifier_header.clone()).unwrap();
            id.identifier = 9;
            m.signatures[0].identifier_header = id.encode_to_vec().into();
        }),
    ];
    for (name, edit) in cases {
        let path = dir.path().join(format!("{name}.bin"));
        std::fs::write(&path, tamper(edit)).unwrap();
        let (out, d) = replay_from(&fx.join("genesis.block"), &path, &[]);
        assert!(!out.status.success(), "{name}: a block below quorum was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("block 3: orderer signature check failed"), "{name}: {err}");
        let report = read_json(d.path().join("report.json"));
        assert_eq!(report["blocks"].as_array().unwrap().len(), 3, "{name}: blocks 0-2 committed");
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
