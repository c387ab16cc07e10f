//! `coo-assembler get`: the value at one coordinate.

use crate::{open, parse_list, pick, usage, Pick};
use coo_assembler::Error;
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn run(path: &Path, index: &str, p: &Pick) -> anyhow::Result<ExitCode> {
    let f = open(path, true)?;
    let t = pick(&f, p)?;
    let idx = parse_list(index, "index")?;
    let v = t.get(&idx).map_err(|e| match e {
        Error::WrongRank { expected, got, .. } => usage(format!(
            "expected {expected} indices (the tensor has rank {expected}), got {got}: {index:?}"
        )),
        Error::IndexOutOfRange {
            dim, index, extent, ..
        } => usage(format!(
            "index {index} in dimension {dim} is out of range (extent {extent}, indices are 0-based)"
        )),
        other => other.into(),
    })?;
    println!("{}", v.repr(t.descriptor().dtype));
    Ok(ExitCode::SUCCESS)
}
