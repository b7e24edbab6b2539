//! What the gateway reads of its peer: the channel's configuration and chaincode definitions (for endorsement
//! plans and access control) and the committed blocks (for commit status and chaincode events). Fabric's gateway
//! reads the same through its peer (`internal/pkg/gateway/ledger`, `commit.Finder`, the peer's channel policies).

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::peer::CollectionConfigPackage;
use tokio::sync::watch;

/// The parts of a chaincode definition that endorsement plans follow (Fabric's `chaincode.Metadata` as
/// discovery reads it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChaincodeInfo {
    /// The endorsement policy, a marshaled `peer.ApplicationPolicy`.
    pub policy: Bytes,
    /// The chaincode's private data collections, if it defines any.
    pub collections: Option<CollectionConfigPackage>,
}

/// One channel of the peer a gateway serves. The synchronous calls answer from local state and never block for
/// long.
pub trait Ledger: Send + Sync + 'static {
    /// The channel's name.
    fn channel_id(&self) -> &str;

    /// The current channel configuration (MSPs, policies, orderer endpoints).
    fn config(&self) -> Arc<ChannelConfig>;

    /// What the committed definition of chaincode `name` says of who endorses it; `Ok(None)` if it is not
    /// defined.
    ///
    /// Errors: the definition in the state does not decode.
    fn chaincode(&self, name: &str) -> Result<Option<ChaincodeInfo>, String>;

    /// The chaincodes defined on the channel, `(name, version)`, which this peer runs.
    fn chaincodes(&self) -> Vec<(String, String)>;

    /// The number of committed blocks.
    fn height(&self) -> u64;

    /// Follows [`Ledger::height`]: the receiver sees each new height.
    fn subscribe(&self) -> watch::Receiver<u64>;

    /// Committed block `number`, a marshaled `common.Block` with its TRANSACTIONS_FILTER; `Ok(None)` above the
    /// height. Asynchronous because a peer's blocks may live in another process (the block-store service).
    ///
    /// Errors: the block cannot be read.
    fn block(&self, number: u64) -> impl Future<Output = Result<Option<Bytes>, String>> + Send;

    /// Where the transaction `txid` was committed: block number and index in the block (Fabric's transaction
    /// index, which keeps the first transaction of an id); `Ok(None)` if no committed block holds it.
    ///
    /// Errors: the index cannot be read.
    fn tx_location(&self, txid: &str) -> impl Future<Output = Result<Option<(u64, u32)>, String>> + Send;
}
