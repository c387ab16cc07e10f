//! `coo_assembler_mpi._dist`: the Rust half of `ca.DistBuilder` and
//! `ca.DistPlan` (issue 42). The Python half (`coo_assembler_mpi/__init__.py`)
//! takes the mpi4py communicator (its Fortran handle, `comm.py2f()`) and
//! the keywords; this module holds a `coo_assembler_mpi::DistBuilder` on a
//! duplicate of that communicator. Options and errors are the
//! `coo_assembler` package's own (`pyshared::options::options`,
//! `pyshared::errors::to_py`, in `python/shared`).

use coo_assembler::DType;
use coo_assembler::element::RealElement;
use coo_assembler::internals::assemble::direct::DirectValue;
use coo_assembler::vocab::Vocabulary;
use coo_assembler_mpi::comm::from_fortran;
use coo_assembler_mpi::{DistOptions, DistPlan, DistSummary, LocalCsr, RowOwnership};
use mpi::topology::SimpleCommunicator;
use numpy::ndarray::{ArrayView1, ArrayView3, Axis};
use numpy::{IntoPyArray, PyArray1, PyArrayMethods, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyshared::arrays::{CHUNK, IntArr2, Ints2, Num, ValArr1, ValArr3};
use pyshared::errors::{input_error, state_error, to_py};
use pyshared::options::options;
use pyshared::with_values;

type Builder = coo_assembler_mpi::DistBuilder<'static, SimpleCommunicator>;

/// Calls `$body` with `$t` the Rust element type of `$dtype` (the
/// library's dispatch, `coo_assembler_mpi::with_band_type`).
macro_rules! with_real {
    ($dtype:expr, $t:ident => $body:expr) => {
        coo_assembler_mpi::with_band_type!($dtype, $t => $body, d => Err(input_error(format!(
            "a band in memory holds {} values, not {}",
            coo_assembler_mpi::BAND_TYPES,
            d.name()
        ))))
    };
}

/// Whether bands come with 32- or 64-bit indices.
fn wide(index_bits: u32) -> PyResult<bool> {
    match index_bits {
        32 => Ok(false),
        64 => Ok(true),
        b => Err(input_error(format!("index_bits must be 32 or 64, got {b}"))),
    }
}

/// A band as the tuple the package returns: (row_ptr, cols, values, (lo, hi)).
fn band_tuple<'py, J, T>(py: Python<'py>, b: LocalCsr<J, T>) -> PyResult<Bound<'py, PyTuple>>
where
    J: numpy::Element,
    T: numpy::Element,
{
    let rows = (b.rows.start, b.rows.end);
    PyTuple::new(
        py,
        [
            b.row_ptr.into_pyarray(py).into_any(),
            b.cols.into_pyarray(py).into_any(),
            b.values.into_pyarray(py).into_any(),
            rows.into_pyobject(py)?.into_any(),
        ],
    )
}

/// The distributed options of the package's keywords: the assembly
/// options, and row ownership from `starts` (every rank's first row) or
/// `local_rows` (this rank's count).
fn dist_options(
    kw: &Bound<'_, PyDict>,
    starts: Option<Vec<u64>>,
    local_rows: Option<u64>,
) -> PyResult<DistOptions> {
    let rows = match (starts, local_rows) {
        (Some(_), Some(_)) => {
            return Err(input_error("give row_starts or local_rows, not both"));
        }
        (Some(s), None) => RowOwnership::Given(s),
        (None, Some(n)) => RowOwnership::Local(n),
        (None, None) => RowOwnership::Sampled,
    };
    Ok(DistOptions {
        assemble: options(kw)?,
        rows,
        ..DistOptions::default()
    })
}

fn summary_dict<'py>(py: Python<'py>, s: &DistSummary) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("rank", s.rank)?;
    d.set_item("ranks", s.ranks)?;
    d.set_item("path", s.path.clone())?;
    d.set_item("rows", (s.rows.start, s.rows.end))?;
    d.set_item("pushed", s.pushed)?;
    d.set_item("off_rank", s.off_rank)?;
    d.set_item("sent", s.sent)?;
    d.set_item("received", s.received)?;
    d.set_item("rounds", s.rounds)?;
    d.set_item("nnz", s.nnz)?;
    d.set_item("total_nnz", s.total_nnz)?;
    d.set_item("file_bytes", s.file_bytes)?;
    d.set_item("peak_rss", s.peak_rss.iter().copied().max().unwrap_or(0))?;
    Ok(d)
}

