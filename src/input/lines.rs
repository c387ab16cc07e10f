//! Lines as bytes, for the text and MatrixMarket readers: `\n`, `\r\n` and
//! a lone `\r` (old Mac files) all end a line, and a UTF-8 byte-order mark
//! before the first line is skipped. Comments may hold any bytes (a Latin-1
//! name is common); only data lines must be ASCII, checked by [`ascii`].

use crate::error::{Error, Result};
use crate::input::common::{Progress, input_err};
use std::io::{BufRead, ErrorKind};

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Splits a [`BufRead`] into byte lines, numbering them from 1.
pub(crate) struct LineReader<R> {
    r: R,
    /// The previous line ended with `\r`: a `\n` right after belongs to it.
    after_cr: bool,
    /// Lines returned so far (the number of the last one).
    pub(crate) number: u64,
    /// Bytes consumed so far.
    pub(crate) bytes: u64,
}

impl<R: BufRead> LineReader<R> {
    /// Lines of `r`, the first being line `first_line + 1`.
    pub(crate) fn new(r: R, first_line: u64) -> Self {
        LineReader {
            r,
            after_cr: false,
            number: first_line,
            bytes: 0,
        }
    }

    fn fill(&mut self, source: &str) -> Result<&[u8]> {
        // Retry interruptions first; fill_buf again then returns the same
        // buffered bytes (two calls keep the borrow checker content).
        let line = self.number + 1;
        loop {
            match self.r.fill_buf() {
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(read_error(source, line, e)),
            }
        }
        self.r.fill_buf().map_err(|e| read_error(source, line, e))
    }

    fn consume(&mut self, n: usize) {
        self.r.consume(n);
        self.bytes += n as u64;
    }

    /// The next line, without its end, into `line`; `false` at the end.
    pub(crate) fn next_line(&mut self, line: &mut Vec<u8>, source: &str) -> Result<bool> {
        line.clear();
        if self.after_cr {
            self.after_cr = false;
            if self.fill(source)?.first() == Some(&b'\n') {
                self.consume(1);
            }
        }
        let mut any = false;
        loop {
            let buf = self.fill(source)?;
            if buf.is_empty() {
                break;
            }
            any = true;
            match memchr::memchr2(b'\n', b'\r', buf) {
                Some(p) => {
                    let cr = buf[p] == b'\r';
                    line.extend_from_slice(&buf[..p]);
                    self.consume(p + 1);
                    self.after_cr = cr;
                    break;
                }
                None => {
                    let n = buf.len();
                    line.extend_from_slice(buf);
                    self.consume(n);
                }
            }
        }
        if !any {
            return Ok(false);
        }
        if self.number == 0 && line.starts_with(BOM) {
            line.drain(..BOM.len());
        }
        self.number += 1;
        Ok(true)
    }
}

impl<R: BufRead> LineReader<R> {
    /// If the last line returned ended with the `\r` of a `\r\n`, take its
    /// `\n` as well, so that whoever reads on from the underlying reader
    /// starts at the next line (not at an empty one).
    pub(crate) fn end_line(&mut self, source: &str) -> Result<()> {
        if self.after_cr {
            self.after_cr = false;
            if self.fill(source)?.first() == Some(&b'\n') {
                self.consume(1);
            }
        }
        Ok(())
    }
}

pub(crate) fn read_error(source: &str, line: u64, e: std::io::Error) -> Error {
    match e.kind() {
        // What a decompressor says of a damaged stream.
        ErrorKind::InvalidData | ErrorKind::InvalidInput | ErrorKind::UnexpectedEof => input_err(
            source,
            format!("line {line}"),
            format!("cannot decode the input: {e}"),
        ),
        _ => Error::io("read", source, e),
    }
}

/// Call `f(line_number, line)` for each line after `first_line`, reporting
/// the bytes consumed to `progress` now and then.
pub(crate) fn for_lines<R: BufRead>(
    r: R,
    source: &str,
    first_line: u64,
    progress: Progress<'_>,
    mut f: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let mut lines = LineReader::new(r, first_line);
    let mut line = Vec::new();
    while lines.next_line(&mut line, source)? {
        if lines.number % 65536 == 0 {
            progress(lines.bytes);
        }
        f(lines.number, &line)?;
    }
    progress(lines.bytes);
    Ok(())
}

/// A data line as text, or an error naming the line and the first byte
/// that is not ASCII.
pub(crate) fn ascii<'l>(line: &'l [u8], source: &str, n: u64) -> Result<&'l str> {
    ascii_detail(line).map_err(|m| input_err(source, format!("line {n}"), m))
}

/// A data line as text, or what is wrong with it (without its location).
pub(crate) fn ascii_detail(line: &[u8]) -> std::result::Result<&str, String> {
    if line.is_ascii() {
        // ASCII is UTF-8: this cannot fail.
        return std::str::from_utf8(line).map_err(|_| "data line is not ASCII".to_string());
    }
    let col = line.iter().position(|b| !b.is_ascii()).unwrap_or(0);
    Err(format!(
        "byte 0x{:02X} at column {} is not ASCII; data lines must be ASCII (comments may hold any bytes)",
        line.get(col).copied().unwrap_or(0),
        col + 1
    ))
}

/// Whether a MatrixMarket line is blank or a `%` comment (any bytes).
pub(crate) fn mtx_skip(line: &[u8]) -> bool {
    match line.iter().position(|b| !b.is_ascii_whitespace()) {
        None => true,
        Some(p) => line[p] == b'%',
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(data: &[u8]) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        // A 1-byte buffer puts every line end (and \r\n) across refills.
        for cap in [1usize, 3, 4096] {
            let mut got = Vec::new();
            let r = std::io::BufReader::with_capacity(cap, data);
            for_lines(r, "t", 0, &mut |_| {}, |n, l| {
                got.push((n, l.to_vec()));
                Ok(())
            })
            .unwrap();
            if cap > 1 {
                assert_eq!(got, out, "capacity {cap}");
            }
            out = got;
        }
        out
    }

    #[test]
    fn every_line_end_and_a_bom() {
        let want: Vec<(u64, Vec<u8>)> = vec![
            (1, b"a b".to_vec()),
            (2, b"c".to_vec()),
            (3, b"".to_vec()),
            (4, b"d".to_vec()),
        ];
        assert_eq!(lines(b"a b\nc\n\nd"), want);
        assert_eq!(lines(b"a b\r\nc\r\n\r\nd\r\n"), want);
        assert_eq!(lines(b"a b\rc\r\rd\r"), want);
        assert_eq!(lines(b"\xEF\xBB\xBFa b\nc\r\n\rd\n"), want);
        assert!(lines(b"").is_empty());
    }

    #[test]
    fn non_ascii_is_named_with_its_column() {
        let e = ascii(b"1 2 \xE93", "f", 7).unwrap_err().to_string();
        assert!(
            e.contains("f:line 7") && e.contains("0xE9") && e.contains("column 5"),
            "{e}"
        );
        assert_eq!(ascii(b"1 2 3", "f", 1).unwrap(), "1 2 3");
        assert!(mtx_skip(b"  % caf\xE9"));
        assert!(mtx_skip(b"   "));
        assert!(!mtx_skip(b" 1 2"));
    }
}
