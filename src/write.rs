//! The streaming HRRYFILE container writer.
//!
//! [`FileWriter`] writes one Hurray file holding any number of COO, CSR or
//! CSC tensors. Each tensor is written by a [`TensorWriter`] from a **sorted
//! stream** of entries (strictly increasing lexicographic order, dimension 0
//! major; for CSC, column major: by column, then row). The number of entries
//! is not known in advance and nothing is held in memory: memory use is a
//! few fixed buffers, whatever the count (the pointer buffer of CSR/CSC, with
//! its `nrows + 1` entries, is streamed too).
//!
//! # CSR and CSC
//! Three buffers: values, the minor indices (`col_indices` for CSR,
//! `row_indices` for CSC) and the pointers (`row_ptr` / `col_ptr`, u64,
//! `extent of the major dimension + 1` entries). Values stream into the
//! output as for COO; the minor indices and the pointers each stream into
//! their own side file, and are appended in that order at `finish`, each at
//! the next multiple of A. A pointer entry is emitted when the first entry
//! of a later row (column) arrives, so empty rows cost 8 bytes each and
//! nothing else.
//!
//! # How a tensor is written without knowing nnz
//! The descriptor length is fixed by the rank (`149 + 8r` with statistics,
//! `77 + 8r` without), so the values buffer starts at a known offset,
//! `align_up(descriptor_offset + descriptor_len, A)`, and values stream
//! straight into the output file. Indices (`nnz * r` u64 LE) go to an unnamed
//! side temporary file in the target directory (only once they outgrow one
//! buffer). At [`TensorWriter::finish`] the values are padded to the next
//! multiple of A, the indices are appended there (kernel-side copy), and the
//! descriptor is written at its place. When the caller knows a bound on nnz
//! (the assembler does: the entries of the runs it merges), a COO tensor's
//! indices go straight into the output after room for that many values,
//! and the gap fewer values leave is closed at the end by moving extents
//! (`FALLOC_FL_COLLAPSE_RANGE`) or, where the file system cannot, by
//! copying the indices down: same bytes, no side file.
//!
//! # Layout decisions
//! - A = [`WriteOptions::alignment`] (default 4096). Every buffer handle
//!   declares `alignment = A`, the alignment actually guaranteed.
//! - Padding between the values and the indices is minimal (the indices start
//!   exactly at `align_up(end of values, A)`), as readers expect.
//! - After the last buffer of a tensor: [`TailPadding::Alignment`] (default,
//!   the spec's writer protocol) pads to A, then to 8 (a no-op); so the next
//!   descriptor, the KV section or the index starts on an A boundary.
//!   [`TailPadding::Eight`] pads to 8 only, as the reference writer
//!   (hurray-core 0.1.0) does and as the spec's worked example shows. Both
//!   read the same through the index; `data_length` is the same.
//! - Empty tensor (nnz = 0): both buffers have size 0 and both lie at
//!   `align_up(descriptor end, A)` (= `data_offset`), `data_length = 0`; the
//!   descriptor is still padded to A, as the writer protocol asks, and the
//!   next item starts at `data_offset`.
//! - Files we write always have `is_sorted = 1`, statistics (when
//!   [`WriteOptions::statistics`]) and `HAS_INDEX_CRC32C` with the CRC-32C
//!   of the index in the trailer. `HAS_KV_METADATA` is set exactly when a KV
//!   section is written.
//! - Sections in order: header, tensors, `[KV][index][trailer]`; KV and index
//!   8-aligned.
//! - `tensor_count_hint`: the header is rewritten at finish with the real
//!   count (and the final flags).
//!
//! # KV entries written by the crate (stable keys)
//! - `coo_assembler.writer` (string): `"coo-assembler <version>"`, when
//!   [`WriteOptions::provenance`] is on (default).
//! - `coo_assembler.xxh3.<tensor name>.<buffer>` (u64): xxh3-64 of the exact
//!   bytes of each buffer, when [`WriteOptions::checksums`] is on (default).
//!   Buffer names are the spec's: `values`, `indices` (COO); `values`,
//!   `col_indices`, `row_ptr` (CSR); `values`, `row_indices`, `col_ptr`
//!   (CSC). One key per buffer, in buffer order.
//!
//! Keys starting with `coo_assembler.` are reserved: [`FileWriter::add_metadata`]
//! refuses them. Order in the section: writer, user entries (in the order
//! given), then the checksums in tensor order.
//!
//! # Atomic output and errors
//! The file is written through the crate's one atomic output
//! (`crate::fs::output`): to `.<file name>.tmp-<pid>-<random>` in the
//! target directory, fsynced, renamed over the target, and the directory is
//! fsynced. If anything fails, or the [`FileWriter`] is dropped without
//! [`FileWriter::finish`], the temporary file is removed and the target is
//! untouched. The one exception is a failing directory fsync after the
//! rename: the new file is then in place but its durability is not
//! guaranteed, and the error is returned.
//!
//! After any I/O error the writer is poisoned: later calls return
//! [`Error::Poisoned`]. Dropping a [`TensorWriter`] without `finish` poisons
//! it too. Errors about the input (order, rank, range, element type, names)
//! leave the writer unchanged: the refused entry is not written.

use crate::element::{DType, Element, Value};
use crate::error::{Error, Result};
use crate::fs::ctx::{IoCtx, Writeback};
use crate::fs::output::{AtomicOutput, FileId, ReplaceInput, check_room};
use crate::fs::sweep::remove_stale_output_temps;
use crate::hurray::compressed::{CompressedDescriptor, compressed_descriptor_len};
use crate::hurray::csf::{CsfDescriptor, csf_descriptor_len};
use crate::hurray::header::{FLAG_HAS_INDEX_CRC32C, FLAG_HAS_KV_METADATA};
use crate::hurray::kv::{KEY_WRITER, checksum_key};
use crate::hurray::{
    self, BufferHandle, CooDescriptor, FileHeader, HEADER_LEN, IndexEntry, KvValue, MAX_ALIGNMENT,
    MAX_RANK, MIN_ALIGNMENT, Statistics, Trailer, align_up, descriptor::descriptor_len,
};
pub use crate::options::OutputLayout;
use crate::stats::StatsAccumulator;
use std::collections::HashSet;
use std::fs::File;
use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::Xxh3;

/// Prefix of the KV keys the crate writes; refused for user entries.
pub const RESERVED_KEY_PREFIX: &str = "coo_assembler.";
/// KV key of the provenance entry.
/// Default size of each write buffer.
pub const DEFAULT_BUFFER_BYTES: usize = 1 << 20;
/// Smallest accepted [`WriteOptions::buffer_bytes`].
pub const MIN_BUFFER_BYTES: usize = 4096;
/// Largest accepted [`WriteOptions::buffer_bytes`].
pub const MAX_BUFFER_BYTES: usize = 1 << 28;

/// Padding after the last buffer of a tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TailPadding {
    /// To the data alignment A, then to 8: the spec's writer protocol.
    #[default]
    Alignment,
    /// To 8 only: what the reference writer does (and the spec's worked
    /// example shows).
    Eight,
}

/// How a file is written.
#[derive(Clone, Debug)]
pub struct WriteOptions {
    /// data_buffer_alignment A: a power of two in 4096 ..= 2 MiB. Default 4096.
    pub alignment: u32,
    /// Write the statistics section in each descriptor. Default true.
    pub statistics: bool,
    /// Write the xxh3-64 of each buffer as KV entries. Default true.
    pub checksums: bool,
    /// Write the `coo_assembler.writer` KV entry. Default true.
    pub provenance: bool,
    /// Padding after each tensor's last buffer. Default: the spec's.
    pub tail_padding: TailPadding,
    /// Size of each write buffer (the output buffer and the index buffer),
    /// 4 KiB ..= 256 MiB. Default 1 MiB.
    pub buffer_bytes: usize,
    /// Every file operation goes through this context.
    pub io: IoCtx,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            alignment: MIN_ALIGNMENT,
            statistics: true,
            checksums: true,
            provenance: true,
            tail_padding: TailPadding::Alignment,
            buffer_bytes: DEFAULT_BUFFER_BYTES,
            io: IoCtx::new(),
        }
    }
}

/// What was written for one tensor.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorSummary {
    /// Tensor name.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: Vec<u64>,
    /// Layout.
    pub layout: OutputLayout,
    /// Number of stored entries.
    pub nnz: u64,
    /// The statistics section, when written.
    pub statistics: Option<Statistics>,
    /// xxh3-64 of the values buffer bytes (always computed).
    pub values_xxh3: u64,
    /// xxh3-64 of the indices buffer bytes (COO's `indices`, CSR's
    /// `col_indices`, CSC's `row_indices`; always computed).
    pub indices_xxh3: u64,
    /// xxh3-64 of the pointer buffer (`row_ptr` / `col_ptr`), for CSR and CSC.
    pub pointers_xxh3: Option<u64>,
    /// CSF: xxh3-64 of each level's buffers, `pos_0`, `crd_0`, `pos_1`...
    /// (`indices_xxh3` is the leaf `crd`'s); empty for the other layouts.
    pub levels_xxh3: Vec<u64>,
    /// Absolute offset of the descriptor.
    pub descriptor_offset: u64,
    /// Absolute offset of the values buffer (the first buffer).
    pub data_offset: u64,
    /// End of the last buffer minus `data_offset`.
    pub data_length: u64,
}

/// What was written in all.
#[derive(Clone, Debug, PartialEq)]
pub struct FileSummary {
    /// The file written.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
    /// The tensors, in write order.
    pub tensors: Vec<TensorSummary>,
    /// Temporary output files of killed earlier runs (`.<name>.tmp-<pid>-*`
    /// next to the target, whose process is dead) that this writer removed
    /// when it started; see `docs/reliability.md`.
    pub stale_removed: Vec<PathBuf>,
}

/// Writes one Hurray file; see the [module docs](self).
pub struct FileWriter {
    /// The temporary file and its target.
    out: AtomicOutput,
    file: File,
    io: IoCtx,
    alignment: u64,
    statistics: bool,
    checksums: bool,
    provenance: bool,
    tail_padding: TailPadding,
    buf_cap: usize,
    /// Pending output; `buf[0]` goes at file offset `flushed`.
    buf: Vec<u8>,
    flushed: u64,
    /// How far the bytes before `flushed` went to disk.
    written_back: Writeback,
    /// Hash of the values being written, and where they start in `buf`.
    vhash: Xxh3,
    vhash_from: Option<usize>,
    entries: Vec<IndexEntry>,
    names: HashSet<String>,
    user_kv: Vec<(String, KvValue)>,
    user_keys: HashSet<String>,
    tensors: Vec<TensorSummary>,
    /// Dense vectors written ([`FileWriter::begin_vector`]): name and the
    /// xxh3 of the values, for their checksum entries.
    vectors: Vec<(String, u64)>,
    /// Vectors reserved ([`FileWriter::reserve_vector`]) and not finished.
    reserved_open: usize,
    poisoned: bool,
    stale_removed: Vec<PathBuf>,
}

/// The `coo_assembler.writer` KV entry.
pub(crate) fn provenance() -> (String, KvValue) {
    (
        KEY_WRITER.to_string(),
        KvValue::String(format!("coo-assembler {}", env!("CARGO_PKG_VERSION"))),
    )
}

/// The end of a file starting at offset `at` (8-aligned): the KV section
/// (when `kv` is not empty) padded to 8, the index and the trailer. Returns
/// the bytes and the file flags they call for. Shared by [`FileWriter`] and
/// the composite writer (`crate::composite`).
pub(crate) fn encode_tail(
    kv: &[(String, KvValue)],
    entries: &[IndexEntry],
    at: u64,
) -> Result<(Vec<u8>, u32)> {
    let mut out = Vec::new();
    let mut flags = FLAG_HAS_INDEX_CRC32C;
    let (mut kv_offset, mut kv_length) = (0u64, 0u32);
    if !kv.is_empty() {
        let bytes = hurray::kv::encode(kv);
        kv_length = u32::try_from(bytes.len()).map_err(|_| {
            invalid(format!(
                "KV metadata section of {} bytes exceeds the format's 4 GiB limit",
                bytes.len()
            ))
        })?;
        kv_offset = at;
        out.extend_from_slice(&bytes);
        out.resize(bytes.len().div_ceil(8) * 8, 0);
        flags |= FLAG_HAS_KV_METADATA;
    }
    let index = hurray::index::encode(entries);
    let index_offset = at + out.len() as u64;
    out.extend_from_slice(&index);
    let trailer = Trailer {
        index_offset,
        index_length: index.len() as u64,
        kv_offset,
        kv_length,
        index_crc32c: crate::hurray::crc32c::crc32c(&index),
    };
    out.extend_from_slice(&trailer.encode());
    Ok((out, flags))
}

