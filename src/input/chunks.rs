//! Line-based input parsed on several threads: the reading thread cuts the
//! input into blocks at line ends, worker threads parse each block into a
//! [`Batch`] of entries, and the reading thread hands the batches to the
//! sink in input order. The sink thus sees exactly the entries, in exactly
//! the order, that a line-by-line parse gives, and every error names the
//! line the sequential parse would have named (a block's lines are
//! numbered from its start; the reading thread adds the lines before it).

use crate::assemble::builder::Packer;
use crate::assemble::sort::Record;
use crate::error::{Error, Result};
use crate::input::common::Parsed;
use crate::input::common::{Entry, Progress, input_err};
use crate::input::lines::read_error;
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read};

/// Bytes per block: large enough that handing blocks between threads
/// costs nothing next to parsing them, small enough that the blocks in
/// flight (with their parsed entries, about twice their size) stay under
/// 10 MiB, which the memory budget does not count; a little larger than
/// the CLI's 1 MiB read buffer, so reads go past it straight into the
/// block (one copy, not two).
const BLOCK: usize = (1 << 20) + (64 << 10);

/// Bytes per block of a mapped input: no buffer to fill, so smaller blocks
/// and more of them in flight keep every parsing thread busy while the
/// reading thread appends.
const MAPPED_BLOCK: usize = 512 << 10;

/// Blocks in flight per parsing thread (read, mapped), besides one more:
/// with one block each, a parsing thread that finished its block waited
/// whenever the block due next (another thread's) was late, e.g. because
/// a sorting thread had its core; a few more keep both cores busy.
const AHEAD: usize = 2;
const MAPPED_AHEAD: usize = 3;

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The bit of an entry's line number in a [`Batch`] that marks a mirror.
const MIRROR: u32 = 1 << 31;

/// Why a line could not be parsed.
pub(crate) struct LineError {
    pub(crate) detail: String,
    /// The line is a data line that counts as an entry: a MatrixMarket
    /// file that already has all its announced entries reports "more
    /// entries" for it rather than this error (the sequential check order).
    pub(crate) counts: bool,
}

impl LineError {
    /// An error reported as it is.
    pub(crate) fn plain(detail: impl Into<String>) -> LineError {
        LineError {
            detail: detail.into(),
            counts: false,
        }
    }

    /// An error on a line that counts as an entry.
    pub(crate) fn entry(detail: impl Into<String>) -> LineError {
        LineError {
            detail: detail.into(),
            counts: true,
        }
    }
}

/// The entries parsed from one block, with their lines (1-based within the
/// block), and the first error, which ends the block. With a [`Packer`],
/// entries are checked and packed into the builder's records as they are
/// added, so that the thread that owns the builder only copies them; from
/// the first entry the builder would refuse on, the entries are kept as
/// indices and values instead (`push_many` then names the error).
#[derive(Default)]
pub(crate) struct Batch {
    rank: usize,
    packer: Option<Packer>,
    /// The first entries, packed.
    recs: Vec<Record<u64>>,
    /// The entries after them (all of them without a packer).
    idx: Vec<u64>,
    vals: Vec<Parsed>,
    /// Each entry's line within the block, with [`MIRROR`] set for the
    /// mirror of a symmetric file's entry.
    at: Vec<u32>,
    /// Lines in the block (up to the error, if any).
    lines: u64,
    stop: Option<(u64, LineError)>,
    /// The parsing thread panicked on this block (a bug): the reading
    /// thread reports it rather than waiting for the block forever.
    panicked: bool,
}

impl Batch {
    fn clear(&mut self, rank: usize) {
        self.rank = rank;
        self.recs.clear();
        self.idx.clear();
        self.vals.clear();
        self.at.clear();
        self.lines = 0;
        self.stop = None;
        self.panicked = false;
    }

    /// Add an entry found on the block's current line.
    #[inline(always)]
    pub(crate) fn add(&mut self, idx: &[u64], v: Parsed, mirrored: bool) {
        if let Some(p) = self.packing() {
            if let Some(r) = p.pack(idx, v) {
                self.recs.push(r);
                self.add_line(mirrored);
                return;
            }
        }
        self.idx.extend_from_slice(idx);
        self.vals.push(v);
        self.add_line(mirrored);
    }

