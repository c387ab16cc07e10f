//! CSR and CSC output: assembled straight into each layout (tiny budgets
//! that force spills and multi-pass merges), read back through the
//! reference implementation (hurray-io / hurray-core 0.1.0), and compared
//! with a BTreeMap oracle, buffer by buffer, statistics and KV checksums
//! included.

use crate::common;

use common::reference;
use coo_assembler::write::{FileWriter, WriteOptions};
use coo_assembler::{AssembleOptions, Builder, DType, Error, Value, options::OutputLayout};
use hurray_core::LayoutDescriptor;
use hurray_io::file::KvValue as RefKv;
use std::collections::BTreeMap;
use std::path::Path;

type Oracle = BTreeMap<(u64, u64), Value>;

/// What the reference reader returns for one tensor.
struct RefTensor {
    tag: u8,
    dtype_tag: u8,
    shape: Vec<u64>,
    nnz: u64,
    buffers: Vec<Vec<u8>>,
    stats_nnz: Option<u64>,
    kv: Vec<(String, RefKv)>,
}

fn read_reference(path: &Path, name: &str) -> RefTensor {
    let mut r = reference::RefFile::open(path);
    let kv = r.kv();
    let t = r.tensor(name);
    let d = &t.descriptor;
    let nnz = match &d.layout {
        LayoutDescriptor::Csr(c) => c.nnz,
        LayoutDescriptor::Csc(c) => c.nnz,
        LayoutDescriptor::Coo(c) => c.nnz,
        other => panic!("layout {other:?}"),
    };
    for b in &d.buffers {
        assert_eq!(b.alignment(), 4096);
    }
    assert_eq!(d.byte_offset, 0);
    RefTensor {
        tag: d.layout.tag(),
        dtype_tag: d.element_type.tag(),
        shape: d.shape.dims().to_vec(),
        nnz,
        buffers: t.buffers.iter().map(|b| b.to_vec()).collect(),
        stats_nnz: d.statistics.as_ref().map(|s| s.nnz),
        kv,
    }
}

fn le(v: Value, dt: DType) -> Vec<u8> {
    v.to_le(dt).unwrap()[..dt.width()].to_vec()
}

/// The three buffers a CSR (or, with `csc`, CSC) file must hold for `oracle`.
fn expected_buffers(oracle: &Oracle, shape: [u64; 2], dt: DType, csc: bool) -> [Vec<u8>; 3] {
    let mut entries: Vec<((u64, u64), Value)> = oracle.iter().map(|(k, v)| (*k, *v)).collect();
    if csc {
        entries.sort_by_key(|((i, j), _)| (*j, *i));
    }
    let major = |(i, j): (u64, u64)| if csc { j } else { i };
    let minor = |(i, j): (u64, u64)| if csc { i } else { j };
    let values = entries.iter().flat_map(|(_, v)| le(*v, dt)).collect();
    let indices = entries
        .iter()
        .flat_map(|(k, _)| minor(*k).to_le_bytes())
        .collect();
    let n_major = if csc { shape[1] } else { shape[0] };
    let mut ptr = Vec::new();
    let mut pos = 0usize;
    for m in 0..=n_major {
        while pos < entries.len() && major(entries[pos].0) < m {
            pos += 1;
        }
        ptr.extend_from_slice(&(pos as u64).to_le_bytes());
    }
    [values, indices, ptr]
}

/// Deterministic pseudo-random contributions with duplicates; values are
/// small multiples of 1/4 so every sum is exact in every float type.
fn contributions(shape: [u64; 2], n: usize, seed: u64, dt: DType) -> Vec<((u64, u64), Value)> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|_| {
            let i = next() % shape[0];
            // Clustered columns, like FE matrices, plus some far away.
            let j = next() % shape[1];
            let k = (next() % 9) as i64;
            let v = if dt.is_float() {
                Value::Float((k - 4) as f64 * 0.25)
            } else if dt.is_signed_int() {
                Value::Int(k - 4)
            } else {
                Value::UInt(k as u64)
            };
            ((i, j), v)
        })
        .collect()
}

