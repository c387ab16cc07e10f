//! # coo-assembler
//!
//! Assemble a sparse tensor from a stream of contributions `(index tuple,
//! value)` — billions of them, most coordinates hit many times, as
//! finite-element codes produce — into one sorted, duplicate-free COO tensor
//! in a [Hurray](https://github.com/pgillet/hurray) file, under a fixed
//! memory budget; read it back through a validating memory map.
//!
//! ## The types at a glance
//!
//! - [`Builder`]: created with a shape, an element type ([`DType`]) and
//!   [`AssembleOptions`] (memory budget in bytes, temp dir, threads,
//!   [`DuplicatePolicy`], zero and NaN policies). `push`, `push_many`,
//!   `push_coo`, `push_element`; [`Builder::pusher`] gives a [`Pusher`] per
//!   thread; [`Builder::finish`] merges, writes and returns a [`Summary`].
//! - [`HurrayFile`] / [`CooTensor`]: open (structure validated), `get`,
//!   `prefix_range` (rows), `lower_bound`, `iter`, zero-copy typed
//!   `values` and `indices`, and `verify` (content checks, O(nnz)).
//!   [`HurrayFile::tensor_infos`] lists every tensor, dense ones included
//!   ([`TensorInfo`], [`Layout`]); [`DenseTensor`] reads a dense buffer.
//! - [`open`]: any Hurray file, as [`Opened`]: plain tensors
//!   ([`HurrayFile`]) or a partition composite ([`CompositeFile`], one
//!   logical tensor over its members); [`convert()`] rewrites either into
//!   one tensor of another layout.
//! - [`write::FileWriter`]: the streaming container writer, for sorted
//!   entries you already have.
//! - [`Error`]: one `#[non_exhaustive]` error type; every variant names
//!   what was wrong and where.
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
//!   mapped raises SIGBUS; open with [`ReadOptions::in_memory`] files
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
use internals::{assemble, codec, fs, hurray, read, stats};

pub mod composite {
    //! Partition composites (issue 13): [`join`] makes one from per-rank
    //! files; reading is [`crate::CompositeFile`]'s.
    pub use crate::internals::composite::{JoinSummary, join};
}

pub mod convert;
mod element;
mod error;
mod float;
pub mod raw {
    //! Escape hatch: the HRRYFILE byte codec (file header, trailer, index,
    //! descriptors, KV section and our keys in it, statistics, their field
    //! offsets), bytes in, bytes out, no I/O. For tools that must look at
    //! the bytes themselves; the rest of the API never needs it. It follows
    //! the format, not the crate's version: its items may change in any
    //! release.
    pub use crate::hurray::*;
}
pub mod input;
pub mod layout;
mod options;
// Issue 24: plan once from the coordinates, refill with new values.
pub mod refill;
mod size;
pub mod vocab;
pub mod write;
mod xxh3;

// Issue 10: products, exports and pictures of stored matrices.
pub mod matrix;

pub use assemble::builder::{Builder, Pusher};
pub use assemble::combine::PushValue;
pub use assemble::direct;
pub use assemble::finish::Summary;
pub use convert::{ConvertOptions, ConvertSummary, convert};
pub use element::{
    BF16, Bit, DType, Element, F16, Value, format_float, group_digits, pack_bools, unpack_bools,
};
pub use error::{Error, ErrorKind, Result};
pub use fs::sweep::remove_own_leftovers;
pub use layout::{Layout, LayoutKind};
pub use refill::{Plan, PlanFile, PlanFileSummary, RefillSummary, refill_plan_file};
// The handle's type rides in `AssembleOptions::io` (so struct-update
// syntax keeps working); its fault plans are nameable with `internals` only.
#[doc(hidden)]
pub use fs::IoCtx;
/// The element module's public items, for `with_element_type!` in other
/// crates: a type added to the element table is reachable here at once.
#[doc(hidden)]
pub mod __element {
    pub use crate::element::*;
}
pub use hurray::composite::{CompositeHead, Shard};
pub use hurray::{KvValue, Statistics};
/// The complex type of complex64 (`Complex<f32>`) and complex128
/// (`Complex<f64>`) elements, num-complex's.
pub use num_complex::Complex;
#[doc(hidden)]
pub use options::threads_out_of_range;
pub use options::{
    AssembleOptions, DEFAULT_MEMORY_BUDGET, DuplicatePolicy, NonFinitePolicy, OutputLayout,
};
pub use read::{
    CompositeFile, CompressedEntries, CompressedTensor, CooTensor, DenseTensor, HurrayFile, Opened,
    Problem, ReadOptions, Severity, Tensor, TensorInfo, open,
};
pub use vocab::{Vocabulary, parse_size};
