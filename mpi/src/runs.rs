//! Combining across the whole stash, not only within one outgoing buffer.
//!
//! When a full outgoing buffer, sorted and combined, is still more than
//! half full but combining did remove some of it (at least 1/32: duplicates
//! are there, just not close together in the stash), it is written as a sorted
//! run to an unnamed temporary file instead of being sent, and reading the
//! stash goes on. Once the stash is drained the runs are merged, at most
//! [`FAN_IN`] at a time (in passes while there are more), the records of
//! equal index tuples combined again across runs, and the merged stream is
//! sent in rounds of at most `C` records, as the buffers were.
//!
//! Exactness is unchanged: combining any part of a group, and then the
//! combined parts together, leaves the owner's result the same
//! (`combine.rs`), so the composite stays bit-identical; only the records
//! exchanged drop, towards what combining all of a rank's off-rank
//! records at once would give.
//!
//! Memory: the merge uses at most `mem_records` records of buffers (half
//! for the run readers, an eighth each for a group, its combined form and
//! the part not yet handed out), which the exchange takes from the
//! outgoing buffer it no longer needs once the stash is drained.

use super::combine::{Precombine, sort_and_combine};
use coo_assembler::Result;
use coo_assembler::internals::fs::ctx::IoCtx;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Runs merged at once.
pub(crate) const FAN_IN: usize = 16;

/// One sorted, combined run: `words` u64 at byte `start` of an unnamed
/// temporary file that other runs share.
struct Run {
    file: Arc<File>,
    start: u64,
    words: u64,
}

/// The runs a rank wrote while reading its stash. Runs are appended to
/// one file (a file per run would hold a descriptor per run until the
/// stash is drained: thousands on a large stash); each merge pass
/// appends its output to a fresh file, so the first one is freed once its
/// runs are all merged.
pub(crate) struct Runs {
    wpr: usize,
    dir: PathBuf,
    io: IoCtx,
    runs: Vec<Run>,
    /// The file runs are appended to, and its length.
    tail: Option<(Arc<File>, u64)>,
    written: u64,
}

impl Runs {
    pub(crate) fn new(wpr: usize, dir: &Path, io: IoCtx) -> Runs {
        Runs {
            wpr,
            dir: dir.to_path_buf(),
            io,
            runs: Vec::new(),
            tail: None,
            written: 0,
        }
    }

    /// Append `recs` to the current file (a new one if there is none); the
    /// file and the byte offset they start at.
    fn append(&mut self, recs: &[u64]) -> Result<(Arc<File>, u64)> {
        let (file, end) = match self.tail.take() {
            Some(t) => t,
            None => (Arc::new(self.io.tempfile_in(&self.dir)?), 0),
        };
        self.io
            .write_all_at(&file, bytemuck::cast_slice(recs), end, &self.dir)?;
        let bytes = recs.len() as u64 * 8;
        self.written += bytes;
        self.tail = Some((Arc::clone(&file), end + bytes));
        Ok((file, end))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Bytes written to run files, merge passes included.
    pub(crate) fn written_bytes(&self) -> u64 {
        self.written
    }

    /// Keep `recs` (records sorted by index tuple) as a new run.
    pub(crate) fn push(&mut self, recs: &[u64]) -> Result<()> {
        if recs.is_empty() {
            return Ok(());
        }
        let (file, start) = self.append(recs)?;
        self.runs.push(Run {
            file,
            start,
            words: recs.len() as u64,
        });
        Ok(())
    }

    /// Merge the runs into one sorted, combined stream, handed out by
    /// [`Merge::next_batch`]; passes of [`FAN_IN`] runs first while there
    /// are more. `mem_records`: the merge's buffer space, in records.
    pub(crate) fn merge(&mut self, how: Precombine, mem_records: usize) -> Result<Merge> {
        let part = (mem_records / 8).max(1);
        // Pass outputs go to a new file: the stash's file is dropped once
        // its runs are merged.
        self.tail = None;
        while self.runs.len() > FAN_IN {
            let some: Vec<Run> = self.runs.drain(..FAN_IN).collect();
            let mut m = Merge::new(some, self.wpr, how, mem_records, self)?;
            let mut first: Option<(Arc<File>, u64)> = None;
            let mut words = 0u64;
            let mut batch = Vec::new();
            loop {
                let done = m.next_batch(&mut batch, part)?;
                if !batch.is_empty() {
                    let at = self.append(&batch)?;
                    first.get_or_insert(at);
                    words += batch.len() as u64;
                }
                if done {
                    break;
                }
            }
            if let Some((file, start)) = first {
                self.runs.push(Run { file, start, words });
            }
        }
        let all = std::mem::take(&mut self.runs);
        Merge::new(all, self.wpr, how, mem_records, self)
    }
}

/// Reads one run through a bounded buffer.
struct Reader {
    run: Run,
    /// Words of the file read into `buf` so far.
    read: u64,
    buf: Vec<u64>,
    cap_words: usize,
    /// The current record starts at `buf[at]`.
    at: usize,
}

impl Reader {
    fn head(&self, wpr: usize) -> Option<&[u64]> {
        self.buf.get(self.at..self.at + wpr)
    }

