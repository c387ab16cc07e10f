//! `_native.assemble_arrays`: `coo_assembler.assemble`'s way into the
//! library's one door to an in-memory result (`direct::assemble_in_memory`:
//! the kernel when the work fits the budget, the builder out of core
//! otherwise; the library chooses). The caller's arrays are borrowed,
//! never copied; the GIL is released for the whole assembly; the result
//! vectors become NumPy arrays without a copy. Ctrl-C stops a long
//! assembly: the calling thread keeps the GIL between short sleeps and
//! checks for signals, and a pending one sets the library's stop flag.
//!
//! `None` means "not these arrays": a form the library does not read in
//! place (not contiguous 1-D arrays of one index type, values to convert,
//! an element type not compiled here); the package then uses the
//! `Builder`, which reads any form a chunk at a time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use coo_assembler::internals::assemble::direct::{
    self, Assembled, DirectValue, IndexElem, OutIndex,
};
use coo_assembler::options::AssembleOptions;
use coo_assembler::{DType, element::Bit, element::Element, vocab::Vocabulary};
use numpy::{
    Element as NpElement, PyArray1, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::to_py;
use crate::options::options;

/// The three result arrays.
type Arrays<'py> = (Bound<'py, PyAny>, Bound<'py, PyAny>, Bound<'py, PyAny>);

/// Contributions from which a call watches for Ctrl-C on a second thread
/// (below, a thread costs more than the whole call).
const WATCH_MIN: usize = 1 << 20;
/// How often the watching thread looks for a signal.
const WATCH_EVERY: Duration = Duration::from_millis(20);

/// A contiguous 1-D array of `T`, borrowed, or None when `a` is not one.
pub(crate) fn contiguous<'a, 'py, T: NpElement>(
    a: &'a Bound<'py, PyAny>,
) -> Option<&'a Bound<'py, PyArray1<T>>> {
    let arr = a.cast::<PyArray1<T>>().ok()?;
    arr.is_contiguous().then_some(arr)
}

/// `f` of the caller's index columns and values as slices, read in place;
/// `Ok(None)` when they are not contiguous arrays of `I` and `V`.
fn with_slices<'py, I: NpElement, V: NpElement, T>(
    cols: &[Bound<'py, PyAny>],
    values: &Bound<'py, PyAny>,
    f: impl FnOnce(&[&[I]], &[V]) -> PyResult<T>,
) -> PyResult<Option<T>> {
    let Some(borrowed) = cols
        .iter()
        .map(|c| contiguous::<I>(c).map(|a| a.readonly()))
        .collect::<Option<Vec<_>>>()
    else {
        return Ok(None);
    };
    let Some(v) = contiguous::<V>(values).map(|a| a.readonly()) else {
        return Ok(None);
    };
    let idx: Vec<&[I]> = borrowed
        .iter()
        .map(|b| b.as_slice())
        .collect::<Result<_, _>>()?;
    f(&idx, v.as_slice()?).map(Some)
}

/// Run `work` without the GIL; for long work, on a scoped thread while
/// this one checks for signals and, on one, sets `stop` and raises it.
pub(crate) fn run_interruptible<T: Send>(
    py: Python<'_>,
    n: usize,
    work: impl FnOnce(&AtomicBool) -> coo_assembler::Result<T> + Send,
) -> PyResult<T> {
    let stop = AtomicBool::new(false);
    if n < WATCH_MIN {
        return py.detach(|| work(&stop)).map_err(to_py);
    }
    watch_signals(
        py,
        || stop.store(true, Ordering::SeqCst),
        || work(&stop).map_err(to_py),
    )
}

