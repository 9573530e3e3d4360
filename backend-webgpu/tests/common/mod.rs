//! Helpers of the WebGPU backend's integration tests.
#![allow(dead_code)] // each test file uses its own subset

use std::sync::Arc;
use wmx_core::Device;
use wmx_webgpu::WebGpuBackend;

/// A fresh backend per test, so its counters start at zero.
pub fn gpu() -> Option<(Device, Arc<WebGpuBackend>)> {
    let b = Arc::new(wmx_reference::gpu::opened(WebGpuBackend::new())?);
    Some((Device::new(b.clone()), b))
}

pub fn data(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as u32).wrapping_mul(2654435761) ^ seed) as f32 / u32::MAX as f32 - 0.5)
        .collect()
}
