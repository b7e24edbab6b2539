//! Ferrofabric's endorser: Fabric's `protos.Endorser/ProcessProposal` over a replicated in-memory world state
//! (FastFabric §III-G: endorsers on their own processes, fed with validated blocks by the committer, scale out).
//!
//! * [`Endorser::process_proposal`] checks a `SignedProposal` as Fabric's endorser does (`core/endorser`), simulates
//!   the chaincode ([`ferrofabric_chaincode`]) against the [`Replica`] and returns the `ProposalResponse` with the
//!   exact bytes a Fabric 2.5 peer produces, so Fabric's SDKs and validators accept it.
//! * [`Replica`] holds the state, committed txids and channel configuration; [`follow`] keeps it up to date from
//!   the committer's peer `Deliver` service, or an in-process committer calls [`Replica::apply_block`].
//! * [`serve`] runs the gRPC service; [`start`] starts an endorser from its configuration ([`EndorserConfig`], read
//!   from an [`EndorserFile`] by `ferrofabric endorser` in the CLI crate), with TLS, operations endpoints and,
//!   optionally, the Gateway and discovery services on its port ([`DaemonLedger`] is what they read).
//! * The client side (signed proposals with [`create_proposal`], `CreateSignedTx` with [`assemble_transaction`]),
//!   for tests, the node and the benchmark.

mod acl;
mod client;
mod daemon;
mod endorser;
mod error;
mod follow;
mod gateway;
mod peer;
mod private;
mod proposal;
mod replica;
mod syscc;

use std::future::Future;
use std::net::SocketAddr;

use ferrofabric_protos::peer::endorser_server::EndorserServer;
use ferrofabric_protos::peer::{ProposalResponse, SignedProposal};

pub use client::{assemble_transaction, create_init_proposal, create_proposal, create_proposal_with, ClientProposal};
pub use daemon::{default_listen, start, EndorserConfig, EndorserFile, GatewayPeer, GatewaySection, RunningEndorser};
pub use endorser::{endorse, Endorser, Rejected};
pub use error::EndorserError;
pub use follow::{follow, follow_with};
pub use gateway::{BlockSource, DaemonLedger, RecentBlocks, RECENT_BLOCKS};
pub use peer::{PeerChannels, PeerEndorser};
pub use private::TRANSIENT_RETENTION_BLOCKS;
pub use replica::{Replica, ReplicaError};

/// Largest gRPC message accepted or sent (Fabric's default `peer.maxRecvMsgSize` / `maxSendMsgSize`, 100 MiB).
pub const MAX_MESSAGE_SIZE: usize = 100 * 1024 * 1024;

/// The tonic service of an [`Endorser`]: refusals ([`Rejected`]) become gRPC status UNKNOWN with Fabric's message,
/// as a Go gRPC server reports a returned error.
#[derive(Clone)]
pub struct EndorserService(pub Endorser);

#[tonic::async_trait]
impl ferrofabric_protos::peer::endorser_server::Endorser for EndorserService {
    async fn process_proposal(
        &self,
        request: tonic::Request<SignedProposal>,
    ) -> Result<tonic::Response<ProposalResponse>, tonic::Status> {
        self.0.process(request.get_ref()).await.map(tonic::Response::new).map_err(|r| tonic::Status::unknown(r.0))
    }
}

/// The `protos.Endorser` gRPC server of `endorser`, with Fabric's message size limits.
pub fn grpc_service(endorser: Endorser) -> EndorserServer<EndorserService> {
    EndorserServer::new(EndorserService(endorser))
        .max_decoding_message_size(MAX_MESSAGE_SIZE)
        .max_encoding_message_size(MAX_MESSAGE_SIZE)
}

/// Serves `endorser` on `listener` (plain HTTP/2 gRPC) until `shutdown` completes.
///
/// Errors: the transport failed (e.g. the listener broke).
pub async fn serve(
    endorser: Endorser,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    // TCP_NODELAY: a proposal's response is one small write; without it Nagle's algorithm and the client's
    // delayed ACK hold it for up to 40 ms, which bounds a client with a few proposals in flight.
    let incoming = tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
    tonic::transport::Server::builder()
        .add_service(grpc_service(endorser))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}

/// A bound listener and the address it got (for `127.0.0.1:0`).
///
/// Errors: the address cannot be bound.
pub async fn bind(addr: SocketAddr) -> std::io::Result<(tokio::net::TcpListener, SocketAddr)> {
    let l = tokio::net::TcpListener::bind(addr).await?;
    let a = l.local_addr()?;
    Ok((l, a))
}
