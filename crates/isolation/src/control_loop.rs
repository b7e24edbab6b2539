//! The controller at work ([`run_controller`]): every second it reads the committed transaction count from the
//! committer's operations endpoint (`ledger_transaction_count`, the one source of truth), each component's
//! scheduler times ([`SchedTimes`]) and the host's idle time, lets the [`Controller`] decide, writes the shares
//! to the cgroups, gives the threads of every raised component short scheduler slices ([`crate::set_slice`]),
//! logs every change and exports `qioi_*` metrics.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_comm::Shutdown;
use prometheus::{Gauge, IntCounterVec, IntGaugeVec, Opts, Registry};
use tokio::task::JoinHandle;

use crate::cgroup::Cgroup;
use crate::controller::{ComponentLoad, Controller, Decision, Observation};
use crate::error::IsolationError;
use crate::sched::SchedTimes;
use crate::slice::{set_slice, SHORT_SLICE_NS};

/// How often the controller observes and decides.
pub const PERIOD: Duration = Duration::from_secs(1);

/// A component under control: its name (the `component` label) and its cgroup.
#[derive(Debug, Clone)]
pub struct Component {
    /// e.g. `orderer`, `committer`, `endorser-org1`.
    pub name: String,
    /// Where its process lives.
    pub cgroup: Cgroup,
}

/// One second of the controller's life, for traces and plots.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TracePoint {
    /// Seconds since the controller started.
    pub t: f64,
    /// Committed tx/s over the period.
    pub tx_per_s: f64,
    /// Each component's share after the decision, in component order.
    pub shares: Vec<u64>,
    /// Each component's run-queue wait over the period, in cores.
    pub waits: Vec<f64>,
    /// The host's idle CPU over the period, in cores.
    pub idle: f64,
    /// `hold`, `raise` or `decay`.
    pub action: &'static str,
}

/// The `qioi_*` metrics.
#[derive(Debug, Clone)]
struct QiOiMetrics {
    shares: IntGaugeVec,
    decisions: IntCounterVec,
    throughput: Gauge,
}

impl QiOiMetrics {
    fn register(registry: &Registry, threshold: f64) -> prometheus::Result<QiOiMetrics> {
        let shares = IntGaugeVec::new(
            Opts::new("qioi_cpu_share", "CPU share (cgroup v1 units, default 1024) the controller gives a component."),
            &["component"],
        )?;
        let decisions =
            IntCounterVec::new(Opts::new("qioi_decisions_total", "Controller decisions by action."), &["action"])?;
        let throughput =
            Gauge::with_opts(Opts::new("qioi_committed_tx_per_second", "Committed tx/s the controller last saw."))?;
        let threshold_gauge =
            Gauge::with_opts(Opts::new("qioi_threshold_tx_per_second", "The isolation threshold, tx/s."))?;
        threshold_gauge.set(threshold);
        registry.register(Box::new(shares.clone()))?;
        registry.register(Box::new(decisions.clone()))?;
        registry.register(Box::new(throughput.clone()))?;
        registry.register(Box::new(threshold_gauge))?;
        Ok(QiOiMetrics { shares, decisions, throughput })
    }
}

/// A running controller: its trace so far; stops when its shutdown fires.
#[derive(Debug)]
pub struct RunningController {
    /// Every period's point, oldest first.
    pub trace: Arc<Mutex<Vec<TracePoint>>>,
    /// The loop; it ends at shutdown, leaving the shares where they were.
    pub task: JoinHandle<()>,
}

