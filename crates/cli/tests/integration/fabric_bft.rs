//! Our committer against a real Fabric 3.1.5 BFT ordering service: four SmartBFT orderers (`orderer` 3.1.5) on
//! 127.0.0.1, the channel made by the real `cryptogen` and `configtxgen` 3.1.5 from the BFT fixture's
//! `crypto-config.yaml` and `configtx.yaml` (`BFTChannel`), every consenter joined with `osnadmin`.
//!
//! The committer follows three of the orderers (the SmartBFT leader is left out of its list, so that stopping its
//! block source leaves a quorum ordering): it commits every block, each checked against the 3-of-4 consenter
//! signatures of `BlockValidation`. Then its block source is frozen (SIGSTOP) while the others go on ordering:
//! the other orderers' `HEADER_WITH_SIG` attestations expose the withheld blocks, and within the censorship
//! timeout the committer takes them from another orderer — not from a broken connection, which keepalive would
//! only notice after a minute here.
//!
//! Then our gateway's `Submit` on the same channel: the transaction goes to all four orderers and is accepted with
//! a quorum of three; with two orderers frozen it is refused as Fabric 3's gateway refuses it.
//!
//! Needs `zstd` to unpack the binaries; fails, not skips, without it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::Arc;

use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_comm::{ClientTls, Shutdown};
use ferrofabric_gateway::{Gateway, GatewayConfig, GatewayOptions, Ledger};
use ferrofabric_protos::common::{Block, Envelope};
use ferrofabric_protos::gateway::gateway_server::Gateway as _;
use ferrofabric_protos::gateway::SubmitRequest;
use prost::Message;

use crate::fabric_orderer::{real_orderer_env, wait_listening};
use crate::fabric_peers::{fabric_dir, free_port, output, unpack};
use crate::sdk::{require_tool, Running};

/// How long a daemon may take to listen, and blocks to arrive.
const WAIT: Duration = Duration::from_secs(90);
/// The committer's censorship timeout in this test (Fabric's default is 30 s).
const CENSORSHIP_TIMEOUT: &str = "3s";

/// The Fabric 3.1.5 binaries, their sample config and the work directory with the channel's artefacts.
pub(crate) struct Fabric {
    pub(crate) bin: PathBuf,
    pub(crate) config: PathBuf,
    pub(crate) work: PathBuf,
}

impl Fabric {
    pub(crate) fn cmd(&self, tool: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(tool));
        cmd.env("FABRIC_CFG_PATH", &self.config).env("FABRIC_LOGGING_SPEC", "warning").stdin(Stdio::null());
        cmd
    }

    pub(crate) fn orderer_dir(&self, i: usize) -> PathBuf {
        self.work.join(format!("organizations/ordererOrganizations/example.com/orderers/orderer{i}.example.com"))
    }

    pub(crate) fn tls_ca(&self) -> PathBuf {
        self.orderer_dir(1).join("tls/ca.crt")
    }

    /// Block `which` (`newest`, a number) of `bftchannel` from the orderer at `orderer` (TLS), as Org1's admin.
    pub(crate) fn fetch_from_orderer(&self, orderer: &str, which: &str) -> Result<Block, String> {
        let admin = self.work.join("organizations/peerOrganizations/org1.example.com/users/Admin@org1.example.com/msp");
        let file = self.work.join(format!("fetched-{}-{which}.block", orderer.replace(':', "_")));
        let mut cmd = self.cmd("peer");
        cmd.env("CORE_PEER_LOCALMSPID", "Org1MSP").env("CORE_PEER_MSPCONFIGPATH", admin);
        cmd.env("CORE_PEER_TLS_ENABLED", "true").args(["channel", "fetch", which]).arg(&file);
        cmd.args(["-c", "bftchannel", "-o", orderer, "--tls", "--cafile"]).arg(self.tls_ca());
        output(&mut cmd)?;
        Ok(Block::decode(std::fs::read(&file).unwrap().as_slice()).unwrap())
    }

    /// Block `which` of `bftchannel` from our committer's peer Deliver at `peer` (plain text), as Org1's admin.
    pub(crate) fn fetch_from_peer(&self, peer: &str, which: &str) -> Result<Block, String> {
        let admin = self.work.join("organizations/peerOrganizations/org1.example.com/users/Admin@org1.example.com/msp");
        let file = self.work.join(format!("committed-{which}.block"));
        let mut cmd = self.cmd("peer");
        cmd.env("CORE_PEER_LOCALMSPID", "Org1MSP").env("CORE_PEER_MSPCONFIGPATH", admin);
        cmd.env("CORE_PEER_ADDRESS", peer).args(["channel", "fetch", which]).arg(&file).args(["-c", "bftchannel"]);
        output(&mut cmd)?;
        Ok(Block::decode(std::fs::read(&file).unwrap().as_slice()).unwrap())
    }
}

