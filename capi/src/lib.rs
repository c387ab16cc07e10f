//! The C ABI of coo-assembler: `libcoo_assembler.so` / `libcoo_assembler.a`
//! and the header `include/coo_assembler.h` (generated from this crate by
//! cbindgen, see `cbindgen.toml`; a test fails when the committed header is
//! stale).
//!
//! Conventions, for every function:
//! - handles are opaque pointers; a NULL handle or a NULL required pointer
//!   is `COO_ERR_NULL`, never a crash;
//! - indices are `int64_t` (Fortran has no unsigned integers); a negative
//!   index is `COO_ERR_INDEX`;
//! - functions return an `int` status: 0 (`COO_OK`) or a negative
//!   `COO_ERR_*` code; those that return a handle return NULL on error.
//!   Either way `coo_last_error()` / `coo_last_status()` say what happened
//!   on this thread;
//! - no panic crosses the boundary: one becomes `COO_ERR_PANIC`, and the
//!   handle it happened in is unusable afterwards (`COO_ERR_STATE`).
//!
//! Only items re-exported at the root of the `coo_assembler` crate or in
//! its public modules (`input`, `direct`) are used, so that the library's
//! internal modules can move freely.

// The C names are the API: lower-case types and upper-case enum variants.
#![allow(non_camel_case_types)]

mod arrays;
mod builder;
mod convert;
#[cfg(feature = "mpi")]
mod dist;
mod file;
mod live;
mod plan;

pub use arrays::*;
pub use builder::*;
#[cfg(feature = "mpi")]
pub use dist::*;
pub use file::*;
pub use plan::*;

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Success.
pub const COO_OK: c_int = 0;
/// A required pointer argument (a handle, an output, an array) is NULL.
pub const COO_ERR_NULL: c_int = -1;
/// An argument is invalid: an unknown enum value, a rank outside 1..=64, a
/// negative extent, arrays of inconsistent sizes, options that cannot work.
pub const COO_ERR_ARGUMENT: c_int = -2;
/// An index is negative or outside the tensor's shape.
pub const COO_ERR_INDEX: c_int = -3;
/// An index has the wrong number of components for the tensor
/// (e.g. `coo_builder_push_element` on a tensor whose rank is not 2).
pub const COO_ERR_RANK: c_int = -4;
/// A value was refused: not integral or out of range for an integer
/// tensor, or refused by the value policy.
pub const COO_ERR_VALUE: c_int = -5;
/// A coordinate was given twice under `COO_DUP_ERROR`.
pub const COO_ERR_DUPLICATE: c_int = -6;
/// An integer sum does not fit the tensor's element type.
pub const COO_ERR_OVERFLOW: c_int = -7;
/// The memory budget is too small for the work (the message gives the
/// smallest that works). Memory that could not be allocated is
/// `COO_ERR_MEMORY`.
pub const COO_ERR_BUDGET: c_int = -8;
/// An operating-system I/O call failed (bad path, disk full, permissions),
/// or a temporary spill file was damaged.
pub const COO_ERR_IO: c_int = -9;
/// The file is not a valid Hurray file, uses a feature this library does
/// not read, holds no such tensor, or failed `coo_file_verify`.
pub const COO_ERR_INVALID_FILE: c_int = -10;
/// The handle cannot do this now: a builder that was finished or freed
/// (push, finish, `coo_pusher_new`), a plan that was freed, a pusher whose
/// builder was freed, or an earlier internal error left the handle
/// unusable. (Pushers still alive at `coo_builder_finish` are
/// `COO_ERR_REFUSED`: the builder stays yours.) Only the misuse listed at
/// the top of this header as "Handles" is detected; the rest is undefined.
pub const COO_ERR_STATE: c_int = -11;
/// An internal error (a bug: please report it with the message).
pub const COO_ERR_PANIC: c_int = -12;
/// An error of a kind this version of the C API does not classify.
pub const COO_ERR_OTHER: c_int = -13;
/// Input data (text, MatrixMarket, npy, binary records) that cannot be
/// read, or a contribution in it that was refused (`coo_builder_push_file`).
pub const COO_ERR_INPUT: c_int = -14;
/// Memory could not be allocated (a plan of a 2^40-row CSR matrix needs
/// 8 TiB of row pointers): an error, never an abort. Writing such a file
/// is `COO_ERR_IO` when its file system has no room for it.
pub const COO_ERR_MEMORY: c_int = -15;
/// A valid file using a feature this library does not read.
pub const COO_ERR_UNSUPPORTED: c_int = -16;
/// No tensor of that name in the file.
pub const COO_ERR_NOT_FOUND: c_int = -17;
/// Another rank of an MPI job failed.
pub const COO_ERR_REMOTE: c_int = -18;
/// `coo_builder_finish` refused to start (a bad output path, an output that
/// is a pushed input, pushers still alive): nothing was merged and the
/// builder handle is still the caller's, with every contribution. Fix what
/// `coo_last_error()` names and call `coo_builder_finish` again, or
/// `coo_builder_free`. The only status after which a finish leaves the
/// handle alive.
pub const COO_ERR_REFUSED: c_int = -19;

