//! `coo_file`: reading a tensor of a Hurray file through the validating
//! memory-mapped reader.

use crate::convert::{c_str, indices, negative_component, out_ref, slice, to_c};
use crate::{BoolArg, DTypeArg};
use crate::{
    COO_ERR_ARGUMENT, COO_ERR_INDEX, COO_ERR_INVALID_FILE, COO_ERR_RANK, Fail, Res, coo_info,
    handle, quietly, status,
};
use coo_assembler::matrix::Paging;
use coo_assembler::matrix::export::{ExportOptions, Format, NpzLayout, export_file};
use coo_assembler::{
    HurrayFile, options::OutputLayout, read::Problem, read::Severity, read::Tensor,
};
use std::ffi::{CStr, c_char, c_int};
use std::ptr::NonNull;

// Readers may share a coo_file across threads.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<HurrayFile>();
};

/// Storage layout of an open tensor, from `coo_file_layout`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum coo_layout {
    /// Coordinate list, any rank (`coo_info.sorted`: row-major order).
    COO_LAYOUT_COO = 0,
    /// Compressed sparse rows (a matrix; entries row by row).
    COO_LAYOUT_CSR = 1,
    /// Compressed sparse columns (a matrix; entries column by column).
    COO_LAYOUT_CSC = 2,
    /// Compressed sparse fibres (rank 3 and up; entries in the order of
    /// their index tuples taken in the tensor's mode order).
    COO_LAYOUT_CSF = 3,
}

/// An open tensor of a Hurray file (opaque); `coo_file_close` releases it.
/// Every `coo_file_*` reading function takes a `const coo_file *` and may be
/// called from several threads at once.
pub struct coo_file {
    /// A view into `*file`: it borrows the boxed reader, which is freed
    /// only in Drop, after the view's last use.
    tensor: Tensor<'static>,
    /// Owned; held as a raw pointer (not a Box) so that moving this struct
    /// does not invalidate the view's borrows.
    file: NonNull<HurrayFile>,
}

// SAFETY: the raw pointer is an owned HurrayFile (Send + Sync, checked
// above) and the view only borrows it.
unsafe impl Send for coo_file {}
// SAFETY: as above; all access through `&coo_file` is read-only.
unsafe impl Sync for coo_file {}

impl Drop for coo_file {
    fn drop(&mut self) {
        // SAFETY: from Box::into_raw in open, freed once, here.
        drop(unsafe { Box::from_raw(self.file.as_ptr()) });
    }
}

fn open(path: *const c_char, name: *const c_char) -> Res<Box<coo_file>> {
    // SAFETY: NULL or NUL-terminated by the caller's contract.
    let path = unsafe { crate::c_path(path, "path") }?;
    let file = NonNull::from(Box::leak(Box::new(HurrayFile::open(&path)?)));
    // Frees the reader if no view can be made.
    let guard = FileGuard(Some(file));
    // SAFETY: `file` stays allocated until coo_file's Drop (or the guard's),
    // and is never mutated: a 'static view is valid for the handle's life.
    let f: &'static HurrayFile = unsafe { file.as_ref() };
    let tensor = if name.is_null() {
        // The first tensor of the index, whatever its layout: a dense one
        // is refused by name (COO_ERR_UNSUPPORTED), not skipped.
        let first = f.tensor_infos().next().ok_or_else(|| {
            Fail::new(
                COO_ERR_INVALID_FILE,
                format!("{}: the file holds no tensor", path.display()),
            )
        })?;
        f.tensor_view(first.name())
            .map_err(|e| e.for_op("coo_file_open"))?
    } else {
        // SAFETY: non-null and NUL-terminated (contract).
        let name = unsafe { CStr::from_ptr(name) }
            .to_str()
            .map_err(|_| Fail::new(COO_ERR_ARGUMENT, "tensor name is not UTF-8"))?;
        f.tensor_view(name)
            .map_err(|e| e.for_op("coo_file_open_tensor"))?
    };
    guard.defuse();
    Ok(Box::new(coo_file { tensor, file }))
}

