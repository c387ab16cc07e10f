//! Deferred chunks: while everything pushed fits the budget, a
//! [`crate::Builder`] keeps its full chunks as they were pushed instead of
//! sorting them into runs, and `finish` assembles them with the in-memory
//! kernel (`direct/`): no run, no merge, no spill (issue 23). When the
//! chunks outgrow their share of the budget, or the kernel declines them
//! at `finish`, they go to the sorters and the assembly goes on as before,
//! so the file is the same either way, byte for byte.
//!
//! ## The budget
//!
//! A deferred chunk leaves the pool, and the pool gets a fresh, empty one
//! for it, so pushers never wait. Chunks are kept while the chunk bytes
//! allocated (kept, and the pushers') stay within `Plan::defer_bytes`:
//! the whole budget but the fixed buffers and the sort scratch's share.
//! Each pusher's next chunk fits in that share (nothing is sorted
//! meanwhile), and at `finish`, the pushers' last chunks kept too, it is
//! what the kernel works in. When the chunks kept are sorted after all,
//! as many chunks as the pool was given leave it as they come back
//! ([`Core::surplus`]).

use crate::assemble::direct::input::Held;
use crate::assemble::key::Key;
use crate::assemble::run::stop_sorters;
use crate::assemble::shared::{Core, Deferred};
use crate::assemble::sort::Record;
use crate::assemble::summary::Summary;
use crate::error::Result;
use crate::progress::Step;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

impl<K: Key> Core<K> {
    /// A full (or last) chunk made into a run: kept for the in-memory
    /// kernel while everything fits (`deferred.rs`), else sent to a sorter
    /// thread, or with `threads = 1` sorted here and put back in the pool
    /// empty.
    pub(crate) fn dispatch(&self, chunk: Vec<Record<K>>, origin: u64) {
        let bytes = chunk.len() as u64 * self.plan.record_bytes;
        self.opts.progress.add_in(Step::Push, bytes);
        if let Some((chunk, origin)) = self.defer(chunk, origin) {
            self.sort_chunk(chunk, origin);
        }
    }

    fn lock_deferred(&self) -> MutexGuard<'_, Deferred<K>> {
        self.deferred.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keep `chunk` for the kernel while the chunks allocated are within
    /// the limit, giving the pool a fresh chunk for it (None). Otherwise it comes back to be sorted,
    /// and when it is the one too many, every chunk kept so far is sent
    /// to be sorted first (the order the runs are made in does not
    /// matter: their origins order them).
    pub(crate) fn defer(
        &self,
        chunk: Vec<Record<K>>,
        origin: u64,
    ) -> Option<(Vec<Record<K>>, u64)> {
        let mut d = self.lock_deferred();
        if !d.open {
            return Some((chunk, origin));
        }
        // The chunk itself is counted: it was allocated by a push.
        if self.budget.in_use() <= d.limit {
            d.chunks.push((origin, chunk));
            drop(d);
            // Unbounded: the send cannot fail while the core lives.
            let _ = self.free_tx.send(Vec::new());
            return None;
        }
        d.open = false;
        let kept = std::mem::take(&mut d.chunks);
        drop(d);
        self.surplus.fetch_add(kept.len(), Ordering::SeqCst);
        for (o, c) in kept {
            self.sort_chunk(c, o);
        }
        Some((chunk, origin))
    }

    /// Stop keeping chunks; the ones kept, in origin order (None when
    /// they went to the sorters).
    fn take_deferred(&self) -> Option<Vec<(u64, Vec<Record<K>>)>> {
        let mut d = self.lock_deferred();
        if !d.open {
            return None;
        }
        d.open = false;
        let mut kept = std::mem::take(&mut d.chunks);
        kept.sort_unstable_by_key(|(o, _)| *o);
        Some(kept)
    }
}

/// `finish` through the in-memory kernel, when the builder kept every
/// chunk: the file, or None when the kernel declined the work (nothing
/// was written, and the chunks went to the sorters: `finish_core` goes
/// on). Every pusher has been dropped.
pub(crate) fn finish_deferred(
    core: &Arc<Core<u64>>,
    path: &Path,
    ingest: Duration,
) -> Result<Option<Summary>> {
    let Some(kept) = core.take_deferred() else {
        return Ok(None);
    };
    // The pool's chunks are free again: the kernel works in their share.
    while let Ok(c) = core.free_rx.try_recv() {
        core.budget
            .sub(c.capacity() as u64 * core.plan.record_bytes);
    }
    let held_bytes: u64 = kept
        .iter()
        .map(|(_, c)| c.capacity() as u64 * core.plan.record_bytes)
        .sum();
    let r = if core.poisoned.load(Ordering::SeqCst) {
        // `finish_core` reports the cause.
        Ok(None)
    } else {
        run_kernel(core, &kept, held_bytes, path)
    };
    match r {
        Ok(Some(mut s)) => {
            stop_sorters(core)?;
            core.budget.sub(held_bytes);
            s.contributions = core.contributions.load(Ordering::Relaxed);
            s.skipped_negative = core.skipped_negative.load(Ordering::Relaxed);
            s.peak_buffer_bytes = core.budget.peak().max(held_bytes + s.peak_buffer_bytes);
            s.time_ingest = ingest;
            let mut stale = std::mem::take(&mut core.lock().stale_removed);
            stale.append(&mut s.stale_removed);
            s.stale_removed = stale;
            Ok(Some(s))
        }
        Ok(None) => {
            // Declined: the sorters take the chunks, and `finish_core`
            // merges their runs (and names what the kernel declined).
            for (o, c) in kept {
                core.sort_chunk(c, o);
            }
            Ok(None)
        }
        Err(e) => {
            core.budget.sub(held_bytes);
            Err(e)
        }
    }
}

/// The kept records through the kernel into the file; None when it
/// declines them (a plan the budget left by the chunks does not allow, a
/// bucket too heavy, a coordinate that does not combine: the sorters'
/// path names it).
fn run_kernel(
    core: &Core<u64>,
    kept: &[(u64, Vec<Record<u64>>)],
    held_bytes: u64,
    path: &Path,
) -> Result<Option<Summary>> {
    core.opts.progress.start(Step::Assemble, 0);
    let chunks: Vec<&[Record<u64>]> = kept.iter().map(|(_, c)| c.as_slice()).collect();
    let held = Held::new(&chunks);
    let rank = core.shape().len();
    let shifts = core.layout.shifts();
    // A complex tensor's keys have the part below every index: the
    // contributions' own keys are the keys shifted down by that bit.
    let (contributions, shifts) = if core.complex.is_some() {
        if shifts.get(rank) != Some(&0) {
            return Ok(None);
        }
        let own: Vec<u32> = shifts[..rank].iter().map(|s| s.saturating_sub(1)).collect();
        (held.len() / 2, own)
    } else {
        (held.len(), shifts.to_vec())
    };
    let dtype = core.out_dtype();
    let Some(plan) = crate::assemble::direct::file_plan(
        core.shape(),
        dtype,
        contributions as u64,
        &core.opts,
        held_bytes,
    ) else {
        return Ok(None);
    };
    plan.assemble_held(&held, &shifts, path, &core.opts, &core.stop)
}
