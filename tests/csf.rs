//! CSF (issue 41): rank >= 3 tensors assembled into compressed fibres in
//! any mode order, out of core, read back by lookup, fibre, walk and
//! coordinate, and checked by `verify`; every storage invariant a damaged
//! file breaks is named, never a panic.

use coo_assembler::options::OutputLayout;
use coo_assembler::read::{CsfLevels, CsfTensor, Tensor};
use coo_assembler::{AssembleOptions, Builder, DType, ErrorKind, HurrayFile, Value};
use coo_assembler_testkit::{min_budget, xorshift};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Seeded contributions to a tensor of `shape`: clustered coordinates
/// (many duplicates) and values over many magnitudes.
fn contributions(shape: &[u64], n: usize, seed: u64) -> Vec<(Vec<u64>, f64)> {
    let mut rnd = xorshift(seed);
    (0..n)
        .map(|_| {
            let idx: Vec<u64> = shape
                .iter()
                .map(|&e| rnd(e.min(7)) * (e / 7).max(1) % e)
                .collect();
            let v = (rnd(2001) as f64 - 1000.0) * 10f64.powi(rnd(13) as i32 - 6);
            (idx, v)
        })
        .collect()
}

fn assemble(
    dir: &Path,
    name: &str,
    shape: &[u64],
    items: &[(Vec<u64>, f64)],
    opts: AssembleOptions,
) -> PathBuf {
    let path = dir.join(name);
    let mut b = Builder::new(shape, DType::F64, opts).unwrap();
    for (i, v) in items {
        b.push(i, *v).unwrap();
    }
    b.finish(&path).unwrap();
    path
}

fn csf_opts(order: Option<Vec<usize>>, budget: u64, threads: usize) -> AssembleOptions {
    AssembleOptions {
        layout: OutputLayout::Csf,
        mode_order: order,
        memory_budget: budget,
        threads,
        ..AssembleOptions::default()
    }
}

/// Every entry of a file in storage order, through the layout-blind walk.
fn walked(path: &Path) -> Vec<(Vec<u64>, Value)> {
    let f = HurrayFile::open(path).unwrap();
    let t = f.only_tensor_view().unwrap();
    let mut out = Vec::new();
    t.try_for_each(|i, v| {
        out.push((i.to_vec(), v));
        Ok::<(), coo_assembler::Error>(())
    })
    .unwrap();
    out
}

fn csf(f: &HurrayFile) -> CsfTensor<'_> {
    match f.only_tensor_view().unwrap() {
        Tensor::Csf(t) => t,
        other => panic!("CSF expected, got {}", other.layout()),
    }
}

