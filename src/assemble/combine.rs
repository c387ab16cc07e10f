//! How contributions to one coordinate combine, per element type and
//! duplicate policy, and how a combined state travels through spill runs.
//!
//! A contribution is held as 8 raw bits whose meaning depends on the
//! element type: the f64 bits for every float type (f16, bf16 and f32
//! values are exact in f64), the i64 bits for signed integers, the u64 for
//! unsigned integers. A [`Combiner`] turns the raw contributions of one
//! coordinate within a run into an accumulator (`Acc`), merges accumulators
//! across runs, encodes them into spill runs, and finally rounds once to the
//! element type.

use crate::assemble::exact::{ExactSum, finite_header, grow_expansion, sum_exact, two_sum};
use crate::assemble::key::{Key, KeyLayout};
use crate::codec::{
    read_i128_zigzag, read_u64 as read_u64_varint, take_le_u64 as read_u64, write_i128_zigzag,
    write_u64,
};
use crate::element::{DType, Element, Value};
use crate::error::Error;
use crate::float::FloatFormat;
use crate::options::{DuplicatePolicy, NonFinitePolicy};
use std::fmt;

/// Why combining failed; the caller adds the coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CombineError {
    /// Duplicate contributions under the `error` policy.
    Duplicate,
    /// An integer result does not fit the element type.
    Overflow,
}

/// One way of combining contributions of one element type.
pub(crate) trait Combiner: Send + Sync + 'static {
    /// State of a partially combined coordinate.
    type Acc: Clone + Send + Sync + fmt::Debug;
    /// Combine the contributions one run holds for one coordinate, in push
    /// order. `origin` orders runs for the `last` policy.
    fn combine_group(&self, raws: &[u64], origin: u64) -> Result<Self::Acc, CombineError>;
    /// Fold `b` into `a`. For order-dependent policies `b` may come from
    /// any run: the accumulator carries what it needs to decide.
    fn merge(&self, a: &mut Self::Acc, b: Self::Acc) -> Result<(), CombineError>;
    /// Append the spill encoding of `a`.
    fn encode(&self, a: &Self::Acc, out: &mut Vec<u8>);
    /// Decode one accumulator; None on malformed bytes.
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<Self::Acc>;
    /// The final value, rounded once to the element type.
    fn finish(&self, a: &Self::Acc) -> Result<Value, CombineError>;
}

/// Round an f64 to a float element type, as a Value holding the rounded value.
fn float_value(dtype: DType, v: f64) -> Value {
    Value::Float(dtype.round_float(v))
}

/// An integer result as a Value, or Overflow when it does not fit.
fn int_value(dtype: DType, v: i128) -> Result<Value, CombineError> {
    let (lo, hi) = dtype.int_range().unwrap_or((0, u64::MAX.into()));
    if v < lo || v > hi {
        return Err(CombineError::Overflow);
    }
    Ok(if dtype.is_signed_int() {
        Value::Int(v as i64)
    } else {
        Value::UInt(v as u64)
    })
}

/// A raw contribution as a Value of the element type (no rounding needed:
/// pushes already checked that it fits).
fn value_of_raw(dtype: DType, raw: u64) -> Value {
    if dtype.is_float() {
        float_value(dtype, f64::from_bits(raw))
    } else if dtype.is_signed_int() {
        Value::Int(raw as i64)
    } else {
        Value::UInt(raw)
    }
}

fn raw_int(dtype: DType, raw: u64) -> i128 {
    if dtype.is_signed_int() {
        raw as i64 as i128
    } else {
        raw as i128
    }
}

/// Exact float sums.
///
/// Almost every exact sum of finite-element contributions fits in two
/// non-overlapping doubles, so the accumulator keeps that case inline
/// (`Compact`, 24 bytes, no allocation, a few TwoSums per merge) and falls
/// back to a full [`ExactSum`] expansion for everything else (more
/// components, zeros, infinities, NaN, intermediate overflow). Both forms
/// hold the exact value, so the result does not depend on which was used.
pub(crate) struct FloatSum(pub DType);

/// Accumulator of [`FloatSum`].
#[derive(Clone, Debug)]
pub(crate) enum SumAcc {
    /// `hi + lo` exactly, with `hi = fl(hi + lo)` finite and non-zero.
    Compact { hi: f64, lo: f64 },
    /// Any other exact sum.
    Full(Box<ExactSum>),
}

/// Header bytes of the ExactSum encoding for one and two finite, non-zero
/// partials.
const HDR_ONE: u8 = finite_header(1);
const HDR_TWO: u8 = finite_header(2);

/// A short non-overlapping expansion (smallest first) in a fixed array:
/// Shewchuk's grow-expansion with zero elimination, for the compact paths.
#[derive(Default)]
struct Partials {
    parts: [f64; 4],
    n: usize,
}

impl Partials {
    /// Add `x` exactly. False when an intermediate sum overflows (the caller
    /// then takes the general path). Holds up to 4 partials: callers keep
    /// at most 3 before a call.
    #[inline(always)]
    fn grow(&mut self, x: f64) -> bool {
        if x == 0.0 {
            return true;
        }
        let Ok((mut m, q)) = grow_expansion(&mut self.parts, self.n, x) else {
            return false;
        };
        if q != 0.0 {
            self.parts[m] = q;
            m += 1;
        }
        self.n = m;
        true
    }

