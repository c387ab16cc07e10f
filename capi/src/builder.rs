//! `coo_builder` and `coo_pusher`: assembling a tensor.
//!
//! Ownership: the `coo_builder` handle owns the library's `Builder`; a
//! `coo_pusher` owns a library `Pusher`, which holds what it needs itself.
//! The library refuses `finish` while pushers are alive, and a pusher that
//! outlives its builder gets an error at its next hand-off.
//!
//! Builder handles are validated: every call checks the handle is live, so
//! a push, finish or free after the handle was finished or freed gives
//! `COO_ERR_STATE` (a second free is a no-op). Pusher handles are validated
//! by `coo_pusher_free` only (a second free is a no-op); a push through a
//! freed pusher is undefined, the price of a push without a lock. Also
//! undefined: freeing a handle while another thread uses it, and a stale
//! handle whose address the allocator gave to a new one.

use crate::convert::{
    c_str, from_c, indices, negative_component, out_ref, slice, to_c, to_i64, to_u64,
};
use crate::live::Registry;
use crate::{
    BoolArg, COO_ERR_ARGUMENT, COO_ERR_NULL, COO_ERR_PANIC, COO_ERR_REFUSED, COO_ERR_STATE,
    COO_MAX_RANK, DTypeArg, DuplicatesArg, Fail, LayoutArg, NonFiniteArg, PushFormArg, Res,
    ValueKindArg, coo_options, coo_push_form, coo_summary, coo_value_kind, handle, quietly, status,
};
use coo_assembler::element::Complex;
use coo_assembler::{
    AssembleOptions, Builder, DType, builder::Pusher, options::DuplicatePolicy,
    options::NonFinitePolicy, options::OutputLayout,
};
use std::ffi::{c_char, c_int};
use std::sync::Mutex;
use std::time::Instant;

// The handles are used from any thread: what they hold must allow it.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    const fn sent<T: Send>() {}
    shared::<Builder>();
    sent::<Pusher>();
};

/// The builder and pusher handles alive now (see [`Registry`]).
static LIVE: Registry = Registry::new();

/// Register a new handle.
fn register<T>(p: *mut T) -> *mut T {
    LIVE.register(p)
}

/// Unregister `p`; false when it was not a live handle.
fn unregister<T>(p: *mut T) -> bool {
    LIVE.unregister(p)
}

fn is_live<T>(p: *const T) -> bool {
    LIVE.contains(p)
}

/// The builder behind `b`, when it is a live handle.
fn live_builder<'a>(b: *mut coo_builder) -> Res<&'a coo_builder> {
    if b.is_null() {
        return Err(Fail::null("builder"));
    }
    if !is_live(b) {
        return Err(Fail::new(
            COO_ERR_STATE,
            "not a live builder: it was finished or freed (or not made by coo_builder_new)",
        ));
    }
    // SAFETY: registered by coo_builder_new and not yet unregistered, so
    // the allocation is live; not freed during the call (the contract).
    Ok(unsafe { &*b })
}

/// What every push needs to know about the tensor.
#[derive(Clone, Copy)]
pub(crate) struct Shape {
    rank: usize,
    kind: Kind,
    /// The builder's `skip_negative`: negative indices go to the
    /// library's signed pushes, which skip and count them.
    skip_negative: bool,
}

/// An index array as the library takes it: unsigned (checked, the same
/// bits) when no index is negative, signed when `skip_negative` has the
/// library skip the negative ones.
enum Idx<'a> {
    Unsigned(&'a [u64]),
    Signed(&'a [i64]),
}

/// Call the pusher's unsigned push `$u` or signed push `$s` after `$idx`.
macro_rules! by_sign {
    ($p:expr, $idx:expr, $u:ident, $s:ident, $($arg:expr),*) => {
        match $idx {
            Idx::Unsigned(i) => $p.$u(i, $($arg),*),
            Idx::Signed(i) => $p.$s(i, $($arg),*),
        }
    };
}

/// `n` int64 indices at `p`: as [`indices`] (a negative one is
/// `COO_ERR_INDEX`, today's message), unless `skip` and one is negative.
///
/// # Safety
/// As [`indices`].
unsafe fn idx_of<'a>(
    skip: bool,
    p: *const i64,
    n: usize,
    what: &str,
    negative: impl FnOnce(usize, i64) -> String,
) -> Res<Idx<'a>> {
    if skip {
        // SAFETY: forwarded contract.
        let s = unsafe { slice(p, n, what) }?;
        if s.iter().any(|&v| v < 0) {
            return Ok(Idx::Signed(s));
        }
    }
    // SAFETY: forwarded contract.
    unsafe { indices(p, n, what, negative) }.map(Idx::Unsigned)
}

/// How a `double` value reaches the library for this element type.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// As f64: the library rounds once, at the end, to a narrower float.
    Float,
    /// As an i64, for every integer type but u64 (the library checks the range).
    Signed,
    /// As a u64, for u64 tensors.
    Unsigned,
}

/// Values converted per batch for integer tensors: bounds the scratch memory.
const CONVERT_BATCH: usize = 4096;

/// A pusher with the scratch space to convert values; one per thread.
pub(crate) struct Feed {
    pusher: Pusher,
    shared: Shape,
    signed: Vec<i64>,
    unsigned: Vec<u64>,
}

impl Feed {
    fn new(b: &coo_builder) -> Res<Feed> {
        // Any number of pushers: the library shares the budget among them.
        let pusher = lock_builder(b)?.pusher()?;
        Ok(Feed {
            pusher,
            shared: b.shape,
            signed: Vec::new(),
            unsigned: Vec::new(),
        })
    }

    /// Any push: `form` and `kind` say what `idx` and `values` hold (see
    /// `coo_push_form`, `coo_value_kind`).
    ///
    /// # Safety
    /// `idx` and `values` are NULL or point to what `form` and `kind` say
    /// for `n`.
    unsafe fn push_values(
        &mut self,
        form: PushFormArg,
        kind: ValueKindArg,
        n: usize,
        idx: *const i64,
        values: *const f64,
    ) -> Res<()> {
        let form = push_form(form.0)?;
        let complex = value_kind(kind.0)?;
        if form == coo_push_form::COO_PUSH_ONE && n != 1 {
            return Err(Fail::new(
                COO_ERR_ARGUMENT,
                format!("n = {n} with COO_PUSH_ONE (one contribution: n = 1)"),
            ));
        }
        // SAFETY: (every arm) forwarded contract.
        unsafe {
            match (form, complex) {
                (coo_push_form::COO_PUSH_ONE, false) => {
                    let v = slice(values, 1, "values")?;
                    self.push(idx, v[0])
                }
                (coo_push_form::COO_PUSH_ONE, true) => {
                    let v = slice(values, 2, "values")?;
                    self.push_complex(idx, Complex::new(v[0], v[1]))
                }
                (coo_push_form::COO_PUSH_MANY, false) => self.push_many(n, idx, values),
                (coo_push_form::COO_PUSH_MANY, true) => self.push_many_complex(n, idx, values),
                (coo_push_form::COO_PUSH_ELEMENT, false) => self.push_element(n, idx, values),
                (coo_push_form::COO_PUSH_ELEMENT, true) => {
                    self.push_element_complex(n, idx, values)
                }
            }
        }
    }

