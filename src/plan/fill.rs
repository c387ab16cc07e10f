//! The refill: every entry's contributions, gathered from the caller's
//! value array by the plan's `order`, reduced by the same reducers the
//! in-memory kernel uses (so the values are bit for bit a full
//! assembly's), written into the caller's result slice. The entries are
//! split between the threads by contribution count.

use crate::assemble::combine::CombineError;
use crate::assemble::combine::value_refusal;
use crate::assemble::combine::{CombinerKind, FloatFastSum, FloatSum};
use crate::assemble::direct::input::{F64Bits, Source};
use crate::assemble::direct::lane::{ExactF64, RawReduce, Reduce, TwoTerm, two_term_lanes};
use crate::assemble::direct::{DirectValue, stopped};
use crate::element::DType;
use crate::error::Error;
use crate::options::NonFinitePolicy;
use crate::read::coo::prefetch;
use std::sync::atomic::AtomicBool;

/// Below this many contributions the refill runs on the calling thread.
const PARALLEL_MIN: usize = 1 << 16;
/// How often (in entries) a thread looks at the stop flag.
const STOP_EVERY: usize = 1 << 16;
/// Entries ahead whose values are prefetched: an entry's contributions
/// lie far apart in the caller's array (other elements), so the gather
/// waits on memory unless it is asked for early.
const PREFETCH_AHEAD: usize = 16;

/// Where a refill reads its values: one slice, or two laid end to end
/// (contribution `k` is `head[k]`, then `tail[k - head.len()]`), so that a
/// caller whose values come in two places (a rank's own, and what other
/// ranks sent it) need not copy them into one.
#[derive(Clone, Copy)]
pub(crate) struct Values<'a, V> {
    pub(crate) head: &'a [V],
    pub(crate) tail: &'a [V],
}

