//! `coo-assembler dump`: every entry, one per line.

use crate::{open, pick, Pick};
use coo_assembler::matrix::{self, Matrix, DENSE_LIMIT};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn run(
    path: &Path,
    limit: Option<u64>,
    dense: bool,
    p: &Pick,
) -> anyhow::Result<ExitCode> {
    let f = open(path, true)?;
    let t = pick(&f, p)?;
    if dense {
        return dense_rows(t);
    }
    let out = io::stdout();
    let mut w = io::BufWriter::with_capacity(1 << 16, out.lock());
    let mut line = String::new();
    let dtype = t.descriptor().dtype;
    for (idx, v) in t.iter().take(limit.unwrap_or(u64::MAX) as usize) {
        line.clear();
        for i in idx {
            let _ = write!(line, "{i} ");
        }
        let _ = writeln!(line, "{}", v.repr(dtype));
        if let Err(e) = w.write_all(line.as_bytes()) {
            // A closed pipe (`| head`) is a normal way to stop reading.
            if e.kind() == io::ErrorKind::BrokenPipe {
                return Ok(ExitCode::SUCCESS);
            }
            return Err(e.into());
        }
    }
    match w.flush() {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// The dense matrix, one row per line, columns right-aligned (like
/// scipy's `todense()`); refused above [`DENSE_LIMIT`] elements.
fn dense_rows(t: coo_assembler::CooTensor<'_>) -> anyhow::Result<ExitCode> {
    let m = Matrix::new(t)?;
    let d = matrix::dense(&m, DENSE_LIMIT)?;
    let cells: Vec<String> = d.iter().map(|v| v.to_string()).collect();
    let width = cells.iter().map(String::len).max().unwrap_or(1);
    let cols = m.cols() as usize;
    let mut text = String::new();
    for row in cells.chunks(cols.max(1)) {
        let line: Vec<String> = row.iter().map(|c| format!("{c:>width$}")).collect();
        text.push_str(&line.join(" "));
        text.push('\n');
    }
    match io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}
