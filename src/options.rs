//! The assembler's knobs, validated before any work starts.

// The handle's type rides in `AssembleOptions::io` (so struct-update
// syntax keeps working); its fault plans are nameable with `internals` only.
use crate::error::{Error, Result};
#[doc(hidden)]
pub use crate::fs::IoCtx;
use std::path::PathBuf;

crate::vocab::vocabulary! {
    /// How contributions to the same coordinate combine.
    #[derive(Default)]
    pub enum DuplicatePolicy ("duplicate policy") {
        /// Add them. Floats: the correctly rounded exact sum (order independent).
        /// Integers: exact, an overflow of the element type is an error.
        #[default]
        Sum => "sum": "add them (floats: the correctly rounded exact sum; the default)",
        /// Keep the smallest (floats: NaN if any contribution is NaN).
        Min => "min": "keep the smallest",
        /// Keep the largest (floats: NaN if any contribution is NaN).
        Max => "max": "keep the largest",
        /// Keep the last contribution: contributions are ordered by pusher
        /// (in the order pushers were created) and then by push order within
        /// the pusher; the greatest wins.
        Last => "last": "keep the last one pushed",
        /// A second contribution to a coordinate is an error naming it.
        Error => "error": "fail on the first duplicate, naming its coordinate",
    }
}

crate::vocab::vocabulary! {
    /// The layout of the tensor written: COO (any rank), or CSR / CSC (rank 2
    /// only, Hurray layout tags 0x07 and 0x08).
    #[derive(Default)]
    pub enum OutputLayout ("layout") {
        /// Coordinate list: values and an `nnz x rank` index buffer, row-major order.
        #[default]
        Coo => "coo": "coordinate list, sorted row-major (any rank; the default)",
        /// Compressed sparse rows: values, `col_indices`, `row_ptr` (nrows + 1).
        Csr => "csr": "compressed sparse rows (matrices only)",
        /// Compressed sparse columns: values, `row_indices`, `col_ptr` (ncols + 1).
        Csc => "csc": "compressed sparse columns (matrices only)",
        /// Compressed sparse fibres: a tree of `rank` compressed levels
        /// (`pos_L`, `crd_L`), the dimensions in `mode_order`.
        Csf => "csf": "compressed sparse fibres (rank 3 and up; levels in --mode-order)",
    }
}

impl OutputLayout {
    /// The Hurray layout tag: the one place the sparse layouts' tags are
    /// written (`crate::layout`'s table and `crate::hurray`'s constants
    /// take them from here).
    pub const fn tag(self) -> u8 {
        match self {
            OutputLayout::Coo => 0x06,
            OutputLayout::Csr => 0x07,
            OutputLayout::Csc => 0x08,
            OutputLayout::Csf => 0x09,
        }
    }

    /// The layout of a Hurray layout tag we write (COO, CSR, CSC, CSF).
    pub fn from_tag(tag: u8) -> Option<OutputLayout> {
        use crate::vocab::Vocabulary;
        OutputLayout::TERMS
            .iter()
            .map(|t| t.value)
            .find(|l| l.tag() == tag)
    }

    /// CSR or CSC: a rank-2 layout with a pointer buffer.
    pub fn is_compressed(self) -> bool {
        matches!(self, OutputLayout::Csr | OutputLayout::Csc)
    }

    /// The dimension whose index is compressed into the pointer buffer
    /// (the "major" one): 0 for COO and CSR, 1 for CSC. Entries are stored
    /// in increasing order of (major index, other index).
    pub fn major_dim(self) -> usize {
        usize::from(self == OutputLayout::Csc)
    }

    /// Refuse a shape this layout cannot hold (CSR and CSC are rank 2
    /// only, CSF rank 3 and up).
    pub fn check_rank(self, rank: usize) -> Result<()> {
        if self.is_compressed() && rank != 2 {
            return Err(Error::InvalidOptions(format!(
                "layout {self} holds matrices only (rank 2); the tensor has rank {rank}: use the coo layout"
            )));
        }
        if self == OutputLayout::Csf && rank < 3 {
            return Err(Error::InvalidOptions(format!(
                "layout csf holds tensors of rank 3 and up (the Hurray spec); the tensor has rank {rank}: use csr, csc or coo"
            )));
        }
        Ok(())
    }

