//! What the BMac host computes before a block goes to the hardware (hw/DESIGN.md §1): the cheap checks Fabric
//! runs before and between the signature checks (`pre_code`, `post_code`), the endorsement-policy circuit of
//! each transaction, in-block duplicate-txid tags, range queries turned into probes (§2.6), and whether the
//! block can take the hardware path at all.
//!
//! The checks and their order follow Fabric 2.5 (`core/common/validation/msgvalidation.go`
//! `ValidateTransaction`, `core/committer/txvalidator/v20/validator.go` and `plugindispatcher/dispatcher.go`),
//! which is the order `ferrofabric-validator` uses, so that a transaction with several defects gets the same
//! code.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use bytes::Bytes;
use ferrofabric_arena::{BlockArena, NsRwSet, TxArena};
use ferrofabric_policy::ChannelConfig;
use ferrofabric_protos::common::HeaderType;
use ferrofabric_protos::kvrwset::{range_query_info::ReadsInfo, Version};
use ferrofabric_protos::lifecycle::{state_data, ChaincodeValidationInfo, StateData, StateMetadata};
use ferrofabric_protos::peer::{ChaincodeEvent, TxValidationCode as Code};
use ferrofabric_state::{StateKey, StateView};
use prost::Message;
use sha2::{Digest, Sha256};

use crate::policy::{resolve_application_policy, PolicyTable};
use crate::wire::{PROBE_DELETED, PROBE_NOT_PUT, PROBE_UNTOUCHED};

/// The `_lifecycle` namespace (chaincode definitions): its transactions are host-path.
pub const LIFECYCLE: &str = "_lifecycle";
/// The metadata entry holding a key-level endorsement policy.
const VALIDATION_PARAMETER: &str = "VALIDATION_PARAMETER";

/// What the host knows when it plans a block: the channel configuration, the committed state and the txids of
/// the ledger so far.
pub struct HostContext<'a> {
    /// Channel configuration in force for the block.
    pub config: &'a ChannelConfig,
    /// Committed world state before the block.
    pub view: &'a StateView<'a>,
    /// Every txid of the ledger's earlier blocks (valid or not), as Fabric's ledger index has them.
    pub txids: &'a HashSet<String>,
    /// The compiled policy circuits.
    pub policies: &'a PolicyTable,
    /// The channel's MSP IDs (org numbering).
    pub mspids: &'a [String],
    /// The channel's config tree (`Config.channel_group`), for channel policy references.
    pub root: &'a ferrofabric_protos::common::ConfigGroup,
}

/// One range-query probe (hw/DESIGN.md §2.6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// The key.
    pub key: Bytes,
    /// Required in-block state: `PROBE_UNTOUCHED`, `PROBE_DELETED` or `PROBE_NOT_PUT`.
    pub require: u8,
}

/// The host's plan for one range query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangePlan {
    /// Whether the committed state, with the probes satisfied, gives the recorded results.
    pub static_ok: bool,
    /// Keys the block writes that could change the result.
    pub probes: Vec<Probe>,
}

/// The host's plan for one transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxPlan {
    /// Code of the checks before the creator signature (VALID = 0).
    pub pre_code: u8,
    /// Code of the checks after the creator signature and before VSCC.
    pub post_code: u8,
    /// Policy circuit of the invoked chaincode (0 when no VSCC runs).
    pub policy_id: u8,
    /// In-block duplicate-txid tag (0 = unique).
    pub dup_tag: u16,
    /// Range queries in rwset order: `ranges[ns_index]` lists the namespace's queries in order.
    pub ranges: Vec<Vec<RangePlan>>,
    /// The txid (endorser transactions whose pre/post checks pass).
    pub txid: Option<String>,
}

impl TxPlan {
    /// Whether the hardware has to look at this transaction's signatures and read/write sets.
    pub fn needs_hardware(&self) -> bool {
        self.pre_code == 0 && self.post_code == 0
    }
}

/// The host's decision for a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BlockPlan {
    /// The hardware validates the block.
    Hardware(Vec<TxPlan>),
    /// The host validates the block in software, for this reason.
    Host(String),
}

fn code(c: Code) -> u8 {
    c as i32 as u8
}

