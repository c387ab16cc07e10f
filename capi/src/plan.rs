//! `coo_plan`: assemble again with new values (issue 24). A plan is made
//! once from the coordinates alone (`coo_plan_new`, `coo_plan_elements`,
//! or read back with `coo_plan_load`); `coo_plan_assemble` then refills a
//! caller's value array in place, as often as wanted, bit for bit what a
//! full assembly of the same contributions stores.
//!
//! The library's `Plan` does the work; this front end sees the C arrays
//! as slices, keeps the C conventions the other entry points keep (a
//! negative index is `COO_ERR_INDEX` naming its position, first by
//! contribution then dimension, as `coo_assemble_arrays` reports it;
//! doubles reach an integer tensor by `coo_builder_push_many`'s rule), and
//! validates the handles as the builder's are validated: a call on a plan
//! that was freed is `COO_ERR_STATE`, a second free a no-op.
//!
//! A plan is immutable once made: every function but `coo_plan_free`
//! takes a `const coo_plan *`, and any number of threads may refill from
//! one plan at once, each into its own output.

use crate::arrays::{Integral, first_negative};
use crate::builder::{options_or_default, shape_from_c};
use crate::convert::{from_c, index_arrays, out_ref, slice, to_c};
use crate::file::out_slice;
use crate::live::Registry;
use crate::{
    COO_ERR_ARGUMENT, COO_ERR_INVALID_FILE, COO_ERR_STATE, DTypeArg, Fail, LayoutArg, Res, c_path,
    coo_options, handle, quietly, status,
};
use coo_assembler::internals::assemble::direct::{DirectValue, IndexElem, OutValue};
use coo_assembler::{
    AssembleOptions, DType, Error, ErrorKind, Plan, options::OutputLayout, plan::PlanFile,
};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::AtomicBool;

// Refills run from any thread at once on one plan: it must allow it.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<Plan>();
};

/// A plan (opaque): the output structure of an assembly and where each
/// contribution goes, computed once from the coordinates by
/// `coo_plan_new`, `coo_plan_new_i32`, `coo_plan_elements`,
/// `coo_plan_elements_i32` or read by `coo_plan_load`; released by
/// `coo_plan_free`. Immutable: every other `coo_plan_*` function takes a
/// `const coo_plan *` and may be called from several threads at once on
/// one plan.
pub struct coo_plan {
    plan: Plan,
}

/// What a plan is, filled by `coo_plan_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct coo_plan_details {
    pub rank: u32,
    /// Extents of the first `rank` dimensions; the rest are 0.
    pub shape: [i64; 64],
    /// Element type of the results (`coo_plan_assemble` takes `COO_F64`
    /// plans; `coo_plan_assemble_typed` every type).
    pub dtype: DTypeArg,
    /// Layout of the structure (`COO_LAYOUT_COO`, `COO_LAYOUT_CSR`,
    /// `COO_LAYOUT_CSC`).
    pub layout: LayoutArg,
    /// Entries of a result: the length of the `out` array of a refill
    /// (explicit zeros included).
    pub nnz: u64,
    /// Contributions a refill takes: the length of its `values` array.
    pub contributions: u64,
    /// Length of the `indices` array of `coo_plan_structure`: `nnz` for
    /// CSR and CSC (the minor index of each entry), `nnz * rank` for COO
    /// (each entry's index tuple).
    pub indices_len: u64,
    /// Length of the `pointers` array of `coo_plan_structure`: rows + 1
    /// for CSR, columns + 1 for CSC, 0 for COO.
    pub pointers_len: u64,
    /// Bytes the plan holds in memory.
    pub memory_bytes: u64,
    /// The digest of the coordinates the plan was made from: plans of
    /// other coordinates differ, plans of the same ones (as arrays of
    /// either index type or as elements, planned on as many threads)
    /// agree.
    pub digest: u64,
}

/// The plan handles alive now.
static PLANS: Registry = Registry::new();

/// The plan behind `p`, when it is a live handle.
fn live_plan<'a>(p: *const coo_plan) -> Res<&'a Plan> {
    if p.is_null() {
        return Err(Fail::null("plan"));
    }
    if !PLANS.contains(p) {
        return Err(Fail::new(
            COO_ERR_STATE,
            "not a live plan: it was freed (or not made by coo_plan_new, coo_plan_elements or \
             coo_plan_load)",
        ));
    }
    // SAFETY: registered when made and not yet unregistered, so the
    // allocation is live; not freed during the call (the contract).
    Ok(unsafe { &(*p).plan })
}

/// A registered handle for a plan made elsewhere (a builder's recording).
pub(crate) fn plan_handle(plan: Plan) -> *mut coo_plan {
    PLANS.register(Box::into_raw(Box::new(coo_plan { plan })))
}

