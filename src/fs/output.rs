//! The one atomic output: every file the crate writes for a caller (Hurray
//! files, composites, exports, pictures, vectors, the members and per-rank
//! files of an MPI job) appears whole or not at all, and never over one of
//! the operation's own inputs.
//!
//! [`AtomicOutput::create`] makes the temporary file
//! `.<target name>.tmp-<pid>-<16 hex>` beside the target (the name comes
//! from [`crate::fs::names`], so the sweep of killed runs' leftovers knows
//! it) and hands its [`File`] to the writer, which keeps its own buffering
//! and layout. [`AtomicOutput::commit`] fsyncs the file, renames it over the
//! target and fsyncs the directory. Dropped without a commit (an error, an
//! early return), it removes the temporary file and the target is
//! untouched. Every step goes through the [`IoCtx`] (so the fault tests
//! reach it) and its errors name the operation and the path. One exception
//! to "whole or not at all": when the directory fsync after the rename
//! fails, the new file is in place but its durability is not guaranteed;
//! the error is returned.
//!
//! # The output rule
//! [`check_target`] refuses, before any work, an output that could not be
//! published: a path that names a folder (`out/`, `.`), a missing or
//! read-only folder, an existing directory, a name too long for its
//! temporary name. An output path that names one of the operation's
//! inputs is a usage error, [`Error::OutputIsInput`], found before
//! anything is created: the device and inode of the target (symbolic
//! links followed; hard links share the inode) are compared with each
//! input's [`FileId`], taken when the input was opened. An operation documented to rewrite its input in
//! place (`convert K.hrry K.hrry`) passes [`ReplaceInput::Allow`]: the
//! input is then replaced only once the new content is whole, and a reader
//! that still maps the old file keeps reading it.
//!
//! # Outputs shared by several processes
//! The ranks of an MPI job write one composite together: rank 0 creates
//! the temporary file under a [`TempName`] it chose
//! ([`AtomicOutput::create_as`]) and tells the others, which open it with
//! [`open_shared`], write their parts and fsync them; rank 0 commits.
//! Per-rank files are published with [`AtomicOutput::commit_revocable`],
//! which keeps the file that was at the target until every rank has
//! renamed, so a job that fails on any rank puts every earlier file back.

use crate::error::{Error, Result};
use crate::fs::ctx::IoCtx;
use crate::fs::names::{TempName, output_temp_name, parent_dir};
use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Which file an input is: its device and inode, taken from the open file
/// (so a later rename of the path does not change it), and the path it was
/// opened by (for the message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
    path: PathBuf,
}

impl FileId {
    /// The identity of the file `meta` describes, opened as `path`.
    pub fn of(meta: &Metadata, path: &Path) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            path: path.to_path_buf(),
        }
    }

    pub(crate) fn is(&self, meta: &Metadata) -> bool {
        self.dev == meta.dev() && self.ino == meta.ino()
    }
}

/// Whether an output may replace one of the operation's inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplaceInput {
    /// An output naming an input is [`Error::OutputIsInput`] (every
    /// operation but those documented to rewrite in place).
    Refuse,
    /// The operation rewrites its input in place, atomically (`convert`).
    Allow,
}

