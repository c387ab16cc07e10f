//! Plans a builder records while it assembles (`Builder::record_plan`):
//! refilled by pushing the values alone, in memory and out of core, they
//! give the bytes the builder writes for the same pushes, whatever the
//! layout, policy, pushers, budget or skipped contributions.

use crate::common::xorshift;
use coo_assembler::options::{DuplicatePolicy, OutputLayout};
use coo_assembler::plan::PlanFile;
use coo_assembler::{AssembleOptions, Builder, DType, Plan};
use std::path::Path;

/// Element matrices of a 1D chain with a long-range coupling: `(dofs,
/// local)`, a dof of -1 marking a removed one when `removed`.
fn elements(n: usize, dofs: u64, removed: bool, seed: u64) -> Vec<([i64; 3], [f64; 9])> {
    let mut rnd = xorshift(seed);
    (0..n as u64)
        .map(|e| {
            let a = e % (dofs - 1);
            let mut d = [a as i64, a as i64 + 1, rnd(dofs) as i64];
            if removed && e % 7 == 3 {
                d[rnd(3) as usize] = -1;
            }
            let k = std::array::from_fn(|_| (rnd(2001) as f64 - 1000.0) / 64.0);
            (d, k)
        })
        .collect()
}

/// Assemble `parts` (one list of elements per pusher, the pushers made in
/// that order and pushing from their own threads) recording the plan;
/// returns the builder, finished into `out`.
fn assemble(
    shape: [u64; 2],
    opts: &AssembleOptions,
    parts: &[Vec<([i64; 3], [f64; 9])>],
    out: &Path,
    record: bool,
) -> Builder {
    let mut b = Builder::new(&shape, DType::F64, opts.clone()).unwrap();
    if record {
        b.record_plan().unwrap();
    }
    let pushers: Vec<_> = parts.iter().map(|_| b.pusher().unwrap()).collect();
    std::thread::scope(|s| {
        for (mut p, part) in pushers.into_iter().zip(parts) {
            s.spawn(move || {
                for (d, k) in part {
                    p.push_element_signed(d, k).unwrap();
                }
            });
        }
    });
    b.finish(out).unwrap();
    b
}

/// Every value of `parts` in the builder's order.
fn values(parts: &[Vec<([i64; 3], [f64; 9])>]) -> Vec<f64> {
    parts
        .iter()
        .flat_map(|p| p.iter().flat_map(|(_, k)| k.iter().copied()))
        .collect()
}

/// The same elements with new values.
fn revalued(parts: &[Vec<([i64; 3], [f64; 9])>], seed: u64) -> Vec<Vec<([i64; 3], [f64; 9])>> {
    let mut rnd = xorshift(seed);
    parts
        .iter()
        .map(|p| {
            p.iter()
                .map(|(d, _)| (*d, std::array::from_fn(|_| rnd(1 << 20) as f64 / 3.0)))
                .collect()
        })
        .collect()
}

fn same_bytes(a: &Path, b: &Path, what: &str) {
    let (x, y) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert!(x == y, "{what}: {} and {} differ", a.display(), b.display());
}

#[test]
fn a_recorded_plan_refills_to_the_builders_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shape = [300u64, 300];
    for layout in [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc] {
        for dup in [DuplicatePolicy::Sum, DuplicatePolicy::Last] {
            // The second: the sorters' runs and merge rather than the kernel.
            for (budget, pushers, skip) in [(64u64 << 20, 1usize, false), (16 << 20, 3, true)] {
                let what = format!("{layout:?} {dup:?} budget {budget} pushers {pushers}");
                let opts = AssembleOptions {
                    layout,
                    duplicates: dup,
                    skip_negative: skip,
                    memory_budget: budget,
                    in_memory_kernel: pushers == 1,
                    temp_dir: Some(d.to_path_buf()),
                    ..AssembleOptions::default()
                };
                let parts: Vec<_> = (0..pushers)
                    .map(|p| elements(3000, shape[0], skip, 7 + p as u64))
                    .collect();
                let (a, r) = (d.join("a.hrry"), d.join("r.hrry"));
                let b = assemble(shape, &opts, &parts, &a, true);
                let plan = Plan::recorded(&b, None).unwrap();
                assert_eq!(plan.contributions(), 9 * 3000 * pushers, "{what}");
                let mut refill = plan.refill::<f64>().unwrap();
                for v in values(&parts) {
                    refill.push(v).unwrap();
                }
                refill.write(&r, &[]).unwrap();
                same_bytes(&a, &r, &what);

                // The next step: new values, pushed by element.
                let next = revalued(&parts, 99);
                let c = d.join("c.hrry");
                assemble(shape, &opts, &next, &c, false);
                refill.clear();
                for part in &next {
                    for (_, k) in part {
                        refill.push_many(k).unwrap();
                    }
                }
                refill.write(&r, &[]).unwrap();
                same_bytes(&c, &r, &format!("{what}, new values"));
                let mut out = vec![0.0f64; plan.nnz()];
                refill.assemble_into(&mut out, None).unwrap();
                let want = plan
                    .assemble::<f64, f64, u64>(&values(&next), None)
                    .unwrap();
                assert!(
                    out.iter()
                        .zip(&want.values)
                        .all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{what}"
                );

                // Out of core: the plan file, refilled from a values file.
                let pf = d.join("k.plan");
                PlanFile::create_recorded(&b, &pf, None).unwrap();
                let vals = d.join("v.f64");
                let bytes: Vec<u8> = values(&next).iter().flat_map(|v| v.to_le_bytes()).collect();
                std::fs::write(&vals, bytes).unwrap();
                let small = AssembleOptions {
                    memory_budget: 16 << 20,
                    ..opts.clone()
                };
                coo_assembler::plan::refill_plan_file(&pf, &vals, &r, &small).unwrap();
                same_bytes(&c, &r, &format!("{what}, plan file"));
            }
        }
    }
}

