//! The native reader: an open Hurray file and one tensor of it.

use std::path::PathBuf;

use coo_assembler::{CooTensor, DType, Element, HurrayFile, Value};
use half::f16;
use numpy::ndarray::{Array2, ArrayView1};
use numpy::{PyArray1, PyArray2};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::{input_error, to_py};

/// A NumPy array of a dtype known only at run time.
type Arr<'py> = Bound<'py, PyAny>;

/// An open file; `tensor` names the tensor all methods look at.
#[pyclass(module = "coo_assembler._native", name = "File", frozen)]
pub struct NativeFile {
    file: HurrayFile,
    tensor: String,
}

impl NativeFile {
    fn t(&self) -> PyResult<CooTensor<'_>> {
        self.file.tensor(&self.tensor).map_err(to_py)
    }
}

/// The tensor's values as a read-only NumPy view of the file's bytes; the
/// array keeps `owner` (the file) alive.
fn view_values<'py, T: Element + numpy::Element>(
    owner: &Bound<'py, NativeFile>,
    range: std::ops::Range<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let t = owner.get().t()?;
    let vals: &[T] = t.values::<T>().map_err(to_py)?;
    let view = ArrayView1::from(&vals[range]);
    // SAFETY: the slice points into the file's memory map (or its aligned
    // heap copy), which is neither moved nor unmapped while the NativeFile
    // lives; the array holds a reference to it as its base object. The
    // array is made read-only below, as the map is.
    let arr = unsafe { PyArray1::<T>::borrow_from_array(&view, owner.clone().into_any()) };
    arr.getattr("flags")?.setattr("writeable", false)?;
    Ok(arr.into_any())
}

/// Copy of the values (bfloat16, which NumPy lacks, widened to float32).
fn values_array<'py>(
    owner: &Bound<'py, NativeFile>,
    range: std::ops::Range<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let dtype = owner.get().t()?.dtype();
    match dtype {
        DType::F64 => view_values::<f64>(owner, range),
        DType::F32 => view_values::<f32>(owner, range),
        DType::F16 => view_values::<f16>(owner, range),
        DType::I8 => view_values::<i8>(owner, range),
        DType::U8 => view_values::<u8>(owner, range),
        DType::I16 => view_values::<i16>(owner, range),
        DType::U16 => view_values::<u16>(owner, range),
        DType::I32 => view_values::<i32>(owner, range),
        DType::U32 => view_values::<u32>(owner, range),
        DType::I64 => view_values::<i64>(owner, range),
        DType::U64 => view_values::<u64>(owner, range),
        DType::BF16 => {
            let py = owner.py();
            let t = owner.get().t()?;
            let v: Vec<f32> = range.map(|i| t.value(i as u64).to_f64() as f32).collect();
            Ok(PyArray1::from_vec(py, v).into_any())
        }
    }
}

fn value_to_py(py: Python<'_>, v: Value) -> PyResult<Bound<'_, PyAny>> {
    Ok(match v {
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::UInt(u) => u.into_pyobject(py)?.into_any(),
    })
}

fn to_u64_index(idx: &[i64], what: &str) -> PyResult<Vec<u64>> {
    idx.iter()
        .map(|&i| {
            u64::try_from(i).map_err(|_| input_error(format!("{what}: index {i} is negative")))
        })
        .collect()
}

/// An integer type scipy accepts for sparse indices.
trait SpIndex: numpy::Element + Copy + Send + 'static {
    fn from_u64(v: u64) -> Self;
}
impl SpIndex for i32 {
    #[inline]
    fn from_u64(v: u64) -> Self {
        v as i32
    }
}
impl SpIndex for i64 {
    #[inline]
    fn from_u64(v: u64) -> Self {
        v as i64
    }
}

/// CSR structure of a row-major sorted rank-2 COO: column indices and
/// row pointers. The values need no permutation.
fn csr_structure<I: SpIndex>(indices: &[u64], nrows: usize) -> (Vec<I>, Vec<I>) {
    let nnz = indices.len() / 2;
    let mut cols = Vec::with_capacity(nnz);
    let mut indptr = Vec::with_capacity(nrows + 1);
    indptr.push(I::from_u64(0));
    for (p, e) in indices.chunks_exact(2).enumerate() {
        // Close every row before this entry's row.
        while indptr.len() <= e[0] as usize {
            indptr.push(I::from_u64(p as u64));
        }
        cols.push(I::from_u64(e[1]));
    }
    while indptr.len() <= nrows {
        indptr.push(I::from_u64(nnz as u64));
    }
    (cols, indptr)
}

/// Row indices, column pointers, and the permutation to apply to values.
type Csc<I> = (Vec<I>, Vec<I>, Vec<u64>);

