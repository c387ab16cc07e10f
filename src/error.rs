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

    /// No tensor of that name in the file (or, with an empty `name`, no
    /// name given where the file holds other than one tensor).
    #[error("{}", tensor_not_found(name, available))]
    TensorNotFound {
        /// The requested name; empty when none was given.
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
    /// a name or metadata entry that cannot be stored.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// An index component is outside the tensor's shape.
    #[error(
        "contribution {contribution}: index {index} in dimension {dim} is out of range (extent {extent})"
    )]
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

    /// A degree of freedom of an element is negative or outside the
    /// matrix, named as the element arrays hold it (`dofs[e, a]`).
    #[error("dofs[{element}, {local}] = {dof} {}", bad_dof_why(*dof, *extent))]
    BadDof {
        /// 0-based element.
        element: u64,
        /// 0-based position of the dof in its element.
        local: usize,
        /// The dof.
        dof: i128,
        /// The matrix's smaller extent (a dof is a row and a column).
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

    /// A shape the tensor cannot have (a rank outside 1..=64, an extent
    /// Hurray reserves, a layout that needs another rank), or shapes that
    /// disagree.
    #[error("shape {shape:?}: {detail}")]
    InvalidShape {
        /// The shape (as given; empty when none was).
        shape: Vec<u64>,
        /// What is wrong with it.
        detail: String,
    },

    /// The memory budget is below what the assembler needs to make progress.
    #[error("memory budget of {} is too small: at least {} is needed ({minimum} bytes) for {part}", crate::size::format_size(*budget), crate::size::format_size(*minimum))]
    BudgetTooSmall {
        /// The budget given.
        budget: u64,
        /// The smallest budget that works for this shape and type.
        minimum: u64,
        /// The part of the work that did not fit (e.g. "the sorters'
        /// chunks and scratch").
        part: &'static str,
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
    #[error("out of memory: could not allocate {} for {what}", size_and_bytes(*bytes))]
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

    /// An error found while merging (a duplicate under `error`, an integer
    /// overflow), told in the terms of the input files the contributions
    /// came from: the coordinate as the input writes it and the lines or
    /// records behind it.
    #[error("{source_name}: {detail}")]
    InInput {
        /// The input (a path, or `<stdin>`).
        source_name: String,
        /// The coordinate as the input numbers it, and where it is.
        detail: String,
        /// The error the merge met (its kind is this error's; not a
        /// `source`: `detail` already says all of it, and a printed chain
        /// would say it twice, in the merge's 0-based numbering).
        cause: Box<Error>,
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

    /// `finish` was called while pushers made from the builder are still
    /// alive; drop them (their contributions are kept) and call it again.
    #[error(
        "{alive} pusher(s) of this builder are still alive: drop them before finish (what they pushed is kept; the builder is still usable)"
    )]
    PushersAlive {
        /// How many.
        alive: usize,
    },

    /// The builder has finished (or a failure while writing ended it); no
    /// more contributions can be pushed.
    #[error("this builder has finished or was dropped; make a new one")]
    Finished,

    /// The caller stopped the work (a [`crate::builder::Stopper`], an
    /// interrupt): nothing was written, temporary files are removed.
    #[error("stopped by the caller: nothing was written, and the temporary files are removed")]
    Stopped,

    /// A composite reader ([`crate::read::CompositeFile`]) was given a file that
    /// holds no composite head: a plain Hurray file.
    #[error(
        "the file holds no composite head: it is a plain Hurray file (read it with HurrayFile, or open it with coo_assembler::open, which reads both)"
    )]
    NotComposite,

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

    /// A tensor whose layout the operation does not serve: a dense tensor
    /// given to `dump`, `get`, `matvec` or `to_scipy`. The file is valid;
    /// the message names the layout and what the operation reads.
    #[error("tensor {tensor:?} is {layout}; {op} serves {served}")]
    LayoutNotServed {
        /// The tensor.
        tensor: String,
        /// Its layout in words ("dense row-major").
        layout: String,
        /// The operation ("dump", "to_scipy"; "this reader" when the caller
        /// did not say, see [`Error::for_op`]).
        op: String,
        /// What the operation serves ("COO, CSR and CSC").
        served: &'static str,
    },
}

