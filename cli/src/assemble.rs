//! `coo-assembler assemble`: read contributions, assemble, write the file.
//! A thin shell over the library's [`Source`]: the input's format, header,
//! shape, element type and errors are the library's.

use crate::names::named;
use crate::progress::Bar;
use crate::resources::Resources;
use crate::{parse_list, usage};
use clap::Args;
use coo_assembler::element::group_digits;
use coo_assembler::input::{InputFormat, Source};
use coo_assembler::progress::Step;
use coo_assembler::vocab::format_size;
use coo_assembler::{
    AssembleOptions, DType, options::DuplicatePolicy, options::NonFinitePolicy,
    options::OutputLayout,
};
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub(crate) struct AssembleArgs {
    /// Extent of each dimension, comma separated (e.g. 1000,1000). Optional
    /// for mtx and npy input, whose header gives it.
    #[arg(long, value_name = "N,N,...")]
    shape: Option<String>,
    /// Element type [default: f64; for npy input, the array's own type,
    /// bool as u8].
    #[arg(long, value_parser = named::<DType>())]
    dtype: Option<DType>,
    /// Input file, or - for standard input. gzip and zstd input is
    /// decompressed on the fly, whatever the format.
    #[arg(long, value_name = "FILE|-")]
    input: String,
    /// Input format [default: npy, mtx or text when the input starts like
    /// one (text: printable numbers and comments), bin otherwise].
    #[arg(long, value_parser = named::<InputFormat>())]
    format: Option<InputFormat>,
    // With --threads 1 one thread parses, sorts, merges and writes; N > 1
    // runs N sorters (and N text parsers) beside the reading thread and
    // writes beside the merge.
    #[command(flatten)]
    resources: Resources,
    /// How contributions to one coordinate combine.
    #[arg(long, value_parser = named::<DuplicatePolicy>(), default_value = "sum")]
    duplicates: DuplicatePolicy,
    /// Drop entries whose combined value is zero.
    #[arg(long)]
    drop_zeros: bool,
    /// Add float duplicates with plain f64 arithmetic in arrival order
    /// instead of exactly: faster, but the last bits then depend on the
    /// order, threads and budget (exact sums are bit-reproducible).
    #[arg(long)]
    fast_sums: bool,
    /// What to do with NaN and infinite contributions (`--reject nan` is
    /// the older spelling of `--non-finite reject-nan`).
    #[arg(long, alias = "reject", value_parser = named::<NonFinitePolicy>(), default_value = "keep")]
    non_finite: NonFinitePolicy,
    /// Layout of the output.
    #[arg(long, value_parser = named::<OutputLayout>(), default_value = "coo")]
    layout: OutputLayout,
    /// CSF: the dimension stored at each level of the tree, outermost
    /// first, a permutation of 0..rank (`--mode-order 2,0,1`); the default
    /// is the identity. Entries are stored in the order of their index
    /// tuples taken in it, so lookups and fibres along the leading levels
    /// are fastest.
    #[arg(long, value_delimiter = ',', value_name = "D0,D1,...")]
    mode_order: Option<Vec<usize>>,
    /// Name of the tensor in the file.
    #[arg(long, default_value = "coo")]
    name: String,
    /// The Hurray file to write (replaced atomically).
    #[arg(long, short, value_name = "OUT.hrry")]
    output: PathBuf,
    /// No progress bar, no summary and no warnings.
    #[arg(long, short)]
    quiet: bool,
    /// Run as one rank of an MPI job (`mpirun -n K coo-assembler assemble
    /// --mpi ...`): every rank reads its own record-aligned share of a bin
    /// input file, rows are owned by ranks, and the ranks write one
    /// partition composite at --output (a path on a shared filesystem).
    /// --memory-budget is per rank.
    #[cfg(feature = "mpi")]
    #[arg(long)]
    mpi: bool,
    /// With --mpi, for machines without a shared filesystem: every rank
    /// writes its own plain file, --output with `.part<rank>` before the
    /// extension (K.hrry -> K.part0.hrry, ...); rank 0 prints the
    /// `composite join` command that combines them.
    #[cfg(feature = "mpi")]
    #[arg(long, requires = "mpi")]
    per_rank_files: bool,
}

/// The one line `assemble` ends with: what was written, from how much, and
/// only the parts of the story that happened (no "0 spilled", no rate of a
/// run too short to time).
fn summary_line(s: &coo_assembler::builder::Summary, seconds: f64) -> String {
    let plural = |n: u64, one: &str, many: &str| {
        format!(
            "{} {}",
            group_digits(u128::from(n)),
            if n == 1 { one } else { many }
        )
    };
    let mut out = format!(
        "wrote {}: {} -> {} in {:.2} s",
        s.path.display(),
        plural(s.contributions, "contribution", "contributions"),
        plural(s.nnz, "entry", "entries"),
        seconds
    );
    // A rate only for a run long enough to time, and one that reads as
    // more than zero at one decimal.
    let rate = s.contributions as f64 / seconds.max(1e-9) / 1e6;
    if seconds >= 0.05 && rate >= 0.05 {
        out += &format!(" ({rate:.1} M contributions/s)");
    }
    if s.runs_spilled > 0 {
        out += &format!(
            "; {} spilled ({}), {}",
            plural(s.runs_spilled, "run", "runs"),
            format_size(s.bytes_spilled),
            plural(u64::from(s.merge_passes), "merge pass", "merge passes")
        );
    }
    if s.skipped_negative > 0 {
        // Only the library's signed pushes skip; the CLI's inputs are
        // unsigned, but a summary from a library call reads the same.
        out += &format!(
            "; {} skipped (negative index)",
            plural(s.skipped_negative, "contribution", "contributions")
        );
    }
    out += &format!(
        "; peak buffers {} of a {} budget",
        format_size(s.peak_buffer_bytes),
        format_size(s.memory_budget)
    );
    out
}

