//! Values on their way through the kernel: the lane a contribution's
//! value travels in ([`Lane`]), how the lanes of one coordinate become
//! its stored value ([`Reduce`], today through the builder's own
//! [`Combiner`]s), and the element types a result holds ([`OutValue`]).
//!
//! The kernel itself moves lanes without looking at them, so a wider
//! value (a 16-byte complex, say) needs a lane type and a reducer, not a
//! new kernel.

use crate::assemble::combine::{CombineError, Combiner, FloatSum};
use crate::assemble::exact::{grow_expansion, round_parts, two_sum};
use crate::element::{DType, Value};

/// The fixed-size bits one contribution's value travels in: what the
/// caller's value becomes when it is read (`input::Source`),
/// and what the stored value of a coordinate is written as until it is
/// copied into the result.
pub trait Lane: Copy + Default + Send + Sync + bytemuck::Zeroable + 'static {}

/// Today's lane: the 8 raw bits the builder stores for every element type
/// (f64 bits for floats, i64/u64 bits for integers).
impl Lane for u64 {}

/// How the contributions of one coordinate become its stored value.
pub(crate) trait Reduce<L: Lane>: Sync {
    /// `group` holds every contribution to one coordinate, in the order of
    /// the caller's arrays. Returns the stored value as a lane (for
    /// [`OutValue::from_lane`]), or None when the value is dropped (a zero
    /// under `drop_zeros`).
    fn reduce(&self, group: &[L]) -> Result<Option<L>, CombineError>;

    /// State of one group folded a lane at a time (`ONLINE` reductions
    /// only): then a bucket's groups need not be gathered first; a group
    /// whose `done` gives None goes through [`Reduce::reduce`] after all.
    type Acc: Copy + Default;
    /// Whether `start`, `add` and `done` are implemented.
    const ONLINE: bool = false;
    /// The state of a group of one lane.
    fn start(_l: L) -> Self::Acc {
        Self::Acc::default()
    }
    /// Fold one more lane in.
    fn add(_acc: &mut Self::Acc, _l: L) {}
    /// The stored value's lane, or None when the group must take the
    /// general path (a special value, say, or a zero this reduction drops).
    fn done(&self, _acc: &Self::Acc) -> Option<L> {
        None
    }
    /// The stored value of a group of exactly two lanes when a shortcut
    /// holds it (`ONLINE` reductions only; None: fold as usual).
    #[inline(always)]
    fn pair(&self, _a: L, _b: L) -> Option<L> {
        None
    }
}

/// A [`Combiner`] of the builder, applied to a coordinate's whole group at
/// once: `combine_group` then `finish`, which is what the builder's final
/// pass computes when every contribution is in one run, and (for exact
/// sums, min, max, integer sums) whatever the runs were. For `last` the
/// group is in array order, so its last element is the last contribution.
/// The final value is carried as its raw lane (floats as f64 bits,
/// integers as i64 / u64 bits: [`value_to_raw`]), which the sinks turn
/// into the result's element type ([`FromLane`]), so the kernel is not
/// compiled once per element type as well.
pub(crate) struct RawReduce<'c, C> {
    pub(crate) comb: &'c C,
    pub(crate) drop_zeros: bool,
}

impl<C: Combiner> Reduce<u64> for RawReduce<'_, C> {
    #[inline(always)]
    fn reduce(&self, group: &[u64]) -> Result<Option<u64>, CombineError> {
        let acc = self.comb.combine_group(group, 0)?;
        let v = self.comb.finish(&acc)?;
        if self.drop_zeros && v.is_zero() {
            return Ok(None);
        }
        Ok(Some(value_to_raw(v)))
    }
    type Acc = ();
}

/// A complex value's lane: the raw forms of its real and imaginary parts
/// (f64 bits, as [`crate::Builder::push`] stores each part).
impl Lane for [u64; 2] {}

/// Parts gathered on the stack at once by [`ComplexReduce`]: a longer
/// group is combined a slice at a time and the slices merged.
const PART_SLICE: usize = 64;

/// Complex values: each part reduced on its own by the builder's combiner
/// of the part type, which is what the builder computes (it carries a
/// complex value as two contributions, one per part, and pairs the parts
/// when it writes). `drop_zeros` drops a value whose two parts are zero.
pub(crate) struct ComplexReduce<'c, C> {
    pub(crate) comb: &'c C,
    pub(crate) drop_zeros: bool,
    /// Parts are f64 summed exactly: the fast exact path ([`ExactF64`])
    /// goes first on a group that fits one slice.
    pub(crate) exact_f64: bool,
}

