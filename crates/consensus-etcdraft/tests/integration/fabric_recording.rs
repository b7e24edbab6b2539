//! Our etcdraft node against the recorded Step traffic of a real three-node Fabric 2.5.16 etcdraft cluster
//! (`../shared/fixtures/fabric-2.5-raft`, whose README describes the recording).
//!
//! The node under test takes orderer0's place (Raft ID 1, orderer0's MSP and TLS material) at the moment the
//! recording's orderer0 restarted with its Raft log wiped and its ledger kept (height 29). The two other
//! consenters are played by the test, as the recording shows Fabric behave:
//! * at their channel-config addresses (127.0.0.1:35150 and :35250) run Step servers that never send response
//!   headers nor `StepResponse`s, and never answer a `SubmitRequest`; they record what our node sends;
//! * orderer1's recorded messages to orderer0 (term-4 leader: votes, a probe, the snapshot, the entries, the
//!   heartbeats) are sent to our node over a Step stream presenting orderer1's client certificate, as Fabric's
//!   dialer sends them: without asking for answers, never reading any.
//!
//! Then our node must append blocks 29..32 with Fabric's numbers, header hashes and data, each signed by itself
//! with its own etcdraft metadata, which the validator's BlockValidation check accepts; answer its follower
//! duties over a link whose server sends no headers (Raft responses to the leader, a Broadcast forwarded as a
//! `SubmitRequest` and answered SUCCESS at once); and, once the recorded leader falls silent, win an election
//! with the test answering as Fabric's orderer1 and lead: messages that decode field by field as etcd's
//! `raftpb.Message` with only the fields Fabric writes, `ClusterMetadata{active_nodes}` on every fourth
//! heartbeat, and a block ordered from a `SubmitRequest` nobody answers.
//!
//! From the same start, a restarted node resumes at its tip's Raft index and takes a consenter that the Fabric
//! leader adds by config update (the config block unsigned, then the `ConfChange` in a Fabric node's bytes).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use ferrofabric_comm::{broadcast, connect, ClientTls, PairCodec, ProstEncoder, RawDecoder, RawEncoder};
use ferrofabric_consensus_etcdraft::{block_raft_metadata, SUBMIT_RESPONSES_HEADER};
use ferrofabric_protos::common::{Block, Status};
use ferrofabric_protos::etcdraft::ClusterMetadata;
use ferrofabric_protos::orderer::{step_request, ConsensusRequest, StepRequest, StepResponse, SubmitRequest};
use ferrofabric_protoutil::block_header_hash;
use ferrofabric_validator::{Validator, ValidatorOptions};
use futures::StreamExt;
use prost::Message as _;
use protobuf::Message as _;
use raft::prelude::{Message as RaftMessage, MessageType};
use tokio::sync::mpsc;
use tonic::codegen::BoxFuture;
use tonic::server::{Grpc, NamedService, StreamingService};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};
use tonic::Streaming;

const FIXTURE: &str = "fabric-2.5-raft";
const CHANNEL: &str = "raftch";
/// t_ms at which the recording's orderer0 started again with an empty Raft log (timeline.txt).
const WIPED_RESTART_MS: f64 = 284_469.0;
/// orderer0's ledger height then.
const KEPT_HEIGHT: u64 = 29;
/// Blocks in the recorded ledgers.
const FINAL_HEIGHT: u64 = 33;

fn fx(rel: &str) -> PathBuf {
    ferrofabric_testkit::fixture(format!("{FIXTURE}/{rel}"))
}

fn orderer_dir(i: usize) -> PathBuf {
    fx(&format!("crypto/ordererOrganizations/example.com/orderers/orderer{i}.example.com"))
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The blocks of a `nodeI-blocks.bin` (`[8-byte LE length][marshaled Block]` repeated).
fn fixture_blocks(node: usize) -> Vec<Bytes> {
    let raw = read(&fx(&format!("node{node}-blocks.bin")));
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= raw.len() {
        let n = u64::from_le_bytes(raw[at..at + 8].try_into().unwrap()) as usize;
        out.push(Bytes::copy_from_slice(&raw[at + 8..at + 8 + n]));
        at += 8 + n;
    }
    out
}

/// The StepRequests recorded on the directed link `from` -> `to`, with their t_ms, in recorded order.
fn recorded_requests(from: usize, to: usize) -> Vec<(f64, Bytes)> {
    let text = String::from_utf8(read(&fx(&format!("rec/from{from}-to{to}.jsonl")))).unwrap();
    text.lines()
        .filter_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (v["ev"] == "msg" && v["dir"] == "req").then(|| {
                let b = base64::engine::general_purpose::STANDARD.decode(v["b64"].as_str().unwrap()).unwrap();
                (v["t_ms"].as_f64().unwrap(), Bytes::from(b))
            })
        })
        .collect()
}

fn raft_of(c: &ConsensusRequest) -> RaftMessage {
    RaftMessage::parse_from_bytes(&c.payload).unwrap()
}

fn consensus(step: &Bytes) -> Option<ConsensusRequest> {
    match StepRequest::decode(step.clone()).ok()?.payload? {
        step_request::Payload::ConsensusRequest(c) => Some(c),
        step_request::Payload::SubmitRequest(_) => None,
    }
}

// ---- etcd's raftpb.Message as Fabric decodes it (go.etcd.io/raft/v3 raftpb/raft.proto field numbers) ----

/// `raftpb.Entry`.
#[derive(Clone, PartialEq, prost::Message)]
struct EtcdEntry {
    #[prost(uint64, tag = "2")]
    term: u64,
    #[prost(uint64, tag = "3")]
    index: u64,
    #[prost(int32, tag = "1")]
    r#type: i32,
    #[prost(bytes = "bytes", tag = "4")]
    data: Bytes,
}

