//! Shared test helpers: fixture location and ledger reading; [`ledgers`] builds the testkit ledgers.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod ledgers;

use std::path::PathBuf;

use bytes::Bytes;

/// `fixtures/fabric-2.5`: `$FERROFABRIC_FIXTURES` (the fixtures root or the fabric-2.5 dir itself), else the
/// repo's sibling `shared/fixtures`.
pub fn fixture_dir() -> PathBuf {
    let root = match std::env::var_os("FERROFABRIC_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"),
    };
    for dir in [root.join("fabric-2.5"), root.clone()] {
        if dir.join("orderer-blocks.bin").is_file() {
            return dir;
        }
    }
    panic!("Fabric 2.5 fixtures not found under {}", root.display());
}

pub fn read_fixture(name: &str) -> Bytes {
    Bytes::from(std::fs::read(fixture_dir().join(name)).unwrap())
}

/// The fixture ledger's blocks (block 0 included).
pub fn fixture_blocks() -> Vec<Bytes> {
    ferrofabric_arena::records::records(read_fixture("orderer-blocks.bin")).map(|r| r.unwrap().1).collect()
}