/// The words of [`Error::TensorNotFound`].
fn tensor_not_found(name: &str, available: &str) -> String {
    if name.is_empty() {
        let n = if available.is_empty() {
            0
        } else {
            available.split(", ").count()
        };
        if n == 0 {
            return "the file holds no tensor".to_string();
        }
        return format!("the file holds {n} tensors ({available}): name the one to use");
    }
    format!("no tensor named {name:?} in the file (it holds: {available})")
}

/// What is wrong with a dof, and for a negative one the option that skips
/// it (FE codes mark removed dofs with -1).
fn bad_dof_why(dof: i128, extent: u64) -> String {
    if dof < 0 {
        format!("is negative; {SKIP_HINT}")
    } else {
        format!("is out of range (extent {extent})")
    }
}

/// The fix a negative index names: every front end calls the option
/// `skip_negative` (Rust, Python, C and Fortran alike).
const SKIP_HINT: &str = "to skip the contributions of negative (removed) indices, \
     set the option skip_negative (Python: skip_negative=True)";

/// A size as people read it, with the exact count after it when the
/// unit rounds: "8 TiB (8796093022216 bytes)", "512 B".
fn size_and_bytes(bytes: u64) -> String {
    let size = crate::size::format_size(bytes);
    if bytes < 1024 {
        size
    } else {
        format!("{size} ({bytes} bytes)")
    }
}

impl Error {
    /// The error for component `dim` of contribution `contribution` (0-based
    /// in its stream) that is `index`, outside `0..extent`: one message for
    /// every front end, whether the index is negative (a signed input) or
    /// too large.
    pub fn bad_index(contribution: u64, dim: usize, index: i128, extent: u64) -> Self {
        match u64::try_from(index) {
            Ok(index) if index >= extent => Error::IndexOutOfRange {
                contribution,
                dim,
                index,
                extent,
            },
            _ => Error::InvalidArgument(Self::negative_index(contribution, dim, index)),
        }
    }

    /// The words for a negative index (`index`, component `dim` of
    /// contribution `contribution`), with the option that skips it: every
    /// front end says it so.
    pub fn negative_index(contribution: u64, dim: usize, index: i128) -> String {
        format!(
            "contribution {contribution}: index {index} in dimension {dim} is negative; {SKIP_HINT}"
        )
    }

    /// The words for a negative dof of one element matrix (`a`-th of its
    /// dofs), with the option that skips it.
    pub fn negative_element_dof(a: usize, dof: i128) -> String {
        format!("element dof {a}: index {dof} is negative; {SKIP_HINT}")
    }

    /// This error as the operation `op` met it: an
    /// [`Error::LayoutNotServed`] names `op` (the reader's own accessors
    /// do not know which command or method called them); any other error
    /// is returned as it is.
    pub fn for_op(self, op: &str) -> Self {
        match self {
            Error::LayoutNotServed {
                tensor,
                layout,
                served,
                ..
            } => Error::LayoutNotServed {
                tensor,
                layout,
                op: op.to_string(),
                served,
            },
            other => other,
        }
    }

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

/// What kind of failure an error is: the one coarse classification every
/// front end maps (the command line's exit status, Python's exception
/// class, C's status code), as `std::io::ErrorKind` is for I/O errors. A
/// front end matches the kind, never the variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An argument or option that cannot work: an unknown name, a bad
    /// shape, lengths that differ, an output that is an input.
    Argument,
    /// No tensor of that name.
    NotFound,
    /// An index outside the tensor's shape.
    Index,
    /// An index tuple with the wrong number of components.
    Rank,
    /// A value refused by the element type or the value policy.
    Value,
    /// A coordinate given twice under the `error` duplicate policy.
    Duplicate,
    /// An integer combination that does not fit the element type.
    Overflow,
    /// Input data (text, MatrixMarket, npy, binary records) that cannot be
    /// read, or a contribution in it that was refused.
    Input,
    /// The memory budget is too small for the work.
    Budget,
    /// Memory could not be allocated.
    Memory,
    /// An operating-system I/O call failed, or data read back from our own
    /// temporary files was damaged.
    Io,
    /// A file that is not valid Hurray, or is damaged.
    InvalidFile,
    /// A valid file using a feature this crate does not read.
    Unsupported,
    /// The object cannot do this now (finished, pushers alive, poisoned by
    /// an earlier error).
    State,
    /// Another rank of an MPI job failed.
    Remote,
}

