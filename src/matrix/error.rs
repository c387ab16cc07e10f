//! Errors of the matrix operations (products, exports, pictures).

use std::path::PathBuf;

/// Result alias of the `matrix` module.
pub type MatrixResult<T> = std::result::Result<T, MatrixError>;

/// What can go wrong when using a stored matrix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MatrixError {
    /// An error of the reader or of a file operation.
    #[error(transparent)]
    Crate(#[from] crate::Error),

    /// The tensor does not have the rank the operation needs.
    #[error("{op} needs a tensor of rank {needs}; {tensor:?} has rank {rank}")]
    Rank {
        /// The operation ("matvec", "export to mtx", ...).
        op: &'static str,
        /// The tensor's name.
        tensor: String,
        /// Its rank.
        rank: usize,
        /// What the operation needs, as text ("2", "at least 2").
        needs: &'static str,
    },

    /// A vector does not have the length the product needs.
    #[error(
        "{what} has {got} elements; the product needs {expected} (the matrix is {rows} x {cols}{transposed})"
    )]
    VectorLength {
        /// Which vector ("x").
        what: &'static str,
        /// Its length.
        got: usize,
        /// The length needed.
        expected: u64,
        /// Matrix rows.
        rows: u64,
        /// Matrix columns.
        cols: u64,
        /// ", transposed" when A^T x was asked for, else empty.
        transposed: &'static str,
    },

    /// A NaN or infinity in an input vector under the `error` policy.
    #[error(
        "x[{position}] = {value} is not finite (non-finite policy is `error`; allow it to let NaN and infinity propagate)"
    )]
    NonFiniteInput {
        /// Position of the first non-finite element.
        position: usize,
        /// Its value.
        value: f64,
    },

    /// A dimension does not fit this machine's address space.
    #[error("dimension of {extent} does not fit in memory on this machine")]
    TooLarge {
        /// The extent.
        extent: u64,
    },

    /// The operation needs entries sorted row-major (is_sorted = 1).
    #[error("{op} needs a matrix sorted row-major; {tensor:?} is not sorted ({hint})")]
    NotSorted {
        /// The operation.
        op: &'static str,
        /// The tensor.
        tensor: String,
        /// What to do instead.
        hint: &'static str,
    },

    /// `--symmetric` on a matrix that is not symmetric (or not square).
    #[error("the matrix is not symmetric: {detail}")]
    NotSymmetric {
        /// The first difference found.
        detail: String,
    },

    /// The matrix needs 64-bit indices in the target format and they were
    /// not enabled.
    #[error("{what} = {value} does not fit a 32-bit index; {hint}")]
    IndexTooLarge {
        /// Which quantity ("nnz", "rows", ...).
        what: &'static str,
        /// Its value.
        value: u64,
        /// What to do.
        hint: &'static str,
    },

    /// An export format that does not hold a tensor of this rank (a
    /// matrix to `.npy`, a vector to MatrixMarket or `.npz`).
    #[error(
        "export to {format} needs a tensor of rank {needs}; {tensor:?} has rank {rank}: {hint}"
    )]
    ExportRank {
        /// The format's name.
        format: &'static str,
        /// The tensor's name.
        tensor: String,
        /// Its rank.
        rank: usize,
        /// The rank the format holds.
        needs: &'static str,
        /// What to do instead.
        hint: &'static str,
    },

    /// An integer value that a float64 format (PETSc) would round: beyond
    /// 2^53 in magnitude.
    #[error(
        "{tensor:?} entry {entry} at {index}: the value {value} is beyond 2^53 in magnitude, which {format} (float64 values) would round; export it to {exact} to keep it exact"
    )]
    NotExactInDouble {
        /// The target format.
        format: &'static str,
        /// The tensor's name.
        tensor: String,
        /// The entry's position in storage order.
        entry: u64,
        /// Its coordinates, as text (`(3, 4)`, `[7]`).
        index: String,
        /// The value.
        value: i128,
        /// Formats that keep it exact.
        exact: &'static str,
    },

    /// A vector file that cannot be read as a vector.
    #[error("{path}: {detail}")]
    VectorFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },

    /// Options that cannot work.
    #[error("invalid option: {0}")]
    Options(String),

    /// A CSR or CSC matrix given to an operation that reads COO only
    /// (every public operation reads every layout today; kept for
    /// operations added later).
    #[error(
        "tensor {tensor:?} is stored as {layout}: {op} reads COO matrices only; convert it first (coo-assembler convert FILE OUT --to coo)"
    )]
    LayoutNotSupported {
        /// The operation.
        op: &'static str,
        /// The tensor.
        tensor: String,
        /// Its layout, upper case ("CSR", "CSC").
        layout: String,
    },

    /// `dense` on a matrix with too many elements.
    #[error("the dense form has {elements} elements ({shape}), more than the limit of {limit}")]
    TooManyElements {
        /// rows x cols.
        elements: u128,
        /// The shape as text.
        shape: String,
        /// The limit.
        limit: u64,
    },
}

impl MatrixError {
    /// The kind of this error (see [`crate::ErrorKind`]): what every front
    /// end maps.
    pub fn kind(&self) -> crate::ErrorKind {
        use crate::ErrorKind as K;
        match self {
            MatrixError::Crate(e) => e.kind(),
            MatrixError::Rank { .. } | MatrixError::ExportRank { .. } => K::Rank,
            MatrixError::NotExactInDouble { .. } => K::Value,
            MatrixError::Options(_) => K::Argument,
            MatrixError::VectorLength { .. } => K::Input,
            MatrixError::NonFiniteInput { .. } => K::Value,
            MatrixError::TooLarge { .. } | MatrixError::TooManyElements { .. } => K::Memory,
            MatrixError::NotSorted { .. } | MatrixError::LayoutNotSupported { .. } => {
                K::Unsupported
            }
            MatrixError::NotSymmetric { .. } => K::Value,
            MatrixError::IndexTooLarge { .. } => K::Argument,
            MatrixError::VectorFile { .. } => K::Input,
        }
    }
}
