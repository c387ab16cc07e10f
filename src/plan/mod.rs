//! Assemble again with a known pattern (issue 24): plan once from the
//! coordinates, then refill with new values every Newton or time step.
//!
//! A [`Plan`] holds the output structure (CSR/CSC pointers and minor
//! indices, or COO index tuples) and, for every entry in storage order,
//! the positions of its contributions in the caller's arrays (`order`,
//! cut by `starts`). A refill gathers each entry's values by those
//! positions and reduces them with the reducers of the in-memory kernel
//! (`assemble::direct`), in array order, so a refilled result is bit for
//! bit what a full assembly of the same contributions gives, exact sums
//! included, whatever the thread count.
//!
//! ```
//! use coo_assembler::{AssembleOptions, DType, options::OutputLayout, Plan};
//!
//! let rows: [u32; 4] = [0, 1, 0, 1];
//! let cols: [u32; 4] = [0, 1, 0, 0];
//! let opts = AssembleOptions { layout: OutputLayout::Csr, ..Default::default() };
//! let plan = Plan::new(&[&rows[..], &cols[..]], &[2, 2], DType::F64, &opts, None)?;
//! assert_eq!(plan.nnz(), 3);
//! let mut k = vec![0.0f64; plan.nnz()];
//! plan.assemble_into(&[1.0, 2.0, 0.5, 3.0], &mut k, None)?;
//! assert_eq!(k, [1.5, 3.0, 2.0]); // (0,0), (1,0), (1,1)
//! plan.assemble_into(&[1.0, 1.0, 1.0, 1.0], &mut k, None)?;
//! assert_eq!(k, [2.0, 1.0, 1.0]);
//! # Ok::<(), coo_assembler::Error>(())
//! ```

mod file;
mod fill;
mod lanes;
mod parted;
mod pattern;
mod push;
mod store;
pub use file::{RefillSummary, refill_plan_file};
pub use parted::{PlanFile, PlanFileSummary};
pub use push::Refill;
pub use store::{PARTED_VERSION, PLAN_VERSION};

use crate::assemble::combine::{CombineError, CombinerKind, FloatSum, with_combiner};
use crate::assemble::direct::input::{C128Bits, Checked, ComplexChecked, F64Bits, Source};
use crate::assemble::direct::lane::{
    ComplexExactF64, ComplexReduce, ExactF64, RawReduce, raw_to_value,
};
use crate::assemble::direct::{Assembled, ComplexOut, DirectValue, IndexElem, OutIndex, OutValue};
use crate::budget::Budget;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::options::{AssembleOptions, DuplicatePolicy, NonFinitePolicy, OutputLayout};
use fill::{Stop, Values};
use std::sync::OnceLock;
use std::sync::atomic::AtomicBool;

/// An index array of the structure, as narrow as its values allow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Ix {
    U32(Vec<u32>),
    U64(Vec<u64>),
}

impl Ix {
    fn len(&self) -> usize {
        match self {
            Ix::U32(v) => v.len(),
            Ix::U64(v) => v.len(),
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            Ix::U32(v) => v.len() as u64 * 4,
            Ix::U64(v) => v.len() as u64 * 8,
        }
    }

    /// Element `i` widened (0 past the end).
    fn get(&self, i: usize) -> u64 {
        match self {
            Ix::U32(v) => v.get(i).map_or(0, |&x| x as u64),
            Ix::U64(v) => v.get(i).copied().unwrap_or(0),
        }
    }

    fn max(&self) -> u64 {
        match self {
            Ix::U32(v) => v.iter().copied().max().unwrap_or(0) as u64,
            Ix::U64(v) => v.iter().copied().max().unwrap_or(0),
        }
    }

    /// A copy in `J`; the caller has checked that every value fits.
    fn to_vec<J: OutIndex>(&self, what: &'static str) -> Result<Vec<J>> {
        let mut out = Vec::new();
        out.try_reserve_exact(self.len())
            .map_err(|_| Error::OutOfMemory {
                what,
                bytes: self.len() as u64 * std::mem::size_of::<J>() as u64,
            })?;
        match self {
            Ix::U32(v) => out.extend(v.iter().map(|&x| J::from_u64(x as u64))),
            Ix::U64(v) => out.extend(v.iter().map(|&x| J::from_u64(x))),
        }
        Ok(out)
    }
}