/// The version of this C API (`coo_api_version()` gives the library's; a
/// program compares it with the header's `COO_API_VERSION`). 2: the
/// versioned `coo_options` (its `size` field), codes of the enums in the
/// library's table order, `coo_options_set`, `coo_builder_push_file`, the
/// status codes -14 to -19, validated builder handles and a refused
/// `coo_builder_finish` that keeps the handle (`COO_ERR_REFUSED`). 3:
/// `coo_options.skip_negative` and `coo_summary.skipped_negative` (the
/// summary grew: rebuild programs built against an API-2 header). 4:
/// `coo_file_verify_report` (the notes and warnings of a valid file). 5:
/// `coo_file_export` (MatrixMarket, scipy `.npz`, PETSc binary, `.npy`)
/// with `coo_export_options`. 6: every enum value spelt out and frozen
/// (the values of 5 unchanged), `coo_builder_push_values` and
/// `coo_pusher_push_values` (one push taking a `coo_push_form` and a
/// `coo_value_kind`, which the twelve push functions call). 7:
/// `COO_LAYOUT_CSF` (3) and `coo_options.mode_order_len` / `mode_order`.
pub const COO_API_VERSION: u32 = 7;

/// Largest rank of a tensor (the size of `coo_info.shape`).
pub const COO_MAX_RANK: u32 = 64;

/// Element type of a tensor. Values are passed as `double` and converted
/// to this type with the library's rules (see `docs/c-api.md`). Each code
/// is fixed (`coo_parse_name` reads the names); a new type takes a new
/// number.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum coo_dtype {
    COO_F16 = 0,
    COO_BF16 = 1,
    COO_F32 = 2,
    COO_F64 = 3,
    COO_I8 = 4,
    COO_U8 = 5,
    COO_I16 = 6,
    COO_U16 = 7,
    COO_I32 = 8,
    COO_U32 = 9,
    COO_I64 = 10,
    COO_U64 = 11,
    /// complex64: two floats (real, imaginary). Push with the `_complex`
    /// functions (a `double` pushed is a real value, imaginary part 0).
    COO_C64 = 12,
    /// complex128: two doubles (real, imaginary).
    COO_C128 = 13,
    /// bool, 8 per byte in the file: push 1.0 (true) or 0.0 (false); a
    /// duplicate is true if any contribution is; read back as 1.0 / 0.0.
    COO_BOOL = 14,
}

/// How contributions to the same coordinate combine (fixed codes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum coo_duplicates {
    /// Add them (floats: the correctly rounded exact sum).
    COO_DUP_SUM = 0,
    /// Keep the smallest.
    COO_DUP_MIN = 1,
    /// Keep the largest.
    COO_DUP_MAX = 2,
    /// Keep the last one (by pusher creation order, then push order).
    COO_DUP_LAST = 3,
    /// A second contribution to a coordinate is an error.
    COO_DUP_ERROR = 4,
}

/// What to do with NaN and infinite contributions (fixed codes).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum coo_non_finite {
    /// Keep them (they propagate through sums).
    COO_KEEP = 0,
    /// Refuse NaN.
    COO_REJECT_NAN = 1,
    /// Refuse NaN and infinities.
    COO_REJECT_NON_FINITE = 2,
}

