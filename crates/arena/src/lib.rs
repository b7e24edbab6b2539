//! The per-block unmarshal arena (FastFabric §III-C, "Opt P-III", made lock-free).
//!
//! A Fabric transaction is a matryoshka of marshaled messages: Envelope → Payload → (ChannelHeader,
//! SignatureHeader) → Transaction → TransactionAction → ChaincodeActionPayload → ProposalResponsePayload →
//! ChaincodeAction → TxReadWriteSet → KVRWSet. Fabric's committer unmarshals the same layers again in every stage
//! (txvalidator, VSCC plugin, key-level validation, MVCC, block store). FastFabric caches them per block; here each
//! layer of each transaction is a [`std::sync::OnceLock`] cell that is decoded the first time any stage asks for it
//! and is then shared, read-only and without locks, by every thread and stage.
//!
//! Decoding is zero-copy: the block is one [`bytes::Bytes`] and every `bytes` field of every layer is a slice of it.
//! Hashes and signatures are always computed over those original slices (e.g. [`TxArena::envelope_bytes`],
//! `Envelope.payload`, `ChaincodeEndorsedAction.proposal_response_payload`), never over re-encoded messages.
//!
//! Errors are values: a layer that fails to decode stores its [`DecodeError`], and every later request of that layer
//! (or of a layer below it) returns the same error, naming the layer.

use std::sync::OnceLock;

use bytes::Bytes;
use ferrofabric_protos::common::{
    Block, BlockHeader, BlockMetadata, ChannelHeader, Envelope, Header, Payload, SignatureHeader,
};
use ferrofabric_protos::kvrwset::{HashedRwSet, KvrwSet};
use ferrofabric_protos::peer::{
    ChaincodeAction, ChaincodeActionPayload, ChaincodeHeaderExtension, ProposalResponsePayload, Transaction,
};
use ferrofabric_protos::rwset::TxReadWriteSet;
use prost::Message;

/// A layer that could not be decoded (or is missing), with the layer's name and the reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{layer}: {reason}")]
pub struct DecodeError {
    /// Which layer failed, e.g. `"Payload"` or `"ChaincodeActionPayload"`.
    pub layer: &'static str,
    /// What was wrong.
    pub reason: String,
}

impl DecodeError {
    fn new(layer: &'static str, reason: impl Into<String>) -> Self {
        DecodeError { layer, reason: reason.into() }
    }
}

/// Result of asking the arena for a layer: a shared reference into the arena, or the layer's stored error.
pub type Layer<'a, T> = Result<&'a T, &'a DecodeError>;

fn decode<M: Message + Default>(layer: &'static str, bytes: &Bytes) -> Result<M, DecodeError> {
    M::decode(bytes.clone()).map_err(|e| DecodeError::new(layer, e.to_string()))
}

/// One decoded block: header and metadata decoded eagerly (small), each transaction's layers on demand.
#[derive(Debug)]
pub struct BlockArena {
    raw: Bytes,
    header: BlockHeader,
    metadata: BlockMetadata,
    txs: Vec<TxArena>,
}

impl BlockArena {
    /// Decodes a marshaled `common.Block`. Only the outer message is decoded here; the envelopes stay raw slices
    /// of `raw` until asked for.
    ///
    /// Errors: the bytes are not a Block, or it has no header.
    pub fn decode(raw: Bytes) -> Result<Self, DecodeError> {
        let block: Block = decode("Block", &raw)?;
        let header = block.header.ok_or_else(|| DecodeError::new("Block", "missing header"))?;
        let metadata = block.metadata.unwrap_or_default();
        let txs = block.data.map(|d| d.data).unwrap_or_default().into_iter().map(TxArena::new).collect();
        Ok(BlockArena { raw, header, metadata, txs })
    }

    /// The block's original bytes.
    pub fn raw(&self) -> &Bytes {
        &self.raw
    }

    /// The block header.
    pub fn header(&self) -> &BlockHeader {
        &self.header
    }

    /// The block number.
    pub fn number(&self) -> u64 {
        self.header.number
    }

    /// The block metadata as received (for orderer blocks only SIGNATURES is normally set).
    pub fn metadata(&self) -> &BlockMetadata {
        &self.metadata
    }

    /// The transactions (entries of `BlockData.data`) in block order.
    pub fn txs(&self) -> &[TxArena] {
        &self.txs
    }

    /// SHA-256 over the concatenation of the envelope bytes: Fabric's `protoutil.ComputeBlockDataHash`
    /// ([`ferrofabric_protoutil::block_data_hash`] over the original envelope slices).
    pub fn computed_data_hash(&self) -> [u8; 32] {
        ferrofabric_protoutil::block_data_hash(self.txs.iter().map(|tx| &tx.raw))
    }
}

