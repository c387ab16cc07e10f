//! Stable in-memory sort of `(key, value)` records.
//!
//! `u64`/`u128` keys take a radix sort over only the `key_bits` low bits that
//! a [`crate::assemble::key::KeyLayout`] can set:
//!
//! 1. Buffers of at least [`MSD_MIN`] records get one MSD pass on the top
//!    bits (enough for buckets of about [`BUCKET_TARGET`] records, widened
//!    when that saves an LSD pass, at most [`MSD_BITS`] bits), scattering
//!    into buckets that fit in L2. If every
//!    key shares that digit, the digit is dropped and the next one down is
//!    tried instead.
//!    Buckets above [`RECURSE_MIN`] records (skewed keys) get another MSD
//!    pass on the next bits.
//! 2. Each bucket (or a whole small buffer) is LSD radix sorted with
//!    balanced digits of up to 8 bits (up to 11 bits for buckets of at least
//!    2048 records); digits where one histogram bucket holds everything are
//!    skipped. Buckets of at most [`INSERTION_MAX`] records are insertion
//!    sorted instead.
//!
//! Every step is stable, so equal keys keep their input order (the `last`
//! duplicate policy depends on it). Wide keys take a bottom-up stable merge
//! sort through the same scratch buffer, so the memory budget is identical.
//! No `unsafe`: profiling shows the scatter passes stall on stores, not on
//! bounds checks.

use crate::assemble::key::Key;

/// One contribution: a packed index key and the raw bits of its value.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
pub struct Record<K> {
    /// Packed index tuple.
    pub key: K,
    /// Raw bits of the contribution (f64 bits or an integer); never inspected
    /// by the sort.
    pub val: u64,
}

/// Buffers at least this long get the MSD pass; smaller ones fit in L2
/// with their scratch half (32 Ki records of 16 bytes = 512 KiB, twice) and
/// are LSD sorted directly.
pub const MSD_MIN: usize = 1 << 15;
/// Maximum width of the MSD digit: 2048 buckets, reached from ~2^25
/// records (5e7 records: ~24 Ki per bucket).
pub const MSD_BITS: u32 = 11;
/// Target average MSD bucket size: 16 Ki records (256 KiB of u64 records,
/// plus as much again for the ping-pong half) stays in the 1 MiB L2. Larger
/// than the minimum so the MSD scatter writes fewer streams: on 1e7 random
/// 40-bit keys 1024 buckets beat 2048 by ~20% (best of 12, shared machine).
pub const BUCKET_TARGET: usize = 1 << 14;
/// MSD buckets larger than this (1 MiB of u64 records, twice that with the
/// ping-pong half) get another MSD pass instead of an out-of-cache LSD sort.
pub const RECURSE_MIN: usize = 1 << 16;
/// Widest in-cache LSD digit.
const LSD_BITS_MAX: u32 = 11;
/// Buckets at least this long may use digits wider than 8 bits; smaller ones
/// would spend more time on the histogram than on the records.
const LSD_WIDE_MIN: usize = 2048;
/// Buckets shorter than this are insertion sorted instead of radix sorted.
pub const INSERTION_MAX: usize = 64;
/// Run length the wide-key merge sort starts from (insertion sorted).
const MERGE_RUN: usize = 16;

/// Sorts `records` by key, stably (equal keys keep their input order).
///
/// `scratch` is reused between calls; it is grown to `records.len()` if
/// shorter and never beyond it (one record per input record). `key_bits` is
/// [`crate::assemble::key::KeyLayout::total_bits`]: every key bit at or above it must be
/// zero, and those digits are skipped.
pub fn sort_records<K: Key>(
    records: &mut [Record<K>],
    scratch: &mut Vec<Record<K>>,
    key_bits: u32,
) {
    let n = records.len();
    let key_bits = key_bits.min(K::BITS);
    if n < 2 || key_bits == 0 {
        return; // all keys are zero when no bits are used: already sorted
    }
    if n <= INSERTION_MAX {
        insertion_sort(records);
        return;
    }
    if scratch.len() < n {
        // reserve_exact: plain `resize` could double the capacity past n.
        scratch.reserve_exact(n - scratch.len());
        scratch.resize(
            n,
            Record {
                key: K::default(),
                val: 0,
            },
        );
    }
    let scratch = &mut scratch[..n];
    if K::RADIX {
        debug_assert!(
            key_bits >= K::BITS || records.iter().all(|r| r.key.radix_digit(key_bits) == 0),
            "a key has bits at or above key_bits = {key_bits}"
        );
        // One histogram per possible LSD digit, reused by every bucket.
        let mut counts = vec![0usize; (K::BITS.div_ceil(8) as usize) << LSD_BITS_MAX];
        radix_sort(records, scratch, key_bits, &mut counts);
    } else {
        merge_sort(records, scratch);
    }
}

