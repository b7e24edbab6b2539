//! Our BFT ordering service: four `ferrofabric orderer` processes (f = 1) on 127.0.0.1 serving a Fabric 3 BFT
//! channel made by our `crypto generate` and `channel genesis` from the BFT fixture's `crypto-config.yaml` and
//! `configtx.yaml` (its `BFTChannel` profile), each joined over the participation API. In turn:
//! * clients broadcast to different consenters;
//! * the consenter whose turn it is to propose is SIGKILLed mid-stream and the others go on; restarted from its
//!   ledger and WAL, it takes requests again and pulls the blocks it missed;
//! * another consenter is cut off (SIGSTOP) while the others order, then resumes and catches up;
//! * bad client input reaches it: a MESSAGE envelope and an ENDORSER_TRANSACTION whose payload is no Transaction,
//!   both answered SUCCESS and ordered (the peers flag them), and the channel goes on;
//! * a CONFIG_UPDATE becomes a config block of its own, named as last config by itself and the blocks after it.
//!
//! Then every consenter's chain must hold the same blocks (headers and data), each signed by a quorum (3 of 4) of
//! consenters as Fabric 3's `BlockValidation` demands, and every transaction that got SUCCESS exactly once; the
//! blocks have the metadata of a real Fabric 3.1.5 BFT ordering service's (the BFT fixture's), and our committer,
//! following the cluster, commits them as a real Fabric 3.1.5 peer stored its blocks. Other tests here put a
//! censoring, a lying, a Byzantine and a frozen consenter in the cluster, and change its consenters.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::MutexGuard;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_comm::{connect, ClientTls};
use ferrofabric_protos::common::{Block, ChannelHeader, Consenter, Envelope, Metadata, Orderers, Payload, Status};
use ferrofabric_protos::orderer::BroadcastResponse;
use futures::StreamExt;
use prost::Message;
use tempfile::TempDir;

use crate::bft_network::{block_on, chain, BftNetwork};
use crate::block_shape::{assert_same_shapes, commit_hash, metadata, TRANSACTIONS_FILTER};
use crate::processes::{cluster_lock, free_port, wait_listening};
use crate::sdk::Running;

/// One of our orderers: its process, client address and log.
struct Node {
    process: Option<Running>,
    grpc: String,
    admin: String,
    config: std::path::PathBuf,
    log: std::path::PathBuf,
    /// Fault points turned on in this node (`FERROFABRIC_FAILPOINTS`): a Byzantine consenter.
    faults: Option<String>,
}

impl Node {
    fn start(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
            .args(["orderer", "--config"])
            .arg(&self.config)
            .env("FERROFABRIC_LOG", "info,informalsystems_malachitebft=warn,ferrofabric_consensus_bft=debug")
            .env("FERROFABRIC_FAILPOINTS", self.faults.as_deref().unwrap_or_default())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.process = Some(Running(child));
        wait_listening(&self.admin, "our orderer", &self.log);
        if self.faults.as_deref().is_some_and(|f| !f.is_empty()) {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            assert!(
                log.contains("fault injection is on"),
                "the orderer did not arm its fault points: build the tests with `--features ferrofabric/fault-points`"
            );
        }
    }

    /// SIGKILL: no shutdown, whatever is in flight is lost.
    fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            p.0.kill().unwrap();
            p.0.wait().unwrap();
        }
    }
}

impl Drop for Node {
    /// A failed test shows each node's warnings and errors, so that a fault seen only on a loaded machine can be
    /// diagnosed from the test output alone.
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> =
                log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("panicked")).collect();
            eprintln!("--- {} ({}): its last warnings and errors", self.grpc, self.log.display());
            for line in &lines[lines.len().saturating_sub(40)..] {
                eprintln!("{line}");
            }
        }
    }
}

/// Writes orderer `i`'s configuration (its cryptogen folders, TLS on the gRPC port with client certificates
/// requested for the cluster service, mutual TLS on the admin port) and returns the node, not started.
fn node(net: &BftNetwork, i: usize, port: u16) -> Node {
    let dir = net.orderer_dir(i);
    let home = net.work.join(format!("ours{i}"));
    std::fs::create_dir_all(&home).unwrap();
    let admin = free_port();
    let tls = dir.join("tls");
    let yaml = format!(
        "General:\n  ListenAddress: 127.0.0.1\n  ListenPort: {port}\n  TLS:\n    Enabled: true\n    \
         Certificate: {tls}/server.crt\n    PrivateKey: {tls}/server.key\n    RootCAs: [{tls}/ca.crt]\n    \
         ClientAuthRequired: false\n    ClientRootCAs: [{tls}/ca.crt]\n  Cluster:\n    ClientCertificate: \
         {tls}/server.crt\n    ClientPrivateKey: {tls}/server.key\n  LocalMSPDir: {msp}\n  LocalMSPID: OrdererMSP\n\
         FileLedger:\n  Location: {home}/ledger\nAdmin:\n  ListenAddress: 127.0.0.1:{admin}\n  TLS:\n    Enabled: true\n    \
         Certificate: {tls}/server.crt\n    PrivateKey: {tls}/server.key\n    ClientAuthRequired: true\n    \
         ClientRootCAs: [{tls}/ca.crt]\nChannelParticipation:\n  Enabled: true\nOperations:\n  ListenAddress: \"\"\n\
         Consensus:\n  WALDir: {home}/wal\n  SnapDir: {home}/snap\n",
        tls = tls.display(),
        msp = dir.join("msp").display(),
        home = home.display(),
    );
    let config = home.join("orderer.yaml");
    std::fs::write(&config, yaml).unwrap();
    Node {
        process: None,
        grpc: format!("127.0.0.1:{port}"),
        admin: format!("127.0.0.1:{admin}"),
        config,
        log: home.join("orderer.log"),
        faults: None,
    }
}

