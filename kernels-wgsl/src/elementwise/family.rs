//! The elementwise families' modules: their checks, prelude lines and files.

use crate::compose::{
    Family, InputMode, ModuleSpec, Op, Variant, WORDS, check_out, undefined, wrong_op,
};
use crate::dtype::{DType, Words};
use crate::ops;
use crate::{Error, Result};
use std::fmt::Write;
use wmx_spec::{BinaryOp, UnaryOp};

const ELEMENTWISE: &str = include_str!("elementwise.wgsl");
pub(crate) const BINARY_WGSL: &str = include_str!("binary.wgsl");
pub(crate) const UNARY_WGSL: &str = include_str!("unary.wgsl");
const COPY_WGSL: &str = include_str!("copy.wgsl");
const SLICE_UPDATE_WGSL: &str = include_str!("slice_update.wgsl");

use InputMode::*;
use Variant::Contig;

/// The variants of one-input modules.
const ONE: [Variant; 4] = [
    Contig([Scalar, Scalar, Scalar]),
    Contig([Vec4, Scalar, Scalar]),
    Contig([Elem, Scalar, Scalar]),
    Variant::General,
];

/// The variants of two-input modules.
const TWO: [Variant; 6] = [
    Contig([Scalar, Scalar, Scalar]),
    Contig([Scalar, Vec4, Scalar]),
    Contig([Vec4, Scalar, Scalar]),
    Contig([Vec4, Vec4, Scalar]),
    Contig([Elem, Elem, Scalar]),
    Variant::General,
];

/// The general variant's reads for `general_elem` (elementwise.wgsl): how many
/// inputs have offsets, and `op` applied to the elements at them.
fn strided(spec: &ModuleSpec, p: &mut String) {
    if spec.variant != Variant::General {
        return;
    }
    let call = match spec.family.arity {
        1 => "op(ld_a(pa))",
        2 => "op(ld_a(pa), ld_b(pb))",
        _ => "op(ld_a(pa), ld_b(pb), ld_c(pc))",
    };
    writeln!(
        p,
        "const ARITY: u32 = {}u;\nfn op_at(pa: u32, pb: u32, pc: u32) -> CO {{ return {call}; }}",
        spec.family.arity
    )
    .unwrap();
}

/// One input, a [`UnaryOp`].
pub static UNARY: Family = Family::elementwise("Unary", 1, unary_body, |t| {
    let mut v = Vec::new();
    for d in DType::WORDS {
        for &op in UnaryOp::ALL.iter().filter(|op| op.supports(d)) {
            let o = if op.outputs_bool() { DType::Bool } else { d };
            v.extend(ONE.map(|var| ModuleSpec::new(&UNARY, op, vec![d], o, var, t)));
        }
    }
    v
});

fn unary_body(spec: &ModuleSpec, p: &mut String) -> Result<Vec<&'static str>> {
    let Op::Unary(op) = spec.op else {
        return Err(wrong_op(spec));
    };
    let d = spec.inputs[0];
    if !op.supports(d) {
        return Err(undefined(spec, d));
    }
    let want = if op.outputs_bool() { DType::Bool } else { d };
    check_out(spec, want)?;
    writeln!(
        p,
        "fn op(a: CA) -> CO {{ return {}; }}",
        ops::unary_expr(op, d, UNARY_WGSL)
    )
    .unwrap();
    strided(spec, p);
    Ok(vec![WORDS, ELEMENTWISE, UNARY_WGSL])
}

/// Two inputs of one dtype, a [`BinaryOp`].
pub static BINARY: Family = Family::elementwise("Binary", 2, binary_body, |t| {
    let mut v = Vec::new();
    for d in DType::WORDS {
        for &op in BinaryOp::ALL.iter().filter(|op| op.supports(d)) {
            let o = if op.outputs_bool() { DType::Bool } else { d };
            v.extend(TWO.map(|var| ModuleSpec::new(&BINARY, op, vec![d, d], o, var, t)));
        }
    }
    v
});

fn binary_body(spec: &ModuleSpec, p: &mut String) -> Result<Vec<&'static str>> {
    let Op::Binary(op) = spec.op else {
        return Err(wrong_op(spec));
    };
    let d = spec.inputs[0];
    if spec.inputs[1] != d {
        return Err(Error::Shape(format!(
            "binary '{op}' needs equal input dtypes, got {} and {}",
            d, spec.inputs[1]
        )));
    }
    if !op.supports(d) {
        return Err(undefined(spec, d));
    }
    let want = if op.outputs_bool() { DType::Bool } else { d };
    check_out(spec, want)?;
    writeln!(
        p,
        "fn op(a: CA, b: CB) -> CO {{ return {}; }}",
        ops::binary_expr(op, d.ct())
    )
    .unwrap();
    strided(spec, p);
    Ok(vec![WORDS, ELEMENTWISE, BINARY_WGSL])
}

/// `alpha * x + beta * y` (float).
pub static AXPBY: Family = Family::elementwise(
    "Axpby",
    2,
    |spec, p| {
        let d = spec.inputs[0];
        if !d.is_float() || spec.inputs[1] != d {
            return Err(undefined(spec, d));
        }
        check_out(spec, d)?;
        p.push_str("fn op(a: CA, b: CB) -> CO { return axpby_f32(a, b); }\n");
        strided(spec, p);
        Ok(vec![WORDS, ELEMENTWISE, BINARY_WGSL])
    },
    |t| {
        let floats = DType::WORDS.into_iter().filter(|d| d.is_float());
        floats
            .flat_map(|d| {
                TWO.map(|var| ModuleSpec::new(&AXPBY, Op::Named("axpby"), vec![d, d], d, var, t))
            })
            .collect()
    },
);

