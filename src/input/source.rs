//! [`Source`]: an input of contributions, a file or a reader, in a format
//! given or recognised from its first bytes, with what its header says
//! (shape, element type, entry count), pushed into a [`Builder`] with
//! progress. Every front end (the CLI, Python's `assemble_file` and
//! `Builder.push_file`, C's `coo_builder_push_file`) assembles an input
//! file through it, so they give the same bytes and the same errors.
//!
//! A regular, uncompressed file is mapped and parsed in place (binary,
//! MatrixMarket and text); anything else goes through a buffer. The builder
//! remembers the source, so that a duplicate or an overflow found only
//! while merging is told as the input writes the coordinate (1-based for
//! MatrixMarket) with the lines or records it came from.

use crate::Builder;
use crate::assemble::builder::Locator;
use crate::assemble::direct;
use crate::assemble::summary::Summary;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::fs::IoCtx;
use crate::fs::output::{FileId, check_target};
use crate::input::chunks::Text;
use crate::input::common::{InputFormat, input_err};
use crate::input::compress::{Compression, decompress, peek};
use crate::input::mapped::MappedInput;
use crate::input::mtx::{MtxHeader, MtxSymmetry, read_mtx_header};
use crate::input::npy::{NPY_MAGIC, NpyHeader, read_npy_header};
use crate::input::text::push_text_from;
use crate::input::{bin, locate, push_bin, push_mtx, push_npy};
use crate::options::AssembleOptions;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

/// Bytes a reader is buffered with.
const READ_BUFFER: usize = 1 << 20;
/// Bytes looked at to recognise the format.
const SNIFF_BYTES: usize = 32;

/// What was read from the start of the input.
enum Header {
    None,
    Mtx(MtxHeader),
    Npy(NpyHeader),
}

/// Where the bytes after the header come from.
enum Body {
    Mapped(MappedInput),
    Reader(BufReader<Box<dyn Read + Send>>),
}

/// An input of contributions (see the module docs).
pub struct Source {
    name: String,
    path: Option<PathBuf>,
    id: Option<FileId>,
    io: IoCtx,
    format: InputFormat,
    compression: Compression,
    /// Bytes of the file, when it is a regular file.
    len: Option<u64>,
    header: Header,
    body: Body,
    /// A `.tns` file's shape found by a first pass (when none was given).
    tns_shape: std::sync::OnceLock<Vec<u64>>,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("compression", &self.compression)
            .field("shape", &self.shape())
            .finish()
    }
}

impl Source {
    /// Open the file at `path`. `format`: the input format, or `None` to
    /// recognise it (npy and MatrixMarket by their first bytes, bin
    /// otherwise). gzip and zstd are decompressed on the fly.
    pub fn open(path: &Path, format: Option<InputFormat>) -> Result<Source> {
        Self::open_with(&IoCtx::new(), path, format)
    }

    /// [`Source::open`] through `io` (fault injection in tests).
    #[doc(hidden)]
    pub fn open_with(io: &IoCtx, path: &Path, format: Option<InputFormat>) -> Result<Source> {
        let file = io.open(path)?;
        let meta = file.metadata().map_err(|e| Error::io("stat", path, e))?;
        if meta.is_dir() {
            return Err(Error::InvalidArgument(format!(
                "{} is a directory, not an input file",
                path.display()
            )));
        }
        let len = meta.is_file().then_some(meta.len());
        let id = FileId::of(&meta, path);
        // FROSTT's lines look like text's: the name tells them apart.
        let format = format.or_else(|| is_tns(path).then_some(InputFormat::Tns));
        let for_map = file.try_clone().ok().filter(|_| meta.is_file());
        let mut s = Self::start(io, path.display().to_string(), Box::new(file), format, len)?;
        s.path = Some(path.to_path_buf());
        s.id = Some(id);
        // A regular, uncompressed file is parsed in place: no read()
        // copies, and parsed pages leave the resident set.
        if s.compression == Compression::None && s.format != InputFormat::Npy {
            if let Some(f) = &for_map {
                if let Some(mut m) = MappedInput::map(io, f, path) {
                    if s.format == InputFormat::Mtx {
                        s.header = Header::Mtx(m.read_mtx_header(&s.name)?);
                    }
                    s.body = Body::Mapped(m);
                }
            }
        }
        if let (Body::Reader(r), InputFormat::Mtx) = (&mut s.body, s.format) {
            s.header = Header::Mtx(read_mtx_header(r, &s.name)?);
        }
        Ok(s)
    }

