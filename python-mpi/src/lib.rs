//! `coo_assembler_mpi._dist`: the Rust half of `ca.DistBuilder` and
//! `ca.DistPlan` (issue 42). The Python half (`coo_assembler_mpi/__init__.py`)
//! takes the mpi4py communicator (its Fortran handle, `comm.py2f()`) and
//! the keywords; this module holds a `coo_assembler_mpi::DistBuilder` on a
//! duplicate of that communicator. Options and errors are the
//! `coo_assembler` package's own (`_native::builder::options`,
//! `_native::errors::to_py`).

use _native::builder::options;
use _native::errors::{input_error, state_error, to_py};
use coo_assembler::DType;
use coo_assembler::element::RealElement;
use coo_assembler::vocab::Vocabulary;
use coo_assembler_mpi::comm::from_fortran;
use coo_assembler_mpi::{DistOptions, DistPlan, DistSummary, LocalCsr, RowOwnership};
use mpi::topology::SimpleCommunicator;
use numpy::{IntoPyArray, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

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

    /// Push contributions: `indices` (n, rank) int64, `values` (n,) float64.
    fn push_arrays(
        &mut self,
        indices: PyReadonlyArray2<'_, i64>,
        values: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<()> {
        let (idx, vals) = (indices.as_array(), values.as_slice()?);
        if idx.nrows() != vals.len() {
            return Err(input_error(format!(
                "{} index rows for {} values",
                idx.nrows(),
                vals.len()
            )));
        }
        let b = self.builder()?;
        let mut at = vec![0u64; idx.ncols()];
        for (row, &v) in idx.rows().into_iter().zip(vals) {
            for (a, &i) in at.iter_mut().zip(row) {
                *a = u64::try_from(i).map_err(|_| {
                    // Reported to every rank by the finish too.
                    let m = format!("a negative index {i} (the distributed builder takes none)");
                    to_py(b.refused(coo_assembler::Error::InvalidArgument(m)))
                })?;
            }
            b.push(&at, v).map_err(to_py)?;
        }
        Ok(())
    }

    /// Push element matrices: `dofs` (E, p) int64, `values` (E, p, p)
    /// float64, element `e` adding `values[e, a, b]` at `(dofs[e, a], dofs[e, b])`.
    fn push_elements(
        &mut self,
        dofs: PyReadonlyArray2<'_, i64>,
        values: PyReadonlyArray3<'_, f64>,
    ) -> PyResult<()> {
        let (d, v) = (dofs.as_array(), values.as_array());
        let (e, p) = (d.nrows(), d.ncols());
        if v.shape() != [e, p, p] {
            return Err(input_error(format!(
                "values of shape {:?} for dofs of shape ({e}, {p}): need ({e}, {p}, {p})",
                v.shape()
            )));
        }
        let b = self.builder()?;
        let mut local = Vec::with_capacity(p * p);
        let mut ids = vec![0u64; p];
        for k in 0..e {
            for (a, id) in ids.iter_mut().enumerate() {
                let i = d[[k, a]];
                *id = u64::try_from(i).map_err(|_| {
                    let m = format!("dofs[{k}, {a}] = {i} is negative");
                    to_py(b.refused(coo_assembler::Error::InvalidArgument(m)))
                })?;
            }
            local.clear();
            local.extend(v.slice(numpy::ndarray::s![k, .., ..]).iter().copied());
            b.push_element(&ids, &local).map_err(to_py)?;
        }
        Ok(())
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

/// A plan across ranks and the communicator it refills on.
#[pyclass(unsendable)]
pub struct NativeDistPlan {
    plan: DistPlan,
    comm: SimpleCommunicator,
    dtype: DType,
}

fn refill_as<'py, T: RealElement + numpy::Element>(
    py: Python<'py>,
    p: &mut NativeDistPlan,
    values: &[f64],
) -> PyResult<Bound<'py, PyAny>> {
    let mut out = vec![<T as bytemuck::Zeroable>::zeroed(); p.plan.nnz()];
    p.plan
        .refill_into(&p.comm, values, &mut out)
        .map_err(to_py)?;
    Ok(out.into_pyarray(py).into_any())
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
        values: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v = values.as_slice()?;
        with_real!(self.dtype, T => refill_as::<T>(py, self, v))
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
