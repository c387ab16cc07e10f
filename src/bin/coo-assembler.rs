//! The coo-assembler command line: assemble contributions into a Hurray
//! COO file, and inspect such files.

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use coo_assembler::hurray::KvValue;
use coo_assembler::input::{self, InputFormat};
use coo_assembler::options::parse_size;
use coo_assembler::read::{CooTensor, HurrayFile, ReadOptions};
use coo_assembler::{
    AssembleOptions, Builder, DType, DuplicatePolicy, Error, NonFinitePolicy, Value,
};
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::path::PathBuf;
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
    Assemble(AssembleArgs),
    /// Describe a file: container, tensors, shapes, nnz, statistics, metadata.
    Info {
        /// The Hurray file.
        file: PathBuf,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print the value at one coordinate (zero when no entry is stored).
    Get {
        /// The Hurray file.
        file: PathBuf,
        /// The coordinate, comma separated, 0-based: e.g. 3,4.
        index: String,
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
        #[command(flatten)]
        pick: Pick,
    },
    /// Check every rule of the format and the content (bounds, order,
    /// duplicates, statistics, checksums); prints OK or each problem.
    Verify {
        /// The Hurray file.
        file: PathBuf,
        #[command(flatten)]
        pick: Pick,
    },
}

#[derive(Args)]
struct Pick {
    /// The tensor to use when the file holds several.
    #[arg(long, value_name = "NAME")]
    tensor: Option<String>,
}

#[derive(Args)]
struct AssembleArgs {
    /// Extent of each dimension, comma separated (e.g. 1000,1000). Optional
    /// for --format mtx, whose header gives it.
    #[arg(long, value_name = "N,N,...")]
    shape: Option<String>,
    /// Element type: f64, f32, f16, bf16, i8, u8, i16, u16, i32, u32, i64, u64.
    #[arg(long, default_value = "f64")]
    dtype: String,
    /// Input file, or - for standard input.
    #[arg(long, value_name = "FILE|-")]
    input: String,
    /// bin: records of rank u64 LE indices then one LE value, no header;
    /// text: "i j ... value" per line, 0-based, # comments;
    /// mtx: MatrixMarket coordinate (real, integer, pattern; general,
    /// symmetric, skew-symmetric), 1-based.
    #[arg(long, default_value = "bin")]
    format: String,
    /// Memory for all buffers, with units: 8MiB, 256MiB, 1GiB, or bytes.
    #[arg(long, default_value = "256MiB", value_name = "SIZE")]
    memory_budget: String,
    /// Sorting threads (default: number of cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Directory for spill files (default: $TMPDIR or /tmp).
    #[arg(long, value_name = "DIR")]
    temp_dir: Option<PathBuf>,
    /// How contributions to one coordinate combine: sum (exact, the
    /// default), min, max, last, or error.
    #[arg(long, default_value = "sum")]
    duplicates: String,
    /// Drop entries whose combined value is zero.
    #[arg(long)]
    drop_zeros: bool,
    /// Add float duplicates with plain f64 arithmetic in arrival order
    /// instead of exactly: faster, but the last bits then depend on the
    /// order, threads and budget (exact sums are bit-reproducible).
    #[arg(long)]
    fast_sums: bool,
    /// Refuse NaN contributions (nan) or NaN and infinite ones (non-finite).
    #[arg(long, value_name = "nan|non-finite")]
    reject: Option<String>,
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

/// Failures that are the user's command line, not the data: exit 2.
#[derive(Debug)]
struct Usage(String);
impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Usage {}

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
            if e.downcast_ref::<Usage>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.cmd {
        Cmd::Assemble(a) => assemble(a),
        Cmd::Info { file, json } => info(&file, json),
        Cmd::Get { file, index, pick } => get(&file, &index, &pick),
        Cmd::Dump { file, limit, pick } => dump(&file, limit, &pick),
        Cmd::Verify { file, pick } => verify(&file, &pick),
    }
}

