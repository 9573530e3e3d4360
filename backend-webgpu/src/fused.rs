//! Fused kernels ([`wmx_core::FusedKernel`], made by `wmx::compile`) as the kernel
//! library's [`k::FusedSpec`]: the steps are the same types on both sides.

use wmx_core::{FusedKernel, Result};
use wmx_kernels as k;

/// The kernel library's form of `kernel` (the library refuses the dtypes its
/// fused kernels lack).
pub(crate) fn spec(kernel: &FusedKernel) -> Result<k::FusedSpec> {
    Ok(k::FusedSpec {
        inputs: kernel.inputs.clone(),
        steps: kernel.steps.clone(),
        outputs: kernel.outputs.clone(),
    })
}
