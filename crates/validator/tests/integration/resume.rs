//! `Validator::resume`: a validator resumed from the state after block k (plus the peer's stored blocks 0..=k) must
//! decide every later block of the real Fabric 2.5 fixture ledger exactly as one that validated from block 0, and a
//! resume point that does not belong to the chain must be refused.

#![allow(clippy::unwrap_used)]

use bytes::Bytes;
use ferrofabric_arena::BlockArena;
use ferrofabric_protoutil::block_header_hash;
use ferrofabric_state::{Update, UpdateBatch, WorldState};
use ferrofabric_testkit::fabric_fixture;
use ferrofabric_validator::{ResumePoint, Validator, ValidatorOptions};

fn fixture(name: &str) -> Bytes {
    Bytes::from(std::fs::read(fabric_fixture(name)).unwrap())
}

fn records(name: &str) -> Vec<Bytes> {
    ferrofabric_protoutil::records(fixture(name)).map(|r| r.unwrap().1).collect()
}

/// A copy of the validator's state, as a checkpoint file would restore it.
fn copy_state(v: &Validator) -> WorldState {
    let view = v.state().view();
    let mut batch = UpdateBatch::new();
    for (k, val) in view.entries() {
        batch.put(k, Update::Put(val));
    }
    let state = WorldState::new();
    state.apply(view.last_block().unwrap(), &batch);
    state
}

fn resume_point(v: &Validator, peer_blocks: &[Bytes]) -> ResumePoint {
    let k = v.last_block_number() as usize;
    let header_hash = block_header_hash(BlockArena::decode(peer_blocks[k].clone()).unwrap().header());
    let mut point = ResumePoint::new(copy_state(v), v.commit_hash(), header_hash);
    for b in &peer_blocks[..=k] {
        point.add_committed_block(b.clone()).unwrap();
    }
    point
}

#[test]
fn resumed_at_every_block_decides_the_rest_of_the_fixture_ledger_as_a_full_run() {
    let orderer_blocks = records("orderer-blocks.bin");
    let peer_blocks = records("peer-blocks.bin");
    let options = || ValidatorOptions { threads: 2 };
    let mut full = Validator::new(fixture("genesis.block"), options()).unwrap();
    let expected: Vec<_> = orderer_blocks[1..]
        .iter()
        .map(|b| {
            let r = full.commit_block(b.clone()).unwrap();
            (r.codes, r.commit_hash)
        })
        .collect();
    assert!(expected.len() > 10, "the fixture ledger has its blocks");

    let mut at = Validator::new(fixture("genesis.block"), options()).unwrap();
    for k in 1..orderer_blocks.len() - 1 {
        at.commit_block(orderer_blocks[k].clone()).unwrap();
        let mut resumed = Validator::resume(resume_point(&at, &peer_blocks), options()).unwrap();
        assert_eq!(resumed.last_block_number(), k as u64);
        assert_eq!(resumed.commit_hash(), at.commit_hash());
        for (i, b) in orderer_blocks.iter().enumerate().skip(k + 1) {
            let r = resumed.commit_block(b.clone()).unwrap();
            assert_eq!((r.codes, r.commit_hash), expected[i - 1], "resumed at {k}, block {i}");
        }
    }
}

#[test]
fn a_checkpoint_of_another_chain_or_height_is_refused() {
    let orderer_blocks = records("orderer-blocks.bin");
    let peer_blocks = records("peer-blocks.bin");
    let mut v = Validator::new(fixture("genesis.block"), ValidatorOptions::default()).unwrap();
    for b in &orderer_blocks[1..6] {
        v.commit_block(b.clone()).unwrap();
    }
    let hash5 = block_header_hash(BlockArena::decode(peer_blocks[5].clone()).unwrap().header());

    // Header hash of another block.
    let mut wrong_hash = ResumePoint::new(copy_state(&v), v.commit_hash(), [7; 32]);
    peer_blocks[..=5].iter().for_each(|b| wrong_hash.add_committed_block(b.clone()).unwrap());
    assert!(Validator::resume(wrong_hash, ValidatorOptions::default()).is_err());

    // The state of block 5 with the blocks up to 6.
    let mut too_many = ResumePoint::new(copy_state(&v), v.commit_hash(), hash5);
    peer_blocks[..=6].iter().for_each(|b| too_many.add_committed_block(b.clone()).unwrap());
    assert!(Validator::resume(too_many, ValidatorOptions::default()).is_err());

    // Blocks that skip one, or do not start at block 0.
    let mut gap = ResumePoint::new(copy_state(&v), v.commit_hash(), hash5);
    gap.add_committed_block(peer_blocks[0].clone()).unwrap();
    assert!(gap.add_committed_block(peer_blocks[2].clone()).is_err());
    let mut late = ResumePoint::new(copy_state(&v), v.commit_hash(), hash5);
    assert!(late.add_committed_block(peer_blocks[1].clone()).is_err());

    // No blocks at all.
    let empty = ResumePoint::new(copy_state(&v), v.commit_hash(), hash5);
    assert!(Validator::resume(empty, ValidatorOptions::default()).is_err());

    // The right point resumes.
    let mut right = ResumePoint::new(copy_state(&v), v.commit_hash(), hash5);
    peer_blocks[..=5].iter().for_each(|b| right.add_committed_block(b.clone()).unwrap());
    let mut resumed = Validator::resume(right, ValidatorOptions::default()).unwrap();
    let r = resumed.commit_block(orderer_blocks[6].clone()).unwrap();
    assert_eq!(r.commit_hash, v.commit_block(orderer_blocks[6].clone()).unwrap().commit_hash);
}