#[test]
fn every_mode_order_budget_and_thread_count_holds_the_coo_entries() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (shape, n, seed) in [
        (vec![40u64, 30, 20], 20_000, 1),
        (vec![9, 1 << 20, 5, 70], 12_000, 2),
    ] {
        let items = contributions(&shape, n, seed);
        let rank = shape.len();
        // The reference: the same contributions into COO (exact sums).
        let coo = assemble(d, "ref.hrry", &shape, &items, AssembleOptions::default());
        let want: BTreeMap<Vec<u64>, Value> = walked(&coo).into_iter().collect();
        let small = min_budget(&shape, DType::F64, 2);
        let orders: Vec<Option<Vec<usize>>> = vec![
            None,
            Some((0..rank).rev().collect()),
            Some((1..rank).chain([0]).collect()),
        ];
        for order in orders {
            let storage: Vec<usize> = order.clone().unwrap_or_else(|| (0..rank).collect());
            let mut first: Option<Vec<u8>> = None;
            for (budget, threads) in [(256 << 20, 1), (small, 2), (256 << 20, 3)] {
                let path = assemble(
                    d,
                    "t.hrry",
                    &shape,
                    &items,
                    csf_opts(order.clone(), budget, threads),
                );
                let bytes = std::fs::read(&path).unwrap();
                // Bit for bit the same file for every budget and thread count.
                match &first {
                    None => first = Some(bytes),
                    Some(b) => assert!(b == &bytes, "{order:?} budget {budget} threads {threads}"),
                }
                let f = HurrayFile::open(&path).unwrap();
                assert!(f.verify().is_empty(), "{:?}", f.verify());
                let t = csf(&f);
                assert_eq!(t.nnz() as usize, want.len());
                let mo: Vec<usize> = t.mode_order().iter().map(|&x| x as usize).collect();
                assert_eq!(mo, storage);
                // The walk is the COO entries in mode order.
                let got = walked(&path);
                let mut sorted: Vec<_> = want.iter().map(|(k, v)| (k.clone(), *v)).collect();
                sorted.sort_by_key(|(k, _)| storage.iter().map(|&d| k[d]).collect::<Vec<_>>());
                assert_eq!(got, sorted);
                // Lookups, coordinates, and absent coordinates.
                for (p, (k, v)) in sorted.iter().enumerate().step_by(37) {
                    assert_eq!(t.get(k).unwrap(), *v);
                    assert_eq!(t.find(k).unwrap(), Some(p as u64));
                    assert_eq!(&t.coordinate(p as u64).unwrap(), k);
                }
                let mut absent = vec![0u64; rank];
                absent[rank - 1] = shape[rank - 1] - 1;
                absent[0] = 1;
                if !want.contains_key(&absent) {
                    assert_eq!(t.find(&absent).unwrap(), None);
                    assert_eq!(t.get(&absent).unwrap(), Value::Float(0.0));
                }
                // Every coordinate at once, from the pointers: the walk's.
                let all = t.leaf_coordinates().unwrap();
                let n = sorted.len();
                for (p, (k, _)) in sorted.iter().enumerate() {
                    assert!((0..rank).all(|d| all[d * n + p] == k[d]), "leaf {p}");
                }
                // The same levels in memory, in 32-bit words, answer the
                // same lookups through the same rules.
                let flat: Vec<u32> = sorted
                    .iter()
                    .flat_map(|(k, _)| k.iter().map(|&x| x as u32))
                    .collect();
                let levels: Vec<(Vec<u32>, Vec<u32>)> = if storage == (0..rank).collect::<Vec<_>>()
                {
                    coo_assembler::write::csf_levels(&flat, rank, &storage).unwrap()
                } else {
                    let mut by_storage: Vec<u32> = Vec::new();
                    for k in flat.chunks(rank) {
                        by_storage.extend(storage.iter().map(|&d| k[d]));
                    }
                    // Coordinates given in storage order: the identity.
                    let id: Vec<usize> = (0..rank).collect();
                    coo_assembler::write::csf_levels(&by_storage, rank, &id).unwrap()
                };
                let mem = MemoryTree {
                    levels: &levels,
                    order: &storage,
                };
                for (p, (k, _)) in sorted.iter().enumerate().step_by(29) {
                    assert_eq!(mem.find_leaf(k, true), Ok(Some(p as u64)));
                    assert_eq!(mem.leaf_coordinate(p as u64).as_ref(), Ok(k));
                }
                assert_eq!(mem.leaf_coordinates().unwrap(), all);
                // A fibre or slice by leading coordinates (storage order)
                // is the run of entries that share them.
                for depth in 0..=rank {
                    let (k, _) = &sorted[sorted.len() / 3];
                    let prefix: Vec<u64> = storage[..depth].iter().map(|&d| k[d]).collect();
                    let r = t.fiber(&prefix).unwrap();
                    let hits: Vec<usize> = sorted
                        .iter()
                        .enumerate()
                        .filter(|(_, (c, _))| {
                            storage[..depth]
                                .iter()
                                .zip(&prefix)
                                .all(|(&d, &x)| c[d] == x)
                        })
                        .map(|(p, _)| p)
                        .collect();
                    assert_eq!(r.start as usize, hits[0], "depth {depth}");
                    assert_eq!(r.end as usize, hits[hits.len() - 1] + 1, "depth {depth}");
                }
            }
        }
    }
}

