//! The shim's library modules import each other without cycles, file by
//! file and group by group: `wire` at the bottom, then `link`, `observe`,
//! `io`, with `testbed` beside them. The check reads the sources: a
//! `crate::` or `super::` path outside comments and tests is an edge to
//! the deepest module it names, and a module's `mod` lines are edges to
//! its children (so importing a parent's re-export counts as importing the
//! parent).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Module path (`link::model`) → source text without its tests.
fn sources() -> BTreeMap<String, String> {
    fn walk(dir: &Path, prefix: &str, out: &mut BTreeMap<String, String>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            let join = |name: &str| {
                if prefix.is_empty() {
                    name.to_owned()
                } else {
                    format!("{prefix}::{name}")
                }
            };
            if path.is_dir() {
                walk(&path, &join(&name), out);
                continue;
            }
            // The library's root and the binary (main.rs, cli/) are not nodes.
            if prefix == "cli" || (prefix.is_empty() && (name == "lib" || name == "main")) {
                continue;
            }
            let module = if name == "mod" {
                prefix.to_owned()
            } else {
                join(&name)
            };
            let text = fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let code: Vec<&str> = code
                .lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .collect();
            out.insert(module, code.join("\n"));
        }
    }
    let mut out = BTreeMap::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        "",
        &mut out,
    );
    out
}

/// The module paths a `crate::` / `super::` path starting at `rest` names
/// (`a::{b::C, D}` names `a::b` and `a`), as segments after the prefix.
fn named_paths(rest: &str) -> Vec<Vec<String>> {
    let head: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
        .collect();
    let segments: Vec<String> = head
        .split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    let Some(group) = rest[head.len()..].strip_prefix('{') else {
        return vec![segments];
    };
    let group = &group[..group.find('}').unwrap_or(group.len())];
    let mut paths = vec![segments.clone()];
    for item in group.split(',') {
        let mut path = segments.clone();
        path.extend(item.trim().split("::").map(str::to_owned));
        paths.push(path);
    }
    paths
}

/// Module → the modules it imports or declares.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let sources = sources();
    let deepest_module = |segments: &[String]| {
        (1..=segments.len())
            .rev()
            .map(|n| segments[..n].join("::"))
            .find(|m| sources.contains_key(m))
    };
    let mut graph = BTreeMap::new();
    for (module, code) in &sources {
        let mut deps = BTreeSet::new();
        let own: Vec<String> = module.split("::").map(str::to_owned).collect();
        for (prefix, base) in [("crate::", &[][..]), ("super::", &own[..own.len() - 1])] {
            for (at, _) in code.match_indices(prefix) {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                    continue;
                }
                for path in named_paths(&code[at + prefix.len()..]) {
                    let full: Vec<String> = base.iter().cloned().chain(path).collect();
                    deps.extend(deepest_module(&full));
                }
            }
        }
        for line in code.lines() {
            let line = line.trim_start().trim_start_matches("pub ");
            if let Some(child) = line.strip_prefix("mod ") {
                deps.insert(format!("{module}::{}", child.trim_end_matches(';')));
            }
        }
        deps.remove(module);
        graph.insert(module.clone(), deps);
    }
    graph
}

/// The nodes that cannot be layered: those left once every node that
/// imports nothing left is peeled off, repeatedly. Empty if and only if
/// the graph has no cycle; else the cycles and the nodes above them.
fn unlayered(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeSet<String> {
    let mut left: BTreeSet<String> = graph.keys().cloned().collect();
    loop {
        let leaves: Vec<String> = left
            .iter()
            .filter(|m| graph[*m].iter().all(|d| !left.contains(d)))
            .cloned()
            .collect();
        if leaves.is_empty() {
            return left;
        }
        for leaf in leaves {
            left.remove(&leaf);
        }
    }
}

/// The graph of the top-level groups (`link`, `io`, ...).
fn groups(graph: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let group = |m: &str| m.split("::").next().unwrap().to_owned();
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, deps) in graph {
        let from = group(module);
        let to: Vec<String> = deps
            .iter()
            .map(|d| group(d))
            .filter(|g| *g != from)
            .collect();
        out.entry(from).or_default().extend(to);
    }
    out
}

#[test]
fn shim_modules_import_each_other_without_cycles() {
    let graph = graph();
    assert!(
        graph["io::relay"].contains("io::pump") && graph["link"].contains("link::model"),
        "the check reads imports and declarations: {graph:#?}"
    );
    let cyclic = unlayered(&graph);
    assert!(
        cyclic.is_empty(),
        "modules on or above import cycles: {cyclic:?}"
    );
    let groups = groups(&graph);
    let cyclic = unlayered(&groups);
    assert!(
        cyclic.is_empty(),
        "groups on or above import cycles: {cyclic:?}\n{groups:#?}"
    );
}

#[test]
fn the_check_finds_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(m, deps)| (m.to_owned(), deps.into_iter().map(str::to_owned).collect()))
    .collect();
    let cyclic: Vec<String> = unlayered(&graph).into_iter().collect();
    assert_eq!(cyclic, ["a", "b", "c", "d"]);
}
