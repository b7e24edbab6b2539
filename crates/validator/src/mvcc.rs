//! The sequential stage, in block order: key-level policy updates earlier in the block, duplicate txids in the
//! block, MVCC against the committed state plus the updates of earlier valid transactions, write-set application and
//! the commit hash (Fabric's `core/ledger/kvledger/txmgmt/validation/{validator.go, tx_ops.go,
//! combined_iterator.go, rangequery_validator.go}`, `txmgr/update_batch_bytes.go` and `kvledger/kv_ledger.go`).

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use ferrofabric_arena::{BlockArena, NsRwSet};
use ferrofabric_protos::common::HeaderType;
use ferrofabric_protos::kvrwset::{range_query_info::ReadsInfo, KvMetadataEntry, KvRead, RangeQueryInfo, Version};
use ferrofabric_protos::peer::TxValidationCode as Code;
use ferrofabric_state::{Height, StateKey, StateView, Update, UpdateBatch, VersionedValue};
use prost::Message;
use sha2::{Digest, Sha256};

use crate::txcheck::Verdict;

/// Key-level validation parameters updated earlier in the block (Fabric's `vpmanagerimpl` dependency tracking): a
/// transaction that writes a key whose validation parameter an earlier transaction of the same block changed, and
/// that earlier transaction passed VSCC, fails with ENDORSEMENT_POLICY_FAILURE. Fabric waits on the earlier
/// transaction's result (and hangs forever if that transaction never reaches VSCC); here the block is walked in
/// order after the parallel stage, so nothing waits.
pub(crate) fn apply_key_level_dependencies(arena: &BlockArena, verdicts: &mut [Verdict]) {
    let mut updated: HashSet<StateKey> = HashSet::new();
    for (tx, v) in arena.txs().iter().zip(verdicts.iter_mut()) {
        if !v.passed_vscc {
            continue;
        }
        let Ok(rwset) = tx.rwset() else { continue };
        if !updated.is_empty() && written_keys(rwset).any(|k| updated.contains(&k)) {
            v.code = Code::EndorsementPolicyFailure;
            v.passed_vscc = false;
            v.txid = None;
            continue;
        }
        for ns in rwset {
            for m in &ns.kv.metadata_writes {
                updated.insert(StateKey::public(&ns.namespace, Bytes::copy_from_slice(m.key.as_bytes())));
            }
            for c in &ns.collections {
                for m in &c.hashed.metadata_writes {
                    updated.insert(StateKey::hashed(&ns.namespace, &c.collection, m.key_hash.clone()));
                }
            }
        }
    }
}

/// Every key a transaction writes (values or metadata, public or hashed).
fn written_keys(rwset: &[NsRwSet]) -> impl Iterator<Item = StateKey> + '_ {
    rwset.iter().flat_map(|ns| {
        let public = ns
            .kv
            .writes
            .iter()
            .map(|w| w.key.as_str())
            .chain(ns.kv.metadata_writes.iter().map(|w| w.key.as_str()))
            .map(|k| StateKey::public(&ns.namespace, Bytes::copy_from_slice(k.as_bytes())));
        let hashed = ns.collections.iter().flat_map(move |c| {
            c.hashed
                .hashed_writes
                .iter()
                .map(|w| &w.key_hash)
                .chain(c.hashed.metadata_writes.iter().map(|w| &w.key_hash))
                .map(move |k| StateKey::hashed(&ns.namespace, &c.collection, k.clone()))
        });
        public.chain(hashed)
    })
}

/// Fabric's `markTXIdDuplicates`: among transactions still valid, a txid seen earlier in the block is a duplicate.
pub(crate) fn mark_duplicate_txids(verdicts: &mut [Verdict]) {
    let mut seen = HashSet::new();
    for v in verdicts.iter_mut() {
        if v.code != Code::Valid {
            continue;
        }
        if let Some(txid) = &v.txid {
            if !seen.insert(txid.clone()) {
                v.code = Code::DuplicateTxid;
            }
        }
    }
}

