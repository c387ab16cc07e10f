//! The integration tests, one binary: each file of `tests/` is a module
//! here, so the library's generic code is compiled and linked once for all
//! of them instead of once per file (the suite built in a third of the
//! time). Kept apart, in binaries of their own: `rss` (measures this
//! process's peak RSS), `faults` (counts this process's open files),
//! `mutation` (a counting global allocator) and `mpi` (its own `main`).
//! Run one file's tests with `cargo test --release --test suite -- <file>::`.

mod architecture;
mod assemble;
#[path = "bool.rs"]
mod bools;
mod checksum_pass;
mod cli;
mod cli_dense;
mod cli_layouts;
mod cli_matrix;
mod cli_refill;
mod common;
mod complex;
mod composite_convert;
mod deferred;
mod dense;
mod determinism;
mod direct;
mod direct_file;
mod export_vec;
mod golden;
mod huge_shapes;
mod interop;
mod layouts;
mod matrix;
mod mpi_composite;
mod output_rule;
mod plan_file;
mod pushers;
mod read_access;
mod read_compressed;
mod read_compressed_reference;
mod read_corruption;
mod read_reference;
mod refill;
mod skip_negative;
mod verify_warnings;
mod write_compat;
mod write_errors;
mod write_layout;
