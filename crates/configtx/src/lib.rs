//! Channel configuration updates for Ferrofabric: how an orderer turns a CONFIG_UPDATE into the next CONFIG.
//!
//! Follows Hyperledger Fabric 2.5 `common/configtx` (`validator.go`, `update.go`, `configmap.go`,
//! `compare.go`), the orderer's `msgprocessor/standardchannel.go` `ProcessConfigUpdateMsg` and
//! `multichannel/chainsupport.go` `ProposeConfigUpdate`, and `internal/configtxlator/update` for building
//! updates.
//!
//! * [`ConfigTxValidator::propose`]: authorize a CONFIG_UPDATE envelope (read-set versions, version increments,
//!   the `mod_policy` of every changed element against the update's signatures) and compute the next
//!   `ConfigEnvelope` (sequence + 1). [`ConfigTxValidator::validate`] re-checks a received CONFIG transaction.
//! * [`wrap_config_envelope`]: the orderer-signed CONFIG envelope that goes into the config block.
//! * [`ConfigTxError`]: what failed, with [`ConfigTxError::is_forbidden`] / [`ConfigTxError::status`] for the
//!   Broadcast answer.
//! * Tools: [`compute_update`] (configtxlator), [`anchor_peer_update`], [`config_signature`] and
//!   [`config_update_envelope`] (peer CLI), [`marshal_config_envelope`] / [`marshal_config_update`]
//!   (deterministic bytes: maps sorted by key).
//!
//! ```no_run
//! # fn demo(current: std::sync::Arc<ferrofabric_channelconfig::ChannelConfig>, update: &ferrofabric_protos::common::Envelope,
//! #         orderer: &ferrofabric_msp::SigningIdentity) -> Result<(), ferrofabric_configtx::ConfigTxError> {
//! use ferrofabric_configtx::{wrap_config_envelope, ConfigTxValidator};
//! let validator = ConfigTxValidator::new(current)?;
//! let next = validator.propose(update)?;
//! let config_tx = wrap_config_envelope(orderer, validator.channel_id(), &next);
//! # let _ = config_tx; Ok(()) }
//! ```

mod configmap;
mod encode;
mod envelope;
mod error;
mod update;
mod validator;

pub use encode::{marshal_config_envelope, marshal_config_update};
pub use envelope::{config_signature, config_update_envelope, unsigned_config_update_envelope, wrap_config_envelope};
pub use error::ConfigTxError;
pub use update::{anchor_peer_update, compute_update};
pub use validator::ConfigTxValidator;
