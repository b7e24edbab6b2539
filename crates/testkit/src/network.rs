//! A generated network made by `ferrofabric-cryptogen`, i.e. with cryptogen's
//! certificate profiles, so Fabric's MSP and NodeOU rules treat our identities
//! exactly like the fixture's, while we also hold every private key: by
//! default the fixture's three orgs (Org1MSP, Org2MSP, OrdererMSP), or any
//! number of peer orgs with a genesis block from `ferrofabric-configtxgen`.

use std::path::Path;

use bytes::Bytes;
use ferrofabric_cryptogen::{
    Crypto, CryptoConfig, CryptogenError, GenerateOptions, Org, OrgKind, DEFAULT_CRYPTO_CONFIG,
};
use ferrofabric_protos::msp::MspConfig;

use crate::{SigningIdentity, TestkitError};

/// Index of the orderer organisation of the default network ([`Network::generate`]) in [`Network::admin`] and
/// [`Network::mspid`]; peer organisations are `0` (Org1MSP) and `1` (Org2MSP). A network of other sizes has it at
/// [`Network::orderer_org`].
pub const ORDERER_ORG: usize = 2;

/// Channel the network's genesis block defines.
pub const CHANNEL_ID: &str = "mychannel";

/// Number of peer organisations of the default network.
pub const PEER_ORGS: usize = 2;

/// Most peer organisations [`Network::generate_orgs`] makes.
pub const MAX_PEER_ORGS: usize = 8;

/// The signing identities of one organisation, loaded once.
struct OrgIdentities {
    /// peer0 or orderer.
    node: SigningIdentity,
    admin: SigningIdentity,
    /// User1 (peer orgs only).
    user: Option<SigningIdentity>,
}

fn crypto_err(e: CryptogenError) -> TestkitError {
    match e {
        CryptogenError::Io { path, source } => TestkitError::Io { path, source },
        CryptogenError::Identity(msg) => TestkitError::Identity(msg),
        other => TestkitError::Certificate(other.to_string()),
    }
}

/// A generated Fabric network: Org1MSP and Org2MSP (peer0, User1 and Admin
/// each) and OrdererMSP (orderer and Admin), every member with an ECDSA
/// P-256 key and a cryptogen-style certificate carrying its NodeOU
/// (`peer`, `client`, `admin`, `orderer`), plus TLS CAs and TLS certificates.
///
/// Organisation indices: `0` = Org1MSP, `1` = Org2MSP, …, then OrdererMSP ([`Network::orderer_org`], which is
/// [`ORDERER_ORG`] in the default network).
pub struct Network {
    crypto: Crypto,
    ids: Vec<OrgIdentities>,
    mspids: Vec<String>,
    genesis: Bytes,
}

/// The crypto-config of `peer_orgs` peer orgs `Org<i>` (`org<i>.example.com`, one peer and one user each) and the
/// orderer org, as [`DEFAULT_CRYPTO_CONFIG`] writes them.
fn crypto_config_yaml(peer_orgs: usize) -> String {
    let mut y = String::from(
        "OrdererOrgs:\n  - Name: Orderer\n    Domain: example.com\n    EnableNodeOUs: true\n    Specs:\n      - Hostname: orderer\n        SANS:\n          - localhost\n          - 127.0.0.1\nPeerOrgs:\n",
    );
    for i in 1..=peer_orgs {
        y.push_str(&format!(
            "  - Name: Org{i}\n    Domain: org{i}.example.com\n    EnableNodeOUs: true\n    Template:\n      Count: 1\n      SANS:\n        - localhost\n        - 127.0.0.1\n    Users:\n      Count: 1\n"
        ));
    }
    y
}

impl Network {
    /// Generates all keys and certificates from `seed` with
    /// [`GenerateOptions::deterministic`] over
    /// [`DEFAULT_CRYPTO_CONFIG`] (peer orgs `org{1,2}.example.com`, orderer
    /// org `example.com`), so the same seed always yields byte-identical
    /// certificates, keys and genesis block.
    ///
    /// Errors: [`TestkitError::Certificate`] / [`TestkitError::Identity`] if
    /// cryptogen or the MSP crate rejects the generated material, or
    /// [`TestkitError::Genesis`] if the embedded fixture block cannot be
    /// re-keyed (all bugs, not input errors).
    pub fn generate(seed: u64) -> Result<Network, TestkitError> {
        let config = CryptoConfig::from_yaml(DEFAULT_CRYPTO_CONFIG).map_err(crypto_err)?;
        let mut net = Network::from_crypto(&config, seed, PEER_ORGS)?;
        net.genesis = crate::genesis::patched_genesis(&net)?;
        Ok(net)
    }