    /// The compact accumulator for one or two partials.
    #[inline]
    fn compact(&self) -> Option<SumAcc> {
        match self.n {
            1 => SumAcc::compact(self.parts[0], 0.0),
            2 => SumAcc::compact(self.parts[1], self.parts[0]),
            _ => None,
        }
    }
}

impl SumAcc {
    /// The compact form of `hi + lo` when it is one (finite, non-zero).
    #[inline]
    fn compact(a: f64, b: f64) -> Option<SumAcc> {
        let (hi, lo) = two_sum(a, b);
        (hi.is_finite() && hi != 0.0).then_some(SumAcc::Compact { hi, lo })
    }

    /// The exact sum of a group when it stays within two components all
    /// along (almost always for FE data): an expansion grown in a fixed
    /// array, no ExactSum. None sends the group to the general path
    /// (specials, overflow, an exact zero, more components).
    #[inline]
    fn sum_compact(raws: &[u64]) -> Option<SumAcc> {
        let mut parts = Partials::default();
        for r in raws {
            let x = f64::from_bits(*r);
            if !x.is_finite() || !parts.grow(x) || parts.n > 2 {
                return None;
            }
        }
        parts.compact()
    }

    fn from_exact(e: ExactSum) -> SumAcc {
        if let Some(p) = e.partials() {
            let c = match *p {
                [x] => Self::compact(x, 0.0),
                [lo, hi] => Self::compact(hi, lo),
                _ => None,
            };
            if let Some(c) = c {
                return c;
            }
        }
        SumAcc::Full(Box::new(e))
    }

    fn to_exact(&self) -> ExactSum {
        match self {
            SumAcc::Compact { hi, lo } => {
                let mut e = ExactSum::from_value(*hi);
                if *lo != 0.0 {
                    e.add(*lo);
                }
                e
            }
            SumAcc::Full(e) => (**e).clone(),
        }
    }
}

