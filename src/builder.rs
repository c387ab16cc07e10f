//! The assembler: [`Builder`], per-thread [`Pusher`]s, background sorters,
//! and the final merge into a Hurray file.
//!
//! Data flow: a pusher validates each contribution, packs its index tuple
//! into an integer key and appends `(key, raw value)` to its chunk. A full
//! chunk goes over a channel to a sorter thread, and the pusher takes an
//! empty chunk from a fixed pool (waiting if there is none: that is the
//! back-pressure that bounds memory). A sorter radix-sorts the chunk,
//! combines equal keys, and encodes the result as a run, kept in memory
//! while the budget for in-memory runs allows and appended to its spill
//! file otherwise. `finish` merges the runs, in several passes when there
//! are more than the fan-in, and streams the result into the file writer.

use crate::combine::{
    Combiner, CombinerKind, FloatExtreme, FloatFastSum, FloatSum, IntExtreme, IntSum, Last,
    PushValue, Unique,
};
use crate::element::DType;
use crate::error::{Error, Result};
use crate::key::{Key, KeyLayout, KeyWidth, WideKey};
use crate::merge::{combine_error, first_pass_width, Merger};
use crate::options::{AssembleOptions, NonFinitePolicy};
use crate::sort::{sort_records, Record};
use crate::spill::{Run, RunFormat, RunReader, RunWriter, SpillFile};
use crate::write::{FileSummary, FileWriter, WriteOptions};
use crossbeam_channel::{Receiver, Sender};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes the output writer's buffers may take (values + indices streams).
const OUTPUT_BUFFER_BYTES: u64 = 2 << 20;
/// Target payload of a run block.
const BLOCK_TARGET: usize = 64 << 10;
/// Write buffer of a spill file writer.
const SPILL_BUFFER: usize = 256 << 10;
/// Fewest records a chunk may hold: below this, runs get so short that
/// merging them costs more than it saves.
const MIN_CHUNK_RECORDS: u64 = 4096;
/// Share of the free budget given to chunks and sort scratch during
/// ingestion; the rest holds in-memory runs.
const CHUNK_SHARE: f64 = 0.6;
/// Largest ingest chunk (and so sort scratch) in bytes. Beyond this a
/// larger budget only hurts: every chunk and scratch byte is faulted in
/// fresh (measured 1.4-2 s per GiB here), and with few, huge chunks the last
/// one is sorted while the other core idles. On 5e7 FE contributions at a
/// 4 GiB budget, uncapped (409 MiB) chunks cost 2.2-3.3 s of system time
/// and 1.7 GB of RSS against 1.6 s and 650 MB with this cap. What the
/// chunks no longer take goes to in-memory runs. 64 MiB still leaves
/// 4 Mi u64 records per run, sorted in L2-sized buckets.
const CHUNK_MAX_BYTES: u64 = 64 << 20;

/// What an assembly did, returned by [`Builder::finish`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Summary {
    /// The file written.
    pub path: PathBuf,
    /// Contributions pushed.
    pub contributions: u64,
    /// Entries in the file.
    pub nnz: u64,
    /// Entries dropped because their combined value was zero.
    pub dropped_zeros: u64,
    /// Sorted runs made from chunks.
    pub runs: u64,
    /// Of those, runs written to disk.
    pub runs_spilled: u64,
    /// Merge passes, the final one included (0 when nothing was pushed).
    pub merge_passes: u32,
    /// Bytes written to spill files, all passes included.
    pub bytes_spilled: u64,
    /// Largest number of bytes the assembler's buffers held at once.
    pub peak_buffer_bytes: u64,
    /// The budget they had to stay under.
    pub memory_budget: u64,
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

/// How the budget is divided; derived once from the options.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    chunk_records: usize,
    sorters: usize,
    max_pushers: usize,
    n_chunks: usize,
    held_limit: u64,
    est_bytes_per_record: u64,
    fan_in: usize,
    record_bytes: u64,
}

impl Plan {
    fn new(opts: &AssembleOptions, record_bytes: u64, est_bytes_per_record: u64) -> Result<Plan> {
        let sorters = opts.threads;
        let max_pushers = opts.threads;
        let n_chunks = max_pushers + sorters;
        let units = (n_chunks + sorters) as u64; // chunks + one sort scratch per sorter
        let fixed =
            OUTPUT_BUFFER_BYTES + sorters as u64 * (SPILL_BUFFER as u64 + 2 * BLOCK_TARGET as u64);
        let min_chunk_bytes = MIN_CHUNK_RECORDS * record_bytes;
        let minimum = fixed + ((units * min_chunk_bytes) as f64 / CHUNK_SHARE).ceil() as u64;
        if opts.memory_budget < minimum {
            return Err(Error::BudgetTooSmall {
                budget: opts.memory_budget,
                minimum,
            });
        }
        let free = opts.memory_budget - fixed;
        let chunk_bytes = (((free as f64 * CHUNK_SHARE) as u64) / units).min(CHUNK_MAX_BYTES);
        let chunk_records = (chunk_bytes / record_bytes).min(u32::MAX as u64) as usize;
        let held_limit = free - (chunk_bytes * units);
        // In the merge phase the chunk area is free again: readers get it.
        let reader_bytes = (BLOCK_TARGET + 4096) as u64 * 2;
        let fan_in =
            ((chunk_bytes * units) / reader_bytes).clamp(2, opts.max_fan_in as u64) as usize;
        Ok(Plan {
            chunk_records,
            sorters,
            max_pushers,
            n_chunks,
            held_limit,
            est_bytes_per_record,
            fan_in,
            record_bytes,
        })
    }
}

