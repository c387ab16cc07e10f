//! Partition composites converted to one plain tensor (issue 21): the
//! composites `composite::join` writes and every conversion of them by
//! `convert` (COO, CSR, CSC) keep the bytes pinned in
//! `tests/golden/composites.txt` (length and xxh3-64 of each file), which
//! were made by the conversion paths before `convert` took composites
//! (`CompositeFile::to_plain` for COO and CSR, a temporary COO file
//! converted for CSC). The command line's `convert` and `composite to-coo`
//! give the same bytes, in place too; `open` tells plain from composite. Regenerate with
//! `GOLDEN_REGENERATE=1 cargo test --release --test suite -- composite_convert::`
//! only for a deliberate change of bytes (and record it in the version log
//! of `docs/format.md`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use coo_assembler::{
    AssembleOptions, Builder, DType, Error, ErrorKind, HurrayFile, Value, convert,
    convert::ConvertOptions, open, options::OutputLayout, read::CompositeFile, read::Opened,
    read::ReadOptions,
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
                b.push(&local, v).unwrap();
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
    let opts = ConvertOptions {
        to: layout,
        threads: 1,
        ..ConvertOptions::default()
    };
    let s = convert(comp, out, &opts)?;
    assert!(s.members.is_some());
    Ok(())
}

