//! Workload generators: byte-level agreement with the fixture's smallbank
//! transactions, and a generated transfer ledger that is valid end to end
//! (signatures, policies, MVCC versions).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;

use crate::support::*;
use bytes::Bytes;
use ferrofabric_channelconfig::{ChannelConfig, SignatureSet, SignedData};
use ferrofabric_protos::common::{ChannelHeader, Envelope, Payload, SignatureHeader};
use ferrofabric_protos::kvrwset::KvrwSet;
use ferrofabric_protos::peer::{
    ChaincodeAction, ChaincodeActionPayload, ChaincodeInvocationSpec, ChaincodeProposalPayload,
    ProposalResponsePayload, Transaction,
};
use ferrofabric_protos::rwset::TxReadWriteSet;
use ferrofabric_protoutil::block_header_hash;
use ferrofabric_protoutil::compute_txid;
use ferrofabric_testkit::{block_data_hash, transfer_ledger, SmallbankAccount, Workload};
use prost::Message;

struct Tx {
    ch: ChannelHeader,
    sh: SignatureHeader,
    envelope: Envelope,
    args: Vec<Bytes>,
    prp: Bytes,
    endorsements: Vec<(Bytes, Bytes)>,
    action: ChaincodeAction,
}

fn decode(env: &Bytes) -> Tx {
    let envelope = Envelope::decode(env.clone()).unwrap();
    let payload = Payload::decode(envelope.payload.clone()).unwrap();
    let h = payload.header.unwrap();
    let tx = Transaction::decode(payload.data).unwrap();
    let cap = ChaincodeActionPayload::decode(tx.actions[0].payload.clone()).unwrap();
    let cpp = ChaincodeProposalPayload::decode(cap.chaincode_proposal_payload).unwrap();
    let cis = ChaincodeInvocationSpec::decode(cpp.input).unwrap();
    let ea = cap.action.unwrap();
    let prp = ProposalResponsePayload::decode(ea.proposal_response_payload.clone()).unwrap();
    Tx {
        ch: ChannelHeader::decode(h.channel_header).unwrap(),
        sh: SignatureHeader::decode(h.signature_header).unwrap(),
        envelope,
        args: cis.chaincode_spec.unwrap().input.unwrap().args,
        prp: ea.proposal_response_payload.clone(),
        endorsements: ea.endorsements.into_iter().map(|e| (e.endorser, e.signature)).collect(),
        action: ChaincodeAction::decode(prp.extension).unwrap(),
    }
}

fn fixture_tx(block: usize, index: usize) -> Tx {
    decode(&fixture_blocks()[block].data.as_ref().unwrap().data[index])
}

/// Fixture block 9 tx 0 is `create_account 0 cust0 1000 5000`; block 16 tx 0
/// is `send_payment 5 20 7` (account 20 checking 1031 → 1036 at 15:67,
/// account 7 checking 1007 → 1002 at 15:87). Our workload produces the same
/// invocation args and the same endorsed ChaincodeAction bytes.
#[test]
fn smallbank_transactions_match_fixture_bytes() {
    let net = network();
    let w = Workload::new(net, 9).definition_version((3, 0));

    let fixture = fixture_tx(9, 0);
    let ours = decode(
        &w.smallbank_create_account(&SmallbankAccount { id: 0, savings: 5000, checking: 1000 }).unwrap().envelope,
    );
    assert_eq!(ours.args, fixture.args);
    assert_eq!(ours.action.encode_to_vec(), fixture.action.encode_to_vec());

    let fixture = fixture_tx(16, 0);
    let dest = SmallbankAccount { id: 20, savings: 5020, checking: 1031 };
    let source = SmallbankAccount { id: 7, savings: 21, checking: 1007 };
    let ours = decode(&w.smallbank_send_payment(5, &dest, &source, [Some((15, 67)), Some((15, 87))]).unwrap().envelope);
    assert_eq!(ours.args, fixture.args);
    assert_eq!(ours.action.encode_to_vec(), fixture.action.encode_to_vec());
}

/// Fixture block 21 carries `transfer k000 k001 7`-style transactions:
/// two reads, two writes, plus the `_lifecycle` definition read.
#[test]
fn transfer_tx_has_fastfabric_shape() {
    let net = network();
    let w = Workload::new(net, 4).definition_version((6, 0));
    let t = decode(&w.transfer_tx("k000", "k001", [Some((20, 0)), None], 10).unwrap().envelope);
    assert_eq!(t.args, ["transfer", "k000", "k001", "1"].map(|a| Bytes::from(a.as_bytes().to_vec())));
    let rws = TxReadWriteSet::decode(t.action.results.clone()).unwrap();
    let names: Vec<_> = rws.ns_rwset.iter().map(|n| n.namespace.as_str()).collect();
    assert_eq!(names, ["_lifecycle", "transfer"]);
    let lc = KvrwSet::decode(rws.ns_rwset[0].rwset.clone()).unwrap();
    assert_eq!(lc.reads[0].key, "namespaces/fields/transfer/Sequence");
    assert_eq!(lc.reads[0].version.map(|v| (v.block_num, v.tx_num)), Some((6, 0)));
    let kv = KvrwSet::decode(rws.ns_rwset[1].rwset.clone()).unwrap();
    assert_eq!(kv.reads.len(), 2);
    assert_eq!(kv.reads[1].version, None);
    assert_eq!(kv.writes.len(), 2);
    assert!(kv.writes.iter().all(|w| w.value.len() == 10 && !w.is_delete));
    assert_eq!(t.action.chaincode_id.unwrap().version, "1.0");
}

