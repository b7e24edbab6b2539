//! Property test: lazy evaluation gives the same verdict as Fabric's eager algorithm and never verifies
//! more signatures. Items are real fixture signatures and identities (valid, tampered, duplicated,
//! unknown MSP, undecodable, certificates that do not validate); policies are random NOutOf trees over
//! ROLE and IDENTITY principals of the three fixture MSPs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::HashSet;
use std::sync::{Arc, OnceLock};

use crate::support::{corrupted, envelope_policy, n_out_of, role, signed, signed_by};
use bytes::Bytes;
use ferrofabric_channelconfig::{compile_signature_policy, ChannelConfig, SignatureSet, SignedData};
use ferrofabric_msp::{Identity, MspManager, SigningIdentity};
use ferrofabric_protos::common::msp_principal::Classification;
use ferrofabric_protos::common::msp_role::MspRoleType;
use ferrofabric_protos::common::{signature_policy, MspPrincipal, SignaturePolicy, SignaturePolicyEnvelope};
use ferrofabric_protos::msp::SerializedIdentity;
use ferrofabric_testkit::{fabric_fixture, fabric_fixtures_dir};
use proptest::prelude::*;
use prost::Message;

/// The first `N_GENUINE` pool entries carry signatures that verify.
const N_GENUINE: usize = 10;

struct World {
    cc: ChannelConfig,
    pool: Vec<SignedData>,
    principals: Vec<MspPrincipal>,
}

fn identity_from_cert(mspid: &str, cert_path: &str) -> Bytes {
    let pem = std::fs::read(fabric_fixture("crypto").join(cert_path)).unwrap();
    SerializedIdentity { mspid: mspid.into(), id_bytes: pem.into() }.encode_to_vec().into()
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let cc = support::channel_config();
        let blocks = support::orderer_blocks();
        let (b, t) = support::find_tx("VALID", &["Org2MSP", "Org1MSP"]);
        let endorsements = support::endorsements(&blocks[b], t);
        let org1 = support::org1_user();
        let tls_dir = fabric_fixtures_dir()
            .join("crypto/peerOrganizations/org1.example.com/users/User1@org1.example.com/tls");
        let tls = SigningIdentity::from_pem(
            "Org1MSP",
            &std::fs::read(tls_dir.join("client.crt")).unwrap(),
            &std::fs::read(tls_dir.join("client.key")).unwrap(),
        )
        .unwrap();

        let mut valid = vec![
            signed(&org1, b"m1"),
            signed(&org1, b"m2"),
            signed(&support::org2_user(), b"m3"),
            signed(&support::orderer_signer(), b"m4"),
            support::block_signatures(&blocks[5]).remove(0),
            endorsements[0].clone(),
            endorsements[1].clone(),
            support::creator_signature(&blocks[1], 0),
            support::creator_signature(&blocks[2], 0),
            signed(&tls, b"m5"),
        ];
        let tampered: Vec<SignedData> = valid.iter().map(corrupted).collect();
        let any_sig = valid[0].signature.clone();
        let no_key = |mspid: &str, cert: &str| SignedData {
            data: Bytes::from_static(b"m6"),
            identity: identity_from_cert(mspid, cert),
            signature: any_sig.clone(),
        };
        valid.extend(tampered);
        valid.push(no_key(
            "Org1MSP",
            "peerOrganizations/org1.example.com/users/Admin@org1.example.com/msp/signcerts/Admin@org1.example.com-cert.pem",
        ));
        valid.push(no_key(
            "Org1MSP",
            "peerOrganizations/org1.example.com/peers/peer1.org1.example.com/msp/signcerts/peer1.org1.example.com-cert.pem",
        ));
        valid.push(no_key(
            "Org3MSP",
            "peerOrganizations/org1.example.com/users/User1@org1.example.com/msp/signcerts/User1@org1.example.com-cert.pem",
        ));
        valid.push(SignedData {
            data: Bytes::from_static(b"m7"),
            identity: Bytes::from_static(b"\x0a\xff"),
            signature: any_sig.clone(),
        });

        let mut principals = Vec::new();
        for mspid in ["Org1MSP", "Org2MSP", "OrdererMSP"] {
            for r in [
                MspRoleType::Member,
                MspRoleType::Admin,
                MspRoleType::Client,
                MspRoleType::Peer,
                MspRoleType::Orderer,
            ] {
                principals.push(role(mspid, r));
            }
        }
        principals.push(MspPrincipal {
            principal_classification: Classification::Identity as i32,
            principal: endorsements[0].identity.clone(),
        });
        World {
            cc,
            pool: valid,
            principals,
        }
    })
}