/// A new plan handle, registered (NULL and the error recorded on failure).
fn new_handle(f: impl FnOnce() -> Res<Plan>) -> *mut coo_plan {
    PLANS.register(handle(|| Ok(Box::new(coo_plan { plan: f()? }))))
}

/// Errors met before any index is read: they stand whatever the indices
/// hold (the options, the budget, the shape).
fn before_indices(e: &Error) -> bool {
    matches!(e, Error::InvalidOptions(_) | Error::InvalidShape { .. })
        || e.kind() == ErrorKind::Budget
}

/// The body of `coo_plan_new` and `coo_plan_new_i32`.
///
/// # Safety
/// As [`coo_plan_new`], with `I` for `int64_t`.
unsafe fn plan_arrays<I: IndexElem>(
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    n: usize,
    indices: *const *const I,
) -> Res<Plan> {
    // SAFETY: forwarded contract.
    unsafe {
        with_coords(
            rank,
            shape,
            dtype,
            options,
            n,
            indices,
            |dims, ext, dt, o| Plan::new(dims, ext, dt, o, None),
        )
    }
}

/// Read the arguments every plan of index arrays takes, then `make` the
/// plan (in memory, or into a file): an error met after the indices were
/// read names the first negative index when there is one.
///
/// # Safety
/// As [`coo_plan_new`], with `I` for `int64_t`.
unsafe fn with_coords<I: IndexElem, T>(
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    n: usize,
    indices: *const *const I,
    make: impl FnOnce(&[&[I]], &[u64], DType, &AssembleOptions) -> coo_assembler::Result<T>,
) -> Res<T> {
    // SAFETY: `rank` int64 by the caller's contract.
    let extents = unsafe { shape_from_c(rank, shape) }?;
    let dtype: DType = from_c(dtype.0)?;
    // SAFETY: the caller's contract.
    let opts = unsafe { options_or_default(options) }?;
    opts.validate()
        .and_then(|()| opts.layout.check_rank(rank as usize))?;
    let rank = rank as usize;
    // SAFETY: the caller's contract.
    let dims: Vec<&[I]> = unsafe { index_arrays(rank, n, indices) }?;
    make(&dims, extents, dtype, &opts).map_err(|e| {
        // Under skip_negative a negative index is no error: the library's
        // names the cause.
        if before_indices(&e) || opts.skip_negative {
            Fail::from(e)
        } else {
            first_negative(&dims).unwrap_or_else(|| Fail::from(e))
        }
    })
}

/// The body of `coo_plan_elements` and `coo_plan_elements_i32`.
///
/// # Safety
/// As [`coo_plan_elements`], with `I` for `int64_t`.
unsafe fn plan_elements<I: IndexElem>(
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    elements: usize,
    k: usize,
    dofs: *const I,
) -> Res<Plan> {
    // SAFETY: 2 int64 by the caller's contract.
    let extents = unsafe { shape_from_c(2, shape) }?;
    let dtype: DType = from_c(dtype.0)?;
    // SAFETY: the caller's contract.
    let opts = unsafe { options_or_default(options) }?;
    opts.validate()?;
    if k == 0 {
        return Err(Fail::new(
            COO_ERR_ARGUMENT,
            "k = 0: an element has at least one degree of freedom",
        ));
    }
    let len = elements.checked_mul(k).ok_or_else(|| {
        Fail::new(
            COO_ERR_ARGUMENT,
            format!("elements = {elements} times k = {k} overflows"),
        )
    })?;
    // SAFETY: `elements * k` elements by the caller's contract.
    let dofs = unsafe { slice(dofs, len, "dofs") }?;
    // The library names a bad dof as `dofs[e, a]`, the element arrays'
    // own numbering, as every front end does.
    Plan::for_elements(dofs, k, [extents[0], extents[1]], dtype, &opts, None).map_err(Fail::from)
}