impl Combiner for FloatSum {
    type Acc = SumAcc;
    #[inline]
    fn combine_group(&self, raws: &[u64], _: u64) -> Result<SumAcc, CombineError> {
        match raws {
            [one] => {
                let v = f64::from_bits(*one);
                Ok(Self::Acc::compact(v, 0.0)
                    .unwrap_or_else(|| SumAcc::Full(Box::new(ExactSum::from_value(v)))))
            }
            [a, b] => {
                let (a, b) = (f64::from_bits(*a), f64::from_bits(*b));
                Ok(SumAcc::compact(a, b).unwrap_or_else(|| SumAcc::from_exact(sum_exact(&[a, b]))))
            }
            _ => {
                if let Some(c) = SumAcc::sum_compact(raws) {
                    return Ok(c);
                }
                // Groups are short (FE: a handful of elements share an
                // entry); a stack buffer avoids allocating for them.
                let mut buf = [0f64; 32];
                let e = if raws.len() <= buf.len() {
                    for (b, r) in buf.iter_mut().zip(raws) {
                        *b = f64::from_bits(*r);
                    }
                    sum_exact(&buf[..raws.len()])
                } else {
                    let mut s = ExactSum::new();
                    for r in raws {
                        s.add(f64::from_bits(*r));
                    }
                    s
                };
                Ok(SumAcc::from_exact(e))
            }
        }
    }
    #[inline]
    fn merge(&self, a: &mut SumAcc, b: SumAcc) -> Result<(), CombineError> {
        if let (SumAcc::Compact { hi: ah, lo: al }, SumAcc::Compact { hi: bh, lo: bl }) = (&*a, &b)
        {
            // Grow the expansion [al, ah] by bh and bl; keep the compact
            // form when at most two partials remain.
            let mut parts = Partials::default();
            let grown = [*al, *ah, *bh, *bl].into_iter().all(|x| parts.grow(x));
            if let Some(c) = grown.then(|| parts.compact()).flatten() {
                *a = c;
                return Ok(());
            }
        }
        let mut e = a.to_exact();
        match &b {
            SumAcc::Full(f) => e.merge(f),
            c => e.merge(&c.to_exact()),
        }
        *a = SumAcc::from_exact(e);
        Ok(())
    }
    #[inline]
    fn encode(&self, a: &SumAcc, out: &mut Vec<u8>) {
        // The same bytes ExactSum::encode gives for one or two partials.
        match a {
            SumAcc::Compact { hi, lo: 0.0 } => {
                out.push(HDR_ONE);
                out.extend_from_slice(&hi.to_le_bytes());
            }
            SumAcc::Compact { hi, lo } => {
                out.push(HDR_TWO);
                out.extend_from_slice(&lo.to_le_bytes());
                out.extend_from_slice(&hi.to_le_bytes());
            }
            SumAcc::Full(e) => e.encode(out),
        }
    }
    #[inline]
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<SumAcc> {
        let start = *pos;
        let hdr = *buf.get(start)?;
        let fast = match hdr {
            HDR_ONE => {
                let mut p = start + 1;
                let v = f64::from_bits(read_u64(buf, &mut p)?);
                (v.is_finite() && v != 0.0).then_some((SumAcc::Compact { hi: v, lo: 0.0 }, p))
            }
            HDR_TWO => {
                let mut p = start + 1;
                let lo = f64::from_bits(read_u64(buf, &mut p)?);
                let hi = f64::from_bits(read_u64(buf, &mut p)?);
                // Only the normalized form is taken here; anything else goes
                // through the full, validating decoder.
                match SumAcc::compact(hi, lo) {
                    Some(SumAcc::Compact { hi: h, lo: l }) if h == hi && l == lo && lo != 0.0 => {
                        Some((SumAcc::Compact { hi, lo }, p))
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some((acc, p)) = fast {
            *pos = p;
            return Some(acc);
        }
        ExactSum::decode(buf, pos).map(SumAcc::from_exact)
    }
    #[inline]
    fn finish(&self, a: &SumAcc) -> Result<Value, CombineError> {
        if let (DType::F64, SumAcc::Compact { hi, .. }) = (self.0, a) {
            // hi = fl(hi + lo): already the correctly rounded sum.
            return Ok(Value::Float(*hi));
        }
        let e = match a {
            SumAcc::Full(e) => std::borrow::Cow::Borrowed(&**e),
            c => std::borrow::Cow::Owned(c.to_exact()),
        };
        Ok(Value::Float(match self.0.float_format() {
            Some(fmt) if fmt != FloatFormat::F64 => e.round_to(&fmt),
            _ => e.round_f64(),
        }))
    }
}

/// Plain f64 addition in arrival order: faster, but the result depends on
/// the order and grouping of contributions (threads, budget, spill points).
pub(crate) struct FloatFastSum(pub DType);

impl Combiner for FloatFastSum {
    type Acc = f64;
    fn combine_group(&self, raws: &[u64], _: u64) -> Result<f64, CombineError> {
        Ok(raws.iter().map(|r| f64::from_bits(*r)).sum())
    }
    fn merge(&self, a: &mut f64, b: f64) -> Result<(), CombineError> {
        *a += b;
        Ok(())
    }
    fn encode(&self, a: &f64, out: &mut Vec<u8>) {
        out.extend_from_slice(&a.to_le_bytes());
    }
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<f64> {
        read_u64(buf, pos).map(f64::from_bits)
    }
    fn finish(&self, a: &f64) -> Result<Value, CombineError> {
        Ok(float_value(self.0, *a))
    }
}

/// Float min or max; NaN wins so that a NaN contribution is never hidden.
pub(crate) struct FloatExtreme {
    pub dtype: DType,
    pub max: bool,
}

impl FloatExtreme {
    fn pick(&self, a: f64, b: f64) -> f64 {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else if self.max {
            // -0.0 and 0.0 compare equal: prefer +0.0 for max and -0.0 for
            // min so the result does not depend on the order.
            if a > b || (a == b && b.is_sign_negative()) {
                a
            } else {
                b
            }
        } else if a < b || (a == b && a.is_sign_negative()) {
            a
        } else {
            b
        }
    }
}

impl Combiner for FloatExtreme {
    type Acc = f64;
    fn combine_group(&self, raws: &[u64], _: u64) -> Result<f64, CombineError> {
        let mut it = raws.iter().map(|r| f64::from_bits(*r));
        let first = it.next().unwrap_or(0.0);
        Ok(it.fold(first, |a, b| self.pick(a, b)))
    }
    fn merge(&self, a: &mut f64, b: f64) -> Result<(), CombineError> {
        *a = self.pick(*a, b);
        Ok(())
    }
    fn encode(&self, a: &f64, out: &mut Vec<u8>) {
        out.extend_from_slice(&a.to_le_bytes());
    }
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<f64> {
        read_u64(buf, pos).map(f64::from_bits)
    }
    fn finish(&self, a: &f64) -> Result<Value, CombineError> {
        Ok(float_value(self.dtype, *a))
    }
}

/// Exact integer sums in i128; the element type's range is checked at the end.
pub(crate) struct IntSum(pub DType);

impl Combiner for IntSum {
    type Acc = i128;
    fn combine_group(&self, raws: &[u64], _: u64) -> Result<i128, CombineError> {
        // At most 2^64 terms of magnitude < 2^64 cannot overflow i128.
        Ok(raws.iter().map(|&r| raw_int(self.0, r)).sum())
    }
    fn merge(&self, a: &mut i128, b: i128) -> Result<(), CombineError> {
        *a = a.checked_add(b).ok_or(CombineError::Overflow)?;
        Ok(())
    }
    fn encode(&self, a: &i128, out: &mut Vec<u8>) {
        write_i128_zigzag(*a, out)
    }
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<i128> {
        read_i128_zigzag(buf, pos)
    }
    fn finish(&self, a: &i128) -> Result<Value, CombineError> {
        int_value(self.0, *a)
    }
}

/// Integer min or max.
pub(crate) struct IntExtreme {
    pub dtype: DType,
    pub max: bool,
}

impl Combiner for IntExtreme {
    type Acc = i128;
    fn combine_group(&self, raws: &[u64], _: u64) -> Result<i128, CombineError> {
        let it = raws.iter().map(|&r| raw_int(self.dtype, r));
        let v = if self.max { it.max() } else { it.min() };
        Ok(v.unwrap_or(0))
    }
    fn merge(&self, a: &mut i128, b: i128) -> Result<(), CombineError> {
        *a = if self.max { (*a).max(b) } else { (*a).min(b) };
        Ok(())
    }
    fn encode(&self, a: &i128, out: &mut Vec<u8>) {
        write_i128_zigzag(*a, out)
    }
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<i128> {
        read_i128_zigzag(buf, pos)
    }
    fn finish(&self, a: &i128) -> Result<Value, CombineError> {
        int_value(self.dtype, *a)
    }
}

/// The last contribution: (origin of its run, raw value). Within a run the
/// sort is stable, so the last of a group is the last pushed.
pub(crate) struct Last(pub DType);

impl Combiner for Last {
    type Acc = (u64, u64);
    fn combine_group(&self, raws: &[u64], origin: u64) -> Result<(u64, u64), CombineError> {
        Ok((origin, raws.last().copied().unwrap_or(0)))
    }
    fn merge(&self, a: &mut (u64, u64), b: (u64, u64)) -> Result<(), CombineError> {
        if b.0 > a.0 {
            *a = b;
        }
        Ok(())
    }
    fn encode(&self, a: &(u64, u64), out: &mut Vec<u8>) {
        write_u64(a.0, out);
        out.extend_from_slice(&a.1.to_le_bytes());
    }
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<(u64, u64)> {
        let o = read_u64_varint(buf, pos)?;
        Some((o, read_u64(buf, pos)?))
    }
    fn finish(&self, a: &(u64, u64)) -> Result<Value, CombineError> {
        Ok(value_of_raw(self.0, a.1))
    }
}

/// Duplicates are errors.
pub(crate) struct Unique(pub DType);

impl Combiner for Unique {
    type Acc = u64;
    fn combine_group(&self, raws: &[u64], _: u64) -> Result<u64, CombineError> {
        match raws {
            [one] => Ok(*one),
            _ => Err(CombineError::Duplicate),
        }
    }
    fn merge(&self, _: &mut u64, _: u64) -> Result<(), CombineError> {
        Err(CombineError::Duplicate)
    }
    fn encode(&self, a: &u64, out: &mut Vec<u8>) {
        out.extend_from_slice(&a.to_le_bytes());
    }
    fn decode(&self, buf: &[u8], pos: &mut usize) -> Option<u64> {
        read_u64(buf, pos)
    }
    fn finish(&self, a: &u64) -> Result<Value, CombineError> {
        Ok(value_of_raw(self.0, *a))
    }
}

/// A sender's pre-combining (the distributed builder's): the raw values
/// a group of contributions to one coordinate can be replaced by, so that
/// the owner, combining them with the same combiner, gets the same result
/// (or the same error). Each policy's rule is its combiner's own:
/// - exact float sums: the group's exact sum as a non-overlapping
///   expansion (its partials are f64 values whose exact sum is the
///   group's); an exact cancellation as one `+0.0`, or `-0.0` when every
///   term was; groups with NaN or infinity, or needing the wide form, go
///   unchanged;
/// - integer sums: the i128 sum as one value when it fits the element
///   type (the owner checks the range at the end), else unchanged;
/// - min / max: the combiner's pick (associative and commutative).
///
/// Fast float sums (order-dependent), `last` and `error` (the owner must
/// see every contribution) are not combined.
// Used by the distributed builder, through `internals`.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Precombine {
    kind: CombinerKind,
    dtype: DType,
}

#[cfg_attr(not(feature = "internals"), allow(dead_code))]
impl Precombine {
    /// The pre-combining of `kind` for values of `dtype` (a complex
    /// tensor's part type).
    pub fn new(kind: CombinerKind, dtype: DType) -> Precombine {
        Precombine { kind, dtype }
    }

    /// Whether groups are combined at all (else every value is sent).
    pub fn combines(&self) -> bool {
        !matches!(
            self.kind,
            CombinerKind::FloatFastSum | CombinerKind::Last | CombinerKind::Unique
        )
    }

    /// Call `emit` with the raw values that stand for the group `raws`
    /// (all of them when it cannot be combined).
    pub fn group(&self, raws: &[u64], mut emit: impl FnMut(u64)) {
        let unchanged = |emit: &mut dyn FnMut(u64)| raws.iter().for_each(|&r| emit(r));
        if raws.len() < 2 || !self.combines() {
            return unchanged(&mut emit);
        }
        let dtype = self.dtype;
        match self.kind {
            CombinerKind::FloatSum => {
                let mut s = ExactSum::new();
                let mut all_neg_zero = true;
                let mut special = false;
                for &r in raws {
                    let x = f64::from_bits(r);
                    special |= !x.is_finite();
                    all_neg_zero &= r == (-0.0f64).to_bits();
                    s.add(x);
                }
                match s.partials().filter(|_| !special) {
                    Some([]) => emit(if all_neg_zero { -0.0f64 } else { 0.0 }.to_bits()),
                    Some(parts) => parts.iter().for_each(|p| emit(p.to_bits())),
                    None => unchanged(&mut emit),
                }
            }
            CombinerKind::FloatExtreme { max } => {
                match (FloatExtreme { dtype, max }).combine_group(raws, 0) {
                    Ok(v) => emit(v.to_bits()),
                    Err(_) => unchanged(&mut emit),
                }
            }
            CombinerKind::IntSum => {
                let fits = IntSum(dtype).combine_group(raws, 0).ok().and_then(|s| {
                    if dtype.is_signed_int() {
                        i64::try_from(s).ok().and_then(|v| v.to_raw(dtype).ok())
                    } else {
                        u64::try_from(s).ok().and_then(|v| v.to_raw(dtype).ok())
                    }
                });
                match fits {
                    Some(v) => emit(v),
                    None => unchanged(&mut emit),
                }
            }
            CombinerKind::IntExtreme { max } => {
                let best = (IntExtreme { dtype, max }).combine_group(raws, 0).ok();
                match raws.iter().find(|&&r| Some(raw_int(dtype, r)) == best) {
                    Some(&r) => emit(r),
                    None => unchanged(&mut emit),
                }
            }
            CombinerKind::FloatFastSum | CombinerKind::Last | CombinerKind::Unique => {
                unchanged(&mut emit)
            }
        }
    }
}

/// Which combiner a dtype and policy use (for dispatch in the builder).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CombinerKind {
    /// Float sum, exact (the correctly rounded sum of every term).
    FloatSum,
    /// Float sum in push order (`exact_sums = false`).
    FloatFastSum,
    /// Float min (`max: false`) or max, NaN-aware.
    FloatExtreme {
        /// Keep the largest.
        max: bool,
    },
    /// Integer sum, checked for overflow.
    IntSum,
    /// Integer min (`max: false`) or max.
    IntExtreme {
        /// Keep the largest.
        max: bool,
    },
    /// The last contribution (pusher creation order, then push order).
    Last,
    /// One contribution per coordinate; a second one is an error.
    Unique,
}

impl CombinerKind {
    /// The combiner of `dtype` under `policy` (`exact_sums` off: plain float sums).
    pub fn of(dtype: DType, policy: DuplicatePolicy, exact_sums: bool) -> CombinerKind {
        if dtype.is_bool() && policy == DuplicatePolicy::Sum {
            // scipy's reading of a sum of bools: true if any term is.
            return CombinerKind::IntExtreme { max: true };
        }
        match (dtype.is_float(), policy) {
            (true, DuplicatePolicy::Sum) if !exact_sums => CombinerKind::FloatFastSum,
            (true, DuplicatePolicy::Sum) => CombinerKind::FloatSum,
            (true, DuplicatePolicy::Min) => CombinerKind::FloatExtreme { max: false },
            (true, DuplicatePolicy::Max) => CombinerKind::FloatExtreme { max: true },
            (false, DuplicatePolicy::Sum) => CombinerKind::IntSum,
            (false, DuplicatePolicy::Min) => CombinerKind::IntExtreme { max: false },
            (false, DuplicatePolicy::Max) => CombinerKind::IntExtreme { max: true },
            (_, DuplicatePolicy::Last) => CombinerKind::Last,
            (_, DuplicatePolicy::Error) => CombinerKind::Unique,
        }
    }

    /// Largest encoded accumulator the budget plans for: a two-double
    /// exact sum (the compact form, 17 bytes), an i128 zigzag varint, or
    /// origin + value for `last`. Rarer, longer expansions may grow an
    /// in-memory run past it.
    pub(crate) fn est_acc_bytes(self) -> u64 {
        match self {
            CombinerKind::FloatSum => 17,
            CombinerKind::FloatFastSum
            | CombinerKind::FloatExtreme { .. }
            | CombinerKind::Unique => 8,
            CombinerKind::IntSum | CombinerKind::IntExtreme { .. } => 19,
            CombinerKind::Last => 18,
        }
    }
}

/// A value that can be pushed into a tensor of some element type.
///
/// Floats go into float tensors (widened exactly to f64; an f64 pushed into
/// an f32 tensor is summed exactly and rounded once at the end). Integers
/// go into integer tensors when they fit the element type, and into float
/// tensors when they are exact in f64 (|v| <= 2^53).
pub trait PushValue: Copy + fmt::Display {
    /// The raw 8-byte form for `dtype`, or why the value does not fit.
    fn to_raw(self, dtype: DType) -> Result<u64, &'static str>;
    /// The value as f64 if it is a float (for the NaN / infinity policy;
    /// a complex value's real part).
    fn as_float(self) -> Option<f64>;
    /// The raw forms of the real and imaginary parts for a complex tensor
    /// whose parts are `part` (f32 or f64), or why the value does not fit:
    /// a real value's imaginary part is +0.0.
    #[inline]
    fn to_raw_parts(self, part: DType) -> Result<(u64, u64), &'static str> {
        Ok((self.to_raw(part)?, 0))
    }
    /// A complex value's imaginary part (for the NaN / infinity policy).
    #[inline]
    fn imag_float(self) -> Option<f64> {
        None
    }
}

const COMPLEX_INTO_REAL: &str = "a complex value cannot go into a real tensor";

/// A value as read from a file pushes as what it holds; every element
/// type pushes as its [`Value`] (below).
impl PushValue for Value {
    #[inline]
    fn to_raw(self, dtype: DType) -> Result<u64, &'static str> {
        match self {
            Value::Float(f) => float_to_raw(f, dtype),
            Value::Int(i) => int_to_raw(i.into(), dtype),
            Value::UInt(u) => int_to_raw(u.into(), dtype),
            Value::Complex(..) => Err(COMPLEX_INTO_REAL),
        }
    }
    #[inline]
    fn as_float(self) -> Option<f64> {
        match self {
            Value::Float(f) | Value::Complex(f, _) => Some(f),
            Value::Int(_) | Value::UInt(_) => None,
        }
    }
    #[inline]
    fn to_raw_parts(self, part: DType) -> Result<(u64, u64), &'static str> {
        match self {
            Value::Complex(re, im) => Ok((float_to_raw(re, part)?, float_to_raw(im, part)?)),
            v => Ok((v.to_raw(part)?, 0)),
        }
    }
    #[inline]
    fn imag_float(self) -> Option<f64> {
        match self {
            Value::Complex(_, im) => Some(im),
            _ => None,
        }
    }
}

