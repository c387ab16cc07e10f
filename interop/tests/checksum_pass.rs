//! Issue 22, "never silently use bad data": the first whole pass over an
//! open file checks the stored xxh3 checksums of the tensor's buffers
//! (once: later passes reuse the verdict), a damaged buffer is an
//! InvalidFile naming it, and files without our checksums (the reference
//! writer's) read as before.

use coo_assembler::matrix::export::{ExportOptions, Format, export};
use coo_assembler::matrix::{Matrix, MatvecOptions, dense, matvec};
use coo_assembler::{
    AssembleOptions, Builder, DType, ErrorKind, HurrayFile, convert, convert::ConvertOptions,
    options::OutputLayout, read::Tensor,
};
use std::path::{Path, PathBuf};

/// A 6 x 5 f64 matrix of 9 entries in `layout`, written by our builder.
fn small(dir: &Path, layout: OutputLayout) -> PathBuf {
    let path = dir.join(format!("{layout}.hrry"));
    let opts = AssembleOptions {
        layout,
        ..AssembleOptions::default()
    };
    let mut b = Builder::new(&[6, 5], DType::F64, opts).unwrap();
    for (k, (i, j)) in [
        (0, 0),
        (0, 4),
        (1, 2),
        (2, 1),
        (3, 3),
        (3, 4),
        (4, 0),
        (5, 2),
        (5, 4),
    ]
    .into_iter()
    .enumerate()
    {
        b.push(&[i, j], 1.0 + k as f64).unwrap();
    }
    b.finish(&path).unwrap();
    path
}

/// The spec names and file byte ranges of the tensor's buffers.
fn buffers(path: &Path) -> Vec<(&'static str, std::ops::Range<usize>)> {
    let f = HurrayFile::open(path).unwrap();
    let base = f.mapped_bytes().unwrap().as_ptr() as usize;
    let at = |b: &[u8]| {
        let s = b.as_ptr() as usize - base;
        s..s + b.len()
    };
    match f.only_tensor_view().unwrap() {
        Tensor::Coo(t) => vec![
            ("values", at(t.values_bytes())),
            ("indices", at(t.indices_bytes())),
        ],
        Tensor::Compressed(c) => vec![
            ("values", at(c.values_bytes())),
            (c.indices_name(), at(c.indices_bytes())),
            (c.pointers_name(), at(c.pointers_bytes())),
        ],
        Tensor::Csf(t) => {
            let names = OutputLayout::Csf.buffer_names();
            let mut v = vec![("values", at(t.values_bytes()))];
            for l in 0..t.shape().len() {
                let words = |w: &[u64]| {
                    let s = w.as_ptr() as usize - base;
                    s..s + 8 * w.len()
                };
                v.push((names[1 + 2 * l], words(t.pos(l))));
                v.push((names[2 + 2 * l], words(t.crd(l))));
            }
            v
        }
    }
}

