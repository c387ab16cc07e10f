//! The native builder: a `coo_assembler::Builder` with a pool of pushers,
//! so that Python threads push at once with the GIL released.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, RwLock};

use coo_assembler::input::{InputFormat, Source};
use coo_assembler::{Builder, DType, builder::Pusher, builder::Summary};
use numpy::ndarray::{ArrayView1, ArrayView3, Axis};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::{
    BadIndex, CHUNK, IntArr1, IntArr2, Ints, Ints2, Num, ValArr1, ValArr3, as_signed, chunk_of,
    with_values,
};
use crate::direct::watch_signals;
use crate::errors::{input_error, state_error, to_py};
use crate::options::{canonical, options};

/// Why a native call failed, built without the GIL and turned into a
/// Python exception after it is taken back.
pub enum Fail {
    Lib(coo_assembler::Error),
    Input(String),
    Closed,
}

impl From<coo_assembler::Error> for Fail {
    fn from(e: coo_assembler::Error) -> Self {
        Fail::Lib(e)
    }
}

impl From<Fail> for PyErr {
    fn from(f: Fail) -> PyErr {
        match f {
            Fail::Lib(e) => to_py(e),
            Fail::Input(m) => input_error(m),
            Fail::Closed => state_error("this builder is finished or closed; make a new one"),
        }
    }
}

type R<T> = Result<T, Fail>;

/// Idle pushers. Each push call borrows one for its whole duration, so a
/// pusher is used by one thread at a time; with a single pushing thread
/// the same pusher comes back every time (push order is kept, which the
/// `last` policy relies on). A call that finds none idle makes one: the
/// library takes any number (those beyond `threads` share the budget), so
/// every Python thread pushes at once, however many there are.
pub struct Pool {
    idle: Mutex<Vec<Pusher>>,
    /// Pushers made since the last drain: the most pushes that ran at once.
    made: AtomicUsize,
    /// The builder records its plan: push calls run one at a time, in the
    /// order they take `turn`, through one pusher (the plan's order is
    /// then the order of the calls).
    serial: std::sync::atomic::AtomicBool,
    turn: Mutex<()>,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, Vec<Pusher>> {
        // Pushing never panics while the lock is held; recover the data.
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn acquire(&self, builder: &Builder) -> R<Pusher> {
        let idle = self.lock().pop();
        match idle {
            Some(p) => Ok(p),
            None => {
                let p = builder.pusher()?;
                self.made.fetch_add(1, Ordering::Relaxed);
                Ok(p)
            }
        }
    }

    fn release(&self, p: Pusher) {
        self.lock().push(p);
    }

    /// Drop every idle pusher (their chunks go to the builder). Called with
    /// no push in flight.
    fn drain(&self) {
        self.lock().clear();
        self.made.store(0, Ordering::Relaxed);
    }

    /// Run `f` with a pusher of the pool.
    fn with<T>(&self, builder: &Builder, f: impl FnOnce(&mut Pusher) -> R<T>) -> R<T> {
        let _turn = self
            .serial
            .load(Ordering::Relaxed)
            .then(|| self.turn.lock().unwrap_or_else(|e| e.into_inner()));
        let mut p = self.acquire(builder)?;
        let r = f(&mut p);
        self.release(p);
        r
    }
}

/// A builder and its pool of pushers.
struct Live {
    builder: Builder,
    pool: Pool,
}

/// What the Python `Builder` wraps.
#[pyclass(module = "coo_assembler._native", name = "Builder")]
pub struct NativeBuilder {
    /// `None` once finished or closed. Pushes hold a read lock (many at
    /// once); finish and close take the write lock, so they wait for
    /// pushes in flight.
    live: RwLock<Option<Live>>,
    shape: Vec<u64>,
    /// The builder's `skip_negative`: signed index arrays then go through
    /// the library's signed pushes, which skip and count negative ones.
    skip_negative: bool,
    /// The plan the builder recorded, made by `finish` (`record_plan`).
    recorded: Mutex<Option<coo_assembler::Plan>>,
}

impl NativeBuilder {
    /// Run `f` with the builder and its pool (GIL not held by the caller).
    fn with_live<T>(&self, f: impl FnOnce(&Builder, &Pool) -> R<T>) -> R<T> {
        let g = self.live.read().unwrap_or_else(|e| e.into_inner());
        let live = g.as_ref().ok_or(Fail::Closed)?;
        f(&live.builder, &live.pool)
    }

