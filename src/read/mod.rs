//! The validating reader: memory-mapped (or in-memory) Hurray files with
//! zero-copy typed views, lookups and a full content check ([`HurrayFile::verify`]).
//!
//! # What opening checks
//!
//! [`HurrayFile::open`] checks every structural rule of the container in
//! time and memory independent of `nnz` (O(index + KV + descriptors)):
//! header (via the codec), trailer (magic, reserved bytes, `index_crc32c == 0`
//! when `HAS_INDEX_CRC32C` is clear), index bounds (inside the file, 8-aligned,
//! ending before the trailer, after `first_descriptor_offset`), the index
//! CRC-32C when the flag is set, the KV section (both `kv_offset` and
//! `kv_length` zero or both non-zero, 8-aligned, inside the tensor/metadata
//! region, not overlapping the index; the trailer is trusted even when
//! `HAS_KV_METADATA` is clear, but the flag set with `kv_length == 0` is an
//! error), every index entry (descriptor 8-aligned, inside the file,
//! `descriptor_length` equal to the descriptor's own, descriptor decoded by the
//! codec), and the buffers of every tensor: values `byte_size == nnz * width`,
//! indices `byte_size == nnz * rank * 8`, `data_offset == align_up(end of
//! descriptor, A)`, indices at `align_up(end of values, A)`, `data_length ==
//! end of indices - data_offset`, each non-empty buffer aligned to the
//! alignment its handle claims, all ending before the trailer, no tensor region
//! overlapping the KV section, the index or another tensor. A tensor with
//! `nnz = 0` owns no buffer bytes: its `data_offset` must still be
//! `align_up(end of descriptor, A)` and `data_length` 0, but that offset may
//! lie past the written bytes (the reference writer pads only to 8). Buffers
//! are located from the descriptor, never by extra padding: the spec's
//! sequential-reader protocol and the reference reader find buffer k+1 at
//! `align_up(end of buffer k, A)`, so anything else is rejected. All arithmetic is
//! checked; a hostile file gives an [`Error::InvalidFile`] naming the section
//! and byte offset, never a panic, an out-of-bounds read or an allocation
//! larger than O(file size).
//!
//! CSR (layout 0x07) and CSC (0x08) matrices get the same treatment with
//! their own descriptor codec and three buffers (values, minor indices
//! `nnz * 8`, pointers `(extent + 1) * 8`, each at the first A-aligned
//! offset after the previous one). [`HurrayFile::tensor_view`] gives any
//! of these layouts as a [`Tensor`]; [`HurrayFile::tensor`] stays COO-only
//! (an [`Error::Unsupported`] names the layout it met). The pointers and
//! minor indices are content: [`CompressedTensor::verify`] checks them in
//! O(extent + nnz), and every accessor checks the pointer pair it uses.
//!
//! A file may hold tensors of other layouts too (a Hurray file is a
//! container; issue 22). Dense row-major (0x01) and column-major (0x02)
//! descriptors are decoded whole and their one buffer placed and checked
//! as above, its size at least `byte_offset + product(shape) * width`; a
//! tensor of any other layout the spec names keeps its common fields
//! (`DescriptorHead`, read within its `descriptor_length`) and its index
//! entry's data region, which must lie after the descriptor and before the
//! trailer. Both are listed by [`HurrayFile::tensor_infos`], count in the
//! overlap and padding checks, and are refused by the views with
//! [`Error::LayoutNotServed`] naming their layout; [`HurrayFile::dense`]
//! reads a dense buffer. Layout tags 0x00 and 0xFF are invalid, and a tag
//! the spec does not name is refused unless `permissive` (the spec's rule
//! for a tag a reader does not recognise).
//!
//! # What `permissive` relaxes
//!
//! Content rules (every index `< shape[d]`, no duplicates, sortedness when
//! `is_sorted = 1`) cost O(nnz) and are checked by [`CooTensor::verify`] only,
//! in both modes. In the default strict mode the reader additionally refuses
//! the violations it meets for free:
//! * at open, a tensor whose `nnz` exceeds `product(shape)` (it must hold
//!   duplicates or out-of-range entries);
//! * at open, non-zero padding between the descriptor and the values buffer
//!   or between the two buffers (the spec says 0x00; at most 2 A bytes per
//!   tensor are read);
//! * at open, a statistics `sparsity_ratio` (when its mask bit is set) that
//!   contradicts `1 - nnz / product(shape)` beyond a 1e-6 relative tolerance
//!   (an O(1) consistency check that catches a corrupted shape);
//! * in [`CooTensor::get`] / [`CooTensor::find`], a coordinate stored twice
//!   (the neighbour of a binary-search hit, or a second match of a linear scan).
//!
//! With `permissive: true` those are let through (lookups return the first
//! match) so that broken files can be opened and inspected. Nothing
//! structural is relaxed: memory safety never depends on the mode.
//!
//! # Memory maps and SIGBUS
//!
//! [`HurrayFile::open`] maps the file. If another process truncates the file
//! while it is mapped, touching the vanished pages raises `SIGBUS` and kills
//! the process; no Rust code can catch that. For files that may change
//! underneath you, open with [`ReadOptions::in_memory`] (reads the whole file
//! into an 8-aligned heap buffer) or [`HurrayFile::from_bytes`].
//!
//! Zero-copy typed views assume a little-endian host (as the format is
//! little-endian); the crate refuses to compile elsewhere.

