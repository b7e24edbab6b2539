//! ECDSA P-256 / SHA-256 verification (SEC 1 v2 §4.1.4, as Go's `crypto/ecdsa.Verify` does it): with `e` the
//! digest, `w = s⁻¹ mod n`, `R = (e·w)·G + (r·w)·Q`, the signature holds iff R is finite and `x(R) mod n == r`.
//!
//! Both products come from fixed-base tables (G's, built once per process; Q's, from the [`TableCache`]). The
//! final comparison needs no inversion: with `R = (X : Y : Z)` in Jacobian form, `x(R) = X/Z²`, so it checks
//! `r·Z² == X`, and `(r + n)·Z² == X` when `r + n < p` (the wrap case `x(R) ≥ n`).

use std::fmt;
use std::sync::{Arc, OnceLock};

use aws_lc_rs::digest::{digest, Digest, SHA256};
use aws_lc_rs::signature::{ParsedPublicKey, ECDSA_P256_SHA256_FIXED};

use crate::cache::{PointBytes, TableCache};
use crate::mont::{const_add, from_be_bytes, is_zero, lt, Limbs};
use crate::point::{Affine, Jacobian, GENERATOR_SEC1, N, P};
use crate::table::{recode, Table};

/// Why a public key was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyError {
    /// Not 65 bytes starting with 0x04 (the only form Go's x509 accepts in certificates).
    NotUncompressed,
    /// A coordinate is not below p, or the point is not on P-256.
    NotOnCurve,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyError::NotUncompressed => write!(f, "expected a 65-byte uncompressed P-256 point"),
            KeyError::NotOnCurve => write!(f, "point is not on the P-256 curve"),
        }
    }
}

impl std::error::Error for KeyError {}

/// An ECDSA signature `(r, s)` with both scalars in `[1, n − 1]` (Go's `ecdsa.Verify` range check). High S is
/// allowed here: Fabric's low-S rule is the MSP's (`bccsp/sw/ecdsa.go`), not ECDSA's.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    r: Limbs,
    s: Limbs,
    fixed: [u8; 64],
}

impl Signature {
    /// From big-endian magnitudes (leading zero bytes allowed, as DER INTEGERs carry them). `None` if either is
    /// zero, not below n, or longer than 32 significant bytes.
    pub fn from_scalars(r: &[u8], s: &[u8]) -> Option<Signature> {
        let mut fixed = [0u8; 64];
        let (rb, sb) = fixed.split_at_mut(32);
        right_align(rb, r)?;
        right_align(sb, s)?;
        let (r, s) = (from_be_bytes(&array32(rb)), from_be_bytes(&array32(sb)));
        let in_range = |v: &Limbs| !is_zero(v) && lt(v, &N.m);
        (in_range(&r) && in_range(&s)).then_some(Signature { r, s, fixed })
    }
}

impl fmt::Debug for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signature(")?;
        for b in &self.fixed[..8] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

/// A P-256 public key, checked once (uncompressed, on the curve), ready for verification.
#[derive(Clone)]
pub struct VerifyingKey {
    point: Affine,
    sec1: [u8; 65],
    aws: Arc<ParsedPublicKey>,
}

impl PartialEq for VerifyingKey {
    fn eq(&self, other: &Self) -> bool {
        self.sec1 == other.sec1
    }
}

impl Eq for VerifyingKey {}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VerifyingKey(P-256, 04")?;
        for b in &self.sec1[1..9] {
            write!(f, "{b:02x}")?;
        }
        write!(f, "..)")
    }
}

impl VerifyingKey {
    /// From an uncompressed SEC1 point `0x04 || X || Y` (65 bytes).
    ///
    /// Errors: [`KeyError::NotUncompressed`], [`KeyError::NotOnCurve`].
    pub fn from_sec1(bytes: &[u8]) -> Result<VerifyingKey, KeyError> {
        let sec1: [u8; 65] = bytes.try_into().map_err(|_| KeyError::NotUncompressed)?;
        if sec1[0] != 0x04 {
            return Err(KeyError::NotUncompressed);
        }
        let point = Affine::from_sec1(&sec1).ok_or(KeyError::NotOnCurve)?;
        let aws = ParsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, sec1).map_err(|_| KeyError::NotOnCurve)?;
        Ok(VerifyingKey { point, sec1, aws: Arc::new(aws) })
    }

    /// The 65-byte uncompressed SEC1 point.
    pub fn sec1_bytes(&self) -> &[u8; 65] {
        &self.sec1
    }

    /// Verifies `sig` over SHA-256(`msg`), using the process-wide [`TableCache`].
    pub fn verify(&self, msg: &[u8], sig: &Signature) -> bool {
        self.verify_with(TableCache::global(), msg, sig)
    }

    /// Verifies `sig` over SHA-256(`msg`) with the key's table from `cache` (admitting the key on its second
    /// sighting), or with aws-lc while the key has no table.
    pub fn verify_with(&self, cache: &TableCache, msg: &[u8], sig: &Signature) -> bool {
        let digest = digest(&SHA256, msg);
        match self.table(cache) {
            Some(table) => {
                let w = N.invert_vartime(&sig.s);
                verify_tabled(&table, &digest_scalar(&digest), sig, &w)
            }
            None => self.aws.verify_digest_sig(&digest, &sig.fixed).is_ok(),
        }
    }

    fn table(&self, cache: &TableCache) -> Option<Arc<Table>> {
        cache.table_for(&self.point_bytes(), || Table::new(&self.point))
    }

    fn point_bytes(&self) -> PointBytes {
        let mut out = [0u8; 64];
        out.copy_from_slice(&self.sec1[1..]);
        out
    }
}

