//! Ordering at volume over TLS: 10,000 testkit transactions whose creators are the Fabric 2.5 fixture's client identities
//! (User1@org1 and User1@org2, signed with the fixture's kept keys), broadcast over TLS by four concurrent
//! clients to a node that joined the fixture's own `genesis.block` and signs with the fixture orderer's key,
//! and delivered back: every block passes the validator's block checks (hash chain, data hash, orderer
//! signature under /Channel/Orderer/BlockValidation) and every creator signature verifies under the fixture
//! MSPs, every transaction appears exactly once, and each client's transactions appear in the order that
//! client sent them.
//!
//! The fixture keeps no TLS key for its orderer, so the node serves TLS with a testkit certificate and is told
//! which consenter it is by the fixture's TLS certificate; the endorsements come from testkit peers (the
//! fixture keeps no peer keys), which the orderer does not check.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::time::Duration;

use crate::support::*;
use bytes::Bytes;
use ferrofabric_comm::{broadcast, connect, deliver, seek_envelope, seek_range, ClientTls, DeliverItem, TlsConfig};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::Status;
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use ferrofabric_testkit::fabric_fixture;
use ferrofabric_testkit::{Network, TxBuilder};
use ferrofabric_validator::{TxValidationCode, Validator, ValidatorOptions};
use futures::StreamExt;
use rayon::prelude::*;

const CLIENTS: usize = 4;
const PER_CLIENT: u64 = 2_500;
const TOTAL: usize = CLIENTS * PER_CLIENT as usize;

/// The fixture's `User1@org<org+1>` (keys kept in the fixture).
fn fixture_client(org: usize) -> SigningIdentity {
    let domain = format!("org{}.example.com", org + 1);
    let dir = fabric_fixture(format!("crypto/peerOrganizations/{domain}/users/User1@{domain}/msp"));
    SigningIdentity::from_msp_dir(&format!("Org{}MSP", org + 1), &dir).unwrap()
}

