//! `coo_assemble_arrays` and `coo_assemble_arrays_i32`: a tensor assembled
//! from index and value arrays the caller holds, straight into a Hurray
//! file, in one call (issue 23).
//!
//! The library's `direct::assemble_arrays_to_file` does the work: its
//! in-memory kernel when the work fits the budget (the arrays read in
//! place, the result streamed into the file), the `Builder` otherwise;
//! either way the file is byte for byte the one `coo_builder_new` +
//! `coo_builder_push_many` + `coo_builder_finish` write for the same
//! contributions. This front end only sees the C arrays as slices, keeps
//! the C API's rule for `double` values into integer tensors (the one
//! `coo_builder_push_many` applies, `convert.rs`), and reports a negative
//! index as `COO_ERR_INDEX`, the C convention (the library calls it an
//! invalid argument).

use crate::COO_ERR_INDEX;
use crate::builder::{options_or_default, shape_from_c, summary_to_c};
use crate::convert::{from_c, index_arrays, integral_i64, integral_u64, negative_index, slice};
use crate::{COO_ERR_ARGUMENT, DTypeArg, Fail, Res, c_path, coo_options, coo_summary, status};
use coo_assembler::internals::assemble::direct::{self, DirectValue, IndexElem};
use coo_assembler::{DType, ErrorKind, builder::PushValue, builder::Summary, element::Complex};
use std::ffi::{c_char, c_int, c_void};
use std::fmt;
use std::path::Path;
use std::time::Instant;

/// A `double` given for an integer tensor: it goes in as
/// `coo_builder_push_many` sends one (integral and in range, then the
/// library's range check for the element type), with the same message
/// when refused. Float tensors take the caller's doubles as they are,
/// never through this type; so the non-finite policy, a float tensor's,
/// does not apply here (NaN and infinities are not integral).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Integral(pub(crate) f64);

impl fmt::Display for Integral {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PushValue for Integral {
    fn to_raw(self, dtype: DType) -> Result<u64, &'static str> {
        match dtype {
            d if d.is_float() => self.0.to_raw(d),
            DType::U64 => integral_u64(self.0)?.to_raw(dtype),
            _ => integral_i64(self.0)?.to_raw(dtype),
        }
    }
    fn as_float(self) -> Option<f64> {
        None
    }
}

impl DirectValue for Integral {}

/// The value types a caller's `values` array may have, as `coo_dtype`
/// codes naming its C type: `double`, the C API's value type everywhere,
/// and `double _Complex` for complex tensors. The kernel takes any, but
/// each costs its own copy of it in the library (about 0.5 MB of code per
/// index type).
const VALUE_TYPES: &str = "COO_F64 (double), or COO_C128 (double _Complex) for a complex tensor";

/// The first negative index, by contribution then dimension, as the
/// C API reports it (`coo_builder_push_many` checks every index for a
/// negative one before it pushes any).
pub(crate) fn first_negative<I: IndexElem>(dims: &[&[I]]) -> Option<Fail> {
    let (i, d) = dims
        .iter()
        .enumerate()
        .filter_map(|(d, xs)| xs.iter().position(|x| x.is_negative()).map(|i| (i, d)))
        .min()?;
    // Sign-extended: the same number, read back as i64.
    let v = dims[d][i].widen() as i64;
    Some(Fail::new(COO_ERR_INDEX, negative_index(i as u64, d, v)))
}

