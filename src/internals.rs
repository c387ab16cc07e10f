//! The parts behind the public API, public with the feature `internals`
//! for the front ends (`cli`, `capi`, `python`), the MPI crate, the
//! benches and the tests that drive them directly. Not a stable API: any
//! item may change in any release.

#[path = "assemble/mod.rs"]
pub mod assemble;
#[path = "budget.rs"]
pub mod budget;
#[path = "codec.rs"]
pub mod codec;
#[path = "composite.rs"]
pub mod composite;
#[path = "fs/mod.rs"]
pub mod fs;
#[path = "hurray/mod.rs"]
pub mod hurray;
#[path = "stats.rs"]
pub mod stats;
