//! `ferrofabric bench e2e`: end-to-end throughput of a node, after FastFabric §IV-D ([`run`], whose documentation
//! describes the workloads and the measures).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::contract::ChaincodeService;
use super::stats::{percentile, process_cpu_seconds};
use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use ferrofabric_chaincode_support::ShimStats;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::peer::TxValidationCode;
use futures::StreamExt;

use ferrofabric_node::{require_valid, Layout, NetworkClient, NodeInfo, PEER_MSPIDS};

/// Proposals in flight at once while endorsing.
const ENDORSE_CONCURRENCY: usize = 64;
/// How long the whole measured run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(900);

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// FastFabric's two-account transfers, single-endorser policy.
    Transfer,
    /// Smallbank send_payment, 2-of-2 endorsement policy.
    Smallbank,
    /// The committer alone on Fabric 2.5.16's 10,735-transaction ledger.
    Ledger,
}

/// How the measured transactions reach the orderer (not for `ledger`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Via {
    /// Endorsed before the measurement, only broadcast during it (FastFabric's measure).
    Orderer,
    /// Each endorsed at the peers, assembled and broadcast during the measurement, as an SDK without a gateway.
    Peers,
    /// Each submitted through Org1's Gateway service during the measurement (Endorse, sign, Submit), as the
    /// `fabric-gateway` SDKs do.
    Gateway,
}

/// Arguments of `ferrofabric bench e2e`.
#[derive(Debug, Clone, clap::Args)]
pub struct E2eBenchArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Number of measured transactions (N); ignored by `ledger`.
    #[arg(long, default_value_t = 10_000)]
    pub txs: usize,
    /// The workload.
    #[arg(long, value_enum, default_value = "transfer")]
    pub workload: Workload,
    /// A running node's directory (reads its node.json).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["orderer", "peers", "crypto"])]
    pub node_dir: Option<PathBuf>,
    /// The orderer's address `host:port` (with --peer and --crypto, instead of --node-dir).
    #[arg(long, value_name = "ADDR", requires_all = ["peers", "crypto"])]
    pub orderer: Option<String>,
    /// A peer address `host:port`, repeated: Org1's first, then Org2's.
    #[arg(long = "peer", value_name = "ADDR")]
    pub peers: Vec<String>,
    /// The crypto directory (cryptogen's layout) with the users' MSPs.
    #[arg(long, value_name = "DIR")]
    pub crypto: Option<PathBuf>,
    /// With --orderer: a PEM file of the CA certificates the orderer's and peers' TLS certificates chain to;
    /// without it they are dialled in plain text.
    #[arg(long, value_name = "FILE", requires = "orderer")]
    pub tls_ca: Option<PathBuf>,
    /// The channel (with addresses).
    #[arg(long, default_value = "mychannel")]
    pub channel: String,
    /// How the measured transactions reach the orderer.
    #[arg(long, value_enum, default_value = "orderer")]
    pub via: Via,
    /// Concurrent broadcast clients (K); with `--via peers|gateway`, transactions in flight at once.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// The shared fixtures directory (for `ledger`): holds fabric-2.5-bench/ and fabric-2.5/crypto.
    #[arg(long, value_name = "DIR", default_value = "../shared/fixtures")]
    pub fixtures: PathBuf,
    /// A shell command serving a user's contract as a chaincode service, for `transfer`: the bench packages it as
    /// `ccaas`, deploys it by Fabric's lifecycle under a fresh name, runs the command with
    /// `CHAINCODE_SERVER_ADDRESS`, `CORE_CHAINCODE_ID_NAME` and `CHAINCODE_ID` set, and runs the workload on it
    /// instead of the built-in chaincode. The contract must have the built-in `transfer` chaincode's `open` and
    /// `transfer` functions (`scripts/serve-assets-contract node|java` serves the repository's).
    #[arg(long, value_name = "COMMAND")]
    pub chaincode_service: Option<String>,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

impl Default for E2eBenchArgs {
    fn default() -> Self {
        E2eBenchArgs {
            json: false,
            txs: 10_000,
            workload: Workload::Transfer,
            node_dir: None,
            orderer: None,
            peers: Vec::new(),
            crypto: None,
            tls_ca: None,
            channel: "mychannel".into(),
            via: Via::Orderer,
            clients: 4,
            fixtures: PathBuf::from("../shared/fixtures"),
            chaincode_service: None,
            quiet: false,
        }
    }
}

