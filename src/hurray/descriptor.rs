//! The COO tensor descriptor and its buffer handles.

use super::statistics::{NNZ_VALID, STATISTICS_LEN, Statistics};
use super::{ByteReader, LAYOUT_COO, MAGIC, MAX_RANK};
use crate::element::DType;
use crate::error::{Error, Result};

/// Descriptor flag bit 0: a quantization section follows the buffer table.
pub const DESC_QUANTIZED: u32 = 1 << 0;
/// Descriptor flag bit 1: a shard section follows (after the quantization
/// section, before the statistics).
pub const DESC_HAS_SHARD: u32 = 1 << 1;
/// Descriptor flag bit 2: an extension-type section follows the statistics.
pub const DESC_EXTENSION_TYPE: u32 = 1 << 2;
/// Descriptor flag bit 3: a statistics section follows the buffer handles
/// (and the quantization and shard sections, when present).
pub const DESC_HAS_STATISTICS: u32 = 1 << 3;
/// Descriptor flag bit 4: a Composite Member section ends the descriptor
/// (overlay members only).
pub const DESC_COMPOSITE_MEMBER: u32 = 1 << 4;

/// Offsets of the fields every tensor descriptor starts with, whatever its
/// layout, from the descriptor's start (messages name the field a bad value
/// came from; `write_head` writes them in this order).
pub mod field {
    /// The magic `HRRY` (4 bytes).
    pub const MAGIC: u64 = 0;
    /// Major and minor version (u8 each).
    pub const VERSION: u64 = 4;
    /// `descriptor_length` (u32).
    pub const DESCRIPTOR_LENGTH: u64 = 6;
    /// `flags` (u32).
    pub const FLAGS: u64 = 10;
    /// `type_tag` (u8).
    pub const TYPE_TAG: u64 = 14;
    /// `layout_tag` (u8).
    pub const LAYOUT_TAG: u64 = 15;
    /// `rank` (u32).
    pub const RANK: u64 = 16;
    /// `shape` (u64 per dimension).
    pub const SHAPE: u64 = 20;
    /// `byte_offset` (u64), after the `rank` extents; the layout fields follow.
    pub fn byte_offset(rank: usize) -> u64 {
        SHAPE + 8 * rank as u64
    }
}

/// The layout tag of the descriptor that starts `bytes`, if they reach it.
pub(crate) fn layout_tag(bytes: &[u8]) -> Option<u8> {
    bytes.get(field::LAYOUT_TAG as usize).copied()
}

/// The `descriptor_length` and `flags` of the descriptor that starts
/// `bytes`, read without any check, if they reach them.
pub(crate) fn length_and_flags(bytes: &[u8]) -> Option<(u32, u32)> {
    let word = |at: u64| -> Option<u32> {
        let b = bytes.get(at as usize..at as usize + 4)?;
        Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    Some((word(field::DESCRIPTOR_LENGTH)?, word(field::FLAGS)?))
}

/// Overwrite the `descriptor_length` and `flags` of the encoded descriptor
/// `out` (at least 14 bytes).
pub(crate) fn set_length_and_flags(out: &mut [u8], len: u32, flags: u32) {
    let at = |f: u64| f as usize..f as usize + 4;
    out[at(field::DESCRIPTOR_LENGTH)].copy_from_slice(&len.to_le_bytes());
    out[at(field::FLAGS)].copy_from_slice(&flags.to_le_bytes());
}
/// The first 14 bytes every tensor descriptor starts with: magic, version
/// 1.0, `descriptor_length` and flags with no undefined bit set. Returns
/// the length and the flags; the layout-specific decoders check the rest.
pub(crate) fn read_prelude(r: &mut ByteReader<'_>, section: &str) -> Result<(usize, u32)> {
    let magic = r.array::<4>("descriptor magic")?;
    if &magic != MAGIC {
        return Err(r.err_at(
            field::MAGIC as usize,
            format!("descriptor magic is {magic:02x?}, expected \"HRRY\""),
        ));
    }
    let major = r.u8("descriptor major version")?;
    let minor = r.u8("descriptor minor version")?;
    if major != 1 || minor != 0 {
        return Err(Error::Unsupported(format!(
            "{section}: descriptor version {major}.{minor}; this reader handles 1.0"
        )));
    }
    let desc_len = r.u32("descriptor_length")? as usize;
    let flags = r.u32("descriptor flags")?;
    if flags >> 5 != 0 {
        return Err(r.err_at(
            field::FLAGS as usize,
            format!("descriptor flags 0x{flags:08x} set undefined bits 5..31"),
        ));
    }
    Ok((desc_len, flags))
}

/// Writes the first 20 bytes of a descriptor: the prelude that
/// [`read_prelude`] decodes, then element type, layout tag and rank.
pub(crate) fn write_head(
    out: &mut Vec<u8>,
    len: usize,
    statistics: bool,
    dtype: DType,
    layout_tag: u8,
    rank: usize,
) {
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(len as u32).to_le_bytes());
    let flags = if statistics { DESC_HAS_STATISTICS } else { 0 };
    out.extend_from_slice(&flags.to_le_bytes());
    out.push(dtype.tag());
    out.push(layout_tag);
    out.extend_from_slice(&(rank as u32).to_le_bytes());
}

