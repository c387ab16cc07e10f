//! Plans kept in parts on disk (issue 24, out of core): planned and
//! refilled within the memory budget, however many contributions.
//!
//! Planning cuts the storage-order key space into **parts** of at most a
//! budget's worth of contributions (a histogram of the top key bits, then
//! consecutive slices of it), so that one part's work fits in memory:
//!
//! 1. count, validate and digest the coordinates (every core), noting
//!    each slice's first and last position: a part's **window** is the
//!    span of its slices'. Input in element order (an FE code's) gives
//!    narrow windows: a band of rows comes from a band of elements;
//! 2. when every window is narrow (at most half again its part's count),
//!    the plan is **windowed**: nothing is spilled. Otherwise each
//!    contribution's key goes to its part's spill file and its part
//!    number (u16) to another;
//! 3. part by part, on every core: its keys and their positions read once
//!    (from its window, or back from its spill, checksummed) into a list
//!    per thread, then ([`Cut::of`]) counted by bucket, placed in their
//!    buckets, and each bucket ordered by (key, position) in cache and cut
//!    into entries: the entries' counts go to the `pattern` tensor, the
//!    positions, entry by entry, to `order`.
//!
//! The plan file (version [`PARTED_VERSION`]) holds `pattern` (the output
//! structure, u32 counts, as in an in-memory plan's file), `order` (u32
//! positions within each part's window or spill, part after part),
//! `parts` (four u64 per part: contributions, entries, window start and
//! end), with the plan KV entries of [`super::store`] plus the part count;
//! a plan that spills also holds `part` (u16, one per contribution in
//! array order).
//!
//! A refill reads each part's values: a windowed plan reads its window
//! of the values file, with nothing spilled; otherwise the values are
//! streamed in contribution order once, each appended to its part's spill
//! file. Each part is reduced with the in-memory refill kernel
//! ([`super::reduce_slices`]), while a second thread streams the part
//! before into the output file (nnz is known: the indices go straight to
//! their place): the same values, bit for bit, as an in-memory plan or a
//! full assembly of the same contributions. Memory: one part's values (or
//! window), order, counts and result, the result before, and buffers; the
//! plan file's pages are given back behind the cursors.

