//! What the readers share: the formats, the progress callback, the parsed
//! value, the entry sink, and the errors that name the input location.

use crate::assemble::combine::PushValue;
use crate::element::DType;
use crate::error::{Error, Result};

crate::vocab::vocabulary! {
    /// The formats `assemble` reads.
    pub enum InputFormat ("input format") {
        /// Records of `rank` u64 little-endian indices, then one value of the
        /// element type, little-endian; no header.
        Bin => "bin": "records of rank u64 LE indices then one LE value, no header",
        /// One entry per line: indices (0-based) then the value, separated by
        /// whitespace; `#` starts a comment.
        Text => "text" | "txt": "\"i j ... value\" per line, 0-based, # comments",
        /// FROSTT's sparse tensor text: the text format with 1-based
        /// indices; chosen by a `.tns` name (its lines look like text's).
        /// The shape, when not given, is the largest index of each mode.
        Tns => "tns" | "frostt": "FROSTT .tns: \"i j k ... value\" per line, 1-based, # comments (shape: the largest index per mode unless given)",
        /// MatrixMarket, coordinate (1-based; shape from the header) or dense
        /// `array`.
        Mtx => "mtx" | "matrixmarket": "MatrixMarket coordinate (real, integer, complex, pattern) or array (real, integer); general, symmetric, skew-symmetric, hermitian (complex); 1-based",
        /// A NumPy `.npy` array (dense; its non-zeros are stored).
        Npy => "npy": "NumPy .npy array (any rank, numeric dtype; its non-zeros are stored)",
    }
}

impl InputFormat {
    /// Whitespace text lines: `text` or `tns`.
    pub fn is_text(self) -> bool {
        matches!(self, InputFormat::Text | InputFormat::Tns)
    }

    /// The first index of a text format: 1 for `.tns`, else 0.
    pub fn first_index(self) -> u64 {
        u64::from(self == InputFormat::Tns)
    }
}

/// Called with the number of input bytes consumed so far.
pub type Progress<'a> = &'a mut dyn FnMut(u64);

/// One parsed entry, 0-based, with where it came from.
pub(crate) struct Entry<'a> {
    /// Line (text formats) or element/record number.
    pub(crate) at: u64,
    pub(crate) idx: &'a [u64],
    pub(crate) v: Parsed,
    /// The mirror of the entry on line `at` (a symmetric MatrixMarket file).
    pub(crate) mirrored: bool,
}

/// Where parsed entries go: a builder, or a search for a coordinate.
pub(crate) type Sink<'a> = &'a mut dyn FnMut(Entry<'_>) -> Result<()>;

pub(crate) fn input_err(source: &str, location: String, detail: impl Into<String>) -> Error {
    Error::Input {
        source_name: source.to_string(),
        location,
        detail: detail.into(),
        cause: None,
    }
}

/// Give a push error the input location (record or line) it came from.
pub(crate) fn at<'a>(
    source: &'a str,
    location: impl Fn() -> String + 'a,
) -> impl Fn(Error) -> Error + 'a {
    move |e| match e {
        Error::Io { .. } | Error::Poisoned(_) | Error::OutOfMemory { .. } => e,
        other => Error::Input {
            source_name: source.to_string(),
            location: location(),
            detail: other.to_string(),
            cause: Some(Box::new(other)),
        },
    }
}

/// A parsed text value, pushed with its natural type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Parsed {
    F(f64),
    I(i64),
    U(u64),
    /// A MatrixMarket `complex` value: real and imaginary parts.
    C(f64, f64),
}

impl Parsed {
    pub(crate) fn is_zero(self) -> bool {
        match self {
            Parsed::F(f) => f == 0.0,
            Parsed::I(i) => i == 0,
            Parsed::U(u) => u == 0,
            Parsed::C(re, im) => re == 0.0 && im == 0.0,
        }
    }
}

/// As the value it holds, so that a refused value reads as it did when
/// each was pushed with its own type.
impl std::fmt::Display for Parsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Parsed::F(v) => v.fmt(f),
            Parsed::I(v) => v.fmt(f),
            Parsed::U(v) => v.fmt(f),
            Parsed::C(re, im) => write!(f, "{re} {im}"),
        }
    }
}

/// Pushed as the value it holds: a parsed batch goes to the builder in
/// one `push_many`.
impl PushValue for Parsed {
    #[inline]
    fn to_raw(self, dtype: DType) -> std::result::Result<u64, &'static str> {
        match self {
            Parsed::F(v) => v.to_raw(dtype),
            Parsed::I(v) => v.to_raw(dtype),
            Parsed::U(v) => v.to_raw(dtype),
            Parsed::C(re, im) => crate::element::Complex::new(re, im).to_raw(dtype),
        }
    }

    #[inline]
    fn as_float(self) -> Option<f64> {
        match self {
            Parsed::F(v) => v.as_float(),
            Parsed::I(v) => v.as_float(),
            Parsed::U(v) => v.as_float(),
            Parsed::C(re, _) => Some(re),
        }
    }

    #[inline]
    fn to_raw_parts(self, part: DType) -> std::result::Result<(u64, u64), &'static str> {
        match self {
            Parsed::C(re, im) => crate::element::Complex::new(re, im).to_raw_parts(part),
            v => Ok((v.to_raw(part)?, 0)),
        }
    }

    #[inline]
    fn imag_float(self) -> Option<f64> {
        match self {
            Parsed::C(_, im) => Some(im),
            _ => None,
        }
    }
}
