// The in-memory results (arrays the caller gets back) serve the front ends
// through `internals`; a build without it compiles them unused.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]
//! In-memory assembly from arrays the caller holds (issue 23): the common
//! case, where the contributions are already index and value arrays and
//! the result is wanted in memory. No run, no temporary file, no fsync.
//!
//! For a matrix, contributions are bucketed by their major index (the row
//! for CSR and COO, the column for CSC) and each bucket is ordered by its
//! minor index in cache; any other rank buckets by the top bits of the
//! packed key. Steps (`DirectPlan::assemble`):
//!
//! 1. **Count** (`count.rs`): contributions per bucket, and the bucket range
//!    of every chunk of 4096 contributions; on every core, each over its
//!    part of the arrays.
//! 2. **Bands** (`band.rs`): consecutive buckets whose contributions fit one
//!    worker's scratch. A worker takes the next band, reads only the chunks
//!    whose range meets it (input in element order touches a narrow band
//!    of rows per chunk, so the arrays are read about once in all), scatters
//!    (minor, value) into place, orders each bucket, reduces each
//!    coordinate's contributions with the builder's own combiners (so the
//!    values are bit for bit what `Builder` + `finish` write), compacts,
//!    and, in band order, copies into the result.
//!
//! The caller's arrays are only read, chunk by chunk. Working memory is
//! the bucket counts, the chunk ranges and each worker's scratch, all
//! inside the memory budget; the result vectors are allocated for every
//! contribution (nnz is not known before the end) and only the entries
//! written are touched, then the room beyond is given back.
//!
//! `plan` says whether work can take this path; when it cannot (a key of
//! more than 64 bits, counts beyond the budget) or when
//! `DirectPlan::assemble` finds after counting that a bucket is too
//! heavy for the budget, the caller uses the [`crate::Builder`].

mod band;
mod count;
pub mod groups;
pub(crate) mod input;
pub(crate) mod lane;
mod memory;
pub(crate) mod out;
mod stream;
// The complex door serves Python, through `internals`.
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use memory::{assemble_complex_in_memory, assemble_in_memory};
pub use stream::assemble_arrays_to_file;
// The front ends' (Python's) stoppable form; unused inside the crate.
pub(crate) use count::stopped;
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use stream::arrays_to_file;
pub(crate) use stream::{file_plan, mapped_window};

pub use input::IndexElem;
pub use lane::{FromLane, Lane, OutValue};
pub use out::OutIndex;

use crate::assemble::combine::FloatSum;
use crate::assemble::combine::value_refusal;
use crate::assemble::combine::{CombineError, CombinerKind, PushValue, with_combiner};
use crate::assemble::key::KeyLayout;
use crate::budget::Budget;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::options::{AssembleOptions, NonFinitePolicy, OutputLayout};
use band::{BandSink, Bands, Form, Minor, Sink};
use count::Counts;
use input::{C128Bits, Checked, Cols, ComplexChecked, F64Bits, Input, Matrix, Packed, Source};
use lane::{ExactF64, RawReduce};
use out::{Shared, commit, room};
use std::sync::atomic::AtomicBool;

/// Contributions per chunk of the counting pass: the granularity at which
/// a band's pass skips the input.
const CHUNK: usize = 4096;
/// Below this many contributions everything runs on the calling thread:
/// starting threads would cost more than they save.
const PARALLEL_MIN: usize = 1 << 16;
/// Bucket bits of a packed key (any rank but 2, or a matrix too tall for
/// a count per row): up to 4 Mi buckets of counts.
const PACKED_BUCKET_BITS: u32 = 22;
/// Default scratch per worker, the first band size tried. Chosen by
/// measurement (docs/log/issue-23.md): bands that stay in the last-level
/// cache (two workers' within 32 MiB) make the scatter and the reduction
/// cheaper, and for input in element order cost few extra reads of the
/// arrays; input whose chunks span too many such bands takes larger ones
/// (`DirectPlan::bands`).
pub const DEFAULT_BAND_BYTES: u64 = 16 << 20;

/// Why a pass stopped early (turned into an [`Error`] by the entry point).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fault {
    /// A contribution a push would refuse (which one: the slow path finds
    /// the first), or arrays that changed while they were read.
    BadInput,
    /// The caller's stop flag was set.
    Stopped,
    /// A buffer could not be allocated.
    OutOfMemory,
    /// A worker thread panicked.
    Panicked,
    /// The sink failed (a write to the output file); it keeps the error.
    Output,
}

impl From<Error> for Fault {
    fn from(_: Error) -> Fault {
        Fault::OutOfMemory
    }
}

