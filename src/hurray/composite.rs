//! Partition composites (spec `layouts/composite.md`, `metadata.md` § Shard
//! Section): the head descriptor, the shard section of a member and the
//! rules that bind members to a head, bytes in, bytes out, no I/O. The
//! reader (`crate::read::composite`) and the writers (`crate::composite`,
//! the MPI job) decide where these bytes go in a file.
//!
//! # Head (layout tag 0x0B, no buffers)
//! ```text
//! 0   common fields (descriptor::field): magic, version, descriptor_length,
//!     flags, type_tag, layout_tag = 0x0B, rank
//! 20  shape u64[r]
//!     byte_offset u64 = 0, composition_rule u8, combine_op u8,
//!     reserved u8[2] = 0, member_count u32, buffer_count u8 = 0
//!     [statistics 72 B when HAS_STATISTICS]
//! ```
//! 37 + 8 r bytes without statistics (53 for a matrix); [`head_field`]
//! names each offset.
//!
//! # Member
//! An ordinary COO, CSR or CSC descriptor with `HAS_SHARD` set and the
//! shard section (`parent_shape: u64[r]`, then `shard_offset: u64[r]`) right
//! after its buffer table, before its statistics ([`ShardFields`]).
//! [`encode_member`] puts the section into a plain descriptor;
//! [`split_member`] takes it out again, so that the layout's own codec
//! decodes the rest. Members follow their head at the next 8-byte boundary
//! ([`first_member_at`]) and each other in descriptor order.

use super::compressed::compressed_descriptor_len;
use super::descriptor::{
    DESC_COMPOSITE_MEMBER, DESC_EXTENSION_TYPE, DESC_HAS_SHARD, DESC_HAS_STATISTICS,
    DESC_QUANTIZED, descriptor_len, field, layout_tag, length_and_flags, read_dtype, read_prelude,
    set_length_and_flags, write_head,
};
use super::statistics::STATISTICS_LEN;
use super::{
    ByteReader, DESCRIPTOR_ALIGNMENT, LAYOUT_COMPOSITE, LAYOUT_COO, LAYOUT_CSC, LAYOUT_CSR,
    MAX_RANK, align_up,
};
use crate::element::DType;
use crate::error::{Error, Result};

/// `composition_rule` of a partition: the member boxes tile the head.
pub const RULE_PARTITION: u8 = 0x01;
/// `composition_rule` of an overlay: a base and corrections.
pub const RULE_OVERLAY: u8 = 0x02;
/// `composition_rule` of a group: members without spatial relation.
pub const RULE_GROUP: u8 = 0x03;
/// `combine_op` of an overlay whose later members replace.
pub const COMBINE_REPLACE: u8 = 0x01;
/// `combine_op` of an overlay whose corrections add.
pub const COMBINE_ADD: u8 = 0x02;

/// Offsets of a head's fields that follow its `rank` shape extents, from
/// the descriptor's start (the common fields before them are
/// [`field`](super::descriptor::field)).
pub mod head_field {
    use super::field;

    /// `byte_offset` (u64, must be 0).
    pub fn byte_offset(rank: usize) -> u64 {
        field::byte_offset(rank)
    }
    /// `composition_rule` (u8).
    pub fn composition_rule(rank: usize) -> u64 {
        byte_offset(rank) + 8
    }
    /// `combine_op` (u8).
    pub fn combine_op(rank: usize) -> u64 {
        composition_rule(rank) + 1
    }
    /// Two reserved bytes (must be 0).
    pub fn reserved(rank: usize) -> u64 {
        composition_rule(rank) + 2
    }
    /// `member_count` (u32).
    pub fn member_count(rank: usize) -> u64 {
        composition_rule(rank) + 4
    }
    /// `buffer_count` (u8, must be 0).
    pub fn buffer_count(rank: usize) -> u64 {
        member_count(rank) + 4
    }
    /// The statistics section, when the flags announce one; without it
    /// the head ends here.
    pub fn statistics(rank: usize) -> u64 {
        buffer_count(rank) + 1
    }
}

/// Length of a head of rank `rank`: 37 + 8 rank bytes, 72 more with
/// statistics.
pub fn head_len(rank: usize, with_statistics: bool) -> usize {
    head_field::statistics(rank) as usize + if with_statistics { STATISTICS_LEN } else { 0 }
}

