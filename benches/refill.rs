//! Criterion benches of the refill (issue 24): a plan's refill against the
//! scipy user's scatter refill (a slot per contribution, `out[slot] += v`,
//! what `np.bincount(slot, weights=v)` does; not exactly summed) and
//! against a full in-memory assembly of the same contributions, measured
//! in the same run; and planning itself.
//!
//! cargo bench --bench refill                  # 2e6 FE contributions
//! REFILL_N=2e7 cargo bench --bench refill
#[path = "common/fe.rs"]
mod fe;

use coo_assembler::internals::assemble::direct::{self, Assembled};
use coo_assembler::{AssembleOptions, DType, Plan, options::OutputLayout};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;

fn n_of_env() -> u64 {
    std::env::var("REFILL_N")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .map_or(2_000_000, |x| x as u64)
}

fn bench(c: &mut Criterion) {
    let n = n_of_env();
    let extent = fe::fe_nodes(n);
    let (mut rows, mut cols, mut vals) = (Vec::new(), Vec::new(), Vec::new());
    fe::fe_contributions(n, |r, c, v| {
        rows.push(r as i32);
        cols.push(c as i32);
        vals.push(v);
    });
    let shape = [extent, extent];
    let opts = AssembleOptions {
        layout: OutputLayout::Csr,
        memory_budget: 4 << 30,
        ..Default::default()
    };
    let plan = Plan::new(&[&rows[..], &cols[..]], &shape, DType::F64, &opts, None).expect("plan");
    // The peer's slots: each contribution's entry number.
    let mut slot = vec![0usize; vals.len()];
    {
        let ptr: Vec<u64> = plan.pointers().expect("pointers");
        let idx: Vec<u64> = plan.indices().expect("indices");
        for (k, (&r, &c)) in rows.iter().zip(&cols).enumerate() {
            let (lo, hi) = (ptr[r as usize] as usize, ptr[r as usize + 1] as usize);
            slot[k] = lo + idx[lo..hi].partition_point(|&x| x < c as u64);
        }
    }
    let mut g = c.benchmark_group("refill");
    g.throughput(Throughput::Elements(vals.len() as u64));
    g.sample_size(20);
    let mut out = vec![0.0f64; plan.nnz()];
    g.bench_function("plan.assemble_into (exact, 2 threads)", |b| {
        b.iter(|| {
            plan.assemble_into(black_box(&vals), &mut out, None)
                .expect("refill")
        })
    });
    let one = plan.clone().with_threads(1);
    g.bench_function("plan.assemble_into (exact, 1 thread)", |b| {
        b.iter(|| {
            one.assemble_into(black_box(&vals), &mut out, None)
                .expect("refill")
        })
    });
    g.bench_function("scatter refill out[slot] += v (not exact, 1 thread)", |b| {
        b.iter(|| {
            out.iter_mut().for_each(|x| *x = 0.0);
            for (&s, &v) in slot.iter().zip(black_box(&vals)) {
                out[s] += v;
            }
        })
    });
    g.bench_function("full in-memory assembly (direct)", |b| {
        b.iter(|| {
            let a: Assembled<f64, i32> =
                direct::assemble_matrix(shape, &rows, &cols, black_box(&vals), &opts, None)
                    .expect("assemble");
            a
        })
    });
    g.bench_function("planning", |b| {
        b.iter(|| {
            Plan::new(&[&rows[..], &cols[..]], &shape, DType::F64, &opts, None).expect("plan")
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
