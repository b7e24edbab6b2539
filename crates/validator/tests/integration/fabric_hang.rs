//! The Fabric 2.5.16 stall. Before evaluating a written key, the built-in VSCC waits until the key-level
//! validation-parameter dependencies of every earlier transaction of the block have been extracted; for an
//! ENDORSER_TRANSACTION whose payload data is not a Transaction the extraction gives up without signalling, so every
//! later transaction that reaches VSCC waits forever and the peer stops committing
//! (`core/common/validation/statebased/validator_keylevel.go` `extractDependenciesForTx`, `vpmanagerimpl.go`
//! `GetValidationParameterForKey`). The fixture ledger therefore keeps such a transaction last in its block.
//! Ferrofabric resolves those dependencies in block order after the parallel stage, so nothing waits.
//!
//! The same extraction indexes the first action of every earlier transaction without checking that there is one, so
//! by our reading of that file a Transaction with no actions (INVALID_ENDORSER_TRANSACTION) followed by a transaction
//! that reaches VSCC makes the v2.5.16 peer panic; here it is just a code.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::mpsc;
use std::time::Duration;

use crate::support::*;
use bytes::Bytes;
use ferrofabric_validator::TxValidationCode as Code;

fn stalls_fabric_but_not_us(threads: usize) {
    let mut h = Harness::with_threads(threads);
    h.seed(&["a", "b"]);
    let (a, b) = (h.version(CC, "a"), h.version(CC, "b"));
    let unparseable =
        h.tx().write(CC, "victim", "x").payload_data(Bytes::from_static(TRUNCATED)).build().unwrap().envelope;
    let vp = peers_policy(1, &["Org1MSP"]);
    let envs = [
        unparseable,
        h.tx().read(CC, "a", a).write(CC, "a", "1").build().unwrap().envelope,
        h.tx().read(CC, "b", b).write(CC, "b", "2").build().unwrap().envelope,
        h.tx().write(CC, "c", "3").build().unwrap().envelope,
        h.tx()
            .metadata_write(CC, "c", &[("VALIDATION_PARAMETER", &prost::Message::encode_to_vec(&vp))])
            .build()
            .unwrap()
            .envelope,
    ];
    let raw = h.cut(&envs);
    let (tx, rx) = mpsc::channel();
    let mut validator = h.validator;
    std::thread::spawn(move || {
        let codes = validator.commit_block(raw).map(|r| r.codes).map_err(|e| e.to_string());
        let _ = tx.send((codes, validator));
    });
    let (codes, validator) = rx.recv_timeout(Duration::from_secs(30)).expect("the block did not complete in 30 s");
    assert_eq!(
        codes.unwrap(),
        [Code::InvalidEndorserTransaction, Code::Valid, Code::Valid, Code::Valid, Code::Valid],
        "threads = {threads}"
    );
    let c = validator.state().view().get(&ferrofabric_state::StateKey::public(CC, "c")).unwrap();
    assert_eq!((c.value.as_ref(), c.metadata.len()), (&b"3"[..], 1), "metadata-only write after the value write");
}

#[test]
fn a_transaction_without_actions_before_valid_ones_is_just_a_code() {
    let mut h = Harness::new();
    let user = h.net.client(0);
    let no_actions = resign_payload(&h.tx().write(CC, "victim", "x").build().unwrap().envelope, user, |p| {
        p.data = Bytes::from(prost::Message::encode_to_vec(&ferrofabric_protos::peer::Transaction { actions: vec![] }));
    });
    let r = h.commit(&[no_actions, h.tx().write(CC, "after", "1").build().unwrap().envelope]);
    assert_eq!(r.codes, [Code::InvalidEndorserTransaction, Code::Valid]);
    assert!(h.get(CC, "victim").is_none());
}

#[test]
fn an_unparseable_first_endorser_transaction_does_not_stall_the_block() {
    stalls_fabric_but_not_us(1);
    stalls_fabric_but_not_us(2);
}
