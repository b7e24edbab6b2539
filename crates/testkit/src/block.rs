//! Orderer-side block cutting and signing as a Fabric 2.5 etcdraft orderer
//! does it, built on the orderer's own block path in `ferrofabric-protoutil`
//! (`signature_value`, `block_signature`, `orderer_metadata`; Fabric
//! `orderer/common/multichannel/blockwriter.go`), with tampering hooks and
//! deterministic signatures for tests.

use bytes::Bytes;
use ferrofabric_protos::common::{Block, BlockData, BlockHeader};
use ferrofabric_protos::etcdraft;
use ferrofabric_protoutil::{
    block_data_hash, block_header_hash, block_signature, new_nonce, orderer_metadata, signature_value,
};
use prost::Message;
use sha2::{Digest, Sha256};

use crate::{Network, SigningIdentity, TestkitError};

/// Index of the SIGNATURES metadata slot.
pub const SIGNATURES: usize = 0;
/// Index of the LAST_CONFIG metadata slot.
pub const LAST_CONFIG: usize = 1;

/// Cuts and signs one block.
///
/// Default metadata mirrors a single-node etcdraft channel: SIGNATURES =
/// `Metadata{value: OrdererBlockMetadata{last_config, consenter_metadata:
/// Metadata{value: etcdraft.BlockMetadata{consenter_ids [1],
/// next_consenter_id 2, raft_index number+2}}}, signatures: [one]}`, the
/// signature over `value ‖ signature_header ‖ header DER`; LAST_CONFIG =
/// `Metadata{value: LastConfig{index}}` (empty bytes for index 0); the other
/// three slots empty.
#[derive(Clone)]
pub struct BlockBuilder<'a> {
    signer: &'a SigningIdentity,
    number: u64,
    previous_hash: Bytes,
    last_config: u64,
    consenter_metadata: Option<Bytes>,
    nonce: Option<Bytes>,
    data_hash: Option<Bytes>,
    corrupt_signature: bool,
    unsigned: bool,
}

impl<'a> BlockBuilder<'a> {
    /// Block `prev.number + 1` chained to `prev` (previous_hash =
    /// [`block_header_hash`]`(prev)`), or block 0 with an empty previous hash.
    /// `signer` is normally [`Network::orderer`].
    pub fn new(signer: &'a SigningIdentity, prev: Option<&BlockHeader>) -> Self {
        let (number, previous_hash) = match prev {
            Some(p) => (p.number.wrapping_add(1), Bytes::copy_from_slice(&block_header_hash(p))),
            None => (0, Bytes::new()),
        };
        BlockBuilder {
            signer,
            number,
            previous_hash,
            last_config: 0,
            consenter_metadata: None,
            nonce: None,
            data_hash: None,
            corrupt_signature: false,
            unsigned: false,
        }
    }

    /// Index of the last config block (default 0).
    pub fn last_config(mut self, index: u64) -> Self {
        self.last_config = index;
        self
    }

    /// Consenter metadata wrapped in `OrdererBlockMetadata.consenter_metadata`
    /// (default: the etcdraft BlockMetadata described on [`BlockBuilder`]).
    pub fn consenter_metadata(mut self, value: impl Into<Bytes>) -> Self {
        self.consenter_metadata = Some(value.into());
        self
    }

    /// Signature-header nonce (default: 24 random bytes).
    pub fn nonce(mut self, nonce: impl Into<Bytes>) -> Self {
        self.nonce = Some(nonce.into());
        self
    }

    /// Tamper: header `data_hash` (default: [`block_data_hash`]).
    pub fn data_hash(mut self, hash: impl Into<Bytes>) -> Self {
        self.data_hash = Some(hash.into());
        self
    }

    /// Tamper: header `previous_hash`.
    pub fn previous_hash(mut self, hash: impl Into<Bytes>) -> Self {
        self.previous_hash = hash.into();
        self
    }

    /// Tamper: flip one bit of the orderer signature.
    pub fn corrupt_signature(mut self) -> Self {
        self.corrupt_signature = true;
        self
    }

