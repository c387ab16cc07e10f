//! Issue 8 item 11: SIGINT and SIGTERM during `assemble` remove the partial
//! output and the spill directory, and exit 130 / 143.

use super::*;
use std::time::{Duration, Instant};

fn send(child: &std::process::Child, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    // SAFETY: kill() on our own child's pid, which has not been reaped yet.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
}

/// Poll `dir` until an entry whose name contains `part` appears.
fn wait_for(dir: &Path, part: &str, child: &mut std::process::Child) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(60) {
        if listing(dir).iter().any(|n| n.contains(part)) {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

fn records(n: u64, side: u64) -> Vec<u8> {
    let mut b = Vec::with_capacity(n as usize * 24);
    for k in 0..n {
        // Scattered coordinates, so runs and the output are large.
        let x = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) % (side * side);
        b.extend(bin_record_f64(x / side, x % side, 1.0));
    }
    b
}

#[test]
fn sigterm_while_reading_removes_the_spill_directory() {
    let w = Work::new();
    let out = w.out("o.hrry");
    let mut child = crate::cli()
        .command([
            "assemble",
            "--shape",
            "100000,100000",
            "--input",
            "-",
            "--memory-budget",
            "8MiB",
            "--threads",
            "1",
            "-q",
            "-o",
            s(&out),
            "--temp-dir",
            s(&w.tmp()),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut si = child.stdin.take().unwrap();
    // Feed until a run has spilled (the spill directory exists), keeping
    // stdin open so the process is mid-read when the signal comes.
    let chunk = records(100_000, 100_000);
    let t = Instant::now();
    while !listing(&w.tmp())
        .iter()
        .any(|n| n.starts_with(".coo-assembler-"))
    {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no spill directory appeared"
        );
        si.write_all(&chunk).unwrap();
    }
    send(&child, libc::SIGTERM);
    let o = child.wait_with_output().unwrap();
    drop(si);
    assert_eq!(
        o.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("terminated"));
    w.clean(&[]);
}

#[test]
fn sigint_while_writing_removes_the_partial_output() {
    let w = Work::new();
    let out = w.out("o.hrry");
    let input = w.input("big.bin", &records(3_000_000, 1 << 20));
    let mut child = crate::cli()
        .command([
            "assemble",
            "--shape",
            "1048576,1048576",
            "--input",
            s(&input),
            "--memory-budget",
            "8MiB",
            "--threads",
            "1",
            "-q",
            "-o",
            s(&out),
            "--temp-dir",
            s(&w.tmp()),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    assert!(
        wait_for(&w.root.join("out"), ".o.hrry.tmp-", &mut child),
        "the run ended before its temporary output was seen"
    );
    send(&child, libc::SIGINT);
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    w.clean(&[]);
}