struct FileGuard(Option<NonNull<HurrayFile>>);

impl FileGuard {
    fn defuse(mut self) {
        self.0 = None;
    }
}

impl Drop for FileGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0 {
            // SAFETY: from Box::leak in `open`; no view of it survives.
            drop(unsafe { Box::from_raw(p.as_ptr()) });
        }
    }
}

/// Open the first tensor of the Hurray file at `path` (its structure is
/// validated; `coo_file_verify` checks the content). The file is memory
/// mapped: truncating it while open raises SIGBUS. NULL on error.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_open(path: *const c_char) -> *mut coo_file {
    handle(|| open(path, std::ptr::null()))
}

/// As `coo_file_open`, for the tensor called `name` (NULL: the first).
///
/// # Safety
/// `path` and `name` are NULL or NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_open_tensor(
    path: *const c_char,
    name: *const c_char,
) -> *mut coo_file {
    handle(|| open(path, name))
}

fn file<'a>(f: *const coo_file) -> Res<&'a coo_file> {
    // SAFETY: NULL or a live handle (the caller's contract).
    unsafe { f.as_ref() }.ok_or_else(|| Fail::null("file"))
}

/// An index component of a file that does not fit `int64_t`.
fn too_large(v: u64) -> Fail {
    Fail::new(
        COO_ERR_INVALID_FILE,
        format!("{v} does not fit int64_t (this API's index type)"),
    )
}

/// Rank, shape, element type, entry count and sortedness of the tensor
/// (`sorted`: entries in row-major order, as in a sorted COO or a CSR
/// tensor; false for CSC).
///
/// # Safety
/// `f` is NULL or a live file; `out` is NULL or valid for writing a `coo_info`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_info(f: *const coo_file, out: *mut coo_info) -> c_int {
    status(|| {
        let t = file(f)?.tensor;
        let mut shape = [0i64; 64];
        for (s, &e) in shape.iter_mut().zip(t.shape()) {
            *s = i64::try_from(e).map_err(|_| too_large(e))?;
        }
        let info = coo_info {
            rank: t.rank() as u32,
            shape,
            dtype: DTypeArg(to_c(t.dtype())),
            nnz: t.nnz(),
            // CSR entries are in row-major order too; CSC ones are not.
            sorted: t.is_row_major(),
        };
        // SAFETY: NULL or writable (contract).
        *unsafe { out_ref(out, "out") }? = info;
        Ok(())
    })
}

/// The value at `idx` (`rank` components) as a double; 0.0 where nothing
/// is stored. 64-bit integers beyond 2^53 are rounded.
///
/// # Safety
/// `f` is NULL or a live file; `idx` is NULL or points to `rank` int64;
/// `value` is NULL or valid for writing a double.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_get(
    f: *const coo_file,
    idx: *const i64,
    value: *mut f64,
) -> c_int {
    status(|| {
        // SAFETY: forwarded contract.
        let (t, idx) = unsafe { tensor_at(f, idx) }?;
        // SAFETY: NULL or writable (contract).
        let value = unsafe { out_ref(value, "value") }?;
        real_only(&t, "coo_file_get_complex")?;
        *value = t.get(idx)?.to_f64();
        Ok(())
    })
}

/// The file's tensor and the coordinate at `idx` (`rank` components).
///
/// # Safety
/// `f` is NULL or a live file; `idx` is NULL or points to `rank` int64.
unsafe fn tensor_at<'a>(f: *const coo_file, idx: *const i64) -> Res<(Tensor<'static>, &'a [u64])> {
    let t = file(f)?.tensor;
    // SAFETY: `rank` int64 (contract).
    let idx = unsafe { indices(idx, t.rank(), "idx", negative_component(t.rank(), 0)) }?;
    Ok((t, idx))
}