    /// The packer, while every entry so far was packed.
    #[inline(always)]
    fn packing(&self) -> Option<&Packer> {
        self.packer.as_ref().filter(|_| self.vals.is_empty())
    }

    /// Indices held so far (all entries'), for [`Self::push_index`].
    #[inline]
    pub(crate) fn index_len(&self) -> usize {
        self.idx.len()
    }

    /// An index of the entry being read: its `rank` indices are pushed,
    /// then [`Self::add_value`] ends the entry, or [`Self::drop_indices`]
    /// drops them (a line the fast path leaves to the exact one).
    #[inline]
    pub(crate) fn push_index(&mut self, i: u64) {
        self.idx.push(i);
    }

    /// Drop the indices pushed after `len` ([`Self::index_len`]).
    #[inline]
    pub(crate) fn drop_indices(&mut self, len: usize) {
        self.idx.truncate(len);
    }

    /// End the entry whose indices were pushed with [`Self::push_index`].
    #[inline]
    pub(crate) fn add_value(&mut self, v: Parsed, mirrored: bool) {
        let start = self.idx.len().saturating_sub(self.rank);
        if let Some(p) = self.packing() {
            if let Some(r) = p.pack(&self.idx[start..], v) {
                self.recs.push(r);
                self.idx.truncate(start);
                self.add_line(mirrored);
                return;
            }
        }
        self.vals.push(v);
        self.add_line(mirrored);
    }

    #[inline(always)]
    fn add_line(&mut self, mirrored: bool) {
        // A block's lines are fewer than its bytes, and a block grows past
        // its few MiB only while it holds a single line: far below 2^31.
        let line = self.lines as u32 & !MIRROR;
        self.at.push(if mirrored { line | MIRROR } else { line });
    }

    /// The entries not packed, for tests: (indices, value, mirrored).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Vec<(Vec<u64>, Parsed, bool)> {
        let r = self.rank.max(1);
        let at = self.at.get(self.recs.len()..).unwrap_or_default();
        self.idx
            .chunks(r)
            .zip(&self.vals)
            .zip(at)
            .map(|((i, &v), &a)| (i.to_vec(), v, a & MIRROR != 0))
            .collect()
    }

    /// A batch for one line's entries, for tests.
    #[cfg(test)]
    pub(crate) fn for_rank(rank: usize) -> Batch {
        Batch {
            rank,
            ..Batch::default()
        }
    }
}

/// How the lines of one format are parsed: `line` parses one line (its
/// end removed) into the batch. Must be callable from any thread.
pub(crate) trait LineParser: Sync {
    /// Indices per entry.
    fn rank(&self) -> usize;
    /// Parse one line, adding its entries (none for a blank or comment
    /// line) to `out`.
    fn line(&self, line: &[u8], out: &mut Batch) -> std::result::Result<(), LineError>;

    /// Parse a plain line straight from the bytes: `rest` is the block
    /// from the line's start; returns the bytes the line takes with its
    /// end (at least one), its entries added to `out`. `None`, with
    /// nothing added, for any line it does not fully understand (comments,
    /// errors, anything unusual): that line then goes to [`Self::line`].
    fn fast(&self, rest: &[u8], out: &mut Batch) -> Option<usize> {
        let _ = (rest, out);
        None
    }
}

