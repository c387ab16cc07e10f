//! The C ABI is frozen where it was released: every constant, enum value,
//! function prototype and struct field that a released header
//! (`capi/abi/api-*.txt`, one per released `COO_API_VERSION`) declared
//! must be in `include/coo_assembler.h` with the same value, prototype or
//! place. New names may be added (functions anywhere, struct fields only
//! at the end, enum values only with numbers not yet taken); nothing
//! released may change or go, since compiled C and Fortran programs rely
//! on it without a warning.
//!
//! A baseline file lists one item per line:
//! `const NAME = V`, `enum TYPE NAME = V`, `fn NAME PROTOTYPE`,
//! `field STRUCT INDEX DECLARATION`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The header's C text without comments and preprocessor lines but the
/// `#define`s, whitespace collapsed.
fn strip(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("/*") {
        out.push_str(&rest[..i]);
        rest = match rest[i..].find("*/") {
            Some(j) => &rest[i + j + 2..],
            None => "",
        };
    }
    out.push_str(rest);
    out.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `a * b`, `a*b` and `a *b` all as `a *b`; one space between words.
fn normalize(decl: &str) -> String {
    let words = decl.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut s = words
        .replace(" *", "*")
        .replace('*', " *")
        .replace("* ", "*");
    s = s.replace("( ", "(").replace(" )", ")").replace(" ,", ",");
    s.replace(",", ", ").replace(",  ", ", ")
}

/// Every item of a header, as baseline lines.
fn items(header: &str) -> BTreeSet<String> {
    let text = strip(header);
    let mut out = BTreeSet::new();
    let mut body = String::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("#define ") {
            let mut it = rest.split_whitespace();
            if let (Some(n), Some(v)) = (it.next(), it.next()) {
                if n.starts_with("COO_") && v.parse::<i64>().is_ok() {
                    out.insert(format!("const {n} = {v}"));
                }
            }
        } else if !t.starts_with('#') && !t.starts_with("extern \"C\"") {
            body.push_str(t);
            body.push(' ');
        }
    }
    // Top-level declarations end at `;` outside braces.
    let mut decls = Vec::new();
    let (mut depth, mut cur) = (0i32, String::new());
    for c in body.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        cur.push(c);
        if c == ';' && depth == 0 {
            decls.push(cur.trim().to_string());
            cur.clear();
        }
    }
    for d in decls {
        if let Some(rest) = d.strip_prefix("typedef enum") {
            let (open, close) = (rest.find('{').unwrap(), rest.rfind('}').unwrap());
            let name = rest[close + 1..].trim_end_matches(';').trim();
            let mut next = 0i64;
            for v in rest[open + 1..close]
                .split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
            {
                let key = match v.split_once('=') {
                    Some((k, n)) => {
                        next = n.trim().parse().expect("an enum value");
                        k.trim()
                    }
                    None => v,
                };
                out.insert(format!("enum {name} {key} = {next}"));
                next += 1;
            }
        } else if let Some(rest) = d.strip_prefix("typedef struct") {
            let (Some(open), Some(close)) = (rest.find('{'), rest.rfind('}')) else {
                continue; // an opaque handle
            };
            let name = rest[close + 1..].trim_end_matches(';').trim();
            let fields = rest[open + 1..close]
                .split(';')
                .map(str::trim)
                .filter(|f| !f.is_empty());
            for (i, f) in fields.enumerate() {
                out.insert(format!("field {name} {i} {}", normalize(f)));
            }
        } else if d.starts_with("typedef") {
            continue;
        } else if let Some(paren) = d.find('(') {
            let proto = normalize(d.trim_end_matches(';'));
            let name = d[..paren]
                .rsplit(|c: char| c.is_whitespace() || c == '*')
                .next()
                .unwrap_or("");
            out.insert(format!("fn {name} {proto}"));
        }
    }
    out
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The items of the baselines in capi/abi/ that `header` lacks.
fn broken(header: &str) -> Vec<String> {
    let now = items(header);
    let mut baselines: Vec<_> = std::fs::read_dir(root().join("abi"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    baselines.sort();
    assert!(!baselines.is_empty(), "no baseline in capi/abi/");
    let mut out = Vec::new();
    for b in &baselines {
        let text = std::fs::read_to_string(b).unwrap();
        for line in text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            if !now.contains(line) && !line.starts_with("const COO_API_VERSION ") {
                out.push(format!(
                    "{}: {line}",
                    b.file_name().unwrap().to_string_lossy()
                ));
            }
        }
    }
    out
}

fn header() -> String {
    std::fs::read_to_string(root().join("../include/coo_assembler.h")).unwrap()
}

#[test]
fn released_abi_is_unchanged() {
    let broken = broken(&header());
    assert!(
        broken.is_empty(),
        "released C ABI items changed or removed (compiled programs would break; \
         add a new name with a new number instead):\n  {}",
        broken.join("\n  ")
    );
}

/// The check sees a renumbered value, a removed function, a changed
/// prototype and a reordered struct.
#[test]
fn the_check_sees_breaking_changes() {
    let h = header();
    for (from, to) in [
        ("COO_F64 = 3,", "COO_F64 = 4,"),
        ("#define COO_ERR_IO -9", "#define COO_ERR_IO -90"),
        ("int coo_builder_push(", "int coo_builder_push_one("),
        ("double value);", "float value);"),
        ("uint64_t memory_budget;", "uint64_t memory_budget_bytes;"),
    ] {
        assert!(h.contains(from), "{from}");
        let changed = h.replacen(from, to, 1);
        assert!(!broken(&changed).is_empty(), "{from} -> {to} not caught");
    }
}

/// The header's `COO_API_VERSION` is at least every baseline's
/// (`api-N.txt` is version N as released).
#[test]
fn the_version_is_not_older_than_a_release() {
    let now = items(&header());
    let version: u32 = now
        .iter()
        .find_map(|l| l.strip_prefix("const COO_API_VERSION = "))
        .expect("COO_API_VERSION in the header")
        .parse()
        .unwrap();
    for e in std::fs::read_dir(root().join("abi")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if let Some(n) = name
            .strip_prefix("api-")
            .and_then(|n| n.strip_suffix(".txt"))
        {
            let released: u32 = n.parse().unwrap();
            assert!(
                version >= released,
                "COO_API_VERSION {version} is older than {name}"
            );
        }
    }
}

/// Within an enum, every name has a number of its own.
#[test]
fn enum_numbers_are_unique() {
    let header = header();
    let mut seen: BTreeMap<(String, i64), String> = BTreeMap::new();
    for line in items(&header) {
        let Some(rest) = line.strip_prefix("enum ") else {
            continue;
        };
        let mut it = rest.split_whitespace();
        let (ty, name, _, v) = (
            it.next().unwrap(),
            it.next().unwrap(),
            it.next(),
            it.next().unwrap(),
        );
        let v: i64 = v.parse().unwrap();
        if let Some(other) = seen.insert((ty.to_string(), v), name.to_string()) {
            panic!("{ty}: {name} and {other} are both {v}");
        }
    }
}

/// The header's enums spell out their numbers, so that no reordering
/// of the Rust source renumbers them.
#[test]
fn enum_values_are_explicit() {
    let text = strip(&header());
    let mut in_enum = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with("typedef enum") {
            in_enum = true;
        } else if line.starts_with('}') {
            in_enum = false;
        } else if in_enum && line.starts_with("COO_") {
            assert!(line.contains('='), "enum value without its number: {line}");
        }
    }
}