/// What is at `target` (symbolic links followed), `None` when nothing is
/// (or a dangling link, which the rename replaces).
fn target_metadata(io: &IoCtx, target: &Path) -> Result<Option<Metadata>> {
    match io.metadata(target) {
        Ok(m) => Ok(Some(m)),
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn not_an_input(meta: &Metadata, target: &Path, inputs: &[&FileId]) -> Result<()> {
    match inputs.iter().find(|i| i.is(meta)) {
        Some(input) => Err(Error::OutputIsInput {
            output: target.to_path_buf(),
            input: input.path.clone(),
        }),
        None => Ok(()),
    }
}

/// Every check of an output that can be made before the work: a writer
/// calls it before it reads or merges anything, so that a publish that
/// cannot happen is refused while nothing is spent (a builder's
/// contributions are lost once merging starts). [`AtomicOutput::create`]
/// runs it too. The target
/// - names a file: not empty, not ending in `/`, `.` or `..`
///   ([`Error::InvalidArgument`]);
/// - is in an existing folder this process may create files in
///   ([`check_writable_dir`]: an [`Error::Io`] naming the folder);
/// - leaves room for its temporary name within the folder's limit on
///   name length ([`Error::InvalidArgument`]);
/// - is not a directory, through links too: a rename cannot replace one
///   (an [`Error::Io`], `IsADirectory`);
/// - is none of `inputs` ([`Error::OutputIsInput`]).
pub fn check_target(io: &IoCtx, target: &Path, inputs: &[&FileId]) -> Result<()> {
    check_names_a_file(target)?;
    let dir = parent_dir(target);
    check_writable_dir(io, &dir, "output directory")?;
    check_temp_name_fits(target, &dir)?;
    let Some(meta) = target_metadata(io, target)? else {
        return Ok(());
    };
    if meta.is_dir() {
        return Err(Error::io(
            "output",
            target,
            std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                format!(
                    "a directory, not a file: give the path of the file to write, such as {}",
                    target.join("K.hrry").display()
                ),
            ),
        ));
    }
    not_an_input(&meta, target, inputs)
}

/// `target`, as written, ends in a file name. `Path` drops a trailing `/`
/// and `.` (`out/` has the file name `out`), but the rename would not: it
/// reads `out/` as a directory.
fn check_names_a_file(target: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = target.as_os_str().as_bytes();
    let folder_like = bytes.is_empty()
        || bytes.ends_with(b"/")
        || bytes == b"."
        || bytes.ends_with(b"/.")
        || target.file_name().is_none();
    if !folder_like {
        return Ok(());
    }
    Err(Error::InvalidArgument(if bytes.is_empty() {
        "the output path is empty: give the path of the file to write".to_string()
    } else {
        format!(
            "output path {} names a directory, not a file: give the path of the file to \
             write, such as {}",
            target.display(),
            target.join("K.hrry").display()
        )
    }))
}

/// The temporary name (`.<name>.tmp-<pid>-<16 hex>`) must be a name the
/// folder accepts, or creating it would fail only after the work.
fn check_temp_name_fits(target: &Path, dir: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let Some(name) = target.file_name() else {
        return Ok(());
    };
    // The longest pid and random part: the name fits whichever is drawn.
    let extra = output_temp_name("", u32::MAX, u64::MAX).len();
    let limit = name_max(dir);
    let len = name.as_bytes().len();
    if len + extra <= limit {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "output file name of {} is {len} bytes long: its temporary name adds {extra} bytes \
         and the folder takes at most {limit}; choose a name of at most {} bytes",
        target.display(),
        limit.saturating_sub(extra)
    )))
}

/// The longest file name `dir` accepts (255 where the system cannot say).
fn name_max(dir: &Path) -> usize {
    use std::os::unix::ffi::OsStrExt;
    const DEFAULT: usize = 255;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return DEFAULT;
    };
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    let n = unsafe { libc::pathconf(c.as_ptr(), libc::_PC_NAME_MAX) };
    usize::try_from(n)
        .ok()
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT)
}

/// A temporary file beside its target, renamed over it by
/// [`AtomicOutput::commit`] and removed when dropped before; see the
/// [module docs](self).
#[derive(Debug)]
pub struct AtomicOutput {
    io: IoCtx,
    target: PathBuf,
    temp: PathBuf,
    dir: PathBuf,
    /// Renamed over the target: nothing left to remove.
    published: bool,
}

impl AtomicOutput {
    /// Check the output rule, then create the temporary file for `target`
    /// (a fresh name of this process). Returns the output and the file to
    /// write, open for reading and writing.
    pub fn create(
        io: &IoCtx,
        target: &Path,
        inputs: &[&FileId],
        replace: ReplaceInput,
    ) -> Result<(AtomicOutput, File)> {
        Self::create_as(io, target, inputs, replace, TempName::fresh())
    }

