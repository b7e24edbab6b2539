//! Arbitrary envelope bytes placed in a correctly chained block signed by the network's orderer: the validator
//! must give every transaction a code (the block itself is never refused) and never panic.
#![no_main]
use bytes::Bytes;
use ferrofabric_testkit::{BlockBuilder, Network};
use ferrofabric_validator::{Validator, ValidatorOptions};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn network() -> &'static Network {
    static N: OnceLock<Network> = OnceLock::new();
    N.get_or_init(|| Network::generate(11).expect("network"))
}

fuzz_target!(|data: &[u8]| {
    let net = network();
    let genesis = net.genesis_block();
    let Ok(mut v) = Validator::new(genesis.clone(), ValidatorOptions { threads: 1 }) else { return };
    let Ok(arena) = ferrofabric_arena::BlockArena::decode(genesis) else { return };
    let envs = vec![Bytes::copy_from_slice(data)];
    let block = BlockBuilder::new(net.orderer(), Some(arena.header())).build_bytes(&envs);
    let result = v.commit_block(block).expect("a well-formed, signed block is never refused");
    assert_eq!(result.codes.len(), 1);
});
