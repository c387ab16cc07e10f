//! Sorted runs: the format of a combined, sorted sequence of
//! (key, accumulator) records, held in memory or spilled to a temporary file.
//!
//! ```text
//! run    := header block* footer
//! header := "COORUN\0\x01" u32 version=1 u32 key_bits u64 fingerprint   (24 B)
//! block  := u32 payload_len u32 entries u64 xxh3_64(payload) payload
//! payload:= (key_delta acc)*    first key of a block is a delta from 0
//! footer := "COORUNFT" u64 blocks u64 entries u64 xxh3_64(previous 24 B)  (32 B)
//! ```
//! Keys are strictly increasing within a run and delta encoded (LEB128),
//! which turns clustered finite-element keys into one or two bytes. Every
//! block carries a checksum and its entry count, and the footer the totals,
//! so a flipped bit or a truncated run is an error, never a shorter or
//! different run. The fingerprint ties a run to the tensor's layout, type
//! and policy.

use crate::assemble::combine::Combiner;
use crate::assemble::key::Key;
use crate::codec::{le_u32_at, le_u64_at};
use crate::error::{Error, Result};
use crate::fs::ctx::IoCtx;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use xxhash_rust::xxh3::xxh3_64;

const RUN_MAGIC: &[u8; 8] = b"COORUN\0\x01";
const FOOTER_MAGIC: &[u8; 8] = b"COORUNFT";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 24;
const BLOCK_HEADER_LEN: usize = 16;
const FOOTER_LEN: usize = 32;
/// Largest block payload a reader accepts (a hostile length cannot make it
/// allocate more).
const MAX_BLOCK: usize = 16 << 20;

/// Where a finished run lives.
#[derive(Debug, Clone)]
pub(crate) enum RunData {
    /// Encoded bytes in memory.
    Memory(Arc<Vec<u8>>),
    /// A region of an unnamed temporary file (gone when the last handle
    /// closes), starting at `offset`. Many runs share one file, so the
    /// number of open file descriptors does not grow with the run count.
    File {
        /// The spill file.
        file: Arc<File>,
        /// Where the run starts in it.
        offset: u64,
    },
}

/// Where one block of a run starts: its first key (as [`Mark::key_of`]
/// gives it), its offset in the run and the records before it. A merge of
/// one key range starts each run at its block (`RunReader::open_range`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mark {
    pub first: u128,
    pub offset: u64,
    pub before: u64,
}

impl Mark {
    /// A key of at most 128 bits as a number in the same order.
    pub(crate) fn key_of<K: Key>(k: &K) -> u128 {
        (u128::from(k.get_bits(64, 64)) << 64) | u128::from(k.get_bits(0, 64))
    }

    /// The key of the number [`Mark::key_of`] gives.
    pub(crate) fn key_from<K: Key>(x: u128) -> K {
        let mut k = K::default();
        k.or_bits(x as u64, 0);
        k.or_bits((x >> 64) as u64, 64);
        k
    }
}

/// A finished run.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    /// Sequence number, for messages.
    pub id: u64,
    pub data: RunData,
    /// Encoded length in bytes.
    pub bytes: u64,
    /// Records (distinct keys).
    pub entries: u64,
    /// Every block's [`Mark`], and the run's last key: for keys of at most
    /// 128 bits (empty and None for wider keys, which are merged whole).
    pub marks: Arc<Vec<Mark>>,
    pub last: Option<u128>,
}

impl Run {
    pub(crate) fn is_spilled(&self) -> bool {
        matches!(self.data, RunData::File { .. })
    }
}

/// What ties runs to one assembly: key width, a fingerprint of the
/// tensor's layout, type and policy, and the block size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunFormat {
    pub key_bits: u32,
    pub fingerprint: u64,
    pub block_target: usize,
}

/// An unnamed temporary file that runs are appended to, one after another.
pub(crate) struct SpillFile {
    file: Arc<File>,
    end: u64,
    dir: PathBuf,
}

