//! The counting pass: contributions per bucket, and the range of buckets
//! each chunk of the input touches (so that a band's pass can skip the
//! chunks that miss it). Both cores: each thread takes a contiguous part
//! of the input, finds its chunks' ranges, then counts into a histogram of
//! just the buckets its part touches (for input in element order, about
//! half of them), which are added up at the end.

use crate::assemble::direct::input::Input;
use crate::assemble::direct::out::{filled, zeroed};
use crate::assemble::direct::Fault;
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
    /// Contributions `lo..hi` of chunk `c`.
    pub(crate) fn chunk_span(&self, c: usize, n: usize) -> (usize, usize) {
        let lo = c * self.chunk;
        (lo, (lo + self.chunk).min(n))
    }
}

/// Why a pass stopped before the end.
fn stopped(stop: Option<&AtomicBool>) -> bool {
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
    let mut ranges = filled(n_chunks, (0u64, 0u64), "the chunk ranges of the counting pass")?;
    let mut per_bucket = zeroed(buckets as usize, "the bucket counts")?;
    let threads = threads.clamp(1, n_chunks.max(1));
    // Contiguous parts of whole chunks, one per thread.
    let per = n_chunks.div_ceil(threads);
    let bad = AtomicBool::new(false);
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
        input.count(0, n, 0, &mut per_bucket);
    } else {
        let parts: Vec<(usize, usize)> = (0..threads)
            .map(|t| ((t * per * chunk).min(n), ((t + 1) * per * chunk).min(n)))
            .collect();
        let mut locals = Vec::new();
        for &(a, b) in spans.iter().skip(1).flatten() {
            locals.push((a, zeroed((b - a + 1) as usize, "a counting thread's histogram")?));
        }
        std::thread::scope(|s| {
            let (p0, rest) = parts.split_at(1);
            for (&(lo, hi), (base, hist)) in rest.iter().zip(locals.iter_mut()) {
                let base = *base;
                s.spawn(move || input.count(lo, hi, base, hist));
            }
            if let Some(&(lo, hi)) = p0.first() {
                input.count(lo, hi, 0, &mut per_bucket);
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