/// A decoded `Payload` whose header is known to be present.
#[derive(Debug)]
pub struct PayloadLayer {
    /// `Payload.header`: the raw channel and signature header bytes.
    pub header: Header,
    /// `Payload.data`: the marshaled Transaction, ConfigEnvelope, ... depending on the header type.
    pub data: Bytes,
}

/// The first (and, in Fabric 2.x, only) action of an endorser transaction, with its two raw inner layers decoded.
#[derive(Debug)]
pub struct ActionLayer {
    /// `TransactionAction.header`, decoded: the signature header of the proposal (creator, nonce).
    pub signature_header: SignatureHeader,
    /// The raw `TransactionAction.header` bytes (hashed into the proposal hash).
    pub signature_header_bytes: Bytes,
    /// `TransactionAction.payload`, decoded.
    pub payload: ChaincodeActionPayload,
}

/// A namespace's read/write set with its inner layers decoded (Fabric's `rwsetutil.NsRwSet`).
#[derive(Debug)]
pub struct NsRwSet {
    /// The chaincode namespace.
    pub namespace: String,
    /// Public reads, range queries, writes and metadata writes.
    pub kv: KvrwSet,
    /// Hashed read/write sets of private data collections, in the order they appear.
    pub collections: Vec<CollHashedRwSet>,
}

/// A collection's hashed read/write set (Fabric's `rwsetutil.CollHashedRwSet`).
#[derive(Debug)]
pub struct CollHashedRwSet {
    /// The collection name.
    pub collection: String,
    /// Hashed reads, writes and metadata writes.
    pub hashed: HashedRwSet,
    /// Hash of the private read/write set (kept; the private data itself is out of scope).
    pub pvt_rwset_hash: Bytes,
}

/// One transaction's lazily decoded layers. All accessors take `&self` and may be called from any thread.
#[derive(Debug)]
pub struct TxArena {
    raw: Bytes,
    envelope: OnceLock<Result<Envelope, DecodeError>>,
    payload: OnceLock<Result<PayloadLayer, DecodeError>>,
    channel_header: OnceLock<Result<ChannelHeader, DecodeError>>,
    signature_header: OnceLock<Result<SignatureHeader, DecodeError>>,
    transaction: OnceLock<Result<Transaction, DecodeError>>,
    action: OnceLock<Result<ActionLayer, DecodeError>>,
    response_payload: OnceLock<Result<ProposalResponsePayload, DecodeError>>,
    chaincode_action: OnceLock<Result<ChaincodeAction, DecodeError>>,
    rwset: OnceLock<Result<Vec<NsRwSet>, DecodeError>>,
    header_extension: OnceLock<Result<ChaincodeHeaderExtension, DecodeError>>,
}

/// Decodes `cell` once; later calls return the stored result.
fn layer<'a, T>(
    cell: &'a OnceLock<Result<T, DecodeError>>,
    f: impl FnOnce() -> Result<T, DecodeError>,
) -> Layer<'a, T> {
    cell.get_or_init(f).as_ref()
}

impl TxArena {
    /// A transaction over its raw envelope bytes; nothing is decoded yet.
    pub fn new(raw: Bytes) -> Self {
        TxArena {
            raw,
            envelope: OnceLock::new(),
            payload: OnceLock::new(),
            channel_header: OnceLock::new(),
            signature_header: OnceLock::new(),
            transaction: OnceLock::new(),
            action: OnceLock::new(),
            response_payload: OnceLock::new(),
            chaincode_action: OnceLock::new(),
            rwset: OnceLock::new(),
            header_extension: OnceLock::new(),
        }
    }

    /// The envelope's original bytes (as stored in `BlockData.data`).
    pub fn envelope_bytes(&self) -> &Bytes {
        &self.raw
    }

