//! The client side of endorsement, as Fabric's SDKs and peer CLI do it: creating signed proposals
//! (`protoutil.CreateChaincodeProposalWithTxIDNonceAndTransient` + `GetSignedProposal`), assembling the transaction
//! from endorsed responses (`protoutil.CreateSignedTx`), and the Deliver seek envelope a follower sends. Used by the
//! tests, the node (to define chaincodes through `_lifecycle`) and the benchmark.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use ferrofabric_msp::SigningIdentity;
use ferrofabric_protos::common::{ChannelHeader, Envelope, Header, HeaderType, SignatureHeader};
use ferrofabric_protos::orderer::seek_info;
use ferrofabric_protos::peer::{
    chaincode_spec, ChaincodeEndorsedAction, ChaincodeHeaderExtension, ChaincodeId, ChaincodeInput,
    ChaincodeInvocationSpec, ChaincodeProposalPayload, ChaincodeSpec, Endorsement, Proposal, ProposalResponse,
    SignedProposal,
};
use prost::Message;

use ferrofabric_protoutil::{compute_txid, new_nonce};

use crate::error::EndorserError;

/// A proposal ready to send (`signed`), with the decoded proposal and its transaction ID for assembling the
/// transaction later.
#[derive(Debug, Clone)]
pub struct ClientProposal {
    /// What goes to `ProcessProposal`.
    pub signed: SignedProposal,
    /// The proposal itself.
    pub proposal: Proposal,
    /// hex(SHA-256(nonce ‖ creator)).
    pub tx_id: String,
}

fn now() -> prost_types::Timestamp {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    prost_types::Timestamp { seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX), nanos: d.subsec_nanos() as i32 }
}

/// A signed proposal invoking `chaincode` on `channel_id` with `args` (function name first), created by `creator`
/// with a random 24-byte nonce and the current time.
pub fn create_proposal(creator: &SigningIdentity, channel_id: &str, chaincode: &str, args: &[Bytes]) -> ClientProposal {
    create_proposal_with(creator, channel_id, chaincode, args, new_nonce(), now())
}

/// [`create_proposal`] with a given nonce and timestamp. The invocation spec's type is GOLANG for user chaincodes
/// and UNDEFINED for `_lifecycle`, as Fabric's CLI sends them; no transient data.
pub fn create_proposal_with(
    creator: &SigningIdentity,
    channel_id: &str,
    chaincode: &str,
    args: &[Bytes],
    nonce: Bytes,
    timestamp: prost_types::Timestamp,
) -> ClientProposal {
    build_proposal(creator, channel_id, chaincode, args, false, nonce, timestamp)
}

/// [`create_proposal`] with `ChaincodeInput.is_init` set: the chaincode's initialisation, as `peer chaincode invoke
/// --isInit` sends it for a definition approved with `--init-required`.
pub fn create_init_proposal(
    creator: &SigningIdentity,
    channel_id: &str,
    chaincode: &str,
    args: &[Bytes],
) -> ClientProposal {
    build_proposal(creator, channel_id, chaincode, args, true, new_nonce(), now())
}

