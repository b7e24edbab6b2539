//! The card's policy programs against Fabric's policy evaluation: random endorsement policies, normalised and
//! compiled to the program the host loads with `POLICY_SYNC` ([`PolicyProgram`]), give the verdict of the software
//! cauthdsl evaluator (`ferrofabric_channelconfig`) on random sets of endorsers. The RTL runs the same programs
//! (`hw/tests/tb_small.py` checks it against the program semantics; the co-simulation tests run them on ledgers).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_bmac::{normalize_signature_policy, Encoder, PolicyExpr, PolicyProgram, PolicyRole};
use ferrofabric_channelconfig::{compile_signature_policy, ChannelConfig, SignatureSet};
use ferrofabric_protos::common::{
    msp_principal, msp_role, signature_policy, Block, MspPrincipal, MspRole, SignaturePolicy, SignaturePolicyEnvelope,
};
use prost::Message;

use crate::support::ledgers::network;

/// A small deterministic generator (xorshift64*), so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const ROLES: [msp_role::MspRoleType; 5] = [
    msp_role::MspRoleType::Member,
    msp_role::MspRoleType::Admin,
    msp_role::MspRoleType::Client,
    msp_role::MspRoleType::Peer,
    msp_role::MspRoleType::Orderer,
];

/// A random rule over principals of distinct orgs (the card's per-org bits need them distinct; the normaliser
/// refuses anything else), `depth` levels at most.
fn random_rule(
    rng: &mut Rng,
    orgs: &mut Vec<usize>,
    principals: &mut Vec<(usize, i32)>,
    depth: usize,
) -> SignaturePolicy {
    if orgs.is_empty() {
        // No org left for a principal: an empty threshold, always (n = 0) or never (n = 1) satisfied.
        let n = rng.below(2) as i32;
        return SignaturePolicy {
            r#type: Some(signature_policy::Type::NOutOf(signature_policy::NOutOf { n, rules: vec![] })),
        };
    }
    if depth == 0 || rng.below(3) == 0 {
        let org = orgs.remove(rng.below(orgs.len()));
        principals.push((org, ROLES[rng.below(ROLES.len())] as i32));
        return SignaturePolicy { r#type: Some(signature_policy::Type::SignedBy((principals.len() - 1) as i32)) };
    }
    let k = 1 + rng.below(3);
    let rules: Vec<_> = (0..k).map(|_| random_rule(rng, orgs, principals, depth.saturating_sub(1))).collect();
    let n = rng.below(rules.len() + 2) as i32;
    SignaturePolicy { r#type: Some(signature_policy::Type::NOutOf(signature_policy::NOutOf { n, rules })) }
}

#[test]
fn runtime_policy_programs_agree_with_the_software_policy_evaluator_on_random_policies() {
    let net = network();
    let config = Arc::new(ChannelConfig::from_config_block(&Block::decode(net.genesis_block()).unwrap()).unwrap());
    let msps = config.msp_manager();
    let mspids: Vec<String> = msps.mspids().map(str::to_owned).collect();
    let orgs = [net.mspid(0), net.mspid(1), net.mspid(2)];
    // Every identity of the network, with its org's bits as the card's cache records them.
    let mut identities: Vec<Bytes> = Vec::new();
    for org in 0..2 {
        identities.push(net.peer(org).serialized().clone());
        identities.push(net.client(org).serialized().clone());
        identities.push(net.admin(org).serialized().clone());
    }
    identities.push(net.orderer().serialized().clone());
    identities.push(net.admin(2).serialized().clone());
    let mut encoder = Encoder::new(config.clone());
    let cached: Vec<_> = identities.iter().map(|b| encoder.identity(b).expect("a valid identity is cached")).collect();

    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let (mut checked, mut satisfied) = (0, 0);
    for case in 0..400 {
        let mut free: Vec<usize> = (0..orgs.len()).collect();
        let mut principals = Vec::new();
        let rule = random_rule(&mut rng, &mut free, &mut principals, 3);
        let env = SignaturePolicyEnvelope {
            version: 0,
            rule: Some(rule),
            identities: principals
                .iter()
                .map(|(org, role)| MspPrincipal {
                    principal_classification: msp_principal::Classification::Role as i32,
                    principal: Bytes::from(
                        MspRole { msp_identifier: orgs[*org].to_string(), role: *role }.encode_to_vec(),
                    ),
                })
                .collect(),
        };
        let expr = normalize_signature_policy(&env, &mspids).expect("distinct orgs normalise");
        let program = PolicyProgram::compile(&expr).expect("three orgs fit the card's limits");
        let fabric = compile_signature_policy(&env).unwrap();
        for _ in 0..8 {
            let chosen: Vec<usize> = (0..identities.len()).filter(|_| rng.below(3) == 0).collect();
            let mut sat = [0u8; 8];
            for &i in &chosen {
                sat[usize::from(cached[i].org)] |= 1 << PolicyRole::Member as u8 | cached[i].roles;
            }
            let set = SignatureSet::presumed_signed(chosen.iter().map(|&i| identities[i].clone()).collect(), msps);
            let want = fabric.evaluate(&set).is_ok();
            assert_eq!(program.evaluate(&sat), want, "case {case}: {expr} on {chosen:?}");
            checked += 1;
            satisfied += usize::from(want);
        }
    }
    assert!(satisfied > checked / 10 && satisfied < checked * 9 / 10, "{satisfied} of {checked} satisfied");
}

/// Evaluates a normalised policy directly (the tree, not the program).
fn tree(e: &PolicyExpr, sat: &[u8]) -> bool {
    match e {
        PolicyExpr::Const(b) => *b,
        PolicyExpr::Leaf { org, role } => sat[usize::from(*org)] >> (*role as u8) & 1 == 1,
        PolicyExpr::OutOf { n, items } => items.iter().filter(|i| tree(i, sat)).count() >= *n,
    }
}

fn random_tree(rng: &mut Rng, leaves: &mut usize, depth: usize) -> PolicyExpr {
    const ROLE: [PolicyRole; 5] =
        [PolicyRole::Member, PolicyRole::Admin, PolicyRole::Orderer, PolicyRole::Peer, PolicyRole::Client];
    if depth == 0 || rng.below(3) == 0 {
        *leaves += 1;
        return PolicyExpr::Leaf { org: rng.below(8) as u8, role: ROLE[rng.below(5)] };
    }
    let items: Vec<_> = (0..1 + rng.below(4)).map(|_| random_tree(rng, leaves, depth - 1)).collect();
    PolicyExpr::OutOf { n: rng.below(items.len() + 2), items }
}

#[test]
fn compiled_programs_evaluate_like_their_policy_trees_up_to_the_card_limits() {
    let mut rng = Rng(0x0dd_ba11_cafe_f00d);
    let (mut compiled, mut refused) = (0, 0);
    for case in 0..3000 {
        let mut leaves = 0;
        let e = random_tree(&mut rng, &mut leaves, 3);
        match PolicyProgram::compile(&e) {
            Ok(p) => {
                compiled += 1;
                for _ in 0..16 {
                    let sat: Vec<u8> = (0..8).map(|_| (rng.next() & 0x1f) as u8).collect();
                    assert_eq!(p.evaluate(&sat), tree(&e, &sat), "case {case}: {e}");
                }
            }
            // Refused only for a limit: too many leaves or gates, or a repeated child.
            Err(err) => {
                refused += 1;
                let msg = err.to_string();
                assert!(
                    msg.contains("gates") || msg.contains("principals") || msg.contains("repeated"),
                    "case {case}: {e}: {msg}"
                );
            }
        }
    }
    assert!(compiled > 1000 && refused > 50, "{compiled} compiled, {refused} refused");
}

#[test]
fn the_host_limits_of_the_policy_table_are_the_rtl_parameters() {
    use ferrofabric_bmac::wire::{POLICY_BYTES, POLICY_GATES, POLICY_IDS, POLICY_LEAVES};
    let pkg = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../hw/rtl/bmac_pkg.sv")).unwrap();
    let param = |name: &str| -> usize {
        let line = pkg.lines().find(|l| l.trim_start().starts_with(&format!("localparam int {name} "))).unwrap();
        let value = line.split('=').nth(1).unwrap().split(';').next().unwrap().trim();
        value.parse().unwrap_or_else(|_| panic!("{name} = {value}"))
    };
    assert_eq!(param("POL_IDS"), POLICY_IDS);
    assert_eq!(param("POL_LEAVES"), POLICY_LEAVES);
    assert_eq!(param("POL_GATES"), POLICY_GATES);
    assert_eq!(2 * POLICY_LEAVES + 3 * POLICY_GATES, POLICY_BYTES);
}
