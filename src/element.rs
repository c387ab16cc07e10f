//! Element types: the Hurray type tag, width, names, and typed access.

use crate::error::{Error, Result};
use crate::float::FloatFormat;
pub use crate::float::{BF16, F16};
/// The complex type of complex64 (`Complex<f32>`) and complex128
/// (`Complex<f64>`) elements, num-complex's.
pub use num_complex::Complex;
use std::fmt;

crate::vocab::vocabulary! {
    /// The element types a tensor can hold (Hurray Tier 1 numeric types).
    /// Names: the short ones (`f64`) and the long ones (`float64`); see
    /// [`crate::vocab`] for the grammar.
    pub enum DType ("element type") {
        /// IEEE 754 binary16.
        F16 => "f16" | "float16" | "half": "IEEE 754 half precision (16 bits)",
        /// bfloat16.
        BF16 => "bf16" | "bfloat16": "bfloat16 (8-bit exponent, 16 bits)",
        /// IEEE 754 binary32.
        F32 => "f32" | "float32" | "float": "IEEE 754 single precision",
        /// IEEE 754 binary64.
        F64 => "f64" | "float64" | "double": "IEEE 754 double precision (the default)",
        /// Signed 8-bit integer.
        I8 => "i8" | "int8": "signed 8-bit integer",
        /// Unsigned 8-bit integer.
        U8 => "u8" | "uint8": "unsigned 8-bit integer",
        /// Signed 16-bit integer.
        I16 => "i16" | "int16": "signed 16-bit integer",
        /// Unsigned 16-bit integer.
        U16 => "u16" | "uint16": "unsigned 16-bit integer",
        /// Signed 32-bit integer.
        I32 => "i32" | "int32": "signed 32-bit integer",
        /// Unsigned 32-bit integer.
        U32 => "u32" | "uint32": "unsigned 32-bit integer",
        /// Signed 64-bit integer.
        I64 => "i64" | "int64": "signed 64-bit integer",
        /// Unsigned 64-bit integer.
        U64 => "u64" | "uint64": "unsigned 64-bit integer",
        /// Two IEEE 754 binary32 (real, imaginary).
        C64 => "c64" | "complex64": "complex of two single precision floats (real, imaginary)",
        /// Two IEEE 754 binary64 (real, imaginary).
        C128 => "c128" | "complex128" | "complex": "complex of two double precision floats (real, imaginary)",
        /// Booleans, 8 per byte in a file (one byte, 0 or 1, in memory).
        Bool => "bool" | "boolean": "true or false, bit-packed in the file (a duplicate is true if any of its contributions is)",
    }
}

/// Every supported type, in tag order.
pub const ALL_DTYPES: [DType; 15] = [
    DType::F16,
    DType::BF16,
    DType::F32,
    DType::F64,
    DType::I8,
    DType::U8,
    DType::I16,
    DType::U16,
    DType::I32,
    DType::U32,
    DType::I64,
    DType::U64,
    DType::C64,
    DType::C128,
    DType::Bool,
];

impl DType {
    /// The Hurray element type tag.
    pub fn tag(self) -> u8 {
        match self {
            DType::F16 => 0x01,
            DType::BF16 => 0x02,
            DType::F32 => 0x03,
            DType::F64 => 0x04,
            DType::I8 => 0x10,
            DType::U8 => 0x11,
            DType::I16 => 0x12,
            DType::U16 => 0x13,
            DType::I32 => 0x14,
            DType::U32 => 0x15,
            DType::I64 => 0x16,
            DType::U64 => 0x17,
            DType::C64 => 0x50,
            DType::C128 => 0x51,
            DType::Bool => 0x20,
        }
    }

    /// The type for a tag. Unknown and reserved tags are errors.
    pub fn from_tag(tag: u8) -> Result<DType> {
        ALL_DTYPES
            .iter()
            .copied()
            .find(|d| d.tag() == tag)
            .ok_or_else(|| {
                Error::invalid(
                    "element type",
                    0,
                    format!("unknown element type tag 0x{tag:02x}"),
                )
            })
    }

    /// Bytes per element in memory: what an entry's value takes in a
    /// record, a reader's values view and a typed slice. Bool takes one
    /// byte here (0 or 1) and one bit in a file: see [`DType::stored_len`].
    pub fn width(self) -> usize {
        match self {
            DType::I8 | DType::U8 | DType::Bool => 1,
            DType::F16 | DType::BF16 | DType::I16 | DType::U16 => 2,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F64 | DType::I64 | DType::U64 | DType::C64 => 8,
            DType::C128 => 16,
        }
    }

    /// Bytes of a file's buffer of `n` elements: `n * width`, and for
    /// bool `ceil(n / 8)` (8 per byte, least significant bit first). None
    /// on overflow.
    pub fn stored_len(self, n: u64) -> Option<u64> {
        match self {
            DType::Bool => Some(n.div_ceil(8)),
            d => n.checked_mul(d.width() as u64),
        }
    }

