//! The coordinates of a matrix's entries in storage order, whatever the
//! layout: one walker for every pass that needs `(position, row, column)`
//! (exports, the picture, the reordering passes), and the one place that
//! knows which lane (row of CSR, column of CSC) holds entry `p`.

use super::error::{MatrixError, MatrixResult};
use super::view::Matrix;
use crate::read::CompressedTensor;
use std::ops::Range;

/// Where the coordinates are.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Coords<'a> {
    /// COO: `rank` indices per entry, row and column first.
    Coo { ind: &'a [u64], rank: usize },
    /// CSR/CSC: checked pointers and the minor indices.
    Lanes {
        ptr: &'a [u64],
        minor: &'a [u64],
        column_major: bool,
    },
}

impl<'a> Coords<'a> {
    /// The coordinates of `a` (CSR/CSC pointers checked whole first).
    pub(crate) fn of(a: &Matrix<'a>) -> MatrixResult<Coords<'a>> {
        Ok(match a.tensor() {
            crate::read::Tensor::Coo(t) => Coords::Coo {
                ind: t.indices(),
                rank: t.rank().max(1),
            },
            crate::read::Tensor::Compressed(c) => Coords::Lanes {
                ptr: checked_pointers(&c)?,
                minor: c.indices(),
                column_major: c.major_dim() == 1,
            },
            other => {
                return Err(other
                    .not_served("a matrix operation", "COO, CSR and CSC")
                    .into());
            }
        })
    }

    /// `f(p, i, j)` for every entry `p` of `r`, in storage order; stops at
    /// the first error. Positions must be below nnz.
    #[inline]
    pub(crate) fn each<E>(
        &self,
        r: Range<usize>,
        mut f: impl FnMut(usize, u64, u64) -> Result<(), E>,
    ) -> Result<(), E> {
        match *self {
            Coords::Coo { ind, rank } => {
                for (k, e) in ind[rank * r.start..rank * r.end]
                    .chunks_exact(rank)
                    .enumerate()
                {
                    f(r.start + k, e[0], e.get(1).copied().unwrap_or(0))?;
                }
            }
            Coords::Lanes {
                ptr,
                minor,
                column_major,
            } => {
                let mut lane = lane_of(ptr, r.start);
                for p in r {
                    while ptr[lane + 1] as usize <= p {
                        lane += 1;
                    }
                    let (i, j) = if column_major {
                        (minor[p], lane as u64)
                    } else {
                        (lane as u64, minor[p])
                    };
                    f(p, i, j)?;
                }
            }
        }
        Ok(())
    }
}

/// The lane holding entry `p` of checked pointers `ptr` (`p < nnz`): the
/// last one starting at or before it (empty lanes before it start there
/// too, but end there as well).
#[inline]
pub(crate) fn lane_of(ptr: &[u64], p: usize) -> usize {
    ptr.partition_point(|&q| q <= p as u64).saturating_sub(1)
}

/// The pointers of a CSR/CSC matrix, checked whole (`ptr[0] = 0`,
/// non-decreasing, the last = nnz) so that every lane is a valid slice.
pub(crate) fn checked_pointers<'t>(c: &CompressedTensor<'t>) -> MatrixResult<&'t [u64]> {
    let ptr = c.pointers();
    let nnz = c.nnz();
    let bad = if ptr.len() as u64 != c.major_extent() + 1 || ptr.first() != Some(&0) {
        Some(0)
    } else if ptr.last() != Some(&nnz) {
        Some(ptr.len() - 1)
    } else {
        ptr.windows(2).position(|w| w[0] > w[1]).map(|m| m + 1)
    };
    match bad {
        None => Ok(ptr),
        Some(m) => Err(MatrixError::Crate(crate::Error::invalid(
            format!("{} of tensor {:?}", c.pointers_name(), c.name()),
            0,
            format!(
                "pointer {m} breaks ptr[0] = 0, non-decreasing, last = nnz = {nnz}; run verify for the full report"
            ),
        ))),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lanes_with_empty_ones_walk_right() {
        // Rows: 0 empty, 1 = {0, 1}, 2 empty, 3 empty, 4 = {2}.
        let ptr = [0u64, 0, 2, 2, 2, 3];
        assert_eq!(lane_of(&ptr, 0), 1);
        assert_eq!(lane_of(&ptr, 1), 1);
        assert_eq!(lane_of(&ptr, 2), 4);
        let minor = [5u64, 7, 1];
        for column_major in [false, true] {
            let c = Coords::Lanes {
                ptr: &ptr,
                minor: &minor,
                column_major,
            };
            let mut got = Vec::new();
            c.each(1..3, |p, i, j| {
                got.push((p, i, j));
                Ok::<(), ()>(())
            })
            .unwrap();
            let want = if column_major {
                vec![(1, 7, 1), (2, 1, 4)]
            } else {
                vec![(1, 1, 7), (2, 4, 1)]
            };
            assert_eq!(got, want);
        }
    }
}
