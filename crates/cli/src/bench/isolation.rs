//! `ferrofabric bench isolation`: the same end-to-end load alone, then beside each kind of co-located work (CPU,
//! memory-bandwidth and disk hogs, [`super::hog`]) without and with the QiOi controller, after QiOi's evaluation
//! (Kim et al., Applied Sciences 2021, §5, whose co-located work was sysbench). See [`run`].

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use ferrofabric_isolation::{
    Cgroup, Controller, ControllerConfig, CpuHierarchy, SchedTimes, TracePoint, DEFAULT_SHARE,
};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_node::{NetworkClient, NodeArgs, RunningProcesses, PEER_MSPIDS};
use futures::StreamExt;

use super::hog::{HogKind, Hogs};
use super::stats::percentile;

/// Proposals in flight at once while pre-endorsing.
const ENDORSE_CONCURRENCY: usize = 64;
/// How long the hogs run before the load starts (and the controller gets its first samples).
const LEAD_IN: Duration = Duration::from_secs(2);
/// The load generator's CPU share: the kernel's largest, so that what the hogs delay is the node, not the client
/// that timestamps its sends and the blocks' arrival.
const CLIENT_SHARE: u64 = ferrofabric_isolation::MAX_SHARE;
/// Transactions sent in the last second of a phase are sent but not measured, as those of the warm-up: the phase's
/// last block is cut by the channel's BatchTimeout (1 s), not by its size.
const COOL_DOWN: Duration = Duration::from_secs(1);

/// Arguments of `ferrofabric bench isolation`.
#[derive(Debug, Clone, clap::Args)]
pub struct IsolationBenchArgs {
    /// Offered load: transactions broadcast per second (paced) in each phase. Default: `--load` times the
    /// throughput the node sustains alone, measured first (the probe).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Without `--rate`: the offered load as a fraction of what the node sustains alone. A fifth by default: on
    /// two cores the node then needs about half a core, more than the hogs leave it and little enough that the
    /// hogs keep most of their rate when the controller gives it back (docs/ISOLATION.md, "Measuring it").
    #[arg(long, default_value_t = 0.2)]
    pub load: f64,
    /// Transactions of the probe that measures what the node sustains alone (broadcast unpaced).
    #[arg(long, default_value_t = 20_000)]
    pub probe_txs: usize,
    /// Measured seconds of load per phase.
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    /// Seconds of the same load before the measured ones in each phase (not measured: the controller converges,
    /// queues reach their steady state).
    #[arg(long, default_value_t = 10.0)]
    pub warmup: f64,
    /// The controller's isolation threshold in committed tx/s (default: 95% of the offered rate).
    #[arg(long)]
    pub threshold: Option<f64>,
    /// The kinds of co-located work, each measured beside the node without and with the controller.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [HogKind::Cpu, HogKind::Memory, HogKind::Disk])]
    pub kinds: Vec<HogKind>,
    /// Hog processes of each kind (default: eight per core, a host crowded with co-located containers).
    #[arg(long)]
    pub hogs: Option<usize>,
    /// Each hog's cgroup CPU share (v1 units; the node's default share is 1024). Every hog has a cgroup of its
    /// own, as every co-located container has on QiOi's host, so N hogs at the default share leave the node
    /// about 1/(N+1) of a contended CPU.
    #[arg(long, default_value_t = DEFAULT_SHARE)]
    pub hog_share: u64,
    /// Concurrent broadcast streams.
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Runs the phases this many times in turn (alone, then each kind without and with the controller; again …)
    /// and reports each round's ratios and their medians: on a shared host a stall of the host can fall into any
    /// one phase, the alone phase included, and swing a single round's p99 ratio either way.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Writes the per-second throughput and worst latency of each phase and the controller's traces here (JSON,
    /// for `scripts/plot-isolation`).
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
            rate: None,
            load: 0.2,
            probe_txs: 20_000,
            seconds: 20.0,
            warmup: 10.0,
            threshold: None,
            kinds: vec![HogKind::Cpu, HogKind::Memory, HogKind::Disk],
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
    /// `alone`, `K hogs` or `K hogs+controller` for a kind K.
    pub phase: String,
    /// The kind of co-located work, none when alone.
    pub kind: Option<HogKind>,
    /// Whether the controller ran.
    pub controlled: bool,
    /// The round it belongs to, from 1.
    pub round: usize,
    /// Transactions of the phase committed between the first measured send and the last send, per second of that
    /// window: the offered rate when the node keeps up, less when it falls behind.
    pub committed_tx_per_s: f64,
    /// Block latency p50 over the blocks of measured transactions (send of a block's earliest transaction →
    /// block on DeliverFiltered), ms.
    pub block_latency_ms_p50: f64,
    /// Block latency p99, ms.
    pub block_latency_ms_p99: f64,
    /// Transactions committed VALID.
    pub valid: usize,
    /// The hogs' work rate during the measured window (all hogs, in their kind's unit), when they ran.
    pub hog_rate: Option<f64>,
    /// Committed transactions in each second since the phase's first send (warm-up included).
    pub per_second: Vec<usize>,
    /// The largest block latency of each second since the phase's first send (measured blocks only; 0 where a
    /// second had none), ms: where the p99 comes from.
    pub worst_latency_ms_per_second: Vec<f64>,
    /// CPU the node's components used during the phase (warm-up included), in cores.
    pub node_cores: f64,
    /// The controller's trace, one point a second from the hogs' start, when it ran.
    pub controller: Vec<TracePoint>,
}

