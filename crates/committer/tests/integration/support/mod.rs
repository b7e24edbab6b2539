//! Shared helpers of the committer tests: the Fabric 2.5 fixtures, a real Ferrofabric orderer serving a given
//! ledger on loopback, committer configurations, and peer Deliver clients.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_block_store::{BlockStore, StoreOptions, SyncPolicy};
use ferrofabric_comm::{open_deliver, DeliverApi, DeliverItem};
use ferrofabric_committer::CommitterConfig;
use ferrofabric_deliver::{connect, seek_envelope, FollowConfig};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_orderer::{start, OrdererConfig, Plugins, RunningOrderer};
use ferrofabric_protos::common::{Envelope, Status};
use ferrofabric_protos::orderer::{seek_info, seek_position, SeekInfo, SeekPosition, SeekSpecified};
use ferrofabric_protos::peer::deliver_client::DeliverClient;
use ferrofabric_protos::peer::deliver_response::Type as PeerResponse;
use ferrofabric_protos::peer::FilteredBlock;
use ferrofabric_testkit::{fabric_fixture, fabric_fixtures_dir, fixture};
use prost::Message;

pub(crate) fn orderer_msp() -> PathBuf {
    fabric_fixture("crypto/ordererOrganizations/example.com/orderers/orderer.example.com/msp")
}

pub(crate) fn orderer_tls_cert() -> PathBuf {
    fabric_fixture("crypto/ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt")
}

pub(crate) fn user1_msp(org: u32) -> PathBuf {
    fabric_fixture(format!("crypto/peerOrganizations/org{org}.example.com/users/User1@org{org}.example.com/msp"))
}

pub(crate) fn user1(org: u32) -> SigningIdentity {
    SigningIdentity::from_msp_dir(&format!("Org{org}MSP"), &user1_msp(org)).unwrap()
}

pub(crate) fn orderer_identity() -> SigningIdentity {
    SigningIdentity::from_msp_dir("OrdererMSP", &orderer_msp()).unwrap()
}

/// `[u64 LE length][block]` records.
pub(crate) fn records(data: &[u8]) -> Vec<Bytes> {
    ferrofabric_protoutil::records(Bytes::copy_from_slice(data)).map(|r| r.unwrap().1).collect()
}

/// The 29-block fixture ledger as the orderer delivered it and as Fabric's peer stored it.
pub(crate) fn fixture_ledger() -> (Vec<Bytes>, Vec<Bytes>) {
    let d = fabric_fixtures_dir();
    (
        records(&std::fs::read(d.join("orderer-blocks.bin")).unwrap()),
        records(&std::fs::read(d.join("peer-blocks.bin")).unwrap()),
    )
}

/// The 129-block, 10,735-transaction bench ledger: (orderer blocks, Fabric peer blocks).
pub(crate) fn bench_ledger() -> (Vec<Bytes>, Vec<Bytes>) {
    let d = fixture("fabric-2.5-bench");
    let read = |name: &str| {
        let file = ferrofabric_protoutil::read_ledger_file(d.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        records(&file)
    };
    (read("fabric-2.5-smallbank-10k.bin.zst"), read("fabric-2.5-smallbank-10k.peer.bin.zst"))
}

pub(crate) fn genesis_path() -> PathBuf {
    fabric_fixture("genesis.block")
}

/// A real orderer whose ledger of `mychannel` holds `blocks`, with its data directory.
pub(crate) struct TestOrderer {
    pub node: Option<RunningOrderer>,
    pub addr: String,
    pub dir: tempfile::TempDir,
}

impl TestOrderer {
    /// Writes `blocks` into `<dir>/chains/mychannel` and starts the orderer as the fixture's orderer.example.com.
    pub(crate) async fn start(blocks: &[Bytes]) -> TestOrderer {
        TestOrderer::start_as(blocks, "mychannel", &orderer_msp(), "OrdererMSP", &orderer_tls_cert()).await
    }

    /// Writes `blocks` into `<dir>/chains/<channel>` and starts the orderer with the local MSP `msp_dir` of
    /// `msp_id` and the TLS certificate `tls_cert` (its cluster identity).
    pub(crate) async fn start_as(
        blocks: &[Bytes],
        channel: &str,
        msp_dir: &Path,
        msp_id: &str,
        tls_cert: &Path,
    ) -> TestOrderer {
        TestOrderer::start_on(blocks, channel, msp_dir, msp_id, tls_cert, "127.0.0.1:0").await
    }

    /// [`TestOrderer::start_as`] listening on `listen`.
    pub(crate) async fn start_on(
        blocks: &[Bytes],
        channel: &str,
        msp_dir: &Path,
        msp_id: &str,
        tls_cert: &Path,
        listen: &str,
    ) -> TestOrderer {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = BlockStore::open(
                &dir.path().join("chains").join(channel),
                StoreOptions { sync: SyncPolicy::None, ..StoreOptions::default() },
            )
            .unwrap();
            for b in blocks {
                store.append(b.clone()).unwrap();
            }
            store.sync().unwrap();
        }
        let node = start_orderer_as(dir.path(), listen, msp_dir, msp_id, tls_cert).await;
        let addr = node.grpc_addr.to_string();
        TestOrderer { node: Some(node), addr, dir }
    }

    pub(crate) async fn stop(&mut self) {
        if let Some(n) = self.node.take() {
            n.shutdown().await;
        }
    }
}

