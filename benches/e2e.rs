//! End-to-end harness: bin file on disk -> sorted, summed result, one child
//! process per mode so that peak RSS (`ru_maxrss` from `wait4`) is per mode.
//!
//! ```text
//! cargo bench --bench e2e                  # E2E_N=1e7 contributions, < 1 min
//! E2E_N=5e7 cargo bench --bench e2e        # the full run (1.2 GB per input)
//! E2E_INPUTS=fe cargo bench --bench e2e    # only the FE input (fe,rand by default)
//! E2E_REPS=3 cargo bench --bench e2e       # best wall time of 3 per mode (noisy shared machines)
//! E2E_KEEP=/some/dir E2E_GEN_ONLY=1 cargo bench --bench e2e   # just write fe.bin (+ fe.shape) for benches/compare
//! ```
//!
//! Inputs (24-byte records: u64 row, u64 col, f64 value, little endian),
//! written to a temporary directory that is deleted afterwards (kept with
//! `E2E_KEEP=dir`): `fe` (3D Q1 hex mesh in element order, 64 per element)
//! and `rand` (uniform coordinates in 2^24 x 2^24, almost no duplicates).
//! Modes: `baseline` (read the file into a Vec, `sort_unstable_by_key`,
//! naive-sum combine, write the result unsynced), `lib` (`input::push_bin` +
//! `Builder::finish`, 2 threads), `cli` (`coo-assembler assemble --format
//! bin`, 2 threads), each at 256 MiB and 64 MiB. Every output is checked
//! against the baseline's (same coordinates; values within 1e-12 relative).

#[path = "common/child.rs"]
mod child_proc;
#[path = "common/fe.rs"]
mod fe;
use child_proc::{cpu_secs, spawn_wait4};

use coo_assembler::HurrayFile;
use coo_assembler::{AssembleOptions, Builder, DType, input};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const CHILD: &str = "--e2e-child";

fn main() {
    child_proc::dispatch(CHILD, "e2e", child, parent);
}

fn env_n() -> u64 {
    let s = std::env::var("E2E_N").unwrap_or_else(|_| "1e7".into());
    s.parse::<f64>()
        .unwrap_or_else(|_| panic!("E2E_N={s:?} is not a number")) as u64
}

fn write_bin(path: &Path, r#gen: impl FnOnce(&mut dyn FnMut(u64, u64, f64))) {
    let mut w = BufWriter::with_capacity(8 << 20, File::create(path).unwrap());
    let mut err = None;
    r#gen(&mut |r, c, v| {
        let mut rec = [0u8; 24];
        rec[..8].copy_from_slice(&r.to_le_bytes());
        rec[8..16].copy_from_slice(&c.to_le_bytes());
        rec[16..].copy_from_slice(&v.to_le_bytes());
        if let Err(e) = w.write_all(&rec) {
            err.get_or_insert(e);
        }
    });
    if let Some(e) = err {
        panic!("writing {}: {e}", path.display());
    }
    w.flush().unwrap();
}

struct Row {
    mode: String,
    budget: u64,
    wall: f64,
    rss_kib: i64,
    info: Vec<(String, String)>,
}

impl Row {
    fn get(&self, k: &str) -> Option<&str> {
        self.info
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, b)| b.as_str())
    }
}

/// User + system CPU seconds of this process so far.
fn self_cpu() -> f64 {
    // SAFETY: all-zero is a valid rusage; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer is valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    cpu_secs(&ru)
}

/// Run a child of this binary: (wall seconds, stdout, stderr, peak RSS
/// KiB as the child reported it in `peak_rss_kib`).
fn run(cmd: &mut Command) -> (f64, String, String, i64) {
    let t0 = Instant::now();
    let out = cmd.output().unwrap();
    let wall = t0.elapsed().as_secs_f64();
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    if !out.status.success() {
        panic!("{cmd:?} failed ({}):\n{o}\n{e}", out.status);
    }
    let rss = kv(&o)
        .iter()
        .find(|(k, _)| k == "peak_rss_kib")
        .map_or(-1, |(_, v)| v.parse().unwrap());
    (wall, o, e, rss)
}

