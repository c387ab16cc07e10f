//! Readers for contribution streams: raw binary records, whitespace text,
//! and MatrixMarket coordinate files. Each pushes into a [`Builder`] and
//! names the record or line of any bad input.

use crate::builder::Builder;
use crate::combine::PushValue;
use crate::element::DType;
use crate::error::{Error, Result};
use half::{bf16, f16};
use std::io::{BufRead, Read};
use std::str::FromStr;

/// The formats `assemble` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    /// Records of `rank` u64 little-endian indices, then one value of the
    /// element type, little-endian; no header.
    Bin,
    /// One entry per line: indices (0-based) then the value, separated by
    /// whitespace; `#` starts a comment.
    Text,
    /// MatrixMarket coordinate format (1-based; shape from the header).
    Mtx,
}

impl FromStr for InputFormat {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "bin" => Ok(InputFormat::Bin),
            "text" | "txt" => Ok(InputFormat::Text),
            "mtx" => Ok(InputFormat::Mtx),
            _ => Err(Error::InvalidOptions(format!(
                "unknown input format {s:?}; use bin, text or mtx"
            ))),
        }
    }
}

/// Called with the number of input bytes consumed so far.
pub type Progress<'a> = &'a mut dyn FnMut(u64);

fn input_err(source: &str, location: String, detail: impl Into<String>) -> Error {
    Error::Input {
        source_name: source.to_string(),
        location,
        detail: detail.into(),
    }
}

/// Give a push error the input location (record or line) it came from.
fn at<'a>(source: &'a str, location: impl Fn() -> String + 'a) -> impl Fn(Error) -> Error + 'a {
    move |e| match e {
        Error::Io { .. } | Error::Poisoned(_) | Error::OutOfMemory { .. } => e,
        other => input_err(source, location(), other.to_string()),
    }
}

/// Push binary records from `r`. Returns the number of records.
pub fn push_bin<R: Read>(
    b: &mut Builder,
    r: R,
    rank: usize,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    push_bin_from(b, BinSource::Reader(r), rank, dtype, source, progress)
}

/// Push binary records from bytes already in memory (e.g. a memory-mapped
/// input file: no copy through a read buffer).
pub fn push_bin_bytes(
    b: &mut Builder,
    bytes: &[u8],
    rank: usize,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    push_bin_from::<&[u8]>(b, BinSource::Bytes(bytes), rank, dtype, source, progress)
}

enum BinSource<'a, R> {
    Reader(R),
    Bytes(&'a [u8]),
}