fn oracle_of(contribs: &[((u64, u64), Value)]) -> Oracle {
    let mut m: Oracle = BTreeMap::new();
    for (k, v) in contribs {
        let e = m.entry(*k).or_insert(match v {
            Value::Float(_) => Value::Float(0.0),
            Value::Int(_) => Value::Int(0),
            Value::UInt(_) => Value::UInt(0),
            Value::Complex(..) => Value::Complex(0.0, 0.0),
        });
        *e = match (*e, *v) {
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (Value::Int(a), Value::Int(b)) => Value::Int(a + b),
            (Value::UInt(a), Value::UInt(b)) => Value::UInt(a + b),
            other => panic!("{other:?}"),
        };
    }
    m
}

/// The smallest budget the builder accepts for these options.
fn minimum_budget(shape: &[u64], dt: DType, opts: &AssembleOptions) -> u64 {
    let o = AssembleOptions {
        memory_budget: 0,
        ..opts.clone()
    };
    match Builder::new(shape, dt, o) {
        Err(Error::BudgetTooSmall { minimum, .. }) => minimum,
        Err(e) => panic!("expected BudgetTooSmall, got {e}"),
        Ok(_) => panic!("a zero budget was accepted"),
    }
}

fn assemble(
    path: &Path,
    shape: [u64; 2],
    dt: DType,
    contribs: &[((u64, u64), Value)],
    layout: OutputLayout,
    threads: usize,
    tiny: bool,
) -> coo_assembler::builder::Summary {
    let mut opts = AssembleOptions {
        layout,
        threads,
        max_fan_in: 3,
        tensor_name: "M".into(),
        temp_dir: path.parent().map(Path::to_path_buf),
        ..AssembleOptions::default()
    };
    if tiny {
        opts.memory_budget = minimum_budget(&shape, dt, &opts);
    }
    let mut b = Builder::new(&shape, dt, opts).unwrap();
    for ((i, j), v) in contribs {
        b.push(&[*i, *j], *v).unwrap();
    }
    b.finish(path).unwrap()
}

fn check_against_reference(
    path: &Path,
    oracle: &Oracle,
    shape: [u64; 2],
    dt: DType,
    layout: OutputLayout,
) {
    let t = read_reference(path, "M");
    let csc = layout == OutputLayout::Csc;
    assert_eq!(t.tag, layout.tag());
    assert_eq!(t.dtype_tag, dt.tag());
    assert_eq!(t.shape, shape.to_vec());
    assert_eq!(t.nnz, oracle.len() as u64);
    assert_eq!(t.stats_nnz, Some(oracle.len() as u64));
    let want = expected_buffers(oracle, shape, dt, csc);
    assert_eq!(t.buffers.len(), 3);
    for (k, name) in layout.buffer_names().iter().enumerate() {
        assert!(
            t.buffers[k] == want[k],
            "{layout} {dt} {shape:?}: buffer {name} differs"
        );
        let key = coo_assembler::internals::hurray::kv::checksum_key("M", name);
        let h =
            t.kv.iter()
                .find(|(k, _)| *k == key)
                .unwrap_or_else(|| panic!("no KV {key}"));
        match h.1 {
            RefKv::Uint64(h) => assert_eq!(h, xxhash_rust::xxh3::xxh3_64(&want[k]), "{key}"),
            ref other => panic!("{key}: {other:?}"),
        }
    }
    // One checksum key per buffer, nothing else of ours but the writer entry.
    let ours =
        t.kv.iter()
            .filter(|(k, _)| k.starts_with("coo_assembler.xxh3."))
            .count();
    assert_eq!(ours, 3);
}

#[test]
fn assembled_csr_and_csc_read_by_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[([u64; 2], usize)] = &[
        ([37, 23], 400),
        ([1, 50], 60),
        ([50, 1], 60),
        ([5, 7], 0),
        ([0, 4], 0),
        ([1000, 3], 40), // many empty rows
    ];
    for dt in [DType::F64, DType::F32, DType::I32, DType::U8, DType::F16] {
        for (n, &(shape, count)) in cases.iter().enumerate() {
            let c = contributions(shape, count, n as u64 + 7, dt);
            let oracle = oracle_of(&c);
            for layout in [OutputLayout::Csr, OutputLayout::Csc] {
                let p = dir.path().join(format!("{dt}_{n}_{layout}.hrry"));
                let s = assemble(&p, shape, dt, &c, layout, 2, false);
                assert_eq!(s.nnz, oracle.len() as u64);
                check_against_reference(&p, &oracle, shape, dt, layout);
            }
        }
    }
}