/// `run` E2E_REPS times (default 1): the fastest run, with the largest peak RSS.
fn run_best(cmd: &mut Command) -> (f64, String, String, i64) {
    let reps: usize = std::env::var("E2E_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1);
    let mut best = run(cmd);
    for _ in 1..reps {
        let r = run(cmd);
        let rss = best.3.max(r.3);
        if r.0 < best.0 {
            best = r;
        }
        best.3 = rss;
    }
    best
}

/// VmHWM of this process, KiB.
fn vmhwm_kib() -> i64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(-1)
}

fn kv(out: &str) -> Vec<(String, String)> {
    out.lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

fn cli_bin() -> PathBuf {
    if let Ok(p) = std::env::var("COO_ASSEMBLER_BIN") {
        return p.into();
    }
    // The command is another crate's binary: beside this bench's own
    // directory (`target/release/deps/e2e-*` -> `target/release/`).
    let exe = std::env::current_exe().unwrap();
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("coo-assembler"))
        .unwrap();
    assert!(
        bin.is_file(),
        "{} is missing: build it first with `cargo build --release -p coo-assembler-cli` \
         (or name one with COO_ASSEMBLER_BIN)",
        bin.display()
    );
    bin
}

fn parent() {
    let n = env_n();
    let keep = std::env::var_os("E2E_KEEP").map(PathBuf::from);
    let tmp;
    let dir: PathBuf = match &keep {
        Some(d) => {
            std::fs::create_dir_all(d).unwrap();
            d.clone()
        }
        None => {
            tmp = tempfile::Builder::new()
                .prefix("coo-e2e-")
                .tempdir()
                .unwrap();
            tmp.path().to_path_buf()
        }
    };
    let nodes = fe::fe_nodes(n);
    let sets = [
        ("fe", nodes, dir.join("fe.bin")),
        ("rand", fe::RANDOM_EXTENT, dir.join("rand.bin")),
    ];
    let gen_only = std::env::var_os("E2E_GEN_ONLY").is_some();
    let t0 = Instant::now();
    write_bin(&sets[0].2, |f| fe::fe_contributions(n, f));
    std::fs::write(dir.join("fe.shape"), format!("{nodes},{nodes}\n")).unwrap();
    if gen_only {
        println!(
            "wrote {} ({n} contributions, shape {nodes}x{nodes})",
            sets[0].2.display()
        );
        return;
    }
    write_bin(&sets[1].2, |f| fe::random_contributions(n, f));
    eprintln!(
        "e2e: generated 2 x {n} contributions in {:.1} s under {}",
        t0.elapsed().as_secs_f64(),
        dir.display()
    );
    let exe = std::env::current_exe().unwrap();
    let cli = cli_bin();
    println!(
        "\n| input | mode | budget | wall s | M contrib/s | time / baseline | cpu s | cpu / baseline | peak RSS MiB | RSS - budget MiB | runs (spilled) | passes | spilled B/contrib | ingest / sort(cpu) / merge / write s |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let only = std::env::var("E2E_INPUTS").unwrap_or_else(|_| "fe,rand".into());
    for (name, extent, input) in &sets {
        if !only.split(',').any(|o| o == *name) {
            continue;
        }
        let shape = format!("{extent},{extent}");
        let mut rows = Vec::new();
        let base_out = dir.join(format!("{name}.baseline.out"));
        let (wall, out, _, rss) = run_best(
            Command::new(&exe)
                .args([CHILD, "baseline"])
                .arg(input)
                .arg(&base_out),
        );
        rows.push(Row {
            mode: "baseline".into(),
            budget: 0,
            wall,
            rss_kib: rss,
            info: kv(&out),
        });
        for budget in [256u64 << 20, 64 << 20] {
            let out_path = dir.join(format!("{name}.lib.hrry"));
            let (wall, out, _, rss) = run_best(
                Command::new(&exe)
                    .args([CHILD, "lib"])
                    .arg(input)
                    .arg(&shape)
                    .arg(budget.to_string())
                    .arg(&out_path)
                    .arg(&dir),
            );
            rows.push(Row {
                mode: "lib".into(),
                budget,
                wall,
                rss_kib: rss,
                info: kv(&out),
            });
            check(&base_out, &out_path, name, "lib");
            std::fs::remove_file(&out_path).unwrap();
            let out_path = dir.join(format!("{name}.cli.hrry"));
            let (wall, out, err, rss) = run_best(
                Command::new(&exe)
                    .args([CHILD, "cli"])
                    .arg(&cli)
                    .args([
                        "assemble",
                        "--dtype",
                        "f64",
                        "--format",
                        "bin",
                        "--threads",
                        "2",
                        "--shape",
                    ])
                    .arg(&shape)
                    .arg("--input")
                    .arg(input)
                    .arg("--memory-budget")
                    .arg(format!("{}MiB", budget >> 20))
                    .arg("--temp-dir")
                    .arg(&dir)
                    .arg("--output")
                    .arg(&out_path),
            );
            eprintln!("e2e: cli: {}", err.trim());
            rows.push(Row {
                mode: "cli".into(),
                budget,
                wall,
                rss_kib: rss,
                info: parse_cli(&err).into_iter().chain(kv(&out)).collect(),
            });
            check(&base_out, &out_path, name, "cli");
            std::fs::remove_file(&out_path).unwrap();
        }
        std::fs::remove_file(&base_out).unwrap();
        let base = rows[0].wall;
        let cpu = |r: &Row| {
            r.get("cpu_s")
                .and_then(|c| c.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        let base_cpu = cpu(&rows[0]);
        for r in &rows {
            let mib = r.rss_kib as f64 / 1024.0;
            let g = |k: &str| r.get(k).unwrap_or("-").to_string();
            let spilled_per = r
                .get("bytes_spilled")
                .and_then(|b| b.parse::<f64>().ok())
                .map_or("-".into(), |b| format!("{:.2}", b / n as f64));
            println!(
                "| {name} | {} | {} | {:.2} | {:.1} | {:.2} | {:.2} | {:.2} | {:.0} | {} | {} | {} | {} | {} |",
                r.mode,
                if r.budget == 0 {
                    "-".into()
                } else {
                    format!("{} MiB", r.budget >> 20)
                },
                r.wall,
                n as f64 / r.wall / 1e6,
                r.wall / base,
                cpu(r),
                cpu(r) / base_cpu,
                mib,
                if r.budget == 0 {
                    "-".into()
                } else {
                    format!("{:+.0}", mib - (r.budget >> 20) as f64)
                },
                if r.budget == 0 {
                    "-".into()
                } else {
                    format!("{} ({})", g("runs"), g("runs_spilled"))
                },
                g("merge_passes"),
                spilled_per,
                if r.mode == "lib" {
                    format!(
                        "{} / {} / {} / {}",
                        g("time_ingest"),
                        g("time_sort"),
                        g("time_merge"),
                        g("time_write")
                    )
                } else if r.mode == "baseline" {
                    format!(
                        "read {} sort {} combine {} write {}",
                        g("t_read"),
                        g("t_sort"),
                        g("t_combine"),
                        g("t_write")
                    )
                } else {
                    "-".into()
                },
            );
        }
    }
    if keep.is_none() {
        for (_, _, p) in &sets {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// "(R runs, S spilled, P merge passes, B spilled)" from the CLI summary.
fn parse_cli(err: &str) -> Vec<(String, String)> {
    let mut v = Vec::new();
    if let Some(i) = err.find(" runs, ") {
        let head = &err[..i];
        let runs = head.rsplit('(').next().unwrap_or("");
        v.push(("runs".into(), runs.to_string()));
        let rest: Vec<&str> = err[i + 7..].splitn(3, ' ').collect();
        if let Some(s) = rest.first() {
            v.push(("runs_spilled".into(), s.to_string()));
        }
        if let Some(j) = err.find(" merge passes") {
            let p = err[..j].rsplit(' ').next().unwrap_or("");
            v.push(("merge_passes".into(), p.to_string()));
        }
    }
    v
}

fn read_records(path: &Path) -> Vec<[u64; 3]> {
    const {
        assert!(
            cfg!(target_endian = "little"),
            "bin records are little endian"
        )
    };
    let len = std::fs::metadata(path).unwrap().len() as usize;
    let mut v = vec![[0u64; 3]; len / 24];
    File::open(path)
        .unwrap()
        .read_exact(bytemuck::cast_slice_mut(&mut v))
        .unwrap();
    v
}

fn check(base: &Path, out: &Path, name: &str, mode: &str) {
    let b = read_records(base);
    let f = HurrayFile::open(out).unwrap();
    let t = f.only_tensor().unwrap();
    assert_eq!(
        t.nnz(),
        b.len() as u64,
        "{name}/{mode}: nnz differs from the baseline"
    );
    let idx = t.indices();
    let vals = t.values::<f64>().unwrap();
    let scale = b
        .iter()
        .map(|r| f64::from_bits(r[2]).abs())
        .fold(0.0, f64::max);
    let (mut differ, mut max_diff) = (0u64, 0.0f64);
    for (i, r) in b.iter().enumerate() {
        assert_eq!(
            [idx[2 * i], idx[2 * i + 1]],
            [r[0], r[1]],
            "{name}/{mode}: coordinate {i} differs"
        );
        let (x, y) = (vals[i], f64::from_bits(r[2]));
        if x.to_bits() != y.to_bits() {
            differ += 1;
            max_diff = max_diff.max((x - y).abs());
            assert!(
                (x - y).abs() <= 1e-12 * (y.abs() + scale),
                "{name}/{mode}: value {i}: {x} vs naive {y}"
            );
        }
    }
    eprintln!(
        "e2e: {name}/{mode}: nnz {} equal; {differ} values differ from the naive sum in the last bits (max |diff| {max_diff:.2e}, max |value| {scale:.2e})",
        b.len()
    );
}

fn child(args: &[String]) {
    let t = Instant::now();
    match args[0].as_str() {
        "baseline" => {
            let mut v = read_records(Path::new(&args[1]));
            let t_read = t.elapsed().as_secs_f64();
            v.sort_unstable_by_key(|r| (r[0], r[1]));
            let t_sort = t.elapsed().as_secs_f64();
            let mut w = 0usize;
            for i in 0..v.len() {
                if w > 0 && v[w - 1][0] == v[i][0] && v[w - 1][1] == v[i][1] {
                    v[w - 1][2] = (f64::from_bits(v[w - 1][2]) + f64::from_bits(v[i][2])).to_bits();
                } else {
                    v[w] = v[i];
                    w += 1;
                }
            }
            v.truncate(w);
            let t_combine = t.elapsed().as_secs_f64();
            File::create(&args[2])
                .unwrap()
                .write_all(bytemuck::cast_slice(&v))
                .unwrap();
            let t_write = t.elapsed().as_secs_f64();
            println!("nnz {w}");
            println!("t_read {t_read:.2}");
            println!("t_sort {:.2}", t_sort - t_read);
            println!("t_combine {:.2}", t_combine - t_sort);
            println!("t_write {:.2}", t_write - t_combine);
        }
        "lib" => {
            let shape: Vec<u64> = args[2].split(',').map(|x| x.parse().unwrap()).collect();
            let opts = AssembleOptions {
                memory_budget: args[3].parse().unwrap(),
                threads: 2,
                temp_dir: Some(PathBuf::from(&args[5])),
                ..AssembleOptions::default()
            };
            let mut b = Builder::new(&shape, DType::F64, opts).unwrap();
            let f = File::open(&args[1]).unwrap();
            input::push_bin(&mut b, f, 2, DType::F64, &args[1], &mut |_| {}).unwrap();
            let s = b.finish(&args[4]).unwrap();
            println!("nnz {}", s.nnz);
            println!("runs {}", s.runs);
            println!("runs_spilled {}", s.runs_spilled);
            println!("merge_passes {}", s.merge_passes);
            println!("bytes_spilled {}", s.bytes_spilled);
            println!("peak_buffer_bytes {}", s.peak_buffer_bytes);
            println!("time_ingest {:.2}", s.time_ingest.as_secs_f64());
            println!("time_sort {:.2}", s.time_sort.as_secs_f64());
            println!("time_merge {:.2}", s.time_merge.as_secs_f64());
            println!("time_write {:.2}", s.time_write.as_secs_f64());
        }
        "cli" => {
            // Wall time includes this wrapper's spawn (about a millisecond).
            let (status, rss, cpu) = spawn_wait4(Command::new(&args[1]).args(&args[2..]));
            assert!(
                libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                "the CLI failed: status {status}"
            );
            println!("peak_rss_kib {rss}");
            println!("cpu_s {cpu:.2}");
            return;
        }
        m => panic!("unknown child mode {m}"),
    }
    println!("peak_rss_kib {}", vmhwm_kib());
    println!("cpu_s {:.2}", self_cpu());
}
