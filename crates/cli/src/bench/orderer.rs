//! `ferrofabric bench orderer`: ordering throughput and block latency ([`run`], whose documentation describes the
//! measure).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use ferrofabric_protos::common::Status;
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use ferrofabric_testkit::{Network, SigningIdentity, Workload};
use futures::StreamExt;

use ferrofabric_comm::{broadcast, connect, deliver, seek_envelope, seek_range, ClientTls, DeliverItem, TlsConfig};
use ferrofabric_orderer::{start, OrdererConfig};

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

struct Workset {
    net: Network,
    /// Signs the envelopes and the Deliver requests.
    signer: SigningIdentity,
    channel: String,
    envelopes: Vec<Bytes>,
    index: HashMap<String, usize>,
    /// Envelopes sent (one per run) before measuring, to wait for a Raft leader; not counted.
    warmups: Vec<Bytes>,
}

fn make_workset(args: &OrdererBenchArgs) -> anyhow::Result<Workset> {
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

/// User + system CPU seconds of this process so far (from `/proc/self/stat`; 0 if unavailable). Public for the
/// other benches (`ferrofabric bench e2e`).
pub(crate) fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15 (1-based).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11..13).map(|f| f.iter().filter_map(|v| v.parse::<f64>().ok()).sum()).unwrap_or(0.0);
    ticks / 100.0
}