/// Buffer bytes in use, and the peak.
#[derive(Default, Debug)]
struct MemTracker {
    now: AtomicU64,
    peak: AtomicU64,
}

impl MemTracker {
    fn add(&self, n: u64) {
        let now = self.now.fetch_add(n, Ordering::Relaxed) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
    }
    fn sub(&self, n: u64) {
        self.now.fetch_sub(n, Ordering::Relaxed);
    }
}

enum Job<K> {
    Sort { chunk: Vec<Record<K>>, origin: u64 },
    Stop,
}

#[derive(Default)]
struct Shared {
    runs: Vec<Run>,
    error: Option<Error>,
    spill_dir: Option<tempfile::TempDir>,
    /// Leftovers of killed runs removed when this assembly started.
    stale_removed: Vec<PathBuf>,
}

/// Everything the pushers, sorters and finish share, for one key type.
struct Core<K: Key> {
    layout: KeyLayout,
    dtype: DType,
    kind: CombinerKind,
    opts: AssembleOptions,
    plan: Plan,
    run_format: RunFormat,
    free_tx: Sender<Vec<Record<K>>>,
    free_rx: Receiver<Vec<Record<K>>>,
    work_tx: Sender<Job<K>>,
    work_rx: Receiver<Job<K>>,
    shared: Mutex<Shared>,
    poisoned: AtomicBool,
    held: AtomicU64,
    mem: MemTracker,
    pushers_alive: AtomicUsize,
    next_pusher: AtomicU64,
    next_run: AtomicU64,
    contributions: AtomicU64,
    runs_spilled: AtomicU64,
    bytes_spilled: AtomicU64,
    sort_nanos: AtomicU64,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl<K: Key> Core<K> {
    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A sorter never panics while holding the lock; if one did, the
        // data is still consistent (plain pushes), so recover it.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remember the first error and stop further work.
    fn fail(&self, e: Error) {
        let mut s = self.lock();
        if s.error.is_none() {
            s.error = Some(e);
        }
        self.poisoned.store(true, Ordering::SeqCst);
    }

    /// The private spill directory, made on first use.
    fn spill_dir(&self) -> Result<PathBuf> {
        let mut s = self.lock();
        if let Some(d) = &s.spill_dir {
            return Ok(d.path().to_path_buf());
        }
        let base = self
            .opts
            .temp_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let d = self.opts.io.tempdir_in(&base)?;
        let p = d.path().to_path_buf();
        s.spill_dir = Some(d);
        Ok(p)
    }
}

/// Run `$body` with `$c` bound to the combiner for `$kind` and `$dtype`.
macro_rules! with_combiner {
    ($kind:expr, $dtype:expr, $c:ident => $body:expr) => {
        match $kind {
            CombinerKind::FloatSum => {
                let $c = FloatSum($dtype);
                $body
            }
            CombinerKind::FloatFastSum => {
                let $c = FloatFastSum($dtype);
                $body
            }
            CombinerKind::FloatExtreme { max } => {
                let $c = FloatExtreme { dtype: $dtype, max };
                $body
            }
            CombinerKind::IntSum => {
                let $c = IntSum($dtype);
                $body
            }
            CombinerKind::IntExtreme { max } => {
                let $c = IntExtreme { dtype: $dtype, max };
                $body
            }
            CombinerKind::Last => {
                let $c = Last($dtype);
                $body
            }
            CombinerKind::Unique => {
                let $c = Unique($dtype);
                $body
            }
        }
    };
}

/// Largest encoded accumulator we plan for: a two-double exact sum (the
/// compact form, 17 bytes), an i128 zigzag varint, or origin + value for
/// `last`. Rarer, longer expansions may grow an in-memory run past it.
fn est_acc_bytes(kind: CombinerKind) -> u64 {
    match kind {
        CombinerKind::FloatSum => 17,
        CombinerKind::FloatFastSum | CombinerKind::FloatExtreme { .. } | CombinerKind::Unique => 8,
        CombinerKind::IntSum | CombinerKind::IntExtreme { .. } => 19,
        CombinerKind::Last => 18,
    }
}

fn new_core<K: Key>(
    layout: KeyLayout,
    dtype: DType,
    opts: AssembleOptions,
) -> Result<Arc<Core<K>>> {
    let kind = CombinerKind::of(dtype, opts.duplicates, opts.exact_sums);
    let record_bytes = std::mem::size_of::<Record<K>>() as u64;
    let key_varint = (layout.total_bits() as u64).div_ceil(7).max(1);
    let plan = Plan::new(&opts, record_bytes, key_varint + est_acc_bytes(kind))?;
    let mut fp = Vec::new();
    for d in layout.shape() {
        fp.extend_from_slice(&d.to_le_bytes());
    }
    fp.push(dtype.tag());
    fp.extend_from_slice(format!("{kind:?}/{}", K::BITS).as_bytes());
    let run_format = RunFormat {
        key_bits: layout.total_bits(),
        fingerprint: xxhash_rust::xxh3::xxh3_64(&fp),
        block_target: BLOCK_TARGET,
    };
    // Leftovers of killed runs (their pid is dead) go before we add ours.
    let base = opts.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
    let stale_removed = crate::sweep::remove_stale_temp_dirs(&base).unwrap_or_default();
    let (free_tx, free_rx) = crossbeam_channel::unbounded();
    let (work_tx, work_rx) = crossbeam_channel::unbounded();
    for _ in 0..plan.n_chunks {
        // Empty until first used: memory is touched only as data arrives.
        let _ = free_tx.send(Vec::new());
    }
    let core = Arc::new(Core {
        layout,
        dtype,
        kind,
        opts,
        plan,
        run_format,
        free_tx,
        free_rx,
        work_tx,
        work_rx,
        shared: Mutex::new(Shared {
            stale_removed,
            ..Shared::default()
        }),
        poisoned: AtomicBool::new(false),
        held: AtomicU64::new(0),
        mem: MemTracker::default(),
        pushers_alive: AtomicUsize::new(0),
        next_pusher: AtomicU64::new(0),
        next_run: AtomicU64::new(0),
        contributions: AtomicU64::new(0),
        runs_spilled: AtomicU64::new(0),
        bytes_spilled: AtomicU64::new(0),
        sort_nanos: AtomicU64::new(0),
        threads: Mutex::new(Vec::new()),
    });
    let mut handles = Vec::new();
    for i in 0..core.plan.sorters {
        let c = Arc::clone(&core);
        let h = std::thread::Builder::new()
            .name(format!("coo-sort-{i}"))
            .spawn(move || {
                let (kind, dtype) = (c.kind, c.dtype);
                with_combiner!(kind, dtype, comb => sorter_loop(&c, &comb))
            })
            .map_err(|e| Error::io("spawn sorter thread", "", e))?;
        handles.push(h);
    }
    *core.threads.lock().unwrap_or_else(|e| e.into_inner()) = handles;
    Ok(core)
}

fn sorter_loop<K: Key, C: Combiner>(core: &Core<K>, comb: &C) {
    let mut scratch: Vec<Record<K>> = Vec::new();
    let mut raws: Vec<u64> = Vec::new();
    let mut spill: Option<SpillFile> = None;
    while let Ok(job) = core.work_rx.recv() {
        let (mut chunk, origin) = match job {
            Job::Sort { chunk, origin } => (chunk, origin),
            Job::Stop => break,
        };
        if !core.poisoned.load(Ordering::Relaxed) {
            let t = Instant::now();
            let before = scratch.capacity();
            // The sort scratch is as large as a chunk: reserve it here so
            // that running out of memory is an error, not an abort.
            let want = chunk.len().saturating_sub(scratch.len());
            let r = if scratch.capacity() < chunk.len() && scratch.try_reserve_exact(want).is_err()
            {
                Err(Error::OutOfMemory {
                    what: "sort scratch",
                    bytes: chunk.len() as u64 * core.plan.record_bytes,
                })
            } else {
                make_run(
                    core,
                    comb,
                    &mut chunk,
                    origin,
                    &mut scratch,
                    &mut raws,
                    &mut spill,
                )
            };
            let grown = scratch.capacity().saturating_sub(before) as u64;
            core.mem.add(grown * core.plan.record_bytes);
            if let Err(e) = r {
                core.fail(e);
            }
            core.sort_nanos
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        chunk.clear();
        let _ = core.free_tx.send(chunk);
    }
    core.mem
        .sub(scratch.capacity() as u64 * core.plan.record_bytes);
}

/// Sort one chunk, combine equal keys, and write the result as a run.
fn make_run<K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &C,
    chunk: &mut [Record<K>],
    origin: u64,
    scratch: &mut Vec<Record<K>>,
    raws: &mut Vec<u64>,
    spill: &mut Option<SpillFile>,
) -> Result<()> {
    let bits = core.layout.total_bits();
    sort_records(chunk, scratch, bits);
    let id = core.next_run.fetch_add(1, Ordering::Relaxed);
    let est = chunk.len() as u64 * core.plan.est_bytes_per_record + 64;
    // Reserve room among the in-memory runs, or spill.
    let in_memory = core
        .held
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |h| {
            (h + est <= core.plan.held_limit).then_some(h + est)
        })
        .is_ok();
    let io = &core.opts.io;
    let result = (|| -> Result<Run> {
        let mut w = if in_memory {
            RunWriter::memory(comb, id, core.run_format, est as usize, io)?
        } else {
            if spill.is_none() {
                *spill = Some(SpillFile::create(&core.spill_dir()?, io)?);
            }
            let Some(sf) = spill.as_mut() else {
                return Err(Error::Poisoned("spill file"));
            };
            RunWriter::file(comb, id, core.run_format, sf, SPILL_BUFFER, io)
        };
        let n = chunk.len();
        let mut i = 0;
        while i < n {
            let key = chunk[i].key;
            let mut j = i + 1;
            while j < n && chunk[j].key == key {
                j += 1;
            }
            let acc = if j == i + 1 {
                comb.combine_group(&[chunk[i].val], origin)
            } else {
                raws.clear();
                raws.extend(chunk[i..j].iter().map(|r| r.val));
                comb.combine_group(raws, origin)
            }
            .map_err(|e| combine_error(&core.layout, core.dtype, &key, e))?;
            w.push(key, &acc)?;
            i = j;
        }
        w.finish()
    })();
    if in_memory {
        core.held.fetch_sub(est, Ordering::SeqCst);
    }
    let run = result?;
    if run.is_spilled() {
        core.runs_spilled.fetch_add(1, Ordering::Relaxed);
        core.bytes_spilled.fetch_add(run.bytes, Ordering::Relaxed);
    } else {
        core.held.fetch_add(run.bytes, Ordering::SeqCst);
        core.mem.add(run.bytes);
    }
    core.lock().runs.push(run);
    Ok(())
}