    /// Bool (stored bit-packed)?
    pub fn is_bool(self) -> bool {
        self == DType::Bool
    }

    /// The NumPy name of the type (`float64`, ...; `bfloat16` is the name
    /// the `ml_dtypes` package gives it, NumPy itself has none).
    pub fn numpy_name(self) -> &'static str {
        match self {
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::I8 => "int8",
            DType::U8 => "uint8",
            DType::I16 => "int16",
            DType::U16 => "uint16",
            DType::I32 => "int32",
            DType::U32 => "uint32",
            DType::I64 => "int64",
            DType::U64 => "uint64",
            DType::C64 => "complex64",
            DType::C128 => "complex128",
            DType::Bool => "bool",
        }
    }

    /// Floating-point type?
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// The zero of this type, as a [`Value`] (what an implicit entry holds).
    pub fn zero(self) -> Value {
        if self.is_float() {
            Value::Float(0.0)
        } else if self.is_complex() {
            Value::Complex(0.0, 0.0)
        } else if self.is_signed_int() {
            Value::Int(0)
        } else {
            Value::UInt(0)
        }
    }

    /// A float narrower than f32 (f16, bf16)? NumPy exchanges these as
    /// float32 (scipy's sparse arrays refuse float16, NumPy has no
    /// bfloat16): in `.npz` exports, Python results and plans.
    pub fn is_narrow_float(self) -> bool {
        self.is_float() && self.width() < 4
    }

    /// Complex type (two floats: real, imaginary)?
    pub fn is_complex(self) -> bool {
        matches!(self, DType::C64 | DType::C128)
    }

    /// The float type of each part of a complex type (`None` otherwise):
    /// a complex value is assembled as its two parts, each summed exactly.
    pub fn complex_part(self) -> Option<DType> {
        match self {
            DType::C64 => Some(DType::F32),
            DType::C128 => Some(DType::F64),
            _ => None,
        }
    }

    /// Signed integer type?
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// The binary format of a float type, which exact sums round into
    /// (`None` for other types).
    pub(crate) fn float_format(self) -> Option<FloatFormat> {
        match self {
            DType::F16 => Some(FloatFormat::F16),
            DType::BF16 => Some(FloatFormat::BF16),
            DType::F32 => Some(FloatFormat::F32),
            DType::F64 => Some(FloatFormat::F64),
            _ => None,
        }
    }

    /// `v` rounded to the nearest value of this float type (round half to
    /// even), widened back to f64; `v` itself for any other type.
    pub(crate) fn round_float(self, v: f64) -> f64 {
        match self {
            DType::F16 => F16::from_f64(v).to_f64(),
            DType::BF16 => BF16::from_f64(v).to_f64(),
            DType::F32 => v as f32 as f64,
            _ => v,
        }
    }

    /// The range of an integer type (bool: 0..=1), `None` for the others.
    pub(crate) fn int_range(self) -> Option<(i128, i128)> {
        Some(match self {
            DType::I8 => (i8::MIN.into(), i8::MAX.into()),
            DType::U8 => (0, u8::MAX.into()),
            DType::I16 => (i16::MIN.into(), i16::MAX.into()),
            DType::U16 => (0, u16::MAX.into()),
            DType::I32 => (i32::MIN.into(), i32::MAX.into()),
            DType::U32 => (0, u32::MAX.into()),
            DType::I64 => (i64::MIN.into(), i64::MAX.into()),
            DType::U64 => (0, u64::MAX.into()),
            DType::Bool => (0, 1),
            _ => return None,
        })
    }

    /// Why an integer was refused for this type: the range it must fit.
    pub(crate) fn int_range_text(self) -> &'static str {
        match self {
            DType::I8 => "does not fit i8 (-128..=127)",
            DType::U8 => "does not fit u8 (0..=255)",
            DType::I16 => "does not fit i16 (-32768..=32767)",
            DType::U16 => "does not fit u16 (0..=65535)",
            DType::I32 => "does not fit i32 (-2147483648..=2147483647)",
            DType::U32 => "does not fit u32 (0..=4294967295)",
            DType::I64 => "does not fit i64",
            DType::U64 => "does not fit u64 (0..=18446744073709551615)",
            DType::Bool => "does not fit bool (0 or 1, false or true)",
            _ => "does not fit the element type",
        }
    }

    /// NumPy's type code without its byte order (`"f8"`, `"i1"`, `"c16"`,
    /// `"b1"`): what a `.npy` header's `descr` names. `None` for bfloat16,
    /// which NumPy does not have.
    pub fn npy_code(self) -> Option<&'static str> {
        Some(match self {
            DType::F16 => "f2",
            DType::BF16 => return None,
            DType::F32 => "f4",
            DType::F64 => "f8",
            DType::I8 => "i1",
            DType::U8 => "u1",
            DType::I16 => "i2",
            DType::U16 => "u2",
            DType::I32 => "i4",
            DType::U32 => "u4",
            DType::I64 => "i8",
            DType::U64 => "u8",
            DType::C64 => "c8",
            DType::C128 => "c16",
            DType::Bool => "b1",
        })
    }

    /// Decode one little-endian element to a [`Value`]. `bytes` must hold
    /// at least `width()` bytes.
    pub fn decode(self, bytes: &[u8]) -> Value {
        let b = |n: usize| -> [u8; 8] {
            let mut a = [0u8; 8];
            a[..n].copy_from_slice(&bytes[..n]);
            a
        };
        match self {
            DType::F16 => Value::Float(F16::from_le_bytes([bytes[0], bytes[1]]).to_f64()),
            DType::BF16 => Value::Float(BF16::from_le_bytes([bytes[0], bytes[1]]).to_f64()),
            DType::F32 => {
                Value::Float(f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as f64)
            }
            DType::F64 => Value::Float(f64::from_le_bytes(b(8))),
            DType::I8 => Value::Int(bytes[0] as i8 as i64),
            DType::U8 => Value::UInt(bytes[0] as u64),
            DType::Bool => Value::UInt(u64::from(bytes[0] != 0)),
            DType::I16 => Value::Int(i16::from_le_bytes([bytes[0], bytes[1]]) as i64),
            DType::U16 => Value::UInt(u16::from_le_bytes([bytes[0], bytes[1]]) as u64),
            DType::I32 => {
                Value::Int(i32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as i64)
            }
            DType::U32 => {
                Value::UInt(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as u64)
            }
            DType::I64 => Value::Int(i64::from_le_bytes(b(8))),
            DType::U64 => Value::UInt(u64::from_le_bytes(b(8))),
            DType::C64 => Value::Complex(
                f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as f64,
                f32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as f64,
            ),
            DType::C128 => {
                let mut hi = [0u8; 8];
                hi.copy_from_slice(&bytes[8..16]);
                Value::Complex(f64::from_le_bytes(b(8)), f64::from_le_bytes(hi))
            }
        }
    }
}

