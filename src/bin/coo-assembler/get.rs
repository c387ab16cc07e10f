//! `coo-assembler get`: the value at one coordinate (COO, CSR or CSC).

use crate::{open, parse_list, pick_view, usage, Pick};
use coo_assembler::Error;
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn run(path: &Path, index: &str, p: &Pick) -> anyhow::Result<ExitCode> {
    let f = open(path, true)?;
    let t = pick_view(&f, p)?;
    let idx = parse_list(index, "index")?;
    let v = t.get(&idx).map_err(|e| match e {
        Error::WrongIndexCount { .. } | Error::PositionOutOfRange { .. } => usage(e.to_string()),
        other => other.into(),
    })?;
    println!("{}", v.repr(t.dtype()));
    Ok(ExitCode::SUCCESS)
}
