//! Re-keying the fixture's genesis block (configtxgen's block 0 of
//! `mychannel`) to a generated [`Network`].
//!
//! The block is rewritten at the protobuf wire level: only the `MSP` values
//! of the three organisations are replaced and every other byte (policies,
//! capabilities, batch size, etcdraft metadata, map-entry order) is copied
//! unchanged. Decoding and re-encoding the `ConfigGroup` maps through prost
//! would reorder map entries per process (HashMap), making the output depend
//! on more than the seed.

use bytes::Bytes;
use ferrofabric_protos::common::{BlockHeader, ConfigValue};
use ferrofabric_protos::msp::{FabricMspConfig, MspConfig};
use prost::encoding::{decode_key, decode_varint, encode_key, encode_varint, WireType};
use prost::Message;
use sha2::{Digest, Sha256};

use crate::{Network, TestkitError};

/// The fixture's `genesis.block` (Fabric 2.5.16 configtxgen output, copied
/// from `fixtures/fabric-2.5/genesis.block`).
pub(crate) const FIXTURE_GENESIS: &[u8] = include_bytes!("../data/fabric-2.5-genesis.block");

/// Field numbers on the path Block → … → Config.channel_group.
const BLOCK_HEADER: u32 = 1;
const BLOCK_DATA: u32 = 2;
const BLOCK_DATA_DATA: u32 = 1;
const ENVELOPE_PAYLOAD: u32 = 1;
const PAYLOAD_DATA: u32 = 2;
const CONFIG_ENVELOPE_CONFIG: u32 = 1;
const CONFIG_CHANNEL_GROUP: u32 = 2;
const GROUP_GROUPS: u32 = 2;
const GROUP_VALUES: u32 = 3;
const MAP_KEY: u32 = 1;
const MAP_VALUE: u32 = 2;

fn genesis_err(msg: impl Into<String>) -> TestkitError {
    TestkitError::Genesis(msg.into())
}

/// One field as it sits in the buffer: its number, wire type and the whole
/// raw encoding (key included) plus, for length-delimited fields, the body.
struct RawField<'a> {
    number: u32,
    raw: &'a [u8],
    body: Option<&'a [u8]>,
}

/// Splits a message into its top-level fields without interpreting them.
fn fields(mut buf: &[u8]) -> Result<Vec<RawField<'_>>, TestkitError> {
    let mut out = Vec::new();
    while !buf.is_empty() {
        let start = buf;
        let (number, wire) = decode_key(&mut buf).map_err(|e| genesis_err(e.to_string()))?;
        let mut body = None;
        match wire {
            WireType::Varint => {
                decode_varint(&mut buf).map_err(|e| genesis_err(e.to_string()))?;
            }
            WireType::SixtyFourBit => {
                buf = buf.get(8..).ok_or_else(|| genesis_err("truncated fixed64"))?;
            }
            WireType::ThirtyTwoBit => {
                buf = buf.get(4..).ok_or_else(|| genesis_err("truncated fixed32"))?;
            }
            WireType::LengthDelimited => {
                let len = decode_varint(&mut buf).map_err(|e| genesis_err(e.to_string()))?;
                let len = usize::try_from(len).map_err(|_| genesis_err("length overflow"))?;
                body = Some(buf.get(..len).ok_or_else(|| genesis_err("truncated field"))?);
                buf = &buf[len..];
            }
            WireType::StartGroup | WireType::EndGroup => {
                return Err(genesis_err("unexpected group wire type"));
            }
        }
        let used = start.len() - buf.len();
        out.push(RawField { number, raw: &start[..used], body });
    }
    Ok(out)
}

