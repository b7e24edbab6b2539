//! The channel configuration and its policies (Fabric `common/channelconfig`, `common/policies`, `common/cauthdsl`).
//!
//! * [`SignatureSet`]: the signed items a policy is checked against (Fabric's `[]*protoutil.SignedData`),
//!   with per-item caches so that each signature is verified at most once and only when a policy needs
//!   it (short-circuit evaluation; verdicts identical to Fabric's verify-everything-first order).
//! * [`Policy`]: a compiled policy. [`compile_signature_policy`] builds Fabric's cauthdsl signature policy
//!   (`common/cauthdsl`); [`ChannelConfig::policy`] hands out the channel's policies, including implicit
//!   meta policies (`common/policies/implicitmeta.go`), by path such as `/Channel/Application/Endorsement`.
//! * [`ChannelConfig`]: a parsed `common.Config` (Fabric `common/channelconfig`): MSP manager, policy tree,
//!   capabilities and typed orderer/application values.
//! * [`verify_block_signatures`], [`verify_block_attestation`]: a block's orderer signatures against
//!   `/Channel/Orderer/BlockValidation` (Fabric's `protoutil.BlockSignatureVerifier`).
//! * Go `time.Duration` text, the one parser of the channel config's and the YAML configs' durations:
//!   [`parse_go_duration`], [`parse_go_duration_std`], [`format_go_duration`].
//!
//! ```no_run
//! # fn demo(block: &ferrofabric_protos::common::Block, items: Vec<ferrofabric_channelconfig::SignedData>)
//! # -> Result<(), ferrofabric_channelconfig::PolicyError> {
//! use ferrofabric_channelconfig::{ChannelConfig, SignatureSet};
//! let config = ChannelConfig::from_config_block(block)?;
//! let set = SignatureSet::new(items, config.msp_manager());
//! if let Some(policy) = config.policy("/Channel/Application/Endorsement") {
//!     policy.evaluate(&set)?;
//! }
//! # Ok(()) }
//! ```

mod block_signatures;
mod channel_config;
mod duration;
mod error;
mod policy;
mod signature_set;

pub use block_signatures::{verify_block_attestation, verify_block_signatures, BlockSignatureError};
pub use channel_config::{
    AnchorPeer, ApplicationConfig, BatchSize, Capabilities, ChannelConfig, OrdererConfig, OrganizationConfig,
};
pub use duration::{format as format_go_duration, parse as parse_go_duration, parse_std as parse_go_duration_std};
pub use error::PolicyError;
pub use policy::{bft_block_validation_policy, bft_quorum, compile_signature_policy, Policy};
pub use signature_set::{SignatureSet, SignedData};
