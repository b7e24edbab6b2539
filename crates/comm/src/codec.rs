//! gRPC codecs that keep marshaled messages as bytes.
//!
//! tonic's generated stubs decode every request into a prost struct and encode every response from one. The
//! daemons' hot services are wired by hand (same paths, same wire format: gRPC's length-prefixed protobuf) so that
//! a request arrives as its raw bytes — a message that does not decode can be answered with a `common.Status`
//! instead of killing the stream, and signatures are checked over the client's exact bytes — and a block leaves as
//! the bytes the ledger stores, encoded once for all receivers.

use std::marker::PhantomData;

use bytes::{Buf, BufMut, Bytes};
use prost::Message;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Encodes an already marshaled message as it is.
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

/// Decodes a message as its raw bytes (a zero-copy slice of the HTTP/2 buffer where possible); decoding happens
/// later, where a failure can be answered properly.
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
        item.encode(dst).map_err(|e| tonic::Status::internal(format!("encoding a message: {e}")))
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

/// A codec made of an encoder and a decoder.
#[derive(Debug, Clone, Copy)]
pub struct PairCodec<E, D>(PhantomData<(E, D)>);

impl<E, D> Default for PairCodec<E, D> {
    fn default() -> Self {
        PairCodec(PhantomData)
    }
}

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

/// The answer of a hand-wired gRPC service to a path it does not serve: HTTP 200 with `grpc-status`
/// UNIMPLEMENTED, as tonic's generated servers answer.
pub(crate) fn unimplemented_response() -> http::Response<tonic::body::Body> {
    let mut response = http::Response::new(tonic::body::Body::default());
    let headers = response.headers_mut();
    headers.insert(tonic::Status::GRPC_STATUS, (tonic::Code::Unimplemented as i32).into());
    headers.insert(http::header::CONTENT_TYPE, tonic::metadata::GRPC_CONTENT_TYPE);
    response
}
