//! The one-process refill kernel against the peers' kernels on the same
//! FE contributions, interleaved round after round in one process (the
//! machine is shared: criterion's means moved by 2x between runs, the
//! minimum of interleaved rounds did not), printing the minimum and the
//! median of each and their ratios to our exact refill.
//!
//! Peers, each in its best form:
//! - PETSc's `MatSetValuesCOO` kernel: per entry, `sum += v[perm[k]]` for
//!   `k` in `jmap[i]..jmap[i + 1]`, in arrival order, 64-bit `PetscCount`
//!   indices as PETSc keeps them;
//! - a scatter, `out[slot[k]] += v[k]` (what `np.bincount(slot, v)` does),
//!   32-bit slots, in arrival order;
//! - the same scatter summing exactly: a running sum and its error term
//!   per entry (`TwoTerm::add` in arrival order), not a peer but a
//!   measure of what exact sums cost in a scatter.
//!
//! Ours also refills from values in two slices, as a rank refills its band
//! from its own values and those the other ranks sent.
//!
//! cargo bench -p coo-assembler-benches --bench refill_kernels   # 2.5e7
//! N=1e7 ROUNDS=21 cargo bench -p coo-assembler-benches --bench refill_kernels
//! ONLY=0 ...   # our exact refill alone, for `perf record`
#[path = "common/child.rs"]
mod child;
#[path = "common/fe.rs"]
mod fe;

use coo_assembler::{AssembleOptions, DType, Plan, options::OutputLayout};
use std::hint::black_box;
use std::time::Instant;

fn env_num(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(default)
}

fn main() {
    let n = env_num("N", 2.5e7) as u64;
    let rounds = env_num("ROUNDS", 15.0) as usize;
    // ONLY=0 runs our exact refill alone (for a profiler).
    let only: Option<usize> = std::env::var("ONLY").ok().and_then(|s| s.parse().ok());
    let extent = fe::fe_nodes(n);
    let (rows, cols, vals) = fe::fe_arrays(n);
    let shape = [extent, extent];
    let plan_of = |exact_sums: bool| {
        let opts = AssembleOptions {
            layout: OutputLayout::Csr,
            memory_budget: 4 << 30,
            exact_sums,
            ..Default::default()
        };
        Plan::new(&[&rows[..], &cols[..]], &shape, DType::F64, &opts, None)
            .expect("plan")
            .with_threads(1)
    };
    let exact = plan_of(true);
    let in_order = plan_of(false);
    // The peers' structures: each contribution's entry, and the entries'
    // contributions in arrival order.
    let ptr: Vec<u64> = exact.pointers().expect("pointers");
    let idx: Vec<u64> = exact.indices().expect("indices");
    let nnz = exact.nnz();
    let slot: Vec<u32> = rows
        .iter()
        .zip(&cols)
        .map(|(&r, &c)| {
            let (lo, hi) = (ptr[r as usize] as usize, ptr[r as usize + 1] as usize);
            (lo + idx[lo..hi].partition_point(|&x| x < c as u64)) as u32
        })
        .collect();
    let mut jmap = vec![0u64; nnz + 1];
    for &k in &slot {
        jmap[k as usize + 1] += 1;
    }
    for i in 0..nnz {
        jmap[i + 1] += jmap[i];
    }
    let mut perm = vec![0u64; slot.len()];
    let mut next = jmap.clone();
    for (p, &k) in slot.iter().enumerate() {
        perm[next[k as usize] as usize] = p as u64;
        next[k as usize] += 1;
    }
    drop(next);
    let mut out = vec![0.0f64; nnz];
    let names = [
        "ours, exact (plan.assemble_into)",
        "ours, exact, values in two slices (cut in half)",
        "ours, in arrival order (exact_sums = false)",
        "PETSc's kernel (jmap/perm gather, in arrival order)",
        "scatter out[slot] += v (in arrival order)",
        "exact scatter: out[slot], lo[slot] += v, TwoSums",
    ];
    let mut lo = vec![0.0f64; nnz];
    #[inline(always)]
    fn two_sum(a: f64, b: f64) -> (f64, f64) {
        let s = a + b;
        let bb = s - a;
        (s, (a - (s - bb)) + (b - bb))
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    for _ in 0..rounds {
        for (w, t) in times.iter_mut().enumerate() {
            if only.is_some_and(|o| o != w) {
                t.push(f64::NAN);
                continue;
            }
            let v = black_box(&vals[..]);
            let t0 = Instant::now();
            match w {
                0 => exact.assemble_into(v, &mut out, None).expect("refill"),
                1 => {
                    // A rank's own values and those it received.
                    let (head, tail) = v.split_at(v.len() / 2);
                    exact
                        .assemble_split_into(head, tail, &mut out, None)
                        .expect("refill")
                }
                2 => in_order.assemble_into(v, &mut out, None).expect("refill"),
                3 => {
                    for (i, o) in out.iter_mut().enumerate() {
                        let mut sum = 0.0;
                        for &k in &perm[jmap[i] as usize..jmap[i + 1] as usize] {
                            sum += v[k as usize];
                        }
                        *o = sum;
                    }
                }
                4 => {
                    out.fill(0.0);
                    for (&k, &x) in slot.iter().zip(v) {
                        out[k as usize] += x;
                    }
                }
                _ => {
                    // The exact sum in the scatter's form: a running sum
                    // and its error term per entry, 12 additions per
                    // contribution against the scatter's one (an error
                    // term's own rounding marks the entry NaN, for the
                    // general path; not done here). What exactness costs
                    // without a gather.
                    out.fill(-0.0);
                    lo.fill(0.0);
                    for (&k, &x) in slot.iter().zip(v) {
                        let k = k as usize;
                        let (s, e) = two_sum(out[k], x);
                        let (c, f) = two_sum(lo[k], e);
                        out[k] = s;
                        lo[k] = if f != 0.0 { f64::NAN } else { c };
                    }
                    let mut bad = 0usize;
                    for (o, l) in out.iter_mut().zip(&lo) {
                        let (h, l) = two_sum(*o, *l);
                        bad += (!(h.is_finite() && l.is_finite())) as usize;
                        if h != 0.0 {
                            *o = h;
                        }
                    }
                    black_box(bad);
                }
            }
            t.push(t0.elapsed().as_secs_f64());
            black_box(&out);
        }
    }
    let cpu = child::cpu_model();
    println!(
        "{} FE contributions, {nnz} entries, {rounds} interleaved rounds, one thread; {cpu}",
        vals.len()
    );
    let stats: Vec<(f64, f64)> = times
        .iter_mut()
        .map(|t| {
            t.sort_by(|a, b| a.total_cmp(b));
            (t[0], t[t.len() / 2])
        })
        .collect();
    for (name, &(min, med)) in names.iter().zip(&stats) {
        println!(
            "{name:52} min {:7.1} ms ({:4.2}x ours)  median {:7.1} ms ({:4.2}x ours)",
            min * 1e3,
            min / stats[0].0,
            med * 1e3,
            med / stats[0].1
        );
    }
}