impl SpillFile {
    /// A new, empty spill file in `dir`.
    pub(crate) fn create(dir: &Path, io: &IoCtx) -> Result<SpillFile> {
        Ok(SpillFile {
            file: Arc::new(io.tempfile_in(dir)?),
            end: 0,
            dir: dir.to_path_buf(),
        })
    }
}

/// Writes one run, block by block, into memory or a spill file.
pub(crate) struct RunWriter<'c, 's, K: Key, C: Combiner> {
    comb: &'c C,
    id: u64,
    block: Vec<u8>,
    block_entries: u32,
    block_target: usize,
    prev: K,
    blocks: u64,
    entries: u64,
    sink: Sink<'s>,
    io: IoCtx,
    /// Bytes of the run put so far (header included).
    written: u64,
    /// The blocks' marks (keys of at most 128 bits).
    marks: Vec<Mark>,
    /// The last key of the blocks flushed (keys of at most 128 bits).
    last: Option<u128>,
}

enum Sink<'s> {
    Memory(Vec<u8>),
    File {
        spill: &'s mut SpillFile,
        start: u64,
        buf: Vec<u8>,
        offset: u64,
        buf_cap: usize,
    },
}

impl<'c, 's, K: Key, C: Combiner> RunWriter<'c, 's, K, C> {
    /// A run kept in memory, with room for `capacity` bytes reserved up front
    /// (so that growth does not double the memory it takes).
    pub(crate) fn memory(
        comb: &'c C,
        id: u64,
        fmt: RunFormat,
        capacity: usize,
        io: &IoCtx,
    ) -> Result<Self> {
        let mut v = Vec::new();
        v.try_reserve_exact(capacity)
            .map_err(|_| Error::OutOfMemory {
                what: "an in-memory run",
                bytes: capacity as u64,
            })?;
        let mut w = Self::with_sink(comb, id, fmt.block_target, Sink::Memory(v), io);
        w.put_header(fmt.key_bits, fmt.fingerprint);
        Ok(w)
    }

    /// A run appended to `spill`, written through a buffer of `buf_cap` bytes.
    pub(crate) fn file(
        comb: &'c C,
        id: u64,
        fmt: RunFormat,
        spill: &'s mut SpillFile,
        buf_cap: usize,
        io: &IoCtx,
    ) -> Self {
        let start = spill.end;
        let sink = Sink::File {
            spill,
            start,
            buf: Vec::with_capacity(buf_cap),
            offset: start,
            buf_cap,
        };
        let mut w = Self::with_sink(comb, id, fmt.block_target, sink, io);
        w.put_header(fmt.key_bits, fmt.fingerprint);
        w
    }

    fn with_sink(comb: &'c C, id: u64, block_target: usize, sink: Sink<'s>, io: &IoCtx) -> Self {
        RunWriter {
            comb,
            id,
            block: Vec::with_capacity(block_target + 256),
            block_entries: 0,
            block_target,
            prev: K::default(),
            blocks: 0,
            entries: 0,
            sink,
            io: io.clone(),
            written: 0,
            marks: Vec::new(),
            last: None,
        }
    }

    fn put_header(&mut self, key_bits: u32, fingerprint: u64) {
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(RUN_MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&key_bits.to_le_bytes());
        h[16..24].copy_from_slice(&fingerprint.to_le_bytes());
        // Header bytes go straight to the sink buffer; cannot fail here.
        match &mut self.sink {
            Sink::Memory(v) => v.extend_from_slice(&h),
            Sink::File { buf, .. } => buf.extend_from_slice(&h),
        }
        self.written += HEADER_LEN as u64;
    }

