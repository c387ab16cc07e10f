//! `skip_negative`: contributions with a negative index skipped and
//! counted by the signed pushes, the in-memory kernel (a matrix's
//! passes skip them), the arrays-to-file path and the C and Python front
//! ends' library calls; without it, the error of today.

use coo_assembler::internals::assemble::direct::{self, Assembled};
use coo_assembler::options::{DuplicatePolicy, OutputLayout};
use coo_assembler::{AssembleOptions, Builder, DType, Plan};
use std::path::Path;

fn opts(skip: bool, dir: &Path) -> AssembleOptions {
    AssembleOptions {
        skip_negative: skip,
        temp_dir: Some(dir.to_path_buf()),
        ..AssembleOptions::default()
    }
}

/// A small FE-like matrix: 40 two-node elements on 41 dofs, dofs marked
/// removed (Dirichlet) as -1 in a few of them.
fn elements() -> Vec<([i64; 3], [f64; 9])> {
    (0..40i64)
        .map(|e| {
            let mut d = [e, e + 1, (e + 7) % 41];
            if e % 9 == 0 {
                d[1] = -1;
            }
            if e == 13 {
                d = [-1, -2, -3];
            }
            let k = std::array::from_fn(|i| (e as f64 + 1.0) * (i as f64 - 3.5) / 7.0);
            (d, k)
        })
        .collect()
}

#[test]
fn push_element_signed_skips_negative_rows_and_columns() {
    let dir = tempfile::tempdir().unwrap();
    for dup in [DuplicatePolicy::Sum, DuplicatePolicy::Last] {
        let o = AssembleOptions {
            duplicates: dup,
            ..opts(true, dir.path())
        };
        let mut b = Builder::new(&[41, 41], DType::F64, o.clone()).unwrap();
        let mut want = Builder::new(&[41, 41], DType::F64, o).unwrap();
        let (mut skipped, mut total) = (0u64, 0u64);
        for (d, k) in elements() {
            b.push_element_signed(&d, &k).unwrap();
            total += 9;
            // The same entries, pushed one by one without the skipped ones.
            for a in 0..3 {
                for c in 0..3 {
                    if d[a] < 0 || d[c] < 0 {
                        skipped += 1;
                    } else {
                        want.push(&[d[a] as u64, d[c] as u64], k[a * 3 + c])
                            .unwrap();
                    }
                }
            }
        }
        let (p, q) = (dir.path().join("got.hrry"), dir.path().join("want.hrry"));
        let s = b.finish(&p).unwrap();
        let w = want.finish(&q).unwrap();
        assert!(skipped > 9, "the case skips entries");
        assert_eq!((s.contributions, s.skipped_negative), (total, skipped));
        assert_eq!((w.contributions, w.skipped_negative), (total - skipped, 0));
        assert_eq!(s.nnz, w.nnz);
        assert_eq!(
            std::fs::read(&p).unwrap(),
            std::fs::read(&q).unwrap(),
            "{dup:?}"
        );
    }
}

#[test]
fn every_signed_push_skips_and_counts() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(&[5, 5], DType::F64, opts(true, dir.path())).unwrap();
    b.push_signed(&[1, 2], 1.0).unwrap();
    b.push_signed(&[-1, 2], 9.0).unwrap();
    b.push_many_signed(&[0, 0, 3, -4, 4, 4], &[2.0, 9.0, 3.0])
        .unwrap();
    b.push_coo_signed(&[-5, 1], &[0, 2], &[9.0, 0.5]).unwrap();
    let mut p = b.pusher().unwrap();
    p.push_signed(&[2, -2], 9.0).unwrap();
    p.push_element_signed(&[3, -1], &[4.0, 9.0, 9.0, 9.0])
        .unwrap();
    assert_eq!(p.count(), 5);
    drop(p);
    let out = dir.path().join("k.hrry");
    let s = b.finish(&out).unwrap();
    assert_eq!((s.contributions, s.skipped_negative, s.nnz), (12, 7, 4));
    let f = coo_assembler::HurrayFile::open(&out).unwrap();
    let t = f.only_tensor().unwrap();
    let got: Vec<_> = t.iter().map(|(i, v)| (i.to_vec(), v)).collect();
    use coo_assembler::Value::Float;
    assert_eq!(
        got,
        vec![
            (vec![0, 0], Float(2.0)),
            (vec![1, 2], Float(1.5)),
            (vec![3, 3], Float(4.0)),
            (vec![4, 4], Float(3.0)),
        ]
    );
}

