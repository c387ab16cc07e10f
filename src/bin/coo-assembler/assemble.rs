//! `coo-assembler assemble`: read contributions, assemble, write the file.

use crate::{parse_list, usage};
use anyhow::bail;
use clap::{Args, ValueEnum};
use coo_assembler::input::{self, InputFormat, MappedInput};
use coo_assembler::{
    parse_size, AssembleOptions, Builder, DType, DuplicatePolicy, Error, IoCtx, NonFinitePolicy,
};
use std::io::{self, BufReader, IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

/// Element types, as `--dtype` accepts them.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum DTypeArg {
    #[value(alias = "float64", alias = "double")]
    F64,
    #[value(alias = "float32", alias = "float")]
    F32,
    #[value(alias = "float16", alias = "half")]
    F16,
    #[value(alias = "bfloat16")]
    Bf16,
    #[value(alias = "int8")]
    I8,
    #[value(alias = "uint8")]
    U8,
    #[value(alias = "int16")]
    I16,
    #[value(alias = "uint16")]
    U16,
    #[value(alias = "int32")]
    I32,
    #[value(alias = "uint32")]
    U32,
    #[value(alias = "int64")]
    I64,
    #[value(alias = "uint64")]
    U64,
}

impl From<DTypeArg> for DType {
    fn from(d: DTypeArg) -> DType {
        match d {
            DTypeArg::F64 => DType::F64,
            DTypeArg::F32 => DType::F32,
            DTypeArg::F16 => DType::F16,
            DTypeArg::Bf16 => DType::BF16,
            DTypeArg::I8 => DType::I8,
            DTypeArg::U8 => DType::U8,
            DTypeArg::I16 => DType::I16,
            DTypeArg::U16 => DType::U16,
            DTypeArg::I32 => DType::I32,
            DTypeArg::U32 => DType::U32,
            DTypeArg::I64 => DType::I64,
            DTypeArg::U64 => DType::U64,
        }
    }
}

/// Input formats, as `--format` accepts them.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum FormatArg {
    /// Records of rank u64 LE indices then one LE value, no header.
    Bin,
    /// "i j ... value" per line, 0-based, # comments.
    Text,
    /// MatrixMarket coordinate (real, integer, pattern; general, symmetric,
    /// skew-symmetric), 1-based.
    #[value(alias = "matrixmarket")]
    Mtx,
}

impl From<FormatArg> for InputFormat {
    fn from(f: FormatArg) -> InputFormat {
        match f {
            FormatArg::Bin => InputFormat::Bin,
            FormatArg::Text => InputFormat::Text,
            FormatArg::Mtx => InputFormat::Mtx,
        }
    }
}

/// Duplicate policies, as `--duplicates` accepts them.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum DuplicatesArg {
    /// Exact sum (the default).
    Sum,
    /// The smallest contribution.
    Min,
    /// The largest contribution.
    Max,
    /// The last contribution pushed.
    Last,
    /// Fail on the first duplicate, naming its coordinate.
    Error,
}

impl From<DuplicatesArg> for DuplicatePolicy {
    fn from(d: DuplicatesArg) -> DuplicatePolicy {
        match d {
            DuplicatesArg::Sum => DuplicatePolicy::Sum,
            DuplicatesArg::Min => DuplicatePolicy::Min,
            DuplicatesArg::Max => DuplicatePolicy::Max,
            DuplicatesArg::Last => DuplicatePolicy::Last,
            DuplicatesArg::Error => DuplicatePolicy::Error,
        }
    }
}

/// Non-finite policies, as `--reject` accepts them.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum RejectArg {
    /// Refuse NaN contributions.
    Nan,
    /// Refuse NaN and infinite contributions.
    NonFinite,
}

impl From<RejectArg> for NonFinitePolicy {
    fn from(r: RejectArg) -> NonFinitePolicy {
        match r {
            RejectArg::Nan => NonFinitePolicy::RejectNan,
            RejectArg::NonFinite => NonFinitePolicy::RejectNonFinite,
        }
    }
}

