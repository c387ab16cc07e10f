//! Writing partition composites (issue 13): one Hurray file holding a head
//! (layout tag 0x0B, rule partition) and one COO member per part, each with
//! a shard section (`parent_shape` = the head's shape, `shard_offset` = the
//! part's box) and its own statistics and KV checksums.
//!
//! A member is taken from a plain single-tensor file written by the
//! ordinary assembler (its descriptor gets the shard section, its buffers
//! are copied as they are), so every rank of an MPI job (`crate::mpi`) can
//! write its own member at its own offset, and [`join`] does the same for
//! files assembled separately.
//!
//! # Layout
//! ```text
//! [header 64][head 37+8r][pad to 8][member 0][member 1]...[KV][index][trailer]
//! member k: [descriptor (COO + shard + statistics)][pad to A][values][pad to A][indices][pad to A]
//! ```
//! No padding after the head beyond the 8-byte boundary (the spec forbids
//! it; hurray-io 0.1.0 pads to A, which the reader accepts with a warning).
//! Every member after the first therefore starts at a multiple of A, so
//! its size does not depend on where it lands: ranks can size their
//! members alone and take offsets from an exclusive scan. An empty member
//! (nnz = 0) has both buffers at `align_up(descriptor end, A)` and
//! `data_length` 0, as [`crate::write`] does.
//!
//! KV: `coo_assembler.writer`, then `coo_assembler.xxh3.<member>.values`
//! and `.indices` per member, in member order.

use crate::error::{Error, Result};
use crate::fs::ctx::IoCtx;
use crate::fs::names::{new_output_temp_name, parent_dir};
use crate::hurray::{align_up, FileHeader, IndexEntry, KvValue, HEADER_LEN, MIN_ALIGNMENT};
use crate::read::composite::{encode_member, CompositeHead, Shard, RULE_PARTITION};
use crate::write::{buffer_checksum_key, encode_tail, provenance};
use crate::HurrayFile;
use std::fs::File;
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::xxh3_64;

/// data_buffer_alignment of the composites written here.
pub const ALIGNMENT: u64 = MIN_ALIGNMENT as u64;

/// The name of member `k` of the composite `head`.
pub fn member_name(head: &str, k: usize) -> String {
    format!("{head}.part{k}")
}

/// Offset of the first member: right after the head, at the next multiple of 8.
pub fn first_member_offset(rank: usize) -> u64 {
    (HEADER_LEN + CompositeHead::encoded_len(rank) as u64).div_ceil(8) * 8
}

/// Bytes copied per read/write when placing a member: the copy streams
/// through this buffer instead of mapping the source, so a rank's resident
/// memory does not grow with its member's size.
const COPY_CHUNK: usize = 4 << 20;

/// One member ready to be placed: its sharded descriptor and where its
/// buffers are in a plain single-tensor source file (read with positioned
/// reads, never mapped while copying).
pub struct Prepared {
    /// Index name.
    pub name: String,
    desc: Vec<u8>,
    nnz: u64,
    source: File,
    source_path: PathBuf,
    values: (u64, u64),
    indices: (u64, u64),
    /// xxh3-64 of (values, indices) from the source's KV, when it has them.
    sums: Option<(u64, u64)>,
}

impl Prepared {
    /// Member `name` from the plain single-tensor file at `path`, whose box
    /// starts at `offset` in `parent_shape`. Its indices must be local to
    /// the box and sorted.
    pub fn from_file(
        name: String,
        path: &Path,
        parent_shape: &[u64],
        offset: &[u64],
    ) -> Result<Prepared> {
        let file = HurrayFile::open(path)?;
        let t = file.only_tensor()?;
        if offset.len() != parent_shape.len() || t.rank() != parent_shape.len() {
            return Err(Error::InvalidArgument(format!(
                "member {name:?}: rank {} against parent shape {parent_shape:?} and offset {offset:?}",
                t.rank()
            )));
        }
        for d in 0..offset.len() {
            if offset[d]
                .checked_add(t.shape()[d])
                .is_none_or(|e| e > parent_shape[d])
            {
                return Err(Error::InvalidArgument(format!(
                    "member {name:?}: box {offset:?} + {:?} leaves the parent shape {parent_shape:?}",
                    t.shape()
                )));
            }
        }
        let shard = Shard {
            parent_shape: parent_shape.to_vec(),
            offset: offset.to_vec(),
        };
        // Buffer positions in the source: the views point into its map.
        let Some(base) = file.mapped_bytes().map(|b| b.as_ptr() as usize) else {
            return Err(Error::InvalidArgument(format!(
                "{}: not memory-mapped; cannot locate its buffers",
                path.display()
            )));
        };
        let at = |b: &[u8]| {
            (
                (b.as_ptr() as usize).wrapping_sub(base) as u64,
                b.len() as u64,
            )
        };
        let (values, indices) = if t.nnz() == 0 {
            ((0, 0), (0, 0))
        } else {
            (at(t.values_bytes()), at(t.indices_bytes()))
        };
        let kv_sum = |which: &str| {
            let key = buffer_checksum_key(t.name(), which);
            file.kv().iter().find_map(|(k, v)| match v {
                KvValue::U64(x) if *k == key => Some(*x),
                _ => None,
            })
        };
        let sums = kv_sum("values").zip(kv_sum("indices"));
        let p = Prepared {
            desc: encode_member(t.descriptor(), &shard),
            nnz: t.nnz(),
            source: IoCtx::new().open(path)?,
            source_path: path.to_path_buf(),
            values,
            indices,
            sums,
            name,
        };
        Ok(p)
    }

