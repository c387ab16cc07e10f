//! MPI tests of the distributed builder (issue 13), run by
//! `cargo test --release -p coo-assembler-mpi`.
//!
//! This file is both the driver and the MPI program (`harness = false`):
//! run plainly, it starts `mpirun -n K <this executable> worker <case> <dir>`
//! for K = 1..=4 and checks that every rank reported success; under
//! `mpirun` (argument `worker`) it runs one case on every rank. Without
//! `mpirun` on the PATH it says so and skips.
//!
//! Cases:
//! - `identity`: every rank pushes its share of a fixed, seeded set of
//!   contributions (values spanning 40 orders of magnitude, so any inexact
//!   sum shows), in its own order; several budgets (spilling stashes, many
//!   exchange rounds, outgoing records combined across the whole stash
//!   through runs, spilling local runs) and both row ownerships. Rank 0
//!   assembles all the contributions in one process and checks that the
//!   composite converted to one COO is byte-identical, that our reader
//!   verifies it and that hurray-io 0.1.0's `read_composite` accepts it.
//!   The same with per-rank files (`finish_per_rank`) joined by rank 0
//!   (`composite::join`).
//! - `csr`: the same contributions into CSR members (two budgets and
//!   ownerships) and CSC members (once): the composite converts to the
//!   single-process CSR and COO files byte for byte, our reader verifies
//!   it, and what hurray-io 0.1.0's `read_composite` decodes of the CSR
//!   members puts together the single-process CSR buffers exactly; per-rank
//!   CSR files joined give the same.
//! - `fail`: a failure injected on one rank (after the exchange, then after
//!   the member write) makes every rank return an error, and nothing is
//!   left in the output directory; in per-rank mode, files that were at
//!   the targets before are left as they were.
//!
//! The command line's `assemble --mpi` is tested in the CLI crate
//! (`cli/tests/mpi.rs`, feature `mpi`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use coo_assembler::{
    AssembleOptions, Builder, DType, Error, HurrayFile, convert::ConvertOptions,
    options::OutputLayout, read::CompositeFile,
};
use coo_assembler_mpi::{DistBuilder, DistOptions, InjectedFailure, RowOwnership};
use coo_assembler_testkit::reference::composite_members;
use coo_assembler_testkit::{clustered, find_program};
use mpi::traits::*;
use std::path::{Path, PathBuf};
use std::process::Command;

const SHAPE: [u64; 2] = [997, 500];
const N: u64 = 200_000;

/// Contribution `i`: a clustered coordinate (many duplicates) and a value
/// whose magnitude varies wildly.
fn contribution(i: u64) -> ([u64; 2], f64) {
    clustered(i, SHAPE)
}

/// Which rank pushes contribution `i`, and in which order (reversed on odd ranks).
fn mine(rank: u64, ranks: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..N)
        .filter(|&i| i.wrapping_mul(2_654_435_761) % 1009 % ranks == rank)
        .collect();
    if rank % 2 == 1 {
        v.reverse();
    }
    v
}

fn single(path: &Path, layout: OutputLayout) {
    let opts = AssembleOptions {
        memory_budget: 8 << 20,
        threads: 1,
        tensor_name: "K".into(),
        layout,
        ..AssembleOptions::default()
    };
    let mut b = Builder::new(&SHAPE, DType::F64, opts).unwrap();
    for i in 0..N {
        let (idx, v) = contribution(i);
        b.push(&idx, v).unwrap();
    }
    b.finish(path).unwrap();
}

fn reference_accepts(path: &Path, members: usize) {
    let (shape, n) = composite_members(path, "K");
    assert_eq!(n, members);
    assert_eq!(shape, SHAPE);
}

/// Options of a run: `budget` per rank, `layout` members, spills in `dir`.
fn options(dir: &Path, budget: u64, rows: RowOwnership, layout: OutputLayout) -> DistOptions {
    DistOptions {
        assemble: AssembleOptions {
            memory_budget: budget,
            threads: 1,
            tensor_name: "K".into(),
            temp_dir: Some(dir.to_path_buf()),
            layout,
            ..AssembleOptions::default()
        },
        rows,
        ..DistOptions::default()
    }
}