/// One SmartBFT orderer: its process and client address.
struct Orderer {
    process: Running,
    grpc: String,
}

/// Held by each test that runs a four-orderer cluster: two at once would compete for the two cores and race for the
/// free ports each picks.
pub(crate) fn cluster_lock() -> std::sync::MutexGuard<'static, ()> {
    static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());
    CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Unpacks Fabric 3.1.5, makes the crypto material and the genesis block of `bftchannel` with its tools, from the
/// fixture's files (four orderers; `n` > 4 adds orderers 5..=n as consenters) with fresh ports; returns the tools
/// and each orderer's (client, cluster) ports. Without `cluster_listener` the consenters' cluster port is their
/// client port (one gRPC listener per node, as ours).
pub(crate) fn fabric_bft(tmp: &Path, cluster_listener: bool, n: usize) -> (Fabric, Vec<(u16, u16)>) {
    let root = unpack("3.1.5", &tmp.join("fabric"), &tmp.join("unpack.log"));
    let fabric = Fabric { bin: root.join("bin"), config: root.join("config"), work: tmp.join("work") };
    let fixture = fabric_dir().join("../fixtures/fabric-3.1-bft");
    std::fs::create_dir_all(&fabric.work).unwrap();
    let mut crypto = std::fs::read_to_string(fixture.join("crypto-config.yaml")).unwrap();
    let mut configtx = std::fs::read_to_string(fixture.join("configtx.yaml")).unwrap();
    for i in 5..=n {
        let last = format!("  - Hostname: orderer{}\n    SANS: [localhost, 127.0.0.1]\n", i - 1);
        let spec = format!("  - Hostname: orderer{i}\n    SANS: [localhost, 127.0.0.1]\n");
        crypto = crypto.replacen(&last, &format!("{last}{spec}"), 1);
        let endpoint = format!("  - 127.0.0.1:{}\n", 7050 + 100 * (i - 2));
        configtx = configtx.replacen(&endpoint, &format!("{endpoint}  - 127.0.0.1:{}\n", 7050 + 100 * (i - 1)), 1);
        let dir = format!("organizations/ordererOrganizations/example.com/orderers/orderer{i}.example.com");
        let consenter = format!(
            "  - ID: {i}\n    Host: 127.0.0.1\n    Port: {}\n    MSPID: OrdererMSP\n    Identity: {dir}/msp/signcerts/\
             orderer{i}.example.com-cert.pem\n    ClientTLSCert: {dir}/tls/server.crt\n    ServerTLSCert: {dir}/tls/server.crt\n",
            7060 + 100 * (i - 1)
        );
        let previous = format!("orderer{}.example.com/tls/server.crt\n", i - 1);
        let at = configtx.rfind(&previous).unwrap() + previous.len();
        configtx.insert_str(at, &consenter);
    }
    std::fs::write(fabric.work.join("crypto-config.yaml"), crypto).unwrap();
    let mut cryptogen = fabric.cmd("cryptogen");
    cryptogen.arg("generate").arg(format!("--config={}", fabric.work.join("crypto-config.yaml").display()));
    output(cryptogen.arg(format!("--output={}", fabric.work.join("organizations").display()))).unwrap();
    let ports: Vec<(u16, u16)> = (0..n)
        .map(|_| {
            let port = free_port();
            (port, if cluster_listener { free_port() } else { port })
        })
        .collect();
    for (i, (port, cluster)) in ports.iter().enumerate() {
        configtx = configtx
            .replace(&format!("127.0.0.1:{}", 7050 + 100 * i), &format!("127.0.0.1:{port}"))
            .replace(&format!("Port: {}\n", 7060 + 100 * i), &format!("Port: {cluster}\n"));
    }
    // Batches of up to 50 within half a second, so that the test does not wait on SmartBFT's 2-s interval.
    let configtx = configtx.replace("RequestBatchMaxInterval: 2s", "RequestBatchMaxInterval: 500ms");
    std::fs::write(fabric.work.join("configtx.yaml"), configtx).unwrap();
    let mut genesis = fabric.cmd("configtxgen");
    genesis.env("FABRIC_CFG_PATH", &fabric.work).args(["-profile", "BFTChannel", "-channelID", "bftchannel"]);
    output(genesis.arg("-outputBlock").arg(fabric.work.join("genesis.block"))).unwrap();
    (fabric, ports)
}