    /// `Envelope` (payload bytes + creator signature).
    pub fn envelope(&self) -> Layer<'_, Envelope> {
        layer(&self.envelope, || decode("Envelope", &self.raw))
    }

    /// `Payload` decoded from `Envelope.payload`. Errors: not a Payload, or its `header` is missing.
    pub fn payload(&self) -> Layer<'_, PayloadLayer> {
        layer(&self.payload, || {
            let env = self.envelope().map_err(Clone::clone)?;
            let p: Payload = decode("Payload", &env.payload)?;
            let header = p.header.ok_or_else(|| DecodeError::new("Payload.header", "missing header"))?;
            Ok(PayloadLayer { header, data: p.data })
        })
    }

    /// The raw `Payload.header` parts: `(channel_header, signature_header)` bytes.
    pub fn header_bytes(&self) -> Result<(&Bytes, &Bytes), &DecodeError> {
        let p = self.payload()?;
        Ok((&p.header.channel_header, &p.header.signature_header))
    }

    /// `ChannelHeader` decoded from `Payload.header.channel_header`.
    pub fn channel_header(&self) -> Layer<'_, ChannelHeader> {
        layer(&self.channel_header, || {
            let (ch, _) = self.header_bytes().map_err(Clone::clone)?;
            decode("ChannelHeader", ch)
        })
    }

    /// `SignatureHeader` decoded from `Payload.header.signature_header`.
    pub fn signature_header(&self) -> Layer<'_, SignatureHeader> {
        layer(&self.signature_header, || {
            let (_, sh) = self.header_bytes().map_err(Clone::clone)?;
            decode("SignatureHeader", sh)
        })
    }

    /// `ChaincodeHeaderExtension` decoded from `ChannelHeader.extension`.
    pub fn header_extension(&self) -> Layer<'_, ChaincodeHeaderExtension> {
        layer(&self.header_extension, || {
            let ch = self.channel_header().map_err(Clone::clone)?;
            decode("ChaincodeHeaderExtension", &ch.extension)
        })
    }

    /// `Transaction` decoded from `Payload.data` (endorser transactions only).
    pub fn transaction(&self) -> Layer<'_, Transaction> {
        layer(&self.transaction, || {
            let p = self.payload().map_err(Clone::clone)?;
            decode("Transaction", &p.data)
        })
    }

    /// The first `TransactionAction` with its signature header and `ChaincodeActionPayload` decoded.
    /// Errors: no action, or an inner layer does not decode.
    pub fn action(&self) -> Layer<'_, ActionLayer> {
        layer(&self.action, || {
            let tx = self.transaction().map_err(Clone::clone)?;
            let act = tx.actions.first().ok_or_else(|| DecodeError::new("TransactionAction", "no actions"))?;
            let signature_header = decode("TransactionAction.header", &act.header)?;
            let payload = decode("ChaincodeActionPayload", &act.payload)?;
            Ok(ActionLayer { signature_header, signature_header_bytes: act.header.clone(), payload })
        })
    }

    /// The raw `ProposalResponsePayload` bytes that the endorsers signed. Errors: the action has no endorsed action or
    /// an empty response payload (Fabric's "no payload in ChaincodeActionPayload").
    pub fn response_payload_bytes(&self) -> Result<&Bytes, DecodeError> {
        let act = self.action().map_err(Clone::clone)?;
        match &act.payload.action {
            Some(a) if !a.proposal_response_payload.is_empty() => Ok(&a.proposal_response_payload),
            _ => Err(DecodeError::new("ChaincodeEndorsedAction", "no payload in ChaincodeActionPayload")),
        }
    }

    /// `ProposalResponsePayload` (proposal hash + extension).
    pub fn response_payload(&self) -> Layer<'_, ProposalResponsePayload> {
        layer(&self.response_payload, || decode("ProposalResponsePayload", self.response_payload_bytes()?))
    }

    /// `ChaincodeAction` decoded from `ProposalResponsePayload.extension` (results, events, response, chaincode id).
    pub fn chaincode_action(&self) -> Layer<'_, ChaincodeAction> {
        layer(&self.chaincode_action, || {
            let prp = self.response_payload().map_err(Clone::clone)?;
            if prp.extension.is_empty() {
                return Err(DecodeError::new("ProposalResponsePayload", "response payload is missing extension"));
            }
            decode("ChaincodeAction", &prp.extension)
        })
    }

    /// The transaction's read/write sets, every namespace's `KVRWSet` and collection `HashedRWSet` decoded
    /// (Fabric's `rwsetutil.TxRwSet.FromProtoBytes`).
    pub fn rwset(&self) -> Layer<'_, Vec<NsRwSet>> {
        layer(&self.rwset, || {
            let cca = self.chaincode_action().map_err(Clone::clone)?;
            let tx_rwset: TxReadWriteSet = decode("TxReadWriteSet", &cca.results)?;
            tx_rwset
                .ns_rwset
                .into_iter()
                .map(|ns| {
                    let kv: KvrwSet = decode("KVRWSet", &ns.rwset)?;
                    let collections = ns
                        .collection_hashed_rwset
                        .into_iter()
                        .map(|c| {
                            Ok(CollHashedRwSet {
                                hashed: decode("HashedRWSet", &c.hashed_rwset)?,
                                collection: c.collection_name,
                                pvt_rwset_hash: c.pvt_rwset_hash,
                            })
                        })
                        .collect::<Result<Vec<_>, DecodeError>>()?;
                    Ok(NsRwSet { namespace: ns.namespace, kv, collections })
                })
                .collect()
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn garbage_never_panics_and_names_the_layer() {
        let tx = TxArena::new(Bytes::from_static(&[0xff, 0xff, 0xff]));
        assert_eq!(tx.envelope().unwrap_err().layer, "Envelope");
        assert_eq!(tx.rwset().unwrap_err().layer, "Envelope");
        let empty = TxArena::new(Bytes::new());
        assert!(empty.envelope().is_ok());
        assert_eq!(empty.payload().unwrap_err().layer, "Payload.header");
    }
}
