//! The parsed channel configuration: MSPs, the policy tree and the typed config values.
//!
//! Follows Fabric's `common/channelconfig` (`bundle.go`, `channel.go`, `orderer.go`, `application.go`,
//! `applicationorg.go`, `organization.go`, `consortium(s).go`, `msp.go`, `acls.go`) for which groups and
//! value keys are allowed and which values are validated, and `common/policies/policy.go`
//! (`NewManagerImpl`, `GetPolicy`) plus `implicitmeta.go` for the policy tree.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_msp::{Msp, MspManager};
use ferrofabric_protos::common::{
    self, policy::PolicyType, Block, Config, ConfigEnvelope, ConfigGroup, ConfigValue, Envelope, HeaderType,
    SignaturePolicyEnvelope,
};
use ferrofabric_protos::msp::MspConfig;
use ferrofabric_protos::{orderer as ab, peer};
use prost::Message;

use crate::error::PolicyError;
use crate::policy::{CompiledSignaturePolicy, ImplicitMetaPolicy, Policy, RejectPolicy, UnsupportedPolicy};

/// Name of the root group; absolute policy paths start with `/Channel/`.
const ROOT: &str = "Channel";
const APPLICATION: &str = "Application";
const ORDERER: &str = "Orderer";
const CONSORTIUMS: &str = "Consortiums";
const MSP_KEY: &str = "MSP";
const CAPABILITIES_KEY: &str = "Capabilities";

/// Hash algorithm names Fabric accepts for `HashingAlgorithm` (bccsp constants).
const HASH_SHA256: &str = "SHA256";
const HASH_SHA3_256: &str = "SHA3_256";

/// Policy maps are keyed by the path relative to the group they belong to ("Readers", "Org1MSP/Admins").
type PolicyMap = BTreeMap<String, Arc<dyn Policy>>;

/// The capability names enabled at the three levels of a channel config (`Capabilities` values of
/// `/Channel`, `/Channel/Orderer` and `/Channel/Application`; Fabric `common/capabilities`).
/// E.g. for the Fabric 2.5 fixture: channel `{"V2_0"}`, orderer `{"V2_0"}`, application `{"V2_5"}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// Channel-level capabilities (`/Channel/Capabilities`).
    pub channel: BTreeSet<String>,
    /// Orderer capabilities (`/Channel/Orderer/Capabilities`); empty if there is no Orderer group.
    pub orderer: BTreeSet<String>,
    /// Application capabilities (`/Channel/Application/Capabilities`); empty if there is no Application group.
    pub application: BTreeSet<String>,
}

impl Capabilities {
    /// Fabric `ChannelProvider.OrgSpecificOrdererEndpoints`: V1_4_2 or later at channel level.
    pub fn org_specific_orderer_endpoints(&self) -> bool {
        ["V1_4_2", "V1_4_3", "V2_0", "V3_0"].iter().any(|c| self.channel.contains(*c))
    }

    /// Fabric `ChannelProvider.ConsensusTypeBFT`: channel capability V3_0.
    pub fn consensus_type_bft(&self) -> bool {
        self.channel.contains("V3_0")
    }

    /// Fabric `ApplicationProvider.ACLs`: application capability V1_2 or later.
    pub fn application_acls(&self) -> bool {
        ["V1_2", "V1_3", "V1_4_2", "V2_0", "V2_5"].iter().any(|c| self.application.contains(*c))
    }
}

/// The orderer's `BatchSize` value (`orderer.BatchSize`, Fabric `common/channelconfig/orderer.go`): block
/// cutting limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSize {
    /// Maximum number of transactions in a block (> 0).
    pub max_message_count: u32,
    /// Hard limit on the serialized size of the transactions of a block, in bytes (> 0).
    pub absolute_max_bytes: u32,
    /// Preferred block size in bytes (> 0, <= `absolute_max_bytes`).
    pub preferred_max_bytes: u32,
}

/// An anchor peer of an application organization (`peer.AnchorPeer`, Fabric `applicationorg.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnchorPeer {
    /// DNS name or IP address.
    pub host: String,
    /// TCP port.
    pub port: i32,
}

/// One organization group (`/Channel/Application/<org>`, `/Channel/Orderer/<org>` or
/// `/Channel/Consortiums/<consortium>/<org>`; Fabric `organization.go`, `applicationorg.go`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrganizationConfig {
    name: String,
    mspid: String,
    anchor_peers: Vec<AnchorPeer>,
    endpoints: Vec<String>,
}

impl OrganizationConfig {
    /// The group name, e.g. `Org1MSP` (often, but not necessarily, equal to the MSP ID).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The MSP ID of the organization's `MSP` value.
    pub fn mspid(&self) -> &str {
        &self.mspid
    }
    /// `AnchorPeers` (application organizations only; empty otherwise).
    pub fn anchor_peers(&self) -> &[AnchorPeer] {
        &self.anchor_peers
    }
    /// `Endpoints` (orderer organizations only, `host:port` strings; empty otherwise).
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }
}

