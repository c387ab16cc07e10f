//! What `coo_assembler._native` and `coo_assembler_mpi._dist` share: NumPy
//! arrays of any dtype read in chunks (`arrays`, `with_values!`), the
//! keyword dict of assembly options (`options`) and the library's errors
//! as the package's exception classes (`errors`). A crate of its own so
//! that the MPI extension links these, not the whole `_native` extension
//! (maturin builds `_native` as a cdylib only; as an rlib it was compiled
//! a second time, two minutes of every CI run).

pub mod arrays;
pub mod errors;
pub mod options;
