//! Determinism sweep: the same contributions give the same bytes whatever
//! the push order (for order-independent policies), the memory budget (in
//! memory, or spilled and merged in passes), the fan-in and the number of
//! threads and pushers. Element types f64, f32, f16, i64, i32; policies sum,
//! min, max, last (last: fixed order, pushers split the sequence in
//! creation order, which is what `last` is defined on) and drop_zeros.

use coo_assembler::HurrayFile;
use coo_assembler::{AssembleOptions, Builder, DType, options::DuplicatePolicy};
use std::path::Path;

#[derive(Clone, Copy, Debug)]
enum V {
    F(f64),
    I(i64),
}

/// Contributions with many duplicates, values chosen so that the exact
/// float sum differs from naive summation and includes zeros, negatives,
/// subnormal-ish tiny values, huge values and cancellations to zero.
fn contributions(shape: [u64; 2], n: usize, float: bool, seed: u64) -> Vec<([u64; 2], V)> {
    let mut rng = crate::common::Rng::new(seed);
    let mut v = Vec::with_capacity(n);
    for k in 0..n {
        let r = rng.next_u64();
        let idx = [r % shape[0], (r >> 20) % shape[1]];
        let val = if float {
            let m = [3.0e4, 1.0, -1.0, 1e-4, -3.0e4, 0.0, 0.5, 7.25][k % 8];
            V::F(m * (1.0 + ((r >> 44) % 1024) as f64 / 1024.0))
        } else {
            V::I(((r >> 40) % 2001) as i64 - 1000)
        };
        v.push((idx, val));
    }
    v
}

fn shuffle<T>(v: &mut [T], seed: u64) {
    crate::common::Rng::new(seed).shuffle(v);
}

struct Cfg {
    threads: usize,
    budget_big: bool,
    fan_in: usize,
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    shape: [u64; 2],
    dtype: DType,
    policy: DuplicatePolicy,
    drop_zeros: bool,
    c: &Cfg,
    contribs: &[([u64; 2], V)],
    dir: &Path,
    out: &Path,
) -> Vec<u8> {
    let opts = AssembleOptions {
        memory_budget: if c.budget_big {
            256 << 20
        } else {
            crate::common::min_budget(&shape, dtype, c.threads)
        },
        threads: c.threads,
        temp_dir: Some(dir.to_path_buf()),
        max_fan_in: c.fan_in,
        duplicates: policy,
        drop_zeros,
        ..AssembleOptions::default()
    };
    let mut b = Builder::new(&shape, dtype, opts).unwrap();
    let n = contribs.len();
    // Pushers in creation order get consecutive parts of the sequence.
    let parts: Vec<_> = contribs.chunks(n / c.threads + 1).collect();
    let pushers: Vec<_> = parts.iter().map(|_| b.pusher().unwrap()).collect();
    std::thread::scope(|sc| {
        for (mut p, part) in pushers.into_iter().zip(parts) {
            sc.spawn(move || {
                for (idx, v) in part {
                    match *v {
                        V::F(f) => p.push(idx, f).unwrap(),
                        V::I(i) => p.push(idx, i).unwrap(),
                    }
                }
            });
        }
    });
    let sum = b.finish(out).unwrap();
    if !c.budget_big {
        assert!(
            sum.bytes_spilled > 0 && sum.merge_passes >= 2,
            "{dtype:?} {policy:?} threads {}: no spill: {sum:?}",
            c.threads
        );
    }
    let bytes = std::fs::read(out).unwrap();
    let f = HurrayFile::from_bytes(bytes.clone()).unwrap();
    assert!(f.verify().is_empty(), "{:?}", f.verify());
    assert!(
        std::fs::read_dir(dir).unwrap().next().is_none(),
        "temp dir not empty"
    );
    bytes
}

const CFGS: &[Cfg] = &[
    Cfg {
        threads: 1,
        budget_big: true,
        fan_in: 64,
    },
    Cfg {
        threads: 1,
        budget_big: false,
        fan_in: 2,
    },
    Cfg {
        threads: 2,
        budget_big: false,
        fan_in: 3,
    },
    Cfg {
        threads: 3,
        budget_big: false,
        fan_in: 64,
    },
    Cfg {
        threads: 2,
        budget_big: true,
        fan_in: 2,
    },
];

fn sweep(dtype: DType, policy: DuplicatePolicy, drop_zeros: bool, n: usize) {
    let shape = [800u64, 300];
    let float = dtype.is_float();
    let base = contributions(shape, n, float, 0xd1b54a32d192ed03 ^ dtype.width() as u64);
    let tmp = tempfile::tempdir().unwrap();
    let spill = tmp.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    let mut reference: Option<Vec<u8>> = None;
    for (round, c) in CFGS.iter().enumerate() {
        let mut order = base.clone();
        if policy != DuplicatePolicy::Last {
            shuffle(&mut order, 777 + round as u64);
        }
        let out = tmp.path().join(format!("r{round}.hrry"));
        let bytes = assemble(shape, dtype, policy, drop_zeros, c, &order, &spill, &out);
        match &reference {
            None => reference = Some(bytes),
            Some(r) => assert!(
                r == &bytes,
                "{dtype:?} {policy:?} drop_zeros={drop_zeros}: round {round} (threads {}, big budget {}, fan-in {}) differs",
                c.threads,
                c.budget_big,
                c.fan_in
            ),
        }
    }
}

#[test]
fn f32_sum_min_max() {
    for p in [
        DuplicatePolicy::Sum,
        DuplicatePolicy::Min,
        DuplicatePolicy::Max,
    ] {
        sweep(DType::F32, p, false, 120_000);
    }
}

#[test]
fn f16_sum_and_drop_zeros() {
    sweep(DType::F16, DuplicatePolicy::Sum, false, 120_000);
    sweep(DType::F16, DuplicatePolicy::Sum, true, 120_000);
}

#[test]
fn i64_sum_min_max_drop_zeros() {
    for p in [
        DuplicatePolicy::Sum,
        DuplicatePolicy::Min,
        DuplicatePolicy::Max,
    ] {
        sweep(DType::I64, p, false, 120_000);
    }
    sweep(DType::I64, DuplicatePolicy::Sum, true, 120_000);
}

#[test]
fn last_is_deterministic_given_pusher_order() {
    sweep(DType::F64, DuplicatePolicy::Last, false, 120_000);
    sweep(DType::I32, DuplicatePolicy::Last, false, 120_000);
}
