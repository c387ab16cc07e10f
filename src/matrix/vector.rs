//! Vectors in files: NumPy `.npy` (any 1-D array in, read by the input
//! module's `.npy` reader: bool, integer, float or complex, either byte
//! order; float64 or complex128 out) and raw little-endian f64 (`.f64`).

use super::error::{MatrixError, MatrixResult};
use super::output::Output;
use super::view::Matrix;
use crate::fs::output::FileId;
use crate::input::common::Parsed;
use crate::input::npy::{self, NPY_MAGIC as MAGIC, NpyKind};
use crate::{Value, element::Complex, options::IoCtx};
use std::path::Path;

/// The `.npy` header (version 1.0, or 2.0 when longer than 64 KiB) for an
/// array of `descr` (NumPy type string such as `<f8`) and `shape`, padded
/// so the data starts at a multiple of 64 bytes.
pub fn npy_header(descr: &str, shape: &[u64]) -> Vec<u8> {
    let dims = match shape {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {dims}, }}");
    let (v1, prefix) = if dict.len() + 1 + 10 <= 65535 {
        (true, 10)
    } else {
        (false, 12)
    };
    let total = (prefix + dict.len() + 1).div_ceil(64) * 64;
    let hlen = total - prefix;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    if v1 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(hlen as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(hlen as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    out
}

fn bad(path: &Path, detail: impl Into<String>) -> MatrixError {
    MatrixError::VectorFile {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

/// Parse a `.npy` file's bytes as a 1-D real vector, converted to f64; a
/// complex array is refused (read it with [`VectorFile`]).
pub fn parse_npy(bytes: &[u8], path: &Path) -> MatrixResult<Vec<f64>> {
    let (re, im) = parse_npy_parts(bytes, path)?;
    match im {
        None => Ok(re),
        Some(_) => Err(bad(path, "holds complex values: x is real here")),
    }
}

/// A 1-D `.npy` array's real parts, and its imaginary parts when it is
/// complex. The reader is the input module's (one `.npy` grammar in the
/// crate); the vector is allocated fallibly from the header's length.
fn parse_npy_parts(bytes: &[u8], path: &Path) -> MatrixResult<(Vec<f64>, Option<Vec<f64>>)> {
    let source = path.display().to_string();
    let mut r = bytes;
    let h = npy::read_npy_header(&mut r, &source)?;
    let n = match h.shape.as_slice() {
        [n] => *n,
        s => return Err(bad(path, format!("shape {s:?}: a vector must be 1-D"))),
    };
    let need = n.saturating_mul(h.width as u64);
    if (r.len() as u64) < need {
        return Err(bad(
            path,
            format!(
                "holds {} data bytes; shape ({n},) of {} needs {need}",
                r.len(),
                h.dtype()
            ),
        ));
    }
    let mut re = super::memory::try_filled(n, 0.0, "a vector read from .npy")?;
    let mut im = match h.kind {
        NpyKind::Complex => Some(super::memory::try_filled(
            n,
            0.0,
            "a vector read from .npy",
        )?),
        _ => None,
    };
    npy::parse_npy(r, &h, &source, &mut |_| {}, true, &mut |e| {
        // In range: the reader counts indices within the header's shape.
        let k = e.idx[0] as usize;
        re[k] = match e.v {
            Parsed::F(f) => f,
            Parsed::I(i) => i as f64,
            Parsed::U(u) => u as f64,
            Parsed::C(a, b) => {
                if let Some(im) = im.as_mut() {
                    im[k] = b;
                }
                a
            }
        };
        Ok(())
    })?;
    Ok((re, im))
}

/// Raw little-endian f64 bytes as a vector.
pub fn parse_f64(bytes: &[u8], path: &Path) -> MatrixResult<Vec<f64>> {
    if bytes.len() % 8 != 0 {
        return Err(bad(
            path,
            format!(
                "{} bytes is not a whole number of little-endian f64",
                bytes.len()
            ),
        ));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
        .collect())
}

fn is_raw(path: &Path) -> MatrixResult<bool> {
    match path.extension().and_then(|e| e.to_str()) {
        Some(e) if e.eq_ignore_ascii_case("npy") => Ok(false),
        Some(e) if e.eq_ignore_ascii_case("f64") => Ok(true),
        _ => Err(bad(
            path,
            "unknown vector format: name it .npy (NumPy) or .f64 (raw little-endian f64)",
        )),
    }
}

/// A vector read from a file, with the file it came from: an output of
/// an operation on it may not replace that file ([`write_product`]).
#[derive(Clone, Debug)]
pub struct VectorFile {
    values: Vec<f64>,
    /// The imaginary parts of a complex vector.
    imag: Option<Vec<f64>>,
    id: FileId,
}

impl VectorFile {
    /// Read a vector from `.npy` or `.f64` (by extension).
    pub fn read(path: impl AsRef<Path>) -> MatrixResult<VectorFile> {
        let path = path.as_ref();
        let raw = is_raw(path)?;
        let io = IoCtx::new();
        let f = io.open(path)?;
        let meta = io.file_metadata(&f, path)?;
        let len = usize::try_from(meta.len())
            .map_err(|_| MatrixError::TooLarge { extent: meta.len() })?;
        let mut bytes = vec![0u8; len];
        io.read_exact_at(&f, &mut bytes, 0, path)?;
        let (values, imag) = if raw {
            (parse_f64(&bytes, path)?, None)
        } else {
            parse_npy_parts(&bytes, path)?
        };
        Ok(VectorFile {
            values,
            imag,
            id: FileId::of(&meta, path),
        })
    }

    /// Read a vector from a rank-1 dense tensor (row-major or
    /// column-major, any element type, widened to f64 or complex128) of the Hurray file
    /// `path`: the tensor `tensor`, or the file's only one. A tensor of
    /// another rank or layout is an error naming it.
    pub fn from_hurray(path: impl AsRef<Path>, tensor: Option<&str>) -> MatrixResult<VectorFile> {
        let path = path.as_ref();
        let f = crate::HurrayFile::open(path)?;
        let name = match tensor {
            Some(n) => n.to_string(),
            None => f.only_tensor_info()?.name().to_string(),
        };
        let d = f
            .dense(&name)
            .map_err(|e| e.for_op("a vector read from a Hurray file"))?;
        if d.shape().len() != 1 {
            return Err(bad(
                path,
                format!(
                    "tensor {name:?} has shape {:?}: a vector is a rank-1 tensor",
                    d.shape()
                ),
            ));
        }
        let values = d.to_f64()?;
        let imag = if d.dtype().is_complex() {
            // to_f64 checked the stored checksum.
            let w = d.dtype().width();
            let mut im = super::memory::try_with_capacity(
                values.len() as u64,
                "the imaginary parts of a vector",
            )?;
            im.extend(
                d.values_bytes()
                    .chunks_exact(w)
                    .map(|b| match d.dtype().decode(b) {
                        Value::Complex(_, im) => im,
                        _ => 0.0,
                    }),
            );
            Some(im)
        } else {
            None
        };
        let id = f.file_id().cloned().ok_or_else(|| {
            bad(
                path,
                "the file has no identity (it was not opened from a path)",
            )
        })?;
        Ok(VectorFile { values, imag, id })
    }

    /// The values (their real parts, for a complex vector).
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Whether the vector is complex (its file held complex values).
    pub fn is_complex(&self) -> bool {
        self.imag.is_some()
    }

    /// The values as complex numbers (imaginary parts 0 for a real vector).
    pub fn complex_values(&self) -> MatrixResult<Vec<Complex<f64>>> {
        let mut out =
            super::memory::try_map(&self.values, "a complex vector", |r| Complex::new(*r, 0.0))?;
        if let Some(im) = &self.imag {
            for (o, i) in out.iter_mut().zip(im) {
                o.im = *i;
            }
        }
        Ok(out)
    }

    /// The values (real parts), taken out.
    pub fn into_values(self) -> Vec<f64> {
        self.values
    }
}

/// Read a real vector from `.npy` or `.f64` (by extension); a complex one
/// is refused (read it with [`VectorFile::read`]).
pub fn read_vector(path: impl AsRef<Path>) -> MatrixResult<Vec<f64>> {
    let path = path.as_ref();
    let v = VectorFile::read(path)?;
    if v.is_complex() {
        return Err(bad(path, "holds complex values: x is real here"));
    }
    Ok(v.into_values())
}

/// Write `v` as float64 `.npy` or raw `.f64` (by extension), atomically.
pub fn write_vector(path: impl AsRef<Path>, v: &[f64]) -> MatrixResult<u64> {
    write(path.as_ref(), v, &[])
}

/// Write `y`, the product of `a` and `x`, as [`write_vector`] does (a
/// complex `y` as complex128 `.npy`: a raw `.f64` file cannot hold it); a
/// `path` that names the matrix's file or `x`'s (through links too) is
/// [`crate::Error::OutputIsInput`], and nothing is written.
pub fn write_product<T: VectorElement>(
    path: impl AsRef<Path>,
    y: &[T],
    a: &Matrix<'_>,
    x: &VectorFile,
) -> MatrixResult<u64> {
    write(path.as_ref(), y, &product_inputs(a, x))
}

/// Every check of [`write_product`]'s `path` that can be made before the
/// product is computed, so that a refused output costs nothing, in
/// [`write_product`]'s order (the same refusal either way): it is a file
/// this process may write that names neither the matrix's file nor `x`'s,
/// then its format can hold y (`complex`: a complex y needs `.npy`).
pub fn check_product_output(
    path: impl AsRef<Path>,
    complex: bool,
    a: &Matrix<'_>,
    x: &VectorFile,
) -> MatrixResult<()> {
    let path = path.as_ref();
    crate::fs::output::check_target(&IoCtx::new(), path, &product_inputs(a, x))?;
    check_holds(path, complex)?;
    Ok(())
}

fn product_inputs<'a>(a: &'a Matrix<'_>, x: &'a VectorFile) -> Vec<&'a FileId> {
    let mut inputs = vec![&x.id];
    inputs.extend(a.source());
    inputs
}

/// Whether `path` names a raw `.f64` file (else `.npy`), refusing a raw
/// file for `complex` values.
fn check_holds(path: &Path, complex: bool) -> MatrixResult<bool> {
    let raw = is_raw(path)?;
    if raw && complex {
        return Err(bad(
            path,
            "y is complex: name it .npy (complex128); a .f64 file holds real values only",
        ));
    }
    Ok(raw)
}

/// An element of a vector written to a file: f64 or complex128.
pub trait VectorElement: Copy {
    /// The `.npy` type string.
    const DESCR: &'static str;
    /// Whether a raw `.f64` file holds it.
    const RAW: bool;
    /// Append its little-endian bytes.
    fn put(self, buf: &mut Vec<u8>);
}

impl VectorElement for f64 {
    const DESCR: &'static str = "<f8";
    const RAW: bool = true;
    fn put(self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&self.to_le_bytes());
    }
}

