//! X.509 certificates as far as Fabric's MSP looks at them.
//!
//! The structure is decoded with `x509-cert` (strict DER); raw sub-slices
//! that Fabric compares or hashes byte-wise (TBS, issuer, subject, the whole
//! certificate) and the extension values are read with our own Go-rules DER
//! walker, interpreting each extension the way Go's `crypto/x509` parser
//! does (what it rejects, what it marks as an unhandled critical extension).

use std::ops::Range;

use const_oid::ObjectIdentifier;
use der::Decode;
use sha2::Digest;
use x509_cert::certificate::{CertificateInner, Raw as RawProfile, Version};

use crate::asn1::{self, Reader};
use crate::ecdsa::{self, Curve, PublicKey};
use crate::error::MspError;

const OID_EC_PUBLIC_KEY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
const OID_RSA_ENCRYPTION: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
const OID_P256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
const OID_P384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
const OID_P224: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.33");
const OID_P521: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.35");
const OID_ED25519: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.101.112");

const OID_ECDSA_SHA1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.1");
const OID_ECDSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const OID_ECDSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");
const OID_ECDSA_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.4");
const OID_RSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");
const OID_RSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.12");
const OID_RSA_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.13");

const OID_EXT_SKI: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.14");
const OID_EXT_KEY_USAGE: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.15");
const OID_EXT_SAN: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.17");
const OID_EXT_BASIC_CONSTRAINTS: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.19");
const OID_EXT_NAME_CONSTRAINTS: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.30");
const OID_EXT_CRL_DP: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.31");
const OID_EXT_POLICIES: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.32");
pub(crate) const OID_EXT_AKI: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.35");
const OID_EXT_EKU: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37");
const OID_EXT_AIA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.1.1");

const OID_EKU_ANY: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37.0");
const OID_EKU_SERVER_AUTH: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.1");

/// DER contents of the attribute type OIDs we read from subjects.
const ATTR_OU: &[u8] = &[0x55, 0x04, 0x0b];
const ATTR_CN: &[u8] = &[0x55, 0x04, 0x03];

/// Go's `KeyUsageCertSign` bit.
pub(crate) const KEY_USAGE_CERT_SIGN: u16 = 1 << 5;

/// Signature algorithms we can verify (Go's `x509.SignatureAlgorithm`
/// subset; SHA-1 and MD5 based ones are refused by Go for certificates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SigAlg {
    EcdsaSha1,
    EcdsaSha256,
    EcdsaSha384,
    EcdsaSha512,
    RsaSha256,
    RsaSha384,
    RsaSha512,
    Unknown,
}

impl SigAlg {
    pub(crate) fn from_oid(oid: &ObjectIdentifier) -> SigAlg {
        match *oid {
            o if o == OID_ECDSA_SHA1 => SigAlg::EcdsaSha1,
            o if o == OID_ECDSA_SHA256 => SigAlg::EcdsaSha256,
            o if o == OID_ECDSA_SHA384 => SigAlg::EcdsaSha384,
            o if o == OID_ECDSA_SHA512 => SigAlg::EcdsaSha512,
            o if o == OID_RSA_SHA256 => SigAlg::RsaSha256,
            o if o == OID_RSA_SHA384 => SigAlg::RsaSha384,
            o if o == OID_RSA_SHA512 => SigAlg::RsaSha512,
            _ => SigAlg::Unknown,
        }
    }

    /// Fabric's `isECDSASignedCert`.
    pub(crate) fn is_ecdsa(self) -> bool {
        matches!(self, SigAlg::EcdsaSha1 | SigAlg::EcdsaSha256 | SigAlg::EcdsaSha384 | SigAlg::EcdsaSha512)
    }
}

/// A certificate's subject public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CertKey {
    /// ECDSA P-256 (the only kind accepted for identities).
    P256(PublicKey),
    /// ECDSA P-384 uncompressed point (CA certificates only).
    P384(Vec<u8>),
    /// RSA `RSAPublicKey` DER (CA certificates only, as Fabric allows).
    Rsa(Vec<u8>),
    /// A key Go parses but we cannot use (P-224, P-521, Ed25519, ...).
    Other(&'static str),
}

impl CertKey {
    pub(crate) fn curve(&self) -> Option<Curve> {
        match self {
            CertKey::P256(_) => Some(Curve::P256),
            CertKey::P384(_) => Some(Curve::P384),
            _ => None,
        }
    }
}

