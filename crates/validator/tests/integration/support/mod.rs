//! Shared harness of the validator's integration tests: a generated network, a chain whose block 1 defines the
//! test chaincodes through `_lifecycle`, a validator fed block by block, and helpers that re-assemble and re-sign
//! the layers of a testkit transaction so that one layer can be made malformed while everything around it stays
//! correctly signed.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use bytes::Bytes;
use ferrofabric_protos::common::{
    msp_principal, msp_role, signature_policy, Block, BlockHeader, ChannelHeader, Envelope, MspPrincipal, MspRole,
    Payload, SignatureHeader, SignaturePolicy, SignaturePolicyEnvelope,
};
use ferrofabric_protos::peer::{
    application_policy, collection_config, collection_policy_config, ApplicationPolicy, ChaincodeAction,
    ChaincodeActionPayload, ChaincodeEndorsedAction, CollectionConfig, CollectionConfigPackage, CollectionPolicyConfig,
    Endorsement, ProposalResponsePayload, StaticCollectionConfig, Transaction, TransactionAction,
};
use ferrofabric_state::{StateKey, Update, VersionedValue};
use ferrofabric_testkit::{
    channel_policy_reference, commit_definition, BlockBuilder, ChaincodeDefinition, Network, SigningIdentity,
    TxBuilder, DEFAULT_ENDORSEMENT_POLICY,
};
use ferrofabric_validator::{BlockResult, TxValidationCode as Code, Validator, ValidatorError, ValidatorOptions};
use prost::Message;
use sha2::{Digest, Sha256};

/// Chaincode defined with the channel's `/Channel/Application/Endorsement` (MAJORITY of the orgs' `Endorsement`
/// policies, i.e. both peers).
pub(crate) const CC: &str = "transfer";
/// Chaincode defined with `OR(Org1MSP.peer, Org2MSP.peer)` and two static collections.
pub(crate) const PRIVATE: &str = "private";
/// Collection of [`PRIVATE`] whose own endorsement policy is `Org2MSP.peer`.
pub(crate) const ORG2_ONLY: &str = "org2only";
/// Collection of [`PRIVATE`] without an endorsement policy of its own (the chaincode's applies).
pub(crate) const SHARED: &str = "shared";
/// Versions of the two definitions committed in block 1.
pub(crate) const CC_DEFINITION: (u64, u64) = (1, 0);
pub(crate) const PRIVATE_DEFINITION: (u64, u64) = (1, 1);

/// One network per test binary (certificate generation is the slow part).
pub(crate) fn network() -> &'static Network {
    static NET: OnceLock<Network> = OnceLock::new();
    NET.get_or_init(|| Network::generate(7).unwrap())
}

/// `MSPRole{mspid, role}` as a principal.
pub(crate) fn role(mspid: &str, role: msp_role::MspRoleType) -> MspPrincipal {
    MspPrincipal {
        principal_classification: msp_principal::Classification::Role as i32,
        principal: Bytes::from(MspRole { msp_identifier: mspid.to_owned(), role: role as i32 }.encode_to_vec()),
    }
}

/// `n` out of the peers of `mspids`, as a SignaturePolicyEnvelope (what `policydsl` builds and what a key's
/// `VALIDATION_PARAMETER` holds).
pub(crate) fn peers_policy(n: i32, mspids: &[&str]) -> SignaturePolicyEnvelope {
    SignaturePolicyEnvelope {
        version: 0,
        rule: Some(SignaturePolicy {
            r#type: Some(signature_policy::Type::NOutOf(signature_policy::NOutOf {
                n,
                rules: (0..mspids.len() as i32)
                    .map(|i| SignaturePolicy { r#type: Some(signature_policy::Type::SignedBy(i)) })
                    .collect(),
            })),
        }),
        identities: mspids.iter().map(|m| role(m, msp_role::MspRoleType::Peer)).collect(),
    }
}