    /// [`AtomicOutput::create`] under the temporary name `name` (chosen by
    /// the caller, to tell other processes; see [`open_shared`]).
    pub fn create_as(
        io: &IoCtx,
        target: &Path,
        inputs: &[&FileId],
        replace: ReplaceInput,
        name: TempName,
    ) -> Result<(AtomicOutput, File)> {
        let inputs = match replace {
            ReplaceInput::Refuse => inputs,
            ReplaceInput::Allow => &[],
        };
        check_target(io, target, inputs)?;
        let temp = name.beside(target)?;
        let file = io.create_new(&temp)?;
        Ok((
            AtomicOutput {
                io: io.clone(),
                target: target.to_path_buf(),
                temp,
                dir: parent_dir(target),
                published: false,
            },
            file,
        ))
    }

    /// Take charge of `temp`, a complete file that its writer made durable
    /// (a [`crate::write::FileWriter`] output at a temporary name, in the
    /// target's directory), to publish it at `target`; removed on drop
    /// unless published.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // used by the MPI crate
    pub fn adopt(io: &IoCtx, target: &Path, temp: PathBuf) -> AtomicOutput {
        AtomicOutput {
            io: io.clone(),
            target: target.to_path_buf(),
            temp,
            dir: parent_dir(target),
            published: false,
        }
    }

    /// The temporary file (what write errors name).
    pub fn path(&self) -> &Path {
        &self.temp
    }

    /// Where the output goes.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The directory of the target and of the temporary file.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Publish: fsync `file` (the one [`AtomicOutput::create`] gave),
    /// rename it over the target, fsync the directory.
    pub fn commit(mut self, file: &File) -> Result<()> {
        self.io.sync(file, &self.temp)?;
        self.io.rename(&self.temp, &self.target)?;
        self.published = true;
        self.io.sync_dir(&self.dir)
    }

    /// Publish as [`AtomicOutput::commit`] does (`file` is fsynced first
    /// when given; an adopted file is durable already), keeping the file
    /// that was at the target under a temporary name until the returned
    /// [`Revocable`] is settled or revoked. The earlier file is kept as a
    /// hard link, or, where the file system has none, moved aside (the
    /// target is then absent until the rename). On an error nothing has
    /// changed: the earlier file is back, the temporary file removed.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // used by the MPI crate
    pub fn commit_revocable(mut self, file: Option<&File>) -> Result<Revocable> {
        if let Some(f) = file {
            self.io.sync(f, &self.temp)?;
        }
        let earlier = TempName::fresh().beside(&self.target)?;
        let kept = match self.io.hard_link(&self.target, &earlier) {
            Ok(()) => Kept::Linked,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Kept::Nothing
            }
            Err(_) => {
                self.io.rename(&self.target, &earlier)?;
                Kept::Aside
            }
        };
        let mut rev = Revocable {
            io: self.io.clone(),
            target: self.target.clone(),
            dir: self.dir.clone(),
            earlier,
            kept,
            renamed: false,
        };
        let r = self.io.rename(&self.temp, &self.target).and_then(|()| {
            self.published = true;
            rev.renamed = true;
            self.io.sync_dir(&self.dir)
        });
        match r {
            Ok(()) => Ok(rev),
            Err(e) => {
                rev.revoke();
                Err(e)
            }
        }
    }
}

impl Drop for AtomicOutput {
    fn drop(&mut self) {
        if !self.published {
            // Best effort: the error that brought us here was reported.
            let _ = self.io.remove(&self.temp);
        }
    }
}

/// How [`AtomicOutput::commit_revocable`] kept the earlier file.
#[cfg_attr(not(feature = "internals"), allow(dead_code))] // used by the MPI crate
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kept {
    /// There was none.
    Nothing,
    /// A hard link to it: the target kept its name until the rename.
    Linked,
    /// Renamed aside (no hard links there).
    Aside,
}

