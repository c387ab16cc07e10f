//! Bands: consecutive buckets whose contributions fit one worker's
//! scratch. For each band a worker makes one pass over the chunks of the
//! caller's arrays whose bucket range meets the band (the others are
//! skipped), scatters each contribution's (minor key, lane) into its
//! bucket's place, orders every bucket by minor key in cache, reduces each
//! coordinate's group, and compacts the result in its scratch. Bands are
//! taken in order by the workers; each publishes its entry count in band
//! order, which gives it its place in the result, and copies itself there.

use crate::assemble::combine::CombineError;
use crate::assemble::direct::count::Counts;
use crate::assemble::direct::input::{Input, INVALID};
use crate::assemble::direct::lane::{FromLane, Lane, OutValue, Reduce};
use crate::assemble::direct::out::{filled, OutIndex, Shared};
use crate::assemble::direct::Fault;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

/// Buckets of at most this many contributions are insertion sorted (FE
/// rows, nearly sorted runs of 8, are faster so than through
/// `sort_unstable` up to about this size).
const INSERTION_MAX: usize = 64;

/// A minor key as the scratch holds it: u32 when the minor field fits.
pub(crate) trait Minor: Copy + Default + Eq + Send + Sync + 'static {
    /// The key with the contribution's place in its bucket, so that an
    /// unstable sort of these is stable in effect.
    type Packed: Copy + Ord + Send + Sync + Default;
    fn from_u64(m: u64) -> Self;
    fn to_u64(self) -> u64;
    fn pack(self, i: u32) -> Self::Packed;
    fn key(p: Self::Packed) -> Self;
    fn pos(p: Self::Packed) -> usize;
}

impl Minor for u32 {
    type Packed = u64;
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
}

impl Minor for u64 {
    type Packed = u128;
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

/// Cut `counts` into bands of at most `cap` contributions and `cap_buckets`
/// buckets (a single bucket above `cap` gets a band of its own).
pub(crate) fn cut(counts: &[u32], cap: usize, cap_buckets: usize) -> Result<Bands, Fault> {
    let cap_buckets = cap_buckets.max(1);
    let mut bounds = filled(0, 0u64, "the band bounds")?;
    let try_push = |b: &mut Vec<u64>, x: u64| -> Result<(), Fault> {
        b.try_reserve(1).map_err(|_| Fault::OutOfMemory)?;
        b.push(x);
        Ok(())
    };
    try_push(&mut bounds, 0)?;
    let (mut acc, mut start) = (0usize, 0usize);
    let (mut max_entries, mut max_buckets, mut max_bucket) = (0usize, 0usize, 0usize);
    for (i, &c) in counts.iter().enumerate() {
        let c = c as usize;
        max_bucket = max_bucket.max(c);
        if i > start && (acc + c > cap || i - start == cap_buckets) {
            try_push(&mut bounds, i as u64)?;
            max_entries = max_entries.max(acc);
            max_buckets = max_buckets.max(i - start);
            acc = 0;
            start = i;
        }
        acc += c;
    }
    if counts.len() > start || counts.is_empty() {
        try_push(&mut bounds, counts.len() as u64)?;
        max_entries = max_entries.max(acc);
        max_buckets = max_buckets.max(counts.len() - start);
    }
    Ok(Bands {
        bounds,
        max_entries,
        max_buckets,
        max_bucket,
    })
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
    /// One bucket's sort keys ([`Minor::pack`]).
    packed: Vec<M::Packed>,
    /// One bucket's lanes in sorted order.
    group: Vec<L>,
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
        self.abort.load(Ordering::Relaxed) || self.stop.is_some_and(|s| s.load(Ordering::Relaxed))
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
pub(crate) fn run<In, R, M, O, J>(
    input: &In,
    red: &R,
    counts: &Counts,
    bands: &Bands,
    threads: usize,
    sink: &Sink<'_, O, J>,
    stop: Option<&AtomicBool>,
) -> Result<Done, BandError>
where
    In: Input,
    R: Reduce<In::L>,
    M: Minor,
    O: OutValue + FromLane<In::L>,
    J: OutIndex,
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
    let work = || worker::<In, R, M, O, J>(input, red, counts, bands, sink, &sh);
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
fn worker<In, R, M, O, J>(
    input: &In,
    red: &R,
    counts: &Counts,
    bands: &Bands,
    sink: &Sink<'_, O, J>,
    sh: &Shared2<'_>,
) -> u64
where
    In: Input,
    R: Reduce<In::L>,
    M: Minor,
    O: OutValue + FromLane<In::L>,
    J: OutIndex,
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
        // Wait for the band before this one to take its place.
        let off = {
            let mut p = Shared2::lock(&sh.publish);
            while p.next != b && !sh.stopped() && sh.failed_band.load(Ordering::SeqCst) == usize::MAX {
                p = sh.turn.wait(p).unwrap_or_else(|e| e.into_inner());
            }
            if p.next != b {
                break;
            }
            let off = p.offset;
            p.offset += w;
            p.next += 1;
            sh.turn.notify_all();
            off
        };
        if let Err(f) = scratch.write(sink, off, lo, (hi - lo) as usize, w) {
            sh.fail(f);
            break;
        }
    }
    dropped
}