impl VectorElement for Complex<f64> {
    const DESCR: &'static str = "<c16";
    const RAW: bool = false;
    fn put(self, buf: &mut Vec<u8>) {
        buf.extend_from_slice(&self.re.to_le_bytes());
        buf.extend_from_slice(&self.im.to_le_bytes());
    }
}

/// `v` to `path`, which may not name one of `inputs` (whatever its
/// extension: checked first).
fn write<T: VectorElement>(path: &Path, v: &[T], inputs: &[&FileId]) -> MatrixResult<u64> {
    let mut out = Output::create(path, inputs)?;
    let raw = check_holds(path, !T::RAW)?;
    if !raw {
        out.write(&npy_header(T::DESCR, &[v.len() as u64]))?;
    }
    for chunk in v.chunks(1 << 16) {
        let buf = out.buffer();
        for x in chunk {
            x.put(buf);
        }
        out.maybe_flush()?;
    }
    Ok(out.commit()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_64_aligned_and_parses_back() {
        for n in [0u64, 3, 123456789] {
            let h = npy_header("<f8", &[n]);
            assert_eq!(h.len() % 64, 0);
            let mut bytes = h.clone();
            bytes.extend(std::iter::repeat_n(0u8, (n.min(10) * 8) as usize));
            if n <= 10 {
                let v = parse_npy(&bytes, Path::new("t.npy")).unwrap();
                assert_eq!(v.len() as u64, n);
            }
        }
        let h = String::from_utf8_lossy(&npy_header("<i4", &[2, 3])).into_owned();
        assert!(h.contains("'shape': (2, 3)"), "{h}");
    }

    #[test]
    fn refuses_bad_files() {
        let p = Path::new("x.npy");
        assert!(parse_npy(b"hello world", p).is_err());
        let mut b = npy_header("<c16", &[1]);
        b.extend([0u8; 16]);
        assert!(
            parse_npy(&b, p)
                .unwrap_err()
                .to_string()
                .contains("complex")
        );
        let mut b = npy_header("<V8", &[1]);
        b.extend([0u8; 8]);
        assert!(parse_npy(&b, p).is_err());
        let mut b = npy_header("<f8", &[4]);
        b.extend([0u8; 8]);
        assert!(
            parse_npy(&b, p)
                .unwrap_err()
                .to_string()
                .contains("needs 32")
        );
        let mut b = npy_header("<f8", &[2, 2]);
        b.extend([0u8; 32]);
        assert!(parse_npy(&b, p).unwrap_err().to_string().contains("1-D"));
        assert!(parse_f64(&[0u8; 9], p).is_err());
        assert!(
            read_vector("x.txt")
                .unwrap_err()
                .to_string()
                .contains(".npy")
        );
    }

    #[test]
    fn converts_integer_and_f32_vectors() {
        let mut b = npy_header("<i4", &[2]);
        b.extend((-7i32).to_le_bytes());
        b.extend(9i32.to_le_bytes());
        assert_eq!(parse_npy(&b, Path::new("a.npy")).unwrap(), [-7.0, 9.0]);
        let mut b = npy_header("<f4", &[1]);
        b.extend(1.5f32.to_le_bytes());
        assert_eq!(parse_npy(&b, Path::new("a.npy")).unwrap(), [1.5]);
        let mut b = npy_header(">f8", &[2]);
        b.extend(2.5f64.to_be_bytes());
        b.extend((-1.0f64).to_be_bytes());
        assert_eq!(parse_npy(&b, Path::new("a.npy")).unwrap(), [2.5, -1.0]);
    }

    #[test]
    fn reads_complex_vectors_in_parts() {
        let mut b = npy_header("<c16", &[3]);
        for v in [1.5f64, -2.0, 0.0, 0.0, 0.0, 4.0] {
            b.extend(v.to_le_bytes());
        }
        let (re, im) = parse_npy_parts(&b, Path::new("z.npy")).unwrap();
        assert_eq!(re, [1.5, 0.0, 0.0]);
        assert_eq!(im, Some(vec![-2.0, 0.0, 4.0]));
        let mut b = npy_header("<c8", &[1]);
        b.extend(0.5f32.to_le_bytes());
        b.extend(0.25f32.to_le_bytes());
        let (re, im) = parse_npy_parts(&b, Path::new("z.npy")).unwrap();
        assert_eq!((re, im), (vec![0.5], Some(vec![0.25])));
    }
}