/// An element type pushes as the [`Value`] it widens to without loss: a
/// float into a float tensor, an integer (or a bool, as 0 or 1) into an
/// integer one or, when exact in f64, a float one; a complex value into a
/// complex tensor only.
impl<T: Element + fmt::Display> PushValue for T {
    #[inline(always)]
    fn to_raw(self, dtype: DType) -> Result<u64, &'static str> {
        self.to_value().to_raw(dtype)
    }
    #[inline(always)]
    fn as_float(self) -> Option<f64> {
        self.to_value().as_float()
    }
    #[inline(always)]
    fn to_raw_parts(self, part: DType) -> Result<(u64, u64), &'static str> {
        self.to_value().to_raw_parts(part)
    }
    #[inline(always)]
    fn imag_float(self) -> Option<f64> {
        self.to_value().imag_float()
    }
}

const FLOAT_INTO_INT: &str = "a float value cannot go into an integer tensor";
const INT_NOT_EXACT: &str = "the integer is not exactly representable as a float (|v| > 2^53)";

/// The raw lane of a float pushed into `dtype`.
#[inline(always)]
fn float_to_raw(f: f64, dtype: DType) -> Result<u64, &'static str> {
    if dtype.is_float() {
        Ok(f.to_bits())
    } else {
        Err(FLOAT_INTO_INT)
    }
}