    /// Append one record; keys must be strictly increasing.
    #[inline]
    pub(crate) fn push(&mut self, key: K, acc: &C::Acc) -> Result<()> {
        debug_assert!(self.entries == 0 || self.block_entries == 0 || key > self.prev);
        // A block's first key marks it; the last key is taken at its flush.
        if K::BITS <= 128 && self.block_entries == 0 {
            self.marks.push(Mark {
                first: Mark::key_of(&key),
                offset: self.written,
                before: self.entries,
            });
        }
        K::write_delta(&self.prev, &key, &mut self.block);
        self.comb.encode(acc, &mut self.block);
        self.prev = key;
        self.block_entries += 1;
        self.entries += 1;
        if self.block.len() >= self.block_target {
            self.flush_block()?;
        }
        Ok(())
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.block_entries == 0 {
            return Ok(());
        }
        let mut h = [0u8; BLOCK_HEADER_LEN];
        h[0..4].copy_from_slice(&(self.block.len() as u32).to_le_bytes());
        h[4..8].copy_from_slice(&self.block_entries.to_le_bytes());
        h[8..16].copy_from_slice(&xxh3_64(&self.block).to_le_bytes());
        if K::BITS <= 128 {
            self.last = Some(Mark::key_of(&self.prev));
        }
        let block = std::mem::take(&mut self.block);
        self.put(&h)?;
        self.put(&block)?;
        self.block = block;
        self.block.clear();
        self.block_entries = 0;
        self.prev = K::default();
        self.blocks += 1;
        Ok(())
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.written += bytes.len() as u64;
        match &mut self.sink {
            Sink::Memory(v) => {
                v.extend_from_slice(bytes);
                Ok(())
            }
            Sink::File {
                spill,
                buf,
                offset,
                buf_cap,
                ..
            } => {
                if buf.len() + bytes.len() > *buf_cap && !buf.is_empty() {
                    self.io
                        .write_all_at(&spill.file, buf, *offset, &spill.dir)?;
                    *offset += buf.len() as u64;
                    buf.clear();
                }
                if bytes.len() > *buf_cap {
                    self.io
                        .write_all_at(&spill.file, bytes, *offset, &spill.dir)?;
                    *offset += bytes.len() as u64;
                } else {
                    buf.extend_from_slice(bytes);
                }
                Ok(())
            }
        }
    }

    /// Finish the run: last block, footer, and the handle to read it.
    pub(crate) fn finish(mut self) -> Result<Run> {
        self.flush_block()?;
        let mut f = [0u8; FOOTER_LEN];
        f[0..8].copy_from_slice(FOOTER_MAGIC);
        f[8..16].copy_from_slice(&self.blocks.to_le_bytes());
        f[16..24].copy_from_slice(&self.entries.to_le_bytes());
        let sum = xxh3_64(&f[..24]);
        f[24..32].copy_from_slice(&sum.to_le_bytes());
        self.put(&f)?;
        let (data, bytes) = match self.sink {
            Sink::Memory(mut v) => {
                v.shrink_to_fit();
                let n = v.len() as u64;
                (RunData::Memory(Arc::new(v)), n)
            }
            Sink::File {
                spill,
                start,
                buf,
                offset,
                ..
            } => {
                self.io
                    .write_all_at(&spill.file, &buf, offset, &spill.dir)?;
                let end = offset + buf.len() as u64;
                spill.end = end;
                let data = RunData::File {
                    file: Arc::clone(&spill.file),
                    offset: start,
                };
                (data, end - start)
            }
        };
        self.marks.shrink_to_fit();
        Ok(Run {
            id: self.id,
            data,
            bytes,
            entries: self.entries,
            marks: Arc::new(std::mem::take(&mut self.marks)),
            last: self.last,
        })
    }
}

/// Reads a run back, block by block, checking every checksum and count.
pub(crate) struct RunReader<'c, K: Key, C: Combiner> {
    comb: &'c C,
    run: Run,
    dir: PathBuf,
    io: IoCtx,
    /// Offset of the next block in the run.
    next_block: u64,
    /// End of the blocks (start of the footer).
    blocks_end: u64,
    blocks_left: u64,
    total_entries: u64,
    entries_read: u64,
    block: Vec<u8>,
    pos: usize,
    block_left: u32,
    prev: K,
    last_key: Option<K>,
    /// The run ends, for this reader, at its first key at or above this.
    limit: Option<K>,
}

