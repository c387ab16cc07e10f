//! What an assembly did: the [`Summary`] every path returns (the
//! kernel's, the runs' and merge's), the one type they all fill.

use std::path::PathBuf;
use std::time::Duration;

/// What an assembly did, returned by [`crate::Builder::finish`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Summary {
    /// The file written.
    pub path: PathBuf,
    /// Contributions pushed, those skipped for a negative index included.
    pub contributions: u64,
    /// Of those, contributions skipped for a negative index
    /// ([`crate::AssembleOptions::skip_negative`]).
    pub skipped_negative: u64,
    /// Entries in the file.
    pub nnz: u64,
    /// Entries dropped because their combined value was zero.
    pub dropped_zeros: u64,
    /// Sorted runs made from chunks (0 when the work fit the budget and
    /// the in-memory kernel assembled it: no run, no merge).
    pub runs: u64,
    /// Of those, runs written to disk.
    pub runs_spilled: u64,
    /// Merge passes, the final one included (0 when nothing was pushed).
    pub merge_passes: u32,
    /// Key ranges the final merge was cut into, merged on several threads
    /// at once (0: merged on one thread).
    pub merge_ranges: u64,
    /// Bytes written to spill files, all passes included.
    pub bytes_spilled: u64,
    /// Largest number of bytes the assembler's buffers held at once.
    pub peak_buffer_bytes: u64,
    /// The budget they had to stay under.
    pub memory_budget: u64,
    /// How the budget was divided: its named reservations, in the order
    /// they were taken (the runs' path: the fixed buffers, the chunks and
    /// sort scratch, in-memory runs; the kernel's: the file writer, the
    /// records held, its counts and the workers' scratch).
    pub budget_parts: Vec<(&'static str, u64)>,
    /// Size of the output file.
    pub file_bytes: u64,
    /// From `Builder::new` to the start of `finish`.
    pub time_ingest: Duration,
    /// Time sorter threads spent sorting, combining and spilling (summed
    /// over threads; it overlaps with ingestion).
    pub time_sort: Duration,
    /// Intermediate merge passes.
    pub time_merge: Duration,
    /// The final merge and the file write, fsync and rename.
    pub time_write: Duration,
    /// Leftovers of earlier, killed runs that this one removed (temporary
    /// output files next to the target, empty spill directories).
    pub stale_removed: Vec<PathBuf>,
}
