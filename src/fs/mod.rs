//! The file system: [`ctx`] performs every file operation (and injects
//! faults in tests), [`output`] is the one atomic output every writer uses
//! (and owns the rule that an output is not an input), [`names`] owns the
//! formats of the temporary names, and [`sweep`] removes what killed runs
//! left behind.

internal_mod!(ctx);
internal_mod!(names);
internal_mod!(output);
internal_mod!(sweep);

pub use ctx::IoCtx;
