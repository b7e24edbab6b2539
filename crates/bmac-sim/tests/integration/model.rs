//! The RTL's reference model ([`ferrofabric_bmac_sim::Model`]) against the software validator: the design (host plans,
//! protocol, hardware rules) gives Fabric's TRANSACTIONS_FILTER on the real fixture ledger.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support::*;
use ferrofabric_bmac::{HostSession, Route};
use ferrofabric_bmac_sim::Model;

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

/// More chaincode policies than the card's table holds (31 ids, one of them BlockValidation's): when it is full, the
/// host clears it between blocks and reloads what the next block needs, with the flush flag on the first
/// `POLICY_SYNC`, and every chaincode block still runs on the card with Fabric's codes.
#[test]
fn a_full_policy_table_is_flushed_between_blocks_and_reloaded() {
    use ferrofabric_bmac::wire::{SectionType, POLICY_FLUSH};
    use ferrofabric_protos::peer::{application_policy, ApplicationPolicy};
    use ferrofabric_testkit::{define_chaincode, Chain, TxBuilder};
    use prost::Message;

    let net = ledgers::network();
    let mut chain = Chain::with_seed(net, 77).unwrap();
    let roles = ["member", "peer", "admin", "client", "orderer"];
    let mut names = Vec::new();
    let pairs = roles.iter().flat_map(|a| roles.iter().map(move |b| (a, b)));
    let rules = pairs.flat_map(|(r1, r2)| ["OR", "AND"].map(|g| format!("{g}('Org1MSP.{r1}', 'Org2MSP.{r2}')")));
    for (i, rule) in rules.enumerate().take(36) {
        let env = ferrofabric_configtxgen::signature_policy(&rule).unwrap();
        let policy = ApplicationPolicy { r#type: Some(application_policy::Type::SignaturePolicy(env)) };
        let name = format!("cc{i}");
        chain.append(&[define_chaincode(net, &name, 1, policy).unwrap().envelope]);
        names.push(name);
    }
    for name in &names {
        let envs: Vec<_> = (0..2)
            .map(|t| {
                TxBuilder::new(net).chaincode(name, "1.0").write(name, &format!("k{t}"), "v").build().unwrap().envelope
            })
            .collect();
        chain.append(&envs);
    }
    let blocks: Vec<bytes::Bytes> = chain.into_blocks().iter().map(|b| bytes::Bytes::from(b.encode_to_vec())).collect();
    let mut host = HostSession::new(blocks[0].clone()).unwrap();
    let mut model = Model::new();
    let (mut hw_blocks, mut flushes, mut valid) = (0, 0, 0);
    for raw in &blocks[1..] {
        let p = host.prepare(raw).unwrap();
        let hw = match &p.route {
            Route::Hardware(sections) => {
                flushes += sections
                    .iter()
                    .filter(|s| s.header.section_type == SectionType::PolicySync && s.info[0] & POLICY_FLUSH != 0)
                    .count();
                let mut out = None;
                for s in sections {
                    out = model.feed(s).unwrap().or(out);
                }
                Some(out.unwrap())
            }
            Route::Host(_) => None,
        };
        let (sw, sync) = host.commit(raw.clone(), hw.is_none()).unwrap();
        for s in &sync {
            model.feed(s).unwrap();
        }
        if let Some(hw) = hw {
            assert_eq!(hw.codes, sw.transactions_filter(), "block {}", p.number);
            hw_blocks += 1;
            valid += hw.codes.iter().filter(|c| **c == 0).count();
        }
    }
    assert_eq!(hw_blocks, names.len(), "every chaincode block runs on the card");
    assert_eq!(flushes, 1, "36 policies and BlockValidation's fill the 31 ids once");
    assert!(valid > 0 && valid < 2 * names.len(), "{valid} valid");
}
