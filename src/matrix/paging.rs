//! Streaming through a mapped matrix: blocks handed out in order, pages
//! read ahead and released behind the slowest worker.
//!
//! A [`Sweep`] cuts the entries into blocks (chosen from the data, never
//! from the thread count), gives them to workers in increasing order, keeps
//! every worker within a window of blocks of the oldest unfinished one, and
//! hands finished blocks to an in-order completion step (the fixed-order
//! reduction of partial vectors). When the matrix streams (see [`Paging`]),
//! the buffers get `MADV_SEQUENTIAL`, the next bytes `MADV_WILLNEED`, and the
//! pages behind the oldest unfinished block `MADV_DONTNEED` (sound only on
//! a read-only file mapping: dropped pages are read again from the file).

use super::view::Matrix;
use crate::read::release::{self, page_size, physical_memory};
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

crate::vocab::vocabulary! {
    /// How a pass over a stored matrix treats the file's pages.
    #[derive(Default)]
    pub enum Paging ("paging mode") {
        /// [`Paging::Stream`] when the stored entries exceed a quarter of the
        /// physical memory, else [`Paging::Keep`].
        #[default]
        Auto => "auto": "stream when the matrix exceeds a quarter of physical memory (the default)",
        /// Sequential advice, read ahead, and release behind: resident memory
        /// stays a bounded window however large the file. A later pass reads
        /// the file again (from the page cache if it is still there).
        Stream => "stream": "release the pages behind the pass (files larger than memory)",
        /// Leave the pages mapped: repeated passes over a matrix that fits in
        /// memory cost no page faults.
        Keep => "keep": "leave the pages mapped (repeated passes over a matrix that fits)",
    }
}

/// Bytes read ahead of the newest block handed out.
const READ_AHEAD: usize = 32 << 20;
/// Bytes of blocks a streaming pass may have in flight.
const STREAM_WINDOW: usize = 16 << 20;
/// madvise calls cover at least this many bytes (fewer system calls).
const ADVISE_STEP: usize = 4 << 20;

/// [`release::advise`] on a matrix's buffers.
fn advise(lo: usize, hi: usize, advice: libc::c_int) {
    // SAFETY: the passes give ranges inside the matrix's buffers, which lie
    // in a live read-only mapping; MADV_DONTNEED is only given when the
    // pass streams, which needs `Matrix::releasable` (a file mapping).
    unsafe { release::advise(lo, hi, advice) }
}

/// One buffer of the matrix: address of entry 0 and bytes per entry.
#[derive(Clone, Copy, Debug)]
struct Region {
    base: usize,
    width: usize,
    len: usize,
}

impl Region {
    fn of(bytes: &[u8], entries: usize) -> Region {
        Region {
            base: bytes.as_ptr() as usize,
            width: bytes.len().checked_div(entries).unwrap_or(0),
            len: bytes.len(),
        }
    }
    fn addr(&self, entry: usize) -> usize {
        self.base + (entry * self.width).min(self.len)
    }
}

/// The page work of a pass over the matrix's two buffers.
struct Pager {
    regions: [Region; 2],
    page: usize,
    stream: bool,
    /// Per region: bytes below this address are released / advised.
    released: [usize; 2],
    advised: [usize; 2],
}

impl Pager {
    fn new(m: &Matrix<'_>, paging: Paging) -> Pager {
        let n = m.nnz() as usize;
        let stream = m.releasable()
            && match paging {
                Paging::Stream => true,
                Paging::Keep => false,
                Paging::Auto => m.stored_bytes() > physical_memory() / 4,
            };
        let page = page_size();
        let regions = [
            Region::of(m.values_bytes(), n),
            Region::of(m.indices_bytes(), n),
        ];
        let down = |a: usize| a & !(page - 1);
        let p = Pager {
            released: regions.map(|r| down(r.base)),
            advised: regions.map(|r| r.base),
            regions,
            page,
            stream,
        };
        if p.stream {
            for r in &p.regions {
                advise(down(r.base), r.base + r.len, libc::MADV_SEQUENTIAL);
            }
        }
        p
    }

    fn down(&self, a: usize) -> usize {
        a & !(self.page - 1)
    }

    /// Entries before `entry` are done with: drop their pages.
    fn release_before(&mut self, entry: usize, force: bool) {
        if !self.stream {
            return;
        }
        for k in 0..2 {
            let to = self.down(self.regions[k].addr(entry));
            if to > self.released[k] && (force || to - self.released[k] >= ADVISE_STEP) {
                advise(self.released[k], to, libc::MADV_DONTNEED);
                self.released[k] = to;
            }
        }
    }

    /// Entries up to `entry` are about to be read: ask for them and a
    /// window beyond.
    fn read_ahead(&mut self, entry: usize) {
        if !self.stream {
            return;
        }
        for k in 0..2 {
            let r = self.regions[k];
            let want = (r.addr(entry) + READ_AHEAD).min(r.base + r.len);
            if want > self.advised[k] && want - self.advised[k] >= ADVISE_STEP.min(r.len) {
                advise(self.down(self.advised[k]), want, libc::MADV_WILLNEED);
                self.advised[k] = want;
            }
        }
    }

