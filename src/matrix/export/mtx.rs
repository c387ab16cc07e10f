//! MatrixMarket coordinate text.
//!
//! Floats are printed in their shortest round-trip form (zmij), so a reader that parses
//! correctly rounded (scipy's fast_matrix_market, strtod) gets the stored
//! value back bit for bit; f32/f16/bf16 values are the same numbers widened.
//! NaN and infinities are written `nan`, `inf`, `-inf`.
//!
//! `symmetric` on a sorted COO matrix: it must be square; every entry (i, j)
//! off the diagonal needs (j, i) with the same bytes. Checked in the same
//! pass that writes the lower triangle, with one cursor per row (8 bytes
//! per row): when row i is read, each (i, j) with j < i must be the next
//! unmatched entry above the diagonal in row j, whose cursor then moves on;
//! at the end the entries above and below the diagonal must be as many.
//! On any other layout the check gathers both triangles in bands
//! ([`write_symmetric_reordered`]). A failed check removes the partial
//! output.

use super::super::entries::Coords;
use super::super::error::{MatrixError, MatrixResult};
use super::super::output::Output;
use super::super::view::{Matrix, to_usize};
use super::reorder::{Keep, Reorder};
use super::{ExportOptions, ExportSummary, pass, pass_blocks};
use crate::{Value, read::CooTensor};

fn put_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

/// The shortest text that reads back as `v` (zmij: Schubfach, several
/// times faster than `{}` formatting, exponent form for large and small
/// magnitudes).
pub(crate) fn put_f64(buf: &mut Vec<u8>, v: f64) {
    if v.is_nan() {
        buf.extend_from_slice(b"nan");
    } else if v.is_infinite() {
        buf.extend_from_slice(if v > 0.0 { b"inf" } else { b"-inf" });
    } else {
        buf.extend_from_slice(zmij::Buffer::new().format_finite(v).as_bytes());
    }
}

fn put_value(buf: &mut Vec<u8>, v: Value) {
    match v {
        Value::Float(f) => put_f64(buf, f),
        Value::Int(i) => {
            if i < 0 {
                buf.push(b'-');
            }
            put_u64(buf, i.unsigned_abs());
        }
        Value::UInt(u) => put_u64(buf, u),
        // MatrixMarket `complex`: the real and imaginary parts, spaced.
        Value::Complex(re, im) => {
            put_f64(buf, re);
            buf.push(b' ');
            put_f64(buf, im);
        }
    }
}

pub(super) fn write(
    a: &Matrix<'_>,
    mut o: Output,
    opts: &ExportOptions,
) -> MatrixResult<ExportSummary> {
    if opts.symmetric && !a.is_row_sorted() {
        return write_symmetric_reordered(a, o, opts);
    }
    if a.compressed().is_some() {
        return write_lanes(a, o, opts);
    }
    let t = a.coo("export to mtx")?;
    let field = field_of(t.dtype());
    let (m, n) = (a.rows(), a.cols());
    let ind = t.indices();
    let vbytes = t.values_bytes();
    let w = t.dtype().width();
    let sym = opts.symmetric;
    let mut count = t.nnz();
    let mut cursor: Vec<u64> = Vec::new();
    if sym {
        if m != n {
            return Err(MatrixError::NotSymmetric {
                detail: format!("it is {m} x {n}, not square"),
            });
        }
        a.require_sorted("a symmetric MatrixMarket export", "export it as general")?;
        // Entries written: the diagonal and below (a pre-pass over rows and
        // columns, so the size line is exact before any entry).
        let mut lower_and_diag = 0u64;
        pass(a, opts.paging, |r| {
            for e in ind[2 * r.start..2 * r.end].chunks_exact(2) {
                lower_and_diag += (e[1] <= e[0]) as u64;
            }
            Ok(())
        })?;
        count = lower_and_diag;
        cursor = crate::matrix::memory::try_filled(
            to_usize(m)? as u64,
            u64::MAX,
            "the per-row cursors of a symmetric MatrixMarket export",
        )?;
    }
    o.write(head(field, sym, m, n, count, t.name()).as_bytes())?;
    if !sym {
        write_general(a, &mut o, opts)?;
        let bytes = o.commit()?;
        return Ok(ExportSummary {
            entries: count,
            bytes,
        });
    }
    let (mut below, mut above) = (0u64, 0u64);
    // Row being read, and whether its first entry above the diagonal is known.
    let (mut row, mut row_upper_set) = (u64::MAX, true);
    let nnz = t.nnz() as usize;
    pass(a, opts.paging, |r| {
        for (k, e) in ind[2 * r.start..2 * r.end].chunks_exact(2).enumerate() {
            let p = r.start + k;
            let (i, j) = (e[0], e[1]);
            if sym {
                if i != row {
                    if !row_upper_set {
                        // The previous row had nothing above the diagonal:
                        // its cursor points at this row's first entry,
                        // which can never match it.
                        cursor[row as usize] = p as u64;
                    }
                    if i >= m || (row != u64::MAX && i < row) {
                        return Err(a.corrupt(
                            p,
                            format_args!("row {i} breaks the sorted order or the shape"),
                        ));
                    }
                    row = i;
                    row_upper_set = false;
                }
                if j > i {
                    above += 1;
                    if !row_upper_set {
                        cursor[i as usize] = p as u64;
                        row_upper_set = true;
                    }
                    continue;
                }
                if j < i {
                    below += 1;
                    let q = cursor[j as usize];
                    let ok = q < nnz as u64 && {
                        let q = q as usize;
                        ind[2 * q] == j
                            && ind[2 * q + 1] == i
                            && vbytes[q * w..q * w + w] == vbytes[p * w..p * w + w]
                    };
                    if !ok {
                        return Err(MatrixError::NotSymmetric {
                            detail: mismatch(t, i, j, p, q),
                        });
                    }
                    cursor[j as usize] = q + 1;
                }
            }
            put_line(o.buffer(), i, j, t.value(p as u64));
        }
        Ok(o.maybe_flush()?)
    })?;
    if sym && above != below {
        return Err(MatrixError::NotSymmetric {
            detail: format!(
                "{above} entries above the diagonal but {below} below: some entry above has no mirror"
            ),
        });
    }
    let bytes = o.commit()?;
    Ok(ExportSummary {
        entries: count,
        bytes,
    })
}

