//! `coo-assembler composite`: partition composites (issue 13), as written
//! by an MPI assembly (`coo_assembler::mpi`) or by `composite join`.

use crate::usage;
use anyhow::Context;
use clap::{Args, Subcommand};
use coo_assembler::composite::join;
use coo_assembler::{
    convert, convert::ConvertOptions, options::OutputLayout, read::CompositeFile, read::ReadOptions,
};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub(crate) struct CompositeArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Head (shape, type, members) and each member's box and nnz.
    Info {
        /// The composite file.
        file: PathBuf,
    },
    /// Entries in global order: indices then value, space separated.
    Dump {
        /// The composite file.
        file: PathBuf,
        /// Print at most N entries.
        #[arg(long, value_name = "N")]
        limit: Option<u64>,
    },
    /// The value at a global coordinate (comma separated).
    Get {
        /// The composite file.
        file: PathBuf,
        /// The coordinate, e.g. 3,4.
        index: String,
    },
    /// Partition rules (exact cover, no overlap) and every member's content.
    Verify {
        /// The composite file.
        file: PathBuf,
    },
    /// Write the logical tensor as one plain sorted COO tensor, as
    /// `convert FILE OUT --to coo` does (`--to csr|csc` writes the other
    /// layouts).
    ToCoo {
        /// The composite file.
        file: PathBuf,
        /// The output file (replaced atomically). It may be the composite
        /// itself, which is then converted in place, as `convert` does.
        output: PathBuf,
        /// Tensor name in the output (default: the head's name).
        #[arg(long)]
        name: Option<String>,
    },
    /// Combine plain single-tensor files (one per rank, COO, CSR or CSC,
    /// indices local to their row band) into one partition composite.
    #[command(after_help = "Example:\n  \
                  coo-assembler composite join --shape 1000,1000 --output K.hrry part0.hrry@0 part1.hrry@400")]
    Join {
        /// Global shape, comma separated.
        #[arg(long)]
        shape: String,
        /// Output composite (replaced atomically; not one of the parts).
        #[arg(long, short)]
        output: PathBuf,
        /// Head name.
        #[arg(long, default_value = "coo")]
        name: String,
        /// Parts as FILE@FIRST_ROW.
        #[arg(required = true)]
        parts: Vec<String>,
    },
}

fn numbers(s: &str) -> anyhow::Result<Vec<u64>> {
    s.split(',')
        .map(|t| {
            t.trim()
                .parse::<u64>()
                .with_context(|| format!("{t:?} is not an index"))
        })
        .collect()
}

fn open(path: &PathBuf) -> anyhow::Result<CompositeFile> {
    CompositeFile::open_with(
        path,
        ReadOptions {
            permissive: true,
            ..ReadOptions::default()
        },
    )
    .with_context(|| format!("cannot read {}", path.display()))
}

/// A composite is one logical tensor: `--tensor` may only name its head.
pub(crate) fn check_pick(c: &CompositeFile, tensor: Option<&str>) -> anyhow::Result<()> {
    match tensor {
        Some(t) if t != c.name() => Err(usage(format!(
            "{t:?}: this file is a partition composite, read as one tensor named {:?}",
            c.name()
        ))),
        _ => Ok(()),
    }
}

/// `info` of a composite: the head and each member's box.
pub(crate) fn info(path: &Path, c: &CompositeFile, json: bool) -> anyhow::Result<()> {
    if json {
        let members: Vec<serde_json::Value> = c
            .members()
            .map(|(t, off)| {
                serde_json::json!({
                    "name": t.name(),
                    "layout": t.layout().to_string(),
                    "offset": off,
                    "shape": t.shape(),
                    "nnz": t.nnz(),
                    "dtype": t.dtype().to_string(),
                })
            })
            .collect();
        let v = serde_json::json!({
            "file": path.display().to_string(),
            "composite": {
                "name": c.name(),
                "rule": "partition",
                "dtype": c.dtype().to_string(),
                "shape": c.shape(),
                "nnz": c.nnz(),
                "members": members,
            },
            "warnings": c.warnings(),
        });
        outln!("{v}");
        return Ok(());
    }
    outln!(
        "composite {:?}: partition of shape {:?}, {}, {} members, nnz {}",
        c.name(),
        c.shape(),
        c.dtype(),
        c.members().count(),
        c.nnz()
    );
    for (t, off) in c.members() {
        outln!(
            "  {:?}: {} box at {off:?} of shape {:?}, nnz {}",
            t.name(),
            t.layout().to_string().to_uppercase(),
            t.shape(),
            t.nnz()
        );
    }
    for w in c.warnings() {
        outln!("warning: {w}");
    }
    Ok(())
}

/// `dump` of a composite: entries in global order.
pub(crate) fn dump(c: &CompositeFile, limit: Option<u64>) -> anyhow::Result<()> {
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    for e in c.iter().take(limit.map_or(usize::MAX, |l| l as usize)) {
        let (idx, v) = e?;
        let idx: Vec<String> = idx.iter().map(u64::to_string).collect();
        let line = writeln!(w, "{} {}", idx.join(" "), v.repr(c.dtype()));
        match line {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            r => r?,
        }
    }
    match w.flush() {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => Ok(r?),
    }
}

/// `verify` of a composite: partition rules and every member; exit 1 on errors.
pub(crate) fn verify(c: &CompositeFile) -> anyhow::Result<ExitCode> {
    let problems = c.verify();
    for p in &problems {
        outln!("{p}");
    }
    for w in c.warnings() {
        outln!("warning: {w}");
    }
    if problems.iter().any(|p| p.is_error()) {
        return Ok(ExitCode::from(1));
    }
    outln!("OK");
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run(a: CompositeArgs) -> anyhow::Result<ExitCode> {
    match a.action {
        Action::Info { file } => info(&file, &open(&file)?, false)?,
        Action::Dump { file, limit } => dump(&open(&file)?, limit)?,
        Action::Get { file, index } => {
            let c = open(&file)?;
            outln!("{}", c.get(&numbers(&index)?)?.repr(c.dtype()));
        }
        Action::Verify { file } => return verify(&open(&file)?),
        Action::ToCoo { file, output, name } => {
            let opts = ConvertOptions {
                to: OutputLayout::Coo,
                output_name: name,
                ..ConvertOptions::default()
            };
            let s = convert(&file, &output, &opts)
                .with_context(|| format!("cannot convert {}", file.display()))?;
            outln!(
                "wrote {}: {}",
                s.path.display(),
                size_and_bytes(s.file_bytes)
            );
        }
        Action::Join {
            shape,
            output,
            name,
            parts,
        } => {
            let shape = numbers(&shape)?;
            let mut list = Vec::new();
            for p in &parts {
                let (f, row) = p
                    .rsplit_once('@')
                    .with_context(|| format!("part {p:?} is not FILE@FIRST_ROW"))?;
                let mut off = vec![0u64; shape.len()];
                off[0] = row
                    .parse()
                    .with_context(|| format!("part {p:?}: bad first row"))?;
                list.push((PathBuf::from(f), off));
            }
            let s = join(&list, &shape, &output, &name)?;
            outln!(
                "wrote {}: {} members, nnz {}, {}",
                output.display(),
                s.members,
                coo_assembler::element::group_digits(u128::from(s.nnz)),
                size_and_bytes(s.bytes)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A file's size as people read it, with the exact count ("12 KiB
/// (12288 bytes)"; "512 B" needs none).
fn size_and_bytes(bytes: u64) -> String {
    let size = coo_assembler::vocab::format_size(bytes);
    if bytes < 1024 {
        size
    } else {
        format!("{size} ({bytes} bytes)")
    }
}
