//! Golden files: small `.hrry` files made by the crate and committed under
//! `tests/golden/`. The test makes them again and asserts the bytes are the
//! same, then reads the committed files and checks every entry. A change of
//! output bytes must therefore be deliberate: regenerate with
//! `GOLDEN_REGENERATE=1 cargo test --test suite -- golden::` and record it in the
//! version log of `docs/format.md`.

use coo_assembler::internals::hurray::KvValue;
use coo_assembler::write::{FileWriter, TailPadding, WriteOptions};
use coo_assembler::{
    AssembleOptions, Builder, DType, HurrayFile, Value, element::Element, options::DuplicatePolicy,
    options::OutputLayout,
};
use coo_assembler::{element::BF16 as bf16, element::F16 as f16};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

// The tests' SplitMix64, so the inputs need no file (the golden files
// were made from its sequences).
use crate::common::Rng;

/// One tensor of a golden file: name, type, shape, sorted entries.
struct Expected {
    name: &'static str,
    dtype: DType,
    shape: Vec<u64>,
    entries: Vec<(Vec<u64>, Value)>,
}

/// One golden file: its name, how to make it, and what it must hold.
struct Golden {
    file: &'static str,
    make: fn(&Path) -> Vec<Expected>,
}

const GOLDENS: &[Golden] = &[
    Golden {
        file: "builder_f64_rank2_spilled.hrry",
        make: builder_f64_rank2,
    },
    Golden {
        file: "builder_i32_rank3_spilled.hrry",
        make: builder_i32_rank3,
    },
    Golden {
        file: "builder_f32_rank1_empty.hrry",
        make: builder_f32_empty,
    },
    Golden {
        file: "writer_mixed_stats.hrry",
        make: writer_mixed,
    },
    Golden {
        file: "writer_no_stats_eight.hrry",
        make: writer_no_stats,
    },
    Golden {
        file: "builder_f64_csr_spilled.hrry",
        make: builder_f64_csr,
    },
    Golden {
        file: "writer_csc_i32_csr_f32.hrry",
        make: writer_csc_csr,
    },
];

/// Options that force spills and several merge passes on a few thousand
/// contributions: the smallest budget, one thread, fan-in 2.
fn tight(tensor_name: &str) -> AssembleOptions {
    AssembleOptions {
        memory_budget: 0,
        threads: 1,
        max_fan_in: 2,
        tensor_name: tensor_name.to_string(),
        ..AssembleOptions::default()
    }
}

/// Build with the smallest accepted budget: ask for 0 and use the minimum
/// the error names.
fn tight_builder(shape: &[u64], dtype: DType, name: &str) -> Builder {
    tight_builder_as(shape, dtype, name, OutputLayout::Coo)
}

fn tight_builder_as(shape: &[u64], dtype: DType, name: &str, layout: OutputLayout) -> Builder {
    let opts = AssembleOptions {
        layout,
        ..tight(name)
    };
    match Builder::new(shape, dtype, opts.clone()) {
        Err(coo_assembler::Error::BudgetTooSmall { minimum, .. }) => Builder::new(
            shape,
            dtype,
            AssembleOptions {
                memory_budget: minimum,
                ..opts
            },
        )
        .unwrap(),
        Err(e) => panic!("expected BudgetTooSmall, got {e}"),
        Ok(_) => panic!("a budget of 0 bytes was accepted"),
    }
}

fn builder_f64_rank2(path: &Path) -> Vec<Expected> {
    let shape = [24u64, 20];
    let mut b = tight_builder(&shape, DType::F64, "K");
    let mut rng = Rng::new(7);
    let mut want: BTreeMap<Vec<u64>, Vec<f64>> = BTreeMap::new();
    for _ in 0..200_000 {
        let idx = vec![rng.below(shape[0]), rng.below(shape[1])];
        // Values with many bits, so that only an exact sum is order free.
        let v = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        let v = v * 10f64.powi((rng.below(7) as i32) - 3);
        b.push(&idx, v).unwrap();
        want.entry(idx).or_default().push(v);
    }
    let s = b.finish(path).unwrap();
    assert!(s.runs_spilled > 0, "golden input must spill runs: {s:?}");
    assert!(
        s.merge_passes > 1,
        "golden input must merge in passes: {s:?}"
    );
    let entries = want
        .into_iter()
        .map(|(i, vs)| (i, Value::Float(exact_sum(&vs))))
        .collect();
    vec![Expected {
        name: "K",
        dtype: DType::F64,
        shape: shape.to_vec(),
        entries,
    }]
}

