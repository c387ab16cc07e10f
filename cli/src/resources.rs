//! The flags every command that assembles shares (`assemble`, `plan`,
//! `refill`): how much memory, how many cores, where spill files go.

use crate::names::size;
use clap::Args;
use coo_assembler::AssembleOptions;
use std::path::PathBuf;

#[derive(Args)]
pub(crate) struct Resources {
    /// Memory for all buffers: a size such as 8MiB, 256MiB, 1.5GiB, 64M or
    /// 1e9 (bytes).
    #[arg(long, default_value = "256MiB", value_name = "SIZE", value_parser = size)]
    pub(crate) memory_budget: u64,
    /// Cores to use, 1 to 1024 (default: all). The output is the same for
    /// any N.
    #[arg(long, value_name = "N")]
    pub(crate) threads: Option<usize>,
    /// Directory for spill files (default: $TMPDIR or /tmp).
    #[arg(long, value_name = "DIR")]
    pub(crate) temp_dir: Option<PathBuf>,
}

impl Resources {
    /// `base` with this budget, spill directory and (when given) thread
    /// count, checked by the library (`--threads 0` is its error).
    pub(crate) fn options(&self, base: AssembleOptions) -> coo_assembler::Result<AssembleOptions> {
        let opts = AssembleOptions {
            memory_budget: self.memory_budget,
            threads: self.threads.unwrap_or(base.threads),
            temp_dir: self.temp_dir.clone(),
            ..base
        };
        opts.validate()?;
        Ok(opts)
    }

    /// The folder spill files go to.
    pub(crate) fn temp_base(&self) -> PathBuf {
        self.temp_dir.clone().unwrap_or_else(std::env::temp_dir)
    }
}
