//! [`Builder`] and the per-thread [`Pusher`]s: validate each contribution,
//! pack its index tuple into a key, append `(key, raw value)` to the
//! pusher's chunk, and hand full chunks to the sorters (`run.rs`), taking
//! an empty chunk from a fixed pool (waiting if there is none: that is the
//! back-pressure that bounds memory). Any number of pushers may be alive:
//! the first `threads` keep their chunk between calls, the others park it
//! where a waiting pusher may take it (`shared.rs` says why). `finish` is
//! in `finish.rs`.

use crate::assemble::combine::{PushValue, raw_parts, raw_value};
use crate::assemble::deferred::finish_deferred;
use crate::assemble::finish::finish_core;
use crate::assemble::key::{Key, KeyLayout, KeyWidth, WideKey};
use crate::assemble::record::{Recorder, Recording};
use crate::assemble::run::spawn_sorters;
use crate::assemble::shared::{Core, Job, Parked, new_core};
use crate::assemble::sort::Record;
use crate::assemble::summary::Summary;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::options::{AssembleOptions, NonFinitePolicy};
use crossbeam_channel::Sender;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// How a pusher holds its chunk between calls (see `shared.rs`).
enum Role<K> {
    /// One of the first `threads` alive: keeps it.
    Resident,
    /// A guest: parks it (and `chunk_seq`) in its slot, where a pusher in
    /// need may take it.
    Guest(Arc<Parked<K>>),
}

/// Take the chunk parked in `p` (empty if a waiting pusher took it) and
/// the sequence number of the guest's next run.
fn unpark<K>(p: &Parked<K>, chunk: &mut Vec<Record<K>>, seq: &mut u64) {
    let mut s = p.lock();
    if chunk.capacity() == 0 {
        *chunk = std::mem::take(&mut s.chunk);
    }
    *seq = s.seq;
}

/// One pusher's state for one key type.
struct Local<K: Key> {
    core: Arc<Core<K>>,
    chunk: Vec<Record<K>>,
    origin_base: u64,
    chunk_seq: u64,
    /// Contributions pushed, skipped ones included (so that an error's
    /// contribution number is the caller's position).
    count: u64,
    /// Of those, skipped for a negative index.
    skipped: u64,
    /// Converted values of one element matrix (reused).
    elem_raws: Vec<u64>,
    role: Role<K>,
    /// The coordinates pushed, when the builder records its plan.
    rec: Option<Recorder>,
}

impl<K: Key> Local<K> {
    fn new(core: &Arc<Core<K>>) -> Local<K> {
        core.pushers_alive.fetch_add(1, Ordering::SeqCst);
        let id = core.next_pusher.fetch_add(1, Ordering::SeqCst);
        let origin_base = id << 32;
        let role = if core.claim_resident() {
            Role::Resident
        } else {
            let p = Arc::new(Parked::new(origin_base));
            core.lock_guests().push(Arc::clone(&p));
            Role::Guest(p)
        };
        Local {
            core: Arc::clone(core),
            chunk: Vec::new(),
            origin_base,
            chunk_seq: 0,
            count: 0,
            skipped: 0,
            elem_raws: Vec::new(),
            role,
            rec: core
                .recording
                .load(Ordering::SeqCst)
                .then(|| Recorder::new(core.shape().len())),
        }
    }

