//! Robustness to bad input: bad Broadcast input — garbage bytes, an unknown channel, a forged or missing creator signature, an
//! oversized message, a creator from a foreign CA, message types that cannot be broadcast, a stream cut in the
//! middle of a message — gets the right status on a stream that stays open, and disturbs no other client.
//! Also Deliver's error statuses.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;
use std::time::Duration;

use crate::support::*;
use bytes::{BufMut, Bytes, BytesMut};
use ferrofabric_comm::{broadcast, connect, deliver, seek_envelope, seek_range, DeliverItem};
use ferrofabric_orderer::RunningOrderer;
use ferrofabric_protos::common::{Envelope, HeaderType, Status};
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use ferrofabric_protos::orderer::{seek_position, SeekInfo, SeekNewest, SeekPosition, SeekSpecified};
use ferrofabric_testkit::{Network, TxBuilder, Workload};
use futures::StreamExt;
use prost::Message;

/// AbsoluteMaxBytes of the test channel.
const ABSOLUTE_MAX: u32 = 64 << 10;

fn network() -> &'static Network {
    static NET: OnceLock<Network> = OnceLock::new();
    NET.get_or_init(|| Network::generate(21).unwrap())
}

fn foreign_network() -> &'static Network {
    static NET: OnceLock<Network> = OnceLock::new();
    NET.get_or_init(|| Network::generate(22).unwrap())
}

/// A node (no TLS) that joined the test network's channel with small batch limits.
async fn node_with_channel(data: &std::path::Path, crypto: &std::path::Path) -> RunningOrderer {
    let net = network();
    net.write_msp_dirs(crypto).unwrap();
    let dirs = net_dirs(crypto);
    let node = start_node(loopback_config(data, &dirs.orderer_msp, "OrdererMSP")).await;
    let genesis = with_batch(&net.genesis_block(), 10, ABSOLUTE_MAX, 32 << 10, "200ms");
    let r = join(node.admin_addr.unwrap(), &genesis).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    node
}

fn good(w: &Workload<'_>) -> (String, Bytes) {
    let b = w.transfer_tx("k1", "k2", [None, None], 16).unwrap();
    (b.tx_id, b.envelope)
}

