//! `y = A x` and `y = A^T x` from the stored matrix, in parallel and
//! deterministic.
//!
//! Two kernels, chosen by how the entries are ordered relative to the
//! output:
//!
//! - **owned rows**: the entries are sorted by the output index (`A x` on a
//!   row-sorted COO, CSR `A x`, CSC `A^T x`). Blocks of about
//!   [`BLOCK_ENTRIES`] entries are cut at row boundaries (CSR/CSC: at
//!   pointer boundaries, the rows are the pointers' slices), so each block
//!   owns its rows of `y`, and every `y[i]` is row i's products summed in a
//!   fixed order (four accumulators by position in the row, see
//!   [`row_dot`]): the result depends on neither blocks nor threads.
//! - **scatter**: any other order (`A^T x` on a row-sorted COO, an unsorted
//!   COO, CSR `A^T x`, CSC `A x`). Each block adds its products into a partial vector (in storage
//!   order); partials are added into `y` in block order, each over the span
//!   of indices its block touched. The blocks come from the data (a fixed
//!   entry count, at least the output length, so the reduction costs at
//!   most as much as the products), never from the thread count, so the
//!   bytes are the same with 1 or 64 threads.
//!
//! Values of every type are widened to f64. [`matvec_complex`] multiplies a
//! complex matrix or a complex x as real products of the parts (the real
//! and imaginary part of every value are read by the same kernels, one
//! pass each), so it keeps every property above. Workers take blocks in
//! increasing order and stay within a window of the oldest unfinished one,
//! so a file larger than memory is read once, sequentially, through a
//! bounded set of pages (see [`Paging`]).

use super::entries::{checked_pointers, lane_of};
use super::error::{MatrixError, MatrixResult};
use super::paging::{Paging, Sweep};
use super::view::{Layout, Matrix, f64_of, fixed_blocks, to_usize, with_values};
use crate::read::release::physical_memory;
use crate::{Value, element::Element, read::CooTensor};
use num_complex::Complex64;
use std::ops::Range;
use std::sync::Mutex;

/// Entries per block of the owned-rows kernel (before the cut moves to a
/// row boundary): 1.5 MiB of f64 entries, small enough to balance two
/// threads on small matrices, large enough that handing out blocks is free.
pub const BLOCK_ENTRIES: usize = 1 << 16;
/// Minimum entries per block of the scatter kernel.
pub const SCATTER_MIN_ENTRIES: usize = 1 << 18;

crate::vocab::vocabulary! {
    /// What to do with NaN and infinity in `x`.
    #[derive(Default)]
    pub enum NonFiniteInput ("non-finite input policy") {
        /// Refuse the product, naming the first non-finite element.
        #[default]
        Error => "error": "refuse the product, naming the first one (the default)",
        /// Compute anyway (IEEE rules: they propagate into y).
        Allow => "allow": "compute anyway; they propagate into y",
    }
}

/// Options of [`matvec`].
#[derive(Clone, Copy, Debug, Default)]
pub struct MatvecOptions {
    /// Worker threads; `None` uses rayon's global pool (one per core).
    /// The result is the same for every count.
    pub threads: Option<usize>,
    /// NaN / infinity in `x`.
    pub non_finite: NonFiniteInput,
    /// Page handling of a mapped file.
    pub paging: Paging,
}

/// `A x` (or `A^T x` when `transpose`) as a new vector.
pub fn matvec(
    a: &Matrix<'_>,
    x: &[f64],
    transpose: bool,
    opts: &MatvecOptions,
) -> MatrixResult<Vec<f64>> {
    let out_len = to_usize(if transpose { a.cols() } else { a.rows() })?;
    check_x(a, x, transpose, opts)?;
    let mut y = super::memory::try_filled(out_len as u64, 0.0, "the result vector of matvec")?;
    checked_run::<false>(a, x, &mut y, transpose, opts)?;
    Ok(y)
}

