//! Planning: from the coordinates alone, the storage order of the
//! entries, the contributions of each entry (`order`, `starts`) and the
//! output structure (CSR/CSC pointers and minor indices, or COO tuples).
//!
//! Three passes over the coordinates, on every core, none of them a full
//! sort: count the contributions per bucket (the top bits of the key in
//! storage order), scatter each contribution's position into its bucket
//! (positions stay ascending within a bucket), then order each bucket by
//! (key, position) in cache and cut it into entries.

use super::{Ix, Structure};
use crate::assemble::direct::{IndexElem, bits_of, stopped};
use crate::error::{Error, Result};
use crate::options::OutputLayout;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Bucket bits of the storage-order key: up to 4 Mi buckets.
const BUCKET_BITS: u32 = 22;
/// Below this many contributions everything runs on the calling thread.
const PARALLEL_MIN: usize = 1 << 16;

/// Where a plan's coordinates come from.
pub(crate) trait Coords: Sync {
    /// Contributions.
    fn len(&self) -> usize;
    /// Index of contribution `k` in dimension `d`: Ok(widened) or, for a
    /// negative one, Err(its value).
    fn get(&self, k: usize, d: usize) -> std::result::Result<u64, i128>;
    /// Contributions `from..to` have been read by a streaming pass and
    /// will not be read again soon: a mapped source gives back their pages.
    fn release(&self, from: usize, to: usize) {
        let _ = (from, to);
    }
}

/// Binary records mapped in memory (`rank` u64 indices, then a value of
/// `width` bytes; see `crate::input::bin`), their pages given back as the
/// passes go. `signed`: the indices are i64, a negative one a skipped
/// contribution (a builder's recording, `crate::assemble::record`).
pub(crate) struct BinRecords<'a> {
    pub(crate) input: &'a crate::input::MappedInput,
    pub(crate) rank: usize,
    pub(crate) width: usize,
    pub(crate) signed: bool,
}

impl Coords for BinRecords<'_> {
    fn len(&self) -> usize {
        self.input.bytes().len() / (self.rank * 8 + self.width)
    }
    #[inline(always)]
    fn get(&self, k: usize, d: usize) -> std::result::Result<u64, i128> {
        let at = k * (self.rank * 8 + self.width) + d * 8;
        let b = self.input.bytes();
        let x = b.get(at..at + 8).map_or(u64::MAX, |x| {
            u64::from_le_bytes(x.try_into().unwrap_or([0xff; 8]))
        });
        if self.signed && (x as i64) < 0 {
            return Err(i128::from(x as i64));
        }
        Ok(x)
    }
    fn release(&self, from: usize, to: usize) {
        let rec = self.rank * 8 + self.width;
        self.input.release_range(from * rec, to * rec);
    }
}

/// One index array per dimension, all as long.
pub(crate) struct Arrays<'a, I> {
    pub(crate) dims: &'a [&'a [I]],
}

impl<I: IndexElem> Coords for Arrays<'_, I> {
    fn len(&self) -> usize {
        self.dims.first().map_or(0, |d| d.len())
    }
    #[inline(always)]
    fn get(&self, k: usize, d: usize) -> std::result::Result<u64, i128> {
        signed(self.dims[d][k])
    }
}

/// Element matrices: `dofs` holds `per` degrees of freedom per element;
/// element `e` contributes `per x per` values, row-major, at
/// `(dofs[e * per + a], dofs[e * per + b])`, as `Builder::push_element`
/// pushes them.
pub(crate) struct Elements<'a, I> {
    pub(crate) dofs: &'a [I],
    pub(crate) per: usize,
}

impl<I: IndexElem> Coords for Elements<'_, I> {
    fn len(&self) -> usize {
        (self.dofs.len() / self.per.max(1)) * self.per * self.per
    }
    #[inline(always)]
    fn get(&self, k: usize, d: usize) -> std::result::Result<u64, i128> {
        let p = self.per;
        let (e, r) = (k / (p * p), k % (p * p));
        signed(self.dofs[e * p + if d == 0 { r / p } else { r % p }])
    }
}

#[inline(always)]
fn signed<I: IndexElem>(x: I) -> std::result::Result<u64, i128> {
    if x.is_negative() {
        Err(x.widen() as i64 as i128)
    } else {
        Ok(x.widen())
    }
}

