//! Removal of the leftovers of killed runs.
//!
//! A run that ends normally, or fails with an error, removes everything it
//! made. A run killed outright (SIGKILL, power loss, OOM killer) can leave:
//!
//! - in the **output directory**: the temporary output file
//!   `.<name>.tmp-<pid>-<16 hex>` (written by the file writer);
//!   the target itself is never partial (it is only ever replaced by rename);
//! - in the **temporary directory**: the private spill directory
//!   `.coo-assembler-<pid>-<random>`, empty (spill files are unnamed
//!   `O_TMPFILE` files, which the kernel frees with the process; where
//!   `O_TMPFILE` is not supported the `tempfile` crate creates a named file
//!   and unlinks it at once, so a kill can leave a file only in that window).
//!
//! Both names carry the pid of the process that made them. The functions
//! here remove the leftovers whose process is no longer alive (checked with
//! `kill(pid, 0)`), and return what they removed so that the caller can
//! report it. A pid that is alive (or reused by another process) keeps its
//! files: the sweep errs on the side of leaving a file. Caveat: processes in
//! another pid namespace sharing the directory look dead from here; removing
//! their files makes their own run fail cleanly (rename or spill creation
//! error), never corrupts an output.

use crate::error::{Error, Result};
use crate::fs::ctx::IoCtx;
use crate::fs::names::{any_output_temp_pid, parent_dir, spill_dir_pid};
use std::io;
use std::path::{Path, PathBuf};

/// Whether process `pid` exists (EPERM counts as alive).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(p) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if p <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let r = unsafe { libc::kill(p, 0) };
    r == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Remove the temporary output files `.<name>.tmp-<pid>-<hex>` that killed
/// runs left in the directory of `target`, whatever target they were
/// for. Returns the paths removed. A file that vanishes meanwhile (another
/// sweeper) is not an error.
pub fn remove_stale_output_temps(io: &IoCtx, target: &Path) -> Result<Vec<PathBuf>> {
    let dir = parent_dir(target);
    let me = std::process::id();
    let mut removed = Vec::new();
    for (file, path) in io.list_dir(&dir)? {
        match any_output_temp_pid(&file) {
            Some(pid) if pid != me && !pid_alive(pid) => {}
            _ => continue,
        }
        // Only plain files: never follow or remove anything else.
        match io.symlink_metadata(&path) {
            Ok(m) if m.file_type().is_file() => {}
            _ => continue,
        }
        match io.remove(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove stale temporary file", &path, e)),
        }
    }
    Ok(removed)
}

/// Remove what this process is making for `target`: its temporary output
/// files next to `target` and its spill directories (with whatever they
/// hold) under `temp_base`. For a signal handler that ends the process
/// (`coo-assembler assemble` on SIGINT/SIGTERM). Errors are skipped: the
/// process is ending, and the next run's sweep removes what is left.
pub fn remove_own_leftovers(target: &Path, temp_base: &Path) -> Vec<PathBuf> {
    let io = IoCtx::new();
    let me = std::process::id();
    let mut removed = Vec::new();
    for (file, path) in io.list_dir(&parent_dir(target)).unwrap_or_default() {
        if any_output_temp_pid(&file) == Some(me)
            && matches!(io.symlink_metadata(&path), Ok(m) if m.file_type().is_file())
            && io.remove(&path).is_ok()
        {
            removed.push(path);
        }
    }
    for (name, path) in io.list_dir(temp_base).unwrap_or_default() {
        if spill_dir_pid(&name) == Some(me)
            && matches!(io.symlink_metadata(&path), Ok(m) if m.file_type().is_dir())
            && io.remove_dir_all(&path).is_ok()
        {
            removed.push(path);
        }
    }
    removed
}

/// Remove the empty spill directories `.coo-assembler-<pid>-*` in `base`
/// whose process is dead. A non-empty one is left alone (it is not what we
/// leave behind). Returns the directories removed.
pub fn remove_stale_temp_dirs(io: &IoCtx, base: &Path) -> Result<Vec<PathBuf>> {
    let me = std::process::id();
    let mut removed = Vec::new();
    for (name, path) in io.list_dir(base)? {
        match spill_dir_pid(&name) {
            Some(pid) if pid != me && !pid_alive(pid) => {}
            _ => continue,
        }
        match io.symlink_metadata(&path) {
            Ok(m) if m.file_type().is_dir() => {}
            _ => continue,
        }
        match io.remove_dir(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            // Not empty (ENOTEMPTY/EEXIST): leave it.
            Err(_) => {}
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A pid that is not alive: a child that has exited and been reaped.
    fn dead_pid() -> u32 {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        assert!(!pid_alive(pid));
        pid
    }

    #[test]
    fn removes_only_dead_leftovers() {
        let d = tempfile::tempdir().unwrap();
        let dead = dead_pid();
        let me = std::process::id();
        let target = d.path().join("k.hrry");
        let stale = d
            .path()
            .join(format!(".k.hrry.tmp-{dead}-0123456789abcdef"));
        let live = d.path().join(format!(".k.hrry.tmp-{me}-0123456789abcdef"));
        let other = d
            .path()
            .join(format!(".j.hrry.tmp-{dead}-0123456789abcdef"));
        for p in [&stale, &live, &other, &target] {
            fs::write(p, b"x").unwrap();
        }
        let dead_dir = d.path().join(format!(".coo-assembler-{dead}-xyz"));
        let full_dir = d.path().join(format!(".coo-assembler-{dead}-full"));
        let live_dir = d.path().join(format!(".coo-assembler-{me}-xyz"));
        for p in [&dead_dir, &full_dir, &live_dir] {
            fs::create_dir(p).unwrap();
        }
        fs::write(full_dir.join("f"), b"x").unwrap();
        let mut got = remove_stale_output_temps(&IoCtx::new(), &target).unwrap();
        got.sort();
        assert_eq!(got, vec![other.clone(), stale.clone()]);
        assert_eq!(
            remove_stale_temp_dirs(&IoCtx::new(), d.path()).unwrap(),
            vec![dead_dir.clone()]
        );
        // A dead run's output is removed whatever target it was for.
        assert!(!stale.exists() && !dead_dir.exists() && !other.exists());
        assert!(live.exists() && target.exists());
        assert!(full_dir.exists() && live_dir.exists());
    }
}
