//! Raft membership changes by config update, as Fabric 2.5 makes them: each orderer a separate process on
//! 127.0.0.1 (see [`super::raft`]), the consenter set changed by CONFIG_UPDATEs the orderer organization's admin
//! signs, one consenter at a time.
//!
//! * [`raft_consenter_added_removed_and_rotated_by_config_update`]: three consenters; two added at once is
//!   refused (BAD_REQUEST, Fabric's message); a fourth is added, joins with the genesis block, on-boards and
//!   orders; one is removed while down, and once restarted pulls the config block that removed it and halts; one
//!   has its TLS certificate rotated and, restarted with the new certificate, orders again under its Raft ID.
//! * [`raft_single_consenter_channel_grows_to_three`]: a channel with one consenter runs Raft and grows to three;
//!   then its first consenter, the leader, is removed: it hands leadership over and halts.
//!
//! Both check that every live node holds the same chain, that every transaction answered SUCCESS is in it
//! exactly once, and that the blocks' `etcdraft.BlockMetadata` carry Fabric's consenter IDs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_comm::{broadcast, connect, ClientTls};
use ferrofabric_configtx::{compute_update, config_update_envelope};
use ferrofabric_consensus_etcdraft::block_raft_metadata;
use ferrofabric_protos::common::{Block, Config, Status};
use ferrofabric_protos::etcdraft::{ConfigMetadata, Consenter};
use ferrofabric_protos::orderer::ConsensusType;
use ferrofabric_protoutil::sole_config_envelope;
use ferrofabric_testkit::{Network, Workload, ORDERER_ORG};
use futures::StreamExt;
use prost::Message;

use super::raft::{
    block_tx_ids, broadcast_round, cluster_lock, fetch_chain, height, http, join, leader_from_logs, raft_genesis,
    tls_material, wait_for, Node, Nodes, CHANNEL,
};

/// Transactions per round of ordering.
const ROUND: usize = 30;

/// A cluster of orderer processes on one channel, grown and shrunk by the tests.
struct Cluster {
    net: Arc<Network>,
    root: PathBuf,
    msp: PathBuf,
    tls: ClientTls,
    certs: Vec<(String, String)>,
    ports: Vec<(u16, u16)>,
    genesis: Bytes,
    nodes: Nodes,
    /// Transaction rounds still to send.
    rounds: Vec<Vec<(String, Bytes)>>,
    /// IDs of the transactions answered SUCCESS.
    succeeded: Vec<String>,
    /// Dropped last, after the nodes are killed and their logs shown.
    _dir: tempfile::TempDir,
}

fn consenter(cert: &str, port: u16) -> Consenter {
    Consenter {
        host: "127.0.0.1".into(),
        port: u32::from(port),
        client_tls_cert: Bytes::from(cert.to_owned()),
        server_tls_cert: Bytes::from(cert.to_owned()),
    }
}

impl Cluster {
    /// `certs` TLS identities (the first `initial` are the genesis consenters), `rounds` rounds of transactions.
    async fn new(certs: usize, initial: usize, rounds: usize) -> Cluster {
        let net = Arc::new(tokio::task::spawn_blocking(|| Network::generate(41).unwrap()).await.unwrap());
        let txs = {
            let net = net.clone();
            tokio::task::spawn_blocking(move || {
                let w = Workload::new(&net, 700);
                let built = w.transfer_txs((rounds * ROUND) as u64, 16, |_| None).unwrap();
                let all: Vec<(String, Bytes)> = built.into_iter().map(|b| (b.tx_id, b.envelope)).collect();
                all.chunks(ROUND).map(<[_]>::to_vec).collect::<Vec<_>>()
            })
        };
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        net.write_msp_dirs(&root.join("crypto")).unwrap();
        let msp = root.join("crypto/ordererOrganizations/example.com/orderers/orderer.example.com/msp");
        let (ca_pem, certs) = tls_material(certs);
        std::fs::write(root.join("ca.crt"), &ca_pem).unwrap();
        let ports: Vec<(u16, u16)> = (0..certs.len())
            .map(|_| {
                (
                    ferrofabric_comm::unused_port("127.0.0.1").unwrap(),
                    ferrofabric_comm::unused_port("127.0.0.1").unwrap(),
                )
            })
            .collect();
        let consenters = (0..initial).map(|i| consenter(&certs[i].0, ports[i].0)).collect();
        let genesis = raft_genesis(&net.genesis_block(), consenters);
        let tls = ClientTls { ca_pem: ca_pem.into_bytes(), server_name: "127.0.0.1".into(), identity: None };
        let mut cluster = Cluster {
            net,
            _dir: dir,
            root,
            msp,
            tls,
            certs,
            ports,
            genesis,
            nodes: Nodes(Vec::new()),
            rounds: txs.await.unwrap(),
            succeeded: Vec::new(),
        };
        for i in 0..initial {
            cluster.start_and_join(i).await;
        }
        cluster
    }

