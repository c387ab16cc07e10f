//! PETSc binary matrix, as `MatLoad` reads it (and petsc4py's
//! `Mat().load`): big-endian throughout; `[MAT_FILE_CLASSID, rows, cols,
//! nnz]`, then every row's length, every column index (row by row, rising
//! within a row), every value as a PetscScalar: a float64, or for a complex
//! tensor a (real, imaginary) pair of float64, which is what a PETSc built
//! `--with-scalar-type=complex` reads (the file does not say which: a real
//! build cannot read a complex file). The integers are PetscInt: 32-bit
//! by default, 64-bit for PETSc built `--with-64-bit-indices`
//! ([`ExportOptions::petsc_int64`]). Every layout: a sorted COO or a CSR
//! matrix (entries row by row) takes three streamed passes (row lengths,
//! columns, values); a CSC or unsorted COO one is put in row order with
//! bounded memory by [`Reorder`] (a counting pass, then one pass per band
//! of rows).

use super::super::entries::Coords;
use super::super::error::{MatrixError, MatrixResult};
use super::super::output::Output;
use super::super::view::{Layout, Matrix, f64_of, with_values};
use super::reorder::{Keep, Reorder};
use super::{ExportOptions, ExportSummary, pass};
use crate::DType;
use crate::element::Value;

/// PETSc's class id of a matrix in a binary file.
pub const MAT_FILE_CLASSID: i64 = 1211216;

pub(super) fn write(
    a: &Matrix<'_>,
    mut o: Output,
    opts: &ExportOptions,
) -> MatrixResult<ExportSummary> {
    let (m, n, nnz) = (a.rows(), a.cols(), a.nnz());
    let int64 = opts.petsc_int64;
    let limit = if int64 {
        i64::MAX as u64
    } else {
        i32::MAX as u64
    };
    let hint = if int64 {
        "the matrix is too large even for 64-bit PETSc indices"
    } else {
        "use 64-bit indices (--petsc-int64) with a PETSc built --with-64-bit-indices"
    };
    for (what, v) in [("rows", m), ("columns", n), ("nnz", nnz)] {
        if v > limit {
            return Err(MatrixError::IndexTooLarge {
                what,
                value: v,
                hint,
            });
        }
    }
    let put = |buf: &mut Vec<u8>, v: u64| {
        if int64 {
            buf.extend_from_slice(&(v as i64).to_be_bytes());
        } else {
            buf.extend_from_slice(&(v as i32).to_be_bytes());
        }
    };
    let mut head = Vec::with_capacity(32);
    for v in [MAT_FILE_CLASSID as u64, m, n, nnz] {
        put(&mut head, v);
    }
    let iw = if int64 { 8u128 } else { 4 };
    let sw = scalar_width(a.dtype()) as u128;
    let planned = head.len() as u128 + (m as u128 + nnz as u128) * iw + nnz as u128 * sw;
    o.check_space(
        u64::try_from(planned).unwrap_or(u64::MAX),
        &format!("{m} row lengths, {nnz} entries"),
    )?;
    o.write(&head)?;
    if a.is_row_sorted() || a.layout() == Layout::Csr {
        in_storage_order(a, &mut o, put, opts)?;
    } else {
        let iw = if int64 { 8 } else { 4 };
        reordered(a, &mut o, put, head.len() as u64 + (m + nnz) * iw, opts)?;
    }
    let bytes = o.commit()?;
    Ok(ExportSummary {
        entries: nnz,
        bytes,
    })
}