fn push_bin_from<R: Read>(
    b: &mut Builder,
    src: BinSource<'_, R>,
    rank: usize,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    /// How one record is laid out: rank indices, then a value.
    struct Layout<V> {
        rank: usize,
        rec: usize,
        decode: fn(&[u8]) -> V,
    }

    /// Push the whole records of `bytes`; returns how many bytes they took.
    #[inline]
    fn records<V: PushValue>(
        b: &mut Builder,
        bytes: &[u8],
        l: &Layout<V>,
        idx: &mut [u64],
        n: &mut u64,
        source: &str,
    ) -> Result<usize> {
        let (rank, rec, decode) = (l.rank, l.rec, l.decode);
        let whole = bytes.len() / rec * rec;
        for chunk in bytes[..whole].chunks_exact(rec) {
            for (d, slot) in idx.iter_mut().enumerate() {
                let mut a = [0u8; 8];
                a.copy_from_slice(&chunk[d * 8..d * 8 + 8]);
                *slot = u64::from_le_bytes(a);
            }
            let v = decode(&chunk[rank * 8..]);
            b.push(idx, v)
                .map_err(at(source, || format!("record {n}")))?;
            *n += 1;
        }
        Ok(whole)
    }
    fn typed<R: Read, V: PushValue>(
        b: &mut Builder,
        src: BinSource<'_, R>,
        rank: usize,
        width: usize,
        decode: fn(&[u8]) -> V,
        source: &str,
        progress: Progress<'_>,
    ) -> Result<u64> {
        let rec = rank * 8 + width;
        let layout = Layout { rank, rec, decode };
        // A whole number of records per step, so a record never straddles
        // two buffers except at the very end.
        let cap = ((4 << 20) / rec * rec).max(rec);
        let mut n = 0u64;
        let mut consumed = 0u64;
        let mut idx = vec![0u64; rank];
        let truncated = |n: u64, left: usize| {
            input_err(
                source,
                format!("record {n}"),
                format!("truncated: the input ends {left} bytes into a {rec}-byte record"),
            )
        };
        match src {
            BinSource::Bytes(bytes) => {
                for piece in bytes.chunks(cap) {
                    let used = records(b, piece, &layout, &mut idx, &mut n, source)?;
                    consumed += used as u64;
                    progress(consumed);
                    if used != piece.len() {
                        return Err(truncated(n, piece.len() - used));
                    }
                }
                Ok(n)
            }
            BinSource::Reader(mut r) => {
                let mut buf = vec![0u8; cap];
                let mut filled = 0usize;
                loop {
                    let got = r
                        .read(&mut buf[filled..])
                        .map_err(|e| Error::io("read", source, e))?;
                    filled += got;
                    let used = records(b, &buf[..filled], &layout, &mut idx, &mut n, source)?;
                    buf.copy_within(used..filled, 0);
                    filled -= used;
                    consumed += used as u64;
                    progress(consumed);
                    if got == 0 {
                        if filled != 0 {
                            return Err(truncated(n, filled));
                        }
                        return Ok(n);
                    }
                }
            }
        }
    }
    let w = dtype.width();
    macro_rules! go {
        ($t:ty, $f:expr) => {
            typed::<R, $t>(b, src, rank, w, $f, source, progress)
        };
    }
    fn arr<const N: usize>(s: &[u8]) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&s[..N]);
        a
    }
    match dtype {
        DType::F64 => go!(f64, |s| f64::from_le_bytes(arr(s))),
        DType::F32 => go!(f32, |s| f32::from_le_bytes(arr(s))),
        DType::F16 => go!(f16, |s| f16::from_le_bytes(arr(s))),
        DType::BF16 => go!(bf16, |s| bf16::from_le_bytes(arr(s))),
        DType::I8 => go!(i8, |s| s[0] as i8),
        DType::U8 => go!(u8, |s| s[0]),
        DType::I16 => go!(i16, |s| i16::from_le_bytes(arr(s))),
        DType::U16 => go!(u16, |s| u16::from_le_bytes(arr(s))),
        DType::I32 => go!(i32, |s| i32::from_le_bytes(arr(s))),
        DType::U32 => go!(u32, |s| u32::from_le_bytes(arr(s))),
        DType::I64 => go!(i64, |s| i64::from_le_bytes(arr(s))),
        DType::U64 => go!(u64, |s| u64::from_le_bytes(arr(s))),
    }
}

/// A parsed text value, pushed with its natural type.
#[derive(Clone, Copy)]
enum Parsed {
    F(f64),
    I(i64),
    U(u64),
}

fn parse_value(tok: &str, dtype: DType) -> std::result::Result<Parsed, String> {
    if dtype.is_float() {
        tok.parse::<f64>()
            .map(Parsed::F)
            .map_err(|_| format!("{tok:?} is not a number"))
    } else if let Ok(v) = tok.parse::<i64>() {
        Ok(Parsed::I(v))
    } else if let Ok(v) = tok.parse::<u64>() {
        Ok(Parsed::U(v))
    } else {
        Err(format!(
            "{tok:?} is not an integer (the element type is {dtype})"
        ))
    }
}

fn push_parsed(b: &mut Builder, idx: &[u64], v: Parsed) -> Result<()> {
    match v {
        Parsed::F(f) => b.push(idx, f),
        Parsed::I(i) => b.push(idx, i),
        Parsed::U(u) => b.push(idx, u),
    }
}

fn parse_index(tok: &str, what: &str) -> std::result::Result<u64, String> {
    tok.parse::<u64>()
        .map_err(|_| format!("{what} {tok:?} is not a non-negative integer"))
}

/// Read lines, calling `f(line_number, line)` for each; tracks bytes.
fn for_lines<R: BufRead>(
    mut r: R,
    source: &str,
    first_line: u64,
    progress: Progress<'_>,
    mut f: impl FnMut(u64, &str) -> Result<()>,
) -> Result<()> {
    let mut line = String::new();
    let mut n = first_line;
    let mut bytes = 0u64;
    loop {
        line.clear();
        let got = r.read_line(&mut line).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => {
                input_err(source, format!("line {}", n + 1), "not valid UTF-8")
            }
            _ => Error::io("read", source, e),
        })?;
        if got == 0 {
            progress(bytes);
            return Ok(());
        }
        n += 1;
        bytes += got as u64;
        if n % 65536 == 0 {
            progress(bytes);
        }
        f(n, &line)?;
    }
}

