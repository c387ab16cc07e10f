//! K-way merge of sorted runs, combining equal keys, and the intermediate
//! passes that bring the number of runs down to the fan-in.
//!
//! A loser tree over the runs' current keys yields each key once with the
//! combination of every run's accumulator for it: advancing the winning run
//! replays one leaf-to-root path, one comparison per level (a binary heap's
//! sift-down makes about two). The keys live in the tree nodes, so a
//! replay touches no reader. Ties come out in run order (as the heap gave
//! them), so every policy combines in the same order as before: sums are
//! exact, min and max are symmetric, `last` carries the origin of each value
//! in the accumulator, `error` fails on any tie.

use crate::assemble::combine::Combiner;
use crate::assemble::combine::combine_error;
use crate::assemble::key::{Key, KeyLayout};
use crate::assemble::plan::{BLOCK_TARGET, RUN_READER_BYTES, SPILL_BUFFER};
use crate::assemble::shared::{Core, Watch};
use crate::assemble::spill::{Run, RunReader, RunWriter, SpillFile};
use crate::element::DType;
use crate::error::{Error, Result};
use crate::progress::Step;
use std::path::Path;
use std::sync::atomic::Ordering as AtomicOrdering;

/// One run's current key in the loser tree, ordered by key, then by run
/// (ties come out in run order). A run that ended holds the largest key
/// and [`DONE`], so it sorts after every real key (an all-ones one too).
/// No padding: a node is copied as whole words.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Node<K> {
    key: K,
    tag: u64,
}

/// The tag of a run that has ended.
const DONE: u64 = u64::MAX;

/// The largest key of type `K` (all bits set).
fn max_key<K: Key>() -> K {
    let mut k = K::default();
    for shift in (0..K::BITS).step_by(64) {
        k.or_bits(u64::MAX, shift);
    }
    k
}

/// Merges runs into one stream of distinct, increasing keys.
pub(crate) struct Merger<'c, K: Key, C: Combiner> {
    comb: &'c C,
    layout: &'c KeyLayout,
    dtype: DType,
    /// Each run, positioned after the key its leaf holds (its accumulator
    /// not yet decoded).
    readers: Vec<RunReader<'c, K, C>>,
    /// `tree[0]` is the winner (the smallest current key); `tree[j]` for
    /// `1 <= j < n` the loser of the match at internal node `j`. Leaf `i`
    /// (run `i`) sits at position `n + i`, implicit.
    tree: Vec<Node<K>>,
    /// What an ended run holds.
    done: Node<K>,
    /// When the winner has held the top since its last replay: the
    /// smallest node of every other run (the least loser on its path).
    /// Otherwise [`Merger::least`], which nothing is below.
    bar: Node<K>,
    /// The least node there is: key zero of run zero.
    least: Node<K>,
    /// The caller's stop flag and progress, looked at and moved every
    /// [`WATCH_EVERY`] keys.
    watch: Watch<'c>,
}

/// Keys merged between two looks at the caller's [`Watch`].
const WATCH_EVERY: u32 = 1 << 16;

impl<'c, K: Key, C: Combiner> Merger<'c, K, C> {
    pub(crate) fn new(
        comb: &'c C,
        layout: &'c KeyLayout,
        dtype: DType,
        mut readers: Vec<RunReader<'c, K, C>>,
        watch: Watch<'c>,
    ) -> Result<Self> {
        let firsts = readers
            .iter_mut()
            .map(|r| r.next_key())
            .collect::<Result<Vec<_>>>()?;
        Self::with_firsts(comb, layout, dtype, readers, firsts, watch)
    }

