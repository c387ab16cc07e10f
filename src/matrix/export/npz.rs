//! scipy `.npz`: the arrays `scipy.sparse.save_npz(..., compressed=False)`
//! writes for a sparse array, in a stored zip.
//!
//! CSR and CSC: `data`, `indices`, `indptr`; COO: `data`, `row`, `col`; all
//! with `format` (bytes), `shape` (int64) and `_is_array` (so `load_npz`
//! returns `csr_array` / `csc_array` / `coo_array`, not the matrix
//! classes). Indices are int32 when every index, nnz and the shape fit,
//! else int64, as scipy picks. float16 and bfloat16 values are written as
//! float32 (scipy.sparse refuses float16). When the stored order is the
//! array's (COO; CSR from CSR or sorted COO; CSC from CSC) each array is
//! one streamed pass over the file; otherwise `data` and `indices` come
//! from a bounded reordering ([`Reorder`]: a counting pass, then a pass per
//! band for each of the two arrays, one in all when a single band holds
//! every entry).

use super::super::entries::Coords;
use super::super::error::{MatrixError, MatrixResult};
use super::super::output::Output;
use super::super::vector::npy_header;
use super::super::view::{Layout, Matrix, with_values};
use super::reorder::{Keep, Reorder};
use super::zip::ZipWriter;
use super::{ExportOptions, ExportSummary, pass};
use crate::{DType, element::Element};

crate::vocab::vocabulary! {
    /// Which scipy sparse array an `.npz` export holds.
    #[derive(Default)]
    pub enum NpzLayout ("npz layout") {
        /// The stored layout: `csr` for a CSR or row-sorted COO matrix, `csc`
        /// for a CSC one, `coo` for an unsorted COO one.
        #[default]
        Auto => "auto": "the stored layout (csr for CSR or sorted COO, csc for CSC, coo for unsorted COO)",
        /// `csr_array` (from CSC or unsorted COO through a bounded reordering).
        Csr => "csr": "csr_array",
        /// `coo_array`, entries in storage order.
        Coo => "coo": "coo_array, entries in storage order",
        /// `csc_array` (from COO or CSR through a bounded reordering).
        Csc => "csc": "csc_array",
    }
}

/// Whether the `data` array holds `d`'s values widened to float32.
fn widened(d: DType) -> bool {
    d.is_narrow_float()
}

/// NumPy type string of the `data` array for `d`, and its bytes per value.
fn data_descr(d: DType) -> (String, u64) {
    if widened(d) {
        return ("<f4".into(), 4);
    }
    let order = if d.width() == 1 { '|' } else { '<' };
    let code = d.npy_code().unwrap_or("f8");
    (format!("{order}{code}"), d.width() as u64)
}

/// Append `v` as the data array's type (floats narrower than f32 widened).
trait NpyValue: Element {
    fn put(self, out: &mut Vec<u8>);
}
impl<T: Element> NpyValue for T {
    #[inline]
    fn put(self, out: &mut Vec<u8>) {
        if widened(T::DTYPE) {
            out.extend_from_slice(&(self.to_value().to_f64() as f32).to_le_bytes());
        } else {
            self.write_le(out);
        }
    }
}