/// Plan the assembly of `n` contributions at the coordinates `indices`
/// into a tensor of `rank` dimensions (1..=64) with extents
/// `shape[0..rank]`, element type `dtype` and the layout, duplicate and
/// non-finite policies, summation, thread count and memory budget of
/// `options` (NULL: the defaults, which make a COO plan). Only the
/// coordinates are read: contribution `i` has the index `(indices[0][i],
/// ..., indices[rank-1][i])`, one array of `n` per dimension, 0-based, as
/// `coo_assemble_arrays` takes them (which may be NULL when `n` is 0). The
/// arrays are not kept: they may be freed or changed after the call.
///
/// The plan holds the result's structure (`coo_plan_structure`) and, for
/// each entry, where its contributions are; `coo_plan_assemble` then
/// refills a result from `n` values, bit for bit what
/// `coo_assemble_arrays` with the same arrays, values and options stores.
/// Explicit zeros are kept: `options->drop_zeros` is refused (it changes
/// the pattern with the values). The plan takes about 24 bytes per
/// contribution while it is made (`options->memory_budget` must allow it)
/// and `coo_plan_info`'s `memory_bytes` afterwards. NULL on error:
/// - `COO_ERR_NULL`: `shape` is NULL; `indices`, or an `indices[d]`, is
///   NULL while `n > 0`;
/// - `COO_ERR_ARGUMENT`: `rank` outside 1..=64, a negative extent, an
///   unknown `dtype`, options that cannot work or that a plan refuses
///   (`drop_zeros`), a layout the rank cannot take, an array not aligned,
///   2^32 contributions or more;
/// - `COO_ERR_BUDGET`: the budget is smaller than planning needs (the
///   message gives the minimum);
/// - `COO_ERR_INDEX`: a negative index (the first, by contribution then
///   dimension, whatever else is wrong) or one at or past its extent; the
///   message names the contribution and the dimension;
/// - `COO_ERR_DUPLICATE`: under `COO_DUP_ERROR`, a coordinate given twice;
/// - `COO_ERR_MEMORY`: the plan could not be allocated.
///
/// # Safety
/// `shape` is NULL or points to `rank` int64; `options` is NULL or points
/// to a `coo_options` filled by `coo_options_default`; `indices` is NULL
/// or points to `rank` pointers, each NULL or pointing to `n` int64 that
/// do not change during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_new(
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    n: usize,
    indices: *const *const i64,
) -> *mut coo_plan {
    // SAFETY: forwarded contract.
    new_handle(|| unsafe { plan_arrays(rank, shape, dtype, options, n, indices) })
}

/// `coo_plan_new` with `int32_t` index arrays (read in place as well):
/// the same plan, the same errors.
///
/// # Safety
/// As `coo_plan_new`, with each `indices[d]` NULL or pointing to `n`
/// int32.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_new_i32(
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    n: usize,
    indices: *const *const i32,
) -> *mut coo_plan {
    // SAFETY: forwarded contract.
    new_handle(|| unsafe { plan_arrays(rank, shape, dtype, options, n, indices) })
}

/// Plan the assembly of element matrices into a matrix of
/// `shape[0] x shape[1]`: `dofs` is an `elements x k` row-major array,
/// element `e`'s degrees of freedom at `dofs[e*k .. (e+1)*k]` (0-based),
/// and element `e` contributes `k * k` values, `ke[e*k*k + a*k + b]` going
/// to `(dofs[e*k + a], dofs[e*k + b])`: the contributions
/// `coo_builder_push_element(b, k, dofs + e*k, ke + e*k*k)` makes for
/// each element in turn, in that order. A refill then takes the
/// `elements * k * k` values of all the element matrices, one after the
/// other. `dtype`, `options` and the errors are `coo_plan_new`'s; an
/// index error names the element and the dof (`COO_ERR_INDEX`), `k = 0`
/// or `elements * k * k` of 2^32 or more is `COO_ERR_ARGUMENT`; `dofs` may
/// be NULL when `elements` is 0.
///
/// # Safety
/// `shape` is NULL or points to 2 int64; `options` as in
/// `coo_plan_new`; `dofs` is NULL or points to `elements * k` int64 that
/// do not change during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_elements(
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    elements: usize,
    k: usize,
    dofs: *const i64,
) -> *mut coo_plan {
    // SAFETY: forwarded contract.
    new_handle(|| unsafe { plan_elements(shape, dtype, options, elements, k, dofs) })
}

/// `coo_plan_elements` with an `int32_t` dof array: the same plan, the
/// same errors.
///
/// # Safety
/// As `coo_plan_elements`, with `dofs` NULL or pointing to `elements * k`
/// int32.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_elements_i32(
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    elements: usize,
    k: usize,
    dofs: *const i32,
) -> *mut coo_plan {
    // SAFETY: forwarded contract.
    new_handle(|| unsafe { plan_elements(shape, dtype, options, elements, k, dofs) })
}

/// Read a plan written by `coo_plan_save` (in any process). The file's
/// checksums, content rules and plan version are checked, and that the
/// plan is whole, before the handle is returned: a damaged file, a plan
/// file of another version or a file that is not a plan is
/// `COO_ERR_INVALID_FILE` (the message says what is wrong; a damaged
/// format version that reads as a later one is `COO_ERR_UNSUPPORTED`), a
/// missing or unreadable file `COO_ERR_IO`. A loaded plan refills on every
/// core. NULL on error.
///
/// # Safety
/// `path` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_load(path: *const c_char) -> *mut coo_plan {
    new_handle(|| {
        // SAFETY: NULL or NUL-terminated (the caller's contract).
        let path = unsafe { c_path(path, "path") }?;
        Plan::load(&path).map_err(|e| match e.kind() {
            // The path is the only argument, and it was checked: what the
            // library calls an invalid argument here is in the file (a
            // damaged policy name in its KV section, say).
            ErrorKind::Argument => Fail::new(
                COO_ERR_INVALID_FILE,
                format!("plan file {}: {e}", path.display()),
            ),
            _ => Fail::from(e),
        })
    })
}

