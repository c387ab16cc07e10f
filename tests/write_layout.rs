//! Layout of the files the streaming writer produces, checked by decoding
//! them with the codec in `hurray/` and by raw bytes.

use coo_assembler::DType;
use coo_assembler::element::F16 as f16;
use coo_assembler::internals::hurray::header::{FLAG_HAS_INDEX_CRC32C, FLAG_HAS_KV_METADATA};
use coo_assembler::internals::hurray::kv::{KEY_WRITER, checksum_key};
use coo_assembler::internals::hurray::statistics::{
    NAN_INF_VALID, NNZ_VALID, SPARSITY_VALID, VALUE_RANGE_VALID, VALUE_STATS_VALID,
};
use coo_assembler::internals::hurray::{
    CooDescriptor, FileHeader, IndexEntry, KvValue, Trailer, index, kv,
};
use coo_assembler::write::{FileWriter, TailPadding, WriteOptions};
use std::path::Path;

/// A decoded file: raw bytes and every section.
struct Decoded {
    bytes: Vec<u8>,
    header: FileHeader,
    trailer: Trailer,
    index: Vec<IndexEntry>,
    kv: Vec<(String, KvValue)>,
}

impl Decoded {
    fn read(path: &Path) -> Decoded {
        let bytes = std::fs::read(path).unwrap();
        let len = bytes.len() as u64;
        let header = FileHeader::decode(&bytes).unwrap();
        let trailer = Trailer::decode(&bytes[bytes.len() - 40..], len).unwrap();
        let io = trailer.index_offset as usize;
        let il = trailer.index_length as usize;
        assert_eq!(io % 8, 0, "index 8-aligned");
        assert!(io + il <= bytes.len() - 40);
        let ib = &bytes[io..io + il];
        assert_ne!(header.flags & FLAG_HAS_INDEX_CRC32C, 0);
        assert_eq!(
            trailer.index_crc32c,
            coo_assembler::internals::hurray::crc32c::crc32c(ib)
        );
        let index = index::decode(ib, trailer.index_offset).unwrap();
        let kv = if trailer.kv_offset == 0 {
            assert_eq!(trailer.kv_length, 0);
            assert_eq!(header.flags & FLAG_HAS_KV_METADATA, 0);
            Vec::new()
        } else {
            assert_ne!(header.flags & FLAG_HAS_KV_METADATA, 0);
            assert_eq!(trailer.kv_offset % 8, 0, "KV 8-aligned");
            let ko = trailer.kv_offset as usize;
            // Layout [KV][index][trailer].
            assert!(ko + trailer.kv_length as usize <= io);
            kv::decode(
                &bytes[ko..ko + trailer.kv_length as usize],
                trailer.kv_offset,
            )
            .unwrap()
        };
        assert_eq!(header.tensor_count_hint, index.len() as u64);
        Decoded {
            bytes,
            header,
            trailer,
            index,
            kv,
        }
    }

    fn descriptor(&self, name: &str) -> (CooDescriptor, &IndexEntry) {
        let e = self.index.iter().find(|e| e.name == name).unwrap();
        let off = e.descriptor_offset as usize;
        let d = CooDescriptor::decode(&self.bytes[off..], e.descriptor_offset, name).unwrap();
        assert_eq!(d.encoded_len(), e.descriptor_length as usize);
        (d, e)
    }

    /// The values and indices buffers of a tensor, located the way the
    /// reference reader does (indices at align_up(end of values, A)).
    fn buffers(&self, name: &str) -> (&[u8], &[u8]) {
        let (d, e) = self.descriptor(name);
        let a = u64::from(self.header.alignment);
        let v0 = e.data_offset;
        assert_eq!(v0 % a, 0);
        let v1 = v0 + d.values.byte_size;
        let i0 = v1.div_ceil(a) * a;
        let i1 = i0 + d.indices.byte_size;
        assert_eq!(e.data_length, i1 - v0);
        (
            &self.bytes[v0 as usize..v1 as usize],
            &self.bytes[i0 as usize..i1 as usize],
        )
    }

