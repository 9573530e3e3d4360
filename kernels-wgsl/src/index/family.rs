//! The indexing families' modules (concatenation's placement, gather, scatter):
//! their checks, prelude lines and files.

use crate::compose::{Family, Io, ModuleSpec, Op, Target, Variant, WORDS};
use crate::dtype::{DType, Words};
use crate::{Error, Result};
use std::fmt::Write;
use wmx_spec::ScatterOp;

const INDEX_WGSL: &str = include_str!("index.wgsl");
const SCATTER_WGSL: &str = include_str!("scatter.wgsl");
const SCATTER_CAS_WGSL: &str = include_str!("scatter_cas.wgsl");
const SCATTER_ADD_WGSL: &str = include_str!("scatter_add.wgsl");

/// Same-dtype modules move bits, not values.
fn same_dtype(spec: &ModuleSpec) -> bool {
    spec.inputs.first() == Some(&spec.output)
}

/// An indexing family: the general variant only, the op naming the entry point.
const fn indexing(
    name: &'static str,
    arity: usize,
    specs: fn(Target) -> Vec<ModuleSpec>,
) -> Family {
    Family {
        name,
        arity,
        takes: |s| s.inputs.len() == s.family.arity,
        entry: |s| s.op.name(),
        raw: same_dtype,
        io: Io::elementwise,
        body: |spec, p| {
            index_prelude(spec, p)?;
            Ok(vec![WORDS, INDEX_WGSL])
        },
        specs,
    }
}

/// Inputs of the `*4` placement kernels (several inputs of a concatenation in one
/// dispatch).
pub(crate) const PLACE_INPUTS: usize = 4;

/// One input written into its box of a concatenation's output, or (`place4`,
/// `place_flat4`) up to four at once (bits unchanged).
pub static PLACE: Family = Family {
    takes: |s| {
        let n = if s.op.name().ends_with('4') {
            PLACE_INPUTS
        } else {
            1
        };
        s.inputs.len() == n && s.inputs.iter().all(|d| *d == s.inputs[0])
    },
    ..indexing("Place", 1, |t| {
        let g = Variant::General;
        let mut v = Vec::new();
        for d in DType::WORDS {
            for op in ["place", "place_box", "place4", "place_flat4"] {
                // The box kernel writes whole words: 32-bit dtypes only.
                if op != "place_box" || d.epw() == 1 {
                    let n = if op.ends_with('4') { PLACE_INPUTS } else { 1 };
                    v.push(ModuleSpec::new(&PLACE, op, vec![d; n], d, g, t));
                }
            }
        }
        v
    })
};

/// `take_along_axis`: input x, then integer indices (bits unchanged).
pub static GATHER: Family = Family {
    entry: |_| "gather",
    ..indexing("Gather", 2, |t| {
        let g = Variant::General;
        let mut v = Vec::new();
        for d in DType::WORDS {
            for i in [DType::I32, DType::U32, DType::U8] {
                v.push(ModuleSpec::new(&GATHER, "gather", vec![d, i], d, g, t));
            }
        }
        v
    })
};

/// Set or add updates at indices along an axis: inputs indices and updates; the
/// output, already holding the base, is updated in place through atomics.
pub static SCATTER: Family = Family {
    entry: |_| "scatter",
    raw: |s| s.op == Op::Scatter(ScatterOp::Set) && s.inputs.get(1) == Some(&s.output),
    io: |s| Io {
        out: match atomic_add(s) {
            Some("f32") => "array<atomic<f32>>",
            _ => "array<atomic<u32>>",
        },
        ..Io::elementwise(s)
    },
    body: |spec, p| {
        index_prelude(spec, p)?;
        let merge = match atomic_add(spec) {
            Some(word) => {
                writeln!(p, "alias OW = {word};").unwrap();
                SCATTER_ADD_WGSL
            }
            None => SCATTER_CAS_WGSL,
        };
        Ok(vec![WORDS, INDEX_WGSL, SCATTER_WGSL, merge])
    },
    ..indexing("Scatter", 2, |t| {
        let g = Variant::General;
        let mut v = Vec::new();
        for d in DType::WORDS {
            for i in [DType::I32, DType::U32, DType::U8] {
                v.push(ModuleSpec::new(
                    &SCATTER,
                    ScatterOp::Set,
                    vec![i, d],
                    d,
                    g,
                    t,
                ));
                if d != DType::Bool {
                    v.push(ModuleSpec::new(
                        &SCATTER,
                        ScatterOp::Add,
                        vec![i, d],
                        d,
                        g,
                        t,
                    ));
                }
            }
        }
        v
    })
};

/// The scalar of the output's atomics where a scatter adds with one atomic add per
/// update: 32-bit integers always, f32 where the target has float atomics.
fn atomic_add(spec: &ModuleSpec) -> Option<&'static str> {
    if spec.op != Op::Scatter(ScatterOp::Add) {
        return None;
    }
    match spec.output {
        DType::I32 | DType::U32 => Some("u32"),
        DType::F32 if spec.target.atomic_f32 => Some("f32"),
        _ => None,
    }
}

/// Dtype checks of the indexing families and their helpers: `index_a`/`index_b`
/// (the index input's value made to count from the end when negative, `NO_INDEX`
/// outside the axis) and the scatter's `combine`.
fn index_prelude(spec: &ModuleSpec, p: &mut String) -> Result<()> {
    let ins = &spec.inputs;
    let raw = spec.raw_bits();
    let bad = |why: &str| {
        Err(Error::Shape(format!(
            "{:?} '{}' {why}, got {ins:?} -> {} ({:?})",
            spec.family, spec.op, spec.output, spec.variant
        )))
    };
    if spec.variant != Variant::General {
        return bad("has only the general variant");
    }
    let idx = match spec.family.name {
        "Place" if raw && matches!(spec.op.name(), "place" | "place4" | "place_flat4") => {
            return Ok(());
        }
        "Place" if raw && spec.op.name() == "place_box" && spec.output.epw() == 1 => {
            return Ok(());
        }
        "Place" => return bad("moves bits of one dtype"),
        "Gather" if !raw => return bad("moves bits of one dtype"),
        "Gather" => (1, ins[1]),
        _ => {
            let add = match spec.op {
                Op::Scatter(ScatterOp::Set) => false,
                Op::Scatter(ScatterOp::Add) => true,
                _ => return bad("combines by set or add"),
            };
            if ins[1] != spec.output || (add && spec.output == DType::Bool) {
                return bad("needs updates of the output's dtype (add: not bool)");
            }
            let e = if add {
                format!("st_o(ex_{}(w, j) + u)", spec.output.storage())
            } else {
                "st_o(u)".to_string()
            };
            writeln!(
                p,
                "fn combine(w: u32, j: u32, u: CB) -> u32 {{ return {e}; }}"
            )
            .unwrap();
            (0, ins[0])
        }
    };
    let l = ['a', 'b'][idx.0];
    let body = match idx.1 {
        DType::I32 => {
            let v = if raw {
                format!("bitcast<i32>(ld_{l}(p))")
            } else {
                format!("ld_{l}(p)")
            };
            format!(
                "let v = {v}; let k = select(v, v + i32(n), v < 0i); \
                 return select(NO_INDEX, u32(k), k >= 0i && u32(k) < n);"
            )
        }
        DType::U32 | DType::U8 => {
            format!("let v = ld_{l}(p); return select(NO_INDEX, v, v < n);")
        }
        _ => return bad("takes i32, u32 or u8 indices"),
    };
    writeln!(p, "fn index_{l}(p: u32, n: u32) -> u32 {{ {body} }}").unwrap();
    Ok(())
}
