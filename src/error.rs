//! The one error type of the crate.
//!
//! Every variant names what was wrong and where (a byte offset, a tensor, a
//! contribution number, a coordinate), so that a message alone tells the user
//! what to fix.

use std::io;
use std::path::PathBuf;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in coo-assembler.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed. `op` says which call, `path` on what.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation that failed ("create", "write", "fsync", "rename", ...).
        op: &'static str,
        /// The file or directory it was applied to.
        path: PathBuf,
        /// The error the operating system gave.
        #[source]
        source: io::Error,
    },

    /// A Hurray file breaks a structural rule of the specification.
    #[error("invalid Hurray file: {section} at byte {offset}: {detail}")]
    InvalidFile {
        /// Which part of the file ("file header", "trailer", "descriptor of tensor \"a\"", ...).
        section: String,
        /// Absolute byte offset of the offending field, when known.
        offset: u64,
        /// The rule that was broken, with the values found.
        detail: String,
    },

    /// The file is valid Hurray but uses a feature this crate does not handle.
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// No tensor of that name in the file.
    #[error("no tensor named {name:?} in the file (it holds: {available})")]
    TensorNotFound {
        /// The requested name.
        name: String,
        /// The names the file holds, comma separated.
        available: String,
    },

    /// A contribution or query index has the wrong number of components.
    #[error(
        "contribution {contribution}: index has {got} components, the tensor has rank {expected}"
    )]
    WrongRank {
        /// 0-based number of the contribution (or query) in its stream.
        contribution: u64,
        /// The tensor's rank.
        expected: usize,
        /// Components given.
        got: usize,
    },

    /// A query (`get`, `find`, `lower_bound`, `prefix_range`) gave the wrong
    /// number of indices for the tensor.
    #[error("position {position:?}: expected {expected} indices, got {got}")]
    WrongIndexCount {
        /// The position queried.
        position: Vec<u64>,
        /// How many indices the query takes (the rank; for a prefix, at most).
        expected: usize,
        /// How many were given.
        got: usize,
    },

    /// A queried position lies outside the tensor's shape.
    #[error(
        "position {position:?}: index {index} in dimension {dim} is out of range (extent {extent})"
    )]
    PositionOutOfRange {
        /// The position queried.
        position: Vec<u64>,
        /// The dimension (0-based).
        dim: usize,
        /// The offending index.
        index: u64,
        /// The extent of that dimension.
        extent: u64,
    },

    /// A typed view asked for another element type than the tensor holds.
    #[error("tensor {tensor:?} holds {stored} values, not {requested}")]
    TypeMismatch {
        /// The tensor.
        tensor: String,
        /// The element type stored.
        stored: &'static str,
        /// The element type asked for.
        requested: &'static str,
    },

    /// An argument of a call that cannot work: lengths that do not match,
    /// too many pushers alive, a name or metadata entry that cannot be
    /// stored.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// An index component is outside the tensor's shape.
    #[error("contribution {contribution}: index {index} in dimension {dim} is out of range (extent {extent})")]
    IndexOutOfRange {
        /// 0-based number of the contribution (or query) in its stream.
        contribution: u64,
        /// The dimension (0-based).
        dim: usize,
        /// The offending index.
        index: u64,
        /// The extent of that dimension.
        extent: u64,
    },

    /// A value was refused by the value policy (NaN or infinity when forbidden).
    #[error("contribution {contribution}: value {value} refused: {reason}")]
    InvalidValue {
        /// 0-based number of the contribution in its stream.
        contribution: u64,
        /// The value, as text.
        value: String,
        /// Why it was refused.
        reason: &'static str,
    },

    /// A coordinate was given twice under the `error` duplicate policy.
    #[error("duplicate contributions at coordinate {coordinate:?} (duplicate policy is `error`)")]
    DuplicateCoordinate {
        /// The coordinate.
        coordinate: Vec<u64>,
    },

    /// An integer combination does not fit the element type.
    #[error(
        "integer overflow at coordinate {coordinate:?}: the combined value does not fit {dtype}"
    )]
    IntegerOverflow {
        /// The coordinate.
        coordinate: Vec<u64>,
        /// The element type.
        dtype: &'static str,
    },

    /// Entries given to a writer out of order or repeated.
    #[error("entry {entry}: coordinate {got:?} does not come strictly after {previous:?}")]
    OutOfOrder {
        /// 0-based entry number.
        entry: u64,
        /// The previous coordinate.
        previous: Vec<u64>,
        /// The coordinate that broke the order.
        got: Vec<u64>,
    },

    /// Options that cannot work.
    #[error("invalid option: {0}")]
    InvalidOptions(String),

    /// The memory budget is below what the assembler needs to make progress.
    #[error("memory budget of {budget} bytes is too small: at least {minimum} bytes are needed")]
    BudgetTooSmall {
        /// The budget given.
        budget: u64,
        /// The smallest budget that works for this shape and type.
        minimum: u64,
    },

    /// A spill run (a temporary file of ours) failed its checks.
    #[error("spill run {run}: {detail}")]
    CorruptRun {
        /// The run's number.
        run: u64,
        /// What check failed.
        detail: String,
    },

    /// A memory allocation inside the budget could not be made.
    #[error("out of memory: could not allocate {bytes} bytes for {what}")]
    OutOfMemory {
        /// What the memory was for.
        what: &'static str,
        /// How much was asked for.
        bytes: u64,
    },

    /// Input data (text, MatrixMarket or binary records) could not be
    /// parsed, or a contribution it holds was refused.
    #[error("{source_name}:{location}: {detail}")]
    Input {
        /// File name or `<stdin>`.
        source_name: String,
        /// "line N" or "record N".
        location: String,
        /// What is wrong.
        detail: String,
        /// The error the contribution met in the builder, when that is
        /// what went wrong (`detail` is then its message).
        #[source]
        cause: Option<Box<Error>>,
    },

    /// Another rank of an MPI job failed (issue 13): the collective
    /// operation stopped everywhere and nothing was published.
    #[error("rank {rank} of the MPI job failed: {detail}; nothing was published")]
    RankFailed {
        /// The first failing rank (-1 if unknown).
        rank: i32,
        /// Its error message (truncated to 239 bytes).
        detail: String,
    },

    /// A previous I/O error left this object unusable.
    #[error("an earlier error left this {0} unusable; start again")]
    Poisoned(&'static str),

    /// An output path names a file the same operation reads (the same
    /// file, through symbolic or hard links too): writing it would destroy
    /// the input.
    #[error("output {} is the input {}: writing it would destroy the input; choose another output path", output.display(), input.display())]
    OutputIsInput {
        /// The output path given.
        output: PathBuf,
        /// The input it names.
        input: PathBuf,
    },
}

impl Error {
    /// Shorthand for an [`Error::Io`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// Shorthand for an [`Error::InvalidFile`].
    pub fn invalid(section: impl Into<String>, offset: u64, detail: impl Into<String>) -> Self {
        Error::InvalidFile {
            section: section.into(),
            offset,
            detail: detail.into(),
        }
    }
}