/// Fabric's algorithm written out directly against the MSP manager: valid, de-duplicated identities
/// first, then the rule tree over positions in that list.
fn reference(msps: &MspManager, env: &SignaturePolicyEnvelope, items: &[SignedData]) -> bool {
    let mut seen = HashSet::new();
    let mut ids: Vec<Arc<Identity>> = Vec::new();
    for sd in items {
        let Ok(id) = msps.deserialize_identity(&sd.identity) else {
            continue;
        };
        if seen.contains(id.identifier()) {
            continue;
        }
        if id.verify(&sd.data, &sd.signature).is_err() {
            continue;
        }
        seen.insert(id.identifier().clone());
        ids.push(id);
    }
    fn run(
        msps: &MspManager,
        rule: &SignaturePolicy,
        ps: &[MspPrincipal],
        ids: &[Arc<Identity>],
        used: &mut Vec<bool>,
    ) -> bool {
        match rule.r#type.as_ref().unwrap() {
            signature_policy::Type::SignedBy(i) => {
                let p = &ps[*i as usize];
                for (k, id) in ids.iter().enumerate() {
                    if !used[k] && msps.satisfies_principal(id, p).is_ok() {
                        used[k] = true;
                        return true;
                    }
                }
                false
            }
            signature_policy::Type::NOutOf(g) => {
                let mut count = 0;
                for sub in &g.rules {
                    let mut copy = used.clone();
                    if run(msps, sub, ps, ids, &mut copy) {
                        count += 1;
                        *used = copy;
                    }
                }
                count >= g.n
            }
        }
    }
    let mut used = vec![false; ids.len()];
    run(msps, env.rule.as_ref().unwrap(), &env.identities, &ids, &mut used)
}

fn rule_strategy(n_principals: usize) -> impl Strategy<Value = SignaturePolicy> {
    let leaf = (0..n_principals as i32).prop_map(signed_by);
    leaf.prop_recursive(3, 24, 4, |inner| {
        (-1i32..=3, prop::collection::vec(inner, 0..=4)).prop_map(|(n, rules)| n_out_of(n, rules))
    })
}

fn envelope_strategy() -> impl Strategy<Value = SignaturePolicyEnvelope> {
    let all = world().principals.len();
    // Mostly principals that some pool identity satisfies (members, clients, peers, the orderer, the
    // IDENTITY principal), so that rules compete for the same identities.
    let useful = prop::sample::select(vec![0usize, 1, 2, 3, 5, 6, 7, 8, 10, 14, 15]);
    let principal = prop_oneof![3 => useful, 1 => 0..all];
    prop::collection::vec(principal, 1..=4).prop_flat_map(|picks| {
        let principals: Vec<MspPrincipal> = picks.iter().map(|i| world().principals[*i].clone()).collect();
        rule_strategy(principals.len()).prop_map(move |rule| envelope_policy(rule, principals.clone()))
    })
}

fn items_strategy() -> impl Strategy<Value = Vec<SignedData>> {
    let n = world().pool.len();
    // Mostly genuine signatures (indices 0..10), so that policies are often satisfiable.
    let pick = prop_oneof![3 => 0..N_GENUINE, 2 => 0..n];
    prop::collection::vec(pick, 0..=7).prop_map(|idx| idx.iter().map(|i| world().pool[*i].clone()).collect())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn lazy_equals_eager_and_never_verifies_more(
        envs in prop::collection::vec(envelope_strategy(), 1..=3),
        items in items_strategy(),
    ) {
        let w = world();
        let msps = w.cc.msp_manager();
        let lazy = SignatureSet::new(items.clone(), msps);
        let eager = SignatureSet::new_verify_all(items.clone(), msps);
        // Several policies on one set: caches are shared, the bound must still hold.
        for env in &envs {
            let policy = compile_signature_policy(env).unwrap();
            let l = policy.evaluate(&lazy);
            let e = policy.evaluate(&eager);
            prop_assert_eq!(&l, &e);
            prop_assert_eq!(l.is_ok(), reference(msps, env, &items), "reference disagrees");
            prop_assert!(lazy.verifications() <= eager.verifications(),
                "lazy {} > eager {}", lazy.verifications(), eager.verifications());
        }
    }

    #[test]
    fn channel_policies_lazy_equals_eager(items in items_strategy()) {
        let w = world();
        let msps = w.cc.msp_manager();
        let lazy = SignatureSet::new(items.clone(), msps);
        let eager = SignatureSet::new_verify_all(items, msps);
        for path in w.cc.policy_paths() {
            let policy = w.cc.policy(&path).unwrap();
            prop_assert_eq!(policy.evaluate(&lazy), policy.evaluate(&eager), "{}", path);
        }
        prop_assert!(lazy.verifications() <= eager.verifications());
    }
}

#[test]
fn pool_covers_the_interesting_cases() {
    // Guard against a pool that silently degenerates (e.g. everything failing to deserialise).
    let w = world();
    let msps = w.cc.msp_manager();
    let accepted = |sd: &SignedData| {
        let set = SignatureSet::new(vec![sd.clone()], msps);
        set.is_accepted(0)
    };
    let n_valid = w.pool.iter().filter(|sd| accepted(sd)).count();
    assert_eq!(n_valid, N_GENUINE, "the genuine signatures verify");
    let deserialising =
        (0..w.pool.len()).filter(|i| SignatureSet::new(vec![w.pool[*i].clone()], msps).identity(0).is_some()).count();
    assert_eq!(deserialising, w.pool.len() - 2, "only the Org3MSP and garbage identities fail");
    // Some identities satisfy several principals (member + client), the TLS certificate none.
    let org1_user = msps.deserialize_identity(&w.pool[0].identity).unwrap();
    let sat = w.principals.iter().filter(|p| msps.satisfies_principal(&org1_user, p).is_ok()).count();
    assert_eq!(sat, 2);
    let tls = msps.deserialize_identity(&w.pool[9].identity).unwrap();
    assert!(w.principals.iter().all(|p| msps.satisfies_principal(&tls, p).is_err()));
}