/// A signature policy as a chaincode / collection endorsement policy.
pub(crate) fn application_policy(env: SignaturePolicyEnvelope) -> ApplicationPolicy {
    ApplicationPolicy { r#type: Some(application_policy::Type::SignaturePolicy(env)) }
}

fn static_collection(name: &str, endorsement: Option<ApplicationPolicy>) -> CollectionConfig {
    let members = peers_policy(1, &["Org1MSP", "Org2MSP"]);
    CollectionConfig {
        payload: Some(collection_config::Payload::StaticCollectionConfig(StaticCollectionConfig {
            name: name.to_owned(),
            member_orgs_policy: Some(CollectionPolicyConfig {
                payload: Some(collection_policy_config::Payload::SignaturePolicy(members)),
            }),
            required_peer_count: 0,
            maximum_peer_count: 1,
            block_to_live: 0,
            member_only_read: false,
            member_only_write: false,
            endorsement_policy: endorsement,
        })),
    }
}

/// The two `_lifecycle` commits of block 1: [`CC`] and [`PRIVATE`].
pub(crate) fn definitions(net: &Network) -> Vec<Bytes> {
    let transfer = ChaincodeDefinition::new(CC, 1, channel_policy_reference(DEFAULT_ENDORSEMENT_POLICY));
    let mut private =
        ChaincodeDefinition::new(PRIVATE, 1, application_policy(peers_policy(1, &["Org1MSP", "Org2MSP"])));
    private.collections = CollectionConfigPackage {
        config: vec![
            static_collection(ORG2_ONLY, Some(application_policy(peers_policy(1, &["Org2MSP"])))),
            static_collection(SHARED, None),
        ],
    };
    vec![commit_definition(net, &transfer).unwrap().envelope, commit_definition(net, &private).unwrap().envelope]
}

/// A validator following a chain of orderer-signed blocks.
pub(crate) struct Harness {
    pub net: &'static Network,
    pub validator: Validator,
    /// Header of the last block the validator accepted: the next block chains to it.
    last: BlockHeader,
}

impl Harness {
    /// Genesis, then block 1 with the [`definitions`] (checked VALID).
    pub(crate) fn new() -> Harness {
        Harness::with_threads(2)
    }

    /// [`Harness::new`] with a given validation pool size.
    pub(crate) fn with_threads(threads: usize) -> Harness {
        let net = network();
        let validator = Validator::new(net.genesis_block(), ValidatorOptions { threads }).unwrap();
        let last = Block::decode(net.genesis_block()).unwrap().header.unwrap();
        let mut h = Harness { net, validator, last };
        let r = h.commit(&definitions(net));
        assert_eq!(r.codes, [Code::Valid, Code::Valid], "chaincode definitions");
        h
    }

    /// Number of the next block.
    pub(crate) fn next_block(&self) -> u64 {
        self.validator.last_block_number() + 1
    }

    /// Cuts the next orderer-signed block from `envelopes` (marshaled `common.Block`), without committing it.
    pub(crate) fn cut(&self, envelopes: &[Bytes]) -> Bytes {
        BlockBuilder::new(self.net.orderer(), Some(&self.last)).build_bytes(envelopes)
    }

    /// Commits a block cut by [`Harness::cut`]; the chain advances only if the validator accepts it.
    pub(crate) fn commit_raw(&mut self, raw: Bytes) -> Result<BlockResult, ValidatorError> {
        let header = Block::decode(raw.clone()).unwrap().header.unwrap();
        let result = self.validator.commit_block(raw)?;
        self.last = header;
        Ok(result)
    }

    /// Commits a block cut by [`Harness::cut`] with a verifier's attested codes
    /// ([`Validator::commit_block_attested`]); the chain advances only if the validator accepts it.
    pub(crate) fn commit_raw_attested(&mut self, raw: Bytes, attested: &[Code]) -> Result<BlockResult, ValidatorError> {
        let header = Block::decode(raw.clone()).unwrap().header.unwrap();
        let result = self.validator.commit_block_attested(raw, attested)?;
        self.last = header;
        Ok(result)
    }

    /// Cuts and commits the next block; the block must be accepted. Checks, for every block, that only VALID
    /// transactions changed the state: every key whose value, metadata or version changed (or that disappeared)
    /// was updated by a transaction of this block whose code is VALID.
    pub(crate) fn commit(&mut self, envelopes: &[Bytes]) -> BlockResult {
        let raw = self.cut(envelopes);
        let before = self.snapshot();
        let result = self.commit_raw(raw).unwrap();
        let after = self.snapshot();
        assert_eq!(result.codes.len(), envelopes.len());
        let valid_at = |h: ferrofabric_state::Height| {
            h.block_num == result.number && result.codes.get(h.tx_num as usize) == Some(&Code::Valid)
        };
        for (key, update) in result.updates.iter() {
            assert!(valid_at(update.version()), "update of {key:?} at {} by a tx that is not VALID", update.version());
        }
        for (key, new) in &after {
            if before.get(key) != Some(new) {
                assert!(valid_at(new.version), "{key:?} changed by tx {} ({:?})", new.version, result.codes);
            }
        }
        for key in before.keys().filter(|k| !after.contains_key(*k)) {
            match result.updates.get(key) {
                Some(Update::Delete(h)) => assert!(valid_at(*h), "{key:?} deleted by a tx that is not VALID"),
                other => panic!("{key:?} vanished without a delete: {other:?}"),
            }
        }
        result
    }

    /// Cuts the next block and returns what the validator says, without the state checks of [`Harness::commit`].
    pub(crate) fn try_commit(&mut self, envelopes: &[Bytes]) -> Result<BlockResult, ValidatorError> {
        let raw = self.cut(envelopes);
        self.commit_raw(raw)
    }

    fn snapshot(&self) -> BTreeMap<StateKey, VersionedValue> {
        self.validator.state().view().entries().into_iter().collect()
    }

    /// The committed public value of `key` in `ns`.
    pub(crate) fn get(&self, ns: &str, key: &str) -> Option<VersionedValue> {
        self.validator.state().view().get(&StateKey::public(ns, key.to_owned()))
    }

    /// The committed version `(block, tx)` of public `key` in `ns`.
    pub(crate) fn version(&self, ns: &str, key: &str) -> Option<(u64, u64)> {
        self.get(ns, key).map(|v| (v.version.block_num, v.version.tx_num))
    }

    /// The committed version of private `key` of `coll` (hashed state).
    pub(crate) fn hashed_version(&self, ns: &str, coll: &str, key: &str) -> Option<(u64, u64)> {
        let kh = Bytes::copy_from_slice(&Sha256::digest(key.as_bytes()));
        self.validator
            .state()
            .view()
            .get(&StateKey::hashed(ns, coll, kh))
            .map(|v| (v.version.block_num, v.version.tx_num))
    }

    /// A [`CC`] invocation by User1@org1, endorsed by both peers, with the `_lifecycle` definition read.
    pub(crate) fn tx(&self) -> TxBuilder<'static> {
        TxBuilder::new(self.net).chaincode(CC, "1.0").lifecycle_read(Some(CC_DEFINITION))
    }

    /// A [`PRIVATE`] invocation, endorsed by both peers.
    pub(crate) fn private_tx(&self) -> TxBuilder<'static> {
        TxBuilder::new(self.net).chaincode(PRIVATE, "1.0").lifecycle_read(Some(PRIVATE_DEFINITION))
    }

    /// Commits one VALID transaction writing `value-of-<key>` to each of `keys` in [`CC`].
    pub(crate) fn seed(&mut self, keys: &[&str]) {
        let mut b = self.tx();
        for k in keys {
            b = b.write(CC, k, format!("value-of-{k}"));
        }
        let r = self.commit(&[b.build().unwrap().envelope]);
        assert_eq!(r.codes, [Code::Valid], "seeding {keys:?}");
    }
}