    /// Read contributions from `reader` (standard input, a pipe, a socket),
    /// named `name` in messages. `format` as for [`Source::open`].
    pub fn from_reader(
        name: &str,
        reader: impl Read + Send + 'static,
        format: Option<InputFormat>,
    ) -> Result<Source> {
        let mut s = Self::start(
            &IoCtx::new(),
            name.to_string(),
            Box::new(reader),
            format,
            None,
        )?;
        if let (Body::Reader(r), InputFormat::Mtx) = (&mut s.body, s.format) {
            s.header = Header::Mtx(read_mtx_header(r, &s.name)?);
        }
        Ok(s)
    }

    /// Decompress, recognise the format, read an npy header.
    fn start(
        io: &IoCtx,
        name: String,
        raw: Box<dyn Read + Send>,
        format: Option<InputFormat>,
        len: Option<u64>,
    ) -> Result<Source> {
        let (reader, compression) = decompress(raw, &name)?;
        let (head, reader) = peek(reader, SNIFF_BYTES, &name)?;
        let format = match (format, sniff(&head)) {
            (Some(InputFormat::Bin), Some(InputFormat::Npy)) => {
                return Err(Error::InvalidArgument(format!(
                    "{name} is a NumPy .npy file, not bin records: use the format npy (or leave the format out to have it recognised)"
                )));
            }
            (Some(f), _) | (None, Some(f)) => f,
            (None, None) => InputFormat::Bin,
        };
        let boxed: Box<dyn Read + Send> = Box::new(reader);
        let mut body = BufReader::with_capacity(READ_BUFFER, boxed);
        let header = match format {
            InputFormat::Npy => Header::Npy(read_npy_header(&mut body, &name)?),
            _ => Header::None,
        };
        Ok(Source {
            name,
            path: None,
            id: None,
            io: io.clone(),
            format,
            compression,
            len,
            header,
            body: Body::Reader(body),
            tns_shape: std::sync::OnceLock::new(),
        })
    }

    /// The input's name in messages: its path, or the name given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The format it is read as.
    pub fn format(&self) -> InputFormat {
        self.format
    }

    /// The compression found.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// Refuse, before this input is read, an `output` that could not be
    /// published: one that names this input (the same file, through links
    /// too: [`Error::OutputIsInput`]), a directory, a missing or read-only
    /// folder (the atomic output's whole rule). [`Builder::finish`] checks
    /// it again for every source pushed into the builder.
    pub fn check_output(&self, output: &Path) -> Result<()> {
        let ids: Vec<&FileId> = self.id.iter().collect();
        check_target(&self.io, output, &ids)
    }

    /// The shape the header states (MatrixMarket, npy), if any.
    pub fn shape(&self) -> Option<Vec<u64>> {
        match &self.header {
            Header::Mtx(h) => Some(vec![h.rows, h.cols]),
            Header::Npy(h) => Some(h.shape.clone()),
            Header::None => None,
        }
    }

    /// Whether the input gives its shape when none is given: a header's
    /// (MatrixMarket, npy), or a `.tns` file's largest indices (found by a
    /// first pass, so not from a stream).
    pub fn finds_shape(&self) -> bool {
        self.shape().is_some() || (self.format == InputFormat::Tns && self.path.is_some())
    }

    /// The element type the header implies (npy: the array's type, bool as
    /// u8; MatrixMarket `complex`: complex128), if any.
    pub fn dtype(&self) -> Option<DType> {
        match &self.header {
            Header::Npy(h) => Some(h.dtype()),
            Header::Mtx(h) if h.field == crate::input::mtx::MtxField::Complex => Some(DType::C128),
            _ => None,
        }
    }

    /// Bytes the progress callback of [`Source::push_into`] counts to, when
    /// known (an uncompressed regular file).
    pub fn progress_total(&self) -> Option<u64> {
        match self.compression {
            Compression::None => self.len,
            _ => None,
        }
    }