/// The raw lane of an integer pushed into `dtype`: exact in f64 for a
/// float type, within the range of an integer type.
#[inline(always)]
fn int_to_raw(v: i128, dtype: DType) -> Result<u64, &'static str> {
    if dtype.is_float() {
        if v.unsigned_abs() > (1u128 << 53) {
            return Err(INT_NOT_EXACT);
        }
        return Ok((v as f64).to_bits());
    }
    let (lo, hi) = dtype.int_range().unwrap_or((0, u64::MAX.into()));
    if v < lo || v > hi {
        return Err(dtype.int_range_text());
    }
    Ok(if dtype.is_signed_int() {
        v as i64 as u64
    } else {
        v as u64
    })
}

macro_rules! push_index_int {
    ($($t:ty),*) => {$(
        impl PushValue for $t {
            #[inline]
            fn to_raw(self, dtype: DType) -> Result<u64, &'static str> {
                int_to_raw(self as i128, dtype)
            }
            #[inline]
            fn as_float(self) -> Option<f64> {
                None
            }
        }
    )*};
}

push_index_int!(usize, isize);

/// A bool pushes as 1 or 0: into a bool tensor, and into an integer or a
/// float one as that number.
impl PushValue for bool {
    #[inline]
    fn to_raw(self, dtype: DType) -> Result<u64, &'static str> {
        u8::from(self).to_raw(dtype)
    }
    #[inline]
    fn as_float(self) -> Option<f64> {
        None
    }
}

