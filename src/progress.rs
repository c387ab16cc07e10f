//! How far a long operation has come, for a progress bar: the operation
//! (a [`crate::Builder`]'s finish, [`crate::convert::convert`], an export,
//! a verify) moves a [`Progress`] it was given, and any other thread reads
//! it ([`Progress::now`]) while the work runs. Reading and moving are a few
//! relaxed atomic operations, done once per block of work.
//!
//! ```
//! use coo_assembler::progress::{Progress, Step};
//! let p = Progress::new();
//! assert_eq!(p.now().step, Step::Idle);
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// What a long operation is doing now. Every step counts bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Step {
    /// Nothing yet, or done.
    #[default]
    Idle,
    /// Reading the input (bytes of the input).
    Read,
    /// Pushes into a [`crate::Builder`] (bytes of its records; the total
    /// is known from [`crate::AssembleOptions::expected_contributions`]).
    Push,
    /// Assembling in memory (no count: one quick pass).
    Assemble,
    /// Merging spilled runs into fewer (bytes of runs read).
    Merge,
    /// The final merge into the output (bytes of runs read).
    Write,
    /// Checking a file (bytes of the file's buffers).
    Check,
    /// Writing an export (bytes of the stored entries read).
    Export,
}

impl Step {
    const ALL: [Step; 8] = [
        Step::Idle,
        Step::Read,
        Step::Push,
        Step::Assemble,
        Step::Merge,
        Step::Write,
        Step::Check,
        Step::Export,
    ];

    /// What a progress line says for the step.
    pub fn label(self) -> &'static str {
        match self {
            Step::Idle => "idle",
            Step::Read => "reading",
            Step::Push => "pushing",
            Step::Assemble => "assembling in memory",
            Step::Merge => "merging spilled runs",
            Step::Write => "merging and writing",
            Step::Check => "checking",
            Step::Export => "exporting",
        }
    }
}

#[derive(Debug, Default)]
struct Meter {
    step: AtomicU8,
    /// Which time this step started (a second merge pass is pass 2).
    round: AtomicU64,
    done: AtomicU64,
    total: AtomicU64,
}

/// A handle on the progress of one operation; clones share it.
#[derive(Clone, Debug, Default)]
pub struct Progress(Arc<Meter>);

/// A reading of a [`Progress`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// What the operation is doing.
    pub step: Step,
    /// How many times this step has started (merge passes: 1, 2, ...).
    pub round: u64,
    /// Bytes done in this step.
    pub done: u64,
    /// Bytes this step has in all (0: not known).
    pub total: u64,
}

impl Progress {
    /// A progress at [`Step::Idle`].
    pub fn new() -> Progress {
        Progress::default()
    }

    /// Where the operation is now.
    pub fn now(&self) -> Now {
        let m = &self.0;
        Now {
            step: Step::ALL
                .get(usize::from(m.step.load(Ordering::Relaxed)))
                .copied()
                .unwrap_or_default(),
            round: m.round.load(Ordering::Relaxed),
            done: m.done.load(Ordering::Relaxed),
            total: m.total.load(Ordering::Relaxed),
        }
    }

    /// Start `step`, of `total` bytes (0: not known). The library's
    /// operations move their progress themselves; a caller moves one for
    /// work of its own (the command line's reading of an input).
    pub fn start(&self, step: Step, total: u64) {
        let m = &self.0;
        let same = m.step.load(Ordering::Relaxed) == step as u8;
        m.round.store(
            if same {
                m.round.load(Ordering::Relaxed) + 1
            } else {
                1
            },
            Ordering::Relaxed,
        );
        m.done.store(0, Ordering::Relaxed);
        m.total.store(total, Ordering::Relaxed);
        m.step.store(step as u8, Ordering::Relaxed);
    }

    /// `bytes` more of the current step are done.
    pub fn add(&self, bytes: u64) {
        self.0.done.fetch_add(bytes, Ordering::Relaxed);
    }

    /// `bytes` more done, if the current step is `step` (a builder's
    /// pushes count only while nothing else, a reading, is shown).
    pub(crate) fn add_in(&self, step: Step, bytes: u64) {
        if self.0.step.load(Ordering::Relaxed) == step as u8 {
            self.add(bytes);
        }
    }

    /// The current step has done `bytes` in all.
    pub fn set(&self, bytes: u64) {
        self.0.done.store(bytes, Ordering::Relaxed);
    }

    /// The operation ended.
    pub fn idle(&self) {
        self.start(Step::Idle, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_rounds_and_counts() {
        let p = Progress::new();
        let q = p.clone();
        p.start(Step::Merge, 100);
        p.add(30);
        p.add(20);
        assert_eq!(
            q.now(),
            Now {
                step: Step::Merge,
                round: 1,
                done: 50,
                total: 100
            }
        );
        p.start(Step::Merge, 80);
        assert_eq!((q.now().round, q.now().done, q.now().total), (2, 0, 80));
        p.start(Step::Write, 10);
        p.set(10);
        assert_eq!(
            (q.now().step, q.now().round, q.now().done),
            (Step::Write, 1, 10)
        );
        p.idle();
        assert_eq!(q.now().step, Step::Idle);
    }
}
