//! Reading CSR and CSC: every structural rule refused at open, every data
//! invariant broken on purpose found by `verify` with a message naming the
//! rule and the row (column), and the accessors (get, rows and columns as
//! slices, iteration, typed views) against the dense matrix.

use coo_assembler::internals::hurray::align_up;
use coo_assembler::write::{FileWriter, WriteOptions};
use coo_assembler::{
    DType, Error, HurrayFile, Value, options::OutputLayout, read::Problem, read::ReadOptions,
    read::Severity, read::Tensor,
};

/// The spec's CSR example, 4 x 5 f32 (row 3 empty):
/// row 0: 1 at col 0, 2 at col 3; row 1: 3 at col 2; row 2: 4 at col 1, 5 at col 4.
const ENTRIES: [((u64, u64), f32); 5] = [
    ((0, 0), 1.0),
    ((0, 3), 2.0),
    ((1, 2), 3.0),
    ((2, 1), 4.0),
    ((2, 4), 5.0),
];

/// Absolute offsets of a written matrix's parts.
struct Placed {
    bytes: Vec<u8>,
    descriptor: usize,
    values: usize,
    indices: usize,
    pointers: usize,
}

fn write(layout: OutputLayout, checksums: bool, statistics: bool) -> Placed {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.hrry");
    let opts = WriteOptions {
        checksums,
        statistics,
        ..WriteOptions::default()
    };
    let mut fw = FileWriter::create(&p, opts).unwrap();
    let mut t = fw
        .begin_tensor_as("m", DType::F32, &[4, 5], layout)
        .unwrap();
    let mut e = ENTRIES.to_vec();
    if layout == OutputLayout::Csc {
        e.sort_by_key(|((i, j), _)| (*j, *i));
    }
    for ((i, j), v) in e {
        t.push(&[i, j], v).unwrap();
    }
    t.finish().unwrap();
    let s = fw.finish().unwrap();
    let t = &s.tensors[0];
    let values = t.data_offset as usize;
    let indices = align_up(t.data_offset + 20, 4096).unwrap() as usize;
    let pointers = align_up(indices as u64 + 40, 4096).unwrap() as usize;
    Placed {
        bytes: std::fs::read(&p).unwrap(),
        descriptor: t.descriptor_offset as usize,
        values,
        indices,
        pointers,
    }
}

fn set_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn problems(bytes: &[u8]) -> Vec<Problem> {
    all_problems(bytes)
        .into_iter()
        .filter(|p| p.severity != Severity::Note)
        .collect()
}

/// Every problem, the notes too (a file written without checksums gets
/// the `no-checksums` note).
fn all_problems(bytes: &[u8]) -> Vec<Problem> {
    HurrayFile::from_bytes_with(
        bytes,
        ReadOptions {
            permissive: true,
            ..ReadOptions::default()
        },
    )
    .unwrap()
    .verify()
}

/// `verify` reports `rule` as an error whose text holds every `needle`.
fn assert_rule(bytes: &[u8], rule: &str, needles: &[&str]) {
    let pr = problems(bytes);
    let hit = pr.iter().find(|p| p.rule == rule);
    let Some(p) = hit else {
        panic!("no {rule} in {pr:?}");
    };
    assert!(p.is_error(), "{p}");
    let text = p.to_string();
    for n in needles {
        assert!(text.contains(n), "{text:?} lacks {n:?}");
    }
}

#[test]
fn valid_files_verify_in_both_layouts() {
    for layout in [OutputLayout::Csr, OutputLayout::Csc] {
        for (checksums, statistics) in [(true, true), (false, false)] {
            let f = write(layout, checksums, statistics);
            assert!(problems(&f.bytes).is_empty(), "{:?}", problems(&f.bytes));
            let rules: Vec<&str> = all_problems(&f.bytes).iter().map(|p| p.rule).collect();
            let want: &[&str] = if checksums { &[] } else { &["no-checksums"] };
            assert_eq!(rules, want);
            let h = HurrayFile::from_bytes(f.bytes).unwrap();
            assert_eq!(h.only_tensor_view().unwrap().layout(), layout);
        }
    }
}

