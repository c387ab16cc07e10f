//! The library's vocabulary and size grammar for the Python half: the
//! package parses every name and size through these, so Python accepts
//! exactly what the library and the CLI accept (numpy's dtype spellings
//! are resolved by numpy first, in `coo_assembler/__init__.py`).

use coo_assembler::input::InputFormat;
use coo_assembler::matrix::export::{Format, NpzLayout};
use coo_assembler::matrix::{NonFiniteInput, Paging};
use coo_assembler::vocab::Term;
use coo_assembler::{
    DType, options::DuplicatePolicy, options::NonFinitePolicy, options::OutputLayout,
    vocab::Vocabulary,
};
use pyo3::prelude::*;

use crate::errors::{input_error, to_py};
use crate::options::{canonical, parse_size};

fn rows<T: Vocabulary>() -> Vec<(&'static str, Vec<&'static str>, &'static str)> {
    T::TERMS
        .iter()
        .map(|t: &Term<T>| (t.name, t.aliases.to_vec(), t.help))
        .collect()
}

/// The table of the vocabulary `kind` as `(name, aliases, help)` rows.
#[pyfunction]
pub fn vocabulary(kind: &str) -> PyResult<Vec<(&'static str, Vec<&'static str>, &'static str)>> {
    Ok(match kind {
        "dtype" => rows::<DType>(),
        "layout" => rows::<OutputLayout>(),
        "duplicates" => rows::<DuplicatePolicy>(),
        "non_finite" => rows::<NonFinitePolicy>(),
        "input_format" => rows::<InputFormat>(),
        "export_format" => rows::<Format>(),
        "npz_layout" => rows::<NpzLayout>(),
        "paging" => rows::<Paging>(),
        "non_finite_input" => rows::<NonFiniteInput>(),
        other => return Err(input_error(format!("no vocabulary {other:?}"))),
    })
}

/// The canonical name of `name` in the vocabulary `kind` (any spelling
/// the library's table takes; its error names the choices otherwise).
#[pyfunction]
pub fn parse_name(kind: &str, name: &str) -> PyResult<&'static str> {
    fn name_of<T: Vocabulary>(s: &str) -> PyResult<&'static str> {
        Ok(canonical::<T>(s)?.name())
    }
    match kind {
        "dtype" => name_of::<DType>(name),
        "layout" => name_of::<OutputLayout>(name),
        "duplicates" => name_of::<DuplicatePolicy>(name),
        "non_finite" => name_of::<NonFinitePolicy>(name),
        "input_format" => name_of::<InputFormat>(name),
        "export_format" => name_of::<Format>(name),
        "npz_layout" => name_of::<NpzLayout>(name),
        "paging" => name_of::<Paging>(name),
        "non_finite_input" => name_of::<NonFiniteInput>(name),
        other => Err(input_error(format!("no vocabulary {other:?}"))),
    }
}

/// Every element type as `(library name, NumPy name)`.
#[pyfunction]
pub fn dtypes() -> Vec<(&'static str, &'static str)> {
    DType::TERMS
        .iter()
        .map(|t| (t.name, t.value.numpy_name()))
        .collect()
}

/// The library's name of the element type `name` (any spelling the
/// library's table takes).
#[pyfunction]
pub fn parse_dtype(name: &str) -> PyResult<&'static str> {
    Ok(canonical::<DType>(name)?.name())
}

/// Refuse a layout that cannot hold a tensor of `rank` (CSR and CSC hold
/// matrices), before any contribution is read; the library's rule and words.
#[pyfunction]
#[pyo3(signature = (layout, rank, mode_order=None))]
pub fn check_layout(layout: &str, rank: usize, mode_order: Option<Vec<usize>>) -> PyResult<()> {
    canonical::<OutputLayout>(layout)?
        .check_layout(rank, mode_order.as_deref())
        .map_err(to_py)
}

/// Refuse, before any contribution is read, a shape scipy cannot index:
/// its index arrays are int64, so an extent of 2^63 or more fails inside
/// scipy after the whole assembly.
#[pyfunction]
pub fn check_scipy_shape(shape: Vec<u64>) -> PyResult<()> {
    if let Some(d) = shape.iter().position(|&e| e > i64::MAX as u64) {
        return Err(to_py(coo_assembler::Error::InvalidShape {
            shape,
            detail: format!(
                "dimension {d} has an extent of 2^63 or more, which scipy's int64 indices \
                 cannot hold: assemble into a file instead (Builder.finish or \
                 assemble_file), which takes any extent below 2^64 - 1"
            ),
        }));
    }
    Ok(())
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_scipy_shape, m)?)?;
    m.add_function(wrap_pyfunction!(check_layout, m)?)?;
    m.add_function(wrap_pyfunction!(parse_size, m)?)?;
    m.add_function(wrap_pyfunction!(vocabulary, m)?)?;
    m.add_function(wrap_pyfunction!(dtypes, m)?)?;
    m.add_function(wrap_pyfunction!(parse_dtype, m)?)?;
    m.add_function(wrap_pyfunction!(parse_name, m)?)?;
    m.add_function(wrap_pyfunction!(crate::errors::_raise_sample, m)?)?;
    m.add_function(wrap_pyfunction!(crate::errors::_sample_kinds, m)?)?;
    Ok(())
}
