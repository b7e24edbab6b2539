//! Starting an orderer node: local MSP, ledger, channels, and the three listeners (gRPC AtomicBroadcast,
//! admin/channel participation, operations). Fabric `orderer/common/server/main.go`, reduced to what this
//! node implements.

use std::net::SocketAddr;
use std::sync::Arc;

use ferrofabric_block_store::{StoreOptions, SyncPolicy};
use ferrofabric_msp::SigningIdentity;
use tokio::task::JoinHandle;
use tonic::service::Routes;

use crate::broadcast::BroadcastHandler;
use crate::config::OrdererConfig;
use crate::configupdate::{ConfigTxProcessor, ConfigUpdateProcessor};
use crate::consensus::{ConsensusContext, ConsensusRegistry};
use crate::error::OrdererError;
use crate::grpc::AtomicBroadcastService;
use crate::metrics::Metrics;
use crate::msgprocessor::FilterOptions;
use crate::registrar::{Registrar, RegistrarParams};
use crate::{deliver, operations, participation};
use ferrofabric_comm::{
    http_server_tls, parse_addr, parse_duration, pem_cert_der, serve_http, Shutdown, ShutdownTrigger,
};

/// Pluggable parts of a node: the consensus implementations, the gRPC services they need, and the
/// CONFIG_UPDATE processor.
///
/// The default has no consensus type: whoever starts a node composes the backends it wants from their crates
/// (`ferrofabric_consensus_solo::register`, `ferrofabric_consensus_etcdraft::register`), so this crate depends on
/// no consensus engine.
#[derive(Clone)]
pub struct Plugins {
    /// Consensus types this node runs (default: none).
    pub registry: ConsensusRegistry,
    /// Further gRPC services served on the node's gRPC listener beside AtomicBroadcast, e.g. etcdraft's
    /// `orderer.Cluster` (default: none).
    pub services: Routes,
    /// CONFIG_UPDATE implementation (default: [`ConfigTxProcessor`]); with `None`, CONFIG_UPDATE messages get
    /// BAD_REQUEST "not supported".
    pub config_processor: Option<Arc<dyn ConfigUpdateProcessor>>,
}

impl Default for Plugins {
    fn default() -> Self {
        Plugins {
            registry: ConsensusRegistry::default(),
            services: Routes::default(),
            config_processor: Some(Arc::new(ConfigTxProcessor)),
        }
    }
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugins")
            .field("registry", &self.registry)
            .field("config_processor", &self.config_processor.is_some())
            .finish()
    }
}

/// A running node. Dropping it does not stop it; call [`RunningOrderer::shutdown`].
pub struct RunningOrderer {
    /// Bound address of the gRPC (AtomicBroadcast) listener.
    pub grpc_addr: SocketAddr,
    /// Bound address of the admin (channel participation) listener, if enabled.
    pub admin_addr: Option<SocketAddr>,
    /// Bound address of the operations listener, if enabled.
    pub operations_addr: Option<SocketAddr>,
    /// The channels.
    pub registrar: Arc<Registrar>,
    shutdown: ShutdownTrigger,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for RunningOrderer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningOrderer")
            .field("grpc_addr", &self.grpc_addr)
            .field("admin_addr", &self.admin_addr)
            .field("operations_addr", &self.operations_addr)
            .finish_non_exhaustive()
    }
}