/// One element value, widened without loss for display and statistics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// Any float type, widened exactly to f64.
    Float(f64),
    /// Any signed integer type.
    Int(i64),
    /// Any unsigned integer type.
    UInt(u64),
    /// Any complex type: (real, imaginary), each widened exactly to f64.
    Complex(f64, f64),
}

impl Value {
    /// The value as f64 (rounded for 64-bit integers beyond 2^53; the real
    /// part of a complex value).
    pub fn to_f64(self) -> f64 {
        match self {
            Value::Float(v) => v,
            Value::Int(v) => v as f64,
            Value::UInt(v) => v as f64,
            Value::Complex(re, _) => re,
        }
    }

    /// What the statistics section takes of the value: [`Value::to_f64`],
    /// and for a complex value NaN if a part is NaN, else infinity if a
    /// part is infinite, else 0 (the section's range and moments are of
    /// real values; a complex tensor's says only nnz, sparsity, NaN, inf).
    pub fn stat_f64(self) -> f64 {
        match self {
            Value::Complex(re, im) if re.is_nan() || im.is_nan() => f64::NAN,
            Value::Complex(re, im) if re.is_infinite() || im.is_infinite() => f64::INFINITY,
            Value::Complex(..) => 0.0,
            v => v.to_f64(),
        }
    }

    /// `(real, imaginary)`: a complex value's parts, any other value as
    /// [`Value::to_f64`] with a zero imaginary part.
    pub fn to_complex(self) -> (f64, f64) {
        match self {
            Value::Complex(re, im) => (re, im),
            v => (v.to_f64(), 0.0),
        }
    }

    /// Little-endian bytes of this value as element type `dtype` (first
    /// `dtype.width()` bytes of the array). Floats round to the nearest
    /// value of a narrower float type; integers must fit the type; a float
    /// for an integer type or an integer for a float type is refused (None).
    /// A complex type takes a complex or a float value (imaginary part 0);
    /// a complex value goes into nothing else.
    pub fn to_le(self, dtype: DType) -> Option<[u8; 16]> {
        let mut out = [0u8; 16];
        let mut put = |b: &[u8]| out[..b.len()].copy_from_slice(b);
        match (self, dtype) {
            (Value::Complex(re, im), DType::C128) => {
                put(&re.to_le_bytes());
                out[8..].copy_from_slice(&im.to_le_bytes());
            }
            (Value::Complex(re, im), DType::C64) => {
                put(&(re as f32).to_le_bytes());
                out[4..8].copy_from_slice(&(im as f32).to_le_bytes());
            }
            (Value::Float(v), DType::C128 | DType::C64) => {
                return Value::Complex(v, 0.0).to_le(dtype);
            }
            (Value::Complex(..), _) | (_, DType::C64 | DType::C128) => return None,
            (Value::Float(v), DType::F64) => put(&v.to_le_bytes()),
            (Value::Float(v), DType::F32) => put(&(v as f32).to_le_bytes()),
            (Value::Float(v), DType::F16) => put(&F16::from_f64(v).to_le_bytes()),
            (Value::Float(v), DType::BF16) => put(&BF16::from_f64(v).to_le_bytes()),
            (Value::Float(_), _) => return None,
            (_, d) if d.is_float() => return None,
            (v, d) => {
                let x: i128 = match v {
                    Value::Int(i) => i as i128,
                    Value::UInt(u) => u as i128,
                    Value::Float(_) | Value::Complex(..) => return None,
                };
                let bytes = x.to_le_bytes();
                let w = d.width();
                let fits = if d.is_bool() {
                    (0..2).contains(&x)
                } else if d.is_signed_int() {
                    let lim = 1i128 << (w * 8 - 1);
                    (-lim..lim).contains(&x)
                } else {
                    (0..(1i128 << (w * 8))).contains(&x)
                };
                if !fits {
                    return None;
                }
                put(&bytes[..w]);
            }
        }
        Some(out)
    }

