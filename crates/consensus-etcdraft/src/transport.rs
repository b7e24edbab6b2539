//! Node-to-node traffic over Fabric's cluster service `orderer.Cluster/Step` (Fabric
//! `orderer/common/cluster/comm.go`, `service.go`), with mutual TLS.
//!
//! * Each consenter dials every other consenter of a channel and keeps one bidirectional `Step` stream per
//!   (channel, peer). Requests carry Raft messages (`ConsensusRequest{channel, payload: eraftpb.Message}`)
//!   and forwarded envelopes (`SubmitRequest{channel, last_validation_seq, payload: Envelope}`); the
//!   receiver answers every `SubmitRequest` with one `SubmitResponse`, in order, so the sender matches
//!   answers to requests first-in first-out.
//! * The receiver identifies the sender by its TLS client certificate, which must be one of the channel's
//!   consenter certificates (Fabric pins consenters by certificate the same way). A Raft message whose
//!   `from` is not the sender is dropped.
//! * The envelope of a `SubmitRequest` travels as its original bytes (the message type here declares the
//!   field as `bytes`, which is wire-identical to an embedded `Envelope`), so a forwarded envelope reaches
//!   the block exactly as the client sent it.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_protos::common::Status;
use ferrofabric_protos::orderer::{step_response, ConsensusRequest, StepResponse, SubmitResponse};
use prost::Message;
use tokio::sync::{mpsc, oneshot, watch};
use tonic::codegen::BoxFuture;
use tonic::server::{Grpc, NamedService, StreamingService};
use tonic::transport::Endpoint;
use tonic::Streaming;

use super::Cluster;
pub(crate) use ferrofabric_comm::{cluster_endpoint as endpoint, ClusterTls};
use ferrofabric_comm::{PairCodec, ProstDecoder, ProstEncoder, RawEncoder};
use ferrofabric_orderer::Metrics;

/// gRPC service name of the cluster service (`/orderer.Cluster/Step`, Fabric `orderer/cluster.proto`).
pub const CLUSTER_SERVICE_NAME: &str = "orderer.Cluster";

/// `orderer.StepRequest` with the submitted envelope kept as bytes.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct StepRequestRaw {
    /// The request.
    #[prost(oneof = "StepPayload", tags = "1, 2")]
    pub(crate) payload: Option<StepPayload>,
}

/// The two kinds of step requests.
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum StepPayload {
    /// A Raft message.
    #[prost(message, tag = "1")]
    ConsensusRequest(ConsensusRequest),
    /// A forwarded envelope.
    #[prost(message, tag = "2")]
    SubmitRequest(SubmitRequestRaw),
}

/// `orderer.SubmitRequest` with `payload` (an `Envelope`) as raw bytes.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SubmitRequestRaw {
    /// Channel ID.
    #[prost(string, tag = "1")]
    pub(crate) channel: String,
    /// The config sequence the envelope was validated at.
    #[prost(uint64, tag = "2")]
    pub(crate) last_validation_seq: u64,
    /// The marshaled envelope.
    #[prost(bytes = "bytes", tag = "3")]
    pub(crate) payload: Bytes,
}

/// Marshals a `StepRequest` carrying a Raft message.
pub(crate) fn consensus_request(channel: &str, raft_message: Bytes) -> Bytes {
    let req = StepRequestRaw {
        payload: Some(StepPayload::ConsensusRequest(ConsensusRequest {
            channel: channel.to_owned(),
            payload: raft_message,
            metadata: Bytes::new(),
        })),
    };
    Bytes::from(req.encode_to_vec())
}

/// Marshals a `StepRequest` carrying an envelope.
pub(crate) fn submit_request(channel: &str, envelope: Bytes, seq: u64) -> Bytes {
    let req = StepRequestRaw {
        payload: Some(StepPayload::SubmitRequest(SubmitRequestRaw {
            channel: channel.to_owned(),
            last_validation_seq: seq,
            payload: envelope,
        })),
    };
    Bytes::from(req.encode_to_vec())
}