/// The result (`--json` prints it without the controller traces).
#[derive(Debug, Clone, serde::Serialize)]
pub struct IsolationReport {
    /// What the node sustained alone in the probe (tx/s), when the rate was not given.
    pub sustained_tx_per_s: Option<f64>,
    /// The node's CPU during the probe, cores.
    pub sustained_node_cores: Option<f64>,
    /// Offered tx/s in every phase.
    pub rate: f64,
    /// The controller's threshold.
    pub threshold: f64,
    /// Hog processes of each kind.
    pub hogs: usize,
    /// Each hog's cgroup share.
    pub hog_share: u64,
    /// Every phase in the order run: round 1's `alone`, `K hogs`, `K hogs+controller` for each kind, then round
    /// 2's, …
    pub phases: Vec<PhaseResult>,
    /// The ratios of each kind of co-located work.
    pub kinds: BTreeMap<HogKind, KindReport>,
    /// The components in the controller's order (the traces' share columns).
    pub components: Vec<String>,
    /// Whether this host can divide disk time between cgroups by weight (what would steer the disk hogs), and
    /// why not.
    pub io_weight: String,
}

/// One kind's ratios: each round's and their medians.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KindReport {
    /// The unit of the hogs' rate.
    pub hog_unit: &'static str,
    /// Each round's ratios, in order.
    pub rounds: Vec<RoundRatios>,
    /// Median over the rounds of hogs+controller throughput / alone throughput (goal ≥ 0.9).
    pub controlled_vs_alone: f64,
    /// Median of hogs throughput / alone throughput (the interference; ≤ 0.8 shows it).
    pub hogs_vs_alone: f64,
    /// Median of hogs+controller p99 / alone p99 (goal ≤ 1.5).
    pub controlled_p99_vs_alone: f64,
    /// Median of the hogs' rate with the controller / without (goal ≥ 0.7).
    pub hogs_kept: f64,
    /// The largest share the controller gave each component in any round.
    pub largest_shares: BTreeMap<String, u64>,
}

