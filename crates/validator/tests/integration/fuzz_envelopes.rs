//! Property test: random byte mutations of a valid envelope, placed in a correctly chained and orderer-signed block
//! next to a valid transaction, never panic the validator and always end in a code for the mutated transaction
//! (the block is never refused), while the valid neighbour stays VALID and the validator keeps accepting blocks.
//!
//! Four places are mutated: the raw envelope bytes (the creator's signature then almost always fails), the payload
//! bytes re-signed by the creator (so header fields are reached), the transaction bytes inside the payload re-signed
//! by the creator, and the endorsed `ChaincodeAction` re-endorsed by both peers (so the dispatcher, VSCC and MVCC
//! see the garbage, and a mutated but well-formed read/write set is committed). In the second kind a
//! mutation can turn the header type into CONFIG; a correctly signed CONFIG transaction that is not a valid
//! configuration stops a Fabric peer (`validator.go`: "error unmarshalling config which passed initial validity
//! checks" / "error validating config"), so there, and only there, a refused block is the expected outcome.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::cell::RefCell;

use crate::support::*;
use bytes::Bytes;
use ferrofabric_protos::common::{ChannelHeader, Envelope, HeaderType, Payload};
use ferrofabric_validator::{TxValidationCode as Code, ValidatorError};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use prost::Message;

#[derive(Clone, Copy, Debug)]
enum Target {
    Envelope,
    Payload,
    TransactionData,
    EndorsedAction,
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip(Index, u8),
    Set(Index, u8),
    Insert(Index, u8),
    Remove(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<Index>(), 1u8..=255).prop_map(|(i, x)| Mutation::Flip(i, x)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<Index>().prop_map(Mutation::Remove),
    ]
}

fn apply(bytes: &[u8], mutations: &[Mutation]) -> Bytes {
    let mut v = bytes.to_vec();
    for m in mutations {
        match m {
            Mutation::Flip(i, x) if !v.is_empty() => {
                let i = i.index(v.len());
                v[i] ^= x;
            }
            Mutation::Set(i, b) if !v.is_empty() => {
                let i = i.index(v.len());
                v[i] = *b;
            }
            Mutation::Insert(i, b) => {
                let i = i.index(v.len() + 1);
                v.insert(i, *b);
            }
            Mutation::Remove(i) if !v.is_empty() => {
                let i = i.index(v.len());
                v.remove(i);
            }
            _ => {}
        }
    }
    Bytes::from(v)
}

/// Whether the envelope is a correctly formed CONFIG transaction header-wise (the one case a block may be refused).
fn claims_config(envelope: &Bytes) -> bool {
    let header = Envelope::decode(envelope.clone()).ok().and_then(|e| Payload::decode(e.payload).ok()?.header);
    header
        .and_then(|h| ChannelHeader::decode(h.channel_header).ok())
        .is_some_and(|c| c.r#type == HeaderType::Config as i32)
}

#[test]
fn mutated_envelopes_always_get_a_code() {
    let h = RefCell::new(Harness::new());
    let net = h.borrow().net;
    let (user, peers) = (net.client(0), [net.peer(0), net.peer(1)]);
    // A fresh transaction per case (new nonce, so a mutation that keeps it valid does not make later cases
    // duplicates). No `_lifecycle` read: a mutation must not be able to turn it into an endorsed `_lifecycle` write.
    let fresh = || {
        ferrofabric_testkit::TxBuilder::new(net)
            .chaincode(CC, "1.0")
            .read(CC, "never-written", None)
            .write(CC, "fuzzed", "after")
            .write(CC, "other", "x")
            .chaincode_event("fuzz", b"payload")
            .build()
            .unwrap()
            .envelope
    };
    let counter = RefCell::new(0u32);

    let strategy = (
        prop_oneof![
            Just(Target::Envelope),
            Just(Target::Payload),
            Just(Target::TransactionData),
            Just(Target::EndorsedAction)
        ],
        prop::collection::vec(mutation(), 1..6),
    );
    let mut runner = TestRunner::new(Config { cases: 160, failure_persistence: None, ..Config::default() });
    runner
        .run(&strategy, |(target, mutations)| {
            let base = fresh();
            let mutated = match target {
                Target::Envelope => apply(&base, &mutations),
                Target::Payload => {
                    let env = Envelope::decode(base.clone()).unwrap();
                    sign_payload(user, apply(&env.payload, &mutations))
                }
                Target::TransactionData => resign_payload(&base, user, |p| p.data = apply(&p.data, &mutations)),
                Target::EndorsedAction => {
                    let mut p = Parts::of(&base);
                    p.raw_extension = Some(apply(&p.action.encode_to_vec(), &mutations));
                    p.assemble(user, &peers)
                }
            };
            let mut h = h.borrow_mut();
            let n = {
                let mut c = counter.borrow_mut();
                *c += 1;
                *c
            };
            let neighbour = h.tx().write(CC, &format!("neighbour{n}"), "x").build().unwrap().envelope;
            match h.try_commit(&[mutated.clone(), neighbour]) {
                Ok(r) => {
                    prop_assert_eq!(r.codes.len(), 2);
                    prop_assert_eq!(r.codes[1], Code::Valid, "neighbour of {:?}", r.codes[0]);
                    if r.codes[0] != Code::Valid {
                        prop_assert!(r.updates.iter().all(|(_, u)| u.version().tx_num == 1));
                    }
                }
                Err(e @ (ValidatorError::Execution { .. } | ValidatorError::Config(_))) => {
                    prop_assert!(
                        matches!(target, Target::Payload) && claims_config(&mutated),
                        "block refused for a non-CONFIG mutation: {e}"
                    );
                    // The block was refused; the next case chains to the last accepted block.
                    return Ok(());
                }
                Err(e) => return Err(TestCaseError::fail(format!("block refused: {e}"))),
            }
            Ok(())
        })
        .unwrap();

    // Still healthy: an ordinary block commits.
    let mut h = h.into_inner();
    let r = h.commit(&[h.tx().write(CC, "after-fuzz", "x").build().unwrap().envelope]);
    assert_eq!(r.codes, [Code::Valid]);
}