/// `raftpb.Message` (field 13 `vote`, 14 `responses` are etcd's, not raft-rs's).
#[derive(Clone, PartialEq, prost::Message)]
struct EtcdMessage {
    #[prost(int32, tag = "1")]
    r#type: i32,
    #[prost(uint64, tag = "2")]
    to: u64,
    #[prost(uint64, tag = "3")]
    from: u64,
    #[prost(uint64, tag = "4")]
    term: u64,
    #[prost(uint64, tag = "5")]
    log_term: u64,
    #[prost(uint64, tag = "6")]
    index: u64,
    #[prost(message, repeated, tag = "7")]
    entries: Vec<EtcdEntry>,
    #[prost(uint64, tag = "8")]
    commit: u64,
    #[prost(bytes = "bytes", optional, tag = "9")]
    snapshot: Option<Bytes>,
    #[prost(bool, tag = "10")]
    reject: bool,
    #[prost(uint64, tag = "11")]
    reject_hint: u64,
    #[prost(bytes = "bytes", tag = "12")]
    context: Bytes,
    #[prost(uint64, tag = "13")]
    vote: u64,
    #[prost(message, repeated, tag = "14")]
    responses: Vec<EtcdMessage>,
}

/// The (field number, wire type) pairs at the top level of a protobuf message.
fn wire_fields(mut b: &[u8]) -> BTreeSet<(u64, u8)> {
    fn varint(b: &mut &[u8]) -> u64 {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let byte = b[0];
            *b = &b[1..];
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return v;
            }
            shift += 7;
        }
    }
    let mut out = BTreeSet::new();
    while !b.is_empty() {
        let key = varint(&mut b);
        let wt = (key & 7) as u8;
        out.insert((key >> 3, wt));
        match wt {
            0 => {
                varint(&mut b);
            }
            1 => b = &b[8..],
            2 => {
                let n = varint(&mut b) as usize;
                b = &b[n..];
            }
            5 => b = &b[4..],
            _ => panic!("unexpected wire type {wt}"),
        }
    }
    out
}

// ---- a Step server that behaves as the recorded Fabric servers do ----

/// What a silent server received: the raw StepRequests and the request headers of each call.
#[derive(Default)]
struct Received {
    requests: Vec<Bytes>,
    asked_for_answers: usize,
}

#[derive(Clone)]
struct SilentStep {
    received: Arc<Mutex<Received>>,
    notify: mpsc::UnboundedSender<Bytes>,
}

impl NamedService for SilentStep {
    const NAME: &'static str = "orderer.Cluster";
}

struct SilentCall(SilentStep);

impl StreamingService<Bytes> for SilentCall {
    type Response = StepResponse;
    type ResponseStream = futures::stream::Empty<Result<StepResponse, tonic::Status>>;
    type Future = BoxFuture<tonic::Response<Self::ResponseStream>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<Streaming<Bytes>>) -> Self::Future {
        let me = self.0.clone();
        Box::pin(async move {
            if request.metadata().get(SUBMIT_RESPONSES_HEADER).is_some() {
                me.received.lock().unwrap().asked_for_answers += 1;
            }
            let mut inbound = request.into_inner();
            // As Fabric's Step handler: read until the stream ends; nothing is sent back, not even headers.
            while let Ok(Some(m)) = inbound.message().await {
                me.received.lock().unwrap().requests.push(m.clone());
                let _ = me.notify.send(m);
            }
            Ok(tonic::Response::new(futures::stream::empty()))
        })
    }
}

impl tonic::codegen::Service<http::Request<tonic::body::Body>> for SilentStep {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let svc = SilentCall(self.clone());
        Box::pin(async move {
            let mut grpc = Grpc::new(PairCodec::<ProstEncoder<StepResponse>, RawDecoder>::default())
                .apply_max_message_size_config(Some(100 << 20), Some(100 << 20));
            Ok(grpc.streaming(svc, req).await)
        })
    }
}

/// Serves a silent Step server as orderer `i` at `addr`; returns what it receives and a feed of it.
async fn silent_server(i: usize, addr: SocketAddr) -> (Arc<Mutex<Received>>, mpsc::UnboundedReceiver<Bytes>) {
    let dir = orderer_dir(i);
    let identity = Identity::from_pem(read(&dir.join("tls/server.crt")), read(&dir.join("tls/server.key")));
    silent_server_as(identity, addr).await
}

/// Serves a silent Step server with the TLS `identity` at `addr`, taking clients of the recording's TLS CA.
async fn silent_server_as(
    identity: Identity,
    addr: SocketAddr,
) -> (Arc<Mutex<Received>>, mpsc::UnboundedReceiver<Bytes>) {
    let tls = ServerTlsConfig::new()
        .identity(identity)
        .client_ca_root(Certificate::from_pem(read(&orderer_dir(0).join("tls/ca.crt"))));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| panic!("the recorded consenter address {addr} must be free for this test: {e}"));
    let received = Arc::new(Mutex::new(Received::default()));
    let (notify, feed) = mpsc::unbounded_channel();
    let svc = SilentStep { received: received.clone(), notify };
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .tls_config(tls)
            .unwrap()
            .add_service(svc)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .unwrap();
    });
    (received, feed)
}

// ---- a dialer that behaves as Fabric's: sends at once, asks for nothing, reads nothing ----

struct FabricDialer {
    tx: mpsc::Sender<Bytes>,
    call: tokio::task::JoinHandle<()>,
    headers_seen: Arc<std::sync::atomic::AtomicBool>,
}

