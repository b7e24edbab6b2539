//! The consensus types Malachite's Tendermint state machine is instantiated with ([`BftContext`]): heights are
//! block numbers, validators are the channel's consenters (`Orders.consenter_mapping`), a value is a proposed
//! Fabric block without its signatures ([`Batch`]), and a precommit's vote extension is the voter's Fabric block
//! signature (`MetadataSignature` with an `IdentifierHeader`), so a decision's extensions are the block's
//! SIGNATURES metadata.
//!
//! Consensus messages are signed with the consenter's enrollment key (the `identity` of its consenter mapping
//! entry), over bytes that name the channel, so a vote cannot be replayed on another channel.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_msp::{PublicKey, SigningIdentity};
use ferrofabric_protos::common::BlockHeader;
use ferrofabric_protoutil::block_header_bytes;
use malachitebft_core_types::{
    self as mt, NilOrVal, Round, SignedMessage, SigningProvider, ValidatorSet as _, VoteType, VotingPower,
};
use sha2::{Digest as _, Sha256};

/// The Malachite context of one channel.
#[derive(Clone, Debug)]
pub(crate) struct BftContext;

/// A consenter's id (`Consenter.id` of the channel's consenter mapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ConsenterId(pub(crate) u32);

impl fmt::Display for ConsenterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl mt::Address for ConsenterId {}

/// A height: the number of the block being decided.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct BlockNumber(pub(crate) u64);

impl fmt::Display for BlockNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl mt::Height for BlockNumber {
    const ZERO: Self = BlockNumber(0);
    const INITIAL: Self = BlockNumber(1);

    fn increment_by(&self, n: u64) -> Self {
        BlockNumber(self.0.saturating_add(n))
    }

    fn decrement_by(&self, n: u64) -> Option<Self> {
        self.0.checked_sub(n).map(BlockNumber)
    }

    fn as_u64(&self) -> u64 {
        self.0
    }
}

/// A value's id: SHA-256 over the block header's DER bytes and the SIGNATURES metadata value, everything a
/// consenter's block signature covers besides its own identifier header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct BatchId(pub(crate) [u8; 32]);

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", hex::encode(&self.0[..8]))
    }
}

/// A proposed block without signatures: header, the envelopes (their original bytes) and the SIGNATURES metadata
/// value (`OrdererBlockMetadata{last_config, consenter_metadata}`) every consenter signs.
#[derive(Clone, Debug)]
pub(crate) struct Batch {
    pub(crate) header: BlockHeader,
    pub(crate) envelopes: Vec<Bytes>,
    pub(crate) metadata_value: Bytes,
    id: BatchId,
}

impl Batch {
    /// The batch, with its id computed from `header` and `metadata_value`.
    pub(crate) fn new(header: BlockHeader, envelopes: Vec<Bytes>, metadata_value: Bytes) -> Batch {
        let mut h = Sha256::new();
        h.update(block_header_bytes(&header));
        h.update(&metadata_value);
        let id = BatchId(h.finalize().into());
        Batch { header, envelopes, metadata_value, id }
    }

    /// The block number.
    pub(crate) fn number(&self) -> u64 {
        self.header.number
    }
}

impl PartialEq for Batch {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for Batch {}

impl PartialOrd for Batch {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Batch {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.id.cmp(&other.id)
    }
}

impl mt::Value for Batch {
    type Id = BatchId;

    fn id(&self) -> BatchId {
        self.id
    }
}

/// A proposal: the proposer's batch for `(height, round)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BftProposal {
    pub(crate) height: BlockNumber,
    pub(crate) round: Round,
    pub(crate) value: Batch,
    pub(crate) pol_round: Round,
    pub(crate) proposer: ConsenterId,
}

impl mt::Proposal<BftContext> for BftProposal {
    fn height(&self) -> BlockNumber {
        self.height
    }
    fn round(&self) -> Round {
        self.round
    }
    fn value(&self) -> &Batch {
        &self.value
    }
    fn take_value(self) -> Batch {
        self.value
    }
    fn pol_round(&self) -> Round {
        self.pol_round
    }
    fn validator_address(&self) -> &ConsenterId {
        &self.proposer
    }
}

/// Proposals travel whole (`ValuePayload::ProposalOnly`): there are no parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NoParts;

impl mt::ProposalPart<BftContext> for NoParts {
    fn is_first(&self) -> bool {
        true
    }
    fn is_last(&self) -> bool {
        true
    }
}

