//! Points of P-256 (y² = x³ − 3x + b over GF(p)), coordinates in Montgomery form: affine points for tables and
//! keys, Jacobian points (x = X/Z², y = Y/Z³) for sums. Formulas from the Explicit-Formulas Database:
//! `dbl-2001-b` (a = −3) and `madd-2007-bl`, with the exceptional cases (equal or opposite points, infinity)
//! handled by branches — all values are public.

use crate::mont::{from_be_bytes, is_zero, lt, Limbs, Modulus};

/// The field prime p = 2^256 − 2^224 + 2^192 + 2^96 − 1 (SEC 2, secp256r1).
pub(crate) const P: Modulus = Modulus::new([0xffffffffffffffff, 0x00000000ffffffff, 0, 0xffffffff00000001]);

/// The group order n (SEC 2, secp256r1).
pub(crate) const N: Modulus =
    Modulus::new([0xf3b9cac2fc632551, 0xbce6faada7179e84, 0xffffffffffffffff, 0xffffffff00000000]);

/// The curve constant b, big-endian (SEC 2).
const B: [u8; 32] = [
    0x5a, 0xc6, 0x35, 0xd8, 0xaa, 0x3a, 0x93, 0xe7, 0xb3, 0xeb, 0xbd, 0x55, 0x76, 0x98, 0x86, 0xbc, 0x65, 0x1d, 0x06,
    0xb0, 0xcc, 0x53, 0xb0, 0xf6, 0x3b, 0xce, 0x3c, 0x3e, 0x27, 0xd2, 0x60, 0x4b,
];

/// The generator G as an uncompressed SEC1 point (SEC 2).
pub(crate) const GENERATOR_SEC1: [u8; 65] = [
    0x04, 0x6b, 0x17, 0xd1, 0xf2, 0xe1, 0x2c, 0x42, 0x47, 0xf8, 0xbc, 0xe6, 0xe5, 0x63, 0xa4, 0x40, 0xf2, 0x77, 0x03,
    0x7d, 0x81, 0x2d, 0xeb, 0x33, 0xa0, 0xf4, 0xa1, 0x39, 0x45, 0xd8, 0x98, 0xc2, 0x96, 0x4f, 0xe3, 0x42, 0xe2, 0xfe,
    0x1a, 0x7f, 0x9b, 0x8e, 0xe7, 0xeb, 0x4a, 0x7c, 0x0f, 0x9e, 0x16, 0x2b, 0xce, 0x33, 0x57, 0x6b, 0x31, 0x5e, 0xce,
    0xcb, 0xb6, 0x40, 0x68, 0x37, 0xbf, 0x51, 0xf5,
];

/// An affine point other than infinity, coordinates in Montgomery form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Affine {
    pub(crate) x: Limbs,
    pub(crate) y: Limbs,
}

impl Affine {
    /// Parses an uncompressed SEC1 point (`0x04 || X || Y`) and checks that both coordinates are below p and that
    /// it lies on the curve; infinity has no such encoding.
    pub(crate) fn from_sec1(bytes: &[u8; 65]) -> Option<Affine> {
        if bytes[0] != 0x04 {
            return None;
        }
        let mut xb = [0u8; 32];
        let mut yb = [0u8; 32];
        xb.copy_from_slice(&bytes[1..33]);
        yb.copy_from_slice(&bytes[33..65]);
        let (x, y) = (from_be_bytes(&xb), from_be_bytes(&yb));
        if !lt(&x, &P.m) || !lt(&y, &P.m) {
            return None;
        }
        let point = Affine { x: P.to_mont(&x), y: P.to_mont(&y) };
        point.is_on_curve().then_some(point)
    }

    /// y² == x³ − 3x + b.
    fn is_on_curve(&self) -> bool {
        let b = P.to_mont(&from_be_bytes(&B));
        let x2 = P.square(&self.x);
        let x3 = P.mul(&x2, &self.x);
        let three_x = P.add(&P.add(&self.x, &self.x), &self.x);
        let rhs = P.add(&P.sub(&x3, &three_x), &b);
        P.square(&self.y) == rhs
    }

    /// −P.
    #[inline(always)]
    pub(crate) fn neg(&self) -> Affine {
        Affine { x: self.x, y: P.neg(&self.y) }
    }
}

/// A point in Jacobian coordinates; `z == 0` is the point at infinity.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Jacobian {
    pub(crate) x: Limbs,
    pub(crate) y: Limbs,
    pub(crate) z: Limbs,
}

impl Jacobian {
    /// The point at infinity.
    pub(crate) const INFINITY: Jacobian = Jacobian { x: [0; 4], y: [0; 4], z: [0; 4] };

    /// Whether this is the point at infinity.
    #[inline(always)]
    pub(crate) fn is_infinity(&self) -> bool {
        is_zero(&self.z)
    }

    /// An affine point with Z = 1.
    #[inline(always)]
    pub(crate) fn from_affine(a: &Affine) -> Jacobian {
        Jacobian { x: a.x, y: a.y, z: P.one }
    }

