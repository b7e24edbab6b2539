//! The RTL's reference model ([`ferrofabric_hw::Model`]) against the software validator: the design (host plans,
//! protocol, hardware rules) gives Fabric's TRANSACTIONS_FILTER on the real fixture ledger.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support::*;
use ferrofabric_hw::{HostSession, Model, Route};

#[test]
fn model_matches_the_validator_on_the_fixture_ledger() {
    let blocks = fixture_blocks();
    let mut host = HostSession::new(blocks[0].clone()).unwrap();
    let mut model = Model::new();
    let mut hw_txs = 0;
    for raw in &blocks[1..] {
        let p = host.prepare(raw).unwrap();
        let hw = match &p.route {
            Route::Hardware(sections) => {
                let mut out = None;
                for s in sections {
                    if let Some(b) = model.feed(s).unwrap() {
                        out = Some(b);
                    }
                }
                Some(out.expect("a block result after the last tx"))
            }
            Route::Host(_) => None,
        };
        let (sw, sync) = host.commit(raw.clone(), hw.is_none()).unwrap();
        for s in &sync {
            model.feed(s).unwrap();
        }
        if let Some(hw) = hw {
            assert!(hw.block_valid, "block {}", p.number);
            assert_eq!(hw.codes, sw.transactions_filter(), "block {}", p.number);
            hw_txs += hw.codes.len();
        }
    }
    assert!(hw_txs >= 700, "{hw_txs}");
}

/// Runs a ledger through the host and the model, returning (hardware-path blocks, txs checked).
fn model_vs_validator(genesis: bytes::Bytes, blocks: &[bytes::Bytes]) -> (usize, usize) {
    let mut host = HostSession::new(genesis).unwrap();
    let mut model = Model::new();
    let (mut hw_blocks, mut hw_txs) = (0, 0);
    for raw in blocks {
        let p = host.prepare(raw).unwrap();
        let hw = match &p.route {
            Route::Hardware(sections) => {
                let mut out = None;
                for s in sections {
                    if let Some(b) = model.feed(s).unwrap() {
                        out = Some(b);
                    }
                }
                Some(out.unwrap())
            }
            Route::Host(why) => {
                eprintln!("block {} host path: {why}", p.number);
                None
            }
        };
        let (sw, sync) = host.commit(raw.clone(), hw.is_none()).unwrap();
        for s in &sync {
            model.feed(s).unwrap();
        }
        if let Some(hw) = hw {
            eprintln!("block {}: {:?}", p.number, hw.codes);
            assert!(hw.block_valid);
            assert_eq!(hw.codes, sw.transactions_filter(), "block {}", p.number);
            hw_blocks += 1;
            hw_txs += hw.codes.len();
        }
    }
    (hw_blocks, hw_txs)
}

#[test]
fn model_matches_the_validator_on_the_mixed_defects_ledger() {
    let l = ledgers::mixed_ledger();
    let (hw_blocks, _) = model_vs_validator(l.genesis.clone(), &l.blocks);
    assert_eq!(hw_blocks, 4, "blocks 3-6 take the hardware path");
}

#[test]
fn model_matches_the_validator_on_random_conflicting_transfers() {
    let l = ledgers::random_ledger(5, 24, 4, 30);
    let (hw_blocks, hw_txs) = model_vs_validator(l.genesis.clone(), &l.blocks);
    assert_eq!((hw_blocks, hw_txs), (5, 3 + 120));
}