/// The layers of an endorser transaction that the tests tamper with. [`Parts::assemble`] rebuilds the envelope
/// the way `protoutil.CreateSignedTx` does: proposal hash over (channel header ‖ signature header ‖ proposal
/// payload), fresh endorsements over the response payload, creator signature over the payload.
#[derive(Clone, Debug)]
pub(crate) struct Parts {
    pub channel_header: ChannelHeader,
    pub signature_header: SignatureHeader,
    pub proposal_payload: Bytes,
    pub action: ChaincodeAction,
    /// Replaces `ProposalResponsePayload.extension` (otherwise the encoded `action`).
    pub raw_extension: Option<Bytes>,
}

impl Parts {
    /// Splits a well-formed testkit envelope.
    pub(crate) fn of(envelope: &Bytes) -> Parts {
        let env = Envelope::decode(envelope.clone()).unwrap();
        let payload = Payload::decode(env.payload).unwrap();
        let header = payload.header.unwrap();
        let tx = Transaction::decode(payload.data).unwrap();
        let cap = ChaincodeActionPayload::decode(tx.actions[0].payload.clone()).unwrap();
        let prp = ProposalResponsePayload::decode(cap.action.unwrap().proposal_response_payload).unwrap();
        Parts {
            channel_header: ChannelHeader::decode(header.channel_header).unwrap(),
            signature_header: SignatureHeader::decode(header.signature_header).unwrap(),
            proposal_payload: cap.chaincode_proposal_payload,
            action: ChaincodeAction::decode(prp.extension).unwrap(),
            raw_extension: None,
        }
    }

