//! The node's Raft cluster ([`Cluster`]): the channels' running chains by channel ID, and the server side of
//! Fabric's cluster service `orderer.Cluster/Step` ([`ClusterService`]) that routes each request to its channel's
//! chain. The dialing side and the messages' bytes are in `transport`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use ferrofabric_comm::{serve_stream, CallFuture, ProstDecoder, ProstEncoder, StreamMethods, StreamService};
use ferrofabric_orderer::OrdererConfig;
use ferrofabric_protos::common::Status;
use ferrofabric_protos::orderer::{step_response, StepResponse};
use tokio::sync::mpsc;
use tonic::codegen::BoxFuture;
use tonic::server::StreamingService;
use tonic::Streaming;

use super::shared::Shared;
use super::transport::{
    submit_response, ClusterTls, StepPayload, StepRequestRaw, SubmitRequestRaw, SUBMIT_RESPONSES_HEADER,
};

/// gRPC service name of the cluster service (`/orderer.Cluster/Step`, Fabric `orderer/cluster.proto`).
pub const CLUSTER_SERVICE_NAME: &str = "orderer.Cluster";

/// The node's Raft cluster (Fabric `orderer/common/cluster/comm.go` `Comm` plus the etcdraft `Consenter`):
/// the TLS material to dial other consenters, the channels' running chains by channel ID, and the
/// `orderer.Cluster` service. Share as `Arc<Cluster>`; thread-safe.
pub struct Cluster {
    /// TLS to dial other consenters (None: multi-consenter channels are refused).
    pub(crate) tls: Option<ClusterTls>,
    /// The largest message accepted, in bytes.
    pub(crate) max_message: usize,
    chains: RwLock<HashMap<String, Arc<Shared>>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let channels: Vec<String> = self.chains.read().map(|c| c.keys().cloned().collect()).unwrap_or_default();
        f.debug_struct("Cluster").field("tls", &self.tls.is_some()).field("channels", &channels).finish()
    }
}

impl Cluster {
    /// A cluster dialing with `tls` (None: multi-consenter channels are refused) and accepting messages up
    /// to `max_message` bytes.
    pub fn new(tls: Option<ClusterTls>, max_message: usize) -> Arc<Cluster> {
        Arc::new(Cluster { tls, max_message, chains: RwLock::new(HashMap::new()) })
    }

    /// The cluster of a node configured by `config`: client certificate and key from
    /// `General.Cluster.ClientCertificate` / `ClientPrivateKey`, else `General.TLS.Certificate` /
    /// `PrivateKey` when TLS is enabled; root CAs from `General.TLS.RootCAs`; message limit
    /// `General.MaxRecvMsgSize` (default 100 MiB).
    ///
    /// Errors: configured files that cannot be read.
    pub fn from_config(config: &OrdererConfig) -> Result<Arc<Cluster>, crate::error::RaftError> {
        let tls = config.cluster_tls().map_err(crate::error::RaftError::ClusterTls)?;
        Ok(Cluster::new(tls, config.cluster_max_message()))
    }

    /// The `orderer.Cluster` gRPC service to add to the node's server.
    pub fn service(self: &Arc<Self>) -> StreamService<ClusterService> {
        StreamService(ClusterService::new(self.clone()))
    }

    pub(crate) fn chain(&self, channel: &str) -> Option<Arc<Shared>> {
        self.chains.read().unwrap_or_else(|e| e.into_inner()).get(channel).cloned()
    }

    pub(crate) fn register(&self, shared: Arc<Shared>) {
        let mut chains = self.chains.write().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = chains.insert(shared.channel.clone(), shared) {
            old.halt();
        }
    }

    pub(crate) fn unregister(&self, shared: &Arc<Shared>) {
        let mut chains = self.chains.write().unwrap_or_else(|e| e.into_inner());
        if chains.get(&shared.channel).is_some_and(|c| Arc::ptr_eq(c, shared)) {
            chains.remove(&shared.channel);
        }
    }
}

/// The server side of `orderer.Cluster` (Fabric `orderer/common/cluster/service.go`), served as a
/// [`ferrofabric_comm::StreamService`]: authenticates the caller by its TLS client certificate and
/// routes each request to the channel's Raft chain. A call without a client certificate ends with
/// UNAUTHENTICATED. A caller that does not ask for answers ([`SUBMIT_RESPONSES_HEADER`], a Fabric orderer) gets
/// what Fabric's Step server sends on a live stream: no response headers, no `StepResponse`; one that asks gets
/// the headers at once and one `SubmitResponse` per `SubmitRequest` (NOT_FOUND for a channel not served here).
#[derive(Clone)]
pub struct ClusterService {
    cluster: Arc<Cluster>,
}