/// Split `block` into lines as [`crate::input::lines::LineReader`] does
/// (`\n`, `\r\n` and a lone `\r` end a line; a last line without an end
/// counts) and parse them into `out`, stopping at the first error.
fn parse_block<P: LineParser>(p: &P, block: &[u8], first: bool, out: &mut Batch) {
    out.clear(p.rank());
    let mut rest = block;
    let mut bom = first;
    while !rest.is_empty() {
        out.lines += 1;
        // The first line may start with a byte-order mark: the exact path.
        if !bom {
            if let Some(n @ 1..) = p.fast(rest, out) {
                rest = rest.get(n..).unwrap_or_default();
                continue;
            }
        }
        let (line, next) = match memchr::memchr2(b'\n', b'\r', rest) {
            Some(e) => {
                let skip = if rest[e] == b'\r' && rest.get(e + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                (&rest[..e], &rest[e + skip..])
            }
            None => (rest, &rest[rest.len()..]),
        };
        // A byte-order mark before the input's first line is not data.
        let line = match line.strip_prefix(BOM) {
            Some(l) if bom => l,
            _ => line,
        };
        bom = false;
        if let Err(e) = p.line(line, out) {
            out.stop = Some((out.lines, e));
            return;
        }
        rest = next;
    }
}

/// Parse `line` followed by each kind of line end as a block, the way
/// the readers do (fast path first), for the tests that compare the fast
/// paths with the exact line code: the entries, and the error with
/// whether it counts as an entry. Checks that every line end gives the
/// same and that the block is one line.
#[cfg(test)]
#[allow(clippy::type_complexity)]
pub(crate) fn parse_as_block<P: LineParser>(
    p: &P,
    line: &[u8],
) -> (
    Vec<(Vec<u64>, Parsed, bool)>,
    std::result::Result<(), (String, bool)>,
) {
    let mut first = None;
    for end in [&b""[..], b"\n", b"\r\n", b"\r"] {
        let mut block = line.to_vec();
        block.extend_from_slice(end);
        if block.is_empty() {
            // No line at all.
            continue;
        }
        let mut out = Batch::default();
        parse_block(p, &block, false, &mut out);
        let got = (
            out.entries(),
            match out.stop {
                Some((at, e)) => {
                    assert_eq!(at, 1);
                    Err((e.detail, e.counts))
                }
                None => {
                    assert_eq!(out.lines, 1, "{:?}", String::from_utf8_lossy(&block));
                    Ok(())
                }
            },
        );
        match &first {
            None => first = Some(got),
            Some(f) => assert_eq!(
                format!("{f:?}"),
                format!("{got:?}"),
                "{:?}",
                String::from_utf8_lossy(&block)
            ),
        }
    }
    first.unwrap_or_else(|| (Vec::new(), Ok(())))
}

/// Where the lines come from: a reader, or the bytes of a mapped file
/// (parsed where they are: no copy into blocks).
pub(crate) enum Text<'m, R> {
    Reader(R),
    Bytes(&'m [u8]),
}

/// A block handed to a parsing thread: a filled buffer and its length, or
/// a range of the mapped bytes.
enum Block {
    Owned(Vec<u8>, usize),
    Mapped(usize, usize),
}

impl Block {
    fn bytes<'a>(&'a self, mapped: &'a [u8]) -> &'a [u8] {
        match self {
            Block::Owned(b, n) => &b[..*n],
            Block::Mapped(s, e) => &mapped[*s..*e],
        }
    }

    fn len(&self) -> usize {
        match self {
            Block::Owned(_, n) => *n,
            Block::Mapped(s, e) => e - s,
        }
    }

    /// The buffer, for the next block (none for a mapped one).
    fn into_buf(self) -> Vec<u8> {
        match self {
            Block::Owned(b, _) => b,
            Block::Mapped(..) => Vec::new(),
        }
    }
}

/// The blocks of a [`Text`], each ending at a line end (but the last).
enum Blocks<'m, R> {
    Reader(ReadBlocks<R>),
    Bytes { data: &'m [u8], pos: usize },
}

impl<R: Read> Blocks<'_, R> {
    /// The next block (in `buf`, when read); `None` at the end of the
    /// input or after a read error.
    fn next(&mut self, buf: Vec<u8>) -> Option<Block> {
        match self {
            Blocks::Reader(r) => r.next(buf).map(|(b, n)| Block::Owned(b, n)),
            Blocks::Bytes { data, pos } => {
                let start = *pos;
                let rest = data.get(start..).filter(|r| !r.is_empty())?;
                *pos = start + mapped_cut(rest, MAPPED_BLOCK);
                Some(Block::Mapped(start, *pos))
            }
        }
    }

    /// The read error that ended the input, if any.
    fn failed(&mut self) -> Option<std::io::Error> {
        match self {
            Blocks::Reader(r) => r.failed.take(),
            Blocks::Bytes { .. } => None,
        }
    }

    /// Blocks in flight per parsing thread.
    fn ahead(&self) -> usize {
        match self {
            Blocks::Reader(_) => AHEAD,
            Blocks::Bytes { .. } => MAPPED_AHEAD,
        }
    }
}

