//! `_native.Plan`: the library's [`coo_assembler::Plan`] (issue 24)
//! behind `coo_assembler.plan` and `plan_elements`. Planning and refills
//! run without the GIL (Ctrl-C stops them, as `assemble` does); a refill
//! writes into the caller's NumPy array in place.

use coo_assembler::internals::assemble::direct::{DirectValue, IndexElem, OutIndex, OutValue};
use coo_assembler::{AssembleOptions, DType, Plan, vocab::Vocabulary};
use numpy::{
    Element as NpElement, PyArray1, PyArrayDyn, PyArrayMethods, PyUntypedArray,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::atomic::AtomicBool;

use crate::direct::run_interruptible;
use crate::errors::to_py;
use crate::options::options;

/// A plan, shared by every refill (a refill only reads it).
#[pyclass(name = "Plan", module = "coo_assembler._native", frozen)]
pub struct NativePlan {
    plan: Plan,
}

impl NativePlan {
    /// A plan made elsewhere (a builder's recording).
    pub(crate) fn wrap(plan: Plan) -> NativePlan {
        NativePlan { plan }
    }
}

/// The NumPy name of an array's dtype ("" when it is not an array).
fn dtype_of(a: &Bound<'_, PyAny>) -> String {
    a.cast::<PyUntypedArray>()
        .map(|a| a.dtype().to_string())
        .unwrap_or_default()
}

fn type_error(msg: String) -> PyErr {
    PyTypeError::new_err(msg)
}

/// A contiguous array of `T` (any number of dimensions), borrowed.
fn slice_of<'py, T: NpElement>(
    a: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<numpy::PyReadonlyArrayDyn<'py, T>> {
    let arr = a.cast::<PyArrayDyn<T>>().map_err(|_| {
        type_error(format!(
            "{what} must be a NumPy array of {}",
            std::any::type_name::<T>()
        ))
    })?;
    if !arr.is_contiguous() {
        return Err(type_error(format!("{what} must be a contiguous array")));
    }
    Ok(arr.readonly())
}

/// What coordinates are planned into: a [`Plan`] held in memory
/// ([`InMemory`]) or a plan file kept in parts
/// (`crate::plan_file::ToFile`). The argument checks, the index dtype
/// dispatch and the run without the GIL are [`plan_cols`]' and
/// [`plan_dofs`]', for both.
pub(crate) trait Planner: Sync {
    type Out: Send;
    /// Plan the coordinates `dims` (one slice per dimension).
    fn arrays<I: IndexElem>(
        &self,
        dims: &[&[I]],
        shape: &[u64],
        dtype: DType,
        opts: &AssembleOptions,
        stop: &AtomicBool,
    ) -> coo_assembler::Result<Self::Out>;
    /// Plan the element matrices of `dofs` (`per` dofs per element).
    fn elements<I: IndexElem>(
        &self,
        dofs: &[I],
        per: usize,
        shape: [u64; 2],
        dtype: DType,
        opts: &AssembleOptions,
        stop: &AtomicBool,
    ) -> coo_assembler::Result<Self::Out>;
}

/// Plans held in memory.
struct InMemory;

impl Planner for InMemory {
    type Out = Plan;
    fn arrays<I: IndexElem>(
        &self,
        dims: &[&[I]],
        shape: &[u64],
        dtype: DType,
        opts: &AssembleOptions,
        stop: &AtomicBool,
    ) -> coo_assembler::Result<Plan> {
        Plan::new(dims, shape, dtype, opts, Some(stop))
    }
    fn elements<I: IndexElem>(
        &self,
        dofs: &[I],
        per: usize,
        shape: [u64; 2],
        dtype: DType,
        opts: &AssembleOptions,
        stop: &AtomicBool,
    ) -> coo_assembler::Result<Plan> {
        Plan::for_elements(dofs, per, shape, dtype, opts, Some(stop))
    }
}

