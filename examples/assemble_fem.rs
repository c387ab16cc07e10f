//! Assemble the stiffness matrix of a 3D finite-element model with
//! coo-assembler, then check it with the reader.
//!
//! A structured hexahedral mesh (slightly distorted, so that every element
//! differs) of trilinear Q1 elements; element matrices by 2x2x2 Gauss
//! quadrature, for the Laplace operator (1 dof per node) or linear
//! elasticity (3 dofs per node). Every thread computes its share of the
//! elements and pushes their dense element matrices through its own
//! pusher, under a memory budget smaller than the contributions so that
//! runs spill to disk and are merged. The file is then reopened and checked
//! against what physics says: the matrix is symmetric and its rows sum to
//! zero (constants, or rigid translations, are in its null space).
//!
//! ```text
//! cargo run --release --example assemble_fem                 # 56^3 Laplace, 64 MiB budget
//! cargo run --release --example assemble_fem -- --n 80 --budget 128MiB --threads 2
//! cargo run --release --example assemble_fem -- --n 80 --threads 2 --pushers 8
//! cargo run --release --example assemble_fem -- --elasticity --n 30
//! ```

use coo_assembler::HurrayFile;
use coo_assembler::progress::Progress;
use coo_assembler::vocab::parse_size;
use coo_assembler::{AssembleOptions, Builder, DType, Value};
use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

struct Args {
    n: usize,
    budget: u64,
    threads: usize,
    /// Pushing threads; `None`: as many as `threads`.
    pushers: Option<usize>,
    elasticity: bool,
    fast_sums: bool,
    layout: coo_assembler::options::OutputLayout,
    output: std::path::PathBuf,
    keep: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        n: 56,
        budget: 64 << 20,
        threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        pushers: None,
        elasticity: false,
        fast_sums: false,
        layout: coo_assembler::options::OutputLayout::Coo,
        output: std::env::temp_dir().join(format!("assemble_fem-{}.hrry", std::process::id())),
        keep: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--n" => a.n = val()?.parse().map_err(|e| format!("--n: {e}"))?,
            "--budget" => a.budget = parse_size(&val()?).map_err(|e| e.to_string())?,
            "--threads" => a.threads = val()?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--pushers" => a.pushers = Some(val()?.parse().map_err(|e| format!("--pushers: {e}"))?),
            "--elasticity" => a.elasticity = true,
            "--fast-sums" => a.fast_sums = true,
            "--layout" => {
                a.layout = val()?
                    .parse()
                    .map_err(|e: coo_assembler::Error| e.to_string())?
            }
            "--output" => {
                a.output = val()?.into();
                a.keep = true;
            }
            "-h" | "--help" => {
                println!(
                    "assemble_fem: assemble the stiffness matrix of a 3D Q1 finite-element mesh (a cube of
n^3 hexahedra) under a memory budget, then check it against an in-memory reference.

usage: cargo run --release --example assemble_fem -- [OPTIONS]

  --n N            elements per edge of the cube (default 56: 1.12e7 contributions, 1.01e8 with --elasticity)
  --budget SIZE    memory budget for the assembler's buffers (default 64MiB;
                   sizes such as 64MiB, 1.5GiB, 1e9)
  --threads N      threads (default: every core)
  --pushers N      pushing threads, each with a pusher of its own (default: as
                   many as --threads; any number works, they share the budget)
  --elasticity     3 dofs per node (linear elasticity) instead of Poisson
  --fast-sums      add duplicates in arrival order (faster, not bit-reproducible)
  --layout L       coo (default), csr or csc
  --output FILE    keep the matrix in FILE (default: a temporary file, removed);
                   then try: coo-assembler info FILE; coo-assembler spy FILE --out K.png
  -h, --help       this text"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if a.n == 0 {
        return Err("--n must be at least 1".into());
    }
    if a.pushers == Some(0) {
        return Err("--pushers must be at least 1".into());
    }
    Ok(a)
}

/// Corner signs of the reference hexahedron, in the usual node order.
pub const CORNERS: [[f64; 3]; 8] = [
    [-1., -1., -1.],
    [1., -1., -1.],
    [1., 1., -1.],
    [-1., 1., -1.],
    [-1., -1., 1.],
    [1., -1., 1.],
    [1., 1., 1.],
    [-1., 1., 1.],
];

