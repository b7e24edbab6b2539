//! A concurrent hash map for tables that grow for a node's whole life (the world state, the ledger's transaction
//! ids) and must never stall the commit path to grow.
//!
//! A hash table doubles in the one insert that crosses its load limit, and that insert moves every entry. Split
//! into 256 shards, a doubling moves 1/256 of the entries; but keys spread evenly over the shards, so all of them
//! cross their limit within a few thousand inserts of each other and double in the same second or two. Measured
//! on a two-core host at 4,000 new keys per second: the committer's and each endorser's world state doubled
//! together at 114,688 keys (256 shards × 448), with 0.2–0.3 cores of rehashing and fresh pages for 2–5 s, and
//! block latency rose from ~50 to 100–180 ms.
//!
//! So each shard grows *early*, at a fill that depends on its index: shard `i` of `n` doubles when its length
//! reaches `capacity × 2^(-i/2n)`, i.e. between 71% and all of its capacity. The moments at which the shards
//! double are then spread evenly over half of each doubling of the table (on a logarithmic scale), and no stretch
//! of inserts pays for more than about twice its share of the rehashing. The price is memory and a little speed:
//! the shards are on average emptier (about 0.55 of their buckets in use instead of about 0.63); spreading over
//! the whole doubling (between half and all of the capacity) cost twice as much in a state-insert benchmark and
//! lowered its worst second no further.
//!
//! Reads take a shard's read lock and writes its write lock ([`std::sync::RwLock`]), as `dashmap` does. A key is
//! hashed once per operation (keyed SipHash, std's [`RandomState`]): bits 48–55 of the hash pick the shard and the
//! whole hash places the key in the shard's [`hashbrown::HashTable`], whose bucket index uses the low bits and
//! whose control byte the top 7.

use std::borrow::Borrow;
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use hashbrown::hash_table::Entry;
use hashbrown::HashTable;

/// Shards of a [`ShardMap`]: a doubling moves at most about 1/256 of the entries.
pub const SHARDS: usize = 256;

/// One shard: its entries, behind its own lock.
type Shard<K, V> = RwLock<HashTable<(K, V)>>;

/// A hash map of [`SHARDS`] shards, each behind its own lock, whose doublings are staggered (see the crate
/// documentation). Memory: about 1.8 buckets (an entry-sized slot and a control byte each) per entry on average.
#[derive(Debug)]
pub struct ShardMap<K, V> {
    shards: Box<[Shard<K, V>]>,
    /// Hashes keys; keyed, so that nobody can choose keys that all land in one shard or one bucket.
    hasher: RandomState,
}

impl<K, V> Default for ShardMap<K, V> {
    fn default() -> Self {
        ShardMap { shards: (0..SHARDS).map(|_| RwLock::new(HashTable::new())).collect(), hasher: RandomState::new() }
    }
}

