//! Files that hold more than one kind of tensor (issue 22): dense
//! row-major and column-major tensors written by the reference writer
//! next to a COO matrix open, are listed with their layout, element type
//! and shape, have their buffers checked, and every operation that reads
//! entries refuses them by name while the COO matrix beside them reads as
//! usual. Damaged dense descriptors give typed errors, never a panic.

use crate::common;

use common::mixed;
use coo_assembler::internals::hurray::descriptor::field;
use coo_assembler::{
    Error, ErrorKind, HurrayFile, Value, read::Layout, read::LayoutKind, read::ReadOptions,
    read::Tensor,
};

fn permissive() -> ReadOptions {
    ReadOptions {
        permissive: true,
        ..ReadOptions::default()
    }
}

/// The conformance file of the spec: it used to be refused whole ("layout
/// tag 0x01; only COO (0x06) is supported").
#[test]
fn the_conformance_file_opens_and_lists_its_dense_tensors() {
    let f = HurrayFile::from_bytes(mixed::basic()).unwrap();
    let infos: Vec<_> = f.tensor_infos().collect();
    let seen: Vec<_> = infos
        .iter()
        .map(|t| (t.name(), t.layout(), t.dtype_text(), t.shape().to_vec()))
        .collect();
    assert_eq!(
        seen,
        [
            ("weights", Some(Layout::RowMajor), "f32".into(), vec![2, 2]),
            ("bias", Some(Layout::RowMajor), "i8".into(), vec![3]),
        ]
    );
    assert!(infos.iter().all(|t| !t.is_served() && t.nnz().is_none()));
    assert_eq!(infos[0].data().1, 16);
    assert_eq!(infos[1].data().1, 3);
    assert_eq!(f.tensor_count(), 2);
    assert_eq!(f.tensor_views().count(), 0);
    assert_eq!(f.kv().len(), 2);
    assert!(f.verify().is_empty(), "{:?}", f.verify());
    let note = infos[0].verify_note().unwrap();
    assert!(
        note.contains("(f32, 2 x 2) is dense row-major") && note.contains("16 bytes"),
        "{note}"
    );
}

#[test]
fn dense_tensors_sit_beside_a_readable_coo_matrix() {
    let f = HurrayFile::from_bytes(mixed::mixed()).unwrap();
    let names: Vec<_> = f.tensor_names().collect();
    assert_eq!(names, ["weights", "bias", "K", "x", "cols"]);
    let k = f.tensor_view("K").unwrap();
    assert_eq!(k.nnz(), 3);
    for ((i, j), v) in mixed::K {
        assert_eq!(k.get(&[i, j]).unwrap(), Value::Float(v));
    }
    assert_eq!(k.get(&[0, 1]).unwrap(), Value::Float(0.0));
    assert_eq!(
        f.tensor_views().map(|t| t.name()).collect::<Vec<_>>(),
        ["K"]
    );
    let k_info = f.tensor_info("K").unwrap();
    assert_eq!(
        (k_info.layout(), k_info.nnz(), k_info.is_served()),
        (Some(Layout::Coo), Some(3), true)
    );
    assert_eq!(k_info.verify_note(), None);
    let cols = f.tensor_info("cols").unwrap();
    assert_eq!(cols.layout(), Some(Layout::ColumnMajor));
    assert_eq!(cols.layout_text(), "dense column-major");
    assert_eq!(Layout::ColumnMajor.kind(), LayoutKind::Dense);
    // Only K is read; written by the reference, it gets the note that
    // its bytes carry no checksums (the dense tensors have verify_note).
    let p = f.verify();
    assert!(
        p.len() == 1 && p[0].rule == "no-checksums" && p[0].tensor.as_deref() == Some("K"),
        "{p:?}"
    );
    for name in ["weights", "bias", "x", "cols"] {
        assert!(f.verify_tensor(name).unwrap().is_empty());
    }
}

