//! `coo-assembler assemble`: read contributions, assemble, write the file.

use crate::{parse_list, usage};
use anyhow::bail;
use clap::{Args, ValueEnum};
use coo_assembler::input::{
    self, Compression, InputFormat, MappedInput, MtxHeader, MtxSymmetry, NpyHeader,
};
use coo_assembler::{
    parse_size, AssembleOptions, Builder, DType, DuplicatePolicy, Error, IoCtx, NonFinitePolicy,
    OutputLayout,
};
use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read};
use std::path::{Path, PathBuf};
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
    /// NumPy .npy array (any rank, numeric dtype; its non-zeros are stored).
    Npy,
}

impl From<FormatArg> for InputFormat {
    fn from(f: FormatArg) -> InputFormat {
        match f {
            FormatArg::Bin => InputFormat::Bin,
            FormatArg::Text => InputFormat::Text,
            FormatArg::Mtx => InputFormat::Mtx,
            FormatArg::Npy => InputFormat::Npy,
        }
    }
}

/// Output layouts, as `--layout` accepts them.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum LayoutArg {
    /// Coordinate list (any rank).
    Coo,
    /// Compressed sparse rows (matrices only).
    Csr,
    /// Compressed sparse columns (matrices only).
    Csc,
}

impl From<LayoutArg> for OutputLayout {
    fn from(l: LayoutArg) -> OutputLayout {
        match l {
            LayoutArg::Coo => OutputLayout::Coo,
            LayoutArg::Csr => OutputLayout::Csr,
            LayoutArg::Csc => OutputLayout::Csc,
        }
    }
}

/// Duplicate policies, as `--duplicates` accepts them.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum DuplicatesArg {
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
    /// for mtx and npy input, whose header gives it.
    #[arg(long, value_name = "N,N,...")]
    shape: Option<String>,
    /// Element type [default: f64; for npy input, the array's own type,
    /// bool as u8].
    #[arg(long, value_enum, ignore_case = true)]
    dtype: Option<DTypeArg>,
    /// Input file, or - for standard input. gzip and zstd input is
    /// decompressed on the fly, whatever the format.
    #[arg(long, value_name = "FILE|-")]
    input: String,
    /// Input format [default: npy or mtx when the input starts like one,
    /// bin otherwise].
    #[arg(long, value_enum, ignore_case = true)]
    format: Option<FormatArg>,
    /// Memory for all buffers, with units: 8MiB, 256MiB, 1GiB, or bytes.
    #[arg(long, default_value = "256MiB", value_name = "SIZE")]
    memory_budget: String,
    /// Cores to use (default: all). 1 parses, sorts, merges and writes on
    /// one thread; N > 1 runs N sorters (and N text parsers) beside the
    /// reading thread and writes beside the merge. Output is the same for
    /// any N.
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
    /// Layout of the output: coo (any rank), csr or csc (matrices only).
    #[arg(long, value_enum, ignore_case = true, default_value = "coo")]
    layout: LayoutArg,
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
                coo_assembler::remove_own_leftovers(&output, &temp_base);
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

/// Refuse an output that is the input file: same file (device and inode)
/// or, for an output not written yet, the same path.
fn check_output_is_not_input(input: &Path, output: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let same = match (std::fs::metadata(input), std::fs::metadata(output)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => {
            let abs = |p: &Path| -> Option<PathBuf> {
                let dir = coo_assembler_parent(p).canonicalize().ok()?;
                Some(dir.join(p.file_name()?))
            };
            matches!((abs(input), abs(output)), (Some(a), Some(b)) if a == b)
        }
    };
    if same {
        return Err(usage(format!(
            "--output {} is the input file; writing it would destroy the input: choose another output",
            output.display()
        )));
    }
    Ok(())
}

