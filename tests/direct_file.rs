//! Issue 23: a bin input file whose work fits the budget is assembled by
//! the in-memory kernel reading the records in place, straight into the
//! output file (`Source::assemble_to`, which the CLI uses). The file must
//! be byte for byte the builder's, the errors the builder's, and the
//! resident set within the budget (the mapped input is given back as it is
//! read).

use coo_assembler::input::Source;
use coo_assembler::{
    AssembleOptions, DType, options::DuplicatePolicy, options::NonFinitePolicy,
    options::OutputLayout,
};
use std::path::Path;
use std::process::{Command, Stdio};

/// Records in element order: 1-D "elements" of `nodes` consecutive nodes
/// each, every pair of an element's nodes hit once per element, so most
/// coordinates are hit by two or more elements (as in FE).
fn fe_records(elements: u64, nodes: u64, value: impl Fn(u64) -> f64) -> (Vec<u8>, u64) {
    let mut out = Vec::new();
    let mut k = 0u64;
    for e in 0..elements {
        for a in 0..nodes {
            for b in 0..nodes {
                let (r, c) = (e + a, e + b);
                out.extend_from_slice(&r.to_le_bytes());
                out.extend_from_slice(&c.to_le_bytes());
                out.extend_from_slice(&value(k).to_le_bytes());
                k += 1;
            }
        }
    }
    (out, elements + nodes)
}

/// A value with many digits, so that an inexact sum would show.
fn wobbly(k: u64) -> f64 {
    (k.wrapping_mul(2_654_435_761) % 1000) as f64 / 7.0 - 70.0
}

/// `o` with the builder's in-memory kernel off: the reference the
/// kernel's files are compared with is the sorters' path.
fn sorted(o: &AssembleOptions) -> AssembleOptions {
    AssembleOptions {
        in_memory_kernel: false,
        ..o.clone()
    }
}

fn opts(layout: OutputLayout) -> AssembleOptions {
    AssembleOptions {
        memory_budget: 64 << 20,
        threads: 2,
        layout,
        ..AssembleOptions::default()
    }
}

/// Assemble `input` both ways: (kernel file, its summary's runs, builder file).
fn both(
    input: &Path,
    shape: &[u64],
    dtype: Option<DType>,
    o: &AssembleOptions,
) -> (Vec<u8>, u64, Vec<u8>) {
    let dir = input.parent().unwrap();
    let a = dir.join("kernel.hrry");
    let b = dir.join("builder.hrry");
    let s = Source::open(input, None)
        .unwrap()
        .assemble_to(&a, Some(shape), dtype, o.clone(), |_| {})
        .unwrap();
    let src = Source::open(input, None).unwrap();
    let mut bld = src.builder(Some(shape), dtype, sorted(o)).unwrap();
    src.push_into(&mut bld, |_| {}).unwrap();
    bld.finish(&b).unwrap();
    (
        std::fs::read(&a).unwrap(),
        s.runs,
        std::fs::read(&b).unwrap(),
    )
}

#[test]
fn kernel_file_is_the_builders_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fe.bin");
    let (bytes, n) = fe_records(30_000, 6, wobbly);
    std::fs::write(&input, &bytes).unwrap();
    for layout in [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc] {
        for dup in [
            DuplicatePolicy::Sum,
            DuplicatePolicy::Last,
            DuplicatePolicy::Max,
        ] {
            for drop_zeros in [false, true] {
                let o = AssembleOptions {
                    duplicates: dup,
                    drop_zeros,
                    ..opts(layout)
                };
                let (k, runs, b) = both(&input, &[n, n], None, &o);
                assert_eq!(runs, 0, "{layout:?} {dup:?}: the kernel took it");
                assert!(
                    k == b,
                    "{layout:?} {dup:?} drop_zeros {drop_zeros}: bytes differ"
                );
            }
        }
    }
}

