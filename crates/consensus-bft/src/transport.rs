//! Node-to-node traffic of BFT channels over Fabric 3's cluster service name `orderer.ClusterNodeService/Step`,
//! with mutual TLS (the payloads are Ferrofabric's own, [`crate::wire`], not SmartBFT's).
//!
//! * Each consenter dials every other consenter of a channel at its consenter-mapping `host:port` and keeps one
//!   one-way stream per (channel, peer); frames that do not fit the link's queue are dropped (votes are
//!   rebroadcast by the state machine, requests are re-sent by the chain while they wait).
//! * The receiver identifies the sender by its TLS client certificate, which must be the client or server TLS
//!   certificate of one of the channel's consenters; a frame from anyone else is dropped.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_comm::{
    serve_stream, CallFuture, ClusterTls, PairCodec, ProstDecoder, ProstEncoder, RawEncoder, StreamMethods,
    StreamService,
};
use ferrofabric_orderer::Metrics;
use tokio::sync::{mpsc, watch};
use tonic::codegen::BoxFuture;
use tonic::server::StreamingService;
use tonic::transport::Endpoint;
use tonic::Streaming;

use crate::wire::{StepAck, WireMessage};

/// gRPC service name of the BFT cluster service (Fabric 3 `orderer/clusterserver.proto`).
pub const BFT_CLUSTER_SERVICE_NAME: &str = "orderer.ClusterNodeService";
const STEP_PATH: &str = "/orderer.ClusterNodeService/Step";
/// Frames queued per peer before new ones are dropped.
const LINK_QUEUE: usize = 8192;

/// Where a channel's chain takes frames from its peers.
pub(crate) trait FrameSink: Send + Sync {
    /// A frame from the consenter whose TLS certificate (DER) is `peer`.
    fn on_frame(&self, peer: &[u8], msg: WireMessage);
}

/// The node's BFT cluster: the TLS material to dial other consenters and the channels' chains by name.
pub struct BftCluster {
    pub(crate) tls: Option<ClusterTls>,
    pub(crate) max_message: usize,
    chains: RwLock<HashMap<String, Arc<dyn FrameSink>>>,
    /// True while no chain is served: incoming streams then end, so that a node shutting down is not held open
    /// by the other consenters' links.
    idle: watch::Sender<bool>,
}

impl std::fmt::Debug for BftCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BftCluster").field("tls", &self.tls.is_some()).finish_non_exhaustive()
    }
}

impl BftCluster {
    /// A cluster dialing with `tls` (None: BFT channels are refused) and accepting frames up to `max_message`
    /// bytes.
    pub fn new(tls: Option<ClusterTls>, max_message: usize) -> Arc<BftCluster> {
        Arc::new(BftCluster { tls, max_message, chains: RwLock::new(HashMap::new()), idle: watch::channel(true).0 })
    }

    pub(crate) fn register(&self, channel: &str, sink: Arc<dyn FrameSink>) {
        self.chains.write().unwrap_or_else(|e| e.into_inner()).insert(channel.to_owned(), sink);
        self.idle.send_replace(false);
    }

    pub(crate) fn unregister(&self, channel: &str) {
        let mut chains = self.chains.write().unwrap_or_else(|e| e.into_inner());
        chains.remove(channel);
        self.idle.send_replace(chains.is_empty());
    }

    fn sink(&self, channel: &str) -> Option<Arc<dyn FrameSink>> {
        self.chains.read().unwrap_or_else(|e| e.into_inner()).get(channel).cloned()
    }

    /// The `orderer.ClusterNodeService` gRPC service to add to the node's server.
    pub fn service(self: &Arc<Self>) -> StreamService<BftClusterService> {
        StreamService(BftClusterService { cluster: self.clone() })
    }
}

/// The sending side of the connection to one peer of one channel.
#[derive(Clone)]
pub(crate) struct Link {
    tx: mpsc::Sender<Bytes>,
    metrics: Arc<Metrics>,
}

impl Link {
    /// Starts the connection task to `endpoint`; it ends when `halt` turns true or the link is dropped.
    /// Bytes of queued frames are counted in `metrics` (`cluster_comm_egress_bytes`).
    pub(crate) fn spawn(
        peer: u32,
        endpoint: Endpoint,
        max_message: usize,
        halt: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
    ) -> Link {
        let (tx, rx) = mpsc::channel(LINK_QUEUE);
        tokio::spawn(run_link(peer, endpoint, max_message, rx, halt));
        Link { tx, metrics }
    }

    /// Queues a frame without waiting; false if the queue is full (the frame is dropped).
    pub(crate) fn send(&self, frame: Bytes) -> bool {
        let n = frame.len();
        let queued = self.tx.try_send(frame).is_ok();
        if queued {
            self.metrics.cluster_bytes_sent(n);
        }
        queued
    }
}