    /// # Safety
    /// `idx` is NULL or points to `rank` int64.
    unsafe fn push(&mut self, idx: *const i64, value: f64) -> Res<()> {
        let n = self.pusher.count();
        let rank = self.shared.rank;
        let skip = self.shared.skip_negative;
        // SAFETY: forwarded contract.
        let idx = unsafe { idx_of(skip, idx, rank, "idx", negative_component(rank, n)) }?;
        let p = &mut self.pusher;
        match self.shared.kind {
            Kind::Float => by_sign!(p, idx, push, push_signed, value)?,
            Kind::Signed => by_sign!(p, idx, push, push_signed, to_i64(value, n)?)?,
            Kind::Unsigned => by_sign!(p, idx, push, push_signed, to_u64(value, n)?)?,
        }
        Ok(())
    }

    /// # Safety
    /// `idx` and `values` are NULL or point to `n * rank` int64 and `n` doubles.
    unsafe fn push_many(&mut self, n: usize, idx: *const i64, values: *const f64) -> Res<()> {
        let rank = self.shared.rank;
        // SAFETY: forwarded contract.
        let idx = unsafe { self.many_indices(n, idx) }?;
        // SAFETY: forwarded contract.
        let values = unsafe { slice(values, n, "values") }?;
        if self.shared.kind == Kind::Float {
            by_sign!(self.pusher, idx, push_many, push_many_signed, values)?;
            return Ok(());
        }
        let batch = CONVERT_BATCH * rank.max(1);
        for (b, vals) in values.chunks(CONVERT_BATCH).enumerate() {
            let base = self.pusher.count();
            self.convert(vals, base)?;
            let ids = match idx {
                Idx::Unsigned(i) => Idx::Unsigned(&i[b * batch..(b * batch + vals.len() * rank)]),
                Idx::Signed(i) => Idx::Signed(&i[b * batch..(b * batch + vals.len() * rank)]),
            };
            let p = &mut self.pusher;
            match self.shared.kind {
                Kind::Unsigned => by_sign!(p, ids, push_many, push_many_signed, &self.unsigned)?,
                _ => by_sign!(p, ids, push_many, push_many_signed, &self.signed)?,
            }
        }
        Ok(())
    }

    /// # Safety
    /// `dofs` and `ke` are NULL or point to `k` int64 and `k * k` doubles.
    unsafe fn push_element(&mut self, k: usize, dofs: *const i64, ke: *const f64) -> Res<()> {
        let first = self.pusher.count();
        let kk = k
            .checked_mul(k)
            .ok_or_else(|| Fail::new(COO_ERR_ARGUMENT, format!("k = {k} overflows k * k")))?;
        // SAFETY: forwarded contract.
        let dofs = unsafe {
            idx_of(self.shared.skip_negative, dofs, k, "dofs", |a, v| {
                coo_assembler::Error::negative_element_dof(a, i128::from(v))
            })
        }?;
        // SAFETY: forwarded contract.
        let ke = unsafe { slice(ke, kk, "ke") }?;
        if self.shared.kind == Kind::Float {
            by_sign!(self.pusher, dofs, push_element, push_element_signed, ke)?;
            return Ok(());
        }
        // Whole element converted first: a refused value pushes none of it.
        self.convert(ke, first)?;
        let p = &mut self.pusher;
        match self.shared.kind {
            Kind::Unsigned => by_sign!(p, dofs, push_element, push_element_signed, &self.unsigned)?,
            _ => by_sign!(p, dofs, push_element, push_element_signed, &self.signed)?,
        }
        Ok(())
    }

    /// The `n * rank` indices of `n` contributions at `idx`, checked.
    ///
    /// # Safety
    /// `idx` is NULL or points to `n * rank` int64.
    unsafe fn many_indices<'a>(&self, n: usize, idx: *const i64) -> Res<Idx<'a>> {
        let first = self.pusher.count();
        let rank = self.shared.rank;
        let len = n.checked_mul(rank).ok_or_else(|| {
            Fail::new(COO_ERR_ARGUMENT, format!("n = {n} contributions overflow"))
        })?;
        let skip = self.shared.skip_negative;
        // SAFETY: forwarded contract.
        unsafe { idx_of(skip, idx, len, "idx", negative_component(rank, first)) }
    }

    /// # Safety
    /// `idx` is NULL or points to `rank` int64.
    unsafe fn push_complex(&mut self, idx: *const i64, value: Complex<f64>) -> Res<()> {
        let n = self.pusher.count();
        let rank = self.shared.rank;
        let skip = self.shared.skip_negative;
        // SAFETY: forwarded contract.
        let idx = unsafe { idx_of(skip, idx, rank, "idx", negative_component(rank, n)) }?;
        by_sign!(self.pusher, idx, push, push_signed, value)?;
        Ok(())
    }

    /// # Safety
    /// `idx` and `values` are NULL or point to `n * rank` int64 and `2 * n`
    /// doubles (`n` complex values, real part first).
    unsafe fn push_many_complex(
        &mut self,
        n: usize,
        idx: *const i64,
        values: *const f64,
    ) -> Res<()> {
        // SAFETY: forwarded contract.
        let idx = unsafe { self.many_indices(n, idx) }?;
        // SAFETY: forwarded contract.
        let values = unsafe { complex_slice(values, n, "values") }?;
        by_sign!(self.pusher, idx, push_many, push_many_signed, values)?;
        Ok(())
    }

    /// # Safety
    /// `dofs` and `ke` are NULL or point to `k` int64 and `2 * k * k`
    /// doubles.
    unsafe fn push_element_complex(
        &mut self,
        k: usize,
        dofs: *const i64,
        ke: *const f64,
    ) -> Res<()> {
        let kk = k
            .checked_mul(k)
            .ok_or_else(|| Fail::new(COO_ERR_ARGUMENT, format!("k = {k} overflows k * k")))?;
        // SAFETY: forwarded contract.
        let dofs = unsafe {
            idx_of(self.shared.skip_negative, dofs, k, "dofs", |a, v| {
                coo_assembler::Error::negative_element_dof(a, i128::from(v))
            })
        }?;
        // SAFETY: forwarded contract.
        let ke = unsafe { complex_slice(ke, kk, "ke") }?;
        by_sign!(self.pusher, dofs, push_element, push_element_signed, ke)?;
        Ok(())
    }

