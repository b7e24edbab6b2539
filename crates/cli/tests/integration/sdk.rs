//! Interoperability with Fabric's clients, pinned in `tests/sdk/package-lock.json`:
//! * Hyperledger Fabric's Node SDK `fabric-network` 2.2.20 talks to a `ferrofabric node` through its connection
//!   profile: smallbank transactions endorsed by both orgs' endorsers, broadcast to our orderer, their commit events
//!   received from our committer's `DeliverFiltered`, a query, a refused proposal and an MVCC conflict
//!   (`tests/sdk/smallbank.js`), once with discovery off and once with it on (the peer's discovery service);
//! * today's client API, `@hyperledger/fabric-gateway` 1.12, talks to the node's Gateway service
//!   (`tests/sdk/gateway.js`), and so does its Java edition, `org.hyperledger.fabric:fabric-gateway` 1.10
//!   (`tests/java`, pinned in its `pom.xml`).
//!
//! Needs `node` (≥ 18), `npm`, a JDK (≥ 17) and Maven on PATH; the tests fail, not skip, without them (CI installs
//! them). `npm ci` runs here when `tests/sdk/node_modules` is missing, Maven when `tests/java/target/lib` is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long `ferrofabric node` may take to generate its crypto, define the chaincodes and say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the whole SDK script may run (it submits ten transactions, each waiting ~1 s for its block).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(240);
/// How long `npm ci` or Maven's dependency download may take (about 100 packages), or `javac`.
const NPM_TIMEOUT: Duration = Duration::from_secs(600);

pub(crate) fn sdk_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/sdk")
}

/// Kills the child (SIGTERM, then SIGKILL) when dropped, so a failing assertion never leaves a node running.
pub(crate) struct Running(pub(crate) Child);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_some() {
            return;
        }
        let _ = Command::new("kill").arg("-TERM").arg(self.0.id().to_string()).status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.0.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `cmd` to completion within `timeout`, its stdout and stderr going to `log`; panics with the log on failure.
pub(crate) fn run_logged(mut cmd: Command, what: &str, log: &Path, timeout: Duration) {
    let file = std::fs::File::create(log).unwrap();
    let child = cmd
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: cannot start ({e}); node and npm must be installed"));
    let mut child = Running(child);
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = std::fs::read_to_string(log).unwrap_or_default();
    match status {
        Some(s) if s.success() => println!("{what}:\n{output}"),
        Some(s) => panic!("{what} failed ({s}):\n{output}"),
        None => panic!("{what} did not finish within {timeout:?}:\n{output}"),
    }
}

pub(crate) fn require_tool(name: &str) {
    let out = Command::new(name).arg("--version").output();
    match out {
        Ok(o) if o.status.success() => {
            println!("{name} {}", String::from_utf8_lossy(&o.stdout).trim());
        }
        _ => panic!("`{name}` is not on PATH: the Fabric Node SDK test needs Node.js (>= 18) and npm"),
    }
}

/// `npm ci` in tests/sdk unless fabric-network and fabric-gateway are already installed there. pkcs11js (an optional native
/// dependency of fabric-common for HSMs) is left out: it needs a C++ toolchain and is not used.
pub(crate) fn install_sdk(log: &Path) {
    let dir = sdk_dir();
    let installed = ["fabric-network", "@hyperledger/fabric-gateway"];
    if installed.iter().all(|p| dir.join("node_modules").join(p).join("package.json").is_file()) {
        return;
    }
    let mut cmd = Command::new("npm");
    cmd.args(["ci", "--omit=optional", "--no-audit", "--no-fund"]).current_dir(&dir);
    run_logged(cmd, "npm ci (tests/sdk)", log, NPM_TIMEOUT);
}

/// Starts `ferrofabric node` in `dir` with its orderer on `orderer_port` (0: any free port, but then the channel
/// config names 7050, which only our own clients ignore) and everything else on free ports, and waits for its ready
/// line; returns it and the node.json path.
pub(crate) fn start_node(dir: &Path, log: &Path, orderer_port: u16) -> (Running, PathBuf) {
    start_node_with(dir, log, orderer_port, &[])
}