    fn kv(&self, key: &str) -> Option<&KvValue> {
        self.kv.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

fn bare(tail: TailPadding) -> WriteOptions {
    WriteOptions {
        statistics: false,
        checksums: false,
        provenance: false,
        tail_padding: tail,
        ..WriteOptions::default()
    }
}

fn write_worked_example(path: &Path, opts: WriteOptions) -> coo_assembler::write::FileSummary {
    let mut fw = FileWriter::create(path, opts).unwrap();
    let mut t = fw.begin_tensor("coo", DType::F32, &[4, 4]).unwrap();
    t.push(&[0, 1], 1.5f32).unwrap();
    t.push(&[2, 0], -0.5f32).unwrap();
    t.push(&[3, 3], 2.0f32).unwrap();
    t.finish().unwrap();
    fw.finish().unwrap()
}

fn check_worked_example_tensor(f: &Decoded) {
    let (d, e) = f.descriptor("coo");
    assert_eq!(e.descriptor_offset, 64);
    assert_eq!(e.descriptor_length, 93);
    assert_eq!(e.data_offset, 4096);
    assert_eq!(e.data_length, 4144);
    assert_eq!(d.dtype, DType::F32);
    assert_eq!(d.shape, vec![4, 4]);
    assert_eq!(d.nnz, 3);
    assert!(d.is_sorted);
    assert_eq!((d.values.byte_size, d.values.alignment), (12, 4096));
    assert_eq!((d.indices.byte_size, d.indices.alignment), (48, 4096));
    assert_eq!(d.statistics, None);
    let mut v = Vec::new();
    for x in [1.5f32, -0.5, 2.0] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    assert_eq!(&f.bytes[4096..4108], &v[..]);
    let mut ix = Vec::new();
    for x in [0u64, 1, 2, 0, 3, 3] {
        ix.extend_from_slice(&x.to_le_bytes());
    }
    assert_eq!(&f.bytes[8192..8240], &ix[..]);
    // Padding is zero.
    assert!(f.bytes[157..4096].iter().all(|&b| b == 0));
    assert!(f.bytes[4108..8192].iter().all(|&b| b == 0));
    assert_eq!(&f.bytes[64..68], b"HRRY");
    assert_eq!(&f.bytes[..8], b"HRRYFILE");
}

/// The spec's worked example, byte for byte as the reference writer lays it
/// out (padding to 8 only after the last buffer).
#[test]
fn worked_example_reference_layout() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ex.hurray");
    let s = write_worked_example(&p, bare(TailPadding::Eight));
    let f = Decoded::read(&p);
    assert_eq!(f.bytes.len(), 8325);
    assert_eq!(s.bytes, 8325);
    assert_eq!(f.header.flags, FLAG_HAS_INDEX_CRC32C);
    assert_eq!(f.header.alignment, 4096);
    assert_eq!(f.header.first_descriptor_offset, 64);
    assert_eq!(f.trailer.index_offset, 8240);
    assert_eq!(f.trailer.index_length, 45);
    assert_eq!((f.trailer.kv_offset, f.trailer.kv_length), (0, 0));
    check_worked_example_tensor(&f);
    assert_eq!(s.tensors[0].data_offset, 4096);
    assert_eq!(s.tensors[0].data_length, 4144);
}

/// The same file with the spec's writer protocol (pad to A, then 8, after
/// the last buffer): the tensor is unchanged, the index moves to 12288.
#[test]
fn worked_example_spec_padding() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ex.hurray");
    write_worked_example(&p, bare(TailPadding::Alignment));
    let f = Decoded::read(&p);
    check_worked_example_tensor(&f);
    assert_eq!(f.trailer.index_offset, 12288);
    assert_eq!(f.trailer.index_length, 45);
    assert_eq!(f.bytes.len(), 12288 + 45 + 40);
    assert!(f.bytes[8240..12288].iter().all(|&b| b == 0));
}

