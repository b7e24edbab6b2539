//! `ferrofabric node --processes`: the same network as [`crate::network::start`], each component its own process
//! (FastFabric's separation of orderer, committer, endorsers and block storage), supervised, each in its own CPU
//! cgroup under one node cgroup, optionally steered by the QiOi controller ([`start_processes`]).
//!
//! ```text
//!  node cgroup (share = the largest component share)
//!   ├─ orderer        ferrofabric orderer    --config DIR/processes/orderer.yaml --join genesis.block
//!   ├─ committer      ferrofabric committer  --config DIR/processes/committer.yaml  (Deliver = node.json "events")
//!   ├─ endorser-org1  ferrofabric endorser   --config DIR/processes/endorser-org1.yaml  (Endorser, Gateway, discovery)
//!   ├─ endorser-org2  ferrofabric endorser   --config DIR/processes/endorser-org2.yaml
//!   └─ blockstore     ferrofabric blockstore --config DIR/processes/blockstore.yaml
//! ```
//! Every listener speaks TLS as in [`crate::network::start`] (server TLS by default, `--mutual-tls`, or
//! `--no-tls`), and every component has its operations endpoints (node.json's `operations`). Each peer port serves
//! the Gateway and discovery services too; their gateway reads the newest blocks from its endorser's follower and
//! older ones from the block store.
//! A child that exits unexpectedly is logged and started again (after 0.5 s, doubling up to 8 s while it keeps
//! failing within a minute). Its output is appended to `DIR/logs/NAME.log`. `DIR/processes.json`
//! ([`ProcessesInfo`]) says where each component's cgroup and the committer's operations endpoint are, for
//! `ferrofabric qioi`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use ferrofabric_comm::{Shutdown, ShutdownTrigger};
use ferrofabric_isolation::{Cgroup, CgroupVersion, Component, Controller, ControllerConfig, CpuHierarchy};
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

use crate::args::NodeArgs;
use crate::chaincode_definitions::{define_chaincodes, Barrier};
use crate::layout::{absolute, ChannelParams, Layout, TlsMode, PEER_MSPIDS};
use crate::profile::NodeInfo;

/// How long a child may take to open its port.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a child may take to stop after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// `DIR/processes.json`: where the components of a `--processes` node live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessesInfo {
    /// The cgroup interface, or `None` when isolation is off (no writable cgroup hierarchy).
    pub cgroup_version: Option<CgroupVersion>,
    /// The node cgroup's directory.
    pub node_cgroup: Option<PathBuf>,
    /// Each component: name, cgroup directory (if any), log file.
    pub components: Vec<ComponentInfo>,
    /// The committer's operations endpoint (`host:port`: `/metrics`, `/healthz`).
    pub committer_operations: String,
    /// The controller's operations endpoint (`qioi_*` metrics), when `--isolation-threshold` runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller_operations: Option<String>,
}

/// One component of [`ProcessesInfo`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentInfo {
    /// `orderer`, `committer`, `endorser-org1`, `endorser-org2` or `blockstore`.
    pub name: String,
    /// Its cgroup's directory.
    pub cgroup: Option<PathBuf>,
    /// Its log file.
    pub log: PathBuf,
    /// The file holding its current process ID (rewritten at each restart).
    pub pid_file: PathBuf,
}

impl ProcessesInfo {
    /// Reads `DIR/processes.json`.
    ///
    /// Errors: unreadable file or JSON not of this shape.
    pub fn read(path: &Path) -> anyhow::Result<ProcessesInfo> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
    }

    /// The components with cgroups, as the controller takes them, and the node cgroup.
    ///
    /// Errors: isolation is off in this node.
    pub fn controlled(&self) -> anyhow::Result<(Vec<Component>, Cgroup)> {
        let (Some(version), Some(node)) = (self.cgroup_version, &self.node_cgroup) else {
            anyhow::bail!("the node runs without cgroups (isolation is off)");
        };
        let components = self
            .components
            .iter()
            .filter_map(|c| {
                c.cgroup.as_ref().map(|p| Component { name: c.name.clone(), cgroup: Cgroup::at(version, p.clone()) })
            })
            .collect();
        Ok((components, Cgroup::at(version, node.clone())))
    }
}