/// The output structure of a plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Structure {
    /// CSR / CSC: the minor index of every entry. COO: `rank` indices per
    /// entry, row-major.
    pub(crate) indices: Ix,
    /// CSR / CSC: major extent + 1 offsets. COO: empty.
    pub(crate) pointers: Ix,
}

/// The pattern of an assembly, computed once from its coordinates: the
/// output structure and where every contribution goes. See the
/// [module docs](self).
///
/// A plan is immutable and `Sync`: refills from several threads at once
/// are safe (each into its own result).
#[derive(Clone, Debug)]
pub struct Plan {
    shape: Vec<u64>,
    dtype: DType,
    layout: OutputLayout,
    kind: CombinerKind,
    duplicates: DuplicatePolicy,
    exact_sums: bool,
    non_finite: NonFinitePolicy,
    threads: usize,
    /// Values a refill takes: one per contribution, those skipped
    /// (`skip_negative`) included, which have no position in `order`.
    contributions: usize,
    order: Vec<u32>,
    starts: Vec<u32>,
    /// Each contribution's entry ([`NO_ENTRY`] for one skipped), made at
    /// the first refill that scatters ([`Plan::scatters`]).
    slots: OnceLock<Vec<u32>>,
    structure: Structure,
    digest: u64,
}

/// The slot of a contribution that has no entry (skipped).
const NO_ENTRY: u32 = u32::MAX;

impl Plan {
    /// Plan contributions at the coordinates `indices` (one array per
    /// dimension, all as long) into a tensor of `shape` and `dtype`, with
    /// `opts`' layout, duplicate and non-finite policies, thread count
    /// and memory budget. Setting `stop` makes the call return
    /// `Error::Poisoned` soon after.
    ///
    /// Under `skip_negative` a contribution with a negative index has no
    /// place in the plan: a refill still takes one value per contribution
    /// and ignores it, as an assembly skips it.
    ///
    /// Errors: a negative (without `skip_negative`) or out-of-range index
    /// (the first in array order, as a push names it), a duplicate
    /// coordinate under `duplicates = error`, `drop_zeros` (it changes the
    /// pattern with the values, so a plan keeps explicit zeros), and a
    /// plan that needs more memory than the budget (`BudgetTooSmall`, with
    /// what it needs).
    pub fn new<I: IndexElem>(
        indices: &[&[I]],
        shape: &[u64],
        dtype: DType,
        opts: &AssembleOptions,
        stop: Option<&AtomicBool>,
    ) -> Result<Plan> {
        check_arrays(indices, shape)?;
        Self::build(&pattern::Arrays { dims: indices }, shape, dtype, opts, stop)
    }

    /// Plan element matrices: `dofs` holds `per_element` degrees of
    /// freedom per element, and element `e` contributes `per_element^2`
    /// values, row-major, at `(dofs[e * p + a], dofs[e * p + b])`: the
    /// contributions `Builder::push_element` makes, in that order.
    pub fn for_elements<I: IndexElem>(
        dofs: &[I],
        per_element: usize,
        shape: [u64; 2],
        dtype: DType,
        opts: &AssembleOptions,
        stop: Option<&AtomicBool>,
    ) -> Result<Plan> {
        check_elements(dofs, per_element, shape, opts)?;
        let n = (dofs.len() / per_element) as u128 * (per_element as u128).pow(2);
        if n >= u32::MAX as u128 {
            return Err(Error::InvalidArgument(format!(
                "{n} contributions: a plan held in memory takes fewer than 2^32"
            )));
        }
        let c = pattern::Elements {
            dofs,
            per: per_element,
        };
        Self::build(&c, &shape, dtype, opts, stop)
    }

    /// The plan a builder recorded ([`Builder::record_plan`]), made in
    /// memory after its `finish`, with the builder's options: the plan
    /// [`Plan::new`] makes of the same coordinates, one value per
    /// contribution in the builder's order. The same refusals as
    /// [`Plan::new`]; a recording of 2^32 contributions or more is planned
    /// out of core instead ([`PlanFile::create_recorded`]).
    ///
    /// [`Builder::record_plan`]: crate::Builder::record_plan
    pub fn recorded(builder: &crate::Builder, stop: Option<&AtomicBool>) -> Result<Plan> {
        let (shape, dtype, opts) = (builder.shape(), builder.dtype(), builder.options());
        let Some(rec) = builder.recording()? else {
            let dims: Vec<&[u64]> = vec![&[]; shape.len()];
            return Self::new(&dims, shape, dtype, opts, stop);
        };
        if rec.contributions >= u64::from(u32::MAX) {
            return Err(Error::InvalidArgument(format!(
                "{} contributions: a plan held in memory takes fewer than 2^32; write it with \
                 PlanFile::create_recorded",
                rec.contributions
            )));
        }
        let m = parted::map_recording(opts, rec)?;
        Self::build(
            &parted::recorded_coords(&m, shape.len()),
            shape,
            dtype,
            opts,
            stop,
        )
    }