/// Starts orderer `i` (1-4) with its client and cluster ports, the channel participation API and TLS.
fn start_orderer(fabric: &Fabric, i: usize, port: u16, cluster: u16) -> Orderer {
    let (admin, ops) = (free_port(), free_port());
    let dir = fabric.orderer_dir(i);
    let tls = |f: &str| dir.join("tls").join(f).display().to_string();
    let data = fabric.work.join(format!("orderer{i}-data"));
    let log = fabric.work.join(format!("orderer{i}.log"));
    let mut cmd = fabric.cmd("orderer");
    real_orderer_env(&mut cmd, &dir, port, admin, ops, &data);
    // SmartBFT's cluster service on its own port, the consenter mapping's.
    cmd.env("ORDERER_GENERAL_CLUSTER_SERVERCERTIFICATE", tls("server.crt"))
        .env("ORDERER_GENERAL_CLUSTER_SERVERPRIVATEKEY", tls("server.key"))
        .env("ORDERER_GENERAL_CLUSTER_LISTENADDRESS", "127.0.0.1")
        .env("ORDERER_GENERAL_CLUSTER_LISTENPORT", cluster.to_string())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let process = Running(cmd.spawn().unwrap());
    let admin = format!("127.0.0.1:{admin}");
    wait_listening(&admin, &format!("orderer{i}"), &log);
    osnadmin_join(fabric, i, &admin);
    Orderer { process, grpc: format!("127.0.0.1:{port}") }
}

/// Joins orderer `i` (admin endpoint `admin`, mutual TLS with its own TLS identity) to `bftchannel` with the
/// genesis block, with the real `osnadmin`.
pub(crate) fn osnadmin_join(fabric: &Fabric, i: usize, admin: &str) {
    osnadmin_join_with(fabric, i, admin, &fabric.work.join("genesis.block"));
}

/// `osnadmin channel list --channelID bftchannel` against orderer `i`'s admin endpoint; its output.
pub(crate) fn osnadmin_list(fabric: &Fabric, i: usize, admin: &str) -> String {
    let dir = fabric.orderer_dir(i);
    let tls = |f: &str| dir.join("tls").join(f);
    let mut list = fabric.cmd("osnadmin");
    list.args(["channel", "list", "--channelID", "bftchannel", "-o", admin, "--ca-file"]).arg(tls("ca.crt"));
    list.arg("--client-cert").arg(tls("server.crt")).arg("--client-key").arg(tls("server.key"));
    output(&mut list).unwrap_or_else(|e| panic!("osnadmin channel list on orderer{i}: {e}"))
}

/// [`osnadmin_join`] with the config block in file `block`.
pub(crate) fn osnadmin_join_with(fabric: &Fabric, i: usize, admin: &str, block: &Path) {
    let dir = fabric.orderer_dir(i);
    let tls = |f: &str| dir.join("tls").join(f);
    let mut join = fabric.cmd("osnadmin");
    join.args(["channel", "join", "--channelID", "bftchannel", "--config-block"]);
    join.arg(block).args(["-o", admin, "--ca-file"]).arg(tls("ca.crt"));
    join.arg("--client-cert").arg(tls("server.crt")).arg("--client-key").arg(tls("server.key"));
    let joined = output(&mut join).unwrap_or_else(|e| panic!("osnadmin channel join on orderer{i}: {e}"));
    assert!(joined.starts_with("Status: 201"), "osnadmin channel join on orderer{i}: {joined}");
}

/// Broadcasts `txs` endorser transactions of User1 of `org` (1 or 2) to `orderer` with our bench client, which
/// returns when all of them are in blocks. The bench's envelopes are the same on every run; SmartBFT refuses a
/// request it already ordered, so each run needs another creator.
pub(crate) fn broadcast(fabric: &Fabric, orderer: &str, org: u8, txs: u32) {
    broadcast_as(fabric, orderer, org, "User1", txs);
}

