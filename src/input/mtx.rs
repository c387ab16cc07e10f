//! MatrixMarket files: `coordinate` (real, integer, complex, pattern) and
//! dense `array` (real, integer), each general, symmetric or
//! skew-symmetric; complex coordinate files may be hermitian.
//! Indices are 1-based in the file and in every message about them.

use crate::assemble::builder::Builder;
use crate::assemble::builder::Packer;
use crate::element::DType;
use crate::error::Error;
use crate::error::Result;
use crate::input::chunks::{
    Batch, BatchSink, Entries, LineError, LineParser, Order, Text, line_end, parse_lines,
    skip_blanks,
};
use crate::input::common::Parsed;
use crate::input::common::{Entry, Progress, Sink, at, input_err};
use crate::input::lines::{LineReader, ascii, ascii_detail, for_lines, mtx_skip};
use crate::input::number::index_prefix;
use crate::input::text::{packer_for, parse_index, parse_value, push_entries, value_at};
use std::io::BufRead;

/// MatrixMarket value field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtxField {
    /// Real values.
    Real,
    /// Integer values.
    Integer,
    /// No values: every entry is 1.
    Pattern,
    /// Complex values: `real imaginary` on each line.
    Complex,
}

/// MatrixMarket symmetry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtxSymmetry {
    /// Every entry is stored.
    General,
    /// Lower triangle stored; (i, j) also gives (j, i).
    Symmetric,
    /// Strictly lower triangle stored; (i, j) = v gives (j, i) = -v.
    SkewSymmetric,
    /// Complex, lower triangle stored; (i, j) = v gives (j, i) = conj(v);
    /// the diagonal is real.
    Hermitian,
}

/// How a MatrixMarket file stores its entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtxLayout {
    /// `row column value` lines.
    Coordinate,
    /// Every element (or a triangle), one value per line, column by column.
    Array,
}

/// The header of a MatrixMarket file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtxHeader {
    /// Rows.
    pub rows: u64,
    /// Columns.
    pub cols: u64,
    /// Entries stored in the file (before symmetric expansion); for an
    /// array, the values the file holds.
    pub entries: u64,
    /// Coordinate or array.
    pub layout: MtxLayout,
    /// Value field.
    pub field: MtxField,
    /// Symmetry.
    pub symmetry: MtxSymmetry,
    /// Lines read so far (banner, comments and size line): the size line's
    /// number.
    pub lines: u64,
}

