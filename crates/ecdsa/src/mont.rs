//! Arithmetic modulo a 256-bit odd modulus in Montgomery form (R = 2^256), on four little-endian `u64` limbs with
//! `u128` products. Shared by the base field (mod p) and the scalars (mod n).
//!
//! Everything here is variable-time on purpose: a verifier handles only public values (keys, signatures, digests).
//! Every function takes and returns fully reduced values (`< m`), so equality of representations is equality of
//! residues.

/// Four little-endian 64-bit limbs: a 256-bit integer.
pub(crate) type Limbs = [u64; 4];

/// A modulus and the constants its Montgomery arithmetic needs, all computed at compile time.
pub(crate) struct Modulus {
    /// The modulus `m` (odd, above 2^255).
    pub(crate) m: Limbs,
    /// `-m^-1 mod 2^64`.
    m0inv: u64,
    /// `R^2 mod m`: multiplying by it enters Montgomery form.
    r2: Limbs,
    /// `R mod m`: one, in Montgomery form.
    pub(crate) one: Limbs,
}

impl Modulus {
    /// Derives the constants of `m`, which must be odd and above 2^255 (true of P-256's p and n).
    pub(crate) const fn new(m: Limbs) -> Modulus {
        // Newton's iteration doubles the correct low bits each step: 1 -> 64 bits in 6 steps.
        let mut inv: u64 = 1;
        let mut i = 0;
        while i < 6 {
            inv = inv.wrapping_mul(2u64.wrapping_sub(m[0].wrapping_mul(inv)));
            i += 1;
        }
        // R mod m = 2^256 - m, as m > 2^255.
        let one = const_sub(&[0, 0, 0, 0], &m).0;
        // R^2 mod m: double R mod m 256 times.
        let mut r2 = one;
        let mut k = 0;
        while k < 256 {
            r2 = const_add_mod(&r2, &r2, &m);
            k += 1;
        }
        Modulus { m, m0inv: inv.wrapping_neg(), r2, one }
    }

    /// `a * b * R^-1 mod m`.
    #[inline(always)]
    pub(crate) fn mul(&self, a: &Limbs, b: &Limbs) -> Limbs {
        let mut t = [0u64; 8];
        let mut i = 0;
        while i < 4 {
            let mut carry = 0;
            let mut j = 0;
            while j < 4 {
                (t[i + j], carry) = mac(t[i + j], a[i], b[j], carry);
                j += 1;
            }
            t[i + 4] = carry;
            i += 1;
        }
        self.reduce(t)
    }

    /// `a^2 * R^-1 mod m`, with the cross products computed once.
    #[inline(always)]
    pub(crate) fn square(&self, a: &Limbs) -> Limbs {
        let mut t = [0u64; 8];
        // Cross products a[i]*a[j], i < j.
        let mut i = 0;
        while i < 3 {
            let mut carry = 0;
            let mut j = i + 1;
            while j < 4 {
                (t[i + j], carry) = mac(t[i + j], a[i], a[j], carry);
                j += 1;
            }
            t[i + 4] = carry;
            i += 1;
        }
        // Double them.
        let mut k = 7;
        while k > 0 {
            t[k] = (t[k] << 1) | (t[k - 1] >> 63);
            k -= 1;
        }
        t[0] <<= 1;
        // Add the squares a[i]^2.
        let mut carry = 0;
        let mut i = 0;
        while i < 4 {
            let sq = u128::from(a[i]) * u128::from(a[i]);
            (t[2 * i], carry) = adc(t[2 * i], sq as u64, carry);
            (t[2 * i + 1], carry) = adc(t[2 * i + 1], (sq >> 64) as u64, carry);
            i += 1;
        }
        self.reduce(t)
    }

    /// Montgomery reduction of a 512-bit `t < m * R`: `t * R^-1 mod m`.
    #[inline(always)]
    fn reduce(&self, mut t: [u64; 8]) -> Limbs {
        let m = &self.m;
        let mut carry2 = 0;
        let mut i = 0;
        while i < 4 {
            let k = t[i].wrapping_mul(self.m0inv);
            let (_, mut carry) = mac(t[i], k, m[0], 0);
            let mut j = 1;
            while j < 4 {
                (t[i + j], carry) = mac(t[i + j], k, m[j], carry);
                j += 1;
            }
            (t[i + 4], carry2) = adc(t[i + 4], carry, carry2);
            i += 1;
        }
        self.final_sub([t[4], t[5], t[6], t[7]], carry2)
    }

