//! Plans kept in parts on disk (`PlanFile`, issue 24 out of core): for
//! random coordinates with heavy duplicates, every layout and rank 3, a
//! budget small enough to cut the plan into many parts, the refilled file
//! is byte for byte the one an in-memory plan's refill writes (and its
//! values a Builder's), whatever the thread count; the digest is the
//! in-memory plan's; damaged plans, wrong values files, small budgets and
//! outputs naming an input are refused, and no spill file stays behind.

use coo_assembler::{
    AssembleOptions, Builder, DType, Error, HurrayFile, Plan, options::DuplicatePolicy,
    options::NonFinitePolicy, options::OutputLayout, plan::PlanFile, read::Tensor,
};
use std::path::{Path, PathBuf};

use crate::common::Rng;

/// `n` coordinates in `shape`, clustered so that most repeat.
fn coords(shape: &[u64], n: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut r = Rng::new(seed);
    let mut out = vec![Vec::with_capacity(n); shape.len()];
    for _ in 0..n {
        let base = r.below(shape[0]);
        for (d, o) in out.iter_mut().enumerate() {
            let x = if d == 0 {
                base
            } else {
                (base + r.below(4)) % shape[d]
            };
            o.push(x as u32);
        }
    }
    out
}

/// [`coords`] in element order: contribution k near row `k * rows / n`,
/// so that each part's contributions lie in a narrow window of the
/// values (the plan reads windows; random coordinates spill).
fn local_coords(shape: &[u64], n: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut r = Rng::new(seed);
    let mut out = vec![Vec::with_capacity(n); shape.len()];
    for k in 0..n {
        let base = (k as u64 * shape[0] / n as u64 + r.below(8)).min(shape[0] - 1);
        for (d, o) in out.iter_mut().enumerate() {
            let x = if d == 0 {
                base
            } else {
                (base + r.below(4)).min(shape[d] - 1)
            };
            o.push(x as u32);
        }
    }
    out
}

fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut r = Rng::new(seed);
    (0..n)
        .map(|_| {
            // Cancellation-prone magnitudes: exact sums must matter.
            let m = (r.below(1 << 20) as f64 - 524288.0) / 1024.0;
            let e = [1.0, 1e16, 1e-8, -1e16][r.below(4) as usize];
            m * e
        })
        .collect()
}

fn write_f64s(path: &Path, v: &[f64]) {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    std::fs::write(path, bytes).expect("write values");
}

fn opts(layout: OutputLayout, budget: u64, threads: usize, tmp: &Path) -> AssembleOptions {
    AssembleOptions {
        layout,
        memory_budget: budget,
        threads,
        temp_dir: Some(tmp.to_path_buf()),
        ..Default::default()
    }
}

/// A scratch folder and the spill folder inside it.
fn work_dirs() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).expect("tmp");
    (dir, tmp)
}

fn entries_in(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .collect()
}

/// Plan in parts and in memory, refill both, compare the files; also
/// against a Builder's values, for random coordinates (the values
/// spilled by part) and coordinates in element order (read by window).
/// Returns the number of parts.
fn check_case(shape: &[u64], layout: OutputLayout, n: usize, budget: u64, threads: usize) -> usize {
    let parts = check_coords(shape, layout, n, budget, threads, false);
    let local = check_coords(shape, layout, n, budget, threads, true);
    parts.min(local)
}

