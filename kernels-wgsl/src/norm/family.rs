//! The row operations' modules (a [`NormOp`] over the last axis): their checks,
//! prelude lines and files.

use crate::compose::{Family, Io, ModuleSpec, Op, Variant, wrong_op};
use crate::dtype::DType;
use crate::elementwise::UNARY_WGSL;
use crate::{Error, Result};
use std::fmt::Write;
use wmx_spec::NormOp;

const NORM_WGSL: &str = include_str!("norm.wgsl");
const VJP_WGSL: &str = include_str!("vjp.wgsl");

/// Row operations over the last axis, a [`NormOp`] (input x, then the op's weight
/// and bias).
pub static NORM: Family = Family {
    name: "Norm",
    arity: 1,
    takes: |s| (1..=3).contains(&s.inputs.len()),
    entry: |s| match s.variant {
        Variant::RowsVec => "norm_rows_v",
        _ => "norm_rows",
    },
    raw: |_| false,
    // The vectorised row ops store a vec4 of words at a time.
    io: |s| Io {
        vec_of_words: true,
        out: if s.variant == Variant::RowsVec {
            "array<vec4<u32>>"
        } else {
            "array<u32>"
        },
        ..Io::rows(s)
    },
    body: norm_body,
    specs: |t| {
        let mut v = Vec::new();
        for d in DType::WORDS.into_iter().filter(|d| d.is_float()) {
            for &op in NormOp::ALL {
                for out in [d, DType::F32] {
                    for var in [Variant::Rows, Variant::RowsVec] {
                        v.push(ModuleSpec::new(&NORM, op, vec![d; op.arity()], out, var, t));
                    }
                }
            }
        }
        v
    },
};

fn norm_body(spec: &ModuleSpec, p: &mut String) -> Result<Vec<&'static str>> {
    let Op::Norm(op) = spec.op else {
        return Err(wrong_op(spec));
    };
    let k = op as u32;
    let d = spec.inputs[0];
    let params = op.arity() - 1;
    if !d.is_float()
        || spec.inputs.len() != 1 + params
        || spec.inputs.iter().any(|&p| p != d)
        || !(spec.output == d || spec.output == DType::F32)
        || !matches!(spec.variant, Variant::Rows | Variant::RowsVec)
    {
        return Err(Error::Shape(format!(
            "{} needs x and {params} parameters of one float dtype and the rows variant, got {:?} -> {} ({:?})",
            spec.op, spec.inputs, spec.output, spec.variant
        )));
    }
    writeln!(p, "const NORM_OP: u32 = {k}u;").unwrap();
    p.push_str(match params {
        0 => "fn ld_w(i: u32) -> f32 { return 1.0; }\nfn ld_b2(i: u32) -> f32 { return 0.0; }\n",
        1 => "fn ld_w(i: u32) -> f32 { return ld_b(i); }\nfn ld_b2(i: u32) -> f32 { return 0.0; }\n",
        _ => "fn ld_w(i: u32) -> f32 { return ld_b(i); }\nfn ld_b2(i: u32) -> f32 { return ld_c(i); }\n",
    });
    // vec4-of-words loads of weight and bias, and word / vec4 stores, for
    // either declaration of O.
    if spec.variant == Variant::RowsVec {
        p.push_str(match params {
            0 => "fn vw(q: u32) -> vec4<u32> { return vec4<u32>(0u); }\nfn vb2(q: u32) -> vec4<u32> { return vec4<u32>(0u); }\n",
            1 => "fn vw(q: u32) -> vec4<u32> { return vb(q); }\nfn vb2(q: u32) -> vec4<u32> { return vec4<u32>(0u); }\n",
            _ => "fn vw(q: u32) -> vec4<u32> { return vb(q); }\nfn vb2(q: u32) -> vec4<u32> { return vc(q); }\n",
        });
        p.push_str("fn nr_store(w: u32, v: u32) { O[w >> 2u][w & 3u] = v; }\nfn nr_store4(q: u32, v: vec4<u32>) { O[q] = v; }\n");
    } else {
        p.push_str("fn vw(q: u32) -> vec4<u32> { return vec4<u32>(0u); }\nfn vb2(q: u32) -> vec4<u32> { return vec4<u32>(0u); }\n");
        p.push_str("fn nr_store(w: u32, v: u32) { O[w] = v; }\nfn nr_store4(q: u32, v: vec4<u32>) { for (var i = 0u; i < 4u; i++) { O[4u * q + i] = v[i]; } }\n");
    }
    Ok(vec![NORM_WGSL, UNARY_WGSL])
}

/// The vjp of layer_norm and rms_norm over the last axis (inputs x, the weight
/// and dy; output `[1 or 2, ..x]`: dx, then dy xhat), `vjp.wgsl`.
pub static NORM_VJP: Family = Family {
    name: "NormVjp",
    arity: 3,
    takes: |s| s.inputs.len() == 3,
    entry: |_| "norm_vjp_rows",
    raw: |_| false,
    io: Io::rows,
    body: vjp_body,
    specs: |t| {
        let mut v = Vec::new();
        for d in DType::WORDS.into_iter().filter(|d| d.is_float()) {
            for op in [NormOp::LayerNorm, NormOp::RmsNorm] {
                for out in [d, DType::F32] {
                    v.push(ModuleSpec::new(
                        &NORM_VJP,
                        op,
                        vec![d; 3],
                        out,
                        Variant::Rows,
                        t,
                    ));
                }
            }
        }
        v
    },
};

fn vjp_body(spec: &ModuleSpec, p: &mut String) -> Result<Vec<&'static str>> {
    let Op::Norm(op @ (NormOp::LayerNorm | NormOp::RmsNorm)) = spec.op else {
        return Err(wrong_op(spec));
    };
    let d = spec.inputs[0];
    if !d.is_float()
        || spec.inputs.iter().any(|&p| p != d)
        || !(spec.output == d || spec.output == DType::F32)
        || spec.variant != Variant::Rows
    {
        return Err(Error::Shape(format!(
            "the vjp of {op} needs x, the weight and dy of one float dtype and the rows \
             variant, got {:?} -> {} ({:?})",
            spec.inputs, spec.output, spec.variant
        )));
    }
    writeln!(p, "const NORM_OP: u32 = {}u;", op as u32).unwrap();
    Ok(vec![VJP_WGSL, NORM_WGSL, UNARY_WGSL])
}