    /// How many contributions the input holds, when it says: a MatrixMarket
    /// header's entry count (twice for a symmetric file, whose entries off
    /// the diagonal give a mirror), an uncompressed bin file's length.
    pub fn expected_contributions(&self, rank: usize, dtype: DType) -> Option<u64> {
        match (&self.header, self.format) {
            (Header::Mtx(h), _) if h.symmetry == MtxSymmetry::General => Some(h.entries),
            (Header::Mtx(h), _) => Some(h.entries.saturating_mul(2)),
            (_, InputFormat::Bin) => self
                .progress_total()
                .map(|len| len / bin::bin_record_bytes(rank, dtype) as u64),
            _ => None,
        }
    }

    /// The shape to assemble: `given` when the header states none or the
    /// same one, the header's when none is given.
    pub fn resolve_shape(&self, given: Option<&[u64]>) -> Result<Vec<u64>> {
        if let (None, None, InputFormat::Tns, Some(path)) =
            (given, self.shape(), self.format, &self.path)
        {
            if let Some(s) = self.tns_shape.get() {
                return Ok(s.clone());
            }
            // A first pass over the file, read again from its start.
            let (r, _) = decompress(Box::new(self.io.open(path)?), &self.name)?;
            let s = crate::input::text::tns_shape(
                BufReader::with_capacity(READ_BUFFER, r),
                &self.name,
            )?;
            return Ok(self.tns_shape.get_or_init(|| s).clone());
        }
        match (given, self.shape()) {
            (Some(g), Some(h)) if g != h.as_slice() => Err(Error::InvalidShape {
                shape: g.to_vec(),
                detail: format!("disagrees with the shape {h:?} the {} states", self.what()),
            }),
            (Some(g), _) => Ok(g.to_vec()),
            (None, Some(h)) => Ok(h),
            (None, None) => Err(Error::InvalidShape {
                shape: Vec::new(),
                detail: format!(
                    "{}: {} input has no header: give the shape",
                    self.name, self.format
                ),
            }),
        }
    }

