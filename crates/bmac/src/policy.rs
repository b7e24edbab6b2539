//! Endorsement policies as programs of the card's policy table, loaded at run time (hw/DESIGN.md §5).
//!
//! A Fabric policy (a cauthdsl signature policy, `common/cauthdsl/cauthdsl.go`, or an ImplicitMeta policy over
//! the config tree, `common/policies/implicitmeta.go`) is reduced to a threshold tree over leaves (org, role).
//! The orgs are numbered by the rank of their MSP ID among the channel's MSP IDs. The card's inputs are, per
//! org, five bits: member, admin, orderer, peer, client. Each bit is the OR over the endorsements of that org
//! whose signatures verified.
//!
//! This matches Fabric only if no identity can satisfy two leaves of one signature policy: Fabric lets each
//! signature satisfy only one principal. [`normalize_signature_policy`] therefore refuses a signature policy
//! with two leaves of the same org. ImplicitMeta sub-policies are evaluated independently in Fabric, so they may
//! share orgs.

use std::collections::BTreeSet;
use std::fmt;

use bytes::Bytes;

use ferrofabric_protos::common::{
    implicit_meta_policy, msp_principal::Classification, msp_role::MspRoleType, policy::PolicyType, signature_policy,
    ConfigGroup, ImplicitMetaPolicy, MspRole, SignaturePolicy, SignaturePolicyEnvelope,
};
use ferrofabric_protos::peer::{application_policy, ApplicationPolicy};
use prost::Message;

use crate::wire::{
    L7Header, Section, SectionType, ORGS, POLICY_BYTES, POLICY_FLUSH, POLICY_GATES, POLICY_IDS, POLICY_LEAVES,
};

/// An MSP role as the card sees it; the discriminant is the bit index within an org's 5-bit group.
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

/// Why a policy cannot be loaded into the card (its chaincode's blocks go host-path).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
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

