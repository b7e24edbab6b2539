//! Append and read throughput of the block store on the real fixture ledger (29 blocks, 3 MB, 735 transactions).
//! Append is measured with both sync policies; reads go through the files (recent-block cache disabled).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ferrofabric_block_store::{BlockStore, StoreOptions, SyncPolicy};
use ferrofabric_protoutil::records;

fn fixture_blocks() -> Vec<Bytes> {
    let base = std::env::var_os("FERROFABRIC_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"));
    let path = base.join("fabric-2.5/orderer-blocks.bin");
    let raw = Bytes::from(std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    records(raw).map(|r| r.unwrap().1).collect()
}

fn bench(c: &mut Criterion) {
    let blocks = fixture_blocks();
    let bytes: u64 = blocks.iter().map(|b| b.len() as u64).sum();
    let mut g = c.benchmark_group("block_store");
    g.throughput(Throughput::Bytes(bytes));
    g.sample_size(10);

    for (name, sync) in
        [("append_29_blocks_no_sync", SyncPolicy::None), ("append_29_blocks_sync", SyncPolicy::EveryBlock)]
    {
        g.bench_function(name, |b| {
            b.iter_batched(
                || tempfile::tempdir().unwrap(),
                |dir| {
                    let store = BlockStore::open(dir.path(), StoreOptions { sync, ..Default::default() }).unwrap();
                    for blk in &blocks {
                        store.append(blk.clone()).unwrap();
                    }
                    (store, dir)
                },
                BatchSize::PerIteration,
            )
        });
    }

    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions { sync: SyncPolicy::None, cache_blocks: 0, ..Default::default() };
    let store = BlockStore::open(dir.path(), opts).unwrap();
    for blk in &blocks {
        store.append(blk.clone()).unwrap();
    }
    g.bench_function("read_29_blocks", |b| b.iter(|| store.blocks(..).map(|r| r.unwrap().len()).sum::<usize>()));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
