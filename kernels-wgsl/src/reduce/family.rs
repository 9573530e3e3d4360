//! The reduction families' modules (reductions, scans, arg reductions): their
//! checks, prelude lines and files.

use crate::compose::{Family, Io, ModuleSpec, Op, Target, Variant, check_out, wrong_op};
use crate::dtype::{Ct, DType, Words};
use crate::{Error, Result};
use std::fmt::Write;
use wmx_spec::{ArgReduceOp, ReduceOp};

pub(crate) const REDUCE_WGSL: &str = include_str!("reduce.wgsl");
const SCAN_WGSL: &str = include_str!("scan.wgsl");
const SCAN_VEC_WGSL: &str = include_str!("scan_vec.wgsl");

/// Declares the bits of ±inf for [`identity`]. WGSL forbids const-expressions
/// that evaluate to inf or NaN (browsers reject `bitcast<f32>(0xff800000u)`; naga
/// accepts it): a bitcast of a `let` is a runtime expression.
const INF_BITS: &str = "let ninf_bits = 0xff800000u; let pinf_bits = 0x7f800000u;";

fn identity(op: ReduceOp, ct: Ct) -> &'static str {
    use ReduceOp::*;
    match (op, ct) {
        (Sum, Ct::F32) => "0.0",
        (Sum, Ct::I32) => "0i",
        (Sum, Ct::U32) | (Any, _) => "0u",
        (Prod, Ct::F32) => "1.0",
        (Prod, Ct::I32) => "1i",
        (Prod, Ct::U32) | (All, _) => "1u",
        (Max, Ct::F32) => "bitcast<f32>(ninf_bits)",
        (Max, Ct::I32) => "(-2147483647i - 1i)",
        (Max, Ct::U32) => "0u",
        (Min, Ct::F32) => "bitcast<f32>(pinf_bits)",
        (Min, Ct::I32) => "2147483647i",
        (Min, Ct::U32) => "0xffffffffu",
    }
}

/// Word loads except in the vec4 variants, single-word stores, and the subgroup
/// directive where the target asks for it.
fn io(spec: &ModuleSpec) -> Io {
    let t = &spec.target;
    Io {
        enable: if t.subgroups && t.subgroup_directive {
            "enable subgroups;\n"
        } else {
            ""
        },
        store: false,
        out: if matches!(
            spec.variant,
            Variant::ScanBlocksVec | Variant::ScanTotalsVec
        ) {
            "array<vec4<u32>>"
        } else {
            "array<u32>"
        },
        ..Io::rows(spec)
    }
}

/// Reductions by a [`ReduceOp`] (and, with the scan variants, scans).
pub static REDUCE: Family = Family {
    name: "Reduce",
    arity: 1,
    takes: |s| match s.variant {
        Variant::ScanBlocks | Variant::ScanBlocksVec => s.inputs.len() == 1 || s.inputs.len() == 2,
        _ => s.inputs.len() == 1,
    },
    entry: |s| match s.variant {
        Variant::ScanLines => "scan_lines",
        Variant::ScanBlocks => "scan_blocks",
        Variant::ScanBlocksVec => "scan_blocks_v",
        Variant::ScanTotalsVec => "scan_totals_v",
        Variant::Rows => "reduce_rows",
        Variant::RowsVec => "reduce_rows_v",
        Variant::ColsVec => "reduce_cols_v",
        _ => "reduce_cols",
    },
    raw: |_| false,
    io,
    body: reduce_body,
    specs: reduce_specs,
};

fn reduce_body(spec: &ModuleSpec, p: &mut String) -> Result<Vec<&'static str>> {
    let Op::Reduce(op) = spec.op else {
        return Err(wrong_op(spec));
    };
    let d = spec.inputs[0];
    let acc = op.acc_dtype(d);
    // f32 accumulators may be stored rounded to f16/bf16: by the row kernels one
    // value per word (single-output reductions), by the column kernels two.
    let narrow = acc == DType::F32 && matches!(spec.output, DType::F16 | DType::BF16);
    if !narrow {
        check_out(spec, acc)?;
    }
    let a = acc.ct().wgsl();
    writeln!(p, "alias ACC = {a};").unwrap();
    writeln!(
        p,
        "fn acc_init() -> ACC {{ {INF_BITS} return {}; }}",
        identity(op, acc.ct())
    )
    .unwrap();
    let logical = matches!(op, ReduceOp::All | ReduceOp::Any);
    let load = match (logical, d.ct()) {
        (true, Ct::F32) => "select(0u, 1u, nz_f(a))",
        (true, Ct::I32) => "select(0u, 1u, a != 0i)",
        (true, Ct::U32) => "select(0u, 1u, a != 0u)",
        _ => "a",
    };
    writeln!(p, "fn acc_load(a: CA) -> ACC {{ return {load}; }}").unwrap();
    writeln!(
        p,
        "fn combine(a: ACC, b: ACC) -> ACC {{ return r{op}_{a}(a, b); }}"
    )
    .unwrap();
    // The column kernels store two narrow results to a word (`NARROW`).
    writeln!(p, "const NARROW: bool = {narrow};").unwrap();
    if narrow {
        writeln!(
            p,
            "fn st_acc(v: ACC) -> u32 {{ return st_{}(v); }}",
            spec.output.storage()
        )
        .unwrap();
    } else {
        writeln!(p, "fn st_acc(v: ACC) -> u32 {{ return bitcast<u32>(v); }}").unwrap();
    }
    let wg = if spec.target.subgroups {
        "wg_reduce_sg"
    } else {
        "wg_reduce_tree"
    };
    writeln!(
        p,
        "fn wg_reduce(v: ACC, lid: u32) -> ACC {{ return {wg}(v, lid); }}"
    )
    .unwrap();
    let mut files = vec![REDUCE_WGSL];
    let vec = matches!(
        spec.variant,
        Variant::ScanBlocksVec | Variant::ScanTotalsVec
    );
    if vec || matches!(spec.variant, Variant::ScanLines | Variant::ScanBlocks) {
        let carry = spec.inputs.get(1);
        if logical || narrow || carry.is_some_and(|&c| c != acc) || vec && d.epw() != 1 {
            return Err(Error::Shape(format!(
                "scans write {acc} accumulators of sum/prod/max/min and read {acc} carries (in vec4s: of 32-bit inputs), got {op} {:?} -> {}",
                spec.inputs, spec.output
            )));
        }
        if carry.is_none() {
            p.push_str("fn ld_b(i: u32) -> ACC { return acc_init(); } // no carries\n");
        }
        if vec {
            writeln!(p, "const SCAN_ITER: u32 = {}u;", super::scan::SCAN_ITER).unwrap();
            files.push(SCAN_VEC_WGSL);
        } else {
            files.push(SCAN_WGSL);
        }
    }
    Ok(files)
}