/// A complex tensor's value read as one double would lose its imaginary
/// part: refused, naming the call that reads both.
fn real_only(t: &Tensor<'_>, instead: &str) -> Res<()> {
    if t.dtype().is_complex() {
        return Err(Fail::new(
            crate::COO_ERR_UNSUPPORTED,
            format!(
                "tensor {:?} holds {} values, which a double cannot hold: use {instead}",
                t.name(),
                t.dtype()
            ),
        ));
    }
    Ok(())
}

/// `coo_file_get` for any tensor, its value as `*re + *im i` (the
/// imaginary part 0 for a real tensor).
///
/// # Safety
/// `f` is NULL or a live file; `idx` is NULL or points to `rank` int64;
/// `re` and `im` are NULL or valid for writing a double.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_get_complex(
    f: *const coo_file,
    idx: *const i64,
    re: *mut f64,
    im: *mut f64,
) -> c_int {
    status(|| {
        // SAFETY: forwarded contract.
        let (t, idx) = unsafe { tensor_at(f, idx) }?;
        // SAFETY: NULL or writable (contract).
        let re = unsafe { out_ref(re, "re") }?;
        // SAFETY: NULL or writable (contract).
        let im = unsafe { out_ref(im, "im") }?;
        (*re, *im) = t.get(idx)?.to_complex();
        Ok(())
    })
}

/// Copy entries `first .. first + n` (fewer at the end of the tensor) in
/// storage order: coordinates into `idx` (`rank` per entry; may be NULL)
/// and values into `values` (may be NULL); the number copied into
/// `*n_read` (may be NULL). `first > nnz` is `COO_ERR_INDEX`; `first ==
/// nnz` reads nothing. The first call on an open file checks the xxh3
/// checksums our writer stores for the tensor's buffers: a damaged buffer
/// is `COO_ERR_INVALID_FILE` naming it, with nothing copied, on that call
/// and every later one (the verdict is kept for the open file).
///
/// # Safety
/// `f` is NULL or a live file; `idx` and `values` are NULL or writable for
/// `n * rank` int64 and `n` doubles; `n_read` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_read_entries(
    f: *const coo_file,
    first: u64,
    n: usize,
    idx: *mut i64,
    values: *mut f64,
    n_read: *mut usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { read_entries(f, first, n, idx, values, n_read, false) }
}

/// `coo_file_read_entries` for any tensor, each value as two doubles
/// (real part, imaginary part; 0 for a real tensor): `values` holds `2 *
/// n` doubles (a C99 `double _Complex` array).
///
/// # Safety
/// As `coo_file_read_entries`, with `values` NULL or writable for `2 * n`
/// doubles.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_read_entries_complex(
    f: *const coo_file,
    first: u64,
    n: usize,
    idx: *mut i64,
    values: *mut f64,
    n_read: *mut usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { read_entries(f, first, n, idx, values, n_read, true) }
}