impl std::fmt::Debug for ClusterService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterService").finish_non_exhaustive()
    }
}

impl ClusterService {
    pub(crate) fn new(cluster: Arc<Cluster>) -> Self {
        ClusterService { cluster }
    }
}

impl StreamMethods for ClusterService {
    const NAME: &'static str = CLUSTER_SERVICE_NAME;

    fn call(&self, method: &str, req: http::Request<tonic::body::Body>) -> Option<CallFuture> {
        let max = self.cluster.max_message;
        (method == "Step").then(|| {
            serve_stream::<ProstEncoder<StepResponse>, ProstDecoder<StepRequestRaw>, _>(
                StepSvc(self.cluster.clone()),
                req,
                max,
                max,
            )
        })
    }
}

struct StepSvc(Arc<Cluster>);

impl StreamingService<StepRequestRaw> for StepSvc {
    type Response = StepResponse;
    type ResponseStream = tokio_stream::wrappers::ReceiverStream<Result<StepResponse, tonic::Status>>;
    type Future = BoxFuture<tonic::Response<Self::ResponseStream>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<Streaming<StepRequestRaw>>) -> Self::Future {
        let cluster = self.0.clone();
        Box::pin(async move {
            let peer = ferrofabric_comm::cluster_peer_certificate(&request)?;
            let answering = request.metadata().get(SUBMIT_RESPONSES_HEADER).is_some();
            let (tx, rx) = mpsc::channel(64);
            let served = tokio::spawn(serve_step(cluster, peer, request.into_inner(), answering.then_some(tx)));
            if !answering {
                // As Fabric's Step server: no response headers while the stream lives (they come with its end).
                let _ = served.await;
            }
            let mut response = tonic::Response::new(tokio_stream::wrappers::ReceiverStream::new(rx));
            if answering {
                response
                    .metadata_mut()
                    .insert(SUBMIT_RESPONSES_HEADER, tonic::metadata::MetadataValue::from_static("1"));
            }
            Ok(response)
        })
    }
}

/// Reads one Step stream; answers its `SubmitRequest`s on `out` if the caller asked for answers (`None`: a
/// Fabric caller, which gets none).
async fn serve_step(
    cluster: Arc<Cluster>,
    peer: Vec<u8>,
    mut inbound: Streaming<StepRequestRaw>,
    out: Option<mpsc::Sender<Result<StepResponse, tonic::Status>>>,
) {
    // Submissions are handled in order by their own task, so that a leader whose queue is full keeps
    // reading the Raft messages (append acknowledgements) that will drain it.
    let (submits, mut submit_rx) = mpsc::unbounded_channel::<SubmitRequestRaw>();
    let answers = {
        let (cluster, peer) = (cluster.clone(), peer.clone());
        tokio::spawn(async move {
            while let Some(s) = submit_rx.recv().await {
                let resp = match cluster.chain(&s.channel) {
                    Some(chain) => chain.on_submit(&peer, s.payload, s.last_validation_seq).await,
                    None => submit_response(&s.channel, Status::NotFound, format!("channel {} not served", s.channel)),
                };
                let Some(out) = &out else { continue };
                let msg = StepResponse { payload: Some(step_response::Payload::SubmitRes(resp)) };
                if out.send(Ok(msg)).await.is_err() {
                    return;
                }
            }
        })
    };
    loop {
        let req = match inbound.message().await {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(error = %e, "cluster stream from a peer ended");
                break;
            }
        };
        match req.payload {
            Some(StepPayload::ConsensusRequest(c)) => match cluster.chain(&c.channel) {
                Some(chain) => chain.on_consensus(&peer, c.payload),
                None => tracing::debug!(channel = %c.channel, "Raft message for a channel not served here"),
            },
            Some(StepPayload::SubmitRequest(s)) => {
                // The answering task only stops when the response stream is gone.
                let _ = submits.send(s);
            }
            None => {}
        }
    }
    // Answers still owed are sent before the response stream closes.
    drop(submits);
    let _ = answers.await;
}
