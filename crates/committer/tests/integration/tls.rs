//! TLS on both sides of the committer: it pulls from an orderer over TLS (server name override, CA from the
//! config) and serves peer Deliver over mutual TLS; a follower with a client certificate gets the chain, one
//! without is refused. Certificates are cryptogen-shaped ones from the testkit network.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use ferrofabric_comm::{open_deliver, ClientTls, ClientTlsConfig, DeliverApi, DeliverItem, TlsConfig};
use ferrofabric_deliver::{connect, seek_envelope, seek_from, Fetched, Follower};
use tokio::sync::mpsc;

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pulls_over_tls_and_serves_deliver_over_mutual_tls() {
    let crypto = tempfile::tempdir().unwrap();
    ferrofabric_testkit::Network::generate(5).unwrap().write_msp_dirs(crypto.path()).unwrap();
    let orderer_tls = crypto.path().join("ordererOrganizations/example.com/orderers/orderer.example.com/tls");
    let peer_tls = crypto.path().join("peerOrganizations/org1.example.com/peers/peer0.org1.example.com/tls");
    let user_tls = crypto.path().join("peerOrganizations/org1.example.com/users/User1@org1.example.com/tls");

    // The orderer (fixture ledger and signing identity) with a TLS listener.
    let (orderer_blocks, peer_blocks) = fixture_ledger();
    let odir = tempfile::tempdir().unwrap();
    {
        let store =
            ferrofabric_block_store::BlockStore::open(&odir.path().join("chains/mychannel"), Default::default())
                .unwrap();
        for b in &orderer_blocks {
            store.append(b.clone()).unwrap();
        }
    }
    let orderer = start_orderer_with_tls(
        odir.path(),
        TlsConfig {
            enabled: true,
            certificate: Some(orderer_tls.join("server.crt")),
            private_key: Some(orderer_tls.join("server.key")),
            ..TlsConfig::default()
        },
    )
    .await;

    let data = tempfile::tempdir().unwrap();
    let mut config = committer_config(data.path(), vec![orderer.grpc_addr.to_string()]);
    config.orderer_tls = ClientTlsConfig {
        enabled: true,
        root_cas: vec![orderer_tls.join("ca.crt")],
        server_name_override: Some("orderer.example.com".into()),
        ..ClientTlsConfig::default()
    };
    config.tls = TlsConfig {
        enabled: true,
        certificate: Some(peer_tls.join("server.crt")),
        private_key: Some(peer_tls.join("server.key")),
        client_root_cas: vec![peer_tls.join("ca.crt")],
        client_auth_required: true,
        ..TlsConfig::default()
    };
    let c = ferrofabric_committer::start(config).await.unwrap();
    tokio::time::timeout(Duration::from_secs(120), c.wait_for_height(29)).await.unwrap().unwrap();
    let addr = c.deliver_addr.to_string();

    // A follower with User1's TLS client certificate receives the whole chain.
    let mut follow = follow_config(&addr);
    follow.tls = Some(ClientTls {
        ca_pem: read(&peer_tls.join("ca.crt")),
        server_name: "peer0.org1.example.com".into(),
        identity: Some((read(&user_tls.join("client.crt")), read(&user_tls.join("client.key")))),
    });
    let (tx, mut rx) = mpsc::channel::<Fetched>(8);
    let follower = tokio::spawn(Follower::new(follow.clone(), Arc::new(user1(1))).run(0, tx, None));
    for (n, want) in peer_blocks.iter().enumerate() {
        let got = tokio::time::timeout(Duration::from_secs(60), rx.recv()).await.unwrap().unwrap();
        assert_eq!(got.number, n as u64);
        assert_eq!(&got.bytes, want);
    }
    drop(rx);
    follower.await.unwrap();

    // Without a client certificate no block comes through.
    let mut anonymous = follow;
    anonymous.tls.as_mut().unwrap().identity = None;
    let attempt = async {
        let ch = connect(&addr, &anonymous).await?;
        let req = seek_envelope("mychannel", &user1(1), &seek_from(0));
        let mut stream = open_deliver(ch, DeliverApi::Peer, req).await?;
        anyhow::Ok(stream.message().await?)
    };
    let refused = tokio::time::timeout(Duration::from_secs(30), attempt).await.unwrap();
    assert!(!matches!(refused, Ok(Some(DeliverItem::Block(_)))), "a client without certificate received a block");
    assert!(refused.is_err(), "the TLS handshake must fail without a client certificate: {refused:?}");

    c.shutdown().await.unwrap();
    orderer.shutdown().await;
}

async fn start_orderer_with_tls(data: &Path, tls: TlsConfig) -> ferrofabric_orderer::RunningOrderer {
    let mut c = ferrofabric_orderer::OrdererConfig::defaults();
    c.general.listen_address = "127.0.0.1".into();
    c.general.listen_port = 0;
    c.general.tls = tls;
    c.admin.listen_address = String::new();
    c.operations.listen_address = String::new();
    c.general.local_msp_dir = Some(orderer_msp());
    c.general.local_msp_id = Some("OrdererMSP".into());
    c.general.cluster.client_certificate = Some(orderer_tls_cert());
    c.file_ledger.location = Some(data.to_path_buf());
    c.ferrofabric.sync_every_block = false;
    let start = ferrofabric_orderer::start(c, crate::support::solo_plugins());
    tokio::time::timeout(Duration::from_secs(60), start).await.unwrap().unwrap()
}