/// Both entry readers: `complex` says whether `values` takes two doubles
/// per value (any tensor) or one (real tensors).
///
/// # Safety
/// As `coo_file_read_entries`, `values` writable for `n` doubles, or `2 *
/// n` when `complex`.
unsafe fn read_entries(
    f: *const coo_file,
    first: u64,
    n: usize,
    idx: *mut i64,
    values: *mut f64,
    n_read: *mut usize,
    complex: bool,
) -> c_int {
    status(|| {
        let t = file(f)?.tensor;
        if !complex && !values.is_null() {
            real_only(&t, "coo_file_read_entries_complex")?;
        }
        // Issue 22: the first read of an open file checks the xxh3
        // checksums our writer stores for the tensor's buffers (once; later
        // reads reuse the verdict). A damaged buffer is
        // COO_ERR_INVALID_FILE naming it, and nothing is copied.
        t.check_checksums()?;
        let nnz = t.nnz();
        if first > nnz {
            return Err(Fail::new(
                COO_ERR_INDEX,
                format!("first entry {first} is beyond the tensor's {nnz} entries"),
            ));
        }
        let count = (nnz - first).min(n as u64) as usize;
        let rank = t.rank();
        let start = first as usize;
        if !idx.is_null() && count > 0 {
            // SAFETY: non-null, writable for n * rank >= count * rank int64 (contract).
            let dst = unsafe { out_slice(idx, count * rank, "idx") }?;
            let mut words: Vec<u64> = Vec::new();
            words.try_reserve_exact(count * rank).map_err(|_| {
                Fail::from(coo_assembler::Error::OutOfMemory {
                    what: "the entries' coordinates",
                    bytes: (count * rank * 8) as u64,
                })
            })?;
            words.resize(count * rank, 0);
            t.entry_coordinates(first, &mut words)?;
            for (d, &s) in dst.iter_mut().zip(&words) {
                *d = i64::try_from(s).map_err(|_| too_large(s))?;
            }
        }
        if complex && !values.is_null() && count > 0 {
            // SAFETY: non-null, writable for 2 n >= 2 count doubles (contract).
            let dst = unsafe { out_slice(values, 2 * count, "values") }?;
            let dtype = t.dtype();
            let w = dtype.width();
            let bytes = &t.values_bytes()[start * w..];
            for (d, b) in dst.chunks_exact_mut(2).zip(bytes.chunks_exact(w)) {
                (d[0], d[1]) = dtype.decode(b).to_complex();
            }
        } else if !values.is_null() && count > 0 {
            // SAFETY: non-null, writable for n >= count doubles (contract).
            let dst = unsafe { out_slice(values, count, "values") }?;
            let bytes = t.values_bytes();
            let dtype = t.dtype();
            let w = dtype.width();
            if dtype == coo_assembler::DType::F64 {
                for (d, b) in dst.iter_mut().zip(bytes[start * 8..].chunks_exact(8)) {
                    *d = f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                }
            } else {
                for (d, b) in dst.iter_mut().zip(bytes[start * w..].chunks_exact(w)) {
                    *d = dtype.decode(b).to_f64();
                }
            }
        }
        if !n_read.is_null() {
            // SAFETY: non-null and writable (contract).
            *unsafe { out_ref(n_read, "n_read") }? = count;
        }
        Ok(())
    })
}

/// # Safety
/// `p` is non-null and writable for `n` elements.
pub(crate) unsafe fn out_slice<'a, T>(p: *mut T, n: usize, what: &str) -> Res<&'a mut [T]> {
    // Nothing to write: NULL is allowed, and a slice must not be made of it.
    if n == 0 {
        return Ok(&mut []);
    }
    // SAFETY: checks alignment and nullness; the caller vouches for the length.
    unsafe { slice(p.cast_const(), n, what) }?;
    // SAFETY: as above, and writable (contract).
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// The entries whose leading coordinates, in storage order, are `prefix`
/// (1..=rank components) are entries `*begin .. *end` (read them with
/// `coo_file_read_entries`): for a sorted COO or a CSR tensor, one
/// component is a row; for CSC, a column (column first); for CSF, the
/// components follow its mode order. An unsorted COO tensor is refused.
///
/// # Safety
/// `f` is NULL or a live file; `prefix` is NULL or points to `prefix_len`
/// int64; `begin` and `end` are NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_prefix_range(
    f: *const coo_file,
    prefix_len: usize,
    prefix: *const i64,
    begin: *mut u64,
    end: *mut u64,
) -> c_int {
    status(|| {
        let t = file(f)?.tensor;
        // Checked before `prefix` is read: a wrong length must not make us
        // read past the caller's array.
        let rank = t.shape().len();
        if prefix_len == 0 || prefix_len > rank {
            return Err(Fail::new(
                if prefix_len == 0 {
                    COO_ERR_ARGUMENT
                } else {
                    COO_ERR_RANK
                },
                format!("prefix_len {prefix_len} is out of 1..={rank} (the tensor's rank)"),
            ));
        }
        // SAFETY: `prefix_len` int64 (contract).
        let p = unsafe {
            indices(
                prefix,
                prefix_len,
                "prefix",
                negative_component(prefix_len, 0),
            )
        }?;
        // SAFETY: NULL or writable (contract).
        let (b, e) = unsafe { (out_ref(begin, "begin")?, out_ref(end, "end")?) };
        let r = t.prefix_range(p)?;
        (*b, *e) = (r.start, r.end);
        Ok(())
    })
}