fn push_bytes_field(out: &mut Vec<u8>, number: u32, body: &[u8]) {
    encode_key(number, WireType::LengthDelimited, out);
    encode_varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// Copies `msg`, passing the body of every length-delimited field `number`
/// through `f`. Returns the new bytes and whether `f` ran.
fn rewrite_field_opt(
    msg: &[u8],
    number: u32,
    mut f: impl FnMut(&[u8]) -> Result<Vec<u8>, TestkitError>,
) -> Result<(Vec<u8>, bool), TestkitError> {
    let mut out = Vec::with_capacity(msg.len());
    let mut seen = false;
    for field in fields(msg)? {
        match field.body {
            Some(body) if field.number == number => {
                push_bytes_field(&mut out, number, &f(body)?);
                seen = true;
            }
            _ => out.extend_from_slice(field.raw),
        }
    }
    Ok((out, seen))
}

/// [`rewrite_field_opt`] for a field that must be present.
fn rewrite_field(
    msg: &[u8],
    number: u32,
    f: impl FnMut(&[u8]) -> Result<Vec<u8>, TestkitError>,
) -> Result<Vec<u8>, TestkitError> {
    match rewrite_field_opt(msg, number, f)? {
        (out, true) => Ok(out),
        (_, false) => Err(genesis_err(format!("field {number} missing"))),
    }
}

/// The string key of a map entry.
fn entry_key(entry: &[u8]) -> Result<String, TestkitError> {
    for f in fields(entry)? {
        if let (MAP_KEY, Some(body)) = (f.number, f.body) {
            return String::from_utf8(body.to_vec()).map_err(|_| genesis_err("non-UTF-8 key"));
        }
    }
    Ok(String::new())
}

/// Walks a ConfigGroup, recursing into sub-groups and replacing each `MSP`
/// value with the network's config for the same MSP ID. Counts replacements.
fn rewrite_group(group: &[u8], net: &Network, replaced: &mut usize) -> Result<Vec<u8>, TestkitError> {
    let mut out = Vec::with_capacity(group.len());
    for field in fields(group)? {
        match (field.number, field.body) {
            (GROUP_GROUPS, Some(entry)) => {
                // An entry without a value is an empty group: nothing to patch.
                let (entry, _) = rewrite_field_opt(entry, MAP_VALUE, |g| rewrite_group(g, net, replaced))?;
                push_bytes_field(&mut out, GROUP_GROUPS, &entry);
            }
            (GROUP_VALUES, Some(entry)) if entry_key(entry)? == "MSP" => {
                let entry = rewrite_field(entry, MAP_VALUE, |v| replace_msp_value(v, net))?;
                *replaced += 1;
                push_bytes_field(&mut out, GROUP_VALUES, &entry);
            }
            _ => out.extend_from_slice(field.raw),
        }
    }
    Ok(out)
}

/// Swaps the MSPConfig inside one `MSP` ConfigValue for ours (version and
/// mod_policy kept).
fn replace_msp_value(value: &[u8], net: &Network) -> Result<Vec<u8>, TestkitError> {
    let mut cv = ConfigValue::decode(value).map_err(|e| genesis_err(format!("ConfigValue: {e}")))?;
    let old = MspConfig::decode(cv.value.clone()).map_err(|e| genesis_err(format!("MSPConfig: {e}")))?;
    let old = FabricMspConfig::decode(old.config).map_err(|e| genesis_err(format!("FabricMSPConfig: {e}")))?;
    let ours = net
        .msp_config_by_id(&old.name)
        .ok_or_else(|| genesis_err(format!("fixture MSP {} has no generated counterpart", old.name)))?;
    cv.value = Bytes::from(ours.encode_to_vec());
    Ok(cv.encode_to_vec())
}

/// Fixture block 0 with all three MSP definitions replaced by `net`'s and
/// `header.data_hash` recomputed as SHA-256 of the (single) envelope.
pub(crate) fn patched_genesis(net: &Network) -> Result<Bytes, TestkitError> {
    let mut replaced = 0usize;
    let mut new_data_hash = None;
    let with_data = rewrite_field(FIXTURE_GENESIS, BLOCK_DATA, |block_data| {
        let data = rewrite_field(block_data, BLOCK_DATA_DATA, |envelope| {
            rewrite_field(envelope, ENVELOPE_PAYLOAD, |payload| {
                rewrite_field(payload, PAYLOAD_DATA, |config_env| {
                    rewrite_field(config_env, CONFIG_ENVELOPE_CONFIG, |config| {
                        rewrite_field(config, CONFIG_CHANNEL_GROUP, |group| rewrite_group(group, net, &mut replaced))
                    })
                })
            })
        })?;
        // The data hash covers the concatenated envelopes (here exactly one).
        let mut hasher = Sha256::new();
        for f in fields(&data)? {
            if let (BLOCK_DATA_DATA, Some(env)) = (f.number, f.body) {
                hasher.update(env);
            }
        }
        new_data_hash = Some(hasher.finalize().to_vec());
        Ok(data)
    })?;
    if replaced != 3 {
        return Err(genesis_err(format!("expected 3 MSP values, replaced {replaced}")));
    }
    let data_hash = new_data_hash.ok_or_else(|| genesis_err("block data missing"))?;
    let out = rewrite_field(&with_data, BLOCK_HEADER, |header| {
        let mut h = BlockHeader::decode(header).map_err(|e| genesis_err(format!("BlockHeader: {e}")))?;
        h.data_hash = Bytes::from(data_hash.clone());
        Ok(h.encode_to_vec())
    })?;
    Ok(Bytes::from(out))
}

/// The fixture's `configtx.yaml` profile `AppChannelEtcdRaft` for `net`'s peer orgs: each org with the fixture's
/// Readers, Writers, Admins and `Endorsement: OR('<org>.peer')`, the channel's `Endorsement` and
/// `LifecycleEndorsement` as `MAJORITY Endorsement`, one etcdraft consenter (`orderer.example.com`).
fn configtx_yaml(net: &Network) -> String {
    let sig = |rule: &str| format!("        Type: Signature\n        Rule: \"{rule}\"\n");
    let meta = |rule: &str| format!("        Type: ImplicitMeta\n        Rule: \"{rule}\"\n");
    let mut orgs = String::new();
    let mut app_orgs = String::new();
    for i in 0..net.peer_orgs() {
        let (m, n) = (net.mspid(i), i + 1);
        orgs.push_str(&format!(
            "  - &Org{n}\n    Name: {m}\n    ID: {m}\n    MSPDir: peerOrganizations/org{n}.example.com/msp\n    Policies:\n      Readers:\n{}      Writers:\n{}      Admins:\n{}      Endorsement:\n{}",
            sig(&format!("OR('{m}.admin', '{m}.peer', '{m}.client')")),
            sig(&format!("OR('{m}.admin', '{m}.client')")),
            sig(&format!("OR('{m}.admin')")),
            sig(&format!("OR('{m}.peer')")),
        ));
        app_orgs.push_str(&format!("          - *Org{n}\n"));
    }
    let tls = "ordererOrganizations/example.com/orderers/orderer.example.com/tls/server.crt";
    let mut y = String::new();
    y += "Organizations:\n  - &OrdererOrg\n    Name: OrdererOrg\n    ID: OrdererMSP\n";
    y += "    MSPDir: ordererOrganizations/example.com/msp\n    Policies:\n";
    y += &format!("      Readers:\n{}", sig("OR('OrdererMSP.member')"));
    y += &format!("      Writers:\n{}", sig("OR('OrdererMSP.member')"));
    y += &format!("      Admins:\n{}", sig("OR('OrdererMSP.admin')"));
    y += "    OrdererEndpoints:\n      - 127.0.0.1:7050\n";
    y += &orgs;
    y += "Profiles:\n  AppChannelEtcdRaft:\n    Policies:\n";
    y += &format!("      Readers:\n{}      Writers:\n{}", meta("ANY Readers"), meta("ANY Writers"));
    y += &format!("      Admins:\n{}", meta("MAJORITY Admins"));
    y += "    Capabilities:\n      V2_0: true\n";
    y += "    Orderer:\n      OrdererType: etcdraft\n      Addresses:\n        - 127.0.0.1:7050\n";
    y += "      EtcdRaft:\n        Consenters:\n          - Host: 127.0.0.1\n            Port: 7050\n";
    y += &format!("            ClientTLSCert: {tls}\n            ServerTLSCert: {tls}\n");
    y += "      BatchTimeout: 2s\n      BatchSize:\n        MaxMessageCount: 100\n";
    y += "        AbsoluteMaxBytes: 99 MB\n        PreferredMaxBytes: 8 MB\n";
    // Readers, Writers and Admins of the Orderer and Application groups.
    let group_policies = format!(
        "        Readers:\n{}        Writers:\n{}        Admins:\n{}",
        indent(&meta("ANY Readers")),
        indent(&meta("ANY Writers")),
        indent(&meta("MAJORITY Admins"))
    );
    y += "      Organizations:\n        - *OrdererOrg\n      Policies:\n";
    y += &group_policies;
    y += &format!("        BlockValidation:\n{}", indent(&meta("ANY Writers")));
    y += "      Capabilities:\n        V2_0: true\n";
    y += &format!("    Application:\n      Organizations:\n{app_orgs}      Policies:\n");
    y += &group_policies;
    y += &format!("        LifecycleEndorsement:\n{}", indent(&meta("MAJORITY Endorsement")));
    y += &format!("        Endorsement:\n{}", indent(&meta("MAJORITY Endorsement")));
    y += "      Capabilities:\n        V2_5: true\n";
    y
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("  {l}\n")).collect()
}

