//! Which accepted messages this node is still responsible for, and which were ordered recently.
//!
//! Fabric's Raft chain answers SUCCESS once a message is queued at the leader, so a leader crash loses what
//! it had queued. Here a node answers SUCCESS only once the message is *held* by two nodes (the receiving
//! node and the leader, or the leader and a follower it backed the message up to). Every holder keeps the
//! message until it applies a block that contains it; when the leader changes, holders hand their messages
//! to the new leader again. The leader drops a message it is already cutting or that was ordered recently
//! ([`Book::is_recent`]), so a message reaches the ledger at most once, and — with at most one crashed
//! node at a time in a three-node cluster — at least once. Fabric consenters never acknowledge a forwarded
//! envelope, so towards them a follower counts its message delivered once sent and a leader backs up only on
//! Ferrofabric followers; the follower still holds the message and hands it to the next leader if the block
//! holding it is not applied in time.
//!
//! Messages are identified by the first 16 bytes of the BLAKE3 hash of the envelope bytes ([`Key`]). The key never
//! leaves the node (each node derives it from the envelope it holds or applies), so it need not be Fabric's
//! SHA-256; it only has to resist collisions, which BLAKE3 does at a few times SHA-256's speed on 4 KB messages.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use ferrofabric_orderer::Submission;

/// A message's identity: BLAKE3 of the marshaled envelope, first 16 bytes.
pub(crate) type Key = [u8; 16];

/// The [`Key`] of a marshaled envelope.
pub(crate) fn key_of(envelope: &[u8]) -> Key {
    let digest = blake3::hash(envelope);
    let mut k = [0u8; 16];
    k.copy_from_slice(&digest.as_bytes()[..16]);
    k
}

/// A held message.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    /// The message as accepted.
    pub(crate) submission: Submission,
    /// A CONFIG message (ordered alone in its block).
    pub(crate) config: bool,
    /// When it was last handed to a leader (or accepted).
    pub(crate) last_sent: Instant,
    accepted: Instant,
    seq: u64,
}

/// Held messages in acceptance order plus the keys of recently applied messages. Not thread-safe by
/// itself; the chain shares it behind a mutex.
#[derive(Debug)]
pub(crate) struct Book {
    held: HashMap<Key, Held>,
    order: BTreeMap<u64, Key>,
    next_seq: u64,
    max_held: usize,
    recent: HashSet<Key>,
    recent_order: VecDeque<Key>,
    max_recent: usize,
    /// The keys of blocks this node made as leader, by the block's data hash, until it applies them: the leader
    /// already knows each envelope's key, so applying its own block need not hash the envelopes again.
    made: VecDeque<([u8; 32], Vec<Key>)>,
}

/// How many made blocks' keys are kept for their application (a leader has at most a few dozen in flight; a block
/// it made but lost with its leadership is forgotten after this many more).
const MAX_MADE: usize = 256;

impl Book {
    /// A book holding at most `max_held` messages and remembering the last `max_recent` applied ones.
    pub(crate) fn new(max_held: usize, max_recent: usize) -> Book {
        Book {
            held: HashMap::new(),
            order: BTreeMap::new(),
            next_seq: 0,
            max_held: max_held.max(1),
            recent: HashSet::new(),
            recent_order: VecDeque::new(),
            max_recent: max_recent.max(1),
            made: VecDeque::new(),
        }
    }

    /// Remembers the keys of a block this node made, whose header carries `data_hash`.
    pub(crate) fn made(&mut self, data_hash: [u8; 32], keys: Vec<Key>) {
        if self.made.len() >= MAX_MADE {
            self.made.pop_front();
        }
        self.made.push_back((data_hash, keys));
    }

    /// The keys remembered for the block with `data_hash` if this node made it (equal data hashes mean equal
    /// envelopes); forgets them.
    pub(crate) fn take_made(&mut self, data_hash: &[u8]) -> Option<Vec<Key>> {
        let i = self.made.iter().position(|(h, _)| h.as_slice() == data_hash)?;
        self.made.remove(i).map(|(_, keys)| keys)
    }

    /// Starts holding `submission` (no-op if already held, or if it was applied recently: it is in the
    /// ledger already). Returns false when the book is full.
    pub(crate) fn hold(&mut self, key: Key, submission: Submission, config: bool, now: Instant) -> bool {
        if self.held.contains_key(&key) || self.recent.contains(&key) {
            return true;
        }
        if self.held.len() >= self.max_held {
            return false;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.order.insert(seq, key);
        self.held.insert(key, Held { submission, config, last_sent: now, accepted: now, seq });
        true
    }

    /// Stops holding `key` (the client was told the message failed, or the leader discarded it).
    pub(crate) fn release(&mut self, key: &Key) {
        if let Some(h) = self.held.remove(key) {
            self.order.remove(&h.seq);
        }
    }

    /// Records that the messages `keys` were applied in a block: they are no longer held and count as
    /// recent.
    pub(crate) fn applied<'a>(&mut self, keys: impl IntoIterator<Item = &'a Key>) {
        for key in keys {
            self.release(key);
            if self.recent.insert(*key) {
                self.recent_order.push_back(*key);
                if self.recent_order.len() > self.max_recent {
                    if let Some(old) = self.recent_order.pop_front() {
                        self.recent.remove(&old);
                    }
                }
            }
        }
    }