/// Plans a block (see the module docs). Never fails: anything unexpected makes the block host-path.
pub fn plan_block(ctx: &HostContext<'_>, arena: &BlockArena) -> BlockPlan {
    let mut txs = Vec::with_capacity(arena.txs().len());
    for tx in arena.txs() {
        match plan_tx(ctx, tx) {
            Ok(p) => txs.push(p),
            Err(reason) => return BlockPlan::Host(reason),
        }
    }
    if let Err(reason) = plan_block_level(ctx, arena, &mut txs) {
        return BlockPlan::Host(reason);
    }
    BlockPlan::Hardware(txs)
}

/// A transaction's plan, or `Err(reason)` when it makes the block host-path.
fn plan_tx(ctx: &HostContext<'_>, tx: &TxArena) -> Result<TxPlan, String> {
    let mut p = TxPlan::default();
    let (htype, pre) = pre_checks(ctx, tx);
    if pre != Code::Valid {
        p.pre_code = code(pre);
        return Ok(p);
    }
    let post = post_checks(ctx, tx, htype)?;
    if post != Code::Valid {
        p.post_code = code(post);
        return Ok(p);
    }
    // An endorser transaction that reaches VSCC: it must stay inside the hardware subset.
    let ch = tx.channel_header().map_err(|e| e.to_string())?;
    p.txid = Some(ch.tx_id.clone());
    let ext = tx.header_extension().map_err(|e| e.to_string())?;
    let cc = ext.chaincode_id.as_ref().map(|c| c.name.clone()).unwrap_or_default();
    if cc == LIFECYCLE {
        return Err("a _lifecycle transaction (host handles lifecycle)".into());
    }
    let rwset = tx.rwset().map_err(|e| e.to_string())?;
    for ns in rwset {
        if !ns.collections.is_empty() {
            return Err(format!("namespace {} has private data collections", ns.namespace));
        }
        if !ns.kv.metadata_writes.is_empty() {
            return Err(format!("namespace {} has metadata writes", ns.namespace));
        }
        if !ns.kv.writes.is_empty() && ns.namespace != cc {
            return Err(format!("writes to namespace {} besides the invoked chaincode {cc}", ns.namespace));
        }
        for w in &ns.kv.writes {
            let key = StateKey::public(&ns.namespace, Bytes::copy_from_slice(w.key.as_bytes()));
            let has_vp = ctx
                .view
                .get(&key)
                .is_some_and(|v| v.metadata.iter().any(|(k, p)| k == VALIDATION_PARAMETER && !p.is_empty()));
            if has_vp {
                return Err(format!("key {} of {} has a key-level endorsement policy", w.key, ns.namespace));
            }
        }
    }
    let def = definition(ctx, &cc)?.ok_or("definition vanished")?;
    let expr = resolve_application_policy(ctx.root, &def.1, ctx.mspids).map_err(|e| format!("chaincode {cc}: {e}"))?;
    p.policy_id = ctx.policies.id_of(&expr).ok_or_else(|| format!("chaincode {cc}: policy {expr} not compiled"))?;
    Ok(p)
}

/// Fabric's `ValidateTransaction` up to (not including) the creator signature check.
fn pre_checks(ctx: &HostContext<'_>, tx: &TxArena) -> (HeaderType, Code) {
    let none = HeaderType::Message;
    let Ok(env) = tx.envelope() else { return (none, Code::InvalidOtherReason) };
    match tx.payload() {
        Ok(_) => {}
        Err(e) if e.layer == "Payload.header" => return (none, Code::BadCommonHeader),
        Err(_) => return (none, Code::BadPayload),
    }
    let (Ok(ch), Ok(sh)) = (tx.channel_header(), tx.signature_header()) else {
        return (none, Code::BadCommonHeader);
    };
    let htype = match HeaderType::try_from(ch.r#type) {
        Ok(t @ (HeaderType::EndorserTransaction | HeaderType::ConfigUpdate | HeaderType::Config)) => t,
        _ => return (none, Code::BadCommonHeader),
    };
    if ch.epoch != 0 || sh.nonce.is_empty() || sh.creator.is_empty() {
        return (htype, Code::BadCommonHeader);
    }
    if ch.channel_id != ctx.config.channel_id() || env.signature.is_empty() {
        return (htype, Code::BadCreatorSignature);
    }
    let valid = ctx.config.msp_manager().deserialize_identity(&sh.creator).and_then(|id| id.validate());
    if valid.is_err() {
        return (htype, Code::BadCreatorSignature);
    }
    (htype, Code::Valid)
}

