//! The configtx.yaml model (Fabric `internal/configtxgen/genesisconfig/config.go`: `TopLevel`, `Profile`,
//! `Organization`, `Application`, `Orderer`, ...), its loading and `completeInitialization` (defaults,
//! checks, paths relative to the file's directory).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ferrofabric_channelconfig::parse_go_duration;
use serde::{Deserialize, Deserializer};

use crate::ConfigtxgenError;

/// `null` (YAML `Key:` with nothing after it) reads as the type's default, as Go leaves a nil slice/map.
fn null_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// A YAML scalar as configtxgen's decoder sees it before conversion.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Int(u64),
    Str(String),
}

/// A `uint32` field, which Fabric's config decoder also accepts as a byte size `<n>[ ]<K|M|G>[B]` (case
/// insensitive, powers of 1024) or a decimal string; `null` is 0.
fn byte_size<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    use serde::de::Error;
    let value = match Option::<Scalar>::deserialize(d)? {
        None => return Ok(0),
        Some(Scalar::Int(n)) => n,
        Some(Scalar::Str(s)) => parse_byte_size(&s).map_err(D::Error::custom)?,
    };
    u32::try_from(value).map_err(|_| D::Error::custom(format!("value {value} overflows uint32")))
}

fn parse_byte_size(s: &str) -> Result<u64, String> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let (number, rest) = s.split_at(digits);
    let err = || format!("{s:?} is neither a number nor a byte size like \"10 MB\"");
    let n: u64 = number.parse().map_err(|_| err())?;
    let unit = rest.trim_start().to_ascii_lowercase();
    let shift = match unit.strip_suffix('b').unwrap_or(&unit) {
        "" if rest.is_empty() => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        _ => return Err(err()),
    };
    n.checked_mul(1 << shift).ok_or_else(|| format!("value {s:?} overflows uint32"))
}

/// A Go duration: text as written, or an integer count of nanoseconds (kept as its text form).
fn go_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Option::<Scalar>::deserialize(d)? {
        None => None,
        Some(Scalar::Str(s)) => Some(s),
        Some(Scalar::Int(n)) => Some(format!("{n}ns")),
    })
}

/// The whole configtx.yaml (`TopLevel`). Only [`ConfigTx::profiles`] feed genesis blocks; the other
/// sections exist to be referenced with YAML anchors and merge keys (`<<: *ChannelDefaults`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigTx {
    /// Named profiles.
    #[serde(rename = "Profiles", default, deserialize_with = "null_default")]
    pub profiles: BTreeMap<String, Profile>,
    /// Organisation definitions.
    #[serde(rename = "Organizations", default, deserialize_with = "null_default")]
    pub organizations: Vec<Organization>,
    /// Channel defaults.
    #[serde(rename = "Channel", default)]
    pub channel: Option<Profile>,
    /// Application defaults.
    #[serde(rename = "Application", default)]
    pub application: Option<Application>,
    /// Orderer defaults.
    #[serde(rename = "Orderer", default)]
    pub orderer: Option<Orderer>,
    /// Capability sets by level (`Channel`, `Orderer`, `Application`).
    #[serde(rename = "Capabilities", default, deserialize_with = "null_default")]
    pub capabilities: BTreeMap<String, BTreeMap<String, bool>>,
    /// The directory relative paths are resolved against (the file's directory); not part of the YAML.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// One profile: the channel-level settings and the sections below them (`Profile`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct Profile {
    /// Consortium name (system-channel era; adds a `Consortium` value).
    #[serde(default, deserialize_with = "null_default")]
    pub consortium: String,
    /// The `Application` group.
    #[serde(default)]
    pub application: Option<Application>,
    /// The `Orderer` group.
    #[serde(default)]
    pub orderer: Option<Orderer>,
    /// The `Consortiums` group (system channel only).
    #[serde(default)]
    pub consortiums: Option<BTreeMap<String, Consortium>>,
    /// Channel capabilities (only `true` entries are encoded).
    #[serde(default, deserialize_with = "null_default")]
    pub capabilities: BTreeMap<String, bool>,
    /// Channel policies (`Readers`, `Writers`, `Admins` required).
    #[serde(default, deserialize_with = "null_default")]
    pub policies: BTreeMap<String, Policy>,
}

