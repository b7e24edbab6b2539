//! ECDSA P-256 verification throughput with a pre-parsed key (the hot path
//! of endorsement and creator signature checks), plus the cached identity
//! lookup that precedes each verification.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ferrofabric_msp::{Msp, MspManager, SigningIdentity};

fn fixtures() -> PathBuf {
    std::env::var_os("FERROFABRIC_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"))
}

fn bench(c: &mut Criterion) {
    let org1 = fixtures().join("fabric-2.5/crypto/peerOrganizations/org1.example.com");
    let signer = SigningIdentity::from_msp_dir("Org1MSP", &org1.join("users/User1@org1.example.com/msp"))
        .expect("fixture User1 MSP directory");
    let mgr = MspManager::new(vec![Msp::from_msp_dir("Org1MSP", &org1.join("msp")).unwrap()]);
    let id = mgr.deserialize_identity(signer.serialized()).unwrap();
    // A typical proposal response payload size.
    let msg = vec![0x5au8; 1500];
    let sig = signer.sign(&msg);
    let key = id.public_key().clone();

    let mut g = c.benchmark_group("p256");
    g.throughput(Throughput::Elements(1));
    g.bench_function("verify_preparsed_key_1500B", |b| {
        b.iter(|| key.verify(std::hint::black_box(&msg), std::hint::black_box(&sig)).unwrap())
    });
    g.bench_function("cached_deserialize_identity", |b| {
        b.iter(|| mgr.deserialize_identity(std::hint::black_box(signer.serialized())).unwrap())
    });
    g.bench_function("sign_1500B", |b| b.iter(|| signer.sign(std::hint::black_box(&msg))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