impl ErrorKind {
    /// Every kind, for the front ends' tests.
    pub const ALL: [ErrorKind; 15] = [
        ErrorKind::Argument,
        ErrorKind::NotFound,
        ErrorKind::Index,
        ErrorKind::Rank,
        ErrorKind::Value,
        ErrorKind::Duplicate,
        ErrorKind::Overflow,
        ErrorKind::Input,
        ErrorKind::Budget,
        ErrorKind::Memory,
        ErrorKind::Io,
        ErrorKind::InvalidFile,
        ErrorKind::Unsupported,
        ErrorKind::State,
        ErrorKind::Remote,
    ];

    /// A short name ("argument", "not-found", ...).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Argument => "argument",
            ErrorKind::NotFound => "not-found",
            ErrorKind::Index => "index",
            ErrorKind::Rank => "rank",
            ErrorKind::Value => "value",
            ErrorKind::Duplicate => "duplicate",
            ErrorKind::Overflow => "overflow",
            ErrorKind::Input => "input",
            ErrorKind::Budget => "budget",
            ErrorKind::Memory => "memory",
            ErrorKind::Io => "io",
            ErrorKind::InvalidFile => "invalid-file",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::State => "state",
            ErrorKind::Remote => "remote",
        }
    }

    /// The C API's status code for an error of this kind (`COO_ERR_*` in
    /// `coo_assembler.h`; the C API's test checks the header's constants
    /// against these).
    pub fn c_status(self) -> i32 {
        match self {
            ErrorKind::Argument => -2,
            ErrorKind::Index => -3,
            ErrorKind::Rank => -4,
            ErrorKind::Value => -5,
            ErrorKind::Duplicate => -6,
            ErrorKind::Overflow => -7,
            ErrorKind::Budget => -8,
            ErrorKind::Io => -9,
            ErrorKind::InvalidFile => -10,
            ErrorKind::State => -11,
            ErrorKind::Input => -14,
            ErrorKind::Memory => -15,
            ErrorKind::Unsupported => -16,
            ErrorKind::NotFound => -17,
            ErrorKind::Remote => -18,
        }
    }

    /// The Python exception class for an error of this kind (in
    /// `coo_assembler._errors`).
    pub fn python_class(self) -> &'static str {
        match self {
            ErrorKind::Argument
            | ErrorKind::NotFound
            | ErrorKind::Index
            | ErrorKind::Rank
            | ErrorKind::Value
            | ErrorKind::Duplicate
            | ErrorKind::Overflow
            | ErrorKind::Input => "InputError",
            ErrorKind::Budget | ErrorKind::Memory => "BudgetError",
            ErrorKind::Io => "StorageError",
            ErrorKind::InvalidFile | ErrorKind::Unsupported => "InvalidFileError",
            ErrorKind::State | ErrorKind::Remote => "CooAssemblerError",
        }
    }

    /// The command line's exit status for an error of this kind: 2 for a
    /// usage error (the command line itself is wrong), 1 otherwise.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Argument | ErrorKind::NotFound | ErrorKind::Budget => 2,
            ErrorKind::Index
            | ErrorKind::Rank
            | ErrorKind::Value
            | ErrorKind::Duplicate
            | ErrorKind::Overflow
            | ErrorKind::Input
            | ErrorKind::Memory
            | ErrorKind::Io
            | ErrorKind::InvalidFile
            | ErrorKind::Unsupported
            | ErrorKind::State
            | ErrorKind::Remote => 1,
        }
    }
}

