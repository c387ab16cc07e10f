//! What the end-to-end harnesses share about their child processes
//! (included with `#[path]`; not a bench target itself).
#![allow(dead_code)]

use std::process::Command;

/// Spawn `cmd` and reap it with `wait4`: (exit status, ru_maxrss KiB).
/// Linux counts in a child's ru_maxrss the high-water RSS of the process it
/// was spawned from (recorded at exec), so use this only from a small
/// process (the `cli` wrapper child), never from the parent, whose RSS grows
/// while it checks outputs.
pub fn spawn_wait4(cmd: &mut Command) -> (i32, i64, f64) {
    // Reaped by wait4 below, which std's Child cannot do.
    #[allow(clippy::zombie_processes)]
    let ch = cmd.spawn().unwrap();
    let mut status = 0i32;
    // SAFETY: all-zero is a valid rusage; wait4 fills it for our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: pid is our own unreaped child; the pointers are valid.
    let r = unsafe { libc::wait4(ch.id() as i32, &mut status, 0, &mut ru) };
    assert_eq!(r, ch.id() as i32, "wait4 failed");
    (status, ru.ru_maxrss, cpu_secs(&ru))
}

/// User + system CPU seconds in `ru`.
pub fn cpu_secs(ru: &libc::rusage) -> f64 {
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// A harness's `main`: with `child_flag` among the arguments, run `child`
/// on the arguments after it (a measured child process); under `cargo
/// bench` (`--bench`), run `parent`; otherwise (built and run by `cargo
/// test --benches`) say how to run `name` and do nothing.
pub fn dispatch(child_flag: &str, name: &str, child: fn(&[String]), parent: fn()) {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == child_flag) {
        child(&args[i + 1..]);
    } else if args.iter().any(|a| a == "--bench") {
        parent();
    } else {
        println!("{name}: run with `cargo bench --bench {name}`");
    }
}

/// The CPU's model name (`/proc/cpuinfo`), for a harness's report.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default()
}
