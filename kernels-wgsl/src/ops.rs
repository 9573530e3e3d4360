//! Op tables: names per family, which dtypes each op is defined for, and which WGSL
//! function implements it. The WGSL functions are named `{op}_{f32|i32|u32}` in
//! `binary.wgsl`, `unary.wgsl` and `reduce.wgsl`.

use crate::dtype::{Ct, DType};
use crate::{Error, Result};

/// Binary op names, exactly as the core library's op tables spell them.
pub const BINARY_OPS: &[&str] = &[
    "add",
    "subtract",
    "multiply",
    "divide",
    "floor_divide",
    "remainder",
    "power",
    "maximum",
    "minimum",
    "arctan2",
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
    "logical_and",
    "logical_or",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
];

/// Unary op names.
pub const UNARY_OPS: &[&str] = &[
    "negative",
    "abs",
    "sign",
    "square",
    "sqrt",
    "rsqrt",
    "exp",
    "expm1",
    "log",
    "log1p",
    "log2",
    "sin",
    "cos",
    "tan",
    "tanh",
    "sigmoid",
    "erf",
    "erfinv",
    "floor",
    "ceil",
    "round",
    "logical_not",
    "isnan",
    "isinf",
];

/// Reduction op names ([`crate::Kernels::reduce`]).
pub const REDUCE_OPS: &[&str] = &["sum", "prod", "max", "min", "all", "any"];

/// Arg-reduction op names ([`crate::Kernels::arg_reduce`]); the output is `u32`.
pub const ARG_REDUCE_OPS: &[&str] = &["argmax", "argmin"];

pub(crate) fn lookup(
    table: &[&'static str],
    family: &'static str,
    op: &str,
) -> Result<&'static str> {
    table
        .iter()
        .copied()
        .find(|o| *o == op)
        .ok_or_else(|| Error::UnknownOp {
            family,
            op: op.to_string(),
        })
}

fn is_comparison(op: &str) -> bool {
    matches!(
        op,
        "equal" | "not_equal" | "less" | "less_equal" | "greater" | "greater_equal"
    )
}

/// True when the binary op's output is bool rather than the input dtype.
pub(crate) fn binary_outputs_bool(op: &str) -> bool {
    is_comparison(op) || matches!(op, "logical_and" | "logical_or")
}

/// Whether binary `op` is defined for inputs of `dtype` (unknown ops: false).
pub fn binary_op_supports(op: &str, dtype: DType) -> bool {
    match op {
        "add" | "subtract" | "multiply" | "floor_divide" | "remainder" | "power" => {
            dtype != DType::Bool
        }
        "divide" | "arctan2" => dtype.is_float(),
        "maximum" | "minimum" => true,
        "bitwise_and" | "bitwise_or" | "bitwise_xor" => !dtype.is_float(),
        o if is_comparison(o) => true,
        "logical_and" | "logical_or" => true,
        _ => false,
    }
}

fn unary_float_only(op: &str) -> bool {
    matches!(
        op,
        "sqrt"
            | "rsqrt"
            | "exp"
            | "expm1"
            | "log"
            | "log1p"
            | "log2"
            | "sin"
            | "cos"
            | "tan"
            | "tanh"
            | "sigmoid"
            | "erf"
            | "erfinv"
    )
}

/// True when the unary op's output is bool.
pub(crate) fn unary_outputs_bool(op: &str) -> bool {
    matches!(op, "logical_not" | "isnan" | "isinf")
}

/// Whether unary `op` is defined for `dtype` (float math needs a float dtype: the
/// caller promotes integers to f32 first).
pub fn unary_op_supports(op: &str, dtype: DType) -> bool {
    if !UNARY_OPS.contains(&op) {
        return false;
    }
    if unary_float_only(op) {
        return dtype.is_float();
    }
    if unary_outputs_bool(op) {
        return true;
    }
    // negative/abs/sign/square/floor/ceil/round: numbers, not bool.
    dtype != DType::Bool
}

