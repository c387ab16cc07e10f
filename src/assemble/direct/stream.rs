//! The kernel with a file for its result: binary records read in place
//! (a mapped bin input) and the bands written, in order, as one sorted
//! stream into the Hurray file's tensor writer. Nothing is spilled and
//! no result is held: memory is the kernel's working memory (inside the
//! budget) and the writer's buffers, and the input's mapped pages are
//! given back as they are read, so the resident set stays within the
//! budget whatever the input's size.
//!
//! The entries reach the writer in the order, and with the values, the
//! builder's final merge gives it (the same combiners, the same writer,
//! the same `push_batch` calls), so the file is byte for byte the one
//! [`crate::Builder`] writes for the same records.
//!
//! Taken only where it pays: the input must fit in the page cache (it is
//! read once to count and once per band that meets it) and be local
//! (input in element order meets few bands per chunk). Otherwise, and on
//! any contribution a push would refuse or coordinate that does not
//! combine, the caller runs the builder, which reports such errors naming
//! the record.

use crate::assemble::combine::{CombinerKind, FloatSum, with_combiner};
use crate::assemble::direct::band::{self, BandSink, Minor};
use crate::assemble::direct::count::RELEASE_CHUNKS;
use crate::assemble::direct::input::{
    Checked, Cols, F64Bits, Held, IndexElem, Input, One, Pair, RawChecked, RawKeep, RecordKey,
    Records, Source, Triples, raw_decoder,
};
use crate::assemble::direct::lane::{
    ComplexExactF64, ComplexReduce, ExactF64, RawReduce, Reduce, raw_to_value,
};
use crate::assemble::direct::{
    ArrayInput, DirectPlan, DirectValue, Failure, Fault, Scheme, bits_of,
};
use crate::assemble::plan::OUTPUT_BUFFER_BYTES;
use crate::assemble::summary::Summary;
use crate::budget::Budget;
use crate::element::{DType, Value};
use crate::error::{Error, Result};
use crate::options::{AssembleOptions, NonFinitePolicy};
use crate::read::release::physical_memory;
use crate::write::{FileWriter, Placed, TensorWriter, WriteOptions};
use crate::xxh3::{Chain, Part};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Entries handed to the tensor writer at once (as the merge does).
const STAGE: usize = 1024;
/// Chunks sampled to judge the input's locality before counting.
const SAMPLES: usize = 32;

/// Run `$body` with `$red` bound to the reducer the plan's combiner
/// needs, its final values as raw lanes (`stream`'s sink turns them back
/// into values): the exact f64 fast path, or any combiner.
macro_rules! with_file_reducer {
    ($plan:expr, $red:ident => $body:expr) => {
        if $plan.kind == CombinerKind::FloatSum && $plan.dtype == DType::F64 {
            let $red = &ExactF64 {
                general: RawReduce {
                    comb: &FloatSum(DType::F64),
                    drop_zeros: $plan.drop_zeros,
                },
            };
            $body
        } else {
            with_combiner!($plan.kind, $plan.dtype, comb => {
                let $red = &RawReduce { comb: &comb, drop_zeros: $plan.drop_zeros };
                $body
            })
        }
    };
}

/// How a band entry becomes an index tuple.
enum Tuple<'a> {
    /// A matrix: (bucket, minor) placed by the major dimension.
    Matrix { major: usize },
    /// Any rank: unpacked from `bucket << split | minor`.
    Packed {
        shifts: &'a [u32],
        bits: &'a [u32],
        split: u32,
    },
}

/// The tensor writer and the entries on their way to it.
struct Staged<'t, 'w> {
    tw: &'t mut TensorWriter<'w>,
    idx: Vec<u64>,
    vals: Vec<Value>,
}

impl Staged<'_, '_> {
    fn flush(&mut self) -> Result<()> {
        let r = self.tw.push_batch(&self.idx, &self.vals);
        self.idx.clear();
        self.vals.clear();
        r
    }
}

/// What a run of the kernel into a sink did.
pub(crate) struct Streamed {
    /// Entries written.
    nnz: u64,
    /// Zeros `drop_zeros` dropped.
    dropped: u64,
    /// Most bytes the kernel's buffers held.
    peak: u64,
    /// Contributions `skip_negative` skipped.
    skipped: u64,
}

/// What a kernel run into a file gave.
enum Filled {
    Done(Summary),
    /// Not this path: nothing was written.
    NotHere,
    Failed(Failure),
}

/// Index entries encoded at a time by a band written in place.
const PLACE_CHUNK: usize = 32 * 1024;
/// A worker's in-place scratch beyond its band's hashes: one chunk of
/// encoded index words.
const PLACE_WORDS_BYTES: u64 = (PLACE_CHUNK * 2 * 8) as u64;

