//! Partition composites converted to one plain tensor (issue 21): the
//! composites `composite::join` writes and every conversion of them (COO,
//! CSR, CSC) keep the bytes pinned in `tests/golden/composites.txt`
//! (length and xxh3-64 of each file), which were made by the conversion
//! paths before `convert` took composites (`CompositeFile::to_plain` for
//! COO and CSR, a temporary COO file converted for CSC). Regenerate with
//! `GOLDEN_REGENERATE=1 cargo test --release --test composite_convert`
//! only for a deliberate change of bytes (and record it in the version log
//! of `docs/format.md`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use coo_assembler::write::WriteOptions;
use coo_assembler::{
    convert, AssembleOptions, Builder, CompositeFile, ConvertOptions, DType, HurrayFile,
    OutputLayout, Value,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One member: where its box starts, its shape, its layout.
struct Part {
    offset: Vec<u64>,
    shape: Vec<u64>,
    layout: OutputLayout,
}

/// One composite: its head name, element type, shape and members.
struct Case {
    name: &'static str,
    dtype: DType,
    shape: Vec<u64>,
    parts: Vec<Part>,
}

fn part(offset: &[u64], shape: &[u64], layout: OutputLayout) -> Part {
    Part {
        offset: offset.to_vec(),
        shape: shape.to_vec(),
        layout,
    }
}

fn cases() -> Vec<Case> {
    use OutputLayout::{Coo, Csc, Csr};
    vec![
        // Row bands of row-major members (one empty): global order is
        // member order.
        Case {
            name: "bands",
            dtype: DType::F64,
            shape: vec![40, 30],
            parts: vec![
                part(&[0, 0], &[9, 30], Coo),
                part(&[9, 0], &[16, 30], Csr),
                part(&[25, 0], &[3, 30], Coo),
                part(&[28, 0], &[12, 30], Coo),
            ],
        },
        // A CSC member among row bands: global order needs a sort.
        Case {
            name: "bands_csc",
            dtype: DType::F32,
            shape: vec![40, 30],
            parts: vec![
                part(&[0, 0], &[20, 30], Csc),
                part(&[20, 0], &[20, 30], Coo),
            ],
        },
        // Blocks (boxes that split the columns too).
        Case {
            name: "blocks",
            dtype: DType::I32,
            shape: vec![20, 24],
            parts: vec![
                part(&[0, 0], &[12, 10], Coo),
                part(&[0, 10], &[12, 14], Csr),
                part(&[12, 0], &[8, 10], Coo),
                part(&[12, 10], &[8, 14], Coo),
            ],
        },
        // Rank 3: COO only.
        Case {
            name: "rank3",
            dtype: DType::F64,
            shape: vec![6, 5, 4],
            parts: vec![
                part(&[0, 0, 0], &[2, 5, 4], Coo),
                part(&[2, 0, 0], &[4, 5, 4], Coo),
            ],
        },
    ]
}

/// Whether the composite stores an entry at global `idx`, and its value.
fn entry(dtype: DType, idx: &[u64]) -> Option<Value> {
    let h = idx.iter().fold(0x9E37_79B9u64, |a, &i| {
        (a ^ i).wrapping_mul(0x100_0000_01B3)
    });
    if (h >> 7) % 4 != 0 {
        return None;
    }
    let k = idx.iter().fold(0u64, |a, &i| a * 97 + i);
    Some(if dtype.is_float() {
        Value::Float(k as f64 / 8.0 - 30.0)
    } else {
        Value::Int(k as i64 % 1000 - 400)
    })
}

/// Every index of `shape` in row-major order.
fn indices(shape: &[u64]) -> Vec<Vec<u64>> {
    let mut all = vec![vec![]];
    for &d in shape {
        all = all
            .into_iter()
            .flat_map(|p| {
                (0..d).map(move |i| {
                    let mut q = p.clone();
                    q.push(i);
                    q
                })
            })
            .collect();
    }
    all
}

/// Assemble the members and join them into `dir/<name>.hrry`; returns its
/// path and the entries of the whole.
fn make(dir: &Path, c: &Case) -> (PathBuf, BTreeMap<Vec<u64>, Value>) {
    let mut whole = BTreeMap::new();
    let mut parts = Vec::new();
    for (k, p) in c.parts.iter().enumerate() {
        let opts = AssembleOptions {
            memory_budget: 16 << 20,
            threads: 1,
            tensor_name: format!("{}.part{k}", c.name),
            layout: p.layout,
            ..AssembleOptions::default()
        };
        let mut b = Builder::new(&p.shape, c.dtype, opts).unwrap();
        for local in indices(&p.shape) {
            let global: Vec<u64> = local.iter().zip(&p.offset).map(|(a, b)| a + b).collect();
            if let Some(v) = entry(c.dtype, &global) {
                match v {
                    Value::Float(x) => b.push(&local, x),
                    Value::Int(x) => b.push(&local, x),
                    Value::UInt(x) => b.push(&local, x),
                }
                .unwrap();
                whole.insert(global, v);
            }
        }
        let path = dir.join(format!("{}.part{k}.hrry", c.name));
        b.finish(&path).unwrap();
        parts.push((path, p.offset.clone()));
    }
    let out = dir.join(format!("{}.hrry", c.name));
    coo_assembler::composite::join(&parts, &c.shape, &out, c.name).unwrap();
    (out, whole)
}

/// The conversion of the composite at `comp` into `layout`, at `out`.
fn conversion(comp: &Path, out: &Path, layout: OutputLayout) -> coo_assembler::Result<()> {
    let c = CompositeFile::open(comp)?;
    if layout == OutputLayout::Csc {
        let tmp = out.with_extension("coo-tmp");
        c.to_coo(&tmp, c.name(), WriteOptions::default())?;
        let opts = ConvertOptions {
            to: OutputLayout::Csc,
            threads: 1,
            ..ConvertOptions::default()
        };
        convert(&tmp, out, &opts)?;
        std::fs::remove_file(&tmp).unwrap();
    } else {
        c.to_plain(out, c.name(), layout, WriteOptions::default())?;
    }
    Ok(())
}

/// Every stored entry of the only tensor of `path`.
fn read_back(path: &Path) -> BTreeMap<Vec<u64>, Value> {
    let f = HurrayFile::open(path).unwrap();
    let mut got = BTreeMap::new();
    f.only_tensor_view()
        .unwrap()
        .try_for_each(|i, v| -> Result<(), coo_assembler::Error> {
            got.insert(i.to_vec(), v);
            Ok(())
        })
        .unwrap();
    got
}

fn manifest_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/composites.txt")
}

