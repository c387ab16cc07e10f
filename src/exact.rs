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
//! partial is above the highest set bit of the one below it. The largest
//! partial is stored inline (`head`), the rest in a `Vec` that stays empty —
//! and unallocated — for the common one-component case. Adding a value is a
//! Grow-Expansion pass built from the branch-free 2Sum; a zero error term is
//! dropped, so most additions to a one-component sum never touch the `Vec`.
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
//!   result: when a 2Sum produces a non-finite result from finite inputs, the
//!   accumulator switches to a *wide* representation, a 2240-bit two's
//!   complement fixed-point integer in units of 2^-1074 that holds every sum of
//!   up to 2^100 finite `f64` values exactly. The wide form is rare and slower;
//!   once wide, a sum stays wide. Rounding from it is exact.
//! * **Signed zeros.** IEEE round-to-nearest addition semantics: the sum is
//!   `-0.0` only if at least one value was added and every value added was
//!   `-0.0`; an empty sum, or an exactly cancelling one, is `+0.0`. A non-zero
//!   exact sum that underflows to zero in a narrower target keeps its sign.
//! * **Rounding.** Every `round_*` rounds the exact sum *once*
//!   (round-half-to-even) to the target type, with IEEE overflow and
//!   subnormals of the target. `round_f64` equals `math.fsum` whenever the
//!   latter does not raise.
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

use half::{bf16, f16};

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

/// Exact sum of f64 values, as a non-overlapping expansion plus special-value state.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExactSum {
    /// Largest partial (0.0 iff there is no finite partial).
    head: f64,
    /// Lower partials, increasing magnitude, all non-zero and finite.
    low: Vec<f64>,
    /// Wide fixed-point form, used after an intermediate overflow.
    wide: Option<Box<Wide>>,
    /// `SPECIAL_*`.
    special: u8,
    /// `Z_ANY | Z_POS` bits.
    zero: u8,
}