fn build_proposal(
    creator: &SigningIdentity,
    channel_id: &str,
    chaincode: &str,
    args: &[Bytes],
    is_init: bool,
    nonce: Bytes,
    timestamp: prost_types::Timestamp,
) -> ClientProposal {
    let creator_bytes = creator.serialized().clone();
    let tx_id = compute_txid(&nonce, &creator_bytes);
    let cc_id = ChaincodeId { name: chaincode.to_owned(), ..Default::default() };
    let spec_type =
        if chaincode == "_lifecycle" { chaincode_spec::Type::Undefined } else { chaincode_spec::Type::Golang };
    let cis = ChaincodeInvocationSpec {
        chaincode_spec: Some(ChaincodeSpec {
            r#type: spec_type as i32,
            chaincode_id: Some(cc_id.clone()),
            input: Some(ChaincodeInput { args: args.to_vec(), is_init, ..Default::default() }),
            timeout: 0,
        }),
    };
    let channel_header = ChannelHeader {
        r#type: HeaderType::EndorserTransaction as i32,
        version: 0,
        timestamp: Some(timestamp),
        channel_id: channel_id.to_owned(),
        tx_id: tx_id.clone(),
        epoch: 0,
        extension: Bytes::from(ChaincodeHeaderExtension { chaincode_id: Some(cc_id) }.encode_to_vec()),
        tls_cert_hash: Bytes::new(),
    };
    let header = Header {
        channel_header: Bytes::from(channel_header.encode_to_vec()),
        signature_header: Bytes::from(SignatureHeader { creator: creator_bytes, nonce }.encode_to_vec()),
    };
    let proposal = Proposal {
        header: Bytes::from(header.encode_to_vec()),
        payload: Bytes::from(
            ChaincodeProposalPayload { input: Bytes::from(cis.encode_to_vec()), ..Default::default() }.encode_to_vec(),
        ),
        extension: Bytes::new(),
    };
    let proposal_bytes = Bytes::from(proposal.encode_to_vec());
    let signature = Bytes::from(creator.sign(&proposal_bytes));
    ClientProposal { signed: SignedProposal { proposal_bytes, signature }, proposal, tx_id }
}

/// Fabric's `protoutil.CreateSignedTx`: the marshaled `common.Envelope` of the transaction made of `proposal` and
/// its endorsed `responses`, signed by `signer` (who must be the proposal's creator). Responses must all be
/// successful (status 200–399) with byte-identical payloads; endorsements are de-duplicated by endorser.
///
/// Errors: Fabric's messages for each violated rule, or an undecodable proposal.
pub fn assemble_transaction(
    proposal: &Proposal,
    responses: &[ProposalResponse],
    signer: &SigningIdentity,
) -> Result<Bytes, EndorserError> {
    if responses.is_empty() {
        return Err(EndorserError::NoResponses);
    }
    let unmarshal = |what: &'static str| move |source| EndorserError::Unmarshal { what, source };
    let hdr = Header::decode(proposal.header.clone()).map_err(unmarshal("Header"))?;
    let cpp =
        ChaincodeProposalPayload::decode(proposal.payload.clone()).map_err(unmarshal("ChaincodeProposalPayload"))?;
    let shdr = SignatureHeader::decode(hdr.signature_header.clone()).map_err(unmarshal("SignatureHeader"))?;
    if signer.serialized() != &shdr.creator {
        return Err(EndorserError::SignerMismatch);
    }
    let first = &responses[0].payload;
    for r in responses {
        let (status, message) = r.response.as_ref().map(|x| (x.status, x.message.as_str())).unwrap_or((0, ""));
        if !(200..400).contains(&status) {
            return Err(EndorserError::UnsuccessfulResponse { status, message: message.to_owned() });
        }
        if r.payload != *first {
            return Err(EndorserError::PayloadMismatch);
        }
    }
    let mut endorsements: Vec<Endorsement> = Vec::new();
    for e in responses.iter().filter_map(|r| r.endorsement.as_ref()) {
        if !endorsements.iter().any(|x| x.endorser == e.endorser) {
            endorsements.push(e.clone());
        }
    }
    if endorsements.is_empty() {
        return Err(EndorserError::NoEndorsements);
    }
    let action = ChaincodeEndorsedAction { proposal_response_payload: first.clone(), endorsements };
    let payload = ferrofabric_protoutil::endorsed_transaction_payload(hdr, cpp.input, action);
    let signature = Bytes::from(signer.sign(&payload));
    Ok(Bytes::from(Envelope { payload, signature }.encode_to_vec()))
}

/// A signed `DELIVER_SEEK_INFO` envelope asking for blocks `start..` of `channel_id`, waiting for new ones
/// (`BLOCK_UNTIL_READY`), as Fabric's deliver clients send it (`protoutil.CreateSignedEnvelope`).
pub(crate) fn seek_envelope(signer: &SigningIdentity, channel_id: &str, start: u64) -> Envelope {
    let seek = ferrofabric_protoutil::seek_range(start, None, seek_info::SeekBehavior::BlockUntilReady);
    ferrofabric_protoutil::seek_envelope(channel_id, &seek, signer.serialized(), None, |m| signer.sign(m))
}
