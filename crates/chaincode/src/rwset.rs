//! The read/write-set builder of a simulation, with Fabric's ordering and encoding rules
//! (`core/ledger/kvledger/txmgmt/rwsetutil/{rwset_builder.go, rwset_proto_util.go, query_results_helper.go}`):
//!
//! * namespaces, collections, reads, writes and metadata writes are emitted sorted by name / plaintext key
//!   (Go sorts its map keys byte-wise); a key read or written twice keeps its last entry;
//! * range queries are emitted in the order they were first recorded, de-duplicated on
//!   (start key, end key, exhausted);
//! * a write with an empty value is a delete (`KVWrite.is_delete`);
//! * private writes go to the private write set (whose SHA-256 becomes the collection's `pvt_rwset_hash`) and, hashed,
//!   to the public one;
//! * range query results beyond [`MAX_DEGREE`] are summarised as a Merkle tree of SHA-256 hashes.

use std::collections::{BTreeMap, HashSet};

use bytes::Bytes;
use ferrofabric_protos::kvrwset::{
    range_query_info::ReadsInfo, HashedRwSet, KvMetadataEntry, KvMetadataWrite, KvMetadataWriteHash, KvRead,
    KvReadHash, KvWrite, KvWriteHash, KvrwSet, RangeQueryInfo, Version,
};
use ferrofabric_protos::rwset::{
    tx_read_write_set::DataModel, CollectionHashedReadWriteSet, CollectionPvtReadWriteSet, NsPvtReadWriteSet,
    NsReadWriteSet, TxPvtReadWriteSet, TxReadWriteSet,
};
use ferrofabric_state::Height;
use prost::Message;
use sha2::{Digest, Sha256};

/// Results per leaf of the range-query Merkle tree, and the fan-out of its inner nodes (Fabric's
/// `maxDegreeQueryReadsHashing` in `txmgr/query_executor.go`).
pub const MAX_DEGREE: usize = ferrofabric_validator::MAX_DEGREE_QUERY_READS_HASHING;

pub(crate) fn sha256(data: &[u8]) -> Bytes {
    Bytes::copy_from_slice(&Sha256::digest(data))
}

pub(crate) fn version(h: Option<Height>) -> Option<Version> {
    h.map(|h| Version { block_num: h.block_num, tx_num: h.tx_num })
}

#[derive(Default)]
struct NsBuilder {
    reads: BTreeMap<String, Option<Height>>,
    writes: BTreeMap<String, Bytes>,
    metadata_writes: BTreeMap<String, Vec<KvMetadataEntry>>,
    range_queries: Vec<RangeQueryInfo>,
    range_keys: HashSet<(String, String, bool)>,
    collections: BTreeMap<String, CollBuilder>,
}

#[derive(Default)]
struct CollBuilder {
    hashed_reads: BTreeMap<String, Option<Height>>,
    /// Written values by plaintext key; empty = delete. `Some` only once a write or metadata write happened
    /// (that is what creates Fabric's private builder for the collection).
    private: Option<PrivateColl>,
    hashed_metadata_writes: BTreeMap<String, Vec<KvMetadataEntry>>,
}

#[derive(Default)]
struct PrivateColl {
    writes: BTreeMap<String, Bytes>,
    /// Keys whose last write is a purge (Fabric 2.5's `PurgePrivateData`: a delete whose hash is marked purged).
    purged: HashSet<String>,
    /// Keys whose metadata was written: the private set names them without entries.
    metadata_keys: BTreeMap<String, ()>,
}

/// Metadata entries sorted by name, as Fabric's `mapToMetadataWrite` emits them.
fn entries(metadata: &BTreeMap<String, Bytes>) -> Vec<KvMetadataEntry> {
    metadata.iter().map(|(name, value)| KvMetadataEntry { name: name.clone(), value: value.clone() }).collect()
}

/// Accumulates what one simulated transaction read and wrote; see the module docs.
#[derive(Default)]
pub(crate) struct RwSetBuilder {
    namespaces: BTreeMap<String, NsBuilder>,
}

