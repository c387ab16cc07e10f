//! Exact summation of `f64` values with a single correct rounding at the end.
//!
//! [`ExactSum`] holds the *exact* sum of every value added to it, so the
//! rounded result (`round_f64`, `round_f32`, `round_f16`, `round_bf16`) does
//! not depend on the order of the contributions, on how they were split into
//! groups, or on where partial sums were spilled, encoded and merged.
//!
//! # Representation
//!
//! The finite part is a *non-overlapping expansion* (Shewchuk): finite,
//! non-zero partials in increasing magnitude where the lowest set bit of each
//! partial is above the highest set bit of the one below it. Up to four
//! partials are stored inline (no allocation); longer expansions spill to a
//! `Vec`. Adding a value is a Grow-Expansion pass built from the branch-free
//! 2Sum with zero error terms dropped; adding to a sum of 0 or 1 partial is a
//! single inlined 2Sum.
//!
//! # Semantics
//!
//! * **NaN / infinities.** NaN if any NaN was added, or if both `+inf` and
//!   `-inf` were added; `±inf` if only infinities of one sign were added
//!   (finite values then do not matter and are discarded). This state is kept
//!   by [`ExactSum::merge`] and by [`ExactSum::encode`]/[`ExactSum::decode`].
//! * **Overflow of the exact sum.** If the exact sum of finite values is
//!   beyond the target range it rounds to `±inf` following IEEE 754
//!   round-to-nearest (a magnitude `>= MAX + ulp(MAX)/2` rounds to infinity).
//!   Python's `math.fsum` raises `OverflowError` instead; we return infinity.
//! * **Intermediate overflow** (two huge finite partials whose floating-point
//!   sum overflows although the exact sum is representable) never corrupts the
//!   result (CPython raises "intermediate overflow in fsum" for e.g.
//!   `[1.7e308, 1.7e308, -1.7e308]`; we return `1.7e308`): when a 2Sum
//!   produces a non-finite result from finite inputs, the
//!   accumulator switches to a *wide* representation, a 2240-bit two's
//!   complement fixed-point integer in units of 2^-1074 that holds every sum of
//!   up to 2^100 finite `f64` values exactly. The wide form is rare and slower;
//!   once wide, a sum stays wide. Rounding from it is exact.
//! * **Signed zeros.** IEEE round-to-nearest addition semantics: the sum is
//!   `-0.0` only if at least one value was added and every value added was
//!   `-0.0`; an empty sum, or an exactly cancelling one, is `+0.0`. A non-zero
//!   exact sum that underflows to zero in a narrower target keeps its sign.
//!   (CPython 3.11's `math.fsum([-0.0])` returns `+0.0`; here it is `-0.0`.)
//! * **Rounding.** Every `round_*` rounds the exact sum *once*
//!   (round-half-to-even) to the target type, with IEEE overflow and
//!   subnormals of the target. `round_f64` equals `math.fsum` whenever the
//!   latter does not raise (and apart from the `-0.0` case above). Narrow
//!   targets are rounded from the correctly rounded f64 `hi` plus the sign of
//!   the residual `exact - hi`, which decides only when `hi` is exactly a
//!   midpoint of the target (all target midpoints are f64 values), so there
//!   is no double rounding; the wide form rounds straight from the integer.
//!
//! `PartialEq` is structural: two sums with equal value may compare unequal
//! (e.g. a different number of partials after different addition orders).
//!
//! # Encoding (spill files)
//!
//! One header byte, then a payload:
//!
//! | bits of header | meaning |
//! |---|---|
//! | 0..=1 | special: 0 none, 1 `+inf`, 2 `-inf`, 3 NaN |
//! | 2 | zero state ANY: at least one value was added |
//! | 3 | zero state POS: a value other than `-0.0` was added |
//! | 4..=7 | `n`: 0..=13 = number of partials; 14 = partial count follows as LEB128 (must be >= 14); 15 = wide form |
//!
//! Partials follow as little-endian `f64` bits, smallest first. So a sum with
//! one partial costs 9 bytes, an empty/zero sum or a special value 1 byte. The
//! wide form is a byte `L` (1..=35) followed by `L` little-endian 64-bit limbs
//! (least significant first, sign-extended to 35 limbs).
//!
//! [`ExactSum::decode`] rejects: specials together with partials or a wide
//! payload, POS without ANY, partials/wide without POS, non-finite or zero
//! partials, partials that are not strictly non-overlapping and increasing,
//! non-canonical counts, and truncated input. It allocates at most what the
//! buffer's remaining length justifies.

use crate::codec::{read_u64, take_le_u64, write_u64};
#[cfg(any(test, feature = "internals"))]
use crate::float::{BF16, F16};
use crate::float::{FloatFormat, ilog2, scale2};

const SPECIAL_NONE: u8 = 0;
const SPECIAL_POS_INF: u8 = 1;
const SPECIAL_NEG_INF: u8 = 2;
const SPECIAL_NAN: u8 = 3;

/// At least one value was added.
const Z_ANY: u8 = 1;
/// A value other than `-0.0` was added.
const Z_POS: u8 = 2;

const NEG_ZERO_BITS: u64 = 0x8000_0000_0000_0000;

/// Number of 64-bit limbs of the wide fixed-point form.
const WIDE_LIMBS: usize = 35;

/// Partials kept inline before spilling to the heap.
const INLINE: usize = 4;

/// Small vector of partials: inline up to [`INLINE`], then on the heap.
#[derive(Clone, Debug, Default)]
struct Parts {
    /// Number of partials when not spilled.
    n: usize,
    inline: [f64; INLINE],
    /// When non-empty, holds all partials and `inline`/`n` are unused.
    heap: Vec<f64>,
}

impl PartialEq for Parts {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Parts {
    #[inline(always)]
    fn spilled(&self) -> bool {
        !self.heap.is_empty()
    }

    #[inline(always)]
    fn as_slice(&self) -> &[f64] {
        if self.spilled() {
            &self.heap
        } else {
            &self.inline[..self.n]
        }
    }

    #[inline(always)]
    fn len(&self) -> usize {
        if self.spilled() {
            self.heap.len()
        } else {
            self.n
        }
    }

    fn clear(&mut self) {
        self.n = 0;
        self.heap = Vec::new();
    }

    fn from_slice(xs: &[f64]) -> Parts {
        let mut p = Parts::default();
        if xs.len() <= INLINE {
            p.inline[..xs.len()].copy_from_slice(xs);
            p.n = xs.len();
        } else {
            p.heap = xs.to_vec();
        }
        p
    }
}

/// Exact sum of f64 values, as a non-overlapping expansion plus special-value state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExactSum {
    /// Finite non-zero partials, increasing magnitude, non-overlapping.
    parts: Parts,
    /// Wide fixed-point form, used after an intermediate overflow.
    wide: Option<Box<Wide>>,
    /// `SPECIAL_*`.
    special: u8,
    /// `Z_ANY | Z_POS` bits.
    zero: u8,
}

/// Error-free transformation: `s + e == a + b` exactly (absent overflow).
#[inline(always)]
pub(crate) fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, e)
}