impl<'c, K: Key, C: Combiner> RunReader<'c, K, C> {
    /// Open a run at its block `at` (an index into its marks), to read the
    /// keys below `limit`: one key range of a parallel merge. The caller
    /// skips the keys of that block below its range.
    pub(crate) fn open_range(
        comb: &'c C,
        run: Run,
        fmt: RunFormat,
        dir: &Path,
        io: &IoCtx,
        at: usize,
        limit: Option<K>,
    ) -> Result<Self> {
        let mut r = Self::open(comb, run, fmt, dir, io)?;
        if let Some(m) = r.run.marks.get(at).copied() {
            if m.offset < HEADER_LEN as u64
                || m.offset > r.blocks_end
                || (at as u64) > r.blocks_left
                || m.before > r.total_entries
            {
                return Err(r.corrupt(format!("block mark {at} points outside the run")));
            }
            r.next_block = m.offset;
            r.blocks_left -= at as u64;
            r.entries_read = m.before;
        }
        r.limit = limit;
        Ok(r)
    }

    /// Open a run; checks header and footer. `dir` names the spill
    /// directory in messages.
    pub(crate) fn open(
        comb: &'c C,
        run: Run,
        fmt: RunFormat,
        dir: &Path,
        io: &IoCtx,
    ) -> Result<Self> {
        let (key_bits, fingerprint) = (fmt.key_bits, fmt.fingerprint);
        let corrupt = |detail: String| Error::CorruptRun {
            run: run.id,
            detail,
        };
        if run.bytes < (HEADER_LEN + FOOTER_LEN) as u64 {
            return Err(corrupt(format!(
                "{} bytes is too short for a run",
                run.bytes
            )));
        }
        let mut head = [0u8; HEADER_LEN];
        let mut foot = [0u8; FOOTER_LEN];
        Self::read_at(&run, &mut head, 0, dir, io)?;
        Self::read_at(&run, &mut foot, run.bytes - FOOTER_LEN as u64, dir, io)?;
        if &head[0..8] != RUN_MAGIC || u32_at(&head, 8) != VERSION {
            return Err(corrupt("bad run header magic or version".into()));
        }
        if u32_at(&head, 12) != key_bits || u64_at(&head, 16) != fingerprint {
            return Err(corrupt("run was written for another tensor layout".into()));
        }
        if &foot[0..8] != FOOTER_MAGIC || xxh3_64(&foot[..24]) != u64_at(&foot, 24) {
            return Err(corrupt("bad run footer (truncated or damaged run)".into()));
        }
        let blocks = u64_at(&foot, 8);
        let entries = u64_at(&foot, 16);
        if entries != run.entries {
            return Err(corrupt(format!(
                "footer counts {entries} records, {} were written",
                run.entries
            )));
        }
        Ok(RunReader {
            comb,
            dir: dir.to_path_buf(),
            io: io.clone(),
            next_block: HEADER_LEN as u64,
            blocks_end: run.bytes - FOOTER_LEN as u64,
            blocks_left: blocks,
            total_entries: entries,
            entries_read: 0,
            block: Vec::new(),
            pos: 0,
            block_left: 0,
            prev: K::default(),
            last_key: None,
            limit: None,
            run,
        })
    }

    fn read_at(run: &Run, buf: &mut [u8], offset: u64, dir: &Path, io: &IoCtx) -> Result<()> {
        match &run.data {
            RunData::Memory(v) => {
                let end = offset as usize + buf.len();
                let src = v.get(offset as usize..end).ok_or(Error::CorruptRun {
                    run: run.id,
                    detail: "read past the end of the run".into(),
                })?;
                buf.copy_from_slice(src);
                Ok(())
            }
            RunData::File {
                file,
                offset: start,
            } => io.read_exact_at(file, buf, start + offset, dir),
        }
    }

