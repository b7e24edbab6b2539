//! [`ChaincodeSupport`]: the peer's installed packages and live chaincode streams (Fabric's
//! `core/chaincode/chaincode_support.go` with the `ccaas` external builder of `core/container/externalbuilder`).
//!
//! A transaction for an installed package finds the package's stream, or starts one: for a `ccaas` package the
//! peer dials the address of its `connection.json` (`protos.Chaincode/Connect`, TLS as the file says) within its
//! `dial_timeout`; for any other package it waits, up to the startup timeout, for the chaincode to dial the peer
//! (`protos.ChaincodeSupport/Register`, [`ChaincodeSupport::register_service`]) with `CORE_CHAINCODE_ID_NAME` set
//! to the package ID.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferrofabric_chaincode::{ChaincodeInstaller, InstalledChaincode, Response, TxContext};
use ferrofabric_comm::{PairCodec, ProstDecoder, ProstEncoder};
use ferrofabric_protos::peer::chaincode_message::Type;
use ferrofabric_protos::peer::chaincode_support_server::{
    ChaincodeSupport as ChaincodeSupportRpc, ChaincodeSupportServer,
};
use ferrofabric_protos::peer::{ChaincodeEvent, ChaincodeId, ChaincodeMessage};
use prost::Message;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::StreamExt;
use tonic::{Request, Status, Streaming};

use crate::error::ExecuteError;
use crate::handler::{ChaincodeInvoker, Stream};
use crate::package::ChaincodePackage;
use crate::store::{PackageStore, StoreError};

/// Timeouts of chaincode execution (Fabric's `chaincode.executetimeout` and `chaincode.startuptimeout`).
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// How long one transaction may run (default 30 s).
    pub execute: Duration,
    /// How long a chaincode that dials the peer may take to register (default 300 s).
    pub startup: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts { execute: Duration::from_secs(30), startup: Duration::from_secs(300) }
    }
}

/// Counts of the shim protocol since start: what a transaction costs in messages between peer and chaincode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShimStats {
    /// Transactions sent to external chaincodes (TRANSACTION or INIT; one per endorsement).
    pub transactions: u64,
    /// Requests the chaincodes made within them (GET_STATE, PUT_STATE, QUERY_STATE_NEXT, INVOKE_CHAINCODE, ...),
    /// each one round trip (Fabric's `chaincode_shim_requests_received`, summed over types).
    pub requests: u64,
}

impl ShimStats {
    /// Round trips per transaction between `earlier` and `self`: the TRANSACTION/COMPLETED pair plus each request;
    /// `None` when no transaction ran in between.
    pub fn round_trips_per_tx(&self, earlier: &ShimStats) -> Option<f64> {
        let txs = self.transactions.checked_sub(earlier.transactions).filter(|&t| t > 0)?;
        let requests = self.requests.saturating_sub(earlier.requests);
        Some((txs + requests) as f64 / txs as f64)
    }
}

/// The peer's chaincode support; see the module docs. Shared (`Arc`) by the endorser and the Register service.
pub struct ChaincodeSupport {
    store: PackageStore,
    runtime: OwnRuntime,
    timeouts: Timeouts,
    streams: Mutex<Streams>,
    registered: Condvar,
    transactions: AtomicU64,
    requests: Arc<AtomicU64>,
}

/// The live streams by package ID, and the `ccaas` packages being dialled (one dial per package at a time, as
/// Fabric's `LaunchRegistry` allows one launch: the other transactions wait for its stream).
#[derive(Default)]
struct Streams {
    live: HashMap<String, Arc<Stream>>,
    launching: HashSet<String>,
}

/// The support's own runtime (one thread, `chaincode`): chaincode streams are dialled, read and routed there, so a
/// transaction waiting for its chaincode never needs a free worker of the caller's runtime. The endorser's
/// simulation holds a view of the state, which a block being applied waits for, and readers of the state on the
/// caller's runtime wait behind that block: routing on those workers could deadlock until the execute timeout.
struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl OwnRuntime {
    fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.0.as_ref().map(|r| r.handle())
    }
}

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which an async context forbids: let its thread end on its own.
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

type MessageStream = Pin<Box<dyn tokio_stream::Stream<Item = Result<ChaincodeMessage, Status>> + Send>>;

