//! The endorser's replica of a channel's ledger state (FastFabric §III-G): the world state, the committed
//! transaction IDs and the channel configuration, brought forward by the committer's validated blocks without
//! validating them again. Several replicas (one per endorser process) scale endorsement out.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use ferrofabric_arena::BlockArena;
use ferrofabric_chaincode::{History, PrivateState};
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_protos::common::{BlockHeader, BlockMetadataIndex, ConfigEnvelope, HeaderType};
use ferrofabric_protos::peer::TxValidationCode;
use ferrofabric_protos::queryresult::KeyModification;
use ferrofabric_state::{Height, StateView, UpdateBatch, WorldState};
use ferrofabric_validator::{apply_write_set, TxIds};
use prost::Message;

use crate::private::PrivateData;

/// Why a block could not be applied to a [`Replica`] (nothing of it was applied).
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// The block bytes do not decode.
    #[error("block does not decode: {0}")]
    Decode(String),
    /// The block is not the next one.
    #[error("expected block {expected}, got block {got}")]
    OutOfOrder {
        /// The next block number the replica needs.
        expected: u64,
        /// The number of the block offered.
        got: u64,
    },
    /// The block lacks a usable TRANSACTIONS_FILTER (it was not validated by a committer).
    #[error("block {number}: {reason}")]
    NotValidated {
        /// Block number.
        number: u64,
        /// What is missing.
        reason: String,
    },
    /// A channel configuration (genesis block or valid CONFIG transaction) could not be loaded.
    #[error("channel configuration: {0}")]
    Config(String),
}

/// Every public write of a valid transaction by (namespace, key), oldest first.
type KeyHistory = HashMap<(String, String), Vec<KeyModification>>;

struct Committed {
    config: Arc<ChannelConfig>,
    txids: TxIds,
}

/// One channel's replicated state; see the module docs. All methods take `&self` and are thread-safe: simulations
/// read through [`Replica::view`] while blocks are applied (a view always sees whole blocks).
pub struct Replica {
    channel_id: String,
    /// The header of block 0, which the follower never delivers (the replica starts from it).
    genesis_header: BlockHeader,
    state: WorldState,
    committed: RwLock<Committed>,
    /// Serialises block application (height check to state update). Lock order: `apply_lock`, `committed`, the
    /// state's gate; readers never take `committed` while holding a view.
    apply_lock: Mutex<()>,
    /// [`Replica::height`], readable without the state's gate: a reader on an async runtime must not wait behind a
    /// block that waits for running simulations (an external chaincode's needs that runtime to finish).
    height: AtomicU64,
    /// The history database (`ledger.history.enableHistoryDatabase`), when kept: every public write of a valid
    /// transaction by (namespace, key), oldest first.
    history: Option<RwLock<KeyHistory>>,
    /// The private data this peer endorsed and then committed.
    private: PrivateData,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica").field("channel_id", &self.channel_id).field("height", &self.height()).finish()
    }
}

fn config_from_envelope(channel_id: &str, env: &ConfigEnvelope) -> Result<ChannelConfig, ReplicaError> {
    let config = env.config.as_ref().ok_or_else(|| ReplicaError::Config("ConfigEnvelope without config".into()))?;
    ChannelConfig::from_config(channel_id, config).map_err(|e| ReplicaError::Config(e.to_string()))
}

impl Replica {
    /// A replica at block 0 of the channel whose genesis (config) block is `genesis` (a marshaled `common.Block`).
    ///
    /// Errors: [`ReplicaError::Decode`] / [`ReplicaError::Config`] if the block is not a config block number 0.
    pub fn from_genesis(genesis: Bytes) -> Result<Replica, ReplicaError> {
        let arena = BlockArena::decode(genesis).map_err(|e| ReplicaError::Decode(e.to_string()))?;
        if arena.number() != 0 {
            return Err(ReplicaError::OutOfOrder { expected: 0, got: arena.number() });
        }
        let tx = arena.txs().first().ok_or_else(|| ReplicaError::Config("genesis block has no transaction".into()))?;
        let channel_id = tx.channel_header().map_err(|e| ReplicaError::Config(e.to_string()))?.channel_id.clone();
        let payload = tx.payload().map_err(|e| ReplicaError::Config(e.to_string()))?;
        let env = ConfigEnvelope::decode(payload.data.clone())
            .map_err(|e| ReplicaError::Config(format!("ConfigEnvelope: {e}")))?;
        let config = config_from_envelope(&channel_id, &env)?;
        let mut txids = TxIds::default();
        if let Ok(ch) = tx.channel_header() {
            if !ch.tx_id.is_empty() {
                txids.insert(&ch.tx_id);
            }
        }
        let state = WorldState::new();
        state.apply(0, &UpdateBatch::new());
        Ok(Replica {
            channel_id,
            genesis_header: arena.header().clone(),
            state,
            committed: RwLock::new(Committed { config: Arc::new(config), txids }),
            apply_lock: Mutex::new(()),
            height: AtomicU64::new(1),
            history: None,
            private: PrivateData::default(),
        })
    }

