//! Node-wide counters, served by the operations listener in Prometheus text format (a small subset of
//! Fabric's orderer metrics: `broadcast_processed_count`, `blockcutter_block_fill_duration` is not kept,
//! `deliver_blocks_sent`, ...).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters; all methods are lock-free and callable from any thread.
#[derive(Debug, Default)]
pub struct Metrics {
    broadcast_success: AtomicU64,
    broadcast_rejected: AtomicU64,
    blocks_written: AtomicU64,
    block_bytes: AtomicU64,
    deliver_blocks_sent: AtomicU64,
    deliver_streams: AtomicU64,
}

impl Metrics {
    /// Counts one broadcast response: SUCCESS or not.
    pub fn broadcast(&self, success: bool) {
        let c = if success { &self.broadcast_success } else { &self.broadcast_rejected };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one appended block of `size` bytes.
    pub fn block_written(&self, size: usize) {
        self.blocks_written.fetch_add(1, Ordering::Relaxed);
        self.block_bytes.fetch_add(size as u64, Ordering::Relaxed);
    }

    /// Counts one block sent on a Deliver stream.
    pub fn deliver_block_sent(&self) {
        self.deliver_blocks_sent.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one opened Deliver stream.
    pub fn deliver_stream_opened(&self) {
        self.deliver_streams.fetch_add(1, Ordering::Relaxed);
    }

    /// Number of blocks appended on all channels.
    pub fn blocks_written(&self) -> u64 {
        self.blocks_written.load(Ordering::Relaxed)
    }

    /// The counters in Prometheus text exposition format.
    pub fn prometheus(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "# TYPE broadcast_processed_count counter\n\
             broadcast_processed_count{{status=\"SUCCESS\"}} {}\n\
             broadcast_processed_count{{status=\"REJECTED\"}} {}\n\
             # TYPE ledger_blocks_written counter\nledger_blocks_written {}\n\
             # TYPE ledger_block_bytes counter\nledger_block_bytes {}\n\
             # TYPE deliver_blocks_sent counter\ndeliver_blocks_sent {}\n\
             # TYPE deliver_streams_opened counter\ndeliver_streams_opened {}\n",
            get(&self.broadcast_success),
            get(&self.broadcast_rejected),
            get(&self.blocks_written),
            get(&self.block_bytes),
            get(&self.deliver_blocks_sent),
            get(&self.deliver_streams),
        )
    }
}
