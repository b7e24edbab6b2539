//! Block hashing, cutting and signing against the fixture orderer's blocks.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support::*;
use bytes::Bytes;
use ferrofabric_protos::common::{Block, BlockHeader, Metadata, OrdererBlockMetadata, SignatureHeader};
use ferrofabric_protos::msp::SerializedIdentity;
use ferrofabric_protoutil::{block_header_bytes, block_header_hash};
use ferrofabric_testkit::fabric_fixture;
use ferrofabric_testkit::{block_data_hash, BlockBuilder, Chain, SigningIdentity, Workload, SIGNATURES};
use p256::ecdsa::signature::Verifier;
use prost::Message;

fn expected() -> serde_json::Value {
    serde_json::from_slice(&read_fixture("expected.json")).unwrap()
}

fn fixture_orderer() -> SigningIdentity {
    let msp = fabric_fixture("crypto/ordererOrganizations/example.com/orderers/orderer.example.com/msp");
    let cert = std::fs::read(msp.join("signcerts/orderer.example.com-cert.pem")).unwrap();
    let key = std::fs::read(msp.join("keystore/priv_sk")).unwrap();
    SigningIdentity::from_pem("OrdererMSP", &cert, &key).unwrap()
}

/// Verifies the single orderer signature of a block with the signer's
/// certificate key, over value ‖ signature_header ‖ header DER.
fn block_signature_verifies(block: &Block) -> bool {
    let meta = Metadata::decode(block.metadata.as_ref().unwrap().metadata[SIGNATURES].clone()).unwrap();
    let sig = &meta.signatures[0];
    let sh = SignatureHeader::decode(sig.signature_header.clone()).unwrap();
    let sid = SerializedIdentity::decode(sh.creator).unwrap();
    let cert = <x509_cert::Certificate as der::DecodePem>::from_pem(&sid.id_bytes).unwrap();
    let point = cert.tbs_certificate.subject_public_key_info.subject_public_key.raw_bytes().to_vec();
    let vk = p256::ecdsa::VerifyingKey::from_sec1_bytes(&point).unwrap();
    let msg = [meta.value.as_ref(), sig.signature_header.as_ref(), &block_header_bytes(block.header.as_ref().unwrap())]
        .concat();
    match p256::ecdsa::Signature::from_der(&sig.signature) {
        Ok(s) => vk.verify(&msg, &s).is_ok(),
        Err(_) => false,
    }
}

