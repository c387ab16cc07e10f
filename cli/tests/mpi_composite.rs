//! Partition composites without MPI (issue 13): the reference writer's
//! composites (hurray-io 0.1.0 `write_composite`, which pads after the head)
//! read correctly through our reader, with a writer warning; ours
//! (`composite::join`) are accepted by the reference reader; invalid ones
//! are refused with the rule they break. The same with CSR members.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use coo_assembler::composite::join;
use coo_assembler::{
    AssembleOptions, Builder, DType, Value, convert, convert::ConvertOptions, read::CompositeFile,
    read::ReadOptions,
};
use hurray_core::{
    BufferHandle, DeviceTag, ElementType, LayoutDescriptor, MIN_BUFFER_ALIGNMENT, Shape,
    ShardDescriptor, SyncMode, TensorDescriptor,
    layout::{CompositeLayout, CompositionRule, CooLayout, CsrLayout},
};
use hurray_io::file::{FileCompositeNode, FileReader, FileWriter};
use std::collections::BTreeMap;

fn buf(n: u64) -> BufferHandle {
    BufferHandle::new(
        n,
        MIN_BUFFER_ALIGNMENT,
        DeviceTag::Cpu,
        SyncMode::ProducerSynced,
    )
    .unwrap()
}

/// A sorted COO member of the 6 x 5 head: rows `lo..lo + rows`, local indices.
fn member(lo: u64, rows: u64, entries: &[(u64, u64, f64)]) -> (TensorDescriptor, Vec<u8>, Vec<u8>) {
    let mut vals = Vec::new();
    let mut idx = Vec::new();
    for &(i, j, v) in entries {
        vals.extend_from_slice(&v.to_le_bytes());
        idx.extend_from_slice(&(i - lo).to_le_bytes());
        idx.extend_from_slice(&j.to_le_bytes());
    }
    let d = TensorDescriptor::new(
        1,
        0,
        ElementType::Float64,
        Shape::new(vec![rows, 5]).unwrap(),
        0,
        LayoutDescriptor::Coo(CooLayout::new(entries.len() as u64, true)),
        vec![buf(vals.len() as u64), buf(idx.len() as u64)],
        None,
        Some(ShardDescriptor::new(vec![6, 5], vec![lo, 0]).unwrap()),
        None,
        None,
    )
    .unwrap();
    (d, vals, idx)
}

/// The head of a partition of a 6 x 5 f64 tensor into `members`.
fn partition_head(members: u32) -> TensorDescriptor {
    TensorDescriptor::new(
        1,
        0,
        ElementType::Float64,
        Shape::new(vec![6u64, 5]).unwrap(),
        0,
        LayoutDescriptor::Composite(
            CompositeLayout::new(CompositionRule::Partition, members).unwrap(),
        ),
        vec![],
        None,
        None,
        None,
        None,
    )
    .unwrap()
}

/// A file holding one composite "W", a partition of a 6 x 5 f64 head
/// into `members` (name, descriptor, buffers), written by the reference
/// writer's `write_composite` (which pads after the head).
fn reference_composite(members: &[(&str, &TensorDescriptor, &[&[u8]])]) -> Vec<u8> {
    let head = partition_head(members.len() as u32);
    let nodes: Vec<FileCompositeNode> = members
        .iter()
        .map(|&(name, descriptor, buffers)| FileCompositeNode::Tensor {
            name,
            descriptor,
            buffers,
        })
        .collect();
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async {
            let mut w = FileWriter::new(Vec::<u8>::new()).await.unwrap();
            w.write_composite("W", &head, &nodes).await.unwrap();
            w.finish(vec![]).await.unwrap()
        })
}