    /// Whether `key` was applied recently (within the last `max_recent` applied messages).
    pub(crate) fn is_recent(&self, key: &Key) -> bool {
        self.recent.contains(key)
    }

    /// Every held message, in acceptance order.
    pub(crate) fn all(&self) -> Vec<(Key, Held)> {
        self.order.values().filter_map(|k| self.held.get(k).map(|h| (*k, h.clone()))).collect()
    }

    /// Held messages last sent at least `age` ago, in acceptance order; their send time becomes `now`.
    pub(crate) fn due(&mut self, age: Duration, now: Instant) -> Vec<(Key, Held)> {
        let mut out = Vec::new();
        for k in self.order.values() {
            if let Some(h) = self.held.get_mut(k) {
                if now.saturating_duration_since(h.last_sent) >= age {
                    h.last_sent = now;
                    out.push((*k, h.clone()));
                }
            }
        }
        out
    }

    /// Makes every held message due now (a new leader was elected).
    pub(crate) fn all_due(&mut self, age: Duration, now: Instant) {
        let past = now.checked_sub(age).unwrap_or(now);
        for h in self.held.values_mut() {
            h.last_sent = past;
        }
    }

    /// Drops messages accepted more than `limit` ago (a message nobody orders must not be held forever).
    /// Returns how many were dropped.
    pub(crate) fn expire(&mut self, limit: Duration, now: Instant) -> usize {
        let old: Vec<Key> = self
            .held
            .iter()
            .filter(|(_, h)| now.saturating_duration_since(h.accepted) > limit)
            .map(|(k, _)| *k)
            .collect();
        for k in &old {
            self.release(k);
        }
        old.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn sub(tag: &'static [u8]) -> (Key, Submission) {
        let envelope = Bytes::from_static(tag);
        (key_of(tag), Submission { envelope, tx_id: String::new(), size: tag.len() as u32, config_seq: 0 })
    }

    #[test]
    fn held_until_applied_then_recent_and_bounded() {
        let now = Instant::now();
        let mut b = Book::new(2, 2);
        let (k1, s1) = sub(b"one");
        let (k2, s2) = sub(b"two");
        let (k3, s3) = sub(b"three");
        assert!(b.hold(k1, s1.clone(), false, now));
        assert!(b.hold(k2, s2, false, now));
        assert!(b.hold(k1, s1.clone(), false, now), "holding twice is a no-op");
        assert!(!b.hold(k3, s3.clone(), false, now), "full");
        assert_eq!(b.all().iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec![k1, k2]);
        b.applied([&k1]);
        assert!(!b.held.contains_key(&k1) && b.is_recent(&k1));
        assert!(b.hold(k1, s1, false, now) && !b.held.contains_key(&k1), "an applied message is not held again");
        assert!(b.hold(k3, s3, false, now));
        b.applied([&k2, &k3]);
        assert!(!b.is_recent(&k1), "only the last two applied keys are remembered");
        assert!(b.is_recent(&k2) && b.is_recent(&k3));
        assert!(b.held.is_empty());
    }

    #[test]
    fn keys_of_a_made_block_are_given_once_by_its_data_hash_and_bounded() {
        let mut b = Book::new(10, 10);
        let (k1, _) = sub(b"one");
        b.made([1; 32], vec![k1]);
        assert_eq!(b.take_made(&[2; 32]), None, "another block: its envelopes are hashed");
        assert_eq!(b.take_made(&[1; 32]), Some(vec![k1]));
        assert_eq!(b.take_made(&[1; 32]), None, "given once");
        for i in 0..=MAX_MADE {
            b.made([(i % 250) as u8; 32], Vec::new());
        }
        assert_eq!(b.made.len(), MAX_MADE, "a block lost with the leadership is forgotten in time");
    }

    #[test]
    fn due_and_expiry_follow_the_clock() {
        let t0 = Instant::now();
        let mut b = Book::new(10, 10);
        let (k1, s1) = sub(b"one");
        b.hold(k1, s1, false, t0);
        assert!(b.due(Duration::from_secs(5), t0 + Duration::from_secs(1)).is_empty());
        assert_eq!(b.due(Duration::from_secs(5), t0 + Duration::from_secs(6)).len(), 1);
        assert!(b.due(Duration::from_secs(5), t0 + Duration::from_secs(7)).is_empty(), "just resent");
        b.all_due(Duration::from_secs(5), t0 + Duration::from_secs(7));
        assert_eq!(b.due(Duration::from_secs(5), t0 + Duration::from_secs(7)).len(), 1);
        assert_eq!(b.expire(Duration::from_secs(60), t0 + Duration::from_secs(30)), 0);
        assert_eq!(b.expire(Duration::from_secs(60), t0 + Duration::from_secs(61)), 1);
        assert!(b.held.is_empty());
    }
}