    /// A network of `peer_orgs` peer orgs `Org<i>MSP` (`org<i>.example.com`, peer0, User1 and Admin each) and
    /// OrdererMSP, keys and certificates from `seed` as in [`Network::generate`]. Its genesis block is
    /// `ferrofabric-configtxgen`'s, from the fixture's `configtx.yaml` with every peer org in the Application
    /// section (policies `OR('<org>.peer')` for each org's `Endorsement`, `MAJORITY Endorsement` for the channel's
    /// `Endorsement` and `LifecycleEndorsement`), at a fixed timestamp and nonce, so the same seed and size give
    /// the same bytes.
    ///
    /// Errors: `peer_orgs` outside `1..=MAX_PEER_ORGS` ([`TestkitError::Genesis`]), or as [`Network::generate`],
    /// [`TestkitError::Io`] for the temporary MSP folders configtxgen reads.
    pub fn generate_orgs(seed: u64, peer_orgs: usize) -> Result<Network, TestkitError> {
        if !(1..=MAX_PEER_ORGS).contains(&peer_orgs) {
            return Err(TestkitError::Genesis(format!("{peer_orgs} peer orgs: 1 to {MAX_PEER_ORGS} are supported")));
        }
        let config = CryptoConfig::from_yaml(&crypto_config_yaml(peer_orgs)).map_err(crypto_err)?;
        let mut net = Network::from_crypto(&config, seed, peer_orgs)?;
        net.genesis = crate::genesis::configtxgen_genesis(&net)?;
        Ok(net)
    }

    fn from_crypto(config: &CryptoConfig, seed: u64, peer_orgs: usize) -> Result<Network, TestkitError> {
        let crypto = Crypto::generate(config, &GenerateOptions::deterministic(seed)).map_err(crypto_err)?;
        let orgs = crypto.orgs();
        let shape_ok = orgs.len() == peer_orgs + 1
            && orgs[..peer_orgs].iter().all(|o| o.kind() == OrgKind::Peer && o.users().len() >= 2)
            && orgs[peer_orgs].kind() == OrgKind::Orderer
            && orgs.iter().all(|o| o.node_ous() && !o.nodes().is_empty());
        if !shape_ok {
            return Err(TestkitError::Certificate("the crypto-config no longer has the testkit's shape".into()));
        }
        let mut mspids: Vec<String> = (1..=peer_orgs).map(|i| format!("Org{i}MSP")).collect();
        mspids.push("OrdererMSP".into());
        let ids = orgs
            .iter()
            .zip(&mspids)
            .map(|(org, mspid)| {
                let id = |m: &ferrofabric_cryptogen::Member| m.signing_identity(mspid).map_err(crypto_err);
                Ok(OrgIdentities {
                    node: id(&org.nodes()[0])?,
                    admin: id(org.admin())?,
                    user: match org.kind() {
                        OrgKind::Peer => Some(id(&org.users()[0])?),
                        OrgKind::Orderer => None,
                    },
                })
            })
            .collect::<Result<Vec<_>, TestkitError>>()?;
        Ok(Network { crypto, ids, mspids, genesis: Bytes::new() })
    }

    /// Number of peer organisations (2 in the default network).
    pub fn peer_orgs(&self) -> usize {
        self.ids.len() - 1
    }

    /// Index of the orderer organisation (the last one; [`ORDERER_ORG`] in the default network).
    pub fn orderer_org(&self) -> usize {
        self.ids.len() - 1
    }

    /// The fixture's configtxgen genesis block of `mychannel` (Fabric
    /// 2.5.16) with the three `MSP` values (root CA, TLS root CA, NodeOU
    /// certificates) replaced by this network's, everything else (policies,
    /// capabilities, batch size, etcdraft consenters and their TLS certs,
    /// channel header, unsigned envelope) byte-for-byte unchanged, and
    /// `header.data_hash` recomputed. Marshaled `common.Block` number 0.
    pub fn genesis_block(&self) -> Bytes {
        self.genesis.clone()
    }