/// `_dist.DistBuilder(comm_f, shape, dtype, options, row_starts, local_rows)`.
#[pyclass(unsendable)]
pub struct NativeDistBuilder {
    inner: Option<Builder>,
    dtype: DType,
    rank: usize,
}

impl NativeDistBuilder {
    fn builder(&mut self) -> PyResult<&mut Builder> {
        self.inner.as_mut().ok_or_else(|| {
            state_error("this DistBuilder has finished or was given up; make a new one")
        })
    }

    fn take(&mut self) -> PyResult<Builder> {
        self.inner.take().ok_or_else(|| {
            state_error("this DistBuilder has finished or was given up; make a new one")
        })
    }
}

#[pymethods]
impl NativeDistBuilder {
    #[new]
    #[pyo3(signature = (comm_f, shape, dtype, kw, row_starts=None, local_rows=None))]
    fn new(
        comm_f: i32,
        shape: Vec<u64>,
        dtype: &str,
        kw: &Bound<'_, PyDict>,
        row_starts: Option<Vec<u64>>,
        local_rows: Option<u64>,
    ) -> PyResult<Self> {
        let dtype = DType::parse(dtype).map_err(to_py)?;
        let opts = dist_options(kw, row_starts, local_rows)?;
        let comm = from_fortran(comm_f).map_err(to_py)?;
        let b = Builder::owning(comm, &shape, dtype, opts).map_err(to_py)?;
        Ok(NativeDistBuilder {
            rank: b.rank() as usize,
            inner: Some(b),
            dtype,
        })
    }

    /// This rank.
    #[getter]
    fn rank(&self) -> usize {
        self.rank
    }

    /// The element type's name.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.name()
    }

    /// Push contributions: `indices` (n, rank) of any integer type,
    /// `values` (n,) of any type the one-process builder takes, each
    /// reaching the tensor's type by the library's rules (an int64 stays
    /// exact). A negative index is refused before anything is pushed.
    fn push_arrays(&mut self, indices: Bound<'_, PyAny>, values: Bound<'_, PyAny>) -> PyResult<()> {
        let idx = IntArr2::borrow(&indices, "the index array")?;
        let vals = ValArr1::borrow(&values)?;
        let b = self.builder()?;
        with_values!(ValArr1, &vals, v => push_rows(b, &idx.view(), &v))
    }

    /// Push element matrices: `dofs` (E, p) of any integer type, `values`
    /// (E, p, p) of any value type, element `e` adding `values[e, a, b]`
    /// at `(dofs[e, a], dofs[e, b])`.
    fn push_elements(&mut self, dofs: Bound<'_, PyAny>, values: Bound<'_, PyAny>) -> PyResult<()> {
        let d = IntArr2::borrow(&dofs, "dofs")?;
        let k = ValArr3::borrow(&values)?;
        let b = self.builder()?;
        with_values!(ValArr3, &k, v => push_elements(b, &d.view(), &v))
    }

    /// Collective: the partition composite at `path`.
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
        path: std::path::PathBuf,
    ) -> PyResult<Bound<'py, PyDict>> {
        let s = self.take()?.finish(path).map_err(to_py)?;
        summary_dict(py, &s)
    }

    /// Collective: one plain file per rank at `path`.
    fn finish_per_rank<'py>(
        &mut self,
        py: Python<'py>,
        path: std::path::PathBuf,
    ) -> PyResult<Bound<'py, PyDict>> {
        let s = self.take()?.finish_per_rank(path).map_err(to_py)?;
        summary_dict(py, &s)
    }

    /// Collective: this rank's band as (row_ptr, cols, values, (lo, hi)).
    fn finish_csr<'py>(
        &mut self,
        py: Python<'py>,
        index_bits: u32,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let b = self.take()?;
        with_real!(self.dtype, T => {
            if wide(index_bits)? {
                let (band, _) = b.finish_csr::<i64, T>().map_err(to_py)?;
                band_tuple(py, band)
            } else {
                let (band, _) = b.finish_csr::<i32, T>().map_err(to_py)?;
                band_tuple(py, band)
            }
        })
    }

    /// Collective: the band and the plan of what was pushed.
    fn finish_planned<'py>(
        &mut self,
        py: Python<'py>,
        index_bits: u32,
    ) -> PyResult<(Bound<'py, PyTuple>, NativeDistPlan)> {
        let b = self.take()?;
        // The plan refills on a communicator of its own (collective).
        let comm = mpi::traits::Communicator::duplicate(b.communicator());
        let dtype = self.dtype;
        with_real!(dtype, T => {
            let (band, plan) = if wide(index_bits)? {
                let (band, plan) = b.finish_planned::<i64, T>().map_err(to_py)?;
                (band_tuple(py, band)?, plan)
            } else {
                let (band, plan) = b.finish_planned::<i32, T>().map_err(to_py)?;
                (band_tuple(py, band)?, plan)
            };
            Ok((band, NativeDistPlan { plan, comm, dtype }))
        })
    }

    /// Give the builder up on this rank: every other rank's finish raises,
    /// naming this rank and `why`.
    fn abandon(&mut self, why: &str) {
        if let Some(b) = self.inner.take() {
            b.abandon(why);
        }
    }
}