/// The `/Channel/Orderer` group (Fabric `common/channelconfig/orderer.go`).
#[derive(Debug, Clone)]
pub struct OrdererConfig {
    batch_size: BatchSize,
    batch_timeout: Duration,
    consensus_type: String,
    consensus_metadata: Bytes,
    consensus_state: i32,
    kafka_brokers: Vec<String>,
    max_channels_count: u64,
    consenters: Vec<common::Consenter>,
    organizations: BTreeMap<String, OrganizationConfig>,
}

impl OrdererConfig {
    /// `BatchSize` (validated as Fabric does: all three > 0, preferred <= absolute).
    pub fn batch_size(&self) -> BatchSize {
        self.batch_size
    }
    /// `BatchTimeout` parsed from its Go duration string (e.g. "2s"); always > 0.
    pub fn batch_timeout(&self) -> Duration {
        self.batch_timeout
    }
    /// `ConsensusType.type`, e.g. "etcdraft" or "BFT".
    pub fn consensus_type(&self) -> &str {
        &self.consensus_type
    }
    /// `ConsensusType.metadata`: consensus-specific bytes, e.g. a marshaled `etcdraft.ConfigMetadata`.
    pub fn consensus_metadata(&self) -> &Bytes {
        &self.consensus_metadata
    }
    /// `ConsensusType.state` as the raw enum value (0 = STATE_NORMAL, 1 = STATE_MAINTENANCE).
    pub fn consensus_state(&self) -> i32 {
        self.consensus_state
    }
    /// `KafkaBrokers.brokers` (legacy; usually empty).
    pub fn kafka_brokers(&self) -> &[String] {
        &self.kafka_brokers
    }
    /// `ChannelRestrictions.max_count` (0 if unset).
    pub fn max_channels_count(&self) -> u64 {
        self.max_channels_count
    }
    /// `Orderers.consenter_mapping` (BFT consenters; empty for etcdraft).
    pub fn consenters(&self) -> &[common::Consenter] {
        &self.consenters
    }
    /// The orderer organizations by group name.
    pub fn organizations(&self) -> &BTreeMap<String, OrganizationConfig> {
        &self.organizations
    }
}

/// The `/Channel/Application` group (Fabric `common/channelconfig/application.go`, `acls.go`).
#[derive(Debug, Clone)]
pub struct ApplicationConfig {
    organizations: BTreeMap<String, OrganizationConfig>,
    acls: BTreeMap<String, String>,
}

impl ApplicationConfig {
    /// The application organizations by group name.
    pub fn organizations(&self) -> &BTreeMap<String, OrganizationConfig> {
        &self.organizations
    }
    /// `ACLs`: resource name (e.g. `peer/Propose`) to absolute policy path. Relative references are made
    /// absolute under `/Channel/Application/`; empty references are dropped (Fabric falls back to defaults).
    pub fn acls(&self) -> &BTreeMap<String, String> {
        &self.acls
    }
    /// The absolute policy path for an ACL resource, if the config names one.
    pub fn acl_policy(&self, resource: &str) -> Option<&str> {
        self.acls.get(resource).map(String::as_str)
    }
}

/// The parsed channel configuration (Fabric's `channelconfig.Bundle`): MSPs, compiled policy tree and
/// typed values, plus the raw `common.Config`.
///
/// Built from a config block, a CONFIG envelope, a `ConfigEnvelope` or a `Config`. Construction fails
/// with [`PolicyError`] naming the config path when Fabric's bundle construction would fail (bad bytes,
/// disallowed groups or value keys, invalid batch size/timeout, unknown hashing algorithm, MSP setup
/// errors, uncompilable policies, ...). Immutable and `Send + Sync`.
pub struct ChannelConfig {
    channel_id: String,
    config: Config,
    msp_manager: Arc<MspManager>,
    policies: PolicyMap,
    capabilities: Capabilities,
    hashing_algorithm: String,
    block_data_hashing_width: u32,
    orderer_addresses: Vec<String>,
    consortium: Option<String>,
    orderer: Option<OrdererConfig>,
    application: Option<ApplicationConfig>,
}

impl std::fmt::Debug for ChannelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChannelConfig")
            .field("channel_id", &self.channel_id)
            .field("sequence", &self.sequence())
            .field("policies", &self.policies.keys().collect::<Vec<_>>())
            .field("capabilities", &self.capabilities)
            .field("orderer", &self.orderer)
            .field("application", &self.application)
            .finish_non_exhaustive()
    }
}

impl ChannelConfig {
    /// From a config block: exactly one envelope, a CONFIG (type 1) transaction (see [`Self::from_envelope`]).
    pub fn from_config_block(block: &Block) -> Result<ChannelConfig, PolicyError> {
        let data = block.data.as_ref().ok_or_else(|| PolicyError::config("Block.data", "config block has no data"))?;
        let [envelope] = data.data.as_slice() else {
            return Err(PolicyError::config(
                "Block.data",
                format!("config block must hold exactly 1 envelope, has {}", data.data.len()),
            ));
        };
        let envelope = Envelope::decode(envelope.clone())
            .map_err(|e| PolicyError::config("Block.data[0]", format!("bad Envelope: {e}")))?;
        Self::from_envelope(&envelope)
    }