fn open(path: &PathBuf, permissive: bool) -> anyhow::Result<HurrayFile> {
    HurrayFile::open_with(path, ReadOptions { permissive })
        .with_context(|| format!("cannot read {}", path.display()))
}

fn pick<'f>(f: &'f HurrayFile, pick: &Pick) -> anyhow::Result<CooTensor<'f>> {
    Ok(match &pick.tensor {
        Some(name) => f.tensor(name)?,
        None => f
            .only_tensor()
            .map_err(|e| usage(format!("{e}; choose one with --tensor NAME")))?,
    })
}

fn parse_list(s: &str, what: &str) -> anyhow::Result<Vec<u64>> {
    s.split(',')
        .map(|t| {
            let t = t.trim();
            // Accept 1e6 style extents, exactly integral only.
            t.parse::<u64>().or_else(|_| match t.parse::<f64>() {
                Ok(f) if f >= 0.0 && f.fract() == 0.0 && f < 1.8e19 => Ok(f as u64),
                _ => Err(usage(format!(
                    "{what}: {t:?} is not a non-negative integer"
                ))),
            })
        })
        .collect()
}

fn fmt_value(v: Value) -> String {
    v.to_string()
}

fn get(path: &PathBuf, index: &str, p: &Pick) -> anyhow::Result<ExitCode> {
    let f = open(path, true)?;
    let t = pick(&f, p)?;
    let idx = parse_list(index, "index")?;
    let v = t.get(&idx).map_err(|e| match e {
        Error::WrongRank { .. } | Error::IndexOutOfRange { .. } => usage(e.to_string()),
        other => other.into(),
    })?;
    println!("{}", fmt_value(v));
    Ok(ExitCode::SUCCESS)
}

