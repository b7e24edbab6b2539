//! Raft leader failover: three etcdraft orderers on 127.0.0.1, each a separate process (this test binary re-executed with the
//! ignored `raft_node_process` entry, which starts a node from a configuration file with the solo and etcdraft
//! backends, as `ferrofabric orderer --config FILE` does).
//!
//! The channel's genesis block is the testkit network's with three consenters whose TLS certificates are
//! made here. Three clients stream transactions, one Broadcast stream per round of transactions, each to
//! its own node; once enough transactions got SUCCESS the leader is SIGKILLed mid-stream. Then:
//! * another node becomes leader and transactions keep getting SUCCESS;
//! * the killed node restarts from its WAL and ledger, catches up (snapshots are taken every few blocks,
//!   so it needs a Raft snapshot and pulls blocks over Deliver) and orders new transactions;
//! * every transaction that got SUCCESS is in the chain exactly once, no transaction is there twice;
//! * a CONFIG_UPDATE (an anchor peer added by Org1's admin) sent to the restarted node goes through Raft
//!   and becomes one config block holding only the CONFIG transaction, named by LAST_CONFIG from then on;
//! * all three nodes hold byte-identical chains, which pass the validator's block checks (hash chain, data
//!   hash, orderer signature under /Channel/Orderer/BlockValidation) and carry Raft metadata.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_comm::{broadcast, connect, deliver, seek_envelope, seek_range, ClientTls, DeliverItem};
use ferrofabric_configtx::{anchor_peer_update, config_update_envelope};
use ferrofabric_consensus_etcdraft::block_raft_metadata;

use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::common::{Block, ChannelHeader, ConfigEnvelope, Envelope, Payload, Status};
use ferrofabric_protos::etcdraft::{ConfigMetadata, Consenter, Options};
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use ferrofabric_protos::orderer::{BatchSize, BatchTimeout, ConsensusType};
use ferrofabric_protoutil::{last_config_index, sole_config_envelope};
use ferrofabric_testkit::{Network, Workload};
use ferrofabric_validator::{Validator, ValidatorOptions};
use futures::StreamExt;
use p256::ecdsa::signature::Signer;
use p256::elliptic_curve::sec1::ToEncodedPoint;
use p256::pkcs8::{EncodePrivateKey, LineEnding};
use prost::Message;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyUsagePurpose, PublicKeyData,
    SanType, SerialNumber, SignatureAlgorithm, SigningKey,
};

/// Set in the environment of a node process: its configuration file.
const NODE_ENV: &str = "FERROFABRIC_RAFT_TEST_NODE";
pub(crate) const CHANNEL: &str = "mychannel";
const NODES: usize = 3;
const CLIENTS: usize = 3;
const ROUNDS: usize = 10;
const PER_ROUND: usize = 40;
/// SUCCESS responses (all clients) after which the leader is killed.
const KILL_AFTER: usize = 350;

/// The orderer process: `ferrofabric orderer --config $FERROFABRIC_RAFT_TEST_NODE`, until it is killed.
#[test]
#[ignore = "entry point of the orderer processes started by the multi-process Raft tests"]
fn raft_node_process() {
    let config =
        std::env::var(NODE_ENV).expect("FERROFABRIC_RAFT_TEST_NODE is not set: this is not a test to run alone");
    let filter = tracing_subscriber::EnvFilter::try_from_env("FERROFABRIC_LOG")
        .unwrap_or_else(|_| "info,raft=warn,h2=warn,hyper=warn,tower=warn".into());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(false).with_writer(std::io::stderr).init();
    let config = ferrofabric_orderer::OrdererConfig::load(&PathBuf::from(config)).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().thread_name("orderer").build().unwrap();
    runtime.block_on(async move {
        let mut plugins = ferrofabric_orderer::Plugins::default();
        ferrofabric_consensus_etcdraft::register(&mut plugins, &config).unwrap();
        let node = ferrofabric_orderer::start(config, plugins).await.unwrap();
        println!("orderer listening: grpc {}", node.grpc_addr);
        node.wait().await;
    });
}

/// A P-256 key rcgen can sign with (rcgen is built without a crypto backend here).
struct TestKey {
    secret: p256::SecretKey,
    signing: p256::ecdsa::SigningKey,
    point: Vec<u8>,
}

