//! `coo-assembler verify`: every rule of the format and the content.

use crate::{open, pick, Pick};
use std::path::Path;
use std::process::ExitCode;

pub(crate) fn run(path: &Path, p: &Pick) -> anyhow::Result<ExitCode> {
    let f = open(path, true)?;
    let problems = match &p.tensor {
        Some(_) => pick(&f, p)?.verify(),
        None => f.verify(),
    };
    if problems.is_empty() {
        println!("OK");
        Ok(ExitCode::SUCCESS)
    } else {
        for pr in &problems {
            println!("{pr}");
        }
        eprintln!(
            "coo-assembler: {} problem(s) found in {}",
            problems.len(),
            path.display()
        );
        Ok(ExitCode::from(1))
    }
}
