//! Block assembly and the orderer's block metadata, byte-compatible with a Fabric 2.5 orderer.
//!
//! Follows Fabric's `orderer/common/multichannel/blockwriter.go` (`CreateNextBlock`, `addLastConfig`,
//! `addBlockSignature`) and `protoutil/blockutils.go` (`NewBlock`, `BlockDataHash`, `BlockHeaderBytes`):
//!
//! * header: `number = previous.number + 1`, `previous_hash = SHA-256(DER(previous header))`,
//!   `data_hash = SHA-256(envelope_0 ‖ envelope_1 ‖ …)`;
//! * metadata: five slots (SIGNATURES, LAST_CONFIG, TRANSACTIONS_FILTER, ORDERER, COMMIT_HASH), all empty
//!   except
//!   - SIGNATURES = `Metadata{value: OrdererBlockMetadata{last_config: {index}, consenter_metadata:
//!     Metadata{value: consenter bytes}}, signatures: [MetadataSignature{signature_header, signature}]}` with the
//!     signature over `value ‖ signature_header ‖ DER(header)`;
//!   - LAST_CONFIG = `Metadata{value: LastConfig{index}}` (which marshals to zero bytes for index 0, so a
//!     block whose last config is the genesis block shows an empty slot, as in the fixture ledger).
//!
//! The functions here are pure (no I/O, no threads); the signing itself is a closure so that any signer
//! (an MSP signing identity, a test kit key, a BFT node collecting quorum signatures) can be plugged in.

use crate::header::block_header_bytes;
use crate::tx::new_nonce;
use bytes::Bytes;
use ferrofabric_protos::common::{
    Block, BlockData, BlockHeader, BlockMetadata, BlockMetadataIndex, LastConfig, Metadata, MetadataSignature,
    OrdererBlockMetadata, SignatureHeader,
};
use prost::Message;
use sha2::{Digest, Sha256};

/// Number of `BlockMetadata.metadata` slots Fabric allocates (`len(cb.BlockMetadataIndex_name)` = 5).
pub const METADATA_SLOTS: usize = 5;

/// SHA-256 over the concatenated marshaled envelopes: Fabric's `protoutil.BlockDataHash` (the hashing
/// width is always MaxUint32, i.e. a flat concatenation). Takes the envelope bytes in block order (a
/// `&[Bytes]`, or any iterator of them). Returns 32 bytes.
pub fn block_data_hash<'a>(envelopes: impl IntoIterator<Item = &'a Bytes>) -> [u8; 32] {
    let mut h = Sha256::new();
    for e in envelopes {
        h.update(e);
    }
    h.finalize().into()
}

/// Pads `metadata` to the [`METADATA_SLOTS`] slots Fabric allocates, with empty slots (Fabric's
/// `protoutil.InitBlockMetadata`); longer metadata is left as it is.
pub fn init_block_metadata(metadata: &mut BlockMetadata) {
    if metadata.metadata.len() < METADATA_SLOTS {
        metadata.metadata.resize(METADATA_SLOTS, Bytes::new());
    }
}

/// The header of the block that follows the block whose header hash is `previous_hash` (empty for block 0),
/// holding `envelopes`: Fabric's `CreateNextBlock` minus the data.
pub fn next_header(number: u64, previous_hash: &[u8], envelopes: &[Bytes]) -> BlockHeader {
    BlockHeader {
        number,
        previous_hash: Bytes::copy_from_slice(previous_hash),
        data_hash: Bytes::copy_from_slice(&block_data_hash(envelopes)),
    }
}

/// The marshaled `OrdererBlockMetadata{last_config: {index: last_config}, consenter_metadata:
/// Metadata{value: consenter_metadata}}`: the `value` of the SIGNATURES slot, signed by every orderer
/// signature of the block. `consenter_metadata` is consensus specific (empty for solo, an
/// `etcdraft.BlockMetadata` for Raft, a BFT view/sequence record for SmartBFT).
pub fn signature_value(last_config: u64, consenter_metadata: &[u8]) -> Bytes {
    let consenter = Metadata { value: Bytes::copy_from_slice(consenter_metadata), signatures: Vec::new() };
    Bytes::from(
        OrdererBlockMetadata {
            last_config: Some(LastConfig { index: last_config }),
            consenter_metadata: Bytes::from(consenter.encode_to_vec()),
        }
        .encode_to_vec(),
    )
}

