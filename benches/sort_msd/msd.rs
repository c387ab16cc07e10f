//! Prototype: MSD-first stable radix sort of `(u64 key, u64 raw)` records
//! that sorts only the key bits that actually vary.
//!
//! 1. One read pass ORs `key ^ first_key` over the buffer: the highest set
//!    bit is the top bit that varies (FE chunks cover a narrow band of rows,
//!    so the top of `key_bits` is often constant) and the MSD digit is taken
//!    right below it, without re-scanning digit by digit.
//! 2. MSD histogram and a stable scatter into `scratch` (on `threads`
//!    threads: each thread scatters its contiguous part into its own
//!    sub-slice of every bucket, after the parts of the threads before it,
//!    so the result is the same as on one thread).
//! 3. Each bucket (L2-sized) is LSD sorted back into `records` on only the
//!    bits that vary inside it: the bucket's own varying mask gives the
//!    lowest and highest varying bit, and the longest constant gap in
//!    between (FE keys `row << b | col`: the high column bits are constant
//!    within a band of rows) is squeezed out, which often saves a pass.
//!
//! Stable throughout; uses exactly `records.len()` records of scratch, like
//! `coo_assembler::internals::assemble::sort::sort_records`.

use coo_assembler::internals::assemble::sort::Record;

/// Buffers shorter than this skip the MSD pass.
const MSD_MIN: usize = 1 << 15;
/// Average MSD bucket: 16 Ki records = 256 KiB, twice with the ping-pong
/// half, inside a 1 MiB L2.
const BUCKET_TARGET: usize = 1 << 14;
const MSD_BITS_MAX: u32 = 12;
const LSD_BITS_MAX: u32 = 11;
const INSERTION_MAX: usize = 48;
/// Buckets above this get another MSD pass (skewed keys).
const RECURSE_MIN: usize = 1 << 17;

type Rec = Record<u64>;

/// Sort `records` by key, stably. `scratch` grows to `records.len()`.
pub fn sort(records: &mut [Rec], scratch: &mut Vec<Rec>, key_bits: u32, threads: usize) {
    let n = records.len();
    if n < 2 || key_bits == 0 {
        return;
    }
    if n <= INSERTION_MAX {
        insertion_sort(records);
        return;
    }
    if scratch.len() < n {
        scratch.reserve_exact(n - scratch.len());
        scratch.resize(n, Rec { key: 0, val: 0 });
    }
    let buf = &mut scratch[..n];
    let threads = threads.clamp(1, 1 + n / (1 << 20));
    let mut counts = vec![0usize; 6 << LSD_BITS_MAX];
    if n < MSD_MIN {
        if lsd(records, buf, key_bits, &mut counts) {
            records.copy_from_slice(buf);
        }
        return;
    }
    msd(records, buf, key_bits, threads, &mut counts);
}

fn varying_mask(recs: &[Rec]) -> u64 {
    let k0 = recs[0].key;
    let mut m = 0u64;
    for r in recs {
        m |= r.key ^ k0;
    }
    m
}