    /// `(carry * 2^256 + a) mod m` for a value below `2m`.
    #[inline(always)]
    fn final_sub(&self, a: Limbs, carry: u64) -> Limbs {
        let (d, borrow) = const_sub(&a, &self.m);
        if carry != 0 || !borrow {
            d
        } else {
            a
        }
    }

    /// `a + b mod m`.
    #[inline(always)]
    pub(crate) fn add(&self, a: &Limbs, b: &Limbs) -> Limbs {
        let (s, carry) = const_add(a, b);
        self.final_sub(s, u64::from(carry))
    }

    /// `a - b mod m`.
    #[inline(always)]
    pub(crate) fn sub(&self, a: &Limbs, b: &Limbs) -> Limbs {
        let (d, borrow) = const_sub(a, b);
        if borrow {
            const_add(&d, &self.m).0
        } else {
            d
        }
    }

    /// `-a mod m`.
    #[inline(always)]
    pub(crate) fn neg(&self, a: &Limbs) -> Limbs {
        if is_zero(a) {
            *a
        } else {
            const_sub(&self.m, a).0
        }
    }

    /// Enters Montgomery form: `a * R mod m` (`a < m`).
    #[inline(always)]
    pub(crate) fn to_mont(&self, a: &Limbs) -> Limbs {
        self.mul(a, &self.r2)
    }

    /// Leaves Montgomery form: `a * R^-1 mod m`.
    #[cfg(test)]
    pub(crate) fn leave_mont(&self, a: &Limbs) -> Limbs {
        self.mul(a, &[1, 0, 0, 0])
    }

    /// The inverse of `a` in Montgomery form (`a^(m-2)`, Fermat: `m` is prime); zero maps to zero.
    pub(crate) fn invert(&self, a: &Limbs) -> Limbs {
        self.pow(a, &const_sub(&self.m, &[2, 0, 0, 0]).0)
    }

    /// The inverse of a plain `a` (`0 < a < m`), returned in Montgomery form (`a^-1 * R mod m`); zero for an `a`
    /// outside that range.
    ///
    /// Binary extended Euclid (Hankerson, Menezes, Vanstone, *Guide to Elliptic Curve Cryptography*, Alg. 2.22),
    /// started from `R mod m` instead of 1 so that the result comes out in Montgomery form: about twice as fast
    /// as [`Modulus::invert`], and variable-time (its inputs here are public signature scalars).
    pub(crate) fn invert_vartime(&self, a: &Limbs) -> Limbs {
        if is_zero(a) || !lt(a, &self.m) {
            return [0; 4];
        }
        // Invariants: x1 * a == u * R and x2 * a == v * R (mod m).
        let (mut u, mut v) = (*a, self.m);
        let (mut x1, mut x2) = (self.one, [0u64; 4]);
        loop {
            while u[0] & 1 == 0 {
                let k = u[0].trailing_zeros().min(63);
                u = shr(&u, k);
                x1 = self.halve(&x1, k);
            }
            while v[0] & 1 == 0 {
                let k = v[0].trailing_zeros().min(63);
                v = shr(&v, k);
                x2 = self.halve(&x2, k);
            }
            if u == [1, 0, 0, 0] {
                return x1;
            }
            if v == [1, 0, 0, 0] {
                return x2;
            }
            if lt(&u, &v) {
                v = const_sub(&v, &u).0;
                x2 = self.sub(&x2, &x1);
            } else {
                u = const_sub(&u, &v).0;
                x1 = self.sub(&x1, &x2);
            }
            // u == v would mean gcd(a, m) > 1: impossible for a prime m and 0 < a < m.
            if is_zero(&u) || is_zero(&v) {
                return [0; 4];
            }
        }
    }