    /// [`Merger::new`] of readers whose first keys were read already
    /// (`firsts[i]`, None for a run that ended).
    pub(crate) fn with_firsts(
        comb: &'c C,
        layout: &'c KeyLayout,
        dtype: DType,
        readers: Vec<RunReader<'c, K, C>>,
        firsts: Vec<Option<K>>,
        watch: Watch<'c>,
    ) -> Result<Self> {
        let n = readers.len();
        let done = Node {
            key: max_key::<K>(),
            tag: DONE,
        };
        // Winners of every subtree, leaves included, to build the losers.
        let mut win = vec![done; n.max(1)];
        for (src, first) in firsts.into_iter().enumerate() {
            win.push(match first {
                Some(key) => Node {
                    key,
                    tag: src as u64,
                },
                None => done,
            });
        }
        let least = Node {
            key: K::default(),
            tag: 0,
        };
        let mut tree = vec![done; n.max(1)];
        if n > 0 {
            for j in (1..n).rev() {
                let (a, b) = (win[2 * j], win[2 * j + 1]);
                let (w, l) = if b < a { (b, a) } else { (a, b) };
                tree[j] = l;
                win[j] = w;
            }
            tree[0] = win[1];
        }
        Ok(Merger {
            comb,
            layout,
            dtype,
            readers,
            tree,
            done,
            bar: least,
            least,
            watch,
        })
    }

    /// Take the accumulator of the winning run `src` (whose key is the
    /// current minimum), read that run's next key and replay its path.
    #[inline(always)]
    fn advance(&mut self, src: usize) -> Result<C::Acc> {
        let Some(reader) = self.readers.get_mut(src) else {
            return Err(lost(src));
        };
        let acc = reader.take_acc()?;
        let mut cand = match reader.next_key()? {
            Some(key) => Node {
                key,
                tag: src as u64,
            },
            None => self.done,
        };
        let tree = self.tree.as_mut_slice();
        let leaf = (tree.len() + src) / 2;
        // Still below every other run: each match on the path has the
        // same loser as before, so nothing to replay. Runs of input in
        // element order cover nearly disjoint key ranges, and most keys
        // take this way (one comparison instead of one per level).
        if cand < self.bar {
            if let Some(top) = tree.first_mut() {
                *top = cand;
            }
            return Ok(acc);
        }
        // An indexed pick rather than a swap under a branch: with random
        // keys each match is a coin toss the branch predictor loses, and
        // the compiler turns an if on a two-word node into a branch.
        let mut j = leaf;
        while j > 0 && j < tree.len() {
            let pair = [cand, tree[j]];
            let lower = usize::from(pair[1] < pair[0]);
            tree[j] = pair[1 - lower];
            cand = pair[lower];
            j /= 2;
        }
        if let Some(top) = tree.first_mut() {
            *top = cand;
        }
        // The same run won again: the losers on its path are the other
        // runs' smallest nodes, and the least of them is the bar. (When
        // another run took over, its path was not replayed: no bar yet,
        // which costs nothing where winners alternate, as random keys do.)
        self.bar = if cand.tag == src as u64 {
            let mut j = leaf;
            let mut bar = self.done;
            while j > 0 && j < tree.len() {
                bar = bar.min(tree[j]);
                j /= 2;
            }
            bar
        } else {
            self.least
        };
        Ok(acc)
    }

    /// Call `f` with every distinct key and the combination of every
    /// run's accumulator for it, in key order, until the runs end
    /// (`Ok(true)`) or `f` returns `Ok(false)` (then `Ok(false)`). One loop
    /// around the whole merge, and the accumulator lent rather than moved
    /// out, keep each record in registers.
    #[inline]
    pub(crate) fn for_each(
        &mut self,
        mut f: impl FnMut(K, &C::Acc) -> Result<bool>,
    ) -> Result<bool> {
        let w = self.watch;
        // Keys until the next look at the watch, and records taken since.
        let (mut until_look, mut taken) = (0u32, 0u64);
        loop {
            if until_look == 0 {
                w.progress.add(taken * w.record_bytes);
                taken = 0;
                if w.stop.load(AtomicOrdering::Relaxed) {
                    return Err(Error::Stopped);
                }
                until_look = WATCH_EVERY;
            }
            until_look -= 1;
            let top = self.tree[0];
            if top.tag == DONE {
                w.progress.add(taken * w.record_bytes);
                return Ok(true);
            }
            let key = top.key;
            let mut acc = self.advance(top.tag as usize)?;
            taken += 1;
            loop {
                let next = self.tree[0];
                if next.key != key || next.tag == DONE {
                    break;
                }
                taken += 1;
                let more = self.advance(next.tag as usize)?;
                self.comb
                    .merge(&mut acc, more)
                    .map_err(|e| combine_error(self.layout, self.dtype, &key, e))?;
            }
            if !f(key, &acc)? {
                return Ok(false);
            }
        }
    }
}

