//! An output file that appears whole or not at all: written to a temporary
//! file beside the target (named as the stale-output sweep expects, so a
//! killed run's leftover is removed later), fsynced, renamed, directory
//! fsynced. Dropped without [`Output::commit`], the temporary file goes.

use crate::fs::names::{new_output_temp_name, parent_dir};
use crate::IoCtx;
use crate::Result;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Bytes gathered before a write call.
const BUFFER: usize = 1 << 20;

pub(crate) struct Output {
    io: IoCtx,
    target: PathBuf,
    tmp: PathBuf,
    dir: PathBuf,
    file: Option<File>,
    buf: Vec<u8>,
    /// Bytes handed to the file so far (excluding `buf`).
    flushed: u64,
    /// End of the furthest [`Output::write_at`].
    placed: u64,
}

impl Output {
    pub(crate) fn create(target: &Path) -> Result<Output> {
        Self::create_with(target, IoCtx::new())
    }

    pub(crate) fn create_with(target: &Path, io: IoCtx) -> Result<Output> {
        let Some(name) = target.file_name() else {
            return Err(crate::Error::InvalidOptions(format!(
                "output path {} does not name a file",
                target.display()
            )));
        };
        let dir = parent_dir(target);
        let tmp = dir.join(new_output_temp_name(&name.to_string_lossy()));
        let file = io.create_new(&tmp)?;
        Ok(Output {
            io,
            target: target.to_path_buf(),
            tmp,
            dir,
            file: Some(file),
            buf: Vec::with_capacity(BUFFER),
            flushed: 0,
            placed: 0,
        })
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
        let Some(f) = self.file.as_mut() else {
            return Err(crate::Error::Poisoned("output file"));
        };
        self.io.write_all(f, bytes, &self.tmp)?;
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
        let Some(f) = self.file.as_ref() else {
            return Err(crate::Error::Poisoned("output file"));
        };
        self.io.write_all_at(f, bytes, offset, &self.tmp)
    }

    /// Write `bytes` at `offset`, which may lie past the current position
    /// (a region the sequential writes will not cover: the caller lays out
    /// the file). The sequential position does not move.
    pub(crate) fn write_at(&mut self, offset: u64, bytes: &[u8]) -> Result<()> {
        let Some(f) = self.file.as_ref() else {
            return Err(crate::Error::Poisoned("output file"));
        };
        self.io.write_all_at(f, bytes, offset, &self.tmp)?;
        self.placed = self.placed.max(offset + bytes.len() as u64);
        Ok(())
    }

    /// Flush, fsync, rename over the target, fsync the directory.
    pub(crate) fn commit(mut self) -> Result<u64> {
        self.flush()?;
        let Some(f) = self.file.take() else {
            return Err(crate::Error::Poisoned("output file"));
        };
        self.io.sync(&f, &self.tmp)?;
        drop(f);
        self.io.rename(&self.tmp, &self.target)?;
        // Renamed: nothing left to remove on drop.
        self.tmp = PathBuf::new();
        self.io.sync_dir(&self.dir)?;
        Ok(self.flushed.max(self.placed))
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            self.file = None;
            let _ = self.io.remove(&self.tmp);
        }
    }
}
