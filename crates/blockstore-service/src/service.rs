//! A running block-store service ([`start`], [`RunningBlockstore`]): the follower of the committer, the store thread,
//! and the listeners.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_block_store::{BlockStore, StoreError, StoreOptions, SyncPolicy};
use ferrofabric_channelconfig::ChannelConfig;
use ferrofabric_comm::{parse_addr, parse_duration, ClientTls, DeliverApi, Health, Shutdown, ShutdownTrigger};
use ferrofabric_deliver::{DeliverLedger, DeliverMetrics, Fetched, Follower, PeerDeliverService};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{Block, BlockMetadataIndex, Envelope};
use ferrofabric_protos::ferrofabric::blockstore::block_store_server::{BlockStore as BlockStoreApi, BlockStoreServer};
use ferrofabric_protos::ferrofabric::blockstore::{
    BlockByHashRequest, BlockByNumberRequest, ChainInfo, ChainInfoRequest, TransactionByIdRequest,
};
use ferrofabric_protos::peer::{ProcessedTransaction, TxValidationCode};
use ferrofabric_protoutil::{is_config_block, last_config_index};
use prost::Message;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tonic::{Request, Response, Status};

use crate::config::BlockstoreConfig;
use crate::error::BlockstoreError;

/// Blocks received and not yet stored, at most.
const IN_FLIGHT: usize = 16;

/// The configuration in force at the head of `store`: the config block named by the last block's metadata
/// (`OrdererBlockMetadata.last_config` in SIGNATURES, else the deprecated LAST_CONFIG entry), else the newest config
/// block found by scanning back. `None` for an empty store.
///
/// Errors: unreadable blocks, a config block whose configuration does not load.
pub(crate) fn current_config(store: &BlockStore) -> Result<Option<ChannelConfig>, BlockstoreError> {
    let height = store.height();
    if height == 0 {
        return Ok(None);
    }
    let read = |n: u64| -> Result<Block, BlockstoreError> {
        let raw = store.block(n)?.ok_or(BlockstoreError::BlockMissing(n))?;
        Block::decode(raw).map_err(|source| BlockstoreError::BlockUndecodable { number: n, source })
    };
    let last = read(height - 1)?;
    let candidates = last_config_index(&last).ok().into_iter().chain((0..height).rev());
    for n in candidates.filter(|n| *n < height) {
        let block = if n == height - 1 { last.clone() } else { read(n)? };
        if is_config_block(&block) {
            let config = ChannelConfig::from_config_block(&block)
                .map_err(|source| BlockstoreError::ConfigBlock { number: n, source })?;
            return Ok(Some(config));
        }
    }
    Err(BlockstoreError::NoConfigBlock)
}

/// The validation code of transaction `index` in a stored block (from TRANSACTIONS_FILTER).
fn validation_code(block: &Block, index: usize) -> i32 {
    block
        .metadata
        .as_ref()
        .and_then(|m| m.metadata.get(BlockMetadataIndex::TransactionsFilter as usize))
        .and_then(|f| f.get(index))
        .map(|c| i32::from(*c))
        .unwrap_or(TxValidationCode::NotValidated as i32)
}