impl E2eBenchArgs {
    fn progress(&self, msg: &str) {
        if !self.quiet {
            eprintln!("bench e2e: {msg}");
        }
    }
}

/// The result (`--json` prints it).
#[derive(Debug, Clone, serde::Serialize)]
pub struct E2eReport {
    /// The workload run.
    pub workload: Workload,
    /// How the measured transactions reached the orderer (`orderer` for `ledger`).
    pub via: Via,
    /// The chaincode that ran them: the built-in one's name, or the deployed contract's (`--chaincode-service`).
    pub chaincode: String,
    /// Whether that chaincode was the user's contract behind the chaincode shim protocol.
    pub chaincode_service: bool,
    /// Shim protocol round trips per endorsement of the measured transactions (the TRANSACTION/COMPLETED pair and
    /// each GET_STATE, PUT_STATE, ... request); only for an external chaincode on a node the bench started.
    pub shim_round_trips_per_tx: Option<f64>,
    /// With `--via orderer`: measured transactions endorsed per second while pre-endorsing.
    pub endorse_tx_per_s: Option<f64>,
    /// Transactions measured.
    pub txs: usize,
    /// Committed transactions per second between the first and the last committed block (the headline).
    pub committed_tx_per_s: f64,
    /// N / (last committed block − first send); for `ledger`, N / (last block − committer start).
    pub end_to_end_tx_per_s: f64,
    /// Seconds between the first and the last committed block.
    pub seconds: f64,
    /// Blocks that carried the measured transactions.
    pub blocks: usize,
    /// Block latency p50 in ms (send of the earliest transaction → block on DeliverFiltered); not for `ledger`.
    pub block_latency_ms_p50: Option<f64>,
    /// Block latency p99 in ms.
    pub block_latency_ms_p99: Option<f64>,
    /// Transactions committed VALID.
    pub valid: usize,
    /// The others, by validation code.
    pub invalid: BTreeMap<String, usize>,
    /// Average envelope size in bytes.
    pub envelope_bytes: usize,
    /// Endorsements per transaction.
    pub endorsements_per_tx: usize,
    /// Seconds spent pre-endorsing the measured transactions (not measured in the throughput).
    pub endorse_seconds: f64,
    /// CPU seconds this process used during the measured run (all of the node when the bench started it).
    pub cpu_seconds: f64,
    /// Whether the bench ran its own node (or, for `ledger`, its own orderer and committer).
    pub own_node: bool,
    /// `ledger` only: the final commit hash equals Fabric 2.5.16's.
    pub commit_hash_matches_fabric: Option<bool>,
}

/// Runs the bench and prints the report (a table, or one JSON object with `--json`). Builds its own tokio
/// runtime, so it must not be called from within one.
///
/// `ferrofabric bench e2e`: end-to-end throughput of a node, after FastFabric §IV-D.
///
/// * `transfer` (default): 2N accounts are opened, then N `transfer` transactions (each reads and writes two
///   accounts of its own, so none conflict; single-endorser policy, endorsements spread over the peers) are
///   pre-endorsed at the node's endorsers and assembled (about 2.9 KB each, mostly the certificates), then
///   broadcast to the orderer by K clients while a `DeliverFiltered` client follows Org1's peer.
/// * `smallbank`: the same with 2N `create_account` and N `send_payment` under the 2-of-2 policy (every
///   transaction endorsed by both peers).
/// * `ledger`: the committer daemon alone, pulling Fabric 2.5.16's 10,735-transaction ledger
///   (`fixtures/fabric-2.5-bench`) from a Ferrofabric orderer whose ledger holds those blocks (signed by Fabric's
///   orderer, which the committer checks); the committer validates and commits every block for real, and the final
///   commit hash must equal the one Fabric's peer computed.
///
/// `--via peers` and `--via gateway` measure what a client sees instead: no pre-endorsement; during the measurement
/// each transaction is endorsed at the peers, assembled and broadcast by the bench (as an SDK without a gateway),
/// or submitted through Org1's Gateway service (Endorse, sign, Submit, as the `fabric-gateway` SDKs), `--clients`
/// of them in flight; block latency then runs from the start of a transaction's endorsement.
///
/// Measures: `committed_tx_per_s` = transactions committed after the first block / (last block − first block),
/// FastFabric's "between the first and the last committed block"; `end_to_end_tx_per_s` = N / (last block − first
/// send); block latency = arrival of a block on DeliverFiltered − send of its earliest transaction. Setup and
/// endorsement are not measured (FastFabric pre-endorses too). Without `--node-dir` or addresses the bench starts
/// its own node in a temporary directory.
///
/// Errors: start-up, endorsement, ordering or commit failures; a `ledger` run whose commit hash differs from
/// Fabric's.
pub fn run(args: E2eBenchArgs) -> anyhow::Result<E2eReport> {
    anyhow::ensure!(args.txs > 0 && args.clients > 0, "--txs and --clients must be positive");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("async runtime")?;
    let report = runtime.block_on(async {
        match args.workload {
            Workload::Ledger => ledger(&args).await,
            _ => endorsed(&args).await,
        }
    })?;
    print(&args, &report)?;
    Ok(report)
}

