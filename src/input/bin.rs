//! Raw binary records: `rank` u64 little-endian indices, then one value of
//! the element type, little-endian; no header.

use crate::assemble::builder::Builder;
use crate::assemble::combine::PushValue;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::input::common::{at, input_err, Progress};
use half::{bf16, f16};
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

    /// Push the whole records of `bytes`; returns how many bytes they took.
    #[inline]
    fn records<V: PushValue>(
        b: &mut Builder,
        bytes: &[u8],
        l: &Layout<V>,
        idx: &mut [u64],
        n: &mut u64,
        source: &str,
    ) -> Result<usize> {
        let (rank, rec, decode) = (l.rank, l.rec, l.decode);
        let whole = bytes.len() / rec * rec;
        for chunk in bytes[..whole].chunks_exact(rec) {
            for (d, slot) in idx.iter_mut().enumerate() {
                let mut a = [0u8; 8];
                a.copy_from_slice(&chunk[d * 8..d * 8 + 8]);
                *slot = u64::from_le_bytes(a);
            }
            let v = decode(&chunk[rank * 8..]);
            b.push(idx, v).map_err(|e| {
                // Absurd indices in the first records are the sign of a
                // file written with another rank or element type.
                let hint = *n < 16 && matches!(e, Error::IndexOutOfRange { .. });
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
            })?;
            *n += 1;
        }
        Ok(whole)
    }
    #[allow(clippy::too_many_arguments)]
    fn typed<R: Read, V: PushValue>(
        b: &mut Builder,
        src: BinSource<'_, R>,
        rank: usize,
        dtype: DType,
        width: usize,
        decode: fn(&[u8]) -> V,
        source: &str,
        progress: Progress<'_>,
    ) -> Result<u64> {
        let rec = rank * 8 + width;
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
                    let used = records(b, piece, &layout, &mut idx, &mut n, source)?;
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
                    let used = records(b, &buf[..filled], &layout, &mut idx, &mut n, source)?;
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
    let w = dtype.width();
    macro_rules! go {
        ($t:ty, $f:expr) => {
            typed::<R, $t>(b, src, rank, dtype, w, $f, source, progress)
        };
    }
    fn arr<const N: usize>(s: &[u8]) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&s[..N]);
        a
    }
    match dtype {
        DType::F64 => go!(f64, |s| f64::from_le_bytes(arr(s))),
        DType::F32 => go!(f32, |s| f32::from_le_bytes(arr(s))),
        DType::F16 => go!(f16, |s| f16::from_le_bytes(arr(s))),
        DType::BF16 => go!(bf16, |s| bf16::from_le_bytes(arr(s))),
        DType::I8 => go!(i8, |s| s[0] as i8),
        DType::U8 => go!(u8, |s| s[0]),
        DType::I16 => go!(i16, |s| i16::from_le_bytes(arr(s))),
        DType::U16 => go!(u16, |s| u16::from_le_bytes(arr(s))),
        DType::I32 => go!(i32, |s| i32::from_le_bytes(arr(s))),
        DType::U32 => go!(u32, |s| u32::from_le_bytes(arr(s))),
        DType::I64 => go!(i64, |s| i64::from_le_bytes(arr(s))),
        DType::U64 => go!(u64, |s| u64::from_le_bytes(arr(s))),
    }
}

/// What a record of this layout is, and what to check when the file does
/// not match it.
pub(crate) fn record_hint(rank: usize, dtype: DType) -> String {
    let w = dtype.width();
    format!(
        "records are expected to be {} bytes (rank {rank} x 8 + {w} for {dtype}); the rank of --shape or --dtype may not match the file",
        rank * 8 + w
    )
}

/// Refuse up front a file whose length is not a whole number of records.
pub fn check_bin_length(len: u64, rank: usize, dtype: DType, source: &str) -> Result<()> {
    let rec = (rank * 8 + dtype.width()) as u64;
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
