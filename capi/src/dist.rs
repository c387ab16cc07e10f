//! `coo_dist_builder`, `coo_dist_plan`, `coo_band`: distributed assembly
//! from C and Fortran (feature `mpi`, issue 42).
//!
//! Built with `cargo build --release -p coo-assembler-capi --features mpi`,
//! against the MPI that `mpicc` names; the header declares these calls
//! when `COO_ASSEMBLER_MPI` is defined. The communicator crosses as its
//! Fortran handle (`MPI_Comm_c2f(comm)` in C, the `integer` handle or
//! `comm%MPI_VAL` in Fortran): an `int` in every MPI, so the header does
//! not depend on one MPI's ABI. The library works on a duplicate of it.
//!
//! Every call that says *collective* is made by every rank. A rank whose
//! code fails calls `coo_dist_builder_free` (or `_abandon`) on its
//! unfinished builder: every other rank's finish then returns
//! `COO_ERR_REMOTE` naming that rank, and nobody waits.

use crate::builder::{options_or_default, shape_from_c};
use crate::convert::{c_str, from_c, out_ref, slice};
use crate::live::Registry;
use crate::{
    COO_ERR_ARGUMENT, COO_ERR_INDEX, COO_ERR_STATE, DTypeArg, Fail, Res, coo_options, handle,
    quietly, status,
};
use coo_assembler::DType;
use coo_assembler::element::RealElement;
use coo_assembler::internals::assemble::direct::OutIndex;
use coo_assembler_mpi::comm::from_fortran;
use coo_assembler_mpi::{DistOptions, DistPlan, LocalCsr, RowOwnership};
use mpi::topology::SimpleCommunicator;
use std::ffi::{c_char, c_int, c_void};

type Builder = coo_assembler_mpi::DistBuilder<'static, SimpleCommunicator>;

/// A distributed builder (opaque): made by `coo_dist_builder_new`, ended by
/// a finish call or `coo_dist_builder_free`.
pub struct coo_dist_builder {
    inner: Option<Builder>,
    dtype: DType,
}

/// A plan across ranks (opaque): made by `coo_dist_plan_new` or
/// `coo_dist_builder_finish_planned`, released by `coo_dist_plan_free`.
pub struct coo_dist_plan {
    plan: DistPlan,
    comm: SimpleCommunicator,
    dtype: DType,
}

/// One rank's row band of the matrix in memory, CSR: what
/// `MatCreateMPIAIJWithArrays` and `MatMPIAIJSetPreallocationCSR` take.
/// Filled by the library; release it with `coo_band_free`.
#[repr(C)]
pub struct coo_band {
    /// The global rows this rank owns: `row_lo .. row_hi`.
    pub row_lo: u64,
    pub row_hi: u64,
    /// Columns of the matrix.
    pub ncols: u64,
    /// Entries of the band.
    pub nnz: u64,
    /// 32 or 64: the width of `row_ptr` and `cols` (`int32_t` / `int64_t`).
    pub index_bits: u32,
    /// The values' element type (the builder's).
    pub dtype: DTypeArg,
    /// `row_hi - row_lo + 1` offsets, from 0.
    pub row_ptr: *mut c_void,
    /// `nnz` global column indices, ascending within each row.
    pub cols: *mut c_void,
    /// `nnz` values of `dtype`.
    pub values: *mut c_void,
    /// The library's storage behind the arrays; do not touch.
    pub owner: *mut c_void,
}

/// The typed arrays a `coo_band` points into.
struct BandStore {
    _index: Box<dyn std::any::Any>,
    _values: Box<dyn std::any::Any>,
}

static BUILDERS: Registry = Registry::new();
static PLANS: Registry = Registry::new();

/// Calls `$body` with `$t` the element type of `$dtype` (the library's
/// dispatch, [`coo_assembler_mpi::with_band_type`]).
macro_rules! with_real {
    ($dtype:expr, $t:ident => $body:expr) => {
        coo_assembler_mpi::with_band_type!($dtype, $t => $body, d => Err(Fail::new(
            COO_ERR_ARGUMENT,
            format!("a band in memory holds {} values, not {}", coo_assembler_mpi::BAND_TYPES, d.name()),
        )))
    };
}

