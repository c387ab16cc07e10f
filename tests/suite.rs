//! The library's integration tests, one binary: each file of `tests/` is a
//! module here, so the library's generic code is compiled and linked once
//! for all of them instead of once per file. Kept apart, in binaries of
//! their own: `faults` (counts this process's open files) and `mutation`
//! (a counting global allocator). The command line's tests are in
//! `cli/tests`, those against the reference implementation in
//! `interop/tests`, the MPI ones in `mpi/tests`.
//! Run one file's tests with `cargo test --release --test suite -- <file>::`.

use coo_assembler_testkit as common;

mod architecture;
mod assemble;
#[path = "bool.rs"]
mod bools;
mod complex;
mod csf;
mod deferred;
mod determinism;
mod direct;
mod direct_file;
mod golden;
mod matrix;
mod merge_ranges;
mod plan_file;
mod pushers;
mod read_access;
mod read_compressed;
mod read_corruption;
mod recorded_plan;
mod refill;
mod skip_negative;
mod write_errors;
mod write_layout;