#[test]
fn operations_on_a_dense_tensor_name_its_layout() {
    let f = HurrayFile::from_bytes(mixed::mixed()).unwrap();
    let e = f.tensor_view("weights").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(matches!(e, Error::LayoutNotServed { .. }));
    assert_eq!(
        e.to_string(),
        "tensor \"weights\" is dense row-major; this reader serves COO, CSR and CSC"
    );
    let e = f.tensor("cols").unwrap_err().for_op("dump").to_string();
    assert_eq!(
        e,
        "tensor \"cols\" is dense column-major; dump serves COO, CSR and CSC"
    );
    // A matrix operation goes through the same view.
    let e = coo_assembler::matrix::Matrix::of_file(&f, Some("weights"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("dense row-major"), "{e}");
    // The dense reader refuses a sparse tensor by name too.
    let e = f.dense("K").unwrap_err().to_string();
    assert!(
        e.contains("sparse COO") && e.contains("dense row-major and column-major"),
        "{e}"
    );
}

#[test]
fn dense_values_read_in_their_layouts_order() {
    let f = HurrayFile::from_bytes(mixed::mixed()).unwrap();
    let x = f.dense("x").unwrap();
    assert_eq!((x.layout(), x.shape()), (Layout::RowMajor, &[3u64][..]));
    assert_eq!(x.to_f64().unwrap(), mixed::X);
    let w = f.dense("weights").unwrap();
    assert_eq!(w.to_f64().unwrap(), mixed::WEIGHTS.map(f64::from).to_vec());
    let b = f.dense("bias").unwrap();
    assert_eq!(b.values_bytes().len(), 3);
    assert_eq!(b.to_f64().unwrap(), [1.0, -2.0, 3.0]);
    let c = f.dense("cols").unwrap();
    assert_eq!(c.layout(), Layout::ColumnMajor);
    assert_eq!(c.to_f64().unwrap(), mixed::COLS.map(f64::from).to_vec());
    assert_eq!(c.stored_checksums(), 0);
}

/// A layout tag the spec names is listed in both modes; one it does not
/// name is refused unless permissive (the spec's rule), then listed.
#[test]
fn unread_layouts_are_listed_and_unknown_tags_need_permissive() {
    let bytes = mixed::mixed();
    let f = HurrayFile::from_bytes(bytes.clone()).unwrap();
    let (w_off, _) = f.tensor_info("weights").unwrap().data();
    drop(f);
    // The weights descriptor is the file's first (at first_descriptor_offset).
    let d_off = 64usize;
    assert!(w_off > d_off as u64);
    for (tag, named) in [
        (0x03u8, true),
        (0x0A, true),
        (0x40, true),
        (0x33, false),
        (0xF3, false),
    ] {
        let mut b = bytes.clone();
        b[d_off + field::LAYOUT_TAG as usize] = tag;
        let strict = HurrayFile::from_bytes(b.clone());
        match (named, strict) {
            (true, Ok(f)) => {
                let t = f.tensor_info("weights").unwrap();
                assert_eq!(t.layout().map(|l| l.tag()), Some(tag));
                assert_eq!(t.data().1, 16);
                assert!(t.verify_note().unwrap().contains("common fields"));
                let e = f.tensor_view("weights").unwrap_err().to_string();
                assert!(e.contains(&t.layout_text()), "{e}");
                // K, written by the reference, has only its no-checksums note.
                let p = f.verify();
                assert!(
                    p.iter().all(|p| p.rule == "no-checksums"),
                    "0x{tag:02x}: {p:?}"
                );
                assert!(f.dense("weights").is_err());
            }
            (false, Err(e)) => {
                assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
                assert!(e.to_string().contains(&format!("0x{tag:02x}")), "{e}");
                let f = HurrayFile::from_bytes_with(&b, permissive()).unwrap();
                let t = f.tensor_info("weights").unwrap();
                assert_eq!(t.layout(), None);
                assert_eq!(t.layout_tag(), tag);
                // The COO matrix beside it still reads.
                assert!(f.tensor_view("K").is_ok());
            }
            (named, r) => panic!("0x{tag:02x} named {named}: {r:?}"),
        }
    }
    // Reserved tags are refused in both modes.
    for tag in [0x00u8, 0xFF] {
        let mut b = bytes.clone();
        b[d_off + field::LAYOUT_TAG as usize] = tag;
        for opts in [ReadOptions::default(), permissive()] {
            let e = HurrayFile::from_bytes_with(&b, opts).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
        }
    }
}

/// A dense buffer smaller than its shape and type need, or a descriptor
/// cut short (its length, its rank), is an error naming the field.
#[test]
fn damaged_dense_descriptors_are_typed_errors() {
    let bytes = mixed::mixed();
    let d_off = 64usize;
    let le32 = |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    let le64 = |b: &mut Vec<u8>, at: usize, v: u64| b[at..at + 8].copy_from_slice(&v.to_le_bytes());
    // weights: rank 2, handle at 20 + 16 + 8 + 1 = 45.
    let mut small = bytes.clone();
    le64(&mut small, d_off + 45, 12);
    let e = HurrayFile::from_bytes(small).unwrap_err().to_string();
    assert!(
        e.contains("values byte_size 12") && e.contains("at least"),
        "{e}"
    );
    // A shape that needs more than the buffer holds.
    let mut big = bytes.clone();
    le64(&mut big, d_off + 20, 3);
    let e = HurrayFile::from_bytes(big).unwrap_err().to_string();
    assert!(e.contains("values byte_size 16"), "{e}");
    // descriptor_length shorter than the fields (a truncated descriptor).
    let mut short = bytes.clone();
    le32(&mut short, d_off + 6, 40);
    let e = HurrayFile::from_bytes(short).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    // A rank whose shape runs past the descriptor.
    let mut rank = bytes.clone();
    le32(&mut rank, d_off + 16, 9);
    let e = HurrayFile::from_bytes(rank).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidFile, "{e}");
    // byte_offset past the buffer.
    let mut bo = bytes.clone();
    le64(&mut bo, d_off + 36, 17);
    let e = HurrayFile::from_bytes(bo).unwrap_err().to_string();
    assert!(e.contains("byte_offset 17"), "{e}");
}

