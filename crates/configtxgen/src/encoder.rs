//! Channel configuration tree from a profile (Fabric `internal/configtxgen/encoder/encoder.go`
//! `NewChannelGroup` and below, values from `common/channelconfig/util.go`).

use std::collections::BTreeMap;

use bytes::Bytes;
use ferrofabric_channelconfig::{bft_block_validation_policy, format_go_duration, parse_go_duration};
use ferrofabric_protos::common::{
    policy, BlockDataHashingStructure, ConfigGroup, ConfigPolicy, ConfigValue, Consenter,
    Consortium as ConsortiumValue, HashingAlgorithm, OrdererAddresses, Orderers, Policy as PolicyProto,
    SignaturePolicyEnvelope,
};
use ferrofabric_protos::etcdraft;
use ferrofabric_protos::orderer::{
    smartbft, BatchSize, BatchTimeout, ChannelRestrictions, ConsensusType, KafkaBrokers,
};
use ferrofabric_protos::peer::{AnchorPeer, AnchorPeers};
use prost::encoding::{encode_key, encode_varint, WireType};
use prost::Message;

use crate::model::{Application, BftConsenter, Consortium, Orderer, Organization, Policy, Profile, SmartBftOptions};
use crate::{implicit_meta_policy, signature_policy, ConfigtxgenError};

const ADMINS: &str = "Admins";
const ORDERER_ADMINS: &str = "/Channel/Orderer/Admins";

fn profile_err(msg: impl Into<String>) -> ConfigtxgenError {
    ConfigtxgenError::Profile(msg.into())
}

/// A length-delimited field.
fn put_bytes(buf: &mut Vec<u8>, tag: u32, data: &[u8]) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(data.len() as u64, buf);
    buf.extend_from_slice(data);
}

/// A proto3 `map<string, M>` field `tag` with entries in key order: prost writes `HashMap`s in hash order,
/// which would make the output differ between runs. Each entry carries key and value, as Go writes them
/// (an empty message value is `12 00`).
fn sorted_map<'a>(tag: u32, entries: impl Iterator<Item = (&'a str, Vec<u8>)>) -> Vec<u8> {
    let mut entries: Vec<_> = entries.collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut buf = Vec::new();
    for (key, value) in entries {
        let mut entry = Vec::new();
        put_bytes(&mut entry, 1, key.as_bytes());
        put_bytes(&mut entry, 2, &value);
        put_bytes(&mut buf, tag, &entry);
    }
    buf
}

/// A Go `map[string]bool` as `%v` prints it: `map[K:V ...]`, keys sorted.
fn go_map(map: &BTreeMap<String, bool>) -> String {
    let entries: Vec<String> = map.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("map[{}]", entries.join(" "))
}

/// A new, empty group (version 0) with the given mod_policy.
fn group(mod_policy: &str) -> ConfigGroup {
    ConfigGroup { mod_policy: mod_policy.to_string(), ..Default::default() }
}

fn add_value(group: &mut ConfigGroup, key: &str, value: Vec<u8>, mod_policy: &str) {
    group.values.insert(
        key.to_string(),
        ConfigValue { version: 0, value: Bytes::from(value), mod_policy: mod_policy.to_string() },
    );
}

/// `Capabilities` value: only capabilities set to `true` (Fabric's `CapabilitiesValue`).
fn capabilities(caps: &BTreeMap<String, bool>) -> Vec<u8> {
    sorted_map(1, caps.iter().filter(|(_, on)| **on).map(|(name, _)| (name.as_str(), Vec::new())))
}

/// Encodes one policy definition as a `common.Policy`.
fn encode_policy(path: &str, name: &str, p: &Policy) -> Result<PolicyProto, ConfigtxgenError> {
    let with_context = |e: ConfigtxgenError| match e {
        ConfigtxgenError::Policy { rule, reason } => {
            ConfigtxgenError::Policy { rule, reason: format!("{reason} (policy {path}/{name})") }
        }
        other => other,
    };
    match p.kind.as_str() {
        "ImplicitMeta" => Ok(PolicyProto {
            r#type: policy::PolicyType::ImplicitMeta as i32,
            value: Bytes::from(implicit_meta_policy(&p.rule).map_err(with_context)?.encode_to_vec()),
        }),
        "Signature" => Ok(PolicyProto {
            r#type: policy::PolicyType::Signature as i32,
            value: Bytes::from(signature_policy(&p.rule).map_err(with_context)?.encode_to_vec()),
        }),
        other => Err(profile_err(format!("unknown policy type {other:?} of policy {path}/{name}"))),
    }
}