/// The checks after the creator signature, up to VSCC. `Err`: the block must be host-path (config transactions,
/// or anything where software would stop the block).
fn post_checks(ctx: &HostContext<'_>, tx: &TxArena, htype: HeaderType) -> Result<Code, String> {
    let ch = tx.channel_header().map_err(|e| e.to_string())?;
    let sh = tx.signature_header().map_err(|e| e.to_string())?;
    match htype {
        HeaderType::EndorserTransaction => {}
        HeaderType::Config => {
            let data_empty = tx.payload().map(|p| p.data.is_empty()).unwrap_or(true);
            if data_empty {
                return Ok(Code::InvalidConfigTransaction);
            }
            return Err("a CONFIG transaction (host handles config)".into());
        }
        _ => return Ok(Code::UnsupportedTxPayload),
    }
    if ch.tx_id != ferrofabric_protoutil::compute_txid(&sh.nonce, &sh.creator) {
        return Ok(Code::BadProposalTxid);
    }
    if validate_endorser_transaction(tx).is_err() {
        return Ok(Code::InvalidEndorserTransaction);
    }
    if ctx.txids.contains(&ch.tx_id) {
        return Ok(Code::DuplicateTxid);
    }
    // The plugin dispatcher's checks before VSCC.
    let Ok(ext) = tx.header_extension() else { return Ok(Code::BadHeaderExtension) };
    let Ok(cca) = tx.chaincode_action() else { return Ok(Code::BadResponsePayload) };
    let Ok(rwset) = tx.rwset() else { return Ok(Code::BadRwset) };
    let (Some(hdr_cc), Some(resp_cc)) = (&ext.chaincode_id, &cca.chaincode_id) else {
        return Ok(Code::InvalidOtherReason);
    };
    let cc = hdr_cc.name.as_str();
    if cc.is_empty() || cc != resp_cc.name || resp_cc.version.is_empty() {
        return Ok(Code::InvalidChaincode);
    }
    if !cca.events.is_empty() {
        match ChaincodeEvent::decode(cca.events.clone()) {
            Ok(ev) if ev.chaincode_id == cc => {}
            _ => return Ok(Code::InvalidOtherReason),
        }
    }
    let mut written = BTreeSet::new();
    written.insert(cc);
    let mut seen = HashSet::new();
    for ns in rwset {
        if !seen.insert(ns.namespace.as_str()) {
            return Ok(Code::IllegalWriteset);
        }
        let writes_coll =
            ns.collections.iter().any(|c| !c.hashed.hashed_writes.is_empty() || !c.hashed.metadata_writes.is_empty());
        if !ns.kv.writes.is_empty() || !ns.kv.metadata_writes.is_empty() || writes_coll {
            written.insert(ns.namespace.as_str());
        }
    }
    if written.len() > 1 {
        // The software interleaves definition lookups with VSCC per namespace; the hardware runs one policy.
        return Err("a transaction writing several namespaces".into());
    }
    match definition(ctx, cc)? {
        Some((plugin, policy)) if !plugin.is_empty() && !policy.is_empty() => {
            if plugin != "vscc" {
                return Err(format!("chaincode {cc}: validation plugin {plugin}"));
            }
        }
        _ => return Ok(Code::InvalidChaincode),
    }
    Ok(Code::Valid)
}

