//! Interoperability with the reference implementation (hurray-core /
//! hurray-io 0.1.0), both ways, for every numeric element type and ranks
//! 1 to 4; and an independent, std-only decoding of one of our files
//! against the COO layout of the spec (pgillet/hurray, docs/spec/layouts/coo.md).

use crate::common;

use common::reference;

use coo_assembler::HurrayFile;
use coo_assembler::write::{FileWriter, WriteOptions};
use coo_assembler::{AssembleOptions, Builder, DType, Value};
use hurray_core::descriptor::{Statistics as RefStats, StatisticsMask};
use hurray_core::layout::CooLayout;
use hurray_core::{LayoutDescriptor, TensorDescriptor};
use proptest::prelude::*;
use std::collections::BTreeSet;

const ALL: [DType; 15] = [
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::C64,
    DType::C128,
    DType::Bool,
];

fn shape_for(rank: usize) -> Vec<u64> {
    [vec![50], vec![9, 7], vec![5, 4, 3], vec![3, 4, 2, 5]][rank - 1].clone()
}

fn unravel(mut lin: u64, shape: &[u64]) -> Vec<u64> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = lin % shape[d];
        lin /= shape[d];
    }
    idx
}

/// Up to `n` distinct entries, sorted, values exact in every type.
fn entries(dt: DType, shape: &[u64], seed: u64, n: usize) -> Vec<(Vec<u64>, Value)> {
    let total: u64 = shape.iter().product();
    let mut rng = crate::common::Rng::new(seed);
    let mut lin = BTreeSet::new();
    for _ in 0..n {
        lin.insert(rng.below(total));
    }
    lin.into_iter()
        .enumerate()
        .map(|(k, l)| {
            let k = (k as i64 + (seed % 5) as i64) % 40;
            let v = if dt.is_bool() {
                Value::UInt(u64::from(k % 3 != 1))
            } else if dt.is_float() {
                Value::Float((k as f64 - 7.0) * 0.5)
            } else if dt.is_complex() {
                Value::Complex((k as f64 - 7.0) * 0.5, 3.0 - k as f64 * 0.25)
            } else if dt.is_signed_int() {
                Value::Int(k - 7)
            } else {
                Value::UInt(k as u64 + 1)
            };
            (unravel(l, shape), v)
        })
        .collect()
}

fn le(v: Value, dt: DType) -> Vec<u8> {
    v.to_le(dt).unwrap()[..dt.width()].to_vec()
}

/// The values buffer as stored: the values' bytes, bools 8 per byte.
fn stored(e: &[(Vec<u64>, Value)], dt: DType) -> Vec<u8> {
    let bytes: Vec<u8> = e.iter().flat_map(|(_, v)| le(*v, dt)).collect();
    if dt.is_bool() {
        let mut packed = Vec::new();
        coo_assembler::element::pack_bools(&bytes, &mut packed);
        packed
    } else {
        bytes
    }
}

/// One tensor as raw buffers, in the order given.
struct Raw {
    name: String,
    dtype: DType,
    shape: Vec<u64>,
    entries: Vec<(Vec<u64>, Value)>,
    sorted: bool,
    stats: bool,
}

impl Raw {
    fn values(&self) -> Vec<u8> {
        stored(&self.entries, self.dtype)
    }
    fn indices(&self) -> Vec<u8> {
        self.entries
            .iter()
            .flat_map(|(i, _)| i.iter().flat_map(|x| x.to_le_bytes()))
            .collect()
    }
    fn our_stats(&self) -> coo_assembler::internals::hurray::Statistics {
        let t = common::T {
            name: self.name.clone(),
            dtype: self.dtype,
            shape: self.shape.clone(),
            indices: self.entries.iter().flat_map(|(i, _)| i.clone()).collect(),
            values: self.values(),
            is_sorted: self.sorted,
            stats: None,
        };
        common::stats_for(&t)
    }
    fn ref_stats(&self) -> RefStats {
        let s = self.our_stats();
        RefStats {
            computed_mask: StatisticsMask(s.computed_mask),
            nnz: s.nnz,
            sparsity_ratio: s.sparsity_ratio,
            value_min: s.value_min,
            value_max: s.value_max,
            value_abs_max: s.value_abs_max,
            value_mean: s.value_mean,
            value_stddev: s.value_stddev,
            nm_n: 0,
            nm_m: 0,
            has_nan: s.has_nan,
            has_inf: s.has_inf,
        }
    }
    fn descriptor(&self) -> TensorDescriptor {
        let layout = LayoutDescriptor::Coo(CooLayout::new(self.entries.len() as u64, self.sorted));
        let (v, i) = (self.values(), self.indices());
        reference::descriptor(
            self.dtype,
            &self.shape,
            layout,
            &[&v, &i],
            self.stats.then(|| self.ref_stats()),
        )
    }
}