/// Error-free transformation: `s + e == a + b` exactly (absent overflow).
#[inline(always)]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    let e = (a - (s - bb)) + (b - bb);
    (s, e)
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
        if self.special == SPECIAL_NONE && self.wide.is_none() && self.low.is_empty() {
            let (s, e) = two_sum(self.head, x);
            if s.is_finite() && e.is_finite() {
                self.head = s;
                if e != 0.0 {
                    self.low.push(e);
                }
                return;
            }
        }
        self.add_slow(x);
    }

    #[cold]
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
            self.head = 0.0;
            self.low = Vec::new();
            self.wide = None;
        }
    }

    /// Grow-Expansion of the finite expansion by finite `x` (not wide, not special).
    fn grow(&mut self, mut x: f64) {
        let n = self.low.len();
        let mut i = 0;
        for j in 0..=n {
            let y = if j < n { self.low[j] } else { self.head };
            let (s, e) = two_sum(x, y);
            if !(s.is_finite() && e.is_finite()) {
                // Intermediate overflow: exact total is low[..i] + x + y + rest.
                let mut w = Box::<Wide>::default();
                for &p in &self.low[..i] {
                    w.add_f64(p);
                }
                w.add_f64(x);
                w.add_f64(y);
                if j < n {
                    for &p in &self.low[j + 1..] {
                        w.add_f64(p);
                    }
                    w.add_f64(self.head);
                }
                self.low = Vec::new();
                self.head = 0.0;
                self.wide = Some(w);
                return;
            }
            if e != 0.0 {
                if i < n {
                    self.low[i] = e;
                } else {
                    self.low.push(e);
                }
                i += 1;
            }
            x = s;
        }
        self.low.truncate(i);
        self.head = x;
        if self.head == 0.0 {
            self.head = self.low.pop().unwrap_or(0.0);
        }
    }

    fn to_wide(&self) -> Wide {
        if let Some(w) = &self.wide {
            return (**w).clone();
        }
        let mut w = Wide::default();
        for &p in &self.low {
            w.add_f64(p);
        }
        w.add_f64(self.head);
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
            self.head = 0.0;
            self.low = Vec::new();
            self.wide = Some(Box::new(w));
            return;
        }
        for &p in other.low.iter().chain(core::iter::once(&other.head)) {
            if p == 0.0 {
                continue;
            }
            match self.wide.as_mut() {
                Some(w) => w.add_f64(p),
                None => self.grow(p),
            }
        }
    }

    /// Number of finite partials (for the rare wide form: non-zero limbs).
    pub fn components(&self) -> usize {
        if let Some(w) = &self.wide {
            return w.limbs.iter().filter(|&&l| l != 0).count();
        }
        if self.head == 0.0 {
            0
        } else {
            1 + self.low.len()
        }
    }

    /// Exact sum is zero (false for NaN and infinities).
    pub fn is_zero(&self) -> bool {
        if self.special != SPECIAL_NONE {
            return false;
        }
        match &self.wide {
            Some(w) => w.limbs.iter().all(|&l| l == 0),
            None => self.head == 0.0,
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
        if self.zero == Z_ANY {
            -0.0
        } else {
            0.0
        }
    }

    /// Rounds the finite expansion to f64; returns `(hi, sign of exact - hi)`,
    /// or `None` if an overflow makes the fast path unreliable.
    fn round_expansion(&self) -> Option<(f64, i8)> {
        let n = self.low.len();
        if n == 0 {
            return Some((self.head, 0));
        }
        let mut hi = self.head;
        let mut lo = 0.0;
        let mut i = n;
        while i > 0 {
            i -= 1;
            let x = hi;
            let y = self.low[i];
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
        // Remaining partials low[..i] are strictly smaller than |lo|.
        if i > 0 && (lo < 0.0) == (self.low[i - 1] < 0.0) {
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
                return (w.round(&F64_FMT), 0);
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

    fn round_narrow(&self, fmt: &Format) -> f64 {
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
        round_f64_to(hi, res, fmt)
    }

    /// Exact sum rounded once (round-half-even) to f32.
    pub fn round_f32(&self) -> f32 {
        self.round_narrow(&F32_FMT) as f32
    }

    /// Exact sum rounded once (round-half-even) to IEEE binary16.
    pub fn round_f16(&self) -> f16 {
        f16::from_f64(self.round_narrow(&F16_FMT))
    }

    /// Exact sum rounded once (round-half-even) to bfloat16.
    pub fn round_bf16(&self) -> bf16 {
        bf16::from_f64(self.round_narrow(&BF16_FMT))
    }
}

/// A binary floating-point target format.
struct Format {
    /// Precision in bits (including the implicit bit).
    prec: i32,
    /// Exponent of the smallest subnormal (its quantum).
    min_quantum: i32,
    /// Largest finite value.
    max: f64,
}

const F64_FMT: Format = Format {
    prec: 53,
    min_quantum: -1074,
    max: f64::MAX,
};
const F32_FMT: Format = Format {
    prec: 24,
    min_quantum: -149,
    max: f32::MAX as f64,
};
const F16_FMT: Format = Format {
    prec: 11,
    min_quantum: -24,
    max: 65504.0,
};
const BF16_FMT: Format = Format {
    prec: 8,
    min_quantum: -133,
    max: 3.3895313892515355e38,
};

/// `2^e` for `-1022 <= e <= 1023`.
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// `m * 2^e`, exact when the result is representable; `inf` above the range.
fn scale2(m: f64, e: i32) -> f64 {
    if m == 0.0 {
        0.0
    } else if e > 1023 {
        m * pow2(1023) * pow2((e - 1023).min(1023))
    } else if e >= -1022 {
        m * pow2(e)
    } else {
        m * pow2(e + 52) * pow2(-52)
    }
}

/// floor(log2(|x|)) of a finite non-zero f64.
fn ilog2(x: f64) -> i32 {
    let bits = x.to_bits() & !NEG_ZERO_BITS;
    let be = (bits >> 52) as i32;
    if be == 0 {
        // subnormal: value = frac * 2^-1074
        63 - bits.leading_zeros() as i32 - 1074
    } else {
        be - 1023
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

/// Rounds finite non-zero `hi` (the correctly rounded f64 of an exact value
/// whose residual `exact - hi` has sign `res`) once to `fmt`, returning the
/// result as an f64 (exactly representable in `fmt`, or ±inf).
fn round_f64_to(hi: f64, res: i8, fmt: &Format) -> f64 {
    let neg = hi < 0.0;
    let m = hi.abs();
    let res = if neg { -res } else { res };
    let qe = (ilog2(m) - fmt.prec + 1).max(fmt.min_quantum);
    // k = m / 2^qe, exact (power-of-two scaling, no underflow since qe <= ilog2(m)+..).
    let k = scale2(m, -qe);
    let fl = k.floor();
    let frac = k - fl;
    let up = frac > 0.5 || (frac == 0.5 && (res > 0 || (res == 0 && (fl % 2.0) != 0.0)));
    let r = if up { fl + 1.0 } else { fl };
    let mut v = scale2(r, qe);
    if v > fmt.max {
        v = f64::INFINITY;
    }
    if neg {
        -v
    } else {
        v
    }
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
        for i in start..WIDE_LIMBS {
            let (s1, c1) = self.limbs[i].overflowing_add(other[i]);
            let (s2, c2) = s1.overflowing_add(carry as u64);
            self.limbs[i] = s2;
            carry = c1 || c2;
            if !carry && i + 1 >= end {
                break;
            }
        }
    }

    fn sub_from(&mut self, start: usize, end: usize, other: &[u64; WIDE_LIMBS]) {
        let mut borrow = false;
        for i in start..WIDE_LIMBS {
            let (s1, b1) = self.limbs[i].overflowing_sub(other[i]);
            let (s2, b2) = s1.overflowing_sub(borrow as u64);
            self.limbs[i] = s2;
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
    fn round(&self, fmt: &Format) -> f64 {
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
        if neg {
            -v
        } else {
            v
        }
    }
}

const HDR_N_VARINT: u8 = 14;
const HDR_N_WIDE: u8 = 15;

fn read_u64_le(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let end = pos.checked_add(8)?;
    let b: [u8; 8] = buf.get(*pos..end)?.try_into().ok()?;
    *pos = end;
    Some(u64::from_le_bytes(b))
}

fn read_varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let b = *buf.get(*pos)?;
        *pos += 1;
        let part = u64::from(b & 0x7f);
        if i == 9 && b > 1 {
            return None;
        }
        v |= part << (7 * i);
        if b & 0x80 == 0 {
            // canonical: no redundant trailing zero byte
            if i > 0 && b == 0 {
                return None;
            }
            return Some(v);
        }
    }
    None
}

fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
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
            write_varint(out, n as u64);
        }
        if n > 0 {
            for p in &self.low {
                out.extend_from_slice(&p.to_bits().to_le_bytes());
            }
            out.extend_from_slice(&self.head.to_bits().to_le_bytes());
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
                w.limbs[i] = read_u64_le(buf, pos)?;
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
            let n = read_varint(buf, pos)?;
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
        let mut low = Vec::with_capacity(n - 1);
        let mut prev: Option<f64> = None;
        for _ in 0..n {
            let x = f64::from_bits(read_u64_le(buf, pos)?);
            if !x.is_finite() || x == 0.0 {
                return None;
            }
            if let Some(p) = prev {
                if ilog2(p) >= low_bit(x) {
                    return None;
                }
                low.push(p);
            }
            prev = Some(x);
        }
        s.head = prev?;
        s.low = low;
        Some(s)
    }
}

/// Exact sum of a slice (fast path for the contributions to one coordinate).
///
/// Length 1 is a copy, length 2 a single 2Sum. Longer slices run a 2Sum of
/// the values with a second 2Sum accumulating the error terms; as long as the
/// error accumulation itself is exact (its own error is zero) the result is
/// the two-component expansion of `s + c`; otherwise it falls back to the
/// general expansion growth for the rest of the slice.
pub fn sum_exact(xs: &[f64]) -> ExactSum {
    match xs {
        [] => return ExactSum::new(),
        [x] => return ExactSum::from_value(*x),
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
        head: hi,
        low: if lo != 0.0 { vec![lo] } else { Vec::new() },
        wide: None,
        special: SPECIAL_NONE,
        zero: z,
    }
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
