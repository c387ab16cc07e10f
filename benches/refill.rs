//! Criterion benches of the refill (issue 24): a plan's refill against the
//! scipy user's scatter refill (a slot per contribution, `out[slot] += v`,
//! what `np.bincount(slot, weights=v)` does; not exactly summed) and
//! against a full in-memory assembly of the same contributions, measured
//! in the same run; and planning itself.
//!
//! The `pushes` group: a code that pushes element matrices into a
//! `Builder` (CSR, one process) against the same code refilling the plan
//! the builder recorded by pushing the values alone, both writing the
//! same file (issue 40's target: at least 3x).
//!
//! cargo bench --bench refill                  # 2e6 FE contributions
//! REFILL_N=2e7 cargo bench --bench refill
//! REFILL_N=1e7 cargo bench --bench refill -- pushes
#[path = "common/fe.rs"]
mod fe;

use coo_assembler::internals::assemble::direct::{self, Assembled};
use coo_assembler::{AssembleOptions, Builder, DType, Plan, options::OutputLayout};
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
    let (rows, cols, vals) = fe::fe_arrays(n);
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

/// Pushes of element matrices into a builder, against a refill of the
/// plan it recorded by pushing the values alone.
fn pushes(c: &mut Criterion) {
    let n = n_of_env();
    let extent = fe::fe_nodes(n);
    let mut elems: Vec<([u64; 8], [f64; 64])> = Vec::new();
    fe::fe_elements(n / 64, |d, k| elems.push((*d, *k)));
    let shape = [extent, extent];
    let dir = tempfile::tempdir().expect("temporary folder");
    let out = dir.path().join("k.hrry");
    let opts = AssembleOptions {
        layout: OutputLayout::Csr,
        memory_budget: 1 << 30,
        temp_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let assemble = |record: bool| {
        let mut b = Builder::new(&shape, DType::F64, opts.clone()).expect("builder");
        if record {
            b.record_plan().expect("record");
        }
        for (d, k) in &elems {
            b.push_element(d, k).expect("push");
        }
        b.finish(&out).expect("finish");
        b
    };
    let b = assemble(true);
    let plan = Plan::recorded(&b, None).expect("recorded plan");
    drop(b);
    let mut g = c.benchmark_group("pushes");
    g.throughput(Throughput::Elements(64 * elems.len() as u64));
    g.sample_size(10);
    g.bench_function("builder: push_element + finish (assemble again)", |bch| {
        bch.iter(|| assemble(false))
    });
    g.bench_function("builder recording its plan: push_element + finish", |bch| {
        bch.iter(|| assemble(true))
    });
    let mut refill = plan.refill::<f64>().expect("refill");
    g.bench_function("recorded plan: push values + write", |bch| {
        bch.iter(|| {
            refill.clear();
            for (_, k) in &elems {
                refill.push_many(black_box(k)).expect("push");
            }
            refill.write(&out, &[]).expect("write")
        })
    });
    let mut vals = vec![0.0f64; plan.nnz()];
    g.bench_function("recorded plan: push values + assemble_into", |bch| {
        bch.iter(|| {
            refill.clear();
            for (_, k) in &elems {
                refill.push_many(black_box(k)).expect("push");
            }
            refill.assemble_into(&mut vals, None).expect("refill")
        })
    });
    g.finish();
}

criterion_group!(benches, bench, pushes);
criterion_main!(benches);
