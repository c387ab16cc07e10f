//! Partition composites (issue 13): a head descriptor (layout tag 0x0B,
//! `composition_rule` 1) followed by its members, each an ordinary COO,
//! CSR or CSC tensor with a shard section, read as one logical tensor.
//!
//! Codec (pure bytes): [`CompositeHead`] and the shard section of a member
//! ([`encode_member`]; `decode_member` takes it out again and hands the
//! rest to the layout's own codec). Reader: [`CompositeFile`]
//! opens a file, finds the head, binds the next `member_count` tensors in
//! descriptor-offset order (the spec's binding rule, whatever the index
//! order), validates each member like a plain tensor and the boxes against
//! the head (parent shape, element type, bounds, exact cover, no overlap),
//! and offers `get`, global-order iteration, `verify` and conversion to one
//! plain COO or CSR tensor.
//!
//! Nested composites (a member that is itself a head) are refused as
//! unsupported; overlay and group heads too. A file whose writer padded
//! after the head to the data alignment (hurray-io 0.1.0 does; the spec says
//! the first member starts at the next 8-byte boundary) is read, with a
//! warning in [`CompositeFile::warnings`].

// The container and per-tensor rules are the plain reader's own.
use super::layout::{check_decoded, container, Container};
use super::{view_of, Backing, Desc, ReadOptions, Tensor, TensorMeta};
use crate::element::DType;
use crate::error::{Error, Result};
use crate::fs::ctx::IoCtx;
use crate::hurray::compressed::{compressed_descriptor_len, CompressedDescriptor};
use crate::hurray::descriptor::{descriptor_len, read_prelude};
use crate::hurray::index::EntryFields;
use crate::hurray::{
    align_up, ByteReader, CooDescriptor, IndexEntry, KvValue, LAYOUT_COO, LAYOUT_CSC, LAYOUT_CSR,
    MAGIC, MAX_RANK, TRAILER_LEN,
};
use crate::options::OutputLayout;
use crate::read::Problem;
use crate::write::{FileSummary, FileWriter, WriteOptions};
use crate::Value;
use std::path::Path;

/// Layout tag of a composite head.
pub const LAYOUT_COMPOSITE: u8 = 0x0B;
/// `composition_rule` of a partition.
pub const RULE_PARTITION: u8 = 0x01;
/// Descriptor flag bit 1: a shard section follows the buffer table.
pub const DESC_HAS_SHARD: u32 = 1 << 1;
const DESC_QUANTIZED: u32 = 1 << 0;
const DESC_EXTENSION_TYPE: u32 = 1 << 2;
const DESC_HAS_STATISTICS: u32 = 1 << 3;
const DESC_COMPOSITE_MEMBER: u32 = 1 << 4;

/// A composite head descriptor (no buffers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompositeHead {
    /// Logical element type.
    pub dtype: DType,
    /// Logical shape.
    pub shape: Vec<u64>,
    /// 1 partition, 2 overlay, 3 group.
    pub rule: u8,
    /// Overlay only; 0 otherwise.
    pub combine_op: u8,
    /// Members that follow the head.
    pub member_count: u32,
}

impl CompositeHead {
    /// Encoded length for a rank: 37 + 8 rank bytes (53 for a matrix).
    pub fn encoded_len(rank: usize) -> usize {
        37 + 8 * rank
    }

