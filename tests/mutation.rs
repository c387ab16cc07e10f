//! Hostile files: every single-bit flip and every truncation of a small
//! Hurray file (header, descriptors, statistics, buffers, padding, KV,
//! index, trailer), plus random multi-byte mutations with a fixed seed, go
//! through `HurrayFile::from_bytes_with` (strict and permissive), `verify`,
//! and, when the file opens, `iter`, `get` and `find` on every tensor. The
//! same for a file of a CSR and a CSC matrix (`iter`, `get`, `find`, rows
//! and columns as slices).
//!
//! Promises checked: no panic, no hang (a watchdog fails the test when one
//! case takes more than 10 s), and no single allocation above a fixed cap
//! nor more than a fixed peak of live heap (a counting global allocator,
//! per thread). A mutation inside a buffer, the padding or anything
//! checksummed must be noticed: `open` fails or `verify` reports it, unless
//! the flipped byte is in padding that no rule covers (counted, reported).
//!
//! Long run (a million random mutations, a few minutes):
//!   MUTATIONS=1000000 cargo test --release --test mutation -- --ignored --nocapture

use coo_assembler::internals::hurray::descriptor::descriptor_len;
use coo_assembler::internals::hurray::{KvValue, TRAILER_LEN, align_up};
use coo_assembler::write::{FileWriter, WriteOptions};
use coo_assembler::{DType, options::OutputLayout, read::Tensor};
use coo_assembler::{HurrayFile, read::ReadOptions, read::Severity};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

// ---- counting allocator (per thread, only while armed) ----

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
    static LIVE: Cell<u64> = const { Cell::new(0) };
    static PEAK: Cell<u64> = const { Cell::new(0) };
    static LARGEST: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

fn note_alloc(size: usize) {
    let _ = ARMED.try_with(|a| {
        if a.get() {
            let s = size as u64;
            LIVE.with(|l| {
                let n = l.get() + s;
                l.set(n);
                PEAK.with(|p| p.set(p.get().max(n)));
            });
            LARGEST.with(|m| m.set(m.get().max(s)));
        }
    });
}

fn note_free(size: usize) {
    let _ = ARMED.try_with(|a| {
        if a.get() {
            LIVE.with(|l| l.set(l.get().saturating_sub(size as u64)));
        }
    });
}

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counting around it does not allocate (thread-local cells).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_alloc(layout.size());
        // SAFETY: the caller upholds GlobalAlloc's contract, forwarded as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note_free(layout.size());
        // SAFETY: the caller upholds GlobalAlloc's contract, forwarded as is.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_alloc(layout.size());
        // SAFETY: the caller upholds GlobalAlloc's contract, forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_free(layout.size());
        note_alloc(new_size);
        // SAFETY: the caller upholds GlobalAlloc's contract, forwarded as is.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Largest single allocation allowed while reading a hostile file of a few
/// KiB (the reader copies the file once, 8-aligned; everything else must be
/// bounded by the file, not by a length field in it).
const MAX_SINGLE_ALLOC: u64 = 1 << 20;
/// Largest live heap while reading one hostile file.
const MAX_PEAK: u64 = 4 << 20;

// ---- the file under test ----

/// Which small file to mutate.
#[derive(Clone, Copy)]
enum Kind {
    /// Two COO tensors (rank 2 and 3).
    Coo,
    /// A CSR and a CSC matrix, with empty rows and columns.
    Compressed,
}

fn small_file() -> (Vec<u8>, Vec<bool>) {
    file_of(Kind::Coo)
}

fn file_of(kind: Kind) -> (Vec<u8>, Vec<bool>) {
    match kind {
        Kind::Coo => coo_file(),
        Kind::Compressed => compressed_file(),
    }
}