/// The kernel's plan for a run whose result goes to a file: `plan`'s, its
/// budget also holding the file sink's memory (the writer's buffers, each
/// worker's in-place scratch) and `held`, bytes the caller holds through
/// the run (records kept, or a mapped input's pages read between two
/// releases: [`mapped_window`]), so that everything the run holds stays
/// within the caller's budget.
pub(crate) fn file_plan(
    shape: &[u64],
    dtype: DType,
    contributions: u64,
    opts: &AssembleOptions,
    held: u64,
) -> Option<DirectPlan> {
    let mut budget = Budget::new(opts.memory_budget);
    budget.try_take(
        "the file writer and in-place scratch",
        OUTPUT_BUFFER_BYTES + opts.threads as u64 * PLACE_WORDS_BYTES,
    )?;
    budget.try_take("the records held", held)?;
    let inner = Budget::new(budget.left());
    let mut p = super::plan_within(shape, dtype, contributions, opts, inner)?;
    let inner_parts = std::mem::take(&mut p.budget_parts);
    p.budget_parts = budget.parts().iter().copied().chain(inner_parts).collect();
    // A band written in place keeps its hashes: 64 bytes per KiB written,
    // 1.5 bytes per entry (24 written), against at least 12 bytes of
    // scratch per entry: an eighth more.
    p.worker_bytes = p.worker_bytes / 9 * 8;
    Some(p)
}

/// Bytes of a mapped input of `rec`-byte records that `threads` workers
/// hold resident at most: each reads [`RELEASE_CHUNKS`] chunks between
/// two releases.
pub(crate) fn mapped_window(threads: usize, rec: usize) -> u64 {
    (threads * RELEASE_CHUNKS * super::CHUNK * rec) as u64
}

/// The bands into a tensor writer, in band order: each band waits for the
/// bands before it to be taken ([`Order`]). A COO f64 matrix is written in
/// place ([`InPlace`]): each band's bytes go to their places in the file
/// and are hashed by the band's own thread, and only the statistics and
/// the joining of the hashes wait for the bands before. Anything else goes
/// through the tensor writer's `push_batch`, as the builder's final merge
/// does, one band at a time.
struct FileSink<'t, 'w, 'a> {
    staged: Mutex<Staged<'t, 'w>>,
    dtype: DType,
    rank: usize,
    tuple: Tuple<'a>,
    /// The writer's error, when a put failed.
    error: Mutex<Option<Error>>,
    order: Mutex<Order>,
    turn: Condvar,
    in_place: Option<InPlace>,
    /// The caller's stop flag, for the bands.
    stop: Option<&'a AtomicBool>,
}

/// The stream order of the bands' puts.
#[derive(Default)]
struct Order {
    /// Entries taken so far: the band whose entries start here is next.
    next: usize,
    /// A put failed, why: no later band is taken, and each says the same.
    failed: Option<Fault>,
    /// The last coordinate taken (in place).
    last: Option<(u64, u64)>,
    /// The values' and the indices' hashes, joined in stream order.
    values: Chain,
    indices: Chain,
}

/// Writing in place: the file's places and each thread's scratch.
struct InPlace {
    placed: Placed,
    shape: [u64; 2],
    /// Scratch of the threads not writing now.
    pool: Mutex<Vec<PlaceScratch>>,
}

#[derive(Default)]
struct PlaceScratch {
    values: Part,
    indices: Part,
    /// Encoded indices, little-endian words.
    words: Vec<u64>,
}

impl PlaceScratch {
    fn buffer_bytes(&self) -> usize {
        self.values.buffer_bytes() + self.indices.buffer_bytes() + self.words.capacity() * 8
    }
}

/// Marks the order failed when a put ends without taking its band (an
/// error, or a panic), so that no later band waits for it.
struct TurnGuard<'s> {
    order: &'s Mutex<Order>,
    turn: &'s Condvar,
    armed: bool,
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            let mut o = self.order.lock().unwrap_or_else(|e| e.into_inner());
            o.failed.get_or_insert(Fault::Panicked);
            drop(o);
            self.turn.notify_all();
        }
    }
}

/// The coordinates of band entries `from..` (bucket `lo + j` ending at
/// `ends[j]`), two little-endian words each, into `out`, at most `n`.
fn encode_entries<M: Minor>(
    lo: u64,
    minor: &[M],
    ends: &[u32],
    from: usize,
    n: usize,
    out: &mut Vec<u64>,
) {
    out.clear();
    let to = (from + n).min(minor.len());
    let mut j = ends.partition_point(|&e| e as usize <= from);
    let mut i = from;
    while i < to {
        let Some(&end) = ends.get(j) else {
            return;
        };
        let row = (lo + j as u64).to_le();
        let stop = (end as usize).min(to);
        for m in &minor[i..stop] {
            out.push(row);
            out.push(m.to_u64().to_le());
        }
        i = stop;
        j += 1;
    }
}

impl<M: Minor> BandSink<M, u64> for FileSink<'_, '_, '_> {
    // Bands are ordered by the sink itself (`Order`), by their offsets.
    fn in_order(&self) -> bool {
        false
    }

    fn put(
        &self,
        off: usize,
        lo: u64,
        minor: &[M],
        lanes: &[u64],
        ends: &[u32],
    ) -> Result<(), Fault> {
        self.take_band(off, minor.len(), || match &self.in_place {
            Some(ip) => self.put_in_place(ip, off, lo, minor, lanes, ends),
            None => self
                .wait_turn(off)
                .and_then(|o| self.put_staged(lo, minor, lanes, ends).map(|()| o)),
        })
    }

    fn stop(&self) -> Option<&AtomicBool> {
        self.stop
    }
}

