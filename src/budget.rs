//! The memory budget as one object. Every part of an assembly, a plan, a
//! refill or a conversion takes its named reservation from it in turn; a
//! part that runs inside another (the kernel under a file sink, the builder
//! under a conversion) works in what is left ([`Budget::inside`]).
//! While work runs, the bytes in use and their peak are counted here too,
//! and a part that sizes itself by what is free now asks [`Budget::free`].
//!
//! A budget too small is refused with the part that did not fit and the
//! smallest total that would hold it beside the parts taken before it.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};

/// A memory budget: its total, the reservations taken from it, and the
/// bytes in use while the work runs.
#[derive(Debug, Default)]
pub struct Budget {
    total: u64,
    taken: u64,
    parts: Vec<(&'static str, u64)>,
    now: AtomicU64,
    peak: AtomicU64,
}

impl Budget {
    /// A budget of `total` bytes, nothing taken.
    pub fn new(total: u64) -> Budget {
        Budget {
            total,
            ..Budget::default()
        }
    }

    /// The bytes the caller gave.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// What the reservations have not taken.
    pub fn left(&self) -> u64 {
        self.total - self.taken
    }

    /// The reservations, in the order they were taken.
    pub fn parts(&self) -> &[(&'static str, u64)] {
        &self.parts
    }

    /// Takes `bytes` for `part`, or refuses naming it: the smallest budget
    /// is then what was taken before plus `bytes`.
    pub fn take(&mut self, part: &'static str, bytes: u64) -> Result<u64> {
        self.try_take(part, bytes)
            .ok_or_else(|| self.refuse(part, self.taken.saturating_add(bytes)))
    }

    /// Takes `bytes` for `part` when they are left (None, nothing taken,
    /// when not: for a caller with another way to do the work).
    pub fn try_take(&mut self, part: &'static str, bytes: u64) -> Option<u64> {
        (bytes <= self.left()).then(|| {
            self.taken += bytes;
            self.parts.push((part, bytes));
            bytes
        })
    }

    /// Takes `bytes` for `part`, or all that is left when less is.
    pub fn take_at_most(&mut self, part: &'static str, bytes: u64) -> u64 {
        let bytes = bytes.min(self.left());
        self.taken += bytes;
        self.parts.push((part, bytes));
        bytes
    }

    /// Takes all that is left for `part`.
    pub fn take_rest(&mut self, part: &'static str) -> u64 {
        self.take_at_most(part, u64::MAX)
    }

    /// The refusal of a total below `minimum`, the smallest that `part`
    /// works in (worked out whole by the caller).
    pub fn refuse(&self, part: &'static str, minimum: u64) -> Error {
        Error::BudgetTooSmall {
            budget: self.total,
            minimum,
            part,
        }
    }

    /// [`Budget::refuse`] when the total is below `minimum`.
    pub fn require(&self, part: &'static str, minimum: u64) -> Result<()> {
        if self.total < minimum {
            return Err(self.refuse(part, minimum));
        }
        Ok(())
    }

    /// Runs a part that works inside this budget with what is left as its
    /// own, a refusal from it told in this budget's terms: the total the
    /// caller gave, and a minimum that counts the parts taken here.
    pub fn inside<T>(&self, part: impl FnOnce(u64) -> Result<T>) -> Result<T> {
        part(self.left()).map_err(|e| match e {
            Error::BudgetTooSmall { minimum, part, .. } => Error::BudgetTooSmall {
                budget: self.total,
                minimum: minimum.saturating_add(self.taken),
                part,
            },
            e => e,
        })
    }

    /// `bytes` more in use (the peak follows).
    pub fn add(&self, bytes: u64) {
        let now = self.now.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }

    /// `bytes` fewer in use.
    pub fn sub(&self, bytes: u64) {
        self.now.fetch_sub(bytes, Ordering::Relaxed);
    }

    /// The bytes in use now.
    pub fn in_use(&self) -> u64 {
        self.now.load(Ordering::Relaxed)
    }

    /// The most bytes in use at once so far.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// What the total has free now, whatever the reservations: for a part
    /// that sizes itself by what the others left unused.
    pub fn free(&self) -> u64 {
        self.total.saturating_sub(self.in_use())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_are_named_and_a_part_that_does_not_fit_is_refused_by_name() {
        let mut b = Budget::new(100);
        assert_eq!(b.take("writer", 30).unwrap(), 30);
        assert_eq!(b.take_at_most("chunks", 35), 35);
        assert_eq!(b.left(), 35);
        assert_eq!(b.try_take("runs", 36), None);
        assert_eq!(b.left(), 35, "a refused part takes nothing");
        match b.take("runs", 40) {
            Err(Error::BudgetTooSmall {
                budget: 100,
                minimum: 105,
                part: "runs",
            }) => {}
            other => panic!("expected BudgetTooSmall for runs, got {other:?}"),
        }
        assert_eq!(b.parts(), &[("writer", 30), ("chunks", 35)]);
        let inner = b.inside(|left| {
            let mut inner = Budget::new(left);
            inner.take("sorters", 50).map(|_| ())
        });
        match inner {
            Err(Error::BudgetTooSmall {
                budget: 100,
                minimum: 115,
                part: "sorters",
            }) => {}
            other => panic!("expected the inner refusal in the outer terms, got {other:?}"),
        }
        assert!(b.require("scratch", 100).is_ok());
        let e = b.require("scratch", 101).unwrap_err().to_string();
        assert!(
            e.contains("too small: at least") && e.ends_with("for scratch"),
            "{e}"
        );
        assert_eq!(b.take_at_most("runs", 50), 35);
        assert_eq!((b.take_rest("more"), b.left()), (0, 0));
    }

    #[test]
    fn bytes_in_use_keep_their_peak_and_free_is_what_the_total_has_left() {
        let b = Budget::new(1000);
        b.add(300);
        b.add(200);
        b.sub(400);
        assert_eq!((b.in_use(), b.peak(), b.free()), (100, 500, 900));
        b.add(1000);
        assert_eq!(b.free(), 0, "never below zero");
    }
}