/// Run `work` on a scoped thread without the GIL while this one checks
/// for signals; on one, call `stop` (the work then ends early, having
/// published nothing), wait for the work and raise the signal's error.
pub(crate) fn watch_signals<T: Send>(
    py: Python<'_>,
    stop: impl FnOnce(),
    work: impl FnOnce() -> PyResult<T> + Send,
) -> PyResult<T> {
    std::thread::scope(|s| {
        let h = s.spawn(work);
        loop {
            py.detach(|| {
                let deadline = std::time::Instant::now() + WATCH_EVERY;
                while !h.is_finished() && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            if h.is_finished() {
                break;
            }
            if let Err(e) = py.check_signals() {
                stop();
                // The work stops at its next chunk; nothing was written.
                let _ = py.detach(|| h.join());
                return Err(e);
            }
        }
        match py.detach(|| h.join()) {
            Ok(r) => r,
            Err(_) => Err(to_py(coo_assembler::Error::Poisoned(
                "in-memory assembly (a worker panicked)",
            ))),
        }
    })
}

/// One of the library's doors to an in-memory result:
/// `assemble_in_memory` (real values) or `assemble_complex_in_memory`.
type Entry<I, V, O, J> = fn(
    &[u64],
    DType,
    &[&[I]],
    &[V],
    &AssembleOptions,
    Option<&AtomicBool>,
) -> coo_assembler::Result<Assembled<O, J>>;

/// What an assembly is of: the shape, the element type, the options.
struct Work<'a> {
    shape: &'a [u64],
    dtype: DType,
    opts: &'a AssembleOptions,
}

/// The assembly with index arrays of `I`, values of `V` into `O`, indices
/// of `J`, through `entry`, the values handed to NumPy as `P` by
/// `to_numpy` (a bool tensor's `Bit`s become `bool`s); `Ok(None)` when
/// the arrays are not contiguous ones of these types.
fn run<'py, I, V, O, J, P>(
    py: Python<'py>,
    work: &Work<'_>,
    cols: &[Bound<'py, PyAny>],
    values: &Bound<'py, PyAny>,
    entry: Entry<I, V, O, J>,
    to_numpy: fn(Vec<O>) -> Vec<P>,
) -> PyResult<Option<Arrays<'py>>>
where
    I: IndexElem + NpElement,
    V: DirectValue + NpElement,
    O: Element,
    J: OutIndex + NpElement,
    P: NpElement,
{
    with_slices(cols, values, |idx, vs| {
        let a: Assembled<O, J> = run_interruptible(py, vs.len(), |stop| {
            entry(work.shape, work.dtype, idx, vs, work.opts, Some(stop))
        })?;
        Ok((
            PyArray1::from_vec(py, to_numpy(a.values)).into_any(),
            PyArray1::from_vec(py, a.indices).into_any(),
            PyArray1::from_vec(py, a.pointers).into_any(),
        ))
    })
}

/// The NumPy name of an array's dtype ("" when it is not an array).
fn dtype_name(a: &Bound<'_, PyAny>) -> String {
    a.cast::<PyUntypedArray>()
        .map(|a| a.dtype().to_string())
        .unwrap_or_default()
}

/// `(data, indices, indptr)` of `values` at the coordinates `cols` (one
/// 1-D array per dimension) assembled in memory into a tensor of `shape`
/// and element type `dtype` (a library name) with the options `kw`
/// (`Builder`'s), CSR/CSC indices of NumPy type `index_dtype` (int32 or
/// int64); for COO, `indices` holds the `rank` indices of every entry and
/// `indptr` is empty, whatever the size of the work (out of core in
/// `temp_dir` when it outgrows `memory_budget`). `None` when the arrays are
/// not a form read in place (see the module's comment).
#[pyfunction]
pub fn assemble_arrays<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    cols: Vec<Bound<'py, PyAny>>,
    shape: Vec<u64>,
    dtype: &str,
    index_dtype: &str,
    kw: &Bound<'py, PyDict>,
) -> PyResult<Option<Arrays<'py>>> {
    let dtype = DType::parse(dtype).map_err(to_py)?;
    let opts = options(kw)?;
    if cols.len() != shape.len() || cols.is_empty() {
        return Ok(None);
    }
    let work = Work {
        shape: &shape,
        dtype,
        opts: &opts,
    };
    let (it, vt) = (dtype_name(&cols[0]), dtype_name(values));
    if cols.iter().any(|c| dtype_name(c) != it) || vt != dtype.numpy_name() {
        // Mixed index types, or values to convert: the Builder's path.
        return Ok(None);
    }
    let wide = index_dtype == "int64";
    // Each index type with both result index types: `$v` values into
    // `$o` elements through `DirectPlan::$entry`, handed to NumPy as `$to`
    // makes them.
    macro_rules! by_index {
        ($v:ty, $o:ty, $entry:ident, $to:expr, [$($name:literal => $i:ty),*]) => {
            match (it.as_str(), wide) {
                $(
                    ($name, false) => {
                        run::<$i, $v, $o, i32, _>(py, &work, &cols, values, direct::$entry, $to)
                    }
                    ($name, true) => {
                        run::<$i, $v, $o, i64, _>(py, &work, &cols, values, direct::$entry, $to)
                    }
                )*
                _ => Ok(None),
            }
        };
        ($v:ty, $entry:ident) => {
            by_index!($v, $v, $entry, same, [
                "int32" => i32, "int64" => i64, "uint32" => u32, "uint64" => u64
            ])
        };
    }
    fn same<T>(v: Vec<T>) -> Vec<T> {
        v
    }
    // Patterns and graphs: the Bits (0 or 1) become NumPy bools.
    fn bools(v: Vec<Bit>) -> Vec<bool> {
        v.into_iter().map(bool::from).collect()
    }
    // The value types FE codes assemble; others take the Builder's path
    // (one instance of the kernel per type pair costs compile time).
    use num_complex::Complex;
    match dtype {
        DType::F64 => by_index!(f64, assemble_in_memory),
        DType::F32 => by_index!(f32, assemble_in_memory),
        DType::C128 => by_index!(Complex<f64>, assemble_complex_in_memory),
        DType::C64 => by_index!(Complex<f32>, assemble_complex_in_memory),
        DType::Bool => {
            by_index!(bool, Bit, assemble_in_memory, bools, ["int32" => i32, "int64" => i64])
        }
        _ => Ok(None),
    }
}