impl<C: Combiner> ComplexReduce<'_, C> {
    /// The raw final value of part `p` (0 real, 1 imaginary) of `group`.
    #[inline]
    fn part(&self, group: &[[u64; 2]], p: usize) -> Result<u64, CombineError> {
        let mut buf = [0u64; PART_SLICE];
        let mut acc = None;
        for (k, slice) in group.chunks(PART_SLICE).enumerate() {
            for (d, l) in buf.iter_mut().zip(slice) {
                *d = l[p];
            }
            let raws = &buf[..slice.len()];
            if self.exact_f64 && group.len() <= PART_SLICE {
                if let Some(v) = ExactF64::fast(raws) {
                    return Ok(v.to_bits());
                }
            }
            // Slices in array order, so `last` sees the last one latest.
            let a = self.comb.combine_group(raws, k as u64)?;
            match acc.as_mut() {
                None => acc = Some(a),
                Some(acc) => self.comb.merge(acc, a)?,
            }
        }
        let v = match acc {
            Some(a) => self.comb.finish(&a)?,
            None => Value::Float(0.0),
        };
        Ok(value_to_raw(v))
    }
}

impl<C: Combiner> Reduce<[u64; 2]> for ComplexReduce<'_, C> {
    #[inline]
    fn reduce(&self, group: &[[u64; 2]]) -> Result<Option<[u64; 2]>, CombineError> {
        let (re, im) = (self.part(group, 0)?, self.part(group, 1)?);
        let zero = |b: u64| f64::from_bits(b) == 0.0;
        if self.drop_zeros && zero(re) && zero(im) {
            return Ok(None);
        }
        Ok(Some([re, im]))
    }
    type Acc = ();
}

/// Exact sums of complex128 values, the hot complex case: each part as
/// [`ExactF64`] folds it online (two [`TwoTerm`]s), and a group either
/// part of which the fast path does not hold goes to `general`.
pub(crate) struct ComplexExactF64<'c> {
    pub(crate) general: ComplexReduce<'c, FloatSum>,
}

impl Reduce<[u64; 2]> for ComplexExactF64<'_> {
    #[inline(always)]
    fn reduce(&self, group: &[[u64; 2]]) -> Result<Option<[u64; 2]>, CombineError> {
        self.general.reduce(group)
    }
    type Acc = (TwoTerm, TwoTerm);
    const ONLINE: bool = true;
    #[inline(always)]
    fn start(l: [u64; 2]) -> (TwoTerm, TwoTerm) {
        (
            TwoTerm::of(f64::from_bits(l[0])),
            TwoTerm::of(f64::from_bits(l[1])),
        )
    }
    #[inline(always)]
    fn add(acc: &mut (TwoTerm, TwoTerm), l: [u64; 2]) {
        acc.0.add(f64::from_bits(l[0]));
        acc.1.add(f64::from_bits(l[1]));
    }
    #[inline(always)]
    fn done(&self, acc: &(TwoTerm, TwoTerm)) -> Option<[u64; 2]> {
        let (re, im) = (acc.0.round()?, acc.1.round()?);
        self.keeps(re, im)
    }
    #[inline(always)]
    fn pair(&self, a: [u64; 2], b: [u64; 2]) -> Option<[u64; 2]> {
        let (re, im) = (pair_sum(a[0], b[0])?, pair_sum(a[1], b[1])?);
        self.keeps(re, im)
    }
}

impl ComplexExactF64<'_> {
    /// The stored lanes of a sum the fast path holds, or None for a zero
    /// this reduction drops (the general path drops it and counts it).
    #[inline(always)]
    fn keeps(&self, re: f64, im: f64) -> Option<[u64; 2]> {
        let dropped = self.general.drop_zeros && re == 0.0 && im == 0.0;
        (!dropped).then_some([re.to_bits(), im.to_bits()])
    }
}

impl<C: crate::element::ComplexElement> FromLane<[u64; 2]> for C {
    /// The parts' final values, already rounded to the part type.
    #[inline(always)]
    fn from_lane_bits(l: [u64; 2]) -> Self {
        C::from_parts(f64::from_bits(l[0]), f64::from_bits(l[1]))
    }
}

