//! Hand-built Hurray files: assemble them from the codec's `encode` functions,
//! with hooks to tamper with descriptors and index entries.

use coo_assembler::internals::hurray::header::{FLAG_HAS_INDEX_CRC32C, FLAG_HAS_KV_METADATA};
use coo_assembler::internals::hurray::statistics::*;
use coo_assembler::internals::hurray::{
    BufferHandle, CooDescriptor, FileHeader, IndexEntry, KvValue, Statistics, Trailer, align_up,
    index, kv,
};
use coo_assembler::{DType, element::Element};

/// One tensor to write.
#[derive(Clone, Debug)]
pub struct T {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<u64>,
    pub indices: Vec<u64>,
    pub values: Vec<u8>,
    pub is_sorted: bool,
    pub stats: Option<Statistics>,
}

impl T {
    pub fn nnz(&self) -> u64 {
        (self.indices.len() / self.shape.len()) as u64
    }
}

/// Entries in the order given.
pub fn tensor<E: Element>(name: &str, shape: &[u64], entries: &[(Vec<u64>, E)], sorted: bool) -> T {
    let mut indices = Vec::new();
    let mut values = Vec::new();
    for (i, v) in entries {
        assert_eq!(i.len(), shape.len());
        indices.extend_from_slice(i);
        v.write_le(&mut values);
    }
    T {
        name: name.into(),
        dtype: E::DTYPE,
        shape: shape.to_vec(),
        indices,
        values,
        is_sorted: sorted,
        stats: None,
    }
}

/// Full statistics of the logical tensor (implicit zeros included).
pub fn stats_for(t: &T) -> Statistics {
    let w = t.dtype.width();
    let vals: Vec<f64> = if t.dtype.is_bool() {
        // Stored 8 per byte.
        let n = t.indices.len() / t.shape.len().max(1);
        let mut bits = Vec::new();
        coo_assembler::element::unpack_bools(&t.values, n, &mut bits);
        bits.into_iter().map(f64::from).collect()
    } else {
        t.values
            .chunks_exact(w)
            .map(|b| t.dtype.decode(b).to_f64())
            .collect()
    };
    let n: f64 = t.shape.iter().map(|&d| d as f64).product();
    let nnz = vals.len() as f64;
    let implicit = nnz < n;
    let mut min = vals.iter().cloned().fold(f64::INFINITY, f64::min);
    let mut max = vals.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    if implicit {
        min = min.min(0.0);
        max = max.max(0.0);
    }
    let amax = vals.iter().map(|v| v.abs()).fold(0.0, f64::max);
    let mean = vals.iter().sum::<f64>() / n;
    let sq: f64 =
        vals.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() + (n - nnz) * mean * mean;
    let st = Statistics {
        computed_mask: NNZ_VALID
            | SPARSITY_VALID
            | VALUE_RANGE_VALID
            | VALUE_STATS_VALID
            | NAN_INF_VALID,
        nnz: vals.len() as u64,
        sparsity_ratio: 1.0 - nnz / n,
        value_min: min,
        value_max: max,
        value_abs_max: amax,
        value_mean: mean,
        value_stddev: (sq / n).sqrt(),
        nm_n: 0,
        nm_m: 0,
        has_nan: vals.iter().any(|v| v.is_nan()),
        has_inf: vals.iter().any(|v| v.is_infinite()),
    };
    if t.dtype.is_complex() {
        // Complex values have no order: nnz, sparsity and NaN / inf only.
        let parts: Vec<f64> = t
            .values
            .chunks_exact(w)
            .map(|b| t.dtype.decode(b).stat_f64())
            .collect();
        return Statistics {
            computed_mask: NNZ_VALID | SPARSITY_VALID | NAN_INF_VALID,
            value_min: 0.0,
            value_max: 0.0,
            value_abs_max: 0.0,
            value_mean: 0.0,
            value_stddev: 0.0,
            has_nan: parts.iter().any(|v| v.is_nan()),
            has_inf: parts.iter().any(|v| v.is_infinite()),
            ..st
        };
    }
    st
}

