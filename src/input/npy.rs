//! NumPy `.npy` arrays (format versions 1 to 3): any rank, C or Fortran
//! order, bool, integer, float and complex elements of either byte order. The array
//! is dense; its non-zero elements are pushed. The header is parsed here
//! (it is a small Python dict literal) with a bounded length, and the data
//! is streamed, so a hostile header cannot make us allocate much.

use crate::assemble::builder::Builder;
use crate::element::{DType, Value};
use crate::error::{Error, Result};
use crate::input::common::Parsed;
use crate::input::common::{Entry, Progress, Sink, at, input_err};
use crate::input::text::push_parsed;
use std::io::{ErrorKind, Read};

/// The magic string that starts every `.npy` file.
pub const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// The longest header accepted (numpy writes a few hundred bytes).
const MAX_HEADER: usize = 1 << 20;

/// The kind of an `.npy` element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpyKind {
    /// `b1` / `?`.
    Bool,
    /// Signed integer.
    Int,
    /// Unsigned integer.
    UInt,
    /// IEEE float (2, 4 or 8 bytes).
    Float,
    /// Complex: two IEEE floats (8 or 16 bytes in all).
    Complex,
}

/// What the header of an `.npy` file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// Element kind.
    pub kind: NpyKind,
    /// Bytes per element.
    pub width: usize,
    /// Elements stored big-endian.
    pub big_endian: bool,
    /// Fortran (column-major) order; C (row-major) otherwise.
    pub fortran_order: bool,
    /// The array's shape.
    pub shape: Vec<u64>,
    /// Bytes before the data (magic, version, length and header).
    pub data_offset: u64,
}

impl NpyHeader {
    /// The element type that holds every value of this array exactly:
    /// the one whose NumPy code ([`DType::npy_code`]) the header names; a
    /// bool array is read as uint8 (ask for bool to get a bool tensor).
    pub fn dtype(&self) -> DType {
        let letter = match self.kind {
            NpyKind::Bool => return DType::U8,
            NpyKind::Int => 'i',
            NpyKind::UInt => 'u',
            NpyKind::Float => 'f',
            NpyKind::Complex => 'c',
        };
        let code = format!("{letter}{}", self.width);
        crate::element::ALL_DTYPES
            .into_iter()
            .find(|d| d.npy_code() == Some(code.as_str()))
            .unwrap_or(DType::F64)
    }

    /// Number of elements (the product of the shape), if it fits u64.
    pub fn elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }
}

fn read_exact<R: Read>(r: &mut R, buf: &mut [u8], source: &str, what: &str) -> Result<()> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        ErrorKind::UnexpectedEof => input_err(
            source,
            "header".into(),
            format!("the file ends inside the {what}"),
        ),
        _ => Error::io("read", source, e),
    })
}

/// Read the magic, version and header of an `.npy` file.
pub fn read_npy_header<R: Read>(r: &mut R, source: &str) -> Result<NpyHeader> {
    let bad = |m: String| input_err(source, "header".into(), m);
    let mut pre = [0u8; 8];
    read_exact(r, &mut pre, source, "magic string")?;
    if &pre[..6] != NPY_MAGIC {
        return Err(bad("not a NumPy .npy file (no \\x93NUMPY magic)".into()));
    }
    let (len, fixed) = match pre[6] {
        1 => {
            let mut l = [0u8; 2];
            read_exact(r, &mut l, source, "header length")?;
            (usize::from(u16::from_le_bytes(l)), 10u64)
        }
        2 | 3 => {
            let mut l = [0u8; 4];
            read_exact(r, &mut l, source, "header length")?;
            let n = u32::from_le_bytes(l);
            (usize::try_from(n).unwrap_or(usize::MAX), 12u64)
        }
        v => {
            return Err(bad(format!(
                "format version {v}.{} is not supported (1 to 3 are)",
                pre[7]
            )));
        }
    };
    if len > MAX_HEADER {
        return Err(bad(format!(
            "header of {len} bytes is longer than the {MAX_HEADER} accepted"
        )));
    }
    let mut text = vec![0u8; len];
    read_exact(r, &mut text, source, "header")?;
    let text = std::str::from_utf8(&text).map_err(|_| bad("header is not UTF-8".into()))?;
    let dict = parse_dict(text).map_err(|m| bad(format!("{m} in header {:?}", text.trim_end())))?;
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    for (k, v) in dict {
        match (k.as_str(), v) {
            ("descr", Py::Str(s)) => descr = Some(s),
            ("descr", _) => {
                return Err(bad(
                    "structured (record) arrays are not supported: only plain numeric dtypes"
                        .into(),
                ));
            }
            ("fortran_order", Py::Bool(b)) => fortran = Some(b),
            ("shape", Py::Tuple(t)) => shape = Some(t),
            (k, _) => return Err(bad(format!("unexpected header key or value for {k:?}"))),
        }
    }
    let (Some(descr), Some(fortran_order), Some(shape)) = (descr, fortran, shape) else {
        return Err(bad(
            "the header must give 'descr', 'fortran_order' and 'shape'".into(),
        ));
    };
    let (kind, width, big_endian) = parse_descr(&descr).map_err(bad)?;
    if shape.is_empty() {
        return Err(bad(
            "a 0-d array (a scalar) has no tensor shape; give it at least one dimension".into(),
        ));
    }
    if let Some(d) = shape.iter().position(|&e| e == u64::MAX) {
        return Err(bad(format!(
            "dimension {d} is more than a Hurray shape can hold"
        )));
    }
    let h = NpyHeader {
        kind,
        width,
        big_endian,
        fortran_order,
        shape,
        data_offset: fixed + len as u64,
    };
    if h.elements()
        .and_then(|n| n.checked_mul(width as u64))
        .is_none()
    {
        return Err(bad(format!(
            "shape {:?} holds more bytes than a file can",
            h.shape
        )));
    }
    Ok(h)
}

