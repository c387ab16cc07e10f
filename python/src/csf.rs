//! CSF arrays in memory (Python's `CsfTensor`): the levels built from
//! sorted coordinates (`write::csf_levels`), and looked up and expanded
//! to coordinates through the library's one addressing rule
//! (`read::CsfLevels`), so an array-based tensor answers as a file does.

use coo_assembler::read::{CoordinatesError, CsfLevels, TreeFault, TreeWord};
use coo_assembler::write::{CoordWord, LevelWord};
use numpy::{Element as NpElement, PyArray1, PyArrayMethods, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::direct::contiguous;
use crate::errors::to_py;

/// A CSF tensor's levels as NumPy arrays: `(pos_L, crd_L)` per level.
type LevelArrays<'py, W> = Vec<(Bound<'py, PyArray1<W>>, Bound<'py, PyArray1<W>>)>;

/// `_native.csf_levels(indices, rank, mode_order)`: the CSF levels
/// `[(pos_L, crd_L)...]` of the entries whose coordinates `indices` holds
/// (`rank` per entry, in increasing mode order; uint32 or uint64), built
/// without the GIL by the library's `write::csf_levels`: uint32 arrays
/// from uint32 coordinates (their count fitting it), else uint64.
#[pyfunction]
pub fn csf_levels<'py>(
    py: Python<'py>,
    indices: &Bound<'py, PyAny>,
    rank: usize,
    mode_order: Vec<usize>,
) -> PyResult<Bound<'py, PyList>> {
    fn arrays<'py, I: CoordWord + NpElement, W: LevelWord + NpElement>(
        py: Python<'py>,
        ix: &[I],
        rank: usize,
        order: &[usize],
    ) -> PyResult<Bound<'py, PyList>> {
        let levels = py
            .detach(|| coo_assembler::write::csf_levels::<I, W>(ix, rank, order))
            .map_err(to_py)?;
        let arrays: LevelArrays<'py, W> = levels
            .into_iter()
            .map(|(p, c)| (PyArray1::from_vec(py, p), PyArray1::from_vec(py, c)))
            .collect();
        PyList::new(py, arrays)
    }
    if let Some(a) = contiguous::<u32>(indices) {
        let r = a.readonly();
        let ix = r.as_slice()?;
        if (ix.len() as u64) < u64::from(u32::MAX) {
            return arrays::<u32, u32>(py, ix, rank, &mode_order);
        }
        return arrays::<u32, u64>(py, ix, rank, &mode_order);
    }
    let Some(a) = contiguous::<u64>(indices) else {
        return Err(pyo3::exceptions::PyTypeError::new_err(
            "csf_levels takes a contiguous uint32 or uint64 array",
        ));
    };
    let r = a.readonly();
    arrays::<u64, u64>(py, r.as_slice()?, rank, &mode_order)
}

/// The levels of a `CsfTensor`, borrowed: its `pos` and `crd` arrays.
struct Borrowed<'py, W: NpElement> {
    pos: Vec<PyReadonlyArray1<'py, W>>,
    crd: Vec<PyReadonlyArray1<'py, W>>,
    order: Vec<usize>,
}

/// The slices of borrowed levels, which the library's rule reads.
struct Tree<'a, W> {
    pos: Vec<&'a [W]>,
    crd: Vec<&'a [W]>,
    order: &'a [usize],
}

impl<W: TreeWord> CsfLevels for Tree<'_, W> {
    type W = W;
    fn rank(&self) -> usize {
        self.order.len()
    }
    fn dim(&self, level: usize) -> usize {
        self.order[level]
    }
    fn pos_words(&self, level: usize) -> &[W] {
        self.pos.get(level).copied().unwrap_or(&[])
    }
    fn crd_words(&self, level: usize) -> &[W] {
        self.crd.get(level).copied().unwrap_or(&[])
    }
}

impl<'py, W: NpElement + TreeWord> Borrowed<'py, W> {
    /// The arrays when every one is a contiguous array of `W`, one pair
    /// per dimension of `order` (a permutation).
    fn of(
        pos: &[Bound<'py, PyAny>],
        crd: &[Bound<'py, PyAny>],
        order: &[usize],
    ) -> PyResult<Option<Self>> {
        let r = order.len();
        let mut seen = vec![false; r];
        if pos.len() != r
            || crd.len() != r
            || order
                .iter()
                .any(|&d| d >= r || std::mem::replace(&mut seen[d], true))
        {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "{} pos and {} crd arrays for the mode order {order:?}",
                pos.len(),
                crd.len()
            )));
        }
        let take = |v: &[Bound<'py, PyAny>]| -> Option<Vec<PyReadonlyArray1<'py, W>>> {
            v.iter()
                .map(|a| contiguous::<W>(a).map(|a| a.readonly()))
                .collect()
        };
        Ok(match (take(pos), take(crd)) {
            (Some(pos), Some(crd)) => Some(Borrowed {
                pos,
                crd,
                order: order.to_vec(),
            }),
            _ => None,
        })
    }

