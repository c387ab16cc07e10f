//! Distributed assembly on MPI (feature `mpi`, issue 13).
//!
//! [`DistBuilder`] runs inside the caller's MPI job on the communicator it
//! is given (the caller initialises MPI, as with PETSc). Every rank pushes
//! any coordinate; rows are owned by contiguous ranges (given, or chosen at
//! `finish` from a sample of the pushed rows so that entries balance).
//! [`DistBuilder::finish`] is collective:
//!
//! 1. **ranges**: agreed from the samples (all-gather) unless given;
//! 2. **exchange**: each rank reads its stash in chunks; records of its
//!    own rows go straight to its local builder, the others collect in an
//!    outgoing buffer of at most `C` records, sorted and combined exactly
//!    when full (`src/mpi/combine.rs`: float sums as exact partials,
//!    integer sums when they fit, min/max), and go to their owners with
//!    `MPI_Alltoallv`, round after round until every stash is drained. A
//!    full buffer that combining shrank, but not by half, is kept as a
//!    sorted run on disk instead (`src/mpi/runs.rs`); once the stash is
//!    drained the runs are merged, combined across the whole stash, and
//!    sent in rounds of at most `C` records too. `C`
//!    is chosen so that the outgoing buffer, its combined copy and what
//!    arrives (at most `C` from each other rank) fit a quarter of the
//!    budget and stay below 2^31 - 1 words (MPI counts and displacements
//!    are C ints);
//! 3. **assembly**: the owner pushes what it receives (local row indices)
//!    into an ordinary [`coo_assembler::Builder`] over its row band, which sorts,
//!    spills and merges under half the budget with exact sums, and writes a
//!    private plain file;
//! 4. **write**: member sizes are exchanged (exclusive scan), every rank
//!    copies its member (descriptor with a shard section, buffers streamed
//!    from the private file through a bounded buffer) into one shared
//!    temporary file at its offset and fsyncs it; rank 0 writes header,
//!    head, KV, index and trailer, fsyncs and renames the file over the
//!    target (see [`crate::composite`] for the layout).
//!    [`DistBuilder::finish_per_rank`] instead publishes each rank's plain
//!    file at a path of its own (no shared filesystem needed).
//!
//! **Exact results.** Contributions travel unrounded (their raw 8-byte
//! form), or combined only in ways that leave the owner's result unchanged
//! (exact partial sums), and are summed exactly by their owner, so the
//! composite, converted to one COO tensor, is bit-identical to what one
//! process would assemble from the same contributions, for any rank count,
//! budget or push order.
//!
//! **Failure.** Each phase ends with an agreement (`MPI_Allreduce` of an
//! ok flag; on failure the messages are all-gathered): an error on one
//! rank makes every rank return an error ([`Error::RankFailed`] on the
//! others), no file is published and every rank removes its temporary
//! files (the stash is an unnamed file anyway). Every rank must therefore
//! call `finish`, even after a push failed (the failure is then reported
//! collectively). A rank that gives its builder up instead
//! ([`DistBuilder::abandon`], or a drop before `finish`: an early return,
//! an error path, a front end's exception) takes part in `finish`'s first
//! agreement as a failing rank: every other rank's `finish` returns
//! [`Error::RankFailed`] naming it and why, and nothing hangs. Only a
//! panic inside `finish` itself, when the others may be in any later
//! collective, aborts the job (`MPI_Abort`).
//!
//! **In memory.** [`DistBuilder::finish_csr`] returns each rank's row band
//! as CSR arrays ([`LocalCsr`]: local row pointer, global columns, values,
//! 32- or 64-bit indices), what PETSc's `MatCreateMPIAIJWithArrays` takes;
//! [`RowOwnership::Local`] gives the bands by each rank's own row count.
//! [`DistPlan`] plans once across ranks (from arrays, or what a builder
//! was pushed: [`DistBuilder::finish_planned`]) and refills a band with
//! one all-to-all of the values.
//!
//! Duplicate policy `last` is refused (the order of contributions from
//! different ranks is not defined); `sum` (default), `min`, `max` and
//! `error` behave as in one process. Every real, integer and bool element
//! type is taken; complex ones are refused when the builder is made (a
//! record carries one value word). Members have the layout of
//! `AssembleOptions::layout`: COO by default, CSR or CSC for matrices (the
//! local builder writes its band in that layout, `row_ptr` / `col_ptr`
//! over the band's own rows / all columns, and the member is copied from
//! it as it is).

mod combine;
pub mod comm;
pub mod input;
mod plan;
pub mod ranges;
mod runs;
mod stash;

use combine::{Precombine, sort_and_combine};
use coo_assembler::DType;
use coo_assembler::element::{Element, RealElement};
use coo_assembler::internals::assemble::builder::check_coordinate;
use coo_assembler::internals::assemble::combine::raw_value;
use coo_assembler::internals::assemble::combine::{CombinerKind, PushValue};
use coo_assembler::internals::assemble::direct::OutIndex;
use coo_assembler::internals::budget::Budget;
use coo_assembler::internals::composite::{
    PLACED_WORDS, Placed, Prepared, first_member_offset, member_name, write_frame, write_member,
};
use coo_assembler::internals::fs::ctx::IoCtx;
use coo_assembler::internals::fs::names::{TempName, output_temp_name, parent_dir, random_u64};
use coo_assembler::internals::fs::output::{AtomicOutput, ReplaceInput, open_shared};
use coo_assembler::internals::hurray::composite::{CompositeHead, RULE_PARTITION};
use coo_assembler::options::OutputLayout;
use coo_assembler::{AssembleOptions, HurrayFile, options::DuplicatePolicy};
use coo_assembler::{Builder, builder::Summary};
use coo_assembler::{Error, Result};
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::traits::*;
use ranges::{RowSample, check_starts, owner, starts_from_sample};
use runs::Runs;
use stash::Stash;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use plan::DistPlan;