    /// True for an integer zero, a float +0.0 / -0.0, or a complex value
    /// whose parts are both zeros.
    pub fn is_zero(self) -> bool {
        match self {
            Value::Float(v) => v == 0.0,
            Value::Int(v) => v == 0,
            Value::UInt(v) => v == 0,
            Value::Complex(re, im) => re == 0.0 && im == 0.0,
        }
    }
}

/// Floats as Python's `repr` writes them, for f64 values.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Float(v) => f.write_str(&format_float(*v, DType::F64)),
            Value::Int(v) => write!(f, "{v}"),
            Value::UInt(v) => write!(f, "{v}"),
            Value::Complex(re, im) => f.write_str(&format_complex(*re, *im, DType::F64)),
        }
    }
}

impl Value {
    /// The value as text for a tensor of `dtype`: integers in full, floats
    /// with [`format_float`] (the shortest digits for that type), complex
    /// values as `(re+imj)` with the digits of their part type.
    pub fn repr(&self, dtype: DType) -> String {
        match self {
            Value::UInt(v) if dtype.is_bool() => (if *v == 0 { "false" } else { "true" }).into(),
            Value::Float(v) => format_float(*v, dtype),
            Value::Complex(re, im) => {
                format_complex(*re, *im, dtype.complex_part().unwrap_or(DType::F64))
            }
            other => other.to_string(),
        }
    }
}

/// `(re+imj)` as Python writes a complex, each part by [`format_float`]
/// for `part` (the imaginary part's sign always shown, `nan` as `+nanj`).
fn format_complex(re: f64, im: f64, part: DType) -> String {
    let i = format_float(im, part);
    let sign = if i.starts_with('-') { "" } else { "+" };
    format!("({}{sign}{i}j)", format_float(re, part))
}

/// `n` with thousands separators: `9,000,000`.
pub fn group_digits(n: u128) -> String {
    let d = n.to_string();
    let mut out = String::with_capacity(d.len() + d.len() / 3);
    for (k, c) in d.chars().enumerate() {
        if k > 0 && (d.len() - k) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `v` written with the fewest significant digits that read back to the
/// same value of `dtype` (an f32 value as an f32, not as the f64 it was
/// widened to), laid out as Python's `repr` does: positional from 1e-4 up
/// to 1e16 (`0.0001`, `1234.5`, `2.0`), with an exponent of at least two
/// digits outside (`1e-05`, `1e+16`, `5e-324`); `nan`, `inf`, `-inf`.
pub fn format_float(v: f64, dtype: DType) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    // Shortest round-trip digits in scientific form, e.g. "-1.2345e3".
    let sci = match dtype {
        DType::F32 => format!("{:e}", v as f32),
        DType::F16 | DType::BF16 => {
            let back = |t: &str| -> Option<u64> {
                let x: f64 = t.parse().ok()?;
                Some(if dtype == DType::F16 {
                    F16::from_f64(x).to_bits().into()
                } else {
                    BF16::from_f64(x).to_bits().into()
                })
            };
            let want = back(&format!("{v:e}"));
            (0..17)
                .map(|p| format!("{v:.p$e}"))
                .find(|t| back(t) == want)
                .unwrap_or_else(|| format!("{v:e}"))
        }
        _ => format!("{v:e}"),
    };
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mant) = match mant.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mant),
    };
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let digits = match digits.trim_end_matches('0') {
        "" => "0",
        d => d,
    };
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let body = if exp < 0 {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        } else if n <= exp + 1 {
            format!("{digits}{}.0", "0".repeat((exp + 1 - n) as usize))
        } else {
            let (a, b) = digits.split_at((exp + 1) as usize);
            format!("{a}.{b}")
        };
        format!("{sign}{body}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits.to_string()
        };
        let es = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{es}{:02}", exp.unsigned_abs())
    }
}

