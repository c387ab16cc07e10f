//! Content checks in O(nnz) ([`CooTensor::verify`], [`HurrayFile::verify`]):
//! bounds, order, duplicates, statistics and KV checksums, reported as
//! [`Problem`]s through a per-rule capped collector.

use super::{CooTensor, HurrayFile, Listed, Stored, close, shape_product};
use crate::element::{DType, format_float, group_digits};
use crate::hurray::KvValue;
use crate::hurray::Statistics;
use crate::hurray::kv::parse_checksum_key;
use crate::hurray::statistics::{
    NAN_INF_VALID, NNZ_VALID, SPARSITY_VALID, VALUE_RANGE_VALID, VALUE_STATS_VALID,
};
use crate::hurray::{HEADER_LEN, TRAILER_LEN};
use std::cmp::Ordering;
use std::fmt;
use std::ops::Range;

/// How serious a [`Problem`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// A rule of the format or of the content is broken: the file is invalid.
    Error,
    /// Advisory data disagrees with the content: the statistics, which the
    /// spec says readers must not rely on for correctness. The file is valid.
    Warning,
    /// Nothing is wrong, but a check could not be made: a tensor that
    /// carries no stored checksums (another writer's file) had its layout
    /// and content rules checked, not its bytes. The file is valid.
    Note,
}

/// The rule of the [`Severity::Note`] for a tensor without checksums.
pub const NO_CHECKSUMS: &str = "no-checksums";

/// The rule of the [`Severity::Warning`] for a tensor of a file our writer
/// says it wrote with checksums that lacks a checksum of some buffer: our
/// writer then stores one for every buffer, so a damaged key must not
/// silently leave a buffer unchecked (`verify --strict` fails on it).
pub const CHECKSUM_MISSING: &str = "checksum-missing";

impl Severity {
    /// The severity of the problems of `rule` (and of its `-more` summary).
    pub fn of_rule(rule: &str) -> Severity {
        if rule.starts_with("statistics-mismatch") || rule.starts_with(CHECKSUM_MISSING) {
            Severity::Warning
        } else if rule == NO_CHECKSUMS {
            Severity::Note
        } else {
            Severity::Error
        }
    }
}

/// A problem found by [`CooTensor::verify`] / [`HurrayFile::verify`].
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// Error (the file breaks a rule), warning (advisory data disagrees)
    /// or note (a check that could not be made).
    pub severity: Severity,
    /// The tensor concerned, if any.
    pub tensor: Option<String>,
    /// Short stable rule id: `index-out-of-bounds`, `not-sorted`, `duplicate`,
    /// `padding-not-zero`, `statistics-mismatch` (a warning),
    /// `checksum-mismatch`, `checksum-orphan`, `no-checksums` (a note);
    /// for CSR/CSC also
    /// `pointer-start` (`ptr[0] != 0`), `pointer-decreasing`,
    /// `pointer-out-of-range` (a pointer past nnz) and `pointer-end` (the
    /// last pointer is not nnz); or `<rule>-more` for the summary of
    /// problems beyond the per-rule cap.
    pub rule: &'static str,
    /// The entry (0-based position in the buffers), if any.
    pub entry: Option<u64>,
    /// What is wrong, with the values found.
    pub detail: String,
}

impl Problem {
    /// A problem of `rule`, with the severity the rule has.
    pub fn new(
        rule: &'static str,
        tensor: Option<String>,
        entry: Option<u64>,
        detail: String,
    ) -> Problem {
        Problem {
            severity: Severity::of_rule(rule),
            tensor,
            rule,
            entry,
            detail,
        }
    }

    /// Whether the file is invalid because of this problem.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.severity {
            Severity::Error => {}
            Severity::Warning => f.write_str("warning: ")?,
            // A sentence for the reader, not a broken rule: no rule id.
            Severity::Note => {
                f.write_str("note: ")?;
                if let Some(t) = &self.tensor {
                    write!(f, "tensor {t:?} ")?;
                }
                return f.write_str(&self.detail);
            }
        }
        write!(f, "[{}]", self.rule)?;
        if let Some(t) = &self.tensor {
            write!(f, " tensor {t:?}")?;
        }
        if let Some(e) = self.entry {
            write!(f, " entry {e}")?;
        }
        write!(f, ": {}", self.detail)
    }
}