/// Write the plan to `path`, a Hurray file (`coo-assembler verify` checks
/// it), atomically: a temporary file in the same folder, fsynced, renamed.
/// `COO_ERR_IO` when it cannot be written (nothing is then left at
/// `path`, and a file already there stays as it was).
///
/// # Safety
/// `plan` is NULL or a plan handle; `path` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_save(plan: *const coo_plan, path: *const c_char) -> c_int {
    status(|| {
        let p = live_plan(plan)?;
        // SAFETY: NULL or NUL-terminated (the caller's contract).
        let path = unsafe { c_path(path, "path") }?;
        Ok(p.save(&path)?)
    })
}

/// Plan out of core: `coo_plan_new`'s plan, written to the plan file
/// `path` (atomically) in parts that each fit `options->memory_budget`,
/// holding no more than that budget (besides the caller's arrays) while
/// planning; spill files go to `options->temp_dir`. For patterns whose
/// plan does not fit in memory: each step then runs `coo_refill_file`
/// with a values file, within the same budget. The errors are
/// `coo_plan_new`'s, `COO_ERR_BUDGET` for a budget too small for one
/// slice of the key space and `COO_ERR_IO` for the file.
///
/// # Safety
/// As `coo_plan_new`; `path` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_file_new(
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    n: usize,
    indices: *const *const i64,
    path: *const c_char,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { plan_file(rank, shape, dtype, options, n, indices, path) }
}

/// `coo_plan_file_new` with `int32_t` index arrays: the same plan file,
/// the same errors.
///
/// # Safety
/// As `coo_plan_file_new`, with each `indices[d]` NULL or pointing to `n`
/// int32.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_file_new_i32(
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    n: usize,
    indices: *const *const i32,
    path: *const c_char,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { plan_file(rank, shape, dtype, options, n, indices, path) }
}

/// The body of `coo_plan_file_new` and `coo_plan_file_new_i32`.
///
/// # Safety
/// As [`coo_plan_file_new`], with `I` for `int64_t`.
unsafe fn plan_file<I: IndexElem>(
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    n: usize,
    indices: *const *const I,
    path: *const c_char,
) -> c_int {
    status(|| {
        // SAFETY: NULL or NUL-terminated (the caller's contract).
        let path = unsafe { c_path(path, "path") }?;
        // SAFETY: forwarded contract.
        unsafe {
            with_coords(
                rank,
                shape,
                dtype,
                options,
                n,
                indices,
                |dims, ext, dt, o| PlanFile::create(dims, ext, dt, o, &path, None),
            )
        }?;
        Ok(())
    })
}

/// Assemble one step with a plan file (either kind: `coo_plan_save`'s or
/// `coo_plan_file_new`'s) and the values file `values` (a `.npy` array,
/// or raw little-endian values of the plan's type, one per contribution
/// in the planned order), into the Hurray file `output`, written
/// atomically. A plan kept in parts is refilled within
/// `options->memory_budget` (spill files in `options->temp_dir`; the other
/// options are the plan's and are not read). The values are bit for bit
/// what a builder gives for the same contributions. Errors:
/// `COO_ERR_ARGUMENT` for an output that names the plan or the values
/// file, and for values of the wrong count or type (the message says
/// which); `COO_ERR_BUDGET` for a budget below the largest part's need
/// (the message gives the minimum); `COO_ERR_INVALID_FILE` for a damaged
/// plan; the policies' errors (`COO_ERR_NON_FINITE`, `COO_ERR_DUPLICATE`)
/// as in an assembly; `COO_ERR_IO`. Nothing is left at `output` on error.
///
/// # Safety
/// `plan`, `values` and `output` are NULL or NUL-terminated; `options` is
/// NULL or points to a `coo_options` filled by `coo_options_default`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_refill_file(
    plan: *const c_char,
    values: *const c_char,
    output: *const c_char,
    options: *const coo_options,
) -> c_int {
    status(|| {
        // SAFETY: NULL or NUL-terminated (the caller's contract).
        let (plan, values, output) = unsafe {
            (
                c_path(plan, "plan")?,
                c_path(values, "values")?,
                c_path(output, "output")?,
            )
        };
        // SAFETY: the caller's contract.
        let opts = unsafe { options_or_default(options) }?;
        opts.validate()?;
        coo_assembler::plan::refill_plan_file(&plan, &values, &output, &opts)?;
        Ok(())
    })
}

/// Release a plan. NULL, or a plan already freed: no-op. No other call
/// may use the plan during or after this one.
///
/// # Safety
/// `plan` is NULL or a plan handle, not used by another thread during or
/// after the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_free(plan: *mut coo_plan) {
    if !plan.is_null() && PLANS.unregister(plan) {
        // SAFETY: registered when made and unregistered just now, so this
        // is the one free.
        quietly(|| drop(unsafe { Box::from_raw(plan) }));
    }
}