/// One pusher's state for one key type.
struct Local<K: Key> {
    core: Arc<Core<K>>,
    chunk: Vec<Record<K>>,
    origin_base: u64,
    chunk_seq: u64,
    count: u64,
    /// Converted values of one element matrix (reused).
    elem_raws: Vec<u64>,
}

impl<K: Key> Local<K> {
    fn new(core: &Arc<Core<K>>) -> Result<Local<K>> {
        let max = core.plan.max_pushers;
        core.pushers_alive
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1))
            .map_err(|_| {
                Error::InvalidOptions(format!(
                    "at most {max} pushers may be alive at once (options.threads = {max}); raise threads or drop a pusher first"
                ))
            })?;
        let id = core.next_pusher.fetch_add(1, Ordering::SeqCst);
        Ok(Local {
            core: Arc::clone(core),
            chunk: Vec::new(),
            origin_base: id << 32,
            chunk_seq: 0,
            count: 0,
            elem_raws: Vec::new(),
        })
    }

    #[inline]
    fn check(&self, idx: &[u64], n: u64) -> Result<()> {
        let shape = self.core.layout.shape();
        if idx.len() != shape.len() {
            return Err(Error::WrongRank {
                contribution: n,
                expected: shape.len(),
                got: idx.len(),
            });
        }
        for (dim, (&i, &e)) in idx.iter().zip(shape).enumerate() {
            if i >= e {
                return Err(Error::IndexOutOfRange {
                    contribution: n,
                    dim,
                    index: i,
                    extent: e,
                });
            }
        }
        Ok(())
    }

    #[inline]
    fn raw<V: PushValue>(&self, v: V, n: u64) -> Result<u64> {
        let core = &self.core;
        if core.opts.non_finite != NonFinitePolicy::Keep {
            if let Some(f) = v.as_float() {
                let refuse = f.is_nan()
                    || (core.opts.non_finite == NonFinitePolicy::RejectNonFinite
                        && f.is_infinite());
                if refuse {
                    return Err(Error::InvalidValue {
                        contribution: n,
                        value: f.to_string(),
                        reason: "the non-finite policy refuses it",
                    });
                }
            }
        }
        v.to_raw(core.dtype).map_err(|reason| Error::InvalidValue {
            contribution: n,
            value: v.to_string(),
            reason,
        })
    }

    #[inline]
    fn append(&mut self, key: K, raw: u64) -> Result<()> {
        if self.chunk.len() == self.chunk.capacity() {
            self.hand_off()?;
        }
        self.chunk.push(Record { key, val: raw });
        self.count += 1;
        Ok(())
    }

    #[inline]
    fn push<V: PushValue>(&mut self, idx: &[u64], v: V) -> Result<()> {
        let n = self.count;
        self.check(idx, n)?;
        let raw = self.raw(v, n)?;
        let key = self.core.layout.pack::<K>(idx);
        self.append(key, raw)
    }

    /// Send the full chunk to the sorters and take an empty one.
    fn hand_off(&mut self) -> Result<()> {
        let core = Arc::clone(&self.core);
        if core.poisoned.load(Ordering::Relaxed) {
            // The first pusher to notice gets the cause itself; the
            // assembler stays poisoned, so finish() fails too.
            return Err(core.lock().error.take().unwrap_or(Error::Poisoned(
                "assembler (an earlier push returned the cause)",
            )));
        }
        self.send_chunk();
        let mut c = core
            .free_rx
            .recv()
            .map_err(|_| Error::Poisoned("assembler"))?;
        let want = core.plan.chunk_records;
        if c.capacity() < want {
            let had = c.capacity();
            c.try_reserve_exact(want).map_err(|_| Error::OutOfMemory {
                what: "an ingest chunk",
                bytes: want as u64 * core.plan.record_bytes,
            })?;
            core.mem
                .add((c.capacity() - had) as u64 * core.plan.record_bytes);
        }
        self.chunk = c;
        Ok(())
    }

    fn send_chunk(&mut self) {
        if self.chunk.is_empty() {
            return;
        }
        let chunk = std::mem::take(&mut self.chunk);
        let origin = self.origin_base | self.chunk_seq;
        self.chunk_seq += 1;
        // The receiver lives in the core we hold: the send cannot fail.
        let _ = self.core.work_tx.send(Job::Sort { chunk, origin });
    }
}