/// Complex values: both parts in one lane, through `push_batch`.
impl<M: Minor> BandSink<M, [u64; 2]> for FileSink<'_, '_, '_> {
    fn in_order(&self) -> bool {
        false
    }

    fn put(
        &self,
        off: usize,
        lo: u64,
        minor: &[M],
        lanes: &[[u64; 2]],
        ends: &[u32],
    ) -> Result<(), Fault> {
        self.take_band(off, minor.len(), || {
            self.wait_turn(off)
                .and_then(|o| self.put_staged(lo, minor, lanes, ends).map(|()| o))
        })
    }

    fn stop(&self) -> Option<&AtomicBool> {
        self.stop
    }
}

/// A lane as the value the tensor writer takes.
trait StagedLane: Copy {
    fn value(self, dtype: DType) -> Value;
}

impl StagedLane for u64 {
    #[inline(always)]
    fn value(self, dtype: DType) -> Value {
        raw_to_value(dtype, self)
    }
}

impl StagedLane for [u64; 2] {
    /// The parts' final values, already rounded to the part type.
    #[inline(always)]
    fn value(self, _: DType) -> Value {
        Value::Complex(f64::from_bits(self[0]), f64::from_bits(self[1]))
    }
}

impl FileSink<'_, '_, '_> {
    /// Take the band of `w` entries at `off` by `write` (which returns
    /// with the band's turn held), then pass the turn on; a failure stops
    /// every later band.
    fn take_band<'s>(
        &'s self,
        off: usize,
        w: usize,
        write: impl FnOnce() -> Result<MutexGuard<'s, Order>, Fault>,
    ) -> Result<(), Fault> {
        if w == 0 {
            // Nothing to write; the next band's entries start at `off` too.
            return Ok(());
        }
        let mut guard = TurnGuard {
            order: &self.order,
            turn: &self.turn,
            armed: true,
        };
        let mut o = match write() {
            Ok(o) => o,
            Err(f) => {
                let mut o = self.order.lock().unwrap_or_else(|e| e.into_inner());
                let f = *o.failed.get_or_insert(f);
                drop(o);
                guard.armed = false;
                self.turn.notify_all();
                return Err(f);
            }
        };
        o.next = off + w;
        drop(o);
        guard.armed = false;
        self.turn.notify_all();
        Ok(())
    }
}

