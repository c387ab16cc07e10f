//! Whitespace text: one entry per line, indices (0-based) then the value;
//! `#` starts a comment. The value helpers are shared with MatrixMarket.

use crate::assemble::builder::Builder;
use crate::element::DType;
use crate::error::Result;
use crate::input::common::{at, input_err, Entry, Progress, Sink};
use crate::input::lines::{ascii, for_lines};
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

/// Push whitespace-separated text entries. Returns the number of entries.
pub fn push_text<R: BufRead>(
    b: &mut Builder,
    r: R,
    rank: usize,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    let mut entries = 0u64;
    parse_text(r, rank, dtype, source, progress, &mut |e| {
        push_parsed(b, e.idx, e.v).map_err(at(source, || format!("line {}", e.at)))?;
        entries += 1;
        Ok(())
    })?;
    Ok(entries)
}

/// Parse text entries, giving each `(line, indices, value)` to `sink`.
pub(crate) fn parse_text<R: BufRead>(
    r: R,
    rank: usize,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
    sink: Sink<'_>,
) -> Result<()> {
    let mut idx = vec![0u64; rank];
    for_lines(r, source, 0, progress, |n, line| {
        // A comment may hold any bytes; only what comes before it is data.
        let data = match memchr::memchr(b'#', line) {
            Some(p) => &line[..p],
            None => line,
        };
        let content = ascii(data, source, n)?;
        let mut toks = content.split_ascii_whitespace();
        let Some(first) = toks.next() else {
            return Ok(());
        };
        let loc = || format!("line {n}");
        let mut tok = Some(first);
        for (d, slot) in idx.iter_mut().enumerate() {
            let t = tok.ok_or_else(|| {
                input_err(
                    source,
                    loc(),
                    format!("expected {rank} indices and a value, found {d} fields"),
                )
            })?;
            *slot =
                parse_index(t, &format!("index {d}")).map_err(|m| input_err(source, loc(), m))?;
            tok = toks.next();
        }
        let t = tok.ok_or_else(|| {
            input_err(
                source,
                loc(),
                format!("expected {rank} indices and a value, the value is missing"),
            )
        })?;
        let v = parse_value(t, dtype).map_err(|m| input_err(source, loc(), m))?;
        if let Some(extra) = toks.next() {
            return Err(input_err(
                source,
                loc(),
                format!("unexpected field {extra:?} after the value"),
            ));
        }
        sink(Entry {
            at: n,
            idx: &idx,
            v,
            mirrored: false,
        })
    })
}
