//! A plan as a Hurray file, so that it outlives its process (and is
//! pickled in Python) and `verify` checks it like any file of ours:
//!
//! - tensor `pattern`: the output structure in the plan's layout, its u32
//!   values the number of contributions of each entry (so `starts` is
//!   their running sum);
//! - tensor `order`: dense, rank 1, one u32 per contribution: the
//!   positions of the contributions, entry by entry;
//! - KV entries `coo_assembler.plan.*`: the format version, the digest of
//!   the coordinates, the element type and policies; the contributions a
//!   refill takes when some have no position (planned with
//!   `skip_negative`).
//!
//! Loading checks the file's checksums and content rules (`verify`), the
//! version, and that `order` holds each position at most once (each
//! exactly once unless contributions were skipped) and that `pattern`
//! cuts it whole,
//! so a damaged or foreign file is refused before any refill reads
//! through it.

use super::{Ix, Plan, Structure};
use crate::element::DType;
use crate::error::{Error, Result};
use crate::hurray::KvValue;
use crate::options::{DuplicatePolicy, NonFinitePolicy};
use crate::read::{HurrayFile, Severity, Tensor};
use crate::vocab::Vocabulary;
use crate::write::{FileWriter, WriteOptions};
use std::path::Path;

/// The version of the plan file format this crate writes and reads
/// (version 4: `order` is a dense vector; 1 kept it as COO, an index of
/// 8 bytes beside each 4-byte position).
pub const PLAN_VERSION: u64 = 4;
/// The version of a plan kept in parts on disk (planned out of core,
/// refilled part by part: `super::parted`; version 5: `order`, `part`
/// and `parts` are dense vectors, where 3 kept them as COO).
pub const PARTED_VERSION: u64 = 5;

pub(super) const KEY_VERSION: &str = "coo_assembler.plan.version";
pub(super) const KEY_DIGEST: &str = "coo_assembler.plan.digest";
pub(super) const KEY_DTYPE: &str = "coo_assembler.plan.dtype";
pub(super) const KEY_DUPLICATES: &str = "coo_assembler.plan.duplicates";
pub(super) const KEY_EXACT: &str = "coo_assembler.plan.exact_sums";
pub(super) const KEY_NON_FINITE: &str = "coo_assembler.plan.non_finite";
/// xxh3 of the other plan entries and the two tensors' shapes: the KV
/// section has no checksum of its own.
pub(super) const KEY_CHECK: &str = "coo_assembler.plan.check";
/// The contributions a refill takes, when some have no position (planned
/// with `skip_negative`); absent, every contribution has one.
pub(super) const KEY_CONTRIBUTIONS: &str = "coo_assembler.plan.contributions";
pub(super) const PATTERN: &str = "pattern";
pub(super) const ORDER: &str = "order";

pub(super) fn refused(path: &str, detail: String) -> Error {
    Error::InvalidFile {
        section: format!("plan file {path}"),
        offset: 0,
        detail,
    }
}

