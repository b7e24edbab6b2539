//! `ferrofabric bench isolation`: the same end-to-end load three times in one run — alone, beside CPU hogs, and
//! beside CPU hogs with the QiOi controller — after QiOi's evaluation (Kim et al., Applied Sciences 2021, §5,
//! whose co-located work was sysbench). See [`run`].

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use ferrofabric_isolation::{Cgroup, Controller, ControllerConfig, CpuHierarchy, TracePoint, DEFAULT_SHARE};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_node::{NetworkClient, NodeArgs, RunningProcesses, PEER_MSPIDS};
use futures::StreamExt;
use tokio::io::AsyncBufReadExt;

use super::orderer::percentile;

/// Proposals in flight at once while pre-endorsing.
const ENDORSE_CONCURRENCY: usize = 64;
/// How long the hogs run before the load starts (and the controller gets its first samples).
const LEAD_IN: Duration = Duration::from_secs(2);
/// The load generator's CPU share: high, so that the measure is the node's, not the client's.
const CLIENT_SHARE: u64 = 8 * DEFAULT_SHARE;

/// Arguments of `ferrofabric bench isolation`.
#[derive(Debug, Clone, clap::Args)]
pub struct IsolationBenchArgs {
    /// Offered load: transactions broadcast per second (paced) in each phase.
    #[arg(long, default_value_t = 4_000.0)]
    pub rate: f64,
    /// Measured seconds of load per phase.
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    /// Seconds of the same load before the measured ones in each phase (not measured: the controller converges,
    /// queues reach their steady state).
    #[arg(long, default_value_t = 10.0)]
    pub warmup: f64,
    /// The controller's isolation threshold in committed tx/s (default: 95% of --rate).
    #[arg(long)]
    pub threshold: Option<f64>,
    /// CPU hogs (default: one per core).
    #[arg(long)]
    pub hogs: Option<usize>,
    /// The hogs' cgroup CPU share (v1 units; the node's default share is 1024). Equal shares are the paper's
    /// setting, but CFS favours the node's often-sleeping threads over always-running hogs, so beside a node that
    /// is not saturated equal-share hogs may take little from it; a larger share models a favoured neighbour.
    #[arg(long, default_value_t = DEFAULT_SHARE)]
    pub hog_share: u64,
    /// Concurrent broadcast streams.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Runs the three phases this many times in turn (alone, hogs, hogs+controller, alone, …) and reports each
    /// round's ratios and their medians: on a shared host a stall of the host can fall into any one phase, the
    /// alone phase included, and swing a single round's p99 ratio either way. Three by default, so that one such
    /// stall cannot decide the verdict alone.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Writes the per-second throughput of each phase and the controller's trace here (JSON, for plots).
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

impl Default for IsolationBenchArgs {
    fn default() -> Self {
        IsolationBenchArgs {
            rate: 4_000.0,
            seconds: 20.0,
            warmup: 10.0,
            threshold: None,
            hogs: None,
            hog_share: DEFAULT_SHARE,
            clients: 4,
            rounds: 3,
            trace: None,
            json: false,
            quiet: false,
        }
    }
}

impl IsolationBenchArgs {
    fn progress(&self, msg: &str) {
        if !self.quiet {
            eprintln!("bench isolation: {msg}");
        }
    }
}

/// One phase's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PhaseResult {
    /// `alone`, `hogs` or `hogs+controller`.
    pub phase: String,
    /// The round it belongs to, from 1.
    pub round: usize,
    /// Measured transactions committed / (their last commit − their first send).
    pub committed_tx_per_s: f64,
    /// Block latency p50 over the blocks of measured transactions (send of a block's earliest transaction →
    /// block on DeliverFiltered), ms.
    pub block_latency_ms_p50: f64,
    /// Block latency p99, ms.
    pub block_latency_ms_p99: f64,
    /// Transactions committed VALID.
    pub valid: usize,
    /// The hogs' work rate during the load (SHA-256 blocks per second, all hogs), when they ran.
    pub hog_rate: Option<f64>,
    /// Committed transactions in each second since the phase's first send (warm-up included).
    pub per_second: Vec<usize>,
    /// The largest block latency of each second since the phase's first send (measured blocks only; 0 where a
    /// second had none), ms: where the p99 comes from.
    pub worst_latency_ms_per_second: Vec<f64>,
    /// CPU the node's components used during the phase (warm-up included), in cores.
    pub node_cores: f64,
}

