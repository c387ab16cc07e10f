//! `coo-assembler dump`: every entry, one per line (`i j value` for CSR and
//! CSC, whatever the storage order; the whole coordinate for COO).

use crate::{Pick, open_any, pick_view};
use coo_assembler::matrix::{self, DENSE_LIMIT, Matrix};
use coo_assembler::{Value, read::Opened, read::Tensor};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

/// Why the walk over the entries stopped early.
enum Stop {
    /// `--limit` entries were printed.
    Limit,
    /// The reader of stdout went away (`| head`): a normal way to stop.
    Pipe,
    Failed(anyhow::Error),
}

impl From<coo_assembler::Error> for Stop {
    fn from(e: coo_assembler::Error) -> Self {
        Stop::Failed(e.into())
    }
}

pub(crate) fn run(
    path: &Path,
    limit: Option<u64>,
    dense: bool,
    p: &Pick,
) -> anyhow::Result<ExitCode> {
    let f = match open_any(path, true)? {
        Opened::Plain(f) => f,
        Opened::Composite(c) => {
            crate::composite::check_pick(&c, p.tensor.as_deref())?;
            if dense {
                return Err(crate::usage(
                    "--dense is not available for partition composites; convert with `composite to-coo` first",
                ));
            }
            crate::composite::dump(&c, limit)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let t = pick_view(&f, p, "dump")?;
    if dense {
        return dense_rows(t);
    }
    let out = io::stdout();
    let mut w = io::BufWriter::with_capacity(1 << 16, out.lock());
    let mut line = String::new();
    let dtype = t.dtype();
    let limit = limit.unwrap_or(u64::MAX);
    let mut printed = 0u64;
    let walk = t.try_for_each(|idx, v| {
        if printed == limit {
            return Err(Stop::Limit);
        }
        printed += 1;
        line.clear();
        for i in idx {
            let _ = write!(line, "{i} ");
        }
        let _ = writeln!(line, "{}", v.repr(dtype));
        w.write_all(line.as_bytes()).map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe => Stop::Pipe,
            _ => Stop::Failed(e.into()),
        })
    });
    match walk {
        Ok(()) | Err(Stop::Limit) => {}
        Err(Stop::Pipe) => return Ok(ExitCode::SUCCESS),
        Err(Stop::Failed(e)) => {
            // What was printed before the broken entry still goes out.
            let _ = w.flush();
            return Err(e);
        }
    }
    match w.flush() {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// The dense matrix, one row per line, columns right-aligned (like
/// scipy's `todense()`); refused above [`DENSE_LIMIT`] elements.
fn dense_rows(t: Tensor<'_>) -> anyhow::Result<ExitCode> {
    let (d, cols) = match t {
        Tensor::Coo(c) => {
            let m = Matrix::new(c)?;
            (matrix::dense(&m, DENSE_LIMIT)?, m.cols() as usize)
        }
        Tensor::Compressed(c) => compressed_dense(c)?,
        other => anyhow::bail!(
            "tensor {:?} is a rank-{} {} tensor; a dense dump prints matrices (dump it without --dense)",
            other.name(),
            other.rank(),
            other.layout().to_string().to_uppercase()
        ),
    };
    let cells: Vec<String> = d.iter().map(|v| v.to_string()).collect();
    let width = cells.iter().map(String::len).max().unwrap_or(1);
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

/// The dense form of a small CSR/CSC matrix, row-major.
fn compressed_dense(
    c: coo_assembler::read::CompressedTensor<'_>,
) -> anyhow::Result<(Vec<Value>, usize)> {
    let (rows, cols) = (c.shape()[0], c.shape()[1]);
    let elements = u128::from(rows) * u128::from(cols);
    if elements > u128::from(DENSE_LIMIT) {
        anyhow::bail!(
            "{rows} x {cols} is {elements} elements, more than the {DENSE_LIMIT} a dense dump prints"
        );
    }
    let zero = c.dtype().zero();
    let mut out = vec![zero; elements as usize];
    for e in c.iter() {
        let (i, j, v) = e?;
        // Inside the shape unless the file is broken: `verify` says where.
        if i >= rows || j >= cols {
            anyhow::bail!("entry ({i}, {j}) is outside the {rows} x {cols} shape; run verify");
        }
        out[(i * cols + j) as usize] = v;
    }
    Ok((out, cols as usize))
}