/// A call argument the writer cannot take (name, metadata, offsets).
fn invalid(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

impl FileWriter {
    /// Start writing `path` (replaced atomically at [`FileWriter::finish`]).
    pub fn create(path: impl AsRef<Path>, opts: WriteOptions) -> Result<FileWriter> {
        Self::create_for(path.as_ref(), opts, &[], ReplaceInput::Refuse)
    }

    /// [`FileWriter::create`] for an operation that reads `inputs`: a
    /// `path` naming one of them is refused unless `replace` allows it
    /// (see `crate::fs::output`).
    pub(crate) fn create_for(
        target: &Path,
        opts: WriteOptions,
        inputs: &[&FileId],
        replace: ReplaceInput,
    ) -> Result<FileWriter> {
        let a = opts.alignment;
        if !a.is_power_of_two() || !(MIN_ALIGNMENT..=MAX_ALIGNMENT).contains(&a) {
            return Err(Error::InvalidOptions(format!(
                "alignment {a} must be a power of two in {MIN_ALIGNMENT}..={MAX_ALIGNMENT}"
            )));
        }
        if !(MIN_BUFFER_BYTES..=MAX_BUFFER_BYTES).contains(&opts.buffer_bytes) {
            return Err(Error::InvalidOptions(format!(
                "buffer_bytes {} must be in {MIN_BUFFER_BYTES}..={MAX_BUFFER_BYTES}",
                opts.buffer_bytes
            )));
        }
        let (out, file) = AtomicOutput::create(&opts.io, target, inputs, replace)?;
        // Leftovers of killed runs writing the same target (this process's
        // own files are passed over). Best effort: what stays is removed by
        // a later run.
        let stale_removed = remove_stale_output_temps(&opts.io, target).unwrap_or_default();
        let mut w = FileWriter {
            out,
            file,
            io: opts.io,
            alignment: u64::from(a),
            statistics: opts.statistics,
            checksums: opts.checksums,
            provenance: opts.provenance,
            tail_padding: opts.tail_padding,
            buf_cap: opts.buffer_bytes,
            // Room for one more entry past the flush threshold, so the
            // buffer never reallocates.
            buf: Vec::with_capacity(opts.buffer_bytes + 8),
            flushed: 0,
            written_back: Writeback::default(),
            vhash: Xxh3::new(),
            vhash_from: None,
            entries: Vec::new(),
            names: HashSet::new(),
            user_kv: Vec::new(),
            user_keys: HashSet::new(),
            tensors: Vec::new(),
            vectors: Vec::new(),
            reserved_open: 0,
            poisoned: false,
            stale_removed,
        };
        // Placeholder header; rewritten at finish with the real count and flags.
        let header = w.header(FLAG_HAS_INDEX_CRC32C, u64::MAX);
        w.buf.extend_from_slice(&header);
        Ok(w)
    }

    fn header(&self, flags: u32, count: u64) -> [u8; 64] {
        FileHeader {
            flags,
            alignment: self.alignment as u32,
            first_descriptor_offset: HEADER_LEN,
            tensor_count_hint: count,
        }
        .encode()
    }

    /// Add a user KV entry. Keys must be non-empty, at most 65535 bytes,
    /// unique, and not start with `coo_assembler.`; arrays must hold scalars
    /// of one type.
    pub fn add_metadata(&mut self, key: &str, value: KvValue) -> Result<()> {
        self.check_usable()?;
        if key.is_empty() || key.len() > usize::from(u16::MAX) {
            return Err(invalid(format!(
                "metadata key must be 1..=65535 bytes, got {} bytes",
                key.len()
            )));
        }
        if key.starts_with(RESERVED_KEY_PREFIX) {
            return Err(invalid(format!(
                "metadata key {key:?}: keys starting with {RESERVED_KEY_PREFIX:?} are reserved"
            )));
        }
        self.add_kv(key, value)
    }

    /// A KV entry under our own `coo_assembler.` prefix (plan files).
    pub(crate) fn add_own_metadata(&mut self, key: &str, value: KvValue) -> Result<()> {
        self.check_usable()?;
        debug_assert!(key.starts_with(RESERVED_KEY_PREFIX));
        self.add_kv(key, value)
    }

    fn add_kv(&mut self, key: &str, value: KvValue) -> Result<()> {
        if self.user_keys.contains(key) {
            return Err(invalid(format!("metadata key {key:?} given twice")));
        }
        check_kv_value(key, &value)?;
        self.user_keys.insert(key.to_string());
        self.user_kv.push((key.to_string(), value));
        Ok(())
    }

    /// Start a COO tensor. Entries are then pushed in strictly increasing
    /// order and the tensor is closed with [`TensorWriter::finish`].
    pub fn begin_tensor(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[u64],
    ) -> Result<TensorWriter<'_>> {
        self.begin_tensor_as(name, dtype, shape, OutputLayout::Coo)
    }

    /// Start a tensor in `layout` (CSR and CSC: rank 2 only; CSF: rank 3
    /// and up, levels in dimension order). Entries are pushed in the
    /// layout's order: row-major for COO, CSR and CSF, column-major (by
    /// column, then row) for CSC.
    pub fn begin_tensor_as(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[u64],
        layout: OutputLayout,
    ) -> Result<TensorWriter<'_>> {
        self.begin_tensor_in(name, dtype, shape, layout, None)
    }

    /// [`FileWriter::begin_tensor_as`], a CSF tensor's levels in
    /// `mode_order` (the dimension stored at each level, outermost first;
    /// `None`: the identity): its entries are pushed in increasing order
    /// of their index tuples taken in that order.
    pub fn begin_tensor_in(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[u64],
        layout: OutputLayout,
        mode_order: Option<&[usize]>,
    ) -> Result<TensorWriter<'_>> {
        self.check_name(name)?;
        let rank = shape.len();
        if rank == 0 || rank > MAX_RANK {
            return Err(invalid(format!(
                "tensor {name:?}: rank {rank} is out of 1..={MAX_RANK} for a COO tensor"
            )));
        }
        if let Some(d) = shape.iter().position(|&e| e == u64::MAX) {
            return Err(invalid(format!(
                "tensor {name:?}: extent of dimension {d} is u64::MAX (dynamic), not storable"
            )));
        }
        layout.check_layout(rank, mode_order)?;
        let csf = (layout == OutputLayout::Csf)
            .then(|| Levels::new(layout.storage_order(rank, mode_order), self.buf_cap + 8));
        if layout.is_compressed() {
            // The pointers stream to disk through a bounded buffer, so
            // nothing bounds them but the disk: a major extent whose
            // pointers the file system cannot hold (2^40 rows: 8 TiB) is
            // refused here, not after filling it.
            check_room(
                &self.file,
                self.out.target(),
                fixed_output_bytes(shape, layout),
                &pointers_what(shape, layout),
            )?;
        }
        let descriptor_offset = self.pos();
        let desc_len = if layout.is_compressed() {
            compressed_descriptor_len(self.statistics)
        } else if csf.is_some() {
            csf_descriptor_len(rank, self.statistics)
        } else {
            descriptor_len(rank, self.statistics)
        } as u64;
        let values_offset = self.align(descriptor_offset + desc_len)?;
        // The descriptor's place is zero-filled now and written at finish.
        self.put_zeros(values_offset - descriptor_offset)?;
        self.vhash.reset();
        self.vhash_from = Some(self.buf.len());
        let cap = self.buf_cap;
        Ok(TensorWriter {
            name: name.to_string(),
            dtype,
            width: dtype.width(),
            layout,
            shape: shape.to_vec(),
            prev: vec![0; rank],
            nnz: 0,
            // Room for one entry past the flush threshold (rank <= 64).
            idx: SideStream::new(cap + 8 * MAX_RANK),
            nnz_bound: u64::MAX,
            ptr: layout.is_compressed().then(|| SideStream::new(cap + 8)),
            csf,
            next_major: 0,
            stats: self.statistics.then(|| {
                let st = StatsAccumulator::new(shape);
                if dtype.is_complex() {
                    st.without_range()
                } else {
                    st
                }
            }),
            descriptor_offset,
            values_offset,
            finished: false,
            bits: (0, 0),
            values_digest: None,
            fw: self,
        })
    }

    /// A new tensor's name: 1..=65535 bytes, unused, short enough for its
    /// checksum keys; and the writer still usable.
    fn check_name(&self, name: &str) -> Result<()> {
        self.check_usable()?;
        if name.is_empty() || name.len() > usize::from(u16::MAX) {
            return Err(invalid(format!(
                "tensor name must be 1..=65535 bytes, got {} bytes",
                name.len()
            )));
        }
        if self.names.contains(name) {
            return Err(invalid(format!("tensor name {name:?} used twice")));
        }
        if self.checksums && checksum_key(name, "row_indices").len() > usize::from(u16::MAX) {
            return Err(invalid(format!(
                "tensor name of {} bytes is too long for its checksum KV key",
                name.len()
            )));
        }
        Ok(())
    }

    /// Start a dense rank-1 tensor of `len` elements of `dtype` (row-major,
    /// no statistics): its values are appended with
    /// [`VectorWriter::push_le`], exactly `len` of them. What a plan keeps
    /// one word per contribution in, where a COO tensor would add an
    /// index of 8 bytes per word.
    pub(crate) fn begin_vector(
        &mut self,
        name: &str,
        dtype: DType,
        len: u64,
    ) -> Result<VectorWriter<'_>> {
        let (head, bytes) = self.start_vector(name, dtype, len)?;
        self.vhash.reset();
        self.vhash_from = Some(self.buf.len());
        Ok(VectorWriter {
            fw: self,
            head,
            left: bytes,
            finished: false,
        })
    }

    /// Reserve the room of a dense rank-1 tensor of `len` elements of
    /// `dtype` here, before the tensors that follow, and hand it to a
    /// [`ReservedVector`] that fills it front to back at its place (from
    /// another thread, while the next tensor streams on), then finishes
    /// it. What a plan's positions take, made part by part beside its
    /// pattern, without a spill.
    pub(crate) fn reserve_vector(
        &mut self,
        name: &str,
        dtype: DType,
        len: u64,
    ) -> Result<ReservedVector> {
        let (head, bytes) = self.start_vector(name, dtype, len)?;
        self.flush()?;
        let next = self.padded_end(head.values_offset + bytes)?;
        // The room is a hole until filled (it reads as zeros); what
        // follows is written after it.
        self.io.set_len(&self.file, next, self.out.path())?;
        self.io
            .seek(&mut self.file, SeekFrom::Start(next), self.out.path())?;
        self.flushed = next;
        self.written_back = Writeback::settled(next);
        self.reserved_open += 1;
        Ok(ReservedVector {
            file: self.second_handle()?,
            io: self.io.clone(),
            path: self.out.path().to_path_buf(),
            head,
            left: bytes,
            hash: Xxh3::new(),
            written_back: Writeback::default(),
        })
    }

    /// A dense vector's start, for [`FileWriter::begin_vector`] and
    /// [`FileWriter::reserve_vector`]: the name checked and taken, the
    /// descriptor's room zero-filled up to the aligned values; its head
    /// and the bytes its values take.
    fn start_vector(&mut self, name: &str, dtype: DType, len: u64) -> Result<(VectorHead, u64)> {
        self.check_name(name)?;
        if dtype.is_bool() {
            return Err(invalid(format!(
                "vector {name:?}: bools are packed, not words"
            )));
        }
        let bytes = len
            .checked_mul(dtype.width() as u64)
            .ok_or_else(|| invalid(format!("vector {name:?} of {len} elements overflows u64")))?;
        let descriptor_offset = self.pos();
        let desc_len = crate::hurray::dense::dense_descriptor_len(1, false) as u64;
        let values_offset = self.align(descriptor_offset + desc_len)?;
        self.put_zeros(values_offset - descriptor_offset)?;
        self.names.insert(name.to_string());
        let head = VectorHead {
            name: name.to_string(),
            dtype,
            len,
            descriptor_offset,
            values_offset,
        };
        Ok((head, bytes))
    }

    /// Where the next tensor starts after data ending at `end`: past the
    /// tail padding the options ask for.
    fn padded_end(&self, end: u64) -> Result<u64> {
        match self.tail_padding {
            TailPadding::Alignment => align8(self.align(end)?),
            TailPadding::Eight => align8(end),
        }
    }

    /// A second handle on the output, for writes at known offsets from
    /// other threads.
    fn second_handle(&self) -> Result<File> {
        self.file
            .try_clone()
            .map_err(|e| Error::io("duplicate the handle of", self.out.path(), e))
    }

    /// Write the KV section, index and trailer, fsync, rename over the
    /// target and fsync the directory.
    pub fn finish(mut self) -> Result<FileSummary> {
        self.check_usable()?;
        if self.reserved_open > 0 {
            return Err(Error::Poisoned(
                "file writer (a reserved vector was not finished)",
            ));
        }
        let bytes = self.write_end()?;
        let path = self.out.target().to_path_buf();
        self.out.commit(&self.file)?;
        Ok(FileSummary {
            path,
            bytes,
            tensors: self.tensors,
            stale_removed: self.stale_removed,
        })
    }

    /// The KV section, index and trailer, and the final header; returns
    /// the file's length.
    fn write_end(&mut self) -> Result<u64> {
        let mut kv = Vec::new();
        if self.provenance {
            kv.push(provenance());
        }
        kv.extend(self.user_kv.iter().cloned());
        if self.checksums {
            for t in &self.tensors {
                let hashes: Vec<u64> = if t.layout == OutputLayout::Csf {
                    std::iter::once(t.values_xxh3)
                        .chain(t.levels_xxh3.iter().copied())
                        .collect()
                } else {
                    [Some(t.values_xxh3), Some(t.indices_xxh3), t.pointers_xxh3]
                        .into_iter()
                        .flatten()
                        .collect()
                };
                for (name, h) in t.layout.buffer_names().iter().zip(hashes) {
                    kv.push((checksum_key(&t.name, name), KvValue::U64(h)));
                }
            }
            for (name, h) in &self.vectors {
                kv.push((checksum_key(name, "values"), KvValue::U64(*h)));
            }
        }
        let (tail, flags) = encode_tail(&kv, &self.entries, self.pos())?;
        self.put(&tail)?;
        self.flush()?;
        let bytes = self.flushed;
        let header = self.header(flags, self.entries.len() as u64);
        self.io
            .write_all_at(&self.file, &header, 0, self.out.path())?;
        Ok(bytes)
    }

    fn check_usable(&self) -> Result<()> {
        if self.poisoned {
            return Err(Error::Poisoned("file writer"));
        }
        Ok(())
    }

    /// File offset of the next byte written.
    fn pos(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }

    fn align(&self, x: u64) -> Result<u64> {
        align_up(x, self.alignment).ok_or_else(|| invalid("file offset overflows u64".into()))
    }

    /// Write out `buf`, hashing the values part of it first.
    fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if let Some(from) = self.vhash_from {
            self.vhash.update(&self.buf[from..]);
            self.vhash_from = Some(0);
        }
        let r = self
            .io
            .write_all(&mut self.file, &self.buf, self.out.path())
            .and_then(|()| {
                self.flushed += self.buf.len() as u64;
                self.buf.clear();
                self.written_back
                    .step(&self.io, &self.file, self.out.path(), 0, self.flushed)
            });
        if r.is_err() {
            self.poisoned = true;
        }
        r
    }

    /// Append bytes (not values: those go through `buf` directly).
    fn put(&mut self, mut bytes: &[u8]) -> Result<()> {
        while !bytes.is_empty() {
            if self.buf.len() >= self.buf_cap {
                self.flush()?;
            }
            let n = (self.buf_cap - self.buf.len()).min(bytes.len());
            self.buf.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        Ok(())
    }

    fn put_zeros(&mut self, mut n: u64) -> Result<()> {
        while n > 0 {
            if self.buf.len() >= self.buf_cap {
                self.flush()?;
            }
            let k = ((self.buf_cap - self.buf.len()) as u64).min(n) as usize;
            self.buf.resize(self.buf.len() + k, 0);
            n -= k as u64;
        }
        Ok(())
    }

    /// A side stream of `len` bytes was written at `at`, past room reserved
    /// for more values than came; the values and their padding end at
    /// `start` (both multiples of A, `start <= at`). Bring the stream down
    /// to `start` and go on writing after it.
    fn close_gap(&mut self, start: u64, at: u64, len: u64) -> Result<()> {
        let r = self.close_gap_inner(start, at, len);
        if r.is_err() {
            self.poisoned = true;
        }
        r
    }

    fn close_gap_inner(&mut self, start: u64, at: u64, len: u64) -> Result<()> {
        if at < start || !self.buf.is_empty() {
            return Err(Error::Poisoned("file writer (reserved room overrun)"));
        }
        let gap = at - start;
        if gap > 0
            && !self
                .io
                .collapse_range(&self.file, start, gap, self.out.path())?
        {
            // Copy down in buffer-sized pieces, front first: each piece is
            // read before anything is written over it (start < at).
            let mut piece = std::mem::take(&mut self.buf);
            piece.resize(self.buf_cap, 0);
            let mut done = 0u64;
            let r = (|| -> Result<()> {
                while done < len {
                    let n = (len - done).min(self.buf_cap as u64) as usize;
                    let p = &mut piece[..n];
                    self.io
                        .read_exact_at(&self.file, p, at + done, self.out.path())?;
                    self.io
                        .write_all_at(&self.file, p, start + done, self.out.path())?;
                    done += n as u64;
                }
                self.io.set_len(&self.file, start + len, self.out.path())
            })();
            piece.clear();
            self.buf = piece;
            r?;
        }
        self.flushed = start + len;
        self.written_back = Writeback::settled(self.flushed);
        self.io.seek(
            &mut self.file,
            SeekFrom::Start(self.flushed),
            self.out.path(),
        )?;
        Ok(())
    }

    /// Place `bytes` at `offset` (before the current end): patched in the
    /// buffer when it is all still there, else written to the file.
    fn write_at(&mut self, bytes: &[u8], offset: u64) -> Result<()> {
        if offset >= self.flushed {
            let start = (offset - self.flushed) as usize;
            if let Some(dst) = self.buf.get_mut(start..start + bytes.len()) {
                dst.copy_from_slice(bytes);
                return Ok(());
            }
        }
        if offset + bytes.len() as u64 > self.flushed {
            self.flush()?;
        }
        let r = self
            .io
            .write_all_at(&self.file, bytes, offset, self.out.path());
        if r.is_err() {
            self.poisoned = true;
        }
        r
    }
}