#[cfg(not(target_endian = "little"))]
compile_error!(
    "coo_assembler::read casts file bytes to u64 / element slices in place and needs a little-endian target"
);

mod checksum;
pub mod composite;
mod compressed;
pub mod coo;
mod csf;
mod dense;
mod layout;
pub mod release;
mod tensor;
mod verify;

pub use crate::hurray::composite::{CompositeHead, Shard};
pub use crate::hurray::{KvValue, Statistics};
pub use crate::layout::{Layout, LayoutKind, SERVED, describe_tag};
pub use composite::CompositeFile;
pub use compressed::{CompressedEntries, CompressedTensor};
pub use coo::CooTensor;
pub use csf::{CoordinatesError, CsfLevels, CsfTensor, TreeFault, TreeWord};
pub use dense::{DenseTensor, TensorInfo};
pub use tensor::Tensor;
// Public paths of the former single-file module (used with the `internals` feature).
#[cfg_attr(not(feature = "internals"), allow(unused_imports))]
pub use verify::{DUPLICATE_MEMORY_CAP, MAX_PROBLEMS_PER_RULE, Problem, Severity};

use crate::element::DType;
use crate::error::{Error, Result};
use crate::fs::ctx::IoCtx;
use crate::fs::output::FileId;
use crate::hurray::compressed::CompressedDescriptor;
use crate::hurray::csf::CsfDescriptor;
use crate::hurray::{
    CooDescriptor, DenseDescriptor, DescriptorHead, FileHeader, HEADER_LEN, TRAILER_LEN, Trailer,
};
use crate::progress::Progress;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Options for [`HurrayFile::open_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Let content rule violations through (see the module docs). Default false.
    pub permissive: bool,
    /// Read the whole file into an 8-aligned heap buffer instead of
    /// mapping it: no `SIGBUS` if another process truncates the file
    /// meanwhile (use it for files in untrusted locations). Default false.
    pub in_memory: bool,
}

/// The bytes of an open file.
enum Backing {
    /// A mapped file, and the progress its passes move.
    Mmap(memmap2::Mmap, Progress),
    /// 8-aligned heap copy: `len` bytes at the start of the `u64` vector.
    Mem(Vec<u64>, usize),
}

impl Backing {
    /// The `u64` words of a buffer at `r`. Cannot fail for a placement
    /// checked at open: the backing is 8-aligned, a non-empty buffer starts
    /// at a multiple of A >= 4096 (an empty one at its 8-aligned
    /// descriptor) and its size is a multiple of 8.
    fn words(&self, r: &Range<usize>) -> &[u64] {
        bytemuck::try_cast_slice(&self.bytes()[r.clone()]).unwrap_or(&[])
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mmap(m, _) => m,
            Backing::Mem(v, len) => {
                let all: &[u8] = bytemuck::cast_slice(v);
                &all[..*len]
            }
        }
    }

    /// The mapping, for releasing pages behind a cursor (none in memory).
    fn mapped(&self) -> release::Mapped<'_> {
        match self {
            Backing::Mmap(m, p) => release::Mapped::new(Some(m), Some(p)),
            Backing::Mem(..) => release::Mapped::new(None, None),
        }
    }

    /// The bytes of `path` as `opts` asks (mapped, or read into an
    /// 8-aligned heap buffer with [`ReadOptions::in_memory`]), and the
    /// file's identity, through `io`.
    fn load(io: &IoCtx, path: &Path, opts: ReadOptions) -> Result<(Backing, FileId)> {
        let (file, len, id) = open_sized(io, path)?;
        let backing = if opts.in_memory {
            let n = usize::try_from(len).map_err(|_| {
                Error::Unsupported(format!("file of {len} bytes does not fit in memory"))
            })?;
            let mut v = aligned_zeroed(n)?;
            {
                let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut v);
                io.read_exact_at(&file, &mut dst[..n], 0, path)?;
            }
            Backing::Mem(v, n)
        } else {
            // SAFETY: the map is read-only and private to this object. The
            // one hazard, another process truncating or rewriting the file
            // while it is mapped, is documented (SIGBUS) with `in_memory` as
            // the alternative.
            Backing::Mmap(unsafe { io.map(&file, path) }?, Progress::new())
        };
        Ok((backing, id))
    }

    fn aligned_copy(bytes: &[u8]) -> Result<Backing> {
        let mut v = aligned_zeroed(bytes.len())?;
        let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut v);
        dst[..bytes.len()].copy_from_slice(bytes);
        Ok(Backing::Mem(v, bytes.len()))
    }
}

/// Open `path` and take its length and identity, refusing a file too
/// short to hold a header and a trailer.
fn open_sized(ctx: &IoCtx, path: &Path) -> Result<(std::fs::File, u64, FileId)> {
    // Before the open: opening a FIFO waits for a writer, and a directory
    // opens but cannot be mapped ("No such device").
    let kind = ctx.metadata(path)?.file_type();
    if !kind.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO (named pipe)"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "a device"
        };
        return Err(Error::io(
            "open",
            path,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{what}, not a Hurray file (a regular file is needed: it is mapped)"),
            ),
        ));
    }
    let file = ctx.open(path)?;
    let meta = ctx.file_metadata(&file, path)?;
    let len = meta.len();
    if len < HEADER_LEN + TRAILER_LEN {
        return Err(too_short(len));
    }
    Ok((file, len, FileId::of(&meta, path)))
}

/// Room for `n` words, empty; running out of memory is an error naming
/// `what`, not an abort.
fn room_for_words(n: u64, what: &'static str) -> Result<Vec<u64>> {
    let mut v: Vec<u64> = Vec::new();
    let oom = || Error::OutOfMemory {
        what,
        bytes: n.saturating_mul(8),
    };
    v.try_reserve_exact(usize::try_from(n).map_err(|_| oom())?)
        .map_err(|_| oom())?;
    Ok(v)
}

/// An 8-aligned zeroed buffer of at least `n` bytes; running out of memory
/// is an error, not an abort.
fn aligned_zeroed(n: usize) -> Result<Vec<u64>> {
    let words = n.div_ceil(8);
    let mut v: Vec<u64> = Vec::new();
    v.try_reserve_exact(words).map_err(|_| Error::OutOfMemory {
        what: "an in-memory copy of the file",
        bytes: n as u64,
    })?;
    v.resize(words, 0);
    Ok(v)
}

/// A decoded descriptor of one of the layouts the reader handles.
#[derive(Clone, Debug)]
enum Desc {
    Coo(CooDescriptor),
    Compressed(CompressedDescriptor),
    Csf(CsfDescriptor),
}

impl Desc {
    /// The layout.
    fn layout(&self) -> crate::options::OutputLayout {
        use crate::options::OutputLayout;
        match self {
            Desc::Coo(_) => OutputLayout::Coo,
            Desc::Compressed(d) if d.column_major => OutputLayout::Csc,
            Desc::Compressed(_) => OutputLayout::Csr,
            Desc::Csf(_) => OutputLayout::Csf,
        }
    }

    /// Bytes of the encoded descriptor.
    fn encoded_len(&self) -> usize {
        match self {
            Desc::Coo(d) => d.encoded_len(),
            Desc::Compressed(d) => d.encoded_len(),
            Desc::Csf(d) => d.encoded_len(),
        }
    }

    fn shape(&self) -> &[u64] {
        match self {
            Desc::Coo(d) => d.shape.as_slice(),
            Desc::Compressed(d) => d.shape.as_slice(),
            Desc::Csf(d) => d.shape.as_slice(),
        }
    }

    fn nnz(&self) -> u64 {
        match self {
            Desc::Coo(d) => d.nnz,
            Desc::Compressed(d) => d.nnz,
            Desc::Csf(d) => d.nnz,
        }
    }

    fn dtype(&self) -> DType {
        match self {
            Desc::Coo(d) => d.dtype,
            Desc::Compressed(d) => d.dtype,
            Desc::Csf(d) => d.dtype,
        }
    }

    fn statistics(&self) -> Option<&crate::hurray::Statistics> {
        match self {
            Desc::Coo(d) => d.statistics.as_ref(),
            Desc::Compressed(d) => d.statistics.as_ref(),
            Desc::Csf(d) => d.statistics.as_ref(),
        }
    }
}

/// A descriptor of a layout the reader lists but does not serve.
#[derive(Clone, Debug)]
enum Listed {
    /// Row-major or column-major, decoded whole: its buffer is located
    /// and checked as a sparse tensor's are.
    Dense(DenseDescriptor),
    /// Any other layout, or a dense one with quantization, a shard or an
    /// element type this crate does not read: the common fields only.
    Other(DescriptorHead),
}

/// Validated location of a tensor the reader lists but does not serve.
#[derive(Clone, Debug)]
struct ListedMeta {
    name: String,
    desc: Listed,
    /// The descriptor's bytes.
    descriptor: Range<usize>,
    /// Dense: the buffer. Other: the index entry's data region (inside the
    /// file, after the descriptor), never read. Empty: at the descriptor.
    data: Range<usize>,
    /// The verdict on a stored checksum of the dense buffer.
    sums: Arc<checksum::Sums>,
}

impl ListedMeta {
    /// The layout tag.
    fn layout_tag(&self) -> u8 {
        match &self.desc {
            Listed::Dense(d) => d.layout_tag(),
            Listed::Other(h) => h.layout_tag,
        }
    }

    /// The error of an operation on this tensor, which it does not serve.
    fn not_served(&self) -> Error {
        Error::LayoutNotServed {
            tensor: self.name.clone(),
            layout: crate::layout::describe_tag(self.layout_tag()),
            op: "this reader".into(),
            served: crate::layout::SERVED,
        }
    }

    fn end(&self) -> usize {
        self.data.end.max(self.descriptor.end)
    }
}

/// One tensor of an open file, in index order.
#[derive(Clone, Debug)]
enum Stored {
    /// COO, CSR or CSC: read by the views.
    Served(TensorMeta),
    /// Any other layout: listed, its placement checked.
    Listed(ListedMeta),
}

impl Stored {
    /// Bytes of the buffers a whole pass reads.
    fn buffer_bytes(&self) -> u64 {
        match self {
            Stored::Served(t) => t.buffers.iter().map(|r| r.len() as u64).sum(),
            Stored::Listed(l) => l.data.len() as u64,
        }
    }

    fn name(&self) -> &str {
        match self {
            Stored::Served(t) => &t.name,
            Stored::Listed(l) => &l.name,
        }
    }

    /// End of the tensor's bytes (for the overlap checks).
    fn end(&self) -> usize {
        match self {
            Stored::Served(t) => t.end(),
            Stored::Listed(l) => l.end(),
        }
    }
}

/// Validated location of one tensor.
#[derive(Clone, Debug)]
struct TensorMeta {
    name: String,
    desc: Desc,
    /// The descriptor's bytes (for the padding check).
    descriptor: Range<usize>,
    values: Range<usize>,
    /// COO: the `nnz x rank` indices; CSR/CSC: the minor indices.
    indices: Range<usize>,
    /// CSR/CSC: `row_ptr` / `col_ptr`; empty for COO.
    pointers: Range<usize>,
    /// Every buffer, in buffer order (CSF: values, `pos_0`, `crd_0`...).
    buffers: Vec<Range<usize>>,
    /// The verdict on the stored checksums, once the first whole pass
    /// asked (shared by the views of this open file).
    sums: Arc<checksum::Sums>,
    /// Bool: the values unpacked at open, one byte (0 or 1) per entry, so
    /// that the views read a bool like any one-byte type.
    bools: Option<Arc<[u8]>>,
}

impl TensorMeta {
    /// The values as the views read them: the mapped bytes, or for bool
    /// the unpacked ones.
    fn values_view<'s>(&'s self, backing: &'s Backing) -> &'s [u8] {
        match &self.bools {
            Some(b) => b,
            None => &backing.bytes()[self.values.clone()],
        }
    }

    /// End of the tensor's bytes: its last non-empty buffer, or its descriptor.
    fn end(&self) -> usize {
        self.buffers
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| r.end)
            .fold(self.descriptor.end, usize::max)
    }
}

/// An open, structurally validated Hurray file.
pub struct HurrayFile {
    backing: Backing,
    header: FileHeader,
    trailer: Trailer,
    kv: Vec<(String, KvValue)>,
    tensors: Vec<Stored>,
    by_name: HashMap<String, usize>,
    opts: ReadOptions,
    /// The file it was opened from (none for bytes in memory).
    id: Option<FileId>,
    /// Its path as given, for messages.
    path: Option<PathBuf>,
}

impl fmt::Debug for HurrayFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HurrayFile")
            .field("len", &self.len())
            .field("header", &self.header)
            .field("trailer", &self.trailer)
            .field("tensors", &self.tensor_names().collect::<Vec<_>>())
            .finish()
    }
}

fn too_short(len: u64) -> Error {
    Error::invalid(
        "file",
        0,
        format!(
            "file is {len} bytes, shorter than the {} bytes of header and trailer",
            HEADER_LEN + TRAILER_LEN
        ),
    )
}

impl HurrayFile {
    /// The progress of this file's long passes ([`HurrayFile::verify`],
    /// walks in storage order, exports): bytes passed, in steps the
    /// operation starts. Read it from another thread for a progress bar.
    /// A file read into memory reports nothing.
    pub fn progress(&self) -> Progress {
        self.progress_ref().cloned().unwrap_or_default()
    }

    /// [`HurrayFile::progress`], when the file is mapped.
    pub(crate) fn progress_ref(&self) -> Option<&Progress> {
        match &self.backing {
            Backing::Mmap(_, p) => Some(p),
            Backing::Mem(..) => None,
        }
    }

    /// The file's bytes when they are a read-only memory map of the file
    /// (`open`), `None` for an in-memory copy (`ReadOptions::in_memory`,
    /// `from_bytes`). Pages of a file mapping may be dropped with
    /// `MADV_DONTNEED`: they are read again from the file when touched
    /// (`matrix` streams that way).
    pub fn mapped_bytes(&self) -> Option<&[u8]> {
        match &self.backing {
            Backing::Mmap(m, _) => Some(m),
            Backing::Mem(..) => None,
        }
    }

    /// Drop the whole pages inside `bytes` (a slice of this file's
    /// mapping) from the resident set: a streaming pass gives back what
    /// lies behind it. No-op for an in-memory copy.
    pub(crate) fn release(&self, bytes: &[u8]) {
        self.backing.mapped().release(bytes);
    }

    /// Map `path` into memory and validate its structure (default options).
    ///
    /// See the module docs about `SIGBUS` when the file is truncated while
    /// mapped; [`ReadOptions::in_memory`] avoids it.
    pub fn open(path: impl AsRef<Path>) -> Result<HurrayFile> {
        Self::open_with(path, ReadOptions::default())
    }

    /// Open `path` (mapped, or read into memory with
    /// [`ReadOptions::in_memory`]) and validate its structure.
    pub fn open_with(path: impl AsRef<Path>, opts: ReadOptions) -> Result<HurrayFile> {
        Self::open_with_io(path, opts, &IoCtx::new())
    }

    /// [`HurrayFile::open_with`], performing the file operations through
    /// `io` (fault injection in tests).
    #[doc(hidden)]
    pub fn open_with_io(
        path: impl AsRef<Path>,
        opts: ReadOptions,
        io: &IoCtx,
    ) -> Result<HurrayFile> {
        let (backing, id) = Backing::load(io, path.as_ref(), opts)?;
        Self::from_backing(backing, opts).map(|f| f.opened_as(id, path.as_ref()))
    }

    /// Validate a file held in memory (copied into an 8-aligned buffer).
    pub fn from_bytes(bytes: Vec<u8>) -> Result<HurrayFile> {
        Self::from_bytes_with(&bytes, ReadOptions::default())
    }

    /// [`HurrayFile::from_bytes`] with options.
    pub fn from_bytes_with(bytes: &[u8], opts: ReadOptions) -> Result<HurrayFile> {
        Self::from_backing(Backing::aligned_copy(bytes)?, opts)
    }

    fn from_backing(backing: Backing, opts: ReadOptions) -> Result<HurrayFile> {
        let bytes = backing.bytes();
        if bytes.as_ptr() as usize % 8 != 0 {
            // Cannot happen (page-aligned map, u64 vector), but typed views depend on it.
            return Err(Error::Unsupported(
                "file bytes are not 8-aligned in memory".into(),
            ));
        }
        let parsed = layout::parse(bytes, opts)?;
        let by_name = parsed
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name().to_string(), i))
            .collect();
        Ok(HurrayFile {
            header: parsed.header,
            trailer: parsed.trailer,
            kv: parsed.kv,
            tensors: parsed.tensors,
            by_name,
            opts,
            backing,
            id: None,
            path: None,
        })
    }

    fn opened_as(self, id: FileId, path: &Path) -> HurrayFile {
        HurrayFile {
            id: Some(id),
            path: Some(path.to_path_buf()),
            ..self
        }
    }

    /// The file this was opened from, for the output rule
    /// ([`crate::fs::output`]); `None` for bytes in memory.
    pub(crate) fn file_id(&self) -> Option<&FileId> {
        self.id.as_ref()
    }

    /// The file header.
    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// The trailer.
    pub fn trailer(&self) -> &Trailer {
        &self.trailer
    }

    /// The KV metadata entries, in file order (empty without a KV section).
    pub fn kv(&self) -> &[(String, KvValue)] {
        &self.kv
    }

    /// Options the file was opened with.
    pub fn options(&self) -> ReadOptions {
        self.opts
    }

    /// Tensor names in index order, whatever their layout.
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.tensors.iter().map(Stored::name)
    }

    /// Every tensor as its descriptor describes it (name, layout, element
    /// type, shape), whatever its layout, in index order: what `info`
    /// lists. The views ([`HurrayFile::tensor_views`]) are of the layouts
    /// the reader serves.
    pub fn tensor_infos(&self) -> impl Iterator<Item = TensorInfo<'_>> {
        self.tensors.iter().map(|t| TensorInfo::new(t, &self.kv))
    }

    /// The tensor called `name` as [`HurrayFile::tensor_infos`] lists it.
    pub fn tensor_info(&self, name: &str) -> Result<TensorInfo<'_>> {
        Ok(TensorInfo::new(self.stored(name)?, &self.kv))
    }

    /// The single tensor of the file as [`HurrayFile::tensor_infos`] lists
    /// it, whatever its layout; an error if the file holds none or several.
    pub fn only_tensor_info(&self) -> Result<TensorInfo<'_>> {
        Ok(TensorInfo::new(self.only_stored()?, &self.kv))
    }

    /// The dense (row-major or column-major) tensor called `name`; a
    /// tensor of another layout is an [`Error::LayoutNotServed`] naming it.
    pub fn dense(&self, name: &str) -> Result<DenseTensor<'_>> {
        let s = self.stored(name)?;
        DenseTensor::of(s, &self.backing, &self.kv, self.path.as_deref())
    }

    /// Number of tensors, whatever their layout.
    pub fn tensor_count(&self) -> usize {
        self.tensors.len()
    }

    /// The view of tensor `t` of this file.
    fn view<'s>(&'s self, t: &'s TensorMeta) -> Tensor<'s> {
        view_of(
            &self.backing,
            t,
            &self.kv,
            self.opts.permissive,
            self.path.as_deref(),
        )
    }

    /// `s` if the reader serves its layout, else the error naming it.
    fn served<'s>(&self, s: &'s Stored) -> Result<&'s TensorMeta> {
        match s {
            Stored::Served(t) => Ok(t),
            Stored::Listed(l) => Err(l.not_served()),
        }
    }

    /// The COO view of `s`, or an error naming its layout.
    fn coo_view<'s>(&'s self, s: &'s Stored) -> Result<CooTensor<'s>> {
        let t = self.served(s)?;
        match self.view(t) {
            Tensor::Coo(c) => Ok(c),
            other => Err(Error::Unsupported(format!(
                "tensor {:?} is stored as {}; this reads COO tensors only (convert it: coo-assembler convert IN OUT --to coo; in Rust, HurrayFile::tensor_view reads every layout)",
                t.name,
                other.layout().to_string().to_uppercase()
            ))),
        }
    }

    fn available(&self) -> String {
        self.tensor_names()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn stored(&self, name: &str) -> Result<&Stored> {
        match self.by_name.get(name) {
            Some(&i) => Ok(&self.tensors[i]),
            None => Err(Error::TensorNotFound {
                name: name.to_string(),
                available: self.available(),
            }),
        }
    }

    fn only_stored(&self) -> Result<&Stored> {
        if self.tensors.len() == 1 {
            Ok(&self.tensors[0])
        } else {
            // No name given: the error says how many there are.
            Err(Error::TensorNotFound {
                name: String::new(),
                available: self.available(),
            })
        }
    }

    /// The COO tensor called `name`; a tensor of another layout is an
    /// [`Error::Unsupported`] naming it (see [`HurrayFile::tensor_view`]),
    /// or an [`Error::LayoutNotServed`] for a layout the reader does not
    /// serve.
    pub fn tensor(&self, name: &str) -> Result<CooTensor<'_>> {
        self.coo_view(self.stored(name)?)
    }

    /// The COO tensors, in index order (those of other layouts are left
    /// out: [`HurrayFile::tensor_views`] gives every tensor the reader
    /// serves, [`HurrayFile::tensor_infos`] every tensor).
    pub fn tensors(&self) -> impl Iterator<Item = CooTensor<'_>> {
        self.tensors.iter().filter_map(|t| self.coo_view(t).ok())
    }

    /// The single tensor of the file, when it is COO; an error if the file
    /// holds none or several, or if it has another layout.
    pub fn only_tensor(&self) -> Result<CooTensor<'_>> {
        self.coo_view(self.only_stored()?)
    }

    /// The tensor called `name`, in any layout the reader serves (COO,
    /// CSR, CSC); another layout (a dense tensor) is an
    /// [`Error::LayoutNotServed`] naming it.
    pub fn tensor_view(&self, name: &str) -> Result<Tensor<'_>> {
        Ok(self.view(self.served(self.stored(name)?)?))
    }

    /// The single tensor of the file, in any layout the reader serves; an
    /// error if the file holds none or several, or if it has a layout the
    /// reader does not serve.
    pub fn only_tensor_view(&self) -> Result<Tensor<'_>> {
        Ok(self.view(self.served(self.only_stored()?)?))
    }

    /// Every tensor of a layout the reader serves (COO, CSR, CSC), in
    /// index order; [`HurrayFile::tensor_infos`] lists the others too.
    pub fn tensor_views(&self) -> impl Iterator<Item = Tensor<'_>> {
        self.tensors.iter().filter_map(|s| match s {
            Stored::Served(t) => Some(self.view(t)),
            Stored::Listed(_) => None,
        })
    }

    /// Absolute file offsets of the tensor's values, indices and pointers
    /// buffers (the pointers' is 0 for COO; an empty buffer's offset is
    /// never read), for readers that stream the buffers themselves
    /// (`convert`, `join`): the stored checksums are checked first
    /// ([`Tensor::check_checksums`]), so that such a reader never copies
    /// a damaged buffer.
    pub(crate) fn buffer_offsets(&self, name: &str) -> Result<[u64; 3]> {
        let t = self.served(self.stored(name)?)?;
        self.view(t).check_checksums()?;
        Ok([&t.values, &t.indices, &t.pointers].map(|r| r.start as u64))
    }

    /// File size in bytes.
    pub fn len(&self) -> u64 {
        self.backing.bytes().len() as u64
    }

    /// Always false for an open file (a valid file has at least 104 bytes).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A Hurray file as [`open`] found it: plain tensors, or one partition
/// composite read as one logical tensor.
#[derive(Debug)]
pub enum Opened {
    /// A file of plain tensors (COO, CSR, CSC).
    Plain(HurrayFile),
    /// A partition composite (a head and its members).
    Composite(CompositeFile),
}

/// Open the Hurray file at `path`, whatever it holds: a partition
/// composite when an index entry is a composite head, plain tensors
/// otherwise, each validated by its reader with `opts` (see
/// [`HurrayFile::open_with`] and [`CompositeFile::open_with`]). The file
/// is mapped (or read, with [`ReadOptions::in_memory`]) once.
pub fn open(path: impl AsRef<Path>, opts: ReadOptions) -> Result<Opened> {
    open_with_io(path.as_ref(), opts, &IoCtx::new())
}

/// [`open`] through `io`.
pub(crate) fn open_with_io(path: &Path, opts: ReadOptions, io: &IoCtx) -> Result<Opened> {
    let (backing, id) = Backing::load(io, path, opts)?;
    Ok(match CompositeFile::find(backing, opts)? {
        composite::Found::Composite(c) => Opened::Composite(c),
        composite::Found::NoHead(backing) => {
            Opened::Plain(HurrayFile::from_backing(backing, opts)?.opened_as(id, path))
        }
    })
}

/// The view of tensor `t`, whose placement in `backing` was checked at
/// open (plain files and composite members alike), whatever its layout;
/// `file` is the path it was opened from, for messages.
fn view_of<'s>(
    backing: &'s Backing,
    t: &'s TensorMeta,
    kv: &'s [(String, KvValue)],
    permissive: bool,
    file: Option<&'s Path>,
) -> Tensor<'s> {
    let sums = Some(checksum::SumCheck {
        sums: &t.sums,
        file,
    });
    match &t.desc {
        Desc::Coo(desc) => Tensor::Coo(CooTensor::placed(backing, t, desc, kv, permissive, sums)),
        Desc::Compressed(desc) => Tensor::Compressed(CompressedTensor {
            name: &t.name,
            desc,
            values: t.values_view(backing),
            stored_values: &backing.bytes()[t.values.clone()],
            minor: backing.words(&t.indices),
            ptr: backing.words(&t.pointers),
            kv,
            permissive,
            offsets: [t.values.start, t.indices.start, t.pointers.start].map(|o| o as u64),
            mapped: backing.mapped(),
            sums,
        }),
        Desc::Csf(desc) => Tensor::Csf(CsfTensor {
            name: &t.name,
            desc,
            backing,
            values: t.values_view(backing),
            stored_values: &backing.bytes()[t.values.clone()],
            buffers: &t.buffers,
            kv,
            permissive,
            mapped: backing.mapped(),
            sums,
        }),
    }
}

/// Product of the shape, saturating at u128::MAX.
fn shape_product(shape: &[u64]) -> u128 {
    shape
        .iter()
        .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128))
        .unwrap_or(u128::MAX)
}

/// Equal, both NaN, or within a relative tolerance of 1e-6 (plus 1e-9 * scale
/// absolute), since another writer may sum in another order.
fn close(a: f64, b: f64, scale: f64) -> bool {
    a == b
        || (a.is_nan() && b.is_nan())
        || (a - b).abs() <= 1e-6 * a.abs().max(b.abs()) + 1e-9 * scale
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn shared_helpers() {
        assert_eq!(shape_product(&[u64::MAX, u64::MAX, 2]), u128::MAX);
        assert!(close(0.1 + 0.2, 0.3, 1.0));
        assert!(!close(0.8, 0.84, 1.0));
    }

    #[test]
    fn too_short_inputs() {
        for n in [0usize, 1, 63, 103] {
            assert!(HurrayFile::from_bytes(vec![0; n]).is_err());
        }
    }
}