/// A parsed certificate with the attributes Fabric's MSP and Go's chain
/// verifier consult. Times are Unix seconds.
#[derive(Debug, Clone)]
pub(crate) struct Cert {
    raw: Vec<u8>,
    tbs: Range<usize>,
    sig_alg_raw: Range<usize>,
    issuer: Range<usize>,
    subject: Range<usize>,
    spki_key: Range<usize>,
    /// Signature BIT STRING contents (Go's `RightAlign` of it).
    pub signature: Vec<u8>,
    pub sig_alg: SigAlg,
    /// Serial number INTEGER contents (minimal two's complement, >= 0).
    pub serial: Vec<u8>,
    /// 1, 2 or 3.
    pub version: u8,
    pub not_before: i64,
    pub not_after: i64,
    pub basic_constraints_valid: bool,
    pub is_ca: bool,
    /// -1 when absent (Go's convention).
    pub max_path_len: i64,
    /// Go's `KeyUsage` bit set (0 = extension absent or empty).
    pub key_usage: u16,
    /// The EKU extension lists usages, none of them serverAuth or any:
    /// Go's default verification (ServerAuth) refuses such a chain.
    pub eku_excludes_server_auth: bool,
    pub subject_key_id: Option<Vec<u8>>,
    pub authority_key_id: Option<Vec<u8>>,
    pub san_value: Option<Vec<u8>>,
    pub has_name_constraints: bool,
    pub has_unhandled_critical: bool,
    /// Subject OU values in RDN order (Go's `Subject.OrganizationalUnit`).
    pub subject_ous: Vec<String>,
    pub key: CertKey,
}

fn cert_err(what: impl Into<String>) -> MspError {
    MspError::Certificate(what.into())
}

fn range_of(outer: &[u8], inner: &[u8]) -> Range<usize> {
    let start = inner.as_ptr() as usize - outer.as_ptr() as usize;
    start..start + inner.len()
}

/// Go's `parseASN1String` for attribute values; `Err` for types Go refuses.
fn asn1_string(tag: u8, value: &[u8]) -> Result<String, MspError> {
    match tag {
        // T61String: Go takes the bytes as they are.
        0x14 => Ok(String::from_utf8_lossy(value).into_owned()),
        // PrintableString
        0x13 => {
            let ok = value.iter().all(|&b| b.is_ascii_alphanumeric() || b" '()+,-./:=?*&".contains(&b));
            if ok {
                Ok(String::from_utf8_lossy(value).into_owned())
            } else {
                Err(cert_err("invalid PrintableString in name"))
            }
        }
        // UTF8String
        0x0c => std::str::from_utf8(value).map(str::to_owned).map_err(|_| cert_err("invalid UTF-8 string in name")),
        // BMPString
        0x1e => {
            if !value.len().is_multiple_of(2) {
                return Err(cert_err("invalid BMPString in name"));
            }
            let mut v = value;
            if v.len() >= 2 && v[v.len() - 1] == 0 && v[v.len() - 2] == 0 {
                v = &v[..v.len() - 2];
            }
            let units: Vec<u16> = v.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect();
            Ok(String::from_utf16_lossy(&units))
        }
        // IA5String
        0x16 => {
            if value.is_ascii() {
                Ok(String::from_utf8_lossy(value).into_owned())
            } else {
                Err(cert_err("invalid IA5String in name"))
            }
        }
        // NumericString
        0x12 => {
            if value.iter().all(|&b| b.is_ascii_digit() || b == b' ') {
                Ok(String::from_utf8_lossy(value).into_owned())
            } else {
                Err(cert_err("invalid NumericString in name"))
            }
        }
        _ => Err(cert_err(format!("unsupported string type {tag:#04x} in name"))),
    }
}

/// Walks an RDNSequence like Go's `parseName`; returns the OU values.
fn parse_name(name_tlv: &[u8]) -> Result<(Vec<String>, Option<String>), MspError> {
    let (seq, _) = asn1::read_tlv(name_tlv).map_err(cert_err)?;
    let mut rdns = Reader::new(seq.value);
    let mut ous = Vec::new();
    let mut cn = None;
    while !rdns.is_empty() {
        let set = rdns.next_tag(asn1::TAG_SET).map_err(cert_err)?;
        let mut atvs = Reader::new(set.value);
        while !atvs.is_empty() {
            let atv = atvs.next_tag(asn1::TAG_SEQUENCE).map_err(cert_err)?;
            let mut parts = Reader::new(atv.value);
            let oid = parts.next_tag(asn1::TAG_OID).map_err(cert_err)?;
            let value = parts.next_any().map_err(cert_err)?;
            let text = asn1_string(value.tag, value.value)?;
            if oid.value == ATTR_OU {
                ous.push(text);
            } else if oid.value == ATTR_CN {
                cn = Some(text);
            }
        }
    }
    Ok((ous, cn))
}

