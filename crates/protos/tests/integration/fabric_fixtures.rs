//! Decodes the real Fabric 2.5.16 fixture ledger (see
//! `shared/fixtures/fabric-2.5/README.md`) with the generated types and
//! checks the results against the generator's `expected.json`, plus
//! byte-exact re-encoding of every map-free message on the way.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeSet;

use bytes::Bytes;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::support::{decode, decode_exact, hex, read_fixture, rfc3339_nanos, split_ledger};
use ferrofabric_protos::common::{
    self, Block, BlockMetadataIndex, ChannelHeader, ConfigEnvelope, Envelope, HeaderType, Metadata,
    OrdererBlockMetadata, Payload, SignatureHeader,
};
use ferrofabric_protos::kvrwset::{self, KvrwSet};
use ferrofabric_protos::msp::SerializedIdentity;
use ferrofabric_protos::peer::{
    ChaincodeAction, ChaincodeActionPayload, ChaincodeEndorsedAction, ChaincodeHeaderExtension,
    ChaincodeInvocationSpec, ChaincodeProposalPayload, ProposalResponsePayload, Transaction, TransactionAction,
};
use ferrofabric_protos::rwset::TxReadWriteSet;
use ferrofabric_protos::{etcdraft, lifecycle, msp, orderer, peer};

const BLOCK_COUNT: usize = 29;

/// Blocks of one ledger file, decoded and round-trip checked.
fn load_blocks(file: &str) -> (Bytes, Vec<(Bytes, Block)>) {
    let raw = read_fixture(file);
    let blocks = split_ledger(&raw)
        .into_iter()
        .enumerate()
        .map(|(i, rec)| {
            let block = decode_exact::<Block>(&rec, &format!("{file} block {i}"));
            (rec, block)
        })
        .collect();
    (raw, blocks)
}

fn block_envelopes(block: &Block) -> &[Bytes] {
    &block.data.as_ref().expect("block has data").data
}

/// Envelope -> Payload -> (ChannelHeader, SignatureHeader), all round-tripped.
struct DecodedEnvelope {
    payload: Payload,
    channel_header: ChannelHeader,
    signature_header: SignatureHeader,
}

fn decode_envelope(raw: &Bytes, what: &str) -> DecodedEnvelope {
    let env: Envelope = decode_exact(raw, &format!("{what} Envelope"));
    let payload: Payload = decode_exact(&env.payload, &format!("{what} Payload"));
    let header = payload.header.as_ref().expect("payload has header");
    // Header is a submessage, so the Payload round-trip above covers it.
    let channel_header = decode_exact(&header.channel_header, &format!("{what} ChannelHeader"));
    let signature_header = decode_exact(&header.signature_header, &format!("{what} SignatureHeader"));
    DecodedEnvelope { payload, channel_header, signature_header }
}

fn creator_msp(sig: &SignatureHeader, what: &str) -> String {
    decode_exact::<SerializedIdentity>(&sig.creator, &format!("{what} creator")).mspid
}