/// Defaults: statistics, checksums and provenance; every field checked.
#[test]
fn worked_example_with_statistics_and_kv() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ex.hurray");
    let mut fw = FileWriter::create(&p, WriteOptions::default()).unwrap();
    fw.add_metadata("model", KvValue::String("fe-mesh".into()))
        .unwrap();
    fw.add_metadata("scale", KvValue::F64(0.25)).unwrap();
    let mut t = fw.begin_tensor("coo", DType::F32, &[4, 4]).unwrap();
    t.push(&[0, 1], 1.5f32).unwrap();
    t.push(&[2, 0], -0.5f32).unwrap();
    t.push(&[3, 3], 2.0f32).unwrap();
    let ts = t.finish().unwrap();
    let s = fw.finish().unwrap();
    let f = Decoded::read(&p);
    assert_eq!(s.bytes as usize, f.bytes.len());
    assert_eq!(s.tensors, vec![ts.clone()]);

    let (d, e) = f.descriptor("coo");
    assert_eq!(e.descriptor_length, 165); // 149 + 8 * 2
    assert_eq!(e.data_offset, 4096);
    assert_eq!(e.data_length, 4144);
    let st = d.statistics.unwrap();
    assert_eq!(Some(st), ts.statistics);
    assert_eq!(
        st.computed_mask,
        NNZ_VALID | SPARSITY_VALID | VALUE_RANGE_VALID | VALUE_STATS_VALID | NAN_INF_VALID
    );
    assert_eq!(st.nnz, 3);
    assert_eq!(st.sparsity_ratio, 13.0 / 16.0);
    assert_eq!(st.value_min, -0.5);
    assert_eq!(st.value_max, 2.0);
    assert_eq!(st.value_abs_max, 2.0);
    assert_eq!(st.value_mean, 3.0 / 16.0);
    // E[x^2] = 6.5 / 16, var = E[x^2] - mean^2 = 95/256.
    assert!((st.value_stddev - (95.0f64 / 256.0).sqrt()).abs() < 1e-15);
    assert!(!st.has_nan && !st.has_inf);
    assert_eq!((st.nm_n, st.nm_m), (0, 0));

    // KV: provenance, user entries in order, then checksums of the bytes
    // actually in the file.
    let keys: Vec<&str> = f.kv.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        keys,
        [
            KEY_WRITER,
            "model",
            "scale",
            "coo_assembler.xxh3.coo.values",
            "coo_assembler.xxh3.coo.indices"
        ]
    );
    assert_eq!(
        f.kv(KEY_WRITER),
        Some(&KvValue::String(format!(
            "coo-assembler {}",
            env!("CARGO_PKG_VERSION")
        )))
    );
    assert_eq!(f.kv("scale"), Some(&KvValue::F64(0.25)));
    let (vb, ib) = f.buffers("coo");
    let vh = xxhash_rust::xxh3::xxh3_64(vb);
    let ih = xxhash_rust::xxh3::xxh3_64(ib);
    assert_eq!(
        f.kv(&checksum_key("coo", "values")),
        Some(&KvValue::U64(vh))
    );
    assert_eq!(
        f.kv(&checksum_key("coo", "indices")),
        Some(&KvValue::U64(ih))
    );
    assert_eq!((ts.values_xxh3, ts.indices_xxh3), (vh, ih));
    // Spec padding: KV starts on the A boundary after the indices.
    assert_eq!(f.trailer.kv_offset, 12288);
}

/// Several tensors of different ranks and types, an empty one, and one
/// whose element count overflows u64, with a larger alignment.
#[test]
fn several_tensors_empty_and_huge_shape() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("multi.hurray");
    let opts = WriteOptions {
        alignment: 8192,
        ..WriteOptions::default()
    };
    let mut fw = FileWriter::create(&p, opts).unwrap();

    let mut t = fw.begin_tensor("vec_i32", DType::I32, &[10]).unwrap();
    for i in [1u64, 4, 9] {
        t.push(&[i], -(i as i32)).unwrap();
    }
    t.finish().unwrap();

    let t = fw.begin_tensor("empty", DType::F64, &[3, 3]).unwrap();
    let empty = t.finish().unwrap();
    assert_eq!(empty.nnz, 0);

    let huge_shape = [1u64 << 40, 1 << 40, 3];
    let mut t = fw.begin_tensor("huge", DType::F16, &huge_shape).unwrap();
    t.push(&[0, 0, 0], f16::from_f64(0.5)).unwrap();
    t.push(&[5, (1 << 40) - 1, 2], f16::from_f64(-2.0)).unwrap();
    t.push(&[(1 << 40) - 1, 0, 1], f16::from_f64(1.0)).unwrap();
    t.finish().unwrap();

    let mut t = fw.begin_tensor("u8_rank1", DType::U8, &[300]).unwrap();
    for i in 0..300u64 {
        t.push_le(&[i], &[(i % 256) as u8], (i % 256) as f64)
            .unwrap();
    }
    t.finish().unwrap();
    let s = fw.finish().unwrap();

    let f = Decoded::read(&p);
    assert_eq!(f.header.alignment, 8192);
    assert_eq!(f.index.len(), 4);
    let names: Vec<&str> = f.index.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["vec_i32", "empty", "huge", "u8_rank1"]);

    // Tensors follow one another: each descriptor (8-aligned) starts at
    // align_up(end of the previous data, A) under the spec's padding.
    let mut expect_desc = 64;
    for e in &f.index {
        assert_eq!(e.descriptor_offset, expect_desc, "{}", e.name);
        assert_eq!(e.data_offset % 8192, 0);
        assert_eq!(
            e.data_offset,
            (e.descriptor_offset + u64::from(e.descriptor_length)).div_ceil(8192) * 8192
        );
        expect_desc = (e.data_offset + e.data_length).div_ceil(8192) * 8192;
    }
    assert_eq!(f.trailer.kv_offset, expect_desc);

    let (d, _) = f.descriptor("vec_i32");
    assert_eq!((d.dtype, d.nnz), (DType::I32, 3));
    let (vb, ib) = f.buffers("vec_i32");
    let vals: Vec<i32> = vb
        .chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(vals, [-1, -4, -9]);
    assert_eq!(ib.len(), 24);
    let st = d.statistics.unwrap();
    assert_eq!((st.value_min, st.value_max), (-9.0, 0.0));
    assert_eq!(st.value_mean, -1.4);

    // The empty tensor: both buffers of size 0 at data_offset, data_length 0.
    let (d, e) = f.descriptor("empty");
    assert_eq!(d.nnz, 0);
    assert_eq!((d.values.byte_size, d.indices.byte_size), (0, 0));
    assert_eq!(e.data_length, 0);
    assert_eq!(e.data_offset, 8192 * 4);
    let st = d.statistics.unwrap();
    assert_eq!(st.sparsity_ratio, 1.0);
    assert_eq!((st.value_min, st.value_max, st.value_mean), (0.0, 0.0, 0.0));

    let (d, _) = f.descriptor("huge");
    assert_eq!(d.shape, huge_shape);
    assert_eq!((d.dtype, d.nnz), (DType::F16, 3));
    let (vb, ib) = f.buffers("huge");
    assert_eq!(vb.len(), 6);
    let idx: Vec<u64> = ib
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(idx, [0, 0, 0, 5, (1 << 40) - 1, 2, (1 << 40) - 1, 0, 1]);
    let st = d.statistics.unwrap();
    let n = 3.0 * 2f64.powi(80);
    assert_eq!(st.sparsity_ratio, 1.0 - 3.0 / n);
    assert_eq!(
        (st.value_min, st.value_max, st.value_abs_max),
        (-2.0, 1.0, 2.0)
    );
    assert_eq!(st.value_mean, -0.5 / n);

    let (d, _) = f.descriptor("u8_rank1");
    assert_eq!(d.nnz, 300);
    let st = d.statistics.unwrap();
    assert_eq!(st.sparsity_ratio, 0.0);
    assert_eq!((st.value_min, st.value_max), (0.0, 255.0));

    // Checksums of every tensor, empty one included.
    for t in &s.tensors {
        let (vb, ib) = f.buffers(&t.name);
        assert_eq!(
            f.kv(&checksum_key(&t.name, "values")),
            Some(&KvValue::U64(xxhash_rust::xxh3::xxh3_64(vb)))
        );
        assert_eq!(
            f.kv(&checksum_key(&t.name, "indices")),
            Some(&KvValue::U64(xxhash_rust::xxh3::xxh3_64(ib)))
        );
    }
}