/// Go's cryptobyte `ReadASN1BitString` (strict padding rules); returns the
/// bytes and the number of meaningful bits.
fn strict_bit_string(tlv_value: &[u8]) -> Result<(&[u8], usize), MspError> {
    let (&pad, bytes) = tlv_value.split_first().ok_or_else(|| cert_err("invalid bit string"))?;
    if pad > 7 || (bytes.is_empty() && pad != 0) {
        return Err(cert_err("invalid bit string"));
    }
    if let Some(&last) = bytes.last() {
        if last & ((1u8 << pad) - 1) != 0 {
            return Err(cert_err("invalid bit string"));
        }
    }
    Ok((bytes, bytes.len() * 8 - usize::from(pad)))
}

/// Go's cryptobyte `ReadASN1Integer` into an `int64`.
fn small_integer(value: &[u8]) -> Result<i64, MspError> {
    asn1::check_integer(value).map_err(cert_err)?;
    if value.len() > 8 {
        return Err(cert_err("integer too large"));
    }
    let mut v: i64 = if value[0] & 0x80 != 0 { -1 } else { 0 };
    for &b in value {
        v = (v << 8) | i64::from(b);
    }
    Ok(v)
}

/// Parsed extension attributes (defaults = extension absent).
#[derive(Default)]
struct Extensions {
    basic_constraints_valid: bool,
    is_ca: bool,
    max_path_len: Option<i64>,
    key_usage: u16,
    eku_excludes_server_auth: bool,
    subject_key_id: Option<Vec<u8>>,
    authority_key_id: Option<Vec<u8>>,
    san_value: Option<Vec<u8>>,
    has_name_constraints: bool,
    has_unhandled_critical: bool,
}

fn parse_extensions(exts: &[x509_cert::ext::Extension]) -> Result<Extensions, MspError> {
    let mut out = Extensions::default();
    for (i, ext) in exts.iter().enumerate() {
        if exts[..i].iter().any(|e| e.extn_id == ext.extn_id) {
            return Err(cert_err("certificate contains duplicate extensions"));
        }
        let value = ext.extn_value.as_bytes();
        let mut handled = true;
        match ext.extn_id {
            id if id == OID_EXT_KEY_USAGE => {
                let (tlv, _) = asn1::read_tlv(value).map_err(cert_err)?;
                if tlv.tag != asn1::TAG_BIT_STRING {
                    return Err(cert_err("invalid key usage"));
                }
                let (bytes, bits) = strict_bit_string(tlv.value)?;
                for bit in 0..9usize {
                    if bit < bits && bytes[bit / 8] & (0x80 >> (bit % 8)) != 0 {
                        out.key_usage |= 1 << bit;
                    }
                }
            }
            id if id == OID_EXT_BASIC_CONSTRAINTS => {
                let (seq, _) = asn1::read_tlv(value).map_err(cert_err)?;
                if seq.tag != asn1::TAG_SEQUENCE {
                    return Err(cert_err("invalid basic constraints"));
                }
                let mut r = Reader::new(seq.value);
                if let Some(b) = r.next_optional(asn1::TAG_BOOLEAN).map_err(cert_err)? {
                    out.is_ca = match b.value {
                        [0x00] => false,
                        [0xff] => true,
                        _ => return Err(cert_err("invalid basic constraints")),
                    };
                }
                if let Some(n) = r.next_optional(asn1::TAG_INTEGER).map_err(cert_err)? {
                    out.max_path_len = Some(small_integer(n.value)?);
                }
                out.basic_constraints_valid = true;
            }
            id if id == OID_EXT_SAN => out.san_value = Some(value.to_vec()),
            id if id == OID_EXT_NAME_CONSTRAINTS => out.has_name_constraints = true,
            id if id == OID_EXT_CRL_DP || id == OID_EXT_POLICIES || id == OID_EXT_AIA => {}
            id if id == OID_EXT_AKI => {
                let (seq, _) = asn1::read_tlv(value).map_err(cert_err)?;
                if seq.tag != asn1::TAG_SEQUENCE {
                    return Err(cert_err("invalid authority key identifier"));
                }
                let mut r = Reader::new(seq.value);
                if let Some(kid) = r.next_optional(0x80).map_err(cert_err)? {
                    out.authority_key_id = Some(kid.value.to_vec());
                }
            }
            id if id == OID_EXT_EKU => {
                let (seq, _) = asn1::read_tlv(value).map_err(cert_err)?;
                if seq.tag != asn1::TAG_SEQUENCE {
                    return Err(cert_err("invalid extended key usages"));
                }
                let mut r = Reader::new(seq.value);
                let mut any_usage = false;
                let mut allows_server = false;
                while !r.is_empty() {
                    let oid = r.next_tag(asn1::TAG_OID).map_err(cert_err)?;
                    let oid =
                        ObjectIdentifier::from_bytes(oid.value).map_err(|_| cert_err("invalid extended key usages"))?;
                    any_usage = true;
                    if oid == OID_EKU_ANY || oid == OID_EKU_SERVER_AUTH {
                        allows_server = true;
                    }
                }
                out.eku_excludes_server_auth = any_usage && !allows_server;
            }
            id if id == OID_EXT_SKI => {
                let (kid, _) = asn1::read_tlv(value).map_err(cert_err)?;
                if kid.tag != asn1::TAG_OCTET_STRING {
                    return Err(cert_err("invalid subject key identifier"));
                }
                out.subject_key_id = Some(kid.value.to_vec());
            }
            _ => handled = false,
        }
        if ext.critical && !handled {
            out.has_unhandled_critical = true;
        }
    }
    Ok(out)
}

