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
/// its enums (numbered from 0, as cbindgen writes them).
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
            if let Some(name) = t.strip_suffix(',') {
                if name.starts_with("COO_") {
                    out.insert(name.to_string(), *next);
                    *next += 1;
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

/// The C enums' codes are the positions in the library's tables: every
/// constant the header has names the value at its position (a value added
/// to a library table later is reachable from C by name, through
/// `coo_options_set` and `coo_parse_name`, before it gets a constant).
#[test]
fn enum_codes_are_the_library_tables_order() {
    use coo_assembler::{DType, DuplicatePolicy, NonFinitePolicy, OutputLayout, Vocabulary};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let c =
        header_constants(&std::fs::read_to_string(root.join("include/coo_assembler.h")).unwrap());
    let mut seen = 0;
    let mut check = |prefix: &str, names: Vec<&str>| {
        for (i, n) in names.iter().enumerate() {
            let key = format!("{prefix}{}", n.to_ascii_uppercase().replace('-', "_"));
            if let Some(&v) = c.get(&key) {
                assert_eq!(v, i as i64, "{key}");
                seen += 1;
            }
        }
    };
    check("COO_", DType::TERMS.iter().map(|t| t.name).collect());
    check(
        "COO_DUP_",
        DuplicatePolicy::TERMS.iter().map(|t| t.name).collect(),
    );
    check(
        "COO_",
        NonFinitePolicy::TERMS.iter().map(|t| t.name).collect(),
    );
    check(
        "COO_LAYOUT_",
        OutputLayout::TERMS.iter().map(|t| t.name).collect(),
    );
}
