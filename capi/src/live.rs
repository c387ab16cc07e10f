//! Registries of live handles, by address: a handle that was freed (or
//! finished) is told apart from a live one (`COO_ERR_STATE`, or a no-op
//! for a second free) instead of being dereferenced. An address the
//! allocator has since given to a new handle of the same registry is that
//! handle (the one case the header leaves undefined, with use during
//! another thread's free). Each handle type that is validated has its own
//! registry, so that a handle of one type is never taken for another.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard};

/// The addresses of the live handles of one kind.
pub(crate) struct Registry(Mutex<BTreeSet<usize>>);

impl Registry {
    pub(crate) const fn new() -> Registry {
        Registry(Mutex::new(BTreeSet::new()))
    }

    fn set(&self) -> MutexGuard<'_, BTreeSet<usize>> {
        // The set is only inserted into and removed from: a panic elsewhere
        // cannot leave it inconsistent.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Register a new handle (NULL is not registered); returns it.
    pub(crate) fn register<T>(&self, p: *mut T) -> *mut T {
        if !p.is_null() {
            self.set().insert(p as usize);
        }
        p
    }

    /// Unregister `p`; false when it was not a live handle.
    pub(crate) fn unregister<T>(&self, p: *const T) -> bool {
        self.set().remove(&(p as usize))
    }

    /// Whether `p` is a live handle.
    pub(crate) fn contains<T>(&self, p: *const T) -> bool {
        self.set().contains(&(p as usize))
    }
}
