//! Reading partition composites (issue 13): a head descriptor (layout tag
//! 0x0B, `composition_rule` 1) followed by its members, each an ordinary
//! COO, CSR or CSC tensor with a shard section, read as one logical tensor.
//!
//! The bytes are the codec's ([`crate::hurray::composite`]: the head, the
//! shard section, the partition rules). [`CompositeFile`] opens a file,
//! finds the head, binds the next `member_count` tensors in
//! descriptor-offset order (the spec's binding rule, whatever the index
//! order), validates each member like a plain tensor and the boxes against
//! the head (parent shape, element type, bounds, exact cover, no overlap),
//! and offers `get`, global-order iteration and `verify`. Converting a
//! composite to one plain tensor is [`crate::convert()`]'s; telling a plain
//! file from a composite is [`crate::open`]'s.
//!
//! Nested composites (a member that is itself a head) are refused as
//! unsupported; overlay and group heads too. A file whose writer padded
//! after the head to the data alignment (hurray-io 0.1.0 does; the spec says
//! the first member starts at the next 8-byte boundary) is read, with a
//! warning in [`CompositeFile::warnings`].

// The container and per-tensor rules are the plain reader's own.
use super::layout::{Container, check_decoded, container};
use super::{Backing, Desc, ReadOptions, Tensor, TensorMeta, view_of};
use crate::Value;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::fs::ctx::IoCtx;
use crate::hurray::composite::{
    CompositeHead, MemberBytes, RULE_PARTITION, Shard, ShardFields, check_partition,
    first_member_at, split_member,
};
use crate::hurray::compressed::CompressedDescriptor;
use crate::hurray::descriptor::{field, layout_tag};
use crate::hurray::index::EntryFields;
use crate::hurray::{
    CooDescriptor, DESCRIPTOR_ALIGNMENT, IndexEntry, KvValue, LAYOUT_COMPOSITE, LAYOUT_CSC,
    LAYOUT_CSR, TRAILER_LEN,
};
use crate::read::Problem;
use std::path::Path;

/// A member descriptor, decoded.
struct Decoded {
    desc: Desc,
    /// The shard section and where it was; `None` for a descriptor without.
    shard: Option<(Shard, ShardFields)>,
    /// Bytes of the encoded descriptor, the shard section included.
    len: usize,
}

/// Decode a COO, CSR or CSC descriptor that may carry a shard section:
/// the codec takes the section out and the layout's own codec decodes the
/// rest.
fn decode_member(bytes: &[u8], offset: u64, section: &str) -> Result<Decoded> {
    let decode = |b: &[u8]| -> Result<Desc> {
        Ok(match layout_tag(b) {
            Some(LAYOUT_CSR | LAYOUT_CSC) => {
                Desc::Compressed(CompressedDescriptor::decode(b, offset, section)?)
            }
            _ => Desc::Coo(CooDescriptor::decode(b, offset, section)?),
        })
    };
    Ok(match split_member(bytes, offset, section)? {
        MemberBytes::Plain(b) => {
            let desc = decode(b)?;
            let len = desc.encoded_len();
            Decoded {
                desc,
                shard: None,
                len,
            }
        }
        MemberBytes::Sharded {
            plain,
            shard,
            fields,
            len,
        } => Decoded {
            desc: decode(&plain)?,
            shard: Some((shard, fields)),
            len,
        },
    })
}

/// One bound member: a tensor of any layout the reader handles (its
/// placement checked as a plain file's) and its box.
struct Member {
    meta: TensorMeta,
    shard: Shard,
}

impl Member {
    fn shape(&self) -> &[u64] {
        self.meta.desc.shape()
    }

    fn nnz(&self) -> u64 {
        self.meta.desc.nnz()
    }

    fn dtype(&self) -> DType {
        self.meta.desc.dtype()
    }

    /// Entries stored in row-major order: sorted COO, or CSR.
    fn row_major(&self) -> bool {
        match &self.meta.desc {
            Desc::Coo(d) => d.is_sorted,
            Desc::Compressed(d) => !d.column_major,
            Desc::Csf(_) => false,
        }
    }
}

/// Entries of a composite in global order (see [`CompositeFile::iter`]).
pub type Entries<'a> = Box<dyn Iterator<Item = Result<(Vec<u64>, Value)>> + 'a>;

/// An open partition composite, read as one logical tensor.
pub struct CompositeFile {
    backing: Backing,
    name: String,
    head: CompositeHead,
    kv: Vec<(String, KvValue)>,
    /// In binding order (descriptor offsets ascending).
    members: Vec<Member>,
    /// Member positions sorted by box offset (global order for row bands).
    by_offset: Vec<usize>,
    /// Every member spans whole rows (offset and shape agree with the head
    /// beyond dimension 0): global order is member order.
    row_bands: bool,
    warnings: Vec<String>,
    opts: ReadOptions,
}