pub(crate) async fn start_orderer(data: &Path, listen: &str) -> RunningOrderer {
    start_orderer_as(data, listen, &orderer_msp(), "OrdererMSP", &orderer_tls_cert()).await
}

/// The orderer on `data` with the local MSP `msp_dir` of `msp_id` and the cluster certificate `tls_cert`.
pub(crate) async fn start_orderer_as(
    data: &Path,
    listen: &str,
    msp_dir: &Path,
    msp_id: &str,
    tls_cert: &Path,
) -> RunningOrderer {
    let mut c = OrdererConfig::defaults();
    let addr: std::net::SocketAddr = listen.parse().unwrap();
    c.general.listen_address = addr.ip().to_string();
    c.general.listen_port = addr.port();
    c.admin.listen_address = String::new();
    c.operations.listen_address = String::new();
    c.general.local_msp_dir = Some(msp_dir.to_path_buf());
    c.general.local_msp_id = Some(msp_id.into());
    c.general.cluster.client_certificate = Some(tls_cert.to_path_buf());
    c.file_ledger.location = Some(data.to_path_buf());
    c.consensus.wal_dir = Some(data.join("etcdraft/wal"));
    c.consensus.snap_dir = Some(data.join("etcdraft/snap"));
    c.ferrofabric.sync_every_block = false;
    tokio::time::timeout(Duration::from_secs(60), start(c, solo_plugins())).await.unwrap().unwrap()
}

/// A committer configuration: User1@org1 signs, loopback listeners on free ports, the fixture genesis block.
pub(crate) fn committer_config(data: &Path, orderers: Vec<String>) -> CommitterConfig {
    CommitterConfig {
        channel: Some("mychannel".into()),
        genesis_block: Some(genesis_path()),
        data_dir: Some(data.to_path_buf()),
        local_msp_dir: Some(user1_msp(1)),
        local_msp_id: Some("Org1MSP".into()),
        orderers,
        listen_address: "127.0.0.1:0".into(),
        operations_listen_address: "127.0.0.1:0".into(),
        checkpoint_interval: 8,
        ..CommitterConfig::default()
    }
}

/// Writes `config` as a YAML file the CLI reads.
pub(crate) fn write_config_yaml(path: &Path, c: &CommitterConfig) {
    let mut y = String::new();
    y.push_str(&format!("Channel: {}\n", c.channel.clone().unwrap()));
    y.push_str(&format!("GenesisBlock: {}\n", c.genesis_block.as_ref().unwrap().display()));
    y.push_str(&format!("DataDir: {}\n", c.data_dir.as_ref().unwrap().display()));
    y.push_str(&format!("LocalMSPDir: {}\n", c.local_msp_dir.as_ref().unwrap().display()));
    y.push_str(&format!("LocalMSPID: {}\n", c.local_msp_id.as_ref().unwrap()));
    y.push_str(&format!(
        "Orderers: [{}]\n",
        c.orderers.iter().map(|o| format!("\"{o}\"")).collect::<Vec<_>>().join(", ")
    ));
    y.push_str(&format!("ListenAddress: \"{}\"\n", c.listen_address));
    y.push_str(&format!("OperationsListenAddress: \"{}\"\n", c.operations_listen_address));
    y.push_str(&format!("CheckpointInterval: {}\n", c.checkpoint_interval));
    y.push_str(&format!(
        "Pipeline: {{BlocksInFlight: {}, ValidationThreads: {}}}\n",
        c.pipeline.blocks_in_flight, c.pipeline.validation_threads
    ));
    y.push_str("Delivery: {ReconnectBackoffThreshold: 1s}\n");
    std::fs::write(path, y).unwrap();
}

