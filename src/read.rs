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
//! underneath you, use [`HurrayFile::read_into_memory`] (reads the whole file
//! into an 8-aligned heap buffer) or [`HurrayFile::from_bytes`].
//!
//! Zero-copy typed views assume a little-endian host (as the format is
//! little-endian); the crate refuses to compile elsewhere.

#[cfg(not(target_endian = "little"))]
compile_error!("coo_assembler::read casts file bytes to u64 / element slices in place and needs a little-endian target");

use crate::element::{DType, Element, Value};
use crate::error::{Error, Result};
use crate::hurray::descriptor::descriptor_len;
use crate::hurray::header::{FLAG_HAS_INDEX_CRC32C, FLAG_HAS_KV_METADATA};
use crate::hurray::statistics::{
    NAN_INF_VALID, NNZ_VALID, SPARSITY_VALID, VALUE_RANGE_VALID, VALUE_STATS_VALID,
};
use crate::hurray::{
    align_up, index, kv, CooDescriptor, FileHeader, IndexEntry, KvValue, Statistics, Trailer,
    HEADER_LEN, TRAILER_LEN,
};
use crate::fs::ctx::IoCtx;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::path::Path;

/// Options for [`HurrayFile::open_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Let content rule violations through (see the module docs). Default false.
    pub permissive: bool,
}

/// The bytes of an open file.
enum Backing {
    Mmap(memmap2::Mmap),
    /// 8-aligned heap copy: `len` bytes at the start of the `u64` vector.
    Mem(Vec<u64>, usize),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mmap(m) => m,
            Backing::Mem(v, len) => {
                let all: &[u8] = bytemuck::cast_slice(v);
                &all[..*len]
            }
        }
    }

    fn aligned_copy(bytes: &[u8]) -> Result<Backing> {
        let mut v = aligned_zeroed(bytes.len())?;
        let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut v);
        dst[..bytes.len()].copy_from_slice(bytes);
        Ok(Backing::Mem(v, bytes.len()))
    }
}

/// Open `path` and take its length, refusing a file too short to hold a
/// header and a trailer.
fn open_sized(ctx: &IoCtx, path: &Path) -> Result<(std::fs::File, u64)> {
    let file = ctx.open(path)?;
    let len = ctx.file_len(&file, path)?;
    if len < HEADER_LEN + TRAILER_LEN {
        return Err(too_short(len));
    }
    Ok((file, len))
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

/// Validated location of one tensor.
#[derive(Clone, Debug)]
struct TensorMeta {
    name: String,
    desc: CooDescriptor,
    values: Range<usize>,
    indices: Range<usize>,
}

/// An open, structurally validated Hurray file.
pub struct HurrayFile {
    backing: Backing,
    header: FileHeader,
    trailer: Trailer,
    kv: Vec<(String, KvValue)>,
    tensors: Vec<TensorMeta>,
    by_name: HashMap<String, usize>,
    opts: ReadOptions,
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
    /// Map `path` into memory and validate its structure (default options).
    ///
    /// See the module docs about `SIGBUS` when the file is truncated while
    /// mapped; [`HurrayFile::read_into_memory`] avoids it.
    pub fn open(path: impl AsRef<Path>) -> Result<HurrayFile> {
        Self::open_with(path, ReadOptions::default())
    }

    /// Map `path` into memory and validate its structure.
    pub fn open_with(path: impl AsRef<Path>, opts: ReadOptions) -> Result<HurrayFile> {
        Self::open_with_io(path, opts, &IoCtx::new())
    }

    /// [`HurrayFile::open_with`], performing the file operations through
    /// `io` (fault injection in tests).
    pub fn open_with_io(path: impl AsRef<Path>, opts: ReadOptions, io: &IoCtx) -> Result<HurrayFile> {
        let path = path.as_ref();
        let (file, _) = open_sized(io, path)?;
        // SAFETY: the map is read-only and private to this object. The one
        // hazard, another process truncating or rewriting the file while it
        // is mapped, is documented (SIGBUS) with `read_into_memory` as the
        // alternative.
        let map = unsafe { io.map(&file, path) }?;
        Self::from_backing(Backing::Mmap(map), opts)
    }

    /// Read the whole file into an 8-aligned heap buffer (no memory map, so
    /// no `SIGBUS` if the file is truncated meanwhile) and validate it.
    pub fn read_into_memory(path: impl AsRef<Path>) -> Result<HurrayFile> {
        Self::read_into_memory_with(path, ReadOptions::default())
    }

    /// [`HurrayFile::read_into_memory`] with options.
    pub fn read_into_memory_with(path: impl AsRef<Path>, opts: ReadOptions) -> Result<HurrayFile> {
        Self::read_into_memory_with_io(path, opts, &IoCtx::new())
    }

    /// [`HurrayFile::read_into_memory_with`], performing the file
    /// operations through `io` (fault injection in tests).
    pub fn read_into_memory_with_io(
        path: impl AsRef<Path>,
        opts: ReadOptions,
        io: &IoCtx,
    ) -> Result<HurrayFile> {
        let path = path.as_ref();
        let ctx = io;
        let (file, len) = open_sized(ctx, path)?;
        let n = usize::try_from(len).map_err(|_| {
            Error::Unsupported(format!("file of {len} bytes does not fit in memory"))
        })?;
        let mut v = aligned_zeroed(n)?;
        {
            let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut v);
            ctx.read_exact_at(&file, &mut dst[..n], 0, path)?;
        }
        Self::from_backing(Backing::Mem(v, n), opts)
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
        let parsed = parse(bytes, opts)?;
        let by_name = parsed
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(HurrayFile {
            header: parsed.header,
            trailer: parsed.trailer,
            kv: parsed.kv,
            tensors: parsed.tensors,
            by_name,
            opts,
            backing,
        })
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

    /// Tensor names in index order.
    pub fn tensor_names(&self) -> impl Iterator<Item = &str> {
        self.tensors.iter().map(|t| t.name.as_str())
    }

    /// Number of tensors.
    pub fn tensor_count(&self) -> usize {
        self.tensors.len()
    }

    fn view<'s>(&'s self, t: &'s TensorMeta) -> CooTensor<'s> {
        let bytes = self.backing.bytes();
        let ib = &bytes[t.indices.clone()];
        // Cannot fail: the backing is 8-aligned, the buffer starts at a
        // multiple of A >= 4096 and its size is a multiple of 8 (checked at open).
        let indices: &[u64] = bytemuck::try_cast_slice(ib).unwrap_or(&[]);
        CooTensor {
            name: &t.name,
            desc: &t.desc,
            values: &bytes[t.values.clone()],
            indices,
            rank: t.desc.rank(),
            nnz: indices.len() / t.desc.rank().max(1),
            kv: &self.kv,
            permissive: self.opts.permissive,
            indices_offset: t.indices.start as u64,
        }
    }

    fn available(&self) -> String {
        self.tensor_names()
            .map(|n| format!("{n:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Result<CooTensor<'_>> {
        match self.by_name.get(name) {
            Some(&i) => Ok(self.view(&self.tensors[i])),
            None => Err(Error::TensorNotFound {
                name: name.to_string(),
                available: self.available(),
            }),
        }
    }

    /// Every tensor, in index order.
    pub fn tensors(&self) -> impl Iterator<Item = CooTensor<'_>> {
        self.tensors.iter().map(|t| self.view(t))
    }

    /// The single tensor of the file; an error if it holds none or several.
    pub fn only_tensor(&self) -> Result<CooTensor<'_>> {
        if self.tensors.len() == 1 {
            Ok(self.view(&self.tensors[0]))
        } else {
            Err(Error::TensorNotFound {
                name: format!(
                    "<the only tensor> (the file holds {} tensors)",
                    self.tensors.len()
                ),
                available: self.available(),
            })
        }
    }

    /// Check the content of every tensor and the KV checksums. Empty = OK.
    ///
    /// O(total nnz) time, bounded memory (see [`CooTensor::verify`]). KV keys
    /// `coo_assembler.xxh3.<name>.values|indices` naming no tensor are
    /// reported as `checksum-orphan`.
    pub fn verify(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        for t in self.tensors() {
            out.extend(t.verify());
        }
        for (k, _) in &self.kv {
            if let Some((name, _)) = parse_checksum_key(k) {
                if !self.by_name.contains_key(name) {
                    out.push(Problem {
                        tensor: Some(name.to_string()),
                        rule: "checksum-orphan",
                        entry: None,
                        detail: format!("KV key {k:?} names a tensor that is not in the file"),
                    });
                }
            }
        }
        out
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

/// Prefix of the KV keys holding xxh3-64 checksums of tensor buffers.
pub const CHECKSUM_KEY_PREFIX: &str = "coo_assembler.xxh3.";

/// `coo_assembler.xxh3.<name>.values` -> (name, "values").
fn parse_checksum_key(k: &str) -> Option<(&str, &'static str)> {
    let rest = k.strip_prefix(CHECKSUM_KEY_PREFIX)?;
    if let Some(n) = rest.strip_suffix(".values") {
        Some((n, "values"))
    } else {
        rest.strip_suffix(".indices").map(|n| (n, "indices"))
    }
}

struct Parsed {
    header: FileHeader,
    trailer: Trailer,
    kv: Vec<(String, KvValue)>,
    tensors: Vec<TensorMeta>,
}

fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end && !a.is_empty() && !b.is_empty()
}

/// Product of the shape, saturating at u128::MAX.
fn shape_product(shape: &[u64]) -> u128 {
    shape
        .iter()
        .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128))
        .unwrap_or(u128::MAX)
}

