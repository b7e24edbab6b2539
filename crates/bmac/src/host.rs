//! What the BMac host computes before a block goes to the hardware (hw/DESIGN.md §1): the cheap checks Fabric
//! runs before and between the signature checks (`pre_code`, `post_code`), the endorsement-policy id of
//! each transaction, in-block duplicate-txid tags, range queries turned into probes (§2.6), and whether the
//! block can take the hardware path at all.
//!
//! The checks are `ferrofabric-validator`'s own ([`ferrofabric_validator::check_common_header`] and the other
//! transaction checks, [`ferrofabric_validator::chaincode_definition`]), called in the order it calls them (Fabric
//! 2.5's `core/common/validation/msgvalidation.go` `ValidateTransaction`, `core/committer/txvalidator/v20/validator.go`
//! and `plugindispatcher/dispatcher.go`), so that a transaction with several defects gets the same code from the card
//! as from the software.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;
use ferrofabric_arena::{BlockArena, NsRwSet, TxArena};
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::common::HeaderType;
use ferrofabric_protos::kvrwset::{range_query_info::ReadsInfo, Version};
use ferrofabric_protos::peer::TxValidationCode as Code;
use ferrofabric_state::{StateKey, StateView};
use ferrofabric_validator::{
    chaincode_definition, check_common_header, check_creator, check_payload, check_structure, ChaincodeDefinition,
    TxIds, VALIDATION_PARAMETER,
};

use crate::policy::{resolve_application_policy, PolicyTable};
use crate::wire::{PROBE_DELETED, PROBE_NOT_PUT, PROBE_UNTOUCHED};

/// The `_lifecycle` namespace (chaincode definitions): its transactions are host-path.
pub(crate) const LIFECYCLE: &str = ferrofabric_validator::LIFECYCLE;

/// What the host knows when it plans a block: the channel configuration, the committed state and the txids of
/// the ledger so far.
pub(crate) struct HostContext<'a> {
    /// Channel configuration in force for the block.
    pub config: &'a ChannelConfig,
    /// Committed world state before the block.
    pub view: &'a StateView<'a>,
    /// Every txid of the ledger's earlier blocks (valid or not), as Fabric's ledger index has them.
    pub txids: &'a TxIds,
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
    /// Policy-table id of the invoked chaincode's endorsement policy (0 when no VSCC runs).
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
pub(crate) enum BlockPlan {
    /// The hardware validates the block.
    Hardware(Vec<TxPlan>),
    /// The host validates the block in software, for this reason.
    Host(String),
}

fn code(c: Code) -> u8 {
    c as i32 as u8
}

/// Plans a block (see the module docs). Never fails: anything unexpected makes the block host-path.
/// Each chaincode's endorsement policy is loaded into `policies` (the card's table) on first use.
pub(crate) fn plan_block(ctx: &HostContext<'_>, policies: &mut PolicyTable, arena: &BlockArena) -> BlockPlan {
    let mut txs = Vec::with_capacity(arena.txs().len());
    for tx in arena.txs() {
        match plan_tx(ctx, policies, tx) {
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
fn plan_tx(ctx: &HostContext<'_>, policies: &mut PolicyTable, tx: &TxArena) -> Result<TxPlan, String> {
    let mut p = TxPlan::default();
    let htype = match pre_checks(ctx, tx) {
        Ok(htype) => htype,
        Err(pre) => {
            p.pre_code = code(pre);
            return Ok(p);
        }
    };
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
    let expr =
        resolve_application_policy(ctx.root, &def.policy, ctx.mspids).map_err(|e| format!("chaincode {cc}: {e}"))?;
    p.policy_id = policies.load(&expr).map_err(|e| format!("chaincode {cc}: policy {expr}: {e}"))?;
    Ok(p)
}

/// Fabric's `ValidateTransaction` up to (not including) the creator signature, which the card verifies: the header
/// type, or the code of the first check that fails.
fn pre_checks(ctx: &HostContext<'_>, tx: &TxArena) -> Result<HeaderType, Code> {
    let (htype, code) = check_common_header(tx);
    if code != Code::Valid {
        return Err(code);
    }
    match check_creator(ctx.config, tx, false) {
        Code::Valid => Ok(htype),
        code => Err(code),
    }
}

/// The checks after the creator signature, up to VSCC. `Err`: the block must be host-path (config transactions,
/// or anything where software would stop the block).
fn post_checks(ctx: &HostContext<'_>, tx: &TxArena, htype: HeaderType) -> Result<Code, String> {
    let code = check_payload(tx, htype);
    if code != Code::Valid {
        return Ok(code);
    }
    if htype == HeaderType::Config {
        return Err("a CONFIG transaction (host handles config)".into());
    }
    let ch = tx.channel_header().map_err(|e| e.to_string())?;
    if ctx.txids.contains(&ch.tx_id) {
        return Ok(Code::DuplicateTxid);
    }
    // The plugin dispatcher's checks before VSCC.
    let namespaces = match check_structure(tx) {
        Ok(ns) => ns,
        Err(code) => return Ok(code),
    };
    if namespaces.len() > 1 {
        // The software interleaves definition lookups with VSCC per namespace; the hardware runs one policy.
        return Err("a transaction writing several namespaces".into());
    }
    // `check_structure` passed: the header names the chaincode, the only namespace listed.
    let Some(cc) = namespaces.first() else { return Err("no namespace to validate".into()) };
    match definition(ctx, cc)? {
        Some(def) if !def.plugin.is_empty() && !def.policy.is_empty() => {
            if def.plugin != "vscc" {
                return Err(format!("chaincode {cc}: validation plugin {}", def.plugin));
            }
        }
        _ => return Ok(Code::InvalidChaincode),
    }
    Ok(Code::Valid)
}

/// A chaincode's definition from the committed `_lifecycle` state, read as the software reads it. `Ok(None)`: not
/// defined. `Err`: the block is host-path (software would stop on this state, or the namespace is `_lifecycle`
/// itself).
fn definition(ctx: &HostContext<'_>, name: &str) -> Result<Option<ChaincodeDefinition>, String> {
    if name == LIFECYCLE {
        return Err("a _lifecycle transaction (host handles lifecycle)".into());
    }
    chaincode_definition(ctx.config, ctx.view, name).map_err(|e| format!("chaincode {name}: {e}"))
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