impl FabricDialer {
    /// Opens a Step stream to `addr` presenting orderer `i`'s TLS certificate.
    async fn open(i: usize, addr: SocketAddr) -> FabricDialer {
        let dir = orderer_dir(i);
        let tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(read(&dir.join("tls/ca.crt"))))
            .identity(Identity::from_pem(read(&dir.join("tls/server.crt")), read(&dir.join("tls/server.key"))))
            .domain_name("localhost");
        let channel =
            Endpoint::from_shared(format!("https://{addr}")).unwrap().tls_config(tls).unwrap().connect().await.unwrap();
        let (tx, rx) = mpsc::channel::<Bytes>(1024);
        let headers_seen = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = headers_seen.clone();
        let call = tokio::spawn(async move {
            let mut grpc = tonic::client::Grpc::new(channel)
                .max_decoding_message_size(100 << 20)
                .max_encoding_message_size(100 << 20);
            grpc.ready().await.unwrap();
            let request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
            let path = http::uri::PathAndQuery::from_static("/orderer.Cluster/Step");
            let codec = PairCodec::<RawEncoder, RawDecoder>::default();
            if grpc.streaming(request, path, codec).await.is_ok() {
                seen.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        });
        FabricDialer { tx, call, headers_seen }
    }

    async fn send(&self, step: Bytes) {
        self.tx.send(step).await.unwrap();
    }

    async fn send_raft(&self, m: &RaftMessage) {
        let req = StepRequest {
            payload: Some(step_request::Payload::ConsensusRequest(ConsensusRequest {
                channel: CHANNEL.into(),
                payload: Bytes::from(m.write_to_bytes().unwrap()),
                metadata: Bytes::new(),
            })),
        };
        self.send(Bytes::from(req.encode_to_vec())).await;
    }
}

// ---- our node ----

fn node_yaml(home: &Path) -> String {
    let o0 = orderer_dir(0);
    format!(
        "General:\n  ListenAddress: 127.0.0.1\n  ListenPort: 0\n  TLS:\n    Enabled: true\n    \
         Certificate: {tls}/server.crt\n    PrivateKey: {tls}/server.key\n    RootCAs: [{tls}/ca.crt]\n    \
         ClientAuthRequired: false\n    ClientRootCAs: [{tls}/ca.crt]\n  Cluster:\n    ClientCertificate: \
         {tls}/server.crt\n    ClientPrivateKey: {tls}/server.key\n  LocalMSPDir: {msp}\n  LocalMSPID: OrdererMSP\n\
         FileLedger:\n  Location: {home}/ledger\nOperations:\n  ListenAddress: \"\"\nConsensus:\n  WALDir: \
         {home}/etcdraft/wal\n  SnapDir: {home}/etcdraft/snapshot\n",
        tls = o0.join("tls").display(),
        msp = o0.join("msp").display(),
        home = home.display(),
    )
}

async fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Raft messages a silent server received from our node, decoded.
fn raft_messages(received: &Mutex<Received>) -> Vec<(ConsensusRequest, RaftMessage)> {
    received.lock().unwrap().requests.iter().filter_map(consensus).map(|c| (c.clone(), raft_of(&c))).collect()
}

/// The marshaled envelopes of a marshaled block.
fn envelopes(block: &Bytes) -> Vec<Bytes> {
    Block::decode(block.clone()).unwrap().data.map(|d| d.data).unwrap_or_default()
}

/// Our node in orderer0's place, after the recorded term-4 leader's messages brought it to Fabric's height.
struct Following {
    node: ferrofabric_orderer::RunningOrderer,
    support: Arc<ferrofabric_orderer::ChainSupport>,
    /// Its data directory (ledger, WAL, snapshots) and configuration.
    home: tempfile::TempDir,
    /// What the silent orderer1 (the recorded leader) and orderer2 received from our node.
    heard1: Arc<Mutex<Received>>,
    feed1: mpsc::UnboundedReceiver<Bytes>,
    heard2: Arc<Mutex<Received>>,
    _feed2: mpsc::UnboundedReceiver<Bytes>,
    /// The recorded leader's stream to our node.
    leader: FabricDialer,
    /// The Raft index of every block the recorded leader replicated.
    entry_index: BTreeMap<u64, u64>,
    /// The last entry of the recorded leader's log that our node received: (index, term).
    last_entry: (u64, u64),
    fabric0: Vec<Bytes>,
    fabric1: Vec<Bytes>,
}

/// Starts our node with orderer0's configuration on `home`.
async fn start_ours(home: &Path) -> (ferrofabric_orderer::RunningOrderer, Arc<ferrofabric_orderer::ChainSupport>) {
    let config = ferrofabric_orderer::OrdererConfig::from_yaml(&node_yaml(home), home).unwrap();
    let mut plugins = ferrofabric_orderer::Plugins::default();
    ferrofabric_consensus_etcdraft::register(&mut plugins, &config).unwrap();
    let node = ferrofabric_orderer::start(config, plugins).await.unwrap();
    let support = wait_until("the channel to start", Duration::from_secs(10), || {
        node.registrar.channel(CHANNEL).map(|c| c.support.clone())
    })
    .await;
    (node, support)
}

