//! `coo-assembler spy`: a PNG of the sparsity pattern.

use crate::matvec::PagingArg;
use crate::{open, pick, Pick};
use clap::Args;
use coo_assembler::matrix::{self, SpyOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub(crate) struct SpyArgs {
    /// The Hurray file (rank 2; higher ranks sum the dimensions after the first two).
    file: PathBuf,
    /// The PNG to write (replaced atomically).
    #[arg(long, value_name = "PATH")]
    out: PathBuf,
    /// Pixels on the longer side of the plot (16..=8192).
    #[arg(long, default_value_t = 1024)]
    size: u32,
    /// Page handling of the mapped file.
    #[arg(long, value_enum, default_value_t = PagingArg::Auto)]
    paging: PagingArg,
    /// Print nothing on success.
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    pick: Pick,
}

pub(crate) fn run(a: SpyArgs) -> anyhow::Result<ExitCode> {
    let f = open(&a.file, false)?;
    let t = pick(&f, &a.pick)?;
    let opts = SpyOptions {
        size: a.size,
        paging: a.paging.into(),
    };
    let s = matrix::spy(&f, Some(t.name()), &a.out, &opts)?;
    if !a.quiet {
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
