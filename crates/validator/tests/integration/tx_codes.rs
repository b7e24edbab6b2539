//! One test per `TxValidationCode` the Fabric 2.5 commit path can give, each from a crafted, correctly signed testkit
//! transaction that a Fabric 2.5.16 peer rejects with exactly that code (checked against
//! `core/committer/txvalidator/v20/validator.go`, `core/common/validation/msgvalidation.go`,
//! `core/committer/txvalidator/v20/plugindispatcher/dispatcher.go`, `core/common/validation/statebased/` and
//! `core/ledger/kvledger/txmgmt/validation/` at tag v2.5.16). Every block also carries VALID neighbours, which must
//! stay VALID; the harness checks after every block that no transaction other than a VALID one changed the state.
//!
//! Codes this path cannot produce, and why (same sources):
//! * `NIL_ENVELOPE`: `validateTx` gives it only when `GetEnvelopeFromBlock` returns neither an envelope nor an error,
//!   which never happens (an unparseable entry is INVALID_OTHER_REASON), so `ValidateTransaction`'s nil check is
//!   never reached either.
//! * `UNKNOWN_TX_TYPE`: `validateTx` reaches that branch only after `ValidateTransaction` said VALID, which it says
//!   only for ENDORSER_TRANSACTION and CONFIG (CONFIG_UPDATE is UNSUPPORTED_TX_PAYLOAD, other types
//!   BAD_COMMON_HEADER).
//! * `TARGET_CHAIN_NOT_FOUND`: `chainExists` is a stub that always returns true.
//! * `MARSHAL_TX_ERROR`: re-marshalling the Envelope that was just unmarshalled (two bytes fields) cannot fail.
//! * `NIL_TXACTION`: `preprocessProtoBlock` sets it when the action of a still-VALID endorser transaction cannot be
//!   extracted, but the dispatcher already extracted it (BAD_RESPONSE_PAYLOAD otherwise); the INVALID_OTHER_REASON
//!   there for an unparseable read/write set is likewise preceded by BAD_RWSET.
//! * `BAD_CHANNEL_HEADER`: only the dispatcher gives it, for a channel header that `ValidateTransaction` already
//!   decoded (BAD_COMMON_HEADER otherwise).
//! * `INVALID_WRITESET`: `validateWriteset` asks the state database's `ValidateKeyValue`, which LevelDB implements
//!   as "always fine" (only CouchDB rejects keys and values); Ferrofabric has LevelDB semantics.
//! * `EXPIRED_CHAINCODE`, `CHAINCODE_VERSION_CONFLICT`: only the 1.x validator (`txvalidator/v14`) gives them; a
//!   channel with V2_0 application capabilities uses `v20`.
//! * `NOT_VALIDATED`: the initial value of the filter; `Validate` sets every index (or fails the whole block) and
//!   `allValidated` refuses a block that still holds it.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support::*;
use bytes::Bytes;
use ferrofabric_protos::common::{Envelope, HeaderType};
use ferrofabric_protos::kvrwset::{KvWrite, KvrwSet};
use ferrofabric_protos::peer::{ChaincodeEvent, ChaincodeHeaderExtension, ChaincodeId, Transaction};
use ferrofabric_protos::rwset::{tx_read_write_set, NsReadWriteSet, TxReadWriteSet};
use ferrofabric_testkit::TxBuilder;
use ferrofabric_validator::TxValidationCode as Code;
use prost::Message;

const VP: &str = "VALIDATION_PARAMETER";

/// A VALID blind write of `key` in [`CC`].
fn neighbour(h: &Harness, key: &str) -> Bytes {
    h.tx().write(CC, key, format!("neighbour {key}")).build().unwrap().envelope
}

