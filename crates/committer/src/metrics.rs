//! The committer's Prometheus metrics (names follow Fabric's peer where Fabric has one: `ledger_blockchain_height`,
//! `ledger_transaction_count`, `ledger_block_processing_time`), served with `/healthz` by [`ferrofabric_comm::operations_router`].

use std::time::{Duration, Instant};

use prometheus::{Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, Opts, Registry};

/// Counters of the commit pipeline. Cheap to clone; all updates are lock-free.
#[derive(Clone, Debug)]
pub(crate) struct CommitMetrics {
    height: IntGauge,
    blocks: IntCounter,
    transactions: IntCounterVec,
    latency: Histogram,
    throughput: prometheus::Gauge,
}

impl CommitMetrics {
    /// Creates the metrics of channel `channel` and registers them with `registry`.
    ///
    /// Errors: a metric of the same name is already registered.
    pub(crate) fn register(registry: &Registry, channel: &str) -> prometheus::Result<CommitMetrics> {
        let labels = [("channel", channel)];
        let with = |o: Opts| labels.iter().fold(o, |o, (k, v)| o.const_label(*k, *v));
        let height =
            IntGauge::with_opts(with(Opts::new("ledger_blockchain_height", "Height of the chain in blocks.")))?;
        let blocks = IntCounter::with_opts(with(Opts::new(
            "committer_blocks_committed_total",
            "Blocks validated and stored since start (replayed blocks excluded).",
        )))?;
        let transactions = IntCounterVec::new(
            with(Opts::new("ledger_transaction_count", "Number of transactions committed, by validation code.")),
            &["validation_code"],
        )?;
        let latency = Histogram::with_opts(
            HistogramOpts::new(
                "ledger_block_processing_time",
                "Time taken in seconds for ledger block processing: from the block's arrival from the orderer to \
                 its storage as committed.",
            )
            .const_label("channel", channel)
            .buckets(prometheus::exponential_buckets(0.001, 2.0, 14)?),
        )?;
        let throughput = prometheus::Gauge::with_opts(with(Opts::new(
            "committer_throughput_tx_per_second",
            "Committed transactions per second over the last second or more.",
        )))?;
        registry.register(Box::new(height.clone()))?;
        registry.register(Box::new(blocks.clone()))?;
        registry.register(Box::new(transactions.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        registry.register(Box::new(throughput.clone()))?;
        Ok(CommitMetrics { height, blocks, transactions, latency, throughput })
    }

    /// Sets the height (number of stored blocks).
    pub(crate) fn set_height(&self, height: u64) {
        self.height.set(height as i64);
    }

    /// Records one committed block: its validation codes (TRANSACTIONS_FILTER bytes) and its latency.
    pub(crate) fn block_committed(&self, filter: &[u8], latency: Duration) {
        self.blocks.inc();
        self.latency.observe(latency.as_secs_f64());
        let mut counts = [0u64; 256];
        for c in filter {
            counts[*c as usize] += 1;
        }
        for (code, n) in counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            let name = ferrofabric_protos::peer::TxValidationCode::try_from(code as i32)
                .map(|c| c.as_str_name().to_owned())
                .unwrap_or_else(|_| code.to_string());
            self.transactions.with_label_values(&[name.as_str()]).inc_by(*n);
        }
    }

    /// Sets the throughput gauge.
    pub(crate) fn set_throughput(&self, tx_per_second: f64) {
        self.throughput.set(tx_per_second);
    }
}

/// Measures committed tx/s over windows of at least one second.
#[derive(Debug)]
pub(crate) struct ThroughputMeter {
    window_start: Instant,
    txs: u64,
}

impl Default for ThroughputMeter {
    fn default() -> Self {
        ThroughputMeter { window_start: Instant::now(), txs: 0 }
    }
}

impl ThroughputMeter {
    /// Adds `txs` committed transactions; returns the rate once a window of ≥ 1 s closes.
    pub(crate) fn add(&mut self, txs: u64) -> Option<f64> {
        self.txs += txs;
        let elapsed = self.window_start.elapsed();
        if elapsed < Duration::from_secs(1) {
            return None;
        }
        let rate = self.txs as f64 / elapsed.as_secs_f64();
        self.window_start = Instant::now();
        self.txs = 0;
        Some(rate)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use prometheus::{Encoder, TextEncoder};

    use super::*;

    #[test]
    fn block_metrics_count_codes_by_name() {
        let registry = Registry::new();
        let m = CommitMetrics::register(&registry, "mychannel").unwrap();
        m.block_committed(&[0, 0, 11, 0], Duration::from_millis(3));
        m.set_height(5);
        let mut out = Vec::new();
        TextEncoder::new().encode(&registry.gather(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("ledger_transaction_count{channel=\"mychannel\",validation_code=\"VALID\"} 3"), "{text}");
        assert!(text.contains("validation_code=\"MVCC_READ_CONFLICT\"} 1"), "{text}");
        assert!(text.contains("ledger_blockchain_height{channel=\"mychannel\"} 5"), "{text}");
    }
}

/// Metrics of the BMac card, when the committer has one (`Accelerator`).
#[derive(Clone, Debug)]
pub(crate) struct CardMetrics {
    on: IntGauge,
    blocks: IntCounterVec,
}

impl CardMetrics {
    /// Creates the card's metrics of channel `channel` and registers them with `registry`.
    ///
    /// Errors: a metric of the same name is already registered.
    pub(crate) fn register(registry: &Registry, channel: &str) -> prometheus::Result<CardMetrics> {
        let on = IntGauge::with_opts(
            Opts::new("committer_accelerator_card_on", "1 while the BMac card validates, 0 once it was switched off.")
                .const_label("channel", channel),
        )?;
        let blocks = IntCounterVec::new(
            Opts::new(
                "committer_accelerator_blocks_total",
                "Blocks committed with the card, by path: hardware (validated by the card) or host (in software).",
            )
            .const_label("channel", channel),
            &["path"],
        )?;
        registry.register(Box::new(on.clone()))?;
        registry.register(Box::new(blocks.clone()))?;
        on.set(1);
        Ok(CardMetrics { on, blocks })
    }

    /// Records a committed block: whether the card validated it, and whether the card is still on.
    pub(crate) fn block(&self, on_card: bool, card_on: bool) {
        self.blocks.with_label_values(&[if on_card { "hardware" } else { "host" }]).inc();
        self.on.set(i64::from(card_on));
    }
}
