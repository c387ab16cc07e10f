//! `_native.plan_to_file`, `plan_elements_to_file` and `refill_file`: the
//! library's [`coo_assembler::plan::PlanFile`] (a plan kept in parts on disk,
//! planned and refilled within the memory budget) and
//! [`coo_assembler::plan::refill_plan_file`] (either kind of plan file) behind
//! `coo_assembler.plan_to_file`, `plan_elements_to_file` and `refill_file`.
//! All run without the GIL; planning stops on Ctrl-C (the argument
//! handling is `crate::plan`'s, shared with plans held in memory).

use coo_assembler::internals::assemble::direct::IndexElem;
use coo_assembler::{
    AssembleOptions, DType, plan::PlanFile, plan::PlanFileSummary, plan::RefillSummary,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use crate::errors::to_py;
use crate::options::options;
use crate::plan::{Planner, plan_cols, plan_dofs};

/// Plans written to the plan file at the path.
struct ToFile<'a>(&'a Path);

impl Planner for ToFile<'_> {
    type Out = PlanFileSummary;
    fn arrays<I: IndexElem>(
        &self,
        dims: &[&[I]],
        shape: &[u64],
        dtype: DType,
        opts: &AssembleOptions,
        stop: &AtomicBool,
    ) -> coo_assembler::Result<PlanFileSummary> {
        PlanFile::create(dims, shape, dtype, opts, self.0, Some(stop))
    }
    fn elements<I: IndexElem>(
        &self,
        dofs: &[I],
        per: usize,
        shape: [u64; 2],
        dtype: DType,
        opts: &AssembleOptions,
        stop: &AtomicBool,
    ) -> coo_assembler::Result<PlanFileSummary> {
        PlanFile::create_for_elements(dofs, per, shape, dtype, opts, self.0, Some(stop))
    }
}

/// `(path, contributions, nnz, parts, bytes)` of a written plan file.
type Planned = (PathBuf, u64, u64, usize, u64);

fn planned(s: PlanFileSummary) -> Planned {
    (s.path, s.contributions, s.nnz, s.parts, s.bytes)
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
    plan_cols(py, &ToFile(&path), &cols, &shape, dtype, kw).map(planned)
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
    plan_dofs(py, &ToFile(&path), dofs, shape, dtype, kw).map(planned)
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
        .detach(|| coo_assembler::plan::refill_plan_file(&plan, &values, &output, &opts))
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
