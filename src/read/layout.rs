//! Structural checks at open: header, trailer, index, KV section, every
//! index entry, descriptor and buffer placement (see the module docs of
//! [`crate::read`]). O(index + KV + descriptors), independent of `nnz`.

use super::{
    Desc, Listed, ListedMeta, ReadOptions, Stored, TensorMeta, close, shape_product, too_short,
};
use crate::error::{Error, Result};
use crate::hurray::compressed::{CompressedDescriptor, HANDLES_OFFSET, NNZ_OFFSET};
use crate::hurray::csf::{CsfDescriptor, csf_field};
use crate::hurray::dense::dense_field;
use crate::hurray::descriptor::{HANDLE_LEN, coo_field, descriptor_len, layout_tag};
use crate::hurray::header::{FLAG_HAS_INDEX_CRC32C, FLAG_HAS_KV_METADATA};
use crate::hurray::index::EntryFields;
use crate::hurray::statistics::SPARSITY_VALID;
use crate::hurray::trailer;
use crate::hurray::{
    BufferHandle, CooDescriptor, DenseDescriptor, DescriptorHead, FileHeader, HEADER_LEN,
    IndexEntry, KvValue, LAYOUT_COO, LAYOUT_CSC, LAYOUT_CSF, LAYOUT_CSR, TRAILER_LEN, Trailer,
    align_up, index, kv,
};
use crate::layout::Layout;
use std::ops::Range;

pub(super) struct Parsed {
    pub(super) header: FileHeader,
    pub(super) trailer: Trailer,
    pub(super) kv: Vec<(String, KvValue)>,
    pub(super) tensors: Vec<Stored>,
}

fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end && !a.is_empty() && !b.is_empty()
}

/// The container of a file, every rule about it checked: header, trailer,
/// the index section (inside the tensor region, 8-aligned, CRC-32C) and the
/// KV section (the same, not overlapping the index), decoded.
pub(super) struct Container {
    pub(super) header: FileHeader,
    pub(super) trailer: Trailer,
    pub(super) entries: Vec<IndexEntry>,
    pub(super) kv: Vec<(String, KvValue)>,
    /// Byte ranges of the index and KV sections (empty when absent).
    pub(super) index_range: Range<u64>,
    pub(super) kv_range: Range<u64>,
}