/// On SIGINT or SIGTERM, remove what this run made (its temporary output
/// next to `output`, its spill directory) and exit 128 + the signal, as a
/// shell reports a process ended by it. A thread waits for the signals, so
/// the cleanup runs outside signal-handler context.
fn clean_up_on_signals(output: &Path, temp_base: PathBuf) -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])?;
    let output = output.to_path_buf();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                coo_assembler::builder::remove_own_leftovers(&output, &temp_base);
                let name = if sig == SIGINT {
                    "interrupted"
                } else {
                    "terminated"
                };
                eprintln!("\ncoo-assembler: {name}; removed the partial output and spill files");
                std::process::exit(128 + sig);
            }
        })?;
    Ok(())
}

/// The builder options the flags ask for, with `threads` unless
/// --threads says otherwise.
fn assemble_options(a: &AssembleArgs, threads: usize) -> coo_assembler::Result<AssembleOptions> {
    a.resources.options(AssembleOptions {
        duplicates: a.duplicates,
        drop_zeros: a.drop_zeros,
        exact_sums: !a.fast_sums,
        tensor_name: a.name.clone(),
        layout: a.layout,
        mode_order: a.mode_order.clone(),
        non_finite: a.non_finite,
        threads,
        ..AssembleOptions::default()
    })
}

/// The input the flags name.
fn open_source(a: &AssembleArgs) -> coo_assembler::Result<Source> {
    if a.input == "-" {
        Source::from_reader("<stdin>", io::stdin(), a.format)
    } else {
        Source::open(Path::new(&a.input), a.format)
    }
}

pub(crate) fn run(a: AssembleArgs) -> anyhow::Result<ExitCode> {
    #[cfg(feature = "mpi")]
    if a.mpi {
        return mpi_run::run(a);
    }
    let temp_base = a.resources.temp_base();
    let opts = assemble_options(&a, AssembleOptions::default().threads)?;
    let source = open_source(&a).map_err(|e| match (e, a.format) {
        // The library names the format; say which flag chose it.
        (e @ coo_assembler::Error::InvalidArgument(_), Some(f)) => {
            anyhow::Error::from(e).context(format!("--format {f}"))
        }
        (e, _) => e.into(),
    })?;
    source.check_output(&a.output)?;
    clean_up_on_signals(&a.output, temp_base)?;
    let shape = a
        .shape
        .as_deref()
        .map(|s| parse_list(s, "--shape"))
        .transpose()?;
    if shape.is_none() && !source.finds_shape() {
        return Err(usage(format!(
            "--shape is required for {} input read from {}, which states no shape (e.g. --shape 1000,1000)",
            source.format(),
            source.name()
        )));
    }
    // What the shape costs whatever the entries (a typo'd extent in a
    // compressed layout: 2^32 rows are 32 GiB of row pointers), said
    // before any contribution is read; the library refuses it when the
    // output's file system cannot hold it.
    if !a.quiet {
        if let Some(s) = shape.clone().or_else(|| source.shape()) {
            let fixed = coo_assembler::write::fixed_output_bytes(&s, opts.layout);
            if fixed >= 1 << 30 {
                eprintln!(
                    "coo-assembler: note: layout {} of shape {s:?} writes {} of pointers whatever the \
                     entries (the coo layout writes only the entries)",
                    opts.layout,
                    format_size(u64::try_from(fixed).unwrap_or(u64::MAX))
                );
            }
        }
    }
    let progress = opts.progress.clone();
    progress.start(Step::Read, source.progress_total().unwrap_or(0));
    let bar = Bar::show(&progress, &a.output.display().to_string(), a.quiet);
    let s = source.assemble_to(&a.output, shape.as_deref(), a.dtype, opts, |n| {
        progress.set(n);
    });
    drop(bar);
    let s = s.map_err(|e| match e {
        e @ coo_assembler::Error::InvalidShape { .. } if a.shape.is_some() => {
            anyhow::Error::from(e).context("--shape")
        }
        e => e.into(),
    })?;
    if s.contributions == 0 && !a.quiet {
        eprintln!("coo-assembler: warning: no contributions: the tensor is empty");
    }
    if !a.quiet {
        for p in &s.stale_removed {
            eprintln!(
                "coo-assembler: removed stale leftover of a killed run: {}",
                p.display()
            );
        }
        let total = s.time_ingest + s.time_merge + s.time_write;
        eprintln!("{}", summary_line(&s, total.as_secs_f64()));
    }
    Ok(ExitCode::SUCCESS)
}