/// The element type at byte 14, an unknown tag reported at that byte.
pub(crate) fn read_dtype(r: &mut ByteReader<'_>) -> Result<DType> {
    let tag = r.u8("element type")?;
    DType::from_tag(tag).map_err(|e| match e {
        Error::InvalidFile { detail, .. } => r.err_at(field::TYPE_TAG as usize, detail),
        other => other,
    })
}

/// One fixed shape extent (dimension `d`); `layout` names the layout in
/// the message about a dynamic extent.
pub(crate) fn read_extent(r: &mut ByteReader<'_>, d: usize, layout: &str) -> Result<u64> {
    let p = r.pos();
    let e = r.u64("shape")?;
    if e == u64::MAX {
        return Err(r.err_at(
            p,
            format!(
                "dimension {d} is dynamic (u64::MAX); a stored {layout} tensor needs a fixed shape"
            ),
        ));
    }
    Ok(e)
}

/// The statistics section when the flags announce one, its nnz checked
/// against the descriptor's.
pub(crate) fn read_statistics(
    r: &mut ByteReader<'_>,
    present: bool,
    nnz: u64,
) -> Result<Option<Statistics>> {
    if !present {
        return Ok(None);
    }
    let st_pos = r.pos();
    let s = Statistics::decode(r)?;
    if s.computed_mask & NNZ_VALID != 0 && s.nnz != nnz {
        return Err(r.err_at(
            st_pos + 8,
            format!("statistics nnz {} differs from descriptor nnz {nnz}", s.nnz),
        ));
    }
    Ok(Some(s))
}

/// Length of a buffer handle.
pub const HANDLE_LEN: usize = 16;
/// Smallest buffer alignment a non-empty buffer may declare.
pub const MIN_BUFFER_ALIGNMENT: u32 = 64;

/// Offsets of a COO descriptor's fields that follow the `rank` shape
/// extents, from the descriptor's start (messages name the field a bad value
/// came from; the encoder below writes them in this order).
pub mod coo_field {
    /// `nnz` (u64), after `byte_offset`.
    pub fn nnz(rank: usize) -> u64 {
        super::field::byte_offset(rank) + 8
    }
    /// `is_sorted` (u8); 7 reserved bytes follow.
    pub fn is_sorted(rank: usize) -> u64 {
        nnz(rank) + 8
    }
    /// `buffer_count` (u8, 2).
    pub fn buffer_count(rank: usize) -> u64 {
        is_sorted(rank) + 8
    }
    /// The values buffer handle; the indices handle follows it.
    pub fn values_handle(rank: usize) -> u64 {
        buffer_count(rank) + 1
    }
    /// The indices buffer handle.
    pub fn indices_handle(rank: usize) -> u64 {
        values_handle(rank) + super::HANDLE_LEN as u64
    }
    /// The statistics section, when present.
    pub fn statistics(rank: usize) -> u64 {
        indices_handle(rank) + super::HANDLE_LEN as u64
    }
}

/// Length of a COO descriptor of rank `rank`.
pub fn descriptor_len(rank: usize, with_statistics: bool) -> usize {
    coo_field::statistics(rank) as usize + if with_statistics { STATISTICS_LEN } else { 0 }
}

/// A 16-byte buffer handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferHandle {
    /// Bytes in the buffer.
    pub byte_size: u64,
    /// The alignment the buffer's start is guaranteed to have.
    pub alignment: u32,
    /// device_tag (0 = CPU).
    pub device_tag: u8,
    /// sync_mode (0 = producer synced, the only mode for CPU).
    pub sync_mode: u8,
    /// memory_class (0 = standard).
    pub memory_class: u8,
}

