//! Core's op tables and the kernel library's agree: adding an op to one without the
//! other fails here (no GPU needed).

use wmx_core::{ArgReduceOp, BinaryOp, ReduceOp, UnaryOp};
use wmx_kernels::{ARG_REDUCE_OPS, BINARY_OPS, REDUCE_OPS, UNARY_OPS};

fn same(family: &str, core: Vec<&str>, kernels: &[&str]) {
    let mut a = core.clone();
    let mut b = kernels.to_vec();
    a.sort();
    b.sort();
    let missing: Vec<_> = a.iter().filter(|n| !b.contains(n)).collect();
    let extra: Vec<_> = b.iter().filter(|n| !a.contains(n)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{family}: ops without a WGSL kernel {missing:?}; kernels core does not know {extra:?}"
    );
}

#[test]
fn every_core_op_has_a_kernel() {
    same(
        "unary",
        UnaryOp::ALL.iter().map(|o| o.name()).collect(),
        UNARY_OPS,
    );
    same(
        "binary",
        BinaryOp::ALL.iter().map(|o| o.name()).collect(),
        BINARY_OPS,
    );
    same(
        "reduce",
        ReduceOp::ALL.iter().map(|o| o.name()).collect(),
        REDUCE_OPS,
    );
    same(
        "arg_reduce",
        ArgReduceOp::ALL.iter().map(|o| o.name()).collect(),
        ARG_REDUCE_OPS,
    );
}