/// All transaction IDs in the chain after block 0, read with a fresh Deliver request from block 0 up to the
/// newest block.
async fn chain_tx_ids(node: &RunningOrderer) -> Vec<String> {
    let user = network().client(0);
    let seek = SeekInfo {
        start: Some(SeekPosition { r#type: Some(seek_position::Type::Specified(SeekSpecified { number: 0 })) }),
        stop: Some(SeekPosition { r#type: Some(seek_position::Type::Newest(SeekNewest {})) }),
        ..SeekInfo::default()
    };
    let env = seek_envelope("mychannel", user.serialized(), |m| user.sign(m), &seek);
    let ch = connect(&node.grpc_addr.to_string(), None).await.unwrap();
    let mut s = deliver(ch, futures::stream::iter(vec![env])).await.unwrap();
    let mut ids = Vec::new();
    let mut first = true;
    while let Some(item) = tokio::time::timeout(Duration::from_secs(20), s.next()).await.unwrap() {
        match item.unwrap() {
            DeliverItem::Block(_) if first => first = false,
            DeliverItem::Block(b) => ids.extend(block_tx_ids(&b)),
            DeliverItem::Status(st) => {
                assert_eq!(st, Status::Success as i32);
                break;
            }
        }
    }
    ids
}

/// Waits until the chain holds `n` transactions after block 0 (the batch timeout is 200 ms).
async fn wait_for_txs(node: &RunningOrderer, n: usize) -> Vec<String> {
    for _ in 0..100 {
        let ids = chain_tx_ids(node).await;
        if ids.len() >= n {
            return ids;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the chain never reached {n} transactions");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_messages_get_their_status_and_the_stream_and_other_clients_carry_on() {
    let (data, crypto) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let node = node_with_channel(data.path(), crypto.path()).await;
    let net = network();
    let w = Workload::new(net, 5);

    // The bad inputs, each followed by a good transaction on the same stream.
    let mut unsigned = Envelope::decode(good(&w).1).unwrap();
    unsigned.signature = Bytes::new();
    let oversized = w.builder("transfer").write("transfer", "big", vec![b'x'; ABSOLUTE_MAX as usize]).build().unwrap();
    let bad: Vec<(&str, Bytes, Status, &str)> = vec![
        ("garbage bytes", Bytes::from_static(b"\xff\xfe\x01 not a protobuf"), Status::BadRequest, "Envelope"),
        (
            "unknown channel",
            TxBuilder::new(net).chaincode("transfer", "1.0").channel("nosuch").build().unwrap().envelope,
            // Fabric 2.5.16's answer, word for word (no system channel to create it in).
            Status::BadRequest,
            "channel creation request not allowed because the orderer system channel is not defined",
        ),
        (
            "forged signature",
            w.builder("transfer").corrupt_creator_signature().build().unwrap().envelope,
            Status::Forbidden,
            "signature over the payload does not verify",
        ),
        ("missing signature", Bytes::from(unsigned.encode_to_vec()), Status::Forbidden, "/Channel/Writers"),
        ("oversized message", oversized.envelope, Status::BadRequest, "exceeds maximum allowed 65536 bytes"),
        (
            "creator from a foreign CA",
            TxBuilder::new(net)
                .creator(foreign_network().client(0))
                .chaincode("transfer", "1.0")
                .build()
                .unwrap()
                .envelope,
            Status::Forbidden,
            "permission denied",
        ),
        (
            "CONFIG broadcast directly",
            w.builder("transfer").header_type(HeaderType::Config as i32).build().unwrap().envelope,
            Status::BadRequest,
            "cannot be processed directly",
        ),
        (
            "CONFIG_UPDATE whose data is not a ConfigUpdateEnvelope",
            w.builder("transfer").header_type(HeaderType::ConfigUpdate as i32).build().unwrap().envelope,
            Status::BadRequest,
            "error applying config update to existing channel 'mychannel': malformed ConfigUpdateEnvelope",
        ),
        (
            "payload without header",
            Bytes::from(
                Envelope { payload: Bytes::from_static(b""), signature: Bytes::from_static(b"x") }.encode_to_vec(),
            ),
            Status::BadRequest,
            "header not set",
        ),
    ];
    let mut stream_msgs = Vec::new();
    let mut expected = Vec::new();
    let mut good_ids = Vec::new();
    for (what, env, status, info) in &bad {
        stream_msgs.push(env.clone());
        expected.push((*what, *status, *info));
        let (id, env) = good(&w);
        good_ids.push(id);
        stream_msgs.push(env);
        expected.push(("good", Status::Success, ""));
    }

    // Meanwhile a well-behaved client streams 300 transactions.
    let other = Workload::new(net, 6).creator_org(1);
    let other_txs: Vec<(String, Bytes)> = (0..300).map(|_| good(&other)).collect();
    let other_ids: Vec<String> = other_txs.iter().map(|(id, _)| id.clone()).collect();
    let addr = node.grpc_addr.to_string();
    let other_task = {
        let addr = addr.clone();
        let envs: Vec<Bytes> = other_txs.into_iter().map(|(_, e)| e).collect();
        tokio::spawn(async move {
            let ch = connect(&addr, None).await.unwrap();
            let mut r = broadcast(ch, futures::stream::iter(envs)).await.unwrap();
            let mut ok = 0;
            while let Some(resp) = r.next().await {
                assert_eq!(resp.unwrap().status, Status::Success as i32);
                ok += 1;
            }
            ok
        })
    };

    let ch = connect(&addr, None).await.unwrap();
    let mut responses = broadcast(ch, futures::stream::iter(stream_msgs)).await.unwrap();
    for (what, status, info) in expected {
        let r = tokio::time::timeout(Duration::from_secs(20), responses.next()).await.unwrap().unwrap().unwrap();
        assert_eq!(r.status, status as i32, "{what}: got {} {:?}", r.status, r.info);
        assert!(r.info.contains(info), "{what}: info {:?} does not mention {info:?}", r.info);
    }
    assert!(responses.next().await.is_none(), "exactly one response per message");
    assert_eq!(tokio::time::timeout(Duration::from_secs(60), other_task).await.unwrap().unwrap(), 300);

    // Only the good transactions were ordered, each once.
    let ids = wait_for_txs(&node, good_ids.len() + other_ids.len()).await;
    let mut want: Vec<String> = good_ids.iter().chain(&other_ids).cloned().collect();
    let mut got = ids.clone();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    node.shutdown().await;
}

/// A gRPC frame holding `msg`.
fn grpc_frame(msg: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + msg.len());
    b.put_u8(0);
    b.put_u32(msg.len() as u32);
    b.put_slice(msg);
    b.freeze()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_mid_message_does_not_disturb_other_clients() {
    let (data, crypto) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let node = node_with_channel(data.path(), crypto.path()).await;
    let w = Workload::new(network(), 7);
    let (first_id, first) = good(&w);
    let (_, cut) = good(&w);

    // Raw HTTP/2: one complete message, then half of the next one, then the connection is dropped.
    let tcp = tokio::net::TcpStream::connect(node.grpc_addr).await.unwrap();
    let (h2c, connection) = h2::client::handshake(tcp).await.unwrap();
    let conn_task = tokio::spawn(connection);
    let mut h2c = h2c.ready().await.unwrap();
    let request = http::Request::builder()
        .method("POST")
        .uri(format!("http://{}/orderer.AtomicBroadcast/Broadcast", node.grpc_addr))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut body) = h2c.send_request(request, false).unwrap();
    body.send_data(grpc_frame(&first), false).unwrap();
    let response = tokio::time::timeout(Duration::from_secs(20), response).await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let mut recv = response.into_body();
    let frame = tokio::time::timeout(Duration::from_secs(20), recv.data()).await.unwrap().unwrap().unwrap();
    let resp = ferrofabric_protos::orderer::BroadcastResponse::decode(&frame[5..]).unwrap();
    assert_eq!(resp.status, Status::Success as i32);
    let partial = grpc_frame(&cut);
    body.send_data(partial.slice(..partial.len() / 2), false).unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(body);
    drop(recv);
    drop(h2c);
    conn_task.abort();

    // Another client is served normally, and the cut message was never ordered.
    let (second_id, second) = good(&w);
    let ch = connect(&node.grpc_addr.to_string(), None).await.unwrap();
    let mut r = broadcast(ch, futures::stream::iter(vec![second])).await.unwrap();
    assert_eq!(r.next().await.unwrap().unwrap().status, Status::Success as i32);
    let ids = wait_for_txs(&node, 2).await;
    assert_eq!(ids, vec![first_id, second_id]);
    let r = http(node.operations_addr.unwrap(), "GET", "/healthz", &[], b"").await;
    assert_eq!(r.status, 200);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliver_error_statuses() {
    let (data, crypto) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let node = node_with_channel(data.path(), crypto.path()).await;
    let net = network();
    let user = net.client(0);
    let stranger = foreign_network().client(0);
    let addr = node.grpc_addr.to_string();

    let status_of = |request: Bytes| {
        let addr = addr.clone();
        async move {
            let ch = connect(&addr, None).await.unwrap();
            let mut s = deliver(ch, futures::stream::iter(vec![request])).await.unwrap();
            let mut blocks = 0;
            loop {
                match tokio::time::timeout(Duration::from_secs(20), s.next()).await.unwrap() {
                    Some(Ok(DeliverItem::Block(_))) => blocks += 1,
                    Some(Ok(DeliverItem::Status(st))) => return (blocks, st),
                    other => panic!("unexpected {other:?}"),
                }
            }
        }
    };
    let seek = |start: u64, stop: u64| seek_range(start, Some(stop), SeekBehavior::BlockUntilReady);

    let ok = seek_envelope("mychannel", user.serialized(), |m| user.sign(m), &seek(0, 0));
    assert_eq!(status_of(ok).await, (1, Status::Success as i32));
    let unknown = seek_envelope("nosuch", user.serialized(), |m| user.sign(m), &seek(0, 0));
    assert_eq!(status_of(unknown).await, (0, Status::NotFound as i32));
    let forbidden = seek_envelope("mychannel", stranger.serialized(), |m| stranger.sign(m), &seek(0, 0));
    assert_eq!(status_of(forbidden).await, (0, Status::Forbidden as i32));
    let forged = seek_envelope("mychannel", user.serialized(), |m| stranger.sign(m), &seek(0, 0));
    assert_eq!(status_of(forged).await, (0, Status::Forbidden as i32));
    // Start at the height (would wait for block 1) but stop before it.
    let backwards = seek_envelope("mychannel", user.serialized(), |m| user.sign(m), &seek(1, 0));
    assert_eq!(status_of(backwards).await, (0, Status::BadRequest as i32));
    let beyond = seek_envelope("mychannel", user.serialized(), |m| user.sign(m), &seek(7, 9));
    assert_eq!(status_of(beyond).await, (0, Status::NotFound as i32));
    let garbage = Bytes::from_static(b"\x0a\x03abc");
    assert_eq!(status_of(garbage).await, (0, Status::BadRequest as i32));
    let no_stop = SeekInfo { start: seek(0, 0).start, stop: None, ..SeekInfo::default() };
    let no_stop = seek_envelope("mychannel", user.serialized(), |m| user.sign(m), &no_stop);
    assert_eq!(status_of(no_stop).await, (0, Status::BadRequest as i32));
    node.shutdown().await;
}
