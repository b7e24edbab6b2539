//! Everything a consensus implementation needs from its channel: [`ChainSupport`] (whose documentation describes
//! the block pipeline).

use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_block_store::BlockStore;
use ferrofabric_channelconfig::{BatchSize, ChannelConfig};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{Block, BlockHeader, ConfigEnvelope, Envelope, Payload};
use ferrofabric_protoutil::{block_header_hash, last_config_index, next_header, sign_and_encode, sole_config_envelope};
use prost::Message;
use tokio::sync::{mpsc, oneshot, watch};

use crate::configupdate::{signed_config_envelope, ConfigUpdateProcessor, MetadataValidator};
use crate::metrics::Metrics;
use crate::msgprocessor::{self, apply_filters, inspect, FilterOptions, Inspected, MsgClass, Rejection};

/// A block whose header is fixed but which is not signed yet (result of [`ChainSupport::create_next_block`]).
#[derive(Debug, Clone)]
pub struct NewBlock {
    /// Number, previous hash and data hash.
    pub header: BlockHeader,
    /// The marshaled envelopes, in order.
    pub envelopes: Vec<Bytes>,
}

/// Why a consensus operation could not be carried out. Broadcast reports it as SERVICE_UNAVAILABLE.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConsensusError(pub String);

enum Pending {
    Signing(u64, oneshot::Receiver<Bytes>),
    Ready(u64, Bytes),
}

/// Two chain tips: where the next *created* block goes (`assembly_*`, advanced by `create_next_block`) and where
/// the next *queued* block must go (`queued_*`, advanced by every write or append). They differ on a Raft leader
/// that has proposed blocks not committed yet.
struct WriterState {
    assembly_next: u64,
    assembly_previous_hash: [u8; 32],
    queued_next: u64,
    queued_previous_hash: [u8; 32],
    last_config_block: u64,
}

/// Static parts of a [`ChainSupport`].
pub struct SupportParams {
    /// The channel's ledger, already holding at least the join (genesis) block.
    pub store: Arc<BlockStore>,
    /// This node's signing identity (local MSP).
    pub signer: Arc<SigningIdentity>,
    /// Threads that check signatures and sign blocks.
    pub pool: Arc<rayon::ThreadPool>,
    /// The CONFIG_UPDATE implementation, if any.
    pub config_processor: Option<Arc<dyn ConfigUpdateProcessor>>,
    /// Checks the consensus metadata of a configuration a CONFIG_UPDATE proposes (the node's consensus
    /// registry).
    pub metadata_validator: Arc<dyn MetadataValidator>,
    /// Broadcast filter options.
    pub filter_options: FilterOptions,
    /// Blocks that may be signed ahead of the one being appended.
    pub signing_window: usize,
    /// This node's TLS (cluster) certificate, DER, if known: how consenter lists name this node.
    pub node_certificate: Option<Vec<u8>>,
    /// Counters.
    pub metrics: Arc<Metrics>,
}

/// One channel's support object. `Send + Sync`; shared as `Arc<ChainSupport>` by the
/// broadcast handler, the deliver handler and the consensus implementation.
///
/// Everything a consensus implementation needs from its channel (Fabric's `consensus.ConsenterSupport`, backed
/// by `multichannel.ChainSupport` and `BlockWriter`): the current configuration, message re-validation, block
/// assembly, the signing pool and the ledger.
///
/// # Block pipeline (FastFabric / BFT-SMaRt style signing)
/// 1. [`ChainSupport::create_next_block`] (called in order by the consensus loop) fixes the header: number,
///    previous header hash and data hash. It advances the assembly state immediately, so block `n + 1` can be
///    assembled while block `n` is still being signed.
/// 2. [`ChainSupport::write_block`] hands the block to the crypto thread pool, which builds the metadata
///    (SIGNATURES with `OrdererBlockMetadata{last_config, consenter_metadata}`, LAST_CONFIG), signs and
///    marshals it. Several blocks are signed at once, up to the signing window.
/// 3. A block writer thread takes the signed blocks strictly in order and appends them to the
///    [`BlockStore`]; Deliver streams wake up on the store's height channel.
///
/// A failed append (I/O error) marks the channel errored: Deliver answers SERVICE_UNAVAILABLE, Broadcast too,
/// and the pipeline stops (Fabric panics the process instead).
pub struct ChainSupport {
    channel_id: String,
    config: RwLock<Arc<ChannelConfig>>,
    params: SupportParams,
    writer: Mutex<WriterState>,
    block_writer_tx: mpsc::Sender<Pending>,
    errored: Arc<watch::Sender<Option<String>>>,
}