#[test]
fn single_pushes_and_skips_are_recorded_in_their_places() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let opts = AssembleOptions {
        skip_negative: true,
        temp_dir: Some(d.to_path_buf()),
        ..AssembleOptions::default()
    };
    let mut rnd = xorshift(5);
    let pushes: Vec<([i64; 3], f64)> = (0..20_000)
        .map(|i| {
            let mut idx = [rnd(40) as i64, rnd(50) as i64, rnd(3) as i64];
            if i % 11 == 0 {
                idx[rnd(3) as usize] = -4;
            }
            (idx, rnd(1000) as f64 * 0.125)
        })
        .collect();
    let (a, r) = (d.join("a.hrry"), d.join("r.hrry"));
    let mut b = Builder::new(&[40, 50, 3], DType::F64, opts).unwrap();
    b.record_plan().unwrap();
    for (idx, v) in &pushes {
        b.push_signed(idx, *v).unwrap();
    }
    let s = b.finish(&a).unwrap();
    assert!(s.skipped_negative > 0);
    let plan = Plan::recorded(&b, None).unwrap();
    assert_eq!(plan.contributions(), pushes.len());
    let mut refill = plan.refill::<f64>().unwrap();
    for (_, v) in &pushes {
        refill.push(*v).unwrap();
    }
    refill.write(&r, &[]).unwrap();
    same_bytes(&a, &r, "rank 3 with skips");
}

#[test]
fn recording_is_refused_where_it_cannot_serve() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let opts = AssembleOptions {
        temp_dir: Some(d.to_path_buf()),
        ..AssembleOptions::default()
    };
    // After the first push.
    let mut b = Builder::new(&[4, 4], DType::F64, opts.clone()).unwrap();
    b.push(&[0, 0], 1.0).unwrap();
    let e = b.record_plan().unwrap_err().to_string();
    assert!(e.contains("before the first push"), "{e}");
    // A plan of a builder that did not record, or before finish.
    assert!(Plan::recorded(&b, None).is_err());
    let mut b = Builder::new(&[4, 4], DType::F64, opts.clone()).unwrap();
    b.record_plan().unwrap();
    b.push(&[1, 2], 1.0).unwrap();
    let e = Plan::recorded(&b, None).unwrap_err().to_string();
    assert!(e.contains("after finish"), "{e}");
    b.finish(d.join("x.hrry")).unwrap();
    let plan = Plan::recorded(&b, None).unwrap();
    // A refill of the wrong length.
    let mut r = plan.refill::<f64>().unwrap();
    assert!(r.write(&d.join("y.hrry"), &[]).is_err());
    r.push(2.0).unwrap();
    assert!(r.push(3.0).is_err());
    // drop_zeros changes the pattern with the values.
    let mut b = Builder::new(
        &[4, 4],
        DType::F64,
        AssembleOptions {
            drop_zeros: true,
            ..opts.clone()
        },
    )
    .unwrap();
    let e = b.record_plan().unwrap_err().to_string();
    assert!(e.contains("drop_zeros"), "{e}");
    // Nothing pushed: an empty plan.
    let mut b = Builder::new(&[4, 4], DType::F64, opts).unwrap();
    b.record_plan().unwrap();
    b.finish(d.join("z.hrry")).unwrap();
    assert_eq!(Plan::recorded(&b, None).unwrap().nnz(), 0);
}

#[test]
fn a_complex_recording_refills_to_the_builders_bytes() {
    use num_complex::Complex64;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let opts = AssembleOptions {
        temp_dir: Some(d.to_path_buf()),
        layout: OutputLayout::Csr,
        ..AssembleOptions::default()
    };
    let mut rnd = xorshift(11);
    let pushes: Vec<([u64; 2], Complex64)> = (0..5000)
        .map(|_| {
            (
                [rnd(30), rnd(30)],
                Complex64::new(rnd(100) as f64 / 8.0, rnd(100) as f64 - 50.0),
            )
        })
        .collect();
    let (a, r) = (d.join("a.hrry"), d.join("r.hrry"));
    let mut b = Builder::new(&[30, 30], DType::C128, opts).unwrap();
    b.record_plan().unwrap();
    for (idx, v) in &pushes {
        b.push(idx, *v).unwrap();
    }
    b.finish(&a).unwrap();
    let plan = Plan::recorded(&b, None).unwrap();
    let mut refill = plan.refill::<Complex64>().unwrap();
    for (_, v) in &pushes {
        refill.push(*v).unwrap();
    }
    refill.write(&r, &[]).unwrap();
    same_bytes(&a, &r, "complex CSR");
}
