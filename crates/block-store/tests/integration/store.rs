//! Block store behaviour on the real Fabric 2.5 fixture ledger: append, reopen, byte-identical reads, txid index,
//! refusal of blocks that do not extend the chain, file rollover, waiting for blocks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::*;
use bytes::Bytes;
use ferrofabric_block_store::{BlockStore, RecoveryReport, StoreError, StoreOptions, SyncPolicy};
use ferrofabric_testkit::fabric_fixture;

fn open(dir: &std::path::Path) -> BlockStore {
    BlockStore::open(dir, StoreOptions::default()).unwrap()
}

fn file_size(dir: &std::path::Path) -> u64 {
    block_files(dir).iter().map(|p| std::fs::metadata(p).unwrap().len()).sum()
}

#[test]
fn appends_all_fixture_blocks_and_reads_them_back_byte_identical_after_reopen() {
    let blocks = orderer_blocks();
    let tmp = tempfile::tempdir().unwrap();
    {
        let store = open(tmp.path());
        assert_eq!(store.height(), 0);
        assert_eq!(store.last_header_hash(), None);
        assert_eq!(store.block(0).unwrap(), None);
        for (i, b) in blocks.iter().enumerate() {
            store.append(b.clone()).unwrap();
            assert_eq!(store.height(), i as u64 + 1);
        }
    }
    let store = open(tmp.path());
    assert_eq!(store.recovery(), &RecoveryReport::default(), "a clean shutdown needs no repair");
    assert_eq!(store.height(), 29);
    let expected_tip = expected()["blocks"][28]["header_hash"].as_str().unwrap().to_string();
    assert_eq!(hex::encode(store.last_header_hash().unwrap()), expected_tip);
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!(store.block(i as u64).unwrap().as_ref(), Some(b), "block {i}");
    }
    assert_eq!(store.block(29).unwrap(), None);
    let all: Vec<Bytes> = store.blocks(..).collect::<Result<_, _>>().unwrap();
    assert_eq!(all, blocks);
    let some: Vec<Bytes> = store.blocks(5..=7).collect::<Result<_, _>>().unwrap();
    assert_eq!(some, blocks[5..8].to_vec());
    assert_eq!(store.blocks(27..100).count(), 2, "ranges are clipped to the height");
    // The files hold exactly the fixture's records.
    let on_disk: Vec<u8> = block_files(tmp.path()).iter().flat_map(|p| std::fs::read(p).unwrap()).collect();
    assert_eq!(on_disk, std::fs::read(fabric_fixture("orderer-blocks.bin")).unwrap());
}

#[test]
fn reads_bypass_the_recent_block_cache_when_disabled() {
    let blocks = orderer_blocks();
    let tmp = tempfile::tempdir().unwrap();
    let store =
        BlockStore::open(tmp.path(), StoreOptions { cache_blocks: 0, sync: SyncPolicy::None, ..Default::default() })
            .unwrap();
    for b in &blocks[..12] {
        store.append(b.clone()).unwrap();
    }
    for (i, b) in blocks[..12].iter().enumerate() {
        assert_eq!(store.block(i as u64).unwrap().as_ref(), Some(b));
    }
}