/// Commits `[neighbour, bad..., neighbour]` and checks that every bad transaction got `code`, both neighbours are
/// VALID and were applied, and the key every bad transaction tried to write (`victim`) is still absent.
fn expect_code(h: &mut Harness, bad: &[Bytes], code: Code) {
    let block = h.next_block();
    let (first, last) = (format!("n{block}-first"), format!("n{block}-last"));
    let mut envs = vec![neighbour(h, &first)];
    envs.extend_from_slice(bad);
    envs.push(neighbour(h, &last));
    let r = h.commit(&envs);
    let mut want = vec![Code::Valid];
    want.extend(std::iter::repeat_n(code, bad.len()));
    want.push(Code::Valid);
    assert_eq!(r.codes, want, "block {block}");
    assert_eq!(h.version(CC, &first), Some((block, 0)));
    assert_eq!(h.version(CC, &last), Some((block, bad.len() as u64 + 1)));
    assert_eq!(h.get(CC, "victim"), None, "an invalid transaction wrote");
}

/// A [`CC`] transaction writing `victim`, the starting point of most malformations.
fn victim(h: &Harness) -> TxBuilder<'static> {
    h.tx().write(CC, "victim", "must never be written")
}

#[test]
fn valid_transactions_commit_their_writes_at_their_height() {
    let mut h = Harness::new();
    h.seed(&["alice", "bob"]);
    let (a, b) = (h.version(CC, "alice"), h.version(CC, "bob"));
    let transfer = h.tx().read(CC, "alice", a).read(CC, "bob", b).write(CC, "alice", "9").write(CC, "bob", "11");
    let delete = h.tx().delete(CC, "carol-never-existed");
    let create = h.tx().write(CC, "carol", "1");
    let block = h.next_block();
    let r = h.commit(&[
        transfer.build().unwrap().envelope,
        delete.build().unwrap().envelope,
        create.build().unwrap().envelope,
    ]);
    assert_eq!(r.codes, [Code::Valid, Code::Valid, Code::Valid]);
    assert_eq!(h.get(CC, "alice").unwrap().value.as_ref(), b"9");
    assert_eq!(h.version(CC, "bob"), Some((block, 0)));
    assert_eq!(h.version(CC, "carol"), Some((block, 2)));
    assert!(r.commit_hash.is_some());
}

/// Fabric treats a public write of an empty value, and a hashed write whose value hash is that of the empty value,
/// as deletes (`rwsetutil.IsKVWriteDelete` / `IsKVWriteHashDelete`), whatever `is_delete` says.
#[test]
fn valid_writes_of_empty_values_delete_the_key() {
    let mut h = Harness::new();
    h.seed(&["emptied", "kept"]);
    let hashed = h.private_tx().hashed_write(PRIVATE, SHARED, "hidden", "v").build().unwrap().envelope;
    assert_eq!(h.commit(&[hashed]).codes, [Code::Valid]);
    assert!(h.hashed_version(PRIVATE, SHARED, "hidden").is_some());
    let r = h.commit(&[
        h.tx().write(CC, "emptied", "").build().unwrap().envelope,
        h.private_tx().hashed_write(PRIVATE, SHARED, "hidden", "").build().unwrap().envelope,
    ]);
    assert_eq!(r.codes, [Code::Valid, Code::Valid]);
    assert_eq!(h.get(CC, "emptied"), None);
    assert_eq!(h.hashed_version(PRIVATE, SHARED, "hidden"), None);
    assert!(h.get(CC, "kept").is_some());
}

/// A metadata-only write applies to the key's latest value; after a delete earlier in the same block there is none,
/// so it changes nothing. (By our reading of Fabric 2.5.16's `tx_ops.go`, `retrieveLatestState` returns the
/// pending delete there and the peer then stores a nil value, which `UpdateBatch.PutValAndMetadata` refuses with a
/// panic; Ferrofabric keeps the key deleted.)
#[test]
fn a_metadata_write_after_a_delete_in_the_same_block_leaves_the_key_deleted() {
    let mut h = Harness::new();
    h.seed(&["gone"]);
    let vp = org1_peer_only();
    let r = h.commit(&[
        h.tx().delete(CC, "gone").build().unwrap().envelope,
        h.tx().metadata_write(CC, "gone", &[(VP, &vp)]).build().unwrap().envelope,
    ]);
    assert_eq!(r.codes, [Code::Valid, Code::Valid]);
    assert_eq!(h.get(CC, "gone"), None);
}

