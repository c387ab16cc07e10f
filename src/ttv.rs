//! Tensor-times-vector: `Y = T x_m x`, the tensor `T` of rank `r`
//! contracted with the vector `x` along mode `m`, a tensor of rank `r - 1`
//! (`Y[i without i_m] = sum over i_m of T[i] x[i_m]`), written as a Hurray
//! file in any layout, out of core.
//!
//! Each entry's product `T[i] x[i_m]` is rounded to f64 once, and the
//! products of one result entry are summed exactly and rounded once, so
//! the result does not depend on the order they meet in: the same bytes
//! by either path.
//! - **Along the leaf level of a CSF tensor** (the mode its tree stores
//!   last), whose other levels come in the result's order: every fibre is
//!   one result entry, summed as the walk meets it and written straight
//!   into the file, one pass over the buffers with their pages given back
//!   behind it (memory: the writer's buffers).
//! - **Otherwise** (another mode, a COO, CSR or CSC input): every product
//!   is pushed into a [`Builder`] for the result, which sums and sorts
//!   within the memory budget, spilling what does not fit.

use crate::assemble::builder::Builder;
use crate::assemble::exact::ExactSum;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::options::AssembleOptions;
use crate::read::Tensor;
use crate::write::{FileWriter, WriteOptions};
use std::path::{Path, PathBuf};

/// What [`ttv`] wrote.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TtvSummary {
    /// The file written.
    pub path: PathBuf,
    /// The result's shape: the input's without mode `m`.
    pub shape: Vec<u64>,
    /// Entries of the result.
    pub nnz: u64,
    /// Whether the fibres streamed straight into the file (CSF along its
    /// leaf level), rather than through the builder's sort.
    pub streamed: bool,
}

/// `Y = T x_mode x` written to `output` (see the [module docs](self)):
/// `opts` gives the result's layout (COO by default; CSR or CSC for a
/// matrix result, CSF with its mode order for rank 3 and up), the memory
/// budget, threads, temporary folder and `drop_zeros`; sums are always
/// exact. The input must have rank 2 or
/// more and a real element type; `x` one value per index of `mode`.
pub fn ttv(
    t: &Tensor<'_>,
    mode: usize,
    x: &[f64],
    output: &Path,
    opts: &AssembleOptions,
) -> Result<TtvSummary> {
    let shape = t.shape();
    let r = shape.len();
    if r < 2 {
        return Err(Error::InvalidArgument(format!(
            "tensor {:?} has rank {r}: a product with a vector along a mode needs rank 2 or more",
            t.name()
        )));
    }
    if mode >= r {
        return Err(Error::InvalidArgument(format!(
            "mode {mode} is not a dimension of tensor {:?} (rank {r}; modes count from 0)",
            t.name()
        )));
    }
    if x.len() as u64 != shape[mode] {
        return Err(Error::InvalidArgument(format!(
            "the vector has {} values; mode {mode} of tensor {:?} has extent {}",
            x.len(),
            t.name(),
            shape[mode]
        )));
    }
    if t.dtype().is_complex() || t.dtype().is_bool() {
        return Err(Error::Unsupported(format!(
            "tensor {:?} holds {} values; ttv takes real ones",
            t.name(),
            t.dtype()
        )));
    }
    let out_shape: Vec<u64> = (0..r).filter(|&d| d != mode).map(|d| shape[d]).collect();
    // Sums are exact on both paths, so that they give the same bytes.
    let opts = &AssembleOptions {
        exact_sums: true,
        duplicates: crate::options::DuplicatePolicy::Sum,
        ..opts.clone()
    };
    opts.validate()?;
    opts.check_layout(r - 1)?;
    if let Tensor::Csf(c) = t {
        let order: Vec<usize> = c.mode_order().iter().map(|&d| d as usize).collect();
        let rest: Vec<usize> = order[..r - 1].iter().map(|&d| out_dim(d, mode)).collect();
        if order[r - 1] == mode && rest == opts.storage_order(r - 1) {
            return streamed(t, mode, x, output, opts, &out_shape);
        }
    }
    let mut b = Builder::new(&out_shape, DType::F64, opts.clone())?;
    let mut y = vec![0u64; r - 1];
    t.try_for_each(|idx, v| {
        drop_mode(idx, mode, &mut y);
        b.push(&y, v.to_f64() * x[idx[mode] as usize])
    })?;
    let s = b.finish(output)?;
    Ok(TtvSummary {
        path: output.to_path_buf(),
        shape: out_shape,
        nnz: s.nnz,
        streamed: false,
    })
}

/// The CSF leaf-level path: one result entry per fibre, in order.
fn streamed(
    t: &Tensor<'_>,
    mode: usize,
    x: &[f64],
    output: &Path,
    opts: &AssembleOptions,
    out_shape: &[u64],
) -> Result<TtvSummary> {
    let Tensor::Csf(c) = t else {
        return Err(Error::Poisoned("ttv (a CSF view)"));
    };
    t.check_checksums_with(true)?;
    let wopts = WriteOptions {
        io: opts.io.clone(),
        ..WriteOptions::default()
    };
    let mut fw = FileWriter::create(output, wopts)?;
    let mut tw = fw.begin_tensor_in(
        &opts.tensor_name,
        DType::F64,
        out_shape,
        opts.layout,
        opts.mode_order.as_deref(),
    )?;
    let r = out_shape.len() + 1;
    let leaf = c.crd(r - 1);
    let f64s = (c.dtype() == DType::F64)
        .then(|| c.values::<f64>())
        .transpose()?;
    let mut y = vec![0u64; r - 1];
    c.try_for_each_fiber(|idx, leaves| {
        drop_mode(idx, mode, &mut y);
        let mut sum = ExactSum::new();
        for p in leaves.start as usize..leaves.end as usize {
            let v = match f64s {
                Some(v) => v[p],
                None => c.value(p as u64).to_f64(),
            };
            // In bounds: the walk checked the pointers, `verify` the
            // coordinates; a damaged one is an error, not a panic.
            let xi = leaf
                .get(p)
                .and_then(|&k| x.get(k as usize))
                .ok_or_else(|| {
                    Error::invalid(
                        format!("crd_{} of tensor {:?}", r - 1, c.name()),
                        0,
                        format!("leaf {p} is past the mode's extent {}; run verify", x.len()),
                    )
                })?;
            sum.add(v * xi);
        }
        let v = sum.round_f64();
        if opts.drop_zeros && v == 0.0 {
            return Ok(());
        }
        tw.push(&y, v)
    })?;
    let nnz = tw.finish()?.nnz;
    fw.finish()?;
    Ok(TtvSummary {
        path: output.to_path_buf(),
        shape: out_shape.to_vec(),
        nnz,
        streamed: true,
    })
}

/// The result's dimension of input dimension `d` (not `mode`).
fn out_dim(d: usize, mode: usize) -> usize {
    if d < mode { d } else { d - 1 }
}

/// `y`: the coordinate `idx` without its `mode` component.
#[inline]
fn drop_mode(idx: &[u64], mode: usize, y: &mut [u64]) {
    for (d, &i) in idx.iter().enumerate() {
        if d != mode {
            y[out_dim(d, mode)] = i;
        }
    }
}
