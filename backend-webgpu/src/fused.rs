//! Fused kernels ([`wmx_core::FusedKernel`], made by `wmx::compile`) as the kernel
//! library's [`k::FusedSpec`]: the steps are the same types on both sides.

use crate::gpu_dtype;
use wmx_core::{FusedKernel, Result};
use wmx_kernels as k;

/// The kernel library's form of `kernel` (an `Err` for dtypes the GPU lacks).
pub(crate) fn spec(kernel: &FusedKernel) -> Result<k::FusedSpec> {
    for d in kernel
        .inputs
        .iter()
        .chain(kernel.steps.iter().map(|s| &s.dtype))
    {
        gpu_dtype(*d)?;
    }
    Ok(k::FusedSpec {
        inputs: kernel.inputs.clone(),
        steps: kernel.steps.clone(),
    })
}