/// Largest count MPI takes in one call (counts and displacements are C ints).
const MAX_WORDS: u64 = i32::MAX as u64;
/// Records read from the stash at a time.
const READ_RECORDS: usize = 1 << 16;
/// Bytes of an error message carried to the other ranks.
const MSG_BYTES: usize = 240;

/// How rows are assigned to ranks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RowOwnership {
    /// Chosen at `finish` from a sample of the pushed rows, balancing entries.
    #[default]
    Sampled,
    /// Rank k owns rows `starts[k] .. starts[k + 1]` (the last one to the
    /// end); `starts[0] = 0`, strictly increasing.
    Given(Vec<u64>),
    /// This rank owns this many rows, the ranks' bands in rank order (the
    /// local size PETSc's `MatSetSizes` or a DM gives); every rank passes
    /// this form, with its own count. Turned into `Given` at creation.
    Local(u64),
}

impl RowOwnership {
    /// Collective: `Local` counts made into `Given` starts; the others as
    /// they are.
    fn resolve<C: Communicator>(self, comm: &C) -> RowOwnership {
        match self {
            RowOwnership::Local(n) => RowOwnership::Given(starts_of_local_rows(comm, n)),
            r => r,
        }
    }
}

/// A failure injected on purpose, for the tests of the failure path.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InjectedFailure {
    /// Fail after the exchange, before the local assembly is written.
    Exchange,
    /// Fail after writing the member into the shared file.
    Write,
}

/// Options of a distributed assembly.
#[derive(Clone, Debug, Default)]
pub struct DistOptions {
    /// Per-rank options: `memory_budget` is per rank (half goes to the
    /// local assembler, a quarter to the stash in memory, a quarter to the
    /// exchange buffers); `tensor_name` names the composite head; `temp_dir`
    /// holds the stash spill (default: the system temporary directory).
    pub assemble: AssembleOptions,
    /// Row ownership.
    pub rows: RowOwnership,
    #[doc(hidden)]
    pub inject: Option<(i32, InjectedFailure)>,
}

/// What one rank did, returned by [`DistBuilder::finish`] on every rank.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DistSummary {
    /// This rank and the communicator size.
    pub rank: i32,
    /// Ranks in the job.
    pub ranks: i32,
    /// The composite written.
    pub path: PathBuf,
    /// Rows owned by this rank.
    pub rows: std::ops::Range<u64>,
    /// Contributions pushed on this rank.
    pub pushed: u64,
    /// Of those, bound for another rank.
    pub off_rank: u64,
    /// Records sent to other ranks (after combining on this rank).
    pub sent: u64,
    /// Contributions received from other ranks.
    pub received: u64,
    /// Bytes sent to other ranks (payload).
    pub bytes_sent: u64,
    /// Exchange rounds.
    pub rounds: u64,
    /// Bytes the stash spilled to disk.
    pub stash_spilled: u64,
    /// Bytes of combined outgoing records kept in run files to be combined
    /// across the whole stash before they are sent (0 when no outgoing
    /// buffer needed it).
    pub runs_spilled: u64,
    /// The local assembly (its `path` is the private file, gone by now).
    pub local: Summary,
    /// Entries in this rank's member.
    pub nnz: u64,
    /// Entries in the whole composite.
    pub total_nnz: u64,
    /// Size of the composite file.
    pub file_bytes: u64,
    /// Pushing, from `new` to `finish`.
    pub time_push: Duration,
    /// Agreeing on the row ranges.
    pub time_ranges: Duration,
    /// Routing (reading the stash, all-to-all, pushing into the local builder).
    pub time_exchange: Duration,
    /// Local merge and private file write (`Builder::finish`).
    pub time_assemble: Duration,
    /// Writing the member into the shared file, fsync, and publication.
    pub time_write: Duration,
    /// Peak resident memory of this process (VmHWM, bytes) at the end of
    /// each phase: push, ranges, exchange, assemble, write. Zero where the
    /// system does not say (Linux only).
    pub peak_rss: [u64; 5],
}

/// The communicator a builder works on: the caller's, borrowed, or one it
/// owns (a front end's duplicate of the caller's, [`comm::from_fortran`]).
enum Comm<'c, C> {
    Borrowed(&'c C),
    Owned(C),
}

impl<C> Comm<'_, C> {
    fn get(&self) -> &C {
        match self {
            Comm::Borrowed(c) => c,
            Comm::Owned(c) => c,
        }
    }
}

/// A distributed builder; see the [module docs](self).
pub struct DistBuilder<'c, C: Communicator> {
    comm: Comm<'c, C>,
    rank: i32,
    size: i32,
    shape: Vec<u64>,
    dtype: DType,
    opts: DistOptions,
    stash: Stash,
    sample: RowSample,
    pushed: u64,
    /// The first push error: reported collectively by `finish`.
    failed: Option<String>,
    started: Instant,
    finished: bool,
    /// Why the builder is given up, when [`DistBuilder::abandon`] says.
    abandoned: Option<String>,
}

impl<C: Communicator> Drop for DistBuilder<'_, C> {
    fn drop(&mut self) {
        if self.finished {
            // A panic inside `finish` (self is dropped while unwinding):
            // the other ranks wait in some collective of it that this rank
            // will not reach. Only ending the job frees them.
            if std::thread::panicking() {
                eprintln!(
                    "coo_assembler::mpi: rank {} panicked while finishing its DistBuilder; aborting the job so that the other ranks do not wait forever",
                    self.rank
                );
                self.comm.get().abort(70);
            }
            return;
        }
        // Given up before `finish` (an early return, an error path, an
        // exception in a front end): take part in `finish`'s first
        // agreement as a failing rank, so every other rank's `finish` (or
        // drop) returns an error instead of waiting.
        let why = self
            .abandoned
            .take()
            .unwrap_or_else(|| "dropped before finish".into());
        let _ = agree::<C, ()>(
            self.comm.get(),
            Err(Error::InvalidArgument(format!(
                "rank {} gave up its distributed builder: {why}",
                self.rank
            ))),
        );
    }
}

