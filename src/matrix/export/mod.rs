//! Exports of a stored matrix to the formats other programs read, each
//! streamed from the mapped file with bounded memory into an output that
//! appears whole or not at all (temporary file, fsync, rename) and may not
//! be the matrix's own file.
//!
//! - [`Format::Mtx`]: MatrixMarket coordinate, `real` or `integer` by the
//!   element type, `general` or (checked) `symmetric`; 1-based; floats in
//!   their shortest round-trip form, so they read back bit for bit.
//! - [`Format::Npz`]: what `scipy.sparse.save_npz(..., compressed=False)`
//!   writes: a stored zip (zip64 when large) of `.npy` arrays, read back by
//!   `scipy.sparse.load_npz` as a `csr_array` or `coo_array`.
//! - [`Format::Petsc`]: PETSc's binary matrix format (what `MatLoad` reads),
//!   32-bit indices by default, 64-bit on request; a rank-1 tensor as a
//!   PETSc `Vec` (what `VecLoad` reads), dense. PETSc stores float64, so an
//!   integer value beyond 2^53 in magnitude is refused
//!   ([`MatrixError::NotExactInDouble`]) rather than rounded. A complex
//!   tensor's values go as (real, imaginary) float64 pairs, the scalars of
//!   a PETSc built `--with-scalar-type=complex` (the file does not say its
//!   scalar type: only a complex build reads it).
//! - [`Format::Npy`]: a rank-1 tensor as a dense NumPy `.npy` array of its
//!   element type, zeros where no entry is stored.
//!
//! [`export_file`] takes a tensor of a file by name, a matrix or a vector;
//! [`export`] takes a [`Matrix`].

mod mtx;
mod npz;
mod petsc;
mod reorder;
mod zip;

mod vector;

use super::entries::Coords;
use super::error::{MatrixError, MatrixResult};
use super::output::Output;
use super::paging::{Paging, for_each_block};
use super::view::{Matrix, fixed_blocks, pick};
use crate::progress::Step;
use crate::{HurrayFile, Value};
use std::ops::Range;
use std::path::Path;

pub use npz::NpzLayout;
pub use petsc::MAT_FILE_CLASSID;
pub use vector::VEC_FILE_CLASSID;

crate::vocab::vocabulary! {
    /// Target format of [`export`].
    pub enum Format ("export format") {
        /// MatrixMarket coordinate text (`.mtx`).
        Mtx => "mtx" | "matrixmarket" | "mm": "MatrixMarket coordinate text (1-based; --symmetric writes one triangle)",
        /// scipy sparse `.npz`.
        Npz => "npz" | "scipy": "scipy sparse .npz (what scipy.sparse.load_npz reads)",
        /// PETSc binary matrix.
        Petsc => "petsc": "PETSc binary: a matrix (MatLoad) or a rank-1 tensor as a Vec (VecLoad); 32-bit indices unless --petsc-int64; complex values for a PETSc built with complex scalars",
        /// NumPy `.npy` dense vector (a rank-1 tensor).
        Npy => "npy" | "numpy": "NumPy .npy dense vector of a rank-1 tensor (zeros where no entry)",
    }
}

/// Options of [`export`].
#[derive(Clone, Copy, Debug, Default)]
pub struct ExportOptions {
    /// MatrixMarket: check that the matrix is symmetric (refusing it
    /// otherwise) and write the lower triangle with the `symmetric` header.
    pub symmetric: bool,
    /// `.npz`: which scipy array to write.
    pub npz_layout: NpzLayout,
    /// PETSc: 64-bit indices (for PETSc configured `--with-64-bit-indices`).
    pub petsc_int64: bool,
    /// Page handling of a mapped file.
    pub paging: Paging,
    /// Bytes of entries held at once when the format's order is not the
    /// stored one (PETSc and `.npz` CSR from CSC or unsorted COO, `.npz`
    /// CSC from COO or CSR, the symmetric check of anything but a sorted
    /// COO): 24 bytes an entry, plus 8 bytes per row (column) for the
    /// whole export. 0: 64 MiB.
    pub reorder_budget: usize,
    /// `.npz`: write zip64 records for sizes and offsets from this many
    /// bytes on (0: from 4 GiB, where zip needs them). A small value makes
    /// a small archive zip64, to test readers.
    pub zip64_at: u64,
}

/// What [`export`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportSummary {
    /// Entries written (one triangle for a symmetric MatrixMarket file).
    pub entries: u64,
    /// Bytes of the output file.
    pub bytes: u64,
}