/// A `SubmitResponse` with `status` and `info`.
pub(crate) fn submit_response(channel: &str, status: Status, info: impl Into<String>) -> SubmitResponse {
    SubmitResponse { channel: channel.to_owned(), status: status as i32, info: info.into() }
}

/// Something to send to a peer.
pub(crate) enum Outbound {
    /// A marshaled `StepRequest` with a Raft message; `snapshot` if it carries a Raft snapshot (its
    /// delivery is reported to Raft).
    Raft {
        /// The request bytes.
        bytes: Bytes,
        /// A `MsgSnapshot`.
        snapshot: bool,
    },
    /// A marshaled `StepRequest` with an envelope; the peer's answer is sent to `ack`.
    Submit {
        /// The request bytes.
        bytes: Bytes,
        /// Receives `Ok` for SUCCESS, else the status and info.
        ack: Option<oneshot::Sender<Result<(), String>>>,
    },
}

/// What a link reports to the Raft thread.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LinkEvent {
    /// The peer could not be reached; Raft should probe it again.
    Unreachable(u64),
    /// A snapshot message was handed to the stream (`true`) or dropped (`false`).
    Snapshot(u64, bool),
}

/// The sending side of the connection to one peer of one channel.
#[derive(Clone)]
pub(crate) struct PeerLink {
    /// The peer's Raft ID.
    pub(crate) id: u64,
    tx: mpsc::Sender<Outbound>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for PeerLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerLink").field("id", &self.id).finish_non_exhaustive()
    }
}

/// Outbound queue length per peer (Raft messages beyond it are dropped; Raft retransmits).
const LINK_QUEUE: usize = 1024;

impl PeerLink {
    /// Starts the connection task to peer `id` at `endpoint`; `report` receives link events; the task ends
    /// when `halt` turns true or every sender is dropped. Bytes of queued messages are counted in `metrics`
    /// (`cluster_comm_egress_bytes`).
    pub(crate) fn spawn(
        id: u64,
        endpoint: Endpoint,
        max_message: usize,
        report: Arc<dyn Fn(LinkEvent) + Send + Sync>,
        halt: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
    ) -> PeerLink {
        let (tx, rx) = mpsc::channel(LINK_QUEUE);
        tokio::spawn(run_link(id, endpoint, max_message, rx, report, halt));
        PeerLink { id, tx, metrics }
    }

    /// Queues a Raft message without waiting; false if the queue is full or the link stopped.
    pub(crate) fn send_raft(&self, bytes: Bytes, snapshot: bool) -> bool {
        let n = bytes.len();
        let queued = self.tx.try_send(Outbound::Raft { bytes, snapshot }).is_ok();
        if queued {
            self.metrics.cluster_bytes_sent(n);
        }
        queued
    }

    /// Sends an envelope and waits for the peer's answer, at most `timeout`.
    ///
    /// Errors: the peer answered with a non-SUCCESS status, the connection failed, or the time ran out.
    pub(crate) async fn submit(&self, bytes: Bytes, timeout: Duration) -> Result<(), String> {
        let (ack, rx) = oneshot::channel();
        self.metrics.cluster_bytes_sent(bytes.len());
        let fut = async {
            self.tx
                .send(Outbound::Submit { bytes, ack: Some(ack) })
                .await
                .map_err(|_| "the link to the consenter stopped".to_owned())?;
            rx.await.map_err(|_| "the link to the consenter stopped".to_owned())?
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| format!("no answer from consenter {} within {timeout:?}", self.id))?
    }

    /// Sends an envelope without waiting for the answer (resubmissions); false if the queue is full.
    pub(crate) fn submit_nowait(&self, bytes: Bytes) -> bool {
        let n = bytes.len();
        let queued = self.tx.try_send(Outbound::Submit { bytes, ack: None }).is_ok();
        if queued {
            self.metrics.cluster_bytes_sent(n);
        }
        queued
    }
}