    /// From a CONFIG transaction envelope (Fabric `NewBundleFromEnvelope`): the channel ID comes from the
    /// channel header, the config from the `ConfigEnvelope` in the payload data.
    pub fn from_envelope(envelope: &Envelope) -> Result<ChannelConfig, PolicyError> {
        let (channel_id, config_envelope) = decode_config_envelope(envelope, "Envelope")?;
        Self::from_envelope_parts(&channel_id, &config_envelope)
    }

    /// From a `ConfigEnvelope`. Its `Config` carries no channel ID, so it is taken from the channel header
    /// of `last_update`; errors if there is none (e.g. genesis blocks: use [`Self::from_config_block`] or
    /// [`Self::from_config`]).
    pub fn from_config_envelope(env: &ConfigEnvelope) -> Result<ChannelConfig, PolicyError> {
        let last_update = env.last_update.as_ref().ok_or_else(|| {
            PolicyError::config(
                "ConfigEnvelope.last_update",
                "absent, so the channel ID is unknown; use ChannelConfig::from_config",
            )
        })?;
        let payload = common::Payload::decode(last_update.payload.clone())
            .map_err(|e| PolicyError::config("ConfigEnvelope.last_update.payload", format!("bad Payload: {e}")))?;
        let channel_header = decode_channel_header(&payload, "ConfigEnvelope.last_update.payload")?;
        Self::from_envelope_parts(&channel_header.channel_id, env)
    }

    fn from_envelope_parts(channel_id: &str, env: &ConfigEnvelope) -> Result<ChannelConfig, PolicyError> {
        let config = env.config.as_ref().ok_or_else(|| PolicyError::config("ConfigEnvelope.config", "absent"))?;
        Self::from_config(channel_id, config)
    }

    /// From a `Config` and the channel's ID (Fabric `channelconfig.NewBundle`).
    pub fn from_config(channel_id: &str, config: &Config) -> Result<ChannelConfig, PolicyError> {
        let root_path = format!("/{ROOT}");
        let root = config
            .channel_group
            .as_ref()
            .ok_or_else(|| PolicyError::config(&root_path, "config must contain a channel group"))?;
        validate_channel_id(channel_id)?;
        validate_names(&root_path, root)?;
        pre_validate(root)?;

        let values = Values::new(
            &root_path,
            root,
            &[
                "HashingAlgorithm",
                "BlockDataHashingStructure",
                "OrdererAddresses",
                "Orderers",
                "Consortium",
                CAPABILITIES_KEY,
            ],
        )?;
        let hashing: common::HashingAlgorithm = values.decode("HashingAlgorithm")?;
        let width: common::BlockDataHashingStructure = values.decode("BlockDataHashingStructure")?;
        let addresses: common::OrdererAddresses = values.decode("OrdererAddresses")?;
        let _orderers: common::Orderers = values.decode("Orderers")?;
        let consortium: Option<common::Consortium> = values.decode_opt("Consortium")?;
        let mut capabilities = Capabilities { channel: values.decode_capabilities()?, ..Capabilities::default() };

        if hashing.name != HASH_SHA256 && hashing.name != HASH_SHA3_256 {
            return Err(PolicyError::config(
                format!("{root_path}/HashingAlgorithm"),
                format!("unknown hashing algorithm {:?}", hashing.name),
            ));
        }
        if width.width != u32::MAX {
            return Err(PolicyError::config(
                format!("{root_path}/BlockDataHashingStructure"),
                format!("width must be {} (MaxUint32), is {}", u32::MAX, width.width),
            ));
        }
        if !capabilities.org_specific_orderer_endpoints() && addresses.addresses.is_empty() {
            return Err(PolicyError::config(format!("{root_path}/OrdererAddresses"), "must set some OrdererAddresses"));
        }
        if capabilities.consensus_type_bft() && !addresses.addresses.is_empty() {
            return Err(PolicyError::config(
                format!("{root_path}/OrdererAddresses"),
                "global OrdererAddresses are not allowed with the V3_0 channel capability",
            ));
        }

        let mut msps = MspCollector::default();
        let mut orderer = None;
        let mut application = None;
        for (name, group) in sorted(&root.groups) {
            let path = format!("{root_path}/{name}");
            match name.as_str() {
                APPLICATION => {
                    let (app, caps) = parse_application(&path, group, &mut msps)?;
                    capabilities.application = caps;
                    application = Some(app);
                }
                ORDERER => {
                    let (ord, caps) = parse_orderer(&path, group, &capabilities, &mut msps)?;
                    capabilities.orderer = caps;
                    orderer = Some(ord);
                }
                CONSORTIUMS => parse_consortiums(&path, group, &mut msps)?,
                _ => return Err(PolicyError::config(&path, "disallowed channel group")),
            }
        }
        // The ACL check needs the application capabilities, known only now.
        let has_acls = root.groups.get(APPLICATION).is_some_and(|g| g.values.contains_key("ACLs"));
        if has_acls && !capabilities.application_acls() {
            return Err(PolicyError::config(
                format!("{root_path}/{APPLICATION}/ACLs"),
                "ACLs may not be specified without the required application capability",
            ));
        }

        let msp_manager = Arc::new(MspManager::new(msps.into_msps()));
        let policies = build_policies(ROOT, root)?;

        Ok(ChannelConfig {
            channel_id: channel_id.to_owned(),
            config: config.clone(),
            msp_manager,
            policies,
            capabilities,
            hashing_algorithm: hashing.name,
            block_data_hashing_width: width.width,
            orderer_addresses: addresses.addresses,
            consortium: consortium.map(|c| c.name),
            orderer,
            application,
        })
    }

