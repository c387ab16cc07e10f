//! The contributions a rank pushed, kept until `finish` routes them:
//! fixed-size records of `rank + 1` little-endian u64 words (the index
//! tuple, then the raw 8-byte value), in memory up to a byte cap, then
//! appended to an unnamed temporary file (nothing to clean up, even after
//! a crash). Read back in bounded chunks.
//!
//! The memory part is reserved once at its cap (untouched pages cost no
//! resident memory) and spilled as it is: the file is read back by the
//! same process only, so the words go out in native byte order without a
//! converted copy. The memory is released as soon as it has been read.

use coo_assembler::Result;
use coo_assembler::internals::fs::ctx::IoCtx;
use std::fs::File;
use std::path::{Path, PathBuf};

pub(crate) struct Stash {
    words_per_record: usize,
    mem: Vec<u64>,
    cap_words: usize,
    file: Option<File>,
    dir: PathBuf,
    file_words: u64,
    io: IoCtx,
    /// Reading position: words of the file consumed, then of `mem`.
    read_file: u64,
    read_mem: usize,
}

impl Stash {
    pub(crate) fn new(rank: usize, cap_bytes: u64, dir: &Path, io: IoCtx) -> Stash {
        let wpr = rank + 1;
        // At least one record, and whole records only.
        let cap_words = ((cap_bytes / 8) as usize / wpr).max(1) * wpr;
        Stash {
            words_per_record: wpr,
            mem: Vec::new(),
            cap_words,
            file: None,
            dir: dir.to_path_buf(),
            file_words: 0,
            io,
            read_file: 0,
            read_mem: 0,
        }
    }

    /// Records held.
    pub(crate) fn records(&self) -> u64 {
        (self.file_words + self.mem.len() as u64) / self.words_per_record as u64
    }

    /// Bytes written to the spill file.
    pub(crate) fn spilled_bytes(&self) -> u64 {
        self.file_words * 8
    }

    #[inline]
    pub(crate) fn push(&mut self, idx: &[u64], raw: u64) -> Result<()> {
        if self.mem.len() + self.words_per_record > self.cap_words {
            self.spill()?;
        }
        if self.mem.capacity() == 0 {
            self.mem.reserve_exact(self.cap_words);
        }
        self.mem.extend_from_slice(idx);
        self.mem.push(raw);
        Ok(())
    }

    fn spill(&mut self) -> Result<()> {
        if self.file.is_none() {
            self.file = Some(self.io.tempfile_in(&self.dir)?);
        }
        if let Some(f) = self.file.as_mut() {
            let bytes: &[u8] = bytemuck::cast_slice(&self.mem);
            self.io
                .write_all_at(f, bytes, self.file_words * 8, &self.dir)?;
        }
        self.file_words += self.mem.len() as u64;
        self.mem.clear();
        Ok(())
    }

    /// The next `max_records` records (fewer only at the end) into `out`
    /// (cleared first); empty at the end. Reads the file part, then memory,
    /// so that `ceil(records / max_records)` calls drain the stash.
    pub(crate) fn next_chunk(&mut self, out: &mut Vec<u64>, max_records: usize) -> Result<()> {
        out.clear();
        let want = max_records.max(1) * self.words_per_record;
        if self.read_file < self.file_words {
            let n = ((self.file_words - self.read_file) as usize).min(want);
            out.resize(n, 0);
            if let Some(f) = self.file.as_ref() {
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut out[..]);
                self.io
                    .read_exact_at(f, bytes, self.read_file * 8, &self.dir)?;
            }
            self.read_file += n as u64;
        }
        let n = (self.mem.len() - self.read_mem).min(want - out.len());
        out.extend_from_slice(&self.mem[self.read_mem..self.read_mem + n]);
        self.read_mem += n;
        if self.read_mem == self.mem.len() && self.read_file == self.file_words {
            // Drained: give the memory back before the local assembly.
            self.mem = Vec::new();
            self.read_mem = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn spills_and_reads_back_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Stash::new(2, 64, dir.path(), IoCtx::new());
        for i in 0..100u64 {
            s.push(&[i, i + 1], i * 10).unwrap();
        }
        assert_eq!(s.records(), 100);
        assert!(s.spilled_bytes() > 0);
        let mut all = Vec::new();
        let mut c = Vec::new();
        let mut calls = 0;
        loop {
            s.next_chunk(&mut c, 7).unwrap();
            if c.is_empty() {
                break;
            }
            assert!(c.len() <= 21);
            all.extend_from_slice(&c);
            calls += 1;
        }
        // ceil(100 / 7) calls drain it: the exchange counts rounds that way.
        assert_eq!(calls, 15);
        let want: Vec<u64> = (0..100u64).flat_map(|i| [i, i + 1, i * 10]).collect();
        assert_eq!(all, want);
        // The spill file is unnamed: the directory stays empty.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
