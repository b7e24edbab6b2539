//! The private data this peer endorsed (Fabric's transient store, `core/transientstore`, and the private state of
//! `core/ledger/pvtdatastorage` as the committer fills it from the transient store, `gossip/privdata/coordinator.go`).
//!
//! When this peer endorses a transaction that writes private data, the private write set waits in the transient
//! store under the transaction ID. When a block commits that transaction as VALID, each collection's private write
//! set whose SHA-256 equals the block's `pvt_rwset_hash` is applied to the private state at the transaction's
//! height; other collections' data (endorsed elsewhere, or differing) is missing here and is not invented. A purge
//! removes the key's value. The transient entry is then dropped, as it is after
//! `peer.gossip.pvtData.transientstoreMaxBlockRetention` blocks if its transaction never commits.
//!
//! Reads check the private version against the hashed state's version, as Fabric does, so a value this peer did not
//! receive is reported missing instead of served stale. Both stores are in memory, like the replica's world state.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, RwLock};

use bytes::Bytes;
use ferrofabric_arena::NsRwSet;
use ferrofabric_chaincode::PrivateState;
use ferrofabric_protos::kvrwset::KvrwSet;
use ferrofabric_protos::rwset::TxPvtReadWriteSet;
use ferrofabric_state::Height;
use prost::Message;
use sha2::{Digest, Sha256};

/// Blocks a transient entry is kept when its transaction does not commit (Fabric's default
/// `transientstoreMaxBlockRetention`).
pub const TRANSIENT_RETENTION_BLOCKS: u64 = 1000;

/// (namespace, collection) → key → (value, version).
type Collections = HashMap<(String, String), BTreeMap<String, (Bytes, Height)>>;

/// The transient store and the private state; see the module docs.
#[derive(Default)]
pub(crate) struct PrivateData {
    transient: Mutex<HashMap<String, (u64, TxPvtReadWriteSet)>>,
    state: RwLock<Collections>,
}

impl PrivateData {
    /// Keeps the private write set (a marshaled `TxPvtReadWriteSet`) of transaction `tx_id`, endorsed at `height`.
    pub(crate) fn persist(&self, tx_id: &str, height: u64, private: &Bytes) {
        let Ok(set) = TxPvtReadWriteSet::decode(private.clone()) else { return };
        let mut t = self.transient.lock().unwrap_or_else(|e| e.into_inner());
        t.insert(tx_id.to_owned(), (height, set));
    }

    /// Applies the private data of a transaction committed VALID at `height` whose public read/write set is
    /// `rwset`: see the module docs.
    pub(crate) fn commit(&self, tx_id: &str, height: Height, rwset: &[NsRwSet]) {
        let pending = self.transient.lock().unwrap_or_else(|e| e.into_inner()).remove(tx_id);
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        if let Some((_, set)) = pending {
            for ns in &set.ns_pvt_rwset {
                for coll in &ns.collection_pvt_rwset {
                    let expected = rwset
                        .iter()
                        .filter(|n| n.namespace == ns.namespace)
                        .flat_map(|n| &n.collections)
                        .find(|c| c.collection == coll.collection_name);
                    let hash = Sha256::digest(&coll.rwset);
                    let Some(c) = expected.filter(|c| c.pvt_rwset_hash.as_ref() == hash.as_slice()) else { continue };
                    let Ok(kv) = KvrwSet::decode(coll.rwset.clone()) else { continue };
                    let values = state.entry((ns.namespace.clone(), c.collection.clone())).or_default();
                    for w in kv.writes {
                        if w.is_delete || w.value.is_empty() {
                            values.remove(&w.key);
                        } else {
                            values.insert(w.key, (w.value, height));
                        }
                    }
                }
            }
        }
        // Purges remove the value even where this peer holds no write set of the transaction.
        for ns in rwset {
            for c in &ns.collections {
                for w in c.hashed.hashed_writes.iter().filter(|w| w.is_purge) {
                    if let Some(values) = state.get_mut(&(ns.namespace.clone(), c.collection.clone())) {
                        values.retain(|k, _| Sha256::digest(k.as_bytes()).as_slice() != w.key_hash.as_ref());
                    }
                }
            }
        }
    }

    /// Drops transient entries endorsed more than [`TRANSIENT_RETENTION_BLOCKS`] before `height`.
    pub(crate) fn expire(&self, height: u64) {
        let mut t = self.transient.lock().unwrap_or_else(|e| e.into_inner());
        t.retain(|_, (at, _)| at.saturating_add(TRANSIENT_RETENTION_BLOCKS) > height);
    }
}

impl PrivateState for PrivateData {
    fn get(&self, namespace: &str, collection: &str, key: &str) -> Option<(Bytes, (u64, u64))> {
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        let (value, h) = state.get(&(namespace.to_owned(), collection.to_owned()))?.get(key)?;
        Some((value.clone(), (h.block_num, h.tx_num)))
    }

    fn range(&self, namespace: &str, collection: &str, start: &str, end: &str) -> Vec<(String, Bytes)> {
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        let Some(values) = state.get(&(namespace.to_owned(), collection.to_owned())) else { return Vec::new() };
        values
            .range(start.to_owned()..)
            .take_while(|(k, _)| end.is_empty() || k.as_str() < end)
            .map(|(k, (v, _))| (k.clone(), v.clone()))
            .collect()
    }
}