/// The digest of a plan's coordinates: every index as 8 little-endian
/// bytes, contribution by contribution, so that the same coordinates
/// given as arrays of any integer type, or as element matrices, digest
/// alike. Taken by the planning pass that validates the indices.
fn digest_part<C: Coords>(c: &C, rank: usize, from: usize, to: usize) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    // Whole words (little-endian) into a buffer hashed as it fills.
    let mut buf = [0u64; 512];
    let mut at = 0;
    for k in from..to {
        for d in 0..rank {
            // Indices were validated by the same pass.
            // Negative (skipped) indices digest as their i64 bits.
            let x = c.get(k, d).unwrap_or_else(|neg| neg as i64 as u64);
            buf[at] = x.to_le();
            at += 1;
            if at == buf.len() {
                h.update(bytemuck::cast_slice(&buf));
                at = 0;
            }
        }
    }
    h.update(bytemuck::cast_slice(&buf[..at]));
    h.digest()
}

/// The key of a contribution in storage order: dimension `perm[0]` in the
/// highest bits.
pub(super) struct KeyShape {
    /// Dimensions in storage order (CSC: column first).
    perm: Vec<usize>,
    /// Shift of each dimension (by dimension number).
    shifts: Vec<u32>,
    /// Extents (by dimension number).
    extents: Vec<u64>,
    /// Bits of the whole key.
    pub(super) total: u32,
    /// A contribution with a negative index is skipped (`skip_negative`),
    /// not refused.
    pub(super) skip_negative: bool,
}

impl KeyShape {
    pub(super) fn new(shape: &[u64], layout: OutputLayout) -> Option<KeyShape> {
        let rank = shape.len();
        let perm: Vec<usize> = if layout == OutputLayout::Csc {
            vec![1, 0]
        } else {
            (0..rank).collect()
        };
        let mut shifts = vec![0u32; rank];
        let mut total = 0u32;
        for &d in perm.iter().rev() {
            shifts[d] = total;
            total = total.checked_add(bits_of(shape[d]))?;
        }
        (total <= 64).then(|| KeyShape {
            perm,
            shifts,
            extents: shape.to_vec(),
            total,
            skip_negative: false,
        })
    }

    /// This key shape, skipping contributions with a negative index when
    /// `skip` (the plan then has no position for them).
    pub(super) fn skipping(mut self, skip: bool) -> KeyShape {
        self.skip_negative = skip;
        self
    }