/// Gradients of the 8 shape functions in physical space at one Gauss
/// point, and the Jacobian determinant.
fn gradients(x: &[[f64; 3]; 8], xi: [f64; 3]) -> ([[f64; 3]; 8], f64) {
    let mut dref = [[0.0; 3]; 8];
    for (a, c) in CORNERS.iter().enumerate() {
        let f = |d: usize| 1.0 + c[d] * xi[d];
        dref[a] = [
            c[0] * f(1) * f(2) / 8.0,
            c[1] * f(0) * f(2) / 8.0,
            c[2] * f(0) * f(1) / 8.0,
        ];
    }
    // J[i][j] = d x_i / d xi_j
    let mut j = [[0.0; 3]; 3];
    for a in 0..8 {
        for r in 0..3 {
            for c in 0..3 {
                j[r][c] += x[a][r] * dref[a][c];
            }
        }
    }
    let det = j[0][0] * (j[1][1] * j[2][2] - j[1][2] * j[2][1])
        - j[0][1] * (j[1][0] * j[2][2] - j[1][2] * j[2][0])
        + j[0][2] * (j[1][0] * j[2][1] - j[1][1] * j[2][0]);
    // Inverse transpose times the reference gradient.
    let inv = [
        [
            (j[1][1] * j[2][2] - j[1][2] * j[2][1]) / det,
            (j[0][2] * j[2][1] - j[0][1] * j[2][2]) / det,
            (j[0][1] * j[1][2] - j[0][2] * j[1][1]) / det,
        ],
        [
            (j[1][2] * j[2][0] - j[1][0] * j[2][2]) / det,
            (j[0][0] * j[2][2] - j[0][2] * j[2][0]) / det,
            (j[0][2] * j[1][0] - j[0][0] * j[1][2]) / det,
        ],
        [
            (j[1][0] * j[2][1] - j[1][1] * j[2][0]) / det,
            (j[0][1] * j[2][0] - j[0][0] * j[2][1]) / det,
            (j[0][0] * j[1][1] - j[0][1] * j[1][0]) / det,
        ],
    ];
    let mut g = [[0.0; 3]; 8];
    for a in 0..8 {
        for d in 0..3 {
            g[a][d] = (0..3).map(|k| inv[k][d] * dref[a][k]).sum();
        }
    }
    (g, det)
}

fn gauss_points() -> [[f64; 3]; 8] {
    let p = 1.0 / 3f64.sqrt();
    let mut q = [[0.0; 3]; 8];
    for (i, c) in CORNERS.iter().enumerate() {
        q[i] = [c[0] * p, c[1] * p, c[2] * p];
    }
    q
}

/// Laplace element matrix: K_ab = sum_q w det (grad N_a . grad N_b).
pub fn laplace(x: &[[f64; 3]; 8], out: &mut Vec<f64>) {
    out.clear();
    out.resize(64, 0.0);
    for xi in gauss_points() {
        let (g, det) = gradients(x, xi);
        for a in 0..8 {
            for b in 0..8 {
                out[a * 8 + b] += det * (g[a][0] * g[b][0] + g[a][1] * g[b][1] + g[a][2] * g[b][2]);
            }
        }
    }
}

/// Isotropic linear elasticity (E = 1, nu = 0.3), dofs ordered node-major.
pub fn elasticity(x: &[[f64; 3]; 8], out: &mut Vec<f64>) {
    let (e, nu) = (1.0, 0.3);
    let lambda = e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu));
    let mu = e / (2.0 * (1.0 + nu));
    out.clear();
    out.resize(24 * 24, 0.0);
    for xi in gauss_points() {
        let (g, det) = gradients(x, xi);
        for a in 0..8 {
            for b in 0..8 {
                for i in 0..3 {
                    for k in 0..3 {
                        // a(u, v) = lambda div u div v + mu (grad u + grad u^T) : grad v
                        let mut v = lambda * g[a][i] * g[b][k] + mu * g[a][k] * g[b][i];
                        if i == k {
                            v += mu * (0..3).map(|d| g[a][d] * g[b][d]).sum::<f64>();
                        }
                        out[(a * 3 + i) * 24 + b * 3 + k] += det * v;
                    }
                }
            }
        }
    }
    // The exact matrix is symmetric; the products above round differently
    // for (p, q) and (q, p), so mirror the upper triangle.
    for p in 0..24 {
        for q in p + 1..24 {
            out[q * 24 + p] = out[p * 24 + q];
        }
    }
}

