//! The bytes of consensus messages between consenters and in the WAL (protobuf, hand-declared with prost: these
//! are Ferrofabric's own messages, not SmartBFT's). Decoding never trusts its input: a message that does not
//! decode, or whose fields are out of range, is `None`.

use bytes::Bytes;
use ferrofabric_protos::common::BlockHeader;
use malachitebft_core_consensus::{ProposedValue, SignedConsensusMsg, WalEntry};
use malachitebft_core_types::{NilOrVal, Round, SignedMessage, Timeout, TimeoutKind, Validity, VoteType};
use prost::Message;

use crate::context::{Batch, BatchId, BftContext, BftProposal, BftVote, BlockNumber, ConsenterId};

/// A signed prevote or precommit.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WireVote {
    /// 1 prevote, 2 precommit.
    #[prost(uint32, tag = "1")]
    pub(crate) kind: u32,
    #[prost(uint64, tag = "2")]
    pub(crate) height: u64,
    #[prost(int64, tag = "3")]
    pub(crate) round: i64,
    /// The value id (32 bytes), empty for nil.
    #[prost(bytes = "bytes", tag = "4")]
    pub(crate) value: Bytes,
    #[prost(uint32, tag = "5")]
    pub(crate) voter: u32,
    #[prost(bytes = "bytes", tag = "6")]
    pub(crate) signature: Bytes,
    /// The marshaled `MetadataSignature` of a precommit, if any.
    #[prost(bytes = "bytes", optional, tag = "7")]
    pub(crate) extension: Option<Bytes>,
}

/// A signed proposal with its whole block (header, envelopes, SIGNATURES metadata value).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WireProposal {
    #[prost(uint64, tag = "1")]
    pub(crate) height: u64,
    #[prost(int64, tag = "2")]
    pub(crate) round: i64,
    #[prost(int64, tag = "3")]
    pub(crate) pol_round: i64,
    #[prost(uint32, tag = "4")]
    pub(crate) proposer: u32,
    #[prost(bytes = "bytes", tag = "5")]
    pub(crate) signature: Bytes,
    #[prost(message, optional, tag = "6")]
    pub(crate) header: Option<BlockHeader>,
    #[prost(bytes = "bytes", repeated, tag = "7")]
    pub(crate) envelopes: Vec<Bytes>,
    #[prost(bytes = "bytes", tag = "8")]
    pub(crate) metadata_value: Bytes,
}

/// A client request forwarded to the other consenters.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WireRequest {
    /// The marshaled envelope, exactly as the client sent it.
    #[prost(bytes = "bytes", tag = "1")]
    pub(crate) envelope: Bytes,
}

/// One frame of the cluster stream.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WireMessage {
    #[prost(string, tag = "1")]
    pub(crate) channel: String,
    #[prost(oneof = "WireBody", tags = "2, 3, 4")]
    pub(crate) body: Option<WireBody>,
}

/// What a frame carries.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum WireBody {
    #[prost(message, tag = "2")]
    Vote(WireVote),
    #[prost(message, tag = "3")]
    Proposal(WireProposal),
    #[prost(message, tag = "4")]
    Request(WireRequest),
}

/// The empty answer stream element (the cluster stream is one-way).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StepAck {}

/// A WAL record.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WalRecord {
    #[prost(oneof = "WalBody", tags = "1, 2, 3, 4, 5")]
    pub(crate) body: Option<WalBody>,
}

/// What a WAL record holds.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum WalBody {
    /// The height the WAL's records belong to (the first record).
    #[prost(uint64, tag = "1")]
    Height(u64),
    #[prost(message, tag = "2")]
    Vote(WireVote),
    #[prost(message, tag = "3")]
    Proposal(WireProposal),
    #[prost(message, tag = "4")]
    Timeout(WireTimeout),
    #[prost(message, tag = "5")]
    ProposedValue(WireProposedValue),
}

/// An elapsed timeout.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WireTimeout {
    #[prost(uint32, tag = "1")]
    pub(crate) kind: u32,
    #[prost(int64, tag = "2")]
    pub(crate) round: i64,
}

