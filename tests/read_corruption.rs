//! Structural validation of `HurrayFile`: hostile bytes give errors, never panics.

use crate::common;

use common::*;
use coo_assembler::internals::hurray::{KvValue, Statistics};
use coo_assembler::{DType, Error, Value};
use coo_assembler::{HurrayFile, read::ReadOptions};

type Snapshot = (Vec<u64>, Vec<Value>, Vec<u64>, DType);

fn snapshot(f: &HurrayFile) -> Snapshot {
    let t = f.only_tensor().unwrap();
    (
        t.shape().to_vec(),
        t.iter().map(|(_, v)| v).collect(),
        t.indices().to_vec(),
        t.dtype(),
    )
}

#[test]
fn small_file_opens_and_verifies() {
    let (b, _, t) = small();
    let f = HurrayFile::from_bytes(b).unwrap();
    assert!(f.verify().is_empty(), "{:?}", f.verify());
    let c = f.only_tensor().unwrap();
    assert_eq!(c.indices(), &t.indices[..]);
    assert_eq!(c.nnz(), 4);
    assert_eq!(f.kv().len(), 2);
}

#[test]
fn every_single_byte_change_of_metadata_errors_or_keeps_data() {
    let (b, l, _) = small();
    let orig = snapshot(&HurrayFile::from_bytes(b.clone()).unwrap());
    let mut regions = vec![
        0..64usize,
        l.desc_offsets[0] as usize..(l.desc_offsets[0] + l.desc_lens[0]) as usize,
        l.kv_offset as usize..(l.kv_offset + l.kv_len) as usize,
        l.index_offset as usize..(l.index_offset + l.index_len) as usize,
    ];
    regions.push(l.trailer_offset as usize..b.len());
    let mut opened = 0;
    let mut rejected = 0;
    for r in regions {
        for pos in r {
            for x in [0xFFu8, 0x01, 0x80, 0x10] {
                let mut m = b.clone();
                m[pos] ^= x;
                for permissive in [false, true] {
                    match HurrayFile::from_bytes_with(
                        &m,
                        ReadOptions {
                            permissive,
                            ..ReadOptions::default()
                        },
                    ) {
                        Ok(f) => {
                            opened += 1;
                            // Strict mode: identical data. Permissive mode may
                            // let a shape change through, but never panics.
                            if !permissive {
                                assert_eq!(
                                    snapshot(&f),
                                    orig,
                                    "byte {pos} ^ {x:#x} changed the data"
                                );
                            }
                            let _ = f.verify();
                            for t in f.tensors() {
                                let _ = t.get(&[0, 1]);
                                let _ = t.prefix_range(&[1]);
                            }
                        }
                        Err(_) => rejected += 1,
                    }
                }
            }
        }
    }
    assert!(rejected > opened, "{rejected} rejected, {opened} opened");
}

#[test]
fn index_and_trailer_changes_with_a_recomputed_crc_error_or_keep_data() {
    // The CRC hides index parsing from the test above: recompute it.
    let (b, l, _) = small();
    let orig = snapshot(&HurrayFile::from_bytes(b.clone()).unwrap());
    let ranges = [
        l.index_offset as usize..(l.index_offset + l.index_len) as usize,
        l.trailer_offset as usize..l.trailer_offset as usize + 28,
    ];
    for r in ranges {
        for pos in r {
            for x in [0xFFu8, 0x01, 0x02, 0x40, 0x80] {
                let mut m = b.clone();
                m[pos] ^= x;
                if !fix_crc(&mut m) {
                    continue; // the trailer no longer locates an index
                }
                if let Ok(f) = HurrayFile::from_bytes(m) {
                    assert_eq!(snapshot(&f), orig, "byte {pos} ^ {x:#x} changed the data");
                }
            }
        }
    }
}

#[test]
fn every_truncation_errors() {
    let (b, _, _) = small();
    for n in 0..b.len() {
        assert!(
            HurrayFile::from_bytes(b[..n].to_vec()).is_err(),
            "length {n}"
        );
    }
    // Extra bytes after the trailer: the trailer moves, the file is invalid.
    let mut longer = b.clone();
    longer.extend_from_slice(&[0; 8]);
    assert!(HurrayFile::from_bytes(longer).is_err());
}

fn small_t() -> T {
    small().2
}

fn build_t(
    tamper_desc: impl FnMut(usize, &mut coo_assembler::internals::hurray::CooDescriptor),
    tamper_index: impl FnOnce(&mut Vec<coo_assembler::internals::hurray::IndexEntry>),
) -> Vec<u8> {
    let t = small_t();
    build_with(
        std::slice::from_ref(&t),
        &checksums(&t),
        Opts::default(),
        tamper_desc,
        tamper_index,
    )
    .0
}