/// A cluster of `n` of our orderers on a Fabric 3 BFT channel ([`BftNetwork::generate`]), node `i` with the fault
/// points `faults` names for it, each joined to `bftchannel` over the participation API. Returns, in the order they
/// must drop (last first): the lock that keeps cluster tests apart, the test's directory, the channel's material,
/// the nodes.
fn cluster(n: usize, faults: &[(usize, &str)]) -> (MutexGuard<'static, ()>, TempDir, BftNetwork, Vec<Node>) {
    let lock = cluster_lock();
    let tmp = tempfile::tempdir().unwrap();
    let (net, ports) = BftNetwork::generate(tmp.path(), n);
    let nodes = start_cluster(&net, &ports, faults);
    (lock, tmp, net, nodes)
}

/// Starts our orderers at `ports` (orderer `i + 1` at `ports[i]`), node `i` with the fault points `faults` names
/// for it, and joins each to `bftchannel` over the participation API.
fn start_cluster(net: &BftNetwork, ports: &[u16], faults: &[(usize, &str)]) -> Vec<Node> {
    let mut nodes: Vec<Node> = ports.iter().enumerate().map(|(i, port)| node(net, i + 1, *port)).collect();
    for (i, spec) in faults {
        nodes[*i].faults = Some((*spec).to_owned());
    }
    for (i, n) in nodes.iter_mut().enumerate() {
        n.start();
        net.join(i + 1, &n.admin);
    }
    nodes
}

/// Transaction IDs of a block, in order.
pub(crate) fn tx_ids(block: &Block) -> Vec<String> {
    let data = block.data.clone().unwrap_or_default().data;
    data.into_iter()
        .map(|e| {
            let p = Payload::decode(Envelope::decode(e).unwrap().payload).unwrap();
            ChannelHeader::decode(p.header.unwrap().channel_header).unwrap().tx_id
        })
        .collect()
}

/// Sends two malformed but signed requests (Org1's User1) to `addr`: a MESSAGE envelope with opaque data, and an
/// ENDORSER_TRANSACTION whose payload data is not a Transaction. Each must be answered SUCCESS, as Fabric's
/// broadcast filters pass both; returns their transaction IDs.
async fn broadcast_bad_input(net: &BftNetwork, addr: &str) -> Vec<String> {
    use ferrofabric_protos::common::HeaderType;
    let mut envelopes = Vec::new();
    let mut ids = Vec::new();
    for (kind, id) in
        [(HeaderType::Message, "bad-input-message"), (HeaderType::EndorserTransaction, "bad-input-payload")]
    {
        let env = user_envelope(net, kind, id, b"\xff\xfe not a protobuf Transaction");
        envelopes.push(Bytes::from(env.encode_to_vec()));
        ids.push(id.to_owned());
    }
    let tls = ClientTls { ca_pem: std::fs::read(net.tls_ca()).unwrap(), ..ClientTls::default() };
    let ch = connect(addr, Some(&tls)).await.unwrap();
    let n = envelopes.len();
    let mut responses = ferrofabric_comm::broadcast(ch, futures::stream::iter(envelopes)).await.unwrap();
    assert_eq!(n, ids.len());
    for id in &ids {
        let r = responses.next().await.unwrap().unwrap();
        assert_eq!(r.status, Status::Success as i32, "bad input {id}: {}", r.info);
    }
    ids
}

/// Sends a CONFIG_UPDATE adding an anchor peer to Org1 (signed by Org1's admin) to `addr`; waits for the config
/// block it becomes and checks that the block holds only the CONFIG transaction and names itself as last config.
/// Returns its number.
async fn config_update(net: &BftNetwork, addr: &str) -> u64 {
    let genesis = Block::decode(std::fs::read(net.work.join("genesis.block")).unwrap().as_slice()).unwrap();
    let current = ChannelConfig::from_config_block(&genesis).unwrap();
    let msp = net.work.join("organizations/peerOrganizations/org1.example.com/users/Admin@org1.example.com/msp");
    let admin = ferrofabric_msp::SigningIdentity::from_msp_dir("Org1MSP", &msp).unwrap();
    let update =
        ferrofabric_configtx::anchor_peer_update("bftchannel", current.config(), "Org1MSP", "127.0.0.1", 7051).unwrap();
    let env = ferrofabric_configtx::config_update_envelope("bftchannel", &update, &[&admin], &admin);
    let before = net.orderer_height(addr);
    let r = broadcast_one(net, addr, env).await;
    assert_eq!(r.status, Status::Success as i32, "CONFIG_UPDATE: {}", r.info);
    next_config_block(net, addr, before).await
}

/// An envelope of header type `kind`, transaction ID `id` and payload data `data`, signed by Org1's User1.
fn user_envelope(net: &BftNetwork, kind: ferrofabric_protos::common::HeaderType, id: &str, data: &[u8]) -> Envelope {
    use ferrofabric_protos::common::{Header, SignatureHeader};
    let msp = net.work.join("organizations/peerOrganizations/org1.example.com/users/User1@org1.example.com/msp");
    let user = ferrofabric_msp::SigningIdentity::from_msp_dir("Org1MSP", &msp).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap();
    let channel_header = ChannelHeader {
        r#type: kind as i32,
        channel_id: "bftchannel".into(),
        tx_id: id.into(),
        timestamp: Some(prost_types::Timestamp { seconds: now.as_secs() as i64, nanos: 0 }),
        ..ChannelHeader::default()
    };
    let signature_header = SignatureHeader { creator: user.serialized().clone(), nonce: Bytes::from_static(b"nonce") };
    let payload = Payload {
        header: Some(Header {
            channel_header: channel_header.encode_to_vec().into(),
            signature_header: signature_header.encode_to_vec().into(),
        }),
        data: Bytes::copy_from_slice(data),
    };
    let payload = payload.encode_to_vec();
    let signature = user.sign(&payload);
    Envelope { payload: payload.into(), signature: signature.into() }
}

