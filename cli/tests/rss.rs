//! The memory contract, measured (issue 8 item 15, issue 39 item 5): the
//! peak resident set of `assemble`, `plan` and `refill` stays within its
//! memory budget plus 32 MiB, and `verify` and `dump` of a file of any size within 48 MiB,
//! with every core busy (a loaded scheduler is where a give-back that
//! lags would show). The peak is the child's own `ru_maxrss`.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

const BIN: &str = env!("CARGO_BIN_EXE_coo-assembler");
const MIB: i64 = 1024;

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

/// Spin one thread per core until dropped: the CLI's threads then share
/// the cores with as many busy ones.
struct Busy {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Busy {
    fn start() -> Busy {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 1u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(6364136223846793005) + 1);
                    }
                })
            })
            .collect();
        Busy { stop, threads }
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The binary records of a 3D Q1 mesh of `n`^3 hexahedra in element
/// order, 64 per element: the FE input the kernel and the builder both
/// meet. Rank 2: (row, column, f64); rank 3: a third index, the element's
/// node `(a + b) % 8` for its node pair `(a, b)`, so that a pair of nodes
/// meets several third indices (a rank-3 tensor with fibres of several
/// entries). Returns the node count per side.
fn write_fe(path: &std::path::Path, n: u64, rank: usize) -> u64 {
    let side = n + 1;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let mut rec = Vec::with_capacity(64 * 32);
    for e in 0..n * n * n {
        let (x, y, z) = (e % n, e / n % n, e / (n * n));
        let nodes: Vec<u64> = (0..8u64)
            .map(|k| (x + (k & 1)) + (y + (k >> 1 & 1)) * side + (z + (k >> 2)) * side * side)
            .collect();
        rec.clear();
        for (a, &i) in nodes.iter().enumerate() {
            for (b, &j) in nodes.iter().enumerate() {
                let v = if a == b { 8.0 } else { -1.0 } / (1 + e % 5) as f64;
                rec.extend_from_slice(&i.to_le_bytes());
                rec.extend_from_slice(&j.to_le_bytes());
                if rank == 3 {
                    rec.extend_from_slice(&nodes[(a + b) % 8].to_le_bytes());
                }
                rec.extend_from_slice(&v.to_le_bytes());
            }
        }
        w.write_all(&rec).unwrap();
    }
    w.flush().unwrap();
    side * side * side
}

/// Whether files `a` and `b` hold the same bytes, read in small chunks:
/// this process stays small, since a child it starts counts the parent's
/// peak in its own (the peak is the memory's, inherited at fork).
fn same_bytes(a: &str, b: &str) -> bool {
    use std::io::Read;
    let open = |p: &str| std::io::BufReader::new(std::fs::File::open(p).unwrap());
    let (mut x, mut y) = (open(a), open(b));
    let (mut bx, mut by) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let n = x.read(&mut bx).unwrap();
        if n == 0 {
            return y.read(&mut by).unwrap() == 0;
        }
        if y.read_exact(&mut by[..n]).is_err() || bx[..n] != by[..n] {
            return false;
        }
    }
}

/// `verify` and `dump` of `file` (larger than their bound) each within
/// 48 MiB; their peaks are added to `seen`.
fn verify_and_dump_within_bound(file: &str, seen: &mut Vec<String>) {
    let size = std::fs::metadata(file).unwrap().len();
    assert!(size > 48 << 20, "{size}");
    for cmd in ["verify", "dump"] {
        let (code, kib) = peak_rss(&[cmd, file]);
        assert_eq!(code, 0, "{cmd}");
        seen.push(format!("{cmd}: {} MiB", kib / MIB));
        assert!(
            kib <= 48 * MIB,
            "{cmd}: peak RSS {} MiB for a {} MB file",
            kib / MIB,
            size / 1_000_000
        );
    }
}

/// `assemble --input input --shape shape --memory-budget budget MiB -o
/// out` with `more` arguments, within the budget + 32 MiB; its peak is
/// added to `seen` under `label`.
fn assemble_within_budget(
    (input, shape, out): (&str, &str, &str),
    budget: i64,
    more: &[&str],
    label: &str,
    seen: &mut Vec<String>,
) {
    let mut args = vec!["assemble", "--input", input, "--shape", shape];
    args.extend_from_slice(more);
    args.extend_from_slice(&["-o", out]);
    within_budget(&args, budget, label, seen);
}

