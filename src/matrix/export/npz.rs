//! scipy `.npz`: the arrays `scipy.sparse.save_npz(..., compressed=False)`
//! writes for a sparse array, in a stored zip.
//!
//! CSR: `data`, `indices`, `indptr`; COO: `data`, `row`, `col`; both with
//! `format` (bytes), `shape` (int64) and `_is_array` (so `load_npz`
//! returns `csr_array` / `coo_array`, not the matrix classes). Indices are
//! int32 when every index, nnz and the shape fit, else int64, as scipy
//! picks. float16 and bfloat16 values are written as float32 (scipy.sparse
//! refuses float16). Each array is one streamed pass over the file.

use super::super::error::{MatrixError, MatrixResult};
use super::super::output::Output;
use super::super::vector::npy_header;
use super::super::view::{with_values, Matrix};
use super::zip::ZipWriter;
use super::{pass, ExportOptions, ExportSummary};
use crate::{DType, Element};
use std::path::Path;

/// Which scipy sparse array an `.npz` export holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NpzLayout {
    /// `csr` for a row-sorted matrix, `coo` otherwise.
    #[default]
    Auto,
    /// `csr_array` (the matrix must be sorted row-major).
    Csr,
    /// `coo_array`.
    Coo,
}

/// NumPy type string of the `data` array for `d`.
fn data_descr(d: DType) -> &'static str {
    match d {
        DType::F64 => "<f8",
        DType::F32 | DType::F16 | DType::BF16 => "<f4",
        DType::I8 => "|i1",
        DType::U8 => "|u1",
        DType::I16 => "<i2",
        DType::U16 => "<u2",
        DType::I32 => "<i4",
        DType::U32 => "<u4",
        DType::I64 => "<i8",
        DType::U64 => "<u8",
    }
}

/// Append `v` as the data array's type (floats narrower than f32 widened).
trait NpyValue: Element {
    fn put(self, out: &mut Vec<u8>);
}
macro_rules! npy_same {
    ($($t:ty),*) => {$(
        impl NpyValue for $t {
            #[inline]
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
npy_same!(f64, f32, i8, u8, i16, u16, i32, u32, i64, u64);
impl NpyValue for half::f16 {
    #[inline]
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_f32().to_le_bytes());
    }
}
impl NpyValue for half::bf16 {
    #[inline]
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_f32().to_le_bytes());
    }
}

