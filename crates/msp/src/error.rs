//! Error type of the MSP crate.

/// Every failure of this crate. Variants carry a human-readable reason (not a
/// source error) so that the type is `Clone + Eq`: cached deserialisation and
/// validation results are handed out again to later callers.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum MspError {
    /// A protobuf message (SerializedIdentity, MSPConfig, MSPPrincipal, ...)
    /// could not be decoded.
    #[error("malformed protobuf message: {0}")]
    Decode(String),
    /// The SerializedIdentity names an MSP that is not part of this manager
    /// (Fabric: "MSP %s is not defined on channel").
    #[error("MSP {0} is not defined on channel")]
    UnknownMsp(String),
    /// The identity bytes are not a PEM block (Go `encoding/pem` rules).
    #[error("could not decode the PEM structure: {0}")]
    Pem(String),
    /// The DER inside the PEM is not an acceptable X.509 certificate / CRL.
    #[error("invalid X.509 data: {0}")]
    Certificate(String),
    /// The key is not of a supported kind (identities: ECDSA P-256 only).
    #[error("unsupported key: {0}")]
    UnsupportedKey(String),
    /// The signature bytes are malformed: not an ASN.1 SEQUENCE of two
    /// positive INTEGERs as Go's `asn1.Unmarshal` would accept.
    #[error("malformed ECDSA signature: {0}")]
    MalformedSignature(String),
    /// The signature's S is above half the curve order; Fabric rejects it
    /// (bccsp/sw/ecdsa.go, low-S rule).
    #[error("invalid S: must be smaller than half the order")]
    HighS,
    /// The signature is well-formed but does not verify.
    #[error("the signature is invalid")]
    InvalidSignature,
    /// The identity is not valid for its MSP (chain, revocation, OUs).
    #[error("identity is not valid: {0}")]
    Validation(String),
    /// The identity does not satisfy the requested MSPPrincipal.
    #[error("principal not satisfied: {0}")]
    Principal(String),
    /// The MSP configuration is rejected (Fabric's MSP Setup failing).
    #[error("invalid MSP configuration: {0}")]
    Config(String),
    /// Well-formed input that this implementation deliberately does not
    /// handle (e.g. IDEMIX MSPs).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A file could not be read (MSP directory loaders).
    #[error("i/o error: {0}")]
    Io(String),
}
