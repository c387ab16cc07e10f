//! A stored (uncompressed) zip archive written as a stream, zip64 when an
//! entry or the archive passes 4 GiB (or a lower limit set for tests).
//!
//! Written here rather than with a zip crate: each entry's size is known
//! before its data (the `.npy` arrays of a matrix), so the local header is
//! written first and only its CRC-32 patched afterwards; no compression,
//! no reading, about 150 lines against a dependency tree, and the archive
//! goes through our atomic [`Output`].

use super::super::output::Output;
use crate::Result;

const LOCAL: u32 = 0x0403_4b50;
const CENTRAL: u32 = 0x0201_4b50;
const END: u32 = 0x0605_4b50;
const END64: u32 = 0x0606_4b50;
const LOCATOR64: u32 = 0x0706_4b50;
const MAX32: u64 = 0xFFFF_FFFF;
/// 1980-01-01 00:00 in MS-DOS form (the earliest date zip can say).
const DOS_DATE: u16 = (1 << 5) | 1;

struct Entry {
    name: String,
    offset: u64,
    size: u64,
    crc: u32,
}

pub(crate) struct ZipWriter {
    out: Output,
    entries: Vec<Entry>,
    /// The entry being written: expected size, bytes so far, CRC state.
    open: Option<(u64, u64, crc32fast::Hasher)>,
    /// Sizes and offsets from this one on are written as zip64.
    limit: u64,
}

fn le16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn le32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn le64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

impl ZipWriter {
    /// A writer that uses zip64 records for sizes and offsets of at least
    /// `limit` bytes (0: the format's own limit, 4 GiB - 1); a small limit
    /// lets tests check the zip64 records on a small archive.
    pub(crate) fn with_zip64_at(out: Output, limit: u64) -> ZipWriter {
        ZipWriter {
            out,
            entries: Vec::new(),
            open: None,
            limit: if limit == 0 { MAX32 } else { limit.min(MAX32) },
        }
    }

    /// Start entry `name` of exactly `size` bytes.
    pub(crate) fn begin(&mut self, name: &str, size: u64) -> Result<()> {
        let offset = self.out.position();
        let big = size >= self.limit;
        let mut h = Vec::with_capacity(30 + name.len() + 20);
        le32(&mut h, LOCAL);
        le16(&mut h, if big { 45 } else { 20 });
        le16(&mut h, 0); // flags
        le16(&mut h, 0); // stored
        le16(&mut h, 0); // time
        le16(&mut h, DOS_DATE);
        le32(&mut h, 0); // CRC-32, patched at `end`
        let s32 = if big { MAX32 as u32 } else { size as u32 };
        le32(&mut h, s32);
        le32(&mut h, s32);
        le16(&mut h, name.len() as u16);
        le16(&mut h, if big { 20 } else { 0 });
        h.extend_from_slice(name.as_bytes());
        if big {
            le16(&mut h, 1);
            le16(&mut h, 16);
            le64(&mut h, size);
            le64(&mut h, size);
        }
        self.out.write(&h)?;
        self.entries.push(Entry {
            name: name.to_string(),
            offset,
            size,
            crc: 0,
        });
        self.open = Some((size, 0, crc32fast::Hasher::new()));
        Ok(())
    }

    /// Data of the open entry.
    pub(crate) fn write(&mut self, data: &[u8]) -> Result<()> {
        if let Some((_, n, h)) = self.open.as_mut() {
            h.update(data);
            *n += data.len() as u64;
        }
        self.out.write(data)
    }

    /// Close the open entry; its data must have the announced size.
    pub(crate) fn end(&mut self) -> Result<()> {
        let Some((size, n, h)) = self.open.take() else {
            return Ok(());
        };
        if n != size {
            return Err(crate::Error::InvalidOptions(format!(
                "zip entry announced {size} bytes, got {n} (internal error)"
            )));
        }
        let crc = h.finalize();
        let Some(e) = self.entries.last_mut() else {
            return Ok(());
        };
        e.crc = crc;
        let at = e.offset + 14;
        self.out.patch(at, &crc.to_le_bytes())
    }

    /// Write the central directory and commit the file; returns its size.
    pub(crate) fn finish(mut self) -> Result<u64> {
        self.end()?;
        let cd_offset = self.out.position();
        for e in &self.entries {
            let big = e.size >= self.limit || e.offset >= self.limit;
            let mut h = Vec::with_capacity(46 + e.name.len() + 28);
            le32(&mut h, CENTRAL);
            le16(&mut h, (3 << 8) | 45); // made by: Unix, zip 4.5
            le16(&mut h, if big { 45 } else { 20 });
            le16(&mut h, 0);
            le16(&mut h, 0);
            le16(&mut h, 0);
            le16(&mut h, DOS_DATE);
            le32(&mut h, e.crc);
            let s32 = if big { MAX32 as u32 } else { e.size as u32 };
            le32(&mut h, s32);
            le32(&mut h, s32);
            le16(&mut h, e.name.len() as u16);
            le16(&mut h, if big { 28 } else { 0 });
            le16(&mut h, 0); // comment
            le16(&mut h, 0); // disk
            le16(&mut h, 0); // internal attributes
            le32(&mut h, 0o100644 << 16); // regular file, rw-r--r--
            le32(&mut h, if big { MAX32 as u32 } else { e.offset as u32 });
            h.extend_from_slice(e.name.as_bytes());
            if big {
                le16(&mut h, 1);
                le16(&mut h, 24);
                le64(&mut h, e.size);
                le64(&mut h, e.size);
                le64(&mut h, e.offset);
            }
            self.out.write(&h)?;
        }
        let cd_end = self.out.position();
        let cd_size = cd_end - cd_offset;
        let n = self.entries.len() as u64;
        let big = cd_offset >= self.limit || cd_size >= self.limit || n >= 0xFFFF;
        let mut t = Vec::with_capacity(98);
        if big {
            le32(&mut t, END64);
            le64(&mut t, 44);
            le16(&mut t, (3 << 8) | 45);
            le16(&mut t, 45);
            le32(&mut t, 0);
            le32(&mut t, 0);
            le64(&mut t, n);
            le64(&mut t, n);
            le64(&mut t, cd_size);
            le64(&mut t, cd_offset);
            le32(&mut t, LOCATOR64);
            le32(&mut t, 0);
            le64(&mut t, cd_end);
            le32(&mut t, 1);
        }
        le32(&mut t, END);
        le16(&mut t, 0);
        le16(&mut t, 0);
        let n16 = if big { 0xFFFF } else { n as u16 };
        le16(&mut t, n16);
        le16(&mut t, n16);
        le32(&mut t, if big { MAX32 as u32 } else { cd_size as u32 });
        le32(&mut t, if big { MAX32 as u32 } else { cd_offset as u32 });
        le16(&mut t, 0);
        self.out.write(&t)?;
        self.out.commit()
    }
}
