//! Issue 8 item 15: `verify` and `dump` of a file much larger than their
//! bound keep a bounded peak RSS, because mapped pages behind the cursor are
//! released. Ignored by default (it writes ~500 MB); run with
//! `cargo test --release --test rss -- --ignored --nocapture`.

use coo_assembler::DType;
use coo_assembler::write::{FileWriter, WriteOptions};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_coo-assembler");

/// Run the CLI with stdout to /dev/null; its exit code and peak RSS (KiB),
/// from wait4's rusage (VmHWM of that child alone).
// wait4 reaps the child (Child::wait cannot give its rusage).
#[allow(clippy::zombie_processes)]
fn peak_rss(args: &[&str]) -> (i32, i64) {
    let child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let mut status = 0;
    // SAFETY: all-zero is a valid rusage; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our unreaped child; the pointers are to live locals.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    assert_eq!(r, pid);
    assert!(libc::WIFEXITED(status));
    (libc::WEXITSTATUS(status), ru.ru_maxrss)
}

#[test]
#[ignore = "writes a ~500 MB file; run explicitly"]
fn verify_and_dump_of_a_large_file_keep_rss_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("big.hrry");
    // 21 M entries of a rank-2 f64 tensor: 24 bytes each, ~504 MB.
    let n: u64 = 21_000_000;
    let side = 1u64 << 16;
    let mut fw = FileWriter::create(&p, WriteOptions::default()).unwrap();
    let mut t = fw.begin_tensor("coo", DType::F64, &[side, side]).unwrap();
    for k in 0..n {
        let lin = k * 200 + k % 7;
        t.push(&[lin / side, lin % side], (k % 1000) as f64 - 499.5)
            .unwrap();
    }
    t.finish().unwrap();
    fw.finish().unwrap();
    let size = std::fs::metadata(&p).unwrap().len();
    assert!(size > 500_000_000, "{size}");
    let path = p.to_str().unwrap();
    let (code, verify_kib) = peak_rss(&["verify", path]);
    assert_eq!(code, 0);
    let (code, dump_kib) = peak_rss(&["dump", path]);
    assert_eq!(code, 0);
    eprintln!(
        "file {} MB: peak RSS verify {} MiB, dump {} MiB",
        size / 1_000_000,
        verify_kib / 1024,
        dump_kib / 1024
    );
    // Far below the file size: pages behind the cursor leave the resident set.
    for (what, kib) in [("verify", verify_kib), ("dump", dump_kib)] {
        assert!(
            kib < 96 * 1024,
            "{what}: peak RSS {} MiB for a {} MB file",
            kib / 1024,
            size / 1_000_000
        );
    }
}