/// A Rust type that is stored as a Hurray element type.
///
/// Implemented for `f16`, `bf16`, `f32`, `f64` and the eight integer types.
pub trait Element: bytemuck::Pod + Copy + PartialEq + fmt::Debug + Send + Sync + 'static {
    /// The Hurray element type.
    const DTYPE: DType;
    /// Widen to a [`Value`].
    fn to_value(self) -> Value;
    /// Append the little-endian encoding.
    fn write_le(self, out: &mut Vec<u8>);
    /// Decode the little-endian encoding at the start of `bytes`, which
    /// holds at least `DTYPE.width()` bytes.
    fn from_le(bytes: &[u8]) -> Self;
}

/// The first `N` bytes of `b` as an array (`b` holds at least `N`).
#[inline]
fn le_array<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

/// Run code generic over [`Element`] for a run-time element type: the one
/// dispatch from a [`DType`] to its Rust type (`f64` for [`DType::F64`],
/// [`F16`], [`BF16`], `i8` ... `u64`, [`crate::element::Complex`]`<f32>` /
/// `<f64>`, [`Bit`]), so a new element type is one arm here.
///
/// - `with_element_type!(d, T => body)`: `body` once per type, `T` the
///   type (bool's is [`Bit`]).
/// - `with_element_type!(d, T => body, bool as B)`: bool's arm binds `B`
///   instead, for a caller whose generic code cannot take `Bit`.
/// - `with_element_type!(d, { float F => .., narrow H => .., int I => ..,
///   complex C => .., bool B => .. })`: one body per family, so each body
///   needs only its family's traits: `float` is f32 and f64
///   ([`FloatElement`]), `narrow` the floats narrower than f32, which
///   front ends and NumPy exports exchange as f32 (f16, bf16; also
///   [`FloatElement`], and `Into<f32>`), `int` the eight integer types,
///   `complex` the [`ComplexElement`]s, `bool` [`Bit`]. Every real type is
///   a [`RealElement`].
/// - `with_element_type!(d, real T => body, complex C => other)`: the same
///   with one body for every real type (bool's `T` is [`Bit`]).
#[doc(hidden)]
#[macro_export]
macro_rules! with_element_type {
    ($dtype:expr, $T:ident => $body:expr) => {
        $crate::with_element_type!($dtype, $T => $body, bool as $crate::element::Bit)
    };
    ($dtype:expr, $T:ident => $body:expr, bool as $B:ty) => {
        $crate::with_element_type!($dtype, {
            float $T => $body,
            narrow $T => $body,
            int $T => $body,
            complex $T => $body,
            bool __Bit => {
                #[allow(dead_code)]
                type $T = $B;
                $body
            },
        })
    };
    ($dtype:expr, real $T:ident => $real:expr, complex $C:ident => $complex:expr) => {
        $crate::with_element_type!($dtype, {
            float $T => $real,
            narrow $T => $real,
            int $T => $real,
            complex $C => $complex,
            bool $T => $real,
        })
    };
    ($dtype:expr, {
        float $F:ident => $float:expr,
        narrow $H:ident => $narrow:expr,
        int $I:ident => $int:expr,
        complex $C:ident => $complex:expr,
        bool $B:ident => $bool:expr $(,)?
    }) => {
        match $dtype {
            $crate::DType::F16 => {
                #[allow(dead_code)]
                type $H = $crate::element::F16;
                $narrow
            }
            $crate::DType::BF16 => {
                #[allow(dead_code)]
                type $H = $crate::element::BF16;
                $narrow
            }
            $crate::DType::F32 => {
                #[allow(dead_code)]
                type $F = f32;
                $float
            }
            $crate::DType::F64 => {
                #[allow(dead_code)]
                type $F = f64;
                $float
            }
            $crate::DType::I8 => {
                #[allow(dead_code)]
                type $I = i8;
                $int
            }
            $crate::DType::U8 => {
                #[allow(dead_code)]
                type $I = u8;
                $int
            }
            $crate::DType::I16 => {
                #[allow(dead_code)]
                type $I = i16;
                $int
            }
            $crate::DType::U16 => {
                #[allow(dead_code)]
                type $I = u16;
                $int
            }
            $crate::DType::I32 => {
                #[allow(dead_code)]
                type $I = i32;
                $int
            }
            $crate::DType::U32 => {
                #[allow(dead_code)]
                type $I = u32;
                $int
            }
            $crate::DType::I64 => {
                #[allow(dead_code)]
                type $I = i64;
                $int
            }
            $crate::DType::U64 => {
                #[allow(dead_code)]
                type $I = u64;
                $int
            }
            $crate::DType::C64 => {
                #[allow(dead_code)]
                type $C = $crate::element::Complex<f32>;
                $complex
            }
            $crate::DType::C128 => {
                #[allow(dead_code)]
                type $C = $crate::element::Complex<f64>;
                $complex
            }
            $crate::DType::Bool => {
                #[allow(dead_code)]
                type $B = $crate::element::Bit;
                $bool
            }
        }
    };
}