/// A final value as a lane: the inverse of [`raw_to_value`].
#[inline(always)]
pub(crate) fn value_to_raw(v: Value) -> u64 {
    match v {
        Value::Float(f) => f.to_bits(),
        Value::Int(i) => i as u64,
        Value::UInt(u) => u,
        // One lane holds one part: a complex value travels as two.
        Value::Complex(re, _) => re.to_bits(),
    }
}

/// The value a lane of [`value_to_raw`] (or of the f64 reducers) holds
/// for an element type.
#[inline(always)]
pub(crate) fn raw_to_value(dtype: DType, l: u64) -> Value {
    if dtype.is_float() {
        Value::Float(f64::from_bits(l))
    } else if dtype.is_signed_int() {
        Value::Int(l as i64)
    } else {
        Value::UInt(l)
    }
}

/// Exact f64 sums into an f64 tensor, the hot case: the correctly rounded
/// sum of a group, computed as a short non-overlapping expansion
/// (Shewchuk's grow-expansion with zero elimination, as the builder's
/// accumulators do, at most [`Expansion::MAX`] parts) and rounded from its
/// parts as `math.fsum` rounds them. Any exact method gives the builder's
/// bits when the sum is finite, which is all this path returns (an exact
/// zero included, with the builder's sign rule: `-0.0` only when every
/// term was `-0.0`); everything else (a special value, an intermediate
/// overflow, too many parts, a zero that `drop_zeros` drops) goes to the
/// builder's combiner.
pub(crate) struct ExactF64<'c> {
    pub(crate) general: RawReduce<'c, FloatSum>,
}

/// A short exact sum: non-overlapping parts, smallest first, none zero.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Expansion {
    parts: [f64; 4],
    n: u8,
    /// Cleared when a value or an intermediate sum was not finite, or the
    /// parts did not fit: the group then takes the general path.
    ok: bool,
    /// A term other than `-0.0` was added (a zero sum is then `+0.0`).
    pos: bool,
}

impl Expansion {
    /// Parts kept at most (one more slot is room for a grow step).
    const MAX: usize = 3;

    /// The expansion of one value.
    #[inline(always)]
    pub(crate) fn of(x: f64) -> Expansion {
        let nz = x != 0.0;
        Expansion {
            parts: [x, 0.0, 0.0, 0.0],
            n: u8::from(nz),
            ok: x.is_finite(),
            pos: !is_negative_zero(x),
        }
    }

    /// Add `x` exactly.
    #[inline(always)]
    pub(crate) fn add(&mut self, x: f64) {
        if !x.is_finite() {
            self.ok = false;
            return;
        }
        self.pos |= !is_negative_zero(x);
        if x == 0.0 || !self.ok {
            return;
        }
        let n = self.n as usize;
        if n == 1 {
            // The common step, spelled out: one TwoSum.
            let (s, e) = two_sum(x, self.parts[0]);
            if !e.is_finite() {
                self.ok = false;
            } else if e == 0.0 {
                self.parts[0] = s;
                self.n = u8::from(s != 0.0);
            } else {
                self.parts[0] = e;
                self.parts[1] = s;
                self.n = 2;
            }
            return;
        }
        match grow_expansion(&mut self.parts, n, x) {
            Ok((mut m, q)) => {
                if q != 0.0 {
                    self.parts[m & 3] = q;
                    m += 1;
                }
                self.n = m as u8;
                self.ok = m <= Self::MAX;
            }
            Err(_) => self.ok = false,
        }
    }

    /// The correctly rounded sum, when this path holds it (finite; the
    /// expansion's rounding, `exact::round_parts`; an exact zero is
    /// `-0.0` only when every term was).
    #[inline(always)]
    pub(crate) fn round(&self) -> Option<f64> {
        let n = (self.n as usize).min(4);
        if !self.ok {
            return None;
        }
        if n == 0 {
            return Some(if self.pos { 0.0 } else { -0.0 });
        }
        let (hi, _) = round_parts(&self.parts[..n])?;
        // Non-zero parts sum to a non-zero value: a zero here is an
        // underflow the general path rounds with its own rules.
        (hi.is_finite() && hi != 0.0).then_some(hi)
    }
}