impl std::fmt::Debug for CompositeFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompositeFile")
            .field("name", &self.name)
            .field("head", &self.head)
            .field("members", &self.members.len())
            .finish()
    }
}

/// What a file holds, as [`CompositeFile::find`] tells: the typed answer
/// [`crate::open`] branches on.
pub(super) enum Found {
    /// A valid partition composite.
    Composite(CompositeFile),
    /// No composite head (a plain file, or one the plain reader refuses):
    /// its bytes, for the plain reader.
    NoHead(Backing),
}

impl CompositeFile {
    /// Open `path` (mapped, or read into memory with
    /// [`ReadOptions::in_memory`]) and its first composite head, with
    /// default options. A plain file is [`Error::NotComposite`]
    /// ([`crate::open`] reads both).
    pub fn open(path: impl AsRef<Path>) -> Result<CompositeFile> {
        Self::open_with(path, ReadOptions::default())
    }

    /// [`CompositeFile::open`] with options (permissive: a broken cover or
    /// overlap is let through, and reported by [`CompositeFile::verify`]).
    pub fn open_with(path: impl AsRef<Path>, opts: ReadOptions) -> Result<CompositeFile> {
        let (backing, _) = Backing::load(&IoCtx::new(), path.as_ref(), opts)?;
        Self::find(backing, opts)?.composite()
    }

    /// Validate a composite held in memory; a plain file is
    /// [`Error::NotComposite`].
    pub fn from_bytes(bytes: &[u8], opts: ReadOptions) -> Result<CompositeFile> {
        Self::find(Backing::aligned_copy(bytes)?, opts)?.composite()
    }

