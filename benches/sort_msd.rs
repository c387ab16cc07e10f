//! Prototype bench: the MSD-first radix sort that sorts only the varying key
//! bits (`benches/sort_msd/msd.rs`) against the current `sort_records`, on
//! FE keys (3D Q1 mesh in element order, the mesh sized for n; and
//! `fechunk`, the first n records of the 5e7 mesh, which is what a sorter
//! thread sorts as one chunk in the 5e7 runs) and uniform
//! random keys (2^24 x 2^24, 48 bits), 1 and 2 threads.
//!
//! ```sh
//! cargo bench --bench sort_msd                      # criterion, 1e6 and 1e7
//! SORT_QUICK=3 cargo bench --bench sort_msd         # best of 3, 1e6..5e7, ratios
//! SORT_QUICK=3 SORT_N=5e7 cargo bench --bench sort_msd
//! ```
//! "2 threads" for `sort_records` is two halves sorted at once on two
//! threads (what two sorter threads do with two chunks); for the prototype
//! it is one buffer sorted on two threads. Every result is checked against
//! `sort_records` (whole records, so stability too).

#[path = "common/fe.rs"]
mod fe;
#[path = "sort_msd/msd.rs"]
mod msd;

use coo_assembler::internals::assemble::key::KeyLayout;
use coo_assembler::internals::assemble::sort::{Record, sort_records};
use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group};
use std::time::{Duration, Instant};

fn fe_records(n: u64) -> (Vec<Record<u64>>, u32) {
    let nodes = fe::fe_nodes(n);
    let layout = KeyLayout::new(&[nodes, nodes]);
    let mut v = Vec::with_capacity(n as usize);
    fe::fe_contributions(n, |r, c, x| {
        v.push(Record {
            key: layout.pack(&[r, c]),
            val: x.to_bits(),
        })
    });
    (v, layout.total_bits())
}

/// The first `n` records of the 5e7-contribution FE mesh: what a sorter
/// gets as one chunk in the 5e7 runs (keys confined to a band of rows).
fn fe_chunk_records(n: u64) -> (Vec<Record<u64>>, u32) {
    let total = 50_000_000u64.max(n);
    let nodes = fe::fe_nodes(total);
    let layout = KeyLayout::new(&[nodes, nodes]);
    let mut v = Vec::with_capacity(n as usize);
    fe::fe_contributions(total, |r, c, x| {
        if (v.len() as u64) < n {
            v.push(Record {
                key: layout.pack(&[r, c]),
                val: x.to_bits(),
            })
        }
    });
    (v, layout.total_bits())
}

fn rand_records(n: u64) -> (Vec<Record<u64>>, u32) {
    let layout = KeyLayout::new(&[fe::RANDOM_EXTENT, fe::RANDOM_EXTENT]);
    let mut v = Vec::with_capacity(n as usize);
    fe::random_contributions(n, |r, c, x| {
        v.push(Record {
            key: layout.pack(&[r, c]),
            val: x.to_bits(),
        })
    });
    (v, layout.total_bits())
}

/// `sort_records` on `threads` equal parts at once.
fn current(v: &mut [Record<u64>], scratch: &mut [Vec<Record<u64>>], bits: u32, threads: usize) {
    if threads == 1 {
        sort_records(v, &mut scratch[0], bits);
        return;
    }
    let part = v.len().div_ceil(threads);
    std::thread::scope(|s| {
        for (c, sc) in v.chunks_mut(part).zip(scratch.iter_mut()) {
            s.spawn(move || sort_records(c, sc, bits));
        }
    });
}

fn check(recs: &[Record<u64>], bits: u32) {
    let mut a = recs.to_vec();
    let mut b = recs.to_vec();
    sort_records(&mut a, &mut Vec::new(), bits);
    for t in [1, 2] {
        b.copy_from_slice(recs);
        msd::sort(&mut b, &mut Vec::new(), bits, t);
        assert!(a == b, "prototype differs from sort_records ({t} threads)");
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("sort_msd");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    for n in [1_000_000u64, 10_000_000] {
        for (name, (recs, bits)) in [("fe", fe_records(n)), ("rand48", rand_records(n))] {
            check(&recs, bits);
            for t in [1usize, 2] {
                let mut scratch = vec![Vec::new(), Vec::new()];
                g.bench_function(BenchmarkId::new(format!("{name}/current/t{t}"), n), |b| {
                    b.iter_batched_ref(
                        || recs.clone(),
                        |v| current(v, &mut scratch, bits, t),
                        BatchSize::LargeInput,
                    )
                });
                let mut sc = Vec::new();
                g.bench_function(BenchmarkId::new(format!("{name}/msd/t{t}"), n), |b| {
                    b.iter_batched_ref(
                        || recs.clone(),
                        |v| msd::sort(v, &mut sc, bits, t),
                        BatchSize::LargeInput,
                    )
                });
            }
        }
    }
    g.finish();
}

/// Best of `runs`, alternating the two sorts; buffers and scratch are
/// allocated and touched once, outside the timing.
fn quick(runs: usize, sizes: &[u64]) {
    for &n in sizes {
        let sets = [
            ("fe", fe_records(n)),
            ("fechunk", fe_chunk_records(n.min(1 << 23))),
            ("rand48", rand_records(n)),
        ];
        for (name, (recs, bits)) in sets {
            if name == "fechunk" && n > 1 << 23 {
                continue; // chunks are at most 8 Mi records
            }
            check(&recs, bits);
            let n = recs.len();
            let mut v = recs.clone();
            let mut scratch = vec![vec![Record { key: 0, val: 0 }; recs.len()]; 2];
            let mut sc = vec![Record { key: 0, val: 0 }; recs.len()];
            for t in [1usize, 2] {
                let (mut cur, mut new) = (f64::INFINITY, f64::INFINITY);
                for _ in 0..runs {
                    v.copy_from_slice(&recs);
                    let t0 = Instant::now();
                    current(&mut v, &mut scratch, bits, t);
                    cur = cur.min(t0.elapsed().as_secs_f64() * 1e3);
                    v.copy_from_slice(&recs);
                    let t0 = Instant::now();
                    msd::sort(&mut v, &mut sc, bits, t);
                    new = new.min(t0.elapsed().as_secs_f64() * 1e3);
                }
                println!(
                    "{name:6} n={n:>9} bits={bits} threads={t}: sort_records {cur:8.1} ms  msd {new:8.1} ms  speed-up {:.2}x  ({:.0} M rec/s)",
                    cur / new,
                    n as f64 / new / 1e3
                );
            }
        }
    }
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(runs) = std::env::var("SORT_QUICK") {
        let sizes: Vec<u64> = match std::env::var("SORT_N") {
            Ok(s) => s
                .split(',')
                .filter_map(|x| x.parse::<f64>().ok())
                .map(|x| x as u64)
                .collect(),
            Err(_) => vec![1_000_000, 10_000_000, 50_000_000],
        };
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!("load average: {}", load.trim());
        quick(runs.parse().unwrap_or(3).max(1), &sizes);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