/// Problems reported per rule and tensor before a summary takes over.
pub const MAX_PROBLEMS_PER_RULE: u64 = 100;

/// Memory cap of the duplicate detector for unsorted tensors (bytes).
pub const DUPLICATE_MEMORY_CAP: usize = 64 << 20;

pub(super) struct Collector<'a> {
    tensor: &'a str,
    out: Vec<Problem>,
    counts: Vec<(&'static str, u64)>,
}

impl<'a> Collector<'a> {
    pub(super) fn new(tensor: &'a str) -> Self {
        Collector {
            tensor,
            out: Vec::new(),
            counts: Vec::new(),
        }
    }

    fn count(&mut self, rule: &'static str) -> u64 {
        if let Some(c) = self.counts.iter_mut().find(|(r, _)| *r == rule) {
            c.1 += 1;
            c.1
        } else {
            self.counts.push((rule, 1));
            1
        }
    }

    pub(super) fn push(
        &mut self,
        rule: &'static str,
        entry: Option<u64>,
        detail: impl FnOnce() -> String,
    ) {
        if self.count(rule) <= MAX_PROBLEMS_PER_RULE {
            self.out.push(Problem::new(
                rule,
                Some(self.tensor.to_string()),
                entry,
                detail(),
            ));
        }
    }

    pub(super) fn finish(mut self) -> Vec<Problem> {
        for &(rule, n) in &self.counts {
            if n > MAX_PROBLEMS_PER_RULE {
                let more = match rule {
                    "index-out-of-bounds" => "index-out-of-bounds-more",
                    "not-sorted" => "not-sorted-more",
                    "duplicate" => "duplicate-more",
                    "statistics-mismatch" => "statistics-mismatch-more",
                    "checksum-mismatch" => "checksum-mismatch-more",
                    "pointer-decreasing" => "pointer-decreasing-more",
                    "pointer-out-of-range" => "pointer-out-of-range-more",
                    _ => "more",
                };
                self.out.push(Problem::new(
                    more,
                    Some(self.tensor.to_string()),
                    None,
                    format!("and {} more {rule} problems", n - MAX_PROBLEMS_PER_RULE),
                ));
            }
        }
        self.out
    }
}

impl HurrayFile {
    /// Check the content of every tensor and the KV checksums. Empty = OK
    /// with nothing to add; the file is valid unless a problem
    /// [`is_error`](Problem::is_error).
    ///
    /// O(total nnz) time, bounded memory (see [`CooTensor::verify`]). KV keys
    /// `coo_assembler.xxh3.<name>.values|indices` naming no tensor are
    /// reported as `checksum-orphan`. A COO, CSR or CSC tensor that carries
    /// no stored checksums (another writer's file) gets a
    /// [`Severity::Note`] saying its bytes could not be checked.
    pub fn verify(&self) -> Vec<Problem> {
        let bytes: u64 = self.tensors.iter().map(Stored::buffer_bytes).sum();
        let mut out = self.checking(bytes, || {
            self.tensors
                .iter()
                .flat_map(|t| self.verify_stored(t))
                .collect::<Vec<_>>()
        });
        for (k, _) in &self.kv {
            if let Some((name, _)) = parse_checksum_key(k) {
                if !self.by_name.contains_key(name) {
                    out.push(Problem::new(
                        "checksum-orphan",
                        Some(name.to_string()),
                        None,
                        format!("KV key {k:?} names a tensor that is not in the file"),
                    ));
                }
            }
        }
        out.extend(self.check_padding());
        out
    }