pub(super) fn parse(bytes: &[u8], opts: ReadOptions) -> Result<Parsed> {
    let Container {
        header,
        trailer,
        entries,
        kv: kv_entries,
        index_range,
        kv_range,
    } = container(bytes)?;
    let tstart = bytes.len() as u64 - TRAILER_LEN;
    let io = trailer.index_offset;
    // Tensors.
    let align = header.alignment as u64;
    let mut tensors = Vec::with_capacity(entries.len());
    let mut regions: Vec<(Range<u64>, usize)> = Vec::with_capacity(entries.len());
    let mut entry_off = EntryFields::first(io);
    for (i, e) in entries.into_iter().enumerate() {
        let fields = EntryFields::at(entry_off, e.name.len());
        entry_off = fields.end;
        let meta = check_entry(bytes, &header, &e, i, fields, tstart, align, opts)?;
        // Descriptor start to end of the indices buffer (descriptor end for
        // an empty tensor).
        let region = e.descriptor_offset..meta.end() as u64;
        let sec = format!("index entry {i} (tensor {:?})", e.name);
        for (what, r) in [("index section", &index_range), ("KV section", &kv_range)] {
            if overlaps(&region, r) {
                return Err(Error::invalid(
                    sec,
                    fields.descriptor_offset,
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
                format!("tensor {:?}", b.name()),
                w[1].0.start,
                format!(
                    "tensor bytes {}..{} overlap those of tensor {:?} ({}..{})",
                    w[1].0.start,
                    w[1].0.end,
                    a.name(),
                    w[0].0.start,
                    w[0].0.end
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

pub(super) fn container(bytes: &[u8]) -> Result<Container> {
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
            tstart + trailer::field::INDEX_CRC32C,
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
                format!(
                    "index section {io}+{il} is not inside bytes {region_start}..{tstart} (between first_descriptor_offset and the trailer)"
                ),
            ));
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
        let crc = crate::hurray::crc32c::crc32c(index_bytes);
        if crc != trailer.index_crc32c {
            return Err(Error::invalid(
                "trailer",
                tstart + trailer::field::INDEX_CRC32C,
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
            tstart + trailer::field::KV_LENGTH,
            "HAS_KV_METADATA is set but kv_length is 0",
        ));
    }
    if (ko == 0) != (kl == 0) {
        return Err(Error::invalid(
            "trailer",
            tstart + trailer::field::KV_OFFSET,
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
                    tstart + trailer::field::KV_OFFSET,
                    format!("KV section {ko}+{kl} is not inside bytes {region_start}..{tstart}"),
                ));
            }
        };
        if ko % 8 != 0 {
            return Err(Error::invalid(
                "trailer",
                tstart + trailer::field::KV_OFFSET,
                format!("kv_offset {ko} is not a multiple of 8"),
            ));
        }
        kv_range = ko..ke;
        if overlaps(&kv_range, &index_range) {
            return Err(Error::invalid(
                "trailer",
                tstart + trailer::field::KV_OFFSET,
                format!("KV section {ko}..{ke} overlaps the index section {io}..{index_end}"),
            ));
        }
        kv_entries = kv::decode(&bytes[ko as usize..ke as usize], ko)?;
    }

    Ok(Container {
        header,
        trailer,
        entries,
        kv: kv_entries,
        index_range,
        kv_range,
    })
}

/// One buffer of a tensor as its descriptor declares it.
struct DeclaredBuffer<'d> {
    /// Its name in messages ("values", "indices", "col_indices", "row_ptr"...).
    what: &'static str,
    handle: &'d BufferHandle,
    /// Absolute offset of the handle's `byte_size` field.
    field: u64,
    /// The size the descriptor's other fields require, and how it is computed.
    want: Option<u64>,
    how: String,
    /// `want` is a minimum (a dense buffer may be larger than its
    /// elements need), not the exact size.
    at_least: bool,
}

impl DeclaredBuffer<'_> {
    fn size_ok(&self) -> bool {
        let size = self.handle.byte_size;
        self.want
            .is_some_and(|w| if self.at_least { size >= w } else { size == w })
    }
}

/// The layout-independent fields of a decoded descriptor.
struct Declared<'d> {
    shape: &'d [u64],
    nnz: u64,
    statistics: Option<&'d crate::hurray::Statistics>,
    /// Absolute offsets of `nnz` and of the statistics section.
    f_nnz: u64,
    f_stats: u64,
    buffers: Vec<DeclaredBuffer<'d>>,
}

/// The size a sparse tensor's values buffer must have, and how to say it.
fn values_size(dtype: crate::element::DType, nnz: u64) -> (Option<u64>, String) {
    let how = if dtype.is_bool() {
        format!("ceil(nnz {nnz} / 8) bytes (bool, 8 per byte)")
    } else {
        format!("nnz {nnz} * {} bytes", dtype.width())
    };
    (dtype.stored_len(nnz), how)
}