#[derive(Args)]
pub(crate) struct AssembleArgs {
    /// Extent of each dimension, comma separated (e.g. 1000,1000). Optional
    /// for --format mtx, whose header gives it.
    #[arg(long, value_name = "N,N,...")]
    shape: Option<String>,
    /// Element type.
    #[arg(long, value_enum, ignore_case = true, default_value = "f64")]
    dtype: DTypeArg,
    /// Input file, or - for standard input.
    #[arg(long, value_name = "FILE|-")]
    input: String,
    /// Input format.
    #[arg(long, value_enum, ignore_case = true, default_value = "bin")]
    format: FormatArg,
    /// Memory for all buffers, with units: 8MiB, 256MiB, 1GiB, or bytes.
    #[arg(long, default_value = "256MiB", value_name = "SIZE")]
    memory_budget: String,
    /// Sorting threads (default: number of cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Directory for spill files (default: $TMPDIR or /tmp).
    #[arg(long, value_name = "DIR")]
    temp_dir: Option<PathBuf>,
    /// How contributions to one coordinate combine.
    #[arg(long, value_enum, ignore_case = true, default_value = "sum")]
    duplicates: DuplicatesArg,
    /// Drop entries whose combined value is zero.
    #[arg(long)]
    drop_zeros: bool,
    /// Add float duplicates with plain f64 arithmetic in arrival order
    /// instead of exactly: faster, but the last bits then depend on the
    /// order, threads and budget (exact sums are bit-reproducible).
    #[arg(long)]
    fast_sums: bool,
    /// Refuse some non-finite contributions (default: keep them all).
    #[arg(long, value_enum, ignore_case = true)]
    reject: Option<RejectArg>,
    /// Name of the tensor in the file.
    #[arg(long, default_value = "coo")]
    name: String,
    /// The Hurray file to write (replaced atomically).
    #[arg(long, short, value_name = "OUT.hrry")]
    output: PathBuf,
    /// No progress bar and no summary.
    #[arg(long, short)]
    quiet: bool,
}

fn human_bytes(b: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", units[u])
}

