//! Structural checks at open: header, trailer, index, KV section, every
//! index entry, descriptor and buffer placement (see the module docs of
//! [`crate::read`]). O(index + KV + descriptors), independent of `nnz`.

use super::{close, shape_product, too_short, ReadOptions, TensorMeta};
use crate::error::{Error, Result};
use crate::hurray::descriptor::descriptor_len;
use crate::hurray::header::{FLAG_HAS_INDEX_CRC32C, FLAG_HAS_KV_METADATA};
use crate::hurray::statistics::SPARSITY_VALID;
use crate::hurray::{
    align_up, index, kv, CooDescriptor, FileHeader, IndexEntry, KvValue, Trailer, HEADER_LEN,
    TRAILER_LEN,
};
use std::ops::Range;

pub(super) struct Parsed {
    pub(super) header: FileHeader,
    pub(super) trailer: Trailer,
    pub(super) kv: Vec<(String, KvValue)>,
    pub(super) tensors: Vec<TensorMeta>,
}

fn overlaps(a: &Range<u64>, b: &Range<u64>) -> bool {
    a.start < b.end && b.start < a.end && !a.is_empty() && !b.is_empty()
}

pub(super) fn parse(bytes: &[u8], opts: ReadOptions) -> Result<Parsed> {
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
        descriptor: d_off as usize..d_end as usize,
        desc,
        values,
        indices,
    })
}

/// 1 - nnz / product(shape) (0 for an empty shape).
fn expected_sparsity(nnz: u64, total: u128) -> f64 {
    if total == 0 {
        0.0
    } else {
        1.0 - nnz as f64 / total as f64
    }
}
