//! [`CompressedTensor`]: typed, zero-copy access to one CSR (layout 0x07)
//! or CSC (layout 0x08) matrix of an open file: the three buffers, a row
//! (CSR) or column (CSC) as slices, `get` by binary search within it, and
//! iteration in storage order.
//!
//! Opening checks the buffers' sizes and placement only; the pointers and
//! the minor indices are data, checked by [`CompressedTensor::verify`] in
//! O(nnz). Every access here still checks what it relies on (a pointer
//! pair that is decreasing or past `nnz` is an [`Error::InvalidFile`]
//! naming the row or column), so a hostile file cannot make it panic or
//! read out of bounds, in either mode.

use super::Problem;
use super::coo::{check_position, typed, zero_of};
use super::verify::{Collector, Content};
use crate::element::{DType, Element, Value};
use crate::error::{Error, Result};
use crate::hurray::compressed::CompressedDescriptor;
use crate::hurray::{KvValue, Statistics};
use crate::options::OutputLayout;
use std::fmt;
use std::ops::Range;

/// A view of one CSR or CSC matrix of an open file. Cheap to copy.
///
/// "Major" is the compressed dimension (rows for CSR, columns for CSC),
/// "minor" the other one: entries are stored major after major, and the
/// minor indices of each major slice are strictly increasing.
#[derive(Clone, Copy)]
pub struct CompressedTensor<'a> {
    pub(super) name: &'a str,
    pub(super) desc: &'a CompressedDescriptor,
    pub(super) values: &'a [u8],
    /// The values buffer as stored (bit-packed for bool; else `values`),
    /// which the checksums cover.
    pub(super) stored_values: &'a [u8],
    /// `col_indices` (CSR) or `row_indices` (CSC).
    pub(super) minor: &'a [u64],
    /// `row_ptr` (CSR) or `col_ptr` (CSC).
    pub(super) ptr: &'a [u64],
    pub(super) kv: &'a [(String, KvValue)],
    pub(super) permissive: bool,
    /// Absolute file offsets of the three buffers (for messages).
    pub(super) offsets: [u64; 3],
    /// The file mapping (none in memory), to release pages read in order.
    pub(super) mapped: super::release::Mapped<'a>,
    /// The open file's verdict on the stored checksums.
    pub(super) sums: Option<super::checksum::SumCheck<'a>>,
}

impl fmt::Debug for CompressedTensor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompressedTensor")
            .field("name", &self.name)
            .field("descriptor", self.desc)
            .finish()
    }
}