    /// Encode the head.
    pub fn encode(&self) -> Vec<u8> {
        let len = Self::encoded_len(self.shape.len());
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(len as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.push(self.dtype.tag());
        out.push(LAYOUT_COMPOSITE);
        out.extend_from_slice(&(self.shape.len() as u32).to_le_bytes());
        for d in &self.shape {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&0u64.to_le_bytes()); // byte_offset
        out.extend_from_slice(&[self.rule, self.combine_op, 0, 0]);
        out.extend_from_slice(&self.member_count.to_le_bytes());
        out.push(0); // buffer_count
        debug_assert_eq!(out.len(), len);
        out
    }

    /// Decode a head at absolute `offset` (bytes may run past its end).
    /// Refuses what the spec says a reader must refuse.
    pub fn decode(bytes: &[u8], offset: u64, section: &str) -> Result<CompositeHead> {
        let mut r = ByteReader::new(bytes, offset, section);
        let (len, flags) = read_prelude(&mut r, section)?;
        if flags & (DESC_QUANTIZED | DESC_COMPOSITE_MEMBER) != 0 {
            return Err(r.err_at(
                10,
                format!("composite head flags 0x{flags:08x}: a head sets neither HAS_QUANTIZATION nor HAS_COMPOSITE_MEMBER"),
            ));
        }
        if flags & DESC_HAS_SHARD != 0 {
            return Err(Error::Unsupported(format!(
                "{section}: a nested composite (head with a shard section)"
            )));
        }
        let dtype = DType::from_tag(r.u8("element type")?)?;
        let layout = r.u8("layout tag")?;
        if layout != LAYOUT_COMPOSITE {
            return Err(r.err_at(15, format!("layout tag 0x{layout:02x} is not a composite head")));
        }
        let rank = r.u32("rank")? as usize;
        if rank == 0 || rank > MAX_RANK {
            return Err(r.err_at(16, format!("rank {rank} is out of 1..=64")));
        }
        let extra = if flags & DESC_HAS_STATISTICS != 0 { 72 } else { 0 };
        if len != Self::encoded_len(rank) + extra {
            return Err(r.err_at(6, format!("descriptor_length {len} does not fit a rank-{rank} head")));
        }
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(r.u64("shape")?);
        }
        if r.u64("byte_offset")? != 0 {
            return Err(r.err("a composite head's byte_offset must be 0"));
        }
        let rule = r.u8("composition_rule")?;
        let combine_op = r.u8("combine_op")?;
        r.reserved(2, "composite head reserved bytes")?;
        let member_count = r.u32("member_count")?;
        let bc = r.u8("buffer_count")?;
        match rule {
            1 | 3 if combine_op != 0 => {
                return Err(r.err(format!("combine_op {combine_op} must be 0 for rule {rule}")))
            }
            2 if !(1..=2).contains(&combine_op) => {
                return Err(r.err(format!("overlay combine_op {combine_op} must be 1 or 2")))
            }
            1..=3 => {}
            _ => return Err(r.err(format!("composition_rule 0x{rule:02x} is reserved or invalid"))),
        }
        if member_count == u32::MAX {
            return Err(r.err("member_count 0xFFFFFFFF (open composite) is reserved"));
        }
        if bc != 0 {
            return Err(r.err(format!("a composite head owns no buffers; buffer_count is {bc}")));
        }
        Ok(CompositeHead {
            dtype,
            shape,
            rule,
            combine_op,
            member_count,
        })
    }
}

/// A member's shard section: its box in the head's index space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Must equal the head's shape.
    pub parent_shape: Vec<u64>,
    /// Where the member's box starts (global = local + offset).
    pub offset: Vec<u64>,
}

/// Add the shard section to `plain`, the encoded descriptor of a COO, CSR
/// or CSC tensor without quantization or extension-type sections (what
/// this crate writes): `HAS_SHARD` set, the section between the buffer
/// table and the statistics, `descriptor_length` grown by 16 * rank.
pub fn encode_member(plain: &[u8], shard: &Shard) -> Vec<u8> {
    let r = shard.parent_shape.len();
    let base = match plain.get(15) {
        Some(&(LAYOUT_CSR | LAYOUT_CSC)) => compressed_descriptor_len(false),
        _ => descriptor_len(r, false),
    };
    let mut out = Vec::with_capacity(plain.len() + 16 * r);
    out.extend_from_slice(&plain[..base]);
    for v in shard.parent_shape.iter().chain(&shard.offset) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&plain[base..]);
    let len = out.len() as u32;
    out[6..10].copy_from_slice(&len.to_le_bytes());
    let flags = u32::from_le_bytes([out[10], out[11], out[12], out[13]]) | DESC_HAS_SHARD;
    out[10..14].copy_from_slice(&flags.to_le_bytes());
    out
}