    /// 2·P (`dbl-2001-b`, 3M + 5S).
    pub(crate) fn double(&self) -> Jacobian {
        if self.is_infinity() || is_zero(&self.y) {
            return Jacobian::INFINITY;
        }
        let delta = P.square(&self.z);
        let gamma = P.square(&self.y);
        let beta = P.mul(&self.x, &gamma);
        let t = P.mul(&P.sub(&self.x, &delta), &P.add(&self.x, &delta));
        let alpha = P.add(&P.add(&t, &t), &t);
        let beta2 = P.add(&beta, &beta);
        let beta4 = P.add(&beta2, &beta2);
        let beta8 = P.add(&beta4, &beta4);
        let x3 = P.sub(&P.square(&alpha), &beta8);
        let yz = P.add(&self.y, &self.z);
        let z3 = P.sub(&P.sub(&P.square(&yz), &gamma), &delta);
        let gamma2 = P.square(&gamma);
        let g2 = P.add(&gamma2, &gamma2);
        let g4 = P.add(&g2, &g2);
        let g8 = P.add(&g4, &g4);
        let y3 = P.sub(&P.mul(&alpha, &P.sub(&beta4, &x3)), &g8);
        Jacobian { x: x3, y: y3, z: z3 }
    }

    /// P + Q for an affine Q (`madd-2007-bl` without the Z1 = 1 shortcut, 8M + 3S).
    #[inline]
    pub(crate) fn add_affine(&self, q: &Affine) -> Jacobian {
        if self.is_infinity() {
            return Jacobian::from_affine(q);
        }
        let z1z1 = P.square(&self.z);
        let u2 = P.mul(&q.x, &z1z1);
        let s2 = P.mul(&q.y, &P.mul(&self.z, &z1z1));
        let h = P.sub(&u2, &self.x);
        let r = P.sub(&s2, &self.y);
        if is_zero(&h) {
            return if is_zero(&r) { self.double() } else { Jacobian::INFINITY };
        }
        let hh = P.square(&h);
        let hhh = P.mul(&h, &hh);
        let v = P.mul(&self.x, &hh);
        let x3 = P.sub(&P.sub(&P.square(&r), &hhh), &P.add(&v, &v));
        let y3 = P.sub(&P.mul(&r, &P.sub(&v, &x3)), &P.mul(&self.y, &hhh));
        let z3 = P.mul(&self.z, &h);
        Jacobian { x: x3, y: y3, z: z3 }
    }

    /// P + Q for two Jacobian points (`add-2007-bl`, 11M + 5S); used only to build tables.
    pub(crate) fn add(&self, q: &Jacobian) -> Jacobian {
        if self.is_infinity() {
            return *q;
        }
        if q.is_infinity() {
            return *self;
        }
        let z1z1 = P.square(&self.z);
        let z2z2 = P.square(&q.z);
        let u1 = P.mul(&self.x, &z2z2);
        let u2 = P.mul(&q.x, &z1z1);
        let s1 = P.mul(&self.y, &P.mul(&q.z, &z2z2));
        let s2 = P.mul(&q.y, &P.mul(&self.z, &z1z1));
        let h = P.sub(&u2, &u1);
        let r = P.sub(&s2, &s1);
        if is_zero(&h) {
            return if is_zero(&r) { self.double() } else { Jacobian::INFINITY };
        }
        let hh = P.square(&h);
        let hhh = P.mul(&h, &hh);
        let v = P.mul(&u1, &hh);
        let x3 = P.sub(&P.sub(&P.square(&r), &hhh), &P.add(&v, &v));
        let y3 = P.sub(&P.mul(&r, &P.sub(&v, &x3)), &P.mul(&s1, &hhh));
        let z3 = P.mul(&P.mul(&self.z, &q.z), &h);
        Jacobian { x: x3, y: y3, z: z3 }
    }

    /// Converts many finite points to affine with one field inversion (Montgomery's trick). `None` if any is
    /// infinity.
    pub(crate) fn batch_to_affine(points: &[Jacobian]) -> Option<Vec<Affine>> {
        if points.iter().any(Jacobian::is_infinity) {
            return None;
        }
        let mut zinv: Vec<Limbs> = points.iter().map(|p| p.z).collect();
        P.batch_invert(&mut zinv);
        Some(
            points
                .iter()
                .zip(zinv)
                .map(|(p, zi)| {
                    let zi2 = P.square(&zi);
                    Affine { x: P.mul(&p.x, &zi2), y: P.mul(&p.y, &P.mul(&zi2, &zi)) }
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generator() -> Affine {
        Affine::from_sec1(&GENERATOR_SEC1).expect("G is on the curve")
    }

    fn to_affine(p: &Jacobian) -> Affine {
        Jacobian::batch_to_affine(&[*p]).expect("finite")[0]
    }

    #[test]
    fn generator_is_on_the_curve_and_a_tampered_one_is_not() {
        let g = generator();
        assert!(g.is_on_curve());
        let mut bad = GENERATOR_SEC1;
        bad[64] ^= 1;
        assert!(Affine::from_sec1(&bad).is_none());
        let mut compressed = GENERATOR_SEC1;
        compressed[0] = 0x02;
        assert!(Affine::from_sec1(&compressed).is_none());
    }

    #[test]
    fn addition_agrees_with_doubling_and_inverse() {
        let g = generator();
        let gj = Jacobian::from_affine(&g);
        let two_g = gj.double();
        // G + G through the mixed and the general formula both take the doubling branch.
        assert_eq!(to_affine(&gj.add_affine(&g)), to_affine(&two_g));
        assert_eq!(to_affine(&gj.add(&gj)), to_affine(&two_g));
        // 2G + G == G + 2G, and 3G − G == 2G.
        let three_a = two_g.add_affine(&g);
        let three_b = gj.add(&two_g);
        assert_eq!(to_affine(&three_a), to_affine(&three_b));
        assert_eq!(to_affine(&three_a.add_affine(&g.neg())), to_affine(&two_g));
        // G − G is infinity.
        assert!(gj.add_affine(&g.neg()).is_infinity());
        assert!(to_affine(&three_a).is_on_curve());
    }
}
