//! Ferrofabric's cryptogen: the certificates, keys and MSP folders of a Fabric network, generated from a
//! crypto-config.yaml exactly as Fabric 2.5's `cryptogen generate` lays them out, so Fabric's tools,
//! peers, orderers and SDKs (and Ferrofabric's) can use them unchanged.
//!
//! Follows Fabric `cmd/cryptogen/main.go` (config, templates, generation order),
//! `internal/cryptogen/ca/ca.go` (certificate profiles), `internal/cryptogen/msp/msp.go` (MSP folders,
//! NodeOU `config.yaml`) and `internal/cryptogen/csp/csp.go` (P-256 keys, PKCS#8 `priv_sk`, low-S
//! signatures).
//!
//! * [`CryptoConfig`]: the YAML model (`PeerOrgs` / `OrdererOrgs` with `Domain`, `EnableNodeOUs`, `CA`,
//!   `Specs`, `Template`, `Users`).
//! * [`Crypto::generate`]: every CA, node and user in memory ([`Org`], [`Ca`], [`Member`]), reproducible
//!   with [`GenerateOptions::deterministic`].
//! * [`Crypto::write`]: the on-disk tree; [`Org::msp_config`]: the channel-config `MSPConfig` of an
//!   organisation without going through the disk.
//!
//! ```no_run
//! use ferrofabric_cryptogen::{Crypto, CryptoConfig, GenerateOptions, DEFAULT_CRYPTO_CONFIG};
//! # fn main() -> Result<(), ferrofabric_cryptogen::CryptogenError> {
//! let config = CryptoConfig::from_yaml(DEFAULT_CRYPTO_CONFIG)?;
//! let crypto = Crypto::generate(&config, &GenerateOptions::deterministic(7))?;
//! crypto.write(std::path::Path::new("crypto-config"))?;
//! let org1 = crypto.org("org1.example.com").expect("in the template");
//! let admin = org1.admin().signing_identity("Org1MSP")?;
//! # let _ = admin; Ok(()) }
//! ```

mod config;
mod error;
mod generate;
mod write;

pub use config::{CryptoConfig, NodeSpec, NodeTemplate, OrgSpec, UsersSpec};
pub use error::CryptogenError;
pub use generate::{Ca, Crypto, GenerateOptions, Member, NodeRole, Org, OrgKind, DETERMINISTIC_NOT_BEFORE};

/// The crypto-config `ferrofabric crypto generate` uses without `--config` (and prints with
/// `showtemplate`): peer organisations Org1 and Org2 (`org{1,2}.example.com`, one peer and one user
/// each) and the orderer organisation `example.com` (one orderer), all with NodeOUs and TLS SANs for
/// `localhost` / `127.0.0.1`.
pub const DEFAULT_CRYPTO_CONFIG: &str = "\
# Ferrofabric crypto-config (Fabric cryptogen format).
# OrdererOrgs / PeerOrgs: one entry per organisation.
#   Domain:        directory name and name suffix of every node and user
#   EnableNodeOUs: certificates carry the NodeOU client/peer/admin/orderer
#   CA:            optional subject of the CAs (Hostname, CommonName, Country, Province, Locality,
#                  OrganizationalUnit, StreetAddress, PostalCode)
#   Specs:         named nodes (Hostname, optional CommonName and SANS)
#   Template:      Count nodes named {{.Prefix}}{{.Index}} from Start (prefix peer or orderer)
#   Users:         Count users User1..UserN besides Admin (peer organisations)
OrdererOrgs:
  - Name: Orderer
    Domain: example.com
    EnableNodeOUs: true
    Specs:
      - Hostname: orderer
        SANS:
          - localhost
          - 127.0.0.1
PeerOrgs:
  - Name: Org1
    Domain: org1.example.com
    EnableNodeOUs: true
    Template:
      Count: 1
      SANS:
        - localhost
        - 127.0.0.1
    Users:
      Count: 1
  - Name: Org2
    Domain: org2.example.com
    EnableNodeOUs: true
    Template:
      Count: 1
      SANS:
        - localhost
        - 127.0.0.1
    Users:
      Count: 1
";
