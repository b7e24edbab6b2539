//! Unpacking and checking a `SignedProposal` (Fabric's `core/endorser/msgvalidation.go`).

use bytes::Bytes;
use ferrofabric_msp::MspManager;
use ferrofabric_protos::common::{ChannelHeader, Header, HeaderType, SignatureHeader};
use ferrofabric_protos::peer::{
    ChaincodeHeaderExtension, ChaincodeInvocationSpec, ChaincodeProposalPayload, Proposal, SignedProposal,
};
use prost::Message;
use sha2::{Digest, Sha256};

/// A decoded proposal (Fabric's `UnpackedProposal`).
#[derive(Debug, Clone)]
pub(crate) struct UnpackedProposal {
    pub chaincode_name: String,
    pub channel_header: ChannelHeader,
    pub signature_header: SignatureHeader,
    pub args: Vec<Bytes>,
    /// `ChaincodeInput.is_init`: the client asks to run the chaincode's initialisation (`--isInit`).
    pub is_init: bool,
    pub proposal_bytes: Bytes,
    pub signature: Bytes,
    /// SHA-256(channel header ‖ signature header ‖ payload without transient data), Fabric's `GetProposalHash1`.
    pub proposal_hash: Bytes,
}

fn decode<M: Message + Default>(bytes: Bytes, what: &str) -> Result<M, String> {
    M::decode(bytes).map_err(|e| format!("error unmarshalling {what}: {e}"))
}

/// Fabric's `UnpackProposal`. Errors: a layer that does not decode, or a missing chaincode name/spec/input.
pub(crate) fn unpack(signed: &SignedProposal) -> Result<UnpackedProposal, String> {
    let prop: Proposal = decode(signed.proposal_bytes.clone(), "Proposal")?;
    let hdr: Header = decode(prop.header.clone(), "Header")?;
    let chdr: ChannelHeader = decode(hdr.channel_header.clone(), "ChannelHeader")?;
    let shdr: SignatureHeader = decode(hdr.signature_header.clone(), "SignatureHeader")?;
    let ext: ChaincodeHeaderExtension = decode(chdr.extension.clone(), "ChaincodeHeaderExtension")?;
    let cc = ext.chaincode_id.ok_or("ChaincodeHeaderExtension.ChaincodeId is nil")?;
    if cc.name.is_empty() {
        return Err("ChaincodeHeaderExtension.ChaincodeId.Name is empty".into());
    }
    let cpp: ChaincodeProposalPayload = decode(prop.payload.clone(), "ChaincodeProposalPayload")?;
    let cis: ChaincodeInvocationSpec = decode(cpp.input.clone(), "ChaincodeInvocationSpec")?;
    let spec = cis.chaincode_spec.ok_or("chaincode invocation spec did not contain chaincode spec")?;
    let input = spec.input.ok_or("chaincode input did not contain any input")?;
    // The hash covers the payload as it goes into the transaction: without the transient map.
    let no_transient = ChaincodeProposalPayload { input: cpp.input, ..Default::default() }.encode_to_vec();
    let mut h = Sha256::new();
    h.update(&hdr.channel_header);
    h.update(&hdr.signature_header);
    h.update(&no_transient);
    Ok(UnpackedProposal {
        chaincode_name: cc.name,
        channel_header: chdr,
        signature_header: shdr,
        args: input.args,
        is_init: input.is_init,
        proposal_bytes: signed.proposal_bytes.clone(),
        signature: signed.signature.clone(),
        proposal_hash: Bytes::copy_from_slice(&h.finalize()),
    })
}

fn header_type_name(t: i32) -> String {
    HeaderType::try_from(t).map(|h| h.as_str_name().to_owned()).unwrap_or_else(|_| t.to_string())
}

impl UnpackedProposal {
    /// Fabric's `UnpackedProposal.Validate` up to the signature check: header type, epoch, nonce, creator, txid,
    /// and the creator's identity (deserialised by the channel's MSPs and valid). Identity failures give Fabric's
    /// deliberately vague `access denied` messages. The caller verifies the signature (see
    /// [`UnpackedProposal::signature_error`]), possibly as part of a policy evaluation that needs it anyway.
    pub(crate) fn validate(&self, msps: &MspManager) -> Result<(), String> {
        let ch = &self.channel_header;
        // Fabric accepts CONFIG here too (a leftover of v1 configuration proposals); so do we.
        if ch.r#type != HeaderType::EndorserTransaction as i32 && ch.r#type != HeaderType::Config as i32 {
            return Err(format!("invalid header type {}", header_type_name(ch.r#type)));
        }
        if ch.epoch != 0 {
            return Err("epoch is non-zero".into());
        }
        let sh = &self.signature_header;
        if sh.nonce.is_empty() {
            return Err("nonce is empty".into());
        }
        if sh.creator.is_empty() {
            return Err("creator is empty".into());
        }
        let expected = ferrofabric_protoutil::compute_txid(&sh.nonce, &sh.creator);
        if ch.tx_id != expected {
            return Err(format!("incorrectly computed txid '{}' -- expected '{expected}'", ch.tx_id));
        }
        if self.proposal_bytes.is_empty() {
            return Err("empty proposal bytes".into());
        }
        if self.signature.is_empty() {
            return Err("empty signature bytes".into());
        }
        let channel = &ch.channel_id;
        let creator = msps
            .deserialize_identity(&sh.creator)
            .map_err(|_| format!("access denied: channel [{channel}] creator org unknown, creator is malformed"))?;
        creator.validate().map_err(|_| self.signature_error(creator.mspid()))?;
        Ok(())
    }

    /// Fabric's message for a creator that is not valid or whose signature does not verify.
    pub(crate) fn signature_error(&self, mspid: &str) -> String {
        format!("access denied: channel [{}] creator org [{mspid}]", self.channel_header.channel_id)
    }
}