/// Starts the control loop: `controller` over `components` (in its component order) whose common parent cgroup
/// is `node`, throughput from the committer's operations endpoint `committer_operations` (`host:port`), metrics
/// registered in `registry`. Shares are written at start (the defaults) and after every change; a failed read of
/// the endpoint (the committer restarting) is logged and the period skipped; a failed cgroup write is logged.
///
/// Errors: the metrics cannot be registered (a second controller in one registry).
pub fn run_controller(
    controller: Controller,
    components: Vec<Component>,
    node: Cgroup,
    committer_operations: String,
    registry: &Registry,
    mut shutdown: Shutdown,
) -> Result<RunningController, IsolationError> {
    let metrics = QiOiMetrics::register(registry, controller.config().threshold_tx_per_s)?;
    let trace = Arc::new(Mutex::new(Vec::new()));
    let out = trace.clone();
    let task = tokio::spawn(async move {
        let mut ctl = controller;
        let mut slices = Slices { short: vec![HashSet::new(); components.len()], warned: false };
        apply(&ctl, &components, &node, &metrics);
        let started = Instant::now();
        let mut ticker = tokio::time::interval(PERIOD);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last: Option<(Instant, f64, Vec<SchedTimes>, HostTimes)> = None;
        loop {
            tokio::select! {
                _ = ticker.tick() => {}
                _ = shutdown.recv() => return,
            }
            let committed = match committed_transactions(&committer_operations).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "qioi: cannot read the committed throughput; skipping this period");
                    last = None;
                    continue;
                }
            };
            let now = Instant::now();
            let times: Vec<SchedTimes> = components
                .iter()
                .map(|c| SchedTimes::of_processes(&c.cgroup.processes().unwrap_or_default()))
                .collect();
            let host = HostTimes::read();
            let Some((then, then_committed, then_times, then_host)) =
                last.replace((now, committed, times.clone(), host))
            else {
                continue;
            };
            let secs = (now - then).as_secs_f64().max(1e-3);
            let loads: Vec<ComponentLoad> = times
                .iter()
                .zip(&then_times)
                .map(|(a, b)| {
                    let d = a.since(b);
                    ComponentLoad { cpu: d.cpu_ns as f64 / 1e9 / secs, wait: d.wait_ns as f64 / 1e9 / secs }
                })
                .collect();
            let obs = Observation {
                tx_per_s: (committed - then_committed).max(0.0) / secs,
                idle: host.idle_cores_since(&then_host),
                components: loads,
            };
            let decision = ctl.step(&obs);
            metrics.throughput.set(obs.tx_per_s);
            metrics.decisions.with_label_values(&[decision.action()]).inc();
            match &decision {
                Decision::Hold(why) => tracing::debug!(tx_per_s = obs.tx_per_s, "qioi: hold ({why})"),
                Decision::Raise(changes) => {
                    let list: Vec<String> = changes
                        .iter()
                        .map(|(i, f, t)| {
                            let wait = obs.components.get(*i).map(|l| l.wait).unwrap_or(0.0);
                            let name = components.get(*i).map(|c| c.name.as_str()).unwrap_or("?");
                            format!("{name} {f} -> {t} (waited {wait:.2} cores)")
                        })
                        .collect();
                    tracing::info!(tx_per_s = obs.tx_per_s, "qioi: raise {}", list.join(", "));
                    apply(&ctl, &components, &node, &metrics);
                }
                Decision::Decay(changes) => {
                    let list: Vec<String> = changes
                        .iter()
                        .map(|(i, f, t)| {
                            format!("{} {f} -> {t}", components.get(*i).map(|c| c.name.as_str()).unwrap_or("?"))
                        })
                        .collect();
                    tracing::info!(tx_per_s = obs.tx_per_s, idle_cores = obs.idle, "qioi: decay {}", list.join(", "));
                    apply(&ctl, &components, &node, &metrics);
                }
            }
            // Every period, so that threads started since (a runtime's blocking pool) get the slice too.
            slices.apply(&ctl, &components);
            let point = TracePoint {
                t: started.elapsed().as_secs_f64(),
                tx_per_s: obs.tx_per_s,
                shares: ctl.shares().to_vec(),
                waits: obs.components.iter().map(|l| l.wait).collect(),
                idle: obs.idle,
                action: decision.action(),
            };
            out.lock().unwrap_or_else(|e| e.into_inner()).push(point);
        }
    });
    Ok(RunningController { trace, task })
}

/// Writes the controller's shares to the components' cgroups and the node's.
fn apply(ctl: &Controller, components: &[Component], node: &Cgroup, metrics: &QiOiMetrics) {
    // The parent first when it grows, last when it shrinks, so a component never outweighs the whole node.
    let node_share = ctl.node_share();
    let grow = node.share().map(|s| node_share >= s).unwrap_or(true);
    if grow {
        if let Err(e) = node.set_share(node_share) {
            tracing::warn!(error = %e, "qioi: cannot set the node's share");
        }
    }
    for (c, &share) in components.iter().zip(ctl.shares()) {
        if let Err(e) = c.cgroup.set_share(share) {
            tracing::warn!(error = %e, component = %c.name, "qioi: cannot set the share");
        }
        metrics.shares.with_label_values(&[c.name.as_str()]).set(share as i64);
    }
    if !grow {
        if let Err(e) = node.set_share(node_share) {
            tracing::warn!(error = %e, "qioi: cannot set the node's share");
        }
    }
}

