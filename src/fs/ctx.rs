//! Every file operation of the crate goes through [`IoCtx`] (the
//! mechanism only: what files are called is `names.rs`'s business).
//!
//! One narrow interface serves two ends: error messages that name the
//! operation and the path, and fault injection. A [`FaultPlan`] makes the
//! N-th operation (or every operation from the N-th on) fail, which is how
//! the test suite proves that any failing call leaves no partial output and
//! no temporary file behind.

use crate::error::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Which calls a [`FaultPlan`] fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultMode {
    /// Only operation number `at` fails.
    Once,
    /// Operation `at` and every later one fail.
    FromOn,
}

/// The error a planned fault returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// ENOSPC: no space left on device.
    NoSpace,
    /// EIO: input/output error.
    Io,
}

/// A plan to fail file operations, for tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultPlan {
    /// 0-based operation number at which failures start.
    pub at: u64,
    /// Once or from then on.
    pub mode: FaultMode,
    /// Which error.
    pub kind: FaultKind,
    /// When set, only operations of this name count and fail ("fsync", "rename", ...).
    pub only_op: Option<&'static str>,
}

#[derive(Debug, Default)]
struct Inner {
    plan: Option<FaultPlan>,
    ops: AtomicU64,
    /// Names of the operations a fault was injected into.
    injected: std::sync::Mutex<Vec<&'static str>>,
}

/// Handle through which the crate performs file operations.
///
/// Cheap to clone; clones share the operation counter.
#[derive(Clone, Debug, Default)]
pub struct IoCtx {
    inner: Arc<Inner>,
}

impl IoCtx {
    /// Real file operations, no faults.
    pub fn new() -> IoCtx {
        IoCtx::default()
    }

    /// File operations that fail according to `plan`.
    pub fn with_faults(plan: FaultPlan) -> IoCtx {
        IoCtx {
            inner: Arc::new(Inner {
                plan: Some(plan),
                ..Inner::default()
            }),
        }
    }

    /// Number of operations counted so far (with `only_op`, only those).
    pub fn ops(&self) -> u64 {
        self.inner.ops.load(Ordering::Relaxed)
    }

    /// The operations a fault was injected into so far, in order.
    pub fn injected(&self) -> Vec<&'static str> {
        self.inner
            .injected
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// Count one operation and fail it when the plan says so.
    fn tick(&self, op: &'static str, path: &Path) -> Result<()> {
        let Some(plan) = self.inner.plan else {
            return Ok(());
        };
        if plan.only_op.is_some_and(|o| o != op) {
            return Ok(());
        }
        let n = self.inner.ops.fetch_add(1, Ordering::Relaxed);
        let fail = match plan.mode {
            FaultMode::Once => n == plan.at,
            FaultMode::FromOn => n >= plan.at,
        };
        if fail {
            if let Ok(mut v) = self.inner.injected.lock() {
                v.push(op);
            }
            let source = match plan.kind {
                FaultKind::NoSpace => io::Error::from_raw_os_error(libc::ENOSPC),
                FaultKind::Io => io::Error::from_raw_os_error(libc::EIO),
            };
            return Err(Error::io(op, path, source));
        }
        Ok(())
    }

    fn wrap<T>(&self, op: &'static str, path: &Path, r: io::Result<T>) -> Result<T> {
        r.map_err(|e| Error::io(op, path, e))
    }

