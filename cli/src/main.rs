//! The coo-assembler command line: assemble contributions into a Hurray
//! COO file, and inspect such files. One module per subcommand; `anyhow`
//! lives only here.

/// `println!` for the commands' results: a reader that closes the pipe
/// early (`coo-assembler info K.hrry | head`) ends the output quietly
/// instead of panicking, and any other write error is returned.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!($($arg)*))?
    };
}

mod assemble;
mod composite;
mod convert;
mod dump;
mod export;
mod get;
mod info;
mod matvec;
mod names;
mod plan;
mod progress;
mod refill;
mod resources;
mod spy;
mod verify;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use coo_assembler::{HurrayFile, read::Opened, read::ReadOptions, read::Tensor};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "coo-assembler",
    version,
    about = "Assemble sparse COO tensors from (index, value) contributions into Hurray files, and inspect them.",
    long_about = "Assemble sparse COO tensors from streams of (index, value) contributions into \
                  sorted, duplicate-free Hurray (HRRYFILE) files, under a fixed memory budget, \
                  and inspect such files.\n\n\
                  Examples:\n  \
                  coo-assembler assemble --shape 1000,1000 --dtype f64 --input contribs.txt --format text --output K.hrry\n  \
                  my_fe_code | coo-assembler assemble --shape 1e6,1e6 --input - --format bin --memory-budget 1GiB --output K.hrry\n  \
                  coo-assembler info K.hrry\n  \
                  coo-assembler get K.hrry 3,4\n  \
                  coo-assembler verify K.hrry\n\n\
                  Exit status: 0 success, 1 invalid file, failed check or failed assembly, 2 usage error."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Assemble contributions (duplicates combined) into a sorted Hurray COO file.
    #[command(after_help = "Examples:\n  \
                  coo-assembler assemble --shape 1000,1000 --dtype f64 --input contribs.txt --format text --output K.hrry\n  \
                  my_fe_code | coo-assembler assemble --shape 1e6,1e6 --input - --format bin --memory-budget 1GiB --output K.hrry\n  \
                  coo-assembler assemble --input matrix.mtx --format mtx --duplicates max --drop-zeros -q -o M.hrry")]
    Assemble(assemble::AssembleArgs),
    /// Rewrite one tensor in another layout (coo, csr, csc), out of core.
    #[command(after_help = "Examples:\n  \
                  coo-assembler convert K.hrry K_csr.hrry --to csr\n  \
                  coo-assembler convert big_csr.hrry big_csc.hrry --to csc --memory-budget 256MiB\n  \
                  coo-assembler convert unsorted.hrry K.hrry --to coo --duplicates sum")]
    Convert(convert::ConvertArgs),
    /// Partition composites (MPI output): info, dump, get, verify, to-coo, join.
    Composite(composite::CompositeArgs),
    /// Describe a file: container, tensors, shapes, nnz, statistics, metadata.
    Info {
        /// The Hurray file.
        file: PathBuf,
        /// Print JSON instead of text (everything, checksums included).
        #[arg(long)]
        json: bool,
        /// Also show buffer offsets, checksums, flag bits and the
        /// statistics mask.
        #[arg(long, short)]
        verbose: bool,
    },
    /// Print the value at one coordinate (zero when no entry is stored).
    Get {
        /// The Hurray file.
        file: PathBuf,
        /// The coordinate, comma separated, 0-based (the first row is 0):
        /// e.g. 3,4. Files assembled from MatrixMarket (1-based) are stored
        /// 0-based: give --one-based to use the file's numbers.
        index: String,
        /// Read INDEX as 1-based, as MatrixMarket numbers rows and columns.
        #[arg(long)]
        one_based: bool,
        #[command(flatten)]
        pick: Pick,
    },
    /// Print the entries, one per line: indices then value, space separated.
    Dump {
        /// The Hurray file.
        file: PathBuf,
        /// Print at most N entries.
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
        /// Print the dense matrix instead, one row per line (at most 10,000 elements).
        #[arg(long, conflicts_with = "limit")]
        dense: bool,
        #[command(flatten)]
        pick: Pick,
    },
    /// Multiply by a vector: y = A x, or A^T x with --transpose (.npy or .f64 vectors).
    #[command(after_help = "Examples:\n  \
                  coo-assembler matvec K.hrry --x x.npy --out y.npy\n  \
                  coo-assembler matvec K.hrry --x x.f64 --out y.f64 --transpose --threads 4")]
    Matvec(matvec::MatvecArgs),
    /// Write the matrix for another program: MatrixMarket, scipy .npz or PETSc binary.
    #[command(after_help = "Examples:\n  \
                  coo-assembler export K.hrry --to mtx K.mtx --symmetric\n  \
                  coo-assembler export K.hrry --to npz K.npz        # scipy.sparse.load_npz\n  \
                  coo-assembler export K.hrry --to petsc K.petsc --petsc-int64")]
    Export(export::ExportArgs),
    /// Draw the sparsity pattern as a PNG (shade: log of the entries per pixel).
    Spy(spy::SpyArgs),
    /// Plan a pattern out of core from the coordinates of a bin file, for `refill`.
    #[command(
        after_help = "The plan is cut into parts that each fit --memory-budget; \
                  every later `refill` of it streams one step's values through it \
                  within the same budget, bit for bit what `assemble` writes for \
                  the same contributions.\n\n\
                  Examples:\n  \
                  coo-assembler plan --input mesh.bin --shape 830584,830584 --layout csr -o K.plan\n  \
                  coo-assembler refill K.plan step_001.f64 -o K_001.hrry"
    )]
    Plan(plan::PlanArgs),
    /// Assemble one step's values with a saved plan (same pattern, new values).
    #[command(after_help = "A plan is made once from the coordinates (Python: \
                  P = coo_assembler.plan((row, col), shape); P.save(\"K.plan\")), \
                  then every step refills it with new values, bit for bit what \
                  `assemble` writes for the same contributions.\n\n\
                  Examples:\n  \
                  coo-assembler refill K.plan step_017.npy -o K_017.hrry\n  \
                  coo-assembler refill K.plan values.f64 --output K.hrry   # raw little-endian f64")]
    Refill(refill::RefillArgs),
    /// Check every rule of the format and the content (bounds, order,
    /// duplicates, statistics, checksums); prints OK or each problem.
    Verify {
        /// The Hurray file.
        file: PathBuf,
        /// Fail on warnings too (statistics that disagree with the data).
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        pick: Pick,
    },
}

