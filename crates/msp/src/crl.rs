//! Certificate revocation lists as Fabric's MSP uses them
//! (msp/mspimplsetup.go `setupCRLs`, msp/mspimplvalidate.go
//! `validateCertAgainstChain`): only the authority key identifier, the
//! revoked serial numbers and the signature matter.

use const_oid::ObjectIdentifier;

use crate::asn1::{self, Reader};
use crate::cert::{verify_signed, Cert, SigAlg, OID_EXT_AKI};
use crate::error::MspError;
use crate::pem;

/// One parsed CRL.
#[derive(Debug, Clone)]
pub(crate) struct Crl {
    tbs: Vec<u8>,
    sig_alg: SigAlg,
    /// Signature; for ECDSA re-encoded canonically as Fabric does at setup.
    signature: Vec<u8>,
    /// Value of the authority key identifier extension, if present.
    aki_extension: Option<Vec<u8>>,
    /// INTEGER contents of each revoked serial number.
    revoked: Vec<Vec<u8>>,
}

fn crl_err(e: impl std::fmt::Display) -> MspError {
    MspError::Config(format!("could not parse RevocationList: {e}"))
}

impl Crl {
    /// Go's `x509.ParseCRL` (PEM accepted when the input starts with
    /// `-----BEGIN X509 CRL`) followed by Fabric's ECDSA signature
    /// normalisation, which fails setup when r or s is not positive.
    pub(crate) fn parse(input: &[u8]) -> Result<Crl, MspError> {
        let der_owned;
        let mut der = input;
        if input.starts_with(b"-----BEGIN X509 CRL") {
            if let Some(block) = pem::decode(input) {
                if block.label == "X509 CRL" {
                    der_owned = block.der;
                    der = &der_owned;
                }
            }
        }
        let (outer, trailing) = asn1::read_tlv(der).map_err(crl_err)?;
        if !trailing.is_empty() {
            return Err(crl_err("trailing data after CRL"));
        }
        if outer.tag != asn1::TAG_SEQUENCE {
            return Err(crl_err("not a SEQUENCE"));
        }
        let mut top = Reader::new(outer.value);
        let tbs = top.next_tag(asn1::TAG_SEQUENCE).map_err(crl_err)?;
        let alg = top.next_tag(asn1::TAG_SEQUENCE).map_err(crl_err)?;
        let sig = top.next_tag(asn1::TAG_BIT_STRING).map_err(crl_err)?;
        let alg_oid = Reader::new(alg.value).next_tag(asn1::TAG_OID).map_err(crl_err)?;
        let oid = ObjectIdentifier::from_bytes(alg_oid.value).map_err(crl_err)?;
        let sig_alg = SigAlg::from_oid(&oid);
        let signature = match sig.value.split_first() {
            Some((0, bits)) => bits.to_vec(),
            _ => return Err(crl_err("invalid signature BIT STRING")),
        };
        let signature = if sig_alg.is_ecdsa() {
            let (r, s) = asn1::parse_ecdsa_signature(&signature).map_err(MspError::Config)?;
            asn1::marshal_ecdsa_signature(r, s)
        } else {
            signature
        };

        // TBSCertList ::= SEQUENCE { version INTEGER OPTIONAL, signature,
        //   issuer, thisUpdate, nextUpdate OPTIONAL,
        //   revokedCertificates SEQUENCE OF SEQUENCE {...} OPTIONAL,
        //   crlExtensions [0] EXPLICIT Extensions OPTIONAL }
        let mut t = Reader::new(tbs.value);
        t.next_optional(asn1::TAG_INTEGER).map_err(crl_err)?;
        t.next_tag(asn1::TAG_SEQUENCE).map_err(crl_err)?;
        t.next_tag(asn1::TAG_SEQUENCE).map_err(crl_err)?;
        let this_update = t.next_any().map_err(crl_err)?;
        if this_update.tag != 0x17 && this_update.tag != 0x18 {
            return Err(crl_err("invalid thisUpdate"));
        }
        if matches!(t.peek_tag(), Some(0x17 | 0x18)) {
            t.next_any().map_err(crl_err)?;
        }
        let mut revoked = Vec::new();
        if let Some(list) = t.next_optional(asn1::TAG_SEQUENCE).map_err(crl_err)? {
            let mut entries = Reader::new(list.value);
            while !entries.is_empty() {
                let entry = entries.next_tag(asn1::TAG_SEQUENCE).map_err(crl_err)?;
                let serial = Reader::new(entry.value).next_tag(asn1::TAG_INTEGER).map_err(crl_err)?;
                asn1::check_integer(serial.value).map_err(crl_err)?;
                revoked.push(serial.value.to_vec());
            }
        }
        let mut aki_extension = None;
        if let Some(wrapper) = t.next_optional(0xa0).map_err(crl_err)? {
            let (list, _) = asn1::read_tlv(wrapper.value).map_err(crl_err)?;
            let mut exts = Reader::new(list.value);
            while !exts.is_empty() {
                let ext = exts.next_tag(asn1::TAG_SEQUENCE).map_err(crl_err)?;
                let mut e = Reader::new(ext.value);
                let id = e.next_tag(asn1::TAG_OID).map_err(crl_err)?;
                e.next_optional(asn1::TAG_BOOLEAN).map_err(crl_err)?;
                let value = e.next_tag(asn1::TAG_OCTET_STRING).map_err(crl_err)?;
                if aki_extension.is_none() && id.value == OID_EXT_AKI.as_bytes() {
                    aki_extension = Some(value.value.to_vec());
                }
            }
        }
        Ok(Crl { tbs: tbs.full.to_vec(), sig_alg, signature, aki_extension, revoked })
    }

    /// Fabric's `getAuthorityKeyIdentifierFromCrl`: the keyIdentifier of
    /// the AKI extension (empty when the extension has none). Errors when
    /// the CRL has no AKI extension or it is not a SEQUENCE.
    pub(crate) fn authority_key_id(&self) -> Result<Vec<u8>, String> {
        let value = self.aki_extension.as_ref().ok_or("authorityKeyIdentifier not found in CRL")?;
        let (seq, _) = asn1::read_tlv(value).map_err(|e| format!("failed to unmarshal AKI: {e}"))?;
        if seq.tag != asn1::TAG_SEQUENCE {
            return Err("failed to unmarshal AKI".into());
        }
        let mut r = Reader::new(seq.value);
        match r.peek_tag() {
            Some(0x80) => Ok(r.next_any().map_err(|e| format!("failed to unmarshal AKI: {e}"))?.value.to_vec()),
            _ => Ok(Vec::new()),
        }
    }

    /// The INTEGER contents of the revoked serial numbers.
    pub(crate) fn revoked_serials(&self) -> &[Vec<u8>] {
        &self.revoked
    }

    /// Go's `CheckCRLSignature` with the issuing CA's key.
    pub(crate) fn signed_by(&self, ca: &Cert) -> bool {
        verify_signed(self.sig_alg, &self.tbs, &self.signature, &ca.key).is_ok()
    }
}