#[test]
fn header_hash_and_data_hash_match_fixture() {
    let blocks = fixture_blocks();
    let exp = expected();
    let exp_blocks = exp["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), exp_blocks.len());
    for (i, (b, e)) in blocks.iter().zip(exp_blocks).enumerate() {
        let h = b.header.as_ref().unwrap();
        assert_eq!(hex::encode(block_header_hash(h)), e["header_hash"].as_str().unwrap(), "block {i}");
        assert_eq!(
            hex::encode(block_data_hash(&b.data.as_ref().unwrap().data)),
            e["data_hash"].as_str().unwrap(),
            "block {i}"
        );
        if i > 0 {
            let prev = blocks[i - 1].header.as_ref().unwrap();
            assert_eq!(h.previous_hash.as_ref(), block_header_hash(prev).as_slice());
        }
    }
}

/// The header DER that BlockBuilder signs and chains with (the arena's) at
/// the number and length edges Go's `asn1` handles specially.
#[test]
fn header_der_encodes_large_numbers_like_go_asn1() {
    let h = |number| BlockHeader { number, previous_hash: Bytes::new(), data_hash: Bytes::from_static(&[1, 2]) };
    assert_eq!(block_header_bytes(&h(0)), [0x30, 0x09, 0x02, 0x01, 0x00, 0x04, 0x00, 0x04, 0x02, 1, 2]);
    // 128 needs a leading zero to stay positive.
    assert_eq!(&block_header_bytes(&h(128))[2..6], &[0x02, 0x02, 0x00, 0x80]);
    let max = block_header_bytes(&h(u64::MAX));
    assert_eq!(&max[2..5], &[0x02, 0x09, 0x00]);
    // Long-form lengths for oversized hashes.
    let big = BlockHeader { number: 1, previous_hash: Bytes::from(vec![0u8; 200]), data_hash: Bytes::new() };
    let der = block_header_bytes(&big);
    assert_eq!(&der[..3], &[0x30, 0x81, 0xd0]);
    assert_eq!(&der[6..9], &[0x04, 0x81, 200]);
}

/// With the fixture orderer's key and nonce, BlockBuilder re-cuts every
/// fixture block byte-identically except for the (randomised) ECDSA
/// signature, which verifies; the fixture's own signatures verify under the
/// same message layout.
#[test]
fn block_builder_reproduces_fixture_orderer_blocks() {
    let blocks = fixture_blocks();
    let orderer = fixture_orderer();
    for i in 1..blocks.len() {
        let fixture = &blocks[i];
        assert!(block_signature_verifies(fixture), "fixture block {i}");
        let meta = Metadata::decode(fixture.metadata.as_ref().unwrap().metadata[SIGNATURES].clone()).unwrap();
        let sh = SignatureHeader::decode(meta.signatures[0].signature_header.clone()).unwrap();
        assert_eq!(sh.creator, *orderer.serialized());
        let obm = OrdererBlockMetadata::decode(meta.value.clone()).unwrap();
        assert_eq!(obm.last_config.unwrap().index, 0);

        let mut ours = BlockBuilder::new(&orderer, blocks[i - 1].header.as_ref())
            .nonce(sh.nonce.clone())
            .build(&fixture.data.as_ref().unwrap().data);
        assert!(block_signature_verifies(&ours), "our block {i}");
        let mut our_meta = Metadata::decode(ours.metadata.as_ref().unwrap().metadata[SIGNATURES].clone()).unwrap();
        our_meta.signatures[0].signature = meta.signatures[0].signature.clone();
        ours.metadata.as_mut().unwrap().metadata[SIGNATURES] = Bytes::from(our_meta.encode_to_vec());
        assert_eq!(ours.encode_to_vec(), fixture.encode_to_vec(), "block {i}");
    }
}

#[test]
fn chain_links_hashes_and_signs_with_network_orderer() {
    let net = network();
    let w = Workload::new(net, 1);
    let mut chain = Chain::new(net).unwrap();
    let init = w.transfer_init_txs(8, 8, 16).unwrap();
    chain.append(&[init[0].envelope.clone()]);
    let txs: Vec<Bytes> = w.transfer_txs(4, 16, |_| Some((1, 0))).unwrap().into_iter().map(|b| b.envelope).collect();
    chain.append(&txs);
    chain.append(&[]);
    let blocks = chain.blocks();
    assert_eq!(blocks.len(), 4);
    assert_eq!(blocks[0].encode_to_vec(), net.genesis_block().to_vec());
    for i in 1..blocks.len() {
        let h = blocks[i].header.as_ref().unwrap();
        assert_eq!(h.number, i as u64);
        assert_eq!(h.previous_hash.as_ref(), block_header_hash(blocks[i - 1].header.as_ref().unwrap()).as_slice());
        assert_eq!(h.data_hash.as_ref(), block_data_hash(&blocks[i].data.as_ref().unwrap().data).as_slice());
        assert!(block_signature_verifies(&blocks[i]));
        let meta = Metadata::decode(blocks[i].metadata.as_ref().unwrap().metadata[SIGNATURES].clone()).unwrap();
        let sh = SignatureHeader::decode(meta.signatures[0].signature_header.clone()).unwrap();
        assert_eq!(sh.creator, *net.orderer().serialized());
        assert_eq!(sh.nonce.len(), 24);
    }
    assert_eq!(blocks[2].data.as_ref().unwrap().data.as_slice(), txs.as_slice());

    let bad = BlockBuilder::new(net.orderer(), blocks[3].header.as_ref()).corrupt_signature().build(&[]);
    assert!(!block_signature_verifies(&bad));
    let tampered =
        BlockBuilder::new(net.orderer(), None).data_hash(vec![0u8; 32]).previous_hash(vec![9u8; 32]).build(&txs);
    let h = tampered.header.unwrap();
    assert_eq!((h.number, h.data_hash.as_ref(), h.previous_hash.as_ref()), (0, &[0u8; 32][..], &[9u8; 32][..]));
    let unsigned = BlockBuilder::new(net.orderer(), None).unsigned().build(&[]);
    let meta = Metadata::decode(unsigned.metadata.unwrap().metadata[SIGNATURES].clone()).unwrap();
    assert!(meta.signatures.is_empty());
}