/// Block 0 of `mychannel` for `net` from `ferrofabric-configtxgen` ([`configtx_yaml`]), over `net`'s MSP folders
/// written to a temporary directory, at timestamp 0 with a nonce derived from the MSP IDs, so the bytes depend
/// only on the network.
pub(crate) fn configtxgen_genesis(net: &Network) -> Result<Bytes, TestkitError> {
    use ferrofabric_configtxgen::{genesis_block_at, ConfigTx, NONCE_SIZE};
    let dir = tempfile::tempdir().map_err(|source| TestkitError::Io { path: std::env::temp_dir(), source })?;
    net.write_msp_dirs(dir.path())?;
    let yaml = configtx_yaml(net);
    let profile = ConfigTx::from_yaml(&yaml, dir.path())
        .and_then(|c| c.profile("AppChannelEtcdRaft"))
        .map_err(|e| genesis_err(format!("configtxgen profile: {e}")))?;
    let mut nonce = [0u8; NONCE_SIZE];
    let seed = Sha256::digest((0..=net.orderer_org()).map(|o| net.mspid(o)).collect::<Vec<_>>().join(","));
    nonce.copy_from_slice(&seed[..NONCE_SIZE]);
    let block = genesis_block_at(&profile, net.channel_id(), 0, nonce)
        .map_err(|e| genesis_err(format!("configtxgen genesis: {e}")))?;
    Ok(Bytes::from(block.encode_to_vec()))
}