fn declared(desc: &Desc, d_off: u64) -> Declared<'_> {
    match desc {
        Desc::Csf(d) => declared_csf(d, d_off),
        Desc::Coo(d) => {
            let rank = d.rank();
            let r = rank as u64;
            let (want_values, how_values) = values_size(d.dtype, d.nnz);
            let ibytes = d.nnz.checked_mul(r).and_then(|v| v.checked_mul(8));
            Declared {
                shape: &d.shape,
                nnz: d.nnz,
                statistics: d.statistics.as_ref(),
                f_nnz: d_off + coo_field::nnz(rank),
                f_stats: d_off + coo_field::statistics(rank),
                buffers: vec![
                    DeclaredBuffer {
                        what: "values",
                        handle: &d.values,
                        field: d_off + coo_field::values_handle(rank),
                        want: want_values,
                        how: how_values,
                        at_least: false,
                    },
                    DeclaredBuffer {
                        what: "indices",
                        handle: &d.indices,
                        field: d_off + coo_field::indices_handle(rank),
                        want: ibytes,
                        how: format!("nnz {} * rank {r} * 8", d.nnz),
                        at_least: false,
                    },
                ],
            }
        }
        Desc::Compressed(d) => {
            let (want_values, how_values) = values_size(d.dtype, d.nnz);
            let (minor, ptr, major) = if d.column_major {
                ("row_indices", "col_ptr", "ncols")
            } else {
                ("col_indices", "row_ptr", "nrows")
            };
            let h = d_off + HANDLES_OFFSET as u64;
            let hl = HANDLE_LEN as u64;
            let extent = d.shape[d.major_dim()];
            Declared {
                shape: &d.shape,
                nnz: d.nnz,
                statistics: d.statistics.as_ref(),
                f_nnz: d_off + NNZ_OFFSET as u64,
                f_stats: h + 3 * hl,
                buffers: vec![
                    DeclaredBuffer {
                        what: "values",
                        handle: &d.values,
                        field: h,
                        want: want_values,
                        how: how_values,
                        at_least: false,
                    },
                    DeclaredBuffer {
                        what: minor,
                        handle: &d.indices,
                        field: h + hl,
                        want: d.nnz.checked_mul(8),
                        how: format!("nnz {} * 8", d.nnz),
                        at_least: false,
                    },
                    DeclaredBuffer {
                        what: ptr,
                        handle: &d.pointers,
                        field: h + 2 * hl,
                        want: d.pointer_count().and_then(|n| n.checked_mul(8)),
                        how: format!("({major} {extent} + 1) * 8"),
                        at_least: false,
                    },
                ],
            }
        }
    }
}

/// A CSF tensor's buffers: values (`nnz` elements), then per level
/// `pos_L` (`pos_0`: 2 words; below, one more than the level above has
/// nodes, which its `crd` size tells) and `crd_L` (whole words; the leaf
/// level's `nnz` of them).
fn declared_csf(d: &CsfDescriptor, d_off: u64) -> Declared<'_> {
    let rank = d.rank();
    let names = crate::options::OutputLayout::Csf.buffer_names();
    let (want_values, how_values) = values_size(d.dtype, d.nnz);
    let mut buffers = vec![DeclaredBuffer {
        what: "values",
        handle: &d.values,
        field: d_off + csf_field::handle(rank, 0),
        want: want_values,
        how: how_values,
        at_least: false,
    }];
    for (l, (pos, crd)) in d.levels.iter().enumerate() {
        let (want_pos, how_pos) = if l == 0 {
            (Some(16), "2 * 8 (the root's pointer pair)".to_string())
        } else {
            let above = d.levels[l - 1].1.byte_size;
            (
                above.checked_add(8).filter(|_| above % 8 == 0),
                format!("(the {} nodes of crd_{} + 1) * 8", above / 8, l - 1),
            )
        };
        let (want_crd, how_crd) = if l + 1 == rank {
            (d.nnz.checked_mul(8), format!("nnz {} * 8", d.nnz))
        } else {
            (
                Some(crd.byte_size).filter(|b| b % 8 == 0),
                "a whole number of u64 coordinates".to_string(),
            )
        };
        buffers.push(DeclaredBuffer {
            what: names.get(1 + 2 * l).copied().unwrap_or("pos"),
            handle: pos,
            field: d_off + csf_field::handle(rank, 1 + 2 * l),
            want: want_pos,
            how: how_pos,
            at_least: false,
        });
        buffers.push(DeclaredBuffer {
            what: names.get(2 + 2 * l).copied().unwrap_or("crd"),
            handle: crd,
            field: d_off + csf_field::handle(rank, 2 + 2 * l),
            want: want_crd,
            how: how_crd,
            at_least: false,
        });
    }
    Declared {
        shape: &d.shape,
        nnz: d.nnz,
        statistics: d.statistics.as_ref(),
        f_nnz: d_off + csf_field::nnz(rank),
        f_stats: d_off + csf_field::statistics(rank),
        buffers,
    }
}