/// Turn `r` into everybody's verdict: Ok on every rank only if it is Ok on
/// every rank; otherwise the failing rank gets its own error and the others
/// [`Error::RankFailed`] naming the first failing rank and its message.
fn agree<C: Communicator, T>(comm: &C, r: Result<T>) -> Result<T> {
    let ok = i32::from(r.is_ok());
    let mut all = 0i32;
    comm.all_reduce_into(&ok, &mut all, SystemOperation::min());
    if all == 1 {
        return r;
    }
    let mut msg = [0u8; MSG_BYTES];
    if let Err(e) = &r {
        let s = e.to_string();
        let n = s.len().min(MSG_BYTES);
        msg[..n].copy_from_slice(&s.as_bytes()[..n]);
        msg[MSG_BYTES - 1] = 1; // marks a failing rank
    }
    let mut all_msgs = vec![0u8; MSG_BYTES * comm.size() as usize];
    comm.all_gather_into(&msg[..], &mut all_msgs[..]);
    // A failing rank returns its own error.
    r?;
    // This rank was fine: name the first that was not.
    let (rank, detail) = all_msgs
        .chunks_exact(MSG_BYTES)
        .enumerate()
        .find(|(_, m)| m[MSG_BYTES - 1] == 1)
        .map(|(k, m)| {
            let end = m[..MSG_BYTES - 1]
                .iter()
                .position(|&b| b == 0)
                .unwrap_or(MSG_BYTES - 1);
            (k as i32, String::from_utf8_lossy(&m[..end]).into_owned())
        })
        .unwrap_or((-1, "unknown failure".into()));
    Err(Error::RankFailed { rank, detail })
}

impl<'c, C: Communicator> DistBuilder<'c, C> {
    /// Collective: every rank of `comm` calls it with the same shape,
    /// element type and options (budget per rank).
    pub fn new(comm: &'c C, shape: &[u64], dtype: DType, opts: DistOptions) -> Result<Self> {
        Self::create(Comm::Borrowed(comm), shape, dtype, opts)
    }

    /// [`DistBuilder::new`] on a communicator the builder owns (the front
    /// ends give it their duplicate of the caller's, made by
    /// [`comm::from_fortran`]); it is freed with the builder.
    pub fn owning(comm: C, shape: &[u64], dtype: DType, opts: DistOptions) -> Result<Self> {
        Self::create(Comm::Owned(comm), shape, dtype, opts)
    }

    fn create(
        comm: Comm<'c, C>,
        shape: &[u64],
        dtype: DType,
        mut opts: DistOptions,
    ) -> Result<Self> {
        let (rank, size) = (comm.get().rank(), comm.get().size());
        opts.rows = std::mem::take(&mut opts.rows).resolve(comm.get());
        let check = (|| -> Result<()> {
            opts.assemble.validate()?;
            if opts.assemble.duplicates == DuplicatePolicy::Last {
                return Err(Error::InvalidOptions(
                    "duplicate policy `last` is not defined across ranks; use sum, min, max or error".into(),
                ));
            }
            // A record carries one value word: a complex value needs two.
            if dtype.is_complex() {
                return Err(Error::InvalidOptions(format!(
                    "distributed assembly takes real, integer and bool element types, not {}: \
                     assemble complex tensors in one process",
                    dtype.name()
                )));
            }
            // CSR and CSC members hold matrices only.
            opts.assemble.layout.check_rank(shape.len())?;
            if shape.len() < 2 || shape.len() > coo_assembler::internals::hurray::MAX_RANK {
                return Err(Error::InvalidOptions(format!(
                    "distributed assembly partitions rows: rank {} must be 2..=64",
                    shape.len()
                )));
            }
            if shape[0] < size as u64 {
                return Err(Error::InvalidOptions(format!(
                    "{} rows cannot give each of {size} ranks a row",
                    shape[0]
                )));
            }
            if let RowOwnership::Given(s) = &opts.rows {
                check_starts(s, shape[0], size as usize)?;
            }
            Ok(())
        })();
        agree(comm.get(), check)?;
        let dir = opts
            .assemble
            .temp_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let stash = Stash::new(
            shape.len(),
            RankBudget::of(opts.assemble.memory_budget).stash,
            &dir,
            opts.assemble.io.clone(),
        );
        Ok(DistBuilder {
            comm,
            rank,
            size,
            shape: shape.to_vec(),
            dtype,
            sample: RowSample::new(rank as u64),
            opts,
            stash,
            pushed: 0,
            failed: None,
            started: Instant::now(),
            finished: false,
            abandoned: None,
        })
    }

    /// Give the builder up on this rank, saying why: every other rank's
    /// `finish` returns [`Error::RankFailed`] naming this rank and `why`,
    /// and nothing is published. Dropping an unfinished builder does the
    /// same (with "dropped before finish"). Either is collective in the
    /// way `finish` is: the other ranks must reach `finish` or give up too.
    pub fn abandon(mut self, why: &str) {
        self.abandoned = Some(why.to_string());
    }

