//! CSF end to end (issue 41): the P1 triple-product tensor of a 2D
//! triangle mesh, `T[i, j, k] = ∫ φ_i ∇φ_j · ∇φ_k`, 27 contributions per
//! triangle in element order, assembled out of core into COO and into CSF
//! (identity mode order) at the same budget, each in a child process of
//! its own so that its peak RSS (`ru_maxrss` from `wait4`) and CPU seconds
//! are its own; then `ttv` along the leaf level of the CSF file against a
//! pass that only reads the buffers `ttv` reads (the floor, warm).
//!
//! ```text
//! cargo bench -p coo-assembler-benches --bench csf             # CSF_N=1e7
//! CSF_N=1e8 CSF_BUDGET=256MiB cargo bench -p coo-assembler-benches --bench csf
//! CSF_REPS=3 ...                                                # best of 3 per mode
//! ```

#[path = "common/child.rs"]
mod child_proc;
use child_proc::spawn_wait4;

use coo_assembler::options::OutputLayout;
use coo_assembler::read::Tensor;
use coo_assembler::{AssembleOptions, Builder, DType, HurrayFile};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const CHILD: &str = "--csf-child";

fn main() {
    child_proc::dispatch(CHILD, "csf", child, parent);
}

fn env_f(name: &str, default: &str) -> f64 {
    let s = std::env::var(name).unwrap_or_else(|_| default.into());
    s.parse::<f64>()
        .unwrap_or_else(|_| panic!("{name}={s:?} is not a number"))
}

/// The mesh's side in squares for about `n` contributions (54 per square).
fn side(n: f64) -> u64 {
    ((n / 54.0).sqrt().ceil() as u64).max(1)
}

/// Every contribution of the triple-product tensor of an `m x m` grid of
/// squares, each cut into two triangles, in element order: `f(batch of
/// coordinates (rank 3, flat), batch of values)`.
fn triple_product(m: u64, mut f: impl FnMut(&[u64], &[f64])) {
    let nv = m + 1;
    let (mut idx, mut vals) = (
        Vec::with_capacity(3 * 27 * 1024),
        Vec::with_capacity(27 * 1024),
    );
    let h = 1.0 / m as f64;
    for y in 0..m {
        for x in 0..m {
            let v = |dx: u64, dy: u64| (y + dy) * nv + x + dx;
            let p = |dx: u64, dy: u64| [(x + dx) as f64 * h, (y + dy) as f64 * h];
            // A coefficient per square, so that values differ.
            let c = 1.0 + ((x * 7 + y * 13) % 17) as f64 / 34.0;
            for tri in [
                [(v(0, 0), p(0, 0)), (v(1, 0), p(1, 0)), (v(1, 1), p(1, 1))],
                [(v(0, 0), p(0, 0)), (v(1, 1), p(1, 1)), (v(0, 1), p(0, 1))],
            ] {
                let [(a, pa), (b, pb), (cc, pc)] = tri;
                let det = (pb[0] - pa[0]) * (pc[1] - pa[1]) - (pc[0] - pa[0]) * (pb[1] - pa[1]);
                let area = 0.5 * det.abs();
                // Gradients of the barycentric functions.
                let g = [
                    [(pb[1] - pc[1]) / det, (pc[0] - pb[0]) / det],
                    [(pc[1] - pa[1]) / det, (pa[0] - pc[0]) / det],
                    [(pa[1] - pb[1]) / det, (pb[0] - pa[0]) / det],
                ];
                let ids = [a, b, cc];
                for i in 0..3 {
                    for j in 0..3 {
                        for k in 0..3 {
                            let gjk = g[j][0] * g[k][0] + g[j][1] * g[k][1];
                            idx.extend_from_slice(&[ids[i], ids[j], ids[k]]);
                            vals.push(c * area / 3.0 * gjk);
                        }
                    }
                }
            }
            if vals.len() >= 27 * 1000 {
                f(&idx, &vals);
                idx.clear();
                vals.clear();
            }
        }
    }
    f(&idx, &vals);
}

