//! Real signatures of the Fabric 2.5 fixture ledger evaluated against the channel's policies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use ferrofabric_channelconfig::{PolicyError, SignatureSet, SignedData};
use sha2::{Digest, Sha256};

#[test]
fn block_header_der_matches_expected_header_hashes() {
    let blocks = support::orderer_blocks();
    let expected = support::expected();
    let exp_blocks = expected["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), exp_blocks.len());
    for (block, exp) in blocks.iter().zip(exp_blocks) {
        let der = support::block_header_der(block.header.as_ref().unwrap());
        assert_eq!(hex::encode(Sha256::digest(&der)), exp["header_hash"].as_str().unwrap());
    }
}

#[test]
fn orderer_signatures_satisfy_block_validation() {
    let cc = support::channel_config();
    let policy = cc.policy("/Channel/Orderer/BlockValidation").unwrap();
    let blocks = support::orderer_blocks();
    let expected = support::expected();
    assert_eq!(blocks.len(), 29);
    for (block, exp) in blocks.iter().zip(expected["blocks"].as_array().unwrap()) {
        let number = block.header.as_ref().unwrap().number;
        let signers = exp["signature_signers"].as_array().map_or(0, Vec::len);
        let items = support::block_signatures(block);
        assert_eq!(items.len(), signers, "block {number}");
        let set = SignatureSet::new(items, cc.msp_manager());
        let verdict = policy.evaluate(&set);
        if number == 0 {
            // configtxgen does not sign the genesis block: nothing satisfies the policy.
            assert!(verdict.is_err());
        } else {
            assert_eq!(exp["signature_verified"][0], true);
            verdict.unwrap_or_else(|e| panic!("block {number}: {e}"));
            assert_eq!(set.verifications(), 1);
        }
    }
}

#[test]
fn tampered_block_signature_fails_block_validation() {
    let cc = support::channel_config();
    let policy = cc.policy("/Channel/Orderer/BlockValidation").unwrap();
    let blocks = support::orderer_blocks();
    let mut block = blocks[9].clone();
    block.header.as_mut().unwrap().number += 1;
    let set = SignatureSet::new(support::block_signatures(&block), cc.msp_manager());
    let err = policy.evaluate(&set).unwrap_err();
    assert!(matches!(err, PolicyError::ImplicitMetaNotSatisfied { .. }), "{err:?}");
}

#[test]
fn valid_two_org_endorsements_satisfy_application_endorsement() {
    let cc = support::channel_config();
    let (b, t) = support::find_tx("VALID", &["Org2MSP", "Org1MSP"]);
    let blocks = support::orderer_blocks();
    let items = support::endorsements(&blocks[b], t);
    assert_eq!(items.len(), 2);
    for path in ["/Channel/Application/Endorsement", "/Channel/Application/LifecycleEndorsement"] {
        let policy = cc.policy(path).unwrap();
        policy.evaluate(&SignatureSet::new(items.clone(), cc.msp_manager())).unwrap();
        policy.evaluate(&SignatureSet::new_verify_all(items.clone(), cc.msp_manager())).unwrap();
    }
    // Each org's own endorsement policy is met by its peer.
    for org in ["Org1MSP", "Org2MSP"] {
        let policy = cc.policy(&format!("/Channel/Application/{org}/Endorsement")).unwrap();
        policy.evaluate(&SignatureSet::new(items.clone(), cc.msp_manager())).unwrap();
    }
}

#[test]
fn every_valid_fixture_transaction_satisfies_endorsement_policy() {
    let cc = support::channel_config();
    let policy = cc.policy("/Channel/Application/Endorsement").unwrap();
    let blocks = support::orderer_blocks();
    let expected = support::expected();
    let mut checked = 0;
    for exp_block in expected["blocks"].as_array().unwrap() {
        let number = exp_block["number"].as_u64().unwrap() as usize;
        for tx in exp_block["txs"].as_array().unwrap() {
            let two_orgs = tx["endorsers"].as_array().is_some_and(|a| a.len() == 2);
            if tx["validation_code"] != "VALID" || tx["chaincode"] == "_lifecycle" || !two_orgs {
                continue;
            }
            let idx = tx["index"].as_u64().unwrap() as usize;
            let set = SignatureSet::new(support::endorsements(&blocks[number], idx), cc.msp_manager());
            policy.evaluate(&set).unwrap_or_else(|e| panic!("block {number} tx {idx}: {e}"));
            checked += 1;
        }
    }
    assert!(checked > 600, "only {checked} transactions checked");
}

#[test]
fn single_org_endorsement_does_not_satisfy_application_endorsement() {
    let cc = support::channel_config();
    let (b, t) = support::find_tx("ENDORSEMENT_POLICY_FAILURE", &["Org1MSP"]);
    let blocks = support::orderer_blocks();
    let items = support::endorsements(&blocks[b], t);
    assert_eq!(items.len(), 1);
    let policy = cc.policy("/Channel/Application/Endorsement").unwrap();
    let set = SignatureSet::new(items.clone(), cc.msp_manager());
    let err = policy.evaluate(&set).unwrap_err();
    assert_eq!(
        err,
        PolicyError::ImplicitMetaNotSatisfied { sub_policy: "Endorsement".into(), satisfied: 1, required: 2 }
    );
    // The org's own endorsement policy is satisfied by the same signature.
    let org1 = cc.policy("/Channel/Application/Org1MSP/Endorsement").unwrap();
    org1.evaluate(&set).unwrap();
    assert_eq!(set.verifications(), 1, "the cached verification is reused");
}

#[test]
fn altered_endorsement_signature_fails_endorsement_policy() {
    // Block 18 holds a transaction endorsed by both orgs whose first endorsement signature was altered.
    let cc = support::channel_config();
    let blocks = support::orderer_blocks();
    let expected = support::expected();
    let policy = cc.policy("/Channel/Application/Endorsement").unwrap();
    let mut found = 0;
    for tx in expected["blocks"][18]["txs"].as_array().unwrap() {
        let two_orgs = tx["endorsers"].as_array().is_some_and(|a| a.len() == 2);
        if tx["validation_code"] == "ENDORSEMENT_POLICY_FAILURE" && two_orgs {
            let idx = tx["index"].as_u64().unwrap() as usize;
            let items = support::endorsements(&blocks[18], idx);
            let set = SignatureSet::new(items, cc.msp_manager());
            assert!(policy.evaluate(&set).is_err());
            found += 1;
        }
    }
    assert_eq!(found, 1);
}

#[test]
fn creator_signatures_satisfy_channel_writers() {
    let cc = support::channel_config();
    let blocks = support::orderer_blocks();
    let writers = cc.policy("/Channel/Writers").unwrap();
    let app_writers = cc.policy("/Channel/Application/Writers").unwrap();
    for tx in 0..blocks[12].data.as_ref().unwrap().data.len() {
        let items: Vec<SignedData> = vec![support::creator_signature(&blocks[12], tx)];
        let set = SignatureSet::new(items, cc.msp_manager());
        writers.evaluate(&set).unwrap();
        app_writers.evaluate(&set).unwrap();
        assert_eq!(set.verifications(), 1);
    }
}