/// Shuffle deterministically (reverse, maybe one swap): the result is
/// not sorted when there are at least 2 entries.
fn shuffle(e: &mut [(Vec<u64>, Value)], seed: u64) {
    let n = e.len();
    if n < 2 {
        return;
    }
    e.reverse();
    if n >= 3 && seed % 2 == 0 {
        e.swap(0, n / 2);
    }
    assert!(e.windows(2).any(|w| w[0].0 > w[1].0));
}

fn write_reference(tensors: &[Raw]) -> Vec<u8> {
    let parts: Vec<_> = tensors
        .iter()
        .map(|t| (t.descriptor(), t.values(), t.indices()))
        .collect();
    let bufs: Vec<[&[u8]; 2]> = parts.iter().map(|(_, v, i)| [&v[..], &i[..]]).collect();
    let list: Vec<(&str, &TensorDescriptor, &[&[u8]])> = tensors
        .iter()
        .zip(&parts)
        .zip(&bufs)
        .map(|((t, (d, _, _)), b)| (t.name.as_str(), d, &b[..]))
        .collect();
    reference::write(&list)
}

/// Every field, every byte, every lookup of `tensors` through our reader.
fn check_ours(bytes: Vec<u8>, tensors: &[Raw]) {
    let f = HurrayFile::from_bytes(bytes).unwrap();
    let names: Vec<&str> = f.tensor_names().collect();
    let want: Vec<&str> = tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, want);
    // The reference writer stores no checksums: a note per tensor says so.
    let problems = f.verify();
    assert!(
        problems.iter().all(|p| p.rule == "no-checksums"),
        "{problems:?}"
    );
    for raw in tensors {
        let t = f.tensor(&raw.name).unwrap();
        let d = t.descriptor();
        let ctx = &raw.name;
        assert_eq!(d.dtype, raw.dtype, "{ctx}");
        assert_eq!(d.shape, raw.shape, "{ctx}");
        assert_eq!(d.nnz, raw.entries.len() as u64, "{ctx}");
        assert_eq!(d.is_sorted, raw.sorted, "{ctx}");
        assert_eq!(d.values.byte_size, raw.values().len() as u64, "{ctx}");
        assert_eq!(d.indices.byte_size, raw.indices().len() as u64, "{ctx}");
        for h in [&d.values, &d.indices] {
            assert_eq!(
                (h.alignment, h.device_tag, h.sync_mode, h.memory_class),
                (4096, 0, 0, 0),
                "{ctx}"
            );
        }
        match (&d.statistics, raw.stats) {
            (Some(s), true) => assert_eq!(*s, raw.our_stats(), "{ctx}"),
            (None, false) => {}
            other => panic!("{ctx}: statistics {other:?}"),
        }
        // Our reader's view: one byte per value (bools unpacked).
        let view: Vec<u8> = raw
            .entries
            .iter()
            .flat_map(|(_, v)| le(*v, raw.dtype))
            .collect();
        assert_eq!(t.values_bytes(), view, "{ctx}");
        assert_eq!(t.indices_bytes(), raw.indices(), "{ctx}");
        assert!(t.verify().is_empty(), "{ctx}: {:?}", t.verify());
        let stored: BTreeSet<Vec<u64>> = raw.entries.iter().map(|(i, _)| i.clone()).collect();
        for (k, (i, v)) in raw.entries.iter().enumerate() {
            assert_eq!(t.get(i).unwrap(), *v, "{ctx} {i:?}");
            assert_eq!(t.find(i).unwrap(), Some(k as u64), "{ctx} {i:?}");
            assert_eq!(t.value(k as u64), *v, "{ctx}");
            assert_eq!(t.index(k as u64), &i[..], "{ctx}");
        }
        let total: u64 = raw.shape.iter().product();
        let zero = raw.dtype.zero();
        for lin in 0..total {
            let i = unravel(lin, &raw.shape);
            if !stored.contains(&i) {
                assert_eq!(t.get(&i).unwrap(), zero, "{ctx} miss {i:?}");
                assert_eq!(t.find(&i).unwrap(), None, "{ctx} miss {i:?}");
            }
        }
    }
}

