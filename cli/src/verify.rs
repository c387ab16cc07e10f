//! `coo-assembler verify`: every rule of the format and the content.
//! Broken rules are errors (exit 1); advisory data that disagrees with the
//! content (statistics) gives warnings (exit 0, or 1 with `--strict`).

use crate::{Pick, open_any};
use coo_assembler::raw::header::FLAG_HAS_INDEX_CRC32C;
use coo_assembler::{read::Opened, read::Severity};
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn run(path: &Path, p: &Pick, strict: bool) -> anyhow::Result<ExitCode> {
    let f = match open_any(path, true)? {
        Opened::Plain(f) => f,
        Opened::Composite(c) => {
            crate::composite::check_pick(&c, p.tensor.as_deref())?;
            return crate::composite::verify(&c);
        }
    };
    let infos: Vec<_> = match &p.tensor {
        Some(name) => vec![f.tensor_info(name)?],
        None => f.tensor_infos().collect(),
    };
    let bar = crate::progress::Bar::show(&f.progress(), &path.display().to_string(), false);
    let problems = match &p.tensor {
        Some(name) => f.verify_tensor(name),
        None => Ok(f.verify()),
    };
    drop(bar);
    let problems = problems?;
    let errors = problems.iter().filter(|p| p.is_error()).count();
    // Notes (a tensor without checksums) say what was not checked; they
    // are printed, not counted.
    let warnings = problems
        .iter()
        .filter(|p| p.severity == Severity::Warning)
        .count();
    // Errors and warnings first; a tensor's notes (no checksums) come
    // with what is said of each tensor, below.
    let (notes, findings): (Vec<_>, Vec<_>) =
        problems.iter().partition(|p| p.severity == Severity::Note);
    for pr in &findings {
        outln!("{pr}");
    }
    // A file with tensors whose content is not read: say what was checked
    // of the container and of each of them.
    if infos.iter().any(|t| !t.is_served()) {
        let crc = if f.header().flags & FLAG_HAS_INDEX_CRC32C != 0 {
            "its CRC-32C matches"
        } else {
            "no CRC-32C stored"
        };
        let kv = if f.trailer().kv_length > 0 {
            ", KV section"
        } else {
            ""
        };
        let n = f.tensor_count();
        outln!(
            "note: container checked: header, trailer, index ({crc}){kv}, and where each of the {n} tensor{} lies (inside the file, no overlap, zero padding)",
            if n == 1 { "" } else { "s" }
        );
    }
    for t in &infos {
        if let Some(note) = t.verify_note() {
            outln!("note: {note}");
        }
        for n in notes
            .iter()
            .filter(|n| n.tensor.as_deref() == Some(t.name()))
        {
            outln!("{n}");
        }
    }
    for n in notes.iter().filter(|n| n.tensor.is_none()) {
        outln!("{n}");
    }
    let plural = |n: usize, w: &str| format!("{n} {w}{}", if n == 1 { "" } else { "s" });
    if errors == 0 && warnings == 0 {
        outln!("OK");
        Ok(ExitCode::SUCCESS)
    } else if errors == 0 && !strict {
        outln!("OK with {}", plural(warnings, "warning"));
        Ok(ExitCode::SUCCESS)
    } else {
        let why = if errors == 0 {
            " (warnings fail under --strict)"
        } else {
            ""
        };
        eprintln!(
            "coo-assembler: {} and {} in {}{why}",
            plural(errors, "error"),
            plural(warnings, "warning"),
            path.display()
        );
        Ok(ExitCode::from(1))
    }
}
