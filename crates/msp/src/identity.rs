//! Deserialised X.509 identities (msp/identities.go).

use std::fmt;
use std::sync::Arc;

use crate::cert::Cert;
use crate::msp::MspInner;
use crate::{MspError, PublicKey};

/// Fabric's `IdentityIdentifier`: the MSP name and the SHA-256 of the
/// (low-S sanitised, see msp/cert.go) certificate DER. Two serialisations of
/// the same certificate map to the same identifier; Fabric dedups
/// endorsements and policy signatures on it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdentityIdentifier {
    /// MSP ID, e.g. `Org1MSP`.
    pub mspid: String,
    /// SHA-256 of the sanitised certificate DER.
    pub id: [u8; 32],
}

/// Fabric's `OUIdentifier` of an identity: one subject OU value and the
/// certifiers identifier, the SHA-256 of the concatenated DER of the CA
/// certificates of the identity's validation chain (issuer first, root
/// last; msp/mspimpl.go `getCertificationChainIdentifier`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OrganizationalUnit {
    /// The OU attribute value, e.g. `client`, `peer`, `admin`, `orderer`.
    pub organizational_unit_identifier: String,
    /// SHA-256 over the chain's CA certificates.
    pub certifiers_identifier: [u8; 32],
}

/// A deserialised X.509 identity of one MSP, with its validation verdict
/// computed once at creation (msp/mspimplvalidate.go `validateIdentity`).
pub struct Identity {
    pub(crate) identifier: IdentityIdentifier,
    pub(crate) cert: Arc<Cert>,
    pub(crate) public_key: PublicKey,
    pub(crate) ous: Vec<OrganizationalUnit>,
    pub(crate) validation: Result<(), MspError>,
    pub(crate) msp: Arc<MspInner>,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("mspid", &self.identifier.mspid)
            .field("id", &format_args!("{}", Hex(&self.identifier.id)))
            .field("ous", &self.ous)
            .field("validation", &self.validation)
            .finish()
    }
}

struct Hex<'a>(&'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl Identity {
    /// The MSP this identity belongs to (Fabric `GetMSPIdentifier`).
    pub fn mspid(&self) -> &str {
        &self.identifier.mspid
    }

    /// Fabric's `GetIdentifier`.
    pub fn identifier(&self) -> &IdentityIdentifier {
        &self.identifier
    }

    /// The certificate's P-256 public key, pre-parsed.
    pub fn public_key(&self) -> &PublicKey {
        &self.public_key
    }

    /// Fabric's `identity.Verify`: ECDSA P-256 over SHA-256(`msg`) with the
    /// low-S rule; see [`PublicKey::verify`]. Does not consult
    /// [`Identity::validate`] (Fabric callers check both).
    pub fn verify(&self, msg: &[u8], der_signature: &[u8]) -> Result<(), MspError> {
        self.public_key.verify(msg, der_signature)
    }

    /// Result of the MSP's validation, computed once when the identity
    /// entered the cache: not a CA, a unique chain to one of the MSP's
    /// roots at the certificate's NotBefore + 1 s, not revoked, OU and
    /// NodeOU rules ([`MspError::Validation`] otherwise).
    pub fn validate(&self) -> Result<(), MspError> {
        self.validation.clone()
    }

    /// Fabric's `GetOrganizationalUnits`: the subject's OU values with the
    /// certifiers identifier; empty when no validation chain exists.
    pub fn organizational_units(&self) -> &[OrganizationalUnit] {
        &self.ous
    }

    /// The certificate DER as Fabric keeps it: when the certificate's ECDSA
    /// signature had a high S, the re-encoded low-S form (msp/cert.go).
    pub fn cert_der(&self) -> &[u8] {
        self.cert.raw()
    }

    /// The certificate's NotAfter as Unix seconds (Fabric `ExpiresAt`).
    pub fn expires_at(&self) -> i64 {
        self.cert.not_after
    }
}