/// The one buffer of a row-major or column-major tensor: at least
/// `byte_offset + product(shape) * width` bytes (the spec gives the
/// minimum; a larger buffer is valid).
fn declared_dense(d: &DenseDescriptor, d_off: u64) -> Declared<'_> {
    let rank = d.rank();
    let width = d.dtype.width();
    let elements = d
        .elements()
        .map_or("more than 2^64".to_string(), |n| n.to_string());
    Declared {
        shape: &d.shape,
        // Every element is stored: no nnz to hold against the shape, and
        // the statistics' nnz counts non-zeros, which only the data tell.
        nnz: 0,
        statistics: None,
        f_nnz: d_off,
        f_stats: d_off + dense_field::statistics(rank),
        buffers: vec![DeclaredBuffer {
            what: "values",
            handle: &d.buffer,
            field: d_off + dense_field::handle(rank),
            want: d.payload_bytes().and_then(|p| p.checked_add(d.byte_offset)),
            how: format!(
                "at least byte_offset {} + {elements} elements * {width} bytes",
                d.byte_offset
            ),
            at_least: true,
        }],
    }
}

/// A decoded descriptor: of a layout the views read, or of one that is
/// listed only.
enum Decoded {
    Served(Desc),
    Listed(Listed),
}

/// Decode the descriptor at `d_off` with the codec of its layout tag:
/// COO, CSR and CSC whole, row-major and column-major whole when the
/// dense codec reads them, any other the common fields only. A tag the
/// spec does not name is refused unless `permissive` (the spec's rule).
fn decode_descriptor(
    bytes: &[u8],
    d_off: u64,
    tstart: u64,
    dsec: &str,
    opts: ReadOptions,
) -> Result<Decoded> {
    let b = &bytes[d_off as usize..tstart as usize];
    Ok(match layout_tag(b) {
        Some(LAYOUT_CSR | LAYOUT_CSC) => Decoded::Served(Desc::Compressed(
            CompressedDescriptor::decode(b, d_off, dsec)?,
        )),
        Some(LAYOUT_COO) => Decoded::Served(Desc::Coo(CooDescriptor::decode(b, d_off, dsec)?)),
        Some(LAYOUT_CSF) => Decoded::Served(Desc::Csf(CsfDescriptor::decode(b, d_off, dsec)?)),
        _ if DenseDescriptor::handles(b) => {
            Decoded::Listed(Listed::Dense(DenseDescriptor::decode(b, d_off, dsec)?))
        }
        _ => {
            let h = DescriptorHead::decode(b, d_off, dsec)?;
            if Layout::from_tag(h.layout_tag).is_none() && !opts.permissive {
                return Err(Error::Unsupported(format!(
                    "{dsec}: layout tag 0x{:02x} is not one the Hurray specification names ({}); a reader refuses a layout it does not recognise unless permissive (open with permissive to list it)",
                    h.layout_tag,
                    if h.layout_tag >= 0xF0 {
                        "an implementation-private extension"
                    } else {
                        "unassigned"
                    }
                )));
            }
            Decoded::Listed(Listed::Other(h))
        }
    })
}

