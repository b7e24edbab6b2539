//! The BMac protocol on the real Fabric 2.5 fixture ledger: every section survives the datagram round trip, the
//! decoder (the protocol processor's reference model) puts back the exact envelope bytes and derives the hashes,
//! signatures and read/write sets that Fabric validates. Also measures the protocol's bytes against protobuf's.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support::*;
use bytes::Bytes;
use ferrofabric_arena::BlockArena;
use ferrofabric_bmac::wire::{Section, SectionType};
use ferrofabric_bmac::{Decoder, HostSession, Route};
use ferrofabric_protos::common::Metadata;
use ferrofabric_protoutil::block_header_bytes;
use prost::Message;
use sha2::{Digest, Sha256};

/// A key and the version it was read at.
type KeyVersion = (Vec<u8>, Option<(u64, u64)>);

struct Run {
    hardware_blocks: Vec<u64>,
    host_blocks: Vec<(u64, String)>,
    wire_bytes: usize,
    protobuf_bytes: usize,
    /// Per hardware-path block: protobuf bytes / wire bytes.
    ratios: Vec<f64>,
    checked_txs: usize,
}

/// Replays the fixture through a host session, checking every hardware-path block's sections with the decoder.
fn replay_fixture() -> Run {
    let blocks = fixture_blocks();
    let genesis = read_fixture("genesis.block");
    assert_eq!(blocks[0], genesis);
    let mut host = HostSession::new(genesis).unwrap();
    let mut dec = Decoder::new();
    let mut run = Run {
        hardware_blocks: vec![],
        host_blocks: vec![],
        wire_bytes: 0,
        protobuf_bytes: 0,
        ratios: vec![],
        checked_txs: 0,
    };
    for raw in &blocks[1..] {
        let prepared = host.prepare(raw).unwrap();
        let host_path = match &prepared.route {
            Route::Hardware(sections) => {
                run.hardware_blocks.push(prepared.number);
                run.protobuf_bytes += raw.len();
                let mut block_wire = 0;
                for s in sections {
                    let frame = s.to_frame().unwrap();
                    run.wire_bytes += frame.len();
                    block_wire += frame.len();
                    assert_eq!(&Section::from_frame(&frame).unwrap(), s);
                }
                run.ratios.push(raw.len() as f64 / block_wire as f64);
                run.checked_txs += check_block(&mut dec, raw, sections);
                false
            }
            Route::Host(reason) => {
                run.host_blocks.push((prepared.number, reason.clone()));
                true
            }
        };
        let (_, sync) = host.commit(raw.clone(), host_path).unwrap();
        for s in &sync {
            let frame = s.to_frame().unwrap();
            assert_eq!(&Section::from_frame(&frame).unwrap(), s);
            dec.decode(s).unwrap();
        }
        if host_path {
            assert!(sync.iter().all(|s| matches!(s.header.section_type, SectionType::StateSync | SectionType::IdSync)));
        }
    }
    run
}