fn reference_file_for(dt: DType, seed: u64) -> Vec<Raw> {
    let mut ts = Vec::new();
    for rank in 1..=4 {
        for sorted in [true, false] {
            let shape = shape_for(rank);
            let mut e = entries(dt, &shape, seed + rank as u64, 12 + rank * 3);
            if !sorted {
                shuffle(&mut e, seed);
            }
            ts.push(Raw {
                name: format!("{dt}_r{rank}_{}", if sorted { "s" } else { "u" }),
                dtype: dt,
                shape,
                entries: e,
                sorted,
                stats: (rank + sorted as usize) % 2 == 0,
            });
        }
    }
    // An empty tensor too.
    ts.push(Raw {
        name: "empty".into(),
        dtype: dt,
        shape: vec![3, 3],
        entries: vec![],
        sorted: true,
        stats: true,
    });
    ts
}

#[test]
fn reference_files_of_every_type_read_by_us() {
    for dt in ALL {
        let ts = reference_file_for(dt, 3);
        let bytes = write_reference(&ts);
        check_ours(bytes, &ts);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn reference_files_random(dti in 0usize..ALL.len(), rank in 1usize..=4, seed in any::<u64>(),
                              n in 0usize..40, sorted in any::<bool>(), stats in any::<bool>()) {
        let dt = ALL[dti];
        let shape = shape_for(rank);
        let mut e = entries(dt, &shape, seed, n);
        let sorted = sorted || e.len() < 2;
        if !sorted {
            shuffle(&mut e, seed);
        }
        let ts = vec![Raw { name: "t".into(), dtype: dt, shape, entries: e, sorted, stats }];
        check_ours(write_reference(&ts), &ts);
    }
}

// ----------------------------------------------------------- us -> reference

struct Expect {
    name: String,
    dtype: DType,
    shape: Vec<u64>,
    values: Vec<u8>,
    indices: Vec<u8>,
}

fn read_reference(path: &std::path::Path, want: &[Expect]) {
    let ours = HurrayFile::open(path).unwrap();
    assert!(ours.verify().is_empty(), "{:?}", ours.verify());
    let mut r = reference::RefFile::open(path);
    assert_eq!(
        r.names(),
        want.iter().map(|e| e.name.clone()).collect::<Vec<_>>()
    );
    for e in want {
        let ctx = &e.name;
        let t = r.tensor(&e.name);
        let d = &t.descriptor;
        assert_eq!(d.element_type.tag(), e.dtype.tag(), "{ctx}");
        assert_eq!(d.shape.dims(), &e.shape[..], "{ctx}");
        assert_eq!(d.byte_offset, 0, "{ctx}");
        let nnz = (e.indices.len() / (8 * e.shape.len())) as u64;
        match &d.layout {
            LayoutDescriptor::Coo(c) => {
                assert_eq!((c.nnz, c.is_sorted), (nnz, true), "{ctx}");
            }
            other => panic!("{ctx}: layout {other:?}"),
        }
        assert_eq!(d.buffers.len(), 2, "{ctx}");
        assert_eq!(d.buffers[0].byte_size(), e.values.len() as u64, "{ctx}");
        assert_eq!(d.buffers[1].byte_size(), e.indices.len() as u64, "{ctx}");
        assert_eq!(d.buffers[0].alignment(), 4096, "{ctx}");
        assert_eq!(d.buffers[1].alignment(), 4096, "{ctx}");
        assert_eq!(&t.buffers[0][..], &e.values[..], "{ctx} values");
        assert_eq!(&t.buffers[1][..], &e.indices[..], "{ctx} indices");
        // Statistics as the reference decodes them = ours.
        let s = d.statistics.as_ref().expect("we write statistics");
        let o = ours.tensor(&e.name).unwrap().statistics().copied().unwrap();
        assert_eq!(s.computed_mask.0, o.computed_mask, "{ctx}");
        assert_eq!(s.nnz, nnz, "{ctx}");
        assert_eq!(s.nnz, o.nnz, "{ctx}");
        for (a, b) in [
            (s.sparsity_ratio, o.sparsity_ratio),
            (s.value_min, o.value_min),
            (s.value_max, o.value_max),
            (s.value_abs_max, o.value_abs_max),
            (s.value_mean, o.value_mean),
            (s.value_stddev, o.value_stddev),
        ] {
            assert_eq!(a.to_bits(), b.to_bits(), "{ctx}");
        }
        assert_eq!((s.has_nan, s.has_inf), (o.has_nan, o.has_inf), "{ctx}");
        let total: f64 = e.shape.iter().map(|&x| x as f64).product();
        assert!(
            (s.sparsity_ratio - (1.0 - nnz as f64 / total)).abs() < 1e-15,
            "{ctx}"
        );
    }
}

#[test]
fn our_writer_files_read_by_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    for dt in ALL {
        let p = dir.path().join(format!("{dt}.hrry"));
        let mut fw = FileWriter::create(&p, WriteOptions::default()).unwrap();
        let mut want = Vec::new();
        for rank in 1..=4 {
            let shape = shape_for(rank);
            let e = entries(dt, &shape, 11 * rank as u64, 10 + 4 * rank);
            let name = format!("w{rank}");
            let mut t = fw.begin_tensor(&name, dt, &shape).unwrap();
            for (i, v) in &e {
                t.push_value(i, *v).unwrap();
            }
            t.finish().unwrap();
            want.push(Expect {
                name,
                dtype: dt,
                shape,
                values: stored(&e, dt),
                indices: e
                    .iter()
                    .flat_map(|(i, _)| i.iter().flat_map(|x| x.to_le_bytes()))
                    .collect(),
            });
        }
        fw.finish().unwrap();
        read_reference(&p, &want);
    }
}

