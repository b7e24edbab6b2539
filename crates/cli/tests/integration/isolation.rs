//! `ferrofabric node --processes` and the QiOi controller, with real child processes and real cgroups on this
//! machine: a killed component is restarted and the node keeps serving; CPU hogs, each in a cgroup of its own,
//! take throughput from the node, and the controller raises the shares of the components short of CPU and wins it
//! back.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferrofabric_isolation::CpuHierarchy;
use ferrofabric_node::{NodeInfo, ProcessesInfo};

fn ferrofabric() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ferrofabric"));
    c.env("FERROFABRIC_LOG", "warn");
    c
}

/// The node under test: stopped with SIGTERM (its children with it) however the test ends.
struct Node(std::process::Child);

impl Drop for Node {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.0.try_wait() {
            return;
        }
        let _ = Command::new("kill").args(["-TERM", &self.0.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
    }
}

fn read_pid(path: &std::path::Path) -> u32 {
    std::fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

#[test]
fn node_processes_serve_tls_and_the_gateway_and_restart_a_killed_component() {
    let dir = tempfile::tempdir().unwrap();
    let mut node = Node(
        ferrofabric()
            .args(["node", "--processes", "--quiet", "--dir"])
            .arg(dir.path())
            .args(["--orderer-port", "0", "--peer-port", "0", "--peer2-port", "0", "--blockstore-port", "0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = BufReader::new(node.0.stdout.take().unwrap()).lines();
    let ready = lines.next().unwrap().unwrap();
    assert!(ready.starts_with("ferrofabric node ready:"), "{ready}");

    let info = ProcessesInfo::read(&dir.path().join("processes.json")).unwrap();
    let names: Vec<&str> = info.components.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["orderer", "committer", "endorser-org1", "endorser-org2", "blockstore"]);
    let committer = &info.components[1];
    if CpuHierarchy::detect().is_ok() {
        let cgroup = committer.cgroup.as_ref().expect("cgroups are writable here, so each component has one");
        let procs = std::fs::read_to_string(cgroup.join("cgroup.procs")).unwrap();
        assert!(procs.lines().any(|p| p.trim() == read_pid(&committer.pid_file).to_string()), "{procs}");
    }

    // kill -9 the committer: the supervisor starts it again and it recovers its ledger.
    let old = read_pid(&committer.pid_file);
    Command::new("kill").args(["-9", &old.to_string()]).status().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&committer.pid_file).unwrap_or_default().trim() == old.to_string() {
        assert!(Instant::now() < deadline, "the committer was not restarted");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The pid file is rewritten at spawn; the committer listens once it has recovered its ledger.
    let node_info = NodeInfo::read(&dir.path().join("node.json")).unwrap();
    let events = node_info.events.expect("a node of processes serves commit events from its committer");
    let events = events.trim_start_matches("http://").to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(&events).is_err() {
        assert!(Instant::now() < deadline, "the restarted committer never listened on {events}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // The node serves a client end to end through the restarted committer, over TLS, directly and through the
    // Gateway service of its peer ports (whose commit statuses come from the endorsers' followers).
    assert!(node_info.tls_ca.is_some(), "TLS is on by default, as in Fabric's test network");
    for via in ["orderer", "gateway"] {
        let bench = ferrofabric()
            .args(["bench", "e2e", "--quiet", "--json", "--txs", "300", "--via", via, "--node-dir"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(bench.status.success(), "via {via}: {}", String::from_utf8_lossy(&bench.stderr));
        let report: serde_json::Value = serde_json::from_slice(&bench.stdout).unwrap();
        assert_eq!(report["valid"], 300, "via {via}: {report}");
    }

    // Every component answers on its operations endpoint.
    let names: Vec<&String> = node_info.operations.keys().collect();
    assert_eq!(names, ["blockstore", "committer", "endorser-org1", "endorser-org2", "orderer"]);
    for (component, address) in &node_info.operations {
        let answer = crate::daemon::http_get(address, "/healthz");
        assert!(matches!(answer, Some((200, _))), "{component}: {answer:?}");
    }

    Command::new("kill").args(["-TERM", &node.0.id().to_string()]).status().unwrap();
    assert!(node.0.wait().unwrap().success());
    if let Some(g) = &info.node_cgroup {
        assert!(!g.exists(), "the node cgroup {} is removed at shutdown", g.display());
    }
}

#[test]
fn qioi_cpu_hogs_take_throughput_from_the_node_and_the_controller_wins_it_back() {
    if let Err(e) = CpuHierarchy::detect() {
        panic!("this test needs a writable cgroup hierarchy (as the CI machines have): {e}");
    }
    // The bench's own defaults on a short run: the probe finds what the node sustains alone, the load is a fifth of
    // it, and eight CPU hogs per core, each in a cgroup of its own at the default share (QiOi's host), compete with
    // the node.
    let out = ferrofabric()
        .args(["bench", "isolation", "--quiet", "--json", "--kinds", "cpu", "--rounds", "1"])
        .args(["--warmup", "8", "--seconds", "6"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cpu = &r["kinds"]["cpu"];
    let ratio = |name: &str| cpu[name].as_f64().unwrap();
    assert!(ratio("hogs_vs_alone") <= 0.80, "the hogs did not take the node below 0.8 of its throughput alone: {r}");
    assert!(ratio("controlled_vs_alone") >= 0.90, "the controller did not win back 0.9 of it: {r}");
    // The committer and the orderer do the work of every transaction (signature checks, ordering): the controller
    // must have raised them.
    let shares = &cpu["largest_shares"];
    for busy in ["committer", "orderer"] {
        assert!(shares[busy].as_u64().unwrap() > 1024, "the {busy}'s share was not raised: {r}");
    }
}
