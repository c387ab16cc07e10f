//! Descriptors of the tensors the reader lists but does not serve: the
//! dense row-major (layout 0x01) and column-major (0x02) descriptors, and
//! the fields every descriptor starts with, for any other layout.
//!
//! Row-major and column-major have no layout-specific fields
//! (`layouts/row-major.md`, `layouts/column-major.md`): after the common
//! header, `shape` and `byte_offset` come `buffer_count` = 1 and one
//! buffer handle, then the optional statistics. The buffer holds at least
//! `byte_offset + product(shape) * width` bytes.

use super::descriptor::{
    BufferHandle, DESC_HAS_STATISTICS, HANDLE_LEN, field, read_dtype, read_extent, read_prelude,
    write_head,
};
use super::statistics::{STATISTICS_LEN, Statistics};
use super::{ByteReader, LAYOUT_COLUMN_MAJOR, LAYOUT_ROW_MAJOR, MAX_RANK};
use crate::element::DType;
use crate::error::{Error, Result};

/// Offsets of a dense descriptor's fields after the `rank` shape extents,
/// from the descriptor's start (messages name the field a bad value came
/// from; the encoder writes them in this order).
pub mod dense_field {
    /// `buffer_count` (u8, 1), after `byte_offset`.
    pub fn buffer_count(rank: usize) -> u64 {
        super::field::byte_offset(rank) + 8
    }
    /// The buffer handle.
    pub fn handle(rank: usize) -> u64 {
        buffer_count(rank) + 1
    }
    /// The statistics section, when present.
    pub fn statistics(rank: usize) -> u64 {
        handle(rank) + super::HANDLE_LEN as u64
    }
}

/// Length of a row-major or column-major descriptor of rank `rank`:
/// 45 + 8 rank bytes, 72 more with statistics.
pub fn dense_descriptor_len(rank: usize, with_statistics: bool) -> usize {
    dense_field::statistics(rank) as usize + if with_statistics { STATISTICS_LEN } else { 0 }
}

/// The fields every descriptor starts with (`metadata.md`, fixed header,
/// `shape`, `byte_offset`), read within its `descriptor_length` and
/// without interpreting the layout's own fields.
#[derive(Clone, Debug, PartialEq)]
pub struct DescriptorHead {
    /// The descriptor's own length.
    pub descriptor_length: u32,
    /// The descriptor flags (bits 0..4 only).
    pub flags: u32,
    /// The element type tag, which may name a type this crate does not
    /// read ([`DescriptorHead::dtype`] is then `None`).
    pub type_tag: u8,
    /// The layout tag (never 0x00 or 0xFF).
    pub layout_tag: u8,
    /// Extent of each dimension (`u64::MAX`: dynamic).
    pub shape: Vec<u64>,
    /// Offset of element `[0, ..., 0]` in buffer 0.
    pub byte_offset: u64,
}

impl DescriptorHead {
    /// The element type, when it is one this crate reads.
    pub fn dtype(&self) -> Option<DType> {
        DType::from_tag(self.type_tag).ok()
    }