impl std::fmt::Debug for FileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWriter")
            .field("target", &self.out.target())
            .field("tmp_path", &self.out.path())
            .field("pos", &self.pos())
            .field("tensors", &self.entries.len())
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for TensorWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TensorWriter")
            .field("name", &self.name)
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("nnz", &self.nnz)
            .finish_non_exhaustive()
    }
}

fn align8(x: u64) -> Result<u64> {
    align_up(x, 8).ok_or_else(|| invalid("file offset overflows u64".into()))
}

fn check_kv_value(key: &str, v: &KvValue) -> Result<()> {
    let too_long = |n: usize| n > u32::MAX as usize;
    match v {
        KvValue::String(s) if too_long(s.len()) => {
            Err(invalid(format!("metadata {key:?}: string too long")))
        }
        KvValue::Bytes(b) if too_long(b.len()) => {
            Err(invalid(format!("metadata {key:?}: bytes too long")))
        }
        KvValue::Array(items) => {
            if too_long(items.len()) {
                return Err(invalid(format!("metadata {key:?}: array too long")));
            }
            let first = items.first().map(std::mem::discriminant);
            for it in items {
                if matches!(it, KvValue::Array(_)) {
                    return Err(invalid(format!(
                        "metadata {key:?}: arrays cannot hold arrays"
                    )));
                }
                if Some(std::mem::discriminant(it)) != first {
                    return Err(invalid(format!(
                        "metadata {key:?}: array elements must all have one type"
                    )));
                }
                check_kv_value(key, it)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Append the little-endian bytes of `vals` as `dtype` (the caller
/// checked every value is one `dtype` takes), one loop per type.
fn put_values(buf: &mut Vec<u8>, dtype: DType, vals: &[Value]) {
    fn put<T: crate::element::RealElement>(buf: &mut Vec<u8>, vals: &[Value]) {
        buf.reserve(vals.len() * std::mem::size_of::<T>());
        for &v in vals {
            T::from_value(v).write_le(buf);
        }
    }
    crate::with_element_type!(dtype, real T => put::<T>(buf, vals), complex _C => {
        for v in vals {
            let le = v.to_le(dtype).unwrap_or_default();
            buf.extend_from_slice(&le[..dtype.width()]);
        }
    })
}

/// Writes one tensor of a [`FileWriter`]; see the [module docs](self).
///
/// Dropping it without [`TensorWriter::finish`] poisons the file writer.
pub struct TensorWriter<'a> {
    fw: &'a mut FileWriter,
    name: String,
    dtype: DType,
    width: usize,
    layout: OutputLayout,
    shape: Vec<u64>,
    /// The previous entry's coordinate (valid when nnz > 0).
    prev: Vec<u64>,
    nnz: u64,
    /// The indices (COO: all of them; CSR/CSC: the minor one), u64 LE.
    idx: SideStream,
    /// Most entries this tensor may take (`u64::MAX` unless
    /// [`TensorWriter::reserve_indices`] set a bound).
    nnz_bound: u64,
    /// CSR/CSC: the pointer buffer, u64 LE.
    ptr: Option<SideStream>,
    /// CSR/CSC: the first row (column) whose pointer is not written yet.
    next_major: u64,
    /// CSF: the levels' streams (`idx` then holds nothing).
    csf: Option<Levels>,
    stats: Option<StatsAccumulator>,
    descriptor_offset: u64,
    values_offset: u64,
    finished: bool,
    /// Bool: the bits of the byte being packed (LSB first) and how many.
    bits: (u8, u32),
    /// The values' xxh3-64, when they were written in place
    /// ([`TensorWriter::placed`]) and hashed in pieces.
    values_digest: Option<u64>,
}

impl TensorWriter<'_> {
    /// Add the next entry. `T` must be the tensor's element type.
    #[inline]
    pub fn push<T: Element>(&mut self, idx: &[u64], value: T) -> Result<()> {
        if T::DTYPE != self.dtype {
            return Err(self.wrong_type(format!("{value:?} ({})", T::DTYPE)));
        }
        self.check_index(idx)?;
        if self.dtype.is_bool() {
            self.put_bit(bytemuck::bytes_of(&value)[0]);
        } else {
            value.write_le(&mut self.fw.buf);
        }
        self.accept(idx, value.to_value().stat_f64())
    }

    /// Bool: one value into the byte being packed, which goes to the
    /// output buffer once it holds 8 (the spec's LSB-first packing).
    #[inline]
    fn put_bit(&mut self, byte: u8) {
        let (acc, n) = &mut self.bits;
        *acc |= u8::from(byte != 0) << *n;
        *n += 1;
        if *n == 8 {
            self.fw.buf.push(*acc);
            self.bits = (0, 0);
        }
    }

    /// Add the next entry from its little-endian bytes (`dtype().width()`
    /// of them) and its value as `f64` for the statistics (ignored when
    /// statistics are off; for a complex type, [`Value::stat_f64`]).
    #[inline]
    pub fn push_le(&mut self, idx: &[u64], value_le: &[u8], value_f64: f64) -> Result<()> {
        if value_le.len() != self.width {
            return Err(self.wrong_type(format!("{} bytes", value_le.len())));
        }
        self.check_index(idx)?;
        if self.dtype.is_bool() {
            self.put_bit(value_le[0]);
        } else {
            self.fw.buf.extend_from_slice(value_le);
        }
        self.accept(idx, value_f64)
    }

    /// Append one entry given as a [`Value`] (see [`Value::to_le`] for the
    /// conversions allowed).
    pub fn push_value(&mut self, idx: &[u64], value: Value) -> Result<()> {
        let le = value
            .to_le(self.dtype)
            .ok_or_else(|| self.wrong_type(format!("{value}")))?;
        if self.width == le.len() {
            // 8-byte types: a copy of known length, no call to memmove.
            self.check_index(idx)?;
            self.fw.buf.extend_from_slice(&le);
            return self.accept(idx, value.stat_f64());
        }
        self.push_le(idx, &le[..self.width], value.stat_f64())
    }

    /// Append a batch of entries: `idx` holds `rank` components for each
    /// of `vals`, in order. The same bytes, statistics and errors as a
    /// [`TensorWriter::push_value`] per entry; for COO tensors of a float
    /// type whose batch passes every check up front, the order and range
    /// checks, the encoding, the statistics and the buffer appends each run
    /// as one loop over the batch instead of calls per entry. Anything else
    /// (compressed layouts, integer types, a bad entry) goes entry by
    /// entry, which reports the first bad entry exactly as before.
    pub(crate) fn push_batch(&mut self, idx: &[u64], vals: &[Value]) -> Result<()> {
        let rank = self.shape.len();
        if idx.len() != vals.len() * rank {
            return Err(invalid(format!(
                "tensor {:?}: a batch of {} values with {} index components (rank {rank})",
                self.name,
                vals.len(),
                idx.len()
            )));
        }
        if self.ptr.is_some() && self.dtype == DType::F64 && rank == 2 {
            return self.push_batch_runs(idx, vals);
        }
        if self.csf.is_some() && self.dtype == DType::F64 {
            // CSF: the checks and levels per entry, the f64 bytes written
            // as they are (no conversion through `Value::to_le`).
            for (i, &v) in idx.chunks_exact(rank).zip(vals) {
                match v {
                    Value::Float(x) => {
                        self.check_index(i)?;
                        self.fw.buf.extend_from_slice(&x.to_le_bytes());
                        self.accept(i, x)?;
                    }
                    other => self.push_value(i, other)?,
                }
            }
            return Ok(());
        }
        if !self.batch_fits(idx, vals) {
            for (i, &v) in idx.chunks_exact(rank).zip(vals) {
                self.push_value(i, v)?;
            }
            return Ok(());
        }
        let width = self.width;
        let mut done = 0;
        while done < vals.len() {
            // As many entries as both buffers have room for (at least one,
            // as push_value would), then flush as push_value would.
            let room_v = self.fw.buf_cap.saturating_sub(self.fw.buf.len()) / width;
            let room_i = self.fw.buf_cap.saturating_sub(self.idx.buf.len()) / (8 * rank);
            let m = room_v.min(room_i).clamp(1, vals.len() - done);
            let vs = &vals[done..done + m];
            let is = &idx[done * rank..(done + m) * rank];
            put_values(&mut self.fw.buf, self.dtype, vs);
            let start = self.idx.buf.len();
            self.idx.buf.resize(start + is.len() * 8, 0);
            for (dst, &i) in self.idx.buf[start..].chunks_exact_mut(8).zip(is) {
                dst.copy_from_slice(&i.to_le_bytes());
            }
            if let Some(st) = &mut self.stats {
                st.extend(vs.iter().map(|v| v.to_f64()));
            }
            self.prev.copy_from_slice(&is[is.len() - rank..]);
            self.nnz += m as u64;
            done += m;
            self.flush_full()?;
        }
        Ok(())
    }

    /// [`TensorWriter::push_batch`] of an f64 CSR / CSC tensor: the batch
    /// cut into runs of one major index, each through
    /// [`TensorWriter::push_run`]; a run holding a value that is not a
    /// float goes entry by entry, as `push_value` converts it.
    fn push_batch_runs(&mut self, idx: &[u64], vals: &[Value]) -> Result<()> {
        let d = self.layout.major_dim();
        let (mut minors, mut floats) = (Vec::with_capacity(64), Vec::with_capacity(64));
        let mut i = 0;
        while i < vals.len() {
            let major = idx[2 * i + d];
            let from = i;
            minors.clear();
            floats.clear();
            let mut all_float = true;
            while i < vals.len() && idx[2 * i + d] == major {
                minors.push(idx[2 * i + 1 - d]);
                match vals[i] {
                    Value::Float(x) => floats.push(x),
                    _ => all_float = false,
                }
                i += 1;
            }
            if all_float {
                self.push_run(major, &minors, &floats)?;
            } else {
                for (k, &v) in vals.iter().enumerate().take(i).skip(from) {
                    self.push_value(&idx[2 * k..2 * k + 2], v)?;
                }
            }
        }
        Ok(())
    }

    /// Append the entries of one major index of a CSR / CSC tensor (a row
    /// of CSR, a column of CSC): at `(major, minors[i])` with `values[i]`,
    /// the minors increasing. The bytes, statistics and errors of a
    /// [`TensorWriter::push`] per entry (a run that fails a check goes
    /// entry by entry, which names the first bad one), with the checks
    /// and the pointers paid once per run.
    pub(crate) fn push_run<T: Element>(
        &mut self,
        major: u64,
        minors: &[u64],
        values: &[T],
    ) -> Result<()> {
        let m = minors.len();
        let Some(first) = minors.first() else {
            return Ok(());
        };
        let d = self.layout.major_dim();
        let fits = self.ptr.is_some()
            && !self.fw.poisoned
            && T::DTYPE == self.dtype
            && !self.dtype.is_bool()
            && values.len() == m
            && self.nnz_bound.saturating_sub(self.nnz) >= m as u64
            && major < self.shape[d]
            && minors[m - 1] < self.shape[1 - d]
            && minors.windows(2).all(|w| w[0] < w[1])
            && (self.nnz == 0
                || major > self.prev[d]
                || (major == self.prev[d] && *first > self.prev[1 - d]));
        let mut idx = [0u64; 2];
        if !fits {
            for (&minor, &v) in minors.iter().zip(values) {
                idx[d] = major;
                idx[1 - d] = minor;
                self.push(&idx, v)?;
            }
            return Ok(());
        }
        if major >= self.next_major {
            self.pointers_upto(major)?;
        }
        let width = self.width;
        let mut done = 0;
        while done < m {
            // As many entries as both buffers have room for (at least one).
            let room_v = self.fw.buf_cap.saturating_sub(self.fw.buf.len()) / width;
            let room_i = self.fw.buf_cap.saturating_sub(self.idx.buf.len()) / 8;
            let k = room_v.min(room_i).clamp(1, m - done);
            let (ms, vs) = (&minors[done..done + k], &values[done..done + k]);
            // On a little-endian machine a run's bytes are its memory:
            // one copy each (not bool, which is packed: refused above).
            if cfg!(target_endian = "little") {
                self.fw.buf.extend_from_slice(bytemuck::cast_slice(vs));
                self.idx.buf.extend_from_slice(bytemuck::cast_slice(ms));
            } else {
                for &v in vs {
                    v.write_le(&mut self.fw.buf);
                }
                for &i in ms {
                    self.idx.buf.extend_from_slice(&i.to_le_bytes());
                }
            }
            if let Some(st) = &mut self.stats {
                st.extend(vs.iter().map(|v| v.to_value().stat_f64()));
            }
            self.nnz += k as u64;
            done += k;
            self.flush_full()?;
        }
        self.prev[d] = major;
        self.prev[1 - d] = minors[m - 1];
        Ok(())
    }

    /// Whether the fast path of [`TensorWriter::push_batch`] may take this
    /// batch: a COO tensor of a float type, float values, room under the
    /// bound, every index in range and every entry after the one before.
    fn batch_fits(&self, idx: &[u64], vals: &[Value]) -> bool {
        let rank = self.shape.len();
        if self.fw.poisoned
            || self.ptr.is_some()
            || self.csf.is_some()
            || !self.dtype.is_float()
            || rank == 0
            || vals.is_empty()
            || self.nnz_bound.saturating_sub(self.nnz) < vals.len() as u64
        {
            return false;
        }
        // Flags accumulated without branching out, checked once.
        let mut ok = vals.iter().all(|v| matches!(v, Value::Float(_)));
        if rank == 2 {
            let (e0, e1) = (self.shape[0], self.shape[1]);
            let mut prev = (self.prev[0], self.prev[1]);
            let mut first = self.nnz == 0;
            for p in idx.chunks_exact(2) {
                let cur = (p[0], p[1]);
                ok &= cur.0 < e0 && cur.1 < e1 && (first || cur > prev);
                prev = cur;
                first = false;
            }
        } else {
            let mut prev: &[u64] = &self.prev;
            let mut first = self.nnz == 0;
            for cur in idx.chunks_exact(rank) {
                ok &= cur.iter().zip(&self.shape).all(|(i, e)| i < e) && (first || cur > prev);
                prev = cur;
                first = false;
            }
        }
        ok
    }

    /// Entries written so far.
    pub fn nnz(&self) -> u64 {
        self.nnz
    }

    /// The tensor's element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Bytes of buffer memory held for this tensor and its file writer. It
    /// does not grow with the number of entries.
    pub fn buffer_bytes(&self) -> usize {
        self.fw.buf.capacity()
            + self.idx.buf.capacity()
            + self.ptr.as_ref().map_or(0, |p| p.buf.capacity())
            + self.csf.as_ref().map_or(0, Levels::buffer_bytes)
            + self.prev.capacity() * 8
            + self.stats.as_ref().map_or(0, |s| s.buffer_bytes())
    }

    #[cold]
    fn wrong_type(&self, what: String) -> Error {
        Error::InvalidValue {
            contribution: self.nnz,
            value: what,
            reason: "does not match the tensor's element type",
        }
    }

    /// Rank, range and order checks; nothing is changed on error.
    #[inline]
    fn check_index(&self, idx: &[u64]) -> Result<()> {
        if self.fw.poisoned {
            return Err(Error::Poisoned("file writer"));
        }
        if self.nnz >= self.nnz_bound {
            return Err(invalid(format!(
                "tensor {:?}: more than the {} entries reserved",
                self.name, self.nnz_bound
            )));
        }
        if idx.len() != self.shape.len() {
            return Err(Error::WrongRank {
                contribution: self.nnz,
                expected: self.shape.len(),
                got: idx.len(),
            });
        }
        for (dim, (&i, &e)) in idx.iter().zip(&self.shape).enumerate() {
            if i >= e {
                return Err(Error::IndexOutOfRange {
                    contribution: self.nnz,
                    dim,
                    index: i,
                    extent: e,
                });
            }
        }
        let out_of_order = match (&self.csf, self.layout) {
            (Some(l), _) => self.nnz > 0 && !l.after(idx, &self.prev),
            (None, OutputLayout::Csc) => (idx[1], idx[0]) <= (self.prev[1], self.prev[0]),
            _ => idx <= self.prev.as_slice(),
        };
        if self.nnz > 0 && out_of_order {
            return Err(Error::OutOfOrder {
                entry: self.nnz,
                previous: self.prev.clone(),
                got: idx.to_vec(),
            });
        }
        Ok(())
    }

    /// Record an entry whose value bytes are already in the output buffer.
    #[inline]
    fn accept(&mut self, idx: &[u64], v: f64) -> Result<()> {
        if let Some(l) = &mut self.csf {
            l.push(idx, self.nnz == 0);
        } else if self.ptr.is_some() {
            let major = self.layout.major_dim();
            self.idx.push(idx[1 - major]);
            if idx[major] >= self.next_major {
                self.pointers_upto(idx[major])?;
            }
        } else {
            for &i in idx {
                self.idx.push(i);
            }
        }
        self.prev.copy_from_slice(idx);
        self.nnz += 1;
        if let Some(s) = &mut self.stats {
            s.push(v);
        }
        self.flush_full()
    }

    /// Write out the value buffer and the index stream when either is full.
    #[inline]
    fn flush_full(&mut self) -> Result<()> {
        if self.fw.buf.len() >= self.fw.buf_cap {
            self.fw.flush()?;
        }
        if self.idx.buf.len() >= self.fw.buf_cap {
            let r = self.idx.spill(self.fw);
            self.poison_on_err(r)?;
        }
        if let Some(l) = self.csf.as_mut().filter(|l| l.full) {
            let r = l.spill_full(self.fw);
            self.poison_on_err(r)?;
        }
        Ok(())
    }

    /// Promise at most `max_nnz` entries (before the first one; otherwise
    /// nothing changes). The indices (a compressed layout's minor indices;
    /// its pointers still stream to a side file) then go straight into the
    /// output file, at the first multiple of A after the room `max_nnz`
    /// values would take, instead of into a side file that is copied over
    /// at [`TensorWriter::finish`]; there the gap left by fewer values is
    /// closed by moving the file's extents (`FALLOC_FL_COLLAPSE_RANGE`),
    /// or, where the file system cannot, by copying the indices down. The
    /// bytes written are the same either way. An entry beyond the bound is
    /// refused (`Error::InvalidArgument`).
    pub(crate) fn reserve_indices(&mut self, max_nnz: u64) -> Result<()> {
        if self.nnz > 0 {
            return Ok(());
        }
        let end = self
            .dtype
            .stored_len(max_nnz)
            .and_then(|b| b.checked_add(self.values_offset));
        let Some(end) = end else {
            return Ok(());
        };
        self.idx.at = Some(self.fw.align(end)?);
        self.nnz_bound = max_nnz;
        Ok(())
    }

    /// Write this tensor's entries in place from several threads: a COO
    /// tensor of f64 values whose indices have their reserved room
    /// ([`TensorWriter::reserve_indices`]), nothing pushed yet; `None`
    /// otherwise (nothing changes). Each thread writes its entries' bytes
    /// at their places ([`Placed`]) and hashes them in pieces
    /// (`crate::xxh3`); [`TensorWriter::placed_commit`] then takes them
    /// in stream order (statistics, write-back) and
    /// [`TensorWriter::placed_end`] the two hashes. The file's bytes are
    /// those the same entries pushed one by one would give.
    pub(crate) fn placed(&mut self) -> Result<Option<Placed>> {
        let Some(at) = self.idx.at else {
            return Ok(None);
        };
        if self.fw.poisoned
            || self.ptr.is_some()
            || self.csf.is_some()
            || self.dtype != DType::F64
            || self.nnz > 0
        {
            return Ok(None);
        }
        // The header and the descriptor's room, before the values.
        self.fw.flush()?;
        if self.fw.pos() != self.values_offset {
            return Err(Error::Poisoned("file writer (values not at their offset)"));
        }
        Ok(Some(Placed {
            file: self.fw.second_handle()?,
            io: self.fw.io.clone(),
            path: self.fw.out.path().to_path_buf(),
            values_at: self.values_offset,
            indices_at: at,
            rank: self.shape.len() as u64,
            bound: self.nnz_bound,
        }))
    }

    /// The next `n` entries, written in place, in stream order: `last` is
    /// the last one's coordinate (in range and in order: the caller
    /// checked), `values` their values for the statistics.
    pub(crate) fn placed_commit(
        &mut self,
        n: u64,
        last: &[u64],
        values: impl Iterator<Item = f64>,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        if self.fw.poisoned || last.len() != self.shape.len() || self.nnz_bound - self.nnz < n {
            self.fw.poisoned = true;
            return Err(Error::Poisoned("file writer (entries written in place)"));
        }
        if let Some(st) = &mut self.stats {
            st.extend(values);
        }
        self.prev.copy_from_slice(last);
        self.nnz += n;
        self.fw.flushed += n * self.width as u64;
        self.idx.len += n * 8 * self.shape.len() as u64;
        self.idx.in_output = true;
        let fw = &mut *self.fw;
        let r = fw
            .written_back
            .step(&fw.io, &fw.file, fw.out.path(), 0, fw.flushed)
            .and_then(|()| match self.idx.at {
                Some(at) => {
                    self.idx
                        .written_back
                        .step(&fw.io, &fw.file, fw.out.path(), at, self.idx.len)
                }
                None => Ok(()),
            });
        self.poison_on_err(r)
    }

    /// End the writes in place: the values' and the indices' xxh3-64.
    pub(crate) fn placed_end(&mut self, values_xxh3: u64, indices_xxh3: u64) -> Result<()> {
        let fw = &mut *self.fw;
        let r = fw
            .io
            .seek(&mut fw.file, SeekFrom::Start(fw.flushed), fw.out.path());
        self.poison_on_err(r.map(|_| ()))?;
        self.values_digest = Some(values_xxh3);
        self.idx.digest = Some(indices_xxh3);
        Ok(())
    }

    fn poison_on_err(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.fw.poisoned = true;
        }
        r
    }

    /// Write the pointers of rows (columns) `next_major ..= major`: each is
    /// the number of entries before it, `nnz` (the entry being accepted is
    /// not counted yet). A long run of empty rows is written in buffer-sized
    /// pieces.
    #[cold]
    fn pointers_upto(&mut self, major: u64) -> Result<()> {
        let cap = self.fw.buf_cap;
        let Some(ptr) = self.ptr.as_mut() else {
            return Ok(());
        };
        while self.next_major <= major {
            ptr.push(self.nnz);
            self.next_major += 1;
            if ptr.buf.len() >= cap {
                let r = ptr.spill(self.fw);
                if r.is_err() {
                    self.fw.poisoned = true;
                }
                r?;
            }
        }
        Ok(())
    }

    /// Close the tensor: pad, append the indices, write the descriptor.
    pub fn finish(mut self) -> Result<TensorSummary> {
        if self.fw.poisoned {
            return Err(Error::Poisoned("file writer"));
        }
        let r = self.finish_inner();
        match r {
            Ok(s) => {
                self.finished = true;
                Ok(s)
            }
            Err(e) => {
                self.fw.poisoned = true;
                Err(e)
            }
        }
    }

    fn finish_inner(&mut self) -> Result<TensorSummary> {
        if self.bits.1 > 0 {
            // The last, partial byte of bools; its unused bits are zero.
            self.fw.buf.push(self.bits.0);
            self.bits = (0, 0);
        }
        let values_end = self.fw.pos();
        let values_len = values_end - self.values_offset;
        // Hash the values still in the buffer and stop hashing.
        if let Some(from) = self.fw.vhash_from.take() {
            self.fw.vhash.update(&self.fw.buf[from..]);
        }
        let values_xxh3 = self.values_digest.unwrap_or_else(|| self.fw.vhash.digest());
        let mut levels = Vec::new();
        let (indices_len, indices_xxh3) = match &mut self.csf {
            Some(l) => {
                levels = l.append_to(self.fw)?;
                levels.last().copied().unwrap_or_default()
            }
            None => self.idx.append_to(self.fw)?,
        };
        let mut pointers = None;
        if self.ptr.is_some() {
            // The pointers of the rows (columns) after the last entry, and
            // the final one, all equal to nnz.
            let major_extent = self.shape[self.layout.major_dim()];
            self.pointers_upto(major_extent)?;
            if let Some(ptr) = &mut self.ptr {
                pointers = Some(ptr.append_to(self.fw)?);
            }
        }
        let last_end = self.fw.pos();
        let next = self.fw.padded_end(last_end)?;
        self.fw.put_zeros(next - last_end)?;

        let a = self.fw.alignment as u32;
        let statistics = self.stats.as_ref().map(|s| s.finish());
        let handles = |v: &[(u64, u64)]| -> Vec<(BufferHandle, BufferHandle)> {
            v.chunks_exact(2)
                .map(|p| (BufferHandle::cpu(p[0].0, a), BufferHandle::cpu(p[1].0, a)))
                .collect()
        };
        let bytes = match (pointers, &self.csf) {
            (_, Some(l)) => CsfDescriptor {
                dtype: self.dtype,
                shape: self.shape.clone(),
                nnz: self.nnz,
                mode_order: l.order.iter().map(|&d| d as u32).collect(),
                values: BufferHandle::cpu(values_len, a),
                levels: handles(&levels),
                statistics,
            }
            .encode(),
            (None, None) => CooDescriptor {
                dtype: self.dtype,
                shape: self.shape.clone(),
                nnz: self.nnz,
                is_sorted: true,
                values: BufferHandle::cpu(values_len, a),
                indices: BufferHandle::cpu(indices_len, a),
                statistics,
            }
            .encode(),
            (Some((pointers_len, _)), None) => CompressedDescriptor {
                column_major: self.layout == OutputLayout::Csc,
                dtype: self.dtype,
                shape: [self.shape[0], self.shape[1]],
                nnz: self.nnz,
                values: BufferHandle::cpu(values_len, a),
                indices: BufferHandle::cpu(indices_len, a),
                pointers: BufferHandle::cpu(pointers_len, a),
                statistics,
            }
            .encode(),
        };
        self.fw.write_at(&bytes, self.descriptor_offset)?;
        let data_length = last_end - self.values_offset;
        self.fw.entries.push(IndexEntry {
            name: self.name.clone(),
            descriptor_offset: self.descriptor_offset,
            descriptor_length: bytes.len() as u32,
            data_offset: self.values_offset,
            data_length,
        });
        self.fw.names.insert(self.name.clone());
        let summary = TensorSummary {
            name: self.name.clone(),
            dtype: self.dtype,
            shape: self.shape.clone(),
            layout: self.layout,
            nnz: self.nnz,
            statistics,
            values_xxh3,
            indices_xxh3,
            pointers_xxh3: pointers.map(|(_, h)| h),
            levels_xxh3: levels.iter().map(|&(_, h)| h).collect(),
            descriptor_offset: self.descriptor_offset,
            data_offset: self.values_offset,
            data_length,
        };
        self.fw.tensors.push(summary.clone());
        Ok(summary)
    }
}

impl Drop for TensorWriter<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // The file holds a half-written tensor: it cannot be finished.
            self.fw.poisoned = true;
            self.fw.vhash_from = None;
        }
    }
}

