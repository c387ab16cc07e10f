//! The finite-element problem of `assemble_fem`, split across MPI ranks
//! (issue 13): rank r computes the elements of its slab of the mesh
//! (k-layers `r * n / ranks ..`) and pushes their element matrices into a
//! [`DistBuilder`]; the nodes on the planes between slabs are shared, so
//! their rows receive contributions from two ranks. `finish` routes every
//! contribution to the owner of its row, assembles each row band out of
//! core and writes one partition composite. Rank 0 then checks the physics
//! on the composite (verify, symmetry, zero row sums), and with
//! `--compare` that the composite converted to one COO is byte-identical to
//! a single-process assembly of the same elements.
//!
//! ```text
//! cargo build --release --features mpi --example assemble_fem_mpi
//! OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
//!   mpirun -n 4 --oversubscribe target/release/examples/assemble_fem_mpi -- --n 30 --compare
//! ```

#[path = "../../examples/assemble_fem.rs"]
#[allow(dead_code)]
mod fem;

use coo_assembler::{
    AssembleOptions, Builder, DType, Value, convert::ConvertOptions, options::OutputLayout,
    read::CompositeFile, vocab::parse_size,
};
use coo_assembler_mpi::{DistBuilder, DistOptions, DistSummary, RowOwnership};
use fem::{CORNERS, elasticity, laplace};
use mpi::traits::*;
use std::path::PathBuf;
use std::time::Instant;

struct Args {
    n: usize,
    budget: u64,
    threads: usize,
    elasticity: bool,
    compare: bool,
    even_rows: bool,
    no_check: bool,
    layout: OutputLayout,
    output: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        n: 30,
        budget: 64 << 20,
        threads: 1,
        elasticity: false,
        compare: false,
        even_rows: false,
        no_check: false,
        layout: OutputLayout::Coo,
        output: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--" => {}
            "--n" => a.n = val()?.parse().map_err(|e| format!("--n: {e}"))?,
            "--budget" => a.budget = parse_size(&val()?).map_err(|e| e.to_string())?,
            "--threads" => a.threads = val()?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--elasticity" => a.elasticity = true,
            "--compare" => a.compare = true,
            "--even-rows" => a.even_rows = true,
            // Skip rank 0's checks (they map and read the composite, which
            // would dominate its process-level peak RSS in measurements).
            "--no-check" => a.no_check = true,
            "--output" => a.output = Some(val()?.into()),
            "--layout" => a.layout = val()?.parse().map_err(|e| format!("--layout: {e}"))?,
            "-h" | "--help" => {
                println!(
                    "assemble_fem_mpi [--n ELEMENTS_PER_EDGE (30)] [--budget PER_RANK (64MiB)] [--threads N (1)] [--elasticity] [--compare] [--even-rows] [--no-check] [--layout coo|csr|csc (coo)] [--output FILE]"
                );
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    if a.n == 0 {
        return Err("--n must be at least 1".into());
    }
    Ok(a)
}

/// The mesh: node numbering, distorted coordinates, element dofs.
struct Mesh {
    n: usize,
    comps: usize,
}

impl Mesh {
    fn ndof(&self) -> u64 {
        ((self.n + 1).pow(3) * self.comps) as u64
    }

    /// Element (i, j, k): its dofs and element matrix.
    fn element(&self, i: usize, j: usize, k: usize, dofs: &mut [u64], ke: &mut Vec<f64>) {
        let np = self.n + 1;
        let h = 1.0 / self.n as f64;
        let mut x = [[0.0; 3]; 8];
        for (c, off) in CORNERS.iter().enumerate() {
            let (ii, jj, kk) = (
                i + (off[0] > 0.0) as usize,
                j + (off[1] > 0.0) as usize,
                k + (off[2] > 0.0) as usize,
            );
            let (px, py, pz) = (ii as f64 * h, jj as f64 * h, kk as f64 * h);
            let s = 0.15 * h;
            x[c] = [
                px + s * (7.0 * py).sin() * (3.0 * pz).cos(),
                py + s * (5.0 * pz).sin() * (2.0 * px).cos(),
                pz + s * (4.0 * px).sin() * (6.0 * py).cos(),
            ];
            let node = (ii + np * (jj + np * kk)) as u64;
            for d in 0..self.comps {
                dofs[c * self.comps + d] = node * self.comps as u64 + d as u64;
            }
        }
        if self.comps == 3 {
            elasticity(&x, ke);
        } else {
            laplace(&x, ke);
        }
    }

