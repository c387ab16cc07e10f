//! Criterion bench: `sort_records` vs the std sorts on (u64 key, u64 value)
//! records from an FE-like assembly pattern and from uniform random keys;
//! and how a sorter makes a run of a chunk: the kernel's grouping
//! (`direct::groups`) against the radix sort and a scan for equal keys.

use coo_assembler::internals::assemble::direct::groups::{Buckets, KeyGroups};
use coo_assembler::internals::assemble::key::KeyLayout;
use coo_assembler::internals::assemble::sort::{Record, sort_records};
use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group};
use std::time::{Duration, Instant};

/// Rank-2 keys in FE assembly order: trilinear hex elements of a structured
/// 3D mesh visited in element order, each emitting all 8x8 (row, column)
/// node pairs, so the matrix has the 27-point-stencil pattern.
fn fe_keys(n: usize) -> (Vec<u64>, u32) {
    let elems = n.div_ceil(64);
    let m = ((elems as f64).cbrt().ceil() as u64).max(1); // elements per side
    let p = m + 1; // nodes per side
    let nodes = p * p * p;
    let layout = KeyLayout::new(&[nodes, nodes]);
    let mut keys = Vec::with_capacity(n);
    'outer: for ez in 0..m {
        for ey in 0..m {
            for ex in 0..m {
                let corners: Vec<u64> = (0..8u64)
                    .map(|c| (ez + (c >> 2)) * p * p + (ey + ((c >> 1) & 1)) * p + ex + (c & 1))
                    .collect();
                for &i in &corners {
                    for &j in &corners {
                        keys.push(layout.pack(&[i, j]));
                        if keys.len() == n {
                            break 'outer;
                        }
                    }
                }
            }
        }
    }
    (keys, layout.total_bits())
}

/// Uniform keys in [0, 2^40) from splitmix64.
fn random_keys(n: usize) -> (Vec<u64>, u32) {
    let mut s = 0x1234_5678_u64;
    let keys = (0..n)
        .map(|_| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) >> 24
        })
        .collect();
    (keys, 40)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("sort");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    for n in [1_000_000usize, 10_000_000] {
        for (name, (keys, bits)) in [("fe", fe_keys(n)), ("rand40", random_keys(n))] {
            let recs = records(&keys);
            let mut scratch = Vec::new();
            g.bench_function(BenchmarkId::new(format!("{name}/sort_records"), n), |b| {
                b.iter_batched_ref(
                    || recs.clone(),
                    |v| sort_records(v, &mut scratch, bits),
                    BatchSize::LargeInput,
                )
            });
            g.bench_function(BenchmarkId::new(format!("{name}/sort_unstable"), n), |b| {
                b.iter_batched_ref(
                    || recs.clone(),
                    |v| v.sort_unstable_by_key(|r| r.key),
                    BatchSize::LargeInput,
                )
            });
            g.bench_function(BenchmarkId::new(format!("{name}/sort_stable"), n), |b| {
                b.iter_batched_ref(
                    || recs.clone(),
                    |v| v.sort_by_key(|r| r.key),
                    BatchSize::LargeInput,
                )
            });
        }
    }
    g.finish();
    let mut g = c.benchmark_group("runs");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    for (name, (keys, bits)) in [("fe", fe_keys(CHUNK)), ("rand40", random_keys(CHUNK))] {
        let recs = records(&keys);
        let mut groups = KeyGroups::new(CHUNK).expect("buffers");
        let mut scratch = Vec::new();
        g.bench_function(BenchmarkId::new(format!("{name}/grouping"), CHUNK), |b| {
            b.iter(|| by_groups(&recs, &mut groups))
        });
        g.bench_function(
            BenchmarkId::new(format!("{name}/radix_and_scan"), CHUNK),
            |b| {
                b.iter_batched_ref(
                    || recs.clone(),
                    |v| by_radix(v, &mut scratch, bits),
                    BatchSize::LargeInput,
                )
            },
        );
    }
    g.finish();
}