/// A `SeekInfo` from `start` to `stop` (inclusive).
pub(crate) fn seek(start: u64, stop: u64, behavior: seek_info::SeekBehavior) -> SeekInfo {
    let at = |n| SeekPosition { r#type: Some(seek_position::Type::Specified(SeekSpecified { number: n })) };
    SeekInfo { start: Some(at(start)), stop: Some(at(stop)), behavior: behavior as i32, ..SeekInfo::default() }
}

pub(crate) fn follow_config(addr: &str) -> FollowConfig {
    FollowConfig {
        endpoints: vec![addr.to_string()],
        api: DeliverApi::Peer,
        channel_id: "mychannel".into(),
        tls: None,
        connect_timeout: Duration::from_secs(5),
        max_backoff: Duration::from_secs(1),
        keepalive_interval: Duration::from_secs(10),
        keepalive_timeout: Duration::from_secs(5),
        bft: None,
    }
}

/// Sends one request envelope on `/protos.Deliver/Deliver` of `addr`; returns the blocks and the final status.
pub(crate) async fn peer_deliver_raw(addr: &str, request: Bytes) -> (Vec<Bytes>, Option<i32>) {
    let fut = async {
        let ch = connect(addr, &follow_config(addr)).await.unwrap();
        let mut stream = open_deliver(ch, DeliverApi::Peer, request).await.unwrap();
        let mut blocks = Vec::new();
        loop {
            match stream.message().await {
                Ok(Some(DeliverItem::Block(b))) => blocks.push(b),
                Ok(Some(DeliverItem::Status(s))) => return (blocks, Some(s)),
                Ok(None) | Err(_) => return (blocks, None),
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), fut).await.expect("Deliver timed out")
}

/// Blocks `start..=stop` over the peer `Deliver` RPC, signed by `signer`.
pub(crate) async fn peer_deliver(
    addr: &str,
    signer: &SigningIdentity,
    start: u64,
    stop: u64,
) -> (Vec<Bytes>, Option<i32>) {
    let req = seek_envelope("mychannel", signer, &seek(start, stop, seek_info::SeekBehavior::BlockUntilReady));
    peer_deliver_raw(addr, req).await
}

/// Filtered blocks `start..=stop` over `DeliverFiltered` with Fabric's generated client.
pub(crate) async fn peer_deliver_filtered(
    addr: &str,
    signer: &SigningIdentity,
    start: u64,
    stop: u64,
) -> (Vec<FilteredBlock>, Option<i32>) {
    let fut = async {
        let req = seek_envelope("mychannel", signer, &seek(start, stop, seek_info::SeekBehavior::BlockUntilReady));
        let env = Envelope::decode(req).unwrap();
        let mut c = DeliverClient::connect(format!("http://{addr}")).await.unwrap();
        let mut stream = c.deliver_filtered(futures::stream::iter([env])).await.unwrap().into_inner();
        let mut out = Vec::new();
        while let Some(msg) = stream.message().await.unwrap() {
            match msg.r#type {
                Some(PeerResponse::FilteredBlock(f)) => out.push(f),
                Some(PeerResponse::Status(s)) => return (out, Some(s)),
                other => panic!("unexpected DeliverFiltered response {other:?}"),
            }
        }
        (out, None)
    };
    tokio::time::timeout(Duration::from_secs(60), fut).await.expect("DeliverFiltered timed out")
}

pub(crate) const SUCCESS: Option<i32> = Some(Status::Success as i32);

/// The node's plugins with the solo backend, which also serves the tests' single-consenter etcdraft channels.
pub(crate) fn solo_plugins() -> Plugins {
    let mut plugins = Plugins::default();
    ferrofabric_consensus_solo::register(&mut plugins.registry);
    plugins.registry.register("etcdraft", std::sync::Arc::new(ferrofabric_consensus_solo::SingleRaftNodeFactory));
    plugins
}

/// Waits until the committer's height reaches `height` (10 minutes at most: the co-simulated card is slow).
pub(crate) async fn wait_height(c: &ferrofabric_committer::RunningCommitter, height: u64) {
    tokio::time::timeout(Duration::from_secs(600), c.wait_for_height(height))
        .await
        .unwrap_or_else(|_| panic!("height {height} not reached; status {:?}", *c.status().borrow()))
        .unwrap();
}

/// Every block the committer stored, in order.
pub(crate) fn stored_chain(c: &ferrofabric_committer::RunningCommitter) -> Vec<Bytes> {
    c.store.blocks(..).map(|b| b.unwrap()).collect()
}

/// Asserts that the committer stored exactly the bytes Fabric's peer stored.
pub(crate) fn assert_fabric_peer_bytes(c: &ferrofabric_committer::RunningCommitter, peer_blocks: &[Bytes]) {
    let stored = stored_chain(c);
    assert_eq!(stored.len(), peer_blocks.len(), "every block once");
    for (n, (ours, fabric)) in stored.iter().zip(peer_blocks).enumerate() {
        assert!(ours == fabric, "block {n} differs from the bytes Fabric's peer stored");
    }
}
