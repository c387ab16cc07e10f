//! Complex values (complex64, complex128): assembled as their two parts,
//! each summed exactly; every layout, the duplicate policies that have a
//! meaning for them, spills, and the files the reference reader reads.

use coo_assembler::{
    AssembleOptions, Builder, DType, Error, HurrayFile, Value, element::Complex,
    options::DuplicatePolicy, options::OutputLayout,
};
use std::collections::BTreeMap;

fn opts(layout: OutputLayout, dir: &std::path::Path) -> AssembleOptions {
    AssembleOptions {
        layout,
        temp_dir: Some(dir.to_path_buf()),
        ..AssembleOptions::default()
    }
}

/// Entries of the file's only tensor as (row, col) -> (re, im).
fn entries(path: &std::path::Path) -> BTreeMap<(u64, u64), (f64, f64)> {
    let f = HurrayFile::open(path).unwrap();
    let t = f.only_tensor_view().unwrap();
    let mut m = BTreeMap::new();
    t.try_for_each(|idx, v| {
        let Value::Complex(re, im) = v else {
            panic!("not complex: {v:?}")
        };
        m.insert((idx[0], idx[1]), (re, im));
        Ok::<(), Error>(())
    })
    .unwrap();
    m
}

#[test]
fn complex128_sums_each_part_exactly_in_every_layout() {
    let dir = tempfile::tempdir().unwrap();
    for layout in [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc] {
        let mut b = Builder::new(&[3, 4], DType::C128, opts(layout, dir.path())).unwrap();
        // Real part: 1e16 + 1 - 1e16 = 1 only when summed exactly.
        b.push(&[0, 1], Complex::new(1e16, 0.5)).unwrap();
        b.push(&[0, 1], Complex::new(1.0, 0.25)).unwrap();
        b.push(&[0, 1], Complex::new(-1e16, 0.0)).unwrap();
        // A real value goes in with imaginary part 0.
        b.push(&[2, 3], 2.5f64).unwrap();
        // Only an imaginary part.
        b.push(&[1, 0], Complex::new(0.0f64, -3.0)).unwrap();
        let out = dir.path().join(format!("{layout}.hrry"));
        let s = b.finish(&out).unwrap();
        assert_eq!((s.contributions, s.nnz), (5, 3), "{layout}");
        let got = entries(&out);
        let want: BTreeMap<_, _> = [
            ((0, 1), (1.0, 0.75)),
            ((1, 0), (0.0, -3.0)),
            ((2, 3), (2.5, 0.0)),
        ]
        .into_iter()
        .collect();
        assert_eq!(got, want, "{layout}");
        let f = HurrayFile::open(&out).unwrap();
        let t = f.only_tensor_view().unwrap();
        assert_eq!(t.dtype(), DType::C128);
        assert_eq!(t.shape(), &[3, 4]);
        assert_eq!(t.get(&[0, 1]).unwrap(), Value::Complex(1.0, 0.75));
        assert_eq!(t.get(&[0, 0]).unwrap(), Value::Complex(0.0, 0.0));
    }
}

#[test]
fn complex64_rounds_each_exact_part_sum_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(&[2, 2], DType::C64, opts(OutputLayout::Coo, dir.path())).unwrap();
    // f64 parts into complex64: summed exactly, rounded to f32 once.
    let tiny = 2f64.powi(-30);
    b.push(&[0, 0], Complex::new(1.0f64, -1.0)).unwrap();
    b.push(&[0, 0], Complex::new(tiny, -tiny)).unwrap();
    b.push(&[0, 0], Complex::new(tiny, -tiny)).unwrap();
    b.push(&[1, 1], Complex::new(0.1f32, 0.2f32)).unwrap();
    let out = dir.path().join("c64.hrry");
    b.finish(&out).unwrap();
    let got = entries(&out);
    let r = (1.0 + 2.0 * tiny) as f32 as f64;
    assert_eq!(got[&(0, 0)], (r, -r));
    assert_eq!(got[&(1, 1)], (0.1f32 as f64, 0.2f32 as f64));
}