#[test]
fn the_spec_example_gives_the_spec_buffers() {
    let dir = tempfile::tempdir().unwrap();
    let items: Vec<(Vec<u64>, f64)> = vec![
        (vec![1, 1, 2], 4.0),
        (vec![0, 2, 3], 2.0),
        (vec![0, 0, 1], 1.0),
        (vec![1, 1, 0], 3.0),
    ];
    let path = assemble(
        dir.path(),
        "ex.hrry",
        &[2, 3, 4],
        &items,
        csf_opts(None, 64 << 20, 1),
    );
    let f = HurrayFile::open(&path).unwrap();
    let t = csf(&f);
    assert_eq!(t.pos(0), [0, 2]);
    assert_eq!(t.crd(0), [0, 1]);
    assert_eq!(t.pos(1), [0, 2, 3]);
    assert_eq!(t.crd(1), [0, 2, 1]);
    assert_eq!(t.pos(2), [0, 1, 2, 4]);
    assert_eq!(t.crd(2), [1, 3, 0, 2]);
    assert_eq!(t.values::<f64>().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(t.get(&[1, 1, 2]).unwrap(), Value::Float(4.0));
    assert_eq!(t.fiber(&[1, 1]).unwrap(), 2..4);
    assert_eq!(t.fiber(&[0]).unwrap(), 0..2);
    assert!(t.fiber(&[0, 1]).unwrap().is_empty());
    assert_eq!(f.tensor_infos().next().unwrap().layout_text(), "sparse CSF");
}

#[test]
fn an_empty_tensor_has_the_spec_empty_levels() {
    let dir = tempfile::tempdir().unwrap();
    let path = assemble(
        dir.path(),
        "e.hrry",
        &[3, 4, 5, 6],
        &[],
        csf_opts(None, 64 << 20, 2),
    );
    let f = HurrayFile::open(&path).unwrap();
    assert!(f.verify().is_empty());
    let t = csf(&f);
    assert_eq!(t.nnz(), 0);
    assert_eq!(t.pos(0), [0, 0]);
    for l in 1..4 {
        assert_eq!(t.pos(l), [0]);
        assert!(t.crd(l).is_empty());
    }
    assert_eq!(t.fiber(&[]).unwrap(), 0..0);
    assert_eq!(t.get(&[1, 2, 3, 4]).unwrap(), Value::Float(0.0));
}

#[test]
fn complex_and_integer_values_and_policies_go_to_the_leaves() {
    let dir = tempfile::tempdir().unwrap();
    let shape = [6u64, 5, 4];
    let mut opts = csf_opts(Some(vec![2, 0, 1]), 64 << 20, 2);
    opts.duplicates = coo_assembler::options::DuplicatePolicy::Max;
    let path = dir.path().join("i.hrry");
    let mut b = Builder::new(&shape, DType::I32, opts).unwrap();
    for k in 0..500u64 {
        b.push(&[k % 6, k % 5, k % 4], (k % 17) as i32).unwrap();
    }
    b.finish(&path).unwrap();
    let f = HurrayFile::open(&path).unwrap();
    assert!(f.verify().is_empty());
    let t = csf(&f);
    assert_eq!(t.nnz(), 60);
    let max = (0..500u64)
        .filter(|k| (k % 6, k % 5, k % 4) == (1, 1, 1))
        .map(|k| k % 17)
        .max();
    assert_eq!(t.get(&[1, 1, 1]).unwrap(), Value::Int(max.unwrap() as i64));

    let path = dir.path().join("c.hrry");
    let mut b = Builder::new(&shape, DType::C128, csf_opts(None, 64 << 20, 2)).unwrap();
    b.push(&[1, 2, 3], Value::Complex(1.0, -2.0)).unwrap();
    b.push(&[1, 2, 3], Value::Complex(0.5, 0.5)).unwrap();
    b.push(&[0, 4, 0], Value::Complex(3.0, 0.0)).unwrap();
    b.finish(&path).unwrap();
    let f = HurrayFile::open(&path).unwrap();
    assert!(f.verify().is_empty());
    let t = csf(&f);
    assert_eq!(t.nnz(), 2);
    assert_eq!(t.get(&[1, 2, 3]).unwrap(), Value::Complex(1.5, -1.5));
}

#[test]
fn csf_options_that_cannot_hold_are_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let e = Builder::new(&[4, 4], DType::F64, csf_opts(None, 64 << 20, 1))
        .err()
        .unwrap();
    assert_eq!(e.kind(), ErrorKind::Argument);
    assert!(e.to_string().contains("rank 3 and up"), "{e}");
    for bad in [vec![0, 1], vec![0, 1, 1], vec![0, 1, 3]] {
        let e = Builder::new(
            &[4, 4, 4],
            DType::F64,
            csf_opts(Some(bad.clone()), 64 << 20, 1),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("not a permutation"), "{bad:?}: {e}");
    }
    let opts = AssembleOptions {
        mode_order: Some(vec![0, 1, 2]),
        ..AssembleOptions::default()
    };
    let e = Builder::new(&[4, 4, 4], DType::F64, opts).err().unwrap();
    assert!(e.to_string().contains("CSF option"), "{e}");
    // Plans hold COO, CSR and CSC results.
    let i: Vec<u32> = vec![0, 1, 2];
    let e = coo_assembler::Plan::new(
        &[&i[..], &i[..], &i[..]],
        &[4, 4, 4],
        DType::F64,
        &csf_opts(None, 64 << 20, 1),
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("plan in coo"), "{e}");
    // A partition composite's members carry a shard, which CSF may not.
    let path = assemble(
        dir.path(),
        "m.hrry",
        &[4, 4, 4],
        &[(vec![1, 2, 3], 1.0)],
        csf_opts(None, 64 << 20, 1),
    );
    let parts = [(path.clone(), vec![0, 0, 0]), (path, vec![4, 0, 0])];
    let e = coo_assembler::composite::join(&parts, &[8, 4, 4], &dir.path().join("j.hrry"), "t")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("CSF"), "{e}");
}