    /// Convert `vals` (contributions `first..`) into the scratch vector of
    /// this tensor's integer kind.
    fn convert(&mut self, vals: &[f64], first: u64) -> Res<()> {
        let numbered = vals.iter().zip(first..);
        match self.shared.kind {
            Kind::Unsigned => {
                self.unsigned.clear();
                for (&v, n) in numbered {
                    self.unsigned.push(to_u64(v, n)?);
                }
            }
            _ => {
                self.signed.clear();
                for (&v, n) in numbered {
                    self.signed.push(to_i64(v, n)?);
                }
            }
        }
        Ok(())
    }
}

/// An assembly in progress (opaque). Create with `coo_builder_new`; end
/// with `coo_builder_finish` or `coo_builder_free`.
pub struct coo_builder {
    // Dropped first: the builder's own pusher, used by coo_builder_push*.
    own: Mutex<Option<Feed>>,
    /// Locked briefly to make a pusher, and for a whole `push_file`.
    builder: Mutex<Builder>,
    shape: Shape,
    started: Instant,
}

/// A handle for pushing from one thread (opaque), created by
/// `coo_pusher_new`, released by `coo_pusher_free`.
pub struct coo_pusher {
    feed: Feed,
    /// An internal error happened in a call on this pusher.
    broken: bool,
}

/// Fill `out` with the default options: 256 MiB budget, system temp dir,
/// all cores, `COO_DUP_SUM`, zeros kept, exact sums. Does nothing if `out`
/// is NULL.
///
/// # Safety
/// `out` is NULL or valid for writing a `coo_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_options_default(out: *mut coo_options) {
    if out.is_null() {
        return;
    }
    let d = AssembleOptions::default();
    let o = coo_options {
        size: std::mem::size_of::<coo_options>() as u32,
        memory_budget: d.memory_budget,
        temp_dir: std::ptr::null(),
        threads: 0,
        duplicates: DuplicatesArg(to_c(d.duplicates)),
        drop_zeros: BoolArg(u8::from(d.drop_zeros)),
        exact_sums: BoolArg(u8::from(d.exact_sums)),
        non_finite: NonFiniteArg(to_c(d.non_finite)),
        layout: LayoutArg(to_c(d.layout)),
        expected_contributions: 0,
        tensor_name: std::ptr::null(),
        skip_negative: BoolArg(u8::from(d.skip_negative)),
        mode_order_len: 0,
        mode_order: [0; 64],
    };
    // SAFETY: non-null and writable by the caller's contract; `write` does
    // not read the (possibly uninitialised) old value.
    unsafe { out.write(o) };
}

/// The extents of a tensor of `rank` dimensions (1..=64), each >= 0:
/// `COO_ERR_ARGUMENT` otherwise, `COO_ERR_NULL` for a NULL `shape`.
///
/// # Safety
/// `shape` is NULL or points to `rank` int64.
pub(crate) unsafe fn shape_from_c<'a>(rank: u32, shape: *const i64) -> Res<&'a [u64]> {
    if rank == 0 || rank > COO_MAX_RANK {
        return Err(Fail::new(
            COO_ERR_ARGUMENT,
            format!("rank {rank} is out of 1..=64"),
        ));
    }
    // SAFETY: `rank` int64 by the caller's contract.
    unsafe {
        indices(shape, rank as usize, "shape", |d, v| {
            format!("shape[{d}] = {v} is negative")
        })
    }
    .map_err(|mut f| {
        if f.code != COO_ERR_NULL {
            f.code = COO_ERR_ARGUMENT;
        }
        f
    })
}

/// The options `o` points to, or the defaults for NULL.
///
/// # Safety
/// As [`options_from_c`] when `o` is not NULL.
pub(crate) unsafe fn options_or_default(o: *const coo_options) -> Res<AssembleOptions> {
    if o.is_null() {
        Ok(AssembleOptions::default())
    } else {
        // SAFETY: non-null and readable by the caller's contract.
        unsafe { options_from_c(o) }
    }
}

/// What an assembly did, as C sees it; `seconds` since it started.
pub(crate) fn summary_to_c(s: &coo_assembler::builder::Summary, seconds: f64) -> coo_summary {
    coo_summary {
        contributions: s.contributions,
        nnz: s.nnz,
        runs_spilled: s.runs_spilled,
        merge_passes: u64::from(s.merge_passes),
        bytes_spilled: s.bytes_spilled,
        peak_buffer_bytes: s.peak_buffer_bytes,
        seconds,
        skipped_negative: s.skipped_negative,
    }
}

/// The options `o` points to, read as far as its `size` says.
///
/// # Safety
/// `o` points to a readable `coo_options` of at least `o->size` bytes whose
/// string fields are NULL or NUL-terminated.
unsafe fn options_from_c(o: *const coo_options) -> Res<AssembleOptions> {
    // SAFETY: the first field is readable by the caller's contract.
    let size = unsafe { std::ptr::addr_of!((*o).size).read() } as usize;
    // No header before API 2 had the field: every size below API 2's is
    // a struct not filled by coo_options_default. API 3 appended
    // `skip_negative`: a struct that ends before it is an API-2 one.
    let api2 = std::mem::offset_of!(coo_options, skip_negative);
    if size < api2 {
        return Err(Fail::new(
            COO_ERR_ARGUMENT,
            format!(
                "options->size is {size}, not sizeof(coo_options) = {}: fill the options with \
                 coo_options_default (a program built against a header before API 2 must be rebuilt)",
                std::mem::size_of::<coo_options>()
            ),
        ));
    }
    // The caller's bytes copied over zeros: the fields an older header's
    // struct lacks (none before API 3's `skip_negative`) read as 0, and no
    // reference is made to memory beyond the caller's `size`.
    // SAFETY: every field of coo_options is an integer or a raw pointer,
    // for which all-zero bits are valid (0, false, NULL).
    let mut own: coo_options = unsafe { std::mem::zeroed() };
    let n = size.min(std::mem::size_of::<coo_options>());
    // SAFETY: `n` bytes are readable at `o` (at most the caller's `size`)
    // and writable in `own`; any bits are valid for its fields.
    unsafe {
        std::ptr::copy_nonoverlapping(o.cast::<u8>(), std::ptr::addr_of_mut!(own).cast::<u8>(), n)
    };
    let o = &own;
    let skip_negative = o.skip_negative.0 != 0;
    let mut opts = AssembleOptions {
        memory_budget: o.memory_budget,
        duplicates: from_c(o.duplicates.0)?,
        drop_zeros: o.drop_zeros.0 != 0,
        exact_sums: o.exact_sums.0 != 0,
        non_finite: from_c(o.non_finite.0)?,
        layout: from_c(o.layout.0)?,
        expected_contributions: (o.expected_contributions != 0).then_some(o.expected_contributions),
        skip_negative,
        ..AssembleOptions::default()
    };
    if o.threads != 0 {
        opts.threads = o.threads as usize;
    }
    if o.mode_order_len > 0 {
        let n = (o.mode_order_len as usize).min(o.mode_order.len());
        opts.mode_order = Some(o.mode_order[..n].iter().map(|&d| d as usize).collect());
    }
    if !o.temp_dir.is_null() {
        // SAFETY: non-null, NUL-terminated by the caller's contract.
        opts.temp_dir = Some(unsafe { crate::c_path(o.temp_dir, "options->temp_dir") }?);
    }
    if !o.tensor_name.is_null() {
        // SAFETY: non-null, NUL-terminated by the caller's contract.
        opts.tensor_name = unsafe { c_str(o.tensor_name, "options->tensor_name") }?.to_string();
    }
    Ok(opts)
}