    /// Refuse a mode order given to a layout other than CSF.
    fn check_mode_order_use(self, mode_order: Option<&[usize]>) -> Result<()> {
        if mode_order.is_some() && self != OutputLayout::Csf {
            return Err(Error::InvalidOptions(format!(
                "a mode order is a CSF option; the layout is {self}"
            )));
        }
        Ok(())
    }

    /// Refuse a rank this layout cannot hold ([`OutputLayout::check_rank`]),
    /// a mode order given to another layout than CSF, or one that is not a
    /// permutation of the dimensions.
    pub fn check_layout(self, rank: usize, mode_order: Option<&[usize]>) -> Result<()> {
        self.check_mode_order_use(mode_order)?;
        self.check_rank(rank)?;
        if let Some(m) = mode_order {
            let order: Vec<u32> = m.iter().map(|&d| d.min(u32::MAX as usize) as u32).collect();
            if let Err((level, why)) = check_mode_order(&order, rank) {
                return Err(Error::InvalidOptions(format!(
                    "mode order {m:?} is not a permutation of the {rank} dimensions (level {level}: {why})"
                )));
            }
        }
        Ok(())
    }

    /// The spec's names of the layout's buffers, in buffer order (the
    /// checksums' KV keys and `info` name them so).
    pub fn buffer_names(self) -> &'static [&'static str] {
        match self {
            OutputLayout::Coo => &["values", "indices"],
            OutputLayout::Csr => &["values", "col_indices", "row_ptr"],
            OutputLayout::Csc => &["values", "row_indices", "col_ptr"],
            // Rank 64 at most: a tensor of rank r uses the first 2 r + 1.
            OutputLayout::Csf => &CSF_BUFFER_NAMES,
        }
    }

    /// Whether a tensor of this layout may carry a shard section (be a
    /// member of a partition composite): the Hurray spec forbids it on CSF.
    pub fn may_shard(self) -> bool {
        self != OutputLayout::Csf
    }

    /// One line on how the layout stores its entries (`info`'s words).
    pub fn description(self) -> &'static str {
        match self {
            OutputLayout::Coo => "COO, sorted by coordinate (row-major), no duplicates",
            OutputLayout::Csr => {
                "CSR (compressed rows: row_ptr, col_indices, values; columns increase within each row)"
            }
            OutputLayout::Csc => {
                "CSC (compressed columns: col_ptr, row_indices, values; rows increase within each column)"
            }
            OutputLayout::Csf => {
                "CSF (compressed fibres: pos and crd per level, in the mode order; coordinates increase within each fibre)"
            }
        }
    }

    /// Buffers of a tensor of rank `rank`: values and indices (COO);
    /// values, minor indices and pointers (CSR, CSC); values and a
    /// `pos`/`crd` pair per level (CSF).
    pub fn buffer_count(self, rank: usize) -> usize {
        match self {
            OutputLayout::Coo => 2,
            OutputLayout::Csr | OutputLayout::Csc => 3,
            OutputLayout::Csf => 2 * rank + 1,
        }
    }

    /// The dimensions in storage order: `mode_order` for CSF (identity
    /// when `None`), column then row for CSC, else `0..rank`. Entries are
    /// stored in increasing order of their index tuple taken in this order.
    pub fn storage_order(self, rank: usize, mode_order: Option<&[usize]>) -> Vec<usize> {
        // An order that is no permutation is refused by
        // `OutputLayout::check_layout`; here it reads as the identity.
        let permutation = |m: &[usize]| {
            let m: Vec<u32> = m.iter().map(|&d| d.min(u32::MAX as usize) as u32).collect();
            check_mode_order(&m, rank).is_ok()
        };
        match (self, mode_order) {
            (OutputLayout::Csf, Some(m)) if permutation(m) => m.to_vec(),
            (OutputLayout::Csc, _) if rank == 2 => vec![1, 0],
            _ => (0..rank).collect(),
        }
    }
}