#[test]
fn reference_composites_read_through_ours() {
    let a = [(0u64, 1u64, 1.5f64), (1, 4, -2.0), (2, 0, 3.25)];
    let b = [(3u64, 3u64, 7.0f64), (5, 0, -0.125)];
    let (m0, v0, i0) = member(0, 3, &a);
    let (m1, v1, i1) = member(3, 3, &b);
    let bytes = reference_composite(&[("W.a", &m0, &[&v0, &i0]), ("W.b", &m1, &[&v1, &i1])]);
    let c = CompositeFile::from_bytes(&bytes, ReadOptions::default()).unwrap();
    assert_eq!(c.name(), "W");
    assert_eq!(c.shape(), &[6, 5]);
    assert!(
        c.warnings()
            .iter()
            .any(|w| w.contains("padded after the composite head")),
        "{:?}",
        c.warnings()
    );
    assert!(c.verify().is_empty(), "{:?}", c.verify());
    let got: Vec<(Vec<u64>, Value)> = c.iter().map(Result::unwrap).collect();
    let want: Vec<(Vec<u64>, Value)> = a
        .iter()
        .chain(&b)
        .map(|&(i, j, v)| (vec![i, j], Value::Float(v)))
        .collect();
    assert_eq!(got, want);
    assert_eq!(c.get(&[3, 3]).unwrap(), Value::Float(7.0));
    assert_eq!(c.get(&[4, 4]).unwrap(), Value::Float(0.0));
    assert!(c.get(&[6, 0]).is_err());

    // Overlap: member b starting at row 2 (rows 2..5, over a's 0..3) is
    // refused with the rule it breaks.
    let (m1, v1, i1) = member(2, 3, &[(3, 3, 7.0)]);
    let head = partition_head(2);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let bytes = rt.block_on(async {
        let b0: [&[u8]; 2] = [&v0, &i0];
        let b1: [&[u8]; 2] = [&v1, &i1];
        let mut w = FileWriter::new(Vec::<u8>::new()).await.unwrap();
        // write_tensor, not write_composite: the reference refuses to write it.
        w.write_tensor("W", &head, &[]).await.unwrap();
        w.write_tensor("W.a", &m0, &b0).await.unwrap();
        w.write_tensor("W.b", &m1, &b1).await.unwrap();
        w.finish(vec![]).await.unwrap()
    });
    let e = CompositeFile::from_bytes(&bytes, ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("overlap"), "{e}");
}

/// Files of a composite's members, with their offsets (as `join` takes them).
type Parts = Vec<(std::path::PathBuf, Vec<u64>)>;

/// Three row bands of a 40 x 30 matrix (rows 0..9, 9..25, 25..40), each
/// assembled by its own builder in `layout` (entries where `keep(band,
/// row, col)`), joined into the composite "M" in `dir`. Checks it through
/// our reader (no warnings, valid, every entry found); returns its path,
/// the entries, and the bands' files with their offsets.
fn joined_bands(
    dir: &std::path::Path,
    layout: coo_assembler::options::OutputLayout,
    keep: impl Fn(usize, u64, u64) -> bool,
) -> (std::path::PathBuf, BTreeMap<(u64, u64), f64>, Parts) {
    let shape = [40u64, 30];
    let mut whole: BTreeMap<(u64, u64), f64> = BTreeMap::new();
    let cuts = [0u64, 9, 25, 40];
    let mut parts = Vec::new();
    for k in 0..3 {
        let (lo, hi) = (cuts[k], cuts[k + 1]);
        let opts = AssembleOptions {
            memory_budget: 16 << 20,
            threads: 1,
            tensor_name: format!("M.part{k}"),
            layout,
            ..AssembleOptions::default()
        };
        let mut b = Builder::new(&[hi - lo, 30], DType::F64, opts).unwrap();
        for r in lo..hi {
            for c in (r % 3..30).step_by(4).filter(|&c| keep(k, r, c)) {
                let v = (r * 31 + c) as f64 / 8.0;
                b.push(&[r - lo, c], v).unwrap();
                whole.insert((r, c), v);
            }
        }
        let p = dir.join(format!("part{k}.hrry"));
        b.finish(&p).unwrap();
        parts.push((p, vec![lo, 0]));
    }
    let out = dir.join("M.hrry");
    let s = join(&parts, &shape, &out, "M").unwrap();
    assert_eq!(s.nnz as usize, whole.len());
    let c = CompositeFile::open(&out).unwrap();
    assert!(c.warnings().is_empty());
    assert!(c.verify().is_empty(), "{:?}", c.verify());
    for (&(r, col), &v) in &whole {
        assert_eq!(c.get(&[r, col]).unwrap(), Value::Float(v));
    }
    (out, whole, parts)
}

/// The composite "M" of `path` as the reference reader decodes it.
fn reference_read(path: &std::path::Path) -> hurray_io::file::FileComposite {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(async {
            let f = tokio::fs::File::open(path).await.unwrap();
            let mut r = FileReader::open(f).await.unwrap();
            r.read_composite("M").await.unwrap()
        })
}