fn parse(bytes: &[u8], opts: ReadOptions) -> Result<Parsed> {
    let len = bytes.len() as u64;
    if len < HEADER_LEN + TRAILER_LEN {
        return Err(too_short(len));
    }
    let header = FileHeader::decode(bytes)?;
    let tstart = len - TRAILER_LEN;
    let trailer = Trailer::decode(&bytes[tstart as usize..], len)?;
    let has_crc = header.flags & FLAG_HAS_INDEX_CRC32C != 0;
    if !has_crc && trailer.index_crc32c != 0 {
        return Err(Error::invalid(
            "trailer",
            tstart + 28,
            format!(
                "index_crc32c is 0x{:08x} but HAS_INDEX_CRC32C is not set (must be 0)",
                trailer.index_crc32c
            ),
        ));
    }
    let region_start = header.first_descriptor_offset;
    // Index section.
    let io = trailer.index_offset;
    let il = trailer.index_length;
    let index_end = io.checked_add(il).filter(|&e| e <= tstart);
    let index_end = match index_end {
        Some(e) if io >= region_start => e,
        _ => {
            return Err(Error::invalid(
                "trailer",
                tstart,
                format!("index section {io}+{il} is not inside bytes {region_start}..{tstart} (between first_descriptor_offset and the trailer)"),
            ))
        }
    };
    if io % 8 != 0 {
        return Err(Error::invalid(
            "trailer",
            tstart,
            format!("index_offset {io} is not a multiple of 8"),
        ));
    }
    let index_bytes = &bytes[io as usize..index_end as usize];
    if has_crc {
        let crc = crc32c::crc32c(index_bytes);
        if crc != trailer.index_crc32c {
            return Err(Error::invalid(
                "trailer",
                tstart + 28,
                format!(
                    "index CRC-32C mismatch: the index bytes give 0x{crc:08x}, the trailer says 0x{:08x}",
                    trailer.index_crc32c
                ),
            ));
        }
    }
    let entries = index::decode(index_bytes, io)?;
    let index_range = io..index_end;

    // KV section: trust the trailer even when HAS_KV_METADATA is clear.
    let ko = trailer.kv_offset;
    let kl = trailer.kv_length as u64;
    if header.flags & FLAG_HAS_KV_METADATA != 0 && kl == 0 {
        return Err(Error::invalid(
            "trailer",
            tstart + 24,
            "HAS_KV_METADATA is set but kv_length is 0",
        ));
    }
    if (ko == 0) != (kl == 0) {
        return Err(Error::invalid(
            "trailer",
            tstart + 16,
            format!(
                "kv_offset {ko} and kv_length {kl} must both be 0 (no KV section) or both non-zero"
            ),
        ));
    }
    let mut kv_range = 0..0;
    let mut kv_entries = Vec::new();
    if kl != 0 {
        let ke = ko
            .checked_add(kl)
            .filter(|&e| e <= tstart && ko >= region_start);
        let ke = match ke {
            Some(e) => e,
            None => {
                return Err(Error::invalid(
                    "trailer",
                    tstart + 16,
                    format!("KV section {ko}+{kl} is not inside bytes {region_start}..{tstart}"),
                ))
            }
        };
        if ko % 8 != 0 {
            return Err(Error::invalid(
                "trailer",
                tstart + 16,
                format!("kv_offset {ko} is not a multiple of 8"),
            ));
        }
        kv_range = ko..ke;
        if overlaps(&kv_range, &index_range) {
            return Err(Error::invalid(
                "trailer",
                tstart + 16,
                format!("KV section {ko}..{ke} overlaps the index section {io}..{index_end}"),
            ));
        }
        kv_entries = kv::decode(&bytes[ko as usize..ke as usize], ko)?;
    }

    // Tensors.
    let align = header.alignment as u64;
    let mut tensors = Vec::with_capacity(entries.len());
    let mut regions: Vec<(Range<u64>, usize)> = Vec::with_capacity(entries.len());
    let mut entry_off = io + 8;
    for (i, e) in entries.into_iter().enumerate() {
        let this_entry = entry_off;
        // name_len, name, descriptor_offset, descriptor_length, data_offset, data_length, flags
        let f_desc_off = this_entry + 2 + e.name.len() as u64;
        let f_desc_len = f_desc_off + 8;
        let f_data_off = f_desc_len + 4;
        let f_data_len = f_data_off + 8;
        entry_off = f_data_len + 12;
        let meta = check_entry(
            bytes,
            &header,
            &e,
            i,
            [f_desc_off, f_desc_len, f_data_off, f_data_len],
            tstart,
            align,
            opts,
        )?;
        // Descriptor start to end of the indices buffer (descriptor end for
        // an empty tensor).
        let region = if meta.desc.nnz == 0 {
            e.descriptor_offset..e.descriptor_offset + u64::from(e.descriptor_length)
        } else {
            e.descriptor_offset..meta.indices.end as u64
        };
        let sec = format!("index entry {i} (tensor {:?})", e.name);
        for (what, r) in [("index section", &index_range), ("KV section", &kv_range)] {
            if overlaps(&region, r) {
                return Err(Error::invalid(
                    sec,
                    f_desc_off,
                    format!(
                        "tensor bytes {}..{} overlap the {what} {}..{}",
                        region.start, region.end, r.start, r.end
                    ),
                ));
            }
        }
        regions.push((region, i));
        tensors.push(meta);
    }
    regions.sort_by_key(|(r, _)| r.start);
    for w in regions.windows(2) {
        if overlaps(&w[0].0, &w[1].0) {
            let (a, b) = (&tensors[w[0].1], &tensors[w[1].1]);
            return Err(Error::invalid(
                format!("tensor {:?}", b.name),
                w[1].0.start,
                format!(
                    "tensor bytes {}..{} overlap those of tensor {:?} ({}..{})",
                    w[1].0.start, w[1].0.end, a.name, w[0].0.start, w[0].0.end
                ),
            ));
        }
    }
    Ok(Parsed {
        header,
        trailer,
        kv: kv_entries,
        tensors,
    })
}