/// Where Grow-Expansion stopped on an intermediate overflow: the exact
/// total is then `buf[..kept] + carry + buf[at..n]`.
pub(crate) struct GrowOverflow {
    pub(crate) kept: usize,
    pub(crate) at: usize,
    pub(crate) carry: f64,
}

/// Shewchuk's Grow-Expansion, the one copy: add `x` to the non-overlapping
/// expansion `buf[..n]` (smallest first) in place, keeping the non-zero
/// error terms at the front. Returns how many were kept and the new top
/// sum, which the caller appends when non-zero (it knows where room is).
#[inline(always)]
pub(crate) fn grow_expansion(
    buf: &mut [f64],
    n: usize,
    x: f64,
) -> Result<(usize, f64), GrowOverflow> {
    let mut q = x;
    let mut i = 0;
    for j in 0..n {
        let (s, e) = two_sum(q, buf[j]);
        if !(s.is_finite() && e.is_finite()) {
            return Err(GrowOverflow {
                kept: i,
                at: j,
                carry: q,
            });
        }
        if e != 0.0 {
            buf[i] = e;
            i += 1;
        }
        q = s;
    }
    Ok((i, q))
}

#[inline(always)]
fn zero_bits_of(x: f64) -> u8 {
    if x.to_bits() == NEG_ZERO_BITS {
        Z_ANY
    } else {
        Z_ANY | Z_POS
    }
}

fn combine_special(a: u8, b: u8) -> u8 {
    match (a, b) {
        (SPECIAL_NONE, s) | (s, SPECIAL_NONE) => s,
        (x, y) if x == y => x,
        _ => SPECIAL_NAN,
    }
}

fn special_of(x: f64) -> u8 {
    if x.is_nan() {
        SPECIAL_NAN
    } else if x > 0.0 {
        SPECIAL_POS_INF
    } else {
        SPECIAL_NEG_INF
    }
}

#[cold]
fn wide_of(a: &[f64], x: f64, b: &[f64]) -> Box<Wide> {
    let mut w = Box::<Wide>::default();
    for &q in a.iter().chain(core::iter::once(&x)).chain(b) {
        w.add_f64(q);
    }
    w
}

impl ExactSum {
    /// Empty sum (rounds to `+0.0`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sum holding the single value `x`.
    pub fn from_value(x: f64) -> Self {
        let mut s = Self::new();
        s.add(x);
        s
    }

    /// Adds `x` exactly.
    #[inline]
    pub fn add(&mut self, x: f64) {
        self.zero |= zero_bits_of(x);
        let p = &mut self.parts;
        if p.n <= 1 && !p.spilled() && self.special == SPECIAL_NONE && self.wide.is_none() {
            // 0 or 1 partial: one 2Sum (x + 0.0 is exact for a non-zero x).
            let a = if p.n == 1 { p.inline[0] } else { 0.0 };
            let (s, e) = two_sum(a, x);
            if s.is_finite() && e.is_finite() {
                // Keep the non-zero ones, smallest first (e != 0 implies s != 0).
                p.inline[0] = if e != 0.0 { e } else { s };
                p.inline[1] = s;
                p.n = usize::from(e != 0.0) + usize::from(s != 0.0);
                return;
            }
        }
        self.add_slow(x);
    }

    fn add_slow(&mut self, x: f64) {
        if !x.is_finite() {
            self.set_special(special_of(x));
            return;
        }
        if self.special != SPECIAL_NONE {
            return;
        }
        if let Some(w) = self.wide.as_mut() {
            w.add_f64(x);
            return;
        }
        self.grow(x);
    }

    fn set_special(&mut self, s: u8) {
        self.special = combine_special(self.special, s);
        if self.special != SPECIAL_NONE {
            self.parts.clear();
            self.wide = None;
        }
    }

    /// Grow-Expansion of the finite expansion by finite `x` (not wide, not
    /// special): 2Sum through the partials from the smallest, keeping
    /// non-zero error terms in place, then the final sum on top.
    fn grow(&mut self, x: f64) {
        let p = &mut self.parts;
        let spilled = p.spilled();
        let n = p.len();
        let buf: &mut [f64] = if spilled {
            &mut p.heap
        } else {
            &mut p.inline[..p.n]
        };
        let (i, x) = match grow_expansion(buf, n, x) {
            Ok(r) => r,
            Err(o) => {
                // Intermediate overflow: move the exact total to the wide form.
                let w = wide_of(&buf[..o.kept], o.carry, &buf[o.at..]);
                self.parts.clear();
                self.wide = Some(w);
                return;
            }
        };
        if spilled {
            p.heap.truncate(i);
            if x != 0.0 {
                p.heap.push(x);
            }
            if p.heap.is_empty() {
                p.n = 0;
            }
        } else {
            p.n = i;
            if x != 0.0 {
                if i < INLINE {
                    p.inline[i] = x;
                    p.n = i + 1;
                } else {
                    let mut v = Vec::with_capacity(2 * INLINE);
                    v.extend_from_slice(&p.inline[..i]);
                    v.push(x);
                    p.heap = v;
                }
            }
        }
    }

    fn to_wide(&self) -> Wide {
        if let Some(w) = &self.wide {
            return (**w).clone();
        }
        let mut w = Wide::default();
        for &p in self.parts.as_slice() {
            w.add_f64(p);
        }
        w
    }

    /// Exact union of two partial sums.
    pub fn merge(&mut self, other: &ExactSum) {
        self.zero |= other.zero;
        if other.special != SPECIAL_NONE {
            self.set_special(other.special);
        }
        if self.special != SPECIAL_NONE {
            return;
        }
        if self.wide.is_some() || other.wide.is_some() {
            let mut w = self.to_wide();
            w.add_wide(&other.to_wide());
            self.parts.clear();
            self.wide = Some(Box::new(w));
            return;
        }
        for &p in other.parts.as_slice() {
            match self.wide.as_mut() {
                Some(w) => w.add_f64(p),
                None => self.grow(p),
            }
        }
    }

    /// Number of finite partials (for the rare wide form: non-zero limbs).
    pub fn components(&self) -> usize {
        match &self.wide {
            Some(w) => w.limbs.iter().filter(|&&l| l != 0).count(),
            None => self.parts.len(),
        }
    }

    /// The finite partials, smallest first, when the sum is an ordinary
    /// expansion (no special value, not in the wide form).
    pub fn partials(&self) -> Option<&[f64]> {
        if self.special != SPECIAL_NONE || self.wide.is_some() {
            return None;
        }
        Some(self.parts.as_slice())
    }

    /// Exact sum is zero (false for NaN and infinities).
    pub fn is_zero(&self) -> bool {
        if self.special != SPECIAL_NONE {
            return false;
        }
        match &self.wide {
            Some(w) => w.limbs.iter().all(|&l| l == 0),
            None => self.parts.len() == 0,
        }
    }

    fn special_value(&self) -> Option<f64> {
        match self.special {
            SPECIAL_NONE => None,
            SPECIAL_POS_INF => Some(f64::INFINITY),
            SPECIAL_NEG_INF => Some(f64::NEG_INFINITY),
            _ => Some(f64::NAN),
        }
    }

    fn zero_value(&self) -> f64 {
        if self.zero == Z_ANY { -0.0 } else { 0.0 }
    }