impl TestKey {
    fn generate() -> TestKey {
        let secret = p256::SecretKey::random(&mut rand::rngs::OsRng);
        let point = secret.public_key().to_encoded_point(false).as_bytes().to_vec();
        TestKey { signing: p256::ecdsa::SigningKey::from(&secret), secret, point }
    }
    fn pem(&self) -> String {
        self.secret.to_pkcs8_pem(LineEnding::LF).unwrap().to_string()
    }
}

impl PublicKeyData for TestKey {
    fn der_bytes(&self) -> &[u8] {
        &self.point
    }
    fn algorithm(&self) -> &'static SignatureAlgorithm {
        &rcgen::PKCS_ECDSA_P256_SHA256
    }
}

impl SigningKey for TestKey {
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        let sig: p256::ecdsa::Signature = self.signing.sign(msg);
        Ok(sig.to_der().as_bytes().to_vec())
    }
}

fn serial() -> SerialNumber {
    let mut b = [0u8; 16];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut b);
    b[0] &= 0x7f;
    SerialNumber::from(b.to_vec())
}

/// Held by each test that runs a cluster of orderer processes: two at once would compete for the two cores
/// and race for the free ports each picks.
pub(crate) async fn cluster_lock() -> tokio::sync::MutexGuard<'static, ()> {
    static CLUSTER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    CLUSTER.lock().await
}

/// A TLS CA and `count` certificates for 127.0.0.1 usable as server and client certificate, as
/// `(certificate PEM, key PEM)`.
pub(crate) fn tls_material(count: usize) -> (String, Vec<(String, String)>) {
    let ca_key = TestKey::generate();
    let mut ca = CertificateParams::default();
    ca.serial_number = Some(serial());
    ca.distinguished_name.push(DnType::CommonName, "tlsca.raft-test");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
    let issuer = Issuer::from_params(&ca, &ca_key);
    let nodes = (0..count)
        .map(|i| {
            let key = TestKey::generate();
            let mut p = CertificateParams::default();
            p.serial_number = Some(serial());
            p.distinguished_name.push(DnType::CommonName, format!("orderer{i}.raft-test"));
            p.subject_alt_names = vec![SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST))];
            p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
            (p.signed_by(&key, &issuer).unwrap().pem(), key.pem())
        })
        .collect();
    (ca_pem, nodes)
}

/// The testkit genesis block with `consenters`, fast Raft timing, small snapshots and small blocks.
pub(crate) fn raft_genesis(base: &Bytes, consenters: Vec<Consenter>) -> Bytes {
    let mut block = Block::decode(base.clone()).unwrap();
    let data = block.data.as_mut().unwrap();
    let mut env = Envelope::decode(data.data[0].clone()).unwrap();
    let mut payload = Payload::decode(env.payload.clone()).unwrap();
    let mut ce = ConfigEnvelope::decode(payload.data.clone()).unwrap();
    let orderer = ce.config.as_mut().unwrap().channel_group.as_mut().unwrap().groups.get_mut("Orderer").unwrap();
    let value = orderer.values.get_mut("ConsensusType").unwrap();
    let mut ct = ConsensusType::decode(value.value.clone()).unwrap();
    assert_eq!(ct.r#type, "etcdraft");
    let mut md = ConfigMetadata::decode(ct.metadata.clone()).unwrap();
    md.consenters = consenters;
    md.options = Some(Options {
        tick_interval: "100ms".into(),
        election_tick: 10,
        heartbeat_tick: 1,
        max_inflight_blocks: 5,
        snapshot_interval_size: 150 * 1024,
    });
    ct.metadata = Bytes::from(md.encode_to_vec());
    value.value = Bytes::from(ct.encode_to_vec());
    orderer.values.get_mut("BatchSize").unwrap().value = Bytes::from(
        BatchSize { max_message_count: 20, absolute_max_bytes: 10 << 20, preferred_max_bytes: 2 << 20 }.encode_to_vec(),
    );
    orderer.values.get_mut("BatchTimeout").unwrap().value =
        Bytes::from(BatchTimeout { timeout: "200ms".into() }.encode_to_vec());
    payload.data = Bytes::from(ce.encode_to_vec());
    env.payload = Bytes::from(payload.encode_to_vec());
    data.data[0] = Bytes::from(env.encode_to_vec());
    let hash = ferrofabric_protoutil::block_data_hash(&data.data);
    block.header.as_mut().unwrap().data_hash = Bytes::copy_from_slice(&hash);
    Bytes::from(block.encode_to_vec())
}

/// libtest's name of [`raft_node_process`]: its module path less the test binary's crate name, so that the exact
/// filter stays right wherever this module is mounted.
fn raft_node_process_test_name() -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::raft_node_process"),
        None => "raft_node_process".to_string(),
    }
}

