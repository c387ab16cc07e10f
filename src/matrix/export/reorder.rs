//! Entries of any layout in row-major (or column-major) order with bounded
//! memory, for the exports whose format fixes the order (PETSc, `.npz`
//! CSR/CSC, the symmetric MatrixMarket check) when the stored order is a
//! different one (CSC, unsorted COO).
//!
//! A counting pass gives every major index (row, or column for `dim` 1)
//! its length: 8 bytes per major index, held for the whole export. Then
//! the majors are cut into bands whose entries fit the budget (24 bytes an
//! entry: its minor index and its raw value), and each band is gathered by
//! one more streamed pass over all entries, placing each entry at its
//! major's cursor, and sorted within each major when the source order
//! left it unsorted (unsorted COO). Memory: 8 bytes per major index plus
//! the budget (one major longer than the budget gets a band of its own,
//! which is then its size). Reading: the file once per band, so
//! `ceil(24 nnz / budget) + 1` passes in all.

use super::super::entries::Coords;
use super::super::error::{MatrixError, MatrixResult};
use super::super::paging::Paging;
use super::super::view::{Matrix, to_usize};
use super::pass;
use std::ops::Range;

/// Bytes of one gathered entry.
pub(super) const ITEM_BYTES: usize = std::mem::size_of::<Item>();

/// Default bytes of a band.
pub(super) const DEFAULT_BUDGET: usize = 64 << 20;

/// One gathered entry: its minor index and its value's little-endian bytes
/// (the element width, zero-padded to 16: complex128 is the widest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Item {
    pub(super) minor: u64,
    pub(super) raw: [u8; 16],
}

/// Which entries a reordering keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Keep {
    All,
    /// `j <= i`: the lower triangle with the diagonal.
    LowerAndDiagonal,
    /// `j > i`.
    StrictlyUpper,
}

impl Keep {
    #[inline]
    fn keeps(self, i: u64, j: u64) -> bool {
        match self {
            Keep::All => true,
            Keep::LowerAndDiagonal => j <= i,
            Keep::StrictlyUpper => j > i,
        }
    }
}

/// The kept entries of `a` by major index `dim` (0: rows, 1: columns).
pub(super) struct Reorder<'m, 'a> {
    a: &'m Matrix<'a>,
    coords: Coords<'a>,
    paging: Paging,
    dim: usize,
    keep: Keep,
    /// Kept entries per major index.
    pub(super) lens: Vec<u64>,
    /// Bytes of the values buffer per entry.
    width: usize,
}

impl<'m, 'a> Reorder<'m, 'a> {
    /// Count the kept entries of every major index (one pass; checks every
    /// coordinate against the shape).
    pub(super) fn new(
        a: &'m Matrix<'a>,
        dim: usize,
        keep: Keep,
        paging: Paging,
    ) -> MatrixResult<Self> {
        let coords = Coords::of(a)?;
        let (m, n) = (a.rows(), a.cols());
        let extent = to_usize(if dim == 0 { m } else { n })?;
        let mut lens: Vec<u64> = crate::matrix::memory::try_filled(
            extent as u64,
            0,
            "the entry counts per row (column) of a reordering export",
        )?;
        pass(a, paging, |r| {
            coords.each(r, |p, i, j| {
                if i >= m || j >= n {
                    return Err(a.corrupt(p, format_args!("coordinate ({i}, {j}) is out of range")));
                }
                if keep.keeps(i, j) {
                    lens[if dim == 0 { i } else { j } as usize] += 1;
                }
                Ok(())
            })
        })?;
        Ok(Reorder {
            a,
            coords,
            paging,
            dim,
            keep,
            lens,
            width: a.dtype().width(),
        })
    }

    /// Kept entries in all.
    pub(super) fn total(&self) -> u64 {
        self.lens.iter().sum()
    }

    /// Consecutive majors whose entries (of this reordering and of `with`,
    /// when two are gathered together) fit `budget` bytes; a major too
    /// long alone gets its own band. Covers every major.
    pub(super) fn bands(&self, budget: usize, with: Option<&[u64]>) -> Vec<Range<usize>> {
        let cap = (if budget == 0 { DEFAULT_BUDGET } else { budget } / ITEM_BYTES).max(1) as u64;
        let len = |k: usize| self.lens[k] + with.map_or(0, |w| w[k]);
        let mut out = Vec::new();
        let (mut start, mut sum) = (0usize, 0u64);
        for k in 0..self.lens.len() {
            let l = len(k);
            if k > start && sum + l > cap {
                out.push(start..k);
                start = k;
                sum = 0;
            }
            sum += l;
        }
        if start < self.lens.len() || out.is_empty() {
            out.push(start..self.lens.len());
        }
        out
    }

    /// The kept entries of majors `band`, major after major, each major's
    /// sorted by minor index, into `out` (replaced); `starts` gets each
    /// major's offset in `out` (band length + 1 entries). One pass.
    pub(super) fn gather(
        &self,
        band: Range<usize>,
        out: &mut Vec<Item>,
        starts: &mut Vec<usize>,
    ) -> MatrixResult<()> {
        starts.clear();
        starts.push(0);
        for k in band.clone() {
            let s = starts[starts.len() - 1] + to_usize(self.lens[k])?;
            starts.push(s);
        }
        let total = starts[starts.len() - 1];
        out.clear();
        crate::matrix::memory::check_fits(
            total as u128 * std::mem::size_of::<Item>() as u128,
            "one band of a reordering export",
        )?;
        out.try_reserve_exact(total)
            .map_err(|_| MatrixError::TooLarge {
                extent: total as u64,
            })?;
        out.resize(total, Item::default());
        let mut cursor: Vec<usize> = starts[..starts.len() - 1].to_vec();
        let (lo, hi) = (band.start as u64, band.end as u64);
        let vals = self.a.values_bytes();
        let w = self.width;
        let (dim, keep) = (self.dim, self.keep);
        pass(self.a, self.paging, |r| {
            self.coords.each(r, |p, i, j| {
                let (major, minor) = if dim == 0 { (i, j) } else { (j, i) };
                if major < lo || major >= hi || !keep.keeps(i, j) {
                    return Ok(());
                }
                let k = (major - lo) as usize;
                let slot = cursor[k];
                // More entries than counted: the file changed under us.
                if slot >= starts[k + 1] {
                    return Err(self.a.corrupt(p, "the entries changed between two passes"));
                }
                let mut raw = [0u8; 16];
                raw[..w].copy_from_slice(&vals[p * w..p * w + w]);
                out[slot] = Item { minor, raw };
                cursor[k] = slot + 1;
                Ok(())
            })
        })?;
        for (k, s) in starts.windows(2).enumerate() {
            let seg = &mut out[s[0]..s[1]];
            if !seg.windows(2).all(|w| w[0].minor < w[1].minor) {
                seg.sort_unstable_by_key(|e| e.minor);
                if let Some(d) = seg.windows(2).find(|w| w[0].minor == w[1].minor) {
                    let major = band.start + k;
                    let (i, j) = if dim == 0 {
                        (major as u64, d[0].minor)
                    } else {
                        (d[0].minor, major as u64)
                    };
                    return Err(self
                        .a
                        .corrupt_content(format_args!("coordinate ({i}, {j}) is stored twice")));
                }
            }
        }
        Ok(())
    }
}
