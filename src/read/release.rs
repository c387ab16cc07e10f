//! Giving mapped pages back behind a sequential cursor, so that `verify`,
//! `iter` (and the CLI's `dump`) keep a bounded resident set whatever the
//! file size: without it every page read stays resident (file-backed pages
//! count in the process's RSS until the kernel needs the memory).
//!
//! Only a read-only file mapping is ever advised (`MADV_DONTNEED` there
//! drops the pages; touching them again reads the same bytes back from the
//! file). A heap copy ([`super::ReadOptions::in_memory`]) is never
//! advised: `MADV_DONTNEED` would zero private anonymous memory.

use crate::progress::Progress;

/// Release in steps of at least this many bytes (few system calls).
const STEP: usize = 8 << 20;

/// Bytes of a memory page.
pub(crate) fn page_size() -> usize {
    static PAGE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
    })
}

/// Bytes of physical memory (`u64::MAX` when the system does not say).
pub(crate) fn physical_memory() -> u64 {
    static MEM: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *MEM.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let (pages, size) = unsafe {
            (
                libc::sysconf(libc::_SC_PHYS_PAGES),
                libc::sysconf(libc::_SC_PAGESIZE),
            )
        };
        if pages > 0 && size > 0 {
            (pages as u64).saturating_mul(size as u64)
        } else {
            u64::MAX
        }
    })
}

/// madvise over the whole pages inside `[lo, hi)` (addresses; `lo` rounded
/// down). Advice is a hint: a failure changes nothing but speed, so it is
/// ignored. The one place that advises mapped pages: this module's
/// cursors and the matrix passes (`matrix::paging`) both come here.
///
/// # Safety
/// `[lo, hi)` lies inside a live read-only *file* mapping when `advice` is
/// `MADV_DONTNEED` (dropped pages are read again from the file; on private
/// anonymous memory they would read back as zeros). Other advice changes
/// no content.
pub(crate) unsafe fn advise(lo: usize, hi: usize, advice: libc::c_int) {
    let lo = lo & !(page_size() - 1);
    if hi <= lo {
        return;
    }
    // SAFETY: the caller's contract.
    unsafe {
        libc::madvise(lo as *mut libc::c_void, hi - lo, advice);
    }
}

/// The mapping a tensor's buffers live in, when they are mapped, and the
/// progress its sequential passes move.
#[derive(Clone, Copy)]
pub(super) struct Mapped<'a> {
    map: Option<&'a memmap2::Mmap>,
    progress: Option<&'a Progress>,
}

impl<'a> Mapped<'a> {
    pub(super) fn new(map: Option<&'a memmap2::Mmap>, progress: Option<&'a Progress>) -> Self {
        Mapped { map, progress }
    }

    /// Memory that is not a mapping: nothing to release or report.
    #[cfg(test)]
    pub(super) const NONE: Mapped<'static> = Mapped {
        map: None,
        progress: None,
    };

    /// The file's progress, when mapped.
    pub(crate) fn progress(&self) -> Option<&'a Progress> {
        self.progress
    }

    /// Drop the whole pages inside `bytes` (a sub-slice of the mapping)
    /// from the resident set. No-op for memory that is not the mapping.
    pub(super) fn release(&self, bytes: &[u8]) {
        let Some(map) = self.map else {
            return;
        };
        let base = map.as_ptr() as usize;
        let start = bytes.as_ptr() as usize;
        if bytes.is_empty() || start < base || start + bytes.len() > base + map.len() {
            return;
        }
        let page = page_size();
        // Whole pages only: the neighbouring bytes may still be in use.
        let from = (start - base).div_ceil(page) * page;
        let to = (start - base + bytes.len()) / page * page;
        if to <= from {
            return;
        }
        // SAFETY: a read-only file mapping; the range is inside it, and the
        // pages are only re-read (from the file) if touched again.
        unsafe { advise(base + from, base + to, libc::MADV_DONTNEED) };
    }

    /// A cursor over `bytes` that releases what lies behind it.
    pub(super) fn cursor<'b>(self, bytes: &'b [u8]) -> Behind<'b>
    where
        Self: 'b,
    {
        Behind {
            map: self,
            bytes,
            done: 0,
        }
    }
}

/// Releases `bytes[..n]` as a sequential reader reports progress `n`.
pub(super) struct Behind<'b> {
    map: Mapped<'b>,
    bytes: &'b [u8],
    done: usize,
}

impl Behind<'_> {
    /// The reader has finished with `bytes[..n]`.
    #[inline]
    pub(super) fn at(&mut self, n: usize) {
        if n >= self.done + STEP {
            self.flush(n);
        }
    }

    /// Release everything read so far (up to `n`).
    pub(super) fn flush(&mut self, n: usize) {
        let n = n.min(self.bytes.len());
        if n > self.done {
            self.map.release(&self.bytes[self.done..n]);
            if let Some(p) = self.map.progress {
                p.add((n - self.done) as u64);
            }
            self.done = n;
        }
    }
}