impl RunningOrderer {
    /// Stops the listeners, ends open Broadcast and Deliver streams, halts every channel's consensus, and
    /// waits (up to 5 s) for the listeners to close.
    pub async fn shutdown(self) {
        self.shutdown.fire();
        let stores = self.registrar.close_all();
        let tasks = self.tasks;
        let aborts: Vec<_> = tasks.iter().map(JoinHandle::abort_handle).collect();
        if tokio::time::timeout(std::time::Duration::from_secs(5), futures::future::join_all(tasks)).await.is_err() {
            tracing::warn!("listeners did not close within 5 s; aborting them");
            for a in aborts {
                a.abort();
            }
        }
        // Ledgers close when the consensus loops and commit threads have stopped; wait so that a node restarted
        // on the same directory can open them.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        while stores.iter().any(|s| s.strong_count() > 0) && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// Waits until a listener task ends (normally never), then shuts down.
    pub async fn wait(mut self) {
        if !self.tasks.is_empty() {
            let (_, _, rest) = futures::future::select_all(std::mem::take(&mut self.tasks)).await;
            self.tasks = rest;
        }
        self.shutdown().await;
    }
}

/// Starts a node from `config` on the current Tokio runtime (multi-threaded), running the consensus types and
/// serving the gRPC services of `plugins`.
///
/// Errors: no local MSP directory or ID, no ledger location, unreadable MSP or TLS material, a listener that
/// cannot bind, a stored channel that cannot be opened, admin TLS without client authentication (Fabric
/// requires it).
pub async fn start(config: OrdererConfig, plugins: Plugins) -> Result<RunningOrderer, OrdererError> {
    let general = &config.general;
    let msp_dir = general.local_msp_dir.clone().ok_or(OrdererError::NotSet("General.LocalMSPDir (--msp-dir)"))?;
    let msp_id = general.local_msp_id.clone().ok_or(OrdererError::NotSet("General.LocalMSPID (--msp-id)"))?;
    let signer = SigningIdentity::from_msp_dir(&msp_id, &msp_dir).map_err(|source| OrdererError::LocalMsp {
        msp_id: msp_id.clone(),
        dir: msp_dir.clone(),
        source,
    })?;
    let ledger_dir =
        config.file_ledger.location.clone().ok_or(OrdererError::NotSet("FileLedger.Location (--data-dir)"))?;
    let tuning = &config.ferrofabric;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(tuning.crypto_threads)
        .thread_name(|i| format!("orderer-crypto-{i}"))
        .build()
        .map_err(OrdererError::CryptoPool)?;
    let pool = Arc::new(pool);
    let node_cert_path = general.cluster.client_certificate.clone().or_else(|| general.tls.certificate.clone());
    let node_certificate = match node_cert_path {
        Some(p) => Some(
            pem_cert_der(&std::fs::read(&p).map_err(|source| OrdererError::ReadFile {
                what: String::new(),
                path: p.clone(),
                source,
            })?)
            .ok_or_else(|| OrdererError::NoCertificate(p.clone()))?,
        ),
        None => None,
    };
    let metrics = Arc::new(Metrics::default());
    let registrar = Registrar::open(RegistrarParams {
        ledger_dir,
        signer: Arc::new(signer),
        pool: pool.clone(),
        registry: plugins.registry,
        consensus: ConsensusContext {
            queue_size: tuning.queue_size,
            queue_timeout: config.queue_timeout()?,
            wal_dir: config.consensus.wal_dir.clone(),
            snap_dir: config.consensus.snap_dir.clone(),
        },
        config_processor: plugins.config_processor,
        filter_options: FilterOptions { no_expiration_checks: general.authentication.no_expiration_checks },
        signing_window: tuning.signing_window,
        store_options: StoreOptions {
            sync: if tuning.sync_every_block { SyncPolicy::EveryBlock } else { SyncPolicy::None },
            // Fabric's orderer ledger indexes block numbers only.
            index_txids: false,
            // The orderer assembles its blocks (or checked them: BFT proposals, pulled blocks, join blocks).
            verify_data_hash: false,
            ..StoreOptions::default()
        },
        node_certificate,
        cluster_tls: config.cluster_tls()?,
        listen_port: config.listen_addr().map(|a| a.port()).unwrap_or(0),
        metrics,
    })?;

    let (shutdown, shutdown_rx) = Shutdown::new();
    let mut tasks = Vec::new();

    // gRPC.
    let window = if tuning.parallel_checks { tuning.broadcast_window } else { 1 };
    let broadcast = Arc::new(BroadcastHandler::new(registrar.clone(), pool, window, shutdown_rx.watch()));
    let deliver = Arc::new(deliver::handler(registrar.clone(), config.time_window()?, shutdown_rx.clone()));
    let max_recv = general.max_recv_msg_size.unwrap_or(100 << 20) as usize;
    let max_send = general.max_send_msg_size.unwrap_or(100 << 20) as usize;
    let service = AtomicBroadcastService::new(broadcast, deliver, max_recv, max_send);
    let (incoming, grpc_addr) =
        ferrofabric_comm::bind_grpc(config.listen_addr()?).map_err(OrdererError::GrpcListener)?;
    let keepalive = |s: &Option<String>, default: u64| -> Result<std::time::Duration, OrdererError> {
        Ok(s.as_deref().map(parse_duration).unwrap_or(Ok(std::time::Duration::from_secs(default)))?)
    };
    // Checked so that a malformed value fails at start as in Fabric; not enforced (see `KeepaliveConfig`).
    keepalive(&general.keepalive.server_min_interval, 60)?;
    let mut builder = ferrofabric_comm::grpc_server_builder(&general.tls)?
        .http2_keepalive_interval(Some(keepalive(&general.keepalive.server_interval, 7200)?))
        .http2_keepalive_timeout(Some(keepalive(&general.keepalive.server_timeout, 20)?));
    let router = builder.add_routes(plugins.services).add_service(ferrofabric_comm::StreamService(service));
    tasks.push(ferrofabric_comm::spawn_grpc_server(router, incoming, shutdown_rx.clone()));

    // Admin (channel participation).
    let mut admin_addr = None;
    if !config.admin.listen_address.is_empty() {
        let tls_config = if config.admin.tls.enabled {
            if !config.admin.tls.client_auth_required {
                return Err(OrdererError::AdminClientAuth);
            }
            Some(http_server_tls(&config.admin.tls).map_err(OrdererError::AdminTls)?)
        } else {
            None
        };
        let listener =
            tokio::net::TcpListener::bind(parse_addr(&config.admin.listen_address)?).await.map_err(|source| {
                OrdererError::HttpListener { which: "admin", addr: config.admin.listen_address.clone(), source }
            })?;
        admin_addr = Some(listener.local_addr()?);
        let app = participation::router(
            registrar.clone(),
            config.channel_participation.enabled,
            config.max_request_body_size()?,
        );
        tasks.push(tokio::spawn(serve_http(listener, app, tls_config, shutdown_rx.clone())));
    }

    // Operations.
    let mut operations_addr = None;
    if !config.operations.listen_address.is_empty() {
        let tls_config =
            if config.operations.tls.enabled { Some(http_server_tls(&config.operations.tls)?) } else { None };
        let listener =
            tokio::net::TcpListener::bind(parse_addr(&config.operations.listen_address)?).await.map_err(|source| {
                OrdererError::HttpListener {
                    which: "operations",
                    addr: config.operations.listen_address.clone(),
                    source,
                }
            })?;
        operations_addr = Some(listener.local_addr()?);
        let app = operations::router(registrar.clone());
        tasks.push(tokio::spawn(serve_http(listener, app, tls_config, shutdown_rx.clone())));
    }

    tracing::info!(%grpc_addr, ?admin_addr, ?operations_addr, channels = ?registrar.channel_ids(), "orderer started");
    Ok(RunningOrderer { grpc_addr, admin_addr, operations_addr, registrar, shutdown, tasks })
}
