//! Raw binary records: `rank` u64 little-endian indices, then one value of
//! the element type, little-endian; no header.

use crate::assemble::builder::{Builder, Packer};
use crate::assemble::combine::PushValue;
use crate::assemble::sort::Record;
use crate::codec::le_u64_at;
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::input::common::{Progress, at, input_err};
use std::io::Read;

/// Push binary records from `r`. Returns the number of records.
pub fn push_bin<R: Read>(
    b: &mut Builder,
    r: R,
    rank: usize,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    push_bin_from(b, BinSource::Reader(r), rank, dtype, source, progress)
}

/// Push binary records from bytes already in memory (e.g. a memory-mapped
/// input file: no copy through a read buffer).
pub fn push_bin_bytes(
    b: &mut Builder,
    bytes: &[u8],
    rank: usize,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    push_bin_from::<&[u8]>(b, BinSource::Bytes(bytes), rank, dtype, source, progress)
}

/// Records checked and packed before one copy into the builder's chunk:
/// 64 KiB of packed records, which stay in the first-level caches.
const PACK_GROUP: usize = 4096;

enum BinSource<'a, R> {
    Reader(R),
    Bytes(&'a [u8]),
}

fn push_bin_from<R: Read>(
    b: &mut Builder,
    src: BinSource<'_, R>,
    rank: usize,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    /// How one record is laid out: rank indices, then a value.
    struct Layout<V> {
        rank: usize,
        rec: usize,
        decode: fn(&[u8]) -> V,
        hint: String,
    }

    /// Push one record through [`Builder::push`], naming the record in
    /// an error (and the likely cause, for absurd indices up front).
    fn push_one<V: PushValue>(
        b: &mut Builder,
        idx: &[u64],
        v: V,
        n: u64,
        l: &Layout<V>,
        source: &str,
    ) -> Result<()> {
        b.push(idx, v).map_err(|e| {
            // Absurd indices in the first records are the sign of a
            // file written with another rank or element type.
            let hint = n < 16 && matches!(e, Error::IndexOutOfRange { .. });
            let e = at(source, || format!("record {n}"))(e);
            match e {
                Error::Input {
                    source_name,
                    location,
                    detail,
                    cause,
                } if hint => Error::Input {
                    source_name,
                    location,
                    detail: format!("{detail}; {}", l.hint),
                    cause,
                },
                e => e,
            }
        })
    }

    /// Read one record's indices into `idx` and return its value.
    #[inline(always)]
    fn read<V: PushValue>(chunk: &[u8], l: &Layout<V>, idx: &mut [u64]) -> V {
        for (d, slot) in idx.iter_mut().enumerate() {
            let mut a = [0u8; 8];
            a.copy_from_slice(&chunk[d * 8..d * 8 + 8]);
            *slot = u64::from_le_bytes(a);
        }
        (l.decode)(&chunk[l.rank * 8..])
    }

    /// Pack the whole records of `bytes` with `pack` and append them a
    /// group at a time; a record `pack` refuses is pushed alone, after the
    /// records before it, for its error.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn pack_groups<V: PushValue>(
        b: &mut Builder,
        bytes: &[u8],
        l: &Layout<V>,
        idx: &mut [u64],
        n: &mut u64,
        source: &str,
        packed: &mut Vec<Record<u64>>,
        mut pack: impl FnMut(&[u8], &mut [u64]) -> Option<Record<u64>>,
    ) -> Result<()> {
        for group in bytes.chunks(PACK_GROUP * l.rec) {
            packed.clear();
            for chunk in group.chunks_exact(l.rec) {
                match pack(chunk, idx) {
                    Some(r) => packed.push(r),
                    None => {
                        b.append_packed(packed)?;
                        *n += packed.len() as u64;
                        packed.clear();
                        let v = read(chunk, l, idx);
                        push_one(b, idx, v, *n, l, source)?;
                        *n += 1;
                    }
                }
            }
            b.append_packed(packed)?;
            *n += packed.len() as u64;
        }
        Ok(())
    }

    /// Push the whole records of `bytes`; returns how many bytes they took.
    /// With a packer (`u64` keys), records are checked and packed here in
    /// groups and appended to the builder's chunk by a copy; a record the
    /// packer refuses goes through [`Builder::push`] for its error.
    #[inline]
    fn records<V: PushValue>(
        b: &mut Builder,
        bytes: &[u8],
        l: &Layout<V>,
        idx: &mut [u64],
        n: &mut u64,
        source: &str,
        fast: &mut Option<(Packer, Vec<Record<u64>>)>,
    ) -> Result<usize> {
        let whole = bytes.len() / l.rec * l.rec;
        let all = &bytes[..whole];
        let Some((packer, packed)) = fast.as_mut() else {
            for chunk in all.chunks_exact(l.rec) {
                let v = read(chunk, l, idx);
                push_one(b, idx, v, *n, l, source)?;
                *n += 1;
            }
            return Ok(whole);
        };
        // Row, column, f64 (the common FE record) is packed inline. Each
        // way of packing gets its own copy of the loop: no test per record.
        match packer.matrix_f64().filter(|_| l.rec == 24) {
            Some(m) => pack_groups(b, all, l, idx, n, source, packed, |c, _| {
                match (le_u64_at(c, 0), le_u64_at(c, 8), le_u64_at(c, 16)) {
                    (Some(r), Some(col), Some(v)) => m.pack(r, col, v),
                    _ => None,
                }
            })?,
            None => pack_groups(b, all, l, idx, n, source, packed, |c, idx| {
                let v = read(c, l, idx);
                packer.pack(idx, v)
            })?,
        }
        Ok(whole)
    }

    fn typed<R: Read, V: PushValue>(
        b: &mut Builder,
        src: BinSource<'_, R>,
        rank: usize,
        dtype: DType,
        decode: fn(&[u8]) -> V,
        source: &str,
        progress: Progress<'_>,
    ) -> Result<u64> {
        let rec = bin_record_bytes(rank, dtype);
        let hint = record_hint(rank, dtype);
        let layout = Layout {
            rank,
            rec,
            decode,
            hint: hint.clone(),
        };
        // A whole number of records per step, so a record never straddles
        // two buffers except at the very end.
        let cap = ((4 << 20) / rec * rec).max(rec);
        let mut n = 0u64;
        let mut consumed = 0u64;
        let mut idx = vec![0u64; rank];
        let mut fast = b.packer().map(|p| (p, Vec::with_capacity(PACK_GROUP)));
        let truncated = |n: u64, left: usize| {
            input_err(
                source,
                format!("record {n}"),
                format!("truncated: the input ends {left} bytes into a record; {hint}"),
            )
        };
        match src {
            BinSource::Bytes(bytes) => {
                for piece in bytes.chunks(cap) {
                    let used = records(b, piece, &layout, &mut idx, &mut n, source, &mut fast)?;
                    consumed += used as u64;
                    progress(consumed);
                    if used != piece.len() {
                        return Err(truncated(n, piece.len() - used));
                    }
                }
                Ok(n)
            }
            BinSource::Reader(mut r) => {
                let mut buf = vec![0u8; cap];
                let mut filled = 0usize;
                loop {
                    let got = r
                        .read(&mut buf[filled..])
                        .map_err(|e| Error::io("read", source, e))?;
                    filled += got;
                    let used = records(
                        b,
                        &buf[..filled],
                        &layout,
                        &mut idx,
                        &mut n,
                        source,
                        &mut fast,
                    )?;
                    buf.copy_within(used..filled, 0);
                    filled -= used;
                    consumed += used as u64;
                    progress(consumed);
                    if got == 0 {
                        if filled != 0 {
                            return Err(truncated(n, filled));
                        }
                        return Ok(n);
                    }
                }
            }
        }
    }
    crate::with_element_type!(dtype, T => {
        typed::<R, T>(b, src, rank, dtype, <T as Element>::from_le, source, progress)
    })
}

