//! The real Fabric 2.5.16 `peer` CLI's requests, as `../shared/fixtures/fabric-2.5-peer` recorded them between the
//! CLI and a real orderer and peer (its README), replayed against our daemons in those roles:
//!
//! * `ferrofabric orderer`, joined to the recorded channel with its genesis block over the participation API (the
//!   answers those `osnadmin` printed), receives every envelope the CLI broadcast, step by step: it answers each as
//!   Fabric's orderer did and writes Fabric's blocks, header and data byte for byte, with metadata of the shape a
//!   Fabric peer checks; the CLI's `peer channel fetch` requests, each at the height it was made, get Fabric's
//!   answers; the deprecated `configtxgen -outputAnchorPeersUpdate` transaction is refused with Fabric's words, and
//!   an anchor-peer update of today's kind becomes a config block;
//! * `ferrofabric committer`, following an orderer that serves the real orderer's blocks, commits every one of
//!   them as the real peer stored it, byte for byte (validation codes and commit hashes included), and the CLI's
//!   `peer channel fetch` requests to the peer get the real peer's answers byte for byte;
//! * `ferrofabric endorser` answers the CLI's channel and ledger queries (`peer channel list`, `getinfo`, qscc,
//!   cscc) as the real peer did; with the recording's Node.js contract served by the same shim (npm `fabric-shim`
//!   2.5.8, `tests/chaincode-node`) as a chaincode service, it answers the CLI's install, lifecycle and chaincode
//!   calls at the recorded heights as the real peer did, read/write sets and events included.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_comm::{broadcast, connect, deliver_with, ClientTls, DeliverApi, DeliverItem};
use ferrofabric_protos::common::{Block, Status};
use ferrofabric_protos::orderer::BroadcastResponse;
use ferrofabric_protos::peer::ProposalResponse;
use futures::StreamExt;
use prost::Message;
use serde_json::Value;

use crate::block_shape::assert_same_shapes;
use crate::processes::{free_port, wait_listening};
use crate::sdk::Running;

/// How long a daemon may take to listen, a block to be cut, a Deliver answer to come.
const WAIT: Duration = Duration::from_secs(60);
/// What Fabric 2.5.16's orderer answered to the deprecated `configtxgen -outputAnchorPeersUpdate` transaction on a
/// channel made with the participation API (recorded from a real orderer on 2026-11-26).
const FABRIC_STALE_UPDATE: &str = "error applying config update to existing channel 'mychannel': error authorizing \
    update: error validating ReadSet: proposed update requires that key [Group]  /Channel/Application be at version 1, \
    but it is currently at version 0";

/// The recorded fixture's directory.
fn recorded() -> PathBuf {
    ferrofabric_testkit::fixture("fabric-2.5-peer")
}

/// A file of cryptogen's output in the fixture.
fn crypto(path: &str) -> PathBuf {
    recorded().join("crypto").join(path)
}

/// One recorded gRPC call: its method, who called whom, and its messages (direction, bytes) in the order the proxy
/// saw them.
struct Call {
    method: String,
    role: String,
    proxy: String,
    messages: Vec<(String, Bytes)>,
}

/// One recorded step: its number, name, the orderer's height after it, and the calls opened in it.
struct Step {
    number: u64,
    name: String,
    height_before: u64,
    height_after: u64,
    calls: Vec<Call>,
}

/// The steps of `exchanges.json`, in the order they ran.
fn steps() -> Vec<Step> {
    let text = std::fs::read_to_string(recorded().join("exchanges.json")).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    let b64 = |v: &Value| Bytes::from(base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap()).unwrap());
    json["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Step {
            number: s["step"].as_u64().unwrap(),
            name: s["name"].as_str().unwrap().to_owned(),
            height_before: s["height_before"].as_u64().unwrap(),
            height_after: s["height_after"].as_u64().unwrap(),
            calls: s["calls"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["opened_in_step"].as_bool().unwrap_or(true))
                .map(|c| Call {
                    method: c["method"].as_str().unwrap().to_owned(),
                    role: c["role"].as_str().unwrap().to_owned(),
                    proxy: c["proxy"].as_str().unwrap().to_owned(),
                    messages: c["messages"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|m| (m["dir"].as_str().unwrap().to_owned(), b64(&m["b64"])))
                        .collect(),
                })
                .collect(),
        })
        .collect()
}

/// `[u64 LE length][block]` records of a fixture file.
fn blocks(file: &str) -> Vec<Bytes> {
    let data = Bytes::from(std::fs::read(recorded().join(file)).unwrap());
    ferrofabric_protoutil::records(data).map(|r| r.unwrap().1).collect()
}

/// Replays the client's requests of a recorded Deliver `call` on one stream to `addr`: after each request, the
/// answers up to the closing status. Returns, per answer, the recorded one and ours.
async fn replay_deliver(addr: &str, api: DeliverApi, call: &Call) -> Vec<(DeliverItem, DeliverItem)> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let requests = stream_of(rx);
    let ch = connect(addr, None).await.unwrap();
    let mut stream = deliver_with(ch, api, requests).await.unwrap();
    let mut pairs = Vec::new();
    let mut recorded_answers = call.messages.iter().filter(|(d, _)| d == "s2c").map(|(_, m)| deliver_item(m));
    for (_, request) in call.messages.iter().filter(|(d, _)| d == "c2s") {
        tx.send(request.clone()).unwrap();
        loop {
            let ours = tokio::time::timeout(WAIT, stream.next()).await.expect("Deliver answer").unwrap().unwrap();
            let theirs = recorded_answers.next().expect("we answered more than Fabric did");
            let done = matches!(ours, DeliverItem::Status(_));
            pairs.push((theirs, ours));
            if done {
                break;
            }
        }
    }
    pairs
}

/// A stream of what `rx` receives.
fn stream_of(mut rx: tokio::sync::mpsc::UnboundedReceiver<Bytes>) -> impl futures::Stream<Item = Bytes> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A recorded `DeliverResponse` (the orderer's and the peer's: status = 1, block = 2), its block kept as the bytes
/// Fabric sent.
fn deliver_item(raw: &Bytes) -> DeliverItem {
    let mut buf = raw.clone();
    let key = prost::encoding::decode_varint(&mut buf).unwrap();
    let value = prost::encoding::decode_varint(&mut buf).unwrap();
    match key {
        0x08 => DeliverItem::Status(value as i32),
        0x12 => {
            assert_eq!(buf.len() as u64, value, "one block per recorded DeliverResponse");
            DeliverItem::Block(buf)
        }
        k => panic!("a recorded DeliverResponse with field key {k}"),
    }
}