use super::file::{RefillSummary, ValuesFile, id_of};
use super::lanes::{LaneOf, Target};
use super::pattern::{self, Coords, KeyShape};
use super::store::{
    Check, Header, KEY_CHECK, KEY_CONTRIBUTIONS, KEY_DIGEST, KEY_DTYPE, KEY_DUPLICATES, KEY_EXACT,
    KEY_NON_FINITE, KEY_VERSION, ORDER, PARTED_VERSION, PATTERN, refused,
};
use super::{How, check_plannable, fill::Stop, reduce_lanes, reduce_lanes_complex};
use crate::assemble::builder::Builder;
use crate::assemble::combine::{CombineError, CombinerKind};
use crate::assemble::direct::{IndexElem, stopped};
use crate::assemble::record::Recording;
use crate::budget::Budget;
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::fs::output::{FileId, ReplaceInput};
use crate::fs::spill::Spill;
use crate::hurray::KvValue;
use crate::options::{AssembleOptions, DuplicatePolicy, NonFinitePolicy, OutputLayout};
use crate::read::{HurrayFile, Tensor};
use crate::write::{FileWriter, TensorWriter, WriteOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

const PART: &str = "part";
const PARTS: &str = "parts";
const KEY_PARTS: &str = "coo_assembler.plan.parts";
/// Words of a part in the `parts` table: contributions, entries, and the
/// window of positions its contributions lie in.
const PART_WORDS: u64 = 4;

/// Top key bits of the planning histogram, at most: parts are cut
/// between its slices (2^18 of them, 24 bytes each per thread: a count
/// and a span of positions; fewer for few contributions, about 16 per
/// slice, or for a small budget, a quarter of which holds them).
const FINE_BITS: u32 = 18;
/// Bytes a part may take per contribution, planning or refilling
/// (planning: the gathered keys and positions 12, the same placed 12, the
/// bucket slots 4 at most, the order 4, the entries 12 at most; the
/// refill's values, order, counts, starts, result and pattern indices).
const BYTES_PER: u64 = 48;
/// Largest number of parts (their ids are u16, [`SKIPPED`] apart).
const MAX_PARTS: usize = u16::MAX as usize;
/// The part id of a contribution skipped (`skip_negative`): it has no
/// part and its value is not read.
const SKIPPED: u16 = u16::MAX;
/// Values or keys handled per step of a streaming pass.
const CHUNK: usize = 1 << 16;

/// A part's reduction: [`reduce_slices`], or [`reduce_slices_complex`]
/// for a complex plan.
type Reduce<L, O> = fn(&How, &[L], &[u32], &[u32], &mut [O]) -> std::result::Result<(), Stop>;

/// What [`PlanFile::create`] wrote.
#[derive(Clone, Debug)]
pub struct PlanFileSummary {
    /// The plan file.
    pub path: PathBuf,
    /// Contributions planned.
    pub contributions: u64,
    /// Entries of the result.
    pub nnz: u64,
    /// Parts the plan is cut into.
    pub parts: usize,
    /// Whether each part is refilled from its window of the values
    /// (input in element order: nothing spilled, planning or refilling),
    /// rather than from a spill of its values.
    pub windowed: bool,
    /// The plan file's size.
    pub bytes: u64,
}

/// A plan kept in parts on disk, read through its mapping: see the
/// [module docs](self). Made by [`PlanFile::create`] (or
/// `coo-assembler plan`), opened by [`PlanFile::open`], refilled by
/// [`PlanFile::refill_file`] within any budget that holds its largest part.
#[derive(Debug)]
pub struct PlanFile {
    file: HurrayFile,
    path: PathBuf,
    shape: Vec<u64>,
    dtype: DType,
    layout: OutputLayout,
    kind: CombinerKind,
    non_finite: NonFinitePolicy,
    digest: u64,
    /// Every part, in key order.
    parts: Vec<Part>,
    /// Whether the values of each part are spilled by a refill (the plan
    /// holds every contribution's part), or read from its window.
    spilled: bool,
    n: u64,
    nnz: u64,
}

/// One part of a plan file: its contributions, its entries, and the
/// window of positions (in the values) its contributions lie in.
#[derive(Clone, Copy, Debug)]
struct Part {
    contributions: u64,
    entries: u64,
    window: (u64, u64),
}

fn temp_dir(opts: &AssembleOptions) -> PathBuf {
    opts.temp_dir.clone().unwrap_or_else(std::env::temp_dir)
}

/// Spill buffers for `parts` spills within an eighth of the budget (at
/// least 4 KiB each: 65535 parts of 4 KiB are 256 MiB, and so many parts
/// come only from a budget far larger).
fn spill_buffer(budget: u64, parts: usize) -> usize {
    ((budget / 8) / parts.max(1) as u64).clamp(4 << 10, 1 << 20) as usize
}

impl PlanFile {
    /// Plan contributions at the coordinates `indices` (one array per
    /// dimension, all as long) into a tensor of `shape` and `dtype` with
    /// `opts`' layout and policies, out of core: the plan is written to
    /// `path` (atomically) in parts that each fit `opts.memory_budget`,
    /// and no more than the budget (plus the caller's arrays) is held
    /// while planning. The same refusals as [`super::Plan::new`], and a
    /// budget too small for one slice of the key space (`BudgetTooSmall`).
    pub fn create<I: IndexElem>(
        indices: &[&[I]],
        shape: &[u64],
        dtype: DType,
        opts: &AssembleOptions,
        path: &Path,
        stop: Option<&AtomicBool>,
    ) -> Result<PlanFileSummary> {
        super::check_arrays(indices, shape)?;
        plan_parts(
            &pattern::Arrays { dims: indices },
            shape,
            dtype,
            opts,
            path,
            stop,
        )
    }

    /// [`PlanFile::create`] from the coordinates of a binary records file
    /// (`rank` u64 indices and a `value` value per record, as the CLI's
    /// `bin` input; the values are not read): what `coo-assembler plan`
    /// runs. The file is mapped and its pages given back as the passes
    /// go, so it does not count against the budget.
    pub fn create_from_bin(
        input: &Path,
        value: DType,
        shape: &[u64],
        dtype: DType,
        opts: &AssembleOptions,
        path: &Path,
        stop: Option<&AtomicBool>,
    ) -> Result<PlanFileSummary> {
        let f = std::fs::File::open(input).map_err(|e| Error::io("open", input, e))?;
        let len = f.metadata().map_err(|e| Error::io("stat", input, e))?.len();
        let name = input.display().to_string();
        crate::input::check_bin_length(len, shape.len(), value, &name)?;
        let Some(m) = crate::input::MappedInput::map(&opts.io, &f, input) else {
            return Err(Error::InvalidArgument(format!(
                "{name}: an empty or unmappable file cannot be planned"
            )));
        };
        let ids = id_of(input);
        let refs: Vec<&FileId> = ids.iter().collect();
        let c = pattern::BinRecords {
            input: &m,
            rank: shape.len(),
            width: value.width(),
            signed: false,
        };
        plan_parts_to(&c, shape, dtype, opts, path, &refs, stop)
    }

    /// The plan a builder recorded ([`Builder::record_plan`]), written out
    /// of core to `path` after its `finish`, with the builder's options:
    /// what [`PlanFile::create`] writes for the same coordinates.
    pub fn create_recorded(
        builder: &Builder,
        path: impl AsRef<Path>,
        stop: Option<&AtomicBool>,
    ) -> Result<PlanFileSummary> {
        let (shape, dtype, opts) = (builder.shape(), builder.dtype(), builder.options());
        let path = path.as_ref();
        match builder.recording()? {
            Some(rec) => {
                let m = map_recording(opts, rec)?;
                let c = recorded_coords(&m, shape.len());
                plan_parts(&c, shape, dtype, opts, path, stop)
            }
            None => {
                let dims: Vec<&[u64]> = vec![&[]; shape.len()];
                Self::create(&dims, shape, dtype, opts, path, stop)
            }
        }
    }

    /// [`PlanFile::create`] for element matrices, as
    /// [`super::Plan::for_elements`] takes them.
    pub fn create_for_elements<I: IndexElem>(
        dofs: &[I],
        per_element: usize,
        shape: [u64; 2],
        dtype: DType,
        opts: &AssembleOptions,
        path: &Path,
        stop: Option<&AtomicBool>,
    ) -> Result<PlanFileSummary> {
        super::check_elements(dofs, per_element, shape, opts)?;
        let c = pattern::Elements {
            dofs,
            per: per_element,
        };
        plan_parts(&c, &shape, dtype, opts, path, stop)
    }

    /// Open a plan file written by [`PlanFile::create`]: its checksums
    /// are checked (one pass over the file, its pages given back), then
    /// its KV entries and the table of parts. A damaged file, a plan of
    /// another version or an in-memory plan's file is refused
    /// (`InvalidFile`, saying why).
    pub fn open(path: impl AsRef<Path>) -> Result<PlanFile> {
        let p = path.as_ref();
        let name = p.display().to_string();
        let file = HurrayFile::open(p)?;
        let h = Header::read(&file, &name)?;
        if h.version != PARTED_VERSION {
            return Err(refused(
                &name,
                "a plan held in memory (Plan::save): load it with Plan::load".into(),
            ));
        }
        let parts_n = match file.kv().iter().find(|(k, _)| k == KEY_PARTS) {
            Some((_, KvValue::U64(v))) => *v,
            _ => return Err(refused(&name, format!("KV entry {KEY_PARTS} is missing"))),
        };
        // `part` is there when the plan spills its values (not windowed).
        let spilled = file.tensor_names().any(|t| t == PART);
        let pattern = file
            .tensor_view(PATTERN)
            .map_err(|e| refused(&name, format!("{e}")))?;
        // Pages given back behind the hash: the plan file is many times
        // the refill's budget.
        pattern.check_checksums_with(true)?;
        if pattern.dtype() != DType::U32 {
            return Err(refused(&name, format!("tensor {PATTERN} must hold u32")));
        }
        // The dense vectors: their checksums, types, and lengths.
        let vector = |what: &str, want: DType| {
            let t = file
                .dense(what)
                .map_err(|e| refused(&name, format!("{e}")))?;
            t.check_checksums_with(true)?;
            match t.shape() {
                &[len] if t.dtype() == want => Ok((t, len)),
                _ => Err(refused(
                    &name,
                    format!("tensor {what} must be a vector of {want}"),
                )),
            }
        };
        let (_, orders) = vector(ORDER, DType::U32)?;
        let (parts, parts_len) = vector(PARTS, DType::U64)?;
        // Values a refill takes; those skipped have no position.
        let n = h.contributions.unwrap_or(0);
        let ids = if spilled {
            vector(PART, DType::U16)?.1
        } else {
            n
        };
        if ids != n || parts_len != PART_WORDS * parts_n || parts_n == 0 || orders > n {
            return Err(refused(
                &name,
                format!(
                    "{n} orders, {ids} part numbers and {parts_len} part words for {parts_n} parts"
                ),
            ));
        }
        let words: Vec<u64> = parts
            .values_bytes()
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
            .collect();
        let table: Vec<Part> = words
            .chunks_exact(PART_WORDS as usize)
            .map(|p| Part {
                contributions: p[0],
                entries: p[1],
                window: (p[2], p[3]),
            })
            .collect();
        let (mut sn, mut se) = (0u64, 0u64);
        for p in &table {
            let (c, e, (lo, hi)) = (p.contributions, p.entries, p.window);
            let span = hi.saturating_sub(lo);
            if c == 0
                || e == 0
                || e > c
                || c > u32::MAX as u64
                || lo > hi
                || hi > n
                || span < c
                || (!spilled && !narrow(span, c))
            {
                return Err(refused(
                    &name,
                    format!("a part of {c} contributions and {e} entries at positions {lo}..{hi}"),
                ));
            }
            sn = sn.saturating_add(c);
            se = se.saturating_add(e);
        }
        if sn != orders || se != pattern.nnz() {
            return Err(refused(
                &name,
                format!(
                    "the parts hold {sn} contributions and {se} entries; the plan {orders} and {}",
                    pattern.nnz()
                ),
            ));
        }
        let check = Check {
            shape: pattern.shape(),
            layout: pattern.layout(),
            digest: h.digest,
            dtype: h.dtype.name(),
            duplicates: &h.duplicates.to_string(),
            exact_sums: h.exact_sums,
            non_finite: &h.non_finite.to_string(),
            n,
            parts: Some(parts_n),
        };
        if check.value() != h.stored_check {
            return Err(refused(
                &name,
                "the plan's KV entries do not match their check (damaged)".into(),
            ));
        }
        let (shape, layout, nnz) = (pattern.shape().to_vec(), pattern.layout(), pattern.nnz());
        Ok(PlanFile {
            spilled,
            shape,
            dtype: h.dtype,
            layout,
            kind: super::plan_kind(h.dtype, h.duplicates, h.exact_sums),
            non_finite: h.non_finite,
            digest: h.digest,
            parts: table,
            n,
            nnz,
            path: p.to_path_buf(),
            file,
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
    pub fn contributions(&self) -> u64 {
        self.n
    }

    /// Entries of the result.
    pub fn nnz(&self) -> u64 {
        self.nnz
    }

    /// Parts the plan is cut into.
    pub fn parts(&self) -> usize {
        self.parts.len()
    }

    /// The digest of the coordinates (as [`super::Plan::digest`]).
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// The smallest memory budget a refill of this plan runs in: its
    /// largest part's working set and the buffers.
    pub fn refill_budget(&self) -> u64 {
        let part = self
            .parts
            .iter()
            .map(|p| part_bytes(p, self.spilled, self.dtype, self.shape.len()))
            .max()
            .unwrap_or(0);
        // `fixed_bytes(b)` is 4 MiB and an eighth of the budget `b`.
        (part.saturating_add(4 << 20)).saturating_mul(8).div_ceil(7)
    }

    /// Read the values in `values` (`.npy` or raw little-endian values of
    /// the plan's element type, one per contribution in the planned
    /// order), refill part by part within `opts.memory_budget` on
    /// `opts.threads` threads (spill files in `opts.temp_dir`), and write
    /// the result to `output` as a Hurray file, atomically. `inputs` are
    /// files the output must not name (the plan file and the values file
    /// are). The result's values are bit for bit an in-memory plan's.
    pub fn refill_file(
        &self,
        values: &Path,
        output: &Path,
        inputs: &[&Path],
        opts: &AssembleOptions,
    ) -> Result<RefillSummary> {
        Budget::new(opts.memory_budget).require("a refill's largest part", self.refill_budget())?;
        let src = ValuesFile::open(values, self.dtype, self.n)?;
        let target = Target {
            dtype: self.dtype,
            policy: self.non_finite,
        };
        target.check_readable(src.dtype, values)?;
        let files = (values, output, inputs);
        crate::with_element_type!(self.dtype, real T => {
            self.refill_typed::<u64, T>(src, target, files, opts, |how, l, ord, st, out| {
                reduce_lanes(how, l, ord, st, out, None)
            })
        }, complex C => {
            self.refill_typed::<[u64; 2], C>(src, target, files, opts, |how, l, ord, st, out| {
                reduce_lanes_complex(how, l, ord, st, out, None)
            })
        })
    }

    /// Refill with `src`'s values (`files`: the values file, the output and
    /// the files it may not name), each part reduced by `reduce` (the real
    /// or the complex reduction of [`super`]).
    fn refill_typed<L: LaneOf, O: Element + Default>(
        &self,
        mut src: ValuesFile,
        target: Target,
        files: (&Path, &Path, &[&Path]),
        opts: &AssembleOptions,
        reduce: Reduce<L, O>,
    ) -> Result<RefillSummary> {
        let (values, output, inputs) = files;
        let name = self.path.display().to_string();
        // The output rule first: nothing is read for an output that would
        // destroy an input.
        let ids: Vec<FileId> = inputs
            .iter()
            .chain([&values, &self.path.as_path()])
            .filter_map(|p| id_of(p))
            .collect();
        let refs: Vec<&FileId> = ids.iter().collect();
        let wopts = WriteOptions {
            io: opts.io.clone(),
            ..WriteOptions::default()
        };
        let mut w = FileWriter::create_for(output, wopts, &refs, ReplaceInput::Refuse)?;
        let f = &self.file;
        let pattern = f
            .tensor_view(PATTERN)
            .map_err(|e| refused(&name, format!("{e}")))?;
        let vector = |t: &str| f.dense(t).map_err(|e| refused(&name, format!("{e}")));
        let order = vector(ORDER)?;
        let part = if self.spilled {
            Some(vector(PART)?)
        } else {
            None
        };
        let nparts = self.parts.len();
        let dir = temp_dir(opts);
        // Each value becomes a lane as it is read (checked as a push
        // checks it), so what is spilled and reduced is lanes.
        let width = std::mem::size_of::<L>();
        let in_width = src.dtype.width().max(1);

        // 1. A plan that spills: the values in contribution order, to
        // their parts' spills. A windowed plan reads each part's window
        // of them when its turn comes.
        let mut spills = Vec::new();
        if self.spilled {
            let ids_bytes = part.as_ref().map_or(&[][..], |t| t.values_bytes());
            let buffer = spill_buffer(opts.memory_budget, nparts);
            for _ in 0..nparts {
                spills.push(Spill::new(&opts.io, &dir, buffer)?);
            }
            let mut seen = vec![0u64; nparts];
            let stage_cap = (2 * CHUNK * width / nparts.max(1)).max(4096);
            let mut stage: Vec<Vec<u8>> = (0..nparts).map(|_| Vec::new()).collect();
            let mut raw = vec![0u8; CHUNK * in_width];
            let mut at = 0u64;
            while at < self.n {
                let m = (self.n - at).min(CHUNK as u64) as usize;
                let buf = &mut raw[..m * in_width];
                src.reader
                    .read_exact(buf)
                    .map_err(|e| Error::io("read", values, e))?;
                let mut lanes = target.empty();
                target.append(buf, src.dtype, src.big_endian, at, &mut lanes)?;
                let vals: Vec<L> = L::of(lanes);
                let ids = ids_bytes
                    .get(at as usize * 2..(at as usize + m) * 2)
                    .ok_or_else(|| refused(&name, "the part numbers end early".into()))?;
                // Staged per part, then one write (and one hash update)
                // per part and chunk: per-value writes cost more than the
                // copy.
                for (i, b) in ids.chunks_exact(2).enumerate() {
                    let id = u16::from_le_bytes([b[0], b[1]]);
                    if id == SKIPPED {
                        continue;
                    }
                    let p = id as usize;
                    let Some(st) = stage.get_mut(p) else {
                        return Err(refused(
                            &name,
                            format!("contribution {} is in part {p} of {nparts}", at + i as u64),
                        ));
                    };
                    st.extend_from_slice(bytemuck::bytes_of(&vals[i]));
                    seen[p] += 1;
                }
                for (st, s) in stage.iter_mut().zip(spills.iter_mut()) {
                    if !st.is_empty() {
                        s.put(st)?;
                        st.clear();
                        // The stages together stay near one chunk.
                        if st.capacity() > stage_cap {
                            st.shrink_to(stage_cap);
                        }
                    }
                }
                f.release(ids);
                at += m as u64;
            }
            for (p, (&s, part)) in seen.iter().zip(&self.parts).enumerate() {
                if s != part.contributions {
                    return Err(refused(
                        &name,
                        format!(
                            "part {p} holds {} contributions, the part numbers give it {s}",
                            part.contributions
                        ),
                    ));
                }
            }
        }

        // 2. Part by part: its values, reduce, then stream the entries out.
        let how = How {
            kind: self.kind,
            dtype: self.dtype,
            non_finite: self.non_finite,
            threads: opts.threads.max(1),
        };
        let counts_bytes = pattern.values_bytes();
        let order_bytes = order.values_bytes();
        let tensor_name = AssembleOptions::default().tensor_name;
        let mut t = w.begin_tensor_as(&tensor_name, self.dtype, &self.shape, self.layout)?;
        // nnz is known: the indices go straight to their place.
        t.reserve_indices(self.nnz)?;
        let (mut c0, mut e0) = (0usize, 0usize);
        let mut spills = spills.into_iter();
        let mut raw = Vec::new();
        let mut vals: Vec<L> = Vec::new();
        // This thread reads and reduces the parts, one more thread writes
        // the finished ones in order (a result in flight, at most one
        // part's, is in the refill's budget).
        let named = Coordinates::new(f, &pattern);
        let (tx, rx) = crossbeam_channel::bounded::<(usize, Vec<O>)>(1);
        let (made, written) = std::thread::scope(|s| {
            let writer = s.spawn(|| -> Result<()> {
                let mut coords = Coordinates::new(f, &pattern);
                for (e0, out) in rx {
                    coords.push_all(e0, &out, &mut t, &name)?;
                }
                Ok(())
            });
            let made = (|| -> Result<()> {
                for (p, part) in self.parts.iter().enumerate() {
                    let (c, e) = (part.contributions as usize, part.entries as usize);
                    let (lo, hi) = part.window;
                    vals.clear();
                    let span = if self.spilled {
                        let s = spills
                            .next()
                            .ok_or(Error::Poisoned("refill (a part's spill)"))?;
                        let bytes = s.read_all("a part's values")?;
                        reserve(&mut vals, c, width)?;
                        vals.extend(
                            bytes
                                .chunks_exact(width)
                                .map(bytemuck::pod_read_unaligned::<L>),
                        );
                        c
                    } else {
                        let span = (hi - lo) as usize;
                        reserve(&mut vals, span, width)?;
                        if target.bytes_are_lanes(src.dtype, src.big_endian) {
                            // The values are their lanes: read straight in.
                            vals.resize(span, <L as bytemuck::Zeroable>::zeroed());
                            opts.io.read_exact_at(
                                src.reader.get_ref(),
                                bytemuck::cast_slice_mut(&mut vals[..]),
                                src.data_at + lo * in_width as u64,
                                values,
                            )?;
                        } else {
                            if raw.is_empty() {
                                raw = vec![0u8; CHUNK * in_width];
                            }
                            // Converted into the lanes kept from part to part.
                            let mut lanes = L::lanes(std::mem::take(&mut vals));
                            let mut at = lo;
                            while at < hi {
                                let m = (hi - at).min(CHUNK as u64) as usize;
                                let buf = &mut raw[..m * in_width];
                                opts.io.read_exact_at(
                                    src.reader.get_ref(),
                                    buf,
                                    src.data_at + at * in_width as u64,
                                    values,
                                )?;
                                target.append(buf, src.dtype, src.big_endian, at, &mut lanes)?;
                                at += m as u64;
                            }
                            vals = L::of(lanes);
                        }
                        span
                    };
                    let ob = &order_bytes[c0 * 4..(c0 + c) * 4];
                    let cb = &counts_bytes[e0 * 4..(e0 + e) * 4];
                    let ord = u32s_checked(ob, span, &name, p)?;
                    let starts = starts_of(cb, c, &name, p)?;
                    let mut out =
                        crate::assemble::direct::out::filled(e, O::default(), "a part's result")?;
                    let r = reduce(&how, &vals, &ord, &starts, &mut out);
                    if let Err(stop) = r {
                        return Err(match stop {
                            Stop::Combine { entry, why } => {
                                let coordinate = named.at(e0 + entry);
                                match why {
                                    CombineError::Duplicate => {
                                        Error::DuplicateCoordinate { coordinate }
                                    }
                                    CombineError::Overflow => Error::IntegerOverflow {
                                        coordinate,
                                        dtype: self.dtype.name(),
                                    },
                                }
                            }
                            Stop::BadValue => {
                                Error::Poisoned("refill (a value checked before changed)")
                            }
                            Stop::Stopped => Error::Poisoned("refill (stopped by its caller)"),
                            Stop::Dropped => {
                                Error::Poisoned("refill (an entry without contributions)")
                            }
                            Stop::OutOfMemory { bytes } => Error::OutOfMemory {
                                what: "a part's lanes",
                                bytes,
                            },
                        });
                    }
                    drop((ord, starts));
                    f.release(ob);
                    f.release(cb);
                    if tx.send((e0, out)).is_err() {
                        // The writer stopped on an error: it says which.
                        return Ok(());
                    }
                    c0 += c;
                    e0 += e;
                }
                Ok(())
            })();
            drop(tx);
            let written = writer
                .join()
                .unwrap_or(Err(Error::Poisoned("refill (the writer panicked)")));
            (made, written)
        });
        made?;
        written?;
        t.finish()?;
        let s = w.finish()?;
        Ok(RefillSummary {
            path: s.path,
            contributions: self.n,
            nnz: self.nnz,
            bytes: s.bytes,
            layout: self.layout,
            dtype: self.dtype,
            parts: self.parts.len(),
        })
    }
}

/// Bytes part `p` takes, planning or refilling (see [`BYTES_PER`]; the
/// entries' share is within it when the window is narrow).
fn part_bytes(p: &Part, spilled: bool, dtype: DType, rank: usize) -> u64 {
    let (c, e) = (p.contributions, p.entries);
    // The values: the part's own when spilled, its window's otherwise.
    let values = if spilled { c } else { p.window.1 - p.window.0 };
    // Per entry: its count and start, its result and the previous part's
    // (in flight to the writer), its index tuple.
    let width = dtype.width().max(1) as u64;
    let refill = values * 8 + c * 4 + e * (4 + 4 + 2 * width + 8 * rank as u64);
    refill.max(c.saturating_mul(BYTES_PER))
}

/// What planning and refilling hold beside a part at `budget`: the
/// spill buffers (an eighth of it, [`spill_buffer`]), the read buffers
/// and the chunks of a streaming pass.
fn fixed_bytes(budget: u64) -> u64 {
    (4 << 20) + budget / 8
}

/// Room for `n` lanes of `width` bytes in `v` (kept from part to part).
fn reserve<L>(v: &mut Vec<L>, n: usize, width: usize) -> Result<()> {
    v.try_reserve_exact(n.saturating_sub(v.len()))
        .map_err(|_| Error::OutOfMemory {
            what: "a part's values",
            bytes: (n as u64).saturating_mul(width as u64),
        })
}

/// `bytes` as u32 values (a copy: the mapped buffer's alignment is the
/// file's), each below `c` (the positions of the part's values: its
/// contributions, or its window) and each at most once.
fn u32s_checked<'a>(
    bytes: &'a [u8],
    c: usize,
    name: &str,
    p: usize,
) -> Result<std::borrow::Cow<'a, [u32]>> {
    // The mapped words in place when aligned (they are: buffers start at
    // the file's alignment), a copy otherwise.
    let v: std::borrow::Cow<'a, [u32]> = match bytemuck::try_cast_slice(bytes) {
        Ok(w) if cfg!(target_endian = "little") => std::borrow::Cow::Borrowed(w),
        _ => {
            let mut v = Vec::new();
            v.try_reserve_exact(bytes.len() / 4)
                .map_err(|_| Error::OutOfMemory {
                    what: "a part's order",
                    bytes: bytes.len() as u64,
                })?;
            v.extend(
                bytes
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
            );
            std::borrow::Cow::Owned(v)
        }
    };
    let mut seen = vec![0u64; c.div_ceil(64)];
    for &k in v.iter() {
        let (wi, bit) = (k as usize / 64, k % 64);
        match seen.get_mut(wi) {
            Some(x) if (k as usize) < c && *x & (1 << bit) == 0 => *x |= 1 << bit,
            _ => {
                return Err(refused(
                    name,
                    format!("the order of part {p} repeats or exceeds position {k}"),
                ));
            }
        }
    }
    Ok(v)
}

/// The entry starts of a part from its counts, which must cut its `c`
/// contributions whole.
fn starts_of(counts: &[u8], c: usize, name: &str, p: usize) -> Result<Vec<u32>> {
    let e = counts.len() / 4;
    let mut s = Vec::new();
    s.try_reserve_exact(e + 1).map_err(|_| Error::OutOfMemory {
        what: "a part's entry starts",
        bytes: (e as u64 + 1) * 4,
    })?;
    let mut at = 0u64;
    for b in counts.chunks_exact(4) {
        let k = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        s.push(at as u32);
        at += k as u64;
        if k == 0 || at > c as u64 {
            return Err(refused(
                name,
                format!("the counts of part {p} do not cut its {c} contributions"),
            ));
        }
    }
    if at != c as u64 {
        return Err(refused(
            name,
            format!("the counts of part {p} cut {at} of its {c} contributions"),
        ));
    }
    s.push(at as u32);
    Ok(s)
}

/// The pattern's coordinates, entry by entry, read through the mapping
/// with the pages behind given back.
struct Coordinates<'a> {
    f: &'a HurrayFile,
    t: &'a Tensor<'a>,
    /// CSR / CSC: the current major index.
    major: usize,
}