/// What a push holds (`coo_builder_push_values`, `coo_pusher_push_values`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum coo_push_form {
    /// One contribution: `idx` holds `rank` indices, `values` one value;
    /// `n` is 1.
    COO_PUSH_ONE = 0,
    /// `n` contributions: contribution `i` has the indices
    /// `idx[i*rank .. (i+1)*rank]` and value `i` of `values`. On error, the
    /// contributions before the failing one may have been pushed.
    COO_PUSH_MANY = 1,
    /// A dense element matrix of a rank-2 tensor over `n` dofs: `idx`
    /// holds the dofs, value `a*n + b` goes to `(idx[a], idx[b])`. All or
    /// nothing: on error none of it is pushed.
    COO_PUSH_ELEMENT = 2,
}

/// How a push's values are given.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum coo_value_kind {
    /// One `double` per value (into a complex tensor: imaginary part 0).
    COO_VALUES_REAL = 0,
    /// Two `double`s per value, its real then its imaginary part (a C99
    /// `double _Complex` array, a Fortran `complex(c_double_complex)`
    /// array); complex tensors only.
    COO_VALUES_COMPLEX = 1,
}

/// A `coo_push_form` as it crosses the boundary (see [`DTypeArg`]).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct PushFormArg(pub c_int);

/// A `coo_value_kind` as it crosses the boundary (see [`DTypeArg`]).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct ValueKindArg(pub c_int);

/// A `coo_dtype` as it crosses the boundary: a plain `int`, so that a value
/// outside the enum is an error rather than undefined behaviour. The header
/// calls it `coo_dtype` (cbindgen.toml renames it).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct DTypeArg(pub c_int);

/// A `coo_duplicates` as it crosses the boundary (see [`DTypeArg`]).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct DuplicatesArg(pub c_int);

/// A C `bool` read from caller memory as a byte: some Fortran compilers
/// store `.true.` as 0xFF, which is not a valid Rust `bool`. Non-zero is
/// true. The header calls it `bool`.
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct BoolArg(pub u8);

/// Options of an assembly; fill with `coo_options_default` first, then set
/// fields directly or by name with `coo_options_set`. The struct is
/// versioned by its first field: later versions of the header only append
/// fields, and the library reads the fields within `size`, so a program
/// built against an older header keeps working.
#[repr(C)]
pub struct coo_options {
    /// `sizeof(coo_options)` as the caller's header declares it; set by
    /// `coo_options_default`. Do not change it.
    pub size: u32,
    /// Bytes all the assembler's buffers may use together (default 256 MiB).
    pub memory_budget: u64,
    /// Directory for spill files (a private subdirectory is made there);
    /// NULL: the system temporary directory. Copied by `coo_builder_new`.
    pub temp_dir: *const c_char,
    /// Sorting threads and the most pushers alive at once; 0: all cores.
    pub threads: u32,
    /// How duplicates combine (default `COO_DUP_SUM`).
    pub duplicates: DuplicatesArg,
    /// Drop entries whose combined value is zero (default false).
    pub drop_zeros: BoolArg,
    /// Exact float sums, bit-reproducible (default true); false: faster
    /// sums in arrival order.
    pub exact_sums: BoolArg,
    /// NaN and infinite contributions (default `COO_KEEP`). Since API 2.
    pub non_finite: NonFiniteArg,
    /// Layout of the file written (default `COO_LAYOUT_COO`). Since API 2.
    pub layout: LayoutArg,
    /// How many contributions are coming, when known (a planning hint: a
    /// wrong value changes speed only); 0: unknown. Since API 2.
    pub expected_contributions: u64,
    /// Name of the tensor in the file; NULL: "coo". Copied by
    /// `coo_builder_new`. Since API 2.
    pub tensor_name: *const c_char,
    /// Skip contributions with a negative index (PETSc's convention for
    /// removed rows and columns) instead of refusing them with
    /// `COO_ERR_INDEX`; `coo_summary.skipped_negative` counts them
    /// (default false). Since API 3: a struct of an API-2 header (its
    /// `size` ends before this field) reads as false.
    pub skip_negative: BoolArg,
    /// `COO_LAYOUT_CSF`: how many levels `mode_order` names; 0 (the
    /// default) is the identity order. Since API 7 (an older header's
    /// struct reads as 0).
    pub mode_order_len: u32,
    /// `COO_LAYOUT_CSF`: the dimension (0-based) stored at each level of
    /// the tree, outermost first, a permutation of `0..rank`; or set it by
    /// name: `coo_options_set(&o, "mode_order", "2,0,1")`. Since API 7.
    pub mode_order: [u32; 64],
}