impl<'a, V: Copy> Values<'a, V> {
    /// One slice.
    pub(crate) fn one(v: &'a [V]) -> Values<'a, V> {
        Values { head: v, tail: &[] }
    }

    /// Values in all.
    pub(crate) fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    /// Value `k`.
    #[inline(always)]
    fn get(&self, k: usize) -> Option<V> {
        match self.head.get(k) {
            Some(&v) => Some(v),
            None => self.tail.get(k - self.head.len()).copied(),
        }
    }

    #[inline(always)]
    fn prefetch(&self, k: usize) {
        if k < self.head.len() {
            prefetch(self.head, k);
        } else {
            prefetch(self.tail, k - self.head.len());
        }
    }

    /// The same values as `U` when both slices are.
    pub(crate) fn cast<U>(&self, f: impl Fn(&'a [V]) -> Option<&'a [U]>) -> Option<Values<'a, U>> {
        Some(Values {
            head: f(self.head)?,
            tail: f(self.tail)?,
        })
    }
}

/// Why a piece of the refill stopped.
pub(crate) enum Stop {
    /// A value a push would refuse (the caller finds the first).
    BadValue,
    /// Entry `entry` did not combine.
    Combine { entry: usize, why: CombineError },
    /// The caller's stop flag.
    Stopped,
    /// A reducer dropped a value (cannot happen: plans refuse drop_zeros).
    Dropped,
    /// The lanes of a result whose type is not its lanes' could not be
    /// allocated (`bytes` of them).
    OutOfMemory { bytes: u64 },
}

/// Refill entries `e0..e0 + out.len()`, each as its lane (the caller
/// turns lanes into the result's type: the kernel is compiled once per
/// value type and reducer, not once per result type as well).
#[allow(clippy::too_many_arguments)]
fn fill_part<V, T, R>(
    values: Values<'_, V>,
    order: &[u32],
    starts: &[u32],
    e0: usize,
    out: &mut [T::L],
    to: &T,
    red: &R,
    stop: Option<&AtomicBool>,
) -> std::result::Result<(), Stop>
where
    V: Copy,
    T: Source<V>,
    R: Reduce<T::L>,
{
    let mut group: Vec<T::L> = Vec::new();
    let lane = |k: u32| -> std::result::Result<T::L, Stop> {
        match values.get(k as usize) {
            Some(v) => to.lane(v).ok_or(Stop::BadValue),
            None => Err(Stop::BadValue),
        }
    };
    for (i, o) in out.iter_mut().enumerate() {
        let e = e0 + i;
        if i % STOP_EVERY == 0 && stopped(stop) {
            return Err(Stop::Stopped);
        }
        if let (Some(&a), Some(&b)) = (
            starts.get(e + PREFETCH_AHEAD),
            starts.get(e + PREFETCH_AHEAD + 1),
        ) {
            for &k in order.get(a as usize..b as usize).unwrap_or(&[]) {
                values.prefetch(k as usize);
            }
        }
        let (s, t) = (starts[e] as usize, starts[e + 1] as usize);
        let g = &order[s..t];
        let Some((&first, rest)) = g.split_first() else {
            return Err(Stop::Dropped);
        };
        if R::ONLINE {
            if let [a, b] = g {
                if let Some(l) = red.pair(lane(*a)?, lane(*b)?) {
                    *o = l;
                    continue;
                }
            }
            let mut acc = R::start(lane(first)?);
            for &k in rest {
                R::add(&mut acc, lane(k)?);
            }
            if let Some(l) = red.done(&acc) {
                *o = l;
                continue;
            }
        }
        group.clear();
        for &k in g {
            group.push(lane(k)?);
        }
        match red.reduce(&group) {
            Ok(Some(l)) => *o = l,
            Ok(None) => return Err(Stop::Dropped),
            Err(why) => return Err(Stop::Combine { entry: e, why }),
        }
    }
    Ok(())
}

/// Refill every entry into `out` on up to `threads` threads; the first
/// stop in storage order when any.
#[allow(clippy::too_many_arguments)]
pub(crate) fn fill<V, T, R>(
    values: Values<'_, V>,
    order: &[u32],
    starts: &[u32],
    out: &mut [T::L],
    to: &T,
    red: &R,
    threads: usize,
    stop: Option<&AtomicBool>,
) -> std::result::Result<(), Stop>
where
    V: Copy + Sync,
    T: Source<V>,
    R: Reduce<T::L>,
{
    in_pieces(order, starts, out, threads, |e0, piece| {
        fill_part(values, order, starts, e0, piece, to, red, stop)
    })
}

/// How [`sum_f64`] adds: exactly (the correctly rounded sum), or in
/// arrival order (`exact_sums = false`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum F64Sum {
    Exact,
    InOrder,
}

impl F64Sum {
    /// The sum of a combiner that adds floats; None for the others.
    pub(crate) fn of(kind: CombinerKind) -> Option<F64Sum> {
        match kind {
            CombinerKind::FloatSum => Some(F64Sum::Exact),
            CombinerKind::FloatFastSum => Some(F64Sum::InOrder),
            _ => None,
        }
    }
}

/// The hot case on its own: f64 values summed into an f64 result, every
/// value kept (no policy to check). An entry of one contribution is a
/// load, of two one addition (correctly rounded, and in arrival order);
/// a longer one a [`TwoTerm`] fold (exact) or a plain fold. Only an entry
/// whose sum is not finite, or not known exact here, takes the general
/// path ([`fill_part`], the same reducer as every other refill), so the
/// result is bit for bit what [`fill`] gives: this is `fill` without the
/// per-value conversion and per-group dispatch, which were most of its
/// time on FE plans (groups of 1, 2, 4 and 8).
pub(crate) fn sum_f64(
    sum: F64Sum,
    values: Values<'_, f64>,
    order: &[u32],
    starts: &[u32],
    out: &mut [u64],
    threads: usize,
    stop: Option<&AtomicBool>,
) -> std::result::Result<(), Stop> {
    in_pieces(order, starts, out, threads, |e0, piece| match sum {
        F64Sum::Exact => {
            let red = ExactF64 {
                general: RawReduce {
                    comb: &FloatSum(DType::F64),
                    drop_zeros: false,
                },
            };
            sum_part::<true, _>(values, order, starts, e0, piece, &red, stop)
        }
        F64Sum::InOrder => {
            let red = RawReduce {
                comb: &FloatFastSum(DType::F64),
                drop_zeros: false,
            };
            sum_part::<false, _>(values, order, starts, e0, piece, &red, stop)
        }
    })
}