/// Push whitespace-separated text entries. Returns the number of entries.
pub fn push_text<R: BufRead>(
    b: &mut Builder,
    r: R,
    rank: usize,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    let mut idx = vec![0u64; rank];
    let mut entries = 0u64;
    for_lines(r, source, 0, progress, |n, line| {
        let content = line.split('#').next().unwrap_or("");
        let mut toks = content.split_ascii_whitespace();
        let Some(first) = toks.next() else {
            return Ok(());
        };
        let loc = || format!("line {n}");
        let mut tok = Some(first);
        for (d, slot) in idx.iter_mut().enumerate() {
            let t = tok.ok_or_else(|| {
                input_err(
                    source,
                    loc(),
                    format!("expected {rank} indices and a value, found {d} fields"),
                )
            })?;
            *slot =
                parse_index(t, &format!("index {d}")).map_err(|m| input_err(source, loc(), m))?;
            tok = toks.next();
        }
        let t = tok.ok_or_else(|| {
            input_err(
                source,
                loc(),
                format!("expected {rank} indices and a value, the value is missing"),
            )
        })?;
        let v = parse_value(t, dtype).map_err(|m| input_err(source, loc(), m))?;
        if let Some(extra) = toks.next() {
            return Err(input_err(
                source,
                loc(),
                format!("unexpected field {extra:?} after the value"),
            ));
        }
        push_parsed(b, &idx, v).map_err(at(source, loc))?;
        entries += 1;
        Ok(())
    })?;
    Ok(entries)
}

/// MatrixMarket value field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtxField {
    /// Real values.
    Real,
    /// Integer values.
    Integer,
    /// No values: every entry is 1.
    Pattern,
}

/// MatrixMarket symmetry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MtxSymmetry {
    /// Every entry is stored.
    General,
    /// Lower triangle stored; (i, j) also gives (j, i).
    Symmetric,
    /// Strictly lower triangle stored; (i, j) = v gives (j, i) = -v.
    SkewSymmetric,
}

/// The header of a MatrixMarket coordinate file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MtxHeader {
    /// Rows.
    pub rows: u64,
    /// Columns.
    pub cols: u64,
    /// Entries stored in the file (before symmetric expansion).
    pub entries: u64,
    /// Value field.
    pub field: MtxField,
    /// Symmetry.
    pub symmetry: MtxSymmetry,
    /// Lines read so far (banner, comments and size line).
    pub lines: u64,
}

/// Read the banner, comments and size line of a MatrixMarket file.
pub fn read_mtx_header<R: BufRead>(r: &mut R, source: &str) -> Result<MtxHeader> {
    let mut line = String::new();
    let mut n = 0u64;
    let mut next = |line: &mut String, n: &mut u64| -> Result<bool> {
        line.clear();
        let got = r
            .read_line(line)
            .map_err(|e| Error::io("read", source, e))?;
        *n += 1;
        Ok(got > 0)
    };
    if !next(&mut line, &mut n)? {
        return Err(input_err(
            source,
            "line 1".into(),
            "empty input: expected a %%MatrixMarket banner",
        ));
    }
    let banner: Vec<String> = line
        .split_ascii_whitespace()
        .map(|s| s.to_ascii_lowercase())
        .collect();
    if banner.first().map(String::as_str) != Some("%%matrixmarket") || banner.len() != 5 {
        return Err(input_err(
            source,
            "line 1".into(),
            "expected '%%MatrixMarket matrix coordinate <field> <symmetry>'",
        ));
    }
    if banner[1] != "matrix" || banner[2] != "coordinate" {
        return Err(input_err(
            source,
            "line 1".into(),
            format!(
                "only 'matrix coordinate' files are supported, not '{} {}'",
                banner[1], banner[2]
            ),
        ));
    }
    let field = match banner[3].as_str() {
        "real" | "double" => MtxField::Real,
        "integer" => MtxField::Integer,
        "pattern" => MtxField::Pattern,
        f => {
            return Err(input_err(
                source,
                "line 1".into(),
                format!("field '{f}' is not supported (use real, integer or pattern)"),
            ))
        }
    };
    let symmetry = match banner[4].as_str() {
        "general" => MtxSymmetry::General,
        "symmetric" => MtxSymmetry::Symmetric,
        "skew-symmetric" => MtxSymmetry::SkewSymmetric,
        s => {
            return Err(input_err(
                source,
                "line 1".into(),
                format!(
                    "symmetry '{s}' is not supported (use general, symmetric or skew-symmetric)"
                ),
            ))
        }
    };
    loop {
        if !next(&mut line, &mut n)? {
            return Err(input_err(
                source,
                format!("line {n}"),
                "missing the size line 'rows cols entries'",
            ));
        }
        let t = line.trim();
        if t.is_empty() || t.starts_with('%') {
            continue;
        }
        let nums: Vec<&str> = t.split_ascii_whitespace().collect();
        if nums.len() != 3 {
            return Err(input_err(
                source,
                format!("line {n}"),
                "the size line must be 'rows cols entries'",
            ));
        }
        let p = |s: &str, w: &str| {
            parse_index(s, w).map_err(|m| input_err(source, format!("line {n}"), m))
        };
        return Ok(MtxHeader {
            rows: p(nums[0], "rows")?,
            cols: p(nums[1], "cols")?,
            entries: p(nums[2], "entries")?,
            field,
            symmetry,
            lines: n,
        });
    }
}

