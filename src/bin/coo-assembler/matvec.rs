//! `coo-assembler matvec`: y = A x or A^T x, vectors in `.npy` or raw `.f64`.

use crate::names::named;
use crate::{open, pick_view, Pick};
use anyhow::Context;
use clap::Args;
use coo_assembler::matrix::{self, vector, Matrix, MatvecOptions, NonFiniteInput, Paging};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The options every command over a stored matrix takes (matvec, export,
/// spy), declared once so their names and help stay the same.
#[derive(Args)]
pub(crate) struct MatrixCommon {
    /// Page handling of the mapped file.
    #[arg(long, value_parser = named::<Paging>(), default_value = "auto")]
    pub(crate) paging: Paging,
    /// Print nothing on success.
    #[arg(short, long)]
    pub(crate) quiet: bool,
    #[command(flatten)]
    pub(crate) pick: Pick,
}

#[derive(Args)]
pub(crate) struct MatvecArgs {
    /// The Hurray file (a rank-2 tensor).
    file: PathBuf,
    /// The vector x: NumPy .npy (1-D, float or integer) or raw little-endian .f64.
    #[arg(long, value_name = "PATH")]
    x: PathBuf,
    /// Where to write y (.npy or .f64, by extension); replaced atomically.
    /// It may not be the matrix's file or x's.
    #[arg(long, value_name = "PATH")]
    out: PathBuf,
    /// Compute A^T x instead of A x.
    #[arg(long)]
    transpose: bool,
    /// Worker threads (default: one per core). The result is the same for any count.
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// NaN or infinity in x.
    #[arg(long, value_parser = named::<NonFiniteInput>(), default_value = "error")]
    non_finite: NonFiniteInput,
    #[command(flatten)]
    common: MatrixCommon,
}

pub(crate) fn run(a: MatvecArgs) -> anyhow::Result<ExitCode> {
    let x = vector::VectorFile::read(&a.x)?;
    let f = open(&a.file, false)?;
    let t = pick_view(&f, &a.common.pick)?;
    let m = Matrix::of_file(&f, Some(t.name()))?;
    let opts = MatvecOptions {
        threads: a.threads,
        non_finite: a.non_finite,
        paging: a.common.paging,
    };
    let t0 = Instant::now();
    let y = matrix::matvec(&m, x.values(), a.transpose, &opts)?;
    let secs = t0.elapsed().as_secs_f64();
    vector::write_product(&a.out, &y, &m, &x)
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    if !a.common.quiet {
        eprintln!(
            "{}: {} x {} matrix, nnz {}, {} values in {:.3} s -> {}",
            if a.transpose { "y = A^T x" } else { "y = A x" },
            m.rows(),
            m.cols(),
            m.nnz(),
            y.len(),
            secs,
            a.out.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