fn check_coords(
    shape: &[u64],
    layout: OutputLayout,
    n: usize,
    budget: u64,
    threads: usize,
    local: bool,
) -> usize {
    let (dir, tmp) = work_dirs();
    let c = if local {
        local_coords(shape, n, 7 + n as u64)
    } else {
        coords(shape, n, 7 + n as u64)
    };
    let ix: Vec<&[u32]> = c.iter().map(Vec::as_slice).collect();
    let o = opts(layout, budget, threads, &tmp);
    let plan_path = dir.path().join("K.plan");
    let s = PlanFile::create(&ix, shape, DType::F64, &o, &plan_path, None).expect("plan in parts");
    assert_eq!(s.contributions, n as u64);
    // One part is always its own window; several are only when local.
    assert_eq!(
        s.windowed,
        local || s.parts == 1,
        "{shape:?} {layout} local {local}: {} parts",
        s.parts
    );
    let pf = PlanFile::open(&plan_path).expect("open");
    let mem = Plan::new(
        &ix,
        shape,
        DType::F64,
        &AssembleOptions {
            memory_budget: 1 << 30,
            ..o.clone()
        },
        None,
    )
    .expect("plan in memory");
    assert_eq!(pf.digest(), mem.digest());
    assert_eq!(pf.nnz(), mem.nnz() as u64);
    assert_eq!(s.nnz, mem.nnz() as u64);
    for step in 0..2u64 {
        let v = values(n, 100 + step);
        let vpath = dir.path().join("v.f64");
        write_f64s(&vpath, &v);
        let a = dir.path().join("a.hrry");
        let b = dir.path().join("b.hrry");
        pf.refill_file(&vpath, &a, &[], &o)
            .expect("refill in parts");
        mem.refill_file(&vpath, &b, &[]).expect("refill in memory");
        let (fa, fb) = (std::fs::read(&a).expect("a"), std::fs::read(&b).expect("b"));
        assert!(
            fa == fb,
            "the files differ ({shape:?}, {layout}, {n}, {budget})"
        );
        // And a Builder's values for the same contributions.
        if step == 0 {
            let mut bld = Builder::new(shape, DType::F64, sorted(&o)).expect("builder");
            let mut t = vec![0u64; shape.len()];
            for (k, &x) in v.iter().enumerate() {
                for (d, td) in t.iter_mut().enumerate() {
                    *td = c[d][k] as u64;
                }
                bld.push(&t, x).expect("push");
            }
            let p = dir.path().join("builder.hrry");
            bld.finish(&p).expect("finish");
            let (ga, gb) = (
                HurrayFile::open(&a).expect("a"),
                HurrayFile::open(&p).expect("p"),
            );
            let (ta, tb) = (
                ga.tensor_view("coo").expect("a"),
                gb.tensor_view("coo").expect("p"),
            );
            assert_eq!(ta.values_bytes(), tb.values_bytes());
        }
    }
    assert!(entries_in(&tmp).is_empty(), "spill files left behind");
    pf.parts()
}

#[test]
fn parted_refills_equal_in_memory_refills_every_layout() {
    for layout in [OutputLayout::Csr, OutputLayout::Csc, OutputLayout::Coo] {
        let parts = check_case(&[5000, 5000], layout, 300_000, 8 << 20, 2);
        assert!(
            parts >= 3,
            "{layout}: {parts} parts; the test wants several"
        );
    }
}

#[test]
fn parted_refills_rank_3_one_thread_and_one_part() {
    let parts = check_case(&[300, 40, 7], OutputLayout::Coo, 200_000, 8 << 20, 1);
    assert!(parts >= 2, "{parts} parts");
    // A budget that holds everything: one part, no spills.
    assert_eq!(
        check_case(&[300, 40, 7], OutputLayout::Coo, 20_000, 256 << 20, 2),
        1
    );
}