    /// Run one push call. A resident just runs it. A guest first becomes a
    /// resident if a place is free; else it takes its chunk out of its
    /// slot (if it is still there), and parks it again after the call,
    /// whatever the outcome.
    #[inline]
    fn call<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if let Role::Resident = self.role {
            return f(self);
        }
        self.guest_call(f)
    }

    fn guest_call<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        // No Arc clones here: they would cost two atomic operations more
        // per call; the slot is borrowed from `self.role` around `f`.
        if self.core.residents.load(Ordering::Relaxed) < self.core.plan.resident_pushers
            && self.core.claim_resident()
        {
            if let Role::Guest(p) = std::mem::replace(&mut self.role, Role::Resident) {
                // Out of the registry first: no one may take the chunk now.
                self.core.unregister(&p);
                unpark(&p, &mut self.chunk, &mut self.chunk_seq);
            }
            return f(self);
        }
        if let Role::Guest(p) = &self.role {
            unpark(p, &mut self.chunk, &mut self.chunk_seq);
        }
        let r = f(self);
        if let Role::Guest(p) = &self.role {
            let mut s = p.lock();
            s.chunk = std::mem::take(&mut self.chunk);
            s.seq = self.chunk_seq;
        }
        r
    }

    #[inline]
    fn check(&self, idx: &[u64], n: u64) -> Result<()> {
        check_coordinate(self.core.shape(), idx, n)
    }

    #[inline]
    fn raw<V: PushValue>(&self, v: V, n: u64) -> Result<u64> {
        raw_value(v, self.core.dtype, self.core.opts.non_finite, n)
    }

    #[inline]
    fn append(&mut self, key: K, raw: u64) -> Result<()> {
        if self.chunk.len() == self.chunk.capacity() {
            self.hand_off()?;
        }
        self.chunk.push(Record { key, val: raw });
        self.count += 1;
        if self.rec.is_some() {
            self.record_key(&key)?;
        }
        Ok(())
    }

    /// Record the coordinate of the key just appended.
    fn record_key(&mut self, key: &K) -> Result<()> {
        let mut idx = [0u64; crate::hurray::MAX_RANK + 1];
        let n = self.core.layout.rank();
        self.core.layout.unpack(key, &mut idx[..n]);
        self.record(Some(&idx[..n]))
    }

    /// Record a contribution's coordinate, or (`None`) that it was
    /// skipped; write the recording's buffer when it is full.
    fn record(&mut self, idx: Option<&[u64]>) -> Result<()> {
        let Some(r) = self.rec.as_mut() else {
            return Ok(());
        };
        match idx {
            Some(idx) => r.coordinate(idx),
            None => r.skipped(),
        }
        if r.is_full() {
            let dir = self.core.spill_dir()?;
            if let Some(r) = self.rec.as_mut() {
                r.write(&self.core.opts.io, &dir)?;
            }
        }
        Ok(())
    }

    #[inline]
    fn push<V: PushValue>(&mut self, idx: &[u64], v: V) -> Result<()> {
        if self.core.complex.is_some() {
            return self.push_complex(idx, v);
        }
        let n = self.count;
        self.check(idx, n)?;
        let raw = self.raw(v, n)?;
        let key = self.core.layout.pack::<K>(idx);
        self.append(key, raw)
    }

    /// A contribution with signed indices: pushed as [`Local::push`]
    /// when none is negative; else skipped and counted under
    /// `skip_negative`, refused otherwise.
    fn push_signed<V: PushValue>(&mut self, idx: &[i64], v: V) -> Result<()> {
        let shape = self.core.shape();
        if idx.len() != shape.len() {
            return Err(Error::WrongRank {
                contribution: self.count,
                expected: shape.len(),
                got: idx.len(),
            });
        }
        let mut buf = [0u64; crate::hurray::MAX_RANK];
        for (d, (&x, slot)) in idx.iter().zip(buf.iter_mut()).enumerate() {
            match u64::try_from(x) {
                Ok(u) => *slot = u,
                Err(_) => return self.negative(d, x),
            }
        }
        self.push(&buf[..idx.len()], v)
    }

    /// A contribution whose index `x` in dimension `d` is negative:
    /// skipped and counted under `skip_negative`, else the error every
    /// front end gives for a negative index.
    #[cold]
    fn negative(&mut self, d: usize, x: i64) -> Result<()> {
        if !self.core.opts.skip_negative {
            let extent = self.core.shape()[d];
            return Err(Error::bad_index(self.count, d, i128::from(x), extent));
        }
        self.count += 1;
        self.skipped += 1;
        self.record(None)
    }

    /// A contribution to a complex tensor: its two parts, at the last
    /// index 0 and 1, appended together (one contribution counted).
    fn push_complex<V: PushValue>(&mut self, idx: &[u64], v: V) -> Result<()> {
        let n = self.count;
        self.check(idx, n)?;
        let (re, im) = raw_parts(v, self.core.dtype, self.core.opts.non_finite, n)?;
        self.append_parts(idx, re, im)
    }

    /// Append a checked coordinate's two parts (the chunk takes both or,
    /// after a hand-off, neither yet).
    fn append_parts(&mut self, idx: &[u64], re: u64, im: u64) -> Result<()> {
        if self.chunk.len() + 2 > self.chunk.capacity() {
            self.hand_off()?;
        }
        let mut full = [0u64; crate::hurray::MAX_RANK];
        let r = idx.len();
        full[..r].copy_from_slice(idx);
        let re_key = self.core.layout.pack::<K>(&full[..=r]);
        full[r] = 1;
        let im_key = self.core.layout.pack::<K>(&full[..=r]);
        self.chunk.push(Record {
            key: re_key,
            val: re,
        });
        self.chunk.push(Record {
            key: im_key,
            val: im,
        });
        self.count += 1;
        self.record(Some(idx))
    }

    /// The error that poisoned the assembler, if any.
    fn check_poisoned(&self) -> Result<()> {
        if self.core.dropped.load(Ordering::Relaxed) {
            return Err(Error::Finished);
        }
        if self.core.poisoned.load(Ordering::Relaxed) {
            // The first pusher to notice gets the cause itself; the
            // assembler stays poisoned, so finish() fails too.
            return Err(self.core.lock().error.take().unwrap_or(Error::Poisoned(
                "assembler (an earlier push returned the cause)",
            )));
        }
        Ok(())
    }

    /// Make a run of the full chunk (on a sorter thread, or with
    /// `threads = 1` here) and take an empty one.
    fn hand_off(&mut self) -> Result<()> {
        let core = Arc::clone(&self.core);
        self.check_poisoned()?;
        self.hand_over();
        if core.solo.is_some() {
            self.check_poisoned()?;
        }
        let mut c = core.free_chunk()?;
        loop {
            if c.capacity() > 0 && c.len() == c.capacity() {
                // A guest's chunk taken as it was, full: a run of its own.
                core.dispatch(c, self.next_origin());
            } else if c.capacity() == 0 && core.take_surplus() {
                // The place of a chunk kept for the kernel and now being
                // sorted: wait for that chunk rather than allocate another
                // beside it (which would go over the budget).
            } else {
                break;
            }
            c = core.free_chunk()?;
        }
        let want = core.plan.chunk_records;
        if c.capacity() < want {
            let had = c.capacity();
            let bytes = want as u64 * core.plan.record_bytes;
            if c.try_reserve_exact(want - c.len()).is_err() {
                // Back in the pool: the budget's books stay right.
                let _ = core.free_tx.send(c);
                return Err(Error::OutOfMemory {
                    what: "an ingest chunk",
                    bytes,
                });
            }
            core.budget
                .add((c.capacity() - had) as u64 * core.plan.record_bytes);
        }
        self.chunk = c;
        Ok(())
    }

    /// The origin of the next chunk handed over (orders runs for `last`).
    fn next_origin(&mut self) -> u64 {
        let origin = self.origin_base | self.chunk_seq;
        self.chunk_seq += 1;
        origin
    }

    /// Make a run of the chunk, if it holds anything (see
    /// [`Core::dispatch`]); the pusher holds no chunk after.
    fn hand_over(&mut self) {
        if self.chunk.is_empty() {
            return;
        }
        let chunk = std::mem::take(&mut self.chunk);
        let origin = self.next_origin();
        self.core.dispatch(chunk, origin);
    }
}

