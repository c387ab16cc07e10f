// The in-memory results (arrays the caller gets back) serve the front ends
// through `internals`; a build without it compiles them unused.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]
//! Bands: consecutive buckets whose contributions fit one worker's
//! scratch. For each band a worker makes one pass over the chunks of the
//! caller's arrays whose bucket range meets the band (the others are
//! skipped), scatters each contribution's (minor key, lane) into its
//! bucket's place, orders every bucket by minor key in cache, reduces each
//! coordinate's group, and compacts the result in its scratch. Bands are
//! taken in order by the workers; each publishes its entry count in band
//! order, which gives it its place in the result, and copies itself there.

use crate::assemble::combine::CombineError;
use crate::assemble::direct::Fault;
use crate::assemble::direct::count::{Counts, RELEASE_CHUNKS, stopped};
use crate::assemble::direct::input::Input;
use crate::assemble::direct::lane::{FromLane, Lane, Reduce};
use crate::assemble::direct::out::{OutIndex, Shared, filled, zeroed};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Buckets of at most this many contributions are insertion sorted.
const INSERTION_MAX: usize = 8;
/// Buckets of at most this many contributions are grouped through a hash
/// table ([`TABLE`] slots, so at most half full); larger ones are sorted.
const HASH_MAX: usize = 256;
/// Bits of the grouping table's slot numbers.
const TABLE_BITS: u32 = 9;
/// Slots of the grouping table.
const TABLE: usize = 1 << TABLE_BITS;

/// A minor key as the scratch holds it: u32 when the minor field fits.
pub(crate) trait Minor:
    Copy + Default + Eq + Send + Sync + bytemuck::Zeroable + 'static
{
    /// The key with the contribution's place in its bucket, so that an
    /// unstable sort of these is stable in effect.
    type Packed: Copy + Ord + Send + Sync + Default;
    fn from_u64(m: u64) -> Self;
    fn to_u64(self) -> u64;
    fn pack(self, i: u32) -> Self::Packed;
    fn key(p: Self::Packed) -> Self;
    fn pos(p: Self::Packed) -> usize;
    /// A packed key above every real one (padding for [`sort8`]).
    const PAD: Self::Packed;
    /// A slot of the grouping table ([`TABLE`] slots): Fibonacci hashing,
    /// which spreads the runs of nearby columns a row holds.
    fn hash(self) -> usize;
}

impl Minor for u32 {
    type Packed = u64;
    const PAD: u64 = u64::MAX;
    #[inline(always)]
    fn from_u64(m: u64) -> u32 {
        m as u32
    }
    #[inline(always)]
    fn to_u64(self) -> u64 {
        self as u64
    }
    #[inline(always)]
    fn pack(self, i: u32) -> u64 {
        ((self as u64) << 32) | i as u64
    }
    #[inline(always)]
    fn key(p: u64) -> u32 {
        (p >> 32) as u32
    }
    #[inline(always)]
    fn pos(p: u64) -> usize {
        p as u32 as usize
    }
    #[inline(always)]
    fn hash(self) -> usize {
        (self.wrapping_mul(0x9e37_79b1) >> (32 - TABLE_BITS)) as usize
    }
}

impl Minor for u64 {
    type Packed = u128;
    const PAD: u128 = u128::MAX;
    #[inline(always)]
    fn from_u64(m: u64) -> u64 {
        m
    }
    #[inline(always)]
    fn to_u64(self) -> u64 {
        self
    }
    #[inline(always)]
    fn pack(self, i: u32) -> u128 {
        ((self as u128) << 32) | i as u128
    }
    #[inline(always)]
    fn key(p: u128) -> u64 {
        (p >> 32) as u64
    }
    #[inline(always)]
    fn pos(p: u128) -> usize {
        p as u32 as usize
    }
    #[inline(always)]
    fn hash(self) -> usize {
        (self.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - TABLE_BITS)) as usize
    }
}

/// How the buckets are cut into bands.
pub(crate) struct Bands {
    /// Band b covers buckets `bounds[b]..bounds[b + 1]`.
    pub(crate) bounds: Vec<u64>,
    /// Most contributions in one band.
    pub(crate) max_entries: usize,
    /// Most buckets in one band.
    pub(crate) max_buckets: usize,
    /// Most contributions in one bucket.
    pub(crate) max_bucket: usize,
}

impl Bands {
    pub(crate) fn len(&self) -> usize {
        self.bounds.len().saturating_sub(1)
    }
}

