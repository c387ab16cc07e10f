// The in-memory results (arrays the caller gets back) serve the front ends
// through `internals`; a build without it compiles them unused.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]
//! The result vectors: index element types ([`OutIndex`]), fallible
//! allocation, and [`Shared`], through which the band workers write
//! disjoint ranges of one vector at once.

use crate::error::{Error, Result};
use std::marker::PhantomData;
use std::mem::MaybeUninit;

/// An integer type of a result's index and pointer arrays: `i32`, `i64`,
/// `u32`, `u64` (scipy takes int32 when every index and nnz fit, int64
/// otherwise).
pub trait OutIndex: Copy + Send + Sync + Default + std::fmt::Debug + 'static {
    /// The largest value the type holds, as u64.
    const MAX: u64;
    /// `v` in this type; the caller has checked `v <= MAX`.
    fn from_u64(v: u64) -> Self;
    /// The value widened.
    fn to_u64(self) -> u64;
}

macro_rules! out_index {
    ($($t:ty),*) => {$(
        impl OutIndex for $t {
            const MAX: u64 = <$t>::MAX as u64;
            #[inline(always)]
            fn from_u64(v: u64) -> $t {
                v as $t
            }
            #[inline(always)]
            fn to_u64(self) -> u64 {
                self as u64
            }
        }
    )*};
}
out_index!(i32, i64, u32, u64);

/// An empty vector with room for `n` elements, or `Error::OutOfMemory`.
/// Room that is never written is never touched, so it costs address
/// space, not memory.
pub(crate) fn room<T>(n: usize, what: &'static str) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Error::OutOfMemory {
        what,
        bytes: (n as u64).saturating_mul(std::mem::size_of::<T>() as u64),
    })?;
    Ok(v)
}

/// `n` copies of `x`, or `Error::OutOfMemory`.
pub(crate) fn filled<T: Clone>(n: usize, x: T, what: &'static str) -> Result<Vec<T>> {
    let mut v = room(n, what)?;
    v.resize(n, x);
    Ok(v)
}

/// `n` zeros, or `Error::OutOfMemory`: from the allocator's zeroed memory
/// (fresh pages for a large vector), so nothing is written here and a page
/// is touched only when it is first used.
pub(crate) fn zeroed<T: bytemuck::Zeroable>(n: usize, what: &'static str) -> Result<Vec<T>> {
    let oom = || Error::OutOfMemory {
        what,
        bytes: (n as u64).saturating_mul(std::mem::size_of::<T>() as u64),
    };
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| oom())?;
    if layout.size() == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the layout has a non-zero size (checked above).
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<T>();
    if p.is_null() {
        return Err(oom());
    }
    // SAFETY: `p` was allocated by the global allocator with the layout of
    // `n` T's (so capacity n), and all-zero bytes are a valid T
    // (`Zeroable`), so all n elements are initialised.
    Ok(unsafe { Vec::from_raw_parts(p, n, n) })
}

/// The spare room of a vector, written by several threads at once in
/// ranges that never overlap (the band protocol hands each band its own
/// range of entries exactly once).
pub(crate) struct Shared<'v, T> {
    ptr: *mut MaybeUninit<T>,
    cap: usize,
    _v: PhantomData<&'v mut Vec<T>>,
}

// SAFETY: a Shared only hands out ranges its callers guarantee to be
// disjoint (see `range`), so sending or sharing it between threads is as
// safe as splitting a slice with `split_at_mut`; T itself must be Send.
unsafe impl<T: Send> Send for Shared<'_, T> {}
// SAFETY: as above; the only access is through `range`.
unsafe impl<T: Send> Sync for Shared<'_, T> {}

impl<'v, T> Shared<'v, T> {
    /// The spare room of `v` (which must be empty) up to its capacity.
    pub(crate) fn new(v: &'v mut Vec<T>) -> Shared<'v, T> {
        debug_assert!(v.is_empty());
        let spare = v.spare_capacity_mut();
        Shared {
            ptr: spare.as_mut_ptr(),
            cap: spare.len(),
            _v: PhantomData,
        }
    }

    /// Entries `start..start + len` of the room, or None when they reach
    /// past it.
    ///
    /// # Safety
    /// No other live reference (from this or another thread) may overlap
    /// the range while the returned slice is alive.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn range(&self, start: usize, len: usize) -> Option<&mut [MaybeUninit<T>]> {
        let end = start.checked_add(len)?;
        if end > self.cap {
            return None;
        }
        // SAFETY: the range lies in the vector's allocation (checked just
        // above), which the borrow in `_v` keeps alive and unmoved; the
        // caller guarantees that nothing else refers to it.
        Some(unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), len) })
    }
}

/// Make the first `len` entries of `v`, all written through a
/// [`Shared`] over it, its contents, and give back the room beyond.
///
/// # Safety
/// Every entry `0..len` must have been written.
pub(crate) unsafe fn commit<T>(v: &mut Vec<T>, len: usize) {
    debug_assert!(len <= v.capacity());
    // SAFETY: len is within the capacity and the caller guarantees that
    // every entry below it was initialised.
    unsafe { v.set_len(len) };
    // A large vector's room beyond is returned by mremap, without copying.
    v.shrink_to_fit();
}
