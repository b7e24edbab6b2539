//! `ferrofabric node`'s network in one process ([`start`]): orderer, committer, block-store service and the two
//! peers' endorsers and ports on this tokio runtime; see the crate documentation.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use bytes::Bytes;
use ferrofabric_block_store::BlockStore;
use ferrofabric_blockstore_service::{BlockstoreConfig, RunningBlockstore};
use ferrofabric_chaincode_support::{ChaincodeSupport, Timeouts};
use ferrofabric_comm::TlsConfig;
use ferrofabric_committer::{CommitterConfig, RunningCommitter};
use ferrofabric_endorser::{
    BlockSource, DaemonLedger, Endorser, EndorserService, RecentBlocks, Replica, MAX_MESSAGE_SIZE,
};
use ferrofabric_gateway::{EndorserEndpoint, Gateway, GatewayConfig, GossipSigner};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_orderer::{OrdererConfig, RunningOrderer};
use ferrofabric_protos::peer::endorser_server::{Endorser as EndorserApi, EndorserServer};
use ferrofabric_protos::peer::{ProposalResponse, SignedProposal};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::address::addr;
use crate::args::NodeArgs;
use crate::chaincode_definitions::{define_chaincodes, Barrier};
use crate::layout::{absolute, ChannelParams, Layout, TlsMode, PEER_MSPIDS};
use crate::profile::NodeInfo;
use crate::running_node::RunningNode;

/// How long a proposal on a peer port waits for its endorser's replica to catch up with the committer.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(5);

/// The Endorser of a peer port. A Fabric peer sends a commit event only after its own state holds the block, so a
/// client that endorses its next transaction when the event arrives reads its own writes. Here the events come from
/// the committer and the endorser's replica follows the committer a moment later, so a proposal first waits (at most
/// [`CATCH_UP_TIMEOUT`], then it is simulated anyway) until the replica has every block the committer had stored
/// when the proposal arrived.
#[derive(Clone)]
struct PeerEndorser {
    inner: EndorserService,
    committed: Arc<BlockStore>,
}

#[tonic::async_trait]
impl EndorserApi for PeerEndorser {
    async fn process_proposal(
        &self,
        request: tonic::Request<SignedProposal>,
    ) -> Result<tonic::Response<ProposalResponse>, tonic::Status> {
        let target = self.committed.height();
        let deadline = Instant::now() + CATCH_UP_TIMEOUT;
        while self.inner.0.replica().height() < target && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.inner.process_proposal(request).await
    }
}

/// Starts a node on the current (multi-threaded) tokio runtime: first-run generation (see [`Layout`]),
/// orderer, committer, endorsers, peer listeners, block-store service, chaincode definitions; then writes
/// `node.json` and `connection-profile.json`.
///
/// Errors: generation, start-up (e.g. a port in use) or definition failures, each with context.
pub async fn start(args: &NodeArgs) -> anyhow::Result<RunningNode> {
    let layout = Layout::new(&args.dir);
    let mode = args.tls_mode();
    let (genesis, channel_id) = generate_channel(args, &layout).await?;
    // The TLS CA bundle, which clients trust and, under mutual TLS, every listener checks client certificates with.
    let tls_ca = if mode.on { Some(layout.write_tls_ca_bundle()?) } else { None };
    let setup = Setup { args, layout: &layout, mode, tls_ca: tls_ca.as_deref() };

    let orderer = start_orderer(&setup, &channel_id, &genesis).await?;
    let committer = start_committer(&setup, &channel_id, &orderer).await?;
    let blockstore = start_blockstore(&setup, &channel_id, &committer).await?;
    let (shutdown, shutdown_rx) = watch::channel(false);
    let peers = start_peers(&setup, &genesis, &orderer, &committer, &blockstore, &shutdown_rx)?;

    let info = NodeInfo {
        channel: channel_id,
        orderer: orderer.grpc_addr.to_string(),
        peers: peers.addresses,
        blockstore: blockstore.listen_addr.to_string(),
        events: None,
        tls_ca: tls_ca.as_deref().map(absolute),
        tls_client: mode.user_pair(&layout),
        operations: [
            ("orderer", orderer.operations_addr),
            ("committer", committer.operations_addr),
            ("blockstore", blockstore.operations_addr),
        ]
        .into_iter()
        .filter_map(|(c, a)| Some((c.to_owned(), a?.to_string())))
        .collect(),
        crypto: absolute(&layout.crypto()),
        connection_profile: absolute(&layout.connection_profile()),
    };
    let node = RunningNode {
        info,
        layout,
        committer,
        endorsers: peers.endorsers,
        chaincodes: peers.chaincodes,
        orderer,
        blockstore,
        shutdown,
        tasks: peers.tasks,
    };
    if let Err(e) = define_chaincodes(&node.info, &node.layout, &|m| args.progress(m), Barrier::Replicas(&node)).await {
        let _ = node.shutdown().await;
        return Err(e.context("defining the chaincodes"));
    }
    crate::profile::write_atomically(
        &node.layout.connection_profile(),
        &serde_json::to_vec_pretty(&node.info.connection_profile())?,
    )?;
    node.info.write(&node.layout.node_json())?;
    Ok(node)
}