#[test]
fn kernel_file_for_other_types_ranks_and_thread_counts() {
    let dir = tempfile::tempdir().unwrap();
    // f32 records (16 + 4 bytes), some values that cancel exactly.
    let input = dir.path().join("f32.bin");
    let mut bytes = Vec::new();
    for k in 0..200_000u64 {
        let (r, c) = (k / 7, k / 7 + k % 3);
        bytes.extend_from_slice(&r.to_le_bytes());
        bytes.extend_from_slice(&c.to_le_bytes());
        let v = if k % 5 == 0 {
            0.0f32
        } else {
            (k % 13) as f32 * 0.1 - 0.6
        };
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(&input, &bytes).unwrap();
    let shape = [200_000 / 7 + 1, 200_000 / 7 + 3];
    for threads in [1, 2, 3] {
        let o = AssembleOptions {
            threads,
            drop_zeros: true,
            ..opts(OutputLayout::Coo)
        };
        let (k, runs, b) = both(&input, &shape, Some(DType::F32), &o);
        assert_eq!(runs, 0);
        assert!(k == b, "f32, {threads} threads: bytes differ");
    }
    // i32 records, integer sums.
    let input = dir.path().join("i32.bin");
    let mut bytes = Vec::new();
    for k in 0..100_000u64 {
        for x in [k / 4, k % 4] {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        bytes.extend_from_slice(&((k % 9) as i32 - 4).to_le_bytes());
    }
    std::fs::write(&input, &bytes).unwrap();
    let (k, runs, b) = both(
        &input,
        &[25_000, 4],
        Some(DType::I32),
        &opts(OutputLayout::Csr),
    );
    assert_eq!(runs, 0);
    assert!(k == b, "i32: bytes differ");
    // Rank 3, in element order.
    let input = dir.path().join("r3.bin");
    let mut bytes = Vec::new();
    for k in 0..150_000u64 {
        for x in [k / 50, (k / 5) % 10, k % 5] {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        bytes.extend_from_slice(&wobbly(k).to_le_bytes());
    }
    std::fs::write(&input, &bytes).unwrap();
    let (k, runs, b) = both(&input, &[3000, 10, 5], None, &opts(OutputLayout::Coo));
    assert_eq!(runs, 0);
    assert!(k == b, "rank 3: bytes differ");
}

#[test]
fn scattered_input_goes_through_the_builder_with_the_same_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("rand.bin");
    let mut bytes = Vec::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..400_000 {
        for _ in 0..2 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            bytes.extend_from_slice(&(x % 100_000).to_le_bytes());
        }
        bytes.extend_from_slice(&wobbly(x).to_le_bytes());
    }
    std::fs::write(&input, &bytes).unwrap();
    // Random coordinates are not local: the file's kernel declines them
    // and the builder takes them, sorting (its kernel off here)...
    let o = sorted(&opts(OutputLayout::Coo));
    let (k, runs, b) = both(&input, &[100_000, 100_000], None, &o);
    assert!(runs > 0, "the builder's sorters took them");
    assert!(k == b);
    // ...or, by default, keeping them for its own kernel (in memory, where
    // reading them once per band costs no disk).
    let (k, runs, b) = both(&input, &[100_000, 100_000], None, &opts(OutputLayout::Coo));
    assert_eq!(runs, 0, "the builder's kernel took them");
    assert!(k == b);
}

/// The error of the builder's path for the same input and options.
fn builder_error(input: &Path, shape: &[u64], o: &AssembleOptions) -> String {
    let out = input.with_extension("b.hrry");
    let src = Source::open(input, None).unwrap();
    let mut b = src.builder(Some(shape), None, sorted(o)).unwrap();
    let r = src
        .push_into(&mut b, |_| {})
        .and_then(|_| b.finish(&out).map(|_| ()));
    r.unwrap_err().to_string()
}

#[test]
fn refused_records_and_duplicates_give_the_builders_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, n) = fe_records(20_000, 4, wobbly);
    let shape = [n, n];
    // Record 150000's column beyond the extent.
    let at = 150_000 * 24 + 8;
    bytes[at..at + 8].copy_from_slice(&(n + 5).to_le_bytes());
    let input = dir.path().join("bad.bin");
    std::fs::write(&input, &bytes).unwrap();
    let o = opts(OutputLayout::Csr);
    let out = dir.path().join("k.hrry");
    let e = Source::open(&input, None)
        .unwrap()
        .assemble_to(&out, Some(&shape), None, o.clone(), |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("record 150000"), "{e}");
    assert_eq!(e, builder_error(&input, &shape, &o));
    assert!(!out.exists());
    // NaN refused by the policy.
    let (mut bytes, _) = fe_records(20_000, 4, wobbly);
    bytes[7_000 * 24 + 16..7_000 * 24 + 24].copy_from_slice(&f64::NAN.to_le_bytes());
    std::fs::write(&input, &bytes).unwrap();
    let o = AssembleOptions {
        non_finite: NonFinitePolicy::RejectNan,
        ..opts(OutputLayout::Coo)
    };
    let e = Source::open(&input, None)
        .unwrap()
        .assemble_to(&out, Some(&shape), None, o.clone(), |_| {})
        .unwrap_err()
        .to_string();
    assert_eq!(e, builder_error(&input, &shape, &o));
    // A duplicate under `error`, told with the records behind it.
    let (bytes, _) = fe_records(20_000, 4, wobbly);
    std::fs::write(&input, &bytes).unwrap();
    let o = AssembleOptions {
        duplicates: DuplicatePolicy::Error,
        ..opts(OutputLayout::Coo)
    };
    let e = Source::open(&input, None)
        .unwrap()
        .assemble_to(&out, Some(&shape), None, o.clone(), |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("record"), "{e}");
    assert_eq!(e, builder_error(&input, &shape, &o));
    assert!(!out.exists());
    // An output that is the input is refused before any work.
    let e = Source::open(&input, None)
        .unwrap()
        .assemble_to(&input, Some(&shape), None, opts(OutputLayout::Coo), |_| {})
        .unwrap_err();
    assert!(e.to_string().contains("input"), "{e}");
    assert_eq!(std::fs::read(&input).unwrap(), bytes);
}

