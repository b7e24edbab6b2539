//! Endorsement policies as circuits (hw/DESIGN.md §5).
//!
//! A Fabric policy (a cauthdsl signature policy, `common/cauthdsl/cauthdsl.go`, or an ImplicitMeta policy over
//! the config tree, `common/policies/implicitmeta.go`) is reduced to a threshold tree over leaves (org, role).
//! The orgs are numbered by the rank of their MSP ID among the channel's MSP IDs. The circuit's inputs are, per
//! org, five bits: member, admin, orderer, peer, client. Each bit is the OR over the endorsements of that org
//! whose signatures verified.
//!
//! This matches Fabric only if no identity can satisfy two leaves of one signature policy: Fabric lets each
//! signature satisfy only one principal. [`normalize_signature_policy`] therefore refuses a signature policy
//! with two leaves of the same org. ImplicitMeta sub-policies are evaluated independently in Fabric, so they may
//! share orgs.

use std::collections::BTreeSet;
use std::fmt::{self, Write as _};

use ferrofabric_protos::common::{
    implicit_meta_policy, msp_principal::Classification, msp_role::MspRoleType, policy::PolicyType, signature_policy,
    ConfigGroup, ImplicitMetaPolicy, MspRole, SignaturePolicy, SignaturePolicyEnvelope,
};
use ferrofabric_protos::peer::{application_policy, ApplicationPolicy};
use prost::Message;

/// An MSP role as the circuit sees it; the discriminant is the bit index within an org's 5-bit group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Any valid identity of the org.
    Member = 4,
    /// Admin (NodeOU or admin certificate).
    Admin = 3,
    /// Orderer NodeOU.
    Orderer = 2,
    /// Peer NodeOU.
    Peer = 1,
    /// Client NodeOU.
    Client = 0,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Member => "member",
            Role::Admin => "admin",
            Role::Orderer => "orderer",
            Role::Peer => "peer",
            Role::Client => "client",
        }
    }

    fn from_name(s: &str) -> Option<Role> {
        Some(match s {
            "member" => Role::Member,
            "admin" => Role::Admin,
            "orderer" => Role::Orderer,
            "peer" => Role::Peer,
            "client" => Role::Client,
            _ => return None,
        })
    }

    fn from_msp(r: i32) -> Option<Role> {
        Some(match MspRoleType::try_from(r).ok()? {
            MspRoleType::Member => Role::Member,
            MspRoleType::Admin => Role::Admin,
            MspRoleType::Client => Role::Client,
            MspRoleType::Peer => Role::Peer,
            MspRoleType::Orderer => Role::Orderer,
        })
    }
}

/// A normalised policy: constants, leaves and thresholds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// Always satisfied (`true`) or never (`false`).
    Const(bool),
    /// An endorsement of org `org` with role `role` verified.
    Leaf {
        /// Org index (rank of the MSP ID).
        org: u8,
        /// Role.
        role: Role,
    },
    /// At least `n` of `items` (n ≥ 2 and n < items.len() + 1 after normalisation).
    OutOf {
        /// Threshold.
        n: usize,
        /// Sub-expressions.
        items: Vec<Expr>,
    },
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Const(b) => write!(f, "{b}"),
            Expr::Leaf { org, role } => write!(f, "{org}.{}", role.name()),
            Expr::OutOf { n, items } => {
                write!(f, "OutOf({n}")?;
                for i in items {
                    write!(f, ",{i}")?;
                }
                write!(f, ")")
            }
        }
    }
}

/// Why a policy cannot become a circuit (its chaincode's blocks go host-path).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("policy not compilable to a circuit: {0}")]
pub struct PolicyCompileError(pub String);

fn err(s: impl Into<String>) -> PolicyCompileError {
    PolicyCompileError(s.into())
}

/// Applies the threshold rules and drops trivial nodes: OutOf(0, …) = true, n > len = false, a single-item
/// OR/AND is its item, constants are folded.
fn out_of(n: usize, items: Vec<Expr>) -> Expr {
    let mut n = n;
    let mut rest = Vec::with_capacity(items.len());
    for it in items {
        match it {
            Expr::Const(true) => n = n.saturating_sub(1),
            Expr::Const(false) => {}
            e => rest.push(e),
        }
    }
    if n == 0 {
        return Expr::Const(true);
    }
    if n > rest.len() {
        return Expr::Const(false);
    }
    if rest.len() == 1 {
        return rest.remove(0);
    }
    Expr::OutOf { n, items: rest }
}

