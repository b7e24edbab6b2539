//! `ferrofabric hw card`: the co-simulated BMac card as a process on the network. It says where it listens, answers
//! a host's HELLO with its configuration and serves its registers over UDP.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use ferrofabric_hw::{available_sim_configs, regs, UdpCard};

#[test]
fn hw_card_listens_on_udp_and_answers_a_host() {
    if !available_sim_configs().contains(&(8, 2)) {
        assert!(std::env::var("FERROFABRIC_REQUIRE_VERILATOR").as_deref() != Ok("1"), "the 8x2 card is not built");
        eprintln!("SKIPPED: the 8x2 BMac card is not built into this binary");
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferrofabric"))
        .args(["hw", "card", "--config", "8x2", "--listen", "127.0.0.1:0", "--seconds", "120"])
        .env("FERROFABRIC_LOG", "warn")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line
        .strip_prefix("hw card ready: listen=")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{line}"))
        .parse()
        .unwrap();
    let mut card = UdpCard::connect(addr, Duration::from_secs(30)).unwrap();
    assert_eq!(card.config(), (8, 2));
    assert_eq!(card.read_reg(regs::REG_STAT_BLOCKS).unwrap(), 0, "a card just reset has validated no block");
    child.kill().unwrap();
    child.wait().unwrap();
}
