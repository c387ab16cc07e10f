//! [`Tensor`]: one tensor of an open file, whatever its layout (COO, CSR,
//! CSC), with the operations every layout has; the layout-specific views
//! ([`CooTensor`], [`CompressedTensor`]) are inside.

use super::{CompressedTensor, CooTensor, CsfTensor, Problem};
use crate::element::{DType, Element, Value};
use crate::error::Result;
use crate::hurray::Statistics;
use crate::options::OutputLayout;
use std::ops::Range;

/// A view of one tensor of an open file, of any layout the reader handles.
#[derive(Clone, Copy, Debug)]
pub enum Tensor<'a> {
    /// Coordinate list (layout 0x06), any rank.
    Coo(CooTensor<'a>),
    /// CSR (0x07) or CSC (0x08), rank 2.
    Compressed(CompressedTensor<'a>),
    /// CSF (0x09), rank 3 and up.
    Csf(CsfTensor<'a>),
}

impl<'a> Tensor<'a> {
    /// Tensor name.
    pub fn name(&self) -> &'a str {
        match self {
            Tensor::Coo(t) => t.name(),
            Tensor::Compressed(t) => t.name(),
            Tensor::Csf(t) => t.name(),
        }
    }

    /// The layout.
    pub fn layout(&self) -> OutputLayout {
        match self {
            Tensor::Coo(_) => OutputLayout::Coo,
            Tensor::Compressed(t) => t.layout(),
            Tensor::Csf(_) => OutputLayout::Csf,
        }
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        match self {
            Tensor::Coo(t) => t.dtype(),
            Tensor::Compressed(t) => t.dtype(),
            Tensor::Csf(t) => t.dtype(),
        }
    }

    /// Shape.
    pub fn shape(&self) -> &'a [u64] {
        match self {
            Tensor::Coo(t) => t.shape(),
            Tensor::Compressed(t) => t.shape(),
            Tensor::Csf(t) => t.shape(),
        }
    }

    /// Rank.
    pub fn rank(&self) -> usize {
        self.shape().len()
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> u64 {
        match self {
            Tensor::Coo(t) => t.nnz(),
            Tensor::Compressed(t) => t.nnz(),
            Tensor::Csf(t) => t.nnz(),
        }
    }

    /// The statistics section, when present.
    pub fn statistics(&self) -> Option<&'a Statistics> {
        match self {
            Tensor::Coo(t) => t.statistics(),
            Tensor::Compressed(t) => t.statistics(),
            Tensor::Csf(t) => t.statistics(),
        }
    }

    /// Raw little-endian values buffer.
    pub fn values_bytes(&self) -> &'a [u8] {
        match self {
            Tensor::Coo(t) => t.values_bytes(),
            Tensor::Compressed(t) => t.values_bytes(),
            Tensor::Csf(t) => t.values_bytes(),
        }
    }

    /// Value at `idx`: the stored value, or a zero of the tensor's type.
    pub fn get(&self, idx: &[u64]) -> Result<Value> {
        match self {
            Tensor::Coo(t) => t.get(idx),
            Tensor::Compressed(t) => t.get(idx),
            Tensor::Csf(t) => t.get(idx),
        }
    }

    /// Check the content in O(nnz) with bounded memory (see
    /// [`CooTensor::verify`] and [`CompressedTensor::verify`]). Empty = OK.
    pub fn verify(&self) -> Vec<Problem> {
        match self {
            Tensor::Coo(t) => t.verify(),
            Tensor::Compressed(t) => t.verify(),
            Tensor::Csf(t) => t.verify(),
        }
    }

    /// Check the xxh3 checksums our writer stores for the buffers, once
    /// per open file (later calls return the remembered verdict in O(1)):
    /// a damaged buffer is an [`crate::Error::InvalidFile`] naming the
    /// buffer, the tensor and the file; a tensor without stored checksums
    /// (another writer's file) passes. See [`CooTensor::check_checksums`].
    pub fn check_checksums(&self) -> Result<()> {
        self.check_checksums_with(false)
    }

    /// [`Tensor::check_checksums`]; `release`: give back the pages behind
    /// the hash whatever the tensor's size (a reader within a budget).
    pub(crate) fn check_checksums_with(&self, release: bool) -> Result<()> {
        match self {
            Tensor::Coo(t) => t.check_checksums_with(release),
            Tensor::Compressed(t) => t.check_checksums_with(release),
            Tensor::Csf(t) => t.check_checksums_with(release),
        }
    }

    /// How many buffers carry a stored checksum (0: none, as in files of
    /// the reference writer; `verify` then checks the content rules only).
    pub fn stored_checksums(&self) -> usize {
        match self {
            Tensor::Coo(t) => t.stored_checksums(),
            Tensor::Compressed(t) => t.stored_checksums(),
            Tensor::Csf(t) => t.stored_checksums(),
        }
    }

    /// Buffers hashed by [`Tensor::check_checksums`] since the file was
    /// opened (a test hook: a second whole pass hashes none).
    #[doc(hidden)]
    pub fn checksum_hashes(&self) -> u64 {
        match self {
            Tensor::Coo(t) => t.checksum_hashes(),
            Tensor::Compressed(t) => t.checksum_hashes(),
            Tensor::Csf(t) => t.checksum_hashes(),
        }
    }

    /// The COO view, if the tensor is COO.
    pub fn as_coo(&self) -> Option<CooTensor<'a>> {
        match self {
            Tensor::Coo(t) => Some(*t),
            Tensor::Compressed(_) | Tensor::Csf(_) => None,
        }
    }

    /// The CSR/CSC view, if the tensor is CSR or CSC.
    pub fn as_compressed(&self) -> Option<CompressedTensor<'a>> {
        match self {
            Tensor::Coo(_) | Tensor::Csf(_) => None,
            Tensor::Compressed(t) => Some(*t),
        }
    }

    /// The CSF view, if the tensor is CSF.
    pub fn as_csf(&self) -> Option<CsfTensor<'a>> {
        match self {
            Tensor::Csf(t) => Some(*t),
            _ => None,
        }
    }

    /// The refusal of `op` on this tensor's layout, naming the layouts
    /// `op` serves: what an operation that serves some layouts says for
    /// any other, without naming the others.
    pub fn not_served(&self, op: &str, served: &'static str) -> crate::Error {
        crate::Error::LayoutNotServed {
            tensor: self.name().to_string(),
            layout: crate::layout::Layout::from(self.layout()).described(),
            op: op.to_string(),
            served,
        }
    }

    /// How the tensor stores its entries, in one line: the layout's
    /// description, or "COO, not sorted" for a COO tensor that is not.
    pub fn description(&self) -> &'static str {
        match self {
            Tensor::Coo(c) if !c.is_sorted() => "COO, not sorted",
            _ => self.layout().description(),
        }
    }

    /// A CSF tensor's mode order (the dimension stored at each level).
    pub fn mode_order(&self) -> Option<&'a [u32]> {
        self.as_csf().map(|c| c.mode_order())
    }

    /// The layout's buffers in file order, as the spec names them, with
    /// their sizes in bytes: values and indices (COO); values, the minor
    /// indices and the pointers (CSR: `col_indices`, `row_ptr`; CSC:
    /// `row_indices`, `col_ptr`); values, then `pos_L` and `crd_L` per
    /// level (CSF).
    pub fn buffer_sizes(&self) -> Vec<(&'static str, u64)> {
        let sizes: Vec<u64> = match self {
            Tensor::Coo(c) => {
                let d = c.descriptor();
                vec![d.values.byte_size, d.indices.byte_size]
            }
            Tensor::Compressed(c) => {
                let d = c.descriptor();
                vec![
                    d.values.byte_size,
                    d.indices.byte_size,
                    d.pointers.byte_size,
                ]
            }
            Tensor::Csf(c) => {
                let d = c.descriptor();
                let levels = d
                    .levels
                    .iter()
                    .flat_map(|(pos, crd)| [pos.byte_size, crd.byte_size]);
                std::iter::once(d.values.byte_size).chain(levels).collect()
            }
        };
        // The names are the layout's (the checksums' KV keys use them too).
        self.layout()
            .buffer_names()
            .iter()
            .copied()
            .zip(sizes)
            .collect()
    }

    /// The layout descriptor's bytes, as a writer puts them in the file.
    pub fn encoded_descriptor(&self) -> Vec<u8> {
        match self {
            Tensor::Coo(c) => c.descriptor().encode(),
            Tensor::Compressed(c) => c.descriptor().encode(),
            Tensor::Csf(c) => c.descriptor().encode(),
        }
    }

    /// The values as `T`, which must be the tensor's element type (else
    /// [`crate::Error::TypeMismatch`]), in storage order, zero-copy.
    pub fn values<T: Element>(&self) -> Result<&'a [T]> {
        match self {
            Tensor::Coo(t) => t.values(),
            Tensor::Compressed(t) => t.values(),
            Tensor::Csf(t) => t.values(),
        }
    }

    /// Whether the entries are stored in row-major order without
    /// duplicates: a sorted COO tensor, a CSR matrix, a CSF tensor in the
    /// identity mode order.
    pub fn is_row_major(&self) -> bool {
        match self {
            Tensor::Coo(t) => t.is_sorted(),
            Tensor::Compressed(t) => t.major_dim() == 0,
            Tensor::Csf(t) => t
                .mode_order()
                .iter()
                .enumerate()
                .all(|(l, &d)| d as usize == l),
        }
    }

    /// The entries under the leading coordinates `prefix`, given in storage
    /// order (COO and CSR: dimension order; CSC: column first; CSF: its
    /// mode order), a contiguous range of entries: a row, a fibre, a
    /// slice. A COO tensor must be sorted.
    pub fn prefix_range(&self, prefix: &[u64]) -> Result<Range<u64>> {
        match self {
            Tensor::Coo(t) => t.prefix_range(prefix),
            Tensor::Compressed(t) => t.prefix_range(prefix),
            Tensor::Csf(t) => t.fiber(prefix),
        }
    }

    /// The coordinates of entries `first..`, as many as `out` holds
    /// (`rank` words each, dimension order; entries in storage order).
    /// Entries past nnz are [`crate::Error::PositionOutOfRange`].
    pub fn entry_coordinates(&self, first: u64, out: &mut [u64]) -> Result<()> {
        let rank = self.rank();
        let n = (out.len() / rank.max(1)) as u64;
        let end = first.saturating_add(n);
        if end > self.nnz() {
            return Err(crate::Error::PositionOutOfRange {
                position: vec![end],
                dim: 0,
                index: end,
                extent: self.nnz(),
            });
        }
        match self {
            Tensor::Coo(t) => {
                let (a, b) = (first as usize * rank, end as usize * rank);
                out[..b - a].copy_from_slice(&t.indices()[a..b]);
            }
            Tensor::Compressed(t) => t.entry_coordinates(first, &mut out[..2 * n as usize])?,
            Tensor::Csf(t) => {
                for (k, e) in out.chunks_exact_mut(rank).enumerate() {
                    e.copy_from_slice(&t.coordinate(first + k as u64)?);
                }
            }
        }
        Ok(())
    }

    /// Every entry's coordinates by dimension: `rank` rows of `nnz` words,
    /// row `d` along dimension `d`, entries in storage order (scipy's and
    /// pydata's `coords`).
    pub fn coordinates_by_dimension(&self) -> Result<Vec<u64>> {
        match self {
            Tensor::Coo(t) => {
                let (nnz, rank) = (t.nnz() as usize, t.rank());
                let src = t.indices();
                let mut v = super::room_for_words(nnz as u64 * rank as u64, "the coordinates")?;
                // One row per dimension, written in order (no zero fill).
                for d in 0..rank {
                    v.extend(src.chunks_exact(rank).map(|e| e[d]));
                }
                Ok(v)
            }
            Tensor::Compressed(t) => t.coordinates_by_dimension(),
            Tensor::Csf(t) => t.coordinates_by_dimension(),
        }
    }

    /// Call `f(coordinate, value)` for every entry in storage order, until
    /// it returns an error (returned). A broken CSR/CSC pointer is an
    /// error too (converted with `From`), and so is a buffer whose stored
    /// checksum does not match ([`Tensor::check_checksums`], before the
    /// first entry).
    pub fn try_for_each<E: From<crate::Error>>(
        &self,
        mut f: impl FnMut(&[u64], Value) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        // One pass in storage order: the pages hashed leave the resident
        // set, as the walk's own do.
        self.check_checksums_with(true)?;
        match self {
            Tensor::Coo(t) => t.iter().try_for_each(|(i, v)| f(i, v)),
            Tensor::Compressed(t) => t.iter().try_for_each(|e| {
                let (i, j, v) = e?;
                f(&[i, j], v)
            }),
            Tensor::Csf(t) => t.try_for_each(f),
        }
    }
}