    /// The channel ID, e.g. "mychannel".
    pub fn channel_id(&self) -> &str {
        &self.channel_id
    }

    /// `Config.sequence`: how many config updates led to this config (0 for a genesis config).
    pub fn sequence(&self) -> u64 {
        self.config.sequence
    }

    /// TLS root and intermediate CA certificates (PEM) of the channel's orderer organizations: what a consenter
    /// trusts for the other consenters' server certificates (Fabric's cluster `Comm` adds them to its roots).
    pub fn orderer_tls_roots(&self) -> Vec<Vec<u8>> {
        self.tls_roots_of("Orderer")
    }

    /// TLS root and intermediate CA certificates (PEM) of the channel's application organizations: what a peer
    /// trusts for the other peers' server certificates (Fabric's peer adds them to its client roots when it joins).
    pub fn application_tls_roots(&self) -> Vec<Vec<u8>> {
        self.tls_roots_of("Application")
    }

    /// The TLS CA certificates of the organizations of the channel group `group`.
    fn tls_roots_of(&self, group: &str) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let Some(orderer) = self.config().channel_group.as_ref().and_then(|g| g.groups.get(group)) else {
            return out;
        };
        for org in orderer.groups.values() {
            let Some(value) = org.values.get("MSP") else { continue };
            let Ok(msp) = MspConfig::decode(value.value.clone()) else { continue };
            if msp.r#type != 0 {
                continue;
            }
            let Ok(fabric) = ferrofabric_protos::msp::FabricMspConfig::decode(msp.config) else { continue };
            out.extend(fabric.tls_root_certs.iter().chain(fabric.tls_intermediate_certs.iter()).map(|c| c.to_vec()));
        }
        out
    }

    /// The raw config proto, for values not wrapped here.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// All MSPs of the channel (application, orderer and consortium organizations).
    pub fn msp_manager(&self) -> &Arc<MspManager> {
        &self.msp_manager
    }

    /// The policy at `path`, resolved as Fabric's root policy manager does (`GetPolicy`):
    /// absolute (`/Channel/Application/Endorsement`, `/Channel/Orderer/BlockValidation`,
    /// `/Channel/Application/Org1MSP/Endorsement`) or relative to `/Channel` (`Application/Writers`).
    /// `None` where Fabric would hand out its reject-all policy (empty or unknown path).
    pub fn policy(&self, path: &str) -> Option<Arc<dyn Policy>> {
        resolve(ROOT, &self.policies, path).cloned()
    }

    /// The policy a marshaled `peer.ApplicationPolicy` names (Fabric's `ApplicationPolicyEvaluator`,
    /// `core/policy/application.go`): its signature policy compiled, or the channel policy it references.
    ///
    /// Errors: undecodable bytes, an empty policy, a bad signature policy, a reference to no policy.
    pub fn application_policy(&self, marshaled: &Bytes) -> Result<Arc<dyn Policy>, PolicyError> {
        let ap = peer::ApplicationPolicy::decode(marshaled.clone()).map_err(PolicyError::BadApplicationPolicy)?;
        match ap.r#type {
            Some(peer::application_policy::Type::SignaturePolicy(env)) => crate::compile_signature_policy(&env),
            Some(peer::application_policy::Type::ChannelConfigPolicyReference(path)) => {
                self.policy(&path).ok_or(PolicyError::ChannelPolicyNotFound(path))
            }
            None => Err(PolicyError::UnsupportedApplicationPolicy),
        }
    }

    /// Absolute paths of every policy in the tree, sorted (e.g. `/Channel/Admins`, ...).
    pub fn policy_paths(&self) -> impl Iterator<Item = String> + '_ {
        self.policies.keys().map(|k| format!("/{ROOT}/{k}"))
    }

    /// Capability names at channel, orderer and application level.
    pub fn capabilities(&self) -> Capabilities {
        self.capabilities.clone()
    }

    /// `HashingAlgorithm.name` ("SHA256" or "SHA3_256").
    pub fn hashing_algorithm(&self) -> &str {
        &self.hashing_algorithm
    }

    /// `BlockDataHashingStructure.width` (always `u32::MAX`, the only value Fabric accepts).
    pub fn block_data_hashing_width(&self) -> u32 {
        self.block_data_hashing_width
    }

    /// Channel-level `OrdererAddresses` (`host:port`; may be empty when orgs carry their own endpoints).
    pub fn orderer_addresses(&self) -> &[String] {
        &self.orderer_addresses
    }

    /// Where peers and clients reach the ordering service (Fabric's `OrdererEndpoints` rule): every orderer
    /// organisation's `Endpoints`, with the organisation's MSP ID; where no organisation has any, the channel's
    /// `OrdererAddresses` with an empty MSP ID.
    pub fn orderer_endpoints(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if let Some(orderer) = self.orderer() {
            for org in orderer.organizations().values() {
                out.extend(org.endpoints().iter().map(|e| (e.clone(), org.mspid().to_owned())));
            }
        }
        if out.is_empty() {
            out.extend(self.orderer_addresses().iter().map(|a| (a.clone(), String::new())));
        }
        out
    }

    /// The `Consortium` value's name, for channels created through a system channel.
    pub fn consortium(&self) -> Option<&str> {
        self.consortium.as_deref()
    }

    /// The Orderer group, if present.
    pub fn orderer(&self) -> Option<&OrdererConfig> {
        self.orderer.as_ref()
    }

    /// The Application group, if present.
    pub fn application(&self) -> Option<&ApplicationConfig> {
        self.application.as_ref()
    }
}