/// A `coo_non_finite` as it crosses the boundary (see [`DTypeArg`]).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct NonFiniteArg(pub c_int);

/// A `coo_layout` as it crosses the boundary (see [`DTypeArg`]).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct LayoutArg(pub c_int);

/// What an assembly did, filled by `coo_builder_finish`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct coo_summary {
    pub contributions: u64,
    pub nnz: u64,
    pub runs_spilled: u64,
    pub merge_passes: u64,
    pub bytes_spilled: u64,
    pub peak_buffer_bytes: u64,
    /// Wall-clock seconds from `coo_builder_new` to the end of `coo_builder_finish`.
    pub seconds: f64,
    /// Contributions skipped for a negative index (`skip_negative`),
    /// counted in `contributions` too. Since API 3: the struct grew, so a
    /// program built against an older header must be rebuilt.
    pub skipped_negative: u64,
}

/// Shape and type of an open tensor, filled by `coo_file_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct coo_info {
    pub rank: u32,
    /// Extents of the first `rank` dimensions; the rest are 0.
    pub shape: [i64; 64],
    pub dtype: DTypeArg,
    pub nnz: u64,
    /// Entries are stored in row-major coordinate order.
    pub sorted: bool,
}

/// A failed call: the status code and the message for `coo_last_error`.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) code: c_int,
    pub(crate) msg: String,
}

impl Fail {
    pub(crate) fn new(code: c_int, msg: impl Into<String>) -> Fail {
        Fail {
            code,
            msg: msg.into(),
        }
    }

    pub(crate) fn null(what: &str) -> Fail {
        Fail::new(COO_ERR_NULL, format!("{what} is NULL"))
    }
}

impl From<coo_assembler::Error> for Fail {
    /// The status is the error's kind's (the library's table).
    fn from(e: coo_assembler::Error) -> Fail {
        Fail::new(e.kind().c_status(), e.to_string())
    }
}

pub(crate) type Res<T> = Result<T, Fail>;

thread_local! {
    /// This thread's last error: status and NUL-terminated message.
    static LAST: RefCell<(c_int, CString)> = RefCell::new((COO_OK, CString::default()));
}

fn record(code: c_int, msg: String) {
    // An interior NUL would truncate the C string; make it visible instead.
    let msg = CString::new(msg.replace('\0', "\\0")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = (code, msg));
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    format!("internal error (please report it): {what}")
}

/// Run `f`, catching panics; on failure record the error for this thread.
/// Returns the status code.
pub(crate) fn status(f: impl FnOnce() -> Res<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => COO_OK,
        Ok(Err(e)) => {
            record(e.code, e.msg);
            e.code
        }
        Err(p) => {
            record(COO_ERR_PANIC, panic_message(&*p));
            COO_ERR_PANIC
        }
    }
}

/// Run `f`, catching panics; a handle on success, NULL on failure.
pub(crate) fn handle<T>(f: impl FnOnce() -> Res<Box<T>>) -> *mut T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(b)) => Box::into_raw(b),
        Ok(Err(e)) => {
            record(e.code, e.msg);
            std::ptr::null_mut()
        }
        Err(p) => {
            record(COO_ERR_PANIC, panic_message(&*p));
            std::ptr::null_mut()
        }
    }
}

/// Run a destructor body, catching panics (they are recorded, not returned).
pub(crate) fn quietly(f: impl FnOnce()) {
    if let Err(p) = catch_unwind(AssertUnwindSafe(f)) {
        record(COO_ERR_PANIC, panic_message(&*p));
    }
}

