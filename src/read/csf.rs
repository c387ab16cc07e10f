//! [`CsfTensor`]: one CSF tensor of an open file (layout 0x09, rank 3 and
//! up): lookups by binary search down the levels, fibres and slices by
//! their leading coordinates, every entry in storage order, and `verify`
//! with every rule of the spec's storage invariants.

use super::verify::{Collector, Content, Problem};
use super::{Backing, coo::check_position, coo::zero_of};
use crate::element::Value;
use crate::error::{Error, Result};
use crate::hurray::{CsfDescriptor, KvValue, Statistics};
use crate::options::OutputLayout;
use std::fmt;
use std::ops::Range;

/// A word of a CSF tree's levels: u64 in a file, u32 or u64 in memory.
pub trait TreeWord: Copy + Into<u64> {}
impl TreeWord for u32 {}
impl TreeWord for u64 {}

/// What is wrong with a CSF tree where a lookup went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeFault {
    /// The children of node `node` of level `level - 1` (the root for
    /// level 0) are no range of level `level`'s nodes.
    Pointers {
        /// The level whose `pos` is broken.
        level: usize,
        /// The parent node.
        node: u64,
        /// What the pointers say.
        detail: String,
    },
    /// Coordinate `q` is stored twice among siblings of `level`, at nodes
    /// `at` and `at + 1`.
    Twice {
        /// The level.
        level: usize,
        /// The first of the two nodes.
        at: u64,
        /// The coordinate.
        q: u64,
    },
}

/// A CSF tree's levels, however they are held (a file's mapped buffers,
/// arrays in memory): the one place where its pointers are followed and
/// its siblings searched, so a lookup means the same in every reader.
pub trait CsfLevels {
    /// The levels' word.
    type W: TreeWord;
    /// Levels (the tensor's rank).
    fn rank(&self) -> usize;
    /// The dimension stored at `level`.
    fn dim(&self, level: usize) -> usize;
    /// `pos_L` (as [`CsfTensor::pos`]).
    fn pos_words(&self, level: usize) -> &[Self::W];
    /// `crd_L`.
    fn crd_words(&self, level: usize) -> &[Self::W];

    /// The children of node `k` of level `level - 1` (the root for
    /// level 0): a range of nodes of `level`.
    fn child_range(&self, level: usize, k: u64) -> std::result::Result<Range<u64>, TreeFault> {
        let pos = self.pos_words(level);
        let n = self.crd_words(level).len() as u64;
        let broken = |detail| TreeFault::Pointers {
            level,
            node: k,
            detail,
        };
        let (lo, hi) = match (pos.get(k as usize), pos.get(k as usize + 1)) {
            (Some(&lo), Some(&hi)) => (lo.into(), hi.into()),
            _ => {
                let n = pos.len();
                return Err(broken(format!(
                    "node {k} has no pointer pair in pos_{level} of {n}"
                )));
            }
        };
        if lo > hi || hi > n {
            return Err(broken(format!(
                "pos_{level}[{k}] = {lo} and pos_{level}[{}] = {hi} do not give a range inside the level's {n} nodes",
                k + 1
            )));
        }
        Ok(lo..hi)
    }

    /// The node of `level` among the siblings `range` whose coordinate is
    /// `q`, by binary search; `strict` refuses a sibling stored twice.
    fn search_siblings(
        &self,
        level: usize,
        range: Range<u64>,
        q: u64,
        strict: bool,
    ) -> std::result::Result<Option<u64>, TreeFault> {
        let crd = &self.crd_words(level)[range.start as usize..range.end as usize];
        let i = crd.partition_point(|&x| x.into() < q);
        if i == crd.len() || crd[i].into() != q {
            return Ok(None);
        }
        let at = range.start + i as u64;
        if strict && crd.get(i + 1).is_some_and(|&x| x.into() == q) {
            return Err(TreeFault::Twice { level, at, q });
        }
        Ok(Some(at))
    }

    /// The leaf at `idx` (dimension order, in bounds), if stored.
    fn find_leaf(&self, idx: &[u64], strict: bool) -> std::result::Result<Option<u64>, TreeFault> {
        let mut range = self.child_range(0, 0)?;
        let mut node = 0;
        for level in 0..self.rank() {
            if level > 0 {
                range = self.child_range(level, node)?;
            }
            match self.search_siblings(level, range.clone(), idx[self.dim(level)], strict)? {
                Some(k) => node = k,
                None => return Ok(None),
            }
        }
        Ok(Some(node))
    }

