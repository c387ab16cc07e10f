//! What the tests of coo-assembler's crates share, in one place:
//!
//! - hand-built Hurray files ([`build`], [`tensor`] and the hooks that
//!   tamper with descriptors and index entries), at the crate root;
//! - [`Rng`], the one pseudo-random generator of the tests;
//! - [`min_budget`], the smallest memory budget a builder accepts, which
//!   the out-of-core tests use to force spills and merge passes;
//! - [`Cli`], the one runner of the `coo-assembler` command;
//! - with feature `reference`, [`reference`] (the reference
//!   implementation, hurray-core / hurray-io, driven synchronously) and
//!   [`mixed`] (files with dense tensors written by it).
//!
//! A test crate names it `common` (`use coo_assembler_testkit as common;`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cli;
mod files;
#[cfg(feature = "reference")]
pub mod mixed;
#[cfg(feature = "reference")]
pub mod reference;
mod rng;

pub use cli::{Cli, Ran};
pub use files::*;
pub use rng::Rng;

use coo_assembler::{AssembleOptions, Builder, DType, Error};

/// The smallest memory budget a [`Builder`] of `shape` and `dtype` accepts
/// with `threads` threads: the out-of-core tests run at it, so that runs
/// spill and merges take several passes.
pub fn min_budget(shape: &[u64], dtype: DType, threads: usize) -> u64 {
    let opts = AssembleOptions {
        memory_budget: 1,
        threads,
        ..AssembleOptions::default()
    };
    match Builder::new(shape, dtype, opts) {
        Err(Error::BudgetTooSmall { minimum, .. }) => minimum,
        other => panic!("expected BudgetTooSmall, got {:?}", other.err()),
    }
}

/// Contribution `i` of a seeded stream over a matrix of `shape` (at least
/// 400 x 420): a clustered coordinate (many duplicates) and a value whose
/// magnitude spans 40 orders, so that any inexact sum shows.
pub fn clustered(i: u64, shape: [u64; 2]) -> ([u64; 2], f64) {
    let mut z = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    z = (z ^ (z >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z ^= z >> 29;
    let row = (z % 400) * (z % 3 + 1) % shape[0];
    let col = ((z >> 20) % 60 + row % 7 * 60) % shape[1];
    let mant = ((z >> 40) % 1_000_003) as f64 / 1_000_003.0 - 0.5;
    let exp = ((z >> 8) % 41) as i32 - 20;
    ([row, col], mant * 10f64.powi(exp))
}

/// A small seeded generator: each call `rnd(m)` gives a number in `0..m`
/// (m > 0), the same sequence for the same seed.
pub fn xorshift(mut seed: u64) -> impl FnMut(u64) -> u64 {
    move |m| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % m
    }
}

/// The program `name` on the `PATH`, if there is one (tests that need
/// `mpirun`, `cc` or `gfortran` skip, saying so, without it).
pub fn find_program(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The names in `dir`, sorted (what a run left behind).
pub fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `p` as text, for a command line (test paths are UTF-8).
pub fn s(p: &std::path::Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}