#[test]
fn txid_lookups_match_the_fixture_first_occurrence_wins() {
    let blocks = orderer_blocks();
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    for b in &blocks {
        store.append(b.clone()).unwrap();
    }
    let exp = expected();
    let mut first: HashMap<String, (u64, u32)> = HashMap::new();
    let mut duplicates = 0;
    for b in exp["blocks"].as_array().unwrap() {
        for t in b["txs"].as_array().unwrap() {
            let txid = t["txid"].as_str().unwrap().to_string();
            let at = (b["number"].as_u64().unwrap(), t["index"].as_u64().unwrap() as u32);
            match first.entry(txid) {
                std::collections::hash_map::Entry::Occupied(_) => duplicates += 1,
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(at);
                }
            }
        }
    }
    assert_eq!(duplicates, 2, "the fixture duplicates one txid in block 18 and again in block 23");
    for (txid, at) in &first {
        assert_eq!(store.tx_location(txid).unwrap(), Some(*at), "txid {txid}");
    }
    let tx1 = exp["blocks"][1]["txs"][0]["txid"].as_str().unwrap();
    assert_eq!(store.tx_location(tx1).unwrap(), Some((1, 0)));
    let dup = exp["blocks"][23]["txs"][0]["txid"].as_str().unwrap();
    assert_eq!(store.tx_location(dup).unwrap(), Some((18, 0)), "duplicates keep the first location");
    assert_eq!(store.tx_location("no-such-txid").unwrap(), None);
    drop(store);
    let store = open(tmp.path());
    assert_eq!(store.tx_location(tx1).unwrap(), Some((1, 0)), "the index survives a reopen");
}

/// Every block is found by the SHA-256 of its header (Fabric's block-hash index, qscc's `GetBlockByHash`), after a
/// reopen too; a hash no block has, of any length, finds nothing.
#[test]
fn block_hash_lookups_find_every_block_after_reopen() {
    use ferrofabric_protos::common::Block;
    use prost::Message;
    let blocks = orderer_blocks();
    let tmp = tempfile::tempdir().unwrap();
    {
        let store = open(tmp.path());
        for b in &blocks {
            store.append(b.clone()).unwrap();
        }
    }
    let store = open(tmp.path());
    for (n, raw) in blocks.iter().enumerate() {
        let header = Block::decode(raw.clone()).unwrap().header.unwrap();
        let hash = ferrofabric_protoutil::block_header_hash(&header);
        assert_eq!(store.block_number_by_hash(&hash).unwrap(), Some(n as u64), "block {n}");
    }
    assert_eq!(store.block_number_by_hash(&[7u8; 32]).unwrap(), None);
    assert_eq!(store.block_number_by_hash(b"a39044c5").unwrap(), None, "hex text is not a hash");
}

#[test]
fn a_block_number_only_index_serves_blocks_but_no_txids() {
    let blocks = orderer_blocks();
    let exp = expected();
    let tx1 = exp["blocks"][1]["txs"][0]["txid"].as_str().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let options = StoreOptions { index_txids: false, ..Default::default() };
    let store = BlockStore::open(tmp.path(), options.clone()).unwrap();
    for b in &blocks {
        store.append(b.clone()).unwrap();
    }
    assert_eq!(store.tx_location(tx1).unwrap(), None);
    drop(store);
    let store = BlockStore::open(tmp.path(), options).unwrap();
    assert_eq!(store.height(), blocks.len() as u64);
    for (i, b) in blocks.iter().enumerate() {
        assert_eq!(store.block(i as u64).unwrap().as_ref(), Some(b));
    }
    assert_eq!(store.tx_location(tx1).unwrap(), None);
}

#[test]
fn out_of_order_blocks_are_refused_and_nothing_is_written() {
    let blocks = orderer_blocks();
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    let err = store.append(blocks[1].clone()).unwrap_err();
    assert!(matches!(err, StoreError::OutOfOrder { expected: 0, got: 1 }), "{err}");
    store.append(blocks[0].clone()).unwrap();
    store.append(blocks[1].clone()).unwrap();
    let size = file_size(tmp.path());
    let err = store.append(blocks[3].clone()).unwrap_err();
    assert!(matches!(err, StoreError::OutOfOrder { expected: 2, got: 3 }), "{err}");
    assert_eq!(err.to_string(), "block number should have been 2 but was 3");
    let err = store.append(blocks[1].clone()).unwrap_err();
    assert!(matches!(err, StoreError::OutOfOrder { expected: 2, got: 1 }), "{err}");
    assert_eq!(store.height(), 2);
    assert_eq!(file_size(tmp.path()), size, "refused blocks leave the files untouched");
    store.append(blocks[2].clone()).unwrap();
    assert_eq!(store.height(), 3);
}

