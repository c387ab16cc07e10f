//! `coo-assembler refill PLAN VALUES -o OUT` (issue 24): a plan saved by
//! the library, values as `.npy` (any numeric type) or raw little-endian
//! values, the output the builder's entries for the same contributions;
//! values of the wrong length, an output naming an input and a damaged
//! plan each get an error that says what is wrong, and leave no output.

use coo_assembler::{
    AssembleOptions, Builder, DType, HurrayFile, Plan, options::OutputLayout, read::Tensor,
};
use std::path::Path;

/// `coo-assembler refill ARGS`: its exit code and standard error.
fn run(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let o = crate::run(std::iter::once("refill".as_ref()).chain(args.iter().copied()));
    (o.code, o.stderr)
}

/// A 1-D little-endian `.npy` of f32 values, written by hand.
fn write_npy_f32(path: &Path, v: &[f32]) {
    let mut header = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}",
        v.len()
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(header.len() as u16).to_le_bytes());
    b.extend_from_slice(header.as_bytes());
    for x in v {
        b.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(path, b).expect("write npy");
}

fn entries(path: &Path) -> (Vec<u8>, Vec<u64>, Vec<u64>) {
    let f = HurrayFile::open(path).expect("open");
    match f.tensor_view("coo").expect("tensor") {
        Tensor::Compressed(c) => (
            c.values_bytes().to_vec(),
            c.indices().to_vec(),
            c.pointers().to_vec(),
        ),
        Tensor::Coo(c) => (c.values_bytes().to_vec(), c.indices().to_vec(), Vec::new()),
        Tensor::Csf(_) => unreachable!("plans are never CSF"),
    }
}

#[test]
fn refill_writes_what_the_builder_writes() {
    let dir = tempfile::tempdir().expect("dir");
    let d = dir.path();
    let n = 5000usize;
    let rows: Vec<u32> = (0..n as u32).map(|k| (k / 7) % 300).collect();
    let cols: Vec<u32> = (0..n as u32).map(|k| (k * 13 / 7) % 300).collect();
    let v: Vec<f32> = (0..n).map(|k| (k % 11) as f32 * 0.37 - 1.5).collect();
    let opts = AssembleOptions {
        layout: OutputLayout::Csr,
        temp_dir: Some(d.into()),
        ..Default::default()
    };
    let plan = Plan::new(
        &[&rows[..], &cols[..]],
        &[300, 300],
        DType::F64,
        &opts,
        None,
    )
    .expect("plan");
    plan.save(d.join("K.plan")).expect("save");
    let mut b = Builder::new(&[300, 300], DType::F64, opts.clone()).expect("builder");
    for k in 0..n {
        b.push(&[rows[k] as u64, cols[k] as u64], v[k])
            .expect("push");
    }
    b.finish(d.join("want.hrry")).expect("finish");

    // .npy of f32 values (widened exactly, as a push widens them).
    write_npy_f32(&d.join("v.npy"), &v);
    let (code, err) = run(&[
        d.join("K.plan").as_os_str(),
        d.join("v.npy").as_os_str(),
        "-o".as_ref(),
        d.join("a.hrry").as_os_str(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(&format!(
            "{} entries",
            coo_assembler::element::group_digits(plan.nnz() as u128)
        )),
        "{err}"
    );
    assert_eq!(entries(&d.join("a.hrry")), entries(&d.join("want.hrry")));

    // Raw little-endian f64 values.
    let raw: Vec<u8> = v.iter().flat_map(|&x| (x as f64).to_le_bytes()).collect();
    std::fs::write(d.join("v.f64"), &raw).expect("write");
    let (code, err) = run(&[
        d.join("K.plan").as_os_str(),
        d.join("v.f64").as_os_str(),
        "-q".as_ref(),
        "-o".as_ref(),
        d.join("b.hrry").as_os_str(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(entries(&d.join("b.hrry")), entries(&d.join("want.hrry")));

    // Too few values: says how many the plan takes; no output.
    std::fs::write(d.join("short.f64"), &raw[..raw.len() - 8]).expect("write");
    let (code, err) = run(&[
        d.join("K.plan").as_os_str(),
        d.join("short.f64").as_os_str(),
        "-o".as_ref(),
        d.join("c.hrry").as_os_str(),
    ]);
    assert_ne!(code, 0);
    assert!(err.contains(&format!("the plan takes {n} values")), "{err}");
    assert!(!d.join("c.hrry").exists());

    // The output may not be the plan or the values file.
    let before = std::fs::read(d.join("K.plan")).expect("read");
    let (code, err) = run(&[
        d.join("K.plan").as_os_str(),
        d.join("v.npy").as_os_str(),
        "-o".as_ref(),
        d.join("K.plan").as_os_str(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(std::fs::read(d.join("K.plan")).expect("read"), before);

    // A damaged plan is refused.
    let mut bad = before.clone();
    let at = bad.len() / 3;
    bad[at] ^= 1;
    std::fs::write(d.join("bad.plan"), bad).expect("write");
    let (code, err) = run(&[
        d.join("bad.plan").as_os_str(),
        d.join("v.npy").as_os_str(),
        "-o".as_ref(),
        d.join("e.hrry").as_os_str(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("invalid Hurray file") || err.contains("checksum"),
        "{err}"
    );
    assert!(!d.join("e.hrry").exists());
}

/// `--memory-budget`, `--threads` and `--temp-dir` are one group of flags
/// shared by `assemble`, `plan` and `refill`: the same grammar, the same
/// range check (the library's), the same message and exit code 2 before
/// any input is read.
#[test]
fn assemble_plan_and_refill_share_their_resource_flags() {
    let d = tempfile::tempdir().unwrap();
    let none = d.path().join("missing");
    let none = none.to_str().unwrap();
    let out = d.path().join("o").to_str().unwrap().to_string();
    let commands: [Vec<&str>; 3] = [
        vec!["assemble", "--input", none, "--shape", "2,2", "-o", &out],
        vec!["plan", "--input", none, "--shape", "2,2", "-o", &out],
        vec!["refill", none, none, "-o", &out],
    ];
    for args in &commands {
        for (flag, value, want) in [
            ("--threads", "0", "threads must be in 1..=1024, got 0"),
            ("--threads", "1025", "threads must be in 1..=1024, got 1025"),
            ("--memory-budget", "12 parsecs", "--memory-budget"),
        ] {
            let o = crate::run(args.iter().copied().chain([flag, value]));
            let err = &o.stderr;
            assert_eq!(o.code, 2, "{args:?} {flag} {value}: {err}");
            assert!(err.contains(want), "{args:?} {flag} {value}: {err}");
        }
        let help = crate::ok_text([args[0], "--help"]);
        for flag in [
            "--memory-budget <SIZE>",
            "--threads <N>",
            "--temp-dir <DIR>",
        ] {
            assert!(help.contains(flag), "{} --help lacks {flag}", args[0]);
        }
    }
}
