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
use ferrofabric_protos::etcdraft;
use prost::Message;

use crate::membership::validate_consenter_change;

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

/// The node's CONFIG_UPDATE processor: [`ConfigTxValidator::propose`] (read set versions, version increments,
/// `mod_policy` signatures, validity and compatibility of the result), plus Fabric's check of the `etcdraft`
/// consenter set (`ChainSupport.ProposeConfigUpdate` → `ValidateConsensusMetadata`): it may not become empty
/// nor list a TLS certificate twice, and at most one consenter may be added, removed or have its client TLS
/// certificate rotated
/// ([`crate::validate_consenter_change`]); otherwise the update is refused with
/// `consensus metadata update for channel config update is invalid: update of more than one consenter at a
/// time is not supported, requested changes: add N node(s), remove M node(s)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConfigTxProcessor;

/// Why [`ConfigTxProcessor`] refused a consenter-set change.
#[derive(Debug, thiserror::Error)]
#[error("consensus metadata update for channel config update is invalid: {0}")]
struct ConsenterChange(String);

/// The etcdraft consenters of `config`, or `None` for other consensus types.
///
/// Errors: the `ConsensusType` metadata does not decode as `etcdraft.ConfigMetadata`.
pub fn raft_consenters(config: &ChannelConfig) -> Result<Option<Vec<etcdraft::Consenter>>, crate::error::OrdererError> {
    let Some(oc) = config.orderer() else { return Ok(None) };
    if oc.consensus_type() != "etcdraft" {
        return Ok(None);
    }
    let md = etcdraft::ConfigMetadata::decode(oc.consensus_metadata().clone())
        .map_err(crate::error::OrdererError::RaftMetadata)?;
    Ok(Some(md.consenters))
}

impl ConfigUpdateProcessor for ConfigTxProcessor {
    fn propose_config_update(
        &self,
        current: &Arc<ChannelConfig>,
        update: &Envelope,
    ) -> Result<ConfigEnvelope, Box<dyn std::error::Error + Send + Sync>> {
        let validator = ConfigTxValidator::new(current.clone())?;
        let next = validator.propose(update)?;
        let Some(config) = next.config.as_ref() else {
            return Err(Box::new(ConsenterChange("the proposed config envelope has no config".into())));
        };
        if let Some(before) = raft_consenters(current).map_err(|e| ConsenterChange(e.to_string()))? {
            let parsed = ChannelConfig::from_config(current.channel_id(), config)?;
            if let Some(after) = raft_consenters(&parsed).map_err(|e| ConsenterChange(e.to_string()))? {
                validate_consenter_change(&before, &after).map_err(|e| ConsenterChange(e.to_string()))?;
            }
        }
        Ok(next)
    }
}

/// The CONFIG transaction signed by this orderer around `config` (see
/// [`ferrofabric_configtx::wrap_config_envelope`]: channel header type CONFIG, version 0, epoch 0, whole-second
/// timestamp; signature header with this node's creator and a 24-byte nonce), marshaled.
pub(crate) fn signed_config_envelope(channel_id: &str, config: &ConfigEnvelope, signer: &SigningIdentity) -> Bytes {
    Bytes::from(wrap_config_envelope(signer, channel_id, config).encode_to_vec())
}