impl<K: Key> Drop for Local<K> {
    fn drop(&mut self) {
        // Hand the partial chunk over (a channel send, no I/O): nothing
        // pushed is lost when a pusher goes out of scope.
        if self.chunk.is_empty() && self.chunk.capacity() > 0 {
            let c = std::mem::take(&mut self.chunk);
            let _ = self.core.free_tx.send(c);
        } else {
            self.send_chunk();
        }
        self.core
            .contributions
            .fetch_add(self.count, Ordering::Relaxed);
        self.core.pushers_alive.fetch_sub(1, Ordering::SeqCst);
    }
}

enum AnyCore {
    U64(Arc<Core<u64>>),
    U128(Arc<Core<u128>>),
    W256(Arc<Core<WideKey<4>>>),
    W4096(Arc<Core<WideKey<64>>>),
}

enum AnyLocal {
    U64(Local<u64>),
    U128(Local<u128>),
    W256(Local<WideKey<4>>),
    W4096(Local<WideKey<64>>),
}

macro_rules! each {
    ($enum:ident, $x:expr, $v:ident => $body:expr) => {
        match $x {
            $enum::U64($v) => $body,
            $enum::U128($v) => $body,
            $enum::W256($v) => $body,
            $enum::W4096($v) => $body,
        }
    };
}