    /// The tensor's shape.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Contributions pushed so far on this rank.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Whether a band of `T` values is what this builder makes.
    fn holds<T: Element>(&self) -> Result<()> {
        if T::DTYPE == self.dtype {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "the builder's element type is {}; asked for {} values",
            self.dtype.name(),
            T::DTYPE.name()
        )))
    }

    /// The communicator the builder works on.
    pub fn communicator(&self) -> &C {
        self.comm.get()
    }

    /// The communicator.
    fn comm(&self) -> &C {
        self.comm.get()
    }

    /// This rank.
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// Push one contribution (any coordinate of the global shape). Errors
    /// are returned here and reported to every rank by `finish`.
    pub fn push<V: PushValue>(&mut self, idx: &[u64], value: V) -> Result<()> {
        let r = self.push_inner(idx, value);
        if let Err(e) = &r {
            if self.failed.is_none() {
                self.failed = Some(e.to_string());
            }
        }
        r
    }

    fn push_inner<V: PushValue>(&mut self, idx: &[u64], value: V) -> Result<()> {
        let n = self.pushed;
        check_coordinate(&self.shape, idx, n)?;
        let raw = raw_value(value, self.dtype, self.opts.assemble.non_finite, n)?;
        self.stash.push(idx, raw)?;
        self.sample.offer(idx[0]);
        self.pushed += 1;
        Ok(())
    }

    /// Record an error a front end found before a push reached the
    /// builder (a negative index, say) and return it: `finish` reports it
    /// to every rank, as it reports a push's own error.
    pub fn refused(&mut self, e: Error) -> Error {
        if self.failed.is_none() {
            self.failed = Some(e.to_string());
        }
        e
    }

    /// Push a dense element matrix (rank 2): `local[a * n + b]` goes to
    /// `(dofs[a], dofs[b])`.
    pub fn push_element<V: PushValue>(&mut self, dofs: &[u64], local: &[V]) -> Result<()> {
        let n = dofs.len();
        if local.len() != n * n {
            let e = Error::InvalidArgument(format!(
                "push_element: {} values for {n} dofs (need {})",
                local.len(),
                n * n
            ));
            self.failed.get_or_insert_with(|| e.to_string());
            return Err(e);
        }
        for (a, &ra) in dofs.iter().enumerate() {
            for (b, &cb) in dofs.iter().enumerate() {
                self.push(&[ra, cb], local[a * n + b])?;
            }
        }
        Ok(())
    }

    /// Collective: route, assemble, and write the partition composite at
    /// `path` (a shared filesystem path, the same on every rank).
    pub fn finish(self, path: impl AsRef<Path>) -> Result<DistSummary> {
        self.finish_to(path.as_ref(), Output::Composite)
    }

    /// Collective, for machines without a shared filesystem: route and
    /// assemble as [`DistBuilder::finish`], but every rank writes its row
    /// band to its own plain file at `path` (a path of its own, e.g. on a
    /// node-local disk): one tensor named `<tensor_name>.part<rank>` of
    /// shape `[rows owned, ...]` with row indices local to the band, which
    /// starts at global row `DistSummary::rows.start`. `coo-assembler
    /// composite join` (or [`coo_assembler::internals::composite::join`]) combines the files
    /// into the composite `finish` would have written. The files are
    /// published only if every rank succeeded; otherwise every rank returns
    /// an error and removes its file.
    pub fn finish_per_rank(self, path: impl AsRef<Path>) -> Result<DistSummary> {
        self.finish_to(path.as_ref(), Output::PerRank)
    }

    /// Collective: route and assemble as [`DistBuilder::finish`], and
    /// return this rank's row band in memory as CSR arrays with indices in
    /// `J` (`i32` for a 32-bit `PetscInt`) and values in `T` (the builder's
    /// element type). The budget bounds the assembly as it bounds `finish`;
    /// the band itself is the result, outside it. The band goes through a
    /// private file in `temp_dir`, removed before this returns.
    ///
    /// Errors as `finish`, and: a tensor that is not a matrix, `T` not the
    /// element type, an index that does not fit `J`.
    pub fn finish_csr<J: OutIndex, T: Element>(mut self) -> Result<(LocalCsr<J, T>, DistSummary)> {
        let fits = if self.shape.len() != 2 {
            Err(Error::InvalidOptions(format!(
                "CSR arrays hold matrices; this tensor has rank {}",
                self.shape.len()
            )))
        } else {
            self.holds::<T>()
        };
        if let Err(e) = agree(self.comm(), fits) {
            self.finished = true;
            return Err(e);
        }
        self.opts.assemble.layout = OutputLayout::Csr;
        let ncols = self.shape[1];
        let dir = self
            .opts
            .assemble
            .temp_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let mut band = None;
        let mut read = |private: &Path, rows: std::ops::Range<u64>| -> Result<u64> {
            let b = read_band::<J, T>(private, rows, ncols)?;
            let nnz = b.values.len() as u64;
            band = Some(b);
            Ok(nnz)
        };
        let s = self.finish_to(&dir.join("band"), Output::Memory(&mut read))?;
        let band = band.ok_or_else(|| Error::InvalidArgument("no band was read".into()))?;
        Ok((band, s))
    }

    /// Collective: plan what was pushed (every rank's contributions, in
    /// push order: [`DistPlan`]) and assemble it, returning this rank's
    /// band as [`DistBuilder::finish_csr`] would (bit for bit) and the
    /// plan, which refills the band from new values pushed in the same
    /// order on every rank ([`DistPlan::refill`]). The pushes are held in
    /// memory while planning (the stash is read back): 8 bytes per
    /// dimension and 8 per value per contribution, beside the plan.
    ///
    /// Errors as `finish_csr` and [`DistPlan::new`].
    pub fn finish_planned<J: OutIndex, T: RealElement>(
        mut self,
    ) -> Result<(LocalCsr<J, T>, DistPlan)> {
        self.finished = true;
        let failed = self.failed.take();
        agree(
            self.comm(),
            failed.map_or(Ok(()), |m| {
                Err(Error::InvalidArgument(format!("a push failed: {m}")))
            }),
        )?;
        agree(self.comm(), self.holds::<T>())?;
        let wpr = self.shape.len() + 1;
        let words = (|| -> Result<Vec<u64>> {
            let n = self.stash.records() as usize;
            let mut all = Vec::new();
            all.try_reserve_exact(n * wpr)
                .map_err(|_| Error::OutOfMemory {
                    what: "the pushes held for planning",
                    bytes: (n * wpr * 8) as u64,
                })?;
            let mut chunk = Vec::new();
            loop {
                self.stash.next_chunk(&mut chunk, READ_RECORDS)?;
                if chunk.is_empty() {
                    return Ok(all);
                }
                all.extend_from_slice(&chunk);
            }
        })();
        let words = agree(self.comm(), words)?;
        let records = plan::Records { words: &words, wpr };
        let mut opts = self.opts.clone();
        opts.assemble.layout = OutputLayout::Csr;
        let mut plan = DistPlan::plan(self.comm(), &records, &self.shape, self.dtype, &opts)?;
        // The values as they were pushed (raw lanes: f64 bits for floats).
        let raw = words.chunks_exact(wpr).map(|r| r[wpr - 1]);
        let band = if self.dtype.is_float() {
            let v: Vec<f64> = raw.map(f64::from_bits).collect();
            plan.refill(self.comm(), &v)?
        } else if self.dtype.is_signed_int() {
            let v: Vec<i64> = raw.map(|x| x as i64).collect();
            plan.refill(self.comm(), &v)?
        } else {
            let v: Vec<u64> = raw.collect();
            plan.refill(self.comm(), &v)?
        };
        Ok((band, plan))
    }

    fn finish_to(mut self, path: &Path, output: Output<'_>) -> Result<DistSummary> {
        self.finished = true;
        let path = path.to_path_buf();
        let time_push = self.started.elapsed();
        let mut peak_rss = [0u64; 5];
        peak_rss[0] = peak_rss_bytes();
        let failed = self.failed.take();
        agree(
            self.comm(),
            failed.map_or(Ok(()), |m| {
                Err(Error::InvalidArgument(format!("a push failed: {m}")))
            }),
        )?;
        let t = Instant::now();
        let starts = self.ranges();
        let time_ranges = t.elapsed();
        peak_rss[1] = peak_rss_bytes();
        let k = self.rank as usize;
        let lo = starts[k];
        let hi = starts.get(k + 1).copied().unwrap_or(self.shape[0]);

        // Private plain file of this rank's rows, next to the target.
        let target_name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dir = parent_dir(&path);
        let private = dir.join(output_temp_name(
            &format!("{target_name}.rank{k}"),
            std::process::id(),
            random_u64(),
        ));
        let io = self.opts.assemble.io.clone();
        let _cleanup = RemoveOnDrop(io, private.clone());

        let t = Instant::now();
        let head_name = self.opts.assemble.tensor_name.clone();
        let mut local_shape = self.shape.clone();
        local_shape[0] = hi - lo;
        let local_opts = AssembleOptions {
            memory_budget: RankBudget::of(self.opts.assemble.memory_budget).local,
            tensor_name: member_name(&head_name, k),
            ..self.opts.assemble.clone()
        };
        // The local assembler has half the budget: report the per-rank need.
        let builder = Builder::new(&local_shape, self.dtype, local_opts).map_err(|e| match e {
            Error::BudgetTooSmall { minimum, part, .. } => Error::BudgetTooSmall {
                budget: self.opts.assemble.memory_budget,
                minimum: minimum * 2,
                part,
            },
            e => e,
        });
        let builder = agree(self.comm(), builder)?;
        let ex = self.exchange(builder, &starts, lo);
        let (mut builder, ex) = agree(self.comm(), ex)?;
        let time_exchange = t.elapsed();
        peak_rss[2] = peak_rss_bytes();
        let inject = |at: InjectedFailure| -> Result<()> {
            match self.opts.inject {
                Some((r, a)) if r == self.rank && a == at => Err(Error::io(
                    "injected failure",
                    &path,
                    std::io::Error::other(format!("{at:?} on rank {r}")),
                )),
                _ => Ok(()),
            }
        };

        let t = Instant::now();
        let local = inject(InjectedFailure::Exchange)
            .and_then(|_| builder.finish(&private))
            .map_err(|e| match e {
                // Coordinates found while merging are local to the band.
                Error::DuplicateCoordinate { mut coordinate } => {
                    if let Some(c) = coordinate.first_mut() {
                        *c += lo;
                    }
                    Error::DuplicateCoordinate { coordinate }
                }
                Error::IntegerOverflow {
                    mut coordinate,
                    dtype,
                } => {
                    if let Some(c) = coordinate.first_mut() {
                        *c += lo;
                    }
                    Error::IntegerOverflow { coordinate, dtype }
                }
                e => e,
            });
        let local = agree(self.comm(), local)?;
        let time_assemble = t.elapsed();
        peak_rss[3] = peak_rss_bytes();

        let t = Instant::now();
        let (nnz, total_nnz, file_bytes) = match output {
            Output::Composite => self.write(&path, &private, &head_name, [lo, hi], &inject)?,
            Output::PerRank => self.publish_own(&path, &private, &local, &inject)?,
            Output::Memory(read) => {
                let r = inject(InjectedFailure::Write).and_then(|_| read(&private, lo..hi));
                let nnz = agree(self.comm(), r)?;
                let mut total = 0u64;
                self.comm()
                    .all_reduce_into(&nnz, &mut total, SystemOperation::sum());
                (nnz, total, 0)
            }
        };
        let time_write = t.elapsed();
        peak_rss[4] = peak_rss_bytes();
        Ok(DistSummary {
            rank: self.rank,
            ranks: self.size,
            path,
            rows: lo..hi,
            pushed: self.pushed,
            off_rank: ex.off_rank,
            sent: ex.sent,
            received: ex.received,
            bytes_sent: ex.bytes_sent,
            rounds: ex.rounds,
            stash_spilled: self.stash.spilled_bytes(),
            runs_spilled: ex.runs_spilled,
            local,
            nnz,
            total_nnz,
            file_bytes,
            time_push,
            time_ranges,
            time_exchange,
            time_assemble,
            time_write,
            peak_rss,
        })
    }

    /// Range starts, the same on every rank.
    fn ranges(&self) -> Vec<u64> {
        agree_starts(self.comm(), &self.sample, &self.opts.rows, self.shape[0])
    }

    /// Route every stashed contribution to its owner; the owner pushes it
    /// (row made local) into `builder`. Own records go straight in; the
    /// others collect in an outgoing buffer, sorted and combined
    /// ([`combine`]) whenever it fills (reading on while combining halves
    /// it), then sent in one `MPI_Alltoallv` round. Rounds go on until
    /// every rank's stash is drained.
    fn exchange(
        &mut self,
        mut builder: Builder,
        starts: &[u64],
        lo: u64,
    ) -> Result<(Builder, Exchange)> {
        let n = self.size as usize;
        let me = self.rank as usize;
        let wpr = self.shape.len() + 1;
        let cap = exchange_cap(
            RankBudget::of(self.opts.assemble.memory_budget).exchange,
            n,
            wpr,
        );
        let read = cap.min(READ_RECORDS);
        let how = Precombine::new(
            CombinerKind::of(
                self.dtype,
                self.opts.assemble.duplicates,
                self.opts.assemble.exact_sums,
            ),
            self.dtype,
        );
        let mut ex = Exchange::default();
        let mut chunk = Vec::new();
        let mut out: Vec<u64> = Vec::new();
        let mut send: Vec<u64> = Vec::new();
        let mut perm = Vec::new();
        let mut recv = Vec::new();
        let mut counts = vec![0i32; n];
        let mut rcounts = vec![0i32; n];
        let mut idx = vec![0u64; self.shape.len()];
        let dtype = self.dtype;
        let push = |b: &mut Builder, rec: &[u64], idx: &mut [u64]| -> Result<()> {
            idx.copy_from_slice(&rec[..rec.len() - 1]);
            idx[0] -= lo;
            let raw = rec[rec.len() - 1];
            if dtype.is_float() {
                b.push(idx, f64::from_bits(raw))
            } else if dtype.is_signed_int() {
                b.push(idx, raw as i64)
            } else {
                b.push(idx, raw)
            }
        };
        let dir = self
            .opts
            .assemble
            .temp_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let mut runs = Runs::new(wpr, &dir, self.opts.assemble.io.clone());
        let mut merge = None;
        loop {
            // Local work first; its failure is agreed before the exchange.
            let local = (|| -> Result<bool> {
                // After the stash: the runs, merged and combined.
                if let Some(m) = merge.as_mut() {
                    return runs::Merge::next_batch(m, &mut send, cap);
                }
                loop {
                    let room = cap - out.len() / wpr;
                    if room == 0 {
                        let kept = sort_and_combine(&out, wpr, how, &mut perm, &mut send);
                        out.clear();
                        if kept <= cap / 2 {
                            // Combining freed room: keep filling.
                            std::mem::swap(&mut out, &mut send);
                            continue;
                        }
                        // (Written as the part removed, so that a buffer
                        // of fewer than 32 records is sent too.)
                        if (cap - kept) * 32 < cap {
                            // Next to nothing combined (distinct keys, or
                            // a policy that does not combine): a run would
                            // only cost a write and a read. Send it now.
                            return Ok(false);
                        }
                        // Duplicates, but not close together in the
                        // stash: combine them across the whole stash.
                        runs.push(&send)?;
                        send.clear();
                        continue;
                    }
                    self.stash.next_chunk(&mut chunk, room.min(read))?;
                    if chunk.is_empty() {
                        sort_and_combine(&out, wpr, how, &mut perm, &mut send);
                        out.clear();
                        if runs.is_empty() {
                            return Ok(true);
                        }
                        runs.push(&send)?;
                        send.clear();
                        // The outgoing buffer's memory goes to the merge.
                        out = Vec::new();
                        perm = Vec::new();
                        chunk = Vec::new();
                        let m = merge.insert(runs.merge(how, cap)?);
                        return m.next_batch(&mut send, cap);
                    }
                    for rec in chunk.chunks_exact(wpr) {
                        if owner(starts, rec[0]) == me {
                            push(&mut builder, rec, &mut idx)?;
                        } else {
                            ex.off_rank += 1;
                            out.extend_from_slice(rec);
                        }
                    }
                }
            })();
            let drained = agree(self.comm(), local)?;
            // `send` is sorted by index tuple, so by owner.
            counts.fill(0);
            for rec in send.chunks_exact(wpr) {
                counts[owner(starts, rec[0])] += wpr as i32;
            }
            self.comm().all_to_all_into(&counts[..], &mut rcounts[..]);
            let sdispl = prefix(&counts);
            let rdispl = prefix(&rcounts);
            let total: usize = rcounts.iter().map(|&c| c as usize).sum();
            recv.clear();
            recv.resize(total, 0u64);
            {
                let sp = Partition::new(&send[..], &counts[..], &sdispl[..]);
                let mut rp = PartitionMut::new(&mut recv[..], &rcounts[..], &rdispl[..]);
                self.comm().all_to_all_varcount_into(&sp, &mut rp);
            }
            ex.rounds += 1;
            ex.sent += (send.len() / wpr) as u64;
            ex.bytes_sent += send.len() as u64 * 8;
            ex.received += (recv.len() / wpr) as u64;
            let pushed = (|| -> Result<()> {
                for rec in recv.chunks_exact(wpr) {
                    push(&mut builder, rec, &mut idx)?;
                }
                Ok(())
            })();
            agree(self.comm(), pushed)?;
            let mut all = 0i32;
            self.comm()
                .all_reduce_into(&i32::from(drained), &mut all, SystemOperation::min());
            if all == 1 {
                break;
            }
        }
        ex.runs_spilled = runs.written_bytes();
        Ok((builder, ex))
    }

    /// Place this rank's member in the shared file; rank 0 frames and
    /// publishes it. Returns (member nnz, total nnz, file bytes).
    fn write(
        &self,
        path: &Path,
        private: &Path,
        head_name: &str,
        rows: [u64; 2],
        inject: &dyn Fn(InjectedFailure) -> Result<()>,
    ) -> Result<(u64, u64, u64)> {
        let k = self.rank as usize;
        let io = &self.opts.assemble.io;
        let mut offset = vec![0u64; self.shape.len()];
        offset[0] = rows[0];
        let p = Prepared::from_file(io, member_name(head_name, k), private, &self.shape, &offset);
        let p = agree(self.comm(), p)?;
        let nnz = p.nnz();
        let first = first_member_offset(self.shape.len());
        // Members after the first start at a multiple of A: their size does
        // not depend on where they land.
        let size = if k == 0 {
            p.size_at(first)
        } else {
            p.size_at(0)
        };
        let mut before = 0u64;
        self.comm()
            .exclusive_scan_into(&size, &mut before, SystemOperation::sum());
        let start = if k == 0 { first } else { first + before };
        let mut sums = [0u64; 2];
        self.comm()
            .all_reduce_into(&[size, nnz][..], &mut sums[..], SystemOperation::sum());
        let members_end = first + sums[0];

        // Rank 0 creates the temporary file and tells the others its name.
        let mut name = [0u64; 2];
        let mut tmp = None;
        let created = if k == 0 {
            let fresh = TempName::fresh();
            name = fresh.to_words();
            AtomicOutput::create_as(io, path, &[], ReplaceInput::Refuse, fresh)
                .map(|t| tmp = Some(t))
        } else {
            Ok(())
        };
        agree(self.comm(), created)?;
        self.comm().process_at_rank(0).broadcast_into(&mut name[..]);
        let written = (|| -> Result<Placed> {
            let placed = match &tmp {
                Some((out, f)) => write_member(io, f, out.path(), start, &p)?,
                None => {
                    let (f, shared) = open_shared(io, path, TempName::from_words(name))?;
                    let placed = write_member(io, &f, &shared, start, &p)?;
                    io.sync(&f, &shared)?;
                    placed
                }
            };
            inject(InjectedFailure::Write)?;
            Ok(placed)
        })();
        let placed = agree(self.comm(), written)?;
        let mine = placed.to_words();
        let mut all = vec![0u64; PLACED_WORDS * self.size as usize];
        self.comm().all_gather_into(&mine[..], &mut all[..]);
        let published = match tmp {
            Some((out, f)) => (|| -> Result<u64> {
                let members = all
                    .chunks_exact(PLACED_WORDS)
                    .enumerate()
                    .map(|(r, w)| Placed::from_words(member_name(head_name, r), w))
                    .collect::<Result<Vec<Placed>>>()?;
                let head = CompositeHead {
                    dtype: self.dtype,
                    shape: self.shape.clone(),
                    rule: RULE_PARTITION,
                    combine_op: 0,
                    member_count: self.size as u32,
                };
                let len = write_frame(io, &f, out.path(), head_name, &head, &members, members_end)?;
                out.commit(&f)?;
                Ok(len)
            })(),
            None => Ok(0),
        };
        let published = agree(self.comm(), published)?;
        let mut len = published;
        self.comm().process_at_rank(0).broadcast_into(&mut len);
        Ok((nnz, sums[1], len))
    }

    /// Per-rank mode: every rank's private file is complete and durable
    /// (agreed after the local assembly); publish it at this rank's `path`
    /// revocably ([`AtomicOutput::commit_revocable`]: a file that was at
    /// `path` before is kept under a temporary name until every rank has
    /// published), and if publishing (or anything after it) failed on any
    /// rank, every rank takes its file back, so a failed run leaves the
    /// earlier files as they were. Returns (nnz, total nnz, this file's
    /// bytes).
    fn publish_own(
        &self,
        path: &Path,
        private: &Path,
        local: &Summary,
        inject: &dyn Fn(InjectedFailure) -> Result<()>,
    ) -> Result<(u64, u64, u64)> {
        let io = &self.opts.assemble.io;
        let out = AtomicOutput::adopt(io, path, private.to_path_buf());
        let (published, r) = match out.commit_revocable(None) {
            Ok(p) => (Some(p), inject(InjectedFailure::Write)),
            Err(e) => (None, Err(e)),
        };
        match agree(self.comm(), r) {
            Ok(()) => published.into_iter().for_each(|p| p.settle()),
            Err(e) => {
                // Best effort: the error to report is the one agreed on.
                published.into_iter().for_each(|p| p.revoke());
                return Err(e);
            }
        }
        let mut total = 0u64;
        self.comm()
            .all_reduce_into(&local.nnz, &mut total, SystemOperation::sum());
        Ok((local.nnz, total, local.file_bytes))
    }
}