    /// Run `check`, over tensors of `bytes` bytes of buffers, as the
    /// file's `Check` step: about two passes over each buffer (checksums,
    /// then content).
    fn checking<T>(&self, bytes: u64, check: impl FnOnce() -> T) -> T {
        let p = self.progress_ref();
        if let Some(p) = p {
            p.start(crate::progress::Step::Check, 2 * bytes);
        }
        let out = check();
        if let Some(p) = p {
            p.idle();
        }
        out
    }

    /// Whether the file says our writer wrote it (its `coo_assembler.writer`
    /// key) with checksums on (some checksum key is there): then every
    /// buffer of every tensor has one.
    fn checksums_on(&self) -> bool {
        let ours = self.kv.iter().any(|(k, v)| {
            k == crate::hurray::kv::KEY_WRITER
                && matches!(v, KvValue::String(s) if s.starts_with("coo-assembler"))
        });
        ours && self
            .kv
            .iter()
            .any(|(k, _)| k.starts_with(crate::hurray::kv::CHECKSUM_KEY_PREFIX))
    }

    /// The content checks of the tensor called `name`, whatever its layout:
    /// a COO, CSR or CSC tensor's [`Tensor::verify`](super::Tensor::verify);
    /// for a dense one, its stored checksum if any (its placement was checked
    /// at open; [`TensorInfo::verify_note`](super::TensorInfo::verify_note)
    /// says what that covers); nothing more for other layouts.
    pub fn verify_tensor(&self, name: &str) -> crate::Result<Vec<Problem>> {
        let s = self.stored(name)?;
        Ok(self.checking(s.buffer_bytes(), || self.verify_stored(s)))
    }

    fn verify_stored(&self, s: &Stored) -> Vec<Problem> {
        match s {
            Stored::Served(t) => {
                let view = self.view(t);
                let mut out = view.verify();
                let buffers = view.layout().buffer_count(view.rank());
                let stored = view.stored_checksums();
                if stored < buffers && self.checksums_on() {
                    out.push(Problem::new(
                        CHECKSUM_MISSING,
                        Some(t.name.clone()),
                        None,
                        format!(
                            "the file says coo-assembler wrote it with checksums, which stores an \
                             xxh3 checksum of every buffer, but only {stored} of this tensor's \
                             {buffers} buffers have one (a damaged KV key?): the others' bytes \
                             could not be checked"
                        ),
                    ));
                } else if stored == 0 {
                    // Said here, once for every front end: a clean report
                    // of a file without checksums must not read as "every
                    // byte checked". (A dense tensor's note is its
                    // verify_note.)
                    out.push(Problem::new(
                        NO_CHECKSUMS,
                        Some(t.name.clone()),
                        None,
                        "carries no stored checksums (written by another writer): its layout \
                         and content rules were checked, its bytes could not be"
                            .to_string(),
                    ));
                }
                out
            }
            Stored::Listed(l) => match &l.desc {
                Listed::Dense(d) => {
                    let mut c = Collector::new(&l.name);
                    let content = Content {
                        name: &l.name,
                        dtype: d.dtype,
                        shape: &d.shape,
                        nnz: 0,
                        // Dense statistics count non-zeros over every
                        // element; only the checksum is compared.
                        statistics: None,
                        buffers: vec![("values", &self.backing.bytes()[l.data.clone()])],
                        values: &[],
                        kv: &self.kv,
                        mapped: self.backing.mapped(),
                    };
                    content.check(&mut c);
                    c.finish()
                }
                // Its buffers are not located, so a checksum of ours
                // naming it cannot be compared: our writer writes no such
                // layout, so its descriptor is not what was written (a
                // damaged layout tag) or the key is stray.
                Listed::Other(h) => {
                    let mut c = Collector::new(&l.name);
                    for (k, _) in &self.kv {
                        match parse_checksum_key(k) {
                            Some((name, which)) if name == l.name => {
                                c.push("checksum-orphan", None, || {
                                    format!(
                                        "KV key {k:?} holds a checksum of a {which} buffer, but the tensor is {}, a layout our writer does not write and whose buffers this reader does not locate",
                                        crate::layout::describe_tag(h.layout_tag)
                                    )
                                })
                            }
                            _ => {}
                        }
                    }
                    c.finish()
                }
            },
        }
    }