/// Cut `counts` into bands of at most `band_bytes` of scratch (`entry`
/// bytes per contribution, 4 per bucket) and `max_entries` contributions
/// (a single bucket beyond either gets a band of its own).
pub(crate) fn cut(
    counts: &[u32],
    entry: u64,
    band_bytes: u64,
    max_entries: u64,
) -> Result<Bands, Fault> {
    let mut bounds = filled(0, 0u64, "the band bounds")?;
    let try_push = |b: &mut Vec<u64>, x: u64| -> Result<(), Fault> {
        b.try_reserve(1).map_err(|_| Fault::OutOfMemory)?;
        b.push(x);
        Ok(())
    };
    try_push(&mut bounds, 0)?;
    let (mut acc, mut bytes, mut start) = (0u64, 0u64, 0usize);
    let (mut most, mut max_buckets, mut max_bucket) = (0u64, 0usize, 0u64);
    for (i, &c) in counts.iter().enumerate() {
        let c = c as u64;
        max_bucket = max_bucket.max(c);
        let more = c * entry + 4;
        if i > start && (bytes + more > band_bytes || acc + c > max_entries) {
            try_push(&mut bounds, i as u64)?;
            most = most.max(acc);
            max_buckets = max_buckets.max(i - start);
            (acc, bytes, start) = (0, 0, i);
        }
        acc += c;
        bytes += more;
    }
    if counts.len() > start || counts.is_empty() {
        try_push(&mut bounds, counts.len() as u64)?;
        most = most.max(acc);
        max_buckets = max_buckets.max(counts.len() - start);
    }
    Ok(Bands {
        bounds,
        max_entries: most as usize,
        max_buckets,
        max_bucket: max_bucket as usize,
    })
}

impl Bands {
    /// Chunks the band passes read in all, or None when counting them
    /// would cost more than it is worth (very many bands and chunks).
    pub(crate) fn chunk_visits(&self, ranges: &[(u64, u64)]) -> Option<u64> {
        if (self.len() as u64).saturating_mul(ranges.len() as u64) > 1 << 27 {
            return None;
        }
        let mut v = 0u64;
        for b in self.bounds.windows(2) {
            let (lo, hi) = (b[0], b[1]);
            v += ranges.iter().filter(|&&(a, z)| z >= lo && a < hi).count() as u64;
        }
        Some(v)
    }
}

/// Where the result goes: values, indices, and (CSR/CSC) pointers.
pub(crate) struct Sink<'v, O, J> {
    pub(crate) values: Shared<'v, O>,
    pub(crate) indices: Shared<'v, J>,
    pub(crate) form: Form<'v, J>,
}

/// The layout of a result's indices.
pub(crate) enum Form<'v, J> {
    /// CSR or CSC: the minor keys are the indices; one pointer per bucket
    /// (plus the leading zero).
    Compressed { pointers: Shared<'v, J> },
    /// A matrix as COO: `(bucket, minor)` per entry, row-major.
    CooMatrix,
    /// COO of any rank: the index tuple unpacked from
    /// `bucket << split | minor`.
    CooPacked {
        shifts: &'v [u32],
        bits: &'v [u32],
        split: u32,
    },
}

/// One worker's buffers, reused from band to band.
struct Scratch<M: Minor, L> {
    minor: Vec<M>,
    lanes: Vec<L>,
    /// Per bucket of the band: the next place to scatter to, then the end
    /// of its entries, then the end of its reduced entries.
    pos: Vec<u32>,
    /// Groups one bucket's contributions by minor key.
    grouper: Grouper<M, L>,
}

/// Groups the contributions of one bucket by minor key, in minor order,
/// each group's lanes in array order: short buckets by insertion sort of
/// keys that carry the place, longer ones (FE rows: ~60 contributions to
/// ~26 columns) through a small hash table and a sort of the distinct
/// keys only, very long ones by the standard sort.
pub(crate) struct Grouper<M: Minor, L> {
    /// The hash path's fixed-size tables.
    hashed: Box<Hashed<M, L>>,
    /// Whether the last bucket took the hash path.
    by_hash: bool,
    /// The sort path: keys (minor, place), the lanes in sorted order, the
    /// groups.
    packed: Vec<M::Packed>,
    group: Vec<L>,
    out: Vec<(M, u32, u32)>,
}

/// The hash path's tables: fixed sizes, indexed by masked numbers, so no
/// access needs a bounds check.
struct Hashed<M: Minor, L> {
    /// Table slot -> minor key.
    tab_key: [M; TABLE],
    /// Table slot -> group + 1 (0: empty).
    tab_group: [u16; TABLE],
    /// Per group: its table slot, key, size (then its next place).
    tpos: [u16; HASH_MAX],
    dkey: [M; HASH_MAX],
    cnt: [u32; HASH_MAX],
    /// Per contribution: its group.
    of: [u16; HASH_MAX],
    /// Sort keys (minor, group) of the distinct keys.
    order: [M::Packed; HASH_MAX],
    /// The lanes, group after group.
    group: [L; HASH_MAX],
    /// The groups in minor order: (key, start, end) in `group`.
    out: [(M, u32, u32); HASH_MAX],
    /// Groups in `out`.
    n_out: usize,
}

