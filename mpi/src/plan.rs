//! Plan once across ranks, refill with one exchange (issue 42).
//!
//! A [`DistPlan`] is made once from the coordinates every rank
//! contributes (arrays, or what a [`crate::DistBuilder`] was pushed): each
//! contribution's owner (the rank of its row band) and, on the owner, its
//! slot in the band's result. What it keeps:
//!
//! - on the contributing rank, `send_order`: the positions of its
//!   contributions bound for other ranks, grouped by owner, in
//!   contribution order within each owner (4 bytes each), and the counts
//!   per owner;
//! - on the owner, the one-process [`Plan`] of its band's contributions:
//!   its own, numbered by their positions in the caller's array (those
//!   bound elsewhere are holes it skips), then what it receives, in the
//!   order it receives it (source rank, then the source's order): the
//!   band's CSR structure (local row pointer, global columns) and every
//!   contribution's entry (4 bytes a contribution, plus the entries'
//!   starts).
//!
//! A refill gathers the values bound elsewhere by `send_order` into one
//! buffer, moves them with one `MPI_Alltoallv` whose counts are known, and
//! the owner refills its band with [`Plan::assemble_split_into`], reading
//! its own values where the caller keeps them and the others' from the
//! receive buffer: the reducers of a full assembly, exact sums included,
//! so the result is bit for bit what a fresh distributed assembly of the
//! same contributions gives. The value buffers (8 bytes a value bound
//! elsewhere or received, for f64) are kept between refills, so a refill
//! allocates nothing.
//!
//! Every step ends in an agreement: a rank that fails (a value count that
//! does not match its plan, a value the non-finite policy refuses) makes
//! every rank return an error, and no rank waits.

use crate::ranges::{RowSample, owner};
use crate::{DistOptions, LocalCsr, agree, agree_starts, prefix};
use coo_assembler::element::RealElement;
use coo_assembler::internals::assemble::direct::{DirectValue, IndexElem, OutIndex};
use coo_assembler::options::{DuplicatePolicy, OutputLayout};
use coo_assembler::{AssembleOptions, DType, Error, Plan, Result};
use mpi::datatype::{Equivalence, Partition, PartitionMut};
use mpi::traits::*;
use std::ops::Range;

/// A plan of contributions spread over the ranks of a communicator; see
/// the [module docs](self). Each rank holds its own part.
#[derive(Debug)]
pub struct DistPlan {
    rank: usize,
    ranks: usize,
    /// The rows this rank owns.
    rows: Range<u64>,
    shape: Vec<u64>,
    /// Values a refill takes on this rank (skipped contributions included).
    contributions: usize,
    /// Positions of this rank's contributions, grouped by owner.
    send_order: Vec<u32>,
    send_counts: Vec<i32>,
    recv_counts: Vec<i32>,
    /// The band's one-process plan of what this rank receives.
    local: Plan,
    /// Values moved in the last refill, kept for the next (bytes).
    scratch: Vec<u64>,
}

/// What a contributing rank knows of one contribution: its coordinates,
/// read one at a time (arrays or a builder's records).
pub(crate) trait Contributions {
    /// Contributions on this rank.
    fn len(&self) -> usize;
    /// Coordinate `d` of contribution `p`, widened; None when negative.
    fn index(&self, p: usize, d: usize) -> Option<u64>;
}

/// Index arrays, one per dimension.
pub(crate) struct Arrays<'a, I>(pub &'a [&'a [I]]);

impl<I: IndexElem> Contributions for Arrays<'_, I> {
    fn len(&self) -> usize {
        self.0.first().map_or(0, |d| d.len())
    }
    #[inline]
    fn index(&self, p: usize, d: usize) -> Option<u64> {
        let i = self.0[d][p];
        (!i.is_negative()).then(|| i.widen())
    }
}

/// A builder's stashed records: `wpr` words each, coordinates first.
pub(crate) struct Records<'a> {
    pub words: &'a [u64],
    pub wpr: usize,
}

impl Contributions for Records<'_> {
    fn len(&self) -> usize {
        self.words.len() / self.wpr
    }
    #[inline]
    fn index(&self, p: usize, d: usize) -> Option<u64> {
        Some(self.words[p * self.wpr + d])
    }
}

