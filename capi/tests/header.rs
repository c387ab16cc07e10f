//! The committed header is what cbindgen makes from the current source.

use std::path::Path;

#[test]
fn committed_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .expect("capi/cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let fresh = String::from_utf8(fresh).expect("header is UTF-8");
    let committed_path = crate_dir.join("../include/coo_assembler.h");
    if std::env::var_os("COO_UPDATE_HEADER").is_some() {
        std::fs::write(&committed_path, &fresh).expect("write include/coo_assembler.h");
        return;
    }
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    assert!(
        committed == fresh,
        "include/coo_assembler.h is stale: regenerate it with\n  \
         COO_UPDATE_HEADER=1 cargo test --release -p coo-assembler-capi --test header\n\
         and commit it"
    );
}
