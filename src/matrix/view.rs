//! A rank-2 tensor seen as a matrix, and how its entries are laid out.
//!
//! Everything in `matrix` goes through [`Matrix`]: it knows the shape, the
//! layout (sorted or unsorted COO, CSR, CSC: see [`Layout`]) and whether the bytes are a file mapping whose pages
//! may be released behind a sequential pass.

use super::error::{MatrixError, MatrixResult};
use crate::fs::output::FileId;
use crate::progress::Progress;
use crate::{
    DType, HurrayFile, element::Element, options::OutputLayout, read::CompressedTensor,
    read::CooTensor, read::Tensor,
};
use std::ops::Range;

/// How the entries of a matrix are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Layout {
    /// Coordinate list; `sorted` means row-major order without duplicates.
    Coo {
        /// The descriptor's is_sorted flag.
        sorted: bool,
    },
    /// Compressed sparse rows: row after row, `row_ptr` gives each row.
    Csr,
    /// Compressed sparse columns: column after column, `col_ptr` gives each.
    Csc,
}

/// A rank-2 tensor of an open file, used as a matrix.
#[derive(Clone, Copy, Debug)]
pub struct Matrix<'a> {
    t: Tensor<'a>,
    rows: u64,
    cols: u64,
    layout: Layout,
    /// The bytes are a read-only file mapping: pages may be dropped with
    /// `MADV_DONTNEED` and are read again from the file when touched.
    releasable: bool,
    /// The file the matrix is in, which no output of an operation on it
    /// may replace (`crate::fs::output`).
    source: Option<&'a FileId>,
    /// The file's progress, which passes over the matrix move.
    progress: Option<&'a Progress>,
}

impl<'a> Matrix<'a> {
    /// A matrix view of `t`, which must have rank 2. Its pages are never
    /// released (use [`Matrix::of_file`] for that).
    pub fn new(t: CooTensor<'a>) -> MatrixResult<Matrix<'a>> {
        Self::of_tensor(Tensor::Coo(t))
    }

    /// A matrix view of a tensor of any layout (COO of rank 2, CSR, CSC).
    pub fn of_tensor(t: Tensor<'a>) -> MatrixResult<Matrix<'a>> {
        Self::with_rank(t, "a matrix operation", 2, 2)
    }

    /// The first two dimensions of a tensor of rank `min..=max`.
    pub(crate) fn with_rank(
        t: Tensor<'a>,
        op: &'static str,
        min: usize,
        max: usize,
    ) -> MatrixResult<Matrix<'a>> {
        if t.as_coo().is_none() && t.as_compressed().is_none() {
            return Err(MatrixError::Crate(t.not_served(op, "COO, CSR and CSC")));
        }
        if t.rank() < min || t.rank() > max {
            return Err(MatrixError::Rank {
                op,
                tensor: t.name().to_string(),
                rank: t.rank(),
                needs: match (min, max) {
                    (2, 2) => "2",
                    (1, 2) => "1 or 2",
                    _ => "at least 2",
                },
            });
        }
        let s = t.shape();
        Ok(Matrix {
            t,
            rows: s[0],
            // A vector (rank 1, the exports' dense vectors) is one column:
            // its entries walk as (i, 0).
            cols: s.get(1).copied().unwrap_or(1),
            layout: match (t.as_coo(), t.layout()) {
                (Some(c), _) => Layout::Coo {
                    sorted: c.is_sorted(),
                },
                (None, OutputLayout::Csc) => Layout::Csc,
                (None, _) => Layout::Csr,
            },
            releasable: false,
            source: None,
            progress: None,
        })
    }

    /// The tensor `name` of `file` (its only tensor when `None`) as a
    /// matrix. When the file is memory-mapped, sequential passes may
    /// release the pages they are done with, so a file larger than memory
    /// streams through a bounded window.
    pub fn of_file(file: &'a HurrayFile, name: Option<&str>) -> MatrixResult<Matrix<'a>> {
        Ok(Matrix::of_tensor(pick(file, name)?)?.in_file(file))
    }

    /// The progress passes over this matrix move (a mapped file's).
    pub(crate) fn progress(&self) -> Option<&'a Progress> {
        self.progress
    }

    /// Allow page release when the tensor's buffers lie in `file`'s
    /// mapping; remember the file and its progress; outputs may not
    /// replace the file.
    pub(crate) fn in_file(mut self, file: &'a HurrayFile) -> Matrix<'a> {
        self.source = file.file_id();
        self.progress = file.progress_ref();
        self.releasable = match file.mapped_bytes() {
            Some(map) => {
                let (lo, hi) = (map.as_ptr() as usize, map.as_ptr() as usize + map.len());
                let inside = |b: &[u8]| {
                    let p = b.as_ptr() as usize;
                    b.is_empty() || (p >= lo && p + b.len() <= hi)
                };
                inside(self.values_bytes())
                    && inside(self.indices_bytes())
                    && self.compressed().is_none_or(|c| inside(c.pointers_bytes()))
            }
            None => false,
        };
        self
    }

    /// The file the matrix was taken from ([`Matrix::of_file`] of an
    /// opened file): the input an output of an operation on it may not
    /// replace.
    pub(crate) fn source(&self) -> Option<&'a FileId> {
        self.source
    }

    /// The tensor.
    pub fn tensor(&self) -> Tensor<'a> {
        self.t
    }

