//! What the state-dependent stage of a block needs to know about the ledger ([`BlockContext`]), and the compiled
//! policies VSCC keeps from block to block ([`PolicyCache`]).

use std::sync::Arc;

use bytes::Bytes;
use dashmap::DashMap;
use ferrofabric_channelconfig::{ChannelConfig, Policy};
use ferrofabric_state::StateView;

use crate::signatures::Signatures;
use crate::txids::TxIds;

/// What the state-dependent stage needs to know about the ledger, shared read-only by all threads.
pub(crate) struct BlockContext<'a> {
    pub config: &'a ChannelConfig,
    pub view: &'a StateView<'a>,
    pub txids: &'a TxIds,
    pub block_number: u64,
    pub policies: &'a PolicyCache,
    /// Who verifies the signatures of the block's transactions.
    pub signatures: Signatures<'a>,
}

/// Compiled signature policies, keyed by the marshaled `ApplicationPolicy` (the same few appear in every block).
#[derive(Default)]
pub(crate) struct PolicyCache {
    pub(crate) compiled: DashMap<Bytes, Result<Arc<dyn Policy>, String>>,
}