impl BufferHandle {
    /// A CPU buffer handle.
    pub fn cpu(byte_size: u64, alignment: u32) -> Self {
        BufferHandle {
            byte_size,
            alignment,
            device_tag: 0,
            sync_mode: 0,
            memory_class: 0,
        }
    }

    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.byte_size.to_le_bytes());
        out.extend_from_slice(&self.alignment.to_le_bytes());
        out.extend_from_slice(&[self.device_tag, self.sync_mode, self.memory_class, 0]);
    }

    pub(crate) fn decode(r: &mut ByteReader<'_>, which: &str) -> Result<BufferHandle> {
        let start = r.pos();
        let byte_size = r.u64("buffer byte_size")?;
        let alignment = r.u32("buffer alignment")?;
        if !alignment.is_power_of_two() || (byte_size > 0 && alignment < MIN_BUFFER_ALIGNMENT) {
            return Err(r.err_at(
                start + 8,
                format!(
                    "{which} buffer alignment {alignment} must be a power of two, >= 64 for a non-empty buffer"
                ),
            ));
        }
        let device_tag = r.u8("device_tag")?;
        if !(device_tag <= 0x08 || (0xF0..=0xFE).contains(&device_tag)) {
            return Err(r.err_at(
                start + 12,
                format!("{which} buffer device_tag 0x{device_tag:02x} is undefined"),
            ));
        }
        let sync_mode = r.u8("sync_mode")?;
        if sync_mode > 2 || (device_tag == 0 && sync_mode != 0) {
            return Err(r.err_at(
                start + 13,
                format!("{which} buffer sync_mode {sync_mode} is invalid (CPU buffers use 0)"),
            ));
        }
        let memory_class = r.u8("memory_class")?;
        if !(memory_class <= 0x03 || (0xF0..=0xFE).contains(&memory_class)) {
            return Err(r.err_at(
                start + 14,
                format!("{which} buffer memory_class 0x{memory_class:02x} is undefined"),
            ));
        }
        r.reserved(1, "buffer handle reserved byte 15")?;
        Ok(BufferHandle {
            byte_size,
            alignment,
            device_tag,
            sync_mode,
            memory_class,
        })
    }
}

/// A decoded COO tensor descriptor.
#[derive(Clone, Debug, PartialEq)]
pub struct CooDescriptor {
    /// Element type.
    pub dtype: DType,
    /// Extent of each dimension (1..=64 of them).
    pub shape: Vec<u64>,
    /// Number of stored entries.
    pub nnz: u64,
    /// Entries are in strictly increasing lexicographic order.
    pub is_sorted: bool,
    /// The values buffer.
    pub values: BufferHandle,
    /// The indices buffer.
    pub indices: BufferHandle,
    /// The statistics section, when present.
    pub statistics: Option<Statistics>,
}

impl CooDescriptor {
    /// Rank of the tensor.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Encoded length of this descriptor.
    pub fn encoded_len(&self) -> usize {
        descriptor_len(self.rank(), self.statistics.is_some())
    }

    /// Encode the descriptor.
    pub fn encode(&self) -> Vec<u8> {
        let len = self.encoded_len();
        let mut out = Vec::with_capacity(len);
        let stats = self.statistics.is_some();
        write_head(&mut out, len, stats, self.dtype, LAYOUT_COO, self.rank());
        for &d in &self.shape {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&0u64.to_le_bytes()); // byte_offset
        out.extend_from_slice(&self.nnz.to_le_bytes());
        out.push(self.is_sorted as u8);
        out.extend_from_slice(&[0u8; 7]);
        out.push(2);
        self.values.encode(&mut out);
        self.indices.encode(&mut out);
        if let Some(s) = &self.statistics {
            s.encode(&mut out);
        }
        debug_assert_eq!(out.len(), len);
        out
    }