pub fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Redraw one line on standard error from `p` (the builder's progress:
/// pushes, merge passes, the final merge) until `stop`; then clear it.
fn show_progress(p: &Progress, stop: &AtomicBool) {
    let mib = |b: f64| b / 1048576.0;
    while !stop.load(Ordering::Relaxed) {
        let now = p.now();
        let mut line = format!("{} {:.0} MiB", now.step.label(), mib(now.done as f64));
        if now.total > 0 {
            let pct = 100.0 * now.done.min(now.total) as f64 / now.total as f64;
            line += &format!(" of {:.0} MiB ({pct:.0} %)", mib(now.total as f64));
        }
        if let Some(rate) = now.rate() {
            line += &format!(", {:.0} MiB/s", mib(rate));
        }
        if let Some(left) = now.left() {
            line += &format!(", {:.0} s left", left.as_secs_f64());
        }
        eprint!("\r\x1b[2K{line}");
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    eprint!("\r\x1b[2K");
}

fn main() {
    if let Err(e) = run() {
        eprintln!("assemble_fem: {e}");
        std::process::exit(1);
    }
}

/// Removes the default output when the run ends, however it ends (an
/// error, a closed pipe): a 1e9 run's file is 10 GB.
struct RemoveOnDrop(Option<std::path::PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let a = parse_args()?;
    let _output = RemoveOnDrop((!a.keep).then(|| a.output.clone()));
    let n = a.n;
    let nodes_per_edge = n + 1;
    let comps = if a.elasticity { 3 } else { 1 };
    let ndof = (nodes_per_edge.pow(3) * comps) as u64;
    let elements = n * n * n;
    let per_element = (8 * comps) * (8 * comps);
    let contributions = (elements * per_element) as u64;
    println!(
        "mesh {n}x{n}x{n} Q1 hexahedra ({} problem): {elements} elements, {ndof} dofs, {contributions} contributions ({:.0} MiB as 24-byte records), budget {:.0} MiB, {} threads, {} pushers",
        if a.elasticity {
            "elasticity"
        } else {
            "Laplace"
        },
        contributions as f64 * 24.0 / 1048576.0,
        a.budget as f64 / 1048576.0,
        a.threads,
        a.pushers.unwrap_or(a.threads)
    );
    let opts = AssembleOptions {
        memory_budget: a.budget,
        threads: a.threads,
        tensor_name: "K".into(),
        exact_sums: !a.fast_sums,
        layout: a.layout,
        // Known up front here: lets the plan make longer chunks when the
        // contributions will spill (fewer runs to merge).
        expected_contributions: Some(contributions),
        ..AssembleOptions::default()
    };
    let t0 = Instant::now();
    let progress = opts.progress.clone();
    let mut builder = Builder::new(&[ndof, ndof], DType::F64, opts)?;
    // A progress line on a terminal while the pushes and finish run.
    let shown = Arc::new(AtomicBool::new(false));
    let watcher = std::io::stderr().is_terminal().then(|| {
        let (p, stop) = (progress.clone(), shown.clone());
        std::thread::spawn(move || show_progress(&p, &stop))
    });
    let h = 1.0 / n as f64;
    // Node coordinates with a smooth distortion, so elements differ.
    let coord = |i: usize, j: usize, k: usize| -> [f64; 3] {
        let (x, y, z) = (i as f64 * h, j as f64 * h, k as f64 * h);
        let s = 0.15 * h;
        [
            x + s * (7.0 * y).sin() * (3.0 * z).cos(),
            y + s * (5.0 * z).sin() * (2.0 * x).cos(),
            z + s * (4.0 * x).sin() * (6.0 * y).cos(),
        ]
    };
    let node =
        |i: usize, j: usize, k: usize| (i + nodes_per_edge * (j + nodes_per_edge * k)) as u64;
    let threads = a.pushers.unwrap_or(a.threads).max(1);
    std::thread::scope(|s| -> Result<(), coo_assembler::Error> {
        let mut handles = Vec::new();
        for t in 0..threads {
            let mut p = builder.pusher()?;
            handles.push(s.spawn(move || -> Result<(), coo_assembler::Error> {
                let mut ke = Vec::new();
                let mut dofs = vec![0u64; 8 * comps];
                // Slabs of the mesh per thread: elements in mesh order, the
                // order an FE code visits them.
                for k in (t * n / threads)..((t + 1) * n / threads) {
                    for j in 0..n {
                        for i in 0..n {
                            let mut x = [[0.0; 3]; 8];
                            for (c, off) in CORNERS.iter().enumerate() {
                                let (ii, jj, kk) = (
                                    i + (off[0] > 0.0) as usize,
                                    j + (off[1] > 0.0) as usize,
                                    k + (off[2] > 0.0) as usize,
                                );
                                x[c] = coord(ii, jj, kk);
                                for d in 0..comps {
                                    dofs[c * comps + d] =
                                        node(ii, jj, kk) * comps as u64 + d as u64;
                                }
                            }
                            if comps == 3 {
                                elasticity(&x, &mut ke);
                            } else {
                                laplace(&x, &mut ke);
                            }
                            p.push_element(&dofs, &ke)?;
                        }
                    }
                }
                Ok(())
            }));
        }
        for h in handles {
            h.join()
                .map_err(|_| coo_assembler::Error::Poisoned("pushing thread panicked"))??;
        }
        Ok(())
    })?;
    let s = builder.finish(&a.output);
    shown.store(true, Ordering::Relaxed);
    if let Some(w) = watcher {
        let _ = w.join();
    }
    let s = s?;
    let elapsed = t0.elapsed().as_secs_f64();
    println!(
        "assembled {} contributions into nnz {} in {elapsed:.2} s ({:.1} M contributions/s)",
        s.contributions,
        s.nnz,
        s.contributions as f64 / elapsed / 1e6
    );
    println!(
        "  runs {} ({} spilled, {:.1} MiB, {:.2} B/contribution), merge passes {} (the last in {} key ranges); phases: ingest {:.2} s, sort {:.2} s (threads), merge {:.2} s, write {:.2} s",
        s.runs,
        s.runs_spilled,
        s.bytes_spilled as f64 / 1048576.0,
        s.bytes_spilled as f64 / s.contributions.max(1) as f64,
        s.merge_passes,
        s.merge_ranges.max(1),
        s.time_ingest.as_secs_f64(),
        s.time_sort.as_secs_f64(),
        s.time_merge.as_secs_f64(),
        s.time_write.as_secs_f64()
    );
    println!(
        "  peak buffers {:.1} MiB of a {:.1} MiB budget; process peak RSS {}",
        s.peak_buffer_bytes as f64 / 1048576.0,
        s.memory_budget as f64 / 1048576.0,
        peak_rss_mib().map_or("unknown".into(), |m| format!("{m:.1} MiB"))
    );
    let parts: Vec<String> = s
        .budget_parts
        .iter()
        .map(|(part, bytes)| format!("{part} {:.1} MiB", *bytes as f64 / 1048576.0))
        .collect();
    println!("  the budget's parts: {}", parts.join(", "));
    if s.contributions != contributions {
        return Err(format!(
            "{} contributions arrived, {contributions} were pushed",
            s.contributions
        )
        .into());
    }

    // Check the physics on the file as a reader sees it.
    let t1 = Instant::now();
    let file = HurrayFile::open(&a.output)?;
    // Any layout: CSC is walked column by column, whose sums equal the row
    // sums of this symmetric matrix.
    let k = file.tensor_view("K")?;
    let major = k.layout().major_dim();
    let problems = k.verify();
    if !problems.is_empty() {
        return Err(format!(
            "verify found {} problems, first: {}",
            problems.len(),
            problems[0]
        )
        .into());
    }
    let mut asym = 0u64;
    let mut worst_row = 0.0f64;
    let (mut row, mut sum, mut scale) = (0u64, 0.0f64, 0.0f64);
    let mut close_row = |sum: f64, scale: f64| {
        if scale > 0.0 {
            worst_row = worst_row.max(sum.abs() / scale);
        }
    };
    // Row sums cover every entry; the symmetry lookups cover every entry up
    // to 1e7 and an evenly spread sample beyond (a lookup costs ~1 us).
    let stride = k.nnz().div_ceil(10_000_000).max(1);
    let mut checked = 0u64;
    let mut n = 0u64;
    k.try_for_each(|idx, v| -> Result<(), Box<dyn std::error::Error>> {
        let Value::Float(v) = v else {
            return Err("not a float tensor".into());
        };
        if idx[major] != row {
            close_row(sum, scale);
            row = idx[major];
            sum = 0.0;
            scale = 0.0;
        }
        sum += v;
        scale = scale.max(v.abs());
        if n % stride == 0 && idx[0] != idx[1] {
            checked += 1;
            if k.get(&[idx[1], idx[0]])? != Value::Float(v) {
                asym += 1;
            }
        }
        n += 1;
        Ok(())
    })?;
    close_row(sum, scale);
    println!(
        "checked in {:.2} s: verify OK, {} asymmetric of {checked} off-diagonal entries looked up{}, largest |row sum| / max|row entry| = {worst_row:.2e}",
        t1.elapsed().as_secs_f64(),
        asym,
        if stride > 1 {
            format!(" (every {stride}th)")
        } else {
            String::new()
        }
    );
    if a.keep {
        println!("kept {}", a.output.display());
    }
    if asym > 0 {
        return Err("the assembled matrix is not symmetric".into());
    }
    if worst_row > 1e-9 {
        return Err(format!("row sums are not zero (worst {worst_row:.2e})").into());
    }
    println!("OK: symmetric, zero row sums");
    Ok(())
}