/// A policy definition: `Type` `Signature` (rule in the policy DSL) or `ImplicitMeta` (`ANY Readers`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct Policy {
    /// `Signature` or `ImplicitMeta`.
    #[serde(rename = "Type")]
    pub kind: String,
    /// The rule text.
    pub rule: String,
}

/// A consortium: the organisations allowed to create channels together.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct Consortium {
    /// Member organisations.
    #[serde(default, deserialize_with = "null_default")]
    pub organizations: Vec<Organization>,
}

/// The `Application` section.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct Application {
    /// Application organisations (peers' orgs).
    #[serde(default, deserialize_with = "null_default")]
    pub organizations: Vec<Organization>,
    /// Application capabilities (only `true` entries are encoded).
    #[serde(default, deserialize_with = "null_default")]
    pub capabilities: BTreeMap<String, bool>,
    /// Application policies (`Readers`, `Writers`, `Admins` required; usually also `Endorsement` and
    /// `LifecycleEndorsement`).
    #[serde(default, deserialize_with = "null_default")]
    pub policies: BTreeMap<String, Policy>,
    /// Resource → policy path (`peer/Propose: /Channel/Application/Writers`), encoded as the `ACLs` value.
    #[serde(rename = "ACLs", default, deserialize_with = "null_default")]
    pub acls: BTreeMap<String, String>,
}

/// An organisation (`Organization`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Organization {
    /// Group name in the channel config.
    #[serde(rename = "Name", default, deserialize_with = "null_default")]
    pub name: String,
    /// MSP ID.
    #[serde(rename = "ID", default, deserialize_with = "null_default")]
    pub id: String,
    /// MSP folder (verifying MSP: cacerts, tlscacerts, config.yaml, ...), relative to the config file.
    #[serde(rename = "MSPDir", default, deserialize_with = "null_default")]
    pub msp_dir: PathBuf,
    /// MSP type: `bccsp` (X.509, the default) or `idemix` (not supported here).
    #[serde(rename = "MSPType", default, deserialize_with = "null_default")]
    pub msp_type: String,
    /// Organisation policies (`Readers`, `Writers`, `Admins` required).
    #[serde(rename = "Policies", default, deserialize_with = "null_default")]
    pub policies: BTreeMap<String, Policy>,
    /// Anchor peers (application organisations).
    #[serde(rename = "AnchorPeers", default, deserialize_with = "null_default")]
    pub anchor_peers: Vec<AnchorPeer>,
    /// Orderer endpoints `host:port` (orderer organisations), the `Endpoints` value.
    #[serde(rename = "OrdererEndpoints", default, deserialize_with = "null_default")]
    pub orderer_endpoints: Vec<String>,
    /// Deprecated and ignored, as in Fabric.
    #[serde(rename = "AdminPrincipal", default, deserialize_with = "null_default")]
    pub admin_principal: String,
    /// The definition belongs to another party; genesis blocks refuse such organisations.
    #[serde(rename = "SkipAsForeign", default, deserialize_with = "null_default")]
    pub skip_as_foreign: bool,
}

/// An anchor peer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct AnchorPeer {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: i32,
}

/// The `Orderer` section.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct Orderer {
    /// `solo`, `etcdraft`, `kafka` or `BFT` (default `solo`).
    #[serde(default, deserialize_with = "null_default")]
    pub orderer_type: String,
    /// Global orderer addresses (the channel's `OrdererAddresses` value).
    #[serde(default, deserialize_with = "null_default")]
    pub addresses: Vec<String>,
    /// Go duration text, e.g. `2s` (default `2s`).
    #[serde(default, deserialize_with = "go_duration")]
    pub batch_timeout: Option<String>,
    /// Block cutting limits.
    #[serde(default, deserialize_with = "null_default")]
    pub batch_size: BatchSize,
    /// Kafka brokers (`kafka` orderer type; default `127.0.0.1:9092`).
    #[serde(default)]
    pub kafka: Option<Kafka>,
    /// Raft consenters and options (required for `etcdraft`).
    #[serde(default)]
    pub etcd_raft: Option<EtcdRaft>,
    /// BFT consenters (required for `BFT`): the Orderer group's `Orderers` value, from which `BlockValidation` is
    /// computed.
    #[serde(default, deserialize_with = "null_default")]
    pub consenter_mapping: Vec<BftConsenter>,
    /// SmartBFT options (`BFT`), the `ConsensusType` metadata; absent, SmartBFT's defaults.
    #[serde(rename = "SmartBFT", default)]
    pub smart_bft: Option<SmartBftOptions>,
    /// Orderer organisations.
    #[serde(default, deserialize_with = "null_default")]
    pub organizations: Vec<Organization>,
    /// `ChannelRestrictions.max_count` (0 = unlimited).
    #[serde(default, deserialize_with = "null_default")]
    pub max_channels: u64,
    /// Orderer capabilities (only `true` entries are encoded).
    #[serde(default, deserialize_with = "null_default")]
    pub capabilities: BTreeMap<String, bool>,
    /// Orderer policies (`Readers`, `Writers`, `Admins`, `BlockValidation` required).
    #[serde(default, deserialize_with = "null_default")]
    pub policies: BTreeMap<String, Policy>,
}