fn dump(path: &PathBuf, limit: Option<u64>, p: &Pick) -> anyhow::Result<ExitCode> {
    let f = open(path, true)?;
    let t = pick(&f, p)?;
    let out = io::stdout();
    let mut w = io::BufWriter::with_capacity(1 << 16, out.lock());
    let mut line = String::new();
    for (idx, v) in t.iter().take(limit.unwrap_or(u64::MAX) as usize) {
        line.clear();
        for i in idx {
            let _ = write!(line, "{i} ");
        }
        let _ = writeln!(line, "{}", fmt_value(v));
        if let Err(e) = w.write_all(line.as_bytes()) {
            // A closed pipe (`| head`) is a normal way to stop reading.
            if e.kind() == io::ErrorKind::BrokenPipe {
                return Ok(ExitCode::SUCCESS);
            }
            return Err(e.into());
        }
    }
    match w.flush() {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

fn verify(path: &PathBuf, p: &Pick) -> anyhow::Result<ExitCode> {
    let f = open(path, true)?;
    let problems = match &p.tensor {
        Some(_) => pick(&f, p)?.verify(),
        None => f.verify(),
    };
    if problems.is_empty() {
        println!("OK");
        Ok(ExitCode::SUCCESS)
    } else {
        for pr in &problems {
            println!("{pr}");
        }
        eprintln!(
            "coo-assembler: {} problem(s) found in {}",
            problems.len(),
            path.display()
        );
        Ok(ExitCode::from(1))
    }
}

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_f64(v: f64) -> String {
    if v.is_finite() {
        format!("{v:?}")
    } else {
        "null".into()
    }
}

fn kv_text(v: &KvValue, json: bool) -> String {
    match v {
        KvValue::String(s) => {
            if json {
                json_str(s)
            } else {
                s.clone()
            }
        }
        KvValue::I64(x) => x.to_string(),
        KvValue::U64(x) => x.to_string(),
        KvValue::F64(x) => {
            if json {
                json_f64(*x)
            } else {
                x.to_string()
            }
        }
        KvValue::Bool(b) => b.to_string(),
        KvValue::Bytes(b) => {
            let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
            if json {
                json_str(&hex)
            } else {
                format!("0x{hex}")
            }
        }
        KvValue::Array(items) => {
            let parts: Vec<String> = items.iter().map(|i| kv_text(i, json)).collect();
            format!("[{}]", parts.join(", "))
        }
    }
}

fn info(path: &PathBuf, json: bool) -> anyhow::Result<ExitCode> {
    let f = open(path, true)?;
    let h = f.header();
    let mut o = String::new();
    if json {
        let _ = write!(
            o,
            "{{\"file\":{},\"bytes\":{},\"container_version\":\"1.0\",\"alignment\":{},\"flags\":{},\"metadata\":{{",
            json_str(&path.display().to_string()),
            f.len(),
            h.alignment,
            h.flags
        );
        let kv: Vec<String> = f
            .kv()
            .iter()
            .map(|(k, v)| format!("{}:{}", json_str(k), kv_text(v, true)))
            .collect();
        o.push_str(&kv.join(","));
        o.push_str("},\"tensors\":[");
        let mut first = true;
        for t in f.tensors() {
            if !first {
                o.push(',');
            }
            first = false;
            let d = t.descriptor();
            let shape: Vec<String> = d.shape.iter().map(u64::to_string).collect();
            let _ = write!(
                o,
                "{{\"name\":{},\"dtype\":\"{}\",\"shape\":[{}],\"nnz\":{},\"is_sorted\":{},\"values_bytes\":{},\"indices_bytes\":{}",
                json_str(t.name()),
                d.dtype,
                shape.join(","),
                d.nnz,
                d.is_sorted,
                d.values.byte_size,
                d.indices.byte_size
            );
            if let Some(s) = &d.statistics {
                let _ = write!(
                    o,
                    ",\"statistics\":{{\"computed_mask\":{},\"nnz\":{},\"sparsity_ratio\":{},\"min\":{},\"max\":{},\"abs_max\":{},\"mean\":{},\"stddev\":{},\"has_nan\":{},\"has_inf\":{}}}",
                    s.computed_mask,
                    s.nnz,
                    json_f64(s.sparsity_ratio),
                    json_f64(s.value_min),
                    json_f64(s.value_max),
                    json_f64(s.value_abs_max),
                    json_f64(s.value_mean),
                    json_f64(s.value_stddev),
                    s.has_nan,
                    s.has_inf
                );
            }
            o.push('}');
        }
        o.push_str("]}");
    } else {
        let names: Vec<&str> = f.tensor_names().collect();
        let _ = writeln!(o, "file:       {} ({} bytes)", path.display(), f.len());
        let _ = writeln!(
            o,
            "container:  Hurray 1.0, buffer alignment {} B, flags 0x{:x}",
            h.alignment, h.flags
        );
        let _ = writeln!(o, "tensors:    {}", names.len());
        for (k, v) in f.kv() {
            let _ = writeln!(o, "metadata:   {k} = {}", kv_text(v, false));
        }
        for t in f.tensors() {
            let d = t.descriptor();
            let shape: Vec<String> = d.shape.iter().map(u64::to_string).collect();
            let _ = writeln!(o, "tensor {:?}:", t.name());
            let _ = writeln!(o, "  dtype:    {}", d.dtype);
            let _ = writeln!(o, "  shape:    [{}]", shape.join(", "));
            let _ = writeln!(o, "  nnz:      {}", d.nnz);
            let _ = writeln!(o, "  sorted:   {}", if d.is_sorted { "yes" } else { "no" });
            let _ = writeln!(o, "  values:   {} bytes", d.values.byte_size);
            let _ = writeln!(o, "  indices:  {} bytes", d.indices.byte_size);
            match &d.statistics {
                Some(s) => {
                    let _ = writeln!(
                        o,
                        "  stats:    sparsity {} min {} max {} abs_max {} mean {} stddev {} nan {} inf {} (mask 0x{:02x})",
                        s.sparsity_ratio, s.value_min, s.value_max, s.value_abs_max, s.value_mean, s.value_stddev, s.has_nan, s.has_inf, s.computed_mask
                    );
                }
                None => {
                    let _ = writeln!(o, "  stats:    none");
                }
            }
        }
    }
    println!("{}", o.trim_end());
    Ok(ExitCode::SUCCESS)
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

fn assemble(a: AssembleArgs) -> anyhow::Result<ExitCode> {
    let dtype: DType = a.dtype.parse().map_err(|e: Error| usage(e.to_string()))?;
    let format: InputFormat = a.format.parse().map_err(|e: Error| usage(e.to_string()))?;
    let mut opts = AssembleOptions {
        memory_budget: parse_size(&a.memory_budget)
            .map_err(|e| usage(format!("--memory-budget: {e}")))?,
        duplicates: a
            .duplicates
            .parse::<DuplicatePolicy>()
            .map_err(|e| usage(e.to_string()))?,
        drop_zeros: a.drop_zeros,
        exact_sums: !a.fast_sums,
        tensor_name: a.name.clone(),
        temp_dir: a.temp_dir.clone(),
        ..AssembleOptions::default()
    };
    if let Some(t) = a.threads {
        opts.threads = t;
    }
    opts.non_finite = match a.reject.as_deref() {
        None => NonFinitePolicy::Keep,
        Some("nan") => NonFinitePolicy::RejectNan,
        Some("non-finite") => NonFinitePolicy::RejectNonFinite,
        Some(o) => return Err(usage(format!("--reject {o:?}: use nan or non-finite"))),
    };
    let mut mapped: Option<memmap2::Mmap> = None;
    let (source, total, reader): (String, Option<u64>, Box<dyn Read>) = if a.input == "-" {
        ("<stdin>".into(), None, Box::new(io::stdin().lock()))
    } else {
        let p = PathBuf::from(&a.input);
        let file =
            std::fs::File::open(&p).map_err(|e| anyhow::Error::new(Error::io("open", &p, e)))?;
        let meta = file.metadata().ok();
        let len = meta.as_ref().map(|m| m.len());
        if format == InputFormat::Bin && meta.is_some_and(|m| m.is_file() && m.len() > 0) {
            // SAFETY: the map is only read; a file truncated by another
            // process while we read it would raise SIGBUS (documented).
            if let Ok(m) = unsafe { memmap2::Mmap::map(&file) } {
                let _ = m.advise(memmap2::Advice::Sequential);
                mapped = Some(m);
            }
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
        Error::InvalidOptions(_) | Error::BudgetTooSmall { .. } => usage(e.to_string()),
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
    let page = 4096u64;
    let mut released = 0u64;
    let mut progress = |n: u64| {
        if let Some(b) = &bar {
            b.set_position(n);
        }
        // Pages of a mapped input that were already parsed leave our
        // resident set (the page cache keeps them): without this the whole
        // input would count against the memory budget.
        if let Some(m) = &mapped {
            let upto = n / page * page;
            if upto >= released + (4 << 20) {
                // SAFETY: a read-only private file mapping; the range was
                // parsed and is never read again, and re-reading it would
                // only fault the same file bytes back in.
                let _ = unsafe {
                    m.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        released as usize,
                        (upto - released) as usize,
                    )
                };
                released = upto;
            }
        }
    };
    let pushed = match format {
        InputFormat::Bin => match &mapped {
            // A mapped regular file is parsed in place: no read() copies.
            Some(m) => input::push_bin_bytes(&mut builder, m, rank, dtype, &source, &mut progress)?,
            None => input::push_bin(&mut builder, reader, rank, dtype, &source, &mut progress)?,
        },
        InputFormat::Text => {
            input::push_text(&mut builder, reader, rank, dtype, &source, &mut progress)?
        }
        InputFormat::Mtx => {
            let h = mtx.ok_or_else(|| usage("internal: missing MatrixMarket header"))?;
            input::push_mtx(
                &mut builder,
                reader.by_ref(),
                &h,
                dtype,
                &source,
                &mut progress,
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

// BufRead is used through input::push_text / push_mtx generics.
#[allow(dead_code)]
fn _assert_bufread<R: BufRead>(_: R) {}