    /// The composite in `backing`, or [`Found::NoHead`] when no index entry
    /// is a composite head; the container's rules are checked either way.
    pub(super) fn find(backing: Backing, opts: ReadOptions) -> Result<Found> {
        let bytes = backing.bytes();
        let Container {
            header,
            trailer,
            entries,
            kv,
            ..
        } = container(bytes)?;
        let end = bytes.len() as u64 - TRAILER_LEN;
        // Each entry with its position in the index and where its fields
        // are (for messages), then in descriptor order (binding order).
        let mut at = EntryFields::first(trailer.index_offset);
        let mut entries: Vec<(IndexEntry, usize, EntryFields)> = entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                let f = EntryFields::at(at, e.name.len());
                at = f.end;
                (e, i, f)
            })
            .collect();
        entries.sort_by_key(|(e, ..)| e.descriptor_offset);
        let is_head = |e: &IndexEntry| {
            let d = bytes.get(e.descriptor_offset as usize..).unwrap_or(&[]);
            layout_tag(d) == Some(LAYOUT_COMPOSITE)
        };
        let Some(h) = entries.iter().position(|(e, ..)| is_head(e)) else {
            return Ok(Found::NoHead(backing));
        };
        let he = &entries[h].0;
        let hsec = format!("composite head {:?}", he.name);
        if he.descriptor_offset >= end || he.descriptor_offset % DESCRIPTOR_ALIGNMENT != 0 {
            return Err(Error::invalid(
                hsec,
                he.descriptor_offset,
                "descriptor_offset outside the tensor region or not 8-aligned",
            ));
        }
        let head = CompositeHead::decode(
            &bytes[he.descriptor_offset as usize..end as usize],
            he.descriptor_offset,
            &hsec,
        )?;
        if head.rule != RULE_PARTITION {
            return Err(Error::Unsupported(format!(
                "{hsec}: composition rule {} (only partition, 1, is supported)",
                head.rule
            )));
        }
        let head_end = he.descriptor_offset + u64::from(he.descriptor_length);
        let n = head.member_count as usize;
        if entries.len() - h - 1 < n {
            return Err(Error::invalid(
                hsec,
                he.descriptor_offset,
                format!(
                    "torn composite: {} members declared, {} tensors follow",
                    n,
                    entries.len() - h - 1
                ),
            ));
        }
        let mut warnings = Vec::new();
        let align = u64::from(header.alignment);
        let mut members = Vec::with_capacity(n);
        for (e, i, f) in &entries[h + 1..h + 1 + n] {
            members.push(bind_member(bytes, e, *i, *f, &head, align, end, opts)?);
        }
        if let Some((first, ..)) = entries.get(h + 1).filter(|_| n > 0) {
            let want = first_member_at(head_end).unwrap_or(u64::MAX);
            if first.descriptor_offset != want {
                warnings.push(format!(
                    "writer padded after the composite head: first member at byte {}, the spec puts it at {want} (the next 8-byte boundary); hurray-io 0.1.0 writes files this way",
                    first.descriptor_offset
                ));
            }
        }
        let boxes: Vec<(&[u64], &[u64])> = members
            .iter()
            .map(|m| (m.shard.offset.as_slice(), m.shape()))
            .collect();
        if let Some(rule) = check_partition(&head.shape, &boxes) {
            if !opts.permissive {
                return Err(Error::invalid(hsec, he.descriptor_offset, rule));
            }
            warnings.push(rule);
        }
        let mut by_offset: Vec<usize> = (0..members.len()).collect();
        by_offset.sort_by(|&a, &b| members[a].shard.offset.cmp(&members[b].shard.offset));
        let row_bands = members.iter().all(|m| {
            m.row_major()
                && m.shard.offset[1..].iter().all(|&o| o == 0)
                && m.shape()[1..] == head.shape[1..]
        });
        Ok(Found::Composite(CompositeFile {
            name: he.name.clone(),
            head,
            kv,
            members,
            by_offset,
            row_bands,
            warnings,
            opts,
            backing,
        }))
    }

    /// Name of the head in the index.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Logical shape.
    pub fn shape(&self) -> &[u64] {
        &self.head.shape
    }

    /// Logical element type.
    pub fn dtype(&self) -> DType {
        self.head.dtype
    }

    /// The head descriptor.
    pub fn head(&self) -> &CompositeHead {
        &self.head
    }

    /// KV entries of the file.
    pub fn kv(&self) -> &[(String, KvValue)] {
        &self.kv
    }

    /// Things a reader let through but that a writer should not do.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Stored entries, all members together.
    pub fn nnz(&self) -> u64 {
        self.members.iter().map(Member::nnz).sum()
    }

    /// Members in binding order: (tensor view with local indices, of its
    /// own layout, and box offset).
    pub fn members(&self) -> impl Iterator<Item = (Tensor<'_>, &[u64])> {
        self.members
            .iter()
            .map(|m| (self.view(m), m.shard.offset.as_slice()))
    }

    fn view<'s>(&'s self, m: &'s Member) -> Tensor<'s> {
        view_of(&self.backing, &m.meta, &self.kv, self.opts.permissive, None)
    }

    /// Value at a global index: the member whose box holds it, at the
    /// local index; a zero when nothing is stored.
    pub fn get(&self, idx: &[u64]) -> Result<Value> {
        if idx.len() != self.head.shape.len() {
            return Err(Error::WrongIndexCount {
                position: idx.to_vec(),
                expected: self.head.shape.len(),
                got: idx.len(),
            });
        }
        if let Some(d) = (0..idx.len()).find(|&d| idx[d] >= self.head.shape[d]) {
            return Err(Error::PositionOutOfRange {
                position: idx.to_vec(),
                dim: d,
                index: idx[d],
                extent: self.head.shape[d],
            });
        }
        for m in &self.members {
            let shape = m.shape();
            let inside = (0..idx.len())
                .all(|d| idx[d] >= m.shard.offset[d] && idx[d] - m.shard.offset[d] < shape[d]);
            if inside {
                let local: Vec<u64> = idx
                    .iter()
                    .zip(&m.shard.offset)
                    .map(|(i, o)| i - o)
                    .collect();
                return self.view(m).get(&local);
            }
        }
        Err(Error::invalid(
            format!("composite {:?}", self.name),
            0,
            format!("no member covers index {idx:?} (open with permissive was used)"),
        ))
    }

    /// Every stored entry in global lexicographic order: (global index,
    /// value). Row-band partitions of row-major members (sorted COO or
    /// CSR: what coo-assembler writes) stream member after member; any
    /// other partition (CSC members among them) is collected and sorted in
    /// memory first (O(nnz) memory). A CSR/CSC member's broken pointer is
    /// an `Err` item, after which the iteration ends.
    pub fn iter(&self) -> Entries<'_> {
        if self.row_bands {
            return Box::new(
                self.by_offset
                    .iter()
                    .flat_map(move |&k| self.global_iter(&self.members[k])),
            );
        }
        let all: Result<Vec<(Vec<u64>, Value)>> = self.entries_unordered().collect();
        match all {
            Ok(mut all) => {
                all.sort_by(|a, b| a.0.cmp(&b.0));
                Box::new(all.into_iter().map(Ok))
            }
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }

    /// Whether [`CompositeFile::iter`] streams member after member (row
    /// bands of row-major members) rather than sorting in memory.
    pub(crate) fn streams_in_order(&self) -> bool {
        self.row_bands
    }

    /// Every stored entry with its global index, member after member, each
    /// in its storage order (no global order, no memory beyond the
    /// iterators'): for consumers that sort themselves.
    pub(crate) fn entries_unordered(&self) -> Entries<'_> {
        Box::new(self.members.iter().flat_map(move |m| self.global_iter(m)))
    }

    /// A member's entries with global indices, in its storage order.
    fn global_iter<'s>(&'s self, m: &'s Member) -> Entries<'s> {
        let off = &m.shard.offset;
        // Local index + shard offset, which an unverified member (opened
        // permissively) may push past u64: an error item, not a wrap.
        let global = move |local: &[u64]| -> Result<Vec<u64>> {
            local
                .iter()
                .zip(off)
                .map(|(&a, &b)| {
                    a.checked_add(b).ok_or_else(|| {
                        Error::invalid(
                            format!("member {:?} of composite {:?}", m.meta.name, self.name),
                            0,
                            format!("local index {a} + shard offset {b} overflows u64"),
                        )
                    })
                })
                .collect()
        };
        let view = self.view(m);
        // A damaged member buffer is an error item, not wrong entries.
        if let Err(e) = view.check_checksums() {
            return Box::new(std::iter::once(Err(e)));
        }
        match view {
            Tensor::Coo(t) => Box::new(t.iter().map(move |(i, v)| Ok((global(i)?, v)))),
            Tensor::Compressed(t) => Box::new(
                t.iter()
                    .map(move |e| e.and_then(|(i, j, v)| Ok((global(&[i, j])?, v)))),
            ),
            other => Box::new(std::iter::once(Err(
                other.not_served("a composite", "COO, CSR and CSC")
            ))),
        }
    }

    /// Content checks: each member's own (bounds, order, duplicates,
    /// pointers for CSR/CSC, statistics, KV checksums) and the partition
    /// rules when the file was opened permissively. Empty when the
    /// composite is valid.
    pub fn verify(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        let boxes: Vec<(&[u64], &[u64])> = self
            .members
            .iter()
            .map(|m| (m.shard.offset.as_slice(), m.shape()))
            .collect();
        if let Some(rule) = check_partition(&self.head.shape, &boxes) {
            out.push(Problem::new(
                "composite-partition",
                Some(self.name.clone()),
                None,
                rule,
            ));
        }
        for m in &self.members {
            out.extend(self.view(m).verify());
        }
        out
    }
}

