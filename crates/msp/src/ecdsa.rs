//! ECDSA as Fabric's software BCCSP does it (bccsp/sw/ecdsa.go,
//! bccsp/utils/ecdsa.go): lenient Go-ASN.1 signature decoding, the low-S
//! rule, then a plain ECDSA verification by `ferrofabric-ecdsa` (per-key fixed-base tables for the keys that
//! keep signing, aws-lc for the others).

use std::cmp::Ordering;
use std::fmt;

use crate::asn1;
use crate::error::MspError;

/// Order n of the P-256 group, big-endian.
pub(crate) const P256_N: [u8; 32] = [
    0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xbc, 0xe6, 0xfa,
    0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
];

/// Order n of the P-384 group, big-endian.
pub(crate) const P384_N: [u8; 48] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xc7, 0x63, 0x4d, 0x81, 0xf4, 0x37, 0x2d, 0xdf, 0x58, 0x1a, 0x0d, 0xb2, 0x48, 0xb0,
    0xa7, 0x7a, 0xec, 0xec, 0x19, 0x6a, 0xcc, 0xc5, 0x29, 0x73,
];

const fn shift_right_one<const L: usize>(n: [u8; L]) -> [u8; L] {
    let mut out = [0u8; L];
    let mut carry = 0u8;
    let mut i = 0;
    while i < L {
        out[i] = (n[i] >> 1) | carry;
        carry = (n[i] & 1) << 7;
        i += 1;
    }
    out
}

/// floor(n / 2) for P-256: the largest S Fabric accepts.
pub(crate) const P256_HALF_N: [u8; 32] = shift_right_one(P256_N);
/// floor(n / 2) for P-384.
pub(crate) const P384_HALF_N: [u8; 48] = shift_right_one(P384_N);

/// The NIST curves whose ECDSA signatures we can verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Curve {
    /// secp256r1 / prime256v1.
    P256,
    /// secp384r1.
    P384,
}

impl Curve {
    pub(crate) fn order(self) -> &'static [u8] {
        match self {
            Curve::P256 => &P256_N,
            Curve::P384 => &P384_N,
        }
    }

    pub(crate) fn half_order(self) -> &'static [u8] {
        match self {
            Curve::P256 => &P256_HALF_N,
            Curve::P384 => &P384_HALF_N,
        }
    }
}