impl AnyCore {
    fn local(&self) -> Result<AnyLocal> {
        Ok(match self {
            AnyCore::U64(c) => AnyLocal::U64(Local::new(c)?),
            AnyCore::U128(c) => AnyLocal::U128(Local::new(c)?),
            AnyCore::W256(c) => AnyLocal::W256(Local::new(c)?),
            AnyCore::W4096(c) => AnyLocal::W4096(Local::new(c)?),
        })
    }
}

/// Assembles one COO tensor from contributions pushed in any order, from
/// any number of threads, under a fixed memory budget.
///
/// ```
/// use coo_assembler::{AssembleOptions, Builder, DType, HurrayFile, Value};
/// let dir = tempfile::tempdir()?;
/// let out = dir.path().join("k.hrry");
/// let mut b = Builder::new(&[3, 3], DType::F64, AssembleOptions::default())?;
/// b.push(&[0, 1], 1.5)?;
/// b.push(&[2, 2], 1.0)?;
/// b.push(&[0, 1], 0.25)?; // duplicates are summed
/// let summary = b.finish(&out)?;
/// assert_eq!(summary.nnz, 2);
/// let file = HurrayFile::open(&out)?;
/// assert_eq!(file.only_tensor()?.get(&[0, 1])?, Value::Float(1.75));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Builder {
    core: AnyCore,
    own: Option<AnyLocal>,
    started: Instant,
}

impl Builder {
    /// A builder for a tensor of `shape` (rank 1 to 64) and element type
    /// `dtype`. Checks the options and the budget; starts the sorter threads.
    pub fn new(shape: &[u64], dtype: DType, opts: AssembleOptions) -> Result<Builder> {
        opts.validate()?;
        if shape.is_empty() || shape.len() > crate::hurray::MAX_RANK {
            return Err(Error::InvalidOptions(format!(
                "rank {} is out of 1..=64 for a COO tensor",
                shape.len()
            )));
        }
        if let Some(d) = shape.iter().position(|&e| e == u64::MAX) {
            return Err(Error::InvalidOptions(format!(
                "dimension {d} has extent u64::MAX, which Hurray reserves for dynamic shapes"
            )));
        }
        let layout = KeyLayout::new(shape);
        let core = match layout.width() {
            KeyWidth::U64 => AnyCore::U64(new_core(layout, dtype, opts)?),
            KeyWidth::U128 => AnyCore::U128(new_core(layout, dtype, opts)?),
            KeyWidth::W256 => AnyCore::W256(new_core(layout, dtype, opts)?),
            KeyWidth::W4096 => AnyCore::W4096(new_core(layout, dtype, opts)?),
        };
        Ok(Builder {
            core,
            own: None,
            started: Instant::now(),
        })
    }

    /// A pusher for one thread. At most `options.threads` may be alive at
    /// once (each holds one chunk of the budget).
    pub fn pusher(&self) -> Result<Pusher<'_>> {
        Ok(Pusher {
            local: self.core.local()?,
            _builder: PhantomData,
        })
    }

    fn own(&mut self) -> Result<&mut AnyLocal> {
        if self.own.is_none() {
            self.own = Some(self.core.local()?);
        }
        // A match, not ok_or: no error value is built and dropped per push.
        match self.own.as_mut() {
            Some(l) => Ok(l),
            None => Err(Error::Poisoned("builder")),
        }
    }

    /// Push one contribution from this thread (through a pusher the builder
    /// keeps; it counts as one of the `threads` pushers).
    #[inline]
    pub fn push<V: PushValue>(&mut self, idx: &[u64], value: V) -> Result<()> {
        each!(AnyLocal, self.own()?, l => l.push(idx, value))
    }

    /// Push many contributions: `indices` holds `values.len() * rank`
    /// components, entry i at `indices[i*rank..(i+1)*rank]`.
    pub fn push_many<V: PushValue>(&mut self, indices: &[u64], values: &[V]) -> Result<()> {
        each!(AnyLocal, self.own()?, l => push_many(l, indices, values))
    }

    /// Push rank-2 contributions given as `(values, (rows, cols))`, the
    /// arrays scipy's `coo_array` takes.
    pub fn push_coo<V: PushValue>(
        &mut self,
        rows: &[u64],
        cols: &[u64],
        values: &[V],
    ) -> Result<()> {
        each!(AnyLocal, self.own()?, l => push_coo(l, rows, cols, values))
    }

    /// Push a dense element matrix (rank 2): `local[a * n + b]` goes to
    /// `(dofs[a], dofs[b])`, with `n = dofs.len()`.
    pub fn push_element<V: PushValue>(&mut self, dofs: &[u64], local: &[V]) -> Result<()> {
        each!(AnyLocal, self.own()?, l => push_element(l, dofs, local))
    }

    /// Merge everything and write the tensor to `path` (atomically: a
    /// temporary file in the same directory, fsync, rename). Spill files are
    /// removed whatever the outcome.
    pub fn finish(mut self, path: impl AsRef<Path>) -> Result<Summary> {
        drop(self.own.take());
        let ingest = self.started.elapsed();
        let path = path.as_ref();
        each!(AnyCore, &self.core, c => finish_core(c, path, ingest))
    }
}