impl DistPlan {
    /// Collective: plan this rank's contributions at the coordinates
    /// `indices` (one array per dimension, global coordinates, any rows)
    /// into a tensor of `shape` whose rows are owned as `opts.rows` says
    /// (given, or chosen from a sample of every rank's rows). The band's
    /// layout is `opts.assemble.layout` (CSR for a matrix handed to a
    /// solver); `memory_budget` bounds the owner's planning as it bounds
    /// [`Plan::new`].
    ///
    /// Errors (on every rank: the failing rank its own, the others
    /// [`Error::RankFailed`]): arrays of different lengths, a negative
    /// index without `skip_negative`, an index outside `shape`, duplicate
    /// policy `last` (no order across ranks), and what [`Plan::new`]
    /// refuses.
    pub fn new<C: Communicator, I: IndexElem>(
        comm: &C,
        indices: &[&[I]],
        shape: &[u64],
        dtype: DType,
        opts: &DistOptions,
    ) -> Result<DistPlan> {
        let lengths = coo_assembler::plan::check_arrays(indices, shape);
        agree(comm, lengths)?;
        Self::plan(comm, &Arrays(indices), shape, dtype, opts)
    }

    pub(crate) fn plan<C: Communicator, S: Contributions>(
        comm: &C,
        src: &S,
        shape: &[u64],
        dtype: DType,
        opts: &DistOptions,
    ) -> Result<DistPlan> {
        let (rank, ranks) = (comm.rank() as usize, comm.size() as usize);
        let n = src.len();
        let checked = check(src, shape, &opts.assemble, ranks);
        agree(comm, checked)?;
        // Row ownership: given, or from a sample of the planned rows.
        let mut sample = RowSample::new(rank as u64);
        if opts.rows == crate::RowOwnership::Sampled {
            (0..n)
                .filter_map(|p| src.index(p, 0))
                .for_each(|r| sample.offer(r));
        }
        let starts = agree_starts(comm, &sample, &opts.rows, shape[0]);
        let band = |k: usize| starts[k]..starts.get(k + 1).copied().unwrap_or(shape[0]);

        // Each contribution's owner; skipped ones (a negative index under
        // skip_negative) go nowhere. A rank's own contributions are not
        // sent: its band's plan reads them where the caller keeps them.
        let mut send_counts = vec![0i32; ranks];
        let owners: Vec<u32> = (0..n)
            .map(
                |p| match (0..shape.len()).all(|d| src.index(p, d).is_some()) {
                    true => {
                        let o = owner(&starts, src.index(p, 0).unwrap_or(0));
                        if o != rank {
                            send_counts[o] += 1;
                        }
                        o as u32
                    }
                    false => u32::MAX,
                },
            )
            .collect();
        let mut at: Vec<usize> = prefix(&send_counts).iter().map(|&d| d as usize).collect();
        let sent: usize = send_counts.iter().map(|&c| c as usize).sum();
        let mut send_order = vec![0u32; sent];
        for (p, &o) in owners.iter().enumerate() {
            if o != u32::MAX && o as usize != rank {
                send_order[at[o as usize]] = p as u32;
                at[o as usize] += 1;
            }
        }
        let mut recv_counts = vec![0i32; ranks];
        comm.all_to_all_into(&send_counts[..], &mut recv_counts[..]);
        let received: usize = recv_counts.iter().map(|&c| c as usize).sum();
        let fits = if (n + received) as u64 >= u64::from(u32::MAX) {
            Err(Error::InvalidArgument(format!(
                "rank {rank} plans {n} contributions of its own and receives {received}: a band's plan takes fewer than 2^32; use more ranks"
            )))
        } else {
            Ok(())
        };
        agree(comm, fits)?;

        // The band's contributions as its plan numbers them: this rank's
        // own at their positions in the caller's array (the others' there
        // are holes, -1, which the plan skips), then what the other ranks
        // send, rows made local to the band. One dimension at a time.
        let rows = band(rank);
        let (sdispl, rdispl) = (prefix(&send_counts), prefix(&recv_counts));
        let mut dims: Vec<Vec<i64>> = Vec::with_capacity(shape.len());
        let mut send = vec![0u64; sent];
        let mut recv = vec![0u64; received];
        for d in 0..shape.len() {
            for (o, range) in ranges(&send_counts).enumerate() {
                let lo = if d == 0 { band(o).start } else { 0 };
                for k in range {
                    send[k] = src.index(send_order[k] as usize, d).unwrap_or(0) - lo;
                }
            }
            {
                let sp = Partition::new(&send[..], &send_counts[..], &sdispl[..]);
                let mut rp = PartitionMut::new(&mut recv[..], &recv_counts[..], &rdispl[..]);
                comm.all_to_all_varcount_into(&sp, &mut rp);
            }
            let lo = if d == 0 { rows.start } else { 0 };
            let mut dim = Vec::with_capacity(n + received);
            dim.extend(owners.iter().enumerate().map(|(p, &o)| {
                if o as usize == rank {
                    (src.index(p, d).unwrap_or(0) - lo) as i64
                } else {
                    -1
                }
            }));
            dim.extend(recv.iter().map(|&x| x as i64));
            dims.push(dim);
        }
        drop((send, recv, owners));
        let mut local_shape = shape.to_vec();
        local_shape[0] = rows.end - rows.start;
        let local_opts = AssembleOptions {
            skip_negative: true,
            ..opts.assemble.clone()
        };
        let views: Vec<&[i64]> = dims.iter().map(|d| &d[..]).collect();
        let local = Plan::new(&views, &local_shape, dtype, &local_opts, None).map_err(|e| {
            // Coordinates the owner names are local to its band.
            match e {
                Error::DuplicateCoordinate { mut coordinate } => {
                    if let Some(c) = coordinate.first_mut() {
                        *c += rows.start;
                    }
                    Error::DuplicateCoordinate { coordinate }
                }
                e => e,
            }
        });
        let local = agree(comm, local)?;
        Ok(DistPlan {
            rank,
            ranks,
            rows,
            shape: shape.to_vec(),
            contributions: n,
            send_order,
            send_counts,
            recv_counts,
            local,
            scratch: Vec::new(),
        })
    }