/// Normalises a cauthdsl signature policy (a chaincode's endorsement policy, Fabric's `SignaturePolicyEnvelope`).
/// `mspids` are the channel's MSP IDs, which number the orgs.
///
/// Errors: a non-ROLE principal, an unknown MSP, an out-of-range `SignedBy` index, two leaves of the same org
/// (Fabric's one-signature-per-principal rule could then differ from the card), or a tree deeper than 16.
pub fn normalize_signature_policy(
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

/// A policy program as the card's policy table holds it (hw/DESIGN.md §5): `POLICY_LEAVES` leaves (org, role bit)
/// and `POLICY_GATES` threshold gates, the root being the last gate. This is the `POLICY_SYNC` payload.
///
/// Layout, `POLICY_BYTES` bytes: leaf k at bytes `2k` (org) and `2k + 1` (role bit, [`Role`]'s discriminant); gate g
/// at bytes `2 * POLICY_LEAVES + 3g`: threshold, leaf mask (bit k = leaf k), gate mask (bit j = gate j, only j < g
/// counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PolicyProgram(pub [u8; POLICY_BYTES]);

impl PolicyProgram {
    /// Compiles a normalised policy. Leaves of the same (org, role) share a slot, and a constant or a single leaf
    /// becomes one gate.
    ///
    /// Errors: more than `POLICY_LEAVES` distinct leaves or `POLICY_GATES` gates, an org at or beyond the card's
    /// `ORGS`, or a threshold above 255.
    pub fn compile(e: &Expr) -> Result<PolicyProgram, PolicyCompileError> {
        #[derive(Clone, Copy)]
        enum Node {
            Leaf(usize),
            Gate(usize),
        }
        struct Build {
            leaves: Vec<(u8, Role)>,
            gates: Vec<[u8; 3]>,
        }
        impl Build {
            fn gate(&mut self, n: usize, children: &[Node]) -> Result<Node, PolicyCompileError> {
                let n = u8::try_from(n).map_err(|_| err(format!("threshold {n} above 255")))?;
                let (mut lm, mut gm) = (0u8, 0u8);
                for c in children {
                    match *c {
                        Node::Leaf(k) => lm |= 1 << k,
                        Node::Gate(j) => gm |= 1 << j,
                    }
                }
                if self.gates.len() >= POLICY_GATES {
                    return Err(err(format!("more than {POLICY_GATES} gates")));
                }
                self.gates.push([n, lm, gm]);
                Ok(Node::Gate(self.gates.len() - 1))
            }
            fn node(&mut self, e: &Expr) -> Result<Node, PolicyCompileError> {
                match e {
                    Expr::Const(true) => self.gate(0, &[]),
                    Expr::Const(false) => self.gate(1, &[]),
                    Expr::Leaf { org, role } => {
                        if usize::from(*org) >= ORGS {
                            return Err(err(format!("org {org} beyond the card's {ORGS} orgs")));
                        }
                        if let Some(k) = self.leaves.iter().position(|l| *l == (*org, *role)) {
                            return Ok(Node::Leaf(k));
                        }
                        if self.leaves.len() >= POLICY_LEAVES {
                            return Err(err(format!("more than {POLICY_LEAVES} distinct principals")));
                        }
                        self.leaves.push((*org, *role));
                        Ok(Node::Leaf(self.leaves.len() - 1))
                    }
                    Expr::OutOf { n, items } => {
                        let children = items.iter().map(|i| self.node(i)).collect::<Result<Vec<_>, _>>()?;
                        // A child may repeat (the same leaf twice): each occurrence counts in Fabric's threshold
                        // only if distinct signatures satisfy it, which per-org bits cannot tell.
                        let mut seen = BTreeSet::new();
                        for c in &children {
                            let key = match c {
                                Node::Leaf(k) => (0, *k),
                                Node::Gate(j) => (1, *j),
                            };
                            if !seen.insert(key) {
                                return Err(err("a principal repeated under one threshold"));
                            }
                        }
                        self.gate(*n, &children)
                    }
                }
            }
        }
        let mut b = Build { leaves: Vec::new(), gates: Vec::new() };
        if let Node::Leaf(k) = b.node(e)? {
            b.gate(1, &[Node::Leaf(k)])?;
        }
        // The root was built last; it moves to the last slot, and the slots between stay unused gates (threshold 0,
        // no inputs), which nothing reads.
        let mut bytes = [0u8; POLICY_BYTES];
        for (k, (org, role)) in b.leaves.iter().enumerate() {
            bytes[2 * k] = *org;
            bytes[2 * k + 1] = *role as u8;
        }
        let root = b.gates.len() - 1;
        for (g, gate) in b.gates.iter().enumerate() {
            let slot = if g == root { POLICY_GATES - 1 } else { g };
            bytes[2 * POLICY_LEAVES + 3 * slot..][..3].copy_from_slice(gate);
        }
        Ok(PolicyProgram(bytes))
    }

    /// Runs the program on the per-org bits `sat[org]` (bit order of [`Role`]), exactly as the RTL's
    /// `ends_policy_evaluator` does: leaves of orgs beyond `sat` or `ORGS`, or with a role bit above 4, read as 0.
    pub fn evaluate(&self, sat: &[u8]) -> bool {
        let b = &self.0;
        let mut leaf = 0u8;
        for k in 0..POLICY_LEAVES {
            let (org, bit) = (usize::from(b[2 * k]), b[2 * k + 1]);
            let on = org < ORGS && bit < 5 && sat.get(org).is_some_and(|s| s >> bit & 1 == 1);
            leaf |= u8::from(on) << k;
        }
        let mut gate = 0u8;
        for g in 0..POLICY_GATES {
            let [n, lm, gm] =
                [b[2 * POLICY_LEAVES + 3 * g], b[2 * POLICY_LEAVES + 3 * g + 1], b[2 * POLICY_LEAVES + 3 * g + 2]];
            let below = if g == 0 { 0 } else { gm & (u8::MAX >> (8 - g)) };
            let count = (lm & leaf).count_ones() + (below & gate).count_ones();
            gate |= u8::from(count >= u32::from(n)) << g;
        }
        gate >> (POLICY_GATES - 1) & 1 == 1
    }
}

/// The host's copy of the card's policy table: policy id `i + 1` is `policies[i]` (id 0 means "no policy"). Policies
/// are loaded on first use, when a block needs them; each load queues a `POLICY_SYNC` section that goes out before
/// the first block that uses the id. An id is never rewritten while a block may use it: when the table is full, the
/// host clears it ([`PolicyTable::clear`]) only while no block is in flight, and the next `POLICY_SYNC` then carries
/// the flush flag.
#[derive(Clone, Debug, Default)]
pub struct PolicyTable {
    policies: Vec<(Expr, PolicyProgram)>,
    pending: Vec<u8>,
    flush_next: bool,
}

impl PolicyTable {
    /// An empty table (the card's table after reset).
    pub fn new() -> PolicyTable {
        PolicyTable::default()
    }

    /// The id of `e`, loading it if needed.
    ///
    /// Errors: `e` does not compile to a program ([`PolicyProgram::compile`]), or the table's `POLICY_IDS - 1` ids
    /// are taken.
    pub fn load(&mut self, e: &Expr) -> Result<u8, PolicyCompileError> {
        if let Some(id) = self.id_of(e) {
            return Ok(id);
        }
        let program = PolicyProgram::compile(e)?;
        if self.is_full() {
            return Err(err(format!("the card's policy table is full ({} policies)", POLICY_IDS - 1)));
        }
        self.policies.push((e.clone(), program));
        let id = self.policies.len() as u8;
        self.pending.push(id);
        Ok(id)
    }

    /// The id of `e`, if loaded.
    pub fn id_of(&self, e: &Expr) -> Option<u8> {
        self.policies.iter().position(|(p, _)| p == e).map(|i| (i + 1) as u8)
    }

    /// The policy with id `id`.
    pub fn get(&self, id: u8) -> Option<&Expr> {
        self.policies.get(usize::from(id).checked_sub(1)?).map(|(e, _)| e)
    }

    /// Whether every id is taken: the next new policy cannot be loaded without [`PolicyTable::clear`].
    pub fn is_full(&self) -> bool {
        self.policies.len() + 1 >= POLICY_IDS
    }

    /// Forgets every policy. The next `POLICY_SYNC` carries the flush flag, so that the card clears its table too.
    /// Only for a card with no block in flight: the ids of its blocks would otherwise change meaning.
    pub fn clear(&mut self) {
        self.policies.clear();
        self.pending.clear();
        self.flush_next = true;
    }

    /// Number of loaded policies.
    pub fn len(&self) -> usize {
        self.policies.len()
    }

    /// Whether no policy is loaded.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// The `POLICY_SYNC` sections of the policies loaded since the last call, in id order, drained; the first one
    /// after a [`PolicyTable::clear`] carries the flush flag.
    pub fn take_pending_syncs(&mut self) -> Vec<Section> {
        let pending = std::mem::take(&mut self.pending);
        pending
            .into_iter()
            .filter_map(|id| {
                let (_, program) = self.policies.get(usize::from(id) - 1)?;
                let flush = if std::mem::take(&mut self.flush_next) { POLICY_FLUSH } else { 0 };
                Some(Section {
                    header: L7Header {
                        section_type: SectionType::PolicySync,
                        index: u16::from(id),
                        block: 0,
                        flags: 0,
                        n_ann: 0,
                        payload_size: POLICY_BYTES as u16,
                    },
                    info: [flush, 0, 0, 0, 0, 0, 0, 0],
                    annotations: Vec::new(),
                    payload: Bytes::copy_from_slice(&program.0),
                })
            })
            .collect()
    }
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
    fn a_program_evaluates_its_policy_and_loads_once() {
        let e = parse_expr("OutOf(2,1.peer,2.peer,3.member)").unwrap();
        let mut t = PolicyTable::new();
        let id = t.load(&e).unwrap();
        assert_eq!(t.load(&e).unwrap(), id);
        assert_eq!(t.take_pending_syncs().len(), 1);
        assert!(t.take_pending_syncs().is_empty(), "a loaded policy is sent once");
        let p = PolicyProgram::compile(&e).unwrap();
        let peer = 1 << Role::Peer as u8;
        let member = 1 << Role::Member as u8;
        assert!(p.evaluate(&[0, peer, 0, member]));
        assert!(!p.evaluate(&[0, peer, member, 0]));
        assert!(PolicyProgram::compile(&Expr::Const(true)).unwrap().evaluate(&[]));
        assert!(!PolicyProgram::compile(&Expr::Const(false)).unwrap().evaluate(&[0xff; 8]));
        assert!(PolicyProgram::compile(&parse_expr("8.peer").unwrap()).is_err(), "org beyond ORGS");
        let wide = parse_expr("OutOf(1,0.peer,1.peer,2.peer,3.peer,4.peer,5.peer,6.peer,7.peer,0.admin)").unwrap();
        assert!(PolicyProgram::compile(&wide).is_err(), "nine leaves");
    }

    #[test]
    fn the_table_holds_thirty_one_policies() {
        let mut t = PolicyTable::new();
        for n in 1..=31u8 {
            assert_eq!(t.load(&Expr::OutOf { n: usize::from(n), items: vec![] }).unwrap(), n);
        }
        assert!(t.load(&Expr::Const(true)).is_err());
    }
}