/// `A x` (or `A^T x` when `transpose`) for a complex `x`, a complex matrix
/// or both, as a new complex vector; a real matrix and a real x give a
/// zero imaginary part. With `A = Ar + i Ai` and `x = xr + i xi`:
/// `y = (Ar xr - Ai xi) + i (Ar xi + Ai xr)`, each product one pass of the
/// real kernels (the matrix is read two to four times, the parts that are
/// zero skipped), so the result is the same bytes for any thread count and
/// a file larger than memory streams through bounded memory.
pub fn matvec_complex(
    a: &Matrix<'_>,
    x: &[Complex64],
    transpose: bool,
    opts: &MatvecOptions,
) -> MatrixResult<Vec<Complex64>> {
    check_x_len(a, x.len(), transpose)?;
    if opts.non_finite == NonFiniteInput::Error {
        if let Some(position) = x
            .iter()
            .position(|v| !v.re.is_finite() || !v.im.is_finite())
        {
            let v = x[position];
            return Err(MatrixError::NonFiniteInput {
                position,
                value: if v.re.is_finite() { v.im } else { v.re },
            });
        }
    }
    let out_len = if transpose { a.cols() } else { a.rows() };
    to_usize(out_len)?;
    let xr = super::memory::try_map(x, "the real part of x", |v| v.re)?;
    let xi = super::memory::try_map(x, "the imaginary part of x", |v| v.im)?;
    let x_complex = xi.iter().any(|v| *v != 0.0);
    let a_complex = a.dtype().is_complex();
    let zeros = |what| super::memory::try_filled(out_len, 0.0, what);
    // y = Ar xr (the pass that checks the stored checksums, once per file).
    let mut re = zeros("the result vector of matvec")?;
    checked_run::<false>(a, &xr, &mut re, transpose, opts)?;
    let mut im = zeros("the imaginary part of the result")?;
    if x_complex {
        run::<false>(a, &xi, &mut im, transpose, opts)?;
    }
    if a_complex {
        let mut tmp = zeros("a partial product of matvec")?;
        run::<true>(a, &xr, &mut tmp, transpose, opts)?;
        for (i, t) in im.iter_mut().zip(&tmp) {
            *i += *t;
        }
        if x_complex {
            tmp.fill(0.0);
            run::<true>(a, &xi, &mut tmp, transpose, opts)?;
            for (r, t) in re.iter_mut().zip(&tmp) {
                *r -= *t;
            }
        }
    }
    let mut y = super::memory::try_map(&re, "the result vector of matvec", |r| {
        Complex64::new(*r, 0.0)
    })?;
    for (yk, i) in y.iter_mut().zip(&im) {
        yk.im = *i;
    }
    Ok(y)
}

/// [`matvec`] into `y`, which must have the output length; it is overwritten.
pub fn matvec_into(
    a: &Matrix<'_>,
    x: &[f64],
    y: &mut [f64],
    transpose: bool,
    opts: &MatvecOptions,
) -> MatrixResult<()> {
    let out = if transpose { a.cols() } else { a.rows() };
    if y.len() as u64 != out {
        return Err(length_error(a, "y", y.len(), out, transpose));
    }
    check_x(a, x, transpose, opts)?;
    y.fill(0.0);
    checked_run::<false>(a, x, y, transpose, opts)
}

/// [`run`] on a matrix whose stored checksums are checked (once per open
/// file): `y` is only handed back when they match. The first product over
/// a file that stays cached hashes alongside the product (the two share
/// the cores: a damaged buffer makes the product an error, whatever it
/// computed); a file streamed through memory is hashed first, releasing
/// its pages, so that its pages are not read twice at once.
fn checked_run<const IM: bool>(
    a: &Matrix<'_>,
    x: &[f64],
    y: &mut [f64],
    transpose: bool,
    opts: &MatvecOptions,
) -> MatrixResult<()> {
    let t = a.tensor();
    if t.checksum_hashes() > 0 || a.stored_bytes() > physical_memory() / 4 {
        t.check_checksums()?;
        return run::<IM>(a, x, y, transpose, opts);
    }
    let (sums, product) = rayon::join(
        || t.check_checksums(),
        || run::<IM>(a, x, y, transpose, opts),
    );
    sums?;
    product
}