/// `_native.assemble_arrays_to_file(values, cols, shape, dtype, output,
/// options)`: the caller's arrays, read in place as `assemble_arrays`
/// reads them (float64 or float32 values, one index type), assembled into
/// the Hurray file `output` (the in-memory kernel when the work fits the
/// budget, else the builder), without the GIL and stopped by Ctrl-C; the
/// summary dict, or `None` for a form not read in place. The path of a
/// result that is a file, whatever its layout (CSF).
#[pyfunction]
pub fn assemble_arrays_to_file<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    cols: Vec<Bound<'py, PyAny>>,
    shape: Vec<u64>,
    dtype: &str,
    output: std::path::PathBuf,
    kw: &Bound<'py, PyDict>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let dtype = DType::parse(dtype).map_err(to_py)?;
    let opts = options(kw)?;
    if cols.len() != shape.len() || cols.is_empty() {
        return Ok(None);
    }
    let (it, vt) = (dtype_name(&cols[0]), dtype_name(values));
    if cols.iter().any(|c| dtype_name(c) != it) || vt != dtype.numpy_name() {
        return Ok(None);
    }
    fn go<'py, I: IndexElem + NpElement, V: DirectValue + NpElement>(
        py: Python<'py>,
        cols: &[Bound<'py, PyAny>],
        values: &Bound<'py, PyAny>,
        shape: &[u64],
        dtype: DType,
        output: &std::path::Path,
        opts: &coo_assembler::AssembleOptions,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        with_slices::<I, V, _>(cols, values, |idx, vs| {
            let s = run_interruptible(py, vs.len(), |stop| {
                direct::arrays_to_file(shape, dtype, idx, vs, output, opts, Some(stop))
            })?;
            crate::builder::summary_dict(py, &s)
        })
    }
    macro_rules! by_index {
        ($v:ty) => {
            match it.as_str() {
                "int32" => go::<i32, $v>(py, &cols, values, &shape, dtype, &output, &opts),
                "int64" => go::<i64, $v>(py, &cols, values, &shape, dtype, &output, &opts),
                "uint32" => go::<u32, $v>(py, &cols, values, &shape, dtype, &output, &opts),
                "uint64" => go::<u64, $v>(py, &cols, values, &shape, dtype, &output, &opts),
                _ => Ok(None),
            }
        };
    }
    match dtype {
        DType::F64 => by_index!(f64),
        DType::F32 => by_index!(f32),
        _ => Ok(None),
    }
}

/// `_native.assemble_file(path, output, format, shape, dtype, options)`:
/// the input file assembled into the Hurray file `output` as the CLI's
/// `assemble` does (`Source::assemble_to`: the in-memory kernel reading a
/// bin input in place when the work fits, else the builder), without the
/// GIL; returns the summary dict.
#[pyfunction]
#[pyo3(signature = (path, output, format, shape, dtype, kw))]
pub fn assemble_file<'py>(
    py: Python<'py>,
    path: std::path::PathBuf,
    output: std::path::PathBuf,
    format: Option<&str>,
    shape: Option<Vec<u64>>,
    dtype: Option<&str>,
    kw: &Bound<'py, PyDict>,
) -> PyResult<Bound<'py, PyDict>> {
    use crate::options::canonical;
    use coo_assembler::input::{InputFormat, Source};
    let format = format.map(canonical::<InputFormat>).transpose()?;
    let dtype = dtype.map(canonical::<DType>).transpose()?;
    let opts = options(kw)?;
    let s = py
        .detach(|| {
            Source::open(&path, format)?.assemble_to(&output, shape.as_deref(), dtype, opts, |_| {})
        })
        .map_err(to_py)?;
    crate::builder::summary_dict(py, &s)
}