/// Set the option `name` of `o` from the text `value`, parsed with the
/// library's tables and size grammar (the CLI's and Python's): e.g.
/// `"memory_budget"` `"1.5GiB"`, `"duplicates"` `"max"`, `"non_finite"`
/// `"reject-nan"`, `"layout"` `"csr"`, `"threads"` `"4"`, `"drop_zeros"`
/// `"true"`, `"skip_negative"` `"true"`, `"exact_sums"` `"false"`,
/// `"mode_order"` `"2,0,1"` (a CSF tensor's levels),
/// `"expected_contributions"` `"1e9"`.
/// The string fields (`temp_dir`, `tensor_name`) keep the pointer `value`:
/// it must stay valid until `coo_builder_new`. `COO_ERR_ARGUMENT` for an
/// unknown name or a bad value, with the library's message.
///
/// # Safety
/// `o` is NULL or points to a `coo_options` filled by
/// `coo_options_default`; `name` and `value` are NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_options_set(
    o: *mut coo_options,
    name: *const c_char,
    value: *const c_char,
) -> c_int {
    status(|| {
        // SAFETY: NULL or a valid, exclusive pointer (the caller's contract).
        let o = unsafe { o.as_mut() }.ok_or_else(|| Fail::null("options"))?;
        // SAFETY: NULL or NUL-terminated (the caller's contract).
        let key = unsafe { c_str(name, "name") }?;
        // SAFETY: as above.
        let text = unsafe { c_str(value, "value") }?;
        let lib = |e: coo_assembler::Error| Fail::new(COO_ERR_ARGUMENT, e.to_string());
        let flag = || match text.to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Ok(BoolArg(1)),
            "0" | "false" | "no" | "off" => Ok(BoolArg(0)),
            _ => Err(Fail::new(
                COO_ERR_ARGUMENT,
                format!("{key}: {text:?} is not true or false"),
            )),
        };
        match key {
            "memory_budget" => {
                o.memory_budget = coo_assembler::vocab::parse_size(text).map_err(lib)?
            }
            "expected_contributions" => {
                o.expected_contributions = coo_assembler::vocab::parse_size(text).map_err(lib)?
            }
            "threads" => {
                o.threads = text.parse().map_err(|_| {
                    Fail::new(
                        COO_ERR_ARGUMENT,
                        format!("threads: {text:?} is not a count (0: all cores)"),
                    )
                })?
            }
            "duplicates" => {
                o.duplicates = DuplicatesArg(to_c(text.parse::<DuplicatePolicy>().map_err(lib)?))
            }
            "non_finite" => {
                o.non_finite = NonFiniteArg(to_c(text.parse::<NonFinitePolicy>().map_err(lib)?))
            }
            "layout" => o.layout = LayoutArg(to_c(text.parse::<OutputLayout>().map_err(lib)?)),
            "drop_zeros" => o.drop_zeros = flag()?,
            "skip_negative" => o.skip_negative = flag()?,
            "exact_sums" => o.exact_sums = flag()?,
            "temp_dir" => o.temp_dir = value,
            "tensor_name" => o.tensor_name = value,
            "mode_order" => {
                let dims: Vec<u32> = text
                    .split(',')
                    .map(|d| d.trim().parse::<u32>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| {
                        Fail::new(
                            COO_ERR_ARGUMENT,
                            format!("mode_order: {text:?} is not a list of dimensions (\"2,0,1\")"),
                        )
                    })?;
                if dims.len() > o.mode_order.len() {
                    return Err(Fail::new(
                        COO_ERR_ARGUMENT,
                        format!("mode_order: {} levels, more than rank 64", dims.len()),
                    ));
                }
                o.mode_order = [0; 64];
                o.mode_order[..dims.len()].copy_from_slice(&dims);
                o.mode_order_len = dims.len() as u32;
            }
            _ => {
                return Err(Fail::new(
                    COO_ERR_ARGUMENT,
                    format!(
                        "unknown option {key:?}; use memory_budget, threads, duplicates, \
                         non_finite, layout, mode_order, drop_zeros, skip_negative, \
                         exact_sums, expected_contributions, temp_dir or tensor_name"
                    ),
                ));
            }
        }
        Ok(())
    })
}

/// The code of the name `value` in the enum `kind` (`"dtype"`,
/// `"duplicates"`, `"non_finite"`, `"layout"`), parsed with the library's
/// table (`"f64"`, `"float64"`, `"sum"`, `"reject-nan"`, `"csr"`...).
///
/// # Safety
/// `kind` and `value` are NULL or NUL-terminated; `out` is NULL or valid
/// for writing an `int`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_parse_name(
    kind: *const c_char,
    value: *const c_char,
    out: *mut c_int,
) -> c_int {
    status(|| {
        // SAFETY: the caller's contract.
        let (kind, text) = unsafe { (c_str(kind, "kind")?, c_str(value, "value")?) };
        // SAFETY: the caller's contract.
        let out = unsafe { out_ref(out, "out") }?;
        let lib = |e: coo_assembler::Error| Fail::new(COO_ERR_ARGUMENT, e.to_string());
        *out = match kind {
            "dtype" => to_c(text.parse::<DType>().map_err(lib)?),
            "duplicates" => to_c(text.parse::<DuplicatePolicy>().map_err(lib)?),
            "non_finite" => to_c(text.parse::<NonFinitePolicy>().map_err(lib)?),
            "layout" => to_c(text.parse::<OutputLayout>().map_err(lib)?),
            _ => {
                return Err(Fail::new(
                    COO_ERR_ARGUMENT,
                    format!("unknown kind {kind:?}; use dtype, duplicates, non_finite or layout"),
                ));
            }
        };
        Ok(())
    })
}