/// A failed coordinate: the band, the bucket and minor key, and why.
pub(crate) struct Failed {
    pub(crate) band: usize,
    pub(crate) bucket: u64,
    pub(crate) minor: u64,
    pub(crate) why: CombineError,
}

/// The band order and the place of the next band in the result.
struct Publish {
    next: usize,
    offset: usize,
}

/// What all workers share.
struct Shared2<'a> {
    next_band: AtomicUsize,
    /// The smallest band whose reduction failed (`usize::MAX`: none).
    failed_band: AtomicUsize,
    /// Set on an input error, a stop or an allocation failure: every
    /// worker stops.
    abort: AtomicBool,
    fault: Mutex<Option<Fault>>,
    failed: Mutex<Option<Failed>>,
    publish: Mutex<Publish>,
    turn: Condvar,
    stop: Option<&'a AtomicBool>,
}

impl Shared2<'_> {
    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fail(&self, f: Fault) {
        let mut g = Self::lock(&self.fault);
        if g.is_none() {
            *g = Some(f);
        }
        drop(g);
        self.abort.store(true, Ordering::SeqCst);
        let _g = Self::lock(&self.publish);
        self.turn.notify_all();
    }

    fn stopped(&self) -> bool {
        self.abort.load(Ordering::Relaxed) || stopped(self.stop)
    }
}

/// Totals of a finished assembly.
pub(crate) struct Done {
    pub(crate) nnz: usize,
    pub(crate) dropped: u64,
}

/// Why the bands stopped: an input or resource fault, or a coordinate
/// whose reduction failed.
pub(crate) enum BandError {
    Fault(Fault),
    Failed(Failed),
}

/// Run every band on up to `threads` workers, writing into `sink`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<In, R, M>(
    input: &In,
    red: &R,
    counts: &Counts,
    bands: &Bands,
    threads: usize,
    sink: &dyn BandSink<M, In::L>,
    stop: Option<&AtomicBool>,
) -> Result<Done, BandError>
where
    In: Input,
    R: Reduce<In::L>,
    M: Minor,
{
    let sh = Shared2 {
        next_band: AtomicUsize::new(0),
        failed_band: AtomicUsize::new(usize::MAX),
        abort: AtomicBool::new(false),
        fault: Mutex::new(None),
        failed: Mutex::new(None),
        publish: Mutex::new(Publish { next: 0, offset: 0 }),
        turn: Condvar::new(),
        stop,
    };
    let threads = threads.clamp(1, bands.len().max(1));
    let work = || worker::<In, R, M>(input, red, counts, bands, sink, &sh);
    let dropped: u64 = if threads == 1 {
        work()
    } else {
        std::thread::scope(|s| {
            let hs: Vec<_> = (1..threads).map(|_| s.spawn(work)).collect();
            let mine = work();
            let theirs: u64 = hs
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        sh.fail(Fault::Panicked);
                        0
                    })
                })
                .sum();
            mine + theirs
        })
    };
    if let Some(f) = Shared2::lock(&sh.fault).take() {
        return Err(BandError::Fault(f));
    }
    if let Some(f) = Shared2::lock(&sh.failed).take() {
        return Err(BandError::Failed(f));
    }
    if sh.stopped() {
        return Err(BandError::Fault(Fault::Stopped));
    }
    let p = Shared2::lock(&sh.publish);
    if p.next != bands.len() {
        return Err(BandError::Fault(Fault::Stopped));
    }
    Ok(Done {
        nnz: p.offset,
        dropped,
    })
}

