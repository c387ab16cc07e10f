//! Vectors in files: NumPy `.npy` (any 1-D little-endian float or integer
//! array in, float64 out) and raw little-endian f64 (`.f64`).

use super::error::{MatrixError, MatrixResult};
use super::output::Output;
use super::view::Matrix;
use crate::fs::output::FileId;
use crate::IoCtx;
use std::path::Path;

const MAGIC: &[u8; 6] = b"\x93NUMPY";

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

/// The value of `'key':` in a `.npy` header dict, up to the next `,` at
/// depth 0 or the closing brace.
fn dict_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let k = header
        .find(&format!("'{key}'"))
        .or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = header[k + key.len() + 2..]
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(rest[..i].trim()),
            _ => {}
        }
    }
    None
}

/// Parse a `.npy` file's bytes as a 1-D vector, converted to f64.
pub fn parse_npy(bytes: &[u8], path: &Path) -> MatrixResult<Vec<f64>> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        return Err(bad(path, "not a NumPy .npy file (bad magic)"));
    }
    let (hlen, start) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(path, format!(".npy version {v} is not supported"))),
    };
    let Some(h) = bytes.get(start..start + hlen) else {
        return Err(bad(path, "header runs past the end of the file"));
    };
    let header = std::str::from_utf8(h).map_err(|_| bad(path, "header is not text"))?;
    let descr = dict_value(header, "descr")
        .map(|d| d.trim_matches(|c| c == '\'' || c == '"'))
        .ok_or_else(|| bad(path, "header has no 'descr'"))?;
    let shape = dict_value(header, "shape").ok_or_else(|| bad(path, "header has no 'shape'"))?;
    let dims: Vec<&str> = shape
        .trim_start_matches('(')
        .trim_end_matches(')')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let n: usize = match dims.as_slice() {
        [d] => d
            .parse()
            .map_err(|_| bad(path, format!("shape {shape} is not a length")))?,
        _ => return Err(bad(path, format!("shape {shape}: a vector must be 1-D"))),
    };
    let data = &bytes[start + hlen..];
    let conv: (usize, fn(&[u8]) -> f64) = match descr {
        "<f8" => (8, |b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
        "<f4" => (4, |b| {
            f32::from_le_bytes(b.try_into().unwrap_or([0; 4])) as f64
        }),
        "<i8" => (8, |b| {
            i64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as f64
        }),
        "<u8" => (8, |b| {
            u64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as f64
        }),
        "<i4" => (4, |b| {
            i32::from_le_bytes(b.try_into().unwrap_or([0; 4])) as f64
        }),
        "<u4" => (4, |b| {
            u32::from_le_bytes(b.try_into().unwrap_or([0; 4])) as f64
        }),
        "<i2" => (2, |b| {
            i16::from_le_bytes(b.try_into().unwrap_or([0; 2])) as f64
        }),
        "<u2" => (2, |b| {
            u16::from_le_bytes(b.try_into().unwrap_or([0; 2])) as f64
        }),
        "|i1" => (1, |b| b[0] as i8 as f64),
        "|u1" => (1, |b| b[0] as f64),
        other => {
            return Err(bad(
                path,
                format!(
                "dtype {other:?} is not supported (use float64, float32 or little-endian integers)"
            ),
            ))
        }
    };
    let need = n
        .checked_mul(conv.0)
        .ok_or_else(|| bad(path, format!("length {n} is too large")))?;
    if data.len() < need {
        return Err(bad(
            path,
            format!(
                "holds {} data bytes; shape ({n},) of {descr} needs {need}",
                data.len()
            ),
        ));
    }
    Ok(data[..need].chunks_exact(conv.0).map(conv.1).collect())
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
        let values = if raw {
            parse_f64(&bytes, path)
        } else {
            parse_npy(&bytes, path)
        }?;
        Ok(VectorFile {
            values,
            id: FileId::of(&meta, path),
        })
    }

    /// Read a vector from a rank-1 dense tensor (row-major or
    /// column-major, any element type, widened to f64) of the Hurray file
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
        if d.dtype().is_complex() {
            return Err(bad(
                path,
                format!("tensor {name:?} holds {} values: x is real", d.dtype()),
            ));
        }
        let values = d.to_f64()?;
        let id = f.file_id().cloned().ok_or_else(|| {
            bad(
                path,
                "the file has no identity (it was not opened from a path)",
            )
        })?;
        Ok(VectorFile { values, id })
    }

    /// The values.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// The values, taken out.
    pub fn into_values(self) -> Vec<f64> {
        self.values
    }
}

/// Read a vector from `.npy` or `.f64` (by extension).
pub fn read_vector(path: impl AsRef<Path>) -> MatrixResult<Vec<f64>> {
    Ok(VectorFile::read(path)?.into_values())
}

/// Write `v` as float64 `.npy` or raw `.f64` (by extension), atomically.
pub fn write_vector(path: impl AsRef<Path>, v: &[f64]) -> MatrixResult<u64> {
    write(path.as_ref(), v, &[])
}

/// Write `y`, the product of `a` and `x`, as [`write_vector`] does; a
/// `path` that names the matrix's file or `x`'s (through links too) is
/// [`crate::Error::OutputIsInput`], and nothing is written.
pub fn write_product(
    path: impl AsRef<Path>,
    y: &[f64],
    a: &Matrix<'_>,
    x: &VectorFile,
) -> MatrixResult<u64> {
    let mut inputs = vec![&x.id];
    inputs.extend(a.source());
    write(path.as_ref(), y, &inputs)
}

/// `v` to `path`, which may not name one of `inputs` (whatever its
/// extension: checked first).
fn write(path: &Path, v: &[f64], inputs: &[&FileId]) -> MatrixResult<u64> {
    let mut out = Output::create(path, inputs)?;
    let raw = is_raw(path)?;
    if !raw {
        out.write(&npy_header("<f8", &[v.len() as u64]))?;
    }
    for chunk in v.chunks(1 << 16) {
        let buf = out.buffer();
        for x in chunk {
            buf.extend_from_slice(&x.to_le_bytes());
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
        assert!(parse_npy(&b, p)
            .unwrap_err()
            .to_string()
            .contains("not supported"));
        let mut b = npy_header("<f8", &[4]);
        b.extend([0u8; 8]);
        assert!(parse_npy(&b, p)
            .unwrap_err()
            .to_string()
            .contains("needs 32"));
        let mut b = npy_header("<f8", &[2, 2]);
        b.extend([0u8; 32]);
        assert!(parse_npy(&b, p).unwrap_err().to_string().contains("1-D"));
        assert!(parse_f64(&[0u8; 9], p).is_err());
        assert!(read_vector("x.txt")
            .unwrap_err()
            .to_string()
            .contains(".npy"));
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
    }
}
