//! Precommits held back from the consensus engine until the block they vote for is known.

use std::collections::HashMap;

use malachitebft_core_types::{NilOrVal, SignedMessage, VoteType};

use crate::context::{Batch, BatchId, BftContext, BftVote};

/// The most precommits held at once (see [`HeldPrecommits`]); beyond it the oldest is dropped, which costs at
/// most a round or a pull of the block, never safety.
pub(crate) const MAX_HELD: usize = 256;

/// Precommits for a block this node has not seen yet, held back from the engine until its proposal arrives.
///
/// A precommit's vote extension is the voter's Fabric block signature, which can be checked only against the block
/// (the signed bytes hold its header). The engine counts a precommit whose extension was not checked toward the
/// quorum that decides the height, so a Byzantine consenter's precommit with a forged signature, arriving before the
/// proposal, could complete a quorum whose valid signatures are one short, and the block would carry fewer
/// signatures than `BlockValidation` requires. Held here, the precommit reaches the engine only once the block is
/// known and its signature is checked ([`Host::signature_valid`]); the height is decided by precommits whose
/// signatures are all valid.
#[derive(Debug, Default)]
pub(crate) struct HeldPrecommits(Vec<SignedMessage<BftContext, BftVote>>);

impl HeldPrecommits {
    /// Holds `vote` and answers true if it is a precommit for a block (not nil) of height `next` or later whose
    /// block is not among `known` (the blocks proposed at the `running` height).
    pub(crate) fn hold(
        &mut self,
        vote: &SignedMessage<BftContext, BftVote>,
        running: Option<u64>,
        next: u64,
        known: &HashMap<BatchId, Batch>,
    ) -> bool {
        let v = &vote.message;
        let NilOrVal::Val(id) = &v.value else { return false };
        if v.kind != VoteType::Precommit || v.height.0 < next || (running == Some(v.height.0) && known.contains_key(id))
        {
            return false;
        }
        if self.0.len() >= MAX_HELD {
            self.0.remove(0);
        }
        self.0.push(vote.clone());
        true
    }

    /// The held precommits whose block is now known at the `running` height, oldest first; drops those of heights
    /// before `next` (decided without them).
    pub(crate) fn release(
        &mut self,
        running: Option<u64>,
        next: u64,
        known: &HashMap<BatchId, Batch>,
    ) -> Vec<SignedMessage<BftContext, BftVote>> {
        let (ready, wait) =
            std::mem::take(&mut self.0).into_iter().filter(|v| v.message.height.0 >= next).partition(|v| {
                running == Some(v.message.height.0)
                    && matches!(&v.message.value, NilOrVal::Val(id) if known.contains_key(id))
            });
        self.0 = wait;
        ready
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::context::{mt_id, BlockNumber, ConsenterId};
    use bytes::Bytes;
    use ferrofabric_protos::common::BlockHeader;
    use malachitebft_core_types::Round;

    #[test]
    pub(crate) fn a_precommit_waits_for_its_block_and_past_heights_are_dropped() {
        let block = Batch::new(BlockHeader { number: 5, ..BlockHeader::default() }, Vec::new(), Bytes::new());
        let id = mt_id(&block);
        let vote = |kind: VoteType, value: NilOrVal<BatchId>, height: u64| {
            let v = BftVote {
                height: BlockNumber(height),
                round: Round::new(0),
                kind,
                value,
                voter: ConsenterId(4),
                extension: None,
            };
            SignedMessage::new(v, Bytes::from_static(b"signature"))
        };
        let mut held = HeldPrecommits::default();
        let mut known = HashMap::new();
        let early = vote(VoteType::Precommit, NilOrVal::Val(id), 5);
        assert!(held.hold(&early, Some(5), 5, &known), "a precommit for an unseen block waits");
        assert!(
            !held.hold(&vote(VoteType::Prevote, NilOrVal::Val(id), 5), Some(5), 5, &known),
            "prevotes carry no signature"
        );
        assert!(
            !held.hold(&vote(VoteType::Precommit, NilOrVal::Nil, 5), Some(5), 5, &known),
            "nil carries no signature"
        );
        assert!(
            !held.hold(&vote(VoteType::Precommit, NilOrVal::Val(id), 4), Some(5), 5, &known),
            "a past height is the engine's"
        );
        assert!(
            held.hold(&vote(VoteType::Precommit, NilOrVal::Val(id), 6), Some(5), 5, &known),
            "a later height waits too"
        );
        assert!(held.release(Some(5), 5, &known).is_empty(), "the block is still unknown");
        known.insert(id, block);
        assert!(!held.hold(&early, Some(5), 5, &known), "a precommit for a known block is checked at once");
        assert_eq!(held.release(Some(5), 5, &known), vec![early], "released once the block is known");
        assert!(held.release(Some(6), 6, &HashMap::new()).is_empty() && held.0.len() == 1, "height 6's waits on");
        assert!(held.release(None, 7, &known).is_empty() && held.0.is_empty(), "dropped once its height is decided");
    }
}