/// A CSR f64 20 x 30 matrix (rows 10.. empty) and a CSC i32 7 x 9 one
/// (some columns empty), with user metadata and checksums.
fn compressed_file() -> (Vec<u8>, Vec<bool>) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.hrry");
    let mut fw = FileWriter::create(&p, WriteOptions::default()).unwrap();
    fw.add_metadata("note", KvValue::String("mutation test".into()))
        .unwrap();
    {
        let mut t = fw
            .begin_tensor_as("r", DType::F64, &[20, 30], OutputLayout::Csr)
            .unwrap();
        let m: std::collections::BTreeMap<[u64; 2], f64> = (0..40u64)
            .map(|k| ([k / 4, (k * 7) % 30], k as f64 * 0.5 - 3.0))
            .collect();
        for (i, v) in m {
            t.push(&i, v).unwrap();
        }
        t.finish().unwrap();
    }
    {
        let mut t = fw
            .begin_tensor_as("c", DType::I32, &[7, 9], OutputLayout::Csc)
            .unwrap();
        // Column-major order: keyed by (column, row).
        let m: std::collections::BTreeMap<[u64; 2], i32> = (0..25u64)
            .map(|k| ([(k * 3) % 9 / 2 * 2, k % 7], k as i32 - 12))
            .collect();
        for ([j, i], v) in m {
            t.push(&[i, j], v).unwrap();
        }
        t.finish().unwrap();
    }
    let sum = fw.finish().unwrap();
    let bytes = std::fs::read(&p).unwrap();
    let mut cov = vec![false; bytes.len()];
    let mut mark = |from: u64, len: u64| {
        for b in &mut cov[from as usize..(from + len) as usize] {
            *b = true;
        }
    };
    mark(0, 12);
    mark(16, 12);
    for t in &sum.tensors {
        let d = t.descriptor_offset;
        // Magic .. nnz, the reserved bytes and buffer_count; each handle's
        // byte_size and alignment. Not the statistics (see `coo_file`).
        mark(d, 61);
        for h in 0..3 {
            mark(d + 61 + 16 * h, 12);
        }
        let major = t.shape[t.layout.major_dim()];
        let vlen = t.nnz * t.dtype.width() as u64;
        mark(t.data_offset, vlen);
        let ioff = align_up(t.data_offset + vlen, 4096).unwrap();
        mark(ioff, t.nnz * 8);
        let poff = align_up(ioff + t.nnz * 8, 4096).unwrap();
        mark(poff, (major + 1) * 8);
    }
    let f = HurrayFile::from_bytes(bytes.clone()).unwrap();
    let tr = *f.trailer();
    mark(tr.index_offset, tr.index_length);
    mark(bytes.len() as u64 - TRAILER_LEN, TRAILER_LEN);
    (bytes, cov)
}

fn coo_file() -> (Vec<u8>, Vec<bool>) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.hrry");
    let mut fw = FileWriter::create(&p, WriteOptions::default()).unwrap();
    fw.add_metadata("note", KvValue::String("mutation test".into()))
        .unwrap();
    fw.add_metadata(
        "ints",
        KvValue::Array(vec![KvValue::I64(1), KvValue::I64(-2)]),
    )
    .unwrap();
    {
        let mut t = fw.begin_tensor("a", DType::F64, &[20, 30]).unwrap();
        let m: std::collections::BTreeMap<[u64; 2], f64> = (0..40u64)
            .map(|k| ([k / 2, (k * 7) % 30], k as f64 * 0.5 - 3.0))
            .collect();
        for (i, v) in m {
            t.push(&i, v).unwrap();
        }
        t.finish().unwrap();
    }
    {
        let mut t = fw.begin_tensor("b", DType::I32, &[4, 5, 6]).unwrap();
        let m: std::collections::BTreeMap<[u64; 3], i32> = (0..25u64)
            .map(|k| ([k / 7, (k / 2) % 5, k % 6], k as i32 - 12))
            .collect();
        for (i, v) in m {
            t.push(&i, v).unwrap();
        }
        t.finish().unwrap();
    }
    let sum = fw.finish().unwrap();
    let bytes = std::fs::read(&p).unwrap();
    // Regions some rule covers: header, descriptors, buffers, KV, index,
    // trailer. Everything else is alignment padding.
    let mut cov = vec![false; bytes.len()];
    let mut mark = |from: u64, len: u64| {
        for b in &mut cov[from as usize..(from + len) as usize] {
            *b = true;
        }
    };
    // Header: magic, version, alignment, first_descriptor_offset. Not the
    // flags (clearing HAS_INDEX_CRC32C / HAS_KV_METADATA gives another
    // valid file) nor tensor_count_hint (a hint).
    mark(0, 12);
    mark(16, 12);
    for t in &sum.tensors {
        let rank = t.shape.len() as u64;
        let d = t.descriptor_offset;
        // Descriptor up to nnz (magic, version, length, flags, dtype,
        // layout, rank, shape, byte_offset, nnz); then the two buffer
        // handles' byte_size and alignment. Not: is_sorted (0 is valid),
        // the handles' device/sync/memory tags, the statistics section
        // (float statistics are compared with a tolerance; mask bits and
        // N:M fields may be cleared).
        mark(d, 36 + 8 * rank);
        mark(d + 37 + 8 * rank, 8); // reserved bytes, buffer count
        let h = d + 45 + 8 * rank;
        mark(h, 12);
        mark(h + 16, 12);
        let _ = descriptor_len;
        let vlen = t.nnz * t.dtype.width() as u64;
        mark(t.data_offset, vlen);
        let ioff = align_up(t.data_offset + vlen, 4096).unwrap();
        mark(ioff, t.nnz * rank * 8);
    }
    let f = HurrayFile::from_bytes(bytes.clone()).unwrap();
    let tr = *f.trailer();
    // The KV section has no checksum in the format: a flipped user value
    // or key is a different valid file (see docs/reliability.md).
    mark(tr.index_offset, tr.index_length);
    mark(bytes.len() as u64 - TRAILER_LEN, TRAILER_LEN);
    (bytes, cov)
}

