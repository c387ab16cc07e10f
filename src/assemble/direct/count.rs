//! The counting pass: contributions per bucket, and the range of buckets
//! each chunk of the input touches (so that a band's pass can skip the
//! chunks that miss it). Both cores: each thread takes a contiguous part
//! of the input, finds its chunks' ranges, then counts into a histogram of
//! just the buckets its part touches (for input in element order, about
//! half of them), which are added up at the end.

use crate::assemble::direct::Fault;
use crate::assemble::direct::input::Input;
use crate::assemble::direct::out::{filled, zeroed};
use crate::error::Result;
use std::sync::atomic::{AtomicBool, Ordering};

/// Contributions per bucket and the bucket range of every chunk.
pub(crate) struct Counts {
    /// Contributions in each bucket.
    pub(crate) per_bucket: Vec<u32>,
    /// Smallest and largest bucket of chunk c (contributions
    /// `c * chunk .. (c + 1) * chunk`).
    pub(crate) ranges: Vec<(u64, u64)>,
    /// Contributions per chunk.
    pub(crate) chunk: usize,
}

impl Counts {
    /// Contributions counted into the buckets: all of them, less those
    /// `skip_negative` skipped.
    pub(crate) fn kept(&self) -> u64 {
        self.per_bucket.iter().map(|&c| u64::from(c)).sum()
    }

    /// Contributions `lo..hi` of chunk `c`.
    pub(crate) fn chunk_span(&self, c: usize, n: usize) -> (usize, usize) {
        let lo = c * self.chunk;
        (lo, (lo + self.chunk).min(n))
    }
}

/// Chunks read between two releases of the input's pages (an input in a
/// mapped file: see [`Input::release`]); a few MiB of records.
pub(crate) const RELEASE_CHUNKS: usize = 32;

/// [`Input::count`] over `lo..hi`, releasing the input as it goes.
fn count_part<In: Input>(
    input: &In,
    lo: usize,
    hi: usize,
    base: u64,
    hist: &mut [u32],
    chunk: usize,
) {
    let step = RELEASE_CHUNKS * chunk;
    let mut a = lo;
    while a < hi {
        let b = (a + step).min(hi);
        input.count(a, b, base, hist);
        input.release(a, b);
        a = b;
    }
}

/// The caller's stop flag is set: every stoppable pass (the kernel's and
/// a plan's) looks at it through this.
pub(crate) fn stopped(stop: Option<&AtomicBool>) -> bool {
    stop.is_some_and(|s| s.load(Ordering::Relaxed))
}