/// Bytes of one record: `rank` u64 indices and one value of `dtype`.
pub fn bin_record_bytes(rank: usize, dtype: DType) -> usize {
    rank * 8 + dtype.width()
}

/// What a record of this layout is, and what to check when the file does
/// not match it.
pub(crate) fn record_hint(rank: usize, dtype: DType) -> String {
    format!(
        "records are expected to be {} bytes (rank {rank} x 8 + {} for {dtype}); the rank of --shape or --dtype may not match the file",
        bin_record_bytes(rank, dtype),
        dtype.width()
    )
}

/// Refuse up front a file whose length is not a whole number of records.
pub fn check_bin_length(len: u64, rank: usize, dtype: DType, source: &str) -> Result<()> {
    let rec = bin_record_bytes(rank, dtype) as u64;
    if len % rec != 0 {
        return Err(input_err(
            source,
            "start".into(),
            format!(
                "{len} bytes is not a whole number of records: {}",
                record_hint(rank, dtype)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::options::{AssembleOptions, NonFinitePolicy};

    fn record(idx: &[u64], v: f64) -> Vec<u8> {
        let mut r: Vec<u8> = idx.iter().flat_map(|i| i.to_le_bytes()).collect();
        r.extend_from_slice(&v.to_le_bytes());
        r
    }

    /// `n` records of `shape` (rank 2 or 3), three groups' worth and more,
    /// with repeated coordinates; `bad = (k, d)` makes record `k`'s index
    /// in dimension `d` its extent, the first value out of range.
    fn input(shape: &[u64], n: u64, bad: Option<(u64, usize)>) -> Vec<u8> {
        let mut bytes = Vec::new();
        for k in 0..n {
            let mut idx: Vec<u64> = shape
                .iter()
                .enumerate()
                .map(|(d, e)| (k * 7 + d as u64 * 3) % e)
                .collect();
            if let Some((_, d)) = bad.filter(|&(b, _)| b == k) {
                idx[d] = shape[d];
            }
            bytes.extend(record(&idx, k as f64 * 0.25 - 3.0));
        }
        bytes
    }

    fn opts(policy: NonFinitePolicy) -> AssembleOptions {
        AssembleOptions {
            threads: 2,
            non_finite: policy,
            ..AssembleOptions::default()
        }
    }

    /// The file pushed from `bytes` (mapped or read), or the error.
    fn assemble(
        shape: &[u64],
        bytes: &[u8],
        mapped: bool,
        policy: NonFinitePolicy,
    ) -> Result<Vec<u8>> {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("o.hrry");
        let mut b = Builder::new(shape, DType::F64, opts(policy)).unwrap();
        let rank = shape.len();
        let progress: Progress<'_> = &mut |_| {};
        if mapped {
            push_bin_bytes(&mut b, bytes, rank, DType::F64, "t.bin", progress)?;
        } else {
            push_bin(&mut b, bytes, rank, DType::F64, "t.bin", progress)?;
        }
        b.finish(&out)?;
        Ok(std::fs::read(out).unwrap())
    }

    /// The same file, every record through `Builder::push`.
    fn one_by_one(shape: &[u64], bytes: &[u8]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("o.hrry");
        let mut b = Builder::new(shape, DType::F64, opts(NonFinitePolicy::Keep)).unwrap();
        let rec = shape.len() * 8 + 8;
        for r in bytes.chunks_exact(rec) {
            let w = |at: usize| u64::from_le_bytes(r[at..at + 8].try_into().unwrap());
            let idx: Vec<u64> = (0..shape.len()).map(|d| w(d * 8)).collect();
            b.push(&idx, f64::from_bits(w(shape.len() * 8))).unwrap();
        }
        b.finish(&out).unwrap();
        std::fs::read(out).unwrap()
    }

    /// Rank-2 f64 records take the inline packer, other ranks and a
    /// non-finite policy the general one: all give the bytes of pushing
    /// one record at a time, from a mapped file or a stream.
    #[test]
    fn packed_paths_write_the_bytes_of_single_pushes() {
        let n = 3 * PACK_GROUP as u64 + 123;
        for shape in [&[50u64, 40][..], &[20, 30, 10]] {
            let bytes = input(shape, n, None);
            let want = one_by_one(shape, &bytes);
            for mapped in [true, false] {
                for policy in [NonFinitePolicy::Keep, NonFinitePolicy::RejectNan] {
                    let got = assemble(shape, &bytes, mapped, policy).unwrap();
                    assert!(got == want, "{shape:?} mapped {mapped} {policy:?}");
                }
            }
        }
    }

    /// A refused record is named by its number wherever it falls in a
    /// group, with the rank / dtype hint among the first 16 records.
    #[test]
    fn a_refused_record_is_named_wherever_it_falls() {
        let n = 2 * PACK_GROUP as u64 + 10;
        for shape in [&[50u64, 40][..], &[20, 30, 10]] {
            let at = [0, 3, PACK_GROUP as u64 - 1, PACK_GROUP as u64 + 517, n - 1];
            for (bad, dim) in at
                .into_iter()
                .flat_map(|k| (0..shape.len()).map(move |d| (k, d)))
            {
                let bytes = input(shape, n, Some((bad, dim)));
                for mapped in [true, false] {
                    let e = assemble(shape, &bytes, mapped, NonFinitePolicy::Keep).unwrap_err();
                    let msg = e.to_string();
                    assert!(msg.contains(&format!("t.bin:record {bad}")), "{msg}");
                    assert!(msg.contains("out of range"), "{msg}");
                    assert_eq!(msg.contains("may not match the file"), bad < 16, "{msg}");
                }
            }
        }
    }
}
