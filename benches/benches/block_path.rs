//! Block assembly and signing throughput through `ferrofabric-protoutil`, the path every orderer block takes
//! (solo and Raft: `next_header` → `sign_and_encode` with the orderer's MSP key):
//! * `block_path/assemble+sign/txs=N`: header (data hash over N envelopes), SIGNATURES value, one ECDSA P-256
//!   signature over value ‖ signature header ‖ DER(header), metadata and marshaling, for blocks of the fixture's
//!   envelopes;
//! * `block_path/data_hash/txs=N`: the data hash alone;
//! * `block_path/peer_metadata/{reencode,in_place}/txs=N`: the committer's last step on a validated block, adding the
//!   TRANSACTIONS_FILTER and COMMIT_HASH: a full decode and re-encode of the block (as Fabric's `kvledger` does, and
//!   the committer did) against `with_block_metadata`, which copies the header and data undecoded.
//!
//! Run: `cargo bench -p ferrofabric-benches --bench block_path`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{Block, BlockMetadata, BlockMetadataIndex};
use ferrofabric_protoutil::{
    block_data_hash, block_header_hash, init_block_metadata, next_header, read_ledger_file, records, sign_and_encode,
    with_block_metadata,
};
use prost::Message;

fn fixtures() -> PathBuf {
    std::env::var_os("FERROFABRIC_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures"))
}

/// The envelopes of the fixture's orderer blocks, cycled to `n` entries.
fn envelopes(n: usize) -> Vec<Bytes> {
    let file = read_ledger_file(fixtures().join("fabric-2.5/orderer-blocks.bin")).expect("orderer-blocks.bin");
    let all: Vec<Bytes> = records(file)
        .map(|r| Block::decode(r.expect("record").1).expect("block"))
        .skip(1)
        .flat_map(|b| b.data.map(|d| d.data).unwrap_or_default())
        .collect();
    all.iter().cycle().take(n).cloned().collect()
}

fn bench_block_path(c: &mut Criterion) {
    let msp = fixtures().join("fabric-2.5/crypto/ordererOrganizations/example.com/orderers/orderer.example.com/msp");
    let signer = SigningIdentity::from_msp_dir("OrdererMSP", &msp).expect("orderer MSP");
    let previous = block_header_hash(&next_header(0, &[], &[]));
    let mut g = c.benchmark_group("block_path");
    for txs in [10usize, 100, 500] {
        let envs = envelopes(txs);
        g.throughput(Throughput::Elements(txs as u64));
        g.bench_with_input(BenchmarkId::new("assemble+sign/txs", txs), &envs, |b, envs| {
            b.iter(|| {
                let header = next_header(1, &previous, envs);
                sign_and_encode(header, envs.clone(), 0, b"", signer.serialized(), |m| signer.sign(m)).len()
            })
        });
        g.bench_with_input(BenchmarkId::new("data_hash/txs", txs), &envs, |b, envs| b.iter(|| block_data_hash(envs)));
        let header = next_header(1, &previous, &envs);
        let block = sign_and_encode(header, envs.clone(), 0, b"", signer.serialized(), |m| signer.sign(m));
        let filter = Bytes::from(vec![0u8; txs]);
        let peer_metadata = |md: &mut BlockMetadata| {
            init_block_metadata(md);
            md.metadata[BlockMetadataIndex::TransactionsFilter as usize] = filter.clone();
            md.metadata[BlockMetadataIndex::CommitHash as usize] = Bytes::from_static(&[7; 34]);
        };
        g.bench_with_input(BenchmarkId::new("peer_metadata/reencode/txs", txs), &block, |b, raw| {
            b.iter(|| {
                let mut block = Block::decode(raw.clone()).unwrap();
                peer_metadata(block.metadata.get_or_insert_with(Default::default));
                block.encode_to_vec().len()
            })
        });
        g.bench_with_input(BenchmarkId::new("peer_metadata/in_place/txs", txs), &block, |b, raw| {
            b.iter(|| with_block_metadata(raw, peer_metadata).unwrap().len())
        });
    }
    g.finish();
}

criterion_group!(benches, bench_block_path);
criterion_main!(benches);