impl<'a> Coordinates<'a> {
    fn new(f: &'a HurrayFile, t: &'a Tensor<'a>) -> Coordinates<'a> {
        Coordinates { f, t, major: 0 }
    }

    /// The index tuple of entry `e` (any entry: for error messages).
    fn at(&self, e: usize) -> Vec<u64> {
        let mut at = vec![0u64; self.t.rank()];
        match self.t.entry_coordinates(e as u64, &mut at) {
            Ok(()) => at,
            Err(_) => Vec::new(),
        }
    }

    /// Push entries `e0..e0 + out.len()` with their values into `t`, and
    /// give back the index pages read.
    fn push_all<O: Element>(
        &mut self,
        e0: usize,
        out: &[O],
        t: &mut TensorWriter<'_>,
        name: &str,
    ) -> Result<()> {
        let bad = |what: &str| {
            refused(
                name,
                format!("the pattern's {what} do not hold its entries"),
            )
        };
        match self.t {
            Tensor::Coo(c) => {
                let r = c.rank();
                let ix = c
                    .indices()
                    .get(e0 * r..(e0 + out.len()) * r)
                    .ok_or_else(|| bad("indices"))?;
                for (tuple, &v) in ix.chunks_exact(r).zip(out) {
                    t.push(tuple, v)?;
                }
                self.f.release(bytemuck::cast_slice(ix));
            }
            Tensor::Compressed(c) => {
                // A run per major index: the writer checks and points
                // once per row (column), not once per entry.
                let (ptr, minor) = (c.pointers(), c.indices());
                let end = e0 + out.len();
                let ix = minor.get(e0..end).ok_or_else(|| bad("indices"))?;
                let mut e = e0;
                while e < end {
                    while ptr.get(self.major + 1).is_some_and(|&x| x <= e as u64) {
                        self.major += 1;
                    }
                    let Some(&next) = ptr.get(self.major + 1) else {
                        return Err(bad("pointers"));
                    };
                    let stop = (next as usize).min(end);
                    t.push_run(
                        self.major as u64,
                        &ix[e - e0..stop - e0],
                        &out[e - e0..stop - e0],
                    )?;
                    e = stop;
                }
                self.f.release(bytemuck::cast_slice(ix));
            }
            other => return Err(other.not_served("a plan's pattern", "COO, CSR and CSC")),
        }
        Ok(())
    }
}

/// Map a builder's recording for planning.
pub(super) fn map_recording(
    opts: &AssembleOptions,
    rec: &Recording,
) -> Result<crate::input::MappedInput> {
    crate::input::MappedInput::map(&opts.io, &rec.file, &rec.dir).ok_or_else(|| {
        Error::io(
            "map the plan's recording in",
            &rec.dir,
            std::io::Error::other("the recording cannot be mapped"),
        )
    })
}

/// The coordinates of a mapped recording.
pub(super) fn recorded_coords(
    m: &crate::input::MappedInput,
    rank: usize,
) -> pattern::BinRecords<'_> {
    pattern::BinRecords {
        input: m,
        rank,
        width: 0,
        signed: true,
    }
}