    /// Every byte between the file's sections (header, descriptors,
    /// buffers, KV, index, trailer) must be 0x00: the spec's padding rule.
    /// Streamed over the file, O(size), one problem per gap naming its first
    /// non-zero byte.
    fn check_padding(&self) -> Vec<Problem> {
        let bytes = self.backing.bytes();
        let len = bytes.len();
        let mut regions: Vec<(Range<usize>, String)> =
            vec![(0..HEADER_LEN as usize, "the file header".into())];
        for s in &self.tensors {
            let t = match s {
                Stored::Served(t) => t,
                Stored::Listed(l) => {
                    let n = &l.name;
                    let data = match l.desc {
                        Listed::Dense(_) => "values",
                        Listed::Other(_) => "data",
                    };
                    regions.push((l.descriptor.clone(), format!("the descriptor of {n:?}")));
                    regions.push((l.data.clone(), format!("the {data} of {n:?}")));
                    continue;
                }
            };
            let n = &t.name;
            regions.push((t.descriptor.clone(), format!("the descriptor of {n:?}")));
            let names = t.desc.layout().buffer_names();
            for (r, what) in t.buffers.iter().zip(names) {
                regions.push((r.clone(), format!("the {what} of {n:?}")));
            }
        }
        let (ko, kl) = (
            self.trailer.kv_offset as usize,
            self.trailer.kv_length as usize,
        );
        if kl > 0 {
            regions.push((ko..ko + kl, "the KV section".into()));
        }
        let (io, il) = (
            self.trailer.index_offset as usize,
            self.trailer.index_length as usize,
        );
        regions.push((io..io + il, "the index".into()));
        regions.push((len - TRAILER_LEN as usize..len, "the trailer".into()));
        regions.retain(|(r, _)| !r.is_empty());
        regions.sort_by_key(|(r, _)| (r.start, r.end));
        let mapped = self.backing.mapped();
        let mut out = Vec::new();
        let mut end = 0usize;
        let mut after = "the start of the file".to_string();
        for (r, name) in &regions {
            if r.start > end {
                let gap = &bytes[end..r.start];
                let mut behind = mapped.cursor(gap);
                let mut first = None;
                let mut count = 0u64;
                for (k, chunk) in gap.chunks(1 << 20).enumerate() {
                    for (j, &b) in chunk.iter().enumerate() {
                        if b != 0 {
                            count += 1;
                            first.get_or_insert((end + k * (1 << 20) + j, b));
                        }
                    }
                    behind.at((k + 1) << 20);
                }
                behind.flush(gap.len());
                if let Some((at, b)) = first {
                    out.push(Problem::new(
                        "padding-not-zero",
                        None,
                        None,
                        format!(
                            "byte {at}: padding between {after} and {name} must be 0x00, found 0x{b:02x} ({count} non-zero of the {} padding bytes {end}..{})",
                            gap.len(),
                            r.start
                        ),
                    ));
                }
            }
            if r.end > end {
                end = r.end;
                after = name.clone();
            }
        }
        out
    }
}

impl<'a> CooTensor<'a> {
    /// Check the content: bounds, order, duplicates, statistics, KV checksums.
    ///
    /// O(nnz) time for sorted tensors. Memory is bounded: duplicates in an
    /// unsorted tensor are found by hash partitioning — `P = ceil(2 * nnz * 16
    /// / DUPLICATE_MEMORY_CAP)` passes, each collecting `(hash, position)`
    /// pairs (plus a 1-byte mark) of one partition into vectors of at most
    /// `DUPLICATE_MEMORY_CAP` bytes (64 MiB), sorted, equal hashes compared
    /// coordinate by coordinate. A partition larger than the cap (adversarial
    /// hashes) is processed in cap-sized chunks, each probed by a scan of the
    /// rest: still exact and bounded, only slower.
    pub fn verify(&self) -> Vec<Problem> {
        self.verify_with_cap(DUPLICATE_MEMORY_CAP)
    }