#[test]
fn without_the_option_a_negative_index_is_the_error_of_today() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(&[5, 5], DType::F64, opts(false, dir.path())).unwrap();
    b.push_signed(&[1, 2], 1.0).unwrap();
    let e = b.push_signed(&[1, -3], 1.0).unwrap_err();
    assert!(
        e.to_string()
            .contains("contribution 1: index -3 in dimension 1 is negative; to skip the contributions of negative (removed) indices, set the option skip_negative"),
        "{e}"
    );
    let e = b.push_many_signed(&[0, 0, -7, 1], &[1.0, 1.0]).unwrap_err();
    assert!(
        e.to_string()
            .contains("contribution 2: index -7 in dimension 0 is negative; to skip the contributions of negative (removed) indices, set the option skip_negative"),
        "{e}"
    );
    // A negative dof refuses the whole element: nothing of it is pushed.
    let e = b
        .push_element_signed(&[0, -1], &[1.0, 1.0, 1.0, 1.0])
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("index -1 in dimension 0 is negative"),
        "{e}"
    );
    let s = b.finish(dir.path().join("k.hrry")).unwrap();
    assert_eq!((s.contributions, s.skipped_negative, s.nnz), (2, 0, 2));
    // The same message through the arrays path.
    let rows: [i32; 2] = [0, -2];
    let cols: [i32; 2] = [1, 1];
    let e = direct::assemble_arrays_to_file(
        &[5, 5],
        DType::F64,
        &[&rows[..], &cols[..]],
        &[1.0, 2.0],
        &dir.path().join("a.hrry"),
        &opts(false, dir.path()),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("contribution 1: index -2 in dimension 0 is negative; to skip the contributions of negative (removed) indices, set the option skip_negative"),
        "{e}"
    );
}

#[test]
fn arrays_to_file_skips_through_the_builder_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let n = 5000usize;
    let rows: Vec<i64> = (0..n).map(|i| ((i * 37) % 211) as i64 - 11).collect();
    let cols: Vec<i64> = (0..n)
        .map(|i| ((i * 53) % 199) as i64 - (i % 3) as i64)
        .collect();
    let vals: Vec<f64> = (0..n).map(|i| (i as f64).sin() * 1e3).collect();
    let shape = [200u64, 200];
    let o = opts(true, dir.path());
    let got = dir.path().join("got.hrry");
    let s = direct::assemble_arrays_to_file(
        &shape,
        DType::F64,
        &[&rows[..], &cols[..]],
        &vals,
        &got,
        &o,
    )
    .unwrap();
    // The reference: the kept contributions only, through the kernel.
    let keep: Vec<usize> = (0..n).filter(|&i| rows[i] >= 0 && cols[i] >= 0).collect();
    let kr: Vec<i64> = keep.iter().map(|&i| rows[i]).collect();
    let kc: Vec<i64> = keep.iter().map(|&i| cols[i]).collect();
    let kv: Vec<f64> = keep.iter().map(|&i| vals[i]).collect();
    let want = dir.path().join("want.hrry");
    let w = direct::assemble_arrays_to_file(
        &shape,
        DType::F64,
        &[&kr[..], &kc[..]],
        &kv,
        &want,
        &opts(false, dir.path()),
    )
    .unwrap();
    assert_eq!(s.skipped_negative, (n - keep.len()) as u64);
    assert!(s.skipped_negative > 0);
    assert_eq!(s.contributions, n as u64);
    assert_eq!(w.contributions, keep.len() as u64);
    assert_eq!(std::fs::read(&got).unwrap(), std::fs::read(&want).unwrap());

    // The builder's signed pushes give the same bytes.
    let mut b = Builder::new(&shape, DType::F64, o.clone()).unwrap();
    for i in 0..n {
        b.push_signed(&[rows[i], cols[i]], vals[i]).unwrap();
    }
    let built = dir.path().join("built.hrry");
    let bs = b.finish(&built).unwrap();
    assert_eq!(bs.skipped_negative, s.skipped_negative);
    assert_eq!(std::fs::read(&got).unwrap(), std::fs::read(&built).unwrap());
}

