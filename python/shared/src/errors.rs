//! Library errors as the Python exceptions of `coo_assembler._errors`.
//!
//! The class of an error is its kind's (`ErrorKind::python_class`, the
//! library's table); this module only looks the class up. The classes live
//! in Python (they inherit from both our base class and a builtin such as
//! `ValueError`, which PyO3's `create_exception!` cannot express).

use coo_assembler::matrix::MatrixError;
use coo_assembler::{Error, ErrorKind};
use pyo3::prelude::*;
use pyo3::types::PyType;

/// A Python exception of the class named `class` carrying `message`.
fn raise_class(class: &str, message: String) -> PyErr {
    Python::attach(|py| {
        let c = py
            .import("coo_assembler._errors")
            .and_then(|m| m.getattr(class))
            .and_then(|c| Ok(c.cast_into::<PyType>()?));
        match c {
            Ok(c) => PyErr::from_type(c, message),
            // Only when the package is broken; keep the message anyway.
            Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
        }
    })
}

/// A Python exception of the class for `kind`.
pub fn raise(kind: ErrorKind, message: String) -> PyErr {
    raise_class(kind.python_class(), message)
}

/// Shorthand for an argument error (`InputError`).
pub fn input_error(message: impl Into<String>) -> PyErr {
    raise(ErrorKind::Argument, message.into())
}

/// The base class: a builder used after finish or close.
pub fn state_error(message: impl Into<String>) -> PyErr {
    raise(ErrorKind::State, message.into())
}

/// A library error as a Python exception with the library's message.
pub fn to_py(e: Error) -> PyErr {
    // A file or folder that is not there: the class Python code catches
    // as FileNotFoundError (and still a StorageError).
    if let Error::Io { source, .. } = &e {
        if source.kind() == std::io::ErrorKind::NotFound {
            return raise_class("StorageNotFoundError", e.to_string());
        }
    }
    raise(e.kind(), e.to_string())
}

/// A matrix error as a Python exception.
pub fn matrix_to_py(e: MatrixError) -> PyErr {
    raise(e.kind(), e.to_string())
}

/// Test hook: raise the library's sample error number `i` (see
/// `Error::samples`), or return the number of samples for `i < 0`.
#[pyfunction]
pub fn _raise_sample(i: i64) -> PyResult<usize> {
    let samples = Error::samples();
    match usize::try_from(i)
        .ok()
        .and_then(|i| samples.into_iter().nth(i))
    {
        Some(e) => Err(to_py(e)),
        None => Ok(Error::samples().len()),
    }
}

/// Test hook: the class name and kind name each sample maps to.
#[pyfunction]
pub fn _sample_kinds() -> Vec<(String, &'static str)> {
    Error::samples()
        .iter()
        .map(|e| (e.kind().name().to_string(), e.kind().python_class()))
        .collect()
}
