//! Rank-1 tensors exported as dense vectors (issue 22): PETSc's binary
//! `Vec` checked byte for byte against the format (`VecLoad`: big-endian
//! PetscInt `[VEC_FILE_CLASSID = 1211214, n]`, then n float64), `.npy`
//! checked by parsing its header and data, 64-bit integers beyond 2^53
//! refused for PETSc (matrix and vector), and the rank refusals.

use crate::common;

use coo_assembler::matrix::export::{ExportOptions, Format, export, export_file};
use coo_assembler::matrix::{Matrix, MatrixError};
use coo_assembler::{AssembleOptions, Builder, DType, ErrorKind, HurrayFile};
use std::path::{Path, PathBuf};

/// A sorted vector (or matrix) of `shape` assembled by the library.
fn assemble_f64(dir: &Path, name: &str, shape: &[u64], entries: &[(Vec<u64>, f64)]) -> PathBuf {
    let p = dir.join(name);
    let mut b = Builder::new(shape, DType::F64, AssembleOptions::default()).unwrap();
    for (i, v) in entries {
        b.push(i, *v).unwrap();
    }
    b.finish(&p).unwrap();
    p
}

fn assemble_i64(dir: &Path, name: &str, shape: &[u64], entries: &[(Vec<u64>, i64)]) -> PathBuf {
    let p = dir.join(name);
    let mut b = Builder::new(shape, DType::I64, AssembleOptions::default()).unwrap();
    for (i, v) in entries {
        b.push(i, *v).unwrap();
    }
    b.finish(&p).unwrap();
    p
}

/// A file written by the test helper, entries in the order given.
fn helper_file<E: coo_assembler::element::Element>(
    dir: &Path,
    name: &str,
    shape: &[u64],
    entries: &[(Vec<u64>, E)],
    sorted: bool,
) -> PathBuf {
    let t = common::tensor("v", shape, entries, sorted);
    let (bytes, _) = common::build(&[t], &[], common::Opts::default());
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn export_to(
    p: &Path,
    format: Format,
    out: &Path,
    opts: &ExportOptions,
) -> Result<u64, MatrixError> {
    let f = HurrayFile::open(p).unwrap();
    export_file(&f, None, format, out, opts).map(|s| s.bytes)
}

/// Files in `dir` besides `keep` (no temporary output may be left).
fn others(dir: &Path, keep: &[&Path]) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !keep.contains(&p.as_path()))
        .collect()
}

#[test]
fn petsc_vec_bytes_by_the_format() {
    let dir = tempfile::tempdir().unwrap();
    let p = assemble_f64(
        dir.path(),
        "v.hrry",
        &[6],
        &[(vec![4], -1.0), (vec![1], 2.5), (vec![4], 0.25)],
    );
    let out = dir.path().join("v.petsc");
    let bytes = export_to(&p, Format::Petsc, &out, &ExportOptions::default()).unwrap();
    // 1211214 = 0x00127B4E, then the length 6, both big-endian int32.
    let mut want = vec![0x00, 0x12, 0x7B, 0x4E, 0, 0, 0, 6];
    for v in [0.0f64, 2.5, 0.0, 0.0, -0.75, 0.0] {
        want.extend_from_slice(&v.to_be_bytes());
    }
    let got = std::fs::read(&out).unwrap();
    assert_eq!(got, want);
    assert_eq!(bytes, want.len() as u64);
    assert_eq!(coo_assembler::matrix::export::VEC_FILE_CLASSID, 1211214);

    // 64-bit PetscInt: the same values after a 16-byte header.
    let o64 = ExportOptions {
        petsc_int64: true,
        ..ExportOptions::default()
    };
    export_to(&p, Format::Petsc, &out, &o64).unwrap();
    let got64 = std::fs::read(&out).unwrap();
    assert_eq!(
        &got64[..16],
        &[0, 0, 0, 0, 0, 0x12, 0x7B, 0x4E, 0, 0, 0, 0, 0, 0, 0, 6]
    );
    assert_eq!(&got64[16..], &want[8..]);

    // Unsorted, gathered in bands of 2 elements (3 passes): the same bytes.
    let u = helper_file(
        dir.path(),
        "u.hrry",
        &[6],
        &[(vec![4], -0.75f64), (vec![1], 2.5)],
        false,
    );
    let small = ExportOptions {
        reorder_budget: 16,
        ..ExportOptions::default()
    };
    let outu = dir.path().join("u.petsc");
    export_to(&u, Format::Petsc, &outu, &small).unwrap();
    assert_eq!(std::fs::read(&outu).unwrap(), want);
    // An empty vector: the header alone.
    let e = assemble_f64(dir.path(), "e.hrry", &[0], &[]);
    export_to(&e, Format::Petsc, &outu, &ExportOptions::default()).unwrap();
    assert_eq!(
        std::fs::read(&outu).unwrap(),
        [0, 0x12, 0x7B, 0x4E, 0, 0, 0, 0]
    );
}

