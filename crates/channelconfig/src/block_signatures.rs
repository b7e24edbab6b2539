//! The orderer signatures of a block checked against the channel's `/Channel/Orderer/BlockValidation` policy (Fabric's
//! `protoutil.BlockSignatureVerifier` and `VerifyBlockAttestation`): the one check that the committer's validator,
//! the orderer's follower and the BFT consenter's catch-up all apply to a block an orderer signed.

use bytes::Bytes;
use ferrofabric_protos::common::SignatureHeader;
use ferrofabric_protos::common::{Block, BlockHeader, BlockMetadata, BlockMetadataIndex, IdentifierHeader, Metadata};
use ferrofabric_protos::msp::SerializedIdentity;
use ferrofabric_protoutil::block_header_bytes;
use prost::Message;

use crate::channel_config::ChannelConfig;
use crate::signature_set::{SignatureSet, SignedData};

/// The policy every block's orderer signatures must satisfy.
const BLOCK_VALIDATION: &str = "/Channel/Orderer/BlockValidation";

/// Why a block's orderer signatures were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockSignatureError {
    /// The bytes are not a `common.Block` with a header.
    #[error("block does not decode: {0}")]
    Decode(String),
    /// The SIGNATURES metadata is missing or malformed, or its signatures do not satisfy BlockValidation.
    #[error("block {number}: orderer signature check failed: {reason}")]
    NotSatisfied {
        /// The block's number (as its header claims).
        number: u64,
        /// What is wrong.
        reason: String,
    },
}

/// Verifies the SIGNATURES metadata of the block with `header` and `metadata` against
/// `/Channel/Orderer/BlockValidation` of `config`. A signature names its signer in one of two ways:
/// * a `signature_header` (etcdraft, solo): the signer is its `creator`, and the signature covers
///   `metadata.value ‖ signature_header ‖ DER(block header)`;
/// * on channels with the V3_0 channel capability (BFT), an empty `signature_header` and an `identifier_header`
///   (`IdentifierHeader{consenter id, nonce}`): the signer is the consenter of that id in the Orderer group's
///   `Orderers.consenter_mapping`, and the signature covers `metadata.value ‖ identifier_header ‖ DER(block header)`.
///   A signature whose id names no consenter is skipped, as Fabric skips it.
///
/// With `presumed`, every signature counts as valid (a trusted verifier checked them); their signers must still
/// satisfy the policy. The data hash is not checked here.
///
/// Errors: [`BlockSignatureError::NotSatisfied`].
pub fn verify_block_signatures(
    config: &ChannelConfig,
    header: &BlockHeader,
    metadata: &BlockMetadata,
    presumed: bool,
) -> Result<(), BlockSignatureError> {
    let number = header.number;
    let refuse = |reason: String| BlockSignatureError::NotSatisfied { number, reason };
    let raw = metadata
        .metadata
        .get(BlockMetadataIndex::Signatures as usize)
        .ok_or_else(|| refuse("no SIGNATURES metadata".into()))?;
    let md = Metadata::decode(raw.clone()).map_err(|e| refuse(format!("SIGNATURES metadata: {e}")))?;
    let header_bytes = block_header_bytes(header);
    let consenters = match config.orderer() {
        Some(orderer) if config.capabilities().consensus_type_bft() => Some(orderer.consenters()),
        _ => None,
    };
    let mut items = Vec::with_capacity(md.signatures.len());
    for s in &md.signatures {
        let (identity, signed_header) = match consenters {
            Some(consenters) if s.signature_header.is_empty() && !s.identifier_header.is_empty() => {
                let id = IdentifierHeader::decode(s.identifier_header.clone())
                    .map_err(|e| refuse(format!("identifier header: {e}")))?
                    .identifier;
                let Some(consenter) = consenters.iter().find(|c| c.id == id) else { continue };
                let identity =
                    SerializedIdentity { mspid: consenter.msp_id.clone(), id_bytes: consenter.identity.clone() };
                (Bytes::from(identity.encode_to_vec()), &s.identifier_header)
            }
            _ => {
                let shdr = SignatureHeader::decode(s.signature_header.clone())
                    .map_err(|e| refuse(format!("signature header: {e}")))?;
                (shdr.creator, &s.signature_header)
            }
        };
        let mut data = Vec::with_capacity(md.value.len() + signed_header.len() + header_bytes.len());
        data.extend_from_slice(&md.value);
        data.extend_from_slice(signed_header);
        data.extend_from_slice(&header_bytes);
        items.push(SignedData { data: Bytes::from(data), identity, signature: s.signature.clone() });
    }
    let policy = config
        .policy(BLOCK_VALIDATION)
        .ok_or_else(|| refuse(format!("the channel has no {BLOCK_VALIDATION} policy")))?;
    let set = if presumed {
        SignatureSet::presumed_valid(items, config.msp_manager())
    } else {
        SignatureSet::new(items, config.msp_manager())
    };
    policy.evaluate(&set).map_err(|e| refuse(e.to_string()))
}

/// Checks a block attestation under `config`: the header and metadata of a block as Deliver serves them for
/// `HEADER_WITH_SIG` (data only for config blocks), whose SIGNATURES must satisfy `/Channel/Orderer/BlockValidation`
/// (Fabric's `VerifyBlockAttestation`: the data hash is not checked). The BFT deliverer and the followers use it to
/// believe an orderer that says a block exists. Returns the block number.
///
/// Errors: the bytes do not decode ([`BlockSignatureError::Decode`]), or the signatures do not satisfy the policy.
pub fn verify_block_attestation(config: &ChannelConfig, block: Bytes) -> Result<u64, BlockSignatureError> {
    let block = Block::decode(block).map_err(|e| BlockSignatureError::Decode(e.to_string()))?;
    let header = block.header.as_ref().ok_or_else(|| BlockSignatureError::Decode("block without header".into()))?;
    verify_block_signatures(config, header, &block.metadata.unwrap_or_default(), false)?;
    Ok(header.number)
}