/// Sends one envelope to the orderer at `addr` with Broadcast; returns the answer.
async fn broadcast_one(net: &BftNetwork, addr: &str, env: Envelope) -> BroadcastResponse {
    let tls = ClientTls { ca_pem: std::fs::read(net.tls_ca()).unwrap(), ..ClientTls::default() };
    let ch = connect(addr, Some(&tls)).await.unwrap();
    let stream = futures::stream::iter(vec![Bytes::from(env.encode_to_vec())]);
    ferrofabric_comm::broadcast(ch, stream).await.unwrap().next().await.unwrap().unwrap()
}

/// Waits (30 s at most) for the first config block at or above `from` at the orderer at `addr`; checks that it
/// names itself as last config and returns its number.
async fn next_config_block(net: &BftNetwork, addr: &str, from: u64) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let height = net.orderer_height(addr);
        for n in from..height {
            let block = net.fetch_from_orderer(addr, &n.to_string()).unwrap();
            if ferrofabric_protoutil::sole_config_envelope(&block).is_some() {
                assert_eq!(ferrofabric_protoutil::last_config_index(&block).unwrap(), n, "config block {n}");
                return n;
            }
        }
        assert!(std::time::Instant::now() < deadline, "no config block within 30 s");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Broadcasts a CONFIG_UPDATE, signed by the orderer organization's admin, that replaces the channel's consenter
/// mapping with what `change` makes of it but leaves `BlockValidation` as it is (the mistake Fabric 3 users make
/// with `configtxlator`). Returns the Broadcast answer.
async fn consenter_update_keeping_block_validation(
    net: &BftNetwork,
    addr: &str,
    change: impl FnOnce(&mut Vec<Consenter>),
) -> BroadcastResponse {
    let (_, block) = newest_config_block(net, addr);
    let original = ChannelConfig::from_config_block(&block).unwrap().config().clone();
    let mut updated = original.clone();
    let orderer = updated.channel_group.as_mut().unwrap().groups.get_mut("Orderer").unwrap();
    let value = orderer.values.get_mut("Orderers").unwrap();
    let mut orderers = Orderers::decode(value.value.clone()).unwrap();
    change(&mut orderers.consenter_mapping);
    value.value = Bytes::from(orderers.encode_to_vec());
    let update = ferrofabric_configtx::compute_update("bftchannel", &original, &updated).unwrap();
    let admin = ferrofabric_msp::SigningIdentity::from_msp_dir("OrdererMSP", &net.orderer_admin()).unwrap();
    let env = ferrofabric_configtx::config_update_envelope("bftchannel", &update, &[&admin], &admin);
    broadcast_one(net, addr, env).await
}

/// The newest config block of the orderer at `addr`: its number and the block.
fn newest_config_block(net: &BftNetwork, addr: &str) -> (u64, Block) {
    let newest = net.fetch_from_orderer(addr, "newest").unwrap();
    let number = ferrofabric_protoutil::last_config_index(&newest).unwrap();
    (number, net.fetch_from_orderer(addr, &number.to_string()).unwrap())
}

/// Changes the consenter set as an operator would: `ferrofabric channel bft-consenters ARGS` on the newest config
/// block writes the unsigned update, which the orderer organization's admin signs and sends to the orderer at
/// `addr`, as `peer channel update -f` does (a signature of its own on the `ConfigUpdate` carried as written, in an
/// envelope it signs). Returns the number of the config block it became.
fn update_consenters_with_the_cli(net: &BftNetwork, addr: &str, args: &[String]) -> u64 {
    let (number, block) = newest_config_block(net, addr);
    let current = net.work.join(format!("config{number}.block"));
    std::fs::write(&current, block.encode_to_vec()).unwrap();
    let update = net.work.join(format!("consenters{number}.tx"));
    let made = Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
        .args(["channel", "bft-consenters", "--config-block"])
        .arg(&current)
        .args(args)
        .arg("--output")
        .arg(&update)
        .output()
        .unwrap();
    assert!(made.status.success(), "ferrofabric channel bft-consenters: {}", String::from_utf8_lossy(&made.stderr));
    let unsigned = Envelope::decode(std::fs::read(&update).unwrap().as_slice()).unwrap();
    let data = Payload::decode(unsigned.payload).unwrap().data;
    let written = ferrofabric_protos::common::ConfigUpdateEnvelope::decode(data).unwrap();
    let update = ferrofabric_protos::common::ConfigUpdate::decode(written.config_update).unwrap();
    let admin = ferrofabric_msp::SigningIdentity::from_msp_dir("OrdererMSP", &net.orderer_admin()).unwrap();
    let env = ferrofabric_configtx::config_update_envelope("bftchannel", &update, &[&admin], &admin);
    let before = net.orderer_height(addr);
    block_on(|| async {
        let r = broadcast_one(net, addr, env).await;
        assert_eq!(r.status, Status::Success as i32, "the consenter update: {}", r.info);
        next_config_block(net, addr, before).await
    })
}

/// Waits (60 s at most) until `node`'s log contains `line`.
fn wait_for_log(node: &Node, line: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let log = std::fs::read_to_string(&node.log).unwrap_or_default();
        if log.contains(line) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{} did not log \"{line}\":\n{log}", node.grpc);
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Every consenter's chain holds the same blocks (header and data), each carrying a quorum of consenter
/// signatures that satisfy `BlockValidation` (of the configuration in force when it was decided: a config block
/// changes it for the blocks after it); returns how often each transaction ID occurs.
async fn same_chain_everywhere(net: &BftNetwork, nodes: &[&Node], genesis: &Path) -> HashMap<String, usize> {
    let genesis = Block::decode(std::fs::read(genesis).unwrap().as_slice()).unwrap();
    let mut config = ChannelConfig::from_config_block(&genesis).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let height = loop {
        let heights: Vec<u64> = nodes.iter().map(|n| net.orderer_height(&n.grpc)).collect();
        if heights.iter().all(|h| *h == heights[0]) {
            break heights[0];
        }
        assert!(std::time::Instant::now() < deadline, "the consenters' heights differ: {heights:?}");
        std::thread::sleep(Duration::from_millis(500));
    };
    let mut chains = Vec::new();
    for n in nodes {
        chains.push(chain(net, &n.grpc, height).await);
    }
    let mut seen = HashMap::new();
    for number in 1..height as usize {
        let blocks: Vec<Block> = chains.iter().map(|c| Block::decode(c[number].clone()).unwrap()).collect();
        let quorum = ferrofabric_channelconfig::bft_quorum(config.orderer().unwrap().consenters().len());
        for (b, n) in blocks.iter().zip(nodes) {
            assert_eq!((&b.header, &b.data), (&blocks[0].header, &blocks[0].data), "block {number} at {}", n.grpc);
            let signatures = Metadata::decode(b.metadata.as_ref().unwrap().metadata[0].clone()).unwrap().signatures;
            assert!(signatures.len() >= quorum, "block {number} at {} has {} signatures", n.grpc, signatures.len());
            ferrofabric_channelconfig::verify_block_attestation(&config, chains[0][number].clone())
                .unwrap_or_else(|e| panic!("block {number} at {}: {e}", n.grpc));
        }
        for id in tx_ids(&blocks[0]) {
            *seen.entry(id).or_insert(0) += 1;
        }
        if ferrofabric_protoutil::sole_config_envelope(&blocks[0]).is_some() {
            config = ChannelConfig::from_config_block(&blocks[0]).unwrap();
        }
    }
    seen
}