    /// Entries in the member.
    pub fn nnz(&self) -> u64 {
        self.nnz
    }

    /// Bytes the member occupies when it starts at `start` (the next
    /// member starts right after).
    pub fn size_at(&self, start: u64) -> u64 {
        self.place(start).3 - start
    }

    /// (values offset, indices offset, data_length, end) at `start`.
    fn place(&self, start: u64) -> (u64, u64, u64, u64) {
        let a = |x: u64| align_up(x, ALIGNMENT).unwrap_or(u64::MAX);
        let v = a(start + self.desc.len() as u64);
        if self.nnz == 0 {
            return (v, v, 0, v);
        }
        let i = a(v + self.values.1);
        let end_i = i + self.indices.1;
        (v, i, end_i - v, a(end_i))
    }

    /// Copy source bytes `from` (offset, length) to `to` in `file` through
    /// `buf`; the xxh3-64 of the bytes when the source has no checksums.
    fn copy(
        &self,
        io: &IoCtx,
        file: &File,
        path: &Path,
        from: (u64, u64),
        to: u64,
        buf: &mut [u8],
    ) -> Result<u64> {
        let hash = self.sums.is_none();
        let mut h = xxhash_rust::xxh3::Xxh3Default::new();
        let mut done = 0u64;
        while done < from.1 {
            let n = (from.1 - done).min(buf.len() as u64) as usize;
            io.read_exact_at(
                &self.source,
                &mut buf[..n],
                from.0 + done,
                &self.source_path,
            )?;
            if hash {
                h.update(&buf[..n]);
            }
            io.write_all_at(file, &buf[..n], to + done, path)?;
            done += n as u64;
        }
        Ok(h.digest())
    }
}

/// Where a member went and the checksums of its buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// Its index entry.
    pub entry: IndexEntry,
    /// xxh3-64 of the values buffer.
    pub values_xxh3: u64,
    /// xxh3-64 of the indices buffer.
    pub indices_xxh3: u64,
}

/// Write member `p` at `start` into `file` (positioned writes: other
/// processes may be writing other members of the same file). The buffers
/// stream through a bounded copy buffer; their checksums come from the
/// source's KV when it has them, and are computed while copying otherwise.
pub fn write_member(
    io: &IoCtx,
    file: &File,
    path: &Path,
    start: u64,
    p: &Prepared,
) -> Result<Placed> {
    let (v, i, data_length, _) = p.place(start);
    io.write_all_at(file, &p.desc, start, path)?;
    let mut buf = vec![0u8; COPY_CHUNK.min(p.values.1.max(p.indices.1) as usize)];
    let (mut vs, mut is) = (xxh3_64(&[]), xxh3_64(&[]));
    if p.nnz > 0 {
        vs = p.copy(io, file, path, p.values, v, &mut buf)?;
        is = p.copy(io, file, path, p.indices, i, &mut buf)?;
    }
    let (values_xxh3, indices_xxh3) = p.sums.unwrap_or((vs, is));
    Ok(Placed {
        entry: IndexEntry {
            name: p.name.clone(),
            descriptor_offset: start,
            descriptor_length: p.desc.len() as u32,
            data_offset: v,
            data_length,
        },
        values_xxh3,
        indices_xxh3,
    })
}