/// Writes one dense rank-1 tensor of a [`FileWriter`]
/// ([`FileWriter::begin_vector`]). Dropping it without
/// [`VectorWriter::finish`] poisons the file writer.
pub(crate) struct VectorWriter<'a> {
    fw: &'a mut FileWriter,
    head: VectorHead,
    /// Value bytes still to come.
    left: u64,
    finished: bool,
}

/// What a dense vector's descriptor and index entry say.
struct VectorHead {
    name: String,
    dtype: DType,
    len: u64,
    descriptor_offset: u64,
    values_offset: u64,
}

impl VectorHead {
    /// `n` more bytes where `left` remain: whole elements, not too many.
    fn take(&self, n: u64, left: u64) -> Result<u64> {
        let w = self.dtype.width() as u64;
        if n > left || n % w != 0 {
            return Err(invalid(format!(
                "vector {:?}: {n} more bytes where {left} remain, in elements of {w} bytes",
                self.name
            )));
        }
        Ok(left - n)
    }

    /// Close the vector in `fw`: every element given (none `left`), its
    /// values hashing to `digest`; the descriptor, index entry and
    /// checksum entry written.
    fn close(&self, fw: &mut FileWriter, left: u64, digest: u64) -> Result<()> {
        if left != 0 {
            return Err(invalid(format!(
                "vector {:?} closed {left} bytes short",
                self.name
            )));
        }
        let data_length = self.len * self.dtype.width() as u64;
        let bytes = crate::hurray::DenseDescriptor {
            column_major: false,
            dtype: self.dtype,
            shape: vec![self.len],
            byte_offset: 0,
            buffer: BufferHandle::cpu(data_length, fw.alignment as u32),
            statistics: None,
        }
        .encode();
        fw.write_at(&bytes, self.descriptor_offset)?;
        fw.entries.push(IndexEntry {
            name: self.name.clone(),
            descriptor_offset: self.descriptor_offset,
            descriptor_length: bytes.len() as u32,
            data_offset: self.values_offset,
            data_length,
        });
        fw.vectors.push((self.name.clone(), digest));
        Ok(())
    }
}