    /// Decode the head of the descriptor that starts `bytes` (which may
    /// extend past its end; nothing past `descriptor_length` is read).
    /// `offset` is its absolute position, for messages; `section` names it.
    pub fn decode(bytes: &[u8], offset: u64, section: &str) -> Result<DescriptorHead> {
        let mut r = ByteReader::new(bytes, offset, section);
        let (desc_len, flags) = read_prelude(&mut r, section)?;
        // The fixed header is 20 bytes; the spec's minimum.
        if desc_len < field::SHAPE as usize || desc_len > bytes.len() {
            return Err(r.err_at(
                field::DESCRIPTOR_LENGTH as usize,
                format!(
                    "descriptor_length {desc_len} is not in 20..={} (the bytes before the trailer)",
                    bytes.len()
                ),
            ));
        }
        // From here on, only the descriptor's own bytes.
        let mut r = ByteReader::new(&bytes[..desc_len], offset, section);
        read_prelude(&mut r, section)?;
        let type_tag = r.u8("element type")?;
        if matches!(type_tag, 0x00 | 0xFF) {
            return Err(r.err_at(
                field::TYPE_TAG as usize,
                format!("element type tag 0x{type_tag:02x} is reserved (invalid)"),
            ));
        }
        let layout_tag = r.u8("layout tag")?;
        if matches!(layout_tag, 0x00 | 0xFF) {
            return Err(r.err_at(
                field::LAYOUT_TAG as usize,
                format!("layout tag 0x{layout_tag:02x} is reserved (invalid)"),
            ));
        }
        let rank = r.u32("rank")? as usize;
        // shape and byte_offset are in every descriptor; this also bounds
        // the shape's allocation by the descriptor's length.
        let need = field::byte_offset(rank) + 8;
        if rank > MAX_RANK || need > desc_len as u64 {
            return Err(r.err_at(
                field::RANK as usize,
                format!(
                    "rank {rank} needs {need} bytes of header, shape and byte_offset; descriptor_length is {desc_len} (ranks go to {MAX_RANK})"
                ),
            ));
        }
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(r.u64("shape")?);
        }
        let byte_offset = r.u64("byte_offset")?;
        Ok(DescriptorHead {
            descriptor_length: desc_len as u32,
            flags,
            type_tag,
            layout_tag,
            shape,
            byte_offset,
        })
    }
}

/// A decoded row-major or column-major descriptor without quantization,
/// shard or extension type (those are read as a [`DescriptorHead`] only).
#[derive(Clone, Debug, PartialEq)]
pub struct DenseDescriptor {
    /// `false`: row-major (0x01); `true`: column-major (0x02).
    pub column_major: bool,
    /// Element type.
    pub dtype: DType,
    /// Extent of each dimension (0..=64 of them: rank 0 is a scalar).
    pub shape: Vec<u64>,
    /// Offset of element `[0, ..., 0]` in the buffer.
    pub byte_offset: u64,
    /// The one buffer.
    pub buffer: BufferHandle,
    /// The statistics section, when present.
    pub statistics: Option<Statistics>,
}

impl DenseDescriptor {
    /// The layout tag, 0x01 or 0x02.
    pub fn layout_tag(&self) -> u8 {
        if self.column_major {
            LAYOUT_COLUMN_MAJOR
        } else {
            LAYOUT_ROW_MAJOR
        }
    }

