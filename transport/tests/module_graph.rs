//! The core's modules import each other without cycles: a scheme's module
//! depends on the shared pieces (signal, ecn, load, …), never the other way,
//! and the registry (`scheme`) and the link pieces (`router`, `bottleneck`)
//! sit on top. The check reads the sources: every `crate::module` path
//! outside comments and tests is an edge.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Module name → the core modules it names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules: BTreeSet<String> = fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".rs")
                .filter(|m| *m != "lib")
                .map(str::to_owned)
        })
        .collect();
    modules
        .iter()
        .map(|m| {
            let text = fs::read_to_string(dir.join(format!("{m}.rs"))).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let mut deps = BTreeSet::new();
            for line in code.lines() {
                let line = line.split("//").next().unwrap_or("");
                for (i, _) in line.match_indices("crate::") {
                    let rest = &line[i + "crate::".len()..];
                    // `crate::{a, b::c}` names several modules.
                    let names: Vec<&str> = match rest.strip_prefix('{') {
                        Some(group) => group.split(',').collect(),
                        None => vec![rest],
                    };
                    for name in names {
                        let name: String = name
                            .trim()
                            .chars()
                            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                            .collect();
                        if modules.contains(&name) && name != *m {
                            deps.insert(name);
                        }
                    }
                }
            }
            (m.clone(), deps)
        })
        .collect()
}

/// A cycle through `start`, if there is one.
fn cycle_from(
    graph: &BTreeMap<String, BTreeSet<String>>,
    start: &str,
    at: &str,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    for next in &graph[at] {
        if next == start {
            let mut cycle = path.clone();
            cycle.push(start.to_owned());
            return Some(cycle);
        }
        if !path.contains(next) {
            path.push(next.clone());
            if let Some(c) = cycle_from(graph, start, next, path) {
                return Some(c);
            }
            path.pop();
        }
    }
    None
}

#[test]
fn core_modules_import_each_other_without_cycles() {
    let graph = graph();
    assert!(graph["scheme"].contains("erc"), "the check reads imports");
    for module in graph.keys() {
        let mut path = vec![module.clone()];
        if let Some(cycle) = cycle_from(&graph, module, module, &mut path) {
            panic!("import cycle: {}", cycle.join(" -> "));
        }
    }
}