/// A prevote or precommit; a precommit for a value carries the voter's block signature as extension.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct BftVote {
    pub(crate) height: BlockNumber,
    pub(crate) round: Round,
    pub(crate) kind: VoteType,
    pub(crate) value: NilOrVal<BatchId>,
    pub(crate) voter: ConsenterId,
    pub(crate) extension: Option<SignedMessage<BftContext, Bytes>>,
}

impl mt::Vote<BftContext> for BftVote {
    fn height(&self) -> BlockNumber {
        self.height
    }
    fn round(&self) -> Round {
        self.round
    }
    fn value(&self) -> &NilOrVal<BatchId> {
        &self.value
    }
    fn take_value(self) -> NilOrVal<BatchId> {
        self.value
    }
    fn vote_type(&self) -> VoteType {
        self.kind
    }
    fn validator_address(&self) -> &ConsenterId {
        &self.voter
    }
    fn extension(&self) -> Option<&SignedMessage<BftContext, Bytes>> {
        self.extension.as_ref()
    }
    fn take_extension(&mut self) -> Option<SignedMessage<BftContext, Bytes>> {
        self.extension.take()
    }
    fn extend(self, extension: SignedMessage<BftContext, Bytes>) -> Self {
        BftVote { extension: Some(extension), ..self }
    }
}

/// A consenter's public key (from its enrollment certificate).
#[derive(Clone, Debug)]
pub(crate) struct ConsenterKey(pub(crate) Arc<PublicKey>);

impl PartialEq for ConsenterKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.sec1_bytes() == other.0.sec1_bytes()
    }
}

impl Eq for ConsenterKey {}

/// Fabric's signatures: DER ECDSA P-256 over SHA-256 of the message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct EcdsaScheme;

impl mt::SigningScheme for EcdsaScheme {
    type DecodingError = std::convert::Infallible;
    type Signature = Bytes;
    type PublicKey = ConsenterKey;
    type PrivateKey = ();

    fn decode_signature(bytes: &[u8]) -> Result<Bytes, Self::DecodingError> {
        Ok(Bytes::copy_from_slice(bytes))
    }

    fn encode_signature(signature: &Bytes) -> Vec<u8> {
        signature.to_vec()
    }
}

/// One consenter of the channel, with voting power 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Consenter {
    pub(crate) id: ConsenterId,
    pub(crate) key: ConsenterKey,
}

impl mt::Validator<BftContext> for Consenter {
    fn address(&self) -> &ConsenterId {
        &self.id
    }
    fn public_key(&self) -> &ConsenterKey {
        &self.key
    }
    fn voting_power(&self) -> VotingPower {
        1
    }
}

/// The channel's consenters, ordered by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Consenters(pub(crate) Vec<Consenter>);

impl Consenters {
    /// The set of `consenters`, sorted by id, duplicates dropped.
    pub(crate) fn new(mut consenters: Vec<Consenter>) -> Consenters {
        consenters.sort_by_key(|c| c.id);
        consenters.dedup_by_key(|c| c.id);
        Consenters(consenters)
    }
}

impl mt::ValidatorSet<BftContext> for Consenters {
    fn count(&self) -> usize {
        self.0.len()
    }
    fn total_voting_power(&self) -> VotingPower {
        self.0.len() as u64
    }
    fn get_by_address(&self, address: &ConsenterId) -> Option<&Consenter> {
        self.0.iter().find(|c| c.id == *address)
    }
    fn get_by_index(&self, index: usize) -> Option<&Consenter> {
        self.0.get(index)
    }
}

impl mt::Context for BftContext {
    type Address = ConsenterId;
    type Height = BlockNumber;
    type ProposalPart = NoParts;
    type Proposal = BftProposal;
    type Validator = Consenter;
    type ValidatorSet = Consenters;
    type Value = Batch;
    type Vote = BftVote;
    type Extension = Bytes;
    type SigningScheme = EcdsaScheme;

    /// Round robin over the consenters by `height + round`: each height starts with another proposer, and a
    /// proposer that does not propose in time is replaced in the next round.
    fn select_proposer<'a>(&self, set: &'a Consenters, height: BlockNumber, round: Round) -> &'a Consenter {
        let n = set.count().max(1) as u64;
        let r = u64::try_from(round.as_i64()).unwrap_or(0);
        let index = (height.0.wrapping_add(r) % n) as usize;
        // The set is never empty: a channel without consenters is refused when the chain starts.
        &set.0[index.min(set.0.len().saturating_sub(1))]
    }

    fn new_proposal(
        &self,
        height: BlockNumber,
        round: Round,
        value: Batch,
        pol_round: Round,
        proposer: ConsenterId,
    ) -> BftProposal {
        BftProposal { height, round, value, pol_round, proposer }
    }

    fn new_prevote(&self, height: BlockNumber, round: Round, value: NilOrVal<BatchId>, voter: ConsenterId) -> BftVote {
        BftVote { height, round, kind: VoteType::Prevote, value, voter, extension: None }
    }

    fn new_precommit(
        &self,
        height: BlockNumber,
        round: Round,
        value: NilOrVal<BatchId>,
        voter: ConsenterId,
    ) -> BftVote {
        BftVote { height, round, kind: VoteType::Precommit, value, voter, extension: None }
    }
}