/// Lengths of the structure's arrays: (indices, pointers).
fn structure_lengths(p: &Plan) -> (u64, u64) {
    let nnz = p.nnz() as u64;
    match p.layout() {
        OutputLayout::Coo => (nnz * p.shape().len() as u64, 0),
        l => (nnz, p.shape()[l.major_dim()] + 1),
    }
}

/// Entries of a result of `plan` into `*out`: the `nnz` that
/// `coo_plan_assemble` takes.
///
/// # Safety
/// `plan` is NULL or a plan handle; `out` is NULL or valid for writing a
/// `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_nnz(plan: *const coo_plan, out: *mut u64) -> c_int {
    status(|| {
        let p = live_plan(plan)?;
        // SAFETY: NULL or writable (the caller's contract).
        *unsafe { out_ref(out, "out") }? = p.nnz() as u64;
        Ok(())
    })
}

/// Contributions a refill of `plan` takes into `*out`: the `n` that
/// `coo_plan_assemble` takes.
///
/// # Safety
/// `plan` is NULL or a plan handle; `out` is NULL or valid for writing a
/// `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_contributions(plan: *const coo_plan, out: *mut u64) -> c_int {
    status(|| {
        let p = live_plan(plan)?;
        // SAFETY: NULL or writable (the caller's contract).
        *unsafe { out_ref(out, "out") }? = p.contributions() as u64;
        Ok(())
    })
}

/// Shape, type, layout and sizes of `plan` (see `coo_plan_details`): the
/// lengths of the arrays every other call takes.
///
/// # Safety
/// `plan` is NULL or a plan handle; `out` is NULL or valid for writing a
/// `coo_plan_details`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_info(plan: *const coo_plan, out: *mut coo_plan_details) -> c_int {
    status(|| {
        let p = live_plan(plan)?;
        let mut shape = [0i64; 64];
        for (s, &e) in shape.iter_mut().zip(p.shape()) {
            *s = i64::try_from(e).map_err(|_| {
                Fail::new(
                    COO_ERR_INVALID_FILE,
                    format!("extent {e} does not fit int64_t (this API's index type)"),
                )
            })?;
        }
        let (indices_len, pointers_len) = structure_lengths(p);
        let info = coo_plan_details {
            rank: p.shape().len() as u32,
            shape,
            dtype: DTypeArg(to_c(p.dtype())),
            layout: LayoutArg(to_c(p.layout())),
            nnz: p.nnz() as u64,
            contributions: p.contributions() as u64,
            indices_len,
            pointers_len,
            memory_bytes: p.memory_bytes(),
            digest: p.digest(),
        };
        // SAFETY: NULL or writable (the caller's contract).
        *unsafe { out_ref(out, "out") }? = info;
        Ok(())
    })
}

/// Copy the structure of a result of `plan` into the caller's arrays,
/// whose lengths `coo_plan_info` gives (`indices_len`, `pointers_len`):
/// - CSR (CSC): `indices` gets the column (row) of each entry in storage
///   order, `nnz` of them; `pointers` the `rows + 1` (`columns + 1`)
///   offsets, entries `pointers[i] .. pointers[i+1]` being row (column)
///   `i`: with the values of a refill, the arrays of a CSR (CSC) matrix;
/// - COO: `indices` gets each entry's index tuple (`rank` per entry,
///   `nnz * rank` in all) in row-major order; there are no pointers
///   (`pointers_len` must be 0; `pointers` may be NULL).
///
/// Either array may be NULL, and is then skipped (its length is not
/// checked); a length other than the structure's is `COO_ERR_ARGUMENT`
/// naming the array, and nothing is written.
///
/// # Safety
/// `plan` is NULL or a plan handle; `indices` and `pointers` are NULL or
/// writable for `indices_len` and `pointers_len` int64.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_structure(
    plan: *const coo_plan,
    indices: *mut i64,
    indices_len: usize,
    pointers: *mut i64,
    pointers_len: usize,
) -> c_int {
    status(|| {
        let p = live_plan(plan)?;
        let (want_indices, want_pointers) = structure_lengths(p);
        let layout = p.layout();
        let check = |what: &str, got: usize, want: u64, rule: &str| {
            if got as u64 == want {
                Ok(())
            } else {
                Err(Fail::new(
                    COO_ERR_ARGUMENT,
                    format!(
                        "{what}_len = {got}: this {layout} plan's structure has {want} {what} ({rule})"
                    ),
                ))
            }
        };
        let index_rule = if layout.is_compressed() {
            "nnz"
        } else {
            "nnz * rank"
        };
        let pointer_rule = match layout {
            OutputLayout::Csr => "rows + 1",
            OutputLayout::Csc => "columns + 1",
            OutputLayout::Coo => "COO has none",
            OutputLayout::Csf => "CSF is not planned",
        };
        if !indices.is_null() {
            check("indices", indices_len, want_indices, index_rule)?;
        }
        if !pointers.is_null() {
            check("pointers", pointers_len, want_pointers, pointer_rule)?;
        }
        if !indices.is_null() {
            let v: Vec<i64> = p.indices()?;
            // SAFETY: non-null, writable for indices_len int64 (contract),
            // which equals v.len().
            unsafe { out_slice(indices, indices_len, "indices") }?.copy_from_slice(&v);
        }
        if !pointers.is_null() && pointers_len > 0 {
            let v: Vec<i64> = p.pointers()?;
            // SAFETY: as above, for the pointers.
            unsafe { out_slice(pointers, pointers_len, "pointers") }?.copy_from_slice(&v);
        }
        Ok(())
    })
}