    /// Every element of k-layers `ks`, in mesh order.
    fn each(
        &self,
        ks: std::ops::Range<usize>,
        mut f: impl FnMut(&[u64], &[f64]) -> coo_assembler::Result<()>,
    ) -> coo_assembler::Result<()> {
        let mut ke = Vec::new();
        let mut dofs = vec![0u64; 8 * self.comps];
        for k in ks {
            for j in 0..self.n {
                for i in 0..self.n {
                    self.element(i, j, k, &mut dofs, &mut ke);
                    f(&dofs, &ke)?;
                }
            }
        }
        Ok(())
    }
}

fn main() {
    let Some(universe) = mpi::initialize() else {
        eprintln!("assemble_fem_mpi: MPI was already initialised");
        std::process::exit(1);
    };
    let world = universe.world();
    if let Err(e) = run(&world) {
        eprintln!("assemble_fem_mpi: rank {}: {e}", world.rank());
        world.abort(1);
    }
}

fn run(world: &mpi::topology::SimpleCommunicator) -> Result<(), Box<dyn std::error::Error>> {
    let a = parse_args()?;
    let (rank, ranks) = (world.rank() as usize, world.size() as usize);
    let mesh = Mesh {
        n: a.n,
        comps: if a.elasticity { 3 } else { 1 },
    };
    let ndof = mesh.ndof();
    let n = a.n;
    let output = a
        .output
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("assemble_fem_mpi.hrry"));
    let per_rank_rows: Vec<u64> = (0..ranks as u64).map(|r| r * ndof / ranks as u64).collect();
    let opts = DistOptions {
        assemble: AssembleOptions {
            memory_budget: a.budget,
            threads: a.threads,
            tensor_name: "K".into(),
            layout: a.layout,
            ..AssembleOptions::default()
        },
        rows: if a.even_rows {
            RowOwnership::Given(per_rank_rows)
        } else {
            RowOwnership::Sampled
        },
        ..DistOptions::default()
    };
    if rank == 0 {
        println!(
            "mesh {n}^3 Q1 hexahedra ({}), {ndof} dofs, {ranks} ranks, budget {:.0} MiB per rank, {} threads per rank, {} members",
            if a.elasticity {
                "elasticity"
            } else {
                "Laplace"
            },
            a.budget as f64 / 1048576.0,
            a.threads,
            a.layout
        );
    }
    world.barrier();
    let t0 = Instant::now();
    let mut b = DistBuilder::new(world, &[ndof, ndof], DType::F64, opts)?;
    let ks = rank * n / ranks..(rank + 1) * n / ranks;
    mesh.each(ks, |dofs, ke| b.push_element(dofs, ke))?;
    let s = b.finish(&output)?;
    let wall = t0.elapsed().as_secs_f64();
    report(world, &s, wall);

    if rank == 0 && !a.no_check {
        check(&output, &mesh, a.compare, a.threads, a.layout)?;
    }
    if rank == 0 {
        if a.output.is_none() {
            std::fs::remove_file(&output)?;
        } else {
            println!("kept {}", output.display());
        }
    }
    world.barrier();
    Ok(())
}

