// Without the `spy` feature only `spy` itself (which refuses) is compiled in use.
#![cfg_attr(not(feature = "spy"), allow(unused_imports, dead_code))]
//! A picture of the sparsity pattern: a grayscale PNG where each pixel's
//! shade is the number of stored entries in its block of the matrix (log
//! scale: light gray for one entry, black for the fullest block, white for
//! none), framed, with the shape and nnz in a caption line below.
//!
//! One streamed pass over the indices, any layout (COO, CSR, CSC); memory
//! is the count grid (at most `size * size` cells of 4 bytes) and the image.

use super::entries::Coords;
use super::error::{MatrixError, MatrixResult};
use super::font;
use super::output::Output;
use super::paging::{Paging, for_each_block};
use super::view::{Matrix, fixed_blocks, pick};
use crate::HurrayFile;
use std::path::Path;

/// Largest picture side accepted.
pub const MAX_SIZE: u32 = 8192;

/// Options of [`spy`].
#[derive(Clone, Copy, Debug)]
pub struct SpyOptions {
    /// Pixels of the longer side of the plot (default 1024). A matrix with
    /// fewer rows and columns than that is enlarged by a whole factor.
    pub size: u32,
    /// Page handling of a mapped file.
    pub paging: Paging,
}

impl Default for SpyOptions {
    fn default() -> Self {
        SpyOptions {
            size: 1024,
            paging: Paging::Auto,
        }
    }
}

/// Where things are in the picture [`spy`] wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpySummary {
    /// Image width and height in pixels.
    pub width: u32,
    /// Image height (plot, frame and caption).
    pub height: u32,
    /// Top-left pixel of the plot (inside a one-pixel frame).
    pub origin: (u32, u32),
    /// Plot width and height in pixels.
    pub plot: (u32, u32),
    /// Matrix rows (and columns) per block: entry (i, j) counts in block
    /// (i / per_block, j / per_block).
    pub per_block: u64,
    /// Pixels per block side (more than 1 when a small matrix is enlarged).
    pub zoom: u32,
    /// Entries in the fullest block.
    pub max_count: u32,
    /// The caption.
    pub caption: String,
    /// Bytes of the PNG file.
    pub bytes: u64,
}

/// Shade of a block holding `c` entries when the fullest holds `max`.
pub fn shade(c: u32, max: u32) -> u8 {
    if c == 0 {
        255
    } else if max <= 1 {
        0
    } else {
        let level = (c as f64).ln() / (max as f64).ln();
        (200.0 - 200.0 * level).round().clamp(0.0, 200.0) as u8
    }
}

/// Draw the tensor `name` of `file` (rank 2, or higher with the dimensions
/// after the first two summed) into the PNG `out`, written atomically. An
/// `out` that names `file` itself (through links too) is
/// [`crate::Error::OutputIsInput`], before anything is written.
pub fn spy(
    file: &HurrayFile,
    name: Option<&str>,
    out: &Path,
    opts: &SpyOptions,
) -> MatrixResult<SpySummary> {
    #[cfg(feature = "spy")]
    return draw(file, name, out, opts);
    #[cfg(not(feature = "spy"))]
    {
        let _ = (file, name, out, opts);
        Err(MatrixError::Options(
            "this build of coo-assembler draws no pictures: the `spy` feature (on by default, \
             it adds the PNG encoder) is off"
                .into(),
        ))
    }
}

/// [`spy`]'s work.
#[cfg(feature = "spy")]
fn draw(
    file: &HurrayFile,
    name: Option<&str>,
    out: &Path,
    opts: &SpyOptions,
) -> MatrixResult<SpySummary> {
    if !(16..=MAX_SIZE).contains(&opts.size) {
        return Err(MatrixError::Options(format!(
            "picture size {} must be in 16..={MAX_SIZE}",
            opts.size
        )));
    }
    let t = pick(file, name)?;
    let a = Matrix::with_rank(t, "spy", 2, 64)?.in_file(file);
    // Refused here, before the pass, when `out` is the file itself.
    let mut o = Output::create(out, a.source().as_slice())?;
    t.check_checksums()?;
    let (m, n) = (a.rows(), a.cols());
    let size = opts.size as u64;
    let longest = m.max(n).max(1);
    let (per_block, zoom) = if longest >= size {
        (longest.div_ceil(size), 1u64)
    } else {
        (1, size / longest)
    };
    let (gw, gh) = (n.div_ceil(per_block).max(1), m.div_ceil(per_block).max(1));
    let (gw, gh) = (gw as usize, gh as usize);
    let mut grid = vec![0u32; gw * gh];
    let r = t.rank();
    let coords = Coords::of(&a)?;
    let nnz = t.nnz() as usize;
    for_each_block(&a, &fixed_blocks(nnz, 1 << 16), opts.paging, |range| {
        coords.each(range, |p, i, j| {
            if i >= m || j >= n {
                return Err(a.corrupt(p, format_args!("coordinate ({i}, {j}) is out of range")));
            }
            let cell = &mut grid[(i / per_block) as usize * gw + (j / per_block) as usize];
            *cell = cell.saturating_add(1);
            Ok(())
        })
    })?;
    let max_count = grid.iter().copied().max().unwrap_or(0);

    let shape = t
        .shape()
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(" x ");
    let caption = if r > 2 {
        format!("{shape}, nnz {nnz} (dims 3+ summed)")
    } else {
        format!("{shape}, nnz {nnz}")
    };
    let z = zoom as usize;
    let (pw, ph) = (gw * z, gh * z);
    let font_scale = if pw >= 400 { 2 } else { 1 };
    let pad = 4 * font_scale;
    let cap_h = font::HEIGHT * font_scale + 2 * pad;
    let width = (pw + 2).max(font::text_width(&caption, font_scale) + 2 * pad);
    let height = ph + 2 + cap_h;
    let mut img = vec![255u8; width * height];
    // Frame: one gray pixel around the plot.
    let frame = 160u8;
    for x in 0..pw + 2 {
        img[x] = frame;
        img[(ph + 1) * width + x] = frame;
    }
    for y in 0..ph + 2 {
        img[y * width] = frame;
        img[y * width + pw + 1] = frame;
    }
    for by in 0..gh {
        for bx in 0..gw {
            let s = shade(grid[by * gw + bx], max_count);
            if s == 255 {
                continue;
            }
            for dy in 0..z {
                let row = (1 + by * z + dy) * width + 1 + bx * z;
                img[row..row + z].fill(s);
            }
        }
    }
    font::draw(&mut img, width, pad, ph + 2 + pad, &caption, font_scale, 0);
    let png = encode_png(&img, width as u32, height as u32)?;
    o.write(&png)?;
    let bytes = o.commit()?;
    Ok(SpySummary {
        width: width as u32,
        height: height as u32,
        origin: (1, 1),
        plot: (pw as u32, ph as u32),
        per_block,
        zoom: zoom as u32,
        max_count,
        caption,
        bytes,
    })
}

#[cfg(feature = "spy")]
fn encode_png(img: &[u8], width: u32, height: u32) -> MatrixResult<Vec<u8>> {
    let mut png = Vec::new();
    let err = |e: png::EncodingError| MatrixError::Options(format!("PNG encoding failed: {e}"));
    let mut enc = png::Encoder::new(&mut png, width, height);
    enc.set_color(png::ColorType::Grayscale);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header().map_err(err)?;
    w.write_image_data(img).map_err(err)?;
    w.finish().map_err(err)?;
    Ok(png)
}