/// A value type the caller's value array may have: any [`PushValue`].
/// f64 values going into a float tensor with every value kept take a path
/// that copies their bits without a check.
pub trait DirectValue: PushValue + Send + Sync + 'static {
    /// The slice as f64 values, when it is one.
    fn as_f64s(s: &[Self]) -> Option<&[f64]> {
        let _ = s;
        None
    }
    /// The slice as complex128 values, when it is one.
    fn as_c128s(s: &[Self]) -> Option<&[num_complex::Complex<f64>]> {
        let _ = s;
        None
    }
}

/// Every element type, as its Rust type (f64 and complex128 slices are
/// recognised for their fast paths).
impl<T: crate::element::Element + std::fmt::Display> DirectValue for T {
    #[inline]
    fn as_f64s(s: &[T]) -> Option<&[f64]> {
        if T::DTYPE == DType::F64 {
            bytemuck::try_cast_slice(s).ok()
        } else {
            None
        }
    }
    #[inline]
    fn as_c128s(s: &[T]) -> Option<&[num_complex::Complex<f64>]> {
        if T::DTYPE == DType::C128 {
            bytemuck::try_cast_slice(s).ok()
        } else {
            None
        }
    }
}

/// A bool pushes as 1 or 0.
impl DirectValue for bool {}

/// An element type of a complex result: its two parts travel in one
/// `[u64; 2]` lane ([`DirectPlan::assemble_complex`]).
pub trait ComplexOut: crate::element::ComplexElement + lane::FromLane<[u64; 2]> {}
impl<C: crate::element::ComplexElement> ComplexOut for C {}

/// How contributions are bucketed.
#[derive(Clone, Debug)]
enum Scheme {
    /// A matrix: the bucket is the index of dimension `major`, the minor
    /// key the other index.
    Matrix { major: usize },
    /// Any rank: the bucket is `key >> split` of the packed key.
    Packed {
        layout: KeyLayout,
        split: u32,
        bucket_dims: usize,
    },
}