#[allow(clippy::too_many_arguments)]
fn check_entry(
    bytes: &[u8],
    header: &FileHeader,
    e: &IndexEntry,
    i: usize,
    fields: [u64; 4],
    tstart: u64,
    align: u64,
    opts: ReadOptions,
) -> Result<TensorMeta> {
    let [f_desc_off, f_desc_len, f_data_off, f_data_len] = fields;
    let sec = format!("index entry {i} (tensor {:?})", e.name);
    let d_off = e.descriptor_offset;
    if d_off < header.first_descriptor_offset || d_off % 8 != 0 || d_off >= tstart {
        return Err(Error::invalid(
            sec,
            f_desc_off,
            format!(
                "descriptor_offset {d_off} must be a multiple of 8 in {}..{tstart}",
                header.first_descriptor_offset
            ),
        ));
    }
    let dsec = format!("descriptor of tensor {:?}", e.name);
    let desc = CooDescriptor::decode(&bytes[d_off as usize..tstart as usize], d_off, &dsec)?;
    let own_len = desc.encoded_len() as u64;
    if e.descriptor_length as u64 != own_len {
        return Err(Error::invalid(
            sec,
            f_desc_len,
            format!(
                "descriptor_length {} differs from the descriptor's own descriptor_length {own_len}",
                e.descriptor_length
            ),
        ));
    }
    let r = desc.rank() as u64;
    debug_assert_eq!(
        own_len as usize,
        descriptor_len(desc.rank(), desc.statistics.is_some())
    );
    let d_end = d_off + own_len; // decode succeeded within bytes[..tstart]
    let f_vsize = d_off + 45 + 8 * r;
    let f_isize = d_off + 61 + 8 * r;
    let f_nnz = d_off + 28 + 8 * r;
    let width = desc.dtype.width() as u64;
    let vbytes = desc.nnz.checked_mul(width);
    if vbytes != Some(desc.values.byte_size) {
        return Err(Error::invalid(
            dsec,
            f_vsize,
            format!(
                "values byte_size {} is not nnz {} * {} bytes ({})",
                desc.values.byte_size,
                desc.nnz,
                width,
                vbytes.map_or("overflow".to_string(), |v| v.to_string())
            ),
        ));
    }
    let ibytes = desc.nnz.checked_mul(r).and_then(|v| v.checked_mul(8));
    if ibytes != Some(desc.indices.byte_size) {
        return Err(Error::invalid(
            dsec,
            f_isize,
            format!(
                "indices byte_size {} is not nnz {} * rank {r} * 8 ({})",
                desc.indices.byte_size,
                desc.nnz,
                ibytes.map_or("overflow".to_string(), |v| v.to_string())
            ),
        ));
    }
    let (vbytes, ibytes) = (desc.values.byte_size, desc.indices.byte_size);
    let outside = |what: &str| {
        Error::invalid(
            dsec.clone(),
            f_vsize,
            format!("{what} buffer does not end before the trailer at {tstart}"),
        )
    };
    let v_off = align_up(d_end, align).ok_or_else(|| outside("values"))?;
    if e.data_offset != v_off {
        return Err(Error::invalid(
            sec,
            f_data_off,
            format!(
                "data_offset {} is not the first {align}-aligned offset after the descriptor ({v_off})",
                e.data_offset
            ),
        ));
    }
    let v_end = v_off.checked_add(vbytes).ok_or_else(|| outside("values"))?;
    let i_off = align_up(v_end, align).ok_or_else(|| outside("indices"))?;
    let i_end = i_off
        .checked_add(ibytes)
        .ok_or_else(|| outside("indices"))?;
    // An empty tensor (nnz = 0) has no buffer bytes: its data_offset may
    // point past the end of the written bytes (a writer that pads only to 8
    // after the descriptor), and nothing is ever read there.
    let empty = desc.nnz == 0;
    if v_end > tstart && !empty {
        return Err(outside("values"));
    }
    if i_end > tstart && !empty {
        return Err(Error::invalid(
            dsec,
            f_isize,
            format!("indices buffer {i_off}..{i_end} does not end before the trailer at {tstart}"),
        ));
    }
    for (what, h, off, f) in [
        ("values", &desc.values, v_off, f_vsize),
        ("indices", &desc.indices, i_off, f_isize),
    ] {
        if h.byte_size > 0 && off % h.alignment as u64 != 0 {
            return Err(Error::invalid(
                dsec.clone(),
                f + 8,
                format!(
                    "{what} buffer at {off} is not aligned to the {} bytes its handle claims",
                    h.alignment
                ),
            ));
        }
    }
    if e.data_length != i_end - v_off {
        return Err(Error::invalid(
            sec,
            f_data_len,
            format!(
                "data_length {} is not end of indices - data_offset ({})",
                e.data_length,
                i_end - v_off
            ),
        ));
    }
    if !opts.permissive && desc.nnz as u128 > shape_product(&desc.shape) {
        return Err(Error::invalid(
            dsec,
            f_nnz,
            format!(
                "nnz {} exceeds the {} elements of shape {:?} (open with permissive to inspect)",
                desc.nnz,
                shape_product(&desc.shape),
                desc.shape
            ),
        ));
    }
    if let Some(st) = desc
        .statistics
        .filter(|s| s.computed_mask & SPARSITY_VALID != 0)
    {
        let want = expected_sparsity(desc.nnz, shape_product(&desc.shape));
        if !opts.permissive && !close(st.sparsity_ratio, want, 1.0) {
            return Err(Error::invalid(
                dsec,
                d_off + 77 + 8 * r + 16,
                format!(
                    "statistics sparsity_ratio {} contradicts nnz {} and shape {:?} ({want}); open with permissive to inspect",
                    st.sparsity_ratio, desc.nnz, desc.shape
                ),
            ));
        }
    }
    if !opts.permissive && !empty {
        for (from, to, what) in [
            (d_end, v_off, "padding between descriptor and values"),
            (v_end, i_off, "padding between values and indices"),
        ] {
            let pad = &bytes[from as usize..to as usize];
            if let Some(k) = pad.iter().position(|&b| b != 0) {
                return Err(Error::invalid(
                    dsec,
                    from + k as u64,
                    format!(
                        "{what} must be 0x00, found 0x{:02x} (open with permissive to inspect)",
                        pad[k]
                    ),
                ));
            }
        }
    }
    let (values, indices) = if empty {
        // Empty, at an 8-aligned address so that typed empty views work.
        (
            d_off as usize..d_off as usize,
            d_off as usize..d_off as usize,
        )
    } else {
        (
            v_off as usize..v_end as usize,
            i_off as usize..i_end as usize,
        )
    };
    Ok(TensorMeta {
        name: e.name.clone(),
        desc,
        values,
        indices,
    })
}

