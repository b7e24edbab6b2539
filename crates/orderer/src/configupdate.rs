//! CONFIG_UPDATE handling: the hook through which the channel's next configuration is computed
//! ([`ConfigUpdateProcessor`], implemented by [`ConfigTxProcessor`] on top of `ferrofabric-configtx`), and the
//! CONFIG transaction the orderer wraps it in (Fabric `orderer/common/msgprocessor/standardchannel.go`
//! `ProcessConfigUpdateMsg`, `orderer/common/multichannel/chainsupport.go` `ProposeConfigUpdate`,
//! `protoutil.CreateSignedEnvelope`).

use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_configtx::{wrap_config_envelope, ConfigTxValidator};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{ConfigEnvelope, Envelope};
use prost::Message;

/// Computes the configuration a CONFIG_UPDATE leads to: Fabric's `ChainSupport.ProposeConfigUpdate`.
///
/// Given the channel's current configuration and the CONFIG_UPDATE envelope (already past the broadcast
/// filters: size and `/Channel/Writers`), return the new `ConfigEnvelope{config: next config with sequence + 1,
/// last_update: the update envelope}`, after checking the update's read set versions, write set, and the
/// `mod_policy` signatures of every modified element. The orderer signs the resulting CONFIG transaction, runs
/// the filters on it again and orders it alone in a block.
///
/// Errors are reported to the client as BAD_REQUEST with the message
/// `error applying config update to existing channel '<id>': <error>`, as Fabric does (Fabric's
/// `broadcast.ClassifyError` maps a failed `mod_policy` to BAD_REQUEST too; FORBIDDEN is only for the
/// `/Channel/Writers` filter on the envelope).
///
/// Implementations must be `Send + Sync`; they are called from the broadcast worker threads.
pub trait ConfigUpdateProcessor: Send + Sync {
    /// Propose the next configuration for `current` given the CONFIG_UPDATE `update`.
    fn propose_config_update(
        &self,
        current: &Arc<ChannelConfig>,
        update: &Envelope,
    ) -> Result<ConfigEnvelope, Box<dyn std::error::Error + Send + Sync>>;
}

/// Checks the consensus metadata of a proposed configuration against the current one: Fabric's
/// `consensus.MetadataValidator`, asked by `ChainSupport.ProposeConfigUpdate` after the configuration itself was
/// validated. Each consensus type has its own rules (etcdraft: one consenter change at a time); the orderer core
/// knows none of them. The node's validator is its `ConsensusRegistry`, which asks the factory of the channel's
/// current consensus type.
pub trait MetadataValidator: Send + Sync {
    /// Whether the orderer configuration may go from `current` to `next`.
    ///
    /// Errors: the reason the change is refused, in Fabric's words; the client sees it as BAD_REQUEST
    /// `error applying config update to existing channel '<id>': consensus metadata update for channel config
    /// update is invalid: <reason>`.
    fn validate_consensus_metadata(
        &self,
        current: &ChannelConfig,
        next: &ChannelConfig,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}

/// The node's CONFIG_UPDATE processor: [`ConfigTxValidator::propose`] (read set versions, version increments,
/// `mod_policy` signatures, validity and compatibility of the result). The consensus implementation then checks
/// the consensus metadata of the result ([`crate::ConsensusFactory::validate_consensus_metadata`], in
/// [`crate::ChainSupport::process_config_update`]), as Fabric's `ChainSupport.ProposeConfigUpdate` does.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConfigTxProcessor;

impl ConfigUpdateProcessor for ConfigTxProcessor {
    fn propose_config_update(
        &self,
        current: &Arc<ChannelConfig>,
        update: &Envelope,
    ) -> Result<ConfigEnvelope, Box<dyn std::error::Error + Send + Sync>> {
        Ok(ConfigTxValidator::new(current.clone())?.propose(update)?)
    }
}

/// The CONFIG transaction signed by this orderer around `config` (see
/// [`ferrofabric_configtx::wrap_config_envelope`]: channel header type CONFIG, version 0, epoch 0, whole-second
/// timestamp; signature header with this node's creator and a 24-byte nonce), marshaled.
pub(crate) fn signed_config_envelope(channel_id: &str, config: &ConfigEnvelope, signer: &SigningIdentity) -> Bytes {
    Bytes::from(wrap_config_envelope(signer, channel_id, config).encode_to_vec())
}