/// Decode a COO, CSR or CSC descriptor that may carry a shard section:
/// the section is taken out and the rest decoded by the layout's own
/// codec. Returns the descriptor, the shard, and the encoded length.
fn decode_member(bytes: &[u8], offset: u64, section: &str) -> Result<(Desc, Option<Shard>, usize)> {
    let mut r = ByteReader::new(bytes, offset, section);
    r.take(10, "descriptor start")?;
    let flags = r.u32("flags")?;
    r.u8("element type")?;
    let layout = r.u8("layout tag")?;
    let rank = r.u32("rank")? as usize;
    if layout == LAYOUT_COMPOSITE {
        return Err(Error::Unsupported(format!(
            "{section}: nested composite member (only one level is supported)"
        )));
    }
    let compressed = matches!(layout, LAYOUT_CSR | LAYOUT_CSC);
    if !compressed && layout != LAYOUT_COO {
        return Err(Error::Unsupported(format!(
            "{section}: member layout 0x{layout:02x}; composites of COO, CSR and CSC members are supported"
        )));
    }
    if flags & DESC_COMPOSITE_MEMBER != 0 {
        return Err(r.err_at(10, "a partition member must not set HAS_COMPOSITE_MEMBER"));
    }
    let decode = |b: &[u8]| -> Result<Desc> {
        Ok(if compressed {
            Desc::Compressed(CompressedDescriptor::decode(b, offset, section)?)
        } else {
            Desc::Coo(CooDescriptor::decode(b, offset, section)?)
        })
    };
    if flags & DESC_HAS_SHARD == 0 || rank == 0 || rank > MAX_RANK {
        // The codec refuses what is wrong with it (rank included).
        let d = decode(bytes)?;
        let n = d.encoded_len();
        return Ok((d, None, n));
    }
    if flags & (DESC_QUANTIZED | DESC_EXTENSION_TYPE) != 0 {
        return Err(Error::Unsupported(format!(
            "{section}: descriptor flags 0x{flags:08x}: quantized and extension-type members are not supported"
        )));
    }
    if compressed && rank != 2 {
        return Err(r.err_at(16, format!("rank {rank}: CSR and CSC are defined for rank 2 only")));
    }
    let base = if compressed {
        compressed_descriptor_len(false)
    } else {
        descriptor_len(rank, false)
    };
    let shard_len = 16 * rank;
    let stats = if flags & DESC_HAS_STATISTICS != 0 { 72 } else { 0 };
    let total = base + shard_len + stats;
    if bytes.len() < total {
        return Err(r.err_at(0, format!("truncated: a sharded rank-{rank} descriptor needs {total} bytes")));
    }
    let declared = u32::from_le_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]) as usize;
    if declared != total {
        return Err(r.err_at(6, format!("descriptor_length {declared} does not match a sharded rank-{rank} descriptor ({total})")));
    }
    let mut plain = Vec::with_capacity(total - shard_len);
    plain.extend_from_slice(&bytes[..base]);
    plain.extend_from_slice(&bytes[base + shard_len..total]);
    plain[6..10].copy_from_slice(&((total - shard_len) as u32).to_le_bytes());
    plain[10..14].copy_from_slice(&(flags & !DESC_HAS_SHARD).to_le_bytes());
    let d = decode(&plain)?;
    let word = |k: usize| {
        let p = base + 8 * k;
        let mut a = [0u8; 8];
        a.copy_from_slice(&bytes[p..p + 8]);
        u64::from_le_bytes(a)
    };
    let shard = Shard {
        parent_shape: (0..rank).map(word).collect(),
        offset: (rank..2 * rank).map(word).collect(),
    };
    Ok((d, Some(shard), total))
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

fn volume(shape: &[u64]) -> u128 {
    shape
        .iter()
        .try_fold(1u128, |a, &d| a.checked_mul(u128::from(d)))
        .unwrap_or(u128::MAX)
}

/// Exact cover and no overlap of `boxes` (offset, shape) over `shape`:
/// every box inside, pairwise disjoint, volumes adding up to the whole.
/// Returns the rule broken, if any.
pub fn check_partition(shape: &[u64], boxes: &[(&[u64], &[u64])]) -> Option<String> {
    let mut total = 0u128;
    for (k, (off, sh)) in boxes.iter().enumerate() {
        for d in 0..shape.len() {
            if off[d].checked_add(sh[d]).is_none_or(|e| e > shape[d]) {
                return Some(format!(
                    "member {k}: box {off:?} + {sh:?} leaves the head's shape {shape:?} in dimension {d}"
                ));
            }
        }
        total = total.saturating_add(volume(sh));
    }
    for (a, (ao, ash)) in boxes.iter().enumerate() {
        if volume(ash) == 0 {
            continue;
        }
        for (b, (bo, bsh)) in boxes.iter().enumerate().skip(a + 1) {
            let meet = (0..shape.len()).all(|d| ao[d] < bo[d] + bsh[d] && bo[d] < ao[d] + ash[d]);
            if meet && volume(bsh) != 0 {
                return Some(format!("members {a} and {b} overlap (partition rule: no overlap)"));
            }
        }
    }
    if total != volume(shape) {
        return Some(format!(
            "member boxes hold {total} elements, the head's shape {shape:?} {} (partition rule: exact cover)",
            volume(shape)
        ));
    }
    None
}