impl<M: Minor, L: Lane> Scratch<M, L> {
    /// Buffers for the largest band, bucket and bucket count there is.
    fn new(bands: &Bands) -> Result<Self, Fault> {
        let sort = bands.max_bucket.min(bands.max_entries);
        Ok(Scratch {
            minor: filled(bands.max_entries, M::default(), "a band's minor keys")?,
            lanes: filled(bands.max_entries, L::default(), "a band's values")?,
            pos: filled(bands.max_buckets, 0u32, "a band's bucket places")?,
            packed: {
                let mut g = filled(0, M::Packed::default(), "a bucket's sort keys")?;
                g.try_reserve_exact(sort).map_err(|_| Fault::OutOfMemory)?;
                g
            },
            group: {
                let mut g = filled(0, L::default(), "a bucket's values")?;
                g.try_reserve_exact(sort).map_err(|_| Fault::OutOfMemory)?;
                g
            },
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
        let (minor, lanes) = (&mut self.minor[..], &mut self.lanes[..]);
        for (c, &(a, b)) in counts.ranges.iter().enumerate() {
            if b < lo || a >= hi {
                continue;
            }
            if sh.stopped() {
                return Err(Fault::Stopped);
            }
            let (x, y) = counts.chunk_span(c, n);
            let mut bad = false;
            input.entries(x, y, |bucket, m, l| {
                let j = bucket.wrapping_sub(lo) as usize;
                if let Some(p) = pos.get_mut(j) {
                    let q = *p as usize;
                    *p += 1;
                    match (minor.get_mut(q), lanes.get_mut(q)) {
                        (Some(dm), Some(dl)) if m != INVALID => {
                            *dm = M::from_u64(m);
                            *dl = l;
                        }
                        _ => bad = true,
                    }
                }
            });
            if bad {
                return Err(Fault::BadInput);
            }
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
            packed,
            group,
            ..
        } = self;
        let mut s = 0usize;
        let mut w = 0usize;
        let mut dropped = 0u64;
        for (j, p) in pos.iter_mut().take(rows).enumerate() {
            let e = *p as usize;
            let k = e.checked_sub(s).ok_or(Err(Fault::BadInput))?;
            if k == 1 {
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
                // Sort keys that carry the place, then gather the lanes in
                // that order: the bucket is copied out whole before any
                // result is written over it.
                packed.clear();
                packed
                    .try_reserve(k)
                    .map_err(|_| Err(Fault::OutOfMemory))?;
                sort_keys::<M>(ms, packed);
                group.clear();
                group.try_reserve(k).map_err(|_| Err(Fault::OutOfMemory))?;
                group.extend(packed.iter().map(|&q| ls[M::pos(q)]));
                let mut g = 0usize;
                while g < k {
                    let m = M::key(packed[g]);
                    let mut h = g + 1;
                    while h < k && M::key(packed[h]) == m {
                        h += 1;
                    }
                    match red.reduce(&group[g..h]) {
                        Ok(Some(v)) => {
                            minor[w] = m;
                            lanes[w] = v;
                            w += 1;
                        }
                        Ok(None) => dropped += 1,
                        Err(why) => return Err(Ok((j, m.to_u64(), why))),
                    }
                    g = h;
                }
            }
            *p = w as u32;
            s = e;
        }
        Ok((w, dropped))
    }

    /// Copy the band's `w` compacted entries to `off` in the result.
    fn write<O: OutValue + FromLane<L>, J: OutIndex>(
        &self,
        sink: &Sink<'_, O, J>,
        off: usize,
        lo: u64,
        rows: usize,
        w: usize,
    ) -> Result<(), Fault> {
        // SAFETY: the publish protocol gives this band entries off..off+w
        // alone (offsets are the running sum of the bands' entry counts,
        // taken in band order), and buckets lo..lo+rows, whose pointers no
        // other band writes.
        let vals = unsafe { sink.values.range(off, w) }.ok_or(Fault::BadInput)?;
        for (d, &l) in vals.iter_mut().zip(&self.lanes[..w]) {
            d.write(O::from_lane_bits(l));
        }
        let minor = &self.minor[..w];
        match &sink.form {
            Form::Compressed { pointers } => {
                // SAFETY: as above.
                let idx = unsafe { sink.indices.range(off, w) }.ok_or(Fault::BadInput)?;
                for (d, &m) in idx.iter_mut().zip(minor) {
                    d.write(J::from_u64(m.to_u64()));
                }
                // SAFETY: pointer lo + 1 + j belongs to bucket lo + j of
                // this band; pointer 0 to the band that starts at 0.
                let ptr = unsafe { pointers.range(lo as usize + 1, rows) }.ok_or(Fault::BadInput)?;
                for (d, &p) in ptr.iter_mut().zip(&self.pos[..rows]) {
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
                for (j, &end) in self.pos[..rows].iter().enumerate() {
                    let r = J::from_u64(lo + j as u64);
                    while i < end as usize {
                        idx[2 * i].write(r);
                        idx[2 * i + 1].write(J::from_u64(minor[i].to_u64()));
                        i += 1;
                    }
                }
            }
            Form::CooPacked { shifts, bits, split } => {
                let rank = shifts.len();
                // SAFETY: as above, `rank` indices per entry.
                let idx =
                    unsafe { sink.indices.range(rank * off, rank * w) }.ok_or(Fault::BadInput)?;
                let mut i = 0usize;
                for (j, &end) in self.pos[..rows].iter().enumerate() {
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

/// The keys of one bucket, `(minor << 32) | place`, sorted: insertion sort
/// for short buckets (FE rows arrive as nearly sorted runs), the standard
/// unstable sort beyond (the place makes every key distinct, so the order
/// of a coordinate's contributions is kept).
#[inline]
fn sort_keys<M: Minor>(ms: &[M], out: &mut Vec<M::Packed>) {
    out.extend(ms.iter().enumerate().map(|(i, &m)| m.pack(i as u32)));
    if out.len() <= INSERTION_MAX {
        for i in 1..out.len() {
            let x = out[i];
            let mut j = i;
            while j > 0 && out[j - 1] > x {
                out[j] = out[j - 1];
                j -= 1;
            }
            out[j] = x;
        }
    } else {
        out.sort_unstable();
    }
}