impl VectorWriter<'_> {
    /// The next elements, as little-endian bytes (whole elements).
    pub(crate) fn push_le(&mut self, bytes: &[u8]) -> Result<()> {
        match self.head.take(bytes.len() as u64, self.left) {
            Ok(left) => self.left = left,
            Err(e) => {
                self.fw.poisoned = true;
                return Err(e);
            }
        }
        // Through the buffer, hashed as values are when it is flushed.
        self.fw.put(bytes)
    }

    /// Close the tensor: every element given, the descriptor written.
    pub(crate) fn finish(mut self) -> Result<()> {
        let r = self.finish_inner();
        self.finished = r.is_ok();
        r
    }

    fn finish_inner(&mut self) -> Result<()> {
        let fw = &mut *self.fw;
        let values_end = fw.pos();
        if let Some(from) = fw.vhash_from.take() {
            fw.vhash.update(&fw.buf[from..]);
        }
        let digest = fw.vhash.digest();
        let next = fw.padded_end(values_end)?;
        fw.put_zeros(next - values_end)?;
        self.head.close(fw, self.left, digest)
    }
}

/// A dense vector's room in a [`FileWriter`] ([`FileWriter::reserve_vector`]),
/// filled front to back at its place through a second handle, then
/// finished by [`ReservedVector::finish`]; the file writer refuses to
/// finish the file before.
pub(crate) struct ReservedVector {
    file: File,
    io: IoCtx,
    path: PathBuf,
    head: VectorHead,
    /// Value bytes still to come.
    left: u64,
    hash: Xxh3,
    /// Filled front to back, so handed to the disk as it goes, as the
    /// file writer's own stream is: the final fsync would otherwise wait
    /// for the whole vector (a plan's positions, 0.4 GB for 1e8).
    written_back: Writeback,
}