/// KV checksum entries for a tensor.
pub fn checksums(t: &T) -> Vec<(String, KvValue)> {
    let ib: Vec<u8> = t.indices.iter().flat_map(|v| v.to_le_bytes()).collect();
    vec![
        (
            format!("coo_assembler.xxh3.{}.values", t.name),
            KvValue::U64(xxhash_rust::xxh3::xxh3_64(&t.values)),
        ),
        (
            format!("coo_assembler.xxh3.{}.indices", t.name),
            KvValue::U64(xxhash_rust::xxh3::xxh3_64(&ib)),
        ),
    ]
}

/// Build options.
#[derive(Clone, Copy, Debug)]
pub struct Opts {
    pub alignment: u32,
    pub crc: bool,
    pub kv_flag: bool,
    /// Pad to A after the last buffer (spec writer); false pads only to 8
    /// (reference writer).
    pub pad_last_to_a: bool,
}

impl Default for Opts {
    fn default() -> Self {
        Opts {
            alignment: 4096,
            crc: true,
            kv_flag: false,
            pad_last_to_a: true,
        }
    }
}

/// Where things landed.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    pub desc_offsets: Vec<u64>,
    pub desc_lens: Vec<u64>,
    pub values_offsets: Vec<u64>,
    pub indices_offsets: Vec<u64>,
    pub kv_offset: u64,
    pub kv_len: u64,
    pub index_offset: u64,
    pub index_len: u64,
    pub trailer_offset: u64,
}

pub fn build(tensors: &[T], kv: &[(String, KvValue)], opts: Opts) -> (Vec<u8>, Layout) {
    build_with(tensors, kv, opts, |_, _| {}, |_| {})
}