/// One worker: take bands in order until none is left. Returns the zeros
/// it dropped.
fn worker<In, R, M>(
    input: &In,
    red: &R,
    counts: &Counts,
    bands: &Bands,
    sink: &dyn BandSink<M, In::L>,
    sh: &Shared2<'_>,
) -> u64
where
    In: Input,
    R: Reduce<In::L>,
    M: Minor,
{
    let mut scratch = match Scratch::<M, In::L>::new(bands) {
        Ok(s) => s,
        Err(f) => {
            sh.fail(f);
            return 0;
        }
    };
    let mut dropped = 0u64;
    loop {
        if sh.stopped() {
            break;
        }
        let b = sh.next_band.fetch_add(1, Ordering::SeqCst);
        if b >= bands.len() || b > sh.failed_band.load(Ordering::SeqCst) {
            break;
        }
        let (lo, hi) = (bands.bounds[b], bands.bounds[b + 1]);
        if let Err(f) = scratch.scatter(input, counts, lo, hi, sh) {
            sh.fail(f);
            break;
        }
        let (w, d) = match scratch.reduce(red, (hi - lo) as usize) {
            Ok(x) => x,
            Err(Ok((bucket, minor, why))) => {
                let mut g = Shared2::lock(&sh.failed);
                if g.as_ref().is_none_or(|f| b < f.band) {
                    *g = Some(Failed {
                        band: b,
                        bucket: lo + bucket as u64,
                        minor,
                        why,
                    });
                }
                sh.failed_band.fetch_min(b, Ordering::SeqCst);
                drop(g);
                let _g = Shared2::lock(&sh.publish);
                sh.turn.notify_all();
                break;
            }
            Err(Err(f)) => {
                sh.fail(f);
                break;
            }
        };
        dropped += d;
        let rows = (hi - lo) as usize;
        let (minor, lanes, ends) = (
            &scratch.minor[..w],
            &scratch.lanes[..w],
            &scratch.pos[..rows],
        );
        // Wait for the band before this one to take its place.
        let (off, put) = {
            let mut p = Shared2::lock(&sh.publish);
            while p.next != b
                && !sh.stopped()
                && sh.failed_band.load(Ordering::SeqCst) == usize::MAX
            {
                p = sh.turn.wait(p).unwrap_or_else(|e| e.into_inner());
            }
            if p.next != b {
                break;
            }
            let off = p.offset;
            // A stream takes the band during its turn; the next band waits.
            let put = if sink.in_order() {
                sink.put(off, lo, minor, lanes, ends)
            } else {
                Ok(())
            };
            if put.is_ok() {
                p.offset += w;
                p.next += 1;
                sh.turn.notify_all();
            }
            (off, put)
        };
        let put = if sink.in_order() {
            put
        } else {
            sink.put(off, lo, minor, lanes, ends)
        };
        if let Err(f) = put {
            sh.fail(f);
            break;
        }
    }
    dropped
}

impl<M: Minor, L: Lane + bytemuck::Zeroable> Scratch<M, L> {
    /// Buffers for the largest band, bucket and bucket count there is.
    fn new(bands: &Bands) -> Result<Self, Fault> {
        let sort = bands.max_bucket.min(bands.max_entries);
        Ok(Scratch {
            minor: zeroed(bands.max_entries, "a band's minor keys")?,
            lanes: zeroed(bands.max_entries, "a band's values")?,
            pos: zeroed(bands.max_buckets, "a band's bucket places")?,
            grouper: Grouper::new(sort)?,
        })
    }

    /// Scatter the contributions of buckets `lo..hi` into place.
    fn scatter<In: Input<L = L>>(
        &mut self,
        input: &In,
        counts: &Counts,
        lo: u64,
        hi: u64,
        sh: &Shared2<'_>,
    ) -> Result<(), Fault> {
        let rows = (hi - lo) as usize;
        let (Some(pos), Some(per)) = (
            self.pos.get_mut(..rows),
            counts.per_bucket.get(lo as usize..hi as usize),
        ) else {
            return Err(Fault::BadInput);
        };
        let mut acc = 0u32;
        for (p, &c) in pos.iter_mut().zip(per) {
            *p = acc;
            acc += c;
        }
        let n = input.len();
        let minor = &mut self.minor[..];
        // The same length as `minor`, so one check covers both stores.
        let lanes = &mut self.lanes[..minor.len()];
        // The chunks read since the input's pages were last released.
        let (mut span, mut visited, mut end) = (None::<usize>, 0usize, 0usize);
        for (c, &(a, b)) in counts.ranges.iter().enumerate() {
            if b < lo || a >= hi {
                continue;
            }
            if sh.stopped() {
                return Err(Fault::Stopped);
            }
            let (x, y) = counts.chunk_span(c, n);
            let from = *span.get_or_insert(x);
            visited += 1;
            end = y;
            if visited == RELEASE_CHUNKS {
                input.release(from, y);
                (span, visited) = (None, 0);
            }
            let mut good = true;
            input.entries(x, y, lo, rows, |j, m, l, ok| {
                let Some(p) = pos.get_mut(j) else {
                    good = false;
                    return;
                };
                let q = *p as usize;
                *p += 1;
                // A refused contribution is written too (junk): the band
                // is dropped and the slow path names it.
                good &= ok;
                if q < minor.len() {
                    minor[q] = M::from_u64(m);
                    lanes[q] = l;
                } else {
                    good = false;
                }
            });
            if !good {
                return Err(Fault::BadInput);
            }
        }
        if let Some(from) = span {
            input.release(from, end);
        }
        Ok(())
    }