    fn what(&self) -> &'static str {
        match self.header {
            Header::Mtx(_) => "MatrixMarket header",
            Header::Npy(_) => ".npy header",
            Header::None => "input",
        }
    }

    /// A builder for this input: the shape and element type given, or the
    /// header's (element type f64 when neither says), planned for the
    /// contributions the input holds. A shape the header states that a
    /// tensor cannot have is bad input, named by its line.
    pub fn builder(
        &self,
        shape: Option<&[u64]>,
        dtype: Option<DType>,
        mut opts: AssembleOptions,
    ) -> Result<Builder> {
        let shape = self.resolve_shape(shape)?;
        let dtype = dtype.or(self.dtype()).unwrap_or(DType::F64);
        if opts.expected_contributions.is_none() {
            opts.expected_contributions = self.expected_contributions(shape.len(), dtype);
        }
        let from_header = given_none(shape.as_slice(), self.shape());
        Builder::new(&shape, dtype, opts).map_err(|e| match e {
            e @ Error::InvalidShape { .. } if from_header => {
                let location = match &self.header {
                    Header::Mtx(h) if h.lines > 0 => format!("line {}", h.lines),
                    _ => "header".into(),
                };
                Error::Input {
                    source_name: self.name.clone(),
                    location,
                    detail: format!("the shape of the {}: {e}", self.what()),
                    cause: Some(Box::new(e)),
                }
            }
            e => e,
        })
    }

    /// Assemble the input into a new Hurray file at `path`: the shape and
    /// element type as for [`Source::builder`], then every contribution
    /// pushed and the file written, as [`Source::builder`],
    /// [`Source::push_into`] and [`Builder::finish`] would, with the same
    /// bytes and the same errors. A mapped bin input whose work fits the
    /// budget and which is local (contributions in element order) is
    /// assembled by the in-memory kernel reading the records in place,
    /// with no spill and no merge; anything else goes through the builder.
    /// `progress` gets the input bytes consumed so far.
    pub fn assemble_to(
        self,
        path: &Path,
        shape: Option<&[u64]>,
        dtype: Option<DType>,
        opts: AssembleOptions,
        mut progress: impl FnMut(u64),
    ) -> Result<Summary> {
        self.check_output(path)?;
        if let Ok(s) = self.resolve_shape(shape) {
            crate::write::check_room_for(&self.io, path, &s, opts.layout)?;
        }
        if let Some(s) = self.assemble_in_place(path, shape, dtype, &opts)? {
            if let Some(t) = self.progress_total() {
                progress(t);
            }
            return Ok(s);
        }
        let mut b = self.builder(shape, dtype, opts)?;
        self.push_into(&mut b, progress)?;
        b.finish(path)
    }

    /// The kernel's path of [`Source::assemble_to`], when it is the one.
    fn assemble_in_place(
        &self,
        path: &Path,
        shape: Option<&[u64]>,
        dtype: Option<DType>,
        opts: &AssembleOptions,
    ) -> Result<Option<Summary>> {
        let (Body::Mapped(m), Header::None, InputFormat::Bin) =
            (&self.body, &self.header, self.format)
        else {
            return Ok(None);
        };
        let Ok(shape) = self.resolve_shape(shape) else {
            return Ok(None);
        };
        let dtype = dtype.unwrap_or(DType::F64);
        let bytes = m.bytes();
        let rec = bin::bin_record_bytes(shape.len(), dtype);
        if bytes.len() % rec != 0 {
            return Ok(None);
        }
        let window = direct::mapped_window(opts.threads, rec);
        let n = (bytes.len() / rec) as u64;
        let Some(plan) = direct::file_plan(&shape, dtype, n, opts, window) else {
            return Ok(None);
        };
        plan.assemble_records(bytes, &|a, b| m.release_range(a, b), path, opts)
    }

    /// Push every contribution into `b` (whose shape and element type the
    /// input must fit). `progress` gets the input bytes consumed so far
    /// (see [`Source::progress_total`]). Returns the contributions pushed.
    /// `b` remembers the input, to name the lines behind an error found
    /// while merging.
    pub fn push_into(self, b: &mut Builder, mut progress: impl FnMut(u64)) -> Result<u64> {
        let (rank, dtype) = (b.shape().len(), b.dtype());
        if let Some(h) = self.shape() {
            if h != b.shape() {
                return Err(Error::InvalidShape {
                    shape: b.shape().to_vec(),
                    detail: format!("{}: the {} states the shape {h:?}", self.name, self.what()),
                });
            }
        }
        if self.format == InputFormat::Bin {
            if let Some(len) = self.progress_total() {
                bin::check_bin_length(len, rank, dtype, &self.name)?;
            }
        }
        let locator = Located {
            id: self.id.clone(),
            name: self.name.clone(),
            path: self.path.clone(),
            io: self.io.clone(),
            format: self.format,
            rank,
            dtype,
        };
        let name = self.name;
        let p = &mut progress;
        let pushed = match (self.header, self.body) {
            (Header::Mtx(h), Body::Mapped(mut m)) => m.push_mtx(b, &h, dtype, &name, p)?,
            (Header::Mtx(h), Body::Reader(r)) => push_mtx(b, r, &h, dtype, &name, p)?,
            (Header::Npy(h), Body::Reader(r)) => push_npy(b, r, &h, &name, p)?,
            (Header::Npy(_), Body::Mapped(_)) => {
                return Err(input_err(
                    &name,
                    "start".into(),
                    "npy input is read, not mapped",
                ));
            }
            (Header::None, Body::Mapped(mut m)) if self.format.is_text() => {
                m.push_text(b, rank, dtype, self.format.first_index(), &name, p)?
            }
            (Header::None, Body::Mapped(mut m)) => m.push_bin(b, rank, dtype, &name, p)?,
            (Header::None, Body::Reader(r)) if self.format.is_text() => {
                let base = self.format.first_index();
                push_text_from(b, Text::Reader(r), rank, dtype, base, &name, p)?
            }
            (Header::None, Body::Reader(r)) => push_bin(b, r, rank, dtype, &name, p)?,
        };
        b.remember(Box::new(locator));
        Ok(pushed)
    }
}