    fn build<C: pattern::Coords>(
        c: &C,
        shape: &[u64],
        dtype: DType,
        opts: &AssembleOptions,
        stop: Option<&AtomicBool>,
    ) -> Result<Plan> {
        opts.validate()?;
        crate::assemble::check_shape(opts, shape)?;
        check_plannable(dtype, opts, shape)?;
        let n = c.len() as u64;
        let mut budget = Budget::new(opts.memory_budget);
        budget.take(
            "planning in memory",
            pattern::planning_bytes(n, opts.threads),
        )?;
        if opts.layout.is_compressed() {
            let pointers = shape[opts.layout.major_dim()].saturating_add(1);
            budget.take("the plan's pointers", pointers.saturating_mul(8))?;
        }
        let p = pattern::plan(
            c,
            shape,
            opts.layout,
            opts.skip_negative,
            opts.threads,
            stop,
        )?;
        let kind = plan_kind(dtype, opts.duplicates, opts.exact_sums);
        if let (DuplicatePolicy::Error, Some(coordinate)) = (opts.duplicates, p.first_duplicate) {
            return Err(Error::DuplicateCoordinate { coordinate });
        }
        Ok(Plan {
            shape: shape.to_vec(),
            dtype,
            layout: opts.layout,
            kind,
            duplicates: opts.duplicates,
            exact_sums: opts.exact_sums,
            non_finite: opts.non_finite,
            threads: opts.threads,
            contributions: c.len(),
            order: p.order,
            starts: p.starts,
            slots: OnceLock::new(),
            structure: p.structure,
            digest: p.digest,
        })
    }

    /// The tensor's shape.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// The element type of the results.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The output layout.
    pub fn layout(&self) -> OutputLayout {
        self.layout
    }

    /// Contributions a refill takes.
    pub fn contributions(&self) -> usize {
        self.contributions
    }

    /// Entries of the result (explicit zeros included).
    pub fn nnz(&self) -> usize {
        self.starts.len().saturating_sub(1)
    }

    /// The digest of the coordinates (xxh3 over every index as 8
    /// little-endian bytes, contribution by contribution, per block of
    /// 65536 contributions, the blocks' digests folded in order; the same
    /// for every thread count and index type): plans of other coordinates
    /// differ.
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// Bytes the plan holds.
    pub fn memory_bytes(&self) -> u64 {
        let slots = self.slots.get().map_or(0, |s| s.len() as u64);
        (self.order.len() as u64 + self.starts.len() as u64 + slots) * 4
            + self.structure.indices.bytes()
            + self.structure.pointers.bytes()
    }

    /// Refill on `threads` threads (at least 1).
    pub fn with_threads(mut self, threads: usize) -> Plan {
        self.threads = threads.max(1);
        self
    }

    /// The structure's indices in `J`: CSR / CSC the minor index of every
    /// entry, COO `rank` indices per entry.
    pub fn indices<J: OutIndex>(&self) -> Result<Vec<J>> {
        self.check_index_type::<J>()?;
        self.structure.indices.to_vec("the plan's indices")
    }

    /// CSR / CSC: the `major extent + 1` entry offsets in `J`. COO: empty.
    pub fn pointers<J: OutIndex>(&self) -> Result<Vec<J>> {
        self.check_index_type::<J>()?;
        self.structure.pointers.to_vec("the plan's pointers")
    }

    fn check_index_type<J: OutIndex>(&self) -> Result<()> {
        let need = self
            .structure
            .indices
            .max()
            .max(self.structure.pointers.max());
        if need > J::MAX {
            return Err(Error::InvalidArgument(format!(
                "an index type whose largest value is {} cannot hold {need}",
                J::MAX
            )));
        }
        Ok(())
    }

