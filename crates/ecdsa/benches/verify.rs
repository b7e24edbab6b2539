//! One core, one signature at a time: aws-lc's ECDSA P-256 verification against ours with the key's table cached,
//! ours for a key seen for the first time (the aws-lc path plus the cache's bookkeeping), and ours per signature
//! in a batch of 64 (one shared scalar inversion). The message is 1,500 bytes, a typical proposal response.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use aws_lc_rs::signature::{ParsedPublicKey, ECDSA_P256_SHA256_FIXED};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ferrofabric_ecdsa::{verify_batch, BatchItem, Signature, TableCache, VerifyingKey};
use p256::ecdsa::signature::Signer;

fn keypair(seed: u8) -> (p256::ecdsa::SigningKey, VerifyingKey) {
    let sk = p256::ecdsa::SigningKey::from_slice(&[seed; 32]).unwrap();
    let vk = VerifyingKey::from_sec1(sk.verifying_key().to_encoded_point(false).as_bytes()).unwrap();
    (sk, vk)
}

fn bench(c: &mut Criterion) {
    let (sk, key) = keypair(3);
    let msg = vec![0x5au8; 1500];
    let p256_sig: p256::ecdsa::Signature = sk.sign(&msg);
    let (r, s) = p256_sig.split_bytes();
    let sig = Signature::from_scalars(&r, &s).unwrap();
    let fixed = p256_sig.to_bytes();
    let aws = ParsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, key.sec1_bytes()).unwrap();

    let cache = TableCache::new(4);
    assert!(key.verify_with(&cache, &msg, &sig) && key.verify_with(&cache, &msg, &sig));
    assert_eq!(cache.len(), 1, "the second sighting admits the key");

    let mut g = c.benchmark_group("p256_verify");
    g.throughput(Throughput::Elements(1));
    g.bench_function("aws_lc", |b| b.iter(|| aws.verify_sig(black_box(&msg), black_box(&fixed)).unwrap()));
    g.bench_function("ours_cached_key", |b| b.iter(|| assert!(key.verify_with(&cache, black_box(&msg), &sig))));
    g.bench_function("ours_first_seen", |b| {
        b.iter_batched(
            || TableCache::new(4),
            |fresh| assert!(key.verify_with(&fresh, black_box(&msg), &sig)),
            BatchSize::SmallInput,
        )
    });
    g.finish();

    let sigs: Vec<(Vec<u8>, Signature)> = (0..64u8)
        .map(|i| {
            let m = vec![i; 1500];
            let s: p256::ecdsa::Signature = sk.sign(&m);
            let (r, sv) = s.split_bytes();
            (m, Signature::from_scalars(&r, &sv).unwrap())
        })
        .collect();
    let items: Vec<BatchItem<'_>> = sigs.iter().map(|(m, s)| BatchItem { key: &key, msg: m, sig: s }).collect();
    let mut g = c.benchmark_group("p256_verify_batch");
    g.throughput(Throughput::Elements(items.len() as u64));
    g.bench_function("ours_cached_key_64", |b| {
        b.iter(|| assert!(verify_batch(&cache, black_box(&items)).into_iter().all(|v| v)))
    });
    g.finish();

    let mut g = c.benchmark_group("p256_table");
    g.bench_function("build_one_key_table", |b| {
        b.iter_batched(
            || TableCache::new(4),
            |fresh| {
                key.verify_with(&fresh, &msg, &sig);
                key.verify_with(&fresh, &msg, &sig)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
