//! Validation of the fixture ledger's blocks through the validator (the committer's hot path), read through the
//! one ledger-file reader of `ferrofabric-protoutil`:
//! * `validate_fixture/next-block/threads=N`: the Fabric 2.5.16 fixture chain (`fabric-2.5/orderer-blocks.bin`)
//!   is committed up to its largest block, which is then validated and committed (signatures, policies, MVCC,
//!   state update) with 1 and 2 rayon threads.
//!
//! Run: `cargo bench -p ferrofabric-benches --bench validate_fixture`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use ferrofabric_arena::BlockArena;
use ferrofabric_protoutil::{read_ledger_file, records};
use ferrofabric_validator::{Validator, ValidatorOptions};

fn fixtures() -> PathBuf {
    std::env::var_os("FERROFABRIC_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures"))
}

fn bench_validate(c: &mut Criterion) {
    let file = read_ledger_file(fixtures().join("fabric-2.5/orderer-blocks.bin")).expect("orderer-blocks.bin");
    let blocks: Vec<Bytes> = records(file).map(|r| r.expect("record").1).collect();
    let (measured, _) = blocks
        .iter()
        .enumerate()
        .skip(1)
        .map(|(i, b)| (i, BlockArena::decode(b.clone()).expect("block").txs().len()))
        .max_by_key(|(_, n)| *n)
        .expect("a block after genesis");
    let txs = BlockArena::decode(blocks[measured].clone()).expect("block").txs().len() as u64;
    let (genesis, pre, block) = (&blocks[0], &blocks[1..measured], &blocks[measured]);
    let mut g = c.benchmark_group("validate_fixture");
    g.sample_size(20).throughput(Throughput::Elements(txs));
    for threads in [1usize, 2] {
        g.bench_with_input(BenchmarkId::new("next-block/threads", threads), &threads, |b, &threads| {
            b.iter_batched(
                || {
                    let mut v = Validator::new(genesis.clone(), ValidatorOptions { threads }).expect("genesis");
                    for raw in pre {
                        v.commit_block(raw.clone()).expect("setup block");
                    }
                    v
                },
                |mut v| v.commit_block(block.clone()).expect("measured block").transactions_filter().len(),
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench_validate);
criterion_main!(benches);
