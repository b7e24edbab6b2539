//! The byte-exactness proof of the built-in chaincodes: every `smallbank`, `transfer` and `_lifecycle` transaction of
//! the real Fabric 2.5.16 fixture ledger is simulated again against the world state of the block before it (the
//! ledger replayed with `ferrofabric-validator`), and the `ChaincodeAction` we build — read/write set, response,
//! chaincode ID and version — must be byte-identical to the one Fabric's peers endorsed; the proposal hash we compute
//! from the transaction's proposal must equal the endorsed one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_arena::{BlockArena, TxArena};
use ferrofabric_chaincode::{
    endorsement_info, AllowAll, Chaincode, Installed, Lifecycle, Registry, TxContext, ERROR_THRESHOLD, LIFECYCLE,
};
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::common::HeaderType;
use ferrofabric_protos::msp::SerializedIdentity;
use ferrofabric_protos::peer::{
    ChaincodeAction, ChaincodeId, ChaincodeInvocationSpec, ChaincodeProposalPayload, TxValidationCode,
};
use ferrofabric_protoutil::records;
use ferrofabric_state::StateView;
use ferrofabric_testkit::{fabric_fixtures_dir, fixture};
use ferrofabric_validator::{Validator, ValidatorOptions};
use prost::Message;
use sha2::{Digest, Sha256};

/// What one re-simulation compared.
#[derive(Default, Debug)]
struct Tally {
    by_chaincode: HashMap<String, usize>,
    duplicates_checked: usize,
}

/// Simulates `tx` (a transaction of the block following `view`'s state) as its first endorser's peer did and
/// returns our `ChaincodeAction` bytes.
fn resimulate(view: &StateView<'_>, config: &Arc<ChannelConfig>, registry: &Registry, tx: &TxArena) -> Bytes {
    let ch = tx.channel_header().unwrap();
    let sh = tx.signature_header().unwrap();
    let name = tx.header_extension().unwrap().chaincode_id.clone().unwrap().name;
    let act = tx.action().unwrap();
    let cpp = ChaincodeProposalPayload::decode(act.payload.chaincode_proposal_payload.clone()).unwrap();
    let cis = ChaincodeInvocationSpec::decode(cpp.input).unwrap();
    let args = cis.chaincode_spec.unwrap().input.unwrap().args;
    let endorsement = &act.payload.action.as_ref().unwrap().endorsements[0];
    let org = SerializedIdentity::decode(endorsement.endorser.clone()).unwrap().mspid;

    let acl = AllowAll;
    let mut ctx = TxContext::new(view, &ch.channel_id, &ch.tx_id, &name, sh.creator.clone(), &acl);
    let cc = registry.get(&name).cloned();
    let info = endorsement_info(&mut ctx, config, &org, &name, Installed::Builtin(cc.is_some()))
        .unwrap_or_else(|e| panic!("tx {}: endorsement info: {e}", ch.tx_id));
    let response = if name == LIFECYCLE {
        Lifecycle::new(&org, config.clone()).invoke(&mut ctx, &args)
    } else {
        cc.unwrap().invoke(&mut ctx, &args)
    };
    let sim = ctx.finish();
    let events = match (&sim.event, response.status < ERROR_THRESHOLD) {
        (Some(e), true) => Bytes::from(e.encode_to_vec()),
        _ => Bytes::new(),
    };
    let action = ChaincodeAction {
        results: sim.results,
        events,
        response: Some(response),
        chaincode_id: Some(ChaincodeId { name, version: info.version, path: String::new() }),
    };
    Bytes::from(action.encode_to_vec())
}

/// The endorsed `ProposalResponsePayload` must hash the transaction's proposal the way Fabric's endorser does:
/// SHA-256(channel header ‖ signature header ‖ chaincode proposal payload).
fn proposal_hash_matches(tx: &TxArena) -> bool {
    let (ch, sh) = tx.header_bytes().unwrap();
    let act = tx.action().unwrap();
    let mut h = Sha256::new();
    h.update(ch);
    h.update(sh);
    h.update(&act.payload.chaincode_proposal_payload);
    tx.response_payload().unwrap().proposal_hash.as_ref() == h.finalize().as_slice()
}

