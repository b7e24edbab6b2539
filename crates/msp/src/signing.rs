//! Signing identities (msp/identities.go `signingidentity`, bccsp/sw
//! `signECDSA`): ECDSA P-256 over SHA-256 with low-S output.

use std::cmp::Ordering;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

use bytes::Bytes;
use ferrofabric_protos::msp::SerializedIdentity;
use p256::ecdsa::signature::Signer;
use p256::ecdsa::{Signature, SigningKey};
use p256::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use prost::Message;

use crate::cert::{Cert, CertKey};
use crate::ecdsa::{cmp_be, sub_be, PublicKey, P256_HALF_N, P256_N};
use crate::error::MspError;
use crate::{asn1, pem};

/// A private key with its certificate, producing Fabric-compatible
/// signatures and the creator bytes (marshaled SerializedIdentity) that go
/// with them.
#[derive(Clone)]
pub struct SigningIdentity {
    mspid: String,
    serialized: Bytes,
    key: SigningKey,
    /// The same key for the fast path ([`SigningIdentity::sign`]).
    fast: Arc<EcdsaKeyPair>,
    public_key: PublicKey,
}

impl std::fmt::Debug for SigningIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningIdentity")
            .field("mspid", &self.mspid)
            .field("public_key", &self.public_key)
            .finish_non_exhaustive()
    }
}

fn key_from_pem(key_pem: &[u8]) -> Result<SigningKey, MspError> {
    let block = pem::decode(key_pem).ok_or_else(|| MspError::Pem("no PEM block in private key".into()))?;
    match block.label.as_str() {
        "EC PRIVATE KEY" => p256::SecretKey::from_sec1_der(&block.der)
            .map(SigningKey::from)
            .map_err(|e| MspError::UnsupportedKey(format!("bad SEC1 P-256 private key: {e}"))),
        _ => SigningKey::from_pkcs8_der(&block.der)
            .map_err(|e| MspError::UnsupportedKey(format!("bad PKCS#8 P-256 private key: {e}"))),
    }
}

