//! The CSF descriptor (layout 0x09): a rank >= 3 tensor stored as a tree
//! of `rank` compressed levels.
//!
//! After the common header, the shape and `byte_offset` (which must be 0)
//! come `nnz` u64, `mode_order` (u32 per level: the dimension stored at
//! that level, a permutation of `0..rank`) and 8 reserved zero bytes, then
//! `buffer_count` = `2 * rank + 1` and the handles of `values`, then of
//! `pos_L` and `crd_L` for each level `L` (u64 each). `pos_0` is `[0, n_0]`;
//! `pos_L` has one more entry than level `L - 1` has nodes; `crd_L` names
//! the level's nodes, `nnz` of them at the leaf level.

use super::descriptor::{
    BufferHandle, DESC_HAS_STATISTICS, HANDLE_LEN, field, read_dtype, read_extent, read_prelude,
    read_statistics, write_head,
};
use super::statistics::{STATISTICS_LEN, Statistics};
use super::{ByteReader, LAYOUT_CSF, MAX_RANK};
use crate::element::DType;
use crate::error::{Error, Result};
use crate::options::check_mode_order;

/// Offsets of a CSF descriptor's fields that follow the shape, from the
/// descriptor's start.
pub mod csf_field {
    /// `nnz` (u64), after `byte_offset`.
    pub fn nnz(rank: usize) -> u64 {
        super::field::byte_offset(rank) + 8
    }
    /// `mode_order` (u32 per level).
    pub fn mode_order(rank: usize) -> u64 {
        nnz(rank) + 8
    }
    /// `buffer_count` (u8), after 8 reserved bytes.
    pub fn buffer_count(rank: usize) -> u64 {
        mode_order(rank) + 4 * rank as u64 + 8
    }
    /// The handle of buffer `k` (0: values; `2L + 1`: `pos_L`; `2L + 2`:
    /// `crd_L`).
    pub fn handle(rank: usize, k: usize) -> u64 {
        buffer_count(rank) + 1 + (k * super::HANDLE_LEN) as u64
    }
    /// The statistics section, when present.
    pub fn statistics(rank: usize) -> u64 {
        handle(rank, 2 * rank + 1)
    }
}

/// Length of a CSF descriptor of rank `rank`.
pub fn csf_descriptor_len(rank: usize, with_statistics: bool) -> usize {
    csf_field::statistics(rank) as usize + if with_statistics { STATISTICS_LEN } else { 0 }
}

/// A decoded CSF descriptor.
#[derive(Clone, Debug, PartialEq)]
pub struct CsfDescriptor {
    /// Element type.
    pub dtype: DType,
    /// Extent of each dimension (3..=64 of them).
    pub shape: Vec<u64>,
    /// Number of stored entries (leaves).
    pub nnz: u64,
    /// `mode_order[L]`: the dimension stored at level `L`.
    pub mode_order: Vec<u32>,
    /// Buffer 0.
    pub values: BufferHandle,
    /// `(pos_L, crd_L)` per level, outermost first.
    pub levels: Vec<(BufferHandle, BufferHandle)>,
    /// The statistics section, when present.
    pub statistics: Option<Statistics>,
}

impl CsfDescriptor {
    /// Rank of the tensor.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Encoded length.
    pub fn encoded_len(&self) -> usize {
        csf_descriptor_len(self.rank(), self.statistics.is_some())
    }

    /// Encode the descriptor.
    pub fn encode(&self) -> Vec<u8> {
        let len = self.encoded_len();
        let mut out = Vec::with_capacity(len);
        let rank = self.rank();
        write_head(
            &mut out,
            len,
            self.statistics.is_some(),
            self.dtype,
            LAYOUT_CSF,
            rank,
        );
        for &d in &self.shape {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&0u64.to_le_bytes()); // byte_offset
        out.extend_from_slice(&self.nnz.to_le_bytes());
        for &d in &self.mode_order {
            out.extend_from_slice(&d.to_le_bytes());
        }
        out.extend_from_slice(&[0u8; 8]);
        out.push((2 * rank + 1) as u8);
        self.values.encode(&mut out);
        for (pos, crd) in &self.levels {
            pos.encode(&mut out);
            crd.encode(&mut out);
        }
        if let Some(s) = &self.statistics {
            s.encode(&mut out);
        }
        debug_assert_eq!(out.len(), len);
        out
    }

