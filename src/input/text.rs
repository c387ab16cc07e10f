//! Whitespace text: one entry per line, indices (0-based) then the value;
//! `#` starts a comment. FROSTT's `.tns` is the same with 1-based indices
//! (`base` 1), its shape the largest index of each mode unless given
//! ([`tns_shape`]). The value helpers are shared with MatrixMarket.

use crate::assemble::builder::{Builder, Packer};
use crate::element::DType;
use crate::error::Result;
use crate::hurray::MAX_RANK;
use crate::input::chunks::{
    AnyOrder, Batch, BatchSink, Entries, LineError, LineParser, Text, line_end, parse_lines,
    skip_blanks,
};
use crate::input::common::{Parsed, Progress, at};
use crate::input::lines::ascii_detail;
use crate::input::number::{ends_field, f64_prefix, i64_prefix, index_prefix};
use std::io::{BufRead, Read};

/// A value field at `b[n..]`, read straight from the bytes: the value and
/// the position after it, if the field is a number the fast paths know
/// and ends there ([`crate::input::number`]; the same value as
/// [`parse_value`] gives); `None` otherwise.
#[inline]
pub(crate) fn value_at(b: &[u8], n: usize, dtype: DType) -> Option<(Parsed, usize)> {
    let rest = b.get(n..)?;
    let (v, k) = if dtype.is_float() {
        let (v, k) = f64_prefix(rest)?;
        (Parsed::F(v), k)
    } else {
        let (v, k) = i64_prefix(rest)?;
        (Parsed::I(v), k)
    };
    ends_field(rest.get(k)).then_some((v, n + k))
}

pub(crate) fn parse_value(tok: &str, dtype: DType) -> std::result::Result<Parsed, String> {
    if dtype.is_float() {
        tok.parse::<f64>()
            .map(Parsed::F)
            .map_err(|_| format!("{tok:?} is not a number"))
    } else if let Ok(v) = tok.parse::<i64>() {
        Ok(Parsed::I(v))
    } else if let Ok(v) = tok.parse::<u64>() {
        Ok(Parsed::U(v))
    } else {
        Err(format!(
            "{tok:?} is not an integer (the element type is {dtype})"
        ))
    }
}

pub(crate) fn push_parsed(b: &mut Builder, idx: &[u64], v: Parsed) -> Result<()> {
    match v {
        Parsed::F(f) => b.push(idx, f),
        Parsed::I(i) => b.push(idx, i),
        Parsed::U(u) => b.push(idx, u),
        Parsed::C(re, im) => b.push(idx, crate::element::Complex::new(re, im)),
    }
}

pub(crate) fn parse_index(tok: &str, what: &str) -> std::result::Result<u64, String> {
    tok.parse::<u64>()
        .map_err(|_| format!("{what} {tok:?} is not a non-negative integer"))
}

/// Push whitespace-separated text entries, parsed on as many threads as
/// the builder sorts on. Returns the number of entries.
pub fn push_text<R: BufRead>(
    b: &mut Builder,
    r: R,
    rank: usize,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    push_text_from(b, Text::Reader(r), rank, dtype, 0, source, progress)
}

/// [`push_text`] from a reader or from mapped bytes, the indices counted
/// from `base` (0, or 1 for `.tns`).
pub(crate) fn push_text_from<R: Read>(
    b: &mut Builder,
    input: Text<'_, R>,
    rank: usize,
    dtype: DType,
    base: u64,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    let mut entries = 0u64;
    let workers = b.threads();
    let packer = packer_for(b, workers);
    let sink = &mut |e: &Entries<'_>| {
        push_entries(b, e).map_err(|err| match e.failed(&err) {
            Some(k) => {
                let line = e.line(k);
                at(source, move || format!("line {line}"))(err)
            }
            None => err,
        })?;
        entries += e.len() as u64;
        Ok(())
    };
    parse_text(
        input,
        rank,
        dtype,
        base,
        source,
        workers,
        packer.as_ref(),
        progress,
        sink,
    )?;
    Ok(entries)
}

/// The packer the parsing threads use for `b`: with one thread there are
/// none, and packing first would only add a copy.
pub(crate) fn packer_for(b: &Builder, workers: usize) -> Option<Packer> {
    (workers > 1).then(|| b.packer()).flatten()
}

/// A parsed block into the builder: the records the parsing thread packed,
/// then the other entries through `push_many`.
#[inline]
pub(crate) fn push_entries(b: &mut Builder, e: &Entries<'_>) -> Result<()> {
    let packed = e.packed();
    if !packed.is_empty() {
        b.append_packed(packed)?;
    }
    let (idx, vals) = e.unpacked();
    if vals.is_empty() {
        return Ok(());
    }
    b.push_many(idx, vals)
}

