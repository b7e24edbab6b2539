//! What the Gateway service of a peer port reads ([`ferrofabric_gateway::Ledger`]): the channel configuration and
//! chaincode definitions of the port's endorser replica, and the committer's blocks and transaction index, which
//! are the peer's ledger in this node.

use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_block_store::BlockStore;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_endorser::Replica;
use ferrofabric_gateway::ChaincodeInfo;
use tokio::sync::watch;

/// One peer port's ledger; see the module docs.
pub(crate) struct PeerLedger {
    pub(crate) replica: Arc<Replica>,
    pub(crate) committed: Arc<BlockStore>,
}

impl ferrofabric_gateway::Ledger for PeerLedger {
    fn channel_id(&self) -> &str {
        self.replica.channel_id()
    }

    fn config(&self) -> Arc<ChannelConfig> {
        self.replica.config()
    }

    fn chaincode(&self, name: &str) -> Result<Option<ChaincodeInfo>, String> {
        let config = self.replica.config();
        let definition = ferrofabric_validator::chaincode_definition(&config, &self.replica.view(), name)?;
        Ok(definition.map(|d| ChaincodeInfo { policy: d.policy, collections: d.collections }))
    }

    fn chaincodes(&self) -> Vec<(String, String)> {
        ferrofabric_validator::defined_chaincodes(&self.replica.view())
    }

    fn height(&self) -> u64 {
        self.committed.height()
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.committed.subscribe()
    }

    async fn block(&self, number: u64) -> Result<Option<Bytes>, String> {
        self.committed.block(number).map_err(|e| e.to_string())
    }

    async fn tx_location(&self, txid: &str) -> Result<Option<(u64, u32)>, String> {
        self.committed.tx_location(txid).map_err(|e| e.to_string())
    }
}