    /// Configures node `i` with TLS identity `i`, starts it and joins it to the channel with the genesis block.
    async fn start_and_join(&mut self, i: usize) {
        let ((cert, key), (port, admin)) = (&self.certs[i], self.ports[i]);
        let mut node = Node::configure(&self.root, i, cert, key, port, admin, &self.msp);
        node.start();
        let addr = node.admin;
        assert_eq!(self.nodes.0.len(), i, "nodes are added in order");
        self.nodes.0.push(node);
        wait_for("the admin listener", Duration::from_secs(30), || {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()
        })
        .await;
        let (status, body) = join(addr, &self.genesis).await;
        assert_eq!(status, 201, "join: {}", String::from_utf8_lossy(&body));
    }

    /// The channel configuration as of node `i`'s last config block.
    async fn config(&self, i: usize) -> Config {
        let node = &self.nodes.0[i];
        let h = height(node.admin).await.unwrap();
        let chain = fetch_chain(node.grpc, &self.tls, &self.net, h).await;
        let env = chain.iter().rev().find_map(|b| sole_config_envelope(&Block::decode(b.clone()).unwrap())).unwrap();
        ChannelConfig::from_envelope(&env).unwrap().config().clone()
    }

    /// A CONFIG_UPDATE, signed by the orderer organization's admin, setting the consenters to `consenters`.
    async fn consenters_update(&self, via: usize, consenters: Vec<Consenter>) -> Bytes {
        let current = self.config(via).await;
        let mut updated = current.clone();
        let orderer = updated.channel_group.as_mut().unwrap().groups.get_mut("Orderer").unwrap();
        let value = orderer.values.get_mut("ConsensusType").unwrap();
        let mut ct = ConsensusType::decode(value.value.clone()).unwrap();
        let mut md = ConfigMetadata::decode(ct.metadata.clone()).unwrap();
        md.consenters = consenters;
        ct.metadata = Bytes::from(md.encode_to_vec());
        value.value = Bytes::from(ct.encode_to_vec());
        let update = compute_update(CHANNEL, &current, &updated).unwrap();
        let admin = self.net.admin(ORDERER_ORG);
        Bytes::from(config_update_envelope(CHANNEL, &update, &[admin], admin).encode_to_vec())
    }

    /// The consenters of node `i`'s current configuration.
    async fn consenters(&self, i: usize) -> Vec<Consenter> {
        let config = self.config(i).await;
        let orderer = &config.channel_group.as_ref().unwrap().groups["Orderer"];
        let ct = ConsensusType::decode(orderer.values["ConsensusType"].value.clone()).unwrap();
        ConfigMetadata::decode(ct.metadata).unwrap().consenters
    }

