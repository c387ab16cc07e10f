//! Convert one tensor of a Hurray file into another layout (COO, CSR, CSC),
//! out of core, under a memory budget. The input may be a partition
//! composite, converted as its one logical tensor (see [Composites](#composites)).
//!
//! A plain input is validated by the reader ([`HurrayFile`], strict: every
//! structural rule), then its buffers are read with positioned reads
//! through small buffers (not through the map), so resident memory does
//! not grow with the file.
//! Two paths:
//! - **One streaming pass** when the input is already in the output's
//!   order: sorted COO or CSR into COO or CSR, CSC into CSC. Entries go
//!   straight into the [`FileWriter`], which checks the order (a CSR whose
//!   columns are not increasing within a row, or an unsorted COO flagged
//!   sorted, is an error naming the entry).
//! - **Through the external sort** otherwise (unsorted COO, CSR <-> CSC,
//!   COO -> CSC, ...): every entry is pushed into a [`Builder`] for the
//!   output layout, so the result is what assembling the same entries would
//!   give. Duplicate coordinates (possible only in unsorted COO or a
//!   damaged file) are refused, naming the coordinate, unless
//!   [`ConvertOptions::duplicates`] says how to combine them.
//!
//! Both paths write through the same writer with the same options as
//! [`Builder::finish`], so converting an assembled COO file gives the same
//! bytes as assembling its contributions straight into the other layout
//! (values, statistics and KV checksums included). The output appears
//! whole or not at all, and may be the input itself: converting a file in
//! place is documented (`coo-assembler convert K.hrry K.hrry --to csr`),
//! so this is the one writer that passes `ReplaceInput::Allow` to the
//! output rule (`crate::fs::output`). The input is read while the output
//! is written beside it, and replaced by the rename once the new file is
//! whole.
//!
//! # Composites
//! A partition composite ([`CompositeFile`], found by [`crate::open`]) is
//! one logical tensor, named after its head, and converts like one: its
//! members are read through the map (pages given back behind the cursors).
//! Row bands of row-major members (sorted COO or CSR: what
//! [`crate::composite::join`] and the MPI job write from such parts) are
//! in global row-major order already, so into COO or CSR they stream in
//! one pass; every other case (a CSC member, boxes that split the columns,
//! CSC output) pushes member after member into the external sort. Either
//! way the bytes are those of the same entries assembled into one plain
//! file, and the output appears through one atomic publish.

use crate::assemble::builder::Builder;
use crate::assemble::summary::Summary;
use crate::budget::Budget;
use crate::element::{DType, Value};
use crate::error::{Error, Result};
use crate::fs::ctx::IoCtx;
use crate::fs::output::ReplaceInput;
use crate::hurray::kv::{CHECKSUM_KEY_PREFIX, KEY_WRITER};
use crate::options::{AssembleOptions, DEFAULT_MEMORY_BUDGET, DuplicatePolicy, OutputLayout};
use crate::progress::{Progress, Step};
use crate::read::{CompositeFile, HurrayFile, Opened, ReadOptions, open_with_io};
use crate::write::{FileWriter, WriteOptions};
use std::fs::File;
use std::path::{Path, PathBuf};

/// Bytes of each input read buffer (values, indices, pointers).
const READ_BUFFER: usize = 256 << 10;
/// What the budget keeps for reading the input: three read buffers.
const STREAMS: u64 = 3 * READ_BUFFER as u64;