/// Plan `c` into parts on disk: see the [module docs](self).
fn plan_parts<C: Coords>(
    c: &C,
    shape: &[u64],
    dtype: DType,
    opts: &AssembleOptions,
    path: &Path,
    stop: Option<&AtomicBool>,
) -> Result<PlanFileSummary> {
    plan_parts_to(c, shape, dtype, opts, path, &[], stop)
}

/// [`plan_parts`] into `path`, which may not be one of `inputs`.
fn plan_parts_to<C: Coords>(
    c: &C,
    shape: &[u64],
    dtype: DType,
    opts: &AssembleOptions,
    path: &Path,
    inputs: &[&FileId],
    stop: Option<&AtomicBool>,
) -> Result<PlanFileSummary> {
    opts.validate()?;
    crate::assemble::check_shape(opts, shape)?;
    check_plannable(dtype, opts, shape)?;
    let ks = KeyShape::new(shape, opts.layout)
        .ok_or_else(|| Error::InvalidShape {
            shape: shape.to_vec(),
            detail: "the index tuple packs into more than 64 bits, which a plan does not take"
                .into(),
        })?
        .skipping(opts.skip_negative);
    let n = c.len();
    let rank = shape.len();
    let threads = opts.threads.max(1);
    let threads_1 = if n < (1 << 16) { 1 } else { threads };
    // The slice tables (each thread's counts and spans, 24 bytes a slice,
    // and their sum) within a quarter of the budget.
    let room = opts.memory_budget / 4 / (24 * (threads_1 as u64 + 1));
    let fine_bits = ks
        .total
        .min(FINE_BITS)
        .min(crate::assemble::direct::bits_of(n as u64 / 16))
        .min(63u32.saturating_sub(room.max(1).leading_zeros()));
    let split = ks.total - fine_bits;
    let fine = 1usize << fine_bits;
    // The output rule and the folder first: an unwritable target fails
    // before the work.
    let mut w = FileWriter::create_for(
        path,
        WriteOptions {
            io: opts.io.clone(),
            ..WriteOptions::default()
        },
        inputs,
        ReplaceInput::Refuse,
    )?;

    // 1. Validate, count per slice and digest, each thread its range.
    // Each slice's span of positions too: a part's window is its
    // slices' spans (no second pass).
    let pattern::Counted {
        hists,
        spans,
        digest,
    } = pattern::count_and_digest::<C, u64>(
        c,
        &ks,
        split,
        fine,
        threads_1,
        true,
        stop,
        "the plan's slice counts",
    )?;
    let mut hists = hists.into_iter();
    let mut hist = hists
        .next()
        .ok_or(Error::Poisoned("planning (no counts)"))?;
    for h in hists {
        for (a, b) in hist.iter_mut().zip(h) {
            *a += b;
        }
    }

    // Parts: consecutive slices of at most `cap` contributions.
    let mut budget = Budget::new(opts.memory_budget);
    // Per thread and in total: the counts (8 bytes a slice), the spans (16).
    let hist_bytes = (fine as u64) * 24 * (threads_1 as u64 + 1);
    budget.take_at_most(
        "the writer's and spills' buffers",
        fixed_bytes(opts.memory_budget),
    );
    budget.take_at_most("the slice counts", hist_bytes);
    let cap = (budget.take_rest("a part's keys and entries") / BYTES_PER).min(u32::MAX as u64 - 1);
    let mut part_of = pattern::zeros::<u16>(fine, "the plan's part table")?;
    let mut sizes: Vec<u64> = Vec::new();
    // Each part's first slice: its keys start at `first << split`.
    let mut first_slice: Vec<u64> = Vec::new();
    let mut cur = 0u64;
    for (i, &h) in hist.iter().enumerate() {
        if h > cap {
            let minimum = (h.saturating_mul(BYTES_PER) + (4 << 20) + hist_bytes)
                .saturating_mul(8)
                .div_ceil(7);
            return Err(budget.refuse("a slice of the key space", minimum));
        }
        if cur + h > cap || sizes.is_empty() {
            sizes.push(0);
            first_slice.push(i as u64);
            cur = 0;
        }
        cur += h;
        *sizes.last_mut().unwrap_or(&mut 0) += h;
        part_of[i] = (sizes.len() - 1) as u16;
        if sizes.len() > MAX_PARTS {
            let minimum = budget.total().saturating_mul(2);
            return Err(budget.refuse("the plan's parts (at most 65535)", minimum));
        }
    }
    drop(hist);
    // Trailing empty parts cannot exist (a part opens on its first slice),
    // but an empty plan has one empty part: refused like an empty tensor.
    // `m`: the contributions planned, all but those skipped.
    let m: u64 = sizes.iter().sum();
    if m == 0 {
        return Err(Error::InvalidArgument(if n == 0 {
            "no contributions: a plan needs at least one".into()
        } else {
            format!("all {n} contributions have a negative index: a plan needs at least one")
        }));
    }
    let nparts = sizes.len();

    // 2. Each part's window of positions; then, when the windows are
    // narrow (input in element order), nothing is spilled: a part's keys
    // are read again from its window. Otherwise the keys go to their
    // parts' spills and the part numbers to theirs.
    let mut windows = vec![(u64::MAX, 0u64); nparts];
    for (i, &s) in spans.iter().enumerate() {
        pattern::widen(&mut windows[part_of[i] as usize], s);
    }
    drop(spans);
    for w in windows.iter_mut().filter(|w| w.1 == 0) {
        *w = (0, 0);
    }
    let windowed = windows
        .iter()
        .zip(&sizes)
        .all(|(&(lo, hi), &size)| narrow(hi - lo, size));
    let dir = temp_dir(opts);
    let mut keys: Vec<Spill> = Vec::new();
    let mut ids = None;
    if !windowed {
        let buffer = spill_buffer(budget.total(), nparts + 1);
        for _ in 0..nparts {
            keys.push(Spill::new(&opts.io, &dir, buffer)?);
        }
        let mut part_ids = Spill::new(&opts.io, &dir, buffer)?;
        for k in 0..n {
            if k % (1 << 16) == 0 {
                if stopped(stop) {
                    return Err(pattern::stop_error());
                }
                c.release(k.saturating_sub(1 << 16), k);
            }
            let Some(key) = ks.slot(c, k).map_err(|_| pattern::changed())? else {
                part_ids.put(&SKIPPED.to_le_bytes())?;
                continue;
            };
            let p = part_of[(key >> split) as usize];
            keys[p as usize].put(&key.to_le_bytes())?;
            part_ids.put(&p.to_le_bytes())?;
        }
        c.release(0, n);
        ids = Some(part_ids);
    }
    let mut spills = keys.into_iter();

    // KV entries, then `pattern` part by part, each part's positions
    // into `order`'s room, reserved before it.
    let dup = opts.duplicates.to_string();
    let nf = opts.non_finite.to_string();
    w.add_own_metadata(KEY_VERSION, KvValue::U64(PARTED_VERSION))?;
    w.add_own_metadata(KEY_DIGEST, KvValue::U64(digest))?;
    w.add_own_metadata(KEY_DTYPE, KvValue::String(dtype.name().into()))?;
    w.add_own_metadata(KEY_DUPLICATES, KvValue::String(dup.clone()))?;
    w.add_own_metadata(KEY_EXACT, KvValue::Bool(opts.exact_sums))?;
    w.add_own_metadata(KEY_NON_FINITE, KvValue::String(nf.clone()))?;
    w.add_own_metadata(KEY_PARTS, KvValue::U64(nparts as u64))?;
    w.add_own_metadata(KEY_CONTRIBUTIONS, KvValue::U64(n as u64))?;
    let check = Check {
        shape,
        layout: opts.layout,
        digest,
        dtype: dtype.name(),
        duplicates: &dup,
        exact_sums: opts.exact_sums,
        non_finite: &nf,
        n: n as u64,
        parts: Some(nparts as u64),
    };
    w.add_own_metadata(KEY_CHECK, KvValue::U64(check.value()))?;
    let mut orders = w.reserve_vector(ORDER, DType::U32, m)?;
    let mut table: Vec<(u64, u64)> = Vec::with_capacity(nparts);
    let mut nnz = 0u64;
    {
        let mut t = w.begin_tensor_as(PATTERN, DType::U32, shape, opts.layout)?;
        // At most one entry per contribution: the indices go to their
        // place, the room fewer entries leave is closed at the end.
        t.reserve_indices(n as u64)?;
        // This thread finds and sorts each part's (key, position) pairs;
        // one more writes the part before: its entries to `pattern`, its
        // positions to the orders' spill.
        let (tx, rx) = crossbeam_channel::bounded::<Cut>(1);
        let (made, written) = std::thread::scope(|s| {
            let (ks, t, orders) = (&ks, &mut t, &mut orders);
            let writer = s.spawn(move || -> Result<()> {
                let mut tuple = vec![0u64; rank];
                let mut minors: Vec<u64> = Vec::new();
                let mut run: Vec<u32> = Vec::new();
                for cut in rx {
                    // Under `duplicates = error`, the first entry of more
                    // than one contribution is the error, before any of
                    // the cut is written.
                    if opts.duplicates == DuplicatePolicy::Error {
                        if let Some((k, _)) = cut.entries().find(|&(_, m)| m > 1) {
                            ks.unpack(k, &mut tuple);
                            return Err(Error::DuplicateCoordinate { coordinate: tuple });
                        }
                    }
                    if opts.layout.is_compressed() {
                        // A run per major index (row of CSR, column of CSC),
                        // which may go on from one piece into the next.
                        let d = opts.layout.major_dim();
                        let mut major = None;
                        minors.clear();
                        run.clear();
                        for (k, m) in cut.entries() {
                            ks.unpack(k, &mut tuple);
                            if major != Some(tuple[d]) {
                                if let Some(j) = major {
                                    t.push_run(j, &minors, &run)?;
                                }
                                major = Some(tuple[d]);
                                minors.clear();
                                run.clear();
                            }
                            minors.push(tuple[1 - d]);
                            run.push(m);
                        }
                        if let Some(j) = major {
                            t.push_run(j, &minors, &run)?;
                        }
                    } else {
                        for (k, m) in cut.entries() {
                            ks.unpack(k, &mut tuple);
                            t.push(&tuple, m)?;
                        }
                    }
                    orders.push_le(bytemuck::cast_slice(&cut.order))?;
                }
                Ok(())
            });
            let made = (|| -> Result<()> {
                let mut room = Room::default();
                let low = if split == 0 {
                    0
                } else {
                    u64::MAX >> (64 - split)
                };
                for (p, &size) in sizes.iter().enumerate() {
                    if stopped(stop) {
                        return Err(pattern::stop_error());
                    }
                    // The part's keys lie in its slices.
                    let last = first_slice.get(p + 1).map_or(fine as u64, |&f| f) - 1;
                    let keys = (
                        first_slice[p].checked_shl(split).unwrap_or(0),
                        last.checked_shl(split).unwrap_or(0) | low,
                    );
                    if windowed {
                        let (lo, hi) = (windows[p].0 as usize, windows[p].1 as usize);
                        // What no later part reads is given back as each
                        // pass goes, so that the mapped pages resident are
                        // the windows' overlap, not a whole window.
                        let next = windows[p + 1..].iter().map(|w| w.0 as usize).min();
                        Window {
                            c,
                            ks,
                            split,
                            part_of: &part_of,
                            part: p as u16,
                            lo,
                            len: hi - lo,
                            keep: next.unwrap_or(hi).max(lo),
                        }
                        .gather(threads, stop, &mut room)?;
                    } else {
                        let s = spills
                            .next()
                            .ok_or(Error::Poisoned("planning (a part's spill)"))?;
                        let bytes = s.read_all("a part's keys")?;
                        gather_spilled(&bytes, threads, &mut room)?;
                    }
                    let cut = Cut::of(size as usize, keys, stop, &mut room)?;
                    let entries = cut.pieces.iter().map(|(k, _)| k.len() as u64).sum();
                    table.push((size, entries));
                    nnz += entries;
                    if tx.send(cut).is_err() {
                        // The writer stopped on an error: it says which.
                        return Ok(());
                    }
                }
                Ok(())
            })();
            drop(tx);
            let written = writer
                .join()
                .unwrap_or(Err(Error::Poisoned("planning (the writer panicked)")));
            (made, written)
        });
        written?;
        made?;
        t.finish()?;
    }
    orders.finish(&mut w)?;
    // `part`, streamed from its spill, and the table.
    drop(part_of);
    if let Some(ids) = ids {
        spill_to_vector(&mut w, PART, DType::U16, ids, n as u64)?;
    }
    let mut t = w.begin_vector(PARTS, DType::U64, PART_WORDS * nparts as u64)?;
    for (&(c, e), &(lo, hi)) in table.iter().zip(&windows) {
        for x in [c, e, lo, hi] {
            t.push_le(&x.to_le_bytes())?;
        }
    }
    t.finish()?;
    let s = w.finish()?;
    Ok(PlanFileSummary {
        path: s.path,
        contributions: n as u64,
        nnz,
        parts: nparts,
        windowed,
        bytes: s.bytes,
    })
}