/// Refill `out` from `values` (`V`) into the plan's elements (`O`).
///
/// # Safety
/// `values` is NULL or points to `n` `V`; `out` is NULL or writable for
/// `nnz` `O`.
unsafe fn refill<V: DirectValue, O: OutValue>(
    p: &Plan,
    values: *const V,
    n: usize,
    out: *mut O,
    nnz: usize,
) -> Res<()> {
    // SAFETY: forwarded contract.
    unsafe { refill_with(p, values, n, out, nnz, Plan::assemble_into) }
}

/// A refill of the library's: `Plan::assemble_into` or
/// `assemble_complex_into`.
type Entry<V, O> = fn(&Plan, &[V], &mut [O], Option<&AtomicBool>) -> coo_assembler::Result<()>;

/// [`refill`] through `entry`.
///
/// # Safety
/// As [`refill`].
unsafe fn refill_with<V: DirectValue, O>(
    p: &Plan,
    values: *const V,
    n: usize,
    out: *mut O,
    nnz: usize,
    entry: Entry<V, O>,
) -> Res<()> {
    if n != p.contributions() {
        return Err(Fail::new(
            COO_ERR_ARGUMENT,
            format!(
                "values: n = {n}, the plan takes {} contributions (one value each)",
                p.contributions()
            ),
        ));
    }
    if nnz != p.nnz() {
        return Err(Fail::new(
            COO_ERR_ARGUMENT,
            format!(
                "out: nnz = {nnz}, the plan's result has {} entries (one value each)",
                p.nnz()
            ),
        ));
    }
    let bytes_v = n * std::mem::size_of::<V>();
    let bytes_o = nnz * std::mem::size_of::<O>();
    let (v0, o0) = (values as usize, out as usize);
    if bytes_v > 0 && bytes_o > 0 && v0 < o0 + bytes_o && o0 < v0 + bytes_v {
        return Err(Fail::new(
            COO_ERR_ARGUMENT,
            "out overlaps values: a refill writes into an array of its own",
        ));
    }
    // SAFETY: `n` readable V (the caller's contract).
    let values = unsafe { slice(values, n, "values") }?;
    // SAFETY: `nnz` writable O, not overlapping `values` (checked).
    let out = unsafe { out_slice(out, nnz, "out") }?;
    Ok(entry(p, values, out, None)?)
}

/// Refill `out` with the assembly of `values` under the plan: `n` doubles,
/// one per contribution in the order the coordinates were given (for
/// `coo_plan_elements`, the element matrices one after the other), into
/// `nnz` doubles, one per entry in the order of `coo_plan_structure`. The
/// values written are bit for bit the ones `coo_assemble_arrays` (or the
/// builder) stores for the same contributions and options: exact sums,
/// the same duplicate and non-finite policies. Nothing is allocated but a
/// few values per thread; the call runs on the plan's threads
/// (`options->threads` when planned, every core when loaded) and returns
/// when `out` is filled.
///
/// A plan is immutable: any number of threads may call this at once on
/// one plan, each with its own `out` (the values may be shared). `out`
/// must not overlap `values`.
///
/// For `COO_F64` plans; other element types take
/// `coo_plan_assemble_typed`. Errors (`out` then holds partial values):
/// - `COO_ERR_NULL`: `plan` is NULL; `values` or `out` is NULL while its
///   length is not 0;
/// - `COO_ERR_STATE`: `plan` was freed;
/// - `COO_ERR_ARGUMENT`: `n` is not the plan's contributions, `nnz` not
///   its entries (`coo_plan_info`; the message says which), the plan is
///   not `COO_F64`, `out` overlaps `values`, an array is not aligned;
/// - `COO_ERR_VALUE`: a value refused by the plan's non-finite policy (the
///   first such contribution).
///
/// # Safety
/// `plan` is NULL or a plan handle not freed during the call; `values` is
/// NULL or points to `n` doubles that do not change during the call;
/// `out` is NULL or writable for `nnz` doubles, not used by anything else
/// during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_assemble(
    plan: *const coo_plan,
    values: *const f64,
    n: usize,
    out: *mut f64,
    nnz: usize,
) -> c_int {
    status(|| {
        let p = live_plan(plan)?;
        if p.dtype() != DType::F64 {
            return Err(Fail::new(
                COO_ERR_ARGUMENT,
                format!(
                    "the plan's tensor holds {} values and coo_plan_assemble fills doubles: \
                     refill it with coo_plan_assemble_typed, into an array of its element type",
                    p.dtype()
                ),
            ));
        }
        // SAFETY: forwarded contract.
        unsafe { refill::<f64, f64>(p, values, n, out, nnz) }
    })
}

