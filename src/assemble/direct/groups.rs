//! The kernel's grouping applied to one chunk of a builder's records: how
//! a sorter turns a full chunk into a run (issue 40). The chunk's key range
//! is cut into buckets of a few contributions each, the records are
//! counted and scattered into bucket order (one pass each), and every
//! bucket is grouped by the kernel's [`Grouper`] (a sorting network, a
//! small hash table or a sort), which keeps each coordinate's values in
//! push order. That is two passes over the records where the radix sort
//! made four or five, and no second pass to find equal keys.
//!
//! A chunk whose keys pile up (a bucket beyond [`MAX_BUCKET`]) or spread
//! too thin for a 32-bit offset in a bucket is left to the radix sort
//! ([`crate::assemble::sort`]), as are keys wider than 64 bits.

use crate::assemble::direct::band::Grouper;
use crate::assemble::key::Key;
use crate::assemble::sort::Record;
use crate::error::{Error, Result};

/// Contributions per bucket aimed at: most buckets then take the sorting
/// network or the hash table, and the counts stay small beside the
/// records.
const PER_BUCKET: usize = 4;
/// Largest bucket grouped here; a chunk with a larger one is radix sorted.
pub const MAX_BUCKET: usize = 4096;
/// Below this many records the radix sort's insertion sort is as good.
const MIN_RECORDS: usize = 256;

/// Records per block of the locality test.
const BLOCK: usize = 4096;
/// Blocks the locality test samples.
const SAMPLES: usize = 4;
/// Buckets per region of the locality test: about 12 KiB of the scatter's
/// output (keys and values) at [`PER_BUCKET`] contributions a bucket.
const REGION_BITS: u32 = 8;

/// How a chunk is cut into buckets: bucket `b` holds the keys
/// `lo + (b << shift) ..= lo + ((b + 1) << shift) - 1`.
pub struct Buckets {
    lo: u64,
    shift: u32,
    count: usize,
}

impl Buckets {
    /// The buckets of `recs`, or None when the chunk is the radix sort's:
    /// keys wider than 64 bits, too few records, keys spread beyond
    /// 32-bit offsets in a bucket, or keys without locality. Scattering
    /// into buckets of a few contributions pays when a block of records
    /// writes to few places (input in element order: 4096 contributions
    /// of a 3D mesh meet a few narrow bands of rows, one per layer of
    /// nodes); random keys write all over the chunk and miss the cache on
    /// every record, where the radix sort's passes stay in it
    /// (`SORT_QUICK=5 cargo bench -p coo-assembler-benches --bench sort`,
    /// chunks of 1.6e6: random 40-bit keys 40.0 ms against 23.0 ms for the
    /// radix sort and a scan; FE keys 15.2 ms against 14.8 ms, before the
    /// scan's copy of each group's values that grouping saves a sorter).
    /// The test: in up to [`SAMPLES`] blocks spread over
    /// the chunk, the regions of [`REGION_BITS`] buckets written; more
    /// than a sixteenth of a block's records, on average, is no locality.
    pub fn of<K: Key>(recs: &[Record<K>]) -> Option<Buckets> {
        let b = Self::of_any(recs)?;
        b.local(recs).then_some(b)
    }

    /// [`Buckets::of`] without the locality test (benchmarks compare the
    /// two ways on keys that fail it).
    pub fn of_any<K: Key>(recs: &[Record<K>]) -> Option<Buckets> {
        let n = recs.len();
        if K::BITS != 64 || n < MIN_RECORDS || n > u32::MAX as usize {
            return None;
        }
        let key = |r: &Record<K>| r.key.get_bits(0, 64);
        let (mut lo, mut hi) = (u64::MAX, 0u64);
        for r in recs {
            let k = key(r);
            lo = lo.min(k);
            hi = hi.max(k);
        }
        // The narrowest buckets that number at most n / PER_BUCKET.
        let want = (n / PER_BUCKET).max(1) as u64;
        let span = hi - lo;
        let mut shift = 0u32;
        while shift < 64 && span >> shift >= want {
            shift += 1;
        }
        (shift <= 32).then_some(Buckets {
            lo,
            shift,
            count: (span >> shift) as usize + 1,
        })
    }