#[test]
fn every_ledger_block_decodes_and_reencodes_byte_exact() {
    let expected = support::expected();
    let exp_blocks = expected["blocks"].as_array().unwrap();
    assert_eq!(exp_blocks.len(), BLOCK_COUNT);

    let (_, orderer_blocks) = load_blocks("orderer-blocks.bin");
    let (_, peer_blocks) = load_blocks("peer-blocks.bin");
    assert_eq!(orderer_blocks.len(), BLOCK_COUNT);
    assert_eq!(peer_blocks.len(), BLOCK_COUNT);

    for (i, exp) in exp_blocks.iter().enumerate() {
        for (src, block) in [("orderer", &orderer_blocks[i].1), ("peer", &peer_blocks[i].1)] {
            let header = block.header.as_ref().expect("header");
            assert_eq!(header.number, i as u64, "{src} block {i} number");
            assert_eq!(hex(&header.data_hash), exp["data_hash"], "{src} block {i} data_hash");
            assert_eq!(hex(&header.previous_hash), exp["previous_hash"], "{src} block {i} previous_hash");
            assert_eq!(
                block_envelopes(block).len() as u64,
                exp["tx_count"].as_u64().unwrap(),
                "{src} block {i} tx count"
            );
            let concat: Vec<u8> = block_envelopes(block).concat();
            assert_eq!(
                hex(&Sha256::digest(&concat)),
                exp["data_hash"],
                "{src} block {i}: data_hash is SHA-256 of the concatenated envelopes"
            );
        }
        // Both ledgers carry the same data; they differ only in metadata.
        assert_eq!(orderer_blocks[i].1.header, peer_blocks[i].1.header);
        assert_eq!(orderer_blocks[i].1.data, peer_blocks[i].1.data);

        // The peer's metadata is what expected.json records.
        let peer_meta = &peer_blocks[i].1.metadata.as_ref().expect("metadata").metadata;
        let exp_meta: Vec<&str> = exp["metadata_hex"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        let got_meta: Vec<String> = peer_meta.iter().map(|m| hex(m)).collect();
        assert_eq!(got_meta, exp_meta, "peer block {i} metadata");
    }

    // genesis.block is the orderer's block 0, byte for byte.
    let genesis = read_fixture("genesis.block");
    let genesis_block: Block = decode_exact(&genesis, "genesis.block");
    assert_eq!(genesis_block.header.as_ref().unwrap().number, 0);
    assert_eq!(genesis, orderer_blocks[0].0);
}

#[test]
fn block_metadata_slots_decode() {
    let expected = support::expected();
    let (_, orderer_blocks) = load_blocks("orderer-blocks.bin");
    let (_, peer_blocks) = load_blocks("peer-blocks.bin");
    let sig_slot = BlockMetadataIndex::Signatures as usize;
    let filter_slot = BlockMetadataIndex::TransactionsFilter as usize;
    let commit_slot = BlockMetadataIndex::CommitHash as usize;

    for (i, exp) in expected["blocks"].as_array().unwrap().iter().enumerate() {
        let ord_meta = &orderer_blocks[i].1.metadata.as_ref().unwrap().metadata;
        let peer_meta = &peer_blocks[i].1.metadata.as_ref().unwrap().metadata;
        assert_eq!(ord_meta.len(), 5, "orderer block {i} metadata entries");
        assert_eq!(ord_meta[sig_slot], peer_meta[sig_slot], "block {i} SIGNATURES slot");
        for (slot, m) in ord_meta.iter().enumerate().skip(1) {
            // README: the orderer sets only SIGNATURES (the filter slot of
            // block 0 is the one exception configtxgen writes).
            if !(i == 0 && slot == filter_slot) {
                assert!(m.is_empty(), "orderer block {i} slot {slot} should be empty");
            }
        }

        let sigs: Metadata = decode_exact(&ord_meta[sig_slot], &format!("block {i} SIGNATURES"));
        let obm: OrdererBlockMetadata = decode_exact(&sigs.value, &format!("block {i} OrdererBlockMetadata"));
        assert_eq!(
            obm.last_config.as_ref().map_or(0, |lc| lc.index),
            exp["last_config_index"].as_u64().unwrap(),
            "block {i} last config index"
        );
        let signers: Vec<String> = sigs
            .signatures
            .iter()
            .map(|s| {
                let sh: SignatureHeader = decode_exact(&s.signature_header, "metadata sig header");
                creator_msp(&sh, "metadata signature")
            })
            .collect();
        let exp_signers: Vec<String> =
            exp.get("signature_signers").map(|v| serde_json::from_value(v.clone()).unwrap()).unwrap_or_default();
        assert_eq!(signers, exp_signers, "block {i} signers");
        if i > 0 {
            // Raft's per-block state sits in consenter_metadata, itself
            // wrapped in a common.Metadata (value = etcdraft.BlockMetadata).
            let wrapped: Metadata = decode_exact(&obm.consenter_metadata, &format!("block {i} consenter metadata"));
            let raft: etcdraft::BlockMetadata = decode_exact(&wrapped.value, &format!("block {i} raft metadata"));
            assert_eq!(raft.consenter_ids, vec![1], "block {i} raft consenters");
            assert_eq!(raft.next_consenter_id, 2, "block {i} next consenter id");
            assert!(raft.raft_index > 0, "block {i} raft index");
        }

        // Peer-only slots: one validation code per tx and the commit hash.
        let filter = &peer_meta[filter_slot];
        let codes: Vec<u64> =
            exp["txs"].as_array().unwrap().iter().map(|t| t["validation_code_num"].as_u64().unwrap()).collect();
        assert_eq!(filter.iter().map(|&c| u64::from(c)).collect::<Vec<_>>(), codes, "block {i} TRANSACTIONS_FILTER");
        for &c in filter.iter() {
            assert!(peer::TxValidationCode::try_from(i32::from(c)).is_ok());
        }
        match exp.get("commit_hash") {
            Some(Value::String(h)) => {
                let ch: Metadata = decode_exact(&peer_meta[commit_slot], &format!("block {i} COMMIT_HASH"));
                assert_eq!(&hex(&ch.value), h, "block {i} commit hash");
            }
            _ => assert!(peer_meta[commit_slot].is_empty(), "block {i} has no commit hash"),
        }
    }
}

fn exp_version(v: &Option<kvrwset::Version>) -> String {
    v.as_ref().map_or_else(String::new, |v| format!("{}:{}", v.block_num, v.tx_num))
}

fn reads_json(reads: &[kvrwset::KvRead]) -> Value {
    reads.iter().map(|r| serde_json::json!({"key": r.key, "version": exp_version(&r.version)})).collect()
}

/// Renders a decoded KVRWSet in expected.json's shape so the two can be
/// compared as JSON values.
fn kvrwset_json(ns: &str, kv: &KvrwSet, hashed: &[String]) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("namespace".into(), ns.into());
    out.insert("reads".into(), reads_json(&kv.reads));
    if !kv.range_queries_info.is_empty() {
        let rqs: Vec<Value> = kv
            .range_queries_info
            .iter()
            .map(|rq| {
                let reads = match &rq.reads_info {
                    Some(kvrwset::range_query_info::ReadsInfo::RawReads(q)) => reads_json(&q.kv_reads),
                    other => panic!("unexpected range query reads {other:?}"),
                };
                serde_json::json!({
                    "Start": rq.start_key, "End": rq.end_key,
                    "Exhausted": rq.itr_exhausted, "reads": reads,
                })
            })
            .collect();
        out.insert("range_queries".into(), rqs.into());
    }
    let writes: Vec<Value> = kv
        .writes
        .iter()
        .map(|w| {
            let mut m = serde_json::Map::new();
            m.insert("key".into(), w.key.clone().into());
            if w.is_delete {
                // Deletes are listed without a value.
                m.insert("is_delete".into(), true.into());
                return Value::Object(m);
            }
            // expected.json shows text values verbatim and anything with
            // invalid UTF-8 or a NUL byte as hex.
            match std::str::from_utf8(&w.value) {
                Ok(s) if !s.contains('\0') => m.insert("value".into(), s.into()),
                _ => m.insert("value_hex".into(), hex(&w.value).into()),
            };
            Value::Object(m)
        })
        .collect();
    out.insert("writes".into(), writes.into());
    if !hashed.is_empty() {
        out.insert("hashed_collections".into(), hashed.to_vec().into());
    }
    Value::Object(out)
}