impl RwSetBuilder {
    fn ns(&mut self, ns: &str) -> &mut NsBuilder {
        self.namespaces.entry(ns.to_owned()).or_default()
    }

    fn coll(&mut self, ns: &str, coll: &str) -> &mut CollBuilder {
        self.ns(ns).collections.entry(coll.to_owned()).or_default()
    }

    pub(crate) fn add_read(&mut self, ns: &str, key: &str, version: Option<Height>) {
        self.ns(ns).reads.insert(key.to_owned(), version);
    }

    pub(crate) fn add_write(&mut self, ns: &str, key: &str, value: Bytes) {
        self.ns(ns).writes.insert(key.to_owned(), value);
    }

    pub(crate) fn add_metadata_write(&mut self, ns: &str, key: &str, metadata: &BTreeMap<String, Bytes>) {
        self.ns(ns).metadata_writes.insert(key.to_owned(), entries(metadata));
    }

    pub(crate) fn add_range_query(&mut self, ns: &str, info: RangeQueryInfo) {
        let b = self.ns(ns);
        if b.range_keys.insert((info.start_key.clone(), info.end_key.clone(), info.itr_exhausted)) {
            b.range_queries.push(info);
        }
    }

    pub(crate) fn add_hashed_read(&mut self, ns: &str, coll: &str, key: &str, version: Option<Height>) {
        self.coll(ns, coll).hashed_reads.insert(key.to_owned(), version);
    }

    pub(crate) fn add_private_write(&mut self, ns: &str, coll: &str, key: &str, value: Bytes) {
        let p = self.coll(ns, coll).private.get_or_insert_with(Default::default);
        p.writes.insert(key.to_owned(), value);
        p.purged.remove(key);
    }

    /// Fabric's `AddToPvtAndHashedWriteSetForPurge`: a private delete whose hashed write is marked `is_purge`.
    pub(crate) fn add_private_purge(&mut self, ns: &str, coll: &str, key: &str) {
        let p = self.coll(ns, coll).private.get_or_insert_with(Default::default);
        p.writes.insert(key.to_owned(), Bytes::new());
        p.purged.insert(key.to_owned());
    }

    /// Namespaces that appear in the public read/write set, in order.
    pub(crate) fn namespaces(&self) -> impl Iterator<Item = &str> {
        self.namespaces.keys().map(String::as_str)
    }

