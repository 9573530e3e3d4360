//! The user guide keeps up with the op tables: every elementwise op and every
//! reduction is named in `docs/guide.md`'s numpy → wmx table (the functions
//! themselves, their `Array` methods and the JavaScript API are generated from
//! the tables, so they cannot fall behind).

use wmx_core::{ArgReduceOp, BinaryOp, ReduceOp, UnaryOp};

fn guide_table() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/guide.md");
    let guide = std::fs::read_to_string(path).expect("docs/guide.md");
    let start = guide
        .find("## numpy to wmx")
        .expect("the numpy → wmx section");
    let section = &guide[start..];
    let end = section[3..].find("\n## ").map_or(section.len(), |e| e + 3);
    section[..end].to_string()
}

/// Whether `name` stands as a whole word (letters, digits, `_`) in `text`.
fn names(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(i, _)| {
        let word = |c: char| c.is_alphanumeric() || c == '_';
        let before = text[..i].chars().next_back().is_none_or(|c| !word(c));
        let after = text[i + name.len()..]
            .chars()
            .next()
            .is_none_or(|c| !word(c));
        before && after
    })
}

#[test]
fn the_guide_names_every_op() {
    let table = guide_table();
    let all = UnaryOp::ALL
        .iter()
        .map(|o| o.name())
        .chain(BinaryOp::ALL.iter().map(|o| o.name()))
        .chain(ReduceOp::ALL.iter().map(|o| o.name()))
        .chain(ArgReduceOp::ALL.iter().map(|o| o.name()));
    let missing: Vec<&str> = all.filter(|n| !names(&table, n)).collect();
    assert!(
        missing.is_empty(),
        "docs/guide.md's numpy → wmx table does not name {missing:?}"
    );
}

#[test]
fn whole_words_only() {
    assert!(names("`wmx::log1p`, `exp`", "exp"));
    assert!(!names("`expm1`", "exp"));
    assert!(!names("`floor_divide`", "floor"));
}