fn print(args: &E2eBenchArgs, r: &E2eReport) -> anyhow::Result<()> {
    if args.json {
        println!("{}", serde_json::to_string(r)?);
        return Ok(());
    }
    let ms = |v: Option<f64>| v.map(|v| format!("{v:.1} ms")).unwrap_or_else(|| "-".into());
    let invalid = if r.invalid.is_empty() {
        "none".to_owned()
    } else {
        r.invalid.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    };
    let round_trips = r.shim_round_trips_per_tx.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
    let endorse_rate = r.endorse_tx_per_s.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into());
    let chaincode = format!("{}{}", r.chaincode, if r.chaincode_service { " (chaincode service)" } else { "" });
    let rows = [
        ("workload", format!("{:?}", r.workload).to_lowercase()),
        ("via", format!("{:?}", r.via).to_lowercase()),
        ("chaincode", chaincode),
        ("transactions", r.txs.to_string()),
        ("committed tx/s (first→last block)", format!("{:.0}", r.committed_tx_per_s)),
        ("end-to-end tx/s (first send→last block)", format!("{:.0}", r.end_to_end_tx_per_s)),
        ("seconds (first→last block)", format!("{:.2}", r.seconds)),
        ("blocks", r.blocks.to_string()),
        ("block latency p50", ms(r.block_latency_ms_p50)),
        ("block latency p99", ms(r.block_latency_ms_p99)),
        ("valid", r.valid.to_string()),
        ("not valid", invalid),
        ("envelope bytes (avg)", r.envelope_bytes.to_string()),
        ("endorsements per tx", r.endorsements_per_tx.to_string()),
        ("pre-endorsement seconds", format!("{:.2}", r.endorse_seconds)),
        ("endorsed tx/s (pre-endorsement)", endorse_rate),
        ("shim round trips per tx", round_trips),
        ("CPU seconds (this process)", format!("{:.2}", r.cpu_seconds)),
        ("own node", r.own_node.to_string()),
    ];
    for (k, v) in rows {
        println!("{k:<42} {v}");
    }
    if let Some(m) = r.commit_hash_matches_fabric {
        println!("{:<42} {m}", "commit hash = Fabric 2.5.16's");
    }
    Ok(())
}

/// The node to drive: from --node-dir, from addresses, or a fresh one in a temporary directory.
struct Target {
    info: NodeInfo,
    crypto: PathBuf,
    own: Option<(ferrofabric_node::RunningNode, tempfile::TempDir)>,
}

async fn target(args: &E2eBenchArgs) -> anyhow::Result<Target> {
    if let Some(dir) = &args.node_dir {
        let info = NodeInfo::read(&Layout::new(dir).node_json())?;
        return Ok(Target { crypto: info.crypto.clone(), info, own: None });
    }
    if let Some(orderer) = &args.orderer {
        anyhow::ensure!(!args.peers.is_empty(), "--orderer needs at least one --peer");
        let crypto = args.crypto.clone().ok_or_else(|| anyhow!("--orderer needs --crypto"))?;
        let peers = args.peers.iter().zip(PEER_MSPIDS).map(|(a, m)| (m.to_owned(), a.clone())).collect();
        let info = NodeInfo {
            channel: args.channel.clone(),
            orderer: orderer.clone(),
            peers,
            blockstore: String::new(),
            events: None,
            tls_ca: args.tls_ca.clone(),
            tls_client: None,
            operations: Default::default(),
            crypto: crypto.clone(),
            connection_profile: PathBuf::new(),
        };
        return Ok(Target { info, crypto, own: None });
    }
    let tmp = tempfile::tempdir().context("temporary directory")?;
    args.progress(&format!("starting a node in {}", tmp.path().display()));
    let node = ferrofabric_node::start(&ferrofabric_node::NodeArgs::ephemeral(tmp.path())).await?;
    Ok(Target { info: node.info.clone(), crypto: node.info.crypto.clone(), own: Some((node, tmp)) })
}