/// CSF levels held in memory (as Python's `CsfTensor` holds them).
struct MemoryTree<'a> {
    levels: &'a [(Vec<u32>, Vec<u32>)],
    order: &'a [usize],
}

impl CsfLevels for MemoryTree<'_> {
    type W = u32;
    fn rank(&self) -> usize {
        self.levels.len()
    }
    fn dim(&self, level: usize) -> usize {
        self.order[level]
    }
    fn pos_words(&self, level: usize) -> &[u32] {
        &self.levels[level].0
    }
    fn crd_words(&self, level: usize) -> &[u32] {
        &self.levels[level].1
    }
}

/// A file whose `pos`/`crd` words were changed: `verify` names the rule,
/// lookups and walks give errors or wrong-but-bounded answers, never a
/// panic.
#[test]
fn damaged_levels_are_named_by_verify_and_never_panic() {
    let dir = tempfile::tempdir().unwrap();
    let items = contributions(&[20, 20, 20], 3000, 5);
    let opts = AssembleOptions {
        layout: OutputLayout::Csf,
        ..AssembleOptions::default()
    };
    let path = assemble(dir.path(), "d.hrry", &[20, 20, 20], &items, opts);
    let f = HurrayFile::open(&path).unwrap();
    let base = f.mapped_bytes().unwrap().as_ptr() as usize;
    let t = csf(&f);
    let at = |w: &[u64], k: usize| w.as_ptr() as usize - base + 8 * k;
    let cases = [
        ("pointer-decreasing", at(t.pos(1), 2), 0u64),
        ("pointer-out-of-range", at(t.pos(2), 2), 1 << 40),
        ("index-out-of-bounds", at(t.crd(2), 3), 20),
        ("not-sorted", at(t.crd(1), 1), 19),
        ("pointer-start", at(t.pos(0), 0), 1),
    ];
    let bytes = std::fs::read(&path).unwrap();
    drop(f);
    for (rule, off, word) in cases {
        let mut b = bytes.clone();
        b[off..off + 8].copy_from_slice(&word.to_le_bytes());
        let bad = dir.path().join(format!("{rule}.hrry"));
        std::fs::write(&bad, &b).unwrap();
        let f = HurrayFile::open(&bad).unwrap();
        let problems = f.verify();
        assert!(
            problems.iter().any(|p| p.rule == rule),
            "{rule}: {problems:?}"
        );
        // Stored checksums catch the change too.
        assert!(
            problems.iter().any(|p| p.rule == "checksum-mismatch"),
            "{rule}"
        );
        let t = csf(&f);
        for (k, _) in items.iter().take(200) {
            let _ = t.get(k);
            let _ = t.fiber(&k[..2]);
        }
        for p in 0..t.nnz().min(200) {
            let _ = t.coordinate(p);
        }
        // The pointer rules of every level: a damaged pointer is a fault.
        let all = t.leaf_coordinates();
        if rule.starts_with("pointer") {
            assert!(all.is_err(), "{rule}");
        }
        let _ = f
            .only_tensor_view()
            .unwrap()
            .try_for_each(|_, _| Ok::<(), coo_assembler::Error>(()));
    }
}