    /// `x / 2^k mod m` for `0 < k < 64`: add the multiple of m that clears the low k bits, then shift.
    #[inline(always)]
    fn halve(&self, x: &Limbs, k: u32) -> Limbs {
        // t = x + q*m with q = -x * m^-1 mod 2^k, so t is divisible by 2^k; t < 2^k * m + m < 2^320.
        let mask = (1u64 << k) - 1;
        let q = x[0].wrapping_mul(self.m0inv) & mask;
        let mut t = [0u64; 5];
        let mut carry = 0;
        for i in 0..4 {
            (t[i], carry) = mac(x[i], q, self.m[i], carry);
        }
        t[4] = carry;
        let mut out = [0u64; 4];
        for i in 0..4 {
            out[i] = (t[i] >> k) | (t[i + 1] << (64 - k));
        }
        // t / 2^k < m + m·2^-k·... < 2m: one conditional subtraction.
        self.final_sub(out, t[4] >> k)
    }

    /// `a^e` for `a` in Montgomery form and a plain exponent `e`, with a fixed 4-bit window: 252 squarings and at
    /// most 63 + 14 multiplications.
    pub(crate) fn pow(&self, a: &Limbs, e: &Limbs) -> Limbs {
        let mut powers = [self.one; 16];
        powers[1] = *a;
        for k in 2..16 {
            powers[k] = self.mul(&powers[k - 1], a);
        }
        let mut acc = self.one;
        let mut started = false;
        for limb in e.iter().rev() {
            for nibble in (0..16).rev() {
                if started {
                    for _ in 0..4 {
                        acc = self.square(&acc);
                    }
                }
                let d = ((limb >> (4 * nibble)) & 0xf) as usize;
                if d != 0 {
                    acc = if started { self.mul(&acc, &powers[d]) } else { powers[d] };
                    started = true;
                }
            }
        }
        acc
    }

    /// Inverts every element of `values` in place (Montgomery form) with one inversion and three multiplications
    /// each (Montgomery's trick). Zeros stay zero and do not spoil the others.
    pub(crate) fn batch_invert(&self, values: &mut [Limbs]) {
        let mut prefix = Vec::with_capacity(values.len());
        let mut acc = self.one;
        for v in values.iter() {
            prefix.push(acc);
            if !is_zero(v) {
                acc = self.mul(&acc, v);
            }
        }
        let mut inv = self.invert(&acc);
        for (v, before) in values.iter_mut().zip(prefix).rev() {
            if is_zero(v) {
                continue;
            }
            let v_inv = self.mul(&inv, &before);
            inv = self.mul(&inv, v);
            *v = v_inv;
        }
    }
}

/// `a + b*c + carry` as (low, high) 64-bit words; never overflows 128 bits.
#[inline(always)]
const fn mac(a: u64, b: u64, c: u64, carry: u64) -> (u64, u64) {
    let t = a as u128 + (b as u128) * (c as u128) + carry as u128;
    (t as u64, (t >> 64) as u64)
}

/// `a + b + carry` as (sum, carry out), `carry` in {0, 1} or any small value.
#[inline(always)]
const fn adc(a: u64, b: u64, carry: u64) -> (u64, u64) {
    let t = a as u128 + b as u128 + carry as u128;
    (t as u64, (t >> 64) as u64)
}

/// `a - b` over 256 bits, with whether it borrowed.
#[inline(always)]
pub(crate) const fn const_sub(a: &Limbs, b: &Limbs) -> (Limbs, bool) {
    let mut d = [0u64; 4];
    let mut borrow = false;
    let mut i = 0;
    while i < 4 {
        let (x, b1) = a[i].overflowing_sub(b[i]);
        let (y, b2) = x.overflowing_sub(borrow as u64);
        d[i] = y;
        borrow = b1 | b2;
        i += 1;
    }
    (d, borrow)
}

/// `a + b` over 256 bits, with whether it carried out.
#[inline(always)]
pub(crate) const fn const_add(a: &Limbs, b: &Limbs) -> (Limbs, bool) {
    let mut s = [0u64; 4];
    let mut carry = 0;
    let mut i = 0;
    while i < 4 {
        (s[i], carry) = adc(a[i], b[i], carry);
        i += 1;
    }
    (s, carry != 0)
}