/// The correctly rounded sum of `vs`, independent of the crate: sums of
/// scaled integers in i128 (every value here is a multiple of 2^-80 and
/// below 2^10 in magnitude, so the fixed-point sum is exact).
fn exact_sum(vs: &[f64]) -> f64 {
    let scale = 2f64.powi(80);
    let mut acc: i128 = 0;
    for &v in vs {
        let q = v * scale;
        assert_eq!(q.fract(), 0.0, "value {v} is not a multiple of 2^-80");
        acc += q as i128;
    }
    // i128 -> f64 rounds to nearest even; the division by 2^80 is exact.
    acc as f64 / scale
}

/// A CSR matrix straight out of a spilled, multi-pass assembly (rows 20..
/// of the 30 empty).
fn builder_f64_csr(path: &Path) -> Vec<Expected> {
    let shape = [30u64, 25];
    let mut b = tight_builder_as(&shape, DType::F64, "A", OutputLayout::Csr);
    let mut rng = Rng::new(13);
    let mut want: BTreeMap<Vec<u64>, Vec<f64>> = BTreeMap::new();
    for _ in 0..100_000 {
        let idx = vec![rng.below(20), rng.below(shape[1])];
        let v = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
        b.push(&idx, v).unwrap();
        want.entry(idx).or_default().push(v);
    }
    let s = b.finish(path).unwrap();
    assert!(s.runs_spilled > 0, "golden input must spill runs: {s:?}");
    let entries = want
        .into_iter()
        .map(|(i, vs)| (i, Value::Float(exact_sum(&vs))))
        .collect();
    vec![Expected {
        name: "A",
        dtype: DType::F64,
        shape: shape.to_vec(),
        entries,
    }]
}

/// A CSC i32 matrix (some columns empty) and a CSR f32 one (some rows
/// empty), through the writer. Expected entries are in storage order.
fn writer_csc_csr(path: &Path) -> Vec<Expected> {
    let mut fw = FileWriter::create(path, WriteOptions::default()).unwrap();
    let mut rng = Rng::new(17);
    let mut out = Vec::new();
    for (name, layout, shape, n) in [
        ("csc_i32", OutputLayout::Csc, [9u64, 14], 40),
        ("csr_f32", OutputLayout::Csr, [14u64, 9], 40),
    ] {
        // Only even columns (CSC) or rows (CSR) hold entries.
        let mut coords: Vec<Vec<u64>> = sorted_coords(&mut rng, &shape, n)
            .into_iter()
            .filter(|c| c[layout.major_dim()] % 2 == 0)
            .collect();
        coords.sort_by_key(|c| (c[layout.major_dim()], c[1 - layout.major_dim()]));
        let mut tw = if layout == OutputLayout::Csc {
            fw.begin_tensor_as(name, DType::I32, &shape, layout)
        } else {
            fw.begin_tensor_as(name, DType::F32, &shape, layout)
        }
        .unwrap();
        let mut entries = Vec::new();
        for (k, c) in coords.into_iter().enumerate() {
            let v = if layout == OutputLayout::Csc {
                let v = k as i32 * 7 - 100;
                tw.push(&c, v).unwrap();
                Value::Int(v as i64)
            } else {
                let v = k as f32 * 0.75 - 4.0;
                tw.push(&c, v).unwrap();
                Value::Float(v as f64)
            };
            entries.push((c, v));
        }
        tw.finish().unwrap();
        out.push(Expected {
            name,
            dtype: if layout == OutputLayout::Csc {
                DType::I32
            } else {
                DType::F32
            },
            shape: shape.to_vec(),
            entries,
        });
    }
    fw.finish().unwrap();
    out
}