/// Options of [`convert`].
#[derive(Clone, Debug)]
pub struct ConvertOptions {
    /// The layout to write.
    pub to: OutputLayout,
    /// CSF output: the dimension stored at each level (`None`: the
    /// identity); see [`AssembleOptions::mode_order`].
    pub mode_order: Option<Vec<usize>>,
    /// Bytes all buffers may use (read buffers, sort, merge, writer).
    /// Default [`DEFAULT_MEMORY_BUDGET`].
    pub memory_budget: u64,
    /// The tensor to convert; `None` takes the file's only tensor. A
    /// partition composite is one tensor, named after its head.
    pub tensor: Option<String>,
    /// The name of the tensor written; `None` (default) keeps the input's.
    pub output_name: Option<String>,
    /// How duplicate coordinates combine; `None` (default) refuses them.
    pub duplicates: Option<DuplicatePolicy>,
    /// Where the external sort spills (default: the system temp dir).
    pub temp_dir: Option<PathBuf>,
    /// Sorting threads. Default: the number of cores.
    pub threads: usize,
    /// Where the conversion says how far it has come (reading the input,
    /// then the sort's merge and write): read it from another thread.
    pub progress: Progress,
    /// File operations (fault injection in tests).
    pub io: IoCtx,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        let a = AssembleOptions::default();
        ConvertOptions {
            to: OutputLayout::Coo,
            mode_order: None,
            memory_budget: DEFAULT_MEMORY_BUDGET,
            tensor: None,
            output_name: None,
            duplicates: None,
            temp_dir: None,
            threads: a.threads,
            progress: Progress::new(),
            io: IoCtx::new(),
        }
    }
}

/// What [`convert`] did.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ConvertSummary {
    /// The file written.
    pub path: PathBuf,
    /// The tensor written (named as the input's unless
    /// [`ConvertOptions::output_name`] says otherwise).
    pub tensor: String,
    /// Input layout; for a composite, its first member's.
    pub from: OutputLayout,
    /// Output layout.
    pub to: OutputLayout,
    /// Entries written.
    pub nnz: u64,
    /// Size of the output.
    pub file_bytes: u64,
    /// The assembly's summary when the entries went through the external
    /// sort; `None` for a single streaming pass.
    pub sorted_by: Option<Summary>,
    /// `Some(members)` when the input was a partition composite.
    pub members: Option<usize>,
}

/// What is converted, for the summary.
struct What {
    /// The name written.
    tensor: String,
    from: OutputLayout,
    members: Option<usize>,
}

/// How the entries were written.
enum Written {
    /// In one pass: entries and file bytes.
    Pass(u64, u64),
    /// Through the external sort.
    Sorted(Box<Summary>),
}

fn summary(output: &Path, what: What, to: OutputLayout, written: Written) -> ConvertSummary {
    let (nnz, file_bytes, sorted_by) = match written {
        Written::Pass(nnz, bytes) => (nnz, bytes, None),
        Written::Sorted(s) => (s.nnz, s.file_bytes, Some(*s)),
    };
    ConvertSummary {
        path: output.to_path_buf(),
        tensor: what.tensor,
        from: what.from,
        to,
        nnz,
        file_bytes,
        sorted_by,
        members: what.members,
    }
}

/// Where one tensor's buffers lie in the input file.
struct Located {
    name: String,
    dtype: DType,
    shape: Vec<u64>,
    layout: OutputLayout,
    sorted: bool,
    nnz: u64,
    values: u64,
    indices: u64,
    pointers: u64,
}

fn bad(path: &Path, offset: u64, detail: String) -> Error {
    Error::invalid(format!("file {}", path.display()), offset, detail)
}

/// Find the tensor and its buffers in `f`, opened by the validating reader:
/// every structural rule of the container and of the descriptor is checked
/// (strict open), without touching the buffers' pages. The map is dropped
/// before the streaming starts; the buffers are then read with positioned
/// reads through small buffers, so resident memory stays inside the budget.
fn locate(f: &HurrayFile, tensor: Option<&str>) -> Result<Located> {
    let t = match tensor {
        Some(n) => f.tensor_view(n)?,
        None if f.tensor_count() == 1 => f.only_tensor_view()?,
        None => {
            let available = f.tensor_names().collect::<Vec<_>>().join(", ");
            return Err(Error::InvalidOptions(format!(
                "the file holds {} tensors ({available}): name one",
                f.tensor_count()
            )));
        }
    };
    let [values, indices, pointers] = f.buffer_offsets(t.name())?;
    Ok(Located {
        name: t.name().to_string(),
        dtype: t.dtype(),
        shape: t.shape().to_vec(),
        layout: t.layout(),
        sorted: t.as_coo().is_none_or(|c| c.is_sorted()),
        nnz: t.nnz(),
        values,
        indices,
        pointers,
    })
}

