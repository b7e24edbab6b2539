//! The one shape of the daemons' hand-wired gRPC services: every method is a bidirectional stream whose messages
//! pass through the raw-bytes codecs of `codec` (Broadcast, Deliver, the cluster Step services).
//!
//! A service says which methods it has ([`StreamMethods`]); [`StreamService`] makes it a tonic service (tonic's
//! generated servers do the same for prost stubs: route by path, UNIMPLEMENTED for any other).

use std::convert::Infallible;
use std::task::{Context, Poll};

use tonic::body::Body;
use tonic::codec::{Decoder, Encoder};
use tonic::codegen::BoxFuture;
use tonic::server::{Grpc, NamedService, StreamingService};

use crate::codec::{unimplemented_response, PairCodec};

/// The future of one call of a [`StreamService`].
pub type CallFuture = BoxFuture<http::Response<Body>, Infallible>;

/// The methods of a hand-wired streaming gRPC service.
pub trait StreamMethods: Clone + Send + Sync + 'static {
    /// The gRPC service name, e.g. `orderer.AtomicBroadcast`.
    const NAME: &'static str;

    /// Serves `req`, whose path is `/<NAME>/<method>`, with [`serve_stream`]; `None` when the service has no such
    /// method (the caller then gets UNIMPLEMENTED).
    fn call(&self, method: &str, req: http::Request<Body>) -> Option<CallFuture>;
}

/// A [`StreamMethods`] as a tonic service, for `tonic::transport::Server::add_service`.
#[derive(Debug, Clone)]
pub struct StreamService<M>(pub M);

impl<M: StreamMethods> NamedService for StreamService<M> {
    const NAME: &'static str = M::NAME;
}

impl<M: StreamMethods> tonic::codegen::Service<http::Request<Body>> for StreamService<M> {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = CallFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<Body>) -> CallFuture {
        let method = req.uri().path().strip_prefix('/').and_then(|p| p.strip_prefix(M::NAME)?.strip_prefix('/'));
        let method = method.map(str::to_owned);
        match method.and_then(|m| self.0.call(&m, req)) {
            Some(future) => future,
            None => Box::pin(async { Ok(unimplemented_response()) }),
        }
    }
}

/// Serves one bidirectional-streaming call: requests decoded by `D`, `svc`'s responses encoded by `E`, messages
/// larger than `max_decoding` / `max_encoding` bytes refused with RESOURCE_EXHAUSTED (tonic's limits).
pub fn serve_stream<E, D, S>(svc: S, req: http::Request<Body>, max_decoding: usize, max_encoding: usize) -> CallFuture
where
    E: Encoder<Error = tonic::Status> + Default + Send + 'static,
    D: Decoder<Error = tonic::Status> + Default + Send + 'static,
    E::Item: Send + 'static,
    D::Item: Send + 'static,
    S: StreamingService<D::Item, Response = E::Item> + Send + 'static,
    S::Future: Send,
    S::ResponseStream: Send + 'static,
{
    Box::pin(async move {
        let mut grpc = Grpc::new(PairCodec::<E, D>::default())
            .apply_max_message_size_config(Some(max_decoding), Some(max_encoding));
        Ok(grpc.streaming(svc, req).await)
    })
}