/// Fabric's consenters orderer1 and orderer2 as silent Step servers at their channel-config addresses; our node in
/// orderer0's place with the ledger the recording's orderer0 kept and no Raft log; the recorded leader's messages
/// after orderer0's restart sent to it until it holds Fabric's blocks up to `FINAL_HEIGHT`.
async fn follow_the_recorded_leader() -> Following {
    let fabric0 = fixture_blocks(0);
    let fabric1 = fixture_blocks(1);
    assert_eq!(fabric0.len() as u64, FINAL_HEIGHT);

    // The Raft index of every block the recorded leader replicated, from the entries of its MsgApps.
    let mut entry_index: BTreeMap<u64, u64> = BTreeMap::new();
    for (from, to) in [(1, 0), (1, 2), (2, 0), (2, 1), (0, 1), (0, 2)] {
        for (_, step) in recorded_requests(from, to) {
            let Some(c) = consensus(&step) else { continue };
            for e in raft_of(&c).get_entries() {
                if let Ok(b) = Block::decode(e.get_data()) {
                    if let Some(h) = b.header {
                        entry_index.insert(h.number, e.index);
                    }
                }
            }
        }
    }

    // Fabric's consenters, as the recording shows them behave, at the channel's consenter addresses.
    let (heard1, feed1) = silent_server(1, "127.0.0.1:35150".parse().unwrap()).await;
    let (heard2, _feed2) = silent_server(2, "127.0.0.1:35250".parse().unwrap()).await;

    // Our node in orderer0's place: its ledger as the recording's orderer0 kept it, no Raft log.
    let home = tempfile::tempdir().unwrap();
    {
        let store = ferrofabric_block_store::BlockStore::open(
            &home.path().join("ledger/chains").join(CHANNEL),
            ferrofabric_block_store::StoreOptions::default(),
        )
        .unwrap();
        for b in &fabric0[..KEPT_HEIGHT as usize] {
            store.append(b.clone()).unwrap();
        }
    }
    let (node, support) = start_ours(home.path()).await;
    assert_eq!(support.store().height(), KEPT_HEIGHT);

    // The recorded term-4 leader's messages to orderer0, over a stream that asks for no answers.
    let leader = FabricDialer::open(1, node.grpc_addr).await;
    let replay: Vec<Bytes> =
        recorded_requests(1, 0).into_iter().filter(|(t, _)| *t > WIPED_RESTART_MS).map(|(_, b)| b).collect();
    assert!(replay.len() > 50, "the recording holds the leader's messages after orderer0's restart");
    let mut last_entry = (0, 0);
    for step in replay {
        if let Some(c) = consensus(&step) {
            if let Some(e) = raft_of(&c).get_entries().last() {
                last_entry = last_entry.max((e.index, e.term));
            }
        }
        leader.send(step).await;
    }
    wait_until("our node to append Fabric's blocks 29..32", Duration::from_secs(30), || {
        (support.store().height() >= FINAL_HEIGHT).then_some(())
    })
    .await;
    Following { node, support, home, heard1, feed1, heard2, _feed2, leader, entry_index, last_entry, fabric0, fabric1 }
}