#[test]
fn wrong_previous_hash_is_refused_and_nothing_is_written() {
    let blocks = orderer_blocks();
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    store.append(blocks[0].clone()).unwrap();
    store.append(blocks[1].clone()).unwrap();
    let size = file_size(tmp.path());
    let forged = edit(&blocks[2], |b| {
        let h = b.header.as_mut().unwrap();
        let mut p = h.previous_hash.to_vec();
        p[0] ^= 1;
        h.previous_hash = p.into();
    });
    let err = store.append(forged).unwrap_err();
    assert!(matches!(err, StoreError::PreviousHashMismatch { number: 2, .. }), "{err}");
    assert!(err.to_string().contains(&hex::encode(header_hash(&blocks[1]))), "message names the expected hash: {err}");
    // A block 0 with any previous hash is refused too.
    let tmp0 = tempfile::tempdir().unwrap();
    let empty = open(tmp0.path());
    let err = empty.append(synthetic_block(0, &[7; 32], 1, 16)).unwrap_err();
    assert!(matches!(err, StoreError::PreviousHashMismatch { number: 0, .. }), "{err}");
    assert_eq!(store.height(), 2);
    assert_eq!(file_size(tmp.path()), size);
}

#[test]
fn data_hash_is_left_to_a_writer_that_turned_its_check_off() {
    let blocks = orderer_blocks();
    let tmp = tempfile::tempdir().unwrap();
    let store =
        BlockStore::open(tmp.path(), StoreOptions { verify_data_hash: false, ..StoreOptions::default() }).unwrap();
    store.append(blocks[0].clone()).unwrap();
    let tampered = edit(&blocks[1], |b| {
        let d = &mut b.data.as_mut().unwrap().data;
        let mut env = d[0].to_vec();
        env.push(0);
        d[0] = env.into();
    });
    store.append(tampered.clone()).unwrap();
    assert_eq!(store.block(1).unwrap(), Some(tampered), "stored as given");
    // The chain itself is still checked.
    let err = store.append(blocks[1].clone()).unwrap_err();
    assert!(matches!(err, StoreError::OutOfOrder { expected: 2, got: 1 }), "{err}");
}

#[test]
fn wrong_data_hash_and_undecodable_bytes_are_refused() {
    let blocks = orderer_blocks();
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    store.append(blocks[0].clone()).unwrap();
    let tampered = edit(&blocks[1], |b| {
        let d = &mut b.data.as_mut().unwrap().data;
        let mut env = d[0].to_vec();
        let last = env.len() - 1;
        env[last] ^= 1;
        d[0] = env.into();
    });
    let err = store.append(tampered).unwrap_err();
    assert!(matches!(err, StoreError::DataHashMismatch { number: 1, .. }), "{err}");
    let err = store.append(Bytes::from_static(b"\xff\xff\xff not a block")).unwrap_err();
    assert!(matches!(err, StoreError::InvalidBlock(_)), "{err}");
    let err = store.append(Bytes::new()).unwrap_err();
    assert!(matches!(err, StoreError::InvalidBlock(_)), "an empty message has no header: {err}");
    assert_eq!(store.height(), 1);
    assert_eq!(file_size(tmp.path()), record_len(&blocks[0]));
}

