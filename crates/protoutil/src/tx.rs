//! Transaction ids and nonces: Fabric's `protoutil.ComputeTxID` and `protoutil.CreateNonce`
//! (`protoutil/txutils.go`, `protoutil/commonutils.go`).

use bytes::Bytes;
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