/// A published output that can still be taken back; see
/// [`AtomicOutput::commit_revocable`].
#[cfg_attr(not(feature = "internals"), allow(dead_code))] // used by the MPI crate
#[derive(Debug)]
#[must_use = "settle or revoke it: the earlier file is kept until then"]
pub struct Revocable {
    io: IoCtx,
    target: PathBuf,
    dir: PathBuf,
    earlier: PathBuf,
    kept: Kept,
    renamed: bool,
}

#[cfg_attr(not(feature = "internals"), allow(dead_code))] // used by the MPI crate
impl Revocable {
    /// Keep the new file: the earlier one goes (best effort; a leftover is
    /// a temporary name the sweep removes).
    pub fn settle(self) {
        if self.kept != Kept::Nothing {
            let _ = self.io.remove(&self.earlier);
        }
    }

    /// Take the new file back: the earlier file returns to the target, or,
    /// when there was none, the target is removed. Best effort: it runs
    /// after an error, which is the one to report.
    pub fn revoke(self) {
        match (self.kept, self.renamed) {
            (Kept::Aside, _) | (Kept::Linked, true) => {
                let _ = self.io.rename(&self.earlier, &self.target);
            }
            (Kept::Nothing, true) => {
                let _ = self.io.remove(&self.target);
            }
            (Kept::Linked, false) => {
                let _ = self.io.remove(&self.earlier);
            }
            (Kept::Nothing, false) => {}
        }
        let _ = self.io.sync_dir(&self.dir);
    }
}

/// Open the temporary file `name` of `target`, which another process (rank
/// 0 of an MPI job) created with [`AtomicOutput::create_as`], to write a
/// part of it; that process commits or removes it. Returns the file and
/// its path; fsync the file when the part is written.
#[cfg_attr(not(feature = "internals"), allow(dead_code))] // used by the MPI crate
pub fn open_shared(io: &IoCtx, target: &Path, name: TempName) -> Result<(File, PathBuf)> {
    let path = name.beside(target)?;
    let f = io.open_write(&path)?;
    Ok((f, path))
}