/// Spilled runs and merge passes give the bytes an in-memory assembly
/// gives, with the duplicate policies complex values take.
#[test]
fn spilled_assembly_matches_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let shape = [40u64, 30];
    let mut x = 0x9e3779b97f4a7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let contribs: Vec<([u64; 2], Complex<f64>)> = (0..30_000)
        .map(|_| {
            let r = next();
            (
                [r % 40, (r >> 16) % 30],
                Complex::new(
                    (r >> 32) as f64 * 0.37 - 1e3,
                    ((r >> 20) % 1000) as f64 - 500.0,
                ),
            )
        })
        .collect();
    for dup in [DuplicatePolicy::Sum, DuplicatePolicy::Last] {
        for layout in [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc] {
            let mut files = Vec::new();
            for tiny in [false, true] {
                let mut o = opts(layout, dir.path());
                o.duplicates = dup;
                o.threads = 2;
                if tiny {
                    o.memory_budget = match Builder::new(
                        &shape,
                        DType::C128,
                        AssembleOptions {
                            memory_budget: 1,
                            ..o.clone()
                        },
                    ) {
                        Err(Error::BudgetTooSmall { minimum, .. }) => minimum,
                        other => panic!("{:?}", other.map(|_| ())),
                    };
                }
                let mut b = Builder::new(&shape, DType::C128, o).unwrap();
                for (i, v) in &contribs {
                    b.push(i, *v).unwrap();
                }
                let out = dir.path().join(format!("s{tiny}.hrry"));
                let s = b.finish(&out).unwrap();
                if tiny {
                    assert!(s.runs_spilled >= 2, "{s:?}");
                }
                files.push(std::fs::read(&out).unwrap());
                if !tiny {
                    // The values against a sum (last) kept per coordinate.
                    let got = entries(&out);
                    let mut want: BTreeMap<(u64, u64), Vec<Complex<f64>>> = BTreeMap::new();
                    for (i, v) in &contribs {
                        want.entry((i[0], i[1])).or_default().push(*v);
                    }
                    assert_eq!(got.len(), want.len());
                    for (k, vs) in want {
                        let (re, im) = got[&k];
                        match dup {
                            DuplicatePolicy::Last => {
                                let l = vs[vs.len() - 1];
                                assert_eq!((re, im), (l.re, l.im));
                            }
                            _ => {
                                // Integers and multiples of 0.37 far from
                                // 2^53: check against a compensated sum.
                                let (sr, si) =
                                    vs.iter().fold((0.0, 0.0), |a, v| (a.0 + v.re, a.1 + v.im));
                                assert!((re - sr).abs() <= 1e-9 * sr.abs().max(1.0), "{k:?}");
                                assert_eq!(im, si, "{k:?}");
                            }
                        }
                    }
                }
            }
            assert!(files[0] == files[1], "{dup} {layout}: spilled bytes differ");
        }
    }
}

