//! `mpirun -n K coo-assembler assemble --mpi` (issue 13), run by
//! `cargo test --release -p coo-assembler-cli --features mpi --test mpi`:
//! on a bin file (f64 sums, i32 max), converted with `composite to-coo`,
//! byte-identical to the single-process `assemble` (at 2 ranks also with
//! `--per-rank-files` and the printed `composite join`); the same with
//! `--layout csr` (converted with `convert --to csr`, and `--to csc`
//! against `assemble --layout csc`); an out-of-range record on one rank's
//! share fails every rank and leaves only the input. Without `mpirun` on
//! the PATH it says so and skips.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use coo_assembler_testkit::reference::composite_members;
use coo_assembler_testkit::{clustered, find_program};
use std::path::Path;
use std::process::Command;

const SHAPE: [u64; 2] = [997, 500];

fn contribution(i: u64) -> ([u64; 2], f64) {
    clustered(i, SHAPE)
}

fn reference_accepts(path: &Path, members: usize) {
    let (shape, n) = composite_members(path, "K");
    assert_eq!(n, members);
    assert_eq!(shape, SHAPE);
}

/// A bin input of `n` records (two u64 indices, then an f64 or i32 value)
/// with many duplicates.
fn bin_input(path: &Path, n: u64, dtype: &str) {
    let mut bytes = Vec::new();
    for i in 0..n {
        let ([r, c], v) = contribution(i);
        bytes.extend_from_slice(&r.to_le_bytes());
        bytes.extend_from_slice(&c.to_le_bytes());
        if dtype == "i32" {
            bytes.extend_from_slice(&((v * 1e6) as i32).to_le_bytes());
        } else {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    std::fs::write(path, bytes).unwrap();
}

/// `assemble --mpi` under mpirun against the single-process `assemble`.
fn cli(mpirun: &Path, k: usize, dtype: &str, dup: &str, layout: &str) -> Result<(), String> {
    let exe = Path::new(env!("CARGO_BIN_EXE_coo-assembler"));
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bin");
    bin_input(&input, 60_000, dtype);
    let run = |cmd: &mut Command| -> Result<String, String> {
        let out = cmd
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            Ok(text)
        } else {
            Err(text)
        }
    };
    let common = |shape: &str| -> Vec<String> {
        [
            "assemble",
            "--input",
            "in.bin",
            "--shape",
            shape,
            "--dtype",
            dtype,
            "--duplicates",
            dup,
            "--name",
            "K",
            "--memory-budget",
            "6MiB",
            "--layout",
            layout,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let shape = format!("{},{}", SHAPE[0], SHAPE[1]);
    run(Command::new(mpirun)
        .current_dir(dir.path())
        .args(["-n", &k.to_string(), "--oversubscribe"])
        .arg(exe)
        .args(common(&shape))
        .args(["--mpi", "-o", "comp.hrry"]))?;
    run(Command::new(exe)
        .current_dir(dir.path())
        .args(common(&shape))
        .args(["-q", "-o", "single.hrry"]))?;
    // To one tensor of the members' layout.
    let to_plain = |from: &str, to: &str| {
        run(Command::new(exe)
            .current_dir(dir.path())
            .args(["convert", "-q", from, to, "--to", layout]))
    };
    to_plain("comp.hrry", "conv.hrry")?;
    let read = |n: &str| std::fs::read(dir.path().join(n)).unwrap();
    if read("conv.hrry") != read("single.hrry") {
        return Err("the converted composite differs from the single-process file".into());
    }
    reference_accepts(&dir.path().join("comp.hrry"), k);
    if layout != "coo" {
        let info = run(Command::new(exe)
            .current_dir(dir.path())
            .args(["info", "comp.hrry"]))?;
        if !info.contains(&format!("\"K.part0\": {} box", layout.to_uppercase())) {
            return Err(format!("info does not show {layout} members: {info}"));
        }
        // And to CSC, by way of COO, as `assemble --layout csc` writes it.
        let mut args = common(&shape);
        let at = args.iter().position(|a| a == layout).unwrap();
        args[at] = "csc".into();
        run(Command::new(exe).current_dir(dir.path()).args(args).args([
            "-q",
            "-o",
            "single-csc.hrry",
        ]))?;
        run(Command::new(exe).current_dir(dir.path()).args([
            "convert",
            "-q",
            "comp.hrry",
            "csc.hrry",
            "--to",
            "csc",
        ]))?;
        if read("csc.hrry") != read("single-csc.hrry") {
            return Err(
                "the composite converted to CSC differs from the single-process CSC".into(),
            );
        }
        for f in ["csc.hrry", "single-csc.hrry"] {
            std::fs::remove_file(dir.path().join(f)).map_err(|e| format!("{f}: {e}"))?;
        }
    } else {
        // The composite's own command gives the same COO.
        run(Command::new(exe).current_dir(dir.path()).args([
            "composite",
            "to-coo",
            "comp.hrry",
            "conv2.hrry",
        ]))?;
        if read("conv2.hrry") != read("single.hrry") {
            return Err("composite to-coo differs from the single-process file".into());
        }
        std::fs::remove_file(dir.path().join("conv2.hrry")).map_err(|e| e.to_string())?;
    }
    if k == 2 {
        // Per-rank files, then the join command rank 0 prints.
        let text = run(Command::new(mpirun)
            .current_dir(dir.path())
            .args(["-n", &k.to_string(), "--oversubscribe"])
            .arg(exe)
            .args(common(&shape))
            .args(["--mpi", "--per-rank-files", "-q", "-o", "pr.hrry"]))?;
        let join = text
            .lines()
            .find_map(|l| l.strip_prefix("coo-assembler composite join "))
            .ok_or(format!("no join command printed: {text}"))?;
        run(Command::new(exe)
            .current_dir(dir.path())
            .args(["composite", "join"])
            .args(join.split(' ')))?;
        to_plain("pr.hrry", "prconv.hrry")?;
        if read("prconv.hrry") != read("single.hrry") {
            return Err("per-rank files joined differ from the single-process file".into());
        }
        for f in ["pr.hrry", "pr.part0.hrry", "pr.part1.hrry", "prconv.hrry"] {
            std::fs::remove_file(dir.path().join(f)).map_err(|e| format!("{f}: {e}"))?;
        }
    }
    // Rows beyond a smaller shape sit in some rank's share: every rank
    // fails, nothing is written.
    for f in ["comp.hrry", "conv.hrry", "single.hrry"] {
        std::fs::remove_file(dir.path().join(f)).unwrap();
    }
    let small = format!("{},{}", SHAPE[0] / 2, SHAPE[1]);
    match run(Command::new(mpirun)
        .current_dir(dir.path())
        .args(["-n", &k.to_string(), "--oversubscribe"])
        .arg(exe)
        .args(common(&small))
        .args(["--mpi", "-o", "bad.hrry"]))
    {
        Ok(_) => return Err("an out-of-range record was accepted".into()),
        Err(text) if !text.contains("out of range") => {
            return Err(format!("unexpected failure: {text}"));
        }
        Err(_) => {}
    }
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    if left.len() != 1 {
        return Err(format!("a failed run left {left:?}"));
    }
    Ok(())
}

fn main() {
    // `cargo test` passes harness flags (e.g. --nocapture): ignored.
    let Some(mpirun) = find_program("mpirun") else {
        println!("SKIPPED: mpirun is not on the PATH (install openmpi-bin and libopenmpi-dev)");
        return;
    };
    let mut failed = Vec::new();
    for (k, dtype, dup, layout) in [
        (2, "f64", "sum", "coo"),
        (3, "i32", "max", "coo"),
        (4, "f64", "sum", "coo"),
        (2, "f64", "sum", "csr"),
    ] {
        match cli(&mpirun, k, dtype, dup, layout) {
            Ok(()) => println!("test mpi cli {dtype} {dup} {layout} x{k} ... ok"),
            Err(e) => failed.push(format!("cli {dtype} {dup} {layout} with {k} ranks: {e}")),
        }
    }
    if !failed.is_empty() {
        eprintln!("FAILED: {failed:?}");
        std::process::exit(1);
    }
}