/// Replays `blocks` after `genesis` with the validator and checks every smallbank/transfer/_lifecycle transaction.
fn check_ledger(genesis: Bytes, blocks: impl IntoIterator<Item = Bytes>) -> Tally {
    let registry = Registry::builtin();
    let mut validator = Validator::new(genesis, ValidatorOptions { threads: 2 }).unwrap();
    let mut tally = Tally::default();
    // txid -> the endorsed ChaincodeAction bytes of its first occurrence in the ledger.
    let mut seen: HashMap<String, Bytes> = HashMap::new();
    for raw in blocks {
        let arena = BlockArena::decode(raw.clone()).unwrap();
        let config = validator.channel_config().clone();
        let state = validator.state().clone();
        // Simulate every candidate against the state of the previous block ...
        let ours: Vec<Option<Bytes>> = {
            let view = state.view();
            arena
                .txs()
                .iter()
                .map(|tx| {
                    let ch = tx.channel_header().ok()?;
                    if ch.r#type != HeaderType::EndorserTransaction as i32 {
                        return None;
                    }
                    let name = tx.header_extension().ok()?.chaincode_id.clone()?.name;
                    if !["smallbank", "transfer", LIFECYCLE].contains(&name.as_str()) {
                        return None;
                    }
                    tx.response_payload().ok()?;
                    Some(resimulate(&view, &config, &registry, tx))
                })
                .collect()
        };
        // ... then commit the block to learn the codes Fabric assigned.
        let result = validator.commit_block(raw).unwrap();
        for ((tx, ours), code) in arena.txs().iter().zip(ours).zip(result.codes) {
            let Some(ours) = ours else { continue };
            let ch = tx.channel_header().unwrap();
            let endorsed = tx.response_payload().unwrap().extension.clone();
            // The two crafted envelopes whose channel header was altered after endorsement are the only ones
            // whose endorsed hash no longer matches their proposal.
            let crafted = matches!(code, TxValidationCode::BadProposalTxid | TxValidationCode::BadCommonHeader);
            assert_eq!(proposal_hash_matches(tx), !crafted, "block {} tx {} ({code:?})", arena.number(), ch.tx_id);
            if code == TxValidationCode::DuplicateTxid {
                // A re-broadcast envelope: endorsed long before this block, so compare with its first occurrence.
                assert_eq!(seen.get(&ch.tx_id), Some(&endorsed), "duplicate {} differs from its original", ch.tx_id);
                tally.duplicates_checked += 1;
                continue;
            }
            if ours != endorsed {
                let a = ChaincodeAction::decode(ours.clone()).unwrap();
                let b = ChaincodeAction::decode(endorsed.clone()).unwrap();
                panic!(
                    "block {} tx {} ({code:?}): our ChaincodeAction differs from the endorsed one\nours:     {a:?}\nendorsed: {b:?}",
                    arena.number(),
                    ch.tx_id
                );
            }
            seen.entry(ch.tx_id.clone()).or_insert(endorsed);
            let name = tx.header_extension().unwrap().chaincode_id.clone().unwrap().name;
            *tally.by_chaincode.entry(name).or_default() += 1;
        }
    }
    tally
}

fn read_ledger(path: &std::path::Path) -> Vec<Bytes> {
    let file = Bytes::from(std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    records(file).map(|r| r.unwrap().1).collect()
}

#[test]
fn every_fixture_transaction_resimulates_to_the_endorsed_bytes() {
    let dir = fabric_fixtures_dir();
    let genesis = Bytes::from(std::fs::read(dir.join("genesis.block")).unwrap());
    let blocks = read_ledger(&dir.join("orderer-blocks.bin"));
    let tally = check_ledger(genesis, blocks.into_iter().skip(1));
    // Per the fixture README: 6 _lifecycle, 687 smallbank, 40 transfer transactions; of these one smallbank
    // envelope's payload is not a transaction and the two DUPLICATE_TXID ones were compared with their originals.
    assert_eq!(tally.by_chaincode.get(LIFECYCLE), Some(&6), "{tally:?}");
    assert_eq!(tally.by_chaincode.get("transfer"), Some(&40), "{tally:?}");
    assert_eq!(
        tally.by_chaincode.get("smallbank").copied().unwrap_or(0) + tally.duplicates_checked + 1,
        687,
        "{tally:?}"
    );
    assert_eq!(tally.duplicates_checked, 2, "{tally:?}");
}

/// The same over the 10,735-transaction benchmark ledger (the fixture ledger plus 10,000 smallbank transactions).
#[test]
fn every_bench_ledger_transaction_resimulates_to_the_endorsed_bytes() {
    let path = fixture("fabric-2.5-bench").join("fabric-2.5-smallbank-10k.bin.zst");
    let file = ferrofabric_protoutil::read_ledger_file(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut blocks = records(file).map(|r| r.unwrap().1);
    let genesis = blocks.next().unwrap();
    let tally = check_ledger(genesis, blocks);
    assert_eq!(tally.by_chaincode.get(LIFECYCLE), Some(&6), "{tally:?}");
    assert_eq!(tally.by_chaincode.get("transfer"), Some(&40), "{tally:?}");
    assert_eq!(tally.by_chaincode.get("smallbank"), Some(&(684 + 10_000)), "{tally:?}");
}
