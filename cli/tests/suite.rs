//! The command line's tests, one binary (`rss` measures its own process's
//! peak RSS and has one of its own; `mpi`, with feature `mpi`, drives
//! `mpirun`). Run one file's tests with
//! `cargo test --release -p coo-assembler-cli --test suite -- <file>::`.

use coo_assembler_testkit as common;

use common::Ran;
use std::ffi::OsStr;

/// The command under test.
pub fn cli() -> common::Cli {
    common::Cli::new(env!("CARGO_BIN_EXE_coo-assembler"))
}

/// Runs the command with `args`.
pub fn run<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> Ran {
    cli().run(args)
}

/// Runs the command with `args` and asserts it succeeded.
pub fn ok<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> Ran {
    cli().ok(args)
}

/// [`ok`]'s standard output.
pub fn ok_text<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> String {
    cli().ok(args).stdout
}

/// Runs the command with `args` and asserts it failed with `code`, saying
/// `needle`.
pub fn fails_with<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>, code: i32, needle: &str) {
    cli().run(args).fails(code, &[needle]);
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
mod progress;
mod verify_warnings;