/// A call this rank refuses before its pushes reach the builder: raised
/// here, and reported to every rank by the finish.
fn refused(b: &mut Builder, why: String) -> PyErr {
    to_py(b.refused(coo_assembler::Error::InvalidArgument(why)))
}

/// The first negative entry of `ints` as (row, column, value): refused,
/// and reported to every rank by the finish.
fn refuse_negative(b: &mut Builder, ints: &Ints2<'_>, what: &str) -> PyResult<()> {
    match ints.check(u64::MAX, false) {
        Ok(()) => Ok(()),
        Err((r, c, x)) => {
            let m = if x < 0 {
                format!("{what}[{r}, {c}] = {x} is negative (the distributed builder takes none)")
            } else {
                format!("{what}[{r}, {c}] = {x} is out of range")
            };
            Err(refused(b, m))
        }
    }
}

fn push_rows<T: Num>(b: &mut Builder, idx: &Ints2<'_>, vals: &ArrayView1<'_, T>) -> PyResult<()> {
    let (n, rank) = idx.dim();
    if n != vals.len() {
        return Err(refused(
            b,
            format!("{n} index rows for {} values", vals.len()),
        ));
    }
    if rank != b.shape().len() {
        let m = format!(
            "indices with {rank} columns for a rank-{} tensor",
            b.shape().len()
        );
        return Err(refused(b, m));
    }
    refuse_negative(b, idx, "indices")?;
    let mut buf = Vec::new();
    let mut start = 0;
    while start < n {
        let end = (start + CHUNK).min(n);
        let rows = idx.rows_chunk(start, end, &mut buf);
        for (at, k) in rows.chunks_exact(rank).zip(start..end) {
            b.push(at, vals[k]).map_err(to_py)?;
        }
        start = end;
    }
    Ok(())
}

fn push_elements<T: Num>(
    b: &mut Builder,
    dofs: &Ints2<'_>,
    vals: &ArrayView3<'_, T>,
) -> PyResult<()> {
    let (e, p) = dofs.dim();
    if vals.shape() != [e, p, p] {
        let m = format!(
            "values of shape {:?} for dofs of shape ({e}, {p}): need ({e}, {p}, {p})",
            vals.shape()
        );
        return Err(refused(b, m));
    }
    refuse_negative(b, dofs, "dofs")?;
    let (mut ids, mut local) = (Vec::with_capacity(p), Vec::with_capacity(p * p));
    for k in 0..e {
        dofs.row_into(k, &mut ids);
        local.clear();
        local.extend(vals.index_axis(Axis(0), k).iter().copied());
        b.push_element(&ids, &local).map_err(to_py)?;
    }
    Ok(())
}

/// A plan across ranks and the communicator it refills on.
#[pyclass(unsendable)]
pub struct NativeDistPlan {
    plan: DistPlan,
    comm: SimpleCommunicator,
    dtype: DType,
}

/// Refill into a new band of `T` values from `values`: the plan's own
/// type (exact whatever its width) or float64 (each value reaching `T` by
/// the library's rules). Values this rank cannot take fail the refill on
/// every rank ([`refuse`]).
fn refill_as<'py, T>(
    py: Python<'py>,
    p: &mut NativeDistPlan,
    values: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>>
where
    T: RealElement + numpy::Element + DirectValue + mpi::traits::Equivalence + bytemuck::Pod,
{
    let mut out = vec![<T as bytemuck::Zeroable>::zeroed(); p.plan.nnz()];
    if let Ok(a) = values.cast::<PyArray1<T>>() {
        refill_from(p, a, &mut out)?;
    } else if let Ok(a) = values.cast::<PyArray1<f64>>() {
        refill_from(p, a, &mut out)?;
    } else {
        let why = format!(
            "refill values must be a 1-D array of {} or float64",
            p.dtype.numpy_name()
        );
        return Err(refuse(p, why));
    }
    Ok(out.into_pyarray(py).into_any())
}