impl FileSink<'_, '_, '_> {
    /// Wait until the bands before the one at `off` are taken.
    fn wait_turn(&self, off: usize) -> Result<MutexGuard<'_, Order>, Fault> {
        let mut o = self.order.lock().unwrap_or_else(|e| e.into_inner());
        while o.next != off && o.failed.is_none() {
            o = self.turn.wait(o).unwrap_or_else(|e| e.into_inner());
        }
        match o.failed {
            Some(f) => Err(f),
            None => Ok(o),
        }
    }

    /// One band written in place: its bytes and hashes on this thread,
    /// then, in its turn, the statistics and the joining of the hashes.
    fn put_in_place<M: Minor>(
        &self,
        ip: &InPlace,
        off: usize,
        lo: u64,
        minor: &[M],
        lanes: &[u64],
        ends: &[u32],
    ) -> Result<MutexGuard<'_, Order>, Fault> {
        let w = minor.len();
        let rows = ends.len();
        // In range and in order: rows by construction, minors checked.
        if lanes.len() != w
            || rows == 0
            || lo.checked_add(rows as u64).is_none_or(|e| e > ip.shape[0])
            || ends.last().is_none_or(|&e| e as usize != w)
        {
            return Err(Fault::BadInput);
        }
        let mut start = 0usize;
        for &end in ends {
            let end = end as usize;
            let Some(b) = minor.get(start..end) else {
                return Err(Fault::BadInput);
            };
            if b.iter().any(|m| m.to_u64() >= ip.shape[1])
                || b.windows(2).any(|p| p[0].to_u64() >= p[1].to_u64())
            {
                return Err(Fault::BadInput);
            }
            start = end;
        }
        let mut sc = ip
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop()
            .unwrap_or_default();
        let r = self.write_in_place(ip, &mut sc, off, lo, minor, lanes, ends);
        let r = r.and_then(|()| {
            let first = (
                lo + ends.partition_point(|&e| e == 0) as u64,
                minor[0].to_u64(),
            );
            let last = (lo + rows as u64 - 1, minor[w - 1].to_u64());
            let mut o = self.wait_turn(off)?;
            if o.last.is_some_and(|l| l >= first) {
                return Err(Fault::BadInput);
            }
            let vt = w.min(128);
            let vlast: Vec<u8> = lanes[w - vt..]
                .iter()
                .flat_map(|l| l.to_le_bytes())
                .collect();
            let mut ilast = Vec::new();
            let it = w.min(64);
            encode_entries(lo, minor, ends, w - it, it, &mut ilast);
            let ibytes: Vec<u8> = ilast
                .iter()
                .flat_map(|x| u64::from_le(*x).to_le_bytes())
                .collect();
            o.values.append(&sc.values, &vlast);
            o.indices.append(&sc.indices, &ibytes);
            o.last = Some(last);
            let mut g = self.staged.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = g.tw.placed_commit(
                w as u64,
                &[last.0, last.1],
                lanes.iter().map(|&l| f64::from_bits(l)),
            ) {
                return Err(self.failed(e));
            }
            drop(g);
            Ok(o)
        });
        ip.pool.lock().unwrap_or_else(|e| e.into_inner()).push(sc);
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn write_in_place<M: Minor>(
        &self,
        ip: &InPlace,
        sc: &mut PlaceScratch,
        off: usize,
        lo: u64,
        minor: &[M],
        lanes: &[u64],
        ends: &[u32],
    ) -> Result<(), Fault> {
        let w = minor.len();
        // The values: the lanes are the f64 bits.
        sc.values.start_sized(off as u64, w as u64);
        if cfg!(target_endian = "little") {
            sc.values.push_le(lanes);
            ip.placed
                .write_values(off as u64, bytemuck::cast_slice(lanes))
                .map_err(|e| self.failed(e))?;
        } else {
            for (k, c) in lanes.chunks(PLACE_CHUNK).enumerate() {
                sc.words.clear();
                sc.words.extend(c.iter().map(|l| l.to_le()));
                sc.values.push_le(&sc.words);
                ip.placed
                    .write_values(
                        (off + k * PLACE_CHUNK) as u64,
                        bytemuck::cast_slice(&sc.words),
                    )
                    .map_err(|e| self.failed(e))?;
            }
        }
        sc.indices.start_sized(2 * off as u64, 2 * w as u64);
        let mut i = 0usize;
        while i < w {
            encode_entries(lo, minor, ends, i, PLACE_CHUNK, &mut sc.words);
            sc.indices.push_le(&sc.words);
            ip.placed
                .write_indices((off + i) as u64, bytemuck::cast_slice(&sc.words))
                .map_err(|e| self.failed(e))?;
            i += PLACE_CHUNK;
        }
        Ok(())
    }

    /// One band through the tensor writer's `push_batch`, in its turn.
    fn put_staged<M: Minor, L: StagedLane>(
        &self,
        lo: u64,
        minor: &[M],
        lanes: &[L],
        ends: &[u32],
    ) -> Result<(), Fault> {
        let mut g = self.staged.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut *g;
        let rank = self.rank;
        let mut tuple = [0u64; crate::hurray::MAX_RANK];
        let mut i = 0usize;
        for (j, &end) in ends.iter().enumerate() {
            let bucket = lo + j as u64;
            while i < end as usize {
                let (Some(&m), Some(&l)) = (minor.get(i), lanes.get(i)) else {
                    return Err(Fault::BadInput);
                };
                match &self.tuple {
                    Tuple::Matrix { major } => {
                        tuple[*major] = bucket;
                        tuple[1 - major] = m.to_u64();
                    }
                    Tuple::Packed {
                        shifts,
                        bits,
                        split,
                    } => {
                        let key = (bucket << split) | m.to_u64();
                        for (d, (&s, &b)) in shifts.iter().zip(bits.iter()).enumerate() {
                            let mask = if b == 0 { 0 } else { u64::MAX >> (64 - b) };
                            tuple[d] = (key >> s) & mask;
                        }
                    }
                }
                st.idx.extend_from_slice(&tuple[..rank]);
                st.vals.push(l.value(self.dtype));
                if st.vals.len() == STAGE {
                    if let Err(e) = st.flush() {
                        return Err(self.failed(e));
                    }
                }
                i += 1;
            }
        }
        Ok(())
    }
}

impl FileSink<'_, '_, '_> {
    #[cold]
    fn failed(&self, e: Error) -> Fault {
        let mut g = self.error.lock().unwrap_or_else(|e| e.into_inner());
        g.get_or_insert(e);
        Fault::Output
    }
}

