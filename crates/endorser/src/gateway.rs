//! What the Gateway and discovery services on a standalone endorser's port read of their peer
//! ([`DaemonLedger`], a [`ferrofabric_gateway::Ledger`]): the channel configuration and chaincode definitions of
//! the endorser's replica, and the committed blocks, which in a node of processes live with the committer and the
//! block-store service, not here. The follower keeps the newest [`RECENT_BLOCKS`] blocks it applied, with their
//! transaction IDs, so that a client waiting on a commit status or reading chaincode events of a fresh block is
//! answered from memory; older blocks are read from the block-store service (its `GetBlockByNumber` and
//! `GetBlockByTxID`), which follows the same committer.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use ferrofabric_arena::BlockArena;
use ferrofabric_block_store::BlockStore;
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_comm::ClientTls;
use ferrofabric_gateway::ChaincodeInfo;
use ferrofabric_protos::ferrofabric::blockstore::block_store_client::BlockStoreClient;
use ferrofabric_protos::ferrofabric::blockstore::{BlockByHashRequest, BlockByNumberRequest, TransactionByIdRequest};
use prost::Message;
use tokio::sync::watch;
use tonic::Code;

use crate::error::EndorserError;
use crate::Replica;

/// How many of the newest applied blocks a [`RecentBlocks`] keeps: at 500 transactions of 4 KB, about 0.5 GB at
/// most, and minutes of blocks at the rates a node reaches, long enough for any client that waits on a commit.
pub const RECENT_BLOCKS: usize = 256;

/// The newest blocks a follower applied, with the location of each transaction ID, and the height they reach.
#[derive(Debug)]
pub struct RecentBlocks {
    inner: Mutex<Recent>,
    height: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Recent {
    /// Block number, marshaled block, and its transaction IDs (to drop them from `txids` when it leaves).
    blocks: VecDeque<(u64, Bytes, Vec<String>)>,
    /// Transaction ID → (block, index); the first transaction of an ID, as Fabric's index keeps.
    txids: HashMap<String, (u64, u32)>,
}

impl RecentBlocks {
    /// An empty window at `height` (the replica's height when following starts).
    pub fn new(height: u64) -> RecentBlocks {
        RecentBlocks { inner: Mutex::default(), height: watch::channel(height).0 }
    }

    /// Records block `number` (marshaled, with its TRANSACTIONS_FILTER) once the replica has applied it, with
    /// `ids`, each transaction's ID in block order as [`Replica::apply_block`] returns them (empty for none); the
    /// oldest block leaves the window when it is full.
    pub fn push(&self, number: u64, block: Bytes, ids: Vec<String>) {
        {
            let mut r = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            for (i, id) in ids.iter().enumerate() {
                if !id.is_empty() {
                    r.txids.entry(id.clone()).or_insert((number, i as u32));
                }
            }
            r.blocks.push_back((number, block, ids));
            while r.blocks.len() > RECENT_BLOCKS {
                if let Some((old, _, old_ids)) = r.blocks.pop_front() {
                    // Only the IDs of the block leaving are looked at, not the whole index.
                    for id in old_ids {
                        if r.txids.get(&id).is_some_and(|(n, _)| *n == old) {
                            r.txids.remove(&id);
                        }
                    }
                }
            }
        }
        self.height.send_replace(number + 1);
    }

    fn block(&self, number: u64) -> Option<Bytes> {
        let r = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        r.blocks.iter().find(|(n, _, _)| *n == number).map(|(_, b, _)| b.clone())
    }

    fn tx_location(&self, txid: &str) -> Option<(u64, u32)> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).txids.get(txid).copied()
    }

    /// The block of the window whose header hashes to `hash`.
    fn by_hash(&self, hash: &[u8]) -> Option<Bytes> {
        let r = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        r.blocks
            .iter()
            .find(|(_, b, _)| {
                ferrofabric_protos::common::Block::decode(b.clone())
                    .ok()
                    .and_then(|b| b.header)
                    .is_some_and(|h| ferrofabric_protoutil::block_header_hash(&h).as_slice() == hash)
            })
            .map(|(_, b, _)| b.clone())
    }

    /// The oldest block number in the window, `None` while it is empty.
    fn oldest(&self) -> Option<u64> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).blocks.front().map(|(n, _, _)| *n)
    }
}

