//! K-way merge of sorted runs, combining equal keys, and the intermediate
//! passes that bring the number of runs down to the fan-in.
//!
//! A binary heap of the runs' current keys, advanced in place with
//! `peek_mut`, yields each key once with the combination of every run's
//! accumulator for it. Which run a tie comes from does not matter: sums are
//! exact, min and max are symmetric, `last` carries the origin of each value
//! in the accumulator, `error` fails on any tie.

use crate::assemble::combine::{CombineError, Combiner};
use crate::assemble::shared::Core;
use crate::assemble::key::{Key, KeyLayout};
use crate::assemble::plan::{BLOCK_TARGET, RUN_READER_BYTES, SPILL_BUFFER};
use crate::assemble::spill::{Run, RunReader, RunWriter, SpillFile};
use crate::element::DType;
use crate::error::{Error, Result};
use std::cmp::Ordering;
use std::path::Path;
use std::sync::atomic::Ordering as AtomicOrdering;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;

/// The error for a combination that failed at `key`.
pub(crate) fn combine_error<K: Key>(
    layout: &KeyLayout,
    dtype: DType,
    key: &K,
    e: CombineError,
) -> Error {
    let mut coordinate = vec![0u64; layout.rank()];
    layout.unpack(key, &mut coordinate);
    match e {
        CombineError::Duplicate => Error::DuplicateCoordinate { coordinate },
        CombineError::Overflow => Error::IntegerOverflow {
            coordinate,
            dtype: dtype.name(),
        },
    }
}

struct Head<K> {
    key: K,
    src: usize,
}

impl<K: Ord> PartialEq for Head<K> {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key && self.src == o.src
    }
}
impl<K: Ord> Eq for Head<K> {}
impl<K: Ord> PartialOrd for Head<K> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<K: Ord> Ord for Head<K> {
    // Reversed: BinaryHeap is a max-heap and we want the smallest key.
    fn cmp(&self, o: &Self) -> Ordering {
        o.key.cmp(&self.key).then(o.src.cmp(&self.src))
    }
}

/// Merges runs into one stream of distinct, increasing keys.
pub(crate) struct Merger<'c, K: Key, C: Combiner> {
    comb: &'c C,
    layout: &'c KeyLayout,
    dtype: DType,
    readers: Vec<RunReader<'c, K, C>>,
    accs: Vec<Option<C::Acc>>,
    heap: BinaryHeap<Head<K>>,
}

impl<'c, K: Key, C: Combiner> Merger<'c, K, C> {
    pub(crate) fn new(
        comb: &'c C,
        layout: &'c KeyLayout,
        dtype: DType,
        mut readers: Vec<RunReader<'c, K, C>>,
    ) -> Result<Self> {
        let mut heap = BinaryHeap::with_capacity(readers.len());
        let mut accs = Vec::with_capacity(readers.len());
        for (src, r) in readers.iter_mut().enumerate() {
            match r.next_record()? {
                Some((key, acc)) => {
                    heap.push(Head { key, src });
                    accs.push(Some(acc));
                }
                None => accs.push(None),
            }
        }
        Ok(Merger {
            comb,
            layout,
            dtype,
            readers,
            accs,
            heap,
        })
    }

    /// Take the current record of the top run and advance that run.
    #[inline]
    fn take_top(&mut self) -> Result<Option<(K, C::Acc)>> {
        let Some(mut top) = self.heap.peek_mut() else {
            return Ok(None);
        };
        let src = top.src;
        let key = top.key;
        let acc = match self.accs[src].take() {
            Some(a) => a,
            None => {
                return Err(Error::CorruptRun {
                    run: src as u64,
                    detail: "merge lost a record".into(),
                })
            }
        };
        match self.readers[src].next_record()? {
            Some((k, a)) => {
                top.key = k;
                self.accs[src] = Some(a);
            }
            None => {
                PeekMut::pop(top);
            }
        }
        Ok(Some((key, acc)))
    }