/// `assemble --mpi`: one rank of a distributed assembly (issue 13).
#[cfg(feature = "mpi")]
mod mpi_run {
    use super::{AssembleArgs, assemble_options, open_source};
    use crate::{parse_list, usage};
    use coo_assembler::input::{Compression, InputFormat};
    use coo_assembler::vocab::format_size;
    use coo_assembler::{AssembleOptions, DType};
    use coo_assembler_mpi::{DistBuilder, DistOptions};
    use mpi::traits::*;
    use std::path::Path;
    use std::process::ExitCode;

    /// What every rank checks alone: the same on every rank (same
    /// arguments, same file), so a failure here fails every rank alike.
    fn options(a: &AssembleArgs) -> anyhow::Result<(Vec<u64>, DType, AssembleOptions)> {
        if a.input == "-" {
            return Err(usage(
                "--mpi reads a file (each rank its own byte range), not standard input",
            ));
        }
        let source = open_source(a)?;
        source.check_output(&a.output)?;
        if source.compression() != Compression::None {
            return Err(usage(
                "--mpi reads uncompressed bin input (ranks read byte ranges); decompress it first",
            ));
        }
        if source.format() != InputFormat::Bin {
            return Err(usage(format!(
                "--mpi reads bin input (record-aligned byte ranges per rank), not {}",
                source.format()
            )));
        }
        let Some(shape) = &a.shape else {
            return Err(usage("--shape is required for bin input"));
        };
        let shape = parse_list(shape, "--shape")?;
        let dtype = a.dtype.unwrap_or(DType::F64);
        // One sorter thread per rank unless told: ranks share the machine.
        let opts = assemble_options(a, 1)?;
        Ok((shape, dtype, opts))
    }

    pub(super) fn run(a: AssembleArgs) -> anyhow::Result<ExitCode> {
        let Some(universe) = mpi::initialize() else {
            anyhow::bail!("MPI was already initialised");
        };
        let world = universe.world();
        let checked = options(&a);
        // Agreed before anything collective: a rank that cannot even start
        // must not leave the others waiting.
        let mut all_ok = 0i32;
        world.all_reduce_into(
            &i32::from(checked.is_ok()),
            &mut all_ok,
            mpi::collective::SystemOperation::min(),
        );
        let (shape, dtype, assemble) = checked?;
        if all_ok == 0 {
            anyhow::bail!(
                "another rank of the MPI job refused the arguments or the input; nothing was written"
            );
        }
        let opts = DistOptions {
            assemble,
            ..DistOptions::default()
        };
        let mut b = DistBuilder::new(&world, &shape, dtype, opts)?;
        // A read or push error is reported to every rank by finish.
        let share = b.push_bin_file(Path::new(&a.input)).ok();
        let part = |k: i32| {
            let stem = a.output.file_stem().unwrap_or_default().to_string_lossy();
            let name = match a.output.extension() {
                Some(e) => format!("{stem}.part{k}.{}", e.to_string_lossy()),
                None => format!("{stem}.part{k}"),
            };
            a.output.with_file_name(name)
        };
        let s = if a.per_rank_files {
            b.finish_per_rank(part(world.rank()))?
        } else {
            b.finish(&a.output)?
        };
        let mut firsts = vec![0u64; s.ranks as usize];
        world.all_gather_into(&s.rows.start, &mut firsts[..]);
        if a.per_rank_files && s.rank == 0 {
            let parts: Vec<String> = firsts
                .iter()
                .enumerate()
                .map(|(k, f)| format!("{}@{f}", part(k as i32).display()))
                .collect();
            let shape: Vec<String> = shape.iter().map(u64::to_string).collect();
            // On stdout: the one thing a script needs from this run.
            outln!(
                "coo-assembler composite join --shape {} --name {} -o {} {}",
                shape.join(","),
                a.name,
                a.output.display(),
                parts.join(" ")
            );
        }
        if !a.quiet {
            let mine = [
                s.pushed,
                s.off_rank,
                s.sent,
                s.nnz,
                s.peak_rss.iter().copied().max().unwrap_or(0),
            ];
            let mut all = vec![0u64; mine.len() * s.ranks as usize];
            world.all_gather_into(&mine[..], &mut all[..]);
            if s.rank == 0 {
                for (r, m) in all.chunks_exact(mine.len()).enumerate() {
                    eprintln!(
                        "rank {r}: {} contributions, {} off-rank, {} records sent after combining, nnz {}, peak RSS {}",
                        m[0],
                        m[1],
                        m[2],
                        m[3],
                        format_size(m[4])
                    );
                }
                eprintln!(
                    "wrote {}{}: {} members, {} records read, nnz {}, {}",
                    s.path.display(),
                    if a.per_rank_files {
                        " and the other ranks' files"
                    } else {
                        " (partition composite)"
                    },
                    s.ranks,
                    share.map_or(0, |x| x.total_records),
                    s.total_nnz,
                    format_size(s.file_bytes)
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}