#[test]
fn element_plans_in_parts_equal_element_plans_in_memory() {
    let (dir, tmp) = work_dirs();
    let mut r = Rng::new(99);
    let (ndof, per, nel) = (20_000u64, 8usize, 6_000usize);
    let dofs: Vec<u32> = (0..nel * per)
        .map(|k| ((k / per) as u64 * 3 + r.below(24)) as u32 % ndof as u32)
        .collect();
    let o = opts(OutputLayout::Csr, 8 << 20, 2, &tmp);
    let path = dir.path().join("E.plan");
    let s = PlanFile::create_for_elements(&dofs, per, [ndof, ndof], DType::F64, &o, &path, None)
        .expect("plan elements in parts");
    assert!(s.parts >= 2, "{} parts", s.parts);
    assert!(
        s.windowed,
        "element matrices in element order are read by window"
    );
    let mem = Plan::for_elements(
        &dofs,
        per,
        [ndof, ndof],
        DType::F64,
        &AssembleOptions {
            memory_budget: 1 << 30,
            ..o.clone()
        },
        None,
    )
    .expect("plan in memory");
    let pf = PlanFile::open(&path).expect("open");
    assert_eq!(pf.digest(), mem.digest());
    let v = values(nel * per * per, 5);
    let vp = dir.path().join("v.f64");
    write_f64s(&vp, &v);
    let (a, b) = (dir.path().join("a.hrry"), dir.path().join("b.hrry"));
    pf.refill_file(&vp, &a, &[], &o).expect("refill");
    mem.refill_file(&vp, &b, &[]).expect("refill");
    assert!(std::fs::read(&a).expect("a") == std::fs::read(&b).expect("b"));
}

#[test]
fn integer_values_and_npy_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let shape = [4000u64, 4000];
    let c = coords(&shape, 100_000, 3);
    let ix: Vec<&[u32]> = c.iter().map(Vec::as_slice).collect();
    let o = AssembleOptions {
        memory_budget: 8 << 20,
        duplicates: DuplicatePolicy::Max,
        ..Default::default()
    };
    let path = dir.path().join("I.plan");
    PlanFile::create(&ix, &shape, DType::I64, &o, &path, None).expect("plan");
    let pf = PlanFile::open(&path).expect("open");
    assert!(pf.parts() >= 2);
    let mem = Plan::new(
        &ix,
        &shape,
        DType::I64,
        &AssembleOptions {
            memory_budget: 1 << 30,
            ..o.clone()
        },
        None,
    )
    .expect("plan in memory");
    // An npy of int32 values: converted as a push converts.
    let mut r = Rng::new(11);
    let v: Vec<i32> = (0..100_000).map(|_| r.below(2000) as i32 - 1000).collect();
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = format!(
        "{{'descr': '<i4', 'fortran_order': False, 'shape': ({},), }}",
        v.len()
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    for x in &v {
        npy.extend_from_slice(&x.to_le_bytes());
    }
    let vp = dir.path().join("v.npy");
    std::fs::write(&vp, npy).expect("npy");
    let (a, b) = (dir.path().join("a.hrry"), dir.path().join("b.hrry"));
    pf.refill_file(&vp, &a, &[], &o).expect("refill");
    mem.refill_file(&vp, &b, &[]).expect("refill");
    assert!(std::fs::read(&a).expect("a") == std::fs::read(&b).expect("b"));
}

fn small_plan(dir: &Path) -> (PathBuf, usize) {
    let o = AssembleOptions {
        memory_budget: 8 << 20,
        ..Default::default()
    };
    small_plan_with(dir, "S.plan", &o)
}

/// A plan of 100,000 contributions in 3000 x 3000, made with `o`.
fn small_plan_with(dir: &Path, name: &str, o: &AssembleOptions) -> (PathBuf, usize) {
    let shape = [3000u64, 3000];
    let n = 100_000;
    let c = coords(&shape, n, 1);
    let ix: Vec<&[u32]> = c.iter().map(Vec::as_slice).collect();
    let path = dir.join(name);
    PlanFile::create(&ix, &shape, DType::F64, o, &path, None).expect("plan");
    (path, n)
}