/// A value write keeps its key's metadata, committed in an earlier block; a key without metadata keeps none
/// (Fabric's `txmgr` retrieves the latest metadata for a value-only write). A write of metadata earlier in the same
/// block would make the value write an ENDORSEMENT_POLICY_FAILURE (the key's validation parameter changed).
#[test]
fn a_value_write_keeps_the_metadata_of_its_key() {
    let mut h = Harness::new();
    h.seed(&["tagged", "plain"]);
    let tag = vec![("tag".to_owned(), Bytes::from_static(b"t1"))];
    let r = h.commit(&[h.tx().metadata_write(CC, "tagged", &[("tag", b"t1")]).build().unwrap().envelope]);
    assert_eq!(r.codes, [Code::Valid]);
    let r = h.commit(&[
        h.tx().write(CC, "tagged", "v2").build().unwrap().envelope,
        h.tx().write(CC, "plain", "p2").build().unwrap().envelope,
    ]);
    assert_eq!(r.codes, [Code::Valid; 2]);
    let tagged = h.get(CC, "tagged").unwrap();
    assert_eq!((tagged.value.as_ref(), &tagged.metadata), (&b"v2"[..], &tag));
    assert!(h.get(CC, "plain").unwrap().metadata.is_empty());
}

#[test]
fn bad_payload_when_the_envelope_payload_is_not_a_payload() {
    let mut h = Harness::new();
    let user = h.net.client(0);
    let env = Envelope { payload: Bytes::from_static(TRUNCATED), signature: Bytes::from(user.sign(TRUNCATED)) };
    expect_code(&mut h, &[Bytes::from(env.encode_to_vec())], Code::BadPayload);
}

#[test]
fn bad_common_header_for_epoch_message_type_and_empty_nonce() {
    let mut h = Harness::new();
    let bad = [
        victim(&h).epoch(1).build().unwrap().envelope,
        victim(&h).header_type(HeaderType::Message as i32).build().unwrap().envelope,
        victim(&h).nonce(Bytes::new()).build().unwrap().envelope,
    ];
    expect_code(&mut h, &bad, Code::BadCommonHeader);
}

#[test]
fn bad_creator_signature_for_corruption_unknown_msp_and_wrong_channel() {
    let mut h = Harness::new();
    let stranger = foreign_client("Org3MSP");
    let bad = [
        victim(&h).corrupt_creator_signature().build().unwrap().envelope,
        victim(&h).creator(&stranger).build().unwrap().envelope,
        victim(&h).channel("otherchannel").build().unwrap().envelope,
    ];
    expect_code(&mut h, &bad, Code::BadCreatorSignature);
}

#[test]
fn invalid_endorser_transaction_for_bad_data_proposal_hash_and_two_actions() {
    let mut h = Harness::new();
    let user = h.net.client(0);
    let two_actions = resign_payload(&victim(&h).build().unwrap().envelope, user, |p| {
        let mut tx = Transaction::decode(p.data.clone()).unwrap();
        tx.actions.push(tx.actions[0].clone());
        p.data = Bytes::from(tx.encode_to_vec());
    });
    let bad = [
        victim(&h).payload_data(Bytes::from_static(TRUNCATED)).build().unwrap().envelope,
        victim(&h).proposal_hash(vec![0u8; 32]).build().unwrap().envelope,
        two_actions,
    ];
    expect_code(&mut h, &bad, Code::InvalidEndorserTransaction);
}