/// Range starts, the same on every rank: the given ones, or chosen from
/// every rank's `sample` of its rows (all-gathered) so that entries
/// balance.
pub(crate) fn agree_starts<C: Communicator>(
    comm: &C,
    sample: &RowSample,
    rows: &RowOwnership,
    nrows: u64,
) -> Vec<u64> {
    if let RowOwnership::Given(s) = rows {
        return s.clone();
    }
    let n = comm.size() as usize;
    let mine = [sample.rows().len() as u64, sample.seen()];
    let mut counts = vec![0u64; 2 * n];
    comm.all_gather_into(&mine[..], &mut counts[..]);
    let sizes: Vec<i32> = counts.chunks_exact(2).map(|c| c[0] as i32).collect();
    let displs = prefix(&sizes);
    let total: usize = sizes.iter().map(|&c| c as usize).sum();
    let mut all = vec![0u64; total];
    {
        let mut part = PartitionMut::new(&mut all[..], &sizes[..], &displs[..]);
        comm.all_gather_varcount_into(sample.rows(), &mut part);
    }
    let mut weighted = Vec::with_capacity(total);
    for (r, c) in counts.chunks_exact(2).enumerate() {
        let w = if c[0] == 0 {
            0.0
        } else {
            c[1] as f64 / c[0] as f64
        };
        let d = displs[r] as usize;
        weighted.extend(all[d..d + c[0] as usize].iter().map(|&row| (row, w)));
    }
    starts_from_sample(weighted, nrows, n)
}