/// Walks an ENDORSER_TRANSACTION payload down to its KV read/write sets,
/// round-tripping every map-free message. Returns `Err` only when the
/// payload data is not a parseable Transaction.
fn walk_endorser_tx(data: &Bytes, exp: &Value, what: &str) -> Result<(), prost::DecodeError> {
    use prost::Message;
    let tx = Transaction::decode(data.clone())?;
    assert_eq!(tx.encode_to_vec(), data[..], "{what} Transaction re-encode");
    assert_eq!(tx.actions.len(), 1, "{what}: one action per Fabric tx");
    let action: &TransactionAction = &tx.actions[0];
    let action_sig: SignatureHeader = decode_exact(&action.header, &format!("{what} action header"));
    assert_eq!(Some(creator_msp(&action_sig, what).as_str()), exp["creator_msp"].as_str());

    let cap: ChaincodeActionPayload = decode_exact(&action.payload, &format!("{what} ChaincodeActionPayload"));
    // ChaincodeProposalPayload and ChaincodeInput carry maps: decode only.
    let cpp: ChaincodeProposalPayload =
        decode(&cap.chaincode_proposal_payload, &format!("{what} ChaincodeProposalPayload"));
    assert!(cpp.transient_map.is_empty(), "{what}: transient data never reaches the ledger");
    let cis: ChaincodeInvocationSpec = decode(&cpp.input, &format!("{what} invocation spec"));
    let spec = cis.chaincode_spec.as_ref().expect("chaincode spec");
    let cc_name = spec.chaincode_id.as_ref().map(|c| c.name.clone()).unwrap_or_default();
    assert_eq!(Some(cc_name.as_str()), exp["chaincode"].as_str(), "{what} chaincode");
    let args: Vec<String> = spec
        .input
        .as_ref()
        .expect("chaincode input")
        .args
        .iter()
        .map(|a| String::from_utf8(a.to_vec()).expect("fixture args are UTF-8"))
        .collect();
    assert_eq!(serde_json::json!(args), exp["args"], "{what} args");
    if cc_name == "_lifecycle" {
        check_lifecycle_args(&args, &spec.input.as_ref().unwrap().args, what);
    }

    let cea: &ChaincodeEndorsedAction = cap.action.as_ref().expect("endorsed action");
    let endorsers: Vec<String> =
        cea.endorsements.iter().map(|e| decode_exact::<SerializedIdentity>(&e.endorser, "endorser").mspid).collect();
    assert_eq!(serde_json::json!(endorsers), exp["endorsers"], "{what} endorsers");

    let prp: ProposalResponsePayload =
        decode_exact(&cea.proposal_response_payload, &format!("{what} ProposalResponsePayload"));
    assert_eq!(prp.proposal_hash.len(), 32, "{what}: SHA-256 proposal hash");
    let cc_action: ChaincodeAction = decode_exact(&prp.extension, &format!("{what} ChaincodeAction"));
    let response = cc_action.response.as_ref().expect("chaincode response");
    assert_eq!(response.status, 200, "{what}: endorsed responses are OK");
    let txrw: TxReadWriteSet = decode_exact(&cc_action.results, &format!("{what} TxReadWriteSet"));

    let got: Vec<Value> = txrw
        .ns_rwset
        .iter()
        .map(|ns| {
            let kv: KvrwSet = decode_exact(&ns.rwset, &format!("{what} KVRWSet {}", ns.namespace));
            let hashed: Vec<String> = ns
                .collection_hashed_rwset
                .iter()
                .map(|c| {
                    decode_exact::<kvrwset::HashedRwSet>(&c.hashed_rwset, "HashedRWSet");
                    c.collection_name.clone()
                })
                .collect();
            if ns.namespace == "_lifecycle" {
                check_lifecycle_writes(&kv, what);
            }
            kvrwset_json(&ns.namespace, &kv, &hashed)
        })
        .collect();
    assert_eq!(Value::Array(got), exp["rwset"], "{what} read/write set");
    Ok(())
}