/// MVCC in block order and the block's update batch. Returns the final codes.
pub(crate) fn validate_and_prepare(
    view: &StateView<'_>,
    arena: &BlockArena,
    verdicts: &[Verdict],
) -> (Vec<Code>, UpdateBatch) {
    let block = arena.number();
    let mut codes: Vec<Code> = verdicts.iter().map(|v| v.code).collect();
    let mut batch = UpdateBatch::new();
    for (i, tx) in arena.txs().iter().enumerate() {
        if codes[i] != Code::Valid {
            continue;
        }
        let Ok(ch) = tx.channel_header() else {
            codes[i] = Code::InvalidOtherReason;
            continue;
        };
        if ch.r#type == HeaderType::Config as i32 {
            match tx.payload() {
                Ok(payload) => put_channel_config(&mut batch, payload.data.clone(), Height::new(block, i as u64)),
                Err(_) => codes[i] = Code::InvalidOtherReason,
            }
            continue;
        }
        if ch.r#type != HeaderType::EndorserTransaction as i32 {
            continue;
        }
        let Ok(rwset) = tx.rwset() else {
            codes[i] = Code::InvalidOtherReason;
            continue;
        };
        let code = mvcc_check(view, &batch, rwset);
        codes[i] = code;
        if code == Code::Valid {
            apply_write_set(view, &mut batch, rwset, Height::new(block, i as u64));
        }
    }
    (codes, batch)
}

/// The key under which a peer keeps the latest channel configuration in its world state, in the peer's own
/// namespace `""` (Fabric's `core/peer/configtx_processor.go`).
pub const CHANNEL_CONFIG_KEY: &str = "CHANNEL_CONFIG_ENV_BYTES";

/// The write a valid CONFIG transaction makes (Fabric's `ConfigTxProcessor.GenerateSimulationResults`): its payload
/// data, the marshaled `ConfigEnvelope`, under [`CHANNEL_CONFIG_KEY`] in namespace `""`. The commit hash skips
/// namespace `""` ([`commit_hash`]), so the write shows only in the world state.
pub(crate) fn put_channel_config(batch: &mut UpdateBatch, config_envelope: Bytes, at: Height) {
    let value = VersionedValue { value: config_envelope, metadata: vec![], version: at };
    batch.put(StateKey::public("", CHANNEL_CONFIG_KEY), Update::Put(value));
}

fn height(v: &Option<Version>) -> Option<Height> {
    v.as_ref().map(|v| Height::new(v.block_num, v.tx_num))
}

/// Fabric's `validateTx`: per namespace, reads, then range queries, then hashed reads.
fn mvcc_check(view: &StateView<'_>, batch: &UpdateBatch, rwset: &[NsRwSet]) -> Code {
    for ns in rwset {
        for r in &ns.kv.reads {
            let key = StateKey::public(&ns.namespace, Bytes::copy_from_slice(r.key.as_bytes()));
            if batch.contains(&key) || view.version(&key) != height(&r.version) {
                return Code::MvccReadConflict;
            }
        }
        for rq in &ns.kv.range_queries_info {
            if !range_query_valid(view, batch, &ns.namespace, rq) {
                return Code::PhantomReadConflict;
            }
        }
        for c in &ns.collections {
            for r in &c.hashed.hashed_reads {
                let key = StateKey::hashed(&ns.namespace, &c.collection, r.key_hash.clone());
                if batch.contains(&key) || view.version(&key) != height(&r.version) {
                    return Code::MvccReadConflict;
                }
            }
        }
    }
    Code::Valid
}

/// Re-executes a range query over the committed state merged with the block's earlier updates and compares the
/// results with what the endorser saw (Fabric's combined iterator and `rangeQueryResultsValidator`). When the
/// iterator was not exhausted the end key itself is included, taken from the block's updates or else the committed
/// state; a key deleted there is not served (Fabric's `serveEndKeyIfNeeded`).
fn range_query_valid(view: &StateView<'_>, batch: &UpdateBatch, ns: &str, rq: &RangeQueryInfo) -> bool {
    let start = rq.start_key.as_bytes();
    let end = rq.end_key.as_bytes();
    let mut merged: BTreeMap<Bytes, Option<Height>> =
        view.range(ns, start, end).into_iter().map(|(k, v)| (k.key, Some(v.version))).collect();
    for (k, u) in batch.range(ns, start, end) {
        match u {
            Update::Put(v) => merged.insert(k.key.clone(), Some(v.version)),
            Update::Delete(_) => merged.insert(k.key.clone(), None),
        };
    }
    let mut results: Vec<(Bytes, Height)> = merged.into_iter().filter_map(|(k, v)| v.map(|h| (k, h))).collect();
    if !rq.itr_exhausted {
        let end_key = StateKey::public(ns, Bytes::copy_from_slice(end));
        let served = match batch.get(&end_key) {
            Some(Update::Put(v)) => Some(v.version),
            Some(Update::Delete(_)) => None,
            None => view.version(&end_key),
        };
        if let Some(h) = served {
            results.push((end_key.key, h));
        }
    }
    match &rq.reads_info {
        Some(ReadsInfo::RawReads(raw)) => {
            raw.kv_reads.len() == results.len()
                && raw
                    .kv_reads
                    .iter()
                    .zip(&results)
                    .all(|(r, (k, h))| r.key.as_bytes() == k.as_ref() && height(&r.version) == Some(*h))
        }
        None => results.is_empty(),
        // Results summarised as Merkle hashes: rebuild the summary with the endorser's fan-out and compare.
        Some(ReadsInfo::ReadsMerkleHashes(want)) => {
            let reads = results
                .into_iter()
                .map(|(k, h)| KvRead {
                    key: String::from_utf8_lossy(&k).into_owned(),
                    version: Some(Version { block_num: h.block_num, tx_num: h.tx_num }),
                })
                .collect();
            match crate::rangequery::summarize(reads, want.max_degree as usize) {
                Some(ReadsInfo::ReadsMerkleHashes(got)) => &got == want,
                _ => false,
            }
        }
    }
}