#[test]
fn invalid_config_transaction_for_a_config_header_without_data() {
    let mut h = Harness::new();
    let bad = victim(&h).header_type(HeaderType::Config as i32).payload_data(Bytes::new()).build().unwrap().envelope;
    let before = h.validator.channel_config().sequence();
    expect_code(&mut h, &[bad], Code::InvalidConfigTransaction);
    assert_eq!(h.validator.channel_config().sequence(), before);
}

#[test]
fn unsupported_tx_payload_for_a_config_update_in_a_block() {
    let mut h = Harness::new();
    let bad = victim(&h).header_type(HeaderType::ConfigUpdate as i32).build().unwrap().envelope;
    expect_code(&mut h, &[bad], Code::UnsupportedTxPayload);
}

#[test]
fn bad_proposal_txid_when_the_txid_is_not_the_hash_of_nonce_and_creator() {
    let mut h = Harness::new();
    let bad = victim(&h).tx_id("0".repeat(64)).build().unwrap().envelope;
    expect_code(&mut h, &[bad], Code::BadProposalTxid);
}

#[test]
fn duplicate_txid_in_the_block_and_against_the_ledger() {
    let mut h = Harness::new();
    let once = h.tx().write(CC, "dup", "first").build().unwrap().envelope;
    let block = h.next_block();
    let r = h.commit(&[once.clone(), neighbour(&h, "d1"), once.clone()]);
    assert_eq!(r.codes, [Code::Valid, Code::Valid, Code::DuplicateTxid]);
    assert_eq!(h.version(CC, "dup"), Some((block, 0)));

    // The same envelope again, in a later block.
    expect_code(&mut h, &[once], Code::DuplicateTxid);
    assert_eq!(h.version(CC, "dup"), Some((block, 0)));
}

#[test]
fn endorsement_policy_failure_for_one_org_and_corrupted_endorsement() {
    let mut h = Harness::new();
    let net = h.net;
    let bad = [
        victim(&h).endorsers(&[net.peer(0)]).build().unwrap().envelope,
        victim(&h).endorsers(&[net.peer(1)]).build().unwrap().envelope,
        victim(&h).endorsers(&[net.peer(0), net.peer(0)]).build().unwrap().envelope,
        victim(&h).corrupt_endorsement(1).build().unwrap().envelope,
        victim(&h).endorsers(&[net.client(0), net.client(1)]).build().unwrap().envelope,
    ];
    expect_code(&mut h, &bad, Code::EndorsementPolicyFailure);
}

#[test]
fn endorsement_policy_failure_for_a_collection_policy() {
    let mut h = Harness::new();
    let net = h.net;
    let by = |org: usize| h.private_tx().endorsers(&[net.peer(org)]);
    let block = h.next_block();
    let r = h.commit(&[
        // ORG2_ONLY's own policy wants Org2's peer, although the chaincode's (either peer) is met.
        by(0).hashed_write(PRIVATE, ORG2_ONLY, "secret", "x").build().unwrap().envelope,
        by(1).hashed_write(PRIVATE, ORG2_ONLY, "secret", "y").build().unwrap().envelope,
        // SHARED has no policy of its own: the chaincode's applies.
        by(0).hashed_write(PRIVATE, SHARED, "common", "z").build().unwrap().envelope,
        by(0).write(PRIVATE, "public", "p").build().unwrap().envelope,
        // A public write that Org1 endorses cannot smuggle in a collection write Org2 did not.
        by(0).write(PRIVATE, "public2", "p").hashed_write(PRIVATE, ORG2_ONLY, "s2", "x").build().unwrap().envelope,
    ]);
    use Code::{EndorsementPolicyFailure as Epf, Valid};
    assert_eq!(r.codes, [Epf, Valid, Valid, Valid, Epf]);
    assert_eq!(h.hashed_version(PRIVATE, ORG2_ONLY, "secret"), Some((block, 1)));
    assert_eq!(h.hashed_version(PRIVATE, SHARED, "common"), Some((block, 2)));
    assert_eq!(h.get(PRIVATE, "public2"), None);
    assert_eq!(h.hashed_version(PRIVATE, ORG2_ONLY, "s2"), None);
}