impl ReservedVector {
    /// The next elements, as little-endian bytes (whole elements).
    pub(crate) fn push_le(&mut self, bytes: &[u8]) -> Result<()> {
        let left = self.head.take(bytes.len() as u64, self.left)?;
        let filled = self.head.len * self.head.dtype.width() as u64 - self.left;
        self.io.write_all_at(
            &self.file,
            bytes,
            self.head.values_offset + filled,
            &self.path,
        )?;
        self.hash.update(bytes);
        self.left = left;
        let end = filled + bytes.len() as u64;
        let base = self.head.values_offset;
        self.written_back
            .step(&self.io, &self.file, &self.path, base, end)
    }

    /// Close the vector in `fw`, the writer it was reserved in: every
    /// element given, the descriptor written.
    pub(crate) fn finish(self, fw: &mut FileWriter) -> Result<()> {
        fw.check_usable()?;
        let r = self.head.close(fw, self.left, self.hash.digest());
        if r.is_ok() {
            fw.reserved_open -= 1;
        }
        r
    }
}

impl Drop for VectorWriter<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.fw.poisoned = true;
            self.fw.vhash_from = None;
        }
    }
}

/// Where the entries of a tensor written in place go
/// ([`TensorWriter::placed`]): a second handle on the output, shared by
/// the threads that write.
pub(crate) struct Placed {
    file: File,
    io: IoCtx,
    path: PathBuf,
    values_at: u64,
    indices_at: u64,
    rank: u64,
    bound: u64,
}

impl Placed {
    /// The value bytes (little-endian f64s) of entries `entry..`.
    pub(crate) fn write_values(&self, entry: u64, bytes: &[u8]) -> Result<()> {
        self.check(entry, bytes.len() as u64 / 8)?;
        self.io
            .write_all_at(&self.file, bytes, self.values_at + 8 * entry, &self.path)
    }

    /// The index bytes (`rank` little-endian u64s each) of entries `entry..`.
    pub(crate) fn write_indices(&self, entry: u64, bytes: &[u8]) -> Result<()> {
        self.check(entry, bytes.len() as u64 / (8 * self.rank))?;
        self.io.write_all_at(
            &self.file,
            bytes,
            self.indices_at + 8 * self.rank * entry,
            &self.path,
        )
    }

    fn check(&self, entry: u64, n: u64) -> Result<()> {
        if entry.checked_add(n).is_none_or(|e| e > self.bound) {
            return Err(invalid(format!(
                "entries {entry}.. ({n}) written in place beyond the {} reserved",
                self.bound
            )));
        }
        Ok(())
    }
}

/// A CSF tensor's levels while its entries stream past: level `L` gets a
/// node (`crd_L`) for each entry whose storage-order coordinates differ
/// from the previous entry's at `L` or above, and a node at `L` opens its
/// children's range in `pos_{L+1}`. The words go to `W`: for a file, a
/// side stream per buffer, each spilling to a side file when it holds a
/// buffer's worth; in memory ([`csf_levels`]), vectors.
struct Levels<W = SideStream> {
    /// `order[L]`: the dimension stored at level `L`.
    order: Vec<usize>,
    /// `pos_L` for `L >= 1` (`pos_0` is `[0, n_0]`, written at the end).
    pos: Vec<W>,
    crd: Vec<W>,
    /// Nodes at each level so far.
    nodes: Vec<u64>,
    /// Room a side stream takes at its first node: a buffer's worth and a
    /// word, so that it never grows past it (it spills when full).
    room: usize,
    /// The first level at which the entry last checked differs from the
    /// one before ([`Levels::after`]): where its new nodes start.
    from: std::cell::Cell<usize>,
    /// Some stream holds a buffer's worth: spill it.
    full: bool,
}

/// Where a CSF level's words go ([`Levels`]).
trait LevelWords: Default {
    /// Append `x`; whether the words now hold a buffer's worth (`room`
    /// bytes less a word).
    fn put(&mut self, x: u64, room: usize) -> bool;
}

impl LevelWords for SideStream {
    #[inline]
    fn put(&mut self, x: u64, room: usize) -> bool {
        // Room taken at the first word: an empty level takes none.
        if self.buf.capacity() == 0 {
            self.buf.reserve_exact(room);
        }
        self.push(x);
        self.buf.len() + 8 >= room
    }
}

impl<W: LevelWord> LevelWords for Vec<W> {
    #[inline]
    fn put(&mut self, x: u64, _room: usize) -> bool {
        self.push(W::of(x));
        false
    }
}

/// A word of the levels [`csf_levels`] builds in memory: u64, or u32
/// (half the memory, for tensors whose extents and entry count fit it;
/// [`csf_levels`] checks that they do).
pub trait LevelWord: Copy {
    /// `x`, which fits.
    fn of(x: u64) -> Self;
}
impl LevelWord for u32 {
    #[inline]
    fn of(x: u64) -> u32 {
        x as u32
    }
}
impl LevelWord for u64 {
    #[inline]
    fn of(x: u64) -> u64 {
        x
    }
}

/// A coordinate word [`csf_levels`] reads: u64, or u32.
pub trait CoordWord: Copy + Ord + Into<u64> {}
impl CoordWord for u32 {}
impl CoordWord for u64 {}

impl Default for SideStream {
    fn default() -> SideStream {
        SideStream::new(0)
    }
}

impl<W: LevelWords> Levels<W> {
    fn new(order: Vec<usize>, room: usize) -> Levels<W> {
        let r = order.len();
        Levels {
            order,
            pos: (0..r).map(|_| W::default()).collect(),
            crd: (0..r).map(|_| W::default()).collect(),
            nodes: vec![0; r],
            room,
            from: std::cell::Cell::new(0),
            full: false,
        }
    }

    /// Whether `idx` comes after `prev` in storage order; the level where
    /// they first differ is kept for [`Levels::push`].
    #[inline]
    fn after<I: Copy + Ord>(&self, idx: &[I], prev: &[I]) -> bool {
        match self.order.iter().position(|&d| idx[d] != prev[d]) {
            Some(l) => {
                self.from.set(l);
                idx[self.order[l]] > prev[self.order[l]]
            }
            None => false,
        }
    }

    /// Add the entry `idx` (checked by [`Levels::after`] unless `first`,
    /// the tensor's first entry).
    #[inline]
    fn push<I: Copy + Into<u64>>(&mut self, idx: &[I], first: bool) {
        let r = self.order.len();
        let from = if first { 0 } else { self.from.get() };
        for l in from..r {
            self.full |= self.crd[l].put(idx[self.order[l]].into(), self.room);
            self.nodes[l] += 1;
            if l + 1 < r {
                self.full |= self.pos[l + 1].put(self.nodes[l + 1], self.room);
            }
        }
    }

    /// The last pointer of every level, and `pos_0`'s first: the levels
    /// are whole.
    fn close(&mut self) {
        for (l, pos) in self.pos.iter_mut().enumerate() {
            if l == 0 {
                pos.put(0, self.room);
            }
            pos.put(self.nodes[l], self.room);
        }
    }
}

impl Levels<SideStream> {
    fn spill_full(&mut self, fw: &FileWriter) -> Result<()> {
        for s in self.pos.iter_mut().chain(self.crd.iter_mut()) {
            if s.buf.len() >= fw.buf_cap {
                s.spill(fw)?;
            }
        }
        self.full = false;
        Ok(())
    }

    fn buffer_bytes(&self) -> usize {
        self.pos
            .iter()
            .chain(&self.crd)
            .map(|s| s.buf.capacity())
            .sum::<usize>()
            + self.nodes.capacity() * 8
    }

    /// Close the levels and append `pos_0`, `crd_0`, `pos_1`... to the
    /// output: each one's length and xxh3-64, in that order.
    fn append_to(&mut self, fw: &mut FileWriter) -> Result<Vec<(u64, u64)>> {
        self.close();
        let mut out = Vec::with_capacity(2 * self.order.len());
        for (pos, crd) in self.pos.iter_mut().zip(self.crd.iter_mut()) {
            out.push(pos.append_to(fw)?);
            out.push(crd.append_to(fw)?);
        }
        Ok(out)
    }
}

/// The CSF levels, `(pos_L, crd_L)` per level, of the entries whose
/// coordinates `coords` holds (`rank` words each, dimension order) in
/// increasing storage order (`order`, a permutation of `0..rank`): the
/// writer's `Levels` of the same entries, in memory (an in-memory
/// result, as Python's `assemble(..., layout="csf")` returns). Words of
/// `W` (u64, or u32 when the entries' count fits it, as the coordinates
/// of `I = u32` do). Entries out of order are [`Error::OutOfOrder`].
pub fn csf_levels<I: CoordWord, W: LevelWord>(
    coords: &[I],
    rank: usize,
    order: &[usize],
) -> Result<Vec<(Vec<W>, Vec<W>)>> {
    if rank == 0 || order.len() != rank || coords.len() % rank != 0 {
        return Err(invalid(format!(
            "{} coordinate words for rank {rank} and {} levels",
            coords.len(),
            order.len()
        )));
    }
    let n = coords.len() / rank;
    let words = std::mem::size_of::<W>();
    if (words < 8 && (n as u64 >> (8 * words)) > 0) || words < std::mem::size_of::<I>() {
        return Err(invalid(format!(
            "{n} entries of {}-byte coordinates in levels of {words}-byte words",
            std::mem::size_of::<I>()
        )));
    }
    let mut levels = Levels::<Vec<W>>::new(order.to_vec(), 0);
    // At most one node per entry at every level: room reserved once
    // (room never touched costs no memory).
    for v in levels.pos.iter_mut().chain(levels.crd.iter_mut()) {
        v.try_reserve_exact(n + 1).map_err(|_| Error::OutOfMemory {
            what: "the CSF levels",
            bytes: words as u64 * (n as u64 + 1),
        })?;
    }
    let mut prev: &[I] = &[];
    for (e, idx) in coords.chunks_exact(rank).enumerate() {
        if e > 0 && !levels.after(idx, prev) {
            return Err(Error::OutOfOrder {
                entry: e as u64,
                previous: prev.iter().map(|&x| x.into()).collect(),
                got: idx.iter().map(|&x| x.into()).collect(),
            });
        }
        levels.push(idx, e == 0);
        prev = idx;
    }
    levels.close();
    Ok(levels.pos.into_iter().zip(levels.crd).collect())
}

/// One buffer after the values (indices, pointers), streamed through a
/// bounded buffer into an unnamed side file (created when the buffer first
/// fills), then appended to the output at the next multiple of A.
struct SideStream {
    buf: Vec<u8>,
    file: Option<File>,
    /// Where the stream goes in the output file itself, when a bound on
    /// its length reserved room there (see `TensorWriter::reserve_indices`).
    at: Option<u64>,
    /// Bytes already written there.
    in_output: bool,
    len: u64,
    /// How far the bytes of `len` went to disk (reserved place only).
    written_back: Writeback,
    hash: Xxh3,
    /// The stream's xxh3-64, when it was written in place and hashed in
    /// pieces.
    digest: Option<u64>,
}

impl SideStream {
    fn new(capacity: usize) -> SideStream {
        SideStream {
            buf: Vec::with_capacity(capacity),
            file: None,
            at: None,
            in_output: false,
            len: 0,
            written_back: Writeback::default(),
            hash: Xxh3::new(),
            digest: None,
        }
    }