#[allow(clippy::too_many_arguments)]
fn check_entry(
    bytes: &[u8],
    header: &FileHeader,
    e: &IndexEntry,
    i: usize,
    fields: EntryFields,
    tstart: u64,
    align: u64,
    opts: ReadOptions,
) -> Result<Stored> {
    let sec = format!("index entry {i} (tensor {:?})", e.name);
    let d_off = e.descriptor_offset;
    if d_off < header.first_descriptor_offset || d_off % 8 != 0 || d_off >= tstart {
        return Err(Error::invalid(
            sec,
            fields.descriptor_offset,
            format!(
                "descriptor_offset {d_off} must be a multiple of 8 in {}..{tstart}",
                header.first_descriptor_offset
            ),
        ));
    }
    let dsec = format!("descriptor of tensor {:?}", e.name);
    let desc = match decode_descriptor(bytes, d_off, tstart, &dsec, opts)? {
        Decoded::Served(desc) => desc,
        Decoded::Listed(l) => {
            return check_listed(bytes, e, i, fields, tstart, align, opts, l).map(Stored::Listed);
        }
    };
    if let Desc::Coo(d) = &desc {
        debug_assert_eq!(
            d.encoded_len(),
            descriptor_len(d.rank(), d.statistics.is_some())
        );
    }
    let own_len = desc.encoded_len() as u64;
    check_decoded(bytes, e, i, fields, tstart, align, opts, desc, own_len).map(Stored::Served)
}

/// The index entry's `descriptor_length` against the descriptor's own.
fn check_own_length(e: &IndexEntry, i: usize, fields: EntryFields, own_len: u64) -> Result<()> {
    if e.descriptor_length as u64 != own_len {
        return Err(Error::invalid(
            format!("index entry {i} (tensor {:?})", e.name),
            fields.descriptor_length,
            format!(
                "descriptor_length {} differs from the descriptor's own descriptor_length {own_len}",
                e.descriptor_length
            ),
        ));
    }
    Ok(())
}

/// The rules of a tensor the reader lists but does not serve: a dense
/// one's buffer as a sparse one's (size, placement, alignment, padding);
/// for any other layout, whose buffers only its own fields locate, the
/// index entry's data region: after the descriptor, before the trailer.
#[allow(clippy::too_many_arguments)]
fn check_listed(
    bytes: &[u8],
    e: &IndexEntry,
    i: usize,
    fields: EntryFields,
    tstart: u64,
    align: u64,
    opts: ReadOptions,
    desc: Listed,
) -> Result<ListedMeta> {
    let d_off = e.descriptor_offset;
    let own_len = match &desc {
        Listed::Dense(d) => d.encoded_len() as u64,
        Listed::Other(h) => u64::from(h.descriptor_length),
    };
    check_own_length(e, i, fields, own_len)?;
    let d_end = d_off + own_len; // decoded within bytes[..tstart]
    let data = match &desc {
        Listed::Dense(d) => {
            let placed = place(
                bytes,
                e,
                i,
                fields,
                tstart,
                align,
                opts,
                &declared_dense(d, d_off),
                own_len,
            )?;
            placed
                .into_iter()
                .next()
                .unwrap_or(d_off as usize..d_off as usize)
        }
        Listed::Other(_) => {
            let (off, len) = (e.data_offset, e.data_length);
            let end = off
                .checked_add(len)
                .filter(|&end| off >= d_end && end <= tstart);
            match end {
                Some(end) if len > 0 => off as usize..end as usize,
                // No data: nothing is ever read, wherever it points.
                _ if len == 0 && off >= d_end => d_off as usize..d_off as usize,
                _ => {
                    return Err(Error::invalid(
                        format!("index entry {i} (tensor {:?})", e.name),
                        fields.data_offset,
                        format!(
                            "data {off}+{len} is not inside bytes {d_end}..{tstart} (after the descriptor, before the trailer)"
                        ),
                    ));
                }
            }
        }
    };
    Ok(ListedMeta {
        name: e.name.clone(),
        desc,
        descriptor: d_off as usize..d_end as usize,
        data,
        sums: Default::default(),
    })
}

