//! The buffered writer of the matrix outputs (exports, pictures, vectors)
//! over the crate's one atomic output (`crate::fs::output`): the file
//! appears whole or not at all, and an output that names the matrix's file
//! (or another input of the operation) is refused before anything is
//! written.

use crate::Result;
use crate::fs::output::{AtomicOutput, FileId, ReplaceInput, check_room};
use crate::options::IoCtx;
use std::fs::File;
use std::path::Path;

/// Bytes gathered before a write call.
const BUFFER: usize = 1 << 20;

pub(crate) struct Output {
    io: IoCtx,
    out: AtomicOutput,
    file: File,
    buf: Vec<u8>,
    /// Bytes handed to the file so far (excluding `buf`).
    flushed: u64,
    /// End of the furthest [`Output::write_at`].
    placed: u64,
    /// The path asked for, for messages.
    target: std::path::PathBuf,
}

impl Output {
    /// An output at `target` for an operation that reads `inputs` (none
    /// of which it may replace).
    pub(crate) fn create(target: &Path, inputs: &[&FileId]) -> Result<Output> {
        let io = IoCtx::new();
        let (out, file) = AtomicOutput::create(&io, target, inputs, ReplaceInput::Refuse)?;
        Ok(Output {
            io,
            out,
            file,
            buf: Vec::with_capacity(BUFFER),
            flushed: 0,
            placed: 0,
            target: target.to_path_buf(),
        })
    }

    /// Refuse, before anything is written, an output of `bytes` (`what`
    /// says what makes it that large) that the output's file system has
    /// no room for: streaming it would only fill the disk (a 2^40-row CSR
    /// `.npz` holds 8 TiB of `indptr`). An [`crate::Error::Io`] with
    /// `StorageFull`; a file system that cannot say is not refused.
    pub(crate) fn check_space(&self, bytes: u64, what: &str) -> Result<()> {
        check_room(&self.file, &self.target, bytes as u128, what)
    }

    /// Bytes written so far.
    pub(crate) fn position(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) -> Result<()> {
        if self.buf.len() + bytes.len() > BUFFER {
            self.flush()?;
            if bytes.len() >= BUFFER {
                return self.write_through(bytes);
            }
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }

    /// The buffer to format into directly; call [`Output::maybe_flush`] after.
    pub(crate) fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    pub(crate) fn maybe_flush(&mut self) -> Result<()> {
        if self.buf.len() >= BUFFER {
            self.flush()?;
        }
        Ok(())
    }

    fn write_through(&mut self, bytes: &[u8]) -> Result<()> {
        self.io.write_all(&mut self.file, bytes, self.out.path())?;
        self.flushed += bytes.len() as u64;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let r = self.write_through(&buf);
        self.buf = buf;
        self.buf.clear();
        r
    }

    /// Overwrite bytes already written (at `offset`, before `position`).
    pub(crate) fn patch(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        self.flush()?;
        self.io
            .write_all_at(&self.file, bytes, offset, self.out.path())
    }

    /// Write `bytes` at `offset`, which may lie past the current position
    /// (a region the sequential writes will not cover: the caller lays out
    /// the file). The sequential position does not move.
    pub(crate) fn write_at(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        self.io
            .write_all_at(&self.file, bytes, offset, self.out.path())?;
        self.placed = self.placed.max(offset + bytes.len() as u64);
        Ok(())
    }

    /// Flush and publish (fsync, rename over the target, fsync the
    /// directory). Returns the file's length.
    pub(crate) fn commit(mut self) -> Result<u64> {
        self.flush()?;
        self.out.commit(&self.file)?;
        Ok(self.flushed.max(self.placed))
    }
}