/// A `LocalCsr` handed over as a `coo_band`.
fn band_to_c<J: OutIndex, T: RealElement>(b: LocalCsr<J, T>, dtype: DType) -> Box<coo_band> {
    let (mut ptr, mut cols, mut values) = (b.row_ptr, b.cols, b.values);
    let mut band = coo_band {
        row_lo: b.rows.start,
        row_hi: b.rows.end,
        ncols: b.ncols,
        nnz: values.len() as u64,
        index_bits: (std::mem::size_of::<J>() * 8) as u32,
        dtype: DTypeArg(crate::convert::to_c(dtype)),
        row_ptr: ptr.as_mut_ptr().cast(),
        cols: cols.as_mut_ptr().cast(),
        values: values.as_mut_ptr().cast(),
        owner: std::ptr::null_mut(),
    };
    // Moving a Vec into a Box does not move its heap buffer: the pointers
    // above stay valid while the store lives.
    let store = Box::new(BandStore {
        _index: Box::new((ptr, cols)),
        _values: Box::new(values),
    });
    band.owner = Box::into_raw(store).cast();
    Box::new(band)
}

fn index_bits(bits: c_int) -> Res<bool> {
    match bits {
        32 => Ok(false),
        64 => Ok(true),
        b => Err(Fail::new(
            COO_ERR_ARGUMENT,
            format!("index_bits must be 32 or 64, got {b}"),
        )),
    }
}

/// Row ownership from C: `local_rows` >= 0 is this rank's row count;
/// negative: chosen from a sample of the pushed rows.
fn ownership(local_rows: i64) -> RowOwnership {
    u64::try_from(local_rows).map_or(RowOwnership::Sampled, RowOwnership::Local)
}

/// The builder behind a live handle.
fn live<'a>(b: *mut coo_dist_builder) -> Res<&'a mut coo_dist_builder> {
    if b.is_null() || !BUILDERS.contains(b) {
        return Err(Fail::new(
            COO_ERR_STATE,
            "not a live distributed builder (finished, freed, or never made)",
        ));
    }
    // SAFETY: a registered handle is a live Box made by
    // coo_dist_builder_new; the caller uses it from one thread at a time.
    Ok(unsafe { &mut *b })
}

/// The library builder taken out of `b` for a finish; the handle is
/// released whatever the finish does.
fn take(b: *mut coo_dist_builder) -> Res<(Builder, DType)> {
    let h = live(b)?;
    BUILDERS.unregister(b);
    // SAFETY: live and unregistered just now: this is the one release.
    let h = unsafe { Box::from_raw(h) };
    let dtype = h.dtype;
    let inner = h.inner.ok_or_else(given_up)?;
    Ok((inner, dtype))
}

/// The library builder behind a live handle that was not given up.
fn live_inner<'a>(b: *mut coo_dist_builder) -> Res<&'a mut Builder> {
    live(b)?.inner.as_mut().ok_or_else(given_up)
}

fn given_up() -> Fail {
    Fail::new(COO_ERR_STATE, "this distributed builder was given up")
}

/// Collective: a distributed builder of `shape` (`rank` extents) and
/// `dtype` on the communicator whose Fortran handle is `comm_f`
/// (`MPI_Comm_c2f(comm)`). `local_rows` >= 0: this rank owns that many
/// rows, the bands in rank order (PETSc's local size); negative: chosen
/// at finish from a sample of the pushed rows. `options` (NULL: defaults)
/// as `coo_builder_new`'s; `memory_budget` is per rank. NULL on error
/// (on every rank).
///
/// # Safety
/// `shape` points to `rank` int64; `options` is NULL or a `coo_options`
/// filled by `coo_options_default`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_builder_new(
    comm_f: c_int,
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    local_rows: i64,
) -> *mut coo_dist_builder {
    BUILDERS.register(handle(|| {
        // SAFETY: the caller's contract.
        let extents = unsafe { shape_from_c(rank, shape) }?;
        let dtype: DType = from_c(dtype.0)?;
        // SAFETY: the caller's contract.
        let assemble = unsafe { options_or_default(options) }?;
        let opts = DistOptions {
            assemble,
            rows: ownership(local_rows),
            ..DistOptions::default()
        };
        let comm = from_fortran(comm_f)?;
        let b = Builder::owning(comm, extents, dtype, opts)?;
        Ok(Box::new(coo_dist_builder {
            inner: Some(b),
            dtype,
        }))
    }))
}

