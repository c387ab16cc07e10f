//! `coo-assembler dump`: every entry, one per line.

use crate::{open, pick, Pick};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn run(path: &Path, limit: Option<u64>, p: &Pick) -> anyhow::Result<ExitCode> {
    let f = open(path, true)?;
    let t = pick(&f, p)?;
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
