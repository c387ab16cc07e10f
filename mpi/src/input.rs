//! Reading a share of a binary input file on every rank
//! (`coo-assembler assemble --mpi`): the file's records (rank u64 LE
//! indices, then one LE value of the element type, as `--format bin`) are
//! split into as many contiguous, record-aligned byte ranges as there are
//! ranks, and each rank pushes its own range. The file is read with
//! positioned reads through a bounded buffer, so no rank maps or holds more
//! than that buffer of it.

use super::DistBuilder;
use coo_assembler::element::Element;
use coo_assembler::input::check_bin_length;
use coo_assembler::internals::fs::ctx::IoCtx;
use coo_assembler::{Error, Result};
use mpi::traits::Communicator;
use std::path::Path;

/// Bytes read at a time.
const READ_BYTES: usize = 4 << 20;

/// The share of a binary input a rank read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinShare {
    /// Records in the whole file.
    pub total_records: u64,
    /// This rank's records: `first .. first + records`.
    pub first: u64,
    /// Records pushed by this rank.
    pub records: u64,
}

/// Record range of rank `k` of `ranks` over `total` records: contiguous,
/// covering, sizes differing by at most one.
pub fn share(total: u64, k: u64, ranks: u64) -> std::ops::Range<u64> {
    let at = |r: u64| ((u128::from(total) * u128::from(r)) / u128::from(ranks)) as u64;
    at(k)..at(k + 1)
}

fn le<const N: usize>(s: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&s[..N]);
    a
}

impl<C: Communicator> DistBuilder<'_, C> {
    /// Push this rank's share of the binary input file `path` (see the
    /// module docs). Errors are returned here and, as for `push`, reported
    /// to every rank by `finish`.
    pub fn push_bin_file(&mut self, path: &Path) -> Result<BinShare> {
        let earlier = self.failed.is_some();
        let r = self.push_bin_inner(path);
        if let Err(e) = &r {
            if !earlier {
                // With the file name and record, not only the push's message.
                self.failed = Some(e.to_string());
            }
        }
        r
    }

    fn push_bin_inner(&mut self, path: &Path) -> Result<BinShare> {
        let io = IoCtx::new();
        let source = path.display().to_string();
        let rank = self.shape.len();
        let dtype = self.dtype;
        let file = io.open(path)?;
        let len = io.file_len(&file, path)?;
        check_bin_length(len, rank, dtype, &source)?;
        let rec = rank * 8 + dtype.width();
        let total = len / rec as u64;
        let mine = share(total, self.rank as u64, self.size as u64);
        let per_read = (READ_BYTES / rec).max(1);
        let mut buf = vec![0u8; per_read.min((mine.end - mine.start) as usize) * rec];
        let mut idx = vec![0u64; rank];
        let mut at = mine.start;
        while at < mine.end {
            let n = per_read.min((mine.end - at) as usize);
            let bytes = &mut buf[..n * rec];
            io.read_exact_at(&file, bytes, at * rec as u64, path)?;
            for (j, r) in bytes.chunks_exact(rec).enumerate() {
                for (d, i) in idx.iter_mut().enumerate() {
                    *i = u64::from_le_bytes(le(&r[8 * d..]));
                }
                let v = &r[8 * rank..];
                let pushed = coo_assembler::with_element_type!(dtype, T => self.push(&idx, <T as Element>::from_le(v)));
                if let Err(e) = pushed {
                    let record = at + j as u64;
                    return Err(Error::Input {
                        source_name: source,
                        location: format!("record {record} (byte {})", record * rec as u64),
                        detail: e.to_string(),
                        cause: Some(Box::new(e)),
                    });
                }
            }
            at += n as u64;
        }
        Ok(BinShare {
            total_records: total,
            first: mine.start,
            records: mine.end - mine.start,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn shares_cover_the_records() {
        for (total, ranks) in [
            (0u64, 3u64),
            (10, 4),
            (7, 7),
            (1_000_003, 5),
            (u64::MAX / 3, 3),
        ] {
            let mut next = 0;
            for k in 0..ranks {
                let s = share(total, k, ranks);
                assert_eq!(s.start, next);
                assert!(s.end - s.start <= total / ranks + 1);
                next = s.end;
            }
            assert_eq!(next, total);
        }
    }
}