/// The CLI with `args` and `--memory-budget budget MiB`, within the budget
/// + 32 MiB; its peak is added to `seen` under `label`.
fn within_budget(args: &[&str], budget: i64, label: &str, seen: &mut Vec<String>) {
    let b = format!("{budget}MiB");
    let mut args = args.to_vec();
    args.extend_from_slice(&["--memory-budget", &b]);
    let (code, kib) = peak_rss(&args);
    assert_eq!(code, 0, "{label} at {b}");
    seen.push(format!("{label} {b}: {} MiB", kib / MIB));
    assert!(
        kib <= (budget + 32) * MIB,
        "{label} at {b}: peak RSS {} MiB, over the budget + 32 MiB",
        kib / MIB
    );
}

#[test]
fn assemble_plan_refill_verify_and_dump_stay_within_the_contract_on_busy_cores() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fe.bin");
    // 44^3 elements: 5.45 M records (131 MB), 2.46 M entries (59 MB out):
    // both far above every bound checked.
    let nodes = write_fe(&input, 44, 2);
    let shape = format!("{nodes},{nodes}");
    let out = dir.path().join("K.hrry");
    let (inp, o) = (input.to_str().unwrap(), out.to_str().unwrap());
    let busy = Busy::start();
    let mut seen = Vec::new();
    for budget in [16i64, 32, 64] {
        assemble_within_budget((inp, &shape, o), budget, &[], "assemble", &mut seen);
    }
    verify_and_dump_within_bound(o, &mut seen);
    // A plan in parts and its refill, within the same contract; the
    // refill is the assembly's file, byte for byte.
    let values = dir.path().join("values.f64");
    {
        // Streamed, as `same_bytes` reads: this process stays small.
        use std::io::Read;
        let mut from = std::io::BufReader::new(std::fs::File::open(&input).unwrap());
        let mut to = std::io::BufWriter::new(std::fs::File::create(&values).unwrap());
        let mut rec = [0u8; 24];
        while from.read_exact(&mut rec).is_ok() {
            to.write_all(&rec[16..]).unwrap();
        }
        to.flush().unwrap();
    }
    let (plan, refilled) = (dir.path().join("K.plan"), dir.path().join("R.hrry"));
    let (p, v, r) = (
        plan.to_str().unwrap(),
        values.to_str().unwrap(),
        refilled.to_str().unwrap(),
    );
    for budget in [16i64, 64] {
        let plan_args = ["plan", "--input", inp, "--shape", &shape, "-o", p];
        within_budget(&plan_args, budget, "plan", &mut seen);
        within_budget(&["refill", p, v, "-o", r], budget, "refill", &mut seen);
        assemble_within_budget((inp, &shape, o), budget, &[], "assemble", &mut seen);
        assert!(same_bytes(r, o), "refill at {budget} MiB");
    }
    drop(busy);
    eprintln!("peak RSS with every core busy: {}", seen.join(", "));
}

#[test]
fn a_csf_tensor_is_assembled_verified_and_dumped_within_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("fe3.bin");
    // 40^3 elements: 4.1 M rank-3 records (131 MB), about 1.9 M entries
    // (over 48 MB of CSF out); the levels' lengths are known only at the
    // end, so they spill to side files within the budget.
    let nodes = write_fe(&input, 40, 3);
    let shape = format!("{nodes},{nodes},{nodes}");
    let out = dir.path().join("T.hrry");
    let (inp, o) = (input.to_str().unwrap(), out.to_str().unwrap());
    let busy = Busy::start();
    let mut seen = Vec::new();
    for order in ["0,1,2", "2,0,1"] {
        let more = ["--layout", "csf", "--mode-order", order];
        let label = format!("assemble csf ({order})");
        assemble_within_budget((inp, &shape, o), 16, &more, &label, &mut seen);
    }
    verify_and_dump_within_bound(o, &mut seen);
    drop(busy);
    eprintln!("CSF, peak RSS with every core busy: {}", seen.join(", "));
}