/// `a + b mod m` for `a, b < m`, usable in constants.
const fn const_add_mod(a: &Limbs, b: &Limbs, m: &Limbs) -> Limbs {
    let (s, carry) = const_add(a, b);
    let (d, borrow) = const_sub(&s, m);
    if carry || !borrow {
        d
    } else {
        s
    }
}

/// `a >> k` for `0 < k < 64`.
#[inline(always)]
fn shr(a: &Limbs, k: u32) -> Limbs {
    [(a[0] >> k) | (a[1] << (64 - k)), (a[1] >> k) | (a[2] << (64 - k)), (a[2] >> k) | (a[3] << (64 - k)), a[3] >> k]
}

/// Whether `a == 0`.
#[inline(always)]
pub(crate) const fn is_zero(a: &Limbs) -> bool {
    (a[0] | a[1] | a[2] | a[3]) == 0
}

/// Whether `a < b`.
#[inline(always)]
pub(crate) const fn lt(a: &Limbs, b: &Limbs) -> bool {
    const_sub(a, b).1
}

/// A big-endian 32-byte integer as limbs.
#[inline]
pub(crate) fn from_be_bytes(bytes: &[u8; 32]) -> Limbs {
    let mut out = [0u64; 4];
    for (i, chunk) in bytes.chunks_exact(8).enumerate() {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        out[3 - i] = u64::from_be_bytes(w);
    }
    out
}

/// Limbs as a big-endian 32-byte integer.
#[cfg(test)]
pub(crate) fn to_be_bytes(a: &Limbs) -> [u8; 32] {
    let mut out = [0u8; 32];
    for i in 0..4 {
        out[8 * i..8 * i + 8].copy_from_slice(&a[3 - i].to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // n of P-256; -n^-1 mod 2^64 is a published constant of every P-256 implementation.
    const N: Modulus = Modulus::new([0xf3b9cac2fc632551, 0xbce6faada7179e84, 0xffffffffffffffff, 0xffffffff00000000]);
    const P: Modulus = Modulus::new([0xffffffffffffffff, 0x00000000ffffffff, 0, 0xffffffff00000001]);

    #[test]
    fn montgomery_constants_match_the_published_ones() {
        assert_eq!(N.m0inv, 0xccd1c8aaee00bc4f);
        assert_eq!(P.m0inv, 1);
        // R mod p = 2^256 - p.
        assert_eq!(P.one, [1, 0xffffffff00000000, 0xffffffffffffffff, 0xfffffffe]);
    }

    #[test]
    fn square_equals_mul_and_inverse_inverts() {
        let mut x: Limbs = [0x0123456789abcdef, 0xfedcba9876543210, 0x0f1e2d3c4b5a6978, 0x7766554433221100];
        for _ in 0..200 {
            for m in [&P, &N] {
                assert_eq!(m.square(&x), m.mul(&x, &x));
                let inv = m.invert(&x);
                assert_eq!(m.mul(&x, &inv), m.one);
                let plain = m.leave_mont(&x);
                assert_eq!(m.invert_vartime(&plain), inv, "binary Euclid agrees with Fermat");
                assert_eq!(m.leave_mont(&m.to_mont(&x)), x);
                assert_eq!(m.add(&m.sub(&x, &m.one), &m.one), x);
                assert!(is_zero(&m.add(&x, &m.neg(&x))));
            }
            x = P.mul(&x, &[0x9e3779b97f4a7c15, 3, 5, 7]);
        }
    }

    #[test]
    fn batch_invert_skips_zeros() {
        let mut v = vec![[5, 0, 0, 0], [0; 4], [7, 1, 0, 9]];
        let want: Vec<Limbs> = v.iter().map(|x| if is_zero(x) { *x } else { N.invert(x) }).collect();
        N.batch_invert(&mut v);
        assert_eq!(v, want);
    }

    #[test]
    fn byte_order_round_trips() {
        let mut b = [0u8; 32];
        for (i, x) in b.iter_mut().enumerate() {
            *x = i as u8;
        }
        assert_eq!(to_be_bytes(&from_be_bytes(&b)), b);
        assert_eq!(from_be_bytes(&b)[0], 0x18191a1b1c1d1e1f);
    }
}
