//! Interoperability, reading side: CSR and CSC matrices written by the
//! reference writer (hurray-io 0.1.0) in several element types, empty,
//! with empty rows and columns, one row, one column, open strictly, verify
//! clean and read identically through our reader (every element by `get`,
//! the storage order by `iter`, the three buffers byte for byte, rows and
//! columns as slices).

use crate::common;

use common::reference;
use coo_assembler::{DType, HurrayFile, Value, options::OutputLayout, read::Tensor};
use hurray_core::LayoutDescriptor;
use hurray_core::layout::{CscLayout, CsrLayout};
use std::collections::BTreeMap;

type Entries = BTreeMap<(u64, u64), Value>;

fn value(dt: DType, k: u64) -> Value {
    if dt.is_float() {
        Value::Float(k as f64 * 0.5 - 2.0)
    } else if dt.is_signed_int() {
        Value::Int(k as i64 - 3)
    } else {
        Value::UInt(k)
    }
}

/// Pseudo-random entries: `n` draws (repeats collapse; a stored zero is
/// still an entry).
fn entries(shape: [u64; 2], n: usize, seed: u64, dt: DType) -> Entries {
    let mut x = seed | 1;
    let mut m = Entries::new();
    if shape[0] == 0 || shape[1] == 0 {
        return m;
    }
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Rows from the first half only, so the second half is empty.
        let i = x % shape[0].div_ceil(2);
        let j = (x >> 20) % shape[1];
        m.insert((i, j), value(dt, (x >> 40) % 7));
    }
    m
}

/// The three buffers in `layout`'s order.
fn buffers(e: &Entries, shape: [u64; 2], dt: DType, csc: bool) -> [Vec<u8>; 3] {
    let mut list: Vec<((u64, u64), Value)> = e.iter().map(|(k, v)| (*k, *v)).collect();
    if csc {
        list.sort_by_key(|((i, j), _)| (*j, *i));
    }
    let major = |(i, j): (u64, u64)| if csc { j } else { i };
    let minor = |(i, j): (u64, u64)| if csc { i } else { j };
    let values = list
        .iter()
        .flat_map(|(_, v)| v.to_le(dt).unwrap()[..dt.width()].to_vec())
        .collect();
    let indices = list
        .iter()
        .flat_map(|(k, _)| minor(*k).to_le_bytes())
        .collect();
    let extent = if csc { shape[1] } else { shape[0] };
    let mut ptr = Vec::new();
    let mut pos = 0;
    for m in 0..=extent {
        while pos < list.len() && major(list[pos].0) < m {
            pos += 1;
        }
        ptr.extend_from_slice(&(pos as u64).to_le_bytes());
    }
    [values, indices, ptr]
}

fn reference_file(shape: [u64; 2], dt: DType, csc: bool, bufs: &[Vec<u8>; 3], nnz: u64) -> Vec<u8> {
    let layout = if csc {
        LayoutDescriptor::Csc(CscLayout::new(nnz))
    } else {
        LayoutDescriptor::Csr(CsrLayout::new(nnz))
    };
    let b: [&[u8]; 3] = [&bufs[0], &bufs[1], &bufs[2]];
    let d = reference::descriptor(dt, &shape, layout, &b, None);
    reference::write(&[("m", &d, &b)])
}

fn zero(dt: DType) -> Value {
    if dt.is_float() {
        Value::Float(0.0)
    } else if dt.is_signed_int() {
        Value::Int(0)
    } else {
        Value::UInt(0)
    }
}

fn check(shape: [u64; 2], dt: DType, csc: bool, e: &Entries) {
    let what = format!("{shape:?} {dt} {}", if csc { "csc" } else { "csr" });
    let bufs = buffers(e, shape, dt, csc);
    let bytes = reference_file(shape, dt, csc, &bufs, e.len() as u64);
    let f = HurrayFile::from_bytes(bytes).unwrap_or_else(|err| panic!("{what}: {err}"));
    // The reference writer stores no checksums: a note, nothing else.
    let p = f.verify();
    assert!(p.len() == 1 && p[0].rule == "no-checksums", "{what}: {p:?}");
    let t = f.only_tensor_view().unwrap();
    let layout = if csc {
        OutputLayout::Csc
    } else {
        OutputLayout::Csr
    };
    assert_eq!(t.layout(), layout, "{what}");
    assert_eq!(
        (t.shape(), t.dtype(), t.nnz()),
        (&shape[..], dt, e.len() as u64)
    );
    for i in 0..shape[0] {
        for j in 0..shape[1] {
            let want = e.get(&(i, j)).copied().unwrap_or(zero(dt));
            assert_eq!(t.get(&[i, j]).unwrap(), want, "{what} ({i}, {j})");
        }
    }
    let Tensor::Compressed(c) = t else {
        panic!("{what}: not CSR/CSC")
    };
    assert_eq!(c.values_bytes(), &bufs[0][..], "{what}");
    assert_eq!(c.indices_bytes(), &bufs[1][..], "{what}");
    assert_eq!(c.pointers_bytes(), &bufs[2][..], "{what}");
    let mut order: Vec<((u64, u64), Value)> = e.iter().map(|(k, v)| (*k, *v)).collect();
    if csc {
        order.sort_by_key(|((i, j), _)| (*j, *i));
    }
    let got: Vec<((u64, u64), Value)> = c
        .iter()
        .map(|r| {
            let (i, j, v) = r.unwrap();
            ((i, j), v)
        })
        .collect();
    assert_eq!(got, order, "{what}");
    // Each row (CSR) / column (CSC) as a slice: its minor indices.
    for m in 0..c.major_extent() {
        let r = c.major_range(m).unwrap();
        let want: Vec<u64> = order
            .iter()
            .filter(|((i, j), _)| if csc { *j == m } else { *i == m })
            .map(|((i, j), _)| if csc { *i } else { *j })
            .collect();
        assert_eq!(&c.indices()[r.start as usize..r.end as usize], &want[..]);
    }
    if dt == DType::F64 {
        let lane = |m| {
            if csc {
                c.column::<f64>(m)
            } else {
                c.row::<f64>(m)
            }
        };
        if c.major_extent() > 0 {
            let (idx, vals) = lane(0).unwrap();
            assert_eq!(idx.len(), vals.len());
        }
    }
}

const DTYPES: [DType; 8] = [
    DType::F64,
    DType::F32,
    DType::F16,
    DType::BF16,
    DType::I32,
    DType::I8,
    DType::U16,
    DType::U64,
];

#[test]
fn reference_csr_and_csc_read_identically() {
    let shapes: [([u64; 2], usize); 6] = [
        ([6, 9], 20), // rows 3.. empty, some columns empty
        ([1, 12], 6), // one row
        ([12, 1], 6), // one column
        ([3, 4], 0),  // no entries
        ([0, 5], 0),  // no rows
        ([40, 33], 300),
    ];
    for dt in DTYPES {
        for (k, (shape, n)) in shapes.iter().enumerate() {
            let e = entries(*shape, *n, 77 + k as u64, dt);
            for csc in [false, true] {
                check(*shape, dt, csc, &e);
            }
        }
    }
}

#[test]
fn empty_matrices_of_every_shape_kind() {
    for shape in [[0u64, 0], [0, 3], [3, 0], [1, 1]] {
        for csc in [false, true] {
            check(shape, DType::F32, csc, &Entries::new());
        }
    }
}
