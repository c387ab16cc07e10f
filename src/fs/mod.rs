//! The file system: [`ctx`] performs every file operation (and injects
//! faults in tests), [`output`] is the one atomic output every writer uses
//! (and owns the rule that an output is not an input), [`names`] owns the
//! formats of the temporary names, [`spill`] is the hashed temporary
//! file plans and refills spill to, and [`sweep`] removes what killed
//! runs left behind.

pub mod ctx;
pub mod names;
pub mod output;
pub mod spill;
pub mod sweep;

pub use ctx::IoCtx;