/// A plan for an in-memory assembly: [`plan`] made it, so the work can
/// take this path (unless a bucket turns out too heavy once counted).
#[derive(Clone, Debug)]
pub struct DirectPlan {
    shape: Vec<u64>,
    dtype: DType,
    layout: OutputLayout,
    kind: CombinerKind,
    drop_zeros: bool,
    /// `skip_negative`: a matrix's contributions with a negative index
    /// are skipped by the kernel's passes; other ranks leave arrays
    /// holding one to the builder.
    skip_negative: bool,
    non_finite: NonFinitePolicy,
    threads: usize,
    contributions: u64,
    scheme: Scheme,
    buckets: u64,
    /// Scratch bytes per worker (band entries, bucket places, sort keys).
    worker_bytes: u64,
    /// Bytes of the other counting threads' histograms.
    hist_limit: u64,
    /// Target scratch per band.
    band_bytes: u64,
    /// Contributions per chunk of the counting pass.
    chunk: usize,
    /// The budget's named reservations (for the summary).
    budget_parts: Vec<(&'static str, u64)>,
}

/// An assembled tensor, in vectors the caller owns.
#[derive(Clone, Debug, PartialEq)]
pub struct Assembled<O, J> {
    /// The stored values, in storage order.
    pub values: Vec<O>,
    /// CSR / CSC: the minor index of every entry (column / row). COO: the
    /// index tuple of every entry, `rank` indices each, in row-major order.
    pub indices: Vec<J>,
    /// CSR / CSC: `major extent + 1` offsets into `values` (row / column
    /// starts). COO: empty.
    pub pointers: Vec<J>,
    /// Entries whose combined value was zero and `drop_zeros` dropped.
    pub dropped_zeros: u64,
    /// Contributions `skip_negative` skipped for a negative index.
    pub skipped_negative: u64,
}

/// Bits to hold `extent - 1`.
pub(crate) fn bits_of(extent: u64) -> u32 {
    if extent <= 1 {
        0
    } else {
        64 - (extent - 1).leading_zeros()
    }
}

/// Whether `contributions` contributions to a tensor of `shape` and
/// `dtype` can be assembled in memory under `opts` (its memory budget
/// bounding the working memory, the result aside), and how.
///
/// None when they cannot: then use the [`crate::Builder`]. Reasons: the
/// options are invalid, an extent is 2^63 or more, the index tuple packs
/// into more than 64 bits (for a rank other than 2), the per-bucket counts
/// do not fit the budget, or 2^32 contributions or more.
pub fn plan(
    shape: &[u64],
    dtype: DType,
    contributions: u64,
    opts: &AssembleOptions,
) -> Option<DirectPlan> {
    plan_within(
        shape,
        dtype,
        contributions,
        opts,
        Budget::new(opts.memory_budget),
    )
}

/// [`plan`] within `budget` (`opts`' own, or what a caller that holds
/// buffers beside the kernel has left of it).
pub(crate) fn plan_within(
    shape: &[u64],
    dtype: DType,
    contributions: u64,
    opts: &AssembleOptions,
    mut budget: Budget,
) -> Option<DirectPlan> {
    opts.validate().ok()?;
    if shape.is_empty() || shape.len() > crate::hurray::MAX_RANK {
        return None;
    }
    crate::assemble::check_value_type(dtype, opts.duplicates, shape).ok()?;
    opts.check_layout(shape.len()).ok()?;
    // The kernel's buckets follow dimension 0: CSF in another mode order
    // goes through the runs.
    if opts.layout == OutputLayout::Csf
        && opts.storage_order(shape.len()) != (0..shape.len()).collect::<Vec<_>>()
    {
        return None;
    }
    if shape.iter().any(|&e| e >= 1 << 63) || contributions >= 1 << 32 {
        return None;
    }
    // One minimum for every input: a budget the builder refuses is not
    // taken here either (the caller's builder then says what it needs).
    let total = budget.total();
    if total < crate::Builder::minimum_budget(shape, dtype, opts) {
        return None;
    }
    let n = contributions;
    // The bucket counts, and (for a matrix) as many bucket places per worker.
    let counts_fit = |buckets: u64| buckets.saturating_mul(4) <= total / 4;
    let major = opts.layout.major_dim();
    let (scheme, buckets) = if shape.len() == 2 && counts_fit(shape[major]) {
        (Scheme::Matrix { major }, shape[major])
    } else if opts.layout.is_compressed() {
        return None;
    } else {
        let layout = KeyLayout::new(shape);
        let total = layout.total_bits();
        if total > 64 {
            return None;
        }
        let bbits = total.min(PACKED_BUCKET_BITS);
        let split = total - bbits;
        let shifts = layout.shifts();
        let bits: Vec<u32> = shape.iter().map(|&e| bits_of(e)).collect();
        let bucket_dims = (0..shape.len())
            .take_while(|&d| bits[d] == 0 || shifts[d] + bits[d] > split)
            .count();
        (
            Scheme::Packed {
                layout,
                split,
                bucket_dims,
            },
            1u64 << bbits,
        )
    };
    let threads = if n < PARALLEL_MIN as u64 {
        1
    } else {
        opts.threads
    };
    let ranges = n.div_ceil(CHUNK as u64) * 16;
    budget.try_take("the bucket counts and chunk ranges", buckets * 4 + ranges)?;
    let hist_limit = budget.take_at_most(
        "the other counting threads' histograms",
        (total / 16).min(budget.left() / 4),
    );
    let free = budget.take_rest("the workers' scratch");
    let worker_bytes = free / threads as u64;
    // A worker must hold at least a few buckets' worth to make progress.
    if worker_bytes < 1 << 16 {
        return None;
    }
    Some(DirectPlan {
        shape: shape.to_vec(),
        dtype,
        layout: opts.layout,
        kind: CombinerKind::of(
            dtype.complex_part().unwrap_or(dtype),
            opts.duplicates,
            opts.exact_sums,
        ),
        drop_zeros: opts.drop_zeros,
        skip_negative: opts.skip_negative,
        non_finite: opts.non_finite,
        threads,
        contributions,
        scheme,
        buckets,
        worker_bytes,
        hist_limit,
        band_bytes: DEFAULT_BAND_BYTES,
        chunk: CHUNK,
        budget_parts: budget.parts().to_vec(),
    })
}

impl DirectPlan {
    /// Scratch per band, in bytes (default [`DEFAULT_BAND_BYTES`]; at most
    /// the budget's share per worker). Smaller bands mean more passes over
    /// the chunks they touch; tests use it to force many bands.
    pub fn with_band_bytes(mut self, bytes: u64) -> DirectPlan {
        self.band_bytes = bytes.max(1);
        self
    }

    /// Run on `threads` threads (at least 1) whatever the input size
    /// (the plan runs inputs below 65536 contributions on one).
    pub fn with_threads(mut self, threads: usize) -> DirectPlan {
        let total = self.threads as u64 * self.worker_bytes;
        self.threads = threads.max(1);
        self.worker_bytes = total / self.threads as u64;
        self
    }

    /// Contributions per chunk of the counting pass (default 4096): the
    /// granularity at which bands skip the input. Tests make it tiny.
    pub fn with_chunk(mut self, chunk: usize) -> DirectPlan {
        self.chunk = chunk.max(1);
        self
    }