/// Read the banner, comments and size line of a MatrixMarket file.
pub fn read_mtx_header<R: BufRead>(r: &mut R, source: &str) -> Result<MtxHeader> {
    let mut lines = LineReader::new(r, 0);
    let mut line = Vec::new();
    let line1 = || "line 1".to_string();
    if !lines.next_line(&mut line, source)? {
        return Err(input_err(
            source,
            line1(),
            "empty input: expected a %%MatrixMarket banner",
        ));
    }
    let banner: Vec<String> = String::from_utf8_lossy(&line)
        .split_ascii_whitespace()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    if banner.first().map(String::as_str) != Some("%%matrixmarket") || banner.len() != 5 {
        return Err(input_err(
            source,
            line1(),
            "expected '%%MatrixMarket matrix coordinate|array <field> <symmetry>'",
        ));
    }
    let layout = match (banner[1].as_str(), banner[2].as_str()) {
        ("matrix", "coordinate") => MtxLayout::Coordinate,
        ("matrix", "array") => MtxLayout::Array,
        (a, b) => {
            return Err(input_err(
                source,
                line1(),
                format!(
                    "only 'matrix coordinate' and 'matrix array' files are supported, not '{a} {b}'"
                ),
            ));
        }
    };
    let field = match banner[3].as_str() {
        "real" | "double" => MtxField::Real,
        "integer" => MtxField::Integer,
        "pattern" if layout == MtxLayout::Coordinate => MtxField::Pattern,
        "complex" if layout == MtxLayout::Coordinate => MtxField::Complex,
        "complex" => {
            return Err(input_err(
                source,
                line1(),
                "complex 'array' files are not read (complex 'coordinate' files are)",
            ));
        }
        f => {
            let allowed = match layout {
                MtxLayout::Coordinate => "real, integer, complex or pattern",
                MtxLayout::Array => "real or integer",
            };
            return Err(input_err(
                source,
                line1(),
                format!("field '{f}' is not supported here (use {allowed})"),
            ));
        }
    };
    let symmetry = match banner[4].as_str() {
        "general" => MtxSymmetry::General,
        "symmetric" => MtxSymmetry::Symmetric,
        "skew-symmetric" => MtxSymmetry::SkewSymmetric,
        "hermitian" if field == MtxField::Complex => MtxSymmetry::Hermitian,
        "hermitian" => {
            return Err(input_err(
                source,
                line1(),
                "a hermitian file must be 'complex' (a real hermitian matrix is 'symmetric')",
            ));
        }
        s => {
            return Err(input_err(
                source,
                line1(),
                format!(
                    "symmetry '{s}' is not supported (use general, symmetric, skew-symmetric or hermitian)"
                ),
            ));
        }
    };
    loop {
        if !lines.next_line(&mut line, source)? {
            return Err(input_err(
                source,
                format!("line {}", lines.number + 1),
                "missing the size line",
            ));
        }
        if mtx_skip(&line) {
            continue;
        }
        let n = lines.number;
        let loc = || format!("line {n}");
        let t = ascii(&line, source, n)?;
        let nums: Vec<&str> = t.split_ascii_whitespace().collect();
        let want = match layout {
            MtxLayout::Coordinate => 3,
            MtxLayout::Array => 2,
        };
        if nums.len() != want {
            let form = match layout {
                MtxLayout::Coordinate => "'rows cols entries'",
                MtxLayout::Array => "'rows cols'",
            };
            return Err(input_err(
                source,
                loc(),
                format!("the size line must be {form}"),
            ));
        }
        let p = |s: &str, w: &str| -> Result<u64> {
            let v = parse_index(s, w).map_err(|m| input_err(source, loc(), m))?;
            if v == u64::MAX {
                // Hurray reserves u64::MAX for dynamic extents.
                return Err(input_err(
                    source,
                    loc(),
                    format!(
                        "{w} {v} is more than a Hurray shape can hold (at most {})",
                        u64::MAX - 1
                    ),
                ));
            }
            Ok(v)
        };
        let rows = p(nums[0], "rows")?;
        let cols = p(nums[1], "cols")?;
        if symmetry != MtxSymmetry::General && rows != cols {
            return Err(input_err(
                source,
                loc(),
                format!("a {} matrix must be square, not {rows} x {cols}", banner[4]),
            ));
        }
        let entries = match layout {
            MtxLayout::Coordinate => p(nums[2], "entries")?,
            MtxLayout::Array => {
                let (r, c) = (u128::from(rows), u128::from(cols));
                let count = match symmetry {
                    MtxSymmetry::General => r * c,
                    MtxSymmetry::Symmetric | MtxSymmetry::Hermitian => r * (r + 1) / 2,
                    MtxSymmetry::SkewSymmetric => r * r.saturating_sub(1) / 2,
                };
                u64::try_from(count).map_err(|_| {
                    input_err(
                        source,
                        loc(),
                        format!("{rows} x {cols} values are too many"),
                    )
                })?
            }
        };
        // The entries are read on from `r`: not from the `\n` of a
        // `\r\n` after the size line, which would count as a line.
        lines.end_line(source)?;
        return Ok(MtxHeader {
            rows,
            cols,
            entries,
            layout,
            field,
            symmetry,
            lines: n,
        });
    }
}

/// Push the entries of a MatrixMarket file whose header was read with
/// [`read_mtx_header`]. Returns the number of contributions pushed
/// (symmetric entries off the diagonal count twice; the zeros of an array
/// are not pushed). A coordinate file is parsed on as many threads as the
/// builder sorts on; entries are pushed in file order all the same.
pub fn push_mtx<R: BufRead>(
    b: &mut Builder,
    r: R,
    h: &MtxHeader,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    push_mtx_from(b, Text::Reader(r), h, dtype, source, progress)
}