/// A real (not complex) element type: its value travels between the
/// reductions and a result in one u64 lane, as its raw form (f64 bits for
/// a float, i64 / u64 bits for an integer).
pub trait RealElement: Element {
    /// The stored element for a final value of this element type (the
    /// combiners' `finish` gives values that fit).
    fn from_value(v: Value) -> Self;
}

/// A float element type.
pub trait FloatElement: RealElement + Into<f64> {
    /// The nearest value of the type (round half to even).
    fn from_f64(v: f64) -> Self;
}

/// A complex element type: two parts of a float type (real, imaginary).
pub trait ComplexElement: Element {
    /// The parts' type.
    type Part: FloatElement;
    /// The value from its parts, each already a value of the part type.
    fn from_parts(re: f64, im: f64) -> Self;
}

macro_rules! impl_element {
    ($t:ty, $d:expr, $variant:ident, $conv:ty) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn to_value(self) -> Value {
                Value::$variant(<$conv>::from(self))
            }
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn from_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(le_array(bytes))
            }
        }
    };
}

impl_element!(f32, DType::F32, Float, f64);
impl_element!(f64, DType::F64, Float, f64);
impl_element!(i8, DType::I8, Int, i64);
impl_element!(i16, DType::I16, Int, i64);
impl_element!(i32, DType::I32, Int, i64);
impl_element!(i64, DType::I64, Int, i64);
impl_element!(u8, DType::U8, UInt, u64);
impl_element!(u16, DType::U16, UInt, u64);
impl_element!(u32, DType::U32, UInt, u64);
impl_element!(u64, DType::U64, UInt, u64);

impl Element for F16 {
    const DTYPE: DType = DType::F16;
    fn to_value(self) -> Value {
        Value::Float(self.to_f64())
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn from_le(bytes: &[u8]) -> Self {
        F16::from_le_bytes(le_array(bytes))
    }
}

impl Element for BF16 {
    const DTYPE: DType = DType::BF16;
    fn to_value(self) -> Value {
        Value::Float(self.to_f64())
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn from_le(bytes: &[u8]) -> Self {
        BF16::from_le_bytes(le_array(bytes))
    }
}

macro_rules! impl_complex_element {
    ($t:ty, $d:expr, $w:expr) => {
        impl Element for num_complex::Complex<$t> {
            const DTYPE: DType = $d;
            fn to_value(self) -> Value {
                Value::Complex(f64::from(self.re), f64::from(self.im))
            }
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.re.to_le_bytes());
                out.extend_from_slice(&self.im.to_le_bytes());
            }
            fn from_le(bytes: &[u8]) -> Self {
                num_complex::Complex::new(
                    <$t>::from_le_bytes(le_array(bytes)),
                    <$t>::from_le_bytes(le_array(&bytes[$w..])),
                )
            }
        }
    };
}

impl_complex_element!(f32, DType::C64, 4);
impl_complex_element!(f64, DType::C128, 8);

/// A bool as a reader's values view and a typed slice hold it: one byte,
/// 0 (false) or 1 (true). Files store bools 8 per byte; the reader
/// unpacks them when it opens the file (one byte per entry), so a bool
/// tensor's values are a `&[Bit]` like any other type's slice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct Bit(u8);

// SAFETY: a transparent u8; every value a reader or writer makes is 0 or
// 1, and any byte pattern is a valid (if non-canonical) Bit.
unsafe impl bytemuck::Zeroable for Bit {}
// SAFETY: as above; no padding, any bit pattern valid.
unsafe impl bytemuck::Pod for Bit {}

impl Bit {
    /// The bool.
    pub fn get(self) -> bool {
        self.0 != 0
    }
}

impl fmt::Display for Bit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.get())
    }
}

impl From<bool> for Bit {
    fn from(b: bool) -> Bit {
        Bit(u8::from(b))
    }
}

impl From<Bit> for bool {
    fn from(b: Bit) -> bool {
        b.get()
    }
}

impl Element for Bit {
    const DTYPE: DType = DType::Bool;
    fn to_value(self) -> Value {
        Value::UInt(u64::from(self.get()))
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(u8::from(self.get()));
    }
    fn from_le(bytes: &[u8]) -> Self {
        Bit(u8::from(bytes[0] != 0))
    }
}

macro_rules! real_float {
    ($($t:ty),*) => {$(
        impl RealElement for $t {
            #[inline(always)]
            fn from_value(v: Value) -> $t {
                <$t as FloatElement>::from_f64(v.to_f64())
            }
        }
    )*};
}
real_float!(f64, f32, F16, BF16);

impl FloatElement for f64 {
    #[inline(always)]
    fn from_f64(v: f64) -> f64 {
        v
    }
}
impl FloatElement for f32 {
    #[inline(always)]
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
}
impl FloatElement for F16 {
    #[inline(always)]
    fn from_f64(v: f64) -> F16 {
        F16::from_f64(v)
    }
}
impl FloatElement for BF16 {
    #[inline(always)]
    fn from_f64(v: f64) -> BF16 {
        BF16::from_f64(v)
    }
}