    fn verify_with_cap(&self, cap_bytes: usize) -> Vec<Problem> {
        let mut c = Collector::new(self.name);
        let r = self.rank;
        let shape = &self.desc.shape;
        let mut order_ok = true;
        let mut prev: Option<&[u64]> = None;
        let mut behind = self.mapped.cursor(self.indices_bytes());
        for (p, e) in self.indices.chunks_exact(r).enumerate() {
            if p % 4096 == 0 {
                behind.at(p * r * 8);
            }
            for (d, (&i, &ext)) in e.iter().zip(shape).enumerate() {
                if i >= ext {
                    c.push("index-out-of-bounds", Some(p as u64), || {
                        format!("index {i} in dimension {d} is >= extent {ext} (coordinate {e:?})")
                    });
                }
            }
            if self.desc.is_sorted {
                if let Some(q) = prev {
                    match q.cmp(e) {
                        Ordering::Less => {}
                        Ordering::Equal => c.push("duplicate", Some(p as u64), || {
                            format!("coordinate {e:?} equals that of entry {}", p - 1)
                        }),
                        Ordering::Greater => {
                            order_ok = false;
                            c.push("not-sorted", Some(p as u64), || {
                                format!("coordinate {e:?} is smaller than {q:?} of entry {} but is_sorted = 1", p - 1)
                            })
                        }
                    }
                }
                prev = Some(e);
            }
        }
        if !self.desc.is_sorted || !order_ok {
            self.find_duplicates(&mut c, cap_bytes, !self.desc.is_sorted);
        }
        self.content().check(&mut c);
        c.finish()
    }

    fn content(&self) -> Content<'a> {
        Content {
            name: self.name,
            dtype: self.desc.dtype,
            shape: &self.desc.shape,
            nnz: self.nnz as u64,
            statistics: self.desc.statistics,
            buffers: vec![
                ("values", self.stored_values),
                ("indices", self.indices_bytes()),
            ],
            values: self.values,
            kv: self.kv,
            mapped: self.mapped,
        }
    }

    fn hash_entry(e: &[u64]) -> u64 {
        xxhash_rust::xxh3::xxh3_64(bytemuck::cast_slice(e))
    }

    /// Hash-partitioned duplicate search (see `verify`): each entry whose
    /// coordinate occurs earlier is reported once, naming the first occurrence.
    /// When `all` is false (a sorted tensor with order violations), entries
    /// equal to their predecessor were already reported and are skipped.
    fn find_duplicates(&self, c: &mut Collector<'_>, cap_bytes: usize, all: bool) {
        let r = self.rank;
        let n = self.nnz;
        if n < 2 {
            return;
        }
        // 16 bytes of (hash, position) + 1 byte of mark per collected entry.
        let chunk = (cap_bytes / 17).max(2);
        let parts = (n.saturating_mul(2)).div_ceil(chunk).max(1) as u64;
        let ind = self.indices;
        let entry = |p: usize| &ind[p * r..p * r + r];
        let hash = |p: usize| Self::hash_entry(entry(p));
        // A sorted tensor with order violations already had its adjacent
        // duplicates reported by the order check.
        let report = |c: &mut Collector<'_>, first: usize, later: usize| {
            if all || entry(later - 1) != entry(later) {
                c.push("duplicate", Some(later as u64), || {
                    format!("coordinate {:?} equals that of entry {first}", entry(later))
                });
            }
        };
        // First element of `buf` (sorted by (hash, position)) with the
        // coordinate of entry p, i.e. the smallest such position in the chunk.
        let lookup = |buf: &[(u64, usize)], h: u64, p: usize| -> Option<usize> {
            let lo = buf.partition_point(|&(bh, _)| bh < h);
            buf[lo..]
                .iter()
                .take_while(|&&(bh, _)| bh == h)
                .position(|&(_, q)| entry(q) == entry(p))
                .map(|k| lo + k)
        };
        let mut buf: Vec<(u64, usize)> = Vec::new();
        let mut marked: Vec<bool> = Vec::new();
        for part in 0..parts {
            // Members of the partition are taken in position order, at most
            // `chunk` at a time; normally one chunk holds the whole partition.
            let mut start = 0usize;
            loop {
                buf.clear();
                let mut next = n;
                let mut first_pos = n;
                for p in start..n {
                    let h = hash(p);
                    if h % parts == part {
                        if buf.len() == chunk {
                            next = p;
                            break;
                        }
                        first_pos = first_pos.min(p);
                        buf.push((h, p));
                    }
                }
                if buf.is_empty() {
                    break;
                }
                buf.sort_unstable();
                // Mark chunk entries whose coordinate occurs in an earlier
                // chunk: an earlier chunk reported those groups already.
                marked.clear();
                marked.resize(buf.len(), false);
                for p in 0..first_pos {
                    let h = hash(p);
                    if h % parts != part {
                        continue;
                    }
                    if let Some(k) = lookup(&buf, h, p) {
                        marked[k] = true;
                    }
                }
                // Within the chunk: later members of each unmarked group.
                for j in 0..buf.len() {
                    let (h, later) = buf[j];
                    if let Some(k) = lookup(&buf, h, later).filter(|&k| k != j) {
                        if !marked[k] {
                            report(c, buf[k].1, later);
                        }
                    }
                }
                if next >= n {
                    break;
                }
                // Members after the chunk equal to an unmarked group.
                for p in next..n {
                    let h = hash(p);
                    if h % parts != part {
                        continue;
                    }
                    if let Some(k) = lookup(&buf, h, p).filter(|&k| !marked[k]) {
                        report(c, buf[k].1, p);
                    }
                }
                start = next;
            }
        }
    }
}

