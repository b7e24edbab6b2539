//! Node-to-node traffic over Fabric's cluster service `orderer.Cluster/Step` (Fabric
//! `orderer/common/cluster/comm.go`, `rpc.go`, `service.go`), with mutual TLS: the dialing side and the
//! messages' bytes (the server side, `ClusterService`, is in `cluster`).
//!
//! * Each consenter dials every other consenter of a channel and keeps one bidirectional `Step` stream per
//!   (channel, peer). Requests carry Raft messages (`ConsensusRequest{channel, payload: raftpb.Message,
//!   metadata}`) and forwarded envelopes (`SubmitRequest{channel, last_validation_seq, payload: Envelope}`).
//! * As on Fabric's wire, a Step server sends nothing back on a live stream: no response headers, no
//!   `StepResponse`, so never a `SubmitResponse`. The dialer therefore starts sending at once and never waits
//!   for the response to begin (tonic's response future resolves only with the headers, which a Fabric server
//!   sends when the stream ends).
//! * Between Ferrofabric nodes a forwarded envelope is acknowledged, so that SUCCESS means two nodes hold it
//!   (see `book`): the dialer asks for answers with the request header [`SUBMIT_RESPONSES_HEADER`]; only then
//!   does our server send response headers (echoing the header) at once and answer every `SubmitRequest` with
//!   one `SubmitResponse`, in order, which the dialer matches first-in first-out. A peer that has not echoed
//!   the header within [`ANSWER_WAIT`] of the stream's start (a Fabric orderer) is *silent*: envelopes sent
//!   to it count as delivered once written to the stream, as Fabric's `forwardToLeader` does.
//! * The receiver identifies the sender by its TLS client certificate, which must be one of the channel's
//!   consenter certificates (Fabric pins consenters by certificate the same way). A Raft message whose
//!   `from` is not the sender is dropped.
//! * The envelope of a `SubmitRequest` travels as its original bytes (the message type here declares the
//!   field as `bytes`, which is wire-identical to an embedded `Envelope`), so a forwarded envelope reaches
//!   the block exactly as the client sent it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_protos::common::Status;
use ferrofabric_protos::orderer::{step_response, ConsensusRequest, StepResponse, SubmitResponse};
use prost::Message;
use tokio::sync::{mpsc, oneshot, watch};
use tonic::transport::Endpoint;
use tonic::Streaming;

pub(crate) use ferrofabric_comm::{cluster_endpoint as endpoint, ClusterTls};
use ferrofabric_comm::{PairCodec, ProstDecoder, RawEncoder};
use ferrofabric_orderer::Metrics;

/// Request header by which a Ferrofabric dialer asks the Step server to answer its `SubmitRequest`s; a
/// Ferrofabric server that will answer echoes it in its response headers (Fabric ignores it and never answers).
pub const SUBMIT_RESPONSES_HEADER: &str = "ferrofabric-submit-responses";

/// How long after a Step stream starts the dialer waits for the server to echo [`SUBMIT_RESPONSES_HEADER`]
/// before it takes the peer for one that never answers (a Fabric orderer).
pub(crate) const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// Whether the peer at the other end of a link answers `SubmitRequest`s, as far as the current stream tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answers {
    /// Not known yet (no stream, or the stream started less than [`ANSWER_WAIT`] ago).
    Unknown = 0,
    /// A Ferrofabric server: every `SubmitRequest` gets a `SubmitResponse`.
    Yes = 1,
    /// Never answers (Fabric): an envelope counts as delivered once sent.
    No = 2,
}

