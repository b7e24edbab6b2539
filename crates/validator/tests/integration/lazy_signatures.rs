//! Lazy signature evaluation versus Fabric's verify-all: on the endorsements of real testkit transactions, evaluated
//! under the channel's `/Channel/Application/Endorsement` (MAJORITY of the orgs' `OR('OrgNMSP.peer')`), the lazy set
//! the validator uses verifies at most as many signatures as Fabric's `SignatureSetToValidIdentities` pass, strictly
//! fewer whenever an endorsement is not needed, and always reaches the same verdict; the validator's codes for the
//! same transactions agree with the verify-all verdicts.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::support::*;
use bytes::Bytes;
use ferrofabric_arena::TxArena;
use ferrofabric_channelconfig::{ChannelConfig, SignatureSet, SignedData};
use ferrofabric_protos::common::Block;
use ferrofabric_testkit::SigningIdentity;
use ferrofabric_validator::TxValidationCode as Code;
use prost::Message;

/// The endorsements of an envelope as signed items: `proposal_response_payload ‖ endorser`.
fn endorsement_items(envelope: &Bytes) -> Vec<SignedData> {
    let tx = TxArena::new(envelope.clone());
    let action = tx.action().unwrap().payload.action.as_ref().unwrap();
    let prp = &action.proposal_response_payload;
    action
        .endorsements
        .iter()
        .map(|e| SignedData {
            data: Bytes::from([prp.as_ref(), e.endorser.as_ref()].concat()),
            identity: e.endorser.clone(),
            signature: e.signature.clone(),
        })
        .collect()
}

struct Case {
    name: &'static str,
    endorsers: Vec<&'static SigningIdentity>,
    corrupt: Option<usize>,
    satisfied: bool,
    /// (lazy, verify-all) signature verifications.
    verifications: (usize, usize),
}

#[test]
fn lazy_evaluation_verifies_fewer_signatures_with_the_same_verdicts() {
    let mut h = Harness::new();
    let net = h.net;
    let config = ChannelConfig::from_config_block(&Block::decode(net.genesis_block()).unwrap()).unwrap();
    let (p0, p1) = (net.peer(0), net.peer(1));
    let cases = [
        Case { name: "both peers", endorsers: vec![p0, p1], corrupt: None, satisfied: true, verifications: (2, 2) },
        Case {
            name: "three endorsements, two suffice",
            endorsers: vec![p0, p1, net.admin(0)],
            corrupt: None,
            satisfied: true,
            verifications: (2, 3),
        },
        Case {
            name: "an unneeded client endorsement first",
            endorsers: vec![net.client(0), p0, p1],
            corrupt: None,
            satisfied: true,
            verifications: (2, 3),
        },
        Case {
            name: "a bad signature nobody needs",
            endorsers: vec![p0, p1, net.admin(1)],
            corrupt: Some(2),
            satisfied: true,
            verifications: (2, 3),
        },
        // Verify-all skips the repeat of an identity it already accepted, without verifying it.
        Case {
            name: "the same peer twice",
            endorsers: vec![p0, p0, p1],
            corrupt: None,
            satisfied: true,
            verifications: (2, 2),
        },
        Case { name: "one org only", endorsers: vec![p0], corrupt: None, satisfied: false, verifications: (1, 1) },
        Case {
            name: "the needed signature is bad",
            endorsers: vec![p0, p1, net.admin(0)],
            corrupt: Some(1),
            satisfied: false,
            verifications: (2, 3),
        },
    ];
    let policy = config.policy("/Channel/Application/Endorsement").unwrap();
    let mut envelopes = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let mut b = h.tx().endorsers(&case.endorsers).write(CC, &format!("lazy{i}"), "x");
        if let Some(c) = case.corrupt {
            b = b.corrupt_endorsement(c);
        }
        let envelope = b.build().unwrap().envelope;
        let items = endorsement_items(&envelope);
        let lazy = SignatureSet::new(items.clone(), config.msp_manager());
        let eager = SignatureSet::new_verify_all(items, config.msp_manager());
        let (lazy_ok, eager_ok) = (policy.evaluate(&lazy).is_ok(), policy.evaluate(&eager).is_ok());
        assert_eq!((lazy_ok, eager_ok), (case.satisfied, case.satisfied), "{}", case.name);
        assert_eq!((lazy.verifications(), eager.verifications()), case.verifications, "{}", case.name);
        envelopes.push(envelope);
    }
    let total_lazy: usize = cases.iter().map(|c| c.verifications.0).sum();
    let total_eager: usize = cases.iter().map(|c| c.verifications.1).sum();
    assert!(total_lazy < total_eager);

    // ANY Readers is met by the first org whose rule holds: Org2's signature is never looked at.
    let readers = config.policy("/Channel/Application/Readers").unwrap();
    let items = endorsement_items(&envelopes[0]);
    let lazy = SignatureSet::new(items.clone(), config.msp_manager());
    let eager = SignatureSet::new_verify_all(items, config.msp_manager());
    assert!(readers.evaluate(&lazy).is_ok() && readers.evaluate(&eager).is_ok());
    assert_eq!((lazy.verifications(), eager.verifications()), (1, 2));

    // The validator (lazy inside) reaches the verify-all verdicts on the same transactions.
    let r = h.commit(&envelopes);
    let want: Vec<Code> =
        cases.iter().map(|c| if c.satisfied { Code::Valid } else { Code::EndorsementPolicyFailure }).collect();
    assert_eq!(r.codes, want);
}