fn push_many<K: Key, V: PushValue>(l: &mut Local<K>, indices: &[u64], values: &[V]) -> Result<()> {
    let rank = l.core.layout.rank();
    if indices.len() != values.len() * rank {
        return Err(Error::WrongRank {
            contribution: l.count,
            expected: rank,
            got: indices.len() / values.len().max(1),
        });
    }
    for (idx, &v) in indices.chunks_exact(rank).zip(values) {
        l.push(idx, v)?;
    }
    Ok(())
}

fn push_coo<K: Key, V: PushValue>(
    l: &mut Local<K>,
    rows: &[u64],
    cols: &[u64],
    values: &[V],
) -> Result<()> {
    if l.core.layout.rank() != 2 {
        return Err(Error::WrongRank {
            contribution: l.count,
            expected: l.core.layout.rank(),
            got: 2,
        });
    }
    if rows.len() != values.len() || cols.len() != values.len() {
        return Err(Error::InvalidOptions(format!(
            "push_coo: rows ({}), cols ({}) and values ({}) differ in length",
            rows.len(),
            cols.len(),
            values.len()
        )));
    }
    for ((&r, &c), &v) in rows.iter().zip(cols).zip(values) {
        l.push(&[r, c], v)?;
    }
    Ok(())
}

fn push_element<K: Key, V: PushValue>(l: &mut Local<K>, dofs: &[u64], local: &[V]) -> Result<()> {
    let n = dofs.len();
    if l.core.layout.rank() != 2 {
        return Err(Error::WrongRank {
            contribution: l.count,
            expected: l.core.layout.rank(),
            got: 2,
        });
    }
    if local.len() != n * n {
        return Err(Error::InvalidOptions(format!(
            "push_element: {} dofs need a {n}x{n} matrix ({} values), got {}",
            n,
            n * n,
            local.len()
        )));
    }
    // Validate everything first so that an error leaves nothing half pushed.
    let shape = l.core.layout.shape();
    let extent = shape[0].min(shape[1]);
    for (a, &d) in dofs.iter().enumerate() {
        if d >= extent {
            let dim = usize::from(d < shape[0]);
            return Err(Error::IndexOutOfRange {
                contribution: l.count + (a * n) as u64,
                dim,
                index: d,
                extent: shape[dim],
            });
        }
    }
    // Convert every value before appending any: a refused value leaves
    // nothing of the element pushed.
    let mut raws = std::mem::take(&mut l.elem_raws);
    raws.clear();
    let n0 = l.count;
    for (i, &v) in local.iter().enumerate() {
        match l.raw(v, n0 + i as u64) {
            Ok(r) => raws.push(r),
            Err(e) => {
                l.elem_raws = raws;
                return Err(e);
            }
        }
    }
    let mut result = Ok(());
    'rows: for (&r, row) in dofs.iter().zip(raws.chunks_exact(n.max(1))) {
        for (&c, &raw) in dofs.iter().zip(row) {
            let key = l.core.layout.pack::<K>(&[r, c]);
            if let Err(e) = l.append(key, raw) {
                result = Err(e);
                break 'rows;
            }
        }
    }
    l.elem_raws = raws;
    result
}

/// A handle for pushing from one thread; cheap, `Send`. Dropping it hands
/// its buffered contributions to the builder.
pub struct Pusher<'b> {
    local: AnyLocal,
    _builder: PhantomData<&'b Builder>,
}

impl Pusher<'_> {
    /// Push one contribution.
    #[inline]
    pub fn push<V: PushValue>(&mut self, idx: &[u64], value: V) -> Result<()> {
        each!(AnyLocal, &mut self.local, l => l.push(idx, value))
    }

    /// See [`Builder::push_many`].
    pub fn push_many<V: PushValue>(&mut self, indices: &[u64], values: &[V]) -> Result<()> {
        each!(AnyLocal, &mut self.local, l => push_many(l, indices, values))
    }

    /// See [`Builder::push_coo`].
    pub fn push_coo<V: PushValue>(
        &mut self,
        rows: &[u64],
        cols: &[u64],
        values: &[V],
    ) -> Result<()> {
        each!(AnyLocal, &mut self.local, l => push_coo(l, rows, cols, values))
    }

    /// See [`Builder::push_element`].
    pub fn push_element<V: PushValue>(&mut self, dofs: &[u64], local: &[V]) -> Result<()> {
        each!(AnyLocal, &mut self.local, l => push_element(l, dofs, local))
    }

    /// Contributions pushed through this pusher so far.
    pub fn count(&self) -> u64 {
        each!(AnyLocal, &self.local, l => l.count)
    }
}

