//! The native reader: an open Hurray file and one tensor of it.

use std::path::PathBuf;

use coo_assembler::{
    DType, HurrayFile, Value, element::Element, read::CompressedTensor, read::CooTensor,
    read::ReadOptions, read::Tensor, read::TensorInfo,
};
use numpy::ndarray::{Array2, ArrayView1};
use numpy::{PyArray1, PyArray2};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::{input_error, raise, to_py};
use coo_assembler::ErrorKind;
use coo_assembler::matrix::memory;

/// A CSF tensor's levels as read-only views of the file: `(pos_L, crd_L)`.
type LevelViews<'py> = Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>;

/// Columns and entry positions of a CSC row.
type RowOfCsc<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<u64>>);

/// A NumPy array of a dtype known only at run time.
type Arr<'py> = Bound<'py, PyAny>;

/// An open file; `tensor` names the tensor all methods look at (none
/// chosen: a file of several tensors opened without a name, which lists
/// them).
#[pyclass(module = "coo_assembler._native", name = "File", frozen)]
pub struct NativeFile {
    file: HurrayFile,
    tensor: Option<String>,
}

impl NativeFile {
    /// The chosen tensor's name, or the error that says how to choose.
    fn name(&self) -> PyResult<&str> {
        self.tensor.as_deref().ok_or_else(|| {
            let list: Vec<String> = self
                .file
                .tensor_infos()
                .map(|t| format!("{:?} ({})", t.name(), t.layout_text()))
                .collect();
            input_error(format!(
                "the file holds {} tensors: {}; choose one with open(path, tensor=NAME)",
                list.len(),
                list.join(", ")
            ))
        })
    }

    /// The chosen tensor as the file lists it, whatever its layout.
    fn info(&self) -> PyResult<TensorInfo<'_>> {
        self.file.tensor_info(self.name()?).map_err(to_py)
    }

    /// The tensor, in a layout the reader serves.
    fn v(&self) -> PyResult<Tensor<'_>> {
        self.file.tensor_view(self.name()?).map_err(to_py)
    }

    /// The tensor for the operation `op`: a layout it does not serve is
    /// the error naming the layout and `op`.
    fn v_for(&self, op: &str) -> PyResult<Tensor<'_>> {
        self.file
            .tensor_view(self.name()?)
            .map_err(|e| to_py(e.for_op(op)))
    }

    /// The COO tensor (operations on the coordinate list); CSR/CSC callers
    /// go through [`NativeFile::v`] first.
    fn t(&self) -> PyResult<CooTensor<'_>> {
        self.file.tensor(self.name()?).map_err(to_py)
    }

    /// The CSR/CSC tensor, or an input error naming `what`.
    fn c(&self, what: &str) -> PyResult<CompressedTensor<'_>> {
        self.v()?
            .as_compressed()
            .ok_or_else(|| input_error(format!("{what} needs a CSR or CSC tensor")))
    }

    /// The tensor, its stored checksums checked first (once per open
    /// file, without the GIL): what every whole pass starts with, so that
    /// a damaged buffer is an `InvalidFileError` naming it, not wrong
    /// arrays.
    fn checked(&self, py: Python<'_>) -> PyResult<Tensor<'_>> {
        let t = self.v()?;
        py.detach(|| t.check_checksums()).map_err(to_py)?;
        Ok(t)
    }

    /// `work` (a whole pass) with the tensor's stored checksums checked,
    /// without the GIL. On the first pass the buffers are hashed on
    /// another thread while `work` runs (a damaged buffer is the error,
    /// whatever `work` found); later passes read the verdict.
    fn alongside_checksums<R: Send>(
        &self,
        py: Python<'_>,
        work: impl FnOnce() -> PyResult<R> + Send,
    ) -> PyResult<R> {
        let t = self.v()?;
        if t.checksum_hashes() > 0 || t.stored_checksums() == 0 {
            t.check_checksums().map_err(to_py)?;
            return py.detach(work);
        }
        let (sums, r) = py.detach(|| {
            std::thread::scope(|s| {
                let h = s.spawn(|| t.check_checksums());
                let r = work();
                // The hash cannot panic; keep the verdict of the pass if it did.
                (h.join().unwrap_or(Ok(())), r)
            })
        });
        sums.map_err(to_py)?;
        r
    }

    /// The open file and the tensor's name, for the operation `op` (for
    /// `matrix.rs`): a layout it does not serve is the error naming it.
    pub(crate) fn parts(&self, op: &str) -> PyResult<(&HurrayFile, &str)> {
        let name = self.v_for(op)?.name();
        Ok((&self.file, name))
    }
}