    /// The rows this rank owns.
    pub fn rows(&self) -> Range<u64> {
        self.rows.clone()
    }

    /// The tensor's shape.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }

    /// Values a refill takes on this rank.
    pub fn contributions(&self) -> usize {
        self.contributions
    }

    /// Contributions this rank's band receives from the other ranks.
    pub fn received(&self) -> usize {
        self.recv_counts.iter().map(|&c| c as usize).sum()
    }

    /// Entries of this rank's band.
    pub fn nnz(&self) -> usize {
        self.local.nnz()
    }

    /// Bytes this rank's part of the plan holds: the send order, the
    /// band's plan and the value buffers a refill keeps.
    pub fn memory_bytes(&self) -> u64 {
        self.send_order.len() as u64 * 4
            + self.local.memory_bytes()
            + self.scratch.capacity() as u64 * 8
    }

    /// The band's row pointer (`rows + 1` entries, from 0) in `J`.
    pub fn row_ptr<J: OutIndex>(&self) -> Result<Vec<J>> {
        self.local.pointers()
    }

    /// The band's column indices (global) in `J`, one per entry.
    pub fn cols<J: OutIndex>(&self) -> Result<Vec<J>> {
        self.local.indices()
    }

    /// Collective: refill this rank's band `out` (one value per entry)
    /// with the assembly of `values`, this rank's contributions in the
    /// order they were planned. One all-to-all of the values.
    ///
    /// Errors, on every rank: a value count that is not the plan's (the
    /// failing rank names itself and both counts), `out` of the wrong
    /// length, a value the non-finite policy refuses, an integer sum that
    /// overflows.
    pub fn refill_into<C, V, O>(&mut self, comm: &C, values: &[V], out: &mut [O]) -> Result<()>
    where
        C: Communicator,
        V: DirectValue + Equivalence + bytemuck::Pod,
        O: RealElement,
    {
        let counts = (|| -> Result<()> {
            if comm.size() as usize != self.ranks || comm.rank() as usize != self.rank {
                return Err(Error::InvalidArgument(format!(
                    "the plan was made on rank {} of {}, refilled on rank {} of {}",
                    self.rank,
                    self.ranks,
                    comm.rank(),
                    comm.size()
                )));
            }
            if values.len() != self.contributions {
                return Err(Error::InvalidArgument(format!(
                    "rank {}: {} values for a plan of {} contributions on this rank",
                    self.rank,
                    values.len(),
                    self.contributions
                )));
            }
            if out.len() != self.local.nnz() {
                return Err(Error::InvalidArgument(format!(
                    "rank {}: a result of {} values for a band of {} entries",
                    self.rank,
                    out.len(),
                    self.local.nnz()
                )));
            }
            // Room for both buffers, kept for the next refill.
            let words = (self.send_order.len() + self.received())
                .saturating_mul(std::mem::size_of::<V>())
                .div_ceil(8);
            self.scratch
                .try_reserve_exact(words.saturating_sub(self.scratch.len()))
                .map_err(|_| Error::OutOfMemory {
                    what: "the refill's value buffers",
                    bytes: words as u64 * 8,
                })?;
            self.scratch.resize(words, 0);
            Ok(())
        })();
        agree(comm, counts)?;
        let sent = self.send_order.len();
        let received = self.received();
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut self.scratch[..]);
        let width = std::mem::size_of::<V>();
        let (send, recv) = bytes.split_at_mut(sent * width);
        let send: &mut [V] = bytemuck::cast_slice_mut(send);
        let recv: &mut [V] = bytemuck::cast_slice_mut(&mut recv[..received * width]);
        for (s, &p) in send.iter_mut().zip(&self.send_order) {
            *s = values[p as usize];
        }
        {
            let (sd, rd) = (prefix(&self.send_counts), prefix(&self.recv_counts));
            let sp = Partition::new(&send[..], &self.send_counts[..], &sd[..]);
            let mut rp = PartitionMut::new(&mut recv[..], &self.recv_counts[..], &rd[..]);
            comm.all_to_all_varcount_into(&sp, &mut rp);
        }
        let r = self
            .local
            .assemble_split_into(values, &recv[..], out, None)
            .map_err(|e| {
                // The band's numbering: say what it is.
                Error::InvalidArgument(format!(
                    "refilling rank {}'s band (contributions numbered as this rank's own, then \
                     those received, by source rank, then in each source's order): {e}",
                    self.rank
                ))
            });
        agree(comm, r)
    }

    /// Collective, in place of a refill this rank cannot make (a front
    /// end found its arguments wrong, `why`): takes the refill's first
    /// agreement with an error naming this rank, so every rank's refill
    /// fails and nobody waits. Returns the agreed error.
    pub fn refuse<C: Communicator>(&self, comm: &C, why: &str) -> Result<()> {
        let e = Error::InvalidArgument(format!("rank {}: {why}", self.rank));
        agree(comm, Err(e))
    }

    /// Collective: [`DistPlan::refill_into`] into a new band, returned
    /// with the band's structure.
    pub fn refill<C, V, O, J>(&mut self, comm: &C, values: &[V]) -> Result<LocalCsr<J, O>>
    where
        C: Communicator,
        V: DirectValue + Equivalence + bytemuck::Pod,
        O: RealElement,
        J: OutIndex,
    {
        let structure = (|| -> Result<(Vec<J>, Vec<J>, Vec<O>)> {
            let mut out = Vec::new();
            out.try_reserve_exact(self.nnz())
                .map_err(|_| Error::OutOfMemory {
                    what: "the band's values",
                    bytes: (self.nnz() * std::mem::size_of::<O>()) as u64,
                })?;
            out.resize(self.nnz(), bytemuck::Zeroable::zeroed());
            Ok((self.row_ptr()?, self.cols()?, out))
        })();
        let (row_ptr, cols, mut values_out) = agree(comm, structure)?;
        self.refill_into(comm, values, &mut values_out)?;
        Ok(LocalCsr {
            rows: self.rows(),
            ncols: self.shape.get(1).copied().unwrap_or(0),
            row_ptr,
            cols,
            values: values_out,
        })
    }
}