/// Push one contribution at `idx` (`rank` int64, any coordinate of the
/// global shape). An error is returned here and reported to every rank by
/// the finish.
///
/// # Safety
/// `idx` points to the builder's rank int64.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_builder_push(
    b: *mut coo_dist_builder,
    idx: *const i64,
    value: f64,
) -> c_int {
    status(|| {
        let inner = live_inner(b)?;
        let mut at = [0u64; crate::COO_MAX_RANK as usize];
        let rank = inner.shape().len();
        // SAFETY: `rank` int64 by the caller's contract.
        let idx = unsafe { slice(idx, rank, "idx") }?;
        for (d, (a, &i)) in at.iter_mut().zip(idx).enumerate() {
            *a = u64::try_from(i).map_err(|_| {
                let m = crate::convert::negative_index(inner.pushed(), d, i);
                inner.refused(coo_assembler::Error::InvalidArgument(m.clone()));
                Fail::new(COO_ERR_INDEX, m)
            })?;
        }
        inner.push(&at[..rank], value)?;
        Ok(())
    })
}

/// Push a dense element matrix: `ke[a * n + b]` (row-major, `n * n`
/// doubles) at `(dofs[a], dofs[b])`.
///
/// # Safety
/// `dofs` points to `n` int64, `ke` to `n * n` doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_builder_push_element(
    b: *mut coo_dist_builder,
    n: usize,
    dofs: *const i64,
    ke: *const f64,
) -> c_int {
    status(|| {
        let inner = live_inner(b)?;
        // SAFETY: the caller's contract.
        let (d, k) = unsafe { (slice(dofs, n, "dofs")?, slice(ke, n * n, "ke")?) };
        let mut ids = Vec::with_capacity(n);
        for (a, &i) in d.iter().enumerate() {
            ids.push(u64::try_from(i).map_err(|_| {
                let m = format!("dofs[{a}] = {i} is negative");
                inner.refused(coo_assembler::Error::InvalidArgument(m.clone()));
                Fail::new(COO_ERR_INDEX, m)
            })?);
        }
        inner.push_element(&ids, k)?;
        Ok(())
    })
}

/// Collective: route, assemble and write the partition composite at
/// `path` (the same shared path on every rank). The handle is released
/// whatever the status. `COO_ERR_REMOTE` when another rank failed.
///
/// # Safety
/// `path` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_builder_finish(
    b: *mut coo_dist_builder,
    path: *const c_char,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { finish_at(b, path, Builder::finish) }
}

/// Collective: route, assemble and write this rank's band as a plain file
/// at `path`, a path of this rank's own (no shared filesystem needed);
/// every rank's file is published only if every rank succeeded. The
/// handle is released whatever the status.
///
/// # Safety
/// `path` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_builder_finish_per_rank(
    b: *mut coo_dist_builder,
    path: *const c_char,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { finish_at(b, path, Builder::finish_per_rank) }
}

/// A finish to a file: a bad path gives the builder up on this rank (the
/// others' finish fails naming it) instead of leaving them waiting.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
unsafe fn finish_at(
    b: *mut coo_dist_builder,
    path: *const c_char,
    finish: fn(
        Builder,
        std::path::PathBuf,
    ) -> coo_assembler::Result<coo_assembler_mpi::DistSummary>,
) -> c_int {
    status(|| {
        // SAFETY: the caller's contract.
        let p = unsafe { crate::c_path(path, "path") };
        let (inner, _) = take(b)?;
        let p = match p {
            Ok(p) => p,
            Err(e) => {
                inner.abandon(&e.msg);
                return Err(e);
            }
        };
        finish(inner, p)?;
        Ok(())
    })
}

