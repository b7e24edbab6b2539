//! `ferrofabric node`: a whole Fabric network in one process ([`start`], [`run`]); see the crate documentation.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use ferrofabric_block_store::BlockStore;
use ferrofabric_blockstore_service::{BlockstoreConfig, RunningBlockstore};
use ferrofabric_chaincode_support::{ChaincodeSupport, Timeouts};
use ferrofabric_committer::{CommitterConfig, RunningCommitter};
use ferrofabric_endorser::{
    BlockSource, DaemonLedger, Endorser, EndorserService, RecentBlocks, Replica, MAX_MESSAGE_SIZE,
};
use ferrofabric_gateway::{EndorserEndpoint, Gateway, GatewayConfig, GossipSigner};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_orderer::{OrdererConfig, RunningOrderer};
use ferrofabric_protos::lifecycle::{
    chaincode_source, ApproveChaincodeDefinitionForMyOrgArgs, ChaincodeSource, CheckCommitReadinessArgs,
    CheckCommitReadinessResult, CommitChaincodeDefinitionArgs, QueryChaincodeDefinitionArgs,
};
use ferrofabric_protos::peer::endorser_server::{Endorser as EndorserApi, EndorserServer};
use ferrofabric_protos::peer::{application_policy, ApplicationPolicy, ProposalResponse, SignedProposal};
use prost::Message;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::client::{require_valid, NetworkClient};
use crate::layout::{ChannelParams, Layout, TlsMode, PEER_MSPIDS};
use crate::profile::NodeInfo;

/// The chaincodes a node defines, with their endorsement policies (policy DSL of configtxgen).
pub(crate) const CHAINCODES: [(&str, &str); 3] = [
    ("smallbank", "AND('Org1MSP.member', 'Org2MSP.member')"),
    ("transfer", "OR('Org1MSP.member', 'Org2MSP.member')"),
    ("kv", "OR('Org1MSP.member', 'Org2MSP.member')"),
];

/// How long a `_lifecycle` step may take before the node gives up.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
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

/// Arguments of `ferrofabric node`.
#[derive(Debug, Clone, clap::Args)]
pub struct NodeArgs {
    /// The node directory: crypto material, channel genesis block and every component's state. Created on the
    /// first run; later runs restart from it.
    #[arg(long, value_name = "DIR", default_value = "ferrofabric-node")]
    pub dir: PathBuf,
    /// Host (IP address) every listener binds and `node.json` names.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The orderer's gRPC port (AtomicBroadcast); 0 = any free port.
    #[arg(long, default_value_t = 7050)]
    pub orderer_port: u16,
    /// Org1's peer port (protos.Endorser and protos.Deliver); 0 = any free port.
    #[arg(long, default_value_t = 7051)]
    pub peer_port: u16,
    /// Org2's peer port; 0 = any free port.
    #[arg(long, default_value_t = 9051)]
    pub peer2_port: u16,
    /// The block-store service's port; 0 = any free port.
    #[arg(long, default_value_t = 7060)]
    pub blockstore_port: u16,
    /// Channel ID (used when the directory is created).
    #[arg(long, default_value = "mychannel")]
    pub channel: String,
    /// Transactions per block, the channel's BatchSize.MaxMessageCount (used when the directory is created).
    #[arg(long, default_value_t = 100)]
    pub batch_size: u32,
    /// The channel's BatchTimeout, a Go duration (used when the directory is created).
    #[arg(long, default_value = "1s")]
    pub batch_timeout: String,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// The orderer's operations port (`/metrics`, `/healthz`, `/version`, Fabric's orderer default 8443); 0 = any
    /// free port.
    #[arg(long, default_value_t = 8443)]
    pub orderer_operations_port: u16,
    /// The committing peer's operations port (Fabric's peer default 9443); 0 = any free port. The block-store
    /// service's operations listener always takes a free port; node.json's `operations` names all three.
    #[arg(long, default_value_t = 9443)]
    pub operations_port: u16,
    /// Plain-text gRPC on every listener. Without it the orderer, peer and block-store ports speak TLS, as in
    /// Fabric's test network: each serves the TLS certificate cryptogen made for its node, and clients trust the
    /// organisations' TLS CAs, bundled in `DIR/tls-ca.pem` (node.json's `tls_ca`).
    #[arg(long)]
    pub no_tls: bool,
    /// Mutual TLS: every listener also requires a client certificate issued by one of the organisations' TLS CAs
    /// (Fabric's `clientAuthRequired`); node.json names the certificate and key our own client presents (User1 of
    /// Org1's TLS pair).
    #[arg(long, conflicts_with = "no_tls")]
    pub mutual_tls: bool,
    /// Runs orderer, committer, each endorser and the block store as supervised child processes, each in its own
    /// CPU cgroup under a node cgroup when the host lets us write one (cgroup v2 `cpu.weight` or v1
    /// `cpu.shares`). The committer serves commit events on its own address (`events` in node.json).
    #[arg(long)]
    pub processes: bool,
    /// With --processes: runs the QiOi controller, which raises the CPU shares of the components short of CPU while
    /// the committed throughput is below this many tx/s and another workload competes for the CPU.
    #[arg(long, value_name = "TX_PER_S", requires = "processes")]
    pub isolation_threshold: Option<f64>,
}

