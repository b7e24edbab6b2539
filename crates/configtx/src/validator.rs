//! Authorizing a CONFIG_UPDATE against the current channel config and computing the next config
//! (Fabric `common/configtx/validator.go`, `update.go`; orderer `multichannel/chainsupport.go`
//! `ProposeConfigUpdate`, `ledger_resources.go` `checkResources`; `channelconfig/bundle.go` `ValidateNew`).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_channelconfig::{ChannelConfig, SignatureSet, SignedData};
use ferrofabric_protos::common::{
    ChannelHeader, Config, ConfigEnvelope, ConfigGroup, ConfigUpdate, ConfigUpdateEnvelope, Envelope, HeaderType,
    Payload, SignatureHeader,
};
use ferrofabric_protos::msp::{FabricMspConfig, MspConfig};
use prost::Message;

use crate::configmap::{self, check_channel_id, check_config_id, map_config, ConfigMap, ElementKey};
use crate::error::ConfigTxError;

/// Channel capabilities Fabric 2.5 understands (`common/capabilities/channel.go`).
const KNOWN_CHANNEL_CAPABILITIES: &[&str] = &["V1_1", "V1_3", "V1_4_2", "V1_4_3", "V2_0", "V3_0"];
/// Orderer capabilities Fabric 2.5 understands (`common/capabilities/orderer.go`).
const KNOWN_ORDERER_CAPABILITIES: &[&str] = &["V1_1", "V1_4_2", "V2_0"];
/// Channel capabilities that allow a consensus type change (`ChannelProvider.ConsensusTypeMigration`).
const CONSENSUS_MIGRATION_CAPABILITIES: &[&str] = &["V1_4_2", "V1_4_3", "V2_0", "V3_0"];

/// Validates config updates for one channel at one config sequence (Fabric's `configtx.ValidatorImpl`, plus
/// the checks the orderer's `ChainSupport.ProposeConfigUpdate` runs on the result).
///
/// Built from the channel's current [`ChannelConfig`] (channel ID, `Config.sequence`, the config tree, its
/// MSPs and policies). Immutable; build a new validator after each config block.
#[derive(Debug, Clone)]
pub struct ConfigTxValidator {
    current: Arc<ChannelConfig>,
    map: ConfigMap,
}

impl ConfigTxValidator {
    /// A validator for `current` (Fabric `NewValidatorImpl`).
    ///
    /// Errors: [`ConfigTxError::Malformed`] if the config has no channel group, [`ConfigTxError::IllegalName`]
    /// for a bad channel ID or element name (a [`ChannelConfig`] already enforces both, so only hand-built
    /// configs hit these).
    pub fn new(current: Arc<ChannelConfig>) -> Result<ConfigTxValidator, ConfigTxError> {
        let root = current
            .config()
            .channel_group
            .as_ref()
            .ok_or_else(|| ConfigTxError::malformed("Config.channel_group", "absent"))?;
        check_channel_id(current.channel_id())?;
        let map = map_config(Some(root), "current config")?;
        Ok(ConfigTxValidator { current, map })
    }

    /// The channel this validator guards.
    pub fn channel_id(&self) -> &str {
        self.current.channel_id()
    }

    /// Sequence of the current config; a successful proposal carries `sequence() + 1`.
    pub fn sequence(&self) -> u64 {
        self.current.config().sequence
    }

    /// The current channel config.
    pub fn channel_config(&self) -> &Arc<ChannelConfig> {
        &self.current
    }