/// The header and data of a Deliver answer's block (`None` for a status).
fn header_and_data(item: &DeliverItem) -> Option<Block> {
    match item {
        DeliverItem::Block(raw) => {
            let b = Block::decode(raw.clone()).unwrap();
            Some(Block { header: b.header, data: b.data, metadata: None })
        }
        DeliverItem::Status(_) => None,
    }
}

/// The orderer's height of `mychannel`, read with a Deliver request for the newest block as Org1's admin.
async fn height(addr: &str) -> u64 {
    let admin = org1_admin();
    let newest = Some(ferrofabric_protoutil::seek_newest());
    let seek = ferrofabric_protos::orderer::SeekInfo {
        start: newest,
        stop: newest,
        behavior: ferrofabric_protos::orderer::seek_info::SeekBehavior::BlockUntilReady as i32,
        ..Default::default()
    };
    let env = ferrofabric_comm::seek_envelope("mychannel", admin.serialized(), |m| admin.sign(m), &seek);
    let ch = connect(addr, None).await.unwrap();
    let mut stream = deliver_with(ch, DeliverApi::Orderer, futures::stream::iter([env])).await.unwrap();
    match stream.next().await {
        Some(Ok(DeliverItem::Block(raw))) => Block::decode(raw).unwrap().header.map_or(0, |h| h.number + 1),
        other => panic!("no newest block from {addr}: {other:?}"),
    }
}

/// Org1's admin of the recording, who ran the CLI's channel commands.
fn org1_admin() -> ferrofabric_msp::SigningIdentity {
    let msp = crypto("peerOrganizations/org1.example.com/users/Admin@org1.example.com/msp");
    ferrofabric_msp::SigningIdentity::from_msp_dir("Org1MSP", &msp).unwrap()
}

/// Blocks `0..height` of `mychannel` from the daemon at `addr` (its Deliver service `api`), as Org1's admin.
async fn chain(addr: &str, api: DeliverApi, height: u64) -> Vec<Bytes> {
    crate::processes::deliver_blocks(addr, api, None, "mychannel", &org1_admin(), Some(height - 1)).await
}

/// Sends one envelope with Broadcast to `addr`; returns the answer.
async fn broadcast_one(addr: &str, envelope: Bytes) -> BroadcastResponse {
    let ch = connect(addr, None).await.unwrap();
    let mut responses = broadcast(ch, futures::stream::iter([envelope])).await.unwrap();
    tokio::time::timeout(WAIT, responses.next()).await.unwrap().unwrap().unwrap()
}

