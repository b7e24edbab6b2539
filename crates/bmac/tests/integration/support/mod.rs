//! Shared test helpers: fixture location and ledger reading; [`ledgers`] builds the testkit ledgers. The
//! simulation's tests (crates/bmac-sim) include this module too.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub(crate) mod ledgers;

use bytes::Bytes;
use ferrofabric_testkit::fabric_fixture;

pub(crate) fn read_fixture(name: &str) -> Bytes {
    Bytes::from(std::fs::read(fabric_fixture(name)).unwrap())
}

/// The fixture ledger's blocks (block 0 included).
pub(crate) fn fixture_blocks() -> Vec<Bytes> {
    ferrofabric_protoutil::records(read_fixture("orderer-blocks.bin")).map(|r| r.unwrap().1).collect()
}