/// A builder for a tensor of `rank` dimensions (1..=64) with extents
/// `shape[0..rank]` (each >= 0) and element type `dtype`. `options` may be
/// NULL for the defaults. Starts the sorter threads. NULL on error
/// (`coo_last_error` says why).
///
/// # Safety
/// `shape` is NULL or points to `rank` int64; `options` is NULL or points
/// to a `coo_options` (its `temp_dir` NULL or a NUL-terminated string).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_new(
    rank: u32,
    shape: *const i64,
    dtype: DTypeArg,
    options: *const coo_options,
) -> *mut coo_builder {
    register(handle(|| {
        // SAFETY: `rank` int64 by the caller's contract.
        let extents = unsafe { shape_from_c(rank, shape) }?;
        let dtype: DType = from_c(dtype.0)?;
        // SAFETY: the caller's contract.
        let opts = unsafe { options_or_default(options) }?;
        let kind = match dtype {
            // A double into a complex tensor: its real part.
            d if d.is_float() || d.is_complex() => Kind::Float,
            DType::U64 => Kind::Unsigned,
            _ => Kind::Signed,
        };
        let skip_negative = opts.skip_negative;
        let started = Instant::now();
        let builder = Builder::new(extents, dtype, opts)?;
        Ok(Box::new(coo_builder {
            own: Mutex::new(None),
            builder: Mutex::new(builder),
            shape: Shape {
                rank: rank as usize,
                kind,
                skip_negative,
            },
            started,
        }))
    }))
}

/// The library builder, locked.
fn lock_builder(b: &coo_builder) -> Res<std::sync::MutexGuard<'_, Builder>> {
    b.builder.lock().map_err(|_| {
        Fail::new(
            COO_ERR_STATE,
            "an internal error in an earlier call left this builder unusable",
        )
    })
}

/// Push every contribution of the input file `path`, read as `format`
/// (`"bin"`, `"text"`, `"mtx"`, `"npy"`; NULL: npy, mtx or text recognised
/// from the first bytes, bin otherwise; gzip and zstd are decompressed): exactly what
/// `coo-assembler assemble` pushes, with its 1-based, line-numbered errors
/// (`COO_ERR_INPUT`), and a duplicate found when merging names the lines it
/// came from. The file's shape, when its header states one, must be the
/// builder's. `count` (may be NULL) gets the contributions pushed.
/// Serialised with the builder's other calls.
///
/// # Safety
/// `b` is NULL or a live builder; `path` and `format` are NULL or
/// NUL-terminated; `count` is NULL or valid for writing a `uint64_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_push_file(
    b: *mut coo_builder,
    path: *const c_char,
    format: *const c_char,
    count: *mut u64,
) -> c_int {
    status(|| {
        let b = live_builder(b)?;
        // SAFETY: the caller's contract.
        let path = unsafe { crate::c_path(path, "path") }?;
        let format = if format.is_null() {
            None
        } else {
            // SAFETY: non-null and NUL-terminated (the caller's contract).
            let f = unsafe { c_str(format, "format") }?;
            Some(
                f.parse::<coo_assembler::input::InputFormat>()
                    .map_err(|e| Fail::new(COO_ERR_ARGUMENT, e.to_string()))?,
            )
        };
        let mut own = b.own.lock().map_err(|_| {
            Fail::new(
                COO_ERR_STATE,
                "an internal error in an earlier push left this builder unusable",
            )
        })?;
        // The readers push through the library builder's own pusher: give
        // back the slot of ours (its chunk goes to the builder).
        own.take();
        let source = coo_assembler::input::Source::open(&path, format)?;
        let n = source.push_into(&mut *lock_builder(b)?, |_| {})?;
        if !count.is_null() {
            // SAFETY: non-null and writable (the caller's contract).
            unsafe { count.write(n) };
        }
        Ok(())
    })
}

/// `n` complex values at `p`: `2 * n` doubles, each value's real part
/// first (the layout of C99 `double _Complex` and Fortran
/// `complex(c_double_complex)`).
///
/// # Safety
/// `p` is NULL or points to `2 * n` doubles that do not change during the
/// borrow.
unsafe fn complex_slice<'a>(p: *const f64, n: usize, what: &str) -> Res<&'a [Complex<f64>]> {
    let doubles = n
        .checked_mul(2)
        .ok_or_else(|| Fail::new(COO_ERR_ARGUMENT, format!("n = {n} complex values overflow")))?;
    // SAFETY: forwarded contract.
    let d = unsafe { slice(p, doubles, what) }?;
    // SAFETY: `Complex<f64>` is `repr(C)` of two f64 (real, imaginary):
    // `d`'s 2n doubles at f64 alignment are n of them.
    Ok(unsafe { std::slice::from_raw_parts(d.as_ptr().cast::<Complex<f64>>(), n) })
}

/// Run `f` on the builder's own pusher (made on first use).
/// The `coo_push_form` of the C code `code`.
fn push_form(code: c_int) -> Res<coo_push_form> {
    [
        coo_push_form::COO_PUSH_ONE,
        coo_push_form::COO_PUSH_MANY,
        coo_push_form::COO_PUSH_ELEMENT,
    ]
    .into_iter()
    .find(|&f| f as c_int == code)
    .ok_or_else(|| {
        Fail::new(
            COO_ERR_ARGUMENT,
            format!(
                "{code} is not a push form (0 = COO_PUSH_ONE, 1 = COO_PUSH_MANY, \
                 2 = COO_PUSH_ELEMENT)"
            ),
        )
    })
}

/// Whether the C code `code` is `COO_VALUES_COMPLEX` (or `COO_VALUES_REAL`).
fn value_kind(code: c_int) -> Res<bool> {
    match code {
        c if c == coo_value_kind::COO_VALUES_REAL as c_int => Ok(false),
        c if c == coo_value_kind::COO_VALUES_COMPLEX as c_int => Ok(true),
        _ => Err(Fail::new(
            COO_ERR_ARGUMENT,
            format!("{code} is not a value kind (0 = COO_VALUES_REAL, 1 = COO_VALUES_COMPLEX)"),
        )),
    }
}