/// [`broadcast`] as `user` (`User1`, `Admin`) of `org`.
pub(crate) fn broadcast_as(fabric: &Fabric, orderer: &str, org: u8, user: &str, txs: u32) {
    let msp = fabric
        .work
        .join(format!("organizations/peerOrganizations/org{org}.example.com/users/{user}@org{org}.example.com/msp"));
    broadcast_with(fabric, orderer, &format!("Org{org}MSP"), &msp, txs);
}

/// [`broadcast`] as the identity of MSP directory `msp` of `msp_id`.
pub(crate) fn broadcast_with(fabric: &Fabric, orderer: &str, msp_id: &str, msp: &Path, txs: u32) {
    let out = Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
        .args(["bench", "orderer", "--address", orderer, "--channel", "bftchannel", "--msp-id", msp_id])
        .arg("--msp-dir")
        .arg(msp)
        .args(["--tls", "--tls-ca"])
        .arg(fabric.tls_ca())
        .args(["--txs", &txs.to_string(), "--clients", "1", "--skip-o2-off", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bench orderer against {orderer}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        orderer_logs(fabric)
    );
}

/// The last lines of every orderer's log in the work directory, for a failure message: what SmartBFT said (view
/// changes, complaints, refused requests) while the test waited.
fn orderer_logs(fabric: &Fabric) -> String {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(&fabric.work)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    logs.retain(|p| {
        p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("orderer") && n.ends_with(".log"))
    });
    logs.sort();
    let mut text = String::new();
    for log in logs {
        let content = std::fs::read_to_string(&log).unwrap_or_default();
        let lines: Vec<&str> = content.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        text.push_str(&format!("--- {} (last {} lines)\n{tail}\n", log.display(), lines.len().min(40)));
    }
    text
}

/// The height of `bftchannel` at the orderer `orderer`.
pub(crate) fn orderer_height(fabric: &Fabric, orderer: &str) -> u64 {
    try_orderer_height(fabric, orderer).unwrap()
}

/// [`orderer_height`], or why the orderer did not answer.
fn try_orderer_height(fabric: &Fabric, orderer: &str) -> Result<u64, String> {
    fabric.fetch_from_orderer(orderer, "newest").map(|b| b.header.map_or(0, |h| h.number + 1))
}

/// Waits until our committer at `peer` serves block `number`; returns it.
pub(crate) fn committed(fabric: &Fabric, peer: &str, number: u64, log: &Path, within: Duration) -> Block {
    let deadline = Instant::now() + within;
    loop {
        match fabric.fetch_from_peer(peer, &number.to_string()) {
            Ok(b) => return b,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => panic!(
                "our committer did not serve block {number} within {within:?}: {e}\ncommitter log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            ),
        }
    }
}

/// The orderer the committer currently takes blocks from: which of `candidates` its last "receiving blocks" log
/// line names.
fn block_source(log: &Path, candidates: &[String]) -> Option<String> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let line = text.lines().rfind(|l| l.contains("receiving blocks"))?;
    candidates
        .iter()
        .find(|c| line.contains(&format!("{c}\u{1b}")) || line.ends_with(c.as_str()) || line.contains(&format!("{c} ")))
        .cloned()
}

