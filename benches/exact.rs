//! Per-element cost of exact summation vs naive `+=` on FE-like groups.
#![allow(missing_docs)]

use coo_assembler::internals::assemble::exact::{ExactSum, sum_exact};
use criterion::{Criterion, Throughput, black_box, criterion_group, criterion_main};

/// Groups of 1..=8 contributions of similar magnitude and mixed sign.
fn fe_groups(n_groups: usize) -> (Vec<f64>, Vec<(usize, usize)>) {
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (seed >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut vals = Vec::new();
    let mut groups = Vec::with_capacity(n_groups);
    for _ in 0..n_groups {
        let len = 1 + (next() * 8.0) as usize;
        let base = 10f64.powi((next() * 6.0) as i32 - 3);
        let start = vals.len();
        for _ in 0..len.min(8) {
            let sign = if next() < 0.3 { -1.0 } else { 1.0 };
            vals.push(sign * base * (1.0 + 0.1 * next()));
        }
        groups.push((start, vals.len()));
    }
    (vals, groups)
}

fn bench(c: &mut Criterion) {
    let (vals, groups) = fe_groups(100_000);
    let mut g = c.benchmark_group("exact");
    g.throughput(Throughput::Elements(vals.len() as u64));
    g.bench_function("naive_add_assign", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for &(s, e) in &groups {
                let mut sum = 0.0f64;
                for &x in &vals[s..e] {
                    sum += x;
                }
                acc ^= black_box(sum).to_bits();
            }
            acc
        })
    });
    g.bench_function("sum_exact_round_f64", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for &(s, e) in &groups {
                acc ^= black_box(sum_exact(&vals[s..e]).round_f64()).to_bits();
            }
            acc
        })
    });
    g.bench_function("add_round_f64", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for &(s, e) in &groups {
                let mut sum = ExactSum::new();
                for &x in &vals[s..e] {
                    sum.add(x);
                }
                acc ^= black_box(sum.round_f64()).to_bits();
            }
            acc
        })
    });
    g.bench_function("sum_exact_round_f32", |b| {
        b.iter(|| {
            let mut acc = 0u32;
            for &(s, e) in &groups {
                acc ^= black_box(sum_exact(&vals[s..e]).round_f32()).to_bits();
            }
            acc
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