fn with_own(b: *mut coo_builder, f: impl FnOnce(&mut Feed) -> Res<()>) -> c_int {
    status(|| {
        // Only shared access is taken; the Mutex serialises.
        let b = live_builder(b)?;
        let mut own = b.own.lock().map_err(|_| {
            Fail::new(
                COO_ERR_STATE,
                "an internal error in an earlier push left this builder unusable",
            )
        })?;
        if own.is_none() {
            *own = Some(Feed::new(b)?);
        }
        match own.as_mut() {
            Some(feed) => f(feed),
            None => Err(Fail::new(COO_ERR_STATE, "builder has no pusher")),
        }
    })
}

/// Push contributions into `b`, in any form (`form`: one contribution,
/// `n` of them, or an element matrix over `n` dofs) with real or complex
/// values (`kind`): the one push of a builder, which the other
/// `coo_builder_push*` functions call with a fixed form and kind. Calls on
/// one builder are serialised by a lock; give each thread a `coo_pusher`
/// to push in parallel.
///
/// # Safety
/// `b` is NULL or a live builder; `idx` and `values` are NULL or point to
/// the indices and doubles `form` and `kind` say for `n` (see
/// `coo_push_form`, `coo_value_kind`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_push_values(
    b: *mut coo_builder,
    form: PushFormArg,
    kind: ValueKindArg,
    n: usize,
    idx: *const i64,
    values: *const f64,
) -> c_int {
    // SAFETY: forwarded contract.
    with_own(b, |f| unsafe { f.push_values(form, kind, n, idx, values) })
}

/// Push one contribution: `idx` holds `rank` components. Calls on one
/// builder are serialised (a lock); for parallel pushing give each thread
/// a `coo_pusher`. The builder's own pusher, made by the first push,
/// counts as one of the pushers alive.
///
/// # Safety
/// `b` is NULL or a live builder; `idx` is NULL or points to `rank` int64.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_push(
    b: *mut coo_builder,
    idx: *const i64,
    value: f64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        coo_builder_push_values(
            b,
            PushFormArg(coo_push_form::COO_PUSH_ONE as c_int),
            ValueKindArg(coo_value_kind::COO_VALUES_REAL as c_int),
            1,
            idx,
            &value,
        )
    }
}

/// Push `n` contributions: contribution `i` has index
/// `idx[i*rank .. (i+1)*rank]` and value `values[i]`. On error, the
/// contributions before the failing one may have been pushed.
///
/// # Safety
/// `b` is NULL or a live builder; `idx` and `values` are NULL or point to
/// `n * rank` int64 and `n` doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_push_many(
    b: *mut coo_builder,
    n: usize,
    idx: *const i64,
    values: *const f64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        coo_builder_push_values(
            b,
            PushFormArg(coo_push_form::COO_PUSH_MANY as c_int),
            ValueKindArg(coo_value_kind::COO_VALUES_REAL as c_int),
            n,
            idx,
            values,
        )
    }
}

/// Push a dense element matrix (rank-2 tensors): `ke[a*k + b]` goes to
/// `(dofs[a], dofs[b])`. All or nothing: on error none of it is pushed.
///
/// # Safety
/// `b` is NULL or a live builder; `dofs` and `ke` are NULL or point to `k`
/// int64 and `k * k` doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_push_element(
    b: *mut coo_builder,
    k: usize,
    dofs: *const i64,
    ke: *const f64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        coo_builder_push_values(
            b,
            PushFormArg(coo_push_form::COO_PUSH_ELEMENT as c_int),
            ValueKindArg(coo_value_kind::COO_VALUES_REAL as c_int),
            k,
            dofs,
            ke,
        )
    }
}

/// Push one complex contribution `re + im i` (complex64 and complex128
/// tensors; `coo_builder_push` pushes a real value, imaginary part 0).
/// A complex value into a real tensor is `COO_ERR_VALUE`.
///
/// # Safety
/// `b` is NULL or a live builder; `idx` is NULL or points to `rank` int64.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_push_complex(
    b: *mut coo_builder,
    idx: *const i64,
    re: f64,
    im: f64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        coo_builder_push_values(
            b,
            PushFormArg(coo_push_form::COO_PUSH_ONE as c_int),
            ValueKindArg(coo_value_kind::COO_VALUES_COMPLEX as c_int),
            1,
            idx,
            [re, im].as_ptr(),
        )
    }
}

/// As `coo_builder_push_many` with `n` complex values: `values` holds `2 *
/// n` doubles, real and imaginary part of each in turn (a C99 `double
/// _Complex` array, a Fortran `complex(c_double_complex)` array).
///
/// # Safety
/// `b` is NULL or a live builder; `idx` and `values` are NULL or point to
/// `n * rank` int64 and `2 * n` doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_push_many_complex(
    b: *mut coo_builder,
    n: usize,
    idx: *const i64,
    values: *const f64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        coo_builder_push_values(
            b,
            PushFormArg(coo_push_form::COO_PUSH_MANY as c_int),
            ValueKindArg(coo_value_kind::COO_VALUES_COMPLEX as c_int),
            n,
            idx,
            values,
        )
    }
}

/// As `coo_builder_push_element` with a complex element matrix: `ke`
/// holds `2 * k * k` doubles (`ke[2*(a*k + b)]` the real part of entry
/// `(dofs[a], dofs[b])`, the next one its imaginary part).
///
/// # Safety
/// `b` is NULL or a live builder; `dofs` and `ke` are NULL or point to `k`
/// int64 and `2 * k * k` doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_push_element_complex(
    b: *mut coo_builder,
    k: usize,
    dofs: *const i64,
    ke: *const f64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        coo_builder_push_values(
            b,
            PushFormArg(coo_push_form::COO_PUSH_ELEMENT as c_int),
            ValueKindArg(coo_value_kind::COO_VALUES_COMPLEX as c_int),
            k,
            dofs,
            ke,
        )
    }
}

/// A pusher for one thread. Several threads may call this at once on the
/// same builder, and any number of pushers may be alive at once (e.g. an
/// OpenMP team larger than `options.threads`): they share the budget. The
/// first `options.threads` alive keep a chunk of their own; the others
/// borrow chunks, so that no pusher ever waits on one that is idle (at a
/// barrier, say). NULL on error.
///
/// # Safety
/// `b` is NULL or a live builder.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_pusher_new(b: *mut coo_builder) -> *mut coo_pusher {
    register(handle(|| {
        let b = live_builder(b)?;
        Ok(Box::new(coo_pusher {
            feed: Feed::new(b)?,
            broken: false,
        }))
    }))
}