/// `cond ? x : y`.
pub static SELECT: Family = Family::elementwise(
    "Select",
    3,
    |spec, p| {
        if spec.inputs[0] != DType::Bool || spec.inputs[1] != spec.inputs[2] {
            return Err(Error::Shape(format!(
                "select needs a bool condition and equal value dtypes, got {:?}",
                spec.inputs
            )));
        }
        check_out(spec, spec.inputs[1])?;
        p.push_str("fn op(a: CA, b: CB, c: CC) -> CO { return select(c, b, a != 0u); }\n");
        strided(spec, p);
        Ok(vec![WORDS, ELEMENTWISE])
    },
    |t| {
        let vars = [
            Contig([Vec4, Vec4, Vec4]),
            Contig([Scalar, Elem, Scalar]),
            Variant::General,
        ];
        let ins = |d| vec![DType::Bool, d, d];
        DType::WORDS
            .into_iter()
            .flat_map(|d| {
                vars.map(|var| ModuleSpec::new(&SELECT, Op::Named("select"), ins(d), d, var, t))
            })
            .collect()
    },
);

/// Same-dtype modules move bits, not values.
fn same_dtype(spec: &ModuleSpec) -> bool {
    spec.inputs.first() == Some(&spec.output)
}

/// Strided copy with cast.
pub static COPY: Family =
    Family {
        raw: same_dtype,
        ..Family::elementwise(
            "Copy",
            1,
            |spec, p| {
                let e = if spec.raw_bits() {
                    "a".to_string()
                } else {
                    ops::cast_expr(spec.inputs[0], spec.output)
                };
                writeln!(p, "fn op(a: CA) -> CO {{ return {e}; }}").unwrap();
                strided(spec, p);
                Ok(vec![WORDS, ELEMENTWISE])
            },
            |t| {
                let vars = [
                    Contig([Vec4, Scalar, Scalar]),
                    Contig([Elem, Scalar, Scalar]),
                    Variant::General,
                ];
                let mut v = Vec::new();
                for d in DType::WORDS {
                    for o in DType::WORDS {
                        v.extend(vars.map(|var| {
                            ModuleSpec::new(&COPY, Op::Named("copy"), vec![d], o, var, t)
                        }));
                    }
                }
                v
            },
        )
    };

/// A copy of the base (input 0) with the update (input 1) over a strided region.
pub static SLICE_UPDATE: Family = Family {
    raw: same_dtype,
    entry: |_| "general",
    ..Family::elementwise(
        "SliceUpdate",
        2,
        |spec, _| {
            if !spec.raw_bits() || spec.inputs[1] != spec.output {
                return Err(Error::Shape(format!(
                    "slice_update needs base, update and output of one dtype, got {:?} -> {}",
                    spec.inputs, spec.output
                )));
            }
            if spec.variant != Variant::General {
                return Err(Error::Shape(
                    "slice_update has only the general variant".into(),
                ));
            }
            Ok(vec![WORDS, SLICE_UPDATE_WGSL])
        },
        |t| {
            let g = Variant::General;
            let op = Op::Named("slice_update");
            DType::WORDS
                .into_iter()
                .map(|d| ModuleSpec::new(&SLICE_UPDATE, op, vec![d, d], d, g, t))
                .collect()
        },
    )
};

/// Every element one constant bit pattern.
pub static FILL: Family = Family {
    entry: |_| "fill",
    ..Family::elementwise(
        "Fill",
        0,
        |_, _| Ok(vec![WORDS, COPY_WGSL]),
        |t| {
            let var = Contig([Scalar; 3]);
            DType::WORDS
                .into_iter()
                .map(|d| ModuleSpec::new(&FILL, Op::Named("fill"), vec![], d, var, t))
                .collect()
        },
    )
};

/// `start + i * step`.
pub static ARANGE: Family = Family {
    entry: |_| "arange",
    ..Family::elementwise(
        "Arange",
        0,
        |spec, p| {
            let e = match spec.output {
                // step = P[3] + P[1] (hi + lo), so long ranges do not drift by i * (step - f32(step)).
                d if d.is_float() => {
                    "bitcast<f32>(P[2]) + (f32(i) * bitcast<f32>(P[3]) + f32(i) * bitcast<f32>(P[1]))"
                }
                DType::I32 => "bitcast<i32>(P[2]) + bitcast<i32>(i) * bitcast<i32>(P[3])",
                DType::Bool => {
                    "select(0u, 1u, (bitcast<i32>(P[2]) + bitcast<i32>(i) * bitcast<i32>(P[3])) != 0i)"
                }
                _ => "P[2] + i * P[3]",
            };
            writeln!(p, "fn arange_val(i: u32) -> CO {{ return {e}; }}").unwrap();
            Ok(vec![WORDS, COPY_WGSL])
        },
        |t| {
            let var = Contig([Scalar; 3]);
            DType::WORDS
                .into_iter()
                .map(|d| ModuleSpec::new(&ARANGE, Op::Named("arange"), vec![], d, var, t))
                .collect()
        },
    )
};
