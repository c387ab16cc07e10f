//! The parallel final merge (key ranges merged on several threads, written
//! in key order) writes the bytes the one-thread merge writes, for every
//! policy, layout, key spread and complex values, and reports the same
//! first error; ranges forced small (`range_records`) so that every range
//! start, skip and bound is exercised.

use crate::common::xorshift;
use coo_assembler::options::{DuplicatePolicy, OutputLayout};
use coo_assembler::{AssembleOptions, Builder, DType};
use std::path::Path;

/// `n` contributions in a `side` x `side` matrix: banded (element order)
/// or spread over the whole key space.
fn contributions(n: usize, side: u64, banded: bool, seed: u64) -> Vec<([u64; 2], f64)> {
    let mut rnd = xorshift(seed);
    (0..n as u64)
        .map(|i| {
            let r = if banded {
                (i * side / n as u64 + rnd(3)).min(side - 1)
            } else {
                rnd(side)
            };
            let c = if banded {
                (r + rnd(5)).min(side - 1)
            } else {
                rnd(side)
            };
            // Values of very different sizes: any change of order shows.
            let v = if rnd(3) == 0 {
                9.007_199_254_740_992e15
            } else {
                rnd(17) as f64 - 8.0
            };
            ([r, c], v)
        })
        .collect()
}

fn assemble(
    pushes: &[([u64; 2], f64)],
    side: u64,
    dtype: DType,
    opts: AssembleOptions,
    out: &Path,
) -> coo_assembler::Result<coo_assembler::builder::Summary> {
    let mut b = Builder::new(&[side, side], dtype, opts)?;
    for (idx, v) in pushes {
        if dtype.is_complex() {
            b.push(idx, num_complex::Complex64::new(*v, -v / 2.0))?;
        } else {
            b.push(idx, *v)?;
        }
    }
    b.finish(out)
}

#[test]
fn ranges_write_the_one_thread_merges_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let side = 150_000;
    for banded in [true, false] {
        let pushes = contributions(600_000, side, banded, 17);
        for (dup, layout, dtype, drop_zeros) in [
            (DuplicatePolicy::Sum, OutputLayout::Coo, DType::F64, false),
            (DuplicatePolicy::Sum, OutputLayout::Csr, DType::F64, true),
            (DuplicatePolicy::Last, OutputLayout::Csc, DType::F64, false),
            (DuplicatePolicy::Max, OutputLayout::Coo, DType::F32, false),
            (DuplicatePolicy::Sum, OutputLayout::Csr, DType::C128, false),
        ] {
            let what = format!("banded {banded} {dup:?} {layout:?} {dtype:?} drop {drop_zeros}");
            let opts = AssembleOptions {
                duplicates: dup,
                layout,
                drop_zeros,
                memory_budget: 16 << 20,
                in_memory_kernel: false,
                temp_dir: Some(d.to_path_buf()),
                ..AssembleOptions::default()
            };
            let mut want = None;
            // The first: one merging thread, the bytes to compare with.
            for (threads, range) in [
                (2usize, Some(0u64)),
                (2, Some(4000)),
                (3, Some(777)),
                (2, None),
            ] {
                let out = d.join("ranges.hrry");
                let s = assemble(
                    &pushes,
                    side,
                    dtype,
                    AssembleOptions {
                        range_records: range,
                        threads,
                        ..opts.clone()
                    },
                    &out,
                )
                .unwrap();
                let got = std::fs::read(&out).unwrap();
                let Some(want) = &want else {
                    assert!(s.runs >= 3, "{what}: {} runs", s.runs);
                    assert_eq!(s.merge_ranges, 0, "{what}");
                    want = Some(got);
                    continue;
                };
                if range.is_some() {
                    assert!(s.merge_ranges > 10, "{what}: {} ranges", s.merge_ranges);
                }
                assert!(
                    &got == want,
                    "{what}: threads {threads}, ranges of {range:?} records differ"
                );
            }
        }
    }
}

#[test]
fn ranges_report_the_first_error_in_key_order() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let side = 2000;
    // Distinct coordinates, then two duplicates: a late one pushed first
    // and an early one pushed last. The error names the early one, as the
    // one-thread merge does.
    let mut pushes: Vec<([u64; 2], f64)> = (0..400_000u64)
        .map(|i| ([i / side, i % side], 1.0))
        .collect();
    pushes.insert(1000, ([150, 7], 2.0));
    pushes.push(([3, 5], 2.0));
    let opts = AssembleOptions {
        duplicates: DuplicatePolicy::Error,
        memory_budget: 16 << 20,
        in_memory_kernel: false,
        temp_dir: Some(d.to_path_buf()),
        threads: 2,
        ..AssembleOptions::default()
    };
    let mut msgs = Vec::new();
    for range in [Some(0), Some(5000)] {
        let out = d.join("e.hrry");
        let e = assemble(
            &pushes,
            side,
            DType::F64,
            AssembleOptions {
                range_records: range,
                ..opts.clone()
            },
            &out,
        )
        .unwrap_err();
        assert!(!out.exists(), "nothing is published");
        msgs.push(e.to_string());
    }
    assert!(msgs[0].contains("[3, 5]"), "{}", msgs[0]);
    assert_eq!(msgs[0], msgs[1]);
}
