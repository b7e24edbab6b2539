//! What the gateway reads of its peer: the channel's configuration and chaincode definitions (for endorsement
//! plans and access control) and the committed blocks (for commit status and chaincode events). Fabric's gateway
//! reads the same through its peer (`internal/pkg/gateway/ledger`, `commit.Finder`, the peer's channel policies).

use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use tokio::sync::watch;

/// One channel of the peer a gateway serves. Implementations answer from local state and never block for long
/// (a block read from disk at most).
pub trait Ledger: Send + Sync + 'static {
    /// The channel's name.
    fn channel_id(&self) -> &str;

    /// The current channel configuration (MSPs, policies, orderer endpoints).
    fn config(&self) -> Arc<ChannelConfig>;

    /// The endorsement policy of chaincode `name` as its committed definition holds it (a marshaled
    /// `peer.ApplicationPolicy`); `Ok(None)` if it is not defined.
    ///
    /// Errors: the definition in the state does not decode.
    fn endorsement_policy(&self, name: &str) -> Result<Option<Bytes>, String>;

    /// The chaincodes defined on the channel, `(name, version)`, which this peer runs.
    fn chaincodes(&self) -> Vec<(String, String)>;

    /// The number of committed blocks.
    fn height(&self) -> u64;

    /// Follows [`Ledger::height`]: the receiver sees each new height.
    fn subscribe(&self) -> watch::Receiver<u64>;

    /// Committed block `number`, a marshaled `common.Block` with its TRANSACTIONS_FILTER; `Ok(None)` above the
    /// height.
    ///
    /// Errors: the block cannot be read.
    fn block(&self, number: u64) -> Result<Option<Bytes>, String>;

    /// Where the transaction `txid` was committed: block number and index in the block (Fabric's transaction
    /// index, which keeps the first transaction of an id); `Ok(None)` if no committed block holds it.
    ///
    /// Errors: the index cannot be read.
    fn tx_location(&self, txid: &str) -> Result<Option<(u64, u32)>, String>;
}