    /// Order each bucket by minor key, reduce each coordinate, and compact
    /// the results at the front. Returns (entries kept, zeros dropped), or
    /// the failing (bucket in band, minor key, why).
    #[allow(clippy::type_complexity)]
    fn reduce<R: Reduce<L>>(
        &mut self,
        red: &R,
        rows: usize,
    ) -> Result<(usize, u64), Result<(usize, u64, CombineError), Fault>> {
        let Scratch {
            minor,
            lanes,
            pos,
            grouper,
        } = self;
        let mut s = 0usize;
        let mut w = 0usize;
        let mut dropped = 0u64;
        // Per group of the hash path: the online state, then the result.
        let mut accs = Box::new([R::Acc::default(); HASH_MAX]);
        let mut vals = Box::new([L::default(); HASH_MAX]);
        for (j, p) in pos.iter_mut().take(rows).enumerate() {
            let e = *p as usize;
            let k = e.checked_sub(s).ok_or(Err(Fault::BadInput))?;
            let online = R::ONLINE && k > INSERTION_MAX && k <= HASH_MAX;
            if online {
                let (Some(ms), Some(ls)) = (minor.get(s..e), lanes.get(s..e)) else {
                    return Err(Err(Fault::BadInput));
                };
                if let Some(nd) = grouper.hashed.accumulate(red, ms, ls, &mut accs, &mut vals) {
                    // Every group finished: write them (the bucket has
                    // been read whole).
                    let h = &grouper.hashed;
                    for (q, &v) in h.order[..nd].iter().zip(&vals[..nd]) {
                        minor[w] = M::key(*q);
                        lanes[w] = v;
                        w += 1;
                    }
                    *p = w as u32;
                    s = e;
                    continue;
                }
            }
            if (2..=INSERTION_MAX).contains(&k) {
                // A short bucket (random coordinates: most of them), on the
                // stack: sort keys with their places, gather the lanes,
                // then write over the bucket.
                let (Some(ms), Some(ls)) = (minor.get(s..e), lanes.get(s..e)) else {
                    return Err(Err(Fault::BadInput));
                };
                // Padded with keys above every real one, sorted by a
                // network: no branch to mispredict on random keys.
                let mut keys = [M::PAD; INSERTION_MAX];
                let mut got = [L::default(); INSERTION_MAX];
                for (i, (kq, &m)) in keys.iter_mut().zip(ms).enumerate() {
                    *kq = m.pack(i as u32);
                }
                sort8(&mut keys);
                let keys = &keys[..k];
                for (g, &q) in got.iter_mut().zip(keys.iter()) {
                    *g = ls[M::pos(q) % k];
                }
                let mut a = 0usize;
                while a < k {
                    let m = M::key(keys[a]);
                    let mut b = a + 1;
                    while b < k && M::key(keys[b]) == m {
                        b += 1;
                    }
                    match red.reduce(&got[a..b]) {
                        Ok(Some(v)) => {
                            minor[w] = m;
                            lanes[w] = v;
                            w += 1;
                        }
                        Ok(None) => dropped += 1,
                        Err(why) => return Err(Ok((j, m.to_u64(), why))),
                    }
                    a = b;
                }
            } else if k == 1 {
                let (Some(&m), Some(one)) = (minor.get(s), lanes.get(s..e)) else {
                    return Err(Err(Fault::BadInput));
                };
                match red.reduce(one) {
                    Ok(Some(v)) => {
                        minor[w] = m;
                        lanes[w] = v;
                        w += 1;
                    }
                    Ok(None) => dropped += 1,
                    Err(why) => return Err(Ok((j, m.to_u64(), why))),
                }
            } else if k > 1 {
                let (Some(ms), Some(ls)) = (minor.get(s..e), lanes.get(s..e)) else {
                    return Err(Err(Fault::BadInput));
                };
                // The bucket is copied into the grouper whole before any
                // result is written over it.
                grouper.prepare(ms, ls).map_err(Err)?;
                let (out, group) = grouper.groups();
                for &(m, a, b) in out {
                    let Some(g) = group.get(a as usize..b as usize) else {
                        return Err(Err(Fault::BadInput));
                    };
                    match red.reduce(g) {
                        Ok(Some(v)) => {
                            minor[w] = m;
                            lanes[w] = v;
                            w += 1;
                        }
                        Ok(None) => dropped += 1,
                        Err(why) => return Err(Ok((j, m.to_u64(), why))),
                    }
                }
            }
            *p = w as u32;
            s = e;
        }
        Ok((w, dropped))
    }
}