fn length_error(
    a: &Matrix<'_>,
    what: &'static str,
    got: usize,
    expected: u64,
    transpose: bool,
) -> MatrixError {
    MatrixError::VectorLength {
        what,
        got,
        expected,
        rows: a.rows(),
        cols: a.cols(),
        transposed: if transpose { ", transposed" } else { "" },
    }
}

/// x has the length the product needs.
fn check_x_len(a: &Matrix<'_>, len: usize, transpose: bool) -> MatrixResult<()> {
    let need = if transpose { a.rows() } else { a.cols() };
    if len as u64 != need {
        return Err(length_error(a, "x", len, need, transpose));
    }
    Ok(())
}

fn check_x(a: &Matrix<'_>, x: &[f64], transpose: bool, opts: &MatvecOptions) -> MatrixResult<()> {
    if a.dtype().is_complex() {
        // A product in f64 would drop the imaginary parts.
        return Err(MatrixError::Crate(crate::Error::Unsupported(format!(
            "matvec of a {} matrix: this product is real-valued; multiply it as a complex \
             matrix (matvec_complex; Python's File.matvec and the command's matvec do)",
            a.dtype()
        ))));
    }
    check_x_len(a, x.len(), transpose)?;
    if opts.non_finite == NonFiniteInput::Error {
        if let Some(position) = x.iter().position(|v| !v.is_finite()) {
            return Err(MatrixError::NonFiniteInput {
                position,
                value: x[position],
            });
        }
    }
    Ok(())
}

/// `y = A x` into a zeroed `y`, with the real part of A's values (`IM`:
/// their imaginary part, 0 for real values).
fn run<const IM: bool>(
    a: &Matrix<'_>,
    x: &[f64],
    y: &mut [f64],
    transpose: bool,
    opts: &MatvecOptions,
) -> MatrixResult<()> {
    if a.nnz() == 0 {
        return Ok(());
    }
    let pool = match opts.threads {
        Some(0) => return Err(MatrixError::Options("threads must be at least 1".into())),
        Some(n) => Some(
            rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .map_err(|e| MatrixError::Options(format!("cannot start {n} threads: {e}")))?,
        ),
        None => None,
    };
    let mut go = || match (a.layout(), transpose) {
        (Layout::Coo { sorted: true }, false) => {
            owned_rows::<IM>(a, a.coo("matvec")?, x, y, opts.paging)
        }
        (Layout::Coo { .. }, _) => scatter::<IM>(a, a.coo("matvec")?, x, y, transpose, opts.paging),
        // The major index (row of CSR, column of CSC) is the output index:
        // each lane is one output element.
        (Layout::Csr, false) | (Layout::Csc, true) => owned_lanes::<IM>(a, x, y, opts.paging),
        (Layout::Csr, true) | (Layout::Csc, false) => scatter_lanes::<IM>(a, x, y, opts.paging),
    };
    match pool {
        Some(p) => p.install(go),
        None => go(),
    }
}