fn org1_peer_only() -> Vec<u8> {
    peers_policy(1, &["Org1MSP"]).encode_to_vec()
}

#[test]
fn endorsement_policy_failure_for_a_key_level_parameter_set_in_an_earlier_block() {
    let mut h = Harness::new();
    let net = h.net;
    h.seed(&["guarded", "plain"]);
    // A metadata-only write: both peers satisfy the chaincode policy; the value is kept, the version moves.
    let vp = org1_peer_only();
    let set = h.tx().metadata_write(CC, "guarded", &[(VP, &vp)]).build().unwrap().envelope;
    let set_block = h.next_block();
    assert_eq!(h.commit(&[set]).codes, [Code::Valid]);
    let guarded = h.get(CC, "guarded").unwrap();
    assert_eq!(guarded.value.as_ref(), b"value-of-guarded");
    assert_eq!(guarded.metadata, vec![(VP.to_owned(), Bytes::from(vp.clone()))]);
    assert_eq!((guarded.version.block_num, guarded.version.tx_num), (set_block, 0));
    let only = |org: usize| h.tx().endorsers(&[net.peer(org)]);
    let block = h.next_block();
    let r = h.commit(&[
        // Org2 alone does not satisfy the key's parameter.
        only(1).write(CC, "guarded", "by org2").build().unwrap().envelope,
        // Org1 alone does, although it would not satisfy the chaincode policy ...
        only(0).write(CC, "guarded", "by org1").build().unwrap().envelope,
        // ... which keys without a parameter still need.
        only(0).write(CC, "plain", "by org1").build().unwrap().envelope,
        // Removing the parameter is itself a write of the key, under the parameter.
        only(1).metadata_write(CC, "guarded", &[]).build().unwrap().envelope,
    ]);
    use Code::{EndorsementPolicyFailure as Epf, Valid};
    assert_eq!(r.codes, [Epf, Valid, Epf, Epf]);
    let guarded = h.get(CC, "guarded").unwrap();
    assert_eq!(
        (guarded.value.as_ref(), guarded.version.block_num, guarded.version.tx_num),
        (&b"by org1"[..], block, 1)
    );
    assert_eq!(guarded.metadata.len(), 1, "a value write keeps the key's metadata");
    assert_eq!(h.get(CC, "plain").unwrap().value.as_ref(), b"value-of-plain");
}

/// A stored key-level parameter that is not a SignaturePolicyEnvelope cannot be translated; Fabric treats that as
/// an execution failure and stops committing, so the validator refuses the block instead of giving a code.
#[test]
fn a_malformed_key_level_parameter_stops_validation_of_the_block() {
    let mut h = Harness::new();
    h.seed(&["broken"]);
    let set = h.tx().metadata_write(CC, "broken", &[(VP, TRUNCATED)]).build().unwrap().envelope;
    assert_eq!(h.commit(&[set]).codes, [Code::Valid]);
    let height = h.validator.last_block_number();
    let write = h.tx().write(CC, "broken", "x").build().unwrap().envelope;
    let err = h.try_commit(&[write]).unwrap_err();
    assert!(matches!(err, ferrofabric_validator::ValidatorError::Execution { .. }), "{err}");
    assert_eq!(h.validator.last_block_number(), height);
}

