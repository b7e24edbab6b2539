//! [`OrderedKeys`]: a map from [`StateKey`] in key order, nested by namespace and collection.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use crate::StateKey;

/// A map from state keys to `V` in key order (namespace, collection, key bytes), as Fabric's state database iterates.
///
/// Nested by namespace, then collection, rather than one map of [`StateKey`]s: within a collection keys are compared
/// by their bytes alone (one `memcmp` per comparison, not three), and a key is stored without copies of its
/// namespace and collection names (a new key allocates nothing but its tree slot). Applying a block of 100 new
/// keys to a state of 200,000 took 3.3 times less time than with a `BTreeMap<StateKey, _>`
/// (`cargo bench -p ferrofabric-state --bench state`).
#[derive(Debug, Clone)]
pub struct OrderedKeys<V> {
    namespaces: BTreeMap<String, BTreeMap<String, BTreeMap<Bytes, V>>>,
    len: usize,
}

impl<V> Default for OrderedKeys<V> {
    fn default() -> Self {
        OrderedKeys { namespaces: BTreeMap::new(), len: 0 }
    }
}

impl<V> OrderedKeys<V> {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value`; the previous value, if any.
    pub fn insert(&mut self, key: &StateKey, value: V) -> Option<V> {
        if !self.namespaces.contains_key(key.namespace.as_str()) {
            self.namespaces.insert(key.namespace.clone(), BTreeMap::new());
        }
        let collections = self.namespaces.get_mut(key.namespace.as_str())?;
        if !collections.contains_key(key.collection.as_str()) {
            collections.insert(key.collection.clone(), BTreeMap::new());
        }
        let keys = collections.get_mut(key.collection.as_str())?;
        let old = keys.insert(key.key.clone(), value);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    /// Removes `key`; its value, if it was present. Emptied collections and namespaces go too.
    pub fn remove(&mut self, key: &StateKey) -> Option<V> {
        let collections = self.namespaces.get_mut(key.namespace.as_str())?;
        let keys = collections.get_mut(key.collection.as_str())?;
        let old = keys.remove(&key.key);
        if keys.is_empty() {
            collections.remove(key.collection.as_str());
        }
        if collections.is_empty() {
            self.namespaces.remove(key.namespace.as_str());
        }
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every entry in key order as (namespace, collection, key, value).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str, &Bytes, &V)> {
        self.namespaces.iter().flat_map(|(namespace, collections)| {
            collections.iter().flat_map(move |(collection, keys)| {
                keys.iter().map(move |(k, v)| (namespace.as_str(), collection.as_str(), k, v))
            })
        })
    }

    /// Public keys (empty collection) of `namespace` in `[start, end)`, an empty `end` meaning no upper bound; none
    /// when `start` is past a non-empty `end` (a range a transaction may carry: LevelDB yields nothing for it).
    pub fn public_range<'a>(
        &'a self,
        namespace: &str,
        start: &'a [u8],
        end: &'a [u8],
    ) -> impl Iterator<Item = (&'a Bytes, &'a V)> {
        let hi = if end.is_empty() { Bound::Unbounded } else { Bound::Excluded(end) };
        let keys = self.namespaces.get(namespace).and_then(|c| c.get("")).filter(|_| crate::in_order(start, end));
        keys.into_iter().flat_map(move |keys| keys.range::<[u8], _>((Bound::Included(start), hi)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn length_counts_keys_and_emptied_names_go() {
        let mut m = OrderedKeys::new();
        let (a, b) = (StateKey::public("ns", "a"), StateKey::hashed("ns", "coll", "b"));
        assert_eq!(m.insert(&a, 1), None);
        assert_eq!(m.insert(&a, 2), Some(1));
        assert_eq!(m.insert(&b, 3), None);
        assert_eq!(m.len(), 2);
        assert_eq!(m.remove(&StateKey::public("other", "a")), None);
        assert_eq!(m.remove(&a), Some(2));
        assert_eq!(m.remove(&a), None);
        assert_eq!(m.remove(&b), Some(3));
        assert!(m.is_empty() && m.namespaces.is_empty());
    }
}
