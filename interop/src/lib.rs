//! Nothing here: the crate is its tests (`tests/`), which check
//! coo-assembler against the Hurray reference implementation.