/// [`sum_f64`] over entries `e0..e0 + out.len()`; `red` is the general
/// path of an entry the fast one does not hold.
fn sum_part<const EXACT: bool, R: Reduce<u64>>(
    values: Values<'_, f64>,
    order: &[u32],
    starts: &[u32],
    e0: usize,
    out: &mut [u64],
    red: &R,
    stop: Option<&AtomicBool>,
) -> std::result::Result<(), Stop> {
    let (head, tail) = (values.head, values.tail);
    // A position past the values reads as NaN: the entry then takes the
    // general path, which names it. One slice (every one-process refill)
    // is its own loop: no second test per value.
    let general = |e, o: &mut [u64]| fill_part(values, order, starts, e, o, &F64Bits, red, None);
    if tail.is_empty() {
        let value = |k: u32| head.get(k as usize).copied().unwrap_or(f64::NAN);
        let pf = |k: u32| prefetch(head, k as usize);
        sum_entries::<EXACT>(value, pf, order, starts, e0, out, stop, &general)
    } else {
        let value = |k: u32| values.get(k as usize).unwrap_or(f64::NAN);
        let pf = |k: u32| values.prefetch(k as usize);
        sum_entries::<EXACT>(value, pf, order, starts, e0, out, stop, &general)
    }
}

/// The loop of [`sum_part`]: each entry's sum from `value` of its
/// positions (`prefetch` asks for one ahead); `general(e, out)` refills
/// an entry whose sum is not finite or not known exact.
///
/// An exact entry of 3 to [`LANE_MAX`] contributions waits until
/// [`LANES`] entries of its count have come; they are then summed side by
/// side, which the compiler makes vector instructions of (the exact fold
/// is 12 flops per value, in a chain within one entry).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn sum_entries<const EXACT: bool>(
    value: impl Fn(u32) -> f64,
    prefetch: impl Fn(u32),
    order: &[u32],
    starts: &[u32],
    e0: usize,
    out: &mut [u64],
    stop: Option<&AtomicBool>,
    general: impl Fn(usize, &mut [u64]) -> std::result::Result<(), Stop>,
) -> std::result::Result<(), Stop> {
    let Some(starts) = starts.get(e0..e0 + out.len() + 1) else {
        return Err(Stop::Dropped);
    };
    for (c, (outs, bounds)) in out
        .chunks_mut(STOP_EVERY)
        .zip(starts.chunks(STOP_EVERY))
        .enumerate()
    {
        if stopped(stop) {
            return Err(Stop::Stopped);
        }
        let e1 = e0 + c * STOP_EVERY;
        let mut s = bounds[0] as usize;
        let mut waiting = [Waiting::default(); LANE_MAX - 2];
        let mut redo = false;
        // The last entry of a chunk ends where the next chunk starts.
        let ends = bounds[1..].iter().chain(starts.get(e1 - e0 + bounds.len()));
        for (i, &t) in (0..outs.len()).zip(ends) {
            let t = t as usize;
            // An entry's values lie in several elements far apart: asked
            // for early, their loads overlap the sums before them.
            for &k in order.get(s + AHEAD..t + AHEAD).unwrap_or(&[]) {
                prefetch(k);
            }
            let v = match order.get(s..t).unwrap_or(&[]) {
                [] => return Err(Stop::Dropped),
                &[a] => value(a),
                &[a, b] => value(a) + value(b),
                g if EXACT && g.len() <= LANE_MAX => {
                    let w = &mut waiting[g.len() - 3];
                    w.at[w.n] = (i, s);
                    w.n += 1;
                    s = t;
                    if w.n == LANES {
                        w.n = 0;
                        let at = w.at;
                        sum_waiting(g.len(), &value, order, &at, outs, &mut redo)?;
                    }
                    continue;
                }
                g => sum_one::<EXACT>(&value, g),
            };
            s = t;
            put(outs, i, v, &mut redo)?;
        }
        // The entries that found fewer than LANES of their count.
        for (w, n) in waiting.iter().zip(3..) {
            for &(i, s) in &w.at[..w.n] {
                let g = order.get(s..s + n).ok_or(Stop::Dropped)?;
                put(outs, i, sum_one::<EXACT>(&value, g), &mut redo)?;
            }
        }
        if redo {
            for (i, o) in outs.iter_mut().enumerate() {
                if !f64::from_bits(*o).is_finite() {
                    cold_general(&general, e1 + i, std::slice::from_mut(o))?;
                }
            }
        }
    }
    Ok(())
}