/// The `p`-th percentile (0–100, nearest rank) of ascending `sorted` values; 0 for an empty slice. Public for
/// the other benches (`ferrofabric bench e2e`).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Measures one run against the nodes at `addrs` that serve the workset's channel: client `c` sends to
/// `addrs[c % len]`, blocks are read from `addrs[0]`.
async fn measure(
    work: &Arc<Workset>,
    addrs: &[String],
    tls: Option<&ClientTls>,
    clients: usize,
) -> anyhow::Result<RunResult> {
    let addr = addrs.first().ok_or_else(|| anyhow!("no orderer address"))?.as_str();
    let n = work.envelopes.len();
    let cpu_start = process_cpu_seconds();
    let start = Instant::now();
    let sent_at: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(u64::MAX)).collect());

    // The Deliver client reads from the chain's height before the first send, so that no block is missed. The
    // stream is opened inside its task: a Go gRPC server sends the response headers only with the first block.
    let from = chain_height(work, addr, tls).await?;
    let reader = {
        let seek = seek_range(from, None, SeekBehavior::BlockUntilReady);
        let request = seek_envelope(&work.channel, work.signer.serialized(), |m| work.signer.sign(m), &seek);
        let ch = connect(addr, tls).await?;
        let work = work.clone();
        tokio::spawn(async move {
            let mut stream =
                deliver(ch, futures::stream::iter(vec![request]).chain(futures::stream::pending())).await?;
            let mut arrivals = Vec::new();
            let mut seen = 0usize;
            while seen < n {
                match stream.next().await {
                    Some(Ok(DeliverItem::Block(b))) => {
                        let at = start.elapsed();
                        let ids = tx_ids(&b)?;
                        // Warm-up envelopes and other clients' transactions are not counted.
                        let idx: Vec<usize> = ids.iter().filter_map(|id| work.index.get(id).copied()).collect();
                        seen += idx.len();
                        if !idx.is_empty() {
                            arrivals.push((at, idx));
                        }
                    }
                    Some(Ok(DeliverItem::Status(s))) => bail!("deliver ended with status {s}"),
                    Some(Err(e)) => bail!("deliver failed: {e}"),
                    None => bail!("deliver stream closed after {seen} transactions"),
                }
            }
            Ok(arrivals)
        })
    };

    let per = n.div_ceil(clients.max(1));
    let mut senders = Vec::new();
    for c in 0..clients.max(1) {
        let range = (c * per).min(n)..((c + 1) * per).min(n);
        let ch = connect(&addrs[c % addrs.len()], tls).await?;
        let (work, sent_at) = (work.clone(), sent_at.clone());
        senders.push(tokio::spawn(async move {
            let expected = range.len();
            let envs = futures::stream::iter(range).map(move |i| {
                sent_at[i].store(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
                work.envelopes[i].clone()
            });
            let mut responses = broadcast(ch, envs).await?;
            let mut ok = 0usize;
            while let Some(r) = responses.next().await {
                let r = r?;
                if r.status != Status::Success as i32 {
                    bail!("broadcast answered {}: {}", r.status, r.info);
                }
                ok += 1;
            }
            anyhow::ensure!(ok == expected, "{ok} responses for {expected} envelopes");
            Ok(())
        }));
    }
    for s in senders {
        s.await.context("broadcast client task")??;
    }
    let acked = start.elapsed();
    let arrivals = tokio::time::timeout(Duration::from_secs(600), reader)
        .await
        .context("waiting for the last block")?
        .context("deliver task")??;

    if std::env::var_os("FERROFABRIC_BENCH_DEBUG").is_some() {
        let firsts: Vec<String> =
            arrivals.iter().take(5).map(|(t, _)| format!("{:.0}ms", t.as_secs_f64() * 1e3)).collect();
        eprintln!(
            "all acknowledged at {:.0} ms; first blocks at {firsts:?}; last block at {:.0} ms",
            acked.as_secs_f64() * 1e3,
            arrivals.last().map(|(t, _)| t.as_secs_f64() * 1e3).unwrap_or(0.0)
        );
    }
    let first_send = sent_at.iter().map(|a| a.load(Ordering::Relaxed)).min().unwrap_or(0);
    let last = arrivals.last().map(|(t, _)| t.as_nanos() as u64).unwrap_or(0);
    let seconds = (last.saturating_sub(first_send)) as f64 / 1e9;
    let mut latencies: Vec<f64> = arrivals
        .iter()
        .filter_map(|(at, idx)| {
            let earliest = idx.iter().map(|&i| sent_at[i].load(Ordering::Relaxed)).min()?;
            Some((at.as_nanos() as u64).saturating_sub(earliest) as f64 / 1e6)
        })
        .collect();
    latencies.sort_by(|a, b| a.total_cmp(b));
    Ok(RunResult {
        tx_per_s: if seconds > 0.0 { n as f64 / seconds } else { 0.0 },
        seconds,
        blocks: arrivals.len(),
        block_latency_ms_p50: percentile(&latencies, 50.0),
        block_latency_ms_p99: percentile(&latencies, 99.0),
        cpu_seconds: process_cpu_seconds() - cpu_start,
        cluster_bytes_per_tx: None,
        kafka_ordered_bytes_per_tx: None,
        kafka_payload_bytes_per_tx: None,
    })
}

/// The height (number of blocks) of the workset's channel at `addr`: one more than the newest block's number.
async fn chain_height(work: &Workset, addr: &str, tls: Option<&ClientTls>) -> anyhow::Result<u64> {
    let newest = ferrofabric_protoutil::seek_newest();
    let seek = ferrofabric_protos::orderer::SeekInfo {
        start: Some(newest),
        stop: Some(newest),
        behavior: SeekBehavior::BlockUntilReady as i32,
        ..Default::default()
    };
    let request = seek_envelope(&work.channel, work.signer.serialized(), |m| work.signer.sign(m), &seek);
    let ch = connect(addr, tls).await?;
    let mut stream = deliver(ch, futures::stream::iter(vec![request])).await?;
    match stream.next().await {
        Some(Ok(DeliverItem::Block(b))) => {
            let block = <ferrofabric_protos::common::Block as prost::Message>::decode(b)?;
            Ok(block.header.map_or(0, |h| h.number) + 1)
        }
        Some(Ok(DeliverItem::Status(s))) => bail!("reading the newest block of {} answered {s}", work.channel),
        Some(Err(e)) => bail!("reading the newest block of {}: {e}", work.channel),
        None => bail!("reading the newest block of {}: stream closed", work.channel),
    }
}