/// MSD scatter `data` -> `buf`, then sort every bucket back into `data`.
fn msd(data: &mut [Rec], buf: &mut [Rec], key_bits: u32, threads: usize, counts: &mut [usize]) {
    let n = data.len();
    let buckets = n.div_ceil(BUCKET_TARGET).max(2);
    let want = (usize::BITS - (buckets - 1).leading_zeros()).clamp(1, MSD_BITS_MAX);
    // Guess that the top `want` bits of key_bits vary; the same pass gives
    // the varying mask, and only if the guess was wrong is the histogram
    // taken again, directly on the right digit.
    let mut width = want.min(key_bits);
    let mut shift = key_bits - width;
    let (mut hists, m) = hist_par(data, shift, width, threads, true);
    let hi = 64 - m.leading_zeros();
    if hi == 0 {
        return; // all keys equal
    }
    if hi < key_bits {
        width = want.min(hi);
        shift = hi - width;
        hists = hist_par(data, shift, width, threads, false).0;
    }
    let size = 1usize << width;
    let mask = (size - 1) as u64;
    let part = n.div_ceil(threads);
    let mut totals = vec![0usize; size];
    for h in &hists {
        for (t, c) in totals.iter_mut().zip(h) {
            *t += c;
        }
    }

    // Scatter. Thread t owns, in every bucket, the sub-slice after those of
    // threads < t: disjoint &mut slices, no unsafe, stable.
    if threads == 1 {
        let mut offs = vec![0usize; size];
        let mut sum = 0;
        for (o, &c) in offs.iter_mut().zip(&totals) {
            *o = sum;
            sum += c;
        }
        for r in data.iter() {
            let d = ((r.key >> shift) & mask) as usize;
            buf[offs[d]] = *r;
            offs[d] += 1;
        }
    } else {
        let mut slots: Vec<Vec<&mut [Rec]>> =
            (0..threads).map(|_| Vec::with_capacity(size)).collect();
        let mut rest: &mut [Rec] = buf;
        for d in 0..size {
            for (t, h) in hists.iter().enumerate() {
                let (a, b) = std::mem::take(&mut rest).split_at_mut(h[d]);
                slots[t].push(a);
                rest = b;
            }
        }
        std::thread::scope(|s| {
            for (c, mut sl) in data.chunks(part).zip(slots) {
                s.spawn(move || {
                    let mut cur = vec![0usize; size];
                    for r in c {
                        let d = ((r.key >> shift) & mask) as usize;
                        sl[d][cur[d]] = *r;
                        cur[d] += 1;
                    }
                });
            }
        });
    }

    // Buckets: buf -> data. Split the bucket list where the record count
    // crosses 1/threads of n.
    if threads == 1 {
        sort_buckets(buf, data, &totals, shift, counts);
    } else {
        let mut groups: Vec<(usize, usize)> = Vec::new(); // (first bucket, records)
        let (mut first, mut acc) = (0usize, 0usize);
        let per = n.div_ceil(threads);
        for (d, &c) in totals.iter().enumerate() {
            acc += c;
            if acc >= per && groups.len() + 1 < threads {
                groups.push((first, acc));
                first = d + 1;
                acc = 0;
            }
        }
        groups.push((first, acc));
        std::thread::scope(|s| {
            let (mut b_rest, mut d_rest): (&mut [Rec], &mut [Rec]) = (buf, data);
            for (i, &(first, len)) in groups.iter().enumerate() {
                let (b, br) = std::mem::take(&mut b_rest).split_at_mut(len);
                let (d, dr) = std::mem::take(&mut d_rest).split_at_mut(len);
                b_rest = br;
                d_rest = dr;
                let end = groups.get(i + 1).map_or(size, |g| g.0);
                let tot = &totals[first..end];
                s.spawn(move || {
                    let mut counts = vec![0usize; 6 << LSD_BITS_MAX];
                    sort_buckets(b, d, tot, shift, &mut counts);
                });
            }
        });
    }
}

/// Per-thread histograms of the digit `[shift, shift + width)` over
/// contiguous parts, and (if `with_mask`) the OR of `key ^ first key`.
fn hist_par(
    data: &[Rec],
    shift: u32,
    width: u32,
    threads: usize,
    with_mask: bool,
) -> (Vec<Vec<usize>>, u64) {
    let part = data.len().div_ceil(threads);
    let k0 = data[0].key;
    let one = move |c: &[Rec]| {
        let size = 1usize << width;
        let mask = (size - 1) as u64;
        let mut h = vec![0usize; size];
        let mut m = 0u64;
        if with_mask {
            for r in c {
                m |= r.key ^ k0;
                h[((r.key >> shift) & mask) as usize] += 1;
            }
        } else {
            for r in c {
                h[((r.key >> shift) & mask) as usize] += 1;
            }
        }
        (h, m)
    };
    if threads == 1 {
        let (h, m) = one(data);
        return (vec![h], m);
    }
    std::thread::scope(|s| {
        let hs: Vec<_> = data.chunks(part).map(|c| s.spawn(move || one(c))).collect();
        let mut out = Vec::new();
        let mut m = 0u64;
        for h in hs {
            let (hh, mm) = h.join().unwrap_or_else(|_| (vec![0; 1 << width], u64::MAX));
            out.push(hh);
            m |= mm;
        }
        (out, m)
    })
}