/// Kafka broker list (Fabric 2.5 still encodes `kafka` channels; Ferrofabric's orderer does not run them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct Kafka {
    /// Broker addresses.
    #[serde(default, deserialize_with = "null_default")]
    pub brokers: Vec<String>,
}

/// `BatchSize`: 0 means "use the default" (500 messages, 10 MB, 2 MB).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct BatchSize {
    /// Messages per block.
    #[serde(default, deserialize_with = "byte_size")]
    pub max_message_count: u32,
    /// Hard limit on serialized messages per block, bytes.
    #[serde(default, deserialize_with = "byte_size")]
    pub absolute_max_bytes: u32,
    /// Preferred block size, bytes.
    #[serde(default, deserialize_with = "byte_size")]
    pub preferred_max_bytes: u32,
}

/// `EtcdRaft`: etcdraft `ConfigMetadata`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct EtcdRaft {
    /// The Raft cluster members.
    #[serde(default, deserialize_with = "null_default")]
    pub consenters: Vec<Consenter>,
    /// Raft options; missing ones get Fabric's defaults.
    #[serde(default)]
    pub options: Option<EtcdRaftOptions>,
}

/// One Raft consenter; the certificates are file paths (relative to the config file), embedded as PEM.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct Consenter {
    /// Cluster host.
    #[serde(default, deserialize_with = "null_default")]
    pub host: String,
    /// Cluster port.
    #[serde(default, deserialize_with = "byte_size")]
    pub port: u32,
    /// Client TLS certificate file.
    #[serde(rename = "ClientTLSCert", alias = "ClientTlsCert", default, deserialize_with = "null_default")]
    pub client_tls_cert: PathBuf,
    /// Server TLS certificate file.
    #[serde(rename = "ServerTLSCert", alias = "ServerTlsCert", default, deserialize_with = "null_default")]
    pub server_tls_cert: PathBuf,
}

/// One BFT consenter (Fabric 3's `genesisconfig.Consenter`); the files are paths relative to the config file, embedded
/// as they are (PEM).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BftConsenter {
    /// The consenter id, which block signatures name in their `IdentifierHeader`.
    #[serde(rename = "ID", alias = "Id", default, deserialize_with = "null_default")]
    pub id: u32,
    /// Cluster host.
    #[serde(rename = "Host", default, deserialize_with = "null_default")]
    pub host: String,
    /// Cluster port.
    #[serde(rename = "Port", default, deserialize_with = "byte_size")]
    pub port: u32,
    /// The consenter's MSP.
    #[serde(rename = "MSPID", alias = "MspId", default, deserialize_with = "null_default")]
    pub msp_id: String,
    /// The consenter's signing certificate file (its identity).
    #[serde(rename = "Identity", default, deserialize_with = "null_default")]
    pub identity: PathBuf,
    /// Client TLS certificate file.
    #[serde(rename = "ClientTLSCert", alias = "ClientTlsCert", default, deserialize_with = "null_default")]
    pub client_tls_cert: PathBuf,
    /// Server TLS certificate file.
    #[serde(rename = "ServerTLSCert", alias = "ServerTlsCert", default, deserialize_with = "null_default")]
    pub server_tls_cert: PathBuf,
}