/// One round's ratios between its phases for one kind.
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
    /// The ratios of one round's `alone`, hogs and hogs+controller results.
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
/// must run inside the `ferrofabric` executable (the node's components and the hogs are its child processes).
///
/// 1. A node with `--processes` in a temporary directory (components in cgroups under a node cgroup); this
///    process (the load generator) moves to a cgroup of the largest share, so that what is measured is the node.
/// 2. Without `--rate`, the probe: `probe_txs` `kv put` transactions broadcast at once; what the node commits per
///    second is what it sustains alone, and the offered rate is `load` times that.
/// 3. Each phase broadcasts `rate × (warmup + seconds + 1)` blind writes (one endorsement each, alternately at Org1's
///    and Org2's endorser, endorsed before the phase; each phase writes the same keys) paced at `rate` over
///    `clients` streams and waits until all are committed; the transactions sent in the first `warmup` seconds
///    and in the last second are not measured. A round is the phase alone, then for each kind the phase beside `hogs` hogs of that kind
///    (each in a cgroup of its own at `hog_share`, started 2 s before the load), then the same with the
///    controller (threshold default 95% of the rate) from the hogs' start to the phase's end; shares go back to
///    the default after it.
/// 4. `rounds` rounds run in turn; each kind's ratios are the medians of its rounds' ratios.
///
/// Errors: no writable cgroup hierarchy, start-up, endorsement or commit failures.
pub fn run(args: IsolationBenchArgs) -> anyhow::Result<IsolationReport> {
    anyhow::ensure!(
        args.rate.is_none_or(|r| r > 0.0)
            && args.load > 0.0
            && args.seconds > 0.0
            && args.clients > 0
            && args.rounds > 0
            && args.probe_txs > 0,
        "--rate, --load, --probe-txs, --seconds, --clients and --rounds must be > 0"
    );
    anyhow::ensure!(args.hog_share >= 2, "--hog-share is at least 2 (the smallest cgroup v1 share)");
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
        if let Some(phases) = v.get_mut("phases").and_then(|p| p.as_array_mut()) {
            for p in phases {
                if let Some(o) = p.as_object_mut() {
                    o.remove("controller");
                }
            }
        }
        println!("{v}");
        return Ok(());
    }
    if let (Some(s), Some(c)) = (r.sustained_tx_per_s, r.sustained_node_cores) {
        println!("the node sustains {s:.0} tx/s alone ({c:.2} cores); offered {:.0} tx/s", r.rate);
    } else {
        println!("offered {:.0} tx/s", r.rate);
    }
    println!(
        "threshold {:.0} tx/s; {} hogs of each kind, each in its own cgroup at share {}",
        r.threshold, r.hogs, r.hog_share
    );
    println!("{:<26} {:>8} {:>9} {:>9} {:>11} {:>16}", "phase", "tx/s", "p50 ms", "p99 ms", "node cores", "hogs' rate");
    let rounds = r.phases.iter().map(|p| p.round).max().unwrap_or(1);
    for p in &r.phases {
        let hog = match (p.hog_rate, p.kind) {
            (Some(h), Some(k)) => format!("{h:.0} {}", k.unit()),
            _ => "-".into(),
        };
        let name = if rounds > 1 { format!("{} {}", p.round, p.phase) } else { p.phase.clone() };
        println!(
            "{:<26} {:>8.0} {:>9.1} {:>9.1} {:>11.2} {:>16}",
            name, p.committed_tx_per_s, p.block_latency_ms_p50, p.block_latency_ms_p99, p.node_cores, hog
        );
    }
    let line = |x: &RoundRatios| {
        format!(
            "hogs / alone {:.2} tx/s; hogs+controller / alone {:.2} tx/s, {:.2} p99; hogs kept {:.2} of their rate",
            x.hogs_vs_alone, x.controlled_vs_alone, x.controlled_p99_vs_alone, x.hogs_kept
        )
    };
    for (kind, k) in &r.kinds {
        if rounds > 1 {
            for (i, x) in k.rounds.iter().enumerate() {
                println!("{} round {}: {}", kind.name(), i + 1, line(x));
            }
        }
        let medians = RoundRatios {
            controlled_vs_alone: k.controlled_vs_alone,
            hogs_vs_alone: k.hogs_vs_alone,
            controlled_p99_vs_alone: k.controlled_p99_vs_alone,
            hogs_kept: k.hogs_kept,
        };
        println!("{}{}: {}", kind.name(), if rounds > 1 { " median" } else { "" }, line(&medians));
        let raised: Vec<String> = k.largest_shares.iter().map(|(c, s)| format!("{c}={s}")).collect();
        println!("{} largest shares the controller gave: {}", kind.name(), raised.join(" "));
    }
    println!("disk time by weight: {}", r.io_weight);
    Ok(())
}