fn parse_descr(d: &str) -> std::result::Result<(NpyKind, usize, bool), String> {
    let (order, rest) = match d.as_bytes().first() {
        Some(b'<') | Some(b'=') => (false, &d[1..]),
        Some(b'|') => (false, &d[1..]),
        Some(b'>') => (true, &d[1..]),
        _ => (false, d),
    };
    if rest == "?" {
        return Ok((NpyKind::Bool, 1, false));
    }
    let (code, size) = rest.split_at(rest.len().min(1));
    let width: usize = size
        .parse()
        .map_err(|_| format!("dtype {d:?} is not supported"))?;
    let kind = match code {
        "b" => NpyKind::Bool,
        "i" => NpyKind::Int,
        "u" => NpyKind::UInt,
        "f" => NpyKind::Float,
        "c" => NpyKind::Complex,
        _ => NpyKind::Bool,
    };
    // The types read are the element types NumPy has a code for.
    let known = crate::element::ALL_DTYPES
        .into_iter()
        .any(|t| t.npy_code() == Some(rest));
    if !known {
        return Err(format!(
            "dtype {d:?} is not supported (bool, int8..int64, uint8..uint64, float16/32/64, \
             complex64/128 are)"
        ));
    }
    Ok((kind, width, order && width > 1))
}

/// A Python literal, as far as `.npy` headers use them.
#[derive(Debug)]
enum Py {
    Str(String),
    Bool(bool),
    Tuple(Vec<u64>),
    Other,
}