/// Collective: the row starts of ranks that own `local_rows` rows each, in
/// rank order ([`RowOwnership::Given`] from each rank's own count, as
/// PETSc's `MatSetSizes` or a DM gives it).
pub fn starts_of_local_rows<C: Communicator>(comm: &C, local_rows: u64) -> Vec<u64> {
    let mut all = vec![0u64; comm.size() as usize];
    comm.all_gather_into(&local_rows, &mut all[..]);
    all.iter()
        .scan(0u64, |at, &c| {
            let s = *at;
            *at = at.saturating_add(c);
            Some(s)
        })
        .collect()
}

/// Runs `$body` with `$t` the Rust type of the real element type
/// `$dtype` a band in memory holds (f64, f32, i64, i32, u64, u32), or
/// `$other` (with `$d` the type) for any other: the one dispatch the front
/// ends' typed calls share.
#[macro_export]
macro_rules! with_band_type {
    ($dtype:expr, $t:ident => $body:expr, $d:ident => $other:expr) => {
        match $dtype {
            $crate::__DType::F64 => {
                type $t = f64;
                $body
            }
            $crate::__DType::F32 => {
                type $t = f32;
                $body
            }
            $crate::__DType::I64 => {
                type $t = i64;
                $body
            }
            $crate::__DType::I32 => {
                type $t = i32;
                $body
            }
            $crate::__DType::U64 => {
                type $t = u64;
                $body
            }
            $crate::__DType::U32 => {
                type $t = u32;
                $body
            }
            $d => $other,
        }
    };
}