    /// Rounds the finite expansion to f64; returns `(hi, sign of exact - hi)`,
    /// or `None` if an overflow makes the fast path unreliable.
    fn round_expansion(&self) -> Option<(f64, i8)> {
        round_parts(self.parts.as_slice())
    }

    /// Correctly rounded f64 together with the sign of the residual.
    fn round_f64_residual(&self) -> (f64, i8) {
        if let Some(v) = self.special_value() {
            return (v, 0);
        }
        let r = match &self.wide {
            None => self.round_expansion(),
            Some(_) => None,
        };
        let (hi, res) = match r {
            Some(r) => r,
            None => {
                let w = self.to_wide();
                return (w.round(&FloatFormat::F64), 0);
            }
        };
        if hi == 0.0 {
            (self.zero_value(), 0)
        } else {
            (hi, res)
        }
    }

    /// Correctly rounded (round-half-even) exact sum, equal to `math.fsum`.
    pub fn round_f64(&self) -> f64 {
        self.round_f64_residual().0
    }

    /// Exact sum rounded once (round-half-even) to the float format `fmt`,
    /// as the f64 holding that value (or ±inf).
    pub(crate) fn round_to(&self, fmt: &FloatFormat) -> f64 {
        if self.wide.is_some() {
            if let Some(v) = self.special_value() {
                return v;
            }
            let v = self.to_wide().round(fmt);
            return if v == 0.0 && self.is_zero() {
                self.zero_value()
            } else {
                v
            };
        }
        let (hi, res) = self.round_f64_residual();
        if !hi.is_finite() || hi == 0.0 {
            return hi;
        }
        fmt.round_f64(hi, res)
    }

    // The narrow types' roundings, by name, for the tests and the
    // benches; the assembler rounds through `round_to` and the element
    // type's format.

    /// Exact sum rounded once (round-half-even) to f32.
    #[cfg(any(test, feature = "internals"))]
    pub fn round_f32(&self) -> f32 {
        self.round_to(&FloatFormat::F32) as f32
    }

    /// Exact sum rounded once (round-half-even) to IEEE binary16.
    #[cfg(any(test, feature = "internals"))]
    pub fn round_f16(&self) -> F16 {
        F16::from_f64(self.round_to(&FloatFormat::F16))
    }

    /// Exact sum rounded once (round-half-even) to bfloat16.
    #[cfg(any(test, feature = "internals"))]
    pub fn round_bf16(&self) -> BF16 {
        BF16::from_f64(self.round_to(&FloatFormat::BF16))
    }
}

/// Exponent of the lowest set bit of a finite non-zero f64.
fn low_bit(x: f64) -> i32 {
    let bits = x.to_bits() & !NEG_ZERO_BITS;
    let be = (bits >> 52) as i32;
    let frac = bits & ((1u64 << 52) - 1);
    let m = if be == 0 { frac } else { frac | (1u64 << 52) };
    let q = if be == 0 { -1074 } else { be - 1075 };
    q + m.trailing_zeros() as i32
}

/// Wide two's complement fixed-point integer, units of 2^-1074.
#[derive(Clone, Debug, PartialEq)]
struct Wide {
    limbs: [u64; WIDE_LIMBS],
}

impl Default for Wide {
    fn default() -> Self {
        Wide {
            limbs: [0; WIDE_LIMBS],
        }
    }
}

impl Wide {
    fn add_f64(&mut self, x: f64) {
        if x == 0.0 || !x.is_finite() {
            return;
        }
        let bits = x.to_bits();
        let neg = bits >> 63 != 0;
        let be = ((bits >> 52) & 0x7ff) as usize;
        let frac = bits & ((1u64 << 52) - 1);
        let (m, shift) = if be == 0 {
            (frac, 0usize)
        } else {
            (frac | (1u64 << 52), be - 1)
        };
        let idx = shift / 64;
        let b = shift % 64;
        let lo = m << b;
        let hi = if b == 0 { 0 } else { m >> (64 - b) };
        let mut add = [0u64; WIDE_LIMBS];
        add[idx] = lo;
        if idx + 1 < WIDE_LIMBS {
            add[idx + 1] = hi;
        }
        if neg {
            self.sub_from(idx, idx + 2, &add);
        } else {
            self.add_from(idx, idx + 2, &add);
        }
    }

    fn add_from(&mut self, start: usize, end: usize, other: &[u64; WIDE_LIMBS]) {
        let mut carry = false;
        for (i, (limb, &o)) in self.limbs.iter_mut().zip(other).enumerate().skip(start) {
            let (s1, c1) = limb.overflowing_add(o);
            let (s2, c2) = s1.overflowing_add(carry as u64);
            *limb = s2;
            carry = c1 || c2;
            if !carry && i + 1 >= end {
                break;
            }
        }
    }

    fn sub_from(&mut self, start: usize, end: usize, other: &[u64; WIDE_LIMBS]) {
        let mut borrow = false;
        for (i, (limb, &o)) in self.limbs.iter_mut().zip(other).enumerate().skip(start) {
            let (s1, b1) = limb.overflowing_sub(o);
            let (s2, b2) = s1.overflowing_sub(borrow as u64);
            *limb = s2;
            borrow = b1 || b2;
            if !borrow && i + 1 >= end {
                break;
            }
        }
    }

    fn add_wide(&mut self, other: &Wide) {
        self.add_from(0, WIDE_LIMBS, &other.limbs);
    }

    fn is_negative(&self) -> bool {
        self.limbs[WIDE_LIMBS - 1] >> 63 != 0
    }

    fn bit(&self, i: usize) -> bool {
        (self.limbs[i / 64] >> (i % 64)) & 1 != 0
    }

    /// 64 bits starting at bit `start` (zero-filled above the top).
    fn window(&self, start: usize) -> u64 {
        let idx = start / 64;
        let b = start % 64;
        let lo = self.limbs.get(idx).copied().unwrap_or(0) >> b;
        let hi = if b == 0 {
            0
        } else {
            self.limbs.get(idx + 1).copied().unwrap_or(0) << (64 - b)
        };
        lo | hi
    }

    fn any_below(&self, n: usize) -> bool {
        let full = n / 64;
        if self.limbs[..full].iter().any(|&l| l != 0) {
            return true;
        }
        let b = n % 64;
        b != 0 && (self.limbs[full] & ((1u64 << b) - 1)) != 0
    }

    /// Correct rounding to `fmt`, as f64 (±inf on overflow, +0.0 for zero).
    fn round(&self, fmt: &FloatFormat) -> f64 {
        let neg = self.is_negative();
        let mut mag = self.clone();
        if neg {
            let zero = Wide::default();
            let mut t = zero;
            t.sub_from(0, WIDE_LIMBS, &mag.limbs);
            mag = t;
        }
        let top = match (0..WIDE_LIMBS).rev().find(|&i| mag.limbs[i] != 0) {
            None => return 0.0,
            Some(i) => i * 64 + 63 - mag.limbs[i].leading_zeros() as usize,
        };
        let min_shift = (fmt.min_quantum + 1074) as i64;
        let shift = (top as i64 + 1 - fmt.prec as i64).max(min_shift).max(0) as usize;
        let mut m = mag.window(shift);
        if shift > 0 && mag.bit(shift - 1) {
            let sticky = mag.any_below(shift - 1);
            if sticky || m & 1 == 1 {
                m += 1;
            }
        }
        // m <= 2^prec <= 2^53: exact in f64.
        let mut v = scale2(m as f64, shift as i32 - 1074);
        if v > fmt.max {
            v = f64::INFINITY;
        }
        if neg { -v } else { v }
    }
}

