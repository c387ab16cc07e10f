//! The output rule (issue 21): an output path that names an input of the
//! same operation (the same file, through a symbolic or a hard link too)
//! is a usage error, for every command and every API that writes; the one
//! exception is a conversion, documented to rewrite its input in place.
//!
//! Each refused case must exit 2 (CLI) or return `Error::OutputIsInput`
//! (library), name both paths, and leave the input byte for byte as it
//! was, with no temporary file behind.

use crate::common::{listing, s};
use coo_assembler::matrix::export::{self, ExportOptions, Format};
use coo_assembler::matrix::{self, Matrix, MatrixError, MatvecOptions, SpyOptions, vector};
use coo_assembler::{
    Error, HurrayFile, convert, convert::ConvertOptions, options::OutputLayout,
    read::CompositeFile, read::ReadOptions,
};
use std::path::{Path, PathBuf};

use crate::{ok, run as cli};

/// Assemble `text` (one `i j value` a line) of `shape` with the CLI.
fn assemble(dir: &Path, name: &str, shape: &str, text: &str) -> PathBuf {
    let input = dir.join(format!("{name}.txt"));
    std::fs::write(&input, text).unwrap();
    let out = dir.join(format!("{name}.hrry"));
    ok([
        "assemble",
        "--shape",
        shape,
        "--input",
        s(&input),
        "--format",
        "text",
        "--output",
        s(&out),
        "-q",
    ]);
    std::fs::remove_file(&input).unwrap();
    out
}

fn matrix_text(rows: u64, cols: u64) -> String {
    let mut text = String::new();
    for i in 0..rows {
        for j in [i % cols, (i * 7 + 3) % cols] {
            text.push_str(&format!("{i} {j} {}\n", 1.0 + i as f64 / 8.0));
        }
    }
    text
}

/// A directory with the matrix K.hrry (20 x 20), the vector x.npy, and
/// links to both: L.hrry and xl.npy (symbolic), H.hrry and xh.npy (hard).
struct Setup {
    dir: tempfile::TempDir,
    k: PathBuf,
    x: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let k = assemble(dir.path(), "K", "20,20", &matrix_text(20, 20));
        let x = dir.path().join("x.npy");
        vector::write_vector(&x, &(0..20).map(|i| i as f64).collect::<Vec<_>>()).unwrap();
        for (target, sym, hard) in [(&k, "L.hrry", "H.hrry"), (&x, "xl.npy", "xh.npy")] {
            std::os::unix::fs::symlink(target, dir.path().join(sym)).unwrap();
            std::fs::hard_link(target, dir.path().join(hard)).unwrap();
        }
        Setup { dir, k, x }
    }

    fn p(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// K.hrry and its two links.
    fn matrix_names(&self) -> [PathBuf; 3] {
        [self.k.clone(), self.p("L.hrry"), self.p("H.hrry")]
    }

    /// The CLI refuses `args`: exit status 2, a message naming `output`
    /// and `input`, `input` unchanged, nothing left behind.
    fn refused(&self, args: &[&str], output: &Path, input: &Path) {
        let before = std::fs::read(input).unwrap();
        let names = listing(self.dir.path());
        let o = cli(args);
        let err = &o.stderr;
        assert_eq!(o.code, 2, "{args:?}: {err}");
        assert!(err.contains("is the input"), "{args:?}: {err}");
        assert!(err.contains(s(output)), "{args:?}: output not named: {err}");
        assert!(err.contains(s(input)), "{args:?}: input not named: {err}");
        assert!(
            std::fs::read(input).unwrap() == before,
            "{args:?}: input changed"
        );
        assert_eq!(listing(self.dir.path()), names, "{args:?}");
    }
}

/// A library result that must be `Error::OutputIsInput` naming `output`
/// and `input`.
fn assert_output_is_input(e: &Error, output: &Path, input: &Path) {
    match e {
        Error::OutputIsInput {
            output: o,
            input: i,
        } => {
            assert_eq!(o, output, "{e}");
            assert_eq!(i, input, "{e}");
        }
        e => panic!("expected OutputIsInput, got {e}"),
    }
}

fn matrix_refusal<T: std::fmt::Debug>(r: Result<T, MatrixError>, output: &Path, input: &Path) {
    match r {
        Err(MatrixError::Crate(e)) => assert_output_is_input(&e, output, input),
        other => panic!("expected OutputIsInput, got {other:?}"),
    }
}

#[test]
fn spy_and_export_onto_the_matrix_are_refused() {
    let st = Setup::new();
    let k = s(&st.k);
    for out in st.matrix_names() {
        let o = s(&out);
        st.refused(&["spy", k, "--out", o, "-q"], &out, &st.k);
        for to in ["mtx", "npz", "petsc"] {
            st.refused(&["export", k, "--to", to, o, "-q"], &out, &st.k);
        }
    }
    // The same commands onto another file work.
    ok(["spy", k, "--out", s(&st.p("K.png")), "-q"]);
    ok(["export", k, "--to", "mtx", s(&st.p("K.mtx")), "-q"]);
}