impl DirectPlan {
    /// Assemble the binary records `bytes` (the plan's rank of u64 indices
    /// and a value of its dtype each, little-endian: `crate::input::bin`)
    /// into a new Hurray file at `path`, written atomically as
    /// [`crate::Builder::finish`] writes it. `release(a, b)` gives back the
    /// pages of input bytes `a..b` once read.
    ///
    /// `Ok(None)`: this path is not the one for this input (it does not
    /// fit the page cache, it is not local, a bucket is too heavy, or a
    /// record would be refused or a coordinate does not combine); nothing
    /// was written: use the builder, which reports those errors.
    pub(crate) fn assemble_records(
        &self,
        bytes: &[u8],
        release: &(dyn Fn(usize, usize) + Sync),
        path: &Path,
        opts: &AssembleOptions,
    ) -> Result<Option<Summary>> {
        let rank = self.shape.len();
        let rec = rank * 8 + self.dtype.width();
        if bytes.len() % rec != 0 || (bytes.len() / rec) as u64 != self.contributions {
            return Err(Error::InvalidArgument(format!(
                "{} bytes of records of {rec} bytes, the plan was made for {} records",
                bytes.len(),
                self.contributions
            )));
        }
        // Read once to count, then once per band that meets each chunk:
        // from the page cache, not from the disk.
        if bytes.len() as u64 > physical_memory() / 2 {
            return Ok(None);
        }
        // A complex value is two lanes: the builder's path.
        let Some(decode) = raw_decoder(self.dtype) else {
            return Ok(None);
        };
        let key = match &self.scheme {
            Scheme::Matrix { major } => RecordKey::Matrix { major: *major },
            Scheme::Packed {
                layout,
                split,
                bucket_dims,
            } => RecordKey::Packed {
                shifts: layout.shifts(),
                split: *split,
                bucket_dims: *bucket_dims,
            },
        };
        let filled = self.to_file(path, opts, None, |sink| {
            let proto = Records {
                bytes,
                rec,
                shape: &self.shape,
                key,
                decode,
                source: (),
                release,
            };

            let checked = self.dtype.is_float() && self.non_finite != NonFinitePolicy::Keep;
            // Row, column, f64 records lying aligned: read as [u64; 3].
            let triples = match (&self.scheme, self.dtype) {
                (Scheme::Matrix { major }, DType::F64) => {
                    Triples::<()>::cast(bytes).map(|recs| Triples {
                        recs,
                        major: *major,
                        shape: [self.shape[0], self.shape[1]],
                        source: (),
                        release,
                    })
                }
                _ => None,
            };
            macro_rules! run_with {
                ($red:expr) => {
                    match (&triples, checked) {
                        (Some(t), true) => self.stream(
                            &t.with_source(RawChecked {
                                policy: self.non_finite,
                            }),
                            $red,
                            sink,
                            true,
                        ),
                        (Some(t), false) => self.stream(&t.with_source(RawKeep), $red, sink, true),
                        (None, true) => self.stream(
                            &proto.with_source(RawChecked {
                                policy: self.non_finite,
                            }),
                            $red,
                            sink,
                            true,
                        ),
                        (None, false) => self.stream(&proto.with_source(RawKeep), $red, sink, true),
                    }
                };
            }
            with_file_reducer!(self, red => run_with!(red))
        })?;
        Ok(match filled {
            Filled::Done(s) => Some(s),
            // The builder names a refused record or a failed coordinate.
            Filled::NotHere
            | Filled::Failed(Failure::Fault(Fault::BadInput) | Failure::Combine { .. }) => None,
            Filled::Failed(f) => return Err(self.failure_error(f)),
        })
    }

    /// Assemble the records a [`crate::Builder`] kept (packed by
    /// `key_shifts`, values as raw lanes, all checked by their pushes; a
    /// complex tensor's in (real, imaginary) pairs, the part in the key's
    /// lowest bit) into a new Hurray file at `path`, the bytes `finish`
    /// writes through its sorters (a bool value's lane is 0 or 1, written
    /// as a bit). `Ok(None)`: not this path (keys packed otherwise than
    /// the plan buckets them, a bucket too heavy, a coordinate that does
    /// not combine); nothing was written: the sorters' path names any
    /// error.
    pub(crate) fn assemble_held(
        &self,
        held: &Held<'_>,
        key_shifts: &[u32],
        path: &Path,
        opts: &AssembleOptions,
        stop: &AtomicBool,
    ) -> Result<Option<Summary>> {
        let part = self.dtype.complex_part();
        let per = if part.is_some() { 2 } else { 1 };
        if held.len() as u64 != self.contributions * per {
            return Err(Error::InvalidArgument(format!(
                "{} records kept, the plan was made for {} contributions",
                held.len(),
                self.contributions
            )));
        }
        // The bucket is the key's bits from `split` up: the major index
        // of a matrix (its minor index packed below it), or the top bits
        // of a key packed as the plan packs it.
        let split = match &self.scheme {
            Scheme::Matrix { major } => match key_shifts {
                // A major extent of 1 has no bits: one bucket.
                _ if bits_of(self.shape[*major]) == 0 => 64,
                [a, b] if [*a, *b][1 - major] == 0 => [*a, *b][*major],
                _ => return Ok(None),
            },
            Scheme::Packed { layout, split, .. } if layout.shifts() == key_shifts => *split,
            Scheme::Packed { .. } => return Ok(None),
        };
        let filled = match part {
            None => self.to_file(path, opts, Some(stop), |sink| {
                let input = held.with_split::<One>(split, self.buckets);
                with_file_reducer!(self, red => self.stream(&input, red, sink, false))
            })?,
            Some(part) => {
                let input = held.with_split::<Pair>(split, self.buckets);
                self.to_file(path, opts, Some(stop), |sink| {
                    if self.kind == CombinerKind::FloatSum && part == DType::F64 {
                        let general = ComplexReduce {
                            comb: &FloatSum(DType::F64),
                            drop_zeros: self.drop_zeros,
                            exact_f64: true,
                        };
                        self.stream(&input, &ComplexExactF64 { general }, sink, false)
                    } else {
                        with_combiner!(self.kind, part, comb => {
                            let red = ComplexReduce { comb: &comb, drop_zeros: self.drop_zeros, exact_f64: false };
                            self.stream(&input, &red, sink, false)
                        })
                    }
                })?
            }
        };
        Ok(match filled {
            Filled::Done(s) => Some(s),
            Filled::NotHere
            | Filled::Failed(Failure::Fault(Fault::BadInput) | Failure::Combine { .. }) => None,
            Filled::Failed(f) => return Err(self.failure_error(f)),
        })
    }