/// Decode Envelope → Payload → ChannelHeader (must be CONFIG) and ConfigEnvelope.
fn decode_config_envelope(envelope: &Envelope, path: &str) -> Result<(String, ConfigEnvelope), PolicyError> {
    let payload = common::Payload::decode(envelope.payload.clone())
        .map_err(|e| PolicyError::config(format!("{path}.payload"), format!("bad Payload: {e}")))?;
    let payload_path = format!("{path}.payload");
    let channel_header = decode_channel_header(&payload, &payload_path)?;
    if channel_header.r#type != HeaderType::Config as i32 {
        return Err(PolicyError::config(
            format!("{payload_path}.header.channel_header"),
            format!("header type {} is not CONFIG ({})", channel_header.r#type, HeaderType::Config as i32),
        ));
    }
    let config_envelope = ConfigEnvelope::decode(payload.data.clone())
        .map_err(|e| PolicyError::config(format!("{payload_path}.data"), format!("bad ConfigEnvelope: {e}")))?;
    Ok((channel_header.channel_id, config_envelope))
}

fn decode_channel_header(payload: &common::Payload, path: &str) -> Result<common::ChannelHeader, PolicyError> {
    let header = payload
        .header
        .as_ref()
        .ok_or_else(|| PolicyError::config(format!("{path}.header"), "envelope header cannot be nil"))?;
    common::ChannelHeader::decode(header.channel_header.clone())
        .map_err(|e| PolicyError::config(format!("{path}.header.channel_header"), format!("bad ChannelHeader: {e}")))
}

/// Fabric `configtx.ValidateChannelID`: 1..=249 characters, a lowercase letter then `[a-z0-9.-]`.
fn validate_channel_id(channel_id: &str) -> Result<(), PolicyError> {
    let mut chars = channel_id.chars();
    let ok = channel_id.len() <= MAX_NAME_LEN
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(PolicyError::config("channel ID", format!("illegal channel ID {channel_id:?}")))
    }
}

/// Longest channel ID or config element name Fabric accepts (`configtx.MaxLength`).
const MAX_NAME_LEN: usize = 249;

/// Fabric `configtx` `validateConfigID`, applied to every group, value and policy name below `group`:
/// 1..=249 characters of `[a-zA-Z0-9.-]`, not `.` or `..`.
fn validate_names(path: &str, group: &ConfigGroup) -> Result<(), PolicyError> {
    let check = |name: &String| {
        let ok = !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && name != "."
            && name != ".."
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
        if ok {
            Ok(())
        } else {
            Err(PolicyError::config(format!("{path}/{name}"), "illegal config element name"))
        }
    };
    for name in group.values.keys().chain(group.policies.keys()) {
        check(name)?;
    }
    for (name, sub) in sorted(&group.groups) {
        check(name)?;
        validate_names(&format!("{path}/{name}"), sub)?;
    }
    Ok(())
}

/// Fabric `bundle.go` `preValidate`: channel or application capabilities need orderer capabilities.
fn pre_validate(root: &ConfigGroup) -> Result<(), PolicyError> {
    let Some(orderer) = root.groups.get(ORDERER) else {
        return Ok(());
    };
    if orderer.values.contains_key(CAPABILITIES_KEY) {
        return Ok(());
    }
    if root.values.contains_key(CAPABILITIES_KEY) {
        return Err(PolicyError::config(
            format!("/{ROOT}/{CAPABILITIES_KEY}"),
            "cannot enable channel capabilities without orderer support first",
        ));
    }
    if root.groups.get(APPLICATION).is_some_and(|g| g.values.contains_key(CAPABILITIES_KEY)) {
        return Err(PolicyError::config(
            format!("/{ROOT}/{APPLICATION}/{CAPABILITIES_KEY}"),
            "cannot enable application capabilities without orderer support first",
        ));
    }
    Ok(())
}

/// Entries of a map sorted by key: Fabric iterates Go maps in random order, we pick a fixed one.
fn sorted<V>(map: &HashMap<String, V>) -> Vec<(&String, &V)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