/// The org index of an MSP ID: its rank among `mspids` (sorted); `None` if the channel has no such MSP.
pub(crate) fn org_index(mspids: &[String], mspid: &str) -> Option<u8> {
    let mut sorted: Vec<&str> = mspids.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    sorted.iter().position(|m| *m == mspid).and_then(|p| u8::try_from(p).ok())
}

/// Normalises a cauthdsl signature policy. `mspids` are the channel's MSP IDs.
///
/// Errors: a non-ROLE principal, an unknown MSP, an out-of-range `SignedBy` index, two leaves of the same org
/// (Fabric's one-signature-per-principal rule could then differ from the circuit), or a tree deeper than 16.
pub(crate) fn normalize_signature_policy(
    env: &SignaturePolicyEnvelope,
    mspids: &[String],
) -> Result<Expr, PolicyCompileError> {
    let mut leaves = Vec::new();
    for p in &env.identities {
        if p.principal_classification != Classification::Role as i32 {
            return Err(err("only ROLE principals are supported"));
        }
        let role = MspRole::decode(p.principal.clone()).map_err(|e| err(format!("MSPRole: {e}")))?;
        let org = org_index(mspids, &role.msp_identifier)
            .ok_or_else(|| err(format!("unknown MSP {}", role.msp_identifier)))?;
        let r = Role::from_msp(role.role).ok_or_else(|| err("unknown MSP role"))?;
        leaves.push((org, r));
    }
    let rule = env.rule.as_ref().ok_or_else(|| err("signature policy without a rule"))?;
    let mut used_orgs = BTreeSet::new();
    let e = sig_rule(rule, &leaves, &mut used_orgs, 0)?;
    Ok(e)
}

fn sig_rule(
    rule: &SignaturePolicy,
    leaves: &[(u8, Role)],
    used: &mut BTreeSet<u8>,
    depth: usize,
) -> Result<Expr, PolicyCompileError> {
    if depth > 16 {
        return Err(err("policy tree too deep"));
    }
    match rule.r#type.as_ref() {
        Some(signature_policy::Type::SignedBy(i)) => {
            let (org, role) = *usize::try_from(*i)
                .ok()
                .and_then(|i| leaves.get(i))
                .ok_or_else(|| err("SignedBy index out of range"))?;
            if !used.insert(org) {
                return Err(err(format!("two principals of org {org}: not expressible as per-org bits")));
            }
            Ok(Expr::Leaf { org, role })
        }
        Some(signature_policy::Type::NOutOf(n)) => {
            let items = n.rules.iter().map(|r| sig_rule(r, leaves, used, depth + 1)).collect::<Result<Vec<_>, _>>()?;
            Ok(out_of(usize::try_from(n.n.max(0)).unwrap_or(0), items))
        }
        None => Err(err("empty signature policy rule")),
    }
}

/// Resolves a channel policy path such as `/Channel/Application/Endorsement` in the channel's config tree.
///
/// Errors: the path does not exist, or a policy under it is not compilable.
pub(crate) fn resolve_channel_policy(
    root: &ConfigGroup,
    path: &str,
    mspids: &[String],
) -> Result<Expr, PolicyCompileError> {
    let rel = path.strip_prefix("/Channel/").ok_or_else(|| err(format!("not an absolute channel path: {path}")))?;
    let mut parts: Vec<&str> = rel.split('/').collect();
    let name = parts.pop().ok_or_else(|| err("empty path"))?;
    let mut group = root;
    for g in parts {
        group = group.groups.get(g).ok_or_else(|| err(format!("no group {g} in {path}")))?;
    }
    group_policy(group, name, mspids, 0)
}

