//! [`ChaincodeSupport`]: the peer's installed packages and live chaincode streams (Fabric's
//! `core/chaincode/chaincode_support.go` with the `ccaas` external builder of `core/container/externalbuilder`).
//!
//! A transaction for an installed package finds the package's stream, or starts one: for a `ccaas` package the
//! peer dials the address of its `connection.json` (`protos.Chaincode/Connect`, TLS as the file says) within its
//! `dial_timeout`; for any other package it waits, up to the startup timeout, for the chaincode to dial the peer
//! (`protos.ChaincodeSupport/Register`, [`ChaincodeSupport::register_service`]) with `CORE_CHAINCODE_ID_NAME` set
//! to the package ID.

use std::collections::HashMap;
use std::path::Path;
use std::pin::Pin;
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

/// The peer's chaincode support; see the module docs. Shared (`Arc`) by the endorser and the Register service.
pub struct ChaincodeSupport {
    store: PackageStore,
    runtime: tokio::runtime::Handle,
    timeouts: Timeouts,
    streams: Mutex<HashMap<String, Arc<Stream>>>,
    registered: Condvar,
}

type MessageStream = Pin<Box<dyn tokio_stream::Stream<Item = Result<ChaincodeMessage, Status>> + Send>>;

impl ChaincodeSupport {
    /// Chaincode support over the packages in `packages_dir` (`<peer.fileSystemPath>/lifecycle/chaincodes`),
    /// running its streams on `runtime`.
    ///
    /// Errors: the package directory cannot be created or read.
    pub fn new(
        packages_dir: &Path,
        runtime: tokio::runtime::Handle,
        timeouts: Timeouts,
    ) -> Result<Arc<Self>, StoreError> {
        Ok(Arc::new(ChaincodeSupport {
            store: PackageStore::open(packages_dir)?,
            runtime,
            timeouts,
            streams: Mutex::new(HashMap::new()),
            registered: Condvar::new(),
        }))
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
        let stream = Arc::new(Stream::new(id.clone(), to_chaincode));
        stream.ready();
        {
            let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
            streams.insert(id.clone(), stream.clone());
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
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        if streams.get(&id).is_some_and(|s| Arc::ptr_eq(s, &stream)) {
            streams.remove(&id);
        }
        tracing::info!(package_id = %id, "chaincode stream ended");
    }

    fn live_stream(&self, package_id: &str) -> Option<Arc<Stream>> {
        let streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        streams.get(package_id).filter(|s| s.is_alive()).cloned()
    }

    /// The live stream of `package_id`, started if there is none (see the module docs). Blocking: called on the
    /// endorser's blocking thread.
    fn stream_of(self: &Arc<Self>, package_id: &str) -> Result<Arc<Stream>, String> {
        if let Some(s) = self.live_stream(package_id) {
            return Ok(s);
        }
        let bytes = self.store.load(package_id).map_err(|e| e.to_string())?;
        let package = ChaincodePackage::parse(&bytes).map_err(|e| e.to_string())?;
        let wait = if package.kind == "ccaas" {
            let connection = package.connection().map_err(|e| e.to_string())?;
            let this = self.clone();
            let timeout = connection.dial_timeout;
            self.runtime.block_on(async move {
                let dial = this.clone().dial(connection);
                match tokio::time::timeout(timeout, dial).await {
                    Ok(r) => r,
                    Err(_) => Err("timeout expired while dialing the chaincode server".to_owned()),
                }
            })?;
            timeout
        } else {
            self.timeouts.startup
        };
        let deadline = Instant::now() + wait;
        let mut streams = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(s) = streams.get(package_id).filter(|s| s.is_alive()) {
                return Ok(s.clone());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("timeout expired while starting chaincode {package_id}"));
            }
            streams = self.registered.wait_timeout(streams, left).unwrap_or_else(|p| p.into_inner()).0;
        }
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

    /// Runs a transaction of the installed package `package_id` against `ctx` (see [`crate::handler`]): the
    /// chaincode's `Response` and event. Blocking.
    ///
    /// Errors (Fabric's texts): the chaincode could not be started or reached, it timed out, it failed.
    pub fn execute(
        self: &Arc<Self>,
        package_id: &str,
        ctx: &mut TxContext<'_>,
        args: &[Bytes],
        invoker: &dyn ChaincodeInvoker,
    ) -> Result<(Response, Option<ChaincodeEvent>), String> {
        let stream = self.stream_of(package_id).map_err(|e| format!("could not launch chaincode {package_id}: {e}"))?;
        debug_assert_eq!(stream.package_id, package_id);
        stream.execute(ctx, args, false, self.timeouts.execute, invoker)
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
        tokio::spawn(self.0.clone().serve(from_chaincode, to_chaincode));
        let out = UnboundedReceiverStream::new(rx).map(Ok::<_, Status>);
        Ok(tonic::Response::new(Box::pin(out)))
    }
}
