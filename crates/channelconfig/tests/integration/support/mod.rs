//! Shared helpers for the policy crate's integration tests: fixture loading (real Fabric 2.5 ledger and
//! crypto material), the block-header DER encoding Fabric signs, and principal/policy builders.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use bytes::Bytes;
use ferrofabric_channelconfig::{ChannelConfig, SignedData};
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{
    msp_principal::Classification, msp_role::MspRoleType, signature_policy, Block, BlockHeader, Envelope, Metadata,
    MspPrincipal, MspRole, Payload, SignatureHeader, SignaturePolicy, SignaturePolicyEnvelope,
};
use ferrofabric_protos::peer::{ChaincodeActionPayload, Transaction};
use ferrofabric_testkit::fabric_fixture;
use prost::Message;

pub(crate) fn genesis_block() -> Block {
    let bytes = std::fs::read(fabric_fixture("genesis.block")).unwrap();
    Block::decode(Bytes::from(bytes)).unwrap()
}

pub(crate) fn channel_config() -> ChannelConfig {
    ChannelConfig::from_config_block(&genesis_block()).unwrap()
}

/// Records of `[8-byte LE length][marshaled common.Block]`.
pub(crate) fn orderer_blocks() -> Vec<Block> {
    let raw = Bytes::from(std::fs::read(fabric_fixture("orderer-blocks.bin")).unwrap());
    let mut blocks = Vec::new();
    let mut off = 0usize;
    while off < raw.len() {
        let len = u64::from_le_bytes(raw[off..off + 8].try_into().unwrap()) as usize;
        off += 8;
        blocks.push(Block::decode(raw.slice(off..off + len)).unwrap());
        off += len;
    }
    blocks
}

