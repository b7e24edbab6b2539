//! Shared test helpers: fixture location, the generated network and its signing identities.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::Block;
use ferrofabric_testkit::fabric_fixture;
use ferrofabric_testkit::Network;
use prost::Message;

/// The fixture's configtxgen block 0 of `mychannel`.
pub(crate) fn fixture_genesis() -> Block {
    Block::decode(Bytes::from(std::fs::read(fabric_fixture("genesis.block")).unwrap())).unwrap()
}

/// A signing identity of the fixture whose key was kept (User1 of each peer org, the orderer).
pub(crate) fn fixture_identity(mspid: &str, msp_dir: &str) -> SigningIdentity {
    SigningIdentity::from_msp_dir(mspid, &fabric_fixture("crypto").join(msp_dir)).unwrap()
}

/// The generated network (all private keys known) and its MSP directories on disk.
pub(crate) struct Net {
    pub network: Network,
    dir: tempfile::TempDir,
}

/// One network per test binary: generation signs ~30 certificates.
pub(crate) fn net() -> &'static Net {
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
    pub(crate) fn genesis_config(&self) -> Arc<ChannelConfig> {
        let block = Block::decode(self.network.genesis_block()).unwrap();
        Arc::new(ChannelConfig::from_config_block(&block).unwrap())
    }

    fn load(&self, mspid: &str, rel: &str) -> SigningIdentity {
        SigningIdentity::from_msp_dir(mspid, &self.dir.path().join(rel)).unwrap()
    }

    /// `Admin@org<n>.example.com` of peer org index `org` (0 or 1).
    pub(crate) fn admin(&self, org: usize) -> SigningIdentity {
        let domain = format!("org{}.example.com", org + 1);
        self.load(self.network.mspid(org), &format!("peerOrganizations/{domain}/users/Admin@{domain}/msp"))
    }

    /// `User1@org<n>.example.com` (a client) of peer org index `org`.
    pub(crate) fn client(&self, org: usize) -> SigningIdentity {
        let domain = format!("org{}.example.com", org + 1);
        self.load(self.network.mspid(org), &format!("peerOrganizations/{domain}/users/User1@{domain}/msp"))
    }

    /// `orderer.example.com`.
    pub(crate) fn orderer(&self) -> SigningIdentity {
        self.load("OrdererMSP", "ordererOrganizations/example.com/orderers/orderer.example.com/msp")
    }
}