/// Hint the CPU to fetch `s[i]` (no effect when out of range or off x86-64).
#[inline(always)]
fn prefetch(s: &[u64], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(p) = s.get(i) {
        // SAFETY: a prefetch is a hint that never faults; `p` is a valid reference anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                (p as *const u64).cast::<i8>(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (s, i);
}

/// Equal, both NaN, or within a relative tolerance of 1e-6 (plus 1e-9 * scale
/// absolute), since another writer may sum in another order.
fn close(a: f64, b: f64, scale: f64) -> bool {
    a == b
        || (a.is_nan() && b.is_nan())
        || (a - b).abs() <= 1e-6 * a.abs().max(b.abs()) + 1e-9 * scale
}

/// 1 - nnz / product(shape) (0 for an empty shape).
fn expected_sparsity(nnz: u64, total: u128) -> f64 {
    if total == 0 {
        0.0
    } else {
        1.0 - nnz as f64 / total as f64
    }
}

/// A content problem found by [`CooTensor::verify`] / [`HurrayFile::verify`].
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// The tensor concerned, if any.
    pub tensor: Option<String>,
    /// Short stable rule id: `index-out-of-bounds`, `not-sorted`, `duplicate`,
    /// `statistics-mismatch`, `checksum-mismatch`, `checksum-orphan`, or
    /// `<rule>-more` for the summary of problems beyond the per-rule cap.
    pub rule: &'static str,
    /// The entry (0-based position in the buffers), if any.
    pub entry: Option<u64>,
    /// What is wrong, with the values found.
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}]", self.rule)?;
        if let Some(t) = &self.tensor {
            write!(f, " tensor {t:?}")?;
        }
        if let Some(e) = self.entry {
            write!(f, " entry {e}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// Problems reported per rule and tensor before a summary takes over.
pub const MAX_PROBLEMS_PER_RULE: u64 = 100;

/// Memory cap of the duplicate detector for unsorted tensors (bytes).
pub const DUPLICATE_MEMORY_CAP: usize = 64 << 20;

struct Collector<'a> {
    tensor: &'a str,
    out: Vec<Problem>,
    counts: Vec<(&'static str, u64)>,
}

impl<'a> Collector<'a> {
    fn new(tensor: &'a str) -> Self {
        Collector {
            tensor,
            out: Vec::new(),
            counts: Vec::new(),
        }
    }

    fn count(&mut self, rule: &'static str) -> u64 {
        if let Some(c) = self.counts.iter_mut().find(|(r, _)| *r == rule) {
            c.1 += 1;
            c.1
        } else {
            self.counts.push((rule, 1));
            1
        }
    }

    fn push(&mut self, rule: &'static str, entry: Option<u64>, detail: impl FnOnce() -> String) {
        if self.count(rule) <= MAX_PROBLEMS_PER_RULE {
            self.out.push(Problem {
                tensor: Some(self.tensor.to_string()),
                rule,
                entry,
                detail: detail(),
            });
        }
    }

    fn finish(mut self) -> Vec<Problem> {
        for &(rule, n) in &self.counts {
            if n > MAX_PROBLEMS_PER_RULE {
                let more = match rule {
                    "index-out-of-bounds" => "index-out-of-bounds-more",
                    "not-sorted" => "not-sorted-more",
                    "duplicate" => "duplicate-more",
                    "statistics-mismatch" => "statistics-mismatch-more",
                    "checksum-mismatch" => "checksum-mismatch-more",
                    _ => "more",
                };
                self.out.push(Problem {
                    tensor: Some(self.tensor.to_string()),
                    rule: more,
                    entry: None,
                    detail: format!("and {} more {rule} problems", n - MAX_PROBLEMS_PER_RULE),
                });
            }
        }
        self.out
    }
}

/// A view of one COO tensor of an open file. Cheap to copy.
#[derive(Clone, Copy)]
pub struct CooTensor<'a> {
    name: &'a str,
    desc: &'a CooDescriptor,
    values: &'a [u8],
    indices: &'a [u64],
    rank: usize,
    nnz: usize,
    kv: &'a [(String, KvValue)],
    permissive: bool,
    /// Absolute file offset of the indices buffer (for error messages).
    indices_offset: u64,
}

impl fmt::Debug for CooTensor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CooTensor")
            .field("name", &self.name)
            .field("descriptor", self.desc)
            .finish()
    }
}