/// A typed refill: `out` of the plan's element type `O`, `values` of it
/// too (through `own`), or doubles, which go in as `D` (through `from_d`:
/// `f64` into a float or complex type, [`Integral`] into an integer one).
///
/// # Safety
/// As [`coo_plan_assemble_typed`].
unsafe fn typed<O: DirectValue, D: DirectValue>(
    p: &Plan,
    (values, value_type, n): (*const c_void, DType, usize),
    (out, nnz): (*mut c_void, usize),
    own: Entry<O, O>,
    from_d: Entry<D, O>,
) -> Res<()> {
    let out = out.cast::<O>();
    // SAFETY: (every arm) `values` holds `n` values of the C type
    // `value_type` names (the caller's contract); `Integral` is an f64.
    unsafe {
        match value_type {
            t if t == p.dtype() => refill_with::<O, O>(p, values.cast(), n, out, nnz, own),
            DType::F64 => refill_with::<D, O>(p, values.cast(), n, out, nnz, from_d),
            other => Err(Fail::new(
                COO_ERR_ARGUMENT,
                format!(
                    "value_type {other}: a plan of {} values is refilled from values of its own \
                     type or from COO_F64 (double)",
                    p.dtype()
                ),
            )),
        }
    }
}

/// `coo_plan_assemble` for a plan of any element type: `out` points to
/// `nnz` values of the plan's element type (`coo_plan_info`'s `dtype`:
/// `double`, `float`, `int8_t` ... `uint64_t`; `COO_F16` and `COO_BF16`
/// as the `uint16_t` bits of the IEEE half and bfloat16 numbers;
/// `COO_BOOL` as one byte per entry, 0 or 1, where any true
/// contribution makes a true entry under `sum`;
/// `COO_C128` and `COO_C64` as C99 `double _Complex` and `float _Complex`,
/// each part summed exactly on its own), and
/// `values` to `n` values of the C type `value_type` names, which is
/// either the plan's element type or `COO_F64`. Doubles reach the
/// element type as `coo_assemble_arrays` sends them (summed exactly and
/// rounded once into a float type; integral and in range for an integer
/// type), so the refill is, bit for bit, the values that call stores for
/// the same doubles. The rules, threads and errors are
/// `coo_plan_assemble`'s, and: `COO_ERR_ARGUMENT` for any other
/// `value_type`; `COO_ERR_VALUE` for a value an integer type refuses (not
/// integral, out of range: the first such contribution);
/// `COO_ERR_OVERFLOW` for an integer sum that does not fit (the first such
/// entry in storage order).
///
/// # Safety
/// `plan` is NULL or a plan handle not freed during the call; `values` is
/// NULL or points to `n` values of the type `value_type` names, which do
/// not change during the call; `out` is NULL or writable for `nnz` values
/// of the plan's element type, not used by anything else during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_plan_assemble_typed(
    plan: *const coo_plan,
    values: *const c_void,
    value_type: DTypeArg,
    n: usize,
    out: *mut c_void,
    nnz: usize,
) -> c_int {
    status(|| {
        let p = live_plan(plan)?;
        let vt: DType = from_c(value_type.0)
            .map_err(|f| Fail::new(f.code, format!("value_type: {}", f.msg)))?;
        // SAFETY: (every arm) forwarded contract; `out` holds the plan's
        // element type.
        unsafe {
            let (v, o) = ((values, vt, n), (out, nnz));
            coo_assembler::with_element_type!(p.dtype(), {
                float T => typed::<T, f64>(p, v, o, Plan::assemble_into, Plan::assemble_into),
                narrow T => typed::<T, f64>(p, v, o, Plan::assemble_into, Plan::assemble_into),
                int T => typed::<T, Integral>(p, v, o, Plan::assemble_into, Plan::assemble_into),
                complex C => typed::<C, f64>(
                    p,
                    v,
                    o,
                    Plan::assemble_complex_into,
                    Plan::assemble_complex_into
                ),
                bool T => typed::<T, Integral>(p, v, o, Plan::assemble_into, Plan::assemble_into),
            })
        }
    })
}

/// A refill whose values are pushed (opaque): `coo_refill_new` takes the
/// room for one step's values, `coo_refill_push` appends them in the
/// plan's order (for a plan a builder recorded, the order of its pushes),
/// `coo_refill_assemble` or `coo_refill_write` make the result and start
/// the next step; `coo_refill_free` releases it. For `COO_F64` plans.
pub struct coo_refill {
    plan: *const coo_plan,
    values: Vec<f64>,
}