/// The in-memory kernel skips a matrix's negative indices itself (no
/// detour through the builder): in any layout, for signed index arrays of
/// both widths, with chunks that hold nothing but skipped contributions,
/// the same arrays as the kernel of the pre-masked ones, and the count.
#[test]
fn the_in_memory_kernel_skips_a_matrixs_negative_indices() {
    let dir = tempfile::tempdir().unwrap();
    let n = 20_000usize;
    // Every 7th row and every 5th column removed; contributions 3000..6000
    // all removed (whole chunks of nothing).
    let rows: Vec<i64> = (0..n)
        .map(|i| {
            let r = ((i * 37) % 301) as i64;
            if r % 7 == 3 || (3000..6000).contains(&i) {
                -1
            } else {
                r
            }
        })
        .collect();
    let cols: Vec<i64> = (0..n)
        .map(|i| {
            let c = ((i * 53) % 299) as i64;
            if c % 5 == 1 { -(c + 1) } else { c }
        })
        .collect();
    let vals: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let keep: Vec<usize> = (0..n).filter(|&i| rows[i] >= 0 && cols[i] >= 0).collect();
    let kr: Vec<i64> = keep.iter().map(|&i| rows[i]).collect();
    let kc: Vec<i64> = keep.iter().map(|&i| cols[i]).collect();
    let kv: Vec<f64> = keep.iter().map(|&i| vals[i]).collect();
    let shape = [301u64, 299];
    for layout in [OutputLayout::Csr, OutputLayout::Csc, OutputLayout::Coo] {
        let mut o = opts(true, dir.path());
        o.layout = layout;
        let p = direct::plan(&shape, DType::F64, n as u64, &o)
            .unwrap()
            .with_chunk(1000);
        let got: Assembled<f64, i64> = p
            .assemble(&[&rows[..], &cols[..]], &vals, None)
            .unwrap()
            .expect("the kernel takes the arrays");
        let got32: Assembled<f64, i32> = {
            let (r32, c32): (Vec<i32>, Vec<i32>) = rows
                .iter()
                .zip(&cols)
                .map(|(&r, &c)| (r as i32, c as i32))
                .unzip();
            p.assemble(&[&r32[..], &c32[..]], &vals, None)
                .unwrap()
                .unwrap()
        };
        let mut o_masked = o.clone();
        o_masked.skip_negative = false;
        let q = direct::plan(&shape, DType::F64, kv.len() as u64, &o_masked).unwrap();
        let want: Assembled<f64, i64> =
            q.assemble(&[&kr[..], &kc[..]], &kv, None).unwrap().unwrap();
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got.values), bits(&want.values), "{layout:?}");
        assert_eq!(got.indices, want.indices, "{layout:?}");
        assert_eq!(got.pointers, want.pointers, "{layout:?}");
        assert_eq!(got.skipped_negative, (n - keep.len()) as u64, "{layout:?}");
        assert_eq!(bits(&got32.values), bits(&want.values), "{layout:?} i32");
        assert_eq!(got32.skipped_negative, got.skipped_negative);
    }
    // A bad index among the kept ones is still the error it was, named
    // by its contribution; the skipped ones before it are not errors.
    let mut bad_cols = cols.clone();
    bad_cols[n - 1] = 299;
    let p = direct::plan(&shape, DType::F64, n as u64, &opts(true, dir.path())).unwrap();
    let Err(e) = p.assemble::<i64, f64, f64, i64>(&[&rows[..], &bad_cols[..]], &vals, None) else {
        panic!("an index beyond its extent is an error");
    };
    assert!(
        e.to_string().contains(&format!("contribution {}", n - 1)),
        "{e}"
    );
    // Rank 3 (a packed key) still leaves negative indices to the builder.
    let t: Vec<i64> = vec![0, -1, 2];
    let p = direct::plan(&[3, 3, 3], DType::F64, 3, &opts(true, dir.path())).unwrap();
    let r: Option<Assembled<f64, i64>> = p
        .assemble(&[&t[..], &t[..], &t[..]], &[1.0; 3], None)
        .unwrap();
    assert!(r.is_none());
}