    /// Whether `recs` write to few regions of these buckets (see
    /// [`Buckets::of`]).
    fn local<K: Key>(&self, recs: &[Record<K>]) -> bool {
        let n = recs.len();
        let key = |r: &Record<K>| r.key.get_bits(0, 64);
        let (lo, shift) = (self.lo, self.shift);
        let blocks = n.div_ceil(BLOCK);
        let mut regions = [0u32; BLOCK];
        let (mut seen, mut sampled) = (0usize, 0usize);
        for s in 0..SAMPLES.min(blocks) {
            let from = s * blocks / SAMPLES.min(blocks) * BLOCK;
            let block = &recs[from..(from + BLOCK).min(n)];
            let r = &mut regions[..block.len()];
            for (x, rec) in r.iter_mut().zip(block) {
                *x = ((key(rec) - lo) >> (shift + REGION_BITS)) as u32;
            }
            r.sort_unstable();
            seen += 1 + r.windows(2).filter(|w| w[0] != w[1]).count();
            sampled += block.len();
        }
        seen * 16 <= sampled
    }
}

/// Buffers of the grouping, reused from chunk to chunk.
pub struct KeyGroups {
    /// Each record's key less its bucket's first key.
    minor: Vec<u32>,
    /// Each record's value, in bucket order.
    lanes: Vec<u64>,
    /// Per bucket: its next place while scattering, then its end.
    ends: Vec<u32>,
    grouper: Grouper<u32, u64>,
}

impl KeyGroups {
    /// Buffers for chunks of up to `records` records, allocated now (so
    /// that running out of memory is an error here, not an abort later).
    pub fn new(records: usize) -> Result<KeyGroups> {
        let oom = |what, bytes: usize| Error::OutOfMemory {
            what,
            bytes: bytes as u64,
        };
        let grouper = Grouper::new(MAX_BUCKET)
            .map_err(|_| oom("a run's grouping tables", Self::FIXED_BYTES as usize))?;
        let mut g = KeyGroups {
            minor: Vec::new(),
            lanes: Vec::new(),
            ends: Vec::new(),
            grouper,
        };
        g.minor
            .try_reserve_exact(records)
            .map_err(|_| oom("a run's keys", 4 * records))?;
        g.lanes
            .try_reserve_exact(records)
            .map_err(|_| oom("a run's values", 8 * records))?;
        let buckets = records / PER_BUCKET + 1;
        g.ends
            .try_reserve_exact(buckets)
            .map_err(|_| oom("a run's buckets", 4 * buckets))?;
        Ok(g)
    }

    /// The grouping tables' bytes, whatever the chunk size (an upper
    /// bound: the hash tables and room for a bucket of [`MAX_BUCKET`]).
    pub const FIXED_BYTES: u64 = 64 * 1024 + 32 * MAX_BUCKET as u64;

    /// Bytes held for chunks of `records` records (the budget's figure).
    pub fn bytes_for(records: usize) -> u64 {
        let r = records as u64;
        4 * r + 8 * r + 4 * (r / PER_BUCKET as u64 + 1) + Self::FIXED_BYTES
    }

    /// Bytes held now.
    pub fn bytes(&self) -> u64 {
        4 * self.minor.capacity() as u64
            + 8 * self.lanes.capacity() as u64
            + 4 * self.ends.capacity() as u64
            + Self::FIXED_BYTES
    }