/// Where the bands' results go: the caller's vectors ([`Sink`], every band
/// copying itself into its place at once) or a file written as a stream
/// (`stream::FileSink`, the bands one at a time in order).
/// Used as `&dyn BandSink`: `put` is called once per band, so the call
/// costs nothing, and the band workers are compiled once per input,
/// reducer and minor key type instead of once per result type too.
pub(crate) trait BandSink<M: Minor, L: Lane>: Sync {
    /// True when [`BandSink::put`] must see the bands in band order, one
    /// at a time (it is then called while the band holds its turn).
    fn in_order(&self) -> bool;
    /// Take one band's `minor.len()` compacted entries, which start at
    /// entry `off` of the result: buckets `lo..lo + ends.len()`, bucket
    /// `lo + j` ending at entry `ends[j]` of the band.
    fn put(&self, off: usize, lo: u64, minor: &[M], lanes: &[L], ends: &[u32])
    -> Result<(), Fault>;
    /// The caller's stop flag, if it gave one: the bands stop at their
    /// next chunk once it is set.
    fn stop(&self) -> Option<&AtomicBool> {
        None
    }
}

impl<M: Minor, L: Lane, O: crate::element::Element + FromLane<L>, J: OutIndex> BandSink<M, L>
    for Sink<'_, O, J>
{
    fn in_order(&self) -> bool {
        false
    }

    fn put(
        &self,
        off: usize,
        lo: u64,
        minor: &[M],
        lanes: &[L],
        ends: &[u32],
    ) -> Result<(), Fault> {
        let (w, rows) = (minor.len(), ends.len());
        let sink = self;
        // SAFETY: the publish protocol gives this band entries off..off+w
        // alone (offsets are the running sum of the bands' entry counts,
        // taken in band order), and buckets lo..lo+rows, whose pointers no
        // other band writes.
        let vals = unsafe { sink.values.range(off, w) }.ok_or(Fault::BadInput)?;
        for (d, &l) in vals.iter_mut().zip(lanes) {
            d.write(O::from_lane_bits(l));
        }
        match &sink.form {
            Form::Compressed { pointers } => {
                // SAFETY: as above.
                let idx = unsafe { sink.indices.range(off, w) }.ok_or(Fault::BadInput)?;
                for (d, &m) in idx.iter_mut().zip(minor) {
                    d.write(J::from_u64(m.to_u64()));
                }
                // SAFETY: pointer lo + 1 + j belongs to bucket lo + j of
                // this band; pointer 0 to the band that starts at 0.
                let ptr =
                    unsafe { pointers.range(lo as usize + 1, rows) }.ok_or(Fault::BadInput)?;
                for (d, &p) in ptr.iter_mut().zip(ends) {
                    d.write(J::from_u64((off + p as usize) as u64));
                }
                if lo == 0 {
                    // SAFETY: as above.
                    let z = unsafe { pointers.range(0, 1) }.ok_or(Fault::BadInput)?;
                    z[0].write(J::from_u64(0));
                }
            }
            Form::CooMatrix => {
                // SAFETY: as above, two indices per entry.
                let idx = unsafe { sink.indices.range(2 * off, 2 * w) }.ok_or(Fault::BadInput)?;
                let mut i = 0usize;
                for (j, &end) in ends.iter().enumerate() {
                    let r = J::from_u64(lo + j as u64);
                    while i < end as usize {
                        idx[2 * i].write(r);
                        idx[2 * i + 1].write(J::from_u64(minor[i].to_u64()));
                        i += 1;
                    }
                }
            }
            Form::CooPacked {
                shifts,
                bits,
                split,
            } => {
                let rank = shifts.len();
                // SAFETY: as above, `rank` indices per entry.
                let idx =
                    unsafe { sink.indices.range(rank * off, rank * w) }.ok_or(Fault::BadInput)?;
                let mut i = 0usize;
                for (j, &end) in ends.iter().enumerate() {
                    let top = (lo + j as u64) << split;
                    while i < end as usize {
                        let key = top | minor[i].to_u64();
                        for (d, (&s, &b)) in shifts.iter().zip(bits.iter()).enumerate() {
                            let mask = if b == 0 { 0 } else { u64::MAX >> (64 - b) };
                            idx[rank * i + d].write(J::from_u64((key >> s) & mask));
                        }
                        i += 1;
                    }
                }
            }
        }
        Ok(())
    }
}