/// What the statistics and checksum checks need of a tensor, whatever
/// its layout.
pub(super) struct Content<'a> {
    pub(super) name: &'a str,
    pub(super) dtype: DType,
    pub(super) shape: &'a [u64],
    pub(super) nnz: u64,
    pub(super) statistics: Option<Statistics>,
    /// Every buffer by its spec name, values first, as stored (what the
    /// checksums cover).
    pub(super) buffers: Vec<(&'static str, &'a [u8])>,
    /// The values one element each (bools unpacked; else the stored
    /// values buffer), for the statistics.
    pub(super) values: &'a [u8],
    pub(super) kv: &'a [(String, KvValue)],
    pub(super) mapped: super::release::Mapped<'a>,
}

impl<'a> Content<'a> {
    /// Statistics (advisory: warnings) and KV checksums.
    pub(super) fn check(&self, c: &mut Collector<'_>) {
        self.check_statistics(c);
        self.check_checksums(c);
    }

    /// The stored values in order, releasing the pages read.
    fn values(&self) -> impl Iterator<Item = crate::element::Value> + 'a + use<'a> {
        let d = self.dtype;
        let w = d.width();
        let values = self.values;
        let mut behind = self.mapped.cursor(values);
        values.chunks_exact(w).enumerate().map(move |(k, v)| {
            if k % 4096 == 0 {
                behind.at(k * w);
            }
            d.decode(v)
        })
    }