pub(crate) struct Node {
    pub(crate) config: PathBuf,
    pub(crate) log: PathBuf,
    pub(crate) grpc: SocketAddr,
    pub(crate) admin: SocketAddr,
    pub(crate) child: Option<Child>,
}

impl Node {
    /// A node whose home is `root/node<i>` with TLS certificate and key `cert`, `key` (PEM), listening on
    /// `port` (gRPC and cluster) and `admin`; `root/ca.crt` is the TLS CA, `msp` the signing identity.
    pub(crate) fn configure(
        root: &std::path::Path,
        i: usize,
        cert: &str,
        key: &str,
        port: u16,
        admin: u16,
        msp: &std::path::Path,
    ) -> Node {
        let home = root.join(format!("node{i}"));
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("tls.crt"), cert).unwrap();
        std::fs::write(home.join("tls.key"), key).unwrap();
        let yaml = format!(
            "General:\n  ListenAddress: 127.0.0.1\n  ListenPort: {port}\n  TLS:\n    Enabled: true\n    \
             Certificate: {home}/tls.crt\n    PrivateKey: {home}/tls.key\n    RootCAs: [{root}/ca.crt]\n    \
             ClientAuthRequired: false\n    ClientRootCAs: [{root}/ca.crt]\n  Cluster:\n    ClientCertificate: \
             {home}/tls.crt\n    ClientPrivateKey: {home}/tls.key\n  LocalMSPDir: {msp}\n  LocalMSPID: OrdererMSP\n\
             FileLedger:\n  Location: {home}/ledger\nAdmin:\n  ListenAddress: 127.0.0.1:{admin}\n\
             ChannelParticipation:\n  Enabled: true\nOperations:\n  ListenAddress: \"\"\nConsensus:\n  WALDir: \
             {home}/etcdraft/wal\n  SnapDir: {home}/etcdraft/snapshot\nFerrofabric:\n  SyncEveryBlock: false\n",
            home = home.display(),
            root = root.display(),
            msp = msp.display(),
        );
        let config = home.join("orderer.yaml");
        std::fs::write(&config, yaml).unwrap();
        Node {
            config,
            log: home.join("orderer.log"),
            grpc: SocketAddr::from(([127, 0, 0, 1], port)),
            admin: SocketAddr::from(([127, 0, 0, 1], admin)),
            child: None,
        }
    }

    /// Starts the node's process.
    pub(crate) fn start(&mut self) {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let exe = std::env::current_exe().unwrap();
        let child = Command::new(exe)
            .args(["--ignored", "--exact", &raft_node_process_test_name(), "--nocapture"])
            .env(NODE_ENV, &self.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// SIGKILL.
    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Kills every node when the test ends, passed or not.
pub(crate) struct Nodes(pub(crate) Vec<Node>);

impl Drop for Nodes {
    fn drop(&mut self) {
        for n in &mut self.0 {
            n.kill();
        }
        if std::thread::panicking() {
            for (i, n) in self.0.iter().enumerate() {
                let text = n.log_text();
                let lines: Vec<&str> = text.lines().collect();
                eprintln!("---- node {i} log (last 80 lines) ----");
                for l in &lines[lines.len().saturating_sub(80)..] {
                    eprintln!("{l}");
                }
            }
        }
    }
}

/// One HTTP request (redirects not followed, any status answered); returns the status and body.
pub(crate) async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let mut request = ureq::http::Request::builder().method(method).uri(format!("http://{addr}{path}"));
    if let Some(ct) = content_type {
        request = request.header("Content-Type", ct);
    }
    let request = request.body(body.to_vec()).unwrap();
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).max_redirects(0).build().into();
        let mut response = agent.run(request).unwrap_or_else(|e| panic!("HTTP request failed: {e}"));
        (response.status().as_u16(), response.body_mut().read_to_vec().unwrap())
    })
    .await
    .unwrap()
}