/// Gather every rank's figures on rank 0 and print them.
fn report(world: &mpi::topology::SimpleCommunicator, s: &DistSummary, wall: f64) {
    let mib = |b: u64| b as f64 / 1048576.0;
    let mine = [
        s.pushed as f64,
        s.off_rank as f64,
        s.sent as f64,
        s.received as f64,
        s.bytes_sent as f64,
        s.nnz as f64,
        s.rounds as f64,
        s.time_push.as_secs_f64(),
        s.time_ranges.as_secs_f64(),
        s.time_exchange.as_secs_f64(),
        s.time_assemble.as_secs_f64(),
        s.time_write.as_secs_f64(),
        (s.rows.end - s.rows.start) as f64,
        mib(s.peak_rss[0]),
        mib(s.peak_rss[2]),
        mib(s.peak_rss[3]),
        mib(s.peak_rss[4]),
    ];
    let k = mine.len();
    let mut all = vec![0f64; k * world.size() as usize];
    world.all_gather_into(&mine[..], &mut all[..]);
    if world.rank() != 0 {
        return;
    }
    println!(
        "rank   rows     pushed  off-rank      sent  received  bytes sent       nnz rounds  push s exch s  asm s write s | peak RSS MiB after push exch  asm write"
    );
    let (mut pushed, mut off, mut sent, mut bytes) = (0.0, 0.0, 0.0, 0.0);
    for (r, m) in all.chunks_exact(k).enumerate() {
        println!(
            "{r:>4} {:>6} {:>10} {:>9} {:>9} {:>9} {:>11} {:>9} {:>6} {:>7.2} {:>6.2} {:>6.2} {:>7.2} |                   {:>5.0} {:>5.0} {:>5.0} {:>5.0}",
            m[12],
            m[0],
            m[1],
            m[2],
            m[3],
            m[4],
            m[5],
            m[6],
            m[7],
            m[9],
            m[10],
            m[11],
            m[13],
            m[14],
            m[15],
            m[16]
        );
        pushed += m[0];
        off += m[1];
        sent += m[2];
        bytes += m[4];
    }
    println!(
        "total: {pushed} contributions, {off} off-rank ({:.2}%), {sent} records sent after combining, {bytes} bytes exchanged = {:.3} bytes per contribution; nnz {}; composite {} bytes; wall {wall:.2} s",
        100.0 * off / pushed.max(1.0),
        bytes / pushed.max(1.0),
        s.total_nnz,
        s.file_bytes
    );
}

/// Physics on the composite, and optionally the byte comparison.
fn check(
    path: &std::path::Path,
    mesh: &Mesh,
    compare: bool,
    threads: usize,
    layout: OutputLayout,
) -> Result<(), Box<dyn std::error::Error>> {
    let t = Instant::now();
    let c = CompositeFile::open(path)?;
    let problems = c.verify();
    if let Some(p) = problems.first() {
        return Err(format!("verify: {} problems, first: {p}", problems.len()).into());
    }
    let (mut row, mut sum, mut scale, mut worst) = (u64::MAX, 0.0f64, 0.0f64, 0.0f64);
    let mut asym = 0u64;
    let mut looked = 0u64;
    let stride = c.nnz().div_ceil(2_000_000).max(1);
    for (e, entry) in c.iter().enumerate() {
        let (idx, v) = entry?;
        let Value::Float(v) = v else {
            return Err("not a float tensor".into());
        };
        if idx[0] != row {
            if scale > 0.0 {
                worst = worst.max(sum.abs() / scale);
            }
            (row, sum, scale) = (idx[0], 0.0, 0.0);
        }
        sum += v;
        scale = scale.max(v.abs());
        if e as u64 % stride == 0 && idx[0] != idx[1] {
            looked += 1;
            if c.get(&[idx[1], idx[0]])? != Value::Float(v) {
                asym += 1;
            }
        }
    }
    if scale > 0.0 {
        worst = worst.max(sum.abs() / scale);
    }
    println!(
        "composite: {} members, nnz {}, verify OK, {asym} asymmetric of {looked} looked up, worst |row sum|/max|entry| {worst:.2e} ({:.2} s)",
        c.members().count(),
        c.nnz(),
        t.elapsed().as_secs_f64()
    );
    if asym > 0 || worst > 1e-9 {
        return Err("physics checks failed".into());
    }
    if compare {
        let t = Instant::now();
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        let conv = dir.join(".assemble_fem_mpi-converted.hrry");
        let single = dir.join(".assemble_fem_mpi-single.hrry");
        // In the members' layout.
        let copts = ConvertOptions {
            to: layout,
            output_name: Some("K".into()),
            threads,
            ..ConvertOptions::default()
        };
        coo_assembler::convert(path, &conv, &copts)?;
        let opts = AssembleOptions {
            threads,
            tensor_name: "K".into(),
            layout,
            ..AssembleOptions::default()
        };
        let ndof = mesh.ndof();
        let mut b = Builder::new(&[ndof, ndof], DType::F64, opts)?;
        mesh.each(0..mesh.n, |dofs, ke| b.push_element(dofs, ke))?;
        b.finish(&single)?;
        let same = std::fs::read(&conv)? == std::fs::read(&single)?;
        std::fs::remove_file(&conv)?;
        std::fs::remove_file(&single)?;
        if !same {
            return Err(
                format!("the composite converted to one {layout} tensor differs from the single-process assembly").into(),
            );
        }
        println!(
            "converted to one {layout} tensor: byte-identical to the single-process assembly ({:.2} s)",
            t.elapsed().as_secs_f64()
        );
    }
    println!("OK");
    Ok(())
}