fn fail(item: Outbound, id: u64, report: &(dyn Fn(LinkEvent) + Send + Sync), why: &str) {
    match item {
        Outbound::Raft { snapshot, .. } => {
            if snapshot {
                report(LinkEvent::Snapshot(id, false));
            }
        }
        Outbound::Submit { ack, .. } => {
            if let Some(ack) = ack {
                let _ = ack.send(Err(why.to_owned()));
            }
        }
    }
}

async fn run_link(
    id: u64,
    endpoint: Endpoint,
    max_message: usize,
    mut rx: mpsc::Receiver<Outbound>,
    report: Arc<dyn Fn(LinkEvent) + Send + Sync>,
    mut halt: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(50);
    loop {
        if *halt.borrow() {
            return;
        }
        let why = match connect_and_serve(id, &endpoint, max_message, &mut rx, &*report, &mut halt).await {
            Served::Halted => return,
            Served::Broken(why) => why,
        };
        tracing::debug!(peer = id, reason = %why, "cluster link down");
        report(LinkEvent::Unreachable(id));
        // While the peer is away, fail what is queued instead of letting it pile up.
        let drain = async {
            while let Some(item) = rx.recv().await {
                fail(item, id, &*report, &why);
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = drain => return,
            _ = halt.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_millis(800));
    }
}

enum Served {
    Halted,
    Broken(String),
}

async fn connect_and_serve(
    id: u64,
    endpoint: &Endpoint,
    max_message: usize,
    rx: &mut mpsc::Receiver<Outbound>,
    report: &(dyn Fn(LinkEvent) + Send + Sync),
    halt: &mut watch::Receiver<bool>,
) -> Served {
    let channel = tokio::select! {
        c = endpoint.connect() => match c {
            Ok(c) => c,
            Err(e) => return Served::Broken(format!("connect: {e}")),
        },
        _ = halt.changed() => return Served::Halted,
    };
    let mut grpc =
        tonic::client::Grpc::new(channel).max_decoding_message_size(max_message).max_encoding_message_size(max_message);
    if let Err(e) = grpc.ready().await {
        return Served::Broken(format!("not ready: {e}"));
    }
    let (req_tx, req_rx) = mpsc::channel::<Bytes>(64);
    let path = http::uri::PathAndQuery::from_static("/orderer.Cluster/Step");
    let codec = PairCodec::<RawEncoder, ProstDecoder<StepResponse>>::default();
    let request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(req_rx));
    let call = tokio::select! {
        r = grpc.streaming(request, path, codec) => r,
        _ = halt.changed() => return Served::Halted,
    };
    let mut inbound = match call {
        Ok(r) => r.into_inner(),
        Err(e) => return Served::Broken(format!("Step: {e}")),
    };
    tracing::debug!(peer = id, "cluster link up");
    let mut acks: VecDeque<Option<oneshot::Sender<Result<(), String>>>> = VecDeque::new();
    let why = loop {
        tokio::select! {
            item = rx.recv() => {
                let Some(item) = item else { return Served::Halted };
                let (bytes, snapshot) = match item {
                    Outbound::Raft { bytes, snapshot } => (bytes, snapshot),
                    Outbound::Submit { bytes, ack } => {
                        acks.push_back(ack);
                        (bytes, false)
                    }
                };
                if req_tx.send(bytes).await.is_err() {
                    if snapshot {
                        report(LinkEvent::Snapshot(id, false));
                    }
                    break "stream closed".to_owned();
                }
                if snapshot {
                    report(LinkEvent::Snapshot(id, true));
                }
            }
            resp = inbound.message() => match resp {
                Ok(Some(StepResponse { payload: Some(step_response::Payload::SubmitRes(r)) })) => {
                    if let Some(Some(ack)) = acks.pop_front() {
                        let result = if r.status == Status::Success as i32 {
                            Ok(())
                        } else {
                            let status = Status::try_from(r.status).map(|s| s.as_str_name()).unwrap_or("UNKNOWN");
                            Err(format!("{status}: {}", r.info))
                        };
                        let _ = ack.send(result);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => break "stream ended".to_owned(),
                Err(e) => break format!("stream failed: {e}"),
            },
            _ = halt.changed() => return Served::Halted,
        }
    };
    for ack in acks.into_iter().flatten() {
        let _ = ack.send(Err(format!("connection to consenter {id} lost: {why}")));
    }
    Served::Broken(why)
}

/// The server side of `orderer.Cluster` (Fabric `orderer/common/cluster/service.go`), for
/// `tonic::transport::Server::add_service`: authenticates the caller by its TLS client certificate and
/// routes each request to the channel's Raft chain. A call without a client certificate ends with
/// UNAUTHENTICATED; a SubmitRequest for an unknown channel is answered NOT_FOUND.
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

impl NamedService for ClusterService {
    const NAME: &'static str = CLUSTER_SERVICE_NAME;
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
            let (tx, rx) = mpsc::channel(64);
            tokio::spawn(serve_step(cluster, peer, request.into_inner(), tx));
            Ok(tonic::Response::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
        })
    }
}