    /// Threads the assembly runs on.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Upper bound of the working memory, in bytes (the result aside).
    pub fn working_bytes(&self) -> u64 {
        self.buckets * 4
            + self.contributions.div_ceil(self.chunk as u64) * 16
            + self.hist_limit
            + self.threads as u64 * self.worker_bytes
    }

    /// Assemble `values` at the coordinates `indices` (one array per
    /// dimension, each as long as `values`) into vectors of element type
    /// `O` (which must be the plan's dtype) and index type `J`.
    ///
    /// Errors are the builder's for the same contributions: the first
    /// contribution (in array order) a push would refuse, named by its
    /// position (a negative index: `InvalidArgument`), then the first
    /// coordinate (in storage order) whose contributions do not combine
    /// (a duplicate under `error`, an integer overflow). `Ok(None)`: a
    /// bucket holds more contributions than the budget allows a worker,
    /// or `skip_negative` is set, an index is negative and the tensor is
    /// not a matrix (the builder's signed pushes skip those), so use the
    /// builder. Setting `stop` makes
    /// the call return `Error::Poisoned` soon after.
    pub fn assemble<I, V, O, J>(
        &self,
        indices: &[&[I]],
        values: &[V],
        stop: Option<&AtomicBool>,
    ) -> Result<Option<Assembled<O, J>>>
    where
        I: IndexElem,
        V: DirectValue,
        O: OutValue,
        J: OutIndex,
    {
        self.assemble_cols(I::cols(indices), values, stop)
    }

    /// [`DirectPlan::assemble`] of index arrays of any type.
    fn assemble_cols<V, O, J>(
        &self,
        indices: Cols<'_>,
        values: &[V],
        stop: Option<&AtomicBool>,
    ) -> Result<Option<Assembled<O, J>>>
    where
        V: DirectValue,
        O: OutValue,
        J: OutIndex,
    {
        self.check_args::<O, J>(indices.rank(), values.len())?;
        self.check_lengths(indices, values.len())?;
        if self.declines(indices) {
            return Ok(None);
        }
        if self.kind == CombinerKind::FloatSum && self.dtype == DType::F64 {
            // The hot case: exact f64 sums, through the fast exact reducer.
            let red = ExactF64 {
                general: RawReduce {
                    comb: &FloatSum(DType::F64),
                    drop_zeros: self.drop_zeros,
                },
            };
            let r = match V::as_f64s(values) {
                Some(v) if self.non_finite == NonFinitePolicy::Keep => {
                    self.with_input(indices, v, F64Bits, &red, stop)
                }
                _ => {
                    let src = Checked {
                        dtype: self.dtype,
                        policy: self.non_finite,
                    };
                    self.with_input(indices, values, src, &red, stop)
                }
            };
            return self.outcome(r, indices, values);
        }
        let r = with_combiner!(self.kind, self.dtype, comb => {
            let red = RawReduce {
                comb: &comb,
                drop_zeros: self.drop_zeros,
            };
            match V::as_f64s(values) {
                Some(v) if self.dtype.is_float() && self.non_finite == NonFinitePolicy::Keep => {
                    self.with_input(indices, v, F64Bits, &red, stop)
                }
                _ => {
                    let src = Checked { dtype: self.dtype, policy: self.non_finite };
                    self.with_input(indices, values, src, &red, stop)
                }
            }
        });
        self.outcome(r, indices, values)
    }

    /// [`DirectPlan::assemble`] for a complex tensor: each value (complex
    /// or real, as a push takes it) travels as its two parts in one lane,
    /// and each part of a coordinate is reduced on its own by the
    /// builder's combiner of the part type, as the builder does; the
    /// result is bit for bit the builder's.
    pub fn assemble_complex<I, V, O, J>(
        &self,
        indices: &[&[I]],
        values: &[V],
        stop: Option<&AtomicBool>,
    ) -> Result<Option<Assembled<O, J>>>
    where
        I: IndexElem,
        V: DirectValue,
        O: ComplexOut,
        J: OutIndex,
    {
        self.assemble_complex_cols(I::cols(indices), values, stop)
    }