#[test]
fn our_composites_pass_the_reference_reader() {
    let dir = tempfile::tempdir().unwrap();
    let shape = [40u64, 30];
    let (out, whole, parts) = joined_bands(
        dir.path(),
        coo_assembler::options::OutputLayout::Coo,
        |_, _, _| true,
    );
    let comp = reference_read(&out);
    assert_eq!(comp.members.len(), 3);
    assert_eq!(comp.head.shape.dims(), &shape[..]);
    // The CLI: info, get, verify, to-coo, and join from the command line.
    let cli = |args: &[&str]| {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_coo-assembler"))
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    };
    let outs = out.to_str().unwrap();
    let info = cli(&["composite", "info", outs]);
    assert!(
        info.contains("3 members") && info.contains("M.part2"),
        "{info}"
    );
    assert_eq!(
        cli(&["composite", "get", outs, "10,1"]).trim(),
        format!("{}", Value::Float(311.0 / 8.0))
    );
    assert!(cli(&["composite", "verify", outs]).contains("OK"));
    let coo = dir.path().join("M-coo.hrry");
    cli(&["composite", "to-coo", outs, coo.to_str().unwrap()]);
    let plain = coo_assembler::HurrayFile::open(&coo).unwrap();
    assert_eq!(plain.only_tensor().unwrap().nnz() as usize, whole.len());
    // The plain commands read composites too, as one logical tensor.
    assert_eq!(cli(&["info", outs]), info);
    assert!(cli(&["info", "--json", outs]).contains("\"members\""));
    assert_eq!(
        cli(&["get", outs, "10,1"]),
        cli(&["composite", "get", outs, "10,1"])
    );
    assert!(cli(&["verify", outs]).contains("OK"));
    let dump = cli(&["dump", outs]);
    assert_eq!(dump.lines().count(), whole.len());
    assert_eq!(dump, cli(&["dump", coo.to_str().unwrap()]));
    assert_eq!(cli(&["dump", "--limit", "3", outs]).lines().count(), 3);
    let again = dir.path().join("M2.hrry");
    let p: Vec<String> = parts
        .iter()
        .map(|(f, o)| format!("{}@{}", f.display(), o[0]))
        .collect();
    let mut args = vec![
        "composite",
        "join",
        "--shape",
        "40,30",
        "--name",
        "M",
        "-o",
        again.to_str().unwrap(),
    ];
    args.extend(p.iter().map(String::as_str));
    cli(&args);
    assert_eq!(std::fs::read(&again).unwrap(), std::fs::read(&out).unwrap());

    // Parts that do not cover the shape are refused by join.
    let e = join(&parts[..2], &shape, &dir.path().join("bad.hrry"), "M").unwrap_err();
    assert!(e.to_string().contains("exact cover"), "{e}");
    assert!(!dir.path().join("bad.hrry").exists());
}

/// A CSR member of the 6 x 5 head: rows `lo..lo + rows`, `row_ptr` over
/// its own rows, columns as they are (the box spans every column).
fn csr_member(lo: u64, rows: u64, entries: &[(u64, u64, f64)]) -> (TensorDescriptor, [Vec<u8>; 3]) {
    let mut vals = Vec::new();
    let mut cols = Vec::new();
    let mut ptr = vec![0u64; rows as usize + 1];
    for &(i, j, v) in entries {
        vals.extend_from_slice(&v.to_le_bytes());
        cols.extend_from_slice(&j.to_le_bytes());
        ptr[(i - lo) as usize + 1] += 1;
    }
    for r in 0..rows as usize {
        ptr[r + 1] += ptr[r];
    }
    let ptr: Vec<u8> = ptr.iter().flat_map(|p| p.to_le_bytes()).collect();
    let d = TensorDescriptor::new(
        1,
        0,
        ElementType::Float64,
        Shape::new(vec![rows, 5]).unwrap(),
        0,
        LayoutDescriptor::Csr(CsrLayout::new(entries.len() as u64)),
        vec![
            buf(vals.len() as u64),
            buf(cols.len() as u64),
            buf(ptr.len() as u64),
        ],
        None,
        Some(ShardDescriptor::new(vec![6, 5], vec![lo, 0]).unwrap()),
        None,
        None,
    )
    .unwrap();
    (d, [vals, cols, ptr])
}

