//! Whitespace text: one entry per line, indices (0-based) then the value;
//! `#` starts a comment. The value helpers are shared with MatrixMarket.

use crate::assemble::builder::Builder;
use crate::element::DType;
use crate::error::Result;
use crate::hurray::MAX_RANK;
use crate::input::chunks::{
    ascii_field, digits, parse_lines, Batch, Fields, LineError, LineParser,
};
use crate::input::common::{at, Progress, Sink};
use crate::input::lines::ascii_detail;
use std::io::BufRead;

/// A parsed text value, pushed with its natural type.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Parsed {
    F(f64),
    I(i64),
    U(u64),
}

impl Parsed {
    pub(crate) fn is_zero(self) -> bool {
        match self {
            Parsed::F(f) => f == 0.0,
            Parsed::I(i) => i == 0,
            Parsed::U(u) => u == 0,
        }
    }
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
    let mut entries = 0u64;
    let workers = b.threads();
    parse_text(r, rank, dtype, source, workers, progress, &mut |e| {
        push_parsed(b, e.idx, e.v).map_err(at(source, || format!("line {}", e.at)))?;
        entries += 1;
        Ok(())
    })?;
    Ok(entries)
}

/// Parse text entries on `workers` threads, giving each `(line, indices,
/// value)` to `sink` in input order.
pub(crate) fn parse_text<R: BufRead>(
    r: R,
    rank: usize,
    dtype: DType,
    source: &str,
    workers: usize,
    progress: Progress<'_>,
    sink: Sink<'_>,
) -> Result<()> {
    if rank == 0 || rank > MAX_RANK {
        return Err(crate::error::Error::InvalidArgument(format!(
            "rank {rank} is out of 1..={MAX_RANK}"
        )));
    }
    let p = TextLines { rank, dtype };
    parse_lines(
        r,
        &p,
        source,
        0,
        workers,
        progress,
        &mut |_, _, _| Ok(()),
        sink,
    )?;
    Ok(())
}

/// The text format's lines.
struct TextLines {
    rank: usize,
    dtype: DType,
}

impl LineParser for TextLines {
    fn rank(&self) -> usize {
        self.rank
    }

    fn line(&self, line: &[u8], out: &mut Batch) -> std::result::Result<(), LineError> {
        if !self.fast(line, out) {
            self.exact(line, out)?;
        }
        Ok(())
    }
}

impl TextLines {
    /// A plain line of `rank` digit fields and a good value, or a blank
    /// line: added (if an entry) and `true`; anything else (comments
    /// included) `false`, for [`Self::exact`].
    #[inline]
    fn fast(&self, line: &[u8], out: &mut Batch) -> bool {
        let mut f = Fields::new(line);
        let Some(mut field) = f.next_field() else {
            return true;
        };
        let mut idx = [0u64; MAX_RANK];
        for slot in &mut idx[..self.rank] {
            match digits(field) {
                Some(v) => *slot = v,
                None => return false,
            }
            match f.next_field() {
                Some(n) => field = n,
                None => return false,
            }
        }
        let Some(v) = ascii_field(field).and_then(|t| parse_value(t, self.dtype).ok()) else {
            return false;
        };
        if !f.done() {
            return false;
        }
        out.add(&idx[..self.rank], v, false);
        true
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
            *slot = parse_index(t, &format!("index {d}")).map_err(LineError::plain)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::chunks::Batch;

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
        ];
        for dtype in [DType::F64, DType::I32, DType::U64] {
            let p = TextLines { rank: 2, dtype };
            for &line in lines {
                let (mut a, mut b) = (Batch::for_rank(2), Batch::for_rank(2));
                let exact = p.exact(line, &mut a).map_err(|e| e.detail);
                let fast = p.line(line, &mut b).map_err(|e| e.detail);
                let what = format!("{dtype} {:?}", String::from_utf8_lossy(line));
                assert_eq!(exact, fast, "{what}");
                assert_eq!(
                    format!("{:?}", a.entries()),
                    format!("{:?}", b.entries()),
                    "{what}"
                );
            }
        }
    }
}