/// Fabric's `AddPolicies`: `Readers`, `Writers` and `Admins` must exist; every policy gets `mod_policy`.
fn add_policies(
    group: &mut ConfigGroup,
    path: &str,
    policies: &BTreeMap<String, Policy>,
    mod_policy: &str,
) -> Result<(), ConfigtxgenError> {
    if policies.is_empty() {
        return Err(profile_err(format!("no policies defined for {path}")));
    }
    for required in [ADMINS, "Readers", "Writers"] {
        if !policies.contains_key(required) {
            return Err(profile_err(format!("no {required} policy defined for {path}")));
        }
    }
    for (name, p) in policies {
        let policy = encode_policy(path, name, p)?;
        group.policies.insert(
            name.clone(),
            ConfigPolicy { version: 0, policy: Some(policy), mod_policy: mod_policy.to_string() },
        );
    }
    Ok(())
}

/// The org's verifying `MSPConfig`, read from its MSP folder (Fabric `msp.GetVerifyingMspConfig`).
fn msp_value(org: &Organization) -> Result<Vec<u8>, ConfigtxgenError> {
    if org.msp_type != "bccsp" {
        return Err(ConfigtxgenError::Msp {
            org: org.name.clone(),
            reason: format!("MSP type {:?} is not supported (only bccsp)", org.msp_type),
        });
    }
    ferrofabric_msp::msp_config_from_dir(&org.id, &org.msp_dir)
        .map(|c| c.encode_to_vec())
        .map_err(|e| ConfigtxgenError::Msp { org: org.name.clone(), reason: e.to_string() })
}

/// The common part of every organisation group: `MSP` value and policies, all under `Admins`.
fn org_group(org: &Organization, path: &str) -> Result<ConfigGroup, ConfigtxgenError> {
    if org.skip_as_foreign {
        return Err(profile_err(format!(
            "organization {:?} is marked to be skipped as foreign; all org definitions must be local during bootstrapping",
            org.name
        )));
    }
    let mut g = group(ADMINS);
    let msp = msp_value(org)?;
    add_policies(&mut g, &format!("{path}/{}", org.name), &org.policies, ADMINS)?;
    add_value(&mut g, "MSP", msp, ADMINS);
    Ok(g)
}

/// `Orderer/<org>`: MSP, policies and, when given, `Endpoints`.
/// With the V3_0 channel capability the endpoints are required: such channels have no global orderer addresses.
fn orderer_org_group(org: &Organization, v3_0: bool) -> Result<ConfigGroup, ConfigtxgenError> {
    let mut g = org_group(org, "/Channel/Orderer")?;
    if !org.orderer_endpoints.is_empty() {
        let value = OrdererAddresses { addresses: org.orderer_endpoints.clone() };
        add_value(&mut g, "Endpoints", value.encode_to_vec(), ADMINS);
    } else if v3_0 {
        return Err(profile_err(format!(
            "orderer endpoints for organization {} are missing and must be configured when capability V3_0 is enabled",
            org.name
        )));
    }
    Ok(g)
}

/// `Application/<org>`: MSP, policies and, when given, `AnchorPeers`.
fn application_org_group(org: &Organization) -> Result<ConfigGroup, ConfigtxgenError> {
    let mut g = org_group(org, "/Channel/Application")?;
    if !org.anchor_peers.is_empty() {
        let value = AnchorPeers {
            anchor_peers: org.anchor_peers.iter().map(|a| AnchorPeer { host: a.host.clone(), port: a.port }).collect(),
        };
        add_value(&mut g, "AnchorPeers", value.encode_to_vec(), ADMINS);
    }
    Ok(g)
}

