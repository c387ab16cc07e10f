//! `coo-assembler convert`: one tensor into another layout, out of core.

use crate::names::{named, size};
use clap::Args;
use coo_assembler::{
    convert, convert::ConvertOptions, options::DuplicatePolicy, options::OutputLayout,
};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args)]
pub(crate) struct ConvertArgs {
    /// The Hurray file to read (COO sorted or not, CSR or CSC; ours or any
    /// writer's; or a partition composite, read as one tensor).
    input: PathBuf,
    /// The Hurray file to write (replaced atomically). It may be the input
    /// itself: the conversion is written beside it and renamed over it once
    /// whole, so the input is rewritten in place or left as it was.
    output: PathBuf,
    /// The layout to write.
    #[arg(long, value_parser = named::<OutputLayout>())]
    to: OutputLayout,
    /// With --to csf: the dimension stored at each level, outermost first
    /// (`--mode-order 2,0,1`; default: the identity).
    #[arg(long, value_delimiter = ',', value_name = "D0,D1,...")]
    mode_order: Option<Vec<usize>>,
    /// Memory for all buffers: a size such as 8MiB, 256MiB, 1.5GiB, 64M or
    /// 1e9 (bytes).
    #[arg(long, default_value = "256MiB", value_name = "SIZE", value_parser = size)]
    memory_budget: u64,
    /// The tensor to convert when the file holds several.
    #[arg(long, value_name = "NAME")]
    tensor: Option<String>,
    /// How duplicate coordinates (unsorted COO) combine; default: refuse them.
    #[arg(long, value_parser = named::<DuplicatePolicy>())]
    duplicates: Option<DuplicatePolicy>,
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
    let opts = options(&a)?;
    let bar = crate::progress::Bar::show(&opts.progress, &a.output.display().to_string(), a.quiet);
    let s = convert(&a.input, &a.output, &opts);
    drop(bar);
    let s = s.map_err(|e| e.for_op("convert"))?;
    if let (Some(members), false) = (s.members, a.quiet) {
        eprintln!(
            "converted composite {:?} ({members} members) -> {}: {} entries, {} bytes, {}",
            s.tensor,
            s.to,
            s.nnz,
            s.file_bytes,
            s.path.display()
        );
    } else if !a.quiet {
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

fn options(a: &ConvertArgs) -> anyhow::Result<ConvertOptions> {
    let mut opts = ConvertOptions {
        to: a.to,
        mode_order: a.mode_order.clone(),
        memory_budget: a.memory_budget,
        tensor: a.tensor.clone(),
        duplicates: a.duplicates,
        temp_dir: a.temp_dir.clone(),
        ..ConvertOptions::default()
    };
    if let Some(t) = a.threads {
        opts.threads = t;
    }
    Ok(opts)
}