/// Entries already row by row (sorted COO, CSR): three streamed passes
/// (row lengths, columns, values).
fn in_storage_order(
    a: &Matrix<'_>,
    o: &mut Output,
    put: impl Fn(&mut Vec<u8>, u64),
    opts: &ExportOptions,
) -> MatrixResult<()> {
    let coords = Coords::of(a)?;
    let m = a.rows();
    // Row lengths: count the current row, emit it (and empty rows) when it ends.
    let (mut row, mut len) = (0u64, 0u64);
    pass(a, opts.paging, |r| {
        coords.each(r, |p, i, _| {
            if i >= m || i < row {
                return Err(a.corrupt(
                    p,
                    format_args!("row {i} breaks the sorted order or the shape"),
                ));
            }
            while row < i {
                put(o.buffer(), len);
                row += 1;
                len = 0;
            }
            len += 1;
            Ok(())
        })?;
        Ok(o.maybe_flush()?)
    })?;
    while row < m {
        put(o.buffer(), len);
        row += 1;
        len = 0;
        o.maybe_flush()?;
    }
    pass(a, opts.paging, |r| {
        let buf = o.buffer();
        coords.each(r, |_, _, j| {
            put(buf, j);
            Ok::<(), MatrixError>(())
        })?;
        Ok(o.maybe_flush()?)
    })?;
    let dtype = a.dtype();
    if dtype.is_complex() {
        let (w, raw) = (dtype.width(), a.values_bytes());
        pass(a, opts.paging, |r| {
            let buf = o.buffer();
            for p in r {
                put_scalar(buf, dtype.decode(&raw[p * w..(p + 1) * w]));
            }
            Ok(o.maybe_flush()?)
        })?;
        return Ok(());
    }
    with_values!(a, |vals| {
        pass(a, opts.paging, |r| {
            let buf = o.buffer();
            for v in &vals[r] {
                buf.extend_from_slice(&f64_of(*v).to_be_bytes());
            }
            Ok(o.maybe_flush()?)
        })?
    });
    Ok(())
}

/// Entries in another order (CSC, unsorted COO): row lengths from a
/// counting pass, then bands of rows gathered in row order (see
/// [`Reorder`]); each band's columns go on in sequence, its values at
/// their place in the values section (`values_at`, known in advance).
fn reordered(
    a: &Matrix<'_>,
    o: &mut Output,
    put: impl Fn(&mut Vec<u8>, u64),
    values_at: u64,
    opts: &ExportOptions,
) -> MatrixResult<()> {
    let ro = Reorder::new(a, 0, Keep::All, opts.paging)?;
    for &l in &ro.lens {
        put(o.buffer(), l);
        o.maybe_flush()?;
    }
    let dtype = a.dtype();
    let w = dtype.width();
    let (mut items, mut starts) = (Vec::new(), Vec::new());
    let mut vbuf: Vec<u8> = Vec::with_capacity(VALUE_CHUNK * scalar_width(dtype));
    let mut at = values_at;
    for band in ro.bands(opts.reorder_budget, None) {
        ro.gather(band, &mut items, &mut starts)?;
        for it in &items {
            put(o.buffer(), it.minor);
            o.maybe_flush()?;
        }
        for chunk in items.chunks(VALUE_CHUNK) {
            vbuf.clear();
            for it in chunk {
                put_scalar(&mut vbuf, dtype.decode(&it.raw[..w]));
            }
            o.write_at(at, &vbuf)?;
            at += vbuf.len() as u64;
        }
    }
    Ok(())
}

/// Values converted per positional write.
const VALUE_CHUNK: usize = 1 << 17;

/// Bytes of one PetscScalar for values of `dtype`: a float64, or a pair of
/// them for a complex type.
pub(super) fn scalar_width(dtype: DType) -> usize {
    if dtype.is_complex() { 16 } else { 8 }
}

/// `v` as a big-endian PetscScalar in the first [`scalar_width`] bytes: a
/// float64, or (real, imaginary) for a complex value (each part widened
/// exactly from complex64's float32).
pub(super) fn scalar_bytes(v: Value) -> [u8; 16] {
    let mut b = [0u8; 16];
    match v {
        Value::Complex(re, im) => {
            b[..8].copy_from_slice(&re.to_be_bytes());
            b[8..].copy_from_slice(&im.to_be_bytes());
        }
        v => b[..8].copy_from_slice(&v.to_f64().to_be_bytes()),
    }
    b
}

fn put_scalar(buf: &mut Vec<u8>, v: Value) {
    let w = if matches!(v, Value::Complex(..)) {
        16
    } else {
        8
    };
    buf.extend_from_slice(&scalar_bytes(v)[..w]);
}