/// The cheapest exact sum there is, for groups of a few terms of similar
/// size: a running sum `s` and the running sum `c` of its TwoSum errors,
/// both by TwoSum. While the errors of `c` stay zero, `s + c` is the exact
/// sum, and `fl(s + c)` its correct rounding; no branch per term (a
/// special value or an overflow shows as a non-finite `s` or `c` at the
/// end). When an error of `c` is not zero, the group takes the
/// expansion ([`Expansion`]).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct TwoTerm {
    s: f64,
    c: f64,
    /// An error of `c` was not zero.
    inexact: bool,
}

impl TwoTerm {
    #[inline(always)]
    pub(crate) fn of(x: f64) -> TwoTerm {
        TwoTerm {
            s: x,
            c: 0.0,
            inexact: false,
        }
    }

    #[inline(always)]
    pub(crate) fn add(&mut self, x: f64) {
        let (s, e) = two_sum(self.s, x);
        let (c, f) = two_sum(self.c, e);
        self.s = s;
        self.c = c;
        self.inexact |= f != 0.0;
    }

    /// The correctly rounded sum, when it is known here and finite. An
    /// exact zero takes the builder's sign: the running sum `s` is `-0.0`
    /// exactly when every term was (IEEE addition gives `-0.0` only for
    /// two negative zeros), and `+0.0` otherwise.
    #[inline(always)]
    pub(crate) fn round(&self) -> Option<f64> {
        let (hi, lo) = two_sum(self.s, self.c);
        if self.inexact || !hi.is_finite() || !lo.is_finite() {
            return None;
        }
        if hi == 0.0 {
            return Some(if is_negative_zero(self.s) { -0.0 } else { 0.0 });
        }
        Some(hi)
    }
}

/// [`TwoTerm`] over `L` groups of `N` terms at once (`term(l, j)` is term
/// `j` of group `l`): the same arithmetic lane by lane, term `j` of every
/// group before term `j + 1`, so the compiler makes vector instructions of
/// it. One group's TwoSums are one chain of 12 dependent-ish flops per
/// term; `L` independent chains side by side cost about what one does.
/// It is [`TwoTerm::add`] with each field an array: an array of
/// `TwoTerm`s does not vectorise (117.5 ms against 95.8 ms in
/// `benches/refill_kernels.rs`).
#[inline(always)]
pub(crate) fn two_term_lanes<const N: usize, const L: usize>(
    term: impl Fn(usize, usize) -> f64,
) -> [Option<f64>; L] {
    let mut s: [f64; L] = std::array::from_fn(|l| term(l, 0));
    let mut c = [0.0f64; L];
    let mut inexact = [false; L];
    for j in 1..N {
        let x: [f64; L] = std::array::from_fn(|l| term(l, j));
        for l in 0..L {
            let (s2, e) = two_sum(s[l], x[l]);
            let (c2, f) = two_sum(c[l], e);
            s[l] = s2;
            c[l] = c2;
            inexact[l] |= f != 0.0;
        }
    }
    std::array::from_fn(|l| {
        TwoTerm {
            s: s[l],
            c: c[l],
            inexact: inexact[l],
        }
        .round()
    })
}

/// Whether `x` is `-0.0`.
#[inline(always)]
fn is_negative_zero(x: f64) -> bool {
    x == 0.0 && x.is_sign_negative()
}

/// The sum of two f64 lanes when one IEEE addition holds it: always the
/// correctly rounded sum of two terms, its zero signed as the builder
/// signs it (`-0.0` only for two negative zeros); None when not finite.
#[inline(always)]
fn pair_sum(a: u64, b: u64) -> Option<f64> {
    let s = f64::from_bits(a) + f64::from_bits(b);
    s.is_finite().then_some(s)
}

impl ExactF64<'_> {
    /// The correctly rounded sum when the fast path holds it.
    #[inline(always)]
    fn fast(group: &[u64]) -> Option<f64> {
        match group {
            [a] => {
                let x = f64::from_bits(*a);
                x.is_finite().then_some(x)
            }
            [a, rest @ ..] => {
                let mut t = TwoTerm::of(f64::from_bits(*a));
                for &r in rest {
                    t.add(f64::from_bits(r));
                }
                t.round().or_else(|| {
                    let mut e = Expansion::of(f64::from_bits(*a));
                    for &r in rest {
                        e.add(f64::from_bits(r));
                    }
                    e.round()
                })
            }
            [] => None,
        }
    }
}