/// Sequential positioned reads of one buffer through a fixed buffer.
struct Stream<'a> {
    io: &'a IoCtx,
    file: &'a File,
    path: &'a Path,
    next: u64,
    end: u64,
    buf: Vec<u8>,
    at: usize,
}

impl<'a> Stream<'a> {
    fn new(io: &'a IoCtx, file: &'a File, path: &'a Path, start: u64, len: u64) -> Stream<'a> {
        Stream {
            io,
            file,
            path,
            next: start,
            end: start + len,
            buf: Vec::with_capacity(READ_BUFFER),
            at: 0,
        }
    }

    /// The next `n` bytes (`n` <= 512); the caller knows they exist.
    #[inline]
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.buf.len() - self.at < n {
            self.refill(n)?;
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    #[inline]
    fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    #[cold]
    fn refill(&mut self, n: usize) -> Result<()> {
        self.buf.drain(..self.at);
        self.at = 0;
        let have = self.buf.len();
        let want = ((READ_BUFFER - have) as u64).min(self.end - self.next) as usize;
        if have + want < n {
            return Err(bad(self.path, self.next, "buffer ends early".into()));
        }
        self.buf.resize(have + want, 0);
        self.io
            .read_exact_at(self.file, &mut self.buf[have..], self.next, self.path)?;
        self.next += want as u64;
        Ok(())
    }
}

/// Convert one tensor of `input` (or the partition composite it holds)
/// into `opts.to`, written to `output` (which may be `input`: rewritten in
/// place, atomically); see the [module docs](self).
pub fn convert(input: &Path, output: &Path, opts: &ConvertOptions) -> Result<ConvertSummary> {
    match open_with_io(input, ReadOptions::default(), &opts.io)? {
        Opened::Plain(f) => {
            let t = locate(&f, opts.tensor.as_deref())?;
            if t.layout == OutputLayout::Csf {
                keeps_everything_in_place(&f, &t.name, input, output, &opts.io)?;
                return from_csf(&f, &t, output, opts);
            }
            keeps_everything_in_place(&f, &t.name, input, output, &opts.io)?;
            drop(f);
            plain(input, output, opts, t)
        }
        Opened::Composite(c) => composite(&c, output, opts),
    }
}

/// A conversion rewrites its input in place only when the output holds
/// all the input held: one tensor, and no metadata but the checksums the
/// writer makes again. Otherwise (a plan file, say: four tensors and its
/// keys) it is refused before anything is written.
fn keeps_everything_in_place(
    f: &HurrayFile,
    tensor: &str,
    input: &Path,
    output: &Path,
    io: &IoCtx,
) -> Result<()> {
    let Some(id) = f.file_id() else {
        return Ok(());
    };
    let same = match io.metadata(output) {
        Ok(m) => id.is(&m),
        Err(_) => false,
    };
    if !same {
        return Ok(());
    }
    let others: Vec<&str> = f.tensor_names().filter(|n| *n != tensor).collect();
    let keys: Vec<&str> = f
        .kv()
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|k| *k != KEY_WRITER && !k.starts_with(CHECKSUM_KEY_PREFIX))
        .collect();
    if others.is_empty() && keys.is_empty() {
        return Ok(());
    }
    let mut lost = Vec::new();
    if !others.is_empty() {
        lost.push(format!(
            "{} other tensor(s) ({})",
            others.len(),
            others.join(", ")
        ));
    }
    if !keys.is_empty() {
        lost.push(format!(
            "{} metadata key(s) ({})",
            keys.len(),
            keys.join(", ")
        ));
    }
    Err(Error::InvalidOptions(format!(
        "converting tensor {tensor:?} of {} in place would drop its {}: write the converted \
         tensor to another file",
        input.display(),
        lost.join(" and ")
    )))
}

/// The writer of a one-pass conversion, once the budget is known to hold
/// the read streams and the writer's buffers.
fn one_pass_writer(output: &Path, opts: &ConvertOptions) -> Result<FileWriter> {
    let wopts = WriteOptions {
        io: opts.io.clone(),
        ..WriteOptions::default()
    };
    let mut budget = Budget::new(opts.memory_budget);
    budget.take("the read streams", STREAMS)?;
    budget.take("the writer's buffers", 3 * wopts.buffer_bytes as u64)?;
    FileWriter::create_for(output, wopts, &[], ReplaceInput::Allow)
}

/// The builder of a conversion through the external sort: what is left of
/// the budget once the read streams have theirs.
fn sorter(opts: &ConvertOptions, name: &str, shape: &[u64], dtype: DType) -> Result<Builder> {
    let mut budget = Budget::new(opts.memory_budget);
    budget.take("the read streams", STREAMS)?;
    budget.inside(|left| {
        let aopts = AssembleOptions {
            memory_budget: left,
            temp_dir: opts.temp_dir.clone(),
            threads: opts.threads,
            duplicates: opts.duplicates.unwrap_or(DuplicatePolicy::Error),
            layout: opts.to,
            mode_order: opts.mode_order.clone(),
            tensor_name: name.to_string(),
            progress: opts.progress.clone(),
            io: opts.io.clone(),
            ..AssembleOptions::default()
        };
        Builder::new(shape, dtype, aopts)
    })
}

/// Moves the conversion's progress as entries are read: a step of the
/// input's bytes, counted every [`Tally::EVERY`] entries.
struct Tally<'a> {
    progress: &'a Progress,
    entry: u64,
    since: u64,
}