/// SmartBFT `Options` (fabric-protos `orderer/smartbft/configuration.proto`). As in Fabric, a `SmartBFT` section
/// replaces the defaults as a whole: a field it leaves out is encoded as zero. Durations are Go duration text,
/// kept as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct SmartBftOptions {
    /// Requests per batch (block).
    #[serde(default, deserialize_with = "null_default")]
    pub request_batch_max_count: u64,
    /// Bytes per batch.
    #[serde(default, deserialize_with = "null_default")]
    pub request_batch_max_bytes: u64,
    /// How long the leader waits to fill a batch.
    #[serde(default, deserialize_with = "null_default")]
    pub request_batch_max_interval: String,
    /// Messages buffered per node.
    #[serde(default, deserialize_with = "null_default")]
    pub incoming_message_buffer_size: u64,
    /// Requests pending in the pool.
    #[serde(default, deserialize_with = "null_default")]
    pub request_pool_size: u64,
    /// When a follower forwards a request to the leader.
    #[serde(default, deserialize_with = "null_default")]
    pub request_forward_timeout: String,
    /// When a follower complains about the leader.
    #[serde(default, deserialize_with = "null_default")]
    pub request_complain_timeout: String,
    /// When a request is dropped from the pool.
    #[serde(default, deserialize_with = "null_default")]
    pub request_auto_remove_timeout: String,
    /// Largest request.
    #[serde(default, deserialize_with = "null_default")]
    pub request_max_bytes: u64,
    /// View-change message resend interval.
    #[serde(default, deserialize_with = "null_default")]
    pub view_change_resend_interval: String,
    /// View-change timeout.
    #[serde(default, deserialize_with = "null_default")]
    pub view_change_timeout: String,
    /// Leader heartbeat timeout.
    #[serde(default, deserialize_with = "null_default")]
    pub leader_heartbeat_timeout: String,
    /// Heartbeats per timeout.
    #[serde(default, deserialize_with = "null_default")]
    pub leader_heartbeat_count: u64,
    /// Collect timeout of a sync.
    #[serde(default, deserialize_with = "null_default")]
    pub collect_timeout: String,
    /// Sync at start.
    #[serde(default, deserialize_with = "null_default")]
    pub sync_on_start: bool,
    /// Faster view changes.
    #[serde(default, deserialize_with = "null_default")]
    pub speed_up_view_change: bool,
    /// `Options.Rotation`: 0 unspecified, 1 off, 2 on.
    #[serde(default, deserialize_with = "null_default")]
    pub leader_rotation: i32,
    /// Decisions per leader when rotating.
    #[serde(default, deserialize_with = "null_default")]
    pub decisions_per_leader: u64,
}

impl SmartBftOptions {
    /// The options configtxgen 3.1 uses when the profile has no `SmartBFT` section: SmartBFT v1's
    /// `types.DefaultConfig` (batches of 100 requests or 10 MiB within 50ms, pool of 400, ...).
    pub fn fabric_defaults() -> SmartBftOptions {
        SmartBftOptions {
            request_batch_max_count: 100,
            request_batch_max_bytes: 10 << 20,
            request_batch_max_interval: "50ms".into(),
            incoming_message_buffer_size: 200,
            request_pool_size: 400,
            request_forward_timeout: "2s".into(),
            request_complain_timeout: "20s".into(),
            request_auto_remove_timeout: "3m0s".into(),
            view_change_resend_interval: "5s".into(),
            view_change_timeout: "20s".into(),
            leader_heartbeat_timeout: "1m0s".into(),
            leader_heartbeat_count: 10,
            collect_timeout: "1s".into(),
            ..SmartBftOptions::default()
        }
    }
}

/// etcdraft `Options`; zero / empty values get Fabric's defaults (500ms, 10, 1, 5, 16 MB).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "PascalCase")]
pub struct EtcdRaftOptions {
    /// Go duration text of one Raft tick.
    #[serde(default, deserialize_with = "null_default")]
    pub tick_interval: String,
    /// Ticks without a heartbeat before an election.
    #[serde(default, deserialize_with = "byte_size")]
    pub election_tick: u32,
    /// Ticks between heartbeats.
    #[serde(default, deserialize_with = "byte_size")]
    pub heartbeat_tick: u32,
    /// In-flight append messages during optimistic replication.
    #[serde(default, deserialize_with = "byte_size")]
    pub max_inflight_blocks: u32,
    /// Bytes of data between snapshots.
    #[serde(default, deserialize_with = "byte_size")]
    pub snapshot_interval_size: u32,
}