impl Plan {
    /// Write the plan to `path` (atomically: a temporary file in the same
    /// folder, fsynced, renamed).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let mut w = FileWriter::create(path.as_ref(), WriteOptions::default())?;
        w.add_own_metadata(KEY_VERSION, KvValue::U64(PLAN_VERSION))?;
        w.add_own_metadata(KEY_DIGEST, KvValue::U64(self.digest))?;
        w.add_own_metadata(KEY_DTYPE, KvValue::String(self.dtype.name().into()))?;
        w.add_own_metadata(KEY_DUPLICATES, KvValue::String(self.duplicates.to_string()))?;
        w.add_own_metadata(KEY_EXACT, KvValue::Bool(self.exact_sums))?;
        w.add_own_metadata(KEY_NON_FINITE, KvValue::String(self.non_finite.to_string()))?;
        let check = Check {
            shape: &self.shape,
            layout: self.layout,
            digest: self.digest,
            dtype: self.dtype.name(),
            duplicates: &self.duplicates.to_string(),
            exact_sums: self.exact_sums,
            non_finite: &self.non_finite.to_string(),
            n: self.contributions as u64,
            parts: None,
        };
        if self.contributions != self.order.len() {
            w.add_own_metadata(KEY_CONTRIBUTIONS, KvValue::U64(self.contributions as u64))?;
        }
        w.add_own_metadata(KEY_CHECK, KvValue::U64(check.value()))?;
        {
            let mut t = w.begin_tensor_as(PATTERN, DType::U32, &self.shape, self.layout)?;
            let mut err = Ok(());
            self.each_coordinate(|e, idx| {
                if err.is_ok() {
                    err = t.push(idx, self.starts[e + 1] - self.starts[e]);
                }
            });
            err?;
            t.finish()?;
        }
        let mut t = w.begin_vector(ORDER, DType::U32, self.order.len() as u64)?;
        let mut buf = Vec::with_capacity(4 << 12);
        for piece in self.order.chunks(1 << 12) {
            buf.clear();
            buf.extend(piece.iter().flat_map(|k| k.to_le_bytes()));
            t.push_le(&buf)?;
        }
        t.finish()?;
        w.finish()?;
        Ok(())
    }

    /// Read a plan written by [`Plan::save`]. A damaged file, a file of
    /// another plan version or not a plan at all is refused
    /// (`InvalidFile`, saying what is wrong).
    pub fn load(path: impl AsRef<Path>) -> Result<Plan> {
        let p = path.as_ref();
        let f = HurrayFile::open(p)?;
        Self::from_file(&f, &p.display().to_string())
    }

    /// [`Plan::load`] from the bytes of a plan file.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<Plan> {
        let f = HurrayFile::from_bytes(bytes)?;
        Self::from_file(&f, "(bytes)")
    }

    fn from_file(f: &HurrayFile, name: &str) -> Result<Plan> {
        let h = Header::read(f, name)?;
        if h.version == PARTED_VERSION {
            return Err(refused(
                name,
                "this plan was made out of core and is kept in parts on disk: refill it with \
                 `coo-assembler refill` or PlanFile::refill_file (it is not loaded into memory)"
                    .into(),
            ));
        }
        let Header {
            digest,
            dtype,
            duplicates,
            exact_sums,
            non_finite,
            stored_check,
            contributions,
            ..
        } = h;
        let (dt, dup, nf) = (
            dtype.name().to_string(),
            duplicates.to_string(),
            non_finite.to_string(),
        );
        // Checksums and the content rules (sorted, in bounds, pointers).
        if let Some(pr) = f
            .verify()
            .into_iter()
            .find(|p| p.severity == Severity::Error)
        {
            return Err(refused(name, format!("fails verify: {pr}")));
        }
        let pattern = f.tensor_view(PATTERN)?;
        let order_t = f.dense(ORDER)?;
        pattern.check_checksums()?;
        order_t.check_checksums()?;
        if pattern.dtype() != DType::U32
            || order_t.dtype() != DType::U32
            || order_t.shape().len() != 1
        {
            return Err(refused(
                name,
                "the pattern and order tensors must hold u32".into(),
            ));
        }
        let shape = pattern.shape().to_vec();
        let layout = pattern.layout();
        let counts: Vec<u32> = u32s(pattern.values_bytes());
        let mut starts = Vec::new();
        starts
            .try_reserve_exact(counts.len() + 1)
            .map_err(|_| Error::OutOfMemory {
                what: "the plan's entry starts",
                bytes: counts.len() as u64 * 4,
            })?;
        let mut at = 0u64;
        for &c in &counts {
            starts.push(at as u32);
            at += c as u64;
            if c == 0 || at >= u32::MAX as u64 {
                return Err(refused(
                    name,
                    "an entry of the pattern has no contributions, or too many".into(),
                ));
            }
        }
        starts.push(at as u32);
        let order: Vec<u32> = u32s(order_t.values_bytes());
        // Every contribution has a position unless some were skipped.
        let n = contributions.unwrap_or(order.len() as u64);
        if n < order.len() as u64 || n >= u32::MAX as u64 {
            return Err(refused(
                name,
                format!("{n} contributions for an order of {}", order.len()),
            ));
        }
        let check = Check {
            shape: &shape,
            layout,
            digest,
            dtype: &dt,
            duplicates: &dup,
            exact_sums,
            non_finite: &nf,
            n,
            parts: None,
        };
        if check.value() != stored_check {
            return Err(refused(
                name,
                "the plan's KV entries do not match their check (damaged)".into(),
            ));
        }
        if order.len() as u64 != at {
            return Err(refused(
                name,
                format!(
                    "the pattern cuts {at} contributions, the order holds {}",
                    order.len()
                ),
            ));
        }
        // Every position at most once (each exactly once unless some
        // contributions were skipped).
        let mut seen = vec![0u64; (n as usize).div_ceil(64)];
        for &k in &order {
            let (w, b) = (k as usize / 64, k % 64);
            match seen.get_mut(w) {
                Some(x) if (k as u64) < n && *x & (1 << b) == 0 => *x |= 1 << b,
                _ => {
                    return Err(refused(
                        name,
                        format!("the order repeats or exceeds position {k}"),
                    ));
                }
            }
        }
        let structure = match &pattern {
            Tensor::Compressed(c) => Structure {
                indices: narrow(c.indices()),
                pointers: narrow(c.pointers()),
            },
            Tensor::Coo(c) => Structure {
                indices: narrow(c.indices()),
                pointers: Ix::U32(Vec::new()),
            },
            other => {
                return Err(refused(
                    name,
                    format!(
                        "its pattern is {}",
                        other.layout().to_string().to_uppercase()
                    ),
                ));
            }
        };
        Ok(Plan {
            shape,
            dtype,
            layout,
            kind: super::plan_kind(dtype, duplicates, exact_sums),
            duplicates,
            exact_sums,
            non_finite,
            threads: crate::options::AssembleOptions::default().threads,
            contributions: n as usize,
            order,
            starts,
            slots: std::sync::OnceLock::new(),
            structure,
            digest,
        })
    }

    /// CSR / CSC: call `f(major, its entries, their minor indices)` for
    /// every major index that has entries, in storage order, until it
    /// fails.
    pub(super) fn each_run(
        &self,
        mut f: impl FnMut(u64, std::ops::Range<usize>, &[u64]) -> Result<()>,
    ) -> Result<()> {
        let ptr = &self.structure.pointers;
        let mut minors = Vec::new();
        for m in 0..ptr.len().saturating_sub(1) {
            let (a, b) = (ptr.get(m) as usize, ptr.get(m + 1) as usize);
            if a >= b {
                continue;
            }
            minors.clear();
            let fits = match &self.structure.indices {
                Ix::U32(v) => v
                    .get(a..b)
                    .map(|x| minors.extend(x.iter().map(|&i| u64::from(i)))),
                Ix::U64(v) => v.get(a..b).map(|x| minors.extend_from_slice(x)),
            };
            if fits.is_none() {
                return Err(Error::Poisoned("a plan's pointers past its indices"));
            }
            f(m as u64, a..b, &minors)?;
        }
        Ok(())
    }

    /// Call `f(entry, index tuple)` for every entry, in storage order.
    pub(super) fn each_coordinate(&self, mut f: impl FnMut(usize, &[u64])) {
        let get = |ix: &Ix, i: usize| ix.get(i);
        let rank = self.shape.len();
        let mut idx = vec![0u64; rank];
        if self.layout.is_compressed() {
            let major = self.layout.major_dim();
            let ptr = &self.structure.pointers;
            for m in 0..ptr.len().saturating_sub(1) {
                for e in get(ptr, m) as usize..get(ptr, m + 1) as usize {
                    idx[major] = m as u64;
                    idx[1 - major] = get(&self.structure.indices, e);
                    f(e, &idx);
                }
            }
        } else {
            for e in 0..self.nnz() {
                for (d, x) in idx.iter_mut().enumerate() {
                    *x = get(&self.structure.indices, e * rank + d);
                }
                f(e, &idx);
            }
        }
    }
}