fn finish_core<K: Key>(core: &Arc<Core<K>>, path: &Path, ingest: Duration) -> Result<Summary> {
    for _ in 0..core.plan.sorters {
        let _ = core.work_tx.send(Job::Stop);
    }
    let handles = std::mem::take(&mut *core.threads.lock().unwrap_or_else(|e| e.into_inner()));
    for h in handles {
        if h.join().is_err() {
            core.fail(Error::Poisoned("sorter thread (it panicked)"));
        }
    }
    if let Some(e) = core.lock().error.take() {
        return Err(e);
    }
    if core.poisoned.load(Ordering::SeqCst) {
        return Err(Error::Poisoned(
            "assembler (an earlier push returned the cause)",
        ));
    }
    // Chunks are no longer needed: give their memory back before merging.
    while let Ok(c) = core.free_rx.try_recv() {
        core.mem.sub(c.capacity() as u64 * core.plan.record_bytes);
    }
    let (kind, dtype) = (core.kind, core.dtype);
    let r = with_combiner!(kind, dtype, comb => merge_and_write(core, &comb, path, ingest));
    // Spill files and the private directory go now, success or not.
    core.lock().spill_dir.take();
    r
}

fn open_readers<'c, K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &'c C,
    runs: Vec<Run>,
    dir: &Path,
) -> Result<Vec<RunReader<'c, K, C>>> {
    runs.into_iter()
        .map(|r| RunReader::open(comb, r, core.run_format, dir, &core.opts.io))
        .collect()
}

fn merge_and_write<K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &C,
    path: &Path,
    ingest: Duration,
) -> Result<Summary> {
    let mut runs = std::mem::take(&mut core.lock().runs);
    let total_runs = runs.len() as u64;
    let io = &core.opts.io;
    let fan_in = core.plan.fan_in;
    let reader_bytes = (BLOCK_TARGET + 4096) as u64;
    let dir_for_msgs = core
        .lock()
        .spill_dir
        .as_ref()
        .map_or_else(|| PathBuf::from("<memory>"), |d| d.path().to_path_buf());
    let mut passes = 0u32;
    let t_merge = Instant::now();
    let mut pass_spill: Option<SpillFile> = None;
    while runs.len() > fan_in {
        let w = first_pass_width(runs.len(), fan_in);
        runs.sort_by_key(|r| (r.bytes, r.id));
        let group: Vec<Run> = runs.drain(..w).collect();
        let group_mem: u64 = group
            .iter()
            .filter(|r| !r.is_spilled())
            .map(|r| r.bytes)
            .sum();
        let buffers = w as u64 * reader_bytes + SPILL_BUFFER as u64 + BLOCK_TARGET as u64;
        core.mem.add(buffers);
        let id = core.next_run.fetch_add(1, Ordering::Relaxed);
        if pass_spill.is_none() {
            pass_spill = Some(SpillFile::create(&core.spill_dir()?, io)?);
        }
        let Some(sf) = pass_spill.as_mut() else {
            return Err(Error::Poisoned("spill file"));
        };
        let readers = open_readers(core, comb, group, &dir_for_msgs)?;
        let mut merger = Merger::new(comb, &core.layout, core.dtype, readers)?;
        let mut wr = RunWriter::file(comb, id, core.run_format, sf, SPILL_BUFFER, io);
        while let Some((k, acc)) = merger.next_combined()? {
            wr.push(k, &acc)?;
        }
        let run = wr.finish()?;
        drop(merger);
        core.mem.sub(buffers + group_mem);
        core.bytes_spilled.fetch_add(run.bytes, Ordering::Relaxed);
        runs.push(run);
        passes += 1;
    }
    let time_merge = t_merge.elapsed();

    let t_write = Instant::now();
    let buffers = runs.len() as u64 * reader_bytes + OUTPUT_BUFFER_BYTES;
    core.mem.add(buffers);
    if !runs.is_empty() {
        passes += 1;
    }
    let readers = open_readers(core, comb, runs, &dir_for_msgs)?;
    let mut merger = Merger::new(comb, &core.layout, core.dtype, readers)?;
    let (dropped, nnz, fs) = merge_into_file(core, comb, &mut merger, path)?;
    let mut stale_removed = std::mem::take(&mut core.lock().stale_removed);
    stale_removed.extend(fs.stale_removed.iter().cloned());
    drop(merger);
    core.mem.sub(buffers);
    Ok(Summary {
        path: path.to_path_buf(),
        contributions: core.contributions.load(Ordering::Relaxed),
        nnz,
        dropped_zeros: dropped,
        runs: total_runs,
        runs_spilled: core.runs_spilled.load(Ordering::Relaxed),
        merge_passes: passes,
        bytes_spilled: core.bytes_spilled.load(Ordering::Relaxed),
        peak_buffer_bytes: core.mem.peak.load(Ordering::Relaxed),
        memory_budget: core.opts.memory_budget,
        file_bytes: fs.bytes,
        time_ingest: ingest,
        time_sort: Duration::from_nanos(core.sort_nanos.load(Ordering::Relaxed)),
        time_merge,
        time_write: t_write.elapsed(),
        stale_removed,
    })
}

/// Entries handed from the merging thread to the writing thread at once.
const WRITE_BATCH: usize = 16 << 10;

/// Merged entries on their way to the writer.
struct Batch<K, A> {
    keys: Vec<K>,
    accs: Vec<A>,
}

enum ToWriter<K, A> {
    Batch(Batch<K, A>),
    /// Everything was sent: the writer may publish the file.
    Done,
}