async fn run_link(
    peer: u32,
    endpoint: Endpoint,
    max_message: usize,
    mut rx: mpsc::Receiver<Bytes>,
    mut halt: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(50);
    loop {
        if *halt.borrow() {
            return;
        }
        let why = tokio::select! {
            why = connect_and_send(&endpoint, max_message, &mut rx) => why,
            _ = halt.changed() => return,
        };
        if rx.is_closed() {
            // The consenter left the channel's consenter set (its link was dropped).
            return;
        }
        tracing::debug!(peer, reason = %why, "BFT cluster link down");
        // Frames queued while the peer is away are stale by the time it is back: drop them.
        while rx.try_recv().is_ok() {}
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = halt.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_millis(800));
    }
}

async fn connect_and_send(endpoint: &Endpoint, max_message: usize, rx: &mut mpsc::Receiver<Bytes>) -> String {
    let channel = match endpoint.connect().await {
        Ok(c) => c,
        Err(e) => return format!("connect: {e}"),
    };
    let mut grpc =
        tonic::client::Grpc::new(channel).max_decoding_message_size(max_message).max_encoding_message_size(max_message);
    if let Err(e) = grpc.ready().await {
        return format!("not ready: {e}");
    }
    let (req_tx, req_rx) = mpsc::channel::<Bytes>(256);
    let codec = PairCodec::<RawEncoder, ProstDecoder<StepAck>>::default();
    let request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(req_rx));
    let path = http::uri::PathAndQuery::from_static(STEP_PATH);
    let call = grpc.streaming(request, path, codec);
    tokio::pin!(call);
    // The call completes only when the server answers with headers; frames flow meanwhile.
    let mut inbound: Option<Streaming<StepAck>> = None;
    loop {
        tokio::select! {
            frame = rx.recv() => {
                let Some(frame) = frame else { return "link closed".into() };
                if req_tx.send(frame).await.is_err() {
                    return "stream closed".into();
                }
            }
            r = &mut call, if inbound.is_none() => match r {
                Ok(resp) => inbound = Some(resp.into_inner()),
                Err(e) => return format!("Step: {e}"),
            },
            m = async { match inbound.as_mut() { Some(s) => s.message().await, None => std::future::pending().await } } => {
                match m {
                    Ok(Some(_)) => {}
                    Ok(None) => return "stream ended".into(),
                    Err(e) => return format!("stream failed: {e}"),
                }
            }
        }
    }
}

/// The server side of `orderer.ClusterNodeService`, served as a [`ferrofabric_comm::StreamService`]: authenticates the
/// caller by its TLS client certificate and hands each frame to the channel's chain. A call without a client
/// certificate ends with UNAUTHENTICATED; frames for channels not served here are dropped.
#[derive(Clone)]
pub struct BftClusterService {
    cluster: Arc<BftCluster>,
}

impl std::fmt::Debug for BftClusterService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BftClusterService").finish_non_exhaustive()
    }
}

impl StreamMethods for BftClusterService {
    const NAME: &'static str = BFT_CLUSTER_SERVICE_NAME;

    fn call(&self, method: &str, req: http::Request<tonic::body::Body>) -> Option<CallFuture> {
        let max = self.cluster.max_message;
        (method == "Step").then(|| {
            serve_stream::<ProstEncoder<StepAck>, ProstDecoder<WireMessage>, _>(
                StepSvc(self.cluster.clone()),
                req,
                max,
                max,
            )
        })
    }
}

struct StepSvc(Arc<BftCluster>);

impl StreamingService<WireMessage> for StepSvc {
    type Response = StepAck;
    type ResponseStream = tokio_stream::wrappers::ReceiverStream<Result<StepAck, tonic::Status>>;
    type Future = BoxFuture<tonic::Response<Self::ResponseStream>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<Streaming<WireMessage>>) -> Self::Future {
        let cluster = self.0.clone();
        Box::pin(async move {
            let peer = ferrofabric_comm::cluster_peer_certificate(&request)?;
            let (tx, rx) = mpsc::channel(1);
            tokio::spawn(serve_step(cluster, peer, request.into_inner(), tx));
            Ok(tonic::Response::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
        })
    }
}

async fn serve_step(
    cluster: Arc<BftCluster>,
    peer: Vec<u8>,
    mut inbound: Streaming<WireMessage>,
    out: mpsc::Sender<Result<StepAck, tonic::Status>>,
) {
    let mut idle = cluster.idle.subscribe();
    loop {
        let next = tokio::select! {
            m = inbound.message() => m,
            _ = idle.wait_for(|idle| *idle) => break,
        };
        match next {
            Ok(Some(msg)) => match cluster.sink(&msg.channel) {
                Some(sink) => sink.on_frame(&peer, msg),
                None => tracing::debug!(channel = %msg.channel, "BFT frame for a channel not served here"),
            },
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(error = %e, "BFT cluster stream from a peer ended");
                break;
            }
        }
    }
    drop(out);
}
