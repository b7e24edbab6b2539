//! The world state's two costs per block: applying a block's updates (new keys go into the hash table and the
//! ordered key index) and a range scan over the ordered index.
//!
//! `cargo bench -p ferrofabric-state --bench state`. Keys share a long prefix (`account-0000123456`), as
//! application keys usually do, which is what makes ordered-index comparisons cost.

#![allow(missing_docs)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrofabric_state::{Height, StateKey, Update, UpdateBatch, VersionedValue, WorldState};

/// Keys in the state before the measured blocks.
const PREFILLED: u64 = 200_000;
/// Updates per block.
const BLOCK: u64 = 100;

fn key(i: u64) -> StateKey {
    StateKey::public("smallbank", Bytes::from(format!("account-{i:010}")))
}

fn block(first: u64, number: u64) -> UpdateBatch {
    let mut b = UpdateBatch::new();
    for (t, i) in (first..first + BLOCK).enumerate() {
        let value = VersionedValue {
            value: Bytes::from_static(b"100"),
            metadata: Vec::new(),
            version: Height::new(number, t as u64),
        };
        b.put(key(i), Update::Put(value));
    }
    b
}

fn prefilled() -> WorldState {
    let state = WorldState::new();
    for n in 0..PREFILLED / BLOCK {
        state.apply(n, &block(n * BLOCK, n));
    }
    state
}

fn bench_state(c: &mut Criterion) {
    let mut g = c.benchmark_group("state");
    g.throughput(Throughput::Elements(BLOCK));
    g.bench_function("apply a block of 100 new keys", |b| {
        let state = prefilled();
        let mut next = PREFILLED / BLOCK;
        b.iter_custom(|iters| {
            let blocks: Vec<UpdateBatch> = (0..iters).map(|k| block((next + k) * BLOCK, next + k)).collect();
            let started = Instant::now();
            for (k, b) in blocks.iter().enumerate() {
                state.apply(next + k as u64, b);
            }
            next += iters;
            started.elapsed()
        });
    });
    g.bench_function("range scan of 100 keys", |b| {
        let state = prefilled();
        let mut at = 0u64;
        b.iter(|| {
            let (lo, hi) = (key(at).key, key(at + BLOCK).key);
            at = (at + 7_919) % (PREFILLED - BLOCK);
            state.view().range("smallbank", &lo, &hi)
        });
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = bench_state
}
criterion_main!(benches);
