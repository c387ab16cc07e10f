//! Bool values: patterns and graphs. A duplicate is true if any of its
//! contributions is (scipy's sum of bools), across runs and spills; the
//! file stores them 8 per byte, least significant bit first; every layout.

use coo_assembler::{
    AssembleOptions, Builder, DType, Error, HurrayFile, Value, element::Bit,
    options::DuplicatePolicy, options::OutputLayout,
};
use std::collections::BTreeMap;

fn opts(layout: OutputLayout, dir: &std::path::Path) -> AssembleOptions {
    AssembleOptions {
        layout,
        temp_dir: Some(dir.to_path_buf()),
        ..AssembleOptions::default()
    }
}

/// The file's only tensor as (row, col) -> bool.
fn entries(path: &std::path::Path) -> BTreeMap<(u64, u64), bool> {
    let f = HurrayFile::open(path).unwrap();
    let t = f.only_tensor_view().unwrap();
    assert_eq!(t.dtype(), DType::Bool);
    let mut m = BTreeMap::new();
    t.try_for_each(|idx, v| {
        let Value::UInt(b) = v else {
            panic!("a bool reads as 0 or 1, got {v:?}")
        };
        assert!(b <= 1, "{b}");
        m.insert((idx[0], idx[1]), b == 1);
        Ok::<(), Error>(())
    })
    .unwrap();
    m
}

#[test]
fn a_duplicate_is_true_if_any_contribution_is_in_every_layout() {
    let dir = tempfile::tempdir().unwrap();
    for layout in [OutputLayout::Coo, OutputLayout::Csr, OutputLayout::Csc] {
        let mut b = Builder::new(&[4, 5], DType::Bool, opts(layout, dir.path())).unwrap();
        b.push(&[0, 1], false).unwrap();
        b.push(&[0, 1], true).unwrap();
        b.push(&[0, 1], false).unwrap();
        b.push(&[2, 3], false).unwrap();
        b.push(&[2, 3], false).unwrap();
        b.push(&[3, 0], 1u8).unwrap();
        b.push(&[1, 4], true).unwrap();
        let out = dir.path().join(format!("{layout}.hrry"));
        let s = b.finish(&out).unwrap();
        assert_eq!((s.contributions, s.nnz), (7, 4), "{layout}");
        let want: BTreeMap<_, _> = [
            ((0, 1), true),
            ((1, 4), true),
            ((2, 3), false),
            ((3, 0), true),
        ]
        .into_iter()
        .collect();
        assert_eq!(entries(&out), want, "{layout}");
        let f = HurrayFile::open(&out).unwrap();
        let t = f.only_tensor_view().unwrap();
        assert_eq!(t.get(&[0, 1]).unwrap(), Value::UInt(1));
        assert_eq!(t.get(&[2, 3]).unwrap(), Value::UInt(0));
        assert_eq!(t.get(&[0, 0]).unwrap(), Value::UInt(0), "implicit false");
        assert!(f.verify().is_empty(), "{:?}", f.verify());
    }
}

#[test]
fn the_values_buffer_is_bit_packed_lsb_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(&[20], DType::Bool, opts(OutputLayout::Coo, dir.path())).unwrap();
    // 11 entries: true at 0, 2, 3, 9; the spec's example is the first 5.
    let trues = [0u64, 2, 3, 9];
    for i in 0..11u64 {
        b.push(&[i], trues.contains(&i)).unwrap();
    }
    let out = dir.path().join("bits.hrry");
    b.finish(&out).unwrap();
    let f = HurrayFile::open(&out).unwrap();
    let c = f.only_tensor_view().unwrap();
    let t = c.as_coo().unwrap();
    let bits: Vec<bool> = t.values::<Bit>().unwrap().iter().map(|b| b.get()).collect();
    let want: Vec<bool> = (0..11).map(|i| trues.contains(&i)).collect();
    assert_eq!(bits, want);
    // In the file: ceil(11 / 8) = 2 bytes, 0b0000_1101 and 0b0000_0010.
    assert_eq!(t.descriptor().values.byte_size, 2);
    // The values buffer is the first buffer, at an aligned offset.
    let bytes = std::fs::read(&out).unwrap();
    let a = t.descriptor().values.alignment as usize;
    let at = (1..bytes.len() / a)
        .map(|k| k * a)
        .find(|&o| bytes[o..o + 2] == [0x0D, 0x02]);
    assert!(at.is_some(), "the packed bytes are in the file");
}