impl Reduce<u64> for ExactF64<'_> {
    #[inline(always)]
    fn reduce(&self, group: &[u64]) -> Result<Option<u64>, CombineError> {
        match Self::fast(group).and_then(|v| self.keeps(v)) {
            Some(l) => Ok(Some(l)),
            None => self.general.reduce(group),
        }
    }
    type Acc = TwoTerm;
    const ONLINE: bool = true;
    #[inline(always)]
    fn start(l: u64) -> TwoTerm {
        TwoTerm::of(f64::from_bits(l))
    }
    #[inline(always)]
    fn add(acc: &mut TwoTerm, l: u64) {
        acc.add(f64::from_bits(l));
    }
    #[inline(always)]
    fn done(&self, acc: &TwoTerm) -> Option<u64> {
        self.keeps(acc.round()?)
    }
    #[inline(always)]
    fn pair(&self, a: u64, b: u64) -> Option<u64> {
        self.keeps(pair_sum(a, b)?)
    }
}

impl ExactF64<'_> {
    /// The stored lane of a sum the fast path holds, or None for a zero
    /// this reduction drops (the general path drops it and counts it).
    #[inline(always)]
    fn keeps(&self, v: f64) -> Option<u64> {
        (!(self.general.drop_zeros && v == 0.0)).then_some(v.to_bits())
    }
}

/// An element of a result made from the lane its reduction wrote (a
/// wider lane, for complex values say, brings its own impls).
pub trait FromLane<L: Lane> {
    /// The element whose bits the reduction put in `l`.
    fn from_lane_bits(l: L) -> Self;
}

impl<O: OutValue> FromLane<u64> for O {
    /// The element whose raw lane ([`value_to_raw`]) is `l`.
    #[inline(always)]
    fn from_lane_bits(l: u64) -> O {
        O::from_value(raw_to_value(O::DTYPE, l))
    }
}

