//! NumPy arrays of any integer or numeric dtype, read in chunks.
//!
//! Index arrays are read as `u64` and value arrays in their own type: a
//! chunk is a borrowed slice when the array is contiguous and already of
//! the type wanted (no copy), and is converted into a small reusable buffer
//! otherwise, so memory stays bounded whatever the caller passes.

use numpy::ndarray::{ArrayView1, ArrayView2, Axis};
use numpy::{
    Element as NpElement, PyArray1, PyArray2, PyArray3, PyArrayMethods, PyReadonlyArray1,
    PyReadonlyArray2, PyReadonlyArray3, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::prelude::*;

use crate::errors::input_error;

/// Entries converted per chunk: large enough that per-chunk overhead is
/// nothing, small enough that the buffers stay in cache (64 Ki x 8 bytes).
pub const CHUNK: usize = 1 << 16;

/// An integer type an index array may have.
pub trait IndexInt: Copy + Send + Sync + std::fmt::Display + 'static {
    /// The value as u64, or None when it is negative.
    fn to_u64(self) -> Option<u64>;
    /// The value widened, for messages and range checks.
    fn to_i128(self) -> i128;
}

macro_rules! index_int {
    ($($t:ty),*) => {$(
        impl IndexInt for $t {
            #[inline]
            fn to_u64(self) -> Option<u64> {
                u64::try_from(self).ok()
            }
            #[inline]
            fn to_i128(self) -> i128 {
                self as i128
            }
        }
    )*};
}
index_int!(u8, i8, u16, i16, u32, i32, u64, i64);

/// Smallest and largest value of a view (i128, so every type fits).
fn min_max<T: IndexInt + Ord>(v: &ArrayView1<'_, T>) -> Option<(i128, i128)> {
    let fold = |it: &mut dyn Iterator<Item = T>| {
        let first = it.next()?;
        let (lo, hi) = it.fold((first, first), |(lo, hi), x| (lo.min(x), hi.max(x)));
        Some((lo.to_i128(), hi.to_i128()))
    };
    match v.as_slice() {
        // The slice fold vectorises; the strided iterator is the fallback.
        Some(s) => fold(&mut s.iter().copied()),
        None => fold(&mut v.iter().copied()),
    }
}