/// hurray-io 0.1.0's `read_composite` accepts a composite of CSR members,
/// and what it decodes, member after member (`row_ptr` over each band's
/// own rows), puts together the single-process CSR file's buffers exactly.
fn reference_reads_csr(path: &Path, members: usize, single: &Path) {
    use hurray_core::LayoutDescriptor;
    use hurray_io::file::FileItem;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let c = rt.block_on(async {
        let file = tokio::fs::File::open(path).await.unwrap();
        let mut r = hurray_io::file::FileReader::open(file).await.unwrap();
        r.read_composite("K").await.unwrap()
    });
    assert_eq!(c.members.len(), members);
    assert_eq!(c.head.shape.dims(), &SHAPE[..]);
    let (mut values, mut cols, mut ptr) = (Vec::new(), Vec::new(), vec![0u64]);
    let mut next_row = 0u64;
    for m in &c.members {
        let FileItem::Tensor(t) = m else {
            panic!("a nested composite")
        };
        assert!(matches!(t.descriptor.layout, LayoutDescriptor::Csr(_)));
        let shard = t.descriptor.shard.as_ref().unwrap();
        assert_eq!(shard.parent_shape, SHAPE.to_vec());
        assert_eq!(shard.shard_offset, vec![next_row, 0]);
        let rows = t.descriptor.shape.dims()[0];
        next_row += rows;
        let base = *ptr.last().unwrap();
        values.extend_from_slice(&t.buffers[0]);
        cols.extend_from_slice(&t.buffers[1]);
        let p: Vec<u64> = t.buffers[2]
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
            .collect();
        assert_eq!(p.len() as u64, rows + 1);
        assert_eq!(p[0], 0);
        ptr.extend(p[1..].iter().map(|x| x + base));
    }
    assert_eq!(next_row, SHAPE[0]);
    let f = HurrayFile::open(single).unwrap();
    let t = f.only_tensor_view().unwrap().as_compressed().unwrap();
    assert_eq!(values, t.values_bytes());
    assert_eq!(cols, t.indices_bytes());
    assert_eq!(ptr, t.pointers());
}

/// A distributed builder on `world` with this rank's contributions pushed.
fn pushed(
    world: &mpi::topology::SimpleCommunicator,
    opts: DistOptions,
) -> DistBuilder<'_, mpi::topology::SimpleCommunicator> {
    let (rank, ranks) = (world.rank() as u64, world.size() as u64);
    let mut b = DistBuilder::new(world, &SHAPE, DType::F64, opts).unwrap();
    for i in mine(rank, ranks) {
        let (idx, v) = contribution(i);
        b.push(&idx, v).unwrap();
    }
    b
}

/// Rank 0's checks of a composite written by `ranks` ranks: no writer
/// warning, valid, one member per rank.
fn valid_composite(out: &Path, ranks: u64) -> CompositeFile {
    let c = CompositeFile::open(out).unwrap();
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    let problems = c.verify();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(c.members().count() as u64, ranks);
    c
}

/// Every rank assembles its rows into its own file `{prefix}.part{rank}.hrry`
/// (`finish_per_rank`); rank 0 joins the files into a composite and
/// converts it to one plain `layout` file, whose path it returns.
fn per_rank_joined(
    world: &mpi::topology::SimpleCommunicator,
    dir: &Path,
    opts: DistOptions,
    prefix: &str,
    layout: OutputLayout,
) -> Option<PathBuf> {
    let (rank, ranks) = (world.rank() as u64, world.size() as u64);
    let b = pushed(world, opts);
    let own = dir.join(format!("{prefix}.part{rank}.hrry"));
    let s = b.finish_per_rank(&own).unwrap();
    let mut firsts = vec![0u64; ranks as usize];
    world.all_gather_into(&s.rows.start, &mut firsts[..]);
    if rank != 0 {
        return None;
    }
    let parts: Vec<(PathBuf, Vec<u64>)> = firsts
        .iter()
        .enumerate()
        .map(|(k, &f)| (dir.join(format!("{prefix}.part{k}.hrry")), vec![f, 0]))
        .collect();
    let joined = dir.join("joined.hrry");
    coo_assembler::composite::join(&parts, &SHAPE, &joined, "K").unwrap();
    let conv = dir.join("conv.hrry");
    to_plain(&joined, &conv, layout);
    Some(conv)
}