/// What every step of [`start`] after the channel's generation works from.
struct Setup<'a> {
    args: &'a NodeArgs,
    /// The node directory.
    layout: &'a Layout,
    /// How the listeners speak TLS.
    mode: TlsMode,
    /// The TLS CA bundle, when the listeners speak TLS.
    tls_ca: Option<&'a Path>,
}

impl Setup<'_> {
    /// The TLS settings of a listener serving with the certificate of `node`.
    fn listener_tls(&self, node: &Path) -> TlsConfig {
        self.mode.listener(self.layout, node)
    }

    /// The MSP directory of peer organisation `org`'s peer.
    fn peer_msp(&self, org: usize) -> PathBuf {
        self.layout.peer_node(org).join("msp")
    }
}

/// First-run generation of crypto material and channel (see [`Layout`]); answers the genesis block and the channel
/// ID.
async fn generate_channel(args: &NodeArgs, layout: &Layout) -> anyhow::Result<(Bytes, String)> {
    let params = ChannelParams {
        channel: args.channel.clone(),
        batch_size: args.batch_size,
        batch_timeout: args.batch_timeout.clone(),
        orderer_host: args.host.clone(),
        orderer_port: if args.orderer_port == 0 { 7050 } else { args.orderer_port },
    };
    let genesis = {
        let (layout, args2) = (layout.clone(), args.clone());
        tokio::task::spawn_blocking(move || crate::layout::ensure(&layout, &params, &|m| args2.progress(m))).await??
    };
    let channel_id = ferrofabric_endorser::Replica::from_genesis(genesis.clone())
        .map_err(|e| anyhow!("the genesis block: {e}"))?
        .channel_id()
        .to_owned();
    Ok((genesis, channel_id))
}

/// Starts the orderer and joins it to the channel on the first run.
async fn start_orderer(s: &Setup<'_>, channel_id: &str, genesis: &Bytes) -> anyhow::Result<RunningOrderer> {
    let (args, layout) = (s.args, s.layout);
    args.progress("starting the orderer");
    let mut oc = OrdererConfig::defaults();
    oc.general.listen_address = args.host.clone();
    oc.general.listen_port = args.orderer_port;
    oc.general.tls = s.listener_tls(&layout.orderer_node());
    oc.admin.listen_address = String::new();
    oc.operations.listen_address = addr(&args.host, args.orderer_operations_port);
    oc.general.local_msp_dir = Some(layout.orderer_node().join("msp"));
    oc.general.local_msp_id = Some("OrdererMSP".into());
    oc.file_ledger.location = Some(layout.dir.join("orderer"));
    // One etcdraft consenter, run as Fabric's test network runs it: Raft over its WAL (so that its blocks carry
    // etcdraft's consenter metadata), the node named among the consenters by its TLS certificate.
    oc.general.cluster.client_certificate = Some(layout.orderer_node().join("tls/server.crt"));
    oc.general.cluster.client_private_key = Some(layout.orderer_node().join("tls/server.key"));
    oc.consensus.wal_dir = Some(layout.dir.join("orderer/etcdraft/wal"));
    oc.consensus.snap_dir = Some(layout.dir.join("orderer/etcdraft/snapshot"));
    let plugins = ferrofabric_consensus::backends(&oc).context("the orderer's Raft cluster")?;
    let orderer = ferrofabric_orderer::start(oc, plugins).await.context("starting the orderer")?;
    if orderer.registrar.channel(channel_id).is_none() {
        let registrar = orderer.registrar.clone();
        let g = genesis.clone();
        tokio::task::spawn_blocking(move || registrar.join(g)).await?.context("joining the orderer to the channel")?;
    }
    Ok(orderer)
}