#[test]
fn matvec_onto_the_matrix_or_onto_x_is_refused() {
    let st = Setup::new();
    let (k, x) = (s(&st.k), s(&st.x));
    for out in st.matrix_names() {
        st.refused(
            &["matvec", k, "--x", x, "--out", s(&out), "-q"],
            &out,
            &st.k,
        );
    }
    for name in ["x.npy", "xl.npy", "xh.npy"] {
        let out = st.p(name);
        st.refused(
            &["matvec", k, "--x", x, "--out", s(&out), "-q"],
            &out,
            &st.x,
        );
    }
    let y = st.p("y.npy");
    ok(["matvec", k, "--x", x, "--out", s(&y), "-q"]);
    assert_eq!(vector::read_vector(&y).unwrap().len(), 20);
}

#[test]
fn convert_rewrites_its_input_in_place() {
    let st = Setup::new();
    let k = s(&st.k);
    let original = std::fs::read(&st.k).unwrap();
    // The reference: the same conversion into another file.
    let want = st.p("want.hrry");
    ok(["convert", k, s(&want), "--to", "csr", "-q"]);
    ok(["convert", k, k, "--to", "csr", "-q"]);
    assert!(std::fs::read(&st.k).unwrap() == std::fs::read(&want).unwrap());
    assert!(HurrayFile::open(&st.k).unwrap().verify().is_empty());
    // And back: the sorted COO file assembled at the start.
    ok(["convert", k, k, "--to", "coo", "-q"]);
    assert!(std::fs::read(&st.k).unwrap() == original);
    // Through the library, and through the external sort (CSC).
    let opts = ConvertOptions {
        to: OutputLayout::Csc,
        ..ConvertOptions::default()
    };
    let s1 = convert(&st.k, &st.k, &opts).unwrap();
    assert_eq!(s1.nnz, 40);
    assert!(s1.sorted_by.is_some());
    let opts = ConvertOptions {
        to: OutputLayout::Coo,
        ..ConvertOptions::default()
    };
    convert(&st.k, &st.k, &opts).unwrap();
    assert!(std::fs::read(&st.k).unwrap() == original);
    let mut names = listing(st.dir.path());
    names.retain(|n| n.starts_with('.'));
    assert!(names.is_empty(), "{names:?}");
}

/// Converting one tensor of a file that holds more (a plan: its pattern,
/// order, starts and keys) in place would drop the rest: refused before
/// anything is written, naming what would be lost; the file is untouched.
#[test]
fn convert_in_place_of_one_tensor_among_several_is_refused() {
    let st = Setup::new();
    let p = st.p("K.plan");
    let names = crate::common::plan_file(&p);
    let before = std::fs::read(&p).unwrap();
    assert!(names.len() > 1, "{names:?}");
    let first = names[0].as_str();
    crate::fails_with(
        [
            "convert",
            s(&p),
            s(&p),
            "--to",
            "csr",
            "--tensor",
            first,
            "-q",
        ],
        2,
        "in place would drop its",
    );
    assert!(std::fs::read(&p).unwrap() == before);
    // Into another file it is fine.
    ok([
        "convert",
        s(&p),
        s(&st.p("one.hrry")),
        "--to",
        "csr",
        "--tensor",
        first,
        "-q",
    ]);
    let mut left = listing(st.dir.path());
    left.retain(|n| n.starts_with('.'));
    assert!(left.is_empty(), "{left:?}");
}

/// Two row bands of a 20 x 20 matrix as plain files (row indices local to
/// the band, rows 0..8 and 8..20), and the composite `name` they make.
fn parts(st: &Setup, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let (mut top, mut bottom) = (String::new(), String::new());
    for line in matrix_text(20, 20).lines() {
        let (i, rest) = line.split_once(' ').unwrap();
        let i: u64 = i.parse().unwrap();
        match i.checked_sub(8) {
            None => top.push_str(&format!("{i} {rest}\n")),
            Some(local) => bottom.push_str(&format!("{local} {rest}\n")),
        }
    }
    let p0 = assemble(st.dir.path(), "p0", "8,20", &top);
    let p1 = assemble(st.dir.path(), "p1", "12,20", &bottom);
    let c = st.p(name);
    join(&c, &p0, &p1);
    (p0, p1, c)
}

/// `composite join` of the two bands into `out`.
fn join(out: &Path, p0: &Path, p1: &Path) {
    ok([
        "composite",
        "join",
        "--shape",
        "20,20",
        "--name",
        "K",
        "--output",
        s(out),
        &format!("{}@0", s(p0)),
        &format!("{}@8", s(p1)),
    ]);
}