fn tx_ids(raw: &Bytes) -> anyhow::Result<Vec<String>> {
    use ferrofabric_protos::common::{Block, ChannelHeader, Envelope, Payload};
    use prost::Message;
    let block = Block::decode(raw.clone())?;
    block
        .data
        .map(|d| d.data)
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let env = Envelope::decode(e)?;
            let p = Payload::decode(env.payload)?;
            let header = p.header.ok_or_else(|| anyhow!("envelope without header"))?;
            Ok(ChannelHeader::decode(header.channel_header)?.tx_id)
        })
        .collect()
}

/// One request to the participation API over plain HTTP at `admin` (the channel join's multipart upload of the
/// genesis block, the channel's removal): the status, an error for a status of 300 or more.
async fn http_request(admin: &str, method: &str, path: &str, content_type: &str, body: &[u8]) -> anyhow::Result<u16> {
    let addr = ferrofabric_comm::parse_addr(admin)?;
    let request = ureq::http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("Content-Type", content_type)
        .body(body.to_vec())?;
    let (method, path) = (method.to_owned(), path.to_owned());
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).max_redirects(0).build().into();
        let mut response = agent.run(request).with_context(|| format!("{method} {path} at {addr}"))?;
        let status = response.status().as_u16();
        if status >= 300 {
            let text = response.body_mut().read_to_string().unwrap_or_default();
            bail!("{method} {path}: HTTP {status}: {text}");
        }
        Ok(status)
    })
    .await?
}

async fn join_channel(admin: &str, genesis: &[u8]) -> anyhow::Result<()> {
    let boundary = "ferrofabric-bench-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"config-block\"; filename=\"genesis.block\"\r\n\
         Content-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(genesis);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    http_request(
        admin,
        "POST",
        "/participation/v1/channels",
        &format!("multipart/form-data; boundary={boundary}"),
        &body,
    )
    .await
    .map(|_| ())
}

/// The client TLS certificate (PEM) of the single etcdraft consenter named in `genesis`.
fn consenter_certificate(genesis: &Bytes) -> anyhow::Result<Bytes> {
    use ferrofabric_protos::common::Block;
    use prost::Message;
    let block = Block::decode(genesis.clone())?;
    let config = ferrofabric_channelconfig::ChannelConfig::from_config_block(&block)?;
    let metadata = config.orderer().map(|o| o.consensus_metadata().clone()).unwrap_or_default();
    let md = ferrofabric_protos::etcdraft::ConfigMetadata::decode(metadata)?;
    md.consenters.first().map(|c| c.client_tls_cert.clone()).ok_or_else(|| anyhow!("the channel has no consenter"))
}