/// Run `$body` with `$c` bound to the combiner for `$kind` and `$dtype`.
macro_rules! with_combiner {
    ($kind:expr, $dtype:expr, $c:ident => $body:expr) => {
        match $kind {
            $crate::assemble::combine::CombinerKind::FloatSum => {
                let $c = $crate::assemble::combine::FloatSum($dtype);
                $body
            }
            $crate::assemble::combine::CombinerKind::FloatFastSum => {
                let $c = $crate::assemble::combine::FloatFastSum($dtype);
                $body
            }
            $crate::assemble::combine::CombinerKind::FloatExtreme { max } => {
                let $c = $crate::assemble::combine::FloatExtreme { dtype: $dtype, max };
                $body
            }
            $crate::assemble::combine::CombinerKind::IntSum => {
                let $c = $crate::assemble::combine::IntSum($dtype);
                $body
            }
            $crate::assemble::combine::CombinerKind::IntExtreme { max } => {
                let $c = $crate::assemble::combine::IntExtreme { dtype: $dtype, max };
                $body
            }
            $crate::assemble::combine::CombinerKind::Last => {
                let $c = $crate::assemble::combine::Last($dtype);
                $body
            }
            $crate::assemble::combine::CombinerKind::Unique => {
                let $c = $crate::assemble::combine::Unique($dtype);
                $body
            }
        }
    };
}

pub(crate) use with_combiner;