impl CompositeFile {
    /// The message of the `Unsupported` error [`CompositeFile::open`]
    /// returns for a file without a composite head (a plain file): callers
    /// that try a file as a composite first recognise it by this.
    pub const NO_HEAD: &'static str = "the file holds no composite head";

    /// Map `path` and open its first composite head.
    pub fn open(path: impl AsRef<Path>) -> Result<CompositeFile> {
        Self::open_with(path, ReadOptions::default())
    }

    /// [`CompositeFile::open`] with options (permissive: a broken cover or
    /// overlap is let through, and reported by [`CompositeFile::verify`]).
    pub fn open_with(path: impl AsRef<Path>, opts: ReadOptions) -> Result<CompositeFile> {
        let path = path.as_ref();
        let io = IoCtx::new();
        let file = io.open(path)?;
        // SAFETY: read-only private map; truncation by another process
        // raises SIGBUS, as documented for HurrayFile::open.
        let map = unsafe { io.map(&file, path) }?;
        Self::from_backing(Backing::Mmap(map), opts)
    }

    /// Validate a composite held in memory.
    pub fn from_bytes(bytes: &[u8], opts: ReadOptions) -> Result<CompositeFile> {
        Self::from_backing(Backing::aligned_copy(bytes)?, opts)
    }

    /// Whether `bytes` hold a composite head (any index entry whose
    /// descriptor has layout tag 0x0B). Cheap; no validation.
    pub fn is_composite(bytes: &[u8]) -> bool {
        container(bytes).is_ok_and(|Container { entries, .. }| {
            entries.iter().any(|e| {
                let p = e.descriptor_offset as usize + 15;
                bytes.get(p) == Some(&LAYOUT_COMPOSITE)
            })
        })
    }

    /// Whether the file at `path` holds a composite head (see
    /// [`CompositeFile::is_composite`]); maps it, reads only its index.
    pub fn probe(path: impl AsRef<Path>) -> Result<bool> {
        let path = path.as_ref();
        let io = IoCtx::new();
        let file = io.open(path)?;
        // SAFETY: as in `open_with`.
        let map = unsafe { io.map(&file, path) }?;
        Ok(Self::is_composite(&map))
    }

