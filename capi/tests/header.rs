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

/// Every constant of the header: `#define NAME VALUE` and the variants of
/// its enums (`NAME = VALUE,`: the header spells every number out).
fn header_constants(h: &str) -> std::collections::HashMap<String, i64> {
    let mut out = std::collections::HashMap::new();
    let mut in_enum: Option<i64> = None;
    for line in h.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("#define ") {
            let mut it = rest.split_whitespace();
            if let (Some(n), Some(v)) = (it.next(), it.next()) {
                if let Ok(v) = v.parse::<i64>() {
                    out.insert(n.to_string(), v);
                }
            }
        } else if t == "typedef enum {" {
            in_enum = Some(0);
        } else if t.starts_with('}') {
            in_enum = None;
        } else if let Some(next) = in_enum.as_mut() {
            if let Some(item) = t.strip_suffix(',') {
                let (name, value) = match item.split_once('=') {
                    Some((n, v)) => (n.trim(), v.trim().parse().ok()),
                    None => (item, None),
                };
                if name.starts_with("COO_") {
                    let v = value.unwrap_or(*next);
                    out.insert(name.to_string(), v);
                    *next = v + 1;
                }
            }
        }
    }
    out
}

/// The Fortran module's `parameter` constants, continuation lines joined.
fn fortran_constants(src: &str) -> Vec<(String, i64)> {
    let joined = src.replace("&\n", " ");
    let mut out = Vec::new();
    for line in joined.lines() {
        if !line.contains("parameter") || !line.contains("::") {
            continue;
        }
        let decls = line.split("::").nth(1).unwrap_or("");
        for d in decls.split(',') {
            let mut kv = d.split('=');
            if let (Some(k), Some(v)) = (kv.next(), kv.next()) {
                let k = k.trim();
                if k.starts_with("COO_") {
                    if let Ok(v) = v.trim().parse::<i64>() {
                        out.push((k.to_string(), v));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn fortran_constants_are_the_headers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let h = std::fs::read_to_string(root.join("include/coo_assembler.h")).unwrap();
    let f = std::fs::read_to_string(root.join("fortran/coo_assembler.f90")).unwrap();
    let c = header_constants(&h);
    let fc = fortran_constants(&f);
    assert!(fc.len() > 40, "only {} Fortran constants found", fc.len());
    for (name, v) in &fc {
        assert_eq!(
            c.get(name),
            Some(v),
            "Fortran {name} = {v}, header {:?}",
            c.get(name)
        );
    }
    // Every status code and enum value of the header is in the module too.
    for name in c.keys() {
        if name.starts_with("COO_ERR_")
            || name.starts_with("COO_DUP_")
            || name.starts_with("COO_LAYOUT_")
        {
            assert!(
                fc.iter().any(|(n, _)| n == name),
                "{name} missing from the Fortran module"
            );
        }
    }
}