/// What the `coo_assembler.plan.check` entry covers: the plan's other KV
/// entries, its shape, layout and contribution count.
pub(super) struct Check<'a> {
    pub(super) shape: &'a [u64],
    pub(super) layout: crate::options::OutputLayout,
    pub(super) digest: u64,
    pub(super) dtype: &'a str,
    pub(super) duplicates: &'a str,
    pub(super) exact_sums: bool,
    pub(super) non_finite: &'a str,
    pub(super) n: u64,
    /// A plan kept in parts ([`PARTED_VERSION`]): how many.
    pub(super) parts: Option<u64>,
}

impl Check<'_> {
    pub(super) fn value(&self) -> u64 {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(&PLAN_VERSION.to_le_bytes());
        h.update(&self.digest.to_le_bytes());
        for t in [
            self.dtype,
            self.duplicates,
            self.non_finite,
            &self.layout.to_string(),
        ] {
            h.update(&(t.len() as u64).to_le_bytes());
            h.update(t.as_bytes());
        }
        h.update(&[u8::from(self.exact_sums)]);
        h.update(&self.n.to_le_bytes());
        for &e in self.shape {
            h.update(&e.to_le_bytes());
        }
        if let Some(p) = self.parts {
            h.update(&p.to_le_bytes());
        }
        h.digest()
    }
}