/// [`start_node`] with the extra `node` arguments `extra` (e.g. `--processes`).
fn start_node_with(dir: &Path, log: &Path, orderer_port: u16, extra: &[&str]) -> (Running, PathBuf) {
    let child = Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
        .arg("node")
        .args(extra)
        .arg("--dir")
        .arg(dir)
        .args(["--orderer-port", &orderer_port.to_string()])
        .args(["--peer-port", "0", "--peer2-port", "0", "--blockstore-port", "0"])
        .args(["--orderer-operations-port", "0", "--operations-port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    let mut node = Running(child);
    let stdout = node.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            println!("node: {line}");
            if let Some(path) = line.strip_prefix("ferrofabric node ready: ") {
                let _ = tx.send(PathBuf::from(path.trim()));
            }
        }
    });
    let node_json = match rx.recv_timeout(READY_TIMEOUT) {
        Ok(p) => p,
        Err(_) => {
            let exited = node.0.try_wait().unwrap();
            panic!(
                "ferrofabric node not ready within {READY_TIMEOUT:?} (exit: {exited:?}); stderr:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            )
        }
    };
    assert!(node_json.is_file(), "ready line names {} which does not exist", node_json.display());
    (node, node_json)
}

/// Starts a fresh `ferrofabric node` (its orderer on `orderer_port`, see [`start_node`]), runs the client command
/// `client(node.json)` (named `what` in logs) against it and checks that it printed `<tag> PASS`; on failure prints
/// the node's log too. `extra`: more `node` arguments.
fn run_client_against_node(
    what: &str,
    tag: &str,
    orderer_port: u16,
    extra: &[&str],
    client: impl FnOnce(&Path) -> Command,
) {
    let tmp = tempfile::tempdir().unwrap();
    let node_log = tmp.path().join("node.log");
    let (node, node_json) = start_node_with(&tmp.path().join("net"), &node_log, orderer_port, extra);
    let client = client(&node_json);
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_logged(client, what, &tmp.path().join("client.log"), CLIENT_TIMEOUT);
        node_blocks_have_fabrics_shape(&node_json);
    }));
    drop(node);
    if let Err(e) = run {
        eprintln!("ferrofabric node stderr:\n{}", std::fs::read_to_string(&node_log).unwrap_or_default());
        std::panic::resume_unwind(e);
    }
    let output = std::fs::read_to_string(tmp.path().join("client.log")).unwrap();
    assert!(output.lines().any(|l| l == format!("{tag} PASS")), "the client did not report PASS:\n{output}");
}

/// The node's chain after a client's transactions, as its orderer delivers it and as Org1's peer committed it, has
/// the metadata of the blocks a real Fabric 2.5.16 etcdraft orderer and peer wrote (the `fabric-2.5` fixture's):
/// signatures, last config, etcdraft's consenter metadata, one validation code per transaction, commit hashes.
/// Together with the fixture replays (our validator gives the real peer's codes and commit hashes on its ledgers)
/// this is what a real peer that joins the node's channel checks.
fn node_blocks_have_fabrics_shape(node_json: &Path) {
    use crate::block_shape::{assert_same_shapes, fixture_blocks};
    use crate::processes::deliver_blocks;
    use ferrofabric_comm::DeliverApi;
    let info = ferrofabric_node::NodeInfo::read(node_json).unwrap();
    let admin = info.crypto.join("peerOrganizations/org1.example.com/users/Admin@org1.example.com/msp");
    let admin = ferrofabric_msp::SigningIdentity::from_msp_dir("Org1MSP", &admin).unwrap();
    let tls = info.tls_ca.as_deref();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let read = |addr: &str, api| -> Vec<ferrofabric_protos::common::Block> {
        let raw = runtime.block_on(deliver_blocks(addr, api, tls, &info.channel, &admin, None));
        raw.into_iter().map(|b| prost::Message::decode(b).unwrap()).collect()
    };
    let ordered = read(&info.orderer, DeliverApi::Orderer);
    let peer = info.events.clone().unwrap_or_else(|| info.peers["Org1MSP"].clone());
    let committed = read(&peer, DeliverApi::Peer);
    assert!(ordered.len() > 2, "the node's chain is too short to compare: {} blocks", ordered.len());
    assert_same_shapes(&ordered, &fixture_blocks("fabric-2.5", "orderer-blocks.bin"), (None, None));
    let n = ordered.len().min(committed.len());
    for (i, (o, c)) in ordered[..n].iter().zip(&committed[..n]).enumerate() {
        assert_eq!((&o.header, &o.data), (&c.header, &c.data), "block {i}: the peer's and the orderer's");
    }
    assert_same_shapes(&committed, &fixture_blocks("fabric-2.5", "peer-blocks.bin"), (None, None));
    println!("{} blocks of the node, of the shape of Fabric 2.5.16's", ordered.len());
}