/// The body of both entry points, for index arrays of `I`.
///
/// # Safety
/// As [`coo_assemble_arrays`], with `I` for `int64_t`.
#[allow(clippy::too_many_arguments)]
unsafe fn assemble<I: IndexElem>(
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    n: usize,
    indices: *const *const I,
    values: *const c_void,
    value_type: DTypeArg,
    path: *const c_char,
    out: *mut coo_summary,
) -> Res<()> {
    let started = Instant::now();
    // SAFETY: `rank` int64 by the caller's contract.
    let extents = unsafe { shape_from_c(rank, shape) }?;
    let dtype: DType = from_c(dtype.0)?;
    let value_type: DType =
        from_c(value_type.0).map_err(|f| Fail::new(f.code, format!("value_type: {}", f.msg)))?;
    // SAFETY: the caller's contract.
    let opts = unsafe { options_or_default(options) }?;
    // What coo_builder_new would refuse, refused before the arrays are
    // looked at (as the budget is, below).
    opts.validate()
        .and_then(|()| opts.layout.check_rank(rank as usize))?;
    // SAFETY: NULL or NUL-terminated (the caller's contract).
    let path = unsafe { c_path(path, "path") }?;
    let rank = rank as usize;
    // SAFETY: the caller's contract.
    let dims: Vec<&[I]> = unsafe { index_arrays(rank, n, indices) }?;
    /// The caller's values as a slice of `V`, assembled.
    ///
    /// # Safety
    /// `values` is NULL or points to `n` initialised `V`.
    unsafe fn go<I: IndexElem, V: DirectValue>(
        extents: &[u64],
        dtype: DType,
        dims: &[&[I]],
        values: *const c_void,
        n: usize,
        path: &Path,
        opts: &coo_assembler::AssembleOptions,
    ) -> Res<coo_assembler::Result<Summary>> {
        // SAFETY: forwarded contract; `Integral` is an f64 (transparent).
        let values = unsafe { slice(values.cast::<V>(), n, "values") }?;
        Ok(direct::assemble_arrays_to_file(
            extents, dtype, dims, values, path, opts,
        ))
    }
    // SAFETY: (every arm) `values` holds `n` of the type `value_type`
    // names, by the caller's contract.
    let done = unsafe {
        match value_type {
            DType::F64 if dtype.is_float() => {
                go::<I, f64>(extents, dtype, &dims, values, n, &path, &opts)
            }
            DType::F64 => go::<I, Integral>(extents, dtype, &dims, values, n, &path, &opts),
            DType::C128 if dtype.is_complex() => {
                go::<I, Complex<f64>>(extents, dtype, &dims, values, n, &path, &opts)
            }
            other => Err(Fail::new(
                COO_ERR_ARGUMENT,
                format!("value_type {other}: this version reads values of {VALUE_TYPES}"),
            )),
        }
    }?;
    let s = done.map_err(|e| match e.kind() {
        // coo_builder_new's refusal: before any contribution is looked at.
        ErrorKind::Budget => Fail::from(e),
        // Under skip_negative a negative index is no error: the library's names the cause.
        _ if opts.skip_negative => Fail::from(e),
        _ => first_negative(&dims).unwrap_or_else(|| Fail::from(e)),
    })?;
    if !out.is_null() {
        // SAFETY: non-null and writable (the caller's contract); `write`
        // does not read the old value.
        unsafe { out.write(summary_to_c(&s, started.elapsed().as_secs_f64())) };
    }
    Ok(())
}