/// The etcdraft `ConfigMetadata` with the consenters' certificate files embedded.
fn etcdraft_metadata(orderer: &Orderer) -> Result<Vec<u8>, ConfigtxgenError> {
    let raft = orderer.etcd_raft.as_ref().ok_or_else(|| profile_err("etcdraft configuration missing"))?;
    let read = |p: &std::path::Path| std::fs::read(p).map(Bytes::from).map_err(|e| ConfigtxgenError::io(p, e));
    let consenters = raft
        .consenters
        .iter()
        .map(|c| {
            Ok(etcdraft::Consenter {
                host: c.host.clone(),
                port: c.port,
                client_tls_cert: read(&c.client_tls_cert)?,
                server_tls_cert: read(&c.server_tls_cert)?,
            })
        })
        .collect::<Result<Vec<_>, ConfigtxgenError>>()?;
    let options = raft.options.clone().unwrap_or_default();
    let metadata = etcdraft::ConfigMetadata {
        consenters,
        options: Some(etcdraft::Options {
            tick_interval: options.tick_interval,
            election_tick: options.election_tick,
            heartbeat_tick: options.heartbeat_tick,
            max_inflight_blocks: options.max_inflight_blocks,
            snapshot_interval_size: options.snapshot_interval_size,
        }),
    };
    Ok(metadata.encode_to_vec())
}

/// The BFT consenters (Fabric 3's `consenterProtosFromConfig`), their certificate files embedded.
fn bft_consenters(orderer: &Orderer) -> Result<Vec<Consenter>, ConfigtxgenError> {
    orderer.consenter_mapping.iter().map(bft_consenter).collect()
}

/// One BFT consenter of a `ConsenterMapping` entry as the `Orderers` value holds it: its identity and TLS
/// certificate files (paths as given, absolute or relative to the working directory) embedded as they are.
///
/// Errors: [`ConfigtxgenError::Io`] for a file that cannot be read.
pub fn bft_consenter(c: &BftConsenter) -> Result<Consenter, ConfigtxgenError> {
    let read = |p: &std::path::Path| std::fs::read(p).map(Bytes::from).map_err(|e| ConfigtxgenError::io(p, e));
    Ok(Consenter {
        id: c.id,
        host: c.host.clone(),
        port: c.port,
        msp_id: c.msp_id.clone(),
        identity: read(&c.identity)?,
        client_tls_cert: read(&c.client_tls_cert)?,
        server_tls_cert: read(&c.server_tls_cert)?,
    })
}

/// The SmartBFT `Options` of the `ConsensusType` metadata.
fn smartbft_metadata(orderer: &Orderer) -> Vec<u8> {
    let o = orderer.smart_bft.clone().unwrap_or_else(SmartBftOptions::fabric_defaults);
    smartbft::Options {
        request_batch_max_count: o.request_batch_max_count,
        request_batch_max_bytes: o.request_batch_max_bytes,
        request_batch_max_interval: o.request_batch_max_interval,
        incoming_message_buffer_size: o.incoming_message_buffer_size,
        request_pool_size: o.request_pool_size,
        request_forward_timeout: o.request_forward_timeout,
        request_complain_timeout: o.request_complain_timeout,
        request_auto_remove_timeout: o.request_auto_remove_timeout,
        request_max_bytes: o.request_max_bytes,
        view_change_resend_interval: o.view_change_resend_interval,
        view_change_timeout: o.view_change_timeout,
        leader_heartbeat_timeout: o.leader_heartbeat_timeout,
        leader_heartbeat_count: o.leader_heartbeat_count,
        collect_timeout: o.collect_timeout,
        sync_on_start: o.sync_on_start,
        speed_up_view_change: o.speed_up_view_change,
        leader_rotation: o.leader_rotation,
        decisions_per_leader: o.decisions_per_leader,
    }
    .encode_to_vec()
}