#[test]
fn committer_leaves_a_censoring_orderer_and_gateway_submits_to_a_quorum_on_a_real_fabric_3_bft_cluster() {
    require_tool("zstd");
    let _cluster = cluster_lock();
    let tmp = tempfile::tempdir().unwrap();
    let (fabric, ports) = fabric_bft(tmp.path(), true, 4);
    let orderers: Vec<Orderer> =
        ports.iter().enumerate().map(|(i, (port, cluster))| start_orderer(&fabric, i + 1, *port, *cluster)).collect();
    let leader = &orderers[0].grpc;

    // Block 1 from the cluster before the committer starts: the channel is up on a quorum.
    broadcast(&fabric, leader, 1, 60);
    let first_height = orderer_height(&fabric, leader);
    assert!(first_height >= 2, "no block ordered");

    // Our committer, following orderers 2-4 over TLS with Fabric 3's BFT deliverer.
    let followed: Vec<String> = orderers[1..].iter().map(|o| o.grpc.clone()).collect();
    let (committer, listen, log) = start_committer(&fabric, tmp.path(), &followed);

    // Every block so far, committed with the cluster's header and data.
    for n in 1..first_height {
        let ours = committed(&fabric, &listen, n, &log, WAIT);
        let theirs = fabric.fetch_from_orderer(leader, &n.to_string()).unwrap();
        assert_eq!((&ours.header, &ours.data), (&theirs.header, &theirs.data), "block {n}");
    }

    // Freeze the block source: the other orderers' attestations show it withholding the next blocks. The three
    // left must all be up and level with the leader, or one frozen node would leave no quorum.
    every_orderer_at(&fabric, &orderers, first_height);
    let candidates: Vec<String> = orderers[1..].iter().map(|o| o.grpc.clone()).collect();
    let source = block_source(&log, &candidates).expect("the committer logs its block source");
    let frozen = orderers.iter().find(|o| o.grpc == source).expect("the source is one of orderers 2-4");
    let pid = frozen.process.0.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    broadcast(&fabric, leader, 2, 60);
    let height = orderer_height(&fabric, leader);
    assert!(height > first_height, "the remaining quorum ordered nothing");
    let frozen_at = Instant::now();
    let last = committed(&fabric, &listen, height - 1, &log, Duration::from_secs(30));
    let switched_after = frozen_at.elapsed();
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    let theirs = fabric.fetch_from_orderer(leader, &(height - 1).to_string()).unwrap();
    assert_eq!((&last.header, &last.data), (&theirs.header, &theirs.data), "block {} after the switch", height - 1);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("block censorship suspected"), "no censorship detected:\n{text}");
    let new_source = block_source(&log, &candidates).unwrap();
    assert_ne!(new_source, source, "still following the frozen orderer");
    println!(
        "blocks 1..{height}: committed; block source {source} frozen, blocks taken from {new_source} after \
         {switched_after:?}"
    );
    drop(committer);
    gateway_submit_needs_a_quorum_of_orderers(&fabric, &orderers);
}