#[test]
fn endorsement_policy_failure_for_a_key_level_parameter_changed_earlier_in_the_block() {
    let mut h = Harness::new();
    let net = h.net;
    h.seed(&["kb", "kc"]);
    let vp = org1_peer_only();
    let r = h.commit(&[
        h.tx().metadata_write(CC, "kb", &[(VP, &vp)]).build().unwrap().envelope,
        // Valid under the committed state (no parameter yet), but the parameter changed in between.
        h.tx().write(CC, "kb", "late").build().unwrap().envelope,
        h.tx().write(CC, "kc", "unrelated").build().unwrap().envelope,
    ]);
    assert_eq!(r.codes, [Code::Valid, Code::EndorsementPolicyFailure, Code::Valid]);
    assert_eq!(h.get(CC, "kb").unwrap().value.as_ref(), b"value-of-kb");

    // An earlier parameter change that itself fails VSCC is no dependency.
    let r = h.commit(&[
        h.tx().endorsers(&[net.peer(1)]).metadata_write(CC, "kc", &[(VP, &vp)]).build().unwrap().envelope,
        h.tx().write(CC, "kc", "after a failed change").build().unwrap().envelope,
    ]);
    assert_eq!(r.codes, [Code::EndorsementPolicyFailure, Code::Valid]);
    assert!(h.get(CC, "kc").unwrap().metadata.is_empty());
}

#[test]
fn mvcc_read_conflict_for_stale_same_block_and_hashed_reads() {
    let mut h = Harness::new();
    h.seed(&["m1", "m2"]);
    let old = h.version(CC, "m1");
    h.seed(&["m1"]);
    let m2 = h.version(CC, "m2");
    let block = h.next_block();
    let r = h.commit(&[
        h.tx().read(CC, "m1", old).write(CC, "out1", "x").build().unwrap().envelope,
        h.tx().read(CC, "m2", m2).write(CC, "m2", "first").build().unwrap().envelope,
        // Read at the committed version, but written by the transaction before.
        h.tx().read(CC, "m2", m2).write(CC, "m2", "second").build().unwrap().envelope,
        // A read of an absent key recorded as absent is fine; recorded with a version it is not.
        h.tx().read(CC, "absent", None).write(CC, "out2", "x").build().unwrap().envelope,
        h.tx().read(CC, "absent", Some((1, 0))).write(CC, "out3", "x").build().unwrap().envelope,
    ]);
    use Code::{MvccReadConflict as Mvcc, Valid};
    assert_eq!(r.codes, [Mvcc, Valid, Mvcc, Valid, Mvcc]);
    assert_eq!(h.get(CC, "m2").unwrap().value.as_ref(), b"first");
    assert_eq!(h.version(CC, "m2"), Some((block, 1)));

    let first = h.private_tx().hashed_write(PRIVATE, SHARED, "h1", "v1").build().unwrap().envelope;
    assert_eq!(h.commit(&[first]).codes, [Code::Valid]);
    let h1 = h.hashed_version(PRIVATE, SHARED, "h1");
    let r = h.commit(&[
        h.private_tx()
            .hashed_read(PRIVATE, SHARED, "h1", Some((1, 1)))
            .write(PRIVATE, "o1", "x")
            .build()
            .unwrap()
            .envelope,
        h.private_tx()
            .hashed_read(PRIVATE, SHARED, "h1", h1)
            .hashed_write(PRIVATE, SHARED, "h1", "v2")
            .build()
            .unwrap()
            .envelope,
        h.private_tx().hashed_read(PRIVATE, SHARED, "h1", h1).write(PRIVATE, "o2", "x").build().unwrap().envelope,
    ]);
    assert_eq!(r.codes, [Mvcc, Valid, Mvcc]);
    assert_eq!(h.get(PRIVATE, "o1"), None);
}

#[test]
fn phantom_read_conflict_for_an_insert_into_the_range() {
    let mut h = Harness::new();
    h.seed(&["r01", "r03"]);
    let (r01, r03) = (h.version(CC, "r01"), h.version(CC, "r03"));
    let scan = |out: &str| {
        h.tx().range_query(CC, "r00", "r99", true, &[("r01", r01), ("r03", r03)]).write(CC, out, "x").build().unwrap()
    };
    let (unchanged, phantom) = (scan("scanned").envelope, scan("victim").envelope);
    let r = h.commit(&[unchanged]);
    assert_eq!(r.codes, [Code::Valid], "the range is unchanged");
    let insert = h.tx().write(CC, "r02", "inserted").build().unwrap().envelope;
    // A range that ends before the inserted key sees no phantom.
    let before = h.tx().range_query(CC, "r00", "r02", true, &[("r01", r01)]).write(CC, "other", "x").build().unwrap();
    let r = h.commit(&[insert, phantom, before.envelope]);
    assert_eq!(r.codes, [Code::Valid, Code::PhantomReadConflict, Code::Valid]);
    assert_eq!(h.get(CC, "victim"), None);
}