/// Whether a part of `size` contributions whose positions span `span`
/// is refilled from its window of the values (no spill): the window's
/// values take the room the spilled ones would, within half again.
fn narrow(span: u64, size: u64) -> bool {
    span <= size.saturating_add(size / 2) && span <= u32::MAX as u64
}

/// A part's window of the coordinates (input in element order): the
/// positions `lo..lo + len`, of which the part's keys are its own.
struct Window<'a, C> {
    c: &'a C,
    ks: &'a KeyShape,
    split: u32,
    part_of: &'a [u16],
    part: u16,
    lo: usize,
    len: usize,
    /// The first position a later part reads: kept mapped.
    keep: usize,
}

impl<C: Coords> Window<'_, C> {
    /// Positions `from..to` of the window have been read.
    fn release(&self, from: usize, to: usize) {
        let (a, b) = (self.lo + from, (self.lo + to).min(self.keep));
        if b > a {
            self.c.release(a, b);
        }
    }

    /// The part's keys and their positions in the window, read once on
    /// `threads` threads, each range into a list of its own; the pages
    /// are given back as they are read.
    fn gather(&self, threads: usize, stop: Option<&AtomicBool>, room: &mut Room) -> Result<()> {
        let ranges = pattern::ranges(self.len, threads);
        room.lists.resize_with(ranges.len(), List::default);
        let gathered: Vec<Result<()>> = std::thread::scope(|s| {
            let hs: Vec<_> = ranges
                .into_iter()
                .zip(room.lists.iter_mut())
                .map(|((from, to), list)| {
                    s.spawn(move || -> Result<()> {
                        list.clear();
                        let mut given = from;
                        for k in from..to {
                            if k % CHUNK == 0 && k > given {
                                if stopped(stop) {
                                    return Err(pattern::stop_error());
                                }
                                self.release(given, k);
                                given = k;
                            }
                            let Some(key) = self
                                .ks
                                .slot(self.c, self.lo + k)
                                .map_err(|_| pattern::changed())?
                            else {
                                continue;
                            };
                            if self.part_of.get((key >> self.split) as usize) == Some(&self.part) {
                                list.push(key, k as u32)?;
                            }
                        }
                        self.release(given, to);
                        Ok(())
                    })
                })
                .collect();
            pattern::joined(hs)
        });
        gathered.into_iter().collect()
    }
}

