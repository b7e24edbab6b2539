//! Transaction ids, nonces and endorsed transactions: Fabric's `protoutil.ComputeTxID`, `protoutil.CreateNonce`
//! and `protoutil.CreateSignedTx` (`protoutil/txutils.go`, `protoutil/commonutils.go`).

use bytes::Bytes;
use ferrofabric_protos::common::{Header, Payload};
use ferrofabric_protos::peer::{
    ChaincodeActionPayload, ChaincodeEndorsedAction, ChaincodeProposalPayload, Transaction, TransactionAction,
};
use prost::Message;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Length of a signature-header nonce (Fabric's `crypto.NonceSize`, 24 bytes).
pub const NONCE_LEN: usize = 24;

/// A fresh random nonce of [`NONCE_LEN`] bytes (Fabric's `protoutil.CreateNonce`), for the signature header of
/// an envelope, a proposal or a block signature.
pub fn new_nonce() -> Bytes {
    let mut nonce = vec![0u8; NONCE_LEN];
    rand::thread_rng().fill_bytes(&mut nonce);
    Bytes::from(nonce)
}

/// Fabric's transaction id (`protoutil.ComputeTxID`): the lower-case hex of SHA-256(nonce ‖ creator), where
/// `creator` is the marshaled `SerializedIdentity` of the signature header. Always 64 characters.
pub fn compute_txid(nonce: &[u8], creator: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(nonce);
    h.update(creator);
    hex::encode(h.finalize())
}

/// The marshaled `common.Payload` of an endorsed transaction, for its creator to sign (Fabric's
/// `protoutil.CreateSignedTx` and the gateway's `prepareTransaction`): the proposal's `header`, and one
/// `TransactionAction` whose payload is a `ChaincodeActionPayload` of the proposal's chaincode `input` (the
/// transient map is never part of a transaction) and the endorsed `action`.
pub fn endorsed_transaction_payload(header: Header, input: Bytes, action: ChaincodeEndorsedAction) -> Bytes {
    let proposal_payload = ChaincodeProposalPayload { input, ..Default::default() };
    let cap = ChaincodeActionPayload {
        chaincode_proposal_payload: Bytes::from(proposal_payload.encode_to_vec()),
        action: Some(action),
    };
    let tx = Transaction {
        actions: vec![TransactionAction {
            header: header.signature_header.clone(),
            payload: Bytes::from(cap.encode_to_vec()),
        }],
    };
    Bytes::from(Payload { header: Some(header), data: Bytes::from(tx.encode_to_vec()) }.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txid_is_hex_sha256_of_nonce_then_creator() {
        let id = compute_txid(b"nonce", b"creator");
        assert_eq!(id, hex::encode(Sha256::digest(b"noncecreator")));
        assert_eq!(id.len(), 64);
        assert_ne!(id, compute_txid(b"creator", b"nonce"));
    }

    #[test]
    fn nonces_are_fresh_and_sized() {
        let (a, b) = (new_nonce(), new_nonce());
        assert_eq!(a.len(), NONCE_LEN);
        assert_ne!(a, b);
    }
}