/// A child process under supervision.
struct Child {
    name: String,
    pid: Arc<AtomicU32>,
    restarts: Arc<AtomicU32>,
    task: JoinHandle<()>,
}

/// A running `--processes` node. Dropping it does not stop it; call [`RunningProcesses::shutdown`].
pub struct RunningProcesses {
    /// What `node.json` says.
    pub info: NodeInfo,
    /// What `processes.json` says.
    pub processes: ProcessesInfo,
    /// The node directory.
    pub layout: Layout,
    /// The controller, when `--isolation-threshold` is given and cgroups are writable.
    pub controller: Option<ferrofabric_isolation::RunningController>,
    children: Vec<Child>,
    trigger: ShutdownTrigger,
    node_cgroup: Option<Cgroup>,
    cgroups: Vec<Cgroup>,
}

impl std::fmt::Debug for RunningProcesses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningProcesses").field("info", &self.info).finish_non_exhaustive()
    }
}

impl RunningProcesses {
    /// The process ID of component `name` now (0 while it is being restarted, `None` for an unknown name).
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.children.iter().find(|c| c.name == name).map(|c| c.pid.load(Ordering::Relaxed))
    }

    /// How often component `name` was restarted.
    pub fn restarts(&self, name: &str) -> Option<u32> {
        self.children.iter().find(|c| c.name == name).map(|c| c.restarts.load(Ordering::Relaxed))
    }

    /// Stops the controller, sends SIGTERM to every child (a child still running after 15 s is killed), waits
    /// for them and removes the cgroups.
    pub async fn shutdown(self) {
        self.trigger.fire();
        if let Some(c) = self.controller {
            let _ = c.task.await;
        }
        for child in self.children {
            let _ = child.task.await;
        }
        for g in self.cgroups.iter().rev() {
            g.remove();
        }
        if let Some(g) = &self.node_cgroup {
            g.remove();
        }
    }
}

fn port_or_free(host: &str, port: u16) -> anyhow::Result<u16> {
    if port == 0 {
        Ok(ferrofabric_comm::unused_port(host)?)
    } else {
        Ok(port)
    }
}

async fn wait_for_port(name: &str, addr: &str, child: &Child) -> anyhow::Result<()> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        if child.task.is_finished() || Instant::now() > deadline {
            return Err(anyhow!("{name} did not open {addr} within {READY_TIMEOUT:?}; see its log"));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Where a child's output goes and where its process ID is kept.
struct ChildFiles {
    log: PathBuf,
    pid_file: PathBuf,
}

/// Starts component `name` as `exe args…` under supervision, in `cgroup` if given.
fn supervise(
    name: &str,
    exe: PathBuf,
    args: Vec<String>,
    files: ChildFiles,
    cgroup: Option<Cgroup>,
    mut shutdown: Shutdown,
) -> Child {
    let ChildFiles { log, pid_file } = files;
    let pid = Arc::new(AtomicU32::new(0));
    let restarts = Arc::new(AtomicU32::new(0));
    let (pid2, restarts2, name2) = (pid.clone(), restarts.clone(), name.to_owned());
    let task = tokio::spawn(async move {
        let name = name2;
        let mut backoff = Duration::from_millis(500);
        loop {
            let started = Instant::now();
            let child = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .and_then(|out| Ok((out.try_clone()?, out)))
                .and_then(|(out, err)| {
                    tokio::process::Command::new(&exe)
                        .args(&args)
                        .env("NO_COLOR", "1")
                        .stdout(out)
                        .stderr(err)
                        .kill_on_drop(true)
                        .spawn()
                });
            let mut child = match child {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(component = %name, error = %e, "cannot start {}", exe.display());
                    return;
                }
            };
            let id = child.id().unwrap_or(0);
            pid2.store(id, Ordering::Relaxed);
            if let Err(e) = crate::profile::write_atomically(&pid_file, id.to_string().as_bytes()) {
                tracing::warn!(component = %name, error = %e, "cannot write the pid file");
            }
            if let Some(g) = &cgroup {
                if let Err(e) = g.add_process(id) {
                    tracing::warn!(component = %name, error = %e, "cannot move the process into its cgroup");
                }
            }
            tracing::info!(component = %name, pid = id, "started");
            tokio::select! {
                status = child.wait() => {
                    pid2.store(0, Ordering::Relaxed);
                    let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                    if started.elapsed() > Duration::from_secs(60) {
                        backoff = Duration::from_millis(500);
                    }
                    restarts2.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(component = %name, %status, "exited; restarting in {backoff:?}");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = shutdown.recv() => return,
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(8));
                }
                _ = shutdown.recv() => {
                    terminate(&mut child, id).await;
                    pid2.store(0, Ordering::Relaxed);
                    tracing::info!(component = %name, "stopped");
                    return;
                }
            }
        }
    });
    Child { name: name.to_owned(), pid, restarts, task }
}