fn builder_i32_rank3(path: &Path) -> Vec<Expected> {
    let shape = [5u64, 6, 7];
    let mut b = tight_builder(&shape, DType::I32, "T3");
    let mut rng = Rng::new(11);
    let mut want: BTreeMap<Vec<u64>, i64> = BTreeMap::new();
    for _ in 0..20_000 {
        let idx = vec![rng.below(5), rng.below(6), rng.below(7)];
        let v = rng.below(2001) as i64 - 1000;
        b.push(&idx, v).unwrap();
        *want.entry(idx).or_default() += v;
    }
    let s = b.finish(path).unwrap();
    assert!(s.bytes_spilled > 0, "golden input must spill: {s:?}");
    let entries = want.into_iter().map(|(i, v)| (i, Value::Int(v))).collect();
    vec![Expected {
        name: "T3",
        dtype: DType::I32,
        shape: shape.to_vec(),
        entries,
    }]
}

fn builder_f32_empty(path: &Path) -> Vec<Expected> {
    let opts = AssembleOptions {
        duplicates: DuplicatePolicy::Max,
        threads: 1,
        tensor_name: "empty".into(),
        memory_budget: 16 << 20,
        ..AssembleOptions::default()
    };
    let mut b = Builder::new(&[1000], DType::F32, opts).unwrap();
    let s = b.finish(path).unwrap();
    assert_eq!(s.nnz, 0);
    vec![Expected {
        name: "empty",
        dtype: DType::F32,
        shape: vec![1000],
        entries: Vec::new(),
    }]
}

/// Sorted entries of a rank-`shape.len()` tensor with about `n` entries.
fn sorted_coords(rng: &mut Rng, shape: &[u64], n: usize) -> Vec<Vec<u64>> {
    let mut set = std::collections::BTreeSet::new();
    for _ in 0..n {
        set.insert(shape.iter().map(|&e| rng.below(e)).collect::<Vec<u64>>());
    }
    set.into_iter().collect()
}

/// Write one tensor of type `E` through a [`FileWriter`] and return what it holds.
fn write_tensor<E: Element>(
    fw: &mut FileWriter,
    name: &'static str,
    shape: &[u64],
    coords: Vec<Vec<u64>>,
    value: impl Fn(usize) -> E,
    as_value: impl Fn(E) -> Value,
) -> Expected {
    let mut tw = fw.begin_tensor(name, E::DTYPE, shape).unwrap();
    let mut entries = Vec::new();
    for (k, c) in coords.into_iter().enumerate() {
        let v = value(k);
        tw.push(&c, v).unwrap();
        entries.push((c, as_value(v)));
    }
    tw.finish().unwrap();
    Expected {
        name,
        dtype: E::DTYPE,
        shape: shape.to_vec(),
        entries,
    }
}

fn writer_mixed(path: &Path) -> Vec<Expected> {
    let mut fw = FileWriter::create(path, WriteOptions::default()).unwrap();
    fw.add_metadata("units", KvValue::String("N/m".into()))
        .unwrap();
    let mut rng = Rng::new(3);
    let c1 = sorted_coords(&mut rng, &[300], 40);
    let c2 = sorted_coords(&mut rng, &[9, 8, 7], 60);
    let c3 = sorted_coords(&mut rng, &[16, 16], 50);
    let c4 = sorted_coords(&mut rng, &[12, 12], 30);
    let c5 = sorted_coords(&mut rng, &[4, 5], 10);
    let out = vec![
        write_tensor(
            &mut fw,
            "f32_r1",
            &[300],
            c1,
            |k| k as f32 * 0.25 - 3.0,
            |v| Value::Float(v as f64),
        ),
        write_tensor(
            &mut fw,
            "u8_r3",
            &[9, 8, 7],
            c2,
            |k| (k * 37 % 256) as u8,
            |v| Value::UInt(v as u64),
        ),
        write_tensor(
            &mut fw,
            "f16_r2",
            &[16, 16],
            c3,
            |k| f16::from_f64(k as f64 / 8.0 - 2.0),
            |v| Value::Float(v.to_f64()),
        ),
        write_tensor(
            &mut fw,
            "i64_r2",
            &[12, 12],
            c4,
            |k| (k as i64 - 15) * 1_000_000_007,
            Value::Int,
        ),
        write_tensor(
            &mut fw,
            "empty_u16",
            &[3, 3],
            Vec::new(),
            |k| k as u16,
            |v| Value::UInt(v as u64),
        ),
        write_tensor(
            &mut fw,
            "bf16_r2",
            &[4, 5],
            c5,
            |k| bf16::from_f64(k as f64 * -1.5),
            |v| Value::Float(v.to_f64()),
        ),
    ];
    fw.finish().unwrap();
    out
}

