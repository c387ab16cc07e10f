//! Compressed input, recognised by its magic bytes whatever the file name
//! (stdin included): gzip and zstd are decompressed on the fly (streamed,
//! never mapped); other compressions are named with a pipe that works.

use crate::error::{Error, Result};
use crate::input::common::input_err;
use std::io::{self, Cursor, Read};

/// How an input stream is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip (`.gz`), possibly several members.
    Gzip,
    /// Zstandard (`.zst`), possibly several frames.
    Zstd,
}

/// Compressions recognised only to be refused: (magic, name, decompressor).
/// Only magics of three bytes or more (a binary input starts with an index).
const OTHERS: &[(&[u8], &str, &str)] = &[
    (b"BZh", "bzip2", "bzip2 -dc"),
    (b"\xFD7zXZ\x00", "xz", "xz -dc"),
    (b"\x04\x22\x4D\x18", "lz4", "lz4 -dc"),
    (b"\x02\x21\x4C\x18", "lz4 (legacy)", "lz4 -dc"),
    (b"LZIP", "lzip", "lzip -dc"),
    (b"\x89LZO", "lzop", "lzop -dc"),
    (b"PK\x03\x04", "zip", "unzip -p"),
    (b"7z\xBC\xAF\x27\x1C", "7-zip", "7z x -so"),
];

/// Bytes enough to tell every format above (and `.npy`) apart.
pub(crate) const MAGIC_LEN: usize = 8;

/// The first `n` bytes of `r` (fewer at the end of the input), and a reader
/// that gives them again followed by the rest.
pub fn peek<R: Read>(mut r: R, n: usize, source: &str) -> Result<(Vec<u8>, PeekReader<R>)> {
    let mut head = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match r.read(&mut head[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("read", source, e)),
        }
    }
    head.truncate(got);
    Ok((head.clone(), Cursor::new(head).chain(r)))
}

/// What [`peek`] returns: the peeked bytes, then the rest.
pub type PeekReader<R> = io::Chain<Cursor<Vec<u8>>, R>;

/// The compression whose magic bytes start `head`; an input error naming
/// any other compression with a command that decompresses it.
pub fn detect(head: &[u8], source: &str) -> Result<Compression> {
    // Method 8 (deflate) and clear reserved flag bits as well: a raw
    // binary input starts with an index, so two bytes alone could match.
    if head.len() >= 4 && head.starts_with(b"\x1F\x8B\x08") && head[3] & 0xE0 == 0 {
        return Ok(Compression::Gzip);
    }
    if head.starts_with(b"\x28\xB5\x2F\xFD") {
        return Ok(Compression::Zstd);
    }
    if let Some((_, name, tool)) = OTHERS.iter().find(|(m, _, _)| head.starts_with(m)) {
        let shown = if source == "<stdin>" { "..." } else { source };
        return Err(input_err(
            source,
            "start".into(),
            format!(
                "the input is {name}-compressed, which is not read directly (gzip and zstd are); \
                 decompress it through a pipe: `{tool} {shown} | coo-assembler assemble --input - ...`"
            ),
        ));
    }
    Ok(Compression::None)
}

/// `r` decompressed as its magic bytes say, and the compression found.
pub fn decompress<'a, R: Read + Send + 'a>(
    r: R,
    source: &str,
) -> Result<(Box<dyn Read + Send + 'a>, Compression)> {
    let (head, r) = peek(r, MAGIC_LEN, source)?;
    let c = detect(&head, source)?;
    let out: Box<dyn Read + Send + 'a> = match c {
        Compression::None => Box::new(r),
        #[cfg(feature = "compressed")]
        // Multi-member: `cat a.gz b.gz` is a valid gzip stream.
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(r)),
        #[cfg(feature = "compressed")]
        Compression::Zstd => Box::new(
            zstd::stream::read::Decoder::new(r)
                .map_err(|e| input_err(source, "start".into(), format!("zstd: {e}")))?,
        ),
        #[cfg(not(feature = "compressed"))]
        Compression::Gzip | Compression::Zstd => {
            let (name, tool) = match c {
                Compression::Gzip => ("gzip", "gzip -dc"),
                _ => ("zstd", "zstd -dc"),
            };
            let shown = if source == "<stdin>" { "..." } else { source };
            return Err(input_err(
                source,
                "start".into(),
                format!(
                    "the input is {name}-compressed, and this build of coo-assembler has no \
                     decompression (the `compressed` feature, on by default, is off); decompress \
                     it through a pipe: `{tool} {shown} | coo-assembler assemble --input - ...`"
                ),
            ));
        }
    };
    Ok((out, c))
}

#[cfg(test)]
#[cfg(feature = "compressed")]
mod tests {
    use super::*;
    use std::io::Write;

    fn all(r: &mut dyn Read) -> Vec<u8> {
        let mut v = Vec::new();
        r.read_to_end(&mut v).unwrap();
        v
    }

    #[test]
    fn gzip_and_zstd_round_trip_and_plain_passes_through() {
        let data = b"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 5\n".repeat(50);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&data).unwrap();
        let mut gz = gz.finish().unwrap();
        // A second member, as `cat a.gz b.gz` gives.
        let mut gz2 = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz2.write_all(b"tail").unwrap();
        gz.extend(gz2.finish().unwrap());
        let zs = zstd::encode_all(&data[..], 1).unwrap();
        let (mut r, c) = decompress(&gz[..], "g").unwrap();
        assert_eq!(c, Compression::Gzip);
        let mut want = data.clone();
        want.extend(b"tail");
        assert_eq!(all(&mut r), want);
        let (mut r, c) = decompress(&zs[..], "z").unwrap();
        assert_eq!(c, Compression::Zstd);
        assert_eq!(all(&mut r), data);
        for plain in [&data[..], b"", b"1"] {
            let (mut r, c) = decompress(plain, "p").unwrap();
            assert_eq!(c, Compression::None);
            assert_eq!(all(&mut r), plain);
        }
    }

    #[test]
    fn other_compressions_are_named_with_a_pipe() {
        for (head, name, tool) in [
            (&b"BZh91AY&SY"[..], "bzip2", "bzip2 -dc"),
            (b"\xFD7zXZ\x00\x00\x04", "xz", "xz -dc"),
            (b"\x04\x22\x4D\x18\x64\x40", "lz4", "lz4 -dc"),
        ] {
            let e = match decompress(head, "m.mtx.x") {
                Err(e) => e.to_string(),
                Ok(_) => panic!("{name} accepted"),
            };
            assert!(
                e.contains(name) && e.contains(&format!("`{tool} m.mtx.x |")),
                "{e}"
            );
        }
    }
}