/// Parse text entries on `workers` threads, giving them to `sink` in
/// input order, a parsed block at a time (packed with `packer`, if any).
#[allow(clippy::too_many_arguments)]
pub(crate) fn parse_text<R: Read>(
    input: Text<'_, R>,
    rank: usize,
    dtype: DType,
    base: u64,
    source: &str,
    workers: usize,
    packer: Option<&Packer>,
    progress: Progress<'_>,
    sink: BatchSink<'_>,
) -> Result<()> {
    if rank == 0 || rank > MAX_RANK {
        return Err(crate::error::Error::InvalidArgument(format!(
            "rank {rank} is out of 1..={MAX_RANK}"
        )));
    }
    let p = TextLines { rank, dtype, base };
    parse_lines(
        input,
        &p,
        source,
        0,
        workers,
        packer,
        progress,
        &mut AnyOrder,
        sink,
    )?;
    Ok(())
}

/// The text format's lines.
struct TextLines {
    rank: usize,
    dtype: DType,
    /// The first index: 0, or 1 for `.tns`.
    base: u64,
}

impl LineParser for TextLines {
    fn rank(&self) -> usize {
        self.rank
    }

    fn line(&self, line: &[u8], out: &mut Batch) -> std::result::Result<(), LineError> {
        self.exact(line, out)
    }

    /// A plain line of `rank` digit fields and a value, or a blank line,
    /// in one pass over its bytes; anything else (comments included)
    /// goes to [`Self::exact`].
    #[inline]
    fn fast(&self, rest: &[u8], out: &mut Batch) -> Option<usize> {
        let n = skip_blanks(rest, 0);
        if let Some(end) = line_end(rest, n) {
            return Some(end);
        }
        // The indices go straight into the batch, and back out if the
        // line is not a plain one.
        let held = out.index_len();
        let end = self.fast_entry(rest, n, out);
        if end.is_none() {
            out.drop_indices(held);
        }
        end
    }
}

impl TextLines {
    /// The entry of a line that is not blank: `rank` digit indices and a
    /// value, each ending at a blank or the line's end.
    #[inline]
    fn fast_entry(&self, rest: &[u8], mut n: usize, out: &mut Batch) -> Option<usize> {
        for _ in 0..self.rank {
            let (v, k) = index_prefix(rest.get(n..)?)?;
            // An index below the base goes to the exact path, which names it.
            out.push_index(v.checked_sub(self.base)?);
            n = skip_blanks(rest, n + k);
        }
        let (v, n) = value_at(rest, n, self.dtype)?;
        let end = line_end(rest, n)?;
        out.add_value(v, false);
        Some(end)
    }

    /// Any line, checked in the order the format's rules are stated, so
    /// that a bad line gets the first error that applies.
    fn exact(&self, line: &[u8], out: &mut Batch) -> std::result::Result<(), LineError> {
        let rank = self.rank;
        // A comment may hold any bytes; only what comes before it is data.
        let data = match memchr::memchr(b'#', line) {
            Some(p) => &line[..p],
            None => line,
        };
        let content = ascii_detail(data).map_err(LineError::plain)?;
        let mut toks = content.split_ascii_whitespace();
        let Some(first) = toks.next() else {
            return Ok(());
        };
        let mut idx = [0u64; MAX_RANK];
        let mut tok = Some(first);
        for (d, slot) in idx[..rank].iter_mut().enumerate() {
            let t = tok.ok_or_else(|| {
                LineError::plain(format!(
                    "expected {rank} indices and a value, found {d} fields"
                ))
            })?;
            let x = parse_index(t, &format!("index {d}")).map_err(LineError::plain)?;
            *slot = x.checked_sub(self.base).ok_or_else(|| {
                LineError::plain(format!(
                    "index {d} is {x}: a .tns file counts from {}",
                    self.base
                ))
            })?;
            tok = toks.next();
        }
        let t = tok.ok_or_else(|| {
            LineError::plain(format!(
                "expected {rank} indices and a value, the value is missing"
            ))
        })?;
        let v = parse_value(t, self.dtype).map_err(LineError::plain)?;
        if let Some(extra) = toks.next() {
            return Err(LineError::plain(format!(
                "unexpected field {extra:?} after the value"
            )));
        }
        out.add(&idx[..rank], v, false);
        Ok(())
    }
}

