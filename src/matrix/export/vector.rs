//! A rank-1 tensor written out as a dense vector, zeros where no entry is
//! stored: PETSc's binary `Vec` (what `VecLoad` and petsc4py's
//! `Vec().load` read: big-endian `[VEC_FILE_CLASSID, n]` as PetscInt, then
//! `n` PetscScalars: float64, or (real, imaginary) float64 pairs for a
//! complex tensor, as a complex PETSc build reads them) and NumPy `.npy` (the element type kept; `bfloat16`, which
//! NumPy lacks, widened exactly to `float32`).
//!
//! A sorted tensor streams in one pass, the gaps written as zeros. An
//! unsorted one is gathered a band of indices at a time into a dense
//! buffer of at most [`ExportOptions::reorder_budget`] bytes, one pass over
//! the entries per band. Either way a repeated or out-of-range index is an
//! invalid-file error (the content rules `verify` checks), never a
//! silently overwritten element.

use super::super::entries::Coords;
use super::super::error::MatrixResult;
use super::super::memory::try_filled;
use super::super::output::Output;
use super::super::view::Matrix;
use super::petsc::{scalar_bytes, scalar_width};
use super::reorder::DEFAULT_BUDGET;
use super::{ExportOptions, ExportSummary, pass};
use crate::DType;

/// PETSc's class id of a vector in a binary file.
pub const VEC_FILE_CLASSID: i64 = 1211214;

/// Zero bytes written per call when filling a gap.
static ZEROS: [u8; 1 << 16] = [0; 1 << 16];

/// `a` (rank 1) as a PETSc binary `Vec`.
pub(super) fn write_petsc(
    a: &Matrix<'_>,
    mut o: Output,
    opts: &ExportOptions,
) -> MatrixResult<ExportSummary> {
    let n = a.rows();
    let (limit, hint) = if opts.petsc_int64 {
        (
            i64::MAX as u64,
            "the vector is too long even for 64-bit PETSc indices",
        )
    } else {
        (
            i32::MAX as u64,
            "use 64-bit indices (--petsc-int64) with a PETSc built --with-64-bit-indices",
        )
    };
    if n > limit {
        return Err(super::MatrixError::IndexTooLarge {
            what: "length",
            value: n,
            hint,
        });
    }
    let mut head = Vec::with_capacity(16);
    for v in [VEC_FILE_CLASSID as u64, n] {
        if opts.petsc_int64 {
            head.extend_from_slice(&(v as i64).to_be_bytes());
        } else {
            head.extend_from_slice(&(v as i32).to_be_bytes());
        }
    }
    let dtype = a.dtype();
    let sw = scalar_width(dtype);
    o.check_space(
        (head.len() as u64).saturating_add(n.saturating_mul(sw as u64)),
        &format!("{n} PETSc scalars of {sw} bytes"),
    )?;
    o.write(&head)?;
    dense(a, &mut o, sw, opts, |raw, out| {
        out.copy_from_slice(&scalar_bytes(dtype.decode(raw))[..sw])
    })?;
    Ok(ExportSummary {
        entries: a.nnz(),
        bytes: o.commit()?,
    })
}

/// `a` (rank 1) as a NumPy `.npy` array of its element type.
pub(super) fn write_npy(
    a: &Matrix<'_>,
    mut o: Output,
    opts: &ExportOptions,
) -> MatrixResult<ExportSummary> {
    let n = a.rows();
    let dtype = a.dtype();
    let (descr, width) = npy_descr(dtype).ok_or_else(|| {
        super::MatrixError::Options(format!(
            "{dtype} has no NumPy .npy type; export it to mtx instead"
        ))
    })?;
    let head = super::super::vector::npy_header(&descr, &[n]);
    o.check_space(
        (head.len() as u64).saturating_add(n.saturating_mul(width as u64)),
        &format!("{n} {descr} values"),
    )?;
    o.write(&head)?;
    if dtype == DType::BF16 {
        // bfloat16 is the high half of a float32: shifting the bits up is exact.
        dense(a, &mut o, 4, opts, |raw, out| {
            let bits = (u16::from_le_bytes([raw[0], raw[1]]) as u32) << 16;
            out.copy_from_slice(&bits.to_le_bytes())
        })?;
    } else {
        // The stored bytes are little-endian, as the descr says.
        dense(a, &mut o, width, opts, |raw, out| out.copy_from_slice(raw))?;
    }
    Ok(ExportSummary {
        entries: a.nnz(),
        bytes: o.commit()?,
    })
}