macro_rules! real_int {
    ($($t:ty),*) => {$(
        impl RealElement for $t {
            #[inline(always)]
            fn from_value(v: Value) -> $t {
                match v {
                    Value::Int(i) => i as $t,
                    Value::UInt(u) => u as $t,
                    Value::Float(f) | Value::Complex(f, _) => f as $t,
                }
            }
        }
    )*};
}
real_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// A bool result, one byte (0 or 1) as a reader's values hold it; the
/// combiners give 0 or 1 (any true contribution makes a true sum).
impl RealElement for Bit {
    #[inline(always)]
    fn from_value(v: Value) -> Bit {
        Bit::from(match v {
            Value::Int(i) => i != 0,
            Value::UInt(u) => u != 0,
            Value::Float(f) | Value::Complex(f, _) => f != 0.0,
        })
    }
}

impl ComplexElement for num_complex::Complex<f32> {
    type Part = f32;
    #[inline(always)]
    fn from_parts(re: f64, im: f64) -> Self {
        num_complex::Complex::new(re as f32, im as f32)
    }
}
impl ComplexElement for num_complex::Complex<f64> {
    type Part = f64;
    #[inline(always)]
    fn from_parts(re: f64, im: f64) -> Self {
        num_complex::Complex::new(re, im)
    }
}

/// Pack `bytes` (one per bool, zero meaning false) 8 per byte, least
/// significant bit first, appending `ceil(len / 8)` bytes to `out`; the
/// last byte's unused bits are zero, as the spec requires.
pub fn pack_bools(bytes: &[u8], out: &mut Vec<u8>) {
    out.extend(bytes.chunks(8).map(|group| {
        group
            .iter()
            .enumerate()
            .fold(0u8, |acc, (k, &b)| acc | (u8::from(b != 0) << k))
    }));
}

/// Unpack the first `n` bools of a bit-packed buffer into `out`, one byte
/// (0 or 1) each. `packed` holds at least `ceil(n / 8)` bytes.
pub fn unpack_bools(packed: &[u8], n: usize, out: &mut Vec<u8>) {
    out.extend((0..n).map(|i| (packed[i / 8] >> (i % 8)) & 1));
}

#[cfg(test)]
mod tests {
    use super::*;
    // The half crate, as an independent oracle of the narrow floats.
    use half::{bf16 as half_bf16, f16 as half_f16};

    /// A value pushed or stored into a bfloat16 tensor is rounded once to
    /// the nearest bfloat16 (through f32 it would round twice).
    #[test]
    fn bfloat16_values_round_once() {
        let v = 1796.0002397298813;
        assert_eq!(
            half_bf16::from_f64(v).to_f64(),
            1792.0,
            "the crate's double rounding"
        );
        assert_eq!(DType::BF16.round_float(v), 1800.0);
        let le = Value::Float(v).to_le(DType::BF16).unwrap();
        assert_eq!(BF16::from_le_bytes([le[0], le[1]]).to_f64(), 1800.0);
        assert_eq!(<BF16 as FloatElement>::from_f64(v).to_f64(), 1800.0);
        assert_eq!(
            <BF16 as RealElement>::from_value(Value::Float(-v)).to_f64(),
            -1800.0
        );
        for x in [f64::NAN, f64::INFINITY, -0.0, 3.5e38, 1e-40] {
            let b = BF16::from_f64(x);
            assert_eq!(b.is_nan(), x.is_nan());
            if !x.is_nan() {
                assert_eq!(b.to_f64(), FloatFormat::BF16.nearest(x), "{x:e}");
            }
        }
    }

    /// The formats' own rounding is the one the half crate and an `as f32`
    /// cast give, ties and subnormals and overflow included.
    #[test]
    fn a_format_rounds_as_the_crates_do() {
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut values = vec![
            1.0 + f64::EPSILON,
            65520.0,
            65519.99,
            5.960464477539063e-8,
            1e-9,
            3.4e38,
        ];
        for _ in 0..20000 {
            // Bit patterns around every exponent, and exact midpoints.
            let v = f64::from_bits(next());
            values.push(v);
            let h = half_f16::from_bits(next() as u16).to_f64();
            let h2 = half_f16::from_bits((next() as u16) & 0x7bff).to_f64();
            values.push((h + h2) / 2.0);
            let b = half_bf16::from_bits(next() as u16).to_f64();
            values.push(b * (1.0 + 2f64.powi(-9)));
        }
        for v in values.into_iter().filter(|v| v.is_finite()) {
            for v in [v, -v] {
                let f = FloatFormat::F16.nearest(v);
                assert_eq!(
                    f.to_bits(),
                    half_f16::from_f64(v).to_f64().to_bits(),
                    "f16 {v:e}"
                );
                // half's bf16::from_f64 goes through f32 (a double rounding:
                // 1796.00024 gives 1792, not 1800), so compare where the
                // value is an f32.
                if v as f32 as f64 == v {
                    let b = FloatFormat::BF16.nearest(v);
                    assert_eq!(
                        b.to_bits(),
                        half_bf16::from_f64(v).to_f64().to_bits(),
                        "bf16 {v:e}"
                    );
                }
                let s = FloatFormat::F32.nearest(v);
                assert_eq!(s.to_bits(), (v as f32 as f64).to_bits(), "f32 {v:e}");
            }
        }
    }