    fn check_statistics(&self, c: &mut Collector<'_>) {
        let Some(s) = self.statistics else {
            return;
        };
        let m = s.computed_mask;
        let total = shape_product(self.shape);
        let n_f = total as f64;
        let nnz = self.nnz;
        let implicit = (nnz as u128) < total;
        if m & NNZ_VALID != 0 && s.nnz != nnz {
            c.push("statistics-mismatch", None, || {
                format!("statistics nnz {} but {nnz} entries are stored", s.nnz)
            });
        }
        if m & SPARSITY_VALID != 0 {
            let want = if total == 0 {
                0.0
            } else {
                1.0 - nnz as f64 / n_f
            };
            if !close(s.sparsity_ratio, want, 1.0) {
                c.push("statistics-mismatch", None, || {
                    format!(
                        "sparsity_ratio {} but the data give {want}",
                        s.sparsity_ratio
                    )
                });
            }
        }
        if m & (VALUE_RANGE_VALID | VALUE_STATS_VALID | NAN_INF_VALID) == 0 {
            return;
        }
        let (mut min, mut max, mut amax) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
        let (mut nan, mut inf, mut sum) = (false, false, 0.0f64);
        for v in self.values() {
            let x = v.to_f64();
            if x.is_nan() {
                nan = true;
                continue;
            }
            inf |= x.is_infinite();
            min = min.min(x);
            max = max.max(x);
            amax = amax.max(x.abs());
            sum += x;
        }
        // The same over the stored values only: the convention of writers
        // that take `values.min()`, `values.mean()`... of what they store.
        let (stored_min, stored_max) = (min, max);
        if implicit {
            min = min.min(0.0);
            max = max.max(0.0);
        }
        let elements = group_digits(total);
        let num = |v: f64| format_float(v, DType::F64);
        let mut bad = |field: &str, noun: &str, got: f64, want: f64, stored: Option<f64>| {
            c.push("statistics-mismatch", None, || match stored {
                Some(s) if implicit && nnz > 0 && close(got, s, amax) => format!(
                    "{field} is {}: this is the {noun} over the {} stored values; the spec defines it over all {elements} elements, implicit zeros included, which gives {} (statistics are advisory: the data are not affected)",
                    num(got),
                    group_digits(u128::from(nnz)),
                    num(want)
                ),
                _ => format!(
                    "{field} is {} but the data give {} (over all {elements} elements, implicit zeros included)",
                    num(got),
                    num(want)
                ),
            })
        };
        if m & VALUE_RANGE_VALID != 0 && min <= max {
            for (f, noun, got, want, stored) in [
                ("value_min", "minimum", s.value_min, min, Some(stored_min)),
                ("value_max", "maximum", s.value_max, max, Some(stored_max)),
                (
                    "value_abs_max",
                    "largest magnitude",
                    s.value_abs_max,
                    amax,
                    None,
                ),
            ] {
                if got != want {
                    bad(f, noun, got, want, stored);
                }
            }
        }
        if m & NAN_INF_VALID != 0 {
            if s.has_nan != nan {
                bad(
                    "has_nan",
                    "",
                    s.has_nan as u8 as f64,
                    nan as u8 as f64,
                    None,
                );
            }
            if s.has_inf != inf {
                bad(
                    "has_inf",
                    "",
                    s.has_inf as u8 as f64,
                    inf as u8 as f64,
                    None,
                );
            }
        }
        if m & VALUE_STATS_VALID != 0 && total > 0 && !nan {
            let mean = sum / n_f;
            let stored_mean = sum / (nnz.max(1) as f64);
            let (mut sq, mut stored_sq) = (0.0f64, 0.0f64);
            for v in self.values() {
                let d = v.to_f64() - mean;
                sq += d * d;
                let d = v.to_f64() - stored_mean;
                stored_sq += d * d;
            }
            if implicit {
                sq += (n_f - nnz as f64) * mean * mean;
            }
            let sd = (sq / n_f).sqrt();
            let stored_sd = (stored_sq / (nnz.max(1) as f64)).sqrt();
            if !close(s.value_mean, mean, amax) {
                bad("value_mean", "mean", s.value_mean, mean, Some(stored_mean));
            }
            if !close(s.value_stddev, sd, amax) {
                bad(
                    "value_stddev",
                    "standard deviation",
                    s.value_stddev,
                    sd,
                    Some(stored_sd),
                );
            }
        }
    }