fn parse_key(spki: &x509_cert::spki::SubjectPublicKeyInfoOwned) -> Result<CertKey, MspError> {
    let bits = spki.subject_public_key.as_bytes().ok_or_else(|| cert_err("public key bit string has unused bits"))?;
    let alg = &spki.algorithm;
    if alg.oid == OID_EC_PUBLIC_KEY {
        let curve = alg
            .parameters
            .as_ref()
            .and_then(|p| p.decode_as::<ObjectIdentifier>().ok())
            .ok_or_else(|| cert_err("ECDSA key without a named curve"))?;
        return match curve {
            c if c == OID_P256 => Ok(CertKey::P256(PublicKey::from_sec1(bits).map_err(|e| cert_err(e.to_string()))?)),
            c if c == OID_P384 => {
                if bits.len() != 97 || bits[0] != 0x04 {
                    return Err(cert_err("failed to unmarshal elliptic curve point"));
                }
                Ok(CertKey::P384(bits.to_vec()))
            }
            c if c == OID_P224 => Ok(CertKey::Other("ECDSA P-224")),
            c if c == OID_P521 => Ok(CertKey::Other("ECDSA P-521")),
            _ => Err(cert_err("unsupported elliptic curve")),
        };
    }
    if alg.oid == OID_RSA_ENCRYPTION {
        return Ok(CertKey::Rsa(bits.to_vec()));
    }
    if alg.oid == OID_ED25519 {
        return Ok(CertKey::Other("Ed25519"));
    }
    Ok(CertKey::Other("unknown public key algorithm"))
}