/// The tensor's storage layout.
///
/// # Safety
/// `f` is NULL or a live file; `out` is NULL or valid for writing a `coo_layout`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_layout(f: *const coo_file, out: *mut coo_layout) -> c_int {
    status(|| {
        let layout = match file(f)?.tensor.layout() {
            OutputLayout::Coo => coo_layout::COO_LAYOUT_COO,
            OutputLayout::Csr => coo_layout::COO_LAYOUT_CSR,
            OutputLayout::Csc => coo_layout::COO_LAYOUT_CSC,
            OutputLayout::Csf => coo_layout::COO_LAYOUT_CSF,
        };
        // SAFETY: NULL or writable (contract).
        *unsafe { out_ref(out, "out") }? = layout;
        Ok(())
    })
}

/// Check the whole file's content (bounds, order, duplicates, statistics,
/// checksums; O(nnz)). `COO_OK` when the file is valid, else
/// `COO_ERR_INVALID_FILE` with the problems in `coo_last_error`. What
/// leaves a file valid (warnings: statistics that disagree with the data;
/// notes: a tensor that carries no stored checksums, whose bytes could not
/// be checked) is not told here: `coo_file_verify_report` tells it.
///
/// # Safety
/// `f` is NULL or a live file.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_verify(f: *const coo_file) -> c_int {
    status(|| {
        let f = file(f)?;
        // SAFETY: the reader lives as long as the handle.
        verdict(&unsafe { f.file.as_ref() }.verify())
    })
}

/// `coo_file_verify`, which also tells what leaves the file valid. The
/// status is `coo_file_verify`'s. When not NULL, `*notes` gets the number
/// of notes (checks that could not be made: a tensor written by another
/// writer carries no stored checksums, so its layout and content rules
/// were checked but not its bytes), `*warnings` the number of warnings
/// (statistics that disagree with the data), and `text` every finding,
/// errors too, one a line (`text_len` bytes, always NUL-terminated when
/// `text_len > 0`; cut at a line, ending in "...", when they do not fit).
/// A clean file of ours gives 0, 0 and "".
///
/// # Safety
/// `f` is NULL or a live file; `notes` and `warnings` are NULL or valid
/// for writing a `uint64_t`; `text` is NULL or valid for writing
/// `text_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_verify_report(
    f: *const coo_file,
    notes: *mut u64,
    warnings: *mut u64,
    text: *mut c_char,
    text_len: usize,
) -> c_int {
    status(|| {
        let f = file(f)?;
        // SAFETY: the reader lives as long as the handle.
        let problems = unsafe { f.file.as_ref() }.verify();
        let count = |s: Severity| problems.iter().filter(|p| p.severity == s).count() as u64;
        for (out, s, what) in [
            (notes, Severity::Note, "notes"),
            (warnings, Severity::Warning, "warnings"),
        ] {
            if !out.is_null() {
                // SAFETY: non-null and writable (contract).
                *unsafe { out_ref(out, what) }? = count(s);
            }
        }
        if !text.is_null() && text_len > 0 {
            let lines: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
            let bytes = fit_lines(&lines, text_len - 1);
            // SAFETY: `text` is writable for `text_len` bytes (contract)
            // and `bytes.len() < text_len`, so the NUL fits too.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), text.cast::<u8>(), bytes.len());
                text.add(bytes.len()).write(0);
            }
        }
        verdict(&problems)
    })
}