impl<M: Minor, L: Lane> Grouper<M, L> {
    /// Room for buckets of up to `max` contributions.
    pub(crate) fn new(max: usize) -> Result<Self, Fault> {
        let mut g = Grouper {
            hashed: Box::new(Hashed {
                tab_key: [M::default(); TABLE],
                tab_group: [0; TABLE],
                tpos: [0; HASH_MAX],
                dkey: [M::default(); HASH_MAX],
                cnt: [0; HASH_MAX],
                of: [0; HASH_MAX],
                order: [M::Packed::default(); HASH_MAX],
                group: [L::default(); HASH_MAX],
                out: [(M::default(), 0, 0); HASH_MAX],
                n_out: 0,
            }),
            by_hash: false,
            packed: filled(0, M::Packed::default(), "a bucket's sort keys")?,
            group: filled(0, L::default(), "a bucket's values")?,
            out: filled(0, (M::default(), 0, 0), "a bucket's groups")?,
        };
        g.packed
            .try_reserve_exact(max)
            .map_err(|_| Fault::OutOfMemory)?;
        g.group
            .try_reserve_exact(max)
            .map_err(|_| Fault::OutOfMemory)?;
        g.out
            .try_reserve_exact(max)
            .map_err(|_| Fault::OutOfMemory)?;
        Ok(g)
    }

    /// Group the bucket `(ms, ls)` (at least two contributions); then
    /// [`Grouper::groups`] has them.
    #[inline]
    pub(crate) fn prepare(&mut self, ms: &[M], ls: &[L]) -> Result<(), Fault> {
        let k = ms.len();
        self.by_hash = k > INSERTION_MAX && k <= HASH_MAX;
        if self.by_hash {
            self.hashed.group_bucket(ms, ls);
            Ok(())
        } else {
            self.by_sort(ms, ls)
        }
    }

    /// The groups of the last bucket (key, start, end) and their lanes.
    #[inline]
    #[allow(clippy::type_complexity)]
    pub(crate) fn groups(&self) -> (&[(M, u32, u32)], &[L]) {
        if self.by_hash {
            let h = &*self.hashed;
            (&h.out[..h.n_out.min(HASH_MAX)], &h.group[..])
        } else {
            (&self.out, &self.group)
        }
    }

    /// Sort keys that carry the place, gather the lanes in that order.
    fn by_sort(&mut self, ms: &[M], ls: &[L]) -> Result<(), Fault> {
        let p = &mut self.packed;
        p.clear();
        self.group.clear();
        self.out.clear();
        // Within the room made for the largest bucket: no allocation here.
        for v in [p.try_reserve(ms.len()), self.group.try_reserve(ms.len())] {
            v.map_err(|_| Fault::OutOfMemory)?;
        }
        self.out
            .try_reserve(ms.len())
            .map_err(|_| Fault::OutOfMemory)?;
        p.extend(ms.iter().enumerate().map(|(i, &m)| m.pack(i as u32)));
        if p.len() <= INSERTION_MAX {
            insertion_sort(p);
        } else {
            // Every key is distinct (it carries its place): unstable is
            // stable here.
            p.sort_unstable();
        }
        self.group.extend(p.iter().map(|&q| ls[M::pos(q)]));
        let mut g = 0usize;
        while g < p.len() {
            let m = M::key(p[g]);
            let mut h = g + 1;
            while h < p.len() && M::key(p[h]) == m {
                h += 1;
            }
            self.out.push((m, g as u32, h as u32));
            g = h;
        }
        Ok(())
    }
}

impl<M: Minor, L: Lane> Hashed<M, L> {
    /// Fold a bucket of at most [`HASH_MAX`] contributions group by group
    /// as they come (`R::ONLINE`), then sort the distinct keys: `order`
    /// has them, `vals` each one's result in that order. None when some
    /// group did not finish online (then nothing was written and the
    /// bucket takes the general path).
    #[inline]
    fn accumulate<R: Reduce<L>>(
        &mut self,
        red: &R,
        ms: &[M],
        ls: &[L],
        accs: &mut [R::Acc; HASH_MAX],
        vals: &mut [L; HASH_MAX],
    ) -> Option<usize> {
        const T: usize = TABLE - 1;
        const H: usize = HASH_MAX - 1;
        let k = ms.len().min(HASH_MAX);
        let mut nd = 0usize;
        for (&m, &l) in ms[..k].iter().zip(&ls[..k]) {
            let mut h = m.hash() & T;
            loop {
                let t = self.tab_group[h] as usize;
                if t == 0 {
                    self.tab_group[h] = nd as u16 + 1;
                    self.tab_key[h] = m;
                    self.tpos[nd & H] = h as u16;
                    self.dkey[nd & H] = m;
                    accs[nd & H] = R::start(l);
                    nd += 1;
                    break;
                }
                if self.tab_key[h] == m {
                    R::add(&mut accs[(t - 1) & H], l);
                    break;
                }
                h = (h + 1) & T;
            }
        }
        let nd = nd.min(HASH_MAX);
        for &t in &self.tpos[..nd] {
            self.tab_group[t as usize] = 0;
        }
        for (g, (o, &m)) in self.order[..nd]
            .iter_mut()
            .zip(&self.dkey[..nd])
            .enumerate()
        {
            *o = m.pack(g as u32);
        }
        sort_distinct::<M>(&mut self.order[..nd]);
        let mut all = true;
        for (v, &q) in vals[..nd].iter_mut().zip(&self.order[..nd]) {
            match red.done(&accs[M::pos(q) & H]) {
                Some(x) => *v = x,
                None => all = false,
            }
        }
        all.then_some(nd)
    }

