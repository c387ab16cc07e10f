//! docs/architecture.md says the imports between the crate's top-level
//! modules form no cycle. This test reads `src/` and holds it to that, so
//! whoever adds a backward import finds out here, not in a review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The crate's source without comments and without its test modules.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level module names `code` refers to as `crate::name`.
fn referenced(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

fn walk(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, files);
        } else if p.extension().is_some_and(|x| x == "rs") {
            files.push(p);
        }
    }
}

#[test]
fn top_level_modules_import_each_other_in_one_direction_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        // The binary and the crate root are front and hub, not modules.
        if first == "bin" || first == "lib.rs" {
            continue;
        }
        let top = first.trim_end_matches(".rs").to_string();
        let code = code_of(&std::fs::read_to_string(&f).unwrap());
        let deps = graph.entry(top.clone()).or_default();
        deps.extend(referenced(&code).into_iter().filter(|m| *m != top));
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    assert!(
        modules.contains("assemble") && modules.contains("read"),
        "{modules:?}"
    );
    // Keep edges between modules only (drop macros and re-exports).
    for deps in graph.values_mut() {
        deps.retain(|d| modules.contains(d));
    }
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "an import cycle between top-level modules: {}",
            cycle.join(" -> ")
        );
    }
}

/// Whether `code` names `path` followed by something that ends a name
/// (`crate::assemble::run` but not `crate::assemble::runs`).
fn names(code: &str, path: &str) -> bool {
    code.match_indices(path).any(|(i, _)| {
        !code[i + path.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            && !code[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
    })
}

/// The files (and sub-folders) of every folder of `src/` import each
/// other in one direction only, so the flow reads one way inside a folder
/// too (issue 40: push -> batch -> kernel or runs -> merge -> write).
#[test]
fn the_files_of_each_folder_import_each_other_in_one_direction_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut folders = vec![src.clone()];
    let mut checked = 0;
    while let Some(dir) = folders.pop() {
        let rel: Vec<String> = dir
            .strip_prefix(&src)
            .unwrap()
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        // Siblings: the folder's files but its hub, and its sub-folders.
        let mut siblings: BTreeMap<String, Vec<std::path::PathBuf>> = BTreeMap::new();
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                folders.push(p.clone());
                let mut files = Vec::new();
                walk(&p, &mut files);
                siblings.insert(name, files);
            } else if p.extension().is_some_and(|x| x == "rs")
                && name != "mod"
                && name != "lib"
                && name != "main"
            {
                siblings.insert(name, vec![p]);
            }
        }
        // The top level is the other test's.
        if rel.is_empty() {
            continue;
        }
        let module = rel.join("::");
        let mut graph = Graph::new();
        for (name, files) in &siblings {
            let deps = graph.entry(name.clone()).or_default();
            for f in files {
                let code = code_of(&std::fs::read_to_string(f).unwrap());
                // `super::` from a file of this folder or a sub-folder's
                // hub, `super::super::` from a file a folder down.
                let depth = f.strip_prefix(&dir).unwrap().components().count();
                let hub = f.file_name().is_some_and(|n| n == "mod.rs");
                let up = "super::".repeat(depth - usize::from(hub));
                for other in siblings.keys().filter(|o| *o != name) {
                    let by_crate = [
                        format!("crate::{module}::{other}"),
                        format!("crate::internals::{module}::{other}"),
                    ];
                    let by_super = Some(format!("{up}{other}"));
                    if by_crate
                        .iter()
                        .chain(by_super.iter())
                        .any(|p| names(&code, p))
                    {
                        deps.insert(other.clone());
                    }
                }
            }
        }
        if let Some(cycle) = find_cycle(&graph) {
            panic!(
                "an import cycle in src/{}: {}",
                rel.join("/"),
                cycle.join(" -> ")
            );
        }
        checked += 1;
    }
    assert!(checked >= 8, "{checked} folders");
}

type Graph = BTreeMap<String, BTreeSet<String>>;

/// A cycle of `graph` as the modules along it, if there is one.
fn find_cycle(graph: &Graph) -> Option<Vec<String>> {
    // Depth-first search for a back edge (state 1: on the path, 2: done).
    fn visit(
        m: &str,
        graph: &Graph,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(2) => return None,
            Some(1) => {
                let at = path.iter().position(|p| p == m)?;
                let mut cycle = path[at..].to_vec();
                cycle.push(m.to_string());
                return Some(cycle);
            }
            _ => {}
        }
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for d in graph.get(m).into_iter().flatten() {
            if let Some(c) = visit(d, graph, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    graph
        .keys()
        .find_map(|m| visit(m, graph, &mut state, &mut Vec::new()))
}

#[test]
fn the_check_sees_a_cycle() {
    let g = |edges: &[(&str, &str)]| {
        let mut g = Graph::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert_eq!(find_cycle(&g(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
    let c = find_cycle(&g(&[("a", "b"), ("b", "c"), ("c", "a")])).unwrap();
    assert_eq!(c.first(), c.last());
    assert_eq!(c.len(), 4);
}

#[test]
fn the_parser_skips_comments_and_tests() {
    // Comments and test modules do not count, `crate::name` does.
    let code = code_of("use crate::read::X; // crate::write\n#[cfg(test)]\nuse crate::fs;");
    assert_eq!(referenced(&code), BTreeSet::from(["read".to_string()]));
}

/// docs/architecture.md names every source file (a file by its name, a
/// folder's `mod.rs` by the folder): whoever adds one says there what it
/// is for.
#[test]
fn the_architecture_doc_names_every_source_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let mut files = Vec::new();
    walk(&root.join("src"), &mut files);
    assert!(files.len() > 50, "only {} files under src/", files.len());
    let missing: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let name = f.file_name()?.to_str()?.to_string();
            let key = if name == "mod.rs" {
                format!("{}/", f.parent()?.file_name()?.to_str()?)
            } else {
                name
            };
            (!doc.contains(&key)).then(|| f.display().to_string())
        })
        .collect();
    assert!(
        missing.is_empty(),
        "not in docs/architecture.md: {missing:?}"
    );
}