    /// Call `f(key, values)` for every distinct key of `recs` in increasing
    /// order, each key's values in record order, the chunk cut into
    /// `buckets` (from [`Buckets::of`] for this chunk). Returns false,
    /// having called nothing, when the chunk is left to the radix sort
    /// after all: longer than these buffers were made for, or a bucket of
    /// more than [`MAX_BUCKET`] contributions.
    pub fn for_each<K: Key>(
        &mut self,
        recs: &[Record<K>],
        buckets: &Buckets,
        mut f: impl FnMut(K, &[u64]) -> Result<()>,
    ) -> Result<bool> {
        let n = recs.len();
        if n > self.lanes.capacity() {
            return Ok(false);
        }
        let key = |r: &Record<K>| r.key.get_bits(0, 64);
        let &Buckets { lo, shift, count } = buckets;
        let mask = if shift == 32 {
            u64::from(u32::MAX)
        } else {
            (1u64 << shift) - 1
        };
        let ends = &mut self.ends;
        ends.clear();
        ends.resize(count.min(ends.capacity()), 0);
        if ends.len() < count {
            return Ok(false);
        }
        for r in recs {
            let b = ((key(r) - lo) >> shift) as usize;
            if let Some(c) = ends.get_mut(b) {
                *c += 1;
            }
        }
        if ends.iter().any(|&c| c as usize > MAX_BUCKET) {
            return Ok(false);
        }
        // Counts to starts, then scatter (each start moves to its end).
        let mut sum = 0u32;
        for c in ends.iter_mut() {
            let t = *c;
            *c = sum;
            sum += t;
        }
        self.minor.clear();
        self.minor.resize(n, 0);
        self.lanes.clear();
        self.lanes.resize(n, 0);
        let (minor, lanes) = (&mut self.minor[..], &mut self.lanes[..n]);
        for r in recs {
            let d = key(r) - lo;
            let Some(p) = ends.get_mut((d >> shift) as usize) else {
                continue;
            };
            let q = *p as usize;
            *p += 1;
            if let (Some(m), Some(l)) = (minor.get_mut(q), lanes.get_mut(q)) {
                *m = (d & mask) as u32;
                *l = r.val;
            }
        }
        let at = |b: usize, m: u32| {
            let mut k = K::default();
            k.or_bits(lo + ((b as u64) << shift) + u64::from(m), 0);
            k
        };
        let mut start = 0usize;
        for (b, &end) in ends.iter().enumerate() {
            let end = end as usize;
            let (Some(ms), Some(ls)) = (minor.get(start..end), lanes.get(start..end)) else {
                return Err(Error::Poisoned("a run's buckets"));
            };
            match ms {
                [] => {}
                [m] => f(at(b, *m), ls)?,
                _ => {
                    self.grouper
                        .prepare(ms, ls)
                        .map_err(|_| Error::OutOfMemory {
                            what: "a run's bucket",
                            bytes: 32 * ms.len() as u64,
                        })?;
                    let (groups, values) = self.grouper.groups();
                    for &(m, a, z) in groups {
                        let Some(g) = values.get(a as usize..z as usize) else {
                            return Err(Error::Poisoned("a run's groups"));
                        };
                        f(at(b, m), g)?;
                    }
                }
            }
            start = end;
        }
        Ok(true)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The groups as a stable sort then a scan gives them.
    fn expected(recs: &[Record<u64>]) -> Vec<(u64, Vec<u64>)> {
        let mut s = recs.to_vec();
        s.sort_by_key(|r| r.key);
        let mut out: Vec<(u64, Vec<u64>)> = Vec::new();
        for r in s {
            match out.last_mut() {
                Some((k, v)) if *k == r.key => v.push(r.val),
                _ => out.push((r.key, vec![r.val])),
            }
        }
        out
    }

    fn grouped(g: &mut KeyGroups, recs: &[Record<u64>]) -> Option<Vec<(u64, Vec<u64>)>> {
        let mut out = Vec::new();
        let b = Buckets::of(recs)?;
        let took = g
            .for_each(recs, &b, |k, v| {
                out.push((k, v.to_vec()));
                Ok(())
            })
            .unwrap();
        took.then_some(out)
    }

    /// Records with keys from a pool of `distinct` keys spread over `bits`
    /// bits above `base`; values are the record's place (so order shows).
    /// With `local`, the pool is sorted and record i draws near place
    /// `i * distinct / n` (input in element order), else anywhere.
    fn records(
        n: usize,
        distinct: usize,
        bits: u32,
        base: u64,
        seed: u64,
        local: bool,
    ) -> Vec<Record<u64>> {
        let mut s = seed;
        let mut next = move || {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z ^ (z >> 31)
        };
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1 << bits) - 1
        };
        let mut pool: Vec<u64> = (0..distinct.max(1))
            .map(|_| base.saturating_add(next() & mask))
            .collect();
        pool.sort_unstable();
        let m = pool.len();
        (0..n)
            .map(|i| {
                let at = if local {
                    (i * m / n.max(1) + (next() % 16) as usize).min(m - 1)
                } else {
                    next() as usize % m
                };
                Record {
                    key: pool[at],
                    val: i as u64,
                }
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn groups_are_a_stable_sort_and_scan(
            n in 0usize..6000,
            distinct in 1usize..5000,
            bits in 0u32..64,
            base in prop_oneof![Just(0u64), any::<u64>().prop_map(|b| b >> 2)],
            seed in any::<u64>(),
            local in any::<bool>(),
        ) {
            let recs = records(n, distinct, bits, base, seed, local);
            let mut g = KeyGroups::new(6000).unwrap();
            if let Some(got) = grouped(&mut g, &recs) {
                prop_assert_eq!(got, expected(&recs));
            }
        }
    }

    #[test]
    fn local_chunks_are_grouped_and_random_ones_radix_sorted() {
        let local = records(100_000, 30_000, 40, 5, 7, true);
        // Random keys whose scatter outgrows the cache (a small chunk of them
        // stays in it, and is grouped).
        let random = records(1_000_000, 1_000_000, 40, 5, 7, false);
        let mut g = KeyGroups::new(100_000).unwrap();
        assert_eq!(grouped(&mut g, &local).unwrap(), expected(&local));
        assert!(Buckets::of(&random).is_none());
        // Too few records, or keys too spread for 32-bit offsets.
        assert!(Buckets::of(&local[..MIN_RECORDS - 1]).is_none());
        let spread: Vec<Record<u64>> = (0..1000u64)
            .map(|i| Record {
                key: i << 50,
                val: i,
            })
            .collect();
        assert!(Buckets::of(&spread).is_none());
        // Wider keys are never grouped.
        let wide: Vec<Record<u128>> = local
            .iter()
            .map(|r| Record {
                key: u128::from(r.key),
                val: r.val,
            })
            .collect();
        assert!(Buckets::of(&wide).is_none());
    }

    #[test]
    fn finite_element_like_chunks_are_grouped() {
        // Rows of ~27 columns hit ~64 times each, in element order.
        let mut recs = Vec::new();
        for e in 0..2000u64 {
            for a in 0..8u64 {
                for b in 0..8u64 {
                    let (r, c) = (e + a * 3, e + b * 3);
                    recs.push(Record {
                        key: (r << 22) | c,
                        val: recs.len() as u64,
                    });
                }
            }
        }
        let mut g = KeyGroups::new(recs.len()).unwrap();
        assert_eq!(grouped(&mut g, &recs).unwrap(), expected(&recs));
        // Reused for a second, different chunk.
        let other = records(50_000, 20_000, 40, 7, 1, true);
        assert_eq!(grouped(&mut g, &other).unwrap(), expected(&other));
        assert!(g.bytes() <= KeyGroups::bytes_for(recs.len()));
    }

    #[test]
    fn skewed_or_wide_chunks_are_left_to_the_radix_sort() {
        let mut g = KeyGroups::new(10_000).unwrap();
        // One coordinate hit 5000 times among a few others.
        let mut recs = records(5000, 1, 10, 0, 3, true);
        recs.extend(records(100, 50, 20, 1 << 30, 4, true));
        assert!(grouped(&mut g, &recs).is_none());
        // Longer than the buffers.
        assert!(grouped(&mut g, &records(10_001, 5000, 30, 0, 5, true)).is_none());
        // An error from the callback stops the walk and is returned.
        let recs = records(1000, 500, 30, 0, 6, true);
        let b = Buckets::of(&recs).unwrap();
        let mut calls = 0;
        let r = g.for_each(&recs, &b, |_, _| {
            calls += 1;
            if calls == 10 {
                Err(Error::Poisoned("test"))
            } else {
                Ok(())
            }
        });
        assert!(r.is_err());
        assert_eq!(calls, 10);
    }
}
