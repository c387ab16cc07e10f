//! The 40-byte trailer at the end of the file.

use super::{ByteReader, MAGIC, TRAILER_LEN};
use crate::error::{Error, Result};

/// Offsets of the trailer's fields from its start (messages name the field
/// a bad value came from).
pub mod field {
    /// `index_offset` (u64).
    pub const INDEX_OFFSET: u64 = 0;
    /// `index_length` (u64).
    pub const INDEX_LENGTH: u64 = 8;
    /// `kv_offset` (u64).
    pub const KV_OFFSET: u64 = 16;
    /// `kv_length` (u32).
    pub const KV_LENGTH: u64 = 24;
    /// `index_crc32c` (u32); 4 reserved bytes follow.
    pub const INDEX_CRC32C: u64 = 28;
    /// The closing magic `HRRY`.
    pub const MAGIC: u64 = 36;
}

/// The trailer fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Trailer {
    /// Absolute offset of the index section.
    pub index_offset: u64,
    /// Length of the index section.
    pub index_length: u64,
    /// Absolute offset of the KV section, 0 if none.
    pub kv_offset: u64,
    /// Length of the KV section, 0 if none.
    pub kv_length: u32,
    /// CRC-32C of the index bytes (0 unless the header says it is present).
    pub index_crc32c: u32,
}

impl Trailer {
    /// Encode to 40 bytes.
    pub fn encode(&self) -> [u8; 40] {
        let mut t = [0u8; 40];
        let mut put = |at: u64, b: &[u8]| t[at as usize..][..b.len()].copy_from_slice(b);
        put(field::INDEX_OFFSET, &self.index_offset.to_le_bytes());
        put(field::INDEX_LENGTH, &self.index_length.to_le_bytes());
        put(field::KV_OFFSET, &self.kv_offset.to_le_bytes());
        put(field::KV_LENGTH, &self.kv_length.to_le_bytes());
        put(field::INDEX_CRC32C, &self.index_crc32c.to_le_bytes());
        put(field::MAGIC, MAGIC);
        t
    }

    /// Decode the trailer from the last 40 bytes of a file of `file_len` bytes.
    pub fn decode(bytes: &[u8], file_len: u64) -> Result<Trailer> {
        if bytes.len() as u64 != TRAILER_LEN {
            return Err(Error::invalid(
                "trailer",
                file_len,
                "file too short for a 40-byte trailer",
            ));
        }
        let base = file_len - TRAILER_LEN;
        let mut r = ByteReader::new(bytes, base, "trailer");
        let index_offset = r.u64("index_offset")?;
        let index_length = r.u64("index_length")?;
        let kv_offset = r.u64("kv_offset")?;
        let kv_length = r.u32("kv_length")?;
        let index_crc32c = r.u32("index CRC-32C")?;
        r.reserved(4, "trailer reserved bytes 32..36")?;
        let magic = r.array::<4>("trailer magic")?;
        if &magic != MAGIC {
            return Err(r.err_at(
                field::MAGIC as usize,
                format!(
                    "trailer magic is {magic:02x?}, expected \"HRRY\"; the file may be truncated"
                ),
            ));
        }
        Ok(Trailer {
            index_offset,
            index_length,
            kv_offset,
            kv_length,
            index_crc32c,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = Trailer {
            index_offset: 8240,
            index_length: 45,
            kv_offset: 0,
            kv_length: 0,
            index_crc32c: 0xdeadbeef,
        };
        let b = t.encode();
        assert_eq!(Trailer::decode(&b, 8325).unwrap(), t);
        let mut bad = b;
        bad[39] = 0;
        assert!(Trailer::decode(&bad, 8325).is_err());
        let mut bad = b;
        bad[33] = 1;
        assert!(Trailer::decode(&bad, 8325).is_err());
    }
}