/// The rules of one tensor past its descriptor's decoding (`desc`, whose
/// encoded length is `own_len`: more than the codec's own when a shard
/// section was taken out of it, as for composite members): the index
/// entry's lengths, buffer sizes and placement, padding and the O(1)
/// content checks. `d_off` is checked by the caller.
#[allow(clippy::too_many_arguments)]
pub(super) fn check_decoded(
    bytes: &[u8],
    e: &IndexEntry,
    i: usize,
    fields: EntryFields,
    tstart: u64,
    align: u64,
    opts: ReadOptions,
    desc: Desc,
    own_len: u64,
) -> Result<TensorMeta> {
    check_own_length(e, i, fields, own_len)?;
    let d_off = e.descriptor_offset;
    let placed = place(
        bytes,
        e,
        i,
        fields,
        tstart,
        align,
        opts,
        &declared(&desc, d_off),
        own_len,
    )?;
    let range = |k: usize| {
        placed
            .get(k)
            .cloned()
            .unwrap_or(d_off as usize..d_off as usize)
    };
    let (values, indices, pointers) = match &desc {
        // CSF: its leaf coordinates as the indices; the levels are read
        // from `buffers`.
        Desc::Csf(d) => (
            range(0),
            range(2 * d.rank()),
            d_off as usize..d_off as usize,
        ),
        _ => (range(0), range(1), range(2)),
    };
    let bools = if desc.dtype().is_bool() {
        Some(unpacked(bytes, &values, desc.nnz())?)
    } else {
        None
    };
    Ok(TensorMeta {
        name: e.name.clone(),
        descriptor: d_off as usize..(d_off + own_len) as usize,
        desc,
        values,
        indices,
        pointers,
        buffers: (0..placed.len()).map(range).collect(),
        sums: Default::default(),
        bools,
    })
}

/// The `nnz` bools of the bit-packed buffer at `values` (whose size was
/// checked), one byte each. The allocation is fallible: a damaged `nnz`
/// was held against the buffer's size already, so this is at most 8 bytes
/// per stored byte.
fn unpacked(bytes: &[u8], values: &Range<usize>, nnz: u64) -> Result<std::sync::Arc<[u8]>> {
    let n = usize::try_from(nnz).map_err(|_| Error::OutOfMemory {
        what: "the unpacked bools",
        bytes: nnz,
    })?;
    let mut out = Vec::new();
    out.try_reserve_exact(n).map_err(|_| Error::OutOfMemory {
        what: "the unpacked bools",
        bytes: nnz,
    })?;
    crate::element::unpack_bools(&bytes[values.clone()], n, &mut out);
    Ok(out.into())
}

