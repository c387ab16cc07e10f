//! Using a stored matrix where it is: products with vectors, exports to
//! other programs, a picture of the sparsity pattern, the dense form of a
//! small matrix.
//!
//! - [`matvec`] / [`matvec_into`]: `y = A x` or `A^T x`, every real value
//!   type ([`matvec_complex`]: a complex matrix or x), computed in f64, parallel and deterministic (the same bytes for any
//!   thread count), streamed through the mapping of a file larger than
//!   memory ([`Paging`]).
//! - [`export`]: MatrixMarket, scipy `.npz` and PETSc binary, streamed with
//!   bounded memory into files that appear whole or not at all.
//! - [`spy`]: a PNG of where the entries are.
//! - [`dense`]: the dense matrix, for small ones.
//! - [`vector`]: NumPy `.npy` and raw `.f64` vectors in and out.
//!
//! All of it takes a [`Matrix`]: a rank-2 tensor with its layout
//! ([`Layout`]), from [`Matrix::of_file`] (pages may be released) or
//! [`Matrix::new`].
//!
//! ```
//! use coo_assembler::matrix::{matvec, Matrix, MatvecOptions};
//! use coo_assembler::{AssembleOptions, Builder, DType, HurrayFile};
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("A.hrry");
//! let mut b = Builder::new(&[2, 3], DType::F64, AssembleOptions::default())?;
//! b.push(&[0, 2], 2.0)?;
//! b.push(&[1, 0], -1.0)?;
//! b.finish(&path)?;
//! let file = HurrayFile::open(&path)?;
//! let a = Matrix::of_file(&file, None)?;
//! let y = matvec(&a, &[1.0, 10.0, 100.0], false, &MatvecOptions::default())?;
//! assert_eq!(y, [200.0, -1.0]);
//! let z = matvec(&a, &[1.0, 1.0], true, &MatvecOptions::default())?;
//! assert_eq!(z, [-1.0, 0.0, 2.0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod dense;
mod entries;
mod error;
pub mod export;
mod font;
mod matvec;
#[doc(hidden)] // for the front ends (python/), not a stable API
pub mod memory;
mod output;
mod paging;
mod spy;
pub mod vector;
mod view;

pub use dense::{DENSE_LIMIT, dense};
pub use error::{MatrixError, MatrixResult};
pub use matvec::{
    BLOCK_ENTRIES, MatvecOptions, NonFiniteInput, SCATTER_MIN_ENTRIES, matvec, matvec_complex,
    matvec_into,
};
pub use paging::Paging;
pub use spy::{SpyOptions, SpySummary, shade as spy_shade, spy};
pub use view::{Layout, Matrix};
