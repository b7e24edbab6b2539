//! The committer against a real Ferrofabric orderer over gRPC on loopback, with Fabric 2.5.16's own ledger: what it
//! stores, what its peer Deliver service answers, fail-over between orderers, and restart.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use crate::support::*;
use bytes::Bytes;
use ferrofabric_committer::{start, Checkpoint, RunningCommitter};
use ferrofabric_deliver::seek_envelope;
use ferrofabric_protos::common::{Block, Metadata, Status};
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use ferrofabric_protos::peer::deliver_client::DeliverClient;
use ferrofabric_protos::peer::deliver_response::Type as PeerResponse;
use ferrofabric_testkit::fabric_fixture;
use prost::Message;

async fn committer(data: &std::path::Path, orderers: Vec<String>) -> RunningCommitter {
    tokio::time::timeout(Duration::from_secs(120), start(committer_config(data, orderers))).await.unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_fabric_peer_bytes_and_reaches_fabric_peer_state() {
    let (orderer_blocks, peer_blocks) = fixture_ledger();
    let mut orderer = TestOrderer::start(&orderer_blocks).await;
    let data = tempfile::tempdir().unwrap();
    let c = committer(data.path(), vec![orderer.addr.clone()]).await;
    wait_height(&c, 29).await;

    let stored = stored_chain(&c);
    assert_eq!(stored.len(), peer_blocks.len());
    for (n, (ours, fabric)) in stored.iter().zip(&peer_blocks).enumerate() {
        assert!(ours == fabric, "block {n} differs from the bytes Fabric's peer stored");
    }
    let last_hash = c.status().borrow().commit_hash.unwrap();
    c.shutdown().await.unwrap();
    orderer.stop().await;

    // The shutdown checkpoint holds the final state: compare it with Fabric's state database.
    let cp = Checkpoint::read(data.path()).unwrap().expect("final checkpoint");
    assert_eq!(cp.number, 28);
    assert_eq!(cp.commit_hash, Some(last_hash));
    let ours: BTreeMap<(String, String), (String, String)> = cp
        .entries
        .iter()
        .filter(|(k, _)| k.namespace == "smallbank" || k.namespace == "transfer")
        .map(|(k, v)| {
            (
                (k.namespace.clone(), String::from_utf8(k.key.to_vec()).unwrap()),
                (String::from_utf8(v.value.to_vec()).unwrap(), v.version.to_string()),
            )
        })
        .collect();
    let fabric: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(fabric_fixture("state.json")).unwrap()).unwrap();
    let fabric: BTreeMap<(String, String), (String, String)> = fabric
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap().to_string();
            ((s("namespace"), s("key")), (s("value"), s("version")))
        })
        .collect();
    assert_eq!(ours.len(), 221);
    assert_eq!(ours, fabric);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliver_filtered_reports_the_codes_fabric_assigned() {
    let (orderer_blocks, _) = fixture_ledger();
    let mut orderer = TestOrderer::start(&orderer_blocks).await;
    let data = tempfile::tempdir().unwrap();
    let c = committer(data.path(), vec![orderer.addr.clone()]).await;
    let addr = c.deliver_addr.to_string();
    // Ask before the blocks are there: BLOCK_UNTIL_READY waits for the commits.
    let (filtered, status) = peer_deliver_filtered(&addr, &user1(2), 0, 28).await;
    assert_eq!(status, SUCCESS);
    assert_eq!(filtered.len(), 29);

    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fabric_fixture("expected.json")).unwrap()).unwrap();
    let mut counted = 0;
    for (fb, eb) in filtered.iter().zip(expected["blocks"].as_array().unwrap()) {
        assert_eq!(fb.number, eb["number"].as_u64().unwrap());
        assert_eq!(fb.channel_id, "mychannel");
        let txs = eb["txs"].as_array().unwrap();
        assert_eq!(fb.filtered_transactions.len(), txs.len(), "block {}", fb.number);
        for (ft, et) in fb.filtered_transactions.iter().zip(txs) {
            assert_eq!(ft.txid, et["txid"].as_str().unwrap());
            assert_eq!(ft.r#type, et["header_type_num"].as_i64().unwrap() as i32);
            assert_eq!(ft.tx_validation_code, et["validation_code_num"].as_i64().unwrap() as i32, "tx {}", ft.txid);
            // Endorser transactions carry their (possibly empty) list of chaincode events, others none.
            assert_eq!(ft.data.is_some(), et["header_type"] == "ENDORSER_TRANSACTION");
            counted += 1;
        }
    }
    assert_eq!(counted, 735);
    c.shutdown().await.unwrap();
    orderer.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliver_answers_requests_with_fabric_statuses() {
    let (orderer_blocks, peer_blocks) = fixture_ledger();
    let mut orderer = TestOrderer::start(&orderer_blocks).await;
    let data = tempfile::tempdir().unwrap();
    let c = committer(data.path(), vec![orderer.addr.clone()]).await;
    wait_height(&c, 29).await;
    let addr = c.deliver_addr.to_string();
    let user = user1(1);
    let status = |s: Status| Some(s as i32);

    // A range: the stored peer bytes, then SUCCESS.
    let (blocks, st) = peer_deliver(&addr, &user, 5, 7).await;
    assert_eq!(st, SUCCESS);
    assert_eq!(blocks, peer_blocks[5..=7].to_vec());

    // Not an envelope.
    let (blocks, st) = peer_deliver_raw(&addr, Bytes::from_static(b"\xff\xff garbage")).await;
    assert!(blocks.is_empty());
    assert_eq!(st, status(Status::BadRequest));

    // Another channel.
    let req = seek_envelope("otherchannel", &user, &seek(0, 0, SeekBehavior::BlockUntilReady));
    assert_eq!(peer_deliver_raw(&addr, req).await.1, status(Status::NotFound));

    // The orderer's identity is a /Channel/Readers member but not an /Channel/Application/Readers one.
    let (blocks, st) = peer_deliver(&addr, &orderer_identity(), 0, 0).await;
    assert!(blocks.is_empty());
    assert_eq!(st, status(Status::Forbidden));

    // Start beyond the height; stop before the start.
    assert_eq!(peer_deliver(&addr, &user, 30, 31).await.1, status(Status::NotFound));
    assert_eq!(peer_deliver(&addr, &user, 9, 3).await.1, status(Status::BadRequest));

    // FAIL_IF_NOT_READY: the committed blocks, then NOT_FOUND.
    let req = seek_envelope("mychannel", &user, &seek(27, 40, SeekBehavior::FailIfNotReady));
    let (blocks, st) = peer_deliver_raw(&addr, req).await;
    assert_eq!(blocks.len(), 2);
    assert_eq!(st, status(Status::NotFound));

    // A request signed an hour ago is outside the 15-minute window.
    let stale = {
        use ferrofabric_protos::common::{ChannelHeader, Envelope, Header, HeaderType, Payload, SignatureHeader};
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
        let chdr = ChannelHeader {
            r#type: HeaderType::DeliverSeekInfo as i32,
            channel_id: "mychannel".into(),
            timestamp: Some(prost_types::Timestamp { seconds: now - 3600, nanos: 0 }),
            ..Default::default()
        };
        let shdr = SignatureHeader { creator: user.serialized().clone(), nonce: Bytes::from_static(b"n") };
        let payload = Payload {
            header: Some(Header {
                channel_header: chdr.encode_to_vec().into(),
                signature_header: shdr.encode_to_vec().into(),
            }),
            data: seek(0, 0, SeekBehavior::BlockUntilReady).encode_to_vec().into(),
        }
        .encode_to_vec();
        let signature = user.sign(&payload);
        Bytes::from(Envelope { payload: payload.into(), signature: signature.into() }.encode_to_vec())
    };
    assert_eq!(peer_deliver_raw(&addr, stale).await.1, status(Status::BadRequest));

    // DeliverWithPrivateData: the block, no private data.
    let req = seek_envelope("mychannel", &user, &seek(3, 3, SeekBehavior::BlockUntilReady));
    let mut client = DeliverClient::connect(format!("http://{addr}")).await.unwrap();
    let env = ferrofabric_protos::common::Envelope::decode(req).unwrap();
    let mut stream = client.deliver_with_private_data(futures::stream::iter([env])).await.unwrap().into_inner();
    match stream.message().await.unwrap().unwrap().r#type {
        Some(PeerResponse::BlockAndPrivateData(b)) => {
            assert_eq!(b.block.unwrap().encode_to_vec(), peer_blocks[3].to_vec());
            assert!(b.private_data_map.is_empty());
        }
        other => panic!("unexpected {other:?}"),
    }
    match stream.message().await.unwrap().unwrap().r#type {
        Some(PeerResponse::Status(s)) => assert_eq!(s, Status::Success as i32),
        other => panic!("unexpected {other:?}"),
    }

    c.shutdown().await.unwrap();
    orderer.stop().await;
}