/// `_lifecycle` invocations carry marshaled lifecycle.*Args as args[1].
fn check_lifecycle_args(names: &[String], raw: &[Bytes], what: &str) {
    match names[0].as_str() {
        "ApproveChaincodeDefinitionForMyOrg" => {
            let a: lifecycle::ApproveChaincodeDefinitionForMyOrgArgs = decode_exact(&raw[1], what);
            assert_eq!((a.sequence, a.version.as_str()), (1, "1.0"));
            match a.source.and_then(|s| s.r#type) {
                Some(lifecycle::chaincode_source::Type::LocalPackage(l)) => {
                    assert!(l.package_id.starts_with(&format!("{}_1.0:", a.name)))
                }
                other => panic!("{what}: unexpected source {other:?}"),
            }
        }
        "CommitChaincodeDefinition" => {
            let c: lifecycle::CommitChaincodeDefinitionArgs = decode_exact(&raw[1], what);
            assert!(["smallbank", "transfer"].contains(&c.name.as_str()), "{what}");
            assert_eq!((c.sequence, c.version.as_str()), (1, "1.0"));
        }
        other => panic!("{what}: unexpected _lifecycle function {other}"),
    }
}

/// `_lifecycle` stores its public state as lifecycle.StateData/StateMetadata.
fn check_lifecycle_writes(kv: &KvrwSet, what: &str) {
    use lifecycle::state_data::Type;
    for w in &kv.writes {
        let value = w.value.clone();
        if w.key.starts_with("namespaces/metadata/") {
            let m: lifecycle::StateMetadata = decode_exact(&value, what);
            assert_eq!(m.datatype, "ChaincodeDefinition");
            continue;
        }
        let field = w.key.rsplit('/').next().unwrap();
        let sd: lifecycle::StateData = decode_exact(&value, what);
        match (field, sd.r#type) {
            ("Sequence", Some(Type::Int64(seq))) => assert_eq!(seq, 1),
            ("EndorsementInfo", Some(Type::Bytes(b))) => {
                let info: lifecycle::ChaincodeEndorsementInfo = decode_exact(&b, what);
                assert_eq!((info.version.as_str(), info.endorsement_plugin.as_str()), ("1.0", "escc"));
            }
            ("ValidationInfo", Some(Type::Bytes(b))) => {
                let info: lifecycle::ChaincodeValidationInfo = decode_exact(&b, what);
                assert_eq!(info.validation_plugin, "vscc");
                let pol: peer::ApplicationPolicy = decode_exact(&info.validation_parameter, what);
                assert_eq!(
                    pol.r#type,
                    Some(peer::application_policy::Type::ChannelConfigPolicyReference(
                        "/Channel/Application/Endorsement".into()
                    ))
                );
            }
            ("Collections", Some(Type::Bytes(b))) => {
                let pkg: peer::CollectionConfigPackage = decode_exact(&b, what);
                assert!(pkg.config.is_empty(), "{what}: no private collections defined");
            }
            (f, t) => panic!("{what}: unexpected _lifecycle field {f} = {t:?}"),
        }
    }
}