/// Every byte of the dense descriptors set to a few values: each file
/// opens or is refused with a typed error, and what opens lists, verifies
/// and reads without a panic.
#[test]
fn hostile_dense_descriptors_never_panic() {
    let bytes = mixed::mixed();
    let f = HurrayFile::from_bytes(bytes.clone()).unwrap();
    // Descriptor ranges: from each listed tensor's index entry.
    let ranges: Vec<(usize, usize)> = {
        let infos: Vec<_> = f.tensor_infos().collect();
        let mut starts = vec![64usize];
        for t in &infos[..infos.len() - 1] {
            let (off, len) = t.data();
            starts.push(((off + len) as usize).next_multiple_of(8));
        }
        starts
            .into_iter()
            .zip(&infos)
            .filter(|(_, t)| !t.is_served())
            .map(|(s, t)| (s, t.data().0 as usize))
            .collect()
    };
    drop(f);
    let mut opened = 0;
    for (start, data) in ranges {
        // The descriptor and its padding up to the buffer.
        for at in start..(start + 128).min(data) {
            for v in [0x00u8, 0x01, 0x7F, 0xFF] {
                let mut b = bytes.clone();
                if b[at] == v {
                    continue;
                }
                b[at] = v;
                for opts in [ReadOptions::default(), permissive()] {
                    match HurrayFile::from_bytes_with(&b, opts) {
                        Ok(f) => {
                            opened += 1;
                            let _ = f.verify();
                            for t in f.tensor_infos() {
                                let _ = (t.verify_note(), t.layout_text(), t.dtype_text());
                                let _ = f.dense(t.name()).and_then(|d| d.to_f64());
                                let _ = f.tensor_view(t.name()).map(|v| v.verify());
                            }
                        }
                        Err(e) => assert!(
                            matches!(e.kind(), ErrorKind::InvalidFile | ErrorKind::Unsupported),
                            "byte {at} = {v}: {e}"
                        ),
                    }
                }
            }
        }
    }
    assert!(opened > 0);
}

/// A checksum stored for a dense buffer (as our writer would name it) is
/// compared by verify and by the first whole read.
#[test]
fn a_stored_checksum_of_a_dense_buffer_is_checked() {
    use hurray_io::file::{FileWriter, KvValue};
    let x: Vec<u8> = mixed::X.iter().flat_map(|v| v.to_le_bytes()).collect();
    let good = xxhash_rust::xxh3::xxh3_64(&x);
    for (sum, ok) in [(good, true), (good ^ 1, false)] {
        let bytes = common::reference::block_on(async {
            let d = common::reference::descriptor(
                coo_assembler::DType::F64,
                &[3],
                hurray_core::LayoutDescriptor::RowMajor,
                &[&x],
                None,
            );
            let mut w = FileWriter::new(Vec::<u8>::new()).await.unwrap();
            w.write_tensor("x", &d, &[&x]).await.unwrap();
            w.finish(vec![(
                "coo_assembler.xxh3.x.values".into(),
                KvValue::Uint64(sum),
            )])
            .await
            .unwrap()
        });
        let f = HurrayFile::from_bytes(bytes).unwrap();
        let d = f.dense("x").unwrap();
        assert_eq!(d.stored_checksums(), 1);
        assert_eq!(f.tensor_info("x").unwrap().stored_checksums(), 1);
        let problems = f.verify();
        assert_eq!(problems.is_empty(), ok, "{problems:?}");
        assert_eq!(d.to_f64().is_ok(), ok);
        if !ok {
            assert_eq!(problems[0].rule, "checksum-mismatch");
            let e = d.to_f64().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidFile);
        }
        assert!(
            f.tensor_info("x")
                .unwrap()
                .verify_note()
                .unwrap()
                .contains("its stored checksum was compared")
        );
    }
}

#[test]
fn views_skip_dense_tensors_and_the_rest_reads() {
    let f = HurrayFile::from_bytes(mixed::mixed()).unwrap();
    let Ok(Tensor::Coo(k)) = f.tensor_view("K") else {
        panic!("K is COO")
    };
    assert!(k.verify().is_empty());
    assert_eq!(f.tensors().count(), 1);
    let e = f.only_tensor_view().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
}