/// Contributions ahead (in `order`) whose values [`sum_entries`] asks for.
const AHEAD: usize = 48;
/// Exact entries of 3 to `LANE_MAX` contributions are summed `LANES` of
/// one count at once (FE entries have 1, 2, 4 or 8 in 3D, up to 6 in 2D).
const LANES: usize = 4;
const LANE_MAX: usize = 8;

/// Exact entries of one count waiting for [`LANES`] of them: (entry in
/// the chunk, its first position in `order`).
#[derive(Clone, Copy, Default)]
struct Waiting {
    at: [(usize, usize); LANES],
    n: usize,
}

/// Write entry `i`'s sum `v`; a sum that is not finite (not known here)
/// is marked in `redo`, for the general path after the chunk: no branch
/// here waits on the value's load.
#[inline(always)]
fn put(outs: &mut [u64], i: usize, v: f64, redo: &mut bool) -> std::result::Result<(), Stop> {
    *outs.get_mut(i).ok_or(Stop::Dropped)? = v.to_bits();
    *redo |= !v.is_finite();
    Ok(())
}

/// One entry's sum: exact ([`TwoTerm`]; NaN when not known here) or in
/// arrival order.
#[inline(always)]
fn sum_one<const EXACT: bool>(value: &impl Fn(u32) -> f64, g: &[u32]) -> f64 {
    let Some((&a, rest)) = g.split_first() else {
        return f64::NAN;
    };
    if EXACT {
        let mut acc = TwoTerm::of(value(a));
        for &k in rest {
            acc.add(value(k));
        }
        acc.round().unwrap_or(f64::NAN)
    } else {
        rest.iter().fold(value(a), |acc, &k| acc + value(k))
    }
}

/// The exact sums of [`LANES`] waiting entries of `n` contributions each
/// (`at`: their places in the chunk and first positions in `order`).
#[inline(always)]
fn sum_waiting(
    n: usize,
    value: &impl Fn(u32) -> f64,
    order: &[u32],
    at: &[(usize, usize); LANES],
    outs: &mut [u64],
    redo: &mut bool,
) -> std::result::Result<(), Stop> {
    // One copy per count: the count is each fold's length, known here.
    macro_rules! by_count {
        ($($n:literal)*) => {
            match n {
                $($n => {
                    let mut groups = [&[0u32; $n]; LANES];
                    for (g, &(_, s)) in groups.iter_mut().zip(at) {
                        *g = order
                            .get(s..s + $n)
                            .and_then(|x| x.try_into().ok())
                            .ok_or(Stop::Dropped)?;
                    }
                    let sums = two_term_lanes::<$n, LANES>(|l, j| value(groups[l][j]));
                    for (&(i, _), v) in at.iter().zip(sums) {
                        put(outs, i, v.unwrap_or(f64::NAN), redo)?;
                    }
                    Ok(())
                })*
                _ => Err(Stop::Dropped),
            }
        };
    }
    by_count!(3 4 5 6 7 8)
}

