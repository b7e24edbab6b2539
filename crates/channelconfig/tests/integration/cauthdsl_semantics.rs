//! Fabric's cauthdsl corner cases (NOutOf used-flag copies, de-duplication, skipped items), checked with
//! real fixture identities and signatures, in both lazy and eager mode.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use crate::support::{corrupted, envelope_policy, n_out_of, role, signed, signed_by};
use bytes::Bytes;
use ferrofabric_channelconfig::{compile_signature_policy, PolicyError, SignatureSet, SignedData};
use ferrofabric_msp::MspManager;
use ferrofabric_protos::common::msp_role::MspRoleType;
use ferrofabric_protos::common::{MspPrincipal, SignaturePolicy};
use ferrofabric_protos::msp::SerializedIdentity;
use prost::Message;

/// Principals: 0 = Org1MSP.member, 1 = Org2MSP.member, 2 = OrdererMSP.member.
fn principals() -> Vec<MspPrincipal> {
    vec![
        role("Org1MSP", MspRoleType::Member),
        role("Org2MSP", MspRoleType::Member),
        role("OrdererMSP", MspRoleType::Member),
    ]
}

/// Evaluate lazily and eagerly; both must agree. Returns (verdict, lazy verifies, eager verifies).
fn eval(msps: &MspManager, rule: SignaturePolicy, items: &[SignedData]) -> (bool, usize, usize) {
    let policy = compile_signature_policy(&envelope_policy(rule, principals())).unwrap();
    let lazy = SignatureSet::new(items.to_vec(), msps);
    let eager = SignatureSet::new_verify_all(items.to_vec(), msps);
    let l = policy.evaluate(&lazy);
    let e = policy.evaluate(&eager);
    assert_eq!(l.is_ok(), e.is_ok(), "lazy {l:?} vs eager {e:?}");
    if let Err(err) = &l {
        assert_eq!(*err, PolicyError::SignatureSetNotSatisfied);
    }
    (l.is_ok(), lazy.verifications(), eager.verifications())
}

struct Fixture {
    cc: ferrofabric_channelconfig::ChannelConfig,
    a: SignedData,
    b: SignedData,
    o: SignedData,
}

fn fixture() -> Fixture {
    Fixture {
        cc: support::channel_config(),
        a: signed(&support::org1_user(), b"message a"),
        b: signed(&support::org2_user(), b"message b"),
        o: signed(&support::orderer_signer(), b"message o"),
    }
}

#[test]
fn nested_n_out_of_consumes_identities_of_every_satisfied_rule() {
    // OutOf(2, OutOf(1, A, B), B): the inner gate runs both A and B (no early exit) and commits both
    // identities, leaving nothing for the outer B. Fabric says no.
    let f = fixture();
    let msps = f.cc.msp_manager();
    let rule = n_out_of(2, vec![n_out_of(1, vec![signed_by(0), signed_by(1)]), signed_by(1)]);
    assert!(!eval(msps, rule, &[f.a.clone(), f.b.clone()]).0);
    // Reordering the outer rules does not help: B first takes b, then the inner gate still gets a.
    let rule = n_out_of(2, vec![signed_by(1), n_out_of(1, vec![signed_by(0), signed_by(1)])]);
    assert!(eval(msps, rule, &[f.a.clone(), f.b.clone()]).0);
}

#[test]
fn failed_rule_releases_the_identities_it_took() {
    // OutOf(1, OutOf(2, A, C), A): the inner gate takes a for A, fails on C (no orderer signature) and its
    // flags are discarded, so the outer A can still use a.
    let f = fixture();
    let msps = f.cc.msp_manager();
    let rule = n_out_of(1, vec![n_out_of(2, vec![signed_by(0), signed_by(2)]), signed_by(0)]);
    assert!(eval(msps, rule.clone(), std::slice::from_ref(&f.a)).0);
    // With the orderer's signature too, the inner gate succeeds and consumes a; the outer A fails, but
    // one success is enough.
    assert!(eval(msps, rule, &[f.a.clone(), f.o.clone()]).0);
    // OutOf(2, OutOf(2, A, C), A) then fails: a is consumed by the inner gate.
    let rule = n_out_of(2, vec![n_out_of(2, vec![signed_by(0), signed_by(2)]), signed_by(0)]);
    assert!(!eval(msps, rule, &[f.a.clone(), f.o.clone()]).0);
}

#[test]
fn one_identity_counts_once() {
    let f = fixture();
    let msps = f.cc.msp_manager();
    let two_a = || n_out_of(2, vec![signed_by(0), signed_by(0)]);
    let a2 = signed(&support::org1_user(), b"another message");
    assert!(!eval(msps, two_a(), &[f.a.clone(), a2.clone()]).0);
    // Eager de-duplicates before verifying: the second copy of a is never verified.
    let (_, lazy, eager) = eval(msps, signed_by(0), &[f.a.clone(), a2]);
    assert_eq!((lazy, eager), (1, 1));
}

