//! Run making: the sorter threads group full chunks by key (the kernel's
//! grouping, or the radix sort for keys it leaves), combine each key's
//! values into an accumulator, and encode the result as a run kept in
//! memory or appended to the sorter's spill file.

use crate::assemble::combine::combine_error;
use crate::assemble::combine::{Combiner, with_combiner};
use crate::assemble::direct::groups::{Buckets, KeyGroups};
use crate::assemble::key::Key;
use crate::assemble::plan::SPILL_BUFFER;
use crate::assemble::shared::{Core, Job, SortState};
use crate::assemble::sort::{Record, sort_records};
use crate::assemble::spill::{RunWriter, SpillFile};
use crate::error::{Error, Result};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// Start the sorter threads of `core` (none with `threads = 1`: the
/// pusher sorts its own chunks, see [`SortState`]).
pub(crate) fn spawn_sorters<K: Key>(core: &Arc<Core<K>>) -> Result<()> {
    let mut handles = Vec::new();
    let n = if core.plan.one_thread {
        0
    } else {
        core.plan.sorters
    };
    for i in 0..n {
        let c = Arc::clone(core);
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
    Ok(())
}

fn sorter_loop<K: Key, C: Combiner>(core: &Core<K>, comb: &C) {
    let mut state = SortState::default();
    while let Ok(job) = core.work_rx.recv() {
        let (mut chunk, origin) = match job {
            Job::Sort { chunk, origin } => (chunk, origin),
            Job::Stop => break,
        };
        state.sort(core, comb, &mut chunk, origin);
        // Back in the pool before it stops counting as in flight: a pusher
        // that sees none in flight then finds it (`Core::free_chunk`).
        core.recycle(chunk);
        core.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
    state.release(core);
}

impl<K: Key> Core<K> {
    /// A chunk made into a run now (see [`Core::dispatch`]).
    pub(crate) fn sort_chunk(&self, mut chunk: Vec<Record<K>>, origin: u64) {
        match &self.solo {
            Some(state) => {
                let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
                let (kind, dtype) = (self.kind, self.dtype);
                with_combiner!(kind, dtype, comb => state.sort(self, &comb, &mut chunk, origin));
                drop(state);
                self.recycle(chunk);
            }
            None => {
                self.in_flight.fetch_add(1, Ordering::SeqCst);
                // The receiver lives in this core: the send cannot fail.
                let _ = self.work_tx.send(Job::Sort { chunk, origin });
            }
        }
    }
}

impl<K: Key> SortState<K> {
    /// Make a run of `chunk` (unless the assembler already failed) and
    /// leave the chunk empty. An error poisons `core`, which keeps it for
    /// the pusher or `finish` to report.
    pub(crate) fn sort<C: Combiner>(
        &mut self,
        core: &Core<K>,
        comb: &C,
        chunk: &mut Vec<Record<K>>,
        origin: u64,
    ) {
        if !core.poisoned.load(Ordering::Relaxed) {
            let t = Instant::now();
            let r = self.make_run(core, comb, chunk, origin);
            self.sync(core);
            if let Err(e) = r {
                core.fail(e);
            }
            core.sort_nanos
                .fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        chunk.clear();
    }

    /// Put the sort buffers' growth (or shrinking) on the budget's books,
    /// as soon as it happens: a run kept in memory takes what the budget
    /// has left.
    fn sync(&mut self, core: &Core<K>) {
        let now = self.scratch.capacity() as u64 * core.plan.record_bytes
            + self.groups.as_ref().map_or(0, KeyGroups::bytes);
        if now > self.accounted {
            core.sort_buffers
                .fetch_add(now - self.accounted, Ordering::SeqCst);
            core.budget.add(now - self.accounted);
        } else {
            core.budget.sub(self.accounted - now);
            core.sort_buffers
                .fetch_sub(self.accounted - now, Ordering::SeqCst);
        }
        self.accounted = now;
    }

    /// Sort one chunk, combine equal keys, and write the result as a run:
    /// through the kernel's grouping when the keys suit it and its buffers
    /// take no more than the radix sort's scratch, else the radix sort.
    /// Only one of the two holds buffers at a time.
    fn make_run<C: Combiner>(
        &mut self,
        core: &Core<K>,
        comb: &C,
        chunk: &mut [Record<K>],
        origin: u64,
    ) -> Result<()> {
        let n = chunk.len();
        let radix_bytes = n as u64 * core.plan.record_bytes;
        let buckets = if KeyGroups::bytes_for(n) <= radix_bytes {
            Buckets::of(chunk)
        } else {
            None
        };
        if buckets.is_some()
            && self
                .groups
                .as_ref()
                .is_none_or(|g| g.bytes() < KeyGroups::bytes_for(n))
        {
            self.scratch = Vec::new();
            self.groups = None;
            self.groups = Some(KeyGroups::new(n)?);
        } else if buckets.is_none() {
            self.groups = None;
        }
        if buckets.is_none() {
            // The sort scratch is as large as a chunk: reserve it here so
            // that running out of memory is an error, not an abort.
            reserve(&mut self.scratch, n, radix_bytes)?;
        }
        self.sync(core);
        let SortState {
            scratch,
            groups,
            raws,
            spill,
            ..
        } = self;
        let mut w = start_run(core, comb, n, spill)?;
        let r = (|| {
            if let (Some(b), Some(g)) = (&buckets, groups.as_mut()) {
                let grouped = g.for_each(chunk, b, |key, vals| {
                    let acc = comb
                        .combine_group(vals, origin)
                        .map_err(|e| combine_error(&core.layout, core.out_dtype(), &key, e))?;
                    w.push(key, &acc)
                })?;
                if grouped {
                    return Ok(());
                }
                // Left to the radix sort (a bucket too heavy): its scratch
                // takes the groups' place.
                *groups = None;
                reserve(scratch, n, radix_bytes)?;
            }
            sort_records(chunk, scratch, core.layout.total_bits());
            combine_sorted(core, comb, chunk, origin, raws, &mut w)
        })();
        match r {
            Ok(()) => end_run(core, w),
            Err(e) => {
                w.abandon(core);
                Err(e)
            }
        }
    }

    /// Give the buffers back (to the budget's books).
    pub(crate) fn release(&mut self, core: &Core<K>) {
        self.scratch = Vec::new();
        self.groups = None;
        self.sync(core);
    }
}

/// Room for `n` records in the radix sort's scratch, or an error (never an
/// abort).
fn reserve<K: Key>(scratch: &mut Vec<Record<K>>, n: usize, bytes: u64) -> Result<()> {
    let want = n.saturating_sub(scratch.len());
    if scratch.capacity() < n && scratch.try_reserve_exact(want).is_err() {
        return Err(Error::OutOfMemory {
            what: "sort scratch",
            bytes,
        });
    }
    Ok(())
}

/// Stop the sorter threads once they have sorted every chunk sent, and
/// give back the chunks' and the one-thread sort scratch's memory: the
/// error that poisoned the assembly, if any.
pub(crate) fn stop_sorters<K: Key>(core: &Arc<Core<K>>) -> Result<()> {
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
    // Chunks and the one-thread sort scratch are no longer needed: give
    // their memory back before merging.
    while let Ok(c) = core.free_rx.try_recv() {
        core.budget
            .sub(c.capacity() as u64 * core.plan.record_bytes);
    }
    if let Some(solo) = &core.solo {
        let mut state = solo.lock().unwrap_or_else(|e| e.into_inner());
        state.release(core);
        // Its spill file too, as a sorter thread's goes when it ends: the
        // runs hold the file themselves, and a failed finish leaves no
        // descriptor open in the spill folder while the builder lives.
        *state = SortState::default();
    }
    Ok(())
}

/// A run being written, and the room it took among the in-memory runs.
struct OpenRun<'c, 's, K: Key, C: Combiner> {
    w: RunWriter<'c, 's, K, C>,
    /// Bytes reserved in `held` and on the budget's books while the run
    /// is written (in memory only).
    held: u64,
}

impl<K: Key, C: Combiner> OpenRun<'_, '_, K, C> {
    fn push(&mut self, key: K, acc: &C::Acc) -> Result<()> {
        self.w.push(key, acc)
    }

    /// Give back the room of a run that will not be finished.
    fn abandon(self, core: &Core<K>) {
        unreserve(core, self.held);
    }
}

/// Give back the room `start_run` reserved for an in-memory run.
fn unreserve<K: Key>(core: &Core<K>, held: u64) {
    core.held.fetch_sub(held, Ordering::SeqCst);
    core.budget.sub(held);
}

/// Start a run of a chunk of `n` records: in memory when the plan's room
/// for in-memory runs and the budget have room for its estimated size,
/// else appended to this sorter's spill file. The room is the plan's and
/// what the budget has left now: while the chunks kept for the kernel are
/// being sorted they hold more than the plan's chunk area.
fn start_run<'c, 's, K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &'c C,
    n: usize,
    spill: &'s mut Option<SpillFile>,
) -> Result<OpenRun<'c, 's, K, C>> {
    let id = core.next_run.fetch_add(1, Ordering::Relaxed);
    let est = n as u64 * core.plan.est_bytes_per_record + 64;
    // Room for every sorter's buffers (a chunk's records each) stays
    // free: a sorter that has not made its first run yet takes it soon.
    let to_come = (core.plan.sorters as u64 * core.plan.chunk_records as u64)
        .saturating_mul(core.plan.record_bytes)
        .saturating_sub(core.sort_buffers.load(Ordering::SeqCst));
    let budget_left = core.budget.free().saturating_sub(to_come);
    let in_memory = est <= budget_left
        && core
            .held
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |h| {
                (h + est <= core.plan.held_limit).then_some(h + est)
            })
            .is_ok();
    let io = &core.opts.io;
    if in_memory {
        match RunWriter::memory(comb, id, core.run_format, est as usize, io) {
            Ok(w) => {
                // On the books now, so that another sorter deciding at the
                // same time sees it.
                core.budget.add(est);
                return Ok(OpenRun { w, held: est });
            }
            Err(e) => {
                core.held.fetch_sub(est, Ordering::SeqCst);
                return Err(e);
            }
        }
    }
    if spill.is_none() {
        *spill = Some(SpillFile::create(&core.spill_dir()?, io)?);
    }
    let Some(sf) = spill.as_mut() else {
        return Err(Error::Poisoned("spill file"));
    };
    Ok(OpenRun {
        w: RunWriter::file(comb, id, core.run_format, sf, SPILL_BUFFER, io),
        held: 0,
    })
}

/// Finish a run and hand it to the core's list.
fn end_run<K: Key, C: Combiner>(core: &Core<K>, open: OpenRun<'_, '_, K, C>) -> Result<()> {
    let held = open.held;
    let result = open.w.finish();
    unreserve(core, held);
    let run = result?;
    if run.is_spilled() {
        core.runs_spilled.fetch_add(1, Ordering::Relaxed);
        core.bytes_spilled.fetch_add(run.bytes, Ordering::Relaxed);
    } else {
        core.held.fetch_add(run.bytes, Ordering::SeqCst);
        core.budget.add(run.bytes);
    }
    core.lock().runs.push(run);
    Ok(())
}

/// Combine the equal keys of a sorted chunk into the run.
fn combine_sorted<K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &C,
    chunk: &[Record<K>],
    origin: u64,
    raws: &mut Vec<u64>,
    w: &mut OpenRun<'_, '_, K, C>,
) -> Result<()> {
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
        .map_err(|e| combine_error(&core.layout, core.out_dtype(), &key, e))?;
        w.push(key, &acc)?;
        i = j;
    }
    Ok(())
}