/// A part's keys read back from its spill (little-endian u64 words, all
/// of them the part's, their positions in the spill), cut into
/// `threads` lists of consecutive positions.
fn gather_spilled(bytes: &[u8], threads: usize, room: &mut Room) -> Result<()> {
    let n = bytes.len() / 8;
    let ranges = pattern::ranges(n, if n < 1 << 16 { 1 } else { threads });
    room.lists.resize_with(ranges.len(), List::default);
    for ((from, to), list) in ranges.into_iter().zip(room.lists.iter_mut()) {
        list.clear();
        reserve(&mut list.keys, to - from, 8)?;
        reserve(&mut list.positions, to - from, 4)?;
        for j in from..to {
            let b = bytes.get(j * 8..j * 8 + 8).ok_or_else(pattern::changed)?;
            let key = u64::from_le_bytes(b.try_into().map_err(|_| pattern::changed())?);
            list.push(key, j as u32)?;
        }
    }
    Ok(())
}

/// One thread's share of a part: keys and their positions, ascending.
#[derive(Default)]
struct List {
    keys: Vec<u64>,
    positions: Vec<u32>,
}

impl List {
    fn clear(&mut self) {
        self.keys.clear();
        self.positions.clear();
    }

    #[inline]
    fn push(&mut self, key: u64, position: u32) -> Result<()> {
        if self.keys.len() == self.keys.capacity() {
            // Fallible growth, doubling (room not written costs nothing).
            let more = self.keys.len().max(1 << 12);
            reserve(&mut self.keys, more, 8)?;
            reserve(&mut self.positions, more, 4)?;
        }
        self.keys.push(key);
        self.positions.push(position);
        Ok(())
    }
}

