//! No import cycles between the modules of any crate in the workspace.
//!
//! Each source file is a module. A `crate::…` or `super::…` path in it (in
//! `use` lines and in code, outside comments and its test module) is an
//! edge to the innermost module the path names. Re-exports (`pub use`) are
//! a facade, not a dependency, and do not count. A cycle fails the test
//! and is printed module by module; so does one between the crate's
//! top-level folders (each folder and everything in it as one module).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `["router", "link"]`; the crate root is `[]`.
type ModPath = Vec<String>;

/// Every `.rs` file under `src`, with its module path.
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).expect("under src");
            let mut parts: ModPath = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            // Binaries under src/bin are crates of their own.
            if parts.first().is_some_and(|p| p == "bin") {
                continue;
            }
            found.insert(parts, path);
        }
    }
    found
}

/// The code of a file without comments, re-export lines and its test module.
fn code(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            break;
        }
        if trimmed.starts_with("pub use") || trimmed.starts_with("pub(crate) use") {
            continue;
        }
        let line = line.split("//").next().unwrap_or("");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The paths that follow each `anchor` (`crate::` or `super::`) in `code`,
/// as segment lists; a brace group yields one path per item.
fn paths_after(code: &str, anchor: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(anchor) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + anchor.len()..];
        // `a::crate::` is not the crate root (and `super::super::` is read whole).
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            paths.extend(top_level_items(group).into_iter().map(segments));
        } else {
            paths.push(segments(rest));
        }
    }
    paths
}

/// The comma-separated items of a brace group up to its closing brace
/// (`a::B, c::{D, E}` → `a::B`, `c::{D, E}`).
fn top_level_items(group: &str) -> Vec<&str> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

/// `super::super::x` → the leading path segments of `text`.
fn segments(text: &str) -> Vec<String> {
    let text = text.trim_start();
    let end = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(text.len());
    text[..end]
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The module a path names: its longest prefix that is a module.
fn target(known: &BTreeMap<ModPath, PathBuf>, path: &[String]) -> Option<ModPath> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|prefix| known.contains_key(prefix))
}

/// Module → the modules it uses.
fn edges(known: &BTreeMap<ModPath, PathBuf>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut graph = BTreeMap::new();
    for (module, file) in known {
        let text = code(&std::fs::read_to_string(file).expect("read module"));
        let mut uses = BTreeSet::new();
        for path in paths_after(&text, "crate::") {
            uses.extend(target(known, &path));
        }
        for path in paths_after(&text, "super::") {
            // `super` of a file module is its parent; more `super`s go further up.
            let mut base = module.clone();
            base.pop();
            let mut rest = path.as_slice();
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            let full: Vec<String> = base.iter().cloned().chain(rest.iter().cloned()).collect();
            uses.extend(target(known, &full));
        }
        // Using a module's own items, or its parents' (a child needs the
        // items its parent defines), is no cycle between siblings.
        uses.retain(|u| !module.starts_with(u));
        graph.insert(module.clone(), uses);
    }
    graph
}

/// The same graph between the crate's top-level modules (a folder and all
/// it holds is one), so that two folders cannot lean on each other either.
fn top_level(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let top = |m: &ModPath| m.iter().take(1).cloned().collect::<ModPath>();
    let mut folded: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (module, uses) in graph {
        let from = top(module);
        let entry = folded.entry(from.clone()).or_default();
        entry.extend(
            uses.iter()
                .map(top)
                .filter(|to| *to != from && !to.is_empty()),
        );
    }
    folded
}

/// The groups of two or more modules that reach each other (Tarjan's
/// strongly connected components).
fn cycles(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct Search<'a> {
        graph: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'a ModPath, (usize, usize)>,
        stack: Vec<&'a ModPath>,
        next: usize,
        found: Vec<Vec<ModPath>>,
    }
    impl<'a> Search<'a> {
        fn visit(&mut self, node: &'a ModPath) {
            let mine = self.next;
            self.next += 1;
            self.index.insert(node, (mine, mine));
            self.stack.push(node);
            for next in self.graph.get(node).into_iter().flatten() {
                let low = match self.index.get(next) {
                    None => {
                        self.visit(next);
                        self.index[next].1
                    }
                    Some(&(index, _)) if self.stack.contains(&next) => index,
                    Some(_) => continue,
                };
                let entry = self.index.get_mut(node).expect("visited");
                entry.1 = entry.1.min(low);
            }
            if self.index[node].1 == mine {
                let at = self
                    .stack
                    .iter()
                    .rposition(|n| *n == node)
                    .expect("on stack");
                let group: Vec<ModPath> = self.stack.drain(at..).cloned().collect();
                if group.len() > 1 {
                    self.found.push(group);
                }
            }
        }
    }
    let mut search = Search {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for node in graph.keys() {
        if !search.index.contains_key(node) {
            search.visit(node);
        }
    }
    search.found
}

fn show(group: &[ModPath]) -> String {
    group
        .iter()
        .map(|m| m.join("::"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn no_crate_has_an_import_cycle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut problems = Vec::new();
    for krate in ["transport", "router-shim", "router-bpf", "sim", "examples"] {
        let known = modules(&root.join(krate).join("src"));
        assert!(known.len() > 3, "{krate}: no modules found");
        let graph = edges(&known);
        for group in cycles(&graph) {
            problems.push(format!("{krate}: {}", show(&group)));
        }
        for group in cycles(&top_level(&graph)) {
            problems.push(format!("{krate}, between folders: {}", show(&group)));
        }
    }
    assert!(
        problems.is_empty(),
        "modules that import each other:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_sees_a_cycle() {
    let mut graph = BTreeMap::new();
    let (a, b, c) = (
        vec!["a".to_owned()],
        vec!["b".to_owned()],
        vec!["c".to_owned()],
    );
    graph.insert(a.clone(), BTreeSet::from([b.clone()]));
    graph.insert(b.clone(), BTreeSet::from([a.clone()]));
    graph.insert(c.clone(), BTreeSet::from([a.clone()]));
    assert_eq!(cycles(&graph).len(), 1);
    graph.insert(b, BTreeSet::new());
    assert!(cycles(&graph).is_empty());
    // Paths in brace groups and after `super::` are read.
    let text = "use crate::{ecn::Ecn, signal::{Law, Mode}};\nlet x = super::meter::f();";
    assert_eq!(
        paths_after(text, "crate::"),
        vec![vec!["ecn", "Ecn"], vec!["signal"]]
            .into_iter()
            .map(|p| p.into_iter().map(str::to_owned).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    );
}