    /// Encodes the results: the marshaled public `TxReadWriteSet` (with collection hashes) and, when the transaction
    /// wrote private data, the marshaled `TxPvtReadWriteSet` (Fabric's `GetTxSimulationResults`).
    pub(crate) fn build(&self) -> (Bytes, Option<Bytes>) {
        let mut ns_pvt = Vec::new();
        let mut ns_pub = Vec::with_capacity(self.namespaces.len());
        for (ns, b) in &self.namespaces {
            let mut coll_pvt = Vec::new();
            let mut coll_hashed = Vec::with_capacity(b.collections.len());
            for (coll, c) in &b.collections {
                let mut pvt_rwset_hash = Bytes::new();
                if let Some(p) = &c.private {
                    let kv = KvrwSet {
                        writes: p.writes.iter().map(|(k, v)| kv_write(k, v)).collect(),
                        metadata_writes: p
                            .metadata_keys
                            .keys()
                            .map(|k| KvMetadataWrite { key: k.clone(), entries: Vec::new() })
                            .collect(),
                        ..Default::default()
                    }
                    .encode_to_vec();
                    pvt_rwset_hash = sha256(&kv);
                    coll_pvt.push(CollectionPvtReadWriteSet { collection_name: coll.clone(), rwset: Bytes::from(kv) });
                }
                let hashed = HashedRwSet {
                    hashed_reads: c
                        .hashed_reads
                        .iter()
                        .map(|(k, v)| KvReadHash { key_hash: sha256(k.as_bytes()), version: version(*v) })
                        .collect(),
                    hashed_writes: c
                        .private
                        .iter()
                        .flat_map(|p| p.writes.iter().map(move |(k, v)| (k, v, p.purged.contains(k))))
                        .map(|(k, v, is_purge)| KvWriteHash {
                            key_hash: sha256(k.as_bytes()),
                            is_delete: v.is_empty(),
                            value_hash: if v.is_empty() { Bytes::new() } else { sha256(v) },
                            is_purge,
                        })
                        .collect(),
                    metadata_writes: c
                        .hashed_metadata_writes
                        .iter()
                        .map(|(k, e)| KvMetadataWriteHash { key_hash: sha256(k.as_bytes()), entries: e.clone() })
                        .collect(),
                };
                coll_hashed.push(CollectionHashedReadWriteSet {
                    collection_name: coll.clone(),
                    hashed_rwset: Bytes::from(hashed.encode_to_vec()),
                    pvt_rwset_hash,
                });
            }
            if !coll_pvt.is_empty() {
                ns_pvt.push(NsPvtReadWriteSet { namespace: ns.clone(), collection_pvt_rwset: coll_pvt });
            }
            let kv = KvrwSet {
                reads: b.reads.iter().map(|(k, v)| KvRead { key: k.clone(), version: version(*v) }).collect(),
                range_queries_info: b.range_queries.clone(),
                writes: b.writes.iter().map(|(k, v)| kv_write(k, v)).collect(),
                metadata_writes: b
                    .metadata_writes
                    .iter()
                    .map(|(k, e)| KvMetadataWrite { key: k.clone(), entries: e.clone() })
                    .collect(),
            };
            ns_pub.push(NsReadWriteSet {
                namespace: ns.clone(),
                rwset: Bytes::from(kv.encode_to_vec()),
                collection_hashed_rwset: coll_hashed,
            });
        }
        let public = TxReadWriteSet { data_model: DataModel::Kv as i32, ns_rwset: ns_pub }.encode_to_vec();
        let private = (!ns_pvt.is_empty()).then(|| {
            Bytes::from(TxPvtReadWriteSet { data_model: DataModel::Kv as i32, ns_pvt_rwset: ns_pvt }.encode_to_vec())
        });
        (Bytes::from(public), private)
    }
}

fn kv_write(key: &str, value: &Bytes) -> KvWrite {
    KvWrite { key: key.to_owned(), is_delete: value.is_empty(), value: value.clone() }
}

