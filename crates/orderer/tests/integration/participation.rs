//! Channel participation: joining the Fabric 2.5 fixture's configtxgen `genesis.block` over the channel participation API
//! as osnadmin does, then reading block 0 back over Deliver byte for byte; plus the API's other answers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::*;
use ferrofabric_comm::connect;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::Status;
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use ferrofabric_testkit::fabric_fixture;
use prost::Message;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_fixture_genesis_then_deliver_block_0_byte_identical() {
    let genesis = std::fs::read(fabric_fixture("genesis.block")).unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut config = loopback_config(data.path(), &fixture_orderer_msp(), "OrdererMSP");
    // The fixture keeps the orderer's TLS certificate (not its key): it names this node as the consenter.
    config.general.cluster.client_certificate =
        Some(fabric_fixture("crypto/ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt"));
    let node = start_node(config).await;
    let admin = node.admin_addr.unwrap();

    let r = http(admin, "GET", "/participation/v1/channels", &[], b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), serde_json::json!({"systemChannel": null, "channels": null}));
    assert_eq!(r.body.last(), Some(&b'\n'));

    let r = join(admin, &genesis).await;
    assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("Location"), Some("/participation/v1/channels/mychannel"));
    assert_eq!(
        r.json(),
        serde_json::json!({
            "name": "mychannel",
            "url": "/participation/v1/channels/mychannel",
            "consensusRelation": "consenter",
            "status": "active",
            "height": 1
        })
    );

    let r = http(admin, "GET", "/participation/v1/channels", &[], b"").await;
    assert_eq!(
        r.json(),
        serde_json::json!({"systemChannel": null, "channels": [{"name": "mychannel", "url": "/participation/v1/channels/mychannel"}]})
    );
    let r = http(admin, "GET", "/participation/v1/channels/mychannel", &[], b"").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["height"], 1);

    // Deliver block 0, signed by the fixture's User1@org1 (a /Channel/Readers member).
    let user = SigningIdentity::from_msp_dir("Org1MSP", &fixture_user1_msp()).unwrap();
    let ch = connect(&node.grpc_addr.to_string(), None).await.unwrap();
    let (blocks, status) = deliver_range(
        ch.clone(),
        "mychannel",
        user.serialized(),
        |m| user.sign(m),
        0,
        0,
        SeekBehavior::BlockUntilReady,
    )
    .await;
    assert_eq!(status, Some(Status::Success as i32));
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].as_ref(), genesis.as_slice(), "block 0 must be the uploaded bytes");

    // Block 1 does not exist yet: FAIL_IF_NOT_READY says NOT_FOUND.
    let (blocks, status) =
        deliver_range(ch, "mychannel", user.serialized(), |m| user.sign(m), 1, 1, SeekBehavior::FailIfNotReady).await;
    assert!(blocks.is_empty());
    assert_eq!(status, Some(Status::NotFound as i32));

    // Joining again is refused as Fabric does.
    let r = join(admin, &genesis).await;
    assert_eq!(r.status, 405);
    assert_eq!(r.header("Allow"), Some("GET, DELETE"));
    assert_eq!(r.json()["error"], "cannot join: channel already exists");

    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn participation_api_errors_and_removal() {
    let genesis = std::fs::read(fabric_fixture("genesis.block")).unwrap();
    let data = tempfile::tempdir().unwrap();
    let node = start_node(loopback_config(data.path(), &fixture_orderer_msp(), "OrdererMSP")).await;
    let admin = node.admin_addr.unwrap();

    // Not a block.
    let r = join(admin, b"\xff\xff garbage").await;
    assert_eq!(r.status, 400);
    assert!(r.json()["error"].as_str().unwrap().starts_with("invalid join block"), "{:?}", r.json());
    // A block that is not a config block: the fixture's block 1 (an endorser transaction).
    let blocks = std::fs::read(fabric_fixture("orderer-blocks.bin")).unwrap();
    let records: Vec<_> = ferrofabric_protoutil::records(bytes::Bytes::from(blocks)).map(|r| r.unwrap().1).collect();
    let r = join(admin, &records[1]).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"], "invalid join block: block is not a config block");
    // The genesis block with a header whose data hash is not its data's.
    let mut tampered = ferrofabric_protos::common::Block::decode(bytes::Bytes::from(genesis.clone())).unwrap();
    tampered.header.as_mut().unwrap().data_hash = bytes::Bytes::from_static(&[7; 32]);
    let r = join(admin, &tampered.encode_to_vec()).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"], "invalid join block: the header's data hash does not match the block's data");
    // Not multipart.
    let r =
        http(admin, "POST", "/participation/v1/channels", &[("Content-Type", "application/json".into())], b"{}").await;
    assert_eq!(r.status, 400);
    assert!(r.json()["error"].as_str().unwrap().starts_with("unsupported Content-Type"));
    // Multipart without the config-block part.
    let (ct, body) = multipart("something-else", &genesis);
    let r = http(admin, "POST", "/participation/v1/channels", &[("Content-Type", ct)], &body).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"], "form does not contains part key: config-block");
    // Wrong method, bad names, unknown channel, JSON-only.
    let r = http(admin, "PUT", "/participation/v1/channels", &[], b"").await;
    assert_eq!((r.status, r.header("Allow")), (405, Some("GET, POST")));
    let r = http(admin, "GET", "/participation/v1/channels/Bad_Name", &[], b"").await;
    assert_eq!(r.status, 400);
    let r = http(admin, "GET", "/participation/v1/channels/nosuch", &[], b"").await;
    assert_eq!(r.status, 404);
    let r = http(admin, "GET", "/participation/v1/channels", &[("Accept", "text/html".into())], b"").await;
    assert_eq!(r.status, 406);
    let r = http(admin, "GET", "/participation/v1/", &[], b"").await;
    assert_eq!((r.status, r.header("Location")), (302, Some("/participation/v1/channels")));
    let r = http(admin, "DELETE", "/participation/v1/channels/nosuch", &[], b"").await;
    assert_eq!(r.status, 404);

    // Join, restart (the channel is reloaded from disk), remove.
    assert_eq!(join(admin, &genesis).await.status, 201);
    node.shutdown().await;
    let node = start_node(loopback_config(data.path(), &fixture_orderer_msp(), "OrdererMSP")).await;
    let admin = node.admin_addr.unwrap();
    let r = http(admin, "GET", "/participation/v1/channels/mychannel", &[], b"").await;
    assert_eq!((r.status, r.json()["height"].as_u64()), (200, Some(1)));
    let r = http(admin, "DELETE", "/participation/v1/channels/mychannel", &[], b"").await;
    assert_eq!(r.status, 204);
    let r = http(admin, "GET", "/participation/v1/channels", &[], b"").await;
    assert_eq!(r.json()["channels"], serde_json::Value::Null);
    assert!(!data.path().join("chains/mychannel").exists());

    // Deliver on a removed channel: NOT_FOUND.
    let user = SigningIdentity::from_msp_dir("Org1MSP", &fixture_user1_msp()).unwrap();
    let ch = connect(&node.grpc_addr.to_string(), None).await.unwrap();
    let (_, status) =
        deliver_range(ch, "mychannel", user.serialized(), |m| user.sign(m), 0, 0, SeekBehavior::BlockUntilReady).await;
    assert_eq!(status, Some(Status::NotFound as i32));

    // Operations listener.
    let ops = node.operations_addr.unwrap();
    let r = http(ops, "GET", "/healthz", &[], b"").await;
    assert_eq!((r.status, r.json()["status"].as_str()), (200, Some("OK")));
    node.shutdown().await;
}
