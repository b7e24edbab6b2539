//! The pool of requests not yet ordered (SmartBFT's request pool): arrival order, a CONFIG request alone in
//! its block, late duplicates dropped, requests sent again to the other consenters until ordered.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_protos::common::{ChannelHeader, Envelope, HeaderType, Payload};
use prost::Message;
use sha2::{Digest, Sha256};

/// Requests remembered after they were ordered, to drop late duplicates.
pub(crate) const MAX_RECENT: usize = 1 << 18;
/// A request still pooled this long after it was last sent is sent to the other consenters again (a link was down,
/// or a proposer left it out): so that every pooled request reaches every proposer.
pub(crate) const RESEND_AFTER: Duration = Duration::from_secs(2);
/// Requests re-sent per tick at most.
pub(crate) const RESEND_MAX: usize = 2_000;
/// How long a Broadcast request waits for room in a full pool before it is refused.
pub(crate) const POOL_WAIT: Duration = Duration::from_secs(5);

/// The pool of requests not yet ordered, in arrival order.
pub(crate) struct Pool {
    by_seq: BTreeMap<u64, [u8; 32]>,
    /// By digest: arrival sequence number, envelope, whether it is a CONFIG request, when it was last sent.
    entries: HashMap<[u8; 32], (u64, Bytes, bool, Instant)>,
    next_seq: u64,
    recent: HashSet<[u8; 32]>,
    recent_order: VecDeque<[u8; 32]>,
}

pub(crate) fn digest(envelope: &[u8]) -> [u8; 32] {
    Sha256::digest(envelope).into()
}

