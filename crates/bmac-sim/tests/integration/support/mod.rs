//! Shared test helpers: those of the protocol's tests (crates/bmac: fixtures, testkit ledgers), and the
//! co-simulated card's configuration and fixture run.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

#[path = "../../../../bmac/tests/integration/support/mod.rs"]
mod shared;

pub(crate) use shared::*;

use bytes::Bytes;
use ferrofabric_bmac::{BlockPath, BlockProcessor, CardProcessor, SoftwareProcessor};
use ferrofabric_bmac_sim::available_sim_configs;

/// Whether the Verilator backend must be there (`FERROFABRIC_REQUIRE_VERILATOR=1`).
pub(crate) fn required() -> bool {
    std::env::var("FERROFABRIC_REQUIRE_VERILATOR").is_ok_and(|v| v == "1")
}

/// The configuration to test: `FERROFABRIC_HW_TEST_CONFIG` (e.g. `8x2`) or the first one built.
pub(crate) fn config() -> Option<(u32, u32)> {
    let built = available_sim_configs();
    if let Ok(want) = std::env::var("FERROFABRIC_HW_TEST_CONFIG") {
        let (n, m) = want.split_once('x').expect("FERROFABRIC_HW_TEST_CONFIG is NxM");
        let c = (n.parse().unwrap(), m.parse().unwrap());
        assert!(built.contains(&c), "configuration {want} is not built: {built:?}");
        return Some(c);
    }
    match built.first() {
        Some(c) => Some(*c),
        None => {
            assert!(!required(), "FERROFABRIC_REQUIRE_VERILATOR=1 but the Verilator backend was not built");
            eprintln!(
                "SKIPPED: the Verilator backend of ferrofabric-bmac-sim is not built (no verilator at build time)"
            );
            None
        }
    }
}

/// Commits the fixture ledger's blocks 1–8 through `hw` beside the software validator and checks every code and
/// commit hash; returns how many blocks ran on the card, and the software validator at the same height. Blocks 1–6
/// are `_lifecycle` blocks (host path, their writes synced to the card), 7 and 8 run on the card. (The whole ledger
/// goes through the card in the equivalence suite, cosim.rs.)
pub(crate) fn fixture_through(hw: &mut CardProcessor, blocks: &[Bytes]) -> (usize, SoftwareProcessor) {
    let mut sw = SoftwareProcessor::new(blocks[0].clone()).unwrap();
    let mut on_card = 0;
    for raw in &blocks[1..=8] {
        let want = sw.process(raw.clone()).unwrap();
        let got = hw.commit(raw.clone()).unwrap();
        assert_eq!(hw.card_off(), None, "block {}", want.number);
        assert_eq!((&got.result.codes, got.result.commit_hash), (&want.codes, want.commit_hash), "{}", want.number);
        on_card += usize::from(got.path == BlockPath::Hardware);
    }
    (on_card, sw)
}