/// Which tensor of a file a command works on.
#[derive(Args)]
struct Pick {
    /// The tensor to use when the file holds several.
    #[arg(long, value_name = "NAME")]
    tensor: Option<String>,
}

/// Failures that are the user's command line, not the data: exit 2.
#[derive(Debug)]
struct Usage(String);
impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Usage {}

/// One line to stdout; a closed pipe is not an error (the reader has seen
/// what it wanted).
fn write_stdout(line: std::fmt::Arguments) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_fmt(line).and_then(|()| out.write_all(b"\n")) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

fn usage(msg: impl Into<String>) -> anyhow::Error {
    Usage(msg.into()).into()
}

fn main() -> ExitCode {
    // Never show a Rust backtrace to a user: a panic is a bug, say so plainly.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("coo-assembler: internal error: {info}. Please report this.");
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            // Each cause once: library errors already name their source.
            let mut msg = String::new();
            for cause in e.chain() {
                let t = cause.to_string();
                if !msg.contains(&t) {
                    if !msg.is_empty() {
                        msg.push_str(": ");
                    }
                    msg.push_str(&t);
                }
            }
            eprintln!("coo-assembler: error: {msg}");
            ExitCode::from(exit_code(&e))
        }
    }
}

/// The exit status for `e`: 2 for a usage error (this program's own, or a
/// library error whose kind says the command line is wrong), 1 otherwise.
fn exit_code(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if cause.downcast_ref::<Usage>().is_some() {
            return 2;
        }
        if let Some(e) = cause.downcast_ref::<coo_assembler::Error>() {
            return e.kind().exit_code();
        }
        if let Some(e) = cause.downcast_ref::<coo_assembler::matrix::MatrixError>() {
            return e.kind().exit_code();
        }
    }
    1
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.cmd {
        Cmd::Assemble(a) => assemble::run(a),
        Cmd::Convert(a) => convert::run(a),
        Cmd::Composite(a) => composite::run(a),
        Cmd::Info {
            file,
            json,
            verbose,
        } => info::run(&file, json, verbose),
        Cmd::Get {
            file,
            index,
            one_based,
            pick,
        } => get::run(&file, &index, one_based, &pick),
        Cmd::Dump {
            file,
            limit,
            dense,
            pick,
        } => dump::run(&file, limit, dense, &pick),
        Cmd::Matvec(a) => matvec::run(a),
        Cmd::Export(a) => export::run(a),
        Cmd::Spy(a) => spy::run(a),
        Cmd::Plan(a) => plan::run(a),
        Cmd::Refill(a) => refill::run(a),
        Cmd::Verify { file, strict, pick } => verify::run(&file, &pick, strict),
    }
}