/// A transfer-shaped transaction (two reads, two 16-byte writes) created by `creator`.
fn transfer(net: &Network, creator: &SigningIdentity, client: usize, i: u64) -> (String, Bytes) {
    let (from, to) = (format!("c{client}-{}", 2 * i), format!("c{client}-{}", 2 * i + 1));
    let b = TxBuilder::new(net)
        .creator(creator)
        .chaincode("transfer", "1.0")
        .args([b"transfer".as_slice(), from.as_bytes(), to.as_bytes(), b"1"])
        .read("transfer", &from, None)
        .read("transfer", &to, None)
        .write("transfer", &from, format!("{:016}", 2 * i))
        .write("transfer", &to, format!("{:016}", 2 * i + 1))
        .build()
        .unwrap();
    (b.tx_id, b.envelope)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_tls_transactions_ordered_once_in_client_order_and_blocks_pass_validator_checks() {
    let (net, txs) = tokio::task::spawn_blocking(|| {
        let net = Network::generate(11).unwrap();
        let users = [fixture_client(0), fixture_client(1)];
        let txs: Vec<Vec<(String, Bytes)>> = (0..CLIENTS)
            .map(|c| (0..PER_CLIENT).into_par_iter().map(|i| transfer(&net, &users[c % 2], c, i)).collect())
            .collect();
        (net, txs)
    })
    .await
    .unwrap();
    let genesis = Bytes::from(std::fs::read(fabric_fixture("genesis.block")).unwrap());

    let crypto = tempfile::tempdir().unwrap();
    net.write_msp_dirs(crypto.path()).unwrap();
    let dirs = net_dirs(crypto.path());
    let data = tempfile::tempdir().unwrap();
    let mut config = loopback_config(data.path(), &fixture_orderer_msp(), "OrdererMSP");
    config.general.tls = TlsConfig {
        enabled: true,
        certificate: Some(dirs.orderer_tls.join("server.crt")),
        private_key: Some(dirs.orderer_tls.join("server.key")),
        ..TlsConfig::default()
    };
    // The fixture genesis names its etcdraft consenter by this TLS certificate: that is who this node is.
    config.general.cluster.client_certificate =
        Some(fabric_fixture("crypto/ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt"));
    let node = start_node(config).await;
    let r = join(node.admin_addr.unwrap(), &genesis).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));

    let tls = ClientTls {
        ca_pem: std::fs::read(dirs.orderer_tls.join("ca.crt")).unwrap(),
        server_name: "localhost".into(),
        identity: None,
    };
    let addr = node.grpc_addr.to_string();

    // A reader follows the chain from block 0 until every transaction has been seen.
    let reader = {
        let (addr, tls) = (addr.clone(), tls.clone());
        let user = fixture_client(0);
        let seek = seek_range(0, None, SeekBehavior::BlockUntilReady);
        let request = seek_envelope("mychannel", user.serialized(), |m| user.sign(m), &seek);
        tokio::spawn(async move {
            let ch = connect(&addr, Some(&tls)).await.unwrap();
            let mut stream =
                deliver(ch, futures::stream::iter(vec![request]).chain(futures::stream::pending())).await.unwrap();
            let mut blocks = Vec::new();
            let mut seen = 0usize;
            while seen < TOTAL + 1 {
                match stream.next().await.expect("deliver stream ended").unwrap() {
                    DeliverItem::Block(b) => {
                        seen += block_tx_ids(&b).len();
                        blocks.push(b);
                    }
                    DeliverItem::Status(s) => panic!("unexpected deliver status {s}"),
                }
            }
            blocks
        })
    };

    // Four clients, each on its own TLS connection and Broadcast stream.
    let mut senders = Vec::new();
    for client_txs in &txs {
        let envelopes: Vec<Bytes> = client_txs.iter().map(|(_, e)| e.clone()).collect();
        let (addr, tls) = (addr.clone(), tls.clone());
        senders.push(tokio::spawn(async move {
            let ch = connect(&addr, Some(&tls)).await.unwrap();
            let mut responses = broadcast(ch, futures::stream::iter(envelopes)).await.unwrap();
            let mut n = 0u64;
            while let Some(r) = responses.next().await {
                let r = r.unwrap();
                assert_eq!(r.status, Status::Success as i32, "broadcast rejected: {}", r.info);
                n += 1;
            }
            n
        }));
    }
    let all = async {
        for s in senders {
            assert_eq!(s.await.unwrap(), PER_CLIENT);
        }
        reader.await.unwrap()
    };
    let blocks = tokio::time::timeout(Duration::from_secs(300), all).await.expect("ordering timed out");
    node.shutdown().await;

    // Block 0 is the joined genesis block; every later block passes the validator's block checks.
    assert_eq!(blocks[0], genesis);
    let blocks_for_validator = blocks.clone();
    tokio::task::spawn_blocking(move || {
        let mut validator = Validator::new(blocks_for_validator[0].clone(), ValidatorOptions::default()).unwrap();
        for b in &blocks_for_validator[1..] {
            let result = validator.commit_block(b.clone()).unwrap();
            assert_eq!(result.codes.len(), block_tx_ids(b).len());
            // The creators' signatures, made with the fixture keys, verify under the fixture MSPs after ordering.
            assert!(result
                .codes
                .iter()
                .all(|c| *c != TxValidationCode::BadCreatorSignature && *c != TxValidationCode::BadPayload));
        }
    })
    .await
    .unwrap();

    // Exactly once, and in each client's order.
    let mut position = HashMap::new();
    let mut index = 0usize;
    for b in &blocks[1..] {
        let ids = block_tx_ids(b);
        assert!(ids.len() <= 100, "MaxMessageCount is 100");
        for id in ids {
            assert!(position.insert(id, index).is_none(), "a transaction was ordered twice");
            index += 1;
        }
    }
    assert_eq!(position.len(), TOTAL);
    for client_txs in &txs {
        let positions: Vec<usize> = client_txs.iter().map(|(id, _)| position[id]).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "a client's transactions were reordered");
    }
}