/// The `.npy` header dict and the data bytes of `b`, parsed by the rules
/// of NumPy's format document (magic, version, header length, a dict, the
/// data from a multiple of 64 bytes).
fn parse_npy(b: &[u8]) -> (String, &[u8]) {
    assert_eq!(&b[..6], b"\x93NUMPY");
    assert_eq!(b[6], 1, "version 1.0 for a short header");
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let start = 10 + hlen;
    assert_eq!(start % 64, 0, "data aligned to 64 bytes");
    let h = std::str::from_utf8(&b[10..start]).unwrap();
    assert!(h.ends_with('\n'));
    (h.trim_end().to_string(), &b[start..])
}

#[test]
fn npy_vector_header_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let p = assemble_f64(
        dir.path(),
        "v.hrry",
        &[5],
        &[(vec![0], 1.5), (vec![3], -2.0)],
    );
    let out = dir.path().join("v.npy");
    export_to(&p, Format::Npy, &out, &ExportOptions::default()).unwrap();
    let b = std::fs::read(&out).unwrap();
    let (h, data) = parse_npy(&b);
    assert_eq!(
        h,
        "{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }"
    );
    let vals: Vec<f64> = data
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(vals, [1.5, 0.0, 0.0, -2.0, 0.0]);

    // Integers keep their type and every bit (no float64 on the way).
    let big = (1i64 << 60) + 1;
    let pi = assemble_i64(dir.path(), "i.hrry", &[3], &[(vec![2], big), (vec![0], -7)]);
    export_to(&pi, Format::Npy, &out, &ExportOptions::default()).unwrap();
    let b = std::fs::read(&out).unwrap();
    let (h, data) = parse_npy(&b);
    assert!(
        h.contains("'descr': '<i8'") && h.contains("'shape': (3,)"),
        "{h}"
    );
    let vals: Vec<i64> = data
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(vals, [-7, 0, big]);

    // Narrow types: u8 is '|u1'; bfloat16 is widened exactly to '<f4'.
    let pu = helper_file(dir.path(), "u8.hrry", &[4], &[(vec![1], 200u8)], true);
    export_to(&pu, Format::Npy, &out, &ExportOptions::default()).unwrap();
    let b = std::fs::read(&out).unwrap();
    let (h, data) = parse_npy(&b);
    assert!(h.contains("'descr': '|u1'"), "{h}");
    assert_eq!(data, [0, 200, 0, 0]);
    let pb = helper_file(
        dir.path(),
        "bf.hrry",
        &[2],
        &[(vec![1], coo_assembler::element::BF16::from_f32(-3.5))],
        true,
    );
    export_to(&pb, Format::Npy, &out, &ExportOptions::default()).unwrap();
    let b = std::fs::read(&out).unwrap();
    let (h, data) = parse_npy(&b);
    assert!(h.contains("'descr': '<f4'"), "{h}");
    let vals: Vec<f32> = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(vals, [0.0, -3.5]);

    // Unsorted with bands of one element: the same file as sorted.
    let entries = [(vec![3], -2.0f64), (vec![0], 1.5)];
    let u = helper_file(dir.path(), "u.hrry", &[5], &entries, false);
    let s = helper_file(
        dir.path(),
        "s.hrry",
        &[5],
        &[entries[1].clone(), entries[0].clone()],
        true,
    );
    let (ou, os) = (dir.path().join("u.npy"), dir.path().join("s.npy"));
    let tiny = ExportOptions {
        reorder_budget: 1,
        ..ExportOptions::default()
    };
    export_to(&u, Format::Npy, &ou, &tiny).unwrap();
    export_to(&s, Format::Npy, &os, &ExportOptions::default()).unwrap();
    assert_eq!(std::fs::read(&ou).unwrap(), std::fs::read(&os).unwrap());
}