/// `Ok` for a valid file (warnings and notes leave it valid), else
/// `COO_ERR_INVALID_FILE` listing the first problems.
fn verdict(problems: &[Problem]) -> Res<()> {
    if problems.iter().all(|p| !p.is_error()) {
        return Ok(());
    }
    const SHOWN: usize = 5;
    let mut msg = format!("{} problem(s): ", problems.len());
    let listed: Vec<String> = problems.iter().take(SHOWN).map(|p| p.to_string()).collect();
    msg.push_str(&listed.join("; "));
    if problems.len() > SHOWN {
        msg.push_str("; ...");
    }
    Err(Fail::new(COO_ERR_INVALID_FILE, msg))
}

/// `lines`, one a line, in at most `room` bytes: whole lines (no NUL in
/// them: they are our messages), then "..." when some did not fit.
fn fit_lines(lines: &[String], room: usize) -> Vec<u8> {
    const MORE: &[u8] = b"...";
    let mut out = Vec::new();
    for (k, line) in lines.iter().enumerate() {
        let last = k + 1 == lines.len();
        let need = line.len() + 1;
        // Keep room for "..." unless this is the last line.
        let reserve = if last { 0 } else { MORE.len() };
        if out.len() + need + reserve > room {
            if out.len() + MORE.len() <= room {
                out.extend_from_slice(MORE);
            }
            return out;
        }
        out.extend(line.bytes().filter(|&b| b != 0));
        out.push(b'\n');
    }
    out
}

/// Close a file. NULL: no-op.
///
/// # Safety
/// `f` is NULL or a live file, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_close(f: *mut coo_file) {
    if !f.is_null() {
        // SAFETY: a pointer from coo_file_open*, closed once (contract).
        quietly(|| drop(unsafe { Box::from_raw(f) }));
    }
}

/// Options of `coo_file_export`; fill with `coo_export_options_default`
/// first. Versioned by its first field, as `coo_options` is. Since API 5.
#[repr(C)]
pub struct coo_export_options {
    /// `sizeof(coo_export_options)` as the caller's header declares it;
    /// set by `coo_export_options_default`. Do not change it.
    pub size: u32,
    /// MatrixMarket: check that the matrix is symmetric (refused
    /// otherwise) and write one triangle with the `symmetric` header.
    pub symmetric: BoolArg,
    /// PETSc: 64-bit indices (a PETSc configured `--with-64-bit-indices`).
    pub petsc_int64: BoolArg,
    /// `.npz`: "csr", "csc", "coo", or NULL / "auto" for the stored
    /// layout (the library's names).
    pub npz_layout: *const c_char,
    /// Bytes of entries held at once when the format's order is not the
    /// stored one; 0: 64 MiB.
    pub reorder_memory: u64,
    /// Page handling of the mapped file: "auto" (NULL), "stream" or "keep".
    pub paging: *const c_char,
}

/// What `coo_file_export` wrote.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct coo_export_summary {
    /// Entries written (one triangle for a symmetric MatrixMarket file).
    pub entries: u64,
    /// Bytes of the output file.
    pub bytes: u64,
}

/// Fill `out` with the default export options (the stored layout for
/// `.npz`, 32-bit PETSc indices, no symmetry check, 64 MiB to reorder,
/// automatic paging). Does nothing if `out` is NULL. Since API 5.
///
/// # Safety
/// `out` is NULL or valid for writing a `coo_export_options`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_export_options_default(out: *mut coo_export_options) {
    if out.is_null() {
        return;
    }
    let o = coo_export_options {
        size: std::mem::size_of::<coo_export_options>() as u32,
        symmetric: BoolArg(0),
        petsc_int64: BoolArg(0),
        npz_layout: std::ptr::null(),
        reorder_memory: 0,
        paging: std::ptr::null(),
    };
    // SAFETY: non-null and writable (contract); `write` does not read the
    // old value.
    unsafe { out.write(o) };
}