/// Collective: route and assemble, and return this rank's band in memory
/// in `*band` (`index_bits` 32 or 64: PETSc's `PetscInt`). The handle is
/// released whatever the status; release the band with `coo_band_free`.
///
/// # Safety
/// `band` points to writable room for a pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_builder_finish_csr(
    b: *mut coo_dist_builder,
    index_bits_: c_int,
    band: *mut *mut coo_band,
) -> c_int {
    status(|| {
        let (inner, dtype) = take(b)?;
        // SAFETY: the caller's contract.
        let out = match unsafe { out_ref(band, "band") }
            .and_then(|o| Ok((o, index_bits(index_bits_)?)))
        {
            Ok(o) => o,
            Err(e) => {
                inner.abandon(&e.msg);
                return Err(e);
            }
        };
        let (out, wide) = out;
        let made = with_real!(dtype, T => if wide {
            inner.finish_csr::<i64, T>().map(|(b, _)| band_to_c(b, dtype))
        } else {
            inner.finish_csr::<i32, T>().map(|(b, _)| band_to_c(b, dtype))
        }.map_err(Fail::from))?;
        *out = Box::into_raw(made);
        Ok(())
    })
}

/// Collective: as `coo_dist_builder_finish_csr`, and the plan of what was
/// pushed in `*plan`: `coo_dist_plan_refill` with new values pushed in the
/// same order refills the band, one all-to-all of the values.
///
/// # Safety
/// `band` and `plan` point to writable room for a pointer each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_builder_finish_planned(
    b: *mut coo_dist_builder,
    index_bits_: c_int,
    band: *mut *mut coo_band,
    plan: *mut *mut coo_dist_plan,
) -> c_int {
    status(|| {
        let (inner, dtype) = take(b)?;
        // SAFETY: the caller's contract.
        let outs = unsafe { out_ref(band, "band").and_then(|a| Ok((a, out_ref(plan, "plan")?))) }
            .and_then(|o| Ok((o, index_bits(index_bits_)?)));
        let ((band_out, plan_out), wide) = match outs {
            Ok(o) => o,
            Err(e) => {
                inner.abandon(&e.msg);
                return Err(e);
            }
        };
        // The plan refills on a communicator of its own (collective).
        let comm = mpi::traits::Communicator::duplicate(inner.communicator());
        let (made, p) = with_real!(dtype, T => if wide {
            inner.finish_planned::<i64, T>().map(|(b, p)| (band_to_c(b, dtype), p))
        } else {
            inner.finish_planned::<i32, T>().map(|(b, p)| (band_to_c(b, dtype), p))
        }.map_err(Fail::from))?;
        *band_out = Box::into_raw(made);
        *plan_out = PLANS.register(Box::into_raw(Box::new(coo_dist_plan {
            plan: p,
            comm,
            dtype,
        })));
        Ok(())
    })
}

/// Give an unfinished builder up on this rank, saying `why` (NULL: no
/// reason): every other rank's finish returns `COO_ERR_REMOTE` naming this
/// rank and `why`. The handle is released. NULL or a released handle:
/// no-op.
///
/// # Safety
/// `why` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_builder_abandon(b: *mut coo_dist_builder, why: *const c_char) {
    if b.is_null() || !BUILDERS.contains(b) {
        return;
    }
    let why = if why.is_null() {
        "given up".to_string()
    } else {
        // SAFETY: non-null and NUL-terminated by the caller's contract.
        unsafe { c_str(why, "why") }
            .map(str::to_string)
            .unwrap_or_else(|_| "given up".into())
    };
    quietly(|| {
        if let Ok((inner, _)) = take(b) {
            inner.abandon(&why);
        }
    });
}

/// Release a builder; an unfinished one is given up (as
/// `coo_dist_builder_abandon`, "freed before finish"), so the other ranks'
/// finish returns an error. NULL or a released handle: no-op.
///
/// # Safety
/// `b` is NULL or a handle from `coo_dist_builder_new`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_builder_free(b: *mut coo_dist_builder) {
    // SAFETY: a literal NUL-terminated string.
    unsafe { coo_dist_builder_abandon(b, c"freed before finish".as_ptr()) }
}