    /// Re-assembles and re-signs the transaction.
    pub(crate) fn assemble(&self, creator: &SigningIdentity, endorsers: &[&SigningIdentity]) -> Bytes {
        let ch = Bytes::from(self.channel_header.encode_to_vec());
        let sh = Bytes::from(self.signature_header.encode_to_vec());
        let mut hash = Sha256::new();
        hash.update(&ch);
        hash.update(&sh);
        hash.update(&self.proposal_payload);
        let extension = self.raw_extension.clone().unwrap_or_else(|| Bytes::from(self.action.encode_to_vec()));
        let prp = Bytes::from(
            ProposalResponsePayload { proposal_hash: Bytes::copy_from_slice(&hash.finalize()), extension }
                .encode_to_vec(),
        );
        let endorsements = endorsers
            .iter()
            .map(|e| Endorsement {
                endorser: e.serialized().clone(),
                signature: Bytes::from(e.sign(&[prp.as_ref(), e.serialized().as_ref()].concat())),
            })
            .collect();
        let cap = ChaincodeActionPayload {
            chaincode_proposal_payload: self.proposal_payload.clone(),
            action: Some(ChaincodeEndorsedAction { proposal_response_payload: prp, endorsements }),
        };
        let tx = Transaction {
            actions: vec![TransactionAction { header: sh.clone(), payload: Bytes::from(cap.encode_to_vec()) }],
        };
        let payload = Payload {
            header: Some(ferrofabric_protos::common::Header { channel_header: ch, signature_header: sh }),
            data: Bytes::from(tx.encode_to_vec()),
        };
        sign_payload(creator, Bytes::from(payload.encode_to_vec()))
    }
}

/// `Envelope{payload, signature = creator's signature over payload}`, marshaled.
pub(crate) fn sign_payload(creator: &SigningIdentity, payload: Bytes) -> Bytes {
    let signature = Bytes::from(creator.sign(&payload));
    Bytes::from(Envelope { payload, signature }.encode_to_vec())
}

/// Decodes the envelope's `Payload`, lets `f` change it, and has `creator` sign the result.
pub(crate) fn resign_payload(envelope: &Bytes, creator: &SigningIdentity, f: impl FnOnce(&mut Payload)) -> Bytes {
    let env = Envelope::decode(envelope.clone()).unwrap();
    let mut payload = Payload::decode(env.payload).unwrap();
    f(&mut payload);
    sign_payload(creator, Bytes::from(payload.encode_to_vec()))
}

/// Bytes that neither Go's protobuf nor prost decode as any message: field 1 (length-delimited) announcing five
/// bytes with only one present.
pub(crate) const TRUNCATED: &[u8] = &[0x0a, 0x05, 0x01];

/// User1@org1 of another generated network, presented under MSP ID `mspid` (loaded from the MSP directory that
/// network writes, as a client would).
pub(crate) fn foreign_client(mspid: &str) -> SigningIdentity {
    let other = Network::generate(99).unwrap();
    let dir = tempfile::tempdir().unwrap();
    other.write_msp_dirs(dir.path()).unwrap();
    let msp = dir.path().join("peerOrganizations/org1.example.com/users/User1@org1.example.com/msp");
    SigningIdentity::from_msp_dir(mspid, &msp).unwrap()
}