/// Where the first member's descriptor starts when the head ends at
/// `head_end`: the next descriptor boundary (8 bytes; the spec forbids
/// padding a head to the data alignment). None on overflow.
pub fn first_member_at(head_end: u64) -> Option<u64> {
    align_up(head_end, DESCRIPTOR_ALIGNMENT)
}

/// A composite head descriptor (no buffers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompositeHead {
    /// Logical element type.
    pub dtype: DType,
    /// Logical shape.
    pub shape: Vec<u64>,
    /// [`RULE_PARTITION`], [`RULE_OVERLAY`] or [`RULE_GROUP`].
    pub rule: u8,
    /// Overlay only ([`COMBINE_REPLACE`], [`COMBINE_ADD`]); 0 otherwise.
    pub combine_op: u8,
    /// Members that follow the head.
    pub member_count: u32,
}

impl CompositeHead {
    /// Encoded length for a rank (no statistics): 37 + 8 rank bytes, 53
    /// for a matrix.
    pub fn encoded_len(rank: usize) -> usize {
        head_len(rank, false)
    }

    /// Encode the head (no statistics).
    pub fn encode(&self) -> Vec<u8> {
        let rank = self.shape.len();
        let len = Self::encoded_len(rank);
        let mut out = Vec::with_capacity(len);
        write_head(&mut out, len, false, self.dtype, LAYOUT_COMPOSITE, rank);
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
    /// Refuses what the spec says a reader must refuse; a bad value is
    /// reported at its field's offset.
    pub fn decode(bytes: &[u8], offset: u64, section: &str) -> Result<CompositeHead> {
        let at = |f: u64| f as usize;
        let mut r = ByteReader::new(bytes, offset, section);
        let (len, flags) = read_prelude(&mut r, section)?;
        if flags & (DESC_QUANTIZED | DESC_COMPOSITE_MEMBER) != 0 {
            return Err(r.err_at(
                at(field::FLAGS),
                format!("composite head flags 0x{flags:08x}: a head sets neither HAS_QUANTIZATION nor HAS_COMPOSITE_MEMBER"),
            ));
        }
        if flags & DESC_HAS_SHARD != 0 {
            return Err(Error::Unsupported(format!(
                "{section}: a nested composite (head with a shard section)"
            )));
        }
        let dtype = read_dtype(&mut r)?;
        let layout = r.u8("layout tag")?;
        if layout != LAYOUT_COMPOSITE {
            return Err(r.err_at(
                at(field::LAYOUT_TAG),
                format!("layout tag 0x{layout:02x} is not a composite head"),
            ));
        }
        let rank = r.u32("rank")? as usize;
        if rank == 0 || rank > MAX_RANK {
            return Err(r.err_at(at(field::RANK), format!("rank {rank} is out of 1..=64")));
        }
        if len != head_len(rank, flags & DESC_HAS_STATISTICS != 0) {
            return Err(r.err_at(
                at(field::DESCRIPTOR_LENGTH),
                format!("descriptor_length {len} does not fit a rank-{rank} head"),
            ));
        }
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(r.u64("shape")?);
        }
        if r.u64("byte_offset")? != 0 {
            return Err(r.err_at(
                at(head_field::byte_offset(rank)),
                "a composite head's byte_offset must be 0",
            ));
        }
        let rule = r.u8("composition_rule")?;
        let combine_op = r.u8("combine_op")?;
        r.reserved(2, "composite head reserved bytes")?;
        let member_count = r.u32("member_count")?;
        let bc = r.u8("buffer_count")?;
        let op_at = at(head_field::combine_op(rank));
        match rule {
            RULE_PARTITION | RULE_GROUP if combine_op != 0 => {
                return Err(r.err_at(
                    op_at,
                    format!("combine_op {combine_op} must be 0 for rule {rule}"),
                ));
            }
            RULE_OVERLAY if !(COMBINE_REPLACE..=COMBINE_ADD).contains(&combine_op) => {
                return Err(r.err_at(
                    op_at,
                    format!("overlay combine_op {combine_op} must be 1 or 2"),
                ));
            }
            RULE_PARTITION | RULE_OVERLAY | RULE_GROUP => {}
            _ => {
                return Err(r.err_at(
                    at(head_field::composition_rule(rank)),
                    format!("composition_rule 0x{rule:02x} is reserved or invalid"),
                ));
            }
        }
        if member_count == u32::MAX {
            return Err(r.err_at(
                at(head_field::member_count(rank)),
                "member_count 0xFFFFFFFF (open composite) is reserved",
            ));
        }
        if bc != 0 {
            return Err(r.err_at(
                at(head_field::buffer_count(rank)),
                format!("a composite head owns no buffers; buffer_count is {bc}"),
            ));
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

/// Offsets of the shard section's fields in a member descriptor, from the
/// descriptor's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardFields {
    /// `parent_shape` (u64 per dimension): where the section starts.
    pub parent_shape: u64,
    /// `shard_offset` (u64 per dimension).
    pub shard_offset: u64,
    /// Where the section ends (and the statistics, when present, start).
    pub end: u64,
}

impl ShardFields {
    /// The section of a COO, CSR or CSC descriptor of `rank` without a
    /// quantization section (what a partition member of this crate is):
    /// right after the buffer table. None for another layout tag.
    pub fn of(layout_tag: u8, rank: usize) -> Option<ShardFields> {
        let start = match layout_tag {
            LAYOUT_COO => descriptor_len(rank, false),
            LAYOUT_CSR | LAYOUT_CSC => compressed_descriptor_len(false),
            _ => return None,
        } as u64;
        let words = 8 * rank as u64;
        Some(ShardFields {
            parent_shape: start,
            shard_offset: start + words,
            end: start + 2 * words,
        })
    }

    /// Bytes of the section.
    pub fn len(&self) -> usize {
        (self.end - self.parent_shape) as usize
    }

    /// Whether the section is empty (never, for a rank of 1 or more).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Add the shard section to `plain`, the encoded descriptor of a COO, CSR
/// or CSC tensor without quantization or extension-type sections (what
/// this crate writes): `HAS_SHARD` set, the section between the buffer
/// table and the statistics, `descriptor_length` grown by 16 * rank.
pub fn encode_member(plain: &[u8], shard: &Shard) -> Result<Vec<u8>> {
    let rank = shard.parent_shape.len();
    let fields = layout_tag(plain).and_then(|t| ShardFields::of(t, rank));
    let (Some(f), Some((_, flags))) = (fields, length_and_flags(plain)) else {
        return Err(Error::InvalidArgument(
            "a partition member is a COO, CSR or CSC descriptor".into(),
        ));
    };
    let base = f.parent_shape as usize;
    if shard.offset.len() != rank || plain.len() < base {
        return Err(Error::InvalidArgument(format!(
            "a shard of rank {rank} (offset {:?}) for a descriptor of {} bytes",
            shard.offset,
            plain.len()
        )));
    }
    let mut out = Vec::with_capacity(plain.len() + f.len());
    out.extend_from_slice(&plain[..base]);
    for v in shard.parent_shape.iter().chain(&shard.offset) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&plain[base..]);
    let len = out.len() as u32;
    set_length_and_flags(&mut out, len, flags | DESC_HAS_SHARD);
    Ok(out)
}

/// A member descriptor as [`split_member`] found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberBytes<'a> {
    /// No shard section: the layout's own codec reads the bytes as they
    /// are (and refuses what is wrong with them).
    Plain(&'a [u8]),
    /// The shard section taken out.
    Sharded {
        /// The descriptor without the section (`HAS_SHARD` cleared, its
        /// length shrunk), for the layout's own codec.
        plain: Vec<u8>,
        /// The section.
        shard: Shard,
        /// Where it was.
        fields: ShardFields,
        /// The member descriptor's whole length.
        len: usize,
    },
}

/// Take the shard section out of the COO, CSR or CSC member descriptor
/// that starts `bytes` (at absolute `offset`, for messages; `section` names
/// it). Nested composites and other layouts are unsupported; a member
/// setting `HAS_COMPOSITE_MEMBER` (partition members must not) is refused.
pub fn split_member<'a>(bytes: &'a [u8], offset: u64, section: &str) -> Result<MemberBytes<'a>> {
    let at = |f: u64| f as usize;
    let mut r = ByteReader::new(bytes, offset, section);
    r.take(at(field::FLAGS), "descriptor start")?;
    let flags = r.u32("flags")?;
    r.u8("element type")?;
    let layout = r.u8("layout tag")?;
    let rank = r.u32("rank")? as usize;
    if layout == LAYOUT_COMPOSITE {
        return Err(Error::Unsupported(format!(
            "{section}: nested composite member (only one level is supported)"
        )));
    }
    let Some(fields) = ShardFields::of(layout, rank) else {
        return Err(Error::Unsupported(format!(
            "{section}: member layout 0x{layout:02x}; composites of COO, CSR and CSC members are supported"
        )));
    };
    if flags & DESC_COMPOSITE_MEMBER != 0 {
        return Err(r.err_at(
            at(field::FLAGS),
            "a partition member must not set HAS_COMPOSITE_MEMBER",
        ));
    }
    if flags & DESC_HAS_SHARD == 0 || rank == 0 || rank > MAX_RANK {
        // The layout's codec refuses what is wrong with it (rank included).
        return Ok(MemberBytes::Plain(bytes));
    }
    if flags & (DESC_QUANTIZED | DESC_EXTENSION_TYPE) != 0 {
        return Err(Error::Unsupported(format!(
            "{section}: descriptor flags 0x{flags:08x}: quantized and extension-type members are not supported"
        )));
    }
    if layout != LAYOUT_COO && rank != 2 {
        return Err(r.err_at(
            at(field::RANK),
            format!("rank {rank}: CSR and CSC are defined for rank 2 only"),
        ));
    }
    let stats = if flags & DESC_HAS_STATISTICS != 0 {
        STATISTICS_LEN
    } else {
        0
    };
    let (base, end) = (at(fields.parent_shape), at(fields.end));
    let total = end + stats;
    if bytes.len() < total {
        return Err(r.err_at(
            0,
            format!("truncated: a sharded rank-{rank} descriptor needs {total} bytes"),
        ));
    }
    let declared = length_and_flags(bytes).map_or(0, |(l, _)| l as usize);
    if declared != total {
        return Err(r.err_at(
            at(field::DESCRIPTOR_LENGTH),
            format!("descriptor_length {declared} does not match a sharded rank-{rank} descriptor ({total})"),
        ));
    }
    let mut plain = Vec::with_capacity(total - fields.len());
    plain.extend_from_slice(&bytes[..base]);
    plain.extend_from_slice(&bytes[end..total]);
    let plain_len = plain.len() as u32;
    set_length_and_flags(&mut plain, plain_len, flags & !DESC_HAS_SHARD);
    let words = |from: u64| -> Vec<u64> {
        bytes[at(from)..][..8 * rank]
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]))
            .collect()
    };
    let shard = Shard {
        parent_shape: words(fields.parent_shape),
        offset: words(fields.shard_offset),
    };
    Ok(MemberBytes::Sharded {
        plain,
        shard,
        fields,
        len: total,
    })
}