/// Spawn one worker per thread of the current pool and wait for them;
/// the first error wins.
fn workers(work: impl Fn() -> MatrixResult<()> + Sync, stop: impl Fn() + Sync) -> MatrixResult<()> {
    let first: Mutex<Option<MatrixError>> = Mutex::new(None);
    rayon::scope(|s| {
        for _ in 0..rayon::current_num_threads() {
            s.spawn(|_| {
                if let Err(e) = work() {
                    stop();
                    let mut f = first.lock().unwrap_or_else(|e| e.into_inner());
                    f.get_or_insert(e);
                }
            });
        }
    });
    match first.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Blocks of about `size` entries of a row-sorted matrix, each starting at
/// the first entry of a row, with that row. `row(p)` is the row of entry p.
/// (On a file that claims to be sorted but is not, the cuts are merely
/// uneven; the kernel reports the disorder.)
fn row_blocks(nnz: usize, size: usize, row: impl Fn(usize) -> u64) -> Vec<(Range<usize>, u64)> {
    let mut starts = vec![0usize];
    let mut target = size.max(1);
    while target < nnz {
        let last = starts[starts.len() - 1];
        let r = row(target);
        // First entry of row r in (last, target].
        let (mut lo, mut hi) = (last + 1, target);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if row(mid) < r {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let cut = if row(lo - 1) < r {
            lo
        } else {
            // Row r began at or before the previous cut (a row longer than
            // a block): cut after it.
            let mut p = target + 1;
            while p < nnz && row(p) <= r {
                p += 1;
            }
            p
        };
        if cut >= nnz {
            break;
        }
        starts.push(cut);
        target = cut + size;
    }
    starts
        .iter()
        .enumerate()
        .map(|(k, &s)| (s..starts.get(k + 1).copied().unwrap_or(nnz), row(s)))
        .collect()
}

/// The rows of y a block owns: first row and the slice.
type RowSlice<'y> = (usize, &'y mut [f64]);

fn owned_rows<const IM: bool>(
    a: &Matrix<'_>,
    t: CooTensor<'_>,
    x: &[f64],
    y: &mut [f64],
    paging: Paging,
) -> MatrixResult<()> {
    let ind = t.indices();
    let nnz = t.nnz() as usize;
    let blocks = row_blocks(nnz, BLOCK_ENTRIES, |p| ind[2 * p]);
    // Block k owns rows [first row of k, first row of k + 1); check the
    // order before splitting y (a damaged file must not panic).
    let mut firsts: Vec<usize> = Vec::with_capacity(blocks.len() + 1);
    for (k, (r, first)) in blocks.iter().enumerate() {
        let f = if k == 0 { 0 } else { *first as usize };
        if k > 0 && (f >= y.len() || f <= firsts[k - 1]) {
            return Err(a.corrupt(
                r.start,
                format_args!("row {first} breaks the sorted order or the shape"),
            ));
        }
        firsts.push(f);
    }
    firsts.push(y.len());
    let ranges: Vec<Range<usize>> = blocks.iter().map(|(r, _)| r.clone()).collect();
    with_values!(t, |vals| {
        owned_blocks(a, y, &ranges, &firsts, paging, |range, row0, ys| {
            owned_block::<_, IM>(a, ind, vals, x, range, row0, ys)
        })
    })
}

/// The owned-rows kernel's driver, for COO rows and CSR/CSC lanes alike:
/// block b (entries `ranges[b]`) owns `y[firsts[b]..firsts[b + 1]]`
/// (`firsts` increasing, ending at `y.len()`), and `work(range, first,
/// ys)` fills that slice. Blocks go to every worker in order (see
/// [`Sweep`]); the result does not depend on which worker takes which.
fn owned_blocks(
    a: &Matrix<'_>,
    y: &mut [f64],
    ranges: &[Range<usize>],
    firsts: &[usize],
    paging: Paging,
    work: impl Fn(Range<usize>, usize, &mut [f64]) -> MatrixResult<()> + Sync,
) -> MatrixResult<()> {
    let mut slices: Vec<Mutex<Option<RowSlice<'_>>>> = Vec::with_capacity(ranges.len());
    let mut rest = y;
    for k in 0..ranges.len() {
        let (head, tail) = rest.split_at_mut(firsts[k + 1] - firsts[k]);
        slices.push(Mutex::new(Some((firsts[k], head))));
        rest = tail;
    }
    let sweep: Sweep<'_, (), ()> = Sweep::new(a, ranges, None, paging, ());
    let r = workers(
        || {
            while let Some((b, range)) = sweep.claim() {
                let taken = slices[b].lock().unwrap_or_else(|e| e.into_inner()).take();
                let Some((first, ys)) = taken else {
                    continue;
                };
                work(range, first, ys)?;
                sweep.done(b, (), |_, _| {});
            }
            Ok(())
        },
        || sweep.stop(),
    );
    sweep.finish();
    r
}

/// Rows of one block: `ys` holds rows `row0..`. Each row is one [`dot`].
#[inline(never)]
fn owned_block<T: Element, const IM: bool>(
    a: &Matrix<'_>,
    ind: &[u64],
    vals: &[T],
    x: &[f64],
    range: Range<usize>,
    row0: usize,
    ys: &mut [f64],
) -> MatrixResult<()> {
    let (mut p, e) = (range.start, range.end);
    let mut prev: Option<u64> = None;
    while p < e {
        let r = ind[2 * p];
        let mut q = p + 1;
        while q < e && ind[2 * q] == r {
            q += 1;
        }
        let slot = match ys.get_mut((r as usize).wrapping_sub(row0)) {
            Some(slot) if prev.is_none_or(|pr| r > pr) => slot,
            _ => return Err(a.corrupt(p, format_args!("row {r} breaks the sorted order"))),
        };
        match dot::<_, 2, 1, IM>(&ind[2 * p..2 * q], &vals[p..q], x) {
            Some(v) => *slot = v,
            None => return Err(a.corrupt(p, "a column of this row is out of range")),
        }
        prev = Some(r);
        p = q;
    }
    Ok(())
}

/// Sum of `v[k] * x[col k]` over one row, the column of entry k being
/// `ind[S * k + C]` (COO pairs: `S = 2, C = 1`; CSR/CSC minor indices:
/// `S = 1, C = 0`): entry k of the row goes to accumulator k mod 4 (in
/// storage order), and the result is `(a0 + a1) + (a2 + a3)`. Four chains
/// instead of one dependent sum keep the adder busy; the order depends
/// only on the row, so it is the same for any blocks, threads and layout.
/// `None` when a column is out of range.
#[inline(always)]
fn dot<T: Element, const S: usize, const C: usize, const IM: bool>(
    ind: &[u64],
    v: &[T],
    x: &[f64],
) -> Option<f64> {
    let mut acc = [0.0f64; 4];
    let (c4, v4) = (ind.chunks_exact(4 * S), v.chunks_exact(4));
    let (crest, vrest) = (c4.remainder(), v4.remainder());
    for (c, w) in c4.zip(v4) {
        acc[0] += part::<_, IM>(w[0]) * *x.get(c[C] as usize)?;
        acc[1] += part::<_, IM>(w[1]) * *x.get(c[S + C] as usize)?;
        acc[2] += part::<_, IM>(w[2]) * *x.get(c[2 * S + C] as usize)?;
        acc[3] += part::<_, IM>(w[3]) * *x.get(c[3 * S + C] as usize)?;
    }
    for (k, (c, w)) in crest.chunks_exact(S).zip(vrest).enumerate() {
        acc[k] += part::<_, IM>(*w) * *x.get(c[C] as usize)?;
    }
    Some((acc[0] + acc[1]) + (acc[2] + acc[3]))
}

/// The value as f64 (`IM`: its imaginary part, 0 for a real value).
#[inline(always)]
fn part<T: Element, const IM: bool>(v: T) -> f64 {
    if IM {
        match v.to_value() {
            Value::Complex(_, im) => im,
            _ => 0.0,
        }
    } else {
        f64_of(v)
    }
}

/// A block's partial vector (full output length; only `lo..hi` was touched).
struct Partial {
    buf: Vec<f64>,
    lo: usize,
    hi: usize,
}

struct Reduce<'y> {
    y: &'y mut [f64],
    free: Vec<Vec<f64>>,
}