/// The result (`--json` prints it).
#[derive(Debug, Clone, serde::Serialize)]
pub struct IsolationReport {
    /// Offered tx/s.
    pub rate: f64,
    /// The controller's threshold.
    pub threshold: f64,
    /// Hog processes.
    pub hogs: usize,
    /// The hogs' cgroup share.
    pub hog_share: u64,
    /// `alone`, `hogs`, `hogs+controller` of round 1, then those of round 2, …
    pub phases: Vec<PhaseResult>,
    /// Each round's ratios, in order.
    pub rounds: Vec<RoundRatios>,
    /// Median over the rounds of hogs+controller throughput / alone throughput (goal ≥ 0.9).
    pub controlled_vs_alone: f64,
    /// Median of hogs throughput / alone throughput (what the controller repairs).
    pub hogs_vs_alone: f64,
    /// Median of hogs+controller p99 / alone p99 (goal ≤ 1.5).
    pub controlled_p99_vs_alone: f64,
    /// Median of the hogs' rate with the controller / without (goal ≥ 0.7).
    pub hogs_kept: f64,
    /// The components in the controller's order (the trace's share columns).
    pub components: Vec<String>,
    /// The largest share the controller gave each component in any round's third phase.
    pub largest_shares: BTreeMap<String, u64>,
    /// The controller's trace during the third phase of round 1.
    pub controller: Vec<TracePoint>,
}

/// One round's ratios between its phases.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RoundRatios {
    /// hogs+controller throughput / alone throughput.
    pub controlled_vs_alone: f64,
    /// hogs throughput / alone throughput.
    pub hogs_vs_alone: f64,
    /// hogs+controller p99 / alone p99.
    pub controlled_p99_vs_alone: f64,
    /// The hogs' rate with the controller / without.
    pub hogs_kept: f64,
}

