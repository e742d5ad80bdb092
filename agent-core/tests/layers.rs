//! The folders of agent-core/src form layers: no folder imports, directly or through others,
//! a folder that imports it back (docs/architecture.md draws the order). An import cycle
//! between folders fails here, naming the files that close it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a line, without a `//` comment (doc comments included) at its end.
fn code(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

/// The folders a line names as `crate::<folder>`.
fn named_folders<'a>(line: &'a str, folders: &BTreeSet<String>) -> Vec<&'a str> {
    let mut found = Vec::new();
    let mut rest = code(line);
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let name: &str = rest
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .next()
            .unwrap_or("");
        if folders.contains(name) {
            found.push(name);
        }
    }
    found
}

/// Edges folder -> folder, each with the first place that makes it.
fn folder_graph(src: &Path) -> BTreeMap<String, BTreeMap<String, String>> {
    let folders: BTreeSet<String> = std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(folders.len() >= 5, "agent-core/src holds {folders:?}");
    let mut files = Vec::new();
    sources(src, &mut files);
    files.sort();
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap();
        let Some(from) = relative
            .components()
            .next()
            .filter(|_| relative.components().count() > 1)
        else {
            continue; // lib.rs
        };
        let from = from.as_os_str().to_string_lossy().into_owned();
        // Unit tests may reach anywhere; they are not part of the layering.
        if relative.ends_with("tests.rs") || relative.components().any(|c| c.as_os_str() == "tests")
        {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let mut in_tests = false;
        for (n, line) in text.lines().enumerate() {
            if line.starts_with("mod tests") || line.starts_with("#[cfg(test)]") {
                in_tests = true;
            }
            if in_tests {
                continue;
            }
            for to in named_folders(line, &folders) {
                if to != from {
                    graph
                        .entry(from.clone())
                        .or_default()
                        .entry(to.to_owned())
                        .or_insert_with(|| format!("{}:{}", relative.display(), n + 1));
                }
            }
        }
    }
    graph
}

/// A cycle through `start`, as the list of folders on it.
fn cycle_from(
    graph: &BTreeMap<String, BTreeMap<String, String>>,
    start: &str,
) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeMap<String, String>>,
        start: &str,
        at: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(at).into_iter().flat_map(|e| e.keys()) {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, start, next, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![start.to_owned()];
    let mut seen = BTreeSet::new();
    walk(graph, start, start, &mut path, &mut seen).then_some(path)
}

#[test]
fn folders_of_the_core_import_each_other_without_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = folder_graph(&src);
    assert!(
        !graph.is_empty(),
        "no imports between folders found: the scan is broken"
    );
    let mut problems = Vec::new();
    let mut reported = BTreeSet::new();
    for start in graph.keys() {
        if let Some(cycle) = cycle_from(&graph, start) {
            // One report per cycle, whichever folder it was found from.
            if !reported.insert(cycle.iter().cloned().collect::<BTreeSet<_>>()) {
                continue;
            }
            let mut hops = Vec::new();
            for (i, from) in cycle.iter().enumerate() {
                let to = &cycle[(i + 1) % cycle.len()];
                hops.push(format!("{from} -> {to} ({})", graph[from][to]));
            }
            problems.push(hops.join(", "));
        }
    }
    assert!(
        problems.is_empty(),
        "import cycles between agent-core folders:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    graph
        .entry("a".into())
        .or_default()
        .insert("b".into(), "a/x.rs:1".into());
    graph
        .entry("b".into())
        .or_default()
        .insert("c".into(), "b/y.rs:2".into());
    assert_eq!(cycle_from(&graph, "a"), None);
    graph
        .entry("c".into())
        .or_default()
        .insert("a".into(), "c/z.rs:3".into());
    assert_eq!(
        cycle_from(&graph, "a"),
        Some(vec!["a".to_owned(), "b".to_owned(), "c".to_owned()])
    );
    let folders = BTreeSet::from(["state".to_owned(), "host".to_owned()]);
    assert_eq!(
        named_folders(
            "use crate::state::history; // crate::host in a comment",
            &folders
        ),
        ["state"]
    );
}