/// Starts the committer (its own Deliver listener is internal: replicas and the block store follow it there).
async fn start_committer(
    s: &Setup<'_>,
    channel_id: &str,
    orderer: &RunningOrderer,
) -> anyhow::Result<RunningCommitter> {
    let (args, layout) = (s.args, s.layout);
    args.progress("starting the committer");
    ferrofabric_committer::start(CommitterConfig {
        channel: Some(channel_id.to_owned()),
        genesis_block: Some(layout.genesis()),
        data_dir: Some(layout.dir.join("committer")),
        local_msp_dir: Some(s.peer_msp(0)),
        local_msp_id: Some(PEER_MSPIDS[0].into()),
        orderers: vec![orderer.grpc_addr.to_string()],
        orderer_tls: s.mode.client(vec![layout.orderer_node().join("tls/ca.crt")], &layout.peer_node(0)),
        listen_address: addr(&args.host, 0),
        operations_listen_address: addr(&args.host, args.operations_port),
        ..CommitterConfig::default()
    })
    .await
    .context("starting the committer")
}

/// Starts the block-store service (before the peer ports: their gateways read older blocks from it).
async fn start_blockstore(
    s: &Setup<'_>,
    channel_id: &str,
    committer: &RunningCommitter,
) -> anyhow::Result<RunningBlockstore> {
    let (args, layout) = (s.args, s.layout);
    args.progress("starting the block-store service");
    ferrofabric_blockstore_service::start(BlockstoreConfig {
        channel: channel_id.to_owned(),
        data_dir: Some(layout.dir.join("blockstore")),
        local_msp_dir: Some(s.peer_msp(0)),
        local_msp_id: Some(PEER_MSPIDS[0].into()),
        committers: vec![committer.deliver_addr.to_string()],
        listen_address: addr(&args.host, args.blockstore_port),
        tls: s.listener_tls(&layout.peer_node(0)),
        operations_listen_address: addr(&args.host, 0),
        ..BlockstoreConfig::default()
    })
    .await
    .context("starting the block-store service")
}

/// The endorsers and peer ports [`start_peers`] started, Org1's first.
struct Peers {
    /// The peer listeners and the replicas' followers.
    tasks: Vec<JoinHandle<()>>,
    /// The endorsers.
    endorsers: Vec<Endorser>,
    /// The peers' chaincode support.
    chaincodes: Vec<Arc<ChaincodeSupport>>,
    /// Each peer port's address by MSP ID.
    addresses: BTreeMap<String, String>,
}