/// [`run_client_against_node`] with the Node.js script `script` of tests/sdk and its extra arguments `args`.
fn run_script_against_node(script: &str, args: &[&str], tag: &str, orderer_port: u16) {
    run_script_against_node_with(script, args, tag, orderer_port, &[])
}

/// [`run_script_against_node`] against a node started with the extra arguments `node_args`.
fn run_script_against_node_with(script: &str, args: &[&str], tag: &str, orderer_port: u16, node_args: &[&str]) {
    require_tool("node");
    require_tool("npm");
    install_sdk(&tempfile::tempdir().unwrap().path().join("npm.log"));
    let what = format!("tests/sdk/{script} {}", args.join(" "));
    run_client_against_node(&what, tag, orderer_port, node_args, |node_json| {
        let mut client = Command::new("node");
        client.arg(sdk_dir().join(script)).arg(node_json).args(args);
        client
    });
}

#[test]
fn fabric_node_sdk_submits_smallbank_and_gets_commit_events() {
    run_script_against_node("smallbank.js", &[], "[sdk]", 0);
}

/// The same with discovery on: the SDK learns the MSPs, the orderer (from the channel configuration, so the node's
/// orderer listens on the port it wrote there), the peers and smallbank's endorsement layout from the peer's
/// discovery service, not from the connection profile.
#[test]
fn fabric_node_sdk_with_discovery_submits_smallbank_and_gets_commit_events() {
    run_script_against_node("smallbank.js", &["--discovery"], "[sdk]", crate::processes::free_port());
}

/// `@hyperledger/fabric-gateway` (tests/sdk/gateway.js) through the Gateway service of Org1's peer port: smallbank
/// submits endorsed by both orgs through the policy's plan, evaluates, commit statuses, a refused endorsement with
/// its error details, an MVCC conflict and an endorsement-policy failure with Fabric's codes, and chaincode events.
#[test]
fn fabric_gateway_client_submits_evaluates_and_reads_chaincode_events() {
    run_script_against_node("gateway.js", &[], "[gateway]", 0);
}

/// The same client against the node of processes: the Gateway service of the `ferrofabric endorser` daemon on
/// Org1's peer port, over TLS, its commit statuses and chaincode events read from that endorser's follower and the
/// block-store service.
#[test]
fn fabric_gateway_client_works_unchanged_against_a_node_of_processes() {
    run_script_against_node_with("gateway.js", &[], "[gateway]", 0, &["--processes"]);
}

/// Java's `org.hyperledger.fabric:fabric-gateway` (tests/java, its jars resolved by Maven from Maven Central): a
/// smallbank submit and an evaluate through the Gateway service over TLS.
#[test]
fn fabric_gateway_java_client_submits_and_evaluates() {
    require_tool("javac");
    require_tool("mvn");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/java");
    let tmp = tempfile::tempdir().unwrap();
    if !dir.join("target/lib").is_dir() {
        let mut mvn = Command::new("mvn");
        mvn.args(["-q", "-B", "dependency:copy-dependencies", "-DoutputDirectory=target/lib"]).current_dir(&dir);
        run_logged(mvn, "mvn dependency:copy-dependencies (tests/java)", &tmp.path().join("mvn.log"), NPM_TIMEOUT);
    }
    let classes = tmp.path().join("classes");
    let classpath = format!("{}/*:{}", dir.join("target/lib").display(), classes.display());
    let mut javac = Command::new("javac");
    javac
        .args(["-cp", &classpath, "-d"])
        .arg(&classes)
        .arg(dir.join("src/main/java/ferrofabric/GatewayRoundTrip.java"));
    run_logged(javac, "javac GatewayRoundTrip.java", &tmp.path().join("javac.log"), NPM_TIMEOUT);
    run_client_against_node("tests/java GatewayRoundTrip", "[java]", 0, &[], |node_json| {
        let mut client = Command::new("java");
        client.args(["-cp", &classpath, "ferrofabric.GatewayRoundTrip"]).arg(node_json);
        client
    });
}