/// Write the header, the head and, at `members_end` (where the last member
/// ends), the KV section, index and trailer. Returns the file length.
pub fn write_frame(
    io: &IoCtx,
    file: &File,
    path: &Path,
    head_name: &str,
    head: &CompositeHead,
    members: &[Placed],
    members_end: u64,
) -> Result<u64> {
    let hbytes = head.encode();
    let mut entries = Vec::with_capacity(members.len() + 1);
    entries.push(IndexEntry {
        name: head_name.to_string(),
        descriptor_offset: HEADER_LEN,
        descriptor_length: hbytes.len() as u32,
        // A head owns no data: its (empty) data region is where the first
        // member starts.
        data_offset: first_member_offset(head.shape.len()),
        data_length: 0,
    });
    let mut kv = vec![provenance()];
    for m in members {
        kv.push((
            buffer_checksum_key(&m.entry.name, "values"),
            KvValue::U64(m.values_xxh3),
        ));
        kv.push((
            buffer_checksum_key(&m.entry.name, "indices"),
            KvValue::U64(m.indices_xxh3),
        ));
        entries.push(m.entry.clone());
    }
    let (tail, flags) = encode_tail(&kv, &entries, members_end)?;
    let header = FileHeader {
        flags,
        alignment: ALIGNMENT as u32,
        first_descriptor_offset: HEADER_LEN,
        tensor_count_hint: entries.len() as u64,
    }
    .encode();
    io.write_all_at(file, &header, 0, path)?;
    io.write_all_at(file, &hbytes, HEADER_LEN, path)?;
    io.write_all_at(file, &tail, members_end, path)?;
    Ok(members_end + tail.len() as u64)
}

/// A temporary file next to `target` that is removed on drop unless
/// published: the composite's atomic output.
pub struct TempOutput {
    /// The temporary path.
    pub path: PathBuf,
    target: PathBuf,
    io: IoCtx,
    published: bool,
}

impl TempOutput {
    /// Create `.<target name>.tmp-<pid>-<random>` next to `target`.
    pub fn create(io: &IoCtx, target: &Path) -> Result<(TempOutput, File)> {
        let Some(name) = target.file_name() else {
            return Err(Error::InvalidArgument(format!(
                "{} does not name a file",
                target.display()
            )));
        };
        let path = parent_dir(target).join(new_output_temp_name(&name.to_string_lossy()));
        Self::create_at(io, target, path)
    }

    /// Create the temporary file at `path` (a name agreed elsewhere).
    pub fn create_at(io: &IoCtx, target: &Path, path: PathBuf) -> Result<(TempOutput, File)> {
        let f = io.create_new(&path)?;
        Ok((
            TempOutput {
                path,
                target: target.to_path_buf(),
                io: io.clone(),
                published: false,
            },
            f,
        ))
    }

    /// fsync `file`, rename over the target, fsync the directory.
    pub fn publish(mut self, file: &File) -> Result<()> {
        self.io.sync(file, &self.path)?;
        self.io.rename(&self.path, &self.target)?;
        self.published = true;
        self.io.sync_dir(&parent_dir(&self.target))
    }
}

impl Drop for TempOutput {
    fn drop(&mut self) {
        if !self.published {
            let _ = self.io.remove(&self.path);
        }
    }
}

/// What [`join`] wrote.
#[derive(Clone, Debug)]
pub struct JoinSummary {
    /// Size of the composite.
    pub bytes: u64,
    /// Entries in all.
    pub nnz: u64,
    /// Members.
    pub members: usize,
}

