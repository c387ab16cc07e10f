//! `coo-assembler refill`: one step's values through a saved plan into a
//! Hurray file (the library's `refill_plan_file`: a plan held in memory
//! is loaded, a plan kept in parts is refilled part by part within the
//! budget).

use crate::resources::Resources;
use clap::Args;
use coo_assembler::AssembleOptions;
use coo_assembler::vocab::format_size;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub(crate) struct RefillArgs {
    /// The plan file (written by `Plan::save`, Python's `Plan.save` or C's
    /// `coo_plan_save`, or a plan kept in parts by `PlanFile::create` /
    /// Python's `plan_to_file`).
    plan: PathBuf,
    /// The values: a 1-D `.npy` array (any integer or float type), or a raw
    /// file of little-endian values of the plan's element type, one per
    /// contribution, in the order the coordinates were planned.
    values: PathBuf,
    /// The Hurray file to write (replaced atomically; not the plan or the
    /// values file).
    #[arg(long, short, value_name = "PATH")]
    output: PathBuf,
    // The budget bounds a plan kept in parts: its largest part's working
    // set and the buffers must fit (the error says how much is needed). A
    // plan held in memory is loaded whole.
    #[command(flatten)]
    resources: Resources,
    /// Print nothing on success.
    #[arg(long, short)]
    quiet: bool,
}

pub(crate) fn run(a: RefillArgs) -> anyhow::Result<ExitCode> {
    let t0 = Instant::now();
    let opts = a.resources.options(AssembleOptions::default())?;
    let s = coo_assembler::plan::refill_plan_file(&a.plan, &a.values, &a.output, &opts)?;
    if !a.quiet {
        let parts = if s.parts > 1 {
            format!(
                ", {} parts within {}",
                s.parts,
                format_size(opts.memory_budget)
            )
        } else {
            String::new()
        };
        eprintln!(
            "wrote {}: {} entries from {} values in {:.2} s ({} {} plan{parts})",
            s.path.display(),
            coo_assembler::element::group_digits(s.nnz.into()),
            coo_assembler::element::group_digits(s.contributions.into()),
            t0.elapsed().as_secs_f64(),
            s.layout,
            s.dtype.name(),
        );
    }
    Ok(ExitCode::SUCCESS)
}
