//! Range-query results as Fabric records them (`core/ledger/kvledger/txmgmt/rwsetutil/query_results_helper.go`):
//! up to `max_degree` reads are kept raw; beyond that, every batch of `max_degree + 1` reads is hashed into a Merkle
//! tree whose nodes have at most `max_degree` children, and only the top level is kept. The endorser side builds
//! the summary when it simulates; MVCC rebuilds it from the re-executed query and compares.

use std::collections::BTreeMap;

use bytes::Bytes;
use ferrofabric_protos::kvrwset::{range_query_info::ReadsInfo, KvRead, QueryReads, QueryReadsMerkleSummary};
use prost::Message;
use sha2::{Digest, Sha256};

/// Fabric's default `maxDegreeQueryReadsHashing` (`txmgr/query_executor.go`).
pub const MAX_DEGREE: usize = 50;

/// Summarises the reads of one range query with fan-out `max_degree` (at least 2). `None`: no reads (Fabric leaves
/// `reads_info` unset).
pub fn summarize(reads: Vec<KvRead>, max_degree: usize) -> Option<ReadsInfo> {
    let max_degree = max_degree.max(2);
    let mut tree = MerkleTree::new(max_degree);
    let mut pending: Vec<KvRead> = Vec::new();
    for r in reads {
        pending.push(r);
        if pending.len() > max_degree {
            tree.update(hash_reads(std::mem::take(&mut pending)));
        }
    }
    if tree.is_empty() {
        // Fabric sets the raw reads only when there are some (a nil slice leaves `reads_info` unset).
        return (!pending.is_empty()).then_some(ReadsInfo::RawReads(QueryReads { kv_reads: pending }));
    }
    if !pending.is_empty() {
        tree.update(hash_reads(pending));
    }
    tree.done();
    Some(ReadsInfo::ReadsMerkleHashes(QueryReadsMerkleSummary {
        max_degree: max_degree as u32,
        max_level: tree.max_level,
        max_level_hashes: tree.levels.get(&tree.max_level).cloned().unwrap_or_default(),
    }))
}

fn hash_reads(kv_reads: Vec<KvRead>) -> Bytes {
    Bytes::copy_from_slice(&Sha256::digest(QueryReads { kv_reads }.encode_to_vec()))
}

/// Fabric's range-query Merkle tree: levels numbered from 1 (leaves); a level that grows beyond `MAX_DEGREE` hashes
/// are combined (concatenated and hashed) into one hash of the next level.
struct MerkleTree {
    levels: BTreeMap<u32, Vec<Bytes>>,
    max_level: u32,
    max_degree: usize,
}

fn combine(hashes: &[Bytes]) -> Bytes {
    let mut h = Sha256::new();
    for x in hashes {
        h.update(x);
    }
    Bytes::copy_from_slice(&h.finalize())
}

impl MerkleTree {
    fn new(max_degree: usize) -> Self {
        MerkleTree { levels: BTreeMap::new(), max_level: 1, max_degree }
    }

    fn is_empty(&self) -> bool {
        self.max_level == 1 && self.levels.get(&1).is_none_or(Vec::is_empty)
    }

    fn update(&mut self, leaf: Bytes) {
        self.levels.entry(1).or_default().push(leaf);
        let mut level = 1;
        loop {
            let Some(hashes) = self.levels.get(&level) else { return };
            if hashes.len() <= self.max_degree {
                return;
            }
            let combined = combine(hashes);
            self.levels.remove(&level);
            level += 1;
            self.levels.entry(level).or_default().push(combined);
            self.max_level = self.max_level.max(level);
        }
    }

    fn done(&mut self) {
        let mut level = 1;
        while level < self.max_level {
            let hashes = self.levels.remove(&level).unwrap_or_default();
            match hashes.len() {
                0 => {}
                1 => self.levels.entry(level + 1).or_default().push(hashes[0].clone()),
                _ => {
                    let c = combine(&hashes);
                    self.levels.entry(level + 1).or_default().push(c);
                }
            }
            level += 1;
        }
        let top = self.levels.get(&self.max_level).cloned().unwrap_or_default();
        if top.len() > self.max_degree {
            self.levels.remove(&self.max_level);
            self.max_level += 1;
            self.levels.insert(self.max_level, vec![combine(&top)]);
        }
    }
}
