//! Products, exports and pictures of a stored matrix (`coo_assembler.matrix`
//! in the library), all with the GIL released.

use std::path::PathBuf;

use coo_assembler::element::Complex;
use coo_assembler::matrix::{
    self, Matrix, MatrixResult, MatvecOptions, NonFiniteInput, Paging, SpyOptions,
    export::ExportOptions, export::Format, export::NpzLayout,
};
use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{input_error, matrix_to_py};
use crate::file::NativeFile;
use crate::options::canonical;

/// The product `kernel` computes (real or complex), with the GIL released.
#[allow(clippy::too_many_arguments)]
fn product<'py, T: numpy::Element + Send + Sync>(
    py: Python<'py>,
    file: &Bound<'py, NativeFile>,
    x: PyReadonlyArray1<'py, T>,
    transpose: bool,
    threads: Option<usize>,
    allow_non_finite: bool,
    paging_mode: &str,
    kernel: impl FnOnce(&Matrix<'_>, &[T], bool, &MatvecOptions) -> MatrixResult<Vec<T>> + Send,
) -> PyResult<Bound<'py, PyArray1<T>>> {
    let (f, name) = file.get().parts("matvec")?;
    let xs = x.as_slice().map_err(|e| input_error(e.to_string()))?;
    let opts = MatvecOptions {
        threads,
        non_finite: if allow_non_finite {
            NonFiniteInput::Allow
        } else {
            NonFiniteInput::Error
        },
        paging: canonical::<Paging>(paging_mode)?,
    };
    let y = py
        .detach(|| kernel(&Matrix::of_file(f, Some(name))?, xs, transpose, &opts))
        .map_err(matrix_to_py)?;
    Ok(PyArray1::from_vec(py, y))
}

/// `A @ x` or `A.T @ x` as a new float64 array.
#[pyfunction]
#[pyo3(signature = (file, x, transpose=false, threads=None, allow_non_finite=false, paging_mode="auto"))]
fn matvec<'py>(
    py: Python<'py>,
    file: &Bound<'py, NativeFile>,
    x: PyReadonlyArray1<'py, f64>,
    transpose: bool,
    threads: Option<usize>,
    allow_non_finite: bool,
    paging_mode: &str,
) -> PyResult<Bound<'py, PyArray1<f64>>> {
    let kernel = matrix::matvec;
    product(
        py,
        file,
        x,
        transpose,
        threads,
        allow_non_finite,
        paging_mode,
        kernel,
    )
}

/// `A @ x` or `A.T @ x` with a complex128 x (a complex or real matrix) as
/// a new complex128 array.
#[pyfunction]
#[pyo3(signature = (file, x, transpose=false, threads=None, allow_non_finite=false, paging_mode="auto"))]
fn matvec_complex<'py>(
    py: Python<'py>,
    file: &Bound<'py, NativeFile>,
    x: PyReadonlyArray1<'py, Complex<f64>>,
    transpose: bool,
    threads: Option<usize>,
    allow_non_finite: bool,
    paging_mode: &str,
) -> PyResult<Bound<'py, PyArray1<Complex<f64>>>> {
    let kernel = matrix::matvec_complex;
    product(
        py,
        file,
        x,
        transpose,
        threads,
        allow_non_finite,
        paging_mode,
        kernel,
    )
}

/// Export to `path` as mtx, npz, petsc (a matrix or a rank-1 tensor) or
/// npy (a rank-1 tensor); returns {"entries", "bytes"}.
#[pyfunction]
#[pyo3(signature = (file, path, to, symmetric=false, npz_layout="auto", petsc_int64=false, reorder_memory=0, zip64_at=0))]
#[allow(clippy::too_many_arguments)]
fn export<'py>(
    py: Python<'py>,
    file: &Bound<'py, NativeFile>,
    path: PathBuf,
    to: &str,
    symmetric: bool,
    npz_layout: &str,
    petsc_int64: bool,
    reorder_memory: usize,
    zip64_at: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let (f, name) = file.get().parts("export")?;
    let format = canonical::<Format>(to)?;
    let npz_layout = canonical::<NpzLayout>(npz_layout)?;
    let opts = ExportOptions {
        symmetric,
        npz_layout,
        petsc_int64,
        paging: Paging::Auto,
        reorder_budget: reorder_memory,
        zip64_at,
    };
    let s = py
        .detach(|| matrix::export::export_file(f, Some(name), format, &path, &opts))
        .map_err(matrix_to_py)?;
    let d = PyDict::new(py);
    d.set_item("entries", s.entries)?;
    d.set_item("bytes", s.bytes)?;
    Ok(d)
}

/// Draw the sparsity pattern into the PNG `path`; returns the geometry.
#[pyfunction]
#[pyo3(signature = (file, path, size=1024))]
fn spy<'py>(
    py: Python<'py>,
    file: &Bound<'py, NativeFile>,
    path: PathBuf,
    size: u32,
) -> PyResult<Bound<'py, PyDict>> {
    let (f, name) = file.get().parts("spy")?;
    let opts = SpyOptions {
        size,
        ..SpyOptions::default()
    };
    let s = py
        .detach(|| matrix::spy(f, Some(name), &path, &opts))
        .map_err(matrix_to_py)?;
    let d = PyDict::new(py);
    d.set_item("width", s.width)?;
    d.set_item("height", s.height)?;
    d.set_item("origin", s.origin)?;
    d.set_item("plot", s.plot)?;
    d.set_item("per_block", s.per_block)?;
    d.set_item("zoom", s.zoom)?;
    d.set_item("max_count", s.max_count)?;
    d.set_item("caption", s.caption)?;
    d.set_item("bytes", s.bytes)?;
    Ok(d)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(matvec, m)?)?;
    m.add_function(wrap_pyfunction!(matvec_complex, m)?)?;
    m.add_function(wrap_pyfunction!(export, m)?)?;
    m.add_function(wrap_pyfunction!(spy, m)?)?;
    Ok(())
}