#[test]
fn spilled_multi_pass_assembly_into_each_layout() {
    let dir = tempfile::tempdir().unwrap();
    let shape = [3000, 2500];
    let dt = DType::F64;
    let c = contributions(shape, 120_000, 99, dt);
    let oracle = oracle_of(&c);
    let mut coo_values = None;
    for layout in [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc] {
        let p = dir.path().join(format!("{layout}.hrry"));
        let s = assemble(&p, shape, dt, &c, layout, 2, true);
        assert!(s.runs_spilled > 0, "{layout}: nothing spilled");
        assert!(
            s.merge_passes >= 2,
            "{layout}: {} merge passes",
            s.merge_passes
        );
        assert!(
            s.peak_buffer_bytes <= s.memory_budget,
            "{layout}: over budget"
        );
        assert_eq!(s.nnz, oracle.len() as u64);
        if layout == OutputLayout::Coo {
            coo_values = Some(read_reference(&p, "M").buffers[0].clone());
            continue;
        }
        check_against_reference(&p, &oracle, shape, dt, layout);
        // CSR stores the values in COO's (row-major) order.
        if layout == OutputLayout::Csr {
            assert!(Some(&read_reference(&p, "M").buffers[0]) == coo_values.as_ref());
        }
    }
}

#[test]
fn bytes_do_not_depend_on_threads_or_budget() {
    let dir = tempfile::tempdir().unwrap();
    let shape = [700, 900];
    let dt = DType::F32;
    // Values that do not add exactly in f32 in every order.
    let c: Vec<((u64, u64), Value)> = contributions(shape, 60_000, 5, dt)
        .into_iter()
        .enumerate()
        .map(|(n, (k, _))| (k, Value::Float(1.0 / (n as f64 + 3.0))))
        .collect();
    for layout in [OutputLayout::Csr, OutputLayout::Csc] {
        let mut first: Option<Vec<u8>> = None;
        for (threads, tiny) in [(1, false), (2, true), (3, true)] {
            let p = dir.path().join(format!("{layout}_{threads}_{tiny}.hrry"));
            assemble(&p, shape, dt, &c, layout, threads, tiny);
            let bytes = std::fs::read(&p).unwrap();
            match &first {
                None => first = Some(bytes),
                Some(f) => assert!(*f == bytes, "{layout}: threads {threads} differs"),
            }
        }
    }
}

#[test]
fn compressed_layouts_refuse_other_ranks_up_front() {
    for layout in [OutputLayout::Csr, OutputLayout::Csc] {
        for shape in [vec![10u64], vec![2, 3, 4]] {
            let opts = AssembleOptions {
                layout,
                ..AssembleOptions::default()
            };
            let Err(e) = Builder::new(&shape, DType::F64, opts) else {
                panic!("{layout} accepted rank {}", shape.len());
            };
            let e = e.to_string();
            assert!(
                e.contains(&format!("rank {}", shape.len())) && e.contains("coo"),
                "{e}"
            );
        }
        let dir = tempfile::tempdir().unwrap();
        let mut fw =
            FileWriter::create(dir.path().join("x.hrry"), WriteOptions::default()).unwrap();
        assert!(
            fw.begin_tensor_as("t", DType::F64, &[2, 2, 2], layout)
                .is_err()
        );
    }
}

#[test]
fn writer_checks_the_layout_order() {
    let dir = tempfile::tempdir().unwrap();
    let mut fw = FileWriter::create(dir.path().join("x.hrry"), WriteOptions::default()).unwrap();
    let mut t = fw
        .begin_tensor_as("c", DType::F64, &[3, 3], OutputLayout::Csc)
        .unwrap();
    t.push(&[2, 0], 1.0f64).unwrap();
    t.push(&[0, 1], 2.0f64).unwrap(); // next column: fine for CSC
    let e = t.push(&[1, 0], 3.0f64).unwrap_err().to_string();
    assert!(e.contains("[1, 0]") && e.contains("[0, 1]"), "{e}");
    t.push(&[1, 1], 3.0f64).unwrap();
    let s = t.finish().unwrap();
    assert_eq!((s.nnz, s.layout), (2 + 1, OutputLayout::Csc));
    assert!(s.pointers_xxh3.is_some());
    fw.finish().unwrap();
}