/// The composite at `from` converted to one `layout` tensor "K" at `to`.
fn to_plain(from: &Path, to: &Path, layout: OutputLayout) {
    let opts = ConvertOptions {
        to: layout,
        output_name: Some("K".into()),
        ..ConvertOptions::default()
    };
    coo_assembler::convert(from, to, &opts).unwrap();
}

/// The single-process CSR file's rows `rows` as a band: local row
/// pointer, global columns, values.
fn single_band(path: &Path, rows: std::ops::Range<u64>) -> (Vec<u64>, Vec<u64>, Vec<f64>) {
    let f = HurrayFile::open(path).unwrap();
    let t = f.only_tensor_view().unwrap();
    let c = t.as_compressed().unwrap();
    let p = c.pointers();
    let (a, b) = (
        p[rows.start as usize] as usize,
        p[rows.end as usize] as usize,
    );
    let ptr = p[rows.start as usize..=rows.end as usize]
        .iter()
        .map(|&x| x - a as u64)
        .collect();
    let values = c.values::<f64>().unwrap()[a..b].to_vec();
    (ptr, c.indices()[a..b].to_vec(), values)
}

fn widened<J: Copy + TryInto<u64>>(v: &[J]) -> Vec<u64> {
    v.iter().map(|&x| x.try_into().ok().unwrap()).collect()
}