/// Count `input`'s contributions into `buckets` buckets on up to `threads`
/// threads. `hist_limit` bounds the bytes of the extra histograms the
/// other threads keep (beyond it, one thread counts everything).
pub(crate) fn count<In: Input>(
    input: &In,
    buckets: u64,
    threads: usize,
    chunk: usize,
    hist_limit: u64,
    stop: Option<&AtomicBool>,
) -> Result<Counts, Fault> {
    let n = input.len();
    let n_chunks = n.div_ceil(chunk);
    let mut ranges = filled(
        n_chunks,
        (0u64, 0u64),
        "the chunk ranges of the counting pass",
    )?;
    let mut per_bucket = zeroed(buckets as usize, "the bucket counts")?;
    let threads = threads.clamp(1, n_chunks.max(1));
    // Contiguous parts of whole chunks, one per thread.
    let per = n_chunks.div_ceil(threads);
    let bad = AtomicBool::new(false);
    // When every other thread can have a histogram of all buckets, one
    // pass does both: each chunk is counted right after its range is
    // found, while it is in cache, so the input is read once, not twice.
    let full = (threads as u64 - 1).saturating_mul(buckets.saturating_mul(4));
    if full <= hist_limit {
        let mut locals = Vec::new();
        for _ in 1..threads {
            locals.push(zeroed(buckets as usize, "a counting thread's histogram")?);
        }
        let one = |first: usize, part: &mut [(u64, u64)], hist: &mut [u32]| -> bool {
            let len = part.len();
            for (k, r) in part.iter_mut().enumerate() {
                if bad.load(Ordering::Relaxed) || stopped(stop) {
                    return false;
                }
                let a = (first + k) * chunk;
                let b = (a + chunk).min(n);
                let Some(range) = input.bucket_range(a, b) else {
                    bad.store(true, Ordering::Relaxed);
                    return false;
                };
                *r = range;
                input.count(a, b, 0, hist);
                if (k + 1) % RELEASE_CHUNKS == 0 || k + 1 == len {
                    input.release((first + k / RELEASE_CHUNKS * RELEASE_CHUNKS) * chunk, b);
                }
            }
            true
        };
        let done: Vec<bool> = if threads == 1 {
            vec![one(0, &mut ranges, &mut per_bucket)]
        } else {
            let mut hists: Vec<&mut [u32]> = vec![per_bucket.as_mut_slice()];
            hists.extend(locals.iter_mut().map(|h| h.as_mut_slice()));
            std::thread::scope(|s| {
                let hs: Vec<_> = ranges
                    .chunks_mut(per)
                    .zip(hists)
                    .enumerate()
                    .map(|(t, (part, hist))| s.spawn(move || one(t * per, part, hist)))
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap_or(false)).collect()
            })
        };
        if bad.load(Ordering::Relaxed) {
            return Err(Fault::BadInput);
        }
        if stopped(stop) || done.iter().any(|d| !d) {
            return Err(Fault::Stopped);
        }
        for hist in &locals {
            for (d, h) in per_bucket.iter_mut().zip(hist) {
                *d += h;
            }
        }
        return Ok(Counts {
            per_bucket,
            ranges,
            chunk,
        });
    }
    // Phase one: every chunk's range, each thread over its part.
    let scan = |first: usize, part: &mut [(u64, u64)]| -> Option<(u64, u64)> {
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for (k, r) in part.iter_mut().enumerate() {
            if bad.load(Ordering::Relaxed) || stopped(stop) {
                return None;
            }
            let a = (first + k) * chunk;
            let Some((x, y)) = input.bucket_range(a, (a + chunk).min(n)) else {
                bad.store(true, Ordering::Relaxed);
                return None;
            };
            *r = (x, y);
            lo = lo.min(x);
            hi = hi.max(y);
            if (k + 1) % RELEASE_CHUNKS == 0 {
                let z = (first + k + 1) * chunk;
                input.release(z - RELEASE_CHUNKS * chunk, z.min(n));
            }
        }
        let tail = part.len() % RELEASE_CHUNKS;
        if tail > 0 {
            let z = ((first + part.len()) * chunk).min(n);
            input.release((first + part.len() - tail) * chunk, z);
        }
        Some((lo, hi))
    };
    let spans: Vec<Option<(u64, u64)>> = if threads == 1 {
        vec![scan(0, &mut ranges)]
    } else {
        std::thread::scope(|s| {
            let hs: Vec<_> = ranges
                .chunks_mut(per)
                .enumerate()
                .map(|(t, part)| s.spawn(move || scan(t * per, part)))
                .collect();
            hs.into_iter().map(|h| h.join().ok().flatten()).collect()
        })
    };
    if bad.load(Ordering::Relaxed) {
        return Err(Fault::BadInput);
    }
    if stopped(stop) || spans.iter().any(Option::is_none) {
        return Err(Fault::Stopped);
    }
    // Phase two: the histogram. Thread 0 counts into the result, the
    // others into histograms of the buckets their part touches.
    let extra: u64 = spans
        .iter()
        .skip(1)
        .flatten()
        .map(|&(a, b)| (b - a + 1) * 4)
        .sum();
    if threads == 1 || extra > hist_limit {
        count_part(input, 0, n, 0, &mut per_bucket, chunk);
    } else {
        let parts: Vec<(usize, usize)> = (0..threads)
            .map(|t| ((t * per * chunk).min(n), ((t + 1) * per * chunk).min(n)))
            .collect();
        let mut locals = Vec::new();
        for &(a, b) in spans.iter().skip(1).flatten() {
            locals.push((
                a,
                zeroed((b - a + 1) as usize, "a counting thread's histogram")?,
            ));
        }
        std::thread::scope(|s| {
            let (p0, rest) = parts.split_at(1);
            for (&(lo, hi), (base, hist)) in rest.iter().zip(locals.iter_mut()) {
                let base = *base;
                s.spawn(move || count_part(input, lo, hi, base, hist, chunk));
            }
            if let Some(&(lo, hi)) = p0.first() {
                count_part(input, lo, hi, 0, &mut per_bucket, chunk);
            }
        });
        for (base, hist) in &locals {
            let Some(dst) = per_bucket.get_mut(*base as usize..*base as usize + hist.len()) else {
                continue;
            };
            for (d, h) in dst.iter_mut().zip(hist) {
                *d += h;
            }
        }
    }
    if stopped(stop) {
        return Err(Fault::Stopped);
    }
    Ok(Counts {
        per_bucket,
        ranges,
        chunk,
    })
}