/// SIGTERM (the daemons' clean shutdown: the committer leaves a checkpoint), then SIGKILL after
/// [`STOP_TIMEOUT`].
async fn terminate(child: &mut tokio::process::Child, pid: u32) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), nix::sys::signal::Signal::SIGTERM);
    }
    if tokio::time::timeout(STOP_TIMEOUT, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

/// The node's cgroups: the node cgroup `ferrofabric-node-PID` under this process's own cgroup and one child per
/// component, or `None` (with a warning saying why) when no hierarchy is writable: then isolation is off and
/// everything else runs as usual.
fn cgroups(names: &[&str], progress: &dyn Fn(&str)) -> Option<(Cgroup, Vec<Cgroup>)> {
    let made = CpuHierarchy::detect().map_err(anyhow::Error::from).and_then(|h| {
        let node = h.cgroup(&format!("ferrofabric-node-{}", std::process::id()))?;
        let children = names.iter().map(|n| node.child(n)).collect::<Result<Vec<_>, _>>()?;
        Ok((node, children))
    });
    match made {
        Ok(m) => {
            progress(&format!("components in cgroups under {} ({:?})", m.0.path().display(), m.0.version()));
            Some(m)
        }
        Err(e) => {
            progress(&format!("isolation is off: {e}"));
            tracing::warn!(error = %e, "isolation is off");
            None
        }
    }
}

/// Starts the node as processes of `exe` (the `ferrofabric` binary): first-run generation as
/// [`crate::network::start`], then orderer, committer, endorsers and block store in that order, each waited for
/// until it listens; the built-in chaincodes are defined on the first run; `node.json` (with `events` = the
/// committer), `connection-profile.json` and `processes.json` are written; with `args.isolation_threshold` the
/// controller starts. Must be called within a multi-threaded Tokio runtime.
///
/// Errors: generation, a child that does not start listening, or the chaincode definitions; the children started
/// so far are stopped.
pub async fn start_processes(args: &NodeArgs, exe: &Path) -> anyhow::Result<RunningProcesses> {
    let layout = Layout::new(&args.dir);
    let mode = args.tls_mode();
    let host = args.host.as_str();
    let addr = |port: u16| crate::address::addr(host, port);
    let orderer_port = port_or_free(host, args.orderer_port)?;
    let params = ChannelParams {
        channel: args.channel.clone(),
        batch_size: args.batch_size,
        batch_timeout: args.batch_timeout.clone(),
        orderer_host: host.to_owned(),
        orderer_port: if args.orderer_port == 0 { 7050 } else { orderer_port },
    };
    let previously_defined = layout.node_json().exists();
    let genesis = {
        let (layout, args2) = (layout.clone(), args.clone());
        tokio::task::spawn_blocking(move || crate::layout::ensure(&layout, &params, &|m| args2.progress(m))).await??
    };
    let channel_id = ferrofabric_endorser::Replica::from_genesis(genesis)
        .map_err(|e| anyhow!("the genesis block: {e}"))?
        .channel_id()
        .to_owned();

    // The TLS CA bundle, which clients trust and, under mutual TLS, every listener checks client certificates with.
    let tls_ca = if mode.on { Some(layout.write_tls_ca_bundle()?) } else { None };
    let free = || ferrofabric_comm::unused_port(host);
    let ports = Ports {
        orderer: orderer_port,
        orderer_operations: port_or_free(host, args.orderer_operations_port)?,
        committer: free()?,
        committer_operations: port_or_free(host, args.operations_port)?,
        peers: [port_or_free(host, args.peer_port)?, port_or_free(host, args.peer2_port)?],
        peer_operations: [free()?, free()?],
        blockstore: port_or_free(host, args.blockstore_port)?,
        blockstore_operations: free()?,
    };
    let procs = layout.dir.join("processes");
    let logs = layout.dir.join("logs");
    std::fs::create_dir_all(&procs).context("creating DIR/processes")?;
    std::fs::create_dir_all(&logs).context("creating DIR/logs")?;
    let specs = child_specs(&layout, &channel_id, &ports, host, &procs, mode)?;

    let names: Vec<&str> = specs.iter().map(|s| s.name).collect();
    let groups = cgroups(&names, &|m| args.progress(m));
    let (trigger, shutdown) = Shutdown::new();
    let mut running = RunningProcesses {
        info: NodeInfo {
            channel: channel_id,
            orderer: addr(ports.orderer),
            peers: PEER_MSPIDS.iter().zip(ports.peers).map(|(m, p)| ((*m).to_owned(), addr(p))).collect(),
            blockstore: addr(ports.blockstore),
            events: Some(addr(ports.committer)),
            tls_ca: tls_ca.as_deref().map(absolute),
            tls_client: mode.user_pair(&layout),
            operations: [
                ("orderer", ports.orderer_operations),
                ("committer", ports.committer_operations),
                ("blockstore", ports.blockstore_operations),
                ("endorser-org1", ports.peer_operations[0]),
                ("endorser-org2", ports.peer_operations[1]),
            ]
            .into_iter()
            .map(|(c, p)| (c.to_owned(), addr(p)))
            .collect(),
            crypto: absolute(&layout.crypto()),
            connection_profile: absolute(&layout.connection_profile()),
        },
        processes: ProcessesInfo {
            cgroup_version: groups.as_ref().map(|g| g.0.version()),
            node_cgroup: groups.as_ref().map(|g| g.0.path().to_path_buf()),
            components: Vec::new(),
            committer_operations: addr(ports.committer_operations),
            controller_operations: None,
        },
        layout,
        controller: None,
        children: Vec::new(),
        trigger,
        node_cgroup: groups.as_ref().map(|g| g.0.clone()),
        cgroups: groups.as_ref().map(|g| g.1.clone()).unwrap_or_default(),
    };
    for (i, spec) in specs.into_iter().enumerate() {
        args.progress(&format!("starting {}", spec.name));
        let cgroup = groups.as_ref().and_then(|g| g.1.get(i).cloned());
        let log = logs.join(format!("{}.log", spec.name));
        let pid_file = procs.join(format!("{}.pid", spec.name));
        running.processes.components.push(ComponentInfo {
            name: spec.name.to_owned(),
            cgroup: cgroup.as_ref().map(|g| g.path().to_path_buf()),
            log: log.clone(),
            pid_file: pid_file.clone(),
        });
        let files = ChildFiles { log, pid_file };
        let child = supervise(spec.name, exe.to_path_buf(), spec.args, files, cgroup, shutdown.clone());
        let ready = wait_for_port(spec.name, &spec.ready, &child).await;
        running.children.push(child);
        if let Err(e) = ready {
            running.shutdown().await;
            return Err(e);
        }
    }

    if !previously_defined {
        let defined = define_chaincodes(&running.info, &running.layout, &|m| args.progress(m), Barrier::Queries).await;
        if let Err(e) = defined {
            running.shutdown().await;
            return Err(e.context("defining the chaincodes"));
        }
    }
    let l = &running.layout;
    crate::profile::write_atomically(
        &l.connection_profile(),
        &serde_json::to_vec_pretty(&running.info.connection_profile())?,
    )?;
    running.info.write(&l.node_json())?;

    if let Some(threshold) = args.isolation_threshold {
        match running.processes.controlled() {
            Ok((components, node)) => {
                let n = components.len();
                let registry = Arc::new(prometheus::Registry::new());
                let c = ferrofabric_isolation::run_controller(
                    Controller::new(ControllerConfig::new(threshold), n),
                    components,
                    node,
                    running.processes.committer_operations.clone(),
                    &registry,
                    running.trigger.subscribe(),
                )?;
                let (_, health) = tokio::sync::watch::channel(None);
                let router = ferrofabric_comm::operations_router(registry, health, "qioi");
                let listen = crate::address::addr(host, 0).parse()?;
                let (bound, _) =
                    ferrofabric_comm::serve_operations(listen, router, running.trigger.subscribe()).await?;
                args.progress(&format!(
                    "QiOi controller on, isolation threshold {threshold} tx/s, metrics on http://{bound}/metrics"
                ));
                running.processes.controller_operations = Some(bound.to_string());
                running.controller = Some(c);
            }
            Err(e) => args.progress(&format!("no controller: {e}")),
        }
    }
    crate::profile::write_atomically(
        &running.layout.dir.join("processes.json"),
        &serde_json::to_vec_pretty(&running.processes)?,
    )?;
    Ok(running)
}

/// The ports of a `--processes` node.
struct Ports {
    orderer: u16,
    orderer_operations: u16,
    committer: u16,
    committer_operations: u16,
    peers: [u16; 2],
    peer_operations: [u16; 2],
    blockstore: u16,
    blockstore_operations: u16,
}

/// A child's command line and the address that tells it is up.
struct ChildSpec {
    name: &'static str,
    args: Vec<String>,
    ready: String,
}

fn path(p: &Path) -> String {
    absolute(p).to_string_lossy().into_owned()
}

/// A TLS setting as its configuration file writes it (Fabric's PascalCase keys).
fn json(value: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

/// Writes `value` as the configuration file `name` in `procs` (JSON, which the daemons' YAML loaders read) and
/// returns its path.
fn write_config(procs: &Path, name: &str, value: &serde_json::Value) -> anyhow::Result<String> {
    let file = procs.join(name);
    crate::profile::write_atomically(&file, &serde_json::to_vec_pretty(value)?)?;
    Ok(path(&file))
}

/// The five children's command lines; writes their configuration files into `procs`.
fn child_specs(
    layout: &Layout,
    channel: &str,
    ports: &Ports,
    host: &str,
    procs: &Path,
    mode: TlsMode,
) -> anyhow::Result<Vec<ChildSpec>> {
    let addr = |port: u16| crate::address::addr(host, port);
    let peer_msp = |org: usize| layout.peer_node(org).join("msp");
    let orderer_ca = layout.orderer_node().join("tls/ca.crt");
    // The committer and the block store serve with peer0.org1's TLS certificate, as the in-process node does.
    let committer_ca = layout.peer_node(0).join("tls/ca.crt");

    let orderer_tls = mode.listener(layout, &layout.orderer_node());
    let orderer = serde_json::json!({
        "General": {
            "ListenAddress": host,
            "ListenPort": ports.orderer,
            "TLS": json(&orderer_tls),
            "LocalMSPDir": path(&layout.orderer_node().join("msp")),
            "LocalMSPID": "OrdererMSP",
            // The channel's one etcdraft consenter, named by its TLS certificate; Raft over the WAL below.
            "Cluster": {
                "ClientCertificate": path(&layout.orderer_node().join("tls/server.crt")),
                "ClientPrivateKey": path(&layout.orderer_node().join("tls/server.key")),
            },
        },
        "FileLedger": { "Location": path(&layout.dir.join("orderer")) },
        "Consensus": {
            "WALDir": path(&layout.dir.join("orderer/etcdraft/wal")),
            "SnapDir": path(&layout.dir.join("orderer/etcdraft/snapshot")),
        },
        "Admin": { "ListenAddress": "" },
        "Operations": { "ListenAddress": addr(ports.orderer_operations) },
    });
    let orderer_yaml = write_config(procs, "orderer.yaml", &orderer)?;
    let committer = serde_json::json!({
        "Channel": channel,
        "GenesisBlock": path(&layout.genesis()),
        "DataDir": path(&layout.dir.join("committer")),
        "LocalMSPDir": path(&peer_msp(0)),
        "LocalMSPID": PEER_MSPIDS[0],
        "Orderers": [addr(ports.orderer)],
        "OrdererTLS": json(&mode.client(vec![orderer_ca], &layout.peer_node(0))),
        "ListenAddress": addr(ports.committer),
        "TLS": json(&mode.listener(layout, &layout.peer_node(0))),
        "OperationsListenAddress": addr(ports.committer_operations),
    });
    let committer_yaml = write_config(procs, "committer.yaml", &committer)?;
    let blockstore = serde_json::json!({
        "Channel": channel,
        "DataDir": path(&layout.dir.join("blockstore")),
        "LocalMSPDir": path(&peer_msp(0)),
        "LocalMSPID": PEER_MSPIDS[0],
        "Committers": [addr(ports.committer)],
        "CommitterTLS": json(&mode.client(vec![committer_ca.clone()], &layout.peer_node(0))),
        "ListenAddress": addr(ports.blockstore),
        "TLS": json(&mode.listener(layout, &layout.peer_node(0))),
        "OperationsListenAddress": addr(ports.blockstore_operations),
    });
    let blockstore_yaml = write_config(procs, "blockstore.yaml", &blockstore)?;

    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<String>>();
    let mut specs = vec![
        ChildSpec {
            name: "orderer",
            args: s(&["orderer", "--config", &orderer_yaml, "--join", &path(&layout.genesis())]),
            ready: addr(ports.orderer),
        },
        ChildSpec {
            name: "committer",
            args: s(&["committer", "--config", &committer_yaml]),
            ready: addr(ports.committer),
        },
    ];
    let gateway_peers: Vec<serde_json::Value> = (0..2)
        .map(|org| {
            serde_json::json!({
                "msp_id": PEER_MSPIDS[org],
                "address": addr(ports.peers[org]),
                "msp_dir": path(&peer_msp(org)),
            })
        })
        .collect();
    for (org, name) in [(0, "endorser-org1"), (1, "endorser-org2")] {
        let endorser = serde_json::json!({
            "listen": addr(ports.peers[org]),
            "msp_dir": path(&peer_msp(org)),
            "msp_id": PEER_MSPIDS[org],
            "genesis": path(&layout.genesis()),
            "committer": addr(ports.committer),
            "tls": json(&mode.listener(layout, &layout.peer_node(org))),
            "committer_tls": json(&mode.client(vec![committer_ca.clone()], &layout.peer_node(org))),
            "operations_listen": addr(ports.peer_operations[org]),
            "file_system_path": path(&layout.peer_data(org)),
            "history_database": true,
            "gateway": {
                "peers": gateway_peers,
                "orderers": [addr(ports.orderer)],
                "block_store": addr(ports.blockstore),
                "client_tls": json(&mode.client(vec![layout.tls_ca_bundle()], &layout.peer_node(org))),
            },
        });
        let file = write_config(procs, &format!("{name}.yaml"), &endorser)?;
        specs.push(ChildSpec { name, args: s(&["endorser", "--config", &file]), ready: addr(ports.peers[org]) });
    }
    specs.push(ChildSpec {
        name: "blockstore",
        args: s(&["blockstore", "--config", &blockstore_yaml]),
        ready: addr(ports.blockstore),
    });
    Ok(specs)
}
