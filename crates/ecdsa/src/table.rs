//! Fixed-base tables: for a point P, `T[i][j − 1] = j · 2^(7i) · P` for 37 windows `i` and `j = 1..=64`, in affine
//! form. With the scalar recoded into 37 signed 7-bit digits in [−64, 64], `k · P` is the sum of one table entry
//! per window (negated for a negative digit): at most 37 mixed additions and no doublings, against ~256 doublings
//! and ~50 additions for a variable-base multiplication.
//!
//! Size: 37 × 64 affine points × 64 bytes = 151,552 bytes per table. Building one costs about 2,400 Jacobian
//! additions and one batched inversion (about a millisecond), which pays for itself after a few dozen
//! verifications with the key.

use crate::mont::Limbs;
use crate::point::{Affine, Jacobian};

/// Digit width in bits.
const W: usize = 7;
/// Windows covering a 256-bit scalar plus the recoding's final carry (37 × 7 = 259 ≥ 257 bits).
pub(crate) const WINDOWS: usize = 37;
/// Entries per window: the multiples 1..=2^(W−1).
const PER_WINDOW: usize = 1 << (W - 1);

/// Bytes of memory one table holds (the figure the cache's bound is computed from).
pub const TABLE_BYTES: usize = WINDOWS * PER_WINDOW * 64;

/// The precomputed multiples of one point, for fixed-base scalar multiplication.
pub(crate) struct Table {
    entries: Box<[Affine]>,
}

impl Table {
    /// Builds the table of `base`.
    pub(crate) fn new(base: &Affine) -> Table {
        let mut jac = Vec::with_capacity(WINDOWS * PER_WINDOW);
        // The window's base 2^(7i)·P, kept in Jacobian form while the multiples are summed.
        let mut window_base = Jacobian::from_affine(base);
        for _ in 0..WINDOWS {
            let mut multiple = window_base;
            jac.push(multiple);
            for _ in 1..PER_WINDOW {
                multiple = multiple.add(&window_base);
                jac.push(multiple);
            }
            // 2^7 · base = 2 · (64 · base).
            window_base = multiple.double();
        }
        // P has prime order n and every multiple here is j·2^(7i) with j·2^(7i) < n, so none is infinity.
        let entries = Jacobian::batch_to_affine(&jac).unwrap_or_default().into_boxed_slice();
        Table { entries }
    }

    /// Whether the table was built (false only if a multiple was infinity, impossible for a point of order n).
    pub(crate) fn is_complete(&self) -> bool {
        self.entries.len() == WINDOWS * PER_WINDOW
    }

    /// Adds `k · P` to `acc`, where `digits` is `k` recoded by [`recode`].
    #[inline]
    pub(crate) fn accumulate(&self, acc: &mut Jacobian, digits: &[i8; WINDOWS]) {
        for (window, &d) in digits.iter().enumerate() {
            if d == 0 {
                continue;
            }
            let entry = &self.entries[window * PER_WINDOW + usize::from(d.unsigned_abs()) - 1];
            *acc = if d > 0 { acc.add_affine(entry) } else { acc.add_affine(&entry.neg()) };
        }
    }
}

/// Recodes a scalar `k < 2^256` (plain form, not Montgomery) into signed digits `d_i ∈ [−64, 64]` with
/// `k = Σ d_i · 2^(7i)`.
pub(crate) fn recode(k: &Limbs) -> [i8; WINDOWS] {
    let mut digits = [0i8; WINDOWS];
    let mut carry = 0u64;
    for (i, digit) in digits.iter_mut().enumerate() {
        let bit = i * W;
        let limb = bit / 64;
        let shift = bit % 64;
        let mut v = if limb < 4 { k[limb] >> shift } else { 0 };
        if shift + W > 64 && limb + 1 < 4 {
            v |= k[limb + 1] << (64 - shift);
        }
        let v = (v & ((1 << W) - 1)) + carry;
        // v ≤ 128; above 64 it becomes negative with a carry into the next window.
        if v > PER_WINDOW as u64 {
            *digit = (v as i64 - (1 << W)) as i8;
            carry = 1;
        } else {
            *digit = v as i8;
            carry = 0;
        }
    }
    digits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recoding_sums_back_to_the_scalar() {
        for k in [[0u64; 4], [1, 0, 0, 0], [u64::MAX; 4], [0x40, 0, 0, 0], [0x41, 0, 0, 0x8000_0000_0000_0000]] {
            let digits = recode(&k);
            // Σ d_i 2^(7i) as a 320-bit two's-complement sum over five limbs.
            let mut acc = [0i128; 6];
            for (i, &d) in digits.iter().enumerate() {
                let bit = i * W;
                let v = i128::from(d) << (bit % 64);
                acc[bit / 64] += v;
            }
            let mut out = [0u64; 6];
            let mut carry = 0i128;
            for i in 0..6 {
                let t = acc[i] + carry;
                out[i] = t as u64;
                carry = t >> 64;
            }
            assert_eq!(&out[..4], &k[..], "digits {digits:?}");
            assert_eq!(out[4], 0);
            assert!(digits.iter().all(|d| (-64..=64).contains(d)));
        }
    }
}
