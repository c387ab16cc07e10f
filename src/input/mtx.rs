//! MatrixMarket coordinate files (real, integer, pattern; general,
//! symmetric, skew-symmetric), 1-based, shape from the header.

use crate::assemble::builder::Builder;
use crate::element::DType;
use crate::error::{Error, Result};
use crate::input::common::{at, input_err, Progress};
use crate::input::text::{for_lines, parse_index, parse_value, push_parsed, Parsed};
use std::io::BufRead;

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