    /// Assemble `values` at the coordinates `indices` (one array per
    /// dimension, as for [`DirectPlan::assemble`]) into a new Hurray file
    /// at `path`, written as [`crate::Builder::finish`] writes it (the same
    /// bytes), the result never held: memory is the plan's working memory
    /// and the writer's buffers. Errors are the builder's for the same
    /// contributions. `Ok(None)`: a bucket is too heavy for the budget;
    /// nothing was written: use the builder.
    pub fn assemble_to_file<I: IndexElem, V: DirectValue>(
        &self,
        indices: &[&[I]],
        values: &[V],
        path: &Path,
        opts: &AssembleOptions,
    ) -> Result<Option<Summary>> {
        self.cols_to_file(I::cols(indices), values, path, opts)
    }

    /// [`DirectPlan::assemble_to_file`] of index arrays of any type.
    fn cols_to_file<V: DirectValue>(
        &self,
        indices: Cols<'_>,
        values: &[V],
        path: &Path,
        opts: &AssembleOptions,
    ) -> Result<Option<Summary>> {
        if indices.rank() != self.shape.len() {
            return Err(Error::InvalidArgument(format!(
                "{} index arrays for a rank-{} tensor",
                indices.rank(),
                self.shape.len()
            )));
        }
        if values.len() as u64 != self.contributions {
            return Err(Error::InvalidArgument(format!(
                "{} contributions, the plan was made for {}",
                values.len(),
                self.contributions
            )));
        }
        if let Some(d) = (0..indices.rank()).find(|&d| indices.len_of(d) != values.len()) {
            return Err(Error::InvalidArgument(format!(
                "index array {d} has {} entries, the values {}",
                indices.len_of(d),
                values.len()
            )));
        }
        // The file sink writes one lane per value of a byte or more: a
        // complex tensor (two parts per value) and a bool one (bits)
        // take the builder's path.
        if self.declines(indices) || self.dtype.is_complex() || self.dtype.is_bool() {
            return Ok(None);
        }
        let filled = self.to_file(path, opts, None, |sink| {
            let bits_kept = self.dtype.is_float() && self.non_finite == NonFinitePolicy::Keep;
            let checked = Checked {
                dtype: self.dtype,
                policy: self.non_finite,
            };
            macro_rules! run_with {
                ($red:expr) => {
                    match V::as_f64s(values) {
                        Some(v) if bits_kept => self.stream_arrays(indices, v, F64Bits, $red, sink),
                        _ => self.stream_arrays(indices, values, checked, $red, sink),
                    }
                };
            }
            with_file_reducer!(self, red => run_with!(red))
        })?;
        match filled {
            Filled::Done(s) => Ok(Some(s)),
            Filled::NotHere => Ok(None),
            // The builder's error for the same contributions.
            Filled::Failed(f) => match self.outcome::<V, f64, u64>(Err(f), indices, values) {
                Err(e) => Err(e),
                Ok(_) => Err(Error::Poisoned(
                    "in-memory assembly (a failure without an error)",
                )),
            },
        }
    }

    /// The caller's arrays as the kernel's input, streamed into `sink`.
    fn stream_arrays<V, S, R>(
        &self,
        indices: Cols<'_>,
        values: &[V],
        source: S,
        red: &R,
        sink: &FileSink<'_, '_, '_>,
    ) -> Result<Option<Streamed>, Failure>
    where
        V: Copy + Sync,
        S: Source<V, L = u64>,
        R: Reduce<u64>,
    {
        match self.array_input(indices, values, source) {
            ArrayInput::Matrix(input) => self.stream(&input, red, sink, false),
            ArrayInput::Packed(input) => self.stream(&input, red, sink, false),
        }
    }

