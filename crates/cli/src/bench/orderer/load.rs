//! The load: clients broadcasting the workset's envelopes to the orderers while a Deliver stream times each
//! block, and the probes that tell when a cluster orders.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};
use bytes::Bytes;
use ferrofabric_protos::common::Status;
use ferrofabric_protos::orderer::seek_info::SeekBehavior;
use futures::StreamExt;

use ferrofabric_comm::{broadcast, connect, deliver, seek_envelope, seek_range, ClientTls, DeliverItem};

use super::workset::{RunResult, Workset};
use crate::bench::stats::{percentile, process_cpu_seconds};

/// Measures one run against the nodes at `addrs` that serve the workset's channel: client `c` sends to
/// `addrs[c % len]`, blocks are read from `addrs[0]`.
pub(crate) async fn measure(
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
pub(crate) async fn chain_height(work: &Workset, addr: &str, tls: Option<&ClientTls>) -> anyhow::Result<u64> {
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

pub(crate) fn tx_ids(raw: &Bytes) -> anyhow::Result<Vec<String>> {
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

/// Broadcasts `warmup` to `addr` until it is answered SUCCESS (the node orders: a leader exists, or its Kafka
/// connection is up), for up to 60 s.
pub(crate) async fn wait_until_ordering(addr: &str, tls: &ClientTls, warmup: &Bytes) -> anyhow::Result<()> {
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