/// The shape of a `.tns` input: its rank from the first entry's fields
/// (indices and a value), each extent the largest index found in that
/// mode (indices count from 1), every line checked for the same number of
/// fields and for indices from 1. One pass over `r`, in bounded memory.
pub(crate) fn tns_shape(mut r: impl BufRead, source: &str) -> Result<Vec<u64>> {
    let err = |line: u64, detail: String| crate::error::Error::Input {
        source_name: source.to_string(),
        location: format!("line {line}"),
        detail,
        cause: None,
    };
    let mut shape: Vec<u64> = Vec::new();
    let mut buf = Vec::new();
    let mut line = 0u64;
    loop {
        buf.clear();
        let n = r
            .read_until(b'\n', &mut buf)
            .map_err(|e| crate::error::Error::io("read", std::path::Path::new(source), e))?;
        if n == 0 {
            break;
        }
        line += 1;
        let data = match memchr::memchr(b'#', &buf) {
            Some(p) => &buf[..p],
            None => &buf[..],
        };
        let content = ascii_detail(data).map_err(|d| err(line, d))?;
        let toks: Vec<&str> = content.split_ascii_whitespace().collect();
        if toks.is_empty() {
            continue;
        }
        if shape.is_empty() {
            if toks.len() < 2 || toks.len() > MAX_RANK + 1 {
                return Err(err(
                    line,
                    format!(
                        "{} fields: a .tns entry is 1 to {MAX_RANK} indices and a value",
                        toks.len()
                    ),
                ));
            }
            shape = vec![0; toks.len() - 1];
        }
        if toks.len() != shape.len() + 1 {
            return Err(err(
                line,
                format!(
                    "{} fields where the first entry has {} indices and a value",
                    toks.len(),
                    shape.len()
                ),
            ));
        }
        for (d, (t, e)) in toks.iter().zip(shape.iter_mut()).enumerate() {
            let x = parse_index(t, &format!("index {d}")).map_err(|m| err(line, m))?;
            if x == 0 {
                return Err(err(
                    line,
                    format!("index {d} is 0: a .tns file counts from 1"),
                ));
            }
            *e = (*e).max(x);
        }
    }
    if shape.is_empty() {
        return Err(crate::error::Error::InvalidShape {
            shape: Vec::new(),
            detail: format!("{source}: a .tns input without entries: give the shape"),
        });
    }
    Ok(shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::chunks::{Batch, parse_as_block};

    /// The fast path takes only lines on which it agrees with the exact
    /// path; it leaves the others (errors and comments included) to it.
    #[test]
    fn the_fast_path_agrees_with_the_exact_one() {
        let lines: &[&[u8]] = &[
            b"1 2 3.5",
            b" 1\t2  -3e-7 ",
            b"1 2 3 # c",
            b"1 2 3#\xE9",
            b"# \xE9",
            b"1 2 3 4",
            b"1 2",
            b"+1 2 3",
            b"1 2 -4",
            b"1 2 18446744073709551615",
            b"1 2 1.5",
            b"1 2 \xC3\xA9",
            b"",
            b"  ",
            b"99999999999999999999 1 1",
            b"1 2 3\x0b",
            b"1\x0c2\t3.25e-400",
            b"1 2 .5",
            b"1 2 5.",
            b"1 2 -0",
            b"1 2 1e",
            b"1 2 1.5x",
            b"1x 2 3",
            b"1 2 3 ",
            b"1 2 inf",
            b"1 2 -NaN",
            b"1 2 123456789012345678901234567890",
            b"1 2 -9223372036854775808",
            b"1 2 +7",
            b"1 2 0.30000000000000004",
        ];
        for dtype in [DType::F64, DType::I32, DType::U64] {
            let p = TextLines {
                rank: 2,
                dtype,
                base: 0,
            };
            for &line in lines {
                let mut a = Batch::for_rank(2);
                let exact = p.exact(line, &mut a).map_err(|e| (e.detail, e.counts));
                let (entries, fast) = parse_as_block(&p, line);
                let what = format!("{dtype} {:?}", String::from_utf8_lossy(line));
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

#[cfg(test)]
mod push_tests {
    use super::*;
    use crate::options::{AssembleOptions, NonFinitePolicy};

    fn fails(body: &str, dtype: DType, opts: AssembleOptions) -> String {
        let mut b = Builder::new(&[3, 3], dtype, opts).unwrap();
        push_text(&mut b, body.as_bytes(), 2, dtype, "t", &mut |_| {})
            .unwrap_err()
            .to_string()
    }

    /// A batch goes to the builder in one call; an entry the builder
    /// refuses in the middle of it is still named by its own line.
    #[test]
    fn a_refused_entry_in_a_batch_names_its_line() {
        for threads in [1, 2] {
            let opts = AssembleOptions {
                threads,
                ..AssembleOptions::default()
            };
            let good = "0 0 5\n1 2 7\n# c\n\n".repeat(2000);
            let e = fails(&format!("{good}2 7 1\n0 0 1\n"), DType::F64, opts.clone());
            assert!(
                e.contains("t:line 8001") && e.contains("out of range"),
                "{e}"
            );
            let e = fails(&format!("{good}0 1 300\n1 9 1\n"), DType::U8, opts.clone());
            assert!(e.contains("t:line 8001") && e.contains("300"), "{e}");
            let nan = AssembleOptions {
                non_finite: NonFinitePolicy::RejectNan,
                ..opts.clone()
            };
            let e = fails(
                &format!("{good}0 1 inf\n0 1 1e0\n2 2 NaN\n"),
                DType::F64,
                nan,
            );
            assert!(e.contains("t:line 8003") && e.contains("NaN"), "{e}");
        }
    }
}
