//! The budget plan: how [`AssembleOptions::memory_budget`] is divided
//! between fixed buffers, ingest chunks, sort scratch and in-memory runs,
//! and the merge fan-in that follows. Pure arithmetic, tested below.

use crate::budget::Budget;
use crate::error::Result;
use crate::options::AssembleOptions;

/// Bytes the output writer's buffers may take (values + indices streams).
pub(crate) const OUTPUT_BUFFER_BYTES: u64 = 2 << 20;
/// Target payload of a run block.
pub(crate) const BLOCK_TARGET: usize = 64 << 10;
/// Write buffer of a spill file writer.
pub(crate) const SPILL_BUFFER: usize = 256 << 10;
/// Buffer bytes one open run reader takes: a block and its header.
pub(crate) const RUN_READER_BYTES: u64 = (BLOCK_TARGET + 4096) as u64;
/// Fewest records a chunk may hold: below this, runs get so short that
/// merging them costs more than it saves.
pub(crate) const MIN_CHUNK_RECORDS: u64 = 4096;
/// Share of the free budget given to chunks and sort scratch during
/// ingestion; the rest holds in-memory runs.
pub(crate) const CHUNK_SHARE: f64 = 0.6;
/// Largest ingest chunk (and so sort scratch) in bytes. Beyond this a
/// larger budget only hurts: every chunk and scratch byte is faulted in
/// fresh (1.4-2 s per GiB measured here, `scripts/page_faults.py`), and
/// with few, huge chunks the last one is sorted while the other core
/// idles. On 5e7 FE contributions at a 4 GiB budget, uncapped (409 MiB)
/// chunks cost 2.2-3.3 s of system time and 1.7 GB of RSS against 1.6 s
/// and 650 MB with a 64 MiB cap. What the chunks no longer take goes to
/// in-memory runs. 32 MiB (2 Mi u64 records per run, sorted in L2-sized
/// buckets) against 64 MiB, same runs alternating: 4 GiB budget, 5e7
/// random keys 3.03-3.28 s against 3.32-3.91 s, 1e7 MatrixMarket lines
/// 0.63-0.66 s against 0.66-0.72 s, 5e7 FE the same, RSS 25 % lower; 1e9
/// FE at 1 GiB 68.8-70.6 s against 65.8-71.4 s (478 runs instead of
/// 240, still one pass at fan-in 512).
pub(crate) const CHUNK_MAX_BYTES: u64 = 32 << 20;
/// Largest ingest chunk when the caller's
/// [`AssembleOptions::expected_contributions`] will not fit in the room for
/// in-memory runs: then most runs spill, and fewer, longer runs make a
/// cheaper final merge (the chunk memory is faulted in once for the whole
/// run). 1e9 FE at 1 GiB, same binaries alternating: 100 MiB chunks (150
/// runs) gave a final pass of 15.6-16.6 s against 17.2-20.2 s with 32 MiB
/// (478 runs), ingest the same (30.2-30.9 s against 29.6-35.2 s).
pub(crate) const CHUNK_MAX_SPILLING_BYTES: u64 = 128 << 20;
/// Largest batch of merged entries handed from the merging thread to the
/// writing thread (two exist). Fewer hand-offs matter more than cache
/// footprint: on 5e7 FE contributions the final pass took 0.66-0.70 s with
/// 384 KiB batches, 0.78-0.93 s with 48-96 KiB, 0.53-0.58 s with 1.5 MiB
/// and no less with 6 MiB; each hand-off can put a thread to sleep and
/// wake it again.
pub(crate) const WRITE_BATCH_MAX_BYTES: u64 = 3 << 19;

/// How the budget is divided; derived once from the options.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) chunk_records: usize,
    pub(crate) sorters: usize,
    /// `threads = 1`: everything on the calling thread, on one core. The
    /// pusher sorts its own chunks (no sorter thread; the budget is divided
    /// as for one sorter) and `finish` merges and writes on one thread.
    pub(crate) one_thread: bool,
    /// Pushers that keep a chunk of their own between calls (the first
    /// `threads` alive). Any number more may be alive: they borrow the
    /// sorters' share of the pool (see `shared.rs`).
    pub(crate) resident_pushers: usize,
    /// Chunks in the pool: one per resident pusher, and one per sorter
    /// that circulates between the sorters and the pushers beyond the
    /// residents. Never more, whatever the number of pushers.
    pub(crate) n_chunks: usize,
    pub(crate) held_limit: u64,
    pub(crate) est_bytes_per_record: u64,
    pub(crate) fan_in: usize,
    pub(crate) record_bytes: u64,
    /// Bytes of one final-pass batch (see [`WRITE_BATCH_MAX_BYTES`]).
    pub(crate) batch_bytes: u64,
    /// Chunk bytes (those kept and the pushers') up to which a builder
    /// keeps chunks unsorted for the in-memory kernel (`deferred.rs`):
    /// all the budget but the fixed buffers and what giving up needs (the
    /// overflowing chunk, the sort scratch); at `finish` it is what the
    /// kernel works in.
    pub(crate) defer_bytes: u64,
}