#[test]
fn workload_is_deterministic_and_parallel_order_is_stable() {
    let net = network();
    let a = Workload::new(net, 11).transfer_txs(64, 8, |k| Some((2, k))).unwrap();
    let b = Workload::new(net, 11).transfer_txs(64, 8, |k| Some((2, k))).unwrap();
    let c = Workload::new(net, 12).transfer_txs(64, 8, |k| Some((2, k))).unwrap();
    assert_eq!(a.iter().map(|x| &x.envelope).collect::<Vec<_>>(), b.iter().map(|x| &x.envelope).collect::<Vec<_>>());
    assert_ne!(a[0].envelope, c[0].envelope);
    let mut ids: Vec<_> = a.iter().map(|x| x.tx_id.clone()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 64, "tx ids must be unique");
    for (i, t) in a.iter().enumerate() {
        let kv = TxReadWriteSet::decode(decode(&t.envelope).action.results).unwrap();
        let kv = KvrwSet::decode(kv.ns_rwset[0].rwset.clone()).unwrap();
        assert_eq!(kv.reads[0].key, ferrofabric_testkit::transfer_key(2 * i as u64));
        assert_eq!(kv.reads[1].version.unwrap().tx_num, 2 * i as u64 + 1);
    }
}

/// Replays a generated ledger the way a committing peer would: block
/// chaining, data hashes, orderer signature, txid, creator and endorsement
/// policies, and MVCC (every read version equals the version of the key's
/// last committed write). All transactions must come out VALID.
#[test]
fn transfer_ledger_is_valid_end_to_end() {
    let net = network();
    let blocks = transfer_ledger(net, 5, 250, 100, 32).unwrap();
    // genesis, definition, 1 init block (500 keys in 1 tx), 3 transfer blocks.
    assert_eq!(blocks.len(), 6);
    let again = transfer_ledger(net, 5, 250, 100, 32).unwrap();
    assert_eq!(blocks, again, "deterministic per seed");

    let cfg = ChannelConfig::from_config_block(&blocks[0]).unwrap();
    let msps = cfg.msp_manager();
    let mut state: HashMap<(String, String), (u64, u64)> = HashMap::new();
    let mut txs = 0;
    for (n, block) in blocks.iter().enumerate().skip(1) {
        let h = block.header.as_ref().unwrap();
        assert_eq!(h.number, n as u64);
        assert_eq!(h.previous_hash.as_ref(), block_header_hash(blocks[n - 1].header.as_ref().unwrap()).as_slice());
        let data = &block.data.as_ref().unwrap().data;
        assert_eq!(h.data_hash.as_ref(), block_data_hash(data).as_slice());
        for (i, env) in data.iter().enumerate() {
            let t = decode(env);
            assert_eq!(t.ch.tx_id, compute_txid(&t.sh.nonce, &t.sh.creator));
            let creator = SignedData {
                data: t.envelope.payload.clone(),
                identity: t.sh.creator.clone(),
                signature: t.envelope.signature.clone(),
            };
            let writers = cfg.policy("/Channel/Application/Writers").unwrap();
            writers.evaluate(&SignatureSet::new(vec![creator], msps)).unwrap();
            let items = t
                .endorsements
                .iter()
                .map(|(endorser, sig)| SignedData {
                    data: Bytes::from([t.prp.as_ref(), endorser.as_ref()].concat()),
                    identity: endorser.clone(),
                    signature: sig.clone(),
                })
                .collect();
            let cc = t.action.chaincode_id.as_ref().unwrap().name.clone();
            let path = if cc == "_lifecycle" {
                "/Channel/Application/LifecycleEndorsement"
            } else {
                "/Channel/Application/Endorsement"
            };
            cfg.policy(path).unwrap().evaluate(&SignatureSet::new(items, msps)).unwrap();

            let rws = TxReadWriteSet::decode(t.action.results.clone()).unwrap();
            for ns in &rws.ns_rwset {
                let kv = KvrwSet::decode(ns.rwset.clone()).unwrap();
                for r in &kv.reads {
                    let committed = state.get(&(ns.namespace.clone(), r.key.clone())).copied();
                    assert_eq!(
                        r.version.map(|v| (v.block_num, v.tx_num)),
                        committed,
                        "block {n} tx {i}: read {}/{}",
                        ns.namespace,
                        r.key
                    );
                }
                for w in &kv.writes {
                    state.insert((ns.namespace.clone(), w.key.clone()), (n as u64, i as u64));
                }
            }
            txs += 1;
        }
    }
    assert_eq!(txs, 1 + 1 + 250);
    assert_eq!(state.len(), 5 + 500);
}

#[test]
fn bad_sizes_are_errors_not_panics() {
    let net = network();
    assert!(transfer_ledger(net, 1, 10, 0, 8).is_err());
    assert!(Workload::new(net, 1).transfer_init_txs(10, 0, 8).is_err());
}
