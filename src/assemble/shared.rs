//! What the pushers, the sorter threads and `finish` share for one key
//! type: the key layout, the budget plan, the chunk pool and the work
//! channel, the runs made so far and the counters of the summary.
//!
//! ## Any number of pushers in a fixed pool of chunks
//!
//! The pool holds `plan.n_chunks` chunks whatever the number of pushers,
//! so the budget bounds the buffers of any number of them. The first
//! `plan.resident_pushers` (= `threads`) pushers alive are *residents*:
//! each keeps its chunk between calls, with no lock on the push path, as
//! before. The others are *guests*: between calls a guest parks its chunk
//! in a [`Parked`] slot. A pusher that needs a chunk when the pool is
//! empty waits only while some chunk is being sorted (it comes back);
//! when none is, every chunk is held by a pusher, and it takes the fullest
//! parked one:
//!
//! - with an order-free policy (all but `last`) it goes on filling it: the
//!   run mixes pushers, which these policies allow, and keeps its length;
//! - with `last` a run must hold one pusher's contributions in its push
//!   order under its origin: the chunk becomes the guest's next run, and
//!   the taker waits for it to come back. Many guests pushing at once then
//!   make shorter runs.
//!
//! So no pusher waits on one between calls, which may never call again
//! before the waiter does (an OpenMP barrier, an idle thread of a pool).
//! Residents hold at most `threads` chunks, so at least the sorters' share
//! is always being sorted, free, parked or in a call that ends.
//!
//! Why not more, smaller chunks as pushers come: a chunk held by a pusher
//! between calls cannot shrink without that pusher, so a newcomer would
//! have to wait for it (a deadlock at a barrier) or go over the budget.
//! Why not put a guest's chunk back in the pool after each call, for
//! anyone to fill: a single-value push through a guest cost 87 ns that
//! way against 30 ns with the slot's two uncontended locks (a resident:
//! 5 ns; best of 7 runs of 1.5e6 pushes each); an element push of 64
//! values pays either once.

use crate::assemble::combine::CombinerKind;
use crate::assemble::direct::groups::KeyGroups;
use crate::assemble::key::{Key, KeyLayout};
use crate::assemble::plan::{BLOCK_TARGET, Plan};
use crate::assemble::sort::Record;
use crate::assemble::spill::{Run, RunFormat, SpillFile};
use crate::budget::Budget;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::fs::names::spill_dir_prefix;
use crate::fs::sweep::remove_stale_temp_dirs;
use crate::options::AssembleOptions;
use crate::progress::Progress;
use crossbeam_channel::{Receiver, Sender};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long a pusher waiting for a chunk sleeps before it looks again for
/// a parked one to take: only when nothing is being sorted and no parked
/// chunk was there, i.e. while every chunk is in a call that will end.
const RECLAIM_POLL: Duration = Duration::from_millis(1);

/// Work for a sorter thread.
pub(crate) enum Job<K> {
    Sort { chunk: Vec<Record<K>>, origin: u64 },
    Stop,
}

#[derive(Default)]
pub(crate) struct Shared {
    pub(crate) runs: Vec<Run>,
    pub(crate) error: Option<Error>,
    pub(crate) spill_dir: Option<tempfile::TempDir>,
    /// Leftovers of killed runs removed when this assembly started.
    pub(crate) stale_removed: Vec<PathBuf>,
    /// The recordings of the pushers gone, when the builder records its
    /// plan.
    pub(crate) recorded: Vec<crate::assemble::record::Segment>,
}

/// What [`Core::reclaim_parked`] found.
enum Reclaimed<K> {
    Nothing,
    /// A chunk to fill further.
    Chunk(Vec<Record<K>>),
    /// A guest's chunk made into its run: it comes back to the pool.
    Sorting,
}