/// [`push_mtx`] from a reader or from the mapped bytes after the header.
pub(crate) fn push_mtx_from<R: BufRead>(
    b: &mut Builder,
    input: Text<'_, R>,
    h: &MtxHeader,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    let mut pushed = 0u64;
    let workers = b.threads();
    let packer = packer_for(b, workers);
    let sink = &mut |e: &Entries<'_>| {
        push_entries(b, e).map_err(|err| {
            let Some(k) = e.failed(&err) else {
                return err;
            };
            let (line, mirrored) = (e.line(k), e.mirrored(k));
            let (i, j) = match e.index(k) {
                Some(&[i, j]) => (i + 1, j + 1),
                _ => (0, 0),
            };
            at(source, move || {
                if mirrored {
                    format!("line {line} (entry ({i}, {j}), the mirror of this line's entry in a symmetric file)")
                } else {
                    format!("line {line} (entry ({i}, {j}))")
                }
            })(err)
        })?;
        pushed += e.len() as u64;
        Ok(())
    };
    parse_mtx(
        input,
        h,
        dtype,
        source,
        workers,
        packer.as_ref(),
        progress,
        sink,
    )?;
    Ok(pushed)
}

fn more_entries(source: &str, h: &MtxHeader, line: u64) -> crate::error::Error {
    input_err(
        source,
        format!("line {line}"),
        format!(
            "more entries than the {} the size line announces",
            h.entries
        ),
    )
}

/// Counts the entries of a coordinate file against its size line, in file
/// order, before they reach the sink, as a line-by-line parse does.
struct Count<'a> {
    h: &'a MtxHeader,
    source: &'a str,
    seen: u64,
}

impl Order for Count<'_> {
    fn entries(&mut self, e: &Entries<'_>) -> std::result::Result<(), (usize, Error)> {
        // Mirrors do not count: they are not lines of the file.
        let lines = e.own();
        if self.seen + lines <= self.h.entries {
            self.seen += lines;
            return Ok(());
        }
        for k in 0..e.len() {
            if e.mirrored(k) {
                continue;
            }
            if self.seen == self.h.entries {
                return Err((k, more_entries(self.source, self.h, e.line(k))));
            }
            self.seen += 1;
        }
        Ok(())
    }

    fn error_line(&mut self, line: u64, e: &LineError) -> Result<()> {
        if e.counts && self.seen == self.h.entries {
            return Err(more_entries(self.source, self.h, line));
        }
        Ok(())
    }
}

/// Parse the entries after the header into `sink` (0-based indices), in
/// file order; a coordinate file on `workers` threads (its blocks packed
/// with `packer`, if any).
#[allow(clippy::too_many_arguments)]
pub(crate) fn parse_mtx<R: BufRead>(
    input: Text<'_, R>,
    h: &MtxHeader,
    dtype: DType,
    source: &str,
    workers: usize,
    packer: Option<&Packer>,
    progress: Progress<'_>,
    sink: BatchSink<'_>,
) -> Result<()> {
    let seen = match (h.layout, input) {
        (MtxLayout::Array, Text::Reader(r)) => {
            parse_array(r, h, dtype, source, progress, &mut |e| {
                sink(&Entries::one(&e))
            })?
        }
        (MtxLayout::Array, Text::Bytes(data)) => {
            parse_array(data, h, dtype, source, progress, &mut |e| {
                sink(&Entries::one(&e))
            })?
        }
        (MtxLayout::Coordinate, input) => {
            let mut count = Count { h, source, seen: 0 };
            let p = CoordLines { h, dtype };
            parse_lines(
                input, &p, source, h.lines, workers, packer, progress, &mut count, sink,
            )?;
            count.seen
        }
    };
    if seen != h.entries {
        return Err(input_err(
            source,
            "end of input".into(),
            format!(
                "{seen} entries found, the size line announces {}",
                h.entries
            ),
        ));
    }
    Ok(())
}