    /// The result of `values` (one per contribution, in the order the
    /// coordinates were given) with the plan's structure.
    pub fn assemble<V, O, J>(
        &self,
        values: &[V],
        stop: Option<&AtomicBool>,
    ) -> Result<Assembled<O, J>>
    where
        V: DirectValue,
        O: OutValue,
        J: OutIndex,
    {
        let mut out = Vec::new();
        out.try_reserve_exact(self.nnz())
            .map_err(|_| Error::OutOfMemory {
                what: "the result's values",
                bytes: self.nnz() as u64 * std::mem::size_of::<O>() as u64,
            })?;
        out.resize(self.nnz(), bytemuck::Zeroable::zeroed());
        self.assemble_into(values, &mut out, stop)?;
        Ok(Assembled {
            values: out,
            indices: self.indices()?,
            pointers: self.pointers()?,
            dropped_zeros: 0,
            skipped_negative: 0,
        })
    }

    /// Refill `out` (one value per entry, storage order) with the
    /// assembly of `values`: bit for bit the values a full assembly of the
    /// same contributions stores. Nothing is allocated beyond a few
    /// values per thread.
    ///
    /// Errors: `values` or `out` of the wrong length or element type
    /// (`InvalidArgument`, saying which), the first value in array order a
    /// push would refuse (the non-finite policy, an integer that does not
    /// fit), then the first entry in storage order that does not combine
    /// (an integer overflow). On an error `out` holds partial values.
    pub fn assemble_into<V, O>(
        &self,
        values: &[V],
        out: &mut [O],
        stop: Option<&AtomicBool>,
    ) -> Result<()>
    where
        V: DirectValue,
        O: OutValue,
    {
        self.assemble_values_into(Values::one(values), out, stop)
    }

    /// [`Plan::assemble_into`] of values that lie in two slices, `head`
    /// then `tail`, as if laid end to end (contribution `k` is `head[k]`,
    /// then `tail[k - head.len()]`): for a caller that would otherwise copy
    /// them into one (a rank's own values beside those other ranks sent).
    pub fn assemble_split_into<V, O>(
        &self,
        head: &[V],
        tail: &[V],
        out: &mut [O],
        stop: Option<&AtomicBool>,
    ) -> Result<()>
    where
        V: DirectValue,
        O: OutValue,
    {
        self.assemble_values_into(Values { head, tail }, out, stop)
    }

    fn assemble_values_into<V, O>(
        &self,
        values: Values<'_, V>,
        out: &mut [O],
        stop: Option<&AtomicBool>,
    ) -> Result<()>
    where
        V: DirectValue,
        O: OutValue,
    {
        self.check_refill::<O>(values.len(), out.len())?;
        if let (true, Some(v), Ok(out)) = (
            self.scatters(),
            values.cast(V::as_f64s),
            bytemuck::try_cast_slice_mut::<O, f64>(out),
        ) {
            let r = fill::scatter_f64(v, self.slots()?, out, stop);
            return self.refill_outcome(r, || {
                fill::first_bad_value(values, self.dtype, self.non_finite)
            });
        }
        let r = reduce_slices(&self.how(), values, &self.order, &self.starts, out, stop);
        self.refill_outcome(r, || {
            fill::first_bad_value(values, self.dtype, self.non_finite)
        })
    }

    /// [`Plan::assemble_into`] for a complex plan: each part of an entry
    /// reduced on its own, as a full assembly reduces it.
    pub fn assemble_complex_into<V, O>(
        &self,
        values: &[V],
        out: &mut [O],
        stop: Option<&AtomicBool>,
    ) -> Result<()>
    where
        V: DirectValue,
        O: ComplexOut,
    {
        self.check_refill::<O>(values.len(), out.len())?;
        let values = Values::one(values);
        let r = reduce_slices_complex(&self.how(), values, &self.order, &self.starts, out, stop);
        self.refill_outcome(r, || {
            fill::first_bad_value(values, self.dtype, self.non_finite)
        })
    }

    /// [`Plan::assemble_into`] of values given as lanes, each already
    /// checked ([`lanes::Lanes`]).
    pub(crate) fn assemble_lanes_into<O: OutValue>(
        &self,
        lanes: &[u64],
        out: &mut [O],
    ) -> Result<()> {
        self.check_refill::<O>(lanes.len(), out.len())?;
        let r = reduce_lanes(&self.how(), lanes, &self.order, &self.starts, out, None);
        self.refill_outcome(r, lanes::changed)
    }

