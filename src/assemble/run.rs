//! Run making: the sorter threads radix-sort full chunks, combine equal
//! keys into accumulators, and encode the result as a run kept in memory
//! or appended to the sorter's spill file.

use crate::assemble::combine::combine_error;
use crate::assemble::combine::{Combiner, with_combiner};
use crate::assemble::key::Key;
use crate::assemble::plan::SPILL_BUFFER;
use crate::assemble::shared::{Core, Job, SortState};
use crate::assemble::sort::{Record, sort_records};
use crate::assemble::spill::{Run, RunWriter, SpillFile};
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
            let scratch = &mut self.scratch;
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
                    chunk,
                    origin,
                    scratch,
                    &mut self.raws,
                    &mut self.spill,
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
    }

    /// Give the scratch back (to the budget's books).
    pub(crate) fn release(&mut self, core: &Core<K>) {
        core.mem
            .sub(self.scratch.capacity() as u64 * core.plan.record_bytes);
        self.scratch = Vec::new();
    }
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
        core.mem.sub(c.capacity() as u64 * core.plan.record_bytes);
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
    // Reserve room among the in-memory runs, or spill. The room is the
    // plan's and what the budget has left now: while the chunks kept for
    // the kernel are being sorted they hold more than the plan's chunk
    // area.
    let budget_left = core.opts.memory_budget.saturating_sub(core.mem.now());
    let in_memory = est <= budget_left
        && core
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
            .map_err(|e| combine_error(&core.layout, core.out_dtype(), &key, e))?;
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