/// The reads of one range query, summarised as Fabric's `RangeQueryResultsHelper` does (shared with MVCC
/// validation: [`ferrofabric_validator::summarize_query_reads`]).
pub(crate) fn range_reads_info(reads: Vec<KvRead>) -> Option<ReadsInfo> {
    ferrofabric_validator::summarize_query_reads(reads, MAX_DEGREE)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use ferrofabric_protos::kvrwset::QueryReads;

    // Independent oracles for the expected hashes.
    fn hash_reads(kv_reads: Vec<KvRead>) -> Bytes {
        sha256(&QueryReads { kv_reads }.encode_to_vec())
    }

    fn combine(hashes: &[Bytes]) -> Bytes {
        let mut h = Sha256::new();
        for x in hashes {
            h.update(x);
        }
        Bytes::copy_from_slice(&h.finalize())
    }

    use super::*;

    fn read(i: usize) -> KvRead {
        KvRead { key: format!("k{i:04}"), version: Some(Version { block_num: 1, tx_num: i as u64 }) }
    }

    #[test]
    fn up_to_max_degree_reads_stay_raw() {
        let info = range_reads_info((0..MAX_DEGREE).map(read).collect());
        match info {
            Some(ReadsInfo::RawReads(r)) => assert_eq!(r.kv_reads.len(), MAX_DEGREE),
            other => panic!("expected raw reads, got {other:?}"),
        }
        assert!(range_reads_info(Vec::new()).is_none());
    }

    #[test]
    fn more_than_max_degree_reads_become_one_leaf_level_hash_list() {
        // 51 reads: one full leaf batch (hashed), nothing pending.
        let reads: Vec<KvRead> = (0..=MAX_DEGREE).map(read).collect();
        let expected = hash_reads(reads.clone());
        match range_reads_info(reads) {
            Some(ReadsInfo::ReadsMerkleHashes(m)) => {
                assert_eq!(m.max_degree, 50);
                assert_eq!(m.max_level, 1);
                assert_eq!(m.max_level_hashes, vec![expected]);
            }
            other => panic!("expected a Merkle summary, got {other:?}"),
        }
    }

    #[test]
    fn merkle_tree_grows_a_level_after_max_degree_leaves() {
        // 51 * 51 reads: 51 leaf hashes, which combine into one level-2 hash on the 51st.
        let reads: Vec<KvRead> = (0..51 * 51).map(read).collect();
        let leaves: Vec<Bytes> = reads.chunks(51).map(|c| hash_reads(c.to_vec())).collect();
        match range_reads_info(reads) {
            Some(ReadsInfo::ReadsMerkleHashes(m)) => {
                assert_eq!(m.max_level, 2);
                assert_eq!(m.max_level_hashes, vec![combine(&leaves)]);
            }
            other => panic!("expected a Merkle summary, got {other:?}"),
        }
    }

    #[test]
    fn builder_sorts_keys_and_marks_empty_writes_as_deletes() {
        let mut b = RwSetBuilder::default();
        b.add_write("ns", "b", Bytes::from_static(b"2"));
        b.add_write("ns", "a", Bytes::new());
        b.add_read("ns", "z", None);
        b.add_read("ns", "c", Some(Height::new(3, 1)));
        b.add_read("_lifecycle", "x", Some(Height::new(1, 0)));
        let (public, private) = b.build();
        assert!(private.is_none());
        let tx = TxReadWriteSet::decode(public).unwrap();
        let names: Vec<&str> = tx.ns_rwset.iter().map(|n| n.namespace.as_str()).collect();
        assert_eq!(names, ["_lifecycle", "ns"]);
        let kv = KvrwSet::decode(tx.ns_rwset[1].rwset.clone()).unwrap();
        assert_eq!(kv.reads.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(), ["c", "z"]);
        assert_eq!(kv.reads[0].version, Some(Version { block_num: 3, tx_num: 1 }));
        assert_eq!(kv.reads[1].version, None);
        assert_eq!(kv.writes[0], KvWrite { key: "a".into(), is_delete: true, value: Bytes::new() });
        assert!(!kv.writes[1].is_delete);
    }

    #[test]
    fn private_writes_are_hashed_and_their_set_hash_recorded() {
        let mut b = RwSetBuilder::default();
        b.add_private_write("ns", "coll", "k", Bytes::from_static(b"v"));
        b.add_hashed_read("ns", "coll", "r", Some(Height::new(1, 0)));
        let (public, private) = b.build();
        let private = TxPvtReadWriteSet::decode(private.unwrap()).unwrap();
        let pvt_kv = &private.ns_pvt_rwset[0].collection_pvt_rwset[0].rwset;
        let tx = TxReadWriteSet::decode(public).unwrap();
        let coll = &tx.ns_rwset[0].collection_hashed_rwset[0];
        assert_eq!(coll.pvt_rwset_hash, sha256(pvt_kv));
        let hashed = HashedRwSet::decode(coll.hashed_rwset.clone()).unwrap();
        assert_eq!(hashed.hashed_writes[0].key_hash, sha256(b"k"));
        assert_eq!(hashed.hashed_writes[0].value_hash, sha256(b"v"));
        assert_eq!(hashed.hashed_reads[0].key_hash, sha256(b"r"));
    }

    #[test]
    fn duplicate_range_queries_are_recorded_once() {
        let mut b = RwSetBuilder::default();
        let q = RangeQueryInfo { start_key: "a".into(), end_key: "b".into(), itr_exhausted: true, reads_info: None };
        b.add_range_query("ns", q.clone());
        b.add_range_query("ns", q);
        let (public, _) = b.build();
        let tx = TxReadWriteSet::decode(public).unwrap();
        let kv = KvrwSet::decode(tx.ns_rwset[0].rwset.clone()).unwrap();
        assert_eq!(kv.range_queries_info.len(), 1);
    }
}