/// The marshaled `OrdererBlockMetadata{last_config: {index: last_config}, consenter_metadata: view_metadata}` of a
/// BFT block: SmartBFT's assembler (Fabric `orderer/consensus/smartbft/assembler.go`) puts its marshaled
/// `ViewMetadata` there as it is, where the block writer of the other consensus types wraps theirs in a `Metadata`
/// ([`signature_value`]); the blocks of a real Fabric 3.1 BFT ordering service show it.
pub fn bft_signature_value(last_config: u64, view_metadata: &[u8]) -> Bytes {
    Bytes::from(
        OrdererBlockMetadata {
            last_config: Some(LastConfig { index: last_config }),
            consenter_metadata: Bytes::copy_from_slice(view_metadata),
        }
        .encode_to_vec(),
    )
}

/// The bytes an orderer signs for a block: `value ‖ signature_header ‖ DER(header)` (Fabric's
/// `addBlockSignature`, verified by `protoutil.BlockSignatureVerifier`).
pub fn signed_bytes(value: &[u8], signature_header: &[u8], header: &BlockHeader) -> Vec<u8> {
    let der = block_header_bytes(header);
    let mut msg = Vec::with_capacity(value.len() + signature_header.len() + der.len());
    msg.extend_from_slice(value);
    msg.extend_from_slice(signature_header);
    msg.extend_from_slice(&der);
    msg
}

/// One orderer signature over a block: `SignatureHeader{creator, nonce}` marshaled, and
/// `sign(value ‖ signature_header ‖ DER(header))`. `creator` is the signer's marshaled
/// `SerializedIdentity`; `sign` returns a DER ECDSA signature (e.g. `SigningIdentity::sign`).
pub fn block_signature(
    header: &BlockHeader,
    value: &[u8],
    creator: &Bytes,
    nonce: Bytes,
    sign: impl FnOnce(&[u8]) -> Vec<u8>,
) -> MetadataSignature {
    let signature_header = Bytes::from(SignatureHeader { creator: creator.clone(), nonce }.encode_to_vec());
    let signature = sign(&signed_bytes(value, &signature_header, header));
    MetadataSignature { signature_header, signature: Bytes::from(signature), identifier_header: Bytes::new() }
}

/// The five metadata slots of an orderer block: SIGNATURES = `Metadata{value, signatures}`, LAST_CONFIG =
/// `Metadata{value: LastConfig{index: last_config}}`, the rest empty.
pub fn orderer_metadata(value: Bytes, signatures: Vec<MetadataSignature>, last_config: u64) -> BlockMetadata {
    let mut metadata = vec![Bytes::new(); METADATA_SLOTS];
    metadata[BlockMetadataIndex::Signatures as usize] = Bytes::from(Metadata { value, signatures }.encode_to_vec());
    let last =
        Metadata { value: Bytes::from(LastConfig { index: last_config }.encode_to_vec()), signatures: Vec::new() };
    metadata[BlockMetadataIndex::LastConfig as usize] = Bytes::from(last.encode_to_vec());
    BlockMetadata { metadata }
}

/// A fully assembled block, marshaled: header, the envelopes exactly as given (their original bytes), and
/// `metadata`. The envelope bytes are copied once, into the result.
pub fn encode_block(header: BlockHeader, envelopes: Vec<Bytes>, metadata: BlockMetadata) -> Bytes {
    let block = Block { header: Some(header), data: Some(BlockData { data: envelopes }), metadata: Some(metadata) };
    Bytes::from(block.encode_to_vec())
}

/// Builds, signs (with one signature) and marshals a block in one call: the single-signer path of solo and
/// Raft. `sign` gets the exact bytes to sign. Equivalent to [`signature_value`] + [`block_signature`] +
/// [`orderer_metadata`] + [`encode_block`].
pub fn sign_and_encode(
    header: BlockHeader,
    envelopes: Vec<Bytes>,
    last_config: u64,
    consenter_metadata: &[u8],
    creator: &Bytes,
    sign: impl FnOnce(&[u8]) -> Vec<u8>,
) -> Bytes {
    let value = signature_value(last_config, consenter_metadata);
    let signature = block_signature(&header, &value, creator, new_nonce(), sign);
    let metadata = orderer_metadata(value, vec![signature], last_config);
    encode_block(header, envelopes, metadata)
}