    /// Sends `update` to node `via` and waits until the nodes `live` hold the config block it made.
    async fn reconfigure(&self, via: usize, update: Bytes, live: &[usize]) -> u64 {
        let before = height(self.nodes.0[via].admin).await.unwrap();
        let (status, info) = broadcast_one(self.nodes.0[via].grpc, &self.tls, update).await;
        assert_eq!(status, Status::Success as i32, "the CONFIG_UPDATE was refused: {info}");
        self.converge(live, before + 1).await
    }

    /// Waits until the nodes `live` have the same height, at least `at_least`, for half a second.
    async fn converge(&self, live: &[usize], at_least: u64) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut last = Vec::new();
        loop {
            let mut hs = Vec::new();
            for i in live {
                hs.push(height(self.nodes.0[*i].admin).await.unwrap_or(0));
            }
            if hs.iter().all(|h| *h == hs[0] && *h >= at_least) && hs == last {
                return hs[0];
            }
            assert!(Instant::now() < deadline, "heights of nodes {live:?} did not converge: {hs:?}");
            last = hs;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Waits until node `i` logged `text`.
    async fn logged(&self, i: usize, text: &str) {
        let node = &self.nodes.0[i];
        wait_for(text, Duration::from_secs(30), || node.log_text().contains(text).then_some(())).await;
    }

    /// Orders the next round of transactions through node `via`; every one must be answered SUCCESS.
    async fn order_round(&mut self, via: usize) {
        let round = self.rounds.remove(0);
        let (ok, rejected) = broadcast_round(self.nodes.0[via].grpc, &self.tls, &round).await;
        assert_eq!((ok.len(), rejected), (round.len(), 0), "node {via} did not order a full round");
        self.succeeded.extend(ok);
    }

    /// Node `i`'s chain up to the common height of the nodes `live`, which must all hold the same chain,
    /// with every SUCCESS transaction exactly once; returns it.
    async fn check_chains(&self, live: &[usize]) -> Vec<Bytes> {
        let h = self.converge(live, 2).await;
        let mut chains = Vec::new();
        for i in live {
            chains.push(fetch_chain(self.nodes.0[*i].grpc, &self.tls, &self.net, h).await);
        }
        assert!(chains.iter().all(|c| c == &chains[0]), "the nodes' chains differ");
        let chain = chains.swap_remove(0);
        assert_eq!(chain[0], self.genesis);
        let mut ordered = HashSet::new();
        for b in &chain[1..] {
            if sole_config_envelope(&Block::decode(b.clone()).unwrap()).is_some() {
                continue;
            }
            for id in block_tx_ids(b) {
                assert!(ordered.insert(id.clone()), "transaction {id} was ordered twice");
            }
        }
        for id in &self.succeeded {
            assert!(ordered.contains(id), "transaction {id} got SUCCESS but was not ordered");
        }
        assert_eq!(ordered.len(), self.succeeded.len(), "transactions ordered without SUCCESS");
        chain
    }
}

/// Broadcasts one envelope; returns the answer's status and info.
async fn broadcast_one(addr: SocketAddr, tls: &ClientTls, env: Bytes) -> (i32, String) {
    let ch = connect(&addr.to_string(), Some(tls)).await.unwrap();
    let mut responses = broadcast(ch, futures::stream::iter(vec![env])).await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(30), responses.next()).await.unwrap().unwrap().unwrap();
    (r.status, r.info)
}

/// `status` of the channel in the participation API of the node at `admin`.
async fn channel_status(admin: SocketAddr) -> String {
    let (_, body) = http(admin, "GET", &format!("/participation/v1/channels/{CHANNEL}"), None, b"").await;
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    json["status"].as_str().unwrap_or_default().to_owned()
}

/// `(consenter_ids sorted, next_consenter_id)` of a block's Raft metadata.
fn raft_ids(raw: &Bytes) -> (Vec<u64>, u64) {
    let md = block_raft_metadata(raw).expect("a block without etcdraft metadata");
    let mut ids = md.consenter_ids;
    ids.sort_unstable();
    (ids, md.next_consenter_id)
}