    /// The private values this peer holds.
    pub fn private_state(&self) -> &dyn PrivateState {
        &self.private
    }

    /// Keeps the private write set of transaction `tx_id` that this peer endorsed, until a block commits it (see
    /// the `private` module).
    pub fn persist_private(&self, tx_id: &str, private: &Bytes) {
        self.private.persist(tx_id, self.height(), private);
    }

    /// The same replica keeping the history of every key from here on (Fabric's history database), for chaincodes'
    /// `GetHistoryForKey`. Costs a copy of every written value.
    pub fn with_history(mut self) -> Self {
        self.history = Some(RwLock::new(HashMap::new()));
        self
    }

    /// The history database, when this replica keeps one.
    pub fn history(&self) -> Option<&dyn History> {
        self.history.as_ref().map(|_| self as &dyn History)
    }

    fn committed(&self) -> std::sync::RwLockReadGuard<'_, Committed> {
        match self.committed.read() {
            Ok(g) => g,
            // Writers never panic while holding the lock with half-applied changes (see apply_block).
            Err(p) => p.into_inner(),
        }
    }

    fn committed_mut(&self) -> std::sync::RwLockWriteGuard<'_, Committed> {
        match self.committed.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    fn serial(&self) -> std::sync::MutexGuard<'_, ()> {
        match self.apply_lock.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// The header of the channel's genesis block (block 0).
    pub fn genesis_header(&self) -> &BlockHeader {
        &self.genesis_header
    }

    /// The channel's name.
    pub fn channel_id(&self) -> &str {
        &self.channel_id
    }

    /// Number of blocks applied, genesis included: the number of the next block.
    pub fn height(&self) -> u64 {
        self.height.load(Ordering::Acquire)
    }

    /// The current channel configuration.
    pub fn config(&self) -> Arc<ChannelConfig> {
        self.committed().config.clone()
    }

    /// What the committed definition of chaincode `name` says of who endorses it (for the gateway's plans);
    /// `Ok(None)` if it is not defined.
    ///
    /// Errors: the definition in the state does not decode.
    pub fn chaincode_info(
        &self,
        name: &str,
    ) -> Result<Option<ferrofabric_gateway::ChaincodeInfo>, crate::error::EndorserError> {
        let definition = ferrofabric_validator::chaincode_definition(&self.config(), &self.view(), name)
            .map_err(crate::error::EndorserError::ChaincodeDefinition)?;
        Ok(definition.map(|d| ferrofabric_gateway::ChaincodeInfo { policy: d.policy, collections: d.collections }))
    }

    /// The chaincodes defined on the channel, `(name, version)`, sorted by name.
    pub fn defined_chaincodes(&self) -> Vec<(String, String)> {
        ferrofabric_validator::defined_chaincodes(&self.view())
    }

    /// A consistent view of the state after the last applied block.
    pub fn view(&self) -> StateView<'_> {
        self.state.view()
    }

    /// Whether a block applied so far holds a transaction with this ID (valid or not, as Fabric's ledger index).
    pub fn contains_txid(&self, tx_id: &str) -> bool {
        self.committed().txids.contains(tx_id)
    }

    /// Applies block `block_number`'s state updates as a validator computed them (e.g. `BlockResult::updates`), for
    /// an in-process committer; record the block's transaction IDs with [`Replica::record_txids`].
    ///
    /// Errors: [`ReplicaError::OutOfOrder`] unless `block_number` is [`Replica::height`].
    pub fn apply(&self, block_number: u64, updates: &UpdateBatch) -> Result<(), ReplicaError> {
        let _serial = self.serial();
        let expected = self.height();
        if block_number != expected {
            return Err(ReplicaError::OutOfOrder { expected, got: block_number });
        }
        self.state.apply(block_number, updates);
        self.height.store(block_number + 1, Ordering::Release);
        Ok(())
    }

    /// Records committed transaction IDs (for [`Replica::apply`] users).
    pub fn record_txids<I: IntoIterator<Item = String>>(&self, txids: I) {
        let mut committed = self.committed_mut();
        for txid in txids {
            committed.txids.insert(&txid);
        }
    }

    /// Applies a validated block as the committer delivers it (a marshaled `common.Block` whose
    /// TRANSACTIONS_FILTER metadata holds one validation code per transaction): the write sets of the VALID
    /// endorser transactions at height (block, tx index) as Fabric's `applyWriteSet` does, the configuration of a
    /// VALID config transaction, and every transaction ID. Nothing is re-validated.
    ///
    /// Returns each transaction's ID in block order (empty where the transaction has none or its header does not
    /// decode), so that a caller indexing the block need not decode it again.
    ///
    /// Errors: undecodable block, wrong number, missing or short filter, unusable configuration; nothing is applied.
    pub fn apply_block(&self, block: Bytes) -> Result<Vec<String>, ReplicaError> {
        let arena = BlockArena::decode(block).map_err(|e| ReplicaError::Decode(e.to_string()))?;
        let number = arena.number();
        let _serial = self.serial();
        let expected = self.height();
        if number != expected {
            return Err(ReplicaError::OutOfOrder { expected, got: number });
        }
        let not_validated = |reason: &str| ReplicaError::NotValidated { number, reason: reason.to_owned() };
        let filter = arena
            .metadata()
            .metadata
            .get(BlockMetadataIndex::TransactionsFilter as usize)
            .ok_or_else(|| not_validated("no TRANSACTIONS_FILTER metadata"))?;
        if filter.len() != arena.txs().len() {
            return Err(not_validated("TRANSACTIONS_FILTER length differs from the transaction count"));
        }
        let view = self.state.view();
        let mut batch = UpdateBatch::new();
        let mut txids = Vec::with_capacity(arena.txs().len());
        let mut new_config = None;
        let mut modifications = Vec::new();
        let mut committed_private = Vec::new();
        for (i, tx) in arena.txs().iter().enumerate() {
            let Ok(ch) = tx.channel_header() else {
                txids.push(String::new());
                continue;
            };
            txids.push(ch.tx_id.clone());
            if filter[i] != TxValidationCode::Valid as u8 {
                continue;
            }
            if ch.r#type == HeaderType::Config as i32 {
                let payload = tx.payload().map_err(|e| ReplicaError::Config(e.to_string()))?;
                let env = ConfigEnvelope::decode(payload.data.clone())
                    .map_err(|e| ReplicaError::Config(format!("ConfigEnvelope: {e}")))?;
                new_config = Some(config_from_envelope(&self.channel_id, &env)?);
            } else if ch.r#type == HeaderType::EndorserTransaction as i32 {
                // A VALID endorser transaction always has a decodable read/write set; skip defensively otherwise.
                if let Ok(rwset) = tx.rwset() {
                    apply_write_set(&view, &mut batch, rwset, Height::new(number, i as u64));
                    committed_private.push((ch.tx_id.clone(), i as u64));
                    if self.history.is_some() {
                        for ns in rwset {
                            for w in &ns.kv.writes {
                                let is_delete = w.is_delete || w.value.is_empty();
                                let m = KeyModification {
                                    tx_id: ch.tx_id.clone(),
                                    value: if is_delete { Bytes::new() } else { w.value.clone() },
                                    timestamp: ch.timestamp,
                                    is_delete,
                                };
                                modifications.push(((ns.namespace.clone(), w.key.clone()), m));
                            }
                        }
                    }
                }
            }
        }
        drop(view);
        // Hold the txid/config lock across the state update so a proposal never sees the block's state without its
        // transaction IDs.
        let mut committed = self.committed_mut();
        self.state.apply(number, &batch);
        self.height.store(number + 1, Ordering::Release);
        for txid in txids.iter().filter(|t| !t.is_empty()) {
            committed.txids.insert(txid);
        }
        if let Some(c) = new_config {
            committed.config = Arc::new(c);
        }
        for (tx_id, i) in committed_private {
            if let Some(Ok(rwset)) = arena.txs().get(i as usize).map(|t| t.rwset()) {
                self.private.commit(&tx_id, Height::new(number, i), rwset);
            }
        }
        self.private.expire(number + 1);
        if let Some(history) = &self.history {
            let mut h = history.write().unwrap_or_else(|e| e.into_inner());
            for (key, m) in modifications {
                h.entry(key).or_default().push(m);
            }
        }
        Ok(txids)
    }
}

impl History for Replica {
    fn for_key(&self, namespace: &str, key: &str) -> Vec<KeyModification> {
        let Some(history) = &self.history else { return Vec::new() };
        let h = history.read().unwrap_or_else(|e| e.into_inner());
        h.get(&(namespace.to_owned(), key.to_owned())).map(|v| v.iter().rev().cloned().collect()).unwrap_or_default()
    }
}
