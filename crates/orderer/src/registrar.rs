//! The channels this node serves (Fabric `orderer/common/multichannel/registrar.go`): loading them at start-up,
//! joining from a config block and removing them (the channel participation API's backend).
//!
//! Ledger layout: `<FileLedger.Location>/chains/<channel>/` is one [`BlockStore`]. A join with the genesis block
//! writes it into a fresh store exactly as uploaded (block 0 stays byte-identical to configtxgen's output), then
//! starts the channel's consensus. A join with a later config block on-boards first (`onboarding`: the blocks
//! before it are pulled from the channel's orderers; status `onboarding` meanwhile). A channel whose configuration
//! does not name this node a consenter is followed (`follower`) until a config block does. A removal halts
//! consensus and deletes the directory.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock, Weak};

use bytes::Bytes;
use ferrofabric_block_store::{BlockStore, StoreOptions};
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::Block;
use prost::Message;

use crate::configupdate::ConfigUpdateProcessor;
use crate::consensus::{ChannelStatus, Consensus, ConsensusContext, ConsensusRegistry, ConsensusRelation};
use crate::follower::Follower;
use crate::metrics::Metrics;
use crate::msgprocessor::FilterOptions;
use crate::onboarding::{self, OnboardError, Onboarding};
use crate::support::{ChainSupport, SupportParams};
use ferrofabric_protoutil::sole_config_envelope;

/// A served channel: its support (ledger, config, block writer) and its consensus instance.
pub struct Channel {
    /// Ledger, configuration and block pipeline.
    pub support: Arc<ChainSupport>,
    /// The running consensus instance.
    pub consensus: Arc<dyn Consensus>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel").field("id", &self.support.channel_id()).finish_non_exhaustive()
    }
}

/// What the participation API reports about a channel (Fabric `types.ChannelInfo` without the URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelState {
    /// Channel ID.
    pub name: String,
    /// This node's relation to the channel's consensus.
    pub relation: ConsensusRelation,
    /// The channel's status.
    pub status: ChannelStatus,
    /// Ledger height (number of blocks).
    pub height: u64,
}

/// Why a join failed; the participation API maps each kind to Fabric's HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The block is not a usable join block (HTTP 400 "invalid join block: ...").
    #[error("invalid join block: {0}")]
    InvalidBlock(String),
    /// The channel is already served (HTTP 405, `Allow: GET, DELETE`).
    #[error("cannot join: channel already exists")]
    AlreadyExists,
    /// The join could not be carried out (HTTP 400 "cannot join: ...").
    #[error("cannot join: {0}")]
    Failed(String),
}

/// Why a removal failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoveError {
    /// The channel is not served (HTTP 404).
    #[error("cannot remove: channel does not exist")]
    NotFound,
    /// The ledger could not be deleted (HTTP 500).
    #[error("cannot remove: {0}")]
    Failed(String),
}

/// Node-level parts every channel shares.
pub struct RegistrarParams {
    /// `FileLedger.Location`; channels live under `<ledger_dir>/chains/`.
    pub ledger_dir: PathBuf,
    /// Local signing identity.
    pub signer: Arc<SigningIdentity>,
    /// Crypto thread pool.
    pub pool: Arc<rayon::ThreadPool>,
    /// Consensus implementations by type.
    pub registry: ConsensusRegistry,
    /// Queue and directory settings for consensus.
    pub consensus: ConsensusContext,
    /// CONFIG_UPDATE implementation, if any.
    pub config_processor: Option<Arc<dyn ConfigUpdateProcessor>>,
    /// Broadcast filter options.
    pub filter_options: FilterOptions,
    /// Blocks signed ahead of the append.
    pub signing_window: usize,
    /// Block store options (fsync policy, cache).
    pub store_options: StoreOptions,
    /// This node's TLS certificate (DER), naming it in consenter sets.
    pub node_certificate: Option<Vec<u8>>,
    /// TLS to dial other orderers with (on-boarding pulls blocks from them); `None`: joins with a config block
    /// other than the genesis block are refused.
    pub cluster_tls: Option<ferrofabric_comm::ClusterTls>,
    /// This node's gRPC port (`General.ListenPort`; 0 if unknown): on-boarding and following pull from the
    /// channel's other orderers, not from it.
    pub listen_port: u16,
    /// Counters.
    pub metrics: Arc<Metrics>,
}

