//! `finish`: stop the sorters, merge the runs (intermediate passes in
//! `merge.rs`), and the final merge pipelined into the file writer.

use crate::assemble::combine::{with_combiner, Combiner};
use crate::assemble::shared::{Core, Job};
use crate::assemble::key::Key;
use crate::assemble::merge::{combine_error, merge_passes, open_readers, Merger};
use crate::assemble::plan::{OUTPUT_BUFFER_BYTES, RUN_READER_BYTES};
use crate::element::Value;
use crate::error::{Error, Result};
use crate::write::{FileSummary, FileWriter, WriteOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What an assembly did, returned by [`crate::Builder::finish`].
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

pub(crate) fn finish_core<K: Key>(core: &Arc<Core<K>>, path: &Path, ingest: Duration) -> Result<Summary> {
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

fn merge_and_write<K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &C,
    path: &Path,
    ingest: Duration,
) -> Result<Summary> {
    let runs = std::mem::take(&mut core.lock().runs);
    let total_runs = runs.len() as u64;
    let dir_for_msgs = core
        .lock()
        .spill_dir
        .as_ref()
        .map_or_else(|| PathBuf::from("<memory>"), |d| d.path().to_path_buf());
    let t_merge = Instant::now();
    let (runs, mut passes) = merge_passes(core, comb, runs, &dir_for_msgs)?;
    let time_merge = t_merge.elapsed();

    let t_write = Instant::now();
    let buffers = runs.len() as u64 * RUN_READER_BYTES + OUTPUT_BUFFER_BYTES;
    core.mem.add(buffers);
    if !runs.is_empty() {
        passes += 1;
    }
    // No more entries than the runs hold: room for that many values lets
    // the writer put the indices straight into the file.
    let max_nnz: u64 = runs.iter().map(|r| r.entries).sum();
    let readers = open_readers(core, comb, runs, &dir_for_msgs)?;
    let mut merger = Merger::new(comb, &core.layout, core.dtype, readers)?;
    let (dropped, nnz, fs) = merge_into_file(core, comb, &mut merger, path, max_nnz)?;
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

/// Entries handed from one stage of the final pass to the next at once.
const WRITE_BATCH: usize = 16 << 10;

/// What goes from one stage of the final pass to the next: a batch of
/// entries, or the end (only then may the writer publish the file).
enum Msg<B> {
    Batch(B),
    Done,
}

/// Merged entries: keys and their combined accumulators.
struct Merged<K, A> {
    keys: Vec<K>,
    accs: Vec<A>,
}

/// Entries ready to write: the index tuples (`rank` per entry, flattened)
/// and the final values.
struct Ready {
    idx: Vec<u64>,
    vals: Vec<Value>,
}

/// A bounded pipe between two stages: full batches one way, emptied ones
/// back (two in flight), so the stages overlap and nothing allocates.
struct Pipe<B> {
    full_tx: crossbeam_channel::Sender<Msg<B>>,
    full_rx: crossbeam_channel::Receiver<Msg<B>>,
    empty_tx: crossbeam_channel::Sender<B>,
    empty_rx: crossbeam_channel::Receiver<B>,
}

impl<B> Pipe<B> {
    fn new(make: impl Fn() -> B) -> Pipe<B> {
        let (full_tx, full_rx) = crossbeam_channel::bounded(1);
        let (empty_tx, empty_rx) = crossbeam_channel::bounded(2);
        for _ in 0..2 {
            let _ = empty_tx.send(make());
        }
        Pipe {
            full_tx,
            full_rx,
            empty_tx,
            empty_rx,
        }
    }
}

/// The final merge, pipelined over three threads so that two cores share
/// its work whatever the balance: this one merges runs; `coo-finish`
/// rounds each combined value, drops zeros when asked and unpacks keys;
/// `coo-write` checks, hashes, gathers statistics and writes. A stage
/// that fails drops its ends of the pipes, which stops the others; the
/// writer publishes the file only on an explicit `Done`, so an error can
/// never publish a partial file. Returns (dropped zeros, nnz, file summary).
fn merge_into_file<K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &C,
    merger: &mut Merger<'_, K, C>,
    path: &Path,
    max_nnz: u64,
) -> Result<(u64, u64, FileSummary)> {
    let layout = &core.layout;
    let rank = layout.rank();
    let merged: Pipe<Merged<K, C::Acc>> = Pipe::new(|| Merged {
        keys: Vec::with_capacity(WRITE_BATCH),
        accs: Vec::with_capacity(WRITE_BATCH),
    });
    let ready: Pipe<Ready> = Pipe::new(|| Ready {
        idx: Vec::with_capacity(WRITE_BATCH * rank),
        vals: Vec::with_capacity(WRITE_BATCH),
    });
    let layout_out = core.opts.layout;
    // The writer's streams share OUTPUT_BUFFER_BYTES: values and indices,
    // plus the pointers for CSR/CSC.
    let streams = if layout_out.is_compressed() { 3 } else { 2 };
    let wopts = WriteOptions {
        io: core.opts.io.clone(),
        buffer_bytes: (OUTPUT_BUFFER_BYTES / streams) as usize,
        ..WriteOptions::default()
    };
    std::thread::scope(|s| {
        let Pipe {
            full_tx: ready_tx,
            full_rx: ready_rx,
            empty_tx: ready_back_tx,
            empty_rx: ready_back_rx,
        } = ready;
        let Pipe {
            full_tx: merged_tx,
            full_rx: merged_rx,
            empty_tx: merged_back_tx,
            empty_rx: merged_back_rx,
        } = merged;
        let write = move || -> Result<(u64, FileSummary)> {
            let mut fw = FileWriter::create(path, wopts)?;
            let mut tw =
                fw.begin_tensor_as(&core.opts.tensor_name, core.dtype, layout.shape(), layout_out)?;
            tw.reserve_indices(max_nnz)?;
            for msg in ready_rx.iter() {
                match msg {
                    Msg::Batch(mut b) => {
                        for (i, v) in b.idx.chunks_exact(rank).zip(&b.vals) {
                            tw.push_value(i, *v)?;
                        }
                        b.idx.clear();
                        b.vals.clear();
                        let _ = ready_back_tx.send(b);
                    }
                    Msg::Done => {
                        let ts = tw.finish()?;
                        return Ok((ts.nnz, fw.finish()?));
                    }
                }
            }
            Err(Error::Poisoned("file writer (the merge stopped)"))
        };
        let finish = move || -> Result<u64> {
            let mut dropped = 0u64;
            for msg in merged_rx.iter() {
                let mut m = match msg {
                    Msg::Batch(m) => m,
                    Msg::Done => {
                        let _ = ready_tx.send(Msg::Done);
                        break;
                    }
                };
                // A failed recv or send means the writer stopped: its error
                // is the one to report.
                let Ok(mut b) = ready_back_rx.recv() else {
                    break;
                };
                for (k, acc) in m.keys.iter().zip(&m.accs) {
                    let v = comb
                        .finish(acc)
                        .map_err(|e| combine_error(layout, core.dtype, k, e))?;
                    if core.opts.drop_zeros && v.is_zero() {
                        dropped += 1;
                        continue;
                    }
                    // Unpacked in place: a copy of `rank` words would be a
                    // call to memmove per entry.
                    let at = b.idx.len();
                    b.idx.resize(at + rank, 0);
                    layout.unpack(k, &mut b.idx[at..]);
                    b.vals.push(v);
                }
                m.keys.clear();
                m.accs.clear();
                let _ = merged_back_tx.send(m);
                if ready_tx.send(Msg::Batch(b)).is_err() {
                    break;
                }
            }
            Ok(dropped)
        };
        let writer = std::thread::Builder::new()
            .name("coo-write".into())
            .spawn_scoped(s, write)
            .map_err(|e| Error::io("spawn writer thread", path, e))?;
        let finisher = std::thread::Builder::new()
            .name("coo-finish".into())
            .spawn_scoped(s, finish)
            .map_err(|e| Error::io("spawn finishing thread", path, e))?;
        let merging = (|| -> Result<()> {
            let Ok(mut m) = merged_back_rx.recv() else {
                return Ok(());
            };
            while let Some((k, acc)) = merger.next_combined()? {
                m.keys.push(k);
                m.accs.push(acc);
                if m.keys.len() == WRITE_BATCH {
                    // A failed send or recv means a later stage stopped:
                    // its error is the one to report.
                    if merged_tx.send(Msg::Batch(m)).is_err() {
                        return Ok(());
                    }
                    match merged_back_rx.recv() {
                        Ok(e) => m = e,
                        Err(_) => return Ok(()),
                    }
                }
            }
            if merged_tx.send(Msg::Batch(m)).is_ok() {
                let _ = merged_tx.send(Msg::Done);
            }
            Ok(())
        })();
        drop(merged_tx);
        drop(merged_back_rx);
        let finished = finisher
            .join()
            .unwrap_or(Err(Error::Poisoned("finishing thread (it panicked)")));
        let written = writer
            .join()
            .unwrap_or(Err(Error::Poisoned("file writer thread (it panicked)")));
        merging?;
        let dropped = finished?;
        let (nnz, fs) = written?;
        Ok((dropped, nnz, fs))
    })
}