/// What planning keeps from part to part: each thread's list of the
/// part's keys, and the keys and positions placed in their buckets.
#[derive(Default)]
struct Room {
    lists: Vec<List>,
    keys: Vec<u64>,
    positions: Vec<u32>,
}

/// A part's contributions ordered by (key, position) and cut into
/// entries: each piece's entry keys and contribution counts (pieces in
/// key order, one per thread), and the positions, entry after entry.
struct Cut {
    pieces: Vec<(Vec<u64>, Vec<u32>)>,
    order: Vec<u32>,
}

impl Cut {
    /// The entries' keys and contribution counts, in key order.
    fn entries(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.pieces
            .iter()
            .flat_map(|(k, c)| k.iter().copied().zip(c.iter().copied()))
    }

    /// Cut one part of `size` contributions, gathered in `room.lists`
    /// (one per thread, positions ascending from list to list), whose keys
    /// lie in `keys.0..=keys.1`, in the in-memory planner's passes, each
    /// on every thread:
    ///
    /// 1. each list counted by bucket (about four keys' room each, fewer
    ///    with many threads);
    /// 2. each list's keys and positions placed at its next slots in
    ///    their buckets, so that a bucket holds its positions ascending;
    /// 3. each thread orders its piece's buckets by (key, position) in
    ///    cache (one packed u64 per contribution when the bucket's keys
    ///    differ in 32 low bits at most) and cuts them into entries.
    fn of(
        size: usize,
        keys: (u64, u64),
        stop: Option<&AtomicBool>,
        room: &mut Room,
    ) -> Result<Cut> {
        let threads = room.lists.len().max(1);
        let (lo, span) = (keys.0, keys.1.saturating_sub(keys.0));
        let want = (size / threads.max(4)).max(1) as u64;
        let mut shift = 0u32;
        while shift < 63 && (span >> shift) >= want {
            shift += 1;
        }
        let buckets = (span >> shift) as usize + 1;
        let bucket = move |key: u64| (key.wrapping_sub(lo) >> shift) as usize;
        let lists = &room.lists;

        // 1. Counts per list and bucket.
        let counted: Vec<Result<Vec<u32>>> = std::thread::scope(|s| {
            let hs: Vec<_> = lists
                .iter()
                .map(|list| {
                    s.spawn(move || {
                        let mut counts = pattern::zeros::<u32>(buckets, "a part's bucket counts")?;
                        for &key in &list.keys {
                            *counts.get_mut(bucket(key)).ok_or_else(pattern::changed)? += 1;
                        }
                        Ok(counts)
                    })
                })
                .collect();
            pattern::joined(hs)
        });
        let mut at: Vec<Vec<u32>> = Vec::with_capacity(counted.len());
        for c in counted {
            at.push(c?);
        }
        if stopped(stop) {
            return Err(pattern::stop_error());
        }
        // Each list's first slot in each bucket.
        let start = pattern::bucket_starts(&mut at, "a part's bucket starts")?;
        if start.last().map_or(0, |&t| t as usize) != size {
            return Err(pattern::changed());
        }

        // 2. Place the keys and positions. Each list fills exactly the
        // slots it counted: the slots are disjoint.
        room.keys.clear();
        room.positions.clear();
        reserve(&mut room.keys, size, 8)?;
        reserve(&mut room.positions, size, 4)?;
        room.keys.resize(size, 0);
        room.positions.resize(size, 0);
        {
            let (kk, pp) = (
                pattern::atomic_u64(&mut room.keys),
                pattern::atomic_u32(&mut room.positions),
            );
            std::thread::scope(|s| {
                for (list, at) in lists.iter().zip(at.iter_mut()) {
                    s.spawn(move || {
                        for (&key, &k) in list.keys.iter().zip(&list.positions) {
                            // Counted above: the bucket and slot exist.
                            let slot = &mut at[bucket(key)];
                            kk[*slot as usize].store(key, Ordering::Relaxed);
                            pp[*slot as usize].store(k, Ordering::Relaxed);
                            *slot += 1;
                        }
                    });
                }
            });
        }
        drop(at);

        // 3. Pieces of whole buckets, about equal in count, each ordered
        // and cut on a thread of its own.
        let mut order = Vec::new();
        reserve(&mut order, size, 4)?;
        order.resize(size, 0u32);
        let cuts = pattern::piece_cuts(&start, threads);
        let (keys, positions, start) = (&room.keys[..], &room.positions[..], &start[..]);
        let pieces: Vec<Result<(Vec<u64>, Vec<u32>)>> = std::thread::scope(|s| {
            let mut rest: &mut [u32] = &mut order;
            let mut hs = Vec::with_capacity(cuts.len());
            for w in cuts.windows(2) {
                let (b0, b1) = (w[0], w[1]);
                let (seg, tail) =
                    std::mem::take(&mut rest).split_at_mut((start[b1] - start[b0]) as usize);
                rest = tail;
                hs.push(s.spawn(move || {
                    if stopped(stop) {
                        return Err(pattern::stop_error());
                    }
                    cut_piece(keys, positions, start, b0, b1, lo, shift, seg)
                }));
            }
            pattern::joined(hs)
        });
        let mut out = Vec::with_capacity(pieces.len());
        for p in pieces {
            out.push(p?);
        }
        Ok(Cut { pieces: out, order })
    }
}

