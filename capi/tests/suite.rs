//! The C API's tests, one binary (one link of the library and its test
//! helpers): the ABI frozen where it was released (`abi`), the committed
//! header and its constants (`header`), and C and Fortran programs built
//! against the C library (`programs`). `mpi` (feature `mpi`) has its own,
//! run under mpirun. Run one part with
//! `cargo test --release -p coo-assembler-capi --test suite -- header::`.

mod abi;
mod header;
mod programs;