pub(crate) fn expected() -> serde_json::Value {
    let text = std::fs::read_to_string(fabric_fixture("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn der_length(out: &mut Vec<u8>, len: usize) {
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
}

fn der_tlv(out: &mut Vec<u8>, tag: u8, content: &[u8]) {
    out.push(tag);
    der_length(out, content.len());
    out.extend_from_slice(content);
}

/// ASN.1 DER of SEQUENCE { INTEGER number, OCTET STRING previous_hash, OCTET STRING data_hash }, the
/// bytes Fabric hashes and signs for a block header (protoutil.BlockHeaderBytes).
pub(crate) fn block_header_der(header: &BlockHeader) -> Vec<u8> {
    // Minimal two's-complement encoding of a non-negative integer.
    let be = header.number.to_be_bytes();
    let skip = be.iter().take_while(|b| **b == 0).count().min(7);
    let mut int = be[skip..].to_vec();
    if int[0] & 0x80 != 0 {
        int.insert(0, 0);
    }
    let mut body = Vec::new();
    der_tlv(&mut body, 0x02, &int);
    der_tlv(&mut body, 0x04, &header.previous_hash);
    der_tlv(&mut body, 0x04, &header.data_hash);
    let mut out = Vec::new();
    der_tlv(&mut out, 0x30, &body);
    out
}

/// The SignedData Fabric's block verifier builds from the SIGNATURES metadata (index 0) of a block:
/// data = metadata.value ‖ signature_header ‖ DER(header), identity = signature header creator.
pub(crate) fn block_signatures(block: &Block) -> Vec<SignedData> {
    let md_bytes = &block.metadata.as_ref().unwrap().metadata[0];
    let md = Metadata::decode(md_bytes.clone()).unwrap();
    let header_der = block_header_der(block.header.as_ref().unwrap());
    md.signatures
        .iter()
        .map(|sig| {
            let shdr = SignatureHeader::decode(sig.signature_header.clone()).unwrap();
            let mut data = md.value.to_vec();
            data.extend_from_slice(&sig.signature_header);
            data.extend_from_slice(&header_der);
            SignedData { data: data.into(), identity: shdr.creator, signature: sig.signature.clone() }
        })
        .collect()
}

pub(crate) fn envelope(block: &Block, tx: usize) -> Envelope {
    Envelope::decode(block.data.as_ref().unwrap().data[tx].clone()).unwrap()
}

/// The creator's signature over the envelope payload, as SignedData.
pub(crate) fn creator_signature(block: &Block, tx: usize) -> SignedData {
    let env = envelope(block, tx);
    let payload = Payload::decode(env.payload.clone()).unwrap();
    let shdr = SignatureHeader::decode(payload.header.unwrap().signature_header).unwrap();
    SignedData { data: env.payload, identity: shdr.creator, signature: env.signature }
}

/// Endorsements of the first action of an endorser transaction: data = prp ‖ endorser.
pub(crate) fn endorsements(block: &Block, tx: usize) -> Vec<SignedData> {
    let env = envelope(block, tx);
    let payload = Payload::decode(env.payload).unwrap();
    let transaction = Transaction::decode(payload.data).unwrap();
    let cap = ChaincodeActionPayload::decode(transaction.actions[0].payload.clone()).unwrap();
    let action = cap.action.unwrap();
    action
        .endorsements
        .iter()
        .map(|e| {
            let mut data = action.proposal_response_payload.to_vec();
            data.extend_from_slice(&e.endorser);
            SignedData { data: data.into(), identity: e.endorser.clone(), signature: e.signature.clone() }
        })
        .collect()
}

/// Load a signing identity (certificate + key) from the fixture crypto tree, e.g.
/// `peerOrganizations/org1.example.com/users/User1@org1.example.com/msp`.
pub(crate) fn signer(mspid: &str, msp_dir: &str) -> SigningIdentity {
    SigningIdentity::from_msp_dir(mspid, &fabric_fixture("crypto").join(msp_dir)).unwrap()
}

pub(crate) fn org1_user() -> SigningIdentity {
    signer("Org1MSP", "peerOrganizations/org1.example.com/users/User1@org1.example.com/msp")
}

pub(crate) fn org2_user() -> SigningIdentity {
    signer("Org2MSP", "peerOrganizations/org2.example.com/users/User1@org2.example.com/msp")
}

pub(crate) fn orderer_signer() -> SigningIdentity {
    signer("OrdererMSP", "ordererOrganizations/example.com/orderers/orderer.example.com/msp")
}

/// A SignedData item signed by `id` over `msg`.
pub(crate) fn signed(id: &SigningIdentity, msg: &[u8]) -> SignedData {
    SignedData { data: Bytes::copy_from_slice(msg), identity: id.serialized().clone(), signature: id.sign(msg).into() }
}

/// The same item with its data altered, so the signature no longer verifies.
pub(crate) fn corrupted(item: &SignedData) -> SignedData {
    let mut data = item.data.to_vec();
    data.push(0x42);
    SignedData { data: data.into(), ..item.clone() }
}

/// ROLE principal `<mspid>.<role>`.
pub(crate) fn role(mspid: &str, role: MspRoleType) -> MspPrincipal {
    MspPrincipal {
        principal_classification: Classification::Role as i32,
        principal: MspRole { msp_identifier: mspid.to_owned(), role: role as i32 }.encode_to_vec().into(),
    }
}

pub(crate) fn signed_by(i: i32) -> SignaturePolicy {
    SignaturePolicy { r#type: Some(signature_policy::Type::SignedBy(i)) }
}

pub(crate) fn n_out_of(n: i32, rules: Vec<SignaturePolicy>) -> SignaturePolicy {
    SignaturePolicy { r#type: Some(signature_policy::Type::NOutOf(signature_policy::NOutOf { n, rules })) }
}

pub(crate) fn envelope_policy(rule: SignaturePolicy, identities: Vec<MspPrincipal>) -> SignaturePolicyEnvelope {
    SignaturePolicyEnvelope { version: 0, rule: Some(rule), identities }
}

/// Index of the first transaction in the fixture whose validation code and endorser MSP list match.
pub(crate) fn find_tx(code: &str, endorsers: &[&str]) -> (usize, usize) {
    let expected = expected();
    for block in expected["blocks"].as_array().unwrap() {
        for tx in block["txs"].as_array().unwrap() {
            let eps: Vec<&str> =
                tx["endorsers"].as_array().map(|a| a.iter().map(|v| v.as_str().unwrap()).collect()).unwrap_or_default();
            if tx["validation_code"] == code && eps == endorsers {
                return (block["number"].as_u64().unwrap() as usize, tx["index"].as_u64().unwrap() as usize);
            }
        }
    }
    panic!("no {code} transaction endorsed by {endorsers:?} in the fixture");
}