impl<K: Key> Drop for Local<K> {
    fn drop(&mut self) {
        match &self.role {
            Role::Resident => {
                self.core.residents.fetch_sub(1, Ordering::SeqCst);
            }
            Role::Guest(p) => {
                self.core.unregister(p);
                unpark(p, &mut self.chunk, &mut self.chunk_seq);
            }
        }
        // Hand the partial chunk over (a channel send, no I/O): nothing
        // pushed is lost when a pusher goes out of scope. With threads = 1
        // there is no sorter to take it: it is sorted here (an error
        // poisons the core, and finish reports it).
        if self.chunk.is_empty() && self.chunk.capacity() > 0 {
            let c = std::mem::take(&mut self.chunk);
            let _ = self.core.free_tx.send(c);
        } else {
            self.hand_over();
        }
        if let Some(r) = self.rec.take() {
            let pusher = self.origin_base >> 32;
            let io = &self.core.opts.io;
            match r.finish(io, || self.core.spill_dir(), pusher) {
                Ok(Some(seg)) => self.core.lock().recorded.push(seg),
                Ok(None) => {}
                Err(e) => self.core.fail(e),
            }
        }
        self.core
            .contributions
            .fetch_add(self.count, Ordering::Relaxed);
        self.core
            .skipped_negative
            .fetch_add(self.skipped, Ordering::Relaxed);
        self.core.pushers_alive.fetch_sub(1, Ordering::SeqCst);
    }
}

enum AnyCore {
    U64(Arc<Core<u64>>),
    U128(Arc<Core<u128>>),
    W256(Arc<Core<WideKey<4>>>),
    W4096(Arc<Core<WideKey<64>>>),
}

enum AnyLocal {
    U64(Local<u64>),
    U128(Local<u128>),
    W256(Local<WideKey<4>>),
    W4096(Local<WideKey<64>>),
}

macro_rules! each {
    ($enum:ident, $x:expr, $v:ident => $body:expr) => {
        match $x {
            $enum::U64($v) => $body,
            $enum::U128($v) => $body,
            $enum::W256($v) => $body,
            $enum::W4096($v) => $body,
        }
    };
}

impl AnyCore {
    fn local(&self) -> AnyLocal {
        match self {
            AnyCore::U64(c) => AnyLocal::U64(Local::new(c)),
            AnyCore::U128(c) => AnyLocal::U128(Local::new(c)),
            AnyCore::W256(c) => AnyLocal::W256(Local::new(c)),
            AnyCore::W4096(c) => AnyLocal::W4096(Local::new(c)),
        }
    }
}

/// Assembles one COO tensor from contributions pushed in any order, from
/// any number of threads, under a fixed memory budget.
///
/// ```
/// use coo_assembler::{AssembleOptions, Builder, DType, HurrayFile, Value};
/// let dir = tempfile::tempdir()?;
/// let out = dir.path().join("k.hrry");
/// let mut b = Builder::new(&[3, 3], DType::F64, AssembleOptions::default())?;
/// b.push(&[0, 1], 1.5)?;
/// b.push(&[2, 2], 1.0)?;
/// b.push(&[0, 1], 0.25)?; // duplicates are summed
/// let summary = b.finish(&out)?;
/// assert_eq!(summary.nnz, 2);
/// let file = HurrayFile::open(&out)?;
/// assert_eq!(file.only_tensor()?.get(&[0, 1])?, Value::Float(1.75));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Builder {
    core: AnyCore,
    own: Option<AnyLocal>,
    /// The inputs pushed through [`crate::input::Source`]: they tell an
    /// error found while merging in the inputs' own terms.
    sources: Vec<Box<dyn Locator>>,
    started: Instant,
    /// Set when `finish` starts merging: pushes are refused from then on.
    finished: bool,
    /// The coordinates pushed, joined by `finish`, when the builder
    /// records its plan ([`Builder::record_plan`]).
    recording: Option<Recording>,
    /// Dropped with the builder, which wakes pushers that outlive it.
    _closed: Sender<()>,
}

impl Builder {
    /// The keys a builder of `shape` and `dtype` sorts by.
    fn key_layout(shape: &[u64], dtype: DType, opts: &AssembleOptions) -> KeyLayout {
        // A complex value travels as two contributions, one per part, at
        // a last index 0 (real) or 1 (imaginary): the runs, spills and
        // exact sums of real values carry it, and the writer pairs them.
        let mut keyed = shape.to_vec();
        if dtype.is_complex() {
            keyed.push(2);
        }
        // Keys in the layout's storage order (CSC: by column; CSF: its
        // mode order), so runs and the merge come out in it; a complex
        // value's part stays the least significant field.
        let mut order = opts.storage_order(shape.len());
        if dtype.is_complex() {
            order.push(shape.len());
        }
        KeyLayout::with_order(&keyed, &order)
    }

    /// The smallest memory budget a builder of `shape` and `dtype` takes
    /// with `opts`: one minimum for every input, checked by the in-memory
    /// kernel's paths too (they would need less).
    pub(crate) fn minimum_budget(shape: &[u64], dtype: DType, opts: &AssembleOptions) -> u64 {
        use std::mem::size_of;
        let record = match Self::key_layout(shape, dtype, opts).width() {
            KeyWidth::U64 => size_of::<Record<u64>>(),
            KeyWidth::U128 => size_of::<Record<u128>>(),
            KeyWidth::W256 => size_of::<Record<WideKey<4>>>(),
            KeyWidth::W4096 => size_of::<Record<WideKey<64>>>(),
        };
        crate::assemble::plan::Plan::minimum(opts, record as u64)
    }

    /// A builder for a tensor of `shape` (rank 1 to 64) and element type
    /// `dtype`. Checks the options and the budget; starts the sorter threads.
    pub fn new(shape: &[u64], dtype: DType, opts: AssembleOptions) -> Result<Builder> {
        opts.validate()?;
        crate::assemble::check_shape(&opts, shape)?;
        crate::assemble::check_value_type(dtype, opts.duplicates, shape)?;
        let layout = Self::key_layout(shape, dtype, &opts);
        let (closed_tx, closed) = crossbeam_channel::bounded(0);
        let core = match layout.width() {
            KeyWidth::U64 => AnyCore::U64(new_core(layout, dtype, opts, closed)?),
            KeyWidth::U128 => AnyCore::U128(new_core(layout, dtype, opts, closed)?),
            KeyWidth::W256 => AnyCore::W256(new_core(layout, dtype, opts, closed)?),
            KeyWidth::W4096 => AnyCore::W4096(new_core(layout, dtype, opts, closed)?),
        };
        each!(AnyCore, &core, c => spawn_sorters(c))?;
        // The pushes are the step, unless the caller shows one (reading).
        each!(AnyCore, &core, c => {
            let p = &c.opts.progress;
            if p.now().step == crate::progress::Step::Idle {
                let records = c.opts.expected_contributions.unwrap_or(0)
                    * if dtype.is_complex() { 2 } else { 1 };
                p.start(crate::progress::Step::Push, records * c.plan.record_bytes);
            }
        });
        Ok(Builder {
            core,
            own: None,
            sources: Vec::new(),
            started: Instant::now(),
            finished: false,
            recording: None,
            _closed: closed_tx,
        })
    }