#[test]
fn csr_pointer_invariants_each_name_their_rule_and_row() {
    let f = write(OutputLayout::Csr, false, false);
    let ptr = |k: usize| f.pointers + 8 * k;
    // row_ptr = [0, 2, 3, 5, 5]
    let mut b = f.bytes.clone();
    set_u64(&mut b, ptr(0), 1);
    assert_rule(&b, "pointer-start", &["row_ptr[0] is 1, must be 0"]);

    let mut b = f.bytes.clone();
    set_u64(&mut b, ptr(2), 1);
    assert_rule(
        &b,
        "pointer-decreasing",
        &["row 1", "row_ptr[2] = 1", "row_ptr[1] = 2"],
    );

    let mut b = f.bytes.clone();
    set_u64(&mut b, ptr(2), 9);
    assert_rule(
        &b,
        "pointer-out-of-range",
        &["row 1", "row_ptr[2] = 9", "nnz = 5"],
    );

    let mut b = f.bytes.clone();
    set_u64(&mut b, ptr(4), 4);
    set_u64(&mut b, ptr(3), 4);
    assert_rule(&b, "pointer-end", &["row_ptr[4] is 4, must be nnz = 5"]);
}

#[test]
fn csr_minor_index_invariants_each_name_their_rule_and_row() {
    let f = write(OutputLayout::Csr, false, false);
    let col = |k: usize| f.indices + 8 * k;
    // col_indices = [0, 3, 2, 1, 4]; row 0 = entries 0..2, row 2 = 3..5.
    let mut b = f.bytes.clone();
    set_u64(&mut b, col(0), 4);
    assert_rule(
        &b,
        "not-sorted",
        &["row 0", "column 3 comes after column 4", "entry 1"],
    );

    let mut b = f.bytes.clone();
    set_u64(&mut b, col(1), 0);
    assert_rule(
        &b,
        "duplicate",
        &["row 0", "column 0 is stored twice", "entry 1"],
    );

    let mut b = f.bytes.clone();
    set_u64(&mut b, col(4), 7);
    assert_rule(
        &b,
        "index-out-of-bounds",
        &["row 2", "column 7 is >= extent 5", "entry 4"],
    );
}

#[test]
fn csc_invariants_name_the_column() {
    let f = write(OutputLayout::Csc, false, false);
    // Column-major: (0,0) (2,1) (1,2) (0,3) (2,4); col_ptr = [0,1,2,3,4,5],
    // row_indices = [0, 2, 1, 0, 2].
    let mut b = f.bytes.clone();
    set_u64(&mut b, f.pointers + 8 * 3, 1);
    assert_rule(&b, "pointer-decreasing", &["column 2", "col_ptr[3] = 1"]);

    let mut b = f.bytes.clone();
    set_u64(&mut b, f.indices + 8 * 4, 4);
    assert_rule(
        &b,
        "index-out-of-bounds",
        &["column 4", "row 4 is >= extent 4"],
    );

    // Two entries in column 0, rows decreasing: col_ptr [0,2,2,3,4,5].
    let mut b = f.bytes.clone();
    set_u64(&mut b, f.pointers + 8, 2);
    set_u64(&mut b, f.pointers + 16, 2);
    // Entries 0 and 1 of column 0 are now rows 0 and 2: valid. Make them
    // decreasing, then equal.
    assert!(problems(&b).is_empty(), "{:?}", problems(&b));
    set_u64(&mut b, f.indices, 3);
    assert_rule(&b, "not-sorted", &["column 0", "row 2 comes after row 3"]);
    set_u64(&mut b, f.indices, 2);
    assert_rule(&b, "duplicate", &["column 0", "row 2 is stored twice"]);
}

#[test]
fn hostile_pointers_cost_linear_time() {
    // Every pointer says "the whole matrix": a naive check would look at
    // nnz entries per row. The clamped walk looks at each entry once.
    let f = write(OutputLayout::Csr, false, false);
    let mut b = f.bytes.clone();
    for k in 1..4 {
        set_u64(&mut b, f.pointers + 8 * k, 5);
    }
    set_u64(&mut b, f.pointers + 8, 0);
    // [0, 0, 5, 5, 5]: valid pointers, but row 1 now holds columns 0 3 2 1 4.
    assert_rule(&b, "not-sorted", &["row 1"]);
}