/// User1 of peer organisation `org` from a crypto directory.
fn user1(crypto: &Path, org: usize) -> anyhow::Result<SigningIdentity> {
    let n = org + 1;
    let dir = crypto.join(format!("peerOrganizations/org{n}.example.com/users/User1@org{n}.example.com/msp"));
    SigningIdentity::from_msp_dir(PEER_MSPIDS[org], &dir).with_context(|| format!("loading {}", dir.display()))
}

/// One transaction to endorse: chaincode arguments and the peers to endorse at.
struct Planned {
    args: Vec<Vec<u8>>,
    peers: Vec<usize>,
}

/// Endorses and assembles `planned` with bounded concurrency; a proposal the endorser cannot serve yet (its
/// replica has not applied the setup blocks) is retried for up to 60 s.
async fn endorse_all(
    client: &NetworkClient,
    creator: &SigningIdentity,
    chaincode: &str,
    planned: Vec<Planned>,
    progress: &dyn Fn(usize),
) -> anyhow::Result<Vec<(String, Bytes)>> {
    let n = planned.len();
    let mut out = Vec::with_capacity(n);
    let mut stream = futures::stream::iter(planned)
        .map(|p| async move {
            let args: Vec<&[u8]> = p.args.iter().map(Vec::as_slice).collect();
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                match client.endorsed_tx(creator, chaincode, &args, &p.peers).await {
                    Ok(t) => return Ok(t),
                    Err(e) if Instant::now() < deadline && e.to_string().contains("not found") => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        })
        .buffered(ENDORSE_CONCURRENCY);
    while let Some(t) = stream.next().await {
        out.push(t?);
        if out.len() % 5000 == 0 {
            progress(out.len());
        }
    }
    Ok(out)
}

/// Broadcasts `envs` with `clients` concurrent streams; records each envelope's send time (ns since `t0`).
async fn broadcast_all(
    client: &NetworkClient,
    envs: Arc<Vec<Bytes>>,
    clients: usize,
    t0: Instant,
    sent_at: Arc<Vec<AtomicU64>>,
) -> anyhow::Result<()> {
    let n = envs.len();
    let per = n.div_ceil(clients);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let range = (c * per).min(n)..((c + 1) * per).min(n);
        let (client, envs, sent_at) = (client.clone(), envs.clone(), sent_at.clone());
        tasks.push(tokio::spawn(async move {
            let batch: Vec<Bytes> = range
                .map(|i| {
                    sent_at[i].store(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    envs[i].clone()
                })
                .collect();
            client.broadcast(batch).await
        }));
    }
    for t in tasks {
        t.await.context("broadcast task")??;
    }
    Ok(())
}

/// `mutex`'s guard, also after a panic elsewhere (the map stays consistent: each update is one insert).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The measured submissions of `--via peers|gateway`.
struct Submit {
    client: NetworkClient,
    creator: SigningIdentity,
    chaincode: String,
    via: Via,
    t0: Instant,
}

impl Submit {
    /// Submits `planned`, `in_flight` at a time: each endorsed at its peers, assembled and broadcast by this client
    /// ([`Via::Peers`]) or submitted through Org1's gateway ([`Via::Gateway`]); records each start time (ns since
    /// `t0`) and txid before the transaction can reach the orderer.
    async fn all(
        self,
        planned: Vec<Planned>,
        in_flight: usize,
        sent_at: Arc<Vec<AtomicU64>>,
        index: Arc<Mutex<HashMap<String, usize>>>,
    ) -> anyhow::Result<()> {
        let this = &self;
        let mut done = futures::stream::iter(planned.into_iter().enumerate())
            .map(|(i, p)| {
                let (sent_at, index) = (sent_at.clone(), index.clone());
                async move {
                    sent_at[i].store(this.t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    let args: Vec<&[u8]> = p.args.iter().map(Vec::as_slice).collect();
                    if this.via == Via::Gateway {
                        let proposal = this.client.proposal(&this.creator, &this.chaincode, &args);
                        lock(&index).insert(proposal.tx_id.clone(), i);
                        return this.client.submit_through_gateway(0, &this.creator, &proposal).await;
                    }
                    let (tx_id, env) = this.client.endorsed_tx(&this.creator, &this.chaincode, &args, &p.peers).await?;
                    lock(&index).insert(tx_id, i);
                    this.client.broadcast(vec![env]).await
                }
            })
            .buffer_unordered(in_flight.max(1));
        while let Some(r) = done.next().await {
            r?;
        }
        Ok(())
    }
}

async fn endorsed(args: &E2eBenchArgs) -> anyhow::Result<E2eReport> {
    let target = target(args).await?;
    let result = endorsed_run(args, &target).await;
    if let Some((node, _tmp)) = target.own {
        node.shutdown().await?;
    }
    result
}

async fn endorsed_run(args: &E2eBenchArgs, target: &Target) -> anyhow::Result<E2eReport> {
    let n = args.txs;
    let client = NetworkClient::connect(&target.info).await?;
    let peers = client.peer_count();
    let creator = user1(&target.crypto, 0)?;
    let run: u32 = rand::random();
    let key = |i: usize| format!("e2e{run:08x}-{i}");
    let smallbank = args.workload == Workload::Smallbank;
    let all_peers: Vec<usize> = (0..peers).collect();
    // A user's contract behind the shim protocol, deployed for this run, or the built-in chaincode.
    let service_log = std::env::temp_dir().join(format!("ferrofabric-bench-chaincode-{run:08x}.log"));
    let (chaincode, _service) = match &args.chaincode_service {
        Some(command) => {
            anyhow::ensure!(!smallbank, "--chaincode-service runs the transfer workload only");
            let name = format!("contract{run:08x}");
            args.progress(&format!("deploying `{command}` as chaincode {name} (log {})", service_log.display()));
            let service = ChaincodeService::deploy(command, &client, &target.crypto, &name, &service_log).await?;
            (name, Some(service))
        }
        None => ((if smallbank { "smallbank" } else { "transfer" }).to_owned(), None),
    };
    let chaincode = chaincode.as_str();
    let shim_stats = || target.own.as_ref().map(|(node, _)| shim_stats(node));
    // Single-endorser transactions go to the peers in turn, so every endorser replica works (FastFabric III-G).
    let endorsers = |i: usize| if smallbank { all_peers.clone() } else { vec![i % peers] };

    // Setup: 2N accounts, committed before anything is measured.
    args.progress(&format!("setup: opening {} accounts", 2 * n));
    let setup: Vec<Planned> = (0..2 * n)
        .map(|i| {
            let k = key(i).into_bytes();
            let args = if smallbank {
                vec![b"create_account".to_vec(), k.clone(), k, b"1000000".to_vec(), b"1000000".to_vec()]
            } else {
                vec![b"open".to_vec(), k, b"1000000".to_vec()]
            };
            Planned { args, peers: endorsers(i) }
        })
        .collect();
    let mut events = client.commit_events(0, &creator).await?;
    let setup_txs =
        endorse_all(&client, &creator, chaincode, setup, &|d| args.progress(&format!("setup: endorsed {d}"))).await?;
    let (setup_ids, setup_envs): (Vec<String>, Vec<Bytes>) = setup_txs.into_iter().unzip();
    let t0 = Instant::now();
    let sent = Arc::new((0..setup_envs.len()).map(|_| AtomicU64::new(0)).collect());
    broadcast_all(&client, Arc::new(setup_envs), args.clients, t0, sent).await?;
    require_valid(&events.wait_for(&setup_ids, RUN_TIMEOUT).await?)?;
    args.progress(&format!("setup committed in {:.1} s", t0.elapsed().as_secs_f64()));

    // The measured transactions: endorsed now (`--via orderer`), or during the measurement.
    let planned: Vec<Planned> = (0..n)
        .map(|i| {
            let (from, to) = (key(2 * i).into_bytes(), key(2 * i + 1).into_bytes());
            let args = if smallbank {
                vec![b"send_payment".to_vec(), b"1".to_vec(), to, from]
            } else {
                vec![b"transfer".to_vec(), from, to, b"1".to_vec()]
            };
            Planned { args, peers: endorsers(i) }
        })
        .collect();
    // txid -> index of the measured transaction.
    let index: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let (mut endorse_seconds, mut envelope_bytes) = (0.0, 0);
    let shim_before = shim_stats();
    let (envs, planned) = if args.via == Via::Orderer {
        args.progress(&format!("endorsing {n} {chaincode} transactions"));
        let endorse_started = Instant::now();
        let txs =
            endorse_all(&client, &creator, chaincode, planned, &|d| args.progress(&format!("endorsed {d}"))).await?;
        endorse_seconds = endorse_started.elapsed().as_secs_f64();
        lock(&index).extend(txs.iter().enumerate().map(|(i, (id, _))| (id.clone(), i)));
        let envs: Arc<Vec<Bytes>> = Arc::new(txs.into_iter().map(|(_, e)| e).collect());
        envelope_bytes = envs.iter().map(Bytes::len).sum::<usize>() / n;
        (Some(envs), Vec::new())
    } else {
        (None, planned)
    };

    // The measured run.
    let cpu_start = process_cpu_seconds();
    let t0 = Instant::now();
    let sent_at: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(u64::MAX)).collect());
    let sender = match envs {
        Some(envs) => {
            args.progress(&format!("broadcasting {n} transactions with {} clients", args.clients));
            let (client, sent_at, clients) = (client.clone(), sent_at.clone(), args.clients);
            tokio::spawn(async move { broadcast_all(&client, envs, clients, t0, sent_at).await })
        }
        None => {
            args.progress(&format!("submitting {n} transactions via {:?}, {} in flight", args.via, args.clients));
            let submit = Submit {
                client: client.clone(),
                creator: creator.clone(),
                chaincode: chaincode.to_owned(),
                via: args.via,
                t0,
            };
            let (sent_at, index, in_flight) = (sent_at.clone(), index.clone(), args.clients);
            tokio::spawn(async move { submit.all(planned, in_flight, sent_at, index).await })
        }
    };
    // (arrival ns since t0, our txs in the block, earliest send ns)
    let mut blocks: Vec<(u64, usize, u64)> = Vec::new();
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    let mut seen = 0usize;
    let deadline = tokio::time::Instant::now() + RUN_TIMEOUT;
    let mut next_report = Instant::now() + Duration::from_secs(2);
    while seen < n {
        let (at, block) = tokio::time::timeout_at(deadline, events.next_block())
            .await
            .map_err(|_| anyhow!("only {seen} of {n} transactions committed within {RUN_TIMEOUT:?}"))??;
        let mut ours = 0;
        let mut earliest = u64::MAX;
        for t in &block.filtered_transactions {
            if let Some(&i) = lock(&index).get(&t.txid) {
                ours += 1;
                earliest = earliest.min(sent_at[i].load(Ordering::Relaxed));
                let code = TxValidationCode::try_from(t.tx_validation_code)
                    .map(|c| c.as_str_name().to_owned())
                    .unwrap_or_else(|_| t.tx_validation_code.to_string());
                *codes.entry(code).or_default() += 1;
            }
        }
        if ours > 0 {
            seen += ours;
            blocks.push(((at - t0).as_nanos() as u64, ours, earliest));
        }
        if Instant::now() > next_report {
            args.progress(&format!("committed {seen} of {n}"));
            next_report = Instant::now() + Duration::from_secs(2);
        }
    }
    sender.await.context("broadcast task")??;
    let cpu_seconds = process_cpu_seconds() - cpu_start;
    let shim_round_trips_per_tx = match (shim_before, shim_stats()) {
        (Some(before), Some(after)) => after.round_trips_per_tx(&before),
        _ => None,
    };

    let first_send = sent_at.iter().map(|a| a.load(Ordering::Relaxed)).min().unwrap_or(0);
    let (first_at, first_count) = blocks.first().map(|b| (b.0, b.1)).unwrap_or((0, 0));
    let last_at = blocks.last().map(|b| b.0).unwrap_or(0);
    let secs = |ns: u64| ns as f64 / 1e9;
    let seconds = secs(last_at.saturating_sub(first_at));
    let committed_tx_per_s = if blocks.len() > 1 && seconds > 0.0 {
        (n - first_count) as f64 / seconds
    } else {
        n as f64 / secs(last_at.saturating_sub(first_send)).max(1e-9)
    };
    let mut latencies: Vec<f64> = blocks.iter().map(|b| b.0.saturating_sub(b.2) as f64 / 1e6).collect();
    latencies.sort_by(f64::total_cmp);
    let valid = codes.remove(TxValidationCode::Valid.as_str_name()).unwrap_or(0);
    Ok(E2eReport {
        workload: args.workload,
        via: args.via,
        chaincode: chaincode.to_owned(),
        chaincode_service: args.chaincode_service.is_some(),
        shim_round_trips_per_tx,
        endorse_tx_per_s: (endorse_seconds > 0.0).then(|| n as f64 / endorse_seconds),
        txs: n,
        committed_tx_per_s,
        end_to_end_tx_per_s: n as f64 / secs(last_at.saturating_sub(first_send)).max(1e-9),
        seconds,
        blocks: blocks.len(),
        block_latency_ms_p50: Some(percentile(&latencies, 50.0)),
        block_latency_ms_p99: Some(percentile(&latencies, 99.0)),
        valid,
        invalid: codes,
        envelope_bytes,
        endorsements_per_tx: if smallbank { peers } else { 1 },
        endorse_seconds,
        cpu_seconds,
        own_node: target.own.is_some(),
        commit_hash_matches_fabric: None,
    })
}