/// A borrowed C string as a path. NULL is `COO_ERR_NULL`.
///
/// # Safety
/// `s` is NULL or points to a NUL-terminated string.
pub(crate) unsafe fn c_path(s: *const c_char, what: &str) -> Res<std::path::PathBuf> {
    if s.is_null() {
        return Err(Fail::null(what));
    }
    // SAFETY: non-null and NUL-terminated by the caller's contract.
    let bytes = unsafe { CStr::from_ptr(s) }.to_bytes();
    if bytes.is_empty() {
        return Err(Fail::new(COO_ERR_ARGUMENT, format!("{what} is empty")));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Ok(std::ffi::OsStr::from_bytes(bytes).into())
    }
    #[cfg(not(unix))]
    {
        std::str::from_utf8(bytes)
            .map(Into::into)
            .map_err(|_| Fail::new(COO_ERR_ARGUMENT, format!("{what} is not UTF-8")))
    }
}

/// The message of this thread's last failed call, or "" if none failed yet.
/// The pointer stays valid until the next failing call on this thread.
#[unsafe(no_mangle)]
pub extern "C" fn coo_last_error() -> *const c_char {
    // A thread being torn down has no message left: give a static "".
    LAST.try_with(|l| l.borrow().1.as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// The status code of this thread's last failed call, or `COO_OK` if none
/// failed yet. Useful after a function that returns NULL on error.
#[unsafe(no_mangle)]
pub extern "C" fn coo_last_status() -> c_int {
    LAST.try_with(|l| l.borrow().0).unwrap_or(COO_OK)
}

/// Record an error for this thread, as if a call had failed with `status`
/// and `message` (NULL: ""): for language bindings that check arguments
/// before calling in, so that `coo_last_error` reports their errors too.
///
/// # Safety
/// `message` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_set_last_error(status: c_int, message: *const c_char) {
    let msg = if message.is_null() {
        String::new()
    } else {
        // SAFETY: non-null and NUL-terminated by the caller's contract.
        unsafe { CStr::from_ptr(message) }
            .to_string_lossy()
            .into_owned()
    };
    quietly(|| record(status, msg));
}

/// A constant name for a status code: "COO_OK", "COO_ERR_INDEX", ...;
/// "unknown status" for any other value.
#[unsafe(no_mangle)]
pub extern "C" fn coo_status_name(status: c_int) -> *const c_char {
    let s: &'static CStr = match status {
        COO_OK => c"COO_OK",
        COO_ERR_NULL => c"COO_ERR_NULL",
        COO_ERR_ARGUMENT => c"COO_ERR_ARGUMENT",
        COO_ERR_INDEX => c"COO_ERR_INDEX",
        COO_ERR_RANK => c"COO_ERR_RANK",
        COO_ERR_VALUE => c"COO_ERR_VALUE",
        COO_ERR_DUPLICATE => c"COO_ERR_DUPLICATE",
        COO_ERR_OVERFLOW => c"COO_ERR_OVERFLOW",
        COO_ERR_BUDGET => c"COO_ERR_BUDGET",
        COO_ERR_IO => c"COO_ERR_IO",
        COO_ERR_INVALID_FILE => c"COO_ERR_INVALID_FILE",
        COO_ERR_STATE => c"COO_ERR_STATE",
        COO_ERR_PANIC => c"COO_ERR_PANIC",
        COO_ERR_OTHER => c"COO_ERR_OTHER",
        COO_ERR_INPUT => c"COO_ERR_INPUT",
        COO_ERR_MEMORY => c"COO_ERR_MEMORY",
        COO_ERR_UNSUPPORTED => c"COO_ERR_UNSUPPORTED",
        COO_ERR_NOT_FOUND => c"COO_ERR_NOT_FOUND",
        COO_ERR_REMOTE => c"COO_ERR_REMOTE",
        COO_ERR_REFUSED => c"COO_ERR_REFUSED",
        _ => c"unknown status",
    };
    s.as_ptr()
}

/// The C API version of the library (compare with the header's
/// `COO_API_VERSION`: a program built against another version's header
/// may not work).
#[unsafe(no_mangle)]
pub extern "C" fn coo_api_version() -> u32 {
    COO_API_VERSION
}

/// The library version, e.g. "0.1.0".
#[unsafe(no_mangle)]
pub extern "C" fn coo_version() -> *const c_char {
    const V: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    V.as_ptr().cast()
}
