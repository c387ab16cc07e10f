//! Criterion bench of the assembler's stages on 1e6 rank-2 contributions,
//! each against a baseline measured in the same run:
//!
//! - `push`: `Pusher::push` (push loop only; the chunk holds them all, so no
//!   sorting overlaps) vs `Vec<(u64, u64, f64)>::push`;
//! - `assemble`: Builder::new + push + finish with a 256 MiB budget (the
//!   chunks kept for the in-memory kernel; includes writing and fsyncing
//!   the output file) vs the same records pushed into a Vec,
//!   `sort_unstable_by_key` and a naive-sum combine (no file); the same
//!   budget with the kernel off (chunks sorted into runs as they fill,
//!   merged in memory); a 4 MiB budget (runs spill, several merge
//!   passes) for the cost of spilling and merging; and complex128 values
//!   at 256 MiB, kernel and sorted runs.
//!
//! `cargo bench --bench pipeline`; docs/performance.md says what it times,
//! docs/log/baseline-a78653b.md ("pipeline") has its last recorded figures.

#[path = "common/fe.rs"]
mod fe;

use coo_assembler::{AssembleOptions, Builder, DType};
use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use std::path::Path;
use std::time::{Duration, Instant};

const N: u64 = 1_000_000;
const BIG: u64 = 256 << 20;
const TINY: u64 = 4 << 20;

fn opts(budget: u64, dir: &Path) -> AssembleOptions {
    AssembleOptions {
        memory_budget: budget,
        threads: 2,
        temp_dir: Some(dir.to_path_buf()),
        ..AssembleOptions::default()
    }
}

fn assemble(
    data: &[(u64, u64, f64)],
    nodes: u64,
    budget: u64,
    kernel: bool,
    dir: &Path,
) -> coo_assembler::builder::Summary {
    let o = AssembleOptions {
        in_memory_kernel: kernel,
        ..opts(budget, dir)
    };
    let mut b = Builder::new(&[nodes, nodes], DType::F64, o).unwrap();
    {
        let mut p = b.pusher().unwrap();
        for &(r, c, v) in data {
            p.push(&[r, c], v).unwrap();
        }
    }
    b.finish(dir.join("out.hrry")).unwrap()
}

fn naive(data: &[(u64, u64, f64)]) -> Vec<(u64, u64, f64)> {
    let mut v = Vec::with_capacity(data.len());
    for &x in data {
        v.push(x);
    }
    v.sort_unstable_by_key(|&(r, c, _)| (r, c));
    let mut w = 0usize;
    for i in 0..v.len() {
        if w > 0 && v[w - 1].0 == v[i].0 && v[w - 1].1 == v[i].1 {
            v[w - 1].2 += v[i].2;
        } else {
            v[w] = v[i];
            w += 1;
        }
    }
    v.truncate(w);
    v
}

fn benches(c: &mut Criterion) {
    let data = fe::fe_vec(N);
    let nodes = fe::fe_nodes(N);
    let dir = tempfile::tempdir().unwrap();

    let mut g = c.benchmark_group("push");
    g.throughput(Throughput::Elements(N));
    g.bench_function("vec_push_baseline", |b| {
        b.iter_custom(|iters| {
            let mut t = Duration::ZERO;
            for _ in 0..iters {
                let mut v: Vec<(u64, u64, f64)> = Vec::with_capacity(data.len());
                let t0 = Instant::now();
                for &x in &data {
                    v.push(black_box(x));
                }
                t += t0.elapsed();
                black_box(&v);
            }
            t
        })
    });
    g.bench_function("pusher_push", |b| {
        b.iter_custom(|iters| {
            let mut t = Duration::ZERO;
            for _ in 0..iters {
                let mut bld =
                    Builder::new(&[nodes, nodes], DType::F64, opts(BIG, dir.path())).unwrap();
                let mut p = bld.pusher().unwrap();
                let t0 = Instant::now();
                for &(r, c, v) in &data {
                    p.push(&[r, c], black_box(v)).unwrap();
                }
                t += t0.elapsed();
                drop(p);
                black_box(bld.finish(dir.path().join("push.hrry")).unwrap());
            }
            t
        })
    });
    g.finish();

    for (name, budget, kernel) in [
        ("256MiB", BIG, true),
        ("256MiB sorted", BIG, false),
        ("4MiB", TINY, true),
    ] {
        let s = assemble(&data, nodes, budget, kernel, dir.path());
        eprintln!(
            "pipeline: budget {name}: nnz {}, runs {} ({} spilled), merge passes {}, {} bytes spilled ({:.2} B/contribution), peak buffers {} B; ingest {:?}, sort (cpu) {:?}, merge {:?}, write {:?}",
            s.nnz,
            s.runs,
            s.runs_spilled,
            s.merge_passes,
            s.bytes_spilled,
            s.bytes_spilled as f64 / N as f64,
            s.peak_buffer_bytes,
            s.time_ingest,
            s.time_sort,
            s.time_merge,
            s.time_write
        );
    }
    let mut g = c.benchmark_group("assemble");
    g.throughput(Throughput::Elements(N));
    g.bench_function("std_sort_naive_sum_baseline", |b| {
        b.iter(|| black_box(naive(&data)))
    });
    for (name, budget, kernel) in [
        ("in_memory_256MiB", BIG, true),
        ("sorted_runs_256MiB", BIG, false),
        ("spill_merge_4MiB", TINY, true),
    ] {
        g.bench_function(BenchmarkId::new("assembler", name), |b| {
            b.iter(|| black_box(assemble(&data, nodes, budget, kernel, dir.path())))
        });
    }
    // Complex128 values (a part each of the same value and its negative
    // halved): two records per contribution on the sorters' path, one
    // 16-byte lane in the kernel.
    for (name, kernel) in [
        ("complex_in_memory_256MiB", true),
        ("complex_sorted_runs_256MiB", false),
    ] {
        g.bench_function(BenchmarkId::new("assembler", name), |b| {
            b.iter(|| {
                let o = AssembleOptions {
                    in_memory_kernel: kernel,
                    ..opts(BIG, dir.path())
                };
                let mut bld = Builder::new(&[nodes, nodes], DType::C128, o).unwrap();
                {
                    let mut p = bld.pusher().unwrap();
                    for &(r, c, v) in &data {
                        p.push(&[r, c], num_complex::Complex::new(v, -0.5 * v))
                            .unwrap();
                    }
                }
                black_box(bld.finish(dir.path().join("c.hrry")).unwrap())
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = pipeline;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = benches
}
criterion_main!(pipeline);