/// Build a file; `tamper_desc` edits each descriptor before it is encoded
/// (layout still follows the real data), `tamper_index` the index entries.
pub fn build_with(
    tensors: &[T],
    kvs: &[(String, KvValue)],
    opts: Opts,
    mut tamper_desc: impl FnMut(usize, &mut CooDescriptor),
    tamper_index: impl FnOnce(&mut Vec<IndexEntry>),
) -> (Vec<u8>, Layout) {
    let a = opts.alignment as u64;
    let mut flags = 0;
    if opts.crc {
        flags |= FLAG_HAS_INDEX_CRC32C;
    }
    if opts.kv_flag {
        flags |= FLAG_HAS_KV_METADATA;
    }
    let header = FileHeader {
        flags,
        alignment: opts.alignment,
        first_descriptor_offset: 64,
        tensor_count_hint: tensors.len() as u64,
    };
    let mut out = header.encode().to_vec();
    let mut lay = Layout::default();
    let mut entries = Vec::new();
    for (ti, t) in tensors.iter().enumerate() {
        let pad8 = align_up(out.len() as u64, 8).unwrap() as usize;
        out.resize(pad8, 0);
        let nnz = t.nnz();
        let mut d = CooDescriptor {
            dtype: t.dtype,
            shape: t.shape.clone(),
            nnz,
            is_sorted: t.is_sorted,
            values: BufferHandle::cpu(t.values.len() as u64, opts.alignment),
            indices: BufferHandle::cpu(t.indices.len() as u64 * 8, opts.alignment),
            statistics: t.stats,
        };
        tamper_desc(ti, &mut d);
        let db = d.encode();
        let d_off = out.len() as u64;
        out.extend_from_slice(&db);
        let v_off = align_up(out.len() as u64, a).unwrap();
        let i_off = align_up(v_off + t.values.len() as u64, a).unwrap();
        let end = i_off + 8 * t.indices.len() as u64;
        // An empty tensor written reference-style: no padding to A at all.
        if !t.indices.is_empty() || opts.pad_last_to_a {
            out.resize(v_off as usize, 0);
            out.extend_from_slice(&t.values);
            out.resize(i_off as usize, 0);
            for v in &t.indices {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        // Spec writer protocol: pad to A after the last buffer.
        if opts.pad_last_to_a {
            out.resize(align_up(out.len() as u64, a).unwrap() as usize, 0);
        }
        entries.push(IndexEntry {
            name: t.name.clone(),
            descriptor_offset: d_off,
            descriptor_length: db.len() as u32,
            data_offset: v_off,
            data_length: end - v_off,
        });
        lay.desc_offsets.push(d_off);
        lay.desc_lens.push(db.len() as u64);
        lay.values_offsets.push(v_off);
        lay.indices_offsets.push(i_off);
    }
    out.resize(align_up(out.len() as u64, 8).unwrap() as usize, 0);
    if !kvs.is_empty() {
        lay.kv_offset = out.len() as u64;
        let kb = kv::encode(kvs);
        lay.kv_len = kb.len() as u64;
        out.extend_from_slice(&kb);
        out.resize(align_up(out.len() as u64, 8).unwrap() as usize, 0);
    }
    tamper_index(&mut entries);
    let ib = index::encode(&entries);
    lay.index_offset = out.len() as u64;
    lay.index_len = ib.len() as u64;
    out.extend_from_slice(&ib);
    let tr = Trailer {
        index_offset: lay.index_offset,
        index_length: lay.index_len,
        kv_offset: lay.kv_offset,
        kv_length: lay.kv_len as u32,
        index_crc32c: if opts.crc {
            coo_assembler::internals::hurray::crc32c::crc32c(&ib)
        } else {
            0
        },
    };
    lay.trailer_offset = out.len() as u64;
    out.extend_from_slice(&tr.encode());
    (out, lay)
}

/// Recompute the trailer's index CRC after tampering with the index bytes.
/// False (nothing changed) when the trailer does not locate an index.
pub fn fix_crc(bytes: &mut [u8]) -> bool {
    let n = bytes.len();
    let t = n - 40;
    let io = u64::from_le_bytes(bytes[t..t + 8].try_into().unwrap());
    let il = u64::from_le_bytes(bytes[t + 8..t + 16].try_into().unwrap());
    let Some(end) = io.checked_add(il).filter(|&e| e <= t as u64) else {
        return false;
    };
    let crc = coo_assembler::internals::hurray::crc32c::crc32c(&bytes[io as usize..end as usize]);
    bytes[t + 28..t + 32].copy_from_slice(&crc.to_le_bytes());
    true
}

/// The standard small file: rank 2 f32, shape [4, 5], 4 sorted entries,
/// statistics and KV checksums.
pub fn small() -> (Vec<u8>, Layout, T) {
    let mut t = tensor::<f32>(
        "coo",
        &[4, 5],
        &[
            (vec![0, 1], 1.5),
            (vec![1, 4], -2.0),
            (vec![2, 0], -0.5),
            (vec![3, 3], 2.0),
        ],
        true,
    );
    t.stats = Some(stats_for(&t));
    let kv = checksums(&t);
    let (b, l) = build(std::slice::from_ref(&t), &kv, Opts::default());
    (b, l, t)
}

/// The error message of a Result that must be an error.
pub fn err_of<X: std::fmt::Debug>(r: coo_assembler::Result<X>) -> String {
    match r {
        Ok(x) => panic!("expected an error, got {x:?}"),
        Err(e) => e.to_string(),
    }
}

/// A plan of a small 7 x 7 pattern (50 contributions) saved at `path` by
/// the library: a file of several tensors and a plan's metadata keys, as
/// a user's `K.plan` is. Returns its tensor names, in file order.
pub fn plan_file(path: &std::path::Path) -> Vec<String> {
    let rows: Vec<u32> = (0..50).map(|k| k % 7).collect();
    let cols: Vec<u32> = (0..50).map(|k| (k * 3) % 7).collect();
    let plan = coo_assembler::Plan::new(
        &[&rows[..], &cols[..]],
        &[7, 7],
        DType::F64,
        &coo_assembler::AssembleOptions::default(),
        None,
    )
    .expect("a plan of a small pattern");
    plan.save(path).expect("save the plan");
    coo_assembler::HurrayFile::open(path)
        .expect("open the plan file")
        .tensor_names()
        .map(String::from)
        .collect()
}
