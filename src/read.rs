//! The memory-mapped reader (to be written).
