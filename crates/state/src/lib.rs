//! The versioned world state of one channel (FastFabric §III-B, "Opt P-I": state in an in-memory hash table).
//!
//! Fabric keeps `(namespace, key) -> (value, metadata, version)` in LevelDB or CouchDB
//! (`core/ledger/kvledger/txmgmt/statedb`). Ferrofabric keeps it in memory:
//!
//! * point reads go to a [`ShardMap`] (sharded, so validation threads read in parallel, and grown without stalls);
//! * range queries and phantom-read checks walk an ordered key index per namespace and collection;
//! * one block's updates are applied atomically ([`WorldState::apply`]): a reader holding a [`StateView`] never sees
//!   half a block.
//!
//! Keys are addressed by [`StateKey`]: a namespace (chaincode name, including `_lifecycle`), a collection (empty
//! for public data; for private data only the *hashed* state is kept, keyed by the key hash) and the key bytes.
//! Versions are Fabric's [`Height`] (block number, transaction number).

use std::ops::Bound;
use std::sync::{OnceLock, RwLock, RwLockReadGuard};

use bytes::Bytes;
use ferrofabric_shardmap::ShardMap;
use indexmap::IndexMap;

mod ordered;
pub use ordered::OrderedKeys;

/// The version of a committed value: the block and the transaction index in it that wrote it
/// (Fabric's `core/ledger/internal/version.Height`). Ordered by block, then transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Height {
    /// Block number.
    pub block_num: u64,
    /// Index of the transaction in its block.
    pub tx_num: u64,
}

impl Height {
    /// A height from its two parts.
    pub const fn new(block_num: u64, tx_num: u64) -> Self {
        Height { block_num, tx_num }
    }

    /// Fabric's `Height.ToBytes`: the order-preserving encoding of `block_num` followed by that of `tx_num`
    /// (see [`encode_order_preserving_varuint64`]). Used in the commit hash.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = encode_order_preserving_varuint64(self.block_num);
        out.extend_from_slice(&encode_order_preserving_varuint64(self.tx_num));
        out
    }
}

impl std::fmt::Display for Height {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.block_num, self.tx_num)
    }
}

/// Fabric's `common/ledger/util.EncodeOrderPreservingVarUint64`: one length byte (0..=8) followed by the big-endian
/// bytes of `n` without leading zero bytes. Zero encodes as the single byte `0x00`.
pub fn encode_order_preserving_varuint64(n: u64) -> Vec<u8> {
    let be = n.to_be_bytes();
    let skip = be.iter().take_while(|b| **b == 0).count();
    let mut out = Vec::with_capacity(1 + 8 - skip);
    // The length is at most 8, so it is its own one-byte varint.
    out.push((8 - skip) as u8);
    out.extend_from_slice(&be[skip..]);
    out
}

/// Where a value lives: namespace, collection (empty for public state) and key.
///
/// For private data collections the key is the SHA-256 of the private key (Fabric's hashed state); the private
/// values themselves are not kept (the private data store is out of scope, see the validator's docs).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StateKey {
    /// Chaincode namespace, e.g. `smallbank` or `_lifecycle`.
    pub namespace: String,
    /// Collection name; empty for public state.
    pub collection: String,
    /// Key bytes (UTF-8 for public keys, a 32-byte hash for collection keys).
    pub key: Bytes,
}

impl StateKey {
    /// A public-state key.
    pub fn public(namespace: &str, key: impl Into<Bytes>) -> Self {
        StateKey { namespace: namespace.to_owned(), collection: String::new(), key: key.into() }
    }

    /// A hashed collection key.
    pub fn hashed(namespace: &str, collection: &str, key_hash: impl Into<Bytes>) -> Self {
        StateKey { namespace: namespace.to_owned(), collection: collection.to_owned(), key: key_hash.into() }
    }
}

/// A committed value with its metadata and version (Fabric's `statedb.VersionedValue`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionedValue {
    /// The value (for hashed collection state: the value hash).
    pub value: Bytes,
    /// Marshaled key metadata (Fabric's `KVMetadataWrite` entries, e.g. the key-level endorsement policy under
    /// `VALIDATION_PARAMETER`), as a list of `(name, value)` pairs sorted by name; empty when the key has none.
    pub metadata: Vec<(String, Bytes)>,
    /// Height of the transaction that last wrote the value.
    pub version: Height,
}

