//! `filtered_block` on blocks validated by the real validator: chaincode events (without payloads) and the
//! validation codes of valid and MVCC-conflicting transactions, as `DeliverFiltered` reports them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use ferrofabric_committer::with_peer_metadata;
use ferrofabric_deliver::filtered_block;
use ferrofabric_protos::common::HeaderType;
use ferrofabric_protos::peer::filtered_transaction::Data;
use ferrofabric_protos::peer::TxValidationCode;
use ferrofabric_testkit::{Chain, Network, Workload};
use ferrofabric_validator::{Validator, ValidatorOptions};
use prost::Message;

#[test]
fn filtered_blocks_carry_codes_and_chaincode_events_without_payloads() {
    let net = Network::generate(11).unwrap();
    let define = Workload::new(&net, 1).define_chaincode("transfer").unwrap();
    let w = Workload::new(&net, 2).definition_version((1, 0));
    let first = w.builder("transfer").read("transfer", "a", None).write("transfer", "a", "1");
    let first = first.chaincode_event("moved", b"secret payload").build().unwrap();
    // Read "a" as absent too, but "a" is written by the first transaction of the same block: MVCC conflict.
    let second = w.builder("transfer").read("transfer", "a", None).write("transfer", "a", "2").build().unwrap();

    let mut chain = Chain::new(&net).unwrap();
    chain.append(&[define.envelope]);
    chain.append(&[first.envelope.clone(), second.envelope.clone()]);
    let blocks: Vec<Bytes> = chain.blocks().iter().map(|b| Bytes::from(b.encode_to_vec())).collect();

    let mut v = Validator::new(blocks[0].clone(), ValidatorOptions { threads: 2 }).unwrap();
    let r1 = v.commit_block(blocks[1].clone()).unwrap();
    assert_eq!(r1.codes, vec![TxValidationCode::Valid]);
    let r2 = v.commit_block(blocks[2].clone()).unwrap();
    assert_eq!(r2.codes, vec![TxValidationCode::Valid, TxValidationCode::MvccReadConflict]);

    let stored = with_peer_metadata(&blocks[2], &r2.transactions_filter(), r2.commit_hash.as_ref()).unwrap();
    let f = filtered_block(&stored).unwrap();
    assert_eq!(f.number, 2);
    assert_eq!(f.channel_id, "mychannel");
    assert_eq!(f.filtered_transactions.len(), 2);

    let t0 = &f.filtered_transactions[0];
    assert_eq!(t0.txid, first.tx_id);
    assert_eq!(t0.r#type, HeaderType::EndorserTransaction as i32);
    assert_eq!(t0.tx_validation_code, TxValidationCode::Valid as i32);
    let Some(Data::TransactionActions(actions)) = &t0.data else { panic!("no actions") };
    assert_eq!(actions.chaincode_actions.len(), 1);
    let event = actions.chaincode_actions[0].chaincode_event.as_ref().unwrap();
    assert_eq!(event.chaincode_id, "transfer");
    assert_eq!(event.event_name, "moved");
    assert_eq!(event.tx_id, first.tx_id);
    assert!(event.payload.is_empty(), "filtered events carry no payload");

    let t1 = &f.filtered_transactions[1];
    assert_eq!(t1.txid, second.tx_id);
    assert_eq!(t1.tx_validation_code, TxValidationCode::MvccReadConflict as i32);
    let Some(Data::TransactionActions(actions)) = &t1.data else { panic!("no actions") };
    assert!(actions.chaincode_actions.is_empty(), "no event, no filtered action");

    // Garbage is an error, not a panic.
    assert!(filtered_block(&Bytes::from_static(b"\x0a\xff")).is_err());
}