#[test]
fn refusals_name_what_is_wrong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, n) = small_plan(dir.path());
    let pf = PlanFile::open(&path).expect("open");
    let o = AssembleOptions {
        memory_budget: 8 << 20,
        ..Default::default()
    };
    let out = dir.path().join("K.hrry");
    // Values of the wrong length.
    let vp = dir.path().join("short.f64");
    write_f64s(&vp, &values(n - 1, 1));
    let e = pf
        .refill_file(&vp, &out, &[], &o)
        .expect_err("short values");
    assert!(
        e.to_string().contains("the plan takes 100000 values"),
        "{e}"
    );
    assert!(!out.exists());
    // A budget below the largest part's.
    let vp = dir.path().join("v.f64");
    write_f64s(&vp, &values(n, 1));
    let tiny = AssembleOptions {
        memory_budget: 1 << 20,
        ..Default::default()
    };
    match pf.refill_file(&vp, &out, &[], &tiny) {
        Err(Error::BudgetTooSmall { minimum, .. }) => assert_eq!(minimum, pf.refill_budget()),
        other => panic!("{other:?}"),
    }
    // The output may not be the plan or the values.
    for target in [&path, &vp] {
        let e = pf
            .refill_file(&vp, target, &[], &o)
            .expect_err("output is an input");
        assert!(e.to_string().contains("input"), "{e}");
    }
    // NaN where the policy forbids it: named by its position.
    let mut v = values(n, 1);
    v[4321] = f64::NAN;
    write_f64s(&vp, &v);
    let strict = AssembleOptions {
        memory_budget: 8 << 20,
        non_finite: NonFinitePolicy::RejectNan,
        ..Default::default()
    };
    let (sp, _) = small_plan_with(dir.path(), "strict.plan", &strict);
    let e = PlanFile::open(&sp)
        .expect("open")
        .refill_file(&vp, &out, &[], &strict)
        .expect_err("nan");
    assert!(e.to_string().contains("4321"), "{e}");
    assert!(!out.exists());
}

#[test]
fn plans_in_parts_and_in_memory_are_told_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = small_plan(dir.path());
    let e = Plan::load(&path).expect_err("a parted plan is not loaded");
    assert!(e.to_string().contains("kept in parts"), "{e}");
    let rows: [u32; 3] = [0, 1, 0];
    let cols: [u32; 3] = [0, 1, 0];
    let mem = Plan::new(
        &[&rows[..], &cols[..]],
        &[2, 2],
        DType::F64,
        &AssembleOptions::default(),
        None,
    )
    .expect("plan");
    let mp = dir.path().join("M.plan");
    mem.save(&mp).expect("save");
    let e = PlanFile::open(&mp).expect_err("an in-memory plan's file");
    assert!(e.to_string().contains("Plan::load"), "{e}");
}

#[test]
fn a_damaged_plan_file_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, _) = small_plan(dir.path());
    let good = std::fs::read(&path).expect("read");
    let o = AssembleOptions {
        memory_budget: 8 << 20,
        ..Default::default()
    };
    let vp = dir.path().join("v.f64");
    write_f64s(&vp, &values(100_000, 3));
    let want_path = dir.path().join("good.hrry");
    PlanFile::open(&path)
        .expect("good")
        .refill_file(&vp, &want_path, &[], &o)
        .expect("refill");
    let want = std::fs::read(&want_path).expect("read");
    let mut r = Rng::new(5);
    let mut refused = 0;
    for _ in 0..40 {
        let mut bad = good.clone();
        let at = r.below(bad.len() as u64) as usize;
        bad[at] ^= 1 << r.below(8);
        let p = dir.path().join("bad.plan");
        std::fs::write(&p, &bad).expect("write");
        // Refused (at open or by the refill), or the flip is in bytes a
        // refill never reads (padding; the 0..n indices of `order` and
        // `part`, which open does not hash) and the refill is the good one.
        let out = dir.path().join("bad.hrry");
        match PlanFile::open(&p).and_then(|pf| pf.refill_file(&vp, &out, &[], &o)) {
            Err(_) => refused += 1,
            Ok(_) => assert_eq!(std::fs::read(&out).expect("read"), want, "flip at {at}"),
        }
    }
    assert!(refused >= 10, "only {refused} of 40 flips refused");
}

