//! `ferrofabric bench orderer`: ordering throughput and block latency ([`run`], whose documentation describes the
//! measure).

mod admin;
mod cluster;
mod genesis;
mod load;
mod single;
mod workset;

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use bytes::Bytes;

use ferrofabric_comm::ClientTls;

use self::admin::{http_request, join_channel};
use self::cluster::cluster_run;
use self::load::measure;
use self::single::own_node_run;
use self::workset::make_workset;
pub use self::workset::{OrdererBenchArgs, RunResult};

/// The whole report (`--json` prints it).
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchReport {
    /// Transactions per second with O-II on (the headline number).
    pub tx_per_s: f64,
    /// With O-II off, if measured.
    pub tx_per_s_o2_off: Option<f64>,
    /// `tx_per_s / tx_per_s_o2_off`.
    pub o2_ratio: Option<f64>,
    /// Block latency p50, ms (O-II on).
    pub block_latency_ms_p50: f64,
    /// Block latency p99, ms (O-II on).
    pub block_latency_ms_p99: f64,
    /// N.
    pub txs: usize,
    /// K.
    pub clients: usize,
    /// Average envelope size in bytes.
    pub envelope_bytes: usize,
    /// Blocks cut (O-II on).
    pub blocks: usize,
    /// TLS on the gRPC connections.
    pub tls: bool,
    /// Every block fsynced (own node).
    pub fsync: bool,
    /// `solo`, `etcdraft`, `bft` or `kafka` (own nodes), `external` (`--address`).
    pub consensus: String,
    /// Orderer nodes (1 for solo and external orderers).
    pub nodes: usize,
    /// Each run in detail: `[on, off]`.
    pub runs: Vec<RunResult>,
}