/// The consenter whose turn it is to propose the next block: heights and rounds rotate over the consenters in
/// id order (orderer `i` has id `i`).
fn next_proposer(net: &BftNetwork, node: &Node) -> usize {
    (net.orderer_height(&node.grpc) % 4) as usize
}

#[test]
fn four_bft_orderers_survive_a_killed_proposer_a_cut_off_consenter_and_bad_input() {
    let (_lock, tmp, net, mut nodes) = cluster(4, &[]);
    // Two clients, each at its own consenter.
    let (a, b) = (nodes[0].grpc.clone(), nodes[2].grpc.clone());
    let net_ref = &net;
    std::thread::scope(|s| {
        s.spawn(|| net_ref.broadcast(&a, 1, 100));
        s.spawn(|| net_ref.broadcast(&b, 2, 100));
    });

    // SIGKILL the next proposer while a client streams to another consenter; the other three go on ordering (the
    // dead consenter's turns time out to the next proposer).
    let start_height = net.orderer_height(&nodes[0].grpc);
    let victim = next_proposer(&net, &nodes[0]);
    let live = nodes[(victim + 1) % 4].grpc.clone();
    std::thread::scope(|s| {
        s.spawn(|| net_ref.broadcast_as(&live, 1, "Admin", 1000));
        while net_ref.orderer_height(&live) == start_height {
            std::thread::sleep(Duration::from_millis(20));
        }
        nodes[victim].kill();
    });
    let height_while_dead = net.orderer_height(&live);

    // Restarted from its ledger and WAL, it takes requests again and pulls the blocks it missed. Its engine fails
    // on the first input it is fed (replaying its WAL, if it has one): it sits that height out and goes on.
    nodes[victim].faults = Some("bft-engine-panic=1*panic(an engine invariant broke on restart)->off".to_owned());
    nodes[victim].start();
    let restarted = nodes[victim].grpc.clone();
    net.broadcast_as(&restarted, 2, "Admin", 100);
    let log = std::fs::read_to_string(&nodes[victim].log).unwrap();
    assert!(log.contains("BFT consenter caught up"), "the restarted consenter did not catch up:\n{log}");
    assert!(log.contains("sitting this height out"), "the restarted consenter's engine did not fail:\n{log}");

    // Another consenter cut off (SIGSTOP) while the others order, then back: it catches up too.
    let cut_off = (victim + 2) % 4;
    let pid = nodes[cut_off].process.as_ref().unwrap().0.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    net.broadcast_with(&nodes[(cut_off + 1) % 4].grpc, "OrdererMSP", &net.orderer_admin(), 100);
    assert!(Command::new("kill").args(["-CONT", &pid]).status().unwrap().success());

    // Bad client input, sent to the consenter just back: a MESSAGE envelope and an ENDORSER_TRANSACTION whose
    // payload is no Transaction. Both are ordered (the peers flag them), and the channel goes on.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let bad = runtime.block_on(broadcast_bad_input(&net, &nodes[cut_off].grpc));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let log = std::fs::read_to_string(&nodes[cut_off].log).unwrap();
        if log.contains("BFT consenter caught up") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the consenter cut off did not catch up:\n{log}");
        std::thread::sleep(Duration::from_millis(200));
    }

    // A CONFIG_UPDATE (an anchor peer for Org1, signed by its admin) becomes a config block of its own, which
    // names itself as last config, and so do the blocks after it.
    let config_number = runtime.block_on(config_update(&net, &nodes[0].grpc));
    let orderer1 = net.orderer_dir(1).join("msp");
    net.broadcast_with(&nodes[1].grpc, "OrdererMSP", &orderer1, 10);

    let refs: Vec<&Node> = nodes.iter().collect();
    let mut seen = runtime.block_on(same_chain_everywhere(&net, &refs, &net.work.join("genesis.block")));
    seen.remove("");
    for id in &bad {
        assert_eq!(seen.get(id), Some(&1), "bad input {id} ordered once");
    }
    assert_eq!(seen.len(), 1300 + 100 + bad.len() + 10, "every transaction that got SUCCESS is ordered");
    assert!(seen.values().all(|&c| c == 1), "a transaction ordered twice");
    let height = net.orderer_height(&nodes[0].grpc);
    let last = net.fetch_from_orderer(&nodes[0].grpc, &(height - 1).to_string()).unwrap();
    assert_eq!(ferrofabric_protoutil::last_config_index(&last).unwrap(), config_number, "LAST_CONFIG after the update");
    println!(
        "1412 transactions and a config update in {} blocks on four consenters; orderer{} killed, {height_while_dead} blocks when it came back",
        height - 1,
        victim + 1
    );
    committer_commits_blocks_of_fabrics_shape(&net, tmp.path(), &nodes, height);
}