    fn org(&self, org: usize) -> &Org {
        &self.crypto.orgs()[org]
    }

    fn peer_org(&self, org: usize) -> &OrgIdentities {
        assert!(org < self.peer_orgs(), "peer org index {org} out of range 0..{}", self.peer_orgs());
        &self.ids[org]
    }

    /// The channel ID of [`Network::genesis_block`]: `mychannel`.
    pub fn channel_id(&self) -> &str {
        CHANNEL_ID
    }

    /// MSP ID of organisation `org` (`Org1MSP`, `Org2MSP`, …, `OrdererMSP`).
    ///
    /// # Panics
    /// If `org > self.orderer_org()`.
    pub fn mspid(&self, org: usize) -> &str {
        &self.mspids[org]
    }

    /// `peer0.org{org+1}.example.com` (OU `peer`) of peer org `org` (0 or 1).
    ///
    /// # Panics
    /// If `org >= self.peer_orgs()`.
    pub fn peer(&self, org: usize) -> &SigningIdentity {
        &self.peer_org(org).node
    }

    /// `User1@org{org+1}.example.com` (OU `client`) of peer org `org` (0 or 1).
    ///
    /// # Panics
    /// If `org >= self.peer_orgs()`.
    pub fn client(&self, org: usize) -> &SigningIdentity {
        match &self.peer_org(org).user {
            Some(user) => user,
            // `generate` checks that peer orgs have User1.
            None => unreachable!("peer org without User1"),
        }
    }

    /// `Admin@<domain>` (OU `admin`) of organisation `org` (a peer org or
    /// [`Network::orderer_org`]).
    ///
    /// # Panics
    /// If `org > self.orderer_org()`.
    pub fn admin(&self, org: usize) -> &SigningIdentity {
        &self.ids[org].admin
    }

    /// `orderer.example.com` (OU `orderer`), the block signer.
    pub fn orderer(&self) -> &SigningIdentity {
        &self.ids[self.orderer_org()].node
    }

    /// The MSPConfig (type FABRIC) of organisation `org` as it appears in
    /// the genesis block's `MSP` config value: root CA, TLS root CA and the
    /// four NodeOU identifiers.
    ///
    /// # Panics
    /// If `org > self.orderer_org()`.
    pub fn msp_config(&self, org: usize) -> MspConfig {
        self.org(org).msp_config(&self.mspids[org])
    }

    /// PEM of organisation `org`'s signing root CA certificate.
    ///
    /// # Panics
    /// If `org > self.orderer_org()`.
    pub fn ca_cert_pem(&self, org: usize) -> &str {
        self.org(org).ca().cert_pem()
    }

    /// The generated material behind this network (all CAs, nodes and
    /// users with their keys), e.g. to reach TLS certificates.
    pub fn crypto(&self) -> &Crypto {
        &self.crypto
    }

    /// MSPConfig of the org called `mspid`, if it is ours.
    pub(crate) fn msp_config_by_id(&self, mspid: &str) -> Option<MspConfig> {
        self.mspids.iter().position(|m| m == mspid).map(|i| self.msp_config(i))
    }

    /// Writes cryptogen's directory layout under `dir` (see
    /// [`Crypto::write`]): `peerOrganizations/org{1,2}.example.com/` and
    /// `ordererOrganizations/example.com/`, each with `ca/`, `tlsca/`
    /// (certificate + `priv_sk`), the org `msp/` (cacerts, tlscacerts,
    /// config.yaml with NodeOUs), and per member
    /// `{peers,orderers,users}/<name>/msp/{cacerts,signcerts,keystore/priv_sk,tlscacerts,config.yaml}`
    /// plus `tls/{ca.crt,server.crt|client.crt,server.key|client.key}`.
    ///
    /// Errors: [`TestkitError::Io`] naming the path that failed.
    pub fn write_msp_dirs(&self, dir: &Path) -> Result<(), TestkitError> {
        self.crypto.write(dir).map_err(crypto_err)
    }
}