/// Runs the benchmark and prints the report (text, or one JSON object with `--json`). Builds its own Tokio
/// runtime, so it must not be called from within one.
///
/// `ferrofabric bench orderer`: ordering throughput and block latency.
///
/// N pre-signed endorser transactions of real size (testkit transfer transactions: creator and two endorser
/// certificates, ~4.1 KB each by default) are broadcast by K concurrent clients (one connection and one
/// Broadcast stream each) while one Deliver client follows the chain. Every creator signature is checked by
/// the orderer as usual.
///
/// * `tx_per_s` = N / (arrival of the block completing the N transactions − first send);
/// * block latency = arrival of a block at the Deliver client − send time of its earliest transaction
///   (includes batching: with 100 transactions per block, the time to fill a block);
/// * O-II: with no `--address`, the run is repeated on a fresh node with the per-stream parallel checks off
///   (window 1) and the ratio on/off is reported.
///
/// With no `--address` the bench starts its own node (solo loop on the generated network's single-consenter
/// channel, ledger in a temporary directory, blocks fsynced). With `--consensus etcdraft --nodes N` (N ≥ 2) it
/// starts N etcdraft nodes in this process instead (TLS certificates for `127.0.0.1` from cryptogen, mutual TLS
/// between the nodes, WAL/snapshots/ledgers in a temporary directory, Raft tick 100 ms); the channel is the
/// generated network's with those N consenters, the clients are spread over the nodes round-robin (followers
/// forward to the leader) and blocks are read from node 0. `--consensus bft --nodes N` (N ≥ 4) does the same
/// with N BFT consenters, each signing with its own identity, on a channel made by configtxgen's BFT profile
/// with the generated network's organisations and batch settings. `--consensus kafka --nodes N` (N ≥ 1) starts N
/// orderers on the generated network's channel turned `kafka`, on three brokers it starts for the run from the
/// jars of `tests/kafka` (or on `--kafka-brokers`), posting payloads aside or inline (`--payloads`); it reports
/// the bytes posted to the ordered partition and to the payload topic per transaction. Before measuring, one extra envelope is broadcast
/// and must be answered SUCCESS, so that leader election is not measured.
///
/// With `--address` it measures an orderer it did not start, ours or Fabric's: envelopes go to `--channel`,
/// signed by the client identity of `--msp-dir`/`--msp-id` (default: the generated network's User1 of Org1), and
/// blocks are read from the chain's height at the start. Only with `--join` (and `--admin-address`) does it join
/// the generated network's genesis block over the participation API first, and remove the channel afterwards.
///
/// Errors: generation, start-up, connection or protocol failures (any rejected envelope is an error).
pub fn run(args: OrdererBenchArgs) -> anyhow::Result<BenchReport> {
    anyhow::ensure!(args.txs > 0 && args.clients > 0, "--txs and --clients must be positive");
    if !args.json {
        eprintln!("signing {} envelopes ...", args.txs);
    }
    let signing = Instant::now();
    let work = Arc::new(make_workset(&args)?);
    if !args.json {
        eprintln!("signed in {:.1} s; ordering ...", signing.elapsed().as_secs_f64());
    }
    let envelope_bytes = work.envelopes.iter().map(Bytes::len).sum::<usize>() / work.envelopes.len();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("async runtime")?;
    let runs = runtime.block_on(async {
        let mut runs = Vec::new();
        match &args.address {
            None if args.consensus != "solo" => {
                runs.push(cluster_run(&work, &args, true, &work.warmups[0]).await?);
                if !args.skip_o2_off {
                    runs.push(cluster_run(&work, &args, false, &work.warmups[1]).await?);
                }
            }
            None => {
                runs.push(own_node_run(&work, &args, true).await?);
                if !args.skip_o2_off {
                    runs.push(own_node_run(&work, &args, false).await?);
                }
            }
            Some(addr) => {
                let tls = match (&args.tls, &args.tls_ca) {
                    (false, _) => None,
                    (true, Some(ca)) => Some(ClientTls {
                        ca_pem: std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?,
                        server_name: args.tls_server_name.clone(),
                        identity: None,
                    }),
                    (true, None) => bail!("--tls with --address needs --tls-ca"),
                };
                let admin = args.admin_address.as_deref().filter(|_| args.join);
                if let Some(admin) = admin {
                    join_channel(admin, &work.net.genesis_block()).await?;
                }
                let r = measure(&work, std::slice::from_ref(addr), tls.as_ref(), args.clients).await;
                if let Some(admin) = admin {
                    let path = format!("/participation/v1/channels/{}", work.channel);
                    let _ = http_request(admin, "DELETE", &path, "text/plain", b"").await;
                }
                runs.push(r?);
            }
        }
        anyhow::Ok(runs)
    })?;
    let on = &runs[0];
    let off = runs.get(1).map(|r| r.tx_per_s);
    let report = BenchReport {
        tx_per_s: on.tx_per_s,
        tx_per_s_o2_off: off,
        o2_ratio: off.filter(|o| *o > 0.0).map(|o| on.tx_per_s / o),
        block_latency_ms_p50: on.block_latency_ms_p50,
        block_latency_ms_p99: on.block_latency_ms_p99,
        txs: args.txs,
        clients: args.clients,
        envelope_bytes,
        blocks: on.blocks,
        tls: args.tls || (args.address.is_none() && args.consensus != "solo"),
        fsync: !args.no_fsync,
        consensus: if args.address.is_some() { "external".into() } else { args.consensus.clone() },
        nodes: if args.address.is_none() && args.consensus != "solo" { args.nodes } else { 1 },
        runs: runs.clone(),
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "orderer ({} x{}): {} envelopes of {} B from {} clients{}: {:.0} tx/s, {} blocks, block latency p50 {:.1} ms p99 {:.1} ms",
            report.consensus,
            report.nodes,
            report.txs,
            report.envelope_bytes,
            report.clients,
            if report.tls { " over TLS" } else { "" },
            report.tx_per_s,
            report.blocks,
            report.block_latency_ms_p50,
            report.block_latency_ms_p99
        );
        for (r, name) in report.runs.iter().zip(["O-II on", "O-II off"]) {
            println!(
                "  {name}: {:.0} tx/s in {:.2} s, {:.2} CPU s ({:.0}% of one core){}",
                r.tx_per_s,
                r.seconds,
                r.cpu_seconds,
                100.0 * r.cpu_seconds / r.seconds.max(1e-9),
                r.cluster_bytes_per_tx
                    .map(|b| format!(", {b:.0} B per transaction on the cluster links"))
                    .unwrap_or_default()
            );
            if let (Some(ordered), Some(aside)) = (r.kafka_ordered_bytes_per_tx, r.kafka_payload_bytes_per_tx) {
                println!(
                    "  Kafka ({} payloads): {ordered:.0} B per transaction to the ordered partition, {aside:.0} B to \
                     the payload topic",
                    args.payloads
                );
            }
        }
        if let (Some(off), Some(ratio)) = (report.tx_per_s_o2_off, report.o2_ratio) {
            println!("O-II off: {off:.0} tx/s; on/off ratio {ratio:.2}");
        }
    }
    Ok(report)
}
