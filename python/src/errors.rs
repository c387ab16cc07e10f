//! Library errors as the Python exceptions of `coo_assembler._errors`.
//!
//! The classes live in Python (they inherit from both our base class and a
//! builtin such as `ValueError`, which PyO3's `create_exception!` cannot
//! express); we look them up when raising, which is rare.

use coo_assembler::Error;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// The exception classes, by name in `coo_assembler._errors`.
#[derive(Clone, Copy)]
pub enum Kind {
    /// Base class: anything not covered below (a builder left unusable).
    Base,
    /// Bad input or options: `InputError` (also a `ValueError`).
    Input,
    /// Budget too small or allocation refused: `BudgetError` (a `MemoryError`).
    Budget,
    /// Operating-system I/O failure: `StorageError` (an `OSError`).
    Storage,
    /// Invalid, damaged or unsupported file: `InvalidFileError` (a `ValueError`).
    InvalidFile,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Base => "CooAssemblerError",
            Kind::Input => "InputError",
            Kind::Budget => "BudgetError",
            Kind::Storage => "StorageError",
            Kind::InvalidFile => "InvalidFileError",
        }
    }
}

/// A Python exception of `kind` carrying `message`.
pub fn raise(kind: Kind, message: String) -> PyErr {
    Python::attach(|py| {
        let class = py
            .import("coo_assembler._errors")
            .and_then(|m| m.getattr(kind.class_name()))
            .and_then(|c| Ok(c.cast_into::<PyType>()?));
        match class {
            Ok(c) => PyErr::from_type(c, message),
            // Only when the package is broken; keep the message anyway.
            Err(_) => pyo3::exceptions::PyRuntimeError::new_err(message),
        }
    })
}

/// Shorthand for an `InputError`.
pub fn input_error(message: impl Into<String>) -> PyErr {
    raise(Kind::Input, message.into())
}

/// The exception class for a library error.
pub fn kind_of(e: &Error) -> Kind {
    match e {
        Error::Io { .. } => Kind::Storage,
        Error::InvalidFile { .. } | Error::Unsupported(_) | Error::CorruptRun { .. } => {
            Kind::InvalidFile
        }
        Error::BudgetTooSmall { .. } | Error::OutOfMemory { .. } => Kind::Budget,
        Error::TensorNotFound { .. }
        | Error::WrongRank { .. }
        | Error::WrongIndexCount { .. }
        | Error::IndexOutOfRange { .. }
        | Error::PositionOutOfRange { .. }
        | Error::TypeMismatch { .. }
        | Error::InvalidArgument(_)
        | Error::InvalidValue { .. }
        | Error::DuplicateCoordinate { .. }
        | Error::IntegerOverflow { .. }
        | Error::OutOfOrder { .. }
        | Error::InvalidOptions(_)
        | Error::Input { .. }
        | Error::OutputIsInput { .. } => Kind::Input,
        _ => Kind::Base,
    }
}

/// A library error as a Python exception with the library's message.
pub fn to_py(e: Error) -> PyErr {
    raise(kind_of(&e), e.to_string())
}