/// Bands in memory (`finish_csr`), plans across ranks (from arrays and
/// from pushes) and their refills, a refused refill and an abandoned
/// builder.
fn memory_case(world: &mpi::topology::SimpleCommunicator, dir: &Path) {
    use coo_assembler_mpi::{DistPlan, LocalCsr};
    let (rank, ranks) = (world.rank() as u64, world.size() as u64);
    let single_csr = dir.join("single-csr.hrry");
    let mine_ix = mine(rank, ranks);
    let (rows_ix, cols_ix): (Vec<i64>, Vec<i64>) = mine_ix
        .iter()
        .map(|&i| {
            let (c, _) = contribution(i);
            (c[0] as i64, c[1] as i64)
        })
        .unzip();
    let values: Vec<f64> = mine_ix.iter().map(|&i| contribution(i).1).collect();
    // Uneven bands, given as each rank's own row count.
    let local_rows = if rank + 1 == ranks {
        SHAPE[0] - (ranks - 1) * (SHAPE[0] / ranks / 2 + 1)
    } else {
        SHAPE[0] / ranks / 2 + 1
    };
    for (budget, rows) in [
        (8u64 << 20, RowOwnership::Sampled),
        (6 << 20, RowOwnership::Local(local_rows)),
    ] {
        let b = pushed(world, options(dir, budget, rows.clone(), OutputLayout::Coo));
        let (band, s): (LocalCsr<i32, f64>, _) = b.finish_csr().unwrap();
        let (ptr, cols, vals) = single_band(&single_csr, band.rows.clone());
        assert_eq!(widened(&band.row_ptr), ptr, "row pointer, {rows:?}");
        assert_eq!(widened(&band.cols), cols, "columns, {rows:?}");
        assert_eq!(
            band.values.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            vals.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            "values, {rows:?}"
        );
        if let RowOwnership::Local(n) = rows {
            assert_eq!(band.rows.end - band.rows.start, n);
        }
        assert_eq!(s.nnz, band.values.len() as u64);
        // Every rank removes its private file as its finish returns.
        world.barrier();
        let left: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| !n.to_string_lossy().starts_with("single"))
            .collect();
        assert!(left.is_empty(), "finish_csr left {left:?}");

        // The plan of the same contributions, from arrays, with the same
        // bands: its refill is the band bit for bit, and a second refill
        // of other values is a fresh assembly of those.
        let opts = DistOptions {
            rows: RowOwnership::Given(starts_of(world, &band)),
            ..options(dir, budget, RowOwnership::Sampled, OutputLayout::Csr)
        };
        let mut plan = DistPlan::new(
            world,
            &[&rows_ix[..], &cols_ix[..]],
            &SHAPE,
            DType::F64,
            &opts,
        )
        .unwrap();
        assert_eq!(plan.rows(), band.rows);
        let refilled: LocalCsr<i32, f64> = plan.refill(world, &values).unwrap();
        assert_eq!(refilled, band, "a plan's refill differs from finish_csr");
        let doubled: Vec<f64> = values.iter().map(|v| v * 3.0 - 1.0).collect();
        let again: LocalCsr<i64, f64> = plan.refill(world, &doubled).unwrap();
        let mut b = DistBuilder::new(world, &SHAPE, DType::F64, opts.clone()).unwrap();
        for (k, &i) in mine_ix.iter().enumerate() {
            b.push(&contribution(i).0, doubled[k]).unwrap();
        }
        let (fresh, _): (LocalCsr<i64, f64>, _) = b.finish_csr().unwrap();
        assert_eq!(
            again, fresh,
            "a second refill differs from a fresh assembly"
        );
        if rank == 0 {
            println!(
                "rank 0 of {ranks}, {rows:?}: finish_csr = single process; plan refills = fresh, {} plan bytes for {} contributions",
                plan.memory_bytes(),
                plan.contributions()
            );
        }

        // The plan recorded from pushes gives the same band and refills
        // the same.
        let b = pushed(world, opts.clone());
        let (first, mut recorded): (LocalCsr<i64, f64>, DistPlan) = b.finish_planned().unwrap();
        assert_eq!(widened(&first.row_ptr), widened(&band.row_ptr));
        assert_eq!(first.values, band.values);
        let again2: LocalCsr<i64, f64> = recorded.refill(world, &doubled).unwrap();
        assert_eq!(
            again2, fresh,
            "a recorded plan's refill differs from a fresh assembly"
        );

        // A value count that is not the plan's: every rank errs, the
        // failing rank names itself and both counts.
        let short = if rank + 1 == ranks {
            &values[1..]
        } else {
            &values[..]
        };
        let e = plan.refill::<_, f64, f64, i32>(world, short).unwrap_err();
        if rank + 1 == ranks {
            let m = e.to_string();
            assert!(
                m.contains(&format!("rank {rank}"))
                    && m.contains(&format!("{} values", values.len() - 1)),
                "{m}"
            );
        } else {
            assert!(
                matches!(&e, Error::RankFailed { rank: r, .. } if *r as u64 == ranks - 1),
                "{e}"
            );
        }
        world.barrier();
    }

    // A builder given up on the last rank (an error path, an exception):
    // every other rank's finish errs, naming it; nobody waits forever.
    let b = pushed(
        world,
        options(dir, 8 << 20, RowOwnership::Sampled, OutputLayout::Coo),
    );
    if rank + 1 == ranks {
        b.abandon("the element loop failed");
    } else {
        let e = b.finish(dir.join("A.hrry")).unwrap_err();
        assert!(
            matches!(&e, Error::RankFailed { rank: r, detail } if *r as u64 == ranks - 1 && detail.contains("the element loop failed")),
            "{e}"
        );
    }
    // Dropped unfinished, on every rank: each drop takes part as a failure.
    drop(pushed(
        world,
        options(dir, 8 << 20, RowOwnership::Sampled, OutputLayout::Coo),
    ));
    world.barrier();
    assert!(!dir.join("A.hrry").exists());
    if rank == 0 {
        println!("rank 0 of {ranks}: abandoned builders make every rank err, nothing hangs");
    }
}