/// Where the buffers `dd` declares lie, every rule about them checked:
/// sizes, placement (each at the first A-aligned offset after the
/// previous one), the index entry's `data_offset` and `data_length`, the
/// O(1) content checks and the padding. One range per buffer, an empty
/// one at the descriptor's (8-aligned) address so that typed empty views
/// work (none is ever read).
#[allow(clippy::too_many_arguments)]
fn place(
    bytes: &[u8],
    e: &IndexEntry,
    i: usize,
    fields: EntryFields,
    tstart: u64,
    align: u64,
    opts: ReadOptions,
    dd: &Declared<'_>,
    own_len: u64,
) -> Result<Vec<Range<usize>>> {
    let sec = format!("index entry {i} (tensor {:?})", e.name);
    let dsec = format!("descriptor of tensor {:?}", e.name);
    let d_off = e.descriptor_offset;
    let d_end = d_off + own_len; // decode succeeded within bytes[..tstart]
    for b in &dd.buffers {
        if !b.size_ok() {
            return Err(Error::invalid(
                dsec,
                b.field,
                format!(
                    "{} byte_size {} is not {} ({})",
                    b.what,
                    b.handle.byte_size,
                    b.how,
                    b.want.map_or("overflow".to_string(), |v| v.to_string())
                ),
            ));
        }
    }
    // Buffer k+1 starts at the first A-aligned offset after buffer k; the
    // first one after the descriptor. Only a non-empty buffer needs to lie
    // inside the file: an empty tensor (COO with nnz = 0) has no buffer
    // bytes, so its data_offset may point past the written bytes (a writer
    // that pads only to 8 after the descriptor), and nothing is read there.
    let mut placed: Vec<Range<u64>> = Vec::with_capacity(dd.buffers.len());
    let mut end = d_end;
    for b in &dd.buffers {
        let outside = || {
            Error::invalid(
                dsec.clone(),
                b.field,
                format!(
                    "{} buffer does not end before the trailer at {tstart}",
                    b.what
                ),
            )
        };
        let off = align_up(end, align).ok_or_else(outside)?;
        if placed.is_empty() && e.data_offset != off {
            return Err(Error::invalid(
                sec,
                fields.data_offset,
                format!(
                    "data_offset {} is not the first {align}-aligned offset after the descriptor ({off})",
                    e.data_offset
                ),
            ));
        }
        let size = b.handle.byte_size;
        let b_end = off.checked_add(size).ok_or_else(outside)?;
        if size > 0 && b_end > tstart {
            return Err(Error::invalid(
                dsec,
                b.field,
                format!(
                    "{} buffer {off}..{b_end} does not end before the trailer at {tstart}",
                    b.what
                ),
            ));
        }
        if size > 0 && off % b.handle.alignment as u64 != 0 {
            return Err(Error::invalid(
                dsec,
                b.field + 8,
                format!(
                    "{} buffer at {off} is not aligned to the {} bytes its handle claims",
                    b.what, b.handle.alignment
                ),
            ));
        }
        placed.push(off..b_end);
        end = b_end;
    }
    let v_off = placed.first().map_or(d_end, |r| r.start);
    let last = dd.buffers.last().map_or("descriptor", |b| b.what);
    if e.data_length != end - v_off {
        return Err(Error::invalid(
            sec,
            fields.data_length,
            format!(
                "data_length {} is not end of {last} - data_offset ({})",
                e.data_length,
                end - v_off
            ),
        ));
    }
    let elements = shape_product(dd.shape);
    if !opts.permissive && dd.nnz as u128 > elements {
        return Err(Error::invalid(
            dsec,
            dd.f_nnz,
            format!(
                "nnz {} exceeds the {elements} elements of shape {:?} (open with permissive to inspect)",
                dd.nnz, dd.shape
            ),
        ));
    }
    if let Some(st) = dd
        .statistics
        .filter(|s| s.computed_mask & SPARSITY_VALID != 0)
    {
        let want = expected_sparsity(dd.nnz, elements);
        if !opts.permissive && !close(st.sparsity_ratio, want, 1.0) {
            return Err(Error::invalid(
                dsec,
                dd.f_stats + 16,
                format!(
                    "statistics sparsity_ratio {} contradicts nnz {} and shape {:?} ({want}); open with permissive to inspect",
                    st.sparsity_ratio, dd.nnz, dd.shape
                ),
            ));
        }
    }
    // Non-empty buffers and the padding before each of them (at most A - 1
    // bytes per buffer are read).
    let used = placed
        .iter()
        .rposition(|r| !r.is_empty())
        .map_or(0, |k| k + 1);
    if !opts.permissive {
        let mut from = d_end;
        for (k, r) in placed[..used].iter().enumerate() {
            let pad = &bytes[from as usize..r.start as usize];
            if let Some(j) = pad.iter().position(|&b| b != 0) {
                let what = match k {
                    0 => "padding between descriptor and values".to_string(),
                    _ => format!(
                        "padding between {} and {}",
                        dd.buffers[k - 1].what,
                        dd.buffers[k].what
                    ),
                };
                return Err(Error::invalid(
                    dsec,
                    from + j as u64,
                    format!(
                        "{what} must be 0x00, found 0x{:02x} (open with permissive to inspect)",
                        pad[j]
                    ),
                ));
            }
            from = r.end;
        }
    }
    Ok(placed
        .iter()
        .map(|r| match r.is_empty() {
            false => r.start as usize..r.end as usize,
            true => d_off as usize..d_off as usize,
        })
        .collect())
}

/// 1 - nnz / product(shape) (0 for an empty shape).
fn expected_sparsity(nnz: u64, total: u128) -> f64 {
    if total == 0 {
        0.0
    } else {
        1.0 - nnz as f64 / total as f64
    }
}