#[test]
fn assembled_files_read_by_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    for dt in ALL {
        for rank in 1..=4 {
            let shape = shape_for(rank);
            let e = entries(dt, &shape, 5 + rank as u64, 10 + 4 * rank);
            let p = dir.path().join(format!("{dt}_{rank}.hrry"));
            let opts = AssembleOptions {
                tensor_name: "K".into(),
                temp_dir: Some(dir.path().to_path_buf()),
                ..AssembleOptions::default()
            };
            let mut b = Builder::new(&shape, dt, opts).unwrap();
            // Push in reverse, each value split in two contributions.
            for (i, v) in e.iter().rev() {
                match *v {
                    Value::Float(x) => {
                        b.push(i, x - 1.0).unwrap();
                        b.push(i, 1.0f64).unwrap();
                    }
                    Value::Int(x) => {
                        b.push(i, x - 1).unwrap();
                        b.push(i, 1i64).unwrap();
                    }
                    Value::UInt(x) if dt.is_bool() => {
                        // Any true is true.
                        b.push(i, x == 1).unwrap();
                        b.push(i, false).unwrap();
                    }
                    Value::UInt(x) => {
                        b.push(i, x - 1).unwrap();
                        b.push(i, 1u64).unwrap();
                    }
                    Value::Complex(re, im) => {
                        b.push(i, Value::Complex(re - 1.0, im)).unwrap();
                        b.push(i, 1.0f64).unwrap();
                    }
                }
            }
            let s = b.finish(&p).unwrap();
            assert_eq!(s.nnz, e.len() as u64);
            read_reference(
                &p,
                &[Expect {
                    name: "K".into(),
                    dtype: dt,
                    shape: shape.clone(),
                    values: stored(&e, dt),
                    indices: e
                        .iter()
                        .flat_map(|(i, _)| i.iter().flat_map(|x| x.to_le_bytes()))
                        .collect(),
                }],
            );
        }
    }
}