#[test]
fn reference_csr_composites_read_through_ours() {
    // An empty band (rows 2..4) in the middle: its row_ptr is all zeros.
    let a = [(0u64, 1u64, 1.5f64), (0, 4, 2.5), (1, 0, -2.0)];
    let c = [(4u64, 3u64, 7.0f64), (5, 0, -0.125), (5, 2, 9.0)];
    let (m0, b0) = csr_member(0, 2, &a);
    let (m1, b1) = csr_member(2, 2, &[]);
    let (m2, b2) = csr_member(4, 2, &c);
    fn slices(b: &[Vec<u8>; 3]) -> Vec<&[u8]> {
        b.iter().map(Vec::as_slice).collect()
    }
    let (r0, r1, r2) = (slices(&b0), slices(&b1), slices(&b2));
    let bytes = reference_composite(&[("W.a", &m0, &r0), ("W.b", &m1, &r1), ("W.c", &m2, &r2)]);
    let comp = CompositeFile::from_bytes(&bytes, ReadOptions::default()).unwrap();
    assert!(
        comp.members()
            .all(|(t, _)| t.layout() == coo_assembler::options::OutputLayout::Csr)
    );
    assert!(comp.verify().is_empty(), "{:?}", comp.verify());
    assert_eq!(comp.nnz(), 6);
    let got: Vec<(Vec<u64>, Value)> = comp.iter().map(Result::unwrap).collect();
    let want: Vec<(Vec<u64>, Value)> = a
        .iter()
        .chain(&c)
        .map(|&(i, j, v)| (vec![i, j], Value::Float(v)))
        .collect();
    assert_eq!(got, want);
    assert_eq!(comp.get(&[5, 2]).unwrap(), Value::Float(9.0));
    assert_eq!(comp.get(&[3, 3]).unwrap(), Value::Float(0.0));
    assert_eq!(comp.get(&[4, 4]).unwrap(), Value::Float(0.0));
    // To one CSR, COO and CSC tensor: the same entries (CSC in column
    // order).
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("W.hrry");
    std::fs::write(&file, &bytes).unwrap();
    for layout in [
        coo_assembler::options::OutputLayout::Csr,
        coo_assembler::options::OutputLayout::Coo,
        coo_assembler::options::OutputLayout::Csc,
    ] {
        let out = dir.path().join(format!("{layout}.hrry"));
        let opts = ConvertOptions {
            to: layout,
            ..ConvertOptions::default()
        };
        let s = convert(&file, &out, &opts).unwrap();
        assert_eq!((s.tensor.as_str(), s.members), ("W", Some(3)));
        let f = coo_assembler::HurrayFile::open(&out).unwrap();
        let t = f.only_tensor_view().unwrap();
        assert_eq!(t.layout(), layout);
        let mut plain = Vec::new();
        t.try_for_each(|i, v| -> Result<(), coo_assembler::Error> {
            plain.push((i.to_vec(), v));
            Ok(())
        })
        .unwrap();
        if layout == coo_assembler::options::OutputLayout::Csc {
            plain.sort_by(|a, b| a.0.cmp(&b.0));
        }
        assert_eq!(plain, want);
    }

    // A broken row_ptr in member c (row_ptr[1] = 9 > nnz 3): verify names
    // the rule, and the iteration ends with an error instead of reading
    // out of bounds.
    let mut bad = bytes.clone();
    let at = bad
        .windows(b2[2].len())
        .rposition(|w| w == b2[2].as_slice())
        .unwrap();
    bad[at + 8] = 9;
    let comp = CompositeFile::from_bytes(
        &bad,
        ReadOptions {
            permissive: true,
            ..ReadOptions::default()
        },
    )
    .unwrap();
    let rules: Vec<&str> = comp.verify().iter().map(|p| p.rule).collect();
    assert!(rules.contains(&"pointer-out-of-range"), "{rules:?}");
    assert!(comp.iter().any(|e| e.is_err()));
}

#[test]
fn our_csr_composites_pass_the_reference_reader() {
    let dir = tempfile::tempdir().unwrap();
    // Rows 9..25 hold nothing past column 0 but row 12.
    let (out, whole, _) = joined_bands(
        dir.path(),
        coo_assembler::options::OutputLayout::Csr,
        |k, r, c| k != 1 || c == 0 || r == 12,
    );
    let comp = reference_read(&out);
    assert_eq!(comp.members.len(), 3);
    // What the reference decodes: each member's row_ptr over its own rows,
    // global columns; together, every entry.
    let mut seen = BTreeMap::new();
    for m in &comp.members {
        let hurray_io::file::FileItem::Tensor(t) = m else {
            panic!("nested")
        };
        assert!(matches!(t.descriptor.layout, LayoutDescriptor::Csr(_)));
        let lo = t.descriptor.shard.as_ref().unwrap().shard_offset[0];
        let words = |b: &[u8]| -> Vec<u64> {
            b.chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
                .collect()
        };
        let (cols, ptr) = (words(&t.buffers[1]), words(&t.buffers[2]));
        assert_eq!(ptr.len() as u64, t.descriptor.shape.dims()[0] + 1);
        let vals: Vec<f64> = t.buffers[0]
            .chunks_exact(8)
            .map(|w| f64::from_le_bytes(w.try_into().unwrap()))
            .collect();
        for (r, w) in ptr.windows(2).enumerate() {
            let (a, b) = (w[0] as usize, w[1] as usize);
            for (&c, &v) in cols[a..b].iter().zip(&vals[a..b]) {
                seen.insert((lo + r as u64, c), v);
            }
        }
    }
    assert_eq!(seen, whole);
}