#[doc(hidden)]
pub use coo_assembler::DType as __DType;

/// What a band in memory may hold, for the front ends' messages.
pub const BAND_TYPES: &str = "float64, float32, int64, int32, uint64 or uint32";

/// One rank's row band of an assembled matrix in memory, as CSR arrays:
/// what `MatCreateMPIAIJWithArrays`, `MatMPIAIJSetPreallocationCSR` and
/// petsc4py's `createAIJ(csr=...)` take.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalCsr<J, T> {
    /// The global rows this rank owns.
    pub rows: std::ops::Range<u64>,
    /// Columns of the matrix.
    pub ncols: u64,
    /// `rows.len() + 1` offsets into `cols` and `values`, from 0.
    pub row_ptr: Vec<J>,
    /// Global column of every entry, ascending within a row.
    pub cols: Vec<J>,
    /// The entries' values.
    pub values: Vec<T>,
}

/// `v` copied into a new vector of `J`, refused when a value does not fit.
fn narrowed<J: OutIndex>(v: &[u64], what: &'static str) -> Result<Vec<J>> {
    let max = v.iter().copied().max().unwrap_or(0);
    if max > J::MAX {
        return Err(Error::InvalidArgument(format!(
            "{what}: {max} does not fit an index type whose largest value is {}; ask for 64-bit indices",
            J::MAX
        )));
    }
    let mut out = Vec::new();
    out.try_reserve_exact(v.len())
        .map_err(|_| Error::OutOfMemory {
            what,
            bytes: (v.len() * std::mem::size_of::<J>()) as u64,
        })?;
    out.extend(v.iter().map(|&x| J::from_u64(x)));
    Ok(out)
}