/// Fabric's `validateEndorserTransaction`: one action, a usable action header, decodable payloads and the
/// proposal hash the endorsers signed.
fn validate_endorser_transaction(tx: &TxArena) -> Result<(), String> {
    let t = tx.transaction().map_err(|e| e.to_string())?;
    if t.actions.len() != 1 {
        return Err("not exactly one action".into());
    }
    let act = tx.action().map_err(|e| e.to_string())?;
    if act.signature_header.nonce.is_empty() || act.signature_header.creator.is_empty() {
        return Err("invalid action signature header".into());
    }
    let prp = tx.response_payload().map_err(|e| e.to_string())?;
    let (ch_bytes, _) = tx.header_bytes().map_err(|e| e.to_string())?;
    let cpp = &act.payload.chaincode_proposal_payload;
    if ch_bytes.is_empty() || act.signature_header_bytes.is_empty() || cpp.is_empty() {
        return Err("nil arguments to the proposal hash".into());
    }
    let mut h = Sha256::new();
    h.update(ch_bytes);
    h.update(&act.signature_header_bytes);
    h.update(cpp);
    if h.finalize().as_slice() != prp.proposal_hash.as_ref() {
        return Err("proposal hash does not match".into());
    }
    Ok(())
}

/// A chaincode's validation plugin and marshaled endorsement policy from the committed `_lifecycle` state.
/// `Ok(None)`: not defined. `Err`: the block is host-path (software would stop on this state, or the namespace
/// is `_lifecycle` itself).
fn definition(ctx: &HostContext<'_>, name: &str) -> Result<Option<(String, Bytes)>, String> {
    if name == LIFECYCLE {
        return Err("a _lifecycle transaction (host handles lifecycle)".into());
    }
    let key = |k: String| StateKey::public(LIFECYCLE, Bytes::from(k));
    let Some(meta) = ctx.view.get(&key(format!("namespaces/metadata/{name}"))) else {
        return Ok(None);
    };
    let meta = StateMetadata::decode(meta.value).map_err(|e| format!("metadata of {name}: {e}"))?;
    if meta.datatype != "ChaincodeDefinition" {
        return Err(format!("{name}: not a chaincode definition"));
    }
    let field = |f: &str| -> Result<Option<Bytes>, String> {
        let Some(v) = ctx.view.get(&key(format!("namespaces/fields/{name}/{f}"))) else { return Ok(None) };
        let data = StateData::decode(v.value).map_err(|e| format!("field {f} of {name}: {e}"))?;
        match data.r#type {
            Some(state_data::Type::Bytes(b)) => Ok(Some(b)),
            None => Ok(Some(Bytes::new())),
            Some(_) => Err(format!("field {f} of {name} is not bytes")),
        }
    };
    let vinfo = field("ValidationInfo")?.unwrap_or_default();
    let vinfo = ChaincodeValidationInfo::decode(vinfo).map_err(|e| format!("ValidationInfo of {name}: {e}"))?;
    // Collections are decoded by the software too; a bad package stops the block there.
    if let Some(c) = field("Collections")? {
        ferrofabric_protos::peer::CollectionConfigPackage::decode(c).map_err(|e| format!("Collections: {e}"))?;
    }
    Ok(Some((vinfo.validation_plugin, vinfo.validation_parameter)))
}

/// Block-level planning: duplicate-txid tags and range-query probes.
fn plan_block_level(ctx: &HostContext<'_>, arena: &BlockArena, txs: &mut [TxPlan]) -> Result<(), String> {
    // In-block duplicates: tag txids that occur more than once among transactions that may reach VSCC.
    let mut count: HashMap<String, usize> = HashMap::new();
    for p in txs.iter() {
        if let Some(id) = &p.txid {
            *count.entry(id.clone()).or_default() += 1;
        }
    }
    let mut tags: HashMap<String, u16> = HashMap::new();
    for p in txs.iter_mut() {
        let Some(id) = p.txid.clone() else { continue };
        if count.get(&id).copied().unwrap_or(0) > 1 {
            let next = tags.len() as u16 + 1;
            if next > 255 {
                return Err("more than 255 duplicated txids in one block".into());
            }
            p.dup_tag = *tags.entry(id).or_insert(next);
        }
    }
    // Range queries: keys written by earlier candidate transactions of the block, per namespace.
    let block_num = arena.number();
    let mut written: BTreeMap<String, BTreeSet<Bytes>> = BTreeMap::new();
    for (tx, p) in arena.txs().iter().zip(txs.iter_mut()) {
        if !p.needs_hardware() {
            continue;
        }
        let rwset = tx.rwset().map_err(|e| e.to_string())?;
        p.ranges = rwset
            .iter()
            .map(|ns| {
                let w = written.get(&ns.namespace);
                ns.kv
                    .range_queries_info
                    .iter()
                    .map(|rq| plan_range(ctx, ns, rq, w, block_num))
                    .collect::<Result<Vec<_>, String>>()
            })
            .collect::<Result<Vec<_>, String>>()?;
        for ns in rwset {
            let set = written.entry(ns.namespace.clone()).or_default();
            for w in &ns.kv.writes {
                set.insert(Bytes::copy_from_slice(w.key.as_bytes()));
            }
        }
    }
    Ok(())
}