/// The general path of one entry, out of the hot loop.
#[cold]
#[inline(never)]
fn cold_general(
    general: &impl Fn(usize, &mut [u64]) -> std::result::Result<(), Stop>,
    e: usize,
    o: &mut [u64],
) -> std::result::Result<(), Stop> {
    general(e, o)
}

/// Sums in arrival order by scattering: every entry starts at `-0.0` (the
/// start of the builder's in-order sum, so an entry of `-0.0` values stays
/// `-0.0`), then each value in array order is added to its slot's entry.
/// Contributions slotted `u32::MAX` (skipped) add nothing. `stop` is
/// looked at every [`STOP_EVERY`] contributions, as the other paths do.
pub(crate) fn scatter_f64(
    values: Values<'_, f64>,
    slots: &[u32],
    out: &mut [f64],
    stop: Option<&AtomicBool>,
) -> std::result::Result<(), Stop> {
    out.fill(-0.0);
    let (head_slots, tail_slots) = slots.split_at(values.head.len().min(slots.len()));
    for (part, slots) in [(values.head, head_slots), (values.tail, tail_slots)] {
        for (vs, es) in part.chunks(STOP_EVERY).zip(slots.chunks(STOP_EVERY)) {
            if stopped(stop) {
                return Err(Stop::Stopped);
            }
            for (&v, &e) in vs.iter().zip(es) {
                if let Some(o) = out.get_mut(e as usize) {
                    *o += v;
                }
            }
        }
    }
    Ok(())
}

/// Run `part(e0, piece)` over `out` cut into pieces of about as many
/// contributions each, one thread per piece (one piece below
/// [`PARALLEL_MIN`] contributions); the first stop in storage order.
fn in_pieces<L: Send>(
    order: &[u32],
    starts: &[u32],
    out: &mut [L],
    threads: usize,
    part: impl Fn(usize, &mut [L]) -> std::result::Result<(), Stop> + Sync,
) -> std::result::Result<(), Stop> {
    let nnz = out.len();
    let n = order.len();
    let threads = if n < PARALLEL_MIN { 1 } else { threads.max(1) };
    if threads == 1 {
        return part(0, out);
    }
    // Cut the entries where the contributions split evenly.
    let mut cuts = vec![0usize];
    for t in 1..threads {
        let target = (n * t / threads) as u32;
        let e = starts[..nnz].partition_point(|&s| s < target);
        cuts.push(e.max(*cuts.last().unwrap_or(&0)));
    }
    cuts.push(nnz);
    let mut pieces = Vec::with_capacity(threads);
    let mut rest: &mut [L] = out;
    for w in cuts.windows(2) {
        let (a, b) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
        rest = b;
        pieces.push((w[0], a));
    }
    let part = &part;
    let results: Vec<std::result::Result<(), Stop>> = std::thread::scope(|s| {
        let hs: Vec<_> = pieces
            .into_iter()
            .map(|(e0, piece)| s.spawn(move || part(e0, piece)))
            .collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or(Err(Stop::Dropped)))
            .collect()
    });
    // A refused value first (a push refuses it before anything combines),
    // then the first entry in storage order that did not combine.
    let mut first: Option<Stop> = None;
    for r in results {
        match r {
            Ok(()) => {}
            Err(Stop::BadValue) => return Err(Stop::BadValue),
            Err(e) => {
                if first.is_none() {
                    first = Some(e);
                }
            }
        }
    }
    first.map_or(Ok(()), Err)
}

/// The error of the first value (in array order) a push would refuse.
pub(crate) fn first_bad_value<V: DirectValue>(
    values: Values<'_, V>,
    dtype: DType,
    policy: NonFinitePolicy,
) -> Error {
    for (k, &v) in values.head.iter().chain(values.tail).enumerate() {
        if let Some(e) = value_refusal(v, dtype, policy, k as u64) {
            return e;
        }
    }
    Error::InvalidArgument("the values changed while they were refilled".into())
}

