//! `_native.assemble_direct`: the in-memory path (issue 23) on NumPy
//! arrays, for measuring it (the Python `assemble` front end is wired to
//! it by the lead). The arrays are borrowed, never copied; the GIL is
//! released for the whole assembly; the result vectors become NumPy
//! arrays without a copy.

use coo_assembler::direct::{self, Assembled, IndexElem, OutIndex};
use coo_assembler::{parse_size, AssembleOptions, DuplicatePolicy, NonFinitePolicy, OutputLayout};
use numpy::{
    Element as NpElement, PyArray1, PyArrayMethods, PyReadonlyArray1, PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::errors::{input_error, to_py};

/// The three result arrays.
type Arrays<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>);

/// Borrow a contiguous 1-D array of `T`.
fn slice_of<'py, T: NpElement>(
    a: &Bound<'py, PyAny>,
    what: &str,
) -> PyResult<PyReadonlyArray1<'py, T>> {
    let arr = a.cast::<PyArray1<T>>().map_err(|_| {
        input_error(format!(
            "{what} must be a 1-D array of the same integer type as the other"
        ))
    })?;
    let r = arr
        .try_readonly()
        .map_err(|e| input_error(format!("{what}: {e}")))?;
    if !r.is_contiguous() {
        return Err(input_error(format!("{what} must be contiguous")));
    }
    Ok(r)
}

/// Assemble with index arrays of type `I` into index type `J`.
fn run<'py, I: IndexElem + NpElement, J: OutIndex + NpElement>(
    py: Python<'py>,
    values: &[f64],
    rows: &Bound<'py, PyAny>,
    cols: &Bound<'py, PyAny>,
    shape: [u64; 2],
    opts: &AssembleOptions,
    band_bytes: Option<u64>,
) -> PyResult<Arrays<'py>> {
    let r = slice_of::<I>(rows, "rows")?;
    let c = slice_of::<I>(cols, "cols")?;
    let (r, c) = (r.as_slice()?, c.as_slice()?);
    let Some(mut plan) = direct::plan(&shape, coo_assembler::DType::F64, values.len() as u64, opts)
    else {
        return Err(input_error(
            "this assembly does not fit the in-memory path".to_string(),
        ));
    };
    if let Some(b) = band_bytes {
        plan = plan.with_band_bytes(b);
    }
    let a: Option<Assembled<f64, J>> = py
        .detach(|| plan.assemble(&[r, c], values, None))
        .map_err(to_py)?;
    let a = a.ok_or_else(|| {
        input_error("a row holds more contributions than the budget allows".to_string())
    })?;
    Ok((
        PyArray1::from_vec(py, a.values).into_any(),
        PyArray1::from_vec(py, a.indices).into_any(),
        PyArray1::from_vec(py, a.pointers).into_any(),
    ))
}

/// `(data, indices, indptr)` of `coo_array((values, (rows, cols)), shape)`
/// assembled in memory (`layout` csr, csc, or coo: then `indices` holds
/// (row, col) pairs and `indptr` is empty). f64 values; rows and cols of
/// one type among int32, int64, uint32, uint64, contiguous. The result
/// indices are int32 when every index and nnz fit, int64 otherwise.
#[pyfunction]
#[pyo3(signature = (values, rows, cols, shape, *, layout="csr", memory_budget=None, threads=None, duplicates="sum", drop_zeros=false, exact_sums=true, non_finite="keep", band_bytes=None))]
#[allow(clippy::too_many_arguments)]
pub fn assemble_direct<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    rows: &Bound<'py, PyAny>,
    cols: &Bound<'py, PyAny>,
    shape: (u64, u64),
    layout: &str,
    memory_budget: Option<&Bound<'py, PyAny>>,
    threads: Option<usize>,
    duplicates: &str,
    drop_zeros: bool,
    exact_sums: bool,
    non_finite: &str,
    band_bytes: Option<u64>,
) -> PyResult<Arrays<'py>> {
    let v = slice_of::<f64>(values, "values")?;
    let v = v.as_slice()?;
    let mut opts = AssembleOptions {
        layout: layout.parse::<OutputLayout>().map_err(to_py)?,
        duplicates: duplicates.parse::<DuplicatePolicy>().map_err(to_py)?,
        drop_zeros,
        exact_sums,
        non_finite: match non_finite {
            "keep" => NonFinitePolicy::Keep,
            "reject_nan" => NonFinitePolicy::RejectNan,
            "reject_non_finite" => NonFinitePolicy::RejectNonFinite,
            other => return Err(input_error(format!("unknown non_finite policy {other:?}"))),
        },
        ..AssembleOptions::default()
    };
    if let Some(b) = memory_budget {
        opts.memory_budget = match b.extract::<u64>() {
            Ok(n) => n,
            Err(_) => parse_size(&b.extract::<String>()?).map_err(to_py)?,
        };
    }
    if let Some(t) = threads {
        opts.threads = t;
    }
    let shape = [shape.0, shape.1];
    let small = shape.iter().all(|&e| e <= i32::MAX as u64) && v.len() <= i32::MAX as usize;
    let dt = rows
        .cast::<numpy::PyUntypedArray>()
        .map(|a| a.dtype().to_string())
        .unwrap_or_default();
    macro_rules! go {
        ($i:ty) => {
            if small {
                run::<$i, i32>(py, v, rows, cols, shape, &opts, band_bytes)
            } else {
                run::<$i, i64>(py, v, rows, cols, shape, &opts, band_bytes)
            }
        };
    }
    match dt.as_str() {
        "int32" => go!(i32),
        "int64" => go!(i64),
        "uint32" => go!(u32),
        "uint64" => go!(u64),
        other => Err(input_error(format!(
            "rows and cols must be int32, int64, uint32 or uint64 arrays, got {other:?}"
        ))),
    }
}
