//! The 64-byte file header.

use super::{ByteReader, FILE_MAGIC, HEADER_LEN, MAX_ALIGNMENT, MIN_ALIGNMENT};
use crate::error::{Error, Result};

/// file_flags bit 0: the file has a KV metadata section.
pub const FLAG_HAS_KV_METADATA: u32 = 1 << 0;
/// file_flags bit 1: the index is sorted by name.
pub const FLAG_SORTED_INDEX: u32 = 1 << 1;
/// file_flags bit 2: the trailer carries a CRC-32C of the index.
pub const FLAG_HAS_INDEX_CRC32C: u32 = 1 << 2;
const KNOWN_FLAGS: u32 = FLAG_HAS_KV_METADATA | FLAG_SORTED_INDEX | FLAG_HAS_INDEX_CRC32C;

/// The file header fields that carry information.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// file_flags.
    pub flags: u32,
    /// data_buffer_alignment (power of two, 4096 ..= 2 MiB).
    pub alignment: u32,
    /// Offset of the first descriptor (>= 64, 8-aligned).
    pub first_descriptor_offset: u64,
    /// Number of tensors, or u64::MAX when unknown.
    pub tensor_count_hint: u64,
}

impl FileHeader {
    /// Encode to the 64 bytes of the header.
    pub fn encode(&self) -> [u8; 64] {
        let mut h = [0u8; 64];
        h[0..8].copy_from_slice(FILE_MAGIC);
        h[8] = 1;
        h[9] = 0;
        h[12..16].copy_from_slice(&self.flags.to_le_bytes());
        h[16..20].copy_from_slice(&self.alignment.to_le_bytes());
        h[20..28].copy_from_slice(&self.first_descriptor_offset.to_le_bytes());
        h[28..36].copy_from_slice(&self.tensor_count_hint.to_le_bytes());
        h
    }

    /// Decode and validate the header from the first bytes of a file.
    pub fn decode(bytes: &[u8]) -> Result<FileHeader> {
        if (bytes.len() as u64) < HEADER_LEN {
            return Err(Error::invalid(
                "file header",
                0,
                format!(
                    "file is {} bytes, shorter than the 64-byte header",
                    bytes.len()
                ),
            ));
        }
        let mut r = ByteReader::new(&bytes[..64], 0, "file header");
        let magic = r.array::<8>("magic")?;
        if &magic != FILE_MAGIC {
            return Err(r.err_at(
                0,
                format!("magic is {magic:02x?}, expected \"HRRYFILE\"; not a Hurray file"),
            ));
        }
        let major = r.u8("container major version")?;
        let minor = r.u8("container minor version")?;
        if major != 1 {
            return Err(Error::Unsupported(format!(
                "container version {major}.{minor}; this reader handles 1.x"
            )));
        }
        if minor != 0 {
            return Err(r.err_at(
                9,
                format!("container minor version {minor}, only 1.0 is defined"),
            ));
        }
        r.reserved(2, "reserved header bytes 10..12")?;
        let flags = r.u32("file_flags")?;
        if flags & !KNOWN_FLAGS != 0 {
            return Err(r.err_at(12, format!("file_flags 0x{flags:08x} sets undefined bits")));
        }
        let alignment = r.u32("data_buffer_alignment")?;
        if !alignment.is_power_of_two() || !(MIN_ALIGNMENT..=MAX_ALIGNMENT).contains(&alignment) {
            return Err(r.err_at(
                16,
                format!(
                    "data_buffer_alignment {alignment} is not a power of two in 4096..=2097152"
                ),
            ));
        }
        let first_descriptor_offset = r.u64("first_descriptor_offset")?;
        if first_descriptor_offset < HEADER_LEN || first_descriptor_offset % 8 != 0 {
            return Err(r.err_at(
                20,
                format!("first_descriptor_offset {first_descriptor_offset} must be >= 64 and a multiple of 8"),
            ));
        }
        let tensor_count_hint = r.u64("tensor_count_hint")?;
        r.reserved(28, "reserved header bytes 36..64")?;
        Ok(FileHeader {
            flags,
            alignment,
            first_descriptor_offset,
            tensor_count_hint,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        let h = FileHeader {
            flags: FLAG_HAS_INDEX_CRC32C | FLAG_HAS_KV_METADATA,
            alignment: 4096,
            first_descriptor_offset: 64,
            tensor_count_hint: 1,
        };
        let b = h.encode();
        assert_eq!(FileHeader::decode(&b).unwrap(), h);
        let mut bad = b;
        bad[16] = 1; // alignment 4097
        assert!(FileHeader::decode(&bad).is_err());
        let mut bad = b;
        bad[40] = 1;
        assert!(
            FileHeader::decode(&bad)
                .unwrap_err()
                .to_string()
                .contains("byte 40")
        );
        let mut bad = b;
        bad[15] = 0x80;
        assert!(FileHeader::decode(&bad).is_err());
        assert!(FileHeader::decode(&b[..63]).is_err());
    }
}