/// The store thread: appends the received blocks in order and tracks the channel configuration.
fn store_loop(
    store: &BlockStore,
    mut blocks: mpsc::Receiver<Fetched>,
    restart: mpsc::Sender<u64>,
    config_tx: &watch::Sender<Option<Arc<ChannelConfig>>>,
    height_gauge: &prometheus::IntGauge,
) -> Result<(), BlockstoreError> {
    while let Some(f) = blocks.blocking_recv() {
        if f.number != store.height() {
            // Left over from a stream that was abandoned after a refusal.
            continue;
        }
        match store.append(f.bytes.clone()) {
            Ok(()) => {}
            Err(e @ (StoreError::Io { .. } | StoreError::Index { .. } | StoreError::Broken(_))) => {
                return Err(BlockstoreError::StoreBlock { number: f.number, source: e });
            }
            Err(e) => {
                tracing::warn!(number = f.number, error = %e, "block does not extend the stored chain; asking again");
                if restart.blocking_send(store.height()).is_err() {
                    return Ok(());
                }
                continue;
            }
        }
        height_gauge.set(store.height() as i64);
        if let Ok(block) = Block::decode(f.bytes) {
            if is_config_block(&block) && validation_code(&block, 0) == TxValidationCode::Valid as i32 {
                match ChannelConfig::from_config_block(&block) {
                    Ok(c) => {
                        config_tx.send_replace(Some(Arc::new(c)));
                    }
                    Err(e) => tracing::error!(number = f.number, error = %e, "config block does not load"),
                }
            }
        }
    }
    store.sync().map_err(BlockstoreError::Sync)?;
    Ok(())
}

/// The `ferrofabric.blockstore.BlockStore` query service over a store.
#[derive(Debug, Clone)]
pub(crate) struct QueryService {
    store: Arc<BlockStore>,
}

impl QueryService {
    /// Serves queries from `store`.
    pub(crate) fn new(store: Arc<BlockStore>) -> Self {
        QueryService { store }
    }

    fn block(&self, number: u64) -> Result<Block, Status> {
        let raw = self
            .store
            .block(number)
            .map_err(|e| Status::internal(format!("reading block {number}: {e}")))?
            .ok_or_else(|| {
                Status::not_found(format!("block {number} is not stored (height {})", self.store.height()))
            })?;
        Block::decode(raw).map_err(|e| Status::internal(format!("stored block {number} does not decode: {e}")))
    }

    fn locate(&self, tx_id: &str) -> Result<(u64, u32), Status> {
        if tx_id.is_empty() {
            return Err(Status::invalid_argument("empty transaction ID"));
        }
        self.store
            .tx_location(tx_id)
            .map_err(|e| Status::internal(format!("txid index: {e}")))?
            .ok_or_else(|| Status::not_found(format!("transaction {tx_id} not found")))
    }
}

#[tonic::async_trait]
impl BlockStoreApi for QueryService {
    async fn get_chain_info(&self, _: Request<ChainInfoRequest>) -> Result<Response<ChainInfo>, Status> {
        let height = self.store.height();
        let mut info = ChainInfo { height, ..ChainInfo::default() };
        if height > 0 {
            let last = self.block(height - 1)?;
            let header = last.header.unwrap_or_default();
            info.current_block_hash = Bytes::copy_from_slice(&ferrofabric_protoutil::block_header_hash(&header));
            info.previous_block_hash = header.previous_hash;
        }
        Ok(Response::new(info))
    }

    async fn get_block_by_number(&self, request: Request<BlockByNumberRequest>) -> Result<Response<Block>, Status> {
        self.block(request.into_inner().number).map(Response::new)
    }

    async fn get_block_by_hash(&self, request: Request<BlockByHashRequest>) -> Result<Response<Block>, Status> {
        let hash = request.into_inner().hash;
        let number = self
            .store
            .block_number_by_hash(&hash)
            .map_err(|e| Status::internal(format!("block-hash index: {e}")))?
            .ok_or_else(|| Status::not_found(format!("no block has header hash {}", hex::encode(&hash))))?;
        self.block(number).map(Response::new)
    }

    async fn get_transaction_by_id(
        &self,
        request: Request<TransactionByIdRequest>,
    ) -> Result<Response<ProcessedTransaction>, Status> {
        let (number, index) = self.locate(&request.into_inner().tx_id)?;
        let block = self.block(number)?;
        let raw = block
            .data
            .as_ref()
            .and_then(|d| d.data.get(index as usize))
            .ok_or_else(|| Status::internal(format!("block {number} has no transaction {index}")))?;
        let envelope = Envelope::decode(raw.clone())
            .map_err(|e| Status::internal(format!("transaction {index} of block {number}: {e}")))?;
        Ok(Response::new(ProcessedTransaction {
            transaction_envelope: Some(envelope),
            validation_code: validation_code(&block, index as usize),
        }))
    }

