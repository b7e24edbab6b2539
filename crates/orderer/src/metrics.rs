//! Node-wide counters, served by the operations listener in Prometheus text format (a small subset of
//! Fabric's orderer metrics: `broadcast_processed_count`, `blockcutter_block_fill_duration` is not kept,
//! `deliver_blocks_sent`, ...).

use std::sync::atomic::{AtomicU64, Ordering};

use ferrofabric_protos::common::Status;

/// The statuses a Broadcast answers with, each counted under its own `status` label as Fabric does.
const BROADCAST_STATUSES: [Status; 6] = [
    Status::Success,
    Status::BadRequest,
    Status::Forbidden,
    Status::NotFound,
    Status::ServiceUnavailable,
    Status::InternalServerError,
];

/// Counters; all methods are lock-free and callable from any thread.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Per status of [`BROADCAST_STATUSES`], in that order.
    broadcast: [AtomicU64; BROADCAST_STATUSES.len()],
    blocks_written: AtomicU64,
    block_bytes: AtomicU64,
    deliver_blocks_sent: AtomicU64,
    deliver_streams: AtomicU64,
    cluster_egress_bytes: AtomicU64,
    consensus_log_ordered_bytes: AtomicU64,
    consensus_log_payload_bytes: AtomicU64,
}

impl Metrics {
    /// Counts one broadcast response of `status` (a status outside [`BROADCAST_STATUSES`] counts as
    /// INTERNAL_SERVER_ERROR).
    pub fn broadcast(&self, status: Status) {
        let i = BROADCAST_STATUSES.iter().position(|s| *s == status).unwrap_or(BROADCAST_STATUSES.len() - 1);
        self.broadcast[i].fetch_add(1, Ordering::Relaxed);
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

    /// Counts `n` bytes handed to a cluster link (consensus messages and requests forwarded to other consenters).
    pub fn cluster_bytes_sent(&self, n: usize) {
        self.cluster_egress_bytes.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Bytes handed to this node's cluster links so far, on all channels.
    pub fn cluster_egress_bytes(&self) -> u64 {
        self.cluster_egress_bytes.load(Ordering::Relaxed)
    }

    /// Counts `n` bytes this node posted to a consensus log: to the ordered stream (`payload == false`: what every
    /// orderer must read in order, e.g. a Kafka channel's partition) or beside it (`payload == true`: envelopes
    /// held aside, e.g. a Kafka channel's payload topic).
    pub fn consensus_log_bytes(&self, n: usize, payload: bool) {
        let c = if payload { &self.consensus_log_payload_bytes } else { &self.consensus_log_ordered_bytes };
        c.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Bytes this node posted to consensus logs so far, on all channels: `(ordered, payloads aside)`.
    pub fn consensus_log_bytes_posted(&self) -> (u64, u64) {
        (
            self.consensus_log_ordered_bytes.load(Ordering::Relaxed),
            self.consensus_log_payload_bytes.load(Ordering::Relaxed),
        )
    }

    /// Number of blocks appended on all channels.
    pub fn blocks_written(&self) -> u64 {
        self.blocks_written.load(Ordering::Relaxed)
    }

    /// The counters in Prometheus text exposition format.
    pub fn prometheus(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut out = String::from("# TYPE broadcast_processed_count counter\n");
        for (status, count) in BROADCAST_STATUSES.iter().zip(&self.broadcast) {
            // SUCCESS always, the failures once they happened (Fabric's counters appear on first use).
            if *status == Status::Success || get(count) > 0 {
                out.push_str(&format!(
                    "broadcast_processed_count{{status=\"{}\"}} {}\n",
                    status.as_str_name(),
                    get(count)
                ));
            }
        }
        out + &format!(
            "# TYPE ledger_blocks_written counter\nledger_blocks_written {}\n\
             # TYPE ledger_block_bytes counter\nledger_block_bytes {}\n\
             # TYPE deliver_blocks_sent counter\ndeliver_blocks_sent {}\n\
             # TYPE deliver_streams_opened counter\ndeliver_streams_opened {}\n\
             # TYPE cluster_comm_egress_bytes counter\ncluster_comm_egress_bytes {}\n\
             # TYPE consensus_log_posted_bytes counter\n\
             consensus_log_posted_bytes{{stream=\"ordered\"}} {}\n\
             consensus_log_posted_bytes{{stream=\"payloads\"}} {}\n",
            get(&self.blocks_written),
            get(&self.block_bytes),
            get(&self.deliver_blocks_sent),
            get(&self.deliver_streams),
            get(&self.cluster_egress_bytes),
            get(&self.consensus_log_ordered_bytes),
            get(&self.consensus_log_payload_bytes),
        )
    }
}
