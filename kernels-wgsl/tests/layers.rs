//! The modules of `src/` (a file, or a family's folder) import only from their own
//! layer or below, in no circle:
//! the layer table in `src/lib.rs`'s docs, checked against every `crate::` path
//! outside comments (root re-exports are traced to the module they come from).

use std::collections::{BTreeMap, BTreeSet};

/// A module's code: `src/{name}.rs`, or every `.rs` file of the folder `src/{name}/`.
fn src(name: &str) -> String {
    let base = format!("{}/src/{name}", env!("CARGO_MANIFEST_DIR"));
    let read = |path: &std::path::Path| {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    };
    let file = std::path::PathBuf::from(format!("{base}.rs"));
    if file.exists() {
        return read(&file);
    }
    let mut files: Vec<_> = std::fs::read_dir(&base)
        .unwrap_or_else(|e| panic!("{base}: {e}"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{base} has no Rust files");
    files.iter().map(|p| read(p)).collect()
}

/// Module → layer, from the table in lib.rs.
fn layers(lib: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for line in lib.lines().filter_map(|l| l.strip_prefix("//! | ")) {
        let cells: Vec<&str> = line.split(" | ").collect();
        let Ok(layer) = cells[0].trim().parse::<usize>() else {
            continue;
        };
        for name in cells[1].split(',') {
            m.insert(name.trim().trim_matches('`').to_string(), layer);
        }
    }
    m
}

/// Root re-exports (`pub use module::{A, B}`) → the module.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let flat = lib.replace('\n', " ");
    for part in flat.split("pub use ").skip(1) {
        let item = &part[..part.find(';').unwrap()];
        let Some((module, names)) = item.split_once("::") else {
            continue;
        };
        for n in names
            .trim_matches(|c| c == '{' || c == '}' || c == ' ')
            .split(',')
        {
            let n = n.trim().split(" as ").last().unwrap().trim();
            if !n.is_empty() {
                m.insert(n.to_string(), module.trim().to_string());
            }
        }
    }
    m
}

/// The modules `code` names through `crate::` outside comments.
fn imports(
    code: &str,
    modules: &BTreeMap<String, usize>,
    roots: &BTreeMap<String, String>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        // `use crate::{a::X, b::Y}` names several.
        for piece in line.split("crate::").skip(1) {
            let pieces: Vec<&str> = if let Some(group) = piece.strip_prefix('{') {
                group.split(',').collect()
            } else {
                vec![piece]
            };
            for p in pieces {
                let name: String = p
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if modules.contains_key(&name) {
                    out.insert(name);
                } else if let Some(m) = roots.get(&name).filter(|m| modules.contains_key(*m)) {
                    out.insert(m.clone());
                }
            }
        }
    }
    out
}

#[test]
fn modules_import_only_downwards_and_in_no_circle() {
    let lib = src("lib");
    let layers = layers(&lib);
    let roots = reexports(&lib);
    let declared: BTreeSet<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect();
    let listed: BTreeSet<String> = layers.keys().cloned().collect();
    assert_eq!(
        declared, listed,
        "every module has a layer in lib.rs's table"
    );
    let mut graph = BTreeMap::new();
    let mut wrong = Vec::new();
    for (m, &layer) in &layers {
        let deps: BTreeSet<String> = imports(&src(m), &layers, &roots)
            .into_iter()
            .filter(|d| d != m)
            .collect();
        for d in &deps {
            if layers[d] > layer {
                wrong.push(format!(
                    "{m} (layer {layer}) imports {d} (layer {})",
                    layers[d]
                ));
            }
        }
        graph.insert(m.clone(), deps);
    }
    assert!(wrong.is_empty(), "imports from above: {wrong:#?}");
    // No circle: repeatedly remove modules that import nothing left.
    let mut left = graph.clone();
    while !left.is_empty() {
        let free: Vec<String> = left
            .iter()
            .filter(|(_, deps)| deps.iter().all(|d| !left.contains_key(d)))
            .map(|(m, _)| m.clone())
            .collect();
        assert!(
            !free.is_empty(),
            "a circle among {:?}",
            left.keys().collect::<Vec<_>>()
        );
        for m in free {
            left.remove(&m);
        }
    }
}

/// The check itself: an import from above and a circle are both found.
#[test]
fn the_check_sees_upward_imports() {
    let lib = "//! | 0 | `a` | x |\n//! | 1 | `b` | y |\npub use b::{Thing};\n";
    let layers = layers(lib);
    let roots = reexports(lib);
    assert_eq!(layers.get("b"), Some(&1));
    let deps = imports(
        "use crate::{b::X, Thing};\n// crate::a in a comment\n",
        &layers,
        &roots,
    );
    assert_eq!(deps.into_iter().collect::<Vec<_>>(), vec!["b".to_string()]);
}
