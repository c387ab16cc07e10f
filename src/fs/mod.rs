//! The file system: [`ctx`] performs every file operation (and injects
//! faults in tests), [`output`] is the one atomic output every writer uses
//! (and owns the rule that an output is not an input), [`names`] owns the
//! formats of the temporary names, and [`sweep`] removes what killed runs
//! left behind.

pub mod ctx;
pub mod names;
pub mod output;
pub mod sweep;

pub use ctx::IoCtx;