/// The values of one group, checked against the keys Fabric allows there (`StandardValues`: any other
/// key is an error). A missing value decodes as the default message, as in Fabric.
struct Values<'a> {
    path: &'a str,
    values: &'a HashMap<String, ConfigValue>,
}

impl<'a> Values<'a> {
    fn new(path: &'a str, group: &'a ConfigGroup, allowed: &[&str]) -> Result<Self, PolicyError> {
        if let Some((key, _)) = sorted(&group.values).into_iter().find(|(key, _)| !allowed.contains(&key.as_str())) {
            return Err(PolicyError::config(format!("{path}/{key}"), "unexpected value key"));
        }
        Ok(Values { path, values: &group.values })
    }

    fn decode_opt<M: Message + Default>(&self, key: &str) -> Result<Option<M>, PolicyError> {
        let Some(value) = self.values.get(key) else {
            return Ok(None);
        };
        M::decode(value.value.clone())
            .map(Some)
            .map_err(|e| PolicyError::config(format!("{}/{key}", self.path), format!("cannot decode value: {e}")))
    }

    fn decode<M: Message + Default>(&self, key: &str) -> Result<M, PolicyError> {
        Ok(self.decode_opt(key)?.unwrap_or_default())
    }

    fn decode_capabilities(&self) -> Result<BTreeSet<String>, PolicyError> {
        let caps: common::Capabilities = self.decode(CAPABILITIES_KEY)?;
        Ok(caps.capabilities.into_keys().collect())
    }
}

/// Fabric `MSPConfigHandler`: one MSP per MSP ID; a second org naming the same MSP ID must carry an
/// identical `MSPConfig`.
#[derive(Default)]
struct MspCollector {
    by_id: BTreeMap<String, (MspConfig, Msp)>,
}

impl MspCollector {
    /// Set up the MSP of the org group at `org_path` and return its MSP ID.
    fn propose(&mut self, org_path: &str, values: &Values<'_>) -> Result<String, PolicyError> {
        let msp_path = format!("{org_path}/{MSP_KEY}");
        let config: MspConfig = values.decode(MSP_KEY)?;
        let msp = Msp::from_config(&config).map_err(|source| PolicyError::Msp { path: msp_path.clone(), source })?;
        let mspid = msp.name().to_owned();
        if mspid.is_empty() {
            return Err(PolicyError::config(&msp_path, "MSP has an empty MSP ID"));
        }
        match self.by_id.get(&mspid) {
            Some((existing, _)) if *existing != config => {
                return Err(PolicyError::config(&msp_path, format!("two different definitions of MSP {mspid}")));
            }
            Some(_) => {}
            None => {
                self.by_id.insert(mspid.clone(), (config, msp));
            }
        }
        Ok(mspid)
    }

    fn into_msps(self) -> Vec<Msp> {
        self.by_id.into_values().map(|(_, msp)| msp).collect()
    }
}

fn no_subgroups(path: &str, group: &ConfigGroup) -> Result<(), PolicyError> {
    match sorted(&group.groups).first() {
        Some((name, _)) => {
            Err(PolicyError::config(format!("{path}/{name}"), "organization groups may not have sub-groups"))
        }
        None => Ok(()),
    }
}

fn parse_application(
    path: &str,
    group: &ConfigGroup,
    msps: &mut MspCollector,
) -> Result<(ApplicationConfig, BTreeSet<String>), PolicyError> {
    let values = Values::new(path, group, &["ACLs", CAPABILITIES_KEY])?;
    let acls: peer::AcLs = values.decode("ACLs")?;
    let caps = values.decode_capabilities()?;
    let acls = acls
        .acls
        .into_iter()
        .filter(|(_, resource)| !resource.policy_ref.is_empty())
        .map(|(name, resource)| {
            let reference = if resource.policy_ref.starts_with('/') {
                resource.policy_ref
            } else {
                format!("/{ROOT}/{APPLICATION}/{}", resource.policy_ref)
            };
            (name, reference)
        })
        .collect();

    let mut organizations = BTreeMap::new();
    for (name, org) in sorted(&group.groups) {
        let org_path = format!("{path}/{name}");
        no_subgroups(&org_path, org)?;
        let org_values = Values::new(&org_path, org, &["AnchorPeers", MSP_KEY])?;
        let anchors: peer::AnchorPeers = org_values.decode("AnchorPeers")?;
        let mspid = msps.propose(&org_path, &org_values)?;
        organizations.insert(
            name.clone(),
            OrganizationConfig {
                name: name.clone(),
                mspid,
                anchor_peers: anchors
                    .anchor_peers
                    .into_iter()
                    .map(|a| AnchorPeer { host: a.host, port: a.port })
                    .collect(),
                endpoints: Vec::new(),
            },
        );
    }
    Ok((ApplicationConfig { organizations, acls }, caps))
}