    /// The coordinate (dimension order) of leaf `p` (below the leaves'
    /// count), found by climbing: at each level the parent is the last
    /// node whose children start at or before the child.
    fn leaf_coordinate(&self, p: u64) -> std::result::Result<Vec<u64>, TreeFault> {
        let r = self.rank();
        let mut idx = vec![0u64; r];
        let mut node = p;
        for level in (0..r).rev() {
            let Some(&x) = self.crd_words(level).get(node as usize) else {
                return Err(TreeFault::Pointers {
                    level,
                    node,
                    detail: format!("node {node} is past crd_{level}"),
                });
            };
            idx[self.dim(level)] = x.into();
            if level > 0 {
                let pos = self.pos_words(level);
                let parent = pos.partition_point(|&q| q.into() <= node).saturating_sub(1) as u64;
                if !self.child_range(level, parent)?.contains(&node) {
                    return Err(TreeFault::Pointers {
                        level,
                        node: parent,
                        detail: format!("node {node} of level {level} has no parent"),
                    });
                }
                node = parent;
            }
        }
        Ok(idx)
    }

    /// Every leaf's coordinate, dimension by dimension (`rank` rows of
    /// `nnz` words, row `d` along dimension `d`; leaves in storage
    /// order): each level's coordinates handed down from the leaves'
    /// ancestors, found level by level from the pointers (no walk).
    /// Memory: the result, and a word per leaf and per node of one level.
    fn leaf_coordinates(&self) -> std::result::Result<Vec<u64>, CoordinatesError> {
        let r = self.rank();
        let nnz = self.crd_words(r.saturating_sub(1)).len();
        let words = |n: usize| -> std::result::Result<Vec<u64>, CoordinatesError> {
            let mut v = Vec::new();
            v.try_reserve_exact(n)
                .map_err(|_| CoordinatesError::OutOfMemory(8 * n as u64))?;
            v.resize(n, 0);
            Ok(v)
        };
        let all = r
            .checked_mul(nnz)
            .ok_or(CoordinatesError::OutOfMemory(u64::MAX))?;
        let mut out = words(all)?;
        // The ancestor at the current level of every leaf.
        let mut node: Vec<u64> = words(nnz)?;
        node.iter_mut().enumerate().for_each(|(p, n)| *n = p as u64);
        for level in (0..r).rev() {
            let crd = self.crd_words(level);
            let d = self.dim(level);
            for (x, &k) in out[d * nnz..(d + 1) * nnz].iter_mut().zip(&node) {
                let Some(&c) = crd.get(k as usize) else {
                    return Err(CoordinatesError::Fault(TreeFault::Pointers {
                        level,
                        node: k,
                        detail: format!("node {k} is past crd_{level}"),
                    }));
                };
                *x = c.into();
            }
            // The children's ranges tile the level (the root's, level 0),
            // so every node has its parent.
            let parents = if level == 0 {
                1
            } else {
                self.crd_words(level - 1).len() as u64
            };
            let mut parent = if level > 0 {
                words(crd.len())?
            } else {
                Vec::new()
            };
            let mut next = 0;
            for k in 0..=parents {
                let range = if k < parents {
                    self.child_range(level, k)
                        .map_err(CoordinatesError::Fault)?
                } else {
                    crd.len() as u64..crd.len() as u64
                };
                if range.start != next {
                    return Err(CoordinatesError::Fault(TreeFault::Pointers {
                        level,
                        node: k,
                        detail: format!(
                            "the children of node {k} start at {}, not at {next} where its siblings' end",
                            range.start
                        ),
                    }));
                }
                if level > 0 {
                    for c in range.clone() {
                        parent[c as usize] = k;
                    }
                }
                next = range.end;
            }
            if level > 0 {
                node.iter_mut().for_each(|k| *k = parent[*k as usize]);
            }
        }
        Ok(out)
    }
}

/// Why [`CsfLevels::leaf_coordinates`] gave none.
#[derive(Debug)]
pub enum CoordinatesError {
    /// The tree is broken there.
    Fault(TreeFault),
    /// The vectors (this many bytes) could not be allocated.
    OutOfMemory(u64),
}

impl CsfLevels for CsfTensor<'_> {
    type W = u64;
    fn rank(&self) -> usize {
        self.desc.shape.len()
    }
    fn dim(&self, level: usize) -> usize {
        self.desc.mode_order[level] as usize
    }
    fn pos_words(&self, level: usize) -> &[u64] {
        self.pos(level)
    }
    fn crd_words(&self, level: usize) -> &[u64] {
        self.crd(level)
    }
}