/// `/Channel/Orderer` (Fabric `NewOrdererGroup`): policies (plus required `BlockValidation`),
/// `BatchSize`, `BatchTimeout`, `ChannelRestrictions`, `Capabilities`, `KafkaBrokers` (kafka only),
/// `Orderers` and the computed `BlockValidation` (BFT only), `ConsensusType`, one group per organisation;
/// everything under `Admins`. BFT requires the V3_0 channel capability, which forbids global orderer addresses.
fn orderer_group(
    orderer: &Orderer,
    channel_capabilities: &BTreeMap<String, bool>,
) -> Result<ConfigGroup, ConfigtxgenError> {
    let v3_0 = channel_capabilities.get("V3_0").copied().unwrap_or(false);
    if orderer.orderer_type == "BFT" && !v3_0 {
        return Err(profile_err(format!(
            "orderer type BFT must be used with V3_0 channel capability: {}",
            go_map(channel_capabilities)
        )));
    }
    if !orderer.addresses.is_empty() && v3_0 {
        return Err(profile_err(format!(
            "global orderer endpoints exist, but can not be used with V3_0 capability: [{}]",
            orderer.addresses.join(" ")
        )));
    }
    let mut g = group(ADMINS);
    if !orderer.policies.is_empty() && !orderer.policies.contains_key("BlockValidation") {
        return Err(profile_err("no BlockValidation policy defined for /Channel/Orderer"));
    }
    add_policies(&mut g, "/Channel/Orderer", &orderer.policies, ADMINS)?;
    let bs = &orderer.batch_size;
    let batch_size = BatchSize {
        max_message_count: bs.max_message_count,
        absolute_max_bytes: bs.absolute_max_bytes,
        preferred_max_bytes: bs.preferred_max_bytes,
    };
    add_value(&mut g, "BatchSize", batch_size.encode_to_vec(), ADMINS);
    let timeout = orderer.batch_timeout.as_deref().unwrap_or("2s");
    let timeout = parse_go_duration(timeout).map_err(|e| profile_err(format!("Orderer.BatchTimeout: {e}")))?;
    add_value(&mut g, "BatchTimeout", BatchTimeout { timeout: format_go_duration(timeout) }.encode_to_vec(), ADMINS);
    let restrictions = ChannelRestrictions { max_count: orderer.max_channels };
    add_value(&mut g, "ChannelRestrictions", restrictions.encode_to_vec(), ADMINS);
    if !orderer.capabilities.is_empty() {
        add_value(&mut g, "Capabilities", capabilities(&orderer.capabilities), ADMINS);
    }
    let metadata = match orderer.orderer_type.as_str() {
        "solo" => Vec::new(),
        "kafka" => {
            let brokers = orderer.kafka.as_ref().map(|k| k.brokers.clone()).unwrap_or_default();
            add_value(&mut g, "KafkaBrokers", KafkaBrokers { brokers }.encode_to_vec(), ADMINS);
            Vec::new()
        }
        "etcdraft" => etcdraft_metadata(orderer)?,
        "BFT" => {
            let consenters = bft_consenters(orderer)?;
            add_value(&mut g, "Orderers", Orderers { consenter_mapping: consenters.clone() }.encode_to_vec(), ADMINS);
            let mod_policy = g.policies.get("BlockValidation").map(|p| p.mod_policy.clone()).unwrap_or_default();
            let policy = Some(bft_block_validation_policy(&consenters));
            g.policies.insert("BlockValidation".into(), ConfigPolicy { version: 0, policy, mod_policy });
            smartbft_metadata(orderer)
        }
        other => return Err(profile_err(format!("unknown orderer type: {other}"))),
    };
    let consensus = ConsensusType { r#type: orderer.orderer_type.clone(), metadata: Bytes::from(metadata), state: 0 };
    add_value(&mut g, "ConsensusType", consensus.encode_to_vec(), ADMINS);
    for org in &orderer.organizations {
        g.groups.insert(org.name.clone(), orderer_org_group(org, v3_0)?);
    }
    Ok(g)
}

/// `/Channel/Application` (Fabric `NewApplicationGroup`): policies, `ACLs` and `Capabilities` when given,
/// one group per organisation; everything under `Admins`.
fn application_group(app: &Application) -> Result<ConfigGroup, ConfigtxgenError> {
    let mut g = group(ADMINS);
    add_policies(&mut g, "/Channel/Application", &app.policies, ADMINS)?;
    if !app.acls.is_empty() {
        // peer.ACLs { map<string, APIResource { policy_ref = 1 }> acls = 1 }
        let acls = sorted_map(
            1,
            app.acls.iter().map(|(resource, policy_ref)| {
                let mut api_resource = Vec::new();
                if !policy_ref.is_empty() {
                    put_bytes(&mut api_resource, 1, policy_ref.as_bytes());
                }
                (resource.as_str(), api_resource)
            }),
        );
        add_value(&mut g, "ACLs", acls, ADMINS);
    }
    if !app.capabilities.is_empty() {
        add_value(&mut g, "Capabilities", capabilities(&app.capabilities), ADMINS);
    }
    for org in &app.organizations {
        g.groups.insert(org.name.clone(), application_org_group(org)?);
    }
    Ok(g)
}

/// Fabric's `AcceptAllPolicy`: 0 out of no rules, no identities.
fn accept_all() -> SignaturePolicyEnvelope {
    use ferrofabric_protos::common::{signature_policy, SignaturePolicy};
    SignaturePolicyEnvelope {
        version: 0,
        rule: Some(SignaturePolicy {
            r#type: Some(signature_policy::Type::NOutOf(signature_policy::NOutOf { n: 0, rules: Vec::new() })),
        }),
        identities: Vec::new(),
    }
}

/// `/Channel/Consortiums` (system channel; Fabric `NewConsortiumsGroup`): an accept-all `Admins` policy and
/// per consortium its organisations and a `ChannelCreationPolicy` of `ANY Admins`, all under
/// `/Channel/Orderer/Admins`.
fn consortiums_group(consortiums: &BTreeMap<String, Consortium>) -> Result<ConfigGroup, ConfigtxgenError> {
    let mut g = group(ORDERER_ADMINS);
    let admins =
        PolicyProto { r#type: policy::PolicyType::Signature as i32, value: Bytes::from(accept_all().encode_to_vec()) };
    g.policies.insert(
        ADMINS.to_string(),
        ConfigPolicy { version: 0, policy: Some(admins), mod_policy: ORDERER_ADMINS.to_string() },
    );
    for (name, consortium) in consortiums {
        let mut c = group(ORDERER_ADMINS);
        for org in &consortium.organizations {
            c.groups.insert(org.name.clone(), org_group(org, &format!("/Channel/Consortiums/{name}"))?);
        }
        let any_admins = implicit_meta_policy("ANY Admins")?;
        let creation = PolicyProto {
            r#type: policy::PolicyType::ImplicitMeta as i32,
            value: Bytes::from(any_admins.encode_to_vec()),
        };
        add_value(&mut c, "ChannelCreationPolicy", creation.encode_to_vec(), ORDERER_ADMINS);
        g.groups.insert(name.clone(), c);
    }
    Ok(g)
}

/// Builds the channel's root `ConfigGroup` from a completed profile, as Fabric 2.5's configtxgen does
/// (`encoder.NewChannelGroup`): channel policies, `HashingAlgorithm` (SHA256), `BlockDataHashingStructure`
/// (width 2^32-1), `OrdererAddresses` (mod_policy `/Channel/Orderer/Admins`, when the orderer section has
/// addresses), `Consortium` and `Capabilities` when set; then the `Orderer`, `Application` and
/// `Consortiums` groups when present. Every version is 0 and every other mod_policy `Admins`. MSP folders
/// and consenter certificates are read from disk.
///
/// Errors: [`ConfigtxgenError::Profile`] (missing required policies, unknown policy or orderer type, a
/// foreign organisation), [`ConfigtxgenError::Policy`], [`ConfigtxgenError::Msp`], [`ConfigtxgenError::Io`].
pub fn channel_group(profile: &Profile) -> Result<ConfigGroup, ConfigtxgenError> {
    let mut g = group(ADMINS);
    add_policies(&mut g, "/Channel", &profile.policies, ADMINS)?;
    add_value(&mut g, "HashingAlgorithm", HashingAlgorithm { name: "SHA256".into() }.encode_to_vec(), ADMINS);
    let hashing = BlockDataHashingStructure { width: u32::MAX };
    add_value(&mut g, "BlockDataHashingStructure", hashing.encode_to_vec(), ADMINS);
    if let Some(orderer) = profile.orderer.as_ref().filter(|o| !o.addresses.is_empty()) {
        let value = OrdererAddresses { addresses: orderer.addresses.clone() };
        add_value(&mut g, "OrdererAddresses", value.encode_to_vec(), ORDERER_ADMINS);
    }
    if !profile.consortium.is_empty() {
        let value = ConsortiumValue { name: profile.consortium.clone() };
        add_value(&mut g, "Consortium", value.encode_to_vec(), ADMINS);
    }
    if !profile.capabilities.is_empty() {
        add_value(&mut g, "Capabilities", capabilities(&profile.capabilities), ADMINS);
    }
    if let Some(orderer) = &profile.orderer {
        g.groups.insert("Orderer".into(), orderer_group(orderer, &profile.capabilities)?);
    }
    if let Some(app) = &profile.application {
        g.groups.insert("Application".into(), application_group(app)?);
    }
    if let Some(consortiums) = &profile.consortiums {
        g.groups.insert("Consortiums".into(), consortiums_group(consortiums)?);
    }
    Ok(g)
}
