//! [`CooTensor`]: typed, zero-copy access to one COO tensor of an open
//! file, and lookups (`find`, `get`, `lower_bound`, `prefix_range`, `iter`).

use crate::element::{DType, Element, Value};
use crate::error::{Error, Result};
use crate::hurray::{CooDescriptor, KvValue, Statistics};
use std::fmt;
use std::ops::Range;

/// A view of one COO tensor of an open file. Cheap to copy.
#[derive(Clone, Copy)]
pub struct CooTensor<'a> {
    pub(super) name: &'a str,
    pub(super) desc: &'a CooDescriptor,
    pub(super) values: &'a [u8],
    /// The values buffer as stored (bit-packed for bool; else `values`),
    /// which the checksums cover.
    pub(super) stored_values: &'a [u8],
    pub(super) indices: &'a [u64],
    pub(super) rank: usize,
    pub(super) nnz: usize,
    pub(super) kv: &'a [(String, KvValue)],
    pub(super) permissive: bool,
    /// Absolute file offset of the indices buffer (for error messages).
    pub(super) indices_offset: u64,
    /// Absolute file offset of the values buffer (for error messages).
    pub(super) values_offset: u64,
    /// The file mapping (none in memory), to release pages read in order.
    pub(super) mapped: super::release::Mapped<'a>,
    /// The open file's verdict on the stored checksums (none for a view
    /// made outside a file).
    pub(super) sums: Option<super::checksum::SumCheck<'a>>,
}

impl<'a> CooTensor<'a> {
    /// The view of the COO tensor `t` (whose descriptor is `desc`) in
    /// `backing`, a placement checked at open (plain files and composite
    /// members alike).
    pub(super) fn placed(
        backing: &'a super::Backing,
        t: &'a super::TensorMeta,
        desc: &'a CooDescriptor,
        kv: &'a [(String, KvValue)],
        permissive: bool,
        sums: Option<super::checksum::SumCheck<'a>>,
    ) -> CooTensor<'a> {
        let (values, indices) = (&t.values, &t.indices);
        let words = backing.words(indices);
        CooTensor {
            name: &t.name,
            desc,
            values: t.values_view(backing),
            stored_values: &backing.bytes()[values.clone()],
            indices: words,
            rank: desc.rank(),
            nnz: words.len() / desc.rank().max(1),
            kv,
            permissive,
            indices_offset: indices.start as u64,
            values_offset: values.start as u64,
            mapped: backing.mapped(),
            sums,
        }
    }

    /// The buffers by their spec names, with their file offsets.
    fn buffers(&self) -> [super::checksum::Buffer<'a>; 2] {
        [
            ("values", self.stored_values, self.values_offset),
            ("indices", self.indices_bytes(), self.indices_offset),
        ]
    }

    super::checksum::checksum_methods!(buffers);
}

impl fmt::Debug for CooTensor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CooTensor")
            .field("name", &self.name)
            .field("descriptor", self.desc)
            .finish()
    }
}

pub(super) fn zero_of(d: DType) -> Value {
    d.zero()
}

/// `bytes` as a slice of `T`, which must be the stored type.
pub(super) fn typed<'a, T: Element>(name: &str, dtype: DType, bytes: &'a [u8]) -> Result<&'a [T]> {
    if T::DTYPE != dtype {
        return Err(Error::TypeMismatch {
            tensor: name.to_string(),
            stored: dtype.name(),
            requested: T::DTYPE.name(),
        });
    }
    bytemuck::try_cast_slice(bytes).map_err(|e| {
        Error::Unsupported(format!(
            "tensor {name:?}: cannot view values as {}: {e}",
            T::DTYPE
        ))
    })
}

/// `idx` has one index per dimension of `shape`, each inside it.
pub(super) fn check_position(idx: &[u64], shape: &[u64]) -> Result<()> {
    if idx.len() != shape.len() {
        return Err(Error::WrongIndexCount {
            position: idx.to_vec(),
            expected: shape.len(),
            got: idx.len(),
        });
    }
    for (dim, (&i, &e)) in idx.iter().zip(shape).enumerate() {
        if i >= e {
            return Err(Error::PositionOutOfRange {
                position: idx.to_vec(),
                dim,
                index: i,
                extent: e,
            });
        }
    }
    Ok(())
}