    #[inline]
    fn push(&mut self, x: u64) {
        self.buf.extend_from_slice(&x.to_le_bytes());
    }

    /// Move the pending bytes to their reserved place in the output, or
    /// else to the side file.
    fn spill(&mut self, fw: &FileWriter) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if let Some(at) = self.at {
            fw.io
                .write_all_at(&fw.file, &self.buf, at + self.len, fw.out.path())?;
            self.in_output = true;
        } else {
            let side = match &mut self.file {
                Some(f) => f,
                None => self.file.insert(fw.io.tempfile_in(fw.out.dir())?),
            };
            fw.io.write_all(side, &self.buf, fw.out.dir())?;
        }
        self.hash.update(&self.buf);
        self.len += self.buf.len() as u64;
        self.buf.clear();
        if let Some(at) = self.at {
            self.written_back
                .step(&fw.io, &fw.file, fw.out.path(), at, self.len)?;
        }
        Ok(())
    }

    /// Pad the output to A and append the whole stream there (kernel-side
    /// copy from the side file, or the buffer itself when it never
    /// filled). Returns the stream's length and xxh3-64.
    fn append_to(&mut self, fw: &mut FileWriter) -> Result<(u64, u64)> {
        let end = fw.pos();
        let start = fw.align(end)?;
        fw.put_zeros(start - end)?;
        if let (true, Some(at)) = (self.in_output, self.at) {
            self.spill(fw)?;
            fw.flush()?;
            fw.close_gap(start, at, self.len)?;
        } else if self.file.is_some() {
            self.spill(fw)?;
            fw.flush()?;
            if let Some(side) = &mut self.file {
                fw.io.seek(side, SeekFrom::Start(0), fw.out.dir())?;
                fw.io.copy(side, &mut fw.file, self.len, fw.out.path())?;
            }
            fw.flushed += self.len;
            self.file = None;
        } else {
            self.hash.update(&self.buf);
            self.len = self.buf.len() as u64;
            let bytes = std::mem::take(&mut self.buf);
            let r = fw.put(&bytes);
            self.buf = bytes;
            r?;
        }
        debug_assert_eq!(fw.pos(), start + self.len);
        Ok((self.len, self.digest.unwrap_or_else(|| self.hash.digest())))
    }
}

/// The bytes a tensor of `shape` in `layout` writes whatever its entries:
/// a compressed layout's pointers, one u64 per major index and one more
/// (a 2^32-row CSR: 32 GiB). Zero for COO.
pub fn fixed_output_bytes(shape: &[u64], layout: OutputLayout) -> u128 {
    if !layout.is_compressed() || shape.len() != 2 {
        return 0;
    }
    (u128::from(shape[layout.major_dim()]) + 1) * 8
}

/// [`check_room`] for an output not yet created, before any contribution
/// is read: the fixed bytes of `shape` in `layout` against the free space
/// of the folder `target` goes in, so a typo'd shape is refused at once
/// (saying what it costs), not after the input was read and merged.
pub(crate) fn check_room_for(
    io: &IoCtx,
    target: &Path,
    shape: &[u64],
    layout: OutputLayout,
) -> Result<()> {
    let bytes = fixed_output_bytes(shape, layout);
    if bytes < 1 << 20 {
        return Ok(());
    }
    let dir = crate::fs::names::parent_dir(target);
    let Ok(f) = io.open(&dir) else {
        // The folder's own check names what is wrong with it.
        return Ok(());
    };
    check_room(&f, target, bytes, &pointers_what(shape, layout))
}