/// With `itr_exhausted == false` the endorser stopped early and `end_key` is the last key it read; Fabric's
/// combined iterator then scans `[start, end_key)` and serves `end_key` itself from the block's updates or the
/// committed state, unless it is deleted there, in which case it serves nothing.
#[test]
fn phantom_read_conflict_and_the_served_end_key_of_an_unexhausted_range() {
    let mut h = Harness::new();
    h.seed(&["e1", "e2", "e3"]);
    let (e1, e2, e3) = (h.version(CC, "e1"), h.version(CC, "e2"), h.version(CC, "e3"));
    let partial = |end: &str, exhausted: bool, reads: &[(&str, Option<(u64, u64)>)], out: &str| {
        h.tx().range_query(CC, "e0", end, exhausted, reads).write(CC, out, "x").build().unwrap().envelope
    };
    use Code::{PhantomReadConflict as Phantom, Valid};
    let first = [
        // e2 lies outside [e0, e2) but is served as the end key.
        partial("e2", false, &[("e1", e1), ("e2", e2)], "o1"),
        // The same reads claiming an exhausted iterator: e2 is not in [e0, e2).
        partial("e2", true, &[("e1", e1), ("e2", e2)], "o2"),
        // An end key that does not exist is served as nothing.
        partial("e25", false, &[("e1", e1), ("e2", e2)], "o3"),
    ];
    let second = [
        h.tx().delete(CC, "e3").build().unwrap().envelope,
        // e3 was deleted earlier in the block: it is not served, so a scan that read it sees a phantom ...
        partial("e3", false, &[("e1", e1), ("e2", e2), ("e3", e3)], "o4"),
        // ... and one that stopped at e3 without listing it matches.
        partial("e3", false, &[("e1", e1), ("e2", e2)], "o5"),
    ];
    let third = [
        h.tx().write(CC, "e2", "updated").build().unwrap().envelope,
        // The served end key comes from this block's update of e2.
        partial("e2", false, &[("e1", e1), ("e2", e2)], "o6"),
    ];
    assert_eq!(h.commit(&first).codes, [Valid, Phantom, Valid]);
    assert_eq!(h.commit(&second).codes, [Valid, Phantom, Valid]);
    assert_eq!(h.get(CC, "e3"), None);
    assert_eq!(h.commit(&third).codes, [Valid, Phantom]);
}

#[test]
fn bad_header_extension_when_the_channel_header_extension_does_not_decode() {
    let mut h = Harness::new();
    let net = h.net;
    let mut parts = Parts::of(&victim(&h).build().unwrap().envelope);
    parts.channel_header.extension = Bytes::from_static(TRUNCATED);
    expect_code(&mut h, &[parts.assemble(net.client(0), &[net.peer(0), net.peer(1)])], Code::BadHeaderExtension);
}

#[test]
fn bad_response_payload_when_the_endorsed_extension_is_missing_or_garbage() {
    let mut h = Harness::new();
    let net = h.net;
    let mut garbage = Parts::of(&victim(&h).build().unwrap().envelope);
    garbage.raw_extension = Some(Bytes::from_static(TRUNCATED));
    let mut missing = Parts::of(&victim(&h).build().unwrap().envelope);
    missing.raw_extension = Some(Bytes::new());
    let endorsers = [net.peer(0), net.peer(1)];
    let bad = [garbage.assemble(net.client(0), &endorsers), missing.assemble(net.client(0), &endorsers)];
    expect_code(&mut h, &bad, Code::BadResponsePayload);
}