#[test]
fn bad_crc_is_rejected() {
    let (mut b, l, _) = small();
    b[l.trailer_offset as usize + 28] ^= 1;
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(
        e.contains("CRC-32C mismatch") && e.contains("trailer"),
        "{e}"
    );
    // A CRC without the flag.
    let t = small_t();
    let (mut b, l) = build(
        &[t],
        &[],
        Opts {
            crc: false,
            ..Opts::default()
        },
    );
    b[l.trailer_offset as usize + 28] = 7;
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(e.contains("HAS_INDEX_CRC32C is not set"), "{e}");
}

#[test]
fn descriptor_length_mismatch_is_rejected() {
    let b = build_t(|_, _| {}, |e| e[0].descriptor_length += 8);
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(
        e.contains("descriptor_length") && e.contains("index entry 0"),
        "{e}"
    );
}

#[test]
fn values_byte_size_mismatch_is_rejected() {
    let b = build_t(|_, d| d.values.byte_size = 12, |_| {});
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(e.contains("values byte_size 12 is not nnz 4 * 4"), "{e}");
    // nnz * width overflows u64.
    let b = build_t(|_, d| d.nnz = u64::MAX / 2, |_| {});
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(
        e.contains("overflow") || e.contains("statistics nnz"),
        "{e}"
    );
    let b = build_t(
        |_, d| {
            d.nnz = u64::MAX / 2;
            d.statistics = None;
        },
        |_| {},
    );
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(e.contains("overflow"), "{e}");
}

#[test]
fn buffer_outside_the_file_is_rejected() {
    let n = 1u64 << 40;
    let b = build_t(
        |_, d| {
            d.nnz = n;
            d.values.byte_size = n * 4;
            d.indices.byte_size = n * 16;
            d.shape = vec![1 << 30, 1 << 30];
            d.statistics = None;
        },
        |e| {
            e[0].data_length = (1 << 40) * 20 + 4096;
        },
    );
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(e.contains("does not end before the trailer"), "{e}");
}

#[test]
fn misaligned_buffers_are_rejected() {
    let b = build_t(|_, _| {}, |e| e[0].data_offset += 64);
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(e.contains("data_offset") && e.contains("aligned"), "{e}");
    let b = build_t(|_, d| d.values.alignment = 8192, |_| {});
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(e.contains("not aligned to the 8192 bytes"), "{e}");
    let b = build_t(|_, _| {}, |e| e[0].data_length += 1);
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(e.contains("data_length"), "{e}");
    let b = build_t(|_, _| {}, |e| e[0].descriptor_offset += 4);
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(e.contains("descriptor_offset"), "{e}");
}

#[test]
fn nonzero_padding_needs_permissive() {
    let (b, l, _) = small();
    for pos in [
        l.desc_offsets[0] + l.desc_lens[0],
        l.values_offsets[0] - 1,
        l.values_offsets[0] + 16,
        l.indices_offsets[0] - 1,
    ] {
        let mut m = b.clone();
        m[pos as usize] = 0x5A;
        let e = err_of(HurrayFile::from_bytes(m.clone()));
        assert!(
            e.contains("must be 0x00") && e.contains(&format!("byte {pos}")),
            "{e}"
        );
        // Permissive open lets it through; verify names the byte (issue 8).
        let f = HurrayFile::from_bytes_with(
            &m,
            ReadOptions {
                permissive: true,
                ..ReadOptions::default()
            },
        )
        .unwrap();
        let p = f.verify();
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].rule, "padding-not-zero");
        assert!(
            p[0].is_error() && p[0].detail.contains(&format!("byte {pos}")),
            "{}",
            p[0]
        );
    }
}

#[test]
fn is_sorted_2_is_rejected() {
    let (mut b, l, _) = small();
    b[l.desc_offsets[0] as usize + 36 + 16] = 2;
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(e.contains("is_sorted is 2"), "{e}");
}

#[test]
fn statistics_nnz_mismatch_is_rejected() {
    let b = build_t(
        |_, d| {
            if let Some(s) = d.statistics.as_mut() {
                s.nnz = 5
            }
        },
        |_| {},
    );
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(e.contains("statistics nnz 5 differs"), "{e}");
}

#[test]
fn huge_index_entry_count_is_rejected_without_allocating() {
    let (mut b, l, _) = small();
    let io = l.index_offset as usize;
    for count in [u64::MAX, u64::MAX / 2, 1 << 40, 2] {
        b[io..io + 8].copy_from_slice(&count.to_le_bytes());
        assert!(fix_crc(&mut b));
        let e = err_of(HurrayFile::from_bytes(b.clone()));
        assert!(e.contains("entry_count") || e.contains("truncated"), "{e}");
    }
}

#[test]
fn duplicate_names_are_rejected() {
    let t = small_t();
    let (b, _) = build(&[t.clone(), t], &[], Opts::default());
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(e.contains("appears twice"), "{e}");
}

#[test]
fn overlapping_tensors_are_rejected() {
    let t = small_t();
    let mut u = t.clone();
    u.name = "other".into();
    let b = build_with(
        &[t, u],
        &[],
        Opts::default(),
        |_, _| {},
        |e| {
            let first = e[0].clone();
            e[1].descriptor_offset = first.descriptor_offset;
            e[1].data_offset = first.data_offset;
            e[1].data_length = first.data_length;
        },
    )
    .0;
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(e.contains("overlap"), "{e}");
}