/// The CSR band a rank's local builder wrote at `private`, read into memory.
fn read_band<J: OutIndex, T: Element>(
    private: &Path,
    rows: std::ops::Range<u64>,
    ncols: u64,
) -> Result<LocalCsr<J, T>> {
    let f = HurrayFile::open(private)?;
    let t = f.only_tensor_view()?;
    let c = t
        .as_compressed()
        .ok_or_else(|| Error::InvalidArgument("the band was not written as CSR".into()))?;
    let src = c.values::<T>()?;
    let mut values = Vec::new();
    values
        .try_reserve_exact(src.len())
        .map_err(|_| Error::OutOfMemory {
            what: "the band's values",
            bytes: std::mem::size_of_val(src) as u64,
        })?;
    values.extend_from_slice(src);
    Ok(LocalCsr {
        rows,
        ncols,
        row_ptr: narrowed(c.pointers(), "the band's row pointer")?,
        cols: narrowed(c.indices(), "the band's column indices")?,
        values,
    })
}

/// Where `finish` writes.
enum Output<'a> {
    /// One partition composite on a shared filesystem.
    Composite,
    /// One plain file per rank.
    PerRank,
    /// Memory: the rank's private CSR file is read by the function, which
    /// returns the band's entry count.
    Memory(&'a mut dyn FnMut(&Path, std::ops::Range<u64>) -> Result<u64>),
}

#[derive(Default)]
struct Exchange {
    rounds: u64,
    /// Records bound for another rank, before combining.
    off_rank: u64,
    /// Records sent, after combining.
    sent: u64,
    received: u64,
    bytes_sent: u64,
    runs_spilled: u64,
}

/// Records a rank sends per round at most: its exchange memory (`mem`
/// bytes) holds the outgoing records, their sorted and combined copy, the
/// sort permutation (4 bytes a record) and what arrives (at most `C` from
/// each of the other `ranks - 1` ranks), and MPI's counts stay below 2^31.
/// A rank's budget (`DistOptions::assemble`'s): a quarter for the stash of
/// pushes in memory, a quarter for the exchange buffers, the rest, half,
/// for the local assembler.
struct RankBudget {
    stash: u64,
    exchange: u64,
    local: u64,
}

impl RankBudget {
    fn of(total: u64) -> RankBudget {
        let mut b = Budget::new(total);
        RankBudget {
            stash: b.take_at_most("the stash of pushes", total / 4),
            exchange: b.take_at_most("the exchange buffers", total / 4),
            local: b.take_rest("the local assembler"),
        }
    }
}

fn exchange_cap(mem: u64, ranks: usize, wpr: usize) -> usize {
    let rec = (wpr * 8) as u64;
    let by_budget = mem / ((ranks as u64 + 1) * rec + 4);
    let by_mpi = MAX_WORDS / (ranks.max(2) as u64 - 1) / wpr as u64;
    by_budget.min(by_mpi).max(1) as usize
}

fn prefix(counts: &[i32]) -> Vec<i32> {
    counts
        .iter()
        .scan(0i32, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect()
}

/// VmHWM of this process in bytes (0 where /proc does not say).
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// Removes a file when dropped (the rank's private plain file, once read
/// into the composite; published per rank, it is gone already).
struct RemoveOnDrop(IoCtx, PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = self.0.remove(&self.1);
    }
}
