//! Lists the conformance cases: every `pub fn name(dev: &Device)` at the top of a
//! file in `src/cases/` is one. The files' modules, the list `cases::ALL` and the
//! macro that makes a `#[test]` of each case are written to `$OUT_DIR/cases.rs`,
//! so a new case file needs no line anywhere else.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("src/cases");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("src/cases")
        .map(|e| e.expect("src/cases entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs") && !p.ends_with("mod.rs"))
        .collect();
    files.sort();

    let (mut mods, mut names) = (String::new(), Vec::new());
    for path in &files {
        let stem = path.file_stem().unwrap().to_str().unwrap();
        let text = std::fs::read_to_string(path).expect("a case file");
        writeln!(
            mods,
            "#[path = {:?}]\nmod {stem};\npub use {stem}::*;",
            path.display()
        )
        .unwrap();
        for line in text.lines() {
            let Some(rest) = line.strip_prefix("pub fn ") else {
                continue;
            };
            let Some((name, args)) = rest.split_once('(') else {
                continue;
            };
            if args.starts_with("dev: &Device)") {
                names.push(name.to_string());
            }
        }
    }

    let list = names.join(",\n            ");
    let out = format!(
        "{mods}
/// Every case with its name (the same list as [`crate::conformance_tests!`]).
pub const ALL: &[Case] = &[{all}];

/// The one list of cases, shared by [`conformance_tests!`](crate::conformance_tests)
/// and [`ALL`], written by `build.rs` from the case files.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_case {{
    ($($args:tt)*) => {{
        $crate::__dispatch_cases! {{ [$($args)*]
            {list}
        }}
    }};
}}
",
        all = names
            .iter()
            .map(|n| format!("(\"{n}\", {n})"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    let target = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("cases.rs");
    std::fs::write(target, out).expect("write cases.rs");
}