/// SHA-256 of the empty string: a hashed write of this value hash is a delete.
const SHA256_OF_EMPTY: [u8; 32] = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24, 0x27, 0xae, 0x41,
    0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

/// Which parts of a key a transaction changes (Fabric's `keyOps`).
#[derive(Default)]
struct KeyOp {
    value: Option<Bytes>,
    delete: bool,
    metadata: Option<Vec<(String, Bytes)>>,
}

fn metadata_entries(entries: &[KvMetadataEntry]) -> Vec<(String, Bytes)> {
    let mut m: Vec<(String, Bytes)> = entries.iter().map(|e| (e.name.clone(), e.value.clone())).collect();
    m.sort_by(|a, b| a.0.cmp(&b.0));
    m
}

/// Applies a valid transaction's writes to `batch` at height `h` = (block, tx) (Fabric's `prepareTxOps` /
/// `applyWriteSet` in `core/ledger/kvledger/txmgmt/validation/tx_ops.go`): a value write keeps the key's latest
/// metadata (from `batch`, else from `view`) unless the transaction writes metadata too; a metadata-only write changes
/// an existing key and is ignored for an absent one; a delete wins; an empty value (or, for hashed writes, the hash of
/// an empty value) is a delete. Used by the validator's commit and by replicas that apply already-validated blocks.
pub fn apply_write_set(view: &StateView<'_>, batch: &mut UpdateBatch, rwset: &[NsRwSet], h: Height) {
    let mut ops: BTreeMap<StateKey, KeyOp> = BTreeMap::new();
    for ns in rwset {
        for w in &ns.kv.writes {
            let op = ops.entry(StateKey::public(&ns.namespace, Bytes::copy_from_slice(w.key.as_bytes()))).or_default();
            // An empty value is a delete too (Fabric's `rwsetutil.IsKVWriteDelete`).
            if w.is_delete || w.value.is_empty() {
                op.delete = true;
            } else {
                op.value = Some(w.value.clone());
            }
        }
        for m in &ns.kv.metadata_writes {
            let op = ops.entry(StateKey::public(&ns.namespace, Bytes::copy_from_slice(m.key.as_bytes()))).or_default();
            op.metadata = Some(metadata_entries(&m.entries));
        }
        for c in &ns.collections {
            for w in &c.hashed.hashed_writes {
                let op = ops.entry(StateKey::hashed(&ns.namespace, &c.collection, w.key_hash.clone())).or_default();
                // Fabric's `IsKVWriteHashDelete`: also the hash of an empty value.
                if w.is_delete || w.value_hash.is_empty() || w.value_hash.as_ref() == SHA256_OF_EMPTY {
                    op.delete = true;
                } else {
                    op.value = Some(w.value_hash.clone());
                }
            }
            for m in &c.hashed.metadata_writes {
                let op = ops.entry(StateKey::hashed(&ns.namespace, &c.collection, m.key_hash.clone())).or_default();
                op.metadata = Some(metadata_entries(&m.entries));
            }
        }
    }
    for (key, op) in ops {
        let latest = || match batch.get(&key) {
            Some(Update::Put(v)) => Some(v.clone()),
            Some(Update::Delete(_)) => None,
            None => view.get(&key),
        };
        let update = if op.delete {
            Update::Delete(h)
        } else if let Some(value) = op.value {
            let metadata = match op.metadata {
                Some(m) => m,
                None => latest().map(|v| v.metadata).unwrap_or_default(),
            };
            Update::Put(VersionedValue { value, metadata, version: h })
        } else {
            // Metadata only: applies to the latest value; a key that does not exist is left alone.
            match (latest(), op.metadata) {
                (Some(v), Some(metadata)) => Update::Put(VersionedValue { value: v.value, metadata, version: h }),
                _ => continue,
            }
        };
        batch.put(key, update);
    }
}