/// Every rank's band start, from the bands.
fn starts_of<J, T>(
    world: &mpi::topology::SimpleCommunicator,
    band: &coo_assembler_mpi::LocalCsr<J, T>,
) -> Vec<u64> {
    let mut all = vec![0u64; world.size() as usize];
    world.all_gather_into(&band.rows.start, &mut all[..]);
    all
}

fn worker(case: &str, dir: &Path) {
    let universe = mpi::initialize().expect("MPI initialises once");
    let world = universe.world();
    // A failed assertion on one rank must end the job, not leave the
    // others waiting in a collective (and this one in MPI_Finalize).
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        mpi::topology::SimpleCommunicator::world().abort(101);
    }));
    let (rank, ranks) = (world.rank() as u64, world.size() as u64);
    let reference = dir.join("single.hrry");
    let reference_csr = dir.join("single-csr.hrry");
    if rank == 0 && (case == "identity" || case == "csr") {
        single(&reference, OutputLayout::Coo);
    }
    if rank == 0 && (case == "csr" || case == "memory") {
        single(&reference_csr, OutputLayout::Csr);
    }
    world.barrier();
    match case {
        "identity" => {
            // (budget per rank, ownership): 6 MiB makes the stash spill,
            // the exchange take several rounds and the local assembly spill.
            let given: Vec<u64> = (0..ranks).map(|k| k * SHAPE[0] / ranks).collect();
            for (budget, rows) in [
                (32u64 << 20, RowOwnership::Sampled),
                (8 << 20, RowOwnership::Given(given)),
                (6 << 20, RowOwnership::Sampled),
            ] {
                let b = pushed(&world, options(dir, budget, rows, OutputLayout::Coo));
                let out = dir.join("K.hrry");
                let s = b.finish(&out).unwrap();
                assert_eq!(s.pushed, mine(rank, ranks).len() as u64);
                // Whole-stash combining: at 2 ranks and the smallest
                // budget the outgoing buffers hold a third of the off-rank
                // records and combining removes more than 1/32 of a
                // buffer, so runs are kept and merged (the result stays
                // exact). At 3 and 4 ranks the buffers are smaller and
                // hold fewer duplicates: they go out as they are.
                let mut runs = 0u64;
                world.all_reduce_into(
                    &s.runs_spilled,
                    &mut runs,
                    mpi::collective::SystemOperation::sum(),
                );
                if budget == 6 << 20 && ranks == 2 {
                    assert!(runs > 0, "no run was combined across the stash");
                }
                if rank == 0 {
                    valid_composite(&out, ranks);
                    let conv = dir.join("conv.hrry");
                    to_plain(&out, &conv, OutputLayout::Coo);
                    let same = std::fs::read(&conv).unwrap() == std::fs::read(&reference).unwrap();
                    if !same {
                        // Kept for inspection.
                        std::fs::copy(&out, dir.join("differs-composite.hrry")).unwrap();
                        std::fs::copy(&conv, dir.join("differs-conv.hrry")).unwrap();
                    }
                    assert!(
                        same,
                        "budget {budget}: the converted composite differs from the single-process file"
                    );
                    reference_accepts(&out, ranks as usize);
                    std::fs::remove_file(&conv).unwrap();
                    println!(
                        "rank 0 of {ranks}, budget {budget}: byte-identical, nnz {}, rounds {}, stash spilled {} B, exchange runs {runs} B (all ranks), local runs spilled {}",
                        s.total_nnz, s.rounds, s.stash_spilled, s.local.runs_spilled
                    );
                }
                world.barrier();
            }
            // Per-rank files, joined by rank 0 into the same composite.
            let opts = options(dir, 8 << 20, RowOwnership::Sampled, OutputLayout::Coo);
            if let Some(conv) = per_rank_joined(&world, dir, opts, "K", OutputLayout::Coo) {
                assert_eq!(
                    std::fs::read(&conv).unwrap(),
                    std::fs::read(&reference).unwrap(),
                    "per-rank files joined differ from the single-process file"
                );
                println!("rank 0 of {ranks}, per-rank files joined: byte-identical");
            }
            world.barrier();
        }
        "csr" => {
            // CSR members (and CSC once): the composite converts to the
            // single-process CSR and COO files byte for byte, and the
            // reference reader decodes the members to exactly the
            // single-process CSR buffers.
            let given: Vec<u64> = (0..ranks).map(|k| k * SHAPE[0] / ranks).collect();
            for (budget, rows, layout) in [
                (8u64 << 20, RowOwnership::Given(given), OutputLayout::Csr),
                (6 << 20, RowOwnership::Sampled, OutputLayout::Csr),
                (8 << 20, RowOwnership::Sampled, OutputLayout::Csc),
            ] {
                let b = pushed(&world, options(dir, budget, rows, layout));
                let out = dir.join("C.hrry");
                let s = b.finish(&out).unwrap();
                if rank == 0 {
                    let c = valid_composite(&out, ranks);
                    assert!(c.members().all(|(t, _)| t.layout() == layout));
                    let conv = dir.join("conv.hrry");
                    to_plain(&out, &conv, OutputLayout::Coo);
                    assert!(
                        std::fs::read(&conv).unwrap() == std::fs::read(&reference).unwrap(),
                        "{layout} members, budget {budget}: the composite converted to COO differs from the single-process COO"
                    );
                    if layout == OutputLayout::Csr {
                        to_plain(&out, &conv, OutputLayout::Csr);
                        assert!(
                            std::fs::read(&conv).unwrap() == std::fs::read(&reference_csr).unwrap(),
                            "budget {budget}: the composite converted to CSR differs from the single-process CSR"
                        );
                        reference_reads_csr(&out, ranks as usize, &reference_csr);
                    } else {
                        reference_accepts(&out, ranks as usize);
                    }
                    std::fs::remove_file(&conv).unwrap();
                    println!(
                        "rank 0 of {ranks}, {layout} members, budget {budget}: byte-identical, nnz {}, rounds {}, peak RSS {:.1} MiB",
                        s.total_nnz,
                        s.rounds,
                        s.peak_rss.iter().max().copied().unwrap_or(0) as f64 / 1048576.0
                    );
                }
                world.barrier();
            }
            // Per-rank CSR files, joined by rank 0.
            let opts = options(dir, 8 << 20, RowOwnership::Sampled, OutputLayout::Csr);
            if let Some(conv) = per_rank_joined(&world, dir, opts, "C", OutputLayout::Csr) {
                assert_eq!(
                    std::fs::read(&conv).unwrap(),
                    std::fs::read(&reference_csr).unwrap(),
                    "per-rank CSR files joined differ from the single-process CSR"
                );
                println!("rank 0 of {ranks}, per-rank CSR files joined: byte-identical");
            }
            world.barrier();
        }
        "fail" => {
            let out = dir.join("F.hrry");
            for (at, on) in [
                (InjectedFailure::Exchange, ranks - 1),
                (InjectedFailure::Write, 1 % ranks),
            ] {
                let opts = DistOptions {
                    inject: Some((on as i32, at)),
                    ..options(dir, 8 << 20, RowOwnership::Sampled, OutputLayout::Coo)
                };
                let b = pushed(&world, opts);
                let e = b.finish(&out).unwrap_err();
                if rank == on {
                    assert!(matches!(e, Error::Io { .. }), "{e}");
                } else {
                    assert!(
                        matches!(&e, Error::RankFailed { rank: r, .. } if *r as u64 == on),
                        "{e}"
                    );
                }
                world.barrier();
                let left: Vec<PathBuf> = std::fs::read_dir(dir)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .collect();
                assert!(left.is_empty(), "{at:?}: left behind {left:?}");
                world.barrier();
            }
            // Per-rank files: a failure after the renames takes every file back.
            let opts = DistOptions {
                inject: Some(((ranks - 1) as i32, InjectedFailure::Write)),
                ..options(dir, 8 << 20, RowOwnership::Sampled, OutputLayout::Coo)
            };
            let b = pushed(&world, opts);
            assert!(
                b.finish_per_rank(dir.join(format!("F.part{rank}.hrry")))
                    .is_err()
            );
            world.barrier();
            let left: Vec<PathBuf> = std::fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            assert!(left.is_empty(), "per-rank: left behind {left:?}");
            world.barrier();
            // The same over earlier files: they are left as they were.
            let own = dir.join(format!("F.part{rank}.hrry"));
            let earlier = format!("earlier file of rank {rank}");
            std::fs::write(&own, &earlier).unwrap();
            let opts = DistOptions {
                inject: Some(((ranks - 1) as i32, InjectedFailure::Write)),
                ..options(dir, 8 << 20, RowOwnership::Sampled, OutputLayout::Csr)
            };
            let b = pushed(&world, opts);
            assert!(b.finish_per_rank(&own).is_err());
            world.barrier();
            assert_eq!(std::fs::read_to_string(&own).unwrap(), earlier);
            let left = std::fs::read_dir(dir).unwrap().count() as u64;
            assert_eq!(
                left, ranks,
                "per-rank over earlier files: more than those are left"
            );
            world.barrier();
            std::fs::remove_file(&own).unwrap();
            world.barrier();
            // A complex tensor is refused on every rank when made.
            let e = DistBuilder::new(&world, &SHAPE, DType::C128, DistOptions::default())
                .err()
                .expect("a complex distributed builder was made");
            assert!(
                matches!(&e, Error::InvalidOptions(m) if m.contains("complex")),
                "{e}"
            );
            // A push error on one rank is reported collectively too.
            let mut b =
                DistBuilder::new(&world, &SHAPE, DType::F64, DistOptions::default()).unwrap();
            if rank == ranks - 1 {
                assert!(b.push(&[SHAPE[0], 0], 1.0).is_err());
            }
            let e = b.finish(&out).unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument(_) | Error::RankFailed { .. }),
                "{e}"
            );
            world.barrier();
            if rank == 0 {
                println!("rank 0 of {ranks}: every rank failed cleanly, nothing left");
            }
        }
        "memory" => memory_case(&world, dir),
        other => panic!("unknown case {other}"),
    }
    println!("worker {case} rank {rank} OK");
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        worker(&args[2], Path::new(&args[3]));
        return;
    }
    // `cargo test` passes harness flags (e.g. --nocapture): ignored.
    let Some(mpirun) = find_program("mpirun") else {
        println!("SKIPPED: mpirun is not on the PATH (install openmpi-bin and libopenmpi-dev)");
        return;
    };
    let exe = std::env::current_exe().unwrap();
    let mut failed = Vec::new();
    for case in ["identity", "csr", "fail", "memory"] {
        for k in 1..=4 {
            let dir = tempfile::tempdir().unwrap();
            let out = Command::new(&mpirun)
                // A case that hangs fails instead of stalling the suite.
                .args(["-n", &k.to_string(), "--oversubscribe", "--timeout", "600"])
                .arg(&exe)
                .args(["worker", case])
                .arg(dir.path())
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            let oks = stdout
                .lines()
                .filter(|l| l.starts_with(&format!("worker {case} rank")) && l.ends_with("OK"))
                .count();
            print!("{stdout}");
            if !out.status.success() || oks != k {
                eprintln!("{}", String::from_utf8_lossy(&out.stderr));
                failed.push(format!(
                    "{case} with {k} ranks ({oks} ranks OK, {})",
                    out.status
                ));
            } else {
                println!("test mpi {case} x{k} ... ok");
            }
            let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
            if case == "fail" && !left.is_empty() {
                failed.push(format!("{case} with {k} ranks left {} files", left.len()));
            }
        }
    }
    if !failed.is_empty() {
        eprintln!("FAILED: {failed:?}");
        std::process::exit(1);
    }
}