/// The value field of an entry line (1 for a pattern file).
fn value_of<'t>(
    toks: &mut impl Iterator<Item = &'t str>,
    h: &MtxHeader,
    dtype: DType,
) -> std::result::Result<Parsed, String> {
    if h.field == MtxField::Pattern {
        return Ok(Parsed::I(1));
    }
    if h.field == MtxField::Complex {
        let mut part = |what: &str| -> std::result::Result<f64, String> {
            let tok = toks.next().ok_or_else(|| format!("missing {what} part"))?;
            match parse_value(tok, DType::F64)? {
                Parsed::F(f) => Ok(f),
                _ => Err(format!("{tok:?} is not a number")),
            }
        };
        let re = part("real")?;
        let im = part("imaginary")?;
        if !dtype.is_complex() {
            return Err(format!(
                "a complex file's values need a complex dtype (complex128 or complex64), not {dtype}"
            ));
        }
        return Ok(Parsed::C(re, im));
    }
    let tok = toks.next().ok_or("missing value")?;
    let v = parse_value(tok, dtype)?;
    if h.field == MtxField::Integer && matches!(v, Parsed::F(f) if f.fract() != 0.0) {
        return Err(format!("{tok:?} is not an integer in an integer file"));
    }
    Ok(v)
}

/// What a line's entry (i, j) = v implies at (j, i) off the diagonal: the
/// same value (symmetric), its negation (skew-symmetric) or nothing.
fn mirror_of(h: &MtxHeader, v: Parsed) -> std::result::Result<Option<Parsed>, String> {
    Ok(match h.symmetry {
        MtxSymmetry::General => None,
        MtxSymmetry::Symmetric => Some(v),
        MtxSymmetry::Hermitian => Some(match v {
            Parsed::C(re, im) => Parsed::C(re, -im),
            other => other,
        }),
        MtxSymmetry::SkewSymmetric => Some(match v {
            Parsed::C(re, im) => Parsed::C(-re, -im),
            Parsed::F(f) => Parsed::F(-f),
            Parsed::I(x) => Parsed::I(x.checked_neg().ok_or("value cannot be negated")?),
            Parsed::U(_) => {
                return Err("value too large to negate for a skew-symmetric file".into());
            }
        }),
    })
}

const SKEW_DIAGONAL: &str = "a skew-symmetric file cannot store a diagonal entry";

fn unexpected(extra: &str) -> String {
    format!("unexpected field {extra:?} after the value")
}

/// The lines of a coordinate file.
struct CoordLines<'h> {
    h: &'h MtxHeader,
    dtype: DType,
}

impl LineParser for CoordLines<'_> {
    fn rank(&self) -> usize {
        2
    }

    fn line(&self, line: &[u8], out: &mut Batch) -> std::result::Result<(), LineError> {
        self.exact(line, out)
    }

    /// A plain line `row col [value]` with indices in range and a good
    /// value, or a blank line, in one pass over its bytes; anything else
    /// (comments, errors, a skew-symmetric diagonal) goes to
    /// [`Self::exact`].
    #[inline]
    fn fast(&self, rest: &[u8], out: &mut Batch) -> Option<usize> {
        let h = self.h;
        let n = skip_blanks(rest, 0);
        if let Some(end) = line_end(rest, n) {
            return Some(end);
        }
        let (i, k) = index_prefix(&rest[n..])?;
        let n = skip_blanks(rest, n + k);
        let (j, k) = index_prefix(&rest[n..])?;
        let n = n + k;
        if i == 0 || j == 0 || i > h.rows || j > h.cols {
            return None;
        }
        let (v, n) = match h.field {
            MtxField::Pattern => (Parsed::I(1), n),
            // Two parts and a real diagonal to check: the exact path.
            MtxField::Complex => return None,
            _ => {
                let (v, n) = value_at(rest, skip_blanks(rest, n), self.dtype)?;
                if h.field == MtxField::Integer && matches!(v, Parsed::F(x) if x.fract() != 0.0) {
                    return None;
                }
                (v, n)
            }
        };
        let end = line_end(rest, n)?;
        let (i, j) = (i - 1, j - 1);
        if i != j {
            let m = mirror_of(h, v).ok()?;
            out.add(&[i, j], v, false);
            if let Some(m) = m {
                out.add(&[j, i], m, true);
            }
        } else if h.symmetry == MtxSymmetry::SkewSymmetric {
            return None;
        } else {
            out.add(&[i, j], v, false);
        }
        Some(end)
    }
}