const HDR_N_VARINT: u8 = 14;
const HDR_N_WIDE: u8 = 15;

/// The header byte [`ExactSum::encode`] writes for `n` (< 14) finite,
/// non-zero partials: no special value, zero bits "some value, some value
/// that is not -0.0". Lets the compact accumulator write the same bytes.
pub(crate) const fn finite_header(n: u8) -> u8 {
    SPECIAL_NONE | ((Z_ANY | Z_POS) << 2) | (n << 4)
}

/// Minimal number of limbs that sign-extend back to `limbs`.
fn wide_len(limbs: &[u64; WIDE_LIMBS]) -> usize {
    let mut l = WIDE_LIMBS;
    while l > 1 {
        let top = limbs[l - 1];
        let below_neg = limbs[l - 2] >> 63 != 0;
        if (top == 0 && !below_neg) || (top == u64::MAX && below_neg) {
            l -= 1;
        } else {
            break;
        }
    }
    l
}

impl ExactSum {
    /// Appends a compact encoding (see the module docs for the layout).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let base = self.special | (self.zero << 2);
        if let Some(w) = &self.wide {
            out.push(base | (HDR_N_WIDE << 4));
            let l = wide_len(&w.limbs);
            out.push(l as u8);
            for limb in &w.limbs[..l] {
                out.extend_from_slice(&limb.to_le_bytes());
            }
            return;
        }
        let n = self.components();
        if n < HDR_N_VARINT as usize {
            out.push(base | ((n as u8) << 4));
        } else {
            out.push(base | (HDR_N_VARINT << 4));
            write_u64(n as u64, out);
        }
        if n > 0 {
            for p in self.parts.as_slice() {
                out.extend_from_slice(&p.to_bits().to_le_bytes());
            }
        }
    }

    /// Decodes one sum at `*pos`, advancing `pos`. `None` on malformed or
    /// non-canonical input (then `pos` is unspecified).
    pub fn decode(buf: &[u8], pos: &mut usize) -> Option<ExactSum> {
        let hdr = *buf.get(*pos)?;
        *pos += 1;
        let special = hdr & 3;
        let zero = (hdr >> 2) & 3;
        let nfield = hdr >> 4;
        if zero & Z_POS != 0 && zero & Z_ANY == 0 {
            return None;
        }
        let mut s = ExactSum {
            special,
            zero,
            ..ExactSum::default()
        };
        if nfield == HDR_N_WIDE {
            if special != SPECIAL_NONE || zero & Z_POS == 0 {
                return None;
            }
            let l = usize::from(*buf.get(*pos)?);
            *pos += 1;
            if l == 0 || l > WIDE_LIMBS || buf.len().saturating_sub(*pos) < 8 * l {
                return None;
            }
            let mut w = Wide::default();
            for i in 0..l {
                w.limbs[i] = take_le_u64(buf, pos)?;
            }
            if w.limbs[l - 1] >> 63 != 0 {
                for limb in &mut w.limbs[l..] {
                    *limb = u64::MAX;
                }
            }
            if wide_len(&w.limbs) != l {
                return None;
            }
            s.wide = Some(Box::new(w));
            return Some(s);
        }
        let n = if nfield == HDR_N_VARINT {
            let n = read_u64(buf, pos)?;
            if n < u64::from(HDR_N_VARINT) {
                return None;
            }
            n
        } else {
            u64::from(nfield)
        };
        if n == 0 {
            return Some(s);
        }
        if special != SPECIAL_NONE || zero & Z_POS == 0 {
            return None;
        }
        let avail = (buf.len().saturating_sub(*pos) / 8) as u64;
        if n > avail {
            return None;
        }
        let n = n as usize;
        let mut parts = Vec::with_capacity(n);
        let mut prev: Option<f64> = None;
        for _ in 0..n {
            let x = f64::from_bits(take_le_u64(buf, pos)?);
            if !x.is_finite() || x == 0.0 {
                return None;
            }
            if let Some(p) = prev {
                if ilog2(p) >= low_bit(x) {
                    return None;
                }
            }
            parts.push(x);
            prev = Some(x);
        }
        s.parts = Parts::from_slice(&parts);
        Some(s)
    }
}

/// Exact sum of a slice (fast path for the contributions to one coordinate).
///
/// Length 1 is a copy, length 2 a single 2Sum. Longer slices run a 2Sum of
/// the values with a second 2Sum accumulating the error terms; as long as the
/// error accumulation itself is exact (its own error is zero) the result is
/// the two-component expansion of `s + c`; otherwise it falls back to the
/// general expansion growth (for slices of up to 16 values: redone from the
/// start in a stack buffer; longer ones: for the rest of the slice).
pub fn sum_exact(xs: &[f64]) -> ExactSum {
    match xs {
        [] => return ExactSum::new(),
        [x] => return ExactSum::from_value(*x),
        &[a, b] => {
            let (hi, lo) = two_sum(a, b);
            if hi.is_finite() && lo.is_finite() {
                let parts = if lo != 0.0 {
                    Parts::from_slice(&[lo, hi])
                } else {
                    Parts::from_slice(&[hi][..usize::from(hi != 0.0)])
                };
                return ExactSum {
                    parts,
                    wide: None,
                    special: SPECIAL_NONE,
                    zero: zero_bits_of(a) | zero_bits_of(b),
                };
            }
            return sum_exact_general(xs);
        }
        _ => {}
    }
    let mut s = 0.0f64;
    let mut c = 0.0f64;
    let mut z = 0u8;
    for (k, &x) in xs.iter().enumerate() {
        z |= zero_bits_of(x);
        let (s1, e) = two_sum(s, x);
        let (c1, f) = two_sum(c, e);
        if f != 0.0 || !(s1.is_finite() && e.is_finite() && c1.is_finite() && f.is_finite()) {
            if xs.len() <= STACK_GROW {
                return sum_exact_stack(xs);
            }
            return sum_exact_slow(s, c, &xs[k..], z);
        }
        s = s1;
        c = c1;
    }
    let (hi, lo) = two_sum(s, c);
    if !(hi.is_finite() && lo.is_finite()) {
        return sum_exact_slow(s, c, &[], z);
    }
    ExactSum {
        parts: if lo != 0.0 {
            Parts::from_slice(&[lo, hi])
        } else {
            Parts::from_slice(&[hi][..usize::from(hi != 0.0)])
        },
        wide: None,
        special: SPECIAL_NONE,
        zero: z,
    }
}

/// Slices up to this length grow their expansion in a stack buffer.
const STACK_GROW: usize = 16;