/// Whether `order` is a permutation of `0..rank`; the first level that
/// breaks it otherwise, and why.
pub fn check_mode_order(order: &[u32], rank: usize) -> std::result::Result<(), (usize, String)> {
    let mut seen = vec![false; rank];
    if order.len() != rank {
        return Err((0, format!("{} levels for rank {rank}", order.len())));
    }
    for (level, &d) in order.iter().enumerate() {
        let Some(s) = seen.get_mut(d as usize) else {
            return Err((level, format!("dimension {d} is not below the rank {rank}")));
        };
        if *s {
            return Err((level, format!("dimension {d} is stored at two levels")));
        }
        *s = true;
    }
    Ok(())
}

crate::vocab::vocabulary! {
    /// What to do with NaN and infinite contributions to a float tensor.
    #[derive(Default)]
    pub enum NonFinitePolicy ("non-finite policy") {
        /// Keep them (they propagate through sums as IEEE arithmetic says).
        #[default]
        Keep => "keep": "keep NaN and infinities (they propagate; the default)",
        /// Refuse NaN contributions with an error naming the contribution.
        RejectNan => "reject-nan" | "nan": "refuse NaN contributions",
        /// Refuse NaN and infinite contributions.
        RejectNonFinite => "reject-non-finite" | "non-finite": "refuse NaN and infinite contributions",
    }
}

/// Default memory budget: 256 MiB.
pub const DEFAULT_MEMORY_BUDGET: u64 = 256 << 20;

/// Options of an assembly.
#[derive(Clone, Debug)]
pub struct AssembleOptions {
    /// Bytes that the assembler's buffers may use in all: ingest chunks,
    /// sort scratch, in-memory runs, spill and merge buffers, output
    /// buffers. Default [`DEFAULT_MEMORY_BUDGET`].
    pub memory_budget: u64,
    /// Where spill runs go (a private subdirectory is made there). Default:
    /// the system temporary directory (`TMPDIR`).
    pub temp_dir: Option<PathBuf>,
    /// Cores the assembly may keep busy. Default: the number of cores. It
    /// does not limit the pushers: any number may be alive at once, and
    /// they share the budget (the first `threads` alive keep a chunk of
    /// their own, see [`crate::Builder::pusher`]). `1` runs everything
    /// on the calling threads: pushers sort their own chunks and `finish`
    /// merges and writes on one thread (text input is parsed there too).
    /// `N > 1` starts N sorter threads beside the pushers, a writer thread
    /// beside the merge in `finish`, and parses text on N threads. The
    /// output bytes are the same for every value.
    pub threads: usize,
    /// How duplicates combine. Default: sum.
    pub duplicates: DuplicatePolicy,
    /// Float sums are exact: the correctly rounded sum of all contributions,
    /// independent of order, threads and budget (default `true`). `false`
    /// adds in arrival order with plain f64 arithmetic: faster, but the
    /// last bits of a sum then depend on how contributions were grouped.
    pub exact_sums: bool,
    /// Drop entries whose combined value is zero. Default: keep them.
    pub drop_zeros: bool,
    /// Skip contributions with a negative index instead of refusing them
    /// (PETSc's `MatSetValues` convention; sfepy marks removed Dirichlet
    /// dofs so). Only signed indices can be negative: the `*_signed`
    /// pushes of [`crate::Builder`] and [`crate::builder::Pusher`], and the front
    /// ends' signed arrays. Skipped contributions are counted in
    /// [`crate::builder::Summary::skipped_negative`]. Default `false`: a negative
    /// index is an error naming the contribution.
    pub skip_negative: bool,
    /// NaN / infinity policy for float contributions. Default: keep.
    pub non_finite: NonFinitePolicy,
    /// Layout of the tensor written. Default COO; CSR and CSC need rank 2
    /// (checked by `Builder::new`).
    pub layout: OutputLayout,
    /// CSF: the dimension stored at each level, outermost first (a
    /// permutation of `0..rank`); `None` is the identity, the spec's
    /// default. Only with [`OutputLayout::Csf`].
    pub mode_order: Option<Vec<usize>>,
    /// Name of the tensor in the file. Default "coo".
    pub tensor_name: String,
    /// Upper bound on runs merged at once; the budget may lower it (each
    /// open run holds a block buffer). Default 512: runs share a few spill
    /// files, so the fan-in costs no file descriptors, and one wide pass
    /// beats rewriting most of the data in narrower passes (1e9 FE at
    /// 1 GiB: 240 runs, 5.7 GB spilled in one pass against 10.1 GB in
    /// four at 64).
    pub max_fan_in: usize,
    /// How many contributions are coming, when the caller knows (an input
    /// file's record count, an element loop's total); default `None`.
    /// Planning only: when runs of that many would not fit in the budget,
    /// the ingest chunks are made longer (up to 128 MiB instead of 32), so
    /// fewer runs reach the final merge. Any value is safe: a wrong one
    /// only changes speed, never the memory bound or the output bytes.
    pub expected_contributions: Option<u64>,
    /// Where a [`crate::Builder`]'s `finish` (and a conversion) says how
    /// far it has come: clone it before, read it from another thread
    /// ([`crate::progress::Progress::now`]) for a progress bar.
    pub progress: crate::progress::Progress,
    /// A [`crate::Builder`] keeps its contributions unsorted while they
    /// fit the budget and `finish` assembles them with the in-memory
    /// kernel (default `true`); `false` sorts every chunk into a run as
    /// it fills, as for work larger than the budget. The output bytes are
    /// the same either way: tests and benchmarks compare the two paths.
    #[doc(hidden)]
    pub in_memory_kernel: bool,
    /// The input records a range of the parallel final merge takes
    /// (`None`, the default: as many as the budget allows, at least 16384);
    /// `Some(0)` keeps the final merge on one thread. Tests set it to force
    /// many small ranges or none; the output bytes are the same.
    #[doc(hidden)]
    pub range_records: Option<u64>,
    /// File operations (fault injection in tests; with the `internals`
    /// feature only, leave it at its default otherwise).
    #[doc(hidden)]
    pub io: IoCtx,
}

