//! WGSL expressions for the ops of the elementwise families. The WGSL functions
//! are named `{op}_{f32|i32|u32}` in `binary.wgsl`, `unary.wgsl` and
//! `reduce.wgsl`, after [`wmx_spec`]'s op names.

use crate::dtype::{Ct, DType, Words};
use wmx_spec::{BinaryOp, UnaryOp};

/// WGSL expression for `op` applied to `a`/`b` (binary) producing the output compute
/// value. Comparisons and logical ops give u32 0/1 (bool output).
pub(crate) fn binary_expr(op: BinaryOp, ct: Ct) -> String {
    let f = format!("{op}_{}", ct.wgsl());
    if op.outputs_bool() {
        format!("select(0u, 1u, {f}(a, b))")
    } else {
        format!("{f}(a, b)")
    }
}

/// WGSL expression for unary `op` applied to `a` of dtype `d`. f16/bf16 inputs use `{op}_narrow` where `unary.wgsl` defines one: a cheaper f32
/// function that is still accurate after rounding to the narrow type; bf16 inputs
/// `{op}_bf16` before that where defined (bf16 reaches f32's range).
pub(crate) fn unary_expr(op: UnaryOp, d: DType, unary_src: &str) -> String {
    let has = |f: &str| unary_src.contains(&format!("fn {f}("));
    let (bf16, narrow) = (format!("{op}_bf16"), format!("{op}_narrow"));
    let f = if d == DType::BF16 && has(&bf16) {
        bf16
    } else if matches!(d, DType::F16 | DType::BF16) && has(&narrow) {
        narrow
    } else {
        format!("{op}_{}", d.ct().wgsl())
    };
    if op.outputs_bool() {
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
        // Never composed: compose refuses the 64-bit dtypes (wide/ casts them).
        (_, F64 | I64 | U64 | C64) => "a",
    };
    e.to_string()
}