/// `curl` against the participation API at `admin` (`args` after the URL's path `path`): (HTTP status, JSON body).
fn participation(admin: &str, path: &str, args: &[&str]) -> (u16, Value) {
    let out = Command::new("curl")
        .args(["-sS", "-w", "\n%{http_code}"])
        .args(args)
        .arg(format!("http://{admin}/participation/v1/channels{path}"))
        .output()
        .expect("curl must be installed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap();
    let body = if body.trim().is_empty() { Value::Null } else { serde_json::from_str(body).unwrap() };
    (status.trim().parse().unwrap(), body)
}

/// What `osnadmin` printed in the recording, per command: (HTTP status, JSON body).
fn osnadmin_answers() -> Vec<(u16, Value)> {
    let text = std::fs::read_to_string(recorded().join("osnadmin.txt")).unwrap();
    text.split("$ osnadmin")
        .skip(1)
        .map(|part| {
            let status = part.lines().find_map(|l| l.strip_prefix("Status: ")).unwrap().trim().parse().unwrap();
            let body = &part[part.find('{').unwrap()..=part.rfind('}').unwrap()];
            (status, serde_json::from_str(body).unwrap())
        })
        .collect()
}

/// Writes the orderer.yaml of our orderer in the recorded orderer's role (its MSP and its TLS certificate, which
/// names it among the consenters; plain text on every listener as in the recording) and starts it; returns it, its
/// gRPC and admin addresses.
fn start_orderer(home: &Path) -> (Running, String, String) {
    let (port, admin) = (free_port(), free_port());
    let node = crypto("ordererOrganizations/example.com/orderers/orderer.example.com");
    let yaml = format!(
        "General:\n  ListenAddress: 127.0.0.1\n  ListenPort: {port}\n  TLS:\n    Enabled: false\n  Cluster:\n    \
         ClientCertificate: {tls}/server.crt\n    ClientPrivateKey: {tls}/server.key\n  LocalMSPDir: {msp}\n  \
         LocalMSPID: OrdererMSP\n  Authentication:\n    TimeWindow: 87600h\nFileLedger:\n  Location: {home}/ledger\n\
         Admin:\n  ListenAddress: 127.0.0.1:{admin}\n  TLS:\n    Enabled: false\nChannelParticipation:\n  Enabled: true\n\
         Operations:\n  ListenAddress: \"\"\nConsensus:\n  WALDir: {home}/wal\n  SnapDir: {home}/snap\n",
        tls = node.join("tls").display(),
        msp = node.join("msp").display(),
        home = home.display(),
    );
    std::fs::create_dir_all(home).unwrap();
    std::fs::write(home.join("orderer.yaml"), yaml).unwrap();
    let log = home.join("orderer.log");
    let process = Running(
        Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
            .args(["orderer", "--config"])
            .arg(home.join("orderer.yaml"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let admin = format!("127.0.0.1:{admin}");
    wait_listening(&admin, "ferrofabric orderer", &log);
    (process, format!("127.0.0.1:{port}"), admin)
}

#[test]
fn our_orderer_answers_the_recorded_cli_as_fabric_and_writes_fabrics_blocks() {
    let tmp = tempfile::tempdir().unwrap();
    let (_orderer, grpc, admin) = start_orderer(&tmp.path().join("orderer"));
    let runtime = tokio::runtime::Runtime::new().unwrap();

    // osnadmin channel join, then list: Fabric's answers.
    let answers = osnadmin_answers();
    let genesis = recorded().join("genesis.block");
    let form = format!("config-block=@{}", genesis.display());
    assert_eq!(participation(&admin, "", &["-F", &form]), answers[0], "osnadmin channel join");
    assert_eq!(participation(&admin, "", &[]), answers[1], "osnadmin channel list");

    // Every recorded Broadcast and every `peer channel fetch` at the orderer, step by step, each at the height it
    // was made at.
    let (mut broadcasts, mut fetches) = (0, 0);
    for step in steps() {
        for call in step.calls.iter().filter(|c| c.role == "client->orderer") {
            if call.method.ends_with("/Broadcast") {
                let requests = call.messages.iter().filter(|(d, _)| d == "c2s");
                let answers = call.messages.iter().filter(|(d, _)| d == "s2c");
                for ((_, envelope), (_, answer)) in requests.zip(answers) {
                    let theirs = BroadcastResponse::decode(answer.clone()).unwrap();
                    let ours = runtime.block_on(broadcast_one(&grpc, envelope.clone()));
                    assert_eq!(ours, theirs, "step {} ({}): Broadcast answer", step.number, step.name);
                    broadcasts += 1;
                }
            } else if call.method.ends_with("/Deliver") {
                for (theirs, ours) in runtime.block_on(replay_deliver(&grpc, DeliverApi::Orderer, call)) {
                    match (header_and_data(&theirs), header_and_data(&ours)) {
                        (Some(t), Some(o)) => {
                            assert_eq!(o, t, "step {} ({}): the block's header and data", step.number, step.name)
                        }
                        _ => assert_eq!(ours, theirs, "step {} ({}): Deliver answer", step.number, step.name),
                    }
                }
                fetches += 1;
            }
        }
        // The CLI waited for the commit; the orderer cut the block after its batch timeout.
        let deadline = Instant::now() + WAIT;
        while runtime.block_on(height(&grpc)) < step.height_after {
            assert!(
                Instant::now() < deadline,
                "step {} ({}): no block {}",
                step.number,
                step.name,
                step.height_after - 1
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert!(broadcasts > 30 && fetches >= 3, "{broadcasts} broadcasts and {fetches} fetches replayed");

    // The whole chain: Fabric's headers and data, and metadata of the shape Fabric's orderer writes.
    let theirs: Vec<Block> = blocks("orderer-blocks.bin").into_iter().map(|b| Block::decode(b).unwrap()).collect();
    let raw = runtime.block_on(chain(&grpc, DeliverApi::Orderer, theirs.len() as u64));
    assert_eq!(raw[0], blocks("orderer-blocks.bin")[0], "block 0 is the genesis block, byte for byte");
    let ours: Vec<Block> = raw.into_iter().map(|b| Block::decode(b).unwrap()).collect();
    for (n, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        assert_eq!((&o.header, &o.data), (&t.header, &t.data), "block {n}: header and data");
    }
    assert_same_shapes(&ours, &theirs, (None, None));

    // The deprecated anchor-peer update of configtxgen, made for a channel of the system-channel era (its read set
    // expects the Application group at version 1): refused with Fabric's words.
    let config = ferrofabric_channelconfig::ChannelConfig::from_config_block(&theirs[0]).unwrap();
    let admin_id = org1_admin();
    let mut stale =
        ferrofabric_configtx::anchor_peer_update("mychannel", config.config(), "Org1MSP", "127.0.0.1", 7051).unwrap();
    let read_app = stale.read_set.as_mut().unwrap().groups.get_mut("Application").unwrap();
    read_app.version = 1;
    let envelope = ferrofabric_configtx::config_update_envelope("mychannel", &stale, &[&admin_id], &admin_id);
    let refused = runtime.block_on(broadcast_one(&grpc, envelope.encode_to_vec().into()));
    assert_eq!((refused.status, refused.info.as_str()), (Status::BadRequest as i32, FABRIC_STALE_UPDATE));

    // Today's anchor-peer update (fetch, edit, compute the update): a config block of its own, naming itself last.
    let update =
        ferrofabric_configtx::anchor_peer_update("mychannel", config.config(), "Org1MSP", "127.0.0.1", 7051).unwrap();
    let envelope = ferrofabric_configtx::config_update_envelope("mychannel", &update, &[&admin_id], &admin_id);
    let accepted = runtime.block_on(broadcast_one(&grpc, envelope.encode_to_vec().into()));
    assert_eq!(accepted.status, Status::Success as i32, "{}", accepted.info);
    let next = theirs.len() as u64;
    let deadline = Instant::now() + WAIT;
    while runtime.block_on(height(&grpc)) <= next {
        assert!(Instant::now() < deadline, "no config block after the anchor-peer update");
        std::thread::sleep(Duration::from_millis(50));
    }
    let block = Block::decode(runtime.block_on(chain(&grpc, DeliverApi::Orderer, next + 1)).pop().unwrap()).unwrap();
    assert!(ferrofabric_protoutil::sole_config_envelope(&block).is_some(), "block {next} is a config block");
    assert_eq!(
        ferrofabric_protoutil::last_config_index(&block).unwrap(),
        next,
        "block {next} names itself last config"
    );
    println!("{broadcasts} recorded broadcasts and {fetches} fetches: Fabric's answers and Fabric's {next} blocks");
}

/// Our orderer serving `served`, blocks of the real orderer's chain of the recording (in this process, on `runtime`) and our
/// `ferrofabric committer` following it as peer0.org1 (data and log under `tmp`); returns both and the committer's
/// peer Deliver address.
fn committer_of_the_recorded_blocks(
    tmp: &Path,
    runtime: &tokio::runtime::Runtime,
    served: &[Bytes],
) -> (crate::support::TestOrderer, Running, String) {
    let node = crypto("ordererOrganizations/example.com/orderers/orderer.example.com");
    let orderer = runtime.block_on(crate::support::TestOrderer::start_as(
        served,
        "mychannel",
        &node.join("msp"),
        "OrdererMSP",
        &node.join("tls/server.crt"),
    ));
    let listen = format!("127.0.0.1:{}", free_port());
    let config = tmp.join("committer.yaml");
    let peer0 = crypto("peerOrganizations/org1.example.com/peers/peer0.org1.example.com");
    std::fs::write(
        &config,
        format!(
            "Channel: mychannel\nGenesisBlock: {genesis}\nDataDir: {data}\nLocalMSPDir: {msp}\nLocalMSPID: Org1MSP\n\
             Orderers: [\"{orderer}\"]\nListenAddress: {listen}\nTimeWindow: 87600h\n",
            genesis = recorded().join("genesis.block").display(),
            data = tmp.join("committer").display(),
            msp = peer0.join("msp").display(),
            orderer = orderer.addr,
        ),
    )
    .unwrap();
    let committer = crate::processes::start_committer(&config, &tmp.join("committer.log"));
    (orderer, committer, listen)
}

#[test]
fn our_committer_stores_the_real_peers_bytes_and_answers_the_recorded_cli_as_the_peer() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let peer_blocks = blocks("peer-blocks.bin");
    let (orderer, committer, listen) =
        committer_of_the_recorded_blocks(tmp.path(), &runtime, &blocks("orderer-blocks.bin"));
    let log = tmp.path().join("committer.log");

    // Every block as the real peer stored it, byte for byte.
    let committed = runtime.block_on(chain(&listen, DeliverApi::Peer, peer_blocks.len() as u64));
    assert_eq!(committed.len(), peer_blocks.len());
    for (n, (ours, theirs)) in committed.iter().zip(&peer_blocks).enumerate() {
        if ours != theirs {
            let (o, t) = (Block::decode(ours.clone()).unwrap(), Block::decode(theirs.clone()).unwrap());
            assert_eq!(o.metadata, t.metadata, "block {n}: metadata (validation codes, commit hash)");
            panic!("block {n} differs from the real peer's\n{}", std::fs::read_to_string(&log).unwrap_or_default());
        }
    }

    // The CLI's `peer channel fetch` requests to the peer: the real peer's answers, byte for byte.
    let mut fetches = 0;
    for step in steps() {
        for call in step.calls.iter().filter(|c| c.role == "client->peer" && c.method == "/protos.Deliver/Deliver") {
            for (theirs, ours) in runtime.block_on(replay_deliver(&listen, DeliverApi::Peer, call)) {
                assert_eq!(ours, theirs, "step {} ({}): the peer's Deliver answer", step.number, step.name);
            }
            fetches += 1;
        }
    }
    assert!(fetches >= 4, "only {fetches} recorded fetches from the peer");
    println!("{} blocks committed as the real peer stored them; {fetches} recorded fetches answered", committed.len());
    drop(committer);
    runtime.block_on(async move {
        let mut orderer = orderer;
        orderer.stop().await;
    });
}

/// Starts `ferrofabric endorser` as the recording's peer0.org1 (its MSP), on the recorded channel's genesis block,
/// following the committer at `committer` if given; returns it and its address.
fn start_endorser(home: &Path, committer: Option<&str>) -> (Running, String) {
    let listen = format!("127.0.0.1:{}", free_port());
    let peer0 = crypto("peerOrganizations/org1.example.com/peers/peer0.org1.example.com");
    std::fs::create_dir_all(home).unwrap();
    let log = home.join("endorser.log");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ferrofabric"));
    cmd.args(["endorser", "--listen", &listen, "--msp-id", "Org1MSP", "--msp-dir"]).arg(peer0.join("msp"));
    cmd.arg("--genesis").arg(recorded().join("genesis.block"));
    if let Some(c) = committer {
        cmd.args(["--committer", c]);
    }
    let process = Running(cmd.stdout(Stdio::null()).stderr(std::fs::File::create(&log).unwrap()).spawn().unwrap());
    wait_listening(&listen, "ferrofabric endorser", &log);
    (process, listen)
}

/// The name of the chaincode a recorded `SignedProposal` invokes.
fn invoked_chaincode(signed: &ferrofabric_protos::peer::SignedProposal) -> String {
    use ferrofabric_protos::common::{ChannelHeader, Header};
    use ferrofabric_protos::peer::{ChaincodeHeaderExtension, Proposal};
    let proposal = Proposal::decode(signed.proposal_bytes.clone()).unwrap();
    let header = Header::decode(proposal.header).unwrap();
    let channel_header = ChannelHeader::decode(header.channel_header).unwrap();
    let extension = ChaincodeHeaderExtension::decode(channel_header.extension).unwrap();
    extension.chaincode_id.map(|c| c.name).unwrap_or_default()
}

/// The recorded ProcessProposal calls of the CLI to peer0.org1 that invoke `qscc` or `cscc`, with their step:
/// (step, request, Fabric's answer).
fn recorded_ledger_queries() -> Vec<(Step, Vec<(ferrofabric_protos::peer::SignedProposal, Bytes)>)> {
    use ferrofabric_protos::peer::SignedProposal;
    steps()
        .into_iter()
        .filter_map(|step| {
            let mut exchanges = Vec::new();
            for call in step.calls.iter().filter(|c| c.role == "client->peer" && c.method.ends_with("/ProcessProposal"))
            {
                let request = call.messages.iter().find(|(d, _)| d == "c2s").map(|(_, m)| m.clone());
                let answer = call.messages.iter().find(|(d, _)| d == "s2c").map(|(_, m)| m.clone());
                if let (Some(request), Some(answer)) = (request, answer) {
                    let signed = SignedProposal::decode(request).unwrap();
                    if matches!(invoked_chaincode(&signed).as_str(), "qscc" | "cscc") {
                        exchanges.push((signed, answer));
                    }
                }
            }
            (!exchanges.is_empty()).then_some((step, exchanges))
        })
        .collect()
}

/// Holds our `ProposalResponse` against Fabric's for the same request: version, response (status, message,
/// payload), `ProposalResponsePayload` and interest byte for byte, the endorser identity; our endorsement's
/// signature is ECDSA's own and is verified instead. A channel configuration (cscc's GetChannelConfig) is compared
/// as a message, since Fabric marshals its maps in no fixed order.
fn assert_same_answer(what: &str, ours: &ProposalResponse, theirs: &ProposalResponse, config: &ChannelConfig) {
    // Go marshals maps, and `_lifecycle` lists the definitions of a map, in no fixed order: such answers are compared
    // as messages (prost's maps compare as maps) with the definitions in name order.
    let definitions = |b: &Bytes| {
        ferrofabric_protos::lifecycle::QueryChaincodeDefinitionsResult::decode(b.clone()).ok().map(|mut r| {
            r.chaincode_definitions.sort_by(|x, y| x.name.cmp(&y.name));
            r
        })
    };
    fn same<M: Message + Default + PartialEq>(a: &Bytes, b: &Bytes) -> bool {
        matches!((M::decode(a.clone()), M::decode(b.clone())), (Ok(x), Ok(y)) if x == y)
    }
    let same_payload = |a: &Bytes, b: &Bytes| {
        use ferrofabric_protos::lifecycle::{CheckCommitReadinessResult, QueryChaincodeDefinitionResult};
        a == b
            || what.contains("GetChannelConfig") && same::<ferrofabric_protos::common::Config>(a, b)
            || what.contains("checkcommitreadiness") && same::<CheckCommitReadinessResult>(a, b)
            || what.contains("querycommitted all") && definitions(a).is_some() && definitions(a) == definitions(b)
            || what.contains("querycommitted") && same::<QueryChaincodeDefinitionResult>(a, b)
    };
    let (o, t) = (ours.response.clone().unwrap_or_default(), theirs.response.clone().unwrap_or_default());
    assert_eq!((o.status, &o.message), (t.status, &t.message), "{what}: response status and message");
    assert!(same_payload(&o.payload, &t.payload), "{what}: response payload");
    assert_eq!(ours.version, theirs.version, "{what}: version");
    assert_eq!(ours.interest, theirs.interest, "{what}: chaincode interest");
    if ours.payload != theirs.payload {
        use ferrofabric_protos::peer::{ChaincodeAction, ProposalResponsePayload};
        let (o, t) = (
            ProposalResponsePayload::decode(ours.payload.clone()).unwrap(),
            ProposalResponsePayload::decode(theirs.payload.clone()).unwrap(),
        );
        assert_eq!(o.proposal_hash, t.proposal_hash, "{what}: proposal hash");
        let (mut o, mut t) =
            (ChaincodeAction::decode(o.extension).unwrap(), ChaincodeAction::decode(t.extension).unwrap());
        let (or, tr) = (o.response.take().unwrap_or_default(), t.response.take().unwrap_or_default());
        assert!(same_payload(&or.payload, &tr.payload), "{what}: the chaincode action's response");
        assert_eq!(o, t, "{what}: the chaincode action");
    }
    match (&ours.endorsement, &theirs.endorsement) {
        (None, None) => {}
        (Some(o), Some(t)) => {
            assert_eq!(o.endorser, t.endorser, "{what}: endorser identity");
            let id = config.msp_manager().deserialize_identity(&o.endorser).unwrap();
            let signed: Vec<u8> = [ours.payload.as_ref(), o.endorser.as_ref()].concat();
            id.verify(&signed, &o.signature).unwrap_or_else(|e| panic!("{what}: our endorsement does not verify: {e}"));
        }
        (o, t) => panic!("{what}: endorsement {} where Fabric's {}", o.is_some(), t.is_some()),
    }
}

/// Which recorded `peer channel join` steps [`replay_queries`] replays.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Joins {
    /// None: the peer starts on its channel (the first joins were answered 200 by a peer that had not joined).
    Skip,
    /// Org1's: the peer is peer0.org1 and has joined no channel yet.
    Org1,
}

/// Replays to our peer at `addr` the recorded qscc and cscc queries made at height `at`, each answered as the
/// real peer answered it; returns how many.
fn replay_queries(
    runtime: &tokio::runtime::Runtime,
    queries: &[(Step, Vec<(ferrofabric_protos::peer::SignedProposal, Bytes)>)],
    addr: &str,
    tls: Option<&ClientTls>,
    at: u64,
    config: &ChannelConfig,
    joins: Joins,
) -> usize {
    let mut n = 0;
    for (step, exchanges) in queries.iter().filter(|(s, _)| s.height_after == at) {
        if step.name.starts_with("channel join (") && (joins == Joins::Skip || step.name != "channel join (Org1)") {
            continue;
        }
        for (request, answer) in exchanges {
            let theirs = ProposalResponse::decode(answer.clone()).unwrap();
            let ours = runtime.block_on(process_proposal_over(addr, tls, request.clone()));
            assert_same_answer(&format!("step {} ({})", step.number, step.name), &ours, &theirs, config);
            n += 1;
        }
    }
    n
}

/// Sends `request` to our peer at `addr`; its answer.
async fn process_proposal(addr: &str, request: ferrofabric_protos::peer::SignedProposal) -> ProposalResponse {
    process_proposal_over(addr, None, request).await
}

/// [`process_proposal`] over TLS when `tls` is given.
async fn process_proposal_over(
    addr: &str,
    tls: Option<&ClientTls>,
    request: ferrofabric_protos::peer::SignedProposal,
) -> ProposalResponse {
    let ch = connect(addr, tls).await.unwrap();
    let mut client = ferrofabric_protos::peer::endorser_client::EndorserClient::new(ch);
    client.process_proposal(request).await.unwrap().into_inner()
}

/// `peer channel list`, `getinfo` (of our channel and of an unknown one) and `join` of the channel again, and
/// `peer chaincode query` of qscc (GetChainInfo, GetBlockByNumber, GetBlockByHash given as text and as bytes,
/// GetTransactionByID, GetBlockByTxID, unknown ids, beyond the height) and cscc (GetChannelConfig), as the real CLI
/// sent them to the real peer: our peer, at the same height, gives the real peer's answers. Only the first joins
/// (steps answered 200 by a peer that had not joined yet) are left out: our peer starts on its channel.
#[test]
fn our_peer_answers_the_recorded_channel_and_ledger_queries_as_fabric() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let genesis = Block::decode(blocks("orderer-blocks.bin")[0].clone()).unwrap();
    let config = ChannelConfig::from_config_block(&genesis).unwrap();
    let queries = recorded_ledger_queries();
    let replay = |addr: &str, at: u64| replay_queries(&runtime, &queries, addr, None, at, &config, Joins::Skip);
    // At height 1: a peer that follows nobody.
    let (first, addr) = start_endorser(&tmp.path().join("at-genesis"), None);
    let early = replay(&addr, 1);
    drop(first);

    // At the recording's last height: a peer following a committer of the real orderer's blocks.
    let (orderer, committer, listen) =
        committer_of_the_recorded_blocks(tmp.path(), &runtime, &blocks("orderer-blocks.bin"));
    let (endorser, addr) = start_endorser(&tmp.path().join("at-tip"), Some(&format!("http://{listen}")));
    let height = blocks("orderer-blocks.bin").len() as u64;
    // `peer channel getinfo` until the peer is at the recording's height.
    let (getinfo, _) = &queries.iter().rfind(|(s, _)| s.name.starts_with("channel getinfo")).unwrap().1[0];
    let deadline = Instant::now() + WAIT;
    loop {
        let ours = runtime.block_on(process_proposal(&addr, getinfo.clone()));
        let info = ferrofabric_protos::common::BlockchainInfo::decode(ours.response.unwrap_or_default().payload);
        if info.is_ok_and(|i| i.height == height) {
            break;
        }
        assert!(Instant::now() < deadline, "our peer did not reach height {height}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let late = replay(&addr, height);
    assert!(early >= 3 && late >= 9, "{early} and {late} recorded queries replayed");
    println!("{} recorded channel and ledger queries answered as the real peer did", early + late);
    drop((endorser, committer));
    runtime.block_on(async move {
        let mut orderer = orderer;
        orderer.stop().await;
    });
}

/// Starts `ferrofabric peer node start` as the recording's peer0.org1, as a Fabric operator runs a peer: Fabric's
/// sample `core.yaml` under `FABRIC_CFG_PATH=home`, with `peer.deliveryclient.addressOverrides` sending the
/// channel's orderer endpoint `endpoint` to `orderer`, and everything else from `CORE_*` variables as in a
/// docker-compose file; listening on `listen`, its data under `home/production`.
fn start_peer_daemon(home: &Path, listen: &str, endpoint: &str, orderer: &str) -> Running {
    start_peer_daemon_with(home, listen, endpoint, orderer, &[])
}

/// `CORE_PEER_TLS_*` for the recording's peer0.org1 with its TLS pair, requiring client certificates of Org1's TLS
/// CA, as an operator's docker-compose environment sets them.
fn peer_tls_env() -> Vec<(&'static str, PathBuf)> {
    let tls = crypto("peerOrganizations/org1.example.com/peers/peer0.org1.example.com/tls");
    vec![
        ("CORE_PEER_TLS_ENABLED", PathBuf::from("true")),
        ("CORE_PEER_TLS_CERT_FILE", tls.join("server.crt")),
        ("CORE_PEER_TLS_KEY_FILE", tls.join("server.key")),
        ("CORE_PEER_TLS_ROOTCERT_FILE", tls.join("ca.crt")),
        ("CORE_PEER_TLS_CLIENTAUTHREQUIRED", PathBuf::from("true")),
        ("CORE_PEER_TLS_CLIENTROOTCAS_FILES", tls.join("ca.crt")),
    ]
}

/// [`start_peer_daemon`] with the extra environment `env`.
fn start_peer_daemon_with(
    home: &Path,
    listen: &str,
    endpoint: &str,
    orderer: &str,
    env: &[(&'static str, PathBuf)],
) -> Running {
    let peer0 = crypto("peerOrganizations/org1.example.com/peers/peer0.org1.example.com");
    let daemon = crate::peer_network::PeerDaemon {
        id: "peer0.org1.example.com",
        mspid: "Org1MSP",
        msp: peer0.join("msp"),
        listen,
        orderer: (endpoint, orderer),
        env,
    };
    daemon.start(home)
}

/// Waits until `peer channel getinfo` (the recording's last one) at our peer `addr` answers `height`.
fn wait_for_getinfo_height(
    runtime: &tokio::runtime::Runtime,
    queries: &[(Step, Vec<(ferrofabric_protos::peer::SignedProposal, Bytes)>)],
    addr: &str,
    tls: Option<&ClientTls>,
    height: u64,
) {
    let (getinfo, _) = &queries.iter().rfind(|(s, _)| s.name.starts_with("channel getinfo")).unwrap().1[0];
    let deadline = Instant::now() + WAIT;
    loop {
        let ours = runtime.block_on(process_proposal_over(addr, tls, getinfo.clone()));
        let info = ferrofabric_protos::common::BlockchainInfo::decode(ours.response.unwrap_or_default().payload);
        if info.is_ok_and(|i| i.height == height) {
            return;
        }
        assert!(Instant::now() < deadline, "our peer did not reach height {height}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `ferrofabric peer node start` on Fabric's `core.yaml` with `CORE_*` overrides, as the recording's peer0.org1,
/// starts with no channel. The recorded `peer channel join` of Org1's admin (cscc JoinChain with the channel's
/// genesis block) gets the real peer's answer, and so do the CLI's channel and ledger queries made then (`peer
/// channel list`, `getinfo`, the join again, qscc and cscc) — our peer pulled block 0 from the orderer the channel
/// configuration names (reached through `addressOverrides`). When that orderer serves the whole recorded chain, our
/// peer commits it byte for byte as the real peer stored it and answers the queries of the recording's end as the
/// real peer did. Joined to a second channel, and then killed with SIGKILL and started again with TLS and client
/// authentication, it resumes both channels and answers the recording's queries again over TLS.
#[test]
fn our_peer_daemon_joins_as_the_recorded_cli_asked_and_answers_its_queries_as_fabric_across_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let orderer_blocks = blocks("orderer-blocks.bin");
    let height = orderer_blocks.len() as u64;
    let config = ChannelConfig::from_config_block(&Block::decode(orderer_blocks[0].clone()).unwrap()).unwrap();
    let endpoint = config.orderer_endpoints()[0].0.clone();
    let node = crypto("ordererOrganizations/example.com/orderers/orderer.example.com");
    let orderer_listen = format!("127.0.0.1:{}", free_port());
    let start_orderer = |served: &[Bytes]| {
        runtime.block_on(crate::support::TestOrderer::start_on(
            served,
            "mychannel",
            &node.join("msp"),
            "OrdererMSP",
            &node.join("tls/server.crt"),
            &orderer_listen,
        ))
    };
    let queries = recorded_ledger_queries();

    // The recording's start: the orderer holds the genesis block; the peer has joined nothing.
    let mut orderer = start_orderer(&orderer_blocks[..1]);
    let listen = format!("127.0.0.1:{}", free_port());
    let home = tmp.path().join("peer0.org1");
    let peer = start_peer_daemon(&home, &listen, &endpoint, &orderer_listen);
    let early = replay_queries(&runtime, &queries, &listen, None, 1, &config, Joins::Org1);
    runtime.block_on(orderer.stop());

    // The recording's end: the orderer serves the whole chain, which the peer pulls and commits as Fabric did.
    let mut orderer = start_orderer(&orderer_blocks);
    wait_for_getinfo_height(&runtime, &queries, &listen, None, height);
    let late = replay_queries(&runtime, &queries, &listen, None, height, &config, Joins::Skip);
    let committed = runtime.block_on(chain(&listen, DeliverApi::Peer, height));
    let fabric = blocks("peer-blocks.bin");
    assert_eq!(committed.len(), fabric.len());
    for (n, (ours, theirs)) in committed.iter().zip(&fabric).enumerate() {
        assert!(ours == theirs, "block {n} differs from the bytes the real peer stored");
    }

    // A second channel of the same organisations, made by our configtxgen from the recording's configtx.yaml: the
    // orderer joins it, then Org1's admin joins the peer to it as `peer channel join` would.
    let configtx = ferrofabric_configtxgen::ConfigTx::load(&recorded().join("configtx.yaml")).unwrap();
    let profile = configtx.profile("ChannelUsingRaft").unwrap();
    let second =
        Bytes::from(ferrofabric_configtxgen::genesis_block(&profile, "secondchannel").unwrap().encode_to_vec());
    let registrar = orderer.node.as_ref().unwrap().registrar.clone();
    let to_join = second.clone();
    runtime
        .block_on(async move { tokio::task::spawn_blocking(move || registrar.join(to_join)).await })
        .unwrap()
        .unwrap();
    let system = |function: &str, arg: &[u8], tls: Option<&ClientTls>| {
        let args = [Bytes::from(function.to_owned()), Bytes::copy_from_slice(arg)];
        let proposal = ferrofabric_endorser::create_proposal(
            &org1_admin(),
            "",
            if function == "GetChainInfo" { "qscc" } else { "cscc" },
            &args,
        );
        runtime.block_on(process_proposal_over(&listen, tls, proposal.signed)).response.unwrap()
    };
    let joined = system("JoinChain", &second, None);
    assert_eq!((joined.status, joined.message.as_str()), (200, ""));
    let channels = |listed: ferrofabric_protos::peer::Response| -> Vec<String> {
        assert_eq!(listed.status, 200, "{}", listed.message);
        let listed = ferrofabric_protos::peer::ChannelQueryResponse::decode(listed.payload).unwrap();
        listed.channels.into_iter().map(|c| c.channel_id).collect()
    };
    assert_eq!(channels(system("GetChannels", b"", None)), ["mychannel", "secondchannel"]);
    let second_height = |r: ferrofabric_protos::peer::Response| {
        assert_eq!(r.status, 200, "{}", r.message);
        ferrofabric_protos::common::BlockchainInfo::decode(r.payload).unwrap().height
    };
    assert_eq!(second_height(system("GetChainInfo", b"secondchannel", None)), 1);

    // A crash loses nothing: started again, now with TLS and client authentication on its listener (core.yaml's
    // `peer.tls` by `CORE_PEER_TLS_*`), the peer resumes both channels it joined and answers the CLI over TLS;
    // a client without a certificate of the org's TLS CA is refused.
    let mut peer = peer;
    peer.0.kill().unwrap();
    peer.0.wait().unwrap();
    let peer = start_peer_daemon_with(&home, &listen, &endpoint, &orderer_listen, &peer_tls_env());
    let admin_tls = crypto("peerOrganizations/org1.example.com/users/Admin@org1.example.com/tls");
    let read = |f: &str| std::fs::read(admin_tls.join(f)).unwrap();
    let admin = ClientTls {
        ca_pem: read("ca.crt"),
        server_name: "peer0.org1.example.com".into(),
        identity: Some((read("client.crt"), read("client.key"))),
    };
    let tls = Some(&admin);
    wait_for_getinfo_height(&runtime, &queries, &listen, tls, height);
    let again = replay_queries(&runtime, &queries, &listen, tls, height, &config, Joins::Skip);
    assert_eq!(channels(system("GetChannels", b"", tls)), ["mychannel", "secondchannel"]);
    assert_eq!(second_height(system("GetChainInfo", b"secondchannel", tls)), 1);
    let anonymous = ClientTls { identity: None, ..admin.clone() };
    let refused = runtime.block_on(async {
        let channel = connect(&listen, Some(&anonymous)).await?;
        let mut client = ferrofabric_protos::peer::endorser_client::EndorserClient::new(channel);
        let proposal = queries[0].1[0].0.clone();
        client.process_proposal(proposal).await.map_err(anyhow::Error::from)
    });
    assert!(refused.is_err(), "a TLS client without a certificate was served");
    assert!(early >= 4 && late >= 9 && again == late, "{early}, {late} and {again} recorded queries replayed");
    println!("{} recorded channel and ledger queries answered as the real peer did", early + late + again);
    drop(peer);
    runtime.block_on(orderer.stop());
}

/// The Node.js contract of the recording served by Fabric's shim (`fabric-chaincode-node server`, npm
/// `fabric-shim` 2.5.8 from `tests/chaincode-node`) on `address` as package `package_id`; its log goes to `log`.
fn start_node_chaincode(dir: &Path, address: &str, package_id: &str, log: &Path) -> Running {
    crate::chaincode_service::serve_node_contract(&recorded().join("chaincode/node"), dir, address, package_id, log)
}

/// One organisation's peer of the recording played by our endorser: its MSP, the recording's proxy name for it, and
/// its chaincode services (address as its packages' `connection.json` name it, package key in `package-ids.json`).
struct RecordedPeer {
    org: &'static str,
    mspid: &'static str,
    proxy: &'static str,
    services: [(&'static str, &'static str); 2],
}

const RECORDED_PEERS: [RecordedPeer; 2] = [
    RecordedPeer {
        org: "org1",
        mspid: "Org1MSP",
        proxy: "peer0.org1",
        services: [("127.0.0.1:37171", "mycc/org1"), ("127.0.0.1:37173", "othercc/org1")],
    },
    RecordedPeer {
        org: "org2",
        mspid: "Org2MSP",
        proxy: "peer0.org2",
        services: [("127.0.0.1:37172", "mycc/org2"), ("127.0.0.1:37174", "othercc/org2")],
    },
];

/// Starts `ferrofabric endorser` as `peer` of the recording (its MSP, a package store under `home`, the history
/// database on), following the committer at `committer`; returns it, its address and its log.
fn start_recorded_peer(home: &Path, peer: &RecordedPeer, committer: &str) -> (Running, String, PathBuf) {
    std::fs::create_dir_all(home).unwrap();
    let listen = format!("127.0.0.1:{}", free_port());
    let msp = crypto(&format!("peerOrganizations/{o}.example.com/peers/peer0.{o}.example.com/msp", o = peer.org));
    let yaml = home.join("endorser.yaml");
    std::fs::write(
        &yaml,
        format!(
            "listen: {listen}\nmsp_dir: {msp}\nmsp_id: {mspid}\ngenesis: {genesis}\ncommitter: {committer}\n\
             file_system_path: {fs}\nhistory_database: true\n",
            msp = msp.display(),
            mspid = peer.mspid,
            genesis = recorded().join("genesis.block").display(),
            fs = home.join("data").display(),
        ),
    )
    .unwrap();
    let log = home.join("endorser.log");
    let process = Running(
        Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
            .arg("endorser")
            .arg("--config")
            .arg(&yaml)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait_listening(&listen, "ferrofabric endorser", &log);
    (process, listen, log)
}

/// Every ProcessProposal the real CLI sent to either peer from the first install on — `peer lifecycle chaincode
/// install/queryinstalled/getinstalledpackage/approveformyorg/checkcommitreadiness/queryapproved/commit/
/// querycommitted`, and `peer chaincode invoke/query` of the recording's Node.js contract (served by the same shim
/// as chaincode services, reached through each org's installed `ccaas` package's `connection.json`): get/put/delete,
/// composite keys, ranges over more than 100 keys, pagination, history, events, transient and private data,
/// key-level policies, chaincode-to-chaincode calls, errors — replayed to our peers of both organisations at the
/// height at which each was made (the real orderer's blocks appended one by one to our orderer, which our committer
/// follows): the real peer's status, message and payload, the same `ProposalResponsePayload` (read/write set,
/// events, response) and interest, and an endorsement by the same identity that verifies.
#[test]
fn our_peer_answers_the_recorded_install_lifecycle_and_chaincode_calls_as_fabric() {
    let tmp = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let orderer_blocks = blocks("orderer-blocks.bin");
    let genesis = Block::decode(orderer_blocks[0].clone()).unwrap();
    let config = ChannelConfig::from_config_block(&genesis).unwrap();
    // The chaincode services listen on the ports the recorded packages name.
    let _lock = crate::processes::cluster_lock();

    let ids: Value =
        serde_json::from_str(&std::fs::read_to_string(recorded().join("package-ids.json")).unwrap()).unwrap();
    let mut services = Vec::new();
    for peer in &RECORDED_PEERS {
        for (address, key) in peer.services {
            let dir = tmp.path().join(key.replace('/', "-"));
            let log = tmp.path().join(format!("{}.log", key.replace('/', "-")));
            services.push(start_node_chaincode(&dir, address, ids[key]["package_id"].as_str().unwrap(), &log));
        }
    }

    // Our orderer at the genesis block, our committer following it, our peers following the committer.
    let (mut orderer, committer, listen) = committer_of_the_recorded_blocks(tmp.path(), &runtime, &orderer_blocks[..1]);
    let peers: Vec<_> =
        RECORDED_PEERS.iter().map(|p| (p, start_recorded_peer(&tmp.path().join(p.org), p, &listen))).collect();

    let all = steps();
    let (getinfo, _) = recorded_ledger_queries()
        .into_iter()
        .rfind(|(s, _)| s.name.starts_with("channel getinfo"))
        .map(|(_, mut e)| e.remove(0))
        .unwrap();
    let first_install = all.iter().position(|s| s.name.starts_with("lifecycle install")).unwrap();
    let mut height = 1u64;
    let (mut answered, mut mismatches) = (0, Vec::new());
    for step in &all[first_install..] {
        // The real blocks up to the step's height, then wait for our peers to have them.
        while height < step.height_before {
            let channel = orderer.node.as_ref().unwrap().registrar.channel("mychannel").unwrap();
            runtime.block_on(channel.support.append_block(orderer_blocks[height as usize].clone())).unwrap();
            height += 1;
        }
        for (_, (_, addr, _)) in &peers {
            let deadline = Instant::now() + WAIT;
            loop {
                let ours = runtime.block_on(process_proposal(addr, getinfo.clone()));
                let info =
                    ferrofabric_protos::common::BlockchainInfo::decode(ours.response.unwrap_or_default().payload);
                if info.is_ok_and(|i| i.height == height) {
                    break;
                }
                assert!(Instant::now() < deadline, "our peer did not reach height {height}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        for (peer, (_, addr, _)) in &peers {
            for call in step.calls.iter().filter(|c| {
                c.role == "client->peer" && c.proxy == peer.proxy && c.method == "/protos.Endorser/ProcessProposal"
            }) {
                let request = call.messages.iter().find(|(d, _)| d == "c2s").map(|(_, m)| m.clone());
                let answer = call.messages.iter().find(|(d, _)| d == "s2c").map(|(_, m)| m.clone());
                let (Some(request), Some(answer)) = (request, answer) else { continue };
                let signed = ferrofabric_protos::peer::SignedProposal::decode(request).unwrap();
                if matches!(invoked_chaincode(&signed).as_str(), "qscc" | "cscc") {
                    continue;
                }
                let theirs = ProposalResponse::decode(answer).unwrap();
                let ours = runtime.block_on(process_proposal(addr, signed));
                let what = format!("step {} ({}) at {}", step.number, step.name, peer.proxy);
                let check = std::panic::AssertUnwindSafe(|| assert_same_answer(&what, &ours, &theirs, &config));
                match std::panic::catch_unwind(check) {
                    Ok(()) => answered += 1,
                    Err(_) => mismatches.push(what),
                }
            }
        }
    }
    let logs: String = peers.iter().map(|(_, (_, _, log))| std::fs::read_to_string(log).unwrap_or_default()).collect();
    assert!(
        mismatches.is_empty(),
        "{} of {} recorded calls answered differently: {mismatches:?}\n{logs}",
        mismatches.len(),
        answered + mismatches.len(),
    );
    assert!(answered >= 150, "only {answered} recorded calls replayed");
    println!("{answered} recorded install, lifecycle and chaincode calls to both peers answered as the real peers did");
    drop((peers, committer, services));
    runtime.block_on(orderer.stop());
}