    fn finish(&mut self, entries: usize) {
        if !self.stream {
            return;
        }
        self.release_before(entries, true);
        for r in self.regions {
            advise(self.down(r.base), r.base + r.len, libc::MADV_NORMAL);
        }
    }
}

struct State<P, S> {
    /// Lowest block not yet completed in order.
    low: usize,
    /// Completed blocks waiting for the ones before them.
    pending: BTreeMap<usize, P>,
    pager: Pager,
    /// What the in-order completion step works on (the output vector).
    sink: S,
}

/// Blocks of a pass, handed out in order to any number of workers.
pub(crate) struct Sweep<'s, P, S> {
    blocks: &'s [Range<usize>],
    next: AtomicUsize,
    window: usize,
    state: Mutex<State<P, S>>,
    cv: Condvar,
    stop: AtomicBool,
}

impl<'s, P, S> Sweep<'s, P, S> {
    /// A pass over `blocks` (entry ranges, increasing) of `m`; at most
    /// `window` blocks are handed out beyond the oldest unfinished one,
    /// more (`STREAM_WINDOW` bytes' worth) when the pass streams, and
    /// without limit when `window` is `None` and the pass does not stream
    /// (nothing then depends on it, and a descheduled worker would stall
    /// the others).
    pub(crate) fn new(
        m: &Matrix<'_>,
        blocks: &'s [Range<usize>],
        window: Option<usize>,
        paging: Paging,
        sink: S,
    ) -> Self {
        let pager = Pager::new(m, paging);
        let bytes_per_block = (m.stored_bytes() as usize)
            .checked_div(blocks.len())
            .unwrap_or(1)
            .max(1);
        let window = match (window, pager.stream) {
            (Some(w), _) => w,
            (None, true) => (STREAM_WINDOW / bytes_per_block).max(4),
            (None, false) => usize::MAX / 2,
        };
        Sweep {
            blocks,
            next: AtomicUsize::new(0),
            window: window.max(1),
            state: Mutex::new(State {
                low: 0,
                pending: BTreeMap::new(),
                pager,
                sink,
            }),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<P, S>> {
        // A worker that panicked holding the lock leaves the state as
        // consistent as any other interruption: keep going, the panic
        // itself is reported by the thread pool.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next block to work on (its number and entries), waiting while
    /// it is too far ahead of the oldest unfinished block; `None` when all
    /// are handed out or the pass was stopped.
    pub(crate) fn claim(&self) -> Option<(usize, Range<usize>)> {
        let b = self.next.fetch_add(1, Ordering::Relaxed);
        if b >= self.blocks.len() {
            return None;
        }
        let mut st = self.lock();
        while b >= st.low + self.window && !self.stop.load(Ordering::Relaxed) {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        st.pager.read_ahead(self.blocks[b].end);
        Some((b, self.blocks[b].clone()))
    }

    /// Block `b` is done with `payload`; `complete` runs on every finished
    /// block in block order (under the lock), whatever order they finish in.
    pub(crate) fn done(&self, b: usize, payload: P, mut complete: impl FnMut(&mut S, P)) {
        let mut st = self.lock();
        st.pending.insert(b, payload);
        let before = st.low;
        loop {
            let low = st.low;
            let Some(p) = st.pending.remove(&low) else {
                break;
            };
            complete(&mut st.sink, p);
            st.low += 1;
        }
        if st.low != before {
            let entry = self
                .blocks
                .get(st.low)
                .map_or_else(|| self.blocks.last().map_or(0, |r| r.end), |r| r.start);
            st.pager.release_before(entry, false);
            self.cv.notify_all();
        }
    }

    /// Run `f` on the completion step's state (under the lock).
    pub(crate) fn with_sink<R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        f(&mut self.lock().sink)
    }

    /// Stop handing out blocks (after an error).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let _g = self.lock();
        self.cv.notify_all();
    }

    /// End the pass: release the rest, restore normal advice, give back the sink.
    pub(crate) fn finish(self) -> S {
        let end = self.blocks.last().map_or(0, |r| r.end);
        let mut st = self.state.into_inner().unwrap_or_else(|e| e.into_inner());
        st.pager.finish(end);
        st.sink
    }
}

/// One thread walking `blocks` in order with the same page handling (the
/// exports and the picture).
pub(crate) fn for_each_block<E>(
    m: &Matrix<'_>,
    blocks: &[Range<usize>],
    paging: Paging,
    mut f: impl FnMut(Range<usize>) -> Result<(), E>,
) -> Result<(), E> {
    let sweep: Sweep<'_, (), ()> = Sweep::new(m, blocks, Some(1), paging, ());
    // Bytes of an entry's index and value, which the progress counts.
    let entry = m.stored_bytes() / m.nnz().max(1);
    while let Some((b, r)) = sweep.claim() {
        let len = r.len() as u64;
        if let Err(e) = f(r) {
            sweep.stop();
            sweep.finish();
            return Err(e);
        }
        sweep.done(b, (), |_, _| {});
        if let Some(p) = m.progress() {
            p.add(len * entry);
        }
    }
    sweep.finish();
    Ok(())
}