#[test]
fn planning_errors_match_a_push() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rows: Vec<u32> = vec![0, 1, 9, 2];
    let cols: Vec<u32> = vec![0, 1, 0, 2];
    let p = dir.path().join("P.plan");
    let e = PlanFile::create(
        &[&rows[..], &cols[..]],
        &[5, 5],
        DType::F64,
        &AssembleOptions::default(),
        &p,
        None,
    )
    .expect_err("index 9 of 5");
    match e {
        Error::IndexOutOfRange { contribution, .. } => assert_eq!(contribution, 2),
        other => panic!("{other:?}"),
    }
    assert!(!p.exists());
    let rows: Vec<u32> = vec![0, 1, 0];
    let cols: Vec<u32> = vec![0, 1, 0];
    let strict = AssembleOptions {
        duplicates: DuplicatePolicy::Error,
        ..Default::default()
    };
    match PlanFile::create(
        &[&rows[..], &cols[..]],
        &[5, 5],
        DType::F64,
        &strict,
        &p,
        None,
    ) {
        Err(Error::DuplicateCoordinate { coordinate }) => assert_eq!(coordinate, vec![0, 0]),
        other => panic!("{other:?}"),
    }
    let drop = AssembleOptions {
        drop_zeros: true,
        ..Default::default()
    };
    let e = PlanFile::create(
        &[&rows[..], &cols[..]],
        &[5, 5],
        DType::F64,
        &drop,
        &p,
        None,
    )
    .expect_err("drop_zeros");
    assert!(e.to_string().contains("drop_zeros"), "{e}");
    assert!(!p.exists());
}

#[test]
fn the_result_is_a_plain_hurray_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, n) = small_plan(dir.path());
    let pf = PlanFile::open(&path).expect("open");
    let vp = dir.path().join("v.f64");
    write_f64s(&vp, &values(n, 9));
    let out = dir.path().join("K.hrry");
    let s = pf
        .refill_file(
            &vp,
            &out,
            &[],
            &AssembleOptions {
                memory_budget: 8 << 20,
                ..Default::default()
            },
        )
        .expect("refill");
    assert_eq!(s.nnz, pf.nnz());
    let f = HurrayFile::open(&out).expect("open");
    assert!(f.verify().is_empty());
    // The default layout, COO, as a full assembly writes it.
    match f.tensor_view("coo").expect("coo") {
        Tensor::Coo(c) => assert_eq!(c.nnz(), pf.nnz()),
        other => panic!("COO expected, got {}", other.layout()),
    }
}