    /// Turn a CONFIG_UPDATE envelope into the next config: Fabric `ValidatorImpl.ProposeConfigUpdate`, followed by
    /// the orderer's checks of the result (`ChainSupport.ProposeConfigUpdate`).
    ///
    /// Steps, each failing with the named error:
    /// 1. decode `Envelope.payload` → `Payload` (header required) → `ChannelHeader` of type CONFIG_UPDATE (2) →
    ///    `ConfigUpdateEnvelope` → `ConfigUpdate` ([`ConfigTxError::Malformed`], [`ConfigTxError::WrongHeaderType`]);
    /// 2. `ConfigUpdate.channel_id` must be this channel ([`ConfigTxError::WrongChannel`]);
    /// 3. read set and write set are flattened (names checked, [`ConfigTxError::IllegalName`]); every read-set
    ///    element must exist at the same version ([`ConfigTxError::ReadSetUnknown`], [`ConfigTxError::ReadSetVersion`]);
    /// 4. the delta set is the write-set elements whose version differs from the read set's (or that are not in
    ///    it); it must be non-empty ([`ConfigTxError::EmptyDelta`]);
    /// 5. for each delta element (in path order): its new mod_policy must be well formed
    ///    ([`ConfigTxError::InvalidModPolicy`]); a new element must have version 0
    ///    ([`ConfigTxError::NewElementVersion`]); an existing one must have current version + 1
    ///    ([`ConfigTxError::VersionNotIncremented`]) and its *current* mod_policy, resolved relative to the group
    ///    holding it (for a group: the group itself), must be satisfied by the `ConfigSignature`s
    ///    ([`ConfigTxError::MissingModPolicy`], [`ConfigTxError::PolicyNotSatisfied`]). Each signature signs
    ///    `signature_header ‖ config_update` and is attributed to the header's creator;
    /// 6. the new tree is the current config with the delta applied; groups in the delta decide their own
    ///    membership, so members they no longer list are dropped ([`ConfigTxError::Rebuild`]);
    /// 7. the new config (sequence + 1) must be a valid channel config ([`ConfigTxError::InvalidConfig`]) and a
    ///    compatible successor: orderer section present with known orderer and channel capabilities, no section
    ///    dropped, no MSP ID changed for an existing org, no consensus type change without the
    ///    V1_4_2+ channel capability ([`ConfigTxError::Incompatible`]).
    ///
    /// Returns `ConfigEnvelope{config: {sequence + 1, new tree}, last_update: config_update_envelope}`.
    /// Version and sequence arithmetic wraps at `u64::MAX` like Fabric's Go `uint64`s (and never panics).
    /// Not checked here (the orderer's job): the envelope's own signature and the `/Channel/Writers` filter,
    /// size limits, consensus metadata (e.g. etcdraft consenter set) rules and the maintenance-mode filter.
    pub fn propose(&self, config_update_envelope: &Envelope) -> Result<ConfigEnvelope, ConfigTxError> {
        let update_env = decode_config_update_envelope(config_update_envelope)?;
        let map = self.authorize(&update_env)?;
        let config =
            Config { sequence: self.sequence().wrapping_add(1), channel_group: Some(configmap::rebuild(&map)?) };
        self.check_successor(&config)?;
        Ok(ConfigEnvelope { config: Some(config), last_update: Some(config_update_envelope.clone()) })
    }

    /// Check a CONFIG transaction's `ConfigEnvelope` against the current config (Fabric `ValidatorImpl.Validate`,
    /// what a committing peer runs): the config must have sequence + 1 ([`ConfigTxError::WrongSequence`]), its
    /// `last_update` must pass steps 1-6 of [`Self::propose`], and the tree it yields must equal the config's
    /// ([`ConfigTxError::ResultMismatch`]). Does not run step 7 (Fabric's `Validate` does not either).
    pub fn validate(&self, env: &ConfigEnvelope) -> Result<(), ConfigTxError> {
        let config = env.config.as_ref().ok_or_else(|| ConfigTxError::malformed("ConfigEnvelope.config", "absent"))?;
        if config.sequence != self.sequence().wrapping_add(1) {
            return Err(ConfigTxError::WrongSequence {
                current: self.sequence(),
                expected: self.sequence().wrapping_add(1),
                found: config.sequence,
            });
        }
        let last_update =
            env.last_update.as_ref().ok_or_else(|| ConfigTxError::malformed("ConfigEnvelope.last_update", "absent"))?;
        let update_env = decode_config_update_envelope(last_update)?;
        let map = self.authorize(&update_env)?;
        let group = configmap::rebuild(&map)?;
        if config.channel_group.as_ref() != Some(&group) {
            return Err(ConfigTxError::ResultMismatch);
        }
        Ok(())
    }

    /// Steps 2-6 of [`Self::propose`] (Fabric `authorizeUpdate`): the full config map after the update.
    fn authorize(&self, update_env: &ConfigUpdateEnvelope) -> Result<ConfigMap, ConfigTxError> {
        let update = ConfigUpdate::decode(update_env.config_update.clone())
            .map_err(|e| ConfigTxError::malformed("ConfigUpdateEnvelope.config_update", e))?;
        if update.channel_id != self.channel_id() {
            return Err(ConfigTxError::WrongChannel {
                update: update.channel_id,
                channel: self.channel_id().to_owned(),
            });
        }

        let read_set = map_config(update.read_set.as_ref(), "read set")?;
        for (key, read) in &read_set {
            let current =
                self.map.get(key).ok_or_else(|| ConfigTxError::ReadSetUnknown { element: key.to_string() })?;
            if current.version() != read.version() {
                return Err(ConfigTxError::ReadSetVersion {
                    element: key.to_string(),
                    required: read.version(),
                    current: current.version(),
                });
            }
        }

        let write_set = map_config(update.write_set.as_ref(), "write set")?;
        let delta: ConfigMap = write_set
            .iter()
            .filter(|(key, written)| read_set.get(*key).is_none_or(|read| read.version() != written.version()))
            .map(|(key, element)| (key.clone(), element.clone()))
            .collect();

        let signed = signed_data(update_env)?;
        self.verify_delta(&delta, signed)?;

        let mut map = self.map.clone();
        map.extend(delta);
        // Every write-set element is now in the map: those in the delta were just added, the others are in the
        // read set at the same version, which step 3 found in the current config. Kept as Fabric's sanity check.
        if let Some(key) = write_set.keys().find(|key| !map.contains_key(*key)) {
            return Err(ConfigTxError::Rebuild(format!("{key} of the write set is not in the resulting config")));
        }
        Ok(map)
    }

