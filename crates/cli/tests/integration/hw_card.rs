//! `ferrofabric hw card`: the co-simulated BMac card as a process on the network. It says where it listens, answers
//! a host's HELLO with its configuration and serves its registers over UDP. `ferrofabric hw relay`, as a process
//! beside an orderer, feeds it the channel's blocks, and a host that only reads results gets Fabric's codes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use ferrofabric_bmac::regs;
use ferrofabric_bmac_boards::{UdpCard, UdpCardReader};
use ferrofabric_bmac_sim::available_sim_configs;

use crate::support::{fixture_ledger, genesis_path, user1_msp, TestOrderer};

/// Whether the 8x2 card is built into this binary, with the `bmac-sim` feature (else the test is skipped, unless
/// Verilator is required).
fn card_built() -> bool {
    let why = if !cfg!(feature = "bmac-sim") {
        "the binary is built without the `bmac-sim` feature"
    } else if !available_sim_configs().contains(&(8, 2)) {
        "the 8x2 BMac card is not built into this binary"
    } else {
        return true;
    };
    assert!(std::env::var("FERROFABRIC_REQUIRE_VERILATOR").as_deref() != Ok("1"), "{why}");
    eprintln!("SKIPPED: {why}");
    false
}

/// Starts `ferrofabric` with `args` and returns it with the first line it prints, which must start with `ready`.
fn spawn_ready(args: &[&str], ready: &str) -> (std::process::Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
        .args(args)
        .env("FERROFABRIC_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let rest = line.strip_prefix(ready).unwrap_or_else(|| panic!("{line}")).trim().to_owned();
    (child, rest)
}

/// `ferrofabric hw card` on loopback: the process and its address.
fn card_process() -> (std::process::Child, std::net::SocketAddr) {
    let args = ["hw", "card", "--config", "8x2", "--listen", "127.0.0.1:0", "--seconds", "300"];
    let (child, rest) = spawn_ready(&args, "hw card ready: listen=");
    (child, rest.split_whitespace().next().unwrap().parse().unwrap())
}

#[test]
fn hw_card_listens_on_udp_and_answers_a_host() {
    if !card_built() {
        return;
    }
    let (mut child, addr) = card_process();
    let mut card = UdpCard::connect(addr, Duration::from_secs(30)).unwrap();
    assert_eq!(card.config(), (8, 2));
    assert_eq!(card.read_reg(regs::REG_STAT_BLOCKS).unwrap(), 0, "a card just reset has validated no block");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hw_relay_feeds_the_card_from_the_orderer_and_a_reader_gets_fabric_codes() {
    if !card_built() {
        return;
    }
    let (orderer_blocks, peer_blocks) = fixture_ledger();
    let mut orderer = TestOrderer::start(&orderer_blocks).await;
    let (mut card, addr) = card_process();
    let (genesis, msp, card_addr) = (genesis_path(), user1_msp(1), addr.to_string());
    let args = [
        "hw",
        "relay",
        "--genesis",
        genesis.to_str().unwrap(),
        "--orderer",
        orderer.addr.as_str(),
        "--msp-dir",
        msp.to_str().unwrap(),
        "--msp-id",
        "Org1MSP",
        "--card",
        card_addr.as_str(),
        "--drop-every",
        "7",
        "--seconds",
        "300",
    ];
    let (mut relay, rest) = spawn_ready(&args, "hw relay ready: card=");
    assert_eq!(rest, card_addr);
    // Block 7 is the first the card validates (blocks 1-6 are `_lifecycle` blocks, the relay's host's).
    let codes = tokio::task::spawn_blocking(move || {
        let mut reader = UdpCardReader::connect(addr, Duration::from_secs(120)).unwrap();
        assert_eq!(reader.config(), (8, 2));
        reader.result_of(7).unwrap().expect("a result for block 7")
    })
    .await
    .unwrap();
    let filter = ferrofabric_committer::stored_peer_metadata(&peer_blocks[7]).unwrap().0.unwrap();
    assert!(codes.block_valid);
    assert_eq!(codes.codes, filter, "the card's codes for block 7 are Fabric's peer's");
    for child in [&mut relay, &mut card] {
        child.kill().unwrap();
        child.wait().unwrap();
    }
    orderer.stop().await;
}