/// Where the first block of `rest` ends: after the last line end within
/// `want` bytes (a `\r\n` kept whole), after the first line end past them
/// if there is none, or at the end of `rest`. The blocks of [`ReadBlocks`]
/// end at the same kind of place, so both give the same lines.
fn mapped_cut(rest: &[u8], want: usize) -> usize {
    if rest.len() <= want {
        return rest.len();
    }
    let end = memchr::memrchr2(b'\n', b'\r', &rest[..want])
        .or_else(|| memchr::memchr2(b'\n', b'\r', &rest[want..]).map(|q| want + q));
    match end {
        Some(p) if rest[p] == b'\r' && rest.get(p + 1) == Some(&b'\n') => p + 2,
        Some(p) => p + 1,
        None => rest.len(),
    }
}

/// Reads blocks that end at a line end (except the last one).
struct ReadBlocks<R> {
    r: R,
    carry: Vec<u8>,
    eof: bool,
    /// A read error: the lines before it are parsed, then it is reported.
    failed: Option<std::io::Error>,
}

impl<R: Read> ReadBlocks<R> {
    /// The next block: its bytes are `buf[..len]` of the returned
    /// `(buf, len)` (the rest of `buf` stays allocated and initialised for
    /// the next use, so reusing a buffer costs no clearing); `None` at the
    /// end of the input or after a read error.
    fn next(&mut self, mut buf: Vec<u8>) -> Option<(Vec<u8>, usize)> {
        if self.eof {
            return None;
        }
        let mut len = self.carry.len();
        if buf.len() < len {
            buf.resize(len, 0);
        }
        buf[..len].copy_from_slice(&self.carry);
        self.carry.clear();
        let mut want = BLOCK;
        loop {
            if buf.len() < want {
                buf.resize(want, 0);
            }
            while len < want {
                match self.r.read(&mut buf[len..want]) {
                    Ok(0) => {
                        self.eof = true;
                        break;
                    }
                    Ok(k) => len += k,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => {
                        self.failed = Some(e);
                        self.eof = true;
                        break;
                    }
                }
            }
            if self.eof && self.failed.is_none() {
                return (len > 0).then_some((buf, len));
            }
            // Cut after the last line end; a `\r` as the very last byte
            // may be the first half of a `\r\n`, so it is not a cut point
            // until the next byte is known.
            let data = &buf[..len];
            let cut = if data.last() == Some(&b'\n') {
                Some(len)
            } else {
                memchr::memrchr2(b'\n', b'\r', &data[..len.saturating_sub(1)]).map(|p| p + 1)
            };
            match cut {
                Some(c) => {
                    if self.failed.is_none() {
                        self.carry.extend_from_slice(&buf[c..len]);
                    }
                    return (c > 0).then_some((buf, c));
                }
                // One line longer than the block: read on.
                None if self.failed.is_none() => want = want.saturating_mul(2),
                None => return None,
            }
        }
    }
}

/// Entries handed to a sink together, in order: the first ones packed
/// into the builder's records (when the parsing threads had a [`Packer`]),
/// the others as `rank` indices per entry and a value; and the line each
/// came from.
pub(crate) struct Entries<'b> {
    rank: usize,
    packed: &'b [Record<u64>],
    idx: &'b [u64],
    vals: &'b [Parsed],
    /// Lines before the block: an entry's line is `base + at` (less the
    /// [`MIRROR`] bit).
    base: u64,
    at: &'b [u32],
}

