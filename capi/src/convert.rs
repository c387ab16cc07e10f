//! Checked conversions between the C types and the library's: enums given
//! as ints, `int64_t` indices, `double` values for integer tensors.

use crate::file::coo_layout;
use crate::{
    COO_ERR_ARGUMENT, COO_ERR_INDEX, COO_ERR_VALUE, Fail, Res, coo_dtype, coo_duplicates,
    coo_non_finite,
};
use coo_assembler::vocab::Vocabulary;
use coo_assembler::{
    DType, options::DuplicatePolicy, options::NonFinitePolicy, options::OutputLayout,
};
use std::ffi::{CStr, c_char, c_int};

/// A library value that crosses the C boundary as a code: the code of
/// each value is the explicit number of its name in the header's enum
/// (`coo_dtype`, `coo_duplicates`, `coo_non_finite`, `coo_layout`),
/// frozen once released (`tests/abi.rs`), never a position in a table.
pub(crate) trait CCode: Vocabulary + 'static {
    /// Every value with its code.
    const CODES: &'static [(c_int, Self)];
}

/// `$lib`'s values named by the variants of the C enum `$c`: the code is
/// the variant's number.
macro_rules! c_codes {
    ($lib:ty, $c:ident { $($cv:ident => $lv:expr),* $(,)? }) => {
        impl CCode for $lib {
            const CODES: &'static [(c_int, $lib)] = &[$(($c::$cv as c_int, $lv)),*];
        }
    };
}

c_codes!(DType, coo_dtype {
    COO_F16 => DType::F16,
    COO_BF16 => DType::BF16,
    COO_F32 => DType::F32,
    COO_F64 => DType::F64,
    COO_I8 => DType::I8,
    COO_U8 => DType::U8,
    COO_I16 => DType::I16,
    COO_U16 => DType::U16,
    COO_I32 => DType::I32,
    COO_U32 => DType::U32,
    COO_I64 => DType::I64,
    COO_U64 => DType::U64,
    COO_C64 => DType::C64,
    COO_C128 => DType::C128,
    COO_BOOL => DType::Bool,
});
c_codes!(DuplicatePolicy, coo_duplicates {
    COO_DUP_SUM => DuplicatePolicy::Sum,
    COO_DUP_MIN => DuplicatePolicy::Min,
    COO_DUP_MAX => DuplicatePolicy::Max,
    COO_DUP_LAST => DuplicatePolicy::Last,
    COO_DUP_ERROR => DuplicatePolicy::Error,
});
c_codes!(NonFinitePolicy, coo_non_finite {
    COO_KEEP => NonFinitePolicy::Keep,
    COO_REJECT_NAN => NonFinitePolicy::RejectNan,
    COO_REJECT_NON_FINITE => NonFinitePolicy::RejectNonFinite,
});
c_codes!(OutputLayout, coo_layout {
    COO_LAYOUT_COO => OutputLayout::Coo,
    COO_LAYOUT_CSR => OutputLayout::Csr,
    COO_LAYOUT_CSC => OutputLayout::Csc,
    COO_LAYOUT_CSF => OutputLayout::Csf,
});

/// The library value of the C code `code`.
pub(crate) fn from_c<T: CCode>(code: c_int) -> Res<T> {
    T::CODES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|&(_, v)| v)
        .ok_or_else(|| {
            let names: Vec<String> = T::CODES
                .iter()
                .map(|&(c, v)| format!("{c} = {}", v.name()))
                .collect();
            Fail::new(
                COO_ERR_ARGUMENT,
                format!("{code} is not a {} code ({})", T::WHAT, names.join(", ")),
            )
        })
}

/// The C code of `v` (-1 for a value the C API has no code for yet).
pub(crate) fn to_c<T: CCode>(v: T) -> c_int {
    T::CODES
        .iter()
        .find(|(_, x)| *x == v)
        .map_or(-1, |&(c, _)| c)
}

/// A NUL-terminated string as text (not a path: names and sizes).
///
/// # Safety
/// `s` is NULL or points to a NUL-terminated string.
pub(crate) unsafe fn c_str<'a>(s: *const c_char, what: &str) -> Res<&'a str> {
    if s.is_null() {
        return Err(Fail::null(what));
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    unsafe { CStr::from_ptr(s) }
        .to_str()
        .map_err(|_| Fail::new(COO_ERR_ARGUMENT, format!("{what} is not UTF-8")))
}

/// The caller's `rank` index arrays of `n` elements each (`indices[d]`,
/// named so in errors); `indices` may be NULL when `n == 0`.
///
/// # Safety
/// `indices` is NULL or points to `rank` pointers, each NULL or pointing
/// to `n` readable `T` that stay unchanged while the slices are used.
pub(crate) unsafe fn index_arrays<'a, T>(
    rank: usize,
    n: usize,
    indices: *const *const T,
) -> Res<Vec<&'a [T]>> {
    if n == 0 && indices.is_null() {
        return Ok(vec![&[]; rank]);
    }
    // SAFETY: `rank` pointers by the caller's contract.
    let ptrs = unsafe { slice(indices, rank, "indices") }?;
    ptrs.iter()
        .enumerate()
        // SAFETY: each NULL or `n` elements (the caller's contract).
        .map(|(d, &p)| unsafe { slice(p, n, &format!("indices[{d}]")) })
        .collect()
}