/// Assemble a tensor from arrays the caller holds straight into a new
/// Hurray file at `path`, in one call: what `coo_builder_new(rank, shape,
/// dtype, options)`, `coo_builder_push_many` of every contribution and
/// `coo_builder_finish(b, path, out)` do (the same file, byte for byte,
/// and the same errors for the same contributions), without a handle.
///
/// Contribution `i` (0 <= i < n) has the index `(indices[0][i], ...,
/// indices[rank-1][i])`: one array of `n` per dimension, 0-based, as
/// scipy's `coo_array((values, (rows, cols)))` takes them. Its value is
/// `values[i]`, of the C type `value_type` names: `COO_F64`, a `double`,
/// or for a complex tensor (`COO_C128`, `COO_C64`) also `COO_C128`, a C99
/// `double _Complex`. Doubles reach the tensor's element type as
/// `coo_builder_push_many` sends them: summed exactly into a float
/// tensor, integral and in range for an integer tensor, real values
/// (imaginary part 0) into a complex one; complex values as
/// `coo_builder_push_many_complex` sends them, each part summed exactly.
///
/// When the work fits `options->memory_budget`, the library's in-memory
/// kernel reads the arrays in place (no copy, no spill file) and streams
/// the result into the file; otherwise the contributions go through the
/// builder, spilling under the budget. Either way the arrays are only
/// read; they must not change during the call. `options` may be NULL
/// (the defaults), `out` may be NULL; every array may be NULL when `n` is
/// 0 (the file then holds an empty tensor). The call returns once the
/// file is written (temporary file, fsync, rename) or on error.
///
/// Errors, with `coo_last_error()` naming the argument, contribution or
/// coordinate:
/// - `COO_ERR_NULL`: `shape` or `path` is NULL; `indices`, an
///   `indices[d]` or `values` is NULL while `n > 0`;
/// - `COO_ERR_ARGUMENT`: `rank` outside 1..=64, a negative extent, an
///   unknown `dtype`, a `value_type` other than `COO_F64` (or `COO_C128`
///   for a complex tensor),
///   options `coo_builder_new` refuses, an empty path, a layout the rank
///   cannot take, an array not aligned for its type;
/// - `COO_ERR_BUDGET`: the budget is too small (the message gives the
///   minimum);
/// - `COO_ERR_INDEX`: a negative index (the first, by contribution then
///   dimension, whatever else is wrong: `coo_builder_push_many` checks for
///   them first), or an index at or past its extent (the first such
///   contribution);
/// - `COO_ERR_VALUE`: a value refused (not integral or out of range for an
///   integer tensor, or refused by `options->non_finite`): the first such
///   contribution;
/// - `COO_ERR_DUPLICATE` (under `COO_DUP_ERROR`), `COO_ERR_OVERFLOW` (an
///   integer sum that does not fit the element type): the coordinate;
/// - `COO_ERR_IO`: the output cannot be written (a missing or read-only
///   folder, a full disk) or a spill file failed; `COO_ERR_MEMORY`: a
///   buffer could not be allocated; `COO_ERR_PANIC`: an internal error.
///
/// The arguments are checked before any work (the options and the budget
/// as `coo_builder_new` checks them: their errors come first); the
/// contributions' errors are the builder's (the first one met). On every
/// error nothing is published at `path` (a file already there is left as
/// it was) and no temporary or spill file is left behind; there is no
/// handle to free. Unlike `coo_builder_finish`, a bad path is never
/// `COO_ERR_REFUSED` (no builder is kept): it is the error met writing
/// the file, e.g. `COO_ERR_IO` for a missing folder.
///
/// # Safety
/// `shape` is NULL or points to `rank` int64; `options` is NULL or points
/// to a `coo_options` filled by `coo_options_default`; `indices` is NULL
/// or points to `rank` pointers, each NULL or pointing to `n` int64;
/// `values` is NULL or points to `n` values of the type `value_type`
/// names; `path` is NULL or NUL-terminated; `out` is NULL or valid for
/// writing a `coo_summary`. No array changes during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_assemble_arrays(
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    n: usize,
    indices: *const *const i64,
    values: *const c_void,
    value_type: DTypeArg,
    path: *const c_char,
    out: *mut coo_summary,
) -> c_int {
    status(|| {
        // SAFETY: forwarded contract.
        unsafe {
            assemble(
                rank, shape, dtype, options, n, indices, values, value_type, path, out,
            )
        }
    })
}

/// `coo_assemble_arrays` with `int32_t` index arrays (as many finite
/// element codes hold them), read in place as well: the same file, the
/// same errors.
///
/// # Safety
/// As `coo_assemble_arrays`, with each `indices[d]` NULL or pointing to
/// `n` int32.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_assemble_arrays_i32(
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    n: usize,
    indices: *const *const i32,
    values: *const c_void,
    value_type: DTypeArg,
    path: *const c_char,
    out: *mut coo_summary,
) -> c_int {
    status(|| {
        // SAFETY: forwarded contract.
        unsafe {
            assemble(
                rank, shape, dtype, options, n, indices, values, value_type, path, out,
            )
        }
    })
}
