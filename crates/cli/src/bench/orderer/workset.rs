//! What a run of `ferrofabric bench orderer` is given ([`OrdererBenchArgs`]), what it measures ([`RunResult`]),
//! and the network, identities and envelopes it works with ([`Workset`]).

use std::collections::HashMap;

use anyhow::anyhow;
use bytes::Bytes;
use ferrofabric_testkit::{Network, SigningIdentity, Workload};

/// Arguments of `ferrofabric bench orderer`.
#[derive(Debug, Clone, clap::Args)]
pub struct OrdererBenchArgs {
    /// Number of envelopes (N).
    #[arg(long, default_value_t = 40_000)]
    pub txs: usize,
    /// Concurrent broadcast clients (K).
    #[arg(long, default_value_t = 4)]
    pub clients: usize,
    /// Bytes of each of the two written values; 100 gives ~4.1 KB envelopes.
    #[arg(long, default_value_t = 100)]
    pub value_bytes: usize,
    /// gRPC address of an orderer to measure instead of starting one, serving `--channel`.
    #[arg(long)]
    pub address: Option<String>,
    /// With `--address`: join the generated network's genesis block over the participation API first (at
    /// `--admin-address`) and remove the channel afterwards.
    #[arg(long, requires = "admin_address")]
    pub join: bool,
    /// Channel participation address of that orderer (plain HTTP), for `--join`.
    #[arg(long)]
    pub admin_address: Option<String>,
    /// Channel to broadcast to and read blocks from.
    #[arg(long, default_value = "mychannel")]
    pub channel: String,
    /// MSP directory (signcerts, keystore) of the client identity that signs the envelopes and Deliver requests;
    /// default the generated network's User1 of Org1.
    #[arg(long, requires = "msp_id")]
    pub msp_dir: Option<std::path::PathBuf>,
    /// MSP ID of `--msp-dir`'s identity.
    #[arg(long)]
    pub msp_id: Option<String>,
    /// Use TLS on the gRPC connections (own node: the generated network's orderer TLS certificate; external:
    /// needs --tls-ca).
    #[arg(long)]
    pub tls: bool,
    /// CA PEM of the external orderer's TLS certificate.
    #[arg(long)]
    pub tls_ca: Option<std::path::PathBuf>,
    /// TLS server name to check (default localhost).
    #[arg(long, default_value = "localhost")]
    pub tls_server_name: String,
    /// Do not fsync every block (own node).
    #[arg(long)]
    pub no_fsync: bool,
    /// Skip the O-II-off comparison run.
    #[arg(long)]
    pub skip_o2_off: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Consensus of the own nodes: `solo` (one node), `etcdraft`, `bft` or `kafka` (with `--nodes`).
    #[arg(long, default_value = "solo", value_parser = ["solo", "etcdraft", "bft", "kafka"])]
    pub consensus: String,
    /// Number of etcdraft (at least 2), BFT (at least 4) or Kafka (at least 1) nodes started in this process.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Kafka: what the own orderers post to the channel's partition: `aside` (transaction references, FastFabric
    /// Opt O-I) or `inline` (whole envelopes, as Fabric 1.4).
    #[arg(long, default_value = "aside", value_parser = ["aside", "inline"])]
    pub payloads: String,
    /// Kafka: bootstrap servers of an existing cluster (`host:port,...`; the run creates the channel's topics,
    /// so each run needs a fresh cluster or another `--channel`). Without it, each run starts three brokers on
    /// 127.0.0.1 from the Kafka jars of `tests/kafka` (see docs/KAFKA.md).
    #[arg(long)]
    pub kafka_brokers: Option<String>,
}

impl Default for OrdererBenchArgs {
    fn default() -> Self {
        OrdererBenchArgs {
            txs: 40_000,
            clients: 4,
            value_bytes: 100,
            address: None,
            join: false,
            admin_address: None,
            channel: "mychannel".into(),
            msp_dir: None,
            msp_id: None,
            tls: false,
            tls_ca: None,
            tls_server_name: "localhost".into(),
            no_fsync: false,
            skip_o2_off: false,
            json: false,
            consensus: "solo".into(),
            nodes: 3,
            payloads: "aside".into(),
            kafka_brokers: None,
        }
    }
}

/// The result of one measured run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunResult {
    /// Transactions per second.
    pub tx_per_s: f64,
    /// Seconds from the first send to the last block.
    pub seconds: f64,
    /// Blocks received.
    pub blocks: usize,
    /// Block latency percentiles in milliseconds.
    pub block_latency_ms_p50: f64,
    /// 99th percentile.
    pub block_latency_ms_p99: f64,
    /// CPU time the whole process (orderer and clients) used during the run, in seconds (Linux only; 0
    /// elsewhere).
    pub cpu_seconds: f64,
    /// Bytes all nodes handed to their cluster links (consensus messages, forwarded requests) per transaction,
    /// for own etcdraft and BFT clusters.
    pub cluster_bytes_per_tx: Option<f64>,
    /// Kafka: bytes all nodes posted to the channel's ordered partition per transaction.
    pub kafka_ordered_bytes_per_tx: Option<f64>,
    /// Kafka: bytes all nodes wrote to the channel's payload topic per transaction (payloads aside).
    pub kafka_payload_bytes_per_tx: Option<f64>,
}

pub(crate) struct Workset {
    pub(crate) net: Network,
    /// Signs the envelopes and the Deliver requests.
    pub(crate) signer: SigningIdentity,
    pub(crate) channel: String,
    pub(crate) envelopes: Vec<Bytes>,
    pub(crate) index: HashMap<String, usize>,
    /// Envelopes sent (one per run) before measuring, to wait for a Raft leader; not counted.
    pub(crate) warmups: Vec<Bytes>,
}

pub(crate) fn make_workset(args: &OrdererBenchArgs) -> anyhow::Result<Workset> {
    let net = Network::generate(2025).map_err(|e| anyhow!("generating the network: {e}"))?;
    let signer = match (&args.msp_dir, &args.msp_id) {
        (Some(dir), Some(id)) => SigningIdentity::from_msp_dir(id, dir)
            .map_err(|e| anyhow!("loading the client identity from {}: {e}", dir.display()))?,
        _ => net.client(0).clone(),
    };
    let workload = |seed| Workload::new(&net, seed).creator(&signer).channel(args.channel.clone());
    let built = workload(7)
        .transfer_txs(args.txs as u64, args.value_bytes, |_| None)
        .map_err(|e| anyhow!("building transactions: {e}"))?;
    let index = built.iter().enumerate().map(|(i, b)| (b.tx_id.clone(), i)).collect();
    let envelopes = built.into_iter().map(|b| b.envelope).collect();
    let warmups = workload(8)
        .transfer_txs(2, args.value_bytes, |_| None)
        .map_err(|e| anyhow!("building transactions: {e}"))?
        .into_iter()
        .map(|b| b.envelope)
        .collect();
    Ok(Workset { signer, channel: args.channel.clone(), net, envelopes, index, warmups })
}