#[test]
fn checksums_and_statistics_of_the_three_buffers() {
    for layout in [OutputLayout::Csr, OutputLayout::Csc] {
        let f = write(layout, true, true);
        let (ind, ptr) = match layout {
            OutputLayout::Csr => ("col_indices", "row_ptr"),
            _ => ("row_indices", "col_ptr"),
        };
        // A value changed: checksum error, statistics warning.
        let mut b = f.bytes.clone();
        b[f.values..f.values + 4].copy_from_slice(&9.5f32.to_le_bytes());
        let pr = problems(&b);
        assert!(pr.iter().any(|p| p.rule == "checksum-mismatch"
            && p.is_error()
            && p.detail.contains("values buffer")));
        assert!(
            pr.iter()
                .any(|p| p.rule == "statistics-mismatch" && !p.is_error())
        );
        // A pointer and an index changed: their checksums name them.
        let mut b = f.bytes.clone();
        b[f.indices] ^= 1;
        let pr = problems(&b);
        assert!(
            pr.iter()
                .any(|p| p.rule == "checksum-mismatch" && p.detail.contains(ind)),
            "{pr:?}"
        );
        let mut b = f.bytes.clone();
        b[f.pointers + 8] ^= 0x10;
        let pr = problems(&b);
        assert!(
            pr.iter()
                .any(|p| p.rule == "checksum-mismatch" && p.detail.contains(ptr)),
            "{pr:?}"
        );
    }
}

#[test]
fn padding_between_buffers_must_be_zero() {
    let f = write(OutputLayout::Csr, false, false);
    let mut b = f.bytes.clone();
    b[f.pointers - 1] = 7;
    let e = HurrayFile::from_bytes_with(&b, ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("padding between col_indices and row_ptr"), "{e}");
    let pr = problems(&b);
    assert!(
        pr.iter().any(|p| p.rule == "padding-not-zero"
            && p.detail.contains("the col_indices of \"m\"")
            && p.detail.contains("the row_ptr of \"m\"")),
        "{pr:?}"
    );
}

#[test]
fn structural_rules_are_refused_at_open() {
    let f = write(OutputLayout::Csr, false, false);
    let d = f.descriptor;
    let open = |b: &[u8]| {
        HurrayFile::from_bytes_with(
            b,
            ReadOptions {
                permissive: true,
                ..ReadOptions::default()
            },
        )
        .unwrap_err()
        .to_string()
    };
    let cases: Vec<(usize, Vec<u8>, &str)> = vec![
        (d + 60, vec![2], "buffer_count is 2"),
        (d + 16, vec![3], "rank 3"),
        (d + 36, vec![8], "byte_offset is 8"),
        (d + 52, vec![1], "reserved"),
        // row_ptr byte_size 40 -> 48.
        (
            d + 61 + 32,
            48u64.to_le_bytes().to_vec(),
            "row_ptr byte_size 48 is not (nrows 4 + 1) * 8 (40)",
        ),
        // col_indices byte_size 40 -> 32.
        (
            d + 61 + 16,
            32u64.to_le_bytes().to_vec(),
            "col_indices byte_size 32 is not nnz 5 * 8 (40)",
        ),
        // nnz 5 -> 6: the values size no longer matches.
        (
            d + 44,
            6u64.to_le_bytes().to_vec(),
            "values byte_size 20 is not nnz 6 * 4 bytes (24)",
        ),
    ];
    for (at, patch, want) in cases {
        let mut b = f.bytes.clone();
        b[at..at + patch.len()].copy_from_slice(&patch);
        let e = open(&b);
        assert!(e.contains(want), "byte {at}: {e}");
    }
    // Issue 22: layout tag 0x0A (block-paged, a layout the views do not
    // read) is listed with its layout, and the operations that read
    // entries refuse it by name; a tag the spec does not name is refused
    // unless permissive, as the spec says. (0x09, CSF, is read since
    // issue 41: a CSR descriptor given its tag is a bad CSF one.)
    let mut b = f.bytes.clone();
    b[d + 15] = 0x0A;
    let h = HurrayFile::from_bytes(b).unwrap();
    let t = h.tensor_info("m").unwrap();
    let text = coo_assembler::read::describe_tag(0x0A);
    assert_eq!(t.layout_text(), text);
    let e = h.tensor_view("m").unwrap_err().to_string();
    assert!(e.contains(&format!("tensor \"m\" is {text}")), "{e}");
    let mut b = f.bytes.clone();
    b[d + 15] = 0x09;
    let e = HurrayFile::from_bytes(b).unwrap_err().to_string();
    assert!(e.contains("CSF is defined for ranks 3 to 64"), "{e}");
    let mut b = f.bytes.clone();
    b[d + 15] = 0x33;
    let e = HurrayFile::from_bytes(b.clone()).unwrap_err().to_string();
    assert!(
        e.contains("layout tag 0x33 is not one the Hurray specification names"),
        "{e}"
    );
    assert!(
        HurrayFile::from_bytes_with(
            &b,
            ReadOptions {
                permissive: true,
                ..ReadOptions::default()
            }
        )
        .is_ok()
    );
    // The index entry's data_length must reach the end of row_ptr.
    let h = HurrayFile::from_bytes(f.bytes.clone()).unwrap();
    let io = h.trailer().index_offset as usize;
    // entry: count u64, name_len u16, name "m", descriptor_offset u64,
    // descriptor_length u32, data_offset u64, data_length u64.
    let dl = io + 8 + 2 + 1 + 8 + 4 + 8;
    let mut b = f.bytes.clone();
    let want = u64::from_le_bytes(b[dl..dl + 8].try_into().unwrap());
    set_u64(&mut b, dl, want - 8);
    // The index has a CRC: recompute it so the entry itself is judged.
    let tl = b.len() - 40;
    let il = h.trailer().index_length as usize;
    let crc = coo_assembler::internals::hurray::crc32c::crc32c(&b[io..io + il]);
    b[tl + 28..tl + 32].copy_from_slice(&crc.to_le_bytes());
    let e = open(&b);
    assert!(
        e.contains("data_length") && e.contains("end of row_ptr"),
        "{e}"
    );
}