fn cols_of<'py, I: IndexElem + NpElement, P: Planner>(
    py: Python<'py>,
    planner: &P,
    cols: &[Bound<'py, PyAny>],
    shape: &[u64],
    dtype: DType,
    opts: &AssembleOptions,
) -> PyResult<P::Out> {
    let mut borrowed = Vec::with_capacity(cols.len());
    for (d, c) in cols.iter().enumerate() {
        borrowed.push(slice_of::<I>(c, &format!("index array {d}"))?);
    }
    let dims: Vec<&[I]> = borrowed
        .iter()
        .map(|b| b.as_slice())
        .collect::<Result<_, _>>()?;
    let n = dims.first().map_or(0, |d| d.len());
    run_interruptible(py, n, |stop| {
        planner.arrays(&dims, shape, dtype, opts, stop)
    })
}

/// Plan the coordinates `cols` (one contiguous 1-D integer array per
/// dimension, all of one dtype) with `planner`.
pub(crate) fn plan_cols<'py, P: Planner>(
    py: Python<'py>,
    planner: &P,
    cols: &[Bound<'py, PyAny>],
    shape: &[u64],
    dtype: &str,
    kw: &Bound<'py, PyDict>,
) -> PyResult<P::Out> {
    let dtype = DType::parse(dtype).map_err(to_py)?;
    let opts = options(kw)?;
    let it = cols.first().map(dtype_of).unwrap_or_else(|| "int64".into());
    if cols.iter().any(|c| dtype_of(c) != it) {
        return Err(type_error(
            "the index arrays must all have one dtype".into(),
        ));
    }
    match it.as_str() {
        "int32" => cols_of::<i32, P>(py, planner, cols, shape, dtype, &opts),
        "int64" => cols_of::<i64, P>(py, planner, cols, shape, dtype, &opts),
        "uint32" => cols_of::<u32, P>(py, planner, cols, shape, dtype, &opts),
        "uint64" => cols_of::<u64, P>(py, planner, cols, shape, dtype, &opts),
        other => Err(type_error(format!(
            "index arrays must be int32, int64, uint32 or uint64, got {other}"
        ))),
    }
}

fn dofs_of<'py, I: IndexElem + NpElement, P: Planner>(
    py: Python<'py>,
    planner: &P,
    dofs: &Bound<'py, PyAny>,
    per: usize,
    shape: [u64; 2],
    dtype: DType,
    opts: &AssembleOptions,
) -> PyResult<P::Out> {
    let d = slice_of::<I>(dofs, "dofs")?;
    let s = d.as_slice()?;
    run_interruptible(py, s.len() * per, |stop| {
        planner.elements(s, per, shape, dtype, opts, stop)
    })
}

/// Plan the element matrices whose degrees of freedom are the rows of
/// `dofs` (a contiguous `(elements, k)` integer array) with `planner`.
pub(crate) fn plan_dofs<'py, P: Planner>(
    py: Python<'py>,
    planner: &P,
    dofs: &Bound<'py, PyAny>,
    shape: (u64, u64),
    dtype: &str,
    kw: &Bound<'py, PyDict>,
) -> PyResult<P::Out> {
    let dtype = DType::parse(dtype).map_err(to_py)?;
    let opts = options(kw)?;
    let arr = dofs
        .cast::<PyUntypedArray>()
        .map_err(|_| type_error("dofs must be a NumPy array".into()))?;
    if arr.ndim() != 2 {
        return Err(type_error(format!(
            "dofs must be a 2-D array (elements x dofs per element), got {} dimensions",
            arr.ndim()
        )));
    }
    let per = arr.shape()[1];
    let shape = [shape.0, shape.1];
    match dtype_of(dofs).as_str() {
        "int32" => dofs_of::<i32, P>(py, planner, dofs, per, shape, dtype, &opts),
        "int64" => dofs_of::<i64, P>(py, planner, dofs, per, shape, dtype, &opts),
        "uint32" => dofs_of::<u32, P>(py, planner, dofs, per, shape, dtype, &opts),
        "uint64" => dofs_of::<u64, P>(py, planner, dofs, per, shape, dtype, &opts),
        other => Err(type_error(format!(
            "dofs must be int32, int64, uint32 or uint64, got {other}"
        ))),
    }
}