/// Our committer follows the cluster (all four consenters, with the BFT deliverer, which checks each block's
/// consenter signatures against `BlockValidation`) and commits every block. The orderers' blocks have the metadata
/// of the blocks a real Fabric 3.1.5 BFT ordering service wrote (the BFT fixture's, as the orderer delivered them:
/// `IdentifierHeader` signatures of a quorum, SmartBFT's `ViewMetadata`, the last config index in SIGNATURES and
/// LAST_CONFIG), and the committed blocks those of the fixture's blocks as a real Fabric 3.1.5 peer stored them
/// (one validation code per transaction, a commit hash).
fn committer_commits_blocks_of_fabrics_shape(net: &BftNetwork, tmp: &Path, nodes: &[Node], height: u64) {
    let followed: Vec<String> = nodes.iter().map(|n| n.grpc.clone()).collect();
    let (committer, listen, log) = net.start_committer(tmp, &followed);
    let fixture = |file: &str| -> Vec<Block> {
        let data = Bytes::from(std::fs::read(ferrofabric_testkit::fixture("fabric-3.1-bft").join(file)).unwrap());
        ferrofabric_protoutil::records(data).map(|r| Block::decode(r.unwrap().1).unwrap()).collect()
    };
    let consenters = Some(nodes.len());
    let ordered: Vec<Block> =
        block_on(|| chain(net, &nodes[0].grpc, height)).into_iter().map(|b| Block::decode(b).unwrap()).collect();
    assert_same_shapes(&ordered, &fixture("orderer-blocks.bin"), (consenters, Some(4)));
    let committed: Vec<Block> = (0..height).map(|n| net.committed(&listen, n, &log, Duration::from_secs(60))).collect();
    for (n, (c, o)) in committed.iter().zip(&ordered).enumerate() {
        assert_eq!((&c.header, &c.data), (&o.header, &o.data), "block {n}");
        if n > 0 {
            assert_eq!(commit_hash(c).len(), 32, "block {n} has no commit hash");
        }
    }
    assert_same_shapes(&committed, &fixture("peer-blocks.bin"), (consenters, Some(4)));
    let invalid = committed.iter().filter(|b| metadata(b, TRANSACTIONS_FILTER).iter().any(|&c| c != 0)).count();
    println!("our committer committed blocks 0..{height} ({invalid} with invalid transactions), of Fabric's shape");
    drop(committer);
}

/// Seven consenters (f = 2, a quorum of 5): they order a stream from clients at two consenters; with two of them
/// SIGKILLed the other five go on; every block of the five carries at least five valid signatures and every
/// transaction is ordered once.
#[test]
fn seven_bft_orderers_order_with_two_of_them_killed() {
    let (_lock, _tmp, net, mut nodes) = cluster(7, &[]);
    let (a, b) = (nodes[0].grpc.clone(), nodes[4].grpc.clone());
    let net_ref = &net;
    std::thread::scope(|s| {
        s.spawn(|| net_ref.broadcast(&a, 1, 100));
        s.spawn(|| net_ref.broadcast(&b, 2, 100));
    });
    nodes[1].kill();
    nodes[5].kill();
    net.broadcast_as(&nodes[2].grpc, 1, "Admin", 100);
    let live: Vec<&Node> = nodes.iter().enumerate().filter(|(i, _)| *i != 1 && *i != 5).map(|(_, n)| n).collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let seen = runtime.block_on(same_chain_everywhere(&net, &live, &net.work.join("genesis.block")));
    assert_eq!(seen.len(), 300, "every transaction that got SUCCESS is ordered");
    assert!(seen.values().all(|&c| c == 1), "a transaction ordered twice");
    println!(
        "300 transactions in {} blocks on seven consenters, two of them killed",
        net.orderer_height(&nodes[0].grpc) - 1
    );
}

/// Our committer, following all of `nodes` (the faulty ones included), commits blocks `1..height` with the
/// headers and data the honest consenter at `honest` serves.
fn committer_follows_the_cluster(net: &BftNetwork, tmp: &Path, nodes: &[Node], honest: &str, height: u64) {
    let followed: Vec<String> = nodes.iter().map(|n| n.grpc.clone()).collect();
    let (committer, listen, log) = net.start_committer(tmp, &followed);
    for n in 1..height {
        let ours = net.committed(&listen, n, &log, Duration::from_secs(60));
        let reference = net.fetch_from_orderer(honest, &n.to_string()).unwrap();
        assert_eq!((&ours.header, &ours.data), (&reference.header, &reference.data), "block {n}");
    }
    drop(committer);
}

/// Three clients (Org1's User1, Org2's User1, Org1's Admin), one at each of `at`, broadcast 200 transactions each.
fn three_clients(net: &BftNetwork, at: [&Node; 3]) {
    std::thread::scope(|s| {
        s.spawn(|| net.broadcast(&at[0].grpc, 1, 200));
        s.spawn(|| net.broadcast(&at[1].grpc, 2, 200));
        s.spawn(|| net.broadcast_as(&at[2].grpc, 1, "Admin", 200));
    });
}

