//! wmx's native Metal backend (work in progress, see README.md).
//!
//! Kernels have one source of truth, the WGSL library of `wmx-kernels`: [`msl`]
//! translates every composed module to Metal Shading Language with naga, on every
//! platform, so the translation is tested on Linux. On Apple targets, `MetalDevice`
//! compiles those translations, keeps shared-storage buffers (unified memory: a GPU
//! result is readable by the CPU without a copy) and runs batches of dispatches in
//! one command buffer. Elsewhere the crate exposes the translation alone.

pub mod msl;

#[cfg(target_vendor = "apple")]
mod device;
#[cfg(target_vendor = "apple")]
pub use device::{Dispatch, MetalBuffer, MetalDevice, Pipeline};