#[test]
fn integers_beyond_2_pow_53_are_refused_for_petsc() {
    let dir = tempfile::tempdir().unwrap();
    let edge = 1i64 << 53;
    // 2^53 itself is exact in float64: written.
    let ok = assemble_i64(
        dir.path(),
        "ok.hrry",
        &[4],
        &[(vec![1], -edge), (vec![2], edge)],
    );
    let out = dir.path().join("v.petsc");
    export_to(&ok, Format::Petsc, &out, &ExportOptions::default()).unwrap();
    let b = std::fs::read(&out).unwrap();
    assert_eq!(
        f64::from_be_bytes(b[8 + 16..8 + 24].try_into().unwrap()),
        edge as f64
    );
    std::fs::remove_file(&out).unwrap();

    // One beyond: refused, naming the entry, nothing written.
    let bad = assemble_i64(
        dir.path(),
        "bad.hrry",
        &[4],
        &[(vec![0], 1), (vec![3], edge + 1)],
    );
    let e = export_to(&bad, Format::Petsc, &out, &ExportOptions::default()).unwrap_err();
    assert!(
        matches!(e, MatrixError::NotExactInDouble { entry: 1, value, .. } if value == (edge + 1) as i128),
        "{e:?}"
    );
    assert_eq!(e.kind(), ErrorKind::Value);
    let msg = e.to_string();
    assert!(
        msg.contains("[3]") && msg.contains("9007199254740993") && msg.contains("npy"),
        "{msg}"
    );
    assert!(!out.exists());

    // A matrix, negative, in a CSR file and an unsorted COO: the same refusal.
    let m = dir.path().join("m.hrry");
    let mut bld = Builder::new(
        &[3, 3],
        DType::I64,
        AssembleOptions {
            layout: coo_assembler::options::OutputLayout::Csr,
            ..AssembleOptions::default()
        },
    )
    .unwrap();
    bld.push(&[0, 0], 5i64).unwrap();
    bld.push(&[1, 2], -(edge + 3)).unwrap();
    bld.finish(&m).unwrap();
    let outm = dir.path().join("m.petsc");
    let e = export_to(&m, Format::Petsc, &outm, &ExportOptions::default()).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("entry 1 at (1, 2)")
            && msg.contains("-9007199254740995")
            && msg.contains("mtx or npz"),
        "{msg}"
    );
    let u = helper_file(
        dir.path(),
        "mu.hrry",
        &[3, 3],
        &[(vec![2, 1], u64::MAX), (vec![0, 0], 1u64)],
        false,
    );
    let e = export_to(&u, Format::Petsc, &outm, &ExportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("entry 0 at (2, 1)"), "{e}");
    assert!(!outm.exists());
    // The exact formats take them.
    export_to(
        &m,
        Format::Mtx,
        &dir.path().join("m.mtx"),
        &ExportOptions::default(),
    )
    .unwrap();
    assert!(
        std::fs::read_to_string(dir.path().join("m.mtx"))
            .unwrap()
            .contains("-9007199254740995")
    );
    let keep = [
        ok.as_path(),
        bad.as_path(),
        m.as_path(),
        u.as_path(),
        &dir.path().join("m.mtx"),
    ];
    assert!(
        others(dir.path(), &keep).is_empty(),
        "{:?}",
        others(dir.path(), &keep)
    );
}