/// The shim protocol's counts summed over the node's peers.
fn shim_stats(node: &ferrofabric_node::RunningNode) -> ShimStats {
    node.chaincodes.iter().map(|c| c.shim_stats()).fold(ShimStats::default(), |a, s| ShimStats {
        transactions: a.transactions + s.transactions,
        requests: a.requests + s.requests,
    })
}

/// `fixtures` as given, else (when relative and absent) relative to this crate's repository root, so the default
/// `../shared/fixtures` works from the root and from `cargo test`'s crate directory.
fn fixtures_dir(fixtures: &Path) -> PathBuf {
    if fixtures.is_dir() || fixtures.is_absolute() {
        return fixtures.to_path_buf();
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(fixtures)
}

/// `[u64 LE length][block]` records of a zstd-compressed ledger file.
fn ledger_blocks(path: &Path) -> anyhow::Result<Vec<Bytes>> {
    let raw = ferrofabric_protoutil::read_ledger_file(path)?;
    ferrofabric_protoutil::records(raw)
        .map(|r| r.map(|(_, b)| b).map_err(|e| anyhow!("{}: {e}", path.display())))
        .collect()
}

async fn ledger(args: &E2eBenchArgs) -> anyhow::Result<E2eReport> {
    use ferrofabric_block_store::{BlockStore, StoreOptions, SyncPolicy};
    let fixtures = fixtures_dir(&args.fixtures);
    let bench = fixtures.join("fabric-2.5-bench");
    let crypto = fixtures.join("fabric-2.5/crypto");
    args.progress(&format!("reading {}", bench.display()));
    let blocks = ledger_blocks(&bench.join("fabric-2.5-smallbank-10k.bin.zst"))?;
    let fabric = ledger_blocks(&bench.join("fabric-2.5-smallbank-10k.peer.bin.zst"))?;
    let last = fabric.last().ok_or_else(|| anyhow!("the Fabric peer ledger is empty"))?;
    let (_, fabric_hash) = ferrofabric_committer::stored_peer_metadata(last)?;
    let tx_counts: Vec<usize> = blocks
        .iter()
        .map(|b| ferrofabric_arena::BlockArena::decode(b.clone()).map(|a| a.txs().len()))
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow!("a bench block does not decode: {e}"))?;
    let total: usize = tx_counts.iter().skip(1).sum();
    let height = blocks.len() as u64;
    let genesis = blocks.first().ok_or_else(|| anyhow!("the bench ledger is empty"))?.clone();
    let channel = ferrofabric_endorser::Replica::from_genesis(genesis.clone())
        .map_err(|e| anyhow!("bench genesis block: {e}"))?
        .channel_id()
        .to_owned();

    // Our orderer, as the fixture's orderer.example.com (its key is in the fixtures), with the bench blocks in
    // its ledger: it serves them over Deliver like blocks it had cut.
    let tmp = tempfile::tempdir().context("temporary directory")?;
    {
        let store = BlockStore::open(
            &tmp.path().join("orderer/chains").join(&channel),
            StoreOptions { sync: SyncPolicy::None, ..StoreOptions::default() },
        )?;
        for b in &blocks {
            store.append(b.clone())?;
        }
        store.sync()?;
    }
    let orderer_dir = crypto.join("ordererOrganizations/example.com/orderers/orderer.example.com");
    let mut oc = ferrofabric_orderer::OrdererConfig::defaults();
    oc.general.listen_address = "127.0.0.1".into();
    oc.general.listen_port = 0;
    oc.admin.listen_address = String::new();
    oc.operations.listen_address = String::new();
    oc.general.local_msp_dir = Some(orderer_dir.join("msp"));
    oc.general.local_msp_id = Some("OrdererMSP".into());
    // The channel's single etcdraft consenter is that orderer; its TLS certificate names this node as it.
    oc.general.cluster.client_certificate = Some(orderer_dir.join("tls/server.crt"));
    oc.file_ledger.location = Some(tmp.path().join("orderer"));
    oc.consensus.wal_dir = Some(tmp.path().join("orderer/etcdraft/wal"));
    oc.consensus.snap_dir = Some(tmp.path().join("orderer/etcdraft/snap"));
    let plugins = ferrofabric_consensus::backends(&oc)?;
    let orderer = ferrofabric_orderer::start(oc, plugins).await.context("starting the orderer")?;
    let genesis_path = tmp.path().join("genesis.block");
    std::fs::write(&genesis_path, &genesis)?;

    args.progress(&format!(
        "committer pulling {} blocks ({total} transactions) from {}",
        height - 1,
        orderer.grpc_addr
    ));
    let cpu_start = process_cpu_seconds();
    let started = Instant::now();
    let committer = ferrofabric_committer::start(ferrofabric_committer::CommitterConfig {
        channel: Some(channel),
        genesis_block: Some(genesis_path),
        data_dir: Some(tmp.path().join("committer")),
        local_msp_dir: Some(crypto.join("peerOrganizations/org1.example.com/users/User1@org1.example.com/msp")),
        local_msp_id: Some("Org1MSP".into()),
        orderers: vec![orderer.grpc_addr.to_string()],
        listen_address: "127.0.0.1:0".into(),
        ..Default::default()
    })
    .await;
    let committer = match committer {
        Ok(c) => c,
        Err(e) => {
            orderer.shutdown().await;
            return Err(e.context("starting the committer"));
        }
    };
    let mut status = committer.status();
    let mut first: Option<Instant> = None;
    let outcome = tokio::time::timeout(RUN_TIMEOUT, async {
        loop {
            let s = status.borrow_and_update().clone();
            if let Some(f) = &s.failed {
                bail!("the committer failed: {f}");
            }
            if s.height >= 2 {
                first.get_or_insert_with(Instant::now);
            }
            if s.height >= height {
                return Ok((Instant::now(), s.commit_hash));
            }
            status.changed().await?;
        }
    })
    .await;
    let cpu_seconds = process_cpu_seconds() - cpu_start;
    let codes = if matches!(outcome, Ok(Ok(_))) { stored_codes(&committer.store) } else { Ok(BTreeMap::new()) };
    let _ = committer.shutdown().await;
    orderer.shutdown().await;
    let mut codes = codes?;
    let (end, hash) = outcome.map_err(|_| anyhow!("the ledger was not committed within {RUN_TIMEOUT:?}"))??;
    let matches = hash.is_some() && hash == fabric_hash;
    if !matches {
        bail!(
            "commit hash of block {} is {} but Fabric's peer computed {}",
            height - 1,
            hash.map(hex::encode).unwrap_or_default(),
            fabric_hash.map(hex::encode).unwrap_or_default()
        );
    }
    let first = first.unwrap_or(started);
    let seconds = (end - first).as_secs_f64();
    let after_first: usize = tx_counts.iter().skip(2).sum();
    Ok(E2eReport {
        workload: Workload::Ledger,
        via: Via::Orderer,
        chaincode: String::new(),
        chaincode_service: false,
        shim_round_trips_per_tx: None,
        endorse_tx_per_s: None,
        txs: total,
        committed_tx_per_s: after_first as f64 / seconds.max(1e-9),
        end_to_end_tx_per_s: total as f64 / (end - started).as_secs_f64().max(1e-9),
        seconds,
        blocks: (height - 1) as usize,
        block_latency_ms_p50: None,
        block_latency_ms_p99: None,
        valid: codes.remove(TxValidationCode::Valid.as_str_name()).unwrap_or(0),
        invalid: codes,
        envelope_bytes: blocks.iter().skip(1).map(Bytes::len).sum::<usize>() / total.max(1),
        endorsements_per_tx: 2,
        endorse_seconds: 0.0,
        cpu_seconds,
        own_node: true,
        commit_hash_matches_fabric: Some(matches),
    })
}

/// Transactions per validation code over the TRANSACTIONS_FILTER of every stored block after block 0.
fn stored_codes(store: &ferrofabric_block_store::BlockStore) -> anyhow::Result<BTreeMap<String, usize>> {
    let mut codes = BTreeMap::new();
    for block in store.blocks(1..store.height()) {
        let (filter, _) = ferrofabric_committer::stored_peer_metadata(&block?)?;
        for &c in filter.unwrap_or_default().iter() {
            let name = TxValidationCode::try_from(i32::from(c))
                .map(|c| c.as_str_name().to_owned())
                .unwrap_or_else(|_| c.to_string());
            *codes.entry(name).or_default() += 1;
        }
    }
    Ok(codes)
}
