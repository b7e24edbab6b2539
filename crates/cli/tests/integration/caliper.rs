//! Hyperledger Caliper, the benchmark tool Fabric users run, against `ferrofabric node` unchanged: Caliper 0.6.0 with
//! its Fabric peer-gateway connector (the `fabric-gateway` SDK, pinned with it in `tests/caliper/package-lock.json`)
//! runs the rounds of `tests/caliper/benchmark.yaml` (our smallbank workload module, `tests/caliper/smallbank.js`,
//! doing Caliper's smallbank operations) through the node's Gateway over TLS with the network configuration users
//! take, `tests/caliper/network.yaml`, and its report's throughput is printed.
//!
//! Needs `node` and `npm`; `npm ci` runs here when `tests/caliper/node_modules` is missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::sdk::{require_tool, run_logged, start_node};

/// How long `npm ci` may take (Caliper brings about 500 packages).
const NPM_TIMEOUT: Duration = Duration::from_secs(900);
/// How long Caliper may take for both rounds (about 15 s of load, plus worker start-up).
const CALIPER_TIMEOUT: Duration = Duration::from_secs(300);

fn caliper_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/caliper")
}

/// Caliper's network configuration for the node in `node_dir`: `tests/caliper/network.yaml`, which users run
/// against `./ferrofabric-node`, with that directory replaced.
fn network_config(node_dir: &Path) -> String {
    let template = std::fs::read_to_string(caliper_dir().join("network.yaml")).unwrap();
    assert!(template.contains("../../ferrofabric-node/"), "network.yaml no longer names ../../ferrofabric-node");
    template.replace("../../ferrofabric-node/", &format!("{}/", node_dir.display()))
}

/// The rows of Caliper's summary tables in `log`: (round, succeeded, failed, throughput in tx/s).
fn summary(log: &str) -> Vec<(String, u64, u64, f64)> {
    let mut rows: Vec<(String, u64, u64, f64)> = Vec::new();
    for line in log.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let (Some(name), Some(succ), Some(fail), Some(tps)) = (cells.first(), cells.get(1), cells.get(2), cells.last())
        else {
            continue;
        };
        if let (Ok(s), Ok(f), Ok(t)) = (succ.parse(), fail.parse(), tps.parse()) {
            if !rows.iter().any(|r| r.0 == *name) {
                rows.push(((*name).to_owned(), s, f, t));
            }
        }
    }
    rows
}

#[test]
fn caliper_smallbank_runs_against_the_node_through_the_gateway() {
    require_tool("node");
    require_tool("npm");
    let tmp = tempfile::tempdir().unwrap();
    let dir = caliper_dir();
    if !dir.join("node_modules/@hyperledger/caliper-cli/package.json").is_file() {
        let mut npm = Command::new("npm");
        npm.args(["ci", "--omit=optional", "--no-audit", "--no-fund"]).current_dir(&dir);
        run_logged(npm, "npm ci (tests/caliper)", &tmp.path().join("npm.log"), NPM_TIMEOUT);
    }
    let node_dir = std::path::absolute(tmp.path().join("net")).unwrap();
    let (node, _) = start_node(&node_dir, &tmp.path().join("node.log"), 0);
    let network = tmp.path().join("network.yaml");
    std::fs::write(&network, network_config(&node_dir)).unwrap();

    let mut caliper = Command::new("npx");
    caliper
        .args(["caliper", "launch", "manager", "--caliper-workspace"])
        .arg(&dir)
        .arg("--caliper-networkconfig")
        .arg(&network)
        .args(["--caliper-benchconfig", "benchmark.yaml", "--caliper-flow-only-test", "--caliper-report-path"])
        .arg(tmp.path().join("report.html"))
        .current_dir(&dir);
    let log = tmp.path().join("caliper.log");
    run_logged(caliper, "caliper launch manager", &log, CALIPER_TIMEOUT);
    drop(node);

    let rows = summary(&std::fs::read_to_string(&log).unwrap());
    for (round, succ, fail, tps) in &rows {
        println!("caliper round {round}: {succ} succeeded, {fail} failed, throughput {tps} tx/s");
    }
    let round = |name: &str| rows.iter().find(|r| r.0 == name).unwrap_or_else(|| panic!("no {name} row in {rows:?}"));
    let create = round("create_account");
    assert_eq!((create.1, create.2), (1000, 0), "every account is opened");
    let ops = round("smallbank-operations");
    assert_eq!(ops.1 + ops.2, 2000, "every operation is answered");
    assert!(ops.1 >= 1000, "most operations succeed (the rest are MVCC conflicts): {ops:?}");
    assert!(create.3 > 0.0 && ops.3 > 0.0, "throughput reported");
    assert!(Path::new(&tmp.path().join("report.html")).is_file(), "Caliper wrote its report");
}