/// A value the state machine learnt (the proposal's block, its round, validity).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct WireProposedValue {
    /// The block as in a proposal (its signature field unused).
    #[prost(message, optional, tag = "1")]
    pub(crate) value: Option<WireProposal>,
    #[prost(int64, tag = "2")]
    pub(crate) valid_round: i64,
    #[prost(bool, tag = "3")]
    pub(crate) valid: bool,
}

fn round(r: i64) -> Option<Round> {
    match r {
        -1 => Some(Round::Nil),
        r => u32::try_from(r).ok().map(Round::new),
    }
}

pub(crate) fn encode_vote(v: &SignedMessage<BftContext, BftVote>) -> WireVote {
    WireVote {
        kind: match v.message.kind {
            VoteType::Prevote => 1,
            VoteType::Precommit => 2,
        },
        height: v.message.height.0,
        round: v.message.round.as_i64(),
        value: match &v.message.value {
            NilOrVal::Nil => Bytes::new(),
            NilOrVal::Val(id) => Bytes::copy_from_slice(&id.0),
        },
        voter: v.message.voter.0,
        signature: v.signature.clone(),
        extension: v.message.extension.as_ref().map(|e| e.message.clone()),
    }
}

pub(crate) fn decode_vote(w: WireVote) -> Option<SignedMessage<BftContext, BftVote>> {
    let kind = match w.kind {
        1 => VoteType::Prevote,
        2 => VoteType::Precommit,
        _ => return None,
    };
    let value =
        if w.value.is_empty() { NilOrVal::Nil } else { NilOrVal::Val(BatchId(w.value.as_ref().try_into().ok()?)) };
    let vote = BftVote {
        height: BlockNumber(w.height),
        round: round(w.round)?,
        kind,
        value,
        voter: ConsenterId(w.voter),
        extension: w.extension.map(|e| SignedMessage::new(e, Bytes::new())),
    };
    Some(SignedMessage::new(vote, w.signature))
}

fn encode_batch(height: u64, round: Round, pol_round: Round, proposer: ConsenterId, value: &Batch) -> WireProposal {
    WireProposal {
        height,
        round: round.as_i64(),
        pol_round: pol_round.as_i64(),
        proposer: proposer.0,
        signature: Bytes::new(),
        header: Some(value.header.clone()),
        envelopes: value.envelopes.clone(),
        metadata_value: value.metadata_value.clone(),
    }
}

pub(crate) fn encode_proposal(p: &SignedMessage<BftContext, BftProposal>) -> WireProposal {
    let m = &p.message;
    WireProposal {
        signature: p.signature.clone(),
        ..encode_batch(m.height.0, m.round, m.pol_round, m.proposer, &m.value)
    }
}

pub(crate) fn decode_proposal(w: WireProposal) -> Option<SignedMessage<BftContext, BftProposal>> {
    let header = w.header?;
    let proposal = BftProposal {
        height: BlockNumber(w.height),
        round: round(w.round)?,
        pol_round: round(w.pol_round)?,
        proposer: ConsenterId(w.proposer),
        value: Batch::new(header, w.envelopes, w.metadata_value),
    };
    Some(SignedMessage::new(proposal, w.signature))
}

fn timeout_kind(k: TimeoutKind) -> u32 {
    match k {
        TimeoutKind::Propose => 1,
        TimeoutKind::Prevote => 2,
        TimeoutKind::Precommit => 3,
        TimeoutKind::Rebroadcast => 4,
    }
}

/// The WAL record of a state machine entry.
pub(crate) fn encode_wal(entry: &WalEntry<BftContext>) -> WalRecord {
    let body = match entry {
        WalEntry::ConsensusMsg(SignedConsensusMsg::Vote(v)) => WalBody::Vote(encode_vote(v)),
        WalEntry::ConsensusMsg(SignedConsensusMsg::Proposal(p)) => WalBody::Proposal(encode_proposal(p)),
        WalEntry::Timeout(t) => WalBody::Timeout(WireTimeout { kind: timeout_kind(t.kind), round: t.round.as_i64() }),
        WalEntry::ProposedValue(v) => WalBody::ProposedValue(WireProposedValue {
            value: Some(encode_batch(v.height.0, v.round, Round::Nil, v.proposer, &v.value)),
            valid_round: v.valid_round.as_i64(),
            valid: v.validity == Validity::Valid,
        }),
    };
    WalRecord { body: Some(body) }
}