async fn serve_step(
    cluster: Arc<Cluster>,
    peer: Vec<u8>,
    mut inbound: Streaming<StepRequestRaw>,
    out: mpsc::Sender<Result<StepResponse, tonic::Status>>,
) {
    // Submissions are answered in order by their own task, so that a leader whose queue is full keeps
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

impl tonic::codegen::Service<http::Request<tonic::body::Body>> for ClusterService {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let max = Some(self.cluster.max_message);
        match req.uri().path() {
            "/orderer.Cluster/Step" => {
                let svc = StepSvc(self.cluster.clone());
                Box::pin(async move {
                    let mut grpc =
                        Grpc::new(PairCodec::<ProstEncoder<StepResponse>, ProstDecoder<StepRequestRaw>>::default())
                            .apply_max_message_size_config(max, max);
                    Ok(grpc.streaming(svc, req).await)
                })
            }
            _ => Box::pin(async move {
                let mut response = http::Response::new(tonic::body::Body::default());
                let headers = response.headers_mut();
                headers.insert(tonic::Status::GRPC_STATUS, (tonic::Code::Unimplemented as i32).into());
                headers.insert(http::header::CONTENT_TYPE, tonic::metadata::GRPC_CONTENT_TYPE);
                Ok(response)
            }),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ferrofabric_protos::common::Envelope;
    use ferrofabric_protos::orderer::{step_request, StepRequest};

    /// The raw request decodes as Fabric's `StepRequest` with an embedded `Envelope`, and the envelope bytes
    /// survive unchanged even when they are not prost's canonical encoding of the same message.
    #[test]
    fn submit_request_is_fabric_wire_compatible_and_keeps_envelope_bytes() {
        let env = Envelope { payload: Bytes::from_static(b"payload"), signature: Bytes::from_static(b"sig") };
        // Fields in reverse order: valid protobuf, but not what prost would write.
        let mut odd = Vec::new();
        prost::encoding::bytes::encode(2, &env.signature, &mut odd);
        prost::encoding::bytes::encode(1, &env.payload, &mut odd);
        let odd = Bytes::from(odd);
        let raw = submit_request("mychannel", odd.clone(), 7);
        let fabric = StepRequest::decode(raw.clone()).unwrap();
        let Some(step_request::Payload::SubmitRequest(s)) = fabric.payload else { panic!("not a submit") };
        assert_eq!((s.channel.as_str(), s.last_validation_seq), ("mychannel", 7));
        assert_eq!(s.payload.unwrap(), env);
        let ours = StepRequestRaw::decode(raw).unwrap();
        let Some(StepPayload::SubmitRequest(s)) = ours.payload else { panic!("not a submit") };
        assert_eq!(s.payload, odd);
        let c = consensus_request("mychannel", Bytes::from_static(b"raft"));
        let fabric = StepRequest::decode(c).unwrap();
        let Some(step_request::Payload::ConsensusRequest(c)) = fabric.payload else { panic!("not consensus") };
        assert_eq!(c.payload, Bytes::from_static(b"raft"));
    }
}