fn scatter<const IM: bool>(
    a: &Matrix<'_>,
    t: CooTensor<'_>,
    x: &[f64],
    y: &mut [f64],
    transpose: bool,
    paging: Paging,
) -> MatrixResult<()> {
    let ind = t.indices();
    let blocks = fixed_blocks(t.nnz() as usize, SCATTER_MIN_ENTRIES.max(y.len()));
    with_values!(t, |vals| {
        scatter_with(a, y, &blocks, paging, |_, range, buf| {
            if transpose {
                scatter_block::<_, true, IM>(a, ind, vals, x, range, buf)
            } else {
                scatter_block::<_, false, IM>(a, ind, vals, x, range, buf)
            }
        })
    })
}

/// The scatter kernel over entry blocks `blocks`: `work(b, range, buf)`
/// adds block b's products into `buf` (zeros outside the span it returns).
fn scatter_with(
    a: &Matrix<'_>,
    y: &mut [f64],
    blocks: &[Range<usize>],
    paging: Paging,
    work: impl Fn(usize, Range<usize>, &mut [f64]) -> MatrixResult<(usize, usize)> + Sync,
) -> MatrixResult<()> {
    let out_len = y.len();
    let window = 2 * rayon::current_num_threads() + 2;
    let sweep: Sweep<'_, Partial, Reduce<'_>> = Sweep::new(
        a,
        blocks,
        Some(window),
        paging,
        Reduce {
            y,
            free: Vec::new(),
        },
    );
    let take_buffer = || -> MatrixResult<Vec<f64>> {
        let recycled = sweep_free(&sweep);
        match recycled {
            Some(b) => Ok(b),
            None => {
                // At most `window` buffers exist: one per block in flight.
                Ok(super::memory::try_filled(
                    out_len as u64,
                    0.0,
                    "a partial result vector of matvec",
                )?)
            }
        }
    };
    let r = workers(
        || {
            while let Some((b, range)) = sweep.claim() {
                let mut buf = take_buffer()?;
                let (lo, hi) = work(b, range, &mut buf)?;
                sweep.done(b, Partial { buf, lo, hi }, |red, mut p| {
                    if p.lo < p.hi {
                        for (yi, pi) in red.y[p.lo..p.hi].iter_mut().zip(&mut p.buf[p.lo..p.hi]) {
                            *yi += *pi;
                            *pi = 0.0;
                        }
                    }
                    red.free.push(p.buf);
                });
            }
            Ok(())
        },
        || sweep.stop(),
    );
    sweep.finish();
    r
}

