//! Real Fabric peers follow the node's channel. Fabric's Node SDK first runs its smallbank script against a
//! `ferrofabric node` (valid transactions and an MVCC conflict, see `sdk.rs`). Then a real Fabric 2.5.16 peer and a
//! real Fabric 3.1.5 peer (the binaries of `../shared/fabric`, unpacked by its `unpack` script) join the channel
//! from its genesis block, pull every block from our orderer, and validate and commit it themselves. Every block
//! they commit must carry our committer's TRANSACTIONS_FILTER and COMMIT_HASH. Both copies are read with the real
//! `peer channel fetch`: from each real peer, and from our peer port. Before, the real `peer chaincode invoke`
//! and `query` run against our peer ports and orderer. Everything speaks TLS, as the node does by default.
//!
//! Needs `zstd` (to unpack the binaries), `node` and `npm`; the test fails, not skips, without them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferrofabric_node::NodeInfo;
use ferrofabric_protos::common::{Block, Metadata};
use prost::Message;

use crate::sdk::{install_sdk, require_tool, run_logged, sdk_dir, start_node, Running};

/// The real Fabric versions that join.
const VERSIONS: [&str; 2] = ["2.5.16", "3.1.5"];
/// Fabric's `BlockMetadataIndex`: TRANSACTIONS_FILTER and COMMIT_HASH.
pub(crate) const TRANSACTIONS_FILTER: usize = 2;
const COMMIT_HASH: usize = 4;
/// How long a real peer may take to start listening, and to be joined.
const PEER_START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a real peer may take to pull and commit the whole chain.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the SDK script may run.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(240);

/// `../shared/fabric` beside the repository, or `$FERROFABRIC_FABRIC`.
pub(crate) fn fabric_dir() -> PathBuf {
    std::env::var_os("FERROFABRIC_FABRIC")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fabric"))
}

/// A port of 127.0.0.1 that is free now and was not handed out before in this test process: ports are chosen
/// before the processes that bind them start, so without the record two of them (say one orderer's gRPC port
/// and the next one's admin port) could get the same port.
pub(crate) fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Unpacks Fabric `version` into `dest`; returns `dest` (with `bin/` and `config/`).
pub(crate) fn unpack(version: &str, dest: &Path, log: &Path) -> PathBuf {
    let mut cmd = Command::new(fabric_dir().join("unpack"));
    cmd.arg(version).arg(dest);
    run_logged(cmd, &format!("unpack Fabric {version}"), log, Duration::from_secs(120));
    dest.to_owned()
}

/// One real peer of Org1: its Fabric directory, its address and its process.
pub(crate) struct RealPeer {
    version: &'static str,
    fabric: PathBuf,
    pub(crate) address: String,
    tls_ca: PathBuf,
    _process: Running,
    log: PathBuf,
}

/// A `peer` command of `fabric` that talks to `address` as `msp` of Org1, over TLS trusting the CAs of `tls_ca`.
pub(crate) fn peer_cli(fabric: &Path, address: &str, msp: &Path, tls_ca: &Path) -> Command {
    let mut cmd = Command::new(fabric.join("bin/peer"));
    cmd.env("FABRIC_CFG_PATH", fabric.join("config"))
        .env("FABRIC_LOGGING_SPEC", "warning")
        .env("CORE_PEER_LOCALMSPID", "Org1MSP")
        .env("CORE_PEER_MSPCONFIGPATH", msp)
        .env("CORE_PEER_ADDRESS", address)
        .env("CORE_PEER_TLS_ENABLED", "true")
        .env("CORE_PEER_TLS_ROOTCERT_FILE", tls_ca)
        .stdin(Stdio::null());
    cmd
}

/// Runs `cmd`; its stdout, or its stderr as the error.
pub(crate) fn output(cmd: &mut Command) -> Result<String, String> {
    match cmd.output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => Err(format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))),
        Err(e) => Err(e.to_string()),
    }
}