/// The tensor's values as a read-only NumPy view of the file's bytes; the
/// array keeps `owner` (the file) alive.
fn view_values<'py, T: Element + numpy::Element>(
    owner: &Bound<'py, NativeFile>,
    range: std::ops::Range<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let vals: &[T] = owner.get().v()?.values::<T>().map_err(to_py)?;
    borrowed(owner, &vals[range])
}

/// A read-only NumPy array over `vals`, memory of the file `owner` (its
/// map, or the bools it unpacked), which the array keeps alive.
fn borrowed<'py, T: numpy::Element>(
    owner: &Bound<'py, NativeFile>,
    vals: &[T],
) -> PyResult<Bound<'py, PyAny>> {
    let view = ArrayView1::from(vals);
    // SAFETY: the slice points into the file's memory map (or its aligned
    // heap copy), which is neither moved nor unmapped while the NativeFile
    // lives; the array holds a reference to it as its base object. The
    // array is made read-only below, as the map is.
    let arr = unsafe { PyArray1::<T>::borrow_from_array(&view, owner.clone().into_any()) };
    arr.getattr("flags")?.setattr("writeable", false)?;
    Ok(arr.into_any())
}

/// The values: a view of the mapped file, or for the floats narrower than
/// f32 that NumPy lacks (bfloat16) a float32 copy; float16 is NumPy's.
fn values_array<'py>(
    owner: &Bound<'py, NativeFile>,
    range: std::ops::Range<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let dtype = owner.get().v()?.dtype();
    let widened = || -> PyResult<Bound<'py, PyAny>> {
        let py = owner.py();
        let t = owner.get().v()?;
        let w = dtype.width();
        let b = t.values_bytes();
        let mut v: Vec<f32> =
            memory::try_with_capacity(range.len() as u64, "the float32 copy of the values")
                .map_err(to_py)?;
        v.extend(
            range
                .clone()
                .map(|i| dtype.decode(&b[i * w..i * w + w]).to_f64() as f32),
        );
        Ok(PyArray1::from_vec(py, v).into_any())
    };
    coo_assembler::with_element_type!(dtype, {
        float T => view_values::<T>(owner, range),
        narrow _H => match dtype {
            DType::F16 => {
                // half's f16 is NumPy's float16 for rust-numpy; the file's
                // values are the same bits.
                let vals = owner
                    .get()
                    .v()?
                    .values::<coo_assembler::element::F16>()
                    .map_err(to_py)?;
                let vals = &vals[range];
                // SAFETY: `half::f16` and `coo_assembler::element::F16` are both a
                // `#[repr(transparent)]` u16 of the binary16 bits, so the
                // slice has the same size, alignment and valid values.
                let same: &[half::f16] =
                    unsafe { std::slice::from_raw_parts(vals.as_ptr().cast(), vals.len()) };
                borrowed(owner, same)
            }
            _ => widened(),
        },
        int T => view_values::<T>(owner, range),
        complex T => view_values::<T>(owner, range),
        // The reader holds bools one byte each, 0 or 1: NumPy's bool.
        bool _B => {
            let bytes = owner.get().v()?.values_bytes();
            borrowed(owner, &bytes[range])?.call_method1("view", ("bool",))
        },
    })
}

