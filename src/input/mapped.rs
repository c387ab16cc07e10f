//! A memory-mapped input (binary records, MatrixMarket or text), parsed in
//! place, whose parsed pages leave the resident set as parsing advances:
//! without this the whole input would count against the memory budget
//! (the page cache keeps the pages). Mapping saves the copy `read()` makes
//! and lets the parsing threads read the file's pages themselves.

use crate::assemble::builder::Builder;
use crate::element::DType;
use crate::error::Result;
use crate::fs::IoCtx;
use crate::input::bin::push_bin_bytes;
use crate::input::chunks::Text;
use crate::input::common::Progress;
use crate::input::mtx::{MtxHeader, push_mtx_from, read_mtx_header};
use crate::input::text::push_text_from;
use std::fs::File;
use std::path::Path;

/// Release parsed pages in steps of at least this many bytes.
const RELEASE_STEP: u64 = 4 << 20;
/// Page size the release rounds down to.
const PAGE: u64 = 4096;
/// The largest folio the page cache maps whole (a PMD's 2 MiB).
const LARGE_FOLIO: u64 = 2 << 20;

/// A read-only map of an input file; see the module docs of `coo_assembler::input`.
pub struct MappedInput {
    map: memmap2::Mmap,
    released: u64,
    /// Bytes of a header already read ([`Self::read_mtx_header`]).
    start: usize,
}

impl std::fmt::Debug for MappedInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedInput")
            .field("len", &self.map.len())
            .field("released", &self.released)
            .finish()
    }
}

impl MappedInput {
    /// Map `file` (opened from `path`) for sequential reading. `None` when
    /// it is empty, not a regular file, or cannot be mapped: the caller
    /// then reads it through a buffer.
    pub fn map(io: &IoCtx, file: &File, path: &Path) -> Option<MappedInput> {
        if io.file_len(file, path).ok()? == 0 {
            return None;
        }
        // SAFETY: the map is only read; a file truncated by another process
        // while we read it would raise SIGBUS (documented for the CLI).
        let map = unsafe { io.map(file, path) }.ok()?;
        let _ = map.advise(memmap2::Advice::Sequential);
        Some(MappedInput {
            map,
            released: 0,
            start: 0,
        })
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Give back to the kernel the whole pages of bytes `a..b` of the map
    /// (read, and not to be read again soon: a later read faults the same
    /// file bytes back in). Safe to call from any thread.
    pub(crate) fn release_range(&self, a: usize, b: usize) {
        // Outward to whole 2 MiB: the page cache may hold the file in
        // large folios, mapped whole by a fault, which a release of part
        // of one leaves resident. Pages dropped that are read again only
        // fault back in.
        let lo = a as u64 / LARGE_FOLIO * LARGE_FOLIO;
        let hi = (b as u64)
            .div_ceil(LARGE_FOLIO)
            .saturating_mul(LARGE_FOLIO)
            .min(self.map.len() as u64);
        if hi <= lo {
            return;
        }
        // SAFETY: a read-only private file mapping: dropping its pages
        // only makes a later read fault the file's bytes back in.
        let _ = unsafe {
            self.map.unchecked_advise_range(
                memmap2::UncheckedAdvice::DontNeed,
                lo as usize,
                (hi - lo) as usize,
            )
        };
    }

    /// Push the binary records of the mapped file (see
    /// [`push_bin_bytes`]), releasing parsed pages as it goes; `progress`
    /// gets the bytes parsed so far.
    pub fn push_bin(
        &mut self,
        b: &mut Builder,
        rank: usize,
        dtype: DType,
        source: &str,
        progress: impl FnMut(u64),
    ) -> Result<u64> {
        self.parse_from(0, progress, |bytes, p| {
            push_bin_bytes(b, bytes, rank, dtype, source, p)
        })
    }

    /// Read the MatrixMarket header at the start of the file (as
    /// [`read_mtx_header`] does from a reader); [`Self::push_mtx`] then
    /// parses the lines after it.
    pub fn read_mtx_header(&mut self, source: &str) -> Result<MtxHeader> {
        let mut rest: &[u8] = &self.map;
        let h = read_mtx_header(&mut rest, source)?;
        self.start = self.map.len() - rest.len();
        Ok(h)
    }

    /// Push the entries of a MatrixMarket file whose header was read with
    /// [`Self::read_mtx_header`], as [`crate::input::push_mtx`] does, the
    /// parsing threads reading the mapped lines in place; `progress` gets
    /// the bytes parsed after the header.
    pub fn push_mtx(
        &mut self,
        b: &mut Builder,
        h: &MtxHeader,
        dtype: DType,
        source: &str,
        progress: impl FnMut(u64),
    ) -> Result<u64> {
        self.parse_from(self.start, progress, |bytes, p| {
            push_mtx_from(b, Text::<&[u8]>::Bytes(bytes), h, dtype, source, p)
        })
    }

    /// Push the whitespace text entries of the file, as
    /// [`crate::input::push_text`] does, parsed in place.
    /// `base`: the first index (0, or 1 for `.tns`).
    pub fn push_text(
        &mut self,
        b: &mut Builder,
        rank: usize,
        dtype: DType,
        base: u64,
        source: &str,
        progress: impl FnMut(u64),
    ) -> Result<u64> {
        self.parse_from(0, progress, |bytes, p| {
            push_text_from(b, Text::<&[u8]>::Bytes(bytes), rank, dtype, base, source, p)
        })
    }

    /// Run `parse` on the mapped bytes from offset `from`, with a progress
    /// callback that reports the bytes parsed (after `from`) to `progress`
    /// and releases the pages parsed so far.
    fn parse_from<T>(
        &mut self,
        from: usize,
        mut progress: impl FnMut(u64),
        parse: impl FnOnce(&[u8], Progress<'_>) -> Result<T>,
    ) -> Result<T> {
        let map = &self.map;
        let released = &mut self.released;
        let bytes = map.get(from..).unwrap_or_default();
        parse(bytes, &mut |n| {
            progress(n);
            release(map, released, from as u64 + n);
        })
    }
}

/// Give back to the kernel the pages of `map` from `*released` up to byte
/// `parsed`, once they make up at least a few MiB.
fn release(map: &memmap2::Mmap, released: &mut u64, parsed: u64) {
    let upto = (parsed / PAGE * PAGE).min(map.len() as u64);
    if upto < *released + RELEASE_STEP {
        return;
    }
    // SAFETY: a read-only private file mapping; the range was parsed and is
    // never read again, and reading it would only fault the same file bytes
    // back in.
    let _ = unsafe {
        map.unchecked_advise_range(
            memmap2::UncheckedAdvice::DontNeed,
            *released as usize,
            (upto - *released) as usize,
        )
    };
    *released = upto;
}
