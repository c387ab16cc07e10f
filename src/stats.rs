//! Streaming statistics over the logical tensor, computed in one pass.
//!
//! The statistics section describes the **logical tensor**: every one of its
//! `N = product(shape)` elements, the implicit zeros included. The stored
//! values are pushed one by one, in stream order; nothing but a fixed block
//! of 1024 values is held in memory.
//!
//! # Method
//! Values are gathered into blocks of [`BLOCK`] values, shifted by the first
//! value seen (so that means stay small and precise). Each full block is
//! summarised by the corrected two-pass algorithm (mean, then the sum of
//! squared deviations with its first-order rounding correction), and block
//! summaries are merged with Chan's parallel formula. At the end the stored
//! values are combined with `N - nnz` zeros the same way. This keeps the
//! hot path to a store and a compare, needs no division per value, and stays
//! accurate for billions of values far from zero (1e9 ± small noise).
//! The result depends only on the values and their order: the same stream
//! gives the same bits.
//!
//! # Definitions and edge cases
//! - `N` can exceed `u64` (rank up to 64): see [`logical_len`]. It is used as
//!   an `f64` (possibly `inf`) for ratios and as an exact `u128`, when it
//!   fits, to know whether implicit zeros exist (`nnz < N`).
//! - `sparsity_ratio = (N - nnz) / N`, exactly 0 when every element is stored.
//! - `value_min / value_max / value_abs_max` include 0 when `nnz < N`.
//!   With no stored value and `N > 0` they are all 0, as are mean and stddev.
//! - `value_mean = sum / N`; `value_stddev` is the population standard
//!   deviation over the `N` elements. When `N` is so large that the result
//!   underflows (e.g. 64 dimensions of 2^63, `N` = `inf` as f64) both are 0,
//!   the correctly rounded value.
//! - **NaN**: `has_nan` is set and both `VALUE_RANGE_VALID` and
//!   `VALUE_STATS_VALID` are cleared (those fields are written as 0), so the
//!   section never carries a NaN.
//! - **Infinity** (and no NaN): `has_inf` is set; min / max / abs-max are
//!   well defined (they may be ±inf) and stay valid; `VALUE_STATS_VALID` is
//!   cleared, since mean and stddev are not finite. The same happens when
//!   finite values overflow the mean or variance (values near `f64::MAX`).
//! - **`N = 0`** (a zero extent): there are no elements, so nothing can be
//!   stored; only `NNZ_VALID` (nnz = 0) and `NAN_INF_VALID` (both false) are
//!   set. A ratio or a range over no elements is undefined.
//! - Integer values enter as `f64` (rounded beyond 2^53).
//! - N:M sparsity is never computed.

use crate::hurray::Statistics;
use crate::hurray::statistics::{
    NAN_INF_VALID, NNZ_VALID, SPARSITY_VALID, VALUE_RANGE_VALID, VALUE_STATS_VALID,
};

/// Values summarised together; small enough to stay in L1 cache.
pub const BLOCK: usize = 1024;

/// Number of elements of a tensor of `shape`: `(approximate f64, exact u128)`.
///
/// The `f64` is the product rounded at each step; it is `inf` when the product
/// exceeds `f64::MAX` (e.g. 64 dimensions of 2^63). The `u128` is the exact
/// product, or `None` when it does not fit a `u128`. A zero extent gives 0
/// in both. An empty shape (rank 0) gives 1.
pub fn logical_len(shape: &[u64]) -> (f64, Option<u128>) {
    let approx = shape.iter().fold(1.0f64, |acc, &d| acc * d as f64);
    // A zero anywhere makes the product 0, even when a prefix overflowed.
    let exact = if shape.contains(&0) {
        Some(0)
    } else {
        shape
            .iter()
            .try_fold(1u128, |acc, &d| acc.checked_mul(u128::from(d)))
    };
    let approx = if exact == Some(0) { 0.0 } else { approx };
    (approx, exact)
}

/// Summary of a group of stored values (count, mean, sum of squared
/// deviations, range, NaN / inf flags).
#[derive(Clone, Copy, Debug)]
struct Partial {
    n: u64,
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
    abs_max: f64,
    nan: bool,
    inf: bool,
}

impl Partial {
    const EMPTY: Partial = Partial {
        n: 0,
        mean: 0.0,
        m2: 0.0,
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        abs_max: 0.0,
        nan: false,
        inf: false,
    };