impl Cert {
    /// Parses one DER certificate (Go `x509.ParseCertificate` subset).
    ///
    /// Errors ([`MspError::Certificate`]): not strict DER, trailing data,
    /// inner/outer signature algorithm mismatch, negative serial, duplicate
    /// or malformed extensions Go refuses, name strings Go refuses, an EC
    /// key on an unknown curve or off the curve.
    pub(crate) fn parse(der: &[u8]) -> Result<Cert, MspError> {
        let typed = CertificateInner::<RawProfile>::from_der(der).map_err(|e| cert_err(e.to_string()))?;
        let tbs_typed = &typed.tbs_certificate;

        // Raw slices, by walking the (already validated) encoding.
        let (outer, _) = asn1::read_tlv(der).map_err(cert_err)?;
        let mut top = Reader::new(outer.value);
        let tbs = top.next_tag(asn1::TAG_SEQUENCE).map_err(cert_err)?;
        let sig_alg = top.next_tag(asn1::TAG_SEQUENCE).map_err(cert_err)?;
        let mut t = Reader::new(tbs.value);
        t.next_optional(0xa0).map_err(cert_err)?;
        let serial = t.next_tag(asn1::TAG_INTEGER).map_err(cert_err)?;
        let inner_sig_alg = t.next_tag(asn1::TAG_SEQUENCE).map_err(cert_err)?;
        let issuer = t.next_tag(asn1::TAG_SEQUENCE).map_err(cert_err)?;
        let _validity = t.next_tag(asn1::TAG_SEQUENCE).map_err(cert_err)?;
        let subject = t.next_tag(asn1::TAG_SEQUENCE).map_err(cert_err)?;
        let spki = t.next_tag(asn1::TAG_SEQUENCE).map_err(cert_err)?;
        let mut spki_r = Reader::new(spki.value);
        spki_r.next_tag(asn1::TAG_SEQUENCE).map_err(cert_err)?;
        let spki_key = spki_r.next_tag(asn1::TAG_BIT_STRING).map_err(cert_err)?;

        if inner_sig_alg.full != sig_alg.full {
            return Err(cert_err("inner and outer signature algorithm identifiers don't match"));
        }
        asn1::check_integer(serial.value).map_err(cert_err)?;
        if serial.value[0] & 0x80 != 0 {
            return Err(cert_err("negative serial number"));
        }
        let (_, _) = parse_name(issuer.full)?;
        let (subject_ous, _cn) = parse_name(subject.full)?;

        let signature =
            typed.signature.as_bytes().ok_or_else(|| cert_err("signature bit string has unused bits"))?.to_vec();
        let version = match tbs_typed.version {
            Version::V1 => 1,
            Version::V2 => 2,
            Version::V3 => 3,
        };
        let exts = match &tbs_typed.extensions {
            Some(e) => parse_extensions(e)?,
            None => Extensions::default(),
        };
        let not_before = tbs_typed.validity.not_before.to_unix_duration().as_secs();
        let not_after = tbs_typed.validity.not_after.to_unix_duration().as_secs();

        Ok(Cert {
            tbs: range_of(der, tbs.full),
            sig_alg_raw: range_of(der, sig_alg.full),
            issuer: range_of(der, issuer.full),
            subject: range_of(der, subject.full),
            spki_key: range_of(der, spki_key.value),
            raw: der.to_vec(),
            signature,
            sig_alg: SigAlg::from_oid(&typed.signature_algorithm.oid),
            serial: serial.value.to_vec(),
            version,
            not_before: i64::try_from(not_before).map_err(|_| cert_err("time out of range"))?,
            not_after: i64::try_from(not_after).map_err(|_| cert_err("time out of range"))?,
            basic_constraints_valid: exts.basic_constraints_valid,
            is_ca: exts.is_ca,
            max_path_len: exts.max_path_len.unwrap_or(-1),
            key_usage: exts.key_usage,
            eku_excludes_server_auth: exts.eku_excludes_server_auth,
            subject_key_id: exts.subject_key_id,
            authority_key_id: exts.authority_key_id,
            san_value: exts.san_value,
            has_name_constraints: exts.has_name_constraints,
            has_unhandled_critical: exts.has_unhandled_critical,
            subject_ous,
            key: parse_key(&tbs_typed.subject_public_key_info)?,
        })
    }

    /// The complete DER encoding.
    pub(crate) fn raw(&self) -> &[u8] {
        &self.raw
    }

    /// The DER TBSCertificate (the signed bytes).
    pub(crate) fn tbs(&self) -> &[u8] {
        &self.raw[self.tbs.clone()]
    }

    /// DER issuer Name.
    pub(crate) fn raw_issuer(&self) -> &[u8] {
        &self.raw[self.issuer.clone()]
    }

    /// DER subject Name.
    pub(crate) fn raw_subject(&self) -> &[u8] {
        &self.raw[self.subject.clone()]
    }

    /// Contents of the subjectPublicKey BIT STRING (padding octet included).
    pub(crate) fn raw_public_key(&self) -> &[u8] {
        &self.raw[self.spki_key.clone()]
    }

    /// SHA-256 of the DER encoding.
    pub(crate) fn sha256(&self) -> [u8; 32] {
        sha2::Sha256::digest(&self.raw).into()
    }

    /// Go's `CheckSignatureFrom`: `parent` must be allowed to sign
    /// certificates and its key must verify this certificate's signature.
    pub(crate) fn check_signature_from(&self, parent: &Cert) -> Result<(), String> {
        if (parent.version == 3 && !parent.basic_constraints_valid) || (parent.basic_constraints_valid && !parent.is_ca)
        {
            return Err("parent certificate is not a CA".into());
        }
        if parent.key_usage != 0 && parent.key_usage & KEY_USAGE_CERT_SIGN == 0 {
            return Err("parent certificate may not sign certificates".into());
        }
        if self.sig_alg == SigAlg::EcdsaSha1 {
            return Err("insecure algorithm ECDSA-SHA1".into());
        }
        verify_signed(self.sig_alg, self.tbs(), &self.signature, &parent.key)
    }

