//! Nothing to use: this crate only pins features (see its Cargo.toml).