/// Starts an own node with O-II on or off, runs one measurement, shuts it down.
async fn own_node_run(work: &Arc<Workset>, args: &OrdererBenchArgs, parallel: bool) -> anyhow::Result<RunResult> {
    let dir = tempfile::tempdir().context("temporary directory")?;
    let crypto = dir.path().join("crypto");
    work.net.write_msp_dirs(&crypto).map_err(|e| anyhow!("writing MSP directories: {e}"))?;
    let node_dir = crypto.join("ordererOrganizations/example.com/orderers/orderer.example.com");
    let mut config = OrdererConfig::defaults();
    config.general.listen_port = 0;
    config.admin.listen_address = "127.0.0.1:0".into();
    config.operations.listen_address = String::new();
    config.general.local_msp_dir = Some(node_dir.join("msp"));
    config.general.local_msp_id = Some("OrdererMSP".into());
    config.file_ledger.location = Some(dir.path().join("ledger"));
    config.ferrofabric.parallel_checks = parallel;
    if let Some(t) = std::env::var("FERROFABRIC_BENCH_CRYPTO_THREADS").ok().and_then(|v| v.parse().ok()) {
        config.ferrofabric.crypto_threads = t;
    }
    config.ferrofabric.sync_every_block = !args.no_fsync;
    // The generated network's channel names the fixture's orderer as its single etcdraft consenter; tell the
    // node it is that consenter (by its certificate) so that it serves the channel.
    let consenter_cert = dir.path().join("consenter.crt");
    std::fs::write(&consenter_cert, consenter_certificate(&work.net.genesis_block())?)?;
    config.general.cluster.client_certificate = Some(consenter_cert);
    if args.tls {
        config.general.tls = TlsConfig {
            enabled: true,
            certificate: Some(node_dir.join("tls/server.crt")),
            private_key: Some(node_dir.join("tls/server.key")),
            ..TlsConfig::default()
        };
    }
    let plugins = ferrofabric_consensus::backends(&config)?;
    let node = start(config, plugins).await?;
    let admin = node.admin_addr.ok_or_else(|| anyhow!("no admin listener"))?.to_string();
    join_channel(&admin, &work.net.genesis_block()).await?;
    let tls = if args.tls {
        Some(ClientTls {
            ca_pem: std::fs::read(node_dir.join("tls/ca.crt"))?,
            server_name: args.tls_server_name.clone(),
            identity: None,
        })
    } else {
        None
    };
    if std::env::var_os("FERROFABRIC_BENCH_DEBUG").is_some() {
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let pool = Arc::new(rayon::ThreadPoolBuilder::new().num_threads(1).build()?);
        let handler = ferrofabric_orderer::BroadcastHandler::new(node.registrar.clone(), pool, 1, rx);
        let envs = work.envelopes.clone();
        let per = std::thread::Builder::new()
            .name("check-probe".into())
            .spawn(move || {
                let m = envs.len().min(10_000);
                let _ = handler.check(envs[0].clone());
                let t = Instant::now();
                let ok = envs[..m].iter().filter(|e| handler.check((*e).clone()).is_ok()).count();
                (t.elapsed().as_secs_f64() * 1e6 / m as f64, ok == m)
            })?
            .join()
            .map_err(|_| anyhow!("probe panicked"))?;
        eprintln!("check: {:.1} µs per envelope on one thread (all ok: {})", per.0, per.1);
    }
    let result = measure(work, &[node.grpc_addr.to_string()], tls.as_ref(), args.clients).await;
    node.shutdown().await;
    result
}

/// The generated network's genesis block with the etcdraft consenter set replaced by `consenters` and
/// Raft options `options` (BatchSize, BatchTimeout and everything else unchanged; header data hash
/// recomputed). Returns the marshaled block.
///
/// Errors: `genesis` is not a config block of an etcdraft channel.
pub(crate) fn with_raft_consenters(
    genesis: &Bytes,
    consenters: Vec<ferrofabric_protos::etcdraft::Consenter>,
    options: ferrofabric_protos::etcdraft::Options,
) -> anyhow::Result<Bytes> {
    use ferrofabric_protos::etcdraft::ConfigMetadata;
    use prost::Message;
    edit_orderer_group(genesis, |_, ct| {
        let mut md = ConfigMetadata::decode(ct.metadata.clone())?;
        md.consenters = consenters;
        md.options = Some(options);
        ct.metadata = Bytes::from(md.encode_to_vec());
        Ok(())
    })
}

/// The generated network's genesis block turned into a `kafka` channel on `brokers` (`ConsensusType` "kafka"
/// without metadata, a `KafkaBrokers` value; everything else unchanged). Returns the marshaled block.
///
/// Errors: `genesis` is not a config block of an etcdraft channel.
fn with_kafka(genesis: &Bytes, brokers: Vec<String>) -> anyhow::Result<Bytes> {
    use ferrofabric_protos::common::ConfigValue;
    use ferrofabric_protos::orderer::KafkaBrokers;
    use prost::Message;
    edit_orderer_group(genesis, |group, ct| {
        ct.r#type = "kafka".into();
        ct.metadata = Bytes::new();
        let value = Bytes::from(KafkaBrokers { brokers }.encode_to_vec());
        group.values.insert("KafkaBrokers".into(), ConfigValue { version: 0, value, mod_policy: "Admins".into() });
        Ok(())
    })
}

