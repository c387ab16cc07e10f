//! coo-assembler against the Hurray reference implementation
//! (hurray-core / hurray-io 0.1.0), one binary: our files read by its
//! reader, its files read by ours, field by field. Run one file's tests
//! with `cargo test --release -p coo-assembler-interop -- <file>::`.

use coo_assembler_testkit as common;

mod checksum_pass;
mod csf;
mod dense;
mod interop;
mod read_compressed_reference;
mod read_reference;
mod write_compat;