    /// A pusher for one thread; it owns what it needs, so it can move to
    /// any thread. Any number may be alive at once: they share the budget.
    /// The first `options.threads` alive keep a chunk of their own; the
    /// others borrow chunks and may have theirs sorted early while they
    /// are not pushing, so that every pusher can always go on (two locks
    /// more per push call, shorter runs when many push at once). All must
    /// be dropped before [`Builder::finish`], which refuses to start while
    /// one is alive.
    pub fn pusher(&self) -> Result<Pusher> {
        if self.finished {
            return Err(Error::Finished);
        }
        Ok(Pusher {
            local: self.core.local(),
        })
    }

    /// Record where every contribution lands, so that the same pushes can
    /// later be refilled with new values alone: after [`Builder::finish`],
    /// `Plan::recorded(&builder)` makes the plan in memory and
    /// `PlanFile::create_recorded(&builder, path)` writes it out of core.
    /// The plan takes one value per contribution, in the order of the
    /// pushers' creation, then of their pushes (the order `last` follows;
    /// the builder's own pusher is made at its first push), skipped ones
    /// (`skip_negative`) included.
    ///
    /// Each pusher writes the coordinates it takes to a temporary file in
    /// the builder's spill folder (`rank` x 8 bytes per contribution,
    /// through a 64 KiB buffer). Call it before the first push or pusher;
    /// refused with the options a plan cannot serve (`drop_zeros`).
    pub fn record_plan(&mut self) -> Result<()> {
        if self.finished {
            return Err(Error::Finished);
        }
        let (shape, dtype) = (self.shape().to_vec(), self.dtype());
        each!(AnyCore, &self.core, c => {
            crate::assemble::check_plannable(dtype, &c.opts, &shape)?;
            if c.next_pusher.load(Ordering::SeqCst) > 0 {
                return Err(Error::InvalidArgument(
                    "record_plan: call it before the first push or pusher".into(),
                ));
            }
            c.recording.store(true, Ordering::SeqCst);
        });
        Ok(())
    }

    /// The recording `finish` joined: what a recorded plan is made of.
    pub(crate) fn recording(&self) -> Result<Option<&Recording>> {
        if !each!(AnyCore, &self.core, c => c.recording.load(Ordering::SeqCst)) {
            return Err(Error::InvalidArgument(
                "this builder did not record its plan: call record_plan before pushing".into(),
            ));
        }
        if !self.finished {
            return Err(Error::InvalidArgument(
                "a recorded plan is made after finish".into(),
            ));
        }
        Ok(self.recording.as_ref())
    }

    /// The options the builder assembles with (a recorded plan takes them).
    pub(crate) fn options(&self) -> &AssembleOptions {
        each!(AnyCore, &self.core, c => &c.opts)
    }

    /// The tensor's shape.
    pub fn shape(&self) -> &[u64] {
        each!(AnyCore, &self.core, c => c.shape())
    }

    /// The tensor's element type.
    pub fn dtype(&self) -> DType {
        each!(AnyCore, &self.core, c => c.out_dtype())
    }

    /// Remember an input pushed into this builder, to tell a merge-time
    /// error in its terms.
    pub(crate) fn remember(&mut self, source: Box<dyn Locator>) {
        self.sources.push(source);
    }

    /// True once [`Builder::finish`] has started merging: the builder can
    /// take no more contributions. A refused `finish` leaves it false.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// A handle that stops this builder's [`Builder::finish`] from another
    /// thread (a signal watcher, a user interface): `finish` then returns
    /// [`Error::Stopped`] at its next step (a few MiB of merged entries at
    /// most), publishes nothing and removes its temporary files. Set
    /// before `finish`, it stops `finish` before any merging.
    pub fn stopper(&self) -> Stopper {
        Stopper(each!(AnyCore, &self.core, c => c.stop.clone()))
    }

    /// Pushers of this builder alive now (the builder's own included).
    fn pushers_alive(&self) -> usize {
        each!(AnyCore, &self.core, c => c.pushers_alive.load(Ordering::SeqCst))
    }

    /// `options.threads`: how many threads the readers in [`crate::input`]
    /// parse text on (1: on the calling thread).
    pub(crate) fn threads(&self) -> usize {
        each!(AnyCore, &self.core, c => c.opts.threads)
    }

    fn own(&mut self) -> Result<&mut AnyLocal> {
        if self.own.is_none() {
            if self.finished {
                return Err(Error::Finished);
            }
            self.own = Some(self.core.local());
        }
        // A match, not ok_or: no error value is built and dropped per push.
        match self.own.as_mut() {
            Some(l) => Ok(l),
            None => Err(Error::Poisoned("builder")),
        }
    }

    /// Push one contribution from this thread (through a pusher the builder
    /// keeps, made on first use; it counts as one of the pushers alive).
    #[inline]
    pub fn push<V: PushValue>(&mut self, idx: &[u64], value: V) -> Result<()> {
        each!(AnyLocal, self.own()?, l => l.call(|l| l.push(idx, value)))
    }

    /// Push many contributions: `indices` holds `values.len() * rank`
    /// components, entry i at `indices[i*rank..(i+1)*rank]`.
    pub fn push_many<V: PushValue>(&mut self, indices: &[u64], values: &[V]) -> Result<()> {
        each!(AnyLocal, self.own()?, l => l.call(|l| push_many(l, indices, values)))
    }

    /// Push rank-2 contributions given as `(values, (rows, cols))`, the
    /// arrays scipy's `coo_array` takes.
    pub fn push_coo<V: PushValue>(
        &mut self,
        rows: &[u64],
        cols: &[u64],
        values: &[V],
    ) -> Result<()> {
        each!(AnyLocal, self.own()?, l => l.call(|l| push_coo(l, rows, cols, values)))
    }