    /// [`Plan::assemble_complex_into`] of values given as lanes.
    pub(crate) fn assemble_complex_lanes_into<O: ComplexOut>(
        &self,
        lanes: &[[u64; 2]],
        out: &mut [O],
    ) -> Result<()> {
        self.check_refill::<O>(lanes.len(), out.len())?;
        let r = reduce_lanes_complex(&self.how(), lanes, &self.order, &self.starts, out, None);
        self.refill_outcome(r, lanes::changed)
    }

    /// [`Plan::assemble`] for a complex plan.
    pub fn assemble_complex<V, O, J>(
        &self,
        values: &[V],
        stop: Option<&AtomicBool>,
    ) -> Result<Assembled<O, J>>
    where
        V: DirectValue,
        O: ComplexOut + Default,
        J: OutIndex,
    {
        let mut out =
            crate::assemble::direct::out::filled(self.nnz(), O::default(), "the result's values")?;
        self.assemble_complex_into(values, &mut out, stop)?;
        Ok(Assembled {
            values: out,
            indices: self.indices()?,
            pointers: self.pointers()?,
            dropped_zeros: 0,
            skipped_negative: 0,
        })
    }

    /// [`Plan::assemble_into`] for a bool plan whose values and result are
    /// Rust `bool`s (a NumPy bool array, say) rather than [`crate::element::Bit`]s:
    /// `out` is refilled in place, nothing allocated.
    pub fn assemble_bools_into(
        &self,
        values: &[bool],
        out: &mut [bool],
        stop: Option<&AtomicBool>,
    ) -> Result<()> {
        // SAFETY: `Bit` is a `repr(transparent)` u8 and `bool` a byte of 0
        // or 1, so the slice has the layout of `[Bit]`; a refill writes
        // only `Bit::from_lane` values, which are 0 or 1 (`OutValue for
        // Bit`), so every byte stays a valid bool, on an error too.
        let bits: &mut [crate::element::Bit] =
            unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast(), out.len()) };
        self.assemble_into(values, bits, stop)
    }

    /// The argument checks of a refill of `n` values into `out` values of
    /// `O`.
    fn check_refill<O: crate::element::Element>(&self, n: usize, out: usize) -> Result<()> {
        let values_len = n;
        if values_len != self.contributions {
            return Err(Error::InvalidArgument(format!(
                "{values_len} values for a plan of {} contributions",
                self.contributions
            )));
        }
        if out != self.nnz() {
            return Err(Error::InvalidArgument(format!(
                "a result of {out} values for a plan of {} entries",
                self.nnz()
            )));
        }
        if O::DTYPE != self.dtype {
            return Err(Error::InvalidArgument(format!(
                "result values of type {}, the plan's tensor holds {}",
                O::DTYPE.name(),
                self.dtype.name()
            )));
        }
        Ok(())
    }

    /// The error a refill's stop stands for.
    fn refill_outcome(
        &self,
        r: std::result::Result<(), Stop>,
        bad_value: impl FnOnce() -> Error,
    ) -> Result<()> {
        match r {
            Ok(()) => Ok(()),
            Err(Stop::BadValue) => Err(bad_value()),
            Err(Stop::Combine { entry, why }) => {
                let coordinate = self.coordinate(entry);
                Err(match why {
                    CombineError::Duplicate => Error::DuplicateCoordinate { coordinate },
                    CombineError::Overflow => Error::IntegerOverflow {
                        coordinate,
                        dtype: self.dtype.name(),
                    },
                })
            }
            Err(Stop::Stopped) => Err(Error::Poisoned("refill (stopped by its caller)")),
            Err(Stop::Dropped) => Err(Error::Poisoned("refill (an entry without contributions)")),
            Err(Stop::OutOfMemory { bytes }) => Err(Error::OutOfMemory {
                what: "the refill's lanes",
                bytes,
            }),
        }
    }

    /// Whether a refill scatters each value to its entry in array order
    /// (f64 sums in arrival order, every value kept, one thread: the sums
    /// a full assembly computes, at the speed of the arrays' own order;
    /// FE values lie element by element, so their entries are near one
    /// another while the gather of [`fill::sum_f64`] jumps between
    /// elements) rather than gather each entry's values.
    fn scatters(&self) -> bool {
        self.kind == CombinerKind::FloatFastSum
            && self.dtype == DType::F64
            && self.non_finite == NonFinitePolicy::Keep
            && self.threads == 1
    }

    /// Each contribution's entry, made once (4 bytes per contribution).
    fn slots(&self) -> Result<&[u32]> {
        if let Some(s) = self.slots.get() {
            return Ok(s);
        }
        let mut slots = Vec::new();
        slots
            .try_reserve_exact(self.contributions)
            .map_err(|_| Error::OutOfMemory {
                what: "the plan's slots",
                bytes: self.contributions as u64 * 4,
            })?;
        slots.resize(self.contributions, NO_ENTRY);
        for (e, w) in self.starts.windows(2).enumerate() {
            for &k in self.order.get(w[0] as usize..w[1] as usize).unwrap_or(&[]) {
                if let Some(s) = slots.get_mut(k as usize) {
                    *s = e as u32;
                }
            }
        }
        Ok(self.slots.get_or_init(|| slots))
    }

    /// How this plan's values combine.
    fn how(&self) -> How {
        How {
            kind: self.kind,
            dtype: self.dtype,
            non_finite: self.non_finite,
            threads: self.threads,
        }
    }

    /// The index tuple of entry `e`.
    fn coordinate(&self, e: usize) -> Vec<u64> {
        let get = |ix: &Ix, i: usize| ix.get(i);
        if self.layout.is_compressed() {
            let minor = get(&self.structure.indices, e);
            let ptr = &self.structure.pointers;
            // The last row whose start is at or before e.
            let rows = ptr.len().saturating_sub(1);
            let (mut lo, mut hi) = (0usize, rows);
            while lo + 1 < hi {
                let mid = (lo + hi) / 2;
                if get(ptr, mid) as usize <= e {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let major = lo as u64;
            let mut c = vec![0u64; 2];
            c[self.layout.major_dim()] = major;
            c[1 - self.layout.major_dim()] = minor;
            c
        } else {
            let r = self.shape.len();
            (0..r)
                .map(|d| get(&self.structure.indices, e * r + d))
                .collect()
        }
    }
}

/// How a refill combines: what [`reduce_slices`] needs of a plan.
#[derive(Clone, Copy, Debug)]
pub(crate) struct How {
    pub(crate) kind: CombinerKind,
    pub(crate) dtype: DType,
    pub(crate) non_finite: NonFinitePolicy,
    pub(crate) threads: usize,
}

/// Run `$body` with `$red` bound to the reducer of `how`'s real values
/// (the exact f64 sum for f64 sums).
macro_rules! with_real_reducer {
    ($how:expr, $red:ident => $body:expr) => {{
        let how: &How = $how;
        if how.kind == CombinerKind::FloatSum && how.dtype == DType::F64 {
            let $red = &ExactF64 {
                general: RawReduce {
                    comb: &FloatSum(DType::F64),
                    drop_zeros: false,
                },
            };
            $body
        } else {
            with_combiner!(how.kind, how.dtype, comb => {
                let $red = &RawReduce { comb: &comb, drop_zeros: false };
                $body
            })
        }
    }};
}

/// Run `$body` with `$red` bound to the reducer of `how`'s complex values
/// (each part by the combiner of the part type `$part`).
macro_rules! with_complex_reducer {
    ($how:expr, $part:expr, $red:ident => $body:expr) => {{
        let how: &How = $how;
        let part: DType = $part;
        if how.kind == CombinerKind::FloatSum && part == DType::F64 {
            let general = ComplexReduce {
                comb: &FloatSum(DType::F64),
                drop_zeros: false,
                exact_f64: true,
            };
            let $red = &ComplexExactF64 { general };
            $body
        } else {
            with_combiner!(how.kind, part, comb => {
                let $red = &ComplexReduce { comb: &comb, drop_zeros: false, exact_f64: false };
                $body
            })
        }
    }};
}

/// Reduce every entry of `starts` (offsets into `order`, positions into
/// `values`) into `out` with `how`'s combiner, the exact f64 sum for f64
/// sums: the one refill kernel of in-memory plans.
pub(crate) fn reduce_slices<V, O>(
    how: &How,
    values: Values<'_, V>,
    order: &[u32],
    starts: &[u32],
    out: &mut [O],
    stop: Option<&AtomicBool>,
) -> std::result::Result<(), Stop>
where
    V: DirectValue,
    O: OutValue,
{
    real_out(how.dtype, out, |out| {
        if let (Some(sum), Some(v), DType::F64, NonFinitePolicy::Keep) = (
            fill::F64Sum::of(how.kind),
            values.cast(V::as_f64s),
            how.dtype,
            how.non_finite,
        ) {
            return fill::sum_f64(sum, v, order, starts, out, how.threads, stop);
        }
        with_real_reducer!(how, red => match values.cast(V::as_f64s) {
            Some(v) if how.dtype.is_float() && how.non_finite == NonFinitePolicy::Keep => {
                fill::fill(v, order, starts, out, &F64Bits, red, how.threads, stop)
            }
            _ => {
                let to = Checked { dtype: how.dtype, policy: how.non_finite };
                fill::fill(values, order, starts, out, &to, red, how.threads, stop)
            }
        })
    })
}

/// [`reduce_slices`] for a complex plan: both parts of a value in one
/// lane, each reduced by the combiner of the part type.
pub(crate) fn reduce_slices_complex<V, O>(
    how: &How,
    values: Values<'_, V>,
    order: &[u32],
    starts: &[u32],
    out: &mut [O],
    stop: Option<&AtomicBool>,
) -> std::result::Result<(), Stop>
where
    V: DirectValue,
    O: ComplexOut,
{
    let Some(part) = how.dtype.complex_part() else {
        return Err(Stop::Dropped);
    };
    complex_out(out, |out| {
        with_complex_reducer!(how, part, red => match values.cast(V::as_c128s) {
            Some(v) if part == DType::F64 && how.non_finite == NonFinitePolicy::Keep => {
                fill::fill(v, order, starts, out, &C128Bits, red, how.threads, stop)
            }
            _ => {
                let to = ComplexChecked { part, policy: how.non_finite };
                fill::fill(values, order, starts, out, &to, red, how.threads, stop)
            }
        })
    })
}

/// Run `fill` on the lanes of a real result `out` of `dtype`: `out` itself
/// when its type is its raw lane (f64, i64, u64), else a temporary turned
/// into `out`'s type after. The refill kernel is then compiled once per
/// value type and reducer, whatever the result's type.
fn real_out<O: OutValue>(
    dtype: DType,
    out: &mut [O],
    fill: impl FnOnce(&mut [u64]) -> std::result::Result<(), Stop>,
) -> std::result::Result<(), Stop> {
    // Of the real types, exactly f64, i64 and u64 are 8 bytes: their raw
    // lane is their own bits.
    if std::mem::size_of::<O>() == 8 {
        if let Ok(lanes) = bytemuck::try_cast_slice_mut::<O, u64>(out) {
            return fill(lanes);
        }
    }
    let mut lanes = lane_room::<u64>(out.len())?;
    fill(&mut lanes)?;
    for (o, &l) in out.iter_mut().zip(&lanes) {
        *o = O::from_value(raw_to_value(dtype, l));
    }
    Ok(())
}

/// [`real_out`] for a complex result (its lanes are the parts' f64 bits:
/// complex128 in place).
fn complex_out<O: ComplexOut>(
    out: &mut [O],
    fill: impl FnOnce(&mut [[u64; 2]]) -> std::result::Result<(), Stop>,
) -> std::result::Result<(), Stop> {
    // complex128, 16 bytes, is its lane: both parts' f64 bits.
    if std::mem::size_of::<O>() == 16 {
        if let Ok(lanes) = bytemuck::try_cast_slice_mut::<O, [u64; 2]>(out) {
            return fill(lanes);
        }
    }
    let mut lanes = lane_room::<[u64; 2]>(out.len())?;
    fill(&mut lanes)?;
    for (o, &l) in out.iter_mut().zip(&lanes) {
        *o = O::from_lane_bits(l);
    }
    Ok(())
}

/// `n` zeroed lanes, or the stop an allocation failure is.
fn lane_room<L: Copy + Default>(n: usize) -> std::result::Result<Vec<L>, Stop> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Stop::OutOfMemory {
        bytes: (n * std::mem::size_of::<L>()) as u64,
    })?;
    v.resize(n, L::default());
    Ok(v)
}