    /// Corrected two-pass summary of one block (Chan, Golub & LeVeque): the
    /// second pass removes the first-order error of the first pass's mean.
    /// Moments are of `v - shift` (the range is of `v`): shifting by a value
    /// near the data keeps the means small, so their rounding does not
    /// swamp a small spread around a large offset.
    fn of_block(vals: &[f64], shift: f64) -> Partial {
        if vals.is_empty() {
            return Partial::EMPTY;
        }
        let n = vals.len() as f64;
        let mut sum = 0.0;
        let mut min = f64::INFINITY;
        let mut max = f64::NEG_INFINITY;
        let mut abs_max = 0.0f64;
        let mut nan = false;
        let mut inf = false;
        for &v in vals {
            sum += v - shift;
            // `v < min` is false for NaN: NaN never enters the range (and
            // the range is dropped anyway when NaN is present).
            min = if v < min { v } else { min };
            max = if v > max { v } else { max };
            let a = v.abs();
            abs_max = if a > abs_max { a } else { abs_max };
            nan |= v.is_nan();
            inf |= v.is_infinite();
        }
        let mean0 = sum / n;
        let mut s1 = 0.0;
        let mut s2 = 0.0;
        for &v in vals {
            let d = (v - shift) - mean0;
            s1 += d;
            s2 += d * d;
        }
        let mean = mean0 + s1 / n;
        let m2 = (s2 - s1 * s1 / n).max(0.0);
        Partial {
            n: vals.len() as u64,
            mean,
            m2,
            min,
            max,
            abs_max,
            nan,
            inf,
        }
    }

    /// Chan's parallel combination of two summaries.
    fn combine(a: Partial, b: Partial) -> Partial {
        if a.n == 0 {
            return b;
        }
        if b.n == 0 {
            return a;
        }
        let n = a.n + b.n;
        let (na, nb, nf) = (a.n as f64, b.n as f64, n as f64);
        let delta = b.mean - a.mean;
        let mean = a.mean + delta * (nb / nf);
        let m2 = a.m2 + b.m2 + delta * delta * (na * (nb / nf));
        Partial {
            n,
            mean,
            m2,
            min: if b.min < a.min { b.min } else { a.min },
            max: if b.max > a.max { b.max } else { a.max },
            abs_max: if b.abs_max > a.abs_max {
                b.abs_max
            } else {
                a.abs_max
            },
            nan: a.nan | b.nan,
            inf: a.inf | b.inf,
        }
    }
}

/// Accumulates the statistics section of one tensor over its stored values.
///
/// Memory is fixed (one block of [`BLOCK`] `f64`), whatever the count.
#[derive(Clone, Debug)]
pub struct StatsAccumulator {
    n_f64: f64,
    n_exact: Option<u128>,
    done: Partial,
    block: Vec<f64>,
    /// Subtracted from every value for the moments: the first value seen
    /// (0 if it is not finite), fixed once the first block is folded.
    shift: Option<f64>,
    /// Only nnz, sparsity and NaN / infinity are told (complex values:
    /// no order, so no range; see [`crate::Value::stat_f64`]).
    no_range: bool,
}

impl StatsAccumulator {
    /// An accumulator for a tensor of `shape`.
    pub fn new(shape: &[u64]) -> StatsAccumulator {
        let (n_f64, n_exact) = logical_len(shape);
        StatsAccumulator {
            n_f64,
            n_exact,
            done: Partial::EMPTY,
            block: Vec::with_capacity(BLOCK),
            shift: None,
            no_range: false,
        }
    }

    /// This accumulator, telling no value range and no moments.
    pub fn without_range(mut self) -> StatsAccumulator {
        self.no_range = true;
        self
    }

    /// Add one stored value (in stream order).
    #[inline]
    pub fn push(&mut self, v: f64) {
        self.block.push(v);
        if self.block.len() == BLOCK {
            self.fold_block();
        }
    }

    /// Add stored values in stream order, a block at a time (the same
    /// result as a [`StatsAccumulator::push`] each).
    #[inline]
    pub(crate) fn extend(&mut self, mut vals: impl Iterator<Item = f64>) {
        loop {
            let room = BLOCK - self.block.len();
            self.block.extend(vals.by_ref().take(room));
            if self.block.len() < BLOCK {
                return;
            }
            self.fold_block();
        }
    }

    #[cold]
    fn fold_block(&mut self) {
        let shift = self.shift();
        self.shift = Some(shift);
        self.done = Partial::combine(self.done, Partial::of_block(&self.block, shift));
        self.block.clear();
    }