impl<'b> Entries<'b> {
    /// One entry (the dense MatrixMarket reader's).
    pub(crate) fn one(e: &'b Entry<'b>) -> Entries<'b> {
        Entries {
            rank: e.idx.len(),
            packed: &[],
            idx: e.idx,
            vals: std::slice::from_ref(&e.v),
            base: e.at,
            at: if e.mirrored { &[MIRROR] } else { &[0] },
        }
    }

    /// The first entries, as records made by the sink's builder's
    /// [`Packer`] (the one given to [`parse_lines`]).
    pub(crate) fn packed(&self) -> &'b [Record<u64>] {
        self.packed
    }

    /// The entries after the packed ones: their indices (`rank` per entry)
    /// and values.
    pub(crate) fn unpacked(&self) -> (&'b [u64], &'b [Parsed]) {
        (self.idx, self.vals)
    }

    pub(crate) fn len(&self) -> usize {
        self.at.len()
    }

    /// Entry `k`'s line.
    pub(crate) fn line(&self, k: usize) -> u64 {
        self.base + self.at.get(k).map_or(0, |&a| u64::from(a & !MIRROR))
    }

    /// The entries that are lines of the file (not mirrors).
    pub(crate) fn own(&self) -> u64 {
        self.at.iter().filter(|&&a| a & MIRROR == 0).count() as u64
    }

    /// Whether entry `k` is the mirror of its line's entry.
    #[inline]
    pub(crate) fn mirrored(&self, k: usize) -> bool {
        self.at.get(k).is_some_and(|&a| a & MIRROR != 0)
    }

    /// Entry `k`'s indices, if it is not packed.
    pub(crate) fn index(&self, k: usize) -> Option<&'b [u64]> {
        let u = k.checked_sub(self.packed.len())?;
        self.idx.get(u * self.rank..(u + 1) * self.rank)
    }

    /// Entry `k`, if it is not packed (a sink without a packer gets every
    /// entry unpacked).
    pub(crate) fn get(&self, k: usize) -> Option<Entry<'b>> {
        let v = *self.vals.get(k.checked_sub(self.packed.len())?)?;
        Some(Entry {
            at: self.line(k),
            idx: self.index(k)?,
            v,
            mirrored: self.mirrored(k),
        })
    }

    /// The first `k` entries.
    fn prefix(&self, k: usize) -> Entries<'b> {
        let p = k.min(self.packed.len());
        let u = k - p;
        Entries {
            rank: self.rank,
            packed: &self.packed[..p],
            idx: &self.idx[..u * self.rank],
            vals: &self.vals[..u],
            base: self.base,
            at: &self.at[..k],
        }
    }

    /// The entry a push of these entries (the packed ones, then one
    /// `push_many` of the others) failed on. Packed entries passed the
    /// builder's checks; a push stops at the first entry the builder
    /// refuses and every entry before it passed the same checks, so the
    /// first unpacked entry that matches what the error names is the one.
    /// `None` for an error that names no entry (spill I/O, a sorting
    /// thread's failure): no line is to blame.
    pub(crate) fn failed(&self, err: &Error) -> Option<usize> {
        let n = self.vals.len();
        let found = match err {
            Error::IndexOutOfRange { dim, index, .. } => {
                (0..n).find(|&k| self.idx.get(k * self.rank + dim) == Some(index))
            }
            Error::InvalidValue { value, .. } => {
                (0..n).find(|&k| self.vals[k].to_string() == *value)
            }
            _ => None,
        };
        found.map(|k| k + self.packed.len())
    }
}

