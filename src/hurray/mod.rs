//! The HRRYFILE codec: pure bytes in, bytes out, no I/O.
//!
//! Every `decode` checks the structural rules of the Hurray specification
//! that can be checked from the bytes of its own section; cross-section
//! checks (buffers inside the file, index against descriptor) live in the
//! reader. Decoders never allocate more than the input's length justifies.

use crate::layout::Layout;

pub mod composite;
pub mod compressed;
pub mod crc32c;
pub mod csf;
pub mod dense;
pub mod descriptor;
pub mod header;
pub mod index;
pub mod kv;
pub mod statistics;
pub mod trailer;

pub use composite::{CompositeHead, Shard};
pub use csf::CsfDescriptor;
pub use dense::{DenseDescriptor, DescriptorHead};
pub use descriptor::{BufferHandle, CooDescriptor};
pub use header::FileHeader;
pub use index::IndexEntry;
pub use kv::KvValue;
pub use statistics::Statistics;
pub use trailer::Trailer;

use crate::error::{Error, Result};

/// File magic, first 8 bytes.
pub const FILE_MAGIC: &[u8; 8] = b"HRRYFILE";
/// Descriptor and trailer magic.
pub const MAGIC: &[u8; 4] = b"HRRY";
/// Size of the file header.
pub const HEADER_LEN: u64 = 64;
/// Size of the trailer.
pub const TRAILER_LEN: u64 = 40;
/// Every descriptor starts at a multiple of this.
pub const DESCRIPTOR_ALIGNMENT: u64 = 8;
/// Smallest allowed data_buffer_alignment.
pub const MIN_ALIGNMENT: u32 = 4096;
/// Largest allowed data_buffer_alignment.
pub const MAX_ALIGNMENT: u32 = 2 * 1024 * 1024;
/// Layout tag of dense row-major (C order).
pub const LAYOUT_ROW_MAJOR: u8 = Layout::RowMajor.tag();
/// Layout tag of dense column-major (Fortran order).
pub const LAYOUT_COLUMN_MAJOR: u8 = Layout::ColumnMajor.tag();
/// Layout tag of COO.
pub const LAYOUT_COO: u8 = Layout::Coo.tag();
/// Layout tag of CSR.
pub const LAYOUT_CSR: u8 = Layout::Csr.tag();
/// Layout tag of CSC.
pub const LAYOUT_CSC: u8 = Layout::Csc.tag();
/// Layout tag of CSF (hurray-core 0.1.0's `TAG_CSF`, 0x09; the spec's CSF
/// page says 0x0A, which hurray-core and `crate::layout`'s table give to
/// block-paged).
pub const LAYOUT_CSF: u8 = Layout::Csf.tag();
/// Layout tag of a composite head.
pub const LAYOUT_COMPOSITE: u8 = Layout::Composite.tag();
/// Largest rank the format allows.
pub const MAX_RANK: usize = 64;

/// Round `x` up to a multiple of `a` (a power of two). None on overflow.
pub fn align_up(x: u64, a: u64) -> Option<u64> {
    debug_assert!(a.is_power_of_two());
    x.checked_add(a - 1).map(|v| v & !(a - 1))
}

/// A bounds-checked little-endian reader over one section's bytes.
///
/// Errors name the section and the absolute file offset of the field.
pub(crate) struct ByteReader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    section: &'a str,
}

impl<'a> ByteReader<'a> {
    /// `base` is the absolute offset of `buf[0]` in the file, for messages.
    pub(crate) fn new(buf: &'a [u8], base: u64, section: &'a str) -> Self {
        ByteReader {
            buf,
            pos: 0,
            base,
            section,
        }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn err(&self, detail: impl Into<String>) -> Error {
        Error::invalid(self.section, self.offset(), detail)
    }

    pub(crate) fn err_at(&self, pos: usize, detail: impl Into<String>) -> Error {
        Error::invalid(self.section, self.base + pos as u64, detail)
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.remaining() < n {
            return Err(self.err(format!(
                "truncated: {what} needs {n} bytes, {} remain",
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }

    pub(crate) fn f64(&mut self, what: &str) -> Result<f64> {
        Ok(f64::from_le_bytes(self.array(what)?))
    }

    /// Read `n` bytes that the spec requires to be zero.
    pub(crate) fn reserved(&mut self, n: usize, what: &str) -> Result<()> {
        let start = self.pos;
        let s = self.take(n, what)?;
        if let Some(i) = s.iter().position(|&b| b != 0) {
            return Err(self.err_at(
                start + i,
                format!("{what} must be zero, found 0x{:02x}", s[i]),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn align_up_works() {
        assert_eq!(align_up(0, 4096), Some(0));
        assert_eq!(align_up(1, 4096), Some(4096));
        assert_eq!(align_up(4096, 4096), Some(4096));
        assert_eq!(align_up(157, 8), Some(160));
        assert_eq!(align_up(u64::MAX, 8), None);
    }

    #[test]
    fn reader_reports_truncation_and_reserved() {
        let b = [1u8, 0, 0, 7];
        let mut r = ByteReader::new(&b, 100, "test");
        assert_eq!(r.u16("a").unwrap(), 1);
        let e = r.reserved(2, "pad").unwrap_err().to_string();
        assert!(e.contains("byte 103"), "{e}");
        let mut r = ByteReader::new(&b, 0, "test");
        assert!(r.u64("x").unwrap_err().to_string().contains("truncated"));
    }
}