impl Error {
    /// The kind of this error (see [`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { .. } | Error::CorruptRun { .. } => ErrorKind::Io,
            Error::InvalidFile { .. } => ErrorKind::InvalidFile,
            Error::Unsupported(_) | Error::LayoutNotServed { .. } => ErrorKind::Unsupported,
            Error::TensorNotFound { .. } => ErrorKind::NotFound,
            Error::WrongRank { .. } | Error::WrongIndexCount { .. } => ErrorKind::Rank,
            Error::PositionOutOfRange { .. }
            | Error::IndexOutOfRange { .. }
            | Error::BadDof { .. } => ErrorKind::Index,
            Error::TypeMismatch { .. }
            | Error::InvalidArgument(_)
            | Error::OutOfOrder { .. }
            | Error::InvalidOptions(_)
            | Error::InvalidShape { .. }
            | Error::NotComposite
            | Error::OutputIsInput { .. } => ErrorKind::Argument,
            Error::InvalidValue { .. } => ErrorKind::Value,
            Error::DuplicateCoordinate { .. } => ErrorKind::Duplicate,
            Error::IntegerOverflow { .. } => ErrorKind::Overflow,
            Error::BudgetTooSmall { .. } => ErrorKind::Budget,
            Error::OutOfMemory { .. } => ErrorKind::Memory,
            Error::Input { .. } => ErrorKind::Input,
            Error::InInput { cause, .. } => cause.kind(),
            Error::RankFailed { .. } => ErrorKind::Remote,
            Error::Poisoned(_) | Error::PushersAlive { .. } | Error::Finished | Error::Stopped => {
                ErrorKind::State
            }
        }
    }

    /// One error of every variant, for the tests that run each through the
    /// front ends (CLI exit status, Python class, C status).
    #[doc(hidden)]
    pub fn samples() -> Vec<Error> {
        let io = || std::io::Error::other("sample");
        let v = vec![
            Error::io("write", "/sample", io()),
            Error::invalid("trailer", 7, "sample"),
            Error::Unsupported("sample".into()),
            Error::TensorNotFound {
                name: "a".into(),
                available: "b".into(),
            },
            Error::WrongRank {
                contribution: 0,
                expected: 2,
                got: 3,
            },
            Error::WrongIndexCount {
                position: vec![1],
                expected: 2,
                got: 1,
            },
            Error::PositionOutOfRange {
                position: vec![5, 0],
                dim: 0,
                index: 5,
                extent: 3,
            },
            Error::TypeMismatch {
                tensor: "a".into(),
                stored: "f64",
                requested: "i32",
            },
            Error::InvalidArgument("sample".into()),
            Error::IndexOutOfRange {
                contribution: 0,
                dim: 1,
                index: 9,
                extent: 3,
            },
            Error::BadDof {
                element: 2,
                local: 1,
                dof: -1,
                extent: 3,
            },
            Error::InvalidValue {
                contribution: 0,
                value: "NaN".into(),
                reason: "sample",
            },
            Error::DuplicateCoordinate {
                coordinate: vec![1, 2],
            },
            Error::IntegerOverflow {
                coordinate: vec![1, 2],
                dtype: "i8",
            },
            Error::OutOfOrder {
                entry: 1,
                previous: vec![2],
                got: vec![1],
            },
            Error::InvalidOptions("sample".into()),
            Error::InvalidShape {
                shape: vec![],
                detail: "sample".into(),
            },
            Error::BudgetTooSmall {
                budget: 1,
                minimum: 2,
                part: "sample",
            },
            Error::CorruptRun {
                run: 0,
                detail: "sample".into(),
            },
            Error::OutOfMemory {
                what: "sample",
                bytes: 1,
            },
            Error::Input {
                source_name: "in.txt".into(),
                location: "line 1".into(),
                detail: "sample".into(),
                cause: None,
            },
            Error::InInput {
                source_name: "in.mtx".into(),
                detail: "sample".into(),
                cause: Box::new(Error::DuplicateCoordinate {
                    coordinate: vec![0],
                }),
            },
            Error::RankFailed {
                rank: 1,
                detail: "sample".into(),
            },
            Error::Poisoned("sample"),
            Error::PushersAlive { alive: 1 },
            Error::Finished,
            Error::Stopped,
            Error::NotComposite,
            Error::OutputIsInput {
                output: "/a".into(),
                input: "/a".into(),
            },
            Error::LayoutNotServed {
                tensor: "w".into(),
                layout: "dense row-major".into(),
                op: "dump".into(),
                served: "COO, CSR and CSC",
            },
        ];
        v
    }
}

