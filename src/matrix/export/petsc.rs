//! PETSc binary matrix, as `MatLoad` reads it (and petsc4py's
//! `Mat().load`): big-endian throughout; `[MAT_FILE_CLASSID, rows, cols,
//! nnz]`, then every row's length, every column index (row by row, rising
//! within a row), every value as a float64. The integers are PetscInt: 32-bit
//! by default, 64-bit for PETSc built `--with-64-bit-indices`
//! ([`ExportOptions::petsc_int64`]). Needs a row-sorted matrix (entries row
//! by row); three streamed passes (row lengths, columns, values).

use super::super::error::{MatrixError, MatrixResult};
use super::super::output::Output;
use super::super::view::{f64_of, with_values, Matrix};
use super::{pass, ExportOptions, ExportSummary};
use std::path::Path;

/// PETSc's class id of a matrix in a binary file.
pub const MAT_FILE_CLASSID: i64 = 1211216;

pub(super) fn write(
    a: &Matrix<'_>,
    out: &Path,
    opts: &ExportOptions,
) -> MatrixResult<ExportSummary> {
    a.require_sorted(
        "PETSc export",
        "PETSc reads rows in order; assemble the matrix sorted",
    )?;
    let t = a.coo("export to PETSc")?;
    let (m, n, nnz) = (a.rows(), a.cols(), t.nnz());
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
    let ind = t.indices();
    let mut o = Output::create(out)?;
    let mut head = Vec::with_capacity(32);
    for v in [MAT_FILE_CLASSID as u64, m, n, nnz] {
        put(&mut head, v);
    }
    o.write(&head)?;

    // Row lengths: count the current row, emit it (and empty rows) when it ends.
    let (mut row, mut len) = (0u64, 0u64);
    pass(a, opts.paging, |r| {
        for (k, e) in ind[2 * r.start..2 * r.end].chunks_exact(2).enumerate() {
            if e[0] >= m || e[0] < row {
                return Err(a.corrupt(
                    r.start + k,
                    format_args!("row {} breaks the sorted order or the shape", e[0]),
                ));
            }
            while row < e[0] {
                put(o.buffer(), len);
                row += 1;
                len = 0;
            }
            len += 1;
        }
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
        for e in ind[2 * r.start..2 * r.end].chunks_exact(2) {
            put(buf, e[1]);
        }
        Ok(o.maybe_flush()?)
    })?;
    with_values!(t, |vals| {
        pass(a, opts.paging, |r| {
            let buf = o.buffer();
            for v in &vals[r] {
                buf.extend_from_slice(&f64_of(*v).to_be_bytes());
            }
            Ok(o.maybe_flush()?)
        })?
    });
    let bytes = o.commit()?;
    Ok(ExportSummary {
        entries: nnz,
        bytes,
    })
}