/// Collective: plan this rank's `n` contributions at `indices` (`rank`
/// pointers to `n` int64 each: rows, columns, ...; global coordinates)
/// across the ranks of the communicator `comm_f`. Ownership and options as
/// `coo_dist_builder_new`'s (the layout is CSR unless the options say
/// COO). NULL on error (on every rank).
///
/// # Safety
/// `shape` points to `rank` int64, `indices` to `rank` pointers to `n`
/// int64 each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_plan_new(
    comm_f: c_int,
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
    local_rows: i64,
    n: usize,
    indices: *const *const i64,
) -> *mut coo_dist_plan {
    PLANS.register(handle(|| {
        // SAFETY: the caller's contract.
        let extents = unsafe { shape_from_c(rank, shape) }?;
        let dtype: DType = from_c(dtype.0)?;
        // SAFETY: the caller's contract.
        let mut assemble = unsafe { options_or_default(options) }?;
        if assemble.layout != coo_assembler::options::OutputLayout::Coo {
            assemble.layout = coo_assembler::options::OutputLayout::Csr;
        }
        // SAFETY: the caller's contract.
        let dims = unsafe { slice(indices, rank as usize, "indices") }?;
        let arrays = dims
            .iter()
            // SAFETY: each points to `n` int64 by the caller's contract.
            .map(|&p| unsafe { slice(p, n, "indices[d]") })
            .collect::<Res<Vec<&[i64]>>>()?;
        let opts = DistOptions {
            assemble,
            rows: ownership(local_rows),
            ..DistOptions::default()
        };
        let comm = from_fortran(comm_f)?;
        let opts = DistOptions {
            rows: match opts.rows {
                RowOwnership::Local(k) => {
                    RowOwnership::Given(coo_assembler_mpi::starts_of_local_rows(&comm, k))
                }
                r => r,
            },
            ..opts
        };
        let plan = DistPlan::new(&comm, &arrays, extents, dtype, &opts)?;
        Ok(Box::new(coo_dist_plan { plan, comm, dtype }))
    }))
}

/// The plan behind a live handle.
fn live_plan<'a>(p: *mut coo_dist_plan) -> Res<&'a mut coo_dist_plan> {
    if p.is_null() || !PLANS.contains(p) {
        return Err(Fail::new(COO_ERR_STATE, "not a live distributed plan"));
    }
    // SAFETY: registered: a live Box from this module, used by one thread.
    Ok(unsafe { &mut *p })
}

/// Collective: refill this rank's band: `n` values (this rank's
/// contributions, in the planned order) into `out` (`out_len` values of
/// the plan's element type, one per entry of the band, storage order).
/// One all-to-all of the values. A count that is not the plan's fails on
/// every rank (`COO_ERR_REMOTE` on the others). Doubles reach an integer
/// plan integral and in range (`coo_dist_plan_refill_typed` takes the
/// plan's own type, exact beyond 2^53).
///
/// # Safety
/// `values` points to `n` doubles, `out` to `out_len` writable values of
/// the plan's element type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_plan_refill(
    p: *mut coo_dist_plan,
    n: usize,
    values: *const f64,
    out: *mut c_void,
    out_len: usize,
) -> c_int {
    let f64_type = DTypeArg(crate::convert::to_c(DType::F64));
    // SAFETY: forwarded contract (doubles).
    unsafe { coo_dist_plan_refill_typed(p, n, values.cast(), f64_type, out, out_len) }
}

/// Collective: `coo_dist_plan_refill` with `n` values of the C type
/// `value_type` names: the plan's element type (its values as they are)
/// or `COO_F64`. Any other `value_type` is `COO_ERR_ARGUMENT` on every
/// rank.
///
/// # Safety
/// `values` points to `n` values of `value_type`, `out` to `out_len`
/// writable values of the plan's element type.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_plan_refill_typed(
    p: *mut coo_dist_plan,
    n: usize,
    values: *const c_void,
    value_type: DTypeArg,
    out: *mut c_void,
    out_len: usize,
) -> c_int {
    status(|| {
        let h = live_plan(p)?;
        let vt = from_c(value_type.0).ok();
        with_real!(h.dtype, T => match vt {
            Some(t) if t == h.dtype => {
                // SAFETY: `n` values of the plan's type by the contract.
                unsafe { refill_from::<T, T>(h, values.cast(), n, out, out_len) }
            }
            Some(DType::F64) => {
                // SAFETY: `n` doubles by the contract.
                unsafe { refill_from::<T, f64>(h, values.cast(), n, out, out_len) }
            }
            _ => {
                let why = format!(
                    "value_type {}: a refill takes the plan's type ({}) or COO_F64",
                    value_type.0,
                    h.dtype.name()
                );
                Err(refused(h, Fail::new(COO_ERR_ARGUMENT, why)))
            }
        })
    })
}