/// NumPy's type string of `dtype` as written to `.npy`, with its width.
fn npy_descr(dtype: DType) -> Option<(String, usize)> {
    if dtype == DType::BF16 {
        return Some(("<f4".into(), 4));
    }
    let w = dtype.width();
    let name = dtype.numpy_name();
    let kind = if name.starts_with("float") {
        'f'
    } else if name.starts_with("uint") {
        'u'
    } else if name.starts_with("int") {
        'i'
    } else if name.starts_with("complex") {
        'c'
    } else {
        return None;
    };
    let order = if w == 1 { '|' } else { '<' };
    Some((format!("{order}{kind}{w}"), w))
}

/// The dense vector of `a`'s `n = rows` elements, `width` bytes each,
/// after what `o` holds: `put(stored bytes, out)` writes one stored
/// value; missing elements are zero bytes (0.0 or 0 in every form used).
fn dense(
    a: &Matrix<'_>,
    o: &mut Output,
    width: usize,
    opts: &ExportOptions,
    put: impl Fn(&[u8], &mut [u8]),
) -> MatrixResult<()> {
    let n = a.rows();
    let w = a.dtype().width();
    let vals = a.values_bytes();
    let coords = Coords::of(a)?;
    if a.is_row_sorted() {
        // `next`: the first element not yet written.
        let mut next = 0u64;
        pass(a, opts.paging, |r| {
            coords.each(r, |p, i, _| {
                if i >= n || i < next {
                    return Err(a.corrupt(
                        p,
                        format_args!("index {i} breaks the sorted order or the length {n}"),
                    ));
                }
                zeros(o, (i - next) * width as u64)?;
                let buf = o.buffer();
                let at = buf.len();
                buf.resize(at + width, 0);
                put(&vals[p * w..(p + 1) * w], &mut buf[at..]);
                next = i + 1;
                Ok(())
            })?;
            Ok(o.maybe_flush()?)
        })?;
        zeros(o, (n - next) * width as u64)?;
        return Ok(());
    }
    let budget = if opts.reorder_budget == 0 {
        DEFAULT_BUDGET
    } else {
        opts.reorder_budget
    };
    // Each element of a band costs its bytes and one bit of `seen`.
    let band = ((budget as u64).saturating_mul(8) / (8 * width as u64 + 1)).clamp(1, n.max(1));
    let mut buf = try_filled(band * width as u64, 0u8, "a band of the dense vector")?;
    let mut seen = try_filled(band.div_ceil(64), 0u64, "a band of the dense vector")?;
    let mut lo = 0u64;
    // At least one pass, so that entries of an empty vector are seen.
    loop {
        let hi = (lo + band).min(n);
        buf.fill(0);
        seen.fill(0);
        pass(a, opts.paging, |r| {
            coords.each(r, |p, i, _| {
                if i >= n {
                    return Err(a.corrupt(p, format_args!("index {i} is not below the length {n}")));
                }
                if (lo..hi).contains(&i) {
                    let k = (i - lo) as usize;
                    let (word, bit) = (k / 64, 1u64 << (k % 64));
                    if seen[word] & bit != 0 {
                        return Err(a.corrupt(p, format_args!("index {i} is stored twice")));
                    }
                    seen[word] |= bit;
                    put(
                        &vals[p * w..(p + 1) * w],
                        &mut buf[k * width..(k + 1) * width],
                    );
                }
                Ok(())
            })
        })?;
        o.write(&buf[..(hi - lo) as usize * width])?;
        if hi >= n {
            return Ok(());
        }
        lo = hi;
    }
}

/// `bytes` zero bytes appended to `o`.
fn zeros(o: &mut Output, mut bytes: u64) -> crate::Result<()> {
    while bytes > 0 {
        let k = bytes.min(ZEROS.len() as u64) as usize;
        o.write(&ZEROS[..k])?;
        bytes -= k as u64;
    }
    Ok(())
}
