//! The `orderer.AtomicBroadcast` gRPC service with codecs that keep bytes as bytes.
//!
//! The generated tonic server decodes every request into a prost struct and encodes every response from
//! one. This service is wired by hand (same paths, same wire format) so that:
//! * requests arrive as the raw marshaled `Envelope` (`Bytes`, a zero-copy slice of the HTTP/2 buffer): a
//!   message that does not decode gets a BAD_REQUEST response instead of killing the stream, the decode runs
//!   on the checking threads, and the block holds the client's exact bytes;
//! * Deliver responses are written around the stored block bytes (see [`crate::deliver`]): the block is
//!   encoded once, when it is stored, for all receivers.

use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes};
use ferrofabric_protos::orderer::BroadcastResponse;
use futures::stream::BoxStream;
use futures::StreamExt;
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::BoxFuture;
use tonic::server::{Grpc, NamedService, StreamingService};
use tonic::Streaming;

use crate::broadcast::BroadcastHandler;
use crate::deliver::{DeliverFrame, DeliverHandler};

/// gRPC service name (`/orderer.AtomicBroadcast/...`).
pub const SERVICE_NAME: &str = "orderer.AtomicBroadcast";

/// Decodes a gRPC message as its raw bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawDecoder;

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, tonic::Status> {
        let n = src.remaining();
        Ok(Some(src.copy_to_bytes(n)))
    }
}

/// Encodes already marshaled bytes as a gRPC message (client side of the benchmark and tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct RawEncoder;

impl Encoder for RawEncoder {
    type Item = Bytes;
    type Error = tonic::Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

/// Encodes any prost message.
#[derive(Debug, Clone, Copy)]
pub struct ProstEncoder<M>(PhantomData<M>);

impl<M> Default for ProstEncoder<M> {
    fn default() -> Self {
        ProstEncoder(PhantomData)
    }
}

impl<M: Message> Encoder for ProstEncoder<M> {
    type Item = M;
    type Error = tonic::Status;
    fn encode(&mut self, item: M, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        item.encode(dst).map_err(|e| tonic::Status::internal(format!("encoding a response: {e}")))
    }
}

/// Decodes any prost message.
#[derive(Debug, Clone, Copy)]
pub struct ProstDecoder<M>(PhantomData<M>);

impl<M> Default for ProstDecoder<M> {
    fn default() -> Self {
        ProstDecoder(PhantomData)
    }
}

impl<M: Message + Default> Decoder for ProstDecoder<M> {
    type Item = M;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<M>, tonic::Status> {
        M::decode(src).map(Some).map_err(|e| tonic::Status::internal(format!("decoding a message: {e}")))
    }
}

/// Writes a [`DeliverFrame`] as a marshaled `DeliverResponse`: `block` is field 2 (tag byte 0x12, varint
/// length, the stored bytes), `status` field 1 (tag byte 0x08, varint enum value).
#[derive(Debug, Clone, Copy, Default)]
pub struct DeliverEncoder;

impl Encoder for DeliverEncoder {
    type Item = DeliverFrame;
    type Error = tonic::Status;
    fn encode(&mut self, item: DeliverFrame, dst: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        match item {
            DeliverFrame::Block(bytes) => {
                dst.put_u8(0x12);
                prost::encoding::encode_varint(bytes.len() as u64, dst);
                dst.put_slice(&bytes);
            }
            DeliverFrame::Status(status) => {
                dst.put_u8(0x08);
                prost::encoding::encode_varint(status as i32 as i64 as u64, dst);
            }
        }
        Ok(())
    }
}

/// A codec from an encoder and a decoder.
#[derive(Debug, Clone, Copy, Default)]
pub struct PairCodec<E, D>(PhantomData<(E, D)>);

impl<E, D> Codec for PairCodec<E, D>
where
    E: Encoder<Error = tonic::Status> + Default + Send + 'static,
    D: Decoder<Error = tonic::Status> + Default + Send + 'static,
    E::Item: Send + 'static,
    D::Item: Send + 'static,
{
    type Encode = E::Item;
    type Decode = D::Item;
    type Encoder = E;
    type Decoder = D;
    fn encoder(&mut self) -> E {
        E::default()
    }
    fn decoder(&mut self) -> D {
        D::default()
    }
}

/// The server side of `orderer.AtomicBroadcast`, for `tonic::transport::Server::add_service`.
#[derive(Clone)]
pub struct AtomicBroadcastService {
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
    pub fn new(
        broadcast: Arc<BroadcastHandler>,
        deliver: Arc<DeliverHandler>,
        max_decoding: usize,
        max_encoding: usize,
    ) -> Self {
        AtomicBroadcastService { broadcast, deliver, max_decoding, max_encoding }
    }
}

impl NamedService for AtomicBroadcastService {
    const NAME: &'static str = SERVICE_NAME;
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
            let rx = handler.serve(request.into_inner());
            Ok(tonic::Response::new(tokio_stream::wrappers::ReceiverStream::new(rx)))
        })
    }
}

impl tonic::codegen::Service<http::Request<tonic::body::Body>> for AtomicBroadcastService {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<tonic::body::Body>) -> Self::Future {
        let (max_dec, max_enc) = (Some(self.max_decoding), Some(self.max_encoding));
        match req.uri().path() {
            "/orderer.AtomicBroadcast/Broadcast" => {
                let svc = BroadcastSvc(self.broadcast.clone());
                Box::pin(async move {
                    let mut grpc = Grpc::new(PairCodec::<ProstEncoder<BroadcastResponse>, RawDecoder>::default())
                        .apply_max_message_size_config(max_dec, max_enc);
                    Ok(grpc.streaming(svc, req).await)
                })
            }
            "/orderer.AtomicBroadcast/Deliver" => {
                let svc = DeliverSvc(self.deliver.clone());
                Box::pin(async move {
                    let mut grpc = Grpc::new(PairCodec::<DeliverEncoder, RawDecoder>::default())
                        .apply_max_message_size_config(max_dec, max_enc);
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