/// The error for a combination that failed at `key`, in a tensor of
/// `dtype` (the type written: a complex one drops the part index).
pub(crate) fn combine_error<K: Key>(
    layout: &KeyLayout,
    dtype: DType,
    key: &K,
    e: CombineError,
) -> Error {
    let mut coordinate = vec![0u64; layout.rank()];
    layout.unpack(key, &mut coordinate);
    if dtype.is_complex() {
        // The part index is ours, not the caller's.
        coordinate.pop();
    }
    match e {
        CombineError::Duplicate => Error::DuplicateCoordinate { coordinate },
        CombineError::Overflow => Error::IntegerOverflow {
            coordinate,
            dtype: dtype.name(),
        },
    }
}

/// Contribution `n`'s value as the 8 raw bits a run stores for `dtype`,
/// after the non-finite `policy`. Shared by every pusher (local and MPI).
#[inline]
pub fn raw_value<V: PushValue>(
    v: V,
    dtype: DType,
    policy: NonFinitePolicy,
    n: u64,
) -> crate::error::Result<u64> {
    check_finite(v.as_float(), policy, n)?;
    v.to_raw(dtype).map_err(|reason| refused(v, n, reason))
}

/// Contribution `n`'s value as the raw bits of its real and imaginary
/// parts for a complex tensor of `part`s, after the non-finite `policy`
/// (which looks at both parts).
#[inline]
pub(crate) fn raw_parts<V: PushValue>(
    v: V,
    part: DType,
    policy: NonFinitePolicy,
    n: u64,
) -> crate::error::Result<(u64, u64)> {
    check_finite(v.as_float(), policy, n)?;
    check_finite(v.imag_float(), policy, n)?;
    v.to_raw_parts(part).map_err(|reason| refused(v, n, reason))
}

/// Why a push refuses contribution `n`'s value `v` into a tensor of
/// `dtype` (its conversion, or the non-finite `policy` on either part of
/// a complex value), if it does: what the in-memory paths report once a
/// pass has seen a refused value.
pub(crate) fn value_refusal<V: PushValue>(
    v: V,
    dtype: DType,
    policy: NonFinitePolicy,
    n: u64,
) -> Option<Error> {
    match dtype.complex_part() {
        Some(part) => raw_parts(v, part, policy, n).err(),
        None => raw_value(v, dtype, policy, n).err(),
    }
}

/// The non-finite `policy` applied to contribution `n`'s float `f` (a
/// value with no float part passes).
#[inline]
fn check_finite(f: Option<f64>, policy: NonFinitePolicy, n: u64) -> crate::error::Result<()> {
    let Some(f) = f else { return Ok(()) };
    let refuse = match policy {
        NonFinitePolicy::Keep => false,
        NonFinitePolicy::RejectNan => f.is_nan(),
        NonFinitePolicy::RejectNonFinite => !f.is_finite(),
    };
    if refuse {
        return Err(Error::InvalidValue {
            contribution: n,
            value: f.to_string(),
            reason: "the non-finite policy refuses it",
        });
    }
    Ok(())
}