/// Grow-Expansion over a stack buffer (an expansion of `n` values has at most
/// `n` partials), converted to an [`ExactSum`] once at the end.
fn sum_exact_stack(xs: &[f64]) -> ExactSum {
    let mut buf = [0.0f64; STACK_GROW];
    let mut n = 0;
    let mut z = 0u8;
    for &x in xs {
        z |= zero_bits_of(x);
        if !x.is_finite() {
            return sum_exact_general(xs);
        }
        let Ok((mut i, q)) = grow_expansion(&mut buf, n, x) else {
            return sum_exact_general(xs);
        };
        if q != 0.0 && i < STACK_GROW {
            buf[i] = q;
            i += 1;
        }
        n = i;
    }
    ExactSum {
        parts: Parts::from_slice(&buf[..n]),
        wide: None,
        special: SPECIAL_NONE,
        zero: z,
    }
}

#[cold]
fn sum_exact_general(xs: &[f64]) -> ExactSum {
    let mut r = ExactSum::new();
    for &x in xs {
        r.add(x);
    }
    r
}

#[cold]
fn sum_exact_slow(s: f64, c: f64, rest: &[f64], z: u8) -> ExactSum {
    let mut r = ExactSum::new();
    r.add(s);
    r.add(c);
    let mut z = z;
    for &x in rest {
        r.add(x);
        z |= zero_bits_of(x);
    }
    r.zero = z;
    r
}