/// An `.npy` file of 1-D `values` with NumPy type string `descr`.
fn npy(descr: &str, n: usize, data: &[u8]) -> Vec<u8> {
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({n},), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// The plan of `ix` in parts (at least two, of `dtype`, in `dir`) and in
/// memory (a budget that holds it), for tests comparing their refills.
fn both_plans(
    ix: &[&[u32]],
    shape: &[u64],
    dtype: DType,
    o: &AssembleOptions,
    dir: &Path,
) -> (PlanFile, Plan) {
    let plan_path = dir.join(format!("{dtype}.plan"));
    PlanFile::create(ix, shape, dtype, o, &plan_path, None).expect("plan in parts");
    let pf = PlanFile::open(&plan_path).expect("open");
    assert!(pf.parts() >= 2, "{dtype}: {} parts", pf.parts());
    assert_eq!(pf.dtype(), dtype);
    let mem = Plan::new(
        ix,
        shape,
        dtype,
        &AssembleOptions {
            memory_budget: 1 << 30,
            ..o.clone()
        },
        None,
    )
    .expect("plan in memory");
    (pf, mem)
}

/// Complex plans in parts (issue 22 on issue 24's plans): refilled from
/// complex128 files (raw, `.npy` little- and big-endian) and from float64
/// ones, byte for byte what an in-memory plan's refill and a Builder write,
/// in every layout, for complex128 and complex64.
#[test]
fn complex_plans_in_parts() {
    use coo_assembler::element::Complex;
    let (dir, tmp) = work_dirs();
    let shape = [3000u64, 3000];
    let n = 150_000;
    // In element order: these plans read windows (check_case covers both).
    let c = local_coords(&shape, n, 5);
    let ix: Vec<&[u32]> = c.iter().map(Vec::as_slice).collect();
    let (re, im) = (values(n, 1), values(n, 2));
    let le: Vec<u8> = re
        .iter()
        .zip(&im)
        .flat_map(|(a, b)| [a.to_le_bytes(), b.to_le_bytes()].concat())
        .collect();
    let be: Vec<u8> = re
        .iter()
        .zip(&im)
        .flat_map(|(a, b)| [a.to_be_bytes(), b.to_be_bytes()].concat())
        .collect();
    let files = [
        ("raw.c128", le.clone()),
        ("le.npy", npy("<c16", n, &le)),
        ("be.npy", npy(">c16", n, &be)),
    ];
    for (dtype, layout) in [
        (DType::C128, OutputLayout::Csr),
        (DType::C128, OutputLayout::Coo),
        (DType::C64, OutputLayout::Csc),
    ] {
        let o = opts(layout, 8 << 20, 2, &tmp);
        let (pf, mem) = both_plans(&ix, &shape, dtype, &o, dir.path());
        // The Builder's file for the same contributions.
        let mut bld = Builder::new(&shape, dtype, sorted(&o)).expect("builder");
        for k in 0..n {
            let v = Complex::new(re[k], im[k]);
            bld.push(&[c[0][k] as u64, c[1][k] as u64], v)
                .expect("push");
        }
        let bp = dir.path().join("builder.hrry");
        bld.finish(&bp).expect("finish");
        let want = {
            let f = HurrayFile::open(&bp).expect("builder file");
            let t = f.only_tensor_view().expect("tensor");
            t.values_bytes().to_vec()
        };
        let mut sources: Vec<(String, Vec<u8>)> = files
            .iter()
            .map(|(name, b)| (name.to_string(), b.clone()))
            .collect();
        if dtype == DType::C128 {
            // Real values into a complex plan: imaginary parts 0.
            let only_re: Vec<u8> = re.iter().flat_map(|x| x.to_le_bytes()).collect();
            sources.push(("re.npy".into(), npy("<f8", n, &only_re)));
        } else {
            // Raw files hold the plan's type: complex64 here.
            sources.retain(|(name, _)| name.ends_with(".npy"));
        }
        for (name, bytes) in &sources {
            let vp = dir.path().join(name);
            std::fs::write(&vp, bytes).expect("values");
            let (a, b) = (dir.path().join("a.hrry"), dir.path().join("b.hrry"));
            let s = pf.refill_file(&vp, &a, &[], &o).expect("refill in parts");
            assert_eq!((s.dtype, s.parts), (dtype, pf.parts()));
            mem.refill_file(&vp, &b, &[]).expect("refill in memory");
            let fa = std::fs::read(&a).expect("a");
            assert!(
                fa == std::fs::read(&b).expect("b"),
                "{dtype} {layout} {name}"
            );
            let f = HurrayFile::open(&a).expect("a");
            let t = f.only_tensor_view().expect("tensor");
            if name.as_str() == "re.npy" {
                // Every imaginary part is +0.
                assert!(t.values_bytes().chunks(16).all(|v| v[8..] == [0u8; 8]));
            } else {
                assert!(
                    t.values_bytes() == want.as_slice(),
                    "{dtype} {layout} {name}"
                );
            }
        }
    }
    assert!(entries_in(&tmp).is_empty(), "spill files left behind");
}

/// Bool and half-width float plans in parts (every value type is
/// planned): a bool plan refilled from raw bytes (0 or 1, the plan's
/// type) and from a NumPy bool `.npy`, an f16 and a bf16 plan from f64
/// and f32 `.npy` files, each byte for byte what an in-memory plan's
/// refill writes and its values a Builder's; a raw bool byte that is
/// neither 0 nor 1 is refused, naming the contribution.
#[test]
fn bool_and_half_plans_in_parts() {
    let (dir, tmp) = work_dirs();
    let shape = [3000u64, 3000];
    let n = 150_000;
    // In element order: these plans read windows (check_case covers both).
    let c = local_coords(&shape, n, 9);
    let ix: Vec<&[u32]> = c.iter().map(Vec::as_slice).collect();
    let f = values(n, 3);
    let bools: Vec<u8> = f.iter().map(|x| u8::from(*x > 100.0)).collect();
    let f64s: Vec<u8> = f.iter().flat_map(|x| (x / 1e16).to_le_bytes()).collect();
    let f32s: Vec<u8> = f.iter().flat_map(|x| (*x as f32).to_le_bytes()).collect();
    let cases: [(DType, OutputLayout, &str, Vec<u8>); 4] = [
        (DType::Bool, OutputLayout::Csr, "raw.bool", bools.clone()),
        (
            DType::Bool,
            OutputLayout::Coo,
            "b.npy",
            npy("|b1", n, &bools),
        ),
        (
            DType::F16,
            OutputLayout::Csc,
            "f8.npy",
            npy("<f8", n, &f64s),
        ),
        (
            DType::BF16,
            OutputLayout::Csr,
            "f4.npy",
            npy("<f4", n, &f32s),
        ),
    ];
    for (dtype, layout, name, bytes) in cases {
        let o = opts(layout, 8 << 20, 2, &tmp);
        let (pf, mem) = both_plans(&ix, &shape, dtype, &o, dir.path());
        let vp = dir.path().join(name);
        std::fs::write(&vp, &bytes).expect("values");
        let (a, b) = (dir.path().join("a.hrry"), dir.path().join("b.hrry"));
        let s = pf.refill_file(&vp, &a, &[], &o).expect("refill in parts");
        assert_eq!(s.dtype, dtype);
        mem.refill_file(&vp, &b, &[]).expect("refill in memory");
        assert!(
            std::fs::read(&a).expect("a") == std::fs::read(&b).expect("b"),
            "{dtype} {layout} {name}"
        );
        // A Builder's values for the same contributions.
        let mut bld = Builder::new(&shape, dtype, sorted(&o)).expect("builder");
        for k in 0..n {
            let at = [c[0][k] as u64, c[1][k] as u64];
            match dtype {
                DType::Bool => bld.push(&at, bools[k] == 1),
                DType::F16 => bld.push(&at, f[k] / 1e16),
                _ => bld.push(&at, f[k] as f32),
            }
            .expect("push");
        }
        let bp = dir.path().join("builder.hrry");
        bld.finish(&bp).expect("finish");
        let (ga, gb) = (
            HurrayFile::open(&a).expect("a"),
            HurrayFile::open(&bp).expect("builder file"),
        );
        let (ta, tb) = (
            ga.only_tensor_view().expect("a"),
            gb.only_tensor_view().expect("b"),
        );
        assert!(
            ta.values_bytes() == tb.values_bytes(),
            "{dtype} {layout} {name}: not the Builder's values"
        );
    }
    // A raw bool file holds 0 or 1 per contribution.
    let o = opts(OutputLayout::Csr, 8 << 20, 1, &tmp);
    let pf = PlanFile::open(dir.path().join("bool.plan")).expect("open");
    let mut bad = bools.clone();
    bad[1234] = 2;
    let vp = dir.path().join("bad.bool");
    std::fs::write(&vp, &bad).expect("values");
    let e = pf
        .refill_file(&vp, &dir.path().join("c.hrry"), &[], &o)
        .expect_err("a byte of 2 is no bool");
    assert!(e.to_string().contains("1234"), "{e}");
    assert!(entries_in(&tmp).is_empty(), "spill files left behind");
}

/// `o` with the builder's in-memory kernel off: the reference is the
/// sorters' path.
fn sorted(o: &AssembleOptions) -> AssembleOptions {
    AssembleOptions {
        in_memory_kernel: false,
        ..o.clone()
    }
}

/// Planning in parts and refilling from a plan file go through the
/// caller's `IoCtx` (spills, the plan, the output): a fault at any file
/// operation is an error, and leaves no plan or output file and nothing in
/// the spill folder; a run the fault did not reach writes the same bytes.
#[test]
fn plans_in_parts_fail_cleanly_at_every_file_operation() {
    // Spilled by part, and read by window.
    fail_cleanly(false);
    fail_cleanly(true);
}

fn fail_cleanly(local: bool) {
    use coo_assembler::internals::fs::ctx::{FaultKind, FaultMode, FaultPlan, IoCtx};
    let (dir, tmp) = work_dirs();
    let shape = [3000u64, 3000];
    let n = 150_000;
    let c = if local {
        local_coords(&shape, n, 11)
    } else {
        coords(&shape, n, 11)
    };
    let ix: Vec<&[u32]> = c.iter().map(Vec::as_slice).collect();
    let vpath = dir.path().join("v.f64");
    write_f64s(&vpath, &values(n, 5));
    let with_io = |io: IoCtx| AssembleOptions {
        io,
        ..opts(OutputLayout::Csr, 8 << 20, 2, &tmp)
    };
    let fault = |at: u64| FaultPlan {
        at,
        mode: FaultMode::Once,
        kind: FaultKind::Io,
        only_op: None,
    };
    // The reference runs, counting the operations.
    let (plan_ref, out_ref) = (dir.path().join("ref.plan"), dir.path().join("ref.hrry"));
    let io = IoCtx::with_faults(fault(u64::MAX));
    let s = PlanFile::create(
        &ix,
        &shape,
        DType::F64,
        &with_io(io.clone()),
        &plan_ref,
        None,
    )
    .expect("plan");
    assert!(s.parts > 1 && s.windowed == local, "{s:?}");
    let plan_ops = io.ops();
    let pf = PlanFile::open(&plan_ref).expect("open");
    let io = IoCtx::with_faults(fault(u64::MAX));
    pf.refill_file(&vpath, &out_ref, &[], &with_io(io.clone()))
        .expect("refill");
    let refill_ops = io.ops();
    let (good_plan, good_out) = (
        std::fs::read(&plan_ref).expect("plan bytes"),
        std::fs::read(&out_ref).expect("out bytes"),
    );
    let (p, o) = (dir.path().join("K.plan"), dir.path().join("K.hrry"));
    let mut failed = 0;
    for at in 0..plan_ops {
        let io = IoCtx::with_faults(fault(at));
        match PlanFile::create(&ix, &shape, DType::F64, &with_io(io.clone()), &p, None) {
            Err(e) => {
                failed += 1;
                // After the rename only the folder's fsync can fail: the
                // file is then whole, its durability unknown (fs/output).
                if e.to_string().contains("fsync directory") {
                    assert!(std::fs::read(&p).expect("plan") == good_plan, "op {at}");
                    std::fs::remove_file(&p).expect("rm");
                } else {
                    assert!(!p.exists(), "op {at}: {e}: a plan file was left");
                }
            }
            Ok(_) => {
                assert!(std::fs::read(&p).expect("plan") == good_plan, "op {at}");
                std::fs::remove_file(&p).expect("rm");
            }
        }
        assert!(
            entries_in(&tmp).is_empty(),
            "op {at}: {:?}",
            entries_in(&tmp)
        );
    }
    for at in 0..refill_ops {
        let io = IoCtx::with_faults(fault(at));
        match pf.refill_file(&vpath, &o, &[], &with_io(io.clone())) {
            Err(e) => {
                failed += 1;
                if e.to_string().contains("fsync directory") {
                    assert!(
                        std::fs::read(&o).expect("out") == good_out,
                        "refill op {at}"
                    );
                    std::fs::remove_file(&o).expect("rm");
                } else {
                    assert!(!o.exists(), "refill op {at}: {e}: an output was left");
                }
            }
            Ok(_) => {
                assert!(
                    std::fs::read(&o).expect("out") == good_out,
                    "refill op {at}"
                );
                std::fs::remove_file(&o).expect("rm");
            }
        }
        assert!(entries_in(&tmp).is_empty(), "refill op {at}");
    }
    eprintln!(
        "{plan_ops} planning and {refill_ops} refill operations, {failed} faults failed the run"
    );
    // Spills are written through the context: most faults fail the run.
    assert!(failed as u64 > (plan_ops + refill_ops) / 2, "{failed}");
}
