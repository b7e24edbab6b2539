//! The replica fed with the real Fabric 2.5.16 peer's validated blocks (`peer-blocks.bin`, with
//! TRANSACTIONS_FILTER) reaches exactly the world state that peer had (`state.json`): directly and by following a
//! peer `Deliver` service over gRPC that ends its streams early (the follower resumes from its height).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_endorser::{follow, Replica, ReplicaError};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{Block, Envelope, Payload, Status};
use ferrofabric_protos::orderer::{seek_position, SeekInfo};
use ferrofabric_protos::peer::deliver_server::{Deliver, DeliverServer};
use ferrofabric_protos::peer::{deliver_response, DeliverResponse};
use ferrofabric_protoutil::records;
use ferrofabric_testkit::fabric_fixture;
use prost::Message;
use tokio::sync::watch;
use tokio_stream::Stream;

fn ledger(name: &str) -> Vec<Bytes> {
    let file = Bytes::from(std::fs::read(fabric_fixture(name)).unwrap());
    records(file).map(|r| r.unwrap().1).collect()
}

/// The final public state of `smallbank` and `transfer` as Fabric's peer had it, as (namespace, key, value,
/// "block:tx").
fn expected_state() -> Vec<(String, String, String, String)> {
    let text = std::fs::read_to_string(fabric_fixture("state.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut out: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap().to_owned();
            (s("namespace"), s("key"), s("value"), s("version"))
        })
        .collect();
    out.sort();
    out
}