#[test]
fn kv_section_rules() {
    let t = small_t();
    // Flag set without a KV section.
    let (b, _) = build(
        std::slice::from_ref(&t),
        &[],
        Opts {
            kv_flag: true,
            ..Opts::default()
        },
    );
    let e = err_of(HurrayFile::from_bytes(b));
    assert!(
        e.contains("HAS_KV_METADATA is set but kv_length is 0"),
        "{e}"
    );
    // KV without the flag (as the reference writer does) is read.
    let kv = vec![("k".to_string(), KvValue::String("v".into()))];
    let (b, l) = build(std::slice::from_ref(&t), &kv, Opts::default());
    let f = HurrayFile::from_bytes(b.clone()).unwrap();
    assert_eq!(f.kv(), &kv[..]);
    // kv_offset misaligned.
    let mut m = b.clone();
    let to = l.trailer_offset as usize;
    m[to + 16..to + 24].copy_from_slice(&(l.kv_offset + 1).to_le_bytes());
    assert!(err_of(HurrayFile::from_bytes(m)).contains("kv_offset"));
    // kv over the index.
    let mut m = b;
    m[to + 24..to + 28].copy_from_slice(&((l.kv_len + 16) as u32).to_le_bytes());
    assert!(HurrayFile::from_bytes(m).is_err());
}

#[test]
fn index_bounds_rules() {
    let (b, l, _) = small();
    let to = l.trailer_offset as usize;
    for (off, v) in [
        (0, l.index_offset + 4),
        (0, u64::MAX - 3),
        (8, u64::MAX),
        (8, l.index_len + 1),
        (0, 8),
    ] {
        let mut m = b.clone();
        m[to + off..to + off + 8].copy_from_slice(&v.to_le_bytes());
        let e = err_of(HurrayFile::from_bytes(m));
        assert!(e.contains("trailer") || e.contains("index"), "{e}");
    }
}

#[test]
fn nnz_beyond_shape_needs_permissive() {
    let mut t = tensor::<f32>(
        "coo",
        &[2],
        &[(vec![0], 1.0), (vec![1], 2.0), (vec![1], 3.0)],
        true,
    );
    t.stats = None;
    let (b, _) = build(&[t], &[], Opts::default());
    let e = err_of(HurrayFile::from_bytes(b.clone()));
    assert!(e.contains("exceeds the 2 elements"), "{e}");
    let f = HurrayFile::from_bytes_with(
        &b,
        ReadOptions {
            permissive: true,
            ..ReadOptions::default()
        },
    )
    .unwrap();
    let p = f.verify();
    assert!(
        p.iter()
            .any(|p| p.rule == "duplicate" && p.entry == Some(2)),
        "{p:?}"
    );
}

#[test]
fn open_from_disk_mmap_and_memory() {
    let (b, _, _) = small();
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.hurray");
    std::fs::write(&p, &b).unwrap();
    let a = HurrayFile::open(&p).unwrap();
    let m = HurrayFile::open_with(
        &p,
        ReadOptions {
            in_memory: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(snapshot(&a), snapshot(&m));
    assert_eq!(a.len(), b.len() as u64);
    std::fs::write(&p, &b[..50]).unwrap();
    assert!(matches!(
        HurrayFile::open(&p),
        Err(Error::InvalidFile { .. })
    ));
    assert!(matches!(
        HurrayFile::open(dir.path().join("missing")),
        Err(Error::Io { .. })
    ));
    let _ = Statistics::default();
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Random multi-byte damage anywhere (CRC recomputed so the index
        /// parser is reached): open in both modes and exercise every
        /// accessor; nothing may panic.
        #[test]
        fn random_damage_never_panics(
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
            permissive in any::<bool>(),
            crc in any::<bool>(),
            in_meta in any::<bool>(),
        ) {
            let (mut b, l, _) = small();
            // Metadata positions: header + descriptor, KV + index + trailer.
            let meta: Vec<usize> = (0..(l.desc_offsets[0] + l.desc_lens[0]) as usize)
                .chain(l.kv_offset as usize..b.len())
                .collect();
            for (i, v) in &edits {
                let pos = if in_meta { meta[i.index(meta.len())] } else { i.index(b.len()) };
                b[pos] = *v;
            }
            if crc {
                fix_crc(&mut b);
            }
            if let Ok(f) = HurrayFile::from_bytes_with(&b, ReadOptions { permissive, ..ReadOptions::default() }) {
                let _ = f.verify();
                for t in f.tensors() {
                    let _ = t.iter().count();
                    let r = t.rank();
                    let _ = t.get(&vec![0; r]);
                    let _ = t.find(&vec![1; r]);
                    let _ = t.lower_bound(&vec![2; r]);
                    let _ = t.prefix_range(&[3]);
                    let _ = t.values::<f32>();
                }
            }
        }
    }
}