    /// Fabric `verifyDeltaSet`.
    fn verify_delta(&self, delta: &ConfigMap, signed: Vec<SignedData>) -> Result<(), ConfigTxError> {
        if delta.is_empty() {
            return Err(ConfigTxError::EmptyDelta);
        }
        let signatures = SignatureSet::new(signed, self.current.msp_manager());
        for (key, proposed) in delta {
            check_mod_policy(key, proposed.mod_policy())?;
            let Some(existing) = self.map.get(key) else {
                if proposed.version() != 0 {
                    return Err(ConfigTxError::NewElementVersion {
                        element: key.to_string(),
                        version: proposed.version(),
                    });
                }
                continue;
            };
            if proposed.version() != existing.version().wrapping_add(1) {
                return Err(ConfigTxError::VersionNotIncremented {
                    element: key.to_string(),
                    proposed: proposed.version(),
                    current: existing.version(),
                });
            }
            let missing = || ConfigTxError::MissingModPolicy {
                element: key.to_string(),
                mod_policy: existing.mod_policy().to_owned(),
            };
            let path = existing.mod_policy_path().ok_or_else(missing)?;
            let policy = self.current.policy(&path).ok_or_else(missing)?;
            policy.evaluate(&signatures).map_err(|source| ConfigTxError::PolicyNotSatisfied {
                element: key.to_string(),
                policy: path.clone(),
                source,
            })?;
        }
        Ok(())
    }

    /// Step 7 of [`Self::propose`].
    fn check_successor(&self, config: &Config) -> Result<(), ConfigTxError> {
        let next = ChannelConfig::from_config(self.channel_id(), config).map_err(ConfigTxError::InvalidConfig)?;
        let current = &self.current;
        let incompatible = |reason: String| Err(ConfigTxError::Incompatible(reason));

        // Orderer checkResources: the orderer must be able to run the new config.
        let Some(next_orderer) = next.orderer() else {
            return incompatible("the config has no Orderer section".into());
        };
        let caps = next.capabilities();
        for (level, names, known) in [
            ("orderer", &caps.orderer, KNOWN_ORDERER_CAPABILITIES),
            ("channel", &caps.channel, KNOWN_CHANNEL_CAPABILITIES),
        ] {
            if let Some(name) = names.iter().find(|name| !known.contains(&name.as_str())) {
                return incompatible(format!("{level} capability {name} is required but not supported"));
            }
        }

        // Bundle.ValidateNew.
        if let Some(orderer) = current.orderer() {
            let migration_allowed =
                current.capabilities().channel.iter().any(|c| CONSENSUS_MIGRATION_CAPABILITIES.contains(&c.as_str()));
            if !migration_allowed && orderer.consensus_type() != next_orderer.consensus_type() {
                return incompatible(format!(
                    "consensus type may not change from {} to {}",
                    orderer.consensus_type(),
                    next_orderer.consensus_type()
                ));
            }
            if !current.capabilities().consensus_type_bft() && caps.consensus_type_bft() {
                if let Some(org) = next_orderer.organizations().values().find(|org| org.endpoints().is_empty()) {
                    return incompatible(format!("orderer org {} has no endpoints", org.name()));
                }
            }
            same_mspids("orderer", orderer.organizations(), next_orderer.organizations())?;
        }
        if let Some(application) = current.application() {
            let Some(next_application) = next.application() else {
                return incompatible("the current config has an Application section, the new one does not".into());
            };
            same_mspids("application", application.organizations(), next_application.organizations())?;
        }
        let consortiums = |cfg: &Config| cfg.channel_group.as_ref().and_then(|g| g.groups.get("Consortiums")).cloned();
        match (consortiums(current.config()), consortiums(config)) {
            (Some(old), Some(new)) => same_consortium_mspids(&old, &new)?,
            (Some(_), None) => {
                return incompatible("the current config has a Consortiums section, the new one does not".into())
            }
            (None, Some(_)) => {
                return incompatible("the current config has no Consortiums section, the new one does".into())
            }
            (None, None) => {}
        }
        Ok(())
    }
}