/// Refuse `dir` as a place to write unless it is an existing directory
/// this process may create files in: an [`Error::Io`] naming `role`
/// ("output directory", "temp_dir") and the path, found before any work
/// that would be lost.
pub(crate) fn check_writable_dir(io: &IoCtx, dir: &Path, role: &'static str) -> Result<()> {
    // A missing folder: the stat's error, said as the role that named
    // it (`output directory /x: No such file ...`); any other failure of
    // the stat stays the stat's.
    let meta = io.metadata(dir).map_err(|e| match e {
        Error::Io { path, source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            Error::Io {
                op: role,
                path,
                source,
            }
        }
        e => e,
    })?;
    if !meta.is_dir() {
        return Err(Error::io(
            role,
            dir,
            std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
        ));
    }
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Ok(());
    };
    // SAFETY: `c` is a NUL-terminated path that lives across the call.
    let ok = unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0;
    if !ok {
        return Err(Error::io(role, dir, std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Refuse, before anything is written, an output of `bytes` (`what` says
/// what makes it that large) whose file system, the one `file` is on, has
/// no room for it: streaming it in bounded memory would only fill the disk
/// (a 2^40-row CSR holds 8 TiB of pointers). An [`Error::Io`] on `target`
/// with `StorageFull`; a file system that cannot say is not refused.
pub(crate) fn check_room(file: &File, target: &Path, bytes: u128, what: &str) -> Result<()> {
    use std::os::fd::AsRawFd;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: a valid open descriptor and a buffer of the right type.
    let rc = unsafe { libc::fstatvfs(file.as_raw_fd(), st.as_mut_ptr()) };
    if rc != 0 {
        return Ok(());
    }
    // SAFETY: fstatvfs succeeded and filled it.
    let st = unsafe { st.assume_init() };
    let free = (st.f_bavail as u128) * (st.f_frsize as u128);
    if bytes <= free {
        return Ok(());
    }
    let cap = |b: u128| u64::try_from(b).unwrap_or(u64::MAX);
    Err(Error::io(
        "write",
        target,
        std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            format!(
                "the output needs {} ({what}), its file system has {} free; nothing was written",
                size_text(cap(bytes)),
                size_text(cap(free))
            ),
        ),
    ))
}

/// `bytes` in the largest binary unit that leaves a number >= 1, one
/// decimal ("8.0 TiB").
fn size_text(bytes: u64) -> String {
    let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = bytes as f64;
    let mut unit = "bytes";
    for u in units {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    if unit == "bytes" {
        format!("{bytes} bytes")
    } else {
        format!("{v:.1} {unit}")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::fs::ctx::{FaultKind, FaultMode, FaultPlan};
    use std::io::Write;

    fn listing(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// The first operation called `op` fails (EIO); the others do not.
    fn failing(op: &'static str) -> IoCtx {
        IoCtx::with_faults(FaultPlan {
            at: 0,
            mode: FaultMode::Once,
            kind: FaultKind::Io,
            only_op: Some(op),
        })
    }

    fn input(io: &IoCtx, path: &Path) -> FileId {
        let f = io.open(path).unwrap();
        FileId::of(&io.file_metadata(&f, path).unwrap(), path)
    }

    #[test]
    fn commit_publishes_the_whole_file_and_leaves_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.bin");
        std::fs::write(&target, b"old").unwrap();
        let io = IoCtx::new();
        let (out, mut f) = AtomicOutput::create(&io, &target, &[], ReplaceInput::Refuse).unwrap();
        assert_eq!(out.path().parent(), Some(dir.path()));
        f.write_all(b"new ").unwrap();
        f.write_all(b"content").unwrap();
        // Until the commit the target is the old file.
        assert_eq!(std::fs::read(&target).unwrap(), b"old");
        out.commit(&f).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new content");
        assert_eq!(listing(dir.path()), ["out.bin"]);
    }

    #[test]
    fn dropped_without_commit_it_removes_the_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.bin");
        let io = IoCtx::new();
        let (out, mut f) = AtomicOutput::create(&io, &target, &[], ReplaceInput::Refuse).unwrap();
        f.write_all(b"partial").unwrap();
        assert_eq!(listing(dir.path()).len(), 1);
        drop(out);
        assert!(listing(dir.path()).is_empty());
        // An adopted file too.
        let temp = TempName::fresh().beside(&target).unwrap();
        std::fs::write(&temp, b"complete").unwrap();
        drop(AtomicOutput::adopt(&io, &target, temp));
        assert!(listing(dir.path()).is_empty());
    }

    #[test]
    fn a_failed_fsync_or_rename_leaves_no_temporary_file_and_no_target() {
        for op in ["create", "fsync", "rename"] {
            let dir = tempfile::tempdir().unwrap();
            let target = dir.path().join("out.bin");
            let io = failing(op);
            let r = AtomicOutput::create(&io, &target, &[], ReplaceInput::Refuse).and_then(
                |(out, mut f)| {
                    f.write_all(b"data").unwrap();
                    out.commit(&f)
                },
            );
            let e = r.unwrap_err();
            assert!(matches!(&e, Error::Io { op: o, .. } if *o == op), "{e}");
            assert!(e.to_string().contains("out.bin"), "{e}");
            assert_eq!(io.injected(), [op]);
            assert!(
                listing(dir.path()).is_empty(),
                "{op}: {:?}",
                listing(dir.path())
            );
        }
    }

    #[test]
    fn a_failed_directory_fsync_leaves_the_new_file_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.bin");
        let io = failing("fsync directory");
        let (out, mut f) = AtomicOutput::create(&io, &target, &[], ReplaceInput::Refuse).unwrap();
        f.write_all(b"data").unwrap();
        assert!(out.commit(&f).is_err());
        assert_eq!(listing(dir.path()), ["out.bin"]);
    }

    #[test]
    fn an_output_naming_an_input_is_refused_through_links_too() {
        let dir = tempfile::tempdir().unwrap();
        let k = dir.path().join("K.hrry");
        std::fs::write(&k, b"the input").unwrap();
        let sym = dir.path().join("sym.hrry");
        std::os::unix::fs::symlink(&k, &sym).unwrap();
        let hard = dir.path().join("hard.hrry");
        std::fs::hard_link(&k, &hard).unwrap();
        let other = dir.path().join("other.hrry");
        std::fs::write(&other, b"another file").unwrap();
        let io = IoCtx::new();
        let id = input(&io, &k);
        let other_id = input(&io, &other);
        for target in [&k, &sym, &hard] {
            // As the only input and among others.
            for inputs in [vec![&id], vec![&other_id, &id]] {
                let e =
                    AtomicOutput::create(&io, target, &inputs, ReplaceInput::Refuse).unwrap_err();
                match &e {
                    Error::OutputIsInput { output, input } => {
                        assert_eq!(output, target);
                        assert_eq!(input, &k);
                    }
                    e => panic!("{}: {e}", target.display()),
                }
                let msg = e.to_string();
                assert!(msg.contains(&*target.to_string_lossy()), "{msg}");
                assert!(msg.contains(&*k.to_string_lossy()), "{msg}");
            }
        }
        // Nothing was created; the input is as it was.
        assert_eq!(
            listing(dir.path()),
            ["K.hrry", "hard.hrry", "other.hrry", "sym.hrry"]
        );
        assert_eq!(std::fs::read(&k).unwrap(), b"the input");
        // Another file, or a path that does not exist yet, is fine.
        let fresh = dir.path().join("new.hrry");
        for target in [&fresh, &dir.path().join("dangling.hrry")] {
            let (out, f) = AtomicOutput::create(&io, target, &[&id], ReplaceInput::Refuse).unwrap();
            out.commit(&f).unwrap();
        }
        std::os::unix::fs::symlink(dir.path().join("nowhere"), dir.path().join("dl")).unwrap();
        let (out, f) =
            AtomicOutput::create(&io, &dir.path().join("dl"), &[&id], ReplaceInput::Refuse)
                .unwrap();
        out.commit(&f).unwrap();
        // Allowed: the input is replaced once the new content is whole.
        let (out, mut f) = AtomicOutput::create(&io, &k, &[&id], ReplaceInput::Allow).unwrap();
        f.write_all(b"rewritten").unwrap();
        out.commit(&f).unwrap();
        assert_eq!(std::fs::read(&k).unwrap(), b"rewritten");
        // The hard link still names the old content; the symlink the new.
        assert_eq!(std::fs::read(&hard).unwrap(), b"the input");
        assert_eq!(std::fs::read(&sym).unwrap(), b"rewritten");
    }

    #[test]
    fn a_target_the_rename_cannot_replace_is_refused_before_anything_is_created() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let io = IoCtx::new();
        let slash = PathBuf::from(format!("{}/", dir.path().join("new").display()));
        for (target, want) in [
            (&sub, "a directory, not a file"),
            (&slash, "names a directory, not a file"),
        ] {
            for replace in [ReplaceInput::Refuse, ReplaceInput::Allow] {
                let e = AtomicOutput::create(&io, target, &[], replace).unwrap_err();
                let msg = e.to_string();
                assert!(msg.contains(want), "{msg}");
                assert!(msg.contains(&*target.to_string_lossy()), "{msg}");
            }
        }
        assert_eq!(listing(dir.path()), ["sub"]);
        assert!(listing(&sub).is_empty());
        // The longest name that fits, and one byte more.
        let fits = 255 - output_temp_name("", u32::MAX, u64::MAX).len();
        let ok = dir.path().join("k".repeat(fits));
        let (out, f) = AtomicOutput::create(&io, &ok, &[], ReplaceInput::Refuse).unwrap();
        out.commit(&f).unwrap();
        let long = dir.path().join("k".repeat(fits + 1));
        let e = AtomicOutput::create(&io, &long, &[], ReplaceInput::Refuse).unwrap_err();
        assert!(
            e.to_string()
                .contains(&format!("choose a name of at most {fits} bytes")),
            "{e}"
        );
    }

    #[test]
    fn a_shared_output_takes_parts_from_other_openers() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("c.hrry");
        let io = IoCtx::new();
        let name = TempName::fresh();
        let (out, f) =
            AtomicOutput::create_as(&io, &target, &[], ReplaceInput::Refuse, name).unwrap();
        let (g, path) = open_shared(&io, &target, TempName::from_words(name.to_words())).unwrap();
        assert_eq!(path, out.path());
        io.write_all_at(&g, b"part", 4, &path).unwrap();
        io.sync(&g, &path).unwrap();
        io.write_all_at(&f, b"head", 0, out.path()).unwrap();
        out.commit(&f).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"headpart");
        assert_eq!(listing(dir.path()), ["c.hrry"]);
    }

    /// A complete file at a temporary name beside `target`, adopted.
    fn adopted(io: &IoCtx, target: &Path, content: &[u8]) -> AtomicOutput {
        let temp = TempName::fresh().beside(target).unwrap();
        std::fs::write(&temp, content).unwrap();
        AtomicOutput::adopt(io, target, temp)
    }

    #[test]
    fn a_revocable_commit_settles_or_puts_the_earlier_file_back() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("r.hrry");
        let io = IoCtx::new();
        // No earlier file: revoking removes the new one.
        adopted(&io, &target, b"one")
            .commit_revocable(None)
            .unwrap()
            .revoke();
        assert!(listing(dir.path()).is_empty());
        adopted(&io, &target, b"one")
            .commit_revocable(None)
            .unwrap()
            .settle();
        assert_eq!(std::fs::read(&target).unwrap(), b"one");
        // An earlier file: kept until settled, back when revoked.
        let rev = adopted(&io, &target, b"two")
            .commit_revocable(None)
            .unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"two");
        assert_eq!(listing(dir.path()).len(), 2);
        rev.revoke();
        assert_eq!(std::fs::read(&target).unwrap(), b"one");
        assert_eq!(listing(dir.path()), ["r.hrry"]);
        adopted(&io, &target, b"two")
            .commit_revocable(None)
            .unwrap()
            .settle();
        assert_eq!(std::fs::read(&target).unwrap(), b"two");
        assert_eq!(listing(dir.path()), ["r.hrry"]);
        // Without hard links (a failing link): moved aside, then back.
        let no_links = IoCtx::with_faults(FaultPlan {
            at: 0,
            mode: FaultMode::FromOn,
            kind: FaultKind::Io,
            only_op: Some("link"),
        });
        let rev = adopted(&no_links, &target, b"three")
            .commit_revocable(None)
            .unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"three");
        rev.revoke();
        assert_eq!(std::fs::read(&target).unwrap(), b"two");
        assert_eq!(listing(dir.path()), ["r.hrry"]);
    }

    #[test]
    fn a_failed_revocable_commit_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("r.hrry");
        std::fs::write(&target, b"earlier").unwrap();
        for op in ["fsync", "link", "rename", "fsync directory"] {
            // Not the ones cleaning up after it.
            let io = failing(op);
            let (out, mut f) =
                AtomicOutput::create(&io, &target, &[], ReplaceInput::Refuse).unwrap();
            f.write_all(b"new").unwrap();
            match out.commit_revocable(Some(&f)) {
                // A failing link falls back to moving the earlier file aside.
                Ok(rev) if op == "link" => {
                    assert_eq!(std::fs::read(&target).unwrap(), b"new");
                    rev.revoke();
                }
                Ok(_) => panic!("{op}: the fault was ignored"),
                Err(e) => assert!(matches!(&e, Error::Io { op: o, .. } if *o == op), "{e}"),
            }
            assert_eq!(io.injected(), [op]);
            assert_eq!(std::fs::read(&target).unwrap(), b"earlier", "{op}");
            assert_eq!(listing(dir.path()), ["r.hrry"], "{op}");
        }
    }
}