/// A view of one CSF tensor of an open file. Cheap to copy.
#[derive(Clone, Copy)]
pub struct CsfTensor<'a> {
    pub(super) name: &'a str,
    pub(super) desc: &'a CsfDescriptor,
    pub(super) backing: &'a Backing,
    /// One value per entry (bools unpacked).
    pub(super) values: &'a [u8],
    /// The values buffer as stored, which the checksums cover.
    pub(super) stored_values: &'a [u8],
    /// The values' and then `pos_0`, `crd_0`, `pos_1`... buffers' places.
    pub(super) buffers: &'a [Range<usize>],
    pub(super) kv: &'a [(String, KvValue)],
    pub(super) permissive: bool,
    pub(super) mapped: super::release::Mapped<'a>,
    pub(super) sums: Option<super::checksum::SumCheck<'a>>,
}

/// A walk's coordinate and its cursors behind each level's buffers.
struct Walk<'a> {
    idx: Vec<u64>,
    /// `crd_0`, `pos_1`, `crd_1`, ..., `pos_r` (empty), then the values.
    behind: Vec<super::release::Behind<'a>>,
}

impl fmt::Debug for CsfTensor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CsfTensor")
            .field("name", &self.name)
            .field("shape", &self.desc.shape)
            .field("mode_order", &self.desc.mode_order)
            .field("nnz", &self.desc.nnz)
            .finish()
    }
}

impl<'a> CsfTensor<'a> {
    /// Tensor name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// Element type.
    pub fn dtype(&self) -> crate::element::DType {
        self.desc.dtype
    }