/// One pending update of a key (Fabric's `statedb.VersionedValue` in an update batch, where a nil value is a
/// delete): the committing height is kept for deletes too, because the commit hash covers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Update {
    /// Write (or overwrite) the key.
    Put(VersionedValue),
    /// Delete the key, at this height.
    Delete(Height),
}

impl Update {
    /// The height of the transaction that made the update.
    pub fn version(&self) -> Height {
        match self {
            Update::Put(v) => v.version,
            Update::Delete(h) => *h,
        }
    }
}

/// The updates of one block. Point operations (`put`, `get`, `contains`: two or three per write of every
/// transaction) hash the key once; ordered reads (`iter`, `range`: the commit hash, range-query checks) walk a
/// key order sorted on the first ordered read after a new key was added, so the order is deterministic without a
/// search tree's comparisons on every point operation. Built by the validator's MVCC stage, applied with
/// [`WorldState::apply`].
#[derive(Clone, Debug, Default)]
pub struct UpdateBatch {
    /// Updates in insertion order; an update of a key already present replaces it in place.
    entries: IndexMap<StateKey, Update>,
    /// Positions in `entries` in key order; cleared whenever a new key is added.
    order: OnceLock<Vec<usize>>,
}

impl UpdateBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an update of `key`, replacing an earlier update of the same key.
    pub fn put(&mut self, key: StateKey, update: Update) {
        if let (_, None) = self.entries.insert_full(key, update) {
            self.order.take();
        }
    }

    /// Whether an earlier transaction of this block updated `key` (Fabric's `UpdateBatch.Exists`).
    pub fn contains(&self, key: &StateKey) -> bool {
        self.entries.contains_key(key)
    }

    /// The pending update of `key`.
    pub fn get(&self, key: &StateKey) -> Option<&Update> {
        self.entries.get(key)
    }

    /// Number of updated keys.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// All updates in key order (namespace, collection, key bytes).
    pub fn iter(&self) -> impl Iterator<Item = (&StateKey, &Update)> {
        self.in_order(self.order())
    }

    /// Pending updates of public keys of `namespace` in `[start, end)`; an empty `end` means "to the end of the
    /// namespace" (Fabric's `UpdateBatch.GetRangeScanIterator`).
    /// A `start` past a non-empty `end` yields nothing.
    pub fn range<'a>(
        &'a self,
        namespace: &str,
        start: &[u8],
        end: &[u8],
    ) -> impl Iterator<Item = (&'a StateKey, &'a Update)> + 'a {
        let order = self.order();
        let key_at = |p: &usize| self.entries.get_index(*p).map(|(k, _)| k);
        let lo = StateKey::public(namespace, Bytes::copy_from_slice(start));
        let first = order.partition_point(|p| key_at(p).is_some_and(|k| *k < lo));
        let last = match upper_bound(namespace, end) {
            Bound::Excluded(hi) => order.partition_point(|p| key_at(p).is_some_and(|k| *k < hi)),
            _ => order.len(),
        };
        let slice = if in_order(start, end) && first < last { &order[first..last] } else { &[][..] };
        self.in_order(slice)
    }

    /// The key order, sorted now if a key was added since it was last sorted.
    fn order(&self) -> &[usize] {
        self.order.get_or_init(|| {
            let mut order: Vec<usize> = (0..self.entries.len()).collect();
            order.sort_unstable_by(|a, b| {
                self.entries.get_index(*a).map(|e| e.0).cmp(&self.entries.get_index(*b).map(|e| e.0))
            });
            order
        })
    }

    fn in_order<'a>(&'a self, positions: &'a [usize]) -> impl Iterator<Item = (&'a StateKey, &'a Update)> + 'a {
        positions.iter().filter_map(|p| self.entries.get_index(*p))
    }
}

/// Whether `[start, end)` is in order (an empty `end` has no upper bound). A range query a transaction carries may
/// have its start past its end: LevelDB's iterator yields nothing for it, and so must a scan of the state or of a
/// batch.
fn in_order(start: &[u8], end: &[u8]) -> bool {
    end.is_empty() || start <= end
}