/// One signature check of a batch: the key, the signed message and the signature.
#[derive(Debug, Clone, Copy)]
pub struct BatchItem<'a> {
    /// The signer's key.
    pub key: &'a VerifyingKey,
    /// The signed message (hashed here with SHA-256).
    pub msg: &'a [u8],
    /// The signature.
    pub sig: &'a Signature,
}

/// Verifies many signatures, inverting all their `s` with one scalar inversion (Montgomery's trick): the
/// verdicts, in order, are exactly those of [`VerifyingKey::verify_with`] one by one.
pub fn verify_batch(cache: &TableCache, items: &[BatchItem<'_>]) -> Vec<bool> {
    let tables: Vec<Option<Arc<Table>>> = items.iter().map(|it| it.key.table(cache)).collect();
    let mut w: Vec<Limbs> =
        items.iter().zip(&tables).map(|(it, t)| if t.is_some() { N.to_mont(&it.sig.s) } else { [0; 4] }).collect();
    N.batch_invert(&mut w);
    items
        .iter()
        .zip(tables)
        .zip(w)
        .map(|((it, table), w)| {
            let digest = digest(&SHA256, it.msg);
            match table {
                Some(table) => verify_tabled(&table, &digest_scalar(&digest), it.sig, &w),
                None => it.key.aws.verify_digest_sig(&digest, &it.sig.fixed).is_ok(),
            }
        })
        .collect()
}

/// The table of G, built on first use.
fn generator_table() -> &'static Table {
    static G: OnceLock<Table> = OnceLock::new();
    G.get_or_init(|| match Affine::from_sec1(&GENERATOR_SEC1) {
        Some(g) => Table::new(&g),
        // G is a constant on the curve; an empty table would make every verification fail, never pass.
        None => Table::new(&Affine { x: [0; 4], y: [0; 4] }),
    })
}

/// The digest as an integer below n (SHA-256 is as long as n, so no truncation: e mod n).
fn digest_scalar(d: &Digest) -> Limbs {
    let e = from_be_bytes(&array32(d.as_ref()));
    if lt(&e, &N.m) {
        e
    } else {
        crate::mont::const_sub(&e, &N.m).0
    }
}

/// The core check with Q's table and `w = s⁻¹` (Montgomery form).
fn verify_tabled(q: &Table, e: &Limbs, sig: &Signature, w: &Limbs) -> bool {
    // Montgomery product of a plain value and a Montgomery-form one is the plain product.
    let u1 = N.mul(e, w);
    let u2 = N.mul(&sig.r, w);
    let mut acc = Jacobian::INFINITY;
    generator_table().accumulate(&mut acc, &recode(&u1));
    q.accumulate(&mut acc, &recode(&u2));
    x_matches(&acc, &sig.r)
}

/// `x(R) mod n == r` without inverting Z.
fn x_matches(acc: &Jacobian, r: &Limbs) -> bool {
    if acc.is_infinity() {
        return false;
    }
    let z2 = P.square(&acc.z);
    if P.mul(&P.to_mont(r), &z2) == acc.x {
        return true;
    }
    let (r_plus_n, carry) = const_add(r, &N.m);
    !carry && lt(&r_plus_n, &P.m) && P.mul(&P.to_mont(&r_plus_n), &z2) == acc.x
}

/// Copies a big-endian magnitude right-aligned into `out`; `None` if it has more significant bytes than fit.
fn right_align(out: &mut [u8], magnitude: &[u8]) -> Option<()> {
    let m = &magnitude[magnitude.iter().position(|&x| x != 0).unwrap_or(magnitude.len())..];
    let start = out.len().checked_sub(m.len())?;
    out[start..].copy_from_slice(m);
    Some(())
}