/// Write the tensor `name` of `file` (its only tensor when `None`) to
/// `out` in `format`: a matrix (rank 2) to any format but `.npy`, a vector
/// (rank 1) to `.npy` or PETSc. Its pages may be released behind the
/// passes, as with [`Matrix::of_file`].
pub fn export_file(
    file: &HurrayFile,
    name: Option<&str>,
    format: Format,
    out: &Path,
    opts: &ExportOptions,
) -> MatrixResult<ExportSummary> {
    let a = Matrix::with_rank(pick(file, name)?, "export", 1, 2)?.in_file(file);
    let r = export(&a, format, out, opts);
    file.progress().idle();
    r
}

/// Write `a` to `out` in `format`. An `out` that names the file `a` was
/// taken from ([`Matrix::of_file`], through links too) is
/// [`crate::Error::OutputIsInput`], before anything is written.
pub fn export(
    a: &Matrix<'_>,
    format: Format,
    out: &Path,
    opts: &ExportOptions,
) -> MatrixResult<ExportSummary> {
    if opts.symmetric && format != Format::Mtx {
        return Err(MatrixError::Options(
            "symmetric output is a MatrixMarket option".into(),
        ));
    }
    let vector = a.tensor().rank() == 1;
    let refuse = |needs, hint| {
        Err(MatrixError::ExportRank {
            format: format.name(),
            tensor: a.tensor().name().to_string(),
            rank: a.tensor().rank(),
            needs,
            hint,
        })
    };
    match format {
        Format::Npy if !vector => {
            return refuse(
                "1",
                "a .npy export is a dense vector; write a matrix to npz (scipy), mtx or petsc",
            );
        }
        Format::Mtx | Format::Npz if vector => {
            return refuse("2", "write a vector to npy (NumPy) or petsc (a PETSc Vec)");
        }
        _ => {}
    }
    // Refused here, before any pass over the matrix, when `out` is its file.
    let o = Output::create(out, a.source().as_slice())?;
    // A damaged buffer is refused before anything is written (the
    // temporary output goes with `o`).
    a.tensor().check_checksums()?;
    if format == Format::Petsc {
        exact_in_f64(a, "PETSc", opts.paging)?;
    }
    match format {
        Format::Mtx => mtx::write(a, o, opts),
        Format::Npz => npz::write(a, o, opts),
        Format::Petsc if vector => vector::write_petsc(a, o, opts),
        Format::Petsc => petsc::write(a, o, opts),
        Format::Npy => vector::write_npy(a, o, opts),
    }
}

/// Refuse, before anything is written, a 64-bit integer value beyond 2^53
/// in magnitude: `format` keeps float64 values and would round it.
/// Narrower types and floats pass without a pass over the values.
fn exact_in_f64(a: &Matrix<'_>, format: &'static str, paging: Paging) -> MatrixResult<()> {
    let dtype = a.dtype();
    if dtype.is_float() || dtype.width() < 8 {
        return Ok(());
    }
    const EXACT: u64 = 1 << 53;
    let w = dtype.width();
    let vals = a.values_bytes();
    pass(a, paging, |r| {
        for p in r {
            let value = match dtype.decode(&vals[p * w..(p + 1) * w]) {
                Value::Int(v) if v.unsigned_abs() > EXACT => v as i128,
                Value::UInt(v) if v > EXACT => v as i128,
                _ => continue,
            };
            let mut index = String::new();
            Coords::of(a)?.each(p..p + 1, |_, i, j| {
                index = if a.tensor().rank() == 1 {
                    format!("[{i}]")
                } else {
                    format!("({i}, {j})")
                };
                Ok::<(), MatrixError>(())
            })?;
            return Err(MatrixError::NotExactInDouble {
                format,
                tensor: a.tensor().name().to_string(),
                entry: p as u64,
                index,
                value,
                exact: if a.tensor().rank() == 1 {
                    "npy"
                } else {
                    "mtx or npz"
                },
            });
        }
        Ok(())
    })
}

/// Entries per block of an export pass.
const PASS_BLOCK: usize = 1 << 16;

/// One pass over all entries in storage order, a block at a time.
fn pass(
    a: &Matrix<'_>,
    paging: Paging,
    f: impl FnMut(Range<usize>) -> MatrixResult<()>,
) -> MatrixResult<()> {
    pass_blocks(a, paging, PASS_BLOCK, f)
}

/// [`pass`] with blocks of `block` entries.
fn pass_blocks(
    a: &Matrix<'_>,
    paging: Paging,
    block: usize,
    f: impl FnMut(Range<usize>) -> MatrixResult<()>,
) -> MatrixResult<()> {
    // Each pass a step of its own: a second pass shows as the second.
    if let Some(p) = a.progress() {
        p.start(Step::Export, a.stored_bytes());
    }
    for_each_block(a, &fixed_blocks(a.nnz() as usize, block), paging, f)
}
