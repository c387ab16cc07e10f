//! Empty: present so that the `[build-dependencies]` pin takes part in
//! the build (see Cargo.toml).
fn main() {}
