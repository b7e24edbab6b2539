//! `Validator::commit_block_attested`, BMac's split of the commit path: a trusted verifier (the card) gives the
//! signature verdicts, the validator runs every other check and MVCC on its own state, and commits only when the
//! codes it reaches are the attested ones.

#![allow(clippy::unwrap_used)]

use crate::support::*;
use bytes::Bytes;
use ferrofabric_testkit::fabric_fixture;
use ferrofabric_validator::{TxValidationCode as Code, Validator, ValidatorError, ValidatorOptions};

fn fixture(name: &str) -> Bytes {
    Bytes::from(std::fs::read(fabric_fixture(name)).unwrap())
}

#[test]
fn attested_with_the_verified_codes_the_fixture_ledger_commits_identically() {
    let blocks: Vec<Bytes> =
        ferrofabric_protoutil::records(fixture("orderer-blocks.bin")).map(|r| r.unwrap().1).collect();
    let options = || ValidatorOptions { threads: 2 };
    let mut verified = Validator::new(fixture("genesis.block"), options()).unwrap();
    let mut attested = Validator::new(fixture("genesis.block"), options()).unwrap();
    let mut codes_seen = std::collections::HashSet::new();
    for b in &blocks[1..] {
        let want = verified.commit_block(b.clone()).unwrap();
        let got = attested.commit_block_attested(b.clone(), &want.codes).unwrap();
        assert_eq!((&got.codes, got.commit_hash), (&want.codes, want.commit_hash), "block {}", want.number);
        codes_seen.extend(want.codes);
    }
    assert!(codes_seen.len() > 2, "the ledger has invalid transactions of several kinds: {codes_seen:?}");
}

#[test]
fn attested_signature_verdicts_are_taken_without_verifying() {
    let mut h = Harness::new();
    let envelopes = [
        h.tx().write(CC, "forged-creator", "1").corrupt_creator_signature().build().unwrap().envelope,
        h.tx().write(CC, "forged-endorsement", "1").corrupt_endorsement(0).build().unwrap().envelope,
        h.tx().write(CC, "well-signed", "1").build().unwrap().envelope,
        h.tx().write(CC, "well-endorsed", "1").build().unwrap().envelope,
    ];
    let raw = h.cut(&envelopes);
    // The verifier's word decides every signature, right or wrong: the forged ones pass, the good ones fail.
    let attested = [Code::Valid, Code::Valid, Code::BadCreatorSignature, Code::EndorsementPolicyFailure];
    let r = h.commit_raw_attested(raw, &attested).unwrap();
    assert_eq!(r.codes, attested);
    assert!(h.get(CC, "forged-creator").is_some() && h.get(CC, "forged-endorsement").is_some());
    assert!(h.get(CC, "well-signed").is_none() && h.get(CC, "well-endorsed").is_none());
}

#[test]
fn disputed_attestations_commit_nothing() {
    let mut h = Harness::new();
    h.seed(&["k"]);
    let at = h.version(CC, "k");
    let spend = |h: &Harness, value: &str| h.tx().read(CC, "k", at).write(CC, "k", value).build().unwrap().envelope;
    let envelopes = [spend(&h, "first"), spend(&h, "second")];
    let raw = h.cut(&envelopes);
    let height = h.validator.last_block_number();
    let hash = h.validator.commit_hash();

    // A verifier that misses the double spend, and one that gives too few codes.
    for attested in [&[Code::Valid, Code::Valid][..], &[Code::Valid][..]] {
        let err = h.commit_raw_attested(raw.clone(), attested).unwrap_err();
        assert!(matches!(err, ValidatorError::Disputed { .. }), "{err}");
        assert_eq!((h.validator.last_block_number(), h.validator.commit_hash()), (height, hash));
        assert_eq!(h.version(CC, "k"), at);
    }

    let r = h.commit_raw_attested(raw, &[Code::Valid, Code::MvccReadConflict]).unwrap();
    assert_eq!(r.codes, [Code::Valid, Code::MvccReadConflict]);
    assert_eq!(h.get(CC, "k").unwrap().value.as_ref(), b"first");
}
