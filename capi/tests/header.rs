//! The committed header is what cbindgen makes from the current source.

use std::collections::HashMap;
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
         COO_UPDATE_HEADER=1 cargo test --release -p coo-assembler-capi --test suite -- header::\n\
         and commit it"
    );
}

/// Every constant of the header: `#define NAME VALUE` and the variants of
/// its enums (`NAME = VALUE,`: the header spells every number out).
pub(crate) fn header_constants(h: &str) -> HashMap<String, i64> {
    let mut out = HashMap::new();
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

/// The header's constant for the library name `name` (`COO_<PREFIX><NAME>`).
pub(crate) fn constant_of(c: &HashMap<String, i64>, prefix: &str, name: &str) -> (String, i64) {
    let key = format!("{prefix}{}", name.to_ascii_uppercase().replace('-', "_"));
    match c.get(&key) {
        Some(&v) => (key, v),
        None => panic!("{name} has no constant {key} in the header"),
    }
}

/// Every value of a library table has a constant in the header, the
/// numbers unique within its enum.
fn check_table<T: coo_assembler::vocab::Vocabulary>(c: &HashMap<String, i64>, prefix: &str) {
    let mut codes: Vec<(i64, String)> = T::TERMS
        .iter()
        .map(|t| {
            let (key, v) = constant_of(c, prefix, t.name);
            (v, key)
        })
        .collect();
    codes.sort();
    for w in codes.windows(2) {
        assert_ne!(
            w[0].0,
            w[1].0,
            "{}: {} and {} share a code",
            T::WHAT,
            w[0].1,
            w[1].1
        );
    }
}

/// Every value of the library's tables has a constant of its own in the
/// header: a value added to a library table fails here until it gets a C
/// code. And every error kind's status (`ErrorKind::c_status`, the table
/// the C layer maps errors by) is the header's `COO_ERR_<KIND>`.
#[test]
fn library_tables_have_their_header_constants() {
    use coo_assembler::options::{DuplicatePolicy, NonFinitePolicy, OutputLayout};
    use coo_assembler::{DType, ErrorKind};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let h = std::fs::read_to_string(root.join("include/coo_assembler.h")).unwrap();
    let c = header_constants(&h);
    check_table::<DType>(&c, "COO_");
    check_table::<DuplicatePolicy>(&c, "COO_DUP_");
    check_table::<NonFinitePolicy>(&c, "COO_");
    check_table::<OutputLayout>(&c, "COO_LAYOUT_");
    for k in ErrorKind::ALL {
        let (key, v) = constant_of(&c, "COO_ERR_", k.name());
        assert_eq!(v, i64::from(k.c_status()), "{key}");
    }
    // Every error the library makes maps to a named status.
    for e in coo_assembler::Error::samples() {
        let code = i64::from(e.kind().c_status());
        assert!(
            c.iter()
                .any(|(n, &v)| n.starts_with("COO_ERR_") && v == code),
            "{e}: status {code} has no name"
        );
    }
}
