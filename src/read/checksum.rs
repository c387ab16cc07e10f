//! The stored checksums of a tensor's buffers, checked once per open file
//! on its first whole pass (issue 22).
//!
//! Our writer stores the xxh3-64 of every buffer in the KV section
//! (`coo_assembler.xxh3.<tensor>.<buffer>`, see [`crate::hurray::kv`]).
//! [`super::verify`] compares them as one rule among many; the whole-file
//! passes (`Tensor::try_for_each`, the matrix operations, `convert`, the
//! Python `to_scipy`) call [`check_releasing`] before they use the data, so that a
//! damaged buffer is an [`Error::InvalidFile`] naming it instead of wrong
//! numbers. The buffers are hashed once per open file: the verdict is kept
//! in the tensor's [`Sums`] (a `OnceLock`, so concurrent first passes hash
//! once and every later pass costs a load). A tensor without checksums
//! (another writer's file) passes as before: its data are read as they are.
//!
//! Cost: one sequential read of the buffers, hashed in parallel (one
//! buffer per thread), at the speed of xxh3 (many GB/s). When the buffers
//! exceed a quarter of physical memory the pages are released behind the
//! hash (as a streaming pass would), otherwise they stay cached for the
//! pass that follows.

use super::release::{Mapped, physical_memory};
use crate::error::{Error, Result};
use crate::hurray::KvValue;
use crate::hurray::kv::parse_checksum_key;
use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// What is wrong with a buffer, kept to make the same error every time.
#[derive(Clone, Debug)]
struct Damage {
    buffer: &'static str,
    offset: u64,
    detail: String,
}

/// The verdict on one tensor's stored checksums, for the life of the open
/// file (shared by every view of the tensor).
#[derive(Debug, Default)]
pub(super) struct Sums {
    /// `None`: every stored checksum matches (or there is none).
    verdict: OnceLock<Option<Damage>>,
    /// Buffers hashed so far (the test hook: a second pass hashes none).
    hashed: AtomicU64,
    /// Checksum keys the KV section holds for this tensor, once counted.
    stored: OnceLock<usize>,
}

impl Sums {
    /// Buffers hashed for this tensor since the file was opened.
    pub(super) fn hashed(&self) -> u64 {
        self.hashed.load(Ordering::Relaxed)
    }
}

/// What a view needs to check its tensor's checksums: the shared verdict
/// and, for messages, the file it lies in.
#[derive(Clone, Copy, Debug)]
pub(super) struct SumCheck<'a> {
    pub(super) sums: &'a Sums,
    pub(super) file: Option<&'a Path>,
}

/// One buffer of a tensor: spec name, bytes, absolute file offset.
pub(super) type Buffer<'a> = (&'static str, &'a [u8], u64);

/// The checksums `kv` stores for tensor `name`'s `buffers`: (buffer
/// position, key, stored value). Keys naming a buffer the tensor does not
/// have are left to `verify` (`checksum-orphan`).
fn stored<'k>(
    name: &str,
    kv: &'k [(String, KvValue)],
    buffers: &[Buffer<'_>],
) -> Vec<(usize, &'k str, &'k KvValue)> {
    kv.iter()
        .filter_map(|(k, v)| {
            let (t, which) = parse_checksum_key(k)?;
            if t != name {
                return None;
            }
            let b = buffers.iter().position(|(n, _, _)| *n == which)?;
            Some((b, k.as_str(), v))
        })
        .collect()
}