/// Outcome of one hostile input.
#[derive(Default, Clone)]
struct Tally {
    /// Cases accepted although they changed a covered byte.
    undetected_cases: Vec<u64>,
    cases: u64,
    refused_at_open: u64,
    flagged_by_verify: u64,
    accepted: u64,
    /// Accepted although the mutation touched a covered region.
    undetected: u64,
    peak: u64,
    largest: u64,
}

/// Open (strict and permissive), verify, and exercise the accessors.
/// Returns (opened strictly, problems found).
fn exercise(bytes: &[u8]) -> (bool, bool) {
    let mut opened = false;
    let mut problems = false;
    for permissive in [false, true] {
        let Ok(f) = HurrayFile::from_bytes_with(
            bytes,
            ReadOptions {
                permissive,
                ..ReadOptions::default()
            },
        ) else {
            continue;
        };
        if !permissive {
            opened = true;
        }
        // A note (no checksums, a damaged key) flags nothing.
        let pr = f.verify();
        if !permissive && pr.iter().any(|p| p.severity != Severity::Note) {
            problems = true;
        }
        for _ in f.kv() {}
        for t in f.tensor_views() {
            if let Tensor::Compressed(c) = t {
                exercise_compressed(c);
            }
        }
        for t in f.tensors() {
            let _ = t.verify();
            let rank = t.rank();
            // Bounded: a hostile nnz must not make this loop long; the
            // iterator is bounded by the buffers actually present.
            for (n, (idx, _v)) in t.iter().enumerate() {
                if n < 4 {
                    let _ = t.get(idx);
                    let _ = t.find(idx);
                }
            }
            let probe = vec![1u64; rank];
            let _ = t.get(&probe);
            let _ = t.lower_bound(&probe);
            let _ = t.prefix_range(&probe[..rank.min(1)]);
        }
    }
    (opened, problems)
}

/// The CSR/CSC accessors on a hostile matrix: every iterator item (the
/// iterator is bounded by the buffers), lookups of what it yields and of
/// fixed probes, rows and columns as slices.
fn exercise_compressed(c: coo_assembler::read::CompressedTensor<'_>) {
    let _ = c.verify();
    for (n, e) in c.iter().enumerate() {
        if let (true, Ok((i, j, _))) = (n < 4, e) {
            let _ = c.get(&[i, j]);
            let _ = c.find(&[i, j]);
        }
    }
    for m in [0, 1, 5, c.major_extent().saturating_sub(1), u64::MAX] {
        let _ = c.major_range(m);
        let _ = c.lane::<f64>(m);
        let _ = c.lane::<i32>(m);
        let _ = c.row::<f64>(m);
        let _ = c.column::<i32>(m);
    }
    let _ = c.get(&[1, 1]);
    let _ = c.get(&[u64::MAX, 0]);
    let _ = c.values::<f64>();
}

