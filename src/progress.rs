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
use std::time::{Duration, Instant};

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

#[derive(Debug)]
struct Meter {
    step: AtomicU8,
    /// Which time this step started (a second merge pass is pass 2).
    round: AtomicU64,
    done: AtomicU64,
    total: AtomicU64,
    /// When the step started: nanoseconds after `epoch`.
    started: AtomicU64,
    epoch: Instant,
}

impl Default for Meter {
    fn default() -> Meter {
        Meter {
            step: AtomicU8::new(Step::Idle as u8),
            round: AtomicU64::new(0),
            done: AtomicU64::new(0),
            total: AtomicU64::new(0),
            started: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

impl Meter {
    fn since_epoch(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
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
    /// Time since the step started.
    pub elapsed: Duration,
}

/// Below this a step's rate is not told: too short to say.
const RATE_AFTER: Duration = Duration::from_millis(500);

impl Now {
    /// Bytes per second in this step so far; None in its first half
    /// second, or before anything is done.
    pub fn rate(&self) -> Option<f64> {
        let secs = self.elapsed.as_secs_f64();
        (self.elapsed >= RATE_AFTER && self.done > 0).then(|| self.done as f64 / secs)
    }

    /// The time the rest of the step takes at [`Now::rate`], when its
    /// total is known.
    pub fn left(&self) -> Option<Duration> {
        let rate = self.rate().filter(|_| self.total > 0)?;
        let secs = self.total.saturating_sub(self.done) as f64 / rate;
        Some(Duration::from_secs_f64(secs.min(1e7)))
    }
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
            elapsed: Duration::from_nanos(
                m.since_epoch()
                    .saturating_sub(m.started.load(Ordering::Relaxed)),
            ),
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
        m.started.store(m.since_epoch(), Ordering::Relaxed);
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
        let n = q.now();
        assert_eq!(
            (n.step, n.round, n.done, n.total),
            (Step::Merge, 1, 50, 100)
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

    #[test]
    fn rate_and_time_left() {
        let at = |done, total, ms| Now {
            step: Step::Merge,
            round: 1,
            done,
            total,
            elapsed: Duration::from_millis(ms),
        };
        assert_eq!(at(100, 300, 1000).rate(), Some(100.0));
        assert_eq!(at(100, 300, 1000).left(), Some(Duration::from_secs(2)));
        // Unknown total: a rate, no estimate.
        assert_eq!(at(100, 0, 1000).left(), None);
        // Too early, or nothing done yet: neither.
        assert_eq!(at(100, 300, 100).rate(), None);
        assert_eq!(at(0, 300, 1000).left(), None);
    }
}