/// Joins the channel of the config block `block` with the participation API, as `osnadmin channel join`.
pub(crate) async fn join(admin: SocketAddr, block: &[u8]) -> (u16, Vec<u8>) {
    let boundary = "raft-test-boundary-1f3a";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"config-block\"; filename=\"genesis.block\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(block);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    let ct = format!("multipart/form-data; boundary={boundary}");
    http(admin, "POST", "/participation/v1/channels", Some(&ct), &body).await
}

/// Blocks `0..height` of the channel from the node at `addr`, as stored.
pub(crate) async fn fetch_chain(addr: SocketAddr, tls: &ClientTls, net: &Network, height: u64) -> Vec<Bytes> {
    let reader = net.client(0);
    let seek = seek_range(0, Some(height - 1), SeekBehavior::FailIfNotReady);
    let env = seek_envelope(CHANNEL, reader.serialized(), |m| reader.sign(m), &seek);
    let ch = connect(&addr.to_string(), Some(tls)).await.unwrap();
    let requests = futures::stream::iter(vec![env]).chain(futures::stream::pending());
    let mut stream = deliver(ch, requests).await.unwrap();
    let mut blocks = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(30), stream.next()).await.expect("Deliver timed out") {
            Some(Ok(DeliverItem::Block(b))) => blocks.push(b),
            Some(Ok(DeliverItem::Status(s))) => {
                assert_eq!(s, Status::Success as i32, "Deliver status");
                return blocks;
            }
            other => panic!("Deliver stream ended: {other:?}"),
        }
    }
}

/// Transaction IDs of a marshaled block, in order.
pub(crate) fn block_tx_ids(raw: &Bytes) -> Vec<String> {
    let block = Block::decode(raw.clone()).unwrap();
    block
        .data
        .unwrap()
        .data
        .into_iter()
        .map(|e| {
            let env = Envelope::decode(e).unwrap();
            let p = Payload::decode(env.payload).unwrap();
            ChannelHeader::decode(p.header.unwrap().channel_header).unwrap().tx_id
        })
        .collect()
}

/// `(term, leader)` of the newest "etcdraft: term T leader L" line in any of the logs.
pub(crate) fn leader_from_logs(logs: &[String]) -> Option<(u64, u64)> {
    let mut best: Option<(u64, u64)> = None;
    for log in logs {
        for line in log.lines() {
            let Some(rest) = line.split("etcdraft: term ").nth(1) else { continue };
            let mut words = rest.split_whitespace();
            let term: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
            let leader: u64 = match (words.next(), words.next()) {
                (Some("leader"), Some(l)) => l.parse().unwrap_or(0),
                _ => 0,
            };
            if leader != 0 && best.is_none_or(|(t, _)| term > t) {
                best = Some((term, leader));
            }
        }
    }
    best
}

pub(crate) async fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) async fn height(admin: SocketAddr) -> Option<u64> {
    let (status, body) = tokio::time::timeout(
        Duration::from_secs(5),
        http(admin, "GET", &format!("/participation/v1/channels/{CHANNEL}"), None, b""),
    )
    .await
    .ok()?;
    let json: serde_json::Value = serde_json::from_slice(&body).ok()?;
    (status == 200).then(|| json["height"].as_u64()).flatten()
}