/// Why [`with_block_metadata`] could not rewrite a block.
#[derive(Debug, thiserror::Error)]
pub enum BlockBytesError {
    /// The bytes are not a sequence of protobuf fields (truncated, a bad key or varint, a group).
    #[error("block does not decode: {0}")]
    Malformed(&'static str),
    /// The block's `metadata` field does not decode as a `BlockMetadata`.
    #[error("block metadata does not decode: {0}")]
    Metadata(#[from] prost::DecodeError),
}

/// `raw` (a marshaled `common.Block`) with its `metadata` replaced by what `update` makes of it, without decoding
/// the header or the data: the fields other than `metadata` are copied as they are and the new `metadata` is written
/// after them, where protobuf and Fabric put it. This is how the committer adds the peer's TRANSACTIONS_FILTER and
/// COMMIT_HASH to a block it has already decoded once for validation (Fabric's `kvledger` re-marshals the whole
/// block); for a block in field order the bytes equal a decode, update and re-encode.
///
/// Errors: [`BlockBytesError`] when `raw` is not a sequence of protobuf fields or its metadata does not decode.
pub fn with_block_metadata(raw: &Bytes, update: impl FnOnce(&mut BlockMetadata)) -> Result<Bytes, BlockBytesError> {
    /// `Block.metadata`.
    const METADATA_FIELD: u64 = 3;
    let mut metadata = BlockMetadata::default();
    let mut kept: Vec<std::ops::Range<usize>> = Vec::with_capacity(2);
    let mut at = 0;
    while at < raw.len() {
        let start = at;
        let key = read_varint(raw, &mut at)?;
        let (field, wire_type) = (key >> 3, key & 7);
        let body = match wire_type {
            0 => read_varint(raw, &mut at).map(|_| at..at)?,
            1 => at..at + 8,
            2 => {
                let len = usize::try_from(read_varint(raw, &mut at)?)
                    .map_err(|_| BlockBytesError::Malformed("field length"))?;
                at..at.checked_add(len).ok_or(BlockBytesError::Malformed("field length"))?
            }
            5 => at..at + 4,
            _ => return Err(BlockBytesError::Malformed("unsupported wire type")),
        };
        if body.end > raw.len() {
            return Err(BlockBytesError::Malformed("field runs past the end"));
        }
        at = body.end;
        if field == METADATA_FIELD && wire_type == 2 {
            // Repeated occurrences of a message field merge, as a protobuf decoder merges them.
            metadata.merge(&raw[body])?;
        } else {
            kept.push(start..at);
        }
    }
    update(&mut metadata);
    let kept_len: usize = kept.iter().map(ExactSizeIterator::len).sum();
    let mut out = Vec::with_capacity(kept_len + metadata.encoded_len() + 11);
    for range in kept {
        out.extend_from_slice(&raw[range]);
    }
    // The key of field 3, wire type 2 (length-delimited), then the length and the message.
    out.push(((METADATA_FIELD << 3) | 2) as u8);
    out.extend_from_slice(&metadata.encode_length_delimited_to_vec());
    Ok(Bytes::from(out))
}

/// A base-128 varint at `*at`, advancing past it.
fn read_varint(raw: &[u8], at: &mut usize) -> Result<u64, BlockBytesError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *raw.get(*at).ok_or(BlockBytesError::Malformed("truncated varint"))?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(BlockBytesError::Malformed("varint longer than ten bytes"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::header::block_header_hash;
    use crate::records::records;
    use crate::tx::NONCE_LEN;
    use ferrofabric_msp::SigningIdentity;
    use std::path::PathBuf;

    fn fixture(rel: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/fabric-2.5").join(rel)
    }

    fn fixture_blocks() -> Vec<Block> {
        let raw = Bytes::from(std::fs::read(fixture("orderer-blocks.bin")).unwrap());
        records(raw).map(|r| Block::decode(r.unwrap().1).unwrap()).collect()
    }

    /// Rebuilding every fixture block from its envelopes and its predecessor gives the same header, the same
    /// SIGNATURES value and the same LAST_CONFIG bytes as the Fabric 2.5.16 orderer wrote.
    #[test]
    fn rebuilt_fixture_blocks_match_fabric_bytes() {
        let blocks = fixture_blocks();
        assert!(blocks.len() > 20);
        for pair in blocks.windows(2) {
            let (prev, block) = (&pair[0], &pair[1]);
            let envelopes = block.data.as_ref().unwrap().data.clone();
            let header = next_header(
                prev.header.as_ref().unwrap().number + 1,
                &block_header_hash(prev.header.as_ref().unwrap()),
                &envelopes,
            );
            assert_eq!(Some(&header), block.header.as_ref(), "header of block {}", header.number);

            let md = &block.metadata.as_ref().unwrap().metadata;
            assert_eq!(md.len(), METADATA_SLOTS);
            let sigs = Metadata::decode(md[0].clone()).unwrap();
            let obm = OrdererBlockMetadata::decode(sigs.value.clone()).unwrap();
            let consenter = Metadata::decode(obm.consenter_metadata.clone()).unwrap();
            let last_config = obm.last_config.unwrap().index;
            assert_eq!(signature_value(last_config, &consenter.value), sigs.value, "value of block {}", header.number);

            let rebuilt = orderer_metadata(sigs.value.clone(), sigs.signatures.clone(), last_config);
            assert_eq!(&rebuilt.metadata[..2], &md[..2], "SIGNATURES/LAST_CONFIG of block {}", header.number);
            assert!(md[2..].iter().all(|m| m.is_empty()));
            // Fabric re-marshals the block the same way prost does: the stored bytes are reproduced exactly.
            let bytes = encode_block(header, envelopes, rebuilt);
            assert_eq!(bytes, Bytes::from(block.encode_to_vec()));
        }
    }

    /// A block signed here with the fixture orderer's key verifies under that orderer's public key over the
    /// exact bytes Fabric's verifier reconstructs.
    #[test]
    fn signature_covers_value_header_and_der() {
        let dir = fixture("crypto/ordererOrganizations/example.com/orderers/orderer.example.com/msp");
        let signer = SigningIdentity::from_msp_dir("OrdererMSP", &dir).unwrap();
        let envelopes = vec![Bytes::from_static(b"tx-1"), Bytes::from_static(b"tx-2")];
        let header = next_header(7, &[1u8; 32], &envelopes);
        let raw = sign_and_encode(header.clone(), envelopes, 3, b"", signer.serialized(), |m| signer.sign(m));
        let block = Block::decode(raw).unwrap();
        let md = Metadata::decode(block.metadata.unwrap().metadata[0].clone()).unwrap();
        assert_eq!(md.signatures.len(), 1);
        let s = &md.signatures[0];
        let shdr = SignatureHeader::decode(s.signature_header.clone()).unwrap();
        assert_eq!(&shdr.creator, signer.serialized());
        assert_eq!(shdr.nonce.len(), NONCE_LEN);
        let msg = signed_bytes(&md.value, &s.signature_header, &header);
        signer.public_key().verify(&msg, &s.signature).unwrap();
        let mut tampered = msg.clone();
        tampered[0] ^= 1;
        assert!(signer.public_key().verify(&tampered, &s.signature).is_err());
    }

    #[test]
    fn last_config_zero_is_an_empty_slot() {
        let md = orderer_metadata(signature_value(0, b""), Vec::new(), 0);
        assert!(md.metadata[1].is_empty());
        let md = orderer_metadata(signature_value(4, b""), Vec::new(), 4);
        let last = Metadata::decode(md.metadata[1].clone()).unwrap();
        assert_eq!(LastConfig::decode(last.value).unwrap().index, 4);
    }

    /// Adding the peer's metadata to a Fabric block without decoding its data gives the bytes a full decode, update
    /// and re-encode gives, for every block of the Fabric 2.5 ledger.
    #[test]
    fn block_metadata_rewritten_in_place_equals_a_full_reencode() {
        for block in fixture_blocks() {
            let raw = Bytes::from(block.encode_to_vec());
            let update = |md: &mut BlockMetadata| {
                init_block_metadata(md);
                md.metadata[BlockMetadataIndex::TransactionsFilter as usize] = Bytes::from_static(&[0, 11, 0]);
                md.metadata[BlockMetadataIndex::CommitHash as usize] = Bytes::from_static(&[7; 34]);
            };
            let mut expected = block.clone();
            update(expected.metadata.get_or_insert_with(Default::default));
            assert_eq!(with_block_metadata(&raw, update).unwrap(), Bytes::from(expected.encode_to_vec()));
        }
    }

    /// Truncated or garbled block bytes are refused with an error, never a panic.
    #[test]
    fn garbled_block_bytes_are_refused_without_panic() {
        let raw = Bytes::from(fixture_blocks()[3].encode_to_vec());
        for cut in [1, 2, 5, raw.len() / 2, raw.len() - 1] {
            assert!(with_block_metadata(&raw.slice(..cut), init_block_metadata).is_err(), "cut at {cut}");
        }
        for garbage in [&[0xff; 12][..], &[0x1b, 0x00], &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x7f]] {
            assert!(with_block_metadata(&Bytes::copy_from_slice(garbage), init_block_metadata).is_err());
        }
    }
}
