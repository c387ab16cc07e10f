//! Assembly options from Python: the keyword dict `Builder`, `assemble`
//! and the MPI package's `DistBuilder` take, parsed by the library's
//! vocabulary and size grammar, so Python accepts exactly what the library
//! and the CLI accept.

use std::path::PathBuf;

use coo_assembler::AssembleOptions;
use coo_assembler::options::{DuplicatePolicy, NonFinitePolicy, OutputLayout};
use coo_assembler::vocab::Vocabulary;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::{input_error, to_py};

/// Bytes in `size` (the library's grammar: `256MiB`, `1.5 GiB`, `1e9`, ...).
#[pyfunction]
pub fn parse_size(size: &str) -> PyResult<u64> {
    coo_assembler::vocab::parse_size(size).map_err(to_py)
}

/// `name` in the vocabulary `T`, as its canonical name (an error with the
/// library's message otherwise).
pub fn canonical<T: Vocabulary>(name: &str) -> PyResult<T> {
    T::parse(name).map_err(to_py)
}

/// The assembly options of a Python keyword dict (`Builder`'s and
/// `assemble`'s keywords, already spelled by the package): every name and
/// size parsed by the library's tables and grammar.
pub fn options(kw: &Bound<'_, PyDict>) -> PyResult<AssembleOptions> {
    let mut o = AssembleOptions::default();
    for (k, v) in kw.iter() {
        let key: String = k.extract()?;
        if v.is_none() {
            continue;
        }
        match key.as_str() {
            "memory_budget" => {
                o.memory_budget = match v.extract::<u64>() {
                    Ok(n) => n,
                    Err(_) => parse_size(&v.extract::<String>().map_err(|_| {
                        input_error(format!(
                            "memory_budget must be an int or a size string like '256MiB', got {v}"
                        ))
                    })?)?,
                }
            }
            "temp_dir" => o.temp_dir = Some(v.extract::<PathBuf>()?),
            "threads" => {
                // Any int reaches the library's check (one message for 0,
                // -1 and 10^6); a non-int is refused here.
                let n = v.extract::<i64>().map_err(|_| {
                    input_error(format!("threads must be an int in 1..=1024, got {v}"))
                })?;
                o.threads = usize::try_from(n)
                    .map_err(|_| to_py(coo_assembler::options::threads_out_of_range(n)))?;
            }
            "duplicates" => o.duplicates = canonical::<DuplicatePolicy>(&v.extract::<String>()?)?,
            "non_finite" => o.non_finite = canonical::<NonFinitePolicy>(&v.extract::<String>()?)?,
            "layout" => o.layout = canonical::<OutputLayout>(&v.extract::<String>()?)?,
            "mode_order" => o.mode_order = v.extract::<Option<Vec<usize>>>()?,
            "drop_zeros" => o.drop_zeros = v.is_truthy()?,
            "skip_negative" => o.skip_negative = v.is_truthy()?,
            "exact_sums" => o.exact_sums = v.is_truthy()?,
            "name" => o.tensor_name = v.extract::<String>()?,
            "expected_contributions" => o.expected_contributions = Some(v.extract::<u64>()?),
            other => return Err(input_error(format!("unknown option {other:?}"))),
        }
    }
    o.validate().map_err(to_py)?;
    Ok(o)
}
