//! `coo-assembler get`: the value at one coordinate (COO, CSR or CSC, or a
//! partition composite at a global coordinate).

use crate::{Pick, open_any, parse_list, pick_view, usage};
use coo_assembler::{Error, read::Opened};
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn run(path: &Path, index: &str, one_based: bool, p: &Pick) -> anyhow::Result<ExitCode> {
    let mut idx = parse_list(index, "index")?;
    if one_based {
        for (d, i) in idx.iter_mut().enumerate() {
            *i = i.checked_sub(1).ok_or_else(|| {
                usage(format!(
                    "index component {d} is 0, but --one-based counts from 1"
                ))
            })?;
        }
    }
    let bad_index = |e: Error| match e {
        Error::WrongIndexCount { .. } | Error::PositionOutOfRange { .. } => usage(e.to_string()),
        other => other.into(),
    };
    let f = match open_any(path, true)? {
        Opened::Plain(f) => f,
        Opened::Composite(c) => {
            crate::composite::check_pick(&c, p.tensor.as_deref())?;
            outln!("{}", c.get(&idx).map_err(bad_index)?.repr(c.dtype()));
            return Ok(ExitCode::SUCCESS);
        }
    };
    let t = pick_view(&f, p, "get")?;
    let v = t.get(&idx).map_err(bad_index)?;
    outln!("{}", v.repr(t.dtype()));
    Ok(ExitCode::SUCCESS)
}
