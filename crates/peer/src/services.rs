//! The Gateway and discovery services of a peer of many channels: each request goes to the service of the channel
//! it names. A request for a channel the peer has not joined is answered by another channel's service, which
//! refuses it as a gateway refuses a channel it does not serve; with no channel joined, `UNAVAILABLE`.

use std::sync::Arc;

use ferrofabric_endorser::DaemonLedger;
use ferrofabric_gateway::Gateway;
use ferrofabric_protos::discovery::discovery_server::Discovery as DiscoveryApi;
use ferrofabric_protos::discovery::{Request as DiscoveryRequest, Response as DiscoveryResponse, SignedRequest};
use ferrofabric_protos::gateway::gateway_server::Gateway as GatewayApi;
use ferrofabric_protos::gateway::{
    ChaincodeEventsRequest, ChaincodeEventsResponse, CommitStatusRequest, CommitStatusResponse, EndorseRequest,
    EndorseResponse, EvaluateRequest, EvaluateResponse, SignedChaincodeEventsRequest, SignedCommitStatusRequest,
    SubmitRequest, SubmitResponse,
};
use prost::Message;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use crate::channels::Channels;

/// `gateway.Gateway` over every joined channel.
#[derive(Clone)]
pub(crate) struct PeerGateway(pub Arc<Channels>);

impl PeerGateway {
    fn route(&self, channel: &str) -> Result<Gateway<DaemonLedger>, Status> {
        self.0
            .gateway(channel)
            .or_else(|| self.0.any_gateway())
            .ok_or_else(|| Status::unavailable(format!("this peer has joined no channel; channel {channel} not found")))
    }
}

#[tonic::async_trait]
impl GatewayApi for PeerGateway {
    async fn endorse(&self, request: Request<EndorseRequest>) -> Result<Response<EndorseResponse>, Status> {
        self.route(&request.get_ref().channel_id)?.endorse(request).await
    }

    async fn submit(&self, request: Request<SubmitRequest>) -> Result<Response<SubmitResponse>, Status> {
        self.route(&request.get_ref().channel_id)?.submit(request).await
    }

    async fn commit_status(
        &self,
        request: Request<SignedCommitStatusRequest>,
    ) -> Result<Response<CommitStatusResponse>, Status> {
        let channel = CommitStatusRequest::decode(request.get_ref().request.clone()).unwrap_or_default().channel_id;
        self.route(&channel)?.commit_status(request).await
    }

    async fn evaluate(&self, request: Request<EvaluateRequest>) -> Result<Response<EvaluateResponse>, Status> {
        self.route(&request.get_ref().channel_id)?.evaluate(request).await
    }

    type ChaincodeEventsStream = ReceiverStream<Result<ChaincodeEventsResponse, Status>>;

    async fn chaincode_events(
        &self,
        request: Request<SignedChaincodeEventsRequest>,
    ) -> Result<Response<Self::ChaincodeEventsStream>, Status> {
        let channel = ChaincodeEventsRequest::decode(request.get_ref().request.clone()).unwrap_or_default().channel_id;
        self.route(&channel)?.chaincode_events(request).await
    }
}

/// `discovery.Discovery` over every joined channel, routed by the channel of the request's first query that names
/// one (the SDKs ask about one channel at a time).
#[derive(Clone)]
pub(crate) struct PeerDiscovery(pub Arc<Channels>);

#[tonic::async_trait]
impl DiscoveryApi for PeerDiscovery {
    async fn discover(&self, request: Request<SignedRequest>) -> Result<Response<DiscoveryResponse>, Status> {
        let channel = DiscoveryRequest::decode(request.get_ref().payload.clone())
            .ok()
            .and_then(|r| r.queries.into_iter().map(|q| q.channel).find(|c| !c.is_empty()))
            .unwrap_or_default();
        let gateway = PeerGateway(self.0.clone()).route(&channel)?;
        gateway.discovery().discover(request).await
    }
}
