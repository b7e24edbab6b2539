//! The committer with the BMac card (`Accelerator: sim:8x2`, the RTL co-simulated under Verilator): on Fabric
//! 2.5.16's own ledger it stores the bytes Fabric's peer stored (TRANSACTIONS_FILTER and COMMIT_HASH) and serves the
//! same peer Deliver events; a card that stops answering, or whose codes its host disputes, is switched off and the
//! host validates in software, without losing or repeating a block; a restarted committer brings its card back to
//! the stored height; the same card on the network (`udp:ADDR`, hw/DESIGN.md §7) and behind the XDMA driver's device
//! files (`alveo:DEVICE`, emulated over FUSE, hw/DESIGN.md §8) serves the committer as well, and so does a card on
//! the network fed by a relay beside the orderer over a lossy link (`relayed:ADDR`). On generated 3- and 5-org
//! networks with 2-of-3, 3-of-5 and nested policies, a committer with the card and one without store the same bytes
//! and serve the same Deliver blocks and events, with every chaincode block validated on the card.
//!
//! Without the Verilator backend in this build, or without the committer's `bmac-sim` feature (which the `sim:`
//! card needs), these tests report SKIPPED and pass, unless `FERROFABRIC_REQUIRE_VERILATOR=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::*;
use bytes::Bytes;
use ferrofabric_committer::{start, RunningCommitter};
use ferrofabric_protos::common::Status;

const CARD: &str = "sim:8x2";

/// How long a committer with a card may take to start: it replays its stored chain through the card, and a
/// co-simulated card takes seconds per block (more with another card beside it on a slow machine).
const START_LIMIT: Duration = Duration::from_secs(600);

/// The fault points are global to the process: a test that turns one on holds this lock alone, the others share it
/// (two co-simulated cards run at once, one per core). The tests that hold it alone are named `when_…`, so that
/// the test harness, which starts tests in name order, reaches them last, and the longest test early.
static CARD_LOCK: tokio::sync::RwLock<()> = tokio::sync::RwLock::const_new(());

