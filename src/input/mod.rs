//! Readers for contribution streams: raw binary records ([`push_bin`]),
//! whitespace text ([`push_text`]) and MatrixMarket coordinate files
//! ([`push_mtx`]). Each pushes into a [`crate::Builder`] and names the record or
//! line of any bad input. [`MappedInput`] parses a mapped binary file in
//! place and releases the parsed pages, so a large input does not count
//! against the memory budget.

mod bin;
mod common;
mod mapped;
mod mtx;
mod text;

pub use bin::{push_bin, push_bin_bytes};
pub use common::{InputFormat, Progress};
pub use mapped::MappedInput;
pub use mtx::{push_mtx, read_mtx_header, MtxField, MtxHeader, MtxSymmetry};
pub use text::push_text;