#[cold]
fn refused<V: PushValue>(v: V, n: u64, reason: &'static str) -> Error {
    Error::InvalidValue {
        contribution: n,
        value: v.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a group stands for after pre-combining, by each policy's
    /// combiner: the same result from the values sent.
    #[test]
    fn precombined_groups_combine_to_the_same_result() {
        let group = |kind, dtype, raws: &[u64]| {
            let mut out = Vec::new();
            Precombine::new(kind, dtype).group(raws, |v| out.push(v));
            out
        };
        let f = |x: f64| x.to_bits();
        // Exact sums: a cancellation is +0.0, all -0.0 stays -0.0, an
        // infinity leaves the group alone.
        let fs = CombinerKind::FloatSum;
        assert_eq!(group(fs, DType::F64, &[f(1.5), f(-1.5)]), [f(0.0)]);
        assert_eq!(group(fs, DType::F64, &[f(-0.0), f(-0.0)]), [f(-0.0)]);
        assert_eq!(group(fs, DType::F64, &[f(1.0), f(2.0)]), [f(3.0)]);
        assert_eq!(group(fs, DType::F64, &[f(f64::INFINITY), f(1.0)]).len(), 2);
        // Extremes: the combiner's pick (+0.0 over -0.0 for max).
        let max = CombinerKind::FloatExtreme { max: true };
        assert_eq!(group(max, DType::F64, &[f(-0.0), f(0.0)]), [f(0.0)]);
        let imin = CombinerKind::IntExtreme { max: false };
        let neg = |x: i64| x as u64;
        assert_eq!(group(imin, DType::I32, &[neg(-5), 7, neg(-9)]), [neg(-9)]);
        // Integer sums: one value when it fits the type, else unchanged.
        assert_eq!(group(CombinerKind::IntSum, DType::U8, &[1, 2]), [3]);
        assert_eq!(
            group(CombinerKind::IntSum, DType::U8, &[200, 100]),
            [200, 100]
        );
        // Order-dependent or refusing policies: everything is sent.
        for kind in [
            CombinerKind::FloatFastSum,
            CombinerKind::Last,
            CombinerKind::Unique,
        ] {
            assert_eq!(group(kind, DType::F64, &[f(1.0), f(2.0)]), [f(1.0), f(2.0)]);
        }
    }

    #[test]
    fn varints_round_trip() {
        for v in [0i128, -1, 1, i128::MAX, i128::MIN, -(1 << 70)] {
            let mut b = Vec::new();
            write_i128_zigzag(v, &mut b);
            let mut p = 0;
            assert_eq!(read_i128_zigzag(&b, &mut p), Some(v));
        }
    }

    /// The compact accumulator agrees with ExactSum on every path: groups,
    /// merges in any tree, encode/decode through either decoder.
    #[test]
    fn float_sum_compact_form_is_exact() {
        let c = FloatSum(DType::F64);
        let vals = [
            1.0, 1e-20, -1.0, 3.5, 1e16, -1e16, 0.1, 0.2, 0.3, -0.0, 0.0, 1e308, 1e308, -1e308,
            5e-324, -2.5,
        ];
        let mut seed = 7u64;
        for _ in 0..4000 {
            let mut raws = Vec::new();
            let mut exact = ExactSum::new();
            let mut acc: Option<SumAcc> = None;
            for _ in 0..(seed % 9 + 1) {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let v = vals[(seed >> 33) as usize % vals.len()]
                    * if seed & (1 << 20) != 0 { 3.0 } else { 1.0 };
                exact.add(v);
                raws.push(v.to_bits());
                // Alternate: single contributions merged, or encoded and decoded.
                let one = c.combine_group(&[v.to_bits()], 0).unwrap();
                let mut bytes = Vec::new();
                c.encode(&one, &mut bytes);
                let mut p = 0;
                let one = c.decode(&bytes, &mut p).unwrap();
                assert_eq!(p, bytes.len());
                match acc.as_mut() {
                    None => acc = Some(one),
                    Some(a) => c.merge(a, one).unwrap(),
                }
            }
            let group = c.combine_group(&raws, 0).unwrap();
            let want = exact.round_f64();
            for got in [
                c.finish(&group).unwrap(),
                c.finish(acc.as_ref().unwrap()).unwrap(),
            ] {
                let Value::Float(g) = got else { panic!() };
                assert!(
                    g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                    "{raws:?}: {g} vs {want}"
                );
            }
            // Our bytes decode with the general decoder to the same value.
            let mut bytes = Vec::new();
            c.encode(&group, &mut bytes);
            let mut p = 0;
            let e = ExactSum::decode(&bytes, &mut p).unwrap();
            assert!(e.round_f64().to_bits() == want.to_bits() || want.is_nan());
        }
    }

    #[test]
    fn int_sum_detects_overflow_at_the_end() {
        let c = IntSum(DType::U8);
        let mut a = c.combine_group(&[200, 100], 0).unwrap();
        assert_eq!(c.finish(&a), Err(CombineError::Overflow));
        c.merge(&mut a, -100).unwrap();
        assert_eq!(c.finish(&a), Ok(Value::UInt(200)));
        let c = IntSum(DType::I8);
        let a = c
            .combine_group(&[(-100i64) as u64, (-29i64) as u64], 0)
            .unwrap();
        assert_eq!(c.finish(&a), Err(CombineError::Overflow));
    }

    #[test]
    fn extremes_and_last_and_unique() {
        let mx = FloatExtreme {
            dtype: DType::F64,
            max: true,
        };
        let raws: Vec<u64> = [1.0f64, 3.0, -2.0].iter().map(|v| v.to_bits()).collect();
        assert_eq!(
            mx.finish(&mx.combine_group(&raws, 0).unwrap()),
            Ok(Value::Float(3.0))
        );
        let nan: Vec<u64> = [1.0f64, f64::NAN].iter().map(|v| v.to_bits()).collect();
        assert!(mx.combine_group(&nan, 0).unwrap().is_nan());
        let mn = IntExtreme {
            dtype: DType::I32,
            max: false,
        };
        assert_eq!(mn.combine_group(&[5, (-7i64) as u64], 0), Ok(-7));
        let l = Last(DType::U16);
        let mut a = l.combine_group(&[1, 2, 3], 5).unwrap();
        l.merge(&mut a, (4, 9)).unwrap();
        assert_eq!(l.finish(&a), Ok(Value::UInt(3)));
        l.merge(&mut a, (6, 9)).unwrap();
        assert_eq!(l.finish(&a), Ok(Value::UInt(9)));
        let u = Unique(DType::F64);
        assert_eq!(u.combine_group(&[1, 2], 0), Err(CombineError::Duplicate));
    }

    #[test]
    fn push_values_convert_or_refuse() {
        assert_eq!(1.5f32.to_raw(DType::F64), Ok(1.5f64.to_bits()));
        assert!(1.5f64.to_raw(DType::I32).is_err());
        assert_eq!(300i32.to_raw(DType::U8), Err("does not fit u8 (0..=255)"));
        assert_eq!(
            (-1i64).to_raw(DType::U16),
            Err("does not fit u16 (0..=65535)")
        );
        assert_eq!((-1i32).to_raw(DType::I8), Ok(u64::MAX));
        assert_eq!(7u64.to_raw(DType::F32), Ok(7f64.to_bits()));
        assert!(u64::MAX.to_raw(DType::F64).is_err());
    }
}