    /// Shape (dimension order).
    pub fn shape(&self) -> &'a [u64] {
        &self.desc.shape
    }

    /// Stored entries (leaves).
    pub fn nnz(&self) -> u64 {
        self.desc.nnz
    }

    /// The decoded descriptor.
    pub fn descriptor(&self) -> &'a CsfDescriptor {
        self.desc
    }

    /// `mode_order[L]`: the dimension stored at level `L`.
    pub fn mode_order(&self) -> &'a [u32] {
        &self.desc.mode_order
    }

    /// The statistics section, when present.
    pub fn statistics(&self) -> Option<&'a Statistics> {
        self.desc.statistics.as_ref()
    }

    /// The values as stored (little-endian; bools packed 8 per byte).
    pub fn values_bytes(&self) -> &'a [u8] {
        self.stored_values
    }

    /// `pos_L`: the children of node `k` of level `L - 1` are the nodes
    /// `pos_L[k]..pos_L[k + 1]` of level `L` (one virtual root above
    /// level 0).
    pub fn pos(&self, level: usize) -> &'a [u64] {
        self.buffers
            .get(1 + 2 * level)
            .map_or(&[][..], |r| self.backing.words(r))
    }

    /// `crd_L`: the coordinate of each node of level `L` along dimension
    /// `mode_order[L]`.
    pub fn crd(&self, level: usize) -> &'a [u64] {
        self.buffers
            .get(2 + 2 * level)
            .map_or(&[][..], |r| self.backing.words(r))
    }

    /// The file offset of buffer `k` (0: values; `2L + 1`: `pos_L`;
    /// `2L + 2`: `crd_L`), for messages.
    fn offset(&self, k: usize) -> u64 {
        self.buffers.get(k).map_or(0, |r| r.start as u64)
    }

    /// The values as a typed slice, zero-copy (`T` must be the element
    /// type).
    pub fn values<T: crate::element::Element>(&self) -> Result<&'a [T]> {
        super::coo::typed(self.name, self.desc.dtype, self.values)
    }

    /// The error of an operation that reads COO, CSR and CSC only.
    pub fn not_served(&self, op: &str) -> Error {
        Error::LayoutNotServed {
            tensor: self.name.to_string(),
            layout: crate::layout::Layout::Csf.described(),
            op: op.to_string(),
            served: "COO, CSR and CSC",
        }
    }

    /// Value of entry (leaf) `p`. Panics if `p >= nnz`.
    pub fn value(&self, p: u64) -> Value {
        let w = self.desc.dtype.width();
        let s = p as usize * w;
        self.desc.dtype.decode(&self.values[s..s + w])
    }

    /// The children of node `k` of level `level - 1` (the root for level
    /// 0): a range of nodes of `level`, or the error naming the broken
    /// pointers (in every mode: no slice can be made of them).
    pub fn children(&self, level: usize, k: u64) -> Result<Range<u64>> {
        self.child_range(level, k).map_err(|f| self.fault(f))
    }

    /// A [`TreeFault`] as the error naming where in the file it is.
    fn fault(&self, f: TreeFault) -> Error {
        match f {
            TreeFault::Pointers {
                level,
                node,
                detail,
            } => Error::invalid(
                format!("pos_{level} of tensor {:?}", self.name),
                self.offset(1 + 2 * level) + 8 * node,
                format!("{detail}; `verify` lists every broken pointer"),
            ),
            TreeFault::Twice { level, at, q } => Error::invalid(
                format!("crd_{level} of tensor {:?}", self.name),
                self.offset(2 + 2 * level) + 8 * (at + 1),
                format!(
                    "coordinate {q} is stored twice among siblings (nodes {at} and {}); open with permissive to read it anyway",
                    at + 1
                ),
            ),
        }
    }

    /// The node of `level` under the nodes `range` (siblings) whose
    /// coordinate is `q`, by binary search; strict mode refuses a sibling
    /// stored twice.
    fn search(&self, level: usize, range: Range<u64>, q: u64) -> Result<Option<u64>> {
        self.search_siblings(level, range, q, !self.permissive)
            .map_err(|f| self.fault(f))
    }

    /// The coordinate (dimension order) of entry (leaf) `p`, found by
    /// climbing from the leaf: at each level the parent is the last node
    /// whose children start at or before the child (O(rank log nodes)).
    /// `p` past nnz is [`Error::PositionOutOfRange`]; pointers that do not
    /// place it are an [`Error::InvalidFile`].
    pub fn coordinate(&self, p: u64) -> Result<Vec<u64>> {
        if p >= self.desc.nnz {
            return Err(Error::invalid(
                format!("tensor {:?}", self.name),
                self.offset(0),
                format!("entry {p} is past the tensor's {} entries", self.desc.nnz),
            ));
        }
        self.leaf_coordinate(p).map_err(|f| self.fault(f))
    }

    /// Every leaf's coordinates by dimension (`rank` rows of `nnz` words,
    /// leaves in storage order), from the pointers (no walk).
    pub fn coordinates_by_dimension(&self) -> Result<Vec<u64>> {
        self.leaf_coordinates().map_err(|e| match e {
            CoordinatesError::Fault(f) => self.fault(f),
            CoordinatesError::OutOfMemory(bytes) => Error::OutOfMemory {
                what: "a CSF tensor's coordinates",
                bytes,
            },
        })
    }

    /// Position (leaf) of the entry at `idx` (dimension order), if stored.
    /// Rank and bounds are checked.
    pub fn find(&self, idx: &[u64]) -> Result<Option<u64>> {
        check_position(idx, &self.desc.shape)?;
        self.find_leaf(idx, !self.permissive)
            .map_err(|f| self.fault(f))
    }

    /// Value at `idx`: the stored value, or a zero of the tensor's type.
    pub fn get(&self, idx: &[u64]) -> Result<Value> {
        Ok(match self.find(idx)? {
            Some(p) => self.value(p),
            None => zero_of(self.desc.dtype),
        })
    }

    /// The entries (leaf positions) under the leading coordinates
    /// `prefix`, given in storage order (`prefix[L]` along dimension
    /// `mode_order[L]`; at most `rank` of them): a fibre, a slice, or
    /// every entry for an empty prefix. They are contiguous in storage
    /// order; an absent prefix gives an empty range.
    pub fn fiber(&self, prefix: &[u64]) -> Result<Range<u64>> {
        let r = self.rank();
        if prefix.len() > r {
            return Err(Error::WrongRank {
                contribution: 0,
                expected: r,
                got: prefix.len(),
            });
        }
        let mut range = self.children(0, 0)?;
        for (level, &q) in prefix.iter().enumerate() {
            let extent = self.desc.shape[self.desc.mode_order[level] as usize];
            if q >= extent {
                return Err(Error::IndexOutOfRange {
                    contribution: 0,
                    dim: self.desc.mode_order[level] as usize,
                    index: q,
                    extent,
                });
            }
            let Some(k) = self.search(level, range.clone(), q)? else {
                return Ok(0..0);
            };
            range = if level + 1 < r {
                self.children(level + 1, k)?
            } else {
                k..k + 1
            };
        }
        // Down to the leaves: the children of a run of siblings are the
        // run from the first one's first child to the last one's last.
        for level in prefix.len() + 1..r {
            if range.is_empty() {
                return Ok(0..0);
            }
            let lo = self.children(level, range.start)?.start;
            let hi = self.children(level, range.end - 1)?.end;
            range = lo..hi.max(lo);
        }
        Ok(range)
    }

    /// A walk from the root: its coordinate, and a cursor behind each
    /// level's `crd`, the `pos` below it, and the values.
    fn walk(&self) -> Walk<'a> {
        let r = self.rank();
        Walk {
            idx: vec![0u64; r],
            behind: (0..r)
                .flat_map(|l| [self.crd(l), self.pos(l + 1)])
                .map(|w| self.mapped.cursor(bytemuck::cast_slice(w)))
                .chain([self.mapped.cursor(self.values)])
                .collect(),
        }
    }

    /// Call `f(coordinate in dimension order, value)` for every entry in
    /// storage order, until it returns an error (returned); broken
    /// pointers are an error too. Every level is read front to back, so on
    /// a mapped file the pages of the values and of every level leave the
    /// resident set behind the walk.
    pub fn try_for_each<E: From<Error>>(
        &self,
        mut f: impl FnMut(&[u64], Value) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let r = self.rank();
        let mut walk = self.walk();
        let root = self.children(0, 0)?;
        let w = self.desc.dtype.width();
        self.visit_to(
            0,
            r,
            root,
            &mut walk,
            &mut |idx, p| f(idx, self.value(p)),
            w,
        )?;
        for b in &mut walk.behind {
            b.flush(usize::MAX);
        }
        Ok(())
    }

    /// Call `f(coordinate, leaves)` for every fibre of the leaf level in
    /// storage order: the coordinate (dimension order) of its parent, the
    /// leaf dimension left at 0, and the range of its leaves (entries);
    /// until `f` returns an error (returned). Pages are released behind
    /// the walk as in [`CsfTensor::try_for_each`], the leaves' by `f`'s
    /// caller, which reads them.
    pub fn try_for_each_fiber<E: From<Error>>(
        &self,
        mut f: impl FnMut(&[u64], Range<u64>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let r = self.rank();
        let mut walk = self.walk();
        let root = self.children(0, 0)?;
        let w = self.desc.dtype.width();
        // The parents of the leaves are visited as leaves of a tree one
        // level shorter; their children ranges are the fibres.
        let mut leaf_behind = [
            self.mapped.cursor(bytemuck::cast_slice(self.crd(r - 1))),
            self.mapped.cursor(self.values),
        ];
        let mut next = 0u64;
        self.visit_to(
            0,
            r - 1,
            root,
            &mut walk,
            &mut |idx, k| {
                let leaves = self.children(r - 1, k)?;
                if leaves.start >= next {
                    // The leaves before this fibre were read: give them back.
                    leaf_behind[0].at(leaves.start as usize * 8);
                    leaf_behind[1].at(leaves.start as usize * w);
                    next = leaves.start + 4096;
                }
                f(idx, leaves)
            },
            w,
        )?;
        for b in walk.behind.iter_mut().chain(&mut leaf_behind) {
            b.flush(usize::MAX);
        }
        Ok(())
    }

    /// Visit the nodes `range` of `level` and their subtrees down to
    /// level `depth - 1` (depth first), `f(coordinate, node)` at each node
    /// of that level (the leaves when `depth` is the rank).
    fn visit_to<E: From<Error>>(
        &self,
        level: usize,
        depth: usize,
        range: Range<u64>,
        walk: &mut Walk<'a>,
        f: &mut impl FnMut(&[u64], u64) -> std::result::Result<(), E>,
        width: usize,
    ) -> std::result::Result<(), E> {
        let crd = self.crd(level);
        let dim = self.desc.mode_order[level] as usize;
        let leaf = level + 1 == depth;
        for k in range {
            let ku = k as usize;
            if ku % 4096 == 0 {
                walk.behind[2 * level].at(ku * 8);
                if level + 1 == self.rank() {
                    walk.behind[2 * level + 2].at(ku * width);
                } else {
                    walk.behind[2 * level + 1].at(ku * 8);
                }
            }
            walk.idx[dim] = crd[ku];
            if leaf {
                f(&walk.idx, k)?;
            } else {
                let children = self.children(level + 1, k)?;
                self.visit_to(level + 1, depth, children, walk, f, width)?;
            }
        }
        Ok(())
    }

    /// The buffers by their spec names, with their file offsets.
    fn placed_buffers(&self) -> Vec<super::checksum::Buffer<'a>> {
        let names = OutputLayout::Csf.buffer_names();
        let mut out = vec![("values", self.stored_values, self.offset(0))];
        for (k, r) in self.buffers.iter().enumerate().skip(1) {
            let name = names.get(k).copied().unwrap_or("crd");
            out.push((name, &self.backing.bytes()[r.clone()], r.start as u64));
        }
        out
    }

    super::checksum::checksum_methods!(placed_buffers);

    /// Check the storage invariants in O(nodes), each level once: every
    /// `pos_L` starts at 0 (`pointer-start`), never decreases
    /// (`pointer-decreasing`), stays within the level's nodes
    /// (`pointer-out-of-range`) and ends at their count (`pointer-end`);
    /// every coordinate is below its dimension's extent
    /// (`index-out-of-bounds`); siblings strictly increase (`not-sorted`,
    /// `duplicate`). Then the statistics and checksums. Empty = OK.
    pub fn verify(&self) -> Vec<Problem> {
        let mut c = Collector::new(self.name);
        for level in 0..self.rank() {
            self.verify_level(level, &mut c);
        }
        self.content().check(&mut c);
        c.finish()
    }

    fn verify_level(&self, level: usize, c: &mut Collector<'_>) {
        let (pos, crd) = (self.pos(level), self.crd(level));
        let n = crd.len() as u64;
        let dim = self.desc.mode_order[level] as usize;
        let extent = self.desc.shape[dim];
        if let Some(&p0) = pos.first().filter(|&&p| p != 0) {
            c.push("pointer-start", None, || {
                format!("pos_{level}[0] is {p0}, must be 0")
            });
        }
        let end = pos.last().copied().unwrap_or(0);
        if end != n {
            c.push("pointer-end", None, || {
                format!(
                    "the last pointer pos_{level}[{}] is {end}, must be the level's {n} nodes",
                    pos.len().saturating_sub(1)
                )
            });
        }
        let mut behind = self.mapped.cursor(bytemuck::cast_slice(crd));
        // End of the previous parent's (clamped) children: each node is
        // looked at once at most, whatever the pointers.
        let mut done = 0u64;
        for k in 0..pos.len().saturating_sub(1) {
            let (lo, hi) = (pos[k], pos[k + 1]);
            if hi < lo {
                c.push("pointer-decreasing", None, || {
                    format!(
                        "pos_{level}[{}] = {hi} is less than pos_{level}[{k}] = {lo}; pointers must not decrease",
                        k + 1
                    )
                });
            }
            if hi > n {
                c.push("pointer-out-of-range", None, || {
                    format!(
                        "pos_{level}[{}] = {hi} is past the level's {n} nodes",
                        k + 1
                    )
                });
            }
            let a = lo.max(done).min(n);
            let b = hi.clamp(a, n);
            for p in a..b {
                let pu = p as usize;
                if pu % 4096 == 0 {
                    behind.at(pu * 8);
                }
                let x = crd[pu];
                if x >= extent {
                    c.push("index-out-of-bounds", Some(p), || {
                        format!("crd_{level}[{p}] = {x} is >= extent {extent} of dimension {dim}")
                    });
                }
                if p > a {
                    let q = crd[pu - 1];
                    if q == x {
                        c.push("duplicate", Some(p), || {
                            format!(
                                "crd_{level}: coordinate {x} is stored twice among the children of node {k} (nodes {} and {p})",
                                p - 1
                            )
                        });
                    } else if q > x {
                        c.push("not-sorted", Some(p), || {
                            format!(
                                "crd_{level}: coordinate {x} (node {p}) comes after {q} among the children of node {k}; siblings must increase"
                            )
                        });
                    }
                }
            }
            done = done.max(b);
        }
        behind.flush(usize::MAX);
    }

    fn content(&self) -> Content<'_> {
        Content {
            name: self.name,
            dtype: self.desc.dtype,
            shape: &self.desc.shape,
            nnz: self.desc.nnz,
            statistics: self.desc.statistics,
            buffers: self
                .placed_buffers()
                .into_iter()
                .map(|(n, b, _)| (n, b))
                .collect(),
            values: self.values,
            kv: self.kv,
            mapped: self.mapped,
        }
    }
}