    /// Decode a CSF descriptor from `bytes` (which may extend past its
    /// end). `offset` is its absolute position, for messages; `section`
    /// names it. Checked: version, flags (a shard section is refused, as
    /// the spec forbids it on CSF), rank 3..=64, fixed shape,
    /// `byte_offset` = 0, `mode_order` a permutation, reserved bytes,
    /// `buffer_count` = 2 rank + 1, the handles, the statistics' nnz.
    pub fn decode(bytes: &[u8], offset: u64, section: &str) -> Result<CsfDescriptor> {
        let mut r = ByteReader::new(bytes, offset, section);
        let (desc_len, flags) = read_prelude(&mut r, section)?;
        if flags & !DESC_HAS_STATISTICS != 0 {
            return Err(Error::Unsupported(format!(
                "{section}: descriptor flags 0x{flags:08x}: quantized, sharded (which CSF may not be), extension-type and composite-member tensors are not supported"
            )));
        }
        let has_stats = flags & DESC_HAS_STATISTICS != 0;
        let dtype = read_dtype(&mut r)?;
        let tag = r.u8("layout tag")?;
        if tag != LAYOUT_CSF {
            return Err(r.err_at(
                field::LAYOUT_TAG as usize,
                format!("layout tag 0x{tag:02x} is not CSF (0x{LAYOUT_CSF:02x})"),
            ));
        }
        let rank = r.u32("rank")? as usize;
        if !(3..=MAX_RANK).contains(&rank) {
            return Err(r.err_at(
                field::RANK as usize,
                format!("rank {rank}: CSF is defined for ranks 3 to {MAX_RANK}"),
            ));
        }
        let expected_len = csf_descriptor_len(rank, has_stats);
        if desc_len != expected_len {
            return Err(r.err_at(
                field::DESCRIPTOR_LENGTH as usize,
                format!(
                    "descriptor_length {desc_len} does not match a rank-{rank} CSF descriptor (expected {expected_len})"
                ),
            ));
        }
        let mut shape = Vec::with_capacity(rank);
        for d in 0..rank {
            shape.push(read_extent(&mut r, d, "CSF")?);
        }
        let byte_offset = r.u64("byte_offset")?;
        if byte_offset != 0 {
            return Err(r.err_at(
                field::byte_offset(rank) as usize,
                format!("byte_offset is {byte_offset}, must be 0 for CSF"),
            ));
        }
        let nnz = r.u64("nnz")?;
        let mut mode_order = Vec::with_capacity(rank);
        for _ in 0..rank {
            mode_order.push(r.u32("mode_order")?);
        }
        if let Err((level, why)) = check_mode_order(&mode_order, rank) {
            return Err(r.err_at(
                (csf_field::mode_order(rank) + 4 * level as u64) as usize,
                format!("mode_order {mode_order:?} is not a permutation of 0..{rank}: {why}"),
            ));
        }
        r.reserved(8, "descriptor reserved bytes after mode_order")?;
        let buffer_count = r.u8("buffer_count")? as usize;
        if buffer_count != 2 * rank + 1 {
            return Err(r.err_at(
                csf_field::buffer_count(rank) as usize,
                format!(
                    "buffer_count is {buffer_count}, a rank-{rank} CSF tensor has exactly {}",
                    2 * rank + 1
                ),
            ));
        }
        let values = BufferHandle::decode(&mut r, "values")?;
        let mut levels = Vec::with_capacity(rank);
        for _ in 0..rank {
            let pos = BufferHandle::decode(&mut r, "pos")?;
            let crd = BufferHandle::decode(&mut r, "crd")?;
            levels.push((pos, crd));
        }
        let statistics = read_statistics(&mut r, has_stats, nnz)?;
        debug_assert_eq!(r.pos(), expected_len);
        debug_assert_eq!(
            csf_field::handle(rank, 1) as usize,
            csf_field::handle(rank, 0) as usize + HANDLE_LEN
        );
        Ok(CsfDescriptor {
            dtype,
            shape,
            nnz,
            mode_order,
            values,
            levels,
            statistics,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The spec's example: shape [2, 3, 4], f32, 4 entries, identity order.
    fn example() -> CsfDescriptor {
        let h = |n: u64| BufferHandle::cpu(n * 8, 4096);
        CsfDescriptor {
            dtype: DType::F32,
            shape: vec![2, 3, 4],
            nnz: 4,
            mode_order: vec![0, 1, 2],
            values: BufferHandle::cpu(16, 4096),
            levels: vec![(h(2), h(2)), (h(3), h(3)), (h(4), h(4))],
            statistics: None,
        }
    }

    #[test]
    fn round_trips_and_names_bad_fields() {
        let d = example();
        let b = d.encode();
        assert_eq!(b.len(), csf_descriptor_len(3, false));
        assert_eq!(CsfDescriptor::decode(&b, 0, "t").unwrap(), d);

        let mut bad = b.clone();
        let at = csf_field::mode_order(3) as usize + 4;
        bad[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
        let e = CsfDescriptor::decode(&bad, 0, "t").unwrap_err().to_string();
        assert!(
            e.contains("not a permutation") && e.contains("two levels"),
            "{e}"
        );

        let mut bad = b.clone();
        bad[field::RANK as usize..field::RANK as usize + 4].copy_from_slice(&2u32.to_le_bytes());
        let e = CsfDescriptor::decode(&bad, 0, "t").unwrap_err().to_string();
        assert!(e.contains("ranks 3 to 64"), "{e}");

        let mut bad = b;
        bad[csf_field::buffer_count(3) as usize - 1] = 1;
        let e = CsfDescriptor::decode(&bad, 0, "t").unwrap_err().to_string();
        assert!(e.contains("reserved"), "{e}");
    }
}
