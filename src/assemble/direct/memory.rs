//! One door to a result in memory, whatever the size of the work (issue
//! 40): the kernel when the work fits the budget; otherwise the builder,
//! out of core, into a file in a private temporary folder that is read
//! back into the same arrays and removed. The front ends (Python's
//! `assemble`) call [`assemble_in_memory`] or
//! [`assemble_complex_in_memory`] and never choose a path themselves; both
//! paths give the same values, bit for bit.

use crate::assemble::direct::out::{OutIndex, room};
use crate::assemble::direct::stream::arrays_to_file;
use crate::assemble::direct::{
    Assembled, ComplexOut, DirectPlan, DirectValue, IndexElem, OutValue, plan,
};
use crate::element::{DType, Element};
use crate::error::{Error, Result};
use crate::fs::names::spill_dir_prefix;
use crate::options::AssembleOptions;
use crate::read::release::physical_memory;
use crate::read::{HurrayFile, ReadOptions, Tensor};
use std::sync::atomic::AtomicBool;

/// The tensor of `shape` and `dtype` assembled from the caller's index
/// arrays (one per dimension) and values, as arrays in `opts.layout`: the
/// in-memory kernel when the work fits `opts.memory_budget`, else the
/// builder through a temporary file in `opts.temp_dir`. `stop`, once set,
/// makes it return [`Error::Stopped`] soon, leaving nothing behind.
pub fn assemble_in_memory<I, V, O, J>(
    shape: &[u64],
    dtype: DType,
    indices: &[&[I]],
    values: &[V],
    opts: &AssembleOptions,
    stop: Option<&AtomicBool>,
) -> Result<Assembled<O, J>>
where
    I: IndexElem,
    V: DirectValue,
    O: OutValue,
    J: OutIndex,
{
    let kernel = |p: &DirectPlan| p.assemble(indices, values, stop);
    one_door(shape, dtype, indices, values, opts, stop, kernel)
}

/// [`assemble_in_memory`] for a complex tensor (each part summed on its
/// own, as the builder does).
pub fn assemble_complex_in_memory<I, V, O, J>(
    shape: &[u64],
    dtype: DType,
    indices: &[&[I]],
    values: &[V],
    opts: &AssembleOptions,
    stop: Option<&AtomicBool>,
) -> Result<Assembled<O, J>>
where
    I: IndexElem,
    V: DirectValue,
    O: ComplexOut,
    J: OutIndex,
{
    let kernel = |p: &DirectPlan| p.assemble_complex(indices, values, stop);
    one_door(shape, dtype, indices, values, opts, stop, kernel)
}

/// The kernel through `kernel` when the plan takes the work and the
/// kernel does not decline it; the builder otherwise.
fn one_door<I, V, O, J>(
    shape: &[u64],
    dtype: DType,
    indices: &[&[I]],
    values: &[V],
    opts: &AssembleOptions,
    stop: Option<&AtomicBool>,
    kernel: impl FnOnce(&DirectPlan) -> Result<Option<Assembled<O, J>>>,
) -> Result<Assembled<O, J>>
where
    I: IndexElem,
    V: DirectValue,
    O: Element,
    J: OutIndex,
{
    if opts.layout == crate::options::OutputLayout::Csf {
        // The arrays of a result are COO's, CSR's or CSC's; CSF is a file.
        return Err(crate::error::Error::Unsupported(
            "an in-memory result holds coo, csr or csc arrays; assemble csf into a file".into(),
        ));
    }
    if let Some(p) = plan(shape, dtype, values.len() as u64, opts) {
        if let Some(a) = kernel(&p)? {
            return Ok(a);
        }
    }
    through_file(shape, dtype, indices, values, opts, stop)
}

/// The builder's path: the file written in a private folder (named as
/// spill folders are, so a killed process's is swept by the next
/// assembly), read back, and removed with the folder.
fn through_file<I, V, O, J>(
    shape: &[u64],
    dtype: DType,
    indices: &[&[I]],
    values: &[V],
    opts: &AssembleOptions,
    stop: Option<&AtomicBool>,
) -> Result<Assembled<O, J>>
where
    I: IndexElem,
    V: DirectValue,
    O: Element,
    J: OutIndex,
{
    // A result whose pointers alone outgrow the machine is refused before
    // anything is read or written.
    if opts.layout.is_compressed() {
        let extent = shape.get(opts.layout.major_dim()).copied().unwrap_or(0);
        let bytes = (u128::from(extent) + 1) * std::mem::size_of::<J>() as u128;
        if bytes > u128::from(physical_memory()) {
            return Err(Error::OutOfMemory {
                what: if opts.layout.major_dim() == 0 {
                    "the row pointers (indptr) of a CSR matrix: rows + 1 entries"
                } else {
                    "the column pointers (indptr) of a CSC matrix: columns + 1 entries"
                },
                bytes: u64::try_from(bytes).unwrap_or(u64::MAX),
            });
        }
    }
    let base = opts.checked_temp_dir()?;
    let dir = opts
        .io
        .tempdir_in(&base, &spill_dir_prefix(std::process::id()))?;
    let path = dir.path().join("assembled.hrry");
    let summary = arrays_to_file(shape, dtype, indices, values, &path, opts, stop)?;
    let file = HurrayFile::open_with_io(&path, ReadOptions::default(), &opts.io)?;
    let narrow = |v: &[u64], what: &'static str| -> Result<Vec<J>> {
        if let Some(&x) = v.iter().find(|&&x| x > J::MAX) {
            return Err(Error::InvalidArgument(format!(
                "{what} {x} does not fit the result's index type (at most {}): ask for 64-bit \
                 indices",
                J::MAX
            )));
        }
        let mut out = room(v.len(), what)?;
        out.extend(v.iter().map(|&x| J::from_u64(x)));
        Ok(out)
    };
    let (values, indices, pointers) = match file.only_tensor_view()? {
        Tensor::Coo(t) => (
            copied(t.values::<O>()?, "the values")?,
            narrow(t.indices(), "an index")?,
            Vec::new(),
        ),
        Tensor::Compressed(t) => (
            copied(t.values::<O>()?, "the values")?,
            narrow(t.indices(), "an index")?,
            narrow(t.pointers(), "a pointer")?,
        ),
        other => return Err(other.not_served("an in-memory result", "COO, CSR and CSC")),
    };
    Ok(Assembled {
        values,
        indices,
        pointers,
        dropped_zeros: summary.dropped_zeros,
        skipped_negative: summary.skipped_negative,
    })
}

/// A copy of `v`, allocated fallibly.
fn copied<T: Copy>(v: &[T], what: &'static str) -> Result<Vec<T>> {
    let mut out = room(v.len(), what)?;
    out.extend_from_slice(v);
    Ok(out)
}