impl Default for NodeArgs {
    fn default() -> Self {
        NodeArgs {
            dir: PathBuf::from("ferrofabric-node"),
            host: "127.0.0.1".into(),
            orderer_port: 7050,
            peer_port: 7051,
            peer2_port: 9051,
            blockstore_port: 7060,
            orderer_operations_port: 8443,
            operations_port: 9443,
            channel: "mychannel".into(),
            batch_size: 100,
            batch_timeout: "1s".into(),
            quiet: false,
            no_tls: false,
            mutual_tls: false,
            processes: false,
            isolation_threshold: None,
        }
    }
}

impl NodeArgs {
    /// How the node's components speak TLS.
    pub(crate) fn tls_mode(&self) -> TlsMode {
        TlsMode { on: !self.no_tls, mutual: !self.no_tls && self.mutual_tls }
    }

    /// Arguments for a node in `dir` with every port 0 (free ports), quiet: what tests and the bench use.
    pub fn ephemeral(dir: impl Into<PathBuf>) -> NodeArgs {
        NodeArgs {
            dir: dir.into(),
            orderer_port: 0,
            peer_port: 0,
            peer2_port: 0,
            blockstore_port: 0,
            orderer_operations_port: 0,
            operations_port: 0,
            quiet: true,
            ..NodeArgs::default()
        }
    }

    pub(crate) fn progress(&self, msg: &str) {
        if !self.quiet {
            eprintln!("ferrofabric node: {msg}");
        }
    }
}

/// A running node. Dropping it does not stop it; call [`RunningNode::shutdown`].
pub struct RunningNode {
    /// What `node.json` says.
    pub info: NodeInfo,
    /// The node directory.
    pub layout: Layout,
    /// The committer (its status, store and internal Deliver address).
    pub committer: RunningCommitter,
    /// The endorsers of Org1 and Org2, in that order.
    pub endorsers: Vec<Endorser>,
    /// The chaincode support of Org1's and Org2's peers (their installed packages and chaincode streams).
    pub chaincodes: Vec<Arc<ChaincodeSupport>>,
    orderer: RunningOrderer,
    blockstore: RunningBlockstore,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for RunningNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningNode").field("info", &self.info).finish_non_exhaustive()
    }
}