/// The parser reads what the baselines were written from.
#[test]
fn the_parser_reads_declarations() {
    let h = "#define COO_A 3\n/* c */ typedef enum {\n COO_X,\n COO_Y = 5,\n COO_Z,\n} e;\n\
             typedef struct {\n uint32_t size;\n const char *name;\n} s;\n\
             typedef struct h h;\nint coo_f(h *p,\n const int64_t* idx);\n";
    let got = items(h);
    let want: BTreeSet<String> = [
        "const COO_A = 3",
        "enum e COO_X = 0",
        "enum e COO_Y = 5",
        "enum e COO_Z = 6",
        "field s 0 uint32_t size",
        "field s 1 const char *name",
        "fn coo_f int coo_f(h *p, const int64_t *idx)",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, want);
}

/// `COO_ABI_DUMP=<header> cargo test -p coo-assembler-capi --test suite -- abi::dump`
/// prints a header's items: how a release's baseline file is made.
#[test]
fn dump() {
    if let Some(path) = std::env::var_os("COO_ABI_DUMP") {
        let header = std::fs::read_to_string(path).unwrap();
        // The version itself moves on with every release.
        for line in items(&header)
            .into_iter()
            .filter(|l| !l.starts_with("const COO_API_VERSION "))
        {
            println!("{line}");
        }
    }
}