    fn shift(&self) -> f64 {
        self.shift.unwrap_or_else(|| match self.block.first() {
            Some(&v) if v.is_finite() => v,
            _ => 0.0,
        })
    }

    /// Bytes of memory held (fixed).
    pub fn buffer_bytes(&self) -> usize {
        self.block.capacity() * std::mem::size_of::<f64>()
    }

    /// The statistics section for the values pushed so far.
    pub fn finish(&self) -> Statistics {
        let shift = self.shift();
        let s = Partial::combine(self.done, Partial::of_block(&self.block, shift));
        let nnz = s.n;
        let mut st = Statistics {
            computed_mask: NNZ_VALID | NAN_INF_VALID,
            nnz,
            has_nan: s.nan,
            has_inf: s.inf,
            ..Statistics::default()
        };
        if self.n_exact == Some(0) {
            // No elements: ratio, range and moments are undefined.
            return st;
        }
        let n = self.n_f64;
        // Implicit zeros exist iff nnz < N; N beyond u128 is beyond any nnz.
        let has_zeros = self.n_exact.is_none_or(|ne| u128::from(nnz) < ne);
        // Fraction of implicit zeros, computed from the exact count when known.
        let zeros_ratio = match self.n_exact {
            Some(ne) => (ne - u128::from(nnz).min(ne)) as f64 / n,
            None => 1.0 - nnz as f64 / n,
        };
        st.sparsity_ratio = zeros_ratio;
        st.computed_mask |= SPARSITY_VALID;
        if s.nan || self.no_range {
            return st;
        }
        let (mut min, mut max, mut abs_max) = if nnz == 0 {
            (0.0, 0.0, 0.0)
        } else {
            (s.min, s.max, s.abs_max)
        };
        if has_zeros {
            min = if 0.0 < min { 0.0 } else { min };
            max = if 0.0 > max { 0.0 } else { max };
            abs_max = if 0.0 > abs_max { 0.0 } else { abs_max };
        }
        st.value_min = min;
        st.value_max = max;
        st.value_abs_max = abs_max;
        st.computed_mask |= VALUE_RANGE_VALID;
        if s.inf {
            return st;
        }
        // Combine the stored values with (N - nnz) zeros (Chan): with
        // p = nnz / N and q = zeros / N,
        //   mean = mean_s * p,   var = m2_s / N + mean_s^2 * p * q.
        let (mean, var) = if nnz == 0 {
            (0.0, 0.0)
        } else if n.is_infinite() {
            // sum / N and m2 / N underflow to 0 for N beyond f64::MAX.
            (0.0, 0.0)
        } else {
            let p = if has_zeros { nnz as f64 / n } else { 1.0 };
            let q = if has_zeros { zeros_ratio } else { 0.0 };
            let mean_s = shift + s.mean;
            // sum / N rounds once at the end (exact means for integer data);
            // mean_s * p when the sum alone would overflow.
            let nf = nnz as f64;
            let sum = shift * nf + s.mean * nf;
            let mean = if sum.is_finite() { sum / n } else { mean_s * p };
            let var = s.m2 / n + (mean_s * p) * (mean_s * q);
            (mean, var.max(0.0))
        };
        let sd = var.sqrt();
        if mean.is_finite() && sd.is_finite() {
            // Normalise -0.0 so the section is canonical.
            st.value_mean = mean + 0.0;
            st.value_stddev = sd;
            st.computed_mask |= VALUE_STATS_VALID;
        }
        st
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_BUT_NM: u32 =
        NNZ_VALID | SPARSITY_VALID | VALUE_RANGE_VALID | VALUE_STATS_VALID | NAN_INF_VALID;

    fn acc(shape: &[u64], vals: &[f64]) -> Statistics {
        let mut a = StatsAccumulator::new(shape);
        for &v in vals {
            a.push(v);
        }
        a.finish()
    }

    #[test]
    fn logical_len_handles_overflow_and_zero() {
        assert_eq!(logical_len(&[4, 4]), (16.0, Some(16)));
        let (f, e) = logical_len(&[1 << 40, 1 << 40]);
        assert_eq!(f, 2f64.powi(80));
        assert_eq!(e, Some(1u128 << 80));
        let (f, e) = logical_len(&[1 << 40, 1 << 40, 3]);
        assert_eq!(e, Some(3u128 << 80));
        assert_eq!(f, 3.0 * 2f64.powi(80));
        let (f, e) = logical_len(&[1 << 63; 3]);
        assert_eq!(e, None);
        assert_eq!(f, 2f64.powi(189));
        let (f, e) = logical_len(&[1 << 63; 64]);
        assert_eq!(e, None);
        assert!(f.is_infinite());
        // A zero extent wins even after an overflowing prefix.
        let mut s = vec![1u64 << 63; 64];
        s.push(0);
        assert_eq!(logical_len(&s), (0.0, Some(0)));
    }

    #[test]
    fn worked_example_by_hand() {
        // [4,4] with 1.5, -0.5, 2.0: sum 3, mean 3/16, E[x^2] = (2.25+0.25+4)/16.
        let s = acc(&[4, 4], &[1.5, -0.5, 2.0]);
        assert_eq!(s.computed_mask, ALL_BUT_NM);
        assert_eq!(s.nnz, 3);
        assert_eq!(s.sparsity_ratio, 13.0 / 16.0);
        assert_eq!(
            (s.value_min, s.value_max, s.value_abs_max),
            (-0.5, 2.0, 2.0)
        );
        assert_eq!(s.value_mean, 0.1875);
        let var = 6.5 / 16.0 - 0.1875f64 * 0.1875;
        assert!((s.value_stddev - var.sqrt()).abs() < 1e-15, "{s:?}");
        assert!(!s.has_nan && !s.has_inf);
    }

    #[test]
    fn dense_tensor_has_no_implicit_zero() {
        let s = acc(&[3], &[1.0, 2.0, 3.0]);
        assert_eq!(s.sparsity_ratio, 0.0);
        assert_eq!((s.value_min, s.value_max), (1.0, 3.0));
        assert_eq!(s.value_mean, 2.0);
        assert!((s.value_stddev - (2.0f64 / 3.0).sqrt()).abs() < 1e-15);
        // All negative, sparse: max is the implicit 0.
        let s = acc(&[4], &[-1.0, -3.0]);
        assert_eq!(
            (s.value_min, s.value_max, s.value_abs_max),
            (-3.0, 0.0, 3.0)
        );
        assert_eq!(s.value_mean, -1.0);
    }

    #[test]
    fn empty_and_zero_extent() {
        let s = acc(&[5, 7], &[]);
        assert_eq!(s.computed_mask, ALL_BUT_NM);
        assert_eq!(s.sparsity_ratio, 1.0);
        assert_eq!(
            (s.value_min, s.value_max, s.value_mean, s.value_stddev),
            (0.0, 0.0, 0.0, 0.0)
        );
        let s = acc(&[5, 0], &[]);
        assert_eq!(s.computed_mask, NNZ_VALID | NAN_INF_VALID);
        assert_eq!(s.nnz, 0);
        assert_eq!(s.sparsity_ratio, 0.0);
    }

    #[test]
    fn nan_clears_range_and_moments() {
        let s = acc(&[10], &[1.0, f64::NAN, 2.0]);
        assert!(s.has_nan && !s.has_inf);
        assert_eq!(s.computed_mask, NNZ_VALID | SPARSITY_VALID | NAN_INF_VALID);
        for v in [
            s.value_min,
            s.value_max,
            s.value_abs_max,
            s.value_mean,
            s.value_stddev,
        ] {
            assert_eq!(v.to_bits(), 0);
        }
        // NaN and inf together: both flags.
        let s = acc(&[10], &[f64::INFINITY, f64::NAN]);
        assert!(s.has_nan && s.has_inf);
    }

    #[test]
    fn infinity_keeps_range_drops_moments() {
        let s = acc(&[10], &[1.0, f64::NEG_INFINITY, 2.0]);
        assert!(s.has_inf && !s.has_nan);
        assert_eq!(
            s.computed_mask,
            NNZ_VALID | SPARSITY_VALID | VALUE_RANGE_VALID | NAN_INF_VALID
        );
        assert_eq!(s.value_min, f64::NEG_INFINITY);
        assert_eq!(s.value_max, 2.0);
        assert_eq!(s.value_abs_max, f64::INFINITY);
        assert_eq!((s.value_mean, s.value_stddev), (0.0, 0.0));
        // Finite values whose variance overflows: moments dropped, range kept.
        let s = acc(&[2], &[f64::MAX, -f64::MAX]);
        assert!(!s.has_inf);
        assert_eq!(s.computed_mask & VALUE_STATS_VALID, 0);
        assert_ne!(s.computed_mask & VALUE_RANGE_VALID, 0);
    }

    #[test]
    fn overflowing_shapes() {
        // [2^40, 2^40, 3]: N = 3 * 2^80 exceeds u64.
        let s = acc(&[1 << 40, 1 << 40, 3], &[4.0, -2.0]);
        let n = 3.0 * 2f64.powi(80);
        assert_eq!(s.computed_mask, ALL_BUT_NM);
        assert_eq!(s.sparsity_ratio, 1.0 - 2.0 / n);
        assert_eq!(
            (s.value_min, s.value_max, s.value_abs_max),
            (-2.0, 4.0, 4.0)
        );
        assert_eq!(s.value_mean, 2.0 / n);
        let var = 20.0 / n - (2.0 / n) * (2.0 / n);
        assert!((s.value_stddev - var.sqrt()).abs() <= 1e-15 * var.sqrt());
        // 64 dimensions of 2^63: N is inf as f64 and beyond u128.
        let s = acc(&[1 << 63; 64], &[7.0]);
        assert_eq!(s.computed_mask, ALL_BUT_NM);
        assert_eq!(s.sparsity_ratio, 1.0);
        assert_eq!((s.value_min, s.value_max), (0.0, 7.0));
        assert_eq!((s.value_mean, s.value_stddev), (0.0, 0.0));
    }

    /// 1e7 values 1e9 + k/1024 (exact in f64), against an exact integer
    /// reference, both dense and with implicit zeros.
    #[test]
    fn numerically_sound_for_large_offset_values() {
        const COUNT: u64 = 10_000_000;
        let mut a_dense = StatsAccumulator::new(&[COUNT]);
        let mut a_sparse = StatsAccumulator::new(&[COUNT, 3]);
        // Exact sums of k and k^2, with x = C/1024 + k/1024, C = 1e9 * 1024.
        const C: i128 = 1_000_000_000 * 1024;
        let (mut k1, mut k2) = (0i128, 0i128);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..COUNT {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let k = (state % 2001) as i64 - 1000;
            let v = 1e9 + k as f64 / 1024.0;
            a_dense.push(v);
            a_sparse.push(v);
            k1 += k as i128;
            k2 += (k as i128) * (k as i128);
        }
        let check = |st: Statistics, n: i128| {
            // Shift by C (variance is shift invariant): stored y = k, the
            // z = n - m zeros y = -C. n^2 var * 1024^2 =
            // n K2 - K1^2 + m z C^2 + 2 K1 z C (only m z C^2 is rounded).
            let m = COUNT as i128;
            let z = n - m;
            let num = (n * k2 - k1 * k1 + 2 * k1 * z * C) as f64
                + (m * z) as f64 * (C as f64) * (C as f64);
            let var = num / (n as f64 * n as f64) / (1024.0 * 1024.0);
            let mean = (m * C + k1) as f64 / n as f64 / 1024.0;
            let rel_mean = (st.value_mean - mean).abs() / mean;
            let rel_sd = (st.value_stddev - var.sqrt()).abs() / var.sqrt();
            assert!(rel_mean < 1e-14, "mean {} vs {mean}", st.value_mean);
            assert!(rel_sd < 1e-12, "sd {} vs {}", st.value_stddev, var.sqrt());
        };
        check(a_dense.finish(), COUNT as i128);
        check(a_sparse.finish(), 3 * COUNT as i128);
    }

    #[test]
    fn deterministic_and_block_boundaries() {
        let vals: Vec<f64> = (0..5000)
            .map(|i| ((i * 7919) % 1000) as f64 * 0.1)
            .collect();
        for len in [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK, 5000] {
            let a = acc(&[10_000], &vals[..len]);
            let b = acc(&[10_000], &vals[..len]);
            assert_eq!(format!("{a:?}"), format!("{b:?}"));
            // Against a naive two-pass reference (values are small here).
            let n = 10_000.0;
            let sum: f64 = vals[..len].iter().sum();
            let mean = sum / n;
            let var = (vals[..len].iter().map(|v| (v - mean).powi(2)).sum::<f64>()
                + (n - len as f64) * mean * mean)
                / n;
            assert!((a.value_mean - mean).abs() <= 1e-12 * mean.abs().max(1e-300));
            assert!((a.value_stddev - var.sqrt()).abs() <= 1e-12 * var.sqrt().max(1e-300));
            assert_eq!(a.nnz, len as u64);
        }
    }
}