#[test]
fn rank_refusals_name_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let m = assemble_f64(dir.path(), "m.hrry", &[2, 2], &[(vec![0, 1], 1.0)]);
    let out = dir.path().join("m.npy");
    let e = export_to(&m, Format::Npy, &out, &ExportOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Rank);
    let msg = e.to_string();
    assert!(
        msg.contains("export to npy") && msg.contains("npz"),
        "{msg}"
    );
    assert!(!out.exists());
    // Through `export` with a Matrix too.
    let f = HurrayFile::open(&m).unwrap();
    let a = Matrix::of_file(&f, None).unwrap();
    assert!(matches!(
        export(&a, Format::Npy, &out, &ExportOptions::default()),
        Err(MatrixError::ExportRank { .. })
    ));

    let v = assemble_f64(dir.path(), "v.hrry", &[3], &[(vec![1], 1.0)]);
    for (format, name) in [(Format::Mtx, "v.mtx"), (Format::Npz, "v.npz")] {
        let out = dir.path().join(name);
        let e = export_to(&v, format, &out, &ExportOptions::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Rank);
        assert!(
            e.to_string().contains("npy") && e.to_string().contains("petsc"),
            "{e}"
        );
        assert!(!out.exists());
    }
    // Rank 3 is neither.
    let t = assemble_f64(dir.path(), "t.hrry", &[2, 2, 2], &[(vec![1, 1, 1], 1.0)]);
    let e = export_to(&t, Format::Petsc, &out, &ExportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("rank 1 or 2"), "{e}");
    assert_eq!(Format::Npy.to_string(), "npy");
    assert_eq!("numpy".parse::<Format>().unwrap(), Format::Npy);
}

#[test]
fn damaged_vectors_are_invalid_files() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d.petsc");
    // An unsorted vector holding index 2 twice, and one past its length.
    for (name, entries) in [
        (
            "dup.hrry",
            vec![(vec![2], 1.0f64), (vec![0], 1.0), (vec![2], 3.0)],
        ),
        ("far.hrry", vec![(vec![0], 1.0f64), (vec![7], 3.0)]),
    ] {
        let p = helper_file(dir.path(), name, &[4], &entries, false);
        for format in [Format::Petsc, Format::Npy] {
            let e = export_to(&p, format, &out, &ExportOptions::default()).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidFile, "{name}: {e}");
            assert!(!out.exists());
        }
    }
    // A "sorted" vector whose order is broken.
    let p = helper_file(
        dir.path(),
        "order.hrry",
        &[4],
        &[(vec![2], 1.0f64), (vec![1], 1.0)],
        true,
    );
    let e = export_to(&p, Format::Npy, &out, &ExportOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
}

#[test]
fn cli_exports_a_vector() {
    let dir = tempfile::tempdir().unwrap();
    let p = assemble_f64(dir.path(), "v.hrry", &[3], &[(vec![2], 4.0)]);
    let out = dir.path().join("v.petsc");
    let run = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_coo-assembler"))
            .args(args)
            .output()
            .unwrap()
    };
    let r = run(&[
        "export".as_ref(),
        p.as_os_str(),
        out.as_os_str(),
        "--to".as_ref(),
        "petsc".as_ref(),
        "-q".as_ref(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let b = std::fs::read(&out).unwrap();
    assert_eq!(b.len(), 8 + 3 * 8);
    assert_eq!(f64::from_be_bytes(b[24..32].try_into().unwrap()), 4.0);
    let npy = dir.path().join("v.npy");
    let r = run(&[
        "export".as_ref(),
        p.as_os_str(),
        npy.as_os_str(),
        "--to".as_ref(),
        "npy".as_ref(),
        "-q".as_ref(),
    ]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert_eq!(&std::fs::read(&npy).unwrap()[..6], b"\x93NUMPY");
    // A matrix to npy: exit 1 and the fix.
    let m = assemble_f64(dir.path(), "m.hrry", &[2, 2], &[(vec![0, 0], 1.0)]);
    let mnpy = dir.path().join("m.npy");
    let r = run(&[
        "export".as_ref(),
        m.as_os_str(),
        mnpy.as_os_str(),
        "--to".as_ref(),
        "npy".as_ref(),
    ]);
    assert_eq!(r.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains("npz"));
    assert!(!mnpy.exists());
    // The help lists the format, from the vocabulary table.
    let h = run(&["export".as_ref(), "--help".as_ref()]);
    let h = String::from_utf8_lossy(&h.stdout);
    assert!(h.contains("npy") && h.contains("Vec"), "{h}");
}