/// Hint the CPU to fetch `s[i]` (no effect when out of range or off x86-64).
#[inline(always)]
pub(crate) fn prefetch<T>(s: &[T], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(p) = s.get(i) {
        // SAFETY: a prefetch is a hint that never faults; `p` is a valid reference anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (p as *const T).cast::<i8>(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (s, i);
}

impl<'a> CooTensor<'a> {
    /// Tensor name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The decoded descriptor.
    pub fn descriptor(&self) -> &'a CooDescriptor {
        self.desc
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.desc.dtype
    }

    /// Shape.
    pub fn shape(&self) -> &'a [u64] {
        &self.desc.shape
    }

    /// Rank (number of dimensions).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> u64 {
        self.nnz as u64
    }

    /// The descriptor's is_sorted flag.
    pub fn is_sorted(&self) -> bool {
        self.desc.is_sorted
    }

    /// The statistics section, when present.
    pub fn statistics(&self) -> Option<&'a Statistics> {
        self.desc.statistics.as_ref()
    }

    /// Raw little-endian values buffer (nnz * width bytes).
    pub fn values_bytes(&self) -> &'a [u8] {
        self.values
    }

    /// Raw indices buffer (nnz * rank * 8 bytes).
    pub fn indices_bytes(&self) -> &'a [u8] {
        bytemuck::cast_slice(self.indices)
    }

    /// The values as a typed slice, zero-copy. `T` must be the tensor's type.
    pub fn values<T: Element>(&self) -> Result<&'a [T]> {
        typed(self.name, self.desc.dtype, self.values)
    }

    /// Flat indices, zero-copy: entry i is `indices()[i*rank .. (i+1)*rank]`.
    pub fn indices(&self) -> &'a [u64] {
        self.indices
    }

    /// Coordinate of entry `i`. Panics if `i >= nnz`.
    #[allow(clippy::should_implement_trait)]
    pub fn index(&self, i: u64) -> &'a [u64] {
        let s = i as usize * self.rank;
        &self.indices[s..s + self.rank]
    }

    /// Value of entry `i`. Panics if `i >= nnz`.
    pub fn value(&self, i: u64) -> Value {
        let w = self.desc.dtype.width();
        let s = i as usize * w;
        self.desc.dtype.decode(&self.values[s..s + w])
    }

    fn check_rank(&self, idx: &[u64]) -> Result<()> {
        if idx.len() != self.rank {
            return Err(Error::WrongIndexCount {
                position: idx.to_vec(),
                expected: self.rank,
                got: idx.len(),
            });
        }
        Ok(())
    }

    fn check_bounds(&self, idx: &[u64]) -> Result<()> {
        check_position(idx, &self.desc.shape)
    }

    fn require_sorted(&self, what: &str) -> Result<()> {
        if !self.desc.is_sorted {
            return Err(Error::Unsupported(format!(
                "{what} needs a sorted tensor; {:?} has is_sorted = 0",
                self.name
            )));
        }
        Ok(())
    }

    /// First entry position for which `pred(entry)` is false, assuming the
    /// entries are partitioned (true first). Branch-light binary search.
    #[inline]
    fn partition_point(&self, pred: impl Fn(&[u64]) -> bool) -> usize {
        let r = self.rank;
        let ind = self.indices;
        let mut size = self.nnz;
        if size == 0 {
            return 0;
        }
        let mut base = 0usize;
        while size > 1 {
            let half = size / 2;
            // Prefetch both candidates of the next step: on large tensors
            // the search is bound by memory latency, not comparisons.
            let rest = size - half;
            let next = rest / 2;
            let next2 = (rest - next) / 2;
            for b in [base, base + half] {
                prefetch(ind, (b + next) * r);
                prefetch(ind, (b + next2) * r);
                prefetch(ind, (b + next + next2) * r);
            }
            let mid = base + half;
            base = if pred(&ind[mid * r..mid * r + r]) {
                mid
            } else {
                base
            };
            size -= half;
        }
        base + pred(&ind[base * r..base * r + r]) as usize
    }

    fn duplicate_error(&self, idx: &[u64], a: usize, b: usize) -> Error {
        // The byte where the second copy's indices start.
        let at = self.indices_offset + (b * self.rank * 8) as u64;
        Error::invalid(
            format!("indices of tensor {:?}", self.name),
            at,
            format!(
                "coordinate {idx:?} is stored twice (entries {a} and {b}); open with permissive to read it anyway"
            ),
        )
    }

    /// Position of the entry stored at `idx`, if any. Rank and bounds are
    /// checked ([`Error::WrongIndexCount`], [`Error::PositionOutOfRange`]). Binary search when sorted, linear scan otherwise.
    /// Strict mode: a coordinate met twice is an [`Error::InvalidFile`].
    pub fn find(&self, idx: &[u64]) -> Result<Option<u64>> {
        self.check_bounds(idx)?;
        let r = self.rank;
        if self.desc.is_sorted {
            let p = self.partition_point(|e| e < idx);
            if p < self.nnz && &self.indices[p * r..p * r + r] == idx {
                if !self.permissive
                    && p + 1 < self.nnz
                    && &self.indices[(p + 1) * r..(p + 2) * r] == idx
                {
                    return Err(self.duplicate_error(idx, p, p + 1));
                }
                return Ok(Some(p as u64));
            }
            Ok(None)
        } else {
            let mut found: Option<usize> = None;
            for (p, e) in self.indices.chunks_exact(r).enumerate() {
                if e == idx {
                    match found {
                        None if self.permissive => return Ok(Some(p as u64)),
                        None => found = Some(p),
                        Some(first) => return Err(self.duplicate_error(idx, first, p)),
                    }
                }
            }
            Ok(found.map(|p| p as u64))
        }
    }

    /// Value at `idx`: the stored value, or a zero of the tensor's type.
    pub fn get(&self, idx: &[u64]) -> Result<Value> {
        Ok(match self.find(idx)? {
            Some(p) => self.value(p),
            None => zero_of(self.desc.dtype),
        })
    }

    /// Position of the first entry `>= idx` (nnz if none). Sorted tensors only
    /// (`Unsupported` otherwise); the rank is checked, components beyond the
    /// shape are allowed.
    pub fn lower_bound(&self, idx: &[u64]) -> Result<u64> {
        self.check_rank(idx)?;
        self.require_sorted("lower_bound")?;
        Ok(self.partition_point(|e| e < idx) as u64)
    }

    /// Entries whose coordinate starts with `prefix` (1..=rank components);
    /// `[i]` gives row i. Sorted tensors only; a component outside the
    /// shape is [`Error::PositionOutOfRange`], as for [`CooTensor::get`].
    pub fn prefix_range(&self, prefix: &[u64]) -> Result<Range<u64>> {
        if prefix.is_empty() || prefix.len() > self.rank {
            return Err(Error::WrongIndexCount {
                position: prefix.to_vec(),
                expected: self.rank,
                got: prefix.len(),
            });
        }
        // A prefix outside the shape is the error `get` gives for it (a
        // compressed tensor's row range says the same), not an empty range.
        check_position(prefix, &self.desc.shape[..prefix.len()])?;
        self.require_sorted("prefix_range")?;
        let k = prefix.len();
        let lo = self.partition_point(|e| &e[..k] < prefix);
        let hi = self.partition_point(|e| &e[..k] <= prefix);
        Ok(lo as u64..hi.max(lo) as u64)
    }

    /// Every entry in storage order: (coordinate, value). On a mapped file
    /// the pages behind the iterator leave the resident set as it advances
    /// (slices it returned stay valid: they read back from the file).
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u64], Value)> + 'a + use<'a> {
        let d = self.desc.dtype;
        let (r, w) = (self.rank, d.width());
        let mut behind_i = self.mapped.cursor(self.indices_bytes());
        let mut behind_v = self.mapped.cursor(self.values);
        self.indices
            .chunks_exact(r)
            .zip(self.values.chunks_exact(w))
            .enumerate()
            .map(move |(k, (i, v))| {
                if k % 4096 == 0 {
                    behind_i.at(k * r * 8);
                    behind_v.at(k * w);
                }
                (i, d.decode(v))
            })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
pub(super) mod tests {
    use super::*;
    use crate::hurray::BufferHandle;

    pub(in crate::read) fn desc(shape: Vec<u64>, nnz: u64, sorted: bool) -> CooDescriptor {
        CooDescriptor {
            dtype: DType::U8,
            shape: shape.clone(),
            nnz,
            is_sorted: sorted,
            values: BufferHandle::cpu(nnz, 64),
            indices: BufferHandle::cpu(nnz * 8 * shape.len() as u64, 64),
            statistics: None,
        }
    }

    pub(in crate::read) fn view<'a>(
        d: &'a CooDescriptor,
        ind: &'a [u64],
        vals: &'a [u8],
    ) -> CooTensor<'a> {
        CooTensor {
            name: "t",
            desc: d,
            values: vals,
            stored_values: vals,
            indices: ind,
            rank: d.rank(),
            nnz: ind.len() / d.rank(),
            kv: &[],
            permissive: true,
            indices_offset: 0,
            values_offset: 0,
            mapped: crate::read::release::Mapped::NONE,
            sums: None,
        }
    }

    #[test]
    fn partition_point_and_ranges() {
        let ind = [0u64, 0, 0, 2, 1, 1, 1, 3, 4, 0];
        let d = desc(vec![5, 5], 5, true);
        let vals = [1u8, 2, 3, 4, 5];
        let t = view(&d, &ind, &vals);
        assert_eq!(t.lower_bound(&[1, 2]).unwrap(), 3);
        assert_eq!(t.prefix_range(&[1]).unwrap(), 2..4);
        assert_eq!(t.get(&[1, 3]).unwrap(), Value::UInt(4));
        assert_eq!(t.get(&[1, 2]).unwrap(), Value::UInt(0));
        assert_eq!(t.find(&[4, 0]).unwrap(), Some(4));
        assert!(t.verify().is_empty());
    }
}
