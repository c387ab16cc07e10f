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
//!   32-bit indices by default, 64-bit on request.

mod mtx;
mod npz;
mod petsc;
mod reorder;
mod zip;

use super::error::{MatrixError, MatrixResult};
use super::output::Output;
use super::paging::{for_each_block, Paging};
use super::view::{fixed_blocks, Matrix};
use std::ops::Range;
use std::path::Path;

pub use npz::NpzLayout;

crate::vocab::vocabulary! {
    /// Target format of [`export`].
    pub enum Format ("export format") {
        /// MatrixMarket coordinate text (`.mtx`).
        Mtx => "mtx" | "matrixmarket" | "mm": "MatrixMarket coordinate text (1-based; --symmetric writes one triangle)",
        /// scipy sparse `.npz`.
        Npz => "npz" | "scipy": "scipy sparse .npz (what scipy.sparse.load_npz reads)",
        /// PETSc binary matrix.
        Petsc => "petsc": "PETSc binary matrix (MatLoad; 32-bit indices unless --petsc-int64)",
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
    /// COO): 16 bytes an entry, plus 8 bytes per row (column) for the
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
    if format == Format::Petsc && a.dtype().is_complex() {
        // The binary format has no flag for the scalar type: a real PETSc
        // build would read the parts as twice as many real values.
        return Err(MatrixError::Crate(crate::Error::Unsupported(format!(
            "a PETSc binary of {} values is not written (the format does not say its \
             scalar type); export to mtx or npz, which hold complex values",
            a.dtype()
        ))));
    }
    // Refused here, before any pass over the matrix, when `out` is its file.
    let o = Output::create(out, a.source().as_slice())?;
    // A damaged buffer is refused before anything is written (the
    // temporary output goes with `o`).
    a.tensor().check_checksums()?;
    match format {
        Format::Mtx => mtx::write(a, o, opts),
        Format::Npz => npz::write(a, o, opts),
        Format::Petsc => petsc::write(a, o, opts),
    }
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
    for_each_block(a, &fixed_blocks(a.nnz() as usize, block), paging, f)
}