/// Whether `path` names a FROSTT `.tns` file (compressed or not).
fn is_tns(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase());
    name.is_some_and(|n| {
        let n = [".gz", ".zst", ".zstd"]
            .iter()
            .find_map(|z| n.strip_suffix(z))
            .unwrap_or(&n);
        n.ends_with(".tns")
    })
}

/// True when the shape in use is the header's (none was given that
/// differs): then a bad shape is the input's fault.
fn given_none(used: &[u64], header: Option<Vec<u64>>) -> bool {
    header.is_some_and(|h| h == used)
}

/// The format the input starts like, when it is recognisable.
fn sniff(head: &[u8]) -> Option<InputFormat> {
    let head = head.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(head);
    if head.starts_with(NPY_MAGIC) {
        Some(InputFormat::Npy)
    } else if head.len() >= 14 && head[..14].eq_ignore_ascii_case(b"%%MatrixMarket") {
        Some(InputFormat::Mtx)
    } else if looks_like_text(head) {
        Some(InputFormat::Text)
    } else {
        None
    }
}

/// Whether the first bytes are a whitespace-separated text input: printable
/// ASCII and line ends only, starting with a number or a comment. Binary
/// records cannot look like this: their u64 indices carry NUL bytes (an
/// index below 2^56 has a zero top byte).
fn looks_like_text(head: &[u8]) -> bool {
    let first = head.iter().find(|b| !b.is_ascii_whitespace());
    let starts = first.is_some_and(|&b| b.is_ascii_digit() || b"+-.#".contains(&b));
    starts
        && head
            .iter()
            .all(|&b| b.is_ascii_graphic() || b == b' ' || b == b'\t' || b == b'\n' || b == b'\r')
}

/// What a builder keeps of a source pushed into it.
struct Located {
    id: Option<FileId>,
    name: String,
    path: Option<PathBuf>,
    io: IoCtx,
    format: InputFormat,
    rank: usize,
    dtype: DType,
}

impl Locator for Located {
    fn file_id(&self) -> Option<&FileId> {
        self.id.as_ref()
    }

    fn locate(&self, e: &Error) -> Option<Error> {
        let (coordinate, what) = match e {
            Error::DuplicateCoordinate { coordinate } => (
                coordinate,
                "duplicate contributions (the duplicate policy is `error`)".to_string(),
            ),
            Error::IntegerOverflow { coordinate, dtype } => (
                coordinate,
                format!("integer overflow: the combined value does not fit {dtype}"),
            ),
            _ => return None,
        };
        let (shown, base): (Vec<u64>, _) =
            if matches!(self.format, InputFormat::Mtx | InputFormat::Tns) {
                (
                    coordinate.iter().map(|c| c.saturating_add(1)).collect(),
                    "1-based, as in the file",
                )
            } else {
                (coordinate.clone(), "0-based, as in the file")
            };
        let list: Vec<String> = shown.iter().map(u64::to_string).collect();
        let mut detail = format!("{what} at ({}) ({base})", list.join(", "));
        // Read the file again to find the lines: only when an error is
        // being reported, so the common path pays nothing.
        if let Some(path) = &self.path {
            let again = || -> Result<Vec<String>> {
                let f = self.io.open(path)?;
                let (r, _) = decompress(f, &self.name)?;
                locate(
                    BufReader::new(r),
                    self.format,
                    self.rank,
                    self.dtype,
                    coordinate,
                    &self.name,
                )
            };
            if let Ok(at) = again() {
                if !at.is_empty() {
                    detail.push_str(&format!(": from {}", at.join(", ")));
                }
            }
        }
        Some(Error::InInput {
            source_name: self.name.clone(),
            detail,
            cause: Box::new(clone_merge_error(e)),
        })
    }
}

/// A copy of a merge-time error (the two variants `locate` handles).
fn clone_merge_error(e: &Error) -> Error {
    match e {
        Error::DuplicateCoordinate { coordinate } => Error::DuplicateCoordinate {
            coordinate: coordinate.clone(),
        },
        Error::IntegerOverflow { coordinate, dtype } => Error::IntegerOverflow {
            coordinate: coordinate.clone(),
            dtype,
        },
        other => Error::InvalidArgument(other.to_string()),
    }
}