    /// Create a new file that must not exist yet, for reading and writing.
    pub fn create_new(&self, path: &Path) -> Result<File> {
        self.tick("create", path)?;
        let r = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path);
        self.wrap("create", path, r)
    }

    /// Open an existing file for reading.
    pub fn open(&self, path: &Path) -> Result<File> {
        self.tick("open", path)?;
        self.wrap("open", path, File::open(path))
    }

    /// Open an existing file for writing (not truncated, not created): a
    /// file another process created, whose parts this one writes.
    pub fn open_write(&self, path: &Path) -> Result<File> {
        self.tick("open for writing", path)?;
        let r = OpenOptions::new().write(true).open(path);
        self.wrap("open for writing", path, r)
    }

    /// An unnamed temporary file in `dir`: it disappears when closed, even
    /// after a crash.
    pub fn tempfile_in(&self, dir: &Path) -> Result<File> {
        self.tick("create temporary file in", dir)?;
        self.wrap("create temporary file in", dir, tempfile::tempfile_in(dir))
    }

    /// A temporary directory inside `dir` whose name starts with `prefix`
    /// (the caller chooses the name format), removed on drop.
    pub fn tempdir_in(&self, dir: &Path, prefix: &str) -> Result<tempfile::TempDir> {
        self.tick("create temporary directory in", dir)?;
        let r = tempfile::Builder::new().prefix(prefix).tempdir_in(dir);
        self.wrap("create temporary directory in", dir, r)
    }

    /// Write all of `buf` at the file's current position.
    pub fn write_all(&self, f: &mut File, buf: &[u8], path: &Path) -> Result<()> {
        self.tick("write", path)?;
        self.wrap("write", path, f.write_all(buf))
    }

    /// Write all of `buf` at `offset` without moving the file position.
    pub fn write_all_at(&self, f: &File, buf: &[u8], offset: u64, path: &Path) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.tick("write", path)?;
        self.wrap("write", path, f.write_all_at(buf, offset))
    }

    /// Fill `buf` from `offset`; an early end of file is an error.
    pub fn read_exact_at(&self, f: &File, buf: &mut [u8], offset: u64, path: &Path) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.tick("read", path)?;
        self.wrap("read", path, f.read_exact_at(buf, offset))
    }

    /// Read up to `buf.len()` bytes from the current position.
    pub fn read(&self, f: &mut File, buf: &mut [u8], path: &Path) -> Result<usize> {
        self.tick("read", path)?;
        self.wrap("read", path, f.read(buf))
    }

    /// Move the file position.
    pub fn seek(&self, f: &mut File, pos: SeekFrom, path: &Path) -> Result<u64> {
        self.tick("seek", path)?;
        self.wrap("seek", path, f.seek(pos))
    }

    /// Copy `len` bytes from `src` (from its position) to `dst` (at its
    /// position). Uses `copy_file_range` where the kernel offers it.
    pub fn copy(&self, src: &mut File, dst: &mut File, len: u64, path: &Path) -> Result<()> {
        self.tick("copy", path)?;
        let copied = self.wrap("copy", path, io::copy(&mut src.take(len), dst))?;
        if copied != len {
            return Err(Error::io(
                "copy",
                path,
                io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("copied {copied} of {len} bytes"),
                ),
            ));
        }
        Ok(())
    }

    /// fsync a file: data and metadata reach the disk.
    pub fn sync(&self, f: &File, path: &Path) -> Result<()> {
        self.tick("fsync", path)?;
        self.wrap("fsync", path, f.sync_all())
    }

    /// Rename `from` to `to`, replacing `to` atomically.
    pub fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.tick("rename", to)?;
        self.wrap("rename", to, fs::rename(from, to))
    }

    /// fsync a directory, so that a rename inside it is durable.
    pub fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.tick("fsync directory", dir)?;
        let d = self.wrap("fsync directory", dir, File::open(dir))?;
        self.wrap("fsync directory", dir, d.sync_all())
    }

    /// Remove a file. Not counted as a fault point: cleanup must not fail
    /// on purpose, or a test could not tell a leak from an injected fault.
    pub fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    /// Remove an empty directory. Cleanup: not a fault point (see
    /// [`IoCtx::remove`]).
    pub fn remove_dir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }

    /// Remove a directory and what it holds. Cleanup: not a fault point
    /// (see [`IoCtx::remove`]).
    pub fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir_all(path)
    }

    /// The entries of a directory: (file name, path), names that are not
    /// UTF-8 left out.
    pub fn list_dir(&self, dir: &Path) -> Result<Vec<(String, std::path::PathBuf)>> {
        self.tick("list directory", dir)?;
        let rd = self.wrap("list directory", dir, fs::read_dir(dir))?;
        let mut v = Vec::new();
        for e in rd {
            let e = self.wrap("list directory", dir, e)?;
            if let Some(n) = e.file_name().to_str() {
                v.push((n.to_string(), e.path()));
            }
        }
        Ok(v)
    }

    /// Give the file at `from` a second name `to` (a hard link; `to` must
    /// not exist).
    pub fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        self.tick("link", to)?;
        self.wrap("link", to, fs::hard_link(from, to))
    }

    /// Metadata of the file `path` names (a symbolic link is followed).
    pub fn metadata(&self, path: &Path) -> Result<fs::Metadata> {
        self.tick("stat", path)?;
        self.wrap("stat", path, fs::metadata(path))
    }

    /// Metadata of `path` itself (a symbolic link is not followed).
    pub fn symlink_metadata(&self, path: &Path) -> Result<fs::Metadata> {
        self.tick("lstat", path)?;
        self.wrap("lstat", path, fs::symlink_metadata(path))
    }

    /// Length of an open file.
    pub fn file_len(&self, f: &File, path: &Path) -> Result<u64> {
        self.file_metadata(f, path).map(|m| m.len())
    }

    /// Metadata of an open file (length, device and inode, ...).
    pub fn file_metadata(&self, f: &File, path: &Path) -> Result<fs::Metadata> {
        self.tick("stat", path)?;
        self.wrap("stat", path, f.metadata())
    }

    /// Remove the `len` bytes at `offset` from a file, moving what follows
    /// down by `len` (`fallocate(FALLOC_FL_COLLAPSE_RANGE)`: extents move,
    /// no byte is copied). Both must be multiples of the file system's block
    /// size and the range must end before the end of the file. Returns
    /// `Ok(false)`, with the file unchanged, where the file system or the
    /// arguments do not allow it (tmpfs, odd block sizes): the caller then
    /// moves the bytes itself. Counted as a "copy" fault point.
    pub fn collapse_range(&self, f: &File, offset: u64, len: u64, path: &Path) -> Result<bool> {
        use std::os::fd::AsRawFd;
        self.tick("copy", path)?;
        let (Ok(o), Ok(l)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
            return Ok(false);
        };
        // SAFETY: fallocate only reads its integer arguments; the
        // descriptor is open for writing and owned by `f` for the call.
        let r = unsafe { libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_COLLAPSE_RANGE, o, l) };
        if r == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EOPNOTSUPP | libc::EINVAL | libc::ENOSYS) => Ok(false),
            _ => Err(Error::io("copy", path, e)),
        }
    }

    /// Ask the kernel to start writing `len` bytes at `offset` to disk now,
    /// without waiting for them (`sync_file_range(SYNC_FILE_RANGE_WRITE)`).
    /// A hint, so neither a fault point nor fallible: a write error it meets
    /// is reported again by the fsync that makes the file durable. Its use:
    /// the disk writes the output while we still compute, instead of the
    /// whole file waiting for the final fsync.
    pub fn start_writeback(&self, f: &File, offset: u64, len: u64) {
        use std::os::fd::AsRawFd;
        let Some((o, l)) = c_range(offset, len) else {
            return;
        };
        // SAFETY: sync_file_range only reads its integer arguments; the
        // descriptor is open and owned by `f` for the call.
        let _ = unsafe { libc::sync_file_range(f.as_raw_fd(), o, l, libc::SYNC_FILE_RANGE_WRITE) };
    }

    /// Wait until the `len` bytes at `offset` are on disk, then drop them
    /// from the page cache (`sync_file_range` with both waits, then
    /// `posix_fadvise(DONTNEED)`). For bytes written once and not read
    /// again soon: a stream that keeps its page cache small reuses pages
    /// it just freed instead of taking fresh ones, which on a virtual
    /// machine cost ~2 CPU-s per GB to write into (`docs/log/issue-12-rounds.md`,
    /// "Issue 12, seventh round"). Counted as an "fsync": unlike
    /// [`IoCtx::start_writeback`], a write error the wait meets is reported
    /// here (the kernel reports it to one caller only, so the final fsync
    /// might not see it again).
    pub fn drop_written(&self, f: &File, offset: u64, len: u64, path: &Path) -> Result<()> {
        use std::os::fd::AsRawFd;
        self.tick("fsync", path)?;
        let Some((o, l)) = c_range(offset, len) else {
            return Ok(());
        };
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE
            | libc::SYNC_FILE_RANGE_WRITE
            | libc::SYNC_FILE_RANGE_WAIT_AFTER;
        // SAFETY: both calls only read their integer arguments; the
        // descriptor is open and owned by `f` for the calls.
        if unsafe { libc::sync_file_range(f.as_raw_fd(), o, l, flags) } != 0 {
            let e = io::Error::last_os_error();
            // A file system without it (ENOSYS, EINVAL on some): nothing
            // was waited for, so nothing is dropped either.
            return match e.raw_os_error() {
                Some(libc::ENOSYS | libc::EINVAL | libc::EOPNOTSUPP) => Ok(()),
                _ => Err(Error::io("fsync", path, e)),
            };
        }
        // Advice only: clean pages it cannot drop simply stay cached.
        // SAFETY: as above.
        let _ = unsafe { libc::posix_fadvise(f.as_raw_fd(), o, l, libc::POSIX_FADV_DONTNEED) };
        Ok(())
    }

    /// Truncate or extend a file to `len` bytes. Counted as a "write".
    pub fn set_len(&self, f: &File, len: u64, path: &Path) -> Result<()> {
        self.tick("write", path)?;
        self.wrap("write", path, f.set_len(len))
    }

    /// Map an open file read-only.
    ///
    /// # Safety
    /// The mapping is only sound while no one truncates or writes the file;
    /// see `memmap2::Mmap::map`. The caller documents why that holds (or
    /// what a violation costs: SIGBUS on truncation).
    pub unsafe fn map(&self, f: &File, path: &Path) -> Result<memmap2::Mmap> {
        self.tick("mmap", path)?;
        // SAFETY: forwarded to the caller, see above.
        let r = unsafe { memmap2::Mmap::map(f) };
        self.wrap("mmap", path, r)
    }
}