#[test]
fn later_duplicate_with_valid_signature_counts() {
    let f = fixture();
    let msps = f.cc.msp_manager();
    let bad_a = corrupted(&f.a);
    let (ok, lazy, eager) = eval(msps, signed_by(0), &[bad_a.clone(), f.a.clone()]);
    assert!(ok);
    assert_eq!((lazy, eager), (2, 2));
    assert!(eval(msps, signed_by(0), &[f.a.clone(), bad_a.clone()]).0);
    assert!(!eval(msps, signed_by(0), &[bad_a.clone(), bad_a.clone()]).0);
    // The valid duplicate is the accepted one; it still counts only once.
    let rule = n_out_of(2, vec![signed_by(0), signed_by(0)]);
    assert!(!eval(msps, rule, &[bad_a, f.a.clone(), f.a.clone()]).0);
}

#[test]
fn undeserialisable_items_are_skipped() {
    let f = fixture();
    let msps = f.cc.msp_manager();
    let org1_pem = SerializedIdentity::decode(f.a.identity.clone()).unwrap().id_bytes;
    let unknown_msp = SignedData {
        identity: SerializedIdentity { mspid: "Org3MSP".into(), id_bytes: org1_pem }.encode_to_vec().into(),
        ..f.a.clone()
    };
    let garbage = SignedData { identity: Bytes::from_static(b"\xff\xff not a proto"), ..f.a.clone() };
    let (ok, lazy, eager) = eval(msps, signed_by(0), &[unknown_msp.clone(), garbage.clone(), f.a.clone()]);
    assert!(ok);
    assert_eq!((lazy, eager), (1, 1));
    assert!(!eval(msps, signed_by(0), &[unknown_msp, garbage]).0);
}

#[test]
fn lazy_verifies_only_what_the_rule_needs() {
    let f = fixture();
    let msps = f.cc.msp_manager();
    let items = [f.o.clone(), f.b.clone(), f.a.clone()];
    let (ok, lazy, eager) = eval(msps, signed_by(0), &items);
    assert!(ok);
    assert_eq!((lazy, eager), (1, 3));
    // A 1-of-2 still evaluates both rules, as Fabric does, so both candidates get verified.
    let (ok, lazy, _) = eval(msps, n_out_of(1, vec![signed_by(1), signed_by(0)]), &items);
    assert!(ok);
    assert_eq!(lazy, 2);
}

#[test]
fn n_out_of_thresholds_follow_int32_comparison() {
    let f = fixture();
    let msps = f.cc.msp_manager();
    assert!(eval(msps, n_out_of(0, vec![]), &[]).0);
    assert!(eval(msps, n_out_of(-1, vec![signed_by(2)]), &[]).0);
    assert!(!eval(msps, n_out_of(1, vec![]), std::slice::from_ref(&f.a)).0);
    assert!(!eval(msps, n_out_of(3, vec![signed_by(0), signed_by(1), signed_by(2)]), &[f.a.clone(), f.b.clone()]).0);
    assert!(
        eval(
            msps,
            n_out_of(3, vec![signed_by(0), signed_by(1), signed_by(2)]),
            &[f.a.clone(), f.b.clone(), f.o.clone()]
        )
        .0
    );
}

#[test]
fn invalid_signature_policies_do_not_compile() {
    let bad_index = envelope_policy(signed_by(3), principals());
    assert!(matches!(compile_signature_policy(&bad_index), Err(PolicyError::InvalidPolicy { .. })));
    let negative = envelope_policy(n_out_of(1, vec![signed_by(-1)]), principals());
    assert!(matches!(compile_signature_policy(&negative), Err(PolicyError::InvalidPolicy { .. })));
    let untyped = envelope_policy(n_out_of(1, vec![SignaturePolicy { r#type: None }]), principals());
    assert!(matches!(compile_signature_policy(&untyped), Err(PolicyError::InvalidPolicy { .. })));
    let mut no_rule = envelope_policy(signed_by(0), principals());
    no_rule.rule = None;
    assert!(matches!(compile_signature_policy(&no_rule), Err(PolicyError::InvalidPolicy { .. })));
}

#[test]
fn signature_set_is_shared_across_threads() {
    let f = fixture();
    let msps = f.cc.msp_manager();
    let policy = compile_signature_policy(&envelope_policy(
        n_out_of(3, vec![signed_by(0), signed_by(1), signed_by(2)]),
        principals(),
    ))
    .unwrap();
    let set = SignatureSet::new(vec![f.a.clone(), f.b.clone(), f.o.clone()], msps);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| policy.evaluate(&set).unwrap());
        }
    });
    assert_eq!(set.verifications(), 3, "each signature verified exactly once");
}