#[test]
fn conversions_between_coo_and_csf_give_the_assembled_bytes() {
    use coo_assembler::convert::{ConvertOptions, convert};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shape = [25u64, 9, 31];
    let items = contributions(&shape, 5000, 9);
    let coo = assemble(d, "coo.hrry", &shape, &items, AssembleOptions::default());
    for order in [None, Some(vec![2, 0, 1])] {
        let direct = assemble(
            d,
            "direct.hrry",
            &shape,
            &items,
            csf_opts(order.clone(), 64 << 20, 2),
        );
        let opts = |to, order: Option<Vec<usize>>| ConvertOptions {
            to,
            mode_order: order,
            memory_budget: 16 << 20,
            ..ConvertOptions::default()
        };
        // COO -> CSF: one pass (identity) or through the sort.
        let out = d.join("conv.hrry");
        convert(&coo, &out, &opts(OutputLayout::Csf, order.clone())).unwrap();
        assert_eq!(
            std::fs::read(&out).unwrap(),
            std::fs::read(&direct).unwrap(),
            "{order:?}"
        );
        // CSF -> COO, and CSF -> CSF in another order.
        let back = d.join("back.hrry");
        convert(&direct, &back, &opts(OutputLayout::Coo, None)).unwrap();
        assert_eq!(
            std::fs::read(&back).unwrap(),
            std::fs::read(&coo).unwrap(),
            "{order:?}"
        );
        let other = d.join("other.hrry");
        convert(
            &direct,
            &other,
            &opts(OutputLayout::Csf, Some(vec![1, 2, 0])),
        )
        .unwrap();
        let f = HurrayFile::open(&other).unwrap();
        assert!(f.verify().is_empty());
        assert_eq!(csf(&f).mode_order(), [1, 2, 0]);
        assert_eq!(walked(&other).len(), walked(&coo).len());
    }
    // A mode order without CSF, and CSF below rank 3, are refused.
    let e = convert(
        &coo,
        &d.join("x.hrry"),
        &ConvertOptions {
            mode_order: Some(vec![0, 1, 2]),
            ..ConvertOptions::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("CSF option"), "{e}");
}

#[test]
fn frostt_tns_files_are_read_one_based_with_their_shape_found() {
    use coo_assembler::input::{InputFormat, Source};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let tns = d.join("t.tns");
    std::fs::write(
        &tns,
        "# a FROSTT tensor\n1 1 2 1.0\n1 3 4 2.0\n\n2 2 1 3.0   # trailing\n2 2 3 4.0\n1 1 2 0.5\n",
    )
    .unwrap();
    let src = Source::open(&tns, None).unwrap();
    assert_eq!(src.format(), InputFormat::Tns);
    let out = d.join("t.hrry");
    let s = src
        .assemble_to(&out, None, None, csf_opts(None, 64 << 20, 2), |_| {})
        .unwrap();
    assert_eq!(s.nnz, 4);
    let f = HurrayFile::open(&out).unwrap();
    let t = csf(&f);
    // The spec example, 1-based, with a duplicate summed.
    assert_eq!(t.shape(), [2, 3, 4]);
    assert_eq!(t.crd(2), [1, 3, 0, 2]);
    assert_eq!(t.get(&[0, 0, 1]).unwrap(), Value::Float(1.5));
    // A shape given wins; a smaller one is an error naming the index.
    let src = Source::open(&tns, None).unwrap();
    let s = src
        .assemble_to(
            &out,
            Some(&[5, 5, 5]),
            None,
            AssembleOptions::default(),
            |_| {},
        )
        .unwrap();
    assert_eq!(s.nnz, 4);
    // Index 0 and ragged lines are named by their line.
    for (body, want) in [
        ("1 1 1 1.0\n0 1 1 2.0\n", "line 2"),
        ("1 1 1 1.0\n1 1 2.0\n", "line 2"),
    ] {
        let bad = d.join("bad.tns");
        std::fs::write(&bad, body).unwrap();
        let e = Source::open(&bad, None)
            .and_then(|s| s.assemble_to(&out, None, None, AssembleOptions::default(), |_| {}))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{body:?}: {e}");
        let e = Source::open(&bad, None)
            .and_then(|s| {
                s.assemble_to(
                    &out,
                    Some(&[3, 3, 3]),
                    None,
                    AssembleOptions::default(),
                    |_| {},
                )
            })
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{body:?} with a shape: {e}");
    }
    // gzip'd .tns is recognised by its name too.
    let gz = d.join("t.tns.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut enc, &std::fs::read(&tns).unwrap()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let src = Source::open(&gz, None).unwrap();
    assert_eq!(src.format(), InputFormat::Tns);
    let out2 = d.join("gz.hrry");
    src.assemble_to(&out2, None, None, csf_opts(None, 64 << 20, 2), |_| {})
        .unwrap();
    let a = std::fs::read(&out2).unwrap();
    let f2 = HurrayFile::open(&out2).unwrap();
    assert_eq!(csf(&f2).crd(2), [1, 3, 0, 2]);
    assert!(!a.is_empty());
}

/// `ttv` along every mode of CSF tensors in several mode orders: the
/// fibre-streaming path (the leaf level) and the builder's path give the
/// same bytes as the product of the COO tensor, and the values of a
/// plain oracle (exact here: multiples of 1/64 times small integers).
#[test]
fn ttv_along_every_mode_gives_the_oracle_by_either_path() {
    use coo_assembler::ttv::ttv;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let shape = [9u64, 14, 6, 5];
    let mut rnd = xorshift(11);
    let items: Vec<(Vec<u64>, f64)> = (0..6000)
        .map(|_| {
            let idx: Vec<u64> = shape.iter().map(|&e| rnd(e)).collect();
            (idx, (rnd(2000) as f64 - 1000.0) / 64.0)
        })
        .collect();
    let coo = assemble(d, "coo.hrry", &shape, &items, AssembleOptions::default());
    let fc = HurrayFile::open(&coo).unwrap();
    let tc = fc.only_tensor_view().unwrap();
    let entries = walked(&coo);
    for order in [vec![0, 1, 2, 3], vec![2, 0, 3, 1], vec![3, 2, 1, 0]] {
        let path = assemble(
            d,
            "csf.hrry",
            &shape,
            &items,
            csf_opts(Some(order.clone()), 64 << 20, 2),
        );
        let f = HurrayFile::open(&path).unwrap();
        let t = f.only_tensor_view().unwrap();
        for (mode, &extent) in shape.iter().enumerate() {
            let x: Vec<f64> = (0..extent).map(|k| k as f64 - 3.0).collect();
            // The result in the order the CSF's upper levels give, so the
            // leaf mode streams.
            let rest: Vec<usize> = order
                .iter()
                .filter(|&&m| m != mode)
                .map(|&m| if m < mode { m } else { m - 1 })
                .collect();
            let out_opts = AssembleOptions {
                layout: OutputLayout::Csf,
                mode_order: Some(rest.clone()),
                memory_budget: 16 << 20,
                ..AssembleOptions::default()
            };
            let a = d.join("a.hrry");
            let s = ttv(&t, mode, &x, &a, &out_opts).unwrap();
            assert_eq!(
                s.streamed,
                order[3] == mode && rest.len() == 3,
                "{order:?} {mode}"
            );
            let b = d.join("b.hrry");
            let s2 = ttv(&tc, mode, &x, &b, &out_opts).unwrap();
            assert!(!s2.streamed);
            assert_eq!(
                std::fs::read(&a).unwrap(),
                std::fs::read(&b).unwrap(),
                "{order:?} mode {mode}"
            );
            // The oracle.
            let mut want: BTreeMap<Vec<u64>, f64> = BTreeMap::new();
            for (k, v) in &entries {
                let mut y = k.clone();
                let i = y.remove(mode);
                *want.entry(y).or_insert(0.0) += v.to_f64() * x[i as usize];
            }
            let got: BTreeMap<Vec<u64>, f64> = walked(&a)
                .into_iter()
                .map(|(k, v)| (k, v.to_f64()))
                .collect();
            assert_eq!(got, want, "{order:?} mode {mode}");
        }
    }
    // Refusals: a wrong vector length, a mode past the rank.
    let e = ttv(
        &tc,
        1,
        &[1.0; 3],
        &d.join("x.hrry"),
        &AssembleOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("extent 14"), "{e}");
    let e = ttv(
        &tc,
        4,
        &[1.0; 3],
        &d.join("x.hrry"),
        &AssembleOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("mode 4"), "{e}");
}

/// The layout-blind reader calls (`Tensor::entry_coordinates`,
/// `coordinates_by_dimension`, `prefix_range`, `is_row_major`, `values`)
/// agree with the storage-order walk for every layout and mode order.
#[test]
fn the_layout_blind_reader_calls_agree_with_the_walk_in_every_layout() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = coo_assembler_testkit::Rng::new(41);
    let cases: Vec<(Vec<u64>, OutputLayout, Option<Vec<usize>>)> = vec![
        (vec![9, 7], OutputLayout::Coo, None),
        (vec![9, 7], OutputLayout::Csr, None),
        (vec![9, 7], OutputLayout::Csc, None),
        (vec![5, 4, 6], OutputLayout::Coo, None),
        (vec![5, 4, 6], OutputLayout::Csf, None),
        (vec![5, 4, 6], OutputLayout::Csf, Some(vec![2, 0, 1])),
    ];
    for (k, (shape, layout, order)) in cases.into_iter().enumerate() {
        let items: Vec<(Vec<u64>, f64)> = (0..60)
            .map(|_| {
                let i = shape.iter().map(|&e| rng.below(e)).collect();
                (i, rng.below(100) as f64)
            })
            .collect();
        let opts = AssembleOptions {
            layout,
            mode_order: order.clone(),
            ..AssembleOptions::default()
        };
        let path = assemble(d.path(), &format!("t{k}.hrry"), &shape, &items, opts);
        let walk = walked(&path);
        let f = HurrayFile::open(&path).unwrap();
        let t = f.only_tensor_view().unwrap();
        let (rank, nnz) = (shape.len(), walk.len());
        let what = format!("{layout} {order:?}");
        // Coordinates of every entry, from any first entry.
        let mut all = vec![0u64; nnz * rank];
        t.entry_coordinates(0, &mut all).unwrap();
        let want: Vec<u64> = walk.iter().flat_map(|(i, _)| i.clone()).collect();
        assert_eq!(all, want, "{what}");
        let mut tail = vec![0u64; 3 * rank];
        t.entry_coordinates(nnz as u64 - 3, &mut tail).unwrap();
        assert_eq!(tail, want[(nnz - 3) * rank..], "{what}");
        assert!(matches!(
            t.entry_coordinates(nnz as u64 - 1, &mut tail),
            Err(coo_assembler::Error::PositionOutOfRange { .. })
        ));
        // By dimension.
        let by_dim = t.coordinates_by_dimension().unwrap();
        for (p, (i, _)) in walk.iter().enumerate() {
            for (dim, &x) in i.iter().enumerate() {
                assert_eq!(by_dim[dim * nnz + p], x, "{what}: entry {p}");
            }
        }
        // Values in storage order.
        let vals = t.values::<f64>().unwrap();
        let walked_vals: Vec<f64> = walk.iter().map(|(_, v)| v.to_f64()).collect();
        assert_eq!(vals, &walked_vals[..], "{what}");
        // Storage order: the dimensions as the layout stores them.
        let stored: Vec<usize> = match (layout, &order) {
            (OutputLayout::Csc, _) => vec![1, 0],
            (_, Some(o)) => o.clone(),
            _ => (0..rank).collect(),
        };
        assert_eq!(
            t.is_row_major(),
            stored.iter().enumerate().all(|(l, &d)| l == d),
            "{what}"
        );
        // Every leading prefix (storage order) of one and two components
        // holds exactly the entries that have it.
        for len in 1..rank {
            for (i, _) in &walk {
                let prefix: Vec<u64> = stored[..len].iter().map(|&d| i[d]).collect();
                let r = t.prefix_range(&prefix).unwrap();
                let have: Vec<usize> = (0..nnz)
                    .filter(|&p| (0..len).all(|l| walk[p].0[stored[l]] == prefix[l]))
                    .collect();
                assert_eq!(
                    (r.start as usize..r.end as usize).collect::<Vec<_>>(),
                    have,
                    "{what}: prefix {prefix:?}"
                );
            }
        }
    }
}
