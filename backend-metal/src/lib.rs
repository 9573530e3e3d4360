//! wmx's native Metal backend.
//!
//! Kernels have one source of truth, the WGSL library of `wmx-kernels`: [`msl`]
//! translates every module to Metal Shading Language with naga, on every platform,
//! so the translation is tested on Linux. On Apple targets, `Metal` is the kernel
//! library's driver for Metal (shared-storage buffers: a GPU result is readable by
//! the CPU without a copy; one command buffer per batch), and `MetalBackend` is
//! wmx's GPU backend on it: the same planning, buffer states, pooling and batching
//! as the WebGPU backend, through `objc2-metal` instead of wgpu. `open` gives a
//! `wmx_core::Device`; the `wmx` facade registers it as `Device::metal()`.
//! Elsewhere the crate exposes the translation alone.

pub mod msl;

#[cfg(target_vendor = "apple")]
mod driver;
#[cfg(target_vendor = "apple")]
pub use driver::{Metal, MetalBuffer, MetalPipeline, NoTimestamps};

/// wmx's GPU backend on the native Metal driver.
#[cfg(target_vendor = "apple")]
pub type MetalBackend = wmx_webgpu::GpuBackend<Metal>;

/// Opens the system's default Metal device as a wmx [`wmx_core::Device`].
#[cfg(target_vendor = "apple")]
pub fn open() -> wmx_core::Result<wmx_core::Device> {
    let kernels = Metal::open().map_err(|e| wmx_core::Error::NoDevice(e.to_string()))?;
    Ok(wmx_core::Device::new(std::sync::Arc::new(
        MetalBackend::from_kernels(kernels),
    )))
}

/// Makes `Device::metal()` open this backend (the `wmx` facade calls it on Apple).
#[cfg(target_vendor = "apple")]
pub fn register() {
    wmx_core::register_metal_backend(open);
}