/// Output dtype of reduction `op` on `input` (SEMANTICS.md reduction table); `None`
/// for an unknown op. Arg reductions give `U32`.
pub fn reduce_output_dtype(op: &str, input: DType) -> Option<DType> {
    Some(match op {
        "sum" | "prod" => match input {
            DType::Bool | DType::U8 | DType::U32 => DType::U32,
            d => d,
        },
        "max" | "min" => input,
        "all" | "any" => DType::Bool,
        "argmax" | "argmin" => DType::U32,
        _ => return None,
    })
}

/// The dtype a reduction accumulates in: f32 for float inputs, u32 0/1 for
/// `all`/`any`, else the 32-bit integer of the input's sign.
pub fn reduce_acc_dtype(op: &str, input: DType) -> Option<DType> {
    reduce_output_dtype(op, input)?;
    Some(if matches!(op, "all" | "any") {
        DType::U32
    } else {
        input.acc()
    })
}

/// WGSL expression for `op` applied to `a`/`b` (binary) producing the output compute
/// value. Comparisons and logical ops give u32 0/1 (bool output).
pub(crate) fn binary_expr(op: &str, ct: Ct) -> String {
    let f = format!("{op}_{}", ct.wgsl());
    if binary_outputs_bool(op) {
        format!("select(0u, 1u, {f}(a, b))")
    } else {
        format!("{f}(a, b)")
    }
}

/// WGSL expression for unary `op` applied to `a` of dtype `d`. f16/bf16 inputs use `{op}_narrow` where `unary.wgsl` defines one: a cheaper f32
/// function that is still accurate after rounding to the narrow type; bf16 inputs
/// `{op}_bf16` before that where defined (bf16 reaches f32's range).
pub(crate) fn unary_expr(op: &str, d: DType, unary_src: &str) -> String {
    let has = |f: &str| unary_src.contains(&format!("fn {f}("));
    let (bf16, narrow) = (format!("{op}_bf16"), format!("{op}_narrow"));
    let f = if d == DType::BF16 && has(&bf16) {
        bf16
    } else if matches!(d, DType::F16 | DType::BF16) && has(&narrow) {
        narrow
    } else {
        format!("{op}_{}", d.ct().wgsl())
    };
    if unary_outputs_bool(op) {
        format!("select(0u, 1u, {f}(a))")
    } else {
        format!("{f}(a)")
    }
}

/// WGSL expression casting input compute value `a` (of dtype `from`) to the output
/// compute value of dtype `to`, following the cast rules of SEMANTICS.md. The store
/// helper of `to` then packs it (rounding to f16/bf16, masking u8).
pub(crate) fn cast_expr(from: DType, to: DType) -> String {
    use DType::*;
    let e = match (from.ct(), to) {
        (Ct::F32, F32 | F16 | BF16) => "a",
        (Ct::F32, I32) => "f2i(a)",
        (Ct::F32, U32) => "f2u(a)",
        (Ct::F32, U8) => "min(f2u(a), 255u)",
        (Ct::F32, Bool) => "select(0u, 1u, nz_f(a))",
        (Ct::I32, F32) => "f32(a)",
        (Ct::I32, F16 | BF16) => "i2f_odd(a)",
        (Ct::I32, I32) => "a",
        (Ct::I32, U32 | U8) => "bitcast<u32>(a)",
        (Ct::I32, Bool) => "select(0u, 1u, a != 0i)",
        (Ct::U32, F32) => "f32(a)",
        (Ct::U32, F16 | BF16) => "u2f_odd(a)",
        (Ct::U32, I32) => "bitcast<i32>(a)",
        (Ct::U32, U32 | U8) => "a",
        (Ct::U32, Bool) => "select(0u, 1u, a != 0u)",
        // Never composed: compose refuses f64 (f64.rs casts it).
        (_, F64) => "a",
    };
    e.to_string()
}

/// Row operations of the `Norm` family (index = the kernel's `NORM_OP`).
pub const NORM_OPS: &[&str] = &["softmax", "log_softmax", "layer_norm", "rms_norm"];