/// A file range as the kernel's range calls take it; `None` past what an
/// `off64_t` holds (no file gets there).
fn c_range(offset: u64, len: u64) -> Option<(libc::off64_t, libc::off64_t)> {
    Some((offset.try_into().ok()?, len.try_into().ok()?))
}

/// A stream written once, front to back, is handed to the disk every this
/// many bytes ([`Writeback::step`]): the final fsync then finds little
/// left to write, and the page cache holds about two steps of the stream.
/// Measured in `docs/log/issue-12-rounds.md` ("Issue 12, sixth round" and
/// "seventh round").
pub(crate) const WRITEBACK_STEP: u64 = 16 << 20;

/// How far a stream written front to back has gone to disk.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Writeback {
    /// Bytes handed to the disk ([`IoCtx::start_writeback`]).
    started: u64,
    /// Bytes waited for and dropped from the page cache
    /// ([`IoCtx::drop_written`]).
    dropped: u64,
}

impl Writeback {
    /// Everything up to `end` is settled (nothing left to hand over).
    pub(crate) fn settled(end: u64) -> Writeback {
        Writeback {
            started: end,
            dropped: end,
        }
    }

    /// The stream, at file offset `base`, has `end` bytes written: once
    /// [`WRITEBACK_STEP`] of them are pending, hand them to the disk, and
    /// wait for and drop from the page cache what was handed over at the
    /// step before (written while we computed since).
    pub(crate) fn step(
        &mut self,
        io: &IoCtx,
        file: &File,
        path: &Path,
        base: u64,
        end: u64,
    ) -> Result<()> {
        if end.saturating_sub(self.started) >= WRITEBACK_STEP {
            io.start_writeback(file, base + self.started, end - self.started);
            if self.started > self.dropped {
                io.drop_written(file, base + self.dropped, self.started - self.dropped, path)?;
                self.dropped = self.started;
            }
            self.started = end;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_fails_the_chosen_operation() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = IoCtx::with_faults(FaultPlan {
            at: 1,
            mode: FaultMode::Once,
            kind: FaultKind::NoSpace,
            only_op: None,
        });
        let p = dir.path().join("a");
        let mut f = ctx.create_new(&p).unwrap();
        let e = ctx.write_all(&mut f, b"x", &p).unwrap_err();
        assert!(e.to_string().contains("write"), "{e}");
        assert!(e.to_string().contains("No space"), "{e}");
        ctx.write_all(&mut f, b"x", &p).unwrap();
        assert_eq!(ctx.ops(), 3);
    }

    /// Pages of `f` in `range` that are in the page cache.
    fn resident(f: &File, range: std::ops::Range<u64>) -> usize {
        // SAFETY: a test file nothing truncates while it is mapped.
        let map = unsafe { memmap2::Mmap::map(f) }.unwrap();
        let page = 4096usize;
        let (start, len) = (range.start as usize, (range.end - range.start) as usize);
        let mut vec = vec![0u8; len.div_ceil(page)];
        // SAFETY: the range lies inside the live mapping; `vec` has one
        // byte per page of it.
        let r = unsafe { libc::mincore(map.as_ptr().add(start) as *mut _, len, vec.as_mut_ptr()) };
        assert_eq!(r, 0, "{}", io::Error::last_os_error());
        vec.iter().filter(|&&b| b & 1 == 1).count()
    }

    #[test]
    fn writeback_steps_drop_what_is_on_disk_and_keep_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        // Count the waits (they tick as "fsync"); no fault is planned.
        let ctx = IoCtx::with_faults(FaultPlan {
            at: u64::MAX,
            mode: FaultMode::Once,
            kind: FaultKind::Io,
            only_op: Some("fsync"),
        });
        let p = dir.path().join("stream");
        let f = ctx.create_new(&p).unwrap();
        let piece: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
        let (base, pieces) = (4096u64, 5 * (WRITEBACK_STEP >> 20) + 3);
        let mut wb = Writeback::default();
        for i in 0..pieces {
            ctx.write_all_at(&f, &piece, base + (i << 20), &p).unwrap();
            wb.step(&ctx, &f, &p, base, (i + 1) << 20).unwrap();
        }
        // Five steps handed over; each after the first waited for and
        // dropped the one before.
        assert_eq!(ctx.ops(), 4);
        assert_eq!(
            (wb.started, wb.dropped),
            (5 * WRITEBACK_STEP, 4 * WRITEBACK_STEP)
        );
        let on_tmpfs = {
            // SAFETY: statfs is plain integers, for which zero is valid.
            let mut st: libc::statfs = unsafe { std::mem::zeroed() };
            let c = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid C string and a statfs to fill.
            assert_eq!(unsafe { libc::statfs(c.as_ptr(), &mut st) }, 0);
            st.f_type as i64 == libc::TMPFS_MAGIC
        };
        if on_tmpfs {
            eprintln!("tmpfs: its pages cannot leave the page cache; residency not checked");
        } else {
            // The dropped steps left the page cache (up to a few pages the
            // file system keeps); the last steps are still there.
            let dropped = resident(&f, base..base + 4 * WRITEBACK_STEP);
            assert!(
                dropped <= 64,
                "{dropped} pages of the dropped steps resident"
            );
            assert!(resident(&f, base + 4 * WRITEBACK_STEP..base + (pieces << 20)) > 0);
        }
        // Every byte reads back.
        let mut got = vec![0u8; piece.len()];
        for i in 0..pieces {
            ctx.read_exact_at(&f, &mut got, base + (i << 20), &p)
                .unwrap();
            assert!(got == piece, "piece {i} differs");
        }
    }

    #[test]
    fn a_failed_wait_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = IoCtx::with_faults(FaultPlan {
            at: 0,
            mode: FaultMode::Once,
            kind: FaultKind::Io,
            only_op: Some("fsync"),
        });
        let p = dir.path().join("stream");
        let f = ctx.create_new(&p).unwrap();
        let mut wb = Writeback::default();
        // The first step only starts the writeback; the second waits.
        wb.step(&ctx, &f, &p, 0, WRITEBACK_STEP).unwrap();
        let e = wb.step(&ctx, &f, &p, 0, 2 * WRITEBACK_STEP).unwrap_err();
        assert!(e.to_string().contains("fsync"), "{e}");
        assert!(e.to_string().contains("stream"), "{e}");
        assert_eq!(ctx.injected(), vec!["fsync"]);
    }
}