    /// The next distinct key with everything combined, or None at the end.
    #[inline]
    pub(crate) fn next_combined(&mut self) -> Result<Option<(K, C::Acc)>> {
        let Some((key, mut acc)) = self.take_top()? else {
            return Ok(None);
        };
        while self.heap.peek().is_some_and(|h| h.key == key) {
            if let Some((_, more)) = self.take_top()? {
                self.comb
                    .merge(&mut acc, more)
                    .map_err(|e| combine_error(self.layout, self.dtype, &key, e))?;
            }
        }
        Ok(Some((key, acc)))
    }
}

/// Runs to merge in one pass when there are `n` and at most `fan_in` can be
/// open at once: merging the smallest first keeps rewritten bytes low, and
/// sizing the first pass so that later passes are full avoids a tiny last pass.
pub(crate) fn first_pass_width(n: usize, fan_in: usize) -> usize {
    if n <= fan_in {
        return n;
    }
    // Each pass turns w runs into 1 (removes w - 1). Make (n - 1) a multiple
    // of (fan_in - 1) after the first pass.
    let r = (n - 1) % (fan_in - 1);
    if r == 0 {
        fan_in
    } else {
        r + 1
    }
}

/// Open a reader on each run; `dir` names where spilled runs live, for
/// messages.
pub(crate) fn open_readers<'c, K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &'c C,
    runs: Vec<Run>,
    dir: &Path,
) -> Result<Vec<RunReader<'c, K, C>>> {
    runs.into_iter()
        .map(|r| RunReader::open(comb, r, core.run_format, dir, &core.opts.io))
        .collect()
}

/// The intermediate passes: while there are more runs than the fan-in,
/// merge the smallest ones into a new spilled run (the first pass sized by
/// [`first_pass_width`] so that the last pass is full). Returns the runs
/// left for the final pass and the number of passes made.
pub(crate) fn merge_passes<K: Key, C: Combiner>(
    core: &Core<K>,
    comb: &C,
    mut runs: Vec<Run>,
    dir_for_msgs: &Path,
) -> Result<(Vec<Run>, u32)> {
    let io = &core.opts.io;
    let fan_in = core.plan.fan_in;
    let mut passes = 0u32;
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
        let buffers = w as u64 * RUN_READER_BYTES + SPILL_BUFFER as u64 + BLOCK_TARGET as u64;
        core.mem.add(buffers);
        let id = core.next_run.fetch_add(1, AtomicOrdering::Relaxed);
        if pass_spill.is_none() {
            pass_spill = Some(SpillFile::create(&core.spill_dir()?, io)?);
        }
        let Some(sf) = pass_spill.as_mut() else {
            return Err(Error::Poisoned("spill file"));
        };
        let readers = open_readers(core, comb, group, dir_for_msgs)?;
        let mut merger = Merger::new(comb, &core.layout, core.dtype, readers)?;
        let mut wr = RunWriter::file(comb, id, core.run_format, sf, SPILL_BUFFER, io);
        while let Some((k, acc)) = merger.next_combined()? {
            wr.push(k, &acc)?;
        }
        let run = wr.finish()?;
        drop(merger);
        core.mem.sub(buffers + group_mem);
        core.bytes_spilled
            .fetch_add(run.bytes, AtomicOrdering::Relaxed);
        runs.push(run);
        passes += 1;
    }
    Ok((runs, passes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_widths_end_in_one_full_merge() {
        for fan_in in 2..10 {
            for n in 1..200 {
                let mut runs = n;
                let mut w = first_pass_width(runs, fan_in);
                let mut passes = 0;
                while runs > fan_in {
                    assert!(w >= 2 && w <= fan_in);
                    runs -= w - 1;
                    passes += 1;
                    w = first_pass_width(runs, fan_in).min(fan_in);
                    if runs > fan_in {
                        assert_eq!(w, fan_in, "later passes are full");
                    }
                }
                assert!(runs <= fan_in);
                assert!(passes <= n);
            }
        }
    }
}