    /// Fabric's `sanitizeECDSASignedCert`: when this certificate's ECDSA
    /// signature has a high S (for the issuer's `curve`), the same
    /// certificate re-encoded with the low-S signature; otherwise `None`.
    pub(crate) fn sanitized(&self, curve: Curve) -> Result<Option<Cert>, MspError> {
        if !self.sig_alg.is_ecdsa() {
            return Ok(None);
        }
        let low = ecdsa::signature_to_low_s(curve, &self.signature)?;
        if low == self.signature {
            return Ok(None);
        }
        // TBS and algorithm identifier are kept verbatim (Go re-marshals them
        // from their raw encodings); only the signature BIT STRING changes.
        let mut bit_string = Vec::with_capacity(low.len() + 1);
        bit_string.push(0);
        bit_string.extend_from_slice(&low);
        let mut body = Vec::with_capacity(self.raw.len());
        body.extend_from_slice(self.tbs());
        body.extend_from_slice(&self.raw[self.sig_alg_raw.clone()]);
        asn1::push_tlv(&mut body, asn1::TAG_BIT_STRING, &bit_string);
        let mut der = Vec::with_capacity(body.len() + 4);
        asn1::push_tlv(&mut der, asn1::TAG_SEQUENCE, &body);
        Cert::parse(&der).map(Some)
    }

    /// True when both certificates have the same DER (Go's `Equal`).
    pub(crate) fn same_as(&self, other: &Cert) -> bool {
        self.raw == other.raw
    }

    /// Compares serial numbers as integers (both are minimal encodings).
    pub(crate) fn serial_equals(&self, other_serial: &[u8]) -> bool {
        self.serial == other_serial
    }
}

/// Verifies `signature` over `signed` with `key` for algorithm `alg` (Go's
/// `checkSignature`; ECDSA signatures here may have a high S, as in Go).
pub(crate) fn verify_signed(alg: SigAlg, signed: &[u8], signature: &[u8], key: &CertKey) -> Result<(), String> {
    use ring::signature as rs;
    let (ring_alg, point): (&'static dyn rs::VerificationAlgorithm, &[u8]) = match (alg, key) {
        (SigAlg::EcdsaSha256, CertKey::P256(k)) => (&rs::ECDSA_P256_SHA256_ASN1, &k.sec1_bytes()[..]),
        (SigAlg::EcdsaSha384, CertKey::P256(k)) => (&rs::ECDSA_P256_SHA384_ASN1, &k.sec1_bytes()[..]),
        (SigAlg::EcdsaSha256, CertKey::P384(p)) => (&rs::ECDSA_P384_SHA256_ASN1, p),
        (SigAlg::EcdsaSha384, CertKey::P384(p)) => (&rs::ECDSA_P384_SHA384_ASN1, p),
        (SigAlg::EcdsaSha512, CertKey::P256(k)) => {
            use p256::ecdsa::signature::hazmat::PrehashVerifier;
            let vk =
                p256::ecdsa::VerifyingKey::from_sec1_bytes(k.sec1_bytes()).map_err(|_| "bad P-256 key".to_owned())?;
            let sig =
                p256::ecdsa::Signature::from_der(signature).map_err(|_| "malformed ECDSA signature".to_owned())?;
            let digest = sha2::Sha512::digest(signed);
            return vk.verify_prehash(&digest, &sig).map_err(|_| "ECDSA verification failure".to_owned());
        }
        (SigAlg::RsaSha256, CertKey::Rsa(k)) => (&rs::RSA_PKCS1_2048_8192_SHA256, k),
        (SigAlg::RsaSha384, CertKey::Rsa(k)) => (&rs::RSA_PKCS1_2048_8192_SHA384, k),
        (SigAlg::RsaSha512, CertKey::Rsa(k)) => (&rs::RSA_PKCS1_2048_8192_SHA512, k),
        (alg, key) => {
            return Err(format!(
                "unsupported signature algorithm {alg:?} for key {}",
                match key {
                    CertKey::P256(_) => "ECDSA P-256",
                    CertKey::P384(_) => "ECDSA P-384",
                    CertKey::Rsa(_) => "RSA",
                    CertKey::Other(name) => name,
                }
            ))
        }
    };
    rs::UnparsedPublicKey::new(ring_alg, point)
        .verify(signed, signature)
        .map_err(|_| "signature verification failure".to_owned())
}