/// Starts the endorsers, each with its replica following the committer, and serves the peer ports; their tasks
/// stop when `shutdown_rx` turns true.
fn start_peers(
    s: &Setup<'_>,
    genesis: &Bytes,
    orderer: &RunningOrderer,
    committer: &RunningCommitter,
    blockstore: &RunningBlockstore,
    shutdown_rx: &watch::Receiver<bool>,
) -> anyhow::Result<Peers> {
    let (args, layout, tls_ca) = (s.args, s.layout, s.tls_ca);
    // What a peer presents as a TLS client (to the orderer, to the other peers) under mutual TLS.
    let peer_client_pair = |node: &Path| s.mode.client_pair(node);
    args.progress("starting the endorsers");
    let mut tasks = Vec::new();
    let mut endorsers = Vec::new();
    let mut chaincode_supports = Vec::new();
    let mut peers = BTreeMap::new();
    // Both peer ports are bound before either serves, so that each port's gateway knows both endorsers.
    let mut ports = Vec::new();
    for (org, port) in [(0, args.peer_port), (1, args.peer2_port)] {
        let mspid = PEER_MSPIDS[org];
        let signer = SigningIdentity::from_msp_dir(mspid, &s.peer_msp(org))
            .with_context(|| format!("loading the peer identity of {mspid}"))?;
        let listen = ferrofabric_comm::parse_addr(&addr(&args.host, port))?;
        let (incoming, bound) =
            ferrofabric_comm::bind_grpc(listen).with_context(|| format!("starting the peer listener of {mspid}"))?;
        ports.push((org, mspid, signer, incoming, bound));
    }
    let gateway_endorsers: Vec<EndorserEndpoint> = ports
        .iter()
        .map(|(_, mspid, signer, _, bound)| EndorserEndpoint {
            mspid: (*mspid).to_owned(),
            address: bound.to_string(),
            identity: signer.serialized().clone(),
        })
        .collect();
    // This process holds every peer's key: each peer's gossip messages are signed with its own.
    let gateway_signers: HashMap<String, GossipSigner> = ports
        .iter()
        .map(|(_, _, signer, _, bound)| {
            let signer = signer.clone();
            (bound.to_string(), GossipSigner(Arc::new(move |m: &[u8]| signer.sign(m))))
        })
        .collect();
    for (org, mspid, signer, incoming, bound) in ports {
        let replica =
            Arc::new(Replica::from_genesis(genesis.clone()).map_err(|e| anyhow!("genesis block: {e}"))?.with_history());
        let recent = Arc::new(RecentBlocks::new(replica.height()));
        let packages = layout.peer_data(org).join("lifecycle").join("chaincodes");
        let chaincodes = ChaincodeSupport::new(&packages, Timeouts::default())
            .map_err(|e| anyhow!("chaincode package store {}: {e}", packages.display()))?;
        tasks.push(tokio::spawn(ferrofabric_endorser::follow_with(
            replica.clone(),
            committer.deliver_addr.to_string(),
            None,
            Arc::new(signer.clone()),
            Some(recent.clone()),
            shutdown_rx.clone(),
        )));
        let client_tls = crate::profile::client_tls(tls_ca, peer_client_pair(&layout.peer_node(org)))?;
        let source = BlockSource { address: blockstore.listen_addr.to_string(), tls: client_tls.clone() };
        let ledger = Arc::new(DaemonLedger::new(replica.clone(), recent.clone(), Some(source)));
        let endorser = Endorser::new(replica.clone(), signer.clone(), ferrofabric_chaincode_registry())
            .with_ledger(ledger.clone())
            .with_chaincode_support(chaincodes.clone());
        let deliver = committer.deliver_service();
        let service = EndorserServer::new(PeerEndorser {
            inner: EndorserService(endorser.clone()),
            committed: committer.store.clone(),
        })
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE);
        let gateway = Gateway::new(
            GatewayConfig {
                local_mspid: mspid.to_owned(),
                endorsers: gateway_endorsers.clone(),
                orderers: vec![orderer.grpc_addr.to_string()],
                tls: client_tls,
                signers: gateway_signers.clone(),
                ..GatewayConfig::default()
            },
            ledger,
            ferrofabric_comm::Shutdown::from_watch(shutdown_rx.clone()),
        );
        let discovery = gateway.discovery_service();
        let gateway = gateway.into_service();
        let router = ferrofabric_comm::grpc_server_builder(&s.listener_tls(&layout.peer_node(org)))?
            .add_service(service)
            .add_service(ferrofabric_comm::StreamService(deliver))
            .add_service(gateway)
            .add_service(discovery)
            .add_service(chaincodes.register_service());
        tasks.push(ferrofabric_comm::spawn_grpc_server(
            router,
            incoming,
            ferrofabric_comm::Shutdown::from_watch(shutdown_rx.clone()),
        ));
        peers.insert(mspid.to_owned(), bound.to_string());
        endorsers.push(endorser);
        chaincode_supports.push(chaincodes);
    }
    Ok(Peers { tasks, endorsers, chaincodes: chaincode_supports, addresses: peers })
}

/// The chaincodes the endorsers run (the built-ins).
fn ferrofabric_chaincode_registry() -> ferrofabric_chaincode::Registry {
    ferrofabric_chaincode::Registry::builtin()
}
