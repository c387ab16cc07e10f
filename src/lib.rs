//! # coo-assembler
//!
//! Assemble a sparse tensor from a stream of contributions `(index tuple,
//! value)` — billions of them, most coordinates hit many times, as
//! finite-element codes produce — into one sorted, duplicate-free COO tensor
//! in a [Hurray](https://github.com/pgillet/hurray) file, under a fixed
//! memory budget; read it back through a validating memory map.
//!
//! ## The crate at a glance
//!
//! - [`Builder`] ([`builder`]): created with a shape, an element type
//!   ([`DType`]) and [`AssembleOptions`] ([`options`]: memory budget in
//!   bytes, temp dir, threads, duplicate, zero and NaN policies, layout).
//!   `push`, `push_many`, `push_coo`, `push_element`; a
//!   [`Pusher`](builder::Pusher) per thread; [`Builder::finish`] merges,
//!   writes and returns a [`Summary`](builder::Summary).
//! - [`assemble()`]: arrays you already hold, into a file in one call
//!   (the in-memory kernel when the work fits the budget, the builder
//!   otherwise; the same bytes either way).
//! - [`Plan`] ([`plan`]): plan once from the coordinates, refill with new
//!   values at every Newton or time step, bit for bit a full assembly.
//! - [`open`] / [`HurrayFile`] ([`read`]): the validating memory-mapped
//!   reader: `get`, rows, `iter`, zero-copy typed `values` and `indices`,
//!   every tensor's [`TensorInfo`](read::TensorInfo), partition
//!   composites, and `verify` (content checks, O(nnz)).
//! - [`convert()`]: one tensor into another layout (COO, CSR, CSC), out
//!   of core; [`matrix`]: products, exports, pictures of stored matrices;
//!   [`input`]: the contribution file readers; [`write`]: the streaming
//!   container writer; [`composite`]: partition composites joined from
//!   per-rank files.
//! - [`Error`] / [`ErrorKind`]: one `#[non_exhaustive]` error type; every
//!   variant names what was wrong and where. [`element`] and [`vocab`]:
//!   the element types and the names every front end parses.
//! - Escape hatches: [`raw`] (the byte codec) and, with the `internals`
//!   feature, `internals` (the parts; not a stable API).
//!
//! ## Example
//!
//! ```
//! use coo_assembler::{AssembleOptions, Builder, DType, HurrayFile, Value};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("K.hrry");
//! let opts = AssembleOptions { memory_budget: 64 << 20, ..AssembleOptions::default() };
//! let mut builder = Builder::new(&[4, 4], DType::F64, opts)?;
//! std::thread::scope(|s| -> coo_assembler::Result<()> {
//!     for t in 0..2u64 {
//!         let mut p = builder.pusher()?;
//!         s.spawn(move || {
//!             // Each thread pushes a 2x2 element matrix on dofs (t, t + 1).
//!             p.push_element(&[t, t + 1], &[1.0, -1.0, -1.0, 1.0]).unwrap();
//!         });
//!     }
//!     Ok(())
//! })?;
//! let summary = builder.finish(&path)?;
//! assert_eq!(summary.contributions, 8);
//! assert_eq!(summary.nnz, 7);
//!
//! let file = HurrayFile::open(&path)?;
//! let k = file.only_tensor()?;
//! assert_eq!(k.get(&[1, 1])?, Value::Float(2.0)); // two elements share dof 1
//! assert_eq!(k.get(&[0, 3])?, Value::Float(0.0)); // not stored: zero
//! assert!(k.verify().is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Memory model
//!
//! [`AssembleOptions::memory_budget`] bounds every buffer the assembler
//! allocates: ingest chunks, sort scratch, in-memory runs, spill and merge
//! buffers and the output writer's buffers. Pushers hand full chunks to
//! sorter threads and wait for an empty one when all are in use, so memory
//! grows neither with the input nor with the number of pushers (any number
//! may be alive). A budget too small to work is refused up front with the
//! minimum it needs. See `docs/architecture.md`.
//!
//! ## Guarantees
//!
//! - Float sums are exact (the correctly rounded sum of all contributions),
//!   so the output is bit-for-bit identical for any thread count, budget or
//!   input order. Integer sums are exact or fail with the coordinate.
//! - The output file appears whole or not at all (temporary file, fsync,
//!   rename, directory fsync); spill files are removed on success, error
//!   and drop.
//! - Bad input is a typed error, never a panic; spill runs and files are
//!   checksummed, so damage is reported, never read as data.
//! - Memory-mapped reading: a file truncated by another process while
//!   mapped raises SIGBUS; open with [`read::ReadOptions::in_memory`] files
//!   in untrusted locations.

#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used)]

// The parts behind the public API: public under `internals` (feature
// `internals`, for the front ends, the MPI crate, the benches and the
// tests that drive them directly), private otherwise; the crate refers to
// them by their short paths (`crate::assemble`, ...).
#[cfg(feature = "internals")]
pub mod internals;
#[cfg(not(feature = "internals"))]
mod internals;
use internals::{assemble, budget, codec, fs, hurray, stats};

pub mod builder {
    //! Assembly from pushes: [`Builder`] (and a [`Pusher`] per thread)
    //! takes contributions one by one, an element matrix or a batch at a
    //! time; [`Builder::finish`] merges, writes and returns a [`Summary`].
    pub use crate::assemble::builder::{Builder, Pusher, Stopper};
    pub use crate::assemble::combine::PushValue;
    pub use crate::assemble::summary::Summary;
    pub use crate::fs::sweep::remove_own_leftovers;
}
pub mod composite {
    //! Partition composites (one logical tensor over per-rank members):
    //! [`join`] makes one from per-rank files; reading is
    //! [`crate::read::CompositeFile`]'s.
    pub use crate::internals::composite::{JoinSummary, join};
}
pub mod convert;
pub mod element;
mod error;
mod float;
pub mod input;
mod layout;
pub mod matrix;
pub mod options;
// Issue 24: plan once from the coordinates, refill with new values.
pub mod plan;
pub mod progress;
pub mod raw {
    //! Escape hatch: the HRRYFILE byte codec (file header, trailer, index,
    //! descriptors, KV section and our keys in it, statistics, their field
    //! offsets), bytes in, bytes out, no I/O. For tools that must look at
    //! the bytes themselves; the rest of the API never needs it. It follows
    //! the format, not the crate's version: its items may change in any
    //! release.
    pub use crate::hurray::*;
}
pub mod read;
mod size;
pub mod ttv;
pub mod vocab;
pub mod write;
mod xxh3;

pub use assemble::builder::Builder;
pub use assemble::direct::assemble_arrays_to_file as assemble;
pub use convert::convert;
pub use element::{DType, Value};
pub use error::{Error, ErrorKind, Result};
pub use options::AssembleOptions;
pub use plan::Plan;
pub use read::{HurrayFile, open};