fn child(args: &[String]) {
    let (mode, m, budget, out) = (
        args[0].as_str(),
        args[1].parse::<u64>().unwrap(),
        args[2].parse::<u64>().unwrap(),
        PathBuf::from(&args[3]),
    );
    let nv = (m + 1) * (m + 1);
    let shape = [nv, nv, nv];
    match mode {
        "coo" | "csf" => {
            let opts = AssembleOptions {
                memory_budget: budget,
                threads: 2,
                layout: if mode == "csf" {
                    OutputLayout::Csf
                } else {
                    OutputLayout::Coo
                },
                temp_dir: out.parent().map(Path::to_path_buf),
                ..AssembleOptions::default()
            };
            let t0 = Instant::now();
            let mut b = Builder::new(&shape, DType::F64, opts).unwrap();
            let mut vals = Vec::new();
            triple_product(m, |idx, v| {
                vals.clear();
                vals.extend(v.iter().map(|&x| coo_assembler::Value::Float(x)));
                b.push_many(idx, &vals).unwrap();
            });
            let s = b.finish(&out).unwrap();
            println!(
                "secs={:.3} contributions={} nnz={} bytes={} runs={}",
                t0.elapsed().as_secs_f64(),
                s.contributions,
                s.nnz,
                s.file_bytes,
                s.runs_spilled
            );
        }
        "ttv" => {
            // Cold, as the out-of-core matvec is measured: the file's pages
            // dropped from the page cache before each pass.
            let drop_cache = || {
                use std::os::fd::AsRawFd;
                let f = std::fs::File::open(&out).unwrap();
                // SAFETY: a valid descriptor; advice only.
                unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            };
            // The floor: the whole file read in 8 MiB chunks.
            drop_cache();
            let t0 = Instant::now();
            let mut f = std::fs::File::open(&out).unwrap();
            let mut buf = vec![0u8; 8 << 20];
            let mut bytes = 0u64;
            loop {
                let n = std::io::Read::read(&mut f, &mut buf).unwrap();
                if n == 0 {
                    break;
                }
                bytes += n as u64;
            }
            let fl = t0.elapsed().as_secs_f64();
            drop_cache();
            let x: Vec<f64> = (0..nv).map(|k| 1.0 + (k % 11) as f64).collect();
            let y = out.with_extension("ttv.hrry");
            let opts = AssembleOptions {
                memory_budget: budget,
                ..AssembleOptions::default()
            };
            let t0 = Instant::now();
            let file = HurrayFile::open(&out).unwrap();
            let t = file.only_tensor_view().unwrap();
            assert!(matches!(t, Tensor::Csf(_)), "CSF expected");
            let r = coo_assembler::ttv::ttv(&t, 2, &x, &y, &opts).unwrap();
            let tt = t0.elapsed().as_secs_f64();
            let b = bytes as f64;
            println!(
                "read_secs={fl:.3} ttv_secs={tt:.3} streamed={} nnz_out={} file_bytes={bytes} read_mbs={:.0} ttv_mbs={:.0} ttv/read={:.2}",
                r.streamed,
                r.nnz,
                b / fl / 1e6,
                b / tt / 1e6,
                fl / tt
            );
            let _ = std::fs::remove_file(&y);
        }
        other => panic!("mode {other}"),
    }
}

fn parent() {
    let n = env_f("CSF_N", "1e7");
    let budget = coo_assembler::vocab::parse_size(
        &std::env::var("CSF_BUDGET").unwrap_or_else(|_| "256MiB".into()),
    )
    .unwrap();
    let reps = env_f("CSF_REPS", "1") as usize;
    let m = side(n);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let cpu = child_proc::cpu_model();
    println!(
        "csf bench: {} contributions (a {m} x {m} grid, {} triangles), budget {budget} B, {cpu}",
        54 * m * m,
        2 * m * m
    );
    let mut best: Vec<(String, f64, f64, i64)> = Vec::new();
    for mode in ["coo", "csf", "ttv"] {
        let out = dir.path().join(if mode == "coo" {
            "coo.hrry"
        } else {
            "csf.hrry"
        });
        let mut best_run: Option<(f64, f64, i64)> = None;
        for _ in 0..reps {
            let _ = Command::new("sync").status();
            let t0 = Instant::now();
            let mut cmd = Command::new(&exe);
            // The child prints its own line (its timings, from inside).
            cmd.args([CHILD, mode, &m.to_string(), &budget.to_string()])
                .arg(&out);
            let (status, rss, cpu) = spawn_wait4(&mut cmd);
            let wall = t0.elapsed().as_secs_f64();
            assert_eq!(status, 0, "{mode} failed");
            if best_run.as_ref().is_none_or(|b| wall < b.0) {
                best_run = Some((wall, cpu, rss));
            }
        }
        let (wall, cpu, rss) = best_run.unwrap();
        println!(
            "{mode:>4}: wall {wall:.2} s, cpu {cpu:.2} s, peak RSS {:.1} MiB (best of {reps})",
            rss as f64 / 1024.0
        );
        best.push((mode.to_string(), wall, cpu, rss));
    }
    let (coo, csf) = (&best[0], &best[1]);
    println!(
        "csf / coo: wall {:.2}x, cpu {:.2}x; csf peak RSS - budget = {:.1} MiB",
        csf.1 / coo.1,
        csf.2 / coo.2,
        csf.3 as f64 / 1024.0 - budget as f64 / 1048576.0
    );
}
