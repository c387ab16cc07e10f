//! `coo-assembler verify`: every rule of the format and the content.
//! Broken rules are errors (exit 1); advisory data that disagrees with the
//! content (statistics) gives warnings (exit 0, or 1 with `--strict`).

use crate::{open_any, pick_view, Pick};
use coo_assembler::Opened;
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
    let views: Vec<_> = match &p.tensor {
        Some(_) => vec![pick_view(&f, p)?],
        None => f.tensor_views().collect(),
    };
    let problems = match &p.tensor {
        Some(_) => views[0].verify(),
        None => f.verify(),
    };
    let errors = problems.iter().filter(|p| p.is_error()).count();
    let warnings = problems.len() - errors;
    for pr in &problems {
        outln!("{pr}");
    }
    // Another writer's file (the reference's) stores no checksums: say
    // what was checked and what could not be.
    for t in views.iter().filter(|t| t.stored_checksums() == 0) {
        outln!(
            "note: tensor {:?} carries no stored checksums (written by another writer): \
             its layout and content rules were checked, its bytes could not be",
            t.name()
        );
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