/// Scratch buffer flushed into the zip entry every so often.
struct Chunk<'z> {
    zip: &'z mut ZipWriter,
    buf: Vec<u8>,
}
impl<'z> Chunk<'z> {
    fn new(zip: &'z mut ZipWriter) -> Chunk<'z> {
        Chunk {
            zip,
            buf: Vec::with_capacity(1 << 20),
        }
    }
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
    out: Output,
    opts: &ExportOptions,
) -> MatrixResult<ExportSummary> {
    let target = match opts.npz_layout {
        NpzLayout::Auto => match a.layout() {
            Layout::Coo { sorted: true } | Layout::Csr => NpzLayout::Csr,
            Layout::Csc => NpzLayout::Csc,
            _ => NpzLayout::Coo,
        },
        l => l,
    };
    let nnz = a.nnz();
    let (m, n) = (a.rows(), a.cols());
    if m > i64::MAX as u64 || n > i64::MAX as u64 {
        return Err(MatrixError::IndexTooLarge {
            what: "shape",
            value: m.max(n),
            hint: "NumPy indices are signed 64-bit",
        });
    }
    let wide = nnz.max(m).max(n) > i32::MAX as u64;
    let ix = Index {
        descr: if wide { "<i8" } else { "<i4" },
        width: if wide { 8 } else { 4 },
    };
    let coords = Coords::of(a)?;
    let dtype = a.dtype();
    let (descr, width) = data_descr(dtype);
    let h = npy_header(&descr, &[nnz]);
    let data_size = h.len() as u64 + nnz * width;
    // Compressed targets: the major dimension (0: rows) and its extent.
    let (major, extent) = if target == NpzLayout::Csc {
        (1, n)
    } else {
        (0, m)
    };
    // Everything the archive holds, before any of it is streamed.
    let index_bytes = |n: u64| n as u128 * ix.width as u128;
    let planned = data_size as u128
        + match target {
            NpzLayout::Coo => 2 * index_bytes(nnz),
            _ => index_bytes(nnz) + index_bytes(extent) + ix.width as u128,
        };
    out.check_space(
        u64::try_from(planned).unwrap_or(u64::MAX),
        &format!(
            "{} entries{}",
            nnz,
            if target == NpzLayout::Coo {
                String::new()
            } else {
                format!(", indptr of {} + 1 entries", extent)
            }
        ),
    )?;
    let mut zip = ZipWriter::with_zip64_at(out, opts.zip64_at);
    let in_order = match target {
        NpzLayout::Csr => matches!(a.layout(), Layout::Coo { sorted: true } | Layout::Csr),
        NpzLayout::Csc => a.layout() == Layout::Csc,
        _ => true,
    };
    if in_order {
        zip.begin("data.npy", data_size)?;
        zip.write(&h)?;
        let mut c = Chunk::new(&mut zip);
        with_values!(a, |vals| {
            pass(a, opts.paging, |r| {
                for v in &vals[r] {
                    v.put(&mut c.buf);
                }
                Ok(c.flush_if_full()?)
            })?
        });
        c.done()?;
        if target == NpzLayout::Coo {
            coordinate_entry(a, coords, &mut zip, "row.npy", 0, ix, opts)?;
            coordinate_entry(a, coords, &mut zip, "col.npy", 1, ix, opts)?;
        } else {
            coordinate_entry(a, coords, &mut zip, "indices.npy", 1 - major, ix, opts)?;
            // indptr: one pass over the majors, closing each as it ends.
            let h = npy_header(ix.descr, &[extent + 1]);
            zip.begin("indptr.npy", h.len() as u64 + (extent + 1) * ix.width)?;
            zip.write(&h)?;
            let mut c = Chunk::new(&mut zip);
            let mut next = 0u64; // majors below this have their start written
            let noun = if major == 0 { "row" } else { "column" };
            pass(a, opts.paging, |r| {
                coords.each(r, |p, i, j| {
                    let k = if major == 0 { i } else { j };
                    if k >= extent || k + 1 < next {
                        return Err(a.corrupt(
                            p,
                            format_args!("{noun} {k} breaks the sorted order or the shape"),
                        ));
                    }
                    while next <= k {
                        ix.put(&mut c.buf, p as u64);
                        next += 1;
                    }
                    Ok(())
                })?;
                Ok(c.flush_if_full()?)
            })?;
            while next <= extent {
                ix.put(&mut c.buf, nnz);
                next += 1;
                c.flush_if_full()?;
            }
            c.done()?;
        }
    } else {
        let ro = Reorder::new(a, major, Keep::All, opts.paging)?;
        let bands = ro.bands(opts.reorder_budget, None);
        let (mut items, mut starts) = (Vec::new(), Vec::new());
        let w = dtype.width();
        zip.begin("data.npy", data_size)?;
        zip.write(&h)?;
        let mut c = Chunk::new(&mut zip);
        for band in &bands {
            ro.gather(band.clone(), &mut items, &mut starts)?;
            for it in &items {
                let raw = &it.raw;
                if widened(dtype) {
                    let v = dtype.decode(raw).to_f64() as f32;
                    c.buf.extend_from_slice(&v.to_le_bytes());
                } else {
                    c.buf.extend_from_slice(&raw[..w]);
                }
                c.flush_if_full()?;
            }
        }
        c.done()?;
        let h = npy_header(ix.descr, &[nnz]);
        zip.begin("indices.npy", h.len() as u64 + nnz * ix.width)?;
        zip.write(&h)?;
        let mut c = Chunk::new(&mut zip);
        for band in &bands {
            // One band is still in memory from the data pass.
            if bands.len() > 1 {
                ro.gather(band.clone(), &mut items, &mut starts)?;
            }
            for it in &items {
                ix.put(&mut c.buf, it.minor);
                c.flush_if_full()?;
            }
        }
        c.done()?;
        let h = npy_header(ix.descr, &[extent + 1]);
        zip.begin("indptr.npy", h.len() as u64 + (extent + 1) * ix.width)?;
        zip.write(&h)?;
        let mut c = Chunk::new(&mut zip);
        let mut sum = 0u64;
        ix.put(&mut c.buf, 0);
        for &l in &ro.lens {
            sum += l;
            ix.put(&mut c.buf, sum);
            c.flush_if_full()?;
        }
        c.done()?;
    }
    let format: &[u8] = match target {
        NpzLayout::Csc => b"csc",
        NpzLayout::Coo => b"coo",
        _ => b"csr",
    };
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

/// The index arrays' NumPy type: int32 when everything fits, else int64.
#[derive(Clone, Copy)]
struct Index {
    descr: &'static str,
    width: u64,
}

impl Index {
    #[inline]
    fn put(self, buf: &mut Vec<u8>, v: u64) {
        if self.width == 8 {
            buf.extend_from_slice(&(v as i64).to_le_bytes());
        } else {
            buf.extend_from_slice(&(v as i32).to_le_bytes());
        }
    }
}

/// One index array: coordinate `dim` (0: row, 1: column) of every entry,
/// in storage order.
fn coordinate_entry(
    a: &Matrix<'_>,
    coords: Coords<'_>,
    zip: &mut ZipWriter,
    name: &str,
    dim: usize,
    ix: Index,
    opts: &ExportOptions,
) -> MatrixResult<()> {
    let nnz = a.nnz();
    let h = npy_header(ix.descr, &[nnz]);
    zip.begin(name, h.len() as u64 + nnz * ix.width)?;
    zip.write(&h)?;
    let mut c = Chunk::new(zip);
    pass(a, opts.paging, |r| {
        coords.each(r, |_, i, j| {
            ix.put(&mut c.buf, if dim == 0 { i } else { j });
            Ok::<(), MatrixError>(())
        })?;
        Ok(c.flush_if_full()?)
    })?;
    Ok(c.done()?)
}