/// Stable insertion sort; the fastest choice for a few dozen records.
fn insertion_sort<K: Key>(v: &mut [Record<K>]) {
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

/// Number of MSD bits for `n` records of `key_bits` bits: enough that the
/// average bucket holds about [`BUCKET_TARGET`] records, widened (up to
/// [`MSD_BITS`], keeping buckets of at least `LSD_WIDE_MIN` records) when
/// that saves a whole LSD pass (e.g. 40 bits, 1e6 records: 7 + 3 x 11
/// instead of 6 + 4 x 9).
fn msd_width(n: usize, key_bits: u32) -> u32 {
    let buckets = n.div_ceil(BUCKET_TARGET).max(2);
    let base = (usize::BITS - (buckets - 1).leading_zeros()).min(MSD_BITS);
    let rest = key_bits.saturating_sub(base);
    let passes = rest.div_ceil(LSD_BITS_MAX);
    let wider = key_bits.saturating_sub(passes.saturating_sub(1) * LSD_BITS_MAX);
    if passes > 1 && wider <= MSD_BITS && n >> wider >= LSD_WIDE_MIN {
        wider
    } else {
        base
    }
}

/// Digit width and pass count for an LSD sort of `m` records on `bits`
/// bits: the fewest passes with digits of at most 8 bits, or of at most 11
/// bits when the bucket is large enough to amortize a 2048-entry histogram.
/// Digits are balanced (e.g. 29 bits = 3 x 10) so none is needlessly wide.
fn lsd_plan(bits: u32, m: usize) -> (u32, u32) {
    let max_width = if m >= LSD_WIDE_MIN { LSD_BITS_MAX } else { 8 };
    let passes = bits.div_ceil(max_width);
    (bits.div_ceil(passes.max(1)), passes)
}

/// MSD pass then per-bucket LSD; result in `data`, `buf` (same length) is
/// overwritten. `counts` is the LSD histogram space (see [`lsd_sort`]).
fn radix_sort<K: Key>(
    data: &mut [Record<K>],
    buf: &mut [Record<K>],
    mut key_bits: u32,
    counts: &mut [usize],
) {
    let n = data.len();
    if n < MSD_MIN {
        if lsd_sort(data, buf, key_bits, counts) {
            data.copy_from_slice(buf);
        }
        return;
    }

    // MSD: find the top digit that actually splits the data.
    let mut hist = vec![0usize; 1 << MSD_BITS];
    let (shift, mask) = loop {
        let width = key_bits.min(msd_width(n, key_bits));
        let shift = key_bits - width;
        let mask = (1usize << width) - 1;
        hist[..=mask].fill(0);
        for r in data.iter() {
            hist[r.key.radix_digit(shift) & mask] += 1;
        }
        if hist[..=mask].contains(&n) {
            // All keys share this digit; drop it.
            key_bits = shift;
            if key_bits == 0 {
                return; // all keys equal
            }
            continue;
        }
        break (shift, mask);
    };

    // Exclusive prefix sums give each bucket's start; scatter data -> buf.
    let mut offs = vec![0usize; mask + 1];
    let mut sum = 0;
    for (o, &c) in offs.iter_mut().zip(&hist[..=mask]) {
        *o = sum;
        sum += c;
    }
    for r in data.iter() {
        let d = r.key.radix_digit(shift) & mask;
        buf[offs[d]] = *r;
        offs[d] += 1;
    }

    // Sort each bucket from buf back into data.
    let mut start = 0;
    for &c in &hist[..=mask] {
        let end = start + c;
        let (src, dst) = (&mut buf[start..end], &mut data[start..end]);
        if c <= INSERTION_MAX {
            dst.copy_from_slice(src);
            insertion_sort(dst);
        } else if c > RECURSE_MIN {
            // Skewed keys: a bucket too big for cache gets its own MSD pass
            // on the next bits, then one copy back.
            radix_sort(src, dst, shift, counts);
            dst.copy_from_slice(src);
        } else if !lsd_sort(src, dst, shift, counts) {
            dst.copy_from_slice(src);
        }
        start = end;
    }
}

/// LSD radix sort of `a` on bits `[0, bits)` ping-ponging with `b` (same
/// length; its contents are overwritten). Returns true if the sorted result
/// ended in `b`, false if it is in `a`. `counts` holds a histogram of
/// `1 << LSD_BITS_MAX` entries per digit.
fn lsd_sort<K: Key>(
    a: &mut [Record<K>],
    b: &mut [Record<K>],
    bits: u32,
    counts: &mut [usize],
) -> bool {
    let n = a.len();
    let (width, passes) = lsd_plan(bits, n);
    if passes == 0 {
        return false;
    }
    let size = 1usize << width;
    let mask = size - 1;
    let counts = &mut counts[..passes as usize * size];
    counts.fill(0);
    // A bucket fits in cache, so one simple loop per digit beats one read
    // feeding every histogram (that inner loop does not unroll).
    for (p, h) in counts.chunks_exact_mut(size).enumerate() {
        let shift = p as u32 * width;
        for r in a.iter() {
            h[r.key.radix_digit(shift) & mask] += 1;
        }
    }
    let mut in_b = false;
    for (p, h) in counts.chunks_exact_mut(size).enumerate() {
        if h.contains(&n) {
            continue; // every key shares this digit
        }
        let mut sum = 0;
        for c in h.iter_mut() {
            let t = *c;
            *c = sum;
            sum += t;
        }
        let shift = p as u32 * width;
        let (src, dst): (&[Record<K>], &mut [Record<K>]) =
            if in_b { (&*b, &mut *a) } else { (&*a, &mut *b) };
        for r in src {
            let d = r.key.radix_digit(shift) & mask;
            dst[h[d]] = *r;
            h[d] += 1;
        }
        in_b = !in_b;
    }
    in_b
}

/// Stable bottom-up merge sort through `buf` (same length); result in
/// `data`. Used for wide keys, where radix passes would be too many.
fn merge_sort<K: Key>(data: &mut [Record<K>], buf: &mut [Record<K>]) {
    let n = data.len();
    for run in data.chunks_mut(MERGE_RUN) {
        insertion_sort(run);
    }
    let mut width = MERGE_RUN;
    let mut in_buf = false;
    while width < n {
        let (src, dst): (&[Record<K>], &mut [Record<K>]) = if in_buf {
            (&*buf, &mut *data)
        } else {
            (&*data, &mut *buf)
        };
        for (s, d) in src.chunks(2 * width).zip(dst.chunks_mut(2 * width)) {
            let mid = width.min(s.len());
            merge(&s[..mid], &s[mid..], d);
        }
        in_buf = !in_buf;
        width *= 2;
    }
    if in_buf {
        data.copy_from_slice(buf);
    }
}

/// Stable merge of sorted `l` and `r` into `out` (ties take `l` first).
fn merge<K: Key>(l: &[Record<K>], r: &[Record<K>], out: &mut [Record<K>]) {
    let (mut i, mut j) = (0, 0);
    for o in out.iter_mut() {
        if j >= r.len() || (i < l.len() && l[i].key <= r[j].key) {
            *o = l[i];
            i += 1;
        } else {
            *o = r[j];
            j += 1;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::assemble::key::WideKey;
    use proptest::prelude::*;

    /// Sorts with `sort_records` and with the stable std sort, and compares
    /// whole records: val = input position, so stability is checked too.
    fn check<K: Key>(keys: Vec<K>, key_bits: u32) {
        let mut recs: Vec<Record<K>> = keys
            .into_iter()
            .enumerate()
            .map(|(i, key)| Record { key, val: i as u64 })
            .collect();
        let mut expect = recs.clone();
        expect.sort_by_key(|r| r.key);
        let mut scratch = Vec::new();
        sort_records(&mut recs, &mut scratch, key_bits);
        assert!(scratch.len() <= recs.len() && scratch.capacity() <= recs.len().max(1));
        assert_eq!(recs, expect);
    }

    fn mask_u128(bits: u32) -> u128 {
        if bits >= 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        }
    }

    /// Keys masked to `bits`, drawn from a pool of `distinct` values so
    /// duplicates are common when it is small.
    fn keys_u128(
        sizes: impl Strategy<Value = usize>,
        max_bits: u32,
    ) -> impl Strategy<Value = (Vec<u128>, u32)> {
        (sizes, 0..=max_bits, 1usize..2000, any::<u64>()).prop_map(
            move |(n, bits, distinct, seed)| {
                // splitmix64: cheap deterministic data from proptest's seed.
                let mut s = seed;
                let mut next = move || {
                    s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
                    let mut z = s;
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    z ^ (z >> 31)
                };
                let pool: Vec<u128> = (0..distinct)
                    .map(|_| ((u128::from(next()) << 64) | u128::from(next())) & mask_u128(bits))
                    .collect();
                let keys = (0..n).map(|_| pool[next() as usize % distinct]).collect();
                (keys, bits)
            },
        )
    }

    fn sizes() -> impl Strategy<Value = usize> {
        prop_oneof![
            0usize..300,
            Just(INSERTION_MAX),
            Just(INSERTION_MAX + 1),
            (MSD_MIN - 2)..(MSD_MIN + 2),
            MSD_MIN..(4 * MSD_MIN),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn sort_matches_std_u64((keys, bits) in keys_u128(sizes(), 64)) {
            check(keys.into_iter().map(|k| k as u64).collect(), bits);
        }

        #[test]
        fn sort_matches_std_u128((keys, bits) in keys_u128(sizes(), 128)) {
            check(keys, bits);
        }

        #[test]
        fn sort_matches_std_wide4((keys, bits) in keys_u128(0usize..3000, 128)) {
            // Spread the bits over the words so every word is compared.
            let wide = keys
                .into_iter()
                .map(|k| WideKey([(k >> 100) as u64, (k >> 64) as u64 & 0xf, (k >> 32) as u64, k as u64]))
                .collect();
            check::<WideKey<4>>(wide, bits + 128);
        }
    }

    #[test]
    fn sort_msd_width_saves_passes() {
        assert_eq!(msd_width(1_000_000, 40), 7);
        assert_eq!(msd_width(1_000_000, 30), 8);
        assert_eq!(msd_width(10_000_000, 40), 10);
        assert_eq!(msd_width(10_000_000, 36), 10);
        assert_eq!(msd_width(50_000_000, 64), 11);
        assert_eq!(msd_width(MSD_MIN, 5), 1);
    }

    #[test]
    fn sort_all_equal_and_edge_bits() {
        for n in [0, 1, 2, 65, MSD_MIN, 3 * MSD_MIN] {
            check(vec![0u64; n], 0);
            check(vec![0u64; n], 64);
            check(vec![u64::MAX; n], 64);
            check(vec![5u128 << 100; n], 128);
        }
        // Only the top digit differs, and only the bottom bit.
        let n = 2 * MSD_MIN;
        check((0..n).map(|i| ((i % 3) as u64) << 62).collect(), 64);
        check((0..n).map(|i| (i % 2) as u64).collect(), 64);
        check(
            (0..n).map(|i| (((i * 7919) % n) as u128) << 90).collect(),
            128,
        );
        // Skew: 90% of keys share the top digit, so that bucket recurses.
        let n = 4 * RECURSE_MIN;
        check(
            (0..n)
                .map(|i| {
                    let low =
                        ((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 30) & ((1 << 34) - 1);
                    if i % 10 == 0 {
                        ((i % 7) as u64) << 34 | low
                    } else {
                        (3u64 << 34) | (low >> 20)
                    }
                })
                .collect(),
            37,
        );
        let n = 2 * MSD_MIN;
        // Tiny key width with a large buffer.
        check((0..n).map(|i| (i % 2) as u64).collect(), 1);
    }

    #[test]
    fn sort_scratch_reused_and_bounded() {
        let mut scratch: Vec<Record<u64>> = Vec::new();
        for n in [3 * MSD_MIN, 100, 5 * MSD_MIN] {
            let mut recs: Vec<Record<u64>> = (0..n)
                .map(|i| Record {
                    key: ((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> 24,
                    val: i as u64,
                })
                .collect();
            let mut expect = recs.clone();
            expect.sort_by_key(|r| r.key);
            sort_records(&mut recs, &mut scratch, 40);
            assert_eq!(recs, expect);
            assert!(scratch.capacity() <= 5 * MSD_MIN);
        }
    }
}