    /// [`DirectPlan::assemble_complex`] of index arrays of any type.
    fn assemble_complex_cols<V, O, J>(
        &self,
        indices: Cols<'_>,
        values: &[V],
        stop: Option<&AtomicBool>,
    ) -> Result<Option<Assembled<O, J>>>
    where
        V: DirectValue,
        O: ComplexOut,
        J: OutIndex,
    {
        self.check_args::<O, J>(indices.rank(), values.len())?;
        self.check_lengths(indices, values.len())?;
        let Some(part) = self.dtype.complex_part() else {
            return Err(Error::InvalidArgument(format!(
                "a complex assembly into a {} tensor",
                self.dtype.name()
            )));
        };
        if self.declines(indices) {
            return Ok(None);
        }
        macro_rules! with_source {
            ($red:expr) => {
                match V::as_c128s(values) {
                    Some(v) if part == DType::F64 && self.non_finite == NonFinitePolicy::Keep => {
                        self.with_input(indices, v, C128Bits, $red, stop)
                    }
                    _ => {
                        let src = ComplexChecked {
                            part,
                            policy: self.non_finite,
                        };
                        self.with_input(indices, values, src, $red, stop)
                    }
                }
            };
        }
        let r = if self.kind == CombinerKind::FloatSum && part == DType::F64 {
            // The hot case: exact complex128 sums, folded online.
            let general = lane::ComplexReduce {
                comb: &FloatSum(DType::F64),
                drop_zeros: self.drop_zeros,
                exact_f64: true,
            };
            with_source!(&lane::ComplexExactF64 { general })
        } else {
            with_combiner!(self.kind, part, comb => {
                let red = lane::ComplexReduce { comb: &comb, drop_zeros: self.drop_zeros, exact_f64: false };
                with_source!(&red)
            })
        };
        self.outcome(r, indices, values)
    }

    /// Every index array as long as the values.
    fn check_lengths(&self, indices: Cols<'_>, n: usize) -> Result<()> {
        match (0..indices.rank()).find(|&d| indices.len_of(d) != n) {
            Some(d) => Err(Error::InvalidArgument(format!(
                "index array {d} has {} entries, the values {n}",
                indices.len_of(d),
            ))),
            None => Ok(()),
        }
    }

    /// The result, or the error a failure stands for.
    fn outcome<V: DirectValue, O, J>(
        &self,
        r: Result<Option<Assembled<O, J>>, Failure>,
        indices: Cols<'_>,
        values: &[V],
    ) -> Result<Option<Assembled<O, J>>> {
        match r {
            Ok(x) => Ok(x),
            Err(Failure::Fault(Fault::BadInput)) => Err(self.first_bad(indices, values)),
            Err(Failure::Combine { coordinate, why }) => {
                // A refused contribution anywhere is reported first, as a
                // push would have refused it before any combining.
                match self.try_first_bad(indices, values) {
                    Some(e) => Err(e),
                    None => Err(match why {
                        CombineError::Duplicate => Error::DuplicateCoordinate { coordinate },
                        CombineError::Overflow => Error::IntegerOverflow {
                            coordinate,
                            dtype: self.dtype.name(),
                        },
                    }),
                }
            }
            Err(f) => Err(self.failure_error(f)),
        }
    }

    /// The error a failure that is not the input's stands for (a stop, a
    /// refused allocation, a panic, a sink's failure).
    fn failure_error(&self, f: Failure) -> Error {
        match f {
            Failure::Fault(Fault::Stopped) => Error::Stopped,
            Failure::Fault(Fault::OutOfMemory) => Error::OutOfMemory {
                what: "the in-memory assembly's buffers",
                bytes: self.working_bytes(),
            },
            Failure::Fault(Fault::Panicked) => {
                Error::Poisoned("in-memory assembly (a worker thread panicked)")
            }
            Failure::Fault(Fault::Output) => {
                Error::Poisoned("in-memory assembly (its sink failed without an error)")
            }
            Failure::Alloc(e) => e,
            Failure::Fault(Fault::BadInput) | Failure::Combine { .. } => {
                Error::Poisoned("in-memory assembly (an input error without its report)")
            }
        }
    }

    /// The argument checks that need no pass over the data.
    fn check_args<O: crate::element::Element, J: OutIndex>(
        &self,
        rank: usize,
        n: usize,
    ) -> Result<()> {
        if rank != self.shape.len() {
            return Err(Error::InvalidArgument(format!(
                "{rank} index arrays for a rank-{} tensor",
                self.shape.len()
            )));
        }
        if n as u64 != self.contributions {
            return Err(Error::InvalidArgument(format!(
                "{n} contributions, the plan was made for {}",
                self.contributions
            )));
        }
        if O::DTYPE != self.dtype {
            return Err(Error::InvalidArgument(format!(
                "result values of type {}, the tensor holds {}",
                O::DTYPE.name(),
                self.dtype.name()
            )));
        }
        // Indices below the extents, pointers up to nnz <= n.
        let need = self
            .shape
            .iter()
            .map(|&e| e.saturating_sub(1))
            .max()
            .unwrap_or(0)
            .max(n as u64);
        if need > J::MAX {
            return Err(Error::InvalidArgument(format!(
                "an index type whose largest value is {} cannot hold {need}",
                J::MAX
            )));
        }
        Ok(())
    }