/// Fabric's `TranslatePath`: absolute paths stay, relative ones are joined to the config directory.
fn translate(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

impl ConfigTx {
    /// Parses configtx.yaml text; relative paths will be resolved against `base_dir`. Anchors, aliases and
    /// merge keys (`<<`) are expanded first.
    ///
    /// Errors: [`ConfigtxgenError::Yaml`] for invalid YAML, bad merge keys, unknown keys or wrong types.
    pub fn from_yaml(text: &str, base_dir: &Path) -> Result<ConfigTx, ConfigtxgenError> {
        let mut value: serde_yaml::Value =
            serde_yaml::from_str(text).map_err(|e| ConfigtxgenError::Yaml(e.to_string()))?;
        value.apply_merge().map_err(|e| ConfigtxgenError::Yaml(format!("merge key: {e}")))?;
        let mut config: ConfigTx = match value {
            serde_yaml::Value::Null => ConfigTx::default(),
            v => serde_yaml::from_value(v).map_err(|e| ConfigtxgenError::Yaml(e.to_string()))?,
        };
        config.base_dir = base_dir.to_path_buf();
        Ok(config)
    }

    /// Reads and parses a configtx.yaml; relative paths in it are relative to its directory.
    ///
    /// Errors: [`ConfigtxgenError::Io`], then as [`ConfigTx::from_yaml`].
    pub fn load(path: &Path) -> Result<ConfigTx, ConfigtxgenError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigtxgenError::io(path, e))?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        ConfigTx::from_yaml(&text, &base)
    }

    /// The named profile, completed (see [`Profile::complete`]).
    ///
    /// Errors: [`ConfigtxgenError::Profile`] when there is no such profile or it is invalid.
    pub fn profile(&self, name: &str) -> Result<Profile, ConfigtxgenError> {
        let profile = self
            .profiles
            .get(name)
            .ok_or_else(|| ConfigtxgenError::Profile(format!("could not find profile {name:?}")))?;
        profile.clone().complete(&self.base_dir)
    }
}

impl Organization {
    fn complete(&mut self, base: &Path) {
        if self.msp_type.is_empty() {
            self.msp_type = "bccsp".to_string();
        }
        self.msp_dir = translate(base, &self.msp_dir);
    }
}

impl Profile {
    /// Fabric's `completeInitialization`: MSP types default to `bccsp` and MSP folders, consenter
    /// certificates become paths under `base_dir`; the orderer section gets its defaults (type `solo`,
    /// `BatchTimeout` 2s, `BatchSize` 500 / 10 MB / 2 MB, Raft options 500ms / 10 / 1 / 5 / 16 MB) and is
    /// checked (known type; for etcdraft at least one consenter with host, port and both certificates, a
    /// parseable `TickInterval`, `ElectionTick` > `HeartbeatTick`; a parseable `BatchTimeout`).
    ///
    /// Errors: [`ConfigtxgenError::Profile`] for each failed check.
    pub fn complete(mut self, base_dir: &Path) -> Result<Profile, ConfigtxgenError> {
        if let Some(app) = &mut self.application {
            app.organizations.iter_mut().for_each(|o| o.complete(base_dir));
        }
        if let Some(consortiums) = &mut self.consortiums {
            for c in consortiums.values_mut() {
                c.organizations.iter_mut().for_each(|o| o.complete(base_dir));
            }
        }
        if let Some(orderer) = &mut self.orderer {
            orderer.organizations.iter_mut().for_each(|o| o.complete(base_dir));
            orderer.complete(base_dir)?;
        }
        Ok(self)
    }
}

fn profile_err(msg: impl Into<String>) -> ConfigtxgenError {
    ConfigtxgenError::Profile(msg.into())
}

fn missing_consenter_info(kind: &str, what: &str) -> ConfigtxgenError {
    profile_err(format!("consenter info in {kind} configuration did not specify {what}"))
}

/// What etcdraft and BFT consenters share: a cluster endpoint and its TLS certificate files.
struct ConsenterEndpoint<'a> {
    host: &'a str,
    port: u32,
    client_tls_cert: &'a mut PathBuf,
    server_tls_cert: &'a mut PathBuf,
}