/// A guest pusher's chunk while the guest is between calls, where a
/// pusher that finds the pool empty may take it (see the module docs).
pub(crate) struct Parked<K> {
    pub(crate) slot: Mutex<ParkedChunk<K>>,
    /// The guest's origin base (its creation order, for `last`).
    pub(crate) origin_base: u64,
}

pub(crate) struct ParkedChunk<K> {
    /// Empty (no capacity) while the guest is in a call or was robbed.
    pub(crate) chunk: Vec<Record<K>>,
    /// The sequence number of the guest's next run.
    pub(crate) seq: u64,
}

impl<K> Parked<K> {
    pub(crate) fn new(origin_base: u64) -> Parked<K> {
        Parked {
            slot: Mutex::new(ParkedChunk {
                chunk: Vec::new(),
                seq: 0,
            }),
            origin_base,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, ParkedChunk<K>> {
        // Nothing panics while holding it; the data stays consistent.
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What one sorting thread keeps between chunks: the sort scratch, the
/// values of one key group, and its spill file. A sorter thread owns one;
/// with `threads = 1` the core holds one (`Core::solo`) that the pushers
/// sort with on their own threads.
pub(crate) struct SortState<K> {
    /// The radix sort's scratch (keys wider than 64 bits, or a chunk the
    /// grouping leaves to it).
    pub(super) scratch: Vec<Record<K>>,
    /// The kernel's grouping, which makes most runs of 64-bit keys.
    pub(super) groups: Option<KeyGroups>,
    /// The bytes of `scratch` and `groups` on the budget's books.
    pub(super) accounted: u64,
    pub(super) raws: Vec<u64>,
    pub(super) spill: Option<SpillFile>,
}

impl<K> Default for SortState<K> {
    fn default() -> Self {
        SortState {
            scratch: Vec::new(),
            groups: None,
            accounted: 0,
            raws: Vec::new(),
            spill: None,
        }
    }
}

/// The chunks a builder keeps unsorted.
pub(crate) struct Deferred<K> {
    /// Still keeping chunks: cleared when they outgrow `limit`, and by
    /// `finish`.
    pub(super) open: bool,
    /// Chunk bytes allocated up to which chunks are kept.
    pub(super) limit: u64,
    /// The chunks kept, with their origins (which order them for `last`).
    pub(super) chunks: Vec<(u64, Vec<Record<K>>)>,
}

impl<K> Deferred<K> {
    /// Keeping chunks while `limit` chunk bytes are not exceeded (0:
    /// closed from the start).
    pub(crate) fn new(limit: u64) -> Deferred<K> {
        Deferred {
            open: limit > 0,
            limit,
            chunks: Vec::new(),
        }
    }
}

/// What a merge tells its caller and hears from it: the bytes of runs
/// merged (records times `record_bytes`) and a stop flag.
#[derive(Clone, Copy)]
pub(crate) struct Watch<'a> {
    pub(crate) stop: &'a AtomicBool,
    pub(crate) progress: &'a Progress,
    pub(crate) record_bytes: u64,
}

/// Everything the pushers, sorters and finish share, for one key type.
pub(crate) struct Core<K: Key> {
    /// The keys' layout; for a complex tensor it has one dimension more,
    /// of extent 2: the part (0 real, 1 imaginary).
    pub(crate) layout: KeyLayout,
    /// The type the runs hold and sum: the tensor's, or for a complex
    /// tensor the type of its parts (f32, f64).
    pub(crate) dtype: DType,
    /// The complex type written, for a complex tensor.
    pub(crate) complex: Option<DType>,
    pub(crate) kind: CombinerKind,
    pub(crate) opts: AssembleOptions,
    pub(crate) plan: Plan,
    pub(crate) run_format: RunFormat,
    pub(crate) free_tx: Sender<Vec<Record<K>>>,
    pub(crate) free_rx: Receiver<Vec<Record<K>>>,
    pub(crate) work_tx: Sender<Job<K>>,
    pub(crate) work_rx: Receiver<Job<K>>,
    pub(crate) shared: Mutex<Shared>,
    pub(crate) poisoned: AtomicBool,
    /// Set by a [`crate::builder::Stopper`]: `finish` stops at its next
    /// step and publishes nothing.
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) held: AtomicU64,
    /// The sort buffers the sorters hold now (on `budget`'s books too): an
    /// in-memory run leaves room for the ones still to come.
    pub(crate) sort_buffers: AtomicU64,
    /// The memory budget: the plan's reservations, the bytes in use.
    pub(crate) budget: Budget,
    pub(crate) pushers_alive: AtomicUsize,
    /// Resident pushers alive (at most `plan.resident_pushers`).
    pub(crate) residents: AtomicUsize,
    /// The policy is `last`: a run holds one pusher's contributions in
    /// its push order (a parked chunk taken becomes its guest's run).
    pub(crate) keeps_order: bool,
    /// The guests alive, whose parked chunks a pusher in need may take.
    pub(crate) guests: Mutex<Vec<Arc<Parked<K>>>>,
    /// Chunks sent to the sorter threads and not yet back in the pool.
    pub(crate) in_flight: AtomicUsize,
    /// With `threads = 1`: the one sort state (scratch, spill file) that
    /// every pusher sorts its full chunks with, on its own thread. One,
    /// whatever the number of pushers: the budget has one scratch.
    pub(crate) solo: Option<Mutex<SortState<K>>>,
    pub(crate) next_pusher: AtomicU64,
    pub(crate) next_run: AtomicU64,
    pub(crate) contributions: AtomicU64,
    /// Of those, skipped for a negative index (`skip_negative`).
    pub(crate) skipped_negative: AtomicU64,
    pub(crate) runs_spilled: AtomicU64,
    pub(crate) bytes_spilled: AtomicU64,
    pub(crate) sort_nanos: AtomicU64,
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    /// Disconnected when the builder goes: a pusher that outlives it and
    /// waits for a free chunk wakes up with an error instead of forever.
    pub(crate) closed: Receiver<()>,
    /// Set when the builder is dropped: pushes then say so.
    pub(crate) dropped: AtomicBool,
    /// Full chunks kept unsorted while everything fits the budget, for
    /// the in-memory kernel at `finish` (`deferred.rs`).
    pub(crate) deferred: Mutex<Deferred<K>>,
    /// Chunks to take out of circulation as they come back from the
    /// sorters: the pool got a fresh one for each deferred chunk, and
    /// deferred chunks sorted after all come back too.
    pub(crate) surplus: AtomicUsize,
    /// Set by `Builder::record_plan` before any pusher exists: every
    /// pusher records its coordinates (`record.rs`).
    pub(crate) recording: AtomicBool,
}

impl<K: Key> Core<K> {
    /// The tensor's shape (without the part dimension of a complex one).
    pub(crate) fn shape(&self) -> &[u64] {
        let s = self.layout.shape();
        &s[..s.len() - usize::from(self.complex.is_some())]
    }

    /// The element type written.
    pub(crate) fn out_dtype(&self) -> DType {
        self.complex.unwrap_or(self.dtype)
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        // A sorter never panics while holding the lock; if one did, the
        // data is still consistent (plain pushes), so recover it.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Remember the first error and stop further work.
    pub(crate) fn fail(&self, e: Error) {
        let mut s = self.lock();
        if s.error.is_none() {
            s.error = Some(e);
        }
        self.poisoned.store(true, Ordering::SeqCst);
    }

    /// Take a resident's place if one is free.
    pub(crate) fn claim_resident(&self) -> bool {
        let max = self.plan.resident_pushers;
        self.residents
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    pub(crate) fn lock_guests(&self) -> MutexGuard<'_, Vec<Arc<Parked<K>>>> {
        self.guests.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forget a guest (it left, or became a resident).
    pub(crate) fn unregister(&self, p: &Arc<Parked<K>>) {
        self.lock_guests().retain(|g| !Arc::ptr_eq(g, p));
    }

    /// Claim one of the pool's surplus chunks (see [`Core::surplus`]),
    /// if any is left: the one chunk too many that the caller then drops,
    /// or whose place it takes.
    pub(crate) fn take_surplus(&self) -> bool {
        self.surplus
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }

    /// A sorted chunk back in the pool, or dropped when the pool has one
    /// too many (see [`Core::surplus`]).
    pub(crate) fn recycle(&self, chunk: Vec<Record<K>>) {
        if self.take_surplus() {
            self.budget
                .sub(chunk.capacity() as u64 * self.plan.record_bytes);
        } else {
            let _ = self.free_tx.send(chunk);
        }
    }

    /// A chunk for a pusher that holds none: from the pool, waiting while
    /// chunks are being sorted; a parked one when none is (it may hold a
    /// guest's contributions, see the module docs).
    pub(crate) fn free_chunk(&self) -> Result<Vec<Record<K>>> {
        loop {
            if let Ok(c) = self.free_rx.try_recv() {
                return Ok(c);
            }
            if self.in_flight.load(Ordering::SeqCst) == 0 {
                // A sorter returns its chunk before it counts it back:
                // one returned since the look above is in the pool now.
                if let Ok(c) = self.free_rx.try_recv() {
                    return Ok(c);
                }
                match self.reclaim_parked() {
                    Reclaimed::Nothing => {}
                    Reclaimed::Chunk(c) => return Ok(c),
                    Reclaimed::Sorting => continue,
                }
            }
            // A pusher may outlive its builder: then the `closed` channel
            // is disconnected and the wait ends with an error, not forever.
            crossbeam_channel::select! {
                recv(self.free_rx) -> c => return c.map_err(|_| Error::Poisoned("assembler")),
                recv(self.closed) -> _ => return Err(Error::Finished),
                default(RECLAIM_POLL) => {}
            }
        }
    }

    /// Take the fullest parked chunk: to fill further (order-free
    /// policies, or an empty one), or made into its guest's next run.
    fn reclaim_parked(&self) -> Reclaimed<K> {
        let taken = {
            let guests = self.lock_guests();
            // Busy slots (their guest parking or unparking) are skipped.
            let fullest = guests
                .iter()
                .filter_map(|g| {
                    g.slot
                        .try_lock()
                        .ok()
                        .map(|s| (g, s.chunk.len(), s.chunk.capacity()))
                })
                .filter(|&(_, _, cap)| cap > 0)
                .max_by_key(|&(_, len, _)| len)
                .map(|(g, _, _)| Arc::clone(g));
            fullest.and_then(|g| {
                let mut s = g.slot.try_lock().ok()?;
                if s.chunk.capacity() == 0 {
                    return None;
                }
                let origin = g.origin_base | s.seq;
                let run = self.keeps_order && !s.chunk.is_empty();
                if run {
                    s.seq += 1;
                }
                Some((std::mem::take(&mut s.chunk), origin, run))
            })
        };
        match taken {
            None => Reclaimed::Nothing,
            Some((chunk, origin, true)) => {
                self.dispatch(chunk, origin);
                Reclaimed::Sorting
            }
            Some((chunk, _, false)) => Reclaimed::Chunk(chunk),
        }
    }

    /// The private spill directory, made on first use.
    /// The stop flag and progress a merge of this core's runs watches.
    pub(crate) fn watch(&self) -> Watch<'_> {
        Watch {
            stop: &self.stop,
            progress: &self.opts.progress,
            record_bytes: self.plan.record_bytes,
        }
    }

    pub(crate) fn spill_dir(&self) -> Result<PathBuf> {
        let mut s = self.lock();
        if let Some(d) = &s.spill_dir {
            return Ok(d.path().to_path_buf());
        }
        let base = self
            .opts
            .temp_dir
            .clone()
            .unwrap_or_else(std::env::temp_dir);
        let d = self
            .opts
            .io
            .tempdir_in(&base, &spill_dir_prefix(std::process::id()))?;
        let p = d.path().to_path_buf();
        s.spill_dir = Some(d);
        Ok(p)
    }
}

/// Records per contribution when a builder may keep its chunks for the
/// in-memory kernel; None when the kernel cannot take the work (keys
/// wider than 64 bits) or the caller turned it off.
fn deferrable<K: Key>(opts: &AssembleOptions, complex: bool) -> Option<u64> {
    let ok = opts.in_memory_kernel && K::BITS == 64;
    ok.then_some(if complex { 2 } else { 1 })
}

pub(crate) fn new_core<K: Key>(
    layout: KeyLayout,
    dtype: DType,
    opts: AssembleOptions,
    closed: Receiver<()>,
) -> Result<Arc<Core<K>>> {
    // The fingerprint of the runs names the type written.
    let tag = dtype.tag();
    let complex = dtype.is_complex().then_some(dtype);
    let dtype = dtype.complex_part().unwrap_or(dtype);
    let kind = CombinerKind::of(dtype, opts.duplicates, opts.exact_sums);
    let record_bytes = std::mem::size_of::<Record<K>>() as u64;
    let key_varint = (layout.total_bits() as u64).div_ceil(7).max(1);
    let mut budget = Budget::new(opts.memory_budget);
    let plan = Plan::new(
        &mut budget,
        &opts,
        record_bytes,
        key_varint + kind.est_acc_bytes(),
        deferrable::<K>(&opts, complex.is_some()),
    )?;
    let mut fp = Vec::new();
    for d in layout.shape() {
        fp.extend_from_slice(&d.to_le_bytes());
    }
    fp.push(tag);
    fp.extend_from_slice(format!("{kind:?}/{}", K::BITS).as_bytes());
    let run_format = RunFormat {
        key_bits: layout.total_bits(),
        fingerprint: xxhash_rust::xxh3::xxh3_64(&fp),
        block_target: BLOCK_TARGET,
    };
    // Leftovers of killed runs (their pid is dead) go before we add ours.
    // A spill thousands of pushes later is no time to find the folder
    // missing: refuse it now.
    let base = opts.checked_temp_dir()?;
    let stale_removed = remove_stale_temp_dirs(&opts.io, &base).unwrap_or_default();
    let one_thread = plan.one_thread;
    let deferred = Deferred::new(plan.defer_bytes);
    let (free_tx, free_rx) = crossbeam_channel::unbounded();
    let (work_tx, work_rx) = crossbeam_channel::unbounded();
    for _ in 0..plan.n_chunks {
        // Empty until first used: memory is touched only as data arrives.
        let _ = free_tx.send(Vec::new());
    }
    let core = Arc::new(Core {
        layout,
        dtype,
        complex,
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
        stop: Arc::new(AtomicBool::new(false)),
        held: AtomicU64::new(0),
        sort_buffers: AtomicU64::new(0),
        budget,
        pushers_alive: AtomicUsize::new(0),
        residents: AtomicUsize::new(0),
        keeps_order: kind == CombinerKind::Last,
        guests: Mutex::new(Vec::new()),
        in_flight: AtomicUsize::new(0),
        solo: one_thread.then(|| Mutex::new(SortState::default())),
        next_pusher: AtomicU64::new(0),
        next_run: AtomicU64::new(0),
        contributions: AtomicU64::new(0),
        skipped_negative: AtomicU64::new(0),
        runs_spilled: AtomicU64::new(0),
        bytes_spilled: AtomicU64::new(0),
        sort_nanos: AtomicU64::new(0),
        threads: Mutex::new(Vec::new()),
        closed,
        dropped: AtomicBool::new(false),
        deferred: Mutex::new(deferred),
        surplus: AtomicUsize::new(0),
        recording: AtomicBool::new(false),
    });
    Ok(core)
}
