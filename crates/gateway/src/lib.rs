//! Fabric's Gateway service, `gateway.Gateway`, served on a peer port beside the Endorser and Deliver services
//! (Fabric's `internal/pkg/gateway`): the API of today's client SDKs (`fabric-gateway` for Node, Java and Go) and
//! of Hyperledger Caliper's `peer-gateway` connector.
//!
//! | call | what it does | module |
//! |---|---|---|
//! | `Endorse` | endorsements satisfying the chaincode's policy, assembled into a transaction to sign | `endorse` |
//! | `Evaluate` | one peer's result of a proposal, nothing ordered | `endorse` |
//! | `Submit` | the signed transaction to an orderer | `submit` |
//! | `CommitStatus` | the transaction's validation code and block, once this peer committed it | `commit` |
//! | `ChaincodeEvents` | a chaincode's events, block by block, from a start block on | `events` |
//!
//! The gateway calls endorsers and orderers over gRPC like any client, its own peer included, and reads the
//! peer's configuration and committed blocks through a [`Ledger`]. The same peer's discovery service,
//! `discovery.Discovery` ([`Gateway::discovery_service`]), answers from the same endorsers and plans: the
//! channel's MSPs and orderers, its peers, and each chaincode's endorsement layouts. Failures answer with Fabric's gRPC codes and
//! messages, and with a `gateway.ErrorDetail` per peer or orderer that failed.

mod commit;
mod conn;
mod discovery;
mod endorse;
mod error;
mod events;
mod ledger;
mod membership;
mod plan;
mod submit;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ferrofabric_comm::{ClientTls, Shutdown};
use ferrofabric_protos::gateway::gateway_server::{Gateway as GatewayApi, GatewayServer};
use ferrofabric_protos::gateway::{
    ChaincodeEventsResponse, CommitStatusResponse, EndorseRequest, EndorseResponse, EvaluateRequest, EvaluateResponse,
    SignedChaincodeEventsRequest, SignedCommitStatusRequest, SubmitRequest, SubmitResponse,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

pub use discovery::DiscoveryService;
pub use ledger::{ChaincodeInfo, Ledger};
pub use membership::Membership;
pub use plan::EndorserEndpoint;

use crate::conn::Connections;
use crate::plan::{Registry, MAX_MESSAGE_SIZE};

/// Time limits of a gateway (Fabric's `peer.gateway` settings in core.yaml, with Fabric's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatewayOptions {
    /// How long one endorser may take to answer a proposal (`endorsementTimeout`, 30 s).
    pub endorsement_timeout: Duration,
    /// How long one orderer may take to answer a Broadcast (`broadcastTimeout`, 30 s).
    pub broadcast_timeout: Duration,
    /// How long dialling an endorser or orderer may take (`dialTimeout`, 2 min).
    pub dial_timeout: Duration,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            endorsement_timeout: Duration::from_secs(30),
            broadcast_timeout: Duration::from_secs(30),
            dial_timeout: Duration::from_secs(120),
        }
    }
}

/// Signs with one peer's enrollment key (ECDSA over SHA-256, DER, low-S): Fabric peers sign the gossip alive and
/// state-info messages that discovery passes on to clients.
#[derive(Clone)]
pub struct GossipSigner(pub Arc<SignFn>);

/// A function from a message to its DER signature.
pub type SignFn = dyn Fn(&[u8]) -> Vec<u8> + Send + Sync;

impl std::fmt::Debug for GossipSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GossipSigner")
    }
}

/// What a gateway serves with.
#[derive(Debug, Clone, Default)]
pub struct GatewayConfig {
    /// The organisation (MSP ID) of the gateway's peer: its endorsers are asked first.
    pub local_mspid: String,
    /// Every endorsing peer of the channel, the gateway's own included.
    pub endorsers: Vec<EndorserEndpoint>,
    /// The orderers to submit to (`host:port`); empty = the endpoints of the channel configuration.
    pub orderers: Vec<String>,
    /// Orderer endpoints of the channel configuration dialled at another address (Fabric's
    /// `peer.deliveryclient.addressOverrides`, which Fabric's gateway applies too): endpoint to address.
    pub orderer_overrides: HashMap<String, String>,
    /// TLS of the connections to endorsers and orderers; `None` = plain text.
    pub tls: Option<ClientTls>,
    /// Time limits.
    pub options: GatewayOptions,
    /// The signers of the peers whose keys this process holds, by peer address (`host:port` as in `endorsers`):
    /// discovery signs those peers' gossip messages; the others' go unsigned.
    pub signers: HashMap<String, GossipSigner>,
}

/// The state shared by a gateway's calls.
struct Inner<L> {
    ledger: Arc<L>,
    registry: Registry,
    orderers: Vec<String>,
    orderer_overrides: HashMap<String, String>,
    connections: Connections,
    options: GatewayOptions,
    signers: HashMap<String, GossipSigner>,
    shutdown: Shutdown,
}

/// The `gateway.Gateway` service of one peer and channel; cheap to clone.
pub struct Gateway<L> {
    inner: Arc<Inner<L>>,
}

impl<L> Clone for Gateway<L> {
    fn clone(&self) -> Self {
        Gateway { inner: self.inner.clone() }
    }
}

impl<L: Ledger> Gateway<L> {
    /// A gateway reading `ledger`; waiting calls and event streams end when `shutdown` fires.
    pub fn new(config: GatewayConfig, ledger: Arc<L>, shutdown: Shutdown) -> Gateway<L> {
        let GatewayConfig { local_mspid, endorsers, orderers, orderer_overrides, tls, options, signers } = config;
        let endorser_connections = Connections::new(tls.clone(), options.dial_timeout);
        let registry = Registry::new(local_mspid, endorsers, endorser_connections, options.endorsement_timeout);
        let connections = Connections::new(tls, options.dial_timeout);
        let inner = Inner { ledger, registry, orderers, orderer_overrides, connections, options, signers, shutdown };
        Gateway { inner: Arc::new(inner) }
    }

    /// The tonic service, taking and giving messages up to Fabric's 100 MiB.
    pub fn into_service(self) -> GatewayServer<Gateway<L>> {
        GatewayServer::new(self).max_decoding_message_size(MAX_MESSAGE_SIZE).max_encoding_message_size(MAX_MESSAGE_SIZE)
    }
}

#[tonic::async_trait]
impl<L: Ledger> GatewayApi for Gateway<L> {
    async fn endorse(&self, request: Request<EndorseRequest>) -> Result<Response<EndorseResponse>, Status> {
        self.inner.endorse(request.into_inner()).await.map(Response::new)
    }

    async fn submit(&self, request: Request<SubmitRequest>) -> Result<Response<SubmitResponse>, Status> {
        self.inner.submit(request.into_inner()).await.map(Response::new)
    }

    async fn commit_status(
        &self,
        request: Request<SignedCommitStatusRequest>,
    ) -> Result<Response<CommitStatusResponse>, Status> {
        self.inner.commit_status(request.into_inner()).await.map(Response::new)
    }

    async fn evaluate(&self, request: Request<EvaluateRequest>) -> Result<Response<EvaluateResponse>, Status> {
        self.inner.evaluate(request.into_inner()).await.map(Response::new)
    }

    type ChaincodeEventsStream = ReceiverStream<Result<ChaincodeEventsResponse, Status>>;

    async fn chaincode_events(
        &self,
        request: Request<SignedChaincodeEventsRequest>,
    ) -> Result<Response<Self::ChaincodeEventsStream>, Status> {
        self.inner.chaincode_events(request.into_inner()).await.map(|rx| Response::new(ReceiverStream::new(rx)))
    }
}