/// "real", "complex" or "integer".
fn field_of(d: crate::DType) -> &'static str {
    if d.is_float() {
        "real"
    } else if d.is_complex() {
        "complex"
    } else {
        "integer"
    }
}

/// The banner, a comment and the size line.
fn head(field: &str, sym: bool, m: u64, n: u64, count: u64, name: &str) -> String {
    format!(
        "%%MatrixMarket matrix coordinate {field} {}\n% written by coo-assembler {} from tensor {name:?}\n{m} {n} {count}\n",
        if sym { "symmetric" } else { "general" },
        env!("CARGO_PKG_VERSION"),
    )
}

/// A CSR or CSC matrix as a general coordinate file, entries in storage
/// order (CSR: row-major, the same bytes as the sorted COO export; CSC:
/// column-major, which MatrixMarket allows).
fn write_lanes(a: &Matrix<'_>, mut o: Output, opts: &ExportOptions) -> MatrixResult<ExportSummary> {
    let coords = Coords::of(a)?;
    let t = a.tensor();
    let (m, n) = (a.rows(), a.cols());
    o.write(head(field_of(t.dtype()), false, m, n, t.nnz(), t.name()).as_bytes())?;
    pass(a, opts.paging, |r| {
        let buf = o.buffer();
        coords.each(r, |p, i, j| {
            if i >= m || j >= n {
                return Err(a.corrupt(p, format_args!("coordinate ({i}, {j}) is out of range")));
            }
            put_line(buf, i, j, value_at(a, p));
            Ok(())
        })?;
        Ok(o.maybe_flush()?)
    })?;
    let bytes = o.commit()?;
    Ok(ExportSummary {
        entries: t.nnz(),
        bytes,
    })
}

/// The value of entry `p` (below nnz).
#[inline]
fn value_at(a: &Matrix<'_>, p: usize) -> Value {
    let w = a.dtype().width();
    a.dtype().decode(&a.values_bytes()[p * w..p * w + w])
}