impl ChaincodeSupport {
    /// Chaincode support over the packages in `packages_dir` (`<peer.fileSystemPath>/lifecycle/chaincodes`),
    /// running its streams on a runtime thread of its own.
    ///
    /// Errors: the package directory cannot be created or read, or the runtime thread cannot start.
    pub fn new(packages_dir: &Path, timeouts: Timeouts) -> Result<Arc<Self>, StoreError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("chaincode")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Io(format!("starting the chaincode runtime: {e}")))?;
        Ok(Arc::new(ChaincodeSupport {
            store: PackageStore::open(packages_dir)?,
            runtime: OwnRuntime(Some(runtime)),
            timeouts,
            streams: Mutex::new(Streams::default()),
            registered: Condvar::new(),
            transactions: AtomicU64::new(0),
            requests: Arc::new(AtomicU64::new(0)),
        }))
    }

    /// The shim protocol's counts since this support started.
    pub fn shim_stats(&self) -> ShimStats {
        ShimStats {
            transactions: self.transactions.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
        }
    }

    /// The installed package IDs.
    pub fn package_ids(&self) -> Vec<String> {
        self.store.list().into_iter().map(|i| i.package_id).collect()
    }

    /// The `protos.ChaincodeSupport` service a chaincode dials to register (on `peer.chaincodeListenAddress`).
    pub fn register_service(self: &Arc<Self>) -> ChaincodeSupportServer<RegisterService> {
        ChaincodeSupportServer::new(RegisterService(self.clone()))
    }

    /// Serves one chaincode stream: REGISTER first, then routing until it ends. `to_chaincode` feeds the
    /// stream's other direction.
    async fn serve(
        self: Arc<Self>,
        mut from_chaincode: MessageStream,
        to_chaincode: mpsc::UnboundedSender<ChaincodeMessage>,
    ) {
        let first = match from_chaincode.next().await {
            Some(Ok(m)) if m.r#type == Type::Register as i32 => m,
            Some(Ok(m)) => {
                tracing::warn!(kind = m.r#type, "chaincode stream did not start with REGISTER");
                return;
            }
            _ => return,
        };
        let id = match ChaincodeId::decode(first.payload) {
            Ok(id) if !id.name.is_empty() => id.name,
            _ => {
                tracing::warn!("chaincode REGISTER without a chaincode ID");
                return;
            }
        };
        let stream = Arc::new(Stream::new(id.clone(), to_chaincode, self.requests.clone()));
        stream.ready();
        {
            self.streams().live.insert(id.clone(), stream.clone());
            self.registered.notify_all();
        }
        tracing::info!(package_id = %id, "chaincode registered");
        while let Some(msg) = from_chaincode.next().await {
            match msg {
                Ok(m) => stream.route(m),
                Err(e) => {
                    tracing::info!(package_id = %id, error = %e, "chaincode stream failed");
                    break;
                }
            }
        }
        stream.closed();
        let mut streams = self.streams();
        if streams.live.get(&id).is_some_and(|s| Arc::ptr_eq(s, &stream)) {
            streams.live.remove(&id);
        }
        tracing::info!(package_id = %id, "chaincode stream ended");
    }

    fn streams(&self) -> std::sync::MutexGuard<'_, Streams> {
        self.streams.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live stream of `package_id`, started if there is none (see the module docs): for a `ccaas` package one
    /// caller dials while the others wait for its stream. Blocking: called on the endorser's blocking thread.
    fn stream_of(self: &Arc<Self>, package_id: &str) -> Result<Arc<Stream>, String> {
        if let Some(s) = self.streams().live.get(package_id).filter(|s| s.is_alive()) {
            return Ok(s.clone());
        }
        let bytes = self.store.load(package_id).map_err(|e| e.to_string())?;
        let package = ChaincodePackage::parse(&bytes).map_err(|e| e.to_string())?;
        let connection = match package.kind.as_str() {
            "ccaas" => Some(package.connection().map_err(|e| e.to_string())?),
            _ => None,
        };
        let wait = connection.as_ref().map(|c| c.dial_timeout).unwrap_or(self.timeouts.startup);
        let deadline = Instant::now() + wait;
        // Whether this caller dialled, and so holds the package's place in `launching` until its stream registers.
        let mut dialled = false;
        let mut streams = self.streams();
        let result = loop {
            if let Some(s) = streams.live.get(package_id).filter(|s| s.is_alive()) {
                break Ok(s.clone());
            }
            if let Some(connection) = connection.as_ref().filter(|_| !dialled) {
                if streams.launching.insert(package_id.to_owned()) {
                    dialled = true;
                    drop(streams);
                    let dial = self.dial_until(connection.clone(), deadline);
                    streams = self.streams();
                    if let Err(e) = dial {
                        break Err(e);
                    }
                    continue;
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Err(format!("timeout expired while starting chaincode {package_id}"));
            }
            streams = self.registered.wait_timeout(streams, left).unwrap_or_else(|p| p.into_inner()).0;
        };
        if dialled {
            streams.launching.remove(package_id);
            self.registered.notify_all();
        }
        result
    }

    /// [`ChaincodeSupport::dial`] within `deadline`. Blocking.
    fn dial_until(self: &Arc<Self>, connection: crate::Connection, deadline: Instant) -> Result<(), String> {
        let this = self.clone();
        let timeout = deadline.saturating_duration_since(Instant::now());
        let runtime = self.runtime.handle().ok_or("the chaincode runtime has stopped")?;
        runtime.block_on(async move {
            match tokio::time::timeout(timeout, this.dial(connection)).await {
                Ok(r) => r,
                Err(_) => Err("timeout expired while dialing the chaincode server".to_owned()),
            }
        })
    }

    /// Dials a chaincode server and starts serving its `Connect` stream.
    async fn dial(self: Arc<Self>, c: crate::Connection) -> Result<(), String> {
        let tls = if c.tls_required {
            Some(ferrofabric_comm::ClientTls {
                ca_pem: c.root_cert.into_bytes(),
                server_name: String::new(),
                identity: c.client_auth_required.then(|| (c.client_cert.into_bytes(), c.client_key.into_bytes())),
            })
        } else {
            None
        };
        let channel = ferrofabric_comm::connect(&c.address, tls.as_ref())
            .await
            .map_err(|e| format!("could not connect to chaincode server {}: {e:#}", c.address))?;
        let (to_chaincode, rx) = mpsc::unbounded_channel();
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.map_err(|e| format!("chaincode server {} not ready: {e}", c.address))?;
        let path = tonic::codegen::http::uri::PathAndQuery::from_static("/protos.Chaincode/Connect");
        let codec: PairCodec<ProstEncoder<ChaincodeMessage>, ProstDecoder<ChaincodeMessage>> = PairCodec::default();
        let response = grpc
            .streaming(Request::new(UnboundedReceiverStream::new(rx)), path, codec)
            .await
            .map_err(|e| format!("could not open a stream to chaincode server {}: {e}", c.address))?;
        let from_chaincode: MessageStream = Box::pin(response.into_inner());
        tokio::spawn(self.serve(from_chaincode, to_chaincode));
        Ok(())
    }

    /// Runs a transaction of the installed package `package_id` against `ctx` (see [`crate::handler`]), as INIT
    /// when `is_init` (the definition's `EndorsementInfo::check_invocation` decides it), else as TRANSACTION: the
    /// chaincode's `Response` and event. Blocking.
    ///
    /// Errors (Fabric's texts): `failed to execute transaction <txid>: could not launch chaincode <package ID>: ...`
    /// when it could not be started or reached; the handler's errors (it timed out, its stream ended, it failed).
    pub fn execute(
        self: &Arc<Self>,
        package_id: &str,
        ctx: &mut TxContext<'_>,
        args: &[Bytes],
        is_init: bool,
        invoker: &dyn ChaincodeInvoker,
    ) -> Result<(Response, Option<ChaincodeEvent>), ExecuteError> {
        let stream = self.stream_of(package_id).map_err(|detail| ExecuteError::Launch {
            tx_id: ctx.tx_id().to_owned(),
            package_id: package_id.to_owned(),
            detail,
        })?;
        debug_assert_eq!(stream.package_id, package_id);
        self.transactions.fetch_add(1, Ordering::Relaxed);
        stream.execute(ctx, args, is_init, self.timeouts.execute, invoker).map_err(ExecuteError::Execution)
    }
}

impl ChaincodeInstaller for ChaincodeSupport {
    fn install(&self, package: &[u8]) -> Result<InstalledChaincode, String> {
        let i = self.store.save(package).map_err(|e| e.to_string())?;
        tracing::info!(package_id = %i.package_id, "Successfully installed chaincode");
        Ok(InstalledChaincode { package_id: i.package_id, label: i.label })
    }

    fn installed(&self) -> Vec<InstalledChaincode> {
        self.store.list().into_iter().map(|i| InstalledChaincode { package_id: i.package_id, label: i.label }).collect()
    }

    fn package(&self, package_id: &str) -> Result<Bytes, String> {
        self.store.load(package_id).map_err(|e| e.to_string())
    }
}

/// The `protos.ChaincodeSupport/Register` service: a chaincode that dials the peer.
pub struct RegisterService(Arc<ChaincodeSupport>);

#[tonic::async_trait]
impl ChaincodeSupportRpc for RegisterService {
    type RegisterStream = Pin<Box<dyn tokio_stream::Stream<Item = Result<ChaincodeMessage, Status>> + Send>>;

    async fn register(
        &self,
        request: Request<Streaming<ChaincodeMessage>>,
    ) -> Result<tonic::Response<Self::RegisterStream>, Status> {
        let (to_chaincode, rx) = mpsc::unbounded_channel();
        let from_chaincode: MessageStream = Box::pin(request.into_inner());
        match self.0.runtime.handle() {
            Some(runtime) => drop(runtime.spawn(self.0.clone().serve(from_chaincode, to_chaincode))),
            None => return Err(Status::unavailable("the peer's chaincode support has stopped")),
        }
        let out = UnboundedReceiverStream::new(rx).map(Ok::<_, Status>);
        Ok(tonic::Response::new(Box::pin(out)))
    }
}