fn sweep_free(sweep: &Sweep<'_, Partial, Reduce<'_>>) -> Option<Vec<f64>> {
    sweep.with_sink(|red| red.free.pop())
}

/// Products of one block added into `buf` at the output index; returns the
/// span touched. `TRANSPOSE`: output index = column, input = row.
#[inline(never)]
fn scatter_block<T: Element, const TRANSPOSE: bool, const IM: bool>(
    a: &Matrix<'_>,
    ind: &[u64],
    vals: &[T],
    x: &[f64],
    range: Range<usize>,
    buf: &mut [f64],
) -> MatrixResult<(usize, usize)> {
    let (s, e) = (range.start, range.end);
    let (mut lo, mut hi) = (usize::MAX, 0usize);
    for (k, (ij, v)) in ind[2 * s..2 * e]
        .chunks_exact(2)
        .zip(&vals[s..e])
        .enumerate()
    {
        let (i_out, i_in) = if TRANSPOSE {
            (ij[1] as usize, ij[0] as usize)
        } else {
            (ij[0] as usize, ij[1] as usize)
        };
        match (buf.get_mut(i_out), x.get(i_in)) {
            (Some(slot), Some(&xv)) => *slot += part::<_, IM>(*v) * xv,
            _ => return Err(a.corrupt(s + k, format_args!("coordinate {ij:?} is out of range"))),
        }
        lo = lo.min(i_out);
        hi = hi.max(i_out + 1);
    }
    Ok((lo.min(hi), hi))
}