/// An element type of a result: a real element type, whose stored value
/// travels in a u64 lane between the reduction and the copy into the
/// result (`Value::to_le` of the element type is what the file writer
/// would store).
pub use crate::element::RealElement as OutValue;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::DType;

    /// The general complex reducer of exact sums, zeros kept.
    fn complex_sum(comb: &FloatSum) -> ComplexReduce<'_, FloatSum> {
        ComplexReduce {
            comb,
            drop_zeros: false,
            exact_f64: false,
        }
    }

    /// The online complex128 sum (pair shortcut, two folds) gives the
    /// general reducer's bits whenever it claims a group.
    #[test]
    fn complex_exact_f64_online_matches_the_general_reducer() {
        let comb = FloatSum(DType::F64);
        let general = complex_sum(&comb);
        let fast = ComplexExactF64 {
            general: complex_sum(&comb),
        };
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let pick = |r: u64| match r % 6 {
            0 => 0.0,
            1 => -1e16,
            2 => 1e16,
            3 => f64::from_bits(r.rotate_left(17).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            _ => ((r >> 8) % 1000) as f64 * 0.1 - 50.0,
        };
        let mut claimed = 0;
        for _ in 0..100_000 {
            let k = 1 + (next() % 9) as usize;
            let g: Vec<[u64; 2]> = (0..k)
                .map(|_| [pick(next()).to_bits(), pick(next()).to_bits()])
                .collect();
            let want = general.reduce(&g).unwrap();
            let mut acc = ComplexExactF64::start(g[0]);
            for &l in &g[1..] {
                ComplexExactF64::add(&mut acc, l);
            }
            if let Some(v) = fast.done(&acc) {
                claimed += 1;
                assert_eq!(Some(v), want, "{g:?}");
            }
            if let [a, b] = g[..] {
                if let Some(v) = fast.pair(a, b) {
                    assert_eq!(Some(v), want, "pair {g:?}");
                }
            }
        }
        assert!(
            claimed > 10_000,
            "the online path claimed only {claimed} groups"
        );
    }

    /// The fast exact path gives the builder's bits (combine_group then
    /// finish) on groups of values of wildly different magnitudes, with
    /// cancellations, ties and specials; online and gathered alike.
    #[test]
    fn exact_f64_matches_the_builders_combiner() {
        let comb = FloatSum(DType::F64);
        let general = RawReduce {
            comb: &comb,
            drop_zeros: false,
        };
        let fast = ExactF64 {
            general: RawReduce {
                comb: &comb,
                drop_zeros: false,
            },
        };
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let specials = [
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
        ];
        for _ in 0..200_000 {
            let k = 1 + (next() % 12) as usize;
            let mut g = Vec::with_capacity(k);
            for _ in 0..k {
                let r = next();
                let x = match r % 10 {
                    0 => specials[(r >> 8) as usize % specials.len()],
                    // Random bits: any exponent.
                    1 => f64::from_bits(next()),
                    // Ties and cancellations around 1.
                    2 => 1.0 + ((r >> 12) % 8) as f64 * f64::EPSILON / 2.0,
                    3 => -1.0,
                    _ => {
                        let m = (next() >> 11) as f64 / (1u64 << 53) as f64 + 0.5;
                        let e = ((r >> 8) % 120) as i32 - 60;
                        let sign = if r & 1 == 0 { 1.0 } else { -1.0 };
                        sign * m * 2f64.powi(e)
                    }
                };
                g.push(x.to_bits());
            }
            let want = general.reduce(&g).unwrap();
            let got = fast.reduce(&g).unwrap();
            let same = |a: Option<u64>, b: Option<u64>| match (a, b) {
                (Some(a), Some(b)) => {
                    a == b || (f64::from_bits(a).is_nan() && f64::from_bits(b).is_nan())
                }
                (a, b) => a == b,
            };
            assert!(
                same(got, want),
                "{:?}: {got:?} vs {want:?}",
                g.iter().map(|&b| f64::from_bits(b)).collect::<Vec<_>>()
            );
            let mut acc = ExactF64::start(g[0]);
            for &l in &g[1..] {
                ExactF64::add(&mut acc, l);
            }
            if let Some(v) = fast.done(&acc) {
                assert_eq!(Some(v), want, "online");
            }
        }
    }

    /// Zero sums (all-zero groups, signed zeros, exact cancellations)
    /// stay on the fast path, online, in pairs and gathered, with the
    /// builder's bits; under `drop_zeros` they leave it, so the general
    /// path drops and counts them.
    #[test]
    fn zero_sums_stay_on_the_fast_path_with_the_builders_sign() {
        let comb = FloatSum(DType::F64);
        let raw = |drop_zeros| RawReduce {
            comb: &comb,
            drop_zeros,
        };
        let groups: [&[f64]; 9] = [
            &[0.0],
            &[-0.0],
            &[0.0, 0.0],
            &[-0.0, -0.0],
            &[-0.0, 0.0, -0.0],
            &[1.5, -1.5],
            &[-0.0, 1e300, -1e300],
            &[0.1, 0.2, -0.3, -0.1, 0.1],
            &[-0.0, -0.0, -0.0, -0.0, -0.0],
        ];
        for g in groups {
            let lanes: Vec<u64> = g.iter().map(|x| x.to_bits()).collect();
            let want = raw(false).reduce(&lanes).unwrap();
            let fast = ExactF64 {
                general: raw(false),
            };
            assert_eq!(ExactF64::fast(&lanes).map(f64::to_bits), want, "{g:?}");
            assert_eq!(fast.reduce(&lanes).unwrap(), want, "{g:?}");
            let mut acc = ExactF64::start(lanes[0]);
            for &l in &lanes[1..] {
                ExactF64::add(&mut acc, l);
            }
            let claimed = fast.done(&acc);
            if want.is_some_and(|w| f64::from_bits(w) == 0.0) {
                assert_eq!(claimed, want, "online {g:?}");
                if let [a, b] = lanes[..] {
                    assert_eq!(fast.pair(a, b), want, "pair {g:?}");
                }
                let dropping = ExactF64 { general: raw(true) };
                assert_eq!(dropping.done(&acc), None, "dropped online {g:?}");
                assert_eq!(dropping.reduce(&lanes).unwrap(), None, "dropped {g:?}");
            }
            // Complex: each part its own group, the other part zero.
            let general = complex_sum(&comb);
            let fast = ComplexExactF64 {
                general: complex_sum(&comb),
            };
            for swap in [false, true] {
                let c: Vec<[u64; 2]> = lanes
                    .iter()
                    .map(|&l| if swap { [0, l] } else { [l, 0] })
                    .collect();
                let want = general.reduce(&c).unwrap();
                let mut acc = ComplexExactF64::start(c[0]);
                for &l in &c[1..] {
                    ComplexExactF64::add(&mut acc, l);
                }
                assert_eq!(fast.done(&acc), want, "complex {swap} {g:?}");
            }
        }
    }
}
