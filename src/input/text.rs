//! Whitespace text: one entry per line, indices (0-based) then the value;
//! `#` starts a comment. The line helpers are shared with MatrixMarket.

use crate::assemble::builder::Builder;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::input::common::{at, input_err, Progress};
use std::io::BufRead;

/// A parsed text value, pushed with its natural type.
#[derive(Clone, Copy)]
pub(crate) enum Parsed {
    F(f64),
    I(i64),
    U(u64),
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

/// Read lines, calling `f(line_number, line)` for each; tracks bytes.
pub(crate) fn for_lines<R: BufRead>(
    mut r: R,
    source: &str,
    first_line: u64,
    progress: Progress<'_>,
    mut f: impl FnMut(u64, &str) -> Result<()>,
) -> Result<()> {
    let mut line = String::new();
    let mut n = first_line;
    let mut bytes = 0u64;
    loop {
        line.clear();
        let got = r.read_line(&mut line).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => {
                input_err(source, format!("line {}", n + 1), "not valid UTF-8")
            }
            _ => Error::io("read", source, e),
        })?;
        if got == 0 {
            progress(bytes);
            return Ok(());
        }
        n += 1;
        bytes += got as u64;
        if n % 65536 == 0 {
            progress(bytes);
        }
        f(n, &line)?;
    }
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
    let mut idx = vec![0u64; rank];
    let mut entries = 0u64;
    for_lines(r, source, 0, progress, |n, line| {
        let content = line.split('#').next().unwrap_or("");
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
        push_parsed(b, &idx, v).map_err(at(source, loc))?;
        entries += 1;
        Ok(())
    })?;
    Ok(entries)
}