#[test]
fn composite_join_onto_a_part_is_refused_and_to_coo_converts_in_place() {
    let st = Setup::new();
    let (p0, p1, c) = parts(&st, "C.hrry");
    let hard = st.p("p1hard.hrry");
    std::fs::hard_link(&p1, &hard).unwrap();
    for (out, input) in [(&p0, &p0), (&p1, &p1), (&hard, &p1)] {
        let (a0, a1) = (format!("{}@0", s(&p0)), format!("{}@8", s(&p1)));
        let args = [
            "composite",
            "join",
            "--shape",
            "20,20",
            "--output",
            s(out),
            &a0,
            &a1,
        ];
        st.refused(&args, out, input);
    }
    // Library: the same refusal.
    let list = vec![(p0.clone(), vec![0, 0]), (p1.clone(), vec![8, 0])];
    let e = coo_assembler::composite::join(&list, &[20, 20], &hard, "K").unwrap_err();
    assert_output_is_input(&e, &hard, &p1);
    // to-coo and convert of a composite are conversions: in place is fine.
    let copy = st.p("C-copy.hrry");
    std::fs::copy(&c, &copy).unwrap();
    let want = st.p("want.hrry");
    ok(["composite", "to-coo", s(&c), s(&want)]);
    ok(["composite", "to-coo", s(&c), s(&c)]);
    assert!(std::fs::read(&c).unwrap() == std::fs::read(&want).unwrap());
    let want_csr = st.p("want-csr.hrry");
    ok(["convert", s(&copy), s(&want_csr), "--to", "csr", "-q"]);
    ok(["convert", s(&copy), s(&copy), "--to", "csr", "-q"]);
    assert!(std::fs::read(&copy).unwrap() == std::fs::read(&want_csr).unwrap());
    // The library's conversion of an open composite onto its own file.
    let c3 = st.p("C3.hrry");
    join(&c3, &p0, &p1);
    let comp = CompositeFile::open(&c3).unwrap();
    convert(&c3, &c3, &ConvertOptions::default()).unwrap();
    drop(comp);
    assert!(std::fs::read(&c3).unwrap() == std::fs::read(&want).unwrap());
    let mut names = listing(st.dir.path());
    names.retain(|n| n.starts_with('.'));
    assert!(names.is_empty(), "{names:?}");
}

#[test]
fn assemble_onto_its_input_is_refused() {
    let st = Setup::new();
    let input = st.p("in.txt");
    std::fs::write(&input, matrix_text(20, 20)).unwrap();
    let link = st.p("in-link.txt");
    std::os::unix::fs::symlink(&input, &link).unwrap();
    let hard = st.p("in-hard.txt");
    std::fs::hard_link(&input, &hard).unwrap();
    for out in [&input, &link, &hard] {
        let args = [
            "assemble",
            "--shape",
            "20,20",
            "--input",
            s(&input),
            "--format",
            "text",
            "--output",
            s(out),
            "-q",
        ];
        st.refused(&args, out, &input);
    }
}

#[test]
fn library_writers_refuse_their_inputs() {
    let st = Setup::new();
    let names = listing(st.dir.path());
    let original = std::fs::read(&st.k).unwrap();
    // Mapped and read into memory: both remember their file.
    let files = [
        HurrayFile::open(&st.k).unwrap(),
        HurrayFile::open_with(
            &st.k,
            ReadOptions {
                in_memory: true,
                ..Default::default()
            },
        )
        .unwrap(),
    ];
    for f in &files {
        let m = Matrix::of_file(f, None).unwrap();
        for out in st.matrix_names() {
            for format in [Format::Mtx, Format::Npz, Format::Petsc] {
                let r = export::export(&m, format, &out, &ExportOptions::default());
                matrix_refusal(r, &out, &st.k);
            }
            let r = matrix::spy(f, None, &out, &SpyOptions::default());
            matrix_refusal(r, &out, &st.k);
        }
        let x = vector::VectorFile::read(&st.x).unwrap();
        let y = matrix::matvec(&m, x.values(), false, &MatvecOptions::default()).unwrap();
        for out in st.matrix_names() {
            matrix_refusal(vector::write_product(&out, &y, &m, &x), &out, &st.k);
        }
        for name in ["x.npy", "xl.npy", "xh.npy"] {
            let out = st.p(name);
            matrix_refusal(vector::write_product(&out, &y, &m, &x), &out, &st.x);
        }
    }
    assert!(std::fs::read(&st.k).unwrap() == original);
    assert_eq!(listing(st.dir.path()), names);
    // A matrix of bytes in memory has no file to protect.
    let mem = HurrayFile::from_bytes(original.clone()).unwrap();
    let m = Matrix::of_file(&mem, None).unwrap();
    let out = st.p("mem.mtx");
    export::export(&m, Format::Mtx, &out, &ExportOptions::default()).unwrap();
}