    fn take(&self) -> Option<Live> {
        self.live.write().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The library's error for a bad component `dim` (its message is the
/// same whichever path the call takes).
fn bad_index(dim: usize, bad: BadIndex, extent: u64) -> Fail {
    Fail::Lib(coo_assembler::Error::bad_index(
        bad.position as u64,
        dim,
        bad.value,
        extent,
    ))
}

/// Push `values` at the coordinates given by one index array per dimension.
fn push_columns<T: Num>(
    builder: &Builder,
    pool: &Pool,
    shape: &[u64],
    cols: &[Ints<'_>],
    vals: &ArrayView1<'_, T>,
    skip_negative: bool,
) -> R<()> {
    let n = vals.len();
    for (d, c) in cols.iter().enumerate() {
        if c.len() != n {
            return Err(Fail::Input(format!(
                "index array {d} has {} entries, values has {n}",
                c.len()
            )));
        }
    }
    // Every index is checked before anything is pushed: a bad index leaves
    // the builder as it was.
    // Signed pushes only when a negative index may be skipped: the
    // unsigned ones need no sign check per contribution.
    let signed = skip_negative && cols.iter().any(|c| c.is_signed());
    for (d, (c, &e)) in cols.iter().zip(shape).enumerate() {
        c.check(e, signed && c.is_signed())
            .map_err(|b| bad_index(d, b, e))?;
        if signed && !c.is_signed() && e > i64::MAX as u64 {
            // An unsigned index beyond i64 would read as negative.
            c.check(i64::MAX as u64, false).map_err(|b| {
                Fail::Input(format!(
                    "index array {d}: index {} does not fit int64, which skip_negative \
                     reads indices as when another index array is signed",
                    b.value
                ))
            })?;
        }
    }
    let rank = cols.len();
    pool.with(builder, |p| {
        let mut bufs: Vec<Vec<u64>> = vec![Vec::new(); rank];
        let mut vbuf: Vec<T> = Vec::new();
        let mut inter: Vec<u64> = Vec::new();
        let mut start = 0;
        while start < n {
            let end = (start + CHUNK).min(n);
            let v = chunk_of(vals, start, end, &mut vbuf);
            if rank == 2 {
                let (b0, b1) = bufs.split_at_mut(1);
                let r = cols[0].chunk(start, end, &mut b0[0]);
                let c = cols[1].chunk(start, end, &mut b1[0]);
                if signed {
                    p.push_coo_signed(as_signed(r), as_signed(c), v)?;
                } else {
                    p.push_coo(r, c, v)?;
                }
            } else {
                inter.clear();
                inter.resize((end - start) * rank, 0);
                for (d, (c, buf)) in cols.iter().zip(bufs.iter_mut()).enumerate() {
                    for (i, &x) in c.chunk(start, end, buf).iter().enumerate() {
                        inter[i * rank + d] = x;
                    }
                }
                if signed {
                    p.push_many_signed(as_signed(&inter), v)?;
                } else {
                    p.push_many(&inter, v)?;
                }
            }
            start = end;
        }
        Ok(())
    })
}

/// Push `values` at coordinates given as the rows of an `(n, rank)` array.
fn push_rows<T: Num>(
    builder: &Builder,
    pool: &Pool,
    shape: &[u64],
    idx: &Ints2<'_>,
    vals: &ArrayView1<'_, T>,
    skip_negative: bool,
) -> R<()> {
    let signed = skip_negative && idx.is_signed();
    let (n, rank) = idx.dim();
    if rank != shape.len() {
        return Err(Fail::Input(format!(
            "the index array has {rank} columns, the tensor has rank {}",
            shape.len()
        )));
    }
    if n != vals.len() {
        return Err(Fail::Input(format!(
            "the index array has {n} rows, values has {} entries",
            vals.len()
        )));
    }
    for (d, &e) in shape.iter().enumerate() {
        idx.column(d)
            .check(e, signed)
            .map_err(|b| bad_index(d, b, e))?;
    }
    pool.with(builder, |p| {
        let (mut ibuf, mut vbuf) = (Vec::new(), Vec::new());
        let mut start = 0;
        while start < n {
            let end = (start + CHUNK).min(n);
            let v = chunk_of(vals, start, end, &mut vbuf);
            let rows = idx.rows_chunk(start, end, &mut ibuf);
            if signed {
                p.push_many_signed(as_signed(rows), v)?;
            } else {
                p.push_many(rows, v)?;
            }
            start = end;
        }
        Ok(())
    })
}

/// Push element matrices: `ke[e, a, b]` goes to `(dofs[e, a], dofs[e, b])`.
fn push_elements<T: Num>(
    builder: &Builder,
    pool: &Pool,
    shape: &[u64],
    dofs: &Ints2<'_>,
    ke: &ArrayView3<'_, T>,
    skip_negative: bool,
) -> R<()> {
    let signed = skip_negative && dofs.is_signed();
    if shape.len() != 2 {
        return Err(Fail::Input(format!(
            "push_elements needs a matrix; the tensor has rank {}",
            shape.len()
        )));
    }
    let (n_el, k) = dofs.dim();
    if ke.dim() != (n_el, k, k) {
        return Err(Fail::Input(format!(
            "dofs has shape ({n_el}, {k}), so the element matrices must have shape \
             ({n_el}, {k}, {k}); got {:?}",
            ke.shape()
        )));
    }
    let extent = shape[0].min(shape[1]);
    dofs.check(extent, signed).map_err(|(e, a, v)| {
        // The library's words, as its plans say them.
        let e = coo_assembler::Error::BadDof {
            element: e as u64,
            local: a,
            dof: v,
            extent,
        };
        Fail::Input(e.to_string())
    })?;
    // Element by element, whatever the layout: neighbouring elements share
    // dofs, so a chunk then holds many contributions to the same
    // coordinates and its run shrinks when they are combined. (Pushing
    // entry (a, b) of all elements at a time reads memory sequentially for
    // element-last storage, but leaves chunks with almost no duplicates:
    // 12.2 s instead of 9.1 s to finish on a 5e7 scikit-fem problem.)
    // Gathering one element's k*k values from element-last storage touches
    // the same k*k cache lines as the previous element: it stays in L1.
    pool.with(builder, |p| {
        let (mut db, mut vb) = (Vec::new(), Vec::new());
        for e in 0..n_el {
            dofs.row_into(e, &mut db);
            let m = ke.index_axis(Axis(0), e);
            let local: &[T] = match m.as_slice() {
                Some(s) => s,
                None => {
                    vb.clear();
                    vb.extend(m.iter().copied());
                    &vb
                }
            };
            if signed {
                p.push_element_signed(as_signed(&db), local)?;
            } else {
                p.push_element(&db, local)?;
            }
        }
        Ok(())
    })
}

/// `_native.check_temp_dir(options)`: the library's check of the spill
/// folder the options name, for `assemble`'s paths that never spill (so a
/// missing folder is the same error on every path).
#[pyfunction]
pub fn check_temp_dir(kw: &Bound<'_, PyDict>) -> PyResult<()> {
    options(kw)?.checked_temp_dir().map_err(to_py)?;
    Ok(())
}

/// A `Summary` as the dict the package turns into its dataclass.
pub fn summary_dict<'py>(py: Python<'py>, s: &Summary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("path", s.path.clone())?;
    d.set_item("contributions", s.contributions)?;
    d.set_item("nnz", s.nnz)?;
    d.set_item("dropped_zeros", s.dropped_zeros)?;
    d.set_item("skipped_negative", s.skipped_negative)?;
    d.set_item("runs", s.runs)?;
    d.set_item("runs_spilled", s.runs_spilled)?;
    d.set_item("merge_passes", s.merge_passes)?;
    d.set_item("merge_ranges", s.merge_ranges)?;
    d.set_item("bytes_spilled", s.bytes_spilled)?;
    d.set_item("peak_buffer_bytes", s.peak_buffer_bytes)?;
    d.set_item("budget_parts", s.budget_parts.clone())?;
    d.set_item("memory_budget", s.memory_budget)?;
    d.set_item("file_bytes", s.file_bytes)?;
    d.set_item("time_ingest", s.time_ingest.as_secs_f64())?;
    d.set_item("time_sort", s.time_sort.as_secs_f64())?;
    d.set_item("time_merge", s.time_merge.as_secs_f64())?;
    d.set_item("time_write", s.time_write.as_secs_f64())?;
    d.set_item("stale_removed", s.stale_removed.clone())?;
    Ok(d)
}

impl NativeBuilder {
    fn wrap(builder: Builder, skip_negative: bool) -> NativeBuilder {
        let shape = builder.shape().to_vec();
        NativeBuilder {
            live: RwLock::new(Some(Live {
                builder,
                pool: Pool {
                    idle: Mutex::new(Vec::new()),
                    made: AtomicUsize::new(0),
                    serial: std::sync::atomic::AtomicBool::new(false),
                    turn: Mutex::new(()),
                },
            })),
            shape,
            skip_negative,
            recorded: Mutex::new(None),
        }
    }
}

#[pymethods]
impl NativeBuilder {
    /// A builder of `shape` and `dtype` (a library name) with the options
    /// of `kw` (see [`options`]).
    #[new]
    fn new(py: Python<'_>, shape: Vec<u64>, dtype: &str, kw: &Bound<'_, PyDict>) -> PyResult<Self> {
        let dtype = canonical::<DType>(dtype)?;
        let opts = options(kw)?;
        let skip = opts.skip_negative;
        // Starting the sorter threads and sweeping stale temp dirs touch
        // the file system: without the GIL.
        let builder = py
            .detach(|| Builder::new(&shape, dtype, opts))
            .map_err(to_py)?;
        Ok(NativeBuilder::wrap(builder, skip))
    }

    /// A builder for the input file `path` (its format given or
    /// recognised), its shape and dtype the header's unless given, with
    /// the file already pushed.
    #[staticmethod]
    #[pyo3(signature = (path, format, shape, dtype, kw))]
    fn from_file(
        py: Python<'_>,
        path: PathBuf,
        format: Option<&str>,
        shape: Option<Vec<u64>>,
        dtype: Option<&str>,
        kw: &Bound<'_, PyDict>,
    ) -> PyResult<Self> {
        let format = format.map(canonical::<InputFormat>).transpose()?;
        let dtype = dtype.map(canonical::<DType>).transpose()?;
        let opts = options(kw)?;
        let skip = opts.skip_negative;
        let builder = py
            .detach(|| -> coo_assembler::Result<Builder> {
                let source = Source::open(&path, format)?;
                let mut b = source.builder(shape.as_deref(), dtype, opts)?;
                source.push_into(&mut b, |_| {})?;
                Ok(b)
            })
            .map_err(to_py)?;
        Ok(NativeBuilder::wrap(builder, skip))
    }

    /// Push every contribution of the input file `path` (format given or
    /// recognised); returns how many. Waits for pushes in flight.
    #[pyo3(signature = (path, format=None))]
    fn push_file(&self, py: Python<'_>, path: PathBuf, format: Option<&str>) -> PyResult<u64> {
        let format = format.map(canonical::<InputFormat>).transpose()?;
        py.detach(|| -> R<u64> {
            let mut g = self.live.write().unwrap_or_else(|e| e.into_inner());
            let live = g.as_mut().ok_or(Fail::Closed)?;
            // The readers push through the builder's own pusher: free the
            // pool's slots first (their chunks go to the builder).
            live.pool.drain();
            let source = Source::open(&path, format)?;
            Ok(source.push_into(&mut live.builder, |_| {})?)
        })
        .map_err(PyErr::from)
    }

    /// The element type's library name.
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        self.with_live(|b, _| Ok(b.dtype().name()))
            .map_err(PyErr::from)
    }

    /// The shape.
    #[getter]
    fn shape(&self) -> Vec<u64> {
        self.shape.clone()
    }

    /// Push values at coordinates given as one 1-D index array per dimension.
    fn push_columns(
        &self,
        py: Python<'_>,
        columns: Vec<Bound<'_, PyAny>>,
        values: Bound<'_, PyAny>,
    ) -> PyResult<()> {
        if columns.len() != self.shape.len() {
            return Err(input_error(format!(
                "{} index arrays given, the tensor has rank {}",
                columns.len(),
                self.shape.len()
            )));
        }
        let borrowed = columns
            .iter()
            .enumerate()
            .map(|(d, c)| IntArr1::borrow(c, &format!("index array {d}")))
            .collect::<PyResult<Vec<_>>>()?;
        let cols: Vec<Ints<'_>> = borrowed.iter().map(|b| b.view()).collect();
        let vals = ValArr1::borrow(&values)?;
        let (shape, skip) = (&self.shape, self.skip_negative);
        with_values!(ValArr1, &vals, v => py.detach(|| {
            self.with_live(|b, pool| push_columns(b, pool, shape, &cols, &v, skip))
        }))?;
        Ok(())
    }

    /// Push values at coordinates given as the rows of an (n, rank) array.
    fn push_rows(
        &self,
        py: Python<'_>,
        index: Bound<'_, PyAny>,
        values: Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let idx = IntArr2::borrow(&index, "the index array")?;
        let view = idx.view();
        let vals = ValArr1::borrow(&values)?;
        let (shape, skip) = (&self.shape, self.skip_negative);
        with_values!(ValArr1, &vals, v => py.detach(|| {
            self.with_live(|b, pool| push_rows(b, pool, shape, &view, &v, skip))
        }))?;
        Ok(())
    }

    /// Push element matrices (n_elements, k, k) on dofs (n_elements, k).
    fn push_elements(
        &self,
        py: Python<'_>,
        dofs: Bound<'_, PyAny>,
        ke: Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let d = IntArr2::borrow(&dofs, "dofs")?;
        let dview = d.view();
        let k = ValArr3::borrow(&ke)?;
        let (shape, skip) = (&self.shape, self.skip_negative);
        with_values!(ValArr3, &k, v => py.detach(|| {
            self.with_live(|b, pool| push_elements(b, pool, shape, &dview, &v, skip))
        }))?;
        Ok(())
    }

    /// Record the plan while assembling (before any push): push calls then
    /// run one at a time, in call order.
    fn record_plan(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| -> R<()> {
            let mut g = self.live.write().unwrap_or_else(|e| e.into_inner());
            let live = g.as_mut().ok_or(Fail::Closed)?;
            live.builder.record_plan()?;
            live.pool.serial.store(true, Ordering::Relaxed);
            Ok(())
        })
        .map_err(PyErr::from)
    }