fn group_policy(group: &ConfigGroup, name: &str, mspids: &[String], depth: usize) -> Result<Expr, PolicyCompileError> {
    if depth > 8 {
        return Err(err("implicit meta nesting too deep"));
    }
    let Some(cp) = group.policies.get(name) else {
        // Fabric substitutes a policy that rejects everything for a missing sub-policy.
        return Ok(Expr::Const(false));
    };
    let policy = cp.policy.as_ref().ok_or_else(|| err(format!("policy {name} has no body")))?;
    if policy.r#type == PolicyType::Signature as i32 {
        let env = SignaturePolicyEnvelope::decode(policy.value.clone()).map_err(|e| err(format!("{name}: {e}")))?;
        normalize_signature_policy(&env, mspids)
    } else if policy.r#type == PolicyType::ImplicitMeta as i32 {
        let im = ImplicitMetaPolicy::decode(policy.value.clone()).map_err(|e| err(format!("{name}: {e}")))?;
        let mut names: Vec<&String> = group.groups.keys().collect();
        names.sort();
        let items = names
            .iter()
            .map(|g| group_policy(&group.groups[*g], &im.sub_policy, mspids, depth + 1))
            .collect::<Result<Vec<_>, _>>()?;
        if items.is_empty() {
            return Ok(Expr::Const(true));
        }
        let n = match implicit_meta_policy::Rule::try_from(im.rule) {
            Ok(implicit_meta_policy::Rule::Any) => 1,
            Ok(implicit_meta_policy::Rule::All) => items.len(),
            Ok(implicit_meta_policy::Rule::Majority) => items.len() / 2 + 1,
            Err(_) => return Err(err("unknown implicit meta rule")),
        };
        Ok(out_of(n, items))
    } else {
        Err(err(format!("policy {name}: unsupported policy type {}", policy.r#type)))
    }
}

/// Resolves a chaincode's marshaled `ApplicationPolicy` (Fabric's `ApplicationPolicyEvaluator`).
///
/// Errors: it does not decode or is not compilable.
pub(crate) fn resolve_application_policy(
    root: &ConfigGroup,
    policy: &[u8],
    mspids: &[String],
) -> Result<Expr, PolicyCompileError> {
    let ap = ApplicationPolicy::decode(policy).map_err(|e| err(format!("ApplicationPolicy: {e}")))?;
    match ap.r#type {
        Some(application_policy::Type::SignaturePolicy(env)) => normalize_signature_policy(&env, mspids),
        Some(application_policy::Type::ChannelConfigPolicyReference(path)) => {
            resolve_channel_policy(root, &path, mspids)
        }
        None => Err(err("ApplicationPolicy without a type")),
    }
}

/// Parses the text form written by [`Expr`]'s `Display` (`OutOf(2,1.peer,2.peer)`, `0.member`, `true`).
///
/// Errors: a syntax error.
pub fn parse_expr(s: &str) -> Result<Expr, PolicyCompileError> {
    let (e, rest) = parse_at(s.trim())?;
    if !rest.trim().is_empty() {
        return Err(err(format!("trailing text: {rest}")));
    }
    Ok(e)
}

fn parse_at(s: &str) -> Result<(Expr, &str), PolicyCompileError> {
    if let Some(rest) = s.strip_prefix("OutOf(") {
        let comma = rest.find(',').ok_or_else(|| err("OutOf needs a threshold"))?;
        let n: usize = rest[..comma].trim().parse().map_err(|_| err("bad threshold"))?;
        let mut rest = &rest[comma + 1..];
        let mut items = Vec::new();
        loop {
            let (e, r) = parse_at(rest.trim_start())?;
            items.push(e);
            let r = r.trim_start();
            if let Some(r) = r.strip_prefix(',') {
                rest = r;
            } else if let Some(r) = r.strip_prefix(')') {
                return Ok((Expr::OutOf { n, items }, r));
            } else {
                return Err(err("expected , or )"));
            }
        }
    }
    for (lit, b) in [("true", true), ("false", false)] {
        if let Some(r) = s.strip_prefix(lit) {
            return Ok((Expr::Const(b), r));
        }
    }
    let end = s.find([',', ')']).unwrap_or(s.len());
    let (leaf, rest) = s.split_at(end);
    let (org, role) = leaf.trim().split_once('.').ok_or_else(|| err(format!("bad leaf {leaf}")))?;
    let org: u8 = org.parse().map_err(|_| err(format!("bad org in {leaf}")))?;
    let role = Role::from_name(role).ok_or_else(|| err(format!("bad role in {leaf}")))?;
    Ok((Expr::Leaf { org, role }, rest))
}

/// The compiled policies: id `i + 1` is `policies[i]` (id 0 means "no policy").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyTable {
    policies: Vec<Expr>,
}

impl PolicyTable {
    /// The table of the committed circuit (`hw/gen/policies.txt`).
    pub fn builtin() -> PolicyTable {
        // The manifest is produced by the same code and checked by a test, so a parse failure cannot happen in a
        // built crate; an empty table would only make every block host-path.
        PolicyTable::from_manifest(include_str!("../../../hw/gen/policies.txt")).unwrap_or_default()
    }