/// A caller's array of `n` elements as a slice; NULL is allowed when `n == 0`.
///
/// # Safety
/// `p` is NULL or points to `n` readable, initialised `T` that stay
/// unchanged while the slice is used.
pub(crate) unsafe fn slice<'a, T>(p: *const T, n: usize, what: &str) -> Res<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Fail::null(what));
    }
    if !p.is_aligned() {
        return Err(Fail::new(
            COO_ERR_ARGUMENT,
            format!("{what} is not aligned for its element type"),
        ));
    }
    // SAFETY: non-null, aligned, and `n` elements long by the caller's contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// `n` int64 indices checked to be >= 0 and seen as u64 (same bits), no
/// copy. A negative one is `COO_ERR_INDEX` with the message `negative(i, v)`.
///
/// # Safety
/// As [`slice`].
pub(crate) unsafe fn indices<'a>(
    p: *const i64,
    n: usize,
    what: &str,
    negative: impl FnOnce(usize, i64) -> String,
) -> Res<&'a [u64]> {
    // SAFETY: forwarded contract.
    let s = unsafe { slice(p, n, what) }?;
    if let Some(i) = s.iter().position(|&v| v < 0) {
        return Err(Fail::new(COO_ERR_INDEX, negative(i, s[i])));
    }
    // All non-negative: the same bits read as u64 are the same numbers.
    Ok(as_unsigned(s))
}

/// The message for a negative component `i` of a flat array of
/// contributions of rank `rank`, the first numbered `first`.
pub(crate) fn negative_component(rank: usize, first: u64) -> impl FnOnce(usize, i64) -> String {
    move |i, v| {
        let r = rank.max(1);
        negative_index(first + (i / r) as u64, i % r, v)
    }
}

/// The message for the negative index `v` of contribution `contribution`
/// in dimension `dim`.
pub(crate) fn negative_index(contribution: u64, dim: usize, v: i64) -> String {
    coo_assembler::Error::negative_index(contribution, dim, i128::from(v))
}

fn as_unsigned(s: &[i64]) -> &[u64] {
    // SAFETY: i64 and u64 have the same size and alignment, and every bit
    // pattern is valid for both.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u64>(), s.len()) }
}

/// Caller-owned output pointer as `&mut T`; NULL is `COO_ERR_NULL`.
///
/// # Safety
/// `p` is NULL or valid for writes of one `T`.
pub(crate) unsafe fn out_ref<'a, T>(p: *mut T, what: &str) -> Res<&'a mut T> {
    if p.is_null() {
        return Err(Fail::null(what));
    }
    if !p.is_aligned() {
        return Err(Fail::new(
            COO_ERR_ARGUMENT,
            format!("{what} is not aligned"),
        ));
    }
    // SAFETY: non-null, aligned, writable by the caller's contract.
    Ok(unsafe { &mut *p })
}

fn refused(v: f64, n: u64, reason: &str) -> Fail {
    Fail::new(
        COO_ERR_VALUE,
        format!("contribution {n}: value {v} refused: {reason}"),
    )
}

const NOT_INTEGRAL: &str = "an integer tensor takes integral values";
const DOES_NOT_FIT: &str = "the integer does not fit the tensor's element type";
/// 2^63 and 2^64 as f64 (exact).
const TWO_63: f64 = 9_223_372_036_854_775_808.0;
const TWO_64: f64 = 18_446_744_073_709_551_616.0;

/// A `double` for a signed (or narrower unsigned) integer tensor: it must be
/// integral; the library then checks it fits the element type. The error is
/// the reason, for callers that build the message themselves.
pub(crate) fn integral_i64(v: f64) -> Result<i64, &'static str> {
    if v.fract() != 0.0 {
        // Also NaN and infinities, whose fract() is NaN.
        return Err(NOT_INTEGRAL);
    }
    if !(-TWO_63..TWO_63).contains(&v) {
        return Err(DOES_NOT_FIT);
    }
    Ok(v as i64)
}

/// A `double` for a `COO_U64` tensor (see [`integral_i64`]).
pub(crate) fn integral_u64(v: f64) -> Result<u64, &'static str> {
    if v.fract() != 0.0 {
        return Err(NOT_INTEGRAL);
    }
    if !(0.0..TWO_64).contains(&v) {
        return Err(DOES_NOT_FIT);
    }
    Ok(v as u64)
}

/// [`integral_i64`] for contribution `n`, refused as `COO_ERR_VALUE`.
pub(crate) fn to_i64(v: f64, n: u64) -> Res<i64> {
    integral_i64(v).map_err(|r| refused(v, n, r))
}

/// [`integral_u64`] for contribution `n`, refused as `COO_ERR_VALUE`.
pub(crate) fn to_u64(v: f64, n: u64) -> Res<u64> {
    integral_u64(v).map_err(|r| refused(v, n, r))
}