impl Default for AssembleOptions {
    fn default() -> Self {
        AssembleOptions {
            memory_budget: DEFAULT_MEMORY_BUDGET,
            temp_dir: None,
            threads: default_threads(),
            duplicates: DuplicatePolicy::Sum,
            exact_sums: true,
            drop_zeros: false,
            skip_negative: false,
            non_finite: NonFinitePolicy::Keep,
            layout: OutputLayout::Coo,
            mode_order: None,
            tensor_name: "coo".to_string(),
            max_fan_in: 512,
            expected_contributions: None,
            progress: crate::progress::Progress::new(),
            in_memory_kernel: true,
            range_records: None,
            io: IoCtx::new(),
        }
    }
}

/// The cores this process may use, asked once: std reads the cgroup quota
/// files on every call (tens of microseconds, more than a small assembly).
fn default_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

/// The largest `threads` an assembly takes.
const MAX_THREADS: usize = 1024;

/// The error for a thread count outside `1..=1024`, also for front ends
/// whose callers can pass a negative one.
#[doc(hidden)]
pub fn threads_out_of_range(got: impl std::fmt::Display) -> Error {
    Error::InvalidOptions(format!("threads must be in 1..={MAX_THREADS}, got {got}"))
}

impl AssembleOptions {
    /// The folder spill files go in (`temp_dir`, else the system's), once
    /// checked to be an existing folder this process may write in: an
    /// [`Error::Io`] naming the role and the path otherwise (a missing one
    /// is `NotFound`). Checked when a builder starts, and by front ends
    /// whose faster paths never spill, so a missing folder is the same
    /// error whichever path serves the call.
    pub fn checked_temp_dir(&self) -> Result<PathBuf> {
        let base = self.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
        crate::fs::output::check_writable_dir(
            &self.io,
            &base,
            "temp directory (temp_dir, --temp-dir)",
        )?;
        Ok(base)
    }

    /// Check the options that do not depend on the tensor.
    pub fn validate(&self) -> Result<()> {
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(threads_out_of_range(self.threads));
        }
        if self.max_fan_in < 2 {
            return Err(Error::InvalidOptions(format!(
                "max_fan_in must be at least 2, got {}",
                self.max_fan_in
            )));
        }
        if self.tensor_name.is_empty() || self.tensor_name.len() > u16::MAX as usize {
            return Err(Error::InvalidOptions(
                "tensor name must be 1 to 65535 bytes long".into(),
            ));
        }
        self.layout.check_mode_order_use(self.mode_order.as_deref())
    }

    /// [`OutputLayout::check_layout`] of this layout and mode order.
    pub fn check_layout(&self, rank: usize) -> Result<()> {
        self.layout.check_layout(rank, self.mode_order.as_deref())
    }

    /// The dimensions in the order entries are stored
    /// ([`OutputLayout::storage_order`]).
    pub fn storage_order(&self, rank: usize) -> Vec<usize> {
        self.layout.storage_order(rank, self.mode_order.as_deref())
    }
}