/// Waits (up to [`WAIT`]) until every orderer of `orderers` serves `height` blocks; fails naming the ones that do
/// not, with the orderers' logs.
fn every_orderer_at(fabric: &Fabric, orderers: &[Orderer], height: u64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let behind: Vec<(&str, Result<u64, String>)> = orderers
            .iter()
            .map(|o| (o.grpc.as_str(), try_orderer_height(fabric, &o.grpc)))
            .filter(|(_, h)| !matches!(h, Ok(h) if *h >= height))
            .collect();
        if behind.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "orderers not at height {height} within {WAIT:?}: {behind:?}\n{}",
            orderer_logs(fabric)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Starts our committer as Org1's peer0, following the orderers `followed` of `bftchannel` over TLS with the BFT
/// deliverer (censorship timeout [`CENSORSHIP_TIMEOUT`]); returns it, its peer address and its log.
pub(crate) fn start_committer(fabric: &Fabric, tmp: &Path, followed: &[String]) -> (Running, String, PathBuf) {
    let listen = format!("127.0.0.1:{}", free_port());
    let config = tmp.join("committer.yaml");
    let peer0 = fabric.work.join("organizations/peerOrganizations/org1.example.com/peers/peer0.org1.example.com");
    let followed: Vec<String> = followed.iter().map(|o| format!("\"{o}\"")).collect();
    std::fs::write(
        &config,
        format!(
            "Channel: bftchannel\nGenesisBlock: {genesis}\nDataDir: {data}\nLocalMSPDir: {msp}\nLocalMSPID: Org1MSP\n\
             Orderers: [{followed}]\nOrdererTLS: {{Enabled: true, RootCAs: [\"{ca}\"]}}\nListenAddress: {listen}\n\
             Delivery: {{BlockCensorshipTimeout: {CENSORSHIP_TIMEOUT}, KeepaliveInterval: 60s, KeepaliveTimeout: 60s}}\n",
            genesis = fabric.work.join("genesis.block").display(),
            data = tmp.join("committer").display(),
            msp = peer0.join("msp").display(),
            followed = followed.join(", "),
            ca = fabric.tls_ca().display(),
        ),
    )
    .unwrap();
    let log = tmp.join("committer.log");
    let mut committer = Running(
        Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
            .args(["committer", "--config"])
            .arg(&config)
            .args(["--operations-listen", ""])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let ready = BufReader::new(committer.0.stdout.take().unwrap()).lines().next();
    assert!(matches!(&ready, Some(Ok(l)) if l.starts_with("committer ready")), "committer: {ready:?}");
    (committer, listen, log)
}

/// What the gateway reads of a peer for `Submit`: only the channel configuration, here the genesis block's.
struct GenesisLedger {
    config: Arc<ChannelConfig>,
    height: tokio::sync::watch::Sender<u64>,
}

impl Ledger for GenesisLedger {
    fn channel_id(&self) -> &str {
        self.config.channel_id()
    }
    fn config(&self) -> Arc<ChannelConfig> {
        self.config.clone()
    }
    fn chaincode(&self, _: &str) -> Result<Option<ferrofabric_gateway::ChaincodeInfo>, String> {
        Ok(None)
    }
    fn chaincodes(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    fn height(&self) -> u64 {
        *self.height.borrow()
    }
    fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.height.subscribe()
    }
    async fn block(&self, _: u64) -> Result<Option<bytes::Bytes>, String> {
        Ok(None)
    }
    async fn tx_location(&self, _: &str) -> Result<Option<(u64, u32)>, String> {
        Ok(None)
    }
}

/// Our gateway submits to the four orderers of the channel configuration: accepted (a quorum of 3 answered
/// SUCCESS) and ordered; with two of them frozen, refused with UNAVAILABLE and an error detail per failed orderer.
fn gateway_submit_needs_a_quorum_of_orderers(fabric: &Fabric, orderers: &[Orderer]) {
    let genesis = Block::decode(std::fs::read(fabric.work.join("genesis.block")).unwrap().as_slice()).unwrap();
    let config = Arc::new(ChannelConfig::from_config_block(&genesis).unwrap());
    let ledger = Arc::new(GenesisLedger { config, height: tokio::sync::watch::channel(1).0 });
    let tls = ClientTls { ca_pem: std::fs::read(fabric.tls_ca()).unwrap(), ..ClientTls::default() };
    let options = GatewayOptions { broadcast_timeout: Duration::from_secs(5), ..GatewayOptions::default() };
    let config = GatewayConfig { local_mspid: "Org1MSP".into(), tls: Some(tls), options, ..GatewayConfig::default() };
    let (_stop, shutdown) = Shutdown::new();
    let gateway = Gateway::new(config, ledger, shutdown);
    let net = ferrofabric_testkit::Network::generate(7).unwrap();
    let user = fabric.work.join("organizations/peerOrganizations/org1.example.com/users/User1@org1.example.com/msp");
    let user = ferrofabric_msp::SigningIdentity::from_msp_dir("Org1MSP", &user).unwrap();
    let submit = |gateway: &Gateway<GenesisLedger>| {
        let tx = ferrofabric_testkit::TxBuilder::new(&net)
            .channel("bftchannel")
            .creator(&user)
            .chaincode("kv", "1.0")
            .write("kv", "k", "v")
            .build()
            .unwrap();
        let request = SubmitRequest {
            transaction_id: tx.tx_id.clone(),
            channel_id: "bftchannel".into(),
            prepared_transaction: Some(Envelope::decode(tx.envelope).unwrap()),
        };
        let runtime = tokio::runtime::Runtime::new().unwrap();
        (tx.tx_id, runtime.block_on(gateway.submit(tonic::Request::new(request))))
    };

    let leader = &orderers[0].grpc;
    let before = orderer_height(fabric, leader);
    let (txid, accepted) = submit(&gateway);
    assert!(accepted.is_ok(), "a BFT submit with every orderer up: {accepted:?}");
    let deadline = Instant::now() + WAIT;
    while orderer_height(fabric, leader) <= before {
        assert!(Instant::now() < deadline, "the submitted transaction {txid} was never ordered");
        std::thread::sleep(Duration::from_millis(200));
    }

    let frozen: Vec<String> = orderers[2..].iter().map(|o| o.process.0.id().to_string()).collect();
    for pid in &frozen {
        assert!(Command::new("kill").args(["-STOP", pid]).status().unwrap().success());
    }
    let (_, refused) = submit(&gateway);
    for pid in &frozen {
        let _ = Command::new("kill").args(["-CONT", pid]).status();
    }
    let status = refused.expect_err("a BFT submit that only two of four orderers accepted");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert_eq!(
        status.message(),
        "insufficient number of orderers could successfully process transaction to satisfy quorum requirement"
    );
    let details = tonic_types::Status::decode(status.details()).unwrap().details;
    assert_eq!(details.len(), 2, "one gateway.ErrorDetail per failed orderer: {status:?}");
}
