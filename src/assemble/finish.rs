//! `finish`: stop the sorters, merge the runs (intermediate passes in
//! `merge.rs`), and the final merge pipelined into the file writer.

use crate::assemble::combine::combine_error;
use crate::assemble::combine::{Combiner, with_combiner};
use crate::assemble::key::Key;
use crate::assemble::merge::{Merger, merge_passes, open_readers};
use crate::assemble::plan::{BLOCK_TARGET, OUTPUT_BUFFER_BYTES, RUN_READER_BYTES};
use crate::assemble::run::stop_sorters;
use crate::assemble::shared::Core;
use crate::assemble::spill::{Mark, Run, RunReader};
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
    if !runs.is_empty() {
        passes += 1;
    }
    // No more entries than the runs hold: room for that many values lets
    // the writer put the indices straight into the file.
    let max_nnz: u64 = runs.iter().map(|r| r.entries).sum();
    core.opts
        .progress
        .start(Step::Write, max_nnz * core.plan.record_bytes);
    let mut merge_ranges = 0u64;
    let (dropped, nnz, fs) = match Ranges::cut(core, &runs) {
        Some(ranges) => {
            merge_ranges = ranges.bounds.len() as u64 + 1;
            core.budget.add(ranges.buffers);
            let r =
                merge_ranges_into_file(core, comb, &runs, &ranges, &dir_for_msgs, path, max_nnz);
            core.budget.sub(ranges.buffers);
            r?
        }
        None => {
            let buffers = runs.len() as u64 * RUN_READER_BYTES + OUTPUT_BUFFER_BYTES + batches;
            core.budget.add(buffers);
            let readers = open_readers(core, comb, runs, &dir_for_msgs)?;
            let mut merger =
                Merger::new(comb, &core.layout, core.out_dtype(), readers, core.watch())?;
            let r = merge_into_file(core, comb, &mut merger, path, max_nnz);
            drop(merger);
            core.budget.sub(buffers);
            r?
        }
    };
    let mut stale_removed = std::mem::take(&mut core.lock().stale_removed);
    stale_removed.extend(fs.stale_removed.iter().cloned());
    Ok(Summary {
        path: path.to_path_buf(),
        contributions: core.contributions.load(Ordering::Relaxed),
        skipped_negative: core.skipped_negative.load(Ordering::Relaxed),
        nnz,
        dropped_zeros: dropped,
        runs: total_runs,
        runs_spilled: core.runs_spilled.load(Ordering::Relaxed),
        merge_passes: passes,
        merge_ranges,
        bytes_spilled: core.bytes_spilled.load(Ordering::Relaxed),
        peak_buffer_bytes: core.budget.peak(),
        memory_budget: core.opts.memory_budget,
        budget_parts: core.budget.parts().to_vec(),
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
    // The writer's streams share OUTPUT_BUFFER_BYTES: one per buffer.
    let streams = layout_out.buffer_count(core.shape().len()) as u64;
    let wopts = WriteOptions {
        io: core.opts.io.clone(),
        buffer_bytes: (OUTPUT_BUFFER_BYTES / streams) as usize,
        ..WriteOptions::default()
    };
    let mut fw = FileWriter::create(path, wopts)?;
    let mut tw = fw.begin_tensor_in(
        &core.opts.tensor_name,
        core.out_dtype(),
        core.shape(),
        layout_out,
        core.opts.mode_order.as_deref(),
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

/// The fewest input records a range of the parallel final merge takes: a
/// range costs one partly read block per run it meets.
const MIN_RANGE_RECORDS: u64 = 1 << 14;

/// The most input records a range of the parallel final merge takes.
const MAX_RANGE_RECORDS: u64 = 1 << 21;

/// Entries of a merged range handed to the tensor writer at once.
const WRITE_RANGE_CHUNK: usize = 1 << 14;

/// Ranges of the parallel final merge held at once per merging thread,
/// beyond the one each is merging: the writer takes them in key order.
const RANGES_AHEAD: usize = 1;

/// The key space cut for the parallel final merge: range `i` holds the
/// keys from `bounds[i - 1]` (from the least key for `i = 0`) up to below
/// `bounds[i]` (to the end for the last range).
struct Ranges {
    bounds: Vec<u128>,
    /// Merging threads.
    threads: usize,
    /// Bytes the merge holds: the threads' run readers, the ranges held
    /// for the writer and the writer's buffers.
    buffers: u64,
}

impl Ranges {
    /// Cut the runs' key space into ranges of about the same record count
    /// (from the runs' block marks), each small enough that the ranges in
    /// flight fit what the budget has left; None when the merge should
    /// stay on one thread: one thread asked for, keys wider than 128 bits,
    /// too few records, or ranges so many that re-reading a block of each
    /// run at every range start would cost more than an eighth of the
    /// runs' bytes (keys spread over every run, as random keys are).
    fn cut<K: Key>(core: &Core<K>, runs: &[Run]) -> Option<Ranges> {
        let threads = core.opts.threads;
        if core.plan.one_thread || threads < 2 || K::BITS > 128 || runs.len() < 2 {
            return None;
        }
        let records: u64 = runs.iter().map(|r| r.entries).sum();
        let readers = threads as u64 * runs.len() as u64 * RUN_READER_BYTES + OUTPUT_BUFFER_BYTES;
        let held = (threads * (1 + RANGES_AHEAD)) as u64;
        let room = core.budget.free().saturating_sub(readers) / 2 / held;
        let coords = core.layout.rank() * std::mem::size_of::<u64>();
        let entry = (std::mem::size_of::<K>().max(coords) + std::mem::size_of::<Value>()) as u64;
        let per_range = match core.opts.range_records {
            Some(0) => return None,
            Some(n) => n,
            None => match (room / entry).min(MAX_RANGE_RECORDS) {
                n if n < MIN_RANGE_RECORDS => return None,
                n => n,
            },
        };
        if records < 2 * per_range {
            return None;
        }
        let mut marks: Vec<(u128, u64)> = Vec::new();
        for r in runs {
            if r.entries > 0 && r.marks.is_empty() {
                return None;
            }
            for (i, m) in r.marks.iter().enumerate() {
                let end = r.marks.get(i + 1).map_or(r.entries, |n| n.before);
                marks.push((m.first, end.saturating_sub(m.before)));
            }
        }
        marks.sort_unstable_by_key(|m| m.0);
        let mut bounds: Vec<u128> = Vec::new();
        let mut sum = 0u64;
        for &(first, n) in &marks {
            if sum >= per_range * (bounds.len() as u64 + 1) {
                let b = part_zero(core, first);
                if b > bounds.last().copied().unwrap_or(0) {
                    bounds.push(b);
                }
            }
            sum += n;
        }
        if bounds.is_empty() {
            return None;
        }
        // What the range starts cost: about half a block of every run a
        // range meets, read and skipped.
        let mut met = 0u64;
        for i in 0..=bounds.len() {
            let (lo, hi) = range_of(&bounds, i);
            met += runs.iter().filter(|r| meets(r, lo, hi)).count() as u64;
        }
        let run_bytes: u64 = runs.iter().map(|r| r.bytes).sum();
        if core.opts.range_records.is_none() && met * (BLOCK_TARGET as u64 / 2) > run_bytes / 8 {
            return None;
        }
        Some(Ranges {
            bounds,
            threads,
            // A range's vectors may grow to twice what it holds.
            buffers: readers + 2 * held * per_range * entry,
        })
    }
}

/// `key` with the part of a complex tensor's key cleared, so that a range
/// bound never falls between a coordinate's two parts (the part is the
/// key's last, least significant field).
fn part_zero<K: Key>(core: &Core<K>, key: u128) -> u128 {
    if core.complex.is_none() {
        return key;
    }
    let rank = core.layout.rank();
    let mut idx = vec![0u64; rank];
    core.layout.unpack(&Mark::key_from::<K>(key), &mut idx);
    if let Some(p) = idx.last_mut() {
        *p = 0;
    }
    Mark::key_of(&core.layout.pack::<K>(&idx))
}

/// Range `i`'s lower and upper bounds (None: the key space's own).
fn range_of(bounds: &[u128], i: usize) -> (Option<u128>, Option<u128>) {
    let lo = i.checked_sub(1).and_then(|j| bounds.get(j).copied());
    (lo, bounds.get(i).copied())
}

/// Whether run `r` may hold keys in `lo..hi`.
fn meets(r: &Run, lo: Option<u128>, hi: Option<u128>) -> bool {
    let (Some(first), Some(last)) = (r.marks.first(), r.last) else {
        return false;
    };
    lo.is_none_or(|lo| last >= lo) && hi.is_none_or(|hi| first.first < hi)
}

/// One range merged: its entries' final values, their coordinates
/// unpacked (`idx`, rank each) or, for a complex tensor, whose parts the
/// writer pairs, their keys; and the zeros dropped.
struct Merged<K> {
    idx: Vec<u64>,
    keys: Vec<K>,
    vals: Vec<Value>,
    dropped: u64,
}

/// Merge the keys of range `i` of every run that meets it.
fn merge_range<K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &C,
    runs: &[Run],
    ranges: &Ranges,
    i: usize,
    dir: &Path,
    mut out: Merged<K>,
) -> Result<Merged<K>> {
    let (lo, hi) = range_of(&ranges.bounds, i);
    let (lo_key, hi_key) = (lo.map(Mark::key_from::<K>), hi.map(Mark::key_from::<K>));
    let mut readers = Vec::new();
    let mut firsts = Vec::new();
    for r in runs.iter().filter(|r| meets(r, lo, hi)) {
        let at = lo.map_or(0, |lo| {
            r.marks.partition_point(|m| m.first <= lo).saturating_sub(1)
        });
        let mut rd = RunReader::open_range(
            comb,
            r.clone(),
            core.run_format,
            dir,
            &core.opts.io,
            at,
            hi_key,
        )?;
        // The block's keys below the range belong to the range before.
        let first = loop {
            match rd.next_key()? {
                Some(k) if lo_key.is_some_and(|lo| k < lo) => {
                    rd.take_acc()?;
                }
                other => break other,
            }
        };
        readers.push(rd);
        firsts.push(first);
    }
    let mut m = Merger::with_firsts(
        comb,
        &core.layout,
        core.out_dtype(),
        readers,
        firsts,
        core.watch(),
    )?;
    out.idx.clear();
    out.keys.clear();
    out.vals.clear();
    out.dropped = 0;
    // The keys are unpacked here, on the merging threads, rather than by
    // the one writer.
    let rank = core.layout.rank();
    let complex = core.complex.is_some();
    m.for_each(|k, acc| {
        match final_value(core, comb, &k, acc)? {
            Some(v) => {
                if complex {
                    out.keys.push(k);
                } else {
                    let at = out.idx.len();
                    out.idx.resize(at + rank, 0);
                    core.layout.unpack(&k, &mut out.idx[at..]);
                }
                out.vals.push(v);
            }
            None => out.dropped += 1,
        }
        Ok(true)
    })?;
    Ok(out)
}

/// The final merge on every core: the key space cut into ranges
/// ([`Ranges`]), merged by `ranges.threads` threads a range at a time, in
/// key order, and written by this thread in key order as they complete (at
/// most [`RANGES_AHEAD`] ranges per thread wait for the writer). The bytes
/// are the one-thread merge's: each range merges its runs in run order
/// and the writer sees the same entries in the same order. The first
/// error in key order is the one reported; the file is published only
/// when every range was written.
fn merge_ranges_into_file<K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &C,
    runs: &[Run],
    ranges: &Ranges,
    dir: &Path,
    path: &Path,
    max_nnz: u64,
) -> Result<(u64, u64, FileSummary)> {
    use std::sync::atomic::AtomicUsize;
    let count = ranges.bounds.len() + 1;
    let held = ranges.threads * (1 + RANGES_AHEAD);
    // A token per range that may be merged and not yet written: the
    // buffers a range is merged into, handed back by the writer (reused,
    // so that their memory is not given back and faulted in again for
    // every range).
    let (token_tx, token_rx) = crossbeam_channel::bounded::<Merged<K>>(held);
    for _ in 0..held {
        let _ = token_tx.send(Merged {
            idx: Vec::new(),
            keys: Vec::new(),
            vals: Vec::new(),
            dropped: 0,
        });
    }
    let (done_tx, done_rx) = crossbeam_channel::unbounded::<(usize, Result<Merged<K>>)>();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        // Owned here: however this closure returns, the threads see the
        // tokens end and stop before the scope waits for them.
        let token_tx = token_tx;
        for t in 0..ranges.threads {
            let (token_rx, done_tx, next) = (token_rx.clone(), done_tx.clone(), &next);
            std::thread::Builder::new()
                .name(format!("coo-merge-{t}"))
                .spawn_scoped(s, move || {
                    while let Ok(buf) = token_rx.recv() {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= count {
                            return;
                        }
                        let r = merge_range(core, comb, runs, ranges, i, dir, buf);
                        let failed = r.is_err();
                        if done_tx.send((i, r)).is_err() || failed {
                            return;
                        }
                    }
                })
                .map_err(|e| Error::io("spawn a merging thread", path, e))?;
        }
        drop((token_rx, done_tx));
        let mut dropped = 0u64;
        let written = write_file(core, path, max_nnz, |tw| {
            let mut r = Rounder::new(core);
            let mut waiting = std::collections::BTreeMap::new();
            for i in 0..count {
                let m = loop {
                    if let Some(m) = waiting.remove(&i) {
                        break m;
                    }
                    match done_rx.recv() {
                        Ok((j, m)) => {
                            waiting.insert(j, m);
                        }
                        Err(_) => return Err(Error::Poisoned("merging threads (they stopped)")),
                    }
                };
                let m: Merged<K> = m?;
                if core.complex.is_some() {
                    for (k, v) in m.keys.iter().zip(&m.vals) {
                        r.put(core, tw, k, *v)?;
                    }
                } else {
                    let rank = core.layout.rank();
                    for (idx, vals) in m
                        .idx
                        .chunks(WRITE_RANGE_CHUNK * rank)
                        .zip(m.vals.chunks(WRITE_RANGE_CHUNK))
                    {
                        tw.push_batch(idx, vals)?;
                    }
                }
                dropped += m.dropped;
                let _ = token_tx.send(m);
            }
            r.flush(tw)?;
            dropped += r.dropped;
            Ok(true)
        });
        // The threads stop at their next range: no more tokens.
        drop(token_tx);
        let (nnz, fs) = written?;
        Ok((dropped, nnz, fs))
    })
}
