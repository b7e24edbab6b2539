//! Shared test helpers: fixture location, the generated network and its signing identities.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_policy::ChannelConfig;
use ferrofabric_protos::common::Block;
use ferrofabric_testkit::Network;
use prost::Message;

/// `fabric-2.5` fixtures: `$FERROFABRIC_FIXTURES` (the fixtures root or the fabric-2.5 dir itself), else
/// `CARGO_MANIFEST_DIR/../../../shared/fixtures`. Panics (a test failure) if they are missing.
pub fn fixture_dir() -> PathBuf {
    let root = match std::env::var_os("FERROFABRIC_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures"),
    };
    for dir in [root.join("fabric-2.5"), root.clone()] {
        if dir.join("genesis.block").is_file() {
            return dir;
        }
    }
    panic!("Fabric 2.5 fixtures (genesis.block) not found under {} (set FERROFABRIC_FIXTURES)", root.display());
}

/// The fixture's configtxgen block 0 of `mychannel`.
pub fn fixture_genesis() -> Block {
    Block::decode(Bytes::from(std::fs::read(fixture_dir().join("genesis.block")).unwrap())).unwrap()
}

/// A signing identity of the fixture whose key was kept (User1 of each peer org, the orderer).
pub fn fixture_identity(mspid: &str, msp_dir: &str) -> SigningIdentity {
    SigningIdentity::from_msp_dir(mspid, &fixture_dir().join("crypto").join(msp_dir)).unwrap()
}

/// The generated network (all private keys known) and its MSP directories on disk.
pub struct Net {
    pub network: Network,
    dir: tempfile::TempDir,
}

/// One network per test binary: generation signs ~30 certificates.
pub fn net() -> &'static Net {
    static NET: OnceLock<Net> = OnceLock::new();
    NET.get_or_init(|| {
        let network = Network::generate(11).unwrap();
        let dir = tempfile::tempdir().unwrap();
        network.write_msp_dirs(dir.path()).unwrap();
        Net { network, dir }
    })
}

impl Net {
    /// The genesis config of the generated network.
    pub fn genesis_config(&self) -> Arc<ChannelConfig> {
        let block = Block::decode(self.network.genesis_block()).unwrap();
        Arc::new(ChannelConfig::from_config_block(&block).unwrap())
    }

    fn load(&self, mspid: &str, rel: &str) -> SigningIdentity {
        SigningIdentity::from_msp_dir(mspid, &self.dir.path().join(rel)).unwrap()
    }

    /// `Admin@org<n>.example.com` of peer org index `org` (0 or 1).
    pub fn admin(&self, org: usize) -> SigningIdentity {
        let domain = format!("org{}.example.com", org + 1);
        self.load(self.network.mspid(org), &format!("peerOrganizations/{domain}/users/Admin@{domain}/msp"))
    }

    /// `User1@org<n>.example.com` (a client) of peer org index `org`.
    pub fn client(&self, org: usize) -> SigningIdentity {
        let domain = format!("org{}.example.com", org + 1);
        self.load(self.network.mspid(org), &format!("peerOrganizations/{domain}/users/User1@{domain}/msp"))
    }

    /// `orderer.example.com`.
    pub fn orderer(&self) -> SigningIdentity {
        self.load("OrdererMSP", "ordererOrganizations/example.com/orderers/orderer.example.com/msp")
    }
}