/// The channel registry. `Send + Sync`; lookups take a read lock, joins and removals are serialized.
pub struct Registrar {
    params: RegistrarParams,
    channels: RwLock<HashMap<String, Arc<Channel>>>,
    /// Channels joined with a later config block whose earlier blocks are being pulled.
    onboarding: RwLock<HashMap<String, Arc<Onboarding>>>,
    changes: std::sync::Mutex<()>,
    /// This registrar, for the on-boarding tasks.
    me: Weak<Registrar>,
}

impl std::fmt::Debug for Registrar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registrar").field("channels", &self.channel_ids()).finish_non_exhaustive()
    }
}

/// Fabric `configtx.ValidateChannelID`: 1..=249 characters, `[a-z][a-z0-9.-]*`.
///
/// Errors: a message naming the rule that failed.
pub(crate) fn validate_channel_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("channel ID illegal, cannot be empty".into());
    }
    if id.len() > 249 {
        return Err(format!("channel ID illegal, cannot be longer than {}", 249));
    }
    let mut chars = id.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-');
    if !ok {
        return Err(format!("'{id}' contains illegal characters"));
    }
    Ok(())
}

impl Registrar {
    /// Opens every channel found under `<ledger_dir>/chains/` and starts its consensus. Must be called within
    /// a Tokio runtime (consensus loops are tasks).
    ///
    /// Errors: unreadable directories, a ledger that cannot be opened, a channel whose configuration or
    /// consensus type cannot be served.
    pub fn open(params: RegistrarParams) -> Result<Arc<Registrar>, crate::error::OrdererError> {
        let chains = params.ledger_dir.join("chains");
        std::fs::create_dir_all(&chains)
            .map_err(|source| crate::error::OrdererError::CreateDir { path: chains.clone(), source })?;
        let registrar = Arc::new_cyclic(|me| Registrar {
            params,
            channels: RwLock::new(HashMap::new()),
            onboarding: RwLock::new(HashMap::new()),
            changes: std::sync::Mutex::new(()),
            me: me.clone(),
        });
        let pending = onboarding::pending_join_blocks(&registrar.params.ledger_dir);
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&chains)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        names.sort();
        names.retain(|n| !pending.iter().any(|(p, _)| p == n));
        for name in names {
            let dir = chains.join(&name);
            let store = Arc::new(BlockStore::open(&dir, registrar.params.store_options.clone())?);
            if store.height() == 0 {
                // A join that crashed before its block was stored: nothing to serve.
                drop(store);
                tracing::warn!(channel = %name, "removing an empty channel ledger left by an interrupted join");
                std::fs::remove_dir_all(&dir)?;
                continue;
            }
            let channel = registrar
                .start_channel(&name, store)
                .map_err(|detail| crate::error::OrdererError::Channel { channel: name.clone(), detail })?;
            registrar.write_channels().insert(name.clone(), channel);
            tracing::info!(channel = %name, "channel loaded");
        }
        for (name, raw) in pending {
            match Block::decode(raw.clone()) {
                Ok(block) => registrar.start_onboarding(&name, raw, block),
                Err(e) => tracing::error!(channel = %name, error = %e, "pending join block does not decode"),
            }
        }
        Ok(registrar)
    }

    fn write_channels(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Channel>>> {
        self.channels.write().unwrap_or_else(|e| e.into_inner())
    }

    fn start_channel(&self, name: &str, store: Arc<BlockStore>) -> Result<Arc<Channel>, String> {
        let p = &self.params;
        let support = ChainSupport::open(
            name,
            SupportParams {
                store,
                signer: p.signer.clone(),
                pool: p.pool.clone(),
                config_processor: p.config_processor.clone(),
                metadata_validator: Arc::new(p.registry.clone()),
                filter_options: p.filter_options,
                signing_window: p.signing_window,
                node_certificate: p.node_certificate.clone(),
                metrics: p.metrics.clone(),
            },
        )
        .map_err(|e| e.to_string())?;
        let config = support.config();
        let consensus_type = config.orderer().map(|o| o.consensus_type().to_owned()).unwrap_or_default();
        let factory = p
            .registry
            .get(&consensus_type)
            .ok_or_else(|| format!("consensus type {consensus_type:?} is not supported by this orderer"))?;
        if !factory.is_consenter(&support) {
            let (me, id, kind) = (self.me.clone(), name.to_owned(), consensus_type.clone());
            let registry = p.registry.clone();
            let is_consenter = Box::new(move |s: &ChainSupport| registry.get(&kind).is_some_and(|f| f.is_consenter(s)));
            let promote = Box::new(move || {
                if let Some(r) = me.upgrade() {
                    r.promote(&id);
                }
            });
            let follower =
                Follower::start(support.clone(), p.cluster_tls.clone(), p.listen_port, is_consenter, promote);
            return Ok(Arc::new(Channel { support, consensus: follower }));
        }
        let consensus = factory.start(support.clone(), &p.consensus).map_err(|e| e.to_string())?;
        Ok(Arc::new(Channel { support, consensus }))
    }

    /// The channel `id`, if served.
    pub fn channel(&self, id: &str) -> Option<Arc<Channel>> {
        self.channels.read().unwrap_or_else(|e| e.into_inner()).get(id).cloned()
    }

    /// IDs of the served channels, on-boarding ones included, sorted.
    pub fn channel_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.channels.read().unwrap_or_else(|e| e.into_inner()).keys().cloned().collect();
        ids.extend(self.onboarding.read().unwrap_or_else(|e| e.into_inner()).keys().cloned());
        ids.sort();
        ids
    }

    /// The participation API's view of channel `id`.
    pub fn state(&self, id: &str) -> Option<ChannelState> {
        if let Some(o) = self.onboarding.read().unwrap_or_else(|e| e.into_inner()).get(id) {
            return Some(ChannelState {
                name: id.to_owned(),
                relation: ConsensusRelation::Consenter,
                status: if o.failed.load(Ordering::Relaxed) {
                    ChannelStatus::Failed
                } else {
                    ChannelStatus::OnBoarding
                },
                height: o.height.load(Ordering::Relaxed),
            });
        }
        let ch = self.channel(id)?;
        let (relation, mut status) = ch.consensus.relation();
        if ch.support.errored().is_some() {
            status = ChannelStatus::Failed;
        }
        Some(ChannelState { name: id.to_owned(), relation, status, height: ch.support.store().height() })
    }

    /// Joins the channel defined by the config block `raw` (Fabric `ValidateJoinBlock` + `JoinChannel`): the
    /// block must hold one CONFIG envelope with a valid application channel configuration whose consensus
    /// type this node runs; it is stored as block 0 exactly as given and the channel is started. Blocking
    /// (file I/O); must be called within a Tokio runtime.
    ///
    /// Errors: [`JoinError`].
    pub fn join(&self, raw: Bytes) -> Result<ChannelState, JoinError> {
        let block =
            Block::decode(raw.clone()).map_err(|e| JoinError::InvalidBlock(format!("cannot unmarshal block: {e}")))?;
        let envelope = sole_config_envelope(&block)
            .ok_or_else(|| JoinError::InvalidBlock("block is not a config block".into()))?;
        let config = ChannelConfig::from_envelope(&envelope).map_err(|e| JoinError::InvalidBlock(e.to_string()))?;
        if config.consortium().is_some() || config.application().is_none() {
            return Err(JoinError::InvalidBlock(
                "invalid config: must have an application group (system channels are not supported)".into(),
            ));
        }
        let id = config.channel_id().to_owned();
        validate_channel_id(&id).map_err(JoinError::InvalidBlock)?;
        let number = block.header.as_ref().map(|h| h.number).unwrap_or(0);
        let data_hash = block.header.as_ref().map(|h| h.data_hash.as_ref()).unwrap_or_default();
        let data = block.data.as_ref().map(|d| d.data.as_slice()).unwrap_or_default();
        if data_hash != ferrofabric_protoutil::block_data_hash(data) {
            return Err(JoinError::InvalidBlock("the header's data hash does not match the block's data".into()));
        }
        let consensus_type = config.orderer().map(|o| o.consensus_type().to_owned()).unwrap_or_default();
        if self.params.registry.get(&consensus_type).is_none() {
            return Err(JoinError::Failed(format!(
                "consensus type {consensus_type:?} is not supported by this orderer"
            )));
        }

        let _serial = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        if self.channel(&id).is_some() || self.onboarding.read().unwrap_or_else(|e| e.into_inner()).contains_key(&id) {
            return Err(JoinError::AlreadyExists);
        }
        let dir = self.params.ledger_dir.join("chains").join(&id);
        if number != 0 {
            if self.params.cluster_tls.is_none() {
                return Err(JoinError::Failed(format!(
                    "the join block is block {number}: on-boarding pulls the blocks before it from the channel's \
                     orderers, which needs TLS (General.Cluster or General.TLS)"
                )));
            }
            if dir.exists() {
                std::fs::remove_dir_all(&dir)
                    .map_err(|e| JoinError::Failed(format!("clearing {}: {e}", dir.display())))?;
            }
            onboarding::save_join_block(&self.params.ledger_dir, &id, &raw).map_err(JoinError::Failed)?;
            self.start_onboarding(&id, raw, block);
            tracing::info!(channel = %id, join_block = number, "joined channel: on-boarding");
            return self.state(&id).ok_or_else(|| JoinError::Failed("channel vanished after join".into()));
        }
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| JoinError::Failed(format!("clearing {}: {e}", dir.display())))?;
        }
        let store = BlockStore::open(&dir, self.params.store_options.clone())
            .map_err(|e| JoinError::Failed(format!("creating the ledger: {e}")))?;
        store.append(raw).map_err(|e| JoinError::Failed(format!("storing the join block: {e}")))?;
        let channel = match self.start_channel(&id, Arc::new(store)) {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(JoinError::Failed(e));
            }
        };
        self.write_channels().insert(id.clone(), channel);
        tracing::info!(channel = %id, "joined channel");
        self.state(&id).ok_or_else(|| JoinError::Failed("channel vanished after join".into()))
    }

    /// Starts pulling the blocks before join block `block` (`raw`) of channel `id` in the background; once the
    /// ledger ends with the join block, the channel starts as if loaded. A failed attempt is retried after
    /// [`onboarding::RETRY`] (from another orderer first); the channel then reports status `onboarding` until it
    /// runs, or `failed` if its consensus cannot start.
    fn start_onboarding(&self, id: &str, raw: Bytes, block: Block) {
        let progress = Arc::new(Onboarding::default());
        self.onboarding.write().unwrap_or_else(|e| e.into_inner()).insert(id.to_owned(), progress.clone());
        let Some(me) = self.me.upgrade() else { return };
        let id = id.to_owned();
        tokio::spawn(async move { me.onboard(id, raw, block, progress).await });
    }

    async fn onboard(self: Arc<Self>, id: String, raw: Bytes, block: Block, progress: Arc<Onboarding>) {
        let dir = self.params.ledger_dir.join("chains").join(&id);
        let Some(tls) = self.params.cluster_tls.clone() else { return };
        let node = onboarding::Node { signer: &self.params.signer, tls: &tls, port: self.params.listen_port };
        let store = loop {
            if progress.cancelled.load(Ordering::Relaxed) {
                let _ = std::fs::remove_dir_all(&dir);
                return;
            }
            let store = match BlockStore::open(&dir, self.params.store_options.clone()) {
                Ok(s) => Arc::new(s),
                Err(e) => {
                    tracing::error!(channel = %id, error = %e, "on-boarding: cannot open the ledger");
                    progress.failed.store(true, Ordering::Relaxed);
                    return;
                }
            };
            match onboarding::onboard(&node, &id, &store, &raw, &block, &progress).await {
                Ok(()) => break store,
                Err(e) => {
                    tracing::warn!(channel = %id, error = %e, "on-boarding failed; trying again");
                    progress.failures.fetch_add(1, Ordering::Relaxed);
                    if let OnboardError::WrongChain(_) = e {
                        drop(store);
                        let _ = std::fs::remove_dir_all(&dir);
                    }
                    tokio::time::sleep(onboarding::RETRY).await;
                }
            }
        };
        let _serial = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        if progress.cancelled.load(Ordering::Relaxed) {
            drop(store);
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        match self.start_channel(&id, store) {
            Ok(channel) => {
                onboarding::forget_join_block(&self.params.ledger_dir, &id);
                self.onboarding.write().unwrap_or_else(|e| e.into_inner()).remove(&id);
                self.write_channels().insert(id.clone(), channel);
                tracing::info!(channel = %id, "on-boarding done: channel started");
            }
            Err(e) => {
                tracing::error!(channel = %id, error = %e, "on-boarded channel cannot start");
                progress.failed.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Switches channel `id` from following to consenting (Fabric's `SwitchFollowerToChain`), once a config
    /// block stored in its ledger names this node a consenter: the follower is halted and the channel's consensus
    /// started on the same ledger.
    fn promote(&self, id: &str) {
        let _serial = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        let Some(channel) = self.channel(id) else { return };
        channel.consensus.halt();
        let store = channel.support.store().clone();
        match self.start_channel(id, store) {
            Ok(c) => {
                self.write_channels().insert(id.to_owned(), c);
                tracing::info!(channel = %id, "this orderer is now a consenter of the channel");
            }
            Err(e) => {
                tracing::error!(channel = %id, error = %e, "the channel's consensus cannot start");
                channel.support.set_errored(e);
            }
        }
    }

    /// Stops serving channel `id` and deletes its ledger (Fabric `RemoveChannel`). Blocking (file I/O).
    ///
    /// Errors: [`RemoveError`].
    pub fn remove(&self, id: &str) -> Result<(), RemoveError> {
        let _serial = self.changes.lock().unwrap_or_else(|e| e.into_inner());
        let onboarding = self.onboarding.write().unwrap_or_else(|e| e.into_inner()).remove(id);
        if let Some(o) = onboarding {
            o.cancelled.store(true, Ordering::Relaxed);
            onboarding::forget_join_block(&self.params.ledger_dir, id);
        } else {
            let channel = self.write_channels().remove(id).ok_or(RemoveError::NotFound)?;
            channel.consensus.halt();
        }
        let dir = self.params.ledger_dir.join("chains").join(id);
        std::fs::remove_dir_all(&dir).map_err(|e| RemoveError::Failed(format!("deleting {}: {e}", dir.display())))?;
        tracing::info!(channel = %id, "removed channel");
        Ok(())
    }

    /// Halts every channel's consensus and stops serving them (shutdown). Returns weak references to their
    /// ledgers, which close once the last stream and pipeline stage let go of them.
    pub fn close_all(&self) -> Vec<std::sync::Weak<BlockStore>> {
        for o in self.onboarding.write().unwrap_or_else(|e| e.into_inner()).drain() {
            o.1.cancelled.store(true, Ordering::Relaxed);
        }
        let channels: Vec<Arc<Channel>> = self.write_channels().drain().map(|(_, c)| c).collect();
        channels
            .iter()
            .map(|ch| {
                ch.consensus.halt();
                Arc::downgrade(ch.support.store())
            })
            .collect()
    }

    /// Counters of this node.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.params.metrics
    }
}