    #[cold]
    fn corrupt(&self, detail: impl Into<String>) -> Error {
        Error::CorruptRun {
            run: self.run.id,
            detail: detail.into(),
        }
    }

    fn load_block(&mut self) -> Result<bool> {
        if self.blocks_left == 0 {
            if self.entries_read != self.total_entries {
                return Err(self.corrupt(format!(
                    "blocks hold {} records, footer says {}",
                    self.entries_read, self.total_entries
                )));
            }
            return Ok(false);
        }
        let mut h = [0u8; BLOCK_HEADER_LEN];
        if self.next_block + BLOCK_HEADER_LEN as u64 > self.blocks_end {
            return Err(self.corrupt("block header past the end of the blocks"));
        }
        Self::read_at(&self.run, &mut h, self.next_block, &self.dir, &self.io)?;
        let len = u32_at(&h, 0) as usize;
        let count = u32_at(&h, 4);
        let sum = u64_at(&h, 8);
        let start = self.next_block + BLOCK_HEADER_LEN as u64;
        if len > MAX_BLOCK || start + len as u64 > self.blocks_end || count == 0 {
            return Err(self.corrupt(format!(
                "block at byte {} has an invalid length or count",
                self.next_block
            )));
        }
        self.block.resize(len, 0);
        let mut block = std::mem::take(&mut self.block);
        let r = Self::read_at(&self.run, &mut block, start, &self.dir, &self.io);
        self.block = block;
        r?;
        if xxh3_64(&self.block) != sum {
            return Err(self.corrupt(format!(
                "checksum mismatch in block at byte {}",
                self.next_block
            )));
        }
        self.next_block = start + len as u64;
        self.blocks_left -= 1;
        self.block_left = count;
        self.pos = 0;
        self.prev = K::default();
        Ok(true)
    }

    /// The next record, or None at the end of the run (the merge reads
    /// keys and accumulators apart; the tests read whole records).
    #[cfg(test)]
    pub(crate) fn next_record(&mut self) -> Result<Option<(K, C::Acc)>> {
        match self.next_key()? {
            Some(key) => Ok(Some((key, self.take_acc()?))),
            None => Ok(None),
        }
    }

    /// The key of the next record, or None at the end of the run. Its
    /// accumulator must be taken ([`RunReader::take_acc`]) before the next
    /// call: the merge decodes it only when the key wins, straight where it
    /// is needed, instead of parking every run's current one in a slot.
    #[inline(always)]
    pub(crate) fn next_key(&mut self) -> Result<Option<K>> {
        if self.block_left == 0 && !self.next_block()? {
            return Ok(None);
        }
        let Some(key) = K::read_delta(&self.prev, &self.block, &mut self.pos) else {
            return Err(self.corrupt("malformed key"));
        };
        if self.last_key.is_some_and(|l| key <= l) {
            return Err(self.corrupt("keys out of order"));
        }
        if self.limit.is_some_and(|l| key >= l) {
            return Ok(None);
        }
        self.last_key = Some(key);
        self.prev = key;
        Ok(Some(key))
    }

    /// The accumulator of the record whose key [`RunReader::next_key`]
    /// returned last.
    #[inline(always)]
    pub(crate) fn take_acc(&mut self) -> Result<C::Acc> {
        if self.block_left == 0 {
            return Err(self.corrupt("a value without its key"));
        }
        let Some(acc) = self.comb.decode(&self.block, &mut self.pos) else {
            return Err(self.corrupt("malformed value"));
        };
        self.block_left -= 1;
        self.entries_read += 1;
        Ok(acc)
    }