/// The correct rounding of the exact sum of the non-overlapping parts `p`
/// (smallest first), with the sign of `exact - rounded`: from the top part
/// down until a sum is inexact, then the half-way correction from the part
/// below (as `math.fsum` does). `None` when an overflow makes it unreliable.
/// The one copy: the expansion and the in-memory kernel's lanes use it.
#[inline(always)]
pub(crate) fn round_parts(p: &[f64]) -> Option<(f64, i8)> {
    let n = p.len();
    if n <= 1 {
        return Some((p.first().copied().unwrap_or(0.0), 0));
    }
    let mut i = n - 1;
    let mut hi = p[i];
    let mut lo = 0.0;
    while i > 0 {
        i -= 1;
        let x = hi;
        let y = p[i];
        hi = x + y;
        if !hi.is_finite() {
            return None;
        }
        let yr = hi - x;
        lo = y - yr;
        if lo != 0.0 {
            break;
        }
    }
    if lo == 0.0 {
        return Some((hi, 0));
    }
    // Remaining partials p[..i] sum to less than |lo| in magnitude.
    if i > 0 && (lo < 0.0) == (p[i - 1] < 0.0) {
        // lo may be exactly half an ulp; the rest pushes past the tie.
        let y = lo * 2.0;
        let x = hi + y;
        if !x.is_finite() {
            return None;
        }
        let yr = x - hi;
        if y == yr {
            return Some((x, if lo < 0.0 { 1 } else { -1 }));
        }
    }
    Some((hi, if lo < 0.0 { -1 } else { 1 }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use num_bigint::{BigInt, BigUint, Sign};
    use proptest::prelude::*;

    // ---------- independent oracle: exact big integer in units of 2^-1074 ----------

    fn units(x: f64) -> BigInt {
        assert!(x.is_finite());
        let bits = x.to_bits();
        let be = (bits >> 52) & 0x7ff;
        let frac = bits & ((1u64 << 52) - 1);
        let (m, sh) = if be == 0 {
            (frac, 0)
        } else {
            (frac | (1 << 52), be - 1)
        };
        let v = BigInt::from(m) << sh;
        if bits >> 63 != 0 { -v } else { v }
    }

    fn oracle_sum(xs: &[f64]) -> BigInt {
        xs.iter().fold(BigInt::default(), |a, &x| a + units(x))
    }

    /// Oracle rounding of `n` (units of 2^-1074) to a format with precision
    /// `prec`, smallest quantum 2^`minq`, largest finite `max`.
    /// Returns `None` on overflow, else the rounded value in units.
    fn oracle_round(n: &BigInt, prec: u64, minq: i64, max: f64) -> Option<BigInt> {
        let a: BigUint = n.magnitude().clone();
        if a == BigUint::default() {
            return Some(BigInt::default());
        }
        let bits = a.bits() as i64;
        let shift = (bits - prec as i64).max(minq + 1074).max(0) as u64;
        let mut m = &a >> shift;
        if shift > 0 {
            let rem = &a - (&m << shift);
            let half = BigUint::from(1u32) << (shift - 1);
            let odd = m.bit(0);
            if rem > half || (rem == half && odd) {
                m += 1u32;
            }
        }
        let v = m << shift;
        if BigInt::from_biguint(Sign::Plus, v.clone()) > units(max) {
            return None;
        }
        Some(BigInt::from_biguint(n.sign(), v))
    }

    fn all_neg_zero(xs: &[f64]) -> bool {
        !xs.is_empty() && xs.iter().all(|x| x.to_bits() == NEG_ZERO_BITS)
    }

    /// Checks a rounded result `r` (widened to f64) against the oracle.
    fn check_rounded(xs: &[f64], r: f64, prec: u64, minq: i64, max: f64, what: &str) {
        let n = oracle_sum(xs);
        match oracle_round(&n, prec, minq, max) {
            None => {
                let inf = if n.sign() == Sign::Minus {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                };
                assert_eq!(r, inf, "{what}: overflow expected for {xs:?}");
            }
            Some(v) => {
                assert!(r.is_finite(), "{what}: got {r} for {xs:?}");
                assert_eq!(units(r), v, "{what}: value mismatch for {xs:?}");
                if n.sign() == Sign::NoSign {
                    let expect_neg = all_neg_zero(xs);
                    assert_eq!(r.is_sign_negative(), expect_neg, "{what}: zero sign {xs:?}");
                } else {
                    assert_eq!(
                        r.is_sign_negative(),
                        n.sign() == Sign::Minus,
                        "{what}: sign"
                    );
                }
            }
        }
    }

    fn check_all(xs: &[f64], s: &ExactSum) {
        check_rounded(xs, s.round_f64(), 53, -1074, f64::MAX, "f64");
        check_rounded(xs, s.round_f32() as f64, 24, -149, f32::MAX as f64, "f32");
        check_rounded(xs, s.round_f16().to_f64(), 11, -24, 65504.0, "f16");
        check_rounded(
            xs,
            s.round_bf16().to_f64(),
            8,
            -133,
            BF16::MAX.to_f64(),
            "bf16",
        );
    }

    fn by_add(xs: &[f64]) -> ExactSum {
        let mut s = ExactSum::new();
        for &x in xs {
            s.add(x);
        }
        s
    }

    fn roundtrip(s: &ExactSum) -> ExactSum {
        let mut buf = Vec::new();
        s.encode(&mut buf);
        let mut pos = 0;
        let d = ExactSum::decode(&buf, &mut pos).expect("decode");
        assert_eq!(pos, buf.len());
        d
    }

    fn bits_all(s: &ExactSum) -> (u64, u32, u16, u16) {
        (
            s.round_f64().to_bits(),
            s.round_f32().to_bits(),
            s.round_f16().to_bits(),
            s.round_bf16().to_bits(),
        )
    }

    fn fsum(xs: &[f64]) -> f64 {
        let a = by_add(xs).round_f64();
        let b = sum_exact(xs).round_f64();
        assert_eq!(a.to_bits(), b.to_bits(), "add vs sum_exact on {xs:?}");
        a
    }

    fn hexf(s: &str) -> f64 {
        // "[-]0x1.<hex>p<exp>"
        let (neg, s) = s.strip_prefix('-').map_or((false, s), |r| (true, r));
        let s = s.strip_prefix("0x").unwrap();
        let (mant, exp) = s.split_once('p').unwrap();
        let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
        let m = u64::from_str_radix(&format!("{int}{frac}"), 16).unwrap();
        let e: i32 = exp.parse::<i32>().unwrap() - 4 * frac.len() as i32;
        let v = scale2(m as f64, e);
        if neg { -v } else { v }
    }

    // ---------- known cases ----------

    #[test]
    fn exact_fsum_known_cases() {
        let p2 = |e: i32| scale2(1.0, e);
        let cases: Vec<(Vec<f64>, f64)> = vec![
            (vec![], 0.0),
            (vec![0.0], 0.0),
            (vec![1e100, 1.0, -1e100, 1e-100, 1e50, -1.0, -1e50], 1e-100),
            (vec![p2(53), -0.5, -p2(-54)], p2(53) - 1.0),
            (vec![p2(53), 1.0, p2(-100)], p2(53) + 2.0),
            (vec![p2(53) + 10.0, 1.0, p2(-100)], p2(53) + 12.0),
            (vec![p2(53) - 4.0, 0.5, p2(-54)], p2(53) - 3.0),
            (vec![1e16, 1.0, 1e-16], 10000000000000002.0),
            (
                vec![1e16 - 2.0, 1.0 - p2(-53), -(1e16 - 2.0), -(1.0 - p2(-53))],
                0.0,
            ),
            (
                (1..=1000).map(|n| 1.0 / n as f64).collect(),
                hexf("0x1.df11f45f4e61ap+2"),
            ),
            (
                (1..=1000).map(|n| (-1f64).powi(n) / n as f64).collect(),
                hexf("-0x1.62a2af1bd3624p-1"),
            ),
            (
                {
                    let mut v: Vec<f64> = (-1074..972)
                        .step_by(2)
                        .map(|n| p2(n) - p2(n + 50) + p2(n + 52))
                        .collect();
                    v.push(-p2(1022));
                    v
                },
                hexf("0x1.5555555555555p+970"),
            ),
            (vec![1e308, 1e308, -1e308], 1e308),
            (vec![1.7e308, 1.7e308, -1.7e308], 1.7e308),
            (vec![f64::MAX, f64::MAX, -f64::MAX, -f64::MAX, 1.0], 1.0),
            (vec![f64::MAX, f64::MAX, -f64::MAX], f64::MAX),
            (vec![f64::MAX, f64::MAX], f64::INFINITY),
            (vec![-f64::MAX, -f64::MAX, 1e300], f64::NEG_INFINITY),
            // exact tie at MAX + ulp/2 rounds to even (= overflow)
            (vec![f64::MAX, p2(970)], f64::INFINITY),
            (vec![f64::MAX, p2(970), -p2(-1074)], f64::MAX),
            (vec![f64::MAX, p2(970), p2(-1074)], f64::INFINITY),
            (vec![f64::MAX, p2(971), -p2(970), -p2(-1074)], f64::MAX),
            (vec![p2(-1074), p2(-1074), -p2(-1073)], 0.0),
            (vec![p2(-1074), 3.0 * p2(-1074)], p2(-1072)),
        ];
        for (xs, want) in &cases {
            let got = fsum(xs);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{xs:?}: got {got:e} want {want:e}"
            );
            check_all(xs, &by_add(xs));
            check_all(xs, &sum_exact(xs));
            check_all(xs, &roundtrip(&by_add(xs)));
        }
    }

    #[test]
    fn exact_intermediate_overflow_goes_wide_and_merges() {
        let xs = [1.7e308, 1.7e308, -1.7e308];
        let s = by_add(&xs);
        assert!(s.wide.is_some());
        assert_eq!(s.round_f64(), 1.7e308);
        assert_eq!(s.round_f32(), f32::INFINITY);
        let r = roundtrip(&s);
        assert_eq!(r, s);
        let mut m = ExactSum::from_value(-1.7e308);
        m.merge(&ExactSum::from_value(-1.7e308));
        m.merge(&s);
        assert_eq!(m.round_f64(), -1.7e308);
        // huge multiples of 2^1024 then cancellation
        let mut big = ExactSum::new();
        for _ in 0..1000 {
            big.add(f64::MAX);
        }
        for _ in 0..1000 {
            big.add(-f64::MAX);
        }
        big.add(-0.5);
        assert_eq!(big.round_f64(), -0.5);
        big.add(0.5);
        assert!(big.is_zero());
        assert_eq!(big.round_f64().to_bits(), 0);
        assert_eq!(big.round_f16().to_bits(), 0);
    }

    #[test]
    fn exact_signed_zeros() {
        let nz = |v: f64| v.to_bits() == NEG_ZERO_BITS;
        assert_eq!(ExactSum::new().round_f64().to_bits(), 0);
        assert!(nz(fsum(&[-0.0])));
        assert!(nz(fsum(&[-0.0, -0.0, -0.0])));
        assert_eq!(fsum(&[-0.0, 0.0]).to_bits(), 0);
        assert_eq!(fsum(&[0.0, -0.0]).to_bits(), 0);
        assert_eq!(fsum(&[-1.0, 1.0]).to_bits(), 0);
        assert_eq!(fsum(&[-1.0, -0.0, 1.0]).to_bits(), 0);
        let s = by_add(&[-0.0]);
        assert!(s.is_zero());
        assert!(nz(s.round_f32() as f64));
        assert!(s.round_f16().is_sign_negative() && s.round_bf16().is_sign_negative());
        let mut m = ExactSum::new();
        m.merge(&s);
        assert!(nz(m.round_f64()));
        m.merge(&ExactSum::from_value(0.0));
        assert_eq!(m.round_f64().to_bits(), 0);
        assert!(nz(roundtrip(&s).round_f64()));
        // non-zero exact sum underflowing a narrow type keeps its sign
        let t = by_add(&[-1e-300]);
        assert!(nz(t.round_f32() as f64));
        assert!(t.round_f16().is_sign_negative());
    }

    #[test]
    fn exact_specials() {
        let inf = f64::INFINITY;
        let nan = f64::NAN;
        let cases: Vec<(Vec<f64>, f64)> = vec![
            (vec![inf, 1.0, -1e308], inf),
            (vec![-inf, 1e308, 1e308], -inf),
            (vec![inf, inf], inf),
            (vec![inf, -inf], nan),
            (vec![nan, 1.0], nan),
            (vec![1.0, nan, inf], nan),
            (vec![f64::MAX, f64::MAX, -inf], -inf),
        ];
        for (xs, want) in cases {
            for s in [by_add(&xs), sum_exact(&xs)] {
                let r = roundtrip(&s);
                for t in [&s, &r] {
                    let got = t.round_f64();
                    if want.is_nan() {
                        assert!(got.is_nan() && t.round_f32().is_nan());
                        assert!(t.round_f16().is_nan() && t.round_bf16().is_nan());
                    } else {
                        assert_eq!(got, want, "{xs:?}");
                        assert_eq!(t.round_f32() as f64, want);
                        assert_eq!(t.round_f16().to_f64(), want);
                        assert_eq!(t.round_bf16().to_f64(), want);
                    }
                    assert!(!t.is_zero());
                    assert_eq!(t.components(), 0);
                }
            }
        }
        // through merges, in both orders
        let a = ExactSum::from_value(inf);
        let b = ExactSum::from_value(-inf);
        let c = by_add(&[1.0, 2.0]);
        let mut x = c.clone();
        x.merge(&a);
        assert_eq!(x.round_f64(), inf);
        x.merge(&c);
        assert_eq!(x.round_f64(), inf);
        let mut y = b.clone();
        y.merge(&x);
        assert!(y.round_f64().is_nan());
        let mut z = x.clone();
        z.merge(&b);
        assert!(z.round_f64().is_nan());
        assert_eq!(z, y);
        let mut buf = Vec::new();
        z.encode(&mut buf);
        assert_eq!(buf.len(), 1);
    }

    #[test]
    fn exact_double_rounding_traps() {
        let p2 = |e: i32| scale2(1.0, e);
        // f32: just above the midpoint between 1 and 1+2^-23
        let s = by_add(&[1.0, p2(-24), p2(-60)]);
        assert_eq!(s.round_f64(), 1.0 + p2(-24));
        assert_eq!((s.round_f64() as f32), 1.0); // the double-rounding answer
        assert_eq!(s.round_f32(), 1.0 + 2f32.powi(-23));
        // just below an odd midpoint: double rounding would go up to even
        let s = by_add(&[1.0 + p2(-23), p2(-24), -p2(-60)]);
        assert_eq!(s.round_f32(), 1.0 + 2f32.powi(-23));
        // exact tie: to even
        assert_eq!(
            by_add(&[1.0 + p2(-23), p2(-24)]).round_f32(),
            1.0 + 2f32.powi(-22)
        );
        assert_eq!(by_add(&[1.0, p2(-24)]).round_f32(), 1.0);
        // f16 and bf16
        let s = by_add(&[1.0, p2(-11), p2(-60)]);
        assert_eq!(s.round_f16(), F16::from_f64(1.0 + p2(-10)));
        let s = by_add(&[1.0, p2(-8), p2(-80)]);
        assert_eq!(s.round_bf16(), BF16::from_f64(1.0 + p2(-7)));
        let s = by_add(&[1.0, p2(-8), -p2(-80)]);
        assert_eq!(s.round_bf16(), BF16::ONE);
        // f32 overflow threshold MAX + ulp/2 = 2^128 - 2^103
        let m = f32::MAX as f64;
        assert_eq!(by_add(&[m, p2(103)]).round_f32(), f32::INFINITY);
        assert_eq!(by_add(&[m, p2(103), -p2(-200)]).round_f32(), f32::MAX);
        assert_eq!(by_add(&[-m, -p2(103), p2(-200)]).round_f32(), f32::MIN);
        // f32 subnormal midpoint 2^-150
        assert_eq!(by_add(&[p2(-150)]).round_f32().to_bits(), 0);
        assert_eq!(by_add(&[p2(-150), p2(-300)]).round_f32().to_bits(), 1);
        assert_eq!(
            by_add(&[-p2(-150), -p2(-300)]).round_f32().to_bits(),
            0x8000_0001
        );
        assert_eq!(by_add(&[p2(-149), p2(-150)]).round_f32().to_bits(), 2);
        // f16: overflow threshold 65520, subnormal midpoint 2^-25
        assert_eq!(by_add(&[65520.0]).round_f16(), F16::INFINITY);
        assert_eq!(by_add(&[65520.0, -p2(-40)]).round_f16(), F16::MAX);
        assert_eq!(by_add(&[p2(-25), p2(-70)]).round_f16().to_bits(), 1);
        assert_eq!(by_add(&[p2(-25)]).round_f16().to_bits(), 0);
    }

    #[test]
    fn exact_half_from_f64_rounding_probe() {
        // Our narrow rounding never relies on half's rounding (it passes an
        // exactly representable f64), but verify half round-trips exactly.
        for b in 0..=u16::MAX {
            let h = F16::from_bits(b);
            if h.is_finite() {
                assert_eq!(F16::from_f64(h.to_f64()).to_bits(), b);
            }
            let g = BF16::from_bits(b);
            if g.is_finite() {
                assert_eq!(BF16::from_f64(g.to_f64()).to_bits(), b);
            }
        }
    }

    #[test]
    fn exact_encoding_sizes_and_rejects() {
        let mut buf = Vec::new();
        ExactSum::from_value(1.25).encode(&mut buf);
        assert_eq!(buf.len(), 9);
        buf.clear();
        ExactSum::new().encode(&mut buf);
        assert_eq!(buf.len(), 1);
        let good = by_add(&[1.0, 1e-30]);
        buf.clear();
        good.encode(&mut buf);
        assert_eq!(buf.len(), 17);
        let dec = |b: &[u8]| {
            let mut p = 0;
            ExactSum::decode(b, &mut p)
        };
        assert!(dec(&buf).is_some());
        // truncations
        for l in 0..buf.len() {
            assert!(dec(&buf[..l]).is_none(), "truncated {l}");
        }
        let one = |hdr: u8, xs: &[f64]| {
            let mut b = vec![hdr];
            for x in xs {
                b.extend_from_slice(&x.to_bits().to_le_bytes());
            }
            b
        };
        let pos = Z_ANY | Z_POS;
        let h = |n: u8, special: u8, zero: u8| special | (zero << 2) | (n << 4);
        assert!(dec(&one(h(1, 0, pos), &[1.0])).is_some());
        assert!(dec(&one(h(1, 0, pos), &[f64::NAN])).is_none());
        assert!(dec(&one(h(1, 0, pos), &[f64::INFINITY])).is_none());
        assert!(dec(&one(h(1, 0, pos), &[0.0])).is_none());
        assert!(dec(&one(h(1, 0, Z_ANY), &[1.0])).is_none());
        assert!(dec(&one(h(0, 0, Z_POS), &[])).is_none());
        assert!(dec(&one(h(1, SPECIAL_NAN, pos), &[1.0])).is_none());
        assert!(dec(&one(h(2, 0, pos), &[1.0, 1e-30])).is_none()); // decreasing
        assert!(dec(&one(h(2, 0, pos), &[1.0, 3.0])).is_none()); // overlapping
        assert!(dec(&one(h(2, 0, pos), &[1e-30, 1.0])).is_some());
        // varint count must be canonical and justified by the buffer
        assert!(dec(&[h(14, 0, pos), 3]).is_none());
        assert!(dec(&[h(14, 0, pos), 0xff, 0xff, 0xff, 0xff, 0x0f]).is_none());
        assert!(dec(&[h(14, 0, pos), 0x80, 0x00]).is_none());
        // wide: bad lengths, non-minimal
        assert!(dec(&[h(15, 0, pos), 0]).is_none());
        assert!(dec(&[h(15, 0, pos), 36]).is_none());
        let mut w = vec![h(15, 0, pos), 2];
        w.extend_from_slice(&5u64.to_le_bytes());
        w.extend_from_slice(&0u64.to_le_bytes());
        assert!(dec(&w).is_none());
        // a 14+ component sum round-trips through the varint count
        let mut big = ExactSum::new();
        for k in 0..20 {
            big.add(2f64.powi(60 * k - 600));
        }
        assert_eq!(big.components(), 20);
        assert_eq!(roundtrip(&big), big);
        // several encodings back to back
        buf.clear();
        big.encode(&mut buf);
        good.encode(&mut buf);
        let mut p = 0;
        assert_eq!(ExactSum::decode(&buf, &mut p).unwrap(), big);
        assert_eq!(ExactSum::decode(&buf, &mut p).unwrap(), good);
        assert_eq!(p, buf.len());
    }

    #[test]
    fn exact_single_component_does_not_allocate() {
        let mut s = ExactSum::new();
        for x in [1.0, 2.0, 0.5, -3.0, 1024.0] {
            s.add(x);
        }
        assert_eq!(s.components(), 1);
        assert_eq!(s.parts.heap.capacity(), 0);
        assert_eq!(sum_exact(&[1.0, 2.0, 4.0]).parts.heap.capacity(), 0);
        // up to INLINE components are inline
        let t = sum_exact(&[1.0, 1e-30, 3.0]);
        assert_eq!((t.components(), t.parts.heap.capacity()), (2, 0));
        let u = by_add(&[1.0, 1e-30, 3.0, 1e-30, 1e-60, 1e-90]);
        assert_eq!((u.components(), u.parts.heap.capacity()), (4, 0));
        let v = by_add(&[1.0, 1e-30, 1e-60, 1e-90, 1e-120]);
        assert_eq!(v.components(), 5);
        assert_eq!(roundtrip(&v), v);
    }

    // ---------- property tests ----------

    fn any_f64() -> impl Strategy<Value = f64> {
        let be = prop_oneof![
            4 => 0u64..2047,
            4 => 1000u64..1060,
            2 => 0u64..4,
            1 => 2040u64..2047,
            1 => 850u64..930, // near f32/bf16 subnormal range
            1 => 990u64..1040, // f16 range
        ];
        let frac = prop_oneof![
            2 => any::<u64>().prop_map(|f| f & ((1 << 52) - 1)),
            1 => (any::<u64>(), 30u32..52).prop_map(|(f, k)| (f << k) & ((1 << 52) - 1)),
        ];
        (any::<bool>(), be, frac)
            .prop_map(|(s, be, f)| f64::from_bits(((s as u64) << 63) | (be << 52) | f))
    }

    fn vec_f64() -> impl Strategy<Value = Vec<f64>> {
        prop_oneof![
            prop::collection::vec(any_f64(), 0..24),
            // cancellation-heavy: v, -v and a few extras, interleaved
            (
                prop::collection::vec(any_f64(), 0..12),
                prop::collection::vec(any_f64(), 0..4),
                any::<u64>()
            )
                .prop_map(|(v, extra, seed)| {
                    let mut xs: Vec<f64> = v.iter().copied().chain(v.iter().map(|x| -x)).collect();
                    xs.extend(extra);
                    shuffle(&mut xs, seed);
                    xs
                }),
            // a narrow-type midpoint (odd multiple of 2^e with few bits)
            // split over several terms, plus tiny perturbations
            (
                0u64..(1 << 12),
                -160i32..140,
                prop::collection::vec((any::<bool>(), 1u64..(1 << 53), 0i32..80), 0..3),
                any::<bool>(),
                any::<u64>()
            )
                .prop_map(|(k, e, tiny, neg, seed)| {
                    let m = scale2((2 * k + 1) as f64, e);
                    let m = if neg { -m } else { m };
                    let h = scale2(1.0, e + 3);
                    let mut xs = vec![m + h, -h];
                    for (sg, t, d) in tiny {
                        let v = scale2(t as f64, e - 60 - d);
                        xs.push(if sg { v } else { -v });
                    }
                    shuffle(&mut xs, seed);
                    xs
                }),
            // similar magnitudes (FE-like) with signed zeros sprinkled in
            (
                1.0f64..2.0,
                prop::collection::vec((-1.0f64..1.0, any::<bool>()), 1..10)
            )
                .prop_map(|(b, v)| v
                    .iter()
                    .map(|&(r, z)| if z && r < -0.8 { -0.0 } else { b * r })
                    .collect()),
        ]
    }

    fn rng(seed: &mut u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        *seed >> 33
    }

    fn shuffle(xs: &mut [f64], mut seed: u64) {
        for i in (1..xs.len()).rev() {
            let j = (rng(&mut seed) % (i as u64 + 1)) as usize;
            xs.swap(i, j);
        }
    }

    /// Random permutation, random groups, random per-group method, encode
    /// round trips, merged in a random tree shape.
    fn grouped(xs: &[f64], mut seed: u64) -> ExactSum {
        let mut v = xs.to_vec();
        shuffle(&mut v, rng(&mut seed));
        let mut parts: Vec<ExactSum> = Vec::new();
        let mut i = 0;
        while i < v.len() {
            let l = 1 + (rng(&mut seed) % 5) as usize;
            let g = &v[i..(i + l).min(v.len())];
            let s = if rng(&mut seed) % 2 == 0 {
                sum_exact(g)
            } else {
                by_add(g)
            };
            parts.push(if rng(&mut seed) % 2 == 0 {
                roundtrip(&s)
            } else {
                s
            });
            i += l;
        }
        if parts.is_empty() {
            return ExactSum::new();
        }
        while parts.len() > 1 {
            let a = (rng(&mut seed) % parts.len() as u64) as usize;
            let x = parts.swap_remove(a);
            let b = (rng(&mut seed) % parts.len() as u64) as usize;
            parts[b].merge(&x);
        }
        parts.pop().unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1500))]

        #[test]
        fn exact_prop_matches_oracle(xs in vec_f64()) {
            let a = by_add(&xs);
            check_all(&xs, &a);
            let b = sum_exact(&xs);
            check_all(&xs, &b);
            prop_assert_eq!(bits_all(&a), bits_all(&b));
            prop_assert_eq!(a.is_zero(), oracle_sum(&xs) == BigInt::default());
        }

        #[test]
        fn exact_prop_order_and_grouping_independent(xs in vec_f64(), seed in any::<u64>()) {
            let direct = bits_all(&by_add(&xs));
            for k in 0..3u64 {
                let g = grouped(&xs, seed.wrapping_add(k));
                prop_assert_eq!(bits_all(&g), direct);
                let r = roundtrip(&g);
                prop_assert_eq!(&r, &g);
                prop_assert_eq!(bits_all(&r), direct);
            }
        }

        #[test]
        fn exact_prop_decode_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..80)) {
            let mut p = 0;
            if let Some(s) = ExactSum::decode(&bytes, &mut p) {
                prop_assert!(p <= bytes.len());
                let mut out = Vec::new();
                s.encode(&mut out);
                prop_assert_eq!(&out[..], &bytes[..p]);
                let _ = bits_all(&s);
            }
        }
    }
}