fn volume(shape: &[u64]) -> u128 {
    shape
        .iter()
        .try_fold(1u128, |a, &d| a.checked_mul(u128::from(d)))
        .unwrap_or(u128::MAX)
}

/// The partition rules over `boxes` (offset, shape) of a head of `shape`:
/// every box inside, pairwise disjoint (exact cover, no overlap: the
/// volumes add up to the whole). Returns the rule broken, if any.
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
                return Some(format!(
                    "members {a} and {b} overlap (partition rule: no overlap)"
                ));
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::hurray::compressed::CompressedDescriptor;
    use crate::hurray::{BufferHandle, CooDescriptor, Statistics};

    fn head() -> CompositeHead {
        CompositeHead {
            dtype: DType::F64,
            shape: vec![10, 7],
            rule: RULE_PARTITION,
            combine_op: 0,
            member_count: 3,
        }
    }

    #[test]
    fn head_round_trip_is_53_bytes_for_a_matrix() {
        let h = head();
        let b = h.encode();
        assert_eq!(b.len(), 53);
        assert_eq!(CompositeHead::decode(&b, 64, "h").unwrap(), h);
        // The named offsets agree with the encoder.
        let at = |o: u64| o as usize;
        assert_eq!(b[at(field::LAYOUT_TAG)], LAYOUT_COMPOSITE);
        assert_eq!(b[at(head_field::composition_rule(2))], RULE_PARTITION);
        assert_eq!(
            b[at(head_field::member_count(2))..][..4],
            3u32.to_le_bytes()
        );
        assert_eq!(at(head_field::statistics(2)), b.len());
        // A bad value is refused, at its field.
        let f = |o: fn(usize) -> u64| o(2);
        for (pos, v) in [
            (f(head_field::composition_rule), 0u8),
            (f(head_field::composition_rule), 9),
            (f(head_field::combine_op), 1),
            (f(head_field::reserved), 1),
            (f(head_field::buffer_count), 1),
            (f(head_field::byte_offset), 1),
        ] {
            let mut bad = b.clone();
            bad[at(pos)] = v;
            let e = CompositeHead::decode(&bad, 64, "h")
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("byte {}", 64 + pos)),
                "byte {pos} = {v}: {e}"
            );
        }
        let mut open = b.clone();
        open[at(head_field::member_count(2))..][..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(CompositeHead::decode(&open, 64, "h").is_err());
        assert_eq!(first_member_at(64 + 53), Some(120));
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
            statistics: Some(Statistics::default()),
        };
        let s = Shard {
            parent_shape: vec![12, 9],
            offset: vec![8, 0],
        };
        let b = encode_member(&d.encode(), &s).unwrap();
        assert_eq!(b.len(), d.encoded_len() + 32);
        let MemberBytes::Sharded {
            plain,
            shard,
            fields,
            len,
        } = split_member(&b, 0, "m").unwrap()
        else {
            panic!("no shard section")
        };
        assert_eq!(CooDescriptor::decode(&plain, 0, "m").unwrap(), d);
        assert_eq!((shard, len), (s.clone(), b.len()));
        assert_eq!(Some(fields), ShardFields::of(LAYOUT_COO, 2));
        assert_eq!(b[fields.shard_offset as usize..][..8], 8u64.to_le_bytes());
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
            statistics: Some(Statistics::default()),
        };
        let b = encode_member(&c.encode(), &s).unwrap();
        let f = ShardFields::of(LAYOUT_CSR, 2).unwrap();
        assert_eq!(f.parent_shape as usize, compressed_descriptor_len(false));
        assert_eq!(b.len(), c.encoded_len() + f.len());
        assert_eq!(b[f.parent_shape as usize..][..8], 12u64.to_le_bytes());
        assert_eq!(b[f.shard_offset as usize..][..8], 8u64.to_le_bytes());
        let MemberBytes::Sharded { plain, shard, .. } = split_member(&b, 0, "m").unwrap() else {
            panic!("no shard section")
        };
        assert_eq!(CompressedDescriptor::decode(&plain, 0, "m").unwrap(), c);
        assert_eq!(shard, s);
        // A CSR member of another rank is refused with the rule, at `rank`.
        let mut bad = b.clone();
        bad[field::RANK as usize] = 3;
        let e = split_member(&bad, 100, "m").unwrap_err().to_string();
        assert!(e.contains("rank 2") && e.contains("byte 116"), "{e}");
        // A member without the section is left to its codec.
        let plain = c.encode();
        assert_eq!(
            split_member(&plain, 0, "m").unwrap(),
            MemberBytes::Plain(&plain)
        );
        // A head is no member, for either direction.
        let h = head().encode();
        assert!(matches!(
            split_member(&h, 0, "m"),
            Err(Error::Unsupported(_))
        ));
        assert!(encode_member(&h, &s).is_err());
    }

    #[test]
    fn partition_rules() {
        let shape = [10u64, 4];
        let ok: Vec<(&[u64], &[u64])> = vec![(&[0, 0], &[6, 4]), (&[6, 0], &[4, 4])];
        assert_eq!(check_partition(&shape, &ok), None);
        let gap: Vec<(&[u64], &[u64])> = vec![(&[0, 0], &[6, 4]), (&[7, 0], &[3, 4])];
        assert!(
            check_partition(&shape, &gap)
                .unwrap()
                .contains("exact cover")
        );
        let over: Vec<(&[u64], &[u64])> = vec![(&[0, 0], &[6, 4]), (&[5, 0], &[5, 4])];
        assert!(check_partition(&shape, &over).unwrap().contains("overlap"));
        let out: Vec<(&[u64], &[u64])> = vec![(&[0, 0], &[6, 4]), (&[6, 0], &[5, 4])];
        assert!(check_partition(&shape, &out).unwrap().contains("leaves"));
    }
}