    fn check_checksums(&self, c: &mut Collector<'_>) {
        for (k, v) in self.kv {
            let Some((name, which)) = parse_checksum_key(k) else {
                continue;
            };
            if name != self.name {
                continue;
            }
            let Some(&(_, data)) = self.buffers.iter().find(|(b, _)| *b == which) else {
                c.push("checksum-orphan", None, || {
                    format!("KV key {k:?} names a {which} buffer, which this tensor does not have")
                });
                continue;
            };
            match v {
                KvValue::U64(want) => {
                    // Streamed, releasing the pages hashed (same digest as
                    // the one-shot xxh3_64).
                    let mut h = xxhash_rust::xxh3::Xxh3::new();
                    let mut behind = self.mapped.cursor(data);
                    for (k, chunk) in data.chunks(1 << 20).enumerate() {
                        h.update(chunk);
                        behind.at((k + 1) << 20);
                    }
                    behind.flush(data.len());
                    let got = h.digest();
                    if got != *want {
                        c.push("checksum-mismatch", None, || {
                            format!("{which} buffer hashes to xxh3 0x{got:016x}, KV {k:?} says 0x{want:016x}")
                        });
                    }
                }
                other => c.push("checksum-mismatch", None, || {
                    format!("KV {k:?} should be a u64 xxh3-64, found {other:?}")
                }),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::super::coo::tests::{desc, view};
    use super::*;

    fn brute(ind: &[u64], r: usize) -> Vec<u64> {
        let e: Vec<&[u64]> = ind.chunks_exact(r).collect();
        (0..e.len())
            .filter(|&j| e[..j].contains(&e[j]))
            .map(|j| j as u64)
            .collect()
    }

    fn dups(t: &CooTensor<'_>, cap: usize) -> Vec<u64> {
        let mut v: Vec<u64> = t
            .verify_with_cap(cap)
            .iter()
            .filter(|p| p.rule == "duplicate")
            .filter_map(|p| p.entry)
            .collect();
        v.sort();
        v
    }

    #[test]
    fn duplicate_detector_is_exact_under_tiny_memory_caps() {
        // Pseudo-random coordinates with many repeats, rank 2.
        let mut x = 12345u64;
        let mut ind = Vec::new();
        for _ in 0..150 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ind.push((x >> 33) % 10);
            ind.push((x >> 13) % 10);
        }
        let d = desc(vec![10, 10], 150, false);
        let vals = vec![1u8; 150];
        let t = view(&d, &ind, &vals);
        let want = brute(&ind, 2);
        // Below the per-rule report cap of 100.
        assert!(want.len() > 20 && want.len() < 100, "{}", want.len());
        // 64 MiB (one pass), 16 entries per chunk (many partitions), 2 entries
        // per chunk (chunk fallback inside partitions).
        for cap in [DUPLICATE_MEMORY_CAP, 16 * 16, 32] {
            assert_eq!(dups(&t, cap), want, "cap {cap}");
        }
        // All entries identical: one partition, far over the cap.
        let same = vec![3u64; 200];
        let d = desc(vec![12, 12], 100, false);
        let t = view(&d, &same, &vals[..100]);
        assert_eq!(dups(&t, 64), (1..100).collect::<Vec<_>>());
    }

    #[test]
    fn collector_caps_and_summarises() {
        let mut c = Collector::new("t");
        for i in 0..250 {
            c.push("duplicate", Some(i), || "x".into());
        }
        c.push("not-sorted", Some(1), || "y".into());
        let p = c.finish();
        assert_eq!(p.len(), 102);
        assert_eq!(p[101].rule, "duplicate-more");
        assert!(p[101].to_string().contains("and 150 more duplicate"));
    }

    #[test]
    fn checksum_keys() {
        assert_eq!(
            parse_checksum_key("coo_assembler.xxh3.a.b.values"),
            Some(("a.b", "values"))
        );
        assert_eq!(parse_checksum_key("coo_assembler.xxh3.a"), None);
        assert_eq!(
            parse_checksum_key("coo_assembler.xxh3.a.col_indices"),
            Some(("a", "col_indices"))
        );
        assert_eq!(
            parse_checksum_key("coo_assembler.xxh3.x.col.indices"),
            Some(("x.col", "indices"))
        );
        assert_eq!(
            parse_checksum_key("coo_assembler.xxh3.K.row_ptr"),
            Some(("K", "row_ptr"))
        );
    }
}
