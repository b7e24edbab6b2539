//! Validator benchmarks (criterion):
//! * `replay/fabric-2.5-smallbank-10k`: the whole replay of the real 10,735-transaction Fabric 2.5.16 smallbank ledger
//!   (`../shared/fixtures/fabric-2.5-bench`), the side-by-side comparison with a Fabric 2.5.16 peer (2,900 tx/s here);
//! * `block100/threads=N`: one block of 100 testkit transactions (creator + 2 endorsements under a 2-of-2 policy,
//!   2 reads + 2 writes each), validated and committed with 1 and 2 rayon threads;
//! * `block100-attested/threads=N`: the same block committed with a trusted verifier's codes
//!   (`Validator::commit_block_attested`): the BMac host's work per hardware-path block, every check but the
//!   signatures, with MVCC and the commit.
//!
//! Run: `cargo bench -p ferrofabric-validator --bench validate`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use ferrofabric_protoutil::{read_ledger_file, records};
use ferrofabric_testkit::{Chain, Network, Workload, TRANSFER_CHAINCODE};
use ferrofabric_validator::{TxValidationCode, Validator, ValidatorOptions};
use prost::Message;

fn fixtures() -> PathBuf {
    std::env::var_os("FERROFABRIC_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"))
}

fn bench_replay(c: &mut Criterion) {
    let dir = fixtures();
    let genesis = Bytes::from(std::fs::read(dir.join("fabric-2.5/genesis.block")).expect("genesis.block"));
    let plain = read_ledger_file(dir.join("fabric-2.5-bench/fabric-2.5-smallbank-10k.bin.zst")).expect("bench ledger");
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
                v.last_block_number()
            })
        });
    }
    g.finish();
}

/// Transactions in the `block100` block.
const BLOCK_TXS: u64 = 100;

/// Genesis, the chain before the measured block (block 1: `transfer` definition under
/// `/Channel/Application/Endorsement`; block 2: accounts `0..200`, 100 per transaction) and the measured block 3:
/// 100 conflict-free transfers, each with the creator's signature, both peers' endorsements, 2 reads and 2 writes.
fn block100_chain() -> (Bytes, Vec<Bytes>, Bytes) {
    let net = Network::generate(11).expect("network");
    let mut chain = Chain::with_seed(&net, 11).expect("chain");
    let w = Workload::new(&net, 11);
    chain.append(&[w.define_chaincode(TRANSFER_CHAINCODE).expect("definition").envelope]);
    let init = w.transfer_init_txs(2 * BLOCK_TXS, BLOCK_TXS, 32).expect("accounts");
    chain.append(&init.into_iter().map(|b| b.envelope).collect::<Vec<_>>());
    // Account k was created by transaction k / 100 of block 2.
    let transfers = w.transfer_txs(BLOCK_TXS, 32, |k| Some((2, k / BLOCK_TXS))).expect("transfers");
    chain.append(&transfers.into_iter().map(|b| b.envelope).collect::<Vec<_>>());
    let mut blocks: Vec<Bytes> = chain.blocks().iter().map(|b| Bytes::from(b.encode_to_vec())).collect();
    let measured = blocks.pop().expect("block 3");
    let genesis = blocks.remove(0);
    (genesis, blocks, measured)
}

fn bench_block100(c: &mut Criterion) {
    let (genesis, pre, block) = block100_chain();
    let (genesis, pre) = (&genesis, &pre);
    let setup = |threads: usize| {
        move || {
            let mut v = Validator::new(genesis.clone(), ValidatorOptions { threads }).expect("genesis");
            for b in pre {
                v.commit_block(b.clone()).expect("setup block");
            }
            v
        }
    };
    // The measured block must be what it claims: 100 VALID transfers.
    let mut check = setup(1)();
    let codes = check.commit_block(block.clone()).expect("block 3").codes;
    assert_eq!(codes, vec![TxValidationCode::Valid; BLOCK_TXS as usize]);

    for attested in [false, true] {
        let mut g = c.benchmark_group(if attested { "block100-attested" } else { "block100" });
        g.sample_size(20).measurement_time(Duration::from_secs(10)).throughput(Throughput::Elements(BLOCK_TXS));
        for threads in [1usize, 2] {
            g.bench_with_input(BenchmarkId::new("threads", threads), &threads, |b, &threads| {
                b.iter_batched(
                    setup(threads),
                    |mut v| {
                        let r = if attested {
                            v.commit_block_attested(block.clone(), &codes)
                        } else {
                            v.commit_block(block.clone())
                        };
                        r.expect("block 3").codes.len()
                    },
                    BatchSize::LargeInput,
                )
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench_replay, bench_block100);
criterion_main!(benches);
