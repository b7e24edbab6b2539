//! Block assembly and signing throughput through `ferrofabric-protoutil`, the path every orderer block takes
//! (solo and Raft: `next_header` → `sign_and_encode` with the orderer's MSP key):
//! * `block_path/assemble+sign/txs=N`: header (data hash over N envelopes), SIGNATURES value, one ECDSA P-256
//!   signature over value ‖ signature header ‖ DER(header), metadata and marshaling, for blocks of the fixture's
//!   envelopes;
//! * `block_path/data_hash/txs=N`: the data hash alone.
//!
//! Run: `cargo bench -p ferrofabric-benches --bench block_path`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::Block;
use ferrofabric_protoutil::{
    block_data_hash, block_header_hash, next_header, read_ledger_file, records, sign_and_encode,
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
    }
    g.finish();
}

criterion_group!(benches, bench_block_path);
criterion_main!(benches);