/// `name length xxh3-64` of a file.
fn line(name: &str, path: &Path) -> String {
    let b = std::fs::read(path).unwrap();
    format!("{name} {} {:016x}", b.len(), xxhash_rust::xxh3::xxh3_64(&b))
}

#[test]
fn composites_and_their_conversions_keep_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    for c in cases() {
        let (comp, whole) = make(dir.path(), &c);
        lines.push(line(&format!("{}.hrry", c.name), &comp));
        for layout in [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc] {
            let out = dir.path().join(format!("{}.to-{layout}.hrry", c.name));
            let r = conversion(&comp, &out, layout);
            if c.shape.len() != 2 && layout != OutputLayout::Coo {
                let e = r.unwrap_err();
                assert_eq!(e.kind(), coo_assembler::ErrorKind::Argument, "{e}");
                assert!(!out.exists());
                continue;
            }
            r.unwrap();
            let f = HurrayFile::open(&out).unwrap();
            let t = f.only_tensor_view().unwrap();
            assert_eq!((t.name(), t.layout()), (c.name, layout));
            assert_eq!(read_back(&out), whole, "{} to {layout}", c.name);
            lines.push(line(&format!("{}.to-{layout}.hrry", c.name), &out));
        }
    }
    let text = lines.join("\n") + "\n";
    if std::env::var_os("GOLDEN_REGENERATE").is_some() {
        std::fs::write(manifest_path(), &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(manifest_path()).unwrap();
    assert_eq!(text, want, "bytes differ from tests/golden/composites.txt");
}