/// Variants of [`Error`]; [`ordinal`] numbers them 0.. in declaration
/// order, and its exhaustive match makes a new variant a compile error
/// until it is numbered (and then [`Error::samples`]' test fails until it
/// has a sample).
#[cfg(test)]
const VARIANTS: usize = 30;

#[cfg(test)]
fn ordinal(e: &Error) -> usize {
    match e {
        Error::Io { .. } => 0,
        Error::InvalidFile { .. } => 1,
        Error::Unsupported(_) => 2,
        Error::TensorNotFound { .. } => 3,
        Error::WrongRank { .. } => 4,
        Error::WrongIndexCount { .. } => 5,
        Error::PositionOutOfRange { .. } => 6,
        Error::TypeMismatch { .. } => 7,
        Error::InvalidArgument(_) => 8,
        Error::IndexOutOfRange { .. } => 9,
        Error::BadDof { .. } => 10,
        Error::InvalidValue { .. } => 11,
        Error::DuplicateCoordinate { .. } => 12,
        Error::IntegerOverflow { .. } => 13,
        Error::OutOfOrder { .. } => 14,
        Error::InvalidOptions(_) => 15,
        Error::InvalidShape { .. } => 16,
        Error::BudgetTooSmall { .. } => 17,
        Error::CorruptRun { .. } => 18,
        Error::OutOfMemory { .. } => 19,
        Error::Input { .. } => 20,
        Error::InInput { .. } => 21,
        Error::RankFailed { .. } => 22,
        Error::Poisoned(_) => 23,
        Error::PushersAlive { .. } => 24,
        Error::Finished => 25,
        Error::Stopped => 26,
        Error::NotComposite => 27,
        Error::OutputIsInput { .. } => 28,
        Error::LayoutNotServed { .. } => 29,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_has_a_sample_and_a_kind() {
        let s = Error::samples();
        let ords: Vec<usize> = s.iter().map(ordinal).collect();
        assert_eq!(ords, (0..VARIANTS).collect::<Vec<_>>());
        let kinds: std::collections::HashSet<ErrorKind> = s.iter().map(Error::kind).collect();
        // Every kind but those only front ends give has a variant.
        for k in ErrorKind::ALL {
            assert!(kinds.contains(&k), "no variant of kind {k:?}");
        }
        let e = Error::samples()
            .pop()
            .unwrap()
            .for_op("to_scipy")
            .to_string();
        assert_eq!(
            e,
            "tensor \"w\" is dense row-major; to_scipy serves COO, CSR and CSC"
        );
        // Sizes in the library's format, the exact count kept.
        let e = Error::OutOfMemory {
            what: "the row pointers (indptr) of a CSR matrix: rows + 1 entries",
            bytes: 8 * ((1 << 40) + 1),
        };
        assert_eq!(
            e.to_string(),
            "out of memory: could not allocate 8 TiB (8796093022216 bytes) for the row \
             pointers (indptr) of a CSR matrix: rows + 1 entries"
        );
        let e = Error::OutOfMemory {
            what: "a run",
            bytes: 3_258_828,
        };
        assert_eq!(
            e.to_string(),
            "out of memory: could not allocate 3.1 MiB (3258828 bytes) for a run"
        );
        let e = Error::OutOfMemory {
            what: "a run",
            bytes: 100,
        };
        assert_eq!(
            e.to_string(),
            "out of memory: could not allocate 100 B for a run"
        );
        let mut codes = std::collections::HashSet::new();
        for k in ErrorKind::ALL {
            assert!(matches!(k.exit_code(), 1 | 2));
            assert!(codes.insert(k.c_status()), "{k:?} shares its C status");
        }
    }
}