    /// Push a dense element matrix (rank 2): `local[a * n + b]` goes to
    /// `(dofs[a], dofs[b])`, with `n = dofs.len()`.
    pub fn push_element<V: PushValue>(&mut self, dofs: &[u64], local: &[V]) -> Result<()> {
        each!(AnyLocal, self.own()?, l => l.call(|l| push_element(l, dofs, local)))
    }

    /// [`Builder::push`] with signed indices, the convention of PETSc and
    /// of FE codes that mark removed dofs with -1. A contribution with a
    /// negative index is skipped and counted
    /// ([`Summary::skipped_negative`]) when
    /// [`AssembleOptions::skip_negative`] is set, and refused otherwise
    /// (`InvalidArgument`, naming the contribution and dimension).
    #[inline]
    pub fn push_signed<V: PushValue>(&mut self, idx: &[i64], value: V) -> Result<()> {
        each!(AnyLocal, self.own()?, l => l.call(|l| l.push_signed(idx, value)))
    }

    /// [`Builder::push_many`] with signed indices (see
    /// [`Builder::push_signed`]).
    pub fn push_many_signed<V: PushValue>(&mut self, indices: &[i64], values: &[V]) -> Result<()> {
        each!(AnyLocal, self.own()?, l => l.call(|l| push_many_signed(l, indices, values)))
    }

    /// [`Builder::push_coo`] with signed indices (see
    /// [`Builder::push_signed`]).
    pub fn push_coo_signed<V: PushValue>(
        &mut self,
        rows: &[i64],
        cols: &[i64],
        values: &[V],
    ) -> Result<()> {
        each!(AnyLocal, self.own()?, l => l.call(|l| push_coo_signed(l, rows, cols, values)))
    }

    /// [`Builder::push_element`] with signed dofs: under
    /// [`AssembleOptions::skip_negative`], the entries whose row or column
    /// dof is negative are skipped (and counted), the rest pushed in the
    /// element's order; without it, a negative dof refuses the whole
    /// element.
    pub fn push_element_signed<V: PushValue>(&mut self, dofs: &[i64], local: &[V]) -> Result<()> {
        each!(AnyLocal, self.own()?, l => l.call(|l| push_element_signed(l, dofs, local)))
    }

    /// Merge everything and write the tensor to `path` (atomically: a
    /// temporary file in the same directory, fsync, rename).
    ///
    /// A refusal the caller can fix leaves the builder as it was, every
    /// contribution kept: pushers still alive ([`Error::PushersAlive`]),
    /// an output that could not be published (a missing or read-only
    /// folder, an existing directory, a path ending in `/`, one of the
    /// files pushed).
    /// Once merging starts the builder is spent, whatever the outcome
    /// (later calls give [`Error::Finished`]), and its spill files are
    /// removed.
    pub fn finish(&mut self, path: impl AsRef<Path>) -> Result<Summary> {
        // Generic only here: the merge below is compiled once, in this
        // crate, not again in every crate that calls `finish`.
        self.finish_at(path.as_ref())
    }

    fn finish_at(&mut self, path: &Path) -> Result<Summary> {
        if self.finished {
            return Err(Error::Finished);
        }
        drop(self.own.take());
        let alive = self.pushers_alive();
        if alive > 0 {
            return Err(Error::PushersAlive { alive });
        }
        let inputs: Vec<_> = self.sources.iter().filter_map(|s| s.file_id()).collect();
        let io = each!(AnyCore, &self.core, c => c.opts.io.clone());
        // Refusals the caller can fix come before the merge, which spends
        // the builder: a missing or read-only folder, a directory or an
        // input as output (the whole rule is the atomic output's).
        crate::fs::output::check_target(&io, path, &inputs)?;
        let layout = each!(AnyCore, &self.core, c => c.opts.layout);
        let shape = self.shape().to_vec();
        crate::write::check_room_for(&io, path, &shape, layout)?;
        self.finished = true;
        let ingest = self.started.elapsed();
        self.recording = self.join_recording()?;
        let r = match &self.core {
            // Every chunk kept (the work fits): the in-memory kernel.
            AnyCore::U64(c) => match finish_deferred(c, path, ingest) {
                Ok(Some(s)) => Ok(s),
                Ok(None) => finish_core(c, path, ingest),
                Err(e) => Err(e),
            },
            other => each!(AnyCore, other, c => finish_core(c, path, ingest)),
        };
        each!(AnyCore, &self.core, c => c.opts.progress.idle());
        if r.is_err() {
            // No plan of an assembly that did not end.
            self.recording = None;
        }
        // A duplicate or an overflow found while merging names a 0-based
        // coordinate: say it in the terms of the inputs it came from.
        r.map_err(|e| self.sources.iter().find_map(|s| s.locate(&e)).unwrap_or(e))
    }
}

impl Builder {
    /// The pushers' recordings joined in creation order, when recording.
    fn join_recording(&self) -> Result<Option<Recording>> {
        each!(AnyCore, &self.core, c => {
            if !c.recording.load(Ordering::SeqCst) {
                return Ok(None);
            }
            let segments = std::mem::take(&mut c.lock().recorded);
            if segments.is_empty() {
                return Ok(None);
            }
            let dir = c.spill_dir()?;
            crate::assemble::record::join(&c.opts.io, segments, c.shape().len(), &dir)
        })
    }
}

/// Stops a [`Builder::finish`] from another thread: see
/// [`Builder::stopper`]. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Stopper(Arc<AtomicBool>);