/// Parse `{'key': value, ...}` where values are strings, booleans, tuples
/// of integers, or (for structured dtypes) lists, which we refuse later.
fn parse_dict(s: &str) -> std::result::Result<Vec<(String, Py)>, String> {
    let b = s.as_bytes();
    let mut p = 0usize;
    let skip = |p: &mut usize| {
        while *p < b.len() && b[*p].is_ascii_whitespace() {
            *p += 1;
        }
    };
    let expect = |p: &mut usize, c: u8| -> std::result::Result<(), String> {
        skip(p);
        if b.get(*p) == Some(&c) {
            *p += 1;
            Ok(())
        } else {
            Err(format!("expected '{}' at byte {}", c as char, *p))
        }
    };
    let string = |p: &mut usize| -> std::result::Result<String, String> {
        skip(p);
        let q = *b.get(*p).ok_or("unexpected end")?;
        if q != b'\'' && q != b'"' {
            return Err(format!("expected a string at byte {}", *p));
        }
        let start = *p + 1;
        let len = b[start..]
            .iter()
            .position(|&c| c == q)
            .ok_or("unterminated string")?;
        *p = start + len + 1;
        Ok(s[start..start + len].to_string())
    };
    expect(&mut p, b'{')?;
    let mut out = Vec::new();
    loop {
        skip(&mut p);
        if b.get(p) == Some(&b'}') {
            break;
        }
        let k = string(&mut p)?;
        expect(&mut p, b':')?;
        skip(&mut p);
        let v = match b.get(p) {
            Some(b'\'') | Some(b'"') => Py::Str(string(&mut p)?),
            Some(b'T') if s[p..].starts_with("True") => {
                p += 4;
                Py::Bool(true)
            }
            Some(b'F') if s[p..].starts_with("False") => {
                p += 5;
                Py::Bool(false)
            }
            Some(b'(') => {
                p += 1;
                let mut t = Vec::new();
                loop {
                    skip(&mut p);
                    if b.get(p) == Some(&b')') {
                        p += 1;
                        break;
                    }
                    let start = p;
                    while p < b.len() && b[p].is_ascii_digit() {
                        p += 1;
                    }
                    // Python 2 era writers put an `L` after longs.
                    let n: u64 = s[start..p]
                        .parse()
                        .map_err(|_| format!("expected a non-negative integer at byte {start}"))?;
                    if b.get(p) == Some(&b'L') {
                        p += 1;
                    }
                    t.push(n);
                    skip(&mut p);
                    match b.get(p) {
                        Some(b',') => p += 1,
                        Some(b')') => {}
                        _ => return Err(format!("expected ',' or ')' at byte {p}")),
                    }
                }
                Py::Tuple(t)
            }
            Some(b'[') => {
                // A structured dtype: skip to the matching bracket.
                let mut depth = 0usize;
                while p < b.len() {
                    match b[p] {
                        b'[' => depth += 1,
                        b']' => {
                            depth -= 1;
                            if depth == 0 {
                                p += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    p += 1;
                }
                Py::Other
            }
            _ => return Err(format!("unexpected value at byte {p}")),
        };
        out.push((k, v));
        skip(&mut p);
        match b.get(p) {
            Some(b',') => p += 1,
            Some(b'}') => {}
            _ => return Err(format!("expected ',' or '}}' at byte {p}")),
        }
    }
    Ok(out)
}

/// Push the non-zero elements of an `.npy` array whose header was read with
/// [`read_npy_header`]. Returns the number of contributions pushed.
pub fn push_npy<R: Read>(
    b: &mut Builder,
    r: R,
    h: &NpyHeader,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    let mut pushed = 0u64;
    parse_npy(r, h, source, progress, false, &mut |e| {
        let (n, idx) = (e.at, e.idx);
        push_parsed(b, idx, e.v).map_err(at(source, || format!("element {n} (index {idx:?})")))?;
        pushed += 1;
        Ok(())
    })?;
    Ok(pushed)
}

/// Stream the data after the header into `sink`, skipping zeros (an
/// assembly's input) unless `keep_zeros` (a dense vector, where -0.0 is
/// kept as it is).
pub(crate) fn parse_npy<R: Read>(
    mut r: R,
    h: &NpyHeader,
    source: &str,
    progress: Progress<'_>,
    keep_zeros: bool,
    sink: Sink<'_>,
) -> Result<()> {
    let total = h.elements().unwrap_or(0);
    let w = h.width;
    let rank = h.shape.len();
    let mut idx = vec![0u64; rank];
    // Dimensions from fastest to slowest varying.
    let order: Vec<usize> = if h.fortran_order {
        (0..rank).collect()
    } else {
        (0..rank).rev().collect()
    };
    let dtype = h.dtype();
    let decode = |e: &[u8]| -> Parsed {
        if h.kind == NpyKind::Complex {
            // Two numbers of half the width, each in the file's byte order.
            let mut c = [0u8; 16];
            c[..w].copy_from_slice(e);
            if h.big_endian {
                c[..w].chunks_exact_mut(w / 2).for_each(|p| p.reverse());
            }
            return if w == 8 {
                let part =
                    |k: usize| f64::from(f32::from_le_bytes([c[k], c[k + 1], c[k + 2], c[k + 3]]));
                Parsed::C(part(0), part(4))
            } else {
                let part = |k: usize| f64::from_le_bytes(c[k..k + 8].try_into().unwrap_or([0; 8]));
                Parsed::C(part(0), part(8))
            };
        }
        let mut a = [0u8; 8];
        if h.big_endian {
            a[..w].copy_from_slice(e);
            a[..w].reverse();
        } else {
            a[..w].copy_from_slice(e);
        }
        match h.kind {
            NpyKind::Bool => Parsed::U(u64::from(a[0] != 0)),
            _ => match dtype.decode(&a) {
                Value::Float(f) | Value::Complex(f, _) => Parsed::F(f),
                Value::Int(i) => Parsed::I(i),
                Value::UInt(u) => Parsed::U(u),
            },
        }
    };
    let cap = (1usize << 20) / w * w;
    let mut buf = vec![0u8; cap];
    let mut n = 0u64;
    let mut consumed = h.data_offset;
    while n < total {
        let want = usize::try_from((total - n).saturating_mul(w as u64))
            .unwrap_or(cap)
            .min(cap);
        let mut got = 0;
        while got < want {
            match r.read(&mut buf[got..want]) {
                Ok(0) => {
                    return Err(input_err(
                        source,
                        "data".into(),
                        format!(
                            "the file ends after {} of the {total} elements the header announces",
                            n + (got / w) as u64
                        ),
                    ));
                }
                Ok(k) => got += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("read", source, e)),
            }
        }
        for e in buf[..want].chunks_exact(w) {
            let v = decode(e);
            if keep_zeros || !v.is_zero() {
                sink(Entry {
                    at: n,
                    idx: &idx,
                    v,
                    mirrored: false,
                })?;
            }
            n += 1;
            for &d in &order {
                idx[d] += 1;
                if idx[d] < h.shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        consumed += want as u64;
        progress(consumed);
    }
    let mut extra = [0u8; 1];
    loop {
        match r.read(&mut extra) {
            Ok(0) => return Ok(()),
            Ok(_) => {
                return Err(input_err(
                    source,
                    "data".into(),
                    format!("bytes follow the {total} elements the header announces"),
                ));
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("read", source, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut h = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
            if fortran { "True" } else { "False" }
        );
        while (10 + h.len() + 1) % 64 != 0 {
            h.push(' ');
        }
        h.push('\n');
        let mut v = NPY_MAGIC.to_vec();
        v.extend([1, 0]);
        v.extend((h.len() as u16).to_le_bytes());
        v.extend(h.as_bytes());
        v.extend(data);
        v
    }

    fn entries(file: &[u8]) -> Result<Vec<(Vec<u64>, Parsed)>> {
        let mut r = file;
        let h = read_npy_header(&mut r, "t.npy")?;
        let mut out = Vec::new();
        parse_npy(r, &h, "t.npy", &mut |_| {}, false, &mut |e| {
            out.push((e.idx.to_vec(), e.v));
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn c_and_fortran_order_and_byte_orders() {
        // [[0, 1, 2], [3, 0, -5]] as i2 little endian, C order.
        let c: Vec<u8> = [0i16, 1, 2, 3, 0, -5]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let want = vec![
            (vec![0, 1], Parsed::I(1)),
            (vec![0, 2], Parsed::I(2)),
            (vec![1, 0], Parsed::I(3)),
            (vec![1, 2], Parsed::I(-5)),
        ];
        assert_eq!(entries(&npy("<i2", false, "(2, 3)", &c)).unwrap(), want);
        // The same array in Fortran order, big endian.
        let f: Vec<u8> = [0i16, 3, 1, 0, 2, -5]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let mut got = entries(&npy(">i2", true, "(2, 3)", &f)).unwrap();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(got, want);
        let b = entries(&npy("|b1", false, "(3,)", &[0, 1, 2])).unwrap();
        assert_eq!(b, vec![(vec![1], Parsed::U(1)), (vec![2], Parsed::U(1))]);
        let h = entries(&npy("<f2", false, "(2,)", &[0, 0x3C, 0, 0xBC])).unwrap();
        assert_eq!(
            h,
            vec![(vec![0], Parsed::F(1.0)), (vec![1], Parsed::F(-1.0))]
        );
        // complex64 big-endian: each part's bytes swapped, not the pair's.
        let z: Vec<u8> = [0.0f32, 0.0, 1.5, -2.0]
            .iter()
            .flat_map(|v| v.to_be_bytes())
            .collect();
        let got = entries(&npy(">c8", false, "(2,)", &z)).unwrap();
        assert_eq!(got, vec![(vec![1], Parsed::C(1.5, -2.0))]);
    }

    #[test]
    fn bad_files_are_refused_by_name() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (npy("<c4", false, "(1,)", &[0; 4]), "not supported"),
            (npy("<U3", false, "(1,)", &[0; 12]), "not supported"),
            (npy("<f8", false, "()", &[0; 8]), "0-d"),
            (npy("<f8", false, "(2,)", &[0; 8]), "ends after 1 of the 2"),
            (npy("<f8", false, "(1,)", &[0; 9]), "bytes follow"),
            (
                npy("<f8", false, "(4294967296, 4294967296, 4294967296)", &[]),
                "more bytes",
            ),
            (b"\x93NUMPY\x02\x00\xff\xff\xff\xff".to_vec(), "longer than"),
            (
                b"\x93NUMPY\x01\x00\x05\x00{'a'".to_vec(),
                "ends inside the header",
            ),
        ];
        for (file, needle) in cases {
            let e = entries(&file).unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains("t.npy"), "{needle}: {e}");
        }
        let mut s = npy("<f8", false, "(1,)", &[]);
        s.truncate(5);
        assert!(entries(&s).is_err());
    }
}
