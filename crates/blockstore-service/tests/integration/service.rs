//! The block-store service following a real committer (itself following a real orderer serving Fabric 2.5.16's
//! fixture ledger) over gRPC on loopback: it stores the committer's chain and answers block, transaction and Deliver
//! queries.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use crate::support::*;
use ferrofabric_blockstore_service::BlockstoreConfig;
use ferrofabric_protos::ferrofabric::blockstore::block_store_client::BlockStoreClient;
use ferrofabric_protos::ferrofabric::blockstore::{
    BlockByHashRequest, BlockByNumberRequest, ChainInfoRequest, TransactionByIdRequest,
};
use ferrofabric_testkit::fabric_fixture;
use prost::Message;

fn blockstore_config(data: &std::path::Path, committer: &str) -> BlockstoreConfig {
    BlockstoreConfig {
        channel: "mychannel".into(),
        data_dir: Some(data.to_path_buf()),
        local_msp_dir: Some(user1_msp(2)),
        local_msp_id: Some("Org2MSP".into()),
        committers: vec![committer.to_string()],
        listen_address: "127.0.0.1:0".into(),
        ..BlockstoreConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_the_committers_chain_and_serves_blocks_transactions_and_deliver() {
    let (orderer_blocks, peer_blocks) = fixture_ledger();
    let mut orderer = TestOrderer::start(&orderer_blocks).await;
    let cdata = tempfile::tempdir().unwrap();
    let committer =
        ferrofabric_committer::start(committer_config(cdata.path(), vec![orderer.addr.clone()])).await.unwrap();
    let bdata = tempfile::tempdir().unwrap();
    let bs =
        ferrofabric_blockstore_service::start(blockstore_config(bdata.path(), &committer.deliver_addr.to_string()))
            .await
            .unwrap();
    let addr = bs.listen_addr.to_string();
    tokio::time::timeout(Duration::from_secs(120), bs.store.wait_for(28)).await.unwrap().unwrap();

    // The chain: the committer's blocks, i.e. Fabric's peer bytes.
    let stored: Vec<_> = bs.store.blocks(..).map(|b| b.unwrap()).collect();
    assert_eq!(stored, peer_blocks);

    let mut client = BlockStoreClient::connect(format!("http://{addr}")).await.unwrap();
    let info = client.get_chain_info(ChainInfoRequest {}).await.unwrap().into_inner();
    assert_eq!(info.height, 29);
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fabric_fixture("expected.json")).unwrap()).unwrap();
    assert_eq!(hex::encode(&info.current_block_hash), expected["blocks"][28]["header_hash"].as_str().unwrap());
    assert_eq!(hex::encode(&info.previous_block_hash), expected["blocks"][28]["previous_hash"].as_str().unwrap());

    let b7 = client.get_block_by_number(BlockByNumberRequest { number: 7 }).await.unwrap().into_inner();
    assert_eq!(b7.encode_to_vec(), peer_blocks[7].to_vec());
    let missing = client.get_block_by_number(BlockByNumberRequest { number: 29 }).await.unwrap_err();
    assert_eq!(missing.code(), tonic::Code::NotFound);
    // By the header hash Fabric's peer recorded for block 7.
    let hash = hex::decode(expected["blocks"][7]["header_hash"].as_str().unwrap()).unwrap();
    let by_hash = client.get_block_by_hash(BlockByHashRequest { hash: hash.into() }).await.unwrap().into_inner();
    assert_eq!(by_hash.encode_to_vec(), peer_blocks[7].to_vec());
    let unknown = client.get_block_by_hash(BlockByHashRequest { hash: vec![7u8; 32].into() }).await.unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);

    // Block 18 holds the same envelope twice: the first is VALID, the second DUPLICATE_TXID; lookups return the
    // first occurrence, as Fabric's txid index does.
    let tx = &expected["blocks"][18]["txs"][0];
    let txid = tx["txid"].as_str().unwrap().to_string();
    let p = client.get_transaction_by_id(TransactionByIdRequest { tx_id: txid.clone() }).await.unwrap().into_inner();
    assert_eq!(p.validation_code, 0);
    let env = p.transaction_envelope.unwrap().encode_to_vec();
    assert_eq!(hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&env)), tx["envelope_sha256"].as_str().unwrap());
    let b = client.get_block_by_tx_id(TransactionByIdRequest { tx_id: txid }).await.unwrap().into_inner();
    assert_eq!(b.header.unwrap().number, 18);
    // An MVCC conflict keeps its code.
    for (n, block) in expected["blocks"].as_array().unwrap().iter().enumerate() {
        for t in block["txs"].as_array().unwrap() {
            if t["validation_code"] == "MVCC_READ_CONFLICT" {
                let id = t["txid"].as_str().unwrap().to_string();
                let p = client.get_transaction_by_id(TransactionByIdRequest { tx_id: id }).await.unwrap().into_inner();
                assert_eq!(p.validation_code, 11, "block {n}");
            }
        }
    }
    let unknown = client.get_transaction_by_id(TransactionByIdRequest { tx_id: "nope".into() }).await.unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    let empty = client.get_transaction_by_id(TransactionByIdRequest { tx_id: String::new() }).await.unwrap_err();
    assert_eq!(empty.code(), tonic::Code::InvalidArgument);

    // Deliver of historical blocks, with the channel's ACL: a reader gets them, the orderer's identity does not.
    let (blocks, status) = peer_deliver(&addr, &user1(1), 0, 28).await;
    assert_eq!(status, SUCCESS);
    assert_eq!(blocks, peer_blocks);
    let (filtered, status) = peer_deliver_filtered(&addr, &user1(1), 22, 22).await;
    assert_eq!(status, SUCCESS);
    assert_eq!(filtered[0].filtered_transactions.len() as u64, expected["blocks"][22]["tx_count"].as_u64().unwrap());
    let (_, status) = peer_deliver(&addr, &orderer_identity(), 0, 0).await;
    assert_eq!(status, Some(ferrofabric_protos::common::Status::Forbidden as i32));

    bs.shutdown().await.unwrap();
    committer.shutdown().await.unwrap();
    orderer.stop().await;
}