    /// Leave the signatures list empty (as configtxgen's block 0).
    pub fn unsigned(mut self) -> Self {
        self.unsigned = true;
        self
    }

    /// Builds the block from marshaled envelopes, in order.
    pub fn build(&self, envelopes: &[Bytes]) -> Block {
        let header = BlockHeader {
            number: self.number,
            previous_hash: self.previous_hash.clone(),
            data_hash: self.data_hash.clone().unwrap_or_else(|| Bytes::copy_from_slice(&block_data_hash(envelopes))),
        };
        let consenter = self.consenter_metadata.clone().unwrap_or_else(|| {
            Bytes::from(
                etcdraft::BlockMetadata {
                    consenter_ids: vec![1],
                    next_consenter_id: 2,
                    raft_index: self.number.wrapping_add(2),
                }
                .encode_to_vec(),
            )
        });
        let value = signature_value(self.last_config, &consenter);
        let mut signatures = Vec::new();
        if !self.unsigned {
            let nonce = self.nonce.clone().unwrap_or_else(new_nonce);
            let sign = |msg: &[u8]| {
                let mut signature = self.signer.sign_deterministic(msg);
                if self.corrupt_signature {
                    if let Some(last) = signature.last_mut() {
                        *last ^= 0x01;
                    }
                }
                signature
            };
            signatures.push(block_signature(&header, &value, self.signer.serialized(), nonce, sign));
        }
        let metadata = orderer_metadata(value, signatures, self.last_config);
        Block { header: Some(header), data: Some(BlockData { data: envelopes.to_vec() }), metadata: Some(metadata) }
    }

    /// [`BlockBuilder::build`], marshaled.
    pub fn build_bytes(&self, envelopes: &[Bytes]) -> Bytes {
        Bytes::from(self.build(envelopes).encode_to_vec())
    }
}

/// A growing chain starting at a network's genesis block: each
/// [`Chain::append`] cuts the next block, signed by the network's orderer.
pub struct Chain<'a> {
    signer: &'a SigningIdentity,
    blocks: Vec<Block>,
    /// When set, block signature nonces are SHA-256(seed ‖ number)[..24].
    seed: Option<u64>,
}

impl<'a> Chain<'a> {
    /// A chain holding `net`'s genesis block (block 0).
    ///
    /// Errors: [`TestkitError::Genesis`] if the genesis block does not decode
    /// (cannot happen for a generated network).
    pub fn new(net: &'a Network) -> Result<Self, TestkitError> {
        let genesis = Block::decode(net.genesis_block()).map_err(|e| TestkitError::Genesis(format!("decode: {e}")))?;
        Ok(Chain { signer: net.orderer(), blocks: vec![genesis], seed: None })
    }

    /// [`Chain::new`] with block-signature nonces derived from `seed`
    /// (SHA-256(seed ‖ number)[..24]), so the blocks are a pure function of
    /// their contents and the seed.
    ///
    /// Errors: as [`Chain::new`].
    pub fn with_seed(net: &'a Network, seed: u64) -> Result<Self, TestkitError> {
        let mut chain = Chain::new(net)?;
        chain.seed = Some(seed);
        Ok(chain)
    }

    /// Cuts, signs and appends the next block; returns it.
    pub fn append(&mut self, envelopes: &[Bytes]) -> &Block {
        let prev = self.blocks.last().and_then(|b| b.header.as_ref());
        let mut builder = BlockBuilder::new(self.signer, prev);
        if let Some(seed) = self.seed {
            let mut h = Sha256::new();
            h.update(seed.to_le_bytes());
            h.update(builder.number.to_le_bytes());
            builder = builder.nonce(Bytes::copy_from_slice(&h.finalize()[..24]));
        }
        let block = builder.build(envelopes);
        self.blocks.push(block);
        let last = self.blocks.len() - 1;
        &self.blocks[last]
    }

    /// All blocks so far, genesis first.
    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// Consumes the chain, returning its blocks.
    pub fn into_blocks(self) -> Vec<Block> {
        self.blocks
    }
}