impl SigningIdentity {
    /// Builds a signing identity from a PEM certificate and its PEM private
    /// key (PKCS#8 `PRIVATE KEY`, as cryptogen writes `keystore/priv_sk`, or
    /// SEC1 `EC PRIVATE KEY`).
    ///
    /// The serialized identity carries `cert_pem` verbatim as `id_bytes`,
    /// as Fabric clients built from an MSP directory do (cryptogen and
    /// Fabric CA sign low-S certificates, so Fabric's own re-encoding gives
    /// the same bytes for those).
    ///
    /// Errors: bad PEM/X.509 ([`MspError::Pem`], [`MspError::Certificate`]),
    /// a key that is not P-256 or does not match the certificate
    /// ([`MspError::UnsupportedKey`]).
    pub fn from_pem(mspid: &str, cert_pem: &[u8], pkcs8_key_pem: &[u8]) -> Result<SigningIdentity, MspError> {
        let block = pem::decode(cert_pem).ok_or_else(|| MspError::Pem("no PEM block in certificate".into()))?;
        let cert = Cert::parse(&block.der)?;
        let CertKey::P256(public_key) = cert.key else {
            return Err(MspError::UnsupportedKey("certificate key is not ECDSA P-256".into()));
        };
        let key = key_from_pem(pkcs8_key_pem)?;
        let derived = key.verifying_key().to_encoded_point(false);
        if derived.as_bytes() != &public_key.sec1_bytes()[..] {
            return Err(MspError::UnsupportedKey("private key does not match the certificate's public key".into()));
        }
        let pkcs8 = key
            .to_pkcs8_der()
            .map_err(|e| MspError::UnsupportedKey(format!("cannot re-encode the private key: {e}")))?;
        let fast = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_bytes())
            .map_err(|e| MspError::UnsupportedKey(format!("private key rejected by aws-lc: {e}")))?;
        let serialized =
            SerializedIdentity { mspid: mspid.to_owned(), id_bytes: Bytes::copy_from_slice(cert_pem) }.encode_to_vec();
        Ok(SigningIdentity {
            mspid: mspid.to_owned(),
            serialized: Bytes::from(serialized),
            key,
            fast: Arc::new(fast),
            public_key,
        })
    }

    /// Loads `signcerts/*` (first file in name order) and `keystore/*` (the
    /// first key matching the certificate) of a Fabric MSP directory.
    ///
    /// Errors: [`MspError::Io`] for missing directories/files, otherwise as
    /// [`SigningIdentity::from_pem`].
    pub fn from_msp_dir(mspid: &str, msp_dir: &Path) -> Result<SigningIdentity, MspError> {
        let certs = sorted_files(&msp_dir.join("signcerts"))?;
        let cert_path =
            certs.first().ok_or_else(|| MspError::Io(format!("no certificate in {}/signcerts", msp_dir.display())))?;
        let cert_pem = read(cert_path)?;
        let mut last_err = MspError::Io(format!("no private key in {}/keystore", msp_dir.display()));
        for key_path in sorted_files(&msp_dir.join("keystore"))? {
            match SigningIdentity::from_pem(mspid, &cert_pem, &read(&key_path)?) {
                Ok(id) => return Ok(id),
                Err(e) => last_err = e,
            }
        }
        Err(last_err)
    }

    /// The marshaled `SerializedIdentity{mspid, id_bytes = certificate PEM}`
    /// (a transaction's creator / endorser bytes).
    pub fn serialized(&self) -> &Bytes {
        &self.serialized
    }

    /// Signs SHA-256(`msg`) with ECDSA P-256 and returns the DER signature with S normalised to the lower half
    /// (Fabric's `signECDSA`). Fast path (aws-lc, random nonces): about 7× the deterministic signer; used by the
    /// endorser, the orderer and clients.
    pub fn sign(&self, msg: &[u8]) -> Vec<u8> {
        match self.fast.sign(&SystemRandom::new(), msg) {
            Ok(sig) => {
                let fixed = sig.as_ref();
                let (r, s) = fixed.split_at(32);
                if cmp_be(s, &P256_HALF_N) == Ordering::Greater {
                    asn1::marshal_ecdsa_signature(r, &sub_be(&P256_N, s))
                } else {
                    asn1::marshal_ecdsa_signature(r, s)
                }
            }
            // aws-lc fails only if its random source does; the deterministic signer needs none.
            Err(_) => self.sign_deterministic(msg),
        }
    }

    /// Like [`SigningIdentity::sign`] but with RFC 6979 deterministic nonces (pure Rust, slower): the same message
    /// always gives the same bytes, which reproducible test ledgers need.
    pub fn sign_deterministic(&self, msg: &[u8]) -> Vec<u8> {
        let sig: Signature = self.key.sign(msg);
        let sig = sig.normalize_s().unwrap_or(sig);
        sig.to_der().as_bytes().to_vec()
    }

    /// The MSP ID given at construction.
    pub fn mspid(&self) -> &str {
        &self.mspid
    }

    /// The certificate's public key.
    pub fn public_key(&self) -> &PublicKey {
        &self.public_key
    }
}

pub(crate) fn read(path: &Path) -> Result<Vec<u8>, MspError> {
    fs::read(path).map_err(|e| MspError::Io(format!("could not read {}: {e}", path.display())))
}

/// Regular files of `dir`, sorted by name (Go's `os.ReadDir` order).
pub(crate) fn sorted_files(dir: &Path) -> Result<Vec<PathBuf>, MspError> {
    let entries =
        fs::read_dir(dir).map_err(|e| MspError::Io(format!("could not read directory {}: {e}", dir.display())))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| MspError::Io(e.to_string()))?;
        let path = entry.path();
        if path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}