fn parse_orderer(
    path: &str,
    group: &ConfigGroup,
    channel_caps: &Capabilities,
    msps: &mut MspCollector,
) -> Result<(OrdererConfig, BTreeSet<String>), PolicyError> {
    let values = Values::new(
        path,
        group,
        &[
            "ConsensusType",
            "BatchSize",
            "BatchTimeout",
            "KafkaBrokers",
            "ChannelRestrictions",
            "Orderers",
            CAPABILITIES_KEY,
        ],
    )?;
    let consensus: ab::ConsensusType = values.decode("ConsensusType")?;
    let batch_size: ab::BatchSize = values.decode("BatchSize")?;
    let batch_timeout: ab::BatchTimeout = values.decode("BatchTimeout")?;
    let kafka: ab::KafkaBrokers = values.decode("KafkaBrokers")?;
    let restrictions: ab::ChannelRestrictions = values.decode("ChannelRestrictions")?;
    let orderers: common::Orderers = values.decode("Orderers")?;
    let caps = values.decode_capabilities()?;

    let size_path = format!("{path}/BatchSize");
    for (field, value) in [
        ("max message count", batch_size.max_message_count),
        ("absolute max bytes", batch_size.absolute_max_bytes),
        ("preferred max bytes", batch_size.preferred_max_bytes),
    ] {
        if value == 0 {
            return Err(PolicyError::config(&size_path, format!("{field} must not be 0")));
        }
    }
    if batch_size.preferred_max_bytes > batch_size.absolute_max_bytes {
        return Err(PolicyError::config(
            &size_path,
            format!(
                "preferred max bytes ({}) greater than absolute max bytes ({})",
                batch_size.preferred_max_bytes, batch_size.absolute_max_bytes
            ),
        ));
    }
    let timeout_path = format!("{path}/BatchTimeout");
    let timeout_ns =
        crate::duration::parse(&batch_timeout.timeout).map_err(|e| PolicyError::config(&timeout_path, e))?;
    let timeout_ns = u64::try_from(timeout_ns)
        .ok()
        .filter(|ns| *ns > 0)
        .ok_or_else(|| PolicyError::config(&timeout_path, "batch timeout must be positive"))?;

    let mut organizations = BTreeMap::new();
    for (name, org) in sorted(&group.groups) {
        let org_path = format!("{path}/{name}");
        no_subgroups(&org_path, org)?;
        if !channel_caps.org_specific_orderer_endpoints() && org.values.contains_key("Endpoints") {
            return Err(PolicyError::config(
                format!("{org_path}/Endpoints"),
                "orderer org endpoints need the V1_4_2 channel capability or later",
            ));
        }
        let org_values = Values::new(&org_path, org, &["Endpoints", MSP_KEY])?;
        let endpoints: common::OrdererAddresses = org_values.decode("Endpoints")?;
        let mspid = msps.propose(&org_path, &org_values)?;
        if channel_caps.consensus_type_bft() && endpoints.addresses.is_empty() {
            return Err(PolicyError::config(
                format!("{org_path}/Endpoints"),
                "every orderer organization needs endpoints with the V3_0 channel capability",
            ));
        }
        organizations.insert(
            name.clone(),
            OrganizationConfig { name: name.clone(), mspid, anchor_peers: Vec::new(), endpoints: endpoints.addresses },
        );
    }

    Ok((
        OrdererConfig {
            batch_size: BatchSize {
                max_message_count: batch_size.max_message_count,
                absolute_max_bytes: batch_size.absolute_max_bytes,
                preferred_max_bytes: batch_size.preferred_max_bytes,
            },
            batch_timeout: Duration::from_nanos(timeout_ns),
            consensus_type: consensus.r#type,
            consensus_metadata: consensus.metadata,
            consensus_state: consensus.state,
            kafka_brokers: kafka.brokers,
            max_channels_count: restrictions.max_count,
            consenters: orderers.consenter_mapping,
            organizations,
        },
        caps,
    ))
}

/// `/Channel/Consortiums/<consortium>/<org>`: only the MSPs matter here.
fn parse_consortiums(path: &str, group: &ConfigGroup, msps: &mut MspCollector) -> Result<(), PolicyError> {
    for (name, consortium) in sorted(&group.groups) {
        let consortium_path = format!("{path}/{name}");
        let values = Values::new(&consortium_path, consortium, &["ChannelCreationPolicy"])?;
        let _: common::Policy = values.decode("ChannelCreationPolicy")?;
        for (org_name, org) in sorted(&consortium.groups) {
            let org_path = format!("{consortium_path}/{org_name}");
            no_subgroups(&org_path, org)?;
            let org_values = Values::new(&org_path, org, &[MSP_KEY])?;
            msps.propose(&org_path, &org_values)?;
        }
    }
    Ok(())
}

/// Fabric `ManagerImpl.GetPolicy` on the manager at `manager_path` (e.g. "Channel/Application"):
/// absolute ids must start with `/<manager_path>`; the character after that prefix is skipped unchecked,
/// exactly as Fabric slices it off. Relative ids are looked up directly.
fn resolve<'a>(manager_path: &str, policies: &'a PolicyMap, id: &str) -> Option<&'a Arc<dyn Policy>> {
    if id.is_empty() {
        return None;
    }
    let relative = match id.strip_prefix('/') {
        Some(after_slash) => after_slash.strip_prefix(manager_path)?.get(1..)?,
        None => id,
    };
    policies.get(relative)
}

