//! Writing partition composites (issue 13): one Hurray file holding a head
//! (layout tag 0x0B, rule partition) and one member per part (COO, CSR or
//! CSC), each with a shard section (`parent_shape` = the head's shape,
//! `shard_offset` = the part's box; indices local to the box, so a CSR
//! member's `row_ptr` runs over the box's rows) and its own statistics and
//! KV checksums.
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
//! member k: [descriptor (+ shard + statistics)][pad to A][buffer 0][pad to A][buffer 1]...[pad to A]
//! ```
//! Buffers: values, indices (COO); values, col_indices, row_ptr (CSR);
//! values, row_indices, col_ptr (CSC). The shard section sits between the
//! buffer table and the statistics. No padding after the head beyond the
//! 8-byte boundary (the spec forbids it; hurray-io 0.1.0 pads to A, which
//! the reader accepts with a warning). Every member after the first
//! therefore starts at a multiple of A, so its size does not depend on
//! where it lands: ranks can size their members alone and take offsets
//! from an exclusive scan. An empty buffer (nnz = 0) sits at the aligned
//! end of the one before and owns no bytes, as [`crate::write`] does.
//!
//! KV: `coo_assembler.writer`, then `coo_assembler.xxh3.<member>.<buffer>`
//! per member and buffer, in member order.

use crate::error::{Error, Result};
use crate::fs::ctx::IoCtx;
use crate::fs::output::{AtomicOutput, ReplaceInput};
use crate::hurray::composite::{
    CompositeHead, RULE_PARTITION, Shard, check_partition, encode_member, first_member_at,
};
use crate::hurray::kv::checksum_key;
use crate::hurray::{FileHeader, HEADER_LEN, IndexEntry, KvValue, MIN_ALIGNMENT, align_up};
use crate::options::OutputLayout;
use crate::write::{encode_tail, provenance};
use crate::{HurrayFile, read::ReadOptions};
use std::fs::File;
use std::path::{Path, PathBuf};

/// data_buffer_alignment of the composites written here.
pub const ALIGNMENT: u64 = MIN_ALIGNMENT as u64;

/// The name of member `k` of the composite `head`.
pub fn member_name(head: &str, k: usize) -> String {
    format!("{head}.part{k}")
}

/// Offset of the first member: right after the head (which follows the
/// file header), at the next descriptor boundary.
pub fn first_member_offset(rank: usize) -> u64 {
    first_member_at(HEADER_LEN + CompositeHead::encoded_len(rank) as u64).unwrap_or(u64::MAX)
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
    layout: OutputLayout,
    source: File,
    source_path: PathBuf,
    /// (offset, length) of each buffer in the source, in buffer order
    /// (values, indices; then the pointers for CSR and CSC).
    buffers: Vec<(u64, u64)>,
    /// xxh3-64 of each buffer from the source's KV, when it has them all.
    sums: Option<Vec<u64>>,
}

impl Prepared {
    /// Member `name` from the plain single-tensor file at `path` (COO, CSR
    /// or CSC), whose box starts at `offset` in `parent_shape`. Its indices
    /// must be local to the box (for CSR, `row_ptr` over the box's rows).
    /// The file is read through `io`.
    pub fn from_file(
        io: &IoCtx,
        name: String,
        path: &Path,
        parent_shape: &[u64],
        offset: &[u64],
    ) -> Result<Prepared> {
        let file = HurrayFile::open_with_io(path, ReadOptions::default(), io)?;
        let t = file.only_tensor_view()?;
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
        if !t.layout().may_shard() {
            return Err(Error::Unsupported(format!(
                "tensor {:?} is {}, which the Hurray spec does not let carry a shard: a partition composite holds coo, csr or csc members",
                t.name(),
                t.layout().to_string().to_uppercase()
            )));
        }
        let plain = t.encoded_descriptor();
        let lens: Vec<usize> = t.buffer_sizes().iter().map(|b| b.1 as usize).collect();
        let offsets = file.buffer_offsets(t.name())?;
        // An empty buffer is never read: (0, 0).
        let buffers = lens
            .iter()
            .zip(offsets)
            .map(|(&n, o)| if n == 0 { (0, 0) } else { (o, n as u64) })
            .collect();
        let layout = t.layout();
        let sums = layout
            .buffer_names()
            .iter()
            .map(|which| {
                let key = checksum_key(t.name(), which);
                file.kv().iter().find_map(|(k, v)| match v {
                    KvValue::U64(x) if *k == key => Some(*x),
                    _ => None,
                })
            })
            .collect();
        Ok(Prepared {
            desc: encode_member(&plain, &shard)?,
            nnz: t.nnz(),
            layout,
            source: io.open(path)?,
            source_path: path.to_path_buf(),
            buffers,
            sums,
            name,
        })
    }

