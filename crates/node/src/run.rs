//! `ferrofabric node` as a command ([`run`]): the node in this process or, with `--processes`, as child
//! processes, until a signal stops it.

use std::time::Instant;

use anyhow::Context;

use crate::args::NodeArgs;
use crate::network::start;
use crate::processes::start_processes;

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
    let node = start_processes(&args, &exe).await?;
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