impl<K: Hash + Eq, V> ShardMap<K, V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// The key's hash and its shard.
    fn locate<Q: Hash + ?Sized>(&self, key: &Q) -> (u64, usize) {
        let hash = self.hasher.hash_one(key);
        (hash, (hash >> 48) as usize % SHARDS)
    }

    fn read(&self, shard: usize) -> RwLockReadGuard<'_, HashTable<(K, V)>> {
        // A panic inside a shard's lock leaves its table whole (hashbrown's operations are panic-safe).
        self.shards[shard].read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self, shard: usize) -> RwLockWriteGuard<'_, HashTable<(K, V)>> {
        self.shards[shard].write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Calls `f` with the value of `key` (`None` if absent) under the shard's read lock.
    pub fn with<Q, R>(&self, key: &Q, f: impl FnOnce(Option<&V>) -> R) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (hash, index) = self.locate(key);
        let shard = self.read(index);
        f(shard.find(hash, |(k, _)| k.borrow() == key).map(|(_, v)| v))
    }

    /// A copy of the value of `key`.
    pub fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
        V: Clone,
    {
        self.with(key, |v| v.cloned())
    }

    /// Whether `key` is present.
    pub fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.with(key, |v| v.is_some())
    }

    /// Sets `key` to `value`; returns the value it replaces.
    pub fn insert(&self, key: K, value: V) -> Option<V> {
        let (hash, index) = self.locate(&key);
        let rehash = |(k, _): &(K, V)| self.hasher.hash_one(k);
        let mut shard = self.write(index);
        let (capacity, len) = (shard.capacity(), shard.len());
        if capacity > 0 && len >= grow_at(capacity, index) {
            // Double now, at this shard's point of the doubling period, rather than when the table is full.
            shard.reserve(capacity + 1 - len, rehash);
        }
        match shard.entry(hash, |(k, _)| *k == key, rehash) {
            Entry::Occupied(mut e) => Some(std::mem::replace(&mut e.get_mut().1, value)),
            Entry::Vacant(e) => {
                e.insert((key, value));
                None
            }
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove<Q>(&self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (hash, index) = self.locate(key);
        let mut shard = self.write(index);
        let found = shard.find_entry(hash, |(k, _)| k.borrow() == key).ok()?;
        Some(found.remove().0 .1)
    }

    /// Entries present (each shard counted under its own lock, so only a snapshot while writers run).
    pub fn len(&self) -> usize {
        (0..SHARDS).map(|i| self.read(i).len()).sum()
    }

    /// Whether no entry is present.
    pub fn is_empty(&self) -> bool {
        (0..SHARDS).all(|i| self.read(i).is_empty())
    }

    /// The capacity of each shard, in shard order (for tests and sizing).
    pub fn capacities(&self) -> Vec<usize> {
        (0..SHARDS).map(|i| self.read(i).capacity()).collect()
    }
}

/// The length at which shard `index` of a table with room for `capacity` entries doubles:
/// `capacity × 2^(-index/(2 × SHARDS))`, between 1/√2 of the capacity (exclusive) and all of it.
fn grow_at(capacity: usize, index: usize) -> usize {
    let fraction = (-(index as f64) / (2 * SHARDS) as f64).exp2();
    ((capacity as f64 * fraction) as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_a_map() {
        let map: ShardMap<String, u32> = ShardMap::new();
        assert!(map.is_empty());
        for i in 0..10_000u32 {
            assert_eq!(map.insert(format!("k{i}"), i), None);
        }
        assert_eq!(map.insert("k7".into(), 70), Some(7));
        assert_eq!(map.len(), 10_000);
        assert_eq!(map.get("k7"), Some(70));
        assert!(map.contains_key("k9999"));
        assert_eq!(map.remove("k9999"), Some(9999));
        assert_eq!(map.remove("k9999"), None);
        assert!(!map.contains_key("k9999"));
        assert_eq!(map.len(), 9_999);
        assert_eq!(map.with("k1", |v| v.copied()), Some(1));
    }

    /// Counts, for each insert of a growing map, how many shards changed capacity; the doublings of the shards
    /// must be spread over the inserts instead of falling together at one fill of the table.
    #[test]
    fn shards_double_at_staggered_moments() {
        let map: ShardMap<u64, ()> = ShardMap::new();
        let n = 400_000u64;
        let window = 4_000u64; // one second of the state's growth in the measurement above
        let mut before = map.capacities();
        let mut worst = 0usize;
        let mut doublings = 0usize;
        for start in (0..n).step_by(window as usize) {
            for k in start..start + window {
                map.insert(k, ());
            }
            let after = map.capacities();
            let grown = before.iter().zip(&after).filter(|(b, a)| a > b).count();
            doublings += grown;
            // Past the first few doublings (when shards are tiny), a window of 1% of the keys should not
            // see more than a modest fraction of the shards double; unstaggered, nearly all 256 would at once.
            if start >= 50_000 {
                worst = worst.max(grown);
            }
            before = after;
        }
        assert!(doublings > 2 * SHARDS, "every shard doubled several times: {doublings}");
        assert!(worst <= SHARDS / 4, "at most a quarter of the shards doubled within {window} inserts, saw {worst}");
    }

    #[test]
    fn a_shard_grows_between_seven_tenths_and_all_of_its_capacity() {
        assert_eq!(grow_at(448, 0), 448);
        assert!(grow_at(448, SHARDS - 1) >= 448 * 7 / 10);
        assert!((1..SHARDS).all(|i| grow_at(1 << 20, i) < grow_at(1 << 20, i - 1)));
        assert_eq!(grow_at(1, SHARDS - 1), 1);
    }
}