/// Buckets `b0..b1` of a part's placed `keys` and `positions`, ordered by
/// (key, position): their positions into `seg` (little-endian, as the
/// plan file stores them), their entries' keys and contribution counts
/// returned.
#[allow(clippy::too_many_arguments)]
fn cut_piece(
    keys: &[u64],
    positions: &[u32],
    start: &[u32],
    b0: usize,
    b1: usize,
    lo: u64,
    shift: u32,
    seg: &mut [u32],
) -> Result<(Vec<u64>, Vec<u32>)> {
    seg.copy_from_slice(&positions[start[b0] as usize..start[b1] as usize]);
    // Within a bucket the keys differ in their low `shift` bits only.
    let origin = |b: usize| lo.wrapping_add((b as u64) << shift);
    let cut = pattern::cut_buckets(start, b0, b1, seg, shift, origin, |b, slot, _| {
        Ok(keys[slot].wrapping_sub(origin(b)))
    })?;
    for k in seg.iter_mut() {
        *k = k.to_le();
    }
    Ok(cut)
}

/// A dense vector `name` of `n` elements of `dtype` (a plan's part
/// numbers), copied from a spill of their little-endian words.
fn spill_to_vector(w: &mut FileWriter, name: &str, dtype: DType, s: Spill, n: u64) -> Result<()> {
    let width = dtype.width();
    let mut r = s.finish()?;
    if r.bytes != n * width as u64 {
        return Err(pattern::changed());
    }
    let mut t = w.begin_vector(name, dtype, n)?;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; width * CHUNK];
    let mut left = r.bytes;
    while left > 0 {
        let b = &mut buf[..left.min((width * CHUNK) as u64) as usize];
        r.read_exact(b)?;
        h.update(b);
        t.push_le(b)?;
        left -= b.len() as u64;
    }
    r.check(h.digest(), name)?;
    t.finish()
}