impl RealPeer {
    /// Starts `peer node start` of `fabric` as Org1's peer0 (`crypto`: the node's crypto material, `tls_ca` the
    /// node's TLS CA bundle) with TLS and its ledger in `work`, and waits until it listens.
    pub(crate) fn start(version: &'static str, fabric: PathBuf, crypto: &Path, tls_ca: &Path, work: &Path) -> RealPeer {
        std::fs::create_dir_all(work).unwrap();
        let (port, cc_port, ops_port) = (free_port(), free_port(), free_port());
        let address = format!("127.0.0.1:{port}");
        let log = work.join("peer.log");
        let node = crypto.join("peerOrganizations/org1.example.com/peers/peer0.org1.example.com");
        let mut cmd = peer_cli(&fabric, &address, &node.join("msp"), tls_ca);
        cmd.args(["node", "start"])
            .env("CORE_PEER_TLS_CERT_FILE", node.join("tls/server.crt"))
            .env("CORE_PEER_TLS_KEY_FILE", node.join("tls/server.key"))
            .env("FABRIC_LOGGING_SPEC", "info")
            .env("CORE_PEER_ID", "peer0.org1.example.com")
            .env("CORE_PEER_LISTENADDRESS", &address)
            .env("CORE_PEER_CHAINCODELISTENADDRESS", format!("127.0.0.1:{cc_port}"))
            .env("CORE_PEER_CHAINCODEADDRESS", format!("127.0.0.1:{cc_port}"))
            .env("CORE_PEER_GOSSIP_BOOTSTRAP", &address)
            .env("CORE_PEER_GOSSIP_ENDPOINT", &address)
            .env("CORE_PEER_GOSSIP_EXTERNALENDPOINT", &address)
            .env("CORE_PEER_GOSSIP_USELEADERELECTION", "false")
            .env("CORE_PEER_GOSSIP_ORGLEADER", "true")
            .env("CORE_PEER_FILESYSTEMPATH", work.join("production"))
            .env("CORE_LEDGER_SNAPSHOTS_ROOTDIR", work.join("snapshots"))
            .env("CORE_LEDGER_STATE_STATEDATABASE", "goleveldb")
            .env("CORE_OPERATIONS_LISTENADDRESS", format!("127.0.0.1:{ops_port}"))
            .env("CORE_METRICS_PROVIDER", "disabled")
            .env("CORE_VM_ENDPOINT", "")
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(work.join("peer.stderr.log")).unwrap());
        let process = Running(cmd.spawn().unwrap_or_else(|e| panic!("Fabric {version} peer: cannot start: {e}")));
        let log = work.join("peer.stderr.log");
        let peer = RealPeer { version, fabric, address, tls_ca: tls_ca.to_owned(), _process: process, log };
        let deadline = Instant::now() + PEER_START_TIMEOUT;
        while std::net::TcpStream::connect(&peer.address).is_err() {
            assert!(Instant::now() < deadline, "Fabric {version} peer did not listen:\n{}", peer.logs());
            std::thread::sleep(Duration::from_millis(200));
        }
        peer
    }

    pub(crate) fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `peer channel join -b genesis` as Org1's admin, retried while the peer is still starting.
    pub(crate) fn join(&self, genesis: &Path, admin: &Path) {
        let deadline = Instant::now() + PEER_START_TIMEOUT;
        loop {
            let mut cmd = peer_cli(&self.fabric, &self.address, admin, &self.tls_ca);
            cmd.args(["channel", "join", "-b"]).arg(genesis);
            match output(&mut cmd) {
                Ok(_) => return,
                Err(e) if Instant::now() >= deadline => {
                    panic!("Fabric {} peer: channel join failed: {e}\npeer log:\n{}", self.version, self.logs())
                }
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
    }
}

/// Block `which` (a number, or `newest`) of `channel` as the peer at `address` serves it on Deliver, read by
/// `peer channel fetch` (which waits for a block not yet committed).
pub(crate) fn fetch(
    cli: impl Fn() -> Command,
    address: &str,
    channel: &str,
    which: &str,
    dir: &Path,
) -> Result<Block, String> {
    let file = dir.join(format!("{}-{which}.block", address.replace(':', "_")));
    let mut cmd = cli();
    cmd.args(["channel", "fetch", which]).arg(&file).args(["-c", channel]);
    output(&mut cmd)?;
    let bytes = std::fs::read(&file).map_err(|e| e.to_string())?;
    Block::decode(bytes.as_slice()).map_err(|e| e.to_string())
}

/// The block's number.
fn number(block: &Block) -> u64 {
    block.header.as_ref().map(|h| h.number).unwrap_or(0)
}

/// The block's metadata entry `index` (empty when absent).
pub(crate) fn metadata(block: &Block, index: usize) -> Vec<u8> {
    block.metadata.as_ref().and_then(|m| m.metadata.get(index)).map(|b| b.to_vec()).unwrap_or_default()
}

/// The commit hash recorded in the block's COMMIT_HASH metadata.
pub(crate) fn commit_hash(block: &Block) -> Vec<u8> {
    Metadata::decode(metadata(block, COMMIT_HASH).as_slice()).map(|m| m.value.to_vec()).unwrap_or_default()
}

#[test]
fn real_fabric_peers_commit_every_node_block_with_our_codes_and_commit_hashes() {
    require_tool("zstd");
    require_tool("node");
    require_tool("npm");
    let tmp = tempfile::tempdir().unwrap();
    install_sdk(&tmp.path().join("npm.log"));
    let fabrics: Vec<(&'static str, PathBuf)> = VERSIONS
        .iter()
        .map(|v| (*v, unpack(v, &tmp.path().join(format!("fabric-{v}")), &tmp.path().join(format!("unpack-{v}.log")))))
        .collect();

    // The orderer's port is written into the channel config, so the real peers must find it there.
    let node_log = tmp.path().join("node.log");
    let (node, node_json) = start_node(&tmp.path().join("net"), &node_log, free_port());
    let info = NodeInfo::read(&node_json).unwrap();
    let mut client = Command::new("node");
    client.arg(sdk_dir().join("smallbank.js")).arg(&node_json);
    run_logged(client, "tests/sdk/smallbank.js", &tmp.path().join("client.log"), CLIENT_TIMEOUT);

    let admin = info.crypto.join("peerOrganizations/org1.example.com/users/Admin@org1.example.com/msp");
    let genesis = tmp.path().join("net/genesis.block");
    let tls_ca = info.tls_ca.clone().expect("the node speaks TLS by default");
    let ours_at = info.peers["Org1MSP"].clone();
    let blocks_dir = tmp.path().join("blocks");
    std::fs::create_dir_all(&blocks_dir).unwrap();
    let (_, any_fabric) = &fabrics[0];
    let ours_cli = || peer_cli(any_fabric, &ours_at, &admin, &tls_ca);

    // The real peer CLI against our peer ports and orderer: an invoke endorsed at both orgs' peers (smallbank's
    // AND policy), ordered, and waited for on our peer's Deliver; then a query of what it wrote.
    let account = format!("cli-{}", std::process::id());
    let mut invoke = ours_cli();
    invoke
        .args(["chaincode", "invoke", "-o", &info.orderer, "--tls", "--cafile"])
        .arg(&tls_ca)
        .args(["-C", &info.channel, "-n", "smallbank", "--waitForEvent"])
        .args(["--peerAddresses", &info.peers["Org1MSP"], "--tlsRootCertFiles"])
        .arg(&tls_ca)
        .args(["--peerAddresses", &info.peers["Org2MSP"], "--tlsRootCertFiles"])
        .arg(&tls_ca)
        .args(["-c", &format!(r#"{{"Args":["create_account","{account}","cli","100","50"]}}"#)]);
    let invoked = output(&mut invoke).unwrap_or_else(|e| panic!("peer chaincode invoke through our ports: {e}"));
    println!("peer chaincode invoke: {}", invoked.trim());
    let mut query = ours_cli();
    query.args(["chaincode", "query", "-C", &info.channel, "-n", "smallbank", "-c"]);
    query.arg(format!(r#"{{"Args":["query","{account}"]}}"#));
    let queried = output(&mut query).unwrap_or_else(|e| panic!("peer chaincode query on our peer port: {e}"));
    let expected =
        format!(r#"{{"CustomId":"{account}","CustomName":"cli","SavingsBalance":50,"CheckingBalance":100}}"#);
    assert_eq!(queried.trim(), expected, "peer chaincode query on our peer port");

    let ours_fetch = |which: &str| fetch(ours_cli, &ours_at, &info.channel, which, &blocks_dir).unwrap();
    let height = number(&ours_fetch("newest")) + 1;
    assert!(height > 5, "the node's chain is too short to compare: {height} blocks");
    let ours: Vec<Block> = (0..height).map(|n| ours_fetch(&n.to_string())).collect();
    let invalid = ours.iter().map(|b| metadata(b, TRANSACTIONS_FILTER)).filter(|f| f.iter().any(|&c| c != 0)).count();
    assert!(invalid > 0, "no block has an invalid transaction: the codes would not be compared");

    let peers: Vec<RealPeer> = fabrics
        .into_iter()
        .map(|(version, fabric)| {
            let work = tmp.path().join(format!("peer-{version}"));
            let peer = RealPeer::start(version, fabric, &info.crypto, &tls_ca, &work);
            peer.join(&genesis, &admin);
            peer
        })
        .collect();
    for peer in &peers {
        let v = peer.version;
        let theirs_cli = || peer_cli(&peer.fabric, &peer.address, &admin, &tls_ca);
        let theirs_fetch = |which: &str| fetch(theirs_cli, &peer.address, &info.channel, which, &blocks_dir);
        let deadline = Instant::now() + CATCH_UP_TIMEOUT;
        loop {
            match theirs_fetch("newest") {
                Ok(b) if number(&b) + 1 >= height => break,
                Ok(_) | Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(500)),
                other => panic!(
                    "Fabric {v} peer did not commit all {height} blocks within {CATCH_UP_TIMEOUT:?} (newest: {:?})\n\
                     peer log:\n{}",
                    other.map(|b| number(&b)),
                    peer.logs()
                ),
            }
        }
        for (n, our) in ours.iter().enumerate() {
            let theirs =
                theirs_fetch(&n.to_string()).unwrap_or_else(|e| panic!("Fabric {v} peer: fetching block {n}: {e}"));
            assert_eq!(theirs.header, our.header, "Fabric {v} peer, block {n}: header");
            assert_eq!(theirs.data, our.data, "Fabric {v} peer, block {n}: data");
            assert_eq!(
                metadata(&theirs, TRANSACTIONS_FILTER),
                metadata(our, TRANSACTIONS_FILTER),
                "Fabric {v} peer, block {n}: TRANSACTIONS_FILTER (validation codes)"
            );
            assert_eq!(commit_hash(&theirs), commit_hash(our), "Fabric {v} peer, block {n}: COMMIT_HASH");
            if n > 0 {
                assert_eq!(commit_hash(our).len(), 32, "block {n} has no commit hash");
            }
        }
        println!("Fabric {v} peer: {height} blocks, codes and commit hashes equal ours");
    }
    drop(peers);
    drop(node);
}
