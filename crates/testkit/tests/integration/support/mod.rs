//! Shared test helpers: fixture location, a process-wide generated network.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;

use bytes::Bytes;
use ferrofabric_protos::common::{Block, ChannelHeader, Config, ConfigEnvelope, Envelope, Payload};
use ferrofabric_testkit::fabric_fixture;
use ferrofabric_testkit::Network;
use prost::Message;

pub(crate) fn read_fixture(name: &str) -> Bytes {
    Bytes::from(std::fs::read(fabric_fixture(name)).unwrap())
}

/// One network per test binary: generation signs ~30 certificates.
pub(crate) fn network() -> &'static Network {
    static NET: OnceLock<Network> = OnceLock::new();
    NET.get_or_init(|| Network::generate(42).unwrap())
}

pub(crate) fn fixture_blocks() -> Vec<Block> {
    ferrofabric_protoutil::records(read_fixture("orderer-blocks.bin"))
        .map(|r| Block::decode(r.unwrap().1).unwrap())
        .collect()
}

/// Channel header and config of a config block.
pub(crate) fn block_config(block: &Block) -> (ChannelHeader, Config) {
    let env = Envelope::decode(block.data.as_ref().unwrap().data[0].clone()).unwrap();
    let payload = Payload::decode(env.payload).unwrap();
    let ch = ChannelHeader::decode(payload.header.as_ref().unwrap().channel_header.clone()).unwrap();
    let ce = ConfigEnvelope::decode(payload.data).unwrap();
    (ch, ce.config.unwrap())
}