impl<'a> Tally<'a> {
    const EVERY: u64 = 1 << 16;

    fn start(progress: &'a Progress, nnz: u64, bytes: u64) -> Tally<'a> {
        progress.start(Step::Read, bytes);
        Tally {
            progress,
            entry: bytes / nnz.max(1),
            since: 0,
        }
    }

    #[inline]
    fn tick(&mut self) {
        self.since += 1;
        if self.since == Self::EVERY {
            self.progress.add(self.since * self.entry);
            self.since = 0;
        }
    }
}

/// Push one entry, its value as it was read.
/// The converted tensor `what` (of `shape` and `dtype`) written to
/// `output`: in one pass through a tensor writer when `one_pass` (the
/// entries then come in the output's storage order), through the
/// external sort otherwise. `feed(one_pass, put)` gives every entry to
/// `put`.
fn write_converted(
    output: &Path,
    opts: &ConvertOptions,
    what: &What,
    (shape, dtype): (&[u64], DType),
    one_pass: bool,
    feed: impl FnOnce(bool, &mut dyn FnMut(&[u64], Value) -> Result<()>) -> Result<()>,
) -> Result<Written> {
    if one_pass {
        let mut fw = one_pass_writer(output, opts)?;
        let mut tw = fw.begin_tensor_in(
            &what.tensor,
            dtype,
            shape,
            opts.to,
            opts.mode_order.as_deref(),
        )?;
        feed(true, &mut |idx, v| tw.push_value(idx, v))?;
        let nnz = tw.finish()?.nnz;
        Ok(Written::Pass(nnz, fw.finish()?.bytes))
    } else {
        let mut b = sorter(opts, &what.tensor, shape, dtype)?;
        feed(false, &mut |idx, v| b.push(idx, v))?;
        Ok(Written::Sorted(Box::new(b.finish(output)?)))
    }
}

/// The name written for an input tensor called `name`.
fn output_name(opts: &ConvertOptions, name: &str) -> String {
    opts.output_name.clone().unwrap_or_else(|| name.to_string())
}

/// A plain tensor, streamed from its buffers.
fn plain(input: &Path, output: &Path, opts: &ConvertOptions, t: Located) -> Result<ConvertSummary> {
    let io = &opts.io;
    let file = io.open(input)?;
    let rank = t.shape.len();
    let mode_order = opts.mode_order.as_deref();
    opts.to.check_layout(rank, mode_order)?;
    let row_major = opts.to.storage_order(rank, mode_order) == (0..rank).collect::<Vec<_>>();
    let one_pass = match (t.layout, opts.to) {
        (OutputLayout::Coo, OutputLayout::Coo | OutputLayout::Csr) => t.sorted,
        (OutputLayout::Coo, OutputLayout::Csf) => t.sorted && row_major,
        (OutputLayout::Csr, OutputLayout::Coo | OutputLayout::Csr) => true,
        (OutputLayout::Csc, OutputLayout::Csc) => true,
        _ => false,
    };
    let mut values = Stream::new(io, &file, input, t.values, t.nnz * t.dtype.width() as u64);
    let idx_len = if t.layout == OutputLayout::Coo {
        t.shape.len() as u64
    } else {
        1
    };
    let mut indices = Stream::new(io, &file, input, t.indices, t.nnz * 8 * idx_len);
    let major_extent = t.shape[t.layout.major_dim()];
    let ptr_len = if t.layout == OutputLayout::Coo {
        0
    } else {
        (major_extent + 1) * 8
    };
    let mut ptr = Stream::new(io, &file, input, t.pointers, ptr_len);
    let mut entries = Entries::new(&t, &mut ptr, input)?;
    let mut idx = vec![0u64; t.shape.len()];
    let bytes = t.nnz * (t.dtype.width() as u64 + 8 * idx_len) + ptr_len;
    let mut tally = Tally::start(&opts.progress, t.nnz, bytes);
    let what = What {
        tensor: output_name(opts, &t.name),
        from: t.layout,
        members: None,
    };
    let shape = (&t.shape[..], t.dtype);
    let written = write_converted(output, opts, &what, shape, one_pass, |_, put| {
        while entries.next(&mut indices, &mut ptr, &mut idx)? {
            tally.tick();
            put(&idx, t.dtype.decode(values.take(t.dtype.width())?))?;
        }
        Ok(())
    })?;
    opts.progress.idle();
    Ok(summary(output, what, opts.to, written))
}

/// A CSF tensor, walked in storage order through the map (the pages of
/// every level given back behind the walk): in one pass into CSF of the
/// same mode order, or into COO when that order is the identity; through
/// the external sort otherwise.
fn from_csf(
    f: &HurrayFile,
    t: &Located,
    output: &Path,
    opts: &ConvertOptions,
) -> Result<ConvertSummary> {
    let view = f.tensor_view(&t.name)?;
    let Some(c) = view.as_csf() else {
        return Err(Error::Poisoned("convert (a CSF tensor's view)"));
    };
    let rank = t.shape.len();
    let stored: Vec<usize> = c.mode_order().iter().map(|&d| d as usize).collect();
    let mode_order = opts.mode_order.as_deref();
    opts.to.check_layout(rank, mode_order)?;
    let one_pass = opts.to.storage_order(rank, mode_order) == stored
        && (opts.to == OutputLayout::Csf || stored.iter().enumerate().all(|(l, &d)| l == d));
    let what = What {
        tensor: output_name(opts, &t.name),
        from: OutputLayout::Csf,
        members: None,
    };
    let entry = rank as u64 * 8 + t.dtype.width() as u64;
    let mut tally = Tally::start(&opts.progress, t.nnz, t.nnz * entry);
    let shape = (&t.shape[..], t.dtype);
    let written = write_converted(output, opts, &what, shape, one_pass, |_, put| {
        view.try_for_each(|idx, v| {
            tally.tick();
            put(idx, v)
        })
    })?;
    opts.progress.idle();
    Ok(summary(output, what, opts.to, written))
}

/// A partition composite, read through its members: in one pass when its
/// iteration streams in the output's order (row bands of row-major
/// members, into COO or CSR), through the external sort otherwise.
fn composite(c: &CompositeFile, output: &Path, opts: &ConvertOptions) -> Result<ConvertSummary> {
    if let Some(t) = opts.tensor.as_deref().filter(|&t| t != c.name()) {
        return Err(Error::TensorNotFound {
            name: t.to_string(),
            available: format!("{:?} (a partition composite, read as one tensor)", c.name()),
        });
    }
    opts.to.check_rank(c.shape().len())?;
    if opts.to == OutputLayout::Csf {
        return Err(Error::Unsupported(
            "a partition composite converts into coo, csr or csc; convert the result into csf"
                .into(),
        ));
    }
    let what = What {
        tensor: output_name(opts, c.name()),
        from: c
            .members()
            .next()
            .map_or(OutputLayout::Coo, |(t, _)| t.layout()),
        members: Some(c.members().count()),
    };
    let entry = c.shape().len() as u64 * 8 + c.dtype().width() as u64;
    let mut tally = Tally::start(&opts.progress, c.nnz(), c.nnz() * entry);
    let one_pass = c.streams_in_order() && opts.to != OutputLayout::Csc;
    let shape = (c.shape(), c.dtype());
    let written = write_converted(output, opts, &what, shape, one_pass, |in_order, put| {
        // In storage order for one pass; in any order for the sort.
        let mut each = |e: Result<(Vec<u64>, Value)>| -> Result<()> {
            tally.tick();
            let (idx, v) = e?;
            put(&idx, v)
        };
        if in_order {
            c.iter().try_for_each(&mut each)
        } else {
            c.entries_unordered().try_for_each(&mut each)
        }
    })?;
    opts.progress.idle();
    Ok(summary(output, what, opts.to, written))
}

/// Walks the coordinates of a tensor in storage order.
struct Entries {
    layout: OutputLayout,
    nnz: u64,
    seen: u64,
    /// CSR/CSC: the current major index and where the next one starts.
    major: u64,
    major_extent: u64,
    major_end: u64,
    path: PathBuf,
}

impl Entries {
    fn new(t: &Located, ptr: &mut Stream<'_>, path: &Path) -> Result<Entries> {
        let mut e = Entries {
            layout: t.layout,
            nnz: t.nnz,
            seen: 0,
            major: 0,
            major_extent: t.shape[t.layout.major_dim()],
            major_end: 0,
            path: path.to_path_buf(),
        };
        if t.layout.is_compressed() {
            let first = ptr.u64()?;
            if first != 0 {
                return Err(e.ptr_error(0, format!("pointer[0] is {first}, must be 0")));
            }
            // A matrix with no rows (columns) has the one pointer only.
            if e.major_extent > 0 {
                e.major_end = ptr.u64()?;
                e.check_ptr(0, 0)?;
            }
        }
        Ok(e)
    }