/// A sorter's chunk at a 256 MiB budget (`assemble_fem --n 150`).
const CHUNK: usize = 1_600_000;

/// The distinct keys of `recs` and a checksum of their first values, by
/// the kernel's grouping (whatever `Buckets::of` would choose).
fn by_groups(recs: &[Record<u64>], groups: &mut KeyGroups) -> (u64, u64) {
    let (mut n, mut sum) = (0u64, 0u64);
    let Some(b) = Buckets::of_any(recs) else {
        return (0, 0);
    };
    groups
        .for_each(recs, &b, |k, v| {
            n += 1;
            sum = sum.wrapping_add(k ^ v[0]);
            Ok(())
        })
        .expect("grouped");
    (n, sum)
}

/// The same by the radix sort and a scan for equal keys.
fn by_radix(v: &mut [Record<u64>], scratch: &mut Vec<Record<u64>>, bits: u32) -> (u64, u64) {
    sort_records(v, scratch, bits);
    let (mut n, mut sum, mut i) = (0u64, 0u64, 0usize);
    while i < v.len() {
        let mut j = i + 1;
        while j < v.len() && v[j].key == v[i].key {
            j += 1;
        }
        n += 1;
        sum = sum.wrapping_add(v[i].key ^ v[i].val);
        i = j;
    }
    (n, sum)
}

/// `SORT_QUICK=<runs> cargo bench --bench sort`: best of `runs` (default 5)
/// per method and the ratios, which is robust to the noise of a shared
/// machine.
fn quick(runs: usize) {
    let best = |recs: &[Record<u64>], f: &mut dyn FnMut(&mut [Record<u64>])| {
        (0..runs)
            .map(|_| {
                let mut v = recs.to_vec();
                let t = Instant::now();
                f(&mut v);
                t.elapsed().as_secs_f64() * 1e3
            })
            .fold(f64::INFINITY, f64::min)
    };
    for n in [1_000_000usize, 10_000_000] {
        for (name, (keys, bits)) in [("fe", fe_keys(n)), ("rand40", random_keys(n))] {
            let recs = records(&keys);
            let mut scratch = Vec::new();
            let r = best(&recs, &mut |v| sort_records(v, &mut scratch, bits));
            let u = best(&recs, &mut |v| v.sort_unstable_by_key(|r| r.key));
            let s = best(&recs, &mut |v| v.sort_by_key(|r| r.key));
            println!(
                "{name:7} n={n:>9} bits={bits}: sort_records {r:8.1} ms  unstable {u:8.1} ms ({:.2}x)  stable {s:8.1} ms ({:.2}x)",
                u / r,
                s / r
            );
        }
    }
    for (name, (keys, bits)) in [("fe", fe_keys(CHUNK)), ("rand40", random_keys(CHUNK))] {
        let recs = records(&keys);
        let mut groups = KeyGroups::new(CHUNK).expect("buffers");
        let mut scratch = Vec::new();
        let mut got = (0, 0);
        let gr = best(&recs, &mut |v| got = by_groups(v, &mut groups));
        let mut want = (0, 0);
        let rx = best(&recs, &mut |v| want = by_radix(v, &mut scratch, bits));
        assert_eq!(
            got, want,
            "{name}: the grouping and the radix sort disagree"
        );
        let chosen = if Buckets::of(&recs).is_some() {
            "grouping"
        } else {
            "radix sort"
        };
        println!(
            "runs {name:7} n={CHUNK:>9}: grouping {gr:8.1} ms  radix sort + scan {rx:8.1} ms ({:.2}x); a sorter takes the {chosen}",
            rx / gr
        );
    }
}

fn records(keys: &[u64]) -> Vec<Record<u64>> {
    keys.iter()
        .enumerate()
        .map(|(i, &key)| Record {
            key,
            val: (i as f64).to_bits(),
        })
        .collect()
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(runs) = std::env::var("SORT_QUICK") {
        quick(runs.parse().unwrap_or(5).max(1));
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
