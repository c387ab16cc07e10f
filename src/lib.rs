//! coo-assembler: assemble sparse COO tensors from streams of contributions
//! into Hurray files, out of core, and read them back through a memory map.

#![deny(missing_docs)]
#![warn(clippy::unwrap_used, clippy::expect_used)]

pub mod builder;
pub(crate) mod combine;
pub mod element;
pub mod error;
pub mod exact;
pub mod hurray;
pub mod input;
pub mod io;
pub mod key;
pub(crate) mod merge;
pub mod options;
pub mod read;
pub mod sort;
pub(crate) mod spill;
pub mod stats;
pub mod sweep;
pub mod write;

pub use builder::{Builder, Pusher, Summary};
pub use combine::PushValue;
pub use element::{DType, Element, Value};
pub use error::{Error, Result};
pub use options::{AssembleOptions, DuplicatePolicy, NonFinitePolicy};
