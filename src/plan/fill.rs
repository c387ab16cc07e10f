//! The refill: every entry's contributions, gathered from the caller's
//! value array by the plan's `order`, reduced by the same reducers the
//! in-memory kernel uses (so the values are bit for bit a full
//! assembly's), written into the caller's result slice. The entries are
//! split between the threads by contribution count.

use crate::assemble::combine::CombineError;
use crate::assemble::combine::value_refusal;
use crate::assemble::direct::DirectValue;
use crate::assemble::direct::input::Source;
use crate::assemble::direct::lane::Reduce;
use crate::element::DType;
use crate::error::Error;
use crate::options::NonFinitePolicy;
use crate::read::coo::prefetch;
use std::sync::atomic::{AtomicBool, Ordering};

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
        if i % STOP_EVERY == 0 && stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
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
    let nnz = out.len();
    let n = order.len();
    let threads = if n < PARALLEL_MIN { 1 } else { threads.max(1) };
    if threads == 1 {
        return fill_part(values, order, starts, 0, out, to, red, stop);
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
    let mut rest: &mut [T::L] = out;
    for w in cuts.windows(2) {
        let (a, b) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
        rest = b;
        pieces.push((w[0], a));
    }
    let results: Vec<std::result::Result<(), Stop>> = std::thread::scope(|s| {
        let hs: Vec<_> = pieces
            .into_iter()
            .map(|(e0, piece)| {
                s.spawn(move || fill_part(values, order, starts, e0, piece, to, red, stop))
            })
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