fn zero_of(d: DType) -> Value {
    if d.is_float() {
        Value::Float(0.0)
    } else if d.is_signed_int() {
        Value::Int(0)
    } else {
        Value::UInt(0)
    }
}

impl<'a> CooTensor<'a> {
    /// Tensor name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The decoded descriptor.
    pub fn descriptor(&self) -> &'a CooDescriptor {
        self.desc
    }

    /// Element type.
    pub fn dtype(&self) -> DType {
        self.desc.dtype
    }

    /// Shape.
    pub fn shape(&self) -> &'a [u64] {
        &self.desc.shape
    }

    /// Rank (number of dimensions).
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> u64 {
        self.nnz as u64
    }

    /// The descriptor's is_sorted flag.
    pub fn is_sorted(&self) -> bool {
        self.desc.is_sorted
    }

    /// The statistics section, when present.
    pub fn statistics(&self) -> Option<&'a Statistics> {
        self.desc.statistics.as_ref()
    }

    /// Raw little-endian values buffer (nnz * width bytes).
    pub fn values_bytes(&self) -> &'a [u8] {
        self.values
    }

    /// Raw indices buffer (nnz * rank * 8 bytes).
    pub fn indices_bytes(&self) -> &'a [u8] {
        bytemuck::cast_slice(self.indices)
    }

    /// The values as a typed slice, zero-copy. `T` must be the tensor's type.
    pub fn values<T: Element>(&self) -> Result<&'a [T]> {
        if T::DTYPE != self.desc.dtype {
            return Err(Error::TypeMismatch {
                tensor: self.name.to_string(),
                stored: self.desc.dtype.name(),
                requested: T::DTYPE.name(),
            });
        }
        bytemuck::try_cast_slice(self.values).map_err(|e| {
            Error::Unsupported(format!(
                "tensor {:?}: cannot view values as {}: {e}",
                self.name,
                T::DTYPE
            ))
        })
    }

    /// Flat indices, zero-copy: entry i is `indices()[i*rank .. (i+1)*rank]`.
    pub fn indices(&self) -> &'a [u64] {
        self.indices
    }

    /// Coordinate of entry `i`. Panics if `i >= nnz`.
    #[allow(clippy::should_implement_trait)]
    pub fn index(&self, i: u64) -> &'a [u64] {
        let s = i as usize * self.rank;
        &self.indices[s..s + self.rank]
    }

    /// Value of entry `i`. Panics if `i >= nnz`.
    pub fn value(&self, i: u64) -> Value {
        let w = self.desc.dtype.width();
        let s = i as usize * w;
        self.desc.dtype.decode(&self.values[s..s + w])
    }

    fn check_rank(&self, idx: &[u64]) -> Result<()> {
        if idx.len() != self.rank {
            return Err(Error::WrongIndexCount {
                position: idx.to_vec(),
                expected: self.rank,
                got: idx.len(),
            });
        }
        Ok(())
    }

    fn check_bounds(&self, idx: &[u64]) -> Result<()> {
        self.check_rank(idx)?;
        for (dim, (&i, &e)) in idx.iter().zip(&self.desc.shape).enumerate() {
            if i >= e {
                return Err(Error::PositionOutOfRange {
                    position: idx.to_vec(),
                    dim,
                    index: i,
                    extent: e,
                });
            }
        }
        Ok(())
    }

    fn require_sorted(&self, what: &str) -> Result<()> {
        if !self.desc.is_sorted {
            return Err(Error::Unsupported(format!(
                "{what} needs a sorted tensor; {:?} has is_sorted = 0",
                self.name
            )));
        }
        Ok(())
    }

    /// First entry position for which `pred(entry)` is false, assuming the
    /// entries are partitioned (true first). Branch-light binary search.
    #[inline]
    fn partition_point(&self, pred: impl Fn(&[u64]) -> bool) -> usize {
        let r = self.rank;
        let ind = self.indices;
        let mut size = self.nnz;
        if size == 0 {
            return 0;
        }
        let mut base = 0usize;
        while size > 1 {
            let half = size / 2;
            // Prefetch both candidates of the next step: on large tensors
            // the search is bound by memory latency, not comparisons.
            let rest = size - half;
            let next = rest / 2;
            let next2 = (rest - next) / 2;
            for b in [base, base + half] {
                prefetch(ind, (b + next) * r);
                prefetch(ind, (b + next2) * r);
                prefetch(ind, (b + next + next2) * r);
            }
            let mid = base + half;
            base = if pred(&ind[mid * r..mid * r + r]) {
                mid
            } else {
                base
            };
            size -= half;
        }
        base + pred(&ind[base * r..base * r + r]) as usize
    }

    fn duplicate_error(&self, idx: &[u64], a: usize, b: usize) -> Error {
        // The byte where the second copy's indices start.
        let at = self.indices_offset + (b * self.rank * 8) as u64;
        Error::invalid(
            format!("indices of tensor {:?}", self.name),
            at,
            format!("coordinate {idx:?} is stored twice (entries {a} and {b}); open with permissive to read it anyway"),
        )
    }

    /// Position of the entry stored at `idx`, if any. Rank and bounds are
    /// checked ([`Error::WrongIndexCount`], [`Error::PositionOutOfRange`]). Binary search when sorted, linear scan otherwise.
    /// Strict mode: a coordinate met twice is an [`Error::InvalidFile`].
    pub fn find(&self, idx: &[u64]) -> Result<Option<u64>> {
        self.check_bounds(idx)?;
        let r = self.rank;
        if self.desc.is_sorted {
            let p = self.partition_point(|e| e < idx);
            if p < self.nnz && &self.indices[p * r..p * r + r] == idx {
                if !self.permissive
                    && p + 1 < self.nnz
                    && &self.indices[(p + 1) * r..(p + 2) * r] == idx
                {
                    return Err(self.duplicate_error(idx, p, p + 1));
                }
                return Ok(Some(p as u64));
            }
            Ok(None)
        } else {
            let mut found: Option<usize> = None;
            for (p, e) in self.indices.chunks_exact(r).enumerate() {
                if e == idx {
                    match found {
                        None if self.permissive => return Ok(Some(p as u64)),
                        None => found = Some(p),
                        Some(first) => return Err(self.duplicate_error(idx, first, p)),
                    }
                }
            }
            Ok(found.map(|p| p as u64))
        }
    }

    /// Value at `idx`: the stored value, or a zero of the tensor's type.
    pub fn get(&self, idx: &[u64]) -> Result<Value> {
        Ok(match self.find(idx)? {
            Some(p) => self.value(p),
            None => zero_of(self.desc.dtype),
        })
    }

    /// Position of the first entry `>= idx` (nnz if none). Sorted tensors only
    /// (`Unsupported` otherwise); the rank is checked, components beyond the
    /// shape are allowed.
    pub fn lower_bound(&self, idx: &[u64]) -> Result<u64> {
        self.check_rank(idx)?;
        self.require_sorted("lower_bound")?;
        Ok(self.partition_point(|e| e < idx) as u64)
    }

    /// Entries whose coordinate starts with `prefix` (1..=rank components);
    /// `[i]` gives row i. Sorted tensors only.
    pub fn prefix_range(&self, prefix: &[u64]) -> Result<Range<u64>> {
        if prefix.is_empty() || prefix.len() > self.rank {
            return Err(Error::WrongIndexCount {
                position: prefix.to_vec(),
                expected: self.rank,
                got: prefix.len(),
            });
        }
        self.require_sorted("prefix_range")?;
        let k = prefix.len();
        let lo = self.partition_point(|e| &e[..k] < prefix);
        let hi = self.partition_point(|e| &e[..k] <= prefix);
        Ok(lo as u64..hi.max(lo) as u64)
    }

    /// Every entry in storage order: (coordinate, value).
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u64], Value)> + 'a {
        let d = self.desc.dtype;
        self.indices
            .chunks_exact(self.rank)
            .zip(self.values.chunks_exact(d.width()))
            .map(move |(i, v)| (i, d.decode(v)))
    }

    /// Check the content: bounds, order, duplicates, statistics, KV checksums.
    ///
    /// O(nnz) time for sorted tensors. Memory is bounded: duplicates in an
    /// unsorted tensor are found by hash partitioning — `P = ceil(2 * nnz * 16
    /// / DUPLICATE_MEMORY_CAP)` passes, each collecting `(hash, position)`
    /// pairs (plus a 1-byte mark) of one partition into vectors of at most
    /// `DUPLICATE_MEMORY_CAP` bytes (64 MiB), sorted, equal hashes compared
    /// coordinate by coordinate. A partition larger than the cap (adversarial
    /// hashes) is processed in cap-sized chunks, each probed by a scan of the
    /// rest: still exact and bounded, only slower.
    pub fn verify(&self) -> Vec<Problem> {
        self.verify_with_cap(DUPLICATE_MEMORY_CAP)
    }

    fn verify_with_cap(&self, cap_bytes: usize) -> Vec<Problem> {
        let mut c = Collector::new(self.name);
        let r = self.rank;
        let shape = &self.desc.shape;
        let mut order_ok = true;
        let mut prev: Option<&[u64]> = None;
        for (p, e) in self.indices.chunks_exact(r).enumerate() {
            for (d, (&i, &ext)) in e.iter().zip(shape).enumerate() {
                if i >= ext {
                    c.push("index-out-of-bounds", Some(p as u64), || {
                        format!("index {i} in dimension {d} is >= extent {ext} (coordinate {e:?})")
                    });
                }
            }
            if self.desc.is_sorted {
                if let Some(q) = prev {
                    match q.cmp(e) {
                        Ordering::Less => {}
                        Ordering::Equal => c.push("duplicate", Some(p as u64), || {
                            format!("coordinate {e:?} equals that of entry {}", p - 1)
                        }),
                        Ordering::Greater => {
                            order_ok = false;
                            c.push("not-sorted", Some(p as u64), || {
                                format!("coordinate {e:?} is smaller than {q:?} of entry {} but is_sorted = 1", p - 1)
                            })
                        }
                    }
                }
                prev = Some(e);
            }
        }
        if !self.desc.is_sorted || !order_ok {
            self.find_duplicates(&mut c, cap_bytes, !self.desc.is_sorted);
        }
        self.check_statistics(&mut c);
        self.check_checksums(&mut c);
        c.finish()
    }

    fn hash_entry(e: &[u64]) -> u64 {
        xxhash_rust::xxh3::xxh3_64(bytemuck::cast_slice(e))
    }

    /// Hash-partitioned duplicate search (see `verify`): each entry whose
    /// coordinate occurs earlier is reported once, naming the first occurrence.
    /// When `all` is false (a sorted tensor with order violations), entries
    /// equal to their predecessor were already reported and are skipped.
    fn find_duplicates(&self, c: &mut Collector<'_>, cap_bytes: usize, all: bool) {
        let r = self.rank;
        let n = self.nnz;
        if n < 2 {
            return;
        }
        // 16 bytes of (hash, position) + 1 byte of mark per collected entry.
        let chunk = (cap_bytes / 17).max(2);
        let parts = (n.saturating_mul(2)).div_ceil(chunk).max(1) as u64;
        let ind = self.indices;
        let entry = |p: usize| &ind[p * r..p * r + r];
        let hash = |p: usize| Self::hash_entry(entry(p));
        // A sorted tensor with order violations already had its adjacent
        // duplicates reported by the order check.
        let report = |c: &mut Collector<'_>, first: usize, later: usize| {
            if all || entry(later - 1) != entry(later) {
                c.push("duplicate", Some(later as u64), || {
                    format!("coordinate {:?} equals that of entry {first}", entry(later))
                });
            }
        };
        // First element of `buf` (sorted by (hash, position)) with the
        // coordinate of entry p, i.e. the smallest such position in the chunk.
        let lookup = |buf: &[(u64, usize)], h: u64, p: usize| -> Option<usize> {
            let lo = buf.partition_point(|&(bh, _)| bh < h);
            buf[lo..]
                .iter()
                .take_while(|&&(bh, _)| bh == h)
                .position(|&(_, q)| entry(q) == entry(p))
                .map(|k| lo + k)
        };
        let mut buf: Vec<(u64, usize)> = Vec::new();
        let mut marked: Vec<bool> = Vec::new();
        for part in 0..parts {
            // Members of the partition are taken in position order, at most
            // `chunk` at a time; normally one chunk holds the whole partition.
            let mut start = 0usize;
            loop {
                buf.clear();
                let mut next = n;
                let mut first_pos = n;
                for p in start..n {
                    let h = hash(p);
                    if h % parts == part {
                        if buf.len() == chunk {
                            next = p;
                            break;
                        }
                        first_pos = first_pos.min(p);
                        buf.push((h, p));
                    }
                }
                if buf.is_empty() {
                    break;
                }
                buf.sort_unstable();
                // Mark chunk entries whose coordinate occurs in an earlier
                // chunk: an earlier chunk reported those groups already.
                marked.clear();
                marked.resize(buf.len(), false);
                for p in 0..first_pos {
                    let h = hash(p);
                    if h % parts != part {
                        continue;
                    }
                    if let Some(k) = lookup(&buf, h, p) {
                        marked[k] = true;
                    }
                }
                // Within the chunk: later members of each unmarked group.
                for j in 0..buf.len() {
                    let (h, later) = buf[j];
                    if let Some(k) = lookup(&buf, h, later).filter(|&k| k != j) {
                        if !marked[k] {
                            report(c, buf[k].1, later);
                        }
                    }
                }
                if next >= n {
                    break;
                }
                // Members after the chunk equal to an unmarked group.
                for p in next..n {
                    let h = hash(p);
                    if h % parts != part {
                        continue;
                    }
                    if let Some(k) = lookup(&buf, h, p).filter(|&k| !marked[k]) {
                        report(c, buf[k].1, p);
                    }
                }
                start = next;
            }
        }
    }

    fn check_statistics(&self, c: &mut Collector<'_>) {
        let Some(s) = self.desc.statistics else {
            return;
        };
        let m = s.computed_mask;
        let total = shape_product(&self.desc.shape);
        let n_f = total as f64;
        let nnz = self.nnz as u64;
        let implicit = (nnz as u128) < total;
        if m & NNZ_VALID != 0 && s.nnz != nnz {
            c.push("statistics-mismatch", None, || {
                format!("statistics nnz {} but {nnz} entries are stored", s.nnz)
            });
        }
        if m & SPARSITY_VALID != 0 {
            let want = if total == 0 {
                0.0
            } else {
                1.0 - nnz as f64 / n_f
            };
            if !close(s.sparsity_ratio, want, 1.0) {
                c.push("statistics-mismatch", None, || {
                    format!(
                        "sparsity_ratio {} but the data give {want}",
                        s.sparsity_ratio
                    )
                });
            }
        }
        if m & (VALUE_RANGE_VALID | VALUE_STATS_VALID | NAN_INF_VALID) == 0 {
            return;
        }
        let (mut min, mut max, mut amax) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        let (mut nan, mut inf, mut sum) = (false, false, 0.0f64);
        for (_, v) in self.iter() {
            let x = v.to_f64();
            if x.is_nan() {
                nan = true;
                continue;
            }
            inf |= x.is_infinite();
            min = min.min(x);
            max = max.max(x);
            amax = amax.max(x.abs());
            sum += x;
        }
        if implicit {
            min = min.min(0.0);
            max = max.max(0.0);
        }
        let mut bad = |field: &str, got: f64, want: f64| {
            c.push("statistics-mismatch", None, || {
                format!("{field} is {got} but the data give {want}")
            })
        };
        if m & VALUE_RANGE_VALID != 0 && min <= max {
            for (f, got, want) in [
                ("value_min", s.value_min, min),
                ("value_max", s.value_max, max),
                ("value_abs_max", s.value_abs_max, amax),
            ] {
                if got != want {
                    bad(f, got, want);
                }
            }
        }
        if m & NAN_INF_VALID != 0 {
            if s.has_nan != nan {
                bad("has_nan", s.has_nan as u8 as f64, nan as u8 as f64);
            }
            if s.has_inf != inf {
                bad("has_inf", s.has_inf as u8 as f64, inf as u8 as f64);
            }
        }
        if m & VALUE_STATS_VALID != 0 && total > 0 && !nan {
            let mean = sum / n_f;
            let mut sq = 0.0f64;
            for (_, v) in self.iter() {
                let d = v.to_f64() - mean;
                sq += d * d;
            }
            if implicit {
                sq += (n_f - nnz as f64) * mean * mean;
            }
            let sd = (sq / n_f).sqrt();
            if !close(s.value_mean, mean, amax) {
                bad("value_mean", s.value_mean, mean);
            }
            if !close(s.value_stddev, sd, amax) {
                bad("value_stddev", s.value_stddev, sd);
            }
        }
    }

    fn check_checksums(&self, c: &mut Collector<'_>) {
        for (k, v) in self.kv {
            let Some((name, which)) = parse_checksum_key(k) else {
                continue;
            };
            if name != self.name {
                continue;
            }
            let data = if which == "values" {
                self.values
            } else {
                self.indices_bytes()
            };
            match v {
                KvValue::U64(want) => {
                    let got = xxhash_rust::xxh3::xxh3_64(data);
                    if got != *want {
                        c.push("checksum-mismatch", None, || {
                            format!("{which} buffer hashes to xxh3 0x{got:016x}, KV {k:?} says 0x{want:016x}")
                        });
                    }
                }
                other => c.push("checksum-mismatch", None, || {
                    format!("KV {k:?} should be a u64 xxh3-64, found {other:?}")
                }),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::hurray::BufferHandle;

    fn desc(shape: Vec<u64>, nnz: u64, sorted: bool) -> CooDescriptor {
        CooDescriptor {
            dtype: DType::U8,
            shape: shape.clone(),
            nnz,
            is_sorted: sorted,
            values: BufferHandle::cpu(nnz, 64),
            indices: BufferHandle::cpu(nnz * 8 * shape.len() as u64, 64),
            statistics: None,
        }
    }

    fn view<'a>(d: &'a CooDescriptor, ind: &'a [u64], vals: &'a [u8]) -> CooTensor<'a> {
        CooTensor {
            name: "t",
            desc: d,
            values: vals,
            indices: ind,
            rank: d.rank(),
            nnz: ind.len() / d.rank(),
            kv: &[],
            permissive: true,
            indices_offset: 0,
        }
    }

    fn brute(ind: &[u64], r: usize) -> Vec<u64> {
        let e: Vec<&[u64]> = ind.chunks_exact(r).collect();
        (0..e.len())
            .filter(|&j| e[..j].contains(&e[j]))
            .map(|j| j as u64)
            .collect()
    }

    fn dups(t: &CooTensor<'_>, cap: usize) -> Vec<u64> {
        let mut v: Vec<u64> = t
            .verify_with_cap(cap)
            .iter()
            .filter(|p| p.rule == "duplicate")
            .filter_map(|p| p.entry)
            .collect();
        v.sort();
        v
    }

    #[test]
    fn duplicate_detector_is_exact_under_tiny_memory_caps() {
        // Pseudo-random coordinates with many repeats, rank 2.
        let mut x = 12345u64;
        let mut ind = Vec::new();
        for _ in 0..150 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ind.push((x >> 33) % 10);
            ind.push((x >> 13) % 10);
        }
        let d = desc(vec![10, 10], 150, false);
        let vals = vec![1u8; 150];
        let t = view(&d, &ind, &vals);
        let want = brute(&ind, 2);
        // Below the per-rule report cap of 100.
        assert!(want.len() > 20 && want.len() < 100, "{}", want.len());
        // 64 MiB (one pass), 16 entries per chunk (many partitions), 2 entries
        // per chunk (chunk fallback inside partitions).
        for cap in [DUPLICATE_MEMORY_CAP, 16 * 16, 32] {
            assert_eq!(dups(&t, cap), want, "cap {cap}");
        }
        // All entries identical: one partition, far over the cap.
        let same = vec![3u64; 200];
        let d = desc(vec![12, 12], 100, false);
        let t = view(&d, &same, &vals[..100]);
        assert_eq!(dups(&t, 64), (1..100).collect::<Vec<_>>());
    }

    #[test]
    fn collector_caps_and_summarises() {
        let mut c = Collector::new("t");
        for i in 0..250 {
            c.push("duplicate", Some(i), || "x".into());
        }
        c.push("not-sorted", Some(1), || "y".into());
        let p = c.finish();
        assert_eq!(p.len(), 102);
        assert_eq!(p[101].rule, "duplicate-more");
        assert!(p[101].to_string().contains("and 150 more duplicate"));
    }

    #[test]
    fn partition_point_and_ranges() {
        let ind = [0u64, 0, 0, 2, 1, 1, 1, 3, 4, 0];
        let d = desc(vec![5, 5], 5, true);
        let vals = [1u8, 2, 3, 4, 5];
        let t = view(&d, &ind, &vals);
        assert_eq!(t.lower_bound(&[1, 2]).unwrap(), 3);
        assert_eq!(t.prefix_range(&[1]).unwrap(), 2..4);
        assert_eq!(t.get(&[1, 3]).unwrap(), Value::UInt(4));
        assert_eq!(t.get(&[1, 2]).unwrap(), Value::UInt(0));
        assert_eq!(t.find(&[4, 0]).unwrap(), Some(4));
        assert!(t.verify().is_empty());
        assert_eq!(shape_product(&[u64::MAX, u64::MAX, 2]), u128::MAX);
        assert!(close(0.1 + 0.2, 0.3, 1.0));
        assert!(!close(0.8, 0.84, 1.0));
        assert_eq!(
            parse_checksum_key("coo_assembler.xxh3.a.b.values"),
            Some(("a.b", "values"))
        );
        assert_eq!(parse_checksum_key("coo_assembler.xxh3.a"), None);
    }

    #[test]
    fn too_short_inputs() {
        for n in [0usize, 1, 63, 103] {
            assert!(HurrayFile::from_bytes(vec![0; n]).is_err());
        }
    }
}