/// A CSF tensor's buffers: `values`, then `pos_L` and `crd_L` per level.
const CSF_BUFFER_NAMES: [&str; 129] = [
    "values", "pos_0", "crd_0", "pos_1", "crd_1", "pos_2", "crd_2", "pos_3", "crd_3", "pos_4",
    "crd_4", "pos_5", "crd_5", "pos_6", "crd_6", "pos_7", "crd_7", "pos_8", "crd_8", "pos_9",
    "crd_9", "pos_10", "crd_10", "pos_11", "crd_11", "pos_12", "crd_12", "pos_13", "crd_13",
    "pos_14", "crd_14", "pos_15", "crd_15", "pos_16", "crd_16", "pos_17", "crd_17", "pos_18",
    "crd_18", "pos_19", "crd_19", "pos_20", "crd_20", "pos_21", "crd_21", "pos_22", "crd_22",
    "pos_23", "crd_23", "pos_24", "crd_24", "pos_25", "crd_25", "pos_26", "crd_26", "pos_27",
    "crd_27", "pos_28", "crd_28", "pos_29", "crd_29", "pos_30", "crd_30", "pos_31", "crd_31",
    "pos_32", "crd_32", "pos_33", "crd_33", "pos_34", "crd_34", "pos_35", "crd_35", "pos_36",
    "crd_36", "pos_37", "crd_37", "pos_38", "crd_38", "pos_39", "crd_39", "pos_40", "crd_40",
    "pos_41", "crd_41", "pos_42", "crd_42", "pos_43", "crd_43", "pos_44", "crd_44", "pos_45",
    "crd_45", "pos_46", "crd_46", "pos_47", "crd_47", "pos_48", "crd_48", "pos_49", "crd_49",
    "pos_50", "crd_50", "pos_51", "crd_51", "pos_52", "crd_52", "pos_53", "crd_53", "pos_54",
    "crd_54", "pos_55", "crd_55", "pos_56", "crd_56", "pos_57", "crd_57", "pos_58", "crd_58",
    "pos_59", "crd_59", "pos_60", "crd_60", "pos_61", "crd_61", "pos_62", "crd_62", "pos_63",
    "crd_63",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse() {
        for p in ["sum", "min", "max", "last", "error"] {
            assert_eq!(p.parse::<DuplicatePolicy>().unwrap().to_string(), p);
        }
        assert!("avg".parse::<DuplicatePolicy>().is_err());
    }

    #[test]
    fn layout_tags_round_trip() {
        for l in [
            OutputLayout::Coo,
            OutputLayout::Csr,
            OutputLayout::Csc,
            OutputLayout::Csf,
        ] {
            assert_eq!(OutputLayout::from_tag(l.tag()), Some(l));
            assert_eq!(crate::layout::Layout::from(l).tag(), l.tag());
        }
        assert_eq!(OutputLayout::from_tag(0x0B), None);
    }

    #[test]
    fn layouts_parse_and_check_rank() {
        for l in ["coo", "csr", "csc"] {
            assert_eq!(l.parse::<OutputLayout>().unwrap().to_string(), l);
        }
        assert_eq!("CSR".parse::<OutputLayout>().unwrap(), OutputLayout::Csr);
        assert!("dense".parse::<OutputLayout>().is_err());
        assert!(OutputLayout::Coo.check_rank(3).is_ok());
        assert!(OutputLayout::Csr.check_rank(2).is_ok());
        let e = OutputLayout::Csc.check_rank(3).unwrap_err().to_string();
        assert!(e.contains("rank 3") && e.contains("csc"), "{e}");
        assert_eq!(OutputLayout::Csc.major_dim(), 1);
    }
}
