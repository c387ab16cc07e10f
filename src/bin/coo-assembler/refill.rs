//! `coo-assembler refill`: one step's values through a saved plan into a
//! Hurray file (the library's `Plan::refill_file`).

use clap::Args;
use coo_assembler::Plan;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub(crate) struct RefillArgs {
    /// The plan file (written by `Plan::save`, Python's `Plan.save` or C's
    /// `coo_plan_save`).
    plan: PathBuf,
    /// The values: a 1-D `.npy` array (any integer or float type), or a raw
    /// file of little-endian values of the plan's element type, one per
    /// contribution, in the order the coordinates were planned.
    values: PathBuf,
    /// The Hurray file to write (replaced atomically; not the plan or the
    /// values file).
    #[arg(long, short, value_name = "PATH")]
    output: PathBuf,
    /// Print nothing on success.
    #[arg(long, short)]
    quiet: bool,
}

pub(crate) fn run(a: RefillArgs) -> anyhow::Result<ExitCode> {
    let t0 = Instant::now();
    let plan = Plan::load(&a.plan)?;
    let s = plan.refill_file(&a.values, &a.output, &[&a.plan])?;
    if !a.quiet {
        eprintln!(
            "wrote {}: {} entries from {} values in {:.2} s ({} {} plan)",
            s.path.display(),
            coo_assembler::group_digits(s.nnz.into()),
            coo_assembler::group_digits(s.contributions.into()),
            t0.elapsed().as_secs_f64(),
            plan.layout(),
            plan.dtype().name(),
        );
    }
    Ok(ExitCode::SUCCESS)
}