/// A censoring consenter: orderer 2 answers Broadcast SUCCESS but pools no request, neither a client's nor one
/// forwarded by the others, so on its turns it proposes nothing. The others replace it when their propose timeout
/// expires (the block is decided in a later round), and every transaction the honest consenters answered SUCCESS is
/// ordered exactly once, in the same blocks on all four, the censor's chain included; our committer, following all
/// four, commits those blocks.
#[test]
fn bft_censoring_proposer_is_replaced_and_every_request_is_ordered() {
    // Consenter 3's engine also fails once mid-stream (a panic): it sits that height out and carries on.
    let panic_once = "bft-engine-panic=100*off->1*panic(an engine invariant broke)->off";
    let (_lock, tmp, net, nodes) = cluster(4, &[(1, "bft-drop-requests=return"), (2, panic_once)]);
    three_clients(&net, [&nodes[0], &nodes[2], &nodes[3]]);
    let refs: Vec<&Node> = nodes.iter().collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let seen = runtime.block_on(same_chain_everywhere(&net, &refs, &net.work.join("genesis.block")));
    assert_eq!(seen.len(), 600, "every transaction that got SUCCESS from an honest consenter is ordered");
    assert!(seen.values().all(|&c| c == 1), "a transaction ordered twice");
    let log = std::fs::read_to_string(&nodes[0].log).unwrap();
    let decided: Vec<&str> = log.lines().filter(|l| l.contains("BFT block decided")).collect();
    assert!(!decided.is_empty(), "no decisions logged:\n{log}");
    assert!(
        decided.iter().any(|l| !l.contains(" round=0")),
        "no block was decided after a round change, so the censor never had a turn:\n{}",
        decided.join("\n")
    );
    let failed = std::fs::read_to_string(&nodes[2].log).unwrap();
    assert!(failed.contains("sitting this height out"), "the engine fault did not fire:\n{failed}");
    let height = net.orderer_height(&nodes[0].grpc);
    committer_follows_the_cluster(&net, tmp.path(), &nodes, &nodes[0].grpc, height);
    println!(
        "600 transactions in {} blocks beside a censoring consenter; {} of them decided after a round change",
        net.orderer_height(&nodes[0].grpc) - 1,
        decided.iter().filter(|l| !l.contains(" round=0")).count()
    );
}

/// Orderers that order honestly but lie over Deliver: orderer 1 alters the data of odd blocks, orderer 2 strips
/// the signatures of even blocks down to one (fewer than the quorum of 3). Our committer, following only these two,
/// refuses each lie and fetches the block from the other; it commits every block with the codes and commit
/// hashes of a committer that follows the two honest orderers.
#[test]
fn bft_committer_refuses_altered_and_under_signed_blocks_and_switches_orderer() {
    let faults = [(0, "deliver-block=return(alter-data:odd)"), (1, "deliver-block=return(drop-signatures:even)")];
    let (_lock, tmp, net, nodes) = cluster(4, &faults);
    let net_ref = &net;
    let (a, b) = (nodes[2].grpc.clone(), nodes[3].grpc.clone());
    std::thread::scope(|s| {
        s.spawn(|| net_ref.broadcast(&a, 1, 100));
        s.spawn(|| net_ref.broadcast(&b, 2, 100));
    });
    let honest: Vec<&Node> = nodes[2..].iter().collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let seen = runtime.block_on(same_chain_everywhere(&net, &honest, &net.work.join("genesis.block")));
    assert_eq!(seen.len(), 200, "every transaction that got SUCCESS is ordered");
    let height = net.orderer_height(&nodes[2].grpc);
    assert!(height > 3, "too few blocks ({height}) to see both lies");

    let (liars_dir, honest_dir) = (tmp.path().join("follows-liars"), tmp.path().join("follows-honest"));
    std::fs::create_dir_all(&liars_dir).unwrap();
    std::fs::create_dir_all(&honest_dir).unwrap();
    let (c1, liars, liars_log) = net.start_committer(&liars_dir, &[nodes[0].grpc.clone(), nodes[1].grpc.clone()]);
    let (c2, honest, honest_log) = net.start_committer(&honest_dir, &[nodes[2].grpc.clone(), nodes[3].grpc.clone()]);
    for n in 1..height {
        let ours = net.committed(&liars, n, &liars_log, Duration::from_secs(60));
        let reference = net.committed(&honest, n, &honest_log, Duration::from_secs(60));
        assert_eq!((&ours.header, &ours.data), (&reference.header, &reference.data), "block {n}");
        assert_eq!(metadata(&ours, TRANSACTIONS_FILTER), metadata(&reference, TRANSACTIONS_FILTER), "block {n}: codes");
        assert_eq!(commit_hash(&ours), commit_hash(&reference), "block {n}: commit hash");
    }
    let log = std::fs::read_to_string(&liars_log).unwrap();
    let refused: Vec<&str> = log.lines().filter(|l| l.contains("block refused")).collect();
    assert!(refused.len() >= 2, "the committer following the liars refused fewer than two blocks:\n{log}");
    println!("blocks 1..{height} committed through two lying orderers; refusals:\n{}", refused.join("\n"));
    drop((c1, c2));
}

/// A Byzantine consenter: orderer 4 equivocates (each of its votes goes out with a conflicting one it also signs,
/// in one order to some consenters and the other order to the rest), signs blocks with invalid signatures, and
/// every second sends the others a frame that does not decode, a vote in another consenter's name and bytes that
/// are no frame. The three honest consenters order a stream from clients at each of them: their chains are
/// identical, every block carries a quorum of valid signatures and none of the Byzantine node's, every transaction
/// is ordered once, the garbage was received and dropped, and our committer, following all four, commits the
/// honest chain.
#[test]
fn bft_orderers_tolerate_a_byzantine_consenter() {
    let (_lock, tmp, net, nodes) = cluster(4, &[(3, "bft-byzantine=return")]);
    three_clients(&net, [&nodes[0], &nodes[1], &nodes[2]]);
    let honest: Vec<&Node> = nodes[..3].iter().collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let seen = runtime.block_on(same_chain_everywhere(&net, &honest, &net.work.join("genesis.block")));
    assert_eq!(seen.len(), 600, "every transaction that got SUCCESS is ordered");
    assert!(seen.values().all(|&c| c == 1), "a transaction ordered twice");
    let height = net.orderer_height(&nodes[0].grpc);
    for n in &honest {
        for (number, raw) in runtime.block_on(chain(&net, &n.grpc, height)).into_iter().enumerate().skip(1) {
            let block = Block::decode(raw).unwrap();
            let md = Metadata::decode(block.metadata.unwrap().metadata[0].clone()).unwrap();
            for s in md.signatures {
                let id = ferrofabric_protos::common::IdentifierHeader::decode(s.identifier_header).unwrap();
                assert_ne!(id.identifier, 4, "block {number} at {} carries the Byzantine signature", n.grpc);
            }
        }
    }
    let logs: String = honest.iter().map(|n| std::fs::read_to_string(&n.log).unwrap()).collect();
    for dropped in ["undecodable BFT frame dropped", "vote signed for another voter: dropped"] {
        assert!(logs.contains(dropped), "no honest consenter logged \"{dropped}\"");
    }
    committer_follows_the_cluster(&net, tmp.path(), &nodes, &honest[0].grpc, height);
    println!("600 transactions in {} blocks beside a Byzantine consenter", height - 1);
}