fn upper_bound(namespace: &str, end: &[u8]) -> Bound<StateKey> {
    if end.is_empty() {
        // Every public key of the namespace: bound at the first possible collection name.
        return Bound::Excluded(StateKey {
            namespace: namespace.to_owned(),
            collection: "\0".to_owned(),
            key: Bytes::new(),
        });
    }
    Bound::Excluded(StateKey::public(namespace, Bytes::copy_from_slice(end)))
}

/// The world state of one channel: concurrent point reads, ordered scans, atomic block application.
#[derive(Debug)]
pub struct WorldState {
    /// Point reads. The state only grows between deletes, so its doublings are staggered ([`ShardMap`]).
    values: ShardMap<StateKey, VersionedValue>,
    /// Ordered index of every present key plus the number of the last committed block, behind the commit gate:
    /// `apply` holds it for writing, [`StateView`]s for reading, so a view is always a whole number of blocks.
    gate: RwLock<Ordered>,
}

/// The ordered index of every present key, and the last committed block.
#[derive(Debug, Default)]
struct Ordered {
    keys: OrderedKeys<()>,
    last_block: Option<u64>,
}

impl Default for WorldState {
    fn default() -> Self {
        WorldState { values: ShardMap::new(), gate: RwLock::default() }
    }
}

impl WorldState {
    /// An empty state (a channel before its genesis block is committed).
    pub fn new() -> Self {
        Self::default()
    }

    /// A consistent read view: blocks applied while it is held wait until it is dropped.
    pub fn view(&self) -> StateView<'_> {
        let guard = match self.gate.read() {
            Ok(g) => g,
            // A panicking writer cannot leave the index half-updated in a way readers could misuse: `apply`
            // never panics between its first and last mutation, so recovering the guard is sound.
            Err(poisoned) => poisoned.into_inner(),
        };
        StateView { state: self, ordered: guard }
    }

    /// Applies one block's updates atomically and records `block_num` as the last committed block.
    pub fn apply(&self, block_num: u64, batch: &UpdateBatch) {
        let mut ordered = match self.gate.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        // Keys are distinct, so the order of application does not matter: skip sorting them.
        for (key, update) in batch.entries.iter() {
            match update {
                Update::Put(v) => {
                    if self.values.insert(key.clone(), v.clone()).is_none() {
                        ordered.keys.insert(key, ());
                    }
                }
                Update::Delete(_) => {
                    if self.values.remove(key).is_some() {
                        ordered.keys.remove(key);
                    }
                }
            }
        }
        ordered.last_block = Some(block_num);
    }

    /// Number of keys present (public and hashed).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no key is present.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

/// A consistent, read-only view of a [`WorldState`] (see [`WorldState::view`]). Cheap to create; `Sync`, so one view
/// can be shared by all validation threads of a block.
pub struct StateView<'a> {
    state: &'a WorldState,
    ordered: RwLockReadGuard<'a, Ordered>,
}