/// The refill handles alive now.
static REFILLS: Registry = Registry::new();

/// The refill behind `r` and its plan, when both are live handles.
fn live_refill<'a>(r: *mut coo_refill) -> Res<(&'a mut coo_refill, &'a Plan)> {
    if r.is_null() {
        return Err(Fail::null("refill"));
    }
    if !REFILLS.contains(r) {
        return Err(Fail::new(
            COO_ERR_STATE,
            "not a live refill: it was freed (or not made by coo_refill_new)",
        ));
    }
    // SAFETY: registered when made and not yet unregistered; not used by
    // another thread during the call (the contract).
    let r = unsafe { &mut *r };
    let p = live_plan(r.plan)?;
    Ok((r, p))
}

/// A refill of `plan` whose values are pushed (see `coo_refill`); NULL on
/// error (`COO_ERR_ARGUMENT` for a plan that is not `COO_F64`,
/// `COO_ERR_MEMORY` when the room for its values cannot be had). The plan
/// must outlive the refill.
///
/// # Safety
/// `plan` is NULL or a plan handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_refill_new(plan: *const coo_plan) -> *mut coo_refill {
    REFILLS.register(handle(|| {
        let p = live_plan(plan)?;
        if p.dtype() != DType::F64 {
            return Err(Fail::new(
                COO_ERR_ARGUMENT,
                format!(
                    "the plan's tensor holds {} values and a pushed refill takes doubles: use \
                     coo_plan_assemble_typed",
                    p.dtype()
                ),
            ));
        }
        let n = p.contributions();
        let mut values = Vec::new();
        values.try_reserve_exact(n).map_err(|_| {
            Fail::from(Error::OutOfMemory {
                what: "the refill's values",
                bytes: n as u64 * 8,
            })
        })?;
        Ok(Box::new(coo_refill { plan, values }))
    }))
}

/// Push the next `n` values (one contribution's, or an element matrix's
/// row-major, as the builder took them). `COO_ERR_ARGUMENT` past the
/// plan's contributions (nothing appended).
///
/// # Safety
/// `r` is NULL or a refill handle whose plan is live, not used by another
/// thread during the call; `values` is NULL or points to `n` doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_refill_push(
    r: *mut coo_refill,
    values: *const f64,
    n: usize,
) -> c_int {
    status(|| {
        let (r, p) = live_refill(r)?;
        // SAFETY: NULL or `n` doubles (contract).
        let v = unsafe { slice(values, n, "values") }?;
        p.check_pushed(r.values.len(), v.len())?;
        r.values.extend_from_slice(v);
        Ok(())
    })
}

/// Refill `out` (`nnz` doubles, `coo_plan_info`'s `nnz`) with the values
/// pushed, as `coo_plan_assemble` does with them in one array; then the
/// next step's pushes start (on success or not). `COO_ERR_ARGUMENT` when
/// fewer values than the plan's contributions were pushed, and
/// `coo_plan_assemble`'s errors.
///
/// # Safety
/// `r` as `coo_refill_push`; `out` is NULL or writable for `nnz` doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_refill_assemble(
    r: *mut coo_refill,
    out: *mut f64,
    nnz: usize,
) -> c_int {
    status(|| {
        let (r, p) = live_refill(r)?;
        let v = std::mem::take(&mut r.values);
        // SAFETY: `v` is ours; `out` as the contract says.
        let res = unsafe { refill::<f64, f64>(p, v.as_ptr(), v.len(), out, nnz) };
        r.values = v;
        r.values.clear();
        res
    })
}

/// Write the result of the values pushed to `path` as a Hurray file,
/// atomically: the bytes the builder that recorded the plan writes for the
/// same pushes. Then the next step's pushes start (on success or not).
/// `COO_ERR_ARGUMENT` when fewer values were pushed than the plan takes,
/// `COO_ERR_VALUE` for a value the plan's policy refuses, `COO_ERR_IO`.
///
/// # Safety
/// `r` as `coo_refill_push`; `path` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_refill_write(r: *mut coo_refill, path: *const c_char) -> c_int {
    status(|| {
        let (r, p) = live_refill(r)?;
        // SAFETY: NULL or NUL-terminated (contract).
        let path = unsafe { c_path(path, "path") }?;
        let res = p.assemble_to_file(&r.values, &path, &[]);
        r.values.clear();
        res?;
        Ok(())
    })
}

/// Release a refill (not its plan). NULL, or a refill already freed:
/// no-op.
///
/// # Safety
/// `r` is NULL or a refill handle, not used by another thread during or
/// after the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_refill_free(r: *mut coo_refill) {
    if !r.is_null() && REFILLS.unregister(r) {
        // SAFETY: registered when made and unregistered just now.
        quietly(|| drop(unsafe { Box::from_raw(r) }));
    }
}