fn replica_state(replica: &Replica) -> Vec<(String, String, String, String)> {
    let mut out: Vec<_> = replica
        .view()
        .entries()
        .into_iter()
        .filter(|(k, _)| k.collection.is_empty() && (k.namespace == "smallbank" || k.namespace == "transfer"))
        .map(|(k, v)| {
            (
                k.namespace,
                String::from_utf8(k.key.to_vec()).unwrap(),
                String::from_utf8(v.value.to_vec()).unwrap(),
                v.version.to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn applying_the_peers_validated_blocks_reproduces_its_world_state() {
    let blocks = ledger("peer-blocks.bin");
    let replica = Replica::from_genesis(blocks[0].clone()).unwrap();
    assert_eq!(replica.channel_id(), "mychannel");
    // Out of order, and blocks without validation flags, are refused without effect.
    assert!(matches!(replica.apply_block(blocks[2].clone()), Err(ReplicaError::OutOfOrder { expected: 1, got: 2 })));
    let unvalidated = ledger("orderer-blocks.bin");
    assert!(matches!(replica.apply_block(unvalidated[1].clone()), Err(ReplicaError::NotValidated { .. })));
    assert!(matches!(replica.apply_block(Bytes::from_static(b"\x0a\x01")), Err(ReplicaError::Decode(_))));
    assert_eq!(replica.height(), 1);
    let mut ids = Vec::new();
    for b in &blocks[1..] {
        let block_ids = replica.apply_block(b.clone()).unwrap();
        let arena = ferrofabric_arena::BlockArena::decode(b.clone()).unwrap();
        let in_block: Vec<String> =
            arena.txs().iter().map(|tx| tx.channel_header().map(|h| h.tx_id.clone()).unwrap_or_default()).collect();
        assert_eq!(block_ids, in_block, "one ID per transaction, in block order");
        ids.extend(block_ids);
    }
    assert_eq!(replica.height(), blocks.len() as u64);
    assert!(ids.iter().any(|id| id == "c705a6654b0c78d3b5e8956ade594d1eb34fa826e7439c498a047aef6cb7955f"));
    let expected = expected_state();
    assert_eq!(expected.len(), 221);
    assert_eq!(replica_state(&replica), expected);
    // Every transaction ID of the ledger is known, valid or not (the first one of block 7 is VALID, the one of
    // block 8 an ENDORSEMENT_POLICY_FAILURE).
    assert!(replica.contains_txid("c705a6654b0c78d3b5e8956ade594d1eb34fa826e7439c498a047aef6cb7955f"));
    assert!(replica.contains_txid("dd664f33b7f5a3c7dbda167937e9fc0d63b6a1cd7b14453fc411a8dc9ccaa930"));
    assert!(!replica.contains_txid("00"));
}

/// A peer Deliver service over a fixed ledger that ends every stream after at most `per_stream` blocks.
struct FakeDeliver {
    blocks: Arc<Vec<Bytes>>,
    per_stream: usize,
}

type ResponseStream = Pin<Box<dyn Stream<Item = Result<DeliverResponse, tonic::Status>> + Send>>;

impl FakeDeliver {
    async fn answer(
        &self,
        request: tonic::Request<tonic::Streaming<Envelope>>,
    ) -> Result<tonic::Response<ResponseStream>, tonic::Status> {
        let mut incoming = request.into_inner();
        let env = incoming.message().await?.ok_or_else(|| tonic::Status::invalid_argument("no seek"))?;
        let payload = Payload::decode(env.payload).map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
        let seek = SeekInfo::decode(payload.data).map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
        let start = match seek.start.and_then(|s| s.r#type) {
            Some(seek_position::Type::Specified(s)) => s.number as usize,
            _ => return Err(tonic::Status::invalid_argument("expected a specified start")),
        };
        let mut out = Vec::new();
        for raw in self.blocks.iter().skip(start).take(self.per_stream) {
            let block = Block::decode(raw.clone()).unwrap();
            out.push(Ok(DeliverResponse { r#type: Some(deliver_response::Type::Block(block)) }));
        }
        out.push(Ok(DeliverResponse { r#type: Some(deliver_response::Type::Status(Status::Success as i32)) }));
        Ok(tonic::Response::new(Box::pin(tokio_stream::iter(out))))
    }
}

#[tonic::async_trait]
impl Deliver for FakeDeliver {
    type DeliverStream = ResponseStream;
    type DeliverFilteredStream = ResponseStream;
    type DeliverWithPrivateDataStream = ResponseStream;

    async fn deliver(
        &self,
        request: tonic::Request<tonic::Streaming<Envelope>>,
    ) -> Result<tonic::Response<Self::DeliverStream>, tonic::Status> {
        self.answer(request).await
    }

    async fn deliver_filtered(
        &self,
        _request: tonic::Request<tonic::Streaming<Envelope>>,
    ) -> Result<tonic::Response<Self::DeliverFilteredStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("filtered"))
    }

    async fn deliver_with_private_data(
        &self,
        _request: tonic::Request<tonic::Streaming<Envelope>>,
    ) -> Result<tonic::Response<Self::DeliverWithPrivateDataStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("private data"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follower_catches_up_through_peer_deliver_across_reconnects() {
    let blocks = Arc::new(ledger("peer-blocks.bin"));
    let (listener, addr) = ferrofabric_endorser::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let service = DeliverServer::new(FakeDeliver { blocks: blocks.clone(), per_stream: 5 });
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let server = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(tokio_stream::wrappers::TcpListenerStream::new(listener), async move {
                let _ = stop_rx.wait_for(|s| *s).await;
            })
            .await
            .unwrap();
    });

    let dir = fabric_fixture("crypto/peerOrganizations/org1.example.com/users/User1@org1.example.com/msp");
    let signer = Arc::new(SigningIdentity::from_msp_dir("Org1MSP", &dir).unwrap());
    let replica = Arc::new(Replica::from_genesis(blocks[0].clone()).unwrap());
    let (tx, rx) = watch::channel(false);
    let follower = tokio::spawn(follow(replica.clone(), format!("http://{addr}"), signer, rx));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while replica.height() < blocks.len() as u64 {
        assert!(tokio::time::Instant::now() < deadline, "stuck at height {}", replica.height());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(replica_state(&replica), expected_state());
    tx.send(true).unwrap();
    tokio::time::timeout(Duration::from_secs(10), follower).await.unwrap().unwrap();
    stop_tx.send(true).unwrap();
    server.await.unwrap();
}