impl StateView<'_> {
    /// The committed value of `key`, if present.
    pub fn get(&self, key: &StateKey) -> Option<VersionedValue> {
        self.state.values.get(key)
    }

    /// The committed version of `key`, if present (Fabric's `GetVersion`).
    pub fn version(&self, key: &StateKey) -> Option<Height> {
        self.state.values.with(key, |v| v.map(|v| v.version))
    }

    /// Number of the last block applied, `None` before the first.
    pub fn last_block(&self) -> Option<u64> {
        self.ordered.last_block
    }

    /// Committed public keys of `namespace` in `[start, end)` (an empty `end` means "to the end of the namespace"),
    /// in key order with their values — Fabric's `GetStateRangeScanIterator`.
    /// A `start` past a non-empty `end` yields nothing.
    pub fn range(&self, namespace: &str, start: &[u8], end: &[u8]) -> Vec<(StateKey, VersionedValue)> {
        self.ordered
            .keys
            .public_range(namespace, start, end)
            .filter_map(|(k, ())| {
                let key = StateKey::public(namespace, k.clone());
                self.state.values.get(&key).map(|v| (key, v))
            })
            .collect()
    }

    /// Every present entry in key order (namespace, collection, key).
    pub fn entries(&self) -> Vec<(StateKey, VersionedValue)> {
        let mut out = Vec::with_capacity(self.ordered.keys.len());
        for (namespace, collection, k, ()) in self.ordered.keys.iter() {
            let key = StateKey { namespace: namespace.to_owned(), collection: collection.to_owned(), key: k.clone() };
            if let Some(v) = self.state.values.get(&key) {
                out.push((key, v));
            }
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn vv(v: &str, b: u64, t: u64) -> Update {
        Update::Put(VersionedValue {
            value: Bytes::copy_from_slice(v.as_bytes()),
            metadata: vec![],
            version: Height::new(b, t),
        })
    }

    #[test]
    fn order_preserving_encoding_matches_fabric_examples() {
        assert_eq!(encode_order_preserving_varuint64(0), vec![0]);
        assert_eq!(encode_order_preserving_varuint64(1), vec![1, 1]);
        assert_eq!(encode_order_preserving_varuint64(256), vec![2, 1, 0]);
        assert_eq!(encode_order_preserving_varuint64(u64::MAX), vec![8, 255, 255, 255, 255, 255, 255, 255, 255]);
        assert_eq!(Height::new(5, 0).to_bytes(), vec![1, 5, 0]);
    }

    #[test]
    fn order_preserving_encoding_preserves_order() {
        let xs = [0u64, 1, 2, 255, 256, 65535, 65536, 1 << 40, u64::MAX];
        for w in xs.windows(2) {
            assert!(encode_order_preserving_varuint64(w[0]) < encode_order_preserving_varuint64(w[1]));
        }
    }

    #[test]
    fn apply_puts_and_deletes_atomically_and_records_the_block() {
        let s = WorldState::new();
        let mut b = UpdateBatch::new();
        b.put(StateKey::public("cc", "a"), vv("1", 1, 0));
        b.put(StateKey::public("cc", "b"), vv("2", 1, 1));
        s.apply(1, &b);
        assert_eq!(s.view().last_block(), Some(1));
        assert_eq!(s.view().version(&StateKey::public("cc", "b")), Some(Height::new(1, 1)));
        let mut d = UpdateBatch::new();
        d.put(StateKey::public("cc", "a"), Update::Delete(Height::new(2, 0)));
        s.apply(2, &d);
        assert!(s.view().get(&StateKey::public("cc", "a")).is_none());
        assert_eq!(s.len(), 1);
        assert_eq!(s.view().entries().len(), 1);
    }

    #[test]
    fn range_scans_respect_bounds_namespaces_and_collections() {
        let s = WorldState::new();
        let mut b = UpdateBatch::new();
        for k in ["k1", "k2", "k3", "k4"] {
            b.put(StateKey::public("cc", k), vv(k, 1, 0));
        }
        b.put(StateKey::public("cc2", "k2"), vv("x", 1, 0));
        b.put(StateKey::hashed("cc", "coll", "k2"), vv("h", 1, 0));
        s.apply(1, &b);
        let v = s.view();
        let keys = |r: Vec<(StateKey, VersionedValue)>| r.into_iter().map(|(k, _)| k.key).collect::<Vec<_>>();
        assert_eq!(keys(v.range("cc", b"k2", b"k4")), vec![Bytes::from("k2"), Bytes::from("k3")]);
        assert_eq!(keys(v.range("cc", b"", b"")).len(), 4);
        assert_eq!(keys(v.range("cc2", b"", b"")), vec![Bytes::from("k2")]);
        // The pending-update range obeys the same bounds.
        assert_eq!(b.range("cc", b"k3", b"").count(), 2);
    }

    #[test]
    fn a_range_whose_start_is_past_its_end_is_empty() {
        let s = WorldState::new();
        let mut b = UpdateBatch::new();
        for k in ["a", "m", "z"] {
            b.put(StateKey::public("cc", k), vv(k, 1, 0));
        }
        s.apply(1, &b);
        assert!(s.view().range("cc", b"z", b"a").is_empty());
        assert_eq!(b.range("cc", b"z", b"a").count(), 0);
        assert!(s.view().range("cc", b"m", b"m").is_empty(), "[m, m) is empty");
        assert!(s.view().range("absent", b"", b"").is_empty());
    }

    proptest::proptest! {
        #[test]
        fn a_batch_iterates_and_scans_in_key_order_between_puts(
            rounds in proptest::collection::vec(proptest::collection::vec((0u8..30, 0u8..4), 0..12), 1..6),
            ranges in proptest::collection::vec((proptest::collection::vec(0u8..12, 0..2), proptest::collection::vec(0u8..12, 0..2)), 0..6),
        ) {
            let key_of = |k: u8| match k % 3 {
                0 => StateKey::public("ns", vec![k / 3]),
                1 => StateKey::public("nt", vec![k / 3]),
                _ => StateKey::hashed("ns", "coll", vec![k / 3]),
            };
            let mut b = UpdateBatch::new();
            let mut model = BTreeMap::new();
            // Ordered reads between rounds of puts: the key order must follow every new key.
            for (i, round) in rounds.iter().enumerate() {
                for (k, v) in round {
                    let up = vv(&v.to_string(), i as u64, u64::from(*k));
                    b.put(key_of(*k), up.clone());
                    model.insert(key_of(*k), up);
                }
                let got: Vec<_> = b.iter().map(|(k, u)| (k.clone(), u.clone())).collect();
                let want: Vec<_> = model.iter().map(|(k, u)| (k.clone(), u.clone())).collect();
                proptest::prop_assert_eq!(got, want);
                for (start, end) in &ranges {
                    let got: Vec<_> = b.range("ns", start, end).map(|(k, _)| k.clone()).collect();
                    let want: Vec<_> = model
                        .keys()
                        .filter(|k| k.namespace == "ns" && k.collection.is_empty())
                        .filter(|k| k.key.as_ref() >= start.as_slice() && (end.is_empty() || k.key.as_ref() < end.as_slice()))
                        .cloned()
                        .collect();
                    proptest::prop_assert_eq!(got, want);
                }
                proptest::prop_assert_eq!(b.len(), model.len());
            }
        }

        #[test]
        fn state_matches_a_model_map(
            ops in proptest::collection::vec((0u8..48, proptest::option::of(0u8..4)), 0..200),
            ranges in proptest::collection::vec((proptest::collection::vec(0u8..20, 0..2), proptest::collection::vec(0u8..20, 0..2)), 0..8),
        ) {
            // Keys spread over two namespaces and, in one of them, a collection besides the public state.
            let key_of = |k: u8| match k % 3 {
                0 => StateKey::public("ns", vec![k / 3]),
                1 => StateKey::public("nt", vec![k / 3]),
                _ => StateKey::hashed("ns", "coll", vec![k / 3]),
            };
            let s = WorldState::new();
            let mut model = BTreeMap::new();
            for (i, chunk) in ops.chunks(7).enumerate() {
                let mut b = UpdateBatch::new();
                for (k, v) in chunk {
                    let key = key_of(*k);
                    let h = Height::new(i as u64, 0);
                    let up = match v { Some(v) => Update::Put(VersionedValue { value: Bytes::from(vec![*v]), metadata: vec![], version: h }), None => Update::Delete(h) };
                    b.put(key.clone(), up);
                }
                for (k, v) in b.iter() { match v { Update::Put(v) => { model.insert(k.clone(), v.clone()); } Update::Delete(_) => { model.remove(k); } } }
                s.apply(i as u64, &b);
            }
            for (start, end) in &ranges {
                let got = s.view().range("ns", start, end);
                let want: Vec<_> = model
                    .iter()
                    .filter(|(k, _)| k.namespace == "ns" && k.collection.is_empty())
                    .filter(|(k, _)| k.key.as_ref() >= start.as_slice() && (end.is_empty() || k.key.as_ref() < end.as_slice()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                proptest::prop_assert_eq!(got, want);
            }
            let got = s.view().entries();
            let want: Vec<_> = model.into_iter().collect();
            proptest::prop_assert_eq!(got, want);
        }
    }
}
