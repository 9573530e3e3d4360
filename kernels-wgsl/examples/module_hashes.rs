//! Prints every module the library composes (both reduction targets, and the f64
//! modules) with a hash of its WGSL: run it before and after a refactor and `diff`
//! the outputs to show the kernels did not change.
//!
//! `cargo run -p wmx-kernels --example module_hashes > after.txt`

use std::hash::{Hash, Hasher};
fn main() {
    let mut t = wmx_kernels::Target::default();
    let mut out = String::new();
    for sub in [false, true] {
        t.subgroups = sub;
        for spec in wmx_kernels::module_specs(t) {
            let src = wmx_kernels::compose(&spec).unwrap_or_else(|e| format!("ERR {e}"));
            let mut h = std::collections::hash_map::DefaultHasher::new();
            src.hash(&mut h);
            out.push_str(&format!(
                "{:?} {} {:?} {:?} {:?} {:016x}\n",
                spec.family,
                spec.op,
                spec.inputs,
                spec.output,
                spec.variant,
                h.finish()
            ));
        }
    }
    for (label, src, entry, _) in wmx_kernels::wide_modules(256) {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        src.hash(&mut h);
        out.push_str(&format!("wide {label} {entry} {:016x}\n", h.finish()));
    }
    print!("{out}");
}