/// Combine plain single-tensor files, part k holding the box that starts
/// at `parts[k].1` (its indices local to the box), into one partition
/// composite of `shape` called `head_name` at `target` (atomically). The
/// boxes must cover `shape` exactly without overlap.
pub fn join(
    parts: &[(PathBuf, Vec<u64>)],
    shape: &[u64],
    target: &Path,
    head_name: &str,
) -> Result<JoinSummary> {
    let files = parts
        .iter()
        .map(|(p, _)| HurrayFile::open(p))
        .collect::<Result<Vec<_>>>()?;
    // Checked on the maps (headers only); the buffers are copied from the
    // files with positioned reads below.
    let tensors = files
        .iter()
        .map(|f| f.only_tensor())
        .collect::<Result<Vec<_>>>()?;
    let dtype = match tensors.first() {
        Some(t) => t.dtype(),
        None => {
            return Err(Error::InvalidArgument(
                "join needs at least one part".into(),
            ))
        }
    };
    let boxes: Vec<(&[u64], &[u64])> = tensors
        .iter()
        .zip(parts)
        .map(|(t, (_, o))| (o.as_slice(), t.shape()))
        .collect();
    if let Some(rule) = crate::read::composite::check_partition(shape, &boxes) {
        return Err(Error::InvalidArgument(format!(
            "parts do not partition {shape:?}: {rule}"
        )));
    }
    let mut prepared = Vec::with_capacity(parts.len());
    for (k, (t, (_, off))) in tensors.iter().zip(parts).enumerate() {
        if t.dtype() != dtype || !t.is_sorted() {
            return Err(Error::InvalidArgument(format!(
                "part {k}: element type {} (want {dtype}), sorted {}",
                t.dtype(),
                t.is_sorted()
            )));
        }
        prepared.push(Prepared::from_file(
            member_name(head_name, k),
            &parts[k].0,
            shape,
            off,
        )?);
    }
    let io = IoCtx::new();
    let (tmp, file) = TempOutput::create(&io, target)?;
    let mut at = first_member_offset(shape.len());
    let mut placed = Vec::with_capacity(prepared.len());
    for p in &prepared {
        placed.push(write_member(&io, &file, &tmp.path, at, p)?);
        at += p.size_at(at);
    }
    let head = CompositeHead {
        dtype,
        shape: shape.to_vec(),
        rule: RULE_PARTITION,
        combine_op: 0,
        member_count: prepared.len() as u32,
    };
    let bytes = write_frame(&io, &file, &tmp.path, head_name, &head, &placed, at)?;
    tmp.publish(&file)?;
    Ok(JoinSummary {
        bytes,
        nnz: prepared.iter().map(|p| p.nnz).sum(),
        members: prepared.len(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::read::composite::CompositeFile;
    use crate::{AssembleOptions, Builder, DType, ReadOptions, Value};

    fn assemble(path: &Path, shape: &[u64], entries: &[(u64, u64, f64)], name: &str) {
        let opts = AssembleOptions {
            memory_budget: 16 << 20,
            threads: 1,
            tensor_name: name.into(),
            ..AssembleOptions::default()
        };
        let mut b = Builder::new(shape, DType::F64, opts).unwrap();
        for &(i, j, v) in entries {
            b.push(&[i, j], v).unwrap();
        }
        b.finish(path).unwrap();
    }

    #[test]
    fn join_reads_back_and_converts_to_the_whole() {
        let dir = tempfile::tempdir().unwrap();
        let shape = [10u64, 6];
        let all: Vec<(u64, u64, f64)> = (0..40u64)
            .map(|k| (k * 7 % 10, k * 5 % 6, 0.1 * k as f64))
            .collect();
        let cut = [0u64, 3, 4, 10];
        let mut parts = Vec::new();
        for w in 0..3 {
            let (lo, hi) = (cut[w], cut[w + 1]);
            let mine: Vec<_> = all
                .iter()
                .filter(|e| e.0 >= lo && e.0 < hi)
                .map(|&(i, j, v)| (i - lo, j, v))
                .collect();
            let p = dir.path().join(format!("p{w}.hrry"));
            assemble(&p, &[hi - lo, 6], &mine, &member_name("K", w));
            parts.push((p, vec![lo, 0]));
        }
        let target = dir.path().join("K.hrry");
        let s = join(&parts, &shape, &target, "K").unwrap();
        assert_eq!(s.members, 3);
        let c = CompositeFile::open(&target).unwrap();
        assert!(c.warnings().is_empty(), "{:?}", c.warnings());
        assert!(c.verify().is_empty(), "{:?}", c.verify());
        let whole = dir.path().join("whole.hrry");
        assemble(&whole, &shape, &all, "K");
        let f = HurrayFile::open(&whole).unwrap();
        let t = f.only_tensor().unwrap();
        for (idx, v) in t.iter() {
            assert_eq!(c.get(idx).unwrap(), v);
        }
        assert_eq!(c.get(&[3, 0]).unwrap(), t.get(&[3, 0]).unwrap());
        let conv = dir.path().join("conv.hrry");
        c.to_coo(&conv, "K", crate::write::WriteOptions::default())
            .unwrap();
        assert_eq!(
            std::fs::read(&conv).unwrap(),
            std::fs::read(&whole).unwrap()
        );
        // Nothing but the outputs is left.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 6, "{names:?}");
        // A corrupted cover is refused at open, reported in permissive mode.
        let mut bytes = std::fs::read(&target).unwrap();
        let d1 = first_member_offset(2) as usize;
        // Member 0's shard_offset[0] (after 77 + 16 bytes and parent_shape).
        let p = d1 + 77 + 16 + 16;
        bytes[p] = 1;
        assert!(CompositeFile::from_bytes(&bytes, ReadOptions::default()).is_err());
        let c = CompositeFile::from_bytes(&bytes, ReadOptions { permissive: true }).unwrap();
        assert!(c.verify().iter().any(|p| p.rule == "composite-partition"));
        assert!(matches!(c.get(&[0, 0]), Err(_) | Ok(Value::Float(_))));
    }
}