impl Stopper {
    /// Ask the builder's `finish` to stop (idempotent).
    pub fn stop(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// `push_many`'s arguments agree: `rank` index components per value.
fn check_many(components: usize, values: usize, rank: usize) -> Result<()> {
    if components != values * rank {
        return Err(Error::InvalidArgument(format!(
            "push_many: {components} index components for {values} values of a rank-{rank} \
             tensor (need {})",
            values * rank
        )));
    }
    Ok(())
}

/// `push_coo`'s three arrays have one length.
fn check_coo(rows: usize, cols: usize, values: usize) -> Result<()> {
    if rows != values || cols != values {
        return Err(Error::InvalidArgument(format!(
            "push_coo: rows ({rows}), cols ({cols}) and values ({values}) differ in length"
        )));
    }
    Ok(())
}

/// An element matrix of `n` dofs goes into a matrix and has `n * n` values.
fn check_element<K: Key>(l: &Local<K>, n: usize, values: usize) -> Result<()> {
    let rank = l.core.shape().len();
    if rank != 2 {
        return Err(Error::WrongRank {
            contribution: l.count,
            expected: rank,
            got: 2,
        });
    }
    if values != n * n {
        return Err(Error::InvalidArgument(format!(
            "push_element: {n} dofs need a {n}x{n} matrix ({} values), got {values}",
            n * n
        )));
    }
    Ok(())
}

fn push_many<K: Key, V: PushValue>(l: &mut Local<K>, indices: &[u64], values: &[V]) -> Result<()> {
    let rank = l.core.shape().len();
    check_many(indices.len(), values.len(), rank)?;
    for (idx, &v) in indices.chunks_exact(rank).zip(values) {
        l.push(idx, v)?;
    }
    Ok(())
}

fn push_many_signed<K: Key, V: PushValue>(
    l: &mut Local<K>,
    indices: &[i64],
    values: &[V],
) -> Result<()> {
    let rank = l.core.shape().len();
    check_many(indices.len(), values.len(), rank)?;
    for (idx, &v) in indices.chunks_exact(rank.max(1)).zip(values) {
        l.push_signed(idx, v)?;
    }
    Ok(())
}

fn push_coo_signed<K: Key, V: PushValue>(
    l: &mut Local<K>,
    rows: &[i64],
    cols: &[i64],
    values: &[V],
) -> Result<()> {
    check_coo(rows.len(), cols.len(), values.len())?;
    for ((&r, &c), &v) in rows.iter().zip(cols).zip(values) {
        l.push_signed(&[r, c], v)?;
    }
    Ok(())
}

/// [`push_element`] with signed dofs. Without a negative dof it is that
/// call. Under `skip_negative` the element restricted to its other dofs
/// is pushed (their entries in the same order, so `last` sees the same
/// sequence), and the entries of a negative row or column are skipped and
/// counted; without the option, a negative dof is refused before
/// anything is pushed.
fn push_element_signed<K: Key, V: PushValue>(
    l: &mut Local<K>,
    dofs: &[i64],
    local: &[V],
) -> Result<()> {
    let n = dofs.len();
    check_element(l, n, local.len())?;
    let Some(first) = dofs.iter().position(|&d| d < 0) else {
        let kept: Vec<u64> = dofs.iter().map(|&d| d.unsigned_abs()).collect();
        return push_element(l, &kept, local);
    };
    if !l.core.opts.skip_negative {
        let extent = l.core.shape()[0];
        return Err(Error::bad_index(
            l.count + (first * n) as u64,
            0,
            i128::from(dofs[first]),
            extent,
        ));
    }
    let keep: Vec<usize> = (0..n).filter(|&a| dofs[a] >= 0).collect();
    let kept: Vec<u64> = keep.iter().map(|&a| dofs[a].unsigned_abs()).collect();
    let sub: Vec<V> = keep
        .iter()
        .flat_map(|&a| keep.iter().map(move |&b| local[a * n + b]))
        .collect();
    // The kept entries go in as one element; the recording (if any)
    // takes the whole element in its order, the skipped entries in their
    // places.
    let rec = l.rec.take();
    let pushed = push_element(l, &kept, &sub);
    l.rec = rec;
    pushed?;
    if l.rec.is_some() {
        for &r in dofs {
            for &c in dofs {
                match (u64::try_from(r), u64::try_from(c)) {
                    (Ok(r), Ok(c)) => l.record(Some(&[r, c]))?,
                    _ => l.record(None)?,
                }
            }
        }
    }
    let skipped = (n * n - sub.len()) as u64;
    l.count += skipped;
    l.skipped += skipped;
    Ok(())
}

fn push_coo<K: Key, V: PushValue>(
    l: &mut Local<K>,
    rows: &[u64],
    cols: &[u64],
    values: &[V],
) -> Result<()> {
    if l.core.shape().len() != 2 {
        return Err(Error::WrongRank {
            contribution: l.count,
            expected: l.core.shape().len(),
            got: 2,
        });
    }
    check_coo(rows.len(), cols.len(), values.len())?;
    for ((&r, &c), &v) in rows.iter().zip(cols).zip(values) {
        l.push(&[r, c], v)?;
    }
    Ok(())
}

fn push_element<K: Key, V: PushValue>(l: &mut Local<K>, dofs: &[u64], local: &[V]) -> Result<()> {
    let n = dofs.len();
    check_element(l, n, local.len())?;
    // Validate everything first so that an error leaves nothing half pushed.
    let shape = l.core.shape();
    let extent = shape[0].min(shape[1]);
    for (a, &d) in dofs.iter().enumerate() {
        if d >= extent {
            let dim = usize::from(d < shape[0]);
            return Err(Error::IndexOutOfRange {
                contribution: l.count + (a * n) as u64,
                dim,
                index: d,
                extent: shape[dim],
            });
        }
    }
    if l.core.complex.is_some() {
        return push_complex_element(l, dofs, local);
    }
    // Convert every value before appending any: a refused value leaves
    // nothing of the element pushed.
    let mut raws = std::mem::take(&mut l.elem_raws);
    raws.clear();
    let n0 = l.count;
    for (i, &v) in local.iter().enumerate() {
        match l.raw(v, n0 + i as u64) {
            Ok(r) => raws.push(r),
            Err(e) => {
                l.elem_raws = raws;
                return Err(e);
            }
        }
    }
    let mut result = Ok(());
    'rows: for (&r, row) in dofs.iter().zip(raws.chunks_exact(n.max(1))) {
        for (&c, &raw) in dofs.iter().zip(row) {
            let key = l.core.layout.pack::<K>(&[r, c]);
            if let Err(e) = l.append(key, raw) {
                result = Err(e);
                break 'rows;
            }
        }
    }
    l.elem_raws = raws;
    result
}

/// [`push_element`] into a complex tensor, its dofs checked: every value
/// converted first (nothing of the element pushed if one is refused),
/// then each coordinate's two parts.
fn push_complex_element<K: Key, V: PushValue>(
    l: &mut Local<K>,
    dofs: &[u64],
    local: &[V],
) -> Result<()> {
    let n = dofs.len();
    let mut raws = std::mem::take(&mut l.elem_raws);
    raws.clear();
    let n0 = l.count;
    for (i, &v) in local.iter().enumerate() {
        match raw_parts(v, l.core.dtype, l.core.opts.non_finite, n0 + i as u64) {
            Ok((re, im)) => raws.extend([re, im]),
            Err(e) => {
                l.elem_raws = raws;
                return Err(e);
            }
        }
    }
    let mut result = Ok(());
    'rows: for (&r, row) in dofs.iter().zip(raws.chunks_exact((2 * n).max(1))) {
        for (&c, parts) in dofs.iter().zip(row.chunks_exact(2)) {
            if let Err(e) = l.append_parts(&[r, c], parts[0], parts[1]) {
                result = Err(e);
                break 'rows;
            }
        }
    }
    l.elem_raws = raws;
    result
}