    /// The COO tensor, or [`MatrixError::LayoutNotSupported`] naming `op`
    /// for CSR/CSC (operations that read the coordinate list directly).
    pub(crate) fn coo(&self, op: &'static str) -> MatrixResult<CooTensor<'a>> {
        self.t
            .as_coo()
            .ok_or_else(|| MatrixError::LayoutNotSupported {
                op,
                tensor: self.t.name().to_string(),
                layout: self.t.layout().to_string().to_uppercase(),
            })
    }

    /// The CSR/CSC tensor, if it is one.
    pub(crate) fn compressed(&self) -> Option<CompressedTensor<'a>> {
        self.t.as_compressed()
    }

    /// The values as a typed slice (`T` must be the element type).
    pub(crate) fn values<T: Element>(&self) -> crate::Result<&'a [T]> {
        self.t.values()
    }

    /// Raw values buffer.
    pub(crate) fn values_bytes(&self) -> &'a [u8] {
        self.t.values_bytes()
    }

    /// Raw index buffer: the coordinates (COO) or the minor indices
    /// (CSR/CSC), in storage order.
    pub(crate) fn indices_bytes(&self) -> &'a [u8] {
        match (self.t.as_coo(), self.t.as_compressed()) {
            (Some(c), _) => c.indices_bytes(),
            (_, Some(c)) => c.indices_bytes(),
            // A matrix is COO, CSR or CSC (`with_rank`).
            (None, None) => &[],
        }
    }

    /// Number of rows.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Number of columns.
    pub fn cols(&self) -> u64 {
        self.cols
    }

    /// Stored entries.
    pub fn nnz(&self) -> u64 {
        self.t.nnz()
    }

    /// The layout of the entries.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.t.dtype()
    }

    /// True when the entries of a COO matrix are in row-major order.
    pub fn is_row_sorted(&self) -> bool {
        matches!(self.layout, Layout::Coo { sorted: true })
    }

    pub(crate) fn releasable(&self) -> bool {
        self.releasable
    }

    /// Bytes of the stored entries (values, indices, pointers).
    pub fn stored_bytes(&self) -> u64 {
        let ptr = self.compressed().map_or(0, |c| c.pointers_bytes().len());
        (self.values_bytes().len() + self.indices_bytes().len() + ptr) as u64
    }

    /// Refuse anything but a row-major sorted matrix.
    pub(crate) fn require_sorted(&self, op: &'static str, hint: &'static str) -> MatrixResult<()> {
        if self.is_row_sorted() {
            Ok(())
        } else {
            Err(MatrixError::NotSorted {
                op,
                tensor: self.t.name().to_string(),
                hint,
            })
        }
    }

    /// An error for stored content that breaks the format's rules (open
    /// checks structure only; `verify` finds these).
    pub(crate) fn corrupt(&self, entry: usize, detail: impl std::fmt::Display) -> MatrixError {
        MatrixError::Crate(crate::Error::invalid(
            format!("tensor {:?}", self.t.name()),
            0,
            format!("entry {entry}: {detail}; run verify for the full report"),
        ))
    }

    /// [`Matrix::corrupt`] for a problem found after reordering, where the
    /// entry's position is no longer known.
    pub(crate) fn corrupt_content(&self, detail: impl std::fmt::Display) -> MatrixError {
        MatrixError::Crate(crate::Error::invalid(
            format!("tensor {:?}", self.t.name()),
            0,
            format!("{detail}; run verify for the full report"),
        ))
    }
}

/// The tensor `name` of `file`, or its only tensor, of any layout.
pub(crate) fn pick<'a>(file: &'a HurrayFile, name: Option<&str>) -> MatrixResult<Tensor<'a>> {
    Ok(match name {
        Some(n) => file.tensor_view(n)?,
        None => file.only_tensor_view()?,
    })
}

/// `usize` of an extent, or a typed error.
pub(crate) fn to_usize(extent: u64) -> MatrixResult<usize> {
    usize::try_from(extent).map_err(|_| MatrixError::TooLarge { extent })
}

/// A stored value widened to f64 (exact for every type but 64-bit
/// integers beyond 2^53, which round).
#[inline(always)]
pub(crate) fn f64_of<T: Element>(v: T) -> f64 {
    v.to_value().to_f64()
}

/// Split `0..n` into consecutive ranges of `size` (the last may be shorter).
pub(crate) fn fixed_blocks(n: usize, size: usize) -> Vec<Range<usize>> {
    let size = size.max(1);
    (0..n.div_ceil(size))
        .map(|b| b * size..((b + 1) * size).min(n))
        .collect()
}

/// Run `$body` with `$v` bound to the tensor's values as a typed slice.
macro_rules! with_values {
    ($t:expr, |$v:ident| $body:expr) => {{
        let t = $t;
        $crate::with_element_type!(t.dtype(), T => {
            let $v = t.values::<T>()?;
            $body
        })
    }};
}
pub(crate) use with_values;