/// Signs and verifies consensus messages of one channel with the node's signing identity.
pub(crate) struct Signer {
    channel: String,
    identity: Arc<SigningIdentity>,
}

impl Signer {
    pub(crate) fn new(channel: &str, identity: Arc<SigningIdentity>) -> Signer {
        Signer { channel: channel.to_owned(), identity }
    }

    /// What a vote's signature covers: the channel, kind, height, round, value id and voter; never the
    /// extension, because commit certificates keep only the bare vote's signature.
    fn vote_bytes(&self, v: &BftVote) -> Vec<u8> {
        let mut out = b"ferrofabric-bft-vote\0".to_vec();
        out.extend_from_slice(self.channel.as_bytes());
        out.push(0);
        out.push(match v.kind {
            VoteType::Prevote => 1,
            VoteType::Precommit => 2,
        });
        out.extend_from_slice(&v.height.0.to_be_bytes());
        out.extend_from_slice(&v.round.as_i64().to_be_bytes());
        match &v.value {
            NilOrVal::Nil => out.push(0),
            NilOrVal::Val(id) => {
                out.push(1);
                out.extend_from_slice(&id.0);
            }
        }
        out.extend_from_slice(&v.voter.0.to_be_bytes());
        out
    }

    /// What a proposal's signature covers: the channel, height, round, POL round, value id and proposer.
    fn proposal_bytes(&self, p: &BftProposal) -> Vec<u8> {
        let mut out = b"ferrofabric-bft-proposal\0".to_vec();
        out.extend_from_slice(self.channel.as_bytes());
        out.push(0);
        out.extend_from_slice(&p.height.0.to_be_bytes());
        out.extend_from_slice(&p.round.as_i64().to_be_bytes());
        out.extend_from_slice(&p.pol_round.as_i64().to_be_bytes());
        out.extend_from_slice(&p.value.id.0);
        out.extend_from_slice(&p.proposer.0.to_be_bytes());
        out
    }

    fn sign(&self, msg: &[u8]) -> Bytes {
        Bytes::from(self.identity.sign(msg))
    }

    fn verify(key: &ConsenterKey, msg: &[u8], signature: &Bytes) -> bool {
        key.0.verify(msg, signature).is_ok()
    }
}

impl SigningProvider<BftContext> for Signer {
    fn sign_vote(&self, vote: BftVote) -> SignedMessage<BftContext, BftVote> {
        let signature = self.sign(&self.vote_bytes(&vote));
        SignedMessage::new(vote, signature)
    }

    fn verify_signed_vote(&self, vote: &BftVote, signature: &Bytes, key: &ConsenterKey) -> bool {
        Self::verify(key, &self.vote_bytes(vote), signature)
    }

    fn sign_proposal(&self, proposal: BftProposal) -> SignedMessage<BftContext, BftProposal> {
        let signature = self.sign(&self.proposal_bytes(&proposal));
        SignedMessage::new(proposal, signature)
    }

    fn verify_signed_proposal(&self, proposal: &BftProposal, signature: &Bytes, key: &ConsenterKey) -> bool {
        Self::verify(key, &self.proposal_bytes(proposal), signature)
    }

    fn sign_proposal_part(&self, part: NoParts) -> SignedMessage<BftContext, NoParts> {
        SignedMessage::new(part, Bytes::new())
    }

    fn verify_signed_proposal_part(&self, _: &NoParts, _: &Bytes, _: &ConsenterKey) -> bool {
        false
    }

    /// The extension is a Fabric block signature, which carries its own signature: no second one.
    fn sign_vote_extension(&self, extension: Bytes) -> SignedMessage<BftContext, Bytes> {
        SignedMessage::new(extension, Bytes::new())
    }

    /// Checked against the block by the chain (it needs the proposed header), not here.
    fn verify_signed_vote_extension(&self, _: &Bytes, _: &Bytes, _: &ConsenterKey) -> bool {
        true
    }
}

/// The id the consensus engine knows a block by (Malachite's `Value::id`).
pub(crate) fn mt_id(b: &Batch) -> BatchId {
    malachitebft_core_types::Value::id(b)
}