/// Scratch buffer flushed into the zip entry every so often.
struct Chunk<'z> {
    zip: &'z mut ZipWriter,
    buf: Vec<u8>,
}
impl Chunk<'_> {
    fn flush_if_full(&mut self) -> crate::Result<()> {
        if self.buf.len() >= 1 << 20 {
            self.zip.write(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
    fn done(mut self) -> crate::Result<()> {
        if !self.buf.is_empty() {
            self.zip.write(&self.buf)?;
        }
        self.buf.clear();
        self.zip.end()
    }
}

fn small_entry(
    zip: &mut ZipWriter,
    name: &str,
    descr: &str,
    shape: &[u64],
    data: &[u8],
) -> crate::Result<()> {
    let h = npy_header(descr, shape);
    zip.begin(name, (h.len() + data.len()) as u64)?;
    zip.write(&h)?;
    zip.write(data)?;
    zip.end()
}

pub(super) fn write(
    a: &Matrix<'_>,
    out: &Path,
    opts: &ExportOptions,
) -> MatrixResult<ExportSummary> {
    let csr = match opts.npz_layout {
        NpzLayout::Auto => a.is_row_sorted(),
        NpzLayout::Csr => {
            a.require_sorted("npz export as csr", "export it with the coo layout")?;
            true
        }
        NpzLayout::Coo => false,
    };
    let t = a.coo("export to npz")?;
    let nnz = t.nnz();
    let (m, n) = (a.rows(), a.cols());
    if m > i64::MAX as u64 || n > i64::MAX as u64 {
        return Err(MatrixError::IndexTooLarge {
            what: "shape",
            value: m.max(n),
            hint: "NumPy indices are signed 64-bit",
        });
    }
    let wide = nnz.max(m).max(n) > i32::MAX as u64;
    let (idescr, iw) = if wide { ("<i8", 8u64) } else { ("<i4", 4u64) };
    let put_index = |buf: &mut Vec<u8>, v: u64| {
        if wide {
            buf.extend_from_slice(&(v as i64).to_le_bytes());
        } else {
            buf.extend_from_slice(&(v as i32).to_le_bytes());
        }
    };
    let ind = t.indices();
    let mut zip = ZipWriter::new(Output::create(out)?);

    // data
    let descr = data_descr(t.dtype());
    let h = npy_header(descr, &[nnz]);
    let width = if matches!(t.dtype(), DType::F16 | DType::BF16) {
        4
    } else {
        t.dtype().width() as u64
    };
    zip.begin("data.npy", h.len() as u64 + nnz * width)?;
    zip.write(&h)?;
    {
        let mut c = Chunk {
            zip: &mut zip,
            buf: Vec::with_capacity(1 << 20),
        };
        with_values!(t, |vals| {
            pass(a, opts.paging, |r| {
                for v in &vals[r] {
                    v.put(&mut c.buf);
                }
                Ok(c.flush_if_full()?)
            })?
        });
        c.done()?;
    }

    // One index array: component `dim` of every entry.
    let index_entry = |zip: &mut ZipWriter, name: &str, dim: usize| -> MatrixResult<()> {
        let h = npy_header(idescr, &[nnz]);
        zip.begin(name, h.len() as u64 + nnz * iw)?;
        zip.write(&h)?;
        let mut c = Chunk {
            zip,
            buf: Vec::with_capacity(1 << 20),
        };
        pass(a, opts.paging, |r| {
            for e in ind[2 * r.start..2 * r.end].chunks_exact(2) {
                put_index(&mut c.buf, e[dim]);
            }
            Ok(c.flush_if_full()?)
        })?;
        Ok(c.done()?)
    };
    if csr {
        index_entry(&mut zip, "indices.npy", 1)?;
        // indptr: one pass over the rows, closing each row as it ends.
        let h = npy_header(idescr, &[m + 1]);
        zip.begin("indptr.npy", h.len() as u64 + (m + 1) * iw)?;
        zip.write(&h)?;
        let mut c = Chunk {
            zip: &mut zip,
            buf: Vec::with_capacity(1 << 20),
        };
        let mut next_row = 0u64; // rows below this have their start written
        pass(a, opts.paging, |r| {
            for (k, e) in ind[2 * r.start..2 * r.end].chunks_exact(2).enumerate() {
                let row = e[0];
                if row >= m || row + 1 < next_row {
                    return Err(a.corrupt(
                        r.start + k,
                        format_args!("row {row} breaks the sorted order or the shape"),
                    ));
                }
                while next_row <= row {
                    put_index(&mut c.buf, (r.start + k) as u64);
                    next_row += 1;
                }
            }
            Ok(c.flush_if_full()?)
        })?;
        while next_row <= m {
            put_index(&mut c.buf, nnz);
            next_row += 1;
            c.flush_if_full()?;
        }
        c.done()?;
    } else {
        index_entry(&mut zip, "row.npy", 0)?;
        index_entry(&mut zip, "col.npy", 1)?;
    }
    let format: &[u8] = if csr { b"csr" } else { b"coo" };
    small_entry(&mut zip, "format.npy", "|S3", &[], format)?;
    let mut shape = Vec::with_capacity(16);
    shape.extend_from_slice(&(m as i64).to_le_bytes());
    shape.extend_from_slice(&(n as i64).to_le_bytes());
    small_entry(&mut zip, "shape.npy", "<i8", &[2], &shape)?;
    small_entry(&mut zip, "_is_array.npy", "|b1", &[], &[1])?;
    let bytes = zip.finish()?;
    Ok(ExportSummary {
        entries: nnz,
        bytes,
    })
}