    /// The key of contribution `k`, `None` for one skipped, or the error
    /// a push would give.
    #[inline(always)]
    pub(super) fn slot<C: Coords>(&self, c: &C, k: usize) -> Result<Option<u64>> {
        match self.key(c, k) {
            Ok(key) => Ok(Some(key)),
            Err(_) if self.skip_negative && self.negative(c, k) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether contribution `k` has a negative index (and none out of
    /// range before it, which a push would name first).
    #[cold]
    fn negative<C: Coords>(&self, c: &C, k: usize) -> bool {
        for (d, &e) in self.extents.iter().enumerate() {
            match c.get(k, d) {
                Err(_) => return true,
                Ok(x) if x >= e => return false,
                Ok(_) => {}
            }
        }
        false
    }

    /// The key of contribution `k`, or the error a push would give.
    #[inline(always)]
    pub(super) fn key<C: Coords>(&self, c: &C, k: usize) -> Result<u64> {
        let mut key = 0u64;
        for (d, (&s, &e)) in self.shifts.iter().zip(&self.extents).enumerate() {
            match c.get(k, d) {
                Ok(x) if x < e => key |= x.checked_shl(s).unwrap_or(0),
                Ok(x) => return Err(Error::bad_index(k as u64, d, x as i128, e)),
                Err(neg) => return Err(Error::bad_index(k as u64, d, neg, e)),
            }
        }
        Ok(key)
    }

    /// The index tuple of a key (dimension order).
    pub(super) fn unpack(&self, key: u64, out: &mut [u64]) {
        for (d, o) in out.iter_mut().enumerate() {
            let b = bits_of(self.extents[d]);
            *o = if b == 0 {
                0
            } else {
                (key >> self.shifts[d]) & (u64::MAX >> (64 - b))
            };
        }
    }
}

/// What planning found: the plan's arrays.
pub(crate) struct Planned {
    pub(crate) order: Vec<u32>,
    pub(crate) starts: Vec<u32>,
    pub(crate) structure: Structure,
    pub(crate) digest: u64,
    /// The first entry (storage order) with more than one contribution.
    pub(crate) first_duplicate: Option<Vec<u64>>,
}

/// Bucket bits for `n` contributions and a key of `total` bits: about 4
/// contributions per bucket, at most [`BUCKET_BITS`].
fn bucket_bits(total: u32, n: u64) -> u32 {
    total.min(BUCKET_BITS).min(bits_of(n / 4).max(1))
}

/// Bytes planning needs at most for `n` contributions (the plan's arrays
/// with nnz = n, the keys of the entries, the bucket counts of every
/// thread and their starts).
pub(crate) fn planning_bytes(n: u64, threads: usize) -> u64 {
    let buckets = 1u64 << bucket_bits(64, n);
    n.saturating_mul(4 + 4 + 8 + 8) + (threads as u64 + 1) * 4 * buckets
}

fn oom(what: &'static str, n: usize, width: usize) -> Error {
    Error::OutOfMemory {
        what,
        bytes: (n as u64).saturating_mul(width as u64),
    }
}

pub(super) fn zeros<T: Clone + Default>(n: usize, what: &'static str) -> Result<Vec<T>> {
    crate::assemble::direct::out::filled(n, T::default(), what)
}

pub(super) fn stop_error() -> Error {
    Error::Poisoned("planning (stopped by its caller)")
}

/// Split `0..n` into `parts` contiguous ranges cut at multiples of
/// [`DIGEST_BLOCK`], so that the digest (folded block by block) does not
/// depend on the thread count.
pub(super) fn ranges(n: usize, parts: usize) -> Vec<(usize, usize)> {
    let parts = parts.max(1);
    let cut = |t: usize| ((n * t / parts) / DIGEST_BLOCK * DIGEST_BLOCK).min(n);
    (0..parts)
        .map(|t| (cut(t), if t + 1 == parts { n } else { cut(t + 1) }))
        .collect()
}

/// `f(from, to)` over each of the [`ranges`] of `0..n` for `threads`,
/// each on a thread of its own; the results in range (array) order.
pub(super) fn on_ranges<T: Send>(
    n: usize,
    threads: usize,
    f: impl Fn(usize, usize) -> Result<T> + Sync,
) -> Vec<Result<T>> {
    std::thread::scope(|s| {
        let f = &f;
        let hs: Vec<_> = ranges(n, threads)
            .into_iter()
            .map(|(from, to)| s.spawn(move || f(from, to)))
            .collect();
        joined(hs)
    })
}

/// Planning threads' results in spawn order, a panicked one as an error.
pub(super) fn joined<T>(hs: Vec<std::thread::ScopedJoinHandle<'_, Result<T>>>) -> Vec<Result<T>> {
    hs.into_iter()
        .map(|h| {
            h.join()
                .unwrap_or(Err(Error::Poisoned("planning (a thread panicked)")))
        })
        .collect()
}

/// Each thread's counts per bucket (`counts`, in array order) turned into
/// its first slot in each bucket, so that a bucket holds its threads'
/// contributions in array order; each bucket's first slot returned, the
/// total last. Slots are u32: a total of 2^32 or more is an error.
pub(super) fn bucket_starts(counts: &mut [Vec<u32>], what: &'static str) -> Result<Vec<u32>> {
    let buckets = counts.first().map_or(0, Vec::len);
    let mut start = zeros::<u32>(buckets + 1, what)?;
    let mut at = 0u64;
    for b in 0..buckets {
        start[b] = at as u32;
        for c in counts.iter_mut() {
            let n = c[b];
            c[b] = at as u32;
            at += u64::from(n);
        }
    }
    start[buckets] = u32::try_from(at).map_err(|_| changed())?;
    Ok(start)
}

/// Buckets cutting `0..buckets` into at most `pieces` ranges of whole
/// buckets of about equal counts (`start`: [`bucket_starts`]'), from 0 to
/// `buckets`.
pub(super) fn piece_cuts(start: &[u32], pieces: usize) -> Vec<usize> {
    let buckets = start.len().saturating_sub(1);
    let total = start.last().map_or(0, |&t| u64::from(t));
    let mut cuts = vec![0usize];
    for p in 1..pieces as u64 {
        let target = total * p / pieces as u64;
        let b = start.partition_point(|&x| u64::from(x) < target);
        if b > *cuts.last().unwrap_or(&0) && b < buckets {
            cuts.push(b);
        }
    }
    cuts.push(buckets);
    cuts
}

/// Contributions per block of the digest.
pub(super) const DIGEST_BLOCK: usize = 1 << 16;

/// Pass 1 of planning, in memory or in parts: validate every index,
/// count the contributions of each of `buckets` buckets (`key >> split`)
/// and take the digest, each of `threads` threads over its range, block
/// by block: a block is counted and digested while it is in cache, then a
/// mapped source gives its pages back. Each thread's counts (in array
/// order) and the digest; the first bad index in array order. With
/// `spans`, also each bucket's span of positions (its first, and one past
/// its last; `(u64::MAX, 0)` for none), over all threads.
#[allow(clippy::too_many_arguments)]
pub(super) fn count_and_digest<C, T>(
    c: &C,
    ks: &KeyShape,
    split: u32,
    buckets: usize,
    threads: usize,
    spans: bool,
    stop: Option<&AtomicBool>,
    what: &'static str,
) -> Result<Counted<T>>
where
    C: Coords,
    T: Copy + Default + Send + std::ops::AddAssign + From<u8>,
{
    let rank = ks.extents.len();
    let counted = on_ranges(c.len(), threads, |from, to| {
        let mut hist = zeros::<T>(buckets, what)?;
        let mut span = if spans {
            crate::assemble::direct::out::filled(buckets, (u64::MAX, 0u64), what)?
        } else {
            Vec::new()
        };
        let mut digests = Vec::with_capacity((to - from).div_ceil(DIGEST_BLOCK));
        let one = T::from(1u8);
        let mut b = from;
        while b < to {
            if stopped(stop) {
                return Err(stop_error());
            }
            let end = (b + DIGEST_BLOCK).min(to);
            if spans {
                for k in b..end {
                    if let Some(key) = ks.slot(c, k)? {
                        let i = (key >> split) as usize;
                        hist[i] += one;
                        let s = &mut span[i];
                        s.0 = s.0.min(k as u64);
                        s.1 = k as u64 + 1;
                    }
                }
            } else {
                for k in b..end {
                    if let Some(key) = ks.slot(c, k)? {
                        hist[(key >> split) as usize] += one;
                    }
                }
            }
            digests.push(digest_part(c, rank, b, end));
            c.release(b, end);
            b = end;
        }
        Ok((hist, span, digests))
    });
    let mut hists = Vec::with_capacity(counted.len());
    let mut all_spans: Vec<(u64, u64)> = Vec::new();
    let mut digest = xxhash_rust::xxh3::Xxh3::new();
    for r in counted {
        // The first error in array order: ranges are in array order.
        let (h, sp, d) = r?;
        hists.push(h);
        if all_spans.is_empty() {
            all_spans = sp;
        } else {
            for (a, b) in all_spans.iter_mut().zip(sp) {
                widen(a, b);
            }
        }
        for x in d {
            digest.update(&x.to_le_bytes());
        }
    }
    Ok(Counted {
        hists,
        spans: all_spans,
        digest: digest.digest(),
    })
}

/// The span of positions `a` widened to hold `b` (`(u64::MAX, 0)`: none).
pub(super) fn widen(a: &mut (u64, u64), b: (u64, u64)) {
    a.0 = a.0.min(b.0);
    a.1 = a.1.max(b.1);
}

/// What [`count_and_digest`] found.
pub(super) struct Counted<T> {
    /// Each thread's counts per bucket.
    pub(super) hists: Vec<Vec<T>>,
    /// Each bucket's span of positions, when asked (empty otherwise).
    pub(super) spans: Vec<(u64, u64)>,
    pub(super) digest: u64,
}

/// Plan the contributions `c` (rank `shape.len()`) in `layout`.
pub(crate) fn plan<C: Coords>(
    c: &C,
    shape: &[u64],
    layout: OutputLayout,
    skip_negative: bool,
    threads: usize,
    stop: Option<&AtomicBool>,
) -> Result<Planned> {
    let n = c.len();
    if n as u64 >= u32::MAX as u64 {
        return Err(Error::InvalidArgument(format!(
            "{n} contributions: a plan held in memory takes fewer than 2^32"
        )));
    }
    let ks = KeyShape::new(shape, layout)
        .ok_or_else(|| Error::InvalidShape {
            shape: shape.to_vec(),
            detail: "the index tuple packs into more than 64 bits, which a plan does not take"
                .into(),
        })?
        .skipping(skip_negative);
    let rank = shape.len();
    let bbits = bucket_bits(ks.total, n as u64);
    let split = ks.total - bbits;
    let buckets = 1usize << bbits;
    let threads = if n < PARALLEL_MIN { 1 } else { threads.max(1) };
    let parts = ranges(n, threads);

    // 1. Validate, count per bucket and digest, each thread its range.
    let Counted {
        mut hists, digest, ..
    } = count_and_digest::<C, u32>(
        c,
        &ks,
        split,
        buckets,
        threads,
        false,
        stop,
        "the plan's bucket counts",
    )?;

    // Bucket starts, and each thread's place in every bucket.
    let bucket_start = bucket_starts(&mut hists, "the plan's bucket starts")?;

    // 2. Scatter positions into buckets; ascending within each bucket.
    // Stores are atomic (plain stores on x86) and bounded, so arrays that
    // change under the passes (another thread of the caller's) give a
    // wrong order, caught when the buckets are cut, never a stray write.
    // The contributions planned (all but those skipped).
    let m = bucket_start[buckets] as usize;
    let mut order = zeros::<u32>(m, "the plan's contribution order")?;
    {
        let out = atomic_u32(&mut order);
        let ks = &ks;
        let joined: Vec<bool> = std::thread::scope(|s| {
            let hs: Vec<_> = parts
                .iter()
                .zip(hists.iter_mut())
                .map(|(&(from, to), hist)| {
                    s.spawn(move || {
                        for k in from..to {
                            let key = match ks.slot(c, k) {
                                Ok(Some(key)) => key,
                                Ok(None) => continue,
                                Err(_) => return false,
                            };
                            let b = (key >> split) as usize;
                            let at = hist[b] as usize;
                            hist[b] += 1;
                            match out.get(at) {
                                Some(slot) => slot.store(k as u32, Ordering::Relaxed),
                                None => return false,
                            }
                        }
                        true
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or(false)).collect()
        });
        if joined.iter().any(|&ok| !ok) {
            return Err(changed());
        }
    }
    drop(hists);
    if stopped(stop) {
        return Err(stop_error());
    }

    // 3. Order each bucket by (key, position) and cut it into entries,
    // the threads taking ranges of buckets of about n / pieces
    // contributions each from a queue.
    let cuts = piece_cuts(&bucket_start, if threads == 1 { 1 } else { threads * 4 });
    let mut queue = Vec::with_capacity(cuts.len());
    {
        let mut rest: &mut [u32] = &mut order;
        let mut taken = 0usize;
        for (i, w) in cuts.windows(2).enumerate() {
            let end = bucket_start[w[1]] as usize;
            let (a, b) = std::mem::take(&mut rest).split_at_mut(end - taken);
            taken = end;
            rest = b;
            queue.push((i, w[0], w[1], a));
        }
    }
    let jobs = queue.len();
    let queue = std::sync::Mutex::new(queue);
    let done: Vec<Option<Vec<Piece>>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads.min(jobs).max(1))
            .map(|_| {
                let (queue, ks, bucket_start) = (&queue, &ks, &bucket_start);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    loop {
                        let job = match queue.lock() {
                            Ok(mut q) => q.pop(),
                            Err(_) => None,
                        };
                        let Some((i, b0, b1, seg)) = job else { break };
                        let r = if stopped(stop) {
                            Err(stop_error())
                        } else {
                            // `split` is below 64: the buckets take one bit at least.
                            let mask = u64::MAX.checked_shr(64 - split).unwrap_or(0);
                            cut_buckets(
                                bucket_start,
                                b0,
                                b1,
                                seg,
                                split,
                                |b| (b as u64) << split,
                                // The key of a position of this bucket (another
                                // bucket's: the arrays changed since they were
                                // counted).
                                |b, _, k| match ks.key(c, k as usize) {
                                    Ok(key) if key >> split == b as u64 => Ok(key & mask),
                                    _ => Err(changed()),
                                },
                            )
                        };
                        mine.push((i, r));
                    }
                    mine
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().ok()).collect()
    });
    let mut pieces_out: Vec<Piece> = Vec::with_capacity(jobs);
    for d in done {
        pieces_out.extend(d.ok_or(Error::Poisoned("planning (a thread panicked)"))?);
    }
    if pieces_out.len() != jobs {
        return Err(Error::Poisoned("planning (a thread panicked)"));
    }
    pieces_out.sort_unstable_by_key(|p| p.0);
    let mut parts_ok = Vec::with_capacity(jobs);
    for (_, r) in pieces_out {
        parts_ok.push(r?);
    }
    let nnz: usize = parts_ok.iter().map(|(k, _)| k.len()).sum();

    // Entry starts, straight from the pieces (no concatenated copy).
    let mut starts = zeros::<u32>(nnz + 1, "the plan's entry starts")?;
    let mut first_duplicate = None;
    {
        let mut at = 0u32;
        let mut e = 0usize;
        for (keys, counts) in &parts_ok {
            for (i, &m) in counts.iter().enumerate() {
                starts[e] = at;
                at += m;
                e += 1;
                if m > 1 && first_duplicate.is_none() {
                    let mut t = vec![0u64; rank];
                    ks.unpack(keys[i], &mut t);
                    first_duplicate = Some(t);
                }
            }
        }
        starts[nnz] = at;
    }
    let keys: Vec<&[u64]> = parts_ok.iter().map(|(k, _)| k.as_slice()).collect();
    let structure = structure_of(&ks, &keys, nnz, layout, shape)?;
    drop(parts_ok);
    Ok(Planned {
        order,
        starts,
        structure,
        digest,
        first_duplicate,
    })
}

/// A piece of pass 3: its number, and the keys and counts of its entries.
type Piece = (usize, Result<(Vec<u64>, Vec<u32>)>);

/// The error of coordinates that changed while they were planned.
pub(super) fn changed() -> Error {
    Error::InvalidArgument("the index arrays changed while they were planned".into())
}

/// Order buckets `b0..b1` of a placed vector (`start`: [`bucket_starts`]';
/// `seg`: their positions, bucket after bucket) by (key, position) and
/// cut them into entries, for both planners: the keys and contribution
/// counts of the entries, in storage order, and `seg` rewritten in that
/// order. The keys of bucket `b` are `origin(b) + minor`, each minor below
/// 2^`bits` given by `minor(b, slot, position)` (`slot` indexes the placed
/// vector); one packed word per contribution is sorted in cache.
pub(super) fn cut_buckets(
    start: &[u32],
    b0: usize,
    b1: usize,
    seg: &mut [u32],
    bits: u32,
    origin: impl Fn(usize) -> u64,
    minor: impl Fn(usize, usize, u32) -> Result<u64>,
) -> Result<(Vec<u64>, Vec<u32>)> {
    let base = start[b0] as usize;
    // At most one entry per contribution: room reserved once (untouched
    // room costs no memory).
    let n = seg.len();
    let mut keys = Vec::new();
    keys.try_reserve_exact(n)
        .map_err(|_| oom("the plan's entry keys", n, 8))?;
    let mut counts = Vec::new();
    counts
        .try_reserve_exact(n)
        .map_err(|_| oom("the plan's entry counts", n, 4))?;
    let mut add = |key: u64| match counts.last_mut() {
        Some(m) if keys.last() == Some(&key) => *m += 1,
        _ => {
            keys.push(key);
            counts.push(1);
        }
    };
    let mut narrow: Vec<u64> = Vec::new();
    let mut wide: Vec<u128> = Vec::new();
    for b in b0..b1 {
        let (s, e) = (start[b] as usize, start[b + 1] as usize);
        let part = &mut seg[s - base..e - base];
        let origin = origin(b);
        match part.len() {
            0 => {}
            1 => add(origin.wrapping_add(minor(b, s, part[0])?)),
            // (minor, position) packed in one integer: positions are below
            // 2^32, so a minor of up to 32 bits packs into a u64.
            _ if bits <= 32 => {
                narrow.clear();
                for (i, &k) in part.iter().enumerate() {
                    narrow.push((minor(b, s + i, k)? << 32) | u64::from(k));
                }
                narrow.sort_unstable();
                for (p, &x) in part.iter_mut().zip(&narrow) {
                    *p = x as u32;
                    add(origin.wrapping_add(x >> 32));
                }
            }
            _ => {
                wide.clear();
                for (i, &k) in part.iter().enumerate() {
                    wide.push((u128::from(minor(b, s + i, k)?) << 32) | u128::from(k));
                }
                wide.sort_unstable();
                for (p, &x) in part.iter_mut().zip(&wide) {
                    *p = x as u32;
                    add(origin.wrapping_add((x >> 32) as u64));
                }
            }
        }
    }
    Ok((keys, counts))
}

/// `v` seen as atomics, for a placing pass: its threads store to disjoint
/// slots they counted, bounded and atomic (plain stores on x86), so that
/// coordinates that change under the passes give a wrong order, caught
/// when the buckets are cut, never a stray write.
pub(super) fn atomic_u32(v: &mut [u32]) -> &[AtomicU32] {
    // SAFETY: `v` is exclusively borrowed for the view's lifetime, and u32
    // and AtomicU32 have the same size and alignment.
    unsafe { std::slice::from_raw_parts(v.as_mut_ptr().cast(), v.len()) }
}

/// [`atomic_u32`] for u64 slots.
pub(super) fn atomic_u64(v: &mut [u64]) -> &[AtomicU64] {
    // SAFETY: as in `atomic_u32`, for u64 and AtomicU64.
    unsafe { std::slice::from_raw_parts(v.as_mut_ptr().cast(), v.len()) }
}

/// The output structure of the entries `keys` (storage order).
fn structure_of(
    ks: &KeyShape,
    pieces: &[&[u64]],
    nnz: usize,
    layout: OutputLayout,
    shape: &[u64],
) -> Result<Structure> {
    let keys = || pieces.iter().flat_map(|p| p.iter());
    let rank = shape.len();
    if layout.is_compressed() {
        let major = ks.perm[0];
        let minor = ks.perm[1];
        let mbits = bits_of(shape[minor]);
        let mmask = if mbits == 0 {
            0
        } else {
            u64::MAX >> (64 - mbits)
        };
        let small = shape[minor] <= u32::MAX as u64 + 1 && (nnz as u64) <= u32::MAX as u64;
        let mut ptr = zeros::<u64>(shape[major] as usize + 1, "the plan's pointers")?;
        for &k in keys() {
            let m = if mbits == 64 { 0 } else { k >> mbits } as usize;
            ptr[m + 1] += 1;
        }
        for i in 0..shape[major] as usize {
            ptr[i + 1] += ptr[i];
        }
        let indices = if small {
            let mut v = Vec::new();
            v.try_reserve_exact(nnz)
                .map_err(|_| oom("the plan's indices", nnz, 4))?;
            v.extend(keys().map(|&k| (k & mmask) as u32));
            Ix::U32(v)
        } else {
            let mut v = Vec::new();
            v.try_reserve_exact(nnz)
                .map_err(|_| oom("the plan's indices", nnz, 8))?;
            v.extend(keys().map(|&k| k & mmask));
            Ix::U64(v)
        };
        let pointers = if small {
            Ix::U32(ptr.iter().map(|&p| p as u32).collect())
        } else {
            Ix::U64(ptr)
        };
        Ok(Structure { indices, pointers })
    } else {
        let small = shape.iter().all(|&e| e <= u32::MAX as u64 + 1);
        let mut t = vec![0u64; rank];
        let indices = if small {
            let mut v = Vec::new();
            v.try_reserve_exact(nnz * rank)
                .map_err(|_| oom("the plan's indices", nnz * rank, 4))?;
            for &k in keys() {
                ks.unpack(k, &mut t);
                v.extend(t.iter().map(|&x| x as u32));
            }
            Ix::U32(v)
        } else {
            let mut v = Vec::new();
            v.try_reserve_exact(nnz * rank)
                .map_err(|_| oom("the plan's indices", nnz * rank, 8))?;
            for &k in keys() {
                ks.unpack(k, &mut t);
                v.extend_from_slice(&t);
            }
            Ix::U64(v)
        };
        Ok(Structure {
            indices,
            pointers: Ix::U32(Vec::new()),
        })
    }
}