/// Whether `envelope` is a CONFIG transaction (it must go alone in its block).
pub(crate) fn is_config(envelope: &Bytes) -> bool {
    let header = Envelope::decode(envelope.clone())
        .ok()
        .and_then(|e| Payload::decode(e.payload).ok())
        .and_then(|p| p.header)
        .and_then(|h| ChannelHeader::decode(h.channel_header).ok());
    header.is_some_and(|h| h.r#type == HeaderType::Config as i32)
}

impl Pool {
    pub(crate) fn new() -> Pool {
        Pool {
            by_seq: BTreeMap::new(),
            entries: HashMap::new(),
            next_seq: 0,
            recent: HashSet::new(),
            recent_order: VecDeque::new(),
        }
    }

    /// Adds a request; false if it is pooled already or was ordered recently.
    pub(crate) fn add(&mut self, envelope: Bytes) -> bool {
        let d = digest(&envelope);
        if self.entries.contains_key(&d) || self.recent.contains(&d) {
            return false;
        }
        let config = is_config(&envelope);
        self.by_seq.insert(self.next_seq, d);
        self.entries.insert(d, (self.next_seq, envelope, config, Instant::now()));
        self.next_seq += 1;
        true
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn contains(&self, d: &[u8; 32]) -> bool {
        self.entries.contains_key(d)
    }

    pub(crate) fn ordered_recently(&self, d: &[u8; 32]) -> bool {
        self.recent.contains(d)
    }

    /// The next block's requests: the oldest config request alone if it comes first, else the oldest normal
    /// requests up to `max_count` and `max_bytes` (at least one).
    pub(crate) fn batch(&self, max_count: usize, max_bytes: usize) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut bytes = 0usize;
        for d in self.by_seq.values() {
            let Some((_, env, config, _)) = self.entries.get(d) else { continue };
            if *config {
                if out.is_empty() {
                    return vec![env.clone()];
                }
                continue;
            }
            if !out.is_empty() && (out.len() >= max_count || bytes + env.len() > max_bytes) {
                break;
            }
            bytes += env.len();
            out.push(env.clone());
        }
        out
    }

    /// The requests last sent before `now - RESEND_AFTER` (oldest first, at most `RESEND_MAX`), marked sent now.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<Bytes> {
        let mut out = Vec::new();
        for d in self.by_seq.values() {
            if out.len() >= RESEND_MAX {
                break;
            }
            if let Some((_, env, _, sent)) = self.entries.get_mut(d) {
                if now.duration_since(*sent) >= RESEND_AFTER {
                    *sent = now;
                    out.push(env.clone());
                }
            }
        }
        out
    }

    /// Keeps only the requests `keep` accepts (given the envelope and whether it is a CONFIG request); returns how
    /// many were dropped.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&Bytes, bool) -> bool) -> usize {
        let before = self.entries.len();
        let by_seq = &mut self.by_seq;
        self.entries.retain(|_, (seq, env, config, _)| {
            let kept = keep(env, *config);
            if !kept {
                by_seq.remove(seq);
            }
            kept
        });
        before - self.entries.len()
    }

    /// Drops the requests of an ordered block and remembers them.
    pub(crate) fn ordered(&mut self, envelopes: &[Bytes]) {
        for env in envelopes {
            let d = digest(env);
            if let Some((seq, _, _, _)) = self.entries.remove(&d) {
                self.by_seq.remove(&seq);
            }
            if self.recent.insert(d) {
                self.recent_order.push_back(d);
                if self.recent_order.len() > MAX_RECENT {
                    if let Some(old) = self.recent_order.pop_front() {
                        self.recent.remove(&old);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    pub(crate) fn envelope(kind: HeaderType, id: &str) -> Bytes {
        let ch = ChannelHeader { r#type: kind as i32, tx_id: id.into(), ..ChannelHeader::default() };
        let payload = Payload {
            header: Some(ferrofabric_protos::common::Header {
                channel_header: ch.encode_to_vec().into(),
                signature_header: Bytes::new(),
            }),
            data: Bytes::from(id.to_owned()),
        };
        Bytes::from(Envelope { payload: payload.encode_to_vec().into(), signature: Bytes::new() }.encode_to_vec())
    }

    #[test]
    pub(crate) fn the_pool_batches_in_arrival_order_puts_a_config_request_alone_and_drops_duplicates() {
        let mut pool = Pool::new();
        let (a, b, c) = (
            envelope(HeaderType::EndorserTransaction, "a"),
            envelope(HeaderType::EndorserTransaction, "b"),
            envelope(HeaderType::EndorserTransaction, "c"),
        );
        let config = envelope(HeaderType::Config, "config");
        assert!(pool.add(a.clone()) && pool.add(b.clone()));
        assert!(!pool.add(a.clone()), "a pooled request is not pooled twice");
        assert!(pool.add(config.clone()) && pool.add(c.clone()));
        assert_eq!(pool.batch(10, 1 << 20), vec![a.clone(), b.clone(), c.clone()], "the config request waits");
        assert_eq!(pool.batch(2, 1 << 20), vec![a.clone(), b.clone()]);
        assert_eq!(pool.batch(10, 1), vec![a.clone()], "at least one request, whatever its size");
        pool.ordered(&[a.clone(), b.clone()]);
        assert_eq!(pool.batch(10, 1 << 20), vec![config.clone()], "a config request first in line goes alone");
        pool.ordered(&[config, c]);
        assert!(pool.is_empty());
        assert!(!pool.add(a), "a request ordered recently is not pooled again");
    }

    #[test]
    pub(crate) fn pruning_the_pool_keeps_order_and_drops_only_what_is_refused() {
        let mut pool = Pool::new();
        let (a, b, c) = (
            envelope(HeaderType::EndorserTransaction, "a"),
            envelope(HeaderType::EndorserTransaction, "b"),
            envelope(HeaderType::EndorserTransaction, "c"),
        );
        for e in [&a, &b, &c] {
            pool.add(e.clone());
        }
        assert_eq!(pool.retain(|e, _| e != &b), 1);
        assert_eq!(pool.batch(10, 1 << 20), vec![a.clone(), c.clone()]);
        assert!(pool.add(b), "a pruned request was not ordered: it may come again");
        assert_eq!(pool.len(), 3);
    }

    #[test]
    pub(crate) fn requests_are_due_again_only_after_the_resend_interval() {
        let mut pool = Pool::new();
        pool.add(envelope(HeaderType::EndorserTransaction, "a"));
        let now = Instant::now();
        assert!(pool.due(now).is_empty());
        assert_eq!(pool.due(now + RESEND_AFTER).len(), 1);
        assert!(pool.due(now + RESEND_AFTER).is_empty(), "sent again just now");
    }
}