/// The index ranges of `counts` laid end to end.
fn ranges(counts: &[i32]) -> impl Iterator<Item = Range<usize>> + '_ {
    counts.iter().scan(0usize, |at, &c| {
        let r = *at..*at + c as usize;
        *at = r.end;
        Some(r)
    })
}

/// This rank's contributions against the shape and options, before any
/// exchange: the first bad one is named by its position on this rank.
fn check<S: Contributions>(
    src: &S,
    shape: &[u64],
    opts: &AssembleOptions,
    ranks: usize,
) -> Result<()> {
    opts.validate()?;
    if opts.duplicates == DuplicatePolicy::Last {
        return Err(Error::InvalidOptions(
            "duplicate policy `last` is not defined across ranks; use sum, min, max or error"
                .into(),
        ));
    }
    if shape.is_empty() || shape[0] < ranks as u64 {
        return Err(Error::InvalidOptions(format!(
            "shape {shape:?} cannot give each of {ranks} ranks a row"
        )));
    }
    if opts.layout == OutputLayout::Csc {
        return Err(Error::InvalidOptions(
            "a plan across ranks owns row bands: use CSR (or COO), not CSC".into(),
        ));
    }
    opts.layout.check_rank(shape.len())?;
    let n = src.len();
    if n >= u32::MAX as usize {
        return Err(Error::InvalidArgument(format!(
            "{n} contributions on one rank: a plan takes fewer than 2^32 per rank"
        )));
    }
    for p in 0..n {
        for (d, &extent) in shape.iter().enumerate() {
            match src.index(p, d) {
                None if opts.skip_negative => break,
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "contribution {p}: a negative index in dimension {d} (set skip_negative to skip it)"
                    )));
                }
                Some(i) if i >= extent => {
                    return Err(Error::IndexOutOfRange {
                        contribution: p as u64,
                        dim: d,
                        index: i,
                        extent,
                    });
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}