    /// Entries in the member.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // used by the MPI crate
    pub fn nnz(&self) -> u64 {
        self.nnz
    }

    /// Bytes the member occupies when it starts at `start` (the next
    /// member starts right after).
    pub fn size_at(&self, start: u64) -> u64 {
        self.place(start).end - start
    }

    /// Where the buffers go when the member starts at `start`: buffer k+1
    /// at the first multiple of A after buffer k, the first one after the
    /// descriptor (the reader's placement rule).
    fn place(&self, start: u64) -> Placement {
        let a = |x: u64| align_up(x, ALIGNMENT).unwrap_or(u64::MAX);
        let data = a(start + self.desc.len() as u64);
        let mut at = Vec::with_capacity(self.buffers.len());
        let mut end = data;
        for &(_, n) in &self.buffers {
            let o = a(end);
            at.push(o);
            end = o.saturating_add(n);
        }
        Placement {
            at,
            data,
            data_length: end - data,
            end: a(end),
        }
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

/// Where a member's buffers go (see [`Prepared::place`]).
struct Placement {
    /// Offset of each buffer.
    at: Vec<u64>,
    /// data_offset: where the first buffer starts.
    data: u64,
    data_length: u64,
    /// Where the next member may start (a multiple of A).
    end: u64,
}

/// Where a member went and the checksums of its buffers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// Its index entry.
    pub entry: IndexEntry,
    /// Its layout (which names its buffers).
    pub layout: OutputLayout,
    /// xxh3-64 of each buffer, in buffer order.
    pub checksums: Vec<u64>,
}

/// Words of [`Placed::to_words`].
#[cfg_attr(not(feature = "internals"), allow(dead_code))] // used by the MPI crate
pub const PLACED_WORDS: usize = 8;

#[cfg_attr(not(feature = "internals"), allow(dead_code))] // used by the MPI crate
impl Placed {
    /// The placement as fixed-size words (everything but the name), for
    /// gathering over MPI.
    pub fn to_words(&self) -> [u64; PLACED_WORDS] {
        let mut w = [0u64; PLACED_WORDS];
        w[0] = self.entry.descriptor_offset;
        w[1] = u64::from(self.entry.descriptor_length);
        w[2] = self.entry.data_offset;
        w[3] = self.entry.data_length;
        w[4] = u64::from(self.layout.tag());
        for (d, s) in w[5..].iter_mut().zip(&self.checksums) {
            *d = *s;
        }
        w
    }