/// One entry of Fabric's deterministic update-batch encoding (`txmgr/updates.proto`, `KVWrite`).
#[derive(Clone, PartialEq, Message)]
struct HashedKvWrite {
    #[prost(string, tag = "1")]
    namespace: String,
    #[prost(string, tag = "2")]
    collection: String,
    #[prost(bytes = "vec", tag = "3")]
    key: Vec<u8>,
    #[prost(bool, tag = "4")]
    is_delete: bool,
    #[prost(bytes = "vec", tag = "5")]
    value: Vec<u8>,
    #[prost(bytes = "vec", tag = "6")]
    version_bytes: Vec<u8>,
}

/// `txmgr.Updates`.
#[derive(Clone, PartialEq, Message)]
struct HashedUpdates {
    #[prost(message, repeated, tag = "1")]
    kvwrites: Vec<HashedKvWrite>,
}

/// Fabric's `deterministicBytesForPubAndHashUpdates`: namespaces in order (the peer's own namespace "" skipped),
/// public keys in order, then each collection's hashed keys in order; the namespace is named on the first entry of
/// each namespace and the collection on the first entry of each collection.
fn update_batch_bytes(batch: &UpdateBatch) -> Vec<u8> {
    let mut kvwrites = Vec::with_capacity(batch.len());
    let mut last_ns: Option<&str> = None;
    let mut last_coll: Option<(&str, &str)> = None;
    for (k, u) in batch.iter() {
        if k.namespace.is_empty() {
            continue;
        }
        let mut w = HashedKvWrite { key: k.key.to_vec(), version_bytes: u.version().to_bytes(), ..Default::default() };
        match u {
            Update::Put(v) => w.value = v.value.to_vec(),
            Update::Delete(_) => w.is_delete = true,
        }
        if last_ns != Some(k.namespace.as_str()) {
            w.namespace = k.namespace.clone();
            last_ns = Some(&k.namespace);
        }
        if !k.collection.is_empty() && last_coll != Some((k.namespace.as_str(), k.collection.as_str())) {
            w.collection = k.collection.clone();
            last_coll = Some((&k.namespace, &k.collection));
        }
        kvwrites.push(w);
    }
    HashedUpdates { kvwrites }.encode_to_vec()
}

/// Fabric's `addBlockCommitHash`: SHA-256(varint(len(filter)) ‖ filter ‖ update-batch bytes ‖ previous hash).
pub(crate) fn commit_hash(filter: &[u8], batch: &UpdateBatch, previous: Option<&[u8; 32]>) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut len = Vec::with_capacity(10);
    prost::encoding::encode_varint(filter.len() as u64, &mut len);
    h.update(&len);
    h.update(filter);
    h.update(update_batch_bytes(batch));
    if let Some(p) = previous {
        h.update(p);
    }
    h.finalize().into()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ferrofabric_state::WorldState;

    fn state_with(n: u64) -> WorldState {
        let state = WorldState::new();
        let mut b = UpdateBatch::new();
        for i in 0..n {
            let v = VersionedValue { value: Bytes::from_static(b"v"), metadata: vec![], version: Height::new(2, i) };
            b.put(StateKey::public("cc", format!("k{i:03}")), Update::Put(v));
        }
        state.apply(2, &b);
        state
    }

    fn merkle_query(n: u64, bump: Option<u64>) -> RangeQueryInfo {
        let reads = (0..n)
            .map(|i| KvRead {
                key: format!("k{i:03}"),
                version: Some(Version { block_num: 2, tx_num: if Some(i) == bump { 99 } else { i } }),
            })
            .collect();
        RangeQueryInfo {
            start_key: "k".into(),
            end_key: "l".into(),
            itr_exhausted: true,
            reads_info: crate::rangequery::summarize(reads, crate::rangequery::MAX_DEGREE),
        }
    }

    #[test]
    fn merkle_summarised_range_queries_are_rehashed_and_compared() {
        let state = state_with(120);
        let view = state.view();
        let batch = UpdateBatch::new();
        let ok = merkle_query(120, None);
        assert!(matches!(ok.reads_info, Some(ReadsInfo::ReadsMerkleHashes(_))));
        assert!(range_query_valid(&view, &batch, "cc", &ok));
        assert!(!range_query_valid(&view, &batch, "cc", &merkle_query(120, Some(77))));
        assert!(!range_query_valid(&view, &batch, "cc", &merkle_query(119, None)));
    }
}
