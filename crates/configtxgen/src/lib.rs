//! Ferrofabric's configtxgen: a channel's genesis (config) block from a configtx.yaml profile, encoded as
//! Fabric's `configtxgen -profile P -outputBlock F -channelID ID` encodes it, for the orderers'
//! channel participation API and peers joining the channel: solo, etcdraft and kafka as Fabric 2.5 does, and
//! Fabric 3.1's `BFT` (the `Orderers` consenter mapping, SmartBFT options, and a `BlockValidation` policy computed
//! from the consenters, `common/policies/bft.go`).
//!
//! Follows Fabric `internal/configtxgen/genesisconfig/config.go` (YAML model, defaults, relative paths),
//! `internal/configtxgen/encoder/encoder.go` (the `ConfigGroup` tree: versions, mod_policies, policies,
//! values), `common/channelconfig/util.go` (value encodings), `common/policydsl/policyparser.go` and
//! `common/policies/implicitmetaparser.go` (policy rules), `msp/configbuilder.go` (MSP folders, through
//! `ferrofabric_msp::msp_config_from_dir`) and `common/genesis/genesis.go` (the block).
//!
//! * [`ConfigTx::load`] / [`ConfigTx::profile`]: the YAML model, with anchors and merge keys, completed
//!   with Fabric's defaults and checks.
//! * [`channel_group`]: the `/Channel` `ConfigGroup`; [`genesis_block`] / [`genesis_block_at`]: block 0.
//! * [`signature_policy`] / [`implicit_meta_policy`]: the policy DSL (`OR('Org1MSP.peer')`, `AND(...)`,
//!   `OutOf(n, ...)`) and `ANY Readers`-style rules.
//!
//! ```no_run
//! use ferrofabric_configtxgen::{genesis_block, ConfigTx};
//! use prost::Message;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = ConfigTx::load(std::path::Path::new("configtx.yaml"))?;
//! let profile = config.profile("AppChannelEtcdRaft")?;
//! let block = genesis_block(&profile, "mychannel")?;
//! std::fs::write("mychannel.block", block.encode_to_vec())?;
//! # Ok(()) }
//! ```

mod encoder;
mod error;
mod genesis;
mod model;
mod policydsl;

pub use encoder::{bft_consenter, channel_group};
pub use error::ConfigtxgenError;
pub use genesis::{genesis_block, genesis_block_at, NONCE_SIZE};
pub use model::{
    AnchorPeer, Application, BatchSize, BftConsenter, ConfigTx, Consenter, Consortium, EtcdRaft, EtcdRaftOptions,
    Kafka, Orderer, Organization, Policy, Profile, SmartBftOptions,
};
pub use policydsl::{implicit_meta_policy, signature_policy};
