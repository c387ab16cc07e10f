//! `finish`: stop the sorters, merge the runs (intermediate passes in
//! `merge.rs`), and the final merge pipelined into the file writer.

use crate::assemble::combine::combine_error;
use crate::assemble::combine::{Combiner, with_combiner};
use crate::assemble::key::Key;
use crate::assemble::merge::{Merger, merge_passes, open_readers};
use crate::assemble::plan::{OUTPUT_BUFFER_BYTES, RUN_READER_BYTES};
use crate::assemble::run::stop_sorters;
use crate::assemble::shared::Core;
use crate::assemble::summary::Summary;
use crate::element::Value;
use crate::error::{Error, Result};
use crate::progress::Step;
use crate::write::{FileSummary, FileWriter, TensorWriter, WriteOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub(crate) fn finish_core<K: Key>(
    core: &Arc<Core<K>>,
    path: &Path,
    ingest: Duration,
) -> Result<Summary> {
    stop_sorters(core)?;
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
    let batches = if core.plan.one_thread {
        0
    } else {
        2 * core.plan.batch_bytes
    };
    let buffers = runs.len() as u64 * RUN_READER_BYTES + OUTPUT_BUFFER_BYTES + batches;
    core.mem.add(buffers);
    if !runs.is_empty() {
        passes += 1;
    }
    // No more entries than the runs hold: room for that many values lets
    // the writer put the indices straight into the file.
    let max_nnz: u64 = runs.iter().map(|r| r.entries).sum();
    let readers = open_readers(core, comb, runs, &dir_for_msgs)?;
    core.opts
        .progress
        .start(Step::Write, max_nnz * core.plan.record_bytes);
    let mut merger = Merger::new(comb, &core.layout, core.out_dtype(), readers, core.watch())?;
    let (dropped, nnz, fs) = merge_into_file(core, comb, &mut merger, path, max_nnz)?;
    let mut stale_removed = std::mem::take(&mut core.lock().stale_removed);
    stale_removed.extend(fs.stale_removed.iter().cloned());
    drop(merger);
    core.mem.sub(buffers);
    Ok(Summary {
        path: path.to_path_buf(),
        contributions: core.contributions.load(Ordering::Relaxed),
        skipped_negative: core.skipped_negative.load(Ordering::Relaxed),
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

/// Entries in one batch of `bytes` for keys of type `K`.
fn write_batch_entries<K>(bytes: u64) -> usize {
    let entry = (std::mem::size_of::<K>() + std::mem::size_of::<Value>()) as u64;
    (bytes / entry).max(1) as usize
}

/// Merged entries on their way to the writer: keys and their final
/// values (the writer unpacks the keys).
struct Batch<K> {
    keys: Vec<K>,
    vals: Vec<Value>,
}

enum ToWriter<K> {
    Batch(Batch<K>),
    /// Everything was sent: the writer may publish the file.
    Done,
}

/// Entries rounded and unpacked before they go to the tensor writer at
/// once: few enough to stay in the first-level caches.
const WRITE_CHUNK: usize = 1024;

/// Rounds merged entries to their final values, unpacks their keys and
/// hands them to the tensor writer a chunk at a time; counts the zeros
/// `drop_zeros` drops. The chunk buffers have their full size from the
/// start and are filled by position: pushing component by component
/// reloaded the vector's length and capacity from memory for every word.
///
/// For a complex tensor the merged entries are its parts (a last index 0
/// or 1, in that order for one coordinate): the rounder pairs them into
/// one value, a missing part being +0.0, and drops the pair under
/// `drop_zeros` only when both parts are zeros.
struct Rounder {
    rank: usize,
    idx: Vec<u64>,
    vals: Vec<Value>,
    /// Entries in the chunk.
    n: usize,
    dropped: u64,
    /// Complex tensor: the unpacked key (rank + 1 components) and the part
    /// waiting for its other half.
    complex: Option<Pairing>,
}

struct Pairing {
    key: Vec<u64>,
    pending: Option<(Vec<u64>, f64, f64)>,
    drop_zeros: bool,
}

impl Rounder {
    fn new<K: Key>(core: &Core<K>) -> Rounder {
        let rank = core.shape().len();
        Rounder {
            rank,
            idx: vec![0; WRITE_CHUNK * rank],
            vals: vec![Value::Float(0.0); WRITE_CHUNK],
            n: 0,
            dropped: 0,
            complex: core.complex.map(|_| Pairing {
                key: vec![0; rank + 1],
                pending: None,
                drop_zeros: core.opts.drop_zeros,
            }),
        }
    }

    /// Add one merged entry; writes the chunk when it is full.
    #[inline]
    fn add<K: Key, C: Combiner>(
        &mut self,
        core: &Core<K>,
        comb: &C,
        tw: &mut TensorWriter<'_>,
        key: &K,
        acc: &C::Acc,
    ) -> Result<()> {
        let Some(v) = final_value(core, comb, key, acc)? else {
            self.dropped += 1;
            return Ok(());
        };
        self.put(core, tw, key, v)
    }

    /// Add one entry with its final value; writes the chunk when it is full.
    #[inline]
    fn put<K: Key>(
        &mut self,
        core: &Core<K>,
        tw: &mut TensorWriter<'_>,
        key: &K,
        v: Value,
    ) -> Result<()> {
        if self.complex.is_some() {
            return self.put_part(core, tw, key, v);
        }
        let (slot, val) = self.next_slot()?;
        core.layout.unpack(key, slot);
        *val = v;
        self.advance(tw)
    }

    /// Put the entry `(idx, v)` in the chunk.
    #[inline]
    fn push_entry(&mut self, tw: &mut TensorWriter<'_>, idx: &[u64], v: Value) -> Result<()> {
        let (slot, val) = self.next_slot()?;
        slot.copy_from_slice(idx);
        *val = v;
        self.advance(tw)
    }

    /// The chunk's next coordinate and value places.
    #[inline]
    fn next_slot(&mut self) -> Result<(&mut [u64], &mut Value)> {
        let (n, rank) = (self.n, self.rank);
        match (
            self.idx.get_mut(n * rank..(n + 1) * rank),
            self.vals.get_mut(n),
        ) {
            (Some(slot), Some(val)) => Ok((slot, val)),
            // Unreachable: a full chunk is written before the next entry.
            _ => Err(Error::Poisoned("final-pass chunk (overrun)")),
        }
    }

    /// Count the entry just placed; write the chunk when it is full.
    #[inline]
    fn advance(&mut self, tw: &mut TensorWriter<'_>) -> Result<()> {
        self.n += 1;
        if self.n == WRITE_CHUNK {
            self.flush_chunk(tw)?;
        }
        Ok(())
    }

    /// One part of a complex entry: completes the pending coordinate or
    /// starts one.
    fn put_part<K: Key>(
        &mut self,
        core: &Core<K>,
        tw: &mut TensorWriter<'_>,
        key: &K,
        v: Value,
    ) -> Result<()> {
        let Some(p) = self.complex.as_mut() else {
            return Err(Error::Poisoned("final pass (no pairing)"));
        };
        core.layout.unpack(key, &mut p.key);
        let rank = self.rank;
        let part = p.key[rank];
        let x = v.to_f64();
        let same = matches!(&p.pending, Some((c, _, _)) if c[..] == p.key[..rank]);
        if !same {
            self.release_pending(tw)?;
        }
        let Some(p) = self.complex.as_mut() else {
            return Err(Error::Poisoned("final pass (no pairing)"));
        };
        match &mut p.pending {
            Some((_, re, im)) => *(if part == 0 { re } else { im }) = x,
            None => {
                let (re, im) = if part == 0 { (x, 0.0) } else { (0.0, x) };
                p.pending = Some((p.key[..rank].to_vec(), re, im));
            }
        }
        Ok(())
    }

    /// Write the pending complex entry, unless `drop_zeros` drops it.
    fn release_pending(&mut self, tw: &mut TensorWriter<'_>) -> Result<()> {
        let Some(p) = self.complex.as_mut() else {
            return Ok(());
        };
        let Some((idx, re, im)) = p.pending.take() else {
            return Ok(());
        };
        if p.drop_zeros && re == 0.0 && im == 0.0 {
            self.dropped += 1;
            return Ok(());
        }
        self.push_entry(tw, &idx, Value::Complex(re, im))
    }

    /// Write what is pending: the last complex entry, then the chunk.
    fn flush(&mut self, tw: &mut TensorWriter<'_>) -> Result<()> {
        self.release_pending(tw)?;
        self.flush_chunk(tw)
    }

    fn flush_chunk(&mut self, tw: &mut TensorWriter<'_>) -> Result<()> {
        let n = self.n;
        self.n = 0;
        tw.push_batch(&self.idx[..n * self.rank], &self.vals[..n])
    }
}

/// The value one merged entry is written with, rounded once to the element
/// type; None for a zero that `drop_zeros` drops.
#[inline]
fn final_value<K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &C,
    key: &K,
    acc: &C::Acc,
) -> Result<Option<Value>> {
    let v = comb
        .finish(acc)
        .map_err(|e| combine_error(&core.layout, core.out_dtype(), key, e))?;
    // A complex entry is dropped whole, by the rounder that pairs its parts.
    let drop = core.opts.drop_zeros && core.complex.is_none() && v.is_zero();
    Ok((!drop).then_some(v))
}

/// Open the output and its tensor, let `fill` push every entry, and
/// publish the file only if `fill` says it pushed everything (`Ok(true)`);
/// `Ok(false)` means the merge stopped, and the temporary file is dropped.
/// Returns (nnz, file summary).
fn write_file<K: Key>(
    core: &Core<K>,
    path: &Path,
    max_nnz: u64,
    fill: impl FnOnce(&mut TensorWriter<'_>) -> Result<bool>,
) -> Result<(u64, FileSummary)> {
    let layout_out = core.opts.layout;
    // The writer's streams share OUTPUT_BUFFER_BYTES: values and indices,
    // plus the pointers for CSR/CSC.
    let streams = if layout_out.is_compressed() { 3 } else { 2 };
    let wopts = WriteOptions {
        io: core.opts.io.clone(),
        buffer_bytes: (OUTPUT_BUFFER_BYTES / streams) as usize,
        ..WriteOptions::default()
    };
    let mut fw = FileWriter::create(path, wopts)?;
    let mut tw = fw.begin_tensor_as(
        &core.opts.tensor_name,
        core.out_dtype(),
        core.shape(),
        layout_out,
    )?;
    tw.reserve_indices(max_nnz)?;
    if !fill(&mut tw)? {
        return Err(Error::Poisoned("file writer (the merge stopped)"));
    }
    let ts = tw.finish()?;
    Ok((ts.nnz, fw.finish()?))
}

/// The final merge into the file. With `threads = 1` on this thread alone;
/// otherwise pipelined over two threads: this one merges runs, rounds each
/// sum and hands over (key, value) batches, a second one unpacks each key,
/// checks, hashes, gathers the statistics and writes. Which side rounds is
/// set by measurement: the two threads are about equally busy either way
/// since the loser tree skips its replay while one run keeps winning, and
/// a value is a smaller hand-off than an accumulator.
/// Without an explicit `Done` the writer drops its temporary file, so a
/// merge error can never publish a partial file.
/// Returns (dropped zeros, nnz, file summary).
fn merge_into_file<K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &C,
    merger: &mut Merger<'_, K, C>,
    path: &Path,
    max_nnz: u64,
) -> Result<(u64, u64, FileSummary)> {
    // Zeros dropped, counted where the sums are rounded (and, for a
    // complex tensor, where its parts are paired).
    let mut dropped = 0u64;
    if core.plan.one_thread {
        let (nnz, fs) = write_file(core, path, max_nnz, |tw| {
            let mut r = Rounder::new(core);
            let all = merger.for_each(|k, acc| {
                r.add(core, comb, tw, &k, acc)?;
                Ok(true)
            })?;
            r.flush(tw)?;
            dropped = r.dropped;
            Ok(all)
        })?;
        return Ok((dropped, nnz, fs));
    }
    let batch = write_batch_entries::<K>(core.plan.batch_bytes);
    let (full_tx, full_rx) = crossbeam_channel::bounded::<ToWriter<K>>(1);
    let (empty_tx, empty_rx) = crossbeam_channel::bounded::<Batch<K>>(2);
    for _ in 0..2 {
        let _ = empty_tx.send(Batch {
            keys: Vec::with_capacity(batch),
            vals: Vec::with_capacity(batch),
        });
    }
    std::thread::scope(|s| {
        // The writer unpacks each key, checks, hashes, gathers the
        // statistics and writes; the merger merges and rounds.
        let write = move || -> Result<(u64, u64, FileSummary)> {
            let mut r = Rounder::new(core);
            let (nnz, fs) = write_file(core, path, max_nnz, |tw| {
                for msg in full_rx.iter() {
                    match msg {
                        ToWriter::Batch(mut b) => {
                            for (k, v) in b.keys.iter().zip(&b.vals) {
                                r.put(core, tw, k, *v)?;
                            }
                            b.keys.clear();
                            b.vals.clear();
                            let _ = empty_tx.send(b);
                        }
                        ToWriter::Done => {
                            r.flush(tw)?;
                            return Ok(true);
                        }
                    }
                }
                Ok(false)
            })?;
            Ok((r.dropped, nnz, fs))
        };
        let writer = std::thread::Builder::new()
            .name("coo-write".into())
            .spawn_scoped(s, write)
            .map_err(|e| Error::io("spawn writer thread", path, e))?;
        let merged = (|| -> Result<()> {
            let Ok(mut b) = empty_rx.recv() else {
                return Ok(());
            };
            let all = merger.for_each(|k, acc| {
                let Some(v) = final_value(core, comb, &k, acc)? else {
                    dropped += 1;
                    return Ok(true);
                };
                b.keys.push(k);
                b.vals.push(v);
                if b.keys.len() == batch {
                    let full = Batch {
                        keys: std::mem::take(&mut b.keys),
                        vals: std::mem::take(&mut b.vals),
                    };
                    // A failed send or recv means the writer stopped: its
                    // error is the one to report.
                    if full_tx.send(ToWriter::Batch(full)).is_err() {
                        return Ok(false);
                    }
                    match empty_rx.recv() {
                        Ok(e) => b = e,
                        Err(_) => return Ok(false),
                    }
                }
                Ok(true)
            })?;
            if all && full_tx.send(ToWriter::Batch(b)).is_ok() {
                let _ = full_tx.send(ToWriter::Done);
            }
            Ok(())
        })();
        drop(full_tx);
        let written = writer
            .join()
            .unwrap_or(Err(Error::Poisoned("file writer thread (it panicked)")));
        merged?;
        let (paired, nnz, fs) = written?;
        Ok((dropped + paired, nnz, fs))
    })
}
