//! `coo-assembler spy`: a PNG of the sparsity pattern.

use crate::matvec::MatrixCommon;
use crate::{open, pick_view};
use clap::Args;
use coo_assembler::matrix::{self, SpyOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub(crate) struct SpyArgs {
    /// The Hurray file (rank 2; higher ranks sum the dimensions after the first two).
    file: PathBuf,
    /// The PNG to write (replaced atomically; not the Hurray file itself).
    #[arg(long, value_name = "PATH")]
    out: PathBuf,
    /// Pixels on the longer side of the plot (16..=8192).
    #[arg(long, default_value_t = 1024)]
    size: u32,
    #[command(flatten)]
    common: MatrixCommon,
}

pub(crate) fn run(a: SpyArgs) -> anyhow::Result<ExitCode> {
    let f = open(&a.file, false)?;
    let t = pick_view(&f, &a.common.pick, "spy")?;
    let opts = SpyOptions {
        size: a.size,
        paging: a.common.paging,
    };
    let s = matrix::spy(&f, Some(t.name()), &a.out, &opts)?;
    if !a.common.quiet {
        eprintln!(
            "wrote {}: {} x {} pixels, {} rows/columns per pixel block, fullest block {} entries ({})",
            a.out.display(),
            s.width,
            s.height,
            s.per_block,
            s.max_count,
            s.caption
        );
    }
    Ok(ExitCode::SUCCESS)
}
