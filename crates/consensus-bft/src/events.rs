//! What a channel's chain loop reacts to: its [`Event`]s, and the [`Sink`] that turns the frames other consenters
//! send into events (after checking the sender and, for a forwarded request, the request).

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_orderer::ChainSupport;
use malachitebft_core_types::{SignedMessage, Timeout};
use tokio::sync::{mpsc, oneshot};

use crate::context::{BftContext, BftProposal, BftVote, ConsenterId};
use crate::transport::FrameSink;
use crate::wire::{decode_proposal, decode_vote, WireBody, WireMessage};

/// The answer to a request of this node's Broadcast: pooled, or why not.
pub(crate) type Ack = oneshot::Sender<Result<(), String>>;

/// What the chain's loop reacts to.
pub(crate) enum Event {
    /// A request accepted by this node's Broadcast; the answer says when it is pooled, or why not.
    Order(Bytes, Ack),
    /// A request forwarded by another consenter (already checked).
    PeerRequest(Bytes),
    /// A vote from consenter `.0` (the sender, authenticated by TLS).
    Vote(ConsenterId, SignedMessage<BftContext, BftVote>),
    /// A proposal from consenter `.0`.
    Proposal(ConsenterId, SignedMessage<BftContext, BftProposal>),
    /// A timeout of height `.1` elapsed.
    Timer(Timeout, u64),
    /// A block pulled from another consenter while catching up; the answer says whether it was appended.
    Pulled(Bytes, oneshot::Sender<Result<(), String>>),
    /// Catching up ended.
    CaughtUp(Result<(), String>),
    /// Once a second: re-send requests that wait too long.
    Tick,
}

/// Routes frames of one channel to its chain: maps the sender's TLS certificate to its consenter id (of the
/// current consenter set) and checks forwarded requests before they reach the pool.
pub(crate) struct Sink {
    pub(crate) channel: String,
    pub(crate) support: Arc<ChainSupport>,
    pub(crate) by_cert: HashMap<Vec<u8>, ConsenterId>,
    pub(crate) events: mpsc::Sender<Event>,
}

impl FrameSink for Sink {
    fn on_frame(&self, peer: &[u8], msg: WireMessage) {
        let Some(&from) = self.by_cert.get(peer) else {
            tracing::warn!(channel = %self.channel, "BFT frame from a TLS certificate of no consenter: dropped");
            return;
        };
        let event = match msg.body {
            Some(WireBody::Vote(v)) => decode_vote(v).map(|v| Event::Vote(from, v)),
            Some(WireBody::Proposal(p)) => decode_proposal(p).map(|p| Event::Proposal(from, p)),
            Some(WireBody::Request(r)) => {
                let checked = match self.support.revalidate(&r.envelope) {
                    Ok(_) => Ok(()),
                    Err(e) => self.support.reprocess_config(&r.envelope).map(|_| ()).map_err(|_| e),
                };
                match checked {
                    Ok(()) => Some(Event::PeerRequest(r.envelope)),
                    Err(e) => {
                        tracing::debug!(channel = %self.channel, %from, reason = %e, "forwarded request refused");
                        None
                    }
                }
            }
            None => None,
        };
        match event {
            Some(e) => {
                let _ = self.events.try_send(e);
            }
            None => tracing::debug!(channel = %self.channel, %from, "undecodable BFT frame dropped"),
        }
    }
}
