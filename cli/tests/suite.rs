//! The command line's tests, one binary (`rss` measures its own process's
//! peak RSS and has one of its own; `mpi`, with feature `mpi`, drives
//! `mpirun`). Run one file's tests with
//! `cargo test --release -p coo-assembler-cli --test suite -- <file>::`.

use coo_assembler_testkit as common;

/// The command under test.
pub fn cli() -> common::Cli {
    common::Cli::new(env!("CARGO_BIN_EXE_coo-assembler"))
}

mod cli;
mod cli_dense;
mod cli_layouts;
mod cli_matrix;
mod cli_refill;
mod composite_convert;
mod export_vec;
mod huge_shapes;
mod layouts;
mod mpi_composite;
mod output_rule;
mod verify_warnings;
