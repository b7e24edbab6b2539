//! The `orderer.AtomicBroadcast` gRPC service with codecs that keep bytes as bytes.
//!
//! The generated tonic server decodes every request into a prost struct and encodes every response from
//! one. This service is wired by hand (same paths, same wire format) so that:
//! * requests arrive as the raw marshaled `Envelope` (`Bytes`, a zero-copy slice of the HTTP/2 buffer): a
//!   message that does not decode gets a BAD_REQUEST response instead of killing the stream, the decode runs
//!   on the checking threads, and the block holds the client's exact bytes;
//! * Deliver responses are written around the stored block bytes (see [`ferrofabric_deliver::DeliverHandler`]): the
//!   block is encoded once, when it is stored, for all receivers.
//!
//! The codecs are `ferrofabric-comm`'s.

use std::sync::Arc;

use bytes::Bytes;
use ferrofabric_comm::{serve_stream, CallFuture, ProstEncoder, RawDecoder, StreamMethods};
use ferrofabric_deliver::{DeliverFrame, DeliverFrameEncoder, DeliverHandler, RequestKind};
use ferrofabric_protos::orderer::BroadcastResponse;
use futures::stream::BoxStream;
use futures::StreamExt;
use tonic::codegen::BoxFuture;
use tonic::server::StreamingService;
use tonic::Streaming;

use crate::broadcast::BroadcastHandler;

/// gRPC service name (`/orderer.AtomicBroadcast/...`).
pub(crate) const SERVICE_NAME: &str = "orderer.AtomicBroadcast";

/// The methods of `orderer.AtomicBroadcast`; served as a [`ferrofabric_comm::StreamService`].
#[derive(Clone)]
pub(crate) struct AtomicBroadcastService {
    broadcast: Arc<BroadcastHandler>,
    deliver: Arc<DeliverHandler>,
    max_decoding: usize,
    max_encoding: usize,
}

impl std::fmt::Debug for AtomicBroadcastService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AtomicBroadcastService").finish_non_exhaustive()
    }
}

impl AtomicBroadcastService {
    /// A service over the two handlers, accepting messages up to `max_decoding` bytes and sending up to
    /// `max_encoding` bytes (`General.MaxRecvMsgSize` / `MaxSendMsgSize`).
    pub(crate) fn new(
        broadcast: Arc<BroadcastHandler>,
        deliver: Arc<DeliverHandler>,
        max_decoding: usize,
        max_encoding: usize,
    ) -> Self {
        AtomicBroadcastService { broadcast, deliver, max_decoding, max_encoding }
    }
}

impl StreamMethods for AtomicBroadcastService {
    const NAME: &'static str = SERVICE_NAME;

    fn call(&self, method: &str, req: http::Request<tonic::body::Body>) -> Option<CallFuture> {
        let (max_dec, max_enc) = (self.max_decoding, self.max_encoding);
        Some(match method {
            "Broadcast" => serve_stream::<ProstEncoder<BroadcastResponse>, RawDecoder, _>(
                BroadcastSvc(self.broadcast.clone()),
                req,
                max_dec,
                max_enc,
            ),
            "Deliver" => serve_stream::<DeliverFrameEncoder, RawDecoder, _>(
                DeliverSvc(self.deliver.clone()),
                req,
                max_dec,
                max_enc,
            ),
            _ => return None,
        })
    }
}

struct BroadcastSvc(Arc<BroadcastHandler>);

impl StreamingService<Bytes> for BroadcastSvc {
    type Response = BroadcastResponse;
    type ResponseStream = BoxStream<'static, Result<BroadcastResponse, tonic::Status>>;
    type Future = BoxFuture<tonic::Response<Self::ResponseStream>, tonic::Status>;
    fn call(&mut self, request: tonic::Request<Streaming<Bytes>>) -> Self::Future {
        let handler = self.0.clone();
        Box::pin(async move {
            let out = handler.serve(request.into_inner()).map(Ok).boxed();
            Ok(tonic::Response::new(out))
        })
    }
}

struct DeliverSvc(Arc<DeliverHandler>);

impl StreamingService<Bytes> for DeliverSvc {
    type Response = DeliverFrame;
    type ResponseStream = tokio_stream::wrappers::ReceiverStream<Result<DeliverFrame, tonic::Status>>;
    type Future = BoxFuture<tonic::Response<Self::ResponseStream>, tonic::Status>;
    fn call(&mut self, request: tonic::Request<Streaming<Bytes>>) -> Self::Future {
        let handler = self.0.clone();
        Box::pin(async move {
            let rx = handler.serve(RequestKind::Blocks, request.into_inner());
            Ok(tonic::Response::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
        })
    }
}
