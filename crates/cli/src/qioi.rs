//! `ferrofabric qioi`: the QiOi share controller as its own process, for a node started with `ferrofabric node
//! --processes` (without `--isolation-threshold`): it reads the node's `processes.json` for the components'
//! cgroups and the committer's operations endpoint, and runs [`ferrofabric_isolation::run_controller`] until
//! Ctrl-C or SIGTERM, serving its `qioi_*` metrics.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use ferrofabric_isolation::{Controller, ControllerConfig};
use ferrofabric_node::ProcessesInfo;

/// Arguments of `ferrofabric qioi`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct QiOiArgs {
    /// The node directory of a running `ferrofabric node --processes` (reads its processes.json).
    #[arg(long, value_name = "DIR", default_value = "ferrofabric-node")]
    pub node_dir: PathBuf,
    /// The isolation threshold: committed tx/s under which the CPU shares of the components short of CPU are
    /// raised.
    #[arg(long, value_name = "TX_PER_S")]
    pub threshold: f64,
    /// Where to serve `/metrics` (`qioi_cpu_share{component}`, `qioi_decisions_total{action}`) and `/healthz`.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:9446")]
    pub operations_listen: String,
}

/// Runs the controller until a signal, then puts every share back to the default.
///
/// Errors: processes.json unreadable, a node without cgroups, or the operations address cannot be bound.
pub(crate) fn run(args: QiOiArgs) -> anyhow::Result<()> {
    let info = ProcessesInfo::read(&args.node_dir.join("processes.json"))?;
    let (components, node) = info.controlled()?;
    let runtime = crate::daemon_runtime("qioi")?;
    runtime.block_on(async move {
        let (trigger, shutdown) = ferrofabric_comm::Shutdown::new();
        let registry = Arc::new(prometheus::Registry::new());
        let n = components.len();
        let running = ferrofabric_isolation::run_controller(
            Controller::new(ControllerConfig::new(args.threshold), n),
            components.clone(),
            node.clone(),
            info.committer_operations.clone(),
            &registry,
            shutdown.clone(),
        )?;
        let (_, health) = tokio::sync::watch::channel(None);
        let router = ferrofabric_comm::operations_router(registry, health, "qioi");
        let listen = ferrofabric_comm::parse_addr(&args.operations_listen)?;
        let (bound, _) = ferrofabric_comm::serve_operations(listen, router, shutdown)
            .await
            .with_context(|| format!("binding {}", args.operations_listen))?;
        println!("qioi ready: components={n} threshold={} operations={bound}", args.threshold);
        ferrofabric_comm::wait_for_signal().await;
        trigger.fire();
        let _ = running.task.await;
        let _ = ferrofabric_isolation::restore_defaults(&components, &node);
        Ok(())
    })
}