impl RoundRatios {
    /// The ratios of one round's `alone`, `hogs` and `hogs+controller` results.
    fn of(alone: &PhaseResult, hogs: &PhaseResult, controlled: &PhaseResult) -> RoundRatios {
        RoundRatios {
            controlled_vs_alone: controlled.committed_tx_per_s / alone.committed_tx_per_s.max(1e-9),
            hogs_vs_alone: hogs.committed_tx_per_s / alone.committed_tx_per_s.max(1e-9),
            controlled_p99_vs_alone: controlled.block_latency_ms_p99 / alone.block_latency_ms_p99.max(1e-9),
            hogs_kept: controlled.hog_rate.unwrap_or(0.0) / hogs.hog_rate.unwrap_or(0.0).max(1e-9),
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count); 0 for none.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Runs the bench and prints the report. Builds its own tokio runtime, so it must not be called from within one;
/// must run inside the `ferrofabric` executable (the node's components are its child processes).
///
/// 1. A node with `--processes` in a temporary directory (components in cgroups under a node cgroup); this
///    process (the load generator) moves to a cgroup of share 8192, so that what is measured is the node.
/// 2. `3 × rate × (warmup + seconds)` `kv put` transactions (blind writes, one endorsement each, alternately at
///    Org1's and Org2's endorser; each phase writes the same keys) are endorsed before each round.
/// 3. Each phase broadcasts `rate × (warmup + seconds)` of them paced at `rate` over `clients` streams and waits
///    until all are committed; the transactions sent in the first `warmup` seconds are not measured. Alone;
///    then with one hog process per core (a SHA-256 loop; a sibling cgroup of the node's with share `--hog-share`, default 1024)
///    started 2 s before the load; then the same with the controller (threshold default 95% of `rate`)
///    running from the hogs' start to the phase's end. Shares go back to the default after.
/// 4. Steps 2 and 3 are one round; `rounds` rounds run in turn, and the report's ratios are the medians of the
///    rounds' ratios.
///
/// Errors: no writable cgroup hierarchy, start-up, endorsement or commit failures.
pub fn run(args: IsolationBenchArgs) -> anyhow::Result<IsolationReport> {
    anyhow::ensure!(
        args.rate > 0.0 && args.seconds > 0.0 && args.clients > 0 && args.rounds > 0,
        "--rate, --seconds, --clients and --rounds must be > 0"
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("async runtime")?;
    let report = runtime.block_on(bench(&args))?;
    if let Some(path) = &args.trace {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?).with_context(|| format!("{}", path.display()))?;
    }
    print(&args, &report)?;
    Ok(report)
}

fn print(args: &IsolationBenchArgs, r: &IsolationReport) -> anyhow::Result<()> {
    if args.json {
        let mut v = serde_json::to_value(r)?;
        if let Some(o) = v.as_object_mut() {
            o.remove("controller");
        }
        println!("{v}");
        return Ok(());
    }
    println!("offered {:.0} tx/s, threshold {:.0} tx/s, {} hogs at share {}", r.rate, r.threshold, r.hogs, r.hog_share);
    println!(
        "{:<18} {:>8} {:>9} {:>9} {:>11} {:>14}",
        "phase", "tx/s", "p50 ms", "p99 ms", "node cores", "hog blocks/s"
    );
    let rounds = r.rounds.len();
    for p in &r.phases {
        let hog = p.hog_rate.map(|h| format!("{h:.0}")).unwrap_or_else(|| "-".into());
        let name = if rounds > 1 { format!("{} {}", p.round, p.phase) } else { p.phase.clone() };
        println!(
            "{:<18} {:>8.0} {:>9.1} {:>9.1} {:>11.2} {:>14}",
            name, p.committed_tx_per_s, p.block_latency_ms_p50, p.block_latency_ms_p99, p.node_cores, hog
        );
    }
    let line = |x: &RoundRatios| {
        format!(
            "hogs+controller / alone: {:.2} tx/s, {:.2} p99; hogs / alone: {:.2} tx/s; hogs kept {:.2} of their rate",
            x.controlled_vs_alone, x.controlled_p99_vs_alone, x.hogs_vs_alone, x.hogs_kept
        )
    };
    if rounds > 1 {
        for (k, x) in r.rounds.iter().enumerate() {
            println!("round {}: {}", k + 1, line(x));
        }
    }
    let medians = RoundRatios {
        controlled_vs_alone: r.controlled_vs_alone,
        hogs_vs_alone: r.hogs_vs_alone,
        controlled_p99_vs_alone: r.controlled_p99_vs_alone,
        hogs_kept: r.hogs_kept,
    };
    println!("{}{}", if rounds > 1 { "median: " } else { "" }, line(&medians));
    let raised: Vec<String> = r.largest_shares.iter().map(|(c, s)| format!("{c}={s}")).collect();
    println!("largest shares the controller gave: {}", raised.join(" "));
    Ok(())
}

/// Cgroups of the run besides the node's: the load generator's and the hogs', removed on drop (which moves this
/// process back to its own cgroup).
struct BenchCgroups {
    client: Cgroup,
    hogs: Cgroup,
}

impl Drop for BenchCgroups {
    fn drop(&mut self) {
        self.hogs.remove();
        self.client.remove();
    }
}

async fn bench(args: &IsolationBenchArgs) -> anyhow::Result<IsolationReport> {
    let hierarchy = CpuHierarchy::detect().context("bench isolation needs a writable cgroup hierarchy")?;
    let exe = std::env::current_exe().context("locating the ferrofabric executable")?;
    let tmp = tempfile::tempdir().context("temporary directory")?;
    args.progress(&format!("starting a node with --processes in {}", tmp.path().display()));
    let node_args = NodeArgs { processes: true, no_tls: true, ..NodeArgs::ephemeral(tmp.path()) };
    let node = ferrofabric_node::start_processes(&node_args, &exe).await?;
    let result = async {
        let id = std::process::id();
        let groups = BenchCgroups {
            client: hierarchy.cgroup(&format!("ferrofabric-bench-client-{id}"))?,
            hogs: hierarchy.cgroup(&format!("ferrofabric-bench-hogs-{id}"))?,
        };
        groups.client.set_share(CLIENT_SHARE)?;
        anyhow::ensure!(args.hog_share >= 2, "--hog-share is at least 2 (the smallest cgroup v1 share)");
        groups.hogs.set_share(args.hog_share)?;
        groups.client.add_process(id)?;
        phases(args, &node, &groups, &exe).await
    }
    .await;
    node.shutdown().await;
    result
}

async fn phases(
    args: &IsolationBenchArgs,
    node: &RunningProcesses,
    groups: &BenchCgroups,
    exe: &std::path::Path,
) -> anyhow::Result<IsolationReport> {
    let threshold = args.threshold.unwrap_or(0.95 * args.rate);
    let hogs = args.hogs.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    let per_phase = (args.rate * (args.warmup + args.seconds)).round().max(1.0) as usize;
    let warm = (args.rate * args.warmup).round() as usize;
    let client = NetworkClient::connect(&node.info).await?;
    let crypto = &node.info.crypto;
    let creator = SigningIdentity::from_msp_dir(
        PEER_MSPIDS[0],
        &crypto.join("peerOrganizations/org1.example.com/users/User1@org1.example.com/msp"),
    )?;
    let (components, node_cgroup) = node.processes.controlled()?;
    let names: Vec<String> = components.iter().map(|c| c.name.clone()).collect();

    let mut results = Vec::new();
    let mut traces = Vec::new();
    for round in 1..=args.rounds {
        args.progress(&format!("round {round}: endorsing {} kv put transactions", 3 * per_phase));
        let envs = endorse(&client, &creator, 3 * per_phase, per_phase).await?;
        for (k, phase) in ["alone", "hogs", "hogs+controller"].into_iter().enumerate() {
            let batch: Vec<(String, Bytes)> = envs[k * per_phase..(k + 1) * per_phase].to_vec();
            let controller = if k == 2 {
                let registry = prometheus::Registry::new();
                Some(ferrofabric_isolation::run_controller(
                    Controller::new(ControllerConfig::new(threshold), components.len()),
                    components.clone(),
                    node_cgroup.clone(),
                    node.processes.committer_operations.clone(),
                    &registry,
                    ferrofabric_comm::Shutdown::never(),
                )?)
            } else {
                None
            };
            let hog_set = if k > 0 { Some(Hogs::start(exe, hogs, &groups.hogs)?) } else { None };
            if hog_set.is_some() || controller.is_some() {
                tokio::time::sleep(LEAD_IN).await;
            }
            args.progress(&format!("phase {phase}: {per_phase} transactions at {:.0} tx/s", args.rate));
            let (cpu_before, started) = (node_cpu(&components), Instant::now());
            let measured = measure(&client, &creator, batch, warm, args.rate, args.clients).await;
            let node_cores = (node_cpu(&components) - cpu_before) / started.elapsed().as_secs_f64().max(1e-3);
            let hog_rate = match hog_set {
                Some(h) => {
                    let now = Instant::now();
                    Some(h.stop(measured.as_ref().map(|m| m.window).unwrap_or((now, now))).await)
                }
                None => None,
            };
            if let Some(c) = controller {
                c.task.abort();
                traces.push(c.trace.lock().unwrap_or_else(|e| e.into_inner()).clone());
                for c in &components {
                    c.cgroup.set_share(DEFAULT_SHARE)?;
                }
                node_cgroup.set_share(DEFAULT_SHARE)?;
            }
            let m = measured?;
            args.progress(&format!(
                "phase {phase}: {:.0} tx/s, p99 {:.0} ms{}",
                m.result.committed_tx_per_s,
                m.result.block_latency_ms_p99,
                hog_rate.map(|h| format!(", hogs {h:.0} blocks/s")).unwrap_or_default()
            ));
            results.push(PhaseResult { phase: phase.into(), round, hog_rate, node_cores, ..m.result });
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    let rounds: Vec<RoundRatios> = results.chunks_exact(3).map(|r| RoundRatios::of(&r[0], &r[1], &r[2])).collect();
    let med = |f: fn(&RoundRatios) -> f64| median(rounds.iter().map(f).collect());
    Ok(IsolationReport {
        rate: args.rate,
        threshold,
        hogs,
        hog_share: args.hog_share,
        controlled_vs_alone: med(|x| x.controlled_vs_alone),
        hogs_vs_alone: med(|x| x.hogs_vs_alone),
        controlled_p99_vs_alone: med(|x| x.controlled_p99_vs_alone),
        hogs_kept: med(|x| x.hogs_kept),
        rounds,
        phases: results,
        largest_shares: names
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let top =
                    traces.iter().flatten().filter_map(|p| p.shares.get(i).copied()).max().unwrap_or(DEFAULT_SHARE);
                (c.clone(), top)
            })
            .collect(),
        components: names,
        controller: traces.into_iter().next().unwrap_or_default(),
    })
}

/// CPU seconds the components' processes have used so far (processes restarted meanwhile start again at 0).
fn node_cpu(components: &[ferrofabric_isolation::Component]) -> f64 {
    components
        .iter()
        .map(|c| ferrofabric_isolation::SchedTimes::of_processes(&c.cgroup.processes().unwrap_or_default()).cpu_ns)
        .sum::<u64>() as f64
        / 1e9
}

/// `n` blind writes, endorsed alternately at the two peers, assembled; transaction `i` writes key `i mod keys`, so
/// that every phase writes the same keys and the world state (and the cost of its checkpoints) is the same size in
/// every phase. Blind writes have no read set: rewriting a key never conflicts.
async fn endorse(
    client: &NetworkClient,
    creator: &SigningIdentity,
    n: usize,
    keys: usize,
) -> anyhow::Result<Vec<(String, Bytes)>> {
    let run: u32 = rand::random();
    let peers = client.peer_count().max(1);
    let deadline = Instant::now() + Duration::from_secs(60);
    futures::stream::iter(0..n)
        .map(|i| async move {
            let key = format!("iso{run:08x}-{}", i % keys.max(1));
            loop {
                match client.endorsed_tx(creator, "kv", &[b"put", key.as_bytes(), b"1"], &[i % peers]).await {
                    Ok(t) => return Ok(t),
                    // The endorsers may still be replaying the chaincode definitions after start-up.
                    Err(e) if Instant::now() < deadline && e.to_string().contains("not found") => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        })
        .buffered(ENDORSE_CONCURRENCY)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect()
}

struct Measured {
    result: PhaseResult,
    /// The measured window (first measured send, last commit), for the hogs' rate and the node's CPU.
    window: (Instant, Instant),
}

/// Broadcasts `txs` paced at `rate` tx/s over `clients` streams and follows commit events until all are in; the
/// first `warm` transactions are sent but not measured.
async fn measure(
    client: &NetworkClient,
    signer: &SigningIdentity,
    txs: Vec<(String, Bytes)>,
    warm: usize,
    rate: f64,
    clients: usize,
) -> anyhow::Result<Measured> {
    let n = txs.len();
    let index: HashMap<String, usize> = txs.iter().enumerate().map(|(i, (id, _))| (id.clone(), i)).collect();
    let envs: Arc<Vec<Bytes>> = Arc::new(txs.into_iter().map(|(_, e)| e).collect());
    let mut events = client.commit_events(0, signer).await?;
    let t0 = Instant::now();
    let sent_at: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(u64::MAX)).collect());
    let mut senders = Vec::new();
    for c in 0..clients {
        let (client, envs, sent_at) = (client.clone(), envs.clone(), sent_at.clone());
        // Stream c sends transactions c, c + clients, …, transaction i due at t0 + i / rate.
        let mine: Vec<usize> = (c..n).step_by(clients).collect();
        let count = mine.len();
        let stream = futures::stream::iter(mine).then(move |i| {
            let (envs, sent_at) = (envs.clone(), sent_at.clone());
            async move {
                tokio::time::sleep_until((t0 + Duration::from_secs_f64(i as f64 / rate)).into()).await;
                sent_at[i].store(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                envs[i].clone()
            }
        });
        senders.push(tokio::spawn(async move { client.broadcast_stream(stream, count).await }));
    }
    let timeout = Duration::from_secs_f64(n as f64 / rate * 5.0 + 60.0);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut blocks: Vec<(u64, u64)> = Vec::new(); // (arrival ns, earliest measured send ns)
    let mut per_second: Vec<usize> = Vec::new();
    let mut codes: BTreeMap<i32, usize> = BTreeMap::new();
    let mut seen = 0usize;
    while seen < n {
        let (at, block) = tokio::time::timeout_at(deadline, events.next_block())
            .await
            .map_err(|_| anyhow!("only {seen} of {n} transactions committed within {timeout:?}"))??;
        let arrival = (at - t0).as_nanos() as u64;
        let mut earliest = u64::MAX;
        let mut ours = 0;
        for t in &block.filtered_transactions {
            if let Some(&i) = index.get(&t.txid) {
                ours += 1;
                *codes.entry(t.tx_validation_code).or_default() += 1;
                if i >= warm {
                    earliest = earliest.min(sent_at[i].load(Ordering::Relaxed));
                }
            }
        }
        if ours > 0 {
            seen += ours;
            if earliest != u64::MAX {
                blocks.push((arrival, earliest));
            }
            let second = (arrival / 1_000_000_000) as usize;
            if per_second.len() <= second {
                per_second.resize(second + 1, 0);
            }
            per_second[second] += ours;
        }
    }
    for s in senders {
        s.await.context("broadcast task")??;
    }
    let measured = n - warm.min(n);
    let first_send = sent_at.iter().skip(warm).map(|a| a.load(Ordering::Relaxed)).min().unwrap_or(0);
    let last = blocks.iter().map(|b| b.0).max().unwrap_or(0);
    let mut worst_latency_ms_per_second = vec![0.0f64; per_second.len()];
    for (arrival, sent) in &blocks {
        let slot = &mut worst_latency_ms_per_second[(*arrival / 1_000_000_000) as usize];
        *slot = slot.max(arrival.saturating_sub(*sent) as f64 / 1e6);
    }
    let mut latencies: Vec<f64> = blocks.iter().map(|b| b.0.saturating_sub(b.1) as f64 / 1e6).collect();
    latencies.sort_by(f64::total_cmp);
    let valid = codes.get(&0).copied().unwrap_or(0);
    if valid != n {
        bail!("{} of {n} transactions were not committed VALID: {codes:?}", n - valid);
    }
    Ok(Measured {
        result: PhaseResult {
            phase: String::new(),
            round: 0,
            committed_tx_per_s: measured as f64 / (last.saturating_sub(first_send) as f64 / 1e9).max(1e-9),
            block_latency_ms_p50: percentile(&latencies, 50.0),
            block_latency_ms_p99: percentile(&latencies, 99.0),
            valid,
            hog_rate: None,
            per_second,
            worst_latency_ms_per_second,
            node_cores: 0.0,
        },
        window: (t0 + Duration::from_nanos(first_send), t0 + Duration::from_nanos(last)),
    })
}

/// The CPU hogs: `ferrofabric bench hog` processes in the hogs' cgroup, each printing its cumulative count of
/// SHA-256 blocks every 100 ms.
struct Hogs {
    children: Vec<tokio::process::Child>,
    samples: Arc<Mutex<Vec<HogSamples>>>,
}

/// One hog's (time, cumulative count) lines.
type HogSamples = Vec<(Instant, u64)>;

impl Hogs {
    fn start(exe: &std::path::Path, n: usize, cgroup: &Cgroup) -> anyhow::Result<Hogs> {
        let samples = Arc::new(Mutex::new(vec![Vec::new(); n]));
        let mut children = Vec::new();
        for h in 0..n {
            let mut child = tokio::process::Command::new(exe)
                .args(["bench", "hog"])
                .stdout(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()
                .context("starting a hog")?;
            cgroup.add_process(child.id().unwrap_or(0))?;
            let out = child.stdout.take().ok_or_else(|| anyhow!("hog without stdout"))?;
            let samples = samples.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(out).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if let Ok(count) = line.trim().parse::<u64>() {
                        samples.lock().unwrap_or_else(|e| e.into_inner())[h].push((Instant::now(), count));
                    }
                }
            });
            children.push(child);
        }
        Ok(Hogs { children, samples })
    }

    /// Kills the hogs and returns their summed rate (blocks/s) over `window`.
    async fn stop(mut self, window: (Instant, Instant)) -> f64 {
        for c in &mut self.children {
            let _ = c.kill().await;
        }
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let at = |s: &[(Instant, u64)], t: Instant| {
            s.iter().rev().find(|(when, _)| *when <= t).or(s.first()).copied().unwrap_or((t, 0))
        };
        samples
            .iter()
            .map(|s| {
                let (a, b) = (at(s, window.0), at(s, window.1));
                (b.1.saturating_sub(a.1)) as f64 / (b.0 - a.0).as_secs_f64().max(1e-3)
            })
            .sum()
    }
}

/// `ferrofabric bench hog`: burns one core hashing a 64-byte block with SHA-256 over and over, and prints the
/// cumulative count every 100 ms on stdout, until killed (the co-located work of `bench isolation`).
pub fn hog() {
    use sha2::Digest;
    use std::io::Write;
    let mut block = [0u8; 64];
    let mut count: u64 = 0;
    let mut next = Instant::now() + Duration::from_millis(100);
    let stdout = std::io::stdout();
    loop {
        for _ in 0..1_000 {
            let d = sha2::Sha256::digest(block);
            block[..32].copy_from_slice(&d);
        }
        count += 1_000;
        if Instant::now() >= next {
            let mut out = stdout.lock();
            if writeln!(out, "{count}").and_then(|()| out.flush()).is_err() {
                return;
            }
            next += Duration::from_millis(100);
        }
    }
}
