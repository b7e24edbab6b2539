//! What passes between the Raft thread (`raftnode`) and the rest of a channel's chain: the thread's [`Input`]s, the
//! [`Event`]s it tells the leader loop, and who leads as it sees it ([`RaftStatus`]).

use bytes::Bytes;
use raft::prelude::Message as RaftMessage;

use super::transport::LinkEvent;

/// Inputs of the Raft thread.
pub(crate) enum Input {
    /// A Raft message from a peer.
    Step(RaftMessage),
    /// A signed block the leader wants replicated as the entry at `index`.
    Propose {
        /// The leadership session the block was made in.
        session: u64,
        /// The Raft index recorded in the block's metadata.
        index: u64,
        /// The block number (for logs).
        number: u64,
        /// The marshaled, signed block.
        data: Bytes,
    },
    /// The chain loop lost track of session `0` (e.g. signing failed); start a new one.
    Resync(u64),
    /// A link event.
    Link(LinkEvent),
    /// Stop.
    Halt,
}

/// What the Raft thread tells the chain loop.
#[derive(Debug)]
pub(crate) enum Event {
    /// This node leads and has applied everything its log held at the election: blocks may be created,
    /// the next proposal becomes entry `next_index`.
    LeaderReady {
        /// Session number for proposals.
        session: u64,
        /// Raft term.
        term: u64,
        /// Index of the next entry this node will propose.
        next_index: u64,
    },
    /// This node no longer leads.
    NotLeader,
    /// Block `number` was appended to the ledger.
    Applied {
        /// Block number.
        number: u64,
    },
    /// A proposal of `session` was refused; wait for the next [`Event::LeaderReady`].
    Rejected {
        /// The refused session.
        session: u64,
    },
}

/// Who leads, as seen by this node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct RaftStatus {
    /// Raft ID of the leader, 0 when unknown.
    pub(crate) leader: u64,
    /// Current term.
    pub(crate) term: u64,
}
