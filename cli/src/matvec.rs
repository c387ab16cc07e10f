//! `coo-assembler matvec`: y = A x or A^T x, vectors in `.npy` or raw `.f64`
//! (complex ones in `.npy`).

use crate::names::named;
use crate::{Pick, open, pick_view};
use anyhow::Context;
use clap::Args;
use coo_assembler::matrix::{self, Matrix, MatvecOptions, NonFiniteInput, Paging, vector};
use std::path::{Path, PathBuf};
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
    /// The vector x: NumPy .npy (1-D: bool, integer, float or complex),
    /// raw little-endian .f64, or a rank-1 dense tensor of a Hurray file as
    /// FILE.hrry:TENSOR (FILE.hrry alone when it holds one tensor).
    #[arg(long, value_name = "PATH")]
    x: PathBuf,
    /// Where to write y (.npy or .f64, by extension; a complex y, from a
    /// complex matrix or x, is complex128 .npy); replaced atomically. It
    /// may not be the matrix's file or x's.
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
    let x = read_x(&a.x)?;
    let f = open(&a.file, false)?;
    let t = pick_view(&f, &a.common.pick, "matvec")?;
    let m = Matrix::of_file(&f, Some(t.name()))?;
    let opts = MatvecOptions {
        threads: a.threads,
        non_finite: a.non_finite,
        paging: a.common.paging,
    };
    let complex = x.is_complex() || m.dtype().is_complex();
    // A refused output is refused before the product's time is spent.
    vector::check_product_output(&a.out, complex, &m, &x)
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    let t0 = Instant::now();
    let (len, secs) = if complex {
        let y = matrix::matvec_complex(&m, &x.complex_values()?, a.transpose, &opts)?;
        write_y(&a.out, &y, t0, &m, &x)?
    } else {
        let y = matrix::matvec(&m, x.values(), a.transpose, &opts)?;
        write_y(&a.out, &y, t0, &m, &x)?
    };
    if !a.common.quiet {
        eprintln!(
            "{}: {} x {} matrix, nnz {}, {} values in {:.3} s -> {}",
            if a.transpose { "y = A^T x" } else { "y = A x" },
            m.rows(),
            m.cols(),
            m.nnz(),
            len,
            secs,
            a.out.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Write y (real or complex) to `out`: its length and the seconds the
/// product took (from `t0`, before the write).
fn write_y<T: vector::VectorElement>(
    out: &Path,
    y: &[T],
    t0: Instant,
    m: &Matrix<'_>,
    x: &vector::VectorFile,
) -> anyhow::Result<(usize, f64)> {
    let secs = t0.elapsed().as_secs_f64();
    vector::write_product(out, y, m, x)
        .with_context(|| format!("cannot write {}", out.display()))?;
    Ok((y.len(), secs))
}

/// x from `--x`: a `.npy` or `.f64` file by its extension, else a
/// rank-1 dense tensor of a Hurray file, named `FILE:TENSOR` (the part
/// before the last `:` an existing file) or `FILE` alone for its only
/// tensor.
fn read_x(x: &Path) -> anyhow::Result<vector::VectorFile> {
    let ext = |p: &Path| {
        p.extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
    };
    if matches!(ext(x).as_deref(), Some("npy" | "f64")) || x.is_file() && !is_hurray(x) {
        return Ok(vector::VectorFile::read(x)?);
    }
    if x.is_file() {
        return Ok(vector::VectorFile::from_hurray(x, None)?);
    }
    if let Some((file, name)) = x.to_str().and_then(|s| s.rsplit_once(':')) {
        if Path::new(file).is_file() {
            return Ok(vector::VectorFile::from_hurray(file, Some(name))?);
        }
    }
    // Neither: the reader's message about the path.
    Ok(vector::VectorFile::read(x)?)
}

/// Whether `p` starts with the Hurray file magic.
fn is_hurray(p: &Path) -> bool {
    use std::io::Read;
    let mut magic = [0u8; 8];
    std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok_and(|()| &magic == coo_assembler::raw::FILE_MAGIC)
}