/// Push the entries of a MatrixMarket file whose header was read with
/// [`read_mtx_header`]. Returns the number of contributions pushed
/// (symmetric entries off the diagonal count twice).
pub fn push_mtx<R: BufRead>(
    b: &mut Builder,
    r: R,
    h: &MtxHeader,
    dtype: DType,
    source: &str,
    progress: Progress<'_>,
) -> Result<u64> {
    let mut seen = 0u64;
    let mut pushed = 0u64;
    for_lines(r, source, h.lines, progress, |n, line| {
        let t = line.trim();
        if t.is_empty() || t.starts_with('%') {
            return Ok(());
        }
        let loc = || format!("line {n}");
        if seen == h.entries {
            return Err(input_err(
                source,
                loc(),
                format!(
                    "more entries than the {} the size line announces",
                    h.entries
                ),
            ));
        }
        let mut toks = t.split_ascii_whitespace();
        let mut one = |what: &str| -> Result<u64> {
            let tok = toks
                .next()
                .ok_or_else(|| input_err(source, loc(), format!("missing {what}")))?;
            let v = parse_index(tok, what).map_err(|m| input_err(source, loc(), m))?;
            if v == 0 {
                return Err(input_err(
                    source,
                    loc(),
                    format!("{what} is 0; MatrixMarket indices start at 1"),
                ));
            }
            Ok(v - 1)
        };
        let i = one("row")?;
        let j = one("column")?;
        let v = match h.field {
            MtxField::Pattern => Parsed::I(1),
            _ => {
                let tok = toks
                    .next()
                    .ok_or_else(|| input_err(source, loc(), "missing value"))?;
                let v = parse_value(tok, dtype).map_err(|m| input_err(source, loc(), m))?;
                if h.field == MtxField::Integer && matches!(v, Parsed::F(f) if f.fract() != 0.0) {
                    return Err(input_err(
                        source,
                        loc(),
                        format!("{tok:?} is not an integer in an integer file"),
                    ));
                }
                v
            }
        };
        push_parsed(b, &[i, j], v).map_err(at(source, loc))?;
        pushed += 1;
        if i != j {
            match h.symmetry {
                MtxSymmetry::General => {}
                MtxSymmetry::Symmetric => {
                    push_parsed(b, &[j, i], v).map_err(at(source, loc))?;
                    pushed += 1;
                }
                MtxSymmetry::SkewSymmetric => {
                    let neg =
                        match v {
                            Parsed::F(f) => Parsed::F(-f),
                            Parsed::I(x) => Parsed::I(x.checked_neg().ok_or_else(|| {
                                input_err(source, loc(), "value cannot be negated")
                            })?),
                            Parsed::U(_) => {
                                return Err(input_err(
                                    source,
                                    loc(),
                                    "value too large to negate for a skew-symmetric file",
                                ))
                            }
                        };
                    push_parsed(b, &[j, i], neg).map_err(at(source, loc))?;
                    pushed += 1;
                }
            }
        } else if h.symmetry == MtxSymmetry::SkewSymmetric {
            return Err(input_err(
                source,
                loc(),
                "a skew-symmetric file cannot store a diagonal entry",
            ));
        }
        seen += 1;
        Ok(())
    })?;
    if seen != h.entries {
        return Err(input_err(
            source,
            "end of input".into(),
            format!(
                "{seen} entries found, the size line announces {}",
                h.entries
            ),
        ));
    }
    Ok(pushed)
}