impl ConsenterEndpoint<'_> {
    /// Fabric's checks of a `kind` consenter (host, port and both certificates given, in that order); the
    /// certificate paths become relative to `base`.
    fn complete(self, kind: &str, base: &Path) -> Result<(), ConfigtxgenError> {
        if self.host.is_empty() {
            return Err(missing_consenter_info(kind, "host"));
        }
        if self.port == 0 {
            return Err(missing_consenter_info(kind, "port"));
        }
        if self.client_tls_cert.as_os_str().is_empty() {
            return Err(missing_consenter_info(kind, "client TLS cert"));
        }
        if self.server_tls_cert.as_os_str().is_empty() {
            return Err(missing_consenter_info(kind, "server TLS cert"));
        }
        *self.client_tls_cert = translate(base, self.client_tls_cert);
        *self.server_tls_cert = translate(base, self.server_tls_cert);
        Ok(())
    }
}

impl Orderer {
    fn complete(&mut self, base: &Path) -> Result<(), ConfigtxgenError> {
        if self.orderer_type.is_empty() {
            self.orderer_type = "solo".to_string();
        }
        let timeout = match &self.batch_timeout {
            Some(t) => parse_go_duration(t).map_err(|e| profile_err(format!("Orderer.BatchTimeout: {e}")))?,
            None => 0,
        };
        if timeout == 0 {
            self.batch_timeout = Some("2s".to_string());
        }
        let bs = &mut self.batch_size;
        for (field, default) in [
            (&mut bs.max_message_count, 500),
            (&mut bs.absolute_max_bytes, 10 << 20),
            (&mut bs.preferred_max_bytes, 2 << 20),
        ] {
            if *field == 0 {
                *field = default;
            }
        }
        match self.orderer_type.as_str() {
            "solo" => Ok(()),
            "kafka" => {
                if self.kafka.as_ref().is_none_or(|k| k.brokers.is_empty()) {
                    self.kafka = Some(Kafka { brokers: vec!["127.0.0.1:9092".to_string()] });
                }
                Ok(())
            }
            "etcdraft" => {
                let raft = self.etcd_raft.as_mut().ok_or_else(|| profile_err("etcdraft configuration missing"))?;
                let options = raft.options.get_or_insert_with(EtcdRaftOptions::default);
                if options.tick_interval.is_empty() {
                    options.tick_interval = "500ms".to_string();
                }
                for (field, default) in [
                    (&mut options.election_tick, 10),
                    (&mut options.heartbeat_tick, 1),
                    (&mut options.max_inflight_blocks, 5),
                    (&mut options.snapshot_interval_size, 16 << 20),
                ] {
                    if *field == 0 {
                        *field = default;
                    }
                }
                if raft.consenters.is_empty() {
                    return Err(profile_err("etcdraft configuration did not specify any consenter"));
                }
                parse_go_duration(&options.tick_interval).map_err(|_| {
                    profile_err(format!(
                        "Etcdraft TickInterval ({}) must be in time duration format",
                        options.tick_interval
                    ))
                })?;
                if options.election_tick <= options.heartbeat_tick {
                    return Err(profile_err("election tick must be greater than heartbeat tick"));
                }
                for c in &mut raft.consenters {
                    let endpoint = ConsenterEndpoint {
                        host: &c.host,
                        port: c.port,
                        client_tls_cert: &mut c.client_tls_cert,
                        server_tls_cert: &mut c.server_tls_cert,
                    };
                    endpoint.complete("etcdraft", base)?;
                }
                Ok(())
            }
            "BFT" => {
                if self.smart_bft.is_none() {
                    self.smart_bft = Some(SmartBftOptions::fabric_defaults());
                }
                if self.consenter_mapping.is_empty() {
                    return Err(profile_err("BFT configuration did not specify any consenter"));
                }
                for c in &mut self.consenter_mapping {
                    let endpoint = ConsenterEndpoint {
                        host: &c.host,
                        port: c.port,
                        client_tls_cert: &mut c.client_tls_cert,
                        server_tls_cert: &mut c.server_tls_cert,
                    };
                    endpoint.complete("BFT", base)?;
                    if c.msp_id.is_empty() {
                        return Err(missing_consenter_info("BFT", "MSP ID"));
                    }
                    if c.identity.as_os_str().is_empty() {
                        return Err(missing_consenter_info("BFT", "identity certificate"));
                    }
                    c.identity = translate(base, &c.identity);
                }
                Ok(())
            }
            other => Err(profile_err(format!("unknown orderer type: {other}"))),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_follow_fabric() {
        for (s, n) in
            [("99 MB", 99 << 20), ("8mb", 8 << 20), ("16M", 16 << 20), ("2 k", 2048), ("3G", 3 << 30), ("42", 42)]
        {
            assert_eq!(parse_byte_size(s).unwrap(), n, "{s}");
        }
        for bad in ["", "MB", "10 TB", "1.5 MB", "10 MBs", " 10"] {
            assert!(parse_byte_size(bad).is_err(), "{bad}");
        }
        let y = "MaxMessageCount: 10\nAbsoluteMaxBytes: 4 GB\n";
        assert!(serde_yaml::from_str::<BatchSize>(y).unwrap_err().to_string().contains("overflows"));
    }

    #[test]
    fn merge_keys_nulls_and_unknown_keys() {
        let text = "
Channel: &Defaults
  Policies:
    Admins: {Type: ImplicitMeta, Rule: MAJORITY Admins}
  Capabilities:
    V2_0: true
Profiles:
  P:
    <<: *Defaults
    Capabilities:
      V2_5: true
    Orderer:
      Addresses:
      Organizations:
      BatchTimeout: 1500000000
";
        let c = ConfigTx::from_yaml(text, Path::new("/base")).unwrap();
        let p = c.profile("P").unwrap();
        assert_eq!(p.capabilities, BTreeMap::from([("V2_5".to_string(), true)]));
        assert_eq!(p.policies["Admins"].rule, "MAJORITY Admins");
        let o = p.orderer.unwrap();
        assert_eq!(o.orderer_type, "solo");
        assert_eq!(o.batch_timeout.as_deref(), Some("1500000000ns"));
        assert_eq!(
            o.batch_size,
            BatchSize { max_message_count: 500, absolute_max_bytes: 10 << 20, preferred_max_bytes: 2 << 20 }
        );
        assert!(matches!(
            ConfigTx::from_yaml("Profiles:\n  P:\n    Oderer: {}\n", Path::new("")),
            Err(ConfigtxgenError::Yaml(_))
        ));
        assert!(matches!(c.profile("Q"), Err(ConfigtxgenError::Profile(_))));
        assert_eq!(ConfigTx::from_yaml("", Path::new("")).unwrap().profiles.len(), 0);
    }

    #[test]
    fn orderer_checks() {
        let check = |orderer: &str| {
            let text = format!("Profiles:\n  P:\n    Orderer:\n{orderer}");
            ConfigTx::from_yaml(&text, Path::new("/cfg")).unwrap().profile("P")
        };
        assert!(check("      OrdererType: bft\n").unwrap_err().to_string().contains("unknown orderer type"));
        let kafka = check("      OrdererType: kafka\n").unwrap().orderer.unwrap().kafka.unwrap();
        assert_eq!(kafka.brokers, ["127.0.0.1:9092"]);
        assert!(check("      OrdererType: etcdraft\n")
            .unwrap_err()
            .to_string()
            .contains("etcdraft configuration missing"));
        assert!(check("      OrdererType: etcdraft\n      EtcdRaft: {}\n")
            .unwrap_err()
            .to_string()
            .contains("consenter"));
        assert!(check("      BatchTimeout: soon\n").is_err());
        let raft = "      OrdererType: etcdraft\n      EtcdRaft:\n        Consenters:\n        - {Host: h, Port: 1, ClientTLSCert: c.pem, ServerTlsCert: /abs/s.pem}\n";
        let p = check(raft).unwrap();
        let r = p.orderer.unwrap().etcd_raft.unwrap();
        assert_eq!(r.consenters[0].client_tls_cert, PathBuf::from("/cfg/c.pem"));
        assert_eq!(r.consenters[0].server_tls_cert, PathBuf::from("/abs/s.pem"));
        assert_eq!(
            r.options.unwrap(),
            EtcdRaftOptions {
                tick_interval: "500ms".into(),
                election_tick: 10,
                heartbeat_tick: 1,
                max_inflight_blocks: 5,
                snapshot_interval_size: 16 << 20
            }
        );
        let bad_ticks = format!("{raft}        Options: {{ElectionTick: 2, HeartbeatTick: 2}}\n");
        assert!(check(&bad_ticks).unwrap_err().to_string().contains("election tick"));
        let bad_tick = format!("{raft}        Options: {{TickInterval: fast}}\n");
        assert!(check(&bad_tick).unwrap_err().to_string().contains("TickInterval"));
        let no_port = raft.replace("Port: 1", "Port: 0");
        assert!(check(&no_port).unwrap_err().to_string().contains("port"));
    }
}
