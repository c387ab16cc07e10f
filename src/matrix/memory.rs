//! Allocations sized by a file's contents or a shape: fallible, never an
//! abort (issue 22).
//!
//! `Vec::with_capacity` or `vec![x; n]` abort the process when the
//! allocator refuses (Rust's `handle_alloc_error`), which in Python kills
//! the interpreter. Every buffer whose size comes from a file or a shape
//! (a CSR's `indptr` of rows + 1 entries, a counting sort over the
//! columns, an output vector) goes through these instead, and a refusal is
//! [`Error::OutOfMemory`] (kind `Memory`: Python's `BudgetError`, a
//! `MemoryError`; C's `COO_ERR_MEMORY`; exit status 1 in the command
//! line).
//!
//! # Overcommit
//!
//! Linux grants most requests lazily: a `try_reserve` of more than the
//! machine holds may succeed, and the process is then killed when the
//! pages are touched (filling a vector touches them all). So a request
//! larger than the machine's physical memory is refused here before the
//! allocator is asked, whatever the overcommit policy, which makes the
//! refusal deterministic (a 2^40-row CSR needs 8 TiB of `indptr`: refused
//! on any machine that has less). A request below physical memory but
//! above what is free can still be granted and then run the machine out
//! of memory: that is the kernel's policy, not something an allocation can
//! see. The sizes that a damaged file could inflate are validated against
//! the buffers before they are used as sizes, so such a request comes
//! from a shape the caller chose, never from damaged data.

use crate::error::{Error, Result};
use crate::read::release::physical_memory;

/// Refuse `bytes` for `what` when it exceeds physical memory.
pub fn check_fits(bytes: u128, what: &'static str) -> Result<()> {
    if bytes > physical_memory() as u128 {
        return Err(Error::OutOfMemory {
            what,
            bytes: u64::try_from(bytes).unwrap_or(u64::MAX),
        });
    }
    Ok(())
}

/// An empty vector with room for `n` elements, or [`Error::OutOfMemory`]
/// naming `what` (refused beyond physical memory, see the module docs).
pub fn try_with_capacity<T>(n: u64, what: &'static str) -> Result<Vec<T>> {
    let bytes = n as u128 * std::mem::size_of::<T>() as u128;
    check_fits(bytes, what)?;
    let oom = || Error::OutOfMemory {
        what,
        bytes: u64::try_from(bytes).unwrap_or(u64::MAX),
    };
    let n = usize::try_from(n).map_err(|_| oom())?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| oom())?;
    Ok(v)
}

/// `n` copies of `value`, or [`Error::OutOfMemory`] naming `what`.
pub fn try_filled<T: Clone>(n: u64, value: T, what: &'static str) -> Result<Vec<T>> {
    let mut v = try_with_capacity(n, what)?;
    // The capacity is there: no allocation below.
    v.resize(n as usize, value);
    Ok(v)
}

/// `src` mapped through `f` into a new vector, allocated fallibly.
pub fn try_map<S, T>(src: &[S], what: &'static str, f: impl FnMut(&S) -> T) -> Result<Vec<T>> {
    let mut v = try_with_capacity(src.len() as u64, what)?;
    v.extend(src.iter().map(f));
    Ok(v)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn beyond_physical_memory_is_refused_not_aborted() {
        // 8 TiB of indptr for a 2^40-row CSR.
        let e = try_filled::<i64>((1u64 << 40) + 1, 0, "indptr").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Memory);
        assert!(e.to_string().contains("indptr"), "{e}");
        assert!(try_with_capacity::<u8>(u64::MAX, "x").is_err());
        assert_eq!(try_filled(3, 7u8, "x").unwrap(), [7, 7, 7]);
        assert_eq!(try_map(&[1u8, 2], "x", |&b| b as u32 * 2).unwrap(), [2, 4]);
    }
}