impl<'a> CompressedTensor<'a> {
    /// Tensor name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The decoded descriptor.
    pub fn descriptor(&self) -> &'a CompressedDescriptor {
        self.desc
    }

    /// [`OutputLayout::Csr`] or [`OutputLayout::Csc`].
    pub fn layout(&self) -> OutputLayout {
        if self.desc.column_major {
            OutputLayout::Csc
        } else {
            OutputLayout::Csr
        }
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.desc.dtype
    }

    /// Shape `[nrows, ncols]`.
    pub fn shape(&self) -> &'a [u64] {
        &self.desc.shape
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> u64 {
        self.desc.nnz
    }

    /// The statistics section, when present.
    pub fn statistics(&self) -> Option<&'a Statistics> {
        self.desc.statistics.as_ref()
    }

    /// The compressed dimension: 0 (rows) for CSR, 1 (columns) for CSC.
    pub fn major_dim(&self) -> usize {
        self.desc.major_dim()
    }

    /// Number of rows (CSR) or columns (CSC).
    pub fn major_extent(&self) -> u64 {
        self.desc.shape[self.major_dim()]
    }

    /// Name of the minor index buffer: `col_indices` or `row_indices`.
    pub fn indices_name(&self) -> &'static str {
        if self.desc.column_major {
            "row_indices"
        } else {
            "col_indices"
        }
    }

    /// Name of the pointer buffer: `row_ptr` or `col_ptr`.
    pub fn pointers_name(&self) -> &'static str {
        if self.desc.column_major {
            "col_ptr"
        } else {
            "row_ptr"
        }
    }

    /// "row" (CSR) or "column" (CSC): what one major slice is.
    pub(super) fn major_noun(&self) -> &'static str {
        if self.desc.column_major {
            "column"
        } else {
            "row"
        }
    }

    /// Raw little-endian values buffer (nnz * width bytes).
    pub fn values_bytes(&self) -> &'a [u8] {
        self.values
    }

    /// The values as a typed slice, zero-copy. `T` must be the tensor's type.
    pub fn values<T: Element>(&self) -> Result<&'a [T]> {
        typed(self.name, self.desc.dtype, self.values)
    }

    /// The minor indices (`col_indices` / `row_indices`), zero-copy.
    pub fn indices(&self) -> &'a [u64] {
        self.minor
    }

    /// The pointers (`row_ptr` / `col_ptr`, extent + 1 entries), zero-copy.
    /// Not checked at open: see [`CompressedTensor::verify`].
    pub fn pointers(&self) -> &'a [u64] {
        self.ptr
    }

    /// Raw minor index buffer.
    pub fn indices_bytes(&self) -> &'a [u8] {
        bytemuck::cast_slice(self.minor)
    }

    /// Raw pointer buffer.
    pub fn pointers_bytes(&self) -> &'a [u8] {
        bytemuck::cast_slice(self.ptr)
    }

    /// The three buffers by their spec names, in buffer order.
    pub(super) fn buffers(&self) -> [(&'static str, &'a [u8]); 3] {
        [
            ("values", self.stored_values),
            (self.indices_name(), self.indices_bytes()),
            (self.pointers_name(), self.pointers_bytes()),
        ]
    }

    /// The three buffers with their file offsets.
    fn placed_buffers(&self) -> [super::checksum::Buffer<'a>; 3] {
        let b = self.buffers();
        [0, 1, 2].map(|k| (b[k].0, b[k].1, self.offsets[k]))
    }

    super::checksum::checksum_methods!(placed_buffers);

    /// Value of entry `p` (storage order). Panics if `p >= nnz`.
    pub fn value(&self, p: u64) -> Value {
        let w = self.desc.dtype.width();
        let s = p as usize * w;
        self.desc.dtype.decode(&self.values[s..s + w])
    }

    fn pointer_error(&self, m: u64, detail: String) -> Error {
        Error::invalid(
            format!("{} of tensor {:?}", self.pointers_name(), self.name),
            self.offsets[2] + 8 * m,
            format!("{detail}; `verify` lists every broken pointer"),
        )
    }

    /// Entry positions of row `m` (CSR) or column `m` (CSC). An `m` past
    /// the extent is [`Error::PositionOutOfRange`]; pointers that are
    /// decreasing or past `nnz` are an [`Error::InvalidFile`] in every mode
    /// (no slice can be made of them).
    pub fn major_range(&self, m: u64) -> Result<Range<u64>> {
        let extent = self.major_extent();
        if m >= extent {
            let mut position = vec![0, 0];
            position[self.major_dim()] = m;
            return Err(Error::PositionOutOfRange {
                position,
                dim: self.major_dim(),
                index: m,
                extent,
            });
        }
        // The pointer buffer has extent + 1 entries (checked at open).
        let (lo, hi) = (self.ptr[m as usize], self.ptr[m as usize + 1]);
        let nnz = self.desc.nnz;
        if lo > hi || hi > nnz {
            return Err(self.pointer_error(
                m,
                format!(
                    "{} {m}: {}[{m}] = {lo} and {}[{}] = {hi} do not give a range inside 0..nnz = {nnz}",
                    self.major_noun(),
                    self.pointers_name(),
                    self.pointers_name(),
                    m + 1
                ),
            ));
        }
        Ok(lo..hi)
    }

    /// The entries under the leading coordinates `prefix`, given in
    /// storage order (CSR: row, then column; CSC: column, then row): a
    /// lane, or the one entry of a lane at a minor index (empty when it is
    /// not stored). One or two components.
    pub fn prefix_range(&self, prefix: &[u64]) -> Result<Range<u64>> {
        let (md, minor_dim) = (self.major_dim(), 1 - self.major_dim());
        let lane = match prefix {
            [m] | [m, _] => self.major_range(*m)?,
            _ => {
                return Err(Error::WrongIndexCount {
                    position: prefix.to_vec(),
                    expected: 2,
                    got: prefix.len(),
                });
            }
        };
        let Some(&k) = prefix.get(1) else {
            return Ok(lane);
        };
        let extent = self.shape()[minor_dim];
        if k >= extent {
            let mut position = vec![0, 0];
            (position[md], position[minor_dim]) = (prefix[0], k);
            return Err(Error::PositionOutOfRange {
                position,
                dim: minor_dim,
                index: k,
                extent,
            });
        }
        let at = self.lane_search(&lane, k);
        let hit = at < lane.end && self.minor.get(at as usize) == Some(&k);
        Ok(at..at + u64::from(hit))
    }

    /// The first entry of the lane `lane` whose minor index is `k` or
    /// more (`lane.end` when none is).
    fn lane_search(&self, lane: &Range<u64>, k: u64) -> u64 {
        let ix = &self.minor[lane.start as usize..lane.end as usize];
        lane.start + ix.partition_point(|&x| x < k) as u64
    }

    /// The coordinates (row, column) of entries `first..`, as many as
    /// `out` holds pairs, in storage order. Every lane met is checked as
    /// [`CompressedTensor::major_range`] checks it, and the lanes must
    /// follow each other.
    pub fn entry_coordinates(&self, first: u64, out: &mut [u64]) -> Result<()> {
        let md = self.major_dim();
        if out.is_empty() {
            return Ok(());
        }
        // The lane of entry `first`, then onwards.
        let mut m = (self.ptr.partition_point(|&q| q <= first) as u64).saturating_sub(1);
        let mut r = self.major_range(m)?;
        for (k, e) in out.chunks_exact_mut(2).enumerate() {
            let p = first + k as u64;
            while p >= r.end {
                m += 1;
                r = self.major_range(m)?;
            }
            if p < r.start {
                return Err(self.pointer_error(
                    m,
                    format!("{} {m} starts past entry {p}", self.major_noun()),
                ));
            }
            e[md] = m;
            e[1 - md] = self.minor[p as usize];
        }
        Ok(())
    }

    /// Every entry's coordinates by dimension: 2 rows of `nnz` words (row
    /// indices, then column indices; entries in storage order), the major
    /// ones expanded from the pointers, which must tile `0..nnz`.
    pub fn coordinates_by_dimension(&self) -> Result<Vec<u64>> {
        let nnz = self.desc.nnz as usize;
        let mut v = super::room_for_words(2 * nnz as u64, "the coordinates")?;
        let lanes = |v: &mut Vec<u64>| -> Result<()> {
            let mut next = 0u64;
            for m in 0..self.major_extent() {
                let r = self.major_range(m)?;
                if r.start != next {
                    return Err(self.pointer_error(
                        m,
                        format!(
                            "{} {m} does not start where {} ends",
                            self.major_noun(),
                            m.saturating_sub(1)
                        ),
                    ));
                }
                next = r.end;
                v.extend(std::iter::repeat_n(m, (r.end - r.start) as usize));
            }
            if next != nnz as u64 {
                return Err(self.pointer_error(
                    self.major_extent(),
                    format!("the last pointer is {next}, not nnz = {nnz}"),
                ));
            }
            Ok(())
        };
        if self.major_dim() == 0 {
            lanes(&mut v)?;
            v.extend_from_slice(self.minor);
        } else {
            v.extend_from_slice(self.minor);
            lanes(&mut v)?;
        }
        Ok(v)
    }

    /// Row `m` of a CSR matrix or column `m` of a CSC one, zero-copy: its
    /// minor indices and its values. `T` must be the tensor's type.
    pub fn lane<T: Element>(&self, m: u64) -> Result<(&'a [u64], &'a [T])> {
        let r = self.major_range(m)?;
        let (lo, hi) = (r.start as usize, r.end as usize);
        let v = self.values::<T>()?;
        Ok((&self.minor[lo..hi], &v[lo..hi]))
    }

    /// Row `i` of a CSR matrix, zero-copy: its column indices and values.
    /// [`Error::Unsupported`] on a CSC matrix (a row is not contiguous there).
    pub fn row<T: Element>(&self, i: u64) -> Result<(&'a [u64], &'a [T])> {
        if self.desc.column_major {
            return Err(Error::Unsupported(format!(
                "tensor {:?} is CSC: a row is not contiguous; read column by column or use get",
                self.name
            )));
        }
        self.lane(i)
    }

    /// Column `j` of a CSC matrix, zero-copy: its row indices and values.
    /// [`Error::Unsupported`] on a CSR matrix.
    pub fn column<T: Element>(&self, j: u64) -> Result<(&'a [u64], &'a [T])> {
        if !self.desc.column_major {
            return Err(Error::Unsupported(format!(
                "tensor {:?} is CSR: a column is not contiguous; read row by row or use get",
                self.name
            )));
        }
        self.lane(j)
    }

    /// Position (storage order) of the entry at `idx = [i, j]`, if stored.
    /// Rank and bounds are checked; binary search within the row (column).
    /// Strict mode: a minor index met twice in the row is an
    /// [`Error::InvalidFile`].
    pub fn find(&self, idx: &[u64]) -> Result<Option<u64>> {
        check_position(idx, &self.desc.shape)?;
        let md = self.major_dim();
        let (m, k) = (idx[md], idx[1 - md]);
        let r = self.major_range(m)?;
        let at = self.lane_search(&r, k);
        if at < r.end && self.minor[at as usize] == k {
            if !self.permissive && at + 1 < r.end && self.minor[at as usize + 1] == k {
                return Err(Error::invalid(
                    format!("{} of tensor {:?}", self.indices_name(), self.name),
                    self.offsets[1] + 8 * (at + 1),
                    format!(
                        "{} {m}: coordinate {idx:?} is stored twice (entries {at} and {}); open with permissive to read it anyway",
                        self.major_noun(),
                        at + 1
                    ),
                ));
            }
            return Ok(Some(at));
        }
        Ok(None)
    }

    /// Value at `idx = [i, j]`: the stored value, or a zero of the type.
    pub fn get(&self, idx: &[u64]) -> Result<Value> {
        Ok(match self.find(idx)? {
            Some(p) => self.value(p),
            None => zero_of(self.desc.dtype),
        })
    }

    /// Every entry in storage order as `(i, j, value)` (row, column,
    /// whatever the layout). The pointers are checked as they are met: a
    /// broken one gives one `Err` naming the row (column), then the
    /// iterator ends. On a mapped file the pages behind the iterator leave
    /// the resident set as it advances.
    pub fn iter(&self) -> CompressedEntries<'a> {
        CompressedEntries {
            t: *self,
            m: 0,
            p: 0,
            end: 0,
            started: false,
            done: false,
            behind: [
                self.mapped.cursor(self.values),
                self.mapped.cursor(self.indices_bytes()),
                self.mapped.cursor(self.pointers_bytes()),
            ],
        }
    }
}