/// Where the committed blocks older than the window are read: a block-store service.
#[derive(Debug, Clone)]
pub struct BlockSource {
    /// Its `host:port`.
    pub address: String,
    /// TLS towards it; `None` = plain text.
    pub tls: Option<ClientTls>,
}

/// The ledger a standalone endorser's gateway reads (see the module docs).
pub struct DaemonLedger {
    replica: Arc<Replica>,
    recent: Arc<RecentBlocks>,
    source: Option<BlockSource>,
    /// The committer's own block store, when it is in this process (read before `source`).
    store: Option<Arc<BlockStore>>,
    client: tokio::sync::OnceCell<BlockStoreClient<tonic::transport::Channel>>,
}

impl DaemonLedger {
    /// A ledger of `replica`, whose follower records into `recent`, reading older blocks from `source` (none: only
    /// the window is readable).
    pub fn new(replica: Arc<Replica>, recent: Arc<RecentBlocks>, source: Option<BlockSource>) -> DaemonLedger {
        DaemonLedger { replica, recent, source, store: None, client: tokio::sync::OnceCell::new() }
    }

    /// A ledger of `replica`, whose follower records into `recent`, reading older blocks from `store`, the block
    /// store of a committer in this process.
    pub fn with_store(replica: Arc<Replica>, recent: Arc<RecentBlocks>, store: Arc<BlockStore>) -> DaemonLedger {
        DaemonLedger { store: Some(store), ..DaemonLedger::new(replica, recent, None) }
    }

    async fn client(&self) -> Result<BlockStoreClient<tonic::transport::Channel>, String> {
        let Some(source) = &self.source else {
            return Err("blocks before the newest ones are not readable: no block store is configured".into());
        };
        let client = self
            .client
            .get_or_try_init(|| async {
                let channel = ferrofabric_comm::connect(&source.address, source.tls.as_ref())
                    .await
                    .map_err(|e| format!("connecting to the block store at {}: {e:#}", source.address))?;
                Ok::<_, String>(
                    BlockStoreClient::new(channel)
                        .max_decoding_message_size(crate::MAX_MESSAGE_SIZE)
                        .max_encoding_message_size(crate::MAX_MESSAGE_SIZE),
                )
            })
            .await?;
        Ok(client.clone())
    }
}

impl DaemonLedger {
    /// The header of committed block `number` (block 0's from the replica, which starts from it); `Ok(None)` above
    /// the height.
    ///
    /// Errors: the block cannot be read or does not decode.
    pub async fn header(&self, number: u64) -> Result<Option<ferrofabric_protos::common::BlockHeader>, EndorserError> {
        use ferrofabric_gateway::Ledger as _;
        if number == 0 {
            return Ok(Some(self.replica.genesis_header().clone()));
        }
        match self.block(number).await.map_err(EndorserError::Ledger)? {
            Some(raw) => ferrofabric_protos::common::Block::decode(raw)
                .map(|b| Some(b.header.unwrap_or_default()))
                .map_err(|source| EndorserError::BlockUndecodable { number, source }),
            None => Ok(None),
        }
    }

    /// The committed block whose header's SHA-256 is `hash` (Fabric's `GetBlockByHash`), with its
    /// TRANSACTIONS_FILTER; `Ok(None)` if no committed block has it.
    ///
    /// Errors: the block store cannot be read.
    pub async fn block_by_hash(&self, hash: &[u8]) -> Result<Option<Bytes>, EndorserError> {
        if let Some(b) = self.recent.by_hash(hash) {
            return Ok(Some(b));
        }
        if let Some(store) = &self.store {
            let number = store
                .block_number_by_hash(hash)
                .map_err(|source| EndorserError::Store { what: "the block store".into(), source })?;
            return match number {
                Some(n) => {
                    store.block(n).map_err(|source| EndorserError::Store { what: format!("reading block {n}"), source })
                }
                None => Ok(None),
            };
        }
        // Without a block store only the window can be searched (block 0 is never in it).
        if self.source.is_none() {
            return Ok(None);
        }
        let request = BlockByHashRequest { hash: Bytes::copy_from_slice(hash) };
        match self.client().await.map_err(EndorserError::Ledger)?.get_block_by_hash(request).await {
            Ok(b) => Ok(Some(Bytes::from(b.into_inner().encode_to_vec()))),
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(EndorserError::Ledger(format!(
                "finding block hash {} in the block store: {}",
                hex::encode(hash),
                s.message()
            ))),
        }
    }
}

