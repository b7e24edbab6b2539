//! Block attestations of a real Fabric 3.1.5 BFT ledger (`fixtures/fabric-3.1-bft`): a block's header and metadata
//! alone, as Deliver serves them for `HEADER_WITH_SIG`, are believed only with a quorum of consenter signatures.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use bytes::Bytes;
use ferrofabric_channelconfig::{verify_block_attestation, ChannelConfig};
use ferrofabric_protos::common::{Block, BlockData, Metadata};
use ferrofabric_testkit::fixture;
use prost::Message;

fn bft_blocks() -> (ChannelConfig, Vec<Block>) {
    let dir = fixture("fabric-3.1-bft");
    let genesis = Block::decode(Bytes::from(std::fs::read(dir.join("genesis.block")).unwrap())).unwrap();
    let config = ChannelConfig::from_config_block(&genesis).unwrap();
    let raw = Bytes::from(std::fs::read(dir.join("orderer-blocks-orderer2.bin")).unwrap());
    let blocks = ferrofabric_protoutil::records(raw).map(|r| Block::decode(r.unwrap().1).unwrap()).collect();
    (config, blocks)
}

/// The header and metadata as `HEADER_WITH_SIG` carries them (no data).
fn attestation(block: &Block) -> Bytes {
    Bytes::from(Block { data: Some(BlockData::default()), ..block.clone() }.encode_to_vec())
}

#[test]
fn attestations_with_a_signature_quorum_are_believed_and_others_refused() {
    let (config, blocks) = bft_blocks();
    // Blocks 1-25 were signed under the genesis configuration.
    for block in &blocks[1..26] {
        let number = block.header.as_ref().unwrap().number;
        assert_eq!(verify_block_attestation(&config, attestation(block)).unwrap(), number);
    }
    let mut short = blocks[5].clone();
    let md = short.metadata.as_mut().unwrap();
    let mut sigs = Metadata::decode(md.metadata[0].clone()).unwrap();
    sigs.signatures.truncate(2);
    md.metadata[0] = Bytes::from(sigs.encode_to_vec());
    assert!(verify_block_attestation(&config, attestation(&short)).is_err(), "2 of 4 consenters believed");
    let mut forged = blocks[5].clone();
    forged.header.as_mut().unwrap().number = 99;
    assert!(verify_block_attestation(&config, attestation(&forged)).is_err(), "a renumbered header believed");
    assert!(verify_block_attestation(&config, Bytes::from_static(b"\xff\xff")).is_err());
}