    fn advance(&mut self, wpr: usize, io: &IoCtx, dir: &Path) -> Result<()> {
        self.at += wpr;
        if self.at >= self.buf.len() {
            self.refill(io, dir)?;
        }
        Ok(())
    }

    fn refill(&mut self, io: &IoCtx, dir: &Path) -> Result<()> {
        let n = ((self.run.words - self.read) as usize).min(self.cap_words);
        self.buf.clear();
        self.buf.resize(n, 0);
        io.read_exact_at(
            &self.run.file,
            bytemuck::cast_slice_mut(&mut self.buf[..]),
            self.run.start + self.read * 8,
            dir,
        )?;
        self.read += n as u64;
        self.at = 0;
        Ok(())
    }
}

/// The merged, combined stream of some runs.
pub(crate) struct Merge {
    readers: Vec<Reader>,
    wpr: usize,
    how: Precombine,
    io: IoCtx,
    dir: PathBuf,
    /// Records gathered at most per combining step.
    part: usize,
    key: Vec<u64>,
    group: Vec<u64>,
    perm: Vec<u32>,
    /// Combined records not handed out yet, from `pending_at` on.
    pending: Vec<u64>,
    pending_at: usize,
}

impl Merge {
    fn new(
        runs: Vec<Run>,
        wpr: usize,
        how: Precombine,
        mem_records: usize,
        at: &Runs,
    ) -> Result<Merge> {
        let per_reader = (mem_records / 2 / runs.len().max(1)).max(1) * wpr;
        let mut readers = Vec::with_capacity(runs.len());
        for run in runs {
            let mut r = Reader {
                run,
                read: 0,
                buf: Vec::new(),
                cap_words: per_reader,
                at: 0,
            };
            r.refill(&at.io, &at.dir)?;
            readers.push(r);
        }
        Ok(Merge {
            readers,
            wpr,
            how,
            io: at.io.clone(),
            dir: at.dir.clone(),
            part: (mem_records / 8).max(1),
            key: Vec::with_capacity(wpr),
            group: Vec::new(),
            perm: Vec::new(),
            pending: Vec::new(),
            pending_at: 0,
        })
    }

    /// The next records of the stream, at most `max_records`, into `out`
    /// (cleared first). True when nothing is left after them.
    pub(crate) fn next_batch(&mut self, out: &mut Vec<u64>, max_records: usize) -> Result<bool> {
        out.clear();
        let max_words = max_records.max(1) * self.wpr;
        loop {
            if self.pending_at < self.pending.len() {
                let n = (self.pending.len() - self.pending_at).min(max_words - out.len());
                out.extend_from_slice(&self.pending[self.pending_at..self.pending_at + n]);
                self.pending_at += n;
                if out.len() == max_words {
                    let left = self.pending_at < self.pending.len()
                        || self.readers.iter().any(|r| r.head(self.wpr).is_some());
                    return Ok(!left);
                }
            }
            if !self.next_group()? {
                return Ok(true);
            }
        }
    }