// ------------------------------------------------------------------ convert

use coo_assembler::{convert, convert::ConvertOptions, options::DuplicatePolicy};
use proptest::prelude::*;

fn convert_to(
    input: &Path,
    output: &Path,
    to: OutputLayout,
    budget: u64,
) -> coo_assembler::convert::ConvertSummary {
    let opts = ConvertOptions {
        to,
        memory_budget: budget,
        threads: 2,
        temp_dir: output.parent().map(Path::to_path_buf),
        ..ConvertOptions::default()
    };
    convert(input, output, &opts).unwrap()
}

const LAYOUTS: [OutputLayout; 3] = [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    /// assemble --layout X == convert --to X of the COO output (and of the
    /// CSR and CSC outputs), byte for byte, for every X; all equal the oracle.
    #[test]
    fn assemble_into_x_equals_convert_to_x(
        rows in 1u64..300, cols in 1u64..300, n in 0usize..30_000, seed in any::<u64>(),
        dti in 0usize..3,
    ) {
        let dt = [DType::F64, DType::F32, DType::I64][dti];
        let dir = tempfile::tempdir().unwrap();
        let shape = [rows, cols];
        let c = contributions(shape, n, seed, dt);
        let oracle = oracle_of(&c);
        let mut assembled = Vec::new();
        for layout in LAYOUTS {
            let p = dir.path().join(format!("a_{layout}.hrry"));
            assemble(&p, shape, dt, &c, layout, 2, true);
            if layout != OutputLayout::Coo {
                check_against_reference(&p, &oracle, shape, dt, layout);
            }
            assembled.push((p.clone(), std::fs::read(&p).unwrap()));
        }
        // Budget: the smallest the sorting path accepts, plus the read buffers.
        let budget = minimum_budget(&shape, dt, &AssembleOptions { threads: 2, ..AssembleOptions::default() }) + (1 << 20);
        for (from, (src, _)) in LAYOUTS.iter().zip(&assembled) {
            for (to, (_, want)) in LAYOUTS.iter().zip(&assembled) {
                let out = dir.path().join(format!("c_{from}_{to}.hrry"));
                let s = convert_to(src, &out, *to, budget.max(8 << 20));
                prop_assert_eq!(s.nnz, oracle.len() as u64);
                let streamed = matches!((from, to),
                    (OutputLayout::Coo | OutputLayout::Csr, OutputLayout::Coo | OutputLayout::Csr)
                    | (OutputLayout::Csc, OutputLayout::Csc));
                prop_assert_eq!(s.sorted_by.is_none(), streamed);
                let got = std::fs::read(&out).unwrap();
                prop_assert!(got == *want, "{} -> {}: bytes differ from assembling into {}", from, to, to);
            }
        }
    }
}

/// A COO file as the reference writes it: unsorted, maybe with duplicates.
fn reference_coo(path: &Path, shape: &[u64], entries: &[(Vec<u64>, f64)]) {
    use hurray_core::layout::CooLayout;
    let values: Vec<u8> = entries.iter().flat_map(|(_, v)| v.to_le_bytes()).collect();
    let indices: Vec<u8> = entries
        .iter()
        .flat_map(|(i, _)| i.iter().flat_map(|x| x.to_le_bytes()))
        .collect();
    let b: [&[u8]; 2] = [&values, &indices];
    let layout = LayoutDescriptor::Coo(CooLayout::new(entries.len() as u64, false));
    let d = reference::descriptor(DType::F64, shape, layout, &b, None);
    std::fs::write(path, reference::write(&[("u", &d, &b)])).unwrap();
}