/// Open any Hurray file, plain or partition composite (permissive: broken
/// files can be looked at).
fn open_any(path: &Path, permissive: bool) -> anyhow::Result<Opened> {
    coo_assembler::open(
        path,
        ReadOptions {
            permissive,
            ..ReadOptions::default()
        },
    )
    .with_context(|| format!("cannot read {}", path.display()))
}

/// Open a file of plain tensors for a command that reads those only; a
/// partition composite is refused with the command that converts it.
fn open(path: &Path, permissive: bool) -> anyhow::Result<HurrayFile> {
    match open_any(path, permissive)? {
        Opened::Plain(f) => Ok(f),
        Opened::Composite(c) => Err(anyhow::Error::from(coo_assembler::Error::Unsupported(
            format!(
                "{} is a partition composite ({} members read as one tensor {:?}); this command reads plain files: convert it first (coo-assembler convert {} OUT.hrry --to coo)",
                path.display(),
                c.members().count(),
                c.name(),
                path.display()
            ),
        ))),
    }
}

/// The tensor `pick` names, or the only one, in any layout the reader
/// serves; a tensor of another layout (a dense one) is refused naming its
/// layout and what `cmd` serves.
fn pick_view<'f>(f: &'f HurrayFile, pick: &Pick, cmd: &str) -> anyhow::Result<Tensor<'f>> {
    let t = match &pick.tensor {
        Some(name) => f.tensor_view(name),
        None if f.tensor_count() != 1 => {
            let e = f
                .only_tensor_view()
                .err()
                .map_or(String::new(), |e| e.to_string());
            return Err(usage(format!("{e}; choose one with --tensor NAME")));
        }
        None => f.only_tensor_view(),
    };
    Ok(t.map_err(|e| e.for_op(cmd))?)
}

/// A comma-separated list of non-negative integers (1e6 style accepted
/// when exactly integral).
fn parse_list(s: &str, what: &str) -> anyhow::Result<Vec<u64>> {
    s.split(',')
        .map(|t| {
            let t = t.trim();
            t.parse::<u64>().or_else(|_| match t.parse::<f64>() {
                Ok(f) if f >= 0.0 && f.fract() == 0.0 && f < 1.8e19 => Ok(f as u64),
                _ => Err(usage(format!(
                    "{what}: {t:?} is not a non-negative integer"
                ))),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every library error gets its kind's exit status through the chain
    /// of contexts the commands add.
    #[test]
    fn every_error_variant_maps_to_its_kinds_exit_status() {
        for e in coo_assembler::Error::samples() {
            let want = e.kind().exit_code();
            let wrapped = anyhow::Error::from(e).context("cannot read K.hrry");
            assert_eq!(exit_code(&wrapped), want, "{wrapped:#}");
        }
        assert_eq!(exit_code(&usage("bad flag")), 2);
        assert_eq!(exit_code(&anyhow::anyhow!("other")), 1);
    }
}