/// How many of `buffers` carry a stored checksum (0 for another writer's
/// file).
pub(super) fn count(
    sc: Option<&SumCheck<'_>>,
    name: &str,
    kv: &[(String, KvValue)],
    buffers: &[Buffer<'_>],
) -> usize {
    let n = || stored(name, kv, buffers).len();
    match sc {
        Some(sc) => *sc.sums.stored.get_or_init(n),
        None => n(),
    }
}

/// xxh3-64 of `data`, releasing the pages behind the hash when `release`.
fn hash(data: &[u8], mapped: Mapped<'_>, release: bool) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    // The cursor releases and reports progress; kept pages only report.
    let mut behind = release.then(|| mapped.cursor(data));
    for (k, chunk) in data.chunks(1 << 20).enumerate() {
        h.update(chunk);
        match (&mut behind, mapped.progress()) {
            (Some(b), _) => b.at((k + 1) << 20),
            (None, Some(p)) => p.add(chunk.len() as u64),
            (None, None) => {}
        }
    }
    if let Some(mut b) = behind {
        b.flush(data.len());
    }
    h.digest()
}

/// The first buffer (in buffer order) whose stored checksum does not
/// match, hashing every buffer that has one (in parallel).
fn first_damage(
    sums: &Sums,
    name: &str,
    kv: &[(String, KvValue)],
    buffers: &[Buffer<'_>],
    mapped: Mapped<'_>,
    always_release: bool,
) -> Option<Damage> {
    use rayon::prelude::*;
    let mut want = stored(name, kv, buffers);
    want.sort_by_key(|w| w.0);
    let total: usize = want.iter().map(|w| buffers[w.0].1.len()).sum();
    let release = always_release || total as u64 > physical_memory() / 4;
    let found: Vec<Option<Damage>> = want
        .par_iter()
        .map(|&(b, key, v)| {
            let (buffer, data, offset) = buffers[b];
            let KvValue::U64(want) = *v else {
                return Some(Damage {
                    buffer,
                    offset,
                    detail: format!("KV {key:?} should hold its xxh3-64 as a u64, found {v:?}"),
                });
            };
            sums.hashed.fetch_add(1, Ordering::Relaxed);
            let got = hash(data, mapped, release);
            (got != want).then(|| Damage {
                buffer,
                offset,
                detail: format!(
                    "the {} bytes hash to xxh3 0x{got:016x}, the checksum stored in KV {key:?} is 0x{want:016x}: the buffer is damaged (run verify for the full report)",
                    data.len()
                ),
            })
        })
        .collect();
    found.into_iter().flatten().next()
}

/// Check tensor `name`'s stored checksums once per open file (see the
/// module docs); `Ok` without a verdict cell (a view made outside a file)
/// or without stored checksums. The pages behind the hash are given back
/// whatever the size when `always_release` (a reader bound by a memory budget: a refill's
/// plan file is many times its budget yet well under physical memory).
pub(super) fn check_releasing(
    sc: Option<&SumCheck<'_>>,
    name: &str,
    kv: &[(String, KvValue)],
    buffers: &[Buffer<'_>],
    mapped: Mapped<'_>,
    always_release: bool,
) -> Result<()> {
    let Some(sc) = sc else {
        return Ok(());
    };
    let verdict = sc
        .sums
        .verdict
        .get_or_init(|| first_damage(sc.sums, name, kv, buffers, mapped, always_release));
    damaged(verdict.as_ref(), name, sc.file)
}

fn damaged(d: Option<&Damage>, name: &str, file: Option<&Path>) -> Result<()> {
    match d {
        None => Ok(()),
        Some(d) => {
            let file = file.map_or(String::new(), |p| format!(" of {}", p.display()));
            Err(Error::invalid(
                format!("{} buffer of tensor {name:?}{file}", d.buffer),
                d.offset,
                d.detail.clone(),
            ))
        }
    }
}

/// The checksum methods of a sparse tensor view (`CooTensor`,
/// `CompressedTensor`, `CsfTensor`: fields `sums`, `name`, `kv`, `mapped`),
/// its checksummed buffers given by the method `$buffers`: one set of
/// rules for every layout.
macro_rules! checksum_methods {
    ($buffers:ident) => {
        /// Check the xxh3 checksums our writer stores for this tensor's
        /// buffers, once per open file: the first call hashes the buffers
        /// (O(size), in parallel), every later one returns the remembered
        /// verdict. A buffer that does not match is an
        /// [`Error::InvalidFile`](crate::Error::InvalidFile) naming the
        /// buffer, the tensor and the file. A tensor without stored
        /// checksums (another writer's file) passes. The whole-file passes
        /// (the matrix operations, `convert`, `Tensor::try_for_each`) call
        /// it before they use the data.
        pub fn check_checksums(&self) -> crate::error::Result<()> {
            self.check_checksums_with(false)
        }

        /// `check_checksums`; `release`: give back the pages behind the
        /// hash whatever the tensor's size.
        pub(crate) fn check_checksums_with(&self, release: bool) -> crate::error::Result<()> {
            super::checksum::check_releasing(
                self.sums.as_ref(),
                self.name,
                self.kv,
                &self.$buffers(),
                self.mapped,
                release,
            )
        }

        /// How many of the tensor's buffers carry a stored checksum (0 for
        /// a file of another writer, such as the reference `hurray-io`).
        pub fn stored_checksums(&self) -> usize {
            super::checksum::count(self.sums.as_ref(), self.name, self.kv, &self.$buffers())
        }

        /// Buffers hashed by `check_checksums` since the file was opened
        /// (a test hook: a second whole pass hashes none).
        #[doc(hidden)]
        pub fn checksum_hashes(&self) -> u64 {
            self.sums.map_or(0, |s| s.sums.hashed())
        }
    };
}
pub(super) use checksum_methods;
