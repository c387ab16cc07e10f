//! Empty: present so that the `[build-dependencies]` pins take part in
//! every build (see Cargo.toml).
fn main() {}