/// Run `f` on a pusher; an internal error makes it unusable.
fn with_pusher(p: *mut coo_pusher, f: impl FnOnce(&mut Feed) -> Res<()>) -> c_int {
    // SAFETY: NULL or a live pusher used by one thread at a time (the
    // caller's contract), so this is the only reference.
    let Some(p) = (unsafe { p.as_mut() }) else {
        return status(|| Err(Fail::null("pusher")));
    };
    if p.broken {
        return status(|| {
            Err(Fail::new(
                COO_ERR_STATE,
                "an internal error in an earlier push left this pusher unusable",
            ))
        });
    }
    let code = status(|| f(&mut p.feed));
    if code == COO_ERR_PANIC {
        p.broken = true;
    }
    code
}

/// As `coo_builder_push_values`, through this thread's pusher (no lock):
/// the one push of a pusher, which the other `coo_pusher_push*` functions
/// call with a fixed form and kind.
///
/// # Safety
/// `p` is NULL or a live pusher used by this thread only; `idx` and
/// `values` as for `coo_builder_push_values`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_pusher_push_values(
    p: *mut coo_pusher,
    form: PushFormArg,
    kind: ValueKindArg,
    n: usize,
    idx: *const i64,
    values: *const f64,
) -> c_int {
    // SAFETY: forwarded contract.
    with_pusher(p, |f| unsafe { f.push_values(form, kind, n, idx, values) })
}

/// As `coo_builder_push`, through this thread's pusher (no lock).
///
/// # Safety
/// `p` is NULL or a live pusher not used by another thread during the
/// call; `idx` is NULL or points to `rank` int64.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_pusher_push(p: *mut coo_pusher, idx: *const i64, value: f64) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        coo_pusher_push_values(
            p,
            PushFormArg(coo_push_form::COO_PUSH_ONE as c_int),
            ValueKindArg(coo_value_kind::COO_VALUES_REAL as c_int),
            1,
            idx,
            &value,
        )
    }
}

/// As `coo_builder_push_many`, through this thread's pusher.
///
/// # Safety
/// As `coo_pusher_push`, with `idx` and `values` NULL or pointing to
/// `n * rank` int64 and `n` doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_pusher_push_many(
    p: *mut coo_pusher,
    n: usize,
    idx: *const i64,
    values: *const f64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        coo_pusher_push_values(
            p,
            PushFormArg(coo_push_form::COO_PUSH_MANY as c_int),
            ValueKindArg(coo_value_kind::COO_VALUES_REAL as c_int),
            n,
            idx,
            values,
        )
    }
}

/// As `coo_builder_push_element`, through this thread's pusher.
///
/// # Safety
/// As `coo_pusher_push`, with `dofs` and `ke` NULL or pointing to `k`
/// int64 and `k * k` doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_pusher_push_element(
    p: *mut coo_pusher,
    k: usize,
    dofs: *const i64,
    ke: *const f64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        coo_pusher_push_values(
            p,
            PushFormArg(coo_push_form::COO_PUSH_ELEMENT as c_int),
            ValueKindArg(coo_value_kind::COO_VALUES_REAL as c_int),
            k,
            dofs,
            ke,
        )
    }
}

/// As `coo_builder_push_complex`, through this thread's pusher.
///
/// # Safety
/// As `coo_pusher_push`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_pusher_push_complex(
    p: *mut coo_pusher,
    idx: *const i64,
    re: f64,
    im: f64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        coo_pusher_push_values(
            p,
            PushFormArg(coo_push_form::COO_PUSH_ONE as c_int),
            ValueKindArg(coo_value_kind::COO_VALUES_COMPLEX as c_int),
            1,
            idx,
            [re, im].as_ptr(),
        )
    }
}

/// As `coo_builder_push_many_complex`, through this thread's pusher.
///
/// # Safety
/// As `coo_pusher_push`, with `idx` and `values` NULL or pointing to
/// `n * rank` int64 and `2 * n` doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_pusher_push_many_complex(
    p: *mut coo_pusher,
    n: usize,
    idx: *const i64,
    values: *const f64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        coo_pusher_push_values(
            p,
            PushFormArg(coo_push_form::COO_PUSH_MANY as c_int),
            ValueKindArg(coo_value_kind::COO_VALUES_COMPLEX as c_int),
            n,
            idx,
            values,
        )
    }
}

/// As `coo_builder_push_element_complex`, through this thread's pusher.
///
/// # Safety
/// As `coo_pusher_push`, with `dofs` and `ke` NULL or pointing to `k`
/// int64 and `2 * k * k` doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_pusher_push_element_complex(
    p: *mut coo_pusher,
    k: usize,
    dofs: *const i64,
    ke: *const f64,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        coo_pusher_push_values(
            p,
            PushFormArg(coo_push_form::COO_PUSH_ELEMENT as c_int),
            ValueKindArg(coo_value_kind::COO_VALUES_COMPLEX as c_int),
            k,
            dofs,
            ke,
        )
    }
}

/// Release a pusher, handing its buffered contributions to the builder.
/// Every pusher must be freed before `coo_builder_finish`. NULL, or a
/// pusher already freed: no-op.
///
/// # Safety
/// `p` is NULL or a pusher handle, not used by another thread during the
/// call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_pusher_free(p: *mut coo_pusher) {
    if !p.is_null() && unregister(p) {
        // SAFETY: registered by coo_pusher_new and unregistered just now,
        // so this is the one free.
        quietly(|| drop(unsafe { Box::from_raw(p) }));
    }
}

/// Merge everything and write the tensor to `path` (atomically: temporary
/// file, fsync, rename); fill `out` (may be NULL).
///
/// Before merging, the call checks what the caller can fix: `path` (not
/// NULL or empty, names a file and not a directory, its folder exists and
/// is writable, it is none of the files pushed) and that every pusher was
/// freed. If one fails it returns
/// `COO_ERR_REFUSED` and the builder is untouched and still the caller's
/// (fix it and call again, or `coo_builder_free`). Any other status means
/// the handle is gone: `COO_OK` (written), or a failure while merging or
/// writing (nothing is published, spill files are removed). A handle that
/// is not a live builder (finished, freed) gives `COO_ERR_STATE`.
///
/// # Safety
/// `b` is NULL or a builder handle, not used by another thread during the
/// call; `path` is NULL or NUL-terminated; `out` is NULL or valid for
/// writing a `coo_summary`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_finish(
    b: *mut coo_builder,
    path: *const c_char,
    out: *mut coo_summary,
) -> c_int {
    // SAFETY: forwarded contract.
    status(|| unsafe { finish(b, path, out, |_| Ok(())) })
}