fn coo_assembler_parent(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// What was read from the start of the input to choose how to parse it.
enum Header {
    None,
    Mtx(MtxHeader),
    Npy(NpyHeader),
}

/// The format the input starts like, when it is recognisable.
fn sniff_format(head: &[u8]) -> Option<InputFormat> {
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    if head.starts_with(input::NPY_MAGIC) {
        Some(InputFormat::Npy)
    } else if head.len() >= 14 && head[..14].eq_ignore_ascii_case(b"%%MatrixMarket") {
        Some(InputFormat::Mtx)
    } else {
        None
    }
}

/// The builder options the flags ask for (threads left at the default;
/// each caller picks its own).
fn assemble_options(a: &AssembleArgs) -> anyhow::Result<AssembleOptions> {
    Ok(AssembleOptions {
        memory_budget: parse_size(&a.memory_budget)
            .map_err(|e| usage(format!("--memory-budget: {e}")))?,
        duplicates: a.duplicates.into(),
        drop_zeros: a.drop_zeros,
        exact_sums: !a.fast_sums,
        tensor_name: a.name.clone(),
        layout: a.layout.into(),
        temp_dir: a.temp_dir.clone(),
        non_finite: a
            .reject
            .map_or(NonFinitePolicy::Keep, NonFinitePolicy::from),
        ..AssembleOptions::default()
    })
}

pub(crate) fn run(a: AssembleArgs) -> anyhow::Result<ExitCode> {
    #[cfg(feature = "mpi")]
    if a.mpi {
        return mpi_run::run(a);
    }
    let temp_base = a.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut opts = assemble_options(&a)?;
    if let Some(t) = a.threads {
        opts.threads = t;
    }
    let io_ctx = IoCtx::new();
    let from_file = a.input != "-";
    if from_file {
        check_output_is_not_input(Path::new(&a.input), &a.output)?;
    }
    clean_up_on_signals(&a.output, temp_base)?;

    let mut mapped: Option<MappedInput> = None;
    let source: String = if from_file {
        a.input.clone()
    } else {
        "<stdin>".into()
    };
    // The raw input, its length when it is a file, and the file itself
    // (to map it when it is a plain, uncompressed file).
    let (raw, total, file): (Box<dyn Read + Send>, Option<u64>, Option<File>) = if from_file {
        let p = PathBuf::from(&a.input);
        let file = io_ctx.open(&p)?;
        let len = io_ctx.file_len(&file, &p).ok();
        let clone = file.try_clone().ok();
        (Box::new(file), len, clone)
    } else {
        (Box::new(io::stdin()), None, None)
    };
    let (reader, compression) = input::decompress(raw, &source)?;
    let (head, reader) = input::peek(reader, 32, &source)?;
    let sniffed = sniff_format(&head);
    let format = match (a.format.map(InputFormat::from), sniffed) {
        (Some(InputFormat::Bin), Some(InputFormat::Npy)) => {
            bail!(usage(format!(
                "{source} is a NumPy .npy file: use --format npy (or no --format)"
            )))
        }
        (Some(f), _) => f,
        (None, Some(f)) => f,
        (None, None) => InputFormat::Bin,
    };
    let mut reader = BufReader::with_capacity(1 << 20, reader);
    // A regular, uncompressed MatrixMarket or text file is parsed in place
    // (no read() copies; the parsing threads read the pages themselves).
    if matches!(format, InputFormat::Mtx | InputFormat::Text) && compression == Compression::None {
        if let Some(f) = &file {
            mapped = MappedInput::map(&io_ctx, f, Path::new(&a.input));
        }
    }
    let header = match (format, &mut mapped) {
        (InputFormat::Mtx, Some(m)) => Header::Mtx(m.read_mtx_header(&source)?),
        (InputFormat::Mtx, None) => Header::Mtx(input::read_mtx_header(&mut reader, &source)?),
        (InputFormat::Npy, _) => Header::Npy(input::read_npy_header(&mut reader, &source)?),
        _ => Header::None,
    };
    let dtype = match (a.dtype, &header) {
        (Some(d), _) => DType::from(d),
        (None, Header::Npy(h)) => h.dtype(),
        (None, _) => DType::F64,
    };
    let header_shape = match &header {
        Header::Mtx(h) => Some((vec![h.rows, h.cols], "MatrixMarket header", h.lines)),
        Header::Npy(h) => Some((h.shape.clone(), ".npy header", 0)),
        Header::None => None,
    };
    let shape = match (&a.shape, &header_shape) {
        (Some(s), Some((h, what, _))) => {
            let s = parse_list(s, "--shape")?;
            if &s != h {
                bail!(usage(format!(
                    "--shape {s:?} disagrees with the {what} {h:?}"
                )));
            }
            s
        }
        (Some(s), None) => parse_list(s, "--shape")?,
        (None, Some((h, _, _))) => h.clone(),
        (None, None) => {
            return Err(usage(
                "--shape is required for bin and text input (e.g. --shape 1000,1000)",
            ))
        }
    };
    let rank = shape.len();
    if format == InputFormat::Bin && compression == Compression::None {
        if let (Some(len), Some(f)) = (total, &file) {
            input::check_bin_length(len, rank, dtype, &source)?;
            // A mapped regular file is parsed in place: no read() copies;
            // parsed pages leave the resident set as parsing advances.
            mapped = MappedInput::map(&io_ctx, f, Path::new(&a.input));
        }
    }
    // How many contributions are coming, when the input says so: the plan
    // makes longer chunks when they will spill (fewer runs to merge).
    opts.expected_contributions = match (&header, format, total) {
        (Header::Mtx(h), _, _) if h.symmetry == MtxSymmetry::General => Some(h.entries),
        // Each stored entry of a symmetric file may give a mirror too.
        (Header::Mtx(h), _, _) => Some(h.entries.saturating_mul(2)),
        (_, InputFormat::Bin, Some(len)) if compression == Compression::None => {
            Some(len / input::bin_record_bytes(rank, dtype) as u64)
        }
        _ => None,
    };
    let mut builder = Builder::new(&shape, dtype, opts).map_err(|e| match (e, &header_shape) {
        // The shape came from the file: a shape Hurray cannot hold is bad input.
        (e @ (Error::InvalidOptions(_) | Error::InvalidArgument(_)), Some((_, what, line)))
            if a.shape.is_none() =>
        {
            anyhow::Error::from(Error::Input {
                source_name: source.clone(),
                location: if *line > 0 {
                    format!("line {line}")
                } else {
                    "header".into()
                },
                detail: format!("the shape of the {what}: {e}"),
                cause: Some(Box::new(e)),
            })
        }
        (
            e @ (Error::InvalidOptions(_)
            | Error::InvalidArgument(_)
            | Error::BudgetTooSmall { .. }),
            _,
        ) => usage(e.to_string()),
        (other, _) => other.into(),
    })?;

    // Progress counts raw (compressed) bytes only when they are what we see.
    let total = if compression == Compression::None {
        total
    } else {
        None
    };
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
    let mut progress = |n: u64| {
        if let Some(b) = &bar {
            b.set_position(n);
        }
    };
    let pushed = match (&header, &mut mapped) {
        (Header::Mtx(h), Some(m)) => m.push_mtx(&mut builder, h, dtype, &source, progress)?,
        (Header::Mtx(h), None) => input::push_mtx(
            &mut builder,
            reader.by_ref(),
            h,
            dtype,
            &source,
            &mut progress,
        )?,
        (Header::Npy(h), _) => input::push_npy(&mut builder, reader, h, &source, &mut progress)?,
        (Header::None, Some(m)) if format == InputFormat::Text => {
            m.push_text(&mut builder, rank, dtype, &source, progress)?
        }
        (Header::None, Some(m)) => m.push_bin(&mut builder, rank, dtype, &source, progress)?,
        (Header::None, None) if format == InputFormat::Text => {
            input::push_text(&mut builder, reader, rank, dtype, &source, &mut progress)?
        }
        (Header::None, None) => {
            input::push_bin(&mut builder, reader, rank, dtype, &source, &mut progress)?
        }
    };
    if pushed == 0 && !a.quiet {
        eprintln!("coo-assembler: warning: no contributions: the tensor is empty");
    }
    if let Some(b) = &bar {
        b.set_style(indicatif::ProgressStyle::default_spinner());
        b.set_message(format!(
            "{pushed} contributions read; merging and writing {}",
            a.output.display()
        ));
        b.enable_steady_tick(std::time::Duration::from_millis(200));
    }
    let s = match builder.finish(&a.output) {
        Ok(s) => s,
        Err(e) => {
            if let Some(b) = &bar {
                b.finish_and_clear();
            }
            return Err(name_coordinate(
                e, format, rank, dtype, &source, from_file, &io_ctx,
            ));
        }
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if !a.quiet {
        for p in &s.stale_removed {
            eprintln!(
                "coo-assembler: removed stale leftover of a killed run: {}",
                p.display()
            );
        }
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

/// A duplicate or overflow found while merging names its coordinate
/// 0-based; say it as the input wrote it (1-based for MatrixMarket) and,
/// for a file, find the lines or records it came from by reading it again.
fn name_coordinate(
    e: Error,
    format: InputFormat,
    rank: usize,
    dtype: DType,
    source: &str,
    from_file: bool,
    io_ctx: &IoCtx,
) -> anyhow::Error {
    let (coordinate, what) = match &e {
        Error::DuplicateCoordinate { coordinate } => (
            coordinate.clone(),
            "duplicate contributions (the duplicate policy is `error`)".to_string(),
        ),
        Error::IntegerOverflow { coordinate, dtype } => (
            coordinate.clone(),
            format!("integer overflow: the combined value does not fit {dtype}"),
        ),
        _ => return e.into(),
    };
    let (shown, base) = if format == InputFormat::Mtx {
        (
            coordinate.iter().map(|c| c + 1).collect::<Vec<_>>(),
            "1-based, as in the file",
        )
    } else {
        (coordinate.clone(), "0-based, as in the file")
    };
    let list: Vec<String> = shown.iter().map(u64::to_string).collect();
    let mut msg = format!("{source}: {what} at ({}) ({base})", list.join(", "));
    if from_file {
        let again = || -> coo_assembler::Result<Vec<String>> {
            let p = Path::new(source);
            let f = io_ctx.open(p)?;
            let (r, _) = input::decompress(f, source)?;
            input::locate(BufReader::new(r), format, rank, dtype, &coordinate, source)
        };
        match again() {
            Ok(at) if !at.is_empty() => msg.push_str(&format!(": from {}", at.join(", "))),
            _ => {}
        }
    }
    anyhow::anyhow!(msg)
}

/// `assemble --mpi`: one rank of a distributed assembly (issue 13).
#[cfg(feature = "mpi")]
mod mpi_run {
    use super::{
        assemble_options, check_output_is_not_input, human_bytes, sniff_format, AssembleArgs,
    };
    use crate::{parse_list, usage};
    use coo_assembler::input::{self, Compression, InputFormat};
    use coo_assembler::mpi::{DistBuilder, DistOptions};
    use coo_assembler::{AssembleOptions, DType};
    use mpi::traits::*;
    use std::io::Read;
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
        let path = Path::new(&a.input);
        check_output_is_not_input(path, &a.output)?;
        let mut head = [0u8; 32];
        let n = std::fs::File::open(path)
            .and_then(|mut f| f.read(&mut head))
            .map_err(|e| coo_assembler::Error::io("open", path, e))?;
        if input::detect(&head[..n], &a.input)? != Compression::None {
            return Err(usage(
                "--mpi reads uncompressed bin input (ranks read byte ranges); decompress it first",
            ));
        }
        match a.format.map(InputFormat::from).or(sniff_format(&head[..n])) {
            None | Some(InputFormat::Bin) => {}
            Some(f) => {
                return Err(usage(format!(
                    "--mpi reads bin input (record-aligned byte ranges per rank), not {f:?}"
                )))
            }
        }
        let Some(shape) = &a.shape else {
            return Err(usage("--shape is required for bin input"));
        };
        let shape = parse_list(shape, "--shape")?;
        let dtype = a.dtype.map_or(DType::F64, DType::from);
        let mut opts = assemble_options(a)?;
        // One sorter thread per rank unless told: ranks share the machine.
        opts.threads = a.threads.unwrap_or(1);
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
            anyhow::bail!("another rank of the MPI job refused the arguments or the input; nothing was written");
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
                        human_bytes(m[4])
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
                    human_bytes(s.file_bytes)
                );
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}