impl std::fmt::Debug for ChainSupport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChainSupport").field("channel_id", &self.channel_id).finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl ChainSupport {
    /// Opens the support of a channel whose ledger is `params.store` (height ≥ 1): loads the configuration of
    /// the last config block and the assembly state (tip number and hash, LAST_CONFIG), and starts the
    /// block writer thread.
    ///
    /// Errors: unreadable blocks or metadata, no valid configuration in the last config block.
    pub fn open(channel_id: &str, params: SupportParams) -> Result<Arc<ChainSupport>, crate::error::OrdererError> {
        let store = &params.store;
        let height = store.height();
        if height == 0 {
            return Err(crate::error::OrdererError::EmptyLedger(channel_id.to_owned()));
        }
        let tip_raw = store.block(height - 1)?.ok_or(crate::error::OrdererError::TipMissing(height - 1))?;
        let tip = Block::decode(tip_raw)?;
        let header = tip.header.clone().ok_or(crate::error::OrdererError::TipWithoutHeader)?;
        let last_config = if sole_config_envelope(&tip).is_some() {
            header.number
        } else {
            last_config_index(&tip).map_err(|e| crate::error::OrdererError::LastConfigIndex {
                number: header.number,
                detail: e.to_string(),
            })?
        };
        let config_block = if last_config == header.number {
            tip
        } else {
            let raw = store.block(last_config)?.ok_or(crate::error::OrdererError::LastConfigMissing(last_config))?;
            Block::decode(raw)?
        };
        let config = ChannelConfig::from_config_block(&config_block).map_err(|source| {
            crate::error::OrdererError::ChannelConfig { channel: channel_id.to_owned(), number: last_config, source }
        })?;
        if config.channel_id() != channel_id {
            return Err(crate::error::OrdererError::WrongChannel {
                number: last_config,
                found: config.channel_id().to_owned(),
                expected: channel_id.to_owned(),
            });
        }

        let (block_writer_tx, block_writer_rx) = mpsc::channel(params.signing_window.max(1));
        let (errored, _) = watch::channel(None);
        let errored = Arc::new(errored);
        {
            let store = params.store.clone();
            let errored = errored.clone();
            let metrics = params.metrics.clone();
            let name = channel_id.to_owned();
            std::thread::Builder::new()
                .name(format!("block-writer-{channel_id}"))
                .spawn(move || block_writer(&name, &store, block_writer_rx, &errored, &metrics))?;
        }
        Ok(Arc::new(ChainSupport {
            channel_id: channel_id.to_owned(),
            config: RwLock::new(Arc::new(config)),
            writer: Mutex::new(WriterState {
                assembly_next: header.number + 1,
                assembly_previous_hash: block_header_hash(&header),
                queued_next: header.number + 1,
                queued_previous_hash: block_header_hash(&header),
                last_config_block: last_config,
            }),
            params,
            block_writer_tx,
            errored,
        }))
    }

    /// The channel ID.
    pub fn channel_id(&self) -> &str {
        &self.channel_id
    }

    /// The channel's ledger.
    pub fn store(&self) -> &Arc<BlockStore> {
        &self.params.store
    }

    /// The current configuration (replaced when a config block is written).
    pub fn config(&self) -> Arc<ChannelConfig> {
        self.config.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The current config sequence.
    pub fn sequence(&self) -> u64 {
        self.config().sequence()
    }

    /// This node's signing identity.
    pub fn signer(&self) -> &Arc<SigningIdentity> {
        &self.params.signer
    }

    /// The crypto thread pool (signature checks, block signing).
    pub fn pool(&self) -> &Arc<rayon::ThreadPool> {
        &self.params.pool
    }

    /// This node's TLS (cluster) certificate in DER, if configured: consenter lists identify nodes by it.
    pub fn node_certificate(&self) -> Option<&[u8]> {
        self.params.node_certificate.as_deref()
    }

    /// Counters of this node.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.params.metrics
    }

    /// `BatchSize` and `BatchTimeout` of the current configuration (Fabric's defaults 500 messages / 10 MB /
    /// 2 MB / 2 s if the config has no Orderer group, which a joined channel always has).
    pub fn batch_limits(&self) -> (BatchSize, Duration) {
        let config = self.config();
        match config.orderer() {
            Some(oc) => (oc.batch_size(), oc.batch_timeout()),
            None => (
                BatchSize { max_message_count: 500, absolute_max_bytes: 10 << 20, preferred_max_bytes: 2 << 20 },
                Duration::from_secs(2),
            ),
        }
    }

    /// Fabric `ProcessNormalMsg` for a message that is not inspected yet (decode, maintenance rule, filters)
    /// against the current configuration; returns the config sequence it was checked at.
    ///
    /// Errors: the [`Rejection`] the broadcast handler would have given.
    pub fn process_normal(&self, msg: &Inspected) -> Result<u64, Rejection> {
        let config = self.config();
        msgprocessor::check_not_maintenance(&config)?;
        apply_filters(msg, &config, self.params.filter_options)?;
        Ok(config.sequence())
    }

    /// Re-validates an already ordered normal message after a config change (consensus loops call this when
    /// the sequence a message was checked at is older than the current one).
    ///
    /// Errors: the message no longer passes.
    pub fn revalidate(&self, raw: &Bytes) -> Result<u64, Rejection> {
        self.process_normal(&inspect(raw.clone())?)
    }

    /// Fabric `ProcessConfigUpdateMsg`: filters on the CONFIG_UPDATE, the [`ConfigUpdateProcessor`], a CONFIG
    /// envelope signed by this node, the filters again on that. Returns the marshaled CONFIG envelope and the
    /// sequence it was computed at.
    ///
    /// Errors: BAD_REQUEST "not supported" without a processor; the filters' rejections (FORBIDDEN if the
    /// submitter fails `/Channel/Writers`); BAD_REQUEST with the processor's error (as Fabric, also when the
    /// update's signatures do not satisfy a `mod_policy`).
    pub fn process_config_update(&self, msg: &Inspected) -> Result<(Bytes, u64), Rejection> {
        let Some(processor) = &self.params.config_processor else {
            return Err(Rejection::bad_request(
                "CONFIG_UPDATE processing is not supported by this orderer node (no config update processor)",
            ));
        };
        let config = self.config();
        apply_filters(msg, &config, self.params.filter_options).map_err(|r| Rejection {
            status: r.status,
            info: format!("config update for existing channel did not pass initial checks: {}", r.info),
        })?;
        let next = self.propose_config_update(processor.as_ref(), &config, &msg.envelope).map_err(|e| {
            Rejection::bad_request(format!(
                "error applying config update to existing channel '{}': {e}",
                self.channel_id
            ))
        })?;
        let raw = signed_config_envelope(&self.channel_id, &next, &self.params.signer);
        let wrapped = inspect(raw.clone())?;
        apply_filters(&wrapped, &config, self.params.filter_options).map_err(|r| Rejection {
            status: r.status,
            info: format!("config update for existing channel did not pass final checks: {}", r.info),
        })?;
        Ok((raw, config.sequence()))
    }

    /// Fabric `ChainSupport.ProposeConfigUpdate`: the processor's next configuration, then the consensus
    /// implementation's check of its consensus metadata.
    ///
    /// Errors: the processor's; a configuration that does not parse; the metadata check's, prefixed with
    /// Fabric's `consensus metadata update for channel config update is invalid: `.
    fn propose_config_update(
        &self,
        processor: &dyn ConfigUpdateProcessor,
        config: &Arc<ChannelConfig>,
        update: &Envelope,
    ) -> Result<ConfigEnvelope, Box<dyn std::error::Error + Send + Sync>> {
        let next = processor.propose_config_update(config, update)?;
        let proposed = next.config.as_ref().ok_or("the proposed config envelope has no config")?;
        let parsed = ChannelConfig::from_config(&self.channel_id, proposed)?;
        self.params
            .metadata_validator
            .validate_consensus_metadata(config, &parsed)
            .map_err(|e| format!("consensus metadata update for channel config update is invalid: {e}"))?;
        Ok(next)
    }

    /// Fabric `ProcessConfigMsg`: re-derives a CONFIG envelope from the CONFIG_UPDATE it carries
    /// (`ConfigEnvelope.last_update`), for config messages ordered before a config change.
    ///
    /// Errors: not a CONFIG envelope, no last update, or the update no longer applies.
    pub fn reprocess_config(&self, raw: &Bytes) -> Result<(Bytes, u64), Rejection> {
        let msg = inspect(raw.clone())?;
        if msgprocessor::classify(msg.channel_header.r#type) != MsgClass::Config {
            return Err(Rejection::bad_request("not a CONFIG message"));
        }
        let payload = Payload::decode(msg.envelope.payload.clone())
            .map_err(|e| Rejection::bad_request(format!("bad CONFIG payload: {e}")))?;
        let ce = ConfigEnvelope::decode(payload.data)
            .map_err(|e| Rejection::bad_request(format!("bad ConfigEnvelope: {e}")))?;
        let update = ce.last_update.ok_or_else(|| Rejection::bad_request("CONFIG message without last_update"))?;
        self.process_config_update(&inspect(Bytes::from(update.encode_to_vec()))?)
    }

    /// Fabric `CreateNextBlock`: fixes number, previous hash and data hash of the block holding `envelopes`
    /// and advances the assembly state. Every block created must then be written, in creation order.
    pub fn create_next_block(&self, envelopes: Vec<Bytes>) -> NewBlock {
        let mut w = lock(&self.writer);
        let header = next_header(w.assembly_next, &w.assembly_previous_hash, &envelopes);
        w.assembly_next += 1;
        w.assembly_previous_hash = block_header_hash(&header);
        NewBlock { header, envelopes }
    }

    /// Resets block creation to continue from the last queued block (a Raft node that becomes leader, or a
    /// leader whose uncommitted proposals were dropped).
    pub fn reset_assembly(&self) {
        let mut w = lock(&self.writer);
        w.assembly_next = w.queued_next;
        w.assembly_previous_hash = w.queued_previous_hash;
    }

    /// The number the next queued block must have (the ledger height once every queued block is appended).
    pub fn next_queued_number(&self) -> u64 {
        lock(&self.writer).queued_next
    }

    /// Signs `block` on the crypto pool as [`Self::write_block`] would (LAST_CONFIG: the block itself if it is
    /// a config block, else the current last config block) and returns the marshaled block *without* queuing
    /// it: a Raft leader proposes these bytes and appends them with [`Self::append_block`] once committed.
    ///
    /// Errors: the crypto pool dropped the job (shutdown).
    pub async fn sign_block(&self, block: NewBlock, consenter_metadata: Bytes) -> Result<Bytes, ConsensusError> {
        let as_block = Block {
            header: Some(block.header.clone()),
            data: Some(ferrofabric_protos::common::BlockData { data: block.envelopes.clone() }),
            metadata: None,
        };
        let last_config = if sole_config_envelope(&as_block).is_some() {
            block.header.number
        } else {
            lock(&self.writer).last_config_block
        };
        self.spawn_signing(block, last_config, consenter_metadata)
            .await
            .map_err(|_| ConsensusError("block signing was abandoned".into()))
    }

    /// Fabric `WriteBlock`: signs `block` on the crypto pool with this node's identity, recording
    /// `consenter_metadata` in `OrdererBlockMetadata` and the current LAST_CONFIG index, and queues it for the
    /// in-order append. Returns once the block is queued (waits while the signing window is full).
    ///
    /// Errors: the channel is errored or halted.
    pub async fn write_block(&self, block: NewBlock, consenter_metadata: Bytes) -> Result<(), ConsensusError> {
        let last_config = lock(&self.writer).last_config_block;
        self.sign_and_queue(block, last_config, consenter_metadata).await
    }

    /// Fabric `WriteConfigBlock`: `block` must hold one CONFIG envelope; its configuration replaces the
    /// current one *now* (messages checked afterwards see the new sequence), the block becomes the last config
    /// block and is written as [`Self::write_block`] does.
    ///
    /// Errors: the block is not a config block or its configuration does not parse (the channel is marked
    /// errored: Fabric panics here), or the channel is errored or halted.
    pub async fn write_config_block(&self, block: NewBlock, consenter_metadata: Bytes) -> Result<(), ConsensusError> {
        let number = block.header.number;
        let as_block = Block {
            header: Some(block.header.clone()),
            data: Some(ferrofabric_protos::common::BlockData { data: block.envelopes.clone() }),
            metadata: None,
        };
        let env = sole_config_envelope(&as_block)
            .ok_or_else(|| self.fail(format!("block {number} written as a config block holds no CONFIG envelope")))?;
        let config = ChannelConfig::from_envelope(&env)
            .map_err(|e| self.fail(format!("config block {number} does not hold a valid configuration: {e}")))?;
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
        lock(&self.writer).last_config_block = number;
        self.sign_and_queue(block, number, consenter_metadata).await
    }

    /// Appends a block that is already complete and signed (replicated from a Raft leader, or carrying a BFT
    /// quorum of signatures): checks that it continues the chain, applies its configuration if it is a config
    /// block, and queues it behind the blocks being signed.
    ///
    /// Errors: undecodable block, wrong number or previous hash, bad configuration, channel errored or halted.
    pub async fn append_block(&self, raw: Bytes) -> Result<(), ConsensusError> {
        let block = Block::decode(raw.clone()).map_err(|e| ConsensusError(format!("block does not decode: {e}")))?;
        let header = block.header.clone().ok_or_else(|| ConsensusError("block has no header".into()))?;
        {
            let mut w = lock(&self.writer);
            if header.number != w.queued_next || header.previous_hash.as_ref() != w.queued_previous_hash {
                return Err(ConsensusError(format!(
                    "block {} does not continue the chain (expected block {})",
                    header.number, w.queued_next
                )));
            }
            if let Some(env) = sole_config_envelope(&block) {
                let config = ChannelConfig::from_envelope(&env)
                    .map_err(|e| ConsensusError(format!("config block {}: {e}", header.number)))?;
                *self.config.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
                w.last_config_block = header.number;
            }
            w.queued_next += 1;
            w.queued_previous_hash = block_header_hash(&header);
        }
        self.block_writer_tx
            .send(Pending::Ready(header.number, raw))
            .await
            .map_err(|_| ConsensusError("the channel's block writer has stopped".into()))
    }

    fn spawn_signing(&self, block: NewBlock, last_config: u64, consenter: Bytes) -> oneshot::Receiver<Bytes> {
        let (tx, rx) = oneshot::channel();
        let signer = self.params.signer.clone();
        self.params.pool.spawn(move || {
            let bytes =
                sign_and_encode(block.header, block.envelopes, last_config, &consenter, signer.serialized(), |m| {
                    signer.sign(m)
                });
            // The receiver is gone only when the channel was halted; the block is then dropped.
            let _ = tx.send(bytes);
        });
        rx
    }

    async fn sign_and_queue(&self, block: NewBlock, last_config: u64, consenter: Bytes) -> Result<(), ConsensusError> {
        if let Some(reason) = self.errored() {
            return Err(ConsensusError(reason));
        }
        let number = block.header.number;
        {
            let mut w = lock(&self.writer);
            if number != w.queued_next || block.header.previous_hash.as_ref() != w.queued_previous_hash {
                return Err(ConsensusError(format!(
                    "block {number} written out of order (expected block {})",
                    w.queued_next
                )));
            }
            w.queued_next += 1;
            w.queued_previous_hash = block_header_hash(&block.header);
        }
        let rx = self.spawn_signing(block, last_config, consenter);
        self.block_writer_tx
            .send(Pending::Signing(number, rx))
            .await
            .map_err(|_| ConsensusError("the channel's block writer has stopped".into()))
    }

    fn fail(&self, reason: String) -> ConsensusError {
        tracing::error!(channel = %self.channel_id, %reason, "channel errored");
        self.errored.send_replace(Some(reason.clone()));
        ConsensusError(reason)
    }

    /// Why the channel stopped working, if it did (Fabric's `Chain.Errored`); Deliver then answers
    /// SERVICE_UNAVAILABLE.
    pub fn errored(&self) -> Option<String> {
        self.errored.borrow().clone()
    }

    /// A receiver that changes when the channel becomes errored.
    pub fn subscribe_errored(&self) -> watch::Receiver<Option<String>> {
        self.errored.subscribe()
    }

    /// Marks the channel errored with `reason` (used by consensus implementations that lose their quorum or
    /// their connection, as Fabric's Kafka and Raft chains close their error channel).
    pub fn set_errored(&self, reason: impl Into<String>) {
        let _ = self.fail(reason.into());
    }

    /// Clears the errored state (e.g. a Raft node that rejoined its quorum).
    pub fn clear_errored(&self) {
        self.errored.send_replace(None);
    }
}

/// Appends signed blocks in order until the queue closes or an append fails.
fn block_writer(
    channel: &str,
    store: &BlockStore,
    mut rx: mpsc::Receiver<Pending>,
    errored: &watch::Sender<Option<String>>,
    metrics: &Metrics,
) {
    while let Some(pending) = rx.blocking_recv() {
        let (number, bytes) = match pending {
            Pending::Ready(n, b) => (n, b),
            Pending::Signing(n, rx) => match rx.blocking_recv() {
                Ok(b) => (n, b),
                Err(_) => {
                    let reason = format!("signing of block {n} was abandoned");
                    tracing::error!(%channel, %reason, "block writer stopped");
                    errored.send_replace(Some(reason));
                    return;
                }
            },
        };
        let size = bytes.len();
        if let Err(e) = store.append(bytes) {
            let reason = format!("could not append block {number}: {e}");
            tracing::error!(%channel, %reason, "block writer stopped");
            errored.send_replace(Some(reason));
            return;
        }
        metrics.block_written(size);
        tracing::debug!(%channel, number, size, "wrote block");
    }
}