/// Where parsed entries go, a batch at a time: a builder, or a search for
/// a coordinate.
pub(crate) type BatchSink<'a> = &'a mut dyn FnMut(&Entries<'_>) -> Result<()>;

/// Sees the entries and the error lines in file order, before the sink:
/// lets MatrixMarket count entries against its size line.
pub(crate) trait Order {
    /// `Ok`, or the first entry that must not reach the sink with the
    /// error it gives (the entries before it do reach the sink).
    fn entries(&mut self, e: &Entries<'_>) -> std::result::Result<(), (usize, Error)>;
    /// A line that failed to parse, before its error is reported.
    fn error_line(&mut self, line: u64, e: &LineError) -> Result<()>;
}

/// No order to check (the text format).
pub(crate) struct AnyOrder;

impl Order for AnyOrder {
    fn entries(&mut self, _: &Entries<'_>) -> std::result::Result<(), (usize, Error)> {
        Ok(())
    }
    fn error_line(&mut self, _: u64, _: &LineError) -> Result<()> {
        Ok(())
    }
}

/// Parse the lines of `input` (the first being line `first_line + 1`)
/// with `p` on `workers` threads (on this thread when `workers <= 1`),
/// giving the entries of each block to `sink` in input order, after
/// `order` has seen them. With a `packer`, the parsing threads also pack
/// each block's entries into the builder's records ([`Entries::packed`]).
/// Returns the lines read.
#[allow(clippy::too_many_arguments)]
pub(crate) fn parse_lines<R: Read, P: LineParser>(
    input: Text<'_, R>,
    p: &P,
    source: &str,
    first_line: u64,
    workers: usize,
    packer: Option<&Packer>,
    progress: Progress<'_>,
    order: &mut dyn Order,
    sink: BatchSink<'_>,
) -> Result<u64> {
    let (mut blocks, mapped) = match input {
        Text::Reader(r) => (
            Blocks::Reader(ReadBlocks {
                r,
                carry: Vec::new(),
                eof: false,
                failed: None,
            }),
            &[][..],
        ),
        Text::Bytes(data) => (Blocks::Bytes { data, pos: 0 }, data),
    };
    let mut state = Consumer {
        source,
        line: first_line,
        bytes: 0,
        order,
        sink,
        progress,
    };
    if workers <= 1 {
        let mut buf = Vec::new();
        let mut batch = Batch::default();
        let mut first = first_line == 0;
        while let Some(block) = blocks.next(std::mem::take(&mut buf)) {
            if batch.packer.is_none() {
                batch.packer = packer.cloned();
            }
            parse_block(p, block.bytes(mapped), first, &mut batch);
            first = false;
            state.consume(&batch, block.len())?;
            buf = block.into_buf();
        }
    } else {
        std::thread::scope(|s| -> Result<()> {
            let (work_tx, work_rx) = crossbeam_channel::unbounded::<(u64, Block, Batch)>();
            let (done_tx, done_rx) = crossbeam_channel::unbounded::<(u64, Block, Batch)>();
            for w in 0..workers {
                let (work_rx, done_tx) = (work_rx.clone(), done_tx.clone());
                std::thread::Builder::new()
                    .name(format!("coo-parse-{w}"))
                    .spawn_scoped(s, move || {
                        for (seq, block, mut batch) in work_rx {
                            let first = seq == 0 && first_line == 0;
                            if batch.packer.is_none() {
                                // Once per batch: batches are reused.
                                batch.packer = packer.cloned();
                            }
                            let parse = std::panic::AssertUnwindSafe(|| {
                                parse_block(p, block.bytes(mapped), first, &mut batch)
                            });
                            if std::panic::catch_unwind(parse).is_err() {
                                batch.panicked = true;
                            }
                            if done_tx.send((seq, block, batch)).is_err() {
                                break;
                            }
                        }
                    })
                    .map_err(|e| Error::io("start a parsing thread for", source, e))?;
            }
            drop(done_tx);
            // Some blocks per worker, and one more read ahead.
            let in_flight = (workers * blocks.ahead()) as u64 + 1;
            let mut free: Vec<(Vec<u8>, Batch)> = Vec::new();
            let mut ready: BTreeMap<u64, (Block, Batch)> = BTreeMap::new();
            let (mut sent, mut taken, mut end) = (0u64, 0u64, false);
            loop {
                while !end && sent - taken < in_flight {
                    let (buf, batch) = free.pop().unwrap_or_default();
                    match blocks.next(buf) {
                        Some(block) => {
                            // The workers live until work_tx is dropped.
                            let _ = work_tx.send((sent, block, batch));
                            sent += 1;
                        }
                        None => end = true,
                    }
                }
                if taken == sent {
                    return Ok(());
                }
                let (block, batch) = loop {
                    if let Some(b) = ready.remove(&taken) {
                        break b;
                    }
                    let (seq, block, batch) = done_rx
                        .recv()
                        .map_err(|_| Error::Poisoned("input parsing threads"))?;
                    ready.insert(seq, (block, batch));
                };
                taken += 1;
                state.consume(&batch, block.len())?;
                free.push((block.into_buf(), batch));
            }
        })?;
    }
    if let Some(e) = blocks.failed() {
        return Err(read_error(source, state.line + 1, e));
    }
    (state.progress)(state.bytes);
    Ok(state.line)
}

/// The reading thread's side: line numbers, progress, the sink.
struct Consumer<'a, 's> {
    source: &'a str,
    /// Lines before the next block.
    line: u64,
    bytes: u64,
    order: &'a mut dyn Order,
    sink: BatchSink<'s>,
    progress: Progress<'a>,
}

impl Consumer<'_, '_> {
    fn consume(&mut self, b: &Batch, len: usize) -> Result<()> {
        if b.panicked {
            return Err(Error::Poisoned("input parser (a parsing thread panicked)"));
        }
        let e = Entries {
            rank: b.rank,
            idx: &b.idx,
            vals: &b.vals,
            packed: &b.recs,
            base: self.line,
            at: &b.at,
        };
        match self.order.entries(&e) {
            Ok(()) if e.len() > 0 => (self.sink)(&e)?,
            Ok(()) => {}
            Err((k, err)) => {
                if k > 0 {
                    (self.sink)(&e.prefix(k))?;
                }
                return Err(err);
            }
        }
        if let Some((at, e)) = &b.stop {
            let line = self.line + at;
            self.order.error_line(line, e)?;
            return Err(input_err(
                self.source,
                format!("line {line}"),
                e.detail.clone(),
            ));
        }
        self.line += b.lines;
        self.bytes += len as u64;
        (self.progress)(self.bytes);
        Ok(())
    }
}

/// The position of the first byte at or after `n` that is not a blank
/// between fields (space, tab, form feed: what `split_ascii_whitespace`
/// splits at, less the line ends).
#[inline]
pub(crate) fn skip_blanks(b: &[u8], mut n: usize) -> usize {
    while matches!(b.get(n), Some(b' ' | b'\t' | b'\x0C')) {
        n += 1;
    }
    n
}

/// After a line's last field, at `n`: trailing blanks, then the line end
/// (`\n`, `\r\n`, a lone `\r`, or the end of the block). Returns the
/// bytes the line takes with its end; `None` if anything else follows.
#[inline]
pub(crate) fn line_end(b: &[u8], n: usize) -> Option<usize> {
    let n = skip_blanks(b, n);
    match b.get(n) {
        None => Some(n),
        Some(b'\n') => Some(n + 1),
        Some(b'\r') if b.get(n + 1) == Some(&b'\n') => Some(n + 2),
        Some(b'\r') => Some(n + 1),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records every line as one entry whose index is its length; "bad"
    /// lines fail.
    struct Lens;
    impl LineParser for Lens {
        fn rank(&self) -> usize {
            1
        }
        fn line(&self, line: &[u8], out: &mut Batch) -> std::result::Result<(), LineError> {
            if line == b"bad" {
                return Err(LineError::plain("bad line"));
            }
            out.add(&[line.len() as u64], Parsed::I(line.len() as i64), false);
            Ok(())
        }
    }

    /// A reader that gives at most `n` bytes per read.
    struct Trickle<'a>(&'a [u8], usize);
    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let k = self.0.len().min(self.1).min(buf.len());
            buf[..k].copy_from_slice(&self.0[..k]);
            self.0 = &self.0[k..];
            Ok(k)
        }
    }

    /// Parse `data` read `trickle` bytes at a time, or mapped (`None`).
    fn run(data: &[u8], workers: usize, trickle: Option<usize>) -> Result<Vec<(u64, u64)>> {
        let mut got = Vec::new();
        let input = match trickle {
            Some(t) => Text::Reader(Trickle(data, t)),
            None => Text::Bytes(data),
        };
        parse_lines(
            input,
            &Lens,
            "t",
            0,
            workers,
            None,
            &mut |_| {},
            &mut AnyOrder,
            &mut |b| {
                for k in 0..b.len() {
                    let e = b.get(k).unwrap();
                    got.push((e.at, e.idx[0]));
                }
                Ok(())
            },
        )?;
        Ok(got)
    }

    #[test]
    fn lines_match_the_line_reader_across_blocks() {
        // Lines of every length around the block size, every line end.
        let mut data = Vec::new();
        let mut want = Vec::new();
        let ends: [&[u8]; 3] = [b"\n", b"\r\n", b"\r"];
        for i in 0..40u64 {
            let len = (i * 77_777) % (BLOCK as u64 + 3);
            data.extend(std::iter::repeat_n(b'x', len as usize));
            data.extend_from_slice(ends[i as usize % 3]);
            want.push((i + 1, len));
        }
        data.extend_from_slice(b"tail");
        want.push((41, 4));
        for workers in [1, 2, 3] {
            for trickle in [Some(usize::MAX), Some(4099), None] {
                assert_eq!(run(&data, workers, trickle).unwrap(), want);
            }
        }
        // A BOM on the first line only.
        for trickle in [Some(1), None] {
            let got = run(b"\xEF\xBB\xBFab\r\n\xEF\xBB\xBF", 2, trickle).unwrap();
            assert_eq!(got, vec![(1, 2), (2, 3)]);
            assert!(run(b"", 2, trickle).unwrap().is_empty());
        }
    }

    /// A mapped input's blocks end where a read one's do: never between
    /// the halves of a `\r\n`, whatever falls on a block's last byte.
    #[test]
    fn mapped_blocks_keep_every_line_end_whole() {
        for shift in 0..4 {
            for end in [&b"\r\n"[..], b"\r", b"\n", b"\r\r"] {
                let mut data = Vec::new();
                let mut want = Vec::new();
                let mut line = 0;
                for len in [MAPPED_BLOCK - 2 - shift, 3, MAPPED_BLOCK + 5, 0, 7] {
                    data.extend(std::iter::repeat_n(b'y', len));
                    data.extend_from_slice(end);
                    line += 1;
                    want.push((line, len as u64));
                    if end == b"\r\r" {
                        // Two line ends: an empty line after each.
                        line += 1;
                        want.push((line, 0));
                    }
                }
                for workers in [1, 2] {
                    assert_eq!(run(&data, workers, None).unwrap(), want);
                    assert_eq!(run(&data, workers, Some(usize::MAX)).unwrap(), want);
                }
            }
        }
    }

    /// Gives its bytes, then fails.
    struct Broken<'a>(&'a [u8]);
    impl Read for Broken<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Err(std::io::Error::new(ErrorKind::InvalidData, "corrupt"));
            }
            let k = self.0.len().min(buf.len());
            buf[..k].copy_from_slice(&self.0[..k]);
            self.0 = &self.0[k..];
            Ok(k)
        }
    }

    #[test]
    fn a_read_error_names_the_line_it_broke() {
        for workers in [1, 2] {
            let mut got = Vec::new();
            let e = parse_lines(
                Text::Reader(Broken(b"a\nbb\nccc")),
                &Lens,
                "t",
                0,
                workers,
                None,
                &mut |_| {},
                &mut AnyOrder,
                &mut |b| {
                    got.extend((0..b.len()).map(|k| b.line(k)));
                    Ok(())
                },
            )
            .unwrap_err()
            .to_string();
            // The complete lines are parsed; the broken one is line 3.
            assert_eq!(got, vec![1, 2]);
            assert!(e.contains("t:line 3") && e.contains("cannot decode"), "{e}");
        }
    }

    #[test]
    fn the_first_error_in_line_order_wins() {
        let mut data = b"a\n".repeat(BLOCK);
        data.extend_from_slice(b"bad\n");
        data.extend(b"a\n".repeat(BLOCK));
        data.extend_from_slice(b"bad\n");
        for workers in [1, 2] {
            for trickle in [Some(usize::MAX), None] {
                let e = run(&data, workers, trickle).unwrap_err().to_string();
                assert!(e.contains(&format!("t:line {}", BLOCK + 1)), "{e}");
            }
        }
    }
}