/// The lock's guard: shared, or alone for a test that turns a fault point on.
enum CardGuard {
    Shared(#[allow(dead_code)] tokio::sync::RwLockReadGuard<'static, ()>),
    Alone(#[allow(dead_code)] tokio::sync::RwLockWriteGuard<'static, ()>),
}

async fn card_guard(alone: bool) -> CardGuard {
    if alone {
        CardGuard::Alone(CARD_LOCK.write().await)
    } else {
        CardGuard::Shared(CARD_LOCK.read().await)
    }
}

fn card_built() -> bool {
    let why = if !cfg!(feature = "bmac-sim") {
        "the committer is built without its `bmac-sim` feature (the co-simulated card)"
    } else if !ferrofabric_bmac_sim::available_sim_configs().contains(&(8, 2)) {
        "the 8x2 BMac card is not built into this binary"
    } else {
        return true;
    };
    assert!(
        std::env::var("FERROFABRIC_REQUIRE_VERILATOR").as_deref() != Ok("1"),
        "FERROFABRIC_REQUIRE_VERILATOR=1 but {why}"
    );
    eprintln!("SKIPPED: {why}");
    false
}

async fn committer_with_card(data: &std::path::Path, orderers: Vec<String>) -> RunningCommitter {
    let config =
        ferrofabric_committer::CommitterConfig { accelerator: Some(CARD.into()), ..committer_config(data, orderers) };
    tokio::time::timeout(START_LIMIT, start(config)).await.unwrap().unwrap()
}

/// What the fixture-ledger tests start from: their hold on the card lock, an orderer serving the fixture ledger, a data
/// directory.
struct Setup {
    _one: CardGuard,
    orderer: TestOrderer,
    data: tempfile::TempDir,
    peer_blocks: Vec<Bytes>,
}

/// `None` when the card is not built (the test is skipped). `alone`: the test turns a fault point on.
async fn setup(alone: bool) -> Option<Setup> {
    let one = card_guard(alone).await;
    if !card_built() {
        return None;
    }
    let (orderer_blocks, peer_blocks) = fixture_ledger();
    let orderer = TestOrderer::start(&orderer_blocks).await;
    Some(Setup { _one: one, orderer, data: tempfile::tempdir().unwrap(), peer_blocks })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_commits_fabric_peer_bytes_serves_fabric_deliver_events_and_resumes_after_a_restart() {
    let _one = card_guard(false).await;
    if !card_built() {
        return;
    }
    let (orderer_blocks, peer_blocks) = fixture_ledger();
    let data = tempfile::tempdir().unwrap();
    // First an orderer at height 9: blocks 1 to 6 (`_lifecycle`) on the host, 7 and 8 on the card.
    let mut orderer = TestOrderer::start(&orderer_blocks[..9]).await;
    let started = std::time::Instant::now();
    let c = committer_with_card(data.path(), vec![orderer.addr.clone()]).await;
    wait_height(&c, 9).await;
    eprintln!("9 blocks committed through the {CARD} card in {:?}", started.elapsed());
    assert_fabric_peer_bytes(&c, &peer_blocks[..9]);
    let m = metrics(&c);
    assert_eq!(sample(&m, r#"committer_accelerator_blocks_total{channel="mychannel",path="hardware"}"#), 2.0, "{m}");
    assert_eq!(sample(&m, r#"committer_accelerator_blocks_total{channel="mychannel",path="host"}"#), 6.0);
    c.shutdown().await.unwrap();
    orderer.stop().await;

    // A restart replays the stored chain through a fresh card and goes on from its height, here with the rest of
    // the ledger: blocks 9 to 28 on the card.
    let mut orderer = TestOrderer::start(&orderer_blocks).await;
    let c = committer_with_card(data.path(), vec![orderer.addr.clone()]).await;
    wait_height(&c, 29).await;
    assert_fabric_peer_bytes(&c, &peer_blocks);
    assert_eq!(c.status().borrow().commit_hash, stored_commit_hash(&peer_blocks[28]));
    // Peer Deliver serves what Fabric's peer would: the blocks it stored.
    let (served, status) = peer_deliver(&c.deliver_addr.to_string(), &user1(2), 0, 28).await;
    assert_eq!(status, Some(Status::Success as i32));
    assert_eq!(served, peer_blocks);
    let m = metrics(&c);
    assert_eq!(sample(&m, r#"committer_accelerator_blocks_total{channel="mychannel",path="hardware"}"#), 20.0, "{m}");
    assert_eq!(sample(&m, r#"committer_accelerator_blocks_total{channel="mychannel",path="host"}"#), 0.0);
    assert_eq!(sample(&m, r#"committer_accelerator_card_on{channel="mychannel"}"#), 1.0);
    c.shutdown().await.unwrap();
    orderer.stop().await;
}

/// testkit's endorsement ledger (three blocks of 12 transactions after the definitions) over a generated network of
/// `orgs` peer orgs, served by a real orderer of that network and pulled by two committers, one with the card and
/// one without. Both must store the same bytes (every TRANSACTIONS_FILTER and COMMIT_HASH) and serve the same peer
/// Deliver blocks and DeliverFiltered events; the card must validate every chaincode block, and the ledger must hold
/// both valid transactions and policy failures.
async fn card_and_software_committers_agree(
    orgs: usize,
    chaincodes: &[(&str, Option<&str>)],
    endorsements: &[&[usize]],
) {
    use ferrofabric_protos::peer::TxValidationCode;
    use prost::Message;
    let _one = card_guard(false).await;
    if !card_built() {
        return;
    }
    let net = ferrofabric_testkit::Network::generate_orgs(60 + orgs as u64, orgs).unwrap();
    let crypto = tempfile::tempdir().unwrap();
    net.write_msp_dirs(crypto.path()).unwrap();
    let blocks: Vec<Bytes> = ferrofabric_testkit::endorsement_ledger(&net, chaincodes, endorsements, 3, 12)
        .unwrap()
        .iter()
        .map(|b| Bytes::from(b.encode_to_vec()))
        .collect();
    let height = blocks.len() as u64;
    let node = crypto.path().join("ordererOrganizations/example.com/orderers/orderer.example.com");
    let orderer_msp = net.mspid(net.orderer_org()).to_owned();
    let mut orderer =
        TestOrderer::start_as(&blocks, net.channel_id(), &node.join("msp"), &orderer_msp, &node.join("tls/server.crt"))
            .await;
    let genesis = crypto.path().join("genesis.block");
    std::fs::write(&genesis, &blocks[0]).unwrap();
    let user = crypto.path().join("peerOrganizations/org1.example.com/users/User1@org1.example.com/msp");
    let config = |data: &std::path::Path, accelerator: Option<String>| ferrofabric_committer::CommitterConfig {
        genesis_block: Some(genesis.clone()),
        local_msp_dir: Some(user.clone()),
        local_msp_id: Some(net.mspid(0).to_owned()),
        accelerator,
        ..committer_config(data, vec![orderer.addr.clone()])
    };
    let (sw_data, hw_data) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let sw = start(config(sw_data.path(), None)).await.unwrap();
    let hw =
        tokio::time::timeout(START_LIMIT, start(config(hw_data.path(), Some(CARD.into())))).await.unwrap().unwrap();
    wait_height(&sw, height).await;
    wait_height(&hw, height).await;

    let software = stored_chain(&sw);
    assert_eq!(software.len() as u64, height);
    assert!(stored_chain(&hw) == software, "the card's committer stored other bytes than the software's");
    let codes: Vec<u8> =
        software.iter().flat_map(|b| ferrofabric_committer::stored_peer_metadata(b).unwrap().0.unwrap()).collect();
    assert!(codes.contains(&(TxValidationCode::Valid as u8)));
    assert!(codes.contains(&(TxValidationCode::EndorsementPolicyFailure as u8)));

    // Deliver events out: the same blocks and the same filtered events from both.
    let signer = net.client(0);
    let (hw_addr, sw_addr) = (hw.deliver_addr.to_string(), sw.deliver_addr.to_string());
    let (served, status) = peer_deliver(&hw_addr, signer, 0, height - 1).await;
    assert_eq!(status, SUCCESS);
    assert!(served == software, "peer Deliver from the card's committer differs from the software's chain");
    let (hw_events, status) = peer_deliver_filtered(&hw_addr, signer, 0, height - 1).await;
    assert_eq!(status, SUCCESS);
    let (sw_events, _) = peer_deliver_filtered(&sw_addr, signer, 0, height - 1).await;
    assert_eq!(hw_events, sw_events);

    let m = metrics(&hw);
    let on_card = sample(&m, r#"committer_accelerator_blocks_total{channel="mychannel",path="hardware"}"#);
    let on_host = sample(&m, r#"committer_accelerator_blocks_total{channel="mychannel",path="host"}"#);
    assert_eq!((on_card, on_host), (3.0, chaincodes.len() as f64), "every chaincode block on the card\n{m}");
    assert_eq!(sample(&m, r#"committer_accelerator_card_on{channel="mychannel"}"#), 1.0);
    hw.shutdown().await.unwrap();
    sw.shutdown().await.unwrap();
    orderer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_org_ledger_with_two_of_three_and_majority_policies_commits_on_the_card_as_in_software() {
    card_and_software_committers_agree(
        3,
        &[("twoofthree", Some("OutOf(2, 'Org1MSP.peer', 'Org2MSP.peer', 'Org3MSP.peer')")), ("majority", None)],
        &[&[0, 1], &[2], &[1, 2], &[0], &[0, 1, 2], &[2, 0]],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_org_ledger_with_three_of_five_and_nested_policies_commits_on_the_card_as_in_software() {
    card_and_software_committers_agree(
        5,
        &[
            ("threeoffive", Some("OutOf(3, 'Org1MSP.peer', 'Org2MSP.peer', 'Org3MSP.peer', 'Org4MSP.peer', 'Org5MSP.peer')")),
            ("nested", Some("AND(OR('Org1MSP.peer', 'Org2MSP.peer'), OR('Org3MSP.peer', AND('Org4MSP.peer', 'Org5MSP.member')))")),
            ("majority", None),
        ],
        &[&[0, 2, 4], &[1, 3], &[0, 3, 4], &[4], &[1, 2, 3, 4], &[0, 1], &[2, 3], &[0, 1, 2]],
    )
    .await;
}

/// The committer's `/metrics` text (Prometheus exposition format) from its operations endpoint.
fn metrics(c: &RunningCommitter) -> String {
    let addr = c.operations_addr.expect("operations endpoint");
    ureq::get(format!("http://{addr}/metrics")).call().unwrap().body_mut().read_to_string().unwrap()
}

/// The value of the sample whose line starts with `name` (labels included), 0 if absent.
fn sample(text: &str, name: &str) -> f64 {
    text.lines().find_map(|l| l.strip_prefix(name)?.trim().parse().ok()).unwrap_or(0.0)
}

fn stored_commit_hash(block: &Bytes) -> Option<[u8; 32]> {
    ferrofabric_committer::stored_peer_metadata(block).unwrap().1
}

/// Runs the fixture ledger through a committer whose card misbehaves as fail point `point` with `actions` makes it,
/// checks that the committer stored the bytes Fabric's peer stored, and returns its accelerator metrics: blocks
/// validated on the card, blocks validated by the host, whether the card is still on.
async fn with_faulty_card(point: &str, actions: &str) -> Option<(f64, f64, f64)> {
    let Setup { _one, mut orderer, data, peer_blocks } = setup(true).await?;
    fail::cfg(point, actions).unwrap();
    let c = committer_with_card(data.path(), vec![orderer.addr.clone()]).await;
    wait_height(&c, 29).await;
    fail::remove(point);
    assert_fabric_peer_bytes(&c, &peer_blocks);
    let m = metrics(&c);
    eprintln!("{m}");
    let counts = (
        sample(&m, r#"committer_accelerator_blocks_total{channel="mychannel",path="hardware"}"#),
        sample(&m, r#"committer_accelerator_blocks_total{channel="mychannel",path="host"}"#),
        sample(&m, r#"committer_accelerator_card_on{channel="mychannel"}"#),
    );
    c.shutdown().await.unwrap();
    orderer.stop().await;
    Some(counts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_a_card_stops_answering_it_is_switched_off_and_no_block_is_lost() {
    // The card answers for the first 2 hardware-path blocks (blocks 7 and 8), then stops.
    let Some(counts) = with_faulty_card("bmac-card-fault", "2*off->return(no result within the deadline)").await else {
        return;
    };
    // The card validated blocks 7 and 8; from block 9 on, its host did, and the card is reported off.
    assert_eq!(counts, (2.0, 26.0, 0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_host_disputes_a_cards_codes_the_card_is_switched_off_and_the_host_decides() {
    // The card gets the first code of its first block (block 7) wrong: the host, committing with the card's
    // signature verdicts, reaches another code by its own MVCC, refuses the card's, and validates in software.
    let Some(counts) = with_faulty_card("bmac-card-wrong-code", "1*return->off").await else { return };
    assert_eq!(counts, (0.0, 28.0, 0.0));
}

/// The 8x2 card behind a UDP socket on loopback, served by a thread of this process.
struct LoopbackCard {
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Result<(), ferrofabric_bmac_sim::ServeError>>,
}

impl LoopbackCard {
    fn start() -> LoopbackCard {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || ferrofabric_bmac_sim::serve_card(&socket, 8, 2, &stop))
        };
        LoopbackCard { addr, stop, thread }
    }

    fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_on_the_network_commits_fabric_peer_bytes() {
    let Some(Setup { _one, mut orderer, data, peer_blocks }) = setup(false).await else { return };
    let card = LoopbackCard::start();
    let addr = card.addr;
    commits_on_the_card(&format!("udp:{addr}"), data.path(), &orderer, &peer_blocks).await;
    card.stop();
    orderer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_behind_the_xdma_driver_commits_fabric_peer_bytes() {
    let Some(Setup { _one, mut orderer, data, peer_blocks }) = setup(false).await else { return };
    let devices = tempfile::tempdir().unwrap();
    let emulation = ferrofabric_bmac_sim::emulate_xdma(devices.path(), "xdma0", 8, 2).unwrap();
    let accelerator = format!("alveo:{}", emulation.prefix().display());
    commits_on_the_card(&accelerator, data.path(), &orderer, &peer_blocks).await;
    drop(emulation);
    orderer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_fed_by_a_relay_beside_the_orderer_gives_the_committer_fabric_peer_bytes_through_lost_datagrams() {
    let Some(Setup { _one, mut orderer, data, peer_blocks }) = setup(false).await else { return };
    let card = LoopbackCard::start();
    let addr = card.addr;
    // The relay loses the first sending of every 5th datagram and sends every 3rd after the next.
    let relay = ferrofabric_committer::start_relay(ferrofabric_committer::RelayConfig {
        genesis_block: genesis_path(),
        local_msp_dir: user1_msp(1),
        local_msp_id: "Org1MSP".into(),
        orderers: vec![orderer.addr.clone()],
        orderer_tls: Default::default(),
        delivery: Default::default(),
        card: addr,
        deadline: Duration::from_secs(120),
        impairment: ferrofabric_bmac_boards::Impairment { drop_every: 5, swap_every: 3 },
    })
    .await
    .unwrap();
    let config = ferrofabric_committer::CommitterConfig {
        accelerator: Some(format!("relayed:{addr}")),
        ..committer_config(data.path(), vec![orderer.addr.clone()])
    };
    let c = tokio::time::timeout(START_LIMIT, start(config.clone())).await.unwrap().unwrap();
    // Blocks 1-6 are `_lifecycle` blocks (the host's), 7 and 8 the card's.
    let started = std::time::Instant::now();
    wait_height(&c, 9).await;
    eprintln!("relayed: height 9 in {:?}", started.elapsed());
    let m = metrics(&c);
    assert_eq!(sample(&m, r#"committer_accelerator_blocks_total{channel="mychannel",path="hardware"}"#), 2.0, "{m}");
    assert_eq!(sample(&m, r#"committer_accelerator_blocks_total{channel="mychannel",path="host"}"#), 6.0);
    assert_eq!(sample(&m, r#"committer_accelerator_card_on{channel="mychannel"}"#), 1.0);
    let stored = stored_chain(&c);
    assert!(stored.iter().zip(&peer_blocks).all(|(ours, fabric)| ours == fabric), "stored bytes differ from Fabric's");
    // The relay reports a block after the committer has it: wait for its report of block 8.
    let mut reports = relay.status.clone();
    // `wait_for` answers with a read guard of the status: dropped at once, or the relay could not report again.
    let reported = tokio::time::timeout(Duration::from_secs(10), reports.wait_for(|s| s.on_card >= 2))
        .await
        .is_ok_and(|r| r.is_ok());
    let status = relay.status.borrow().clone();
    eprintln!("relay: {status:?}");
    assert!(reported, "the relay did not report the card's second block: {status:?}");
    assert_eq!(status.sessions, 1, "the relay never had to reset the card");
    assert!(status.on_card >= 2 && status.on_host == 6, "{status:?}");
    assert!(status.link.dropped > 0 && status.link.retransmitted > 0, "{status:?}");

    // A restarted committer replays its stored chain with the card's kept results (the card is not reset) and
    // goes on with the next block from the card.
    let store = c.store.clone();
    c.shutdown().await.unwrap();
    let height = store.height();
    drop(store);
    let c = tokio::time::timeout(START_LIMIT, start(config)).await.unwrap().unwrap();
    wait_height(&c, height + 1).await;
    let m = metrics(&c);
    assert_eq!(sample(&m, r#"committer_accelerator_blocks_total{channel="mychannel",path="hardware"}"#), 1.0, "{m}");
    assert_eq!(sample(&m, r#"committer_accelerator_card_on{channel="mychannel"}"#), 1.0);
    let last = usize::try_from(height).unwrap();
    assert_eq!(c.status().borrow().commit_hash, stored_commit_hash(&peer_blocks[last]));
    assert_eq!(relay.status.borrow().sessions, 1);
    c.shutdown().await.unwrap();
    relay.shutdown().await.unwrap();
    card.stop();
    orderer.stop().await;
}

/// A committer with `Accelerator: accelerator` (a card outside the process) commits the fixture ledger to height 9
/// with blocks on the card, and stores the bytes Fabric's peer stored.
async fn commits_on_the_card(accelerator: &str, data: &std::path::Path, orderer: &TestOrderer, peer_blocks: &[Bytes]) {
    let config = ferrofabric_committer::CommitterConfig {
        accelerator: Some(accelerator.into()),
        ..committer_config(data, vec![orderer.addr.clone()])
    };
    let c = tokio::time::timeout(START_LIMIT, start(config)).await.unwrap().unwrap();
    // Blocks 7 and 8 are the first two on the card.
    let started = std::time::Instant::now();
    wait_height(&c, 9).await;
    eprintln!("{accelerator}: height 9 in {:?}", started.elapsed());
    let m = metrics(&c);
    let stored = stored_chain(&c);
    c.shutdown().await.unwrap();
    assert!(sample(&m, r#"committer_accelerator_blocks_total{channel="mychannel",path="hardware"}"#) >= 2.0, "{m}");
    assert_eq!(sample(&m, r#"committer_accelerator_card_on{channel="mychannel"}"#), 1.0);
    assert!(stored.len() >= 9, "{} blocks stored", stored.len());
    assert!(stored.iter().zip(peer_blocks).all(|(ours, fabric)| ours == fabric), "stored bytes differ from Fabric's");
}