    /// The plan `finish` made of the builder's recording (once).
    fn take_plan(&self) -> Option<crate::plan::NativePlan> {
        let mut g = self.recorded.lock().unwrap_or_else(|e| e.into_inner());
        g.take().map(crate::plan::NativePlan::wrap)
    }

    /// Merge, write `path` atomically and return the summary as a dict;
    /// when the builder records its plan, make it: in memory, or written
    /// out of core to `plan_file`.
    ///
    /// Ctrl-C stops the merge at its next step: nothing is published, the
    /// temporary files go, the builder is closed, `KeyboardInterrupt` is
    /// raised.
    #[pyo3(signature = (path, plan_file=None))]
    fn finish<'py>(
        &self,
        py: Python<'py>,
        path: PathBuf,
        plan_file: Option<PathBuf>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let stopper = self.with_live(|b, _| Ok(b.stopper()))?;
        let s = watch_signals(
            py,
            || stopper.stop(),
            || {
                let mut g = self.live.write().unwrap_or_else(|e| e.into_inner());
                let Some(live) = g.as_mut() else {
                    return Err(PyErr::from(Fail::Closed));
                };
                // Dropping the pool's pushers hands their partial chunks over.
                live.pool.drain();
                let recording = live.pool.serial.load(Ordering::Relaxed);
                if plan_file.is_some() && !recording {
                    return Err(input_error(
                        "plan_file: this builder does not record its plan (record_plan=True)"
                            .to_string(),
                    ));
                }
                let r = live.builder.finish(&path).and_then(|s| {
                    if !recording {
                        return Ok(s);
                    }
                    match &plan_file {
                        Some(pf) => {
                            coo_assembler::plan::PlanFile::create_recorded(
                                &live.builder,
                                pf,
                                None,
                            )?;
                        }
                        None => {
                            let plan = coo_assembler::Plan::recorded(&live.builder, None)?;
                            *self.recorded.lock().unwrap_or_else(|e| e.into_inner()) = Some(plan);
                        }
                    }
                    Ok(s)
                });
                if live.builder.is_finished() {
                    *g = None;
                }
                r.map_err(to_py)
            },
        )?;
        summary_dict(py, &s)
    }

    /// Abandon: nothing is written, temporary files are removed. Idempotent.
    fn close(&self, py: Python<'_>) {
        // Dropping the builder joins its sorter threads: without the GIL.
        py.detach(|| drop(self.take()));
    }

    /// How many pushers the pool holds: the most pushes that ran at once
    /// (for tests; 0 once finished or closed).
    #[getter(_pushers)]
    fn pushers(&self) -> usize {
        self.with_live(|_, pool| Ok(pool.made.load(Ordering::Relaxed)))
            .unwrap_or(0)
    }

    /// False once finished or closed.
    #[getter]
    fn is_open(&self) -> bool {
        self.live
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }
}
