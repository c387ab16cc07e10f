//! `coo-assembler plan`: the pattern of a binary records file, planned
//! out of core into a plan file kept in parts (the library's
//! `PlanFile::create_from_bin`), for `refill` to fill step after step.

use crate::names::named;
use crate::parse_list;
use crate::resources::Resources;
use clap::Args;
use coo_assembler::vocab::format_size;
use coo_assembler::{
    AssembleOptions, DType, options::DuplicatePolicy, options::NonFinitePolicy,
    options::OutputLayout,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub(crate) struct PlanArgs {
    /// Binary records (`rank` u64 little-endian indices, then one value of
    /// --dtype; the values are not read), one per contribution, in the
    /// order the values of every step will come.
    #[arg(long, value_name = "FILE")]
    input: PathBuf,
    /// Extent of each dimension, comma separated (e.g. 1000,1000).
    #[arg(long, value_name = "N,N,...")]
    shape: String,
    /// Element type of the records' values and of the results.
    #[arg(long, value_parser = named::<DType>(), default_value = "f64")]
    dtype: DType,
    /// Layout of the results.
    #[arg(long, value_parser = named::<OutputLayout>(), default_value = "coo")]
    layout: OutputLayout,
    /// How contributions to one coordinate combine in every refill
    /// (`error`: refuse a repeated coordinate now).
    #[arg(long, value_parser = named::<DuplicatePolicy>(), default_value = "sum")]
    duplicates: DuplicatePolicy,
    /// Add float duplicates with plain arithmetic instead of exactly.
    #[arg(long)]
    fast_sums: bool,
    /// What every refill does with NaN and infinite values.
    #[arg(long, value_parser = named::<NonFinitePolicy>(), default_value = "keep")]
    non_finite: NonFinitePolicy,
    // The budget bounds planning: the plan is cut into parts that each fit
    // it, so `refill` runs in the same budget.
    #[command(flatten)]
    resources: Resources,
    /// The plan file to write (replaced atomically; not the input).
    #[arg(long, short, value_name = "K.plan")]
    output: PathBuf,
    /// Print nothing on success.
    #[arg(long, short)]
    quiet: bool,
}

pub(crate) fn run(a: PlanArgs) -> anyhow::Result<ExitCode> {
    let t0 = Instant::now();
    let shape = parse_list(&a.shape, "--shape")?;
    let opts = a.resources.options(AssembleOptions {
        layout: a.layout,
        duplicates: a.duplicates,
        exact_sums: !a.fast_sums,
        non_finite: a.non_finite,
        ..AssembleOptions::default()
    })?;
    let s = coo_assembler::plan::PlanFile::create_from_bin(
        &a.input, a.dtype, &shape, a.dtype, &opts, &a.output, None,
    )?;
    if !a.quiet {
        eprintln!(
            "wrote {}: {} contributions into {} entries, {} parts{} within {}, in {:.2} s",
            s.path.display(),
            coo_assembler::element::group_digits(s.contributions.into()),
            coo_assembler::element::group_digits(s.nnz.into()),
            s.parts,
            // Why a refill may spill: the input is not in element order.
            if s.windowed || s.parts == 1 {
                ""
            } else {
                " (input not in element order: a refill spills its values by part)"
            },
            format_size(opts.memory_budget),
            t0.elapsed().as_secs_f64(),
        );
    }
    Ok(ExitCode::SUCCESS)
}
