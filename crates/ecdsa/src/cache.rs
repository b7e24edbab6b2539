//! The bounded cache of per-key fixed-base tables (BMac's identity cache applied to the arithmetic: the same few
//! peers endorse, the same orderer signs and a few clients create most transactions).
//!
//! A key is admitted on its second verification: the first goes to aws-lc, so a key seen once (a passing client)
//! never costs a table build. The cache holds at most [`TableCache::capacity`] tables (the default,
//! [`DEFAULT_CAPACITY`], is 64 tables ≈ 9.7 MB) and evicts the least recently used one when full; the set of keys
//! seen once is bounded too and emptied when full, as Fabric's own caches are.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};

use crate::table::Table;

/// Tables the process-wide cache holds by default: 64 × 151,552 bytes ≈ 9.7 MB.
pub const DEFAULT_CAPACITY: usize = 64;

/// Keys remembered as seen once before the set is emptied.
const SEEN_ONCE_LIMIT: usize = 4096;

/// The x and y coordinates of a key (its SEC1 form without the 0x04 prefix): the cache's key.
pub(crate) type PointBytes = [u8; 64];

/// A bounded LRU map from public keys to their fixed-base tables.
pub struct TableCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    tables: HashMap<PointBytes, (Arc<Table>, u64)>,
    seen_once: HashSet<PointBytes>,
    clock: u64,
}

impl TableCache {
    /// An empty cache holding at most `capacity` tables (0 disables per-key tables: every key goes to aws-lc).
    pub fn new(capacity: usize) -> TableCache {
        TableCache { capacity, inner: Mutex::new(Inner::default()) }
    }

    /// The process-wide cache every [`crate::VerifyingKey`] uses, with [`DEFAULT_CAPACITY`].
    pub fn global() -> &'static TableCache {
        static GLOBAL: OnceLock<TableCache> = OnceLock::new();
        GLOBAL.get_or_init(|| TableCache::new(DEFAULT_CAPACITY))
    }

    /// The most tables this cache holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of tables held now.
    pub fn len(&self) -> usize {
        self.lock().tables.len()
    }

    /// Whether no table is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The table of `point`, building it (outside the lock) if this is the key's second sighting; `None` on the
    /// first sighting or when the cache is disabled. `build` makes the table for exactly this point.
    pub(crate) fn table_for(&self, point: &PointBytes, build: impl FnOnce() -> Table) -> Option<Arc<Table>> {
        if self.capacity == 0 {
            return None;
        }
        {
            let mut inner = self.lock();
            inner.clock += 1;
            let now = inner.clock;
            if let Some((table, last_use)) = inner.tables.get_mut(point) {
                *last_use = now;
                return Some(Arc::clone(table));
            }
            if inner.seen_once.len() >= SEEN_ONCE_LIMIT {
                inner.seen_once.clear();
            }
            if inner.seen_once.insert(*point) {
                return None;
            }
        }
        let table = build();
        if !table.is_complete() {
            return None;
        }
        let table = Arc::new(table);
        let mut inner = self.lock();
        inner.seen_once.remove(point);
        if inner.tables.len() >= self.capacity && !inner.tables.contains_key(point) {
            let oldest = inner.tables.iter().min_by_key(|(_, (_, last_use))| *last_use).map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                inner.tables.remove(&oldest);
            }
        }
        inner.clock += 1;
        let now = inner.clock;
        let entry = inner.tables.entry(*point).or_insert((table, now));
        Some(Arc::clone(&entry.0))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves only a cache behind: keep using it.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl std::fmt::Debug for TableCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableCache").field("capacity", &self.capacity).field("tables", &self.len()).finish()
    }
}
