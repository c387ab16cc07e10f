//! Criterion benches of the in-memory kernel (issue 23), against a plain
//! in-memory CSR build measured in the same run (count rows, scatter,
//! sort each row, add duplicates in f64: what scipy's `tocsr` does).
//!
//! cargo bench --bench direct                 # 1e6 FE and 1e6 random, 1 and 2 threads
//! DIRECT_N=5e6 cargo bench --bench direct
#[path = "common/fe.rs"]
mod fe;

use coo_assembler::internals::assemble::direct::{self, Assembled};
use coo_assembler::{AssembleOptions, DType, options::OutputLayout};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

/// Contributions as three arrays.
struct Arrays {
    rows: Vec<i32>,
    cols: Vec<i32>,
    vals: Vec<f64>,
    extent: u64,
}

fn fe_arrays(n: u64) -> Arrays {
    let mut a = Arrays {
        rows: Vec::new(),
        cols: Vec::new(),
        vals: Vec::new(),
        extent: fe::fe_nodes(n),
    };
    fe::fe_contributions(n, |r, c, v| {
        a.rows.push(r as i32);
        a.cols.push(c as i32);
        a.vals.push(v);
    });
    a
}

/// Uniform coordinates, about 8 per row.
fn random_arrays(n: u64) -> Arrays {
    let extent = (n / 8).max(16);
    let mut a = Arrays {
        rows: Vec::new(),
        cols: Vec::new(),
        vals: Vec::new(),
        extent,
    };
    let mut s = 0x2323u64;
    for _ in 0..n {
        let z = fe::splitmix(&mut s);
        a.rows.push((z % extent) as i32);
        a.cols.push(((z >> 32) % extent) as i32);
        a.vals.push(fe::unit(&mut s) - 0.5);
    }
    a
}

/// The baseline: CSR by a counting sort on rows, then each row sorted by
/// column and its duplicates added in f64.
fn baseline(a: &Arrays) -> (Vec<f64>, Vec<i32>, Vec<i32>) {
    let m = a.extent as usize;
    let mut ptr = vec![0i32; m + 1];
    for &r in &a.rows {
        ptr[r as usize + 1] += 1;
    }
    for i in 0..m {
        ptr[i + 1] += ptr[i];
    }
    let mut cur = ptr.clone();
    let mut pairs = vec![(0i32, 0f64); a.vals.len()];
    for ((&r, &c), &v) in a.rows.iter().zip(&a.cols).zip(&a.vals) {
        let p = &mut cur[r as usize];
        pairs[*p as usize] = (c, v);
        *p += 1;
    }
    let (mut vals, mut idx, mut out_ptr) = (Vec::new(), Vec::new(), vec![0i32; m + 1]);
    for i in 0..m {
        let row = &mut pairs[ptr[i] as usize..ptr[i + 1] as usize];
        row.sort_unstable_by_key(|p| p.0);
        let mut k = 0;
        while k < row.len() {
            let (c, mut s) = row[k];
            k += 1;
            while k < row.len() && row[k].0 == c {
                s += row[k].1;
                k += 1;
            }
            idx.push(c);
            vals.push(s);
        }
        out_ptr[i + 1] = idx.len() as i32;
    }
    (vals, idx, out_ptr)
}

fn ours(a: &Arrays, threads: usize) -> Assembled<f64, i32> {
    let opts = AssembleOptions {
        layout: OutputLayout::Csr,
        threads,
        ..AssembleOptions::default()
    };
    let p = direct::plan(
        &[a.extent, a.extent],
        DType::F64,
        a.vals.len() as u64,
        &opts,
    )
    .expect("fits")
    .with_threads(threads);
    p.assemble(&[&a.rows[..], &a.cols[..]], &a.vals, None)
        .expect("assembled")
        .expect("no heavy bucket")
}

fn bench(c: &mut Criterion) {
    let n = std::env::var("DIRECT_N")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(1e6) as u64;
    for (name, a) in [("fe", fe_arrays(n)), ("random", random_arrays(n))] {
        let mut g = c.benchmark_group(format!("direct/{name}"));
        g.throughput(Throughput::Elements(n));
        g.sample_size(20);
        g.bench_function("baseline_tocsr", |b| b.iter(|| black_box(baseline(&a))));
        for t in [1, 2] {
            g.bench_with_input(BenchmarkId::new("direct_csr", t), &t, |b, &t| {
                b.iter(|| black_box(ours(&a, t)))
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