/// Values already turned into the reducers' lanes, each checked as a push
/// checks it ([`lanes::Lanes`]): the source of a refill from a file.
pub(crate) struct Raw;

impl Source<u64> for Raw {
    type L = u64;
    #[inline(always)]
    fn lane(&self, v: u64) -> Option<u64> {
        Some(v)
    }
}

impl Source<[u64; 2]> for Raw {
    type L = [u64; 2];
    #[inline(always)]
    fn lane(&self, v: [u64; 2]) -> Option<[u64; 2]> {
        Some(v)
    }
}

/// [`reduce_slices`] of values given as lanes: compiled once per plan
/// type, whatever the type the values came in.
pub(crate) fn reduce_lanes<O: OutValue>(
    how: &How,
    lanes: &[u64],
    order: &[u32],
    starts: &[u32],
    out: &mut [O],
    stop: Option<&AtomicBool>,
) -> std::result::Result<(), Stop> {
    real_out(how.dtype, out, |out| {
        // f64 lanes are the values' bits, already checked: the f64 sums'
        // own kernel takes them as they are.
        if let (Some(sum), DType::F64, Ok(v)) = (
            fill::F64Sum::of(how.kind),
            how.dtype,
            bytemuck::try_cast_slice::<u64, f64>(lanes),
        ) {
            return fill::sum_f64(sum, Values::one(v), order, starts, out, how.threads, stop);
        }
        with_real_reducer!(how, red => fill::fill(Values::one(lanes), order, starts, out, &Raw, red, how.threads, stop))
    })
}

