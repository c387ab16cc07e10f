//! The file system: [`ctx`] performs every file operation (and injects
//! faults in tests), [`names`] owns the formats of the temporary names, and
//! [`sweep`] removes what killed runs left behind.

internal_mod!(ctx);
internal_mod!(names);
internal_mod!(sweep);

pub use ctx::IoCtx;