/// A name of a library vocabulary from an optional C string (NULL: the
/// default).
///
/// # Safety
/// `s` is NULL or NUL-terminated.
unsafe fn named<T: std::str::FromStr<Err = coo_assembler::Error> + Default>(
    s: *const c_char,
    what: &str,
) -> Res<T> {
    if s.is_null() {
        return Ok(T::default());
    }
    // SAFETY: the caller's contract.
    let text = unsafe { c_str(s, what) }?;
    text.parse::<T>()
        .map_err(|e| Fail::new(COO_ERR_ARGUMENT, format!("{what}: {e}")))
}

/// Write the open tensor to `path` for another program, streamed from the
/// file with bounded memory, in `format` (the library's names): "mtx"
/// (MatrixMarket), "npz" (scipy), "petsc" (PETSc binary: `MatLoad`, or
/// `VecLoad` for a rank-1 tensor; complex values for a PETSc built with
/// complex scalars) or "npy" (a rank-1 tensor as a dense vector). The
/// output appears whole or not at all and may not be the tensor's own
/// file. `options` NULL: the defaults; `summary` may be NULL. Since API 5.
///
/// # Safety
/// `f` is NULL or a live file; `path` and `format` are NULL or
/// NUL-terminated; `options` is NULL or a `coo_export_options` filled by
/// `coo_export_options_default`; `summary` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn coo_file_export(
    f: *const coo_file,
    path: *const c_char,
    format: *const c_char,
    options: *const coo_export_options,
    summary: *mut coo_export_summary,
) -> c_int {
    status(|| {
        let fh = file(f)?;
        // SAFETY: the caller's contract for each pointer.
        let (path, format) = unsafe { (crate::c_path(path, "path")?, c_str(format, "format")?) };
        let format: Format = format
            .parse()
            .map_err(|e: coo_assembler::Error| Fail::new(COO_ERR_ARGUMENT, e.to_string()))?;
        let mut eo = ExportOptions::default();
        if !options.is_null() {
            // The size first, through its own field: a struct shorter than
            // this version's is refused before any other field is read.
            // SAFETY: non-null and points to at least the `size` field
            // (contract).
            let size = unsafe { std::ptr::addr_of!((*options).size).read_unaligned() } as usize;
            if size < std::mem::size_of::<coo_export_options>() {
                return Err(Fail::new(
                    COO_ERR_ARGUMENT,
                    format!(
                        "coo_export_options.size is {size}; fill the struct with \
                         coo_export_options_default"
                    ),
                ));
            }
            // SAFETY: a whole struct of this version (its size says so).
            let o = unsafe { &*options };
            eo.symmetric = o.symmetric.0 != 0;
            eo.petsc_int64 = o.petsc_int64.0 != 0;
            // SAFETY: NULL or NUL-terminated (contract).
            eo.npz_layout = unsafe { named::<NpzLayout>(o.npz_layout, "npz_layout") }?;
            // SAFETY: as above.
            eo.paging = unsafe { named::<Paging>(o.paging, "paging") }?;
            eo.reorder_budget = usize::try_from(o.reorder_memory).unwrap_or(usize::MAX);
        }
        // SAFETY: the reader lives as long as the handle (see `coo_file`).
        let reader: &HurrayFile = unsafe { fh.file.as_ref() };
        let s = export_file(reader, Some(fh.tensor.name()), format, &path, &eo)
            .map_err(|e| Fail::new(e.kind().c_status(), e.to_string()))?;
        if !summary.is_null() {
            // SAFETY: non-null and writable (contract).
            unsafe {
                summary.write(coo_export_summary {
                    entries: s.entries,
                    bytes: s.bytes,
                })
            };
        }
        Ok(())
    })
}