/// Lanes (rows of CSR, columns of CSC) in blocks of at least `size`
/// entries (the last may hold fewer), cut at pointer boundaries: the data
/// decides, not the thread count.
fn lane_blocks(ptr: &[u64], size: usize) -> Vec<Range<usize>> {
    let extent = ptr.len().saturating_sub(1);
    let mut out = Vec::new();
    let mut m0 = 0;
    for m in 1..=extent {
        if ptr[m] - ptr[m0] >= size as u64 || m == extent {
            out.push(m0..m);
            m0 = m;
        }
    }
    out
}

/// Entry ranges of lane blocks.
fn entry_ranges(ptr: &[u64], lanes: &[Range<usize>]) -> Vec<Range<usize>> {
    lanes
        .iter()
        .map(|l| ptr[l.start] as usize..ptr[l.end] as usize)
        .collect()
}

/// CSR `A x`, CSC `A^T x`: `y[m]` is lane m's [`dot`], blocks own lanes.
fn owned_lanes<const IM: bool>(
    a: &Matrix<'_>,
    x: &[f64],
    y: &mut [f64],
    paging: Paging,
) -> MatrixResult<()> {
    let Some(c) = a.compressed() else {
        return Ok(());
    };
    let ptr = checked_pointers(&c)?;
    let minor = c.indices();
    let lanes = lane_blocks(ptr, BLOCK_ENTRIES);
    let mut firsts: Vec<usize> = lanes.iter().map(|l| l.start).collect();
    firsts.push(y.len());
    let ranges = entry_ranges(ptr, &lanes);
    with_values!(c, |vals| {
        owned_blocks(a, y, &ranges, &firsts, paging, |_, m0, ys| {
            for (k, slot) in ys.iter_mut().enumerate() {
                let (lo, hi) = (ptr[m0 + k] as usize, ptr[m0 + k + 1] as usize);
                *slot = dot::<_, 1, 0, IM>(&minor[lo..hi], &vals[lo..hi], x).ok_or_else(|| {
                    a.corrupt(lo, "an index of this row (column) is out of range")
                })?;
            }
            Ok(())
        })
    })
}

/// CSR `A^T x`, CSC `A x`: `y[minor[p]] += v[p] * x[m]` in storage order,
/// through the scatter kernel with the COO kernel's entry blocks (cut
/// mid-lane if need be), so CSR `A^T x` is the sorted COO one bit for bit.
fn scatter_lanes<const IM: bool>(
    a: &Matrix<'_>,
    x: &[f64],
    y: &mut [f64],
    paging: Paging,
) -> MatrixResult<()> {
    let Some(c) = a.compressed() else {
        return Ok(());
    };
    let ptr = checked_pointers(&c)?;
    let minor = c.indices();
    let blocks = fixed_blocks(c.nnz() as usize, SCATTER_MIN_ENTRIES.max(y.len()));
    with_values!(c, |vals| {
        scatter_with(a, y, &blocks, paging, |_, range, buf| {
            let (mut lo, mut hi) = (usize::MAX, 0usize);
            // The lane holding the block's first entry.
            let mut m = lane_of(ptr, range.start);
            for p in range {
                while ptr[m + 1] as usize <= p {
                    m += 1;
                }
                let i = minor[p] as usize;
                match buf.get_mut(i) {
                    Some(slot) => *slot += part::<_, IM>(vals[p]) * x[m],
                    None => return Err(a.corrupt(p, format_args!("index {i} is out of range"))),
                }
                lo = lo.min(i);
                hi = hi.max(i + 1);
            }
            Ok((lo.min(hi), hi))
        })
    })
}