    /// The current block is used up: check it was whole and load the next.
    /// False at the end of the run.
    #[cold]
    #[inline(never)]
    fn next_block(&mut self) -> Result<bool> {
        if self.pos != self.block.len() {
            return Err(self.corrupt("trailing bytes in a block"));
        }
        self.load_block()
    }
}

/// The little-endian `u32` at `at` of a fixed-size header (always in bounds).
fn u32_at<const N: usize>(b: &[u8; N], at: usize) -> u32 {
    le_u32_at(b, at).unwrap_or(u32::MAX)
}

/// The little-endian `u64` at `at` of a fixed-size header (always in bounds).
fn u64_at<const N: usize>(b: &[u8; N], at: usize) -> u64 {
    le_u64_at(b, at).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assemble::combine::IntSum;
    use crate::element::DType;

    fn fmt(block: usize) -> RunFormat {
        RunFormat {
            key_bits: 40,
            fingerprint: 99,
            block_target: block,
        }
    }

    fn write(entries: &[(u64, i128)], spill: Option<&Path>, block: usize) -> Run {
        let c = IntSum(DType::I64);
        let io = IoCtx::new();
        let mut sf;
        let mut w = match spill {
            None => RunWriter::<u64, _>::memory(&c, 7, fmt(block), 0, &io).unwrap(),
            Some(d) => {
                sf = SpillFile::create(d, &io).unwrap();
                // A first run in the file, so the tested run starts at an offset.
                let mut first = RunWriter::<u64, _>::file(&c, 1, fmt(block), &mut sf, 128, &io);
                first.push(5, &1).unwrap();
                first.finish().unwrap();
                RunWriter::<u64, _>::file(&c, 7, fmt(block), &mut sf, 128, &io)
            }
        };
        for (k, v) in entries {
            w.push(*k, v).unwrap();
        }
        w.finish().unwrap()
    }

    fn read_all(run: Run, dir: &Path) -> Result<Vec<(u64, i128)>> {
        let c = IntSum(DType::I64);
        let mut r = RunReader::<u64, _>::open(&c, run, fmt(64), dir, &IoCtx::new())?;
        let mut out = Vec::new();
        while let Some(x) = r.next_record()? {
            out.push(x);
        }
        Ok(out)
    }

    #[test]
    fn round_trip_memory_and_file() {
        let dir = tempfile::tempdir().unwrap();
        let entries: Vec<(u64, i128)> = (0..1000)
            .map(|i| (i * i * 7 + 3, i as i128 - 500))
            .collect();
        for spill in [None, Some(dir.path())] {
            let run = write(&entries, spill, 100);
            assert_eq!(run.entries, 1000);
            assert_eq!(read_all(run, dir.path()).unwrap(), entries);
        }
        let empty = write(&[], None, 100);
        assert!(read_all(empty, dir.path()).unwrap().is_empty());
    }

    #[test]
    fn every_flip_and_truncation_is_detected() {
        let dir = tempfile::tempdir().unwrap();
        let entries: Vec<(u64, i128)> = (0..60).map(|i| (i * 3, i as i128)).collect();
        let run = write(&entries, None, 64);
        let RunData::Memory(bytes) = &run.data else {
            unreachable!()
        };
        for i in 0..bytes.len() {
            let mut b = bytes.as_ref().clone();
            b[i] ^= 0x10;
            let bad = Run {
                data: RunData::Memory(Arc::new(b)),
                ..run.clone()
            };
            let r = read_all(bad, dir.path());
            assert!(
                r.is_err() || r.as_ref().unwrap() == &entries,
                "flip at {i} went unnoticed"
            );
            assert!(r.is_err(), "flip at {i} gave a result");
        }
        for n in 0..bytes.len() {
            let bad = Run {
                data: RunData::Memory(Arc::new(bytes[..n].to_vec())),
                bytes: n as u64,
                ..run.clone()
            };
            assert!(read_all(bad, dir.path()).is_err(), "truncation to {n}");
        }
    }
}
