//! `coo-assembler convert`: one tensor into another layout, out of core.

use crate::assemble::{DuplicatesArg, LayoutArg};
use crate::usage;
use clap::Args;
use coo_assembler::{convert, parse_size, ConvertOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub(crate) struct ConvertArgs {
    /// The Hurray file to read (COO sorted or not, CSR or CSC; ours or any writer's).
    input: PathBuf,
    /// The Hurray file to write (replaced atomically).
    output: PathBuf,
    /// The layout to write.
    #[arg(long, value_enum, ignore_case = true)]
    to: LayoutArg,
    /// Memory for all buffers, with units: 8MiB, 256MiB, 1GiB, or bytes.
    #[arg(long, default_value = "256MiB", value_name = "SIZE")]
    memory_budget: String,
    /// The tensor to convert when the file holds several.
    #[arg(long, value_name = "NAME")]
    tensor: Option<String>,
    /// How duplicate coordinates (unsorted COO) combine; default: refuse them.
    #[arg(long, value_enum, ignore_case = true)]
    duplicates: Option<DuplicatesArg>,
    /// Directory for spill files (default: $TMPDIR or /tmp).
    #[arg(long, value_name = "DIR")]
    temp_dir: Option<PathBuf>,
    /// Sorting threads (default: number of cores).
    #[arg(long)]
    threads: Option<usize>,
    /// No summary.
    #[arg(long, short)]
    quiet: bool,
}

pub(crate) fn run(a: ConvertArgs) -> anyhow::Result<ExitCode> {
    let mut opts = ConvertOptions {
        to: a.to.into(),
        memory_budget: parse_size(&a.memory_budget)
            .map_err(|e| usage(format!("--memory-budget: {e}")))?,
        tensor: a.tensor,
        duplicates: a.duplicates.map(Into::into),
        temp_dir: a.temp_dir,
        ..ConvertOptions::default()
    };
    if let Some(t) = a.threads {
        opts.threads = t;
    }
    let s = convert(&a.input, &a.output, &opts)?;
    if !a.quiet {
        let how = match &s.sorted_by {
            None => "one streaming pass".to_string(),
            Some(x) => format!(
                "external sort: {} runs, {} spilled, {} merge passes",
                x.runs, x.runs_spilled, x.merge_passes
            ),
        };
        eprintln!(
            "converted {:?} {} -> {}: {} entries, {} bytes, {} ({how})",
            s.tensor,
            s.from,
            s.to,
            s.nnz,
            s.file_bytes,
            s.path.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}