/// Record where every contribution lands while the builder assembles, so
/// that later steps refill by pushing their values alone
/// (`coo_builder_finish_recorded` hands the plan over). Call it before the
/// first push or pusher. The plan takes one value per contribution in the
/// order of the pushers' creation, then of their pushes (the builder's own
/// pushes count as one pusher, made at the first `coo_builder_push*`),
/// skipped ones (`skip_negative`) included. Each pusher writes the
/// coordinates it takes to a temporary file in the spill folder (8 bytes
/// per index). `COO_ERR_OPTIONS` under `drop_zeros` (a plan's pattern is
/// fixed), `COO_ERR_ARGUMENT` after a push, `COO_ERR_STATE` for a handle
/// that is not a live builder.
///
/// # Safety
/// `b` is NULL or a builder handle, not used by another thread during the
/// call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_record_plan(b: *mut coo_builder) -> c_int {
    status(|| {
        let h = live_builder(b)?;
        let mut builder = h.builder.lock().map_err(|_| {
            Fail::new(
                COO_ERR_STATE,
                "an internal error left this builder unusable",
            )
        })?;
        Ok(builder.record_plan()?)
    })
}

/// `coo_builder_finish`, then the plan the builder recorded
/// (`coo_builder_record_plan`): in memory into `*plan` when `plan` is not
/// NULL (a `coo_plan` as `coo_plan_new` makes, released by
/// `coo_plan_free`; for fewer than 2^32 contributions), and written out of
/// core to the plan file `plan_path` when it is not NULL (for
/// `coo_refill_file`, within the builder's memory budget). The tensor is
/// published first: an error making the plan (`*plan` then NULL, no plan
/// file) still leaves the tensor at `path`, and the builder is gone.
/// Refusals as `coo_builder_finish`'s; `COO_ERR_ARGUMENT` when the
/// builder did not record its plan.
///
/// # Safety
/// As `coo_builder_finish`; `plan` is NULL or valid for writing a pointer;
/// `plan_path` is NULL or NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_finish_recorded(
    b: *mut coo_builder,
    path: *const c_char,
    out: *mut coo_summary,
    plan: *mut *mut crate::plan::coo_plan,
    plan_path: *const c_char,
) -> c_int {
    if !plan.is_null() {
        // SAFETY: writable (contract).
        unsafe { plan.write(std::ptr::null_mut()) };
    }
    status(|| {
        let plan_path = if plan_path.is_null() {
            None
        } else {
            // SAFETY: NUL-terminated (contract).
            Some(unsafe { crate::c_path(plan_path, "plan_path") }?)
        };
        let after = |builder: &Builder| -> Res<()> {
            if !plan.is_null() {
                let p = coo_assembler::Plan::recorded(builder, None)?;
                // SAFETY: writable (contract).
                unsafe { plan.write(crate::plan::plan_handle(p)) };
            }
            if let Some(pp) = &plan_path {
                coo_assembler::plan::PlanFile::create_recorded(builder, pp, None)?;
            }
            Ok(())
        };
        // SAFETY: forwarded contract.
        unsafe { finish(b, path, out, after) }
    })
}

/// The body of `coo_builder_finish`: `after` runs on the finished builder
/// before it is freed (its error is the call's, the tensor published).
///
/// # Safety
/// As `coo_builder_finish`.
unsafe fn finish(
    b: *mut coo_builder,
    path: *const c_char,
    out: *mut coo_summary,
    after: impl FnOnce(&Builder) -> Res<()>,
) -> Res<()> {
    {
        let h = live_builder(b)?;
        // SAFETY: NULL or NUL-terminated (contract).
        let path = unsafe { crate::c_path(path, "path") }.map_err(refused)?;
        // The builder's own pusher hands its contributions over first.
        match h.own.lock() {
            Ok(mut own) => *own = None,
            Err(e) => *e.into_inner() = None,
        }
        let (result, spent) = match h.builder.lock() {
            Ok(mut builder) => {
                let r = builder.finish(&path);
                let spent = builder.is_finished();
                let r = match r {
                    Ok(s) => match after(&builder) {
                        Ok(()) => Ok(s),
                        Err(f) => {
                            drop(builder);
                            consume(b);
                            return Err(f);
                        }
                    },
                    Err(e) => Err(e),
                };
                (r, spent)
            }
            // An internal error left it unusable: it goes, as a failure.
            Err(_) => {
                consume(b);
                return Err(Fail::new(
                    COO_ERR_STATE,
                    "an internal error in an earlier call left this builder unusable; it is freed",
                ));
            }
        };
        let s = match result {
            Ok(s) => s,
            Err(coo_assembler::Error::PushersAlive { alive }) if !spent => {
                return Err(refused(Fail::new(
                    COO_ERR_STATE,
                    format!("{alive} pusher(s) still alive: free them (coo_pusher_free) first"),
                )));
            }
            Err(e) if !spent => return Err(refused(Fail::from(e))),
            Err(e) => {
                consume(b);
                return Err(Fail::from(e));
            }
        };
        let summary = summary_to_c(&s, h.started.elapsed().as_secs_f64());
        consume(b);
        if !out.is_null() {
            // SAFETY: non-null and writable (contract); `write` does not
            // read the old value.
            unsafe { out.write(summary) };
        }
        Ok(())
    }
}

/// A refusal of `finish`: the builder is unchanged and still the caller's.
fn refused(f: Fail) -> Fail {
    Fail::new(
        COO_ERR_REFUSED,
        format!(
            "{}; nothing was merged and the builder is still yours: fix this and call \
             coo_builder_finish again, or coo_builder_free",
            f.msg
        ),
    )
}

/// Free the live builder `b` (finished, or failed while finishing).
fn consume(b: *mut coo_builder) {
    if unregister(b) {
        // SAFETY: registered by coo_builder_new and unregistered just now,
        // so this is the one free; no reference to it is used afterwards.
        drop(unsafe { Box::from_raw(b) });
    }
}

/// Abandon an assembly: nothing is published and spill files are removed
/// (when the last pusher is freed, if some are still alive). NULL, or a
/// handle already finished or freed: no-op.
///
/// # Safety
/// `b` is NULL or a builder handle, not used by another thread during the
/// call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_builder_free(b: *mut coo_builder) {
    if !b.is_null() && unregister(b) {
        // SAFETY: registered by coo_builder_new and unregistered just now,
        // so this is the one free.
        quietly(|| drop(unsafe { Box::from_raw(b) }));
    }
}