/// What [`fixed_output_bytes`] counts, for a message: "the csr pointers of
/// N + 1 rows, whatever the entries".
fn pointers_what(shape: &[u64], layout: OutputLayout) -> String {
    let major = shape[layout.major_dim()];
    let unit = if layout.major_dim() == 1 {
        "columns"
    } else {
        "rows"
    };
    format!(
        "the {} pointers of {major} + 1 {unit}, whatever the entries",
        layout.name()
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::fs::ctx::{FaultKind, FaultMode, FaultPlan};

    /// `n` entries of a 3-d tensor, increasing; values vary in sign and size.
    fn entries(n: u64) -> impl Iterator<Item = ([u64; 3], f64)> {
        (0..n).map(|k| {
            (
                [k / 1000, (k / 10) % 100, k % 10],
                (k as f64 - 777.5) * 1.25e-3,
            )
        })
    }

    /// Write `n` entries, with `reserve` (if any) promised up front.
    fn write(dir: &Path, name: &str, n: u64, reserve: Option<u64>, io: IoCtx) -> Result<Vec<u8>> {
        let p = dir.join(name);
        let mut fw = FileWriter::create(
            &p,
            WriteOptions {
                buffer_bytes: MIN_BUFFER_BYTES,
                io,
                ..WriteOptions::default()
            },
        )?;
        let mut t = fw.begin_tensor("t", DType::F64, &[1 << 20, 100, 10])?;
        if let Some(r) = reserve {
            t.reserve_indices(r)?;
        }
        for (i, v) in entries(n) {
            t.push_value(&i, Value::Float(v))?;
        }
        t.finish()?;
        fw.finish()?;
        Ok(std::fs::read(&p).unwrap())
    }

    /// Every place the test can write to: the default temporary directory
    /// and, where there is one, a tmpfs (no FALLOC_FL_COLLAPSE_RANGE there,
    /// so the indices are copied down instead).
    fn dirs() -> Vec<tempfile::TempDir> {
        let mut v = vec![tempfile::tempdir().unwrap()];
        if let Ok(d) = tempfile::tempdir_in("/dev/shm") {
            v.push(d);
        }
        v
    }

    /// Write `entries` (index tuples, values) one `push_value` each
    /// (`batch` None) or in `push_batch` calls of `batch` entries. Returns
    /// the file, or the first error with the entries written before it.
    fn write_entries(
        dir: &Path,
        dtype: DType,
        shape: &[u64],
        layout: OutputLayout,
        reserve: Option<u64>,
        entries: &[(Vec<u64>, Value)],
        batch: Option<usize>,
    ) -> std::result::Result<Vec<u8>, (String, u64)> {
        let p = dir.join("b.hrry");
        let mut fw = FileWriter::create(
            &p,
            WriteOptions {
                buffer_bytes: MIN_BUFFER_BYTES,
                ..WriteOptions::default()
            },
        )
        .unwrap();
        let mut t = fw.begin_tensor_as("t", dtype, shape, layout).unwrap();
        if let Some(r) = reserve {
            t.reserve_indices(r).unwrap();
        }
        let r = match batch {
            None => entries.iter().try_for_each(|(i, v)| t.push_value(i, *v)),
            Some(b) => entries.chunks(b).try_for_each(|c| {
                let idx: Vec<u64> = c.iter().flat_map(|(i, _)| i.iter().copied()).collect();
                let vals: Vec<Value> = c.iter().map(|(_, v)| *v).collect();
                t.push_batch(&idx, &vals)
            }),
        };
        if let Err(e) = r {
            return Err((format!("{e:?}"), t.nnz()));
        }
        t.finish().unwrap();
        fw.finish().unwrap();
        Ok(std::fs::read(&p).unwrap())
    }

    #[test]
    fn batches_give_the_bytes_and_errors_of_single_pushes() {
        let d = tempfile::tempdir().unwrap();
        let n = 5000u64;
        let cases: [(DType, &[u64], OutputLayout); 6] = [
            (DType::F64, &[1 << 20, 100, 10], OutputLayout::Coo),
            (DType::F32, &[3000, 2000], OutputLayout::Coo),
            (DType::F16, &[3000, 2000], OutputLayout::Coo),
            (DType::BF16, &[1 << 20, 100, 10], OutputLayout::Coo),
            (DType::I32, &[3000, 2000], OutputLayout::Coo),
            (DType::F64, &[3000, 2000], OutputLayout::Csr),
        ];
        for (dtype, shape, layout) in cases {
            let good: Vec<(Vec<u64>, Value)> = entries(n)
                .map(|(i, v)| {
                    let idx = if shape.len() == 2 {
                        vec![i[0] * 100 + i[1], i[2] * 7]
                    } else {
                        i.to_vec()
                    };
                    let v = if dtype.is_float() {
                        Value::Float(v)
                    } else {
                        Value::Int((v * 1e3) as i64)
                    };
                    (idx, v)
                })
                .collect();
            for reserve in [None, Some(n)] {
                let want = write_entries(d.path(), dtype, shape, layout, reserve, &good, None);
                assert!(want.is_ok());
                for b in [1, 7, 1000, 4096, 6000] {
                    let got =
                        write_entries(d.path(), dtype, shape, layout, reserve, &good, Some(b));
                    assert!(got == want, "{dtype:?} {shape:?} {layout:?} batch {b}");
                }
            }
            // Out of order, out of range, an integer for a float type (or
            // the reverse), and past the reserved bound: the same error
            // after the same entries either way.
            let mut bad = Vec::new();
            let mut swapped = good.clone();
            swapped.swap(2500, 2501);
            bad.push((swapped, None));
            let mut wide = good.clone();
            wide[3333].0[1] = shape[1];
            bad.push((wide, None));
            let mut typed = good.clone();
            typed[4000].1 = if dtype.is_float() {
                Value::Int(1)
            } else {
                Value::Float(1.0)
            };
            bad.push((typed, None));
            if layout == OutputLayout::Coo {
                bad.push((good.clone(), Some(n - 10)));
            }
            for (entries, reserve) in bad {
                let want = write_entries(d.path(), dtype, shape, layout, reserve, &entries, None);
                assert!(want.is_err());
                for b in [1, 7, 1000, 6000] {
                    let got =
                        write_entries(d.path(), dtype, shape, layout, reserve, &entries, Some(b));
                    assert_eq!(got, want, "{dtype:?} {shape:?} {layout:?} batch {b}");
                }
            }
        }
    }

    #[test]
    fn reserved_indices_give_the_same_bytes() {
        for d in dirs() {
            // 0 entries, fewer than one buffer, many buffers; bounds exact,
            // loose by a little, by more than the indices, and huge.
            for n in [0u64, 100, 20_000] {
                let want = write(d.path(), "plain.hrry", n, None, IoCtx::new()).unwrap();
                for bound in [n, n + 1, 3 * n + 5000, 1 << 40] {
                    let got = write(d.path(), "r.hrry", n, Some(bound), IoCtx::new()).unwrap();
                    assert!(got == want, "n {n}, bound {bound}, in {:?}", d.path());
                }
            }
            let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
            assert_eq!(left.len(), 2, "only the two outputs remain");
        }
    }

    #[test]
    fn compressed_layouts_with_reserved_indices_give_the_same_bytes() {
        let d = tempfile::tempdir().unwrap();
        let n = 5000u64;
        for layout in [OutputLayout::Csr, OutputLayout::Csc] {
            // Empty majors between entries, and after the last.
            let mut es: Vec<(Vec<u64>, Value)> = entries(n)
                .map(|(i, v)| (vec![i[0] * 100 + i[1], i[2] * 7], Value::Float(v)))
                .collect();
            if layout == OutputLayout::Csc {
                es.sort_by_key(|(i, _)| (i[1], i[0]));
            }
            let shape = [3000u64, 2000];
            let want = write_entries(d.path(), DType::F64, &shape, layout, None, &es, None);
            assert!(want.is_ok());
            for bound in [n, n + 3, 3 * n + 5000] {
                let got =
                    write_entries(d.path(), DType::F64, &shape, layout, Some(bound), &es, None);
                assert!(got == want, "{layout:?} bound {bound}");
            }
            let over = write_entries(d.path(), DType::F64, &shape, layout, Some(n - 1), &es, None);
            assert!(matches!(over, Err((_, k)) if k == n - 1), "{layout:?}");
        }
    }

    /// A writer of the smallest buffers, so that a test crosses them.
    fn small_buffers(p: &Path) -> FileWriter {
        let o = WriteOptions {
            buffer_bytes: MIN_BUFFER_BYTES,
            ..WriteOptions::default()
        };
        FileWriter::create(p, o).unwrap()
    }

    #[test]
    fn runs_give_the_bytes_and_errors_of_single_pushes() {
        // Rows with empty rows between them, a row split over two runs,
        // a row longer than the buffers; CSR and CSC.
        fn file(
            d: &Path,
            layout: OutputLayout,
            runs: &[(u64, Vec<u64>, Vec<f64>)],
            single: bool,
        ) -> std::result::Result<Vec<u8>, u64> {
            let p = d.join("r.hrry");
            let mut fw = small_buffers(&p);
            // 50 majors of 3000 minors either way.
            let shape = if layout == OutputLayout::Csr {
                [50, 3000]
            } else {
                [3000, 50]
            };
            let mut t = fw.begin_tensor_as("t", DType::F64, &shape, layout).unwrap();
            let maj = layout.major_dim();
            for (major, minors, vals) in runs {
                let r = if single {
                    minors.iter().zip(vals).try_for_each(|(&m, &v)| {
                        let mut idx = [0u64; 2];
                        idx[maj] = *major;
                        idx[1 - maj] = m;
                        t.push(&idx, v)
                    })
                } else {
                    t.push_run(*major, minors, vals)
                };
                if r.is_err() {
                    return Err(t.nnz());
                }
            }
            t.finish().unwrap();
            fw.finish().unwrap();
            Ok(std::fs::read(&p).unwrap())
        }
        let d = tempfile::tempdir().unwrap();
        let run = |major: u64, from: u64, n: u64, step: u64| {
            let minors: Vec<u64> = (0..n).map(|k| from + k * step).collect();
            let vals: Vec<f64> = minors
                .iter()
                .map(|&m| m as f64 * 0.5 - major as f64)
                .collect();
            (major, minors, vals)
        };
        for layout in [OutputLayout::Csr, OutputLayout::Csc] {
            let shape_minor = 3000u64;
            let good = vec![
                run(0, 0, 3, 7),
                run(2, 5, 10, 3),
                run(2, 40, 2, 1),
                run(3, 0, 2000, 1),
                run(9, 1, 1, 1),
                run(49, 100, 20, 100),
            ];
            let want = file(d.path(), layout, &good, true);
            assert!(want.is_ok());
            assert_eq!(file(d.path(), layout, &good, false), want, "{layout:?}");
            // A run out of order, a minor out of range, minors not
            // increasing: the same error after the same entries.
            let mut bad = Vec::new();
            let mut b = good.clone();
            b.swap(1, 3);
            bad.push(b);
            let mut b = good.clone();
            b[4].1[0] = shape_minor;
            bad.push(b);
            let mut b = good.clone();
            b[1].1.swap(3, 4);
            bad.push(b);
            let mut b = good.clone();
            b[2].1[0] = 30; // not after the row's run before
            bad.push(b);
            for b in bad {
                let want = file(d.path(), layout, &b, true);
                assert!(want.is_err());
                assert_eq!(file(d.path(), layout, &b, false), want, "{layout:?}");
            }
        }
    }

    #[test]
    fn csf_levels_in_memory_in_either_word() {
        let c: [u64; 12] = [0, 0, 1, 0, 0, 2, 0, 1, 0, 2, 0, 0];
        let want: Vec<(Vec<u64>, Vec<u64>)> = vec![
            (vec![0, 2], vec![0, 2]),
            (vec![0, 2, 3], vec![0, 1, 0]),
            (vec![0, 2, 3, 4], vec![1, 2, 0, 0]),
        ];
        assert_eq!(csf_levels::<u64, u64>(&c, 3, &[0, 1, 2]).unwrap(), want);
        let c32: Vec<u32> = c.iter().map(|&x| x as u32).collect();
        let narrow: Vec<(Vec<u32>, Vec<u32>)> = csf_levels(&c32, 3, &[0, 1, 2]).unwrap();
        let widen = |v: &[u32]| v.iter().map(|&x| u64::from(x)).collect::<Vec<_>>();
        let narrow: Vec<_> = narrow.iter().map(|(p, c)| (widen(p), widen(c))).collect();
        assert_eq!(narrow, want);
        assert_eq!(csf_levels::<u32, u64>(&c32, 3, &[0, 1, 2]).unwrap(), want);
        // Out of storage order, named; coordinates wider than the words.
        let e = csf_levels::<u64, u64>(&c, 3, &[2, 1, 0]).unwrap_err();
        assert!(matches!(e, Error::OutOfOrder { entry: 2, .. }), "{e}");
        assert!(csf_levels::<u64, u32>(&c, 3, &[0, 1, 2]).is_err());
        assert!(csf_levels::<u64, u64>(&c[..11], 3, &[0, 1, 2]).is_err());
    }

    /// `n` scrambled u32 words, little-endian.
    fn scrambled_words(n: u32) -> Vec<u8> {
        (0..n)
            .flat_map(|k| k.wrapping_mul(2654435761).to_le_bytes())
            .collect()
    }

    #[test]
    fn a_reserved_vector_is_filled_in_place_beside_the_next_tensor() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.hrry");
        let bytes = scrambled_words(5000);
        let mut fw = small_buffers(&p);
        let mut v = fw.reserve_vector("v", DType::U32, 5000).unwrap();
        let mut t = fw.begin_tensor("t", DType::F64, &[100, 100]).unwrap();
        for (piece, i) in bytes.chunks(4 * 250).zip(0u64..) {
            // The vector's pieces between the tensor's entries.
            v.push_le(piece).unwrap();
            t.push(&[i, i], i as f64).unwrap();
        }
        t.finish().unwrap();
        assert!(v.push_le(&[0; 4]).is_err(), "past its length");
        v.finish(&mut fw).unwrap();
        fw.finish().unwrap();
        let f = crate::read::HurrayFile::open(&p).unwrap();
        assert!(
            f.verify()
                .iter()
                .all(|p| p.severity != crate::read::Severity::Error)
        );
        let v = f.dense("v").unwrap();
        assert_eq!(v.values_bytes(), &bytes[..]);
        v.check_checksums().unwrap();
        let t = f.tensor_view("t").unwrap();
        assert_eq!(t.nnz(), 20);
        t.check_checksums().unwrap();

        // A reservation left unfinished: the file is not published.
        let q = d.path().join("unfinished.hrry");
        let mut fw = small_buffers(&q);
        let mut v = fw.reserve_vector("v", DType::U32, 2).unwrap();
        v.push_le(&[1, 0, 0, 0]).unwrap();
        assert!(v.finish(&mut fw).is_err(), "short");
        assert!(fw.finish().is_err());
        assert!(!q.exists());
    }

    #[test]
    fn a_large_reserved_vector_goes_to_disk_as_it_fills() {
        // Three writeback steps of u32 words and a little more.
        let n = (3 * crate::fs::ctx::WRITEBACK_STEP / 4) as u32 + 1000;
        let bytes = scrambled_words(n);
        let d = tempfile::tempdir().unwrap();
        let start = |p: &Path, io: IoCtx| {
            let o = WriteOptions {
                io,
                ..WriteOptions::default()
            };
            let mut fw = FileWriter::create(p, o).unwrap();
            let v = fw.reserve_vector("v", DType::U32, n as u64).unwrap();
            (fw, v)
        };
        let p = d.path().join("big.hrry");
        let (mut fw, mut v) = start(&p, IoCtx::new());
        for piece in bytes.chunks(1 << 20) {
            v.push_le(piece).unwrap();
        }
        v.finish(&mut fw).unwrap();
        fw.finish().unwrap();
        let f = crate::read::HurrayFile::open(&p).unwrap();
        let v = f.dense("v").unwrap();
        assert!(v.values_bytes() == &bytes[..]);
        v.check_checksums().unwrap();

        // The first wait for bytes handed to the disk fails: the filling
        // reports it (the kernel reports a write error once), not the
        // file's final fsync, and nothing is published.
        let io = IoCtx::with_faults(FaultPlan {
            at: 0,
            mode: FaultMode::Once,
            kind: FaultKind::Io,
            only_op: Some("fsync"),
        });
        let q = d.path().join("failed.hrry");
        let (fw, mut v) = start(&q, io.clone());
        let e = bytes
            .chunks(1 << 20)
            .find_map(|piece| v.push_le(piece).err())
            .expect("a push reports the failed wait");
        assert!(matches!(e, Error::Io { op: "fsync", .. }), "{e}");
        assert_eq!(io.injected(), vec!["fsync"]);
        drop((v, fw));
        assert!(!q.exists());
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1, "one file");
    }

    #[test]
    fn a_vector_reads_back_dense_and_refuses_a_wrong_length() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("v.hrry");
        let bytes = scrambled_words(7000);
        let mut fw = small_buffers(&p);
        let mut t = fw.begin_vector("v", DType::U32, 7000).unwrap();
        for piece in bytes.chunks(4 * 333) {
            t.push_le(piece).unwrap();
        }
        t.finish().unwrap();
        let mut t = fw.begin_vector("empty", DType::U64, 0).unwrap();
        t.push_le(&[]).unwrap();
        t.finish().unwrap();
        fw.finish().unwrap();
        let f = crate::read::HurrayFile::open(&p).unwrap();
        let v = f.dense("v").unwrap();
        assert_eq!((v.dtype(), v.shape()), (DType::U32, &[7000u64][..]));
        assert_eq!(v.values_bytes(), &bytes[..]);
        assert_eq!(v.stored_checksums(), 1);
        v.check_checksums().unwrap();
        assert_eq!(f.dense("empty").unwrap().values_bytes(), &[] as &[u8]);
        assert!(
            f.verify()
                .iter()
                .all(|p| p.severity != crate::read::Severity::Error)
        );

        // Too many bytes, a partial element, too few at the end: errors,
        // and the writer is poisoned (nothing half-written is published).
        let q = d.path().join("bad.hrry");
        for (give, width) in [(12usize, 2u64), (6, 4), (4, 2)] {
            let mut fw = small_buffers(&q);
            let mut t = fw.begin_vector("v", DType::U32, width).unwrap();
            let r = t.push_le(&bytes[..give]).and_then(|()| t.finish());
            assert!(
                matches!(r, Err(Error::InvalidArgument(_))),
                "{give} bytes for {width}"
            );
            assert!(fw.finish().is_err());
            assert!(!q.exists());
        }
    }

    #[test]
    fn an_entry_beyond_the_bound_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("b.hrry");
        let mut fw = FileWriter::create(&p, WriteOptions::default()).unwrap();
        let mut t = fw.begin_tensor("t", DType::F64, &[10, 10]).unwrap();
        t.reserve_indices(2).unwrap();
        t.push(&[0, 1], 1.0).unwrap();
        t.push(&[0, 2], 2.0).unwrap();
        let e = t.push(&[0, 3], 3.0).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        // The refused entry changed nothing: the tensor closes with two.
        assert_eq!(t.finish().unwrap().nnz, 2);
        fw.finish().unwrap();
    }

    #[test]
    fn every_failing_operation_on_the_reserved_path_leaves_nothing() {
        for d in dirs() {
            let want = write(d.path(), "want.hrry", 20_000, None, IoCtx::new()).unwrap();
            std::fs::remove_file(d.path().join("want.hrry")).unwrap();
            let mut failed = 0;
            for at in 0.. {
                let io = IoCtx::with_faults(FaultPlan {
                    at,
                    mode: FaultMode::Once,
                    kind: FaultKind::Io,
                    only_op: None,
                });
                match write(d.path(), "f.hrry", 20_000, Some(25_000), io.clone()) {
                    Ok(got) => {
                        assert!(got == want, "op {at}: different bytes");
                        let hit = io.injected();
                        if hit.is_empty() {
                            break;
                        }
                        // Only the best-effort sweep of stale outputs may
                        // swallow a fault.
                        assert!(
                            hit.iter()
                                .all(|op| ["list directory", "lstat"].contains(op)),
                            "op {at}: fault in {hit:?} ignored"
                        );
                        std::fs::remove_file(d.path().join("f.hrry")).unwrap();
                    }
                    Err(Error::Io { op, source, .. }) => {
                        assert_eq!(source.raw_os_error(), Some(libc::EIO), "op {at}");
                        if op == "fsync directory" {
                            // The documented exception: renamed already.
                            std::fs::remove_file(d.path().join("f.hrry")).unwrap();
                        }
                        failed += 1;
                    }
                    Err(e) => panic!("op {at}: expected an I/O error, got {e}"),
                }
                let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
                assert!(left.is_empty(), "op {at}: leftovers {left:?}");
                assert!(at < 10_000, "no run succeeded");
            }
            // create, the writes, the gap closing, seek, fsync, rename, ...
            assert!(failed > 20, "only {failed} fault points");
        }
    }
}
