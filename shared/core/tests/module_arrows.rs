//! svc-core's top-level modules import each other one way only: the graph of
//! their `crate::` paths has no circle (docs/architecture.md, "The crates and
//! their arrows"). Read from the sources, so a new import that closes a circle
//! fails here, naming the files that make it.
//!
//! What counts as an import: every `crate::` path outside a comment, grouped
//! ones (`crate::{a, b}`) included, and a name the crate root re-exports
//! (`crate::Service`) as an import of the module it comes from. A path through
//! `super::` stays inside its top-level module (no top-level file reaches the
//! root that way).

#![expect(clippy::unwrap_used, reason = "a test should stop at the first surprise")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Who imports whom: module → imported module → where (`file:line`).
type Graph = BTreeMap<String, BTreeMap<String, Vec<String>>>;

#[test]
fn top_level_modules_import_each_other_one_way() {
    let graph = import_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    // The reading works: the arrows of the call path are found.
    for (from, to) in [("service", "ops"), ("ops", "store"), ("ops", "call"), ("store", "entitlements")] {
        assert!(
            graph.get(from).is_some_and(|imported| imported.contains_key(to)),
            "{from} → {to} not found: {graph:#?}"
        );
    }
    if let Some(circle) = circle(&graph) {
        let arrows: Vec<String> = circle
            .windows(2)
            .map(|pair| format!("{} → {} ({})", pair[0], pair[1], graph[&pair[0]][&pair[1]].join(", ")))
            .collect();
        panic!("svc-core's modules import each other in a circle:\n{}", arrows.join("\n"));
    }
}

#[test]
fn a_circle_is_found_and_named() {
    let graph: Graph =
        [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")].into_iter().fold(Graph::new(), |mut graph, (from, to)| {
            graph.entry(from.into()).or_default().insert(to.into(), vec![]);
            graph
        });
    assert_eq!(circle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    let mut one_way = graph;
    one_way.get_mut("c").unwrap().remove("a");
    assert_eq!(circle(&one_way), None);
}

#[test]
fn imports_are_read_from_paths_groups_and_re_exports() {
    let root = BTreeMap::from([("Service".to_owned(), "service".to_owned())]);
    let modules: BTreeSet<String> = ["ops", "store", "service", "error"].map(String::from).into();
    let text =
        "use crate::{error::Result, store,\n    ops::X};\n// crate::service in a comment\nlet s: crate::Service;";
    let found = imports(text, &modules, &root);
    let names: Vec<&str> = found.iter().map(|(module, _)| module.as_str()).collect();
    assert_eq!(names, ["error", "store", "ops", "service"]);
    assert_eq!(found.iter().map(|(_, line)| *line).collect::<Vec<_>>(), [1, 1, 2, 4]);
}

/// Every top-level module (declared in `lib.rs`) with the modules it imports.
fn import_graph(src: &Path) -> Graph {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let mut modules = BTreeSet::new();
    let mut root = BTreeMap::new();
    for line in lib.lines().map(str::trim) {
        let line = line.strip_prefix("pub ").unwrap_or(line);
        if let Some(name) = line.strip_prefix("mod ").and_then(|rest| rest.strip_suffix(';')) {
            modules.insert(name.to_owned());
        } else if let Some((module, names)) = line.strip_prefix("use ").and_then(|rest| rest.split_once("::")) {
            for name in names.trim_end_matches(';').trim_matches(['{', '}']).split(',') {
                root.insert(name.trim().to_owned(), module.to_owned());
            }
        }
    }
    assert!(modules.len() > 20, "the modules declared in lib.rs: {modules:?}");
    let mut graph = Graph::new();
    for module in &modules {
        let imported = graph.entry(module.clone()).or_default();
        for file in files_of(src, module) {
            let text = std::fs::read_to_string(&file).unwrap();
            let shown = file.strip_prefix(src).unwrap().display().to_string();
            for (to, line) in imports(&text, &modules, &root) {
                if &to != module {
                    imported.entry(to).or_default().push(format!("{shown}:{line}"));
                }
            }
        }
    }
    graph
}

/// `src/<module>.rs` and every file under `src/<module>/`.
fn files_of(src: &Path, module: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = [src.join(format!("{module}.rs"))].into_iter().filter(|f| f.exists()).collect();
    let mut folders = vec![src.join(module)];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for path in entries.map(|entry| entry.unwrap().path()) {
            if path.is_dir() {
                folders.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    assert!(!files.is_empty(), "no source of module {module}");
    files
}

/// The modules `text` imports through `crate::`, each with its line (1-based),
/// in order; lines that are comments are skipped.
fn imports(text: &str, modules: &BTreeSet<String>, root: &BTreeMap<String, String>) -> Vec<(String, usize)> {
    let code: String = text
        .lines()
        .map(|line| if line.trim_start().starts_with("//") { "" } else { line })
        .collect::<Vec<_>>()
        .join("\n");
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let resolve = |name: &str| {
        if modules.contains(name) { Some(name.to_owned()) } else { root.get(name).cloned() }
    };
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: `{a::b, c, d::{e, f}}`.
            let (mut depth, mut item_start) = (0, 0);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        found.extend(first_segment(&group[item_start..i]).and_then(resolve).map(|m| {
                            (m, line_of(at + "crate::{".len() + item_start + leading_space(&group[item_start..])))
                        }));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        found.extend(first_segment(&group[item_start..i]).and_then(resolve).map(|m| {
                            (m, line_of(at + "crate::{".len() + item_start + leading_space(&group[item_start..])))
                        }));
                        item_start = i + 1;
                    }
                    _ => {}
                }
            }
        } else if let Some(module) = first_segment(rest).and_then(resolve) {
            found.push((module, line_of(at)));
        }
    }
    found
}

fn first_segment(path: &str) -> Option<&str> {
    let path = path.trim_start();
    let end = path.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(path.len());
    (end > 0).then(|| &path[..end])
}

fn leading_space(text: &str) -> usize {
    text.len() - text.trim_start().len()
}

/// A circle of imports, as the modules along it (the first repeated last),
/// if there is one.
fn circle(graph: &Graph) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Seen {
        OnPath,
        Done,
    }
    fn visit(graph: &Graph, module: &str, seen: &mut BTreeMap<String, Seen>, path: &mut Vec<String>) -> bool {
        seen.insert(module.to_owned(), Seen::OnPath);
        path.push(module.to_owned());
        for next in graph.get(module).into_iter().flat_map(BTreeMap::keys) {
            match seen.get(next) {
                Some(Seen::OnPath) => {
                    let start = path.iter().position(|m| m == next).unwrap_or(0);
                    path.drain(..start);
                    path.push(next.clone());
                    return true;
                }
                Some(Seen::Done) => {}
                None => {
                    if visit(graph, next, seen, path) {
                        return true;
                    }
                }
            }
        }
        path.pop();
        seen.insert(module.to_owned(), Seen::Done);
        false
    }
    let mut seen = BTreeMap::new();
    for module in graph.keys() {
        let mut path = Vec::new();
        if !seen.contains_key(module) && visit(graph, module, &mut seen, &mut path) {
            return Some(path);
        }
    }
    None
}