fn refill_from<V, T>(
    p: &mut NativeDistPlan,
    a: &Bound<'_, PyArray1<V>>,
    out: &mut [T],
) -> PyResult<()>
where
    V: numpy::Element + DirectValue + mpi::traits::Equivalence + bytemuck::Pod,
    T: RealElement,
{
    let a = match a.try_readonly() {
        Ok(a) => a,
        Err(e) => return Err(refuse(p, e.to_string())),
    };
    let s = match a.as_slice() {
        Ok(s) => s,
        Err(e) => return Err(refuse(p, e.to_string())),
    };
    p.plan.refill_into(&p.comm, s, out).map_err(to_py)
}

/// This rank's part in a refill it cannot make: every rank's refill fails
/// naming it and `why`, and nobody waits.
fn refuse(p: &NativeDistPlan, why: String) -> PyErr {
    match p.plan.refuse(&p.comm, &why) {
        Err(e) => to_py(e),
        Ok(()) => state_error("a refused refill went through"),
    }
}

#[pymethods]
impl NativeDistPlan {
    /// Collective: plan this rank's contributions `indices` (n, rank) int64.
    #[staticmethod]
    #[pyo3(signature = (comm_f, indices, shape, dtype, kw, row_starts=None, local_rows=None))]
    fn from_arrays(
        comm_f: i32,
        indices: PyReadonlyArray2<'_, i64>,
        shape: Vec<u64>,
        dtype: &str,
        kw: &Bound<'_, PyDict>,
        row_starts: Option<Vec<u64>>,
        local_rows: Option<u64>,
    ) -> PyResult<Self> {
        let dtype = DType::parse(dtype).map_err(to_py)?;
        let opts = dist_options(kw, row_starts, local_rows)?;
        let comm = from_fortran(comm_f).map_err(to_py)?;
        // One array per dimension, contiguous.
        let idx = indices.as_array();
        let dims: Vec<Vec<i64>> = idx.columns().into_iter().map(|c| c.to_vec()).collect();
        let views: Vec<&[i64]> = dims.iter().map(|d| &d[..]).collect();
        let plan = DistPlan::new(&comm, &views, &shape, dtype, &opts).map_err(to_py)?;
        Ok(NativeDistPlan { plan, comm, dtype })
    }

    /// Collective: this rank's band refilled from `values`, one per
    /// planned contribution in the planned order.
    fn refill<'py>(
        &mut self,
        py: Python<'py>,
        values: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        with_real!(self.dtype, T => refill_as::<T>(py, self, &values))
    }

    /// Collective, in place of a refill this rank cannot make (its values
    /// did not convert): every rank's refill raises, naming this rank.
    fn refuse(&self, why: String) -> PyErr {
        refuse(self, why)
    }

    /// The plan's element type, as NumPy names it.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.numpy_name()
    }

    /// The band's structure: (row_ptr, cols) with `index_bits` indices.
    fn structure<'py>(&self, py: Python<'py>, index_bits: u32) -> PyResult<Bound<'py, PyTuple>> {
        let pair = |a: Bound<'py, PyAny>, b: Bound<'py, PyAny>| PyTuple::new(py, [a, b]);
        if wide(index_bits)? {
            let (p, c) = (self.plan.row_ptr::<i64>(), self.plan.cols::<i64>());
            pair(
                p.map_err(to_py)?.into_pyarray(py).into_any(),
                c.map_err(to_py)?.into_pyarray(py).into_any(),
            )
        } else {
            let (p, c) = (self.plan.row_ptr::<i32>(), self.plan.cols::<i32>());
            pair(
                p.map_err(to_py)?.into_pyarray(py).into_any(),
                c.map_err(to_py)?.into_pyarray(py).into_any(),
            )
        }
    }

    /// (lo, hi): the rows this rank owns.
    #[getter]
    fn rows(&self) -> (u64, u64) {
        let r = self.plan.rows();
        (r.start, r.end)
    }

    /// Values a refill takes on this rank.
    #[getter]
    fn contributions(&self) -> usize {
        self.plan.contributions()
    }

    /// Entries of this rank's band.
    #[getter]
    fn nnz(&self) -> usize {
        self.plan.nnz()
    }

    /// Bytes this rank's part of the plan holds.
    #[getter]
    fn memory_bytes(&self) -> u64 {
        self.plan.memory_bytes()
    }
}

#[pymodule]
fn _dist(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<NativeDistBuilder>()?;
    m.add_class::<NativeDistPlan>()?;
    Ok(())
}