impl RunningNode {
    /// Stops the peer listeners and the replicas' followers, then the block-store service, the committer (which
    /// leaves a final state checkpoint) and the orderer. Clients should close their streams first: an open
    /// Deliver stream keeps the committer's ledger open (this waits up to 5 s for them).
    ///
    /// Errors: the committer's or the block-store service's pipeline had failed.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.shutdown.send_replace(true);
        // The peer listeners close gracefully, which waits for clients' open streams (an SDK's commit-event
        // stream never ends by itself): give them a moment, then cut them off.
        let aborts: Vec<_> = self.tasks.iter().map(JoinHandle::abort_handle).collect();
        if tokio::time::timeout(Duration::from_secs(2), futures::future::join_all(self.tasks)).await.is_err() {
            aborts.iter().for_each(|a| a.abort());
        }
        let stored = self.blockstore.shutdown().await;
        let ledger = Arc::downgrade(&self.committer.store);
        let committed = self.committer.shutdown().await;
        self.orderer.shutdown().await;
        // Deliver streams still open on the peer ports hold the committer's ledger until their clients go away;
        // wait a little so that a node restarted in this process can open it again.
        let deadline = Instant::now() + Duration::from_secs(15);
        while ledger.strong_count() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        committed.context("committer")?;
        stored.context("block-store service")
    }

    /// Waits until both endorser replicas have applied every block the committer has stored.
    ///
    /// Errors: they did not within `timeout`.
    pub async fn wait_for_replicas(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let height = self.committer.store.height();
            if self.endorsers.iter().all(|e| e.replica().height() >= height) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the endorser replicas did not reach height {height} within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

pub(crate) fn addr(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
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
    let tls = mode.on;
    let listener_tls = |node: &std::path::Path| mode.listener(&layout, node);
    // What a peer presents as a TLS client (to the orderer, to the other peers) under mutual TLS.
    let peer_client_pair = |node: &std::path::Path| mode.client_pair(node);
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
    // The TLS CA bundle, which clients trust and, under mutual TLS, every listener checks client certificates with.
    let tls_ca = if tls { Some(layout.write_tls_ca_bundle()?) } else { None };

    // The orderer.
    args.progress("starting the orderer");
    let mut oc = OrdererConfig::defaults();
    oc.general.listen_address = args.host.clone();
    oc.general.listen_port = args.orderer_port;
    oc.general.tls = listener_tls(&layout.orderer_node());
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
    if orderer.registrar.channel(&channel_id).is_none() {
        let registrar = orderer.registrar.clone();
        let g = genesis.clone();
        tokio::task::spawn_blocking(move || registrar.join(g)).await?.context("joining the orderer to the channel")?;
    }

    // The committer (its own Deliver listener is internal: replicas and the block store follow it there).
    args.progress("starting the committer");
    let peer_msp = |org: usize| layout.peer_node(org).join("msp");
    let committer = ferrofabric_committer::start(CommitterConfig {
        channel: Some(channel_id.clone()),
        genesis_block: Some(layout.genesis()),
        data_dir: Some(layout.dir.join("committer")),
        local_msp_dir: Some(peer_msp(0)),
        local_msp_id: Some(PEER_MSPIDS[0].into()),
        orderers: vec![orderer.grpc_addr.to_string()],
        orderer_tls: mode.client(vec![layout.orderer_node().join("tls/ca.crt")], &layout.peer_node(0)),
        listen_address: addr(&args.host, 0),
        operations_listen_address: addr(&args.host, args.operations_port),
        ..CommitterConfig::default()
    })
    .await
    .context("starting the committer")?;

    // The block-store service (before the peer ports: their gateways read older blocks from it).
    args.progress("starting the block-store service");
    let blockstore = ferrofabric_blockstore_service::start(BlockstoreConfig {
        channel: channel_id.clone(),
        data_dir: Some(layout.dir.join("blockstore")),
        local_msp_dir: Some(peer_msp(0)),
        local_msp_id: Some(PEER_MSPIDS[0].into()),
        committers: vec![committer.deliver_addr.to_string()],
        listen_address: addr(&args.host, args.blockstore_port),
        tls: listener_tls(&layout.peer_node(0)),
        operations_listen_address: addr(&args.host, 0),
        ..BlockstoreConfig::default()
    })
    .await
    .context("starting the block-store service")?;

    // Endorsers and the peer ports.
    args.progress("starting the endorsers");
    let (shutdown, shutdown_rx) = watch::channel(false);
    let mut tasks = Vec::new();
    let mut endorsers = Vec::new();
    let mut chaincode_supports = Vec::new();
    let mut peers = BTreeMap::new();
    // Both peer ports are bound before either serves, so that each port's gateway knows both endorsers.
    let mut ports = Vec::new();
    for (org, port) in [(0, args.peer_port), (1, args.peer2_port)] {
        let mspid = PEER_MSPIDS[org];
        let signer = SigningIdentity::from_msp_dir(mspid, &peer_msp(org))
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
        let client_tls = crate::profile::client_tls(tls_ca.as_deref(), peer_client_pair(&layout.peer_node(org)))?;
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
        let router = ferrofabric_comm::grpc_server_builder(&listener_tls(&layout.peer_node(org)))?
            .add_service(service)
            .add_service(deliver)
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

    let info = NodeInfo {
        channel: channel_id,
        orderer: orderer.grpc_addr.to_string(),
        peers,
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
        endorsers,
        chaincodes: chaincode_supports,
        orderer,
        blockstore,
        shutdown,
        tasks,
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

/// The chaincodes the endorsers run (the built-ins).
fn ferrofabric_chaincode_registry() -> ferrofabric_chaincode::Registry {
    ferrofabric_chaincode::Registry::builtin()
}

fn absolute(p: &std::path::Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The `validation_parameter` of a definition: an `ApplicationPolicy` holding the signature policy `rule`.
pub(crate) fn validation_parameter(rule: &str) -> anyhow::Result<Bytes> {
    let envelope = ferrofabric_configtxgen::signature_policy(rule)?;
    let policy = ApplicationPolicy { r#type: Some(application_policy::Type::SignaturePolicy(envelope)) };
    Ok(Bytes::from(policy.encode_to_vec()))
}

/// How [`define_chaincodes`] knows that every endorser has applied the blocks of a step before the next.
pub(crate) enum Barrier<'a> {
    /// The endorsers' replicas are in this process: wait for their heights.
    Replicas(&'a RunningNode),
    /// The endorsers are other processes: ask them, as a Fabric admin does (`CheckCommitReadiness` after the
    /// approvals, `QueryChaincodeDefinition` after the commit), until they answer so.
    Queries,
}

/// The steps of a definition [`Barrier`] holds the next one after.
#[derive(Clone, Copy)]
enum Step {
    /// Every organisation has approved.
    Approved,
    /// The definition is committed.
    Committed,
}

impl Barrier<'_> {
    /// Waits until every endorser has applied `step` for each chaincode of `missing`.
    async fn after(
        &self,
        step: Step,
        client: &NetworkClient,
        admin: &SigningIdentity,
        missing: &[(&str, Bytes)],
    ) -> anyhow::Result<()> {
        if let Barrier::Replicas(node) = self {
            return node.wait_for_replicas(STEP_TIMEOUT).await;
        }
        for (name, vp) in missing {
            let waited = match step {
                Step::Approved => {
                    let check = CheckCommitReadinessArgs {
                        sequence: 1,
                        name: (*name).into(),
                        version: "1.0".into(),
                        validation_parameter: vp.clone(),
                        ..Default::default()
                    }
                    .encode_to_vec();
                    poll_peers(client, admin, &[b"CheckCommitReadiness", &check], |payload| {
                        CheckCommitReadinessResult::decode(payload)
                            .map(|r| r.approvals.len() == PEER_MSPIDS.len() && r.approvals.values().all(|a| *a))
                            .unwrap_or(false)
                    })
                    .await
                }
                Step::Committed => {
                    let q = QueryChaincodeDefinitionArgs { name: (*name).into() }.encode_to_vec();
                    poll_peers(client, admin, &[b"QueryChaincodeDefinition", &q], |_| true).await
                }
            };
            waited.with_context(|| format!("waiting for every peer to apply {name}'s definition step"))?;
        }
        Ok(())
    }
}

/// Sends the `_lifecycle` query `args` to every peer until each answers 200 with a payload `ok` accepts.
///
/// Errors: not so within [`STEP_TIMEOUT`].
async fn poll_peers(
    client: &NetworkClient,
    admin: &SigningIdentity,
    args: &[&[u8]],
    ok: impl Fn(&[u8]) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + STEP_TIMEOUT;
    for peer in 0..client.peer_count() {
        loop {
            let p = client.proposal(admin, "_lifecycle", args);
            let answer = client.propose(peer, &p).await.ok().and_then(|r| r.response);
            if answer.as_ref().is_some_and(|r| r.status == 200 && ok(&r.payload)) {
                break;
            }
            if Instant::now() > deadline {
                bail!("peer {peer} did not catch up within {STEP_TIMEOUT:?}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// Defines every chaincode of [`CHAINCODES`] not yet defined, the Fabric way: each organisation's admin approves
/// the definition (endorsed by its own peer), then Org1's admin commits it (endorsed by both peers); each step is
/// ordered and must commit VALID, and `barrier` holds the next step until every endorser has applied it.
pub(crate) async fn define_chaincodes(
    info: &NodeInfo,
    layout: &Layout,
    progress: &dyn Fn(&str),
    barrier: Barrier<'_>,
) -> anyhow::Result<()> {
    if let Barrier::Replicas(node) = &barrier {
        node.wait_for_replicas(STEP_TIMEOUT).await?;
    }
    let client = NetworkClient::connect(info).await?;
    let admins = [0, 1].map(|org| SigningIdentity::from_msp_dir(PEER_MSPIDS[org], &layout.user_msp(org, "Admin")));
    let [admin1, admin2] = admins;
    let (admin1, admin2) = (admin1?, admin2?);
    let mut missing = Vec::new();
    for (name, rule) in CHAINCODES {
        let q = QueryChaincodeDefinitionArgs { name: name.into() }.encode_to_vec();
        let p = client.proposal(&admin1, "_lifecycle", &[b"QueryChaincodeDefinition", &q]);
        let r = client.propose(0, &p).await?;
        if r.response.as_ref().map(|x| x.status) != Some(200) {
            missing.push((name, validation_parameter(rule)?));
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|(n, _)| *n).collect();
    progress(&format!("defining chaincodes {} through _lifecycle", names.join(", ")));
    let mut events = client.commit_events(0, &admin1).await?;

    let mut approvals = Vec::new();
    for (name, vp) in &missing {
        let approve = ApproveChaincodeDefinitionForMyOrgArgs {
            sequence: 1,
            name: (*name).into(),
            version: "1.0".into(),
            validation_parameter: vp.clone(),
            source: Some(ChaincodeSource {
                r#type: Some(chaincode_source::Type::LocalPackage(chaincode_source::Local {
                    package_id: format!("{name}_1.0:builtin"),
                })),
            }),
            ..Default::default()
        }
        .encode_to_vec();
        for (org, admin) in [(0, &admin1), (1, &admin2)] {
            approvals.push(
                client
                    .endorsed_tx(admin, "_lifecycle", &[b"ApproveChaincodeDefinitionForMyOrg", &approve], &[org])
                    .await?,
            );
        }
    }
    submit_and_wait(&client, &mut events, approvals).await.context("approving")?;
    barrier.after(Step::Approved, &client, &admin1, &missing).await?;

    let mut commits = Vec::new();
    for (name, vp) in &missing {
        let commit = CommitChaincodeDefinitionArgs {
            sequence: 1,
            name: (*name).into(),
            version: "1.0".into(),
            validation_parameter: vp.clone(),
            ..Default::default()
        }
        .encode_to_vec();
        commits
            .push(client.endorsed_tx(&admin1, "_lifecycle", &[b"CommitChaincodeDefinition", &commit], &[0, 1]).await?);
    }
    submit_and_wait(&client, &mut events, commits).await.context("committing the definitions")?;
    barrier.after(Step::Committed, &client, &admin1, &missing).await?;
    Ok(())
}

async fn submit_and_wait(
    client: &NetworkClient,
    events: &mut crate::client::CommitEvents,
    txs: Vec<(String, Bytes)>,
) -> anyhow::Result<()> {
    let (ids, envs): (Vec<String>, Vec<Bytes>) = txs.into_iter().unzip();
    client.broadcast(envs).await?;
    require_valid(&events.wait_for(&ids, STEP_TIMEOUT).await?)
}

/// Runs `ferrofabric node` until Ctrl-C or SIGTERM: starts the node, prints `ferrofabric node ready:
/// DIR/node.json` on stdout, and shuts down cleanly on the signal. Builds its own multi-threaded tokio runtime,
/// so it must not be called from within one.
///
/// Errors: start-up failures (see [`start`]) and shutdown failures.
pub fn run(args: NodeArgs) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("node")
        .build()
        .context("starting the async runtime")?;
    if args.processes {
        return runtime.block_on(run_processes(args));
    }
    runtime.block_on(async move {
        let started = Instant::now();
        let node = start(&args).await?;
        args.progress(&format!(
            "orderer {}, peers {}, block store {}, channel {} at height {} (started in {:.1} s)",
            node.info.orderer,
            node.info.peers.iter().map(|(m, a)| format!("{m}={a}")).collect::<Vec<_>>().join(" "),
            node.info.blockstore,
            node.info.channel,
            node.committer.store.height(),
            started.elapsed().as_secs_f64()
        ));
        println!("ferrofabric node ready: {}", node.layout.node_json().display());
        let mut status = node.committer.status();
        tokio::select! {
            _ = ferrofabric_comm::wait_for_signal() => {}
            _ = status.wait_for(|s| s.failed.is_some()) => {}
        }
        args.progress("shutting down");
        node.shutdown().await
    })
}

/// `run` with `--processes`: the children are processes of this executable.
async fn run_processes(args: NodeArgs) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("locating the ferrofabric executable")?;
    let started = Instant::now();
    let node = crate::processes::start_processes(&args, &exe).await?;
    args.progress(&format!(
        "orderer {}, peers {}, committer (events) {}, block store {}, channel {} (started in {:.1} s)",
        node.info.orderer,
        node.info.peers.iter().map(|(m, a)| format!("{m}={a}")).collect::<Vec<_>>().join(" "),
        node.info.events.as_deref().unwrap_or("-"),
        node.info.blockstore,
        node.info.channel,
        started.elapsed().as_secs_f64()
    ));
    println!("ferrofabric node ready: {}", node.layout.node_json().display());
    ferrofabric_comm::wait_for_signal().await;
    args.progress("shutting down");
    node.shutdown().await;
    Ok(())
}