fn writer_no_stats(path: &Path) -> Vec<Expected> {
    let opts = WriteOptions {
        statistics: false,
        tail_padding: TailPadding::Eight,
        ..WriteOptions::default()
    };
    let mut fw = FileWriter::create(path, opts).unwrap();
    let mut rng = Rng::new(5);
    let c1 = sorted_coords(&mut rng, &[50, 50], 70);
    let c2 = sorted_coords(&mut rng, &[1 << 40, 3], 20);
    let out = vec![
        write_tensor(
            &mut fw,
            "f64_r2",
            &[50, 50],
            c1,
            |k| (k as f64).sqrt(),
            Value::Float,
        ),
        write_tensor(
            &mut fw,
            "i8_wide",
            &[1 << 40, 3],
            c2,
            |k| (k as i8).wrapping_mul(13),
            |v| Value::Int(v as i64),
        ),
        write_tensor(
            &mut fw,
            "empty_f64",
            &[7],
            Vec::new(),
            |k| k as f64,
            Value::Float,
        ),
    ];
    fw.finish().unwrap();
    out
}

/// Check that `path` reads back as `want`, entry by entry.
fn check_reads(path: &Path, want: &[Expected]) {
    let file = HurrayFile::open(path).unwrap();
    assert_eq!(file.tensor_count(), want.len(), "{}", path.display());
    assert!(file.verify().is_empty(), "{:?}", file.verify());
    for w in want {
        // Any layout: the entries in storage order.
        let t = file.tensor_view(w.name).unwrap();
        assert_eq!(t.dtype(), w.dtype, "{}", w.name);
        assert_eq!(t.shape(), &w.shape[..], "{}", w.name);
        assert_eq!(t.nnz(), w.entries.len() as u64, "{}", w.name);
        let mut got: Vec<(Vec<u64>, Value)> = Vec::new();
        t.try_for_each::<coo_assembler::Error>(|i, v| {
            got.push((i.to_vec(), v));
            Ok(())
        })
        .unwrap();
        assert_eq!(got.len(), w.entries.len(), "{}", w.name);
        for (k, ((gi, gv), (wi, wv))) in got.iter().zip(&w.entries).enumerate() {
            assert_eq!(gi, wi, "{} entry {k}", w.name);
            assert!(
                same_value(*gv, *wv),
                "{} entry {k} at {wi:?}: got {gv:?}, want {wv:?}",
                w.name
            );
            assert!(same_value(t.get(wi).unwrap(), *wv), "{} get {wi:?}", w.name);
        }
    }
}

/// Equal values, floats compared by bits.
fn same_value(a: Value, b: Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

#[test]
fn golden_files_are_made_byte_for_byte_and_read_back() {
    let regenerate = std::env::var_os("GOLDEN_REGENERATE").is_some();
    let dir = golden_dir();
    let scratch = tempfile::tempdir().unwrap();
    for g in GOLDENS {
        let made = scratch.path().join(g.file);
        let want = (g.make)(&made);
        let committed = dir.join(g.file);
        if regenerate {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::copy(&made, &committed).unwrap();
        }
        let a = std::fs::read(&made).unwrap();
        let b = std::fs::read(&committed)
            .unwrap_or_else(|e| panic!("{}: {e} (run with GOLDEN_REGENERATE=1)", g.file));
        assert!(
            a.len() < 128 << 10,
            "{}: golden files stay small, got {} bytes",
            g.file,
            a.len()
        );
        if let Some(p) = a.iter().zip(&b).position(|(x, y)| x != y) {
            panic!(
                "{}: output differs from the golden file at byte {p}",
                g.file
            );
        }
        assert_eq!(a.len(), b.len(), "{}: length differs", g.file);
        check_reads(&committed, &want);
    }
}
