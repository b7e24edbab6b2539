//! Fabric's peer Deliver service (`protos.Deliver`): [`PeerDeliverService`] over one ledger ([`DeliverLedger`]),
//! with the peer's access rule ([`PeerAcl`]) and counters ([`DeliverMetrics`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferrofabric_block_store::BlockStore;
use ferrofabric_channelconfig::{ChannelConfig, SignatureSet, SignedData};
use ferrofabric_comm::{serve_stream, CallFuture, RawDecoder, Shutdown, StreamMethods};
use tokio::sync::watch;
use tonic::codegen::BoxFuture;
use tonic::server::StreamingService;
use tonic::Streaming;

use crate::error::AccessDenied;
use crate::server::{
    BlockSource, Chain, ChainManager, DeliverFrame, DeliverFrameEncoder, DeliverHandler, DeliverObserver,
    PolicyChecker, RequestKind,
};

/// gRPC service name: `/protos.Deliver/...`.
pub(crate) const SERVICE_NAME: &str = "protos.Deliver";

/// The policy Fabric's default ACLs give both `event/Block` and `event/FilteredBlock`.
pub const DEFAULT_EVENT_POLICY: &str = "/Channel/Application/Readers";

/// Largest request accepted: 4 MiB (a seek envelope is small).
const MAX_REQUEST: usize = 4 << 20;

/// Largest response sent: 256 MiB.
const MAX_RESPONSE: usize = 256 << 20;

/// What a peer's Deliver server reads: the channel's committed blocks and its current configuration.
#[derive(Clone)]
pub struct DeliverLedger {
    /// The channel served; requests for any other channel get `NOT_FOUND`.
    pub channel_id: String,
    /// Committed blocks (as the committer stores them).
    pub store: Arc<BlockStore>,
    /// The current channel configuration; `None` until the genesis block is stored (requests get `NOT_FOUND`).
    pub config: watch::Receiver<Option<Arc<ChannelConfig>>>,
}

impl std::fmt::Debug for DeliverLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeliverLedger").field("channel_id", &self.channel_id).finish_non_exhaustive()
    }
}

impl Chain for DeliverLedger {
    fn reader(&self) -> &dyn BlockSource {
        &*self.store
    }
    fn config(&self) -> Option<Arc<ChannelConfig>> {
        self.config.borrow().clone()
    }
}

impl ChainManager for DeliverLedger {
    fn chain(&self, channel_id: &str) -> Option<Arc<dyn Chain>> {
        (channel_id == self.channel_id).then(|| Arc::new(self.clone()) as Arc<dyn Chain>)
    }
}

/// The peer's Deliver access rule: the ACL policy of `event/Block` or `event/FilteredBlock` (Fabric
/// `aclmgmt`, default [`DEFAULT_EVENT_POLICY`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct PeerAcl;

impl PeerAcl {
    /// The ACL resource of a request kind.
    pub fn resource(kind: RequestKind) -> &'static str {
        match kind {
            RequestKind::Filtered => "event/FilteredBlock",
            RequestKind::Blocks | RequestKind::WithPrivateData => "event/Block",
        }
    }
}

impl PolicyChecker for PeerAcl {
    fn check(&self, config: &ChannelConfig, kind: RequestKind, signed: &SignedData) -> Result<(), AccessDenied> {
        let resource = Self::resource(kind);
        let path = config.application().and_then(|a| a.acl_policy(resource)).unwrap_or(DEFAULT_EVENT_POLICY);
        let policy = config.policy(path).ok_or_else(|| AccessDenied::NoPolicy(path.to_owned()))?;
        let set = SignatureSet::new(vec![signed.clone()], config.msp_manager());
        policy.evaluate(&set).map_err(|source| AccessDenied::NotSatisfied { path: path.to_owned(), source })
    }
}

/// Prometheus counters of a Deliver server (Fabric's `deliver_streams_opened`, `deliver_blocks_sent` by
/// `filtered`).
#[derive(Clone, Debug)]
pub struct DeliverMetrics {
    streams_opened: prometheus::IntCounter,
    blocks_sent: prometheus::IntCounterVec,
}

impl DeliverMetrics {
    /// Creates the counters and registers them with `registry`.
    ///
    /// Errors: a metric of the same name is already registered.
    pub fn register(registry: &prometheus::Registry) -> prometheus::Result<DeliverMetrics> {
        let streams_opened =
            prometheus::IntCounter::new("deliver_streams_opened", "The number of Deliver streams opened.")?;
        let blocks_sent = prometheus::IntCounterVec::new(
            prometheus::Opts::new("deliver_blocks_sent", "The number of blocks sent by the Deliver service."),
            &["filtered"],
        )?;
        registry.register(Box::new(streams_opened.clone()))?;
        registry.register(Box::new(blocks_sent.clone()))?;
        Ok(DeliverMetrics { streams_opened, blocks_sent })
    }
}