    async fn get_block_by_tx_id(&self, request: Request<TransactionByIdRequest>) -> Result<Response<Block>, Status> {
        let (number, _) = self.locate(&request.into_inner().tx_id)?;
        self.block(number).map(Response::new)
    }
}

/// A running block-store service: the follower of the committer, the store thread, and the listeners. Dropping it
/// does not stop it; call [`RunningBlockstore::shutdown`].
///
/// ```text
/// committer ──peer Deliver──▶ follower task ──(≤ 16 blocks)──▶ store thread ──▶ BlockStore ──▶ BlockStore gRPC
///      ▲   restart(height) when a block does not extend the stored chain ◀──┘                 └─▶ peer Deliver
/// ```
/// The follower asks for blocks from the store's height, so a restart (after a crash too) resumes exactly where the
/// store ends: appended blocks survive a process crash (see `ferrofabric-block-store`), and a block in flight at a
/// crash is simply asked for again.
pub struct RunningBlockstore {
    /// Bound address of the gRPC listener (BlockStore queries and peer Deliver).
    pub listen_addr: SocketAddr,
    /// Bound address of the operations listener, if enabled.
    pub operations_addr: Option<SocketAddr>,
    /// The stored blocks.
    pub store: Arc<BlockStore>,
    health: watch::Receiver<Option<String>>,
    shutdown: ShutdownTrigger,
    follower: JoinHandle<()>,
    storer: JoinHandle<Result<(), BlockstoreError>>,
    listeners: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for RunningBlockstore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningBlockstore")
            .field("listen_addr", &self.listen_addr)
            .field("height", &self.store.height())
            .finish_non_exhaustive()
    }
}

impl RunningBlockstore {
    /// Runs until storing fails (returning the error) or `stop` completes (then shuts down cleanly).
    ///
    /// Errors: the storage error.
    pub async fn run_until(mut self, stop: impl std::future::Future<Output = ()>) -> Result<(), BlockstoreError> {
        let mut health = self.health.clone();
        tokio::select! {
            _ = stop => {}
            _ = health.wait_for(|h| h.is_some()) => {}
        }
        self.stop().await
    }

    /// Stops following, stores what was received, closes the listeners.
    ///
    /// Errors: storing had failed.
    pub async fn shutdown(mut self) -> Result<(), BlockstoreError> {
        self.stop().await
    }

    async fn stop(&mut self) -> Result<(), BlockstoreError> {
        self.follower.abort();
        let _ = (&mut self.follower).await;
        let result = match (&mut self.storer).await {
            Ok(r) => r,
            Err(e) => Err(BlockstoreError::StoreTask(e)),
        };
        self.shutdown.fire();
        for l in self.listeners.drain(..) {
            let _ = l.await;
        }
        result
    }
}