    fn tree(&self) -> PyResult<Tree<'_, W>> {
        fn slices<'a, 'py, W: NpElement>(
            v: &'a [PyReadonlyArray1<'py, W>],
        ) -> PyResult<Vec<&'a [W]>> {
            v.iter()
                .map(|a| a.as_slice().map_err(PyErr::from))
                .collect()
        }
        Ok(Tree {
            pos: slices(&self.pos)?,
            crd: slices(&self.crd)?,
            order: &self.order,
        })
    }
}

/// A broken tree as Python's error: its arrays were changed.
fn broken(f: TreeFault) -> PyErr {
    let what = match f {
        TreeFault::Pointers {
            level,
            node,
            detail,
        } => format!("pos[{level}] at node {node}: {detail}"),
        TreeFault::Twice { level, at, q } => {
            format!(
                "crd[{level}] holds {q} twice among siblings (nodes {at} and {})",
                at + 1
            )
        }
    };
    to_py(coo_assembler::Error::InvalidArgument(format!(
        "the CSF arrays are not a tree: {what}"
    )))
}

/// Run `f` on the tree of `pos`/`crd` (all uint32 or all uint64).
fn with_tree<'py, T>(
    pos: &[Bound<'py, PyAny>],
    crd: &[Bound<'py, PyAny>],
    order: &[usize],
    f32: impl FnOnce(&Tree<'_, u32>) -> PyResult<T>,
    f64: impl FnOnce(&Tree<'_, u64>) -> PyResult<T>,
) -> PyResult<T> {
    if let Some(b) = Borrowed::<u32>::of(pos, crd, order)? {
        return f32(&b.tree()?);
    }
    if let Some(b) = Borrowed::<u64>::of(pos, crd, order)? {
        return f64(&b.tree()?);
    }
    Err(pyo3::exceptions::PyTypeError::new_err(
        "the CSF arrays must be contiguous, all uint32 or all uint64",
    ))
}

/// `_native.csf_find(pos, crd, mode_order, idx)`: the leaf at `idx`
/// (dimension order, in bounds: the caller checks), or None.
#[pyfunction]
pub fn csf_find<'py>(
    pos: Vec<Bound<'py, PyAny>>,
    crd: Vec<Bound<'py, PyAny>>,
    mode_order: Vec<usize>,
    idx: Vec<u64>,
) -> PyResult<Option<u64>> {
    if idx.len() != mode_order.len() {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "{} indices for a tensor of rank {}",
            idx.len(),
            mode_order.len()
        )));
    }
    with_tree(
        &pos,
        &crd,
        &mode_order,
        |t| t.find_leaf(&idx, true).map_err(broken),
        |t| t.find_leaf(&idx, true).map_err(broken),
    )
}

/// `_native.csf_coords(pos, crd, mode_order)`: every leaf's coordinate,
/// uint64 of shape `(rank, nnz)` (dimension order, leaves in storage
/// order), from the pointers, without the GIL.
#[pyfunction]
pub fn csf_coords<'py>(
    py: Python<'py>,
    pos: Vec<Bound<'py, PyAny>>,
    crd: Vec<Bound<'py, PyAny>>,
    mode_order: Vec<usize>,
) -> PyResult<Bound<'py, PyArray1<u64>>> {
    fn expand<W: TreeWord + Sync>(py: Python<'_>, t: &Tree<'_, W>) -> PyResult<Vec<u64>>
    where
        for<'a> Tree<'a, W>: Sync,
    {
        py.detach(|| t.leaf_coordinates()).map_err(|e| match e {
            CoordinatesError::Fault(f) => broken(f),
            CoordinatesError::OutOfMemory(bytes) => to_py(coo_assembler::Error::OutOfMemory {
                what: "a CSF tensor's coordinates",
                bytes,
            }),
        })
    }
    let flat = with_tree(
        &pos,
        &crd,
        &mode_order,
        |t| expand(py, t),
        |t| expand(py, t),
    )?;
    Ok(PyArray1::from_vec(py, flat))
}
