//! Fused kernels ([`wmx_core::FusedKernel`], made by `wmx::compile`) translated to
//! the kernel library's [`k::FusedSpec`].

use crate::kdtype;
use wmx_core::{FusedKernel, FusedOp, Result};
use wmx_kernels as k;

/// The kernel library's form of `kernel`.
pub(crate) fn spec(kernel: &FusedKernel) -> Result<k::FusedSpec> {
    let inputs = kernel
        .inputs
        .iter()
        .map(|d| kdtype(*d))
        .collect::<Result<_>>()?;
    let steps = kernel
        .steps
        .iter()
        .map(|s| {
            Ok(k::FusedStep {
                op: match &s.op {
                    FusedOp::Unary(op) => k::FusedOp::Unary(op.name()),
                    FusedOp::Binary(op) => k::FusedOp::Binary(op.name()),
                    FusedOp::Select => k::FusedOp::Select,
                    FusedOp::Cast => k::FusedOp::Cast,
                    FusedOp::Axpby { alpha, beta } => {
                        k::FusedOp::Axpby((*alpha as f32).to_bits(), (*beta as f32).to_bits())
                    }
                    FusedOp::Const(v) => k::FusedOp::Const(v.to_bits()),
                },
                args: s.args.iter().map(|a| *a as u32).collect(),
                dtype: kdtype(s.dtype)?,
            })
        })
        .collect::<Result<_>>()?;
    Ok(k::FusedSpec { inputs, steps })
}