/// Broadcasts `txs` on one stream to `addr`; returns the IDs that got SUCCESS (a broken stream leaves the
/// rest without an answer).
pub(crate) async fn broadcast_round(
    addr: SocketAddr,
    tls: &ClientTls,
    txs: &[(String, Bytes)],
) -> (Vec<String>, usize) {
    let Ok(ch) = connect(&addr.to_string(), Some(tls)).await else { return (Vec::new(), 0) };
    let envelopes: Vec<Bytes> = txs.iter().map(|(_, e)| e.clone()).collect();
    let Ok(mut responses) = broadcast(ch, futures::stream::iter(envelopes)).await else {
        return (Vec::new(), 0);
    };
    let mut ok = Vec::new();
    let mut rejected = 0;
    for (id, _) in txs {
        match tokio::time::timeout(Duration::from_secs(30), responses.next()).await {
            Ok(Some(Ok(r))) if r.status == Status::Success as i32 => ok.push(id.clone()),
            Ok(Some(Ok(_))) => rejected += 1,
            _ => break,
        }
    }
    (ok, rejected)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_raft_orderers_survive_a_leader_sigkill() {
    let _cluster = cluster_lock().await;
    let started = Instant::now();
    let net = Arc::new(tokio::task::spawn_blocking(|| Network::generate(33).unwrap()).await.unwrap());
    // Signing the transactions takes a while in a debug build: it runs while the nodes start.
    let workload = {
        let net = net.clone();
        tokio::task::spawn_blocking(move || {
            let pick = |b: ferrofabric_testkit::Built| (b.tx_id, b.envelope);
            let txs: Vec<Vec<(String, Bytes)>> = (0..CLIENTS)
                .map(|c| {
                    let w = Workload::new(&net, 500 + c as u64).creator_org(c % 2);
                    w.transfer_txs((ROUNDS * PER_ROUND) as u64, 16, |_| None).unwrap().into_iter().map(pick).collect()
                })
                .collect();
            let late = Workload::new(&net, 900).transfer_txs(PER_ROUND as u64, 16, |_| None).unwrap();
            (txs, late.into_iter().map(pick).collect::<Vec<_>>())
        })
    };

    // Crypto material, genesis block and one configuration file per node.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    net.write_msp_dirs(&root.join("crypto")).unwrap();
    let msp = root.join("crypto/ordererOrganizations/example.com/orderers/orderer.example.com/msp");
    let (ca_pem, certs) = tls_material(NODES);
    std::fs::write(root.join("ca.crt"), &ca_pem).unwrap();
    let ports: Vec<(u16, u16)> = (0..NODES)
        .map(|_| {
            (ferrofabric_comm::unused_port("127.0.0.1").unwrap(), ferrofabric_comm::unused_port("127.0.0.1").unwrap())
        })
        .collect();
    let consenters = certs
        .iter()
        .zip(&ports)
        .map(|((cert, _), (port, _))| Consenter {
            host: "127.0.0.1".into(),
            port: u32::from(*port),
            client_tls_cert: Bytes::from(cert.clone()),
            server_tls_cert: Bytes::from(cert.clone()),
        })
        .collect();
    let genesis = raft_genesis(&net.genesis_block(), consenters);
    let mut nodes = Nodes(Vec::new());
    for (i, ((cert, key), (port, admin))) in certs.iter().zip(&ports).enumerate() {
        nodes.0.push(Node::configure(root, i, cert, key, *port, *admin, &msp));
    }
    for n in &mut nodes.0 {
        n.start();
    }
    for n in &nodes.0 {
        let admin = n.admin;
        wait_for("the admin listener", Duration::from_secs(30), || {
            std::net::TcpStream::connect_timeout(&admin, Duration::from_millis(200)).ok()
        })
        .await;
        let (status, body) = join(admin, &genesis).await;
        assert_eq!(status, 201, "join: {}", String::from_utf8_lossy(&body));
    }
    let logs = |nodes: &Nodes| nodes.0.iter().map(Node::log_text).collect::<Vec<_>>();
    let (term0, leader0) =
        wait_for("a first leader", Duration::from_secs(20), || leader_from_logs(&logs(&nodes))).await;
    eprintln!("leader {leader0} elected in term {term0} after {:?}", started.elapsed());
    let (txs, late_txs) = workload.await.unwrap();
    eprintln!("transactions signed after {:?}", started.elapsed());

    // Three clients stream rounds of transactions, each to its own node (to the next one if its node is
    // dead); the leader is killed once KILL_AFTER transactions got SUCCESS.
    let tls = ClientTls { ca_pem: ca_pem.clone().into_bytes(), server_name: "127.0.0.1".into(), identity: None };
    let successes = Arc::new(AtomicUsize::new(0));
    let dead = Arc::new(AtomicUsize::new(usize::MAX));
    let addrs: Vec<SocketAddr> = nodes.0.iter().map(|n| n.grpc).collect();
    let mut clients = Vec::new();
    for (c, client_txs) in txs.iter().enumerate() {
        let (tls, successes, dead, addrs, client_txs) =
            (tls.clone(), successes.clone(), dead.clone(), addrs.clone(), client_txs.clone());
        clients.push(tokio::spawn(async move {
            let mut ok = Vec::new();
            let mut rejected = 0;
            for round in client_txs.chunks(PER_ROUND) {
                let node = if dead.load(Ordering::SeqCst) == c { (c + 1) % NODES } else { c };
                let (got, r) = broadcast_round(addrs[node], &tls, round).await;
                successes.fetch_add(got.len(), Ordering::SeqCst);
                ok.extend(got);
                rejected += r;
            }
            (ok, rejected)
        }));
    }
    wait_for("enough SUCCESS responses before the kill", Duration::from_secs(60), || {
        (successes.load(Ordering::SeqCst) >= KILL_AFTER).then_some(())
    })
    .await;
    let (term_at_kill, leader) = leader_from_logs(&logs(&nodes)).unwrap();
    let victim = usize::try_from(leader).unwrap() - 1;
    dead.store(victim, Ordering::SeqCst);
    nodes.0[victim].kill();
    let killed_at = successes.load(Ordering::SeqCst);
    eprintln!(
        "SIGKILLed leader {leader} (term {term_at_kill}) after {killed_at} successes, at {:?}",
        started.elapsed()
    );

    let mut succeeded: Vec<String> = Vec::new();
    let mut rejected = 0;
    for c in clients {
        let (ok, r) = tokio::time::timeout(Duration::from_secs(90), c).await.expect("clients timed out").unwrap();
        succeeded.extend(ok);
        rejected += r;
    }
    let total = CLIENTS * ROUNDS * PER_ROUND;
    eprintln!(
        "{} of {total} transactions got SUCCESS ({rejected} rejected), at {:?}",
        succeeded.len(),
        started.elapsed()
    );
    assert!(succeeded.len() > killed_at, "no transaction got SUCCESS after the leader was killed");

    // A new leader took over among the survivors.
    let survivors: Vec<usize> = (0..NODES).filter(|i| *i != victim).collect();
    let (new_term, new_leader) = wait_for("a new leader", Duration::from_secs(20), || {
        let texts: Vec<String> = survivors.iter().map(|i| nodes.0[*i].log_text()).collect();
        leader_from_logs(&texts).filter(|(t, l)| *t > term_at_kill && *l != leader)
    })
    .await;
    eprintln!("new leader {new_leader} in term {new_term}");

    // The killed node restarts from its WAL and ledger and catches up.
    nodes.0[victim].start();
    let admin_victim = nodes.0[victim].admin;
    wait_for("the restarted admin listener", Duration::from_secs(30), || {
        std::net::TcpStream::connect_timeout(&admin_victim, Duration::from_millis(200)).ok()
    })
    .await;
    let survivor_height = height(nodes.0[survivors[0]].admin).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        if height(admin_victim).await.is_some_and(|h| h >= survivor_height) {
            break;
        }
        assert!(Instant::now() < deadline, "the restarted node did not catch up to height {survivor_height}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("restarted node caught up to {survivor_height} at {:?}", started.elapsed());

    // It orders again: a last round through it, all SUCCESS.
    let (late_ok, late_rejected) = broadcast_round(nodes.0[victim].grpc, &tls, &late_txs).await;
    assert_eq!((late_ok.len(), late_rejected), (late_txs.len(), 0), "the restarted node did not order a full round");
    succeeded.extend(late_ok);

    // A CONFIG_UPDATE (Org1's admin adds an anchor peer), sent to the restarted node, goes through Raft like
    // any other message and is ordered alone, as a config block, on every node.
    let update = {
        let current = ChannelConfig::from_config_block(&Block::decode(genesis.clone()).unwrap()).unwrap();
        let update = anchor_peer_update(CHANNEL, current.config(), "Org1MSP", "peer0.org1.example.com", 7051).unwrap();
        Bytes::from(config_update_envelope(CHANNEL, &update, &[net.admin(0)], net.admin(0)).encode_to_vec())
    };
    let (config_ok, _) = broadcast_round(nodes.0[victim].grpc, &tls, &[("config".into(), update)]).await;
    assert_eq!(config_ok.len(), 1, "the CONFIG_UPDATE was not answered SUCCESS");

    // All nodes settle on the same height.
    let final_height = {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = Vec::new();
        loop {
            let mut hs = Vec::new();
            for n in &nodes.0 {
                hs.push(height(n.admin).await.unwrap_or(0));
            }
            if hs.iter().all(|h| *h == hs[0] && *h > 1) && hs == last {
                break hs[0];
            }
            assert!(Instant::now() < deadline, "heights did not converge: {hs:?}");
            last = hs;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };

    // Byte-identical chains.
    let mut chains = Vec::new();
    for n in &nodes.0 {
        let blocks = fetch_chain(n.grpc, &tls, &net, final_height).await;
        assert_eq!(blocks.len() as u64, final_height);
        chains.push(blocks);
    }
    assert!(chains.iter().all(|c| c == &chains[0]), "the nodes' chains differ");
    let chain = chains.swap_remove(0);
    assert_eq!(chain[0], genesis);

    // Every block: Raft metadata with the three consenters and increasing Raft indexes; the validator's
    // block checks pass.
    let mut last_index = 0;
    for b in &chain[1..] {
        let md = block_raft_metadata(b).expect("a block without etcdraft metadata");
        assert_eq!((md.consenter_ids.as_slice(), md.next_consenter_id), (&[1, 2, 3][..], 4));
        assert!(md.raft_index > last_index, "Raft indexes must increase");
        last_index = md.raft_index;
    }
    let for_validator = chain.clone();
    tokio::task::spawn_blocking(move || {
        let mut validator = Validator::new(for_validator[0].clone(), ValidatorOptions::default()).unwrap();
        for b in &for_validator[1..] {
            validator.commit_block(b.clone()).unwrap();
        }
    })
    .await
    .unwrap();

    // One config block (after the genesis block), holding only the CONFIG transaction; later blocks name it
    // as their last config.
    let config_blocks: Vec<usize> = (1..chain.len())
        .filter(|i| sole_config_envelope(&Block::decode(chain[*i].clone()).unwrap()).is_some())
        .collect();
    assert_eq!(config_blocks.len(), 1, "expected exactly one config block");
    let at = config_blocks[0];
    let config_block = Block::decode(chain[at].clone()).unwrap();
    assert_eq!(config_block.data.as_ref().unwrap().data.len(), 1);
    let env = sole_config_envelope(&config_block).unwrap();
    let next = ChannelConfig::from_envelope(&env).unwrap();
    assert_eq!(next.sequence(), 1);
    assert_eq!(next.application().unwrap().organizations()["Org1MSP"].anchor_peers().len(), 1);
    for (i, raw) in chain.iter().enumerate().skip(1) {
        let expected = if i >= at { at as u64 } else { 0 };
        assert_eq!(last_config_index(&Block::decode(raw.clone()).unwrap()).unwrap(), expected, "block {i}");
    }

    // Exactly once.
    let mut ordered = HashSet::new();
    for b in chain[1..].iter().filter(|b| **b != chain[at]) {
        for id in block_tx_ids(b) {
            assert!(ordered.insert(id.clone()), "transaction {id} was ordered twice");
        }
    }
    let missing: Vec<&String> = succeeded.iter().filter(|id| !ordered.contains(*id)).collect();
    assert!(
        missing.is_empty(),
        "{} transactions got SUCCESS but were not ordered, e.g. {:?}",
        missing.len(),
        missing.first()
    );
    let restarted_log = nodes.0[victim].log_text();
    assert!(
        restarted_log.contains("catching up to a Raft snapshot"),
        "the restarted node should have caught up through a Raft snapshot and Deliver"
    );
    eprintln!(
        "{} blocks, {} transactions ordered, {} SUCCESS; done in {:?}",
        chain.len(),
        ordered.len(),
        succeeded.len(),
        started.elapsed()
    );
    assert!(started.elapsed() < Duration::from_secs(120), "the scenario took {:?}", started.elapsed());
    drop(nodes);
    if std::env::var_os("FERROFABRIC_RAFT_TEST_KEEP").is_some() {
        eprintln!("keeping {}", dir.keep().display());
    }
}