    /// Rank of the tensor.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements (None past u64).
    pub fn elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }

    /// Bytes the elements take (None past u64).
    pub fn payload_bytes(&self) -> Option<u64> {
        self.dtype.stored_len(self.elements()?)
    }

    /// Encoded length.
    pub fn encoded_len(&self) -> usize {
        dense_descriptor_len(self.rank(), self.statistics.is_some())
    }

    /// Encode the descriptor.
    pub fn encode(&self) -> Vec<u8> {
        let len = self.encoded_len();
        let mut out = Vec::with_capacity(len);
        let stats = self.statistics.is_some();
        write_head(
            &mut out,
            len,
            stats,
            self.dtype,
            self.layout_tag(),
            self.rank(),
        );
        for &d in &self.shape {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&self.byte_offset.to_le_bytes());
        out.push(1);
        self.buffer.encode(&mut out);
        if let Some(s) = &self.statistics {
            s.encode(&mut out);
        }
        debug_assert_eq!(out.len(), len);
        out
    }

    /// Whether the descriptor starting `bytes` is one [`DenseDescriptor::decode`]
    /// reads: row-major or column-major, no flag but statistics, an element
    /// type this crate reads. Others are read as a [`DescriptorHead`].
    pub fn handles(bytes: &[u8]) -> bool {
        let at = |f: u64| bytes.get(f as usize).copied();
        let flags = bytes
            .get(field::FLAGS as usize..field::FLAGS as usize + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        matches!(
            at(field::LAYOUT_TAG),
            Some(LAYOUT_ROW_MAJOR | LAYOUT_COLUMN_MAJOR)
        ) && flags.is_some_and(|f| f & !DESC_HAS_STATISTICS == 0)
            && at(field::TYPE_TAG).is_some_and(|t| DType::from_tag(t).is_ok())
    }

    /// Decode a row-major or column-major descriptor from `bytes` (which
    /// may extend past its end). `offset` is its absolute position, for
    /// messages; `section` names it. Checked: version, flags, fixed shape,
    /// `descriptor_length`, `buffer_count` = 1, the handle, `byte_offset`
    /// inside the buffer, the statistics' reserved bits.
    pub fn decode(bytes: &[u8], offset: u64, section: &str) -> Result<DenseDescriptor> {
        let mut r = ByteReader::new(bytes, offset, section);
        let (desc_len, flags) = read_prelude(&mut r, section)?;
        if flags & !DESC_HAS_STATISTICS != 0 {
            return Err(Error::Unsupported(format!(
                "{section}: descriptor flags 0x{flags:08x}: quantized, sharded, extension-type and composite-member dense tensors are listed, not decoded"
            )));
        }
        let has_stats = flags & DESC_HAS_STATISTICS != 0;
        let dtype = read_dtype(&mut r)?;
        let column_major = match r.u8("layout tag")? {
            LAYOUT_ROW_MAJOR => false,
            LAYOUT_COLUMN_MAJOR => true,
            t => {
                return Err(r.err_at(
                    field::LAYOUT_TAG as usize,
                    format!("layout tag 0x{t:02x} is not row-major or column-major"),
                ));
            }
        };
        let name = if column_major {
            "column-major"
        } else {
            "row-major"
        };
        let rank = r.u32("rank")? as usize;
        if rank > MAX_RANK {
            return Err(r.err_at(
                field::RANK as usize,
                format!("rank {rank} is out of 0..=64 for a {name} tensor"),
            ));
        }
        let expected_len = dense_descriptor_len(rank, has_stats);
        if desc_len != expected_len {
            return Err(r.err_at(
                field::DESCRIPTOR_LENGTH as usize,
                format!("descriptor_length {desc_len} does not match a {name} descriptor of rank {rank} (expected {expected_len})"),
            ));
        }
        let mut shape = Vec::with_capacity(rank);
        for d in 0..rank {
            shape.push(read_extent(&mut r, d, name)?);
        }
        let bo_pos = r.pos();
        let byte_offset = r.u64("byte_offset")?;
        let bc_pos = r.pos();
        let buffer_count = r.u8("buffer_count")?;
        if buffer_count != 1 {
            return Err(r.err_at(
                bc_pos,
                format!("buffer_count is {buffer_count}, a {name} tensor has exactly 1"),
            ));
        }
        let buffer = BufferHandle::decode(&mut r, "values")?;
        if byte_offset > buffer.byte_size {
            return Err(r.err_at(
                bo_pos,
                format!(
                    "byte_offset {byte_offset} is past the end of the {}-byte buffer",
                    buffer.byte_size
                ),
            ));
        }
        let statistics = if has_stats {
            Some(Statistics::decode(&mut r)?)
        } else {
            None
        };
        debug_assert_eq!(r.pos(), expected_len);
        Ok(DenseDescriptor {
            column_major,
            dtype,
            shape,
            byte_offset,
            buffer,
            statistics,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hurray::statistics::NNZ_VALID;
    use crate::hurray::{LAYOUT_COO, LAYOUT_CSR};

    fn example() -> DenseDescriptor {
        DenseDescriptor {
            column_major: false,
            dtype: DType::F32,
            shape: vec![3, 4],
            byte_offset: 0,
            buffer: BufferHandle::cpu(48, 4096),
            statistics: None,
        }
    }

    #[test]
    fn round_trip_lengths_and_field_offsets() {
        let d = example();
        let b = d.encode();
        // 20 + 2 * 8 + 8 + 1 + 16: the spec's row_major_f32_3x4 vector.
        assert_eq!(b.len(), 61);
        assert_eq!(DenseDescriptor::decode(&b, 64, "t").unwrap(), d);
        assert_eq!(
            &b[dense_field::handle(2) as usize..][..8],
            48u64.to_le_bytes()
        );
        let s = DenseDescriptor {
            column_major: true,
            shape: vec![],
            buffer: BufferHandle::cpu(4, 4096),
            statistics: Some(Statistics {
                computed_mask: NNZ_VALID,
                nnz: 1,
                ..Default::default()
            }),
            ..example()
        };
        let b = s.encode();
        assert_eq!(b.len(), 45 + 72);
        assert_eq!(DenseDescriptor::decode(&b, 0, "t").unwrap(), s);
        assert!(DenseDescriptor::handles(&b));
        let h = DescriptorHead::decode(&b, 0, "t").unwrap();
        assert_eq!((h.layout_tag, h.shape.len()), (LAYOUT_COLUMN_MAJOR, 0));
    }

    #[test]
    fn rejects_broken_fields_and_truncation_without_panic() {
        let b = example().encode();
        let cases: &[(usize, u8)] = &[
            (0, b'X'),    // magic
            (6, 60),      // descriptor_length
            (10, 0x20),   // undefined flag bit
            (14, 0x99),   // unknown element type
            (16, 65),     // rank
            (44, 2),      // buffer_count
            (45 + 8, 3),  // alignment not a power of two
            (45 + 15, 1), // reserved handle byte
            (36, 49),     // byte_offset past the buffer
        ];
        for &(pos, v) in cases {
            let mut bad = b.clone();
            bad[pos] = v;
            assert!(
                DenseDescriptor::decode(&bad, 0, "t").is_err(),
                "byte {pos} = {v}"
            );
        }
        // A dynamic extent (u64::MAX): a stored tensor needs a fixed shape.
        let mut bad = b.clone();
        bad[20..28].fill(0xFF);
        assert!(DenseDescriptor::decode(&bad, 0, "t").is_err());
        for n in 0..b.len() {
            assert!(
                DenseDescriptor::decode(&b[..n], 0, "t").is_err(),
                "{n} bytes"
            );
            assert!(
                DescriptorHead::decode(&b[..n], 0, "t").is_err(),
                "{n} bytes"
            );
        }
    }

    #[test]
    fn head_reads_any_layout_tag_and_stays_inside_its_length() {
        let mut b = example().encode();
        for tag in [0x03u8, 0x09, 0x0A, 0x33, 0x40, 0x80, 0xF3] {
            b[field::LAYOUT_TAG as usize] = tag;
            let h = DescriptorHead::decode(&b, 0, "t").unwrap();
            assert_eq!(
                (h.layout_tag, &h.shape[..], h.byte_offset),
                (tag, &[3u64, 4][..], 0)
            );
            assert_eq!(h.dtype(), Some(DType::F32));
            assert!(!DenseDescriptor::handles(&b));
        }
        for tag in [0x00u8, 0xFF] {
            b[field::LAYOUT_TAG as usize] = tag;
            let e = DescriptorHead::decode(&b, 0, "t").unwrap_err().to_string();
            assert!(e.contains("reserved"), "{e}");
        }
        b[field::LAYOUT_TAG as usize] = 0x33;
        // An element type this crate does not read (int4) is kept as a tag.
        b[field::TYPE_TAG as usize] = 0x48;
        assert_eq!(DescriptorHead::decode(&b, 0, "t").unwrap().dtype(), None);
        // A rank whose shape would pass descriptor_length, and a length
        // past the bytes: errors, nothing read beyond.
        let mut r = b.clone();
        r[16..20].copy_from_slice(&5u32.to_le_bytes());
        assert!(DescriptorHead::decode(&r, 0, "t").is_err());
        let mut l = b.clone();
        l[6..10].copy_from_slice(&1000u32.to_le_bytes());
        assert!(DescriptorHead::decode(&l, 0, "t").is_err());
        // Sparse tags are not the dense codec's.
        for tag in [LAYOUT_COO, LAYOUT_CSR] {
            let mut s = example().encode();
            s[field::LAYOUT_TAG as usize] = tag;
            assert!(!DenseDescriptor::handles(&s));
            assert!(DenseDescriptor::decode(&s, 0, "t").is_err());
        }
    }
}