/// Sort consecutive buckets of the given sizes from `src` into `dst`.
fn sort_buckets(
    src: &mut [Rec],
    dst: &mut [Rec],
    sizes: &[usize],
    shift: u32,
    counts: &mut [usize],
) {
    let mut start = 0;
    for &c in sizes {
        let end = start + c;
        let (s, d) = (&mut src[start..end], &mut dst[start..end]);
        if c <= INSERTION_MAX {
            d.copy_from_slice(s);
            insertion_sort(d);
        } else if c > RECURSE_MIN {
            // Skewed: another MSD pass inside this bucket (s -> d -> sorted in s), copy back.
            msd(s, d, shift, 1, counts);
            d.copy_from_slice(s);
        } else if !lsd(s, d, shift, counts) {
            d.copy_from_slice(s);
        }
        start = end;
    }
}

/// How to turn a key into the compact digit source: bits `[lo, hi)` with
/// the constant gap `[g0, g1)` removed.
#[derive(Clone, Copy)]
struct Squeeze<const GAP: bool> {
    lo: u32,
    g0: u32,
    g1: u32,
}

impl<const GAP: bool> Squeeze<GAP> {
    #[inline(always)]
    fn apply(self, k: u64) -> u64 {
        let k = k >> self.lo;
        if GAP {
            let low = k & ((1u64 << self.g0) - 1);
            ((k >> self.g1) << self.g0) | low
        } else {
            k
        }
    }
}

/// The longest run of zero bits strictly inside `m` (relative to bit 0 of
/// `m`, which is set), as `[g0, g1)`.
fn longest_gap(m: u64, bits: u32) -> (u32, u32) {
    let (mut best, mut cur_start, mut in_gap) = ((0, 0), 0, false);
    for b in 0..bits {
        let set = (m >> b) & 1 == 1;
        if !set && !in_gap {
            in_gap = true;
            cur_start = b;
        } else if set && in_gap {
            in_gap = false;
            if b - cur_start > best.1 - best.0 {
                best = (cur_start, b);
            }
        }
    }
    best
}

/// LSD sort of `a` on the bits below `bits` that vary, ping-ponging with
/// `b`; true if the result is in `b`.
fn lsd(a: &mut [Rec], b: &mut [Rec], bits: u32, counts: &mut [usize]) -> bool {
    let m = varying_mask(a) & low_mask(bits);
    if m == 0 {
        return false;
    }
    let lo = m.trailing_zeros();
    let hi = 64 - m.leading_zeros();
    let rel = m >> lo;
    let span = hi - lo;
    let (g0, g1) = longest_gap(rel, span);
    let plain_passes = span.div_ceil(LSD_BITS_MAX);
    let squeezed = span - (g1 - g0);
    if g1 > g0 && squeezed.div_ceil(LSD_BITS_MAX) < plain_passes {
        lsd_passes(a, b, Squeeze::<true> { lo, g0, g1 }, squeezed, counts)
    } else {
        lsd_passes(a, b, Squeeze::<false> { lo, g0: 0, g1: 0 }, span, counts)
    }
}

fn lsd_passes<const GAP: bool>(
    a: &mut [Rec],
    b: &mut [Rec],
    sq: Squeeze<GAP>,
    eff: u32,
    counts: &mut [usize],
) -> bool {
    let n = a.len();
    let max_w = if n >= 2048 { LSD_BITS_MAX } else { 8 };
    let passes = eff.div_ceil(max_w);
    let width = eff.div_ceil(passes);
    let size = 1usize << width;
    let dmask = (size - 1) as u64;
    let counts = &mut counts[..passes as usize * size];
    counts.fill(0);
    for (p, h) in counts.chunks_exact_mut(size).enumerate() {
        let s = p as u32 * width;
        for r in a.iter() {
            h[((sq.apply(r.key) >> s) & dmask) as usize] += 1;
        }
    }
    let mut in_b = false;
    for (p, h) in counts.chunks_exact_mut(size).enumerate() {
        if h.contains(&n) {
            continue;
        }
        let mut sum = 0;
        for c in h.iter_mut() {
            let t = *c;
            *c = sum;
            sum += t;
        }
        let s = p as u32 * width;
        let (src, dst): (&[Rec], &mut [Rec]) = if in_b { (&*b, &mut *a) } else { (&*a, &mut *b) };
        for r in src {
            let d = ((sq.apply(r.key) >> s) & dmask) as usize;
            dst[h[d]] = *r;
            h[d] += 1;
        }
        in_b = !in_b;
    }
    in_b
}

fn low_mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

fn insertion_sort(v: &mut [Rec]) {
    for i in 1..v.len() {
        let cur = v[i];
        let mut j = i;
        while j > 0 && v[j - 1].key > cur.key {
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = cur;
    }
}