/// The load generator's cgroup, removed on drop (which moves this process back to its parent cgroup).
struct ClientCgroup(Cgroup);

impl Drop for ClientCgroup {
    fn drop(&mut self) {
        self.0.remove();
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
        let client = ClientCgroup(hierarchy.cgroup(&format!("ferrofabric-bench-client-{id}"))?);
        client.0.set_share(CLIENT_SHARE)?;
        client.0.add_process(id)?;
        let bench = Bench { args, node: &node, hierarchy: &hierarchy, exe: &exe, dir: tmp.path() };
        bench.phases().await
    }
    .await;
    node.shutdown().await;
    result
}

/// What every phase needs.
struct Bench<'a> {
    args: &'a IsolationBenchArgs,
    node: &'a RunningProcesses,
    hierarchy: &'a CpuHierarchy,
    exe: &'a std::path::Path,
    /// The node's directory: the disk hogs write beside its ledgers.
    dir: &'a std::path::Path,
}

impl Bench<'_> {
    async fn phases(&self) -> anyhow::Result<IsolationReport> {
        let args = self.args;
        let node = self.node;
        let hogs = args.hogs.unwrap_or_else(|| 8 * std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
        let client = NetworkClient::connect(&node.info).await?;
        let crypto = &node.info.crypto;
        let creator = SigningIdentity::from_msp_dir(
            PEER_MSPIDS[0],
            &crypto.join("peerOrganizations/org1.example.com/users/User1@org1.example.com/msp"),
        )?;
        let (components, node_cgroup) = node.processes.controlled()?;
        let names: Vec<String> = components.iter().map(|c| c.name.clone()).collect();
        // One key prefix for the whole run, so that every phase writes the same keys (see `endorse`).
        let run: u32 = rand::random();

        let (rate, sustained) = match args.rate {
            Some(r) => (r, None),
            None => {
                args.progress(&format!("probe: endorsing {} kv put transactions", args.probe_txs));
                let envs = endorse(&client, &creator, args.probe_txs, args.probe_txs, run).await?;
                args.progress("probe: broadcasting them at once");
                let (before, started) = (node_sched(&components), Instant::now());
                let m = measure(&client, &creator, envs, 0..args.probe_txs, f64::INFINITY, args.clients).await?;
                let cores = node_sched(&components).since(&before).cpu_ns as f64
                    / 1e9
                    / started.elapsed().as_secs_f64().max(1e-3);
                let s = m.result.committed_tx_per_s;
                args.progress(&format!("probe: the node sustains {s:.0} tx/s alone ({cores:.2} cores)"));
                ((s * args.load).max(1.0), Some((s, cores)))
            }
        };
        let threshold = args.threshold.unwrap_or(0.95 * rate);
        let warm = (rate * args.warmup).round() as usize;
        let measured = warm..warm + (rate * args.seconds).round().max(1.0) as usize;
        let per_phase = measured.end + (rate * COOL_DOWN.as_secs_f64()).round() as usize;

        let mut results: Vec<PhaseResult> = Vec::new();
        for round in 1..=args.rounds {
            let mut plan: Vec<(Option<HogKind>, bool)> = vec![(None, false)];
            for &k in &args.kinds {
                plan.push((Some(k), false));
                plan.push((Some(k), true));
            }
            for (kind, controlled) in plan {
                let phase = match (kind, controlled) {
                    (None, _) => "alone".to_string(),
                    (Some(k), false) => format!("{} hogs", k.name()),
                    (Some(k), true) => format!("{} hogs+controller", k.name()),
                };
                args.progress(&format!("round {round}, {phase}: endorsing {per_phase} kv put transactions"));
                let batch = endorse(&client, &creator, per_phase, per_phase, run).await?;
                let controller = if controlled {
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
                let hog_set = match kind {
                    Some(k) => Some(Hogs::start(self.exe, k, hogs, self.dir, self.hierarchy, args.hog_share)?),
                    None => None,
                };
                if hog_set.is_some() || controller.is_some() {
                    tokio::time::sleep(LEAD_IN).await;
                }
                args.progress(&format!("round {round}, {phase}: {per_phase} transactions at {rate:.0} tx/s"));
                let (before, started) = (node_sched(&components), Instant::now());
                let measured = measure(&client, &creator, batch, measured.clone(), rate, args.clients).await;
                let used = node_sched(&components).since(&before);
                let secs = started.elapsed().as_secs_f64().max(1e-3);
                let node_cores = used.cpu_ns as f64 / 1e9 / secs;
                let hog_rate = match hog_set {
                    Some(h) => {
                        let now = Instant::now();
                        Some(h.stop(measured.as_ref().map(|m| m.window).unwrap_or((now, now))).await)
                    }
                    None => None,
                };
                let mut trace = Vec::new();
                if let Some(c) = controller {
                    c.task.abort();
                    trace = c.trace.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    ferrofabric_isolation::restore_defaults(&components, &node_cgroup)?;
                }
                let m = measured?;
                args.progress(&format!(
                    "round {round}, {phase}: {:.0} tx/s, p99 {:.0} ms{}",
                    m.result.committed_tx_per_s,
                    m.result.block_latency_ms_p99,
                    match (hog_rate, kind) {
                        (Some(h), Some(k)) => format!(", hogs {h:.0} {}", k.unit()),
                        _ => String::new(),
                    }
                ));
                results.push(PhaseResult {
                    phase,
                    kind,
                    controlled,
                    round,
                    hog_rate,
                    node_cores,
                    controller: trace,
                    ..m.result
                });
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        let kinds = args.kinds.iter().map(|&k| (k, kind_report(k, &results, &names))).collect();
        Ok(IsolationReport {
            sustained_tx_per_s: sustained.map(|s| s.0),
            sustained_node_cores: sustained.map(|s| s.1),
            rate,
            threshold,
            hogs,
            hog_share: args.hog_share,
            phases: results,
            kinds,
            components: names,
            io_weight: match ferrofabric_isolation::io_weight_support() {
                Ok(how) => format!("available: {how}"),
                Err(why) => format!("not on this host: {why}"),
            },
        })
    }
}

/// Kind `kind`'s ratios over the rounds of `results`.
fn kind_report(kind: HogKind, results: &[PhaseResult], names: &[String]) -> KindReport {
    let of_round = |round: usize, pick: &dyn Fn(&PhaseResult) -> bool| {
        results.iter().find(|p| p.round == round && pick(p)).cloned()
    };
    let rounds: Vec<RoundRatios> = (1..=results.iter().map(|p| p.round).max().unwrap_or(0))
        .filter_map(|round| {
            let alone = of_round(round, &|p| p.kind.is_none())?;
            let hogs = of_round(round, &|p| p.kind == Some(kind) && !p.controlled)?;
            let controlled = of_round(round, &|p| p.kind == Some(kind) && p.controlled)?;
            Some(RoundRatios::of(&alone, &hogs, &controlled))
        })
        .collect();
    let med = |f: fn(&RoundRatios) -> f64| median(rounds.iter().map(f).collect());
    let traces: Vec<&TracePoint> =
        results.iter().filter(|p| p.kind == Some(kind) && p.controlled).flat_map(|p| &p.controller).collect();
    KindReport {
        hog_unit: kind.unit(),
        controlled_vs_alone: med(|x| x.controlled_vs_alone),
        hogs_vs_alone: med(|x| x.hogs_vs_alone),
        controlled_p99_vs_alone: med(|x| x.controlled_p99_vs_alone),
        hogs_kept: med(|x| x.hogs_kept),
        rounds,
        largest_shares: names
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let top = traces.iter().filter_map(|p| p.shares.get(i).copied()).max().unwrap_or(DEFAULT_SHARE);
                (c.clone(), top)
            })
            .collect(),
    }
}

/// The scheduler times of the components' processes so far, summed over their live threads (a thread that has
/// exited takes its times with it; the components' worker threads live as long as their processes).
fn node_sched(components: &[ferrofabric_isolation::Component]) -> SchedTimes {
    components
        .iter()
        .map(|c| SchedTimes::of_processes(&c.cgroup.processes().unwrap_or_default()))
        .fold(SchedTimes::default(), |a, b| SchedTimes { cpu_ns: a.cpu_ns + b.cpu_ns, wait_ns: a.wait_ns + b.wait_ns })
}

/// `n` blind writes, endorsed alternately at the two peers, assembled; transaction `i` writes key `i mod keys`, so
/// that every phase writes the same keys and the world state (and the cost of its checkpoints) is the same size in
/// every phase. Blind writes have no read set: rewriting a key never conflicts.
async fn endorse(
    client: &NetworkClient,
    creator: &SigningIdentity,
    n: usize,
    keys: usize,
    run: u32,
) -> anyhow::Result<Vec<(String, Bytes)>> {
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

/// Broadcasts `txs` paced at `rate` tx/s over `clients` streams and follows commit events until all are in; only
/// the transactions `measured` (indices into `txs`) are measured, the others are sent before (warm-up) or after
/// (cool-down) them.
async fn measure(
    client: &NetworkClient,
    signer: &SigningIdentity,
    txs: Vec<(String, Bytes)>,
    measured: std::ops::Range<usize>,
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
    // Generous: beside eight hogs per core on a slow host the node may commit at a tenth of the offered rate, and the
    // phase then measures that, not a missed deadline.
    let timeout = Duration::from_secs_f64(n as f64 / rate * 12.0 + 60.0);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut blocks: Vec<(u64, u64)> = Vec::new(); // (arrival ns, earliest measured send ns)
    let mut commits: Vec<(u64, usize)> = Vec::new(); // (arrival ns, transactions of this phase), every block
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
                if measured.contains(&i) {
                    earliest = earliest.min(sent_at[i].load(Ordering::Relaxed));
                }
            }
        }
        if ours > 0 {
            seen += ours;
            commits.push((arrival, ours));
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
    let sends = || sent_at[measured.clone()].iter().map(|a| a.load(Ordering::Relaxed));
    let first_send = sends().min().unwrap_or(0);
    let last_send = sends().max().unwrap_or(0);
    let last = blocks.iter().map(|b| b.0).max().unwrap_or(0);
    // What the node commits while the measured load is offered: a node that keeps up commits the offered rate, one
    // that falls behind what it can. Not "measured transactions over their last commit": the last block of a
    // phase is cut by BatchTimeout, not by size, and would count a second of idling.
    let window = last_send.saturating_sub(first_send);
    let committed_tx_per_s = if window >= 1_000_000_000 {
        let within = commits.iter().filter(|(at, _)| (first_send..=last_send).contains(at)).map(|c| c.1).sum::<usize>();
        within as f64 / (window as f64 / 1e9)
    } else {
        // Sent at once (the probe): all of them over the time they took.
        measured.len() as f64 / (last.saturating_sub(first_send) as f64 / 1e9).max(1e-9)
    };
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
            kind: None,
            controlled: false,
            round: 0,
            committed_tx_per_s,
            block_latency_ms_p50: percentile(&latencies, 50.0),
            block_latency_ms_p99: percentile(&latencies, 99.0),
            valid,
            hog_rate: None,
            per_second,
            worst_latency_ms_per_second,
            node_cores: 0.0,
            controller: Vec::new(),
        },
        window: (t0 + Duration::from_nanos(first_send), t0 + Duration::from_nanos(last)),
    })
}