/// The threads of each component that run with [`SHORT_SLICE_NS`] slices: those of every component whose share
/// is raised (its wake-ups must not wait out a neighbour's slice; see [`crate::set_slice`]); a component back at
/// the default share gets the default slice back.
struct Slices {
    short: Vec<HashSet<u32>>,
    warned: bool,
}

impl Slices {
    fn apply(&mut self, ctl: &Controller, components: &[Component]) {
        let default = ctl.config().default_share;
        for ((c, &share), short) in components.iter().zip(ctl.shares()).zip(&mut self.short) {
            let raised = share > default;
            if !raised && short.is_empty() {
                continue;
            }
            let pids = c.cgroup.processes().unwrap_or_default();
            let result = if raised {
                pids.iter().try_for_each(|&pid| set_slice(pid, SHORT_SLICE_NS, short).map(drop))
            } else {
                short.clear();
                let mut back = HashSet::new();
                pids.iter().try_for_each(|&pid| set_slice(pid, 0, &mut back).map(drop))
            };
            if let Err(e) = result {
                if !self.warned {
                    tracing::warn!(error = %e, component = %c.name, "qioi: cannot set the threads' scheduler slice");
                    self.warned = true;
                }
            }
        }
    }
}

/// Puts the components and the node back as a node without a controller runs: the default share, the default
/// scheduler slice. For a controller that has stopped (its loop leaves the shares where they were).
///
/// Errors: a share cannot be written; slices that cannot be set are skipped.
pub fn restore_defaults(components: &[Component], node: &Cgroup) -> Result<(), IsolationError> {
    for c in components {
        c.cgroup.set_share(crate::DEFAULT_SHARE)?;
        for pid in c.cgroup.processes().unwrap_or_default() {
            let _ = set_slice(pid, 0, &mut HashSet::new());
        }
    }
    node.set_share(crate::DEFAULT_SHARE)
}

/// The host's CPU time from the first line of `/proc/stat` (clock ticks): idle (idle + iowait) and total.
#[derive(Debug, Clone, Copy, Default)]
struct HostTimes {
    idle: u64,
    total: u64,
    cores: usize,
}

impl HostTimes {
    fn read() -> HostTimes {
        let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let cores = text.lines().filter(|l| l.starts_with("cpu") && !l.starts_with("cpu ")).count().max(1);
        let fields: Vec<u64> = text
            .lines()
            .next()
            .unwrap_or("")
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
        HostTimes { idle, total: fields.iter().sum(), cores }
    }

    /// Idle cores between `earlier` and `self`.
    fn idle_cores_since(&self, earlier: &HostTimes) -> f64 {
        let total = self.total.saturating_sub(earlier.total);
        if total == 0 {
            return 0.0;
        }
        self.idle.saturating_sub(earlier.idle) as f64 / total as f64 * self.cores as f64
    }
}

/// The committer's committed-transaction count: the sum of every `ledger_transaction_count` sample on
/// `http://ADDR/metrics`.
///
/// Errors: connection or HTTP errors, a non-200 answer, or no such metric.
pub async fn committed_transactions(addr: &str) -> Result<f64, IsolationError> {
    let body = http_get(addr, "/metrics").await?;
    let text = String::from_utf8_lossy(&body);
    let mut found = false;
    let mut total = 0.0;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("ledger_transaction_count") else { continue };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        if let Some(v) = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) {
            total += v;
            found = true;
        }
    }
    if !found {
        return Err(IsolationError::NoTransactionCount(addr.to_owned()));
    }
    Ok(total)
}

/// `GET http://{addr}{path}` within a [`PERIOD`] (off the runtime's threads): the body of a 200 answer.
async fn http_get(addr: &str, path: &str) -> Result<Bytes, IsolationError> {
    let url = format!("http://{addr}{path}");
    let get = url.clone();
    let answer = tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(PERIOD))
            .http_status_as_error(false)
            .max_redirects(0)
            .build()
            .into();
        let mut response = agent.get(&get).call()?;
        let status = response.status();
        Ok::<_, ureq::Error>((status, response.body_mut().read_to_vec()?))
    })
    .await
    .map_err(|e| IsolationError::Get { url: url.clone(), reason: e.to_string() })?
    .map_err(|e| IsolationError::Get { url: url.clone(), reason: e.to_string() })?;
    match answer {
        (status, body) if status == ureq::http::StatusCode::OK => Ok(Bytes::from(body)),
        (status, _) => Err(IsolationError::HttpStatus { url, status: status.as_u16() }),
    }
}