#[test]
fn bad_rwset_when_the_results_do_not_decode() {
    let mut h = Harness::new();
    let bad_ns = TxReadWriteSet {
        data_model: tx_read_write_set::DataModel::Kv as i32,
        ns_rwset: vec![NsReadWriteSet {
            namespace: CC.into(),
            rwset: Bytes::from_static(TRUNCATED),
            collection_hashed_rwset: vec![],
        }],
    };
    let bad = [
        victim(&h).raw_results(Bytes::from_static(TRUNCATED)).build().unwrap().envelope,
        victim(&h).raw_results(bad_ns.encode_to_vec()).build().unwrap().envelope,
    ];
    expect_code(&mut h, &bad, Code::BadRwset);
}

#[test]
fn illegal_writeset_for_a_namespace_twice() {
    let mut h = Harness::new();
    let ns = |key: &str| NsReadWriteSet {
        namespace: CC.into(),
        rwset: Bytes::from(
            KvrwSet {
                writes: vec![KvWrite { key: key.into(), is_delete: false, value: Bytes::from_static(b"v") }],
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        collection_hashed_rwset: vec![],
    };
    let twice = TxReadWriteSet {
        data_model: tx_read_write_set::DataModel::Kv as i32,
        ns_rwset: vec![ns("victim"), ns("other")],
    };
    let bad = victim(&h).raw_results(twice.encode_to_vec()).build().unwrap().envelope;
    expect_code(&mut h, &[bad], Code::IllegalWriteset);
    assert_eq!(h.get(CC, "other"), None);
}

#[test]
fn invalid_chaincode_for_undefined_mismatched_and_versionless_chaincodes() {
    let mut h = Harness::new();
    let net = h.net;
    let mut mismatch = Parts::of(&victim(&h).build().unwrap().envelope);
    mismatch.action.chaincode_id =
        Some(ChaincodeId { name: PRIVATE.into(), version: "1.0".into(), path: String::new() });
    let bad = [
        TxBuilder::new(net).chaincode("undefined", "1.0").write("undefined", "victim", "x").build().unwrap().envelope,
        // Invoking a defined chaincode but writing to an undefined namespace.
        victim(&h).write("undefined", "k", "x").build().unwrap().envelope,
        mismatch.assemble(net.client(0), &[net.peer(0), net.peer(1)]),
        victim(&h).chaincode(CC, "").build().unwrap().envelope,
    ];
    expect_code(&mut h, &bad, Code::InvalidChaincode);
}

#[test]
fn invalid_other_reason_for_non_envelopes_foreign_events_and_missing_chaincode_ids() {
    let mut h = Harness::new();
    let net = h.net;
    let endorsers = [net.peer(0), net.peer(1)];
    let mut foreign_event = Parts::of(&victim(&h).chaincode_event("moved", b"{}").build().unwrap().envelope);
    let mut event = ChaincodeEvent::decode(foreign_event.action.events.clone()).unwrap();
    event.chaincode_id = PRIVATE.into();
    foreign_event.action.events = Bytes::from(event.encode_to_vec());
    let mut no_cc_id = Parts::of(&victim(&h).build().unwrap().envelope);
    no_cc_id.channel_header.extension = Bytes::from(ChaincodeHeaderExtension { chaincode_id: None }.encode_to_vec());
    let bad = [
        Bytes::from_static(TRUNCATED),
        foreign_event.assemble(net.client(0), &endorsers),
        no_cc_id.assemble(net.client(0), &endorsers),
    ];
    expect_code(&mut h, &bad, Code::InvalidOtherReason);

    // The same event naming the invoked chaincode is fine.
    let own_event = h.tx().chaincode_event("moved", b"{}").write(CC, "evented", "ok").build().unwrap().envelope;
    assert_eq!(h.commit(&[own_event]).codes, [Code::Valid]);
}