    /// Gather the records of the smallest index tuple across the runs (at
    /// most `part` records; the rest come next time, which is as exact)
    /// and combine them into `pending`. False when every run is done.
    fn next_group(&mut self) -> Result<bool> {
        let (wpr, kl) = (self.wpr, self.wpr - 1);
        let smallest = self
            .readers
            .iter()
            .filter_map(|r| r.head(wpr))
            .min_by(|a, b| a[..kl].cmp(&b[..kl]));
        let Some(h) = smallest else {
            return Ok(false);
        };
        self.key.clear();
        self.key.extend_from_slice(&h[..kl]);
        self.group.clear();
        let limit = self.part * wpr;
        'runs: for r in &mut self.readers {
            while let Some(h) = r.head(wpr) {
                if h[..kl] != self.key[..] {
                    break;
                }
                self.group.extend_from_slice(h);
                r.advance(wpr, &self.io, &self.dir)?;
                if self.group.len() >= limit {
                    break 'runs;
                }
            }
        }
        sort_and_combine(
            &self.group,
            wpr,
            self.how,
            &mut self.perm,
            &mut self.pending,
        );
        self.pending_at = 0;
        Ok(true)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use coo_assembler::DType;
    use coo_assembler::internals::assemble::combine::CombinerKind;
    use std::collections::BTreeMap;

    /// Runs of integer sums over few keys: the merge gives one record per
    /// key, in key order, with the sums, through merge passes too.
    #[test]
    fn merges_and_combines_across_runs() {
        let dir = tempfile::tempdir().unwrap();
        let how = Precombine::new(CombinerKind::IntSum, DType::I64);
        for (runs, mem) in [(3usize, 64usize), (40, 64), (40, 8)] {
            let mut r = Runs::new(3, dir.path(), IoCtx::new());
            let mut want: BTreeMap<(u64, u64), i64> = BTreeMap::new();
            let mut pushed = 0u64;
            for k in 0..runs as u64 {
                let mut recs = Vec::new();
                for i in 0..50u64 {
                    let key = (i * 7 + k) % 23;
                    recs.extend_from_slice(&[key, key % 5, (k * 100 + i) as i64 as u64]);
                    *want.entry((key, key % 5)).or_default() += (k * 100 + i) as i64;
                }
                let mut sorted = Vec::new();
                let mut perm = Vec::new();
                sort_and_combine(&recs, 3, how, &mut perm, &mut sorted);
                r.push(&sorted).unwrap();
                pushed += sorted.len() as u64 * 8;
            }
            let mut m = r.merge(how, mem).unwrap();
            let mut got = Vec::new();
            let mut batch = Vec::new();
            loop {
                let done = m.next_batch(&mut batch, 5).unwrap();
                assert!(batch.len() <= 15);
                got.extend_from_slice(&batch);
                if done {
                    break;
                }
            }
            // Parts of a group may come combined separately (mem 8):
            // sum them back per key, in order.
            let mut sums: BTreeMap<(u64, u64), i64> = BTreeMap::new();
            let keys: Vec<(u64, u64)> = got.chunks_exact(3).map(|c| (c[0], c[1])).collect();
            assert!(keys.windows(2).all(|w| w[0] <= w[1]), "not in key order");
            for c in got.chunks_exact(3) {
                *sums.entry((c[0], c[1])).or_default() += c[2] as i64;
            }
            assert_eq!(sums, want, "{runs} runs, mem {mem}");
            if runs <= mem / 8 {
                assert_eq!(got.len() / 3, want.len(), "one record per key");
            }
            // Merge passes write runs of their own.
            assert_eq!(r.written_bytes() > pushed, runs > FAN_IN);
            // Run files are unnamed.
            assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
    }
}