fn array32(b: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(&b[..32]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_built_for_another_key_does_not_verify() {
        use p256::ecdsa::signature::hazmat::PrehashSigner;
        let sk = p256::ecdsa::SigningKey::from_slice(&[7u8; 32]).expect("scalar");
        let other = p256::ecdsa::SigningKey::from_slice(&[9u8; 32]).expect("scalar");
        let key_of = |k: &p256::ecdsa::SigningKey| {
            VerifyingKey::from_sec1(k.verifying_key().to_encoded_point(false).as_bytes()).expect("key")
        };
        let (key, wrong) = (key_of(&sk), key_of(&other));
        let msg = b"block header";
        let d = digest(&SHA256, msg);
        let sig: p256::ecdsa::Signature = sk.sign_prehash(d.as_ref()).expect("sign");
        let (r, s) = sig.split_bytes();
        let sig = Signature::from_scalars(&r, &s).expect("in range");
        let w = N.invert_vartime(&sig.s);
        let e = digest_scalar(&d);
        assert!(verify_tabled(&Table::new(&key.point), &e, &sig, &w));
        assert!(!verify_tabled(&Table::new(&wrong.point), &e, &sig, &w));
    }

    /// A point with x in [n, p): x(R) mod n == r only through the `r + n` comparison.
    fn point_with_x_above_n() -> (Affine, Limbs) {
        let b = P.to_mont(&from_be_bytes(&hex32("5ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604b")));
        // (p + 1) / 4: p ≡ 3 mod 4, so a^((p+1)/4) is a square root of a square a.
        let (p1, _) = const_add(&P.m, &[1, 0, 0, 0]);
        let sqrt_exp =
            [(p1[0] >> 2) | (p1[1] << 62), (p1[1] >> 2) | (p1[2] << 62), (p1[2] >> 2) | (p1[3] << 62), p1[3] >> 2];
        for t in 1u64.. {
            let x_plain = const_add(&N.m, &[t, 0, 0, 0]).0;
            let x = P.to_mont(&x_plain);
            let three_x = P.add(&P.add(&x, &x), &x);
            let rhs = P.add(&P.sub(&P.mul(&P.square(&x), &x), &three_x), &b);
            let y = P.pow(&rhs, &sqrt_exp);
            if P.square(&y) == rhs {
                return (Affine { x, y }, [t, 0, 0, 0]);
            }
        }
        unreachable!("half of all x are on the curve")
    }

    fn hex32(h: &str) -> [u8; 32] {
        hex::decode(h).expect("hex").try_into().expect("32 bytes")
    }

    fn sec1_of(p: &Jacobian) -> [u8; 65] {
        let a = Jacobian::batch_to_affine(&[*p]).expect("finite")[0];
        let mut out = [4u8; 65];
        out[1..33].copy_from_slice(&crate::mont::to_be_bytes(&P.leave_mont(&a.x)));
        out[33..].copy_from_slice(&crate::mont::to_be_bytes(&P.leave_mont(&a.y)));
        out
    }

    #[test]
    fn wrap_case_x_of_r_above_n_verifies_like_aws_lc() {
        let (r_point, r) = point_with_x_above_n();
        let msg = b"x(R) >= n";
        let e = digest_scalar(&digest(&SHA256, msg));
        let s: Limbs = [0x1234_5678, 0x9abc, 0xdef0, 0x4242];
        // Q = (s/r)·R − (e/r)·G makes (r, s) a valid signature of msg: then R = (e/s)·G + (r/s)·Q.
        let r_inv = N.invert(&N.to_mont(&r));
        let a = N.mul(&s, &r_inv);
        let b = N.neg(&N.mul(&e, &r_inv));
        let mut q = Jacobian::INFINITY;
        Table::new(&r_point).accumulate(&mut q, &recode(&a));
        generator_table().accumulate(&mut q, &recode(&b));
        let key = VerifyingKey::from_sec1(&sec1_of(&q)).expect("Q is on the curve");
        let sig = Signature::from_scalars(&crate::mont::to_be_bytes(&r), &crate::mont::to_be_bytes(&s)).expect("range");
        let cache = TableCache::new(2);
        assert!(key.verify_with(&cache, msg, &sig), "first sighting, aws-lc");
        assert!(key.verify_with(&cache, msg, &sig), "second sighting, with the key's table");
        assert_eq!(cache.len(), 1);
        assert!(!key.verify_with(&cache, b"another message", &sig));
    }

    #[test]
    fn keys_off_the_curve_or_at_infinity_are_refused() {
        assert_eq!(VerifyingKey::from_sec1(&[0u8; 65]), Err(KeyError::NotUncompressed));
        let mut zero = [0u8; 65];
        zero[0] = 4;
        assert_eq!(VerifyingKey::from_sec1(&zero), Err(KeyError::NotOnCurve));
        assert_eq!(VerifyingKey::from_sec1(&[0u8]), Err(KeyError::NotUncompressed));
        let mut g = GENERATOR_SEC1;
        g[40] ^= 0x80;
        assert_eq!(VerifyingKey::from_sec1(&g), Err(KeyError::NotOnCurve));
        // x = p (a coordinate not below p) with G's y.
        let mut big = GENERATOR_SEC1;
        big[1..33].copy_from_slice(&crate::mont::to_be_bytes(&P.m));
        assert_eq!(VerifyingKey::from_sec1(&big), Err(KeyError::NotOnCurve));
        assert!(VerifyingKey::from_sec1(&GENERATOR_SEC1).is_ok());
    }

    #[test]
    fn out_of_range_scalars_are_refused() {
        let n = crate::mont::to_be_bytes(&N.m);
        assert!(Signature::from_scalars(&[0], &[1]).is_none());
        assert!(Signature::from_scalars(&[1], &[]).is_none());
        assert!(Signature::from_scalars(&n, &[1]).is_none());
        assert!(Signature::from_scalars(&[1], &[1; 33]).is_none());
        assert!(Signature::from_scalars(&[0, 0, 1], &[1]).is_some());
    }
}