pub(crate) fn run(a: AssembleArgs) -> anyhow::Result<ExitCode> {
    let dtype = DType::from(a.dtype);
    let format = InputFormat::from(a.format);
    let mut opts = AssembleOptions {
        memory_budget: parse_size(&a.memory_budget)
            .map_err(|e| usage(format!("--memory-budget: {e}")))?,
        duplicates: a.duplicates.into(),
        drop_zeros: a.drop_zeros,
        exact_sums: !a.fast_sums,
        tensor_name: a.name.clone(),
        temp_dir: a.temp_dir.clone(),
        non_finite: a
            .reject
            .map_or(NonFinitePolicy::Keep, NonFinitePolicy::from),
        ..AssembleOptions::default()
    };
    if let Some(t) = a.threads {
        opts.threads = t;
    }
    let io_ctx = IoCtx::new();
    let mut mapped: Option<MappedInput> = None;
    let (source, total, reader): (String, Option<u64>, Box<dyn Read>) = if a.input == "-" {
        ("<stdin>".into(), None, Box::new(io::stdin().lock()))
    } else {
        let p = PathBuf::from(&a.input);
        let file = io_ctx.open(&p)?;
        let len = io_ctx.file_len(&file, &p).ok();
        if format == InputFormat::Bin {
            mapped = MappedInput::map(&io_ctx, &file, &p);
        }
        (a.input.clone(), len, Box::new(file))
    };
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    let mtx = if format == InputFormat::Mtx {
        Some(input::read_mtx_header(&mut reader, &source)?)
    } else {
        None
    };
    let shape = match (&a.shape, &mtx) {
        (Some(s), Some(h)) => {
            let s = parse_list(s, "--shape")?;
            if s != [h.rows, h.cols] {
                bail!(usage(format!(
                    "--shape {s:?} disagrees with the MatrixMarket header [{}, {}]",
                    h.rows, h.cols
                )));
            }
            s
        }
        (Some(s), None) => parse_list(s, "--shape")?,
        (None, Some(h)) => vec![h.rows, h.cols],
        (None, None) => {
            return Err(usage(
                "--shape is required for bin and text input (e.g. --shape 1000,1000)",
            ))
        }
    };
    let rank = shape.len();
    let mut builder = Builder::new(&shape, dtype, opts).map_err(|e| match e {
        Error::InvalidOptions(_) | Error::InvalidArgument(_) | Error::BudgetTooSmall { .. } => {
            usage(e.to_string())
        }
        other => other.into(),
    })?;

    let show = !a.quiet && io::stderr().is_terminal();
    let bar = if show {
        let b = match total {
            Some(t) => indicatif::ProgressBar::new(t),
            None => indicatif::ProgressBar::new_spinner(),
        };
        let style = if total.is_some() {
            "{spinner} reading {bytes}/{total_bytes} [{bar:30}] {bytes_per_sec}, ETA {eta}"
        } else {
            "{spinner} reading {bytes} {bytes_per_sec}"
        };
        if let Ok(st) = indicatif::ProgressStyle::with_template(style) {
            b.set_style(st.progress_chars("=> "));
        }
        Some(b)
    } else {
        None
    };
    let pushed = match format {
        InputFormat::Bin => match &mut mapped {
            // A mapped regular file is parsed in place: no read() copies;
            // parsed pages leave the resident set as parsing advances.
            Some(m) => m.push_bin(&mut builder, rank, dtype, &source, |n| {
                if let Some(b) = &bar {
                    b.set_position(n);
                }
            })?,
            None => input::push_bin(&mut builder, reader, rank, dtype, &source, &mut |n| {
                if let Some(b) = &bar {
                    b.set_position(n);
                }
            })?,
        },
        InputFormat::Text => {
            input::push_text(&mut builder, reader, rank, dtype, &source, &mut |n| {
                if let Some(b) = &bar {
                    b.set_position(n);
                }
            })?
        }
        InputFormat::Mtx => {
            let h = mtx.ok_or_else(|| usage("internal: missing MatrixMarket header"))?;
            input::push_mtx(
                &mut builder,
                reader.by_ref(),
                &h,
                dtype,
                &source,
                &mut |n| {
                    if let Some(b) = &bar {
                        b.set_position(n);
                    }
                },
            )?
        }
    };
    if let Some(b) = &bar {
        b.set_style(indicatif::ProgressStyle::default_spinner());
        b.set_message(format!(
            "{pushed} contributions read; merging and writing {}",
            a.output.display()
        ));
        b.enable_steady_tick(std::time::Duration::from_millis(200));
    }
    let s = builder.finish(&a.output)?;
    for p in &s.stale_removed {
        // Shown even with --quiet: the user should know a run was killed.
        eprintln!(
            "coo-assembler: removed stale leftover of a killed run: {}",
            p.display()
        );
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if !a.quiet {
        let total = s.time_ingest + s.time_merge + s.time_write;
        eprintln!(
            "wrote {}: {} contributions -> nnz {} ({} runs, {} spilled, {} merge passes, {} spilled) in {:.2} s ({:.1} M contributions/s); peak buffers {} of a {} budget",
            s.path.display(),
            s.contributions,
            s.nnz,
            s.runs,
            s.runs_spilled,
            s.merge_passes,
            human_bytes(s.bytes_spilled),
            total.as_secs_f64(),
            s.contributions as f64 / total.as_secs_f64().max(1e-9) / 1e6,
            human_bytes(s.peak_buffer_bytes),
            human_bytes(s.memory_budget),
        );
    }
    Ok(ExitCode::SUCCESS)
}
