//! No import cycles between the modules of any crate in the repository:
//! every target (library, binary, test, benchmark) of every workspace
//! package, and of the fuzz crate, which is a workspace of its own so that
//! `cargo fuzz` can build it. `cargo metadata` names the packages and
//! their targets' root files.
//!
//! A crate's modules are its root file and every file a `mod name;`
//! declaration reaches from it (a `#[path]` attribute followed), outside
//! comments and test-only items. A `crate::…` or `super::…` path in a
//! module (in `use` lines and in code) is an edge to the innermost module
//! the path names. Re-exports (`pub use`) are a facade, not a dependency,
//! and do not count. A cycle fails the test and is printed module by
//! module; so does one between the crate's top-level modules (each folder
//! and everything in it as one module).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A module's path inside its crate: `["router", "link"]`; the crate root is `[]`.
type ModPath = Vec<String>;

/// A crate: its package, its target's name and root file.
struct Krate {
    package: String,
    target: String,
    root: PathBuf,
}

/// The manifests whose packages are checked: the workspace's (all its
/// members) and the fuzz crate's.
const MANIFESTS: [&str; 2] = ["Cargo.toml", "fuzz/Cargo.toml"];

/// Every target of the packages of the manifest at `manifest`, as cargo
/// reads it.
fn crates(manifest: &Path) -> Vec<Krate> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .arg("--manifest-path")
        .arg(manifest)
        .output()
        .expect("run cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata for {}: {}",
        manifest.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata's JSON");
    let text = |v: &serde_json::Value| v.as_str().expect("a string").to_owned();
    let mut found = Vec::new();
    for package in metadata["packages"].as_array().expect("packages") {
        for target in package["targets"].as_array().expect("targets") {
            found.push(Krate {
                package: text(&package["name"]),
                target: text(&target["name"]),
                root: PathBuf::from(text(&target["src_path"])),
            });
        }
    }
    found
}

/// The modules of the crate whose root file is `root`, with their files.
fn modules(root: &Path) -> Result<BTreeMap<ModPath, PathBuf>, String> {
    let mut found = BTreeMap::new();
    let mut todo = vec![(ModPath::new(), root.to_path_buf())];
    while let Some((module, file)) = todo.pop() {
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let here = file.parent().expect("a file's directory");
        // A crate root's and a `mod.rs`'s children sit beside it; another
        // file's in the folder of its name.
        let children = if module.is_empty() || file.ends_with("mod.rs") {
            here.to_path_buf()
        } else {
            here.join(file.file_stem().expect("a file name"))
        };
        for (name, path) in declarations(&code(&text)) {
            let candidates = match path {
                Some(path) => vec![here.join(path)],
                None => vec![
                    children.join(format!("{name}.rs")),
                    children.join(&name).join("mod.rs"),
                ],
            };
            let child = candidates
                .into_iter()
                .find(|p| p.is_file())
                .ok_or_else(|| format!("{}: no file for `mod {name};`", file.display()))?;
            let mut path = module.clone();
            path.push(name);
            todo.push((path, child));
        }
        found.insert(module, file);
    }
    Ok(found)
}

/// The `mod name;` declarations of a module's code, each with its
/// `#[path]` if it has one (inline `mod name { … }` blocks are part of
/// their file's module).
fn declarations(code: &str) -> Vec<(String, Option<String>)> {
    let mut found = Vec::new();
    let mut path = None;
    for line in code.lines().map(str::trim) {
        if let Some(attribute) = line.strip_prefix("#[path") {
            path = attribute.split('"').nth(1).map(str::to_owned);
            continue;
        }
        let item = line
            .strip_prefix("pub")
            .map(|rest| match rest.strip_prefix('(') {
                Some(scope) => scope.split_once(')').map_or("", |(_, rest)| rest),
                None => rest,
            })
            .unwrap_or(line)
            .trim_start();
        let declared = item
            .strip_prefix("mod ")
            .and_then(|rest| rest.strip_suffix(';'))
            .map(|name| name.trim().to_owned());
        if let Some(name) = declared {
            found.push((name, path.take()));
        } else if !line.starts_with("#[") {
            path = None;
        }
    }
    found
}

/// The code of a file without comments, re-export lines and test-only
/// items (what follows `#[cfg(test)]`: one line to its `;`, or a block to
/// its closing brace).
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().map(|l| l.split("//").next().unwrap_or(""));
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            skip_item(&mut lines);
            continue;
        }
        if trimmed.starts_with("pub use") || trimmed.starts_with("pub(crate) use") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Consumes the lines of the item that comes next: up to a line ending in
/// `;` before any brace opens, or up to the brace that closes its block.
fn skip_item<'a>(lines: &mut impl Iterator<Item = &'a str>) {
    let mut depth = 0i64;
    let mut opened = false;
    for line in lines {
        for c in line.chars() {
            match c {
                '{' => {
                    depth += 1;
                    opened = true;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        let attribute = line.trim_start().starts_with("#[");
        if (opened && depth <= 0) || (!opened && !attribute && line.trim_end().ends_with(';')) {
            return;
        }
    }
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
    let mut packages = BTreeSet::new();
    for manifest in MANIFESTS {
        for krate in crates(&root.join(manifest)) {
            let name = format!("{} ({})", krate.package, krate.target);
            let known = match modules(&krate.root) {
                Ok(known) => known,
                Err(e) => {
                    problems.push(format!("{name}: {e}"));
                    continue;
                }
            };
            packages.insert(krate.package);
            let graph = edges(&known);
            for group in cycles(&graph) {
                problems.push(format!("{name}: {}", show(&group)));
            }
            for group in cycles(&top_level(&graph)) {
                problems.push(format!("{name}, between folders: {}", show(&group)));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "modules that import each other:\n{}",
        problems.join("\n")
    );
    for package in [
        "ecnq",
        "ecnq-shim",
        "ecnq-sim",
        "ecnq-charts",
        "ecnq-examples",
        "ecnq-e2e",
        "ecnq-interop",
        "ecnq-fuzz",
    ] {
        assert!(packages.contains(package), "{package} was not read");
    }
}

/// The module tree follows `mod` declarations into folders, through
/// `#[path]`, and past test-only modules; a binary's modules are its own.
#[test]
fn the_checker_reads_each_crates_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let names = |file: &str| -> BTreeSet<String> {
        let known = modules(&root.join(file)).expect("modules");
        known.keys().map(|m| m.join("::")).collect()
    };
    let core = names("transport/src/lib.rs");
    for module in [
        "router::bottleneck::codel",
        "schemes::erc::router::share",
        "quic",
    ] {
        assert!(core.contains(module), "{module} missing: {core:?}");
    }
    assert!(!core.contains("router::bottleneck::tests"), "a test module");
    assert!(names("tests/fuzz_smoke.rs").contains("targets"), "#[path]");
    let shim = names("router-shim/src/main.rs");
    assert!(shim.contains("cli::options"), "{shim:?}");
    assert!(!names("router-shim/src/lib.rs").contains("cli"));
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