impl Found {
    fn composite(self) -> Result<CompositeFile> {
        match self {
            Found::Composite(c) => Ok(c),
            Found::NoHead(_) => Err(Error::NotComposite),
        }
    }
}

/// Decode member `e` (at position `i` of the index, its fields at
/// `fields`), check it against the head and place its buffers by the
/// plain reader's rules.
#[allow(clippy::too_many_arguments)]
fn bind_member(
    bytes: &[u8],
    e: &IndexEntry,
    i: usize,
    fields: EntryFields,
    head: &CompositeHead,
    align: u64,
    end: u64,
    opts: ReadOptions,
) -> Result<Member> {
    let sec = format!("composite member {:?}", e.name);
    let d_off = e.descriptor_offset;
    if d_off >= end || d_off % DESCRIPTOR_ALIGNMENT != 0 {
        return Err(Error::invalid(
            sec,
            d_off,
            "descriptor_offset outside the tensor region or not 8-aligned",
        ));
    }
    let Decoded { desc, shard, len } =
        decode_member(&bytes[d_off as usize..end as usize], d_off, &sec)?;
    let Some((shard, at)) = shard else {
        return Err(Error::invalid(
            sec,
            d_off + field::FLAGS,
            "a partition member must carry a shard section (HAS_SHARD)",
        ));
    };
    if shard.parent_shape != head.shape {
        return Err(Error::invalid(
            sec,
            d_off + at.parent_shape,
            format!(
                "parent_shape {:?} differs from the head's shape {:?}",
                shard.parent_shape, head.shape
            ),
        ));
    }
    let meta = check_decoded(bytes, e, i, fields, end, align, opts, desc, len as u64)?;
    let m = Member { meta, shard };
    if m.dtype() != head.dtype {
        return Err(Error::invalid(
            sec,
            d_off + field::TYPE_TAG,
            format!(
                "element type {} differs from the head's {}",
                m.dtype(),
                head.dtype
            ),
        ));
    }
    Ok(m)
}