#[test]
fn policies_and_spills_give_the_same_bools() {
    let dir = tempfile::tempdir().unwrap();
    // Enough contributions at the smallest budget to spill several runs.
    let n = 600_000u64;
    let truth = |i: u64| i % 7 == 3;
    let mut results = Vec::new();
    for budget in [None, Some(4u64 << 20)] {
        let mut o = opts(OutputLayout::Coo, dir.path());
        if let Some(m) = budget {
            o.memory_budget = m;
        }
        let mut b = Builder::new(&[1000, 1000], DType::Bool, o).unwrap();
        for i in 0..n {
            // Every coordinate hit three times: true at most once.
            let k = i % (n / 3);
            b.push(&[k / 1000, k % 1000], truth(i)).unwrap();
        }
        let out = dir.path().join(format!("spill{}.hrry", budget.is_some()));
        let s = b.finish(&out).unwrap();
        if budget.is_some() {
            assert!(s.runs_spilled > 1, "the small budget spills: {s:?}");
        }
        results.push(entries(&out));
    }
    assert_eq!(results[0], results[1]);
    let m = &results[0];
    assert_eq!(m.len() as u64, n / 3);
    for (&(r, c), &v) in m {
        let k = r * 1000 + c;
        let want = (0..3).any(|j| truth(k + j * (n / 3)));
        assert_eq!(v, want, "({r}, {c})");
    }

    // min is `and`, max is `or`, last the last pushed, error refuses.
    let expect = [
        (DuplicatePolicy::Min, false),
        (DuplicatePolicy::Max, true),
        (DuplicatePolicy::Last, false),
    ];
    for (policy, want) in expect {
        let mut o = opts(OutputLayout::Coo, dir.path());
        o.duplicates = policy;
        let mut b = Builder::new(&[2, 2], DType::Bool, o).unwrap();
        b.push(&[1, 1], true).unwrap();
        b.push(&[1, 1], false).unwrap();
        let out = dir.path().join(format!("{policy}.hrry"));
        b.finish(&out).unwrap();
        assert_eq!(entries(&out)[&(1, 1)], want, "{policy}");
    }
    let mut o = opts(OutputLayout::Coo, dir.path());
    o.duplicates = DuplicatePolicy::Error;
    let mut b = Builder::new(&[2, 2], DType::Bool, o).unwrap();
    b.push(&[1, 1], true).unwrap();
    b.push(&[1, 1], true).unwrap();
    let e = b.finish(dir.path().join("err.hrry")).unwrap_err();
    assert!(e.to_string().contains("duplicate"), "{e}");
}

#[test]
fn values_that_are_not_bools_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Builder::new(&[2, 2], DType::Bool, opts(OutputLayout::Coo, dir.path())).unwrap();
    let e = b.push(&[0, 0], 2u32).unwrap_err();
    assert!(e.to_string().contains("does not fit bool"), "{e}");
    let e = b.push(&[0, 0], 1.0f64).unwrap_err();
    assert!(e.to_string().contains("float"), "{e}");
    // A bool goes into a numeric tensor as 0 or 1.
    let mut n = Builder::new(&[2, 2], DType::F64, opts(OutputLayout::Coo, dir.path())).unwrap();
    n.push(&[0, 0], true).unwrap();
    n.push(&[0, 0], true).unwrap();
    let out = dir.path().join("f.hrry");
    n.finish(&out).unwrap();
    let f = HurrayFile::open(&out).unwrap();
    let v = f.only_tensor_view().unwrap().get(&[0, 0]).unwrap();
    assert_eq!(v, Value::Float(2.0));
}

/// A partition composite of bool members: each member's buffers are
/// copied at their size in the file (bit-packed values), so the composite
/// reads back every entry and verifies clean.
#[test]
fn a_composite_of_bool_members_reads_back_every_entry() {
    let dir = tempfile::tempdir().unwrap();
    let mut parts = Vec::new();
    let mut want = BTreeMap::new();
    for (k, lo) in [0u64, 4].into_iter().enumerate() {
        let mut b =
            Builder::new(&[4, 6], DType::Bool, opts(OutputLayout::Coo, dir.path())).unwrap();
        for i in 0..4u64 {
            for j in 0..6u64 {
                if (i * 7 + j * 3 + k as u64) % 4 != 0 {
                    let v = (i + j) % 3 == 0;
                    b.push(&[i, j], v).unwrap();
                    want.insert(vec![lo + i, j], v);
                }
            }
        }
        let p = dir.path().join(format!("m{k}.hrry"));
        b.finish(&p).unwrap();
        parts.push((p, vec![lo, 0]));
    }
    let out = dir.path().join("joined.hrry");
    coo_assembler::composite::join(&parts, &[8, 6], &out, "b").unwrap();
    let c = coo_assembler::read::CompositeFile::open(&out).unwrap();
    let problems: Vec<_> = c
        .verify()
        .into_iter()
        .filter(|p| p.severity != coo_assembler::read::Severity::Note)
        .collect();
    assert!(problems.is_empty(), "{problems:?}");
    for (idx, v) in &want {
        assert_eq!(c.get(idx).unwrap(), Value::UInt(u64::from(*v)), "{idx:?}");
    }
}
