//! The identifiers of an identity: [`IdentityIdentifier`] (msp/identities.go) and its OUs,
//! [`OrganizationalUnit`] (Fabric's `OUIdentifier`).

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