/// What a parsing thread needs to check and pack entries into the records
/// [`Builder::append_packed`] appends, so that the thread that owns the
/// builder only copies them: the checks of [`Builder::push`], with its key
/// layout, for builders whose keys are `u64` (see [`Builder::packer`]).
#[derive(Clone)]
pub(crate) struct Packer {
    layout: KeyLayout,
    dtype: DType,
    policy: NonFinitePolicy,
}

impl Packer {
    /// The record [`Builder::push`] would append for `(idx, v)`, or `None`
    /// if it would refuse the entry: then the entries go through
    /// [`Builder::push_many`], which names the error and the contribution.
    #[inline(always)]
    pub(crate) fn pack<V: PushValue>(&self, idx: &[u64], v: V) -> Option<Record<u64>> {
        check_coordinate(self.layout.shape(), idx, 0).ok()?;
        let val = raw_value(v, self.dtype, self.policy, 0).ok()?;
        Some(Record {
            key: self.layout.pack::<u64>(idx),
            val,
        })
    }

    /// The packing of `(row, column, f64 value)` when this builder takes
    /// exactly that (rank 2, f64, every value kept): then `pack` comes down
    /// to two comparisons, two shifts and an or per record.
    pub(crate) fn matrix_f64(&self) -> Option<MatrixF64Packer> {
        let (&[e0, e1], &[s0, s1]) = (self.layout.shape(), self.layout.shifts()) else {
            return None;
        };
        (self.dtype == DType::F64 && self.policy == NonFinitePolicy::Keep).then_some(
            MatrixF64Packer {
                extents: [e0, e1],
                shifts: [s0, s1],
            },
        )
    }
}

/// [`Packer::pack`] for rank-2 f64 entries with every value kept, with
/// the same result (an f64 is stored as its bits).
#[derive(Clone, Copy)]
pub(crate) struct MatrixF64Packer {
    extents: [u64; 2],
    shifts: [u32; 2],
}

impl MatrixF64Packer {
    /// The record for row `r`, column `c` and the f64 whose bits are
    /// `bits`, or `None` when an index is out of range.
    #[inline(always)]
    pub(crate) fn pack(&self, r: u64, c: u64, bits: u64) -> Option<Record<u64>> {
        (r < self.extents[0] && c < self.extents[1]).then_some(Record {
            key: (r << self.shifts[0]) | (c << self.shifts[1]),
            val: bits,
        })
    }
}

impl Builder {
    /// A [`Packer`] for this builder, when its keys are `u64` (the common
    /// case: the index bits fit 64); `None` otherwise.
    pub(crate) fn packer(&self) -> Option<Packer> {
        match &self.core {
            // A complex contribution is two records: pushed one by one.
            AnyCore::U64(c) if c.complex.is_some() => None,
            AnyCore::U64(c) => Some(Packer {
                layout: c.layout.clone(),
                dtype: c.dtype,
                policy: c.opts.non_finite,
            }),
            _ => None,
        }
    }

    /// Append records made by this builder's [`Packer`], in order, as
    /// pushes of the same entries from this thread would.
    pub(crate) fn append_packed(&mut self, recs: &[Record<u64>]) -> Result<()> {
        match self.own()? {
            AnyLocal::U64(l) => l.call(|l| append_packed(l, recs)),
            _ => Err(Error::InvalidArgument(
                "append_packed: the builder's keys are not u64".into(),
            )),
        }
    }
}

/// Copy `recs` into the chunk, handing full chunks over as `append` does.
fn append_packed(l: &mut Local<u64>, mut recs: &[Record<u64>]) -> Result<()> {
    while !recs.is_empty() {
        if l.chunk.len() == l.chunk.capacity() {
            l.hand_off()?;
        }
        let room = (l.chunk.capacity() - l.chunk.len()).min(recs.len());
        let (now, later) = recs.split_at(room);
        l.chunk.extend_from_slice(now);
        l.count += room as u64;
        if l.rec.is_some() {
            for r in now {
                l.record_key(&r.key)?;
            }
        }
        recs = later;
    }
    Ok(())
}

/// A handle for pushing from one thread; `Send`, owned (it can be stored
/// anywhere). Dropping it hands its buffered contributions to the builder.
/// A pusher that outlives its builder gets [`Error::Finished`] at its next
/// hand-off.
pub struct Pusher {
    local: AnyLocal,
}

impl Pusher {
    /// Push one contribution.
    #[inline]
    pub fn push<V: PushValue>(&mut self, idx: &[u64], value: V) -> Result<()> {
        each!(AnyLocal, &mut self.local, l => l.call(|l| l.push(idx, value)))
    }

    /// See [`Builder::push_many`].
    pub fn push_many<V: PushValue>(&mut self, indices: &[u64], values: &[V]) -> Result<()> {
        each!(AnyLocal, &mut self.local, l => l.call(|l| push_many(l, indices, values)))
    }