/// A run's accumulator went missing: the merge's own bookkeeping is broken.
#[cold]
fn lost(src: usize) -> Error {
    Error::CorruptRun {
        run: src as u64,
        detail: "merge lost a record".into(),
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
    if r == 0 { fan_in } else { r + 1 }
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
        let records: u64 = group.iter().map(|r| r.entries).sum();
        core.opts
            .progress
            .start(Step::Merge, records * core.plan.record_bytes);
        let group_mem: u64 = group
            .iter()
            .filter(|r| !r.is_spilled())
            .map(|r| r.bytes)
            .sum();
        let buffers = w as u64 * RUN_READER_BYTES + SPILL_BUFFER as u64 + BLOCK_TARGET as u64;
        core.budget.add(buffers);
        let id = core.next_run.fetch_add(1, AtomicOrdering::Relaxed);
        if pass_spill.is_none() {
            pass_spill = Some(SpillFile::create(&core.spill_dir()?, io)?);
        }
        let Some(sf) = pass_spill.as_mut() else {
            return Err(Error::Poisoned("spill file"));
        };
        let readers = open_readers(core, comb, group, dir_for_msgs)?;
        let mut merger = Merger::new(comb, &core.layout, core.out_dtype(), readers, core.watch())?;
        let mut wr = RunWriter::file(comb, id, core.run_format, sf, SPILL_BUFFER, io);
        merger.for_each(|k, acc| {
            wr.push(k, acc)?;
            Ok(true)
        })?;
        let run = wr.finish()?;
        drop(merger);
        core.budget.sub(buffers + group_mem);
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
    use crate::assemble::combine::{FloatFastSum, IntSum};
    use crate::assemble::spill::RunFormat;
    use crate::fs::ctx::IoCtx;
    use crate::progress::Progress;
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;

    const FMT: RunFormat = RunFormat {
        key_bits: 40,
        fingerprint: 5,
        block_target: 64,
    };

    /// In-memory runs of `(key, acc)` records (each run's keys increasing).
    fn runs<K: Key, C: Combiner>(c: &C, data: &[Vec<(K, C::Acc)>]) -> Vec<Run> {
        let io = IoCtx::new();
        data.iter()
            .enumerate()
            .map(|(id, recs)| {
                let mut w = RunWriter::memory(c, id as u64, FMT, 0, &io).unwrap();
                for (k, a) in recs {
                    w.push(*k, a).unwrap();
                }
                w.finish().unwrap()
            })
            .collect()
    }

    /// Everything `Merger::for_each` yields.
    fn merged<K: Key, C: Combiner>(c: &C, data: &[Vec<(K, C::Acc)>]) -> Vec<(K, C::Acc)> {
        let layout = KeyLayout::new(&[1 << 20, 1 << 20]);
        let io = IoCtx::new();
        let readers = runs(c, data)
            .into_iter()
            .map(|r| RunReader::open(c, r, FMT, Path::new("<memory>"), &io).unwrap())
            .collect();
        let (stop, progress) = (AtomicBool::new(false), Progress::new());
        let watch = Watch {
            stop: &stop,
            progress: &progress,
            record_bytes: 16,
        };
        let mut m = Merger::new(c, &layout, DType::I64, readers, watch).unwrap();
        let mut out = Vec::new();
        let all = m
            .for_each(|k, a| {
                out.push((k, a.clone()));
                Ok(true)
            })
            .unwrap();
        assert!(all);
        out
    }

    /// A small deterministic generator: `rnd(m)` is in `0..m`.
    fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
        move |m| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % m
        }
    }

    #[test]
    fn loser_tree_merges_any_number_of_runs_exactly() {
        let c = IntSum(DType::I64);
        let mut rnd = xorshift(0x2545_f491_4f6c_dd1du64);
        for n in [0usize, 1, 2, 3, 4, 5, 7, 8, 9, 16, 31, 33] {
            let mut data: Vec<Vec<(u64, i128)>> = Vec::new();
            let mut want: BTreeMap<u64, i128> = BTreeMap::new();
            for r in 0..n {
                // Some runs empty, some long; keys from a small range so
                // that many appear in several runs.
                let len = if r % 4 == 3 { 0 } else { rnd(300) };
                let mut keys: Vec<u64> = (0..len).map(|_| rnd(500)).collect();
                keys.sort_unstable();
                keys.dedup();
                let recs: Vec<(u64, i128)> =
                    keys.iter().map(|&k| (k, rnd(1000) as i128 - 500)).collect();
                for &(k, v) in &recs {
                    *want.entry(k).or_default() += v;
                }
                data.push(recs);
            }
            let got = merged(&c, &data);
            let want: Vec<(u64, i128)> = want.into_iter().collect();
            assert_eq!(got, want, "{n} runs");
        }
    }

    #[test]
    fn banded_runs_merge_exactly_and_in_run_order() {
        // Runs over neighbouring key bands that overlap at their edges, as
        // chunks of input in element order are: long stretches where one
        // run keeps winning (no replay), ties where bands meet. Plain f64
        // addition with values of very different sizes tells the order of
        // a tie apart.
        let c = FloatFastSum(DType::F64);
        let mut rnd = xorshift(0x9e37_79b9_7f4a_7c15u64);
        for (n, band, overlap) in [
            (1usize, 50u64, 0u64),
            (2, 40, 5),
            (5, 100, 30),
            (24, 64, 16),
            (33, 10, 25),
        ] {
            let mut data: Vec<Vec<(u64, f64)>> = Vec::new();
            let mut want: BTreeMap<u64, f64> = BTreeMap::new();
            for r in 0..n as u64 {
                let lo = (r * band).saturating_sub(overlap);
                let hi = (r + 1) * band + overlap;
                let mut keys: Vec<u64> = (lo..hi).filter(|_| rnd(4) != 0).collect();
                if r % 7 == 6 {
                    keys.truncate(keys.len() / 3); // a run that ends early
                }
                let recs: Vec<(u64, f64)> = keys
                    .iter()
                    .map(|&k| {
                        (
                            k,
                            if rnd(2) == 0 {
                                9.007_199_254_740_992e15
                            } else {
                                rnd(9) as f64 - 4.0
                            },
                        )
                    })
                    .collect();
                for &(k, v) in &recs {
                    want.entry(k).and_modify(|a| *a += v).or_insert(v);
                }
                data.push(recs);
            }
            let got = merged(&c, &data);
            let want: Vec<(u64, f64)> = want.into_iter().collect();
            assert_eq!(got.len(), want.len(), "{n} runs");
            for ((gk, gv), (wk, wv)) in got.iter().zip(&want) {
                assert_eq!((gk, gv.to_bits()), (wk, wv.to_bits()), "{n} runs");
            }
        }
    }

    #[test]
    fn ties_combine_in_run_order() {
        // Plain f64 addition tells the orders apart: (2^53 + 1) - 2^53 is
        // 0, (2^53 - 2^53) + 1 is 1.
        let c = FloatFastSum(DType::F64);
        const P53: f64 = 9_007_199_254_740_992.0;
        let data = vec![
            vec![(3u64, P53), (9, 1.0)],
            vec![(3, 1.0), (9, P53)],
            vec![(3, -P53), (9, -P53)],
        ];
        assert_eq!(merged(&c, &data), vec![(3, 0.0), (9, 0.0)]);
        let data = vec![vec![(3u64, P53)], vec![(3, -P53)], vec![(3, 1.0)]];
        assert_eq!(merged(&c, &data), vec![(3, 1.0)]);
    }

    #[test]
    fn the_largest_key_is_not_taken_for_an_ended_run() {
        let c = IntSum(DType::I64);
        assert_eq!(max_key::<u64>(), u64::MAX);
        assert_eq!(max_key::<u128>(), u128::MAX);
        let data = vec![
            vec![(1u128, 1i128), (u128::MAX, 2)],
            vec![],
            vec![(u128::MAX, 5)],
        ];
        assert_eq!(merged(&c, &data), vec![(1, 1), (u128::MAX, 7)]);
    }

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
