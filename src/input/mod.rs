//! Readers for contribution streams: raw binary records ([`push_bin`]),
//! whitespace text ([`push_text`]), MatrixMarket coordinate and array files
//! ([`push_mtx`]) and NumPy `.npy` arrays ([`push_npy`]). Each pushes into a
//! [`crate::Builder`] and names the record or line of any bad input, in the
//! input's own numbering. [`decompress`] reads gzip and zstd input
//! transparently. [`MappedInput`] parses a mapped binary file in place and
//! releases the parsed pages, so a large input does not count against the
//! memory budget.

mod bin;
mod chunks;
pub(crate) mod common;
mod compress;
mod lines;
mod mapped;
mod mtx;
pub(crate) mod npy;
mod number;
mod source;
mod text;

pub use bin::{bin_record_bytes, check_bin_length, push_bin, push_bin_bytes};
pub use common::{InputFormat, Progress};
pub use compress::{Compression, PeekReader, decompress, detect, peek};
pub use mapped::MappedInput;
pub use mtx::{MtxField, MtxHeader, MtxLayout, MtxSymmetry, push_mtx, read_mtx_header};
pub use npy::{NPY_MAGIC, NpyHeader, NpyKind, push_npy, read_npy_header};
pub use source::Source;
pub use text::push_text;

use crate::element::DType;
use crate::error::{Error, Result};
use std::io::{BufRead, ErrorKind};

/// The most locations [`locate`] returns.
const LOCATE_MAX: usize = 4;

/// Where in an input the entries at `coordinate` (0-based) come from:
/// "line N" (with "mirrored" for the mirror of a symmetric MatrixMarket
/// entry), "record N" or "element N"; at most four. Used to name the
/// lines behind a duplicate or an overflow found only when merging.
pub fn locate<R: BufRead>(
    mut r: R,
    format: InputFormat,
    rank: usize,
    dtype: DType,
    coordinate: &[u64],
    source: &str,
) -> Result<Vec<String>> {
    let mut found = Vec::new();
    let mut sink = |e: common::Entry<'_>| -> Result<()> {
        if e.idx == coordinate && found.len() < LOCATE_MAX {
            found.push(match (format, e.mirrored) {
                (InputFormat::Npy, _) => format!("element {}", e.at),
                (_, true) => format!("line {} (mirrored)", e.at),
                (_, false) => format!("line {}", e.at),
            });
        }
        Ok(())
    };
    // The text readers hand over a parsed block at a time.
    fn each<'s>(
        sink: &'s mut impl FnMut(common::Entry<'_>) -> Result<()>,
    ) -> impl FnMut(&chunks::Entries<'_>) -> Result<()> + 's {
        // Without a packer, every entry is unpacked.
        move |b| {
            (0..b.len())
                .filter_map(|k| b.get(k))
                .try_for_each(&mut *sink)
        }
    }
    match format {
        InputFormat::Text | InputFormat::Tns => {
            let input = chunks::Text::Reader(r);
            text::parse_text(
                input,
                rank,
                dtype,
                format.first_index(),
                source,
                1,
                None,
                &mut |_| {},
                &mut each(&mut sink),
            )?
        }
        InputFormat::Mtx => {
            let h = read_mtx_header(&mut r, source)?;
            let input = chunks::Text::Reader(r);
            mtx::parse_mtx(
                input,
                &h,
                dtype,
                source,
                1,
                None,
                &mut |_| {},
                &mut each(&mut sink),
            )?
        }
        InputFormat::Npy => {
            let h = read_npy_header(&mut r, source)?;
            npy::parse_npy(r, &h, source, &mut |_| {}, false, &mut sink)?
        }
        InputFormat::Bin => {
            let rec = bin::bin_record_bytes(rank, dtype);
            let mut buf = vec![0u8; rec];
            let mut n = 0u64;
            loop {
                match r.read_exact(&mut buf) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::UnexpectedEof => break,
                    Err(e) => return Err(Error::io("read", source, e)),
                }
                let hit = buf
                    .chunks_exact(8)
                    .take(rank)
                    .zip(coordinate)
                    .all(|(b, &c)| b == c.to_le_bytes());
                if hit && found.len() < LOCATE_MAX {
                    found.push(format!("record {n}"));
                }
                n += 1;
            }
        }
    }
    Ok(found)
}