    /// The placement of member `name` from [`Placed::to_words`].
    pub fn from_words(name: String, w: &[u64]) -> Result<Placed> {
        if w.len() < PLACED_WORDS {
            return Err(Error::InvalidArgument(format!(
                "member {name:?}: {} placement words, {PLACED_WORDS} needed",
                w.len()
            )));
        }
        let tag = u8::try_from(w[4]).ok();
        let Some(layout) = tag.and_then(OutputLayout::from_tag) else {
            return Err(Error::InvalidArgument(format!(
                "member {name:?}: placement words {w:?} name no layout"
            )));
        };
        let n = layout.buffer_names().len();
        Ok(Placed {
            entry: IndexEntry {
                name,
                descriptor_offset: w[0],
                descriptor_length: w[1] as u32,
                data_offset: w[2],
                data_length: w[3],
            },
            layout,
            checksums: w[5..5 + n].to_vec(),
        })
    }
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
    let place = p.place(start);
    io.write_all_at(file, &p.desc, start, path)?;
    let largest = p.buffers.iter().map(|b| b.1).max().unwrap_or(0);
    let mut buf = vec![0u8; COPY_CHUNK.min(largest as usize)];
    let mut computed = Vec::with_capacity(p.buffers.len());
    for (&from, &to) in p.buffers.iter().zip(&place.at) {
        computed.push(p.copy(io, file, path, from, to, &mut buf)?);
    }
    Ok(Placed {
        entry: IndexEntry {
            name: p.name.clone(),
            descriptor_offset: start,
            descriptor_length: p.desc.len() as u32,
            data_offset: place.data,
            data_length: place.data_length,
        },
        layout: p.layout,
        checksums: p.sums.clone().unwrap_or(computed),
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
        for (which, sum) in m.layout.buffer_names().iter().zip(&m.checksums) {
            kv.push((checksum_key(&m.entry.name, which), KvValue::U64(*sum)));
        }
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
/// boxes must cover `shape` exactly without overlap. A `target` that names
/// one of the parts (through links too) is [`Error::OutputIsInput`].
pub fn join(
    parts: &[(PathBuf, Vec<u64>)],
    shape: &[u64],
    target: &Path,
    head_name: &str,
) -> Result<JoinSummary> {
    let io = IoCtx::new();
    let files = parts
        .iter()
        .map(|(p, _)| HurrayFile::open_with_io(p, ReadOptions::default(), &io))
        .collect::<Result<Vec<_>>>()?;
    // Refused before any work when the target is one of the parts.
    let inputs: Vec<_> = files.iter().filter_map(|f| f.file_id()).collect();
    let (out, file) = AtomicOutput::create(&io, target, &inputs, ReplaceInput::Refuse)?;
    // Checked on the maps (headers only); the buffers are copied from the
    // files with positioned reads below.
    let tensors = files
        .iter()
        .map(|f| f.only_tensor_view())
        .collect::<Result<Vec<_>>>()?;
    let dtype = match tensors.first() {
        Some(t) => t.dtype(),
        None => {
            return Err(Error::InvalidArgument(
                "join needs at least one part".into(),
            ));
        }
    };
    let boxes: Vec<(&[u64], &[u64])> = tensors
        .iter()
        .zip(parts)
        .map(|(t, (_, o))| (o.as_slice(), t.shape()))
        .collect();
    if let Some(rule) = check_partition(shape, &boxes) {
        return Err(Error::InvalidArgument(format!(
            "parts do not partition {shape:?}: {rule}"
        )));
    }
    let mut prepared = Vec::with_capacity(parts.len());
    for (k, (t, (_, off))) in tensors.iter().zip(parts).enumerate() {
        // Unsorted COO would make the composite's global order cost a sort.
        let sorted = t.as_coo().is_none_or(|c| c.is_sorted());
        if t.dtype() != dtype || !sorted {
            return Err(Error::InvalidArgument(format!(
                "part {k}: element type {} (want {dtype}), sorted {sorted}",
                t.dtype(),
            )));
        }
        prepared.push(Prepared::from_file(
            &io,
            member_name(head_name, k),
            &parts[k].0,
            shape,
            off,
        )?);
    }
    let mut at = first_member_offset(shape.len());
    let mut placed = Vec::with_capacity(prepared.len());
    for p in &prepared {
        placed.push(write_member(&io, &file, out.path(), at, p)?);
        at += p.size_at(at);
    }
    let head = CompositeHead {
        dtype,
        shape: shape.to_vec(),
        rule: RULE_PARTITION,
        combine_op: 0,
        member_count: prepared.len() as u32,
    };
    let bytes = write_frame(&io, &file, out.path(), head_name, &head, &placed, at)?;
    out.commit(&file)?;
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
    use crate::hurray::LAYOUT_COO;
    use crate::hurray::composite::ShardFields;
    use crate::hurray::descriptor::descriptor_len;
    use crate::read::composite::CompositeFile;
    use crate::{
        AssembleOptions, Builder, DType, Value, convert::ConvertOptions, read::ReadOptions,
    };

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
        crate::convert(&target, &conv, &ConvertOptions::default()).unwrap();
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
        let d1 = first_member_offset(2);
        // Member 0's shard_offset[0] (a COO member of rank 2).
        let f = ShardFields::of(LAYOUT_COO, 2).unwrap();
        assert_eq!(f.parent_shape as usize, descriptor_len(2, false));
        bytes[(d1 + f.shard_offset) as usize] = 1;
        assert!(CompositeFile::from_bytes(&bytes, ReadOptions::default()).is_err());
        let c = CompositeFile::from_bytes(
            &bytes,
            ReadOptions {
                permissive: true,
                ..ReadOptions::default()
            },
        )
        .unwrap();
        assert!(c.verify().iter().any(|p| p.rule == "composite-partition"));
        assert!(matches!(c.get(&[0, 0]), Err(_) | Ok(Value::Float(_))));
    }
}