impl Answers {
    fn from_u8(v: u8) -> Answers {
        match v {
            1 => Answers::Yes,
            2 => Answers::No,
            _ => Answers::Unknown,
        }
    }
}

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
#[cfg(test)]
pub(crate) fn consensus_request(channel: &str, raft_message: Bytes) -> Bytes {
    consensus_request_with_metadata(channel, raft_message, Bytes::new())
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

/// Marshals a `StepRequest` carrying a Raft message and, from a leader, the marshaled
/// `etcdraft.ClusterMetadata` (Fabric sends it on heartbeats; empty otherwise).
pub(crate) fn consensus_request_with_metadata(channel: &str, raft_message: Bytes, metadata: Bytes) -> Bytes {
    let req = StepRequestRaw {
        payload: Some(StepPayload::ConsensusRequest(ConsensusRequest {
            channel: channel.to_owned(),
            payload: raft_message,
            metadata,
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
    /// A marshaled `StepRequest` with an envelope; the peer's answer is sent to `ack` (for a peer that never
    /// answers: `Ok` once the request is written to the stream).
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
    answers: Arc<AtomicU8>,
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
        let answers = Arc::new(AtomicU8::new(Answers::Unknown as u8));
        let link = Link { id, endpoint, max_message, report, answers: answers.clone() };
        tokio::spawn(run_link(link, rx, halt));
        PeerLink { id, tx, metrics, answers }
    }

    /// Whether the peer answers `SubmitRequest`s (a Ferrofabric node), as the current stream tells.
    pub(crate) fn answers(&self) -> Answers {
        Answers::from_u8(self.answers.load(Ordering::Relaxed))
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

    /// Sends an envelope and waits for the peer's answer, at most `timeout`; for a peer that never answers
    /// (Fabric), only until the request is written to the stream.
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

/// What a link task needs besides its queue.
struct Link {
    id: u64,
    endpoint: Endpoint,
    max_message: usize,
    report: Arc<dyn Fn(LinkEvent) + Send + Sync>,
    answers: Arc<AtomicU8>,
}

impl Link {
    fn set_answers(&self, a: Answers) {
        self.answers.store(a as u8, Ordering::Relaxed);
    }
}

async fn run_link(link: Link, mut rx: mpsc::Receiver<Outbound>, mut halt: watch::Receiver<bool>) {
    let id = link.id;
    let mut backoff = Duration::from_millis(50);
    loop {
        if *halt.borrow() {
            return;
        }
        let why = match connect_and_serve(&link, &mut rx, &mut halt).await {
            Served::Halted => return,
            Served::Broken(why) => why,
        };
        link.set_answers(Answers::Unknown);
        tracing::debug!(peer = id, reason = %why, "cluster link down");
        (link.report)(LinkEvent::Unreachable(id));
        // While the peer is away, fail what is queued instead of letting it pile up.
        let drain = async {
            while let Some(item) = rx.recv().await {
                fail(item, id, &*link.report, &why);
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

type Acks = VecDeque<Option<oneshot::Sender<Result<(), String>>>>;

/// The next response on the stream once its headers came; never while they have not (a Fabric server sends
/// none on a live stream).
async fn next_response(inbound: &mut Option<Streaming<StepResponse>>) -> Result<Option<StepResponse>, tonic::Status> {
    match inbound {
        Some(s) => s.message().await,
        None => futures::future::pending().await,
    }
}

fn settle(acks: &mut Acks, r: &SubmitResponse) {
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

async fn connect_and_serve(link: &Link, rx: &mut mpsc::Receiver<Outbound>, halt: &mut watch::Receiver<bool>) -> Served {
    let id = link.id;
    let report = &*link.report;
    let channel = tokio::select! {
        c = link.endpoint.connect() => match c {
            Ok(c) => c,
            Err(e) => return Served::Broken(format!("connect: {e}")),
        },
        _ = halt.changed() => return Served::Halted,
    };
    let mut grpc = tonic::client::Grpc::new(channel)
        .max_decoding_message_size(link.max_message)
        .max_encoding_message_size(link.max_message);
    if let Err(e) = grpc.ready().await {
        return Served::Broken(format!("not ready: {e}"));
    }
    let (req_tx, req_rx) = mpsc::channel::<Bytes>(64);
    let path = http::uri::PathAndQuery::from_static("/orderer.Cluster/Step");
    let codec = PairCodec::<RawEncoder, ProstDecoder<StepResponse>>::default();
    let mut request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(req_rx));
    request.metadata_mut().insert(SUBMIT_RESPONSES_HEADER, tonic::metadata::MetadataValue::from_static("1"));
    // The call sends the request headers and then the stream as it is fed; its future resolves only when
    // response headers arrive, which a Fabric server never sends on a live stream. So it is polled alongside
    // the send loop, never awaited before it.
    let call = grpc.streaming(request, path, codec);
    tokio::pin!(call);
    let mut call_pending = true;
    let mut inbound: Option<Streaming<StepResponse>> = None;
    link.set_answers(Answers::Unknown);
    let decide = tokio::time::sleep(ANSWER_WAIT);
    tokio::pin!(decide);
    tracing::debug!(peer = id, "cluster link up");
    let mut acks: Acks = VecDeque::new();
    let why = loop {
        let answers = Answers::from_u8(link.answers.load(Ordering::Relaxed));
        tokio::select! {
            item = rx.recv() => {
                let Some(item) = item else { return Served::Halted };
                let (bytes, snapshot, ack) = match item {
                    Outbound::Raft { bytes, snapshot } => (bytes, snapshot, None),
                    Outbound::Submit { bytes, ack } => (bytes, false, Some(ack)),
                };
                if req_tx.send(bytes).await.is_err() {
                    if snapshot {
                        report(LinkEvent::Snapshot(id, false));
                    }
                    if let Some(Some(ack)) = ack {
                        let _ = ack.send(Err("stream closed".to_owned()));
                    }
                    break "stream closed".to_owned();
                }
                if snapshot {
                    report(LinkEvent::Snapshot(id, true));
                }
                match (ack, answers) {
                    (None, _) => {}
                    (Some(ack), Answers::Yes) => acks.push_back(ack),
                    (Some(ack), a) => {
                        // Delivered as far as a peer that never answers can tell; while it is not known yet, a
                        // place in the queue keeps later answers matched to their requests.
                        if let Some(ack) = ack {
                            let _ = ack.send(Ok(()));
                        }
                        if a == Answers::Unknown {
                            acks.push_back(None);
                        }
                    }
                }
            }
            r = &mut call, if call_pending => {
                call_pending = false;
                match r {
                    Ok(r) => {
                        let answering = r.metadata().get(SUBMIT_RESPONSES_HEADER).is_some();
                        if answering && answers != Answers::No {
                            link.set_answers(Answers::Yes);
                        } else {
                            link.set_answers(Answers::No);
                            acks.clear();
                        }
                        inbound = Some(r.into_inner());
                    }
                    Err(e) => break format!("Step: {e}"),
                }
            }
            () = &mut decide, if answers == Answers::Unknown => {
                // No answering server echoed the header in time: a peer that never answers.
                link.set_answers(Answers::No);
                acks.clear();
            }
            resp = next_response(&mut inbound) => match resp {
                Ok(Some(StepResponse { payload: Some(step_response::Payload::SubmitRes(r)) })) => settle(&mut acks, &r),
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
