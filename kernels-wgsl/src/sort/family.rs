//! The sorting passes' modules (bitonic and radix argsort): their checks, prelude
//! lines and files.

use crate::compose::{Family, Io, ModuleSpec, Target, Variant};
use crate::dtype::{Ct, DType, Words};
use crate::{Error, Result};
use std::fmt::Write;

const SORT_WGSL: &str = include_str!("sort.wgsl");
const RADIX_WGSL: &str = include_str!("radix.wgsl");
const RADIX8_WGSL: &str = include_str!("radix8.wgsl");
const RADIX_KEYS_WGSL: &str = include_str!("radix_keys.wgsl");

/// Argsort passes; the op names the entry point (bitonic: `sort_init` reads the
/// input, `sort_global`/`sort_local` work in place on the pairs, `sort_finish`
/// reads the pairs; radix: `radix_hist`, `radix_scatter`, and with subgroups
/// `radix8_hist`, `radix8_scatter` on workgroups of [`Target::radix_wg`]).
pub static SORT: Family = Family {
    name: "Sort",
    arity: 1,
    takes: |s| s.inputs.len() <= 2,
    entry: |s| s.op.name(),
    raw: |_| false,
    io: |spec| Io {
        enable: if spec.op.name().starts_with("radix8") && spec.target.subgroup_directive {
            "enable subgroups;\n"
        } else {
            ""
        },
        ..Io::elementwise(spec)
    },
    body: sort_body,
    specs: |t| {
        let (g, u) = (Variant::General, DType::U32);
        let mut v = Vec::new();
        for d in DType::WORDS {
            if d == u {
                for op in ["sort_global", "sort_global2", "sort_local"] {
                    v.push(ModuleSpec::new(&SORT, op, vec![], d, g, t));
                }
                v.push(ModuleSpec::new(&SORT, "sort_finish", vec![d], d, g, t));
            }
            v.push(ModuleSpec::new(&SORT, "sort_init", vec![d], u, g, t));
            v.push(ModuleSpec::new(&SORT, "radix_hist", vec![d], u, g, t));
            v.push(ModuleSpec::new(&SORT, "radix_scatter", vec![d, u], u, g, t));
            if t.subgroups && t.radix_wg > 0 {
                let t8 = radix8_target(t);
                v.push(ModuleSpec::new(&SORT, "radix8_hist", vec![d], u, g, t8));
                v.push(ModuleSpec::new(
                    &SORT,
                    "radix8_scatter",
                    vec![d, u],
                    u,
                    g,
                    t8,
                ));
            }
        }
        v
    },
};

fn sort_body(spec: &ModuleSpec, p: &mut String) -> Result<Vec<&'static str>> {
    let ok = spec.output == DType::U32
        && spec.variant == Variant::General
        && match spec.op.name() {
            "sort_init" | "radix_hist" => spec.inputs.len() == 1,
            "radix_scatter" => spec.inputs.len() == 2 && spec.inputs[1] == DType::U32,
            "radix8_hist" | "radix8_scatter" => {
                spec.target.subgroups
                    && spec.target.radix_wg == spec.target.workgroup_size
                    && spec.inputs.len() == 1 + usize::from(spec.op.name() == "radix8_scatter")
                    && spec.inputs.get(1).is_none_or(|&d| d == DType::U32)
            }
            "sort_global" | "sort_global2" | "sort_local" => spec.inputs.is_empty(),
            "sort_finish" => spec.inputs[..] == [DType::U32],
            _ => false,
        };
    if !ok {
        return Err(Error::Shape(format!(
            "sort pass '{}' on {:?} -> {} ({:?})",
            spec.op, spec.inputs, spec.output, spec.variant
        )));
    }
    if spec.op.name() == "sort_init" || spec.op.name().starts_with("radix") {
        let key = match spec.inputs[0].ct() {
            // f16's own bits (exact: every f16 is an f32) make a 16-bit key, so
            // the radix sorts pass over 16 bits, not the 19 its f32 key spans;
            // NaN last, -0 as +0, sign-magnitude to an unsigned order as below.
            Ct::F32 if spec.inputs[0] == DType::F16 => {
                "let b = bitcast<u32>(v); if ((b & 0x7fffffffu) > 0x7f800000u) { return 0xffffu; } let h = st_f16(v) & 0xffffu; let c = select(h, 0u, h == 0x8000u); return select(c | 0x8000u, ~c & 0xffffu, (c & 0x8000u) != 0u);"
            }
            // NaN last (every NaN alike), -0 as +0, then sign-magnitude to
            // an unsigned order.
            Ct::F32 => {
                "let b = bitcast<u32>(v); if ((b & 0x7fffffffu) > 0x7f800000u) { return 0xffffffffu; } let c = select(b, 0u, b == 0x80000000u); return select(c | 0x80000000u, ~c, (c & 0x80000000u) != 0u);"
            }
            Ct::I32 => "return bitcast<u32>(v) ^ 0x80000000u;",
            Ct::U32 => "return v;",
        };
        writeln!(p, "fn sort_key(v: CA) -> u32 {{ {key} }}").unwrap();
    }
    Ok(match spec.op.name() {
        "radix8_hist" | "radix8_scatter" => vec![RADIX_KEYS_WGSL, RADIX8_WGSL],
        "radix_hist" | "radix_scatter" => vec![RADIX_KEYS_WGSL, RADIX_WGSL],
        _ => vec![SORT_WGSL],
    })
}

/// `t` with the 8-bit radix sort's workgroup size.
pub(crate) fn radix8_target(t: Target) -> Target {
    Target {
        workgroup_size: t.radix_wg,
        ..t
    }
}