impl CoordLines<'_> {
    /// A line's entry and, in a symmetric file, its mirror.
    #[inline]
    fn give(
        &self,
        i: u64,
        j: u64,
        v: Parsed,
        out: &mut Batch,
    ) -> std::result::Result<(), LineError> {
        out.add(&[i, j], v, false);
        if i != j {
            if let Some(m) = mirror_of(self.h, v).map_err(LineError::plain)? {
                out.add(&[j, i], m, true);
            }
        } else if self.h.symmetry == MtxSymmetry::SkewSymmetric {
            return Err(LineError::plain(SKEW_DIAGONAL));
        } else if self.h.symmetry == MtxSymmetry::Hermitian
            && matches!(v, Parsed::C(_, im) if im != 0.0)
        {
            return Err(LineError::plain(
                "a hermitian file's diagonal entries are real (imaginary part 0)",
            ));
        }
        Ok(())
    }

    /// Any line, checked in the order the format's rules are stated, so
    /// that a bad line gets the first error that applies.
    fn exact(&self, line: &[u8], out: &mut Batch) -> std::result::Result<(), LineError> {
        if mtx_skip(line) {
            return Ok(());
        }
        let h = self.h;
        let t = ascii_detail(line).map_err(LineError::plain)?;
        let mut toks = t.split_ascii_whitespace();
        let mut one = |what: &str, extent: u64, noun: &str| -> std::result::Result<u64, String> {
            let tok = toks.next().ok_or_else(|| format!("missing {what}"))?;
            let v = parse_index(tok, what)?;
            if v == 0 {
                return Err(format!("{what} is 0; MatrixMarket indices start at 1"));
            }
            if v > extent {
                return Err(format!(
                    "{what} {v} is out of range: the matrix has {extent} {noun} (1-based, 1..={extent})"
                ));
            }
            Ok(v - 1)
        };
        let i = one("row", h.rows, "rows").map_err(LineError::entry)?;
        let j = one("column", h.cols, "columns").map_err(LineError::entry)?;
        let v = value_of(&mut toks, h, self.dtype).map_err(LineError::entry)?;
        if let Some(extra) = toks.next() {
            return Err(LineError::entry(unexpected(extra)));
        }
        self.give(i, j, v, out)
    }
}