/// CSC of a row-major sorted rank-2 COO by a counting sort on columns:
/// row indices, column pointers and the permutation to apply to values.
/// Rows come out increasing within each column (the scan is row-major).
fn csc_structure<I: SpIndex>(indices: &[u64], ncols: usize) -> Result<Csc<I>, String> {
    let nnz = indices.len() / 2;
    let mut start = vec![0u64; ncols + 1];
    for (p, e) in indices.chunks_exact(2).enumerate() {
        // Open checks structure, not content: a damaged file must not panic.
        match start.get_mut(e[1] as usize + 1) {
            Some(s) => *s += 1,
            None => {
                return Err(format!(
                    "entry {p}: column {} is out of range; run verify()",
                    e[1]
                ))
            }
        }
    }
    for c in 0..ncols {
        start[c + 1] += start[c];
    }
    let indptr: Vec<I> = start.iter().map(|&s| I::from_u64(s)).collect();
    let mut rows = vec![I::from_u64(0); nnz];
    let mut perm = vec![0u64; nnz];
    for (p, e) in indices.chunks_exact(2).enumerate() {
        let slot = &mut start[e[1] as usize];
        rows[*slot as usize] = I::from_u64(e[0]);
        perm[*slot as usize] = p as u64;
        *slot += 1;
    }
    Ok((rows, indptr, perm))
}