#[test]
fn policies_complex_values_refuse() {
    for dup in [DuplicatePolicy::Min, DuplicatePolicy::Max] {
        let o = AssembleOptions {
            duplicates: dup,
            ..AssembleOptions::default()
        };
        let e = Builder::new(&[2, 2], DType::C128, o).err().unwrap();
        assert!(matches!(e, Error::InvalidOptions(_)), "{e}");
        assert!(e.to_string().contains("no order"), "{e}");
    }
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(OutputLayout::Csr, dir.path());
    o.duplicates = DuplicatePolicy::Error;
    let mut b = Builder::new(&[2, 2], DType::C128, o).unwrap();
    b.push(&[1, 0], Complex::new(1.0, 1.0)).unwrap();
    b.push(&[1, 0], Complex::new(1.0, 1.0)).unwrap();
    let e = b.finish(dir.path().join("dup.hrry")).err().unwrap();
    match e {
        Error::DuplicateCoordinate { coordinate } => assert_eq!(coordinate, vec![1, 0]),
        e => panic!("{e}"),
    }
    // A complex value into a real tensor, NaN under a policy that refuses it.
    let mut b = Builder::new(&[2, 2], DType::F64, AssembleOptions::default()).unwrap();
    let e = b.push(&[0, 0], Complex::new(1.0, 0.0)).err().unwrap();
    assert!(
        e.to_string()
            .contains("complex value cannot go into a real tensor"),
        "{e}"
    );
    let o = AssembleOptions {
        non_finite: coo_assembler::options::NonFinitePolicy::RejectNan,
        ..AssembleOptions::default()
    };
    let mut b = Builder::new(&[2, 2], DType::C64, o).unwrap();
    let e = b.push(&[0, 0], Complex::new(1.0, f64::NAN)).err().unwrap();
    assert!(
        matches!(
            e,
            Error::InvalidValue {
                contribution: 0,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn drop_zeros_drops_a_complex_entry_only_when_both_parts_are_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(OutputLayout::Coo, dir.path());
    o.drop_zeros = true;
    let mut b = Builder::new(&[2, 2], DType::C128, o).unwrap();
    b.push(&[0, 0], Complex::new(1.0, 2.0)).unwrap();
    b.push(&[0, 0], Complex::new(-1.0, -2.0)).unwrap();
    b.push(&[0, 1], Complex::new(1.0, 2.0)).unwrap();
    b.push(&[0, 1], Complex::new(-1.0, 0.0)).unwrap();
    b.push(&[1, 1], Complex::new(0.0, 0.0)).unwrap();
    let out = dir.path().join("dz.hrry");
    let s = b.finish(&out).unwrap();
    assert_eq!((s.nnz, s.dropped_zeros), (1, 2));
    assert_eq!(entries(&out)[&(0, 1)], (0.0, 2.0));
}

#[test]
fn element_matrices_and_statistics() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(&[3, 3], DType::C128, opts(OutputLayout::Csr, dir.path())).unwrap();
    let ke: Vec<Complex<f64>> = (0..4)
        .map(|i| Complex::new(i as f64, -(i as f64)))
        .collect();
    b.push_element(&[0, 2], &ke).unwrap();
    b.push_element(&[0, 2], &ke).unwrap();
    b.push(&[1, 1], Complex::new(f64::INFINITY, 0.0)).unwrap();
    let out = dir.path().join("el.hrry");
    let s = b.finish(&out).unwrap();
    assert_eq!((s.contributions, s.nnz), (9, 5));
    let got = entries(&out);
    assert_eq!(got[&(0, 2)], (2.0, -2.0));
    assert_eq!(got[&(2, 2)], (6.0, -6.0));
    let f = HurrayFile::open(&out).unwrap();
    let st = *f.only_tensor_view().unwrap().statistics().unwrap();
    assert_eq!(st.nnz, 5);
    assert!(st.has_inf && !st.has_nan);
    use coo_assembler::raw::statistics::{VALUE_RANGE_VALID, VALUE_STATS_VALID};
    assert_eq!(
        st.computed_mask & (VALUE_RANGE_VALID | VALUE_STATS_VALID),
        0
    );
}

/// MatrixMarket `complex` input, general and hermitian (the mirror is the
/// conjugate; a diagonal entry must be real); its dtype is complex128.
#[test]
fn matrixmarket_complex_and_hermitian_input() {
    use coo_assembler::input::Source;
    let dir = tempfile::tempdir().unwrap();
    let hermitian = dir.path().join("h.mtx");
    std::fs::write(
        &hermitian,
        "%%MatrixMarket matrix coordinate complex hermitian\n3 3 3\n1 1 2.0 0\n2 1 1.5 -2.5\n3 2 0 1\n",
    )
    .unwrap();
    let src = Source::open(&hermitian, None).unwrap();
    assert_eq!(src.dtype(), Some(DType::C128));
    let out = dir.path().join("h.hrry");
    let s = src
        .assemble_to(&out, None, None, AssembleOptions::default(), |_| {})
        .unwrap();
    assert_eq!(s.nnz, 5);
    let got = entries(&out);
    assert_eq!(got[&(0, 0)], (2.0, 0.0));
    assert_eq!(got[&(1, 0)], (1.5, -2.5));
    assert_eq!(got[&(0, 1)], (1.5, 2.5));
    assert_eq!(got[&(2, 1)], (0.0, 1.0));
    assert_eq!(got[&(1, 2)], (0.0, -1.0));

    let general = dir.path().join("g.mtx");
    std::fs::write(
        &general,
        "%%MatrixMarket matrix coordinate complex general\n2 2 3\n1 2 1e16 1\n1 2 1 0.5\n1 2 -1e16 0\n",
    )
    .unwrap();
    let out = dir.path().join("g.hrry");
    Source::open(&general, None)
        .unwrap()
        .assemble_to(&out, None, None, AssembleOptions::default(), |_| {})
        .unwrap();
    assert_eq!(entries(&out)[&(0, 1)], (1.0, 1.5));

    let bad = dir.path().join("bad.mtx");
    std::fs::write(
        &bad,
        "%%MatrixMarket matrix coordinate complex hermitian\n2 2 1\n1 1 2.0 1.0\n",
    )
    .unwrap();
    let e = Source::open(&bad, None)
        .unwrap()
        .assemble_to(
            &dir.path().join("bad.hrry"),
            None,
            None,
            AssembleOptions::default(),
            |_| {},
        )
        .err()
        .unwrap();
    assert!(e.to_string().contains("diagonal entries are real"), "{e}");
    assert!(e.to_string().contains("line 3"), "{e}");
    // A complex file into a real tensor says what to pass.
    let e = Source::open(&general, None)
        .unwrap()
        .assemble_to(
            &dir.path().join("r.hrry"),
            None,
            Some(DType::F64),
            AssembleOptions::default(),
            |_| {},
        )
        .err()
        .unwrap();
    assert!(e.to_string().contains("complex dtype"), "{e}");
    assert!(!dir.path().join("r.hrry").exists() && !dir.path().join("bad.hrry").exists());
}

/// A PETSc binary matrix read as `MatLoad` of a complex build reads it
/// (32-bit PetscInt): big-endian `[1211216, M, N, nz]`, M row lengths, nz
/// columns row by row, nz (real, imaginary) float64 pairs.
fn read_petsc_complex(path: &std::path::Path) -> BTreeMap<(u64, u64), (f64, f64)> {
    let raw = std::fs::read(path).unwrap();
    let int = |k: usize| i32::from_be_bytes(raw[4 * k..4 * k + 4].try_into().unwrap()) as u64;
    assert_eq!(int(0), 1211216);
    let (m, nz) = (int(1) as usize, int(3) as usize);
    let cols_at = 4 + m;
    let vals_at = 4 * (cols_at + nz);
    assert_eq!(raw.len(), vals_at + 16 * nz, "one 16-byte scalar per entry");
    let f = |at: usize| f64::from_be_bytes(raw[at..at + 8].try_into().unwrap());
    let mut out = BTreeMap::new();
    // `e`: the entry's position in the column and value sections.
    let mut e = 0;
    for i in 0..m {
        for _ in 0..int(4 + i) {
            let j = int(cols_at + e);
            let v = (f(vals_at + 16 * e), f(vals_at + 16 * e + 8));
            assert!(out.insert((i as u64, j), v).is_none());
            e += 1;
        }
    }
    assert_eq!(e, nz);
    out
}

/// Complex tensors export to PETSc (a complex build's scalars) and, from
/// layouts whose order is not the format's (CSC, unsorted by rows), through
/// the bounded reordering, which holds 16-byte values.
#[test]
fn petsc_and_reordered_exports_of_complex_values() {
    use coo_assembler::matrix::export::{ExportOptions, Format, export_file};
    let dir = tempfile::tempdir().unwrap();
    for (dtype, layout) in [
        (DType::C128, OutputLayout::Coo),
        (DType::C128, OutputLayout::Csc),
        (DType::C128, OutputLayout::Csr),
        (DType::C64, OutputLayout::Csc),
    ] {
        let mut b = Builder::new(&[5, 4], dtype, opts(layout, dir.path())).unwrap();
        let mut want = BTreeMap::new();
        for (n, (i, j)) in [(4u64, 3u64), (0, 1), (2, 0), (0, 3), (4, 0), (2, 2)]
            .into_iter()
            .enumerate()
        {
            let v = (n as f64 + 0.5, -(n as f64) * 0.25);
            b.push(&[i, j], Complex::new(v.0, v.1)).unwrap();
            want.insert((i, j), v);
        }
        let h = dir.path().join(format!("{dtype}-{layout}.hrry"));
        b.finish(&h).unwrap();
        let f = HurrayFile::open(&h).unwrap();
        // A small reorder budget: several bands, each row its own.
        let eo = ExportOptions {
            reorder_budget: 48,
            ..ExportOptions::default()
        };
        let p = dir.path().join(format!("{dtype}-{layout}.petsc"));
        let s = export_file(&f, None, Format::Petsc, &p, &eo).unwrap();
        assert_eq!(s.entries, 6);
        assert_eq!(read_petsc_complex(&p), want, "{dtype} {layout}");
        let z = dir.path().join(format!("{dtype}-{layout}.npz"));
        export_file(&f, None, Format::Npz, &z, &eo).unwrap();
        let m = dir.path().join(format!("{dtype}-{layout}.mtx"));
        export_file(&f, None, Format::Mtx, &m, &eo).unwrap();
        let text = std::fs::read_to_string(&m).unwrap();
        assert!(text.starts_with("%%MatrixMarket matrix coordinate complex general"));
    }
    // A complex vector as a PETSc Vec: n pairs, zeros where nothing is stored.
    let mut b = Builder::new(&[4], DType::C128, opts(OutputLayout::Coo, dir.path())).unwrap();
    b.push(&[2], Complex::new(1.5, -2.0)).unwrap();
    let h = dir.path().join("v.hrry");
    b.finish(&h).unwrap();
    let p = dir.path().join("v.petsc");
    export_file(
        &HurrayFile::open(&h).unwrap(),
        None,
        Format::Petsc,
        &p,
        &ExportOptions::default(),
    )
    .unwrap();
    let raw = std::fs::read(&p).unwrap();
    assert_eq!(raw.len(), 8 + 4 * 16);
    assert_eq!(i32::from_be_bytes(raw[..4].try_into().unwrap()), 1211214);
    assert_eq!(i32::from_be_bytes(raw[4..8].try_into().unwrap()), 4);
    let part = |k: usize| f64::from_be_bytes(raw[8 + 8 * k..16 + 8 * k].try_into().unwrap());
    assert_eq!(
        (0..8).map(part).collect::<Vec<_>>(),
        [0.0, 0.0, 0.0, 0.0, 1.5, -2.0, 0.0, 0.0]
    );
}

/// `matvec_complex`: the complex product in every layout, `A x` and
/// `A^T x`, the same bytes for any thread count. Small integer parts make
/// every product and sum exact, so the expected vector (summed here in
/// another order) must match bit for bit.
#[test]
fn matvec_complex_is_the_complex_product_in_every_layout() {
    use coo_assembler::matrix::{Matrix, MatvecOptions, matvec_complex};
    let dir = tempfile::tempdir().unwrap();
    let (rows, cols) = (300u64, 200u64);
    let mut rng = crate::common::Rng::new(0x5eed);
    let mut next = move |m: u64| rng.below(m);
    let small = |v: u64, half: u64| v as f64 - half as f64;
    // More entries than a scatter block (2^18), so several blocks meet.
    let pushes: Vec<(u64, u64, f64, f64)> = (0..300_000)
        .map(|_| {
            let (i, j) = (next(rows), next(cols));
            (i, j, small(next(17), 8), small(next(17), 8))
        })
        .collect();
    let mut a: BTreeMap<(u64, u64), (f64, f64)> = BTreeMap::new();
    for &(i, j, re, im) in &pushes {
        let e = a.entry((i, j)).or_default();
        *e = (e.0 + re, e.1 + im);
    }
    let mut vector = |n: u64| -> Vec<Complex<f64>> {
        (0..n)
            .map(|_| Complex::new(small(next(9), 4), small(next(9), 4)))
            .collect()
    };
    let (x, xt) = (vector(cols), vector(rows));
    let product = |transpose: bool, x: &[Complex<f64>]| {
        let mut y = vec![Complex::new(0.0, 0.0); if transpose { cols } else { rows } as usize];
        for (&(i, j), &(re, im)) in &a {
            let (o, k) = if transpose { (j, i) } else { (i, j) };
            y[o as usize] += Complex::new(re, im) * x[k as usize];
        }
        y
    };
    let (want, want_t) = (product(false, &x), product(true, &xt));
    for layout in [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc] {
        let mut b = Builder::new(&[rows, cols], DType::C128, opts(layout, dir.path())).unwrap();
        for &(i, j, re, im) in &pushes {
            b.push(&[i, j], Complex::new(re, im)).unwrap();
        }
        let path = dir.path().join(format!("mv-{layout}.hrry"));
        b.finish(&path).unwrap();
        let f = HurrayFile::open(&path).unwrap();
        let m = Matrix::of_file(&f, None).unwrap();
        for threads in [Some(1), Some(3)] {
            let o = MatvecOptions {
                threads,
                ..MatvecOptions::default()
            };
            let y = matvec_complex(&m, &x, false, &o).unwrap();
            assert_eq!(y, want, "{layout} A x, threads {threads:?}");
            let y = matvec_complex(&m, &xt, true, &o).unwrap();
            assert_eq!(y, want_t, "{layout} A^T x, threads {threads:?}");
        }
        // A real x (imaginary parts 0) against the complex matrix.
        let xr: Vec<Complex<f64>> = x.iter().map(|v| Complex::new(v.re, 0.0)).collect();
        let y = matvec_complex(&m, &xr, false, &MatvecOptions::default()).unwrap();
        assert_eq!(y, product(false, &xr), "{layout} real x");
    }
}

/// A real matrix times a complex x is its two real products bit for bit;
/// the real `matvec` refuses a complex matrix and names the way out; bad
/// x are refused by name.
#[test]
fn matvec_complex_refusals_and_real_matrices() {
    use coo_assembler::matrix::{Matrix, MatvecOptions, NonFiniteInput, matvec, matvec_complex};
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(&[3, 2], DType::F64, opts(OutputLayout::Coo, dir.path())).unwrap();
    for (i, j, v) in [(0u64, 0u64, 0.1f64), (0, 1, 0.7), (2, 1, -1.3), (1, 0, 2.9)] {
        b.push(&[i, j], v).unwrap();
    }
    let real = dir.path().join("real.hrry");
    b.finish(&real).unwrap();
    let f = HurrayFile::open(&real).unwrap();
    let m = Matrix::of_file(&f, None).unwrap();
    let o = MatvecOptions::default();
    let x = [Complex::new(0.3, -1.1), Complex::new(1.7, 0.9)];
    let y = matvec_complex(&m, &x, false, &o).unwrap();
    let re = matvec(&m, &[0.3, 1.7], false, &o).unwrap();
    let im = matvec(&m, &[-1.1, 0.9], false, &o).unwrap();
    let parts: Vec<(u64, u64)> = y.iter().map(|v| (v.re.to_bits(), v.im.to_bits())).collect();
    let want: Vec<(u64, u64)> = re
        .iter()
        .zip(&im)
        .map(|(r, i)| (r.to_bits(), i.to_bits()))
        .collect();
    assert_eq!(parts, want);

    let err = matvec_complex(&m, &x[..1], false, &o)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("x has 1 elements; the product needs 2"),
        "{err}"
    );
    let bad = [Complex::new(0.0, 0.0), Complex::new(1.0, f64::NAN)];
    let err = matvec_complex(&m, &bad, false, &o).unwrap_err().to_string();
    assert!(err.contains("x[1] = NaN is not finite"), "{err}");
    let allow = MatvecOptions {
        non_finite: NonFiniteInput::Allow,
        ..o
    };
    let y = matvec_complex(&m, &bad, false, &allow).unwrap();
    assert!(
        y[0].im.is_nan() && y[1].re == 0.0 && y[1].im == 0.0,
        "{y:?}"
    );

    let mut b = Builder::new(&[2, 2], DType::C64, opts(OutputLayout::Csr, dir.path())).unwrap();
    b.push(&[1, 0], Complex::new(1.0f32, 2.0)).unwrap();
    let z = dir.path().join("z.hrry");
    b.finish(&z).unwrap();
    let f = HurrayFile::open(&z).unwrap();
    let m = Matrix::of_file(&f, None).unwrap();
    let err = matvec(&m, &[1.0, 1.0], false, &o).unwrap_err().to_string();
    assert!(err.contains("matvec_complex"), "{err}");
    let y = matvec_complex(
        &m,
        &[Complex::new(0.0, 1.0), Complex::new(5.0, 0.0)],
        false,
        &o,
    );
    // (1 + 2i) * i = -2 + i in row 1.
    assert_eq!(
        y.unwrap(),
        [Complex::new(0.0, 0.0), Complex::new(-2.0, 1.0)]
    );
}