/// The state machine entry of a WAL record (`None` for the height record and undecodable ones).
pub(crate) fn decode_wal(record: WalRecord) -> Option<WalEntry<BftContext>> {
    Some(match record.body? {
        WalBody::Height(_) => return None,
        WalBody::Vote(v) => WalEntry::ConsensusMsg(SignedConsensusMsg::Vote(decode_vote(v)?)),
        WalBody::Proposal(p) => WalEntry::ConsensusMsg(SignedConsensusMsg::Proposal(decode_proposal(p)?)),
        WalBody::Timeout(t) => {
            let kind = match t.kind {
                1 => TimeoutKind::Propose,
                2 => TimeoutKind::Prevote,
                3 => TimeoutKind::Precommit,
                4 => TimeoutKind::Rebroadcast,
                _ => return None,
            };
            WalEntry::Timeout(Timeout { kind, round: round(t.round)? })
        }
        WalBody::ProposedValue(v) => {
            let p = v.value?;
            WalEntry::ProposedValue(ProposedValue {
                height: BlockNumber(p.height),
                round: round(p.round)?,
                valid_round: round(v.valid_round)?,
                proposer: ConsenterId(p.proposer),
                value: Batch::new(p.header?, p.envelopes, p.metadata_value),
                validity: if v.valid { Validity::Valid } else { Validity::Invalid },
            })
        }
    })
}

/// A frame's bytes.
pub(crate) fn frame(channel: &str, body: WireBody) -> Bytes {
    Bytes::from(WireMessage { channel: channel.to_owned(), body: Some(body) }.encode_to_vec())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_vote() -> SignedMessage<BftContext, BftVote> {
        let vote = BftVote {
            height: BlockNumber(7),
            round: Round::new(2),
            kind: VoteType::Precommit,
            value: NilOrVal::Val(BatchId([9; 32])),
            voter: ConsenterId(3),
            extension: Some(SignedMessage::new(Bytes::from_static(b"sig"), Bytes::new())),
        };
        SignedMessage::new(vote, Bytes::from_static(b"signature"))
    }

    #[test]
    fn a_vote_survives_the_wire_and_the_wal() {
        let v = sample_vote();
        assert_eq!(decode_vote(encode_vote(&v)).unwrap(), v);
        let entry = WalEntry::ConsensusMsg(SignedConsensusMsg::Vote(v.clone()));
        match decode_wal(encode_wal(&entry)).unwrap() {
            WalEntry::ConsensusMsg(SignedConsensusMsg::Vote(back)) => assert_eq!(back, v),
            other => panic!("decoded {other:?}"),
        }
    }

    #[test]
    fn a_vote_with_a_bad_kind_round_or_value_id_is_refused() {
        let good = encode_vote(&sample_vote());
        assert!(decode_vote(WireVote { kind: 3, ..good.clone() }).is_none());
        assert!(decode_vote(WireVote { round: -2, ..good.clone() }).is_none());
        assert!(decode_vote(WireVote { value: Bytes::from_static(b"short"), ..good }).is_none());
    }

    proptest! {
        #[test]
        fn garbage_frames_and_wal_records_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(m) = WireMessage::decode(bytes.as_slice()) {
                match m.body {
                    Some(WireBody::Vote(v)) => { let _ = decode_vote(v); }
                    Some(WireBody::Proposal(p)) => { let _ = decode_proposal(p); }
                    _ => {}
                }
            }
            if let Ok(r) = WalRecord::decode(bytes.as_slice()) {
                let _ = decode_wal(r);
            }
        }
    }
}