/// Decodes one block's sections and compares them with the block. Returns the number of txs checked.
fn check_block(dec: &mut Decoder, raw: &Bytes, sections: &[Section]) -> usize {
    let arena = BlockArena::decode(raw.clone()).unwrap();
    let mut txs = 0;
    for s in sections {
        let Some(d) = dec.decode(s).unwrap() else {
            if s.header.section_type == SectionType::Header {
                assert_eq!(s.payload.as_ref(), block_header_bytes(arena.header()).as_slice());
                assert_eq!(usize::from(s.header.index), arena.txs().len());
            }
            continue;
        };
        match d.section_type {
            SectionType::Metadata => {
                let md = Metadata::decode(arena.metadata().metadata[0].clone()).unwrap();
                let sig = &md.signatures[0];
                let mut h = Sha256::new();
                h.update(&md.value);
                h.update(&sig.signature_header);
                h.update(block_header_bytes(arena.header()));
                let want: [u8; 32] = h.finalize().into();
                assert_eq!(d.slots[0].digest, Some(want), "block {} signed bytes", arena.number());
                assert_eq!(d.slots[0].signature.as_ref(), Some(&sig.signature));
                assert!(d.slots[0].signer.is_some(), "the orderer identity is cached");
            }
            SectionType::Tx => {
                txs += 1;
                let tx = &arena.txs()[usize::from(d.index)];
                let env = tx.envelope_bytes();
                assert_eq!(&d.payload[..env.len()], env.as_ref(), "tx {} reconstructed", d.index);
                assert_eq!(d.last, usize::from(d.index) + 1 == arena.txs().len());
                let info = d.tx_info();
                if info.pre_code != 0 || info.post_code != 0 {
                    assert!(d.reads.is_empty() && d.writes.is_empty());
                    continue;
                }
                let envelope = tx.envelope().unwrap();
                let e0: [u8; 32] = Sha256::digest(&envelope.payload).into();
                assert_eq!(d.slots[0].digest, Some(e0));
                assert_eq!(d.slots[0].signature.as_ref(), Some(&envelope.signature));
                let creator = &tx.signature_header().unwrap().creator;
                let cid = d.slots[0].signer.expect("creator cached");
                assert_eq!(&dec.cached(cid).unwrap().bytes, creator);
                let act = tx.action().unwrap();
                let endorsed = act.payload.action.as_ref().unwrap();
                for (j, e) in endorsed.endorsements.iter().enumerate() {
                    let mut h = Sha256::new();
                    h.update(&endorsed.proposal_response_payload);
                    h.update(&e.endorser);
                    let want: [u8; 32] = h.finalize().into();
                    assert_eq!(d.slots[1 + j].digest, Some(want), "tx {} endorsement {j}", d.index);
                    assert_eq!(d.slots[1 + j].signature.as_ref(), Some(&e.signature));
                }
                // Reads in MVCC order with their versions; writes one per distinct key.
                let rwset = tx.rwset().unwrap();
                let want_reads: Vec<KeyVersion> = rwset
                    .iter()
                    .flat_map(|ns| ns.kv.reads.iter())
                    .map(|r| (r.key.as_bytes().to_vec(), r.version.as_ref().map(|v| (v.block_num, v.tx_num))))
                    .collect();
                let got_reads: Vec<KeyVersion> = d.reads.iter().map(|r| (r.key.to_vec(), r.version)).collect();
                assert_eq!(got_reads, want_reads, "tx {} reads", d.index);
                let seqs: Vec<u8> = d.reads.iter().map(|r| r.seq).collect();
                assert!(seqs.windows(2).all(|w| w[0] < w[1]));
                let mut want_writes: Vec<(Vec<u8>, bool)> = rwset
                    .iter()
                    .flat_map(|ns| ns.kv.writes.iter())
                    .map(|w| (w.key.as_bytes().to_vec(), w.is_delete))
                    .collect();
                want_writes.sort();
                want_writes.dedup_by(|a, b| a.0 == b.0);
                let mut got_writes: Vec<(Vec<u8>, bool)> =
                    d.writes.iter().map(|w| (w.key.to_vec(), w.delete)).collect();
                got_writes.sort();
                assert_eq!(got_writes, want_writes, "tx {} writes", d.index);
            }
            other => panic!("unexpected section {other:?} in a block"),
        }
    }
    txs
}

#[test]
fn fixture_sections_decode_to_the_fabric_block_and_are_smaller_than_protobuf() {
    let run = replay_fixture();
    eprintln!("hardware-path blocks: {:?}", run.hardware_blocks);
    for (n, why) in &run.host_blocks {
        eprintln!("host-path block {n}: {why}");
    }
    let ratio = run.protobuf_bytes as f64 / run.wire_bytes as f64;
    eprintln!(
        "protocol: {} wire bytes (incl. Ethernet/IP/UDP headers and identity-cache fills) for {} protobuf bytes: {ratio:.2}x smaller",
        run.wire_bytes, run.protobuf_bytes
    );
    let (lo, hi) = run.ratios.iter().fold((f64::MAX, 0f64), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    eprintln!("per block: {lo:.2}x to {hi:.2}x smaller");
    // Blocks 1-6 are lifecycle blocks; every smallbank/transfer block after them is hardware-path.
    assert!(run.hardware_blocks.len() >= 18, "{:?}", run.host_blocks);
    assert!(run.checked_txs >= 700);
    assert!(ratio > 3.0, "{ratio}");
}