#[test]
fn every_envelope_decodes_down_to_kv_rwsets() {
    let expected = support::expected();
    let (_, blocks) = load_blocks("peer-blocks.bin");
    let mut failures = BTreeSet::new();
    let mut expected_failures = BTreeSet::new();
    let mut walked = 0usize;

    for (b, (_, block)) in blocks.iter().enumerate() {
        let exp_txs = expected["blocks"][b]["txs"].as_array().unwrap();
        for (t, raw) in block_envelopes(block).iter().enumerate() {
            let exp = &exp_txs[t];
            let what = format!("block {b} tx {t}");
            assert_eq!(hex(&Sha256::digest(raw)), exp["envelope_sha256"], "{what} sha256");
            let env = decode_envelope(raw, &what);
            let ch = &env.channel_header;
            assert_eq!(i64::from(ch.r#type), exp["header_type_num"].as_i64().unwrap(), "{what}");
            assert_eq!(HeaderType::try_from(ch.r#type).unwrap().as_str_name(), exp["header_type"].as_str().unwrap());
            assert_eq!(ch.tx_id, exp["txid"].as_str().unwrap(), "{what} txid");
            assert_eq!(ch.channel_id, exp["channel"].as_str().unwrap(), "{what} channel");
            assert_eq!(ch.epoch, exp.get("epoch").and_then(Value::as_u64).unwrap_or(0));
            assert_eq!(
                rfc3339_nanos(ch.timestamp.as_ref().expect("timestamp")),
                exp["timestamp"].as_str().unwrap(),
                "{what} timestamp"
            );
            if let Some(msp_id) = exp.get("creator_msp") {
                assert_eq!(creator_msp(&env.signature_header, &what), msp_id.as_str().unwrap());
            }
            if exp.get("parse_error").is_some() {
                expected_failures.insert((b, t));
            }

            if ch.r#type == HeaderType::EndorserTransaction as i32 {
                let ext: ChaincodeHeaderExtension = decode_exact(&ch.extension, &format!("{what} header extension"));
                assert_eq!(ext.chaincode_id.as_ref().map(|c| c.name.as_str()), exp["chaincode"].as_str());
                match walk_endorser_tx(&env.payload.data, exp, &what) {
                    Ok(()) => walked += 1,
                    Err(_) => {
                        failures.insert((b, t));
                    }
                }
            }
        }
    }
    // README: exactly one deliberately unparseable Transaction (last tx of
    // block 19, validated INVALID_ENDORSER_TRANSACTION by the peer).
    assert_eq!(expected_failures, BTreeSet::from([(19, 2)]));
    assert_eq!(failures, expected_failures, "unparseable endorser transactions");
    assert_eq!(walked, 733 - 1, "parsed endorser transactions");
}

#[test]
fn config_block_decodes_channel_config() {
    let genesis = read_fixture("genesis.block");
    let block: Block = decode_exact(&genesis, "genesis.block");
    let envs = block_envelopes(&block);
    assert_eq!(envs.len(), 1);
    let env = decode_envelope(&envs[0], "genesis tx");
    assert_eq!(env.channel_header.r#type, HeaderType::Config as i32);
    assert_eq!(env.channel_header.channel_id, "mychannel");

    // Config holds maps (ConfigGroup), so no byte-exact check at this level.
    let cfg_env: ConfigEnvelope = decode(&env.payload.data, "ConfigEnvelope");
    let config = cfg_env.config.as_ref().expect("config");
    assert_eq!(config.sequence, 0);
    let channel = config.channel_group.as_ref().expect("channel group");
    let mut groups: Vec<&str> = channel.groups.keys().map(String::as_str).collect();
    groups.sort_unstable();
    assert_eq!(groups, ["Application", "Orderer"]);

    let value = |group: &common::ConfigGroup, key: &str| -> Bytes {
        group.values.get(key).unwrap_or_else(|| panic!("config value {key} missing")).value.clone()
    };

    let hashing: common::HashingAlgorithm = decode_exact(&value(channel, "HashingAlgorithm"), "");
    assert_eq!(hashing.name, "SHA256");
    let width: common::BlockDataHashingStructure = decode_exact(&value(channel, "BlockDataHashingStructure"), "");
    assert_eq!(width.width, u32::MAX);
    let caps: common::Capabilities = decode(&value(channel, "Capabilities"), "channel caps");
    assert!(caps.capabilities.contains_key("V2_0"));

    let ord = &channel.groups["Orderer"];
    let batch: orderer::BatchSize = decode_exact(&value(ord, "BatchSize"), "BatchSize");
    assert_eq!(
        (batch.max_message_count, batch.absolute_max_bytes, batch.preferred_max_bytes),
        (100, 99 * 1024 * 1024, 8 * 1024 * 1024)
    );
    let timeout: orderer::BatchTimeout = decode_exact(&value(ord, "BatchTimeout"), "BatchTimeout");
    assert_eq!(timeout.timeout, "2s");
    let consensus: orderer::ConsensusType = decode_exact(&value(ord, "ConsensusType"), "ConsensusType");
    assert_eq!(consensus.r#type, "etcdraft");
    assert_eq!(consensus.state(), orderer::consensus_type::State::Normal);
    let raft: etcdraft::ConfigMetadata = decode_exact(&consensus.metadata, "raft config");
    assert_eq!(raft.consenters.len(), 1);
    assert_eq!((raft.consenters[0].host.as_str(), raft.consenters[0].port), ("127.0.0.1", 7050));
    let opts = raft.options.as_ref().expect("raft options");
    assert_eq!(opts.tick_interval, "500ms");
    assert_eq!((opts.election_tick, opts.heartbeat_tick), (10, 1));

    // Organisations: MSP definitions and signature policies.
    let app = &channel.groups["Application"];
    for (parent, org) in [(ord, "OrdererOrg"), (app, "Org1MSP"), (app, "Org2MSP")] {
        let group = parent.groups.get(org).unwrap_or_else(|| panic!("org group {org} missing"));
        let mspc: msp::MspConfig = decode_exact(&value(group, "MSP"), "MSPConfig");
        assert_eq!(mspc.r#type, 0, "X.509 MSP");
        let fab: msp::FabricMspConfig = decode_exact(&mspc.config, "FabricMSPConfig");
        assert!(fab.name.ends_with("MSP"), "{org}: {}", fab.name);
        assert_eq!(fab.root_certs.len(), 1);
        assert!(fab.root_certs[0].starts_with(b"-----BEGIN CERTIFICATE-----"));
        assert!(fab.fabric_node_ous.as_ref().is_some_and(|n| n.enable));

        let admins = &group.policies["Admins"];
        let pol = admins.policy.as_ref().expect("policy");
        assert_eq!(pol.r#type, common::policy::PolicyType::Signature as i32);
        let spe: common::SignaturePolicyEnvelope = decode_exact(&pol.value, "signature policy");
        assert_eq!(spe.identities.len(), 1);
        let id = &spe.identities[0];
        assert_eq!(id.principal_classification(), common::msp_principal::Classification::Role);
        let role: common::MspRole = decode_exact(&id.principal, "MSPRole");
        assert_eq!(role.msp_identifier, fab.name);
        assert_eq!(role.role(), common::msp_role::MspRoleType::Admin);
    }

    let endorsement = app.policies["Endorsement"].policy.as_ref().expect("policy");
    assert_eq!(endorsement.r#type, common::policy::PolicyType::ImplicitMeta as i32);
    let imp: common::ImplicitMetaPolicy = decode_exact(&endorsement.value, "ImplicitMetaPolicy");
    assert_eq!(imp.sub_policy, "Endorsement");
    assert_eq!(imp.rule(), common::implicit_meta_policy::Rule::Majority);
}

#[test]
fn decoding_from_bytes_is_zero_copy() {
    let (file, blocks) = load_blocks("orderer-blocks.bin");
    let range = file.as_ptr() as usize..file.as_ptr() as usize + file.len();
    let inside = |b: &Bytes| b.is_empty() || range.contains(&(b.as_ptr() as usize));
    let mut checked = 0;
    for (_, block) in &blocks {
        for raw in block_envelopes(block) {
            assert!(inside(raw), "envelope bytes were copied");
            let env: Envelope = decode(raw, "Envelope");
            assert!(inside(&env.payload) && inside(&env.signature), "payload was copied");
            let payload: Payload = decode(&env.payload, "Payload");
            assert!(inside(&payload.data), "payload data was copied");
            checked += 1;
        }
    }
    assert_eq!(checked, 735);
}

#[test]
fn truncated_block_is_a_decode_error() {
    use prost::Message;
    let genesis = read_fixture("genesis.block");
    // Cutting the last byte leaves the final length-delimited field short.
    let cut = genesis.slice(..genesis.len() - 1);
    assert!(Block::decode(cut).is_err());
    // Garbage that is not protobuf at all (field number 0).
    assert!(Envelope::decode(&[0x00u8, 0x01, 0x02][..]).is_err());
}
