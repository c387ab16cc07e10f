//! `coo_assembler._native`: the Rust half of the `coo_assembler` Python
//! package. The pure-Python half (`coo_assembler/__init__.py`) parses
//! arguments, normalises arrays and builds the scipy objects; this module
//! does the work with the GIL released.
//!
//! Only items re-exported at the root of the `coo_assembler` crate are used.

mod builder;
mod csf;
mod direct;
mod file;
mod matrix;
mod names;
mod plan;
mod plan_file;

use pyo3::prelude::*;
// The shared half (python/shared), under the names every module uses.
use pyshared::{arrays, errors, options};

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<builder::NativeBuilder>()?;
    m.add_class::<file::NativeFile>()?;
    matrix::register(m)?;
    names::register(m)?;
    m.add_function(wrap_pyfunction!(builder::check_temp_dir, m)?)?;
    m.add_function(wrap_pyfunction!(direct::assemble_arrays, m)?)?;
    m.add_function(wrap_pyfunction!(direct::assemble_file, m)?)?;
    m.add_function(wrap_pyfunction!(direct::assemble_arrays_to_file, m)?)?;
    m.add_function(wrap_pyfunction!(csf::csf_levels, m)?)?;
    m.add_function(wrap_pyfunction!(csf::csf_find, m)?)?;
    m.add_function(wrap_pyfunction!(csf::csf_coords, m)?)?;
    m.add_class::<plan::NativePlan>()?;
    m.add_function(wrap_pyfunction!(plan::plan_arrays, m)?)?;
    m.add_function(wrap_pyfunction!(plan::plan_elements, m)?)?;
    m.add_function(wrap_pyfunction!(plan_file::plan_to_file, m)?)?;
    m.add_function(wrap_pyfunction!(plan_file::plan_elements_to_file, m)?)?;
    m.add_function(wrap_pyfunction!(plan_file::refill_file, m)?)?;
    Ok(())
}