/// `--symmetric` for a matrix not sorted row-major (CSR, CSC, unsorted
/// COO): the lower triangle with the diagonal gathered by rows and the
/// strict upper triangle by columns, band by band (see [`Reorder`]);
/// row i's entries left of the diagonal must equal column i's entries
/// above it, index for index and byte for byte. The lines come out in
/// row-major order: the same file as the sorted COO export.
fn write_symmetric_reordered(
    a: &Matrix<'_>,
    mut o: Output,
    opts: &ExportOptions,
) -> MatrixResult<ExportSummary> {
    let (m, n) = (a.rows(), a.cols());
    if m != n {
        return Err(MatrixError::NotSymmetric {
            detail: format!("it is {m} x {n}, not square"),
        });
    }
    let lower = Reorder::new(a, 0, Keep::LowerAndDiagonal, opts.paging)?;
    let upper = Reorder::new(a, 1, Keep::StrictlyUpper, opts.paging)?;
    let count = lower.total();
    let t = a.tensor();
    let dtype = t.dtype();
    let w = dtype.width();
    let value = |raw: [u8; 16]| dtype.decode(&raw[..w]);
    o.write(head(field_of(dtype), true, m, n, count, t.name()).as_bytes())?;
    let (mut li, mut ls, mut ui, mut us) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for band in lower.bands(opts.reorder_budget, Some(&upper.lens)) {
        lower.gather(band.clone(), &mut li, &mut ls)?;
        upper.gather(band.clone(), &mut ui, &mut us)?;
        for (k, i) in band.enumerate() {
            let i = i as u64;
            let row = &li[ls[k]..ls[k + 1]];
            let left = match row.last() {
                Some(d) if d.minor == i => &row[..row.len() - 1],
                _ => row,
            };
            // Column i above the diagonal: entries (r, i), r < i, by r.
            let above = &ui[us[k]..us[k + 1]];
            if left != above {
                let q = left.iter().zip(above).take_while(|(x, y)| x == y).count();
                let detail = match (left.get(q), above.get(q)) {
                    (Some(x), Some(y)) if x.minor == y.minor => format!(
                        "A[{i}, {j}] = {} but A[{j}, {i}] = {}",
                        value(x.raw),
                        value(y.raw),
                        j = x.minor
                    ),
                    (Some(x), y) if y.is_none_or(|y| x.minor < y.minor) => format!(
                        "A[{i}, {j}] = {} but A[{j}, {i}] is not stored",
                        value(x.raw),
                        j = x.minor
                    ),
                    (_, Some(y)) => format!(
                        "A[{r}, {i}] = {} has no mirror A[{i}, {r}]",
                        value(y.raw),
                        r = y.minor
                    ),
                    _ => "the triangles differ".to_string(),
                };
                return Err(MatrixError::NotSymmetric { detail });
            }
            let buf = o.buffer();
            for e in row {
                put_line(buf, i, e.minor, value(e.raw));
            }
            o.maybe_flush()?;
        }
    }
    let bytes = o.commit()?;
    Ok(ExportSummary {
        entries: count,
        bytes,
    })
}

/// One entry's line.
#[inline]
fn put_line(buf: &mut Vec<u8>, i: u64, j: u64, v: Value) {
    put_u64(buf, i + 1);
    buf.push(b' ');
    put_u64(buf, j + 1);
    buf.push(b' ');
    put_value(buf, v);
    buf.push(b'\n');
}

/// Entries formatted per parallel piece.
const PIECE: usize = 1 << 15;

/// The general case: pieces of a pass's block formatted on every core,
/// written in order.
fn write_general(a: &Matrix<'_>, o: &mut Output, opts: &ExportOptions) -> MatrixResult<()> {
    use rayon::prelude::*;
    let t = a.coo("export to mtx")?;
    let ind = t.indices();
    pass_blocks(
        a,
        opts.paging,
        PIECE * 2 * rayon::current_num_threads(),
        |r| {
            let pieces: Vec<Vec<u8>> = (r.start..r.end)
                .step_by(PIECE)
                .collect::<Vec<_>>()
                .into_par_iter()
                .map(|s| {
                    let e = (s + PIECE).min(r.end);
                    let mut buf = Vec::with_capacity((e - s) * 48);
                    for p in s..e {
                        put_line(&mut buf, ind[2 * p], ind[2 * p + 1], t.value(p as u64));
                    }
                    buf
                })
                .collect();
            for b in pieces {
                o.write(&b)?;
            }
            Ok(())
        },
    )
}

/// Why lower entry (i, j) at position p has no mirror; q is row j's cursor.
fn mismatch(t: CooTensor<'_>, i: u64, j: u64, p: usize, q: u64) -> String {
    let here = t.value(p as u64);
    if q < t.nnz() {
        let e = t.index(q);
        if e[0] == j && e[1] == i {
            return format!("A[{i}, {j}] = {here} but A[{j}, {i}] = {}", t.value(q));
        }
        if e[0] == j && e[1] < i {
            return format!(
                "A[{j}, {}] = {} has no mirror A[{}, {j}]",
                e[1],
                t.value(q),
                e[1]
            );
        }
    }
    format!("A[{i}, {j}] = {here} but A[{j}, {i}] is not stored")
}