/// Peak RSS of this process (VmHWM, KiB): the process's own high-water
/// mark (wait4's `ru_maxrss` of a child would include its parent's).
pub(crate) fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The budget of the kernel's RSS test: the budget holds the kernel's
/// working memory, the writer's buffers and the mapped input's window.
const RSS_BUDGET_MIB: u64 = 32;

/// Run in a fresh process by `kernel_path_keeps_rss_within_the_budget`:
/// assemble the file it names and print the peak RSS.
#[test]
#[ignore = "run by kernel_path_keeps_rss_within_the_budget in a child process"]
fn rss_child() {
    let Ok(input) = std::env::var("DIRECT_FILE_RSS_INPUT") else {
        return;
    };
    let n: u64 = std::env::var("DIRECT_FILE_RSS_N").unwrap().parse().unwrap();
    let input = Path::new(&input);
    let before = vm_hwm_kib();
    let o = AssembleOptions {
        memory_budget: RSS_BUDGET_MIB << 20,
        ..AssembleOptions::default()
    };
    let s = Source::open(input, None)
        .unwrap()
        .assemble_to(
            &input.with_extension("k.hrry"),
            Some(&[n, n]),
            None,
            o,
            |_| {},
        )
        .unwrap();
    println!(
        "RSS-CHILD runs={} before={before} peak={}",
        s.runs,
        vm_hwm_kib()
    );
}

/// Run the ignored test `test` of this binary in a child process with
/// `env`, and read back its line `RSS-CHILD runs=R before=B peak=P`
/// (peak RSS in KiB, the child's own): (R, B, P).
pub(crate) fn rss_child_run(test: &str, env: &[(&str, &std::ffi::OsStr)]) -> (u64, u64, u64) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        test,
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.stderr(Stdio::inherit()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let at = text.find("RSS-CHILD").unwrap_or_else(|| panic!("{text}"));
    let line = text[at..].lines().next().unwrap();
    let field = |k: &str| -> u64 {
        let w = line.split_whitespace().find(|w| w.starts_with(k)).unwrap();
        w[k.len()..].parse().unwrap()
    };
    (field("runs="), field("before="), field("peak="))
}