    /// See [`Builder::push_coo`].
    pub fn push_coo<V: PushValue>(
        &mut self,
        rows: &[u64],
        cols: &[u64],
        values: &[V],
    ) -> Result<()> {
        each!(AnyLocal, &mut self.local, l => l.call(|l| push_coo(l, rows, cols, values)))
    }

    /// See [`Builder::push_element`].
    pub fn push_element<V: PushValue>(&mut self, dofs: &[u64], local: &[V]) -> Result<()> {
        each!(AnyLocal, &mut self.local, l => l.call(|l| push_element(l, dofs, local)))
    }

    /// See [`Builder::push_signed`].
    #[inline]
    pub fn push_signed<V: PushValue>(&mut self, idx: &[i64], value: V) -> Result<()> {
        each!(AnyLocal, &mut self.local, l => l.call(|l| l.push_signed(idx, value)))
    }

    /// See [`Builder::push_many_signed`].
    pub fn push_many_signed<V: PushValue>(&mut self, indices: &[i64], values: &[V]) -> Result<()> {
        each!(AnyLocal, &mut self.local, l => l.call(|l| push_many_signed(l, indices, values)))
    }

    /// See [`Builder::push_coo_signed`].
    pub fn push_coo_signed<V: PushValue>(
        &mut self,
        rows: &[i64],
        cols: &[i64],
        values: &[V],
    ) -> Result<()> {
        each!(AnyLocal, &mut self.local, l => l.call(|l| push_coo_signed(l, rows, cols, values)))
    }

    /// See [`Builder::push_element_signed`].
    pub fn push_element_signed<V: PushValue>(&mut self, dofs: &[i64], local: &[V]) -> Result<()> {
        each!(AnyLocal, &mut self.local, l => l.call(|l| push_element_signed(l, dofs, local)))
    }

    /// Contributions pushed through this pusher so far (skipped ones
    /// included).
    pub fn count(&self) -> u64 {
        each!(AnyLocal, &self.local, l => l.count)
    }
}

impl Drop for Builder {
    fn drop(&mut self) {
        // A builder dropped without finish: stop the sorters so their
        // threads end; spill files go with the core. Poisoned first, so
        // that the last chunk of its pusher is not sorted for nothing.
        each!(AnyCore, &self.core, c => {
            c.dropped.store(true, Ordering::SeqCst);
            c.poisoned.store(true, Ordering::SeqCst);
        });
        drop(self.own.take());
        each!(AnyCore, &self.core, c => {
            for _ in 0..c.plan.sorters {
                let _ = c.work_tx.send(Job::Stop);
            }
            let handles = std::mem::take(&mut *c.threads.lock().unwrap_or_else(|e| e.into_inner()));
            for h in handles {
                let _ = h.join();
            }
            c.lock().spill_dir.take();
        })
    }
}

/// An input the builder was fed from, able to tell an error found while
/// merging (a 0-based coordinate) in the input's own terms.
pub(crate) trait Locator: Send + Sync {
    /// The input file, for the output rule.
    fn file_id(&self) -> Option<&crate::fs::output::FileId>;

    /// `e` told in this input's terms, when it is an error about a
    /// coordinate this input holds; `None` otherwise.
    fn locate(&self, e: &Error) -> Option<Error>;
}

/// Contribution `n`'s index tuple checked against `shape`: its rank, then
/// every index against its extent. Shared by every pusher (local and MPI).
#[inline]
pub fn check_coordinate(shape: &[u64], idx: &[u64], n: u64) -> Result<()> {
    if idx.len() != shape.len() {
        return Err(Error::WrongRank {
            contribution: n,
            expected: shape.len(),
            got: idx.len(),
        });
    }
    for (dim, (&i, &e)) in idx.iter().zip(shape).enumerate() {
        if i >= e {
            return Err(Error::IndexOutOfRange {
                contribution: n,
                dim,
                index: i,
                extent: e,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorter_threads(b: &Builder) -> usize {
        each!(AnyCore, &b.core, c => c.threads.lock().map_or(usize::MAX, |t| t.len()))
    }

    /// `threads = 1` starts no sorter thread (the pusher makes the runs,
    /// also from a pusher dropped half full) and writes the same bytes as
    /// two threads, through spilled runs and a merge pass.
    #[test]
    fn one_thread_sorts_on_the_pushing_thread_and_matches_two() {
        let dir = tempfile::tempdir().unwrap();
        let shape = [300u64, 200];
        let mut files = Vec::new();
        for threads in [1, 2] {
            let minimum = match Builder::new(
                &shape,
                DType::F64,
                AssembleOptions {
                    memory_budget: 1,
                    threads,
                    ..AssembleOptions::default()
                },
            ) {
                Err(Error::BudgetTooSmall { minimum, .. }) => minimum,
                Err(e) => panic!("{e}"),
                Ok(_) => panic!("a 1-byte budget was accepted"),
            };
            let opts = AssembleOptions {
                memory_budget: minimum,
                threads,
                temp_dir: Some(dir.path().to_path_buf()),
                ..AssembleOptions::default()
            };
            let mut b = Builder::new(&shape, DType::F64, opts).unwrap();
            assert_eq!(sorter_threads(&b), if threads == 1 { 0 } else { 2 });
            let mut x = 88172645463325252u64;
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            {
                let mut p = b.pusher().unwrap();
                for _ in 0..20_000 {
                    let r = next();
                    p.push(&[r % 300, (r >> 20) % 200], (r >> 40) as f64 * 0.125)
                        .unwrap();
                }
            }
            for _ in 0..30_000 {
                let r = next();
                b.push(&[r % 300, (r >> 20) % 200], -((r >> 40) as f64))
                    .unwrap();
            }
            let out = dir.path().join(format!("t{threads}.hrry"));
            let s = b.finish(&out).unwrap();
            assert_eq!(s.contributions, 50_000);
            assert!(s.runs_spilled >= 2 && s.merge_passes >= 2, "{s:?}");
            files.push(std::fs::read(&out).unwrap());
        }
        assert!(
            files[0] == files[1],
            "threads 1 and 2 wrote different bytes"
        );
    }
}