    /// Adds `e` unless present; returns its id.
    ///
    /// Errors: more than 255 policies.
    pub fn insert(&mut self, e: Expr) -> Result<u8, PolicyCompileError> {
        if let Some(id) = self.id_of(&e) {
            return Ok(id);
        }
        if self.policies.len() >= 255 {
            return Err(err("more than 255 policies"));
        }
        self.policies.push(e);
        Ok(self.policies.len() as u8)
    }

    /// The id of `e`, if compiled.
    pub fn id_of(&self, e: &Expr) -> Option<u8> {
        self.policies.iter().position(|p| p == e).map(|i| (i + 1) as u8)
    }

    /// The policy with id `id`.
    pub fn get(&self, id: u8) -> Option<&Expr> {
        self.policies.get(usize::from(id).checked_sub(1)?)
    }

    /// Number of policies.
    pub fn len(&self) -> usize {
        self.policies.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// Evaluates policy `id` on the per-org bits `sat[org]` (bit order of [`Role`]): the software model of the
    /// circuit. Unknown ids are not satisfied.
    pub fn evaluate(&self, id: u8, sat: &[u8]) -> bool {
        fn ev(e: &Expr, sat: &[u8]) -> bool {
            match e {
                Expr::Const(b) => *b,
                Expr::Leaf { org, role } => sat.get(usize::from(*org)).is_some_and(|b| b >> (*role as u8) & 1 == 1),
                Expr::OutOf { n, items } => items.iter().filter(|i| ev(i, sat)).count() >= *n,
            }
        }
        self.get(id).is_some_and(|e| ev(e, sat))
    }

    /// The manifest: one line `id<TAB>expr` per policy, after a comment header.
    pub fn to_manifest(&self) -> String {
        let mut s = String::from("# BMac endorsement-policy circuits: id<TAB>normalised policy (hw/DESIGN.md §5).\n");
        s.push_str("# Generated by `bmac-policy-gen` (crates/hw); do not edit.\n");
        for (i, p) in self.policies.iter().enumerate() {
            let _ = writeln!(s, "{}\t{p}", i + 1);
        }
        s
    }

    /// Parses [`PolicyTable::to_manifest`] output.
    ///
    /// Errors: a malformed line or ids out of sequence.
    pub fn from_manifest(text: &str) -> Result<PolicyTable, PolicyCompileError> {
        let mut t = PolicyTable::default();
        for line in text.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
            let (id, e) = line.split_once('\t').ok_or_else(|| err(format!("bad manifest line {line}")))?;
            let id: usize = id.trim().parse().map_err(|_| err(format!("bad id in {line}")))?;
            if id != t.policies.len() + 1 {
                return Err(err(format!("manifest ids out of sequence at {line}")));
            }
            t.policies.push(parse_expr(e)?);
        }
        Ok(t)
    }

    /// The SystemVerilog of `ends_policy_evaluator`: a combinational `case` over the policy id.
    pub fn to_systemverilog(&self) -> String {
        let mut s = String::new();
        s.push_str(
            "// Endorsement-policy evaluator: one combinational circuit per compiled policy, selected by\n\
             // policy_id (hw/DESIGN.md section 5). Generated by `bmac-policy-gen` (crates/hw/src/policy.rs)\n\
             // from the channel's policies; do not edit. Inputs: per org o, sat[5*o +: 5] =\n\
             // {member, admin, orderer, peer, client}, each the OR over verified endorsements of that org.\n\
             // Orgs at or above ORGS read as 0. Unknown ids are never satisfied.\n",
        );
        s.push_str("//\n");
        for (i, p) in self.policies.iter().enumerate() {
            let _ = writeln!(s, "//   id {:>3}: {p}", i + 1);
        }
        s.push_str(
            "module ends_policy_evaluator #(\n  parameter int ORGS = 8\n) (\n  input  logic [7:0]        policy_id,\n  input  logic [5*ORGS-1:0] sat,\n  output logic              satisfied\n);\n",
        );
        s.push_str(
            "  // Reads one input bit; positions beyond the port read as 0 so that a smaller ORGS still elaborates.\n\
             \x20 function automatic logic pbit(input logic [5*ORGS-1:0] v, input int unsigned idx);\n\
             \x20   pbit = 1'b0;\n\
             \x20   for (int unsigned k = 0; k < 5 * ORGS; k++) if (k == idx) pbit = v[k];\n\
             \x20 endfunction\n\n",
        );
        s.push_str("  always_comb begin\n    unique case (policy_id)\n");
        for (i, p) in self.policies.iter().enumerate() {
            let _ = writeln!(s, "      8'd{}: satisfied = {};", i + 1, sv_expr(p));
        }
        s.push_str("      default: satisfied = 1'b0;\n    endcase\n  end\nendmodule\n");
        s
    }
}

