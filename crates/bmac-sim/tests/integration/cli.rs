//! `ferrofabric hw validate` (ferrofabric_bmac_sim::validate_ledger) on a small testkit ledger written to disk: the
//! report has `ledger replay`'s fields plus per-block `cycles`, `path` and the top-level `tx_per_s_at_250mhz`, and its
//! codes are the software validator's.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support::ledgers;

use ferrofabric_bmac::{BlockProcessor, SoftwareProcessor};
use ferrofabric_bmac_sim::{available_sim_configs, parse_card_config, validate_ledger, ValidateOptions};

#[test]
fn config_argument_is_n_by_m() {
    assert_eq!(parse_card_config("8x2").unwrap(), (8, 2));
    assert_eq!(parse_card_config("16x2").unwrap(), (16, 2));
    assert!(parse_card_config("8").is_err());
    assert!(parse_card_config("0x2").is_err());
    assert!(parse_card_config("ax2").is_err());
}

#[test]
fn hw_validate_writes_the_replay_report_with_cycles() {
    let Some(&(n, m)) = available_sim_configs().first() else {
        assert!(
            std::env::var("FERROFABRIC_REQUIRE_VERILATOR").map_or(true, |v| v != "1"),
            "FERROFABRIC_REQUIRE_VERILATOR=1 but the Verilator backend was not built"
        );
        eprintln!("SKIPPED: the Verilator backend of ferrofabric-bmac-sim is not built");
        return;
    };
    let l = ledgers::mixed_ledger();
    let dir = tempfile::tempdir().unwrap();
    let genesis = dir.path().join("genesis.block");
    let blocks = dir.path().join("blocks.bin");
    let report = dir.path().join("report.json");
    std::fs::write(&genesis, &l.genesis).unwrap();
    let mut all = vec![l.genesis.as_ref()];
    all.extend(l.blocks.iter().map(|b| b.as_ref()));
    std::fs::write(&blocks, ferrofabric_protoutil::encode_records(all)).unwrap();
    let args = ValidateOptions { genesis, blocks, report: report.clone(), config: format!("{n}x{m}"), quiet: true };
    validate_ledger(&args).unwrap();
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let blocks = r["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 1 + l.blocks.len());
    assert_eq!(blocks[0]["path"], "genesis");
    let mut sw = SoftwareProcessor::new(l.genesis.clone()).unwrap();
    for (b, raw) in blocks[1..].iter().zip(&l.blocks) {
        let want = sw.process(raw.clone()).unwrap();
        let codes: Vec<&str> = b["validation_codes"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        let want_codes: Vec<&str> = want.codes.iter().map(|c| c.as_str_name()).collect();
        assert_eq!(codes, want_codes, "block {}", b["number"]);
        assert_eq!(b["commit_hash"].as_str(), want.commit_hash.map(hex::encode).as_deref());
        let hardware = b["path"] == "hardware";
        assert_eq!(b["cycles"].is_u64(), hardware, "cycles only for hardware-path blocks");
    }
    assert_eq!(r["hardware_blocks"], 4);
    assert_eq!(r["host_blocks"], 2);
    assert!(r["tx_per_s_at_250mhz"].as_f64().unwrap() > 1000.0);
    assert_eq!(r["transactions"], 2 + 6 + 17 + 8 + 6);
    for field in ["seconds", "tx_per_s", "config", "card"] {
        assert!(r.get(field).is_some(), "{field}");
    }
}