/// Commits `chain` (from its genesis block) with the peer's validator: every block must pass, BlockValidation and
/// the config transactions' checks included.
async fn assert_the_validator_accepts(chain: Vec<Bytes>) {
    tokio::task::spawn_blocking(move || {
        let mut validator = Validator::new(chain[0].clone(), ValidatorOptions::default()).unwrap();
        for (n, b) in chain.iter().enumerate().skip(1) {
            validator.commit_block(b.clone()).unwrap_or_else(|e| panic!("block {n} refused: {e}"));
        }
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fabric_recorded_leader_drives_our_follower_and_a_silent_fabric_follower_gets_our_leader() {
    let _cluster = super::raft::cluster_lock().await;
    let Following {
        node,
        support,
        home: _home,
        heard1,
        mut feed1,
        heard2,
        _feed2,
        leader,
        entry_index,
        fabric0,
        fabric1,
        ..
    } = follow_the_recorded_leader().await;
    let addr = node.grpc_addr;
    let height = || support.store().height();
    assert_eq!(height(), FINAL_HEIGHT);
    let ours: Vec<Bytes> = (0..FINAL_HEIGHT).map(|n| support.store().block(n).unwrap().unwrap()).collect();

    // (a) Fabric's block numbers, header hashes and data; our own signature and etcdraft metadata.
    for n in KEPT_HEIGHT..FINAL_HEIGHT {
        let (o, f0, f1) = (
            Block::decode(ours[n as usize].clone()).unwrap(),
            Block::decode(fabric0[n as usize].clone()).unwrap(),
            Block::decode(fabric1[n as usize].clone()).unwrap(),
        );
        let header = o.header.clone().unwrap();
        assert_eq!(header.number, n);
        assert_eq!(block_header_hash(&header), block_header_hash(f0.header.as_ref().unwrap()), "block {n}: header");
        assert_eq!(block_header_hash(&header), block_header_hash(f1.header.as_ref().unwrap()), "block {n}: header");
        assert_eq!(o.data, f0.data, "block {n}: data");
        let (slots, fabric_slots) = (o.metadata.clone().unwrap().metadata, f0.metadata.clone().unwrap().metadata);
        let shape = |s: &[Bytes]| s.iter().map(|m| m.is_empty()).collect::<Vec<_>>();
        assert_eq!(shape(&slots), shape(&fabric_slots), "block {n}: the metadata slots Fabric's node fills");
        let sigs = ferrofabric_protos::common::Metadata::decode(slots[0].clone()).unwrap().signatures;
        assert_eq!(sigs.len(), 1, "block {n}: signed once, by this node");
        let md = block_raft_metadata(&ours[n as usize]).unwrap_or_else(|| panic!("block {n}: no etcdraft metadata"));
        assert_eq!((md.consenter_ids.as_slice(), md.next_consenter_id), (&[1, 2, 3][..], 4), "block {n}");
        assert_eq!(Some(&md.raft_index), entry_index.get(&n), "block {n}: the Raft index of its entry");
    }
    assert_eq!(block_raft_metadata(&ours[29]).map(|m| m.raft_index), Some(34), "README: block 29 from entry 34");
    assert_the_validator_accepts(ours.clone()).await;

    // (c) Follower duties over links whose servers never send headers: Raft answers reached the leader.
    let answers = raft_messages(&heard1);
    assert!(
        answers.iter().any(|(_, m)| m.get_msg_type() == MessageType::MsgAppendResponse
            && m.from == 1
            && m.to == 2
            && m.term == 4
            && !m.reject
            && m.index >= entry_index[&(FINAL_HEIGHT - 1)]),
        "our node's acknowledgement of the last entry reached the leader"
    );
    assert_eq!(heard1.lock().unwrap().asked_for_answers, 1, "our node dials once and asks for answers (ignored)");

    // A Broadcast to our follower is forwarded as a SubmitRequest the leader never answers: SUCCESS at once.
    let client_tls =
        ClientTls { ca_pem: read(&orderer_dir(0).join("tls/ca.crt")), server_name: "localhost".into(), identity: None };
    let forwarded = envelopes(&fabric0[12])[0].clone();
    let started = Instant::now();
    let ch = connect(&addr.to_string(), Some(&client_tls)).await.unwrap();
    let mut responses = broadcast(ch, futures::stream::iter(vec![forwarded.clone()])).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), responses.next()).await.unwrap().unwrap().unwrap();
    assert_eq!((r.status, r.info.as_str()), (Status::Success as i32, ""), "Broadcast answer");
    assert!(started.elapsed() < Duration::from_secs(1), "answered in {:?}", started.elapsed());
    wait_until("the SubmitRequest at the leader", Duration::from_secs(5), || {
        heard1.lock().unwrap().requests.iter().find_map(|s| match StepRequest::decode(s.clone()).ok()?.payload? {
            step_request::Payload::SubmitRequest(SubmitRequest { channel, payload: Some(env), .. }) => {
                (channel == CHANNEL && forwarded == env.encode_to_vec()).then_some(())
            }
            _ => None,
        })
    })
    .await;

    // The recorded leader falls silent; our node campaigns. The test answers as Fabric's orderer1 would.
    let submitted = envelopes(&fabric0[10])[0].clone();
    let mut submitted_sent = false;
    let mut our_term = 0;
    let mut heartbeats_to_2: Vec<Bytes> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(40);
    let mut seen = 0;
    loop {
        assert!(Instant::now() < deadline, "our node did not lead and order the submitted envelope in time");
        let Ok(Some(step)) = tokio::time::timeout(Duration::from_millis(200), feed1.recv()).await else {
            if height() > FINAL_HEIGHT && heartbeats_to_2.len() >= 12 {
                break;
            }
            continue;
        };
        seen += 1;
        let Some(c) = consensus(&step) else { continue };
        let m = raft_of(&c);
        assert_eq!((m.from, m.to), (1, 2));
        let mut reply = RaftMessage { from: 2, to: 1, term: m.term, ..Default::default() };
        match m.get_msg_type() {
            MessageType::MsgRequestPreVote => reply.set_msg_type(MessageType::MsgRequestPreVoteResponse),
            MessageType::MsgRequestVote => reply.set_msg_type(MessageType::MsgRequestVoteResponse),
            MessageType::MsgAppend => {
                our_term = m.term;
                reply.set_msg_type(MessageType::MsgAppendResponse);
                reply.index = m.index + m.get_entries().len() as u64;
            }
            MessageType::MsgHeartbeat => {
                our_term = m.term;
                heartbeats_to_2.push(c.metadata.clone());
                reply.set_msg_type(MessageType::MsgHeartbeatResponse);
                reply.context = m.context.clone();
            }
            _ => continue,
        }
        leader.send_raft(&reply).await;
        if our_term > 4 && !submitted_sent {
            // A Fabric follower forwards an envelope to our leader; it never reads an answer.
            let req = StepRequest {
                payload: Some(step_request::Payload::SubmitRequest(SubmitRequest {
                    channel: CHANNEL.into(),
                    last_validation_seq: 0,
                    payload: Some(ferrofabric_protos::common::Envelope::decode(submitted.clone()).unwrap()),
                })),
            };
            leader.send(Bytes::from(req.encode_to_vec())).await;
            submitted_sent = true;
        }
    }
    assert!(seen > 0 && our_term > 4, "our node leads a later term");

    // Our leader's blocks: the envelope forwarded to it (and the one still held from the follower days),
    // signed by it with the entry's Raft index.
    let new_blocks: Vec<Bytes> = (FINAL_HEIGHT..height()).map(|n| support.store().block(n).unwrap().unwrap()).collect();
    let ordered: Vec<Bytes> = new_blocks.iter().flat_map(envelopes).collect();
    assert!(ordered.contains(&submitted), "the SubmitRequest nobody answered was ordered");
    let mut chain = ours.clone();
    chain.extend(new_blocks.iter().cloned());
    assert_the_validator_accepts(chain).await;

    // (b) Every message our node sent decodes as etcd's raftpb.Message, with the fields Fabric writes for
    // that message type (raft-rs leaves zero values out; Fabric writes them, which decodes the same).
    let mut fabric_fields: BTreeMap<i32, BTreeSet<(u64, u8)>> = BTreeMap::new();
    for (from, to) in [(1, 0), (1, 2), (2, 0), (2, 1), (0, 1), (0, 2)] {
        for (_, step) in recorded_requests(from, to) {
            if let Some(c) = consensus(&step) {
                let m = EtcdMessage::decode(c.payload.clone()).unwrap();
                fabric_fields.entry(m.r#type).or_default().extend(wire_fields(&c.payload));
            }
        }
    }
    let mut sent: Vec<(ConsensusRequest, RaftMessage)> = raft_messages(&heard1);
    sent.extend(raft_messages(&heard2));
    let mut kinds = BTreeSet::new();
    for (c, m) in &sent {
        assert_eq!(c.channel, CHANNEL);
        let etcd = EtcdMessage::decode(c.payload.clone()).expect("our Raft message does not decode as raftpb.Message");
        assert_eq!(
            (etcd.r#type, etcd.to, etcd.from, etcd.term, etcd.log_term, etcd.index, etcd.commit, etcd.reject),
            (m.get_msg_type() as i32, m.to, m.from, m.term, m.log_term, m.index, m.commit, m.reject)
        );
        assert_eq!((etcd.vote, etcd.responses.len()), (0, 0), "no field Fabric reads as vote or responses");
        let fabric = fabric_fields
            .get(&etcd.r#type)
            .unwrap_or_else(|| panic!("we sent a {:?}, which Fabric never sends", m.get_msg_type()));
        for f in wire_fields(&c.payload) {
            if f.0 > 14 {
                // Not a raftpb.Message field (raft-rs's commit_term, priority): Fabric's decoder skips it.
                continue;
            }
            assert!(fabric.contains(&f), "{:?} carries field {f:?}, which Fabric's never do", m.get_msg_type());
        }
        for (e, ours) in etcd.entries.iter().zip(m.get_entries()) {
            assert_eq!(
                (e.r#type, e.term, e.index, &e.data[..]),
                (ours.get_entry_type() as i32, ours.term, ours.index, ours.get_data())
            );
        }
        kinds.insert(m.get_msg_type() as i32);
        if m.get_msg_type() != MessageType::MsgHeartbeat {
            assert!(c.metadata.is_empty(), "cluster metadata on a {:?}", m.get_msg_type());
        }
    }
    for k in [
        MessageType::MsgAppendResponse,
        MessageType::MsgRequestPreVote,
        MessageType::MsgRequestVote,
        MessageType::MsgAppend,
        MessageType::MsgHeartbeat,
    ] {
        assert!(kinds.contains(&(k as i32)), "our node sent no {k:?}");
    }

    // ClusterMetadata{active_nodes}: the leader first, orderer1 (which answers) too, orderer2 (silent) not;
    // on every fourth heartbeat once the set is stable.
    let with: Vec<usize> =
        heartbeats_to_2.iter().enumerate().filter(|(_, md)| !md.is_empty()).map(|(i, _)| i).collect();
    assert!(with.len() >= 2, "cluster metadata on {} of {} heartbeats", with.len(), heartbeats_to_2.len());
    for i in &with {
        let md = ClusterMetadata::decode(heartbeats_to_2[*i].clone()).unwrap();
        assert_eq!(md.active_nodes, vec![1, 2]);
    }
    let gaps: Vec<usize> = with.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(gaps.iter().all(|g| *g >= 4) && gaps.contains(&4), "heartbeats between metadata: {gaps:?}");

    // Nothing ever came back on the Fabric-style stream: no headers, no StepResponse.
    assert!(!leader.call.is_finished() && !leader.headers_seen.load(std::sync::atomic::Ordering::SeqCst));
    assert!(heard2.lock().unwrap().requests.iter().any(|s| consensus(s).is_some()), "orderer2 was dialed too");
    node.shutdown().await;
}

/// `raftpb.ConfChange` as a Fabric node marshals it (gogoproto, proto2 fields that are not nullable: `ID` and
/// `Type` are written even when zero).
fn fabric_conf_change_add(node: u64) -> Bytes {
    let mut b = vec![0x08, 0x00, 0x10, 0x00, 0x18];
    let mut v = node;
    while v >= 0x80 {
        b.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
    Bytes::from(b)
}

/// The unsigned config block a Fabric leader replicates after the recorded chain: block `FINAL_HEIGHT`, from a
/// CONFIG_UPDATE signed by the orderer organization's admin that adds consenter 4 (at `port`, with `cert`) and its
/// TLS CA (`ca_pem`) to the orderer organization's TLS roots, made into a CONFIG envelope signed by orderer1.
fn fabric_config_block_adding_a_consenter(fabric: &[Bytes], cert: &str, ca_pem: &str, port: u16) -> Bytes {
    use ferrofabric_protos::etcdraft::{ConfigMetadata, Consenter};
    use ferrofabric_protos::msp::{FabricMspConfig, MspConfig};
    use ferrofabric_protos::orderer::ConsensusType;
    use ferrofabric_testkit::SigningIdentity;
    let last_config = fabric
        .iter()
        .rev()
        .find_map(|b| ferrofabric_protoutil::sole_config_envelope(&Block::decode(b.clone()).unwrap()))
        .unwrap();
    let current = Arc::new(ferrofabric_channelconfig::ChannelConfig::from_envelope(&last_config).unwrap());
    let mut updated = current.config().clone();
    let orderer = updated.channel_group.as_mut().unwrap().groups.get_mut("Orderer").unwrap();
    let value = orderer.values.get_mut("ConsensusType").unwrap();
    let mut ct = ConsensusType::decode(value.value.clone()).unwrap();
    let mut md = ConfigMetadata::decode(ct.metadata.clone()).unwrap();
    assert_eq!(md.consenters.len(), 3);
    md.consenters.push(Consenter {
        host: "127.0.0.1".into(),
        port: u32::from(port),
        client_tls_cert: Bytes::from(cert.to_owned()),
        server_tls_cert: Bytes::from(cert.to_owned()),
    });
    ct.metadata = Bytes::from(md.encode_to_vec());
    value.value = Bytes::from(ct.encode_to_vec());
    let org = orderer.groups.values_mut().next().unwrap();
    let msp_value = org.values.get_mut("MSP").unwrap();
    let mut msp = MspConfig::decode(msp_value.value.clone()).unwrap();
    let mut fabric_msp = FabricMspConfig::decode(msp.config.clone()).unwrap();
    fabric_msp.tls_root_certs.push(Bytes::from(ca_pem.to_owned()));
    msp.config = Bytes::from(fabric_msp.encode_to_vec());
    msp_value.value = Bytes::from(msp.encode_to_vec());
    let users = fx("crypto/ordererOrganizations/example.com/users/Admin@example.com/msp");
    let admin = SigningIdentity::from_msp_dir("OrdererMSP", &users).unwrap();
    let update = ferrofabric_configtx::compute_update(CHANNEL, current.config(), &updated).unwrap();
    let update_env = ferrofabric_configtx::config_update_envelope(CHANNEL, &update, &[&admin], &admin);
    let config_env = ferrofabric_configtx::ConfigTxValidator::new(current).unwrap().propose(&update_env).unwrap();
    let orderer1 = SigningIdentity::from_msp_dir("OrdererMSP", &orderer_dir(1).join("msp")).unwrap();
    let env = Bytes::from(ferrofabric_configtx::wrap_config_envelope(&orderer1, CHANNEL, &config_env).encode_to_vec());
    let previous = Block::decode(fabric.last().unwrap().clone()).unwrap().header.unwrap();
    let block = Block {
        header: Some(ferrofabric_protos::common::BlockHeader {
            number: FINAL_HEIGHT,
            previous_hash: Bytes::copy_from_slice(&block_header_hash(&previous)),
            data_hash: Bytes::copy_from_slice(&ferrofabric_protoutil::block_data_hash(std::slice::from_ref(&env))),
        }),
        data: Some(ferrofabric_protos::common::BlockData { data: vec![env] }),
        // Five empty metadata slots: Fabric's leader replicates blocks unsigned.
        metadata: Some(ferrofabric_protos::common::BlockMetadata { metadata: vec![Bytes::new(); 5] }),
    };
    Bytes::from(block.encode_to_vec())
}

/// A restarted follower resumes at the tip's Raft index (its log still holds the tip's entry, so a Fabric
/// leader's next append is accepted where it left off) and takes a config block that adds a consenter the way
/// Fabric's leader sends it: the block unsigned, then the `ConfChange` in Fabric's own bytes. Our node signs the
/// block with the new consenter IDs in its etcdraft metadata, which BlockValidation and the config
/// transaction's checks accept, adds the consenter as a Raft voter and dials it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_follower_resumes_at_the_tip_and_takes_a_consenter_a_fabric_leader_adds() {
    let _cluster = super::raft::cluster_lock().await;
    let Following { node, support, home, heard1, mut feed1, entry_index, last_entry, fabric0, .. } =
        follow_the_recorded_leader().await;
    let (last_index, term) = last_entry;
    let ours: Vec<Bytes> = (0..FINAL_HEIGHT).map(|n| support.store().block(n).unwrap().unwrap()).collect();
    let tip = block_raft_metadata(&ours[FINAL_HEIGHT as usize - 1]).unwrap();
    assert_eq!(tip.raft_index, entry_index[&(FINAL_HEIGHT - 1)]);
    node.shutdown().await;
    drop(support);

    // Restarted on the same data: the same height, no block appended again.
    let (node, support) = start_ours(home.path()).await;
    assert_eq!(support.store().height(), FINAL_HEIGHT);
    while feed1.try_recv().is_ok() {}
    let heard_before = heard1.lock().unwrap().requests.len();

    // The fourth consenter: a TLS identity of a CA of its own, which the same config update adds to the roots.
    let (ca_pem, certs) = super::raft::tls_material(1);
    let (cert, key) = certs.into_iter().next().unwrap();
    let port = ferrofabric_comm::unused_port("127.0.0.1").unwrap();
    let (heard4, _feed4) =
        silent_server_as(Identity::from_pem(&cert, &key), SocketAddr::from(([127, 0, 0, 1], port))).await;
    let config_block = fabric_config_block_adding_a_consenter(&fabric0, &cert, &ca_pem, port);

    // The recorded leader (orderer1, Raft ID 2) appends the config block and its ConfChange after its last entry.
    let leader = FabricDialer::open(1, node.grpc_addr).await;
    let entry = |index: u64, kind: raft::prelude::EntryType, data: Bytes| {
        let mut e = raft::prelude::Entry { term, index, data, ..Default::default() };
        e.set_entry_type(kind);
        e
    };
    let mut append = RaftMessage {
        from: 2,
        to: 1,
        term,
        log_term: term,
        index: last_index,
        commit: last_index + 2,
        entries: vec![
            entry(last_index + 1, raft::prelude::EntryType::EntryNormal, config_block.clone()),
            entry(last_index + 2, raft::prelude::EntryType::EntryConfChange, fabric_conf_change_add(4)),
        ]
        .into(),
        ..Default::default()
    };
    append.set_msg_type(MessageType::MsgAppend);
    leader.send_raft(&append).await;

    wait_until("the config block in our ledger", Duration::from_secs(20), || {
        (support.store().height() > FINAL_HEIGHT).then_some(())
    })
    .await;
    let answered = wait_until("our node's answer to the append", Duration::from_secs(10), || {
        heard1.lock().unwrap().requests[heard_before..]
            .iter()
            .filter_map(consensus)
            .map(|c| raft_of(&c))
            .find(|m| m.get_msg_type() == MessageType::MsgAppendResponse && m.index >= last_index + 2)
    })
    .await;
    assert!(!answered.reject, "the restarted log did not hold the tip's entry: {answered:?}");
    assert_eq!((answered.from, answered.to, answered.term), (1, 2, term));

    // The block: Fabric's header and data, signed by our node, with the new consenter IDs.
    let raw = support.store().block(FINAL_HEIGHT).unwrap().unwrap();
    let block = Block::decode(raw.clone()).unwrap();
    let sent = Block::decode(config_block).unwrap();
    assert_eq!(block_header_hash(block.header.as_ref().unwrap()), block_header_hash(sent.header.as_ref().unwrap()));
    assert_eq!(block.data, sent.data);
    let sigs = ferrofabric_protos::common::Metadata::decode(block.metadata.clone().unwrap().metadata[0].clone())
        .unwrap()
        .signatures;
    assert_eq!(sigs.len(), 1, "signed once, by this node");
    let md = block_raft_metadata(&raw).unwrap();
    assert_eq!((md.consenter_ids.as_slice(), md.next_consenter_id), (&[1, 2, 3, 4][..], 5));
    assert_eq!(md.raft_index, last_index + 1, "the Raft index of its entry");
    let mut chain = ours;
    chain.push(raw);
    assert_the_validator_accepts(chain).await;

    // The ConfChange made consenter 4 a voter: with the leader silent, our node's election reaches it.
    wait_until("our node's vote request to the new consenter", Duration::from_secs(30), || {
        raft_messages(&heard4).into_iter().find(|(_, m)| {
            matches!(m.get_msg_type(), MessageType::MsgRequestPreVote | MessageType::MsgRequestVote)
                && (m.from, m.to) == (1, 4)
        })
    })
    .await;
    node.shutdown().await;
}

// ---- keepalive within Fabric's server policy ----

/// Fabric's `General.Keepalive.ServerMinInterval` default: a grpc-go server answers client pings that come sooner
/// with GOAWAY `too_many_pings`.
const FABRIC_SERVER_MIN_PING_INTERVAL: Duration = Duration::from_secs(60);

/// What a policing HTTP/2 server saw from its one client.
#[derive(Debug, Default)]
struct Policed {
    data_frames: usize,
    pings: Vec<Instant>,
    goaway_sent: bool,
}

/// A TLS HTTP/2 endpoint that behaves as a Fabric Step server does on the wire (accepts streams, never sends
/// HEADERS or DATA) and polices pings as grpc-go's server with `ServerMinInterval` does: a client PING sooner than
/// the interval after the connection started or after the previous one is answered with GOAWAY
/// ENHANCE_YOUR_CALM "too_many_pings".
async fn policing_h2_server(i: usize) -> (SocketAddr, Arc<Mutex<Policed>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = orderer_dir(i);
    let tls = ferrofabric_comm::TlsConfig {
        enabled: true,
        private_key: Some(dir.join("tls/server.key")),
        certificate: Some(dir.join("tls/server.crt")),
        ..Default::default()
    };
    let mut config = (*ferrofabric_comm::http_server_tls(&tls).unwrap()).clone();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Policed::default()));
    let policed = seen.clone();
    tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut s = acceptor.accept(tcp).await.unwrap();
        let started = Instant::now();
        let mut preface = [0u8; 24];
        s.read_exact(&mut preface).await.unwrap();
        assert_eq!(&preface, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        // Server preface: empty SETTINGS.
        s.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).await.unwrap();
        let mut last_ping = started;
        loop {
            let mut head = [0u8; 9];
            if s.read_exact(&mut head).await.is_err() {
                return;
            }
            let len = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
            let (kind, flags) = (head[3], head[4]);
            let mut payload = vec![0u8; len];
            if s.read_exact(&mut payload).await.is_err() {
                return;
            }
            match kind {
                0 => policed.lock().unwrap().data_frames += 1,
                // SETTINGS from the client: acknowledge.
                4 if flags & 1 == 0 => s.write_all(&[0, 0, 0, 4, 1, 0, 0, 0, 0]).await.unwrap(),
                6 if flags & 1 == 0 => {
                    let now = Instant::now();
                    policed.lock().unwrap().pings.push(now);
                    if now.duration_since(last_ping) < FABRIC_SERVER_MIN_PING_INTERVAL {
                        let debug = b"too_many_pings";
                        let mut goaway = vec![0, 0, (8 + debug.len()) as u8, 7, 0, 0, 0, 0, 0];
                        goaway.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x0b]);
                        goaway.extend_from_slice(debug);
                        s.write_all(&goaway).await.unwrap();
                        policed.lock().unwrap().goaway_sent = true;
                        return;
                    }
                    last_ping = now;
                    let mut ack = vec![0, 0, 8, 6, 1, 0, 0, 0, 0];
                    ack.extend_from_slice(&payload);
                    s.write_all(&ack).await.unwrap();
                }
                _ => {}
            }
        }
    });
    (addr, seen)
}