/// [`reduce_slices_complex`] of values given as lanes.
pub(crate) fn reduce_lanes_complex<O: ComplexOut>(
    how: &How,
    lanes: &[[u64; 2]],
    order: &[u32],
    starts: &[u32],
    out: &mut [O],
    stop: Option<&AtomicBool>,
) -> std::result::Result<(), Stop> {
    let Some(part) = how.dtype.complex_part() else {
        return Err(Stop::Dropped);
    };
    complex_out(
        out,
        |out| with_complex_reducer!(how, part, red => fill::fill(Values::one(lanes), order, starts, out, &Raw, red, how.threads, stop)),
    )
}

/// The combiner of a plan's values: for a complex type, its parts'.
pub(crate) fn plan_kind(
    dtype: DType,
    duplicates: DuplicatePolicy,
    exact_sums: bool,
) -> CombinerKind {
    CombinerKind::of(
        dtype.complex_part().unwrap_or(dtype),
        duplicates,
        exact_sums,
    )
}

pub(crate) use crate::assemble::check_plannable;

/// One index array per dimension of `shape`, all as long: what every
/// plan of arrays takes (a plan across MPI ranks too).
#[doc(hidden)]
pub fn check_arrays<I>(indices: &[&[I]], shape: &[u64]) -> Result<()> {
    if indices.len() != shape.len() {
        return Err(Error::InvalidArgument(format!(
            "{} index arrays for a rank-{} tensor",
            indices.len(),
            shape.len()
        )));
    }
    let n = indices.first().map_or(0, |d| d.len());
    if let Some(d) = indices.iter().position(|x| x.len() != n) {
        return Err(Error::InvalidArgument(format!(
            "index array {d} has {} entries, index array 0 {n}",
            indices[d].len()
        )));
    }
    Ok(())
}

