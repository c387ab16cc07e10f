//! The index section: one entry per tensor.

use super::ByteReader;
use crate::error::Result;
use std::collections::HashSet;

/// One index entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// Tensor name (UTF-8, non-empty, unique in the file).
    pub name: String,
    /// Absolute offset of the descriptor.
    pub descriptor_offset: u64,
    /// Length of the descriptor.
    pub descriptor_length: u32,
    /// Absolute offset of the first buffer.
    pub data_offset: u64,
    /// End of the last buffer minus `data_offset`.
    pub data_length: u64,
}

/// Fixed bytes of an entry besides the name.
const ENTRY_FIXED: usize = 2 + 8 + 4 + 8 + 8 + 4;

/// Absolute offsets of one encoded index entry's fields, so that a message
/// about a bad value names the bytes it came from. The entry layout is
/// `name_len u16, name, descriptor_offset u64, descriptor_length u32,
/// data_offset u64, data_length u64, flags u32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryFields {
    /// `descriptor_offset` (u64).
    pub descriptor_offset: u64,
    /// `descriptor_length` (u32).
    pub descriptor_length: u64,
    /// `data_offset` (u64).
    pub data_offset: u64,
    /// `data_length` (u64).
    pub data_length: u64,
    /// Where the next entry starts.
    pub end: u64,
}

impl EntryFields {
    /// The fields of the entry that starts at `start` and whose name is
    /// `name_len` bytes long.
    pub fn at(start: u64, name_len: usize) -> EntryFields {
        let descriptor_offset = start + 2 + name_len as u64;
        EntryFields {
            descriptor_offset,
            descriptor_length: descriptor_offset + 8,
            data_offset: descriptor_offset + 12,
            data_length: descriptor_offset + 20,
            end: start + (ENTRY_FIXED + name_len) as u64,
        }
    }

    /// Where the first entry of an index section at `index_offset` starts
    /// (after the u64 entry count).
    pub fn first(index_offset: u64) -> u64 {
        index_offset + 8
    }
}

/// Encode the whole index section.
pub fn encode(entries: &[IndexEntry]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for e in entries {
        out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        out.extend_from_slice(e.name.as_bytes());
        out.extend_from_slice(&e.descriptor_offset.to_le_bytes());
        out.extend_from_slice(&e.descriptor_length.to_le_bytes());
        out.extend_from_slice(&e.data_offset.to_le_bytes());
        out.extend_from_slice(&e.data_length.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
    }
    out
}

/// Decode the index section. `offset` is its absolute position.
pub fn decode(bytes: &[u8], offset: u64) -> Result<Vec<IndexEntry>> {
    let mut r = ByteReader::new(bytes, offset, "index section");
    let count = r.u64("entry_count")?;
    // Each entry takes at least ENTRY_FIXED + 1 bytes: a hostile count cannot
    // make us allocate more than the section's length justifies.
    let max_entries = (r.remaining() / (ENTRY_FIXED + 1)) as u64;
    if count > max_entries {
        return Err(r.err_at(
            0,
            format!(
                "entry_count {count} cannot fit in an index of {} bytes",
                bytes.len()
            ),
        ));
    }
    let mut entries = Vec::with_capacity(count as usize);
    let mut seen = HashSet::new();
    for i in 0..count {
        let p = r.pos();
        let name_len = r.u16("name_len")? as usize;
        if name_len == 0 {
            return Err(r.err_at(p, format!("entry {i}: name_len is 0")));
        }
        let raw = r.take(name_len, "tensor name")?;
        let name = std::str::from_utf8(raw)
            .map_err(|e| r.err_at(p + 2, format!("entry {i}: name is not UTF-8 ({e})")))?
            .to_string();
        if !seen.insert(name.clone()) {
            return Err(r.err_at(p, format!("entry {i}: tensor name {name:?} appears twice")));
        }
        let descriptor_offset = r.u64("descriptor_offset")?;
        let descriptor_length = r.u32("descriptor_length")?;
        let data_offset = r.u64("data_offset")?;
        let data_length = r.u64("data_length")?;
        let fp = r.pos();
        let flags = r.u32("entry flags")?;
        if flags != 0 {
            return Err(r.err_at(
                fp,
                format!("entry {i} ({name:?}): flags 0x{flags:08x} must be 0"),
            ));
        }
        entries.push(IndexEntry {
            name,
            descriptor_offset,
            descriptor_length,
            data_offset,
            data_length,
        });
    }
    if r.remaining() != 0 {
        return Err(r.err(format!(
            "{} bytes follow the last index entry inside index_length",
            r.remaining()
        )));
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_worked_example_length() {
        let e = vec![IndexEntry {
            name: "coo".into(),
            descriptor_offset: 64,
            descriptor_length: 93,
            data_offset: 4096,
            data_length: 4144,
        }];
        let b = encode(&e);
        assert_eq!(b.len(), 45);
        assert_eq!(decode(&b, 8240).unwrap(), e);
        let mut two = e.clone();
        two.push(e[0].clone());
        assert!(
            decode(&encode(&two), 0)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        // The named field offsets agree with the encoder.
        let f = EntryFields::at(EntryFields::first(100), 3);
        let at = |o: u64| (o - 100) as usize;
        assert_eq!(b[at(f.descriptor_offset)..][..8], 64u64.to_le_bytes());
        assert_eq!(b[at(f.descriptor_length)..][..4], 93u32.to_le_bytes());
        assert_eq!(b[at(f.data_offset)..][..8], 4096u64.to_le_bytes());
        assert_eq!(b[at(f.data_length)..][..8], 4144u64.to_le_bytes());
        assert_eq!(at(f.end), b.len());
        let mut huge = b.clone();
        huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&huge, 0).is_err());
    }
}