/// A 1-D integer array, borrowed from a NumPy array.
pub enum Ints<'a> {
    U8(ArrayView1<'a, u8>),
    I8(ArrayView1<'a, i8>),
    U16(ArrayView1<'a, u16>),
    I16(ArrayView1<'a, i16>),
    U32(ArrayView1<'a, u32>),
    I32(ArrayView1<'a, i32>),
    U64(ArrayView1<'a, u64>),
    I64(ArrayView1<'a, i64>),
}

macro_rules! each_int {
    ($x:expr, $v:ident => $body:expr) => {
        match $x {
            Ints::U8($v) => $body,
            Ints::I8($v) => $body,
            Ints::U16($v) => $body,
            Ints::I16($v) => $body,
            Ints::U32($v) => $body,
            Ints::I32($v) => $body,
            Ints::U64($v) => $body,
            Ints::I64($v) => $body,
        }
    };
}

/// Where an index check failed: position in the array and the value.
pub struct BadIndex {
    pub position: usize,
    pub value: i128,
}

impl Ints<'_> {
    pub fn len(&self) -> usize {
        each_int!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True for a signed dtype (whose values may be negative).
    pub fn is_signed(&self) -> bool {
        matches!(
            self,
            Ints::I8(_) | Ints::I16(_) | Ints::I32(_) | Ints::I64(_)
        )
    }

    /// Check that every value is in `0..extent` (or negative, when
    /// `negative_ok`: `skip_negative` skips those): a fast min/max pass,
    /// and a scan for the first culprit only when that fails.
    pub fn check(&self, extent: u64, negative_ok: bool) -> Result<(), BadIndex> {
        each_int!(self, v => {
            match min_max(v) {
                None => return Ok(()),
                Some((lo, hi)) if (negative_ok || lo >= 0) && hi < extent as i128 => {
                    return Ok(())
                }
                Some(_) => {}
            }
            for (p, x) in v.iter().enumerate() {
                let ok = match x.to_u64() {
                    Some(u) => u < extent,
                    None => negative_ok,
                };
                if !ok {
                    return Err(BadIndex { position: p, value: x.to_i128() });
                }
            }
            Ok(())
        })
    }

    /// Entries `start..end` as u64. Call [`Ints::check`] first: negative
    /// values are not looked at here.
    pub fn chunk<'s>(&'s self, start: usize, end: usize, buf: &'s mut Vec<u64>) -> &'s [u64] {
        match self {
            Ints::U64(v) => {
                if let Some(s) = v.as_slice() {
                    return &s[start..end];
                }
            }
            Ints::I64(v) => {
                // Checked non-negative: the same bits as u64, no copy.
                if let Some(s) = v.as_slice() {
                    return bytemuck_cast(&s[start..end]);
                }
            }
            _ => {}
        }
        buf.clear();
        each_int!(self, v => buf.extend(
            v.slice(numpy::ndarray::s![start..end])
                .iter()
                .map(|x| x.to_i128() as u64)
        ));
        buf
    }
}

/// Reinterpret u64 chunks of signed arrays (negative values
/// sign-extended by [`Ints::chunk`]) as the i64 values they came from.
pub fn as_signed(s: &[u64]) -> &[i64] {
    // SAFETY: as in `bytemuck_cast`.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<i64>(), s.len()) }
}

/// Reinterpret non-negative i64 values as u64.
fn bytemuck_cast(s: &[i64]) -> &[u64] {
    // SAFETY: i64 and u64 have the same size and alignment and every bit
    // pattern is valid for both.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u64>(), s.len()) }
}

/// Readonly borrows of a 1-D integer array, one variant per dtype.
pub enum IntArr1<'py> {
    U8(PyReadonlyArray1<'py, u8>),
    I8(PyReadonlyArray1<'py, i8>),
    U16(PyReadonlyArray1<'py, u16>),
    I16(PyReadonlyArray1<'py, i16>),
    U32(PyReadonlyArray1<'py, u32>),
    I32(PyReadonlyArray1<'py, i32>),
    U64(PyReadonlyArray1<'py, u64>),
    I64(PyReadonlyArray1<'py, i64>),
}

/// Readonly borrows of a 2-D integer array, one variant per dtype.
pub enum IntArr2<'py> {
    U8(PyReadonlyArray2<'py, u8>),
    I8(PyReadonlyArray2<'py, i8>),
    U16(PyReadonlyArray2<'py, u16>),
    I16(PyReadonlyArray2<'py, i16>),
    U32(PyReadonlyArray2<'py, u32>),
    I32(PyReadonlyArray2<'py, i32>),
    U64(PyReadonlyArray2<'py, u64>),
    I64(PyReadonlyArray2<'py, i64>),
}

fn dtype_name(a: &Bound<'_, PyAny>) -> String {
    a.cast::<PyUntypedArray>()
        .map(|u| u.dtype().to_string())
        .unwrap_or_else(|_| "not an array".into())
}

/// Try each listed element type in turn: the first whose array type the
/// object is gets its readonly borrow wrapped in the matching variant.
macro_rules! borrow_as {
    ($obj:expr, $arr:ident, $enum:ident, [$($var:ident: $t:ty),*]) => {{
        let obj = $obj;
        $(
            if let Ok(a) = obj.cast::<$arr<$t>>() {
                Some($enum::$var(a.try_readonly().map_err(|e| input_error(format!("{e}")))?))
            } else
        )*
        { None }
    }};
}

impl<'py> IntArr1<'py> {
    pub fn borrow(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Self> {
        borrow_as!(obj, PyArray1, IntArr1,
            [U8: u8, I8: i8, U16: u16, I16: i16, U32: u32, I32: i32, U64: u64, I64: i64])
        .ok_or_else(|| {
            input_error(format!(
                "{what} must be a 1-D integer array, got {}",
                dtype_name(obj)
            ))
        })
    }

    pub fn view(&self) -> Ints<'_> {
        match self {
            IntArr1::U8(a) => Ints::U8(a.as_array()),
            IntArr1::I8(a) => Ints::I8(a.as_array()),
            IntArr1::U16(a) => Ints::U16(a.as_array()),
            IntArr1::I16(a) => Ints::I16(a.as_array()),
            IntArr1::U32(a) => Ints::U32(a.as_array()),
            IntArr1::I32(a) => Ints::I32(a.as_array()),
            IntArr1::U64(a) => Ints::U64(a.as_array()),
            IntArr1::I64(a) => Ints::I64(a.as_array()),
        }
    }
}

/// A 2-D integer array (element dofs), borrowed.
#[derive(Clone, Copy)]
pub enum Ints2<'a> {
    U8(ArrayView2<'a, u8>),
    I8(ArrayView2<'a, i8>),
    U16(ArrayView2<'a, u16>),
    I16(ArrayView2<'a, i16>),
    U32(ArrayView2<'a, u32>),
    I32(ArrayView2<'a, i32>),
    U64(ArrayView2<'a, u64>),
    I64(ArrayView2<'a, i64>),
}

macro_rules! each_int2 {
    ($x:expr, $v:ident => $body:expr) => {
        match $x {
            Ints2::U8($v) => $body,
            Ints2::I8($v) => $body,
            Ints2::U16($v) => $body,
            Ints2::I16($v) => $body,
            Ints2::U32($v) => $body,
            Ints2::I32($v) => $body,
            Ints2::U64($v) => $body,
            Ints2::I64($v) => $body,
        }
    };
}

macro_rules! int2_column {
    ($x:expr, $j:expr, [$($var:ident),*]) => {
        match $x {
            $(Ints2::$var(v) => Ints::$var(v.index_axis_move(Axis(1), $j)),)*
        }
    };
}

impl<'a> Ints2<'a> {
    pub fn dim(&self) -> (usize, usize) {
        each_int2!(self, v => v.dim())
    }

    /// Column j (all elements' j-th dof) as a 1-D view.
    pub fn column(&self, j: usize) -> Ints<'a> {
        int2_column!(*self, j, [U8, I8, U16, I16, U32, I32, U64, I64])
    }

    /// Rows `start..end` as u64, row after row (entry i's index at
    /// `[i*rank..(i+1)*rank]`): borrowed when the array is C-contiguous
    /// u64 or (checked non-negative) i64, converted into `buf` otherwise.
    pub fn rows_chunk<'s>(&'s self, start: usize, end: usize, buf: &'s mut Vec<u64>) -> &'s [u64] {
        let rank = self.dim().1;
        match self {
            Ints2::U64(v) => {
                if let Some(s) = v.as_slice() {
                    return &s[start * rank..end * rank];
                }
            }
            Ints2::I64(v) => {
                if let Some(s) = v.as_slice() {
                    return bytemuck_cast(&s[start * rank..end * rank]);
                }
            }
            _ => {}
        }
        buf.clear();
        each_int2!(self, v => buf.extend(
            v.slice(numpy::ndarray::s![start..end, ..])
                .iter()
                .map(|x| x.to_i128() as u64)
        ));
        buf
    }

    /// Row e (one element's dofs) as u64 into `buf`; checked beforehand.
    pub fn row_into(&self, e: usize, buf: &mut Vec<u64>) {
        buf.clear();
        each_int2!(self, v => buf.extend(v.row(e).iter().map(|x| x.to_i128() as u64)))
    }

    /// True for a signed dtype (whose values may be negative).
    pub fn is_signed(&self) -> bool {
        matches!(
            self,
            Ints2::I8(_) | Ints2::I16(_) | Ints2::I32(_) | Ints2::I64(_)
        )
    }

    /// All dofs are in `0..extent` (or negative, when `negative_ok`);
    /// else the first culprit as (element, local dof, value).
    pub fn check(&self, extent: u64, negative_ok: bool) -> Result<(), (usize, usize, i128)> {
        each_int2!(self, v => {
            for ((e, a), x) in v.indexed_iter() {
                let ok = match x.to_u64() {
                    Some(u) => u < extent,
                    None => negative_ok,
                };
                if !ok {
                    return Err((e, a, x.to_i128()));
                }
            }
            Ok(())
        })
    }
}

impl<'py> IntArr2<'py> {
    pub fn borrow(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Self> {
        borrow_as!(obj, PyArray2, IntArr2,
            [U8: u8, I8: i8, U16: u16, I16: i16, U32: u32, I32: i32, U64: u64, I64: i64])
        .ok_or_else(|| {
            input_error(format!(
                "{what} must be a 2-D integer array, got {}",
                dtype_name(obj)
            ))
        })
    }

    pub fn view(&self) -> Ints2<'_> {
        match self {
            IntArr2::U8(a) => Ints2::U8(a.as_array()),
            IntArr2::I8(a) => Ints2::I8(a.as_array()),
            IntArr2::U16(a) => Ints2::U16(a.as_array()),
            IntArr2::I16(a) => Ints2::I16(a.as_array()),
            IntArr2::U32(a) => Ints2::U32(a.as_array()),
            IntArr2::I32(a) => Ints2::I32(a.as_array()),
            IntArr2::U64(a) => Ints2::U64(a.as_array()),
            IntArr2::I64(a) => Ints2::I64(a.as_array()),
        }
    }
}

/// A value type NumPy and the builder both know.
pub trait Num: coo_assembler::builder::PushValue + NpElement + Send + Sync + 'static {}
impl Num for f64 {}
impl Num for f32 {}
impl Num for i8 {}
impl Num for u8 {}
impl Num for i16 {}
impl Num for u16 {}
impl Num for i32 {}
impl Num for u32 {}
impl Num for i64 {}
impl Num for u64 {}
impl Num for coo_assembler::element::Complex<f32> {}
impl Num for coo_assembler::element::Complex<f64> {}
impl Num for bool {}

/// Entries `start..end` of a 1-D view: borrowed when contiguous, gathered
/// into `buf` otherwise.
pub fn chunk_of<'s, T: Copy>(
    v: &'s ArrayView1<'_, T>,
    start: usize,
    end: usize,
    buf: &'s mut Vec<T>,
) -> &'s [T] {
    if let Some(s) = v.as_slice() {
        return &s[start..end];
    }
    buf.clear();
    buf.extend(v.slice(numpy::ndarray::s![start..end]).iter().copied());
    buf
}

/// A float16 array as float32 (exact: every float16 is a float32), which
/// the library takes for a float16 tensor with the same result; None for
/// any other object.
fn widen_float16<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    if dtype_name(obj) == "float16" {
        return Ok(Some(obj.call_method1("astype", ("float32",))?));
    }
    Ok(None)
}

/// Readonly borrows of a 1-D value array, one variant per dtype.
pub enum ValArr1<'py> {
    F64(PyReadonlyArray1<'py, f64>),
    F32(PyReadonlyArray1<'py, f32>),
    I8(PyReadonlyArray1<'py, i8>),
    U8(PyReadonlyArray1<'py, u8>),
    I16(PyReadonlyArray1<'py, i16>),
    U16(PyReadonlyArray1<'py, u16>),
    I32(PyReadonlyArray1<'py, i32>),
    U32(PyReadonlyArray1<'py, u32>),
    I64(PyReadonlyArray1<'py, i64>),
    U64(PyReadonlyArray1<'py, u64>),
    C64(PyReadonlyArray1<'py, coo_assembler::element::Complex<f32>>),
    C128(PyReadonlyArray1<'py, coo_assembler::element::Complex<f64>>),
    Bool(PyReadonlyArray1<'py, bool>),
}

/// Readonly borrows of a 3-D value array (element matrices).
pub enum ValArr3<'py> {
    F64(PyReadonlyArray3<'py, f64>),
    F32(PyReadonlyArray3<'py, f32>),
    I8(PyReadonlyArray3<'py, i8>),
    U8(PyReadonlyArray3<'py, u8>),
    I16(PyReadonlyArray3<'py, i16>),
    U16(PyReadonlyArray3<'py, u16>),
    I32(PyReadonlyArray3<'py, i32>),
    U32(PyReadonlyArray3<'py, u32>),
    I64(PyReadonlyArray3<'py, i64>),
    U64(PyReadonlyArray3<'py, u64>),
    C64(PyReadonlyArray3<'py, coo_assembler::element::Complex<f32>>),
    C128(PyReadonlyArray3<'py, coo_assembler::element::Complex<f64>>),
    Bool(PyReadonlyArray3<'py, bool>),
}

const VALUE_TYPES: &str =
    "float64, float32, float16, complex128, complex64, bool or an integer type";

impl<'py> ValArr1<'py> {
    pub fn borrow(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        let widened = widen_float16(obj)?;
        let obj = widened.as_ref().unwrap_or(obj);
        borrow_as!(obj, PyArray1, ValArr1,
            [F64: f64, F32: f32, I8: i8, U8: u8, I16: i16, U16: u16,
             I32: i32, U32: u32, I64: i64, U64: u64,
             C64: coo_assembler::element::Complex<f32>, C128: coo_assembler::element::Complex<f64>, Bool: bool])
        .ok_or_else(|| {
            input_error(format!(
                "values must be a 1-D array of {VALUE_TYPES}, got {}",
                dtype_name(obj)
            ))
        })
    }
}

impl<'py> ValArr3<'py> {
    pub fn borrow(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        let widened = widen_float16(obj)?;
        let obj = widened.as_ref().unwrap_or(obj);
        borrow_as!(obj, PyArray3, ValArr3,
            [F64: f64, F32: f32, I8: i8, U8: u8, I16: i16, U16: u16,
             I32: i32, U32: u32, I64: i64, U64: u64,
             C64: coo_assembler::element::Complex<f32>, C128: coo_assembler::element::Complex<f64>, Bool: bool])
        .ok_or_else(|| {
            input_error(format!(
                "element matrices must be a 3-D array of {VALUE_TYPES}, got {}",
                dtype_name(obj)
            ))
        })
    }
}

/// Run `$body` with `$v` bound to the typed array view of `$arr`
/// (a `ValArr1` or `ValArr3`, named by `$enum` and in scope).
#[macro_export]
macro_rules! with_values {
    ($enum:ident, $arr:expr, $v:ident => $body:expr) => {
        match $arr {
            $enum::F64(a) => {
                let $v = a.as_array();
                $body
            }
            $enum::F32(a) => {
                let $v = a.as_array();
                $body
            }
            $enum::I8(a) => {
                let $v = a.as_array();
                $body
            }
            $enum::U8(a) => {
                let $v = a.as_array();
                $body
            }
            $enum::I16(a) => {
                let $v = a.as_array();
                $body
            }
            $enum::U16(a) => {
                let $v = a.as_array();
                $body
            }
            $enum::I32(a) => {
                let $v = a.as_array();
                $body
            }
            $enum::U32(a) => {
                let $v = a.as_array();
                $body
            }
            $enum::I64(a) => {
                let $v = a.as_array();
                $body
            }
            $enum::U64(a) => {
                let $v = a.as_array();
                $body
            }
            $enum::C64(a) => {
                let $v = a.as_array();
                $body
            }
            $enum::C128(a) => {
                let $v = a.as_array();
                $body
            }
            $enum::Bool(a) => {
                let $v = a.as_array();
                $body
            }
        }
    };
}
pub use crate::with_values;