    fn with_input<V, S, R, O, J>(
        &self,
        indices: Cols<'_>,
        values: &[V],
        source: S,
        red: &R,
        stop: Option<&AtomicBool>,
    ) -> Result<Option<Assembled<O, J>>, Failure>
    where
        V: Copy + Sync,
        S: Source<V>,
        R: lane::Reduce<S::L>,
        O: crate::element::Element + lane::FromLane<S::L>,
        J: OutIndex,
    {
        match self.array_input(indices, values, source) {
            ArrayInput::Matrix(input) => {
                let form = if self.layout.is_compressed() {
                    FormKind::Compressed
                } else {
                    FormKind::CooMatrix
                };
                if bits_of(input.minor_extent) <= 32 {
                    self.run::<_, _, u32, O, J>(&input, red, form, stop)
                } else {
                    self.run::<_, _, u64, O, J>(&input, red, form, stop)
                }
            }
            ArrayInput::Packed(input) => {
                self.run::<_, _, u64, O, J>(&input, red, FormKind::CooPacked, stop)
            }
        }
    }

    /// The caller's arrays as the kernel reads them under this plan's
    /// scheme.
    fn array_input<'a, V, S>(
        &'a self,
        indices: Cols<'a>,
        values: &'a [V],
        source: S,
    ) -> ArrayInput<'a, V, S> {
        match &self.scheme {
            Scheme::Matrix { major } => {
                let minor = 1 - major;
                ArrayInput::Matrix(Matrix {
                    cols: indices,
                    major: *major,
                    values,
                    major_extent: self.shape[*major],
                    minor_extent: self.shape[minor],
                    source,
                    skip_negative: self.skip_negative,
                })
            }
            Scheme::Packed {
                layout,
                split,
                bucket_dims,
            } => ArrayInput::Packed(Packed {
                cols: indices,
                values,
                shape: &self.shape,
                shifts: layout.shifts(),
                split: *split,
                bucket_dims: *bucket_dims,
                source,
            }),
        }
    }

    /// Count, cut into bands, run them into fresh result vectors.
    fn run<In, R, M, O, J>(
        &self,
        input: &In,
        red: &R,
        form: FormKind,
        stop: Option<&AtomicBool>,
    ) -> Result<Option<Assembled<O, J>>, Failure>
    where
        In: Input,
        R: lane::Reduce<In::L>,
        M: Minor,
        O: crate::element::Element + lane::FromLane<In::L>,
        J: OutIndex,
    {
        let Some((counts, bands)) = self.bands::<In, M>(input, stop)? else {
            return Ok(None);
        };
        let threads = self.threads;
        let mut r = self.fill_result(input.len(), form, &mut |sink| {
            band::run::<In, R, M>(input, red, &counts, &bands, threads, sink, stop)
        })?;
        r.skipped_negative = input.len() as u64 - counts.kept();
        Ok(Some(r))
    }

    /// Fresh result vectors for `n` contributions in `form`, filled by
    /// `bands` through a sink: generic over the result's types only, as
    /// the band workers are over the input's and the reducer's.
    fn fill_result<M, L, O, J>(
        &self,
        n: usize,
        form: FormKind,
        bands: &mut RunBands<'_, M, L>,
    ) -> Result<Assembled<O, J>, Failure>
    where
        M: Minor,
        L: lane::Lane,
        O: crate::element::Element + lane::FromLane<L>,
        J: OutIndex,
    {
        let rank = self.shape.len();
        let mut values: Vec<O> = room(n, "the result's values")?;
        let mut idx: Vec<J> = room(
            if form == FormKind::Compressed {
                n
            } else {
                n * rank
            },
            "the result's indices",
        )?;
        let mut ptr: Vec<J> = room(
            if form == FormKind::Compressed {
                self.buckets as usize + 1
            } else {
                0
            },
            "the result's pointers",
        )?;
        let bits: Vec<u32> = self.shape.iter().map(|&e| bits_of(e)).collect();
        let (shifts, split) = match &self.scheme {
            Scheme::Packed { layout, split, .. } => (layout.shifts().to_vec(), *split),
            Scheme::Matrix { .. } => (Vec::new(), 0),
        };
        let done = {
            let sink = Sink {
                values: Shared::new(&mut values),
                indices: Shared::new(&mut idx),
                form: match form {
                    FormKind::Compressed => Form::Compressed {
                        pointers: Shared::new(&mut ptr),
                    },
                    FormKind::CooMatrix => Form::CooMatrix,
                    FormKind::CooPacked => Form::CooPacked {
                        shifts: &shifts,
                        bits: &bits,
                        split,
                    },
                },
            };
            bands(&sink)
        };
        let done = match done {
            Ok(d) => d,
            Err(band::BandError::Fault(f)) => return Err(Failure::Fault(f)),
            Err(band::BandError::Failed(f)) => {
                let coordinate = self.coordinate(f.bucket, f.minor);
                return Err(Failure::Combine {
                    coordinate,
                    why: f.why,
                });
            }
        };
        // SAFETY: every band wrote its entries' values and indices at its
        // published offset, the offsets running from 0 to nnz without gaps,
        // and (CSR/CSC) every band wrote the pointers of its buckets, the
        // bands covering every bucket, and the first band pointer 0.
        unsafe {
            commit(&mut values, done.nnz);
            let per = if form == FormKind::Compressed {
                1
            } else {
                rank
            };
            commit(&mut idx, done.nnz * per);
            if form == FormKind::Compressed {
                commit(&mut ptr, self.buckets as usize + 1);
            }
        }
        Ok(Assembled {
            values,
            indices: idx,
            pointers: ptr,
            dropped_zeros: done.dropped,
            skipped_negative: 0,
        })
    }

    /// Whether the kernel leaves these arrays to the builder because
    /// `skip_negative` must skip some of them and the tensor is not a
    /// matrix: a matrix's passes skip them (FE codes mark removed dofs
    /// with -1), a packed key's do not, and one scan (only under the
    /// option) finds out.
    pub(crate) fn declines(&self, indices: Cols<'_>) -> bool {
        self.skip_negative && matches!(self.scheme, Scheme::Packed { .. }) && indices.any_negative()
    }

    /// Count the contributions and cut the buckets into bands; None when
    /// a bucket holds more than a worker's share of the budget.
    fn bands<In, M>(
        &self,
        input: &In,
        stop: Option<&AtomicBool>,
    ) -> Result<Option<(Counts, Bands)>, Failure>
    where
        In: Input,
        M: Minor,
    {
        let n = input.len();
        let counts = count::count(
            input,
            self.buckets,
            self.threads,
            self.chunk,
            self.hist_limit,
            stop,
        )?;
        // Bytes a worker holds per band entry (minor key and lane), per
        // bucket place, and per entry of its largest bucket (sort keys and
        // the gathered lanes).
        let lane = std::mem::size_of::<In::L>();
        let entry = (std::mem::size_of::<M>() + lane) as u64;
        let sort_entry = (std::mem::size_of::<M::Packed>() + lane) as u64;
        let max_bucket = counts.per_bucket.iter().copied().max().unwrap_or(0) as u64;
        let left = self
            .worker_bytes
            .checked_sub(max_bucket * sort_entry)
            .filter(|&l| l >= max_bucket * entry + 4);
        let Some(left) = left else {
            return Ok(None);
        };
        // At least two bands per thread, so that every thread has work.
        let even = if self.threads > 1 {
            (n as u64)
                .div_ceil(2 * self.threads as u64)
                .max(max_bucket)
                .max(1)
        } else {
            u64::MAX
        };
        // Input whose chunks span many bands reads those chunks once per
        // band: when the bands would read more than 1.5x the chunks, take
        // bands twice as large (FE input of a larger mesh: its chunks span
        // more buckets), then as large as the budget allows (random
        // coordinates: every chunk meets every band), fewer passes.
        let chunks = counts.ranges.len() as u64;
        let mut band_bytes = self.band_bytes.min(left);
        let mut bands: Bands = band::cut(&counts.per_bucket, entry, band_bytes, even)?;
        for larger in [self.band_bytes.saturating_mul(2).min(left), left] {
            let spread = bands
                .chunk_visits(&counts.ranges)
                .is_some_and(|v| v * 2 > chunks * 3);
            if !spread {
                break;
            }
            if larger <= band_bytes {
                continue;
            }
            band_bytes = larger;
            bands = band::cut(&counts.per_bucket, entry, band_bytes, even)?;
        }
        Ok(Some((counts, bands)))
    }

    /// The index tuple of (bucket, minor key).
    fn coordinate(&self, bucket: u64, minor: u64) -> Vec<u64> {
        match &self.scheme {
            Scheme::Matrix { major } => {
                let mut c = vec![0u64; 2];
                c[*major] = bucket;
                c[1 - major] = minor;
                c
            }
            Scheme::Packed { layout, split, .. } => {
                let mut c = vec![0u64; self.shape.len()];
                layout.unpack(&((bucket << split) | minor), &mut c);
                c
            }
        }
    }

    /// The error a push of the first refused contribution gives; an
    /// `InvalidArgument` when none is refused (the arrays changed while
    /// they were read).
    fn first_bad<V: DirectValue>(&self, indices: Cols<'_>, values: &[V]) -> Error {
        self.try_first_bad(indices, values).unwrap_or_else(|| {
            Error::InvalidArgument(
                "the index or value arrays changed while they were assembled".into(),
            )
        })
    }

    /// The error of the first contribution a push would refuse, if any:
    /// its indices in dimension order (a negative one, or one beyond its
    /// extent), then its value.
    fn try_first_bad<V: DirectValue>(&self, indices: Cols<'_>, values: &[V]) -> Option<Error> {
        for (i, &v) in values.iter().enumerate() {
            if self.skip_negative && (0..self.shape.len()).any(|d| indices.get(d, i).1) {
                // Skipped, as the builder's signed pushes skip it.
                continue;
            }
            for (d, &extent) in self.shape.iter().enumerate() {
                let (x, negative) = indices.get(d, i);
                if negative || x >= extent {
                    let signed = if negative {
                        x as i64 as i128
                    } else {
                        x as i128
                    };
                    return Some(Error::bad_index(i as u64, d, signed, extent));
                }
            }
            if let Some(e) = value_refusal(v, self.dtype, self.non_finite, i as u64) {
                return Some(e);
            }
        }
        None
    }
}