    fn from_backing(backing: Backing, opts: ReadOptions) -> Result<CompositeFile> {
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
        let layout_of = |e: &IndexEntry| bytes.get(e.descriptor_offset as usize + 15).copied();
        let Some(h) = entries.iter().position(|(e, ..)| layout_of(e) == Some(LAYOUT_COMPOSITE)) else {
            return Err(Error::Unsupported(Self::NO_HEAD.into()));
        };
        let he = &entries[h].0;
        let hsec = format!("composite head {:?}", he.name);
        if he.descriptor_offset >= end || he.descriptor_offset % 8 != 0 {
            return Err(Error::invalid(hsec, he.descriptor_offset, "descriptor_offset outside the tensor region or not 8-aligned"));
        }
        let head = CompositeHead::decode(&bytes[he.descriptor_offset as usize..end as usize], he.descriptor_offset, &hsec)?;
        if head.rule != RULE_PARTITION {
            return Err(Error::Unsupported(format!(
                "{hsec}: composition rule {} (only partition, 1, is supported)",
                head.rule
            )));
        }
        let head_end = he.descriptor_offset + u64::from(he.descriptor_length);
        let n = head.member_count as usize;
        if entries.len() - h - 1 < n {
            return Err(Error::invalid(hsec, he.descriptor_offset, format!(
                "torn composite: {} members declared, {} tensors follow", n, entries.len() - h - 1
            )));
        }
        let mut warnings = Vec::new();
        let align = u64::from(header.alignment);
        let mut members = Vec::with_capacity(n);
        for (e, i, f) in &entries[h + 1..h + 1 + n] {
            members.push(bind_member(bytes, e, *i, *f, &head, align, end, opts)?);
        }
        if let Some((first, ..)) = entries.get(h + 1).filter(|_| n > 0) {
            let want = align_up(head_end, 8).unwrap_or(u64::MAX);
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
        Ok(CompositeFile {
            name: he.name.clone(),
            head,
            kv,
            members,
            by_offset,
            row_bands,
            warnings,
            opts,
            backing,
        })
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
        self.members.iter().map(|m| (self.view(m), m.shard.offset.as_slice()))
    }

    fn view<'s>(&'s self, m: &'s Member) -> Tensor<'s> {
        view_of(&self.backing, &m.meta, &self.kv, self.opts.permissive)
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
            let inside = (0..idx.len()).all(|d| {
                idx[d] >= m.shard.offset[d] && idx[d] - m.shard.offset[d] < shape[d]
            });
            if inside {
                let local: Vec<u64> = idx.iter().zip(&m.shard.offset).map(|(i, o)| i - o).collect();
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
        let all: Result<Vec<(Vec<u64>, Value)>> =
            self.members.iter().flat_map(|m| self.global_iter(m)).collect();
        match all {
            Ok(mut all) => {
                all.sort_by(|a, b| a.0.cmp(&b.0));
                Box::new(all.into_iter().map(Ok))
            }
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
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
        match self.view(m) {
            Tensor::Coo(t) => Box::new(t.iter().map(move |(i, v)| Ok((global(i)?, v)))),
            Tensor::Compressed(t) => {
                Box::new(t.iter().map(move |e| e.and_then(|(i, j, v)| Ok((global(&[i, j])?, v)))))
            }
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
            out.push(Problem::new("composite-partition", Some(self.name.clone()), None, rule));
        }
        for m in &self.members {
            out.extend(self.view(m).verify());
        }
        out
    }

    /// Write the logical tensor as one plain, sorted COO tensor called
    /// `tensor_name` to `path` (atomically, through [`FileWriter`]; `path`
    /// may be this composite's file, converted in place as `convert` does).
    pub fn to_coo(&self, path: impl AsRef<Path>, tensor_name: &str, opts: WriteOptions) -> Result<FileSummary> {
        self.to_plain(path, tensor_name, OutputLayout::Coo, opts)
    }

    /// Write the logical tensor as one plain tensor of `layout`, COO or
    /// CSR (both are written in row-major order, which is the order of
    /// [`CompositeFile::iter`]). CSC needs column-major order: it is an
    /// [`Error::Unsupported`] here; convert the COO output instead
    /// (`coo-assembler convert` does both steps).
    pub fn to_plain(
        &self,
        path: impl AsRef<Path>,
        tensor_name: &str,
        layout: OutputLayout,
        opts: WriteOptions,
    ) -> Result<FileSummary> {
        if layout == OutputLayout::Csc {
            return Err(Error::Unsupported(
                "a composite is written to one COO or CSR tensor directly; for CSC, convert the COO result (coo-assembler convert does it)".into(),
            ));
        }
        layout.check_rank(self.head.shape.len())?;
        let mut fw = FileWriter::create(path, opts)?;
        let mut tw = fw.begin_tensor_as(tensor_name, self.head.dtype, &self.head.shape, layout)?;
        for e in self.iter() {
            let (idx, v) = e?;
            tw.push_value(&idx, v)?;
        }
        tw.finish()?;
        fw.finish()
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
    if d_off >= end || d_off % 8 != 0 {
        return Err(Error::invalid(sec, d_off, "descriptor_offset outside the tensor region or not 8-aligned"));
    }
    let (desc, shard, dlen) = decode_member(&bytes[d_off as usize..end as usize], d_off, &sec)?;
    let Some(shard) = shard else {
        return Err(Error::invalid(sec, d_off + 10, "a partition member must carry a shard section (HAS_SHARD)"));
    };
    if shard.parent_shape != head.shape {
        return Err(Error::invalid(sec, d_off, format!(
            "parent_shape {:?} differs from the head's shape {:?}", shard.parent_shape, head.shape
        )));
    }
    let meta = check_decoded(bytes, e, i, fields, end, align, opts, desc, dlen as u64)?;
    let m = Member { meta, shard };
    if m.dtype() != head.dtype {
        return Err(Error::invalid(sec, d_off + 14, format!(
            "element type {} differs from the head's {}", m.dtype(), head.dtype
        )));
    }
    Ok(m)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::hurray::BufferHandle;

    #[test]
    fn head_round_trip_is_53_bytes_for_a_matrix() {
        let h = CompositeHead {
            dtype: DType::F64,
            shape: vec![10, 7],
            rule: RULE_PARTITION,
            combine_op: 0,
            member_count: 3,
        };
        let b = h.encode();
        assert_eq!(b.len(), 53);
        assert_eq!(CompositeHead::decode(&b, 64, "h").unwrap(), h);
        for (pos, v) in [(44usize, 0u8), (44, 9), (45, 1), (46, 1), (52, 1)] {
            let mut bad = b.clone();
            bad[pos] = v;
            assert!(CompositeHead::decode(&bad, 64, "h").is_err(), "byte {pos} = {v}");
        }
        let mut open = b.clone();
        open[48..52].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(CompositeHead::decode(&open, 64, "h").is_err());
    }

    #[test]
    fn member_shard_round_trip() {
        let d = CooDescriptor {
            dtype: DType::F32,
            shape: vec![4, 9],
            nnz: 2,
            is_sorted: true,
            values: BufferHandle::cpu(8, 4096),
            indices: BufferHandle::cpu(32, 4096),
            statistics: Some(crate::Statistics::default()),
        };
        let s = Shard {
            parent_shape: vec![12, 9],
            offset: vec![8, 0],
        };
        let b = encode_member(&d.encode(), &s);
        assert_eq!(b.len(), 77 + 16 + 32 + 72);
        let (d2, s2, n) = decode_member(&b, 0, "m").unwrap();
        assert!(matches!(d2, Desc::Coo(ref x) if *x == d));
        assert_eq!((s2, n), (Some(s.clone()), b.len()));
        // CSR: the section goes after the 109 bytes of descriptor and
        // buffer table, before the statistics.
        let c = CompressedDescriptor {
            column_major: false,
            dtype: DType::F64,
            shape: [4, 9],
            nnz: 3,
            values: BufferHandle::cpu(24, 4096),
            indices: BufferHandle::cpu(24, 4096),
            pointers: BufferHandle::cpu(40, 4096),
            statistics: Some(crate::Statistics::default()),
        };
        let b = encode_member(&c.encode(), &s);
        assert_eq!(b.len(), 109 + 32 + 72);
        assert_eq!(&b[109..117], &12u64.to_le_bytes());
        assert_eq!(&b[125..133], &8u64.to_le_bytes());
        let (c2, s2, n) = decode_member(&b, 0, "m").unwrap();
        assert!(matches!(c2, Desc::Compressed(ref x) if *x == c));
        assert_eq!((s2, n), (Some(s), b.len()));
        // A CSR member of another rank is refused with the rule.
        let mut bad = b.clone();
        bad[16] = 3;
        assert!(decode_member(&bad, 0, "m").unwrap_err().to_string().contains("rank 2"));
    }

    #[test]
    fn partition_rules() {
        let shape = [10u64, 4];
        let ok: Vec<(&[u64], &[u64])> = vec![(&[0, 0], &[6, 4]), (&[6, 0], &[4, 4])];
        assert_eq!(check_partition(&shape, &ok), None);
        let gap: Vec<(&[u64], &[u64])> = vec![(&[0, 0], &[6, 4]), (&[7, 0], &[3, 4])];
        assert!(check_partition(&shape, &gap).unwrap().contains("exact cover"));
        let over: Vec<(&[u64], &[u64])> = vec![(&[0, 0], &[6, 4]), (&[5, 0], &[5, 4])];
        assert!(check_partition(&shape, &over).unwrap().contains("overlap"));
        let out: Vec<(&[u64], &[u64])> = vec![(&[0, 0], &[6, 4]), (&[6, 0], &[5, 4])];
        assert!(check_partition(&shape, &out).unwrap().contains("leaves"));
    }
}