impl DeliverObserver for DeliverMetrics {
    fn stream_opened(&self) {
        self.streams_opened.inc();
    }
    fn block_sent(&self, kind: RequestKind) {
        let filtered = if kind == RequestKind::Filtered { "true" } else { "false" };
        self.blocks_sent.with_label_values(&[filtered]).inc();
    }
}

/// Fabric's peer Deliver service (`protos.Deliver`: `core/peer/deliverevents.go` on top of `common/deliver`),
/// served from one ledger of committed blocks — by the committer and by the block-store service.
///
/// Requests are handled by the [`DeliverHandler`] (see it for the order of checks and the statuses). The peer's
/// access rule ([`PeerAcl`]): the ACL policy of the resource — `event/Block` for `Deliver` and
/// `DeliverWithPrivateData`, `event/FilteredBlock` for `DeliverFiltered`; the channel config's ACLs may name
/// another policy, the default is `/Channel/Application/Readers`.
///
/// `Deliver` sends the stored block bytes as they are (TRANSACTIONS_FILTER and COMMIT_HASH set), `DeliverFiltered`
/// a `FilteredBlock` ([`crate::filtered::filtered_block`]), `DeliverWithPrivateData` the block with an empty private data map
/// (private data is not kept).
///
/// Added to a server as a [`ferrofabric_comm::StreamService`].
#[derive(Clone)]
pub struct PeerDeliverService {
    handler: Arc<DeliverHandler>,
}

impl std::fmt::Debug for PeerDeliverService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerDeliverService").field("handler", &self.handler).finish()
    }
}

impl PeerDeliverService {
    /// Serves `ledger` with the peer's ACLs, accepting request timestamps within `time_window` of this node's
    /// clock (`peer.authentication.timewindow`, 15 minutes in Fabric's sample config).
    pub fn new(ledger: DeliverLedger, time_window: Duration, metrics: Option<DeliverMetrics>) -> Self {
        Self::with_shutdown(ledger, time_window, metrics, Shutdown::never())
    }

    /// [`PeerDeliverService::new`] whose streams end when `shutdown` fires.
    pub fn with_shutdown(
        ledger: DeliverLedger,
        time_window: Duration,
        metrics: Option<DeliverMetrics>,
        shutdown: Shutdown,
    ) -> Self {
        Self::over(Arc::new(ledger), time_window, metrics, shutdown)
    }

    /// The Deliver service of a peer of many channels: each request is served from the chain `chains` gives for
    /// the channel it names (`NOT_FOUND` for none), otherwise as [`PeerDeliverService::with_shutdown`].
    pub fn over(
        chains: Arc<dyn ChainManager>,
        time_window: Duration,
        metrics: Option<DeliverMetrics>,
        shutdown: Shutdown,
    ) -> Self {
        let mut handler = DeliverHandler::new(chains, Arc::new(PeerAcl), time_window).with_shutdown(shutdown);
        if let Some(m) = metrics {
            handler = handler.with_observer(Arc::new(m));
        }
        PeerDeliverService { handler: Arc::new(handler) }
    }
}

impl StreamMethods for PeerDeliverService {
    const NAME: &'static str = SERVICE_NAME;

    fn call(&self, method: &str, req: http::Request<tonic::body::Body>) -> Option<CallFuture> {
        let kind = match method {
            "Deliver" => RequestKind::Blocks,
            "DeliverFiltered" => RequestKind::Filtered,
            "DeliverWithPrivateData" => RequestKind::WithPrivateData,
            _ => return None,
        };
        let rpc = Rpc(self.handler.clone(), kind);
        Some(serve_stream::<DeliverFrameEncoder, RawDecoder, _>(rpc, req, MAX_REQUEST, MAX_RESPONSE))
    }
}

struct Rpc(Arc<DeliverHandler>, RequestKind);

impl StreamingService<Bytes> for Rpc {
    type Response = DeliverFrame;
    type ResponseStream = tokio_stream::wrappers::ReceiverStream<Result<DeliverFrame, tonic::Status>>;
    type Future = BoxFuture<tonic::Response<Self::ResponseStream>, tonic::Status>;
    fn call(&mut self, request: tonic::Request<Streaming<Bytes>>) -> Self::Future {
        let rx = self.0.serve(self.1, request.into_inner());
        Box::pin(async move { Ok(tonic::Response::new(tokio_stream::wrappers::ReceiverStream::new(rx))) })
    }
}
