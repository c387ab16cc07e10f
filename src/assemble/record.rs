//! A builder's recording of its coordinates, for a plan made after the
//! assembly ([`crate::Builder::record_plan`]): each pusher writes the
//! coordinate of every contribution it takes, in push order, to a
//! temporary file of its own (`rank` little-endian i64 words per
//! contribution, all -1 for one skipped under `skip_negative`); `finish`
//! joins the files in pusher-creation order, the order `last` follows.
//! The plan is made from that file by `crate::plan` (a builder does not
//! plan while it assembles: the engine's runs carry no positions).

use crate::error::{Error, Result};
use crate::fs::ctx::IoCtx;
use std::fs::File;
use std::path::{Path, PathBuf};

/// Bytes a pusher's recording buffers before a write.
pub(crate) const RECORD_BUFFER: usize = 64 << 10;

/// One pusher's recording while it pushes.
pub(crate) struct Recorder {
    rank: usize,
    /// Made at the first contribution (a pusher that pushes nothing
    /// leaves no file).
    file: Option<File>,
    buf: Vec<u8>,
    /// Contributions recorded.
    count: u64,
}

/// A pusher's finished recording: its place in creation order, its file
/// and how many contributions it holds.
pub(crate) struct Segment {
    pub(crate) pusher: u64,
    pub(crate) file: File,
    pub(crate) count: u64,
}

impl Recorder {
    pub(crate) fn new(rank: usize) -> Recorder {
        Recorder {
            rank,
            file: None,
            buf: Vec::new(),
            count: 0,
        }
    }

    /// Record the coordinate of one contribution (its first `rank`
    /// components: a complex tensor's keys carry the part after them).
    #[inline]
    pub(crate) fn coordinate(&mut self, idx: &[u64]) {
        for &x in idx.iter().take(self.rank) {
            // A coordinate is below its extent, itself below 2^63 (shapes
            // are checked), so it reads back as a non-negative i64.
            self.buf.extend_from_slice(&x.to_le_bytes());
        }
        self.count += 1;
    }

    /// Record a contribution skipped for a negative index.
    pub(crate) fn skipped(&mut self) {
        for _ in 0..self.rank {
            self.buf.extend_from_slice(&(-1i64).to_le_bytes());
        }
        self.count += 1;
    }

    /// The buffer is full: [`Recorder::write`] it.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.buf.len() >= RECORD_BUFFER
    }

    /// Write the buffer to the recording's file (made in `dir`, the
    /// builder's spill folder, at the first write).
    pub(crate) fn write(&mut self, io: &IoCtx, dir: &Path) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        if self.file.is_none() {
            self.file = Some(io.tempfile_in(dir)?);
        }
        let Some(f) = self.file.as_mut() else {
            return Err(Error::Poisoned("plan recording"));
        };
        io.write_all(f, &self.buf, dir)?;
        self.buf.clear();
        Ok(())
    }

    /// Write what is buffered; the segment, if anything was recorded.
    pub(crate) fn finish(
        mut self,
        io: &IoCtx,
        dir: impl FnOnce() -> Result<PathBuf>,
        pusher: u64,
    ) -> Result<Option<Segment>> {
        if !self.buf.is_empty() {
            self.write(io, &dir()?)?;
        }
        Ok(self.file.take().map(|file| Segment {
            pusher,
            file,
            count: self.count,
        }))
    }
}

/// A builder's whole recording, joined: `contributions` records of
/// `rank` i64 words in `file`.
pub(crate) struct Recording {
    pub(crate) file: File,
    pub(crate) contributions: u64,
    /// Where the file lives, named in errors.
    pub(crate) dir: PathBuf,
}

/// Join the segments in pusher-creation order into one file (the first
/// segment's, the others copied after it).
pub(crate) fn join(
    io: &IoCtx,
    mut segments: Vec<Segment>,
    rank: usize,
    dir: &Path,
) -> Result<Option<Recording>> {
    segments.sort_by_key(|s| s.pusher);
    let mut it = segments.into_iter();
    let Some(first) = it.next() else {
        return Ok(None);
    };
    let mut file = first.file;
    let mut contributions = first.count;
    io.seek(&mut file, std::io::SeekFrom::End(0), dir)?;
    for mut s in it {
        io.seek(&mut s.file, std::io::SeekFrom::Start(0), dir)?;
        let len = s.count * rank as u64 * 8;
        io.copy(&mut s.file, &mut file, len, dir)?;
        contributions += s.count;
    }
    let len = io.file_len(&file, dir)?;
    if len != contributions * rank as u64 * 8 {
        return Err(Error::InvalidArgument(format!(
            "the plan's recording holds {len} bytes for {contributions} contributions of rank \
             {rank}"
        )));
    }
    Ok(Some(Recording {
        file,
        contributions,
        dir: dir.to_path_buf(),
    }))
}
