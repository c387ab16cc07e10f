//! `_native.plan_to_file`, `plan_elements_to_file` and `refill_file`: the
//! library's [`coo_assembler::PlanFile`] (a plan kept in parts on disk,
//! planned and refilled within the memory budget) and
//! [`coo_assembler::refill_plan_file`] (either kind of plan file) behind
//! `coo_assembler.plan_to_file`, `plan_elements_to_file` and `refill_file`.
//! All run without the GIL; planning stops on Ctrl-C.

use coo_assembler::direct::IndexElem;
use coo_assembler::{DType, PlanFile, PlanFileSummary, RefillSummary, Vocabulary};
use numpy::{Element as NpElement, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::{Path, PathBuf};

use crate::builder::options;
use crate::direct::run_interruptible;
use crate::errors::to_py;
use crate::plan::{dtype_of, slice_of, type_error};

/// `(path, contributions, nnz, parts, bytes)` of a written plan file.
type Planned = (PathBuf, u64, u64, usize, u64);

fn planned(s: PlanFileSummary) -> Planned {
    (s.path, s.contributions, s.nnz, s.parts, s.bytes)
}

fn to_file_of<'py, I: IndexElem + NpElement>(
    py: Python<'py>,
    cols: &[Bound<'py, PyAny>],
    shape: &[u64],
    dtype: DType,
    path: &Path,
    opts: &coo_assembler::AssembleOptions,
) -> PyResult<PlanFileSummary> {
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
        PlanFile::create(&dims, shape, dtype, opts, path, Some(stop))
    })
}

/// `_native.plan_to_file(cols, shape, dtype, path, options)`: plan the
/// coordinates `cols` (contiguous 1-D arrays of one integer dtype) out of
/// core into the plan file `path`.
#[pyfunction]
pub fn plan_to_file<'py>(
    py: Python<'py>,
    cols: Vec<Bound<'py, PyAny>>,
    shape: Vec<u64>,
    dtype: &str,
    path: PathBuf,
    kw: &Bound<'py, PyDict>,
) -> PyResult<Planned> {
    let dtype = DType::parse(dtype).map_err(to_py)?;
    let opts = options(kw)?;
    let it = cols.first().map(dtype_of).unwrap_or_else(|| "int64".into());
    if cols.iter().any(|c| dtype_of(c) != it) {
        return Err(type_error(
            "the index arrays must all have one dtype".into(),
        ));
    }
    let s = match it.as_str() {
        "int32" => to_file_of::<i32>(py, &cols, &shape, dtype, &path, &opts),
        "int64" => to_file_of::<i64>(py, &cols, &shape, dtype, &path, &opts),
        "uint32" => to_file_of::<u32>(py, &cols, &shape, dtype, &path, &opts),
        "uint64" => to_file_of::<u64>(py, &cols, &shape, dtype, &path, &opts),
        other => Err(type_error(format!(
            "index arrays must be int32, int64, uint32 or uint64, got {other}"
        ))),
    }?;
    Ok(planned(s))
}

fn elements_to_file_of<'py, I: IndexElem + NpElement>(
    py: Python<'py>,
    dofs: &Bound<'py, PyAny>,
    per: usize,
    shape: [u64; 2],
    dtype: DType,
    path: &Path,
    opts: &coo_assembler::AssembleOptions,
) -> PyResult<PlanFileSummary> {
    let d = slice_of::<I>(dofs, "dofs")?;
    let s = d.as_slice()?;
    run_interruptible(py, s.len() * per, |stop| {
        PlanFile::create_for_elements(s, per, shape, dtype, opts, path, Some(stop))
    })
}

/// `_native.plan_elements_to_file(dofs, shape, dtype, path, options)`:
/// [`plan_to_file`] for element matrices (`dofs` a contiguous
/// `(elements, k)` integer array).
#[pyfunction]
pub fn plan_elements_to_file<'py>(
    py: Python<'py>,
    dofs: &Bound<'py, PyAny>,
    shape: (u64, u64),
    dtype: &str,
    path: PathBuf,
    kw: &Bound<'py, PyDict>,
) -> PyResult<Planned> {
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
    let s = match dtype_of(dofs).as_str() {
        "int32" => elements_to_file_of::<i32>(py, dofs, per, shape, dtype, &path, &opts),
        "int64" => elements_to_file_of::<i64>(py, dofs, per, shape, dtype, &path, &opts),
        "uint32" => elements_to_file_of::<u32>(py, dofs, per, shape, dtype, &path, &opts),
        "uint64" => elements_to_file_of::<u64>(py, dofs, per, shape, dtype, &path, &opts),
        other => Err(type_error(format!(
            "dofs must be int32, int64, uint32 or uint64, got {other}"
        ))),
    }?;
    Ok(planned(s))
}

/// `(path, contributions, nnz, bytes, layout, dtype, parts)` of a refill.
type Refilled = (PathBuf, u64, u64, u64, &'static str, &'static str, usize);

/// `_native.refill_file(plan, values, output, options)`: refill either kind
/// of plan file with the values file `values` (`.npy` or raw) into the
/// Hurray file `output`, within `options`' memory budget.
#[pyfunction]
pub fn refill_file(
    py: Python<'_>,
    plan: PathBuf,
    values: PathBuf,
    output: PathBuf,
    kw: &Bound<'_, PyDict>,
) -> PyResult<Refilled> {
    let opts = options(kw)?;
    let s: RefillSummary = py
        .detach(|| coo_assembler::refill_plan_file(&plan, &values, &output, &opts))
        .map_err(to_py)?;
    Ok((
        s.path,
        s.contributions,
        s.nnz,
        s.bytes,
        s.layout.name(),
        s.dtype.numpy_name(),
        s.parts,
    ))
}