/// Orgs present in both configs must keep their MSP ID.
fn same_mspids(
    section: &str,
    old: &BTreeMap<String, ferrofabric_channelconfig::OrganizationConfig>,
    new: &BTreeMap<String, ferrofabric_channelconfig::OrganizationConfig>,
) -> Result<(), ConfigTxError> {
    for (name, org) in old {
        if let Some(next) = new.get(name) {
            if next.mspid() != org.mspid() {
                return Err(ConfigTxError::Incompatible(format!(
                    "{section} org {name} may not change its MSP ID from {} to {}",
                    org.mspid(),
                    next.mspid()
                )));
            }
        }
    }
    Ok(())
}

/// The same rule for `/Channel/Consortiums/<consortium>/<org>`, whose MSP IDs [`ChannelConfig`] does not expose.
fn same_consortium_mspids(old: &ConfigGroup, new: &ConfigGroup) -> Result<(), ConfigTxError> {
    let mspid = |org: &ConfigGroup| {
        org.values
            .get("MSP")
            .and_then(|v| MspConfig::decode(v.value.clone()).ok())
            .and_then(|m| FabricMspConfig::decode(m.config).ok())
            .map(|f| f.name)
    };
    for (consortium_name, consortium) in &old.groups {
        let Some(next_consortium) = new.groups.get(consortium_name) else { continue };
        for (org_name, org) in &consortium.groups {
            let Some(next_org) = next_consortium.groups.get(org_name) else { continue };
            if mspid(org) != mspid(next_org) {
                return Err(ConfigTxError::Incompatible(format!(
                    "consortium {consortium_name} org {org_name} may not change its MSP ID"
                )));
            }
        }
    }
    Ok(())
}

/// Fabric `validateModPolicy`: non-empty, and every `/`-separated element (after an optional leading `/`) a
/// legal config name.
fn check_mod_policy(key: &ElementKey, mod_policy: &str) -> Result<(), ConfigTxError> {
    let invalid = |reason: String| ConfigTxError::InvalidModPolicy {
        element: key.to_string(),
        mod_policy: mod_policy.to_owned(),
        reason,
    };
    if mod_policy.is_empty() {
        return Err(invalid("mod_policy not set".into()));
    }
    let trimmed = mod_policy.strip_prefix('/').unwrap_or(mod_policy);
    for (i, segment) in trimmed.split('/').enumerate() {
        check_config_id(segment).map_err(|reason| invalid(format!("path element at {i} is invalid: {reason}")))?;
    }
    Ok(())
}

/// Fabric `protoutil.ConfigUpdateEnvelopeAsSignedData`: one item per `ConfigSignature`, signing
/// `signature_header ‖ config_update`, by the header's creator.
fn signed_data(update_env: &ConfigUpdateEnvelope) -> Result<Vec<SignedData>, ConfigTxError> {
    update_env
        .signatures
        .iter()
        .enumerate()
        .map(|(i, sig)| {
            let header = SignatureHeader::decode(sig.signature_header.clone()).map_err(|e| {
                ConfigTxError::malformed(format!("ConfigUpdateEnvelope.signatures[{i}].signature_header"), e)
            })?;
            let mut data = Vec::with_capacity(sig.signature_header.len() + update_env.config_update.len());
            data.extend_from_slice(&sig.signature_header);
            data.extend_from_slice(&update_env.config_update);
            Ok(SignedData { data: Bytes::from(data), identity: header.creator, signature: sig.signature.clone() })
        })
        .collect()
}

/// Fabric `protoutil.EnvelopeToConfigUpdate`: Envelope → Payload → CONFIG_UPDATE header → ConfigUpdateEnvelope.
fn decode_config_update_envelope(env: &Envelope) -> Result<ConfigUpdateEnvelope, ConfigTxError> {
    let payload = Payload::decode(env.payload.clone()).map_err(|e| ConfigTxError::malformed("Envelope.payload", e))?;
    let header = payload.header.as_ref().ok_or_else(|| ConfigTxError::malformed("Payload.header", "absent"))?;
    let channel_header = ChannelHeader::decode(header.channel_header.clone())
        .map_err(|e| ConfigTxError::malformed("Payload.header.channel_header", e))?;
    if channel_header.r#type != HeaderType::ConfigUpdate as i32 {
        return Err(ConfigTxError::WrongHeaderType {
            found: channel_header.r#type,
            expected: HeaderType::ConfigUpdate as i32,
        });
    }
    ConfigUpdateEnvelope::decode(payload.data.clone()).map_err(|e| ConfigTxError::malformed("Payload.data", e))
}