/// Replaces node `i`'s TLS certificate and key files with `cert`, `key`.
fn rewrite_tls(root: &Path, i: usize, cert: &str, key: &str) {
    let home = root.join(format!("node{i}"));
    std::fs::write(home.join("tls.crt"), cert).unwrap();
    std::fs::write(home.join("tls.key"), key).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_consenter_added_removed_and_rotated_by_config_update() {
    let _cluster = cluster_lock().await;
    let started = Instant::now();
    // TLS identities 0..3: the genesis consenters; 3: the added node; 4: the rotated certificate.
    let mut c = Cluster::new(5, 3, 4).await;
    let (term, leader) = wait_for("a first leader", Duration::from_secs(20), || {
        leader_from_logs(&c.nodes.0.iter().map(Node::log_text).collect::<Vec<_>>())
    })
    .await;
    eprintln!("leader {leader} in term {term} after {:?}", started.elapsed());
    c.order_round(0).await;

    // Two consenters added at once: refused as Fabric refuses it.
    let mut two = c.consenters(0).await;
    two.push(consenter(&c.certs[3].0, c.ports[3].0));
    two.push(consenter(&c.certs[4].0, c.ports[4].0));
    let update = c.consenters_update(0, two).await;
    let (status, info) = broadcast_one(c.nodes.0[1].grpc, &c.tls, update).await;
    assert_eq!(status, Status::BadRequest as i32, "{info}");
    assert!(
        info.contains(
            "consensus metadata update for channel config update is invalid: update of more than one consenter at a \
             time is not supported, requested changes: add 2 node(s), remove 0 node(s)"
        ),
        "{info}"
    );

    // A fourth consenter: added by config update, joined with the genesis block, on-boarded, ordering.
    let mut four = c.consenters(0).await;
    four.push(consenter(&c.certs[3].0, c.ports[3].0));
    let update = c.consenters_update(0, four).await;
    let at = c.reconfigure(1, update, &[0, 1, 2]).await;
    c.start_and_join(3).await;
    c.logged(3, "this orderer is now a consenter of the channel").await;
    // It knows the four voters (its AddNode replayed from the genesis voters, or a snapshot's).
    c.logged(3, "voters=[1, 2, 3, 4]").await;
    c.converge(&[0, 1, 2, 3], at).await;
    c.order_round(3).await;
    eprintln!("fourth consenter added and ordering after {:?}", started.elapsed());

    // A follower removed while it is down (SIGKILL), so that it misses the config block and the RemoveNode:
    // the other three order; restarted, it finds no leader, pulls the config block that removed it (Fabric's
    // eviction suspicion) and halts.
    let (_, leader) = leader_from_logs(&c.nodes.0.iter().map(Node::log_text).collect::<Vec<_>>()).unwrap();
    let victim = (0..3).find(|i| *i as u64 + 1 != leader).unwrap();
    let mut three = c.consenters(3).await;
    three.retain(|x| x.port != u32::from(c.ports[victim].0));
    let live: Vec<usize> = (0..4).filter(|i| *i != victim).collect();
    let update = c.consenters_update(3, three).await;
    c.nodes.0[victim].kill();
    c.reconfigure(3, update, &live).await;
    c.order_round(live[0]).await;
    c.nodes.0[victim].start();
    c.logged(victim, "pulling blocks to see whether this node was removed").await;
    c.logged(victim, "this node was removed from the consenters; halting the chain").await;
    assert_eq!(channel_status(c.nodes.0[victim].admin).await, "inactive");
    eprintln!("consenter {} removed after {:?}", victim + 1, started.elapsed());

    // A consenter's TLS certificate rotated: the update, then a restart with the new certificate; it keeps
    // its Raft ID and orders.
    let (_, leader) = leader_from_logs(&live.iter().map(|i| c.nodes.0[*i].log_text()).collect::<Vec<_>>()).unwrap();
    let rotated = *live.iter().find(|i| **i as u64 + 1 != leader && **i != 3).unwrap();
    let mut rotation = c.consenters(3).await;
    for x in &mut rotation {
        if x.port == u32::from(c.ports[rotated].0) {
            *x = consenter(&c.certs[4].0, c.ports[rotated].0);
        }
    }
    let update = c.consenters_update(3, rotation).await;
    // From the config block on, the others refuse the rotated node's old certificate, its acknowledgements
    // included, so it may not learn that the block committed until it restarts with the new one (as in Fabric).
    let others: Vec<usize> = live.iter().copied().filter(|i| *i != rotated).collect();
    c.reconfigure(3, update, &others).await;
    c.nodes.0[rotated].kill();
    let (cert, key) = c.certs[4].clone();
    rewrite_tls(&c.root, rotated, &cert, &key);
    c.nodes.0[rotated].start();
    let admin = c.nodes.0[rotated].admin;
    wait_for("the restarted admin listener", Duration::from_secs(30), || {
        std::net::TcpStream::connect_timeout(&admin, Duration::from_millis(200)).ok()
    })
    .await;
    c.order_round(rotated).await;
    eprintln!("consenter {} rotated after {:?}", rotated + 1, started.elapsed());

    let chain = c.check_chains(&live).await;
    let expected: Vec<u64> = [1, 2, 3, 4].into_iter().filter(|id| *id != victim as u64 + 1).collect();
    assert_eq!(raft_ids(chain.last().unwrap()), (expected, 5));
    assert_eq!(raft_ids(&chain[1]), (vec![1, 2, 3], 4));
    // The removed node's chain is a prefix of the others'.
    let victim_height = height(c.nodes.0[victim].admin).await.unwrap();
    let victim_chain = fetch_chain(c.nodes.0[victim].grpc, &c.tls, &c.net, victim_height).await;
    assert_eq!(victim_chain[..], chain[..victim_chain.len()]);
    eprintln!("{} blocks; done in {:?}", chain.len(), started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_single_consenter_channel_grows_to_three() {
    let _cluster = cluster_lock().await;
    let started = Instant::now();
    let mut c = Cluster::new(3, 1, 4).await;
    c.logged(0, "etcdraft chain started").await;
    c.order_round(0).await;
    for i in 1..3 {
        let mut next = c.consenters(0).await;
        next.push(consenter(&c.certs[i].0, c.ports[i].0));
        let update = c.consenters_update(0, next).await;
        let live: Vec<usize> = (0..i).collect();
        let at = c.reconfigure(0, update, &live).await;
        c.start_and_join(i).await;
        c.logged(i, "this orderer is now a consenter of the channel").await;
        c.converge(&(0..=i).collect::<Vec<_>>(), at).await;
        c.order_round(i).await;
        // The new node is a Raft voter: the leader and the new node applied its AddNode.
        let voters = format!("voters=[{}]", (1..=i as u64 + 1).map(|v| v.to_string()).collect::<Vec<_>>().join(", "));
        c.logged(0, &voters).await;
        c.logged(i, &voters).await;
        eprintln!("grown to {} consenters after {:?}", i + 1, started.elapsed());
    }
    c.check_chains(&[0, 1, 2]).await;

    // The first consenter, the leader all along, is removed: it hands leadership over, the RemoveNode is
    // applied and it halts; the other two order.
    let mut rest = c.consenters(1).await;
    rest.retain(|x| x.port != u32::from(c.ports[0].0));
    let update = c.consenters_update(1, rest).await;
    c.reconfigure(1, update, &[1, 2]).await;
    c.logged(0, "this leader is no longer a consenter; transferring leadership").await;
    c.logged(0, "this node was removed from the consenters; halting the chain").await;
    c.order_round(2).await;
    let chain = c.check_chains(&[1, 2]).await;
    assert_eq!(raft_ids(&chain[1]), (vec![1], 2));
    assert_eq!(raft_ids(chain.last().unwrap()), (vec![2, 3], 4));
    eprintln!("{} blocks; done in {:?}", chain.len(), started.elapsed());
}