    /// Open the output and its tensor, let `fill` run the kernel into the
    /// sink, and publish the file when it did (`Filled::Done`); otherwise
    /// the temporary file is dropped.
    fn to_file<F>(
        &self,
        path: &Path,
        opts: &AssembleOptions,
        stop: Option<&AtomicBool>,
        fill: F,
    ) -> Result<Filled>
    where
        F: FnOnce(&FileSink<'_, '_, '_>) -> Result<Option<Streamed>, Failure>,
    {
        let rank = self.shape.len();
        let t0 = Instant::now();
        let streams = self.layout.buffer_count(self.shape.len()) as u64;
        let wopts = WriteOptions {
            io: opts.io.clone(),
            buffer_bytes: (OUTPUT_BUFFER_BYTES / streams) as usize,
            ..WriteOptions::default()
        };
        // Opened first: a path that cannot be written fails before any work.
        let mut fw = FileWriter::create(path, wopts)?;
        let mut tw = fw.begin_tensor_as(&opts.tensor_name, self.dtype, &self.shape, self.layout)?;
        tw.reserve_indices(self.contributions)?;
        let bits: Vec<u32> = self.shape.iter().map(|&e| bits_of(e)).collect();
        let tuple = match &self.scheme {
            Scheme::Matrix { major } => Tuple::Matrix { major: *major },
            Scheme::Packed { layout, split, .. } => Tuple::Packed {
                shifts: layout.shifts(),
                bits: &bits,
                split: *split,
            },
        };
        // A COO f64 matrix in row order: written in place by every thread.
        let in_place = match (&tuple, self.shape.as_slice()) {
            (Tuple::Matrix { major: 0 }, &[rows, cols])
                if self.layout == crate::options::OutputLayout::Coo =>
            {
                tw.placed()?.map(|placed| InPlace {
                    placed,
                    shape: [rows, cols],
                    pool: Mutex::new(Vec::new()),
                })
            }
            _ => None,
        };
        let sink = FileSink {
            staged: Mutex::new(Staged {
                tw: &mut tw,
                idx: Vec::with_capacity(STAGE * rank),
                vals: Vec::with_capacity(STAGE),
            }),
            dtype: self.dtype,
            rank,
            tuple,
            error: Mutex::new(None),
            order: Mutex::new(Order::default()),
            turn: Condvar::new(),
            in_place,
            stop,
        };
        let r = fill(&sink);
        let FileSink {
            staged,
            error,
            order,
            in_place,
            ..
        } = sink;
        let mut staged = staged.into_inner().unwrap_or_else(|e| e.into_inner());
        let order = order.into_inner().unwrap_or_else(|e| e.into_inner());
        // The in-place writers' scratch, all of it held at the end.
        let place_bytes: u64 = in_place.as_ref().map_or(0, |ip| {
            let pool = ip.pool.lock().unwrap_or_else(|e| e.into_inner());
            pool.iter().map(|sc| sc.buffer_bytes() as u64).sum::<u64>()
        });
        let done = match r {
            Ok(Some(d)) => d,
            Ok(None) => return Ok(Filled::NotHere),
            Err(Failure::Fault(Fault::Output)) => {
                let e = error.into_inner().unwrap_or_else(|e| e.into_inner());
                return Err(e.unwrap_or(Error::Poisoned("file writer (a band's write failed)")));
            }
            Err(f) => return Ok(Filled::Failed(f)),
        };
        staged.flush()?;
        if in_place.is_some() {
            staged
                .tw
                .placed_end(order.values.digest(), order.indices.digest())?;
        }
        drop(staged);
        let t_write = Instant::now();
        tw.finish()?;
        let fs = fw.finish()?;
        Ok(Filled::Done(Summary {
            path: path.to_path_buf(),
            contributions: self.contributions,
            skipped_negative: done.skipped,
            nnz: done.nnz,
            dropped_zeros: done.dropped,
            runs: 0,
            runs_spilled: 0,
            merge_passes: 0,
            merge_ranges: 0,
            bytes_spilled: 0,
            peak_buffer_bytes: done.peak + OUTPUT_BUFFER_BYTES + place_bytes,
            memory_budget: opts.memory_budget,
            budget_parts: self.budget_parts.clone(),
            file_bytes: fs.bytes,
            // Counting and the bands: the kernel reads and sorts at once.
            time_ingest: t_write - t0,
            time_sort: Duration::ZERO,
            time_merge: Duration::ZERO,
            time_write: t_write.elapsed(),
            stale_removed: fs.stale_removed,
        }))
    }

    /// Count, cut into bands and run them into `sink`, or None when an
    /// input file is not local enough for a stream or a bucket is too
    /// heavy.
    fn stream<In, R, S>(
        &self,
        input: &In,
        red: &R,
        sink: &S,
        file: bool,
    ) -> Result<Option<Streamed>, Failure>
    where
        In: Input,
        R: Reduce<In::L>,
        S: BandSink<u32, In::L> + BandSink<u64, In::L>,
    {
        // A file is read again by every band that meets a chunk: only local
        // input takes this path. Arrays in memory take it whatever they hold.
        if file && !self.local(input) {
            return Ok(None);
        }
        let minor_u32 = match &self.scheme {
            Scheme::Matrix { major } => bits_of(self.shape[1 - major]) <= 32,
            Scheme::Packed { .. } => false,
        };
        if minor_u32 {
            self.stream_as::<In, R, u32, S>(input, red, sink, file)
        } else {
            self.stream_as::<In, R, u64, S>(input, red, sink, file)
        }
    }

    fn stream_as<In, R, M, S>(
        &self,
        input: &In,
        red: &R,
        sink: &S,
        file: bool,
    ) -> Result<Option<Streamed>, Failure>
    where
        In: Input,
        R: Reduce<In::L>,
        M: Minor,
        S: BandSink<M, In::L>,
    {
        let Some((counts, bands)) = self.bands::<In, M>(input, sink.stop())? else {
            return Ok(None);
        };
        // More than two reads of an input file in all: not this path.
        let chunks = counts.ranges.len() as u64;
        if file
            && bands
                .chunk_visits(&counts.ranges)
                .is_none_or(|v| v > 2 * chunks.max(1))
        {
            return Ok(None);
        }
        // What the buffers hold at most: the counts, the chunk ranges, the
        // other counting threads' histograms, and each worker's scratch.
        let threads = self.threads.clamp(1, bands.len().max(1)) as u64;
        let lane = std::mem::size_of::<In::L>();
        let entry = (std::mem::size_of::<M>() + lane) as u64;
        let sort_entry = (std::mem::size_of::<M::Packed>() + lane) as u64;
        let scratch = bands.max_entries as u64 * entry
            + bands.max_buckets as u64 * 4
            + bands.max_bucket as u64 * sort_entry;
        let hist = self
            .hist_limit
            .min((self.threads as u64 - 1) * self.buckets * 4);
        let peak = self.buckets * 4 + chunks * 16 + hist + threads * scratch;
        match band::run::<In, R, M>(input, red, &counts, &bands, self.threads, sink, sink.stop()) {
            Ok(d) => Ok(Some(Streamed {
                nnz: d.nnz as u64,
                dropped: d.dropped,
                peak,
                skipped: input.len() as u64 - counts.kept(),
            })),
            Err(band::BandError::Fault(f)) => Err(Failure::Fault(f)),
            Err(band::BandError::Failed(f)) => Err(Failure::Combine {
                coordinate: self.coordinate(f.bucket, f.minor),
                why: f.why,
            }),
        }
    }

    /// Whether a sample of the input's chunks each meets a narrow range of
    /// buckets (input in element order), judged before any full pass:
    /// random coordinates meet every bucket in every chunk.
    fn local<In: Input>(&self, input: &In) -> bool {
        let n = input.len();
        let chunks = n.div_ceil(self.chunk);
        if chunks <= SAMPLES || self.buckets < 64 {
            return true;
        }
        let mut wide = 0usize;
        for s in 0..SAMPLES {
            let c = s * chunks / SAMPLES;
            let lo = c * self.chunk;
            let r = input.bucket_range(lo, (lo + self.chunk).min(n));
            // The sampled pages leave the resident set at once: the pass
            // that reads them for good may be far away.
            input.release(lo, (lo + self.chunk).min(n));
            match r {
                Some((a, b)) => wide += usize::from((b - a) > self.buckets / 8),
                // A bad record: the builder names it.
                None => return false,
            }
        }
        wide * 4 < SAMPLES
    }
}

/// Assemble a tensor of `shape` and `dtype` from the caller's index arrays
/// (one per dimension, any of `i32`, `i64`, `u32`, `u64`) and values into
/// a new Hurray file at `path`, exactly as pushing every contribution into
/// a [`crate::Builder`] and calling `finish(path)` would (the same bytes,
/// the same errors): through the in-memory kernel, the result streamed to
/// the file, when the work fits the budget; through the builder otherwise.
/// The arrays are only read.
pub fn assemble_arrays_to_file<I: IndexElem, V: DirectValue>(
    shape: &[u64],
    dtype: DType,
    indices: &[&[I]],
    values: &[V],
    path: &Path,
    opts: &AssembleOptions,
) -> Result<Summary> {
    arrays_to_file(shape, dtype, indices, values, path, opts, None)
}

/// Contributions pushed between two looks at the caller's stop flag.
const STOP_EVERY: usize = 1 << 16;

/// [`assemble_arrays_to_file`], stopped with [`Error::Stopped`] soon after
/// `stop` is set (nothing is published then).
pub fn arrays_to_file<I: IndexElem, V: DirectValue>(
    shape: &[u64],
    dtype: DType,
    indices: &[&[I]],
    values: &[V],
    path: &Path,
    opts: &AssembleOptions,
    stop: Option<&AtomicBool>,
) -> Result<Summary> {
    if let Some(p) = file_plan(shape, dtype, values.len() as u64, opts, 0) {
        if let Some(s) = p.assemble_to_file(indices, values, path, opts)? {
            return Ok(s);
        }
    }
    if indices.len() != shape.len() || indices.iter().any(|x| x.len() != values.len()) {
        return Err(Error::InvalidArgument(format!(
            "{} index arrays of lengths {:?} for a rank-{} tensor and {} values",
            indices.len(),
            indices.iter().map(|x| x.len()).collect::<Vec<_>>(),
            shape.len(),
            values.len()
        )));
    }
    let stopped = || super::stopped(stop);
    let mut b = crate::Builder::new(shape, dtype, opts.clone())?;
    let mut idx = vec![0u64; shape.len()];
    let mut signed = vec![0i64; shape.len()];
    for (i, &v) in values.iter().enumerate() {
        if i % STOP_EVERY == 0 && stopped() {
            return Err(Error::Stopped);
        }
        let mut negative = false;
        for (d, (dim, slot)) in indices.iter().zip(idx.iter_mut()).enumerate() {
            let x = dim[i];
            if x.is_negative() {
                if !opts.skip_negative {
                    let extent = shape[d];
                    return Err(Error::bad_index(
                        i as u64,
                        d,
                        x.widen() as i64 as i128,
                        extent,
                    ));
                }
                negative = true;
            }
            *slot = x.widen();
        }
        if negative {
            // Sign-extended above: the same numbers as i64, and the
            // builder's signed push skips and counts the contribution.
            for (s, &u) in signed.iter_mut().zip(&idx) {
                *s = u as i64;
            }
            b.push_signed(&signed, v)?;
        } else {
            b.push(&idx, v)?;
        }
    }
    let Some(stop) = stop else {
        return b.finish(path);
    };
    // The caller's flag reaches the merge through the builder's own.
    let stopper = b.stopper();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if stop.load(Ordering::Relaxed) {
                    stopper.stop();
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        });
        let r = b.finish(path);
        done.store(true, Ordering::Relaxed);
        r
    })
}