/// The cluster endpoint our links dial with keeps a Step stream that receives nothing (as every stream to a Fabric
/// server) without pinging: no PING within 8 s of steady sending, which the 5 s pings it used to send broke with
/// GOAWAY too_many_pings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_link_to_a_silent_server_sends_no_ping_sooner_than_fabric_allows() {
    let (addr, policed) = policing_h2_server(1).await;
    let o0 = orderer_dir(0);
    let tls = ferrofabric_comm::ClusterTls {
        certificate_pem: read(&o0.join("tls/server.crt")),
        private_key_pem: read(&o0.join("tls/server.key")),
        root_cas_pem: vec![read(&o0.join("tls/ca.crt"))],
    };
    let endpoint = ferrofabric_comm::cluster_endpoint("127.0.0.1", addr.port(), &tls, &[]).unwrap();
    let channel = endpoint.connect().await.unwrap();
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    let call = tokio::spawn(async move {
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.unwrap();
        let request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
        let path = http::uri::PathAndQuery::from_static("/orderer.Cluster/Step");
        let _ = grpc.streaming(request, path, PairCodec::<RawEncoder, RawDecoder>::default()).await;
    });
    // Heartbeat-like traffic for 8 s: the client sends, receives nothing.
    let heartbeat = recorded_requests(1, 0)
        .into_iter()
        .map(|(_, b)| b)
        .find(|b| consensus(b).is_some_and(|c| raft_of(&c).get_msg_type() == MessageType::MsgHeartbeat));
    let heartbeat = heartbeat.expect("a recorded heartbeat");
    for _ in 0..16 {
        if tx.send(heartbeat.clone()).await.is_err() {
            break; // the server closed the connection: the assertions below say why
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let seen = policed.lock().unwrap();
    assert!(seen.data_frames >= 12, "the stream carried the messages: {seen:?}");
    assert!(seen.pings.is_empty() && !seen.goaway_sent, "pings sooner than Fabric's ServerMinInterval: {seen:?}");
    assert!(!call.is_finished(), "the call is still open, waiting for headers that never come");
    assert!(ferrofabric_comm::CLUSTER_KEEPALIVE_INTERVAL >= FABRIC_SERVER_MIN_PING_INTERVAL);
}