/// Starts the service on the current (multi-threaded) Tokio runtime.
///
/// Errors: invalid configuration, unreadable MSP or TLS files, a store that cannot be opened, listeners that
/// cannot bind.
pub async fn start(config: BlockstoreConfig) -> Result<RunningBlockstore, BlockstoreError> {
    config.validate()?;
    let data_dir = config.data_dir.clone().ok_or(BlockstoreError::MissingSetting("DataDir is not set"))?;
    let (msp_dir, msp_id) = match (&config.local_msp_dir, &config.local_msp_id) {
        (Some(d), Some(id)) => (d.clone(), id.clone()),
        _ => return Err(BlockstoreError::MissingSetting("LocalMSPDir and LocalMSPID must be set")),
    };
    let signer =
        Arc::new(SigningIdentity::from_msp_dir(&msp_id, &msp_dir).map_err(|source| BlockstoreError::LocalMsp {
            msp_id: msp_id.clone(),
            dir: msp_dir.clone(),
            source,
        })?);
    let options = StoreOptions {
        sync: if config.sync_every_block { SyncPolicy::EveryBlock } else { SyncPolicy::None },
        ..StoreOptions::default()
    };
    let dir = data_dir.join("ledger");
    let store = Arc::new(
        BlockStore::open(&dir, options).map_err(|source| BlockstoreError::OpenStore { dir: dir.clone(), source })?,
    );
    if let Some(t) = &store.recovery().truncated {
        tracing::warn!(path = %t.path.display(), dropped = t.dropped_bytes, "cut a torn block off the store");
    }
    let initial = current_config(&store)?;
    if let Some(c) = &initial {
        if c.channel_id() != config.channel {
            return Err(BlockstoreError::WrongChannel {
                found: c.channel_id().to_owned(),
                expected: config.channel.clone(),
            });
        }
    }
    let (config_tx, config_rx) = watch::channel(initial.map(Arc::new));

    let registry = Arc::new(prometheus::Registry::new());
    let height_gauge = prometheus::IntGauge::with_opts(
        prometheus::Opts::new("ledger_blockchain_height", "Height of the stored chain in blocks.")
            .const_label("channel", config.channel.as_str()),
    )?;
    registry.register(Box::new(height_gauge.clone()))?;
    height_gauge.set(store.height() as i64);
    let deliver_metrics = DeliverMetrics::register(&registry)?;
    let (health_tx, health_rx) = watch::channel(None);
    let (shutdown_tx, shutdown_rx) = Shutdown::new();

    let mut listeners = Vec::new();
    let ledger = DeliverLedger { channel_id: config.channel.clone(), store: store.clone(), config: config_rx };
    let deliver = PeerDeliverService::with_shutdown(
        ledger,
        parse_duration(&config.time_window)?,
        Some(deliver_metrics),
        shutdown_rx.clone(),
    );
    let queries = BlockStoreServer::new(QueryService::new(store.clone())).max_encoding_message_size(256 << 20);
    let (listen_addr, task) =
        ferrofabric_comm::grpc_listener(&config.listen_address, &config.tls, shutdown_rx.clone(), |b| {
            b.add_service(ferrofabric_comm::StreamService(deliver)).add_service(queries)
        })?;
    listeners.push(task);
    let mut operations_addr = None;
    if !config.operations_listen_address.is_empty() {
        let health: Health = health_rx.clone();
        let router = ferrofabric_comm::operations_router(registry.clone(), health, "blockstore");
        let (addr, task) = ferrofabric_comm::serve_operations(
            parse_addr(&config.operations_listen_address)?,
            router,
            shutdown_rx.clone(),
        )
        .await?;
        operations_addr = Some(addr);
        listeners.push(task);
    }

    let (blocks_tx, blocks_rx) = mpsc::channel(IN_FLIGHT);
    let (restart_tx, restart_rx) = mpsc::channel(4);
    let storer = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || {
            let result = store_loop(&store, blocks_rx, restart_tx, &config_tx, &height_gauge);
            if let Err(e) = &result {
                tracing::error!(error = %e, "storing blocks failed");
                health_tx.send_replace(Some(e.to_string()));
            }
            result
        })
    };
    let follow = config.delivery.follow_config(
        config.committers.clone(),
        DeliverApi::Peer,
        config.channel.clone(),
        ClientTls::from_config(&config.committer_tls)?,
    )?;
    let follower = tokio::spawn(Follower::new(follow, signer).run(store.height(), blocks_tx, Some(restart_rx)));
    tracing::info!(%listen_addr, height = store.height(), "block-store service started");
    Ok(RunningBlockstore {
        listen_addr,
        operations_addr,
        store,
        health: health_rx,
        shutdown: shutdown_tx,
        follower,
        storer,
        listeners,
    })
}