/// A 123 MiB input under a 32 MiB budget: the kernel takes it (no run)
/// and the peak RSS stays within the budget plus 32 MiB above the start:
/// the mapped records are given back as they are read. Then the file is
/// the builder's.
#[test]
fn kernel_path_keeps_rss_within_the_budget() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fe.bin");
    let mut n = 0;
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        // Written in pieces, so that this process stays small too.
        for piece in 0..20u64 {
            let (bytes, _) = fe_records(30_000, 3, wobbly);
            let shift = piece * 30_000;
            for r in bytes.chunks_exact(24) {
                let row = u64::from_le_bytes(r[0..8].try_into().unwrap()) + shift;
                let col = u64::from_le_bytes(r[8..16].try_into().unwrap()) + shift;
                f.write_all(&row.to_le_bytes()).unwrap();
                f.write_all(&col.to_le_bytes()).unwrap();
                f.write_all(&r[16..24]).unwrap();
                n = n.max(row.max(col) + 1);
            }
        }
        f.flush().unwrap();
    }
    let len = std::fs::metadata(&input).unwrap().len();
    assert!(len > 100 << 20);
    let n_text = n.to_string();
    let (runs, before, peak) = rss_child_run(
        "direct_file::rss_child",
        &[
            ("DIRECT_FILE_RSS_INPUT", input.as_os_str()),
            ("DIRECT_FILE_RSS_N", n_text.as_ref()),
        ],
    );
    eprintln!(
        "input {} MiB: peak RSS {} MiB, {} MiB at the start",
        len >> 20,
        peak / 1024,
        before / 1024
    );
    assert_eq!(runs, 0, "the kernel took it");
    let above = (peak - before.min(peak)) / 1024;
    assert!(
        above <= RSS_BUDGET_MIB + 32,
        "peak RSS {above} MiB above the start: more than the {RSS_BUDGET_MIB} MiB budget + 32 MiB"
    );
    // The builder's bytes.
    let b = dir.path().join("B.hrry");
    let src = Source::open(&input, None).unwrap();
    let o = AssembleOptions {
        memory_budget: RSS_BUDGET_MIB << 20,
        ..AssembleOptions::default()
    };
    let mut bld = src.builder(Some(&[n, n]), None, sorted(&o)).unwrap();
    src.push_into(&mut bld, |_| {}).unwrap();
    bld.finish(&b).unwrap();
    assert!(std::fs::read(input.with_extension("k.hrry")).unwrap() == std::fs::read(&b).unwrap());
}

#[test]
fn arrays_to_file_is_the_builders_file() {
    use coo_assembler::internals::assemble::direct::assemble_arrays_to_file;
    let dir = tempfile::tempdir().unwrap();
    // Random coordinates (arrays in memory take the kernel whatever their
    // order), with many duplicates.
    let n = 300_000usize;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let rows: Vec<i64> = (0..n).map(|_| (next() % 5_000) as i64).collect();
    let cols: Vec<i64> = (0..n).map(|_| (next() % 5_000) as i64).collect();
    let vals: Vec<f64> = (0..n).map(|k| wobbly(k as u64)).collect();
    for layout in [OutputLayout::Coo, OutputLayout::Csr] {
        let o = opts(layout);
        let a = dir.path().join("a.hrry");
        let s =
            assemble_arrays_to_file(&[5_000, 5_000], DType::F64, &[&rows, &cols], &vals, &a, &o)
                .unwrap();
        assert_eq!(s.runs, 0, "the kernel took it");
        let b = dir.path().join("b.hrry");
        let mut bld = coo_assembler::Builder::new(&[5_000, 5_000], DType::F64, sorted(&o)).unwrap();
        for ((&r, &c), &v) in rows.iter().zip(&cols).zip(&vals) {
            bld.push(&[r as u64, c as u64], v).unwrap();
        }
        bld.finish(&b).unwrap();
        assert!(
            std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap(),
            "{layout:?}"
        );
    }
    // A negative index: the builder's message, nothing written.
    let mut bad = rows.clone();
    bad[1234] = -3;
    let out = dir.path().join("bad.hrry");
    let e = assemble_arrays_to_file(
        &[5_000, 5_000],
        DType::F64,
        &[&bad, &cols],
        &vals,
        &out,
        &opts(OutputLayout::Coo),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("1234") && e.contains("-3"), "{e}");
    assert!(!out.exists());
    // i32 values into an i32 tensor: integer sums.
    let ivals: Vec<i32> = (0..n).map(|k| (k % 7) as i32 - 3).collect();
    let a = dir.path().join("i.hrry");
    assemble_arrays_to_file(
        &[5_000, 5_000],
        DType::I32,
        &[&rows, &cols],
        &ivals,
        &a,
        &opts(OutputLayout::Coo),
    )
    .unwrap();
    let b = dir.path().join("ib.hrry");
    let mut bld = coo_assembler::Builder::new(
        &[5_000, 5_000],
        DType::I32,
        sorted(&opts(OutputLayout::Coo)),
    )
    .unwrap();
    for ((&r, &c), &v) in rows.iter().zip(&cols).zip(&ivals) {
        bld.push(&[r as u64, c as u64], v).unwrap();
    }
    bld.finish(&b).unwrap();
    assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap());
}