/// `_native.plan_arrays(cols, shape, dtype, options)`: a plan of the
/// coordinates `cols` (one contiguous 1-D integer array per dimension,
/// all of one dtype).
#[pyfunction]
pub fn plan_arrays<'py>(
    py: Python<'py>,
    cols: Vec<Bound<'py, PyAny>>,
    shape: Vec<u64>,
    dtype: &str,
    kw: &Bound<'py, PyDict>,
) -> PyResult<NativePlan> {
    let plan = plan_cols(py, &InMemory, &cols, &shape, dtype, kw)?;
    Ok(NativePlan { plan })
}

/// `_native.plan_elements(dofs, shape, dtype, options)`: a plan of the
/// element matrices whose degrees of freedom are the rows of `dofs` (a
/// contiguous `(elements, k)` integer array).
#[pyfunction]
pub fn plan_elements<'py>(
    py: Python<'py>,
    dofs: &Bound<'py, PyAny>,
    shape: (u64, u64),
    dtype: &str,
    kw: &Bound<'py, PyDict>,
) -> PyResult<NativePlan> {
    let plan = plan_dofs(py, &InMemory, dofs, shape, dtype, kw)?;
    Ok(NativePlan { plan })
}

/// The NumPy dtype of a plan's values and results: the element type's,
/// but float32 for float16 and bfloat16, as `to_scipy` gives them (scipy's
/// sparse arrays refuse float16, NumPy has no bfloat16).
fn result_dtype(dtype: DType) -> &'static str {
    if dtype.is_narrow_float() {
        "float32"
    } else {
        dtype.numpy_name()
    }
}

/// A half-width refill (`H`: f16 or bf16) from float32 values into a
/// float32 result: the values a full assembly stores, widened (exactly).
/// The one refill that stages its result, 2 bytes per entry: there is no
/// NumPy half array in a scipy result to write into.
fn widened<H: OutValue + Into<f32>>(
    plan: &Plan,
    values: &[f32],
    out: &mut [f32],
    stop: Option<&AtomicBool>,
) -> coo_assembler::Result<()> {
    let mut v = Vec::new();
    v.try_reserve_exact(out.len())
        .map_err(|_| coo_assembler::Error::OutOfMemory {
            what: "the half-width result of a refill",
            bytes: out.len() as u64 * 2,
        })?;
    v.resize(out.len(), H::from_value(coo_assembler::Value::Float(0.0)));
    plan.assemble_into(values, &mut v, stop)?;
    for (o, &h) in out.iter_mut().zip(&v) {
        *o = h.into();
    }
    Ok(())
}

/// A refill of the library's: `Plan::assemble_into` (real and integer
/// values), `assemble_complex_into` or `assemble_bools_into`.
type Refill<T> = fn(&Plan, &[T], &mut [T], Option<&AtomicBool>) -> coo_assembler::Result<()>;

impl NativePlan {
    fn fill<'py, T: DirectValue + NpElement>(
        &self,
        py: Python<'py>,
        values: &Bound<'py, PyAny>,
        out: &Bound<'py, PyAny>,
        refill: Refill<T>,
    ) -> PyResult<()> {
        let v = slice_of::<T>(values, "values")?;
        let vs = v.as_slice()?;
        let o = out
            .cast::<PyArray1<T>>()
            .map_err(|_| type_error("out must be a 1-D array of the plan's dtype".into()))?;
        if !o.is_contiguous() {
            return Err(type_error("out must be a contiguous array".into()));
        }
        let mut w = o
            .try_readwrite()
            .map_err(|e| type_error(format!("out is not writeable: {e}")))?;
        let os = w.as_slice_mut()?;
        let plan = &self.plan;
        run_interruptible(py, vs.len(), |stop| refill(plan, vs, os, Some(stop)))
    }

    fn index_array<'py, J: OutIndex + NpElement>(
        &self,
        py: Python<'py>,
        pointers: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let v: Vec<J> = if pointers {
            self.plan.pointers().map_err(to_py)?
        } else {
            self.plan.indices().map_err(to_py)?
        };
        Ok(PyArray1::from_vec(py, v).into_any())
    }
}

