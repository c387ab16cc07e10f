//! The progress bar (issue 39): drawn on a terminal (step, bytes, rate),
//! nothing at all when standard error is not one or with `--quiet`.

use super::cli;
use std::io::Write;
use std::process::Command;

/// Random (row, column, f64) records: enough to spill and merge under a
/// small budget for about a second.
fn spilling_input(dir: &std::path::Path) -> std::path::PathBuf {
    let p = dir.join("r.bin");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..3_000_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        w.write_all(&(x % 1_000_000).to_le_bytes()).unwrap();
        w.write_all(&((x >> 20) % 1_000_000).to_le_bytes()).unwrap();
        w.write_all(&1.0f64.to_le_bytes()).unwrap();
    }
    w.flush().unwrap();
    p
}

/// Run `args` with standard error on a pseudo-terminal (`script`, in
/// every Debian); None when `script` is missing or cannot make one (a
/// sandbox without pseudo-terminals).
fn on_terminal(args: &[&str]) -> Option<String> {
    let exe = cli().exe().to_str().unwrap().to_string();
    let line = std::iter::once(exe)
        .chain(args.iter().map(|a| a.to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        eprintln!(
            "script failed ({}): {}{text}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(text)
}

#[test]
fn a_bar_on_a_terminal_and_nothing_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let input = spilling_input(dir.path());
    let out = dir.path().join("K.hrry");
    let (i, o) = (input.to_str().unwrap(), out.to_str().unwrap());
    let args = [
        "assemble",
        "--input",
        i,
        "--shape",
        "1000000,1000000",
        "--memory-budget",
        "8MiB",
        "-o",
        o,
    ];
    // Not a terminal: the summary line only.
    let ran = cli().ok(args);
    assert!(
        !ran.stderr.contains('\r') && !ran.stderr.contains("MiB/"),
        "{}",
        ran.stderr
    );
    assert!(ran.stderr.contains("wrote"), "{}", ran.stderr);
    let Some(shown) = on_terminal(&args) else {
        eprintln!("skipped: no `script` to make a terminal");
        return;
    };
    // The steps, with bytes of a known total.
    assert!(shown.contains("reading"), "{shown}");
    assert!(shown.contains("merging"), "{shown}");
    assert!(shown.contains(" MiB/"), "{shown}");
    let mut quiet = args.to_vec();
    quiet.push("--quiet");
    let shown = on_terminal(&quiet).unwrap_or_default();
    assert!(!shown.contains("reading"), "{shown}");
    // verify draws its own.
    let shown = on_terminal(&["verify", o]).unwrap_or_default();
    assert!(shown.contains("OK"), "{shown}");
}
