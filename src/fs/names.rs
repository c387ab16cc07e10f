//! The names of the files the crate leaves next to its outputs and in the
//! temporary directory, built and parsed here only, so the writer, the spill
//! code and the leftover sweep cannot disagree on a format.
//!
//! - temporary output: `.<target file name>.tmp-<pid>-<16 hex>`, next to
//!   the target;
//! - private spill directory: `.coo-assembler-<pid>-<random>`, in the
//!   temporary directory (the random part is chosen by `tempfile`).

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Prefix of the private spill directories (followed by `<pid>-<random>`).
pub const TEMP_DIR_PREFIX: &str = ".coo-assembler-";

/// Prefix given to `tempfile` for a spill directory of process `pid`; it
/// appends the random part.
pub(crate) fn spill_dir_prefix(pid: u32) -> String {
    format!("{TEMP_DIR_PREFIX}{pid}-")
}

/// The pid in `.coo-assembler-<pid>-<random>`, if `name` is such a name.
pub(crate) fn spill_dir_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(TEMP_DIR_PREFIX)?;
    let (pid, rnd) = rest.split_once('-')?;
    if rnd.is_empty() {
        return None;
    }
    pid.parse().ok()
}

/// The temporary output name for `target_name` written by process `pid`.
pub fn output_temp_name(target_name: &str, pid: u32, random: u64) -> String {
    format!(".{target_name}.tmp-{pid}-{random:016x}")
}

/// What tells one temporary output from another beside the same target:
/// the process that writes it and a random number. Two words, so that
/// the ranks of an MPI job can agree on one (`crate::mpi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TempName {
    /// The process that writes the file (the sweep's liveness check).
    pub pid: u32,
    /// Tells apart the outputs of one process.
    pub random: u64,
}

impl TempName {
    /// A new name for this process.
    pub fn fresh() -> TempName {
        TempName {
            pid: std::process::id(),
            random: random_u64(),
        }
    }

    /// The temporary file of this name beside `target`:
    /// `.<target file name>.tmp-<pid>-<16 hex>` in the target's directory.
    pub fn beside(self, target: &Path) -> Result<PathBuf> {
        let Some(name) = target.file_name() else {
            return Err(Error::InvalidArgument(format!(
                "output path {} does not name a file",
                target.display()
            )));
        };
        Ok(parent_dir(target).join(output_temp_name(
            &name.to_string_lossy(),
            self.pid,
            self.random,
        )))
    }

    /// The name as two words (for a broadcast).
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // used by the MPI crate
    pub fn to_words(self) -> [u64; 2] {
        [u64::from(self.pid), self.random]
    }

    /// The name from [`TempName::to_words`].
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // used by the MPI crate
    pub fn from_words(w: [u64; 2]) -> TempName {
        TempName {
            pid: w[0] as u32,
            random: w[1],
        }
    }
}

/// A random number for temporary names (no extra dependency: the standard
/// hasher is randomly keyed per process; the time separates calls).
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(nanos);
    h.finish()
}

/// The pid in `.<target name>.tmp-<pid>-<hex>`, if `file` is such a name.
#[cfg(test)]
pub(crate) fn output_temp_pid(file: &str, target_name: &str) -> Option<u32> {
    let rest = file
        .strip_prefix('.')?
        .strip_prefix(target_name)?
        .strip_prefix(".tmp-")?;
    let (pid, rnd) = rest.split_once('-')?;
    if rnd.is_empty() || !rnd.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    pid.parse().ok()
}

/// The pid in `.<any name>.tmp-<pid>-<16 hex>`, if `file` is a temporary
/// output of any target.
pub(crate) fn any_output_temp_pid(file: &str) -> Option<u32> {
    let rest = file.strip_prefix('.')?;
    let at = rest.rfind(".tmp-")?;
    if at == 0 {
        return None;
    }
    let (pid, rnd) = rest[at + ".tmp-".len()..].split_once('-')?;
    if rnd.len() != 16 || !rnd.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    pid.parse().ok()
}

/// Directory that holds `path` ("." for a bare file name).
pub fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_temp_names_round_trip() {
        for (name, pid, rnd) in [
            ("k.hrry", 1u32, 0u64),
            ("a b.hrry", 4_194_304, u64::MAX),
            ("x.tmp-1-2", 77, 0x00ff),
        ] {
            let t = output_temp_name(name, pid, rnd);
            assert_eq!(output_temp_pid(&t, name), Some(pid), "{t}");
            assert_eq!(output_temp_pid(&t, "other.hrry"), None, "{t}");
        }
        assert_eq!(output_temp_pid(".k.hrry.tmp-123-", "k.hrry"), None);
        assert_eq!(output_temp_pid(".k.hrry.tmp-123-zz", "k.hrry"), None);
        assert_eq!(output_temp_pid("k.hrry", "k.hrry"), None);
    }

    #[test]
    fn any_output_temp_name_is_recognised() {
        for (name, pid, rnd) in [("k.hrry", 1u32, 0u64), ("x.tmp-1-2", 77, 0x00ff)] {
            let t = output_temp_name(name, pid, rnd);
            assert_eq!(any_output_temp_pid(&t), Some(pid), "{t}");
        }
        assert_eq!(any_output_temp_pid(".k.hrry.tmp-12-abc"), None); // not 16 hex
        assert_eq!(any_output_temp_pid("k.hrry.tmp-12-0123456789abcdef"), None);
        assert_eq!(any_output_temp_pid("..tmp-12-0123456789abcdef"), None);
    }

    #[test]
    fn spill_dir_names_round_trip() {
        for pid in [1u32, 77, u32::MAX] {
            // tempfile appends a random suffix to the prefix.
            let name = format!("{}aB3xYz", spill_dir_prefix(pid));
            assert_eq!(spill_dir_pid(&name), Some(pid), "{name}");
        }
        assert_eq!(spill_dir_pid(&spill_dir_prefix(5)), None); // no random part
        assert_eq!(spill_dir_pid(".coo-assembler-abc"), None);
        assert_eq!(spill_dir_pid("coo-assembler-5-x"), None);
    }

    #[test]
    fn temp_names_lie_beside_the_target_and_survive_two_words() {
        let n = TempName::fresh();
        assert_eq!(n.pid, std::process::id());
        assert_eq!(TempName::from_words(n.to_words()), n);
        let p = n.beside(Path::new("/a/k.hrry")).unwrap();
        assert_eq!(p.parent(), Some(Path::new("/a")));
        let file = p.file_name().unwrap().to_str().unwrap();
        assert_eq!(output_temp_pid(file, "k.hrry"), Some(n.pid));
        assert_eq!(any_output_temp_pid(file), Some(n.pid));
        assert_eq!(
            n.beside(Path::new("k.hrry")).unwrap().parent(),
            Some(Path::new("."))
        );
        assert!(n.beside(Path::new("/")).is_err());
        assert_ne!(TempName::fresh().random, TempName::fresh().random);
    }

    #[test]
    fn parent_of_a_bare_name_is_the_current_directory() {
        assert_eq!(parent_dir(Path::new("k.hrry")), PathBuf::from("."));
        assert_eq!(parent_dir(Path::new("/a/k.hrry")), PathBuf::from("/a"));
    }
}