fn reduce_specs(t: Target) -> Vec<ModuleSpec> {
    let mut v = Vec::new();
    for d in DType::WORDS {
        for &op in ReduceOp::ALL {
            let acc = op.acc_dtype(d);
            for var in [
                Variant::Rows,
                Variant::Cols,
                Variant::RowsVec,
                Variant::ColsVec,
            ] {
                v.push(ModuleSpec::new(&REDUCE, op, vec![d], acc, var, t));
            }
            // f16/bf16 results stored by the final pass itself: single results
            // of the row kernels, any of the column kernels.
            if d.is_float() && d != DType::F32 && acc == DType::F32 {
                for (input, var) in [
                    (d, Variant::Rows),
                    (d, Variant::RowsVec),
                    (acc, Variant::RowsVec),
                    (d, Variant::Cols),
                    (d, Variant::ColsVec),
                    (acc, Variant::Cols),
                ] {
                    v.push(ModuleSpec::new(&REDUCE, op, vec![input], d, var, t));
                }
            }
        }
        let scans = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];
        for op in scans {
            let acc = d.acc();
            let (lines, blocks) = (Variant::ScanLines, Variant::ScanBlocks);
            v.push(ModuleSpec::new(&REDUCE, op, vec![d], acc, lines, t));
            v.push(ModuleSpec::new(&REDUCE, op, vec![d], acc, blocks, t));
            v.push(ModuleSpec::new(&REDUCE, op, vec![d, acc], acc, blocks, t));
            if d.epw() == 1 {
                let vec = Variant::ScanBlocksVec;
                v.push(ModuleSpec::new(&REDUCE, op, vec![d], acc, vec, t));
                v.push(ModuleSpec::new(&REDUCE, op, vec![d, acc], acc, vec, t));
                let totals = Variant::ScanTotalsVec;
                v.push(ModuleSpec::new(&REDUCE, op, vec![d], acc, totals, t));
            }
        }
    }
    v
}

/// Arg reductions by an [`ArgReduceOp`].
pub static ARG_REDUCE: Family = Family {
    name: "ArgReduce",
    arity: 1,
    takes: |s| s.inputs.len() == 1,
    entry: |s| match s.variant {
        Variant::Rows => "arg_rows",
        Variant::RowsVec => "arg_rows_v",
        _ => "arg_cols",
    },
    raw: |_| false,
    io,
    body: arg_body,
    specs: |t| {
        let mut v = Vec::new();
        for d in DType::WORDS {
            for &op in ArgReduceOp::ALL {
                for var in [Variant::Rows, Variant::Cols, Variant::RowsVec] {
                    v.push(ModuleSpec::new(
                        &ARG_REDUCE,
                        op,
                        vec![d],
                        DType::U32,
                        var,
                        t,
                    ));
                }
            }
        }
        v
    },
};

fn arg_body(spec: &ModuleSpec, p: &mut String) -> Result<Vec<&'static str>> {
    let Op::ArgReduce(op) = spec.op else {
        return Err(wrong_op(spec));
    };
    check_out(spec, DType::U32)?;
    let d = spec.inputs[0];
    let a = d.ct().wgsl();
    writeln!(p, "alias ACC = {a};").unwrap();
    let (id, cmp) = if op == ArgReduceOp::ArgMax {
        (identity(ReduceOp::Max, d.ct()), ">")
    } else {
        (identity(ReduceOp::Min, d.ct()), "<")
    };
    writeln!(
        p,
        "fn arg_init() -> AP {{ {INF_BITS} return AP({id}, 0xffffffffu); }}"
    )
    .unwrap();
    writeln!(
        p,
        "fn arg_better(a: ACC, b: ACC) -> bool {{ return b {cmp} a; }}"
    )
    .unwrap();
    let isnan = if d.is_float() { "isnan_f(v)" } else { "false" };
    writeln!(p, "fn acc_isnan(v: ACC) -> bool {{ return {isnan}; }}").unwrap();
    let wg = if spec.target.subgroups {
        "wg_arg_sg"
    } else {
        "wg_arg_tree"
    };
    writeln!(
        p,
        "fn wg_arg(v: AP, lid: u32) -> AP {{ return {wg}(v, lid); }}"
    )
    .unwrap();
    Ok(vec![REDUCE_WGSL])
}