/// Every stored entry of the only tensor of `path`.
fn read_back(path: &Path) -> BTreeMap<Vec<u64>, Value> {
    let f = HurrayFile::open(path).unwrap();
    assert_eq!(f.tensor_count(), 1);
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
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/composites.txt")
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
                assert_eq!(e.kind(), ErrorKind::Argument, "{e}");
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

use crate::run as cli;

/// What the command printed, both streams, asserting it succeeded.
fn cli_ok(args: &[&std::ffi::OsStr]) -> String {
    let o = crate::ok(args);
    o.stdout + &o.stderr
}

/// The command line's `convert` (and `composite to-coo`) of a composite,
/// into another file and in place, gives the library's bytes; nothing is
/// left beside the output.
#[test]
fn the_command_line_converts_composites_as_the_library_does() {
    let dir = tempfile::tempdir().unwrap();
    for c in cases().into_iter().filter(|c| c.shape.len() == 2) {
        let (comp, _) = make(dir.path(), &c);
        for layout in [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc] {
            let lib = dir.path().join(format!("{}.lib-{layout}.hrry", c.name));
            conversion(&comp, &lib, layout).unwrap();
            let want = std::fs::read(&lib).unwrap();
            let out = dir.path().join(format!("{}.cli-{layout}.hrry", c.name));
            let to = layout.to_string();
            let msg = cli_ok(&[
                "convert".as_ref(),
                comp.as_os_str(),
                out.as_os_str(),
                "--to".as_ref(),
                to.as_ref(),
            ]);
            assert!(
                msg.contains(&format!(
                    "converted composite {:?} ({} members)",
                    c.name,
                    c.parts.len()
                )),
                "{msg}"
            );
            assert!(
                std::fs::read(&out).unwrap() == want,
                "{} to {layout}",
                c.name
            );
            // In place: a copy of the composite becomes the conversion.
            let copy = dir.path().join(format!("{}.copy.hrry", c.name));
            std::fs::copy(&comp, &copy).unwrap();
            cli_ok(&[
                "convert".as_ref(),
                "-q".as_ref(),
                copy.as_os_str(),
                copy.as_os_str(),
                "--to".as_ref(),
                to.as_ref(),
            ]);
            assert!(
                std::fs::read(&copy).unwrap() == want,
                "{} to {layout} in place",
                c.name
            );
            if layout == OutputLayout::Coo {
                let out = dir.path().join(format!("{}.to-coo-cli.hrry", c.name));
                let said = cli_ok(&[
                    "composite".as_ref(),
                    "to-coo".as_ref(),
                    comp.as_os_str(),
                    out.as_os_str(),
                ]);
                assert!(std::fs::read(&out).unwrap() == want);
                // The size as the library tells sizes, the exact count kept.
                let n = want.len() as u64;
                let size = coo_assembler::vocab::format_size(n);
                let told = if n < 1024 {
                    size
                } else {
                    format!("{size} ({n} bytes)")
                };
                assert!(
                    said.contains(&format!("wrote {}: {told}", out.display())),
                    "{said}"
                );
            }
        }
    }
    let mut left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.'))
        .collect();
    left.sort();
    assert!(left.is_empty(), "{left:?}");
}

/// Within a budget too small for the entries, a composite that needs the
/// sort (blocks) spills and merges, and writes the bytes of a conversion
/// with room to spare; one whose rows stream needs no sort at all.
#[test]
fn composites_convert_out_of_core() {
    let dir = tempfile::tempdir().unwrap();
    let (n, cut) = (1200u64, 700u64);
    let c = Case {
        name: "big",
        dtype: DType::F64,
        shape: vec![n, n],
        parts: vec![
            part(&[0, 0], &[cut, cut], OutputLayout::Coo),
            part(&[0, cut], &[cut, n - cut], OutputLayout::Csr),
            part(&[cut, 0], &[n - cut, n], OutputLayout::Coo),
        ],
    };
    let (comp, whole) = make(dir.path(), &c);
    assert!(whole.len() > 300_000, "{}", whole.len());
    for layout in [OutputLayout::Coo, OutputLayout::Csc] {
        let roomy = dir.path().join(format!("roomy-{layout}.hrry"));
        let tight = dir.path().join(format!("tight-{layout}.hrry"));
        let opts = |memory_budget| ConvertOptions {
            to: layout,
            memory_budget,
            threads: 1,
            temp_dir: Some(dir.path().to_path_buf()),
            ..ConvertOptions::default()
        };
        let r = convert(&comp, &roomy, &opts(256 << 20)).unwrap();
        let t = convert(&comp, &tight, &opts(4 << 20)).unwrap();
        let s = t.sorted_by.expect("blocks need the sort");
        assert!(s.runs_spilled > 0 && s.merge_passes >= 1, "{s:?}");
        assert_eq!(r.sorted_by.unwrap().runs_spilled, 0);
        assert!(std::fs::read(&tight).unwrap() == std::fs::read(&roomy).unwrap());
        assert_eq!(read_back(&tight), whole);
    }
}

/// `open` tells a plain file from a composite and refuses junk as the
/// plain reader does; `CompositeFile` refuses a plain file with a typed
/// error; a composite is one tensor named after its head.
#[test]
fn open_tells_plain_from_composite() {
    let dir = tempfile::tempdir().unwrap();
    let cs = cases();
    let (comp, whole) = make(dir.path(), &cs[0]);
    let opts = ReadOptions::default();
    let Opened::Composite(c) = open(&comp, opts).unwrap() else {
        panic!("a composite opened as plain")
    };
    assert_eq!((c.name(), c.nnz() as usize), ("bands", whole.len()));
    let in_memory = ReadOptions {
        in_memory: true,
        ..opts
    };
    assert!(matches!(open(&comp, in_memory), Ok(Opened::Composite(_))));
    let part = dir.path().join("bands.part0.hrry");
    let Opened::Plain(f) = open(&part, opts).unwrap() else {
        panic!("a plain file opened as a composite")
    };
    assert_eq!(f.tensor_count(), 1);
    let e = CompositeFile::open(&part).unwrap_err();
    assert!(matches!(e, Error::NotComposite), "{e}");
    assert_eq!(e.kind(), ErrorKind::Argument);
    let bytes = std::fs::read(&part).unwrap();
    let e = CompositeFile::from_bytes(&bytes, opts).unwrap_err();
    assert!(matches!(e, Error::NotComposite), "{e}");
    // Junk: the plain reader's own error.
    let junk = dir.path().join("junk.hrry");
    std::fs::write(&junk, vec![7u8; 500]).unwrap();
    let want = HurrayFile::open(&junk).unwrap_err().to_string();
    assert_eq!(open(&junk, opts).unwrap_err().to_string(), want);
    assert!(matches!(
        CompositeFile::open(&junk),
        Err(Error::InvalidFile { .. })
    ));
    // A broken composite is the composite reader's error, not a plain one.
    let mut broken = std::fs::read(&comp).unwrap();
    let head_rule = coo_assembler::internals::hurray::composite::head_field::composition_rule(2);
    broken[(64 + head_rule) as usize] = 0x09;
    let b = dir.path().join("broken.hrry");
    std::fs::write(&b, &broken).unwrap();
    let e = open(&b, opts).unwrap_err().to_string();
    assert!(e.contains("composition_rule"), "{e}");
    // The CLI reads both through it: a composite's --tensor names its head.
    let tensor = |name: &str| {
        let o = cli([
            "convert".as_ref(),
            comp.as_os_str(),
            dir.path().join("x.hrry").as_os_str(),
            "--to".as_ref(),
            "csr".as_ref(),
            "--tensor".as_ref(),
            name.as_ref(),
        ]);
        (Some(o.code), o.stderr.clone())
    };
    assert_eq!(tensor("bands").0, Some(0));
    let (code, msg) = tensor("bands.part1");
    assert_eq!(code, Some(2), "{msg}");
    assert!(msg.contains("partition composite"), "{msg}");
    let o = cli(["composite".as_ref(), "info".as_ref(), part.as_os_str()]);
    assert_eq!(Some(o.code), Some(2));
    assert!(o.stderr.contains("no composite head"));
    let o = cli([
        "export".as_ref(),
        comp.as_os_str(),
        "--to".as_ref(),
        "mtx".as_ref(),
        dir.path().join("x.mtx").as_os_str(),
    ]);
    assert_eq!(Some(o.code), Some(1));
    assert!(o.stderr.contains("convert it first"));
}
