//! What the pushers, the sorter threads and `finish` share for one key
//! type: the key layout, the budget plan, the chunk pool and the work
//! channel, the runs made so far and the counters of the summary.

use crate::assemble::combine::CombinerKind;
use crate::assemble::key::{Key, KeyLayout};
use crate::assemble::plan::{est_acc_bytes, MemTracker, Plan, BLOCK_TARGET};
use crate::assemble::sort::Record;
use crate::assemble::spill::{Run, RunFormat};
use crate::element::DType;
use crate::error::{Error, Result};
use crate::fs::names::spill_dir_prefix;
use crate::fs::sweep::remove_stale_temp_dirs;
use crate::options::AssembleOptions;
use crossbeam_channel::{Receiver, Sender};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

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
}

/// Everything the pushers, sorters and finish share, for one key type.
pub(crate) struct Core<K: Key> {
    pub(crate) layout: KeyLayout,
    pub(crate) dtype: DType,
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
    pub(crate) held: AtomicU64,
    pub(crate) mem: MemTracker,
    pub(crate) pushers_alive: AtomicUsize,
    pub(crate) next_pusher: AtomicU64,
    pub(crate) next_run: AtomicU64,
    pub(crate) contributions: AtomicU64,
    pub(crate) runs_spilled: AtomicU64,
    pub(crate) bytes_spilled: AtomicU64,
    pub(crate) sort_nanos: AtomicU64,
    pub(crate) threads: Mutex<Vec<JoinHandle<()>>>,
    /// Disconnected when the builder goes: a pusher that outlives it and
    /// waits for a free chunk wakes up with an error instead of forever.
    pub(crate) closed: Receiver<()>,
    /// Set when the builder is dropped: pushes then say so.
    pub(crate) dropped: AtomicBool,
}

impl<K: Key> Core<K> {
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

    /// The private spill directory, made on first use.
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
        let d = self.opts.io.tempdir_in(&base, &spill_dir_prefix(std::process::id()))?;
        let p = d.path().to_path_buf();
        s.spill_dir = Some(d);
        Ok(p)
    }
}

pub(crate) fn new_core<K: Key>(
    layout: KeyLayout,
    dtype: DType,
    opts: AssembleOptions,
    closed: Receiver<()>,
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
    // A spill thousands of pushes later is no time to find the folder
    // missing: refuse it now.
    crate::fs::output::check_writable_dir(&opts.io, &base, "temp_dir")?;
    let stale_removed = remove_stale_temp_dirs(&opts.io, &base).unwrap_or_default();
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
        closed,
        dropped: AtomicBool::new(false),
    });
    Ok(core)
}