    /// Number the distinct keys of a bucket of at most [`HASH_MAX`]
    /// contributions through the table, sort only those, then place each
    /// lane in its group (a counting sort by group: stable).
    #[inline]
    fn group_bucket(&mut self, ms: &[M], ls: &[L]) {
        const T: usize = TABLE - 1;
        const H: usize = HASH_MAX - 1;
        let k = ms.len().min(HASH_MAX);
        let mut nd = 0usize;
        for (i, &m) in ms[..k].iter().enumerate() {
            let mut h = m.hash() & T;
            let g = loop {
                let t = self.tab_group[h] as usize;
                if t == 0 {
                    self.tab_group[h] = nd as u16 + 1;
                    self.tab_key[h] = m;
                    self.tpos[nd & H] = h as u16;
                    self.dkey[nd & H] = m;
                    self.cnt[nd & H] = 0;
                    nd += 1;
                    break nd - 1;
                }
                if self.tab_key[h] == m {
                    break t - 1;
                }
                h = (h + 1) & T;
            };
            self.of[i & H] = g as u16;
            self.cnt[g & H] += 1;
        }
        let nd = nd.min(HASH_MAX);
        for (g, (o, &m)) in self.order[..nd]
            .iter_mut()
            .zip(&self.dkey[..nd])
            .enumerate()
        {
            *o = m.pack(g as u32);
        }
        sort_distinct::<M>(&mut self.order[..nd]);
        // Each group's start, in minor order; then `cnt` holds the next
        // place of each group.
        let mut at = 0u32;
        for (o, &q) in self.out[..nd].iter_mut().zip(&self.order[..nd]) {
            let g = M::pos(q) & H;
            let c = self.cnt[g];
            *o = (M::key(q), at, at + c);
            self.cnt[g] = at;
            at += c;
        }
        self.n_out = nd;
        for (&g, &l) in self.of[..k].iter().zip(&ls[..k]) {
            let c = &mut self.cnt[g as usize & H];
            self.group[*c as usize & H] = l;
            *c += 1;
        }
        for &t in &self.tpos[..nd] {
            self.tab_group[t as usize] = 0;
        }
    }
}

/// Sort the distinct keys of a bucket: up to 8 by the network, padded.
#[inline(always)]
fn sort_distinct<M: Minor>(v: &mut [M::Packed]) {
    if v.len() <= 8 {
        let mut t = [M::PAD; 8];
        t[..v.len()].copy_from_slice(v);
        sort8(&mut t);
        let n = v.len();
        v.copy_from_slice(&t[..n]);
    } else {
        sort_small(v);
    }
}

/// Sort distinct keys: insertion sort for a few (FE rows: ~26), the
/// standard sort beyond (elasticity rows: ~81).
#[inline]
fn sort_small<T: Copy + Ord>(v: &mut [T]) {
    if v.len() <= 32 {
        insertion_sort(v);
    } else {
        v.sort_unstable();
    }
}

/// The 19 comparators of an optimal sorting network for 8 keys.
const NET8: [(usize, usize); 19] = [
    (0, 2),
    (1, 3),
    (4, 6),
    (5, 7),
    (0, 4),
    (1, 5),
    (2, 6),
    (3, 7),
    (0, 1),
    (2, 3),
    (4, 5),
    (6, 7),
    (2, 4),
    (3, 5),
    (1, 4),
    (3, 6),
    (1, 2),
    (3, 4),
    (5, 6),
];

/// Sort 8 keys by [`NET8`], each comparator a min and a max (conditional
/// moves, no branch).
#[inline(always)]
fn sort8<T: Copy + Ord>(v: &mut [T; 8]) {
    for &(i, j) in &NET8 {
        let (a, b) = (v[i], v[j]);
        v[i] = a.min(b);
        v[j] = a.max(b);
    }
}

/// Stable insertion sort of a few keys.
#[inline]
fn insertion_sort<T: Copy + Ord>(v: &mut [T]) {
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && v[j - 1] > x {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The network sorts every 0/1 input (so, by the 0-1 principle, every
    /// input).
    #[test]
    fn net8_sorts() {
        for bits in 0u32..256 {
            let mut v = [0u8; 8];
            for (i, x) in v.iter_mut().enumerate() {
                *x = ((bits >> i) & 1) as u8;
            }
            sort8(&mut v);
            assert!(v.windows(2).all(|w| w[0] <= w[1]), "{bits:08b}: {v:?}");
        }
    }
}