    #[test]
    fn floats_print_like_python_repr() {
        for (v, want) in [
            (1e-300, "1e-300"),
            (5e-324, "5e-324"),
            (1e-5, "1e-05"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (0.00012, "0.00012"),
            (1234.5, "1234.5"),
            (2.0, "2.0"),
            (-2.0, "-2.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (0.1, "0.1"),
            (-1.2345e-7, "-1.2345e-07"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (f64::NAN, "nan"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            let got = format_float(v, DType::F64);
            assert_eq!(got, want, "{v:e}");
            if v.is_finite() {
                assert_eq!(got.parse::<f64>().unwrap().to_bits(), v.to_bits(), "{got}");
            }
        }
        // The shortest digits of the element type, not of the widened f64.
        assert_eq!(format_float(f64::from(0.1f32), DType::F32), "0.1");
        assert_eq!(format_float(f64::from(1e-30f32), DType::F32), "1e-30");
        assert_eq!(format_float(F16::from_f32(0.1).to_f64(), DType::F16), "0.1");
        assert_eq!(
            format_float(BF16::from_f32(2.71).to_f64(), DType::BF16),
            "2.7"
        );
        assert_eq!(Value::Float(1e-300).to_string(), "1e-300");
        assert_eq!(Value::Int(-3).repr(DType::I8), "-3");
        assert_eq!(group_digits(9_000_000), "9,000,000");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
    }

    #[test]
    fn tags_round_trip_and_names_parse() {
        for d in ALL_DTYPES {
            assert_eq!(DType::from_tag(d.tag()).unwrap(), d);
            assert_eq!(d.name().parse::<DType>().unwrap(), d);
        }
        assert_eq!(DType::from_tag(0x20).unwrap(), DType::Bool);
        assert!(matches!(
            DType::from_tag(0x00),
            Err(Error::InvalidFile { .. })
        ));
        assert!(matches!(
            DType::from_tag(0xFF),
            Err(Error::InvalidFile { .. })
        ));
    }

    #[test]
    fn to_le_round_trips_through_decode() {
        for (v, d) in [
            (Value::Float(1.5), DType::F16),
            (Value::Float(-2.25), DType::BF16),
            (Value::Float(0.1), DType::F64),
            (Value::Int(-128), DType::I8),
            (Value::UInt(65535), DType::U16),
            (Value::Int(i64::MIN), DType::I64),
            (Value::UInt(u64::MAX), DType::U64),
        ] {
            let b = v.to_le(d).unwrap();
            assert_eq!(d.decode(&b), v, "{d}");
        }
        assert_eq!(Value::Int(128).to_le(DType::I8), None);
        assert_eq!(Value::Int(-1).to_le(DType::U32), None);
        assert_eq!(Value::Float(1.0).to_le(DType::I32), None);
        assert_eq!(Value::UInt(1).to_le(DType::F32), None);
    }

    #[test]
    fn bools_pack_lsb_first_with_zero_padding() {
        // The spec's example: [true, false, true, true, false] is 0x0D.
        let mut out = Vec::new();
        pack_bools(&[1, 0, 1, 1, 0], &mut out);
        assert_eq!(out, [0x0D]);
        let bits: Vec<u8> = (0..19).map(|i| u8::from(i % 3 == 0)).collect();
        out.clear();
        pack_bools(&bits, &mut out);
        assert_eq!(out.len(), 3);
        assert_eq!(out[2] >> 3, 0, "padding bits are zero");
        let mut back = Vec::new();
        unpack_bools(&out, bits.len(), &mut back);
        assert_eq!(back, bits);
        assert_eq!(DType::Bool.stored_len(9), Some(2));
        assert_eq!(DType::Bool.stored_len(0), Some(0));
        assert_eq!(Value::UInt(2).to_le(DType::Bool), None);
        assert_eq!(Value::UInt(1).repr(DType::Bool), "true");
    }

    #[test]
    fn decode_matches_write_le() {
        let mut buf = Vec::new();
        (-3i16).write_le(&mut buf);
        assert_eq!(DType::I16.decode(&buf), Value::Int(-3));
        buf.clear();
        F16::from_f64(1.5).write_le(&mut buf);
        assert_eq!(DType::F16.decode(&buf), Value::Float(1.5));
        buf.clear();
        u64::MAX.write_le(&mut buf);
        assert_eq!(DType::U64.decode(&buf), Value::UInt(u64::MAX));
    }
}
