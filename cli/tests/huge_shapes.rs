//! Issue 22, "never abort": a shape whose CSR pointers, per-row tables or
//! output vectors cannot exist on this machine is a clean error (kind
//! Memory, or Io for an output the disk cannot hold), before anything is
//! allocated or written, and nothing is left behind.

use coo_assembler::convert::{ConvertOptions, convert};
use coo_assembler::matrix::export::{ExportOptions, Format, NpzLayout, export};
use coo_assembler::matrix::{Matrix, dense, memory};
use coo_assembler::{
    AssembleOptions, Builder, DType, ErrorKind, HurrayFile, options::OutputLayout,
};
use std::path::{Path, PathBuf};
use std::process::Command;

const HUGE: u64 = 1 << 40;

/// A 2^40 x 2^40 matrix with one entry (12 KiB on disk).
fn huge(dir: &Path) -> PathBuf {
    let path = dir.join("huge.hrry");
    let mut b = Builder::new(&[HUGE, HUGE], DType::F64, AssembleOptions::default()).unwrap();
    b.push(&[HUGE - 1, 3], 2.5).unwrap();
    b.finish(&path).unwrap();
    path
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn exports_of_a_2_40_row_matrix_are_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let path = huge(dir.path());
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let f = HurrayFile::open(&path).unwrap();
    let a = Matrix::of_file(&f, None).unwrap();
    // 8 TiB of indptr (or of PETSc row lengths) to stream: refused before
    // the first byte, not after filling the disk.
    for (format, layout) in [
        (Format::Npz, NpzLayout::Auto),
        (Format::Npz, NpzLayout::Csr),
        (Format::Npz, NpzLayout::Csc),
        (Format::Petsc, NpzLayout::Auto),
    ] {
        let opts = ExportOptions {
            npz_layout: layout,
            petsc_int64: true,
            ..ExportOptions::default()
        };
        let e = export(&a, format, &out.join("x"), &opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io, "{format:?} {layout:?}: {e}");
        assert!(e.to_string().contains("8.0 TiB"), "{e}");
        assert!(entries(&out).is_empty(), "{:?}", entries(&out));
    }
    // A symmetric MatrixMarket keeps a cursor per row: 8 TiB of memory.
    let opts = ExportOptions {
        symmetric: true,
        ..ExportOptions::default()
    };
    let e = export(&a, Format::Mtx, &out.join("x"), &opts).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Memory, "{e}");
    assert!(entries(&out).is_empty(), "{:?}", entries(&out));
    // What needs no table per row still works.
    let opts = ExportOptions {
        npz_layout: NpzLayout::Coo,
        ..ExportOptions::default()
    };
    export(&a, Format::Npz, &out.join("coo.npz"), &opts).unwrap();
    export(
        &a,
        Format::Mtx,
        &out.join("a.mtx"),
        &ExportOptions::default(),
    )
    .unwrap();
    let mtx = std::fs::read_to_string(out.join("a.mtx")).unwrap();
    assert!(mtx.ends_with("1099511627776 4 2.5\n"), "{mtx}");
    assert_eq!(dense(&a, 100).unwrap_err().kind(), ErrorKind::Memory);
}

/// A typo'd shape in a compressed layout: the row pointers it costs
/// whatever the entries are said before any contribution is read, and
/// refused when the output's file system cannot hold them; nothing is
/// written, the input is not even read (a pipe left open would hang).
#[test]
fn a_shape_whose_pointers_the_disk_cannot_hold_is_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let input = dir.path().join("one.txt");
    std::fs::write(&input, "0 0 1\n").unwrap();
    let rows = (1u64 << 61).to_string();
    let r = Command::new(env!("CARGO_BIN_EXE_coo-assembler"))
        .args(["assemble", "--format", "text", "--layout", "csr", "--input"])
        .arg(&input)
        .args(["--shape", &format!("{rows},2"), "-o"])
        .arg(out.join("H.hrry"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains("note: layout csr"), "{err}");
    assert!(
        err.contains(&format!("the csr pointers of {rows} + 1 rows"))
            && err.contains("nothing was written"),
        "{err}"
    );
    assert!(entries(&out).is_empty(), "{:?}", entries(&out));
    // The library's builder refuses it at finish, before the merge.
    let mut b = Builder::new(
        &[1 << 61, 2],
        DType::F64,
        AssembleOptions {
            layout: OutputLayout::Csr,
            ..AssembleOptions::default()
        },
    )
    .unwrap();
    b.push(&[0, 0], 1.0).unwrap();
    let e = b.finish(out.join("B.hrry")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(e.to_string().contains("nothing was written"), "{e}");
    assert!(entries(&out).is_empty(), "{:?}", entries(&out));
}

#[test]
fn cli_export_to_npz_exits_1_with_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = huge(dir.path());
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let r = Command::new(env!("CARGO_BIN_EXE_coo-assembler"))
        .args(["export", "--to", "npz"])
        .arg(&path)
        .arg(out.join("K.npz"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.contains("indptr of 1099511627776 + 1 entries") && err.contains("nothing was written"),
        "{err}"
    );
    assert!(entries(&out).is_empty(), "{:?}", entries(&out));
}

#[test]
fn convert_of_a_2_40_row_coo_file_to_csr_or_csc_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let path = huge(dir.path());
    let (out, tmp) = (dir.path().join("out"), dir.path().join("tmp"));
    std::fs::create_dir(&out).unwrap();
    std::fs::create_dir(&tmp).unwrap();
    // The pointers (2^40 + 1 of 8 bytes) stream to disk with bounded
    // memory: no allocation to fail, so the refusal is the disk's, before
    // the first pointer is written. CSR takes the one-pass writer, CSC the
    // external sort and then the writer: both refuse.
    for (to, what) in [
        (OutputLayout::Csr, "pointers of 1099511627776 + 1 rows"),
        (OutputLayout::Csc, "pointers of 1099511627776 + 1 columns"),
    ] {
        let opts = ConvertOptions {
            to,
            temp_dir: Some(tmp.clone()),
            ..ConvertOptions::default()
        };
        let e = convert(&path, &out.join("K.hrry"), &opts).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io, "{to:?}: {e}");
        let msg = e.to_string();
        assert!(
            msg.contains("8.0 TiB") && msg.contains(what) && msg.contains("nothing was written"),
            "{msg}"
        );
        assert!(entries(&out).is_empty(), "{:?}", entries(&out));
        assert!(entries(&tmp).is_empty(), "{:?}", entries(&tmp));
    }
    // The command line: exit 1, the message, nothing left.
    let r = Command::new(env!("CARGO_BIN_EXE_coo-assembler"))
        .arg("convert")
        .arg(&path)
        .arg(out.join("K.hrry"))
        .args(["--to", "csr"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains("8.0 TiB"), "{err}");
    assert!(entries(&out).is_empty(), "{:?}", entries(&out));
    assert_eq!(entries(dir.path()), ["huge.hrry", "out", "tmp"]);
    // To COO (no pointers) it still converts.
    convert(&path, &out.join("K.hrry"), &ConvertOptions::default()).unwrap();
}

#[test]
fn allocations_beyond_physical_memory_are_errors() {
    // Whatever the overcommit policy: refused before the allocator is asked.
    let e = memory::try_filled::<i64>(HUGE + 1, 0, "indptr").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Memory);
    let e = memory::try_with_capacity::<f64>(u64::MAX, "y").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Memory);
}