    fn ptr_error(&self, at: u64, detail: String) -> Error {
        let what = if self.layout == OutputLayout::Csc {
            "col_ptr"
        } else {
            "row_ptr"
        };
        Error::invalid(format!("{what} of {}", self.path.display()), at, detail)
    }

    fn check_ptr(&self, prev: u64, m: u64) -> Result<()> {
        if self.major_end < prev || self.major_end > self.nnz {
            return Err(self.ptr_error(
                m + 1,
                format!(
                    "pointer[{}] = {} breaks pointer[{m}] = {prev} <= pointer <= nnz = {}",
                    m + 1,
                    self.major_end,
                    self.nnz
                ),
            ));
        }
        Ok(())
    }

    /// Fill `idx` with the next coordinate; false at the end.
    #[inline]
    fn next(
        &mut self,
        indices: &mut Stream<'_>,
        ptr: &mut Stream<'_>,
        idx: &mut [u64],
    ) -> Result<bool> {
        if self.layout == OutputLayout::Coo {
            if self.seen == self.nnz {
                return Ok(false);
            }
            for i in idx.iter_mut() {
                *i = indices.u64()?;
            }
            self.seen += 1;
            return Ok(true);
        }
        // Skip to the row (column) holding entry `seen`.
        while self.seen == self.major_end {
            if self.major + 1 >= self.major_extent {
                if self.seen != self.nnz {
                    return Err(self.ptr_error(
                        self.major_extent,
                        format!(
                            "the last pointer is {}, must be nnz = {}",
                            self.seen, self.nnz
                        ),
                    ));
                }
                return Ok(false);
            }
            self.major += 1;
            let prev = self.major_end;
            self.major_end = ptr.u64()?;
            self.check_ptr(prev, self.major)?;
        }
        let minor = indices.u64()?;
        let md = self.layout.major_dim();
        idx[md] = self.major;
        idx[1 - md] = minor;
        self.seen += 1;
        Ok(true)
    }
}
