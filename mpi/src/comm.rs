//! Communicators the front ends hand over.
//!
//! C, Fortran and Python (mpi4py) callers pass their communicator as its
//! Fortran handle (`MPI_Comm_c2f(comm)` in C, the `integer` or
//! `comm%MPI_VAL` in Fortran, `comm.py2f()` in mpi4py): an `int` in every
//! MPI, so our header ties no caller to one MPI's ABI. The library is
//! built against the caller's MPI (the one `mpicc` names), and works on a
//! duplicate of the communicator, so its messages never meet the caller's.

use coo_assembler::{Error, Result};
use mpi::ffi;
use mpi::raw::FromRaw;
use mpi::topology::SimpleCommunicator;

/// A duplicate of the communicator whose Fortran handle is `handle`.
/// Collective over that communicator (`MPI_Comm_dup`). Errors when MPI is
/// not initialised or already finalised, or the handle is no communicator.
pub fn from_fortran(handle: i32) -> Result<SimpleCommunicator> {
    if !mpi::environment::is_initialized() || mpi::environment::is_finalized() {
        return Err(Error::InvalidArgument(
            "MPI is not initialised (or already finalised): initialise it (MPI_Init, \
             `from mpi4py import MPI`) before making a distributed builder"
                .into(),
        ));
    }
    // SAFETY: MPI is initialised and not finalised (checked above);
    // MPI_Comm_f2c takes any integer and returns MPI_COMM_NULL for a
    // handle that names no communicator, which is refused below.
    let comm = unsafe { ffi::RSMPI_Comm_f2c(handle as ffi::RSMPI_Fint) };
    // SAFETY: reading the constant MPI_COMM_NULL of the linked MPI.
    if comm == unsafe { ffi::RSMPI_COMM_NULL } {
        return Err(Error::InvalidArgument(format!(
            "Fortran handle {handle} names no MPI communicator (MPI_COMM_NULL)"
        )));
    }
    let mut dup = std::mem::MaybeUninit::<ffi::MPI_Comm>::uninit();
    // SAFETY: `comm` is a live communicator (not MPI_COMM_NULL) of this
    // initialised MPI, and `dup` is room for one handle.
    let rc = unsafe { ffi::MPI_Comm_dup(comm, dup.as_mut_ptr()) };
    if rc != 0 {
        return Err(Error::InvalidArgument(format!(
            "MPI_Comm_dup of the communicator with Fortran handle {handle} failed (code {rc})"
        )));
    }
    // SAFETY: MPI_Comm_dup returned success, so it wrote a new
    // intra-communicator that nothing else holds; SimpleCommunicator frees
    // it when dropped.
    Ok(unsafe { SimpleCommunicator::from_raw(dup.assume_init()) })
}