#[pymethods]
impl NativeFile {
    #[new]
    #[pyo3(signature = (path, tensor=None, in_memory=false))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        tensor: Option<String>,
        in_memory: bool,
    ) -> PyResult<Self> {
        let file = py
            .detach(|| {
                if in_memory {
                    HurrayFile::read_into_memory(&path)
                } else {
                    HurrayFile::open(&path)
                }
            })
            .map_err(to_py)?;
        let tensor = match tensor {
            Some(name) => file.tensor(&name).map_err(to_py)?.name().to_string(),
            None => file.only_tensor().map_err(to_py)?.name().to_string(),
        };
        Ok(NativeFile { file, tensor })
    }

    #[getter]
    fn tensor_name(&self) -> String {
        self.tensor.clone()
    }

    #[getter]
    fn tensor_names(&self) -> Vec<String> {
        self.file.tensor_names().map(str::to_string).collect()
    }

    #[getter]
    fn shape(&self) -> PyResult<Vec<u64>> {
        Ok(self.t()?.shape().to_vec())
    }

    /// The Hurray element type name: f64, f32, f16, bf16, i8, ..., u64.
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        Ok(self.t()?.dtype().name())
    }

    #[getter]
    fn nnz(&self) -> PyResult<u64> {
        Ok(self.t()?.nnz())
    }

    #[getter]
    fn is_sorted(&self) -> PyResult<bool> {
        Ok(self.t()?.is_sorted())
    }

    #[getter]
    fn file_bytes(&self) -> u64 {
        self.file.len()
    }

    /// The statistics section as a dict (with its computed_mask), or None.
    fn statistics<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let t = self.t()?;
        let Some(s) = t.statistics() else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("computed_mask", s.computed_mask)?;
        d.set_item("nnz", s.nnz)?;
        d.set_item("sparsity_ratio", s.sparsity_ratio)?;
        d.set_item("value_min", s.value_min)?;
        d.set_item("value_max", s.value_max)?;
        d.set_item("value_abs_max", s.value_abs_max)?;
        d.set_item("value_mean", s.value_mean)?;
        d.set_item("value_stddev", s.value_stddev)?;
        d.set_item("nm_n", s.nm_n)?;
        d.set_item("nm_m", s.nm_m)?;
        d.set_item("has_nan", s.has_nan)?;
        d.set_item("has_inf", s.has_inf)?;
        Ok(Some(d))
    }

    /// Value at `idx` (a zero of the tensor's type when not stored).
    fn get<'py>(&self, py: Python<'py>, idx: Vec<i64>) -> PyResult<Bound<'py, PyAny>> {
        let idx = to_u64_index(&idx, "get")?;
        let v = self.t()?.get(&idx).map_err(to_py)?;
        value_to_py(py, v)
    }

    /// Entries `start..end` of row `i` (prefix `[i]`) as positions.
    fn row_range(&self, i: i64) -> PyResult<(u64, u64)> {
        let i = to_u64_index(&[i], "row")?[0];
        let t = self.t()?;
        if let Some(&e) = t.shape().first() {
            if i >= e {
                return Err(input_error(format!("row {i} is out of range (extent {e})")));
            }
        }
        let r = t.prefix_range(&[i]).map_err(to_py)?;
        Ok((r.start, r.end))
    }

    /// Values of entries `start..end`: a read-only view of the file.
    fn values_slice<'py>(
        slf: &Bound<'py, Self>,
        start: u64,
        end: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let nnz = slf.get().t()?.nnz();
        if start > end || end > nnz {
            return Err(input_error(format!(
                "entries {start}..{end} are not within 0..{nnz}"
            )));
        }
        values_array(slf, start as usize..end as usize)
    }

    /// Coordinates of entries `start..end` as an int64 array (end-start, rank).
    fn coords_slice<'py>(
        &self,
        py: Python<'py>,
        start: u64,
        end: u64,
    ) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let t = self.t()?;
        let (nnz, rank) = (t.nnz(), t.rank());
        if start > end || end > nnz {
            return Err(input_error(format!(
                "entries {start}..{end} are not within 0..{nnz}"
            )));
        }
        let src = &t.indices()[start as usize * rank..end as usize * rank];
        let a = py.detach(|| {
            let v: Vec<i64> = src.iter().map(|&x| x as i64).collect();
            Array2::from_shape_vec(((end - start) as usize, rank), v)
        });
        let a = a.map_err(|e| input_error(e.to_string()))?;
        Ok(PyArray2::from_owned_array(py, a))
    }

    /// Coordinates as (rank, nnz) int64, one contiguous row per dimension
    /// (scipy's `coords`), deinterleaved without the GIL.
    fn coords_by_dim<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let t = self.t()?;
        let (nnz, rank) = (t.nnz() as usize, t.rank());
        let src = t.indices();
        let a = py.detach(|| {
            let mut v = vec![0i64; nnz * rank];
            for (p, e) in src.chunks_exact(rank.max(1)).enumerate() {
                for (d, &x) in e.iter().enumerate() {
                    v[d * nnz + p] = x as i64;
                }
            }
            Array2::from_shape_vec((rank, nnz), v)
        });
        let a = a.map_err(|e| input_error(e.to_string()))?;
        Ok(PyArray2::from_owned_array(py, a))
    }

    /// CSR arrays (data view, indices, indptr) of a sorted matrix.
    fn csr_parts<'py>(
        slf: &Bound<'py, Self>,
        index64: bool,
    ) -> PyResult<(Arr<'py>, Arr<'py>, Arr<'py>)> {
        let py = slf.py();
        let t = slf.get().t()?;
        let (nrows, nnz) = (sorted_matrix(&t)?.0, t.nnz() as usize);
        let src = t.indices();
        let (cols, ptr) = if index64 {
            let (c, p) = py.detach(|| csr_structure::<i64>(src, nrows));
            (
                PyArray1::from_vec(py, c).into_any(),
                PyArray1::from_vec(py, p).into_any(),
            )
        } else {
            let (c, p) = py.detach(|| csr_structure::<i32>(src, nrows));
            (
                PyArray1::from_vec(py, c).into_any(),
                PyArray1::from_vec(py, p).into_any(),
            )
        };
        Ok((values_array(slf, 0..nnz)?, cols, ptr))
    }

    /// CSC arrays (rows, indptr, permutation of the values) of a sorted matrix.
    fn csc_parts<'py>(
        &self,
        py: Python<'py>,
        index64: bool,
    ) -> PyResult<(Arr<'py>, Arr<'py>, Bound<'py, PyArray1<u64>>)> {
        let t = self.t()?;
        let ncols = sorted_matrix(&t)?.1;
        let src = t.indices();
        Ok(if index64 {
            let (r, p, perm) = py
                .detach(|| csc_structure::<i64>(src, ncols))
                .map_err(input_error)?;
            (
                PyArray1::from_vec(py, r).into_any(),
                PyArray1::from_vec(py, p).into_any(),
                PyArray1::from_vec(py, perm),
            )
        } else {
            let (r, p, perm) = py
                .detach(|| csc_structure::<i32>(src, ncols))
                .map_err(input_error)?;
            (
                PyArray1::from_vec(py, r).into_any(),
                PyArray1::from_vec(py, p).into_any(),
                PyArray1::from_vec(py, perm),
            )
        })
    }

    /// Content checks; each problem as a string (empty: the file is sound).
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let t = self.t()?;
        let problems = py.detach(|| t.verify());
        PyList::new(py, problems.iter().map(|p| p.to_string()))
    }
}

/// (rows, cols) of a rank-2 tensor whose entries are sorted row-major.
fn sorted_matrix(t: &CooTensor<'_>) -> PyResult<(usize, usize)> {
    let s = t.shape();
    if s.len() != 2 {
        return Err(input_error(format!(
            "CSR/CSC need a matrix; the tensor has rank {}",
            s.len()
        )));
    }
    if !t.is_sorted() {
        return Err(input_error(
            "the tensor is not sorted; convert its COO form instead",
        ));
    }
    let dim = |e: u64| {
        usize::try_from(e).map_err(|_| input_error(format!("extent {e} does not fit in memory")))
    };
    Ok((dim(s[0])?, dim(s[1])?))
}