/// Refill `h` from `n` values of `V` into `out_len` values of `T`; an
/// argument this rank finds wrong fails the refill on every rank.
///
/// # Safety
/// As `coo_dist_plan_refill_typed`, with `V` the values' type.
unsafe fn refill_from<T, V>(
    h: &mut coo_dist_plan,
    values: *const V,
    n: usize,
    out: *mut c_void,
    out_len: usize,
) -> Res<()>
where
    T: RealElement + mpi::traits::Equivalence + bytemuck::Pod,
    V: coo_assembler::internals::assemble::direct::DirectValue
        + mpi::traits::Equivalence
        + bytemuck::Pod,
{
    // SAFETY: the caller's contract.
    let v = match unsafe { slice(values, n, "values") } {
        Ok(v) => v,
        Err(f) => return Err(refused(h, f)),
    };
    if out.is_null() && out_len > 0 {
        return Err(refused(h, Fail::null("out")));
    }
    let o: &mut [T] = if out_len == 0 {
        &mut []
    } else {
        // SAFETY: `out_len` writable values of the plan's type by the
        // caller's contract (checked non-null above).
        unsafe { std::slice::from_raw_parts_mut(out.cast::<T>(), out_len) }
    };
    h.plan.refill_into(&h.comm, v, o).map_err(Fail::from)
}

/// `f`, after taking this rank's part in the refill's agreement with it:
/// the other ranks' refills fail naming this rank instead of waiting.
fn refused(h: &coo_dist_plan, f: Fail) -> Fail {
    let _ = h.plan.refuse(&h.comm, &f.msg);
    f
}

/// What the plan holds on this rank: its rows, the band's entries, the
/// values a refill takes, and its bytes. Any pointer may be NULL.
///
/// # Safety
/// Each pointer is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_plan_info(
    p: *mut coo_dist_plan,
    row_lo: *mut u64,
    row_hi: *mut u64,
    nnz: *mut u64,
    contributions: *mut u64,
    bytes: *mut u64,
) -> c_int {
    status(|| {
        let h = live_plan(p)?;
        let r = h.plan.rows();
        for (ptr, v) in [
            (row_lo, r.start),
            (row_hi, r.end),
            (nnz, h.plan.nnz() as u64),
            (contributions, h.plan.contributions() as u64),
            (bytes, h.plan.memory_bytes()),
        ] {
            if !ptr.is_null() {
                // SAFETY: non-null and writable by the caller's contract.
                unsafe { ptr.write(v) };
            }
        }
        Ok(())
    })
}

/// Release a plan. NULL or a released plan: no-op.
///
/// # Safety
/// `p` is NULL or a plan handle, not used during or after the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_dist_plan_free(p: *mut coo_dist_plan) {
    if !p.is_null() && PLANS.unregister(p) {
        // SAFETY: registered when made, unregistered just now: one release.
        quietly(|| drop(unsafe { Box::from_raw(p) }));
    }
}

/// Release a band and its arrays. NULL: no-op.
///
/// # Safety
/// `band` is NULL or a band from a finish call, released once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_band_free(band: *mut coo_band) {
    if band.is_null() {
        return;
    }
    quietly(|| {
        // SAFETY: made by Box::into_raw in a finish call, released once by
        // the caller's contract; its owner likewise.
        let b = unsafe { Box::from_raw(band) };
        if !b.owner.is_null() {
            // SAFETY: as above.
            drop(unsafe { Box::from_raw(b.owner.cast::<BandStore>()) });
        }
    });
}