/// The final merge, pipelined over two threads: this one merges runs, a
/// second one rounds, unpacks, checks, hashes and writes (the two halves
/// cost about the same). Without an explicit `Done` the writer drops its
/// temporary file, so a merge error can never publish a partial file.
/// Returns (dropped zeros, nnz, file summary).
fn merge_into_file<K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &C,
    merger: &mut Merger<'_, K, C>,
    path: &Path,
) -> Result<(u64, u64, FileSummary)> {
    let (full_tx, full_rx) = crossbeam_channel::bounded::<ToWriter<K, C::Acc>>(1);
    let (empty_tx, empty_rx) = crossbeam_channel::bounded::<Batch<K, C::Acc>>(2);
    for _ in 0..2 {
        let _ = empty_tx.send(Batch {
            keys: Vec::with_capacity(WRITE_BATCH),
            accs: Vec::with_capacity(WRITE_BATCH),
        });
    }
    let wopts = WriteOptions {
        io: core.opts.io.clone(),
        ..WriteOptions::default()
    };
    std::thread::scope(|s| {
        let write = move || -> Result<(u64, u64, FileSummary)> {
            let layout = &core.layout;
            let mut fw = FileWriter::create(path, wopts)?;
            let mut tw = fw.begin_tensor(&core.opts.tensor_name, core.dtype, layout.shape())?;
            let mut idx = vec![0u64; layout.rank()];
            let mut dropped = 0u64;
            for msg in full_rx.iter() {
                match msg {
                    ToWriter::Batch(mut b) => {
                        for (k, acc) in b.keys.iter().zip(&b.accs) {
                            let v = comb
                                .finish(acc)
                                .map_err(|e| combine_error(layout, core.dtype, k, e))?;
                            if core.opts.drop_zeros && v.is_zero() {
                                dropped += 1;
                                continue;
                            }
                            layout.unpack(k, &mut idx);
                            tw.push_value(&idx, v)?;
                        }
                        b.keys.clear();
                        b.accs.clear();
                        let _ = empty_tx.send(b);
                    }
                    ToWriter::Done => {
                        let ts = tw.finish()?;
                        return Ok((dropped, ts.nnz, fw.finish()?));
                    }
                }
            }
            Err(Error::Poisoned("file writer (the merge stopped)"))
        };
        let writer = std::thread::Builder::new()
            .name("coo-write".into())
            .spawn_scoped(s, write)
            .map_err(|e| Error::io("spawn writer thread", path, e))?;
        let merged = (|| -> Result<()> {
            let Ok(mut b) = empty_rx.recv() else {
                return Ok(());
            };
            while let Some((k, acc)) = merger.next_combined()? {
                b.keys.push(k);
                b.accs.push(acc);
                if b.keys.len() == WRITE_BATCH {
                    // A failed send or recv means the writer stopped: its
                    // error is the one to report.
                    if full_tx.send(ToWriter::Batch(b)).is_err() {
                        return Ok(());
                    }
                    match empty_rx.recv() {
                        Ok(e) => b = e,
                        Err(_) => return Ok(()),
                    }
                }
            }
            if full_tx.send(ToWriter::Batch(b)).is_ok() {
                let _ = full_tx.send(ToWriter::Done);
            }
            Ok(())
        })();
        drop(full_tx);
        let written = writer
            .join()
            .unwrap_or(Err(Error::Poisoned("file writer thread (it panicked)")));
        merged?;
        written
    })
}

impl Drop for Builder {
    fn drop(&mut self) {
        // A builder dropped without finish: stop the sorters so their
        // threads end; spill files go with the core.
        drop(self.own.take());
        each!(AnyCore, &self.core, c => {
            c.poisoned.store(true, Ordering::SeqCst);
            for _ in 0..c.plan.sorters {
                let _ = c.work_tx.send(Job::Stop);
            }
            let handles = std::mem::take(&mut *c.threads.lock().unwrap_or_else(|e| e.into_inner()));
            for h in handles {
                let _ = h.join();
            }
            c.lock().spill_dir.take();
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(budget: u64, threads: usize) -> Plan {
        let opts = AssembleOptions {
            memory_budget: budget,
            threads,
            ..AssembleOptions::default()
        };
        match Plan::new(&opts, 16, 8) {
            Ok(p) => p,
            Err(e) => panic!("budget {budget}: {e}"),
        }
    }

    #[test]
    fn plan_caps_chunks_and_gives_the_rest_to_runs() {
        // 256 MiB: 60 % of the free budget over 6 units, below the cap.
        let small = plan(256 << 20, 2);
        let free = (256u64 << 20)
            - OUTPUT_BUFFER_BYTES
            - 2 * (SPILL_BUFFER as u64 + 2 * BLOCK_TARGET as u64);
        assert_eq!(
            small.chunk_records as u64,
            ((free as f64 * CHUNK_SHARE) as u64) / 6 / 16
        );
        // 4 GiB: capped; everything else holds in-memory runs.
        let big = plan(4 << 30, 2);
        assert_eq!(big.chunk_records as u64, CHUNK_MAX_BYTES / 16);
        let fixed = OUTPUT_BUFFER_BYTES + 2 * (SPILL_BUFFER as u64 + 2 * BLOCK_TARGET as u64);
        assert_eq!(big.held_limit, (4u64 << 30) - fixed - 6 * CHUNK_MAX_BYTES);
        assert!(big.fan_in >= small.fan_in);
    }
}