/// A complex tensor from arrays into a file (doubles or complex values):
/// the builder's file, byte for byte (the file sink carries one lane per
/// value, so the work goes through the builder; the in-memory kernel
/// taking complex tensors must not send it to that sink).
#[test]
fn complex_arrays_to_file_are_the_builders_file() {
    use coo_assembler::element::Complex;
    use coo_assembler::internals::assemble::direct::assemble_arrays_to_file;
    let dir = tempfile::tempdir().unwrap();
    let n = 20_000usize;
    let rows: Vec<i64> = (0..n).map(|k| (k * 7 % 301) as i64).collect();
    let cols: Vec<i64> = (0..n).map(|k| (k * 13 % 299) as i64).collect();
    let reals: Vec<f64> = (0..n).map(|k| wobbly(k as u64)).collect();
    let zs: Vec<Complex<f64>> = (0..n)
        .map(|k| Complex::new(wobbly(k as u64), -wobbly(k as u64 + 17)))
        .collect();
    let o = opts(OutputLayout::Csr);
    let shape = [301u64, 299];
    let builder_file = |name: &str, push: &dyn Fn(&mut coo_assembler::Builder, usize)| {
        let p = dir.path().join(name);
        let mut bld = coo_assembler::Builder::new(&shape, DType::C128, sorted(&o)).unwrap();
        for k in 0..n {
            push(&mut bld, k);
        }
        bld.finish(&p).unwrap();
        std::fs::read(&p).unwrap()
    };
    let a = dir.path().join("r.hrry");
    assemble_arrays_to_file(&shape, DType::C128, &[&rows, &cols], &reals, &a, &o).unwrap();
    let want = builder_file("rb.hrry", &|b, k| {
        b.push(&[rows[k] as u64, cols[k] as u64], reals[k]).unwrap()
    });
    assert!(std::fs::read(&a).unwrap() == want, "from doubles");
    let a = dir.path().join("z.hrry");
    assemble_arrays_to_file(&shape, DType::C128, &[&rows, &cols], &zs, &a, &o).unwrap();
    let want = builder_file("zb.hrry", &|b, k| {
        b.push(&[rows[k] as u64, cols[k] as u64], zs[k]).unwrap()
    });
    assert!(std::fs::read(&a).unwrap() == want, "from complex values");
}

/// Bool arrays into a file: the file stream writes values of a byte or
/// more, so bools (bits in the file) take the builder's path; the same
/// bytes as pushing them.
#[test]
fn bool_arrays_to_file_are_the_builders_file() {
    use coo_assembler::internals::assemble::direct::assemble_arrays_to_file;
    let dir = tempfile::tempdir().unwrap();
    let n = 20_000usize;
    let rows: Vec<i64> = (0..n).map(|k| (k * 7 % 301) as i64).collect();
    let cols: Vec<i64> = (0..n).map(|k| (k * 13 % 299) as i64).collect();
    let v: Vec<bool> = (0..n).map(|k| k % 5 == 0).collect();
    let shape = [301u64, 299];
    let o = opts(OutputLayout::Csr);
    let a = dir.path().join("g.hrry");
    assemble_arrays_to_file(&shape, DType::Bool, &[&rows, &cols], &v, &a, &o).unwrap();
    let b = dir.path().join("gb.hrry");
    let mut bld = coo_assembler::Builder::new(&shape, DType::Bool, sorted(&o)).unwrap();
    for k in 0..n {
        bld.push(&[rows[k] as u64, cols[k] as u64], v[k]).unwrap();
    }
    bld.finish(&b).unwrap();
    assert!(std::fs::read(&a).unwrap() == std::fs::read(&b).unwrap());
}