fn sv_expr(e: &Expr) -> String {
    match e {
        Expr::Const(true) => "1'b1".into(),
        Expr::Const(false) => "1'b0".into(),
        Expr::Leaf { org, role } => format!("pbit(sat, {})", 5 * u32::from(*org) + *role as u32),
        Expr::OutOf { n, items } if *n == 1 => {
            format!("({})", items.iter().map(sv_expr).collect::<Vec<_>>().join(" | "))
        }
        Expr::OutOf { n, items } if *n == items.len() => {
            format!("({})", items.iter().map(sv_expr).collect::<Vec<_>>().join(" & "))
        }
        Expr::OutOf { n, items } => {
            let terms: Vec<String> = items.iter().map(|i| format!("{{7'd0, {}}}", sv_expr(i))).collect();
            format!("(({}) >= 8'd{n})", terms.join(" + "))
        }
    }
}

/// The policies a channel's circuit is generated from, in id order: `/Channel/Application/Endorsement`,
/// `/Channel/Application/LifecycleEndorsement`, `/Channel/Orderer/BlockValidation`, then each application org's
/// `Endorsement` (orgs sorted by name). Policies that cannot be compiled are skipped.
pub fn channel_policy_table(root: &ConfigGroup, mspids: &[String]) -> PolicyTable {
    let mut paths = vec![
        "/Channel/Application/Endorsement".to_string(),
        "/Channel/Application/LifecycleEndorsement".to_string(),
        "/Channel/Orderer/BlockValidation".to_string(),
    ];
    if let Some(app) = root.groups.get("Application") {
        let mut orgs: Vec<&String> = app.groups.keys().collect();
        orgs.sort();
        paths.extend(orgs.iter().map(|o| format!("/Channel/Application/{o}/Endorsement")));
    }
    let mut t = PolicyTable::default();
    for p in paths {
        if let Ok(e) = resolve_channel_policy(root, &p, mspids) {
            let _ = t.insert(e);
        }
    }
    t
}

/// The policy table of a channel, from its genesis (config) block: [`channel_policy_table`] over the block's
/// configuration.
///
/// Errors: the block is not a config block with a channel configuration.
pub fn table_from_genesis(genesis: &[u8]) -> Result<PolicyTable, PolicyCompileError> {
    let block = ferrofabric_protos::common::Block::decode(genesis).map_err(|e| err(format!("genesis block: {e}")))?;
    let config = ferrofabric_channelconfig::ChannelConfig::from_config_block(&block)
        .map_err(|e| err(format!("genesis configuration: {e}")))?;
    let root = config.config().channel_group.clone().unwrap_or_default();
    let mspids: Vec<String> = config.msp_manager().mspids().map(str::to_owned).collect();
    Ok(channel_policy_table(&root, &mspids))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips_and_normalises() {
        let e = parse_expr("OutOf(2,1.peer,OutOf(1,2.peer,2.admin),0.member)").unwrap();
        assert_eq!(parse_expr(&e.to_string()).unwrap(), e);
        assert_eq!(out_of(1, vec![Expr::Leaf { org: 1, role: Role::Peer }]).to_string(), "1.peer");
        assert_eq!(out_of(3, vec![Expr::Const(true), Expr::Const(false)]), Expr::Const(false));
        assert_eq!(out_of(1, vec![Expr::Const(true), Expr::Const(false)]), Expr::Const(true));
        assert!(parse_expr("OutOf(2,1.peer").is_err());
        assert!(parse_expr("1.king").is_err());
    }

    #[test]
    fn software_model_of_the_circuit() {
        let mut t = PolicyTable::default();
        let id = t.insert(parse_expr("OutOf(2,1.peer,2.peer,3.member)").unwrap()).unwrap();
        assert_eq!(t.insert(parse_expr("OutOf(2,1.peer,2.peer,3.member)").unwrap()).unwrap(), id);
        let peer = 1 << Role::Peer as u8;
        let member = 1 << Role::Member as u8;
        assert!(t.evaluate(id, &[0, peer, 0, member]));
        assert!(!t.evaluate(id, &[0, peer, member, 0]));
        assert!(!t.evaluate(0, &[0xff; 4]));
        assert_eq!(PolicyTable::from_manifest(&t.to_manifest()).unwrap(), t);
    }
}