/// Consenters leave and join by config update: of five consenters, the fifth is removed (a config update that also
/// rewrites `BlockValidation` for four, made by `ferrofabric channel bft-consenters` and sent by the real
/// `peer channel update`; one that does not rewrite it is refused, as Fabric 3 refuses it) and stops while the
/// four order on. Then it comes back as a new node, as Fabric's documentation adds an orderer: an empty ledger,
/// joined with the latest config block (which does not name it), it pulls the blocks before that block from the
/// others (on-boarding) and follows the channel (relation `follower`); the config update that adds it makes it a
/// consenter, and it orders with the others. Every transaction that got SUCCESS is in every chain exactly once, and
/// every block carries a quorum of the consenter set of its time.
#[test]
fn bft_consenters_removed_and_added_by_config_update() {
    let (_lock, _tmp, net, mut nodes) = cluster(5, &[]);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let genesis = Block::decode(std::fs::read(net.work.join("genesis.block")).unwrap().as_slice()).unwrap();
    let fifth = ChannelConfig::from_config_block(&genesis).unwrap().orderer().unwrap().consenters()[4].clone();
    net.broadcast(&nodes[0].grpc, 1, 100);

    let remove = |m: &mut Vec<Consenter>| m.retain(|c| c.id != 5);
    let refused = runtime.block_on(consenter_update_keeping_block_validation(&net, &nodes[0].grpc, remove));
    assert_eq!(refused.status, Status::ServiceUnavailable as i32, "{}", refused.info);
    assert!(refused.info.contains("block validation policy should be a signature policy"), "{}", refused.info);

    let removal = update_consenters_with_the_cli(&net, &nodes[0].grpc, &["--remove".into(), "5".into()]);
    wait_for_log(&nodes[4], "this orderer was removed from the consenters");
    net.broadcast(&nodes[1].grpc, 2, 100);
    assert_eq!(net.orderer_height(&nodes[4].grpc), removal + 1, "the removed consenter went on appending");

    // Back as a new node: nothing of its old ledger or WAL is left; it joins with the latest config block.
    nodes[4].kill();
    let home = net.work.join("ours5");
    for dir in ["ledger", "wal", "snap"] {
        let _ = std::fs::remove_dir_all(home.join(dir));
    }
    let join_block = net.work.join("removal.block");
    let block = net.fetch_from_orderer(&nodes[0].grpc, &removal.to_string()).unwrap();
    std::fs::write(&join_block, block.encode_to_vec()).unwrap();
    nodes[4].start();
    net.join_with(5, &nodes[4].admin, &join_block);
    wait_for_log(&nodes[4], "this orderer follows the channel");
    let listed = net.channel_info(5, &nodes[4].admin);
    assert_eq!(listed["consensusRelation"], "follower", "osnadmin channel list --channelID bftchannel: {listed}");
    let message = user_envelope(&net, ferrofabric_protos::common::HeaderType::Message, "to-a-follower", b"hello");
    let refused = runtime.block_on(broadcast_one(&net, &nodes[4].grpc, message));
    assert_eq!(refused.status, Status::ServiceUnavailable as i32, "Broadcast to a follower: {}", refused.info);
    assert!(refused.info.contains("orderer is a follower of channel bftchannel"), "{}", refused.info);

    let dir = net.orderer_dir(5);
    let path = |p: std::path::PathBuf| p.display().to_string();
    let add = [
        ("--add-id", "5".to_owned()),
        ("--add-host", fifth.host.clone()),
        ("--add-port", fifth.port.to_string()),
        ("--add-msp-id", "OrdererMSP".to_owned()),
        ("--add-identity", path(dir.join("msp/signcerts/orderer5.example.com-cert.pem"))),
        ("--add-client-tls-cert", path(dir.join("tls/server.crt"))),
        ("--add-server-tls-cert", path(dir.join("tls/server.crt"))),
    ];
    let add: Vec<String> = add.into_iter().flat_map(|(k, v)| [k.to_owned(), v]).collect();
    let addition = update_consenters_with_the_cli(&net, &nodes[0].grpc, &add);
    wait_for_log(&nodes[4], "this orderer is now a consenter of the channel");
    net.broadcast_as(&nodes[4].grpc, 1, "Admin", 100);

    let refs: Vec<&Node> = nodes.iter().collect();
    let mut seen = runtime.block_on(same_chain_everywhere(&net, &refs, &net.work.join("genesis.block")));
    seen.remove("");
    assert_eq!(seen.len(), 300, "every transaction that got SUCCESS is ordered");
    assert!(seen.values().all(|&c| c == 1), "a transaction ordered twice");
    let log = std::fs::read_to_string(&nodes[4].log).unwrap();
    let rejoined = &log[log.rfind("now a consenter").unwrap()..];
    assert!(rejoined.contains("BFT block decided"), "the added consenter decided no block:\n{rejoined}");
    let height = net.orderer_height(&nodes[0].grpc);
    println!("consenter 5 removed at block {removal}, added back at block {addition}; {} blocks", height - 1);
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

/// Waits (up to a minute) until every one of `nodes` serves `height` blocks; fails naming the ones that do not,
/// with the orderers' logs.
fn every_orderer_at(net: &BftNetwork, nodes: &[Node], height: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let behind: Vec<(&str, Result<u64, String>)> = nodes
            .iter()
            .map(|n| (n.grpc.as_str(), net.try_orderer_height(&n.grpc)))
            .filter(|(_, h)| !matches!(h, Ok(h) if *h >= height))
            .collect();
        if behind.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "orderers not at height {height}: {behind:?}\n{}",
            net.orderer_logs()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// A censoring block source: our committer follows three of the four consenters with the BFT deliverer and
/// commits every block, each checked against the 3-of-4 consenter signatures of `BlockValidation`. Then its block
/// source is frozen (SIGSTOP) while the others go on ordering: the other orderers' `HEADER_WITH_SIG` attestations
/// expose the withheld blocks, and within the censorship timeout the committer takes them from another orderer —
/// not from a broken connection, which keepalive would only notice after a minute here. Then our gateway's
/// `Submit` on the same channel: the transaction goes to all four orderers and is accepted with a quorum of three;
/// with two orderers frozen it is refused as Fabric 3's gateway refuses it.
#[test]
fn bft_committer_leaves_a_censoring_orderer_and_gateway_submits_to_a_quorum() {
    let (_lock, tmp, net, nodes) = cluster(4, &[]);
    let first = &nodes[0].grpc;

    // Blocks from the cluster before the committer starts: the channel is up on a quorum.
    net.broadcast(first, 1, 60);
    let first_height = net.orderer_height(first);
    assert!(first_height >= 2, "no block ordered");

    let followed: Vec<String> = nodes[1..].iter().map(|n| n.grpc.clone()).collect();
    let (committer, listen, log) = net.start_committer(tmp.path(), &followed);
    for n in 1..first_height {
        let ours = net.committed(&listen, n, &log, Duration::from_secs(60));
        let theirs = net.fetch_from_orderer(first, &n.to_string()).unwrap();
        assert_eq!((&ours.header, &ours.data), (&theirs.header, &theirs.data), "block {n}");
    }

    // Freeze the block source: the other orderers' attestations show it withholding the next blocks. The three
    // left must all be up and level, or one frozen node would leave no quorum.
    every_orderer_at(&net, &nodes, first_height);
    let source = block_source(&log, &followed).expect("the committer logs its block source");
    let frozen = nodes.iter().find(|n| n.grpc == source).expect("the source is one of orderers 2-4");
    let pid = frozen.process.as_ref().unwrap().0.id().to_string();
    assert!(Command::new("kill").args(["-STOP", &pid]).status().unwrap().success());
    let live = nodes.iter().find(|n| n.grpc != source && n.grpc != *first).unwrap().grpc.clone();
    net.broadcast(&live, 2, 60);
    let height = net.orderer_height(first);
    assert!(height > first_height, "the remaining quorum ordered nothing");
    let frozen_at = std::time::Instant::now();
    let last = net.committed(&listen, height - 1, &log, Duration::from_secs(30));
    let switched_after = frozen_at.elapsed();
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    let theirs = net.fetch_from_orderer(first, &(height - 1).to_string()).unwrap();
    assert_eq!((&last.header, &last.data), (&theirs.header, &theirs.data), "block {} after the switch", height - 1);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("block censorship suspected"), "no censorship detected:\n{text}");
    let new_source = block_source(&log, &followed).unwrap();
    assert_ne!(new_source, source, "still following the frozen orderer");
    println!(
        "blocks 1..{height}: committed; block source {source} frozen, blocks taken from {new_source} after \
         {switched_after:?}"
    );
    drop(committer);
    gateway_submit_needs_a_quorum_of_orderers(&net, &nodes);
}

/// What the gateway reads of a peer for `Submit`: only the channel configuration, here the genesis block's.
struct GenesisLedger {
    config: std::sync::Arc<ChannelConfig>,
    height: tokio::sync::watch::Sender<u64>,
}

impl ferrofabric_gateway::Ledger for GenesisLedger {
    fn channel_id(&self) -> &str {
        self.config.channel_id()
    }
    fn config(&self) -> std::sync::Arc<ChannelConfig> {
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
/// SUCCESS) and ordered; with two of them frozen, refused with UNAVAILABLE and an error detail per failed orderer,
/// in Fabric 3's words.
fn gateway_submit_needs_a_quorum_of_orderers(net: &BftNetwork, nodes: &[Node]) {
    use ferrofabric_gateway::{Gateway, GatewayConfig, GatewayOptions};
    use ferrofabric_protos::gateway::gateway_server::Gateway as _;
    use ferrofabric_protos::gateway::SubmitRequest;

    let genesis = Block::decode(std::fs::read(net.genesis()).unwrap().as_slice()).unwrap();
    let config = std::sync::Arc::new(ChannelConfig::from_config_block(&genesis).unwrap());
    let ledger = std::sync::Arc::new(GenesisLedger { config, height: tokio::sync::watch::channel(1).0 });
    let tls = ClientTls { ca_pem: std::fs::read(net.tls_ca()).unwrap(), ..ClientTls::default() };
    let options = GatewayOptions { broadcast_timeout: Duration::from_secs(5), ..GatewayOptions::default() };
    let config = GatewayConfig { local_mspid: "Org1MSP".into(), tls: Some(tls), options, ..GatewayConfig::default() };
    let (_stop, shutdown) = ferrofabric_comm::Shutdown::new();
    let gateway = Gateway::new(config, ledger, shutdown);
    let testnet = ferrofabric_testkit::Network::generate(7).unwrap();
    let user = ferrofabric_msp::SigningIdentity::from_msp_dir("Org1MSP", &net.user_msp(1, "User1")).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let submit = |gateway: &Gateway<GenesisLedger>| {
        let tx = ferrofabric_testkit::TxBuilder::new(&testnet)
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
        (tx.tx_id, runtime.block_on(gateway.submit(tonic::Request::new(request))))
    };

    let first = &nodes[0].grpc;
    let before = net.orderer_height(first);
    let (txid, accepted) = submit(&gateway);
    assert!(accepted.is_ok(), "a BFT submit with every orderer up: {accepted:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while net.orderer_height(first) <= before {
        assert!(std::time::Instant::now() < deadline, "the submitted transaction {txid} was never ordered");
        std::thread::sleep(Duration::from_millis(200));
    }

    let frozen: Vec<String> = nodes[2..].iter().map(|n| n.process.as_ref().unwrap().0.id().to_string()).collect();
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
