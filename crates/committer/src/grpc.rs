//! gRPC codecs that keep marshaled messages as bytes (requests arrive as the raw `Envelope`, blocks leave as the
//! stored bytes), so neither side of a Deliver stream decodes and re-encodes blocks. The wire format is gRPC's
//! length-prefixed protobuf, as for the generated `protos.Deliver` / `orderer.AtomicBroadcast` stubs.

use std::marker::PhantomData;

use bytes::{Buf, BufMut, Bytes};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Encodes an already marshaled message.
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

/// Decodes a message as its raw bytes (decoding happens later, where a failure can be answered properly).
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