#[cfg(test)]
mod tests {
    use crate::options::OutputLayout;
    use crate::{AssembleOptions, DType, Plan};

    /// Contributions to a 5 x 5 CSR matrix in groups of 1 to 7 (one
    /// skipped by a negative row), with values whose exact sums need more
    /// than two terms (`2^60` against small ones), and the entry of each
    /// contribution (None: skipped).
    fn case() -> (Vec<i64>, Vec<i64>, Vec<f64>, Vec<Option<usize>>) {
        let (mut r, mut c, mut v) = (Vec::new(), Vec::new(), Vec::new());
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for k in 0..300usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let big = if k % 5 == 0 { 2f64.powi(60) } else { 1.0 };
            let sign = if x & 1 == 0 { 1.0 } else { -1.0 };
            r.push(((x >> 8) % 5) as i64 - i64::from(k == 17));
            c.push(((x >> 16) % 5) as i64);
            v.push(sign * big * ((x >> 24) % 1000) as f64 / 64.0);
        }
        v[3] = -0.0;
        let entry = r
            .iter()
            .zip(&c)
            .map(|(&r, &c)| (r >= 0).then_some((r * 5 + c) as usize))
            .collect();
        (r, c, v, entry)
    }

    fn plan(exact_sums: bool, threads: usize) -> Plan {
        let (r, c, _, _) = case();
        let opts = AssembleOptions {
            layout: OutputLayout::Csr,
            exact_sums,
            threads,
            skip_negative: true,
            ..Default::default()
        };
        Plan::new(&[&r[..], &c[..]], &[5, 5], DType::F64, &opts, None).expect("plan")
    }

    /// The dense 5 x 5 result as the plan's entries (every coordinate is hit).
    fn dense(p: &Plan, out: &[f64]) -> Vec<f64> {
        let ptr: Vec<u64> = p.pointers().expect("pointers");
        let idx: Vec<u64> = p.indices().expect("indices");
        let mut d = vec![f64::NAN; 25];
        for row in 0..5 {
            for e in ptr[row] as usize..ptr[row + 1] as usize {
                d[row * 5 + idx[e] as usize] = out[e];
            }
        }
        d
    }

    #[test]
    fn exact_sums_are_the_correctly_rounded_sums_from_one_slice_or_two() {
        let (_, _, v, entry) = case();
        // Every value is an integer over 64: the exact sum in i128.
        let mut exact = [0i128; 25];
        for (x, e) in v.iter().zip(&entry) {
            if let Some(e) = e {
                exact[*e] += (x * 64.0) as i128;
            }
        }
        let want: Vec<f64> = exact.iter().map(|&s| s as f64 / 64.0).collect();
        for threads in [1, 2] {
            let p = plan(true, threads);
            let mut out = vec![0.0; p.nnz()];
            p.assemble_into(&v, &mut out, None).expect("refill");
            assert_eq!(dense(&p, &out), want);
            for cut in [0, 1, 150, 299, 300] {
                let mut split = vec![0.0; p.nnz()];
                p.assemble_split_into(&v[..cut], &v[cut..], &mut split, None)
                    .expect("split refill");
                assert_eq!(split, out, "cut at {cut}");
            }
        }
    }

    #[test]
    fn in_order_sums_fold_from_negative_zero_in_array_order() {
        let (_, _, v, entry) = case();
        let mut want = [-0.0f64; 25];
        for (x, e) in v.iter().zip(&entry) {
            if let Some(e) = e {
                want[*e] += x;
            }
        }
        // One thread scatters, two gather: the same bits.
        for threads in [1, 2] {
            let p = plan(false, threads);
            for cut in [0, 7, 300] {
                let mut out = vec![0.0; p.nnz()];
                p.assemble_split_into(&v[..cut], &v[cut..], &mut out, None)
                    .expect("refill");
                let got = dense(&p, &out);
                let bits = |s: &[f64]| s.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{threads} threads, cut at {cut}");
            }
        }
    }

    /// Entries of 1 to 10 contributions, counts mixed and values
    /// interleaved, over more than one stop chunk: the entries of 3 to 8
    /// summed four at a time, those left waiting at a chunk's end, and those that
    /// take the general path (terms of `2^60`, an overflow on the way,
    /// `-0.0` alone, TwoSum errors that do not add exactly) all give the
    /// correctly rounded sum, from one slice or two, on 1 or 2 threads.
    #[test]
    fn entries_summed_side_by_side_are_the_correctly_rounded_sums() {
        let m = super::STOP_EVERY + 4_500;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // (entry, value) in an order that spreads each entry's values.
        let mut contribs: Vec<(u64, f64)> = Vec::new();
        for e in 0..m as u64 {
            let n = 1 + rnd() % 10;
            for _ in 0..n {
                let r = rnd();
                let big = if r % 23 == 0 { 2f64.powi(60) } else { 1.0 };
                let sign = if r & 1 == 0 { 1.0 } else { -1.0 };
                let v = if e % 97 == 0 {
                    -0.0
                } else {
                    sign * big * ((r >> 8) % 1000) as f64 / 64.0
                };
                contribs.push((e, v));
            }
        }
        // An overflow on the way to a finite sum, in a group of four; a
        // sum whose TwoSum errors do not add exactly (1 + 2^-53 + 2^-105
        // rounds up to 1 + 2^-52), in a group of five, in this order.
        let huge = [1e308, 1e308, -1e308, 0.5];
        let p = |e: i32| 2f64.powi(e);
        let fine = [1.0, p(-53), p(60), p(-105), -p(60)];
        contribs.retain(|c| c.0 != 7 && c.0 != 11);
        contribs.extend(huge.iter().map(|&v| (7, v)));
        for k in (1..contribs.len()).rev() {
            let j = (rnd() % (k as u64 + 1)) as usize;
            contribs.swap(k, j);
        }
        contribs.extend(fine.iter().map(|&v| (11, v)));
        let mut exact = vec![0i128; m];
        let mut all_negative_zero = vec![true; m];
        for &(e, v) in &contribs {
            if e != 7 && e != 11 {
                exact[e as usize] += (v * 64.0) as i128;
            }
            all_negative_zero[e as usize] &= v == 0.0 && v.is_sign_negative();
        }
        let want: Vec<u64> = (0..m)
            .map(|e| match e {
                7 => 1e308f64.to_bits(),
                11 => (1.0f64 + p(-52)).to_bits(),
                _ if all_negative_zero[e] => (-0.0f64).to_bits(),
                _ => (exact[e] as f64 / 64.0).to_bits(),
            })
            .collect();
        let rows = vec![0i64; contribs.len()];
        let cols: Vec<i64> = contribs.iter().map(|c| c.0 as i64).collect();
        let vals: Vec<f64> = contribs.iter().map(|c| c.1).collect();
        for threads in [1, 2] {
            let opts = AssembleOptions {
                layout: OutputLayout::Csr,
                threads,
                ..Default::default()
            };
            let p = Plan::new(
                &[&rows[..], &cols[..]],
                &[1, m as u64],
                DType::F64,
                &opts,
                None,
            )
            .expect("plan");
            assert_eq!(p.nnz(), m);
            for cut in [0, vals.len() / 3, vals.len()] {
                let mut out = vec![0.0f64; m];
                p.assemble_split_into(&vals[..cut], &vals[cut..], &mut out, None)
                    .expect("refill");
                let got: Vec<u64> = out.iter().map(|v| v.to_bits()).collect();
                let first = got.iter().zip(&want).position(|(a, b)| a != b);
                assert_eq!(first, None, "{threads} threads, cut at {cut}");
            }
        }
    }
}
