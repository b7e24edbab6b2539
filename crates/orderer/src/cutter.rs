//! The block cutter: turns the ordered stream of messages into batches (Fabric
//! `orderer/common/blockcutter/blockcutter.go`).
//!
//! Rules, applied to each message in order, with the channel's `BatchSize` at that moment:
//! 1. a message larger than `PreferredMaxBytes` is isolated: the pending batch (if any) is cut, then the
//!    message forms a batch of its own;
//! 2. if adding the message would push the pending batch past `PreferredMaxBytes`, the pending batch is cut
//!    first and the message starts a new one;
//! 3. when the pending batch reaches `MaxMessageCount` messages it is cut;
//! 4. `BatchTimeout` (run by the consensus loop with [`BlockCutter::deadline`]) cuts whatever is pending once
//!    that much time has passed since the *first* message of the pending batch arrived;
//! 5. config messages are never handed to the cutter: the consensus loop cuts the pending batch
//!    ([`BlockCutter::cut`]) and writes the config message alone in its block.
//!
//! `AbsoluteMaxBytes` is enforced before cutting (the broadcast size filter refuses larger messages), so with
//! `PreferredMaxBytes <= AbsoluteMaxBytes` no block's data exceeds it.
//!
//! Sizes are Fabric's `messageSizeBytes`: `len(Envelope.payload) + len(Envelope.signature)`.
//!
//! Difference from Fabric: Fabric's solo/etcdraft timers keep running from the first message after the
//! previous timer-driven cut even when a size rule cut in between; here the timeout always counts from the
//! first message of the batch that is actually pending.

use std::time::{Duration, Instant};

use ferrofabric_channelconfig::BatchSize;

/// A batch of messages that will become one block, in order.
pub type Batch<T> = Vec<T>;

/// Fabric's block cutter (`blockcutter.receiver`), generic over the message type so that consensus
/// implementations that order references (e.g. transaction IDs, with payloads held aside) can use it too.
#[derive(Debug)]
pub struct BlockCutter<T> {
    pending: Vec<T>,
    pending_bytes: u64,
    pending_since: Option<Instant>,
}

impl<T> Default for BlockCutter<T> {
    fn default() -> Self {
        BlockCutter { pending: Vec::new(), pending_bytes: 0, pending_since: None }
    }
}

impl<T> BlockCutter<T> {
    /// An empty cutter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `msg` of `size` bytes (payload + signature) arriving at `now`, with the channel's current batch
    /// limits. Returns the batches cut by this message (0, 1 or 2, in order) and whether a batch is still
    /// pending afterwards (the caller then keeps, or starts, its batch timer from [`Self::deadline`]).
    pub fn ordered(&mut self, msg: T, size: u32, limits: BatchSize, now: Instant) -> (Vec<Batch<T>>, bool) {
        let mut batches = Vec::new();
        let size = u64::from(size);
        let preferred = u64::from(limits.preferred_max_bytes);
        if size > preferred {
            if !self.pending.is_empty() {
                batches.push(self.cut());
            }
            batches.push(vec![msg]);
            return (batches, false);
        }
        if self.pending_bytes + size > preferred {
            batches.push(self.cut());
        }
        if self.pending.is_empty() {
            self.pending_since = Some(now);
        }
        self.pending.push(msg);
        self.pending_bytes += size;
        if self.pending.len() >= limits.max_message_count as usize {
            batches.push(self.cut());
            return (batches, false);
        }
        (batches, true)
    }

    /// Cuts and returns the pending batch (empty if nothing is pending) and starts a new one.
    pub fn cut(&mut self) -> Batch<T> {
        self.pending_bytes = 0;
        self.pending_since = None;
        std::mem::take(&mut self.pending)
    }