#[test]
fn blocks_roll_over_to_a_new_file_at_max_file_size() {
    let blocks = orderer_blocks();
    let tmp = tempfile::tempdir().unwrap();
    let max = 300_000;
    let opts = StoreOptions { max_file_size: max, ..Default::default() };
    {
        let store = BlockStore::open(tmp.path(), opts.clone()).unwrap();
        for b in &blocks {
            store.append(b.clone()).unwrap();
        }
    }
    let files = block_files(tmp.path());
    assert!(files.len() > 3, "3 MB of blocks in 300 kB files: {files:?}");
    for f in &files {
        let len = std::fs::metadata(f).unwrap().len();
        let single = blocks.iter().any(|b| record_len(b) == len);
        assert!(len <= max || single, "{} is {len} bytes", f.display());
    }
    assert!(files[1].ends_with("blocks/blockfile_000001"));
    let store = BlockStore::open(tmp.path(), opts).unwrap();
    assert_eq!(store.recovery(), &RecoveryReport::default());
    let all: Vec<Bytes> = store.blocks(..).collect::<Result<_, _>>().unwrap();
    assert_eq!(all, blocks);
}

#[test]
fn damaged_middle_file_is_reported_on_read_with_path_and_offset() {
    let blocks = orderer_blocks();
    let tmp = tempfile::tempdir().unwrap();
    let opts = StoreOptions { max_file_size: 300_000, cache_blocks: 0, ..Default::default() };
    {
        let store = BlockStore::open(tmp.path(), opts.clone()).unwrap();
        for b in &blocks {
            store.append(b.clone()).unwrap();
        }
    }
    // Cut the first file after block 0's record: block 1 is now missing from the middle of the chain.
    let first = &block_files(tmp.path())[0];
    std::fs::OpenOptions::new().write(true).open(first).unwrap().set_len(record_len(&blocks[0]) + 10).unwrap();
    let store = BlockStore::open(tmp.path(), opts).unwrap();
    assert_eq!(store.height(), 29, "the tip is intact, so open does not rescan old files");
    assert_eq!(store.block(0).unwrap().as_ref(), Some(&blocks[0]));
    match store.block(1).unwrap_err() {
        StoreError::CorruptRecord { path, offset, reason } => {
            assert_eq!(&path, first);
            assert_eq!(offset, record_len(&blocks[0]));
            assert!(reason.contains("file ends"), "{reason}");
        }
        e => panic!("unexpected error {e}"),
    }
    let mut it = store.blocks(..);
    assert!(it.next().unwrap().is_ok());
    assert!(it.next().unwrap().is_err());
    assert!(it.next().is_none(), "the iterator ends after an error");
}

#[test]
fn second_open_of_the_same_directory_fails_while_the_first_is_open() {
    let tmp = tempfile::tempdir().unwrap();
    let store = open(tmp.path());
    let err = BlockStore::open(tmp.path(), StoreOptions::default()).unwrap_err();
    assert!(matches!(err, StoreError::Index { .. }), "{err}");
    drop(store);
    open(tmp.path());
}

#[test]
fn wait_for_resolves_when_the_block_is_appended() {
    let blocks = orderer_blocks();
    let tmp = tempfile::tempdir().unwrap();
    let store = Arc::new(open(tmp.path()));
    store.append(blocks[0].clone()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    rt.block_on(async {
        // Already present: immediate.
        assert_eq!(store.wait_for(0).await.unwrap(), 1);
        // Not yet present: must still be pending after a while.
        let pending = tokio::time::timeout(Duration::from_millis(50), store.wait_for(3)).await;
        assert!(pending.is_err(), "block 3 is not stored yet");

        let mut rx = store.subscribe();
        assert_eq!(*rx.borrow_and_update(), 1);
        let writer = {
            let store = store.clone();
            let blocks = blocks.clone();
            std::thread::spawn(move || {
                for b in &blocks[1..5] {
                    std::thread::sleep(Duration::from_millis(10));
                    store.append(b.clone()).unwrap();
                }
            })
        };
        let h = tokio::time::timeout(Duration::from_secs(10), store.wait_for(3)).await.unwrap().unwrap();
        assert!(h >= 4, "height {h} includes block 3");
        assert_eq!(store.block(3).unwrap().as_ref(), Some(&blocks[3]), "the block is readable once signalled");
        rx.changed().await.unwrap();
        assert!(*rx.borrow() >= 2);
        writer.join().unwrap();
    });
}