// ------------------------------------------------- independent byte check

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
fn f64_at(b: &[u8], o: usize) -> f64 {
    f64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
fn zeros(b: &[u8], r: std::ops::Range<usize>, what: &str) {
    assert!(
        b[r.clone()].iter().all(|&x| x == 0),
        "{what} {r:?} not zero"
    );
}
fn up(x: usize, a: usize) -> usize {
    x.div_ceil(a) * a
}

/// Decode one file of ours with std only, following the facts sheet, and
/// check every byte: a rank-3 f32 tensor "T", shape [4,5,6], 3 entries,
/// statistics, KV (writer + 2 checksums), CRC.
#[test]
fn our_file_decoded_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("hand.hrry");
    let entries: [([u64; 3], f32); 3] = [([0, 1, 2], 1.5), ([1, 0, 5], -4.0), ([3, 4, 0], 2.5)];
    let mut fw = FileWriter::create(&p, WriteOptions::default()).unwrap();
    let mut t = fw.begin_tensor("T", DType::F32, &[4, 5, 6]).unwrap();
    for (i, v) in entries {
        t.push(&i, v).unwrap();
    }
    t.finish().unwrap();
    fw.finish().unwrap();
    let b = std::fs::read(&p).unwrap();
    let n = b.len();
    const A: usize = 4096;

    // Header.
    assert_eq!(&b[0..8], b"HRRYFILE");
    assert_eq!((b[8], b[9]), (1, 0));
    zeros(&b, 10..12, "header reserved");
    let flags = u32_at(&b, 12);
    assert_eq!(
        flags, 0b101,
        "HAS_KV_METADATA | HAS_INDEX_CRC32C, SORTED_INDEX clear: {flags:#b}"
    );
    assert_eq!(u32_at(&b, 16) as usize, A);
    assert_eq!(u64_at(&b, 20), 64);
    assert_eq!(u64_at(&b, 28), 1, "tensor_count_hint rewritten at finish");
    zeros(&b, 36..64, "header reserved");

    // Trailer.
    let t0 = n - 40;
    assert_eq!(&b[n - 4..], b"HRRY");
    zeros(&b, t0 + 32..t0 + 36, "trailer reserved");
    let (index_off, index_len) = (u64_at(&b, t0) as usize, u64_at(&b, t0 + 8) as usize);
    let (kv_off, kv_len) = (u64_at(&b, t0 + 16) as usize, u32_at(&b, t0 + 24) as usize);
    assert_eq!(index_off % 8, 0);
    assert_eq!(index_off + index_len, t0, "index ends at the trailer");
    assert_eq!(
        u32_at(&b, t0 + 28),
        crc32c::crc32c(&b[index_off..index_off + index_len]),
        "CRC-32C of the index"
    );

    // Index: one entry.
    let ix = &b[index_off..index_off + index_len];
    assert_eq!(u64_at(ix, 0), 1);
    assert_eq!(u16_at(ix, 8), 1);
    assert_eq!(&ix[10..11], b"T");
    let d_off = u64_at(ix, 11) as usize;
    let d_len = u32_at(ix, 19) as usize;
    let data_off = u64_at(ix, 23) as usize;
    let data_len = u64_at(ix, 31) as usize;
    assert_eq!(u32_at(ix, 39), 0, "entry flags");
    assert_eq!(index_len, 43);

    // Descriptor, rank 3 with statistics: 149 + 24 bytes.
    let r = 3;
    assert_eq!(d_off, 64);
    assert_eq!(d_len, 149 + 8 * r);
    let d = &b[d_off..d_off + d_len];
    assert_eq!(&d[0..4], b"HRRY");
    assert_eq!((d[4], d[5]), (1, 0));
    assert_eq!(u32_at(d, 6) as usize, d_len);
    assert_eq!(u32_at(d, 10), 0x08, "HAS_STATISTICS only");
    assert_eq!((d[14], d[15]), (0x03, 0x06), "float32, COO");
    assert_eq!(u32_at(d, 16), 3);
    let shape: Vec<u64> = (0..r).map(|k| u64_at(d, 20 + 8 * k)).collect();
    assert_eq!(shape, [4, 5, 6]);
    let o = 20 + 8 * r;
    assert_eq!(u64_at(d, o), 0, "byte_offset");
    assert_eq!(u64_at(d, o + 8), 3, "nnz");
    assert_eq!(d[o + 16], 1, "is_sorted");
    zeros(d, o + 17..o + 24, "descriptor reserved");
    assert_eq!(d[o + 24], 2, "buffer_count");
    let handle = |h: usize| (u64_at(d, h), u32_at(d, h + 8), &d[h + 12..h + 16]);
    assert_eq!(handle(45 + 8 * r), (12, A as u32, &[0u8, 0, 0, 0][..]));
    assert_eq!(handle(61 + 8 * r), (72, A as u32, &[0u8, 0, 0, 0][..]));
    // Statistics over the 120 logical elements.
    let s = 77 + 8 * r;
    assert_eq!(u32_at(d, s), 0b10_1111, "NNZ|SPARSITY|RANGE|STATS|NAN_INF");
    assert_eq!(u32_at(d, s + 4), 0);
    assert_eq!(u64_at(d, s + 8), 3);
    assert_eq!(f64_at(d, s + 16), 1.0 - 3.0 / 120.0);
    assert_eq!(f64_at(d, s + 24), -4.0, "min");
    assert_eq!(f64_at(d, s + 32), 2.5, "max");
    assert_eq!(f64_at(d, s + 40), 4.0, "abs max");
    let mean = 0.0 / 120.0; // 1.5 - 4 + 2.5 = 0
    assert_eq!(f64_at(d, s + 48), mean);
    let var = (1.5f64 * 1.5 + 16.0 + 6.25) / 120.0;
    assert!((f64_at(d, s + 56) - var.sqrt()).abs() < 1e-15);
    assert_eq!((d[s + 64], d[s + 65], d[s + 66], d[s + 67]), (0, 0, 0, 0));
    zeros(d, s + 68..s + 72, "statistics reserved");

    // Buffers and padding.
    assert_eq!(data_off, up(d_off + d_len, A));
    zeros(&b, d_off + d_len..data_off, "pad before values");
    let vals: Vec<f32> = (0..3)
        .map(|k| {
            f32::from_le_bytes(
                b[data_off + 4 * k..data_off + 4 * k + 4]
                    .try_into()
                    .unwrap(),
            )
        })
        .collect();
    assert_eq!(vals, [1.5, -4.0, 2.5]);
    let i_off = up(data_off + 12, A);
    zeros(&b, data_off + 12..i_off, "pad between buffers");
    let idx: Vec<u64> = (0..9).map(|k| u64_at(&b, i_off + 8 * k)).collect();
    assert_eq!(idx, [0, 1, 2, 1, 0, 5, 3, 4, 0]);
    assert_eq!(data_len, i_off + 72 - data_off);
    // Tail padding to A (then 8), then the KV section.
    assert_eq!(kv_off, up(i_off + 72, A));
    zeros(&b, i_off + 72..kv_off, "tail padding");

    // KV: writer, then the two checksums.
    let kv = &b[kv_off..kv_off + kv_len];
    assert_eq!(u32_at(kv, 0), 3);
    let mut o = 4;
    let mut keys = Vec::new();
    for _ in 0..3 {
        let kl = u16_at(kv, o) as usize;
        let key = std::str::from_utf8(&kv[o + 2..o + 2 + kl])
            .unwrap()
            .to_string();
        o += 2 + kl;
        let tag = kv[o];
        o += 1;
        match tag {
            0x01 => {
                let l = u32_at(kv, o) as usize;
                let v = std::str::from_utf8(&kv[o + 4..o + 4 + l]).unwrap();
                assert_eq!(v, format!("coo-assembler {}", env!("CARGO_PKG_VERSION")));
                o += 4 + l;
            }
            0x03 => {
                let v = u64_at(kv, o);
                let buf = if key.ends_with(".values") {
                    &b[data_off..data_off + 12]
                } else {
                    &b[i_off..i_off + 72]
                };
                assert_eq!(v, xxhash_rust::xxh3::xxh3_64(buf), "{key}");
                o += 8;
            }
            t => panic!("tag {t:#x} for {key}"),
        }
        keys.push(key);
    }
    assert_eq!(o, kv_len);
    assert_eq!(
        keys,
        [
            "coo_assembler.writer",
            "coo_assembler.xxh3.T.values",
            "coo_assembler.xxh3.T.indices"
        ]
    );
    assert_eq!(index_off, up(kv_off + kv_len, 8));
    zeros(&b, kv_off + kv_len..index_off, "pad before index");
}