/// A free loopback port, for a server started later.
fn reserve_addr() -> String {
    format!("127.0.0.1:{}", ferrofabric_comm::unused_port("127.0.0.1").unwrap())
}

/// An orderer ledger directory holding `blocks`, for [`start_orderer`].
fn orderer_dir(blocks: &[Bytes]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let store = ferrofabric_block_store::BlockStore::open(
        &dir.path().join("chains/mychannel"),
        ferrofabric_block_store::StoreOptions::default(),
    )
    .unwrap();
    for b in blocks {
        store.append(b.clone()).unwrap();
    }
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fails_over_between_orderers_and_restart_resumes_from_its_height() {
    let (orderer_blocks, peer_blocks) = fixture_ledger();
    // o1 has blocks 0..15 only; o2 has the whole chain but is not running yet; `dead` never runs.
    let mut o1 = TestOrderer::start(&orderer_blocks[..15]).await;
    let (o2_dir, o2_addr, dead) = (orderer_dir(&orderer_blocks), reserve_addr(), reserve_addr());
    let data = tempfile::tempdir().unwrap();

    // Phase 1: the committer gets past the dead address and stops at o1's height.
    let c = committer(data.path(), vec![dead, o1.addr.clone()]).await;
    wait_height(&c, 15).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(c.store.height(), 15, "o1 has no block 15; BLOCK_UNTIL_READY keeps waiting");
    c.shutdown().await.unwrap();

    // Phase 2: restart; it resumes from its shutdown checkpoint, then asks o1 from its own height (o2 is down, so o1
    // is the only source). Then o2 comes up and o1 goes away: the committer must fail over to o2 and resume at 15.
    let c = committer(data.path(), vec![o1.addr.clone(), o2_addr.clone()]).await;
    assert_eq!(c.recovery.checkpoint.map(|cp| cp.0), Some(14), "the shutdown checkpoint");
    assert_eq!(c.recovery.resumed_from, Some(14), "resumed from the checkpoint");
    assert_eq!(c.recovery.replayed, 0, "no stored block after the checkpoint to re-validate");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(c.store.height(), 15);
    let o2 = start_orderer(o2_dir.path(), &o2_addr).await;
    o1.stop().await;
    wait_height(&c, 29).await;
    assert_eq!(stored_chain(&c), peer_blocks);
    c.shutdown().await.unwrap();
    o2.shutdown().await;
}

/// `block` with its first orderer signature altered (header and data untouched, so an orderer's ledger accepts it
/// and serves it).
fn with_bad_signature(block: &Bytes) -> Bytes {
    let mut b = Block::decode(block.clone()).unwrap();
    let md = b.metadata.as_mut().unwrap();
    let mut sigs = Metadata::decode(md.metadata[0].clone()).unwrap();
    let mut s = sigs.signatures[0].signature.to_vec();
    let last = s.len() - 2;
    s[last] ^= 0x5a;
    sigs.signatures[0].signature = s.into();
    md.metadata[0] = sigs.encode_to_vec().into();
    b.encode_to_vec().into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_badly_signed_block_is_not_committed_and_is_fetched_again_elsewhere() {
    let (mut orderer_blocks, peer_blocks) = fixture_ledger();
    let good = orderer_blocks.clone();
    orderer_blocks[10] = with_bad_signature(&orderer_blocks[10]);
    let mut bad = TestOrderer::start(&orderer_blocks).await;
    // The good orderer's address is known before it runs.
    let (good_dir, good_addr) = (orderer_dir(&good), reserve_addr());
    let data = tempfile::tempdir().unwrap();
    let c = committer(data.path(), vec![bad.addr.clone(), good_addr.clone()]).await;
    wait_height(&c, 10).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(c.store.height(), 10, "block 10 carries a bad orderer signature and must not be committed");

    let good_node = start_orderer(good_dir.path(), &good_addr).await;
    wait_height(&c, 29).await;
    assert_eq!(stored_chain(&c), peer_blocks);
    c.shutdown().await.unwrap();
    good_node.shutdown().await;
    bad.stop().await;
}