/// Iterator of [`CompressedTensor::iter`].
pub struct CompressedEntries<'a> {
    t: CompressedTensor<'a>,
    /// Current major index and the entries `p..end` left in it.
    m: u64,
    p: u64,
    end: u64,
    started: bool,
    done: bool,
    behind: [super::release::Behind<'a>; 3],
}

impl CompressedEntries<'_> {
    fn fail(&mut self, e: Error) -> Option<Result<(u64, u64, Value)>> {
        self.done = true;
        Some(Err(e))
    }
}

impl Iterator for CompressedEntries<'_> {
    type Item = Result<(u64, u64, Value)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let t = self.t;
        let nnz = t.desc.nnz;
        let extent = t.major_extent();
        if !self.started {
            self.started = true;
            if t.ptr.first() != Some(&0) {
                let first = t.ptr.first().copied().unwrap_or(0);
                return self.fail(
                    t.pointer_error(0, format!("{}[0] is {first}, must be 0", t.pointers_name())),
                );
            }
            if extent == 0 {
                self.done = true;
                return (nnz != 0).then(|| {
                    Err(t.pointer_error(
                        0,
                        format!(
                            "{}[0] is the last pointer and must be nnz = {nnz}",
                            t.pointers_name()
                        ),
                    ))
                });
            }
            match t.major_range(0) {
                Ok(r) => self.end = r.end,
                Err(e) => return self.fail(e),
            }
        }
        while self.p == self.end {
            if self.m + 1 >= extent {
                self.done = true;
                for b in &mut self.behind {
                    b.flush(usize::MAX);
                }
                if self.p != nnz {
                    return Some(Err(t.pointer_error(
                        extent,
                        format!(
                            "the last pointer {}[{extent}] is {}, must be nnz = {nnz}",
                            t.pointers_name(),
                            self.p
                        ),
                    )));
                }
                return None;
            }
            self.m += 1;
            match t.major_range(self.m) {
                // Pointers must continue where the previous slice ended.
                Ok(r) if r.start == self.p => self.end = r.end,
                Ok(r) => {
                    let (m, p) = (self.m, self.p);
                    return self.fail(t.pointer_error(
                        m,
                        format!(
                            "{} {m} starts at {} but {} {} ended at {p}",
                            t.major_noun(),
                            r.start,
                            t.major_noun(),
                            m - 1
                        ),
                    ));
                }
                Err(e) => return self.fail(e),
            }
            if self.m % 4096 == 0 {
                self.behind[2].at(self.m as usize * 8);
            }
        }
        let p = self.p as usize;
        self.p += 1;
        if p % 4096 == 0 {
            let w = t.desc.dtype.width();
            self.behind[0].at(p * w);
            self.behind[1].at(p * 8);
        }
        let k = t.minor[p];
        let (i, j) = if t.desc.column_major {
            (k, self.m)
        } else {
            (self.m, k)
        };
        Some(Ok((i, j, t.value(p as u64))))
    }
}