/// Run `cases` (each yields a mutated file) on a worker thread under the
/// counting allocator, with a watchdog.
fn run_cases<F>(what: &str, n: u64, make: F) -> Tally
where
    F: Fn(u64, &mut Vec<u8>) -> bool + Send + 'static,
{
    let progress = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let (p2, d2) = (progress.clone(), done.clone());
    let worker = std::thread::spawn(move || {
        let mut tally = Tally::default();
        let mut buf = Vec::new();
        for i in 0..n {
            p2.store(i, Ordering::Relaxed);
            // `make` returns whether the mutation may go unnoticed
            // (padding no rule covers), i.e. acceptance is allowed.
            let may_pass = make(i, &mut buf);
            LIVE.with(|l| l.set(0));
            PEAK.with(|p| p.set(0));
            LARGEST.with(|m| m.set(0));
            ARMED.with(|a| a.set(true));
            let (opened, problems) = exercise(&buf);
            ARMED.with(|a| a.set(false));
            let peak = PEAK.with(|p| p.get());
            let largest = LARGEST.with(|m| m.get());
            tally.cases += 1;
            tally.peak = tally.peak.max(peak);
            tally.largest = tally.largest.max(largest);
            assert!(
                largest <= MAX_SINGLE_ALLOC && peak <= MAX_PEAK,
                "case {i}: allocation of {largest} B (peak {peak} B) beyond the cap"
            );
            if !opened {
                tally.refused_at_open += 1;
            } else if problems {
                tally.flagged_by_verify += 1;
            } else {
                tally.accepted += 1;
                if !may_pass {
                    tally.undetected += 1;
                    tally.undetected_cases.push(i);
                }
            }
        }
        d2.store(true, Ordering::SeqCst);
        tally
    });
    let mut last = (u64::MAX, Instant::now());
    while !done.load(Ordering::SeqCst) && !worker.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
        let p = progress.load(Ordering::Relaxed);
        if p != last.0 {
            last = (p, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(10) {
            panic!("{what}: case {p} has been running for more than 10 s (hang)");
        }
    }
    let t = worker
        .join()
        .unwrap_or_else(|_| panic!("{what}: panicked (see above)"));
    eprintln!(
        "{what}: {} cases: {} refused at open, {} flagged by verify, {} accepted ({} of them in covered bytes); largest allocation {} B, peak live heap {} B",
        t.cases,
        t.refused_at_open,
        t.flagged_by_verify,
        t.accepted,
        t.undetected,
        t.largest,
        t.peak
    );
    t
}

#[test]
fn the_clean_file_verifies() {
    let (f, _) = small_file();
    let h = HurrayFile::from_bytes(f).unwrap();
    assert!(h.verify().is_empty());
    assert_eq!(h.tensor_count(), 2);
    let (f, _) = file_of(Kind::Compressed);
    let h = HurrayFile::from_bytes(f).unwrap();
    assert!(h.verify().is_empty(), "{:?}", h.verify());
    let layouts: Vec<_> = h.tensor_views().map(|t| t.layout()).collect();
    assert_eq!(layouts, [OutputLayout::Csr, OutputLayout::Csc]);
}

#[test]
fn every_bit_flip() {
    every_bit_flip_of(Kind::Coo, "bit flips");
}

#[test]
fn every_bit_flip_csr_csc() {
    every_bit_flip_of(Kind::Compressed, "CSR/CSC bit flips");
}

fn every_bit_flip_of(kind: Kind, what: &'static str) {
    let (orig, cov) = file_of(kind);
    let orig = Arc::new(orig);
    let o = orig.clone();
    let len = orig.len() as u64;
    let covered = cov.iter().filter(|&&c| c).count();
    let t = run_cases(what, len * 8, move |i, buf| {
        buf.clear();
        buf.extend_from_slice(&o);
        let at = (i / 8) as usize;
        buf[at] ^= 1 << (i % 8);
        !cov[at]
    });
    // Accepted flips must be in padding no rule covers: buffers are
    // checksummed (xxh3 in KV), the index has its CRC-32C, descriptors and
    // statistics are checked by open and verify.
    eprintln!(
        "MUTATIONS ({what}): {} over {len} bytes ({covered} covered by a rule)",
        t.cases
    );
    // Report undetected flips as byte ranges.
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for &c in &t.undetected_cases {
        let b = c / 8;
        match ranges.last_mut() {
            Some(r) if r.1 + 1 >= b => r.1 = b,
            _ => ranges.push((b, b)),
        }
    }
    eprintln!("undetected flips in covered bytes, byte ranges: {ranges:?}");
    assert_eq!(
        t.undetected, 0,
        "flips of covered bytes went unnoticed: bytes {ranges:?}"
    );
}

#[test]
fn every_truncation_and_extension() {
    truncations_and_extensions_of(Kind::Coo);
}

#[test]
fn every_truncation_and_extension_csr_csc() {
    truncations_and_extensions_of(Kind::Compressed);
}

fn truncations_and_extensions_of(kind: Kind) {
    let orig = Arc::new(file_of(kind).0);
    let o = orig.clone();
    let len = orig.len() as u64;
    let t = run_cases("truncations", len, move |i, buf| {
        buf.clear();
        buf.extend_from_slice(&o[..i as usize]);
        false
    });
    assert_eq!(t.accepted, 0, "a truncated file was accepted");
    eprintln!("MUTATIONS (truncations): {}", t.cases);
    let o = orig.clone();
    let t = run_cases("appended garbage", 64, move |i, buf| {
        buf.clear();
        buf.extend_from_slice(&o);
        buf.extend(std::iter::repeat_n(0xA5u8, 1 + i as usize * 13));
        true
    });
    eprintln!("MUTATIONS (extensions): {}", t.cases);
}

/// Mutation `i` of the random family: 1 to 8 edits, each a byte set to a
/// random or boundary value, a u64 field overwritten with an interesting
/// value at an 8-aligned offset, a chunk copied elsewhere, or a cut.
fn random_mutation(orig: &[u8], seed: u64, i: u64, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(orig);
    let mut rng = coo_assembler_testkit::Rng::new(seed ^ i.wrapping_mul(0x9e3779b97f4a7c15));
    let edits = 1 + rng.next_u64() % 8;
    for _ in 0..edits {
        if buf.is_empty() {
            break;
        }
        let len = buf.len() as u64;
        let at = (rng.next_u64() % len) as usize;
        match rng.next_u64() % 6 {
            0 => buf[at] = rng.next_u64() as u8,
            1 => buf[at] = [0, 0xff, 0x7f, 0x80, 1][(rng.next_u64() % 5) as usize],
            2 => {
                let at = at & !7;
                if at + 8 <= buf.len() {
                    let v: u64 = [
                        0,
                        u64::MAX,
                        u64::MAX / 2,
                        1 << 32,
                        1 << 40,
                        len,
                        len - 1,
                        len + 1,
                        4096,
                        rng.next_u64(),
                    ][(rng.next_u64() % 10) as usize];
                    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
                }
            }
            3 => {
                let from = (rng.next_u64() % len) as usize;
                let n = (rng.next_u64() % 64) as usize;
                let n = n.min(buf.len() - from).min(buf.len() - at);
                buf.copy_within(from..from + n, at);
            }
            4 => {
                let at = at & !3;
                if at + 4 <= buf.len() {
                    let v = [0u32, u32::MAX, 1, 64, 65, 4096][(rng.next_u64() % 6) as usize];
                    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
                }
            }
            _ => buf.truncate(at),
        }
    }
}

const SEED: u64 = 0x5eed_c00a_55e3_b1e5;

#[test]
fn random_multi_byte_mutations() {
    let orig = Arc::new(small_file().0);
    let o = orig.clone();
    let t = run_cases("random mutations", 20_000, move |i, buf| {
        random_mutation(&o, SEED, i, buf);
        true
    });
    eprintln!("MUTATIONS (random, seed {SEED:#x}): {}", t.cases);
}

#[test]
fn random_multi_byte_mutations_csr_csc() {
    let orig = Arc::new(file_of(Kind::Compressed).0);
    let o = orig.clone();
    let t = run_cases("random CSR/CSC mutations", 20_000, move |i, buf| {
        random_mutation(&o, SEED ^ 0x0c5c, i, buf);
        true
    });
    eprintln!(
        "MUTATIONS (random CSR/CSC, seed {:#x}): {}",
        SEED ^ 0x0c5c,
        t.cases
    );
}

/// The long run: `MUTATIONS` (default one million) random mutations.
#[test]
#[ignore = "long run (minutes): MUTATIONS=1000000 cargo test --release --test mutation -- --ignored --nocapture"]
fn a_million_random_mutations() {
    let n: u64 = std::env::var("MUTATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    for kind in [Kind::Coo, Kind::Compressed] {
        let orig = Arc::new(file_of(kind).0);
        let o = orig.clone();
        let t = run_cases("long random mutations", n, move |i, buf| {
            random_mutation(&o, SEED ^ 0xabcdef, i, buf);
            true
        });
        eprintln!("MUTATIONS (long run): {}", t.cases);
    }
}