/// Element arrays a plan takes: whole elements of `per` dofs, and no dof a
/// push would refuse (negative, or outside the matrix), named as the
/// element arrays hold it, `dofs[e, a]`: one fast pass for the bounds, the
/// scan only when they are wrong. (Under `skip_negative` negative dofs are
/// skipped by planning, which names an index outside the matrix itself.)
pub(crate) fn check_elements<I: IndexElem>(
    dofs: &[I],
    per: usize,
    shape: [u64; 2],
    opts: &AssembleOptions,
) -> Result<()> {
    if per == 0 || dofs.len() % per != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} degrees of freedom are not a whole number of elements of {per}",
            dofs.len()
        )));
    }
    let extent = shape[0].min(shape[1]);
    if dofs.is_empty() || opts.skip_negative {
        return Ok(());
    }
    let (lo, hi) = I::min_max(dofs);
    if lo < extent && hi < extent {
        return Ok(());
    }
    for (i, &d) in dofs.iter().enumerate() {
        let w = d.widen();
        if d.is_negative() || w >= extent {
            let dof = if d.is_negative() {
                i128::from(w as i64)
            } else {
                i128::from(w)
            };
            return Err(Error::BadDof {
                element: (i / per) as u64,
                local: i % per,
                dof,
                extent,
            });
        }
    }
    Ok(())
}
