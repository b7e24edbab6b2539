//! The Deliver server over a peer ledger of the testkit network: Fabric's statuses for the seek positions and
//! behaviours, the channel check, the ACL check, and streaming of the stored bytes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_block_store::BlockStore;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_comm::{seek_envelope, seek_range};
use ferrofabric_deliver::{DeliverFrame, DeliverHandler, DeliverLedger, PeerAcl, RequestKind};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{Block, Status};
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use ferrofabric_testkit::{Chain, Network};
use prost::Message;
use tokio::sync::watch;

struct Fixture {
    net: Network,
    handler: Arc<DeliverHandler>,
    blocks: Vec<Bytes>,
    _dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    let net = Network::generate(7).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(BlockStore::open(dir.path(), Default::default()).unwrap());
    let genesis = net.genesis_block();
    let config = ChannelConfig::from_config_block(&Block::decode(genesis.clone()).unwrap()).unwrap();
    let mut chain = Chain::new(&net).unwrap();
    chain.append(&[]);
    chain.append(&[]);
    let mut blocks = vec![genesis.clone()];
    store.append(genesis).unwrap();
    for b in &chain.blocks()[1..] {
        let bytes = Bytes::from(b.encode_to_vec());
        store.append(bytes.clone()).unwrap();
        blocks.push(bytes);
    }
    let (tx, rx) = watch::channel(Some(Arc::new(config)));
    // The configuration never changes in these tests; the sender must outlive the handler.
    std::mem::forget(tx);
    let ledger = DeliverLedger { channel_id: net.channel_id().to_owned(), store, config: rx };
    let handler = Arc::new(DeliverHandler::new(Arc::new(ledger), Arc::new(PeerAcl), Duration::from_secs(900)));
    Fixture { net, handler, blocks, _dir: dir }
}

fn request(channel: &str, signer: &SigningIdentity, start: u64, stop: u64, behavior: SeekBehavior) -> Bytes {
    seek_envelope(channel, signer.serialized(), |p| signer.sign(p), &seek_range(start, Some(stop), behavior))
}

/// Sends one request and collects the frames until the status.
async fn ask(f: &Fixture, req: Bytes) -> (Vec<Bytes>, Status) {
    let inbound = futures::stream::iter([Ok(req)]);
    let mut rx = f.handler.serve(RequestKind::Blocks, inbound);
    let mut blocks = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.unwrap().unwrap().unwrap() {
            DeliverFrame::Block(b) => blocks.push(b),
            DeliverFrame::Status(s) => return (blocks, s),
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

#[tokio::test]
async fn statuses_follow_fabric() {
    let f = fixture();
    let ch = f.net.channel_id().to_owned();
    let user = f.net.client(0);

    let (blocks, status) = ask(&f, request(&ch, user, 0, 2, SeekBehavior::BlockUntilReady)).await;
    assert_eq!(status, Status::Success);
    assert_eq!(blocks, f.blocks, "the stored bytes, in order");

    // A stop before the start.
    assert_eq!(ask(&f, request(&ch, user, 2, 1, SeekBehavior::BlockUntilReady)).await, (vec![], Status::BadRequest));
    // A start beyond the height.
    assert_eq!(ask(&f, request(&ch, user, 4, 5, SeekBehavior::BlockUntilReady)).await.1, Status::NotFound);
    // FAIL_IF_NOT_READY sends what there is, then NOT_FOUND.
    let (blocks, status) = ask(&f, request(&ch, user, 1, 5, SeekBehavior::FailIfNotReady)).await;
    assert_eq!((blocks.len(), status), (2, Status::NotFound));
    // Another channel.
    assert_eq!(ask(&f, request("otherchannel", user, 0, 0, SeekBehavior::BlockUntilReady)).await.1, Status::NotFound);
    // Garbage.
    assert_eq!(ask(&f, Bytes::from_static(b"\xff\xff")).await.1, Status::BadRequest);
    // The orderer's identity is not a reader of the application.
    let status = ask(&f, request(&ch, f.net.orderer(), 0, 0, SeekBehavior::BlockUntilReady)).await.1;
    assert_eq!(status, Status::Forbidden);
}