/// Fabric `NewManagerImpl`: compile the policies of `group` (at `path`, e.g. "Channel/Orderer") after
/// those of its sub-groups, and return them all keyed relative to `group` ("Admins", "Org1MSP/Admins").
fn build_policies(path: &str, group: &ConfigGroup) -> Result<PolicyMap, PolicyError> {
    let mut children: Vec<(&String, PolicyMap)> = Vec::with_capacity(group.groups.len());
    for (name, sub) in sorted(&group.groups) {
        children.push((name, build_policies(&format!("{path}/{name}"), sub)?));
    }

    let mut policies = PolicyMap::new();
    for (name, config_policy) in sorted(&group.policies) {
        let abs = format!("/{path}/{name}");
        let policy = config_policy.policy.as_ref().ok_or_else(|| PolicyError::policy(&abs, "policy is nil"))?;
        let compiled: Arc<dyn Policy> = match PolicyType::try_from(policy.r#type) {
            Ok(PolicyType::Signature) => {
                let env = SignaturePolicyEnvelope::decode(policy.value.clone())
                    .map_err(|e| PolicyError::policy(&abs, format!("cannot decode SignaturePolicyEnvelope: {e}")))?;
                if env.version != 0 {
                    return Err(PolicyError::policy(
                        &abs,
                        format!("only version 0 signature policies are understood, got {}", env.version),
                    ));
                }
                Arc::new(CompiledSignaturePolicy::compile(&abs, &env)?)
            }
            Ok(PolicyType::ImplicitMeta) => {
                let def = common::ImplicitMetaPolicy::decode(policy.value.clone())
                    .map_err(|e| PolicyError::policy(&abs, format!("cannot decode ImplicitMetaPolicy: {e}")))?;
                Arc::new(implicit_meta(path, &children, def))
            }
            Ok(PolicyType::Msp) => Arc::new(UnsupportedPolicy { path: abs, policy_type: policy.r#type }),
            Ok(PolicyType::Unknown) | Err(_) => {
                return Err(PolicyError::policy(&abs, format!("unknown policy type {}", policy.r#type)));
            }
        };
        policies.insert(name.clone(), compiled);
    }

    // Sub-group policies become reachable as "<group>/<name>"; as in Fabric they are inserted last.
    for (child, child_policies) in children {
        for (name, policy) in child_policies {
            policies.insert(format!("{child}/{name}"), policy);
        }
    }
    Ok(policies)
}

/// Fabric `NewImplicitMetaPolicy`: look the sub-policy name up in every direct sub-group.
fn implicit_meta(path: &str, children: &[(&String, PolicyMap)], def: common::ImplicitMetaPolicy) -> ImplicitMetaPolicy {
    use common::implicit_meta_policy::Rule;
    let sub_policies: Vec<Arc<dyn Policy>> = children
        .iter()
        .map(|(child, child_policies)| {
            resolve(&format!("{path}/{child}"), child_policies, &def.sub_policy)
                .cloned()
                .unwrap_or_else(|| Arc::new(RejectPolicy(def.sub_policy.clone())))
        })
        .collect();
    let n = sub_policies.len() as i64;
    // An out-of-range rule value leaves the threshold at 0, as Fabric's switch has no default arm.
    let threshold = match Rule::try_from(def.rule) {
        _ if n == 0 => 0,
        Ok(Rule::Any) => 1,
        Ok(Rule::All) => n,
        Ok(Rule::Majority) => n / 2 + 1,
        Err(_) => 0,
    };
    ImplicitMetaPolicy { sub_policy: def.sub_policy, threshold, sub_policies }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Named;
    impl Policy for Named {
        fn evaluate(&self, _set: &crate::SignatureSet<'_>) -> Result<(), PolicyError> {
            Ok(())
        }
    }

    fn map(names: &[&str]) -> PolicyMap {
        names.iter().map(|n| (n.to_string(), Arc::new(Named) as Arc<dyn Policy>)).collect()
    }

    #[test]
    fn resolve_follows_fabric_get_policy() {
        let m = map(&["Readers", "Application/Endorsement"]);
        assert!(resolve(ROOT, &m, "/Channel/Readers").is_some());
        assert!(resolve(ROOT, &m, "Readers").is_some());
        assert!(resolve(ROOT, &m, "/Channel/Application/Endorsement").is_some());
        assert!(resolve(ROOT, &m, "Application/Endorsement").is_some());
        assert!(resolve(ROOT, &m, "").is_none());
        assert!(resolve(ROOT, &m, "/Channel").is_none());
        assert!(resolve(ROOT, &m, "/Channel/").is_none());
        assert!(resolve(ROOT, &m, "/Other/Readers").is_none());
        assert!(resolve(ROOT, &m, "/Channel/Writers").is_none());
        // Fabric does not check that a '/' follows the manager path.
        assert!(resolve(ROOT, &m, "/ChannelXReaders").is_some());
        assert!(resolve("Channel/Application", &map(&["Endorsement"]), "/Channel/Application/Endorsement").is_some());
    }
}