fn u32s(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn narrow(v: &[u64]) -> Ix {
    if v.iter().all(|&x| x <= u32::MAX as u64) {
        Ix::U32(v.iter().map(|&x| x as u32).collect())
    } else {
        Ix::U64(v.to_vec())
    }
}

/// The KV entries every plan file holds, read and checked for names.
pub(super) struct Header {
    pub(super) version: u64,
    pub(super) digest: u64,
    pub(super) dtype: DType,
    pub(super) duplicates: DuplicatePolicy,
    pub(super) exact_sums: bool,
    pub(super) non_finite: NonFinitePolicy,
    /// The `coo_assembler.plan.check` entry, to compare with a [`Check`].
    pub(super) stored_check: u64,
    /// [`KEY_CONTRIBUTIONS`], when the file has it.
    pub(super) contributions: Option<u64>,
}

impl Header {
    /// The plan entries of `f`'s KV section: a file that is not a plan, of
    /// a version this crate does not read, or whose entries are missing or
    /// misnamed is refused.
    pub(super) fn read(f: &HurrayFile, name: &str) -> Result<Header> {
        let kv = |k: &str| f.kv().iter().find(|(key, _)| key == k).map(|(_, v)| v);
        let version = match kv(KEY_VERSION) {
            Some(KvValue::U64(v)) => *v,
            _ => {
                return Err(refused(
                    name,
                    "not a plan file (no plan version in its KV section)".into(),
                ));
            }
        };
        if version != PLAN_VERSION && version != PARTED_VERSION {
            return Err(refused(
                name,
                format!(
                    "plan file version {version}; this coo-assembler reads versions {PLAN_VERSION} and {PARTED_VERSION}: plan again"
                ),
            ));
        }
        let text = |k: &str| match kv(k) {
            Some(KvValue::String(s)) => Ok(s.clone()),
            _ => Err(refused(
                name,
                format!("KV entry {k} is missing or not a string"),
            )),
        };
        let digest = match kv(KEY_DIGEST) {
            Some(KvValue::U64(d)) => *d,
            _ => return Err(refused(name, format!("KV entry {KEY_DIGEST} is missing"))),
        };
        let exact_sums = match kv(KEY_EXACT) {
            Some(KvValue::Bool(b)) => *b,
            _ => return Err(refused(name, format!("KV entry {KEY_EXACT} is missing"))),
        };
        let (dt, dup, nf) = (
            text(KEY_DTYPE)?,
            text(KEY_DUPLICATES)?,
            text(KEY_NON_FINITE)?,
        );
        let bad_name = |k: &str, e: Error| refused(name, format!("KV entry {k}: {e}"));
        let dtype = DType::parse(&dt).map_err(|e| bad_name(KEY_DTYPE, e))?;
        let duplicates = DuplicatePolicy::parse(&dup).map_err(|e| bad_name(KEY_DUPLICATES, e))?;
        let non_finite = NonFinitePolicy::parse(&nf).map_err(|e| bad_name(KEY_NON_FINITE, e))?;
        let stored_check = match kv(KEY_CHECK) {
            Some(KvValue::U64(c)) => *c,
            _ => return Err(refused(name, format!("KV entry {KEY_CHECK} is missing"))),
        };
        let contributions = match kv(KEY_CONTRIBUTIONS) {
            None => None,
            Some(KvValue::U64(n)) => Some(*n),
            Some(_) => {
                return Err(refused(
                    name,
                    format!("KV entry {KEY_CONTRIBUTIONS} is not a u64"),
                ));
            }
        };
        Ok(Header {
            version,
            digest,
            dtype,
            duplicates,
            exact_sums,
            non_finite,
            stored_check,
            contributions,
        })
    }
}