/// A copy of `src` at `dst` with bit `bit` of byte `at` flipped.
fn flipped(src: &Path, dst: &Path, at: usize, bit: u8) {
    let mut b = std::fs::read(src).unwrap();
    b[at] ^= 1 << bit;
    std::fs::write(dst, b).unwrap();
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_flipped_bit_in_any_buffer_stops_every_whole_pass() {
    let dir = tempfile::tempdir().unwrap();
    for layout in [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc] {
        let good = small(dir.path(), layout);
        for (buffer, r) in buffers(&good) {
            // First, middle and last byte, a different bit each.
            for (k, at) in [r.start, (r.start + r.end) / 2, r.end - 1]
                .into_iter()
                .enumerate()
            {
                let bad = dir.path().join("bad.hrry");
                flipped(&good, &bad, at, (k * 3) as u8);
                let f = HurrayFile::open(&bad).unwrap();
                let expect = |e: &dyn std::fmt::Display, kind: ErrorKind, what: &str| {
                    let m = e.to_string();
                    assert_eq!(
                        kind,
                        ErrorKind::InvalidFile,
                        "{layout} {buffer} {what}: {m}"
                    );
                    assert!(
                        m.contains(&format!("{buffer} buffer of tensor")) && m.contains("bad.hrry"),
                        "{layout} {buffer} {what}: {m}"
                    );
                };
                let a = Matrix::of_file(&f, None).unwrap();
                let e = matvec(&a, &[1.0; 5], false, &MatvecOptions::default()).unwrap_err();
                expect(&e, e.kind(), "matvec");
                let e = matvec(&a, &[1.0; 6], true, &MatvecOptions::default()).unwrap_err();
                expect(&e, e.kind(), "matvec again");
                let e = dense(&a, 100).unwrap_err();
                expect(&e, e.kind(), "dense");
                let t = f.only_tensor_view().unwrap();
                let e = t
                    .try_for_each(|_, _| Ok::<(), coo_assembler::Error>(()))
                    .unwrap_err();
                expect(&e, e.kind(), "try_for_each");
                let out = dir.path().join("out");
                std::fs::create_dir_all(&out).unwrap();
                for format in [Format::Npz, Format::Mtx, Format::Petsc] {
                    let e =
                        export(&a, format, &out.join("x"), &ExportOptions::default()).unwrap_err();
                    expect(&e, e.kind(), "export");
                }
                drop(f);
                let e = convert(
                    &bad,
                    &out.join("c.hrry"),
                    &ConvertOptions {
                        to: OutputLayout::Csr,
                        ..ConvertOptions::default()
                    },
                )
                .unwrap_err();
                expect(&e, e.kind(), "convert");
                assert!(names(&out).is_empty(), "left behind: {:?}", names(&out));
                // Point lookups still answer (they read one entry).
                let f = HurrayFile::open(&bad).unwrap();
                let _ = f.only_tensor_view().unwrap().get(&[0, 0]);
                // verify names the same buffer.
                assert!(
                    f.verify()
                        .iter()
                        .any(|p| p.rule == "checksum-mismatch" && p.detail.contains(buffer)),
                    "{layout} {buffer}: {:?}",
                    f.verify()
                );
            }
        }
    }
}

#[test]
fn the_buffers_are_hashed_once_per_open_file() {
    let dir = tempfile::tempdir().unwrap();
    for (layout, n) in [(OutputLayout::Coo, 2), (OutputLayout::Csr, 3)] {
        let path = small(dir.path(), layout);
        let f = HurrayFile::open(&path).unwrap();
        let t = f.only_tensor_view().unwrap();
        assert_eq!(t.stored_checksums(), n);
        assert_eq!(t.checksum_hashes(), 0, "opening hashes nothing");
        let _ = t.get(&[1, 2]).unwrap();
        assert_eq!(t.checksum_hashes(), 0, "a lookup hashes nothing");
        let a = Matrix::of_file(&f, None).unwrap();
        let y = matvec(&a, &[1.0; 5], false, &MatvecOptions::default()).unwrap();
        assert_eq!(
            t.checksum_hashes(),
            n as u64,
            "the first pass hashes each buffer"
        );
        assert_eq!(
            matvec(&a, &[1.0; 5], false, &MatvecOptions::default()).unwrap(),
            y
        );
        export(
            &a,
            Format::Npz,
            &dir.path().join("x.npz"),
            &ExportOptions::default(),
        )
        .unwrap();
        dense(&a, 100).unwrap();
        let again = Matrix::of_file(&f, None).unwrap();
        matvec(&again, &[1.0; 5], false, &MatvecOptions::default()).unwrap();
        assert_eq!(
            f.only_tensor_view().unwrap().checksum_hashes(),
            n as u64,
            "later passes reuse the verdict"
        );
        // A new open starts afresh.
        let g = HurrayFile::open(&path).unwrap();
        g.only_tensor_view().unwrap().check_checksums().unwrap();
        assert_eq!(g.only_tensor_view().unwrap().checksum_hashes(), n as u64);
    }
}

#[test]
fn concurrent_first_passes_hash_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = small(dir.path(), OutputLayout::Coo);
    let f = HurrayFile::open(&path).unwrap();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let a = Matrix::of_file(&f, None).unwrap();
                matvec(&a, &[1.0; 5], false, &MatvecOptions::default()).unwrap();
            });
        }
    });
    assert_eq!(f.only_tensor_view().unwrap().checksum_hashes(), 2);
}

#[tokio::test]
async fn a_file_without_our_checksums_reads_as_before() {
    use hurray_core::{
        BufferHandle, DeviceTag, ElementType, LayoutDescriptor, Shape, SyncMode, TensorDescriptor,
    };
    let vals: Vec<u8> = [1.5f64, -0.5, 2.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let idx: Vec<u8> = [0u64, 1, 2, 0, 3, 3]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let handle = |n: usize| {
        BufferHandle::new(n as u64, 4096, DeviceTag::Cpu, SyncMode::ProducerSynced).unwrap()
    };
    let desc = TensorDescriptor::new(
        1,
        0,
        ElementType::Float64,
        Shape::new(vec![4, 4]).unwrap(),
        0,
        LayoutDescriptor::Coo(hurray_core::layout::CooLayout::new(3, true)),
        vec![handle(vals.len()), handle(idx.len())],
        None,
        None,
        None,
        None,
    )
    .unwrap();
    let mut w = hurray_io::file::FileWriter::new(Vec::<u8>::new())
        .await
        .unwrap();
    w.write_tensor("ref", &desc, &[&vals, &idx]).await.unwrap();
    let bytes = w.finish(vec![]).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ref.hrry");
    std::fs::write(&path, bytes).unwrap();
    let f = HurrayFile::open(&path).unwrap();
    let t = f.only_tensor_view().unwrap();
    assert_eq!(t.stored_checksums(), 0, "the reference writer stores none");
    t.check_checksums().unwrap();
    let a = Matrix::of_file(&f, None).unwrap();
    let y = matvec(
        &a,
        &[1.0, 10.0, 100.0, 1000.0],
        false,
        &MatvecOptions::default(),
    )
    .unwrap();
    assert_eq!(y, [15.0, 0.0, -0.5, 2000.0]);
    assert_eq!(t.checksum_hashes(), 0);
    export(
        &a,
        Format::Npz,
        &dir.path().join("ref.npz"),
        &ExportOptions::default(),
    )
    .unwrap();
    // verify tells, from the library, that the bytes could not be checked.
    let p = f.verify();
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(!p[0].is_error());
    assert_eq!(p[0].severity, coo_assembler::read::Severity::Note);
    assert_eq!(p[0].rule, "no-checksums");
    assert_eq!(p[0].tensor.as_deref(), Some("ref"));
    assert!(
        p[0].to_string().contains("carries no stored checksums"),
        "{}",
        p[0]
    );
}