/// 2 million entries with small buffers: the indices go through the side
/// file, buffer memory does not grow, and the file decodes to the input.
#[test]
fn memory_is_independent_of_nnz() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.hurray");
    let opts = WriteOptions {
        buffer_bytes: 64 * 1024,
        ..WriteOptions::default()
    };
    let mut fw = FileWriter::create(&p, opts).unwrap();
    let mut t = fw
        .begin_tensor("m", DType::F64, &[1 << 20, 1 << 20])
        .unwrap();
    let start = t.buffer_bytes();
    const N: u64 = 2_000_000;
    let mut max_seen = start;
    for k in 0..N {
        let (r, c) = (k / 3, (k % 3) * 1000 + k % 7);
        t.push(&[r, c], k as f64 * 0.5).unwrap();
        if k % 100_000 == 0 {
            max_seen = max_seen.max(t.buffer_bytes());
        }
    }
    max_seen = max_seen.max(t.buffer_bytes());
    assert_eq!(t.nnz(), N);
    // Two 64 KiB buffers, one stats block, the previous index.
    assert_eq!(max_seen, start);
    assert!(max_seen < 160 * 1024, "{max_seen}");
    let ts = t.finish().unwrap();
    fw.finish().unwrap();

    let f = Decoded::read(&p);
    let (vb, ib) = f.buffers("m");
    assert_eq!(vb.len() as u64, N * 8);
    assert_eq!(ib.len() as u64, N * 16);
    assert_eq!(ts.values_xxh3, xxhash_rust::xxh3::xxh3_64(vb));
    assert_eq!(ts.indices_xxh3, xxhash_rust::xxh3::xxh3_64(ib));
    for k in [0u64, 1, 12345, N - 1] {
        let v = f64::from_le_bytes(vb[k as usize * 8..][..8].try_into().unwrap());
        assert_eq!(v, k as f64 * 0.5);
        let r = u64::from_le_bytes(ib[k as usize * 16..][..8].try_into().unwrap());
        let c = u64::from_le_bytes(ib[k as usize * 16 + 8..][..8].try_into().unwrap());
        assert_eq!((r, c), (k / 3, (k % 3) * 1000 + k % 7));
    }
    // Only the output file remains (side files are unnamed).
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}
