//! A spill: bytes written once to an unnamed temporary file (removed by
//! the OS when it is dropped, on every path, kill -9 included), through
//! the caller's [`IoCtx`] (so the fault-injection tests reach every
//! spill), with the xxh3 of what was written, then read back from the
//! start and checked against it. A plan's keys, part numbers and
//! positions, and a refill's values, wait in spills.

use super::ctx::IoCtx;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::Xxh3;

/// Bytes being spilled through a buffer of a fixed size.
pub(crate) struct Spill {
    file: std::fs::File,
    buf: Vec<u8>,
    hash: Xxh3,
    bytes: u64,
    dir: PathBuf,
    io: IoCtx,
}

/// A finished [`Spill`], read back from its start.
pub(crate) struct SpillRead {
    file: std::fs::File,
    /// Bytes written.
    pub(crate) bytes: u64,
    /// The hash of what was written.
    want: u64,
    /// The next offset read.
    at: u64,
    dir: PathBuf,
    io: IoCtx,
}

impl Spill {
    /// A new, empty spill in `dir`, written `buffer` bytes at a time.
    pub(crate) fn new(io: &IoCtx, dir: &Path, buffer: usize) -> Result<Spill> {
        Ok(Spill {
            file: io.tempfile_in(dir)?,
            buf: Vec::with_capacity(buffer),
            hash: Xxh3::new(),
            bytes: 0,
            dir: dir.to_path_buf(),
            io: io.clone(),
        })
    }

    /// Append `b`.
    pub(crate) fn put(&mut self, b: &[u8]) -> Result<()> {
        self.hash.update(b);
        self.bytes += b.len() as u64;
        if self.buf.len() + b.len() > self.buf.capacity() {
            self.flush()?;
            if b.len() >= self.buf.capacity() {
                return self.io.write_all(&mut self.file, b, &self.dir);
            }
        }
        self.buf.extend_from_slice(b);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.io.write_all(&mut self.file, &self.buf, &self.dir)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// Everything written, to be read back from the start.
    pub(crate) fn finish(mut self) -> Result<SpillRead> {
        self.flush()?;
        Ok(SpillRead {
            file: self.file,
            bytes: self.bytes,
            want: self.hash.digest(),
            at: 0,
            dir: self.dir,
            io: self.io,
        })
    }

    /// Everything written, read back and checked against its hash;
    /// `what` names it in the errors.
    pub(crate) fn read_all(self, what: &'static str) -> Result<Vec<u8>> {
        let mut r = self.finish()?;
        let bytes = r.bytes;
        let mut out = Vec::new();
        out.try_reserve_exact(bytes as usize)
            .map_err(|_| Error::OutOfMemory { what, bytes })?;
        out.resize(bytes as usize, 0);
        r.read_exact(&mut out)?;
        r.check(xxhash_rust::xxh3::xxh3_64(&out), what)?;
        Ok(out)
    }
}

impl SpillRead {
    /// The next `buf.len()` bytes.
    pub(crate) fn read_exact(&mut self, buf: &mut [u8]) -> Result<()> {
        self.io.read_exact_at(&self.file, buf, self.at, &self.dir)?;
        self.at += buf.len() as u64;
        Ok(())
    }

    /// `got`, the hash of every byte read back, is the hash of those
    /// written: else the spill is damaged (`what` names it).
    pub(crate) fn check(&self, got: u64, what: &str) -> Result<()> {
        if got == self.want {
            return Ok(());
        }
        Err(Error::InvalidFile {
            section: format!("spill file in {}", self.dir.display()),
            offset: 0,
            detail: format!("{what}: the bytes read back differ from those written"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_come_back_whole_and_a_wrong_hash_is_an_error() {
        let d = tempfile::tempdir().unwrap();
        let io = IoCtx::default();
        let mut s = Spill::new(&io, d.path(), 16).unwrap();
        let data: Vec<u8> = (0..1000u32).map(|k| (k * 7) as u8).collect();
        for piece in data.chunks(13).chain([&data[..40]]) {
            s.put(piece).unwrap();
        }
        let mut want = data.clone();
        want.extend_from_slice(&data[..40]);
        let mut r = s.finish().unwrap();
        assert_eq!(r.bytes, want.len() as u64);
        let mut got = vec![0u8; want.len()];
        r.read_exact(&mut got[..500]).unwrap();
        r.read_exact(&mut got[500..]).unwrap();
        assert_eq!(got, want);
        r.check(xxhash_rust::xxh3::xxh3_64(&got), "t").unwrap();
        let e = r.check(1, "the keys").unwrap_err().to_string();
        assert!(e.contains("the keys: the bytes read back differ"), "{e}");
        // Nothing is left in the folder: the file has no name.
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);

        let mut s = Spill::new(&io, d.path(), 4).unwrap();
        s.put(&want).unwrap();
        assert_eq!(s.read_all("t").unwrap(), want);
    }
}