impl Plan {
    /// `deferrable`: records per contribution when the builder may keep its
    /// chunks for the in-memory kernel (`deferred.rs`), None when it may
    /// not.
    /// The buffers every builder holds whatever it is given.
    fn fixed(opts: &AssembleOptions) -> u64 {
        let sorters = opts.threads as u64;
        OUTPUT_BUFFER_BYTES + sorters * (SPILL_BUFFER as u64 + 2 * BLOCK_TARGET as u64)
    }

    /// The smallest budget a builder of `record_bytes` records takes with
    /// `opts`: the one minimum every input path checks (the kernel's
    /// paths too, which then need less), so a budget is refused or taken
    /// the same way whatever the input.
    pub(crate) fn minimum(opts: &AssembleOptions, record_bytes: u64) -> u64 {
        let units = 3 * opts.threads as u64; // pushers' and sorters' chunks, sort scratch
        let min_chunk_bytes = MIN_CHUNK_RECORDS * record_bytes;
        Self::fixed(opts) + ((units * min_chunk_bytes) as f64 / CHUNK_SHARE).ceil() as u64
    }

    /// Takes the builder's reservations from `budget` (`opts`' budget):
    /// the fixed buffers, the chunks and sort scratch, and all the rest
    /// for in-memory runs.
    pub(crate) fn new(
        budget: &mut Budget,
        opts: &AssembleOptions,
        record_bytes: u64,
        est_bytes_per_record: u64,
        deferrable: Option<u64>,
    ) -> Result<Plan> {
        let sorters = opts.threads;
        let resident_pushers = opts.threads;
        let n_chunks = resident_pushers + sorters;
        let units = (n_chunks + sorters) as u64; // chunks + one sort scratch per sorter
        budget.require(
            "the sorters' chunks of 4096 records",
            Self::minimum(opts, record_bytes),
        )?;
        budget.take("the output writer's buffers", OUTPUT_BUFFER_BYTES)?;
        budget.take(
            "the spill writers and run blocks",
            Self::fixed(opts) - OUTPUT_BUFFER_BYTES,
        )?;
        let free = budget.left();
        let share = ((free as f64 * CHUNK_SHARE) as u64) / units;
        // The chunks are kept for the kernel unless the caller expects
        // more contributions than they would hold: then never (no chunk
        // is kept in vain).
        // Room left for when keeping gives up and the kept chunks go to
        // the sorters: the chunk that overflowed and each sorter's
        // scratch. The pushers wait for the kept chunks to come back
        // sorted rather than allocate new ones (`Local::hand_off`), and
        // in-memory runs made meanwhile take only what the budget has
        // left (`run.rs`).
        let after_keeping = 1 + sorters as u64;
        let defer_capped = free.saturating_sub(after_keeping * share.min(CHUNK_MAX_BYTES));
        let deferred = deferrable.is_some_and(|k| {
            opts.expected_contributions
                .is_none_or(|n| n.saturating_mul(k * record_bytes) <= defer_capped)
        });
        // Runs of all the expected contributions would not fit beside the
        // capped chunks: most will spill, so make them longer.
        let room_beside_capped = free - share.min(CHUNK_MAX_BYTES) * units;
        let spilling = !deferred
            && opts
                .expected_contributions
                .is_some_and(|n| n.saturating_mul(est_bytes_per_record) > room_beside_capped);
        let cap = if spilling {
            CHUNK_MAX_SPILLING_BYTES
        } else {
            CHUNK_MAX_BYTES
        };
        let chunk_bytes = share.min(cap);
        let chunk_records = (chunk_bytes / record_bytes).min(u32::MAX as u64) as usize;
        budget.take("the chunks and sort scratch", chunk_bytes * units)?;
        let held_limit = budget.take_rest("in-memory runs");
        // In the merge phase the chunk area is free again: readers get it.
        let reader_bytes = RUN_READER_BYTES * 2;
        let fan_in =
            ((chunk_bytes * units) / reader_bytes).clamp(2, opts.max_fan_in as u64) as usize;
        // The readers take at most half of the chunk area; the two batches
        // of the final pass fit in the other half.
        let batch_bytes = (chunk_bytes * units / 4).min(WRITE_BATCH_MAX_BYTES);
        let defer_bytes = if deferred { defer_capped } else { 0 };
        Ok(Plan {
            chunk_records,
            sorters,
            one_thread: opts.threads == 1,
            resident_pushers,
            n_chunks,
            held_limit,
            est_bytes_per_record,
            fan_in,
            record_bytes,
            batch_bytes,
            defer_bytes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn new_plan(
        o: &AssembleOptions,
        record_bytes: u64,
        est: u64,
        deferrable: Option<u64>,
    ) -> Result<Plan> {
        Plan::new(
            &mut Budget::new(o.memory_budget),
            o,
            record_bytes,
            est,
            deferrable,
        )
    }

    fn opts(budget: u64, threads: usize, max_fan_in: usize) -> AssembleOptions {
        AssembleOptions {
            memory_budget: budget,
            threads,
            max_fan_in,
            ..AssembleOptions::default()
        }
    }

    /// The minimum a too-small budget reports.
    fn minimum(threads: usize, record_bytes: u64) -> u64 {
        match new_plan(&opts(0, threads, 64), record_bytes, 8, None) {
            Err(Error::BudgetTooSmall {
                budget: 0, minimum, ..
            }) => minimum,
            other => panic!("expected BudgetTooSmall, got {other:?}"),
        }
    }

    #[test]
    fn minimum_budget_is_exactly_the_smallest_that_works() {
        for threads in [1, 2, 8] {
            for record_bytes in [16u64, 24, 40] {
                let min = minimum(threads, record_bytes);
                let fixed = OUTPUT_BUFFER_BYTES
                    + threads as u64 * (SPILL_BUFFER as u64 + 2 * BLOCK_TARGET as u64);
                assert!(min > fixed, "the minimum covers the fixed buffers");
                let p = new_plan(&opts(min, threads, 64), record_bytes, 8, None).unwrap();
                assert!(
                    p.chunk_records as u64 >= MIN_CHUNK_RECORDS,
                    "threads {threads}, record {record_bytes}: {} records",
                    p.chunk_records
                );
                assert_eq!(p.sorters, threads);
                assert_eq!(p.n_chunks, 2 * threads);
                match new_plan(&opts(min - 1, threads, 64), record_bytes, 8, None) {
                    Err(Error::BudgetTooSmall {
                        budget, minimum, ..
                    }) => {
                        assert_eq!((budget, minimum), (min - 1, min));
                    }
                    other => panic!("one byte less must be refused, got {other:?}"),
                }
            }
        }
    }

    #[test]
    fn budget_shares_add_up() {
        let budget = 64 << 20;
        let p = new_plan(&opts(budget, 2, 64), 16, 8, None).unwrap();
        let fixed = OUTPUT_BUFFER_BYTES + 2 * (SPILL_BUFFER as u64 + 2 * BLOCK_TARGET as u64);
        let units = (p.n_chunks + p.sorters) as u64;
        let chunk_area = p.chunk_records as u64 * 16 * units;
        assert!(fixed + chunk_area + p.held_limit <= budget);
        // The in-memory runs get about 40 % of what the fixed buffers leave.
        let free = (budget - fixed) as f64;
        let share = p.held_limit as f64 / free;
        assert!((share - (1.0 - CHUNK_SHARE)).abs() < 0.01, "share {share}");
    }

    #[test]
    fn fan_in_is_clamped_to_the_option_and_to_two() {
        // A large budget pays for many readers: the option caps them.
        let big = new_plan(&opts(4 << 30, 2, 8), 16, 8, None).unwrap();
        assert_eq!(big.fan_in, 8);
        let big = new_plan(&opts(4 << 30, 2, 1000), 16, 8, None).unwrap();
        assert_eq!(big.fan_in, 1000);
        // The smallest budget still merges two runs at a time.
        let min = minimum(1, 40);
        let small = new_plan(&opts(min, 1, 64), 40, 8, None).unwrap();
        assert!((2..=64).contains(&small.fan_in), "fan-in {}", small.fan_in);
        let reader_bytes = (BLOCK_TARGET + 4096) as u64 * 2;
        let chunk_area = small.chunk_records as u64 * 40 * 3;
        assert_eq!(
            small.fan_in as u64,
            (chunk_area / reader_bytes).clamp(2, 64)
        );
    }

    #[test]
    fn chunks_are_capped_and_the_rest_holds_runs() {
        let fixed = OUTPUT_BUFFER_BYTES + 2 * (SPILL_BUFFER as u64 + 2 * BLOCK_TARGET as u64);
        // 256 MiB: 60 % of the free budget over 6 units, below the cap.
        let small = new_plan(&opts(256 << 20, 2, 64), 16, 8, None).unwrap();
        let free = (256u64 << 20) - fixed;
        assert_eq!(
            small.chunk_records as u64,
            ((free as f64 * CHUNK_SHARE) as u64) / 6 / 16
        );
        // 4 GiB: capped; everything else holds in-memory runs.
        let big = new_plan(&opts(4 << 30, 2, 64), 16, 8, None).unwrap();
        assert_eq!(big.chunk_records as u64, CHUNK_MAX_BYTES / 16);
        assert_eq!(big.held_limit, (4u64 << 30) - fixed - 6 * CHUNK_MAX_BYTES);
        assert!(big.fan_in >= small.fan_in);
        assert_eq!(big.batch_bytes, WRITE_BATCH_MAX_BYTES);
    }

    #[test]
    fn chunks_grow_only_when_the_expected_contributions_spill() {
        let with = |budget: u64, n: Option<u64>| {
            let o = AssembleOptions {
                expected_contributions: n,
                ..opts(budget, 2, 512)
            };
            new_plan(&o, 16, 8, None).unwrap()
        };
        let fixed = OUTPUT_BUFFER_BYTES + 2 * (SPILL_BUFFER as u64 + 2 * BLOCK_TARGET as u64);
        let free = (1u64 << 30) - fixed;
        let share = ((free as f64 * CHUNK_SHARE) as u64) / 6;
        // Unknown, or fits beside the capped chunks: capped as before.
        let capped = with(1 << 30, None);
        assert_eq!(capped.chunk_records as u64, CHUNK_MAX_BYTES / 16);
        let room = capped.held_limit / 8;
        assert_eq!(
            with(1 << 30, Some(room)).chunk_records,
            capped.chunk_records
        );
        // One more would spill: the chunks take their whole share.
        let long = with(1 << 30, Some(room + 1));
        assert_eq!(
            long.chunk_records as u64,
            share.min(CHUNK_MAX_SPILLING_BYTES) / 16
        );
        assert!(long.chunk_records > capped.chunk_records);
        assert!(fixed + long.chunk_records as u64 * 16 * 6 + long.held_limit <= 1 << 30);
        // A large budget stops at the spilling cap; a small one never
        // reaches either cap.
        let huge = with(8 << 30, Some(u64::MAX));
        assert_eq!(huge.chunk_records as u64, CHUNK_MAX_SPILLING_BYTES / 16);
        let small = with(256 << 20, Some(u64::MAX));
        assert_eq!(small.chunk_records, with(256 << 20, None).chunk_records);
    }

    #[test]
    fn chunks_are_kept_for_the_kernel_only_when_the_expected_ones_fit() {
        let with = |n: Option<u64>, deferrable: Option<u64>| {
            let o = AssembleOptions {
                expected_contributions: n,
                ..opts(256 << 20, 2, 512)
            };
            new_plan(&o, 16, 8, deferrable).unwrap()
        };
        let fixed = OUTPUT_BUFFER_BYTES + 2 * (SPILL_BUFFER as u64 + 2 * BLOCK_TARGET as u64);
        let free = (256u64 << 20) - fixed;
        let unknown = with(None, Some(1));
        // All but the fixed buffers and, for when keeping gives up, the
        // overflowing chunk and the sort scratch.
        let share = ((free as f64 * CHUNK_SHARE) as u64) / 6;
        let limit = free - 3 * share;
        assert_eq!(unknown.defer_bytes, limit);
        assert_eq!(with(None, None).defer_bytes, 0, "not deferrable");
        // Expected records that fit are kept, even where their runs would
        // have made the chunks long; one more and nothing is kept.
        let fit = with(Some(limit / 16), Some(1));
        assert_eq!(fit.defer_bytes, limit);
        assert_eq!(fit.chunk_records, unknown.chunk_records);
        assert_eq!(with(Some(limit / 16 + 1), Some(1)).defer_bytes, 0);
        assert_eq!(
            with(Some(limit / 32 + 1), Some(2)).defer_bytes,
            0,
            "complex: two records"
        );
    }
}