/// The caller's arrays as one of the kernel's inputs.
enum ArrayInput<'a, V, S> {
    Matrix(Matrix<'a, V, S>),
    Packed(Packed<'a, V, S>),
}

/// The result layout, before its vectors exist.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FormKind {
    Compressed,
    CooMatrix,
    CooPacked,
}

/// What fills the bands of a result through its sink (`band::run` over
/// one input and reducer).
type RunBands<'a, M, L> =
    dyn FnMut(&dyn BandSink<M, L>) -> Result<band::Done, band::BandError> + 'a;

/// Why `run` failed, before it becomes an [`Error`].
enum Failure {
    Fault(Fault),
    Combine {
        coordinate: Vec<u64>,
        why: CombineError,
    },
    Alloc(Error),
}

impl From<Fault> for Failure {
    fn from(f: Fault) -> Failure {
        Failure::Fault(f)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Alloc(e)
    }
}

/// Assemble a matrix given as `(values, (rows, cols))`, as
/// `scipy.sparse.coo_array((values, (rows, cols)), shape)` then `tocsr()`
/// (or `tocsc()`, or a sorted COO, after `opts.layout`) would, but with
/// the builder's duplicate policies and exact sums: [`assemble_in_memory`]
/// for a matrix (the kernel when the work fits the budget, out of core
/// otherwise).
pub fn assemble_matrix<I, V, O, J>(
    shape: [u64; 2],
    rows: &[I],
    cols: &[I],
    values: &[V],
    opts: &AssembleOptions,
    stop: Option<&AtomicBool>,
) -> Result<Assembled<O, J>>
where
    I: IndexElem,
    V: DirectValue,
    O: OutValue,
    J: OutIndex,
{
    assemble_in_memory(&shape, O::DTYPE, &[rows, cols], values, opts, stop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bands of a 1100 x 1000 matrix of 40 000 contributions whose row is
    /// `row(i)`: chunks of 400 contributions, default bands of about 4 000
    /// (100 rows of 40).
    fn bands_of(row: impl Fn(usize) -> u32) -> usize {
        let n = 40_000;
        let rows: Vec<u32> = (0..n).map(&row).collect();
        let cols: Vec<u32> = (0..n).map(|i| (i % 1000) as u32).collect();
        let vals = vec![1.0f64; n];
        let p = plan(
            &[1100, 1000],
            DType::F64,
            n as u64,
            &AssembleOptions::default(),
        )
        .expect("fits")
        .with_threads(1)
        .with_chunk(400)
        .with_band_bytes(100 * (40 * 12 + 4));
        let arrays = [&rows[..], &cols[..]];
        let input = Matrix {
            cols: Cols::U32(&arrays),
            major: 0,
            values: &vals,
            major_extent: 1100,
            minor_extent: 1000,
            source: F64Bits,
            skip_negative: false,
        };
        let Ok(Some((_, bands))) = p.bands::<_, u32>(&input, None) else {
            panic!("no bands");
        };
        bands.len()
    }

    #[test]
    fn bands_grow_only_as_far_as_the_chunks_spread() {
        // In order: each chunk spans 10 rows; the default bands (the last
        // one holding the empty rows).
        assert_eq!(bands_of(|i| (i / 40) as u32), 11);
        // Each chunk spans 80 rows: 100-row bands would read 1.8x the
        // chunks, bands twice as large 1.4x.
        assert_eq!(bands_of(|i| (i / 40 + (i % 8) * 10) as u32), 6);
        // Every chunk spans every row: one band, as large as the budget allows.
        assert_eq!(bands_of(|i| ((i * 7919) % 1000) as u32), 1);
    }
}