    /// Decode a descriptor from `bytes` (which may extend past its end).
    /// `offset` is its absolute position, for messages; `section` names it.
    pub fn decode(bytes: &[u8], offset: u64, section: &str) -> Result<CooDescriptor> {
        let mut r = ByteReader::new(bytes, offset, section);
        let (desc_len, flags) = read_prelude(&mut r, section)?;
        for (bit, what) in [
            (DESC_QUANTIZED, "quantized tensors"),
            (DESC_HAS_SHARD, "sharded tensors"),
            (DESC_EXTENSION_TYPE, "extension element types"),
            (DESC_COMPOSITE_MEMBER, "composite members"),
        ] {
            if flags & bit != 0 {
                return Err(Error::Unsupported(format!(
                    "{section}: {what} are not supported"
                )));
            }
        }
        let has_stats = flags & DESC_HAS_STATISTICS != 0;
        let dtype = read_dtype(&mut r)?;
        let layout = r.u8("layout tag")?;
        if layout != LAYOUT_COO {
            // Reached by a caller that asked for COO (a composite member):
            // the file reader picks each layout's own codec.
            return Err(Error::Unsupported(format!(
                "{section}: layout tag 0x{layout:02x} ({}) is not COO (0x06)",
                crate::layout::describe_tag(layout)
            )));
        }
        let rank = r.u32("rank")? as usize;
        if rank == 0 || rank > MAX_RANK {
            return Err(r.err_at(
                field::RANK as usize,
                format!("rank {rank} is out of 1..=64 for a COO tensor"),
            ));
        }
        let expected_len = descriptor_len(rank, has_stats);
        if desc_len != expected_len {
            return Err(r.err_at(
                field::DESCRIPTOR_LENGTH as usize,
                format!("descriptor_length {desc_len} does not match rank {rank} (expected {expected_len})"),
            ));
        }
        let mut shape = Vec::with_capacity(rank);
        for d in 0..rank {
            shape.push(read_extent(&mut r, d, "COO")?);
        }
        let bo_pos = r.pos();
        let byte_offset = r.u64("byte_offset")?;
        if byte_offset != 0 {
            return Err(r.err_at(
                bo_pos,
                format!("byte_offset is {byte_offset}, must be 0 for COO"),
            ));
        }
        let nnz = r.u64("nnz")?;
        let s_pos = r.pos();
        let is_sorted = match r.u8("is_sorted")? {
            0 => false,
            1 => true,
            v => return Err(r.err_at(s_pos, format!("is_sorted is {v}, must be 0 or 1"))),
        };
        r.reserved(7, "descriptor reserved bytes after is_sorted")?;
        let bc_pos = r.pos();
        let buffer_count = r.u8("buffer_count")?;
        if buffer_count != 2 {
            return Err(r.err_at(
                bc_pos,
                format!("buffer_count is {buffer_count}, COO has exactly 2"),
            ));
        }
        let values = BufferHandle::decode(&mut r, "values")?;
        let indices = BufferHandle::decode(&mut r, "indices")?;
        let statistics = read_statistics(&mut r, has_stats, nnz)?;
        debug_assert_eq!(r.pos(), expected_len);
        Ok(CooDescriptor {
            dtype,
            shape,
            nnz,
            is_sorted,
            values,
            indices,
            statistics,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> CooDescriptor {
        CooDescriptor {
            dtype: DType::F32,
            shape: vec![4, 4],
            nnz: 3,
            is_sorted: true,
            values: BufferHandle::cpu(12, 4096),
            indices: BufferHandle::cpu(48, 4096),
            statistics: None,
        }
    }

    #[test]
    fn worked_example_length_and_round_trip() {
        let d = example();
        let b = d.encode();
        assert_eq!(b.len(), 93);
        assert_eq!(CooDescriptor::decode(&b, 64, "t").unwrap(), d);
        let mut s = d.clone();
        s.statistics = Some(Statistics {
            computed_mask: NNZ_VALID,
            nnz: 3,
            ..Default::default()
        });
        let b = s.encode();
        assert_eq!(b.len(), 165);
        assert_eq!(CooDescriptor::decode(&b, 64, "t").unwrap(), s);
    }

    #[test]
    fn named_field_offsets_agree_with_the_encoder() {
        for rank in [1usize, 2, 5] {
            let d = CooDescriptor {
                shape: vec![7; rank],
                nnz: 0x0102_0304_0506_0708,
                values: BufferHandle::cpu(0x1111, 4096),
                indices: BufferHandle::cpu(0x2222, 4096),
                statistics: Some(Statistics {
                    computed_mask: NNZ_VALID,
                    nnz: 0x3333,
                    ..Default::default()
                }),
                ..example()
            };
            let b = d.encode();
            let at = |o: u64, n: usize| &b[o as usize..][..n];
            assert_eq!(at(coo_field::nnz(rank), 8), d.nnz.to_le_bytes());
            assert_eq!(
                at(coo_field::values_handle(rank), 8),
                0x1111u64.to_le_bytes()
            );
            assert_eq!(
                at(coo_field::indices_handle(rank), 8),
                0x2222u64.to_le_bytes()
            );
            // The statistics section starts with computed_mask, then nnz.
            assert_eq!(
                at(coo_field::statistics(rank) + 8, 8),
                0x3333u64.to_le_bytes()
            );
        }
    }

    #[test]
    fn rejects_broken_fields() {
        let b = example().encode();
        let cases: &[(usize, u8)] = &[
            (0, b'X'),
            (6, 94),
            (10, 0x20),
            (15, 0x01),
            (16, 0),
            (36, 2),
            (52, 2),
            (53, 1),
            (60, 3),
            (73, 0x99),
            (77 + 15, 1),
        ];
        for &(pos, v) in cases {
            let mut bad = b.clone();
            bad[pos] = v;
            assert!(
                CooDescriptor::decode(&bad, 0, "t").is_err(),
                "byte {pos} = {v}"
            );
        }
        assert!(CooDescriptor::decode(&b[..92], 0, "t").is_err());
    }
}