#[test]
fn unsorted_duplicates_are_refused_unless_a_policy_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("u.hrry");
    let entries = vec![
        (vec![2, 1], 1.0),
        (vec![0, 3], 2.0),
        (vec![2, 1], 0.5),
        (vec![1, 0], -1.0),
    ];
    reference_coo(&input, &[3, 4], &entries);
    for to in LAYOUTS {
        let out = dir.path().join(format!("o_{to}.hrry"));
        let opts = ConvertOptions {
            to,
            threads: 1,
            ..ConvertOptions::default()
        };
        let e = convert(&input, &out, &opts).unwrap_err().to_string();
        assert!(e.contains("[2, 1]"), "{to}: {e}");
        assert!(!out.exists(), "{to}: a refused conversion left an output");
        let opts = ConvertOptions {
            duplicates: Some(DuplicatePolicy::Sum),
            ..opts
        };
        let s = convert(&input, &out, &opts).unwrap();
        assert_eq!(s.nnz, 3);
        if to != OutputLayout::Coo {
            let mut o = Oracle::new();
            o.insert((2, 1), Value::Float(1.5));
            o.insert((0, 3), Value::Float(2.0));
            o.insert((1, 0), Value::Float(-1.0));
            // The reference writer names the tensor "u"; check under that name.
            let t = read_reference(&out, "u");
            let want = expected_buffers(&o, [3, 4], DType::F64, to == OutputLayout::Csc);
            assert!(t.buffers == want.to_vec(), "{to}");
        }
    }
}

#[test]
fn convert_refuses_bad_requests() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("r3.hrry");
    reference_coo(&input, &[2, 2, 2], &[(vec![1, 1, 1], 1.0)]);
    let out = dir.path().join("o.hrry");
    let opts = ConvertOptions {
        to: OutputLayout::Csr,
        ..ConvertOptions::default()
    };
    let e = convert(&input, &out, &opts).unwrap_err().to_string();
    assert!(e.contains("rank 3"), "{e}");
    let opts = ConvertOptions {
        to: OutputLayout::Coo,
        tensor: Some("nope".into()),
        ..ConvertOptions::default()
    };
    let e = convert(&input, &out, &opts).unwrap_err().to_string();
    assert!(e.contains("nope") && e.contains("u"), "{e}");
    assert!(!out.exists());
}

// ---------------------------------------------------------------------- CLI

use crate::run as cli;

#[test]
fn cli_assemble_layout_and_convert() {
    let dir = tempfile::tempdir().unwrap();
    let d = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    std::fs::write(d("in.txt"), "0 1 2.5\n2 0 -1\n0 1 0.5\n1 3 4\n").unwrap();
    for layout in ["coo", "csr", "csc"] {
        let o = cli([
            "assemble",
            "--shape",
            "3,4",
            "--format",
            "text",
            "--input",
            &d("in.txt"),
            "--layout",
            layout,
            "-q",
            "-o",
            &d(&format!("{layout}.hrry")),
        ]);
        assert!(o.code == 0, "{layout}: {}", o.stderr);
    }
    for (from, to) in [
        ("coo", "csc"),
        ("csr", "csc"),
        ("csc", "csr"),
        ("csr", "coo"),
    ] {
        let out = d(&format!("{from}_to_{to}.hrry"));
        let o = cli([
            "convert",
            &d(&format!("{from}.hrry")),
            &out,
            "--to",
            to,
            "--memory-budget",
            "64MiB",
        ]);
        assert!(o.code == 0, "{from}->{to}: {}", o.stderr);
        let msg = o.stderr;
        assert!(msg.contains(&format!("{from} -> {to}")), "{msg}");
        let want = std::fs::read(d(&format!("{to}.hrry"))).unwrap();
        assert!(std::fs::read(&out).unwrap() == want, "{from} -> {to}");
    }
    let o = cli([
        "assemble",
        "--shape",
        "3,4,5",
        "--format",
        "text",
        "--input",
        &d("in.txt"),
        "--layout",
        "csr",
        "-q",
        "-o",
        &d("r3.hrry"),
    ]);
    // A usage error (exit 2), refused before any input is read.
    assert_eq!(Some(o.code), Some(2));
    assert!(o.stderr.contains("rank 3"));
    let o = cli(["convert", &d("coo.hrry"), &d("x.hrry"), "--to", "dense"]);
    assert_eq!(Some(o.code), Some(2));
}
