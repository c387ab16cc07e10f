//! The names of the files the crate leaves next to its outputs and in the
//! temporary directory, built and parsed here only, so the writer, the spill
//! code and the leftover sweep cannot disagree on a format.
//!
//! - temporary output: `.<target file name>.tmp-<pid>-<16 hex>`, next to
//!   the target;
//! - private spill directory: `.coo-assembler-<pid>-<random>`, in the
//!   temporary directory (the random part is chosen by `tempfile`).

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
pub(crate) fn output_temp_name(target_name: &str, pid: u32, random: u64) -> String {
    format!(".{target_name}.tmp-{pid}-{random:016x}")
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
    fn parent_of_a_bare_name_is_the_current_directory() {
        assert_eq!(parent_dir(Path::new("k.hrry")), PathBuf::from("."));
        assert_eq!(parent_dir(Path::new("/a/k.hrry")), PathBuf::from("/a"));
    }
}