    /// Number of pending messages.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Total size in bytes of the pending messages.
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }

    /// When the pending batch must be cut by the batch timeout: arrival of its first message + `timeout`.
    /// `None` when nothing is pending.
    pub fn deadline(&self, timeout: Duration) -> Option<Instant> {
        self.pending_since.map(|t| t + timeout)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn limits(count: u32, absolute: u32, preferred: u32) -> BatchSize {
        BatchSize { max_message_count: count, absolute_max_bytes: absolute, preferred_max_bytes: preferred }
    }

    #[test]
    fn max_message_count_cuts_exactly_at_the_limit() {
        let l = limits(3, 1000, 1000);
        let now = Instant::now();
        let mut c = BlockCutter::new();
        assert_eq!(c.ordered(1, 10, l, now), (vec![], true));
        assert_eq!(c.ordered(2, 10, l, now), (vec![], true));
        assert_eq!(c.ordered(3, 10, l, now), (vec![vec![1, 2, 3]], false));
        assert_eq!(c.pending_len(), 0);
        assert_eq!(c.ordered(4, 10, l, now), (vec![], true));
        assert_eq!(c.cut(), vec![4]);
    }

    #[test]
    fn preferred_max_bytes_overflow_cuts_before_the_message() {
        let l = limits(100, 1000, 100);
        let now = Instant::now();
        let mut c = BlockCutter::new();
        assert_eq!(c.ordered('a', 40, l, now), (vec![], true));
        assert_eq!(c.ordered('b', 40, l, now), (vec![], true));
        // 40 + 40 + 30 > 100: a and b go out, c starts the next batch.
        assert_eq!(c.ordered('c', 30, l, now), (vec![vec!['a', 'b']], true));
        assert_eq!(c.pending_bytes(), 30);
        // Exactly reaching the preferred size is allowed.
        assert_eq!(c.ordered('d', 70, l, now), (vec![], true));
        assert_eq!(c.cut(), vec!['c', 'd']);
    }

    #[test]
    fn message_over_preferred_max_bytes_is_isolated() {
        let l = limits(100, 1000, 100);
        let now = Instant::now();
        let mut c = BlockCutter::new();
        assert_eq!(c.ordered(1, 10, l, now), (vec![], true));
        // Pending batch is cut first, then the big message alone; nothing is left pending.
        assert_eq!(c.ordered(2, 101, l, now), (vec![vec![1], vec![2]], false));
        assert_eq!(c.pending_len(), 0);
        // With nothing pending, the big message is still alone.
        assert_eq!(c.ordered(3, 500, l, now), (vec![vec![3]], false));
        assert!(c.deadline(Duration::from_secs(1)).is_none());
    }

    #[test]
    fn batch_timeout_counts_from_the_first_pending_message() {
        let l = limits(2, 1000, 100);
        let t0 = Instant::now();
        let timeout = Duration::from_millis(500);
        let mut c = BlockCutter::new();
        assert_eq!(c.deadline(timeout), None);
        c.ordered(1, 60, l, t0);
        assert_eq!(c.deadline(timeout), Some(t0 + timeout));
        // A later message does not move the deadline.
        let (cut, _) = c.ordered(2, 10, l, t0 + Duration::from_millis(100));
        assert_eq!(cut, vec![vec![1, 2]]);
        assert_eq!(c.deadline(timeout), None);
        // After a size-driven cut the next batch's deadline starts with its own first message.
        let t1 = t0 + Duration::from_millis(300);
        c.ordered(3, 60, l, t1);
        let t2 = t0 + Duration::from_millis(400);
        let (cut, pending) = c.ordered(4, 60, l, t2);
        assert_eq!((cut, pending), (vec![vec![3]], true));
        assert_eq!(c.deadline(timeout), Some(t2 + timeout));
    }

    #[test]
    fn cut_on_config_message_returns_pending_and_resets() {
        // A config message is never given to the cutter: the loop cuts what is pending and writes the
        // config message alone. The cutter must hand over everything and start empty.
        let l = limits(10, 1000, 1000);
        let mut c = BlockCutter::new();
        c.ordered("tx1", 10, l, Instant::now());
        c.ordered("tx2", 10, l, Instant::now());
        assert_eq!(c.cut(), vec!["tx1", "tx2"]);
        assert!(c.cut().is_empty());
        assert_eq!((c.pending_len(), c.pending_bytes()), (0, 0));
        assert_eq!(c.deadline(Duration::from_secs(2)), None);
    }

    #[test]
    fn blocks_never_exceed_absolute_max_bytes_for_admitted_messages() {
        // Messages up to AbsoluteMaxBytes are admitted by the size filter; no batch may exceed it.
        let l = limits(1000, 300, 200);
        let mut c = BlockCutter::new();
        let sizes = [150u32, 60, 300, 10, 199, 1, 200, 120, 90, 250];
        let mut out = Vec::new();
        for (i, s) in sizes.iter().enumerate() {
            out.extend(c.ordered((i, *s), *s, l, Instant::now()).0);
        }
        out.push(c.cut());
        let total: usize = out.iter().map(Vec::len).sum();
        assert_eq!(total, sizes.len());
        for batch in &out {
            let bytes: u32 = batch.iter().map(|(_, s)| s).sum();
            assert!(bytes <= l.absolute_max_bytes, "batch {batch:?} has {bytes} bytes");
            if batch.len() > 1 {
                assert!(bytes <= l.preferred_max_bytes);
            }
        }
        // Order is preserved across batches.
        let order: Vec<usize> = out.iter().flatten().map(|(i, _)| *i).collect();
        assert_eq!(order, (0..sizes.len()).collect::<Vec<_>>());
    }
}
