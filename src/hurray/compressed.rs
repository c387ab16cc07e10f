//! The CSR (layout 0x07) and CSC (layout 0x08) tensor descriptors.
//!
//! Both are rank 2 and share their bytes: after the common header and
//! `byte_offset` (which must be 0) come `nnz` u64 and 8 reserved zero
//! bytes, then `buffer_count` = 3 and the handles of `values`, the minor
//! indices (`col_indices` / `row_indices`, u64) and the pointers
//! (`row_ptr` / `col_ptr`, u64, extent of the major dimension + 1).

use super::descriptor::{
    BufferHandle, DESC_HAS_STATISTICS, HANDLE_LEN, field, read_dtype, read_extent, read_prelude,
    read_statistics, write_head,
};
use super::statistics::{STATISTICS_LEN, Statistics};
use super::{ByteReader, LAYOUT_CSC, LAYOUT_CSR};
use crate::element::DType;
use crate::error::{Error, Result};

/// Offset of `nnz` in a CSR/CSC descriptor.
pub const NNZ_OFFSET: usize = 44;
/// Offset of `buffer_count`.
pub const BUFFER_COUNT_OFFSET: usize = 60;
/// Offset of the first buffer handle.
pub const HANDLES_OFFSET: usize = 61;

/// Length of a CSR/CSC descriptor: 109 bytes, 181 with statistics.
pub fn compressed_descriptor_len(with_statistics: bool) -> usize {
    HANDLES_OFFSET + 3 * HANDLE_LEN + if with_statistics { STATISTICS_LEN } else { 0 }
}

/// A decoded CSR or CSC descriptor.
#[derive(Clone, Debug, PartialEq)]
pub struct CompressedDescriptor {
    /// `false`: CSR (rows compressed); `true`: CSC (columns compressed).
    pub column_major: bool,
    /// Element type.
    pub dtype: DType,
    /// `[nrows, ncols]`.
    pub shape: [u64; 2],
    /// Number of stored entries.
    pub nnz: u64,
    /// Buffer 0, `nnz` elements.
    pub values: BufferHandle,
    /// Buffer 1: `col_indices` (CSR) or `row_indices` (CSC), `nnz` u64.
    pub indices: BufferHandle,
    /// Buffer 2: `row_ptr` (CSR) or `col_ptr` (CSC), `shape[major] + 1` u64.
    pub pointers: BufferHandle,
    /// The statistics section, when present.
    pub statistics: Option<Statistics>,
}

impl CompressedDescriptor {
    /// The layout tag, 0x07 or 0x08.
    pub fn layout_tag(&self) -> u8 {
        if self.column_major {
            LAYOUT_CSC
        } else {
            LAYOUT_CSR
        }
    }

    /// The compressed dimension: 0 for CSR, 1 for CSC.
    pub fn major_dim(&self) -> usize {
        usize::from(self.column_major)
    }

    /// Entries of the pointer buffer: `shape[major] + 1` (None on overflow).
    pub fn pointer_count(&self) -> Option<u64> {
        self.shape[self.major_dim()].checked_add(1)
    }

    /// Encoded length.
    pub fn encoded_len(&self) -> usize {
        compressed_descriptor_len(self.statistics.is_some())
    }

    /// Encode the descriptor.
    pub fn encode(&self) -> Vec<u8> {
        let len = self.encoded_len();
        let mut out = Vec::with_capacity(len);
        let stats = self.statistics.is_some();
        write_head(&mut out, len, stats, self.dtype, self.layout_tag(), 2);
        for d in self.shape {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&0u64.to_le_bytes()); // byte_offset
        out.extend_from_slice(&self.nnz.to_le_bytes());
        out.extend_from_slice(&[0u8; 8]);
        out.push(3);
        self.values.encode(&mut out);
        self.indices.encode(&mut out);
        self.pointers.encode(&mut out);
        if let Some(s) = &self.statistics {
            s.encode(&mut out);
        }
        debug_assert_eq!(out.len(), len);
        out
    }