/// Plans take `skip_negative` as an assembly does: a contribution with a
/// negative index has no position in the plan, its value is read and
/// ignored, and every refill (in memory, saved and loaded, from element
/// matrices, in parts on disk whether read by window or spilled) gives the
/// values a `Builder` with `skip_negative` gives.
#[test]
fn plans_skip_negative_as_an_assembly_does() {
    use coo_assembler::plan::PlanFile;
    let dir = tempfile::tempdir().unwrap();
    let els = elements();
    let dofs: Vec<i64> = els.iter().flat_map(|(d, _)| *d).collect();
    let ke: Vec<f64> = els.iter().flat_map(|(_, k)| *k).collect();
    let (mut rows, mut cols) = (Vec::new(), Vec::new());
    for (d, _) in &els {
        for a in 0..3 {
            for c in 0..3 {
                rows.push(d[a]);
                cols.push(d[c]);
            }
        }
    }
    for layout in [OutputLayout::Csr, OutputLayout::Coo] {
        let o = AssembleOptions {
            layout,
            ..opts(true, dir.path())
        };
        let mut b = Builder::new(&[41, 41], DType::F64, o.clone()).unwrap();
        for (d, k) in &els {
            b.push_element_signed(d, k).unwrap();
        }
        let want_path = dir.path().join("want.hrry");
        b.finish(&want_path).unwrap();
        let want = std::fs::read(&want_path).unwrap();

        let p = Plan::new(&[&rows[..], &cols[..]], &[41, 41], DType::F64, &o, None).unwrap();
        assert_eq!(p.contributions(), ke.len());
        let pe = Plan::for_elements(&dofs, 3, [41, 41], DType::F64, &o, None).unwrap();
        assert_eq!(pe.digest(), p.digest());
        let saved = dir.path().join("p.plan");
        p.save(&saved).unwrap();
        let loaded = Plan::load(&saved).unwrap();
        assert_eq!(loaded.contributions(), ke.len());
        let vals = dir.path().join("v.f64");
        std::fs::write(&vals, bytemuck::cast_slice::<f64, u8>(&ke)).unwrap();
        for (name, plan) in [("arrays", &p), ("elements", &pe), ("loaded", &loaded)] {
            let out = dir.path().join("r.hrry");
            plan.refill_file(&vals, &out, &[]).unwrap();
            assert!(std::fs::read(&out).unwrap() == want, "{layout} {name}");
        }
        // A value count that counts only the planned contributions is refused.
        let short = vec![0.0f64; ke.len() - 1];
        let mut out = vec![0.0f64; p.nnz()];
        assert!(p.assemble_into(&short, &mut out, None).is_err());

        // In parts on disk: a budget small enough for several parts, in
        // element order (windows) and shuffled (spills).
        let small = AssembleOptions {
            memory_budget: 8 << 20,
            ..o.clone()
        };
        let pf_path = dir.path().join("K.plan");
        let s = PlanFile::create(
            &[&rows[..], &cols[..]],
            &[41, 41],
            DType::F64,
            &small,
            &pf_path,
            None,
        )
        .unwrap();
        assert_eq!(s.contributions, ke.len() as u64);
        let pf = PlanFile::open(&pf_path).unwrap();
        assert_eq!(pf.contributions(), ke.len() as u64);
        assert_eq!(pf.digest(), p.digest());
        let out = dir.path().join("f.hrry");
        pf.refill_file(&vals, &out, &[], &small).unwrap();
        assert!(std::fs::read(&out).unwrap() == want, "{layout} in parts");
    }
    // Without skip_negative a negative index is still the push's error.
    let e = Plan::new(
        &[&rows[..], &cols[..]],
        &[41, 41],
        DType::F64,
        &opts(false, dir.path()),
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("negative"), "{e}");
}

/// Many parts, skipped contributions in every one: plans in parts read
/// by window and spilled give a Builder's bytes.
#[test]
fn plans_in_parts_skip_negative_by_window_and_by_spill() {
    use coo_assembler::plan::PlanFile;
    let dir = tempfile::tempdir().unwrap();
    let n = 300_000usize;
    let extent = 20_000u64;
    let mut x = 12345u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for local in [true, false] {
        let (mut rows, mut cols, mut vals) = (Vec::new(), Vec::new(), Vec::new());
        for k in 0..n {
            let base = if local {
                (k as u64 * extent / n as u64) as i64
            } else {
                (next() % extent) as i64
            };
            let r = if next() % 10 == 0 { -1 } else { base };
            let c = (base + (next() % 5) as i64).min(extent as i64 - 1);
            rows.push(r);
            cols.push(c);
            vals.push((next() % 1000) as f64 - 500.0);
        }
        let o = AssembleOptions {
            memory_budget: 8 << 20,
            ..opts(true, dir.path())
        };
        let mut b = Builder::new(&[extent, extent], DType::F64, o.clone()).unwrap();
        for k in 0..n {
            b.push_signed(&[rows[k], cols[k]], vals[k]).unwrap();
        }
        let want_path = dir.path().join("want.hrry");
        b.finish(&want_path).unwrap();
        let pf_path = dir.path().join("K.plan");
        let s = PlanFile::create(
            &[&rows[..], &cols[..]],
            &[extent, extent],
            DType::F64,
            &o,
            &pf_path,
            None,
        )
        .unwrap();
        assert!(s.parts > 2 && s.windowed == local, "{s:?}");
        let vp = dir.path().join("v.f64");
        std::fs::write(&vp, bytemuck::cast_slice::<f64, u8>(&vals)).unwrap();
        let out = dir.path().join("r.hrry");
        PlanFile::open(&pf_path)
            .unwrap()
            .refill_file(&vp, &out, &[], &o)
            .unwrap();
        assert!(
            std::fs::read(&out).unwrap() == std::fs::read(&want_path).unwrap(),
            "local {local}"
        );
    }
}