impl CompressedTensor<'_> {
    /// Check the content: the pointers (`ptr[0] = 0`, non-decreasing, none
    /// past nnz, the last = nnz), the minor indices (inside the shape,
    /// strictly increasing within each row or column), the statistics
    /// (advisory: warnings) and the KV checksums. Every problem names its
    /// rule and the row (CSR) or column (CSC).
    ///
    /// One pass over the pointers and one over the entries: O(extent + nnz)
    /// time whatever the pointers say (a row's range is clamped to start
    /// where the previous one ended), O(1) memory, and the pages read leave
    /// the resident set behind the cursor.
    pub fn verify(&self) -> Vec<Problem> {
        let mut c = Collector::new(self.name);
        let nnz = self.desc.nnz;
        let extent = self.major_extent();
        let minor_extent = self.desc.shape[1 - self.major_dim()];
        let (pn, noun) = (self.pointers_name(), self.major_noun());
        let minor_noun = if self.desc.column_major {
            "row"
        } else {
            "column"
        };
        let ptr = self.ptr;
        let first = ptr.first().copied().unwrap_or(0);
        if first != 0 {
            c.push("pointer-start", None, || {
                format!("{pn}[0] is {first}, must be 0 ({noun} 0 starts the entries)")
            });
        }
        let mut behind_p = self.mapped.cursor(self.pointers_bytes());
        let mut behind_i = self.mapped.cursor(self.indices_bytes());
        // End of the previous row's (clamped) range: each entry is looked
        // at once at most, whatever the pointers.
        let mut done = 0u64;
        for m in 0..extent as usize {
            if m % 4096 == 0 {
                behind_p.at(m * 8);
            }
            let (lo, hi) = (ptr[m], ptr[m + 1]);
            let last = m + 1 == extent as usize;
            if hi > nnz && !last {
                c.push("pointer-out-of-range", None, || {
                    format!("{noun} {m}: {pn}[{}] = {hi} is past nnz = {nnz}", m + 1)
                });
            }
            if hi < lo {
                c.push("pointer-decreasing", None, || {
                    format!(
                        "{noun} {m}: {pn}[{}] = {hi} is less than {pn}[{m}] = {lo}; pointers must not decrease",
                        m + 1
                    )
                });
            }
            let a = lo.max(done).min(nnz);
            let b = hi.clamp(a, nnz);
            for p in a..b {
                let pu = p as usize;
                if pu % 4096 == 0 {
                    behind_i.at(pu * 8);
                }
                let k = self.minor[pu];
                if k >= minor_extent {
                    c.push("index-out-of-bounds", Some(p), || {
                        format!("{noun} {m}: {minor_noun} {k} is >= extent {minor_extent}")
                    });
                }
                if p > a {
                    let q = self.minor[pu - 1];
                    if q == k {
                        c.push("duplicate", Some(p), || {
                            format!(
                                "{noun} {m}: {minor_noun} {k} is stored twice (entries {} and {p})",
                                p - 1
                            )
                        });
                    } else if q > k {
                        c.push("not-sorted", Some(p), || {
                            format!(
                                "{noun} {m}: {minor_noun} {k} comes after {minor_noun} {q} (entry {}); {minor_noun}s must increase within a {noun}",
                                p - 1
                            )
                        });
                    }
                }
            }
            done = b;
        }
        behind_p.flush(usize::MAX);
        behind_i.flush(usize::MAX);
        let end = ptr.last().copied().unwrap_or(0);
        if end != nnz {
            c.push("pointer-end", None, || {
                format!("the last pointer {pn}[{extent}] is {end}, must be nnz = {nnz}")
            });
        }
        self.content().check(&mut c);
        c.finish()
    }

    fn content(&self) -> Content<'_> {
        Content {
            name: self.name,
            dtype: self.desc.dtype,
            shape: &self.desc.shape,
            nnz: self.desc.nnz,
            statistics: self.desc.statistics,
            buffers: self.buffers().to_vec(),
            values: self.values,
            kv: self.kv,
            mapped: self.mapped,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::hurray::BufferHandle;

    fn desc(shape: [u64; 2], nnz: u64, csc: bool) -> CompressedDescriptor {
        CompressedDescriptor {
            column_major: csc,
            dtype: DType::U8,
            shape,
            nnz,
            values: BufferHandle::cpu(nnz, 64),
            indices: BufferHandle::cpu(nnz * 8, 64),
            pointers: BufferHandle::cpu((shape[usize::from(csc)] + 1) * 8, 64),
            statistics: None,
        }
    }

    fn view<'a>(
        d: &'a CompressedDescriptor,
        minor: &'a [u64],
        ptr: &'a [u64],
        vals: &'a [u8],
    ) -> CompressedTensor<'a> {
        CompressedTensor {
            name: "t",
            desc: d,
            values: vals,
            stored_values: vals,
            minor,
            ptr,
            kv: &[],
            permissive: false,
            offsets: [0; 3],
            mapped: super::super::release::Mapped::NONE,
            sums: None,
        }
    }

    fn rules(t: &CompressedTensor<'_>) -> Vec<&'static str> {
        t.verify().iter().map(|p| p.rule).collect()
    }

    #[test]
    fn lookups_iteration_and_a_clean_verify() {
        let d = desc([3, 4], 4, false);
        let (minor, ptr, vals) = ([1u64, 3, 0, 2], [0u64, 2, 2, 4], [5u8, 6, 7, 8]);
        let t = view(&d, &minor, &ptr, &vals);
        assert!(t.verify().is_empty());
        assert_eq!(t.get(&[0, 3]).unwrap(), Value::UInt(6));
        assert_eq!(t.get(&[1, 3]).unwrap(), Value::UInt(0));
        assert_eq!(t.find(&[2, 0]).unwrap(), Some(2));
        let all: Vec<_> = t.iter().map(|e| e.unwrap()).collect();
        assert_eq!(all[3], (2, 2, Value::UInt(8)));
        assert_eq!(t.row::<u8>(2).unwrap(), (&[0u64, 2][..], &[7u8, 8][..]));
        // The same buffers read as CSC of the transposed shape.
        let d = desc([4, 3], 4, true);
        let t = view(&d, &minor, &ptr, &vals);
        assert_eq!(t.get(&[3, 0]).unwrap(), Value::UInt(6));
        assert_eq!(t.iter().nth(3).unwrap().unwrap(), (2, 2, Value::UInt(8)));
    }

    #[test]
    fn verify_clamps_hostile_pointers_and_names_each_rule() {
        let d = desc([3, 4], 4, false);
        let (minor, vals) = ([1u64, 3, 0, 2], [1u8; 4]);
        // Every pointer past nnz, and ptr[0] != 0.
        let t = view(&d, &minor, &[9, u64::MAX, 7, 3], &vals);
        let r = rules(&t);
        for want in [
            "pointer-start",
            "pointer-out-of-range",
            "pointer-decreasing",
            "pointer-end",
        ] {
            assert!(r.contains(&want), "{want} not in {r:?}");
        }
        // Overlapping rows would each cover all entries: clamped, every
        // entry is looked at once (no duplicate reports of entry 1).
        let t = view(&d, &[2, 1, 3, 3], &[0, 4, 4, 4], &vals);
        let pr = t.verify();
        assert_eq!(pr.iter().filter(|p| p.rule == "not-sorted").count(), 1);
        assert_eq!(pr.iter().filter(|p| p.rule == "duplicate").count(), 1);
        assert!(t.iter().all(|e| e.is_ok()));
        // A broken pair: the iterator gives one error and stops.
        let t = view(&d, &minor, &[0, 3, 1, 4], &vals);
        let items: Vec<_> = t.iter().collect();
        assert!(items.last().unwrap().is_err());
        assert!(t.major_range(1).is_err());
        assert!(t.get(&[1, 0]).is_err());
    }
}