#[test]
fn accessors_agree_with_the_dense_matrix() {
    for layout in [OutputLayout::Csr, OutputLayout::Csc] {
        let f = write(layout, true, true);
        let h = HurrayFile::from_bytes(f.bytes).unwrap();
        let t = h.only_tensor_view().unwrap();
        assert_eq!(
            (t.nnz(), t.shape(), t.dtype()),
            (5, &[4u64, 5][..], DType::F32)
        );
        let mut dense = [[0f32; 5]; 4];
        for ((i, j), v) in ENTRIES {
            dense[i as usize][j as usize] = v;
        }
        for (i, row) in dense.iter().enumerate() {
            for (j, &v) in row.iter().enumerate() {
                let got = t.get(&[i as u64, j as u64]).unwrap();
                assert_eq!(got, Value::Float(f64::from(v)), "({i}, {j}) {layout}");
            }
        }
        assert!(matches!(
            t.get(&[4, 0]),
            Err(Error::PositionOutOfRange { .. })
        ));
        assert!(matches!(t.get(&[0]), Err(Error::WrongIndexCount { .. })));
        let Tensor::Compressed(c) = t else {
            panic!("not compressed")
        };
        // Storage order.
        let mut want: Vec<((u64, u64), f32)> = ENTRIES.to_vec();
        if layout == OutputLayout::Csc {
            want.sort_by_key(|((i, j), _)| (*j, *i));
        }
        let got: Vec<((u64, u64), f32)> = c
            .iter()
            .map(|e| {
                let (i, j, v) = e.unwrap();
                ((i, j), v.to_f64() as f32)
            })
            .collect();
        assert_eq!(got, want);
        let mut seen = Vec::new();
        t.try_for_each::<Error>(|idx, v| {
            seen.push(((idx[0], idx[1]), v.to_f64() as f32));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, want);
        // Typed views of the three buffers.
        let vals = c.values::<f32>().unwrap();
        assert_eq!(vals, want.iter().map(|e| e.1).collect::<Vec<_>>());
        assert!(matches!(c.values::<f64>(), Err(Error::TypeMismatch { .. })));
        match layout {
            OutputLayout::Csr => {
                assert_eq!(c.indices(), &[0, 3, 2, 1, 4]);
                assert_eq!(c.pointers(), &[0, 2, 3, 5, 5]);
                let (cols, v) = c.row::<f32>(2).unwrap();
                assert_eq!((cols, v), (&[1u64, 4][..], &[4.0f32, 5.0][..]));
                assert!(c.row::<f32>(3).unwrap().0.is_empty());
                assert!(c.column::<f32>(0).is_err());
                // The slice points into the file: zero-copy.
                let base = c.indices().as_ptr() as usize;
                assert_eq!(cols.as_ptr() as usize, base + 3 * 8);
            }
            _ => {
                assert_eq!(c.indices(), &[0, 2, 1, 0, 2]);
                assert_eq!(c.pointers(), &[0, 1, 2, 3, 4, 5]);
                let (rows, v) = c.column::<f32>(3).unwrap();
                assert_eq!((rows, v), (&[0u64][..], &[2.0f32][..]));
                assert!(c.row::<f32>(0).is_err());
            }
        }
        assert!(matches!(
            c.major_range(99),
            Err(Error::PositionOutOfRange { .. })
        ));
        // The COO-only entry points say what the tensor is.
        let e = h.only_tensor().unwrap_err().to_string();
        assert!(e.contains(&layout.to_string().to_uppercase()), "{e}");
        assert_eq!(h.tensors().count(), 0);
        assert_eq!(h.tensor_views().count(), 1);
    }
}

#[test]
fn broken_pointers_give_errors_not_panics() {
    let f = write(OutputLayout::Csr, false, false);
    let mut b = f.bytes.clone();
    set_u64(&mut b, f.pointers + 16, 1); // row_ptr = [0, 2, 1, 5, 5]
    for permissive in [false, true] {
        let h = HurrayFile::from_bytes_with(
            &b,
            ReadOptions {
                permissive,
                ..ReadOptions::default()
            },
        )
        .unwrap();
        let Tensor::Compressed(c) = h.only_tensor_view().unwrap() else {
            panic!()
        };
        let e = c.get(&[1, 2]).unwrap_err().to_string();
        assert!(e.contains("row 1") && e.contains("row_ptr"), "{e}");
        assert!(c.row::<f32>(1).is_err());
        let items: Vec<_> = c.iter().collect();
        // Row 0's two entries, then one error naming row 1, then the end.
        assert_eq!(items.len(), 3);
        let e = items[2].as_ref().unwrap_err().to_string();
        assert!(e.contains("row 1"), "{e}");
    }
    // A duplicate column: strict get refuses, permissive returns the first.
    let mut b = f.bytes.clone();
    set_u64(&mut b, f.indices + 8, 0);
    let h = HurrayFile::from_bytes(b.clone()).unwrap();
    let e = h.only_tensor_view().unwrap().get(&[0, 0]).unwrap_err();
    assert!(e.to_string().contains("stored twice"), "{e}");
    let h = HurrayFile::from_bytes_with(
        &b,
        ReadOptions {
            permissive: true,
            ..ReadOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        h.only_tensor_view().unwrap().get(&[0, 0]).unwrap(),
        Value::Float(1.0)
    );
}

#[test]
fn nnz_beyond_the_shape_needs_permissive() {
    // A 1 x 2 CSR cannot hold 3 entries.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.hrry");
    let mut fw = FileWriter::create(&p, WriteOptions::default()).unwrap();
    let mut t = fw
        .begin_tensor_as("m", DType::U8, &[1, 3], OutputLayout::Csr)
        .unwrap();
    for j in 0..3 {
        t.push(&[0, j], 1u8).unwrap();
    }
    t.finish().unwrap();
    let s = fw.finish().unwrap();
    let mut b = std::fs::read(&p).unwrap();
    // Shape [1, 3] -> [1, 2] (shape[1] at byte 28 of the descriptor); the
    // statistics' sparsity no longer matches either, so drop its mask bit.
    let d = s.tensors[0].descriptor_offset as usize;
    set_u64(&mut b, d + 28, 2);
    let st = d + 109;
    b[st] &= !0x02;
    let e = HurrayFile::from_bytes_with(&b, ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("nnz 3 exceeds the 2 elements"), "{e}");
    let pr = problems(&b);
    assert!(
        pr.iter()
            .any(|p| p.rule == "index-out-of-bounds" && p.detail.contains("row 0"))
    );
}

#[test]
fn convert_reads_its_input_through_the_validating_reader() {
    use coo_assembler::convert::{ConvertOptions, convert};
    let dir = tempfile::tempdir().unwrap();
    let f = write(OutputLayout::Csr, false, false);
    let run = |b: &[u8]| {
        let input = dir.path().join("in.hrry");
        std::fs::write(&input, b).unwrap();
        let out = dir.path().join("out.hrry");
        let _ = std::fs::remove_file(&out);
        let opts = ConvertOptions {
            to: OutputLayout::Csc,
            threads: 1,
            ..ConvertOptions::default()
        };
        let r = convert(&input, &out, &opts).map(|_| ());
        assert_eq!(r.is_ok(), out.exists());
        r
    };
    run(&f.bytes).unwrap();
    // Non-zero padding: a structural rule the strict open enforces.
    let mut b = f.bytes.clone();
    b[f.pointers - 1] = 7;
    let e = run(&b).unwrap_err().to_string();
    assert!(e.contains("padding between col_indices and row_ptr"), "{e}");
    // A decreasing pointer: found while streaming, named.
    let mut b = f.bytes.clone();
    set_u64(&mut b, f.pointers + 16, 1);
    let e = run(&b).unwrap_err().to_string();
    assert!(e.contains("row_ptr"), "{e}");
}