/// Compares two big-endian unsigned magnitudes (leading zeros allowed).
pub(crate) fn cmp_be(a: &[u8], b: &[u8]) -> Ordering {
    let a = &a[a.iter().position(|&x| x != 0).unwrap_or(a.len())..];
    let b = &b[b.iter().position(|&x| x != 0).unwrap_or(b.len())..];
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// `a - b` for big-endian magnitudes with `a >= b`, result as long as `a`.
pub(crate) fn sub_be(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = a.to_vec();
    let mut borrow = 0i16;
    for i in 0..out.len() {
        let ai = out.len() - 1 - i;
        let bv = if i < b.len() { i16::from(b[b.len() - 1 - i]) } else { 0 };
        let mut v = i16::from(out[ai]) - bv - borrow;
        borrow = 0;
        if v < 0 {
            v += 256;
            borrow = 1;
        }
        out[ai] = v as u8;
    }
    out
}

/// Fabric's `SignatureToLowS`: parse leniently (Go rules, r, s > 0), replace
/// S by n - S when S > n/2, and re-marshal canonically.
pub(crate) fn signature_to_low_s(curve: Curve, der: &[u8]) -> Result<Vec<u8>, MspError> {
    let (r, s) = asn1::parse_ecdsa_signature(der).map_err(MspError::MalformedSignature)?;
    if cmp_be(s, curve.half_order()) == Ordering::Greater {
        // A high S above n (Go does not range-check here) would underflow;
        // such a signature can never verify, so keep it as it is.
        if cmp_be(s, curve.order()) != Ordering::Less {
            return Ok(asn1::marshal_ecdsa_signature(r, s));
        }
        let low = sub_be(curve.order(), s);
        return Ok(asn1::marshal_ecdsa_signature(r, &low));
    }
    Ok(asn1::marshal_ecdsa_signature(r, s))
}

/// An ECDSA P-256 public key, checked once (uncompressed, on the curve), verified through
/// [`ferrofabric_ecdsa`]: with the key's own fixed-base table once it has been seen twice, with aws-lc before.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    key: ferrofabric_ecdsa::VerifyingKey,
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey(P-256, 04")?;
        for b in &self.key.sec1_bytes()[1..9] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

impl PublicKey {
    /// Builds a key from an uncompressed SEC1 point (`0x04 || X || Y`, 65
    /// bytes), the only form Go's x509 accepts in certificates.
    ///
    /// Errors: [`MspError::UnsupportedKey`] for another length/prefix or a
    /// point that is not on P-256.
    pub fn from_sec1(uncompressed_point: &[u8]) -> Result<PublicKey, MspError> {
        if uncompressed_point.len() != 65 {
            return Err(MspError::UnsupportedKey(format!(
                "expected a 65-byte uncompressed P-256 point, got {} bytes",
                uncompressed_point.len()
            )));
        }
        let key = ferrofabric_ecdsa::VerifyingKey::from_sec1(uncompressed_point).map_err(|e| match e {
            ferrofabric_ecdsa::KeyError::NotUncompressed => {
                MspError::UnsupportedKey("P-256 point is not in uncompressed form".into())
            }
            ferrofabric_ecdsa::KeyError::NotOnCurve => {
                MspError::UnsupportedKey("point is not on the P-256 curve".into())
            }
        })?;
        Ok(PublicKey { key })
    }

    /// The 65-byte uncompressed SEC1 point.
    pub fn sec1_bytes(&self) -> &[u8; 65] {
        self.key.sec1_bytes()
    }

    /// Fabric's signature check (bccsp/sw/ecdsa.go `verifyECDSA` over the
    /// SHA-256 of `msg`, as msp/identities.go `Verify` computes it).
    ///
    /// `der_signature` is decoded like Go's `asn1.Unmarshal` (bytes after the
    /// SEQUENCE and extra SEQUENCE elements ignored; r, s must be > 0), S
    /// above n/2 is rejected (low-S rule), r or s >= n fail like Go's
    /// `ecdsa.Verify`; the curve check itself is [`ferrofabric_ecdsa`]'s.
    ///
    /// Errors: [`MspError::MalformedSignature`], [`MspError::HighS`],
    /// [`MspError::InvalidSignature`].
    pub fn verify(&self, msg: &[u8], der_signature: &[u8]) -> Result<(), MspError> {
        let sig = fabric_signature(der_signature)?;
        if self.key.verify(msg, &sig) {
            Ok(())
        } else {
            Err(MspError::InvalidSignature)
        }
    }
}

/// Fabric's decoding of a signature before the curve check (bccsp/sw/ecdsa.go `verifyECDSA`): Go-ASN.1 decoding
/// (r, s > 0), the low-S rule, then Go's `ecdsa.Verify` range check (r, s < n).
fn fabric_signature(der_signature: &[u8]) -> Result<ferrofabric_ecdsa::Signature, MspError> {
    let (r, s) = asn1::parse_ecdsa_signature(der_signature).map_err(MspError::MalformedSignature)?;
    if cmp_be(s, &P256_HALF_N) == Ordering::Greater {
        return Err(MspError::HighS);
    }
    ferrofabric_ecdsa::Signature::from_scalars(r, s).ok_or(MspError::InvalidSignature)
}

/// Fabric's signature checks for many `(key, msg, der_signature)` triples at once, e.g. every creator signature of a
/// block: the verdicts, in order, are those of [`PublicKey::verify`] one by one (`true` = `Ok`), but the
/// signatures that pass the DER and low-S checks share one scalar inversion
/// ([`ferrofabric_ecdsa::verify_batch`]).
pub fn verify_batch(items: &[(&PublicKey, &[u8], &[u8])]) -> Vec<bool> {
    let parsed: Vec<Option<ferrofabric_ecdsa::Signature>> =
        items.iter().map(|(_, _, der)| fabric_signature(der).ok()).collect();
    let batch: Vec<ferrofabric_ecdsa::BatchItem<'_>> = items
        .iter()
        .zip(&parsed)
        .filter_map(|((key, msg, _), sig)| {
            Some(ferrofabric_ecdsa::BatchItem { key: &key.key, msg, sig: sig.as_ref()? })
        })
        .collect();
    let mut verdicts = ferrofabric_ecdsa::verify_batch(ferrofabric_ecdsa::TableCache::global(), &batch).into_iter();
    parsed.iter().map(|sig| sig.is_some() && verdicts.next().unwrap_or(false)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_orders() {
        // n is odd, so 2 * floor(n/2) + 1 == n.
        let mut twice = P256_HALF_N.to_vec();
        let mut carry = 1u16;
        for b in twice.iter_mut().rev() {
            let v = u16::from(*b) * 2 + carry;
            *b = v as u8;
            carry = v >> 8;
        }
        assert_eq!(twice, P256_N.to_vec());
        assert_eq!(P384_HALF_N[0], 0x7f);
        assert_eq!(sub_be(&[1, 0], &[1]), vec![0, 0xff]);
        assert_eq!(cmp_be(&[0, 0, 5], &[5]), Ordering::Equal);
    }
}