    /// Decode a CSR or CSC descriptor from `bytes` (which may extend past its
    /// end). `offset` is its absolute position, for messages; `section`
    /// names it. Every structural rule is checked: version, flags, rank 2,
    /// fixed shape, `byte_offset` = 0, reserved bytes, `buffer_count` = 3,
    /// the handles, and the statistics' nnz.
    pub fn decode(bytes: &[u8], offset: u64, section: &str) -> Result<CompressedDescriptor> {
        let mut r = ByteReader::new(bytes, offset, section);
        let (desc_len, flags) = read_prelude(&mut r, section)?;
        if flags & !DESC_HAS_STATISTICS != 0 {
            return Err(Error::Unsupported(format!(
                "{section}: descriptor flags 0x{flags:08x}: quantized, sharded, extension-type and composite-member tensors are not supported"
            )));
        }
        let has_stats = flags & DESC_HAS_STATISTICS != 0;
        let dtype = read_dtype(&mut r)?;
        let column_major = match r.u8("layout tag")? {
            LAYOUT_CSR => false,
            LAYOUT_CSC => true,
            t => {
                return Err(r.err_at(
                    field::LAYOUT_TAG as usize,
                    format!("layout tag 0x{t:02x} is not CSR or CSC"),
                ));
            }
        };
        let name = if column_major { "CSC" } else { "CSR" };
        let rank = r.u32("rank")?;
        if rank != 2 {
            return Err(r.err_at(
                field::RANK as usize,
                format!("rank {rank}: {name} is defined for rank 2 only"),
            ));
        }
        let expected_len = compressed_descriptor_len(has_stats);
        if desc_len != expected_len {
            return Err(r.err_at(
                field::DESCRIPTOR_LENGTH as usize,
                format!("descriptor_length {desc_len} does not match a {name} descriptor (expected {expected_len})"),
            ));
        }
        let mut shape = [0u64; 2];
        for (d, e) in shape.iter_mut().enumerate() {
            *e = read_extent(&mut r, d, name)?;
        }
        let byte_offset = r.u64("byte_offset")?;
        if byte_offset != 0 {
            return Err(r.err_at(
                field::byte_offset(2) as usize,
                format!("byte_offset is {byte_offset}, must be 0 for {name}"),
            ));
        }
        let nnz = r.u64("nnz")?;
        r.reserved(8, "descriptor reserved bytes after nnz")?;
        let buffer_count = r.u8("buffer_count")?;
        if buffer_count != 3 {
            return Err(r.err_at(
                BUFFER_COUNT_OFFSET,
                format!("buffer_count is {buffer_count}, {name} has exactly 3"),
            ));
        }
        let (minor_name, ptr_name) = if column_major {
            ("row_indices", "col_ptr")
        } else {
            ("col_indices", "row_ptr")
        };
        let values = BufferHandle::decode(&mut r, "values")?;
        let indices = BufferHandle::decode(&mut r, minor_name)?;
        let pointers = BufferHandle::decode(&mut r, ptr_name)?;
        let statistics = read_statistics(&mut r, has_stats, nnz)?;
        debug_assert_eq!(r.pos(), expected_len);
        Ok(CompressedDescriptor {
            column_major,
            dtype,
            shape,
            nnz,
            values,
            indices,
            pointers,
            statistics,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::hurray::statistics::NNZ_VALID;

    /// The spec's CSR example: shape [4, 5], f32, nnz 5.
    fn example() -> CompressedDescriptor {
        CompressedDescriptor {
            column_major: false,
            dtype: DType::F32,
            shape: [4, 5],
            nnz: 5,
            values: BufferHandle::cpu(20, 4096),
            indices: BufferHandle::cpu(40, 4096),
            pointers: BufferHandle::cpu(40, 4096),
            statistics: None,
        }
    }

    #[test]
    fn round_trip_and_lengths() {
        let d = example();
        let b = d.encode();
        assert_eq!(b.len(), 109);
        assert_eq!((b[15], b[60]), (0x07, 3));
        assert_eq!(u64::from_le_bytes(b[44..52].try_into().unwrap()), 5);
        assert_eq!(CompressedDescriptor::decode(&b, 64, "t").unwrap(), d);
        let mut c = d.clone();
        c.column_major = true;
        c.statistics = Some(Statistics {
            computed_mask: NNZ_VALID,
            nnz: 5,
            ..Default::default()
        });
        let b = c.encode();
        assert_eq!((b.len(), b[15]), (181, 0x08));
        assert_eq!(CompressedDescriptor::decode(&b, 64, "t").unwrap(), c);
    }

    #[test]
    fn rejects_broken_fields() {
        let b = example().encode();
        let cases: &[(usize, u8, &str)] = &[
            (0, b'X', "magic"),
            (6, 110, "descriptor_length"),
            (10, 0x20, "undefined bits"),
            (10, 0x02, "not supported"),
            (15, 0x06, "not CSR or CSC"),
            (16, 3, "rank 3"),
            (36, 1, "byte_offset"),
            (55, 1, "reserved"),
            (60, 2, "buffer_count"),
            (61 + 32 + 12, 0x99, "row_ptr"),
        ];
        for &(pos, v, want) in cases {
            let mut bad = b.clone();
            bad[pos] = v;
            let e = CompressedDescriptor::decode(&bad, 0, "t")
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "byte {pos} = {v}: {e}");
        }
        assert!(CompressedDescriptor::decode(&b[..108], 0, "t").is_err());
    }
}