fn height(v: &Option<Version>) -> Option<(u64, u64)> {
    v.as_ref().map(|v| (v.block_num, v.tx_num))
}

/// One range query's static check and probes (hw/DESIGN.md §2.6).
fn plan_range(
    ctx: &HostContext<'_>,
    ns: &NsRwSet,
    rq: &ferrofabric_protos::kvrwset::RangeQueryInfo,
    written: Option<&BTreeSet<Bytes>>,
    block_num: u64,
) -> Result<RangePlan, String> {
    let start = rq.start_key.as_bytes();
    let end = rq.end_key.as_bytes();
    if end.is_empty() && !rq.itr_exhausted {
        return Err("unbounded range query that was not exhausted".into());
    }
    let in_range = |k: &[u8]| k >= start && (end.is_empty() || k < end);
    let empty = BTreeSet::new();
    let written = written.unwrap_or(&empty);
    let committed: BTreeMap<Bytes, (u64, u64)> = ctx
        .view
        .range(&ns.namespace, start, end)
        .into_iter()
        .map(|(k, v)| (k.key, (v.version.block_num, v.version.tx_num)))
        .collect();
    let recorded: Vec<(Bytes, Option<(u64, u64)>)> = match &rq.reads_info {
        Some(ReadsInfo::RawReads(raw)) => {
            raw.kv_reads.iter().map(|r| (Bytes::copy_from_slice(r.key.as_bytes()), height(&r.version))).collect()
        }
        None => Vec::new(),
        // The software treats Merkle-summarised results as a phantom read.
        Some(ReadsInfo::ReadsMerkleHashes(_)) => {
            return Ok(RangePlan { static_ok: false, probes: Vec::new() });
        }
    };
    if recorded.iter().any(|(_, v)| v.is_some_and(|(b, _)| b == block_num)) {
        return Err("a range query recorded a version of the block being validated".into());
    }
    let recorded_keys: HashMap<&Bytes, Option<(u64, u64)>> = recorded.iter().map(|(k, v)| (k, *v)).collect();
    let mut probes = Vec::new();
    let mut expected: BTreeMap<Bytes, (u64, u64)> = BTreeMap::new();
    for (k, v) in &committed {
        if !written.contains(k) {
            expected.insert(k.clone(), *v);
        }
    }
    for k in written.iter().filter(|k| in_range(k)) {
        match committed.get(k) {
            Some(v) if recorded_keys.get(k) == Some(&Some(*v)) => {
                expected.insert(k.clone(), *v);
                probes.push(Probe { key: k.clone(), require: PROBE_UNTOUCHED });
            }
            Some(_) => probes.push(Probe { key: k.clone(), require: PROBE_DELETED }),
            None => probes.push(Probe { key: k.clone(), require: PROBE_NOT_PUT }),
        }
    }
    let mut expected: Vec<(Bytes, Option<(u64, u64)>)> = expected.into_iter().map(|(k, v)| (k, Some(v))).collect();
    if !rq.itr_exhausted {
        let end_key = Bytes::copy_from_slice(end);
        if written.contains(&end_key) {
            probes.push(Probe { key: end_key.clone(), require: PROBE_UNTOUCHED });
        }
        let sk = StateKey::public(&ns.namespace, end_key.clone());
        if let Some(h) = ctx.view.version(&sk) {
            expected.push((end_key, Some((h.block_num, h.tx_num))));
        }
    }
    Ok(RangePlan { static_ok: expected == recorded, probes })
}