impl ferrofabric_gateway::Ledger for DaemonLedger {
    fn channel_id(&self) -> &str {
        self.replica.channel_id()
    }

    fn config(&self) -> Arc<ChannelConfig> {
        self.replica.config()
    }

    fn chaincode(&self, name: &str) -> Result<Option<ChaincodeInfo>, String> {
        self.replica.chaincode_info(name).map_err(|e| e.to_string())
    }

    fn chaincodes(&self) -> Vec<(String, String)> {
        self.replica.defined_chaincodes()
    }

    fn height(&self) -> u64 {
        *self.recent.height.borrow()
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.recent.height.subscribe()
    }

    async fn block(&self, number: u64) -> Result<Option<Bytes>, String> {
        if number >= self.height() {
            return Ok(None);
        }
        if let Some(b) = self.recent.block(number) {
            return Ok(Some(b));
        }
        if let Some(store) = &self.store {
            return store.block(number).map_err(|e| format!("reading block {number}: {e}"));
        }
        match self.client().await?.get_block_by_number(BlockByNumberRequest { number }).await {
            Ok(b) => Ok(Some(Bytes::from(b.into_inner().encode_to_vec()))),
            Err(s) if s.code() == Code::NotFound => Ok(None),
            Err(s) => Err(format!("reading block {number} from the block store: {}", s.message())),
        }
    }

    async fn tx_location(&self, txid: &str) -> Result<Option<(u64, u32)>, String> {
        if let Some(l) = self.recent.tx_location(txid) {
            return Ok(Some(l));
        }
        if let Some(store) = &self.store {
            return match store.tx_location(txid).map_err(|e| format!("finding transaction {txid}: {e}"))? {
                Some((n, i)) if n < self.height() => Ok(Some((n, i))),
                _ => Ok(None),
            };
        }
        // Every block from the window's start on is in the window: a transaction not found there can only be older.
        if self.recent.oldest() == Some(1) {
            return Ok(None);
        }
        let request = TransactionByIdRequest { tx_id: txid.to_owned() };
        let block = match self.client().await?.get_block_by_tx_id(request).await {
            Ok(b) => b.into_inner(),
            Err(s) if s.code() == Code::NotFound => return Ok(None),
            Err(s) => return Err(format!("finding transaction {txid} in the block store: {}", s.message())),
        };
        let number = block.header.as_ref().map_or(0, |h| h.number);
        let arena = BlockArena::decode(Bytes::from(block.encode_to_vec()))
            .map_err(|e| format!("block {number} from the block store: {e}"))?;
        let index = arena.txs().iter().position(|tx| tx.channel_header().is_ok_and(|h| h.tx_id == txid));
        Ok(index.map(|i| (number, i as u32)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_window_keeps_the_newest_blocks_and_the_first_location_of_each_transaction_id() {
        let net = ferrofabric_testkit::Network::generate(21).unwrap();
        let recent = RecentBlocks::new(1);
        let mut rx = recent.height.subscribe();
        let mut chain = ferrofabric_testkit::Chain::new(&net).unwrap();
        let mut block = |n: u64, ids: &[&str]| {
            let txs: Vec<Bytes> = ids
                .iter()
                .map(|id| {
                    ferrofabric_testkit::TxBuilder::new(&net)
                        .chaincode("cc", "1.0")
                        .tx_id(*id)
                        .build()
                        .unwrap()
                        .envelope
                })
                .collect();
            let b = chain.append(&txs);
            assert_eq!(b.header.as_ref().unwrap().number, n);
            Bytes::from(b.encode_to_vec())
        };
        recent.push(1, block(1, &["a", "b"]), vec!["a".into(), "b".into()]);
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), 2);
        recent.push(2, block(2, &["b", "c"]), vec!["b".into(), "c".into()]);
        assert_eq!(recent.tx_location("b"), Some((1, 1)), "the first transaction of an ID, as Fabric's index");
        assert_eq!(recent.tx_location("c"), Some((2, 1)));
        for n in 3..(3 + RECENT_BLOCKS as u64) {
            recent.push(n, block(n, &[]), Vec::new());
        }
        assert_eq!(recent.oldest(), Some(3));
        assert_eq!(recent.tx_location("a"), None, "blocks that left the window leave the index too");
        assert!(recent.block(2).is_none() && recent.block(3).is_some());
        assert_eq!(*recent.height.borrow(), 3 + RECENT_BLOCKS as u64);
    }
}