/// `genesis` (an etcdraft channel's config block) with its `/Channel/Orderer` group and `ConsensusType` changed by
/// `edit`; the header's data hash is recomputed. Returns the marshaled block.
fn edit_orderer_group(
    genesis: &Bytes,
    edit: impl FnOnce(
        &mut ferrofabric_protos::common::ConfigGroup,
        &mut ferrofabric_protos::orderer::ConsensusType,
    ) -> anyhow::Result<()>,
) -> anyhow::Result<Bytes> {
    use ferrofabric_protos::common::{Block, ConfigEnvelope, Envelope, Payload};
    use ferrofabric_protos::orderer::ConsensusType;
    use prost::Message;
    let mut block = Block::decode(genesis.clone())?;
    let data = block.data.as_mut().ok_or_else(|| anyhow!("genesis block without data"))?;
    let first = data.data.first_mut().ok_or_else(|| anyhow!("genesis block without envelope"))?;
    let mut env = Envelope::decode(first.clone())?;
    let mut payload = Payload::decode(env.payload.clone())?;
    let mut ce = ConfigEnvelope::decode(payload.data.clone())?;
    let group = ce
        .config
        .as_mut()
        .and_then(|c| c.channel_group.as_mut())
        .and_then(|g| g.groups.get_mut("Orderer"))
        .ok_or_else(|| anyhow!("genesis block without /Channel/Orderer"))?;
    let value = group
        .values
        .get("ConsensusType")
        .ok_or_else(|| anyhow!("genesis block without /Channel/Orderer/ConsensusType"))?;
    let mut ct = ConsensusType::decode(value.value.clone())?;
    anyhow::ensure!(ct.r#type == "etcdraft", "the channel's consensus type is {:?}, not etcdraft", ct.r#type);
    edit(group, &mut ct)?;
    if let Some(v) = group.values.get_mut("ConsensusType") {
        v.value = Bytes::from(ct.encode_to_vec());
    }
    payload.data = Bytes::from(ce.encode_to_vec());
    env.payload = Bytes::from(payload.encode_to_vec());
    *first = Bytes::from(env.encode_to_vec());
    let hash = ferrofabric_protoutil::block_data_hash(&data.data);
    if let Some(h) = block.header.as_mut() {
        h.data_hash = Bytes::copy_from_slice(&hash);
    }
    Ok(Bytes::from(block.encode_to_vec()))
}

/// cryptogen material for `nodes` orderers `orderer{i}.raft.example.com` whose TLS certificates are valid for
/// `127.0.0.1` and `localhost` (server and client use).
fn raft_crypto(nodes: usize) -> anyhow::Result<ferrofabric_cryptogen::Crypto> {
    let yaml = format!(
        "OrdererOrgs:\n  - Name: Orderer\n    Domain: raft.example.com\n    EnableNodeOUs: true\n    Template:\n      \
         Count: {nodes}\n      SANS:\n        - localhost\n        - 127.0.0.1\n"
    );
    let config = ferrofabric_cryptogen::CryptoConfig::from_yaml(&yaml)?;
    Ok(ferrofabric_cryptogen::Crypto::generate(&config, &ferrofabric_cryptogen::GenerateOptions::default())?)
}

/// The BFT channel of the bench: configtxgen's BFT profile over the generated network's Org1 and Org2 (members
/// may write) and the orderer organisation `org` (written under `crypto`), whose nodes are the consenters at
/// `127.0.0.1:ports[i]`, with the generated network's `BatchSize` and `BatchTimeout`. Returns the genesis block.
///
/// Errors: writing the crypto material, or configtxgen refusing the profile.
fn bft_genesis(
    work: &Workset,
    org: &ferrofabric_cryptogen::Org,
    crypto: &std::path::Path,
    ports: &[u16],
) -> anyhow::Result<Bytes> {
    use std::fmt::Write as _;
    let genesis = work.net.genesis_block();
    let config = ferrofabric_channelconfig::ChannelConfig::from_config_block(&prost::Message::decode(genesis)?)?;
    let orderer = config.orderer().ok_or_else(|| anyhow!("the generated channel has no orderer group"))?;
    let (batch, timeout) = (orderer.batch_size(), orderer.batch_timeout());
    org.write(crypto)?;
    let mut consenters = String::new();
    for (i, (member, port)) in org.nodes().iter().zip(ports).enumerate() {
        let home = org.member_dir(crypto, member);
        let _ = writeln!(
            consenters,
            "      - {{ID: {id}, Host: 127.0.0.1, Port: {port}, MSPID: OrdererMSP, Identity: {msp}/signcerts/{cn}-cert.pem, \
             ClientTLSCert: {tls}/server.crt, ServerTLSCert: {tls}/server.crt}}",
            id = i + 1,
            msp = home.join("msp").display(),
            tls = home.join("tls").display(),
            cn = member.common_name(),
        );
    }
    let org_policies = |id: &str| {
        format!(
            "Policies: {{Readers: {{Type: Signature, Rule: \"OR('{id}.member')\"}}, Writers: {{Type: Signature, Rule: \
             \"OR('{id}.member')\"}}, Admins: {{Type: Signature, Rule: \"OR('{id}.admin')\"}}, Endorsement: {{Type: \
             Signature, Rule: \"OR('{id}.member')\"}}}}"
        )
    };
    let meta = |rule: &str| format!("{{Type: ImplicitMeta, Rule: {rule}}}");
    let defaults = format!(
        "Readers: {r}, Writers: {w}, Admins: {a}",
        r = meta("ANY Readers"),
        w = meta("ANY Writers"),
        a = meta("MAJORITY Admins")
    );
    let endpoints: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let yaml = format!(
        "Profiles:\n  Bench:\n    Policies: {{{defaults}}}\n    Capabilities: {{V3_0: true}}\n    Orderer:\n      \
         OrdererType: BFT\n      BatchTimeout: {timeout}ms\n      BatchSize: {{MaxMessageCount: {count}, AbsoluteMaxBytes: \
         {abs}, PreferredMaxBytes: {pref}}}\n      Policies: {{{defaults}, BlockValidation: {bv}}}\n      Capabilities: \
         {{V2_0: true}}\n      ConsenterMapping:\n{consenters}      Organizations:\n      - {{Name: OrdererOrg, ID: \
         OrdererMSP, MSPDir: {omsp}, {opol}, OrdererEndpoints: [{endpoints}]}}\n    Application:\n      Policies: \
         {{{defaults}, LifecycleEndorsement: {end}, Endorsement: {end}}}\n      Capabilities: {{V2_5: true}}\n      \
         Organizations:\n      - {{Name: Org1MSP, ID: Org1MSP, MSPDir: {msp1}, {pol1}}}\n      - {{Name: Org2MSP, ID: \
         Org2MSP, MSPDir: {msp2}, {pol2}}}\n",
        timeout = timeout.as_millis(),
        count = batch.max_message_count,
        abs = batch.absolute_max_bytes,
        pref = batch.preferred_max_bytes,
        bv = meta("ANY Writers"),
        omsp = org.dir(crypto).join("msp").display(),
        opol = org_policies("OrdererMSP"),
        endpoints = endpoints.join(", "),
        end = meta("MAJORITY Endorsement"),
        msp1 = crypto.join("peerOrganizations/org1.example.com/msp").display(),
        pol1 = org_policies("Org1MSP"),
        msp2 = crypto.join("peerOrganizations/org2.example.com/msp").display(),
        pol2 = org_policies("Org2MSP"),
    );
    let profile = ferrofabric_configtxgen::ConfigTx::from_yaml(&yaml, crypto)?.profile("Bench")?;
    let block = ferrofabric_configtxgen::genesis_block(&profile, &work.channel)?;
    Ok(Bytes::from(prost::Message::encode_to_vec(&block)))
}

/// Starts `args.nodes` etcdraft or BFT nodes in this process with O-II on or off, waits until they order, runs
/// one measurement, shuts them down.
async fn cluster_run(
    work: &Arc<Workset>,
    args: &OrdererBenchArgs,
    parallel: bool,
    warmup: &Bytes,
) -> anyhow::Result<RunResult> {
    let bft = args.consensus == "bft";
    let kafka = args.consensus == "kafka";
    let least = if bft {
        4
    } else if kafka {
        1
    } else {
        2
    };
    anyhow::ensure!(args.nodes >= least, "--consensus {} needs --nodes {least} or more", args.consensus);
    let dir = tempfile::tempdir().context("temporary directory")?;
    let crypto = dir.path().join("crypto");
    work.net.write_msp_dirs(&crypto).map_err(|e| anyhow!("writing MSP directories: {e}"))?;
    let shared_msp = crypto.join("ordererOrganizations/example.com/orderers/orderer.example.com/msp");
    let raft = raft_crypto(args.nodes)?;
    let org = raft.orgs().first().ok_or_else(|| anyhow!("cryptogen made no orderer organisation"))?;
    let ca = dir.path().join("tlsca.pem");
    std::fs::write(&ca, org.tlsca().cert_pem())?;
    let ports: Vec<u16> =
        (0..args.nodes).map(|_| ferrofabric_comm::unused_port("127.0.0.1")).collect::<Result<_, _>>()?;
    let consenters = org
        .nodes()
        .iter()
        .zip(&ports)
        .map(|(m, port)| ferrofabric_protos::etcdraft::Consenter {
            host: "127.0.0.1".into(),
            port: u32::from(*port),
            client_tls_cert: Bytes::from(m.tls_cert_pem().to_owned()),
            server_tls_cert: Bytes::from(m.tls_cert_pem().to_owned()),
        })
        .collect();
    let options = ferrofabric_protos::etcdraft::Options {
        tick_interval: "100ms".into(),
        election_tick: 10,
        heartbeat_tick: 1,
        max_inflight_blocks: 5,
        snapshot_interval_size: 16 << 20,
    };
    // Kafka: an existing cluster, or three brokers of our own for this run (a fresh log for every run).
    let mut brokers = None;
    let genesis = if bft {
        bft_genesis(work, org, &crypto, &ports)?
    } else if kafka {
        let bootstrap = match &args.kafka_brokers {
            Some(b) => b.clone(),
            None => {
                let cluster = ferrofabric_testkit::kafka::KafkaCluster::start(
                    &dir.path().join("kafka"),
                    3,
                    Duration::from_secs(3600),
                )
                .context("starting Kafka brokers (see docs/KAFKA.md)")?;
                brokers.insert(cluster).bootstrap()
            }
        };
        with_kafka(&work.net.genesis_block(), bootstrap.split(',').map(str::to_owned).collect())?
    } else {
        with_raft_consenters(&work.net.genesis_block(), consenters, options)?
    };
    let mut nodes = Vec::new();
    for (i, (member, port)) in org.nodes().iter().zip(&ports).enumerate() {
        let home = dir.path().join(format!("node{i}"));
        std::fs::create_dir_all(&home)?;
        let (cert, key) = (home.join("tls.crt"), home.join("tls.key"));
        std::fs::write(&cert, member.tls_cert_pem())?;
        std::fs::write(&key, member.tls_key_pem())?;
        let mut config = OrdererConfig::defaults();
        config.general.listen_address = "127.0.0.1".into();
        config.general.listen_port = *port;
        config.admin.listen_address = "127.0.0.1:0".into();
        config.operations.listen_address = String::new();
        // BFT consenters sign blocks each with its own identity, the one the consenter mapping names.
        let msp = if bft { org.member_dir(&crypto, member).join("msp") } else { shared_msp.clone() };
        config.general.local_msp_dir = Some(msp);
        config.general.local_msp_id = Some("OrdererMSP".into());
        config.file_ledger.location = Some(home.join("ledger"));
        config.consensus.wal_dir = Some(home.join("etcdraft/wal"));
        config.consensus.snap_dir = Some(home.join("etcdraft/snapshot"));
        config.ferrofabric.parallel_checks = parallel;
        config.ferrofabric.sync_every_block = !args.no_fsync;
        config.kafka.payloads = args.payloads.clone();
        // Node-to-node traffic is mutual TLS, so the gRPC listener always runs TLS here.
        config.general.tls = TlsConfig {
            enabled: true,
            certificate: Some(cert.clone()),
            private_key: Some(key.clone()),
            root_cas: vec![ca.clone()],
            client_root_cas: vec![ca.clone()],
            ..TlsConfig::default()
        };
        config.general.cluster.client_certificate = Some(cert);
        config.general.cluster.client_private_key = Some(key);
        let plugins = ferrofabric_consensus::backends(&config)?;
        nodes.push(start(config, plugins).await.with_context(|| format!("starting {} node {i}", args.consensus))?);
    }
    let result = async {
        for node in &nodes {
            let admin = node.admin_addr.ok_or_else(|| anyhow!("no admin listener"))?.to_string();
            join_channel(&admin, &genesis).await?;
        }
        let tls = ClientTls {
            ca_pem: org.tlsca().cert_pem().as_bytes().to_vec(),
            server_name: args.tls_server_name.clone(),
            identity: None,
        };
        let addrs: Vec<String> = nodes.iter().map(|n| n.grpc_addr.to_string()).collect();
        // Every node, for the clients are spread over all of them: a Kafka orderer answers SERVICE_UNAVAILABLE
        // until its own connection to the brokers is up, which may come after node 0's.
        for addr in &addrs {
            wait_until_ordering(addr, &tls, warmup).await?;
        }
        let egress = || nodes.iter().map(|n| n.registrar.metrics().cluster_egress_bytes()).sum::<u64>();
        let posted = || {
            nodes
                .iter()
                .map(|n| n.registrar.metrics().consensus_log_bytes_posted())
                .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
        };
        let (before, posted_before) = (egress(), posted());
        let mut run = measure(work, &addrs, Some(&tls), args.clients).await?;
        let per_tx = |bytes: u64| bytes as f64 / work.envelopes.len().max(1) as f64;
        run.cluster_bytes_per_tx = Some(per_tx(egress().saturating_sub(before)));
        if kafka {
            let posted_after = posted();
            run.kafka_ordered_bytes_per_tx = Some(per_tx(posted_after.0.saturating_sub(posted_before.0)));
            run.kafka_payload_bytes_per_tx = Some(per_tx(posted_after.1.saturating_sub(posted_before.1)));
        }
        anyhow::Ok(run)
    }
    .await;
    for node in nodes {
        node.shutdown().await;
    }
    drop(brokers);
    result
}

/// Broadcasts `warmup` to `addr` until it is answered SUCCESS (the node orders: a leader exists, or its Kafka
/// connection is up), for up to 60 s.
async fn wait_until_ordering(addr: &str, tls: &ClientTls, warmup: &Bytes) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ch = connect(addr, Some(tls)).await?;
        let mut responses = broadcast(ch, futures::stream::iter(vec![warmup.clone()])).await?;
        let last = match responses.next().await {
            Some(Ok(r)) if r.status == Status::Success as i32 => return Ok(()),
            Some(Ok(r)) => format!("status {}: {}", r.status, r.info),
            Some(Err(e)) => e.to_string(),
            None => "no response".into(),
        };
        if Instant::now() > deadline {
            bail!("the nodes did not start ordering within 60 s (last answer: {last})");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
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
