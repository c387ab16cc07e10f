//! The `coo-assembler` command line, run as a process: assemble from every
//! input format, inspect with info / get / dump / verify, and every error
//! path (exit code, message, no panic text, no leftover files).

use crate::common;
use crate::common::{listing, s};

// Issue 8 (input formats and messages), beside these helpers.
#[path = "cli/input.rs"]
mod input;
#[path = "cli/signals.rs"]
mod signals;

use coo_assembler::HurrayFile;
use coo_assembler::write::{FileWriter, WriteOptions};
use coo_assembler::{DType, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{ok, run};
use common::Ran as Out;

/// A work directory with `in/`, `out/` and `tmp/` (spill) subdirectories.
struct Work {
    _d: tempfile::TempDir,
    root: PathBuf,
}

impl Work {
    fn new() -> Work {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        for sub in ["in", "out", "tmp"] {
            std::fs::create_dir(root.join(sub)).unwrap();
        }
        Work { _d: d, root }
    }
    fn input(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.root.join("in").join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
    fn out(&self, name: &str) -> PathBuf {
        self.root.join("out").join(name)
    }
    fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }
    /// `assemble` with `--temp-dir` set to our spill directory.
    fn assemble(&self, input: &str, out: &Path, extra: &[&str]) -> Out {
        self.assemble_in(input, out, extra, None)
    }
    fn assemble_in(&self, input: &str, out: &Path, extra: &[&str], stdin: Option<&[u8]>) -> Out {
        let tmp = self.tmp();
        let mut args = vec![
            "assemble",
            "--input",
            input,
            "--output",
            s(out),
            "--temp-dir",
            s(&tmp),
        ];
        args.extend_from_slice(extra);
        match stdin {
            Some(data) => crate::cli().run_with_input(&args, data),
            None => run(&args),
        }
    }
    /// Nothing but `expected` in out/, nothing in tmp/.
    fn clean(&self, expected: &[&str]) {
        assert_eq!(listing(&self.root.join("out")), expected);
        assert!(
            listing(&self.tmp()).is_empty(),
            "{:?}",
            listing(&self.tmp())
        );
    }
}

fn bin_record_f64(i: u64, j: u64, v: f64) -> Vec<u8> {
    let mut r = i.to_le_bytes().to_vec();
    r.extend_from_slice(&j.to_le_bytes());
    r.extend_from_slice(&v.to_le_bytes());
    r
}

fn entries(p: &Path) -> Vec<(Vec<u64>, Value)> {
    let f = HurrayFile::open(p).unwrap();
    assert!(f.verify().is_empty(), "{:?}", f.verify());
    let t = f.only_tensor().unwrap();
    assert!(t.is_sorted());
    t.iter().map(|(i, v)| (i.to_vec(), v)).collect()
}

fn fl(e: &[(&[u64], f64)]) -> Vec<(Vec<u64>, Value)> {
    e.iter()
        .map(|(i, v)| (i.to_vec(), Value::Float(*v)))
        .collect()
}

// ---------------------------------------------------------------- assemble

#[test]
fn text_input_with_duplicates_and_comments() {
    let w = Work::new();
    let inp = w.input(
        "a.txt",
        b"# i j value\n2 1 1.5\n0 0 -1\n\n2 1 0.25  # again\n1 2 1e-3\n0 0 3\n",
    );
    let out = w.out("a.hrry");
    let o = w.assemble(
        s(&inp),
        &out,
        &["--shape", "3,3", "--format", "text", "--quiet"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stderr, "", "--quiet prints nothing");
    assert_eq!(o.stdout, "");
    w.clean(&["a.hrry"]);
    assert_eq!(
        entries(&out),
        fl(&[(&[0, 0], 2.0), (&[1, 2], 1e-3), (&[2, 1], 1.75)])
    );
    assert_eq!(ok(["get", s(&out), "2,1"]).stdout, "1.75\n");
    assert_eq!(ok(["get", s(&out), "0, 0"]).stdout, "2.0\n");
    assert_eq!(ok(["get", s(&out), "1,1"]).stdout, "0.0\n", "a miss is 0");
    assert_eq!(
        ok(["dump", s(&out)]).stdout,
        "0 0 2.0\n1 2 0.001\n2 1 1.75\n"
    );
    assert_eq!(
        ok(["dump", s(&out), "--limit", "2"]).stdout,
        "0 0 2.0\n1 2 0.001\n"
    );
    assert_eq!(ok(["dump", s(&out), "--limit", "0"]).stdout, "");
    assert_eq!(ok(["verify", s(&out)]).stdout, "OK\n");
}

#[test]
fn summary_without_quiet() {
    let w = Work::new();
    let inp = w.input("a.txt", b"0 1\n0 2\n0 3\n");
    let out = w.out("a.hrry");
    let o = w.assemble(s(&inp), &out, &["--shape", "4", "--format", "text"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.starts_with("wrote "), "{}", o.stderr);
    assert!(
        o.stderr.contains("3 contributions -> 1 entry in "),
        "{}",
        o.stderr
    );
    assert_eq!(ok(["get", s(&out), "0"]).stdout, "6.0\n");
    // Only what happened: no spill story without spills, no rate of a run
    // too short to time, singular for one.
    for noise in [
        "0 spilled",
        "0.0 M contributions/s",
        "1 entries",
        "0 B",
        "nnz",
    ] {
        assert!(!o.stderr.contains(noise), "{noise:?} in {}", o.stderr);
    }
}

#[test]
fn text_input_is_recognised_without_format() {
    let w = Work::new();
    let inp = w.input("k.txt", b"# a comment\n0 0 1.5\n2 1 -2\n0 0 0.5\n");
    let out = w.out("k.hrry");
    let o = w.assemble(s(&inp), &out, &["--shape", "3,3", "-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(ok(["get", s(&out), "0,0"]).stdout, "2.0\n");
    // A binary file is still read as records.
    let mut b = Vec::new();
    b.extend(bin_record_f64(2, 1, 4.0));
    let inp = w.input("k.bin", &b);
    let o = w.assemble(s(&inp), &out, &["--shape", "3,3", "-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(ok(["get", s(&out), "2,1"]).stdout, "4.0\n");
    w.clean(&["k.hrry"]);
}

#[test]
fn bin_input_f64_rank2() {
    let w = Work::new();
    let mut b = Vec::new();
    for (i, j, v) in [(1, 1, 0.5), (0, 3, 2.0), (1, 1, 0.25), (4, 0, -7.0)] {
        b.extend(bin_record_f64(i, j, v));
    }
    assert_eq!(b.len(), 4 * 24);
    let inp = w.input("a.bin", &b);
    let out = w.out("a.hrry");
    // bin and f64 are the defaults.
    let o = w.assemble(s(&inp), &out, &["--shape", "5,4", "-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    w.clean(&["a.hrry"]);
    assert_eq!(
        entries(&out),
        fl(&[(&[0, 3], 2.0), (&[1, 1], 0.75), (&[4, 0], -7.0)])
    );
    let f = HurrayFile::open(&out).unwrap();
    let t = f.only_tensor().unwrap();
    assert_eq!(t.dtype(), DType::F64);
    assert_eq!(t.shape(), &[5, 4]);
    assert_eq!(t.name(), "coo");
}

#[test]
fn bin_input_i32_rank3_and_f32() {
    let w = Work::new();
    let mut b = Vec::new();
    for (i, v) in [
        ([0u64, 1, 2], 5i32),
        ([2, 0, 1], -3),
        ([0, 1, 2], 7),
        ([1, 1, 1], 0),
    ] {
        for x in i {
            b.extend_from_slice(&x.to_le_bytes());
        }
        b.extend_from_slice(&v.to_le_bytes());
    }
    let inp = w.input("a.bin", &b);
    let out = w.out("a.hrry");
    let o = w.assemble(
        s(&inp),
        &out,
        &["--shape", "3,2,3", "--dtype", "i32", "-q", "--name", "K"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let f = HurrayFile::open(&out).unwrap();
    let t = f.tensor("K").unwrap();
    assert_eq!(t.dtype(), DType::I32);
    assert_eq!(t.values::<i32>().unwrap(), &[12, 0, -3]);
    assert_eq!(t.indices(), &[0, 1, 2, 1, 1, 1, 2, 0, 1]);
    assert_eq!(ok(["get", s(&out), "2,0,1"]).stdout, "-3\n");

    let mut b = Vec::new();
    for (i, v) in [(3u64, 1.5f32), (0, -2.0), (3, 0.25)] {
        b.extend_from_slice(&i.to_le_bytes());
        b.extend_from_slice(&v.to_le_bytes());
    }
    let inp = w.input("b.bin", &b);
    let out = w.out("b.hrry");
    let o = w.assemble(s(&inp), &out, &["--shape", "4", "--dtype", "f32", "-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let f = HurrayFile::open(&out).unwrap();
    let t = f.only_tensor().unwrap();
    assert_eq!(t.values::<f32>().unwrap(), &[-2.0, 1.75]);
    assert_eq!(ok(["dump", s(&out)]).stdout, "0 -2.0\n3 1.75\n");
    w.clean(&["a.hrry", "b.hrry"]);
}

#[test]
fn mtx_real_general() {
    let w = Work::new();
    let inp = w.input(
        "a.mtx",
        b"%%MatrixMarket matrix coordinate real general\n% comment\n3 4 4\n1 1 1.5\n3 4 -2\n1 1 0.5\n2 3 1e2\n",
    );
    let out = w.out("a.hrry");
    let o = w.assemble(s(&inp), &out, &["--format", "mtx", "-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        entries(&out),
        fl(&[(&[0, 0], 2.0), (&[1, 2], 100.0), (&[2, 3], -2.0)])
    );
    let f = HurrayFile::open(&out).unwrap();
    assert_eq!(f.only_tensor().unwrap().shape(), &[3, 4]);
    // --shape agreeing with the header is accepted; disagreeing is a usage error.
    let o = w.assemble(
        s(&inp),
        &w.out("b.hrry"),
        &["--format", "mtx", "-q", "--shape", "3,4"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = w.assemble(
        s(&inp),
        &w.out("c.hrry"),
        &["--format", "mtx", "-q", "--shape", "4,4"],
    );
    o.fails(2, &["--shape", "MatrixMarket header"]);
    // The file's own (1-based) numbers with --one-based; 0-based otherwise.
    assert_eq!(ok(["get", s(&out), "--one-based", "2,3"]).stdout, "100.0\n");
    assert_eq!(ok(["get", s(&out), "1,2"]).stdout, "100.0\n");
    let o = run(["get", s(&out), "--one-based", "0,3"]);
    o.fails(2, &["--one-based counts from 1"]);
    w.clean(&["a.hrry", "b.hrry"]);
}

#[test]
fn mtx_integer_symmetric() {
    let w = Work::new();
    let inp = w.input(
        "a.mtx",
        b"%%MatrixMarket matrix coordinate integer symmetric\n3 3 3\n1 1 4\n3 1 -2\n3 2 7\n",
    );
    let out = w.out("a.hrry");
    let o = w.assemble(s(&inp), &out, &["--format", "mtx", "--dtype", "i64", "-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let f = HurrayFile::open(&out).unwrap();
    let t = f.only_tensor().unwrap();
    assert_eq!(t.values::<i64>().unwrap(), &[4, -2, 7, -2, 7]);
    assert_eq!(t.indices(), &[0, 0, 0, 2, 1, 2, 2, 0, 2, 1]);
    assert_eq!(ok(["get", s(&out), "0,2"]).stdout, "-2\n");
    assert_eq!(ok(["get", s(&out), "2,2"]).stdout, "0\n");
}

#[test]
fn mtx_pattern_and_skew_symmetric() {
    let w = Work::new();
    let inp = w.input(
        "p.mtx",
        b"%%MatrixMarket matrix coordinate pattern general\n2 2 3\n1 2\n2 1\n1 2\n",
    );
    let out = w.out("p.hrry");
    let o = w.assemble(s(&inp), &out, &["--format", "mtx", "-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(entries(&out), fl(&[(&[0, 1], 2.0), (&[1, 0], 1.0)]));

    let inp = w.input(
        "s.mtx",
        b"%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1.5\n3 2 -4\n",
    );
    let out = w.out("s.hrry");
    let o = w.assemble(s(&inp), &out, &["--format", "mtx", "-q"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(
        entries(&out),
        fl(&[
            (&[0, 1], -1.5),
            (&[1, 0], 1.5),
            (&[1, 2], 4.0),
            (&[2, 1], -4.0)
        ])
    );
    // A diagonal entry is refused in a skew-symmetric file, naming the line.
    let inp = w.input(
        "d.mtx",
        b"%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n2 2 1\n",
    );
    let o = w.assemble(s(&inp), &w.out("d.hrry"), &["--format", "mtx", "-q"]);
    o.fails(1, &["d.mtx:line 3", "diagonal"]);
    w.clean(&["p.hrry", "s.hrry"]);
}

#[test]
fn stdin_input() {
    let w = Work::new();
    let out = w.out("a.hrry");
    let o = w.assemble_in(
        "-",
        &out,
        &["--shape", "2,2", "--format", "text", "-q"],
        Some(b"1 1 2\n1 1 3\n0 1 -1\n"),
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(entries(&out), fl(&[(&[0, 1], -1.0), (&[1, 1], 5.0)]));
    // Errors on stdin name <stdin> and the line.
    let o = w.assemble_in(
        "-",
        &w.out("b.hrry"),
        &["--shape", "2,2", "--format", "text", "-q"],
        Some(b"1 1 2\n1 x 3\n"),
    );
    o.fails(1, &["<stdin>:line 2", "\"x\""]);
    w.clean(&["a.hrry"]);
}

#[test]
fn duplicate_policies_and_drop_zeros() {
    let w = Work::new();
    let inp = w.input("a.txt", b"0 5\n1 2\n0 -3\n1 -2\n0 4\n2 7\n");
    let cases = [
        ("sum", vec![6.0, 0.0, 7.0]),
        ("min", vec![-3.0, -2.0, 7.0]),
        ("max", vec![5.0, 2.0, 7.0]),
        ("last", vec![4.0, -2.0, 7.0]),
    ];
    for (policy, want) in cases {
        let out = w.out(&format!("{policy}.hrry"));
        let o = w.assemble(
            s(&inp),
            &out,
            &[
                "--shape",
                "3",
                "--format",
                "text",
                "-q",
                "--duplicates",
                policy,
            ],
        );
        assert_eq!(o.code, 0, "{policy}: {}", o.stderr);
        let got: Vec<f64> = entries(&out).iter().map(|(_, v)| v.to_f64()).collect();
        assert_eq!(got, want, "{policy}");
    }
    // sum + --drop-zeros removes coordinate 1.
    let out = w.out("dz.hrry");
    let o = w.assemble(
        s(&inp),
        &out,
        &["--shape", "3", "--format", "text", "-q", "--drop-zeros"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(entries(&out), fl(&[(&[0], 6.0), (&[2], 7.0)]));
    assert_eq!(ok(["get", s(&out), "1"]).stdout, "0.0\n");

    let o = w.assemble(
        s(&inp),
        &w.out("err.hrry"),
        &[
            "--shape",
            "3",
            "--format",
            "text",
            "-q",
            "--duplicates",
            "error",
        ],
    );
    o.fails(1, &["duplicate", "at (0) (0-based"]);
    let o = w.assemble(
        s(&inp),
        &w.out("bad.hrry"),
        &[
            "--shape",
            "3",
            "--format",
            "text",
            "-q",
            "--duplicates",
            "mean",
        ],
    );
    o.fails(2, &["mean"]);
    w.clean(&["dz.hrry", "last.hrry", "max.hrry", "min.hrry", "sum.hrry"]);
}

#[test]
fn small_budget_spills_and_gives_the_same_bytes() {
    let w = Work::new();
    let n = 600_000u64;
    let mut b = Vec::with_capacity(n as usize * 24);
    let mut rng = common::Rng::new(0x9E37_79B9_7F4A_7C15);
    for k in 0..n {
        let c = rng.below(1_000_000); // mostly distinct coordinates, some repeated
        b.extend(bin_record_f64(
            c / 1000,
            c % 1000,
            (k % 97) as f64 * 0.1 - 3.0,
        ));
    }
    let inp = w.input("big.bin", &b);
    let small = w.out("small.hrry");
    let big = w.out("big.hrry");
    let o = w.assemble(
        s(&inp),
        &small,
        &["--shape", "1000,1000", "--memory-budget", "8MiB"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    // The summary says how many runs were spilled: must be some.
    let spilled: u64 = o
        .stderr
        .split("; ")
        .find(|part| part.contains(" spilled ("))
        .and_then(|r| r.split(' ').next())
        .and_then(|v| v.replace(',', "").parse().ok())
        .unwrap_or_else(|| panic!("no spill count in {:?}", o.stderr));
    assert!(spilled > 0, "8MiB should spill: {}", o.stderr);
    let o = w.assemble(
        s(&inp),
        &big,
        &["--shape", "1000,1000", "--memory-budget", "256MiB", "-q"],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let a = std::fs::read(&small).unwrap();
    assert!(a == std::fs::read(&big).unwrap(), "files differ");
    assert!(HurrayFile::open(&small).unwrap().verify().is_empty());
    w.clean(&["big.hrry", "small.hrry"]);
}

// ------------------------------------------------------------- inspection

fn multi_file(p: &Path) {
    let mut fw = FileWriter::create(p, WriteOptions::default()).unwrap();
    let mut t = fw.begin_tensor("A", DType::F64, &[3, 3]).unwrap();
    t.push(&[0, 1], 1.5f64).unwrap();
    t.push(&[2, 2], -4.0f64).unwrap();
    t.finish().unwrap();
    let mut t = fw.begin_tensor("b vec", DType::U16, &[10]).unwrap();
    t.push(&[7], 9u16).unwrap();
    t.finish().unwrap();
    fw.finish().unwrap();
}

#[test]
fn info_text_and_json() {
    let w = Work::new();
    let p = w.out("m.hrry");
    multi_file(&p);
    let o = ok(["info", s(&p)]);
    let v = ok(["info", "--verbose", s(&p)]);
    for needle in [
        "Hurray file, 2 tensors,",
        "tensor \"A\"\n",
        "tensor \"b vec\"\n",
        "type:        f64",
        "type:        u16",
        "shape:       3 x 3 (9 elements)",
        "stored:      2 entries, 22.2 % of all elements",
        "layout:      COO, sorted by coordinate (row-major), no duplicates",
        "over all 9 elements, implicit zeros included",
        "smallest -4.0, largest 1.5, largest magnitude 4.0",
        "coo_assembler.writer = coo-assembler ",
    ] {
        assert!(o.stdout.contains(needle), "{needle:?} not in\n{}", o.stdout);
        assert!(v.stdout.contains(needle), "{needle:?} not in\n{}", v.stdout);
    }
    // Checksums, flag bits and the mask: for --verbose (and --json) only.
    for needle in [
        "coo_assembler.xxh3.A.values = ",
        "flags 0x",
        "stats mask:  0x",
        "values 16 B, indices 32 B",
    ] {
        assert!(!o.stdout.contains(needle), "{needle:?} in\n{}", o.stdout);
        assert!(v.stdout.contains(needle), "{needle:?} not in\n{}", v.stdout);
    }
    let j = ok(["info", "--json", s(&p)]).stdout;
    let j = j.trim();
    assert!(j.starts_with('{') && j.ends_with('}'), "{j}");
    // Balanced braces and brackets outside strings.
    let (mut depth, mut in_str, mut esc) = (0i32, false, false);
    for c in j.chars() {
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, '\\') => esc = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth -= 1;
                assert!(depth >= 0, "{j}");
            }
            _ => {}
        }
    }
    assert_eq!(depth, 0, "{j}");
    for needle in [
        "\"alignment\":4096",
        "\"name\":\"A\",\"dtype\":\"f64\",\"shape\":[3,3],\"nnz\":2,\"is_sorted\":true,\"values_bytes\":16,\"indices_bytes\":32",
        "\"name\":\"b vec\",\"dtype\":\"u16\",\"shape\":[10],\"nnz\":1",
        "\"sparsity_ratio\":0.7777777777777778",
        "\"min\":-4.0,\"max\":1.5,\"abs_max\":4.0",
        "\"has_nan\":false,\"has_inf\":false",
        "\"coo_assembler.writer\":\"coo-assembler ",
        "\"coo_assembler.xxh3.A.values\":",
        "\"flags\":",
        "\"computed_mask\":",
    ] {
        assert!(j.contains(needle), "{needle:?} not in\n{j}");
    }
    assert_eq!(j.matches("\"statistics\":").count(), 2);
}

#[test]
fn tensor_choice_on_a_multi_tensor_file() {
    let w = Work::new();
    let p = w.out("m.hrry");
    multi_file(&p);
    for args in [vec!["get", s(&p), "0,1"], vec!["dump", s(&p)]] {
        let o = run(&args);
        o.fails(2, &["--tensor"]);
        assert_eq!(o.stdout, "");
    }
    assert_eq!(ok(["get", s(&p), "0,1", "--tensor", "A"]).stdout, "1.5\n");
    assert_eq!(ok(["get", s(&p), "7", "--tensor", "b vec"]).stdout, "9\n");
    assert_eq!(ok(["get", s(&p), "6", "--tensor", "b vec"]).stdout, "0\n");
    assert_eq!(
        ok(["dump", s(&p), "--tensor", "A"]).stdout,
        "0 1 1.5\n2 2 -4.0\n"
    );
    assert_eq!(
        ok(["dump", s(&p), "--tensor", "b vec", "--limit", "5"]).stdout,
        "7 9\n"
    );
    // verify without --tensor checks every tensor; with it, one.
    assert_eq!(ok(["verify", s(&p)]).stdout, "OK\n");
    assert_eq!(ok(["verify", s(&p), "--tensor", "A"]).stdout, "OK\n");
    let o = run(["get", s(&p), "0", "--tensor", "nope"]);
    assert_ne!(o.code, 0);
    o.fails(o.code, &["\"nope\"", "\"A\""]);
}

#[test]
fn get_usage_errors() {
    let w = Work::new();
    let p = w.out("m.hrry");
    multi_file(&p);
    let o = run(["get", s(&p), "0", "--tensor", "A"]);
    o.fails(2, &["expected 2 indices, got 1"]);
    let o = run(["get", s(&p), "0,3", "--tensor", "A"]);
    o.fails(2, &["3"]);
    let o = run(["get", s(&p), "0,x", "--tensor", "A"]);
    o.fails(2, &["\"x\""]);
    assert_eq!(o.stdout, "");
}

// ------------------------------------------------------------------ errors

#[test]
fn assemble_usage_errors() {
    let w = Work::new();
    let inp = w.input("a.txt", b"0 0 1\n");
    let out = w.out("a.hrry");
    let cases: &[(&[&str], &[&str])] = &[
        (&["--format", "text"], &["--shape is required"]),
        (
            &["--format", "text", "--shape", "2,2", "--dtype", "f128"],
            &["f128"],
        ),
        (
            &["--format", "text", "--shape", "2,x"],
            &["--shape", "\"x\""],
        ),
        (&["--format", "csv", "--shape", "2,2"], &["csv"]),
        (
            &[
                "--format",
                "text",
                "--shape",
                "2,2",
                "--memory-budget",
                "8XB",
            ],
            &["--memory-budget", "XB"],
        ),
        (
            &[
                "--format",
                "text",
                "--shape",
                "2,2",
                "--memory-budget",
                "1KiB",
            ],
            &["too small", "at least"],
        ),
        (
            &["--format", "text", "--shape", "2,2", "--reject", "inf"],
            &["non-finite policy", "\"inf\""],
        ),
        (
            &["--format", "text", "--shape", "2,2", "--bogus"],
            &["--bogus"],
        ),
    ];
    for (extra, needles) in cases {
        let o = w.assemble(s(&inp), &out, extra);
        o.fails(2, needles);
        w.clean(&[]);
    }
    // The minimum the message gives is accepted.
    let o = w.assemble(
        s(&inp),
        &out,
        &[
            "--format",
            "text",
            "--shape",
            "2,2",
            "--memory-budget",
            "1KiB",
        ],
    );
    // "... at least 3.4 MiB is needed (3538944 bytes)": the exact count.
    let min: String = o
        .stderr
        .split("is needed (")
        .nth(1)
        .unwrap()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    assert!(
        o.stderr
            .contains("memory budget of 1 KiB is too small: at least "),
        "{}",
        o.stderr
    );
    let o = w.assemble(
        s(&inp),
        &out,
        &[
            "--format",
            "text",
            "--shape",
            "2,2",
            "--memory-budget",
            &min,
            "-q",
        ],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    w.clean(&["a.hrry"]);
}

#[test]
fn assemble_data_errors_leave_nothing() {
    let w = Work::new();
    let out = w.out("a.hrry");
    let text = |name: &str, body: &[u8], shape: &str, needles: &[&str]| {
        let inp = w.input(name, body);
        let o = w.assemble(s(&inp), &out, &["--format", "text", "--shape", shape, "-q"]);
        o.fails(1, needles);
        w.clean(&[]);
    };
    text(
        "oob.txt",
        b"0 0 1\n# c\n0 5 1\n",
        "3,3",
        &["oob.txt:line 3", "out of range"],
    );
    text(
        "nan.txt",
        b"0 0 1\n1 1 one\n",
        "3,3",
        &["nan.txt:line 2", "\"one\"", "not a number"],
    );
    text(
        "few.txt",
        b"0 1\n",
        "3,3",
        &["few.txt:line 1", "value is missing"],
    );
    text("neg.txt", b"-1 0 1\n", "3,3", &["neg.txt:line 1", "\"-1\""]);
    {
        let inp = w.input("int2.txt", b"0 0 1\n1 1 1.5\n");
        let o = w.assemble(
            s(&inp),
            &out,
            &["--format", "text", "--shape", "3,3", "--dtype", "i32", "-q"],
        );
        o.fails(1, &["int2.txt:line 2", "not an integer"]);
        let inp = w.input("range.txt", b"0 0 300\n");
        let o = w.assemble(
            s(&inp),
            &out,
            &["--format", "text", "--shape", "3,3", "--dtype", "u8", "-q"],
        );
        o.fails(1, &["range.txt:line 1", "300"]);
        w.clean(&[]);
    }

    // A truncated bin record: 2 whole records then 10 bytes.
    let mut b = bin_record_f64(0, 0, 1.0);
    b.extend(bin_record_f64(1, 1, 2.0));
    b.extend_from_slice(&[0; 10]);
    let inp = w.input("t.bin", &b);
    // A file is refused up front (its size is known), a stream at the end.
    let o = w.assemble(s(&inp), &out, &["--shape", "2,2", "-q"]);
    o.fails(
        1,
        &["t.bin:start", "58 bytes is not a whole number", "24 bytes"],
    );
    w.clean(&[]);
    let o = crate::cli().run_with_input(
        [
            "assemble",
            "--shape",
            "2,2",
            "-q",
            "--input",
            "-",
            "-o",
            s(&out),
        ],
        &b,
    );
    o.fails(
        1,
        &[
            "<stdin>:record 2",
            "truncated",
            "24 bytes",
            "rank 2 x 8 + 8 for f64",
        ],
    );
    w.clean(&[]);
    // Out of range in bin names the record.
    let mut b = bin_record_f64(0, 0, 1.0);
    b.extend(bin_record_f64(0, 9, 2.0));
    let inp = w.input("r.bin", &b);
    let o = w.assemble(s(&inp), &out, &["--shape", "2,2", "-q"]);
    o.fails(1, &["r.bin:record 1", "out of range"]);
    w.clean(&[]);

    // MatrixMarket with the wrong entry count, both ways.
    let inp = w.input(
        "few.mtx",
        b"%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1\n2 2 1\n",
    );
    let o = w.assemble(s(&inp), &out, &["--format", "mtx", "-q"]);
    o.fails(
        1,
        &["few.mtx:end of input", "2 entries found", "announces 3"],
    );
    let inp = w.input(
        "many.mtx",
        b"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n2 2 1\n",
    );
    let o = w.assemble(s(&inp), &out, &["--format", "mtx", "-q"]);
    o.fails(1, &["many.mtx:line 4", "more entries"]);
    let inp = w.input(
        "bad.mtx",
        b"%%MatrixMarket vector array real general\n2 2\n",
    );
    let o = w.assemble(s(&inp), &out, &["--format", "mtx", "-q"]);
    o.fails(1, &["bad.mtx:line 1", "coordinate"]);
    let inp = w.input(
        "zero.mtx",
        b"%%MatrixMarket matrix coordinate real general\n2 2 1\n0 1 1\n",
    );
    let o = w.assemble(s(&inp), &out, &["--format", "mtx", "-q"]);
    o.fails(1, &["zero.mtx:line 3", "start at 1"]);
    w.clean(&[]);

    // Nonexistent input.
    let missing = w.root.join("in").join("missing.txt");
    let o = w.assemble(
        s(&missing),
        &out,
        &["--format", "text", "--shape", "2", "-q"],
    );
    o.fails(1, &["missing.txt"]);
    w.clean(&[]);
}

#[test]
fn unwritable_output_leaves_nothing() {
    let w = Work::new();
    let inp = w.input("a.txt", b"0 0 1\n");
    // A directory that does not exist, and a path through a regular file
    // (ENOTDIR even for root, where permission bits do not stop writes).
    let nodir = w.root.join("out").join("nope").join("a.hrry");
    let o = w.assemble(
        s(&inp),
        &nodir,
        &["--format", "text", "--shape", "2,2", "-q"],
    );
    o.fails(1, &["nope"]);
    let notdir = inp.join("a.hrry");
    let o = w.assemble(
        s(&inp),
        &notdir,
        &["--format", "text", "--shape", "2,2", "-q"],
    );
    o.fails(1, &["a.txt"]);
    w.clean(&[]);
    assert_eq!(listing(&w.root.join("in")), ["a.txt"]);
    // The output path is an existing directory.
    let o = w.assemble(
        s(&inp),
        &w.root.join("out"),
        &["--format", "text", "--shape", "2,2", "-q"],
    );
    assert_eq!(o.code, 1, "{}", o.stderr);
    o.fails(1, &[]);
    w.clean(&[]);
    assert_eq!(listing(&w.root), ["in", "out", "tmp"]);
}

#[test]
fn inspecting_bad_files() {
    let w = Work::new();
    let good = w.out("good.hrry");
    multi_file(&good);
    let bytes = std::fs::read(&good).unwrap();
    let trunc = w.input("trunc.hrry", &bytes[..bytes.len() - 7]);
    let garbage = w.input("garbage.hrry", &vec![0x5A; 9000]);
    let empty = w.input("empty.hrry", b"");
    let dir = w.root.join("in");
    for p in [&trunc, &garbage, &empty, &dir] {
        for cmd in ["info", "verify", "dump"] {
            let o = run([cmd, s(p)]);
            o.fails(1, &["cannot read", s(p)]);
            assert_eq!(o.stdout, "", "{cmd} {p:?}");
        }
        let o = run(["info", "--json", s(p)]);
        o.fails(1, &["cannot read"]);
    }
    let o = run(["info", s(&w.root.join("missing.hrry"))]);
    o.fails(1, &["missing.hrry"]);
}

#[test]
fn verify_reports_each_broken_content_rule() {
    use common::*;
    let w = Work::new();
    // Out of bounds, unsorted and duplicate entries, with correct
    // statistics and checksums.
    let mut t = tensor::<f32>(
        "coo",
        &[4, 5],
        &[
            (vec![0, 1], 1.0),
            (vec![2, 0], 2.0),
            (vec![1, 4], 3.0),
            (vec![1, 4], 4.0),
            (vec![3, 9], 5.0),
        ],
        true,
    );
    t.stats = Some(stats_for(&t));
    let (b, _) = build(std::slice::from_ref(&t), &checksums(&t), Opts::default());
    let p = w.input("content.hrry", &b);
    let o = run(["verify", s(&p)]);
    o.fails(1, &["error"]);
    let lines: Vec<&str> = o.stdout.lines().collect();
    for needle in [
        "[not-sorted] tensor \"coo\" entry 2",
        "[duplicate] tensor \"coo\" entry 3",
        "[index-out-of-bounds] tensor \"coo\" entry 4",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(needle)),
            "{needle:?} not in\n{}",
            o.stdout
        );
    }
    // Wrong statistics (the value range) and a wrong checksum.
    let mut t = tensor::<f32>(
        "coo",
        &[4, 5],
        &[(vec![0, 1], 1.0), (vec![2, 0], 2.0)],
        true,
    );
    let mut st = stats_for(&t);
    st.value_max = 9.0;
    t.stats = Some(st);
    let mut kv = checksums(&t);
    kv[1].1 = coo_assembler::internals::hurray::KvValue::U64(42);
    let (b, _) = build(std::slice::from_ref(&t), &kv, Opts::default());
    let p = w.input("stats.hrry", &b);
    let o = run(["verify", s(&p)]);
    // The checksum is an error; the statistics only a warning.
    o.fails(1, &["1 error and 1 warning"]);
    assert!(
        o.stdout
            .contains("warning: [statistics-mismatch] tensor \"coo\""),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("value_max"), "{}", o.stdout);
    assert!(
        o.stdout.contains("[checksum-mismatch] tensor \"coo\""),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("indices"), "{}", o.stdout);
    // get and dump still work on such a file (permissive open).
    assert_eq!(ok(["get", s(&p), "2,0"]).stdout, "2.0\n");
}

#[test]
fn verify_detects_flipped_bytes_behind_a_fixed_crc() {
    use common::*;
    let w = Work::new();
    let (mut b, lay, _) = small();
    // Corrupt an index value inside the indices buffer: entry 1 = (1, 4) ->
    // (1, 7): out of bounds (no CRC covers the buffers; the xxh3 does).
    let off = lay.indices_offsets[0] as usize + 3 * 8;
    b[off] = 7;
    let p = w.input("flip.hrry", &b);
    let o = run(["verify", s(&p)]);
    o.fails(1, &["error"]);
    assert!(
        o.stdout
            .contains("[index-out-of-bounds] tensor \"coo\" entry 1"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("[checksum-mismatch]"), "{}", o.stdout);
    // Corrupt the index section (a name byte) and fix the CRC: the name
    // changes, the KV checksums become orphans.
    let (mut b, lay, _) = small();
    let name_at = lay.index_offset as usize + 8 + 2;
    assert_eq!(b[name_at], b'c');
    b[name_at] = b'k';
    let p = w.input("broken-crc.hrry", &b);
    let o = run(["info", s(&p)]);
    o.fails(1, &["CRC"]);
    assert!(fix_crc(&mut b));
    let p = w.input("renamed.hrry", &b);
    let o = run(["verify", s(&p)]);
    o.fails(1, &["error"]);
    assert!(o.stdout.contains("[checksum-orphan]"), "{}", o.stdout);
    assert!(o.stdout.contains("coo_assembler.xxh3.coo."), "{}", o.stdout);
}

/// A bit flipped in a checksum's KV key name must not make the checksum
/// vanish: the file says we wrote it with checksums, so a buffer without
/// one is reported, and `verify --strict` fails even when a value was
/// damaged too (which the lost checksum would have caught).
#[test]
fn verify_reports_a_checksum_lost_to_a_damaged_key() {
    let w = Work::new();
    let txt = w.input("k.txt", b"0 1 1234.5\n1 0 -2\n2 2 7\n");
    let out = w.out("k.hrry");
    let o = w.assemble(s(&txt), &out, &["--shape", "3,3", "--format", "text"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    ok(["verify", "--strict", s(&out)]);
    let mut b = std::fs::read(&out).unwrap();
    let key = b"coo_assembler.xxh3.coo.values";
    let at = b
        .windows(key.len())
        .position(|x| x == key)
        .expect("the values' checksum key");
    // "xxh3" -> "xxh2": the key no longer parses as a checksum.
    b[at + "coo_assembler.xxh".len()] ^= 0x01;
    let p = w.input("key-flip.hrry", &b);
    let o = run(["verify", s(&p)]);
    assert!(o.stdout.contains("[checksum-missing]"), "{}", o.stdout);
    let o = run(["verify", "--strict", s(&p)]);
    o.fails(1, &["warnings fail under --strict"]);
    assert!(o.stdout.contains("[checksum-missing]"), "{}", o.stdout);
    // And a flipped value behind it: still refused by --strict.
    let v = 1234.5f64.to_le_bytes();
    let at = b
        .windows(8)
        .position(|x| x == v)
        .expect("the value's bytes");
    b[at + 2] ^= 0x10;
    let p = w.input("key-and-value-flip.hrry", &b);
    let o = run(["verify", "--strict", s(&p)]);
    o.fails(1, &["warnings fail under --strict"]);
    assert!(o.stdout.contains("[checksum-missing]"), "{}", o.stdout);
}

/// A file of several tensors read without a name: the error says how
/// many there are and which, not a placeholder quoted as a name.
#[test]
fn dump_of_a_file_of_several_tensors_names_them() {
    let w = Work::new();
    let p = w.out("K.plan");
    common::plan_file(&p);
    let o = run(["dump", s(&p)]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("tensors ("), "{}", o.stderr);
    assert!(o.stderr.contains("name the one to use"), "{}", o.stderr);
    assert!(!o.stderr.contains("<the only tensor>"), "{}", o.stderr);
}

// -------------------------------------------------------------------- help

#[test]
fn help_texts() {
    let o = ok(["--help"]);
    for needle in [
        "assemble",
        "info",
        "get",
        "dump",
        "verify",
        "Examples:",
        "Exit status",
    ] {
        assert!(o.stdout.contains(needle), "{needle:?} not in\n{}", o.stdout);
    }
    let o = ok(["assemble", "--help"]);
    for needle in [
        "--shape",
        "--dtype",
        "--input",
        "--format",
        "--memory-budget",
        "--threads",
        "--temp-dir",
        "--duplicates",
        "--drop-zeros",
        "--non-finite",
        "--name",
        "--output",
        "--quiet",
        "Example",
        "coo-assembler assemble --shape",
    ] {
        assert!(o.stdout.contains(needle), "{needle:?} not in\n{}", o.stdout);
    }
    for sub in ["info", "get", "dump", "verify"] {
        let o = ok([sub, "--help"]);
        assert!(o.stdout.contains("Usage: coo-assembler "), "{}", o.stdout);
    }
    // No subcommand: usage on stderr, exit 2.
    let o = run::<&str>([]);
    o.fails(2, &["Usage"]);
    let v = ok(["--version"]);
    assert!(v.stdout.starts_with("coo-assembler "), "{}", v.stdout);
}

/// `coo-assembler ARGS` given `limit` to exit: a hang is a failure (the
/// child is killed), not a test run that never ends.
fn run_within(args: &[&str], limit: std::time::Duration) -> Out {
    let mut child = crate::cli()
        .command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn coo-assembler");
    let start = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            child.kill().unwrap();
            let _ = child.wait();
            panic!("{args:?} did not exit within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    Out {
        code: o.status.code().expect("exited by a signal"),
        stdout: String::from_utf8(o.stdout).unwrap(),
        stderr: String::from_utf8(o.stderr).unwrap(),
    }
}

/// Issue 22: `info` on a FIFO waited for a writer forever; on a directory
/// it said "No such device". Both exit 1 at once, naming what the path is.
#[test]
fn info_on_a_fifo_or_a_directory_says_what_it_is_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.hrry");
    let c = std::ffi::CString::new(s(&fifo)).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let limit = std::time::Duration::from_secs(30);
    for (path, what) in [
        (&fifo, "a FIFO (named pipe), not a Hurray file"),
        (&dir.path().to_path_buf(), "a directory, not a Hurray file"),
    ] {
        for cmd in ["info", "verify"] {
            let o = run_within(&[cmd, s(path)], limit);
            o.fails(1, &[what, s(path)]);
        }
    }
}