#[pymethods]
impl NativePlan {
    /// Refill `out` (a contiguous 1-D array of the plan's dtype, one value
    /// per entry) with the assembly of `values` (a contiguous 1-D array of
    /// the same dtype, one value per contribution).
    fn assemble_into<'py>(
        &self,
        py: Python<'py>,
        values: &Bound<'py, PyAny>,
        out: &Bound<'py, PyAny>,
    ) -> PyResult<()> {
        let want = result_dtype(self.plan.dtype());
        let (vt, ot) = (dtype_of(values), dtype_of(out));
        if vt != want || ot != want {
            return Err(type_error(format!(
                "values and out must be {want} arrays for this plan, got {vt} and {ot}"
            )));
        }
        coo_assembler::with_element_type!(self.plan.dtype(), {
            float T => self.fill::<T>(py, values, out, Plan::assemble_into),
            narrow H => self.fill::<f32>(py, values, out, widened::<H>),
            int T => self.fill::<T>(py, values, out, Plan::assemble_into),
            complex C => self.fill::<C>(py, values, out, Plan::assemble_complex_into),
            bool _B => self.fill::<bool>(py, values, out, Plan::assemble_bools_into),
        })
    }

    /// The structure's indices (`pointers=False`) or pointers as a new
    /// array of `index_dtype` ("int32" or "int64").
    #[pyo3(signature = (pointers, index_dtype))]
    fn structure<'py>(
        &self,
        py: Python<'py>,
        pointers: bool,
        index_dtype: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        match index_dtype {
            "int32" => self.index_array::<i32>(py, pointers),
            _ => self.index_array::<i64>(py, pointers),
        }
    }

    /// Write the plan to `path` (a Hurray file, atomically).
    fn save(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<()> {
        py.detach(|| self.plan.save(&path)).map_err(to_py)
    }

    /// A plan read from `path`.
    #[staticmethod]
    fn load(py: Python<'_>, path: std::path::PathBuf) -> PyResult<NativePlan> {
        let plan = py.detach(|| Plan::load(&path)).map_err(to_py)?;
        Ok(NativePlan { plan })
    }

    /// A plan from the bytes of a plan file.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, bytes: Vec<u8>) -> PyResult<NativePlan> {
        let plan = py.detach(|| Plan::from_bytes(bytes)).map_err(to_py)?;
        Ok(NativePlan { plan })
    }

    /// The library's rule for values pushed to a refill: `pushed` so far
    /// and `more` now (see `Plan::check_pushed`).
    fn check_pushed(&self, pushed: usize, more: usize) -> PyResult<()> {
        self.plan.check_pushed(pushed, more).map_err(to_py)
    }

    #[getter]
    fn nnz(&self) -> usize {
        self.plan.nnz()
    }

    #[getter]
    fn contributions(&self) -> usize {
        self.plan.contributions()
    }

    #[getter]
    fn shape(&self) -> Vec<u64> {
        self.plan.shape().to_vec()
    }

    /// The NumPy dtype of the results' values (float32 for float16 and
    /// bfloat16).
    #[getter]
    fn dtype(&self) -> &'static str {
        result_dtype(self.plan.dtype())
    }

    /// The library's name of the tensor's element type ("bf16", "f64"...).
    #[getter]
    fn element_type(&self) -> &'static str {
        self.plan.dtype().name()
    }

    #[getter]
    fn layout(&self) -> String {
        self.plan.layout().to_string()
    }

    #[getter]
    fn memory_bytes(&self) -> u64 {
        self.plan.memory_bytes()
    }

    #[getter]
    fn digest(&self) -> u64 {
        self.plan.digest()
    }
}