fn value_to_py(py: Python<'_>, v: Value, dtype: DType) -> PyResult<Bound<'_, PyAny>> {
    Ok(match v {
        Value::UInt(u) if dtype == DType::Bool => {
            pyo3::types::PyBool::new(py, u != 0).to_owned().into_any()
        }
        Value::Float(f) => f.into_pyobject(py)?.into_any(),
        Value::Int(i) => i.into_pyobject(py)?.into_any(),
        Value::UInt(u) => u.into_pyobject(py)?.into_any(),
        Value::Complex(re, im) => pyo3::types::PyComplex::from_doubles(py, re, im).into_any(),
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

/// A stored coordinate that breaks the shape or the sorted order: the
/// file is damaged (open checks the structure, not the content).
fn damaged(p: usize, e: &[u64], rule: &str) -> PyErr {
    raise(
        ErrorKind::InvalidFile,
        format!("entry {p}: coordinate {e:?} {rule}; the file is damaged (run verify())"),
    )
}

/// Whether the sorted order of `t`'s coordinates must be checked entry by
/// entry: only when no stored checksum vouches for them. With checksums,
/// the pass runs beside their check, and a buffer that passes holds what
/// our writer wrote, in order (a failing one makes the pass an error); the
/// bounds are checked either way, so no damaged index drives an
/// allocation or an index past a buffer.
fn needs_order_check(t: &CooTensor<'_>) -> bool {
    t.stored_checksums() < 2
}

/// The error for entry `p` at `e`, outside `(nrows, ncols)` or out of order.
#[cold]
fn bad_coordinate(p: usize, e: &[u64], nrows: usize, ncols: usize) -> PyErr {
    if e[0] as usize >= nrows || e[1] as usize >= ncols {
        damaged(p, e, &format!("is outside the shape ({nrows}, {ncols})"))
    } else {
        damaged(p, e, "does not follow the previous one (is_sorted = 1)")
    }
}

/// CSR structure of a row-major sorted rank-2 COO: column indices and
/// row pointers. The values need no permutation. Every coordinate is
/// checked against the shape and the order before it is used: a damaged
/// row index can neither grow the pointers past `nrows + 1` nor (with
/// `order`) put an entry in the wrong row.
fn csr_structure<I: SpIndex>(
    indices: &[u64],
    nrows: usize,
    ncols: usize,
    order: bool,
) -> PyResult<(Vec<I>, Vec<I>)> {
    let nnz = indices.len() / 2;
    let mut cols = memory::try_with_capacity(nnz as u64, "the column indices of a CSR matrix")
        .map_err(to_py)?;
    let mut indptr = memory::try_with_capacity(
        nrows as u64 + 1,
        "the row pointers (indptr) of a CSR matrix: rows + 1 entries",
    )
    .map_err(to_py)?;
    indptr.push(I::from_u64(0));
    let (nr, nc) = (nrows as u64, ncols as u64);
    if !order {
        // The checksums (checked beside this pass) vouch for the order:
        // only a row past those already closed costs a test, which also
        // bounds the pointers. The loop of the unchecked code it replaced.
        for (p, e) in indices.chunks_exact(2).enumerate() {
            let r = e[0];
            if r as usize >= indptr.len() {
                if r >= nr {
                    return Err(bad_coordinate(p, e, nrows, ncols));
                }
                while indptr.len() <= r as usize {
                    indptr.push(I::from_u64(p as u64));
                }
            }
            cols.push(I::from_u64(e[1]));
        }
        while indptr.len() <= nrows {
            indptr.push(I::from_u64(nnz as u64));
        }
        return Ok((cols, indptr));
    }
    let (mut pr, mut pc) = (0u64, 0u64);
    for (p, e) in indices.chunks_exact(2).enumerate() {
        let (r, c) = (e[0], e[1]);
        if p == 0 || r != pr {
            // A new row: inside the shape (this bounds the pointers), and
            // after the previous one.
            if r >= nr || (order && r < pr) {
                return Err(bad_coordinate(p, e, nrows, ncols));
            }
            // Close every row before this entry's row (at most nrows in all).
            while indptr.len() <= r as usize {
                indptr.push(I::from_u64(p as u64));
            }
            pr = r;
        } else if order && c <= pc {
            return Err(bad_coordinate(p, e, nrows, ncols));
        }
        if order && c >= nc {
            return Err(bad_coordinate(p, e, nrows, ncols));
        }
        pc = c;
        cols.push(I::from_u64(c));
    }
    while indptr.len() <= nrows {
        indptr.push(I::from_u64(nnz as u64));
    }
    Ok((cols, indptr))
}

/// Row indices, column pointers, and the permutation to apply to values.
type Csc<I> = (Vec<I>, Vec<I>, Vec<u64>);

/// CSC of a row-major sorted rank-2 COO by a counting sort on columns:
/// row indices, column pointers and the permutation to apply to values.
/// Rows come out increasing within each column (the scan is row-major).
fn csc_structure<I: SpIndex>(
    indices: &[u64],
    nrows: usize,
    ncols: usize,
    order: bool,
) -> PyResult<Csc<I>> {
    let nnz = indices.len() / 2;
    let mut start: Vec<u64> = memory::try_filled(
        ncols as u64 + 1,
        0,
        "the column pointers (indptr) of a CSC matrix: columns + 1 entries",
    )
    .map_err(to_py)?;
    let (nr, nc) = (nrows as u64, ncols as u64);
    let (mut pr, mut pc) = (0u64, 0u64);
    for (p, e) in indices.chunks_exact(2).enumerate() {
        // Open checks structure, not content: a damaged file must not panic.
        let (r, c) = (e[0], e[1]);
        let ordered = !order || p == 0 || r > pr || (r == pr && c > pc);
        if r >= nr || c >= nc || !ordered {
            return Err(bad_coordinate(p, e, nrows, ncols));
        }
        (pr, pc) = (r, c);
        start[c as usize + 1] += 1;
    }
    for c in 0..ncols {
        start[c + 1] += start[c];
    }
    let indptr: Vec<I> = memory::try_map(&start, "the column pointers of a CSC matrix", |&s| {
        I::from_u64(s)
    })
    .map_err(to_py)?;
    let mut rows = memory::try_filled(
        nnz as u64,
        I::from_u64(0),
        "the row indices of a CSC matrix",
    )
    .map_err(to_py)?;
    let mut perm = memory::try_filled(nnz as u64, 0u64, "the value permutation of a CSC matrix")
        .map_err(to_py)?;
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
                let opts = ReadOptions {
                    in_memory,
                    ..ReadOptions::default()
                };
                HurrayFile::open_with(&path, opts)
            })
            .map_err(to_py)?;
        // Any layout opens (a dense tensor lists its layout, shape and
        // type); a file of several tensors opened without a name lists them.
        let tensor = match tensor {
            Some(name) => Some(file.tensor_info(&name).map_err(to_py)?.name().to_string()),
            None => match file.only_tensor_info() {
                Ok(t) => Some(t.name().to_string()),
                Err(_) if file.tensor_count() > 1 => None,
                Err(e) => return Err(to_py(e)),
            },
        };
        Ok(NativeFile { file, tensor })
    }

    #[getter]
    fn tensor_name(&self) -> Option<String> {
        self.tensor.clone()
    }

    /// Every tensor of the file: name, layout (the spec's name, or the
    /// tag in hex), kind ("dense", "sparse"...; None for an unnamed tag),
    /// element type (the library's name, or the tag in hex), shape, and
    /// whether this package reads its entries.
    fn tensor_infos<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let items = self
            .file
            .tensor_infos()
            .map(|t| -> PyResult<Bound<'py, PyDict>> {
                let d = PyDict::new(py);
                d.set_item("name", t.name())?;
                d.set_item(
                    "layout",
                    t.layout().map_or(format!("0x{:02x}", t.layout_tag()), |l| {
                        l.name().to_string()
                    }),
                )?;
                d.set_item("kind", t.layout().map(|l| l.kind().name()))?;
                d.set_item(
                    "dtype",
                    t.dtype()
                        .map_or(format!("0x{:02x}", t.type_tag()), |d| d.name().to_string()),
                )?;
                d.set_item("shape", t.shape().to_vec())?;
                d.set_item("readable", t.is_served())?;
                Ok(d)
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, items)
    }

    /// Raise the error naming the layout when the tensor's is one `op`
    /// does not serve (the Python methods call it first).
    fn require(&self, op: &str) -> PyResult<()> {
        self.v_for(op).map(|_| ())
    }

    #[getter]
    fn tensor_names(&self) -> Vec<String> {
        self.file.tensor_names().map(str::to_string).collect()
    }

    #[getter]
    fn shape(&self) -> PyResult<Vec<u64>> {
        Ok(self.info()?.shape().to_vec())
    }

    /// The Hurray element type name: f64, f32, f16, bf16, i8, ..., u64; an
    /// element type this package does not read is an `InvalidFileError`.
    #[getter]
    fn dtype(&self) -> PyResult<&'static str> {
        let t = self.info()?;
        t.dtype().map(|d| d.name()).ok_or_else(|| {
            raise(
                ErrorKind::Unsupported,
                format!(
                    "tensor {:?} holds {}, which this package does not read",
                    t.name(),
                    t.dtype_text()
                ),
            )
        })
    }

    #[getter]
    fn nnz(&self) -> PyResult<u64> {
        Ok(self.v_for("nnz")?.nnz())
    }

    /// True when the entries are stored in row-major order without
    /// duplicates: a sorted COO tensor or a CSR matrix.
    #[getter]
    fn is_sorted(&self) -> PyResult<bool> {
        Ok(self.v()?.is_row_major())
    }

    /// "coo", "csr" or "csc"; for a tensor this package lists only, the
    /// spec's name ("row-major", ...) or the tag in hex.
    #[getter]
    fn layout(&self) -> PyResult<String> {
        let t = self.info()?;
        Ok(t.layout().map_or(format!("0x{:02x}", t.layout_tag()), |l| {
            l.name().to_string()
        }))
    }

    #[getter]
    fn file_bytes(&self) -> u64 {
        self.file.len()
    }

    /// The statistics section as a dict (with its computed_mask), or None.
    fn statistics<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let t = self.info()?;
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
        let v = self.v()?.get(&idx).map_err(to_py)?;
        value_to_py(py, v, self.v()?.dtype())
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

    /// `ttv(x, mode, output, kw)`: the tensor times the float64 vector `x`
    /// along `mode`, written to `output` with the assembly options `kw`
    /// (layout, mode_order, memory_budget, threads, temp_dir, drop_zeros),
    /// without the GIL; `(nnz, streamed, shape)`.
    fn ttv(
        &self,
        py: Python<'_>,
        x: numpy::PyReadonlyArray1<'_, f64>,
        mode: usize,
        output: PathBuf,
        kw: &Bound<'_, PyDict>,
    ) -> PyResult<(u64, bool, Vec<u64>)> {
        let opts = crate::options::options(kw)?;
        let t = self.v_for("ttv")?;
        let x = x.as_slice().map_err(|e| input_error(format!("x: {e}")))?;
        let s = py
            .detach(|| coo_assembler::ttv::ttv(&t, mode, x, &output, &opts))
            .map_err(to_py)?;
        Ok((s.nnz, s.streamed, s.shape))
    }

    /// A CSF tensor's levels: `(mode_order, [(pos_L, crd_L)...])`, each
    /// array a read-only uint64 view of the file (checksums checked
    /// first). Refused for any other layout, naming it.
    fn csf_levels<'py>(
        slf: &Bound<'py, Self>,
        py: Python<'py>,
    ) -> PyResult<(Vec<u32>, LevelViews<'py>)> {
        let me = slf.get();
        let t = me.checked(py)?;
        let Tensor::Csf(c) = t else {
            return Err(to_py(coo_assembler::Error::LayoutNotServed {
                tensor: t.name().to_string(),
                layout: format!("sparse {}", t.layout().to_string().to_uppercase()),
                op: "to_csf".into(),
                served: "CSF",
            }));
        };
        let mut levels = Vec::with_capacity(c.shape().len());
        for l in 0..c.shape().len() {
            levels.push((borrowed(slf, c.pos(l))?, borrowed(slf, c.crd(l))?));
        }
        Ok((c.mode_order().to_vec(), levels))
    }

    /// Values of entries `start..end`: a read-only view of the file.
    fn values_slice<'py>(
        slf: &Bound<'py, Self>,
        start: u64,
        end: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        let nnz = slf.get().v()?.nnz();
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
        let v = py
            .detach(|| memory::try_map(src, "a copy of coordinates", |&x| x as i64))
            .map_err(to_py)?;
        let a = Array2::from_shape_vec(((end - start) as usize, rank), v)
            .map_err(|e| input_error(e.to_string()))?;
        Ok(PyArray2::from_owned_array(py, a))
    }

    /// Coordinates as (rank, nnz) int64, one contiguous row per dimension
    /// (scipy's `coords`), deinterleaved (COO) or expanded from the
    /// pointers (CSR/CSC) without the GIL.
    fn coords_by_dim<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let t = self.checked(py)?;
        let (nnz, rank) = (t.nnz() as usize, t.rank());
        // Collected in place (the same allocation): int64 as scipy takes it.
        let v: Vec<i64> = py
            .detach(|| {
                t.coordinates_by_dimension()
                    .map(|w| w.into_iter().map(|x| x as i64).collect())
            })
            .map_err(to_py)?;
        let a = Array2::from_shape_vec((rank, nnz), v);
        Ok(PyArray2::from_owned_array(
            py,
            a.map_err(|e| input_error(e.to_string()))?,
        ))
    }

    /// The arrays of a CSR/CSC tensor as scipy takes them: (data, indices,
    /// indptr); data is a read-only view of the file, the indices and
    /// pointers int32 or int64 copies (scipy needs signed indices). The
    /// pointers are checked (ptr[0] = 0, non-decreasing, last = nnz), the
    /// indices against the shape: a damaged file is an error, not a
    /// scipy array that crashes later.
    fn compressed_parts<'py>(
        slf: &Bound<'py, Self>,
        index64: bool,
    ) -> PyResult<(Arr<'py>, Arr<'py>, Arr<'py>)> {
        let py = slf.py();
        slf.get().checked(py)?;
        let c = slf.get().c("compressed_parts")?;
        let minor_extent = c.shape()[1 - c.major_dim()];
        let (ptr, minor) = (c.pointers(), c.indices());
        let nnz = c.nnz();
        let bad_ptr = ptr.first() != Some(&0)
            || ptr.last() != Some(&nnz)
            || ptr.windows(2).any(|w| w[0] > w[1]);
        if bad_ptr {
            return Err(raise(
                ErrorKind::InvalidFile,
                format!(
                    "{} of tensor {:?} is damaged; run verify()",
                    c.pointers_name(),
                    c.name()
                ),
            ));
        }
        if let Some(p) = minor.iter().position(|&k| k >= minor_extent) {
            return Err(raise(
                ErrorKind::InvalidFile,
                format!(
                    "entry {p}: index {} of {} is out of range; run verify()",
                    minor[p],
                    c.indices_name()
                ),
            ));
        }
        fn conv<'py, I: SpIndex>(py: Python<'py>, v: &[u64]) -> PyResult<Arr<'py>> {
            let out: Vec<I> = py
                .detach(|| memory::try_map(v, "a copy of indices or pointers", |&x| I::from_u64(x)))
                .map_err(to_py)?;
            Ok(PyArray1::from_vec(py, out).into_any())
        }
        let (ind, ptr) = if index64 {
            (conv::<i64>(py, minor)?, conv::<i64>(py, ptr)?)
        } else {
            (conv::<i32>(py, minor)?, conv::<i32>(py, ptr)?)
        };
        Ok((values_array(slf, 0..nnz as usize)?, ind, ptr))
    }

    /// Entries `start..end` of row `i` (CSR) or column `i` (CSC).
    fn lane_range(&self, i: i64) -> PyResult<(u64, u64)> {
        let i = to_u64_index(&[i], "row")?[0];
        let c = self.c("lane_range")?;
        let r = c.major_range(i).map_err(to_py)?;
        Ok((r.start, r.end))
    }

    /// Minor indices of entries `start..end` of a CSR/CSC tensor (int64).
    fn minor_slice<'py>(
        &self,
        py: Python<'py>,
        start: u64,
        end: u64,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let c = self.c("minor_slice")?;
        if start > end || end > c.nnz() {
            return Err(input_error(format!(
                "entries {start}..{end} are not within 0..{}",
                c.nnz()
            )));
        }
        let v = memory::try_map(
            &c.indices()[start as usize..end as usize],
            "a copy of minor indices",
            |&x| x as i64,
        )
        .map_err(to_py)?;
        Ok(PyArray1::from_vec(py, v))
    }

    /// Row `i` of a CSC matrix: (columns, positions of the entries), by a
    /// binary search in every column.
    fn csc_row<'py>(&self, py: Python<'py>, i: i64) -> PyResult<RowOfCsc<'py>> {
        let i = to_u64_index(&[i], "row")?[0];
        let c = self.c("csc_row")?;
        let rows = c.shape()[0];
        if i >= rows {
            return Err(input_error(format!(
                "row {i} is out of range (extent {rows})"
            )));
        }
        let found: PyResult<(Vec<i64>, Vec<u64>)> = py.detach(|| {
            let (mut cols, mut pos) = (Vec::new(), Vec::new());
            for j in 0..c.shape()[1] {
                if let Some(p) = c.find(&[i, j]).map_err(to_py)? {
                    cols.push(j as i64);
                    pos.push(p);
                }
            }
            Ok((cols, pos))
        });
        let (cols, pos) = found?;
        Ok((PyArray1::from_vec(py, cols), PyArray1::from_vec(py, pos)))
    }

    /// CSR arrays (data view, indices, indptr) of a sorted matrix.
    fn csr_parts<'py>(
        slf: &Bound<'py, Self>,
        index64: bool,
    ) -> PyResult<(Arr<'py>, Arr<'py>, Arr<'py>)> {
        let py = slf.py();
        let t = slf.get().t()?;
        let (nrows, ncols) = sorted_matrix(&t)?;
        let nnz = t.nnz() as usize;
        let src = t.indices();
        let me = slf.get();
        let order = needs_order_check(&t);
        let (cols, ptr) = if index64 {
            let (c, p) =
                me.alongside_checksums(py, || csr_structure::<i64>(src, nrows, ncols, order))?;
            (
                PyArray1::from_vec(py, c).into_any(),
                PyArray1::from_vec(py, p).into_any(),
            )
        } else {
            let (c, p) =
                me.alongside_checksums(py, || csr_structure::<i32>(src, nrows, ncols, order))?;
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
        let (nrows, ncols) = sorted_matrix(&t)?;
        let src = t.indices();
        let order = needs_order_check(&t);
        Ok(if index64 {
            let (r, p, perm) =
                self.alongside_checksums(py, || csc_structure::<i64>(src, nrows, ncols, order))?;
            (
                PyArray1::from_vec(py, r).into_any(),
                PyArray1::from_vec(py, p).into_any(),
                PyArray1::from_vec(py, perm),
            )
        } else {
            let (r, p, perm) =
                self.alongside_checksums(py, || csc_structure::<i32>(src, nrows, ncols, order))?;
            (
                PyArray1::from_vec(py, r).into_any(),
                PyArray1::from_vec(py, p).into_any(),
                PyArray1::from_vec(py, perm),
            )
        })
    }

    /// Test hook: buffers hashed by the checksum check since the file was
    /// opened (a second whole pass hashes none).
    fn _checksum_hashes(&self) -> PyResult<u64> {
        Ok(self.v()?.checksum_hashes())
    }

    /// How many of the tensor's buffers carry a stored xxh3 checksum (0
    /// for files of other writers, whose buffers no checksum guards).
    #[getter]
    fn stored_checksums(&self) -> PyResult<usize> {
        Ok(self.v()?.stored_checksums())
    }

    /// Content checks; each finding as a string (empty: the file is sound;
    /// "warning: " and "note: " lines leave it sound).
    /// A dense tensor's are its buffer's placement (checked at open) and
    /// its stored checksum, if any.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let name = self.name()?;
        let problems = py.detach(|| self.file.verify_tensor(name)).map_err(to_py)?;
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