/// Parse the values of a dense array file, column by column (its order),
/// on this thread. Returns the values read.
fn parse_array<R: BufRead>(
    r: R,
    h: &MtxHeader,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
    sink: Sink<'_>,
) -> Result<u64> {
    let mut seen = 0u64;
    // The next array element, column-major (the array layout's order).
    let (mut ai, mut aj) = (0u64, 0u64);
    if h.symmetry == MtxSymmetry::SkewSymmetric {
        ai = 1;
    }
    for_lines(r, source, h.lines, progress, |n, line| {
        if mtx_skip(line) {
            return Ok(());
        }
        let loc = || format!("line {n}");
        let t = ascii(line, source, n)?;
        if seen == h.entries {
            return Err(more_entries(source, h, n));
        }
        let mut toks = t.split_ascii_whitespace();
        let (i, j) = (ai, aj);
        let v = value_of(&mut toks, h, dtype).map_err(|m| input_err(source, loc(), m))?;
        if let Some(extra) = toks.next() {
            return Err(input_err(source, loc(), unexpected(extra)));
        }
        seen += 1;
        // Next element: down the column, within the stored triangle.
        ai += 1;
        if ai == h.rows {
            aj += 1;
            ai = match h.symmetry {
                MtxSymmetry::General => 0,
                MtxSymmetry::Symmetric | MtxSymmetry::Hermitian => aj,
                MtxSymmetry::SkewSymmetric => aj + 1,
            };
        }
        // A dense file stores its zeros; a sparse tensor does not.
        if v.is_zero() {
            return Ok(());
        }
        sink(Entry {
            at: n,
            idx: &[i, j],
            v,
            mirrored: false,
        })?;
        if i != j {
            if let Some(m) = mirror_of(h, v).map_err(|m| input_err(source, loc(), m))? {
                sink(Entry {
                    at: n,
                    idx: &[j, i],
                    v: m,
                    mirrored: true,
                })?;
            }
        } else if h.symmetry == MtxSymmetry::SkewSymmetric {
            return Err(input_err(source, loc(), SKEW_DIAGONAL));
        }
        Ok(())
    })?;
    Ok(seen)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::chunks::parse_as_block;

    fn header(field: MtxField, symmetry: MtxSymmetry) -> MtxHeader {
        MtxHeader {
            rows: 5,
            cols: 4,
            entries: 10,
            layout: MtxLayout::Coordinate,
            field,
            symmetry,
            lines: 2,
        }
    }

    /// A size line ended by `\r\n`: the entries' lines are numbered from
    /// the next line on, as with `\n` (the `\n` once counted as a line).
    #[test]
    fn lines_after_a_crlf_size_line_are_numbered_right() {
        use crate::options::AssembleOptions;
        for (data, want) in [
            (
                "%%MatrixMarket matrix coordinate real general\r\n3 3 3\r\n1 1 1\r\n2 2 2\r\n9 9 9\r\n",
                "c:line 5",
            ),
            (
                "%%MatrixMarket matrix array real general\r\n% x\r\n2 1\r\n1\r\nx\r\n",
                "c:line 5",
            ),
            (
                "%%MatrixMarket matrix coordinate real general\r3 3 1\r\r9 1 1\r",
                "c:line 4",
            ),
        ] {
            for threads in [1, 2] {
                let mut r = data.as_bytes();
                let h = read_mtx_header(&mut r, "c").unwrap();
                let opts = AssembleOptions {
                    threads,
                    ..AssembleOptions::default()
                };
                let mut b = Builder::new(&[h.rows, h.cols], DType::F64, opts).unwrap();
                let e = push_mtx(&mut b, r, &h, DType::F64, "c", &mut |_| {})
                    .unwrap_err()
                    .to_string();
                assert!(e.contains(want), "{data:?}: {e}");
            }
        }
    }

    /// The fast path takes only lines on which it agrees with the exact
    /// path; it leaves the others (errors included) to it.
    #[test]
    fn the_fast_path_agrees_with_the_exact_one() {
        let lines: &[&[u8]] = &[
            b"1 2 3.5",
            b" 1\t2  -3e-7 ",
            b"01 002 1e3",
            b"+1 2 3",
            b"1 2 3 4",
            b"1 2",
            b"1",
            b"0 2 1",
            b"6 1 1",
            b"5 4 1",
            b"1 5 1",
            b"1 2 inf",
            b"1 2 NaN",
            b"1 2 0x10",
            b"1 2 1.5",
            b"2 2 -4",
            b"1 2 3\x0b",
            b"1 2 \xC3\xA9",
            b"1 \xE9 2",
            b"% 1 2 3",
            b"   %\xE9",
            b"",
            b"  \t ",
            b"99999999999999999999 1 1",
            b"18446744073709551616 1 1",
            b"1 2 9223372036854775808",
            b"1 2 -9223372036854775808",
            b"1 2 2.5e-3",
            b"1\t2\x0c-7",
            b"1 2 3\x0c",
            b"1 2 1e400",
            b"3 3 2",
            b"2 1 .25",
            b"1 2 -0.0",
            b"1 2 12345678901234567890123",
            b"1 2 3.6538507790272153E-3",
            b"1 2  ",
            b"1  2",
        ];
        for field in [MtxField::Real, MtxField::Integer, MtxField::Pattern] {
            for sym in [
                MtxSymmetry::General,
                MtxSymmetry::Symmetric,
                MtxSymmetry::SkewSymmetric,
            ] {
                let h = header(field, sym);
                for dtype in [DType::F64, DType::I64, DType::U8] {
                    let p = CoordLines { h: &h, dtype };
                    for &line in lines {
                        let mut a = Batch::for_rank(2);
                        let exact = p.exact(line, &mut a).map_err(|e| (e.detail, e.counts));
                        let (entries, fast) = parse_as_block(&p, line);
                        let what = format!(
                            "{field:?} {sym:?} {dtype} {:?}",
                            String::from_utf8_lossy(line)
                        );
                        assert_eq!(exact, fast, "{what}");
                        assert_eq!(
                            format!("{:?}", a.entries()),
                            format!("{entries:?}"),
                            "{what}"
                        );
                    }
                }
            }
        }
    }
}
